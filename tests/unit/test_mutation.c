/* Unit tests of the mutation helpers (reference notes §2.1): insertion before
 * and after with control-edge migration and its atomic-clean and Switch
 * exemptions, the attribute whitelist, isolation with io_map and a NoOp hub,
 * removal with nested subgraphs, and "unchanged on failure" under OOM sweeps. */
#include "support/agtest.h"

#include <stdio.h>

#include "core/internal.h"

static ag_graph *new_graph(ag_ctx *ctx)
{
    ag_graph *g = NULL;
    assert_int_equal(ag_graph_create(ctx, "main", &g), AG_OK);
    return g;
}

static bool has_ctrl(const ag_graph *g, ag_node_id a, ag_node_id b)
{
    for (uint32_t k = 0; k < ag_node_num_ctrl_out(g, a); k++)
        if (ag_node_ctrl_out(g, a, k) == b)
            return true;
    return false;
}

static uint32_t stored_pos(const ag_graph *g, ag_node_id n)
{
    ag_sub_id s = ag_node_owner(g, n);
    for (uint32_t k = 0; k < ag_sub_node_count(g, s); k++)
        if (ag_sub_node_at(g, s, k) == n)
            return k;
    fail_msg("node %u not in its subgraph's order", n);
    return 0;
}

static void test_insert_before(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx);
    ag_node_id a = agtest_node(g, AG_ROOT, "Data", "a", 0, 1);
    ag_node_id c = agtest_node(g, AG_ROOT, "Relu", "c", 0, 1);
    ag_node_id m = agtest_node(g, AG_ROOT, "MemSet", "m", 0, 0);
    ag_node_id aa = agtest_node(g, AG_ROOT, "AtomicAddrClean", "aa", 0, 0);
    ag_node_id b = agtest_node(g, AG_ROOT, "Add", "b", 2, 1);
    ag_node_id z = agtest_node(g, AG_ROOT, "NetOutput", "z", 1, 0);
    agtest_edge(g, a, 0, b, 0);
    agtest_edge(g, c, 0, b, 1);
    agtest_edge(g, b, 0, z, 0);
    agtest_ctrl(g, c, b);
    agtest_ctrl(g, m, b);
    agtest_ctrl(g, aa, b);
    ag_attrs *ba = ag_node_attrs(g, b);
    assert_int_equal(ag_attrs_set_string(g, ba, "_user_stream_label", "s7"), AG_OK);
    assert_int_equal(ag_attrs_set_string(g, ba, "_op_aicore_num", "4"), AG_OK);
    assert_int_equal(ag_attrs_set_string(g, ba, "_super_kernel_scope", "sk"), AG_OK);
    assert_int_equal(ag_attrs_set_int(g, ba, "_op_vectorcore_num", 2), AG_OK); /* not a string: stays */
    assert_int_equal(ag_attrs_set_string(g, ba, "other", "x"), AG_OK);
    ag_tensor_desc *ad = ag_node_output_desc(g, a, 0);
    ad->dtype = AG_DT_F32;

    ag_node_id id = agtest_node(g, AG_ROOT, "Identity", "id", 1, 1);
    assert_int_equal(ag_graph_insert_before(g, b, 0, id, 0, 0), AG_OK);
    assert_int_equal(ag_node_input_src(g, id, 0).node, a);
    assert_int_equal(ag_node_input_src(g, b, 0).node, id);
    assert_int_equal(ag_node_output_nconsumers(g, a, 0), 1);
    assert_int_equal(ag_node_output_consumer(g, a, 0, 0).node, id);
    assert_int_equal(ag_node_input_desc_c(g, id, 0)->dtype, AG_DT_F32);
    /* c's control edge moved, the atomic-clean ones stayed. */
    assert_true(has_ctrl(g, c, id));
    assert_false(has_ctrl(g, c, b));
    assert_true(has_ctrl(g, m, b));
    assert_true(has_ctrl(g, aa, b));
    assert_false(has_ctrl(g, m, id));
    assert_int_equal(ag_node_num_ctrl_in(g, b), 2);
    /* Whitelisted string attributes copied, others not. */
    const ag_attrs *ia = ag_node_attrs_c(g, id);
    const char *s;
    assert_true(ag_attrs_get_string(ia, "_user_stream_label", &s));
    assert_string_equal(s, "s7");
    assert_true(ag_attrs_get_string(ia, "_op_aicore_num", &s));
    assert_true(ag_attrs_get_string(ia, "_super_kernel_scope", &s));
    assert_null(ag_attrs_find(ia, "_op_vectorcore_num"));
    assert_null(ag_attrs_find(ia, "other"));
    assert_int_equal(ag_attrs_count(ia), 3);
    /* Stored order: right before b. */
    assert_int_equal(stored_pos(g, id) + 1, stored_pos(g, b));
    assert_int_equal(ag_graph_verify(g), AG_OK);

    /* Errors leave the graph alone. */
    ag_node_id id2 = agtest_node(g, AG_ROOT, "Identity", "id2", 1, 1);
    ag_node_id lone = agtest_node(g, AG_ROOT, "Relu", "lone", 1, 1);
    assert_int_equal(ag_graph_insert_before(g, lone, 0, id2, 0, 0), AG_EINVAL);
    assert_errmsg(ctx, "node \"lone\" (Relu) input 0: the input has no producer");
    assert_int_equal(ag_graph_insert_before(g, b, 5, id2, 0, 0), AG_EINVAL);
    assert_errmsg(ctx, "input 5 out of range");
    assert_int_equal(ag_graph_insert_before(g, b, 0, id2, 0, 1), AG_EINVAL);
    assert_int_equal(ag_graph_insert_before(g, b, 0, id, 0, 0), AG_EINVAL); /* id feeds b already */
    assert_int_equal(ag_graph_insert_before(g, b, 0, b, 0, 0), AG_EINVAL);
    agtest_edge(g, a, 0, id2, 0);
    assert_int_equal(ag_graph_insert_before(g, b, 1, id2, 0, 0), AG_EEXIST);
    assert_int_equal(ag_node_input_src(g, b, 1).node, c);
    assert_int_equal(ag_graph_verify(g), AG_OK);

    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_insert_after(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx);
    ag_node_id s = agtest_node(g, AG_ROOT, "Conv", "s", 0, 1);
    ag_node_id x = agtest_node(g, AG_ROOT, "Relu", "x", 1, 1);
    ag_node_id y = agtest_node(g, AG_ROOT, "Relu", "y", 1, 1);
    ag_node_id z = agtest_node(g, AG_ROOT, "Relu", "z", 1, 1);
    ag_node_id k = agtest_node(g, AG_ROOT, "Relu", "k", 0, 0);
    agtest_edge(g, s, 0, x, 0);
    agtest_edge(g, s, 0, y, 0);
    agtest_edge(g, s, 0, z, 0);
    agtest_ctrl(g, s, k);
    assert_int_equal(ag_attrs_set_string(g, ag_node_attrs(g, s), "_super_kernel_options", "o"), AG_OK);

    ag_node_id id = agtest_node(g, AG_ROOT, "Identity", "id", 1, 1);
    ag_port dsts[2] = {{y, 0}, {x, 0}};
    assert_int_equal(ag_graph_insert_after(g, s, 0, dsts, 2, id, 0, 0), AG_OK);
    assert_int_equal(ag_node_input_src(g, x, 0).node, id);
    assert_int_equal(ag_node_input_src(g, y, 0).node, id);
    assert_int_equal(ag_node_input_src(g, z, 0).node, s);
    assert_int_equal(ag_node_input_src(g, id, 0).node, s);
    assert_int_equal(ag_node_output_nconsumers(g, s, 0), 2);
    assert_int_equal(ag_node_output_nconsumers(g, id, 0), 2);
    assert_true(has_ctrl(g, id, k));
    assert_false(has_ctrl(g, s, k));
    assert_true(ag_attrs_get_string(ag_node_attrs_c(g, id), "_super_kernel_options", NULL));
    assert_int_equal(stored_pos(g, s) + 1, stored_pos(g, id));
    assert_int_equal(ag_graph_verify(g), AG_OK);

    /* NULL dsts: every consumer. */
    ag_node_id id2 = agtest_node(g, AG_ROOT, "Identity", "id2", 1, 1);
    assert_int_equal(ag_graph_insert_after(g, s, 0, NULL, 0, id2, 0, 0), AG_OK);
    assert_int_equal(ag_node_output_nconsumers(g, s, 0), 1);
    assert_int_equal(ag_node_output_nconsumers(g, id2, 0), 2);
    assert_int_equal(ag_node_input_src(g, z, 0).node, id2);
    assert_int_equal(ag_node_input_src(g, id, 0).node, id2);
    assert_int_equal(stored_pos(g, s) + 1, stored_pos(g, id2));

    /* Errors. */
    ag_node_id id3 = agtest_node(g, AG_ROOT, "Identity", "id3", 1, 1);
    ag_port notcons[1] = {{x, 0}};
    assert_int_equal(ag_graph_insert_after(g, s, 0, notcons, 1, id3, 0, 0), AG_ENOTFOUND);
    assert_errmsg(ctx, "is not one of its consumers");
    ag_port twice[2] = {{id2, 0}, {id2, 0}};
    assert_int_equal(ag_graph_insert_after(g, s, 0, twice, 2, id3, 0, 0), AG_EINVAL);
    assert_errmsg(ctx, "listed twice");
    assert_int_equal(ag_graph_insert_after(g, s, 3, NULL, 0, id3, 0, 0), AG_EINVAL);
    assert_int_equal(ag_node_output_nconsumers(g, s, 0), 1);
    assert_int_equal(ag_graph_verify(g), AG_OK);

    /* Switch: outgoing control edges stay (they select a branch). */
    ag_node_id sw = agtest_node(g, AG_ROOT, "Switch", "sw", 0, 2);
    ag_node_id br = agtest_node(g, AG_ROOT, "Relu", "br", 1, 1);
    ag_node_id ctl = agtest_node(g, AG_ROOT, "Relu", "ctl", 0, 0);
    agtest_edge(g, sw, 1, br, 0);
    agtest_ctrl(g, sw, ctl);
    ag_node_id id4 = agtest_node(g, AG_ROOT, "Identity", "id4", 1, 1);
    assert_int_equal(ag_graph_insert_after(g, sw, 1, NULL, 0, id4, 0, 0), AG_OK);
    assert_true(has_ctrl(g, sw, ctl));
    assert_false(has_ctrl(g, id4, ctl));
    assert_int_equal(ag_node_input_src(g, br, 0).node, id4);
    assert_int_equal(ag_node_input_src(g, id4, 0).index, 1);
    assert_int_equal(ag_graph_verify(g), AG_OK);

    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_isolate_io_map(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx);
    ag_node_id p = agtest_node(g, AG_ROOT, "Data", "p", 0, 1);
    ag_node_id q = agtest_node(g, AG_ROOT, "Data", "q", 0, 1);
    ag_node_id n = agtest_node(g, AG_ROOT, "Identity", "n", 2, 2);
    ag_node_id c1 = agtest_node(g, AG_ROOT, "Relu", "c1", 1, 1);
    ag_node_id c2 = agtest_node(g, AG_ROOT, "Relu", "c2", 1, 1);
    ag_node_id c3 = agtest_node(g, AG_ROOT, "Relu", "c3", 1, 1);
    ag_node_id r = agtest_node(g, AG_ROOT, "Relu", "r", 0, 0);
    ag_node_id cp = agtest_node(g, AG_ROOT, "Relu", "cp", 0, 0);
    agtest_edge(g, p, 0, n, 0);
    agtest_edge(g, q, 0, n, 1);
    agtest_edge(g, n, 0, c1, 0);
    agtest_edge(g, n, 0, c2, 0);
    agtest_edge(g, n, 1, c3, 0);
    agtest_ctrl(g, cp, n);
    agtest_ctrl(g, n, r);
    agtest_ctrl(g, cp, r); /* already there: not duplicated */

    int32_t map[2] = {0, -1};
    assert_int_equal(ag_graph_isolate_node(g, n, map, 2), AG_OK);
    /* Data re-linked by io_map. */
    assert_int_equal(ag_node_input_src(g, c1, 0).node, p);
    assert_int_equal(ag_node_input_src(g, c2, 0).node, p);
    assert_int_equal(ag_node_input_src(g, c3, 0).node, AG_NONE);
    /* Control for every pair not already data-connected. */
    assert_false(has_ctrl(g, p, c1));
    assert_false(has_ctrl(g, p, c2));
    assert_true(has_ctrl(g, p, c3));
    assert_true(has_ctrl(g, p, r));
    assert_true(has_ctrl(g, q, c1));
    assert_true(has_ctrl(g, q, c2));
    assert_true(has_ctrl(g, q, c3));
    assert_true(has_ctrl(g, q, r));
    assert_true(has_ctrl(g, cp, c1));
    assert_true(has_ctrl(g, cp, r));
    assert_int_equal(ag_node_num_ctrl_out(g, cp), 4); /* c1 c2 c3 r */
    /* n has no edges left but stays in the graph. */
    assert_true(ag_node_alive(g, n));
    assert_int_equal(ag_node_input_src(g, n, 0).node, AG_NONE);
    assert_int_equal(ag_node_output_nconsumers(g, n, 0), 0);
    assert_int_equal(ag_node_num_ctrl_in(g, n), 0);
    assert_int_equal(ag_node_num_ctrl_out(g, n), 0);
    assert_int_equal(ag_graph_node_count(g), 8);
    assert_int_equal(ag_graph_verify(g), AG_OK);

    /* Without io_map every producer -> consumer pair becomes a control edge. */
    ag_node_id m = agtest_node(g, AG_ROOT, "Identity", "m", 1, 1);
    ag_node_id u = agtest_node(g, AG_ROOT, "Relu", "u", 1, 1);
    agtest_edge(g, p, 0, m, 0);
    agtest_edge(g, m, 0, u, 0);
    assert_int_equal(ag_graph_isolate_node(g, m, NULL, 0), AG_OK);
    assert_true(has_ctrl(g, p, u));
    assert_int_equal(ag_node_input_src(g, u, 0).node, AG_NONE);

    /* Errors. */
    ag_node_id k = agtest_node(g, AG_ROOT, "Identity", "k", 2, 1);
    agtest_edge(g, p, 0, k, 0);
    agtest_edge(g, q, 0, k, 1);
    agtest_edge(g, k, 0, u, 0);
    int32_t both[2] = {0, 0};
    assert_int_equal(ag_graph_isolate_node(g, k, both, 2), AG_EINVAL);
    assert_errmsg(ctx, "inputs 0 and 1 both map to output 0");
    int32_t far[1] = {3};
    assert_int_equal(ag_graph_isolate_node(g, k, far, 1), AG_EINVAL);
    assert_errmsg(ctx, "output 3 out of range");
    assert_int_equal(ag_graph_isolate_node(g, k, map, 3), AG_EINVAL);
    assert_int_equal(ag_node_input_src(g, u, 0).node, k);
    assert_int_equal(ag_graph_verify(g), AG_OK);

    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_isolate_hub(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx);
    enum { NP = 40, NS = 30 };
    ag_node_id preds[NP], succs[NS];
    char name[32];
    ag_node_id n = agtest_node(g, AG_ROOT, "Identity", "n", 0, 1);
    for (int k = 0; k < NP; k++) {
        snprintf(name, sizeof name, "p%d", k);
        preds[k] = agtest_node(g, AG_ROOT, "Relu", name, 0, 0);
        agtest_ctrl(g, preds[k], n);
    }
    for (int k = 0; k < NS; k++) {
        snprintf(name, sizeof name, "s%d", k);
        succs[k] = agtest_node(g, AG_ROOT, "Relu", name, 1, 0);
        agtest_edge(g, n, 0, succs[k], 0);
    }
    uint32_t before = ag_graph_node_count(g);
    assert_int_equal(ag_graph_isolate_node(g, n, NULL, 0), AG_OK);
    assert_int_equal(ag_graph_node_count(g), before + 1);
    ag_node_id hub = ag_sub_find_node(g, AG_ROOT, "n_ctrl_hub");
    assert_int_not_equal(hub, AG_NONE);
    assert_string_equal(ag_node_type(g, hub), "NoOp");
    assert_int_equal(ag_node_num_ctrl_in(g, hub), NP);
    assert_int_equal(ag_node_num_ctrl_out(g, hub), NS);
    assert_true(has_ctrl(g, preds[7], hub));
    assert_true(has_ctrl(g, hub, succs[29]));
    assert_false(has_ctrl(g, preds[0], succs[0]));
    assert_int_equal(ag_node_num_ctrl_out(g, preds[0]), 1);
    assert_int_equal(stored_pos(g, n) + 1, stored_pos(g, hub));
    assert_int_equal(ag_graph_verify(g), AG_OK);

    /* 20 x 30 = 600 <= 1000: direct edges, no hub. */
    ag_node_id n2 = agtest_node(g, AG_ROOT, "Identity", "n2", 0, 0);
    for (int k = 0; k < 20; k++)
        agtest_ctrl(g, preds[k], n2);
    for (int k = 0; k < NS; k++)
        agtest_ctrl(g, n2, succs[k]);
    assert_int_equal(ag_graph_isolate_node(g, n2, NULL, 0), AG_OK);
    assert_int_equal(ag_sub_find_node(g, AG_ROOT, "n2_ctrl_hub"), AG_NONE);
    assert_true(has_ctrl(g, preds[19], succs[0]));
    assert_int_equal(ag_node_num_ctrl_out(g, preds[0]), 1 + NS);
    assert_int_equal(ag_graph_verify(g), AG_OK);

    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_remove_node(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx);
    ag_node_id x = agtest_node(g, AG_ROOT, "Data", "x", 0, 1);
    ag_node_id iff = agtest_node(g, AG_ROOT, "If", "if", 1, 1);
    ag_node_id y = agtest_node(g, AG_ROOT, "Relu", "y", 1, 1);
    ag_node_id w = agtest_node(g, AG_ROOT, "Relu", "w", 0, 0);
    agtest_edge(g, x, 0, iff, 0);
    agtest_edge(g, iff, 0, y, 0);
    agtest_ctrl(g, w, iff);
    ag_sub_id th = agtest_sub(g, iff, "then");
    ag_sub_id el = agtest_sub(g, iff, "else");
    ag_node_id t1 = agtest_node(g, th, "Data", "t1", 0, 1);
    ag_node_id loop = agtest_node(g, th, "While", "loop", 1, 1);
    agtest_edge(g, t1, 0, loop, 0);
    ag_sub_id body = agtest_sub(g, loop, "body");
    ag_node_id b1 = agtest_node(g, body, "Data", "b1", 0, 1);
    ag_node_id b2 = agtest_node(g, body, "Relu", "b2", 1, 1);
    agtest_edge(g, b1, 0, b2, 0);
    ag_node_id e1 = agtest_node(g, el, "Data", "e1", 0, 1);
    /* An unrelated subgraph made later survives. */
    ag_node_id other = agtest_node(g, AG_ROOT, "If", "other", 0, 0);
    ag_sub_id keep = agtest_sub(g, other, "keep");
    ag_node_id k1 = agtest_node(g, keep, "Data", "k1", 0, 1);
    assert_int_equal(ag_graph_node_count(g), 11);

    assert_int_equal(ag_graph_remove_node(g, iff), AG_OK);
    assert_false(ag_node_alive(g, iff));
    assert_false(ag_node_alive(g, t1));
    assert_false(ag_node_alive(g, loop));
    assert_false(ag_node_alive(g, b1));
    assert_false(ag_node_alive(g, b2));
    assert_false(ag_node_alive(g, e1));
    assert_true(ag_node_alive(g, k1));
    assert_false(ag_sub_alive(g, th));
    assert_false(ag_sub_alive(g, el));
    assert_false(ag_sub_alive(g, body));
    assert_true(ag_sub_alive(g, keep));
    assert_int_equal(ag_graph_find_sub(g, "then"), AG_NONE);
    assert_int_equal(ag_graph_find_sub(g, "body"), AG_NONE);
    assert_int_equal(ag_graph_sub_count(g), 5); /* ids are kept */
    assert_int_equal(ag_graph_node_count(g), 5);
    assert_int_equal(ag_sub_node_count(g, AG_ROOT), 4);
    assert_int_equal(ag_node_output_nconsumers(g, x, 0), 0);
    assert_int_equal(ag_node_input_src(g, y, 0).node, AG_NONE);
    assert_int_equal(ag_node_num_ctrl_out(g, w), 0);
    assert_int_equal(ag_sub_find_node(g, AG_ROOT, "if"), AG_NONE);
    assert_int_equal(ag_graph_verify(g), AG_OK);

    /* Ids are not reused; names and subgraph names are free again. */
    uint32_t cap = ag_graph_node_capacity(g);
    ag_node_id again = agtest_node(g, AG_ROOT, "If", "if", 0, 0);
    assert_int_equal(again, cap);
    agtest_sub(g, again, "then");
    assert_int_equal(ag_graph_remove_node(g, iff), AG_EINVAL);
    assert_int_equal(ag_graph_verify(g), AG_OK);

    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

/* ---- unchanged on failure: every helper under an allocation sweep ---- */

typedef struct built {
    ag_graph *g;
    ag_node_id src, n, dst, hubn;
} built;

/* One graph exercising every helper: a -> n -> {b, c}, control edges in and
 * out, a whitelisted attribute, and a node with 40 x 30 control neighbours. */
static ag_status build(ag_ctx *ctx, built *out)
{
    ag_graph *g = NULL;
    ag_status st;
    ag_node_id a, n, b, c, k, m, hubn, iff, t;
    ag_sub_id s;
    char name[32];
    memset(out, 0, sizeof *out);
    AG_TRY(ag_graph_create(ctx, "main", &g));
#define T(e)                     \
    do {                         \
        if ((st = (e)) != AG_OK) \
            goto fail;           \
    } while (0)
    T(ag_graph_add_node(g, AG_ROOT, "Data", "a", 0, 1, &a));
    T(ag_graph_add_node(g, AG_ROOT, "Relu", "n", 1, 1, &n));
    T(ag_graph_add_node(g, AG_ROOT, "Relu", "b", 1, 1, &b));
    T(ag_graph_add_node(g, AG_ROOT, "Relu", "c", 1, 1, &c));
    T(ag_graph_add_node(g, AG_ROOT, "Relu", "k", 0, 0, &k));
    T(ag_graph_add_node(g, AG_ROOT, "MemSet", "m", 0, 0, &m));
    T(ag_graph_add_edge(g, a, 0, n, 0));
    T(ag_graph_add_edge(g, n, 0, b, 0));
    T(ag_graph_add_edge(g, n, 0, c, 0));
    T(ag_graph_add_ctrl_edge(g, k, n));
    T(ag_graph_add_ctrl_edge(g, m, n));
    T(ag_graph_add_ctrl_edge(g, n, c));
    T(ag_attrs_set_string(g, ag_node_attrs(g, n), "_user_stream_label", "s"));
    T(ag_attrs_set_string(g, ag_node_attrs(g, a), "_op_aicore_num", "2"));
    T(ag_graph_add_node(g, AG_ROOT, "Identity", "hubn", 0, 0, &hubn));
    for (int j = 0; j < 40; j++) {
        ag_node_id p;
        snprintf(name, sizeof name, "p%d", j);
        T(ag_graph_add_node(g, AG_ROOT, "Relu", name, 0, 0, &p));
        T(ag_graph_add_ctrl_edge(g, p, hubn));
    }
    for (int j = 0; j < 30; j++) {
        ag_node_id q;
        snprintf(name, sizeof name, "q%d", j);
        T(ag_graph_add_node(g, AG_ROOT, "Relu", name, 0, 0, &q));
        T(ag_graph_add_ctrl_edge(g, hubn, q));
    }
    T(ag_graph_add_node(g, AG_ROOT, "If", "if", 1, 1, &iff));
    T(ag_graph_add_edge(g, b, 0, iff, 0));
    T(ag_graph_add_subgraph(g, iff, "then", &s));
    T(ag_graph_add_node(g, s, "Data", "t", 0, 1, &t));
#undef T
    out->g = g;
    out->src = a;
    out->n = n;
    out->dst = b;
    out->hubn = hubn;
    return AG_OK;
fail:
    ag_graph_destroy(g);
    return st;
}

typedef enum op_kind { OP_BEFORE, OP_AFTER, OP_AFTER_ALL, OP_ISOLATE, OP_HUB, OP_REMOVE } op_kind;

static ag_status apply(built *b, op_kind op)
{
    ag_graph *g = b->g;
    ag_node_id id;
    switch (op) {
    case OP_BEFORE:
        AG_TRY(ag_graph_add_node(g, AG_ROOT, "Identity", "ins", 1, 1, &id));
        return ag_graph_insert_before(g, b->n, 0, id, 0, 0);
    case OP_AFTER: {
        AG_TRY(ag_graph_add_node(g, AG_ROOT, "Identity", "ins", 1, 1, &id));
        ag_port d[1] = {{b->dst, 0}};
        return ag_graph_insert_after(g, b->n, 0, d, 1, id, 0, 0);
    }
    case OP_AFTER_ALL:
        AG_TRY(ag_graph_add_node(g, AG_ROOT, "Identity", "ins", 1, 1, &id));
        return ag_graph_insert_after(g, b->n, 0, NULL, 0, id, 0, 0);
    case OP_ISOLATE: {
        int32_t map[1] = {0};
        return ag_graph_isolate_node(g, b->n, map, 1);
    }
    case OP_HUB:
        return ag_graph_isolate_node(g, b->hubn, NULL, 0);
    case OP_REMOVE:
        return ag_graph_remove_node(g, ag_sub_find_node(g, AG_ROOT, "if"));
    }
    return AG_EINVAL;
}

static ag_status unchanged_body(ag_ctx *ctx, void *ud)
{
    op_kind op = *(const op_kind *)ud;
    built a, ref;
    AG_TRY(build(ctx, &a));
    ag_status st = build(ctx, &ref);
    if (st != AG_OK) {
        ag_graph_destroy(a.g);
        return st;
    }
    /* The inserted node is made before the helper runs: make it in ref too so
     * that a failing helper must leave exactly that state behind. */
    ag_node_id tmp = AG_NONE;
    if (op == OP_BEFORE || op == OP_AFTER || op == OP_AFTER_ALL)
        st = ag_graph_add_node(ref.g, AG_ROOT, "Identity", "ins", 1, 1, &tmp);
    if (st == AG_OK) {
        st = apply(&a, op);
        if (st == AG_ENOMEM) {
            if (op == OP_BEFORE || op == OP_AFTER || op == OP_AFTER_ALL) {
                /* Either the node was not made (no "ins" in a) or the helper failed. */
                if (ag_sub_find_node(a.g, AG_ROOT, "ins") == AG_NONE)
                    assert_int_equal(ag_graph_remove_node(ref.g, tmp), AG_OK);
            }
            assert_graph_equal(a.g, ref.g);
        }
        if (st == AG_OK || st == AG_ENOMEM) {
            ag_status vs = ag_graph_verify(a.g);
            assert_true(vs == AG_OK || vs == AG_ENOMEM);
            if (vs == AG_ENOMEM && st == AG_OK)
                st = AG_ENOMEM;
        }
    }
    ag_graph_destroy(a.g);
    ag_graph_destroy(ref.g);
    return st;
}

static void test_unchanged_on_failure(void **state)
{
    (void)state;
    for (op_kind op = OP_BEFORE; op <= OP_REMOVE; op++) {
        uint64_t runs = AG_TEST_OOM_SWEEP(unchanged_body, &op);
        assert_true(runs > 10);
    }
}

/* Successful helpers give the documented results on the sweep's graph too. */
static void test_helpers_on_built(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    built b;
    assert_int_equal(build(ctx, &b), AG_OK);
    assert_int_equal(apply(&b, OP_BEFORE), AG_OK);
    ag_node_id ins = agtest_find(b.g, AG_ROOT, "ins");
    ag_node_id k = agtest_find(b.g, AG_ROOT, "k");
    ag_node_id m = agtest_find(b.g, AG_ROOT, "m");
    assert_true(has_ctrl(b.g, k, ins));
    assert_true(has_ctrl(b.g, m, b.n));
    assert_true(ag_attrs_get_string(ag_node_attrs_c(b.g, ins), "_user_stream_label", NULL));
    assert_int_equal(apply(&b, OP_HUB), AG_OK);
    agtest_find(b.g, AG_ROOT, "hubn_ctrl_hub");
    assert_int_equal(apply(&b, OP_REMOVE), AG_OK);
    assert_int_equal(ag_graph_find_sub(b.g, "then"), AG_NONE);
    assert_int_equal(ag_graph_verify(b.g), AG_OK);
    ag_graph_destroy(b.g);
    ag_ctx_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_insert_before),  cmocka_unit_test(test_insert_after),
        cmocka_unit_test(test_isolate_io_map), cmocka_unit_test(test_isolate_hub),
        cmocka_unit_test(test_remove_node),    cmocka_unit_test(test_unchanged_on_failure),
        cmocka_unit_test(test_helpers_on_built),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
