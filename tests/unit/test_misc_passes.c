/* Unit tests of the inplace support check, memcpy addr async and mark same
 * addr passes: each rule and each exclusion, the subgraph walk of the
 * StreamMerge rule (root Data, If, known PartitionedCall, variable alias,
 * bad _parent_node_index), idempotence, report entries and allocation
 * failures. */
#include "support/agtest.h"

#include <stdio.h>

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

static ag_status fx_try(fx *f, const char *pass)
{
    ag_pass_env env = {f->g, f->ops, f->rep};
    return ag_pass_run(&env, pass);
}

static void fx_run(fx *f, const char *pass)
{
    if (fx_try(f, pass) != AG_OK)
        fail_msg("%s: %s", pass, ag_ctx_errmsg(f->ctx));
}

static void fx_free(fx *f)
{
    ag_graph_destroy(f->g);
    ag_report_destroy(f->rep);
    ag_ops_destroy(f->ops);
    ag_ctx_destroy(f->ctx);
}

/* Runs pass again and asserts that the graph and the report stay as they are. */
static void assert_idempotent(fx *f, const char *pass)
{
    ag_graph *copy = NULL;
    uint32_t isos = ag_report_isolation_count(f->rep);
    ag_ctx *c2 = agtest_ctx();
    /* Compare with a copy made by printing and re-reading the graph. */
    ag_membuf mb;
    ag_membuf_init(&mb, c2);
    assert_int_equal(ag_text_write(f->g, NULL, ag_sink_membuf(&mb)), AG_OK);
    assert_int_equal(ag_text_read(c2, mb.data, mb.len, "copy.agt", &copy), AG_OK);
    ag_membuf_free(&mb);
    fx_run(f, pass);
    assert_int_equal(ag_report_isolation_count(f->rep), isos);
    assert_graph_equal(f->g, copy);
    ag_graph_destroy(copy);
    ag_ctx_destroy(c2);
}

static ag_port in_src(const fx *f, ag_sub_id s, const char *node, uint32_t i)
{
    return ag_node_input_src(f->g, agtest_find(f->g, s, node), i);
}

static int64_t hint(const fx *f, const char *node)
{
    uint32_t i;
    return ag_ops_inplace_hint(f->g, agtest_find(f->g, AG_ROOT, node), &i) ? (int64_t)i : -1;
}

/* ---- inplace_support_check ---- */

static const char inplace_graph[] = "graph main {\n"
                                    "  x = Data() -> (f32[4]) <index = 0>\n"
                                    "  k = Const() -> (f32[4])\n"
                                    "  v = Variable() -> (f32[4])\n"
                                    "  r = Relu(x) -> (f32[4])\n"
                                    "  s = Relu(r) -> (f32[4])\n"
                                    "  t = Add(k, s) -> (f32[4])\n"
                                    "  w = Cast(t) -> (f16[4])\n"
                                    "  u = Relu(v) -> (f32[4])\n"
                                    "  m = Relu(u) -> (f32[4])\n"
                                    "  n = Neg(u) -> (f32[4])\n"
                                    "  e = MyGrow(m) -> (f32[2,4])\n"
                                    "  sp = Split(n) -> (f32[2], f32[2])\n"
                                    "  out = NetOutput(w, e, sp:0, sp:1)\n"
                                    "}\n";

static void test_inplace(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, inplace_graph);
    fx_run(&f, "inplace_support_check");
    assert_int_equal(hint(&f, "r"), -1); /* from a Data */
    assert_int_equal(hint(&f, "s"), 0);  /* r: one consumer, same type */
    assert_int_equal(hint(&f, "t"), 1);  /* input 0 is a Const, input 1 passes */
    assert_int_equal(hint(&f, "w"), -1); /* dtype differs */
    assert_int_equal(hint(&f, "u"), -1); /* from a Variable */
    assert_int_equal(hint(&f, "m"), -1); /* u has two consumers */
    assert_int_equal(hint(&f, "n"), -1);
    assert_int_equal(hint(&f, "e"), -1); /* shape differs */
    assert_int_equal(hint(&f, "sp"), -1); /* two outputs */
    assert_int_equal(ag_report_isolation_count(f.rep), 0);
    /* The hint is an int on output 0's descriptor. */
    int64_t v = -1;
    const ag_tensor_desc *d = ag_node_output_desc_c(f.g, agtest_find(f.g, AG_ROOT, "t"), 0);
    assert_true(ag_attrs_get_int(d->attrs, "_inplace_support_input_index", &v));
    assert_int_equal(v, 1);
    assert_idempotent(&f, "inplace_support_check");
    fx_free(&f);
}

/* ---- memcpy_addr_async ---- */

static bool attr_is(const fx *f, ag_node_id n, const char *name, bool want)
{
    bool b;
    return ag_attrs_get_bool(ag_node_attrs_c(f->g, n), name, &b) && b == want;
}

static void test_memcpy_stream_merge_root(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, "graph main {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  y = Relu(x) -> (f32[4])\n"
                "  sm = StreamMerge(x, y) -> (f32[4], i32[]) <_stream_label = \"L1\", _rts_label_node = true,"
                " _is_connected_to_data = true>\n"
                "  out = NetOutput(sm)\n"
                "}\n");
    fx_run(&f, "memcpy_addr_async");
    ag_port p = in_src(&f, AG_ROOT, "sm", 0);
    assert_string_equal(ag_node_type(f.g, p.node), "MemcpyAddrAsync");
    assert_string_equal(ag_node_name(f.g, p.node), "x_MemcpyAddrAsync");
    assert_int_equal(ag_node_input_src(f.g, p.node, 0).node, agtest_find(f.g, AG_ROOT, "x"));
    assert_string_equal(ag_node_type(f.g, in_src(&f, AG_ROOT, "sm", 1).node), "Relu");
    const char *label = NULL;
    assert_true(ag_attrs_get_string(ag_node_attrs_c(f.g, p.node), "_stream_label", &label));
    assert_string_equal(label, "L1");
    assert_true(attr_is(&f, p.node, "_rts_label_node", true));
    assert_true(attr_is(&f, p.node, "_is_connected_to_data", true));
    assert_true(attr_is(&f, agtest_find(f.g, AG_ROOT, "sm"), "_is_connected_to_data", false));
    assert_int_equal(ag_report_isolation_count(f.rep), 1);
    const ag_isolation *iso = ag_report_isolation_at(f.rep, 0);
    assert_string_equal(iso->pass, "memcpy_addr_async");
    assert_string_equal(iso->rule, "memcpy_addr_async: stream merge input from user data");
    assert_string_equal(iso->kind, "MemcpyAddrAsync");
    assert_string_equal(iso->producer, "x:0");
    assert_string_equal(iso->consumer, "sm:0");
    assert_idempotent(&f, "memcpy_addr_async");
    fx_free(&f);
}

static const char merge_in_if[] = "graph main {\n"
                                  "  c = Data() -> (bool[]) <index = 0>\n"
                                  "  x = Data() -> (f32[4]) <index = 1>\n"
                                  "  r = If(c, x) -> (f32[4]) <_stream_label = \"L2\"> {\n"
                                  "    graph then_b {\n"
                                  "      p = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                                  "      sm = StreamMerge(p) -> (f32[4])\n"
                                  "      o = NetOutput(sm <_parent_node_index = 0>)\n"
                                  "    }\n"
                                  "    graph else_b {\n"
                                  "      p = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                                  "      o = NetOutput(p <_parent_node_index = 0>)\n"
                                  "    }\n"
                                  "  }\n"
                                  "  out = NetOutput(r)\n"
                                  "}\n";

/* A subgraph Data is followed out to the root Data feeding the If. */
static void test_memcpy_stream_merge_if(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, merge_in_if);
    fx_run(&f, "memcpy_addr_async");
    ag_port p = in_src(&f, AG_ROOT, "r", 1);
    assert_string_equal(ag_node_type(f.g, p.node), "MemcpyAddrAsync");
    const char *label = NULL;
    assert_true(ag_attrs_get_string(ag_node_attrs_c(f.g, p.node), "_stream_label", &label));
    assert_string_equal(label, "L2");
    ag_sub_id then_b = ag_graph_find_sub(f.g, "then_b");
    assert_string_equal(ag_node_type(f.g, in_src(&f, then_b, "sm", 0).node), "Data");
    assert_string_equal(ag_node_type(f.g, in_src(&f, AG_ROOT, "r", 0).node), "Data");
    assert_int_equal(ag_report_isolation_count(f.rep), 1);
    assert_string_equal(ag_report_isolation_at(f.rep, 0)->graph, "main");
    assert_string_equal(ag_report_isolation_at(f.rep, 0)->consumer, "r:1");
    assert_idempotent(&f, "memcpy_addr_async");
    fx_free(&f);
}

static void call_graph(char *buf, size_t cap, const char *call_attrs, const char *data_attrs)
{
    snprintf(buf, cap,
             "graph main {\n"
             "  x = Data() -> (f32[4]) <index = 0>\n"
             "  pc = PartitionedCall(x) -> (f32[4]) %s {\n"
             "    graph inner {\n"
             "      p = Data() -> (f32[4]) <_parent_node_index = 0%s>\n"
             "      sm = StreamMerge(p) -> (f32[4])\n"
             "      o = NetOutput(sm <_parent_node_index = 0>)\n"
             "    }\n"
             "  }\n"
             "  out = NetOutput(pc)\n"
             "}\n",
             call_attrs, data_attrs);
}

static void test_memcpy_stream_merge_call(void **state)
{
    (void)state;
    char text[1024];
    fx f;
    /* Known call: a MemcpyAsync inside, right behind the call's Data. */
    call_graph(text, sizeof text, "<_is_unknown_shape = false>", "");
    fx_load(&f, text);
    fx_run(&f, "memcpy_addr_async");
    ag_sub_id inner = ag_graph_find_sub(f.g, "inner");
    ag_port p = in_src(&f, inner, "sm", 0);
    assert_string_equal(ag_node_type(f.g, p.node), "MemcpyAsync");
    assert_string_equal(ag_node_name(f.g, p.node), "p_MemcpyAsync");
    assert_string_equal(ag_node_type(f.g, in_src(&f, AG_ROOT, "pc", 0).node), "Data");
    assert_string_equal(ag_report_isolation_at(f.rep, 0)->rule,
                        "memcpy_addr_async: stream merge input from known subgraph data");
    assert_string_equal(ag_report_isolation_at(f.rep, 0)->graph, "inner");
    assert_idempotent(&f, "memcpy_addr_async");
    fx_free(&f);

    /* Known call whose Data aliases a variable: nothing. */
    call_graph(text, sizeof text, "<_is_unknown_shape = false>", ", ref_var_src_var_name = \"var0\"");
    fx_load(&f, text);
    fx_run(&f, "memcpy_addr_async");
    assert_int_equal(ag_report_isolation_count(f.rep), 0);
    assert_int_equal(ag_graph_node_count(f.g), 6);
    fx_free(&f);

    /* A call not marked known-shape is walked through like an If. */
    call_graph(text, sizeof text, "", "");
    fx_load(&f, text);
    fx_run(&f, "memcpy_addr_async");
    assert_string_equal(ag_node_type(f.g, in_src(&f, AG_ROOT, "pc", 0).node), "MemcpyAddrAsync");
    assert_int_equal(ag_report_isolation_count(f.rep), 1);
    fx_free(&f);
}

static void test_memcpy_bad_parent_index(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, "graph main {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  pc = PartitionedCall(x) -> (f32[4]) {\n"
                "    graph inner {\n"
                "      p = Data() -> (f32[4])\n"
                "      sm = StreamMerge(p) -> (f32[4])\n"
                "      o = NetOutput(sm <_parent_node_index = 0>)\n"
                "    }\n"
                "  }\n"
                "  out = NetOutput(pc)\n"
                "}\n");
    assert_int_equal(fx_try(&f, "memcpy_addr_async"), AG_EINVAL);
    assert_errmsg(f.ctx, "p (Data)");
    assert_errmsg(f.ctx, "_parent_node_index");
    assert_errmsg(f.ctx, "inner");
    fx_free(&f);
}

static void test_memcpy_netoutput_const(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, "graph main {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  k = Const() -> (f32[4]) <_stream_label = \"K\">\n"
                "  z = Const() -> (f32[0, 4])\n"
                "  kp = ConstPlaceHolder() -> (f32[4])\n"
                "  c = If(x, k) -> (f32[4]) {\n"
                "    graph then_b {\n"
                "      q = Const() -> (f32[4])\n"
                "      o = NetOutput(q <_parent_node_index = 0>)\n"
                "    }\n"
                "    graph else_b {\n"
                "      q = Const() -> (f32[4])\n"
                "      o = NetOutput(q <_parent_node_index = 0>)\n"
                "    }\n"
                "  }\n"
                "  out = NetOutput(k, z, kp, x, c)\n"
                "}\n");
    fx_run(&f, "memcpy_addr_async");
    ag_port p = in_src(&f, AG_ROOT, "out", 0);
    assert_string_equal(ag_node_type(f.g, p.node), "MemcpyAddrAsync");
    assert_string_equal(ag_node_name(f.g, p.node), "k_MemcpyAddrAsync");
    const char *label = NULL;
    assert_true(ag_attrs_get_string(ag_node_attrs_c(f.g, p.node), "_stream_label", &label));
    assert_string_equal(label, "K");
    /* The If still reads the constant itself. */
    assert_string_equal(ag_node_type(f.g, in_src(&f, AG_ROOT, "c", 1).node), "Const");
    assert_string_equal(ag_node_type(f.g, in_src(&f, AG_ROOT, "out", 1).node), "Const");
    assert_string_equal(ag_node_type(f.g, in_src(&f, AG_ROOT, "out", 2).node), "ConstPlaceHolder");
    assert_string_equal(ag_node_type(f.g, in_src(&f, AG_ROOT, "out", 3).node), "Data");
    assert_int_equal(ag_report_isolation_count(f.rep), 1);
    assert_string_equal(ag_report_isolation_at(f.rep, 0)->rule, "memcpy_addr_async: root netoutput input from const");
    assert_idempotent(&f, "memcpy_addr_async");
    fx_free(&f);
}

static void test_memcpy_hccl_ref_data(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, "graph main {\n"
                "  rd = RefData() -> (f32[4])\n"
                "  rd2 = RefData() -> (f32[4])\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  ar = HcomAllReduce(rd, x) -> (f32[4], f32[4]) <_unrefreshable_feature_map = true>\n"
                "  ar2 = HcomAllReduce(rd2) -> (f32[4])\n"
                "  out = NetOutput(ar, ar:1, ar2)\n"
                "}\n");
    fx_run(&f, "memcpy_addr_async");
    ag_port p = in_src(&f, AG_ROOT, "ar", 0);
    assert_string_equal(ag_node_type(f.g, p.node), "MemcpyAddrAsync");
    assert_string_equal(ag_node_name(f.g, p.node), "rd_MemcpyAddrAsync");
    assert_string_equal(ag_node_type(f.g, in_src(&f, AG_ROOT, "ar", 1).node), "Data");
    assert_string_equal(ag_node_type(f.g, in_src(&f, AG_ROOT, "ar2", 0).node), "RefData");
    assert_int_equal(ag_report_isolation_count(f.rep), 1);
    assert_string_equal(ag_report_isolation_at(f.rep, 0)->rule,
                        "memcpy_addr_async: hccl input from ref data with unrefreshable feature map");
    assert_idempotent(&f, "memcpy_addr_async");
    fx_free(&f);
}

/* ---- mark_same_addr ---- */

static void test_mark_same_addr(void **state)
{
    (void)state;
    fx f;
    fx_load(&f, "graph main {\n"
                "  x = Data() -> (f32[4]) <index = 0>\n"
                "  c = MyCond(x) -> (f32[4] \"v0\", bool[] \"flag\")\n"
                "  ss = StreamSwitch(c, c:1)\n"
                "  i = MyIdx(x) -> (i32[] \"idx\")\n"
                "  lsw = LabelSwitchByIndex(i)\n"
                "  m = MyTwo(x) -> (f32[4], f32[4] \"b\")\n"
                "  sn = StreamSwitchN(m:1)\n"
                "  r = Relu(m) -> (f32[4])\n"
                "  out = NetOutput(r)\n"
                "}\n");
    fx_run(&f, "mark_same_addr");
    const struct {
        const char *node, *name;
        int64_t index;
    } want[] = {{"c", "v0", 0}, {"i", "idx", 0}, {"m", "b", 1}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const ag_attrs *a = ag_node_attrs_c(f.g, agtest_find(f.g, AG_ROOT, want[k].node));
        const char *s = NULL;
        int64_t idx = -1;
        assert_true(ag_attrs_get_string(a, "_alloc_fixed_addr", &s));
        assert_string_equal(s, want[k].name);
        assert_true(ag_attrs_get_int(a, "_alloc_fixed_addr_index", &idx));
        assert_int_equal(idx, want[k].index);
    }
    const char *unmarked[] = {"x", "r", "ss", "lsw"};
    for (size_t k = 0; k < sizeof unmarked / sizeof unmarked[0]; k++)
        assert_null(ag_attrs_find(ag_node_attrs_c(f.g, agtest_find(f.g, AG_ROOT, unmarked[k])), "_alloc_fixed_addr"));
    assert_int_equal(ag_report_isolation_count(f.rep), 0);
    assert_idempotent(&f, "mark_same_addr");
    fx_free(&f);
}

/* ---- allocation failures ---- */

typedef struct oom_case {
    const char *text;
    const char *pass;
} oom_case;

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    const oom_case *c = ud;
    ag_ops *ops = NULL;
    ag_report *rep = NULL;
    ag_graph *g = NULL;
    ag_status st = ag_ops_create(ctx, &ops);
    if (st == AG_OK)
        st = ag_report_create(ctx, &rep);
    if (st == AG_OK)
        st = ag_text_read(ctx, c->text, strlen(c->text), "t.agt", &g);
    if (st == AG_OK) {
        ag_pass_env env = {g, ops, rep};
        st = ag_pass_run(&env, c->pass);
        if (st == AG_OK)
            st = ag_pass_run(&env, c->pass);
    }
    ag_graph_destroy(g);
    ag_report_destroy(rep);
    ag_ops_destroy(ops);
    return st;
}

static void test_oom(void **state)
{
    (void)state;
    static const char memcpy_all[] =
        "graph main {\n"
        "  x = Data() -> (f32[4]) <index = 0>\n"
        "  k = Const() -> (f32[4])\n"
        "  rd = RefData() -> (f32[4])\n"
        "  sm = StreamMerge(x) -> (f32[4]) <_stream_label = \"L\", _is_connected_to_data = true>\n"
        "  ar = HcomAllReduce(rd) -> (f32[4]) <_unrefreshable_feature_map = true>\n"
        "  pc = PartitionedCall(x) -> (f32[4]) <_is_unknown_shape = false> {\n"
        "    graph inner {\n"
        "      p = Data() -> (f32[4]) <_parent_node_index = 0>\n"
        "      sm = StreamMerge(p) -> (f32[4])\n"
        "      o = NetOutput(sm <_parent_node_index = 0>)\n"
        "    }\n"
        "  }\n"
        "  out = NetOutput(sm, ar, k, pc)\n"
        "}\n";
    static const char mark[] = "graph main {\n"
                               "  x = Data() -> (f32[4]) <index = 0>\n"
                               "  c = MyCond(x) -> (f32[4] \"v0\", bool[])\n"
                               "  ss = StreamSwitch(c, c:1)\n"
                               "  out = NetOutput(c)\n"
                               "}\n";
    oom_case cases[] = {
        {inplace_graph, "inplace_support_check"},
        {memcpy_all, "memcpy_addr_async"},
        {merge_in_if, "memcpy_addr_async"},
        {mark, "mark_same_addr"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        assert_true(AG_TEST_OOM_SWEEP(oom_body, &cases[k]) > 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inplace),
        cmocka_unit_test(test_memcpy_stream_merge_root),
        cmocka_unit_test(test_memcpy_stream_merge_if),
        cmocka_unit_test(test_memcpy_stream_merge_call),
        cmocka_unit_test(test_memcpy_bad_parent_index),
        cmocka_unit_test(test_memcpy_netoutput_const),
        cmocka_unit_test(test_memcpy_hccl_ref_data),
        cmocka_unit_test(test_mark_same_addr),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
