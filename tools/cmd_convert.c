/* aliasguard convert: reads an ONNX model or a .agt file (with the common
 * input options) and prints the graph as .agt, the format every other tool
 * and test reads. */
#include <string.h>

#include "cli.h"

void cmd_convert_help(FILE *f)
{
    fputs("usage: aliasguard convert [options] INPUT\n"
          "\n"
          "Reads INPUT (an ONNX model or a .agt file, '-' for standard input) and\n"
          "prints it as .agt text.  Shape inference runs unless --no-infer is given,\n"
          "so the output carries the inferred dtypes and shapes.\n"
          "\n"
          "Options:\n"
          "  -o, --output FILE        write to FILE instead of standard output\n"
          "  --elide-bytes N          print tensor values larger than N bytes as elided\n"
          "                           (dtype, dims and digest only; default 4096)\n"
          "  --no-elide               print every tensor value in full\n"
          "  -h, --help               show this help\n",
          f);
    cli_help_load_opts(f);
}

static int convert_option(cli_args *a, void *state)
{
    ag_text_write_opts *wo = state;
    const char *v;
    int r;
    if ((r = cli_opt_value(a, "--elide-bytes", NULL, &v)) != 0)
        return r < 0 || !cli_parse_u64(a->cmd, "--elide-bytes", v, &wo->elide_bytes) ? -1 : 1;
    if (cli_opt_flag(a, "--no-elide", NULL)) {
        wo->elide_bytes = UINT64_MAX;
        return 1;
    }
    return 0;
}

typedef struct convert_job {
    const ag_graph *g;
    const ag_text_write_opts *wo;
} convert_job;

static ag_status convert_write(void *ud, ag_sink sink)
{
    const convert_job *j = ud;
    return ag_text_write(j->g, j->wo, sink);
}

static int convert_run(ag_ctx *ctx, ag_graph *g, cli_load_info *info, const char *input, const char *output,
                       const cli_load_opts *lo, void *state)
{
    (void)info, (void)input, (void)lo;
    convert_job j = {g, state};
    return cli_write_output(ctx, output, convert_write, &j);
}

int cmd_convert(int argc, char **argv)
{
    static const cli_graph_cmd cmd = {"convert", cmd_convert_help, convert_option, convert_run, true};
    ag_text_write_opts wo = ag_text_write_defaults();
    return cli_graph_command(&cmd, &wo, argc, argv);
}
