/* Unit tests of the layout-conflict engine and solver: absolute pairs and the
 * side choice, checker tables of the tests' own (symmetric registration,
 * argument order, once-per-symbol checkers, the IsSkip ref rule), the
 * solver's Identity after an output for all consumers with its attributes,
 * skipped anchors (unknown shape, already isolated), table validation, graph
 * information, a second run adding nothing, and allocation-failure sweeps. */
#include "support/agtest.h"

#include "passes/layout_internal.h"

#include <stdio.h>

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

static const ag_layout_info default_info = {true, false, false, true};

static void fx_process(fixture *fx, const ag_layout_checker_row *rows, uint32_t nrows)
{
    ag_pass_env env = {fx->g, fx->ops, fx->rep};
    if (ag_layout_process(&env, AG_ROOT, &default_info, rows, nrows) != AG_OK)
        fail_msg("layout: %s", ag_ctx_errmsg(fx->ctx));
    assert_int_equal(ag_graph_verify(fx->g), AG_OK);
}

static void fx_pass(fixture *fx)
{
    ag_pass_env env = {fx->g, fx->ops, fx->rep};
    if (ag_pass_layout_conflict(&env) != AG_OK)
        fail_msg("layout_conflict: %s", ag_ctx_errmsg(fx->ctx));
    assert_int_equal(ag_graph_verify(fx->g), AG_OK);
}

static ag_node_id node(const fixture *fx, const char *name)
{
    return agtest_find(fx->g, AG_ROOT, name);
}

static const char *src_name(const fixture *fx, const char *name, uint32_t i)
{
    ag_port p = ag_node_input_src(fx->g, node(fx, name), i);
    assert_int_not_equal(p.node, AG_NONE);
    return ag_node_name(fx->g, p.node);
}

/* ---- checkers of the tests (they record what they saw) ---- */

typedef struct seen {
    uint32_t calls;
    ag_lanchor a, b;
    bool swapped;
    ag_layout_attr attr_a, attr_b;
    bool report_out; /* report the output anchor of the pair */
} seen;

static seen g_seen;

static ag_status t_record(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    g_seen.calls++;
    g_seen.a = *a;
    g_seen.b = *b;
    g_seen.swapped = lc->swapped;
    g_seen.attr_a = lc->attr_a;
    g_seen.attr_b = lc->attr_b;
    assert_true(ag_layout_attrs_of(lc, a) & AG_LA_BIT(lc->attr_a));
    assert_true(ag_layout_attrs_of(lc, b) & AG_LA_BIT(lc->attr_b));
    const ag_lanchor *out = !a->is_input ? a : !b->is_input ? b : NULL;
    if (g_seen.report_out && out != NULL) {
        AG_TRY(ag_layout_conflict_at(lc, out, NULL));
        /* A second report of the same anchor keeps the first rule. */
        AG_TRY(ag_layout_conflict_at(lc, out, "layout: second"));
    }
    return AG_OK;
}

static void reset_seen(bool report)
{
    memset(&g_seen, 0, sizeof g_seen);
    g_seen.report_out = report;
}

/* ---- tests ---- */

static const char *cont3 = "graph g {\n"
                           "  x = Data() -> (f32[4]) <index = 0>\n"
                           "  y = Data() -> (f32[4]) <index = 1>\n"
                           "  r = Relu(x) -> (f32[4])\n"
                           "  a = ConcatC(r, y) -> (f32[8]) <continuous_input = true>\n"
                           "  b = ConcatC(r, y) -> (f32[8]) <continuous_input = true>\n"
                           "  c = ConcatC(r, y) -> (f32[8]) <continuous_input = true>\n"
                           "  out = NetOutput(a, b, c)\n"
                           "}\n";

static void test_as_symbol_once(void **state)
{
    (void)state;
    /* r's buffer feeds three continuous inputs: three CONT_IN pairs. */
    const ag_layout_checker_row every[] = {{AG_LA_CONT_IN, AG_LA_CONT_IN, t_record, false, "t_every"}};
    const ag_layout_checker_row once[] = {{AG_LA_CONT_IN, AG_LA_CONT_IN, t_record, true, "t_once"}};
    fixture fx;
    fx_open(&fx, cont3);
    reset_seen(false);
    fx_process(&fx, every, 1);
    assert_int_equal(g_seen.calls, 6); /* r's symbol (3 pairs) and y's (3 pairs) */
    reset_seen(false);
    fx_process(&fx, once, 1);
    assert_int_equal(g_seen.calls, 2); /* once per symbol */
    assert_int_equal(ag_report_isolation_count(fx.rep), 0);
    fx_close(&fx);
}

static void test_order_and_out_solving(void **state)
{
    (void)state;
    /* Row (CONT_IN, NORMAL_OUT): in r's symbol the producer's output comes
     * first, so the engine swaps the pair to match the row.  The checker
     * reports the output: one Identity after r feeds all three consumers,
     * named after the first consumer, with the attributes of notes 4.8. */
    const ag_layout_checker_row rows[] = {{AG_LA_CONT_IN, AG_LA_NORMAL_OUT, t_record, true, "t_out"}};
    fixture fx;
    fx_open(&fx, cont3);
    ag_graph *g = fx.g;
    ag_attrs *ra = ag_node_attrs(g, node(&fx, "r"));
    assert_int_equal(ag_attrs_set_string(g, ra, "_batch_label", "batch_1"), AG_OK);
    assert_int_equal(ag_attrs_set_bool(g, ra, "_is_connected_to_netoutput", true), AG_OK);
    ag_attrs *aa = ag_node_attrs(g, node(&fx, "a"));
    assert_int_equal(ag_attrs_set_string(g, aa, "_stream_label", "s1"), AG_OK);
    assert_int_equal(ag_attrs_set_bool(g, aa, "_is_connected_to_data", true), AG_OK);
    reset_seen(true);
    fx_process(&fx, rows, 1);
    assert_int_equal(g_seen.calls, 1); /* once for r's symbol; y's has no NORMAL_OUTPUT */
    assert_true(g_seen.swapped);
    assert_int_equal(g_seen.attr_a, AG_LA_CONT_IN);
    assert_int_equal(g_seen.attr_b, AG_LA_NORMAL_OUT);
    assert_true(g_seen.a.is_input);
    assert_false(g_seen.b.is_input);
    assert_int_equal(g_seen.b.node, node(&fx, "r"));

    const char *id = "identity_0_a_MemLayoutConflict_0";
    ag_node_id idn = node(&fx, id);
    assert_string_equal(src_name(&fx, "a", 0), id);
    assert_string_equal(src_name(&fx, "b", 0), id);
    assert_string_equal(src_name(&fx, "c", 0), id);
    assert_string_equal(src_name(&fx, id, 0), "r");
    const ag_attrs *ia = ag_node_attrs_c(g, idn);
    bool b = true;
    const char *s = NULL;
    assert_true(ag_attrs_get_bool(ia, "no_need_constant_folding", &b) && !b);
    assert_true(ag_attrs_get_bool(ia, "_cannot_be_deleted", &b) && b);
    assert_true(ag_attrs_get_string(ia, "_batch_label", &s) && strcmp(s, "batch_1") == 0);
    assert_true(ag_attrs_get_string(ia, "_stream_label", &s) && strcmp(s, "s1") == 0);
    assert_true(ag_attrs_get_bool(ia, "_is_connected_to_netoutput", &b) && b);
    assert_true(ag_attrs_get_bool(ia, "_is_connected_to_data", &b) && b);
    assert_null(ag_attrs_find(ag_node_attrs_c(g, node(&fx, "r")), "_is_connected_to_netoutput"));
    assert_null(ag_attrs_find(ag_node_attrs_c(g, node(&fx, "a")), "_is_connected_to_data"));

    /* One isolation per consumer moved, all with the first rule. */
    assert_int_equal(ag_report_isolation_count(fx.rep), 3);
    for (uint32_t k = 0; k < 3; k++) {
        const ag_isolation *iso = ag_report_isolation_at(fx.rep, k);
        assert_string_equal(iso->pass, "layout_conflict");
        assert_string_equal(iso->rule, "layout: t_out");
        assert_string_equal(iso->node, id);
        assert_string_equal(iso->producer, "r:0");
    }
    fx_close(&fx);
}

static void test_already_isolated(void **state)
{
    (void)state;
    /* The checker reports r's output, whose only consumer is a copy: it is
     * already isolated and nothing is inserted. */
    const ag_layout_checker_row rows[] = {{AG_LA_NORMAL_OUT, AG_LA_NORMAL_IN, t_record, false, "t_iso"}};
    fixture fx;
    fx_open(&fx, "graph g {\n"
                 "  x = Data() -> (f32[4]) <index = 0>\n"
                 "  r = Relu(x) -> (f32[4])\n"
                 "  i = Identity(r) -> (f32[4])\n"
                 "  out = NetOutput(i)\n"
                 "}\n");
    reset_seen(true);
    fx_process(&fx, rows, 1);
    assert_int_equal(g_seen.calls, 1);
    assert_int_equal(g_seen.a.node, node(&fx, "r"));
    assert_int_equal(ag_report_isolation_count(fx.rep), 0);
    assert_string_equal(src_name(&fx, "i", 0), "r");
    fx_close(&fx);
}

static void test_ref_skip(void **state)
{
    (void)state;
    /* k's output aliases the RefData v by name: the pair (v, k) of outputs is
     * skipped; the Assign's output (ref of its input, also p2p) is not. */
    const ag_layout_checker_row rows[] = {{AG_LA_USER_IN, AG_LA_RTS_OUT, t_record, false, "t_ref"}};
    fixture fx;
    fx_open(&fx, "graph g {\n"
                 "  v = RefData() -> (f32[4]) <index = 0>\n"
                 "  y = Data() -> (f32[4]) <index = 1>\n"
                 "  k = Neg(y) -> (f32[4] <ref_var_src_var_name = \"v\">) <_output_memory_type = [1]>\n"
                 "  as = Assign(v, y) -> (f32[4]) <_output_memory_type = [1]>\n"
                 "  out = NetOutput(k, as)\n"
                 "}\n");
    reset_seen(false);
    fx_process(&fx, rows, 1);
    assert_int_equal(g_seen.calls, 1);
    assert_int_equal(g_seen.b.node, node(&fx, "as"));
    assert_false(g_seen.swapped);
    fx_close(&fx);
}

static void test_absolute_side_choice(void **state)
{
    (void)state;
    /* USER_OUT x RTS_IN, both inputs: the lower topological position (p)
     * unless its output is the same buffer (v, a view): then the graph
     * output.  IMMUTABLE_OUT x RTS_IN: the input side. */
    fixture fx;
    fx_open(&fx, "graph g {\n"
                 "  x = Data() -> (f32[4]) <index = 0>\n"
                 "  a = Relu(x) -> (f32[4])\n"
                 "  p = Neg(a) -> (f32[4]) <_input_memory_type = [1]>\n"
                 "  b = Abs(x) -> (f32[4])\n"
                 "  v = Squeeze(b) -> (f32[4]) <_input_memory_type = [1]>\n"
                 "  q = Exp(v) -> (f32[4])\n"
                 "  c = Const() -> (f32[4] = {1, 2, 3, 4})\n"
                 "  w = Add(q, c) -> (f32[4]) <_input_memory_type = [0, 1]>\n"
                 "  out = NetOutput(a, p, b, w)\n"
                 "}\n");
    fx_process(&fx, NULL, 0);
    assert_string_equal(src_name(&fx, "p", 0), "identity_0_p_MemLayoutConflict_0");
    assert_string_equal(src_name(&fx, "out", 0), "a");
    assert_string_equal(src_name(&fx, "v", 0), "b");
    assert_string_equal(src_name(&fx, "out", 2), "identity_2_out_MemLayoutConflict_1");
    assert_string_equal(src_name(&fx, "w", 1), "identity_1_w_MemLayoutConflict_2");
    assert_int_equal(ag_report_isolation_count(fx.rep), 3);
    assert_string_equal(ag_report_isolation_at(fx.rep, 0)->rule,
                        "layout: absolute USER_MEMORY_OUTPUT x RTS_SPECIAL_TYPE_INPUT");
    assert_string_equal(ag_report_isolation_at(fx.rep, 2)->rule,
                        "layout: absolute IMMUTABLE_ADDRESS_OUTPUT x RTS_SPECIAL_TYPE_INPUT");
    /* The pass (same absolute pairs) adds nothing the second time. */
    fx_pass(&fx);
    assert_int_equal(ag_report_isolation_count(fx.rep), 3);
    fx_close(&fx);
}

static void test_unknown_shape_skipped(void **state)
{
    (void)state;
    fixture fx;
    fx_open(&fx, "graph g {\n"
                 "  x = Data() -> (f32[4]) <index = 0>\n"
                 "  p = Neg(x) -> (f32[4]) <_input_memory_type = [1]>\n"
                 "  out = NetOutput(p)\n"
                 "}\n");
    ag_tensor_desc *d = ag_node_input_desc(fx.g, node(&fx, "p"), 0);
    assert_int_equal(ag_desc_set_shape(fx.g, d, AG_RANK_UNKNOWN, NULL), AG_OK);
    fx_process(&fx, NULL, 0);
    assert_int_equal(ag_report_isolation_count(fx.rep), 0);
    assert_string_equal(src_name(&fx, "p", 0), "x");
    fx_close(&fx);
}

static void expect_table_error(const ag_layout_checker_row *rows, uint32_t nrows, const char *needle)
{
    fixture fx;
    fx_open(&fx, cont3);
    ag_pass_env env = {fx.g, fx.ops, fx.rep};
    assert_int_equal(ag_layout_process(&env, AG_ROOT, &default_info, rows, nrows), AG_EINVAL);
    assert_errmsg(fx.ctx, needle);
    fx_close(&fx);
}

static void test_table_validation(void **state)
{
    (void)state;
    const ag_layout_checker_row dup[] = {{AG_LA_CONT_IN, AG_LA_NORMAL_OUT, t_record, false, "one"},
                                         {AG_LA_NORMAL_OUT, AG_LA_CONT_IN, t_record, false, "two"}};
    expect_table_error(dup, 2, "row 1 (two): the pair is registered twice");
    const ag_layout_checker_row abs[] = {{AG_LA_CONT_IN, AG_LA_IMMUTABLE_OUT, t_record, false, "abs"}};
    expect_table_error(abs, 1, "row 0 (abs): the pair is an absolute conflict pair");
    const ag_layout_checker_row ref[] = {{AG_LA_REF_OUT, AG_LA_CONT_IN, t_record, false, "ref"}};
    expect_table_error(ref, 1, "row 0 (ref): the pair is an absolute no-conflict pair");
    const ag_layout_checker_row nocon[] = {{AG_LA_USER_OUT, AG_LA_USER_IN, t_record, false, "nc"}};
    expect_table_error(nocon, 1, "row 0 (nc): the pair is an absolute no-conflict pair");
    /* The registered table itself is valid. */
    fixture fx;
    fx_open(&fx, cont3);
    fx_process(&fx, ag_layout_checker_rows, ag_layout_checker_nrows);
    fx_close(&fx);
}

static void test_graph_info(void **state)
{
    (void)state;
    fixture fx;
    fx_open(&fx, "graph g {\n"
                 "  x = Data() -> (f32[4]) <index = 0>\n"
                 "  r = Relu(x) -> (f32[4]) <_is_unknown_shape = true>\n"
                 "  call = PartitionedCall(x) -> (f32[4]) {\n"
                 "    graph known {\n"
                 "      kd = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                 "      kout = NetOutput(kd <_parent_node_index = 0>)\n"
                 "    }\n"
                 "  }\n"
                 "  out = NetOutput(r, call) <_physical_memory_refreshable = true, "
                 "_user_input_nopadding_continuous_output = false>\n"
                 "}\n");
    ag_pass_env env = {fx.g, fx.ops, fx.rep};
    ag_layout_info info;
    ag_sub_id known = ag_graph_find_sub(fx.g, "known");
    assert_false(ag_layout_sub_static(&env, AG_ROOT));
    assert_true(ag_layout_sub_static(&env, known));
    ag_layout_info_of(&env, known, &info);
    assert_false(info.root_static);
    assert_true(info.fm_refreshable); /* known graph under a dynamic root */
    assert_true(info.phys_refreshable);
    assert_false(info.user_in_nopad_cont_out_supported);
    ag_layout_info_of(&env, AG_ROOT, &info);
    assert_false(info.fm_refreshable);
    assert_int_equal(strcmp(ag_layout_attr_name(AG_LA_UNREFRESH_IN), "UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT"), 0);
    assert_null(ag_layout_attr_name(AG_LA_COUNT_));
    fx_close(&fx);
}

static void test_helpers(void **state)
{
    (void)state;
    ag_port l[] = {{1, 0}, {1, 1}, {1, 2}};
    ag_port same[] = {{1, 0}, {1, 1}, {1, 2}};
    ag_port head[] = {{1, 0}, {1, 1}};
    ag_port shifted[] = {{9, 0}, {1, 0}, {1, 1}};
    ag_port reversed[] = {{1, 1}, {1, 0}};
    ag_port gap[] = {{1, 0}, {1, 2}};
    ag_port none[] = {{7, 0}};
    assert_true(ag_layout_same_or_partial_same(l, 3, same, 3));
    assert_true(ag_layout_same_or_partial_same(l, 3, head, 2));
    assert_true(ag_layout_same_or_partial_same(head, 2, l, 3));
    assert_true(ag_layout_same_or_partial_same(l, 3, shifted, 3));
    assert_false(ag_layout_same_or_partial_same(l, 3, reversed, 2));
    assert_false(ag_layout_same_or_partial_same(l, 3, gap, 2));
    assert_false(ag_layout_same_or_partial_same(l, 3, none, 1));
}

static ag_status t_nopad(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    bool conflict = false;
    AG_TRY(ag_layout_nopad_cont_conflict(lc, a->node, b->node, &conflict));
    g_seen.calls += conflict;
    /* Real producers: through the views back to one buffer. */
    assert_false(ag_layout_all_real_inputs_same(lc, a->node));
    return AG_OK;
}

static void test_nopad_helper(void **state)
{
    (void)state;
    /* pa takes (s0, s1, s2), pb (s1, s2): a run inside pa, no conflict; pc
     * takes (s2, t): a partial overlap, conflict with both. */
    const ag_layout_checker_row rows[] = {{AG_LA_NOPAD_CONT_IN, AG_LA_NOPAD_CONT_IN, t_nopad, false, "t_nopad"}};
    fixture fx;
    fx_open(&fx, "graph g {\n"
                 "  x = Data() -> (f32[6]) <index = 0>\n"
                 "  s = Split3(x) -> (f32[2], f32[2], f32[2])\n"
                 "  t = Neg(x) -> (f32[6])\n"
                 "  pa = Cat(s, s:1, s:2) -> (f32[6]) <_no_padding_continuous_input = true>\n"
                 "  pb = Cat(s:1, s:2) -> (f32[4]) <_no_padding_continuous_input = true>\n"
                 "  pc = Cat(s:2, t) -> (f32[8]) <_no_padding_continuous_input = true>\n"
                 "  out = NetOutput(pa, pb, pc)\n"
                 "}\n");
    reset_seen(false);
    fx_process(&fx, rows, 1);
    /* s:1 symbol: (pa, pb) no conflict; s:2 symbol: (pa, pb) no, (pa, pc)
     * and (pb, pc) conflict. */
    assert_int_equal(g_seen.calls, 2);
    fx_close(&fx);
}

static const char *oom_graph = "graph g {\n"
                               "  x = Data() -> (f32[4]) <index = 0>\n"
                               "  c = Const() -> (f32[4] = {1, 2, 3, 4})\n"
                               "  r = Relu(x) -> (f32[4])\n"
                               "  s = StreamSwitch(x, r) -> (f32[4])\n"
                               "  p = Neg(c) -> (f32[4]) <_input_memory_type = [1]>\n"
                               "  a = ConcatC(r, p) -> (f32[8]) <continuous_input = true>\n"
                               "  b = ConcatC(r, p) -> (f32[8]) <continuous_input = true>\n"
                               "  out = NetOutput(s, p, a, b)\n"
                               "}\n";

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    const ag_layout_checker_row rows[] = {{AG_LA_NORMAL_OUT, AG_LA_CONT_IN, t_record, true, "t_out"}};
    ag_graph *g = NULL;
    ag_ops *ops = NULL;
    ag_report *rep = NULL;
    ag_status st = agtest_pass_inputs(ctx, oom_graph, &g, &ops, &rep);
    if (st == AG_OK) {
        ag_pass_env env = {g, ops, rep};
        reset_seen(true);
        st = ag_layout_process(&env, AG_ROOT, &default_info, rows, 1);
        if (st == AG_OK)
            st = ag_pass_layout_conflict(&env);
        /* 6 from the test table; 6 from the full pass: c -> p (absolute
         * IMMUTABLE x RTS_IN), x -> s (absolute USER_IN x UNREFRESH_IN), p and
         * r shared by two continuous inputs (b:1, b:0), p returned to the
         * user next to continuous readers (out:1), s returned to the user
         * while unrefreshable (out:0). */
        if (st == AG_OK)
            assert_int_equal(ag_report_isolation_count(rep), 12);
    }
    ag_report_destroy(rep);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    return st;
}

static void test_oom(void **state)
{
    (void)state;
    assert_true(AG_TEST_OOM_SWEEP(oom_body, NULL) > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_as_symbol_once),        cmocka_unit_test(test_order_and_out_solving),
        cmocka_unit_test(test_ref_skip),              cmocka_unit_test(test_absolute_side_choice),
        cmocka_unit_test(test_unknown_shape_skipped), cmocka_unit_test(test_table_validation),
        cmocka_unit_test(test_graph_info),            cmocka_unit_test(test_helpers),
        cmocka_unit_test(test_nopad_helper),          cmocka_unit_test(test_already_isolated),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
