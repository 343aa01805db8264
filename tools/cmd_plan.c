/* aliasguard plan: runs the compile pipeline, then plans the static memory
 * of the result (docs/plan.md): per arena size, lower bound and ratio, or
 * the whole plan as JSON; optionally the placement problem as MiniMalloc
 * CSV.  Every plan passes the independent checker before it is printed. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "aliasguard/plan.h"
#include "cli.h"

typedef struct plan_state {
    bool json;
    ag_plan_opts opts;
    const char *csv;
} plan_state;

void cmd_plan_help(FILE *f)
{
    fputs("usage: aliasguard plan [options] INPUT\n"
          "\n"
          "Reads INPUT, runs the compile pipeline ('aliasguard check') and plans its\n"
          "static memory: every tensor gets a region (one arena per memory type, user\n"
          "input, user output, constant) and an offset.  Prints per arena its size,\n"
          "the lower bound (largest total alive at one step) and their ratio, then\n"
          "the in-place candidates the layout engine refused and notes on what the\n"
          "plan left undone.  The plan is checked independently before it is printed.\n"
          "\n"
          "Exit status: 0 success, 2 on a usage or input error (a tensor of unknown\n"
          "size, a plan the checker rejects).\n"
          "\n"
          "Options:\n"
          "  --json                   print the plan as one JSON object\n"
          "  --align N                offset alignment in bytes, a power of two (512)\n"
          "  --effort SECONDS         extra placement search time per arena (0)\n"
          "  --effort-nodes N         placement search nodes per arena (20000); the\n"
          "                           plan depends on this budget, not on the clock\n"
          "  --capacity BYTES         fail when an arena needs more (0: unlimited)\n"
          "  --no-inplace             do not merge in-place outputs into their inputs\n"
          "  --no-zero-copy           copy graph inputs and outputs into the arena\n"
          "  --emit-csv FILE          write the hbm arena's placement problem as a\n"
          "                           MiniMalloc CSV (id,lower,upper,size); other\n"
          "                           arenas go to FILE.<memory type>\n"
          "  -o, --output FILE        write the report to FILE instead of standard output\n"
          "  -h, --help               show this help\n",
          f);
    cli_help_load_opts(f);
}

static int plan_option(cli_args *a, void *state)
{
    plan_state *ps = state;
    const char *v;
    int r;
    if (cli_opt_flag(a, "--json", NULL)) {
        ps->json = true;
        return 1;
    }
    if (cli_opt_flag(a, "--no-inplace", NULL)) {
        ps->opts.inplace = false;
        return 1;
    }
    if (cli_opt_flag(a, "--no-zero-copy", NULL)) {
        ps->opts.zero_copy = false;
        return 1;
    }
    if ((r = cli_opt_value(a, "--align", NULL, &v)) != 0) {
        if (r < 0 || !cli_parse_u64("plan", "--align", v, &ps->opts.align))
            return -1;
        if (ps->opts.align == 0 || (ps->opts.align & (ps->opts.align - 1))) {
            cli_usage_error("plan", "--align %s: not a power of two", v);
            return -1;
        }
        return 1;
    }
    if ((r = cli_opt_value(a, "--capacity", NULL, &v)) != 0)
        return r < 0 || !cli_parse_u64("plan", "--capacity", v, &ps->opts.capacity) ? -1 : 1;
    if ((r = cli_opt_value(a, "--effort", NULL, &v)) != 0) {
        if (r < 0)
            return -1;
        char *end;
        double e = strtod(v, &end);
        if (*v == '\0' || *end != '\0' || !(e >= 0) || e > 3600) {
            cli_usage_error("plan", "--effort %s: not a number of seconds between 0 and 3600", v);
            return -1;
        }
        ps->opts.effort_seconds = e;
        return 1;
    }
    if ((r = cli_opt_value(a, "--effort-nodes", NULL, &v)) != 0)
        return r < 0 || !cli_parse_u64("plan", "--effort-nodes", v, &ps->opts.effort_nodes) ? -1 : 1;
    if ((r = cli_opt_value(a, "--emit-csv", NULL, &v)) != 0) {
        if (r < 0)
            return -1;
        ps->csv = v;
        return 1;
    }
    return 0;
}

typedef struct plan_job {
    const ag_plan *p;
    bool json;
    uint32_t arena;
} plan_job;

static double ratio(uint64_t size, uint64_t lb)
{
    return lb ? (double)size / (double)lb : 1.0;
}

/* One formatted line of any length. */
static ag_status put_line(ag_sink sink, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static ag_status put_line(ag_sink sink, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return AG_EINVAL;
    char *buf = malloc((size_t)n + 1);
    if (!buf)
        return AG_ENOMEM;
    va_start(ap, fmt);
    vsnprintf(buf, (size_t)n + 1, fmt, ap);
    va_end(ap);
    ag_status st = sink.write(sink.ud, buf, (size_t)n);
    free(buf);
    return st;
}

static ag_status plan_write(void *ud, ag_sink sink)
{
    const plan_job *j = ud;
    const ag_plan *p = j->p;
    if (j->json)
        return ag_plan_write_json(p, sink);
    char line[256];
    ag_status st = AG_OK;
    for (uint32_t k = 0; k < ag_plan_arena_count(p) && st == AG_OK; k++) {
        int n = snprintf(line, sizeof line, "arena %s: %llu bytes, lower bound %llu (ratio %.3f)\n",
                         ag_mem_type_name(ag_plan_arena_mem_type(p, k)),
                         (unsigned long long)ag_plan_arena_size(p, k),
                         (unsigned long long)ag_plan_arena_lower_bound(p, k),
                         ratio(ag_plan_arena_size(p, k), ag_plan_arena_lower_bound(p, k)));
        st = sink.write(sink.ud, line, (size_t)n);
    }
    uint32_t per[AG_REGION_COUNT_] = {0};
    for (uint32_t k = 0; k < ag_plan_buffer_count(p); k++)
        per[ag_plan_buffer_region(p, k)]++;
    if (st == AG_OK) {
        int n = snprintf(line, sizeof line,
                         "peak: %llu bytes, lower bound %llu (ratio %.3f)\n"
                         "tensors: %u, buffers: %u (arena %u, user input %u, user output %u, constant %u), "
                         "in-place: %u\n",
                         (unsigned long long)ag_plan_peak_bytes(p), (unsigned long long)ag_plan_lower_bound_bytes(p),
                         ratio(ag_plan_peak_bytes(p), ag_plan_lower_bound_bytes(p)), ag_plan_tensor_count(p),
                         ag_plan_buffer_count(p), per[AG_REGION_ARENA], per[AG_REGION_USER_INPUT],
                         per[AG_REGION_USER_OUTPUT], per[AG_REGION_CONST], ag_plan_inplace_count(p));
        st = sink.write(sink.ud, line, (size_t)n);
    }
    for (uint32_t k = 0; k < ag_plan_inplace_refused_count(p) && st == AG_OK; k++) {
        const ag_plan_inplace_rec *r = ag_plan_inplace_refused_at(p, k);
        st = put_line(sink, "in-place refused: node '%s' output %u over input %u: %s\n", r->node, r->output,
                      r->input, r->reason);
    }
    for (uint32_t k = 0; k < ag_plan_note_count(p) && st == AG_OK; k++)
        st = put_line(sink, "note: %s\n", ag_plan_note_at(p, k));
    return st;
}

static ag_status csv_write(void *ud, ag_sink sink)
{
    const plan_job *j = ud;
    return ag_plan_write_csv(j->p, j->arena, sink);
}

static int emit_csv(ag_ctx *ctx, const ag_plan *p, const char *path)
{
    for (uint32_t k = 0; k < ag_plan_arena_count(p); k++) {
        plan_job j = {p, false, k};
        ag_mem_type mt = ag_plan_arena_mem_type(p, k);
        size_t len = strlen(path) + strlen(ag_mem_type_name(mt)) + 2;
        char *name = malloc(len);
        if (name && mt == AG_MEM_HBM)
            snprintf(name, len, "%s", path);
        else if (name)
            snprintf(name, len, "%s.%s", path, ag_mem_type_name(mt));
        if (!name) {
            cli_err("out of memory");
            return CLI_EXIT_USAGE;
        }
        int rc = cli_write_output(ctx, name, csv_write, &j);
        free(name);
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    return CLI_EXIT_OK;
}

static int plan_run(ag_ctx *ctx, ag_graph *g, cli_load_info *info, const char *input, const char *output,
                    const cli_load_opts *lo, void *state)
{
    (void)lo;
    plan_state *ps = state;
    ag_pass_env env;
    if (!cli_pass_env(ctx, g, info, input, &env))
        return CLI_EXIT_USAGE;
    ag_plan *p = NULL;
    ag_status st = ag_pipeline_run(&env);
    if (st == AG_OK)
        st = ag_plan_build(ctx, g, env.ops, &ps->opts, &p);
    if (st == AG_OK)
        st = ag_plan_check(p);
    int rc = CLI_EXIT_USAGE;
    if (st != AG_OK) {
        cli_err_ctx(ctx, st, input);
    } else {
        plan_job j = {p, ps->json, 0};
        rc = cli_write_output(ctx, output, plan_write, &j);
        if (rc == CLI_EXIT_OK && ps->csv)
            rc = emit_csv(ctx, p, ps->csv);
    }
    ag_plan_destroy(p);
    ag_report_destroy(env.report);
    return rc;
}

int cmd_plan(int argc, char **argv)
{
    static const cli_graph_cmd cmd = {"plan", cmd_plan_help, plan_option, plan_run, true};
    plan_state ps = {false, ag_plan_defaults(), NULL};
    return cli_graph_command(&cmd, &ps, argc, argv);
}
