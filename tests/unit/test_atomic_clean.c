/* Unit tests of the atomic address clean pass: one shared clean node with
 * its stream-head control edges, one clean node per atomic node in loop
 * graphs, dispersed clean nodes, the HCCL skips, nodes that clean through
 * their own task, idempotence, report entries and allocation failures. */
#include "support/agtest.h"

#include <stdio.h>

#define RULE_HEAD "atomic: one clean at graph head"
#define RULE_LOOP "atomic: clean per atomic op in loop"
#define RULE_DISPERSED "atomic: dispersed clean for netoutput-connected node"

typedef struct fx {
    ag_ctx *ctx;
    ag_ops *ops;
    ag_graph *g;
    ag_report *rep;
} fx;

static void fx_load(fx *f, const char *text)
{
    f->ctx = agtest_ctx();
    assert_int_equal(ag_ops_create(f->ctx, &f->ops), AG_OK);
    assert_int_equal(ag_report_create(f->ctx, &f->rep), AG_OK);
    ag_status st = ag_text_read(f->ctx, text, strlen(text), "t.agt", &f->g);
    if (st != AG_OK)
        fail_msg("parse: %s", ag_ctx_errmsg(f->ctx));
}

static void fx_run(fx *f)
{
    ag_pass_env env = {f->g, f->ops, f->rep};
    ag_status st = ag_pass_run(&env, "atomic_addr_clean");
    if (st != AG_OK)
        fail_msg("pass: %s", ag_ctx_errmsg(f->ctx));
}

static void fx_free(fx *f)
{
    ag_graph_destroy(f->g);
    ag_report_destroy(f->rep);
    ag_ops_destroy(f->ops);
    ag_ctx_destroy(f->ctx);
}

static bool has_ctrl(const ag_graph *g, ag_node_id a, ag_node_id b)
{
    for (uint32_t k = 0; k < ag_node_num_ctrl_out(g, a); k++)
        if (ag_node_ctrl_out(g, a, k) == b)
            return true;
    return false;
}

/* Nodes of type type in subgraph s; the first one goes to *first. */
static uint32_t count_type(const ag_graph *g, ag_sub_id s, const char *type, ag_node_id *first)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < ag_sub_node_count(g, s); k++) {
        ag_node_id id = ag_sub_node_at(g, s, k);
        if (strcmp(ag_node_type(g, id), type) == 0) {
            if (n == 0 && first)
                *first = id;
            n++;
        }
    }
    return n;
}

static uint32_t count_iso(const ag_report *r, const char *rule, const char *kind)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < ag_report_isolation_count(r); k++) {
        const ag_isolation *iso = ag_report_isolation_at(r, k);
        assert_string_equal(iso->pass, "atomic_addr_clean");
        if (strcmp(iso->rule, rule) == 0 && strcmp(iso->kind, kind) == 0)
            n++;
    }
    return n;
}

static bool attr_is_true(const ag_graph *g, ag_node_id n, const char *name)
{
    bool b = false;
    return ag_attrs_get_bool(ag_node_attrs_c(g, n), name, &b) && b;
}

/* Runs the pass again and asserts that nothing changes. */
static void assert_idempotent(fx *f)
{
    uint32_t isos = ag_report_isolation_count(f->rep);
    uint32_t nodes = ag_graph_node_count(f->g);
    fx_run(f);
    assert_int_equal(ag_report_isolation_count(f->rep), isos);
    assert_int_equal(ag_graph_node_count(f->g), nodes);
}

static const char normal_graph[] = "graph main {\n"
                                   "  x = Data() -> (f32[4]) <index = 0>\n"
                                   "  v = Variable() -> (f32[4])\n"
                                   "  k = Const() -> (f32[4])\n"
                                   "  a = MyAcc(x) -> (f32[4]) <atomic_output_index = [0]>\n"
                                   "  b = Relu(v) -> (f32[4])\n"
                                   "  d = Neg(k) -> (f32[4])\n"
                                   "  c = Add(a, b) -> (f32[4])\n"
                                   "  e = Add(c, d) -> (f32[4])\n"
                                   "  out = NetOutput(e, ^v)\n"
                                   "}\n";

static void test_normal_graph(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, normal_graph);
    fx_run(&f);
    ag_node_id clean = AG_NONE;
    assert_int_equal(count_type(f.g, AG_ROOT, "AtomicAddrClean", &clean), 1);
    assert_string_equal(ag_node_name(f.g, clean), "atomic_addr_clean");
    ag_node_id a = agtest_find(f.g, AG_ROOT, "a"), b = agtest_find(f.g, AG_ROOT, "b");
    assert_true(has_ctrl(f.g, clean, a));
    /* b is the first node behind Variable v: another stream may start there. */
    assert_true(has_ctrl(f.g, clean, b));
    /* Not behind an input-less Data/Variable (d), and never the NetOutput. */
    assert_false(has_ctrl(f.g, clean, agtest_find(f.g, AG_ROOT, "d")));
    assert_false(has_ctrl(f.g, clean, agtest_find(f.g, AG_ROOT, "out")));
    assert_int_equal(ag_node_num_ctrl_out(f.g, clean), 2);
    assert_true(attr_is_true(f.g, a, "is_atomic_node"));
    assert_int_equal(count_iso(f.rep, RULE_HEAD, "AtomicAddrClean"), 1);
    assert_int_equal(count_iso(f.rep, RULE_HEAD, "control"), 2);
    assert_int_equal(ag_report_isolation_count(f.rep), 3);
    assert_idempotent(&f);
    fx_free(&f);
}

static void test_loop_graph(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, "graph main {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  w = While(x) -> (f32[4]) {\n"
                "    graph cond {\n"
                "      p = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                "      r = ReduceAny(p) -> (bool[])\n"
                "      o = NetOutput(r)\n"
                "    }\n"
                "    graph body {\n"
                "      p = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                "      a = MyAcc(p) -> (f32[4]) <atomic_output_index = [0], _stream_label = \"s1\">\n"
                "      b = MyAcc2(a) -> (f32[4]) <atomic_output_index = 0>\n"
                "      o = NetOutput(b <_parent_node_index = 0>)\n"
                "    }\n"
                "  }\n"
                "  out = NetOutput(w)\n"
                "}\n");
    fx_run(&f);
    ag_sub_id body = ag_graph_find_sub(f.g, "body");
    assert_int_equal(count_type(f.g, AG_ROOT, "AtomicAddrClean", NULL), 0);
    assert_int_equal(count_type(f.g, body, "AtomicAddrClean", NULL), 2);
    ag_node_id a = agtest_find(f.g, body, "a"), b = agtest_find(f.g, body, "b");
    ag_node_id ca = agtest_find(f.g, body, "a_atomic_addr_clean");
    ag_node_id cb = agtest_find(f.g, body, "b_atomic_addr_clean");
    assert_true(has_ctrl(f.g, ca, a));
    assert_true(has_ctrl(f.g, cb, b));
    assert_int_equal(ag_node_num_ctrl_out(f.g, ca), 1);
    assert_int_equal(ag_node_num_ctrl_out(f.g, cb), 1);
    const char *label = NULL;
    assert_true(ag_attrs_get_string(ag_node_attrs_c(f.g, ca), "_stream_label", &label));
    assert_string_equal(label, "s1");
    assert_false(ag_attrs_get_string(ag_node_attrs_c(f.g, cb), "_stream_label", &label));
    assert_int_equal(count_iso(f.rep, RULE_LOOP, "AtomicAddrClean"), 2);
    assert_int_equal(count_iso(f.rep, RULE_LOOP, "control"), 2);
    const ag_isolation *iso = ag_report_isolation_at(f.rep, 0);
    assert_string_equal(iso->graph, "body");
    assert_string_equal(iso->consumer, "a");
    assert_idempotent(&f);
    fx_free(&f);
}

/* A LoopCond node makes its graph a loop graph too. */
static void test_loopcond_graph(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, "graph main {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  a = MyAcc(x) -> (f32[4]) <atomic_output_index = [0]>\n"
                "  b = MyAcc(a) -> (f32[4]) <atomic_input_index = [0]>\n"
                "  lc = LoopCond(b) -> (bool[])\n"
                "  out = NetOutput(lc)\n"
                "}\n");
    fx_run(&f);
    assert_int_equal(count_type(f.g, AG_ROOT, "AtomicAddrClean", NULL), 2);
    assert_int_equal(count_iso(f.rep, RULE_LOOP, "control"), 2);
    assert_int_equal(count_iso(f.rep, RULE_HEAD, "control"), 0);
    assert_idempotent(&f);
    fx_free(&f);
}

static void test_dispersed(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, "graph main {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  a = MyAcc(x) -> (f32[4]) <atomic_output_index = [0], _is_connected_to_netoutput = [0]>\n"
                "  b = MyAcc(x) -> (f32[4]) <atomic_output_index = [0]>\n"
                "  c = Relu(x) -> (f32[4])\n"
                "  out = NetOutput(a, b, c)\n"
                "}\n");
    fx_run(&f);
    assert_int_equal(count_type(f.g, AG_ROOT, "AtomicAddrClean", NULL), 2);
    ag_node_id a = agtest_find(f.g, AG_ROOT, "a"), b = agtest_find(f.g, AG_ROOT, "b");
    ag_node_id c = agtest_find(f.g, AG_ROOT, "c");
    ag_node_id head = agtest_find(f.g, AG_ROOT, "atomic_addr_clean");
    ag_node_id disp = agtest_find(f.g, AG_ROOT, "a_atomic_addr_clean");
    assert_true(has_ctrl(f.g, disp, a));
    assert_int_equal(ag_node_num_ctrl_out(f.g, disp), 1);
    /* The shared clean node reaches b and the stream head c, never a. */
    assert_true(has_ctrl(f.g, head, b));
    assert_true(has_ctrl(f.g, head, c));
    assert_false(has_ctrl(f.g, head, a));
    assert_int_equal(count_iso(f.rep, RULE_DISPERSED, "AtomicAddrClean"), 1);
    assert_int_equal(count_iso(f.rep, RULE_DISPERSED, "control"), 1);
    assert_int_equal(count_iso(f.rep, RULE_HEAD, "control"), 2);
    assert_idempotent(&f);
    fx_free(&f);
}

/* Atomic outputs consumed by an HCCL-atomic node are cleaned by it: in a
 * loop graph the producer gets no clean node; an HCCL-atomic node fed by a
 * Data is not atomic at all. */
static void test_hccl_skips(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, "graph main {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  a = MyAcc(x) -> (f32[4]) <atomic_output_index = [0]>\n"
                "  ar = HcomAllReduce(a) -> (f32[4])\n"
                "  ar2 = HcomAllReduce(x) -> (f32[4])\n"
                "  lc = LoopCond(ar) -> (bool[])\n"
                "  out = NetOutput(lc, ar2)\n"
                "}\n");
    fx_run(&f);
    ag_node_id ar = agtest_find(f.g, AG_ROOT, "ar");
    assert_int_equal(count_type(f.g, AG_ROOT, "AtomicAddrClean", NULL), 1);
    ag_node_id c = agtest_find(f.g, AG_ROOT, "ar_atomic_addr_clean");
    assert_true(has_ctrl(f.g, c, ar));
    assert_int_equal(ag_node_num_ctrl_in(f.g, agtest_find(f.g, AG_ROOT, "a")), 0);
    assert_int_equal(ag_node_num_ctrl_in(f.g, agtest_find(f.g, AG_ROOT, "ar2")), 0);
    /* The reference marks only attribute-declared atomic nodes. */
    assert_true(attr_is_true(f.g, agtest_find(f.g, AG_ROOT, "a"), "is_atomic_node"));
    assert_false(attr_is_true(f.g, ar, "is_atomic_node"));
    assert_idempotent(&f);
    fx_free(&f);
}

/* Normal graph: the skipped producer is still linked, as a producer of the
 * collective's input, so that the zeroing never overlaps its write. */
static void test_hccl_producers(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, "graph main {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  r = Relu(x) -> (f32[4])\n"
                "  a = MyAcc(r) -> (f32[4]) <atomic_output_index = [0]>\n"
                "  ar = HcomAllReduce(a) -> (f32[4])\n"
                "  out = NetOutput(ar)\n"
                "}\n");
    fx_run(&f);
    ag_node_id c = AG_NONE;
    assert_int_equal(count_type(f.g, AG_ROOT, "AtomicAddrClean", &c), 1);
    assert_true(has_ctrl(f.g, c, agtest_find(f.g, AG_ROOT, "ar")));
    assert_true(has_ctrl(f.g, c, agtest_find(f.g, AG_ROOT, "a")));
    assert_true(has_ctrl(f.g, c, agtest_find(f.g, AG_ROOT, "r")));
    assert_int_equal(ag_node_num_ctrl_out(f.g, c), 3);
    assert_int_equal(count_iso(f.rep, RULE_HEAD, "control"), 3);
    assert_idempotent(&f);
    fx_free(&f);
}

static void test_own_task(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, "graph main {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  a = MyAcc(x) -> (f32[4]) <atomic_output_index = [0]>\n"
                "  n = Relu(a) -> (f32[4]) <_no_task = true>\n"
                "  b = MyAcc(x) -> (f32[4] <ref_var_src_var_name = \"var0\">) <atomic_output_index = [0]>\n"
                "  out = NetOutput(n, b)\n"
                "}\n");
    fx_run(&f);
    assert_int_equal(count_type(f.g, AG_ROOT, "AtomicAddrClean", NULL), 0);
    assert_int_equal(ag_report_isolation_count(f.rep), 0);
    ag_node_id a = agtest_find(f.g, AG_ROOT, "a"), b = agtest_find(f.g, AG_ROOT, "b");
    assert_true(attr_is_true(f.g, a, "need_gentask_atomic"));
    assert_true(attr_is_true(f.g, b, "need_gentask_atomic"));
    assert_true(attr_is_true(f.g, a, "is_atomic_node"));
    /* The mark outlives the _no_task consumer that decided it. */
    ag_node_id n = agtest_find(f.g, AG_ROOT, "n");
    assert_int_equal(ag_attrs_remove(f.g, ag_node_attrs(f.g, n), "_no_task"), AG_OK);
    assert_idempotent(&f);
    fx_free(&f);
}

/* A clean node that already orders an atomic node satisfies it; the shared
 * clean node is then not needed. */
static void test_existing_clean(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, "graph main {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  z = MemSet()\n"
                "  a = MyAcc(x, ^z) -> (f32[4]) <atomic_output_index = [0]>\n"
                "  out = NetOutput(a)\n"
                "}\n");
    fx_run(&f);
    assert_int_equal(ag_report_isolation_count(f.rep), 0);
    assert_int_equal(count_type(f.g, AG_ROOT, "AtomicAddrClean", NULL), 0);
    fx_free(&f);
}

static void test_no_atomic(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, "graph main {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  a = MyAcc(x) -> (f32[4]) <is_atomic_node = false>\n"
                "  out = NetOutput(a)\n"
                "}\n");
    fx_run(&f);
    assert_int_equal(ag_report_isolation_count(f.rep), 0);
    assert_int_equal(ag_graph_node_count(f.g), 3);
    fx_free(&f);
}

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    const char *text = ud;
    ag_ops *ops = NULL;
    ag_report *rep = NULL;
    ag_graph *g = NULL;
    ag_status st = ag_ops_create(ctx, &ops);
    if (st == AG_OK)
        st = ag_report_create(ctx, &rep);
    if (st == AG_OK)
        st = ag_text_read(ctx, text, strlen(text), "t.agt", &g);
    if (st == AG_OK) {
        ag_pass_env env = {g, ops, rep};
        st = ag_pass_run(&env, "atomic_addr_clean");
        if (st == AG_OK)
            st = ag_pass_run(&env, "atomic_addr_clean");
    }
    ag_graph_destroy(g);
    ag_report_destroy(rep);
    ag_ops_destroy(ops);
    return st;
}

static void test_oom(void **state)
{
    (void)state;
    static const char loop_graph[] = "graph main {\n"
                                     "  x = Data() -> (f32[4]) <index = 0>\n"
                                     "  a = MyAcc(x) -> (f32[4]) <atomic_output_index = [0], _stream_label = \"s\">\n"
                                     "  d = MyAcc(x) -> (f32[4]) <atomic_output_index = [0], "
                                     "_is_connected_to_netoutput = true>\n"
                                     "  lc = LoopCond(a) -> (bool[])\n"
                                     "  out = NetOutput(lc, d)\n"
                                     "}\n";
    static const char disp_graph[] = "graph main {\n"
                                     "  x = Data() -> (f32[4]) <index = 0>\n"
                                     "  r = Relu(x) -> (f32[4])\n"
                                     "  ar = HcomAllReduce(r) -> (f32[4])\n"
                                     "  d = MyAcc(x) -> (f32[4]) <atomic_output_index = [0], "
                                     "_is_connected_to_netoutput = true>\n"
                                     "  out = NetOutput(ar, d)\n"
                                     "}\n";
    assert_true(AG_TEST_OOM_SWEEP(oom_body, (void *)normal_graph) > 1);
    assert_true(AG_TEST_OOM_SWEEP(oom_body, (void *)loop_graph) > 1);
    assert_true(AG_TEST_OOM_SWEEP(oom_body, (void *)disp_graph) > 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normal_graph),   cmocka_unit_test(test_loop_graph),
        cmocka_unit_test(test_loopcond_graph), cmocka_unit_test(test_dispersed),
        cmocka_unit_test(test_hccl_skips),     cmocka_unit_test(test_hccl_producers),
        cmocka_unit_test(test_own_task),       cmocka_unit_test(test_existing_clean),
        cmocka_unit_test(test_no_atomic),      cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
