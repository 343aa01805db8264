/* Unit tests of the pass framework: the report (copies, warnings), the
 * helpers that insert an isolating node or control edge and explain it
 * (names, descriptors, the exact report entries, graph unchanged on failure
 * under OOM sweeps), the reach index, and the pass registry. */
#include "support/agtest.h"

#include <stdio.h>

#include "passes/pass_internal.h"

static ag_graph *read_agt(ag_ctx *ctx, const char *text)
{
    ag_graph *g = NULL;
    ag_status st = ag_text_read(ctx, text, strlen(text), "test.agt", &g);
    if (st != AG_OK)
        fail_msg("parse: %s", ag_ctx_errmsg(ctx));
    return g;
}

static void assert_iso(const ag_isolation *iso, const char *pass, const char *rule, const char *kind,
                       const char *graph, const char *node, const char *producer, const char *consumer)
{
    assert_non_null(iso);
    assert_string_equal(iso->pass, pass);
    assert_string_equal(iso->rule, rule);
    assert_string_equal(iso->kind, kind);
    assert_string_equal(iso->graph, graph);
    assert_string_equal(iso->node, node);
    assert_string_equal(iso->producer, producer);
    assert_string_equal(iso->consumer, consumer);
}

static bool has_ctrl(const ag_graph *g, ag_node_id a, ag_node_id b)
{
    for (uint32_t k = 0; k < ag_node_num_ctrl_out(g, a); k++)
        if (ag_node_ctrl_out(g, a, k) == b)
            return true;
    return false;
}

/* ---- the report ---- */

static void test_report_copies(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_report *r = NULL;
    assert_int_equal(ag_report_create(ctx, &r), AG_OK);
    assert_int_equal(ag_report_isolation_count(r), 0);
    assert_null(ag_report_isolation_at(r, 0));

    char pass[16], rule[32], node[16];
    strcpy(pass, "p1");
    strcpy(rule, "rule one");
    strcpy(node, "n1");
    ag_isolation iso = {pass, rule, "Identity", "main", node, "a:0", "b:1"};
    assert_int_equal(ag_report_isolation(r, &iso), AG_OK);
    /* The caller's buffers change; the report keeps its own copies. */
    strcpy(pass, "XX");
    strcpy(rule, "changed");
    strcpy(node, "gone");
    iso.producer = NULL; /* NULL strings are recorded as "" */
    assert_int_equal(ag_report_isolation(r, &iso), AG_OK);
    assert_int_equal(ag_report_isolation_count(r), 2);
    assert_iso(ag_report_isolation_at(r, 0), "p1", "rule one", "Identity", "main", "n1", "a:0", "b:1");
    assert_iso(ag_report_isolation_at(r, 1), "XX", "changed", "Identity", "main", "gone", "", "b:1");
    assert_null(ag_report_isolation_at(r, 2));

    char n0[8] = "x", n1[8] = "y";
    const char *nodes[2] = {n0, n1};
    assert_int_equal(ag_report_warning(r, "rw", "W_TEST", nodes, 2, "value %d of %s", 7, "x"), AG_OK);
    n0[0] = 'q';
    /* A message longer than any fixed buffer is kept whole. */
    char longmsg[1000];
    memset(longmsg, 'm', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = '\0';
    assert_int_equal(ag_report_warning(r, "rw", "W_LONG", NULL, 0, "<%s>", longmsg), AG_OK);
    assert_int_equal(ag_report_warning_count(r), 2);
    const ag_warning *w = ag_report_warning_at(r, 0);
    assert_string_equal(w->pass, "rw");
    assert_string_equal(w->code, "W_TEST");
    assert_string_equal(w->message, "value 7 of x");
    assert_int_equal(w->nnodes, 2);
    assert_string_equal(w->nodes[0], "x");
    assert_string_equal(w->nodes[1], "y");
    w = ag_report_warning_at(r, 1);
    assert_int_equal(strlen(w->message), sizeof longmsg + 1);
    assert_int_equal(w->message[0], '<');
    assert_int_equal(w->message[sizeof longmsg], '>');
    assert_int_equal(w->nnodes, 0);
    assert_null(ag_report_warning_at(r, 2));
    ag_report_destroy(r);
    ag_report_destroy(NULL);
    assert_int_equal(ag_report_isolation_count(NULL), 0);
    ag_ctx_destroy(ctx);
}

static ag_status report_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_report *r = NULL;
    AG_TRY(ag_report_create(ctx, &r));
    ag_status st = AG_OK;
    const char *nodes[3] = {"a", "b", "c"};
    for (int k = 0; k < 40 && st == AG_OK; k++) {
        ag_isolation iso = {"p", "some rule with a longer text", "Identity", "main", "n", "a:0", "b:0"};
        st = ag_report_isolation(r, &iso);
        if (st == AG_OK)
            st = ag_report_warning(r, "p", "W_X", nodes, 3, "warning %d", k);
    }
    if (st == AG_OK) {
        assert_int_equal(ag_report_isolation_count(r), 40);
        assert_int_equal(ag_report_warning_count(r), 40);
    }
    ag_report_destroy(r);
    return st;
}

static void test_report_oom(void **state)
{
    (void)state;
    AG_TEST_OOM_SWEEP(report_body, NULL);
}

/* ---- insertion helpers ---- */

static const char *const fan_text =
    "graph main {\n"
    "  a = Data() -> (f32[4] \"av\" <_keep = 1>) <index = 0>\n"
    "  b = Relu(a) -> (f32[4])\n"
    "  c = Neg(a) -> (f32[4])\n"
    "  d = Add(b, c) -> (f32[4])\n"
    "  e = Relu(a) -> (f32[4])\n"
    "  out = NetOutput(d, e)\n"
    "}\n";

static void test_insert_before(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = read_agt(ctx, fan_text);
    ag_report *r = NULL;
    assert_int_equal(ag_report_create(ctx, &r), AG_OK);
    ag_pass_env env = {g, NULL, r};
    ag_why why = {"tp", "rule X"};
    ag_node_id a = agtest_find(g, AG_ROOT, "a"), b = agtest_find(g, AG_ROOT, "b"), c = agtest_find(g, AG_ROOT, "c");

    ag_node_id n1 = AG_NONE, n2 = AG_NONE;
    assert_int_equal(ag_pass_insert_before(&env, &why, b, 0, "Identity", NULL, &n1), AG_OK);
    assert_int_equal(ag_pass_insert_before(&env, &why, c, 0, "Identity", NULL, &n2), AG_OK);
    assert_string_equal(ag_node_name(g, n1), "a_tp_Identity0");
    assert_string_equal(ag_node_name(g, n2), "a_tp_Identity1");
    assert_string_equal(ag_node_type(g, n1), "Identity");
    assert_int_equal(ag_node_input_src(g, n1, 0).node, a);
    assert_int_equal(ag_node_input_src(g, b, 0).node, n1);
    assert_int_equal(ag_node_input_src(g, c, 0).node, n2);
    /* Both descriptors typed like the producer output, its attributes dropped. */
    for (int k = 0; k < 2; k++) {
        const ag_tensor_desc *d = k ? ag_node_output_desc_c(g, n1, 0) : ag_node_input_desc_c(g, n1, 0);
        assert_int_equal(d->dtype, AG_DT_F32);
        assert_int_equal(d->rank, 1);
        assert_int_equal(d->dims[0], 4);
        assert_string_equal(d->name, "av");
        assert_int_equal(ag_attrs_count(d->attrs), 0);
    }
    assert_int_equal(ag_report_isolation_count(r), 2);
    assert_iso(ag_report_isolation_at(r, 0), "tp", "rule X", "Identity", "main", "a_tp_Identity0", "a:0", "b:0");
    assert_iso(ag_report_isolation_at(r, 1), "tp", "rule X", "Identity", "main", "a_tp_Identity1", "a:0", "c:0");

    /* A given name is made unique in its subgraph. */
    ag_node_id d = agtest_find(g, AG_ROOT, "d"), n3 = AG_NONE;
    assert_int_equal(ag_pass_insert_before(&env, &why, d, 1, "MemcpyAsync", "b", &n3), AG_OK);
    assert_string_equal(ag_node_name(g, n3), "b_1");
    assert_iso(ag_report_isolation_at(r, 2), "tp", "rule X", "MemcpyAsync", "main", "b_1", "c:0", "d:1");
    assert_int_equal(ag_graph_verify(g), AG_OK);

    /* No report: the change is made, nothing recorded. */
    ag_pass_env quiet = {g, NULL, NULL};
    assert_int_equal(ag_pass_insert_before(&quiet, &why, d, 0, "Identity", NULL, NULL), AG_OK);
    assert_int_equal(ag_report_isolation_count(r), 3);
    ag_report_destroy(r);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_insert_after(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = read_agt(ctx, fan_text);
    ag_report *r = NULL;
    assert_int_equal(ag_report_create(ctx, &r), AG_OK);
    ag_pass_env env = {g, NULL, r};
    ag_why why = {"tp", "after rule"};
    ag_node_id a = agtest_find(g, AG_ROOT, "a"), e = agtest_find(g, AG_ROOT, "e");

    /* Selected consumers: one isolation per consumer moved. */
    ag_port only_e = {e, 0};
    ag_node_id n = AG_NONE;
    assert_int_equal(ag_pass_insert_after(&env, &why, a, 0, &only_e, 1, "Identity", "copy", &n), AG_OK);
    assert_string_equal(ag_node_name(g, n), "copy");
    assert_int_equal(ag_node_input_src(g, e, 0).node, n);
    assert_int_equal(ag_node_output_nconsumers(g, a, 0), 3);
    assert_int_equal(ag_report_isolation_count(r), 1);
    assert_iso(ag_report_isolation_at(r, 0), "tp", "after rule", "Identity", "main", "copy", "a:0", "e:0");

    /* All consumers (the first copy among them). */
    ag_node_id m = AG_NONE;
    assert_int_equal(ag_pass_insert_after(&env, &why, a, 0, NULL, 0, "Identity", NULL, &m), AG_OK);
    assert_string_equal(ag_node_name(g, m), "a_tp_Identity0");
    assert_int_equal(ag_node_output_nconsumers(g, a, 0), 1);
    assert_int_equal(ag_node_output_nconsumers(g, m, 0), 3);
    assert_int_equal(ag_report_isolation_count(r), 4);
    assert_iso(ag_report_isolation_at(r, 1), "tp", "after rule", "Identity", "main", "a_tp_Identity0", "a:0", "b:0");
    assert_iso(ag_report_isolation_at(r, 2), "tp", "after rule", "Identity", "main", "a_tp_Identity0", "a:0", "c:0");
    assert_iso(ag_report_isolation_at(r, 3), "tp", "after rule", "Identity", "main", "a_tp_Identity0", "a:0",
               "copy:0");
    assert_int_equal(ag_node_output_desc_c(g, m, 0)->dtype, AG_DT_F32);
    assert_int_equal(ag_graph_verify(g), AG_OK);

    /* An output without consumers: the node is still explained, once. */
    ag_node_id lone = agtest_node(g, AG_ROOT, "Relu", "lone", 1, 1);
    agtest_edge(g, a, 0, lone, 0);
    assert_int_equal(ag_pass_insert_after(&env, &why, lone, 0, NULL, 0, "Identity", NULL, NULL), AG_OK);
    assert_int_equal(ag_report_isolation_count(r), 5);
    assert_iso(ag_report_isolation_at(r, 4), "tp", "after rule", "Identity", "main", "lone_tp_Identity0", "lone:0", "");
    ag_report_destroy(r);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_insert_in_subgraph(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = read_agt(ctx, "graph main {\n"
                                "  c = Data() -> (bool[]) <index = 0>\n"
                                "  x = Data() -> (f32[2]) <index = 1>\n"
                                "  r = If(c, x) -> (f32[2]) {\n"
                                "    graph then_b {\n"
                                "      p = Data() -> (f32[2]) <_parent_node_index = 1>\n"
                                "      out = NetOutput(p <_parent_node_index = 0>)\n"
                                "    }\n"
                                "    graph else_b {\n"
                                "      p = Data() -> (f32[2]) <_parent_node_index = 1>\n"
                                "      out = NetOutput(p <_parent_node_index = 0>)\n"
                                "    }\n"
                                "  }\n"
                                "  o = NetOutput(r)\n"
                                "}\n");
    ag_report *r = NULL;
    assert_int_equal(ag_report_create(ctx, &r), AG_OK);
    ag_pass_env env = {g, NULL, r};
    ag_why why = {"sg", "subgraph rule"};
    ag_sub_id eb = ag_graph_find_sub(g, "else_b");
    ag_node_id out = agtest_find(g, eb, "out"), n = AG_NONE;
    assert_int_equal(ag_pass_insert_before(&env, &why, out, 0, "Identity", "p", &n), AG_OK);
    assert_int_equal(ag_node_owner(g, n), eb);
    assert_string_equal(ag_node_name(g, n), "p_1");
    assert_iso(ag_report_isolation_at(r, 0), "sg", "subgraph rule", "Identity", "else_b", "p_1", "p:0", "out:0");
    /* The same name is free in the other branch. */
    ag_node_id m = AG_NONE;
    ag_sub_id tb = ag_graph_find_sub(g, "then_b");
    assert_int_equal(ag_pass_insert_before(&env, &why, agtest_find(g, tb, "out"), 0, "Identity", "p_1", &m), AG_OK);
    assert_string_equal(ag_node_name(g, m), "p_1");
    assert_int_equal(ag_node_owner(g, m), tb);

    /* ag_pass_unique_name: counting suffixes, and a buffer too small. */
    char buf[8];
    assert_int_equal(ag_pass_unique_name(&env, tb, "q", buf, sizeof buf), AG_OK);
    assert_string_equal(buf, "q");
    assert_int_equal(ag_pass_unique_name(&env, tb, "p", buf, sizeof buf), AG_OK);
    assert_string_equal(buf, "p_2");
    assert_int_equal(ag_pass_unique_name(&env, tb, "longername", buf, sizeof buf), AG_EINVAL);
    assert_errmsg(ctx, "longername");
    ag_report_destroy(r);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_insert_errors(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = read_agt(ctx, "graph main {\n"
                                "  a = Data() -> (f32[4]) <index = 0>\n"
                                "  b = Add(a, -) -> (f32[4])\n"
                                "  out = NetOutput(b)\n"
                                "}\n");
    ag_graph *ref = read_agt(ctx, "graph main {\n"
                                  "  a = Data() -> (f32[4]) <index = 0>\n"
                                  "  b = Add(a, -) -> (f32[4])\n"
                                  "  out = NetOutput(b)\n"
                                  "}\n");
    ag_report *r = NULL;
    assert_int_equal(ag_report_create(ctx, &r), AG_OK);
    ag_pass_env env = {g, NULL, r};
    ag_why why = {"tp", "rule"};
    ag_node_id a = agtest_find(g, AG_ROOT, "a"), b = agtest_find(g, AG_ROOT, "b");
    assert_int_equal(ag_pass_insert_before(&env, &why, b, 1, "Identity", NULL, NULL), AG_EINVAL);
    assert_errmsg(ctx, "input 1");
    assert_errmsg(ctx, "b (Add)");
    assert_int_equal(ag_pass_insert_before(&env, &why, b, 5, "Identity", NULL, NULL), AG_EINVAL);
    assert_int_equal(ag_pass_insert_after(&env, &why, a, 3, NULL, 0, "Identity", NULL, NULL), AG_EINVAL);
    assert_errmsg(ctx, "output 3");
    /* A port that is not a consumer: rejected by the graph, the new node removed. */
    ag_port bad = {b, 1};
    assert_int_equal(ag_pass_insert_after(&env, &why, a, 0, &bad, 1, "Identity", NULL, NULL), AG_ENOTFOUND);
    assert_int_equal(ag_pass_add_ctrl(&env, &why, a, a), AG_EINVAL);
    assert_int_equal(ag_pass_add_ctrl(&env, &why, a, 12345), AG_EINVAL);
    assert_graph_equal(g, ref);
    assert_int_equal(ag_report_isolation_count(r), 0);
    ag_report_destroy(r);
    ag_graph_destroy(ref);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_add_ctrl(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = read_agt(ctx, "graph main {\n"
                                "  a = Data() -> (f32[4]) <index = 0>\n"
                                "  b = Relu(a) -> (f32[4])\n"
                                "  c = Neg(a, ^b) -> (f32[4])\n"
                                "  d = Exp(a) -> (f32[4])\n"
                                "  out = NetOutput(c, d)\n"
                                "}\n");
    ag_report *r = NULL;
    assert_int_equal(ag_report_create(ctx, &r), AG_OK);
    ag_pass_env env = {g, NULL, r};
    ag_why why = {"tp", "order rule"};
    ag_node_id b = agtest_find(g, AG_ROOT, "b"), c = agtest_find(g, AG_ROOT, "c"), d = agtest_find(g, AG_ROOT, "d");
    /* Existing edge: nothing to do, nothing recorded. */
    assert_int_equal(ag_pass_add_ctrl(&env, &why, b, c), AG_OK);
    assert_int_equal(ag_report_isolation_count(r), 0);
    assert_int_equal(ag_pass_add_ctrl(&env, &why, d, c), AG_OK);
    assert_true(has_ctrl(g, d, c));
    assert_int_equal(ag_report_isolation_count(r), 1);
    assert_iso(ag_report_isolation_at(r, 0), "tp", "order rule", "control", "main", "", "d", "c");
    /* Idempotent. */
    assert_int_equal(ag_pass_add_ctrl(&env, &why, d, c), AG_OK);
    assert_int_equal(ag_report_isolation_count(r), 1);
    assert_int_equal(ag_node_num_ctrl_in(g, c), 2);

    /* ag_pass_record: kind and graph from the node, free-form anchors. */
    assert_int_equal(ag_pass_record(&env, &why, d, "a:0,b:0", "c"), AG_OK);
    assert_iso(ag_report_isolation_at(r, 1), "tp", "order rule", "Exp", "main", "d", "a:0,b:0", "c");
    ag_report_destroy(r);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

/* Every helper under allocation failure: either it succeeds, or graph and
 * report are exactly as before the call. */
static ag_status helpers_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_graph *g = NULL, *snap = NULL;
    ag_report *r = NULL;
    ag_status st;
    if ((st = ag_text_read(ctx, fan_text, strlen(fan_text), "t.agt", &g)) != AG_OK)
        return st;
    if ((st = ag_report_create(ctx, &r)) != AG_OK)
        goto out;
    ag_pass_env env = {g, NULL, r};
    ag_why why = {"tp", "rule"};
    ag_node_id a = ag_sub_find_node(g, AG_ROOT, "a"), b = ag_sub_find_node(g, AG_ROOT, "b");
    ag_node_id c = ag_sub_find_node(g, AG_ROOT, "c"), e = ag_sub_find_node(g, AG_ROOT, "e");
    ag_port only_e = {e, 0};
    for (int step = 0; step < 5; step++) {
        ag_graph_destroy(snap);
        snap = NULL;
        if ((st = ag_text_read(ctx, fan_text, strlen(fan_text), "t.agt", &snap)) != AG_OK)
            goto out;
        /* Bring the snapshot to the same state as g: replay the steps so far
         * without a report (they may fail too; then stop). */
        ag_pass_env senv = {snap, NULL, NULL};
        ag_node_id sa = ag_sub_find_node(snap, AG_ROOT, "a"), sb = ag_sub_find_node(snap, AG_ROOT, "b");
        ag_node_id sc = ag_sub_find_node(snap, AG_ROOT, "c"), se = ag_sub_find_node(snap, AG_ROOT, "e");
        ag_port sonly_e = {se, 0};
        for (int k = 0; k < step && st == AG_OK; k++) {
            switch (k) {
            case 0: st = ag_pass_insert_before(&senv, &why, sb, 0, "Identity", NULL, NULL); break;
            case 1: st = ag_pass_insert_after(&senv, &why, sa, 0, &sonly_e, 1, "Identity", "cp", NULL); break;
            case 2: st = ag_pass_add_ctrl(&senv, &why, sb, sc); break;
            case 3: st = ag_pass_insert_after(&senv, &why, sa, 0, NULL, 0, "MemcpyAsync", NULL, NULL); break;
            default: break;
            }
        }
        if (st != AG_OK)
            goto out;
        uint32_t before = ag_report_isolation_count(r);
        switch (step) {
        case 0: st = ag_pass_insert_before(&env, &why, b, 0, "Identity", NULL, NULL); break;
        case 1: st = ag_pass_insert_after(&env, &why, a, 0, &only_e, 1, "Identity", "cp", NULL); break;
        case 2: st = ag_pass_add_ctrl(&env, &why, b, c); break;
        case 3: st = ag_pass_insert_after(&env, &why, a, 0, NULL, 0, "MemcpyAsync", NULL, NULL); break;
        default: st = ag_pass_record(&env, &why, b, "x", "y"); break;
        }
        if (st != AG_OK) {
            assert_int_equal(st, AG_ENOMEM);
            assert_graph_equal(g, snap);
            assert_int_equal(ag_report_isolation_count(r), before);
            goto out;
        }
    }
    assert_int_equal(ag_report_isolation_count(r), 7);
out:
    ag_graph_destroy(snap);
    ag_report_destroy(r);
    ag_graph_destroy(g);
    return st;
}

static void test_helpers_oom(void **state)
{
    (void)state;
    AG_TEST_OOM_SWEEP(helpers_body, NULL);
}

/* ---- reachability ---- */

static void test_reach(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    /* Diamond a -> {b, c} -> d, a side chain e -> f joined to c by a control
     * edge, and g unrelated; a subgraph node never reaches a root node. */
    ag_graph *g = read_agt(ctx, "graph main {\n"
                                "  a = Data() -> (f32[4]) <index = 0>\n"
                                "  b = Relu(a) -> (f32[4])\n"
                                "  c = Neg(a, ^f) -> (f32[4])\n"
                                "  d = Add(b, c) -> (f32[4])\n"
                                "  e = Data() -> (f32[4]) <index = 1>\n"
                                "  f = Exp(e) -> (f32[4])\n"
                                "  h = Data() -> (bool[]) <index = 2>\n"
                                "  i = If(h, d) -> (f32[4]) {\n"
                                "    graph tb {\n"
                                "      p = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                                "      out = NetOutput(p <_parent_node_index = 0>)\n"
                                "    }\n"
                                "    graph eb {\n"
                                "      p = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                                "      out = NetOutput(p <_parent_node_index = 0>)\n"
                                "    }\n"
                                "  }\n"
                                "  k = Sqrt(e) -> (f32[4])\n"
                                "  out = NetOutput(i, k)\n"
                                "}\n");
#define N(name) agtest_find(g, AG_ROOT, name)
    ag_node_id a = N("a"), b = N("b"), c = N("c"), d = N("d"), e = N("e"), f = N("f"), i = N("i"), k = N("k");
    ag_node_id out = N("out");
#undef N
    ag_sub_id tb = ag_graph_find_sub(g, "tb");
    ag_node_id tp = agtest_find(g, tb, "p"), tout = agtest_find(g, tb, "out");
    ag_reach *r = NULL;
    assert_int_equal(ag_reach_create(g, &r), AG_OK);
    assert_true(ag_reaches(r, a, d));
    assert_true(ag_reaches(r, a, b));
    assert_true(ag_reaches(r, b, d));
    assert_true(ag_reaches(r, e, c)); /* via the control edge f -> c */
    assert_true(ag_reaches(r, f, d));
    assert_true(ag_reaches(r, a, out));
    assert_true(ag_reaches(r, tp, tout));
    assert_false(ag_reaches(r, d, a));
    assert_false(ag_reaches(r, b, c));
    assert_false(ag_reaches(r, c, b));
    assert_false(ag_reaches(r, a, a));
    assert_false(ag_reaches(r, a, k));
    assert_false(ag_reaches(r, k, d));
    assert_false(ag_reaches(r, tp, out)); /* different subgraphs */
    assert_false(ag_reaches(r, a, tout));
    assert_true(ag_reach_pos(r, a) < ag_reach_pos(r, d));
    assert_true(ag_reach_pos(r, i) < ag_reach_pos(r, tp));
    assert_true(ag_reach_pos(r, 99999) == AG_REACH_NOPOS);

    /* New edges and nodes: after an update the index sees them. */
    assert_int_equal(ag_graph_add_ctrl_edge(g, b, c), AG_OK);
    ag_node_id z = agtest_node(g, AG_ROOT, "NoOp", "z", 0, 0);
    agtest_ctrl(g, k, z);
    agtest_ctrl(g, z, b);
    assert_int_equal(ag_reach_update(r), AG_OK);
    assert_true(ag_reaches(r, b, c));
    assert_true(ag_reaches(r, k, d));
    assert_true(ag_reaches(r, e, b));
    assert_true(ag_reaches(r, z, i));
    assert_false(ag_reaches(r, c, b));
    assert_false(ag_reaches(r, z, k));
    assert_true(ag_reach_pos(r, z) < ag_reach_pos(r, b));

    /* A cycle is reported and the index stays usable. */
    agtest_ctrl(g, d, a);
    assert_int_equal(ag_reach_update(r), AG_ECYCLE);
    assert_int_equal(ag_graph_remove_ctrl_edge(g, d, a), AG_OK);
    assert_int_equal(ag_reach_update(r), AG_OK);
    assert_true(ag_reaches(r, a, d));
    ag_reach_destroy(r);
    ag_reach_destroy(NULL);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

/* A long chain with many side branches: each query only walks the nodes
 * between a and b in the order, and repeated queries agree. */
static void test_reach_chain(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = NULL;
    assert_int_equal(ag_graph_create(ctx, "main", &g), AG_OK);
    enum { LEN = 2000 };
    ag_node_id *chain = malloc(LEN * sizeof *chain);
    assert_non_null(chain);
    char name[32];
    for (int k = 0; k < LEN; k++) {
        snprintf(name, sizeof name, "n%d", k);
        chain[k] = agtest_node(g, AG_ROOT, "Relu", name, 1, 2);
        if (k > 0)
            agtest_edge(g, chain[k - 1], 0, chain[k], 0);
    }
    ag_reach *r = NULL;
    assert_int_equal(ag_reach_create(g, &r), AG_OK);
    for (int k = 0; k + 7 < LEN; k += 7) {
        assert_true(ag_reaches(r, chain[k], chain[k + 7]));
        assert_false(ag_reaches(r, chain[k + 7], chain[k]));
        assert_true(ag_reaches(r, chain[0], chain[k + 7]));
    }
    ag_reach_destroy(r);
    free(chain);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static ag_status reach_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_graph *g = NULL;
    ag_reach *r = NULL;
    AG_TRY(ag_text_read(ctx, fan_text, strlen(fan_text), "t.agt", &g));
    ag_status st = ag_reach_create(g, &r);
    if (st == AG_OK) {
        ag_node_id a = ag_sub_find_node(g, AG_ROOT, "a"), d = ag_sub_find_node(g, AG_ROOT, "d");
        assert_true(ag_reaches(r, a, d));
        ag_node_id x = AG_NONE;
        st = ag_graph_add_node(g, AG_ROOT, "NoOp", "x", 0, 0, &x);
        if (st == AG_OK)
            st = ag_graph_add_ctrl_edge(g, d, x);
        if (st == AG_OK)
            st = ag_reach_update(r);
        if (st == AG_OK)
            assert_true(ag_reaches(r, a, x));
        else /* the old positions still answer for the old nodes */
            assert_true(ag_reaches(r, a, d));
    }
    ag_reach_destroy(r);
    ag_graph_destroy(g);
    return st;
}

static void test_reach_oom(void **state)
{
    (void)state;
    AG_TEST_OOM_SWEEP(reach_body, NULL);
}

/* ---- the registry and the runner ---- */

static void test_registry(void **state)
{
    (void)state;
    static const char *const order[] = {"lint",
                                        "hccl_memcpy",
                                        "hccl_continuous_memcpy",
                                        "inplace_support_check",
                                        "atomic_addr_clean",
                                        "subgraph_isolate",
                                        "memcpy_addr_async",
                                        "mark_same_addr",
                                        "rw_conflict",
                                        "layout_conflict"};
    assert_int_equal(ag_pass_count(), sizeof order / sizeof order[0]);
    for (uint32_t k = 0; k < ag_pass_count(); k++) {
        const ag_pass_def *p = ag_pass_at(k);
        assert_non_null(p);
        assert_string_equal(p->name, order[k]);
        assert_non_null(p->run);
        assert_true(strlen(p->summary) > 10);
        assert_ptr_equal(ag_pass_find(order[k]), p);
    }
    assert_null(ag_pass_at(ag_pass_count()));
    assert_null(ag_pass_find("nope"));
    assert_null(ag_pass_find(NULL));

    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = read_agt(ctx, "graph main {\n"
                                "  a = Data() -> (f32[4]) <index = 0>\n"
                                "  b = Relu(a) -> (f32[4])\n"
                                "  c = Neg(b) -> (f32[4])\n"
                                "  out = NetOutput(c)\n"
                                "}\n");
    ag_pass_env env = {g, NULL, NULL};
    assert_int_equal(ag_pass_run(&env, "no_such_pass"), AG_ENOTFOUND);
    assert_errmsg(ctx, "no_such_pass");
    assert_errmsg(ctx, "hccl_memcpy, hccl_continuous_memcpy");
    assert_errmsg(ctx, "rw_conflict");
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

/* The whole pipeline on the example training step: it changes the graph,
 * the result verifies, and a second run on its own output adds nothing. */
static void test_pipeline_idempotent(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = NULL;
    assert_int_equal(ag_text_read_file(ctx, AG_SOURCE_DIR "/examples/train_step.agt", &g), AG_OK);
    ag_ops *ops = NULL;
    assert_int_equal(ag_ops_create(ctx, &ops), AG_OK);
    ag_report *r = NULL;
    assert_int_equal(ag_report_create(ctx, &r), AG_OK);
    ag_pass_env env = {g, ops, r};
    uint32_t nodes = ag_graph_node_count(g);
    assert_int_equal(ag_pipeline_run(&env), AG_OK);
    uint32_t first = ag_report_isolation_count(r);
    assert_true(first > 0);
    assert_true(ag_graph_node_count(g) > nodes);
    assert_int_equal(ag_graph_verify(g), AG_OK);
    for (uint32_t k = 0; k < first; k++)
        assert_non_null(ag_pass_find(ag_report_isolation_at(r, k)->pass));
    assert_int_equal(ag_pipeline_run(&env), AG_OK);
    assert_int_equal(ag_report_isolation_count(r), first);
    ag_report_destroy(r);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static ag_status pipeline_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_graph *g = NULL;
    ag_ops *ops = NULL;
    ag_report *r = NULL;
    ag_status st = ag_text_read_file(ctx, AG_SOURCE_DIR "/examples/train_step.agt", &g);
    if (st == AG_OK)
        st = ag_ops_create(ctx, &ops);
    if (st == AG_OK)
        st = ag_report_create(ctx, &r);
    if (st == AG_OK) {
        ag_pass_env env = {g, ops, r};
        st = ag_pipeline_run(&env);
        /* Whatever failed, the graph is still well formed (the check needs
         * memory itself, which may still be failing). */
        ag_status vs = ag_graph_verify(g);
        if (vs != AG_OK && vs != AG_ENOMEM)
            fail_msg("graph broken after pipeline status %s: %s", ag_status_str(st), ag_ctx_errmsg(ctx));
    }
    ag_report_destroy(r);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    return st;
}

static void test_pipeline_oom(void **state)
{
    (void)state;
    uint64_t runs = AG_TEST_OOM_SWEEP(pipeline_body, NULL);
    assert_true(runs > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_copies), cmocka_unit_test(test_report_oom),
        cmocka_unit_test(test_insert_before), cmocka_unit_test(test_insert_after),
        cmocka_unit_test(test_insert_in_subgraph), cmocka_unit_test(test_insert_errors),
        cmocka_unit_test(test_add_ctrl),      cmocka_unit_test(test_helpers_oom),
        cmocka_unit_test(test_reach),         cmocka_unit_test(test_reach_chain),
        cmocka_unit_test(test_reach_oom),     cmocka_unit_test(test_registry),
        cmocka_unit_test(test_pipeline_idempotent), cmocka_unit_test(test_pipeline_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
