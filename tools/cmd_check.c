/* aliasguard check: runs the whole compile pipeline over a graph and reports
 * what it had to change (isolations) and what it warns about, as text or as
 * one JSON object (schema: docs/cli.md and README "check --json schema").
 * The exit status says whether the graph needed anything: 0 no, 1 yes. */

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "aliasguard/plan.h"
#include "cli.h"

typedef struct check_state {
    bool json;
    bool explain;
} check_state;

void cmd_check_help(FILE *f)
{
    fputs("usage: aliasguard check [options] INPUT\n"
          "\n"
          "Reads INPUT (an ONNX model or a .agt file, '-' for standard input), runs\n"
          "every compile pass in pipeline order ('aliasguard passes') and reports the\n"
          "isolations the passes had to insert (copies and control edges, each with\n"
          "the rule that required it) and their warnings.  The text output lists the\n"
          "warnings, then 'isolations: N', 'warnings: M' and the isolations per pass.\n"
          "Lint runs first and last (phases 'before' and 'after'); its warnings read\n"
          "'INPUT: warning W18888: before: graph 'G': no control relation between\n"
          "write node \"A\" ... and read node \"B\" ...', and count as findings.\n"
          "\n"
          "Exit status: 0 when the graph needed no isolation and raised no warning,\n"
          "1 when it did (findings), 2 on a usage or input error.\n"
          "\n"
          "Options:\n"
          "  --explain                also list each isolation: 'isolation: pass=P\n"
          "                           rule=\"R\" kind=K graph=G node=N producer=A:I\n"
          "                           consumer=B:J'\n"
          "  --json                   print one JSON object instead of text\n"
          "  -o, --output FILE        write the report to FILE instead of standard output\n"
          "  -h, --help               show this help\n",
          f);
    cli_help_load_opts(f);
}

static int check_option(cli_args *a, void *state)
{
    check_state *cs = state;
    if (cli_opt_flag(a, "--json", NULL)) {
        cs->json = true;
        return 1;
    }
    if (cli_opt_flag(a, "--explain", NULL)) {
        cs->explain = true;
        return 1;
    }
    return 0;
}

/* ---- counts ---- */

typedef struct pass_counts {
    uint32_t isolations;
    uint32_t warnings;
} pass_counts;

/* Per registered pass, in pipeline order; entries of names the registry does
 * not know (a pass recording under another name) are not counted here. */
static void count_by_pass(const ag_report *r, pass_counts *pc)
{
    for (uint32_t k = 0; k < ag_report_isolation_count(r); k++) {
        const ag_pass_def *d = ag_pass_find(ag_report_isolation_at(r, k)->pass);
        if (d)
            pc[d - ag_pass_at(0)].isolations++;
    }
    for (uint32_t k = 0; k < ag_report_warning_count(r); k++) {
        const ag_pass_def *d = ag_pass_find(ag_report_warning_at(r, k)->pass);
        if (d)
            pc[d - ag_pass_at(0)].warnings++;
    }
}

/* ---- text ---- */

/* Writes s with bytes that would break the line (or confuse a terminal) as
 * \xHH, so one warning stays one line whatever the node names hold. */
static void put_line_text(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
}

static double plan_ratio(const ag_plan *p)
{
    uint64_t lb = ag_plan_lower_bound_bytes(p);
    return lb ? (double)ag_plan_peak_bytes(p) / (double)lb : 1.0;
}

/* The memory plan of the checked graph (docs/plan.md), in one line. */
static void print_plan_text(FILE *f, const ag_plan *p, ag_status plan_st)
{
    if (!p) {
        fprintf(f, "plan: not available (%s)\n", ag_status_str(plan_st));
        return;
    }
    fprintf(f, "plan: peak %llu bytes, lower bound %llu (ratio %.3f)\n", (unsigned long long)ag_plan_peak_bytes(p),
            (unsigned long long)ag_plan_lower_bound_bytes(p), plan_ratio(p));
}

static void print_text(FILE *f, const char *input, const ag_report *r, const pass_counts *pc, bool explain)
{
    fprintf(f, "input: %s\n", input);
    if (explain)
        for (uint32_t k = 0; k < ag_report_isolation_count(r); k++)
            cli_print_isolation(f, "", ag_report_isolation_at(r, k));
    for (uint32_t k = 0; k < ag_report_warning_count(r); k++) {
        const ag_warning *w = ag_report_warning_at(r, k);
        /* Lint findings read like a compiler's: "FILE: warning CODE: message". */
        if (strcmp(w->pass, "lint") == 0) {
            put_line_text(f, input);
            fputs(": warning ", f);
            put_line_text(f, w->code);
            fputs(": ", f);
            put_line_text(f, w->message);
            fputc('\n', f);
        } else
            cli_print_warning(f, "", w);
    }
    fprintf(f, "isolations: %u\n", ag_report_isolation_count(r));
    fprintf(f, "warnings: %u\n", ag_report_warning_count(r));
    fputs("by pass:", f);
    for (uint32_t k = 0; k < ag_pass_count(); k++)
        fprintf(f, " %s=%u", ag_pass_at(k)->name, pc[k].isolations);
    fputc('\n', f);
}

/* ---- JSON ---- */

/* Length of the valid UTF-8 sequence at p (0 if invalid). */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    unsigned cp = c & (0x7fu >> len);
    for (size_t k = 1; k < len; k++) {
        if ((p[k] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[k] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* A JSON string of s; bytes that are not UTF-8 (names imported from ONNX are
 * raw bytes) become '?', since JSON text must be UTF-8.  NULL on OOM. */
static json_t *jstr(const char *s)
{
    if (!s)
        s = "";
    size_t n = strlen(s);
    char *clean = malloc(n + 1);
    if (!clean)
        return NULL;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t k = 0; k < n;) {
        size_t len = utf8_len(p + k, n - k);
        if (len == 0) {
            clean[k++] = '?';
        } else {
            memcpy(clean + k, s + k, len);
            k += len;
        }
    }
    json_t *j = json_stringn(clean, n);
    free(clean);
    return j;
}

/* Setters that remember the first failure in *ok (set_new/append_new
 * release the value when they fail, and accept NULL as a failure). */
static void jset(json_t *obj, const char *key, json_t *val, bool *ok)
{
    if (!obj) {
        json_decref(val);
        *ok = false;
    } else if (json_object_set_new(obj, key, val) != 0) {
        *ok = false;
    }
}

static void jpush(json_t *arr, json_t *val, bool *ok)
{
    if (!arr) {
        json_decref(val);
        *ok = false;
    } else if (json_array_append_new(arr, val) != 0) {
        *ok = false;
    }
}

static json_t *build_json(const char *input, const ag_graph *g, const ag_report *r, const pass_counts *pc)
{
    bool ok = true;
    json_t *root = json_object();
    if (!root)
        return NULL;
    jset(root, "input", jstr(input), &ok);
    jset(root, "graph", jstr(ag_sub_name(g, AG_ROOT)), &ok);

    json_t *isos = json_array();
    json_t *by_kind = json_object();
    for (uint32_t k = 0; k < ag_report_isolation_count(r) && ok; k++) {
        const ag_isolation *iso = ag_report_isolation_at(r, k);
        json_t *o = json_object();
        jset(o, "pass", jstr(iso->pass), &ok);
        jset(o, "rule", jstr(iso->rule), &ok);
        jset(o, "kind", jstr(iso->kind), &ok);
        jset(o, "graph", jstr(iso->graph), &ok);
        jset(o, "node", jstr(iso->node), &ok);
        jset(o, "producer", jstr(iso->producer), &ok);
        jset(o, "consumer", jstr(iso->consumer), &ok);
        jpush(isos, o, &ok);
        /* Kinds are keys: clean them like any other string. */
        json_t *kind = jstr(iso->kind);
        if (kind && by_kind) {
            const char *ks = json_string_value(kind);
            json_t *prev = json_object_get(by_kind, ks);
            jset(by_kind, ks, json_integer(prev ? json_integer_value(prev) + 1 : 1), &ok);
        } else {
            ok = false;
        }
        json_decref(kind);
    }
    jset(root, "isolations", isos, &ok);

    json_t *warns = json_array();
    for (uint32_t k = 0; k < ag_report_warning_count(r) && ok; k++) {
        const ag_warning *w = ag_report_warning_at(r, k);
        json_t *o = json_object();
        jset(o, "pass", jstr(w->pass), &ok);
        jset(o, "code", jstr(w->code), &ok);
        jset(o, "message", jstr(w->message), &ok);
        json_t *nodes = json_array();
        for (uint32_t n = 0; n < w->nnodes; n++)
            jpush(nodes, jstr(w->nodes[n]), &ok);
        jset(o, "nodes", nodes, &ok);
        jpush(warns, o, &ok);
    }
    jset(root, "warnings", warns, &ok);

    json_t *counts = json_object();
    jset(counts, "isolations", json_integer(ag_report_isolation_count(r)), &ok);
    jset(counts, "warnings", json_integer(ag_report_warning_count(r)), &ok);
    json_t *by_pass = json_object();
    for (uint32_t k = 0; k < ag_pass_count(); k++) {
        json_t *o = json_object();
        jset(o, "isolations", json_integer(pc[k].isolations), &ok);
        jset(o, "warnings", json_integer(pc[k].warnings), &ok);
        jset(by_pass, ag_pass_at(k)->name, o, &ok);
    }
    jset(counts, "by_pass", by_pass, &ok);
    jset(counts, "by_kind", by_kind, &ok);
    jset(root, "counts", counts, &ok);
    if (!ok) {
        json_decref(root);
        return NULL;
    }
    return root;
}

/* ---- the command ---- */

typedef struct check_job {
    const char *input;
    const ag_graph *g;
    const ag_report *report;
    const check_state *cs;
    const ag_plan *plan; /* NULL when planning failed (plan_st says why) */
    ag_status plan_st;
} check_job;

static json_t *plan_json(const ag_plan *p, ag_status plan_st, bool *ok)
{
    json_t *o = json_object();
    if (!p) {
        jset(o, "error", jstr(ag_status_str(plan_st)), ok);
        return o;
    }
    jset(o, "peak_bytes", json_integer((json_int_t)ag_plan_peak_bytes(p)), ok);
    jset(o, "lower_bound_bytes", json_integer((json_int_t)ag_plan_lower_bound_bytes(p)), ok);
    jset(o, "ratio", json_real(plan_ratio(p)), ok);
    json_t *arenas = json_array();
    for (uint32_t k = 0; k < ag_plan_arena_count(p); k++) {
        json_t *a = json_object();
        jset(a, "memory_type", jstr(ag_mem_type_name(ag_plan_arena_mem_type(p, k))), ok);
        jset(a, "size_bytes", json_integer((json_int_t)ag_plan_arena_size(p, k)), ok);
        jset(a, "lower_bound_bytes", json_integer((json_int_t)ag_plan_arena_lower_bound(p, k)), ok);
        jpush(arenas, a, ok);
    }
    jset(o, "arenas", arenas, ok);
    return o;
}

static ag_status write_text(FILE *m, const void *ud)
{
    const check_job *j = ud;
    pass_counts *pc = calloc(ag_pass_count(), sizeof *pc);
    if (!pc)
        return AG_ENOMEM;
    count_by_pass(j->report, pc);
    ag_status st = AG_OK;
    if (j->cs->json) {
        json_t *root = build_json(j->input, j->g, j->report, pc);
        bool ok = true;
        if (root)
            jset(root, "plan", plan_json(j->plan, j->plan_st, &ok), &ok);
        if (!root || !ok || json_dumpf(root, m, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0 || fputc('\n', m) == EOF)
            st = AG_ENOMEM;
        json_decref(root);
    } else {
        print_text(m, j->input, j->report, pc, j->cs->explain);
        print_plan_text(m, j->plan, j->plan_st);
    }
    free(pc);
    return st;
}

/* The report is formatted into memory and handed to the sink in one piece,
 * so write errors are reported the same way for text and JSON. */
static ag_status check_write(void *ud, ag_sink sink)
{
    return cli_sink_formatted(sink, write_text, ud);
}

static int check_run(ag_ctx *ctx, ag_graph *g, cli_load_info *info, const char *input, const char *output,
                     const cli_load_opts *lo, void *state)
{
    (void)lo;
    check_state *cs = state;
    ag_pass_env env;
    if (!cli_pass_env(ctx, g, info, input, &env))
        return CLI_EXIT_USAGE;
    ag_report *report = env.report;
    ag_status st;
    int rc;
    if ((st = ag_pipeline_run(&env)) != AG_OK) {
        cli_err_ctx(ctx, st, input);
        rc = CLI_EXIT_USAGE;
    } else {
        /* A graph the planner cannot size (unknown shapes) is still
         * checked; a plan the checker rejects is a bug: exit 2. */
        ag_plan *plan = NULL;
        ag_status pst = ag_plan_build(ctx, g, env.ops, NULL, &plan);
        if (pst == AG_OK && (st = ag_plan_check(plan)) != AG_OK) {
            cli_err_ctx(ctx, st, input);
            ag_plan_destroy(plan);
            ag_report_destroy(report);
            return CLI_EXIT_USAGE;
        }
        check_job j = {input, g, report, cs, plan, pst};
        rc = cli_write_output(ctx, output, check_write, &j);
        if (rc == CLI_EXIT_OK && ag_report_findings(report) > 0)
            rc = CLI_EXIT_FINDINGS;
        ag_plan_destroy(plan);
    }
    ag_report_destroy(report);
    return rc;
}

int cmd_check(int argc, char **argv)
{
    static const cli_graph_cmd cmd = {"check", cmd_check_help, check_option, check_run, true};
    check_state cs = {false, false};
    return cli_graph_command(&cmd, &cs, argc, argv);
}
