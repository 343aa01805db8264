/* Unit tests of the user-memory and unrefreshable-address layout checkers:
 * every registered row of those families, with the two anchors in both list
 * orders, once where it isolates (and which anchor gets the Identity) and
 * once where it accepts; the Assign, same-buffer, direct-output and variable
 * exemptions; the whole checker table's consistency; allocation failures. */
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
        fail_msg("parse: %s\n%s", ag_ctx_errmsg(fx->ctx), text);
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

static const ag_layout_checker_row *find_row(ag_layout_attr a, ag_layout_attr b)
{
    for (uint32_t r = 0; r < ag_layout_checker_nrows; r++) {
        const ag_layout_checker_row *row = &ag_layout_checker_rows[r];
        if ((row->attr_a == a && row->attr_b == b) || (row->attr_a == b && row->attr_b == a))
            return row;
    }
    return NULL;
}

/* The registered checker of one row, called through a wrapper that notes
 * which list order the engine saw. */
static ag_layout_checker_fn g_real;
static bool g_saw[2];
static uint32_t g_calls;

static ag_status t_wrap(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    g_calls++;
    g_saw[lc->swapped ? 1 : 0] = true;
    assert_true(ag_layout_attrs_of(lc, a) & AG_LA_BIT(lc->attr_a));
    assert_true(ag_layout_attrs_of(lc, b) & AG_LA_BIT(lc->attr_b));
    return g_real(lc, a, b);
}

/* Runs the engine on fx's graph with the single registered row for (a, b). */
static void run_row(fixture *fx, ag_layout_attr a, ag_layout_attr b, const ag_layout_info *info)
{
    const ag_layout_checker_row *row = find_row(a, b);
    if (row == NULL)
        fail_msg("no registered row for %s x %s", ag_layout_attr_name(a), ag_layout_attr_name(b));
    ag_layout_checker_row one = *row;
    g_real = row->fn;
    one.fn = t_wrap;
    g_saw[0] = g_saw[1] = false;
    g_calls = 0;
    ag_pass_env env = {fx->g, fx->ops, fx->rep};
    if (ag_layout_process(&env, AG_ROOT, info, &one, 1) != AG_OK)
        fail_msg("layout: %s", ag_ctx_errmsg(fx->ctx));
    assert_int_equal(ag_graph_verify(fx->g), AG_OK);
}

static ag_node_id node(const fixture *fx, const char *name)
{
    return agtest_find(fx->g, AG_ROOT, name);
}

static bool is_identity(const fixture *fx, ag_node_id n)
{
    return n != AG_NONE && strcmp(ag_node_type(fx->g, n), "Identity") == 0;
}

static void dump_isolations(const fixture *fx)
{
    for (uint32_t k = 0; k < ag_report_isolation_count(fx->rep); k++) {
        const ag_isolation *iso = ag_report_isolation_at(fx->rep, k);
        print_message("  isolation: rule=\"%s\" node=%s producer=%s consumer=%s\n", iso->rule, iso->node,
                      iso->producer, iso->consumer);
    }
}

/* Isolations made under rule (absolute pairs always run besides the row). */
static uint32_t count_rule(const fixture *fx, const char *rule, const ag_isolation **last)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < ag_report_isolation_count(fx->rep); k++) {
        const ag_isolation *iso = ag_report_isolation_at(fx->rep, k);
        if (strcmp(iso->rule, rule) == 0) {
            n++;
            if (last)
                *last = iso;
        }
    }
    return n;
}

/* One isolation under rule: an Identity before input 0 of `who` (is_input)
 * or after its output 0 for all consumers. */
static void assert_isolated(const fixture *fx, const char *rule, const char *who, bool is_input)
{
    char want[64];
    const ag_isolation *iso = NULL;
    snprintf(want, sizeof want, "%s:0", who);
    ag_node_id n = node(fx, who);
    /* An Identity after an output is recorded once per consumer it took. */
    uint32_t want_n = is_input ? 1 : 0;
    if (!is_input) {
        ag_node_id id = ag_node_output_consumer(fx->g, n, 0, 0).node;
        assert_int_equal(ag_node_output_nconsumers(fx->g, n, 0), 1);
        assert_true(is_identity(fx, id));
        for (uint32_t o = 0; o < ag_node_num_outputs(fx->g, id); o++)
            want_n += ag_node_output_nconsumers(fx->g, id, o);
    } else {
        assert_true(is_identity(fx, ag_node_input_src(fx->g, n, 0).node));
    }
    if (count_rule(fx, rule, &iso) != want_n) {
        dump_isolations(fx);
        fail_msg("%s: %u isolations, want %u at %s", rule, (unsigned)count_rule(fx, rule, NULL), (unsigned)want_n,
                 want);
    }
    for (uint32_t k = 0; k < ag_report_isolation_count(fx->rep); k++) {
        iso = ag_report_isolation_at(fx->rep, k);
        if (strcmp(iso->rule, rule) != 0)
            continue;
        assert_string_equal(iso->kind, "Identity");
        assert_string_equal(is_input ? iso->consumer : iso->producer, want);
    }
}

static void assert_not_isolated(const fixture *fx, const char *rule)
{
    if (count_rule(fx, rule, NULL) != 0) {
        dump_isolations(fx);
        fail_msg("%s isolated something", rule);
    }
}

/* ---- the generic pair graphs ----
 * Each attribute is one role: a statement that makes node '@' carry the
 * attribute on anchor 0 and leaves '@' (creators) or "@b" (readers) as the
 * role's buffer.  The two buffers are then joined by a Merge; the first one
 * gets three extra readers so that its anchor list survives the union and
 * comes first.  Readers' buffers come from a Reshape with no input (its
 * unconnected input opens the symbol without an out-anchor attribute). */

typedef struct role {
    ag_layout_attr attr;
    bool is_input;
    const char *text;
} role;

static const role roles[] = {
    {AG_LA_USER_IN, false, "@ = Data() -> (f32[4]) <index = 7>\n"},
    {AG_LA_IMMUTABLE_OUT, false, "@ = Const() -> (f32[4] = {1, 2, 3, 4})\n"},
    {AG_LA_UNREFRESH_OUT, false, "@ = StreamSwitch(-) -> (f32[4])\n"},
    {AG_LA_CONT_OUT, false, "@ = SplitC(d) -> (f32[4], f32[4]) <continuous_output = true>\n"},
    {AG_LA_NOPAD_CONT_OUT, false, "@ = SplitN(d) -> (f32[4], f32[4]) <_no_padding_continuous_output = true>\n"},
    {AG_LA_RTS_OUT, false, "@ = Relu(d) -> (f32[4]) <_output_memory_type = [1]>\n"},
    {AG_LA_NORMAL_OUT, false, "@ = Relu(d) -> (f32[4])\n"},
    {AG_LA_USER_OUT, true, "@b = Reshape(-) -> (f32[4])\n@ = NetOutput(@b)\n"},
    {AG_LA_UNREFRESH_IN, true, "@b = Reshape(-) -> (f32[4])\n@ = StreamSwitch(@b) -> (f32[4])\n"},
    {AG_LA_CONT_IN, true, "@b = Reshape(-) -> (f32[4])\n@ = ConcatC(@b, y) -> (f32[8]) <continuous_input = true>\n"},
    {AG_LA_NOPAD_CONT_IN, true,
     "@b = Reshape(-) -> (f32[4])\n@ = ConcatN(@b, y) -> (f32[8]) <_no_padding_continuous_input = true>\n"},
    {AG_LA_RTS_IN, true, "@b = Reshape(-) -> (f32[4])\n@ = Relu(@b) -> (f32[4]) <_input_memory_type = [1]>\n"},
    {AG_LA_NORMAL_IN, true, "@b = Reshape(-) -> (f32[4])\n@ = Relu(@b) -> (f32[4])\n"},
};

static const role *role_of(ag_layout_attr a)
{
    for (size_t k = 0; k < sizeof roles / sizeof roles[0]; k++)
        if (roles[k].attr == a)
            return &roles[k];
    fail_msg("no role for %s", ag_layout_attr_name(a));
    return NULL;
}

/* Appends text with '@' replaced by name. */
static void put_role(char *buf, size_t cap, const char *text, const char *name)
{
    size_t len = strlen(buf);
    for (const char *p = text; *p && len + 8 < cap; p++) {
        if (*p == '@') {
            len += (size_t)snprintf(buf + len, cap - len, "%s", name);
        } else {
            buf[len++] = *p;
            buf[len] = '\0';
        }
    }
}

static void pair_graph(char *buf, size_t cap, const role *first, const char *fname, const role *second,
                       const char *sname)
{
    char fb[16], sb[16];
    snprintf(fb, sizeof fb, first->is_input ? "%sb" : "%s", fname);
    snprintf(sb, sizeof sb, second->is_input ? "%sb" : "%s", sname);
    snprintf(buf, cap, "graph g {\n  d = Data() -> (f32[4]) <index = 0>\n  y = Relu(d) -> (f32[4])\n");
    put_role(buf, cap, first->text, fname);
    put_role(buf, cap, second->text, sname);
    size_t len = strlen(buf);
    snprintf(buf + len, cap - len,
             "p0 = Neg(%s) -> (f32[4])\np1 = Neg(%s) -> (f32[4])\np2 = Neg(%s) -> (f32[4])\n"
             "m = Merge(%s, %s) -> (f32[4])\n}\n",
             fb, fb, fb, fb, sb);
}

enum { NONE, SIDE_A, SIDE_B };

typedef struct pcase {
    ag_layout_attr a, b; /* the row's attributes, in its order */
    ag_layout_info info;
    int expect;          /* NONE, or the side whose anchor gets the Identity */
} pcase;

/*                                 root_static fm    phys   user_in_nopad */
#define DFLT {true, false, false, true}
#define FM {true, true, false, true}
#define PHYS {true, false, true, true}
#define DYN {false, false, false, true}
#define NOSUP {true, false, false, false}
#define UNREF_IN_CASES(x)                                                                                     \
    {AG_LA_UNREFRESH_IN, AG_LA_##x, FM, SIDE_A}, {AG_LA_UNREFRESH_IN, AG_LA_##x, PHYS, SIDE_A},                \
        {AG_LA_UNREFRESH_IN, AG_LA_##x, DFLT, NONE}
#define UNREF_OUT_CASES(x)                                                                                    \
    {AG_LA_UNREFRESH_OUT, AG_LA_##x, FM, SIDE_A}, {AG_LA_UNREFRESH_OUT, AG_LA_##x, PHYS, SIDE_A},              \
        {AG_LA_UNREFRESH_OUT, AG_LA_##x, DFLT, NONE}

static const pcase pcases[] = {
    UNREF_IN_CASES(IMMUTABLE_OUT),
    UNREF_IN_CASES(UNREFRESH_IN),
    UNREF_IN_CASES(UNREFRESH_OUT),
    UNREF_IN_CASES(CONT_IN),
    UNREF_IN_CASES(CONT_OUT),
    UNREF_IN_CASES(NOPAD_CONT_IN),
    UNREF_IN_CASES(NOPAD_CONT_OUT),
    UNREF_IN_CASES(RTS_IN),
    UNREF_IN_CASES(RTS_OUT),
    UNREF_IN_CASES(NORMAL_IN),
    UNREF_IN_CASES(NORMAL_OUT),
    UNREF_OUT_CASES(IMMUTABLE_OUT),
    UNREF_OUT_CASES(UNREFRESH_OUT),
    UNREF_OUT_CASES(CONT_IN),
    UNREF_OUT_CASES(CONT_OUT),
    UNREF_OUT_CASES(NOPAD_CONT_IN),
    UNREF_OUT_CASES(NOPAD_CONT_OUT),
    UNREF_OUT_CASES(RTS_OUT),
    UNREF_OUT_CASES(RTS_IN),
    UNREF_OUT_CASES(NORMAL_IN),
    UNREF_OUT_CASES(NORMAL_OUT),
    {AG_LA_USER_IN, AG_LA_CONT_OUT, DFLT, SIDE_A},
    {AG_LA_USER_IN, AG_LA_CONT_IN, DFLT, SIDE_A},
    {AG_LA_USER_IN, AG_LA_NOPAD_CONT_IN, DFLT, SIDE_A},
    {AG_LA_USER_IN, AG_LA_NOPAD_CONT_OUT, NOSUP, SIDE_A},
    {AG_LA_USER_IN, AG_LA_NOPAD_CONT_OUT, DFLT, NONE},
    {AG_LA_USER_IN, AG_LA_UNREFRESH_OUT, DFLT, SIDE_A},
    {AG_LA_USER_IN, AG_LA_UNREFRESH_OUT, FM, SIDE_B},
    {AG_LA_USER_IN, AG_LA_UNREFRESH_OUT, PHYS, SIDE_B},
    {AG_LA_USER_IN, AG_LA_RTS_OUT, DFLT, SIDE_A},
    {AG_LA_USER_OUT, AG_LA_CONT_IN, DFLT, SIDE_A},
    {AG_LA_USER_OUT, AG_LA_NOPAD_CONT_IN, DFLT, SIDE_A},
    {AG_LA_USER_OUT, AG_LA_IMMUTABLE_OUT, DFLT, SIDE_A},
    {AG_LA_USER_OUT, AG_LA_IMMUTABLE_OUT, DYN, NONE},
    {AG_LA_USER_OUT, AG_LA_UNREFRESH_IN, DFLT, SIDE_A},
    {AG_LA_USER_OUT, AG_LA_UNREFRESH_IN, FM, SIDE_B},
    {AG_LA_USER_OUT, AG_LA_UNREFRESH_OUT, DFLT, SIDE_A},
    {AG_LA_USER_OUT, AG_LA_UNREFRESH_OUT, PHYS, SIDE_B},
};

static void test_pairs_both_orders(void **state)
{
    (void)state;
    char text[2048];
    for (size_t k = 0; k < sizeof pcases / sizeof pcases[0]; k++) {
        const pcase *c = &pcases[k];
        const role *ra = role_of(c->a), *rb = role_of(c->b);
        const ag_layout_checker_row *row = find_row(c->a, c->b);
        assert_non_null(row);
        char rule[128];
        snprintf(rule, sizeof rule, "layout: %s", row->name);
        for (int order = 0; order < 2; order++) {
            fixture fx;
            if (order == 0)
                pair_graph(text, sizeof text, ra, "na", rb, "nb");
            else
                pair_graph(text, sizeof text, rb, "nb", ra, "na");
            fx_open(&fx, text);
            run_row(&fx, c->a, c->b, &c->info);
            print_message("case %u order %d: %s x %s\n", (unsigned)k, order, ag_layout_attr_name(c->a),
                          ag_layout_attr_name(c->b));
            assert_true(g_calls > 0);
            /* The engine saw the pair in the order the graph lists it (a
             * same-attribute pair is never swapped). */
            if (c->a != c->b)
                assert_true(g_saw[order]);
            if (c->expect == NONE) {
                assert_not_isolated(&fx, rule);
            } else if (c->a == c->b) {
                /* Same attribute: the anchor listed first. */
                assert_isolated(&fx, rule, order == 0 ? "na" : "nb", ra->is_input);
            } else {
                const role *r = c->expect == SIDE_A ? ra : rb;
                assert_isolated(&fx, rule, c->expect == SIDE_A ? "na" : "nb", r->is_input);
            }
            /* A second run adds nothing. */
            uint32_t before = ag_report_isolation_count(fx.rep);
            run_row(&fx, c->a, c->b, &c->info);
            assert_int_equal(ag_report_isolation_count(fx.rep), before);
            fx_close(&fx);
        }
    }
}

/* ---- exemptions, on graphs of their own ---- */

/* An operator whose output alone cannot have its address refreshed. */
static const char *uout_ops = "UOut : out*=unrefreshable\n";

typedef struct scase {
    ag_layout_attr a, b;
    ag_layout_info info;
    const char *text;
    const char *who; /* NULL: nothing isolated */
    bool is_input;
} scase;

static const scase scases[] = {
    /* RefData -> Assign -> concat: the Identity goes after the Assign, so
     * the variable is still written (AssignVar rule). */
    {AG_LA_USER_IN, AG_LA_CONT_IN, DFLT,
     "graph g {\n  v = RefData() -> (f32[4]) <index = 0>\n  d = Data() -> (f32[4]) <index = 1>\n"
     "  y = Relu(d) -> (f32[4])\n  as = Assign(v, d) -> (f32[4])\n"
     "  c = ConcatC(as, y) -> (f32[8]) <continuous_input = true>\n  out = NetOutput(c)\n}\n",
     "c", true},
    {AG_LA_USER_IN, AG_LA_CONT_OUT, DFLT,
     "graph g {\n  v = RefData() -> (f32[4]) <index = 0>\n  d = Data() -> (f32[4]) <index = 1>\n"
     "  as = Assign(v, d) -> (f32[4])\n"
     "  c = SplitC(as) -> (f32[4] <reuse_input = true>, f32[4]) <continuous_output = true>\n"
     "  out = NetOutput(c, c:1)\n}\n",
     "c", true},
    {AG_LA_USER_IN, AG_LA_RTS_OUT, DFLT,
     "graph g {\n  v = RefData() -> (f32[4]) <index = 0>\n  d = Data() -> (f32[4]) <index = 1>\n"
     "  as = Assign(v, d) -> (f32[4])\n"
     "  s = Relu(as) -> (f32[4] <reuse_input = true>) <_output_memory_type = [1]>\n  out = NetOutput(s)\n}\n",
     "s", true},
    {AG_LA_USER_IN, AG_LA_UNREFRESH_OUT, FM,
     "graph g {\n  v = RefData() -> (f32[4]) <index = 0>\n  d = Data() -> (f32[4]) <index = 1>\n"
     "  as = Assign(v, d) -> (f32[4])\n"
     "  s = UOut(as) -> (f32[4] <reuse_input = true>)\n  out = NetOutput(s)\n}\n",
     "s", true},
    /* Without the Assign the same user-input x continuous-output pair copies
     * the graph input. */
    {AG_LA_USER_IN, AG_LA_CONT_OUT, DFLT,
     "graph g {\n  v = Data() -> (f32[4]) <index = 0>\n"
     "  c = SplitC(v) -> (f32[4] <reuse_input = true>, f32[4]) <continuous_output = true>\n"
     "  out = NetOutput(c, c:1)\n}\n",
     "v", false},
    /* Every input of the no-padding concat is one buffer: nothing to move. */
    {AG_LA_USER_IN, AG_LA_NOPAD_CONT_IN, DFLT,
     "graph g {\n  v = Data() -> (f32[4]) <index = 0>\n  s1 = Reshape(v) -> (f32[4])\n"
     "  s2 = Reshape(v) -> (f32[4])\n"
     "  c = ConcatN(s1, s2) -> (f32[8]) <_no_padding_continuous_input = true>\n  out = NetOutput(c)\n}\n",
     NULL, false},
    /* Graph outputs read straight from the concat-like node. */
    {AG_LA_USER_OUT, AG_LA_NOPAD_CONT_IN, DFLT,
     "graph g {\n  d = Data() -> (f32[4]) <index = 0>\n  e = Data() -> (f32[4]) <index = 1>\n"
     "  x = Relu(d) -> (f32[4])\n  z = Relu(e) -> (f32[4])\n"
     "  c = ConcatN(x, z) -> (f32[8]) <_no_padding_continuous_input = true, _output_reuse_input = true>\n"
     "  out = NetOutput(c)\n}\n",
     NULL, false},
    {AG_LA_USER_OUT, AG_LA_CONT_IN, DFLT,
     "graph g {\n  d = Data() -> (f32[4]) <index = 0>\n  e = Data() -> (f32[4]) <index = 1>\n"
     "  x = Relu(d) -> (f32[4])\n  z = Relu(e) -> (f32[4])\n"
     "  c = ConcatC(x, z) -> (f32[8] <reuse_input = true>) <continuous_input = true>\n"
     "  out = NetOutput(c)\n}\n",
     NULL, false},
    /* The same buffer also returned by itself: that output gets the copy. */
    {AG_LA_USER_OUT, AG_LA_CONT_IN, DFLT,
     "graph g {\n  d = Data() -> (f32[4]) <index = 0>\n  e = Data() -> (f32[4]) <index = 1>\n"
     "  x = Relu(d) -> (f32[4])\n  z = Relu(e) -> (f32[4])\n"
     "  c = ConcatC(x, z) -> (f32[8]) <continuous_input = true>\n"
     "  out = NetOutput(x)\n  k = Neg(c) -> (f32[8])\n}\n",
     "out", true},
    /* A variable returned as a graph output is exempt; a constant is not. */
    {AG_LA_USER_OUT, AG_LA_IMMUTABLE_OUT, DFLT, "graph g {\n  v = Variable() -> (f32[4])\n  out = NetOutput(v)\n}\n",
     NULL, false},
    {AG_LA_USER_OUT, AG_LA_IMMUTABLE_OUT, DFLT,
     "graph g {\n  v = Const() -> (f32[4] = {1, 2, 3, 4})\n  out = NetOutput(v)\n}\n", "out", true},
    /* An HCCL input is unrefreshable while the feature map is not; physical
     * refresh alone matters only next to a fixed-address node. */
    {AG_LA_UNREFRESH_IN, AG_LA_NORMAL_OUT, PHYS,
     "graph g {\n  d = Data() -> (f32[4]) <index = 0>\n  r = Relu(d) -> (f32[4])\n"
     "  h = HcomAllReduce(r) -> (f32[4])\n  out = NetOutput(h)\n}\n",
     NULL, false},
    {AG_LA_UNREFRESH_IN, AG_LA_NORMAL_OUT, PHYS,
     "graph g {\n  d = Data() -> (f32[4]) <index = 0>\n  r = Relu(d) -> (f32[4])\n"
     "  h = HcomAllReduce(r) -> (f32[4])\n  s = StreamSwitch(r) -> (f32[4])\n  out = NetOutput(h, s)\n}\n",
     "s", true},
    /* With a refreshable feature map an HCCL node is refreshable. */
    {AG_LA_UNREFRESH_IN, AG_LA_NORMAL_OUT, FM,
     "graph g {\n  d = Data() -> (f32[4]) <index = 0>\n  r = Relu(d) -> (f32[4])\n"
     "  h = HcomAllReduce(r) -> (f32[4])\n  out = NetOutput(h)\n}\n",
     NULL, false},
};

static void test_special_cases(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof scases / sizeof scases[0]; k++) {
        const scase *c = &scases[k];
        fixture fx;
        print_message("special case %u\n", (unsigned)k);
        fx_open(&fx, c->text);
        assert_int_equal(ag_ops_load_text(fx.ops, uout_ops, strlen(uout_ops), "uout.ops"), AG_OK);
        run_row(&fx, c->a, c->b, &c->info);
        char rule[128];
        snprintf(rule, sizeof rule, "layout: %s", find_row(c->a, c->b)->name);
        if (c->who == NULL) {
            assert_not_isolated(&fx, rule);
        } else {
            assert_isolated(&fx, rule, c->who, c->is_input);
        }
        fx_close(&fx);
    }
}

/* The AssignVar rule through the registered pass: the graph option on the
 * root NetOutput, the whole table, and the Assign still writing v. */
static void test_pass_graph_options(void **state)
{
    (void)state;
    fixture fx;
    fx_open(&fx, "graph g {\n  d = Data() -> (f32[4]) <index = 0>\n  r = Relu(d) -> (f32[4])\n"
                 "  s = StreamSwitch(r) -> (f32[4])\n  k = Neg(r) -> (f32[4])\n"
                 "  out = NetOutput(s, k) <_feature_map_refreshable = true>\n}\n");
    ag_pass_env env = {fx.g, fx.ops, fx.rep};
    assert_int_equal(ag_pass_layout_conflict(&env), AG_OK);
    /* Addresses are refreshed: the StreamSwitch reads a copy of r and its
     * output goes to the graph output through a copy. */
    assert_isolated(&fx, "layout: unrefresh_in_checker", "s", true);
    assert_isolated(&fx, "layout: user_out_and_unrefresh_out_checker", "s", false);
    assert_int_equal(ag_report_isolation_count(fx.rep), 2);
    assert_int_equal(ag_node_input_src(fx.g, node(&fx, "k"), 0).node, node(&fx, "r"));
    assert_int_equal(ag_pass_layout_conflict(&env), AG_OK);
    assert_int_equal(ag_report_isolation_count(fx.rep), 2);
    fx_close(&fx);

    /* Without the option the addresses are fixed: r is shared freely, the
     * graph output gets the copy instead of the StreamSwitch output. */
    fx_open(&fx, "graph g {\n  d = Data() -> (f32[4]) <index = 0>\n  r = Relu(d) -> (f32[4])\n"
                 "  s = StreamSwitch(r) -> (f32[4])\n  k = Neg(r) -> (f32[4])\n  out = NetOutput(s, k)\n}\n");
    env = (ag_pass_env){fx.g, fx.ops, fx.rep};
    assert_int_equal(ag_pass_layout_conflict(&env), AG_OK);
    assert_isolated(&fx, "layout: user_out_and_unrefresh_out_checker", "out", true);
    assert_int_equal(ag_report_isolation_count(fx.rep), 1);
    fx_close(&fx);
}

/* ---- the table ---- */

static const struct {
    ag_layout_attr a, b;
    const char *name;
} mine[] = {
#define U_IN_(x) {AG_LA_UNREFRESH_IN, AG_LA_##x, "unrefresh_in_checker"}
#define U_OUT_(x) {AG_LA_UNREFRESH_OUT, AG_LA_##x, "unrefresh_out_checker"}
    U_IN_(IMMUTABLE_OUT), U_IN_(UNREFRESH_IN), U_IN_(UNREFRESH_OUT), U_IN_(CONT_IN), U_IN_(CONT_OUT),
    U_IN_(NOPAD_CONT_IN), U_IN_(NOPAD_CONT_OUT), U_IN_(RTS_IN), U_IN_(RTS_OUT), U_IN_(NORMAL_IN),
    U_IN_(NORMAL_OUT), U_OUT_(IMMUTABLE_OUT), U_OUT_(UNREFRESH_OUT), U_OUT_(CONT_IN), U_OUT_(CONT_OUT),
    U_OUT_(NOPAD_CONT_IN), U_OUT_(NOPAD_CONT_OUT), U_OUT_(RTS_OUT), U_OUT_(RTS_IN), U_OUT_(NORMAL_IN),
    U_OUT_(NORMAL_OUT),
#undef U_IN_
#undef U_OUT_
    {AG_LA_USER_IN, AG_LA_CONT_OUT, "user_in_and_continuous_in_out_checker"},
    {AG_LA_USER_IN, AG_LA_CONT_IN, "user_in_and_continuous_in_out_checker"},
    {AG_LA_USER_IN, AG_LA_NOPAD_CONT_IN, "UserInputAndNoPaddingContinuousInputChecker"},
    {AG_LA_USER_IN, AG_LA_NOPAD_CONT_OUT, "UserInputAndNoPaddingContinuousOutputChecker"},
    {AG_LA_USER_IN, AG_LA_UNREFRESH_OUT, "user_in_and_unrefresh_out_checker"},
    {AG_LA_USER_IN, AG_LA_RTS_OUT, "user_in_and_rts_special_out_checker"},
    {AG_LA_USER_OUT, AG_LA_CONT_IN, "user_out_and_continuous_input"},
    {AG_LA_USER_OUT, AG_LA_NOPAD_CONT_IN, "user_out_and_continuous_input"},
    {AG_LA_USER_OUT, AG_LA_IMMUTABLE_OUT, "user_out_and_immutable_out_checker"},
    {AG_LA_USER_OUT, AG_LA_UNREFRESH_IN, "user_out_and_unrefresh_in_checker"},
    {AG_LA_USER_OUT, AG_LA_UNREFRESH_OUT, "user_out_and_unrefresh_out_checker"},
};

/* The absolute pairs of notes 4.4; a registered row may not repeat one. */
static const ag_layout_attr absolute_pairs[][2] = {
    {AG_LA_USER_IN, AG_LA_UNREFRESH_IN},  {AG_LA_USER_IN, AG_LA_RTS_IN},         {AG_LA_USER_OUT, AG_LA_RTS_IN},
    {AG_LA_USER_OUT, AG_LA_RTS_OUT},      {AG_LA_USER_OUT, AG_LA_CONT_OUT},      {AG_LA_USER_OUT, AG_LA_NOPAD_CONT_OUT},
    {AG_LA_IMMUTABLE_OUT, AG_LA_RTS_IN},  {AG_LA_IMMUTABLE_OUT, AG_LA_CONT_IN},  {AG_LA_CONT_IN, AG_LA_NOPAD_CONT_OUT},
    {AG_LA_CONT_OUT, AG_LA_NOPAD_CONT_IN}, {AG_LA_RTS_IN, AG_LA_NORMAL_OUT},     {AG_LA_USER_OUT, AG_LA_USER_OUT},
    {AG_LA_USER_IN, AG_LA_USER_OUT},
};

static bool same_pair(ag_layout_attr a, ag_layout_attr b, ag_layout_attr c, ag_layout_attr d)
{
    return (a == c && b == d) || (a == d && b == c);
}

static void test_table(void **state)
{
    (void)state;
    uint32_t n = ag_layout_checker_nrows;
    /* Each row of these families is registered, once, under its name. */
    for (size_t k = 0; k < sizeof mine / sizeof mine[0]; k++) {
        uint32_t hits = 0;
        for (uint32_t r = 0; r < n; r++) {
            const ag_layout_checker_row *row = &ag_layout_checker_rows[r];
            if (same_pair(row->attr_a, row->attr_b, mine[k].a, mine[k].b)) {
                hits++;
                assert_string_equal(row->name, mine[k].name);
                assert_false(row->as_symbol);
                /* The row's first attribute is the one the checker expects
                 * in its first argument. */
                assert_int_equal(row->attr_a, mine[k].a);
            }
        }
        if (hits != 1)
            fail_msg("%s x %s registered %u times", ag_layout_attr_name(mine[k].a), ag_layout_attr_name(mine[k].b),
                     (unsigned)hits);
    }
    /* The whole table: no unordered pair twice, none absolute, no REFERENCE
     * pair (always no-conflict), every row complete. */
    for (uint32_t r = 0; r < n; r++) {
        const ag_layout_checker_row *x = &ag_layout_checker_rows[r];
        assert_non_null(x->fn);
        assert_non_null(x->name);
        assert_int_not_equal(x->attr_a, AG_LA_REF_OUT);
        assert_int_not_equal(x->attr_b, AG_LA_REF_OUT);
        for (uint32_t q = r + 1; q < n; q++) {
            const ag_layout_checker_row *y = &ag_layout_checker_rows[q];
            if (same_pair(x->attr_a, x->attr_b, y->attr_a, y->attr_b))
                fail_msg("rows %u (%s) and %u (%s) register one pair", (unsigned)r, x->name, (unsigned)q, y->name);
        }
        for (size_t k = 0; k < sizeof absolute_pairs / sizeof absolute_pairs[0]; k++)
            if (same_pair(x->attr_a, x->attr_b, absolute_pairs[k][0], absolute_pairs[k][1]))
                fail_msg("row %u (%s) repeats an absolute pair", (unsigned)r, x->name);
    }
    assert_true(n <= 55);
    /* The engine accepts the table (it checks the same against its own
     * absolute sets) and rejects a repeated row. */
    fixture fx;
    fx_open(&fx, "graph g {\n  d = Data() -> (f32[4]) <index = 0>\n  out = NetOutput(d)\n}\n");
    ag_pass_env env = {fx.g, fx.ops, fx.rep};
    ag_layout_info info = DFLT;
    assert_int_equal(ag_layout_process(&env, AG_ROOT, &info, ag_layout_checker_rows, n), AG_OK);
    const ag_layout_checker_row *u = find_row(AG_LA_UNREFRESH_IN, AG_LA_NORMAL_IN);
    ag_layout_checker_row twice[2] = {*u, *u};
    twice[1].attr_a = u->attr_b;
    twice[1].attr_b = u->attr_a;
    assert_int_equal(ag_layout_process(&env, AG_ROOT, &info, twice, 2), AG_EINVAL);
    assert_errmsg(fx.ctx, "registered twice");
    fx_close(&fx);
}

/* ---- allocation failures ---- */

static const char *oom_graph = "graph g {\n"
                               "  v = RefData() -> (f32[4]) <index = 0>\n"
                               "  d = Data() -> (f32[4]) <index = 1>\n"
                               "  as = Assign(v, d) -> (f32[4])\n"
                               "  c = ConcatC(as, d) -> (f32[8]) <continuous_input = true>\n"
                               "  r = Relu(d) -> (f32[4])\n"
                               "  s = StreamSwitch(r) -> (f32[4])\n"
                               "  k = Const() -> (f32[4] = {1, 2, 3, 4})\n"
                               "  out = NetOutput(c, s, k) <_feature_map_refreshable = true>\n"
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
        st = ag_pass_layout_conflict(&env);
        /* c:0 after the Assign (AssignVar), s:0 (unrefresh_in), the constant
         * returned (user_out_and_immutable_out), d read by the concat and the
         * StreamSwitch's producer chain (absolute / user-in rows). */
        if (st == AG_OK)
            assert_true(ag_report_isolation_count(rep) >= 3);
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
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_pairs_both_orders),
        cmocka_unit_test(test_special_cases),
        cmocka_unit_test(test_pass_graph_options),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
