/* Graphviz export of the IR (include/aliasguard/dot.h).  Nodes are declared
 * inside the cluster of their subgraph (clusters nest like the subgraphs), a
 * control node reaches each of its subgraphs through a dashed edge to an
 * invisible anchor in the cluster, and all edges come last so that a node's
 * first appearance, the one that fixes its cluster, is its declaration. */
#include <stdio.h>

#include "core/internal.h"

/* Output is gathered in a buffer and handed to the sink in blocks; the first
 * sink failure sticks (out.st) and every later write is skipped. */
typedef struct dot_writer {
    ag_bufout out;
    ag_ctx *ctx;
} dot_writer;

static void dw_put(dot_writer *w, const char *s, size_t n)
{
    ag_bufout_put(&w->out, s, n);
}

static void dw_str(dot_writer *w, const char *s)
{
    ag_bufout_puts(&w->out, s);
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void dw_printf(dot_writer *w, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    /* Only numbers and fixed words go through here; names use dw_escaped. */
    ag_assert_internal(n >= 0 && (size_t)n < sizeof tmp);
    if (n > 0)
        dw_put(w, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Writes s for use inside a double-quoted DOT string.  A quote and a
 * backslash are escaped (a backslash would otherwise start a DOT escape such
 * as \N or \l), a newline becomes \n, and other control bytes, which Graphviz
 * cannot show, are written as the visible text \xHH. */
static void dw_escaped(dot_writer *w, const char *s)
{
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c != '"' && c != '\\' && c >= 0x20 && c != 0x7f)
            continue;
        dw_put(w, run, (size_t)(s - run));
        run = s + 1;
        if (c == '"')
            dw_str(w, "\\\"");
        else if (c == '\\')
            dw_str(w, "\\\\");
        else if (c == '\n')
            dw_str(w, "\\n");
        else
            dw_printf(w, "\\\\x%02x", c);
    }
    dw_put(w, run, (size_t)(s - run));
}

/* Spelled as in the text IR: "f32[2,3,?]"; an unknown dim is '?', an
 * unknown rank prints no brackets, an unknown dtype is "?". */
static void dw_type(dot_writer *w, const ag_tensor_desc *d)
{
    const char *dt = d->dtype != AG_DT_UNDEFINED ? ag_dtype_name(d->dtype) : NULL;
    dw_str(w, dt ? dt : "?");
    if (d->rank < 0)
        return;
    dw_str(w, "[");
    for (int32_t k = 0; k < d->rank; k++) {
        if (k > 0)
            dw_str(w, ",");
        if (d->dims[k] < 0)
            dw_str(w, "?");
        else
            dw_printf(w, "%lld", (long long)d->dims[k]);
    }
    dw_str(w, "]");
}

static void dw_indent(dot_writer *w, uint32_t depth)
{
    for (uint32_t k = 0; k <= depth; k++)
        dw_str(w, "  ");
}

static void write_node(dot_writer *w, const ag_graph *g, ag_node_id n, uint32_t depth)
{
    dw_indent(w, depth);
    dw_printf(w, "n%u [label=\"", n);
    dw_escaped(w, ag_node_name(g, n));
    dw_str(w, "\\n");
    dw_escaped(w, ag_node_type(g, n));
    dw_str(w, "\"];\n");
}

/* Opens the cluster of subgraph s, declares its anchor and its own nodes. */
static void open_cluster(dot_writer *w, const ag_graph *g, ag_sub_id s)
{
    uint32_t depth = ag_sub_depth(g, s);
    ag_node_id parent = ag_sub_parent(g, s);
    dw_indent(w, depth - 1);
    dw_printf(w, "subgraph cluster_%u {\n", s);
    dw_indent(w, depth);
    dw_str(w, "label=\"");
    dw_escaped(w, ag_sub_name(g, s));
    dw_str(w, "\\n(subgraph of ");
    dw_escaped(w, ag_node_name(g, parent));
    dw_str(w, " ");
    dw_escaped(w, ag_node_type(g, parent));
    dw_str(w, ")\";\n");
    dw_indent(w, depth);
    dw_str(w, "style=rounded;\n");
    dw_indent(w, depth);
    dw_printf(w, "a%u [shape=point, style=invis, label=\"\"];\n", s);
    uint32_t nn = ag_sub_node_count(g, s);
    for (uint32_t k = 0; k < nn; k++)
        write_node(w, g, ag_sub_node_at(g, s, k), depth);
}

/* Walk of the subgraph tree without recursion (nesting depth comes from the
 * input and must not bound the C stack). */
typedef struct dot_frame {
    ag_sub_id sub;
    uint32_t k; /* next node of sub to look at */
    uint32_t j; /* next subgraph of that node */
} dot_frame;

static ag_status write_clusters(dot_writer *w, const ag_graph *g)
{
    ag_ctx *ctx = w->ctx;
    ag_vec stack = {0};
    dot_frame top = {AG_ROOT, 0, 0};
    if (ag_vec_push(ctx, &stack, sizeof top, &top) != AG_OK)
        return AG_OOM(ctx);
    while (stack.len > 0 && w->out.st == AG_OK) {
        dot_frame *f = &AG_VEC_AT(stack, dot_frame, stack.len - 1);
        if (f->k >= ag_sub_node_count(g, f->sub)) {
            if (f->sub != AG_ROOT) {
                dw_indent(w, ag_sub_depth(g, f->sub) - 1);
                dw_str(w, "}\n");
            }
            stack.len--;
            continue;
        }
        ag_node_id n = ag_sub_node_at(g, f->sub, f->k);
        if (f->j >= ag_node_num_subs(g, n)) {
            f->k++;
            f->j = 0;
            continue;
        }
        ag_sub_id child = ag_node_sub(g, n, f->j++);
        if (child == AG_NONE || !ag_sub_alive(g, child))
            continue;
        dot_frame cf = {child, 0, 0};
        if (ag_vec_push(ctx, &stack, sizeof cf, &cf) != AG_OK) {
            ag_vec_free(ctx, &stack, sizeof cf);
            return AG_OOM(ctx);
        }
        open_cluster(w, g, child);
    }
    ag_vec_free(ctx, &stack, sizeof top);
    return AG_OK;
}

static void write_edges(dot_writer *w, const ag_graph *g, ag_node_id n)
{
    uint32_t nout = ag_node_num_outputs(g, n);
    for (uint32_t o = 0; o < nout; o++) {
        const ag_tensor_desc *d = ag_node_output_desc_c(g, n, o);
        uint32_t nc = ag_node_output_nconsumers(g, n, o);
        for (uint32_t k = 0; k < nc; k++) {
            ag_port c = ag_node_output_consumer(g, n, o, k);
            dw_printf(w, "  n%u -> n%u [label=\"%u\xe2\x86\x92%u\\n", n, c.node, o, c.index);
            dw_type(w, d);
            dw_str(w, "\"];\n");
        }
    }
    uint32_t nctrl = ag_node_num_ctrl_out(g, n);
    for (uint32_t k = 0; k < nctrl; k++)
        dw_printf(w, "  n%u -> n%u [style=dashed];\n", n, ag_node_ctrl_out(g, n, k));
    uint32_t nsub = ag_node_num_subs(g, n);
    for (uint32_t k = 0; k < nsub; k++) {
        ag_sub_id s = ag_node_sub(g, n, k);
        if (s == AG_NONE || !ag_sub_alive(g, s))
            continue;
        dw_printf(w, "  n%u -> a%u [style=dashed, color=\"#3060a0\", lhead=cluster_%u];\n", n, s, s);
    }
}

ag_status ag_dot_write(const ag_graph *g, ag_sink sink)
{
    ag_ctx *ctx = ag_graph_ctx(g);
    /* The writer is large; keep it off the stack of callers with small stacks. */
    dot_writer *w = ag_alloc(ctx, sizeof *w);
    if (!w)
        return AG_OOM(ctx);
    ag_bufout_init(&w->out, sink);
    w->ctx = ctx;

    const char *root = ag_sub_name(g, AG_ROOT);
    dw_str(w, "digraph \"");
    dw_escaped(w, root);
    dw_str(w, "\" {\n  graph [compound=true, labelloc=t, label=\"");
    dw_escaped(w, root);
    dw_str(w, "\"];\n  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n"
              "  edge [fontname=\"Helvetica\", fontsize=10];\n");
    uint32_t nn = ag_sub_node_count(g, AG_ROOT);
    for (uint32_t k = 0; k < nn; k++)
        write_node(w, g, ag_sub_node_at(g, AG_ROOT, k), 0);
    ag_status st = write_clusters(w, g);
    if (st == AG_OK) {
        uint32_t nsub = ag_graph_sub_count(g);
        for (ag_sub_id s = 0; s < nsub && w->out.st == AG_OK; s++) {
            if (!ag_sub_alive(g, s))
                continue;
            uint32_t count = ag_sub_node_count(g, s);
            for (uint32_t k = 0; k < count && w->out.st == AG_OK; k++)
                write_edges(w, g, ag_sub_node_at(g, s, k));
        }
        dw_str(w, "}\n");
        st = ag_bufout_flush(&w->out);
        if (st != AG_OK && st != AG_ENOMEM)
            st = AG_ERR(ctx, st, "dot: writing the output failed (%s)", ag_status_str(st));
        else if (st == AG_ENOMEM && ag_ctx_last_status(ctx) != AG_ENOMEM)
            st = AG_OOM(ctx);
    }
    ag_free(ctx, w, sizeof *w);
    return st;
}
