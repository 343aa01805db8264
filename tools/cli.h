/* Shared pieces of the aliasguard command-line tool: exit codes, the small
 * option parser every subcommand uses, error reporting on stderr, and the
 * graph loader (ONNX or .agt, shape bindings, inference, --ops files) so that
 * every subcommand reads its input the same way. */
#ifndef AG_CLI_H
#define AG_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "aliasguard/aliasguard.h"

/* Exit codes (docs/cli.md).  1 is reserved for commands that report findings. */
enum { CLI_EXIT_OK = 0, CLI_EXIT_FINDINGS = 1, CLI_EXIT_USAGE = 2 };

/* ---- option parsing ----
 * A subcommand walks argv with a cli_args cursor.  Long options take their
 * value as "--opt=VALUE" or "--opt VALUE"; "--" ends the options. */
typedef struct cli_args {
    int argc;
    char **argv;
    int i;           /* index of the argument being looked at */
    const char *cmd; /* subcommand name, for messages */
    bool only_pos;   /* "--" seen: the rest are positional */
} cli_args;

/* If argv[i] is the option long_name (or short_name, may be NULL) with a value,
 * stores the value, advances and returns 1; returns 0 if it is another
 * argument, -1 (after printing a usage error) if the value is missing. */
int cli_opt_value(cli_args *a, const char *long_name, const char *short_name, const char **val);
/* If argv[i] is the flag long_name (or short_name), advances and returns true. */
bool cli_opt_flag(cli_args *a, const char *long_name, const char *short_name);
/* True if argv[i] is "--"; consumes it and switches to positional-only mode. */
bool cli_opt_end(cli_args *a);
/* True if argv[i] looks like an option (starts with '-' and is not "-"). */
bool cli_is_option(const cli_args *a);
/* Parses a non-negative decimal integer option value; prints a usage error
 * naming opt and returns false when it is not one. */
bool cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out);

/* ---- messages ---- */

/* "aliasguard: <message>" on stderr. */
void cli_err(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* Reports a library failure: the context's detailed message, prefixed with
 * what (usually the path) when the message does not already name it. */
void cli_err_ctx(const ag_ctx *ctx, ag_status st, const char *what);
/* Prints a usage error for cmd (NULL = the global command line) and a hint;
 * returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- output files ---- */

/* Opens path for writing ("-" or NULL: standard output). Reports failures. */
FILE *cli_open_output(const char *path);
/* Closes (or flushes standard output), checking for write errors; on failure
 * or when ok is false, a regular output file is removed.  Returns true when
 * the output is complete. */
bool cli_close_output(FILE *f, const char *path, bool ok);
/* Reads all of path ("-" = standard input) into a malloc'd buffer with a NUL
 * after its *len bytes; false after printing the error. */
bool cli_read_all(const char *path, char **buf, size_t *len);

/* ---- the loader ---- */

typedef enum cli_format { CLI_FMT_AUTO, CLI_FMT_ONNX, CLI_FMT_AGT } cli_format;
const char *cli_format_name(cli_format f);

/* Options shared by every command that reads a graph. */
typedef struct cli_load_opts {
    cli_format format;
    const char **input_shapes; /* "NAME=d0,d1,..." */
    uint32_t n_input_shapes;
    const char **input_values; /* "NAME=v[,v...]", applied after the shapes */
    uint32_t n_input_values;
    const char **ops_files;
    uint32_t n_ops_files;
    bool no_infer;
} cli_load_opts;

/* Allocates room for up to argc repeated options; false when out of memory. */
bool cli_load_opts_init(cli_load_opts *o, int argc);
void cli_load_opts_free(cli_load_opts *o);
/* Tries the common input options at argv[i] (--input-shape, --input-value,
 * --ops, --format, --no-infer): 1 consumed, 0 not one of them, -1 usage error
 * printed. */
int cli_parse_load_opt(cli_args *a, cli_load_opts *o);
/* Help lines for the common input options. */
void cli_help_load_opts(FILE *f);

/* What the loader learned besides the graph. */
typedef struct cli_load_info {
    cli_format format;       /* the format actually read */
    bool have_onnx;          /* onnx holds the importer's report */
    ag_onnx_report onnx;
    bool inferred;           /* inference ran (infer holds its stats) */
    ag_infer_stats infer;
    double load_ms;          /* reading and parsing (ONNX: import, inference included) */
    double infer_ms;         /* inference alone; negative when included in load_ms */
    ag_ops *ops;             /* registry with the --ops files (NULL when none given) */
} cli_load_info;

/* Loads path ("-" = standard input) into *out following opts.  On failure the
 * error has been printed and nothing is left allocated.  On success the caller
 * owns *out and info->ops. */
bool cli_load_graph(ag_ctx *ctx, const char *path, const cli_load_opts *opts, ag_graph **out,
                    cli_load_info *info);

/* ---- the frame of every command that reads one graph ----
 * Parses the shared input options, the command's own options and one INPUT,
 * loads the graph and hands it to run.  option returns 1 when it consumed
 * argv[a->i] (advancing a->i), 0 when the argument is not its option, -1
 * after printing a usage error.  With has_output, -o/--output FILE is
 * accepted and run writes through write_output. */
typedef struct cli_graph_cmd {
    const char *name;
    void (*help)(FILE *f);
    int (*option)(cli_args *a, void *state);
    int (*run)(ag_ctx *ctx, ag_graph *g, cli_load_info *info, const char *input, const char *output,
               const cli_load_opts *lo, void *state);
    bool has_output;
} cli_graph_cmd;
int cli_graph_command(const cli_graph_cmd *cmd, void *state, int argc, char **argv);
/* Opens output (NULL: standard output), runs write on a sink to it, reports a
 * failure and removes a partial file.  Returns the exit code. */
int cli_write_output(ag_ctx *ctx, const char *output, ag_status (*write)(void *ud, ag_sink sink), void *ud);

/* Runs fmt on an in-memory stream and hands what it printed to sink in one
 * piece, so that text formatted with stdio meets the sink's error handling
 * like every other output.  AG_ENOMEM when the stream cannot be made. */
ag_status cli_sink_formatted(ag_sink sink, ag_status (*fmt)(FILE *m, const void *ud), const void *ud);

/* Prepares a pass run over g: the operator registry (builtin when no --ops
 * files were given; stored in info->ops) and an empty report.  On failure
 * prints the error and returns false. */
bool cli_pass_env(ag_ctx *ctx, ag_graph *g, cli_load_info *info, const char *input, ag_pass_env *env);

/* Monotonic clock in milliseconds, for --stats. */
double cli_now_ms(void);

/* ---- subcommands: run returns an exit code; help prints the full help ---- */
int cmd_convert(int argc, char **argv);
void cmd_convert_help(FILE *f);
int cmd_info(int argc, char **argv);
void cmd_info_help(FILE *f);
int cmd_dot(int argc, char **argv);
void cmd_dot_help(FILE *f);
int cmd_passes(int argc, char **argv);
void cmd_passes_help(FILE *f);
int cmd_opt(int argc, char **argv);
void cmd_opt_help(FILE *f);
int cmd_check(int argc, char **argv);
void cmd_check_help(FILE *f);
int cmd_place(int argc, char **argv);
void cmd_place_help(FILE *f);
int cmd_plan(int argc, char **argv);
void cmd_plan_help(FILE *f);
int cmd_verify(int argc, char **argv);
void cmd_verify_help(FILE *f);
int cmd_alloc_replay(int argc, char **argv);
void cmd_alloc_replay_help(FILE *f);

/* ---- pass explanations (tools/cmd_opt.c), shared by opt and check ---- */

/* One line "<prefix>isolation: pass=P rule="R" kind=K graph=G node=N
 * producer=A:I consumer=B:J" (docs/cli.md); control bytes in any field are
 * written as \xHH so the line stays one line. */
void cli_print_isolation(FILE *f, const char *prefix, const ag_isolation *iso);
/* One line "<prefix>warning: pass=P code=C message="M" nodes=A,B". */
void cli_print_warning(FILE *f, const char *prefix, const ag_warning *w);
/* Parses a --passes value (comma-separated names, "all" for every pass in
 * pipeline order; repeats allowed) into a malloc'ed array of registry
 * entries (free it).  An unknown name is reported on stderr with the list of
 * passes; false then. */
bool cli_parse_pass_list(const char *cmd, const char *list, const ag_pass_def ***out, uint32_t *count);

#endif
