/* Tests of the verifier (src/verify): clean on compiled graphs, caught when
 * a plan is corrupted by hand (two live tensors overlapping, an in-place
 * merge while another reader is alive, a tensor past its arena), the same
 * verdict for the optimised, in-place-free and naive plans, determinism and
 * replay, a random-DAG property test and an allocation-failure sweep. */
#include "support/agtest.h"

#include <stdio.h>

#include "aliasguard/plan.h"
#include "aliasguard/verify.h"

/* Compiled and planned graph. */
typedef struct compiled {
    ag_graph *g;
    ag_ops *ops;
    ag_plan *p;
} compiled;

static ag_status compile(ag_ctx *ctx, const char *text, bool inplace, const char *const *disabled, uint32_t nd,
                         compiled *c)
{
    memset(c, 0, sizeof *c);
    ag_status st = ag_text_read(ctx, text, strlen(text), "test.agt", &c->g);
    if (st == AG_OK)
        st = ag_ops_create(ctx, &c->ops);
    if (st == AG_OK) {
        ag_pass_env env = {c->g, c->ops, NULL};
        ag_pipeline_opts po = {sizeof po, disabled, nd};
        st = ag_pipeline_run_opts(&env, &po);
    }
    if (st == AG_OK) {
        ag_plan_opts po = ag_plan_defaults();
        po.inplace = inplace;
        st = ag_plan_build(ctx, c->g, c->ops, &po, &c->p);
    }
    return st;
}

static void release(compiled *c)
{
    ag_plan_destroy(c->p);
    ag_ops_destroy(c->ops);
    ag_graph_destroy(c->g);
}

static ag_node_id node(const compiled *c, const char *name)
{
    return agtest_find(c->g, AG_ROOT, name);
}

static const char *const k_chain =
    "graph g {\n"
    "  x = Data() -> (f32[256]) <index = 0>\n"
    "  a = Relu(x) -> (f32[256])\n"
    "  b = Sigmoid(a) -> (f32[256])\n"
    "  c = Neg(b) -> (f32[256])\n"
    "  side = Abs(a) -> (f32[256])\n"
    "  d = Add(c, side) -> (f32[256])\n"
    "  out = NetOutput(d)\n"
    "}\n";

static uint32_t verify_count(ag_ctx *ctx, const compiled *c, const ag_verify_layout *l, uint32_t schedules,
                             ag_verify_kind *kind)
{
    ag_verify_opts o = ag_verify_defaults();
    o.schedules = schedules;
    ag_verify_result *r = NULL;
    assert_int_equal(ag_verify_layout_run(ctx, c->g, c->ops, l, &o, &r), AG_OK);
    uint32_t n = ag_verify_violation_count(r);
    assert_int_equal(ag_verify_schedules_run(r), schedules);
    if (n && kind)
        *kind = ag_verify_violation_at(r, 0)->kind;
    ag_verify_result_destroy(r);
    return n;
}

static void test_clean_three_ways(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    for (int mode = 0; mode < 3; mode++) {
        compiled c;
        assert_int_equal(compile(ctx, k_chain, mode == 0, NULL, 0, &c), AG_OK);
        if (mode == 0)
            assert_true(ag_plan_inplace_count(c.p) > 0);
        ag_verify_layout *l = NULL;
        assert_int_equal(ag_verify_layout_from_plan(ctx, c.g, c.p, mode == 2, &l), AG_OK);
        assert_int_equal(verify_count(ctx, &c, l, 32, NULL), 0);
        ag_verify_layout_destroy(l);
        release(&c);
    }
    ag_ctx_destroy(ctx);
}

/* b and side both read a; overlapping b's output with a (alive until side
 * reads it) is a plan error the oracle must catch. */
static void test_corrupted_overlap(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    compiled c;
    assert_int_equal(compile(ctx, k_chain, false, NULL, 0, &c), AG_OK);
    ag_verify_layout *l = NULL;
    assert_int_equal(ag_verify_layout_from_plan(ctx, c.g, c.p, false, &l), AG_OK);
    uint64_t oa = 0, ob = 0;
    assert_true(ag_verify_layout_offset(l, node(&c, "a"), 0, &oa));
    assert_true(ag_verify_layout_offset(l, node(&c, "b"), 0, &ob));
    assert_int_not_equal(oa, ob);
    assert_int_equal(ag_verify_layout_move(l, node(&c, "b"), 0, oa), AG_OK);
    ag_verify_kind kind = AG_VIOL_COUNT_;
    assert_true(verify_count(ctx, &c, l, 16, &kind) > 0);
    assert_int_equal(kind, AG_VIOL_STALE_READ);
    /* Moving it back makes it clean again: the verdict is about the bytes. */
    assert_int_equal(ag_verify_layout_move(l, node(&c, "b"), 0, ob), AG_OK);
    assert_int_equal(verify_count(ctx, &c, l, 16, NULL), 0);
    assert_int_equal(ag_verify_layout_move(l, node(&c, "out"), 0, 0), AG_ENOTFOUND);
    ag_verify_layout_destroy(l);
    release(&c);
    ag_ctx_destroy(ctx);
}

/* A forced in-place merge: b = Sigmoid(a) writing into a while side still
 * reads a after it. */
static void test_forced_inplace(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    compiled c;
    assert_int_equal(compile(ctx, k_chain, true, NULL, 0, &c), AG_OK);
    ag_verify_layout *l = NULL;
    assert_int_equal(ag_verify_layout_from_plan(ctx, c.g, c.p, false, &l), AG_OK);
    assert_int_equal(verify_count(ctx, &c, l, 32, NULL), 0);
    /* The planner merged side into a (b reads a before); b into a it
     * refused, since side still reads a after b. */
    uint64_t oa = 0, os = 0;
    assert_true(ag_verify_layout_offset(l, node(&c, "a"), 0, &oa));
    assert_true(ag_verify_layout_offset(l, node(&c, "side"), 0, &os));
    assert_int_equal(oa, os);
    assert_int_equal(ag_verify_layout_move(l, node(&c, "b"), 0, oa), AG_OK);
    ag_verify_kind kind = AG_VIOL_COUNT_;
    assert_true(verify_count(ctx, &c, l, 32, &kind) > 0);
    assert_int_equal(kind, AG_VIOL_STALE_READ);
    ag_verify_layout_destroy(l);
    release(&c);
    ag_ctx_destroy(ctx);
}

static void test_out_of_arena(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    compiled c;
    assert_int_equal(compile(ctx, k_chain, false, NULL, 0, &c), AG_OK);
    ag_verify_layout *l = NULL;
    assert_int_equal(ag_verify_layout_from_plan(ctx, c.g, c.p, false, &l), AG_OK);
    assert_int_equal(ag_verify_layout_move(l, node(&c, "c"), 0, UINT64_C(1) << 40), AG_OK);
    ag_verify_opts o = ag_verify_defaults();
    o.schedules = 2;
    ag_verify_result *r = NULL;
    assert_int_equal(ag_verify_layout_run(ctx, c.g, c.ops, l, &o, &r), AG_OK);
    assert_true(ag_verify_violation_count(r) >= 1);
    const ag_verify_violation *v = ag_verify_violation_at(r, 0);
    assert_int_equal(v->kind, AG_VIOL_OUT_OF_ARENA);
    assert_string_equal(v->reader, "c:out0");
    assert_string_equal(v->space, "hbm");
    assert_non_null(strstr(v->message, "ends past the hbm arena"));
    ag_verify_result_destroy(r);
    ag_verify_layout_destroy(l);
    release(&c);
    ag_ctx_destroy(ctx);
}

static const char *const k_atomic =
    "graph g {\n"
    "  x = Data() -> (f32[4]) <index = 0>\n"
    "  acc = MyScatterAdd(x) -> (f32[4]) <atomic_output_index = [0]>\n"
    "  r = Relu(acc) -> (f32[4])\n"
    "  out = NetOutput(r)\n"
    "}\n";

/* The same seed gives the same violations; replay of the reported schedule
 * finds it again. */
static void test_replay(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    const char *off[] = {"atomic_addr_clean"};
    compiled c;
    assert_int_equal(compile(ctx, k_atomic, true, off, 1, &c), AG_OK);
    ag_verify_opts o = ag_verify_defaults();
    o.schedules = 8;
    o.seed = 42;
    ag_verify_result *r = NULL;
    assert_int_equal(ag_verify(ctx, c.g, c.ops, c.p, &o, &r), AG_OK);
    assert_int_equal(ag_verify_violation_count(r), 1);
    const ag_verify_violation *v = ag_verify_violation_at(r, 0);
    assert_int_equal(v->kind, AG_VIOL_ATOMIC_NOT_CLEARED);
    assert_string_equal(v->reader, "acc:out0");
    assert_int_equal(v->seed, 42);
    assert_int_equal(ag_verify_seed(r), 42);
    o.replay = v->schedule;
    ag_verify_result *r2 = NULL;
    assert_int_equal(ag_verify(ctx, c.g, c.ops, c.p, &o, &r2), AG_OK);
    assert_int_equal(ag_verify_schedules_run(r2), 1);
    assert_int_equal(ag_verify_violation_count(r2), 1);
    assert_string_equal(ag_verify_violation_at(r2, 0)->message, v->message);
    ag_verify_result_destroy(r2);
    ag_verify_result_destroy(r);
    release(&c);
    /* With the pass on: clean. */
    assert_int_equal(compile(ctx, k_atomic, true, NULL, 0, &c), AG_OK);
    o.replay = -1;
    assert_int_equal(ag_verify(ctx, c.g, c.ops, c.p, &o, &r), AG_OK);
    assert_int_equal(ag_verify_violation_count(r), 0);
    assert_true(ag_verify_nodes_executed(r) >= 8 * 4);
    ag_verify_result_destroy(r);
    release(&c);
    ag_ctx_destroy(ctx);
}

static void test_kind_names(void **state)
{
    (void)state;
    assert_string_equal(ag_verify_kind_name(AG_VIOL_STALE_READ), "stale read");
    assert_string_equal(ag_verify_kind_name(AG_VIOL_CONST_CLOBBERED), "constant clobbered");
    assert_string_equal(ag_verify_kind_name(AG_VIOL_ATOMIC_NOT_CLEARED), "atomic not cleared");
    assert_string_equal(ag_verify_kind_name(AG_VIOL_OUT_OF_ARENA), "out of arena");
    assert_null(ag_verify_kind_name(AG_VIOL_COUNT_));
}

/* ---- random DAGs ---- */

typedef struct gen {
    char *buf;
    size_t len, cap;
    uint64_t rng;
    bool atomics; /* generate atomic ops (MyScatterAdd, HcomAllReduce) */
} gen;

static uint32_t grand(gen *g, uint32_t n)
{
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return (uint32_t)(g->rng % n);
}

static void put(gen *g, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(g->buf + g->len, g->cap - g->len, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if ((size_t)n < g->cap - g->len) {
            g->len += (size_t)n;
            return;
        }
        g->cap = g->cap * 2 + (size_t)n + 64;
        g->buf = realloc(g->buf, g->cap);
        assert_non_null(g->buf);
    }
}

static void gen_graph(gen *g, uint32_t nodes)
{
    g->len = 0;
    put(g, "graph g {\n  x0 = Data() -> (f32[4]) <index = 0>\n  x1 = Data() -> (f32[4]) <index = 1>\n"
           "  k = Const() -> (f32[4] = {1.0, 2.0, 3.0, 4.0})\n  v = Variable() -> (f32[4])\n"
           "  flag = Data() -> (bool[]) <index = 2>\n");
    const char *vals[512];
    char names[512][16];
    /* Writers (Assign, collectives, While) take any value, also one whose
     * buffer is shared beyond its own consumers: a view (Reshape), an
     * Assign's output (its variable), a branch or loop output, the constant
     * and the variable.  The isolation passes judge a write by the buffer's
     * symbol, so a write through an alias must not reach the viewed
     * constant or the readers of the viewed value. */
    uint32_t nv = 0;
    vals[nv++] = "x0";
    vals[nv++] = "x1";
    vals[nv++] = "k";
    vals[nv++] = "v";
    for (uint32_t n = 0; n < nodes && nv < 500; n++) {
        snprintf(names[nv], sizeof names[nv], "n%u", n);
        uint32_t ia = grand(g, nv), ib = grand(g, nv);
        const char *a = vals[ia], *b = vals[ib];
        uint32_t pick = grand(g, 12);
        /* Atomic ops only when asked: see atomics_wanted. */
        if ((pick == 2 || pick == 6) && !g->atomics)
            pick = 7;
        switch (pick) {
        case 0:
            if (grand(g, 2))
                a = "v";
            put(g, "  %s = Assign(%s, %s) -> (f32[4])\n", names[nv], a, b);
            break;
        case 1:
            put(g, "  %s = Reshape(%s) -> (f32[2,2])\n", names[nv], a);
            break;
        case 2:
            put(g, "  %s = HcomAllReduce(%s) -> (f32[4])\n", names[nv], a);
            break;
        case 3:
            put(g, "  %s = HcomBroadcast(%s) -> (f32[4])\n", names[nv], a);
            break;
        case 4:
            put(g, "  %s = If(flag, %s, %s) -> (f32[4]) {\n", names[nv], a, b);
            put(g, "    graph then_%s {\n", names[nv]);
            put(g, "      d0 = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                   "      d1 = Data() -> (f32[4]) <_parent_node_index = 2>\n"
                   "      t0 = Relu(d0) -> (f32[4])\n      t1 = Add(t0, d1) -> (f32[4])\n"
                   "      o = NetOutput(t1 <_parent_node_index = 0>)\n    }\n");
            put(g, "    graph else_%s {\n      d0 = Data() -> (f32[4]) <_parent_node_index = 2>\n"
                   "      o = NetOutput(d0 <_parent_node_index = 0>)\n    }\n  }\n", names[nv]);
            break;
        case 5:
            put(g, "  %s = While(%s, %s) -> (f32[4], f32[4]) {\n", names[nv], a, b);
            put(g, "    graph cond_%s {\n      c0 = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                   "      p = MyPred(c0) -> (bool[])\n      o = NetOutput(p)\n    }\n", names[nv]);
            put(g, "    graph body_%s {\n      d0 = Data() -> (f32[4]) <_parent_node_index = 0>\n"
                   "      d1 = Data() -> (f32[4]) <_parent_node_index = 1>\n"
                   "      t0 = Neg(d0) -> (f32[4])\n      t1 = Add(t0, d1) -> (f32[4])\n"
                   "      o = NetOutput(t1 <_parent_node_index = 0>, d1 <_parent_node_index = 1>)\n    }\n  }\n",
                names[nv]);
            break;
        case 6:
            put(g, "  %s = MyScatterAdd(%s) -> (f32[4]) <atomic_output_index = [0]>\n", names[nv], a);
            break;
        case 7:
            put(g, "  %s = Add(%s, %s) -> (f32[4])\n", names[nv], a, b);
            break;
        default:
            put(g, "  %s = %s(%s) -> (f32[4])\n", names[nv], grand(g, 2) ? "Relu" : "Sigmoid", a);
            break;
        }
        vals[nv] = names[nv];
        nv++;
    }
    /* The last few values are the graph's outputs. */
    put(g, "  out = NetOutput(");
    uint32_t first = nv > 3 ? nv - 3 : 0;
    for (uint32_t k = first; k < nv; k++)
        put(g, "%s%s", k > first ? ", " : "", vals[k]);
    put(g, ")\n}\n");
}

static void test_random_dags(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    gen g = {NULL, 0, 0, 0, false};
    /* Atomic ops are in the mix: their buffers must stay untouched from
     * the AtomicAddrClean that zeroes them to the op that accumulates. */
    g.atomics = true;
    uint64_t seed0 = 0x5eed;
    const char *env = getenv("AG_VERIFY_RANDOM_SEED");
    if (env)
        seed0 = strtoull(env, NULL, 0);
    for (uint32_t k = 0; k < 60; k++) {
        uint64_t seed = seed0 + k;
        g.rng = seed * UINT64_C(0x9e3779b97f4a7c15) | 1;
        gen_graph(&g, 4 + grand(&g, 30));
        compiled c;
        ag_status st = compile(ctx, g.buf, grand(&g, 2) != 0, NULL, 0, &c);
        if (st != AG_OK)
            fprintf(stderr, "random DAG seed %llu: compile failed: %s\n%s", (unsigned long long)seed,
                    ag_ctx_errmsg(ctx), g.buf);
        assert_int_equal(st, AG_OK);
        ag_verify_opts o = ag_verify_defaults();
        o.schedules = 24;
        o.seed = seed;
        ag_verify_result *r = NULL;
        assert_int_equal(ag_verify(ctx, c.g, c.ops, c.p, &o, &r), AG_OK);
        if (ag_verify_violation_count(r)) {
            fprintf(stderr, "random DAG seed %llu (AG_VERIFY_RANDOM_SEED=%llu): %s\n%s", (unsigned long long)seed,
                    (unsigned long long)seed, ag_verify_violation_at(r, 0)->message, g.buf);
        }
        assert_int_equal(ag_verify_violation_count(r), 0);
        ag_verify_result_destroy(r);
        release(&c);
    }
    free(g.buf);
    ag_ctx_destroy(ctx);
}

/* ---- allocation failures ---- */

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    compiled c;
    ag_status st = compile(ctx, k_chain, true, NULL, 0, &c);
    ag_verify_layout *l = NULL;
    ag_verify_result *r = NULL;
    ag_verify_opts o = ag_verify_defaults();
    o.schedules = 3;
    if (st == AG_OK)
        st = ag_verify_layout_from_plan(ctx, c.g, c.p, true, &l);
    if (st == AG_OK)
        st = ag_verify_layout_run(ctx, c.g, c.ops, l, &o, &r);
    if (st == AG_OK && ag_verify_violation_count(r) != 0)
        st = AG_EINTERNAL;
    ag_verify_result_destroy(r);
    ag_verify_layout_destroy(l);
    if (st == AG_OK)
        st = ag_verify(ctx, c.g, c.ops, c.p, &o, &r);
    ag_verify_result_destroy(st == AG_OK ? r : NULL);
    release(&c);
    return st;
}

static ag_status oom_violation_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    const char *off[] = {"atomic_addr_clean"};
    compiled c;
    ag_status st = compile(ctx, k_atomic, true, off, 1, &c);
    ag_verify_result *r = NULL;
    ag_verify_opts o = ag_verify_defaults();
    o.schedules = 2;
    if (st == AG_OK)
        st = ag_verify(ctx, c.g, c.ops, c.p, &o, &r);
    if (st == AG_OK && ag_verify_violation_count(r) != 1)
        st = AG_EINTERNAL;
    ag_verify_result_destroy(r);
    release(&c);
    return st;
}

static void test_oom(void **state)
{
    (void)state;
    assert_true(AG_TEST_OOM_SWEEP(oom_body, NULL) > 1);
    assert_true(AG_TEST_OOM_SWEEP(oom_violation_body, NULL) > 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean_three_ways), cmocka_unit_test(test_corrupted_overlap),
        cmocka_unit_test(test_forced_inplace),   cmocka_unit_test(test_out_of_arena),
        cmocka_unit_test(test_replay),           cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_random_dags),      cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
