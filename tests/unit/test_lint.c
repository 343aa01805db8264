/* Unit tests of GraphLint: small graphs with known answers (writers ordered by
 * data or control paths or not, reader-only fan-outs, writers found through
 * nested subgraphs, by tensor names, ignored cache-maintenance ops), the
 * per-output pair limit, phases, a long ordered chain of writers, a property
 * test against all-pairs reachability on thousands of random graphs, and an
 * allocation-failure sweep. */
#include "support/agtest.h"

#include "passes/pass_internal.h"

#include <stdio.h>

static ag_graph *read_agt(ag_ctx *ctx, const char *text)
{
    ag_graph *g = NULL;
    ag_status st = ag_text_read(ctx, text, strlen(text), "test.agt", &g);
    if (st != AG_OK)
        fail_msg("parse: %s", ag_ctx_errmsg(ctx));
    return g;
}

typedef struct fixture {
    ag_ctx *ctx;
    ag_graph *g;
    ag_ops *ops;
    ag_report *rep;
} fixture;

/* Reads text and lints it with the given phase. */
static void fx_lint(fixture *fx, const char *text, const char *phase)
{
    fx->ctx = agtest_ctx();
    fx->g = read_agt(fx->ctx, text);
    assert_int_equal(ag_ops_create(fx->ctx, &fx->ops), AG_OK);
    assert_int_equal(ag_report_create(fx->ctx, &fx->rep), AG_OK);
    ag_pass_env env = {fx->g, fx->ops, fx->rep};
    ag_status st = ag_lint_run(&env, phase);
    if (st != AG_OK)
        fail_msg("lint: %s", ag_ctx_errmsg(fx->ctx));
}

static void fx_close(fixture *fx)
{
    ag_report_destroy(fx->rep);
    ag_ops_destroy(fx->ops);
    ag_graph_destroy(fx->g);
    ag_ctx_destroy(fx->ctx);
}

/* Asserts warning k names writer w and other node x (x NULL: one node). */
static void expect_pair(const ag_report *r, uint32_t k, const char *w, const char *x)
{
    const ag_warning *wr = ag_report_warning_at(r, k);
    assert_non_null(wr);
    assert_string_equal(wr->pass, "lint");
    assert_string_equal(wr->code, "W18888");
    assert_int_equal(wr->nnodes, x ? 2 : 1);
    assert_string_equal(wr->nodes[0], w);
    if (x)
        assert_string_equal(wr->nodes[1], x);
}

static void test_two_writers(void **state)
{
    (void)state;
    fixture fx;
    fx_lint(&fx,
            "graph g {\n"
            "  v = Variable() -> (f32[4])\n"
            "  x = Data() -> (f32[4]) <index = 0>\n"
            "  a1 = Assign(v, x) -> (f32[4])\n"
            "  a2 = Assign(v, x) -> (f32[4])\n"
            "  out = NetOutput(a1, a2)\n"
            "}\n",
            NULL);
    /* Output x is read by both and written by neither: only v's pair. */
    assert_int_equal(ag_report_warning_count(fx.rep), 1);
    expect_pair(fx.rep, 0, "a1", "a2");
    assert_string_equal(ag_report_warning_at(fx.rep, 0)->message,
                        "graph 'g': no control relation between write node \"a1\" (Assign) and write node \"a2\" "
                        "(Assign) on output \"v\":0 (may cause a precision problem)");
    fx_close(&fx);
}

static void test_ordered_by_data_and_control(void **state)
{
    (void)state;
    fixture fx;
    /* a2 depends on a1 through data (a1 -> n -> a2's second input); r runs
     * after a2 through a control edge, and r2 before a1 through one. */
    fx_lint(&fx,
            "graph g {\n"
            "  v = Variable() -> (f32[4])\n"
            "  x = Data() -> (f32[4]) <index = 0>\n"
            "  r2 = Relu(v) -> (f32[4])\n"
            "  a1 = Assign(v, x, ^r2) -> (f32[4])\n"
            "  n = Neg(a1) -> (f32[4])\n"
            "  a2 = Assign(v, n) -> (f32[4])\n"
            "  r = Relu(v, ^a2) -> (f32[4])\n"
            "  out = NetOutput(a2, r, r2)\n"
            "}\n",
            NULL);
    assert_int_equal(ag_report_warning_count(fx.rep), 0);
    fx_close(&fx);
}

static void test_reader_only_and_writer_reader(void **state)
{
    (void)state;
    fixture fx;
    fx_lint(&fx,
            "graph g {\n"
            "  x = Data() -> (f32[4]) <index = 0>\n"
            "  r1 = Relu(x) -> (f32[4])\n"
            "  r2 = Neg(x) -> (f32[4])\n"
            "  r3 = Abs(x) -> (f32[4])\n"
            "  ar = HcomAllReduce(r1) -> (f32[4]) <_input_mutable = true>\n"
            "  s = Sqrt(r1) -> (f32[4])\n"
            "  out = NetOutput(r2, r3, ar, s)\n"
            "}\n",
            "after");
    assert_int_equal(ag_report_warning_count(fx.rep), 1);
    expect_pair(fx.rep, 0, "ar", "s");
    const char *msg = ag_report_warning_at(fx.rep, 0)->message;
    assert_non_null(strstr(msg, "after: graph 'g': no control relation between write node \"ar\" (HcomAllReduce) "
                                "and read node \"s\" (Sqrt) on output \"r1\":0"));
    fx_close(&fx);
}

static void test_nested_subgraph_writer(void **state)
{
    (void)state;
    fixture fx;
    /* The outer call writes its input 0 because a call inside its subgraph
     * writes the Data bound to it, whose subgraph holds the Assign. */
    fx_lint(&fx,
            "graph g {\n"
            "  v = Variable() -> (f32[4])\n"
            "  x = Data() -> (f32[4]) <index = 0>\n"
            "  c = PartitionedCall(v, x) -> (f32[4]) {\n"
            "    graph outer {\n"
            "      d = Data() -> (f32[4]) <_parent_node_index = 0>\n"
            "      e = Data() -> (f32[4]) <_parent_node_index = 1>\n"
            "      c2 = PartitionedCall(e, d) -> (f32[4]) {\n"
            "        graph inner {\n"
            "          p = Data() -> (f32[4]) <_parent_node_index = 0>\n"
            "          q = Data() -> (f32[4]) <_parent_node_index = 1>\n"
            "          a = Assign(q, p) -> (f32[4])\n"
            "          out = NetOutput(a <_parent_node_index = 0>)\n"
            "        }\n"
            "      }\n"
            "      r = Relu(d) -> (f32[4])\n"
            "      out = NetOutput(c2 <_parent_node_index = 0>)\n"
            "    }\n"
            "  }\n"
            "  r = Relu(v) -> (f32[4])\n"
            "  k = Relu(x) -> (f32[4])\n"
            "  out = NetOutput(c, r, k)\n"
            "}\n",
            NULL);
    /* Root: c writes v (through c2 input 1 -> q -> Assign input 0), r reads
     * it unordered; x is only read.  Inside outer: d feeds c2 (a writer of
     * its input 1) and r, unordered. */
    assert_int_equal(ag_report_warning_count(fx.rep), 2);
    expect_pair(fx.rep, 0, "c", "r");
    expect_pair(fx.rep, 1, "c2", "r");
    assert_non_null(strstr(ag_report_warning_at(fx.rep, 1)->message, "graph 'outer'"));
    fx_close(&fx);
}

static void test_name_writer_and_cmo(void **state)
{
    (void)state;
    fixture fx;
    /* w is unknown to the registry but its input's name is its output's
     * name: a writer.  The Cmo nodes (by type and by original type) are
     * ignored, though m2's type would write; only the Relu is unordered. */
    fx_lint(&fx,
            "graph g {\n"
            "  x = Data() -> (f32[4] \"buf\") <index = 0>\n"
            "  w = MyInplaceOp(x) -> (f32[4] \"buf\")\n"
            "  m1 = Cmo(x) -> (f32[4])\n"
            "  m2 = Assign(x, x) -> (f32[4]) <original_type = \"Cmo\">\n"
            "  r = Relu(x) -> (f32[4])\n"
            "  out = NetOutput(w, m1, m2, r)\n"
            "}\n",
            NULL);
    assert_int_equal(ag_report_warning_count(fx.rep), 1);
    expect_pair(fx.rep, 0, "w", "r");
    fx_close(&fx);
}

static void test_pair_limit(void **state)
{
    (void)state;
    /* 20 unordered writers: 190 pairs, 100 listed and one summary. */
    char text[4096];
    size_t len = (size_t)snprintf(text, sizeof text, "graph g {\n  v = Variable() -> (f32[4])\n"
                                                     "  x = Data() -> (f32[4]) <index = 0>\n");
    for (int k = 0; k < 20; k++)
        len += (size_t)snprintf(text + len, sizeof text - len, "  a%d = Assign(v, x) -> (f32[4])\n", k);
    snprintf(text + len, sizeof text - len, "}\n");
    fixture fx;
    fx_lint(&fx, text, NULL);
    assert_int_equal(ag_report_warning_count(fx.rep), 101);
    expect_pair(fx.rep, 0, "a0", "a1");
    expect_pair(fx.rep, 18, "a0", "a19");
    expect_pair(fx.rep, 19, "a1", "a2");
    expect_pair(fx.rep, 100, "v", NULL);
    assert_non_null(strstr(ag_report_warning_at(fx.rep, 100)->message, "90 more pairs"));
    fx_close(&fx);
}

/* A long chain of writers ordered by control edges, each with a reader in
 * between: the proof path must see it ordered (and quickly). */
static void test_long_ordered_chain(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = NULL;
    assert_int_equal(ag_graph_create(ctx, "g", &g), AG_OK);
    ag_node_id v = agtest_node(g, AG_ROOT, "Variable", "v", 0, 1);
    ag_node_id x = agtest_node(g, AG_ROOT, "Data", "x", 0, 1);
    ag_node_id prev = AG_NONE;
    char name[32];
    for (int k = 0; k < 3000; k++) {
        snprintf(name, sizeof name, "a%d", k);
        ag_node_id a = agtest_node(g, AG_ROOT, "Assign", name, 2, 1);
        agtest_edge(g, v, 0, a, 0);
        agtest_edge(g, x, 0, a, 1);
        snprintf(name, sizeof name, "r%d", k);
        ag_node_id r = agtest_node(g, AG_ROOT, "Relu", name, 1, 1);
        agtest_edge(g, v, 0, r, 0);
        agtest_ctrl(g, a, r);
        if (prev != AG_NONE)
            agtest_ctrl(g, prev, a);
        prev = r;
    }
    ag_ops *ops = NULL;
    ag_report *rep = NULL;
    assert_int_equal(ag_ops_create(ctx, &ops), AG_OK);
    assert_int_equal(ag_report_create(ctx, &rep), AG_OK);
    ag_pass_env env = {g, ops, rep};
    assert_int_equal(ag_lint_run(&env, "before"), AG_OK);
    assert_int_equal(ag_report_warning_count(rep), 0);
    /* Without a report lint does nothing at all. */
    ag_pass_env quiet = {g, ops, NULL};
    assert_int_equal(ag_pass_lint(&quiet), AG_OK);
    ag_report_destroy(rep);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

/* A variable written by 1000 unordered Assigns hanging off a long chain:
 * every pair is reported (100 listed, the rest counted) and the exact pairs
 * come from sweeps of 64 writers, not one search per writer. */
static void test_wide_unordered(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = NULL;
    assert_int_equal(ag_graph_create(ctx, "g", &g), AG_OK);
    ag_node_id v = agtest_node(g, AG_ROOT, "Variable", "v", 0, 1);
    ag_node_id h = agtest_node(g, AG_ROOT, "Data", "x", 0, 1);
    char name[32];
    for (int k = 0; k < 20000; k++) {
        snprintf(name, sizeof name, "n%d", k);
        ag_node_id n = agtest_node(g, AG_ROOT, "Relu", name, 1, 1);
        agtest_edge(g, h, 0, n, 0);
        h = n;
        if (k % 20 == 0) {
            snprintf(name, sizeof name, "a%d", k / 20);
            ag_node_id a = agtest_node(g, AG_ROOT, "Assign", name, 2, 1);
            agtest_edge(g, v, 0, a, 0);
            agtest_edge(g, n, 0, a, 1);
        }
    }
    ag_ops *ops = NULL;
    ag_report *rep = NULL;
    assert_int_equal(ag_ops_create(ctx, &ops), AG_OK);
    assert_int_equal(ag_report_create(ctx, &rep), AG_OK);
    ag_pass_env env = {g, ops, rep};
    assert_int_equal(ag_lint_run(&env, NULL), AG_OK);
    assert_int_equal(ag_report_warning_count(rep), 101);
    expect_pair(rep, 0, "a0", "a1");
    expect_pair(rep, 99, "a0", "a100");
    expect_pair(rep, 100, "v", NULL);
    assert_non_null(strstr(ag_report_warning_at(rep, 100)->message, " 499400 more pairs "));
    ag_report_destroy(rep);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

/* The pipeline lints first and last: the input's race is reported under
 * "before:", and the ordering edges rw_conflict adds leave "after:" clean. */
static void test_pipeline_phases(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = read_agt(ctx, "graph g {\n"
                                "  v = Variable() -> (f32[4])\n"
                                "  x = Data() -> (f32[4]) <index = 0>\n"
                                "  a1 = Assign(v, x) -> (f32[4])\n"
                                "  a2 = Assign(v, x) -> (f32[4])\n"
                                "  r = Relu(v) -> (f32[4])\n"
                                "  out = NetOutput(a1, a2, r)\n"
                                "}\n");
    ag_ops *ops = NULL;
    ag_report *rep = NULL;
    assert_int_equal(ag_ops_create(ctx, &ops), AG_OK);
    assert_int_equal(ag_report_create(ctx, &rep), AG_OK);
    ag_pass_env env = {g, ops, rep};
    assert_int_equal(ag_pipeline_run(&env), AG_OK);
    uint32_t before = 0, after = 0;
    for (uint32_t k = 0; k < ag_report_warning_count(rep); k++) {
        const ag_warning *w = ag_report_warning_at(rep, k);
        if (strcmp(w->pass, "lint") != 0)
            continue;
        before += strncmp(w->message, "before: ", 8) == 0;
        after += strncmp(w->message, "after: ", 7) == 0;
    }
    assert_int_equal(before, 3);
    assert_int_equal(after, 0);
    assert_true(ag_report_findings(rep) > 0);
    ag_report_destroy(rep);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

/* ---- property test against all-pairs reachability ---- */

enum { E_NONE = 0, E_READ = 1, E_WRITE = 2, E_IGNORE = 3 };
#define MAX_IN 3

typedef struct rgen {
    ag_graph *g;
    uint64_t rng;
    uint8_t (*cls)[MAX_IN]; /* expected class per node id and input */
    uint32_t ncls;
    uint32_t subs;         /* subgraphs made, for unique names */
    uint32_t names;        /* tensor names handed out */
    bool big;              /* a long root graph */
} rgen;

static uint32_t rnd(rgen *r, uint32_t n)
{
    r->rng ^= r->rng << 13;
    r->rng ^= r->rng >> 7;
    r->rng ^= r->rng << 17;
    return (uint32_t)(r->rng % n);
}

static void set_cls(rgen *r, ag_node_id n, uint32_t i, uint8_t c)
{
    if (n >= r->ncls) {
        uint32_t cap = (n + 1) * 2;
        r->cls = realloc(r->cls, cap * sizeof *r->cls);
        assert_non_null(r->cls);
        memset(r->cls + r->ncls, 0, (cap - r->ncls) * sizeof *r->cls);
        r->ncls = cap;
    }
    r->cls[n][i] = c;
}

static ag_node_id pick_producer(rgen *r, const ag_node_id *made, uint32_t nmade, uint32_t *out)
{
    /* Half the inputs come from the first three nodes, so fan-outs (and
     * fan-outs with several writers) are frequent. */
    ag_node_id p = made[rnd(r, 2) ? rnd(r, nmade < 3 ? nmade : 3) : rnd(r, nmade)];
    /* Long graphs also get long paths (for the chain labels). */
    if (r->big && rnd(r, 2))
        p = made[nmade - 1 - rnd(r, nmade < 2 ? 1 : 2)];
    *out = rnd(r, ag_node_num_outputs(r->g, p));
    return p;
}

/* Fills subgraph s: ndata Data nodes bound to the parent's inputs (none in
 * the root, which gets sources instead), then random nodes.  Returns in
 * written[i] whether the subgraph writes parent input i (the Data's direct
 * consumers, as lint defines it). */
static void gen_sub(rgen *r, ag_sub_id s, uint32_t depth, uint32_t ndata, bool *written)
{
    ag_graph *g = r->g;
    ag_node_id made[128];
    uint32_t nmade = 0;
    ag_node_id data[MAX_IN];
    char name[32];
    if (s == AG_ROOT) {
        uint32_t nsrc = 1 + rnd(r, 3);
        for (uint32_t k = 0; k < nsrc; k++) {
            snprintf(name, sizeof name, "src%u", k);
            made[nmade++] = agtest_node(g, s, rnd(r, 2) ? "Variable" : "Data", name, 0, 1);
        }
    } else {
        for (uint32_t k = 0; k < ndata; k++) {
            snprintf(name, sizeof name, "d%u", k);
            data[k] = made[nmade++] = agtest_node(g, s, "Data", name, 0, 1);
            assert_int_equal(ag_attrs_set_int(g, ag_node_attrs(g, data[k]), "_parent_node_index", k), AG_OK);
        }
    }
    /* Every fifth root is long enough for chain labels (lint.c). */
    uint32_t count = depth > 0 ? 3 + rnd(r, 5) : r->big ? 40 + rnd(r, 60) : 3 + rnd(r, 12);
    for (uint32_t k = 0; k < count; k++) {
        uint32_t kind = rnd(r, depth < 2 ? 9 : 8);
        const char *type;
        uint32_t nin, nout = 1;
        uint8_t cls[MAX_IN] = {E_READ, E_READ, E_READ};
        switch (kind) {
        case 0: type = "Relu"; nin = 1; break;
        case 1: type = "Add"; nin = 2; break;
        case 2: type = "Assign"; nin = 2; cls[0] = E_WRITE; break;
        case 3: type = "HcomAllReduce"; nin = 1 + rnd(r, 2); break;
        case 4: type = rnd(r, 2) ? "Cmo" : "Assign"; nin = 2; cls[0] = cls[1] = E_IGNORE; break;
        case 5: type = "MyInplaceOp"; nin = 1; cls[0] = E_WRITE; break;
        case 6: type = "Split"; nin = 1; nout = 2; break;
        case 7: type = "Mul"; nin = 2; break;
        default: type = "PartitionedCall"; nin = 1 + rnd(r, 2); break;
        }
        snprintf(name, sizeof name, "n%u", k);
        ag_node_id n = agtest_node(g, s, type, name, nin, nout);
        for (uint32_t i = 0; i < nin; i++) {
            uint32_t o;
            ag_node_id p = pick_producer(r, made, nmade, &o);
            agtest_edge(g, p, o, n, i);
        }
        ag_attrs *at = ag_node_attrs(g, n);
        if (kind == 3) {
            int64_t which = rnd(r, nin);
            assert_int_equal(ag_attrs_set_ints(g, at, "_input_mutable", &which, 1), AG_OK);
            cls[which] = E_WRITE;
        } else if (kind == 4 && strcmp(type, "Assign") == 0) {
            assert_int_equal(ag_attrs_set_string(g, at, "original_type", "Cmo"), AG_OK);
        } else if (kind == 5) {
            snprintf(name, sizeof name, "t%u", r->names++);
            assert_int_equal(ag_desc_set_name(g, ag_node_output_desc(g, n, 0), name), AG_OK);
            assert_int_equal(ag_desc_set_name(g, ag_node_input_desc(g, n, 0), name), AG_OK);
        } else if (kind >= 8) {
            snprintf(name, sizeof name, "sub%u", r->subs++);
            ag_sub_id child = agtest_sub(g, n, name);
            bool w[MAX_IN] = {false, false, false};
            gen_sub(r, child, depth + 1, nin, w);
            for (uint32_t i = 0; i < nin; i++)
                cls[i] = w[i] ? E_WRITE : E_READ;
        }
        for (uint32_t i = 0; i < nin; i++)
            set_cls(r, n, i, cls[i]);
        if (nmade > 1 && rnd(r, 10) < 3)
            agtest_ctrl(g, made[rnd(r, nmade)], n);
        made[nmade++] = n;
    }
    if (s != AG_ROOT)
        for (uint32_t k = 0; k < ndata; k++) {
            uint32_t nc = ag_node_output_nconsumers(g, data[k], 0);
            for (uint32_t c = 0; c < nc; c++) {
                ag_port q = ag_node_output_consumer(g, data[k], 0, c);
                if (r->cls[q.node][q.index] == E_WRITE)
                    written[k] = true;
            }
        }
}

/* Transitive closure of one subgraph by a search from every node. */
static void closure(const ag_graph *g, ag_sub_id s, uint32_t *local, bool *reach, uint32_t n)
{
    ag_node_id *stack = malloc(((size_t)n + 1) * sizeof *stack);
    assert_non_null(stack);
    for (uint32_t a = 0; a < n; a++) {
        uint32_t sp = 0;
        stack[sp++] = ag_sub_node_at(g, s, a);
        while (sp) {
            ag_node_id x = stack[--sp];
            uint32_t nout = ag_node_num_outputs(g, x), nctrl = ag_node_num_ctrl_out(g, x);
            for (uint32_t o = 0; o <= nout; o++) {
                uint32_t nk = o < nout ? ag_node_output_nconsumers(g, x, o) : nctrl;
                for (uint32_t k = 0; k < nk; k++) {
                    ag_node_id y = o < nout ? ag_node_output_consumer(g, x, o, k).node : ag_node_ctrl_out(g, x, k);
                    uint32_t b = local[y];
                    if (!reach[a * n + b]) {
                        reach[a * n + b] = true;
                        stack[sp++] = y; /* each node once per source: sp <= n */
                    }
                }
            }
        }
    }
    free(stack);
}

/* Checks the report against the expected pairs, in lint's order. */
static void compare(rgen *r, const ag_report *rep, uint32_t seed)
{
    const ag_graph *g = r->g;
    uint32_t wk = 0;
    uint32_t cap = ag_graph_node_capacity(g);
    uint32_t *local = calloc(cap, sizeof *local);
    assert_non_null(local);
    for (ag_sub_id s = 0; s < ag_graph_sub_count(g); s++) {
        uint32_t n = ag_sub_node_count(g, s);
        for (uint32_t k = 0; k < n; k++)
            local[ag_sub_node_at(g, s, k)] = k;
        bool *reach = calloc((size_t)n * n + 1, 1);
        assert_non_null(reach);
        closure(g, s, local, reach, n);
        for (uint32_t k = 0; k < n; k++) {
            ag_node_id p = ag_sub_node_at(g, s, k);
            for (uint32_t o = 0; o < ag_node_num_outputs(g, p); o++) {
                ag_node_id cn[512];
                uint8_t cc[512];
                uint32_t m = 0;
                for (uint32_t c = 0; c < ag_node_output_nconsumers(g, p, o); c++) {
                    ag_port q = ag_node_output_consumer(g, p, o, c);
                    uint8_t e = r->cls[q.node][q.index];
                    uint32_t at = 0;
                    while (at < m && cn[at] != q.node)
                        at++;
                    if (at == m) {
                        cn[m] = q.node;
                        cc[m++] = E_NONE;
                    }
                    if (e == E_WRITE)
                        cc[at] = E_WRITE;
                    else if (e == E_READ && cc[at] == E_NONE)
                        cc[at] = E_READ;
                }
                uint32_t listed = 0;
                uint64_t more = 0;
                for (uint32_t i = 0; i < m; i++) {
                    if (cc[i] != E_WRITE)
                        continue;
                    for (uint32_t j = 0; j < m; j++) {
                        if (j == i || cc[j] == E_NONE || (cc[j] == E_WRITE && j < i))
                            continue;
                        uint32_t a = local[cn[i]], b = local[cn[j]];
                        if (reach[a * n + b] || reach[b * n + a])
                            continue;
                        if (listed == 100) {
                            more++;
                            continue;
                        }
                        listed++;
                        const ag_warning *w = ag_report_warning_at(rep, wk++);
                        if (w == NULL)
                            fail_msg("seed %u: missing warning %s/%s on %s:%u", seed, ag_node_name(g, cn[i]),
                                     ag_node_name(g, cn[j]), ag_node_name(g, p), o);
                        if (strcmp(w->nodes[0], ag_node_name(g, cn[i])) != 0 ||
                            strcmp(w->nodes[1], ag_node_name(g, cn[j])) != 0)
                            fail_msg("seed %u: warning %u is %s/%s, expected %s/%s on %s:%u", seed, wk - 1,
                                     w->nodes[0], w->nodes[1], ag_node_name(g, cn[i]), ag_node_name(g, cn[j]),
                                     ag_node_name(g, p), o);
                        char where[96];
                        snprintf(where, sizeof where, "graph '%s'", ag_sub_name(g, s));
                        assert_non_null(strstr(w->message, where));
                    }
                }
                if (more) {
                    const ag_warning *w = ag_report_warning_at(rep, wk++);
                    char what[64];
                    snprintf(what, sizeof what, " %llu more pairs ", (unsigned long long)more);
                    if (w == NULL || w->nnodes != 1 || strcmp(w->nodes[0], ag_node_name(g, p)) != 0 ||
                        strstr(w->message, what) == NULL)
                        fail_msg("seed %u: missing summary of%son %s:%u", seed, what, ag_node_name(g, p), o);
                }
            }
        }
        free(reach);
    }
    if (wk != ag_report_warning_count(rep))
        fail_msg("seed %u: %u warnings, expected %u (first extra: %s)", seed, ag_report_warning_count(rep), wk,
                 ag_report_warning_at(rep, wk)->message);
    free(local);
}

static void test_random_against_closure(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_ops *ops = NULL;
    assert_int_equal(ag_ops_create(ctx, &ops), AG_OK);
    uint32_t total = 0, with_subs = 0;
    for (uint32_t seed = 1; seed <= 3000; seed++) {
        rgen r = {NULL, 0x9e3779b97f4a7c15u ^ ((uint64_t)seed * 0x100000001b3u), NULL, 0, 0, 0, seed % 5 == 0};
        assert_int_equal(ag_graph_create(ctx, "g", &r.g), AG_OK);
        gen_sub(&r, AG_ROOT, 0, 0, NULL);
        assert_int_equal(ag_graph_verify(r.g), AG_OK);
        ag_report *rep = NULL;
        assert_int_equal(ag_report_create(ctx, &rep), AG_OK);
        ag_pass_env env = {r.g, ops, rep};
        assert_int_equal(ag_lint_run(&env, NULL), AG_OK);
        compare(&r, rep, seed);
        total += ag_report_warning_count(rep);
        with_subs += ag_graph_sub_count(r.g) > 1;
        ag_report_destroy(rep);
        ag_graph_destroy(r.g);
        free(r.cls);
    }
    /* The generator must exercise both outcomes and the subgraphs. */
    assert_true(total > 1000);
    assert_true(with_subs > 500);
    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
}

/* ---- allocation failure ---- */

static const char oom_graph[] = "graph g {\n"
                                "  v = Variable() -> (f32[4])\n"
                                "  x = Data() -> (f32[4]) <index = 0>\n"
                                "  a1 = Assign(v, x) -> (f32[4])\n"
                                "  a2 = Assign(v, x) -> (f32[4])\n"
                                "  r = Relu(v, ^a2) -> (f32[4])\n"
                                "  c = PartitionedCall(v) -> (f32[4]) {\n"
                                "    graph body {\n"
                                "      d = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                                "      y = Const() -> (f32[4] = {1.0, 2.0, 3.0, 4.0})\n"
                                "      a = Assign(d, y) -> (f32[4])\n"
                                "      n = Neg(d) -> (f32[4])\n"
                                "      out = NetOutput(a <_parent_node_index = 0>)\n"
                                "    }\n"
                                "  }\n"
                                "  out = NetOutput(a1, r, c)\n"
                                "}\n";

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_graph *g = NULL;
    ag_ops *ops = NULL;
    ag_report *rep = NULL;
    ag_status st = ag_text_read(ctx, oom_graph, sizeof oom_graph - 1, "oom.agt", &g);
    if (st == AG_OK)
        st = ag_ops_create(ctx, &ops);
    if (st == AG_OK)
        st = ag_report_create(ctx, &rep);
    if (st == AG_OK) {
        ag_pass_env env = {g, ops, rep};
        st = ag_lint_run(&env, "before");
        if (st == AG_OK)
            assert_int_equal(ag_report_warning_count(rep), 6);
    }
    ag_report_destroy(rep);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    return st;
}

static void test_oom(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    assert_int_equal(oom_body(ctx, NULL), AG_OK);
    ag_ctx_destroy(ctx);
    assert_true(AG_TEST_OOM_SWEEP(oom_body, NULL) > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_writers),
        cmocka_unit_test(test_ordered_by_data_and_control),
        cmocka_unit_test(test_reader_only_and_writer_reader),
        cmocka_unit_test(test_nested_subgraph_writer),
        cmocka_unit_test(test_name_writer_and_cmo),
        cmocka_unit_test(test_pair_limit),
        cmocka_unit_test(test_long_ordered_chain),
        cmocka_unit_test(test_wide_unordered),
        cmocka_unit_test(test_pipeline_phases),
        cmocka_unit_test(test_random_against_closure),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
