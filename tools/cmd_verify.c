/* aliasguard verify: compiles a graph (the pipeline, optionally without some
 * passes), plans it (optionally without in-place merging, or naively with a
 * buffer per symbol) and executes the plan's memory effects over many
 * schedules (docs/verify.md).  Exit 0 clean, 1 violations, 2 errors. */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "aliasguard/plan.h"
#include "aliasguard/verify.h"
#include "cli.h"

typedef struct verify_state {
    bool json;
    bool naive;
    ag_plan_opts plan;
    ag_verify_opts vo;
    const char **disabled;
    uint32_t ndisabled;
    bool progress;
} verify_state;

void cmd_verify_help(FILE *f)
{
    fputs("usage: aliasguard verify [options] INPUT\n"
          "\n"
          "Reads INPUT, runs the compile pipeline and plans memory ('aliasguard plan'),\n"
          "then executes the memory effects of the result: every write stamps its\n"
          "bytes with a value, every read checks that its bytes still hold the value\n"
          "it expects.  Runs many legal schedules: nodes spread over streams (their\n"
          "_stream_id, else at random), FIFO within a stream, data, control and\n"
          "memory-reuse order respected; both branches of every If/Case, While loops\n"
          "0 to 3 times.  A violation prints its kind (stale read, constant clobbered,\n"
          "atomic not cleared, out of arena, unpinned fixed address), the two anchors,\n"
          "the byte range and the seed and schedule that replay it (--replay).\n"
          "\n"
          "Exit status: 0 clean, 1 violations found, 2 on a usage or input error.\n"
          "\n"
          "Options:\n"
          "  --schedules N            schedules to run (64)\n"
          "  --streams S              streams for nodes without _stream_id (4, at most 64)\n"
          "  --seed X                 seed of the schedules (1)\n"
          "  --replay K               run only schedule K of the seed\n"
          "  --disable-pass P         compile without pass P (repeatable, or P1,P2,...)\n"
          "  --no-inplace             plan without in-place merging\n"
          "  --naive                  give every buffer bytes of its own (no reuse)\n"
          "  --no-zero-copy           copy graph inputs and outputs into the arena\n"
          "  --inplace-hints          execute _inplace_support_input_index hints in place\n"
          "  --max-violations N       distinct violations to report (16)\n"
          "  --json                   print one JSON object instead of text\n"
          "  -o, --output FILE        write the report to FILE instead of standard output\n"
          "  -h, --help               show this help\n",
          f);
    cli_help_load_opts(f);
}

static bool parse_u32(const char *opt, const char *v, uint32_t *out, uint32_t lo, uint32_t hi)
{
    uint64_t x;
    if (!cli_parse_u64("verify", opt, v, &x))
        return false;
    if (x < lo || x > hi) {
        cli_usage_error("verify", "%s %s: expected %u to %u", opt, v, lo, hi);
        return false;
    }
    *out = (uint32_t)x;
    return true;
}

/* Each name is its own allocation, freed when the command ends. */
static int add_disabled(verify_state *vs, const char *list)
{
    for (const char *p = list;;) {
        size_t n = strcspn(p, ",");
        char *name = strndup(p, n);
        const char **nd = name ? realloc(vs->disabled, (vs->ndisabled + 1) * sizeof *nd) : NULL;
        if (!nd) {
            free(name);
            cli_err("out of memory");
            return -1;
        }
        vs->disabled = nd;
        vs->disabled[vs->ndisabled++] = name;
        if (!ag_pass_find(name)) {
            cli_usage_error("verify", "--disable-pass: unknown pass '%s' (see 'aliasguard passes')", name);
            return -1;
        }
        if (p[n] == '\0')
            return 1;
        p += n + 1;
    }
}

static int verify_option(cli_args *a, void *state)
{
    verify_state *vs = state;
    const char *v;
    int r;
    uint64_t x;
    if (cli_opt_flag(a, "--json", NULL))
        return vs->json = true, 1;
    if (cli_opt_flag(a, "--no-inplace", NULL))
        return vs->plan.inplace = false, 1;
    if (cli_opt_flag(a, "--naive", NULL))
        return vs->naive = true, 1;
    if (cli_opt_flag(a, "--no-zero-copy", NULL))
        return vs->plan.zero_copy = false, 1;
    if (cli_opt_flag(a, "--inplace-hints", NULL))
        return vs->vo.inplace_hints = true, 1;
    if ((r = cli_opt_value(a, "--schedules", NULL, &v)) != 0)
        return r < 0 || !parse_u32("--schedules", v, &vs->vo.schedules, 1, 100000000) ? -1 : 1;
    if ((r = cli_opt_value(a, "--streams", NULL, &v)) != 0)
        return r < 0 || !parse_u32("--streams", v, &vs->vo.streams, 1, 64) ? -1 : 1;
    if ((r = cli_opt_value(a, "--max-violations", NULL, &v)) != 0)
        return r < 0 || !parse_u32("--max-violations", v, &vs->vo.max_violations, 1, 100000) ? -1 : 1;
    if ((r = cli_opt_value(a, "--seed", NULL, &v)) != 0)
        return r < 0 || !cli_parse_u64("verify", "--seed", v, &vs->vo.seed) ? -1 : 1;
    if ((r = cli_opt_value(a, "--replay", NULL, &v)) != 0) {
        if (r < 0 || !cli_parse_u64("verify", "--replay", v, &x))
            return -1;
        if (x > UINT32_MAX)
            return cli_usage_error("verify", "--replay %s: too large", v), -1;
        vs->vo.replay = (int64_t)x;
        return 1;
    }
    if ((r = cli_opt_value(a, "--disable-pass", NULL, &v)) != 0)
        return r < 0 ? -1 : add_disabled(vs, v);
    return 0;
}

static void progress(void *ud, uint32_t done, uint32_t total)
{
    (void)ud;
    if (done == total || done % 16 == 0)
        fprintf(stderr, "\rverify: schedule %u/%u", done, total);
    if (done == total)
        fputc('\n', stderr);
}

typedef struct verify_job {
    const verify_state *vs;
    const ag_verify_result *r;
    double ms;
} verify_job;

static ag_status write_text(FILE *m, const void *ud)
{
    const verify_job *j = ud;
    const ag_verify_result *r = j->r;
    uint32_t nv = ag_verify_violation_count(r);
    for (uint32_t k = 0; k < nv; k++) {
        const ag_verify_violation *v = ag_verify_violation_at(r, k);
        fprintf(m, "%s\n", v->message);
    }
    fprintf(m, "verify: %u schedule%s on %u stream%s (seed %llu): %s",
            ag_verify_schedules_run(r), ag_verify_schedules_run(r) == 1 ? "" : "s", j->vs->vo.streams,
            j->vs->vo.streams == 1 ? "" : "s", (unsigned long long)ag_verify_seed(r), nv ? "" : "clean");
    if (nv)
        fprintf(m, "%u violation%s", nv, nv == 1 ? "" : "s");
    fprintf(m, "\n");
    return AG_OK;
}

static ag_status write_json(FILE *m, const void *ud)
{
    const verify_job *j = ud;
    const ag_verify_result *r = j->r;
    json_t *root = json_object(), *arr = json_array();
    if (!root || !arr) {
        json_decref(root);
        json_decref(arr);
        return AG_ENOMEM;
    }
    json_object_set_new(root, "schedules", json_integer(ag_verify_schedules_run(r)));
    json_object_set_new(root, "streams", json_integer(j->vs->vo.streams));
    json_object_set_new(root, "seed", json_integer((json_int_t)ag_verify_seed(r)));
    json_object_set_new(root, "nodes_executed", json_integer((json_int_t)ag_verify_nodes_executed(r)));
    json_object_set_new(root, "seconds", json_real(j->ms / 1e3));
    json_object_set_new(root, "clean", json_boolean(ag_verify_violation_count(r) == 0));
    for (uint32_t k = 0; k < ag_verify_violation_count(r); k++) {
        const ag_verify_violation *v = ag_verify_violation_at(r, k);
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:s}", "kind", ag_verify_kind_name(v->kind),
                              "reader", v->reader, "writer", v->writer, "space", v->space, "offset",
                              (json_int_t)v->offset, "size", (json_int_t)v->size, "seed", (json_int_t)v->seed,
                              "schedule", (json_int_t)v->schedule, "message", v->message);
        if (o)
            json_array_append_new(arr, o);
    }
    json_object_set_new(root, "violations", arr);
    int rc = json_dumpf(root, m, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    fputc('\n', m);
    json_decref(root);
    return rc == 0 ? AG_OK : AG_ENOMEM;
}

static ag_status verify_write(void *ud, ag_sink sink)
{
    const verify_job *j = ud;
    return cli_sink_formatted(sink, j->vs->json ? write_json : write_text, ud);
}

static int verify_run(ag_ctx *ctx, ag_graph *g, cli_load_info *info, const char *input, const char *output,
                      const cli_load_opts *lo, void *state)
{
    (void)lo;
    verify_state *vs = state;
    ag_pass_env env;
    if (!cli_pass_env(ctx, g, info, input, &env))
        return CLI_EXIT_USAGE;
    ag_pipeline_opts po = {sizeof po, vs->disabled, vs->ndisabled};
    ag_plan *p = NULL;
    ag_verify_layout *l = NULL;
    ag_verify_result *r = NULL;
    ag_status st = ag_pipeline_run_opts(&env, &po);
    if (st == AG_OK)
        st = ag_plan_build(ctx, g, env.ops, &vs->plan, &p);
    if (st == AG_OK)
        st = ag_verify_layout_from_plan(ctx, g, p, vs->naive, &l);
    if (vs->progress) {
        vs->vo.progress = progress;
        vs->vo.progress_ud = NULL;
    }
    double t0 = cli_now_ms();
    if (st == AG_OK)
        st = ag_verify_layout_run(ctx, g, env.ops, l, &vs->vo, &r);
    int rc = CLI_EXIT_USAGE;
    if (st != AG_OK) {
        cli_err_ctx(ctx, st, input);
    } else {
        verify_job j = {vs, r, cli_now_ms() - t0};
        rc = cli_write_output(ctx, output, verify_write, &j);
        if (rc == CLI_EXIT_OK && ag_verify_violation_count(r))
            rc = CLI_EXIT_FINDINGS;
    }
    ag_verify_result_destroy(r);
    ag_verify_layout_destroy(l);
    ag_plan_destroy(p);
    ag_report_destroy(env.report);
    return rc;
}

int cmd_verify(int argc, char **argv)
{
    static const cli_graph_cmd cmd = {"verify", cmd_verify_help, verify_option, verify_run, true};
    verify_state vs;
    memset(&vs, 0, sizeof vs);
    vs.plan = ag_plan_defaults();
    vs.vo = ag_verify_defaults();
    vs.progress = isatty(STDERR_FILENO) != 0;
    int rc = cli_graph_command(&cmd, &vs, argc, argv);
    for (uint32_t k = 0; k < vs.ndisabled; k++)
        free((char *)vs.disabled[k]);
    free(vs.disabled);
    return rc;
}
