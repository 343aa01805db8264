/* The graph loader shared by every aliasguard subcommand: detects the input
 * format, imports ONNX or parses .agt, applies --input-shape and --input-value
 * bindings, runs shape inference and loads --ops files; plus output-file
 * handling. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

double cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

const char *cli_format_name(cli_format f)
{
    switch (f) {
    case CLI_FMT_ONNX:
        return "onnx";
    case CLI_FMT_AGT:
        return "agt";
    case CLI_FMT_AUTO:
        break;
    }
    return "auto";
}

/* ---- options ---- */

bool cli_load_opts_init(cli_load_opts *o, int argc)
{
    memset(o, 0, sizeof *o);
    size_t n = argc > 0 ? (size_t)argc : 1;
    o->input_shapes = malloc(n * sizeof *o->input_shapes);
    o->input_values = malloc(n * sizeof *o->input_values);
    o->ops_files = malloc(n * sizeof *o->ops_files);
    if (!o->input_shapes || !o->input_values || !o->ops_files) {
        cli_load_opts_free(o);
        cli_err("out of memory");
        return false;
    }
    return true;
}

void cli_load_opts_free(cli_load_opts *o)
{
    free(o->input_shapes);
    free(o->input_values);
    free(o->ops_files);
    o->input_shapes = NULL;
    o->input_values = NULL;
    o->ops_files = NULL;
    o->n_input_shapes = o->n_input_values = o->n_ops_files = 0;
}

int cli_parse_load_opt(cli_args *a, cli_load_opts *o)
{
    const char *v;
    int r;
    if ((r = cli_opt_value(a, "--input-shape", NULL, &v)) != 0) {
        if (r < 0)
            return -1;
        if (!strchr(v, '='))
            return cli_usage_error(a->cmd, "--input-shape expects NAME=d0,d1,... (got '%s')", v), -1;
        o->input_shapes[o->n_input_shapes++] = v;
        return 1;
    }
    if ((r = cli_opt_value(a, "--input-value", NULL, &v)) != 0) {
        if (r < 0)
            return -1;
        const char *eq = strrchr(v, '=');
        if (!eq || eq == v || eq[1] == '\0')
            return cli_usage_error(a->cmd, "--input-value expects NAME=v or NAME=v0,v1,... (got '%s')", v), -1;
        o->input_values[o->n_input_values++] = v;
        return 1;
    }
    if ((r = cli_opt_value(a, "--ops", NULL, &v)) != 0) {
        if (r < 0)
            return -1;
        o->ops_files[o->n_ops_files++] = v;
        return 1;
    }
    if ((r = cli_opt_value(a, "--format", NULL, &v)) != 0) {
        if (r < 0)
            return -1;
        if (strcmp(v, "onnx") == 0)
            o->format = CLI_FMT_ONNX;
        else if (strcmp(v, "agt") == 0)
            o->format = CLI_FMT_AGT;
        else
            return cli_usage_error(a->cmd, "--format expects 'onnx' or 'agt' (got '%s')", v), -1;
        return 1;
    }
    if (cli_opt_flag(a, "--no-infer", NULL)) {
        o->no_infer = true;
        return 1;
    }
    return 0;
}

void cli_help_load_opts(FILE *f)
{
    fputs("\nInput options:\n"
          "  --format onnx|agt        read the input in this format (default: detected from\n"
          "                           the content, then the file name extension)\n"
          "  --input-shape NAME=D0,D1,...\n"
          "                           bind the shape of graph input NAME (repeatable; an\n"
          "                           empty list binds a scalar)\n"
          "  --input-value NAME=V[,V...]\n"
          "                           bind the value of graph input NAME (repeatable;\n"
          "                           one value fills the whole input; applied after\n"
          "                           --input-shape), e.g. a sample rate that selects a\n"
          "                           branch\n"
          "  --ops FILE               load operator semantics from FILE (repeatable)\n"
          "  --no-infer               do not run shape inference\n",
          f);
}

/* ---- output files ---- */

static bool is_stdout_path(const char *path)
{
    return !path || strcmp(path, "-") == 0;
}

FILE *cli_open_output(const char *path)
{
    if (is_stdout_path(path))
        return stdout;
    FILE *f = fopen(path, "wb");
    if (!f)
        cli_err("%s: cannot open for writing: %s", path, strerror(errno));
    return f;
}

bool cli_close_output(FILE *f, const char *path, bool ok)
{
    if (!f)
        return false;
    if (is_stdout_path(path)) {
        if (fflush(f) != 0 || ferror(f)) {
            if (ok)
                cli_err("writing standard output failed: %s", strerror(errno));
            return false;
        }
        return ok;
    }
    bool wrote = !ferror(f);
    if (fclose(f) != 0)
        wrote = false;
    if (ok && !wrote)
        cli_err("%s: write failed: %s", path, strerror(errno));
    if (!ok || !wrote)
        remove(path);
    return ok && wrote;
}

/* ---- format detection ---- */

/* A serialized ModelProto starts with field tags (0x08, 0x12, 0x1a, ...) and
 * holds raw varints; the text IR is printable text.  So any control byte other
 * than whitespace in the first block means binary, hence ONNX. */
static cli_format sniff(const unsigned char *p, size_t n)
{
    if (n == 0)
        return CLI_FMT_AUTO;
    for (size_t k = 0; k < n; k++) {
        unsigned char c = p[k];
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') || c == 0x7f)
            return CLI_FMT_ONNX;
    }
    return CLI_FMT_AGT;
}

static cli_format by_extension(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (dot && strcmp(dot, ".onnx") == 0)
        return CLI_FMT_ONNX;
    return CLI_FMT_AGT;
}

/* Reads all of standard input into a malloc'd buffer. */
bool cli_read_all(const char *path, char **buf, size_t *len)
{
    bool is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "<stdin>" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        cli_err("%s: cannot open: %s", path, strerror(errno));
        return false;
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    bool ok = b != NULL;
    while (ok) {
        if (n + 1 >= cap) {
            char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(b, cap * 2);
            if (!nb) {
                ok = false;
                break;
            }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    if (!ok)
        cli_err("%s: out of memory reading it", name);
    else if (ferror(f)) {
        cli_err("%s: read failed: %s", name, strerror(errno));
        ok = false;
    }
    if (!is_stdin)
        fclose(f);
    if (!ok) {
        free(b);
        return false;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return true;
}

/* ---- the loader ---- */

static bool load_ops(ag_ctx *ctx, const cli_load_opts *opts, cli_load_info *info)
{
    if (opts->n_ops_files == 0)
        return true;
    ag_status st = ag_ops_create(ctx, &info->ops);
    if (st != AG_OK) {
        cli_err_ctx(ctx, st, "operator registry");
        return false;
    }
    for (uint32_t k = 0; k < opts->n_ops_files; k++) {
        st = ag_ops_load_file(info->ops, opts->ops_files[k]);
        if (st != AG_OK) {
            cli_err_ctx(ctx, st, opts->ops_files[k]);
            ag_ops_destroy(info->ops);
            info->ops = NULL;
            return false;
        }
    }
    return true;
}

static ag_status load_onnx(ag_ctx *ctx, const char *path, const char *buf, size_t len,
                           const cli_load_opts *opts, ag_graph **g, cli_load_info *info)
{
    ag_onnx_opts o = ag_onnx_defaults();
    o.input_shapes = opts->input_shapes;
    o.n_input_shapes = opts->n_input_shapes;
    o.input_values = opts->input_values;
    o.n_input_values = opts->n_input_values;
    o.infer_shapes = !opts->no_infer;
    memset(&info->onnx, 0, sizeof info->onnx);
    info->onnx.size = sizeof info->onnx;
    o.report = &info->onnx;
    double t0 = cli_now_ms();
    ag_status st = buf ? ag_onnx_import(ctx, buf, len, path, &o, g) : ag_onnx_import_file(ctx, path, &o, g);
    info->load_ms = cli_now_ms() - t0;
    info->infer_ms = -1;
    if (st == AG_OK) {
        info->have_onnx = true;
        info->inferred = o.infer_shapes;
        info->infer = info->onnx.infer;
    }
    return st;
}

static ag_status load_agt(ag_ctx *ctx, const char *path, const char *buf, size_t len,
                          const cli_load_opts *opts, ag_graph **g, cli_load_info *info)
{
    double t0 = cli_now_ms();
    ag_status st = buf ? ag_text_read(ctx, buf, len, path, g) : ag_text_read_file(ctx, path, g);
    info->load_ms = cli_now_ms() - t0;
    if (st != AG_OK)
        return st;
    for (uint32_t k = 0; k < opts->n_input_shapes && st == AG_OK; k++)
        st = ag_infer_apply_binding(*g, opts->input_shapes[k]);
    for (uint32_t k = 0; k < opts->n_input_values && st == AG_OK; k++)
        st = ag_infer_apply_value_binding(*g, opts->input_values[k]);
    if (st == AG_OK && !opts->no_infer) {
        memset(&info->infer, 0, sizeof info->infer);
        info->infer.size = sizeof info->infer;
        t0 = cli_now_ms();
        st = ag_infer_shapes(*g, &info->infer);
        info->infer_ms = cli_now_ms() - t0;
        info->inferred = st == AG_OK;
    }
    if (st != AG_OK) {
        ag_graph_destroy(*g);
        *g = NULL;
    }
    return st;
}

bool cli_load_graph(ag_ctx *ctx, const char *path, const cli_load_opts *opts, ag_graph **out,
                    cli_load_info *info)
{
    memset(info, 0, sizeof *info);
    info->infer_ms = -1;
    *out = NULL;

    char *buf = NULL;
    size_t len = 0;
    const char *name = path;
    cli_format fmt = opts->format;
    if (strcmp(path, "-") == 0) {
        if (!cli_read_all("-", &buf, &len))
            return false;
        name = "<stdin>";
        if (fmt == CLI_FMT_AUTO)
            fmt = sniff((const unsigned char *)buf, len < 4096 ? len : 4096);
        if (fmt == CLI_FMT_AUTO)
            fmt = CLI_FMT_AGT;
    } else {
        FILE *f = fopen(path, "rb");
        if (!f) {
            cli_err("%s: cannot open: %s", path, strerror(errno));
            return false;
        }
        unsigned char head[4096];
        size_t n = fread(head, 1, sizeof head, f);
        bool bad = ferror(f) != 0;
        int saved = errno;
        fclose(f);
        if (bad) {
            cli_err("%s: read failed: %s", path, strerror(saved));
            return false;
        }
        if (fmt == CLI_FMT_AUTO)
            fmt = sniff(head, n);
        if (fmt == CLI_FMT_AUTO)
            fmt = by_extension(path);
    }
    info->format = fmt;

    if (!load_ops(ctx, opts, info)) {
        free(buf);
        return false;
    }

    ag_ctx_clear_error(ctx);
    ag_status st = fmt == CLI_FMT_ONNX ? load_onnx(ctx, name, buf, len, opts, out, info)
                                       : load_agt(ctx, name, buf, len, opts, out, info);
    free(buf);
    if (st != AG_OK) {
        cli_err_ctx(ctx, st, name);
        ag_ops_destroy(info->ops);
        info->ops = NULL;
        *out = NULL;
        return false;
    }
    return true;
}

int cli_write_output(ag_ctx *ctx, const char *output, ag_status (*write)(void *ud, ag_sink sink), void *ud)
{
    FILE *f = cli_open_output(output);
    if (!f)
        return CLI_EXIT_USAGE;
    ag_ctx_clear_error(ctx);
    ag_status st = write(ud, ag_sink_file(f));
    if (st != AG_OK)
        cli_err_ctx(ctx, st, output ? output : "<stdout>");
    return cli_close_output(f, output, st == AG_OK) ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

int cli_graph_command(const cli_graph_cmd *cmd, void *state, int argc, char **argv)
{
    cli_args a = {argc, argv, 1, cmd->name, false};
    cli_load_opts lo;
    if (!cli_load_opts_init(&lo, argc))
        return CLI_EXIT_USAGE;
    const char *input = NULL, *output = NULL, *v;
    int rc = CLI_EXIT_USAGE, r;
    while (a.i < a.argc) {
        if (cli_opt_end(&a))
            continue;
        if (cli_opt_flag(&a, "--help", "-h")) {
            cmd->help(stdout);
            rc = CLI_EXIT_OK;
            goto done;
        }
        if ((r = cli_parse_load_opt(&a, &lo)) != 0 || (cmd->option && (r = cmd->option(&a, state)) != 0)) {
            if (r < 0)
                goto done;
            continue;
        }
        if (cmd->has_output && (r = cli_opt_value(&a, "--output", "-o", &v)) != 0) {
            if (r < 0)
                goto done;
            output = v;
            continue;
        }
        if (cli_is_option(&a)) {
            cli_usage_error(a.cmd, "unknown option '%s'", a.argv[a.i]);
            goto done;
        }
        if (input) {
            cli_usage_error(a.cmd, "more than one input ('%s' and '%s')", input, a.argv[a.i]);
            goto done;
        }
        input = a.argv[a.i++];
    }
    if (!input) {
        cli_usage_error(a.cmd, "no input file");
        goto done;
    }
    ag_ctx *ctx = ag_ctx_create(NULL);
    if (!ctx) {
        cli_err("out of memory");
        goto done;
    }
    ag_graph *g = NULL;
    cli_load_info info;
    if (cli_load_graph(ctx, input, &lo, &g, &info)) {
        rc = cmd->run(ctx, g, &info, input, output, &lo, state);
        ag_graph_destroy(g);
        ag_ops_destroy(info.ops);
    }
    ag_ctx_destroy(ctx);
done:
    cli_load_opts_free(&lo);
    return rc;
}

bool cli_pass_env(ag_ctx *ctx, ag_graph *g, cli_load_info *info, const char *input, ag_pass_env *env)
{
    ag_status st = info->ops ? AG_OK : ag_ops_create(ctx, &info->ops);
    if (st != AG_OK) {
        cli_err_ctx(ctx, st, "operator registry");
        return false;
    }
    ag_report *report = NULL;
    if ((st = ag_report_create(ctx, &report)) != AG_OK) {
        cli_err_ctx(ctx, st, input);
        return false;
    }
    env->g = g;
    env->ops = info->ops;
    env->report = report;
    return true;
}

ag_status cli_sink_formatted(ag_sink sink, ag_status (*fmt)(FILE *m, const void *ud), const void *ud)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return AG_ENOMEM;
    ag_status st = fmt(m, ud);
    if (fclose(m) != 0 && st == AG_OK)
        st = AG_ENOMEM;
    if (st == AG_OK && len)
        st = sink.write(sink.ud, buf, len);
    free(buf);
    return st;
}
