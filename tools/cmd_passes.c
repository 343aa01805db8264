/* aliasguard passes: lists the compile passes in pipeline order (DESIGN.md,
 * "The compile pipeline"), one line each: the name `opt --passes` takes and
 * what the pass does.  The list comes from the library's registry. */
#include <string.h>

#include "cli.h"

void cmd_passes_help(FILE *f)
{
    fputs("usage: aliasguard passes [-h]\n"
          "\n"
          "Lists the compile passes in the order the pipeline ('aliasguard check',\n"
          "'aliasguard opt --passes=all') runs them, one per line: the name to give\n"
          "to 'aliasguard opt --passes=...', then what the pass does.\n",
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
    /* Names are padded to one column; two spaces at least separate them. */
    int width = 0;
    for (uint32_t k = 0; k < ag_pass_count(); k++) {
        int len = (int)strlen(ag_pass_at(k)->name);
        width = len > width ? len : width;
    }
    for (uint32_t k = 0; k < ag_pass_count(); k++)
        printf("%-*s  %s\n", width, ag_pass_at(k)->name, ag_pass_at(k)->summary);
    return cli_close_output(stdout, NULL, true) ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}
