/* Unit tests of the memory symbol table: chains through views, While and
 * If boundaries, Merge with its union tie rule and NextIteration, references
 * to variables by name, unconnected inputs, lexicographic symbol order, a
 * branch mapped alone, errors on broken graphs, and an allocation-failure
 * sweep. */
#include "support/agtest.h"

#include "passes/symbols.h"

#include <stdio.h>

typedef struct fixture {
    ag_ctx *ctx;
    ag_graph *g;
    ag_ops *ops;
} fixture;

static void fx_open(fixture *fx, const char *text)
{
    fx->ctx = agtest_ctx();
    fx->g = NULL;
    if (ag_text_read(fx->ctx, text, strlen(text), "test.agt", &fx->g) != AG_OK)
        fail_msg("parse: %s", ag_ctx_errmsg(fx->ctx));
    assert_int_equal(ag_ops_create(fx->ctx, &fx->ops), AG_OK);
}

static void fx_close(fixture *fx)
{
    ag_ops_destroy(fx->ops);
    ag_graph_destroy(fx->g);
    ag_ctx_destroy(fx->ctx);
}

/* Every symbol in table order as "name: a b c\n" into buf. */
static void dump(const ag_graph *g, const ag_symtab *t, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (uint32_t k = 0; k < ag_symtab_count(t); k++) {
        uint32_t s = ag_symtab_at(t, k);
        len += (size_t)snprintf(buf + len, cap - len, "%s:", ag_symtab_name(t, s));
        for (uint32_t i = 0; i < ag_symtab_size(t, s); i++) {
            char a[128];
            const ag_lanchor *x = ag_symtab_anchor_at(t, s, i);
            ag_lanchor_format(g, x, a, sizeof a);
            assert_int_equal(ag_symtab_symbol_of(t, x), s);
            len += (size_t)snprintf(buf + len, cap - len, " %s", a);
        }
        len += (size_t)snprintf(buf + len, cap - len, "\n");
        assert_true(len < cap);
    }
}

static void expect_symbols(const char *text, ag_sub_id top_or_none, const char *sub, bool nested, const char *want)
{
    fixture fx;
    fx_open(&fx, text);
    ag_sub_id top = sub ? ag_graph_find_sub(fx.g, sub) : top_or_none;
    assert_int_not_equal(top, AG_NONE);
    ag_pass_env env = {fx.g, fx.ops, NULL};
    ag_symtab *t = NULL;
    if (ag_symtab_build(&env, top, nested, &t) != AG_OK)
        fail_msg("build: %s", ag_ctx_errmsg(fx.ctx));
    char buf[4096];
    dump(fx.g, t, buf, sizeof buf);
    if (strcmp(buf, want) != 0)
        fail_msg("symbols:\n%s\nwanted:\n%s", buf, want);
    ag_symtab_destroy(t);
    fx_close(&fx);
}

static void test_views_and_order(void **state)
{
    (void)state;
    /* Reshape and Squeeze are views: one buffer from x to n's input; symbols
     * come in name order (a before n before x) whatever the node order. */
    expect_symbols("graph g {\n"
                   "  x = Data() -> (f32[4]) <index = 0>\n"
                   "  shape = Const() -> (i64[1] = {4})\n"
                   "  r = Reshape(x, shape) -> (f32[4])\n"
                   "  s = Squeeze(r) -> (f32[4])\n"
                   "  n = Neg(s) -> (f32[4])\n"
                   "  a = Abs(x, -) -> (f32[4])\n"
                   "  out = NetOutput(n, a)\n"
                   "}\n",
                   AG_ROOT, NULL, true,
                   "a_in_1: a_in_1\n"
                   "a_out_0: a_out_0 out_in_1\n"
                   "n_out_0: n_out_0 out_in_0\n"
                   "shape_out_0: shape_out_0 r_in_1\n"
                   "x_out_0: x_out_0 r_in_0 r_out_0 s_in_0 s_out_0 n_in_0 a_in_0\n");
}

static const char *while_graph = "graph g {\n"
                                 "  x = Data() -> (f32[4]) <index = 0>\n"
                                 "  w = While(x) -> (f32[4]) {\n"
                                 "    graph cond {\n"
                                 "      cd = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                                 "      red = ReduceSum(cd) -> (f32[])\n"
                                 "      cout = NetOutput(red)\n"
                                 "    }\n"
                                 "    graph body {\n"
                                 "      bd = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                                 "      bn = Neg(bd) -> (f32[4])\n"
                                 "      bout = NetOutput(bn <_parent_node_index = 0>)\n"
                                 "    }\n"
                                 "  }\n"
                                 "  out = NetOutput(w)\n"
                                 "}\n";

static void test_while_pass_through(void **state)
{
    (void)state;
    /* The While output passes its input through; cond and body Data stand
     * for x; the body result is the loop-carried buffer: one symbol.  The
     * subgraphs are visited right after w (before out), and the union of
     * bn's symbol (2 anchors) with w's (6) keeps w's list. */
    expect_symbols(while_graph, AG_ROOT, NULL, true,
                   "red_out_0: red_out_0 cout_in_0\n"
                   "x_out_0: x_out_0 w_in_0 w_out_0 cd_out_0 red_in_0 bd_out_0 bn_in_0 bn_out_0 bout_in_0 out_in_0\n");
    /* The body alone: its Data is a buffer of its own, its output unbound. */
    expect_symbols(while_graph, AG_NONE, "body", false,
                   "bd_out_0: bd_out_0 bn_in_0\n"
                   "bn_out_0: bn_out_0 bout_in_0\n");
}

static void test_if_boundaries(void **state)
{
    (void)state;
    /* Branch Data follow the parent's input, branch results join the If
     * output.  The branches are visited right after r: the then result is
     * x's buffer (3 anchors) and r's output has 1, so x's symbol survives. */
    expect_symbols("graph g {\n"
                   "  c = Data() -> (bool[]) <index = 0>\n"
                   "  x = Data() -> (f32[4]) <index = 1>\n"
                   "  r = If(c, x) -> (f32[4]) {\n"
                   "    graph then {\n"
                   "      t = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                   "      tout = NetOutput(t <_parent_node_index = 0>)\n"
                   "    }\n"
                   "    graph else {\n"
                   "      e = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                   "      en = Neg(e) -> (f32[4])\n"
                   "      eout = NetOutput(en <_parent_node_index = 0>)\n"
                   "    }\n"
                   "  }\n"
                   "  out = NetOutput(r)\n"
                   "}\n",
                   AG_ROOT, NULL, true,
                   "c_out_0: c_out_0 r_in_0\n"
                   "x_out_0: x_out_0 r_in_1 t_out_0 r_out_0 tout_in_0 e_out_0 en_in_0 en_out_0 eout_in_0 out_in_0\n");
}

static void test_merge_union_tie(void **state)
{
    (void)state;
    /* a and b have one anchor each when Merge is reached: the tie keeps the
     * second (b's) symbol; the unconnected input with _next_iteration_node
     * brings ni's output; Merge's output is a view of input 0. */
    expect_symbols("graph g {\n"
                   "  x = Data() -> (f32[4]) <index = 0>\n"
                   "  a = Relu(x) -> (f32[4])\n"
                   "  b = Neg(x) -> (f32[4])\n"
                   "  m = Merge(a, b, -) -> (f32[4]) <_next_iteration_node = \"ni\">\n"
                   "  ni = NextIteration(m) -> (f32[4])\n"
                   "  out = NetOutput(ni)\n"
                   "}\n",
                   AG_ROOT, NULL, true,
                   "b_out_0: b_out_0 a_out_0 m_in_0 m_in_1 ni_out_0 m_out_0 ni_in_0 out_in_0\n"
                   "x_out_0: x_out_0 a_in_0 b_in_0\n");
    /* With a read twice before the Merge, a's symbol is the larger one. */
    expect_symbols("graph g {\n"
                   "  x = Data() -> (f32[4]) <index = 0>\n"
                   "  a = Relu(x) -> (f32[4])\n"
                   "  b = Neg(x) -> (f32[4])\n"
                   "  u = Abs(a) -> (f32[4])\n"
                   "  m = Merge(a, b) -> (f32[4])\n"
                   "  out = NetOutput(m, u)\n"
                   "}\n",
                   AG_ROOT, NULL, true,
                   "a_out_0: a_out_0 u_in_0 b_out_0 m_in_0 m_in_1 m_out_0 out_in_0\n"
                   "u_out_0: u_out_0 out_in_1\n"
                   "x_out_0: x_out_0 a_in_0 b_in_0\n");
}

static void test_ref_var_name(void **state)
{
    (void)state;
    /* k's output names the RefData v: it is v's buffer, not a new one; an
     * Assign's output refers to its input 0. */
    expect_symbols("graph g {\n"
                   "  v = RefData() -> (f32[4]) <index = 0>\n"
                   "  y = Data() -> (f32[4]) <index = 1>\n"
                   "  k = Neg(y) -> (f32[4] <ref_var_src_var_name = \"v\">)\n"
                   "  as = Assign(v, y) -> (f32[4])\n"
                   "  out = NetOutput(k, as)\n"
                   "}\n",
                   AG_ROOT, NULL, true,
                   "v_out_0: v_out_0 k_out_0 as_in_0 as_out_0 out_in_0 out_in_1\n"
                   "y_out_0: y_out_0 k_in_0 as_in_1\n");
}

static void expect_error(const char *text, const char *needle)
{
    fixture fx;
    fx_open(&fx, text);
    ag_pass_env env = {fx.g, fx.ops, NULL};
    ag_symtab *t = (ag_symtab *)&fx; /* must be reset to NULL */
    assert_int_equal(ag_symtab_build(&env, AG_ROOT, true, &t), AG_EINVAL);
    assert_null(t);
    assert_errmsg(fx.ctx, needle);
    fx_close(&fx);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("graph g {\n"
                 "  x = Data() -> (f32[4]) <index = 0>\n"
                 "  m = Merge(x, -) -> (f32[4]) <_next_iteration_node = \"nope\">\n"
                 "  out = NetOutput(m)\n"
                 "}\n",
                 "node \"m\" (Merge) input 1: _next_iteration_node \"nope\"");
    expect_error("graph g {\n"
                 "  x = Data() -> (f32[4]) <index = 0>\n"
                 "  c = PartitionedCall(x) -> (f32[4]) {\n"
                 "    graph sub {\n"
                 "      v = RefData() -> (f32[4])\n"
                 "      sout = NetOutput(v <_parent_node_index = 0>)\n"
                 "    }\n"
                 "  }\n"
                 "  out = NetOutput(c)\n"
                 "}\n",
                 "node \"v\" (RefData) output 0: a RefData inside a subgraph needs a control edge");
    /* A parent output index the verifier would reject, set after parsing. */
    fixture fx;
    fx_open(&fx, "graph g {\n"
                 "  x = Data() -> (f32[4]) <index = 0>\n"
                 "  c = PartitionedCall(x) -> (f32[4]) {\n"
                 "    graph sub {\n"
                 "      d = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                 "      sout = NetOutput(d <_parent_node_index = 0>)\n"
                 "    }\n"
                 "  }\n"
                 "  out = NetOutput(c)\n"
                 "}\n");
    ag_node_id sout = agtest_find(fx.g, ag_graph_find_sub(fx.g, "sub"), "sout");
    assert_int_equal(ag_attrs_set_int(fx.g, ag_node_input_desc(fx.g, sout, 0)->attrs, "_parent_node_index", 3), AG_OK);
    ag_pass_env env = {fx.g, fx.ops, NULL};
    ag_symtab *t = NULL;
    assert_int_equal(ag_symtab_build(&env, AG_ROOT, true, &t), AG_EINVAL);
    assert_null(t);
    assert_errmsg(fx.ctx, "node \"sout\" (NetOutput) input 0: _parent_node_index 3 out of range");
    fx_close(&fx);
}

static void test_subgraph_ref_data(void **state)
{
    (void)state;
    /* A RefData inside a subgraph refers to the subgraph input ordered before
     * it by a control edge. */
    expect_symbols("graph g {\n"
                   "  x = Data() -> (f32[4]) <index = 0>\n"
                   "  c = PartitionedCall(x) -> (f32[4]) {\n"
                   "    graph sub {\n"
                   "      d = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                   "      v = RefData(^d) -> (f32[4])\n"
                   "      sout = NetOutput(v <_parent_node_index = 0>)\n"
                   "    }\n"
                   "  }\n"
                   "  out = NetOutput(c)\n"
                   "}\n",
                   AG_ROOT, NULL, true,
                   "x_out_0: x_out_0 c_in_0 d_out_0 v_out_0 c_out_0 sout_in_0 out_in_0\n");
}

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_graph *g = NULL;
    ag_ops *ops = NULL;
    ag_symtab *t = NULL;
    ag_status st = ag_text_read(ctx, while_graph, strlen(while_graph), "t.agt", &g);
    if (st == AG_OK)
        st = ag_ops_create(ctx, &ops);
    if (st == AG_OK) {
        ag_pass_env env = {g, ops, NULL};
        st = ag_symtab_build(&env, AG_ROOT, true, &t);
        if (st == AG_OK)
            assert_int_equal(ag_symtab_count(t), 2);
        else
            assert_null(t);
    }
    ag_symtab_destroy(t);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    return st;
}

static void test_oom(void **state)
{
    (void)state;
    assert_true(AG_TEST_OOM_SWEEP(oom_body, NULL) > 5);
}

static void test_slots_and_new_nodes(void **state)
{
    (void)state;
    fixture fx;
    fx_open(&fx, while_graph);
    ag_pass_env env = {fx.g, fx.ops, NULL};
    ag_symtab *t = NULL;
    assert_int_equal(ag_symtab_build(&env, AG_ROOT, true, &t), AG_OK);
    /* Slots are dense and distinct. */
    uint32_t ns = ag_symtab_nslots(t);
    assert_true(ns > 0);
    char *seen = calloc(ns, 1);
    for (uint32_t k = 0; k < ag_symtab_count(t); k++) {
        uint32_t s = ag_symtab_at(t, k);
        for (uint32_t i = 0; i < ag_symtab_size(t, s); i++) {
            uint32_t sl = ag_symtab_slot(t, ag_symtab_anchor_at(t, s, i));
            assert_true(sl < ns);
            assert_int_equal(seen[sl], 0);
            seen[sl] = 1;
        }
    }
    free(seen);
    /* A node made after the build has no symbol. */
    ag_node_id n = agtest_node(fx.g, AG_ROOT, "Neg", "late", 1, 1);
    ag_lanchor a = {n, 0, true};
    assert_int_equal(ag_symtab_symbol_of(t, &a), AG_NONE);
    assert_int_equal(ag_symtab_slot(t, &a), AG_NONE);
    ag_symtab_destroy(t);
    fx_close(&fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_views_and_order),    cmocka_unit_test(test_while_pass_through),
        cmocka_unit_test(test_if_boundaries),      cmocka_unit_test(test_merge_union_tie),
        cmocka_unit_test(test_ref_var_name),       cmocka_unit_test(test_subgraph_ref_data),
        cmocka_unit_test(test_errors),             cmocka_unit_test(test_slots_and_new_nodes),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
