/* aliasguard dot: exports a graph to Graphviz DOT (src/ir/dot.c): nodes
 * labelled with name and type, subgraphs as clusters, data edges labelled
 * with anchors, dtype and shape, control edges dashed. */
#include "cli.h"

void cmd_dot_help(FILE *f)
{
    fputs("usage: aliasguard dot [options] INPUT\n"
          "\n"
          "Writes INPUT (an ONNX model or a .agt file, '-' for standard input) as a\n"
          "Graphviz digraph: one cluster per subgraph, attached to its control node by\n"
          "a dashed edge; data edges labelled 'out->in' with dtype and shape; control\n"
          "edges dashed.  Render with e.g. 'dot -Tsvg'.\n"
          "\n"
          "Options:\n"
          "  -o, --output FILE        write to FILE instead of standard output\n"
          "  -h, --help               show this help\n",
          f);
    cli_help_load_opts(f);
}

static ag_status dot_write(void *ud, ag_sink sink)
{
    return ag_dot_write(ud, sink);
}

static int dot_run(ag_ctx *ctx, ag_graph *g, cli_load_info *info, const char *input, const char *output,
                   const cli_load_opts *lo, void *state)
{
    (void)info, (void)input, (void)lo, (void)state;
    return cli_write_output(ctx, output, dot_write, g);
}

int cmd_dot(int argc, char **argv)
{
    static const cli_graph_cmd cmd = {"dot", cmd_dot_help, NULL, dot_run, true};
    return cli_graph_command(&cmd, NULL, argc, argv);
}
