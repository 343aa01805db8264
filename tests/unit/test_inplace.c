/* Tests of in-place merging in the memory planner: a chain of candidates
 * shares one buffer, each filter (size, later reader, later writer,
 * read-only source, continuous group, atomic output) refuses its case, a
 * branch temporary is merged inside its branch, every plan passes the
 * checker, the layout engine's hypothetical-merge check answers like the
 * checker table says and changes nothing, and allocation failures leak
 * nothing. */
#include "support/agtest.h"

#include "aliasguard/plan.h"
#include "passes/layout_internal.h"
#include "plan/plan_internal.h"

#include <stdio.h>

static const char *const k_ops = "Relu Abs Neg Add Narrow : out0=inplace:0\n";

static const char *const k_graph =
    "graph g {\n"
    "  c = Data() -> (bool[]) <index = 0>\n"
    "  x = Data() -> (f32[256]) <index = 1>\n"
    "  y = Data() -> (f32[256]) <index = 2>\n"
    /* chain: b over a; c2 writes a user output */
    "  a = Abs(x) -> (f32[256])\n"
    "  b = Relu(a) -> (f32[256])\n"
    "  c2 = Relu(b) -> (f32[256])\n"
    /* size: n is smaller than its input */
    "  m = Abs(x) -> (f32[256])\n"
    "  n = Narrow(m) -> (f32[128])\n"
    /* later reader: q reads p after r */
    "  p = Abs(x) -> (f32[256])\n"
    "  r = Relu(p) -> (f32[256])\n"
    "  q = Add(r, p) -> (f32[256])\n"
    /* later writer: Assign writes w0 after v */
    "  w0 = Abs(x) -> (f32[256])\n"
    "  v = Relu(w0) -> (f32[256])\n"
    "  w = Assign(w0, y) -> (f32[256])\n"
    /* read-only: k reads a user input */
    "  k = Relu(x) -> (f32[256])\n"
    /* continuous group and atomic output */
    "  g0 = Abs(x) -> (f32[256])\n"
    "  g1 = Relu(g0) -> (f32[256])\n"
    "  t0 = Abs(x) -> (f32[256])\n"
    "  at = Relu(t0) -> (f32[256]) <atomic_output_index = [0]>\n"
    "  ar = HcomAllReduce(g1, k) -> (f32[256], f32[256])\n"
    /* a branch temporary */
    "  i = If(c, x) -> (f32[256]) {\n"
    "    graph then {\n"
    "      t = Data() -> (f32[256]) <_parent_node_index = 1>\n"
    "      ta = Neg(t) -> (f32[256])\n"
    "      tb = Abs(ta) -> (f32[256])\n"
    "      tc = Neg(tb) -> (f32[256])\n"
    "      tout = NetOutput(tc <_parent_node_index = 0>)\n"
    "    }\n"
    "    graph else {\n"
    "      e = Data() -> (f32[256]) <_parent_node_index = 1>\n"
    "      eout = NetOutput(e <_parent_node_index = 0>)\n"
    "    }\n"
    "  }\n"
    "  out = NetOutput(c2, n, q, v, w, ar:0, ar:1, at, i)\n"
    "}\n";

typedef struct fixture {
    ag_ctx *ctx;
    ag_ops *ops;
    ag_graph *g;
} fixture;

static ag_status load(ag_ctx *ctx, ag_ops **ops, ag_graph **g)
{
    *g = NULL;
    ag_status st = ag_ops_create(ctx, ops);
    if (st != AG_OK)
        return st;
    st = ag_ops_load_text(*ops, k_ops, strlen(k_ops), "inplace.ops");
    if (st == AG_OK)
        st = ag_text_read(ctx, k_graph, strlen(k_graph), "test.agt", g);
    if (st != AG_OK) {
        ag_ops_destroy(*ops);
        *ops = NULL;
    }
    return st;
}

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    fx->ctx = agtest_ctx();
    assert_int_equal(load(fx->ctx, &fx->ops, &fx->g), AG_OK);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    ag_graph_destroy(fx->g);
    ag_ops_destroy(fx->ops);
    ag_ctx_destroy(fx->ctx);
    free(fx);
    return 0;
}

static ag_plan *build(fixture *fx, bool inplace)
{
    ag_plan_opts o = ag_plan_defaults();
    o.inplace = inplace;
    ag_plan *p = NULL;
    assert_int_equal(ag_plan_build(fx->ctx, fx->g, fx->ops, &o, &p), AG_OK);
    assert_int_equal(ag_plan_check(p), AG_OK);
    return p;
}

static const ag_plan_tensor *tensor_of(const fixture *fx, const ag_plan *p, const char *name)
{
    for (uint32_t k = 0; k < ag_plan_tensor_count(p); k++) {
        const ag_plan_tensor *t = ag_plan_tensor_at(p, k);
        if (strcmp(ag_node_name(fx->g, t->node), name) == 0 && t->output == 0)
            return t;
    }
    fail_msg("no tensor for node %s", name);
    return NULL;
}

static bool merged(const ag_plan *p, const char *node)
{
    for (uint32_t k = 0; k < ag_plan_inplace_count(p); k++)
        if (strcmp(ag_plan_inplace_at(p, k)->node, node) == 0)
            return true;
    return false;
}

static void test_chain_and_filters(void **state)
{
    fixture *fx = *state;
    ag_plan *p = build(fx, true);
    /* Exactly the chain's inner link and the branch temporary. */
    assert_int_equal(ag_plan_inplace_count(p), 2);
    assert_true(merged(p, "b"));
    assert_false(merged(p, "c2")); /* c2 writes a user output */
    assert_true(merged(p, "tb"));
    for (uint32_t k = 0; k < ag_plan_inplace_count(p); k++) {
        const ag_plan_inplace_rec *r = ag_plan_inplace_at(p, k);
        assert_int_equal(r->input, 0);
        assert_int_equal(r->output, 0);
        assert_non_null(strstr(r->reason, "inplace: registry inplace relation"));
    }
    const char *refused[] = {"n", "r", "v", "k", "g1", "at", "ta", "tc"};
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++)
        assert_false(merged(p, refused[k]));
    /* Merged tensors share the buffer and the offset. */
    const ag_plan_tensor *ta = tensor_of(fx, p, "a"), *tb = tensor_of(fx, p, "b");
    assert_int_equal(ta->buffer, tb->buffer);
    assert_int_equal(ta->offset, tb->offset);
    const ag_plan_tensor *t1 = tensor_of(fx, p, "ta"), *t2 = tensor_of(fx, p, "tb");
    assert_int_equal(t1->buffer, t2->buffer);
    assert_false(merged(p, "q")); /* q writes a user output */
    uint64_t on = ag_plan_peak_bytes(p);
    uint32_t bufs_on = ag_plan_buffer_count(p);
    ag_plan_destroy(p);

    p = build(fx, false);
    assert_int_equal(ag_plan_inplace_count(p), 0);
    assert_true(ag_plan_buffer_count(p) == bufs_on + 2);
    assert_true(ag_plan_peak_bytes(p) >= on);
    ag_plan_destroy(p);
}

/* Special-memory readers: r1 reads a in p2p, r2 reads s in host memory. */
static const char *const k_rts =
    "graph g {\n"
    "  x = Data() -> (f32[256]) <index = 0>\n"
    "  a = Abs(x) -> (f32[256])\n"
    "  r1 = Abs(a) -> (f32[256]) <_input_memory_type = [\"p2p\"]>\n"
    "  s = Add(a, r1) -> (f32[256])\n"
    "  r2 = Abs(s) -> (f32[256]) <_input_memory_type = [\"host\"]>\n"
    "  r3 = Abs(s) -> (f32[256])\n"
    "  t = Add(r2, r3) -> (f32[256])\n"
    "  out = NetOutput(t)\n"
    "}\n";

static uint32_t out_sym(const ag_symtab *t, const ag_graph *g, const char *node)
{
    ag_lanchor a = {ag_sub_find_node(g, AG_ROOT, node), 0, false};
    assert_int_not_equal(a.node, AG_NONE);
    uint32_t s = ag_symtab_symbol_of(t, &a);
    assert_int_not_equal(s, AG_NONE);
    return s;
}

/* The engine answers for symbols taken as one without touching the graph
 * or the table: two readers in different special memories conflict
 * (rts_special_in_and_rts_special_in, naming both inputs), readers in the
 * same one do not, a user input with a special reader is an absolute
 * conflict, and one query leaves no trace in the next. */
static void test_merge_check(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_ops *ops;
    ag_graph *g;
    assert_int_equal(ag_ops_create(ctx, &ops), AG_OK);
    assert_int_equal(ag_text_read(ctx, k_rts, strlen(k_rts), "rts.agt", &g), AG_OK);
    ag_pass_env env = {g, ops, NULL};
    ag_symtab *t = NULL;
    assert_int_equal(ag_symtab_build(&env, AG_ROOT, true, &t), AG_OK);
    uint32_t nodes = ag_graph_node_count(g), nsyms = ag_symtab_count(t);
    ag_layout_merge_checker *mc = NULL;
    assert_int_equal(ag_layout_merge_checker_create(ctx, &env, t, AG_ROOT, &mc), AG_OK);
    ag_layout_merge_verdict v;

    uint32_t as = out_sym(t, g, "a"), ss = out_sym(t, g, "s"), xs = out_sym(t, g, "x");
    uint32_t r1s = out_sym(t, g, "r1"), r3s = out_sym(t, g, "r3");
    /* Each symbol alone: no conflict. */
    assert_int_equal(ag_layout_merge_check(mc, &as, 1, &v), AG_OK);
    assert_false(v.conflict);
    uint32_t pair[2] = {as, ss};
    assert_int_equal(ag_layout_merge_check(mc, pair, 2, &v), AG_OK);
    assert_true(v.conflict);
    assert_string_equal(v.rule, "layout: rts_special_in_and_rts_special_in");
    assert_int_equal(v.attr_a, AG_LA_RTS_IN);
    assert_int_equal(v.attr_b, AG_LA_RTS_IN);
    assert_true(v.a.is_input && v.b.is_input);
    const char *na = ag_node_name(g, v.a.node), *nb = ag_node_name(g, v.b.node);
    assert_true((strcmp(na, "r1") == 0 && strcmp(nb, "r2") == 0) || (strcmp(na, "r2") == 0 && strcmp(nb, "r1") == 0));
    /* a's symbol with r3's output: one special reader, normal anchors. */
    uint32_t ok2[2] = {as, r3s};
    assert_int_equal(ag_layout_merge_check(mc, ok2, 2, &v), AG_OK);
    assert_false(v.conflict);
    /* A user input and a special reader: absolute. */
    uint32_t ui[2] = {xs, as};
    assert_int_equal(ag_layout_merge_check(mc, ui, 2, &v), AG_OK);
    assert_true(v.conflict);
    assert_non_null(strstr(v.rule, "absolute USER_MEMORY_INPUT x RTS_SPECIAL_TYPE_INPUT"));
    /* Three symbols, and the same query twice: the same answer. */
    uint32_t three[3] = {r1s, as, r3s};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(ag_layout_merge_check(mc, three, 3, &v), AG_OK);
        assert_false(v.conflict);
    }
    assert_int_equal(ag_layout_merge_check(mc, pair, 2, &v), AG_OK);
    assert_true(v.conflict);
    /* Nothing changed. */
    assert_int_equal(ag_graph_node_count(g), nodes);
    assert_int_equal(ag_symtab_count(t), nsyms);
    assert_int_not_equal(out_sym(t, g, "a"), out_sym(t, g, "s"));
    ag_layout_merge_checker_destroy(mc);
    ag_symtab_destroy(t);

    /* The planner: s may not take a's buffer and says why. */
    ag_plan *p = NULL;
    assert_int_equal(ag_plan_build(ctx, g, ops, NULL, &p), AG_OK);
    assert_int_equal(ag_plan_check(p), AG_OK);
    assert_false(merged(p, "s"));
    bool found = false;
    for (uint32_t k = 0; k < ag_plan_inplace_refused_count(p); k++) {
        const ag_plan_inplace_rec *r = ag_plan_inplace_refused_at(p, k);
        if (strcmp(r->node, "s") == 0) {
            found = true;
            assert_int_equal(r->input, 0);
            assert_int_equal(r->output, 0);
            assert_non_null(strstr(r->reason, "layout: rts_special_in_and_rts_special_in: "));
            assert_non_null(strstr(r->reason, "'r1' (Abs) input 0 [RTS_SPECIAL_TYPE_INPUT]"));
        }
    }
    assert_true(found);
    ag_plan_destroy(p);
    ag_graph_destroy(g);
    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
}

static ag_status sweep_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_ops *ops = NULL;
    ag_graph *g = NULL;
    ag_plan *p = NULL;
    ag_status st = load(ctx, &ops, &g);
    if (st == AG_OK)
        st = ag_plan_build(ctx, g, ops, NULL, &p);
    if (st == AG_OK)
        st = ag_plan_check(p);
    if (st == AG_OK && ag_plan_inplace_count(p) != 2)
        st = AG_EINVAL;
    ag_plan_destroy(p);
    ag_graph_destroy(g);
    ag_ops_destroy(ops);
    return st;
}

static void test_oom_sweep(void **state)
{
    (void)state;
    assert_true(AG_TEST_OOM_SWEEP(sweep_body, NULL) > 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_chain_and_filters, setup, teardown),
        cmocka_unit_test(test_merge_check),
        cmocka_unit_test(test_oom_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
