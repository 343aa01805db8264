/* aliasguard place: reads a buffer trace in MiniMalloc CSV form
 * (id,lower,upper,size; half-open lifetimes), places it with ag_place,
 * verifies the result with the independent checker, and reports the arena
 * against the lower bound (text or --json), optionally writing the offsets. */
#define _POSIX_C_SOURCE 200809L /* getline */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "aliasguard/place.h"

void cmd_place_help(FILE *f)
{
    fputs("usage: aliasguard place [options] TRACE.csv\n"
          "\n"
          "Assigns byte offsets to the buffers of TRACE.csv so that buffers alive at\n"
          "the same step never share bytes, using as few bytes as the solver finds\n"
          "within the effort budget.  TRACE.csv has the header 'id,lower,upper,size'\n"
          "and one buffer per line: a name, the first step it is alive, the first\n"
          "step it is dead again, and its size in bytes.\n"
          "\n"
          "Prints 'arena: N bytes', 'lower bound: M bytes (ratio R)' and 'time: S s'.\n"
          "\n"
          "options:\n"
          "  --capacity N     fail (exit 1) when no placement within N bytes is found\n"
          "  --align N        every offset a multiple of N (sizes rounded up for the bound)\n"
          "  --effort S       seconds of search after the constructive phase (default 1;\n"
          "                   0: constructive only, deterministic)\n"
          "  --greedy         the baseline only: one best-fit pass by decreasing size\n"
          "  --json           print {\"arena_bytes\",\"lower_bound_bytes\",\"seconds\"} instead\n"
          "  -o, --output F   write id,lower,upper,size,offset for every buffer to F\n"
          "  -h, --help       this help\n"
          "\n"
          "exit status: 0 placed; 1 --capacity given and not met; 2 usage, input or\n"
          "verification error.\n",
          f);
}

typedef struct trace {
    ag_buf *bufs;
    char **ids;
    uint32_t n, cap;
} trace;

static void trace_free(trace *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        free(t->ids[i]);
    free(t->ids);
    free(t->bufs);
    memset(t, 0, sizeof *t);
}

/* Trims ASCII blanks (and a trailing CR) in place. */
static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t len = strlen(s);
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r' || s[len - 1] == '\n'))
        s[--len] = '\0';
    return s;
}

static bool parse_field_u64(const char *s, uint64_t *out)
{
    if (*s == '\0' || !isdigit((unsigned char)*s))
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = (uint64_t)v;
    return true;
}

/* Splits line at commas into exactly 4 fields; returns the count found. */
static int split4(char *line, char **f)
{
    int k = 0;
    char *p = line;
    for (;;) {
        char *c = strchr(p, ',');
        if (k < 4)
            f[k] = p;
        k++;
        if (!c)
            break;
        *c = '\0';
        p = c + 1;
    }
    for (int i = 0; i < k && i < 4; i++)
        f[i] = trim(f[i]);
    return k;
}

static bool read_trace(const char *path, trace *t)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        cli_err("%s: %s", path, strerror(errno));
        return false;
    }
    char *line = NULL;
    size_t lcap = 0;
    unsigned long lineno = 0;
    bool header = false, ok = true;
    while (ok && getline(&line, &lcap, f) != -1) {
        lineno++;
        char *s = trim(line);
        if (*s == '\0')
            continue;
        char *fld[4];
        int k = split4(s, fld);
        if (k != 4) {
            cli_err("%s:%lu: expected 4 comma-separated fields (id,lower,upper,size), found %d", path, lineno, k);
            ok = false;
            break;
        }
        if (!header) {
            if (strcmp(fld[0], "id") != 0 || strcmp(fld[1], "lower") != 0 || strcmp(fld[2], "upper") != 0 ||
                strcmp(fld[3], "size") != 0) {
                cli_err("%s:%lu: expected the header 'id,lower,upper,size'", path, lineno);
                ok = false;
                break;
            }
            header = true;
            continue;
        }
        static const char *names[4] = {"id", "lower", "upper", "size"};
        uint64_t v[4] = {0, 0, 0, 0};
        if (*fld[0] == '\0') {
            cli_err("%s:%lu: empty id", path, lineno);
            ok = false;
            break;
        }
        for (int i = 1; i < 4 && ok; i++) {
            if (!parse_field_u64(fld[i], &v[i])) {
                cli_err("%s:%lu: %s '%s' is not a non-negative integer", path, lineno, names[i], fld[i]);
                ok = false;
            }
        }
        if (!ok)
            break;
        if (v[2] <= v[1]) {
            cli_err("%s:%lu: buffer '%s': upper %llu must be greater than lower %llu (lifetimes are half-open)",
                    path, lineno, fld[0], (unsigned long long)v[2], (unsigned long long)v[1]);
            ok = false;
            break;
        }
        if (t->n == UINT32_MAX) {
            cli_err("%s:%lu: too many buffers", path, lineno);
            ok = false;
            break;
        }
        if (t->n == t->cap) {
            uint32_t nc = t->cap ? (t->cap > UINT32_MAX / 2 ? UINT32_MAX : t->cap * 2) : 64;
            ag_buf *nb = realloc(t->bufs, (size_t)nc * sizeof *nb);
            if (nb)
                t->bufs = nb;
            char **ni = nb ? realloc(t->ids, (size_t)nc * sizeof *ni) : NULL;
            if (!nb || !ni) {
                cli_err("%s:%lu: out of memory", path, lineno);
                ok = false;
                break;
            }
            t->ids = ni;
            t->cap = nc;
        }
        char *id = malloc(strlen(fld[0]) + 1);
        if (!id) {
            cli_err("%s:%lu: out of memory", path, lineno);
            ok = false;
            break;
        }
        strcpy(id, fld[0]);
        t->ids[t->n] = id;
        t->bufs[t->n].lower = v[1];
        t->bufs[t->n].upper = v[2];
        t->bufs[t->n].size = v[3];
        t->bufs[t->n].offset = 0;
        t->n++;
    }
    if (ok && ferror(f)) {
        cli_err("%s: read error", path);
        ok = false;
    }
    if (ok && !header) {
        cli_err("%s:%lu: missing the header 'id,lower,upper,size'", path, lineno ? lineno : 1);
        ok = false;
    }
    free(line);
    if (f != stdin)
        fclose(f);
    if (!ok)
        trace_free(t);
    return ok;
}

static bool parse_seconds(const char *s, double *out)
{
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || errno != 0 || !(v >= 0) || v > 1e6)
        return false;
    *out = v;
    return true;
}

int cmd_place(int argc, char **argv)
{
    cli_args a = {argc, argv, 1, "place", false};
    const char *input = NULL, *output = NULL, *val = NULL;
    bool json = false, greedy = false;
    ag_place_opts opts = ag_place_defaults();
    while (a.i < a.argc) {
        int r;
        if (cli_opt_end(&a))
            continue;
        if (!a.only_pos) {
            if (cli_opt_flag(&a, "--help", "-h")) {
                cmd_place_help(stdout);
                return CLI_EXIT_OK;
            }
            if (cli_opt_flag(&a, "--greedy", NULL)) {
                greedy = true;
                continue;
            }
            if (cli_opt_flag(&a, "--json", NULL)) {
                json = true;
                continue;
            }
            if ((r = cli_opt_value(&a, "--capacity", NULL, &val)) != 0) {
                if (r < 0 || !cli_parse_u64(a.cmd, "--capacity", val, &opts.capacity))
                    return CLI_EXIT_USAGE;
                if (opts.capacity == 0)
                    return cli_usage_error(a.cmd, "--capacity must be at least 1");
                continue;
            }
            if ((r = cli_opt_value(&a, "--align", NULL, &val)) != 0) {
                if (r < 0 || !cli_parse_u64(a.cmd, "--align", val, &opts.align))
                    return CLI_EXIT_USAGE;
                if (opts.align == 0)
                    return cli_usage_error(a.cmd, "--align must be at least 1");
                continue;
            }
            if ((r = cli_opt_value(&a, "--effort", NULL, &val)) != 0) {
                if (r < 0)
                    return CLI_EXIT_USAGE;
                if (!parse_seconds(val, &opts.effort_seconds))
                    return cli_usage_error(a.cmd, "--effort expects a number of seconds >= 0, got '%s'", val);
                continue;
            }
            if ((r = cli_opt_value(&a, "--output", "-o", &output)) != 0) {
                if (r < 0)
                    return CLI_EXIT_USAGE;
                continue;
            }
            if (cli_is_option(&a))
                return cli_usage_error(a.cmd, "unknown option '%s'", a.argv[a.i]);
        }
        if (input)
            return cli_usage_error(a.cmd, "unexpected argument '%s' (one trace at a time)", a.argv[a.i]);
        input = a.argv[a.i++];
    }
    if (!input)
        return cli_usage_error(a.cmd, "missing TRACE.csv");

    trace t;
    memset(&t, 0, sizeof t);
    if (!read_trace(input, &t))
        return CLI_EXIT_USAGE;
    ag_ctx *ctx = ag_ctx_create(NULL);
    if (!ctx) {
        trace_free(&t);
        cli_err("out of memory");
        return CLI_EXIT_USAGE;
    }
    int rc = CLI_EXIT_OK;
    ag_place_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    ag_status st = greedy ? ag_place_greedy_by_size(ctx, t.bufs, t.n, opts.align, &res)
                          : ag_place(ctx, t.bufs, t.n, &opts, &res);
    if (st == AG_OK && greedy && opts.capacity != 0 && res.arena_bytes > opts.capacity) {
        cli_err("%s: greedy placement needs %llu bytes, capacity is %llu", input,
                (unsigned long long)res.arena_bytes, (unsigned long long)opts.capacity);
        rc = CLI_EXIT_FINDINGS;
        goto out;
    }
    if (st == AG_EINFEASIBLE) {
        cli_err_ctx(ctx, st, input);
        rc = CLI_EXIT_FINDINGS;
        goto out;
    }
    if (st != AG_OK) {
        cli_err_ctx(ctx, st, input);
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    st = ag_place_check(ctx, t.bufs, t.n, opts.align, opts.capacity);
    if (st != AG_OK) {
        cli_err("%s: the placement failed verification (a solver bug): %s", input, ag_ctx_errmsg(ctx));
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    if (output) {
        FILE *f = cli_open_output(output);
        if (!f) {
            rc = CLI_EXIT_USAGE;
            goto out;
        }
        bool ok = fputs("id,lower,upper,size,offset\n", f) != EOF;
        for (uint32_t i = 0; i < t.n && ok; i++)
            ok = fprintf(f, "%s,%llu,%llu,%llu,%llu\n", t.ids[i], (unsigned long long)t.bufs[i].lower,
                         (unsigned long long)t.bufs[i].upper, (unsigned long long)t.bufs[i].size,
                         (unsigned long long)t.bufs[i].offset) > 0;
        if (!cli_close_output(f, output, ok)) {
            rc = CLI_EXIT_USAGE;
            goto out;
        }
    }
    double ratio = res.lower_bound_bytes ? (double)res.arena_bytes / (double)res.lower_bound_bytes : 1.0;
    if (json) {
        json_t *root = json_object();
        bool ok = root && json_object_set_new(root, "arena_bytes", json_integer((json_int_t)res.arena_bytes)) == 0 &&
                  json_object_set_new(root, "lower_bound_bytes", json_integer((json_int_t)res.lower_bound_bytes)) ==
                      0 &&
                  json_object_set_new(root, "seconds", json_real(res.seconds)) == 0 &&
                  json_dumpf(root, stdout, JSON_COMPACT) == 0 && fputc('\n', stdout) != EOF;
        json_decref(root);
        if (!ok) {
            cli_err("cannot write the JSON report");
            rc = CLI_EXIT_USAGE;
            goto out;
        }
    } else {
        printf("arena: %llu bytes\n", (unsigned long long)res.arena_bytes);
        printf("lower bound: %llu bytes (ratio %.4f)\n", (unsigned long long)res.lower_bound_bytes, ratio);
        printf("time: %.3f s\n", res.seconds);
    }
    if (!cli_close_output(stdout, NULL, true))
        rc = CLI_EXIT_USAGE;
out:
    ag_ctx_destroy(ctx);
    trace_free(&t);
    return rc;
}
