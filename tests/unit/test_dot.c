/* Unit tests of the Graphviz exporter (src/ir/dot.c): clusters nest like the
 * subgraphs, data edges carry anchors and types, control and subgraph edges
 * are dashed, names are escaped, sink and allocation failures are reported. */
#include "support/agtest.h"

#include <stdio.h>

#define TRY(expr)                      \
    do {                               \
        ag_status try_st_ = (expr);    \
        if (try_st_ != AG_OK)          \
            return try_st_;            \
    } while (0)

typedef struct ids {
    ag_node_id x, weird, cond, ctl, iff, out, t_in, t_neg, t_out, inner_if, e_in, e_out, i_c;
    ag_sub_id then_g, else_g, inner;
} ids;

static ag_status set_type(ag_graph *g, ag_node_id n, uint32_t o, ag_dtype dt, int32_t rank, const int64_t *dims)
{
    ag_tensor_desc *d = ag_node_output_desc(g, n, o);
    d->dtype = dt;
    return ag_desc_set_shape(g, d, rank, dims);
}

/* Root: x, a node whose name needs escaping, an If with then/else subgraphs
 * (then holds another If with a subgraph of its own), a control edge. */
static ag_status build(ag_ctx *ctx, ag_graph **out, ids *id)
{
    ag_graph *g;
    TRY(ag_graph_create(ctx, "main \"g\"", &g));
    ag_status st;
    const int64_t dims[] = {2, 3};
    const int64_t part[] = {AG_DIM_UNKNOWN, 3};
#define B(expr)                 \
    if ((st = (expr)) != AG_OK) \
        goto fail
    B(ag_graph_add_node(g, AG_ROOT, "Data", "x", 0, 1, &id->x));
    B(set_type(g, id->x, 0, AG_DT_F32, 2, dims));
    B(ag_graph_add_node(g, AG_ROOT, "Relu", "a\"b\\c\nd\x01", 1, 1, &id->weird));
    B(set_type(g, id->weird, 0, AG_DT_F32, 2, part));
    B(ag_graph_add_edge(g, id->x, 0, id->weird, 0));
    B(ag_graph_add_node(g, AG_ROOT, "Data", "cond", 0, 1, &id->cond));
    B(set_type(g, id->cond, 0, AG_DT_BOOL, 0, NULL));
    B(ag_graph_add_node(g, AG_ROOT, "NoOp", "ctl", 0, 0, &id->ctl));
    B(ag_graph_add_node(g, AG_ROOT, "If", "if0", 2, 1, &id->iff));
    B(ag_graph_add_edge(g, id->cond, 0, id->iff, 0));
    B(ag_graph_add_edge(g, id->weird, 0, id->iff, 1));
    B(ag_graph_add_ctrl_edge(g, id->ctl, id->iff));
    B(ag_graph_add_node(g, AG_ROOT, "NetOutput", "out", 1, 0, &id->out));
    B(ag_graph_add_edge(g, id->iff, 0, id->out, 0));

    B(ag_graph_add_subgraph(g, id->iff, "then_g", &id->then_g));
    B(ag_graph_add_subgraph(g, id->iff, "else_g", &id->else_g));
    B(ag_graph_add_node(g, id->then_g, "Data", "t_in", 0, 1, &id->t_in));
    B(ag_attrs_set_int(g, ag_node_attrs(g, id->t_in), "_parent_node_index", 1));
    B(ag_graph_add_node(g, id->then_g, "Neg", "t_neg", 1, 1, &id->t_neg));
    B(ag_graph_add_edge(g, id->t_in, 0, id->t_neg, 0));
    B(ag_graph_add_node(g, id->then_g, "If", "t_if", 1, 0, &id->inner_if));
    B(ag_graph_add_edge(g, id->t_in, 0, id->inner_if, 0));
    B(ag_graph_add_subgraph(g, id->inner_if, "inner", &id->inner));
    B(ag_graph_add_node(g, id->inner, "Constant", "i_c", 0, 1, &id->i_c));
    B(ag_graph_add_node(g, id->then_g, "NetOutput", "t_out", 1, 0, &id->t_out));
    B(ag_graph_add_edge(g, id->t_neg, 0, id->t_out, 0));
    B(ag_graph_add_node(g, id->else_g, "Data", "e_in", 0, 1, &id->e_in));
    B(ag_graph_add_node(g, id->else_g, "NetOutput", "e_out", 1, 0, &id->e_out));
    B(ag_graph_add_edge(g, id->e_in, 0, id->e_out, 0));
#undef B
    *out = g;
    return AG_OK;
fail:
    ag_graph_destroy(g);
    return st;
}

static char *dot_of(ag_graph *g)
{
    ag_ctx *ctx = ag_graph_ctx(g);
    ag_membuf mb;
    ag_membuf_init(&mb, ctx);
    ag_status st = ag_dot_write(g, ag_sink_membuf(&mb));
    if (st != AG_OK)
        fprintf(stderr, "ag_dot_write: %s\n", ag_ctx_errmsg(ctx));
    assert_int_equal(st, AG_OK);
    char *s = malloc(mb.len + 1);
    assert_non_null(s);
    memcpy(s, mb.data, mb.len + 1);
    ag_membuf_free(&mb);
    return s;
}

static const char *find(const char *hay, const char *needle)
{
    const char *p = strstr(hay, needle);
    if (!p)
        fprintf(stderr, "missing in DOT output: %s\n--- output ---\n%s\n", needle, hay);
    assert_non_null(p);
    return p;
}

static void test_dot_structure(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g;
    ids id;
    assert_int_equal(build(ctx, &g, &id), AG_OK);
    char *s = dot_of(g);
    char want[256];

    /* Header: the root name is escaped in the graph id and the label. */
    const char *head = "digraph \"main \\\"g\\\"\" {\n";
    assert_true(strncmp(s, head, strlen(head)) == 0);
    find(s, "compound=true");
    assert_int_equal(s[strlen(s) - 2], '}');

    /* Nodes "name\ntype"; quote, backslash, newline and control byte escaped. */
    snprintf(want, sizeof want, "n%u [label=\"x\\nData\"];", id.x);
    find(s, want);
    snprintf(want, sizeof want, "n%u [label=\"a\\\"b\\\\c\\nd\\\\x01\\nRelu\"];", id.weird);
    find(s, want);
    assert_null(strchr(s, '\x01'));

    /* Clusters nest: then_g holds inner, else_g comes after then_g closes. */
    snprintf(want, sizeof want, "subgraph cluster_%u {", id.then_g);
    const char *c_then = find(s, want);
    snprintf(want, sizeof want, "subgraph cluster_%u {", id.inner);
    const char *c_inner = find(s, want);
    snprintf(want, sizeof want, "subgraph cluster_%u {", id.else_g);
    const char *c_else = find(s, want);
    assert_true(c_then < c_inner && c_inner < c_else);
    find(c_then, "label=\"then_g\\n(subgraph of if0 If)\";");
    snprintf(want, sizeof want, "n%u [label=\"t_neg\\nNeg\"];", id.t_neg);
    const char *d_neg = find(s, want);
    assert_true(c_then < d_neg && d_neg < c_inner);
    snprintf(want, sizeof want, "n%u [label=\"i_c\\nConstant\"];", id.i_c);
    const char *d_ic = find(s, want);
    assert_true(c_inner < d_ic && d_ic < c_else);
    /* A cluster declares all of its own nodes before its nested clusters. */
    snprintf(want, sizeof want, "n%u [label=\"t_out\\nNetOutput\"];", id.t_out);
    const char *d_tout = find(s, want);
    assert_true(c_then < d_tout && d_tout < c_inner);
    /* Root nodes come before every cluster. */
    snprintf(want, sizeof want, "n%u [label=\"out\\nNetOutput\"];", id.out);
    assert_true(find(s, want) < c_then);

    /* Data edges: "o→i" and the producer's dtype and shape. */
    snprintf(want, sizeof want, "n%u -> n%u [label=\"0\xe2\x86\x92" "0\\nf32[2,3]\"];", id.x, id.weird);
    find(s, want);
    snprintf(want, sizeof want, "n%u -> n%u [label=\"0\xe2\x86\x92" "1\\nf32[?,3]\"];", id.weird, id.iff);
    find(s, want);
    snprintf(want, sizeof want, "n%u -> n%u [label=\"0\xe2\x86\x92" "0\\nbool[]\"];", id.cond, id.iff);
    find(s, want);
    snprintf(want, sizeof want, "n%u -> n%u [label=\"0\xe2\x86\x92" "0\\n?\"];", id.t_in, id.t_neg);
    find(s, want);
    /* Control edge dashed; subgraph attachment dashed into the cluster. */
    snprintf(want, sizeof want, "n%u -> n%u [style=dashed];", id.ctl, id.iff);
    find(s, want);
    snprintf(want, sizeof want, "n%u -> a%u [style=dashed, color=\"#3060a0\", lhead=cluster_%u];", id.iff,
             id.then_g, id.then_g);
    find(s, want);
    snprintf(want, sizeof want, "n%u -> a%u [style=dashed, color=\"#3060a0\", lhead=cluster_%u];",
             id.inner_if, id.inner, id.inner);
    find(s, want);
    snprintf(want, sizeof want, "a%u [shape=point, style=invis", id.else_g);
    assert_true(find(s, want) > c_else);

    /* Braces balance: every cluster is closed. */
    int depth = 0;
    bool in_str = false;
    for (const char *p = s; *p; p++) {
        if (*p == '\\' && in_str) {
            p++;
            continue;
        }
        if (*p == '"')
            in_str = !in_str;
        else if (!in_str && *p == '{')
            depth++;
        else if (!in_str && *p == '}')
            depth--;
        assert_true(depth >= 0);
    }
    assert_int_equal(depth, 0);
    assert_false(in_str);

    free(s);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_dot_empty_graph(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g;
    assert_int_equal(ag_graph_create(ctx, "empty", &g), AG_OK);
    char *s = dot_of(g);
    assert_non_null(strstr(s, "digraph \"empty\" {"));
    assert_null(strstr(s, "cluster"));
    assert_null(strstr(s, "->"));
    free(s);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

/* A sink that fails on its second write. */
typedef struct flaky {
    int calls;
} flaky;

static ag_status flaky_write(void *ud, const void *data, size_t len)
{
    (void)data;
    (void)len;
    flaky *f = ud;
    return ++f->calls >= 2 ? AG_EIO : AG_OK;
}

static void test_dot_sink_failure(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g;
    assert_int_equal(ag_graph_create(ctx, "big", &g), AG_OK);
    /* Enough output for several blocks, so the failing write is not the last. */
    ag_node_id prev = AG_NONE;
    for (int k = 0; k < 2000; k++) {
        ag_node_id n = agtest_node(g, AG_ROOT, "Relu", NULL, 1, 1);
        if (prev != AG_NONE)
            agtest_edge(g, prev, 0, n, 0);
        prev = n;
    }
    flaky f = {0};
    ag_sink sink = {flaky_write, &f};
    assert_int_equal(ag_dot_write(g, sink), AG_EIO);
    assert_int_equal(f.calls, 2); /* nothing more is written after a failure */
    assert_errmsg(ctx, "dot");
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

/* OOM sweep over building the graph and exporting it into a memory buffer;
 * when both succeed the output must equal the reference. */
static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    const char *ref = ud;
    ag_graph *g;
    ids id;
    TRY(build(ctx, &g, &id));
    ag_membuf mb;
    ag_membuf_init(&mb, ctx);
    ag_status st = ag_dot_write(g, ag_sink_membuf(&mb));
    if (st == AG_OK)
        assert_string_equal(mb.data, ref);
    ag_membuf_free(&mb);
    ag_graph_destroy(g);
    return st;
}

static void test_dot_oom(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g;
    ids id;
    assert_int_equal(build(ctx, &g, &id), AG_OK);
    char *ref = dot_of(g);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
    uint64_t runs = AG_TEST_OOM_SWEEP(oom_body, ref);
    assert_true(runs > 10);
    free(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dot_structure),
        cmocka_unit_test(test_dot_empty_graph),
        cmocka_unit_test(test_dot_sink_failure),
        cmocka_unit_test(test_dot_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
