/* Unit tests of the topological order (control edges, stored-order ties,
 * subgraph nodes right after their parent, cycles named) and of the structural
 * verifier: each inconsistency the API lets one build, plus storage corrupted
 * on purpose through the internal header to show every check can fire. */
#include "support/agtest.h"

#include "ir/graph_internal.h"

static ag_graph *new_graph(ag_ctx *ctx)
{
    ag_graph *g = NULL;
    assert_int_equal(ag_graph_create(ctx, "main", &g), AG_OK);
    return g;
}

static void expect_order(const ag_graph *g, const char *const *names, uint32_t n)
{
    ag_node_id order[64];
    uint32_t cnt = 0;
    assert_true(n <= 64);
    assert_int_equal(ag_graph_node_count(g), n);
    assert_int_equal(ag_graph_topo_order(g, order, &cnt), AG_OK);
    assert_int_equal(cnt, n);
    for (uint32_t k = 0; k < n; k++)
        if (strcmp(ag_node_name(g, order[k]), names[k]) != 0)
            fail_msg("position %u: got \"%s\", expected \"%s\"", k, ag_node_name(g, order[k]), names[k]);
}

static void test_order_ctrl_and_ties(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx);
    ag_node_id a = agtest_node(g, AG_ROOT, "Relu", "a", 1, 1);
    ag_node_id b = agtest_node(g, AG_ROOT, "Relu", "b", 0, 1);
    ag_node_id c = agtest_node(g, AG_ROOT, "Data", "c", 0, 1);
    ag_node_id d = agtest_node(g, AG_ROOT, "Data", "d", 0, 1);
    agtest_edge(g, c, 0, a, 0);
    agtest_ctrl(g, d, b);
    /* Ready {c, d}: c first (stored earlier), which frees a (stored first). */
    static const char *const want[] = {"c", "a", "d", "b"};
    expect_order(g, want, 4);

    /* An already topological stored order comes out unchanged. */
    ag_graph *h = new_graph(ctx);
    ag_node_id p = agtest_node(h, AG_ROOT, "Data", "p", 0, 1);
    ag_node_id q = agtest_node(h, AG_ROOT, "Data", "q", 0, 1);
    ag_node_id r = agtest_node(h, AG_ROOT, "Add", "r", 2, 1);
    ag_node_id s = agtest_node(h, AG_ROOT, "Relu", "s", 0, 0);
    agtest_edge(h, p, 0, r, 0);
    agtest_edge(h, q, 0, r, 1);
    agtest_ctrl(h, q, s);
    static const char *const want2[] = {"p", "q", "r", "s"};
    expect_order(h, want2, 4);
    /* A control edge against the stored order forces a reorder. */
    agtest_ctrl(h, s, p);
    static const char *const want3[] = {"q", "s", "p", "r"};
    expect_order(h, want3, 4);
    (void)r;

    ag_graph_destroy(g);
    ag_graph_destroy(h);
    ag_ctx_destroy(ctx);
}

static void test_order_subgraphs(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx);
    ag_node_id y = agtest_node(g, AG_ROOT, "Relu", "y", 1, 1);
    ag_node_id iff = agtest_node(g, AG_ROOT, "If", "if", 1, 1);
    ag_node_id x = agtest_node(g, AG_ROOT, "Data", "x", 0, 1);
    agtest_edge(g, x, 0, iff, 0);
    agtest_edge(g, iff, 0, y, 0);
    ag_sub_id th = agtest_sub(g, iff, "then");
    ag_sub_id el = agtest_sub(g, iff, "else");
    ag_node_id t2 = agtest_node(g, th, "NetOutput", "t2", 1, 0);
    ag_node_id t1 = agtest_node(g, th, "Data", "t1", 0, 1);
    agtest_edge(g, t1, 0, t2, 0);
    ag_node_id loop = agtest_node(g, el, "While", "loop", 0, 0);
    agtest_node(g, el, "Data", "e2", 0, 0);
    ag_sub_id body = agtest_sub(g, loop, "body");
    agtest_node(g, body, "Relu", "b1", 0, 0);
    static const char *const want[] = {"x", "if", "t1", "t2", "loop", "b1", "e2", "y"};
    expect_order(g, want, 8);
    assert_int_equal(ag_graph_verify(g), AG_OK);
    /* One subgraph alone: the same relative order, without nested nodes. */
    ag_node_id sub_order[8];
    uint32_t cnt = 99;
    assert_int_equal(ag_sub_topo_order(g, AG_ROOT, sub_order, &cnt), AG_OK);
    assert_int_equal(cnt, 3);
    assert_string_equal(ag_node_name(g, sub_order[0]), "x");
    assert_string_equal(ag_node_name(g, sub_order[1]), "if");
    assert_string_equal(ag_node_name(g, sub_order[2]), "y");
    assert_int_equal(ag_sub_topo_order(g, th, sub_order, &cnt), AG_OK);
    assert_int_equal(cnt, 2);
    assert_string_equal(ag_node_name(g, sub_order[0]), "t1");
    assert_string_equal(ag_node_name(g, sub_order[1]), "t2");
    assert_int_equal(ag_sub_topo_order(g, el, sub_order, &cnt), AG_OK);
    assert_int_equal(cnt, 2);
    assert_string_equal(ag_node_name(g, sub_order[0]), "loop");
    assert_string_equal(ag_node_name(g, sub_order[1]), "e2");
    assert_int_equal(ag_sub_topo_order(g, 99, sub_order, &cnt), AG_EINVAL);
    assert_int_equal(cnt, 0);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_cycles(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx);
    ag_node_id d = agtest_node(g, AG_ROOT, "Data", "d", 0, 1);
    ag_node_id a = agtest_node(g, AG_ROOT, "Add", "a", 2, 1);
    ag_node_id b = agtest_node(g, AG_ROOT, "Relu", "b", 1, 1);
    ag_node_id c = agtest_node(g, AG_ROOT, "Relu", "c", 0, 0);
    ag_node_id e = agtest_node(g, AG_ROOT, "Relu", "e", 1, 0);
    agtest_edge(g, d, 0, a, 0);
    agtest_edge(g, a, 0, b, 0);
    agtest_ctrl(g, b, c);
    agtest_edge(g, b, 0, e, 0); /* downstream of the cycle, not on it */
    assert_int_equal(ag_graph_verify(g), AG_OK);
    agtest_ctrl(g, c, a);
    ag_node_id order[8];
    uint32_t cnt = 99;
    assert_int_equal(ag_graph_topo_order(g, order, &cnt), AG_ECYCLE);
    assert_errmsg(ctx, "cycle in subgraph \"main\"");
    const char *msg = ag_ctx_errmsg(ctx);
    assert_true(strstr(msg, "\"a\"") && strstr(msg, "\"b\"") && strstr(msg, "\"c\""));
    /* The cycle is printed along its edges and closes on the node it starts at. */
    assert_true(strstr(msg, "\"a\" -> \"b\" -> \"c\" -> \"a\"") || strstr(msg, "\"b\" -> \"c\" -> \"a\" -> \"b\"") ||
                strstr(msg, "\"c\" -> \"a\" -> \"b\" -> \"c\""));
    assert_null(strstr(msg, "\"e\""));
    assert_null(strstr(msg, "\"d\""));
    assert_int_equal(ag_graph_verify(g), AG_ECYCLE);
    assert_int_equal(ag_graph_remove_ctrl_edge(g, c, a), AG_OK);
    assert_int_equal(ag_graph_verify(g), AG_OK);

    /* A data self-loop inside a subgraph. */
    ag_sub_id s = agtest_sub(g, a, "inner");
    ag_node_id z = agtest_node(g, s, "Add", "z", 2, 1);
    agtest_edge(g, z, 0, z, 1);
    assert_int_equal(ag_graph_topo_order(g, order, &cnt), AG_ECYCLE);
    assert_errmsg(ctx, "cycle in subgraph \"inner\" through node \"z\" (Add)");
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

/* ---- verifier: inconsistencies buildable through the API ---- */

static void test_verify_parent_index(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx);
    ag_node_id iff = agtest_node(g, AG_ROOT, "If", "if", 2, 1);
    ag_sub_id th = agtest_sub(g, iff, "then");
    ag_node_id d = agtest_node(g, th, "Data", "d", 0, 1);
    ag_node_id o = agtest_node(g, th, "NetOutput", "o", 1, 0);
    agtest_edge(g, d, 0, o, 0);
    ag_attrs *da = ag_node_attrs(g, d);
    ag_attrs *oa = ag_node_input_desc(g, o, 0)->attrs;

    assert_int_equal(ag_attrs_set_int(g, da, "_parent_node_index", 1), AG_OK);
    assert_int_equal(ag_attrs_set_int(g, oa, "_parent_node_index", 0), AG_OK);
    assert_int_equal(ag_graph_verify(g), AG_OK);

    assert_int_equal(ag_attrs_set_int(g, da, "_parent_node_index", 2), AG_OK);
    assert_int_equal(ag_graph_verify(g), AG_EVERIFY);
    assert_errmsg(ctx, "node \"d\" (Data): _parent_node_index 2 out of range (parent \"if\" has 2 inputs)");
    assert_int_equal(ag_attrs_set_int(g, da, "_parent_node_index", -1), AG_OK);
    assert_int_equal(ag_graph_verify(g), AG_EVERIFY);
    assert_int_equal(ag_attrs_set_string(g, da, "_parent_node_index", "0"), AG_OK);
    assert_int_equal(ag_graph_verify(g), AG_EVERIFY);
    assert_errmsg(ctx, "not an int");
    assert_int_equal(ag_attrs_set_int(g, da, "_parent_node_index", 0), AG_OK);
    assert_int_equal(ag_graph_verify(g), AG_OK);

    assert_int_equal(ag_attrs_set_int(g, oa, "_parent_node_index", 1), AG_OK);
    assert_int_equal(ag_graph_verify(g), AG_EVERIFY);
    assert_errmsg(ctx, "node \"o\" (NetOutput) input 0: _parent_node_index 1 out of range (parent \"if\" has 1 outputs)");
    assert_int_equal(ag_attrs_set_int(g, oa, "_parent_node_index", 0), AG_OK);
    assert_int_equal(ag_graph_verify(g), AG_OK);

    /* Root Data nodes are not subgraph inputs: the attribute is not checked there. */
    ag_node_id rd = agtest_node(g, AG_ROOT, "Data", "rd", 0, 1);
    assert_int_equal(ag_attrs_set_int(g, ag_node_attrs(g, rd), "_parent_node_index", 9), AG_OK);
    assert_int_equal(ag_graph_verify(g), AG_OK);

    agtest_node(g, th, "NetOutput", "o2", 0, 0);
    assert_int_equal(ag_graph_verify(g), AG_EVERIFY);
    assert_errmsg(ctx, "subgraph \"then\" has two NetOutput nodes");
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

/* ---- verifier: storage corrupted on purpose ---- */

typedef struct fixture {
    ag_ctx *ctx;
    ag_graph *g;
    ag_node_id a, b, c, iff, t;
    ag_sub_id sub;
} fixture;

static void fixture_make(fixture *f)
{
    f->ctx = agtest_ctx();
    f->g = new_graph(f->ctx);
    f->a = agtest_node(f->g, AG_ROOT, "Data", "a", 0, 1);
    f->b = agtest_node(f->g, AG_ROOT, "Relu", "b", 1, 1);
    f->c = agtest_node(f->g, AG_ROOT, "Relu", "c", 1, 1);
    f->iff = agtest_node(f->g, AG_ROOT, "If", "if", 0, 0);
    f->sub = agtest_sub(f->g, f->iff, "then");
    f->t = agtest_node(f->g, f->sub, "Data", "t", 0, 1);
    agtest_edge(f->g, f->a, 0, f->b, 0);
    agtest_edge(f->g, f->b, 0, f->c, 0);
    agtest_ctrl(f->g, f->a, f->c);
    assert_int_equal(ag_graph_verify(f->g), AG_OK);
}

static void fixture_expect(fixture *f, const char *needle)
{
    assert_int_equal(ag_graph_verify(f->g), AG_EVERIFY);
    assert_errmsg(f->ctx, needle);
}

static void fixture_free(fixture *f)
{
    ag_graph_destroy(f->g);
    ag_ctx_destroy(f->ctx);
}

static void test_verify_corruption(void **state)
{
    (void)state;
    fixture f;

    /* A consumer entry removed: the input points at a producer that forgot it. */
    fixture_make(&f);
    AG_NODE(f.g, f.a)->out[0]->cons.len = 0;
    fixture_expect(&f, "node \"b\" (Relu) input 0: producer \"a\" output 0 does not list it as a consumer");
    AG_NODE(f.g, f.a)->out[0]->cons.len = 1;
    assert_int_equal(ag_graph_verify(f.g), AG_OK);

    /* The input forgets its producer. */
    AG_NODE(f.g, f.c)->in[0]->src.node = AG_NONE;
    fixture_expect(&f, "node \"b\" (Relu) output 0: consumer \"c\" input 0 is fed by another producer");
    AG_NODE(f.g, f.c)->in[0]->src.node = f.b;

    /* Producer output index out of range. */
    AG_NODE(f.g, f.b)->in[0]->src.index = 4;
    fixture_expect(&f, "node \"b\" (Relu) input 0: producer \"a\" output 4 out of range (1 outputs)");
    AG_NODE(f.g, f.b)->in[0]->src.index = 0;

    /* Consumer input index out of range. */
    AG_VEC_AT(AG_NODE(f.g, f.b)->out[0]->cons, ag_port, 0).index = 7;
    fixture_expect(&f, "consumer \"c\" input 7 out of range (1 inputs)");
    AG_VEC_AT(AG_NODE(f.g, f.b)->out[0]->cons, ag_port, 0).index = 0;

    /* Control edge seen from one end only. */
    AG_NODE(f.g, f.c)->ctrl_in.len = 0;
    fixture_expect(&f, "control edge \"a\" -> \"c\" is listed by its source only");
    AG_NODE(f.g, f.c)->ctrl_in.len = 1;
    AG_NODE(f.g, f.a)->ctrl_out.len = 0;
    fixture_expect(&f, "control edge \"a\" -> \"c\" is listed by its destination only");
    AG_NODE(f.g, f.a)->ctrl_out.len = 1;

    /* Edge to a node of another subgraph. */
    AG_NODE(f.g, f.b)->in[0]->src.node = f.t;
    fixture_expect(&f, "node \"b\" (Relu) input 0: producer \"t\" is in another subgraph");
    AG_NODE(f.g, f.b)->in[0]->src.node = f.a;
    assert_int_equal(ag_graph_verify(f.g), AG_OK);

    /* Duplicate name: the name map no longer finds the node by its name. */
    const char *old = AG_NODE(f.g, f.c)->name;
    AG_NODE(f.g, f.c)->name = AG_NODE(f.g, f.b)->name;
    fixture_expect(&f, "is not found by its name (duplicate name?)");
    AG_NODE(f.g, f.c)->name = old;

    /* Owner inconsistent with the subgraph lists. */
    AG_NODE(f.g, f.t)->owner = AG_ROOT;
    fixture_expect(&f, "subgraph \"then\" lists node \"t\" (Data) which belongs to subgraph 0");
    AG_NODE(f.g, f.t)->owner = f.sub;

    /* Subgraph parent link broken. */
    AG_SUB(f.g, f.sub)->parent = f.b;
    fixture_expect(&f, "subgraph \"then\": parent node \"b\" (Relu) does not list it");
    AG_SUB(f.g, f.sub)->parent = f.iff;
    AG_SUB(f.g, f.sub)->depth = 5;
    fixture_expect(&f, "subgraph \"then\": depth 5, expected 1");
    AG_SUB(f.g, f.sub)->depth = 1;

    /* Shape out of range written directly into a descriptor. */
    int64_t bad[1] = {-3};
    ag_tensor_desc *d = ag_node_output_desc(f.g, f.a, 0);
    d->rank = 1;
    d->dims = bad;
    fixture_expect(&f, "node \"a\" (Data) output 0: dim 0 is -3");
    /* rank is a public scalar field: written without dims it is caught too. */
    d->rank = 2;
    d->dims = NULL;
    fixture_expect(&f, "node \"a\" (Data) output 0: rank 2 but no dims");
    assert_false(ag_desc_shape_known(d));
    assert_int_equal(ag_desc_copy_type(f.g, ag_node_input_desc(f.g, f.b, 0), d), AG_EINVAL);
    d->rank = AG_RANK_UNKNOWN;
    assert_int_equal(ag_graph_verify(f.g), AG_OK);
    fixture_free(&f);
}

static ag_status oom_topo_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_graph *g;
    ag_node_id a, b, c, iff, t;
    ag_sub_id s;
    AG_TRY(ag_graph_create(ctx, "main", &g));
    ag_status st;
    if ((st = ag_graph_add_node(g, AG_ROOT, "Relu", "b", 1, 1, &b)) != AG_OK ||
        (st = ag_graph_add_node(g, AG_ROOT, "Data", "a", 0, 1, &a)) != AG_OK ||
        (st = ag_graph_add_node(g, AG_ROOT, "If", "if", 1, 1, &iff)) != AG_OK ||
        (st = ag_graph_add_node(g, AG_ROOT, "Relu", "c", 0, 0, &c)) != AG_OK ||
        (st = ag_graph_add_subgraph(g, iff, "then", &s)) != AG_OK ||
        (st = ag_graph_add_node(g, s, "Data", "t", 0, 1, &t)) != AG_OK ||
        (st = ag_graph_add_edge(g, a, 0, b, 0)) != AG_OK || (st = ag_graph_add_edge(g, b, 0, iff, 0)) != AG_OK ||
        (st = ag_graph_add_ctrl_edge(g, c, a)) != AG_OK)
        goto out;
    ag_node_id order[5];
    uint32_t cnt;
    if ((st = ag_graph_topo_order(g, order, &cnt)) != AG_OK)
        goto out;
    assert_int_equal(cnt, 5);
    assert_int_equal(order[0], c);
    assert_int_equal(order[3], iff);
    assert_int_equal(order[4], t);
    st = ag_graph_verify(g);
out:
    ag_graph_destroy(g);
    return st;
}

static void test_oom_topo_verify(void **state)
{
    (void)state;
    assert_true(AG_TEST_OOM_SWEEP(oom_topo_body, NULL) > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_ctrl_and_ties), cmocka_unit_test(test_order_subgraphs),
        cmocka_unit_test(test_cycles),              cmocka_unit_test(test_verify_parent_index),
        cmocka_unit_test(test_verify_corruption),   cmocka_unit_test(test_oom_topo_verify),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
