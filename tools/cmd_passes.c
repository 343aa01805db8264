/* aliasguard passes: lists the compile passes in pipeline order (DESIGN.md,
 * "The compile pipeline").  The table below grows as passes land; an empty
 * pipeline prints only the header. */
#include "cli.h"

typedef struct pass_row {
    const char *name;
    const char *what;
} pass_row;

/* In pipeline order.  No pass has landed yet; C has no zero-length arrays,
 * so the table is a pointer and a count. */
static const pass_row *const pass_rows = NULL;
static const size_t n_pass_rows = 0;

void cmd_passes_help(FILE *f)
{
    fputs("usage: aliasguard passes [-h]\n"
          "\n"
          "Lists the compile passes in the order the pipeline runs them, one per\n"
          "line after a header line: position, name and what the pass does.\n",
          f);
}

int cmd_passes(int argc, char **argv)
{
    cli_args a = {argc, argv, 1, "passes", false};
    while (a.i < a.argc) {
        if (cli_opt_end(&a))
            continue;
        if (cli_opt_flag(&a, "--help", "-h")) {
            cmd_passes_help(stdout);
            return CLI_EXIT_OK;
        }
        if (cli_is_option(&a))
            return cli_usage_error(a.cmd, "unknown option '%s'", a.argv[a.i]);
        return cli_usage_error(a.cmd, "unexpected argument '%s'", a.argv[a.i]);
    }
    printf("%-4s %-32s %s\n", "#", "PASS", "DESCRIPTION");
    for (size_t k = 0; k < n_pass_rows; k++)
        printf("%-4zu %-32s %s\n", k + 1, pass_rows[k].name, pass_rows[k].what);
    return cli_close_output(stdout, NULL, true) ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}
