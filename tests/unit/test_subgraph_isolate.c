/* Unit tests of subgraph_isolate (SubgraphPass): the While input, body and
 * cond copies, constants into a While, the NetOutput conditions, If/Case
 * branch outputs produced twice, subgraph Data feeding continuous-input
 * consumers; each case checks the rewritten graph and the report fields, a
 * second run that changes nothing, errors that leave the graph unchanged,
 * and allocation failures. */
#include <stdio.h>

#include "support/agtest.h"

#define SG "subgraph_isolate"

typedef struct run_t {
    ag_ctx *ctx;
    ag_graph *g;
    ag_ops *ops;
    ag_report *rep;
    ag_status st;
} run_t;

static void run_text(run_t *r, const char *text)
{
    memset(r, 0, sizeof *r);
    r->ctx = agtest_ctx();
    assert_int_equal(ag_text_read(r->ctx, text, strlen(text), "t.agt", &r->g), AG_OK);
    assert_int_equal(ag_ops_create(r->ctx, &r->ops), AG_OK);
    assert_int_equal(ag_report_create(r->ctx, &r->rep), AG_OK);
    ag_pass_env env = {r->g, r->ops, r->rep};
    r->st = ag_pass_run(&env, SG);
}

static char *dump(const ag_graph *g, ag_ctx *ctx, ag_membuf *mb)
{
    ag_membuf_init(mb, ctx);
    assert_int_equal(ag_text_write(g, NULL, ag_sink_membuf(mb)), AG_OK);
    return mb->data;
}

/* Runs the pass again on its own output: nothing more may happen. */
static void assert_idempotent(run_t *r)
{
    ag_membuf before, after;
    dump(r->g, r->ctx, &before);
    ag_report *rep = NULL;
    assert_int_equal(ag_report_create(r->ctx, &rep), AG_OK);
    ag_pass_env env = {r->g, r->ops, rep};
    assert_int_equal(ag_pass_run(&env, SG), AG_OK);
    assert_int_equal(ag_report_isolation_count(rep), 0);
    dump(r->g, r->ctx, &after);
    assert_string_equal(before.data, after.data);
    ag_membuf_free(&before);
    ag_membuf_free(&after);
    ag_report_destroy(rep);
}

static void run_done(run_t *r)
{
    ag_report_destroy(r->rep);
    ag_ops_destroy(r->ops);
    ag_graph_destroy(r->g);
    ag_ctx_destroy(r->ctx);
}

static ag_sub_id sub(const run_t *r, const char *name)
{
    ag_sub_id s = ag_graph_find_sub(r->g, name);
    assert_int_not_equal(s, AG_NONE);
    return s;
}

static ag_node_id node_in(const run_t *r, const char *subname, const char *name)
{
    return agtest_find(r->g, sub(r, subname), name);
}

static bool has_ctrl(const ag_graph *g, ag_node_id a, ag_node_id b)
{
    for (uint32_t k = 0; k < ag_node_num_ctrl_out(g, a); k++)
        if (ag_node_ctrl_out(g, a, k) == b)
            return true;
    return false;
}

static void assert_iso(const run_t *r, uint32_t k, const char *rule, const char *kind, const char *graph,
                       const char *nodename, const char *prod, const char *cons)
{
    const ag_isolation *iso = ag_report_isolation_at(r->rep, k);
    assert_non_null(iso);
    assert_string_equal(iso->pass, SG);
    assert_string_equal(iso->rule, rule);
    assert_string_equal(iso->kind, kind);
    assert_string_equal(iso->graph, graph);
    assert_string_equal(iso->node, nodename);
    assert_string_equal(iso->producer, prod);
    assert_string_equal(iso->consumer, cons);
}

/* The attributes every copy made by the pass carries. */
static void assert_copy_attrs(const run_t *r, ag_node_id n)
{
    assert_string_equal(ag_node_type(r->g, n), "Identity");
    bool v = false;
    assert_true(ag_attrs_get_bool(ag_node_attrs_c(r->g, n), "_cannot_be_deleted", &v));
    assert_true(v);
    assert_true(ag_attrs_get_bool(ag_node_attrs_c(r->g, n), "no_need_constant_folding", &v));
    assert_false(v);
}

/* Asserts that copy `id` of subgraph s sits between p:po and c:ci (port 0). */
static void assert_copy_between(const run_t *r, const char *s, const char *id, const char *p, uint32_t po,
                                const char *c, uint32_t ci)
{
    ag_node_id n = node_in(r, s, id);
    assert_copy_attrs(r, n);
    ag_port src = ag_node_input_src(r->g, n, 0);
    assert_int_equal(src.node, node_in(r, s, p));
    assert_int_equal(src.index, po);
    ag_port in = ag_node_input_src(r->g, node_in(r, s, c), ci);
    assert_int_equal(in.node, n);
    assert_int_equal(in.index, 0);
}

#define R_SHARED "SubgraphPass: while input shared by several consumers"
#define R_BODY "SubgraphPass: while body input/output copy"
#define R_ORDER "SubgraphPass: while body input copy before output copy"
#define R_COND "SubgraphPass: dynamic while cond input copy"
#define R_DCONT "SubgraphPass: subgraph data to continuous-input consumer"
#define R_CONST_WHILE "SubgraphPass: const into while"
#define R_NO_CONST "SubgraphPass: netoutput from const"
#define R_NO_ATOMIC "SubgraphPass: netoutput from atomic output"
#define R_NO_CONT "SubgraphPass: netoutput from continuous output"
#define R_NO_DATA "SubgraphPass: netoutput from data (parent not while)"
#define R_NO_WHILE "SubgraphPass: netoutput from while (dynamic netoutput in known-shape subgraph)"
#define R_TWICE "SubgraphPass: if/case branch output produced twice"

/* A cond subgraph "c<name>" reading parent input 0 (i32). */
#define COND(name)                                                \
    "    graph " name " {\n"                                      \
    "      " name "_i = Data() -> (i32[]) <_parent_node_index = 0>\n" \
    "      " name "_z = Const() -> (i32[] = {0})\n"                \
    "      " name "_p = Greater(" name "_i, " name "_z) -> (bool[])\n" \
    "      " name "_o = NetOutput(" name "_p)\n"                   \
    "    }\n"

/* ---- While ---- */

static void test_while_input_and_body(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, "graph g {\n"
                 "  i = Data() -> (i32[]) <index = 0>\n"
                 "  x = Data() -> (f32[4]) <index = 1, _batch_label = \"b7\">\n"
                 "  v = Variable() -> (f32[4])\n"
                 "  w = While(i, x, v, x) -> (i32[], f32[4], f32[4], f32[4]) {\n" COND("cond")
                 "    graph body {\n"
                 "      bi = Data() -> (i32[]) <_parent_node_index = 0>\n"
                 "      a = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      b = Data() -> (f32[4]) <_parent_node_index = 2>\n"
                 "      d = Data() -> (f32[4]) <_parent_node_index = 3>\n"
                 "      s = Add(a, d) -> (f32[4])\n"
                 "      out = NetOutput(bi <_parent_node_index = 0>, s <_parent_node_index = 1>,\n"
                 "                      b <_parent_node_index = 2>, a <_parent_node_index = 3>)\n"
                 "    }\n"
                 "  }\n"
                 "  y = Neg(x) -> (f32[4])\n"
                 "  z = Neg(v) -> (f32[4])\n"
                 "  o = NetOutput(w:1, y, z)\n"
                 "}\n");
    assert_int_equal(r.st, AG_OK);
    /* x feeds w twice and y: both While inputs get a copy; v is a variable. */
    assert_copy_between(&r, "g", "w_input_1_Memcpy", "x", 0, "w", 1);
    assert_copy_between(&r, "g", "w_input_3_Memcpy", "x", 0, "w", 3);
    assert_int_equal(ag_node_input_src(r.g, node_in(&r, "g", "w"), 2).node, node_in(&r, "g", "v"));
    const char *label = NULL;
    assert_true(ag_attrs_get_string(ag_node_attrs_c(r.g, node_in(&r, "g", "w_input_1_Memcpy")), "_batch_label",
                                    &label));
    assert_string_equal(label, "b7");

    /* Body: bi and b are bypasses; a and d go through one two-port copy. */
    ag_node_id in = node_in(&r, "body", "body_input_Memcpy");
    ag_node_id outc = node_in(&r, "body", "body_output_Memcpy");
    assert_copy_attrs(&r, in);
    assert_copy_attrs(&r, outc);
    assert_int_equal(ag_node_num_inputs(r.g, in), 2);
    assert_int_equal(ag_node_input_src(r.g, in, 0).node, node_in(&r, "body", "a"));
    assert_int_equal(ag_node_input_src(r.g, in, 1).node, node_in(&r, "body", "d"));
    assert_int_equal(ag_node_output_nconsumers(r.g, node_in(&r, "body", "a"), 0), 1);
    ag_node_id s = node_in(&r, "body", "s"), out = node_in(&r, "body", "out");
    assert_int_equal(ag_node_input_src(r.g, s, 0).node, in);
    assert_int_equal(ag_node_input_src(r.g, s, 0).index, 0);
    assert_int_equal(ag_node_input_src(r.g, s, 1).index, 1);
    /* Output copy: NetOutput inputs 1 and 3 (0 and 2 are bypasses). */
    assert_int_equal(ag_node_num_inputs(r.g, outc), 2);
    assert_int_equal(ag_node_input_src(r.g, out, 0).node, node_in(&r, "body", "bi"));
    assert_int_equal(ag_node_input_src(r.g, out, 2).node, node_in(&r, "body", "b"));
    assert_int_equal(ag_node_input_src(r.g, out, 1).node, outc);
    assert_int_equal(ag_node_input_src(r.g, out, 3).node, outc);
    assert_int_equal(ag_node_input_src(r.g, out, 3).index, 1);
    assert_int_equal(ag_node_input_src(r.g, outc, 1).node, in);
    const ag_tensor_desc *dd = ag_node_output_desc_c(r.g, outc, 1);
    assert_int_equal(dd->dtype, AG_DT_F32);
    assert_int_equal(dd->rank, 1);
    /* A path orders the copies: no control edge. */
    assert_false(has_ctrl(r.g, in, outc));

    assert_int_equal(ag_report_isolation_count(r.rep), 6);
    assert_iso(&r, 0, R_SHARED, "Identity", "g", "w_input_1_Memcpy", "x:0", "w:1");
    assert_iso(&r, 1, R_SHARED, "Identity", "g", "w_input_3_Memcpy", "x:0", "w:3");
    assert_iso(&r, 2, R_BODY, "Identity", "body", "body_input_Memcpy", "a:0", "s:0,out:3");
    assert_iso(&r, 3, R_BODY, "Identity", "body", "body_input_Memcpy", "d:0", "s:1");
    assert_iso(&r, 4, R_BODY, "Identity", "body", "body_output_Memcpy", "s:0", "out:1");
    assert_iso(&r, 5, R_BODY, "Identity", "body", "body_output_Memcpy", "body_input_Memcpy:0", "out:3");
    assert_idempotent(&r);
    run_done(&r);
}

/* A body whose result does not depend on its inputs: only a control edge
 * makes the input copy read the loop buffers before the output copy
 * overwrites them. */
static void test_body_order_edge(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, "graph g {\n"
                 "  i = Data() -> (i32[]) <index = 0>\n"
                 "  w = While(i) -> (i32[]) {\n" COND("cond")
                 "    graph body {\n"
                 "      d = Data() -> (i32[]) <_parent_node_index = 0>\n"
                 "      k = Ones() -> (i32[])\n"
                 "      out = NetOutput(k <_parent_node_index = 0>)\n"
                 "    }\n"
                 "  }\n"
                 "  o = NetOutput(w)\n"
                 "}\n");
    assert_int_equal(r.st, AG_OK);
    ag_node_id in = node_in(&r, "body", "body_input_Memcpy"), outc = node_in(&r, "body", "body_output_Memcpy");
    assert_int_equal(ag_node_output_nconsumers(r.g, in, 0), 0);
    assert_true(has_ctrl(r.g, in, outc));
    assert_int_equal(ag_report_isolation_count(r.rep), 3);
    assert_iso(&r, 0, R_BODY, "Identity", "body", "body_input_Memcpy", "d:0", "");
    assert_iso(&r, 1, R_BODY, "Identity", "body", "body_output_Memcpy", "k:0", "out:0");
    assert_iso(&r, 2, R_ORDER, "control", "body", "", "body_input_Memcpy", "body_output_Memcpy");
    assert_idempotent(&r);
    run_done(&r);
}

/* Copies already in the body count: a Data whose consumers are all one copy
 * is bridged, a NetOutput input fed by a copy that bridges no Data is
 * covered.  Only what is missing is added, ordered after the existing input
 * copy. */
static void test_body_existing_copies(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, "graph g {\n"
                 "  i = Data() -> (i32[]) <index = 0>\n"
                 "  x = Data() -> (f32[4]) <index = 1>\n"
                 "  w = While(i, x, x) -> (i32[], f32[4], f32[4]) {\n" COND("cond")
                 "    graph body {\n"
                 "      d = Data() -> (i32[]) <_parent_node_index = 0>\n"
                 "      e = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      f = Data() -> (f32[4]) <_parent_node_index = 2>\n"
                 "      cp = Identity(d) -> (i32[]) <_cannot_be_deleted = true>\n"
                 "      cq = Identity(e, f) -> (f32[4], f32[4]) <_cannot_be_deleted = true>\n"
                 "      oc = Identity(cq) -> (f32[4]) <_cannot_be_deleted = true>\n"
                 "      k = Ones() -> (i32[])\n"
                 "      out = NetOutput(k <_parent_node_index = 0>, oc <_parent_node_index = 1>,\n"
                 "                      cq:1 <_parent_node_index = 2>)\n"
                 "    }\n"
                 "  }\n"
                 "  o = NetOutput(w:1)\n"
                 "}\n");
    assert_int_equal(r.st, AG_OK);
    ag_sub_id body = sub(&r, "body");
    /* No input copy: d, e and f are bridged by cp and cq. */
    assert_int_equal(ag_sub_find_node(r.g, body, "body_input_Memcpy"), AG_NONE);
    /* Inputs 0 (k) and 2 (cq bridges Data, so it is no output copy) get one. */
    ag_node_id outc = node_in(&r, "body", "body_output_Memcpy");
    assert_int_equal(ag_node_num_inputs(r.g, outc), 2);
    ag_node_id out = node_in(&r, "body", "out");
    assert_int_equal(ag_node_input_src(r.g, out, 0).node, outc);
    assert_int_equal(ag_node_input_src(r.g, out, 1).node, node_in(&r, "body", "oc"));
    assert_int_equal(ag_node_input_src(r.g, out, 2).node, outc);
    /* cp reaches no output copy: control edges to both; cq reaches oc and
     * the new copy by data. */
    ag_node_id cp = node_in(&r, "body", "cp"), oc = node_in(&r, "body", "oc");
    assert_true(has_ctrl(r.g, cp, outc));
    assert_true(has_ctrl(r.g, cp, oc));
    assert_false(has_ctrl(r.g, node_in(&r, "body", "cq"), outc));
    /* The shared x still gets its While input copies. */
    assert_int_equal(ag_report_isolation_count(r.rep), 6);
    assert_iso(&r, 2, R_BODY, "Identity", "body", "body_output_Memcpy", "k:0", "out:0");
    assert_iso(&r, 3, R_BODY, "Identity", "body", "body_output_Memcpy", "cq:1", "out:2");
    assert_iso(&r, 4, R_ORDER, "control", "body", "", "cp", "oc");
    assert_iso(&r, 5, R_ORDER, "control", "body", "", "cp", "body_output_Memcpy");
    assert_idempotent(&r);
    run_done(&r);
}

static void test_dynamic_while_cond(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, "graph g {\n"
                 "  i = Data() -> (i32[]) <index = 0>\n"
                 "  w = While(i) -> (i32[]) <_is_unknown_shape = true> {\n" COND("cond")
                 "    graph body {\n"
                 "      d = Data() -> (i32[]) <_parent_node_index = 0>\n"
                 "      out = NetOutput(d <_parent_node_index = 0>)\n"
                 "    }\n"
                 "  }\n"
                 "  w2 = While(w) -> (i32[]) <_is_unknown_shape = true> {\n" COND("cond2")
                 "    graph body2 {\n"
                 "      d2 = Data() -> (i32[]) <_parent_node_index = 0>\n"
                 "      n2 = Neg(d2) -> (i32[]) <_is_unknown_shape = true>\n"
                 "      out2 = NetOutput(n2 <_parent_node_index = 0>)\n"
                 "    }\n"
                 "  }\n"
                 "  o = NetOutput(w2)\n"
                 "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_copy_between(&r, "cond", "cond_input_Memcpy", "cond_i", 0, "cond_p", 0);
    /* The unknown-shape body2 leaves w2 alone, cond included. */
    assert_int_equal(ag_sub_find_node(r.g, sub(&r, "cond2"), "cond2_input_Memcpy"), AG_NONE);
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    assert_iso(&r, 0, R_COND, "Identity", "cond", "cond_input_Memcpy", "cond_i:0", "cond_p:0");
    assert_idempotent(&r);
    run_done(&r);
}

static void test_const_into_while(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, "graph g {\n"
                 "  k = Const() -> (i32[] = {3})\n"
                 "  w = While(k) -> (i32[]) {\n" COND("cond")
                 "    graph body {\n"
                 "      d = Data() -> (i32[]) <_parent_node_index = 0>\n"
                 "      out = NetOutput(d <_parent_node_index = 0>)\n"
                 "    }\n"
                 "  }\n"
                 "  o = NetOutput(w)\n"
                 "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_copy_between(&r, "g", "w_input_0_Memcpy", "k", 0, "w", 0);
    /* Once, although cond and body both read the constant. */
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    assert_iso(&r, 0, R_CONST_WHILE, "Identity", "g", "w_input_0_Memcpy", "k:0", "w:0");
    assert_idempotent(&r);
    run_done(&r);
}

/* ---- NetOutput conditions ---- */

static void test_netoutput_conditions(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, "graph g {\n"
                 "  c = Data() -> (bool[]) <index = 0>\n"
                 "  x = Data() -> (f32[4]) <index = 1>\n"
                 "  k = Const() -> (f32[4] = {1.0, 2.0, 3.0, 4.0})\n"
                 "  r = If(c, x, k) -> (f32[4], f32[4], f32[2], f32[4], f32[4], f32[4], f32[4]) {\n"
                 "    graph then {\n"
                 "      t = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      tk = Data() -> (f32[4]) <_parent_node_index = 2>\n"
                 "      kc = Const() -> (f32[4] = {0.0, 0.0, 0.0, 0.0})\n"
                 "      n = Neg(t) -> (f32[4])\n"
                 "      ar = HcomAllReduce(n) -> (f32[4])\n"
                 "      sp = Split(n) -> (f32[2], f32[2]) <continuous_output = true>\n"
                 "      m = Abs(t) -> (f32[4])\n"
                 "      tout = NetOutput(kc <_parent_node_index = 0>, ar <_parent_node_index = 1>,\n"
                 "                       sp:1 <_parent_node_index = 2>, t <_parent_node_index = 3>,\n"
                 "                       tk <_parent_node_index = 4>, m <_parent_node_index = 5>,\n"
                 "                       n <_parent_node_index = 6>)\n"
                 "    }\n"
                 "    graph else {\n"
                 "      e = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      e0 = Neg(e) -> (f32[4])\n"
                 "      e1 = Abs(e) -> (f32[4])\n"
                 "      e2 = Split(e) -> (f32[2], f32[2])\n"
                 "      e3 = Exp(e) -> (f32[4])\n"
                 "      e4 = Log(e) -> (f32[4])\n"
                 "      e5 = Sin(e) -> (f32[4])\n"
                 "      e6 = Cos(e) -> (f32[4])\n"
                 "      eout = NetOutput(e0 <_parent_node_index = 0>, e1 <_parent_node_index = 1>,\n"
                 "                       e2 <_parent_node_index = 2>, e3 <_parent_node_index = 3>,\n"
                 "                       e4 <_parent_node_index = 4>, e5 <_parent_node_index = 5>,\n"
                 "                       e6 <_parent_node_index = 6>)\n"
                 "    }\n"
                 "  }\n"
                 "  o = NetOutput(r, r:1, r:2, r:3, r:4, r:5, r:6)\n"
                 "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_int_equal(ag_report_isolation_count(r.rep), 5);
    assert_iso(&r, 0, R_NO_CONST, "Identity", "then", "tout_input_0_Memcpy", "kc:0", "tout:0");
    assert_iso(&r, 1, R_NO_ATOMIC, "Identity", "then", "tout_input_1_Memcpy", "ar:0", "tout:1");
    assert_iso(&r, 2, R_NO_CONT, "Identity", "then", "tout_input_2_Memcpy", "sp:1", "tout:2");
    assert_iso(&r, 3, R_NO_DATA, "Identity", "then", "tout_input_3_Memcpy", "t:0", "tout:3");
    /* tk's parent input is the Const k: the constant condition comes first. */
    assert_iso(&r, 4, R_NO_CONST, "Identity", "then", "tout_input_4_Memcpy", "tk:0", "tout:4");
    assert_copy_between(&r, "then", "tout_input_2_Memcpy", "sp", 1, "tout", 2);
    assert_idempotent(&r);
    run_done(&r);
}

static void test_netoutput_while_dynamic(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, "graph g {\n"
                 "  c = Data() -> (bool[]) <index = 0>\n"
                 "  i = Data() -> (i32[]) <index = 1>\n"
                 "  r = If(c, i) -> (i32[]) {\n"
                 "    graph then {\n"
                 "      t = Data() -> (i32[]) <_parent_node_index = 1>\n"
                 "      tn = Neg(t) -> (i32[])\n"
                 "      w = While(tn) -> (i32[]) {\n" COND("cond")
                 "        graph body {\n"
                 "          d = Data() -> (i32[]) <_parent_node_index = 0>\n"
                 "          bo = NetOutput(d <_parent_node_index = 0>)\n"
                 "        }\n"
                 "      }\n"
                 "      tout = NetOutput(w <_parent_node_index = 0>) <_is_unknown_shape = true>\n"
                 "    }\n"
                 "    graph else {\n"
                 "      e = Data() -> (i32[]) <_parent_node_index = 1>\n"
                 "      en = Neg(e) -> (i32[])\n"
                 "      eout = NetOutput(en <_parent_node_index = 0>)\n"
                 "    }\n"
                 "  }\n"
                 "  o = NetOutput(r)\n"
                 "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    assert_iso(&r, 0, R_NO_WHILE, "Identity", "then", "tout_input_0_Memcpy", "w:0", "tout:0");
    assert_idempotent(&r);
    run_done(&r);
}

/* ---- If/Case branches, continuous consumers ---- */

static void test_branch_twice_and_unknown(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, "graph g {\n"
                 "  c = Data() -> (bool[]) <index = 0>\n"
                 "  x = Data() -> (f32[4]) <index = 1>\n"
                 "  r = If(c, x) -> (f32[4], f32[4]) {\n"
                 "    graph then {\n"
                 "      t = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      n = Neg(t) -> (f32[4]) <_batch_label = \"L\">\n"
                 "      tout = NetOutput(n <_parent_node_index = 0>, n <_parent_node_index = 1>)\n"
                 "    }\n"
                 "    graph else {\n"
                 "      e = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      e0 = Neg(e) -> (f32[4])\n"
                 "      e1 = Abs(e) -> (f32[4])\n"
                 "      eout = NetOutput(e0 <_parent_node_index = 0>, e1 <_parent_node_index = 1>)\n"
                 "    }\n"
                 "  }\n"
                 "  o = NetOutput(r, r:1)\n"
                 "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    assert_iso(&r, 0, R_TWICE, "Identity", "then", "n_output_0_Memcpy", "n:0", "tout:1");
    assert_copy_between(&r, "then", "n_output_0_Memcpy", "n", 0, "tout", 1);
    const char *label = NULL;
    assert_true(ag_attrs_get_string(ag_node_attrs_c(r.g, node_in(&r, "then", "n_output_0_Memcpy")), "_batch_label",
                                    &label));
    assert_string_equal(label, "L");
    assert_idempotent(&r);
    run_done(&r);

    /* The same If in a graph with unknown shapes: nothing. */
    run_text(&r, "graph g {\n"
                 "  c = Data() -> (bool[]) <index = 0>\n"
                 "  x = Data() -> (f32[4]) <index = 1>\n"
                 "  u = Neg(x) -> (f32[4]) <_is_unknown_shape = true>\n"
                 "  r = If(c, u) -> (f32[4], f32[4]) {\n"
                 "    graph then {\n"
                 "      t = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      n = Neg(t) -> (f32[4])\n"
                 "      tout = NetOutput(n <_parent_node_index = 0>, n <_parent_node_index = 1>)\n"
                 "    }\n"
                 "    graph else {\n"
                 "      e = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      e0 = Neg(e) -> (f32[4])\n"
                 "      eout = NetOutput(e0 <_parent_node_index = 0>, e0 <_parent_node_index = 1>)\n"
                 "    }\n"
                 "  }\n"
                 "  o = NetOutput(r, r:1)\n"
                 "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_int_equal(ag_report_isolation_count(r.rep), 0);
    run_done(&r);
}

static void test_data_continuous(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, "graph g {\n"
                 "  c = Data() -> (bool[]) <index = 0>\n"
                 "  x = Data() -> (f32[4]) <index = 1>\n"
                 "  r = If(c, x) -> (f32[4]) {\n"
                 "    graph then {\n"
                 "      t = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      a = Assign(t, t) -> (f32[4])\n"
                 "      p = Pack(a) -> (f32[4]) <_no_padding_continuous_input = true>\n"
                 "      n = Neg(t) -> (f32[4])\n"
                 "      tout = NetOutput(p <_parent_node_index = 0>)\n"
                 "    }\n"
                 "    graph else {\n"
                 "      e = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                 "      en = Neg(e) -> (f32[4])\n"
                 "      ep = Pack(en) -> (f32[4]) <continuous_input = true>\n"
                 "      eout = NetOutput(ep <_parent_node_index = 0>)\n"
                 "    }\n"
                 "  }\n"
                 "  o = NetOutput(r)\n"
                 "}\n");
    assert_int_equal(r.st, AG_OK);
    /* t reaches p through Assign's reference of its input 0. */
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    assert_iso(&r, 0, R_DCONT, "Identity", "then", "t_output_0_Memcpy", "t:0", "a:0,a:1,n:0");
    ag_node_id cp = node_in(&r, "then", "t_output_0_Memcpy");
    assert_copy_attrs(&r, cp);
    assert_int_equal(ag_node_output_nconsumers(r.g, cp, 0), 3);
    assert_int_equal(ag_node_output_nconsumers(r.g, node_in(&r, "then", "t"), 0), 1);
    assert_idempotent(&r);
    run_done(&r);
}

/* Subgraphs of a node the registry does not know as control flow are not
 * boundaries the pass understands: not checked, not changed. */
static void test_foreign_subgraph(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, "graph g {\n"
                 "  x = Data() -> (f32[4]) <index = 0>\n"
                 "  f = MyScope(x) -> (f32[4]) {\n"
                 "    graph inner {\n"
                 "      d = Data() -> (f32[4])\n"
                 "      p = Pack(d) -> (f32[4]) <continuous_input = true>\n"
                 "      io = NetOutput(d, p)\n"
                 "    }\n"
                 "  }\n"
                 "  o = NetOutput(f)\n"
                 "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_int_equal(ag_report_isolation_count(r.rep), 0);
    run_done(&r);
}

/* ---- errors: AG_EINVAL naming node and anchor, graph unchanged ---- */

static void check_error(const char *text, const char *needle)
{
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = NULL;
    ag_ops *ops = NULL;
    ag_report *rep = NULL;
    assert_int_equal(ag_text_read(ctx, text, strlen(text), "t.agt", &g), AG_OK);
    assert_int_equal(ag_ops_create(ctx, &ops), AG_OK);
    assert_int_equal(ag_report_create(ctx, &rep), AG_OK);
    ag_membuf before, after;
    dump(g, ctx, &before);
    ag_pass_env env = {g, ops, rep};
    assert_int_equal(ag_pass_run(&env, SG), AG_EINVAL);
    assert_errmsg(ctx, needle);
    dump(g, ctx, &after);
    assert_string_equal(before.data, after.data);
    assert_int_equal(ag_report_isolation_count(rep), 0);
    ag_membuf_free(&before);
    ag_membuf_free(&after);
    ag_report_destroy(rep);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_errors(void **state)
{
    (void)state;
    /* The root's While would get copies before the error is found, were the
     * checks not done first. */
    check_error("graph g {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  w = While(x, x) -> (f32[4], f32[4]) {\n"
                "    graph cond {\n"
                "      cd = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                "      s = ReduceSum(cd) -> (f32[])\n"
                "      z = Const() -> (f32[] = {0.0})\n"
                "      p = Greater(s, z) -> (bool[])\n"
                "      co = NetOutput(p)\n"
                "    }\n"
                "    graph body {\n"
                "      a = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                "      b = Data() -> (f32[4])\n"
                "      bo = NetOutput(b <_parent_node_index = 0>, a <_parent_node_index = 1>)\n"
                "    }\n"
                "  }\n"
                "  o = NetOutput(w)\n"
                "}\n",
                "node 'b' (Data) in subgraph 'body': no int attribute _parent_node_index");
    check_error("graph g {\n"
                "  c = Data() -> (bool[]) <index = 0>\n"
                "  x = Data() -> (f32[4]) <index = 1>\n"
                "  r = If(c, x) -> (f32[4]) {\n"
                "    graph then {\n"
                "      t = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                "      tout = NetOutput(t <_parent_node_index = 0>)\n"
                "    }\n"
                "    graph else {\n"
                "      e = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                "      n = Neg(e) -> (f32[4])\n"
                "      eout = NetOutput(n)\n"
                "    }\n"
                "  }\n"
                "  o = NetOutput(r)\n"
                "}\n",
                "node 'eout' (NetOutput) input 0 in subgraph 'else': no int attribute _parent_node_index");
    check_error("graph g {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  w = While(x) -> (f32[4]) {\n"
                "    graph cond {\n"
                "      cd = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                "      s = ReduceSum(cd) -> (f32[])\n"
                "      z = Const() -> (f32[] = {0.0})\n"
                "      p = Greater(s, z) -> (bool[])\n"
                "      co = NetOutput(p)\n"
                "    }\n"
                "    graph body {\n"
                "      a = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                "      n = Neg(a) -> (f32[4])\n"
                "    }\n"
                "  }\n"
                "  o = NetOutput(w)\n"
                "}\n",
                "its body 'body' must have exactly one NetOutput, it has 0");
    check_error("graph g {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  w = While(x) -> (f32[4])\n"
                "  o = NetOutput(w)\n"
                "}\n",
                "node 'w' (While) in graph 'g': a While needs a cond and a body subgraph, it has 0");
}

/* ---- allocation failures ---- */

static const char oom_graph[] =
    "graph g {\n"
    "  c = Data() -> (bool[]) <index = 0>\n"
    "  x = Data() -> (f32[4]) <index = 1>\n"
    "  k = Const() -> (i32[] = {4})\n"
    "  r = If(c, x, k) -> (f32[4], f32[4], f32[4]) {\n"
    "    graph then {\n"
    "      t = Data() -> (f32[4]) <_parent_node_index = 1>\n"
    "      tk = Data() -> (i32[]) <_parent_node_index = 2>\n"
    "      p = Pack(t) -> (f32[4]) <continuous_input = true>\n"
    "      tw = While(tk, p, p) -> (i32[], f32[4], f32[4]) <_is_unknown_shape = true> {\n"
    "        graph tcond {\n"
    "          ck = Data() -> (i32[]) <_parent_node_index = 0>\n"
    "          z = Const() -> (i32[] = {0})\n"
    "          pr = Greater(ck, z) -> (bool[])\n"
    "          co = NetOutput(pr)\n"
    "        }\n"
    "        graph tbody {\n"
    "          bk = Data() -> (i32[]) <_parent_node_index = 0>\n"
    "          bv = Data() -> (f32[4]) <_parent_node_index = 1>\n"
    "          bu = Data() -> (f32[4]) <_parent_node_index = 2>\n"
    "          q = Ones() -> (f32[4])\n"
    "          q2 = Ones() -> (f32[4])\n"
    "          bo = NetOutput(bk <_parent_node_index = 0>, q <_parent_node_index = 1>, q2 <_parent_node_index = 2>)\n"
    "        }\n"
    "      }\n"
    "      ar = HcomAllReduce(t) -> (f32[4])\n"
    "      tout = NetOutput(tw:1 <_parent_node_index = 0>, ar <_parent_node_index = 1>, ar <_parent_node_index = 2>)\n"
    "    }\n"
    "    graph else {\n"
    "      e = Data() -> (f32[4]) <_parent_node_index = 1>\n"
    "      eout = NetOutput(e <_parent_node_index = 0>, e <_parent_node_index = 1>, e <_parent_node_index = 2>)\n"
    "    }\n"
    "  }\n"
    "  o = NetOutput(r, r:1, r:2)\n"
    "}\n";

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_graph *g = NULL;
    ag_ops *ops = NULL;
    ag_report *rep = NULL;
    ag_status st = agtest_pass_inputs(ctx, oom_graph, &g, &ops, &rep);
    if (st == AG_OK) {
        ag_pass_env env = {g, ops, rep};
        st = ag_pass_run(&env, SG);
        /* Whatever happened, the graph is still well formed. */
        ag_status vst = ag_graph_verify(g);
        if (vst != AG_OK && vst != AG_ENOMEM)
            st = vst;
    }
    ag_report_destroy(rep);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    return st;
}

static void test_oom(void **state)
{
    (void)state;
    /* The clean run of the sweep makes every kind of change. */
    run_t r;
    run_text(&r, oom_graph);
    assert_int_equal(r.st, AG_OK);
    uint32_t n = ag_report_isolation_count(r.rep);
    const char *rules[] = {R_SHARED, R_BODY, R_ORDER, R_COND, R_DCONT, R_CONST_WHILE, R_NO_ATOMIC, R_NO_DATA, R_TWICE};
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++) {
        bool seen = false;
        for (uint32_t j = 0; j < n; j++)
            seen = seen || strcmp(ag_report_isolation_at(r.rep, j)->rule, rules[k]) == 0;
        if (!seen)
            fail_msg("rule \"%s\" not exercised", rules[k]);
    }
    assert_idempotent(&r);
    run_done(&r);
    /* Every allocation of reading, the pass and the checks fails once. */
    assert_true(AG_TEST_OOM_SWEEP(oom_body, NULL) > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_while_input_and_body),
        cmocka_unit_test(test_body_order_edge),
        cmocka_unit_test(test_body_existing_copies),
        cmocka_unit_test(test_dynamic_while_cond),
        cmocka_unit_test(test_const_into_while),
        cmocka_unit_test(test_netoutput_conditions),
        cmocka_unit_test(test_netoutput_while_dynamic),
        cmocka_unit_test(test_branch_twice_and_unknown),
        cmocka_unit_test(test_data_continuous),
        cmocka_unit_test(test_foreign_subgraph),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
