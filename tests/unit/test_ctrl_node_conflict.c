/* Unit tests of the control-flow pre-pass of the layout-conflict pass: If
 * branch outputs from a Data, a Const, a Variable, a variable reference or one
 * value twice, a branch without conflict, a Case of three branches, While
 * bodies (position change, bypass, single op, long body, continuous
 * consumer, existing copies), an If nested in a While body, a second run that
 * changes nothing, and allocation-failure sweeps. */
#include "support/agtest.h"

#include "passes/layout_internal.h"

#include <stdio.h>

#define R_IF_SRC "layout ctrl: if/case branch output from data/const/variable"
#define R_IF_TWICE "layout ctrl: if/case branch output produced twice"
#define R_WHILE_OUT "layout ctrl: while body output copy"
#define R_WHILE_DATA "layout ctrl: while body data position change"

typedef struct fixture {
    ag_ctx *ctx;
    ag_graph *g;
    ag_ops *ops;
    ag_report *rep;
} fixture;

static void fx_open(fixture *fx, const char *text)
{
    fx->ctx = agtest_ctx();
    fx->g = NULL;
    if (ag_text_read(fx->ctx, text, strlen(text), "test.agt", &fx->g) != AG_OK)
        fail_msg("parse: %s", ag_ctx_errmsg(fx->ctx));
    assert_int_equal(ag_ops_create(fx->ctx, &fx->ops), AG_OK);
    assert_int_equal(ag_report_create(fx->ctx, &fx->rep), AG_OK);
}

static void fx_close(fixture *fx)
{
    ag_report_destroy(fx->rep);
    ag_ops_destroy(fx->ops);
    ag_graph_destroy(fx->g);
    ag_ctx_destroy(fx->ctx);
}

/* Runs the pre-pass on the root; then once more, which must add nothing. */
static void fx_run(fixture *fx)
{
    ag_pass_env env = {fx->g, fx->ops, fx->rep};
    if (ag_layout_ctrl_node_prepass(&env, AG_ROOT) != AG_OK)
        fail_msg("prepass: %s", ag_ctx_errmsg(fx->ctx));
    assert_int_equal(ag_graph_verify(fx->g), AG_OK);
    uint32_t nodes = ag_graph_node_count(fx->g), isos = ag_report_isolation_count(fx->rep);
    assert_int_equal(ag_layout_ctrl_node_prepass(&env, AG_ROOT), AG_OK);
    assert_int_equal(ag_graph_node_count(fx->g), nodes);
    assert_int_equal(ag_report_isolation_count(fx->rep), isos);
}

static ag_sub_id sub(const fixture *fx, const char *name)
{
    ag_sub_id s = ag_graph_find_sub(fx->g, name);
    assert_int_not_equal(s, AG_NONE);
    return s;
}

/* Producer of input i of node name in subgraph s. */
static ag_port src_of(const fixture *fx, const char *s, const char *name, uint32_t i)
{
    return ag_node_input_src(fx->g, agtest_find(fx->g, sub(fx, s), name), i);
}

static const char *src_name(const fixture *fx, const char *s, const char *name, uint32_t i)
{
    ag_port p = src_of(fx, s, name, i);
    assert_int_not_equal(p.node, AG_NONE);
    return ag_node_name(fx->g, p.node);
}

static void assert_iso(const fixture *fx, uint32_t k, const char *rule, const char *node, const char *producer,
                       const char *consumer)
{
    assert_true(k < ag_report_isolation_count(fx->rep));
    const ag_isolation *iso = ag_report_isolation_at(fx->rep, k);
    assert_string_equal(iso->pass, AG_LAYOUT_PASS);
    assert_string_equal(iso->rule, rule);
    assert_string_equal(iso->kind, "Identity");
    assert_string_equal(iso->node, node);
    assert_string_equal(iso->producer, producer);
    assert_string_equal(iso->consumer, consumer);
}

static bool attr_true(const fixture *fx, ag_node_id n, const char *name)
{
    bool b = false;
    return ag_attrs_get_bool(ag_node_attrs_c(fx->g, n), name, &b) && b;
}

/* An If whose then-branch returns what each test puts there, the else branch
 * a fresh value. */
static char *if_graph(const char *then_body, const char *then_outs)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "graph g {\n"
             "  c = Data() -> (bool[]) <index = 0>\n"
             "  x = Data() -> (f32[4]) <index = 1>\n"
             "  f = If(c, x) -> (f32[4], f32[4]) {\n"
             "    graph tb {\n"
             "      a = Data() -> (f32[4]) <_parent_node_index = 1>\n"
             "%s"
             "      tout = NetOutput(%s)\n"
             "    }\n"
             "    graph eb {\n"
             "      e = Data() -> (f32[4]) <_parent_node_index = 1>\n"
             "      n1 = Neg(e) -> (f32[4])\n"
             "      n2 = Relu(e) -> (f32[4])\n"
             "      eout = NetOutput(n1 <_parent_node_index = 0>, n2 <_parent_node_index = 1>)\n"
             "    }\n"
             "  }\n"
             "  o = NetOutput(f, f:1)\n"
             "}\n",
             then_body, then_outs);
    return buf;
}

static void check_one_copy(const char *body, const char *outs, uint32_t port, const char *rule,
                           const char *producer)
{
    fixture fx;
    fx_open(&fx, if_graph(body, outs));
    ag_node_id ctl = agtest_node(fx.g, sub(&fx, "tb"), "NoOp", "ctl", 0, 0);
    agtest_ctrl(fx.g, ctl, agtest_find(fx.g, sub(&fx, "tb"), "tout"));
    fx_run(&fx);
    assert_int_equal(ag_report_isolation_count(fx.rep), 1);
    char cons[32];
    snprintf(cons, sizeof cons, "tout:%u", (unsigned)port);
    char prod[64];
    snprintf(prod, sizeof prod, "%s:0", producer);
    char name[64];
    snprintf(name, sizeof name, "identity_%u_tout_MemLayoutConflict_0", (unsigned)port);
    assert_iso(&fx, 0, rule, name, prod, cons);
    ag_node_id id = agtest_find(fx.g, sub(&fx, "tb"), name);
    assert_string_equal(ag_node_type(fx.g, id), "Identity");
    assert_int_equal(ag_node_num_inputs(fx.g, id), 1);
    assert_string_equal(src_name(&fx, "tb", "tout", port), name);
    assert_string_equal(src_name(&fx, "tb", name, 0), producer);
    assert_true(attr_true(&fx, id, "_cannot_be_deleted"));
    bool b = true;
    assert_true(ag_attrs_get_bool(ag_node_attrs_c(fx.g, id), "no_need_constant_folding", &b));
    assert_false(b);
    /* InsertNodeBefore moves the NetOutput's control edges to the copy. */
    assert_int_equal(ag_node_num_ctrl_in(fx.g, agtest_find(fx.g, sub(&fx, "tb"), "tout")), 0);
    assert_int_equal(ag_node_num_ctrl_in(fx.g, id), 1);
    /* The else branch computes fresh values: untouched. */
    assert_string_equal(src_name(&fx, "eb", "eout", 0), "n1");
    fx_close(&fx);
}

static void test_if_data(void **state)
{
    (void)state;
    check_one_copy("      r = Relu(a) -> (f32[4])\n", "a <_parent_node_index = 0>, r <_parent_node_index = 1>", 0,
                   R_IF_SRC, "a");
}

static void test_if_const(void **state)
{
    (void)state;
    check_one_copy("      k = Const() -> (f32[4] = {1.0, 2.0, 3.0, 4.0})\n      r = Relu(a) -> (f32[4])\n",
                   "r <_parent_node_index = 0>, k <_parent_node_index = 1>", 1, R_IF_SRC, "k");
}

static void test_if_variable(void **state)
{
    (void)state;
    check_one_copy("      v = Variable() -> (f32[4])\n      r = Relu(a) -> (f32[4])\n",
                   "r <_parent_node_index = 0>, v <_parent_node_index = 1>", 1, R_IF_SRC, "v");
}

static void test_if_ref_var(void **state)
{
    (void)state;
    /* On an output descriptor, and on the node. */
    check_one_copy("      w = Relu(a) -> (f32[4] <ref_var_src_var_name = \"var0\">)\n      r = Relu(a) -> (f32[4])\n",
                   "r <_parent_node_index = 0>, w <_parent_node_index = 1>", 1, R_IF_SRC, "w");
    check_one_copy("      w = Relu(a) -> (f32[4]) <ref_var_src_var_name = \"var0\">\n      r = Relu(a) -> (f32[4])\n",
                   "w <_parent_node_index = 0>, r <_parent_node_index = 1>", 0, R_IF_SRC, "w");
}

static void test_if_twice(void **state)
{
    (void)state;
    check_one_copy("      r = Relu(a) -> (f32[4])\n", "r <_parent_node_index = 0>, r <_parent_node_index = 1>", 1,
                   R_IF_TWICE, "r");
}

static void test_if_view_of_data(void **state)
{
    (void)state;
    /* A Reshape passes the Data's buffer on: still the branch input. */
    check_one_copy("      sh = Const() -> (i64[1] = {4})\n      v = Reshape(a, sh) -> (f32[4])\n"
                   "      r = Relu(a) -> (f32[4])\n",
                   "r <_parent_node_index = 0>, v <_parent_node_index = 1>", 1, R_IF_SRC, "v");
}

static void test_if_no_conflict(void **state)
{
    (void)state;
    fixture fx;
    fx_open(&fx, if_graph("      r = Relu(a) -> (f32[4])\n      s = Neg(a) -> (f32[4])\n",
                          "r <_parent_node_index = 0>, s <_parent_node_index = 1>"));
    uint32_t nodes = ag_graph_node_count(fx.g);
    fx_run(&fx);
    assert_int_equal(ag_report_isolation_count(fx.rep), 0);
    assert_int_equal(ag_graph_node_count(fx.g), nodes);
    fx_close(&fx);
}

static void test_if_multi_port(void **state)
{
    (void)state;
    /* Data, then r twice, then the Data again: one Identity, three ports in
     * NetOutput order. */
    fixture fx;
    fx_open(&fx, "graph g {\n"
                 "  c = Data() -> (bool[]) <index = 0>\n"
                 "  x = Data() -> (f32[4]) <index = 1>\n"
                 "  f = If(c, x) -> (f32[4], f32[4], f32[4], f32[4]) {\n"
                 "    graph tb {\n"
                 "      a = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      r = Relu(a) -> (f32[4])\n"
                 "      tout = NetOutput(a <_parent_node_index = 0>, r <_parent_node_index = 1>, "
                 "r <_parent_node_index = 2>, a <_parent_node_index = 3>)\n"
                 "    }\n"
                 "    graph eb {\n"
                 "      e = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      n1 = Neg(e) -> (f32[4])\n"
                 "      eout = NetOutput(n1 <_parent_node_index = 0>, n1 <_parent_node_index = 1>, "
                 "n1 <_parent_node_index = 2>, n1 <_parent_node_index = 3>)\n"
                 "    }\n"
                 "  }\n"
                 "  o = NetOutput(f, f:1, f:2, f:3)\n"
                 "}\n");
    fx_run(&fx);
    assert_int_equal(ag_report_isolation_count(fx.rep), 6);
    const char *id = "identity_0_tout_MemLayoutConflict_0";
    assert_iso(&fx, 0, R_IF_SRC, id, "a:0", "tout:0");
    assert_iso(&fx, 1, R_IF_TWICE, id, "r:0", "tout:2");
    assert_iso(&fx, 2, R_IF_SRC, id, "a:0", "tout:3");
    const char *id2 = "identity_1_eout_MemLayoutConflict_1";
    assert_iso(&fx, 3, R_IF_TWICE, id2, "n1:0", "eout:1");
    assert_iso(&fx, 5, R_IF_TWICE, id2, "n1:0", "eout:3");
    ag_node_id n = agtest_find(fx.g, sub(&fx, "tb"), id);
    assert_int_equal(ag_node_num_inputs(fx.g, n), 3);
    assert_int_equal(ag_node_num_outputs(fx.g, n), 3);
    ag_node_id no = agtest_find(fx.g, sub(&fx, "tb"), "tout");
    assert_int_equal(ag_node_input_src(fx.g, no, 0).node, n);
    assert_int_equal(ag_node_input_src(fx.g, no, 0).index, 0);
    assert_string_equal(src_name(&fx, "tb", "tout", 1), "r");
    assert_int_equal(ag_node_input_src(fx.g, no, 2).index, 1);
    assert_int_equal(ag_node_input_src(fx.g, no, 3).index, 2);
    assert_string_equal(src_name(&fx, "eb", "eout", 0), "n1");
    fx_close(&fx);
}

static void test_case_three(void **state)
{
    (void)state;
    fixture fx;
    fx_open(&fx, "graph g {\n"
                 "  i = Data() -> (i32[]) <index = 0>\n"
                 "  x = Data() -> (f32[4]) <index = 1>\n"
                 "  cs = Case(i, x) -> (f32[4]) {\n"
                 "    graph b0 {\n"
                 "      d0 = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      o0 = NetOutput(d0 <_parent_node_index = 0>)\n"
                 "    }\n"
                 "    graph b1 {\n"
                 "      d1 = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      r1 = Relu(d1) -> (f32[4])\n"
                 "      o1 = NetOutput(r1 <_parent_node_index = 0>)\n"
                 "    }\n"
                 "    graph b2 {\n"
                 "      d2 = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      k2 = Const() -> (f32[4] = {0.0, 0.0, 0.0, 0.0})\n"
                 "      o2 = NetOutput(k2 <_parent_node_index = 0>)\n"
                 "    }\n"
                 "  }\n"
                 "  o = NetOutput(cs)\n"
                 "}\n");
    fx_run(&fx);
    assert_int_equal(ag_report_isolation_count(fx.rep), 2);
    assert_iso(&fx, 0, R_IF_SRC, "identity_0_o0_MemLayoutConflict_0", "d0:0", "o0:0");
    assert_iso(&fx, 1, R_IF_SRC, "identity_0_o2_MemLayoutConflict_1", "k2:0", "o2:0");
    assert_string_equal(src_name(&fx, "b1", "o1", 0), "r1");
    fx_close(&fx);
}

/* A While over n values whose body is given. */
static char *while_graph(uint32_t n, const char *body)
{
    static char buf[4096];
    char ins[128] = "", outs[128] = "", types[128] = "", onet[128] = "";
    for (uint32_t k = 0; k < n; k++) {
        size_t l = strlen(ins);
        snprintf(ins + l, sizeof ins - l, "%sx%u", k ? ", " : "", (unsigned)k);
        l = strlen(types);
        snprintf(types + l, sizeof types - l, "%sf32[4]", k ? ", " : "");
        l = strlen(onet);
        snprintf(onet + l, sizeof onet - l, "%sw:%u", k ? ", " : "", (unsigned)k);
        l = strlen(outs);
        snprintf(outs + l, sizeof outs - l, "  x%u = Data() -> (f32[4]) <index = %u>\n", (unsigned)k, (unsigned)k);
    }
    snprintf(buf, sizeof buf,
             "graph g {\n"
             "%s"
             "  w = While(%s) -> (%s) {\n"
             "    graph cond {\n"
             "      c0 = Data() -> (f32[4]) <_parent_node_index = 0>\n"
             "      r = ReduceSum(c0) -> (f32[])\n"
             "      z = Const() -> (f32[] = {0.0})\n"
             "      pr = Greater(r, z) -> (bool[])\n"
             "      cout = NetOutput(pr)\n"
             "    }\n"
             "    graph body {\n"
             "%s"
             "    }\n"
             "  }\n"
             "  o = NetOutput(%s)\n"
             "}\n",
             outs, ins, types, body, onet);
    return buf;
}

static void test_while_changed(void **state)
{
    (void)state;
    /* a and b swap places: the output copy writes both loop buffers, and a
     * copy after the Data nodes makes it read buffers of its own. */
    fixture fx;
    fx_open(&fx, while_graph(2, "      a = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                                "      b = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                                "      bo = NetOutput(b <_parent_node_index = 0>, a <_parent_node_index = 1>)\n"));
    fx_run(&fx);
    assert_int_equal(ag_report_isolation_count(fx.rep), 4);
    const char *out_id = "identity_0_bo_MemLayoutConflict_0";
    const char *in_id = "identity_1_identity_0_bo_MemLayoutConflict_0_MemLayoutConflict_1";
    assert_iso(&fx, 0, R_WHILE_OUT, out_id, "b:0", "bo:0");
    assert_iso(&fx, 1, R_WHILE_OUT, out_id, "a:0", "bo:1");
    assert_iso(&fx, 2, R_WHILE_DATA, in_id, "a:0", "identity_0_bo_MemLayoutConflict_0:1");
    assert_iso(&fx, 3, R_WHILE_DATA, in_id, "b:0", "identity_0_bo_MemLayoutConflict_0:0");
    /* a -> in_id:0 -> out_id:1 -> bo:1 */
    assert_string_equal(src_name(&fx, "body", "bo", 1), out_id);
    ag_port p = src_of(&fx, "body", out_id, 1);
    assert_string_equal(ag_node_name(fx.g, p.node), in_id);
    assert_int_equal(p.index, 0);
    assert_string_equal(src_name(&fx, "body", in_id, 0), "a");
    assert_string_equal(src_name(&fx, "body", in_id, 1), "b");
    fx_close(&fx);
}

static void test_while_bypass(void **state)
{
    (void)state;
    fixture fx;
    fx_open(&fx, while_graph(2, "      a = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                                "      b = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                                "      s = Add(a, b) -> (f32[4])\n"
                                "      bo = NetOutput(a <_parent_node_index = 0>, s <_parent_node_index = 1>)\n"));
    fx_run(&fx);
    /* a is not bypassed: it also feeds s.  So both NetOutput inputs get a
     * port. */
    assert_int_equal(ag_report_isolation_count(fx.rep), 2);
    fx_close(&fx);

    fx_open(&fx, while_graph(2, "      a = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                                "      b = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                                "      s = Neg(b) -> (f32[4])\n"
                                "      bo = NetOutput(a <_parent_node_index = 0>, s <_parent_node_index = 1>)\n"));
    fx_run(&fx);
    assert_int_equal(ag_report_isolation_count(fx.rep), 1);
    assert_iso(&fx, 0, R_WHILE_OUT, "identity_1_bo_MemLayoutConflict_0", "s:0", "bo:1");
    assert_string_equal(src_name(&fx, "body", "bo", 0), "a");
    fx_close(&fx);
}

static void test_while_single_op(void **state)
{
    (void)state;
    fixture fx;
    fx_open(&fx, while_graph(1, "      d = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                                "      n = Neg(d) -> (f32[4])\n"
                                "      bo = NetOutput(n <_parent_node_index = 0>)\n"));
    fx_run(&fx);
    assert_int_equal(ag_report_isolation_count(fx.rep), 1);
    assert_iso(&fx, 0, R_WHILE_OUT, "identity_0_bo_MemLayoutConflict_0", "n:0", "bo:0");
    fx_close(&fx);
}

static void test_while_long_body(void **state)
{
    (void)state;
    /* Three symbols, no continuous consumer: nothing. */
    fixture fx;
    fx_open(&fx, while_graph(1, "      d = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                                "      n = Neg(d) -> (f32[4])\n"
                                "      r = Relu(n) -> (f32[4])\n"
                                "      bo = NetOutput(r <_parent_node_index = 0>)\n"));
    uint32_t nodes = ag_graph_node_count(fx.g);
    fx_run(&fx);
    assert_int_equal(ag_report_isolation_count(fx.rep), 0);
    assert_int_equal(ag_graph_node_count(fx.g), nodes);
    fx_close(&fx);

    /* Data passed straight back: one symbol, nothing. */
    fx_open(&fx, while_graph(1, "      d = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                                "      bo = NetOutput(d <_parent_node_index = 0>)\n"));
    fx_run(&fx);
    assert_int_equal(ag_report_isolation_count(fx.rep), 0);
    fx_close(&fx);
}

static void test_while_continuous(void **state)
{
    (void)state;
    /* The result's buffer also feeds a continuous input: copy. */
    fixture fx;
    fx_open(&fx, while_graph(1, "      d = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                                "      n = Neg(d) -> (f32[4])\n"
                                "      r = Relu(n) -> (f32[4])\n"
                                "      k = Const() -> (f32[4] = {0.0, 0.0, 0.0, 0.0})\n"
                                "      cc = ConcatC(r, k) -> (f32[8]) <continuous_input = true>\n"
                                "      bo = NetOutput(r <_parent_node_index = 0>)\n"));
    fx_run(&fx);
    assert_int_equal(ag_report_isolation_count(fx.rep), 1);
    assert_iso(&fx, 0, R_WHILE_OUT, "identity_0_bo_MemLayoutConflict_0", "r:0", "bo:0");
    fx_close(&fx);
}

static void test_while_unknown_shape(void **state)
{
    (void)state;
    fixture fx;
    fx_open(&fx, while_graph(2, "      a = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                                "      b = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                                "      s = Neg(a) -> (f32[?])\n"
                                "      t = Neg(b) -> (f32[4])\n"
                                "      bo = NetOutput(s <_parent_node_index = 0>, t <_parent_node_index = 1>)\n"));
    fx_run(&fx);
    assert_int_equal(ag_report_isolation_count(fx.rep), 1);
    assert_iso(&fx, 0, R_WHILE_OUT, "identity_1_bo_MemLayoutConflict_0", "t:0", "bo:1");
    fx_close(&fx);
}

static void test_while_existing_copies(void **state)
{
    (void)state;
    /* subgraph_isolate's body copies already separate every loop buffer. */
    fixture fx;
    fx_open(&fx, while_graph(2, "      a = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                                "      b = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                                "      s = Add(a, b) -> (f32[4])\n"
                                "      bo = NetOutput(b <_parent_node_index = 0>, s <_parent_node_index = 1>)\n"));
    ag_pass_env env = {fx.g, fx.ops, fx.rep};
    assert_int_equal(ag_pass_subgraph_isolate(&env), AG_OK);
    uint32_t nodes = ag_graph_node_count(fx.g), isos = ag_report_isolation_count(fx.rep);
    assert_true(isos > 0);
    fx_run(&fx);
    assert_int_equal(ag_graph_node_count(fx.g), nodes);
    assert_int_equal(ag_report_isolation_count(fx.rep), isos);
    fx_close(&fx);

    /* A hand-made copy feeding the NetOutput alone counts too. */
    fx_open(&fx, while_graph(1, "      d = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                                "      n = Identity(d) -> (f32[4])\n"
                                "      bo = NetOutput(n <_parent_node_index = 0>)\n"));
    fx_run(&fx);
    assert_int_equal(ag_report_isolation_count(fx.rep), 0);
    fx_close(&fx);
}

static const char *nested_text =
    "graph g {\n"
    "  x0 = Data() -> (f32[4]) <index = 0>\n"
    "  x1 = Data() -> (f32[4]) <index = 1>\n"
    "  w = While(x0, x1) -> (f32[4], f32[4]) {\n"
    "    graph cond {\n"
    "      c0 = Data() -> (f32[4]) <_parent_node_index = 0>\n"
    "      r = ReduceSum(c0) -> (f32[])\n"
    "      z = Const() -> (f32[] = {0.0})\n"
    "      pr = Greater(r, z) -> (bool[])\n"
    "      cout = NetOutput(pr)\n"
    "    }\n"
    "    graph body {\n"
    "      a = Data() -> (f32[4]) <_parent_node_index = 0>\n"
    "      b = Data() -> (f32[4]) <_parent_node_index = 1>\n"
    "      ra = ReduceSum(a) -> (f32[])\n"
    "      zb = Const() -> (f32[] = {0.0})\n"
    "      p = Greater(ra, zb) -> (bool[])\n"
    "      f = If(p, a) -> (f32[4]) {\n"
    "        graph tb {\n"
    "          t = Data() -> (f32[4]) <_parent_node_index = 1>\n"
    "          tout = NetOutput(t <_parent_node_index = 0>)\n"
    "        }\n"
    "        graph eb {\n"
    "          e = Data() -> (f32[4]) <_parent_node_index = 1>\n"
    "          n = Neg(e) -> (f32[4])\n"
    "          eout = NetOutput(n <_parent_node_index = 0>)\n"
    "        }\n"
    "      }\n"
    "      nb = Neg(b) -> (f32[4])\n"
    "      bo = NetOutput(f <_parent_node_index = 0>, nb <_parent_node_index = 1>)\n"
    "    }\n"
    "  }\n"
    "  o = NetOutput(w, w:1)\n"
    "}\n";

static void test_nested(void **state)
{
    (void)state;
    fixture fx;
    fx_open(&fx, nested_text);
    fx_run(&fx);
    /* The body first (a parent before its subgraphs): its output copy; then
     * the then-branch inside it, which returns its Data. */
    assert_int_equal(ag_report_isolation_count(fx.rep), 3);
    assert_iso(&fx, 0, R_WHILE_OUT, "identity_0_bo_MemLayoutConflict_0", "f:0", "bo:0");
    assert_iso(&fx, 1, R_WHILE_OUT, "identity_0_bo_MemLayoutConflict_0", "nb:0", "bo:1");
    assert_iso(&fx, 2, R_IF_SRC, "identity_0_tout_MemLayoutConflict_1", "t:0", "tout:0");
    assert_string_equal(src_name(&fx, "eb", "eout", 0), "n");
    fx_close(&fx);
}

static void test_errors(void **state)
{
    (void)state;
    fixture fx;
    fx_open(&fx, "graph g {\n"
                 "  x = Data() -> (f32[4]) <index = 0>\n"
                 "  w = While(x) -> (f32[4]) {\n"
                 "    graph cond {\n"
                 "      c0 = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                 "      cout = NetOutput(c0)\n"
                 "    }\n"
                 "  }\n"
                 "  o = NetOutput(w)\n"
                 "}\n");
    ag_pass_env env = {fx.g, fx.ops, fx.rep};
    assert_int_equal(ag_layout_ctrl_node_prepass(&env, AG_ROOT), AG_EINVAL);
    assert_errmsg(fx.ctx, "'w' (While)");
    fx_close(&fx);
}

/* ---- allocation failures ---- */

typedef struct oom_case {
    const char *text;
} oom_case;

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    const oom_case *oc = ud;
    ag_graph *g = NULL;
    ag_ops *ops = NULL;
    ag_report *rep = NULL;
    ag_status st = ag_text_read(ctx, oc->text, strlen(oc->text), "oom.agt", &g);
    if (st == AG_OK)
        st = ag_ops_create(ctx, &ops);
    if (st == AG_OK)
        st = ag_report_create(ctx, &rep);
    if (st == AG_OK) {
        ag_pass_env env = {g, ops, rep};
        st = ag_layout_ctrl_node_prepass(&env, AG_ROOT);
        /* Whatever happened, the graph stays well formed (verify itself
         * may run out of memory under injection). */
        ag_status vs = ag_graph_verify(g);
        if (vs != AG_OK && vs != AG_ENOMEM)
            fail_msg("verify after %d: %s", (int)st, ag_ctx_errmsg(ctx));
        if (st == AG_OK)
            st = ag_layout_ctrl_node_prepass(&env, AG_ROOT);
    }
    ag_report_destroy(rep);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    return st;
}

static void test_oom(void **state)
{
    (void)state;
    oom_case a = {nested_text};
    assert_true(AG_TEST_OOM_SWEEP(oom_body, &a) > 0);
    oom_case b = {while_graph(2, "      a = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                                 "      b = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                                 "      bo = NetOutput(b <_parent_node_index = 0>, a <_parent_node_index = 1>)\n")};
    assert_true(AG_TEST_OOM_SWEEP(oom_body, &b) > 0);
    oom_case c = {if_graph("      k = Const() -> (f32[4] = {1.0, 2.0, 3.0, 4.0})\n",
                           "k <_parent_node_index = 0>, k <_parent_node_index = 1>")};
    assert_true(AG_TEST_OOM_SWEEP(oom_body, &c) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_if_data),
        cmocka_unit_test(test_if_const),
        cmocka_unit_test(test_if_variable),
        cmocka_unit_test(test_if_ref_var),
        cmocka_unit_test(test_if_twice),
        cmocka_unit_test(test_if_view_of_data),
        cmocka_unit_test(test_if_no_conflict),
        cmocka_unit_test(test_if_multi_port),
        cmocka_unit_test(test_case_three),
        cmocka_unit_test(test_while_changed),
        cmocka_unit_test(test_while_bypass),
        cmocka_unit_test(test_while_single_op),
        cmocka_unit_test(test_while_long_body),
        cmocka_unit_test(test_while_continuous),
        cmocka_unit_test(test_while_unknown_shape),
        cmocka_unit_test(test_while_existing_copies),
        cmocka_unit_test(test_nested),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
