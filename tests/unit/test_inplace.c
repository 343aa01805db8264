/* Tests of in-place merging in the memory planner: a chain of candidates
 * shares one buffer, each filter (size, later reader, later writer,
 * read-only source, continuous group, atomic output) refuses its case, a
 * branch temporary is merged inside its branch, every plan passes the
 * checker, the layout test is sound against the checker table, and
 * allocation failures leak nothing. */
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

/* The layout test admits only anchors whose attributes are normal input,
 * normal output, reference output or user output; no checker row may pair
 * two of those, or a merge it admits could still conflict. */
static void test_neutral_attrs_never_checked(void **state)
{
    (void)state;
    uint32_t neutral = (1u << AG_LA_NORMAL_IN) | (1u << AG_LA_NORMAL_OUT) | (1u << AG_LA_REF_OUT) |
                       (1u << AG_LA_USER_OUT);
    for (uint32_t r = 0; r < ag_layout_checker_nrows; r++) {
        const ag_layout_checker_row *row = &ag_layout_checker_rows[r];
        bool a = (neutral >> row->attr_a) & 1u, b = (neutral >> row->attr_b) & 1u;
        if (a && b)
            fail_msg("checker row %s pairs two neutral attributes", row->name);
    }
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
        cmocka_unit_test(test_neutral_attrs_never_checked),
        cmocka_unit_test(test_oom_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
