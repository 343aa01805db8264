/* aliasguard: the command-line tool.  main() handles the global flags
 * (--help, --version), dispatches to a subcommand (tools/cmd_*.c), and this
 * file also holds the small option parser and message helpers they share.
 * Exit codes: 0 ok, 1 findings, 2 usage or input error (docs/cli.md). */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
    void (*help)(FILE *f);
} cli_command;

static const cli_command commands[] = {
    {"convert", "read an ONNX model or .agt file and print it as .agt", cmd_convert, cmd_convert_help},
    {"info", "summarise a graph: nodes, subgraphs, ops, tensor bytes, unknown shapes", cmd_info,
     cmd_info_help},
    {"dot", "export a graph to Graphviz DOT (subgraphs as clusters)", cmd_dot, cmd_dot_help},
    {"passes", "list the compile passes in pipeline order", cmd_passes, cmd_passes_help},
    {"opt", "run named compile passes and print the rewritten graph (--explain: why)", cmd_opt, cmd_opt_help},
    {"check", "run the compile pipeline and report isolations and warnings (exit 1 if any)", cmd_check,
     cmd_check_help},
    {"place", "place a MiniMalloc CSV buffer trace at byte offsets and compare with the lower bound", cmd_place,
     cmd_place_help},
    {"plan", "run the compile pipeline and plan static memory: arenas, offsets, lower bound", cmd_plan,
     cmd_plan_help},
    {"verify", "compile, plan and execute the plan's memory effects over many schedules (exit 1 on a violation)",
     cmd_verify, cmd_verify_help},
    {"alloc-replay", "replay an allocation trace with the multi-stream allocator and the baseline",
     cmd_alloc_replay, cmd_alloc_replay_help},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const cli_command *find_command(const char *name)
{
    for (size_t k = 0; k < N_COMMANDS; k++)
        if (strcmp(commands[k].name, name) == 0)
            return &commands[k];
    return NULL;
}

static void global_help(FILE *f)
{
    fputs("usage: aliasguard [--help] [--version] <command> [options] [args]\n"
          "\n"
          "aliasguard finds and fixes memory conflicts in computation graphs\n"
          "(ONNX models or the .agt text IR).\n"
          "\n"
          "Commands:\n",
          f);
    for (size_t k = 0; k < N_COMMANDS; k++)
        fprintf(f, "  %-10s %s\n", commands[k].name, commands[k].summary);
    fputs("  help CMD   show the help of CMD\n"
          "\n"
          "Global options:\n"
          "  -h, --help     show this help\n"
          "  --version      print the version and exit\n"
          "\n"
          "Exit status: 0 success, 1 findings reported (checking commands),\n"
          "2 usage error or unreadable/invalid input.\n"
          "Run 'aliasguard help CMD' or 'aliasguard CMD --help' for a command's options.\n",
          f);
}

/* ---- messages ---- */

void cli_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("aliasguard: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void cli_err_ctx(const ag_ctx *ctx, ag_status st, const char *what)
{
    const char *msg = ag_ctx_errmsg(ctx);
    if (!msg || !*msg || ag_ctx_last_status(ctx) != st)
        msg = ag_status_str(st);
    /* the message names the file where it starts with it ("FILE:LINE: ..."
     * or "FILE: ..."); the name appearing elsewhere in it is no naming */
    size_t wn = what ? strlen(what) : 0;
    if (wn && (strncmp(msg, what, wn) != 0 || msg[wn] != ':'))
        cli_err("%s: %s", what, msg);
    else
        cli_err("%s", msg);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("aliasguard: ", stderr);
    if (cmd)
        fprintf(stderr, "%s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (cmd)
        fprintf(stderr, "Try 'aliasguard help %s' for its options.\n", cmd);
    else
        fputs("usage: aliasguard [--help] [--version] <command> [options] [args]\n"
              "Try 'aliasguard --help' for the list of commands.\n",
              stderr);
    return CLI_EXIT_USAGE;
}

/* ---- option parsing ---- */

bool cli_is_option(const cli_args *a)
{
    const char *s = a->argv[a->i];
    return !a->only_pos && s[0] == '-' && s[1] != '\0';
}

bool cli_opt_end(cli_args *a)
{
    if (!a->only_pos && strcmp(a->argv[a->i], "--") == 0) {
        a->only_pos = true;
        a->i++;
        return true;
    }
    return false;
}

bool cli_opt_flag(cli_args *a, const char *long_name, const char *short_name)
{
    if (a->only_pos)
        return false;
    const char *s = a->argv[a->i];
    if (strcmp(s, long_name) == 0 || (short_name && strcmp(s, short_name) == 0)) {
        a->i++;
        return true;
    }
    return false;
}

int cli_opt_value(cli_args *a, const char *long_name, const char *short_name, const char **val)
{
    if (a->only_pos)
        return 0;
    const char *s = a->argv[a->i];
    size_t ln = strlen(long_name);
    if (strncmp(s, long_name, ln) == 0 && s[ln] == '=') {
        *val = s + ln + 1;
        a->i++;
        return 1;
    }
    if (strcmp(s, long_name) != 0 && !(short_name && strcmp(s, short_name) == 0))
        return 0;
    if (a->i + 1 >= a->argc) {
        cli_usage_error(a->cmd, "option %s needs a value", s);
        return -1;
    }
    *val = a->argv[a->i + 1];
    a->i += 2;
    return 1;
}

bool cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        goto bad;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            goto bad;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            goto bad;
        v = v * 10 + d;
    }
    *out = v;
    return true;
bad:
    cli_usage_error(cmd, "%s expects a non-negative integer (got '%s')", opt, s);
    return false;
}

/* ---- main ---- */

int main(int argc, char **argv)
{
    if (argc < 2) {
        global_help(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *first = argv[1];
    if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0) {
        global_help(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(first, "--version") == 0) {
        printf("aliasguard %s\n", ag_version());
        return CLI_EXIT_OK;
    }
    if (strcmp(first, "help") == 0) {
        if (argc == 2) {
            global_help(stdout);
            return CLI_EXIT_OK;
        }
        if (argc > 3)
            return cli_usage_error(NULL, "help takes one command name");
        const cli_command *c = find_command(argv[2]);
        if (!c)
            return cli_usage_error(NULL, "unknown command '%s'", argv[2]);
        c->help(stdout);
        return CLI_EXIT_OK;
    }
    if (first[0] == '-')
        return cli_usage_error(NULL, "unknown option '%s'", first);
    const cli_command *c = find_command(first);
    if (!c)
        return cli_usage_error(NULL, "unknown command '%s'", first);
    /* A subcommand sees its own name as argv[0]. */
    return c->run(argc - 1, argv + 1);
}
