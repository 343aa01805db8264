/* aliasguard opt: runs the named compile passes over a graph and prints the
 * result as .agt; with --explain the output starts with one comment line per
 * change a pass made (the pass, the rule, the anchors it separates), so one
 * file shows both why and what.  Also holds the line format of those
 * explanations, shared with `check`. */

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---- explanation lines (docs/cli.md) ---- */

/* Appends s; with quoted, '"' and '\' are escaped.  Bytes that would end the
 * line or confuse a terminal are written as \xHH, so every explanation stays
 * on one line (and an .agt comment stays a comment). */
static void put_field(FILE *f, const char *s, bool quoted)
{
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else if (quoted && (*p == '"' || *p == '\\'))
            fprintf(f, "\\%c", *p);
        else
            fputc(*p, f);
    }
}

void cli_print_isolation(FILE *f, const char *prefix, const ag_isolation *iso)
{
    fputs(prefix, f);
    fputs("isolation: pass=", f);
    put_field(f, iso->pass, false);
    fputs(" rule=\"", f);
    put_field(f, iso->rule, true);
    fputs("\" kind=", f);
    put_field(f, iso->kind, false);
    fputs(" graph=", f);
    put_field(f, iso->graph, false);
    fputs(" node=", f);
    put_field(f, iso->node, false);
    fputs(" producer=", f);
    put_field(f, iso->producer, false);
    fputs(" consumer=", f);
    put_field(f, iso->consumer, false);
    fputc('\n', f);
}

void cli_print_warning(FILE *f, const char *prefix, const ag_warning *w)
{
    fputs(prefix, f);
    fputs("warning: pass=", f);
    put_field(f, w->pass, false);
    fputs(" code=", f);
    put_field(f, w->code, false);
    fputs(" message=\"", f);
    put_field(f, w->message, true);
    fputs("\" nodes=", f);
    for (uint32_t k = 0; k < w->nnodes; k++) {
        if (k)
            fputc(',', f);
        put_field(f, w->nodes[k], false);
    }
    fputc('\n', f);
}

/* ---- pass lists ---- */

bool cli_parse_pass_list(const char *cmd, const char *list, const ag_pass_def ***out, uint32_t *count)
{
    *out = NULL;
    *count = 0;
    size_t n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    /* Each element is one pass, or "all" for the whole pipeline: every
     * registered pass in order, then lint once more on the result, as
     * ag_pipeline_run does. */
    const ag_pass_def **v = malloc(n * (ag_pass_count() + 1) * sizeof *v);
    if (!v) {
        cli_err("out of memory");
        return false;
    }
    uint32_t used = 0;
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 3 && strncmp(p, "all", 3) == 0) {
            for (uint32_t k = 0; k < ag_pass_count(); k++)
                v[used++] = ag_pass_at(k);
            if (ag_pass_find("lint"))
                v[used++] = ag_pass_find("lint");
        } else {
            const ag_pass_def *def = NULL;
            for (uint32_t k = 0; k < ag_pass_count() && !def; k++) {
                const ag_pass_def *d = ag_pass_at(k);
                if (strlen(d->name) == len && strncmp(d->name, p, len) == 0)
                    def = d;
            }
            if (!def) {
                fprintf(stderr, "aliasguard: %s: unknown pass '%.*s'; the passes are:", cmd, (int)len, p);
                for (uint32_t k = 0; k < ag_pass_count(); k++)
                    fprintf(stderr, " %s", ag_pass_at(k)->name);
                fputs(" (or 'all')\n", stderr);
                fputs("Try 'aliasguard passes' for what each one does.\n", stderr);
                free(v);
                return false;
            }
            v[used++] = def;
        }
        if (!end)
            break;
        p = end + 1;
    }
    *out = v;
    *count = used;
    return true;
}

/* ---- the command ---- */

typedef struct opt_state {
    const char *passes_arg;
    bool explain;
    bool time_passes;
    ag_text_write_opts wo;
    const ag_pass_def **passes;
    uint32_t npasses;
} opt_state;

void cmd_opt_help(FILE *f)
{
    fputs("usage: aliasguard opt [options] --passes=P1,P2,... INPUT\n"
          "\n"
          "Reads INPUT (an ONNX model or a .agt file, '-' for standard input), runs\n"
          "the named compile passes in the order given and prints the rewritten graph\n"
          "as .agt text.  'aliasguard passes' lists the passes; '--passes=all' runs the\n"
          "whole pipeline in its order (lint first and again last).  A name may repeat\n"
          "(running a pass twice shows that the second run changes nothing).  lint\n"
          "changes nothing; its warnings start with 'before: ' or 'after: ' when other\n"
          "passes run before or after it.\n"
          "\n"
          "Options:\n"
          "  --passes=LIST            comma-separated pass names, or 'all' (required)\n"
          "  --explain                start the output with one comment line per change:\n"
          "                           '# isolation: pass=P rule=\"R\" kind=K graph=G node=N\n"
          "                           producer=A:I consumer=B:J' (node= is empty for an\n"
          "                           added control edge) and '# warning: pass=P code=C\n"
          "                           message=\"M\" nodes=A,B'\n"
          "  -o, --output FILE        write to FILE instead of standard output\n"
          "  --time-passes            print 'time: pass=P ms=T' on standard error after\n"
          "                           each pass (T: wall milliseconds of the pass alone)\n"
          "  --elide-bytes N          print tensor values larger than N bytes as elided\n"
          "                           (default 4096)\n"
          "  --no-elide               print every tensor value in full\n"
          "  -h, --help               show this help\n",
          f);
    cli_help_load_opts(f);
}

static int opt_option(cli_args *a, void *state)
{
    opt_state *os = state;
    const char *v;
    int r;
    if ((r = cli_opt_value(a, "--passes", NULL, &v)) != 0) {
        if (r < 0)
            return -1;
        if (!*v) {
            cli_usage_error(a->cmd, "--passes needs at least one pass name");
            return -1;
        }
        free(os->passes);
        os->passes = NULL;
        if (!cli_parse_pass_list(a->cmd, v, &os->passes, &os->npasses))
            return -1;
        os->passes_arg = v;
        return 1;
    }
    if (cli_opt_flag(a, "--explain", NULL)) {
        os->explain = true;
        return 1;
    }
    if (cli_opt_flag(a, "--time-passes", NULL)) {
        os->time_passes = true;
        return 1;
    }
    if ((r = cli_opt_value(a, "--elide-bytes", NULL, &v)) != 0)
        return r < 0 || !cli_parse_u64(a->cmd, "--elide-bytes", v, &os->wo.elide_bytes) ? -1 : 1;
    if (cli_opt_flag(a, "--no-elide", NULL)) {
        os->wo.elide_bytes = UINT64_MAX;
        return 1;
    }
    return 0;
}

typedef struct opt_job {
    const ag_graph *g;
    const ag_report *report;
    const opt_state *os;
} opt_job;

static ag_status write_explanation(FILE *m, const void *ud)
{
    const ag_report *r = ud;
    for (uint32_t k = 0; k < ag_report_isolation_count(r); k++)
        cli_print_isolation(m, "# ", ag_report_isolation_at(r, k));
    for (uint32_t k = 0; k < ag_report_warning_count(r); k++)
        cli_print_warning(m, "# ", ag_report_warning_at(r, k));
    return AG_OK;
}

/* The explanation goes through a memory stream first so that it reaches the
 * sink (and its error handling) like the graph text. */
static ag_status opt_write(void *ud, ag_sink sink)
{
    const opt_job *j = ud;
    if (j->os->explain) {
        ag_status st = cli_sink_formatted(sink, write_explanation, j->report);
        if (st != AG_OK)
            return st;
    }
    return ag_text_write(j->g, &j->os->wo, sink);
}

static int opt_run(ag_ctx *ctx, ag_graph *g, cli_load_info *info, const char *input, const char *output,
                   const cli_load_opts *lo, void *state)
{
    (void)lo;
    opt_state *os = state;
    if (os->passes_arg == NULL)
        return cli_usage_error("opt", "missing --passes=P1,P2,... (see 'aliasguard passes')");
    ag_pass_env env;
    if (!cli_pass_env(ctx, g, info, input, &env))
        return CLI_EXIT_USAGE;
    ag_report *report = env.report;
    ag_status st = AG_OK;
    /* lint in a list with other passes is phase "before" until another pass
     * has run and "after" from then on, as in the pipeline; alone it has no
     * phase. */
    bool only_lint = true, ran_other = false;
    for (uint32_t k = 0; k < os->npasses; k++)
        only_lint = only_lint && strcmp(os->passes[k]->name, "lint") == 0;
    for (uint32_t k = 0; k < os->npasses && st == AG_OK; k++) {
        double t0 = cli_now_ms();
        if (strcmp(os->passes[k]->name, "lint") == 0) {
            st = ag_lint_run(&env, only_lint ? NULL : ran_other ? "after" : "before");
        } else {
            st = ag_pass_run(&env, os->passes[k]->name);
            ran_other = true;
        }
        if (os->time_passes && st == AG_OK)
            fprintf(stderr, "time: pass=%s ms=%.3f\n", os->passes[k]->name, cli_now_ms() - t0);
    }
    int rc;
    if (st != AG_OK) {
        cli_err_ctx(ctx, st, input);
        rc = CLI_EXIT_USAGE;
    } else {
        opt_job j = {g, report, os};
        rc = cli_write_output(ctx, output, opt_write, &j);
    }
    ag_report_destroy(report);
    return rc;
}

int cmd_opt(int argc, char **argv)
{
    static const cli_graph_cmd cmd = {"opt", cmd_opt_help, opt_option, opt_run, true};
    opt_state os = {NULL, false, false, ag_text_write_defaults(), NULL, 0};
    int rc = cli_graph_command(&cmd, &os, argc, argv);
    free(os.passes);
    return rc;
}
