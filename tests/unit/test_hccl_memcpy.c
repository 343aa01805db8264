/* Unit tests of the HCCL passes: hccl_memcpy (copies before inputs a
 * collective modifies in place, ordering of other readers, the broadcast
 * write-back) and hccl_continuous_memcpy (copies for contiguous and P2P
 * inputs); each case checks the rewritten graph, the report, a second run
 * that changes nothing, and allocation failures. */
#include <stdio.h>

#include "support/agtest.h"

/* ---- helpers ---- */

typedef struct run_t {
    ag_ctx *ctx;
    ag_graph *g;
    ag_ops *ops;
    ag_report *rep;
    ag_status st;
} run_t;

static void run_text(run_t *r, const char *pass, const char *text)
{
    memset(r, 0, sizeof *r);
    r->ctx = agtest_ctx();
    assert_int_equal(ag_text_read(r->ctx, text, strlen(text), "t.agt", &r->g), AG_OK);
    assert_int_equal(ag_ops_create(r->ctx, &r->ops), AG_OK);
    assert_int_equal(ag_report_create(r->ctx, &r->rep), AG_OK);
    ag_pass_env env = {r->g, r->ops, r->rep};
    r->st = ag_pass_run(&env, pass);
}

static char *dump(run_t *r, ag_membuf *mb)
{
    ag_membuf_init(mb, r->ctx);
    assert_int_equal(ag_text_write(r->g, NULL, ag_sink_membuf(mb)), AG_OK);
    return mb->data;
}

/* Runs the pass again on its own output: nothing more may happen. */
static void assert_idempotent(run_t *r, const char *pass)
{
    ag_membuf before, after;
    dump(r, &before);
    ag_report *rep = NULL;
    assert_int_equal(ag_report_create(r->ctx, &rep), AG_OK);
    ag_pass_env env = {r->g, r->ops, rep};
    assert_int_equal(ag_pass_run(&env, pass), AG_OK);
    assert_int_equal(ag_report_isolation_count(rep), 0);
    dump(r, &after);
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

static ag_node_id node(const run_t *r, const char *name)
{
    return agtest_find(r->g, AG_ROOT, name);
}

static bool has_ctrl(const ag_graph *g, ag_node_id a, ag_node_id b)
{
    for (uint32_t k = 0; k < ag_node_num_ctrl_out(g, a); k++)
        if (ag_node_ctrl_out(g, a, k) == b)
            return true;
    return false;
}

static ag_node_id producer(const run_t *r, ag_node_id n, uint32_t i)
{
    return ag_node_input_src(r->g, n, i).node;
}

static void assert_iso(const run_t *r, uint32_t k, const char *pass, const char *rule, const char *kind,
                       const char *nodename, const char *prod, const char *cons)
{
    const ag_isolation *iso = ag_report_isolation_at(r->rep, k);
    assert_non_null(iso);
    assert_string_equal(iso->pass, pass);
    assert_string_equal(iso->rule, rule);
    assert_string_equal(iso->kind, kind);
    assert_string_equal(iso->node, nodename);
    assert_string_equal(iso->producer, prod);
    assert_string_equal(iso->consumer, cons);
}

static bool attr_bool(const run_t *r, ag_node_id n, const char *name, bool *v)
{
    return ag_attrs_get_bool(ag_node_attrs_c(r->g, n), name, v);
}

/* Asserts that Identity `id` sits between producer p and h:i. */
static void assert_identity_between(const run_t *r, const char *id, const char *p, const char *h, uint32_t i)
{
    ag_node_id n = node(r, id);
    assert_string_equal(ag_node_type(r->g, n), "Identity");
    assert_int_equal(producer(r, n, 0), node(r, p));
    assert_int_equal(producer(r, node(r, h), i), n);
    bool v = true;
    assert_true(attr_bool(r, n, "no_need_constant_folding", &v));
    assert_false(v);
    /* Required by a rule, so the RW pass may not remove it later. */
    assert_true(attr_bool(r, n, "_cannot_be_deleted", &v));
    assert_true(v);
}

#define HM "hccl_memcpy"
#define HCM "hccl_continuous_memcpy"

/* ---- hccl_memcpy: const and variable inputs ---- */

static void test_const_input(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  c = Const() -> (f32[4] = {1.0, 2.0, 3.0, 4.0})\n"
             "  ar = HcomAllReduce(c) -> (f32[4])\n"
             "  out = NetOutput(ar)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_identity_between(&r, "ar_HcclMemcpyPass_Identity0", "c", "ar", 0);
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    assert_iso(&r, 0, HM, "hccl: const/variable input", "Identity", "ar_HcclMemcpyPass_Identity0", "c:0", "ar:0");
    /* Const/variable copies do not mark the node: the RW pass still looks. */
    bool v;
    assert_false(attr_bool(&r, node(&r, "ar"), "_skip_rw_conflict", &v));
    /* The copy is typed like the producer. */
    const ag_tensor_desc *d = ag_node_output_desc_c(r.g, node(&r, "ar_HcclMemcpyPass_Identity0"), 0);
    assert_int_equal(d->dtype, AG_DT_F32);
    assert_int_equal(d->rank, 1);
    assert_idempotent(&r, HM);
    run_done(&r);
}

/* The control edge into the collective moves onto the copy, so the copy
 * (which reads the variable) still waits for the Assign. */
static void test_variable_input_ctrl_moves(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  v = Variable() -> (f32[4])\n"
             "  d = Data() -> (f32[4])\n"
             "  asg = Assign(v, d) -> (f32[4])\n"
             "  ar = HcomAllReduce(v, ^asg) -> (f32[4])\n"
             "  out = NetOutput(ar)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    ag_node_id id = node(&r, "ar_HcclMemcpyPass_Identity0");
    assert_identity_between(&r, "ar_HcclMemcpyPass_Identity0", "v", "ar", 0);
    assert_true(has_ctrl(r.g, node(&r, "asg"), id));
    assert_false(has_ctrl(r.g, node(&r, "asg"), node(&r, "ar")));
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    /* Not a broadcast: no write-back. */
    assert_int_equal(ag_sub_find_node(r.g, AG_ROOT, "ar_Assign_0"), AG_NONE);
    assert_idempotent(&r, HM);
    run_done(&r);
}

/* A custom op with _input_mutable is handled like a collective. */
static void test_custom_input_mutable(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  c = Const() -> (f32[2] = {1.0, 2.0})\n"
             "  d = Data() -> (f32[2])\n"
             "  m = MyCollective@ai.custom(d, c) -> (f32[2]) <_input_mutable = [1]>\n"
             "  out = NetOutput(m)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_identity_between(&r, "m_HcclMemcpyPass_Identity1", "c", "m", 1);
    assert_int_equal(producer(&r, node(&r, "m"), 0), node(&r, "d"));
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    run_done(&r);
}

/* _input_mutable=false turns the table's in-place write off. */
static void test_input_mutable_false(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  c = Const() -> (f32[2] = {1.0, 2.0})\n"
             "  ar = HcomAllReduce(c) -> (f32[2]) <_input_mutable = false>\n"
             "  out = NetOutput(ar)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_int_equal(ag_report_isolation_count(r.rep), 0);
    assert_int_equal(producer(&r, node(&r, "ar"), 0), node(&r, "c"));
    run_done(&r);
}

/* ---- hccl_memcpy: shared inputs and order ---- */

/* Two collectives on one graph input: the first gets a copy (the second is
 * not ordered against it and comes later in the order); the second then
 * shares the buffer only with that copy, which must read before the second
 * writes: a control edge says so (the reference relies on the copy's
 * position next to the producer). */
static void test_data_two_allreduce(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  x = Data() -> (f32[4])\n"
             "  ar1 = HcomAllReduce(x) -> (f32[4])\n"
             "  ar2 = HcomAllReduce(x) -> (f32[4])\n"
             "  out = NetOutput(ar1, ar2)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    ag_node_id id = node(&r, "ar1_HcclMemcpyPass_Identity0");
    assert_identity_between(&r, "ar1_HcclMemcpyPass_Identity0", "x", "ar1", 0);
    assert_int_equal(producer(&r, node(&r, "ar2"), 0), node(&r, "x"));
    assert_int_equal(ag_graph_node_count(r.g), 5); /* exactly one copy */
    assert_true(has_ctrl(r.g, id, node(&r, "ar2")));
    bool v = false;
    assert_true(attr_bool(&r, node(&r, "ar2"), "_skip_rw_conflict", &v));
    assert_true(v);
    assert_false(attr_bool(&r, node(&r, "ar1"), "_skip_rw_conflict", &v));
    assert_int_equal(ag_report_isolation_count(r.rep), 2);
    assert_iso(&r, 0, HM, "hccl: sibling reads after in-place write", "Identity", "ar1_HcclMemcpyPass_Identity0",
               "x:0", "ar1:0");
    assert_iso(&r, 1, HM, "hccl: order sibling read before in-place write", "control", "",
               "ar1_HcclMemcpyPass_Identity0", "ar2");
    assert_idempotent(&r, HM);
    run_done(&r);
}

/* A reader with a path into the collective reads first on every schedule. */
static void test_sibling_before_by_path(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  x = Data() -> (f32[4])\n"
             "  ar = HcomAllReduce(x, ^relu) -> (f32[4])\n"
             "  relu = Relu(x) -> (f32[4])\n"
             "  out = NetOutput(ar, relu)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_int_equal(ag_report_isolation_count(r.rep), 0);
    assert_int_equal(ag_graph_node_count(r.g), 4);
    bool v = false;
    assert_true(attr_bool(&r, node(&r, "ar"), "_skip_rw_conflict", &v));
    assert_true(v);
    assert_idempotent(&r, HM);
    run_done(&r);
}

/* A reader the collective reaches reads the overwritten buffer: copy. */
static void test_sibling_after_by_path(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  x = Data() -> (f32[4])\n"
             "  relu = Relu(x, ^ar) -> (f32[4])\n"
             "  ar = HcomAllReduce(x) -> (f32[4])\n"
             "  out = NetOutput(ar, relu)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_identity_between(&r, "ar_HcclMemcpyPass_Identity0", "x", "ar", 0);
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    assert_iso(&r, 0, HM, "hccl: sibling reads after in-place write", "Identity", "ar_HcclMemcpyPass_Identity0",
               "x:0", "ar:0");
    bool v;
    assert_false(attr_bool(&r, node(&r, "ar"), "_skip_rw_conflict", &v));
    assert_idempotent(&r, HM);
    run_done(&r);
}

/* Unordered, the reader later in the order: copy (the reference's id rule). */
static void test_unordered_sibling_later(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  x = Data() -> (f32[4])\n"
             "  ar = HcomAllReduce(x) -> (f32[4])\n"
             "  relu = Relu(x) -> (f32[4])\n"
             "  out = NetOutput(ar, relu)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_identity_between(&r, "ar_HcclMemcpyPass_Identity0", "x", "ar", 0);
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    assert_idempotent(&r, HM);
    run_done(&r);
}

/* Unordered, the reader earlier in the order: the order is made explicit. */
static void test_unordered_sibling_earlier(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  x = Data() -> (f32[4])\n"
             "  relu = Relu(x) -> (f32[4])\n"
             "  ar = HcomAllReduce(x) -> (f32[4])\n"
             "  out = NetOutput(ar, relu)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_int_equal(producer(&r, node(&r, "ar"), 0), node(&r, "x"));
    assert_true(has_ctrl(r.g, node(&r, "relu"), node(&r, "ar")));
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    assert_iso(&r, 0, HM, "hccl: order sibling read before in-place write", "control", "", "relu", "ar");
    bool v = false;
    assert_true(attr_bool(&r, node(&r, "ar"), "_skip_rw_conflict", &v));
    assert_true(v);
    assert_idempotent(&r, HM);
    run_done(&r);
}

/* One reader needs the copy: no control edge is added for the others. */
static void test_copy_wins_over_order(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  x = Data() -> (f32[4])\n"
             "  a = Relu(x) -> (f32[4])\n"
             "  ar = HcomAllReduce(x) -> (f32[4])\n"
             "  b = Neg(x) -> (f32[4])\n"
             "  out = NetOutput(ar, a, b)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_identity_between(&r, "ar_HcclMemcpyPass_Identity0", "x", "ar", 0);
    assert_false(has_ctrl(r.g, node(&r, "a"), node(&r, "ar")));
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    run_done(&r);
}

/* Shape readers never see the bytes: no copy even though they run later. */
static void test_shape_only_siblings(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  x = Data() -> (f32[2,2])\n"
             "  ar = HcomAllReduce(x) -> (f32[2,2])\n"
             "  s = Shape(x, ^ar) -> (i64[2])\n"
             "  k = Const() -> (i64[1] = {4})\n"
             "  rs = Reshape(x, k, ^ar) -> (f32[4])\n"
             "  rk = Rank(rs) -> (i64[])\n"
             "  out = NetOutput(ar, s, rk)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_int_equal(ag_report_isolation_count(r.rep), 0);
    bool v = false;
    assert_true(attr_bool(&r, node(&r, "ar"), "_skip_rw_conflict", &v));
    assert_true(v);
    assert_idempotent(&r, HM);
    run_done(&r);
}

/* A view that someone reads the bytes of is an ordinary reader. */
static void test_view_with_data_reader(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  x = Data() -> (f32[2,2])\n"
             "  ar = HcomAllReduce(x) -> (f32[2,2])\n"
             "  k = Const() -> (i64[1] = {4})\n"
             "  rs = Reshape(x, k) -> (f32[4])\n"
             "  n = Neg(rs) -> (f32[4])\n"
             "  out = NetOutput(ar, n)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_identity_between(&r, "ar_HcclMemcpyPass_Identity0", "x", "ar", 0);
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    run_done(&r);
}

/* ---- hccl_memcpy: broadcast write-back ---- */

static void test_broadcast_write_back(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  v = Variable() -> (f32[4])\n"
             "  b = HcomBroadcast(v) -> (f32[4])\n"
             "  n = Neg(b) -> (f32[4])\n"
             "  after = NoOp(^b)\n"
             "  out = NetOutput(n)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_identity_between(&r, "b_HcclMemcpyPass_Identity0", "v", "b", 0);
    ag_node_id a = node(&r, "b_Assign_0");
    assert_string_equal(ag_node_type(r.g, a), "Assign");
    assert_int_equal(producer(&r, a, 0), node(&r, "v"));
    assert_int_equal(producer(&r, a, 1), node(&r, "b"));
    assert_true(has_ctrl(r.g, a, node(&r, "n")));
    assert_true(has_ctrl(r.g, a, node(&r, "after")));
    assert_int_equal(ag_report_isolation_count(r.rep), 2);
    assert_iso(&r, 0, HM, "hccl: const/variable input", "Identity", "b_HcclMemcpyPass_Identity0", "v:0", "b:0");
    assert_iso(&r, 1, HM, "hccl: broadcast write-back", "Assign", "b_Assign_0", "b:0", "v:0");
    assert_idempotent(&r, HM);
    run_done(&r);
}

/* A variable that already feeds an Assign gets no second writer. */
static void test_broadcast_existing_assign(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  v = Variable() -> (f32[4])\n"
             "  b = HcomBroadcast(v) -> (f32[4])\n"
             "  w = Assign(v, b) -> (f32[4])\n"
             "  out = NetOutput(w)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_identity_between(&r, "b_HcclMemcpyPass_Identity0", "v", "b", 0);
    assert_int_equal(ag_sub_find_node(r.g, AG_ROOT, "b_Assign_0"), AG_NONE);
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    run_done(&r);
}

/* ---- hccl_memcpy: errors, subgraphs, While ---- */

static void test_unconnected_input(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  x = Data() -> (f32[4])\n"
             "  ar = HcomAllReduce(x, -) -> (f32[4], f32[4])\n"
             "  out = NetOutput(ar)\n"
             "}\n");
    assert_int_equal(r.st, AG_EINVAL);
    assert_errmsg(r.ctx, "node ar (HcomAllReduce) input 1 is not connected");
    run_done(&r);
}

static void test_subgraph_and_while(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM,
             "graph g {\n"
             "  x = Data() -> (f32[4])\n"
             "  w = While(x) -> (f32[4]) {\n"
             "    graph cond {\n"
             "      p = Data() -> (f32[4]) <_parent_node_index = 0>\n"
             "      t = ReduceSum(p) -> (bool[])\n"
             "      o = NetOutput(t)\n"
             "    }\n"
             "    graph body {\n"
             "      p = Data() -> (f32[4]) <_parent_node_index = 0>\n"
             "      c = Const() -> (f32[4] = {1.0, 1.0, 1.0, 1.0})\n"
             "      ar = HcomAllReduce(c) -> (f32[4])\n"
             "      s = Add(p, ar) -> (f32[4])\n"
             "      o = NetOutput(s <_parent_node_index = 0>)\n"
             "    }\n"
             "  }\n"
             "  r = Relu(x) -> (f32[4])\n"
             "  out = NetOutput(w, r)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    /* The While's own scope-writeable input is not this pass's business. */
    assert_int_equal(producer(&r, node(&r, "w"), 0), node(&r, "x"));
    ag_sub_id body = ag_graph_find_sub(r.g, "body");
    ag_node_id id = agtest_find(r.g, body, "ar_HcclMemcpyPass_Identity0");
    assert_int_equal(ag_node_input_src(r.g, agtest_find(r.g, body, "ar"), 0).node, id);
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    assert_string_equal(ag_report_isolation_at(r.rep, 0)->graph, "body");
    assert_idempotent(&r, HM);
    run_done(&r);
}

/* ---- hccl_continuous_memcpy ---- */

static void test_continuous_fixed_producers(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HCM,
             "graph g {\n"
             "  d = Data() -> (f32[2])\n"
             "  c = Const() -> (f32[2] = {1.0, 2.0})\n"
             "  v = Variable() -> (f32[2])\n"
             "  n = Neg(d) -> (f32[2])\n"
             "  ag = HcomAllGather(d, c, v, n) -> (f32[8])\n"
             "  out = NetOutput(ag)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_identity_between(&r, "ag_HcclContinuousMemcpyPass_Identity0", "d", "ag", 0);
    assert_identity_between(&r, "ag_HcclContinuousMemcpyPass_Identity1", "c", "ag", 1);
    assert_identity_between(&r, "ag_HcclContinuousMemcpyPass_Identity2", "v", "ag", 2);
    assert_int_equal(producer(&r, node(&r, "ag"), 3), node(&r, "n"));
    assert_int_equal(ag_report_isolation_count(r.rep), 3);
    for (uint32_t k = 0; k < 3; k++)
        assert_string_equal(ag_report_isolation_at(r.rep, k)->rule, "hccl continuous: const/data/variable input");
    assert_idempotent(&r, HCM);
    run_done(&r);
}

static void test_continuous_shared(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HCM,
             "graph g {\n"
             "  d = Data() -> (f32[2])\n"
             "  n = Neg(d) -> (f32[2])\n"
             "  ag1 = HcomAllGather(n) -> (f32[4])\n"
             "  ag2 = HcomAllGather(n) -> (f32[4])\n"
             "  m = Relu(n) -> (f32[2])\n"
             "  out = NetOutput(ag1, ag2, m)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_identity_between(&r, "ag1_HcclContinuousMemcpyPass_Identity0", "n", "ag1", 0);
    assert_int_equal(producer(&r, node(&r, "ag2"), 0), node(&r, "n"));
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    assert_iso(&r, 0, HCM, "hccl continuous: input shared by continuous consumers", "Identity",
               "ag1_HcclContinuousMemcpyPass_Identity0", "n:0", "ag1:0");
    assert_idempotent(&r, HCM);
    run_done(&r);
}

static void test_p2p_input(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HCM,
             "graph g {\n"
             "  d = Data() -> (f32[2])\n"
             "  n = Neg(d) -> (f32[2])\n"
             "  s1 = HcomSend(d) <_input_memory_type = [1]>\n"
             "  s2 = HcomSend(n) <_input_memory_type = [1]>\n"
             "  s3 = HcomSend(d)\n"
             "  out = NetOutput(n)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_identity_between(&r, "s1_HcclContinuousMemcpyPass_Identity0", "d", "s1", 0);
    assert_int_equal(producer(&r, node(&r, "s2"), 0), node(&r, "n"));
    assert_int_equal(producer(&r, node(&r, "s3"), 0), node(&r, "d"));
    assert_int_equal(ag_report_isolation_count(r.rep), 1);
    assert_iso(&r, 0, HCM, "hccl continuous: p2p input from const/data/variable", "Identity",
               "s1_HcclContinuousMemcpyPass_Identity0", "d:0", "s1:0");
    assert_idempotent(&r, HCM);
    run_done(&r);
}

/* The continuous pass writes a variable broadcast back too. */
static void test_continuous_broadcast_write_back(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HCM,
             "graph g {\n"
             "  v = Variable() -> (f32[4])\n"
             "  b = HcomBroadcast(v) -> (f32[4])\n"
             "  out = NetOutput(b)\n"
             "}\n");
    assert_int_equal(r.st, AG_OK);
    assert_identity_between(&r, "b_HcclContinuousMemcpyPass_Identity0", "v", "b", 0);
    ag_node_id a = node(&r, "b_Assign_0");
    assert_int_equal(producer(&r, a, 1), node(&r, "b"));
    assert_true(has_ctrl(r.g, a, node(&r, "out")));
    assert_int_equal(ag_report_isolation_count(r.rep), 2);
    assert_string_equal(ag_report_isolation_at(r.rep, 1)->pass, HCM);
    assert_idempotent(&r, HCM);
    run_done(&r);
}

/* ---- allocation failures ---- */

static const char oom_graph[] =
    "graph g {\n"
    "  x = Data() -> (f32[4])\n"
    "  v = Variable() -> (f32[4])\n"
    "  c = Const() -> (f32[4] = {1.0, 2.0, 3.0, 4.0})\n"
    "  relu = Relu(x) -> (f32[4])\n"
    "  ar1 = HcomAllReduce(x, c) -> (f32[4], f32[4])\n"
    "  ar2 = HcomAllReduce(x) -> (f32[4])\n"
    "  b = HcomBroadcast(v) -> (f32[4])\n"
    "  n = Neg(b, ^ar2) -> (f32[4])\n"
    "  s = HcomSend(x) <_input_memory_type = [1]>\n"
    "  out = NetOutput(ar1, ar2, n, relu)\n"
    "}\n";

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    const char *pass = ud;
    ag_graph *g = NULL;
    ag_ops *ops = NULL;
    ag_report *rep = NULL;
    ag_status st = agtest_pass_inputs(ctx, oom_graph, &g, &ops, &rep);
    if (st == AG_OK) {
        ag_pass_env env = {g, ops, rep};
        st = ag_pass_run(&env, pass);
        if (st == AG_OK)
            st = ag_graph_verify(g);
    }
    ag_report_destroy(rep);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    return st;
}

/* Writes through aliases: a view of a constant, a ref output of a
 * variable, a branch that hands its input out, a reader ordered by a path
 * into a branch (an edge into the If orders it). */
static const char *const alias_graph =
    "graph g {\n"
    "  k = Const() -> (f32[4] = {1.0, 2.0, 3.0, 4.0})\n"
    "  kv = Reshape(k) -> (f32[2,2])\n"
    "  ar = HcomAllReduce(kv) -> (f32[2,2])\n"
    "  v = Variable() -> (f32[4])\n"
    "  one = Data() -> (f32[4]) <index = 0>\n"
    "  upd = Assign(v, one) -> (f32[4])\n"
    "  bc = HcomBroadcast(upd) -> (f32[4])\n"
    "  c = Data() -> (bool[]) <index = 1>\n"
    "  x = Data() -> (f32[4]) <index = 2>\n"
    "  pick = If(c, x) -> (f32[4]) {\n"
    "    graph keep {\n"
    "      d = Data() -> (f32[4]) <_parent_node_index = 1>\n"
    "      o = NetOutput(d <_parent_node_index = 0>)\n"
    "    }\n"
    "    graph negate {\n"
    "      d = Data() -> (f32[4]) <_parent_node_index = 1>\n"
    "      n = Neg(d) -> (f32[4])\n"
    "      o = NetOutput(n <_parent_node_index = 0>)\n"
    "    }\n"
    "  }\n"
    "  ar2 = HcomAllReduce(pick) -> (f32[4])\n"
    "  late = Relu(x, ^ar2) -> (f32[4])\n"
    "  y = Data() -> (f32[4]) <index = 3>\n"
    "  early = Neg(y) -> (f32[4])\n"
    "  yv = Reshape(y) -> (f32[2,2])\n"
    "  ar3 = HcomAllReduce(yv, ^early) -> (f32[2,2])\n"
    "  out = NetOutput(ar, bc, ar2, late, early, ar3)\n"
    "}\n";

static void test_alias_writes(void **state)
{
    (void)state;
    run_t r;
    run_text(&r, HM, alias_graph);
    assert_int_equal(r.st, AG_OK);
    assert_int_equal(ag_report_isolation_count(r.rep), 3);
    assert_iso(&r, 0, HM, "hccl: const/variable input through view kv (constant k)", "Identity",
               "ar_HcclMemcpyPass_Identity0", "kv:0", "ar:0");
    assert_iso(&r, 1, HM, "hccl: const/variable input through ref output of upd (variable v)", "Identity",
               "bc_HcclMemcpyPass_Identity0", "upd:0", "bc:0");
    assert_iso(&r, 2, HM, "hccl: sibling reads after in-place write through branch output of pick (reader late)",
               "Identity", "ar2_HcclMemcpyPass_Identity0", "pick:0", "ar2:0");
    assert_identity_between(&r, "ar_HcclMemcpyPass_Identity0", "kv", "ar", 0);
    assert_identity_between(&r, "bc_HcclMemcpyPass_Identity0", "upd", "bc", 0);
    assert_identity_between(&r, "ar2_HcclMemcpyPass_Identity0", "pick", "ar2", 0);
    /* No write-back: the broadcast's producer is the Assign, not v. */
    assert_int_equal(ag_sub_find_node(r.g, AG_ROOT, "bc_Assign_0"), AG_NONE);
    /* early runs first on every schedule: no copy, the RW pass is told. */
    assert_int_equal(producer(&r, node(&r, "ar3"), 0), node(&r, "yv"));
    bool v = false;
    assert_true(attr_bool(&r, node(&r, "ar3"), "_skip_rw_conflict", &v));
    assert_true(v);
    assert_idempotent(&r, HM);
    run_done(&r);
}

/* ud NULL: hccl_memcpy, subgraph_isolate, rw_conflict; else that pass. */
static ag_status oom_alias_body(ag_ctx *ctx, void *ud)
{
    ag_graph *g = NULL;
    ag_ops *ops = NULL;
    ag_report *rep = NULL;
    ag_status st = agtest_pass_inputs(ctx, alias_graph, &g, &ops, &rep);
    if (st == AG_OK) {
        ag_pass_env env = {g, ops, rep};
        st = ag_pass_run(&env, ud ? (const char *)ud : HM);
        if (st == AG_OK && !ud)
            st = ag_pass_run(&env, "subgraph_isolate");
        if (st == AG_OK && !ud)
            st = ag_pass_run(&env, "rw_conflict");
        if (st == AG_OK)
            st = ag_graph_verify(g);
    }
    ag_report_destroy(rep);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    return st;
}

static void test_oom(void **state)
{
    (void)state;
    /* The clean run of the sweep must make every kind of change. */
    run_t r;
    run_text(&r, HM, oom_graph);
    assert_int_equal(r.st, AG_OK);
    assert_true(ag_report_isolation_count(r.rep) >= 4);
    run_done(&r);
    AG_TEST_OOM_SWEEP(oom_body, (void *)HM);
    AG_TEST_OOM_SWEEP(oom_body, (void *)HCM);
    AG_TEST_OOM_SWEEP(oom_alias_body, NULL);
    AG_TEST_OOM_SWEEP(oom_alias_body, (void *)"rw_conflict");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_const_input),
        cmocka_unit_test(test_alias_writes),
        cmocka_unit_test(test_variable_input_ctrl_moves),
        cmocka_unit_test(test_custom_input_mutable),
        cmocka_unit_test(test_input_mutable_false),
        cmocka_unit_test(test_data_two_allreduce),
        cmocka_unit_test(test_sibling_before_by_path),
        cmocka_unit_test(test_sibling_after_by_path),
        cmocka_unit_test(test_unordered_sibling_later),
        cmocka_unit_test(test_unordered_sibling_earlier),
        cmocka_unit_test(test_copy_wins_over_order),
        cmocka_unit_test(test_shape_only_siblings),
        cmocka_unit_test(test_view_with_data_reader),
        cmocka_unit_test(test_broadcast_write_back),
        cmocka_unit_test(test_broadcast_existing_assign),
        cmocka_unit_test(test_unconnected_input),
        cmocka_unit_test(test_subgraph_and_while),
        cmocka_unit_test(test_continuous_fixed_producers),
        cmocka_unit_test(test_continuous_shared),
        cmocka_unit_test(test_p2p_input),
        cmocka_unit_test(test_continuous_broadcast_write_back),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
