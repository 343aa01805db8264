/* Tests of the memory planner and its independent checker: real plans pass
 * the checker, planted faults (overlap, misalignment, a broken continuous
 * group, a user input moved into the arena, a slice of a block or a view of
 * it off its place) are caught, branches share bytes, sizes come from
 * descriptors, atomic outputs left apart get a note, and allocation
 * failures leak nothing. */
#include "support/agtest.h"

#include "aliasguard/plan.h"
#include "plan/plan_internal.h"

#include <stdio.h>

static const char *const k_graph =
    "graph g {\n"
    "  c = Data() -> (bool[]) <index = 0>\n"
    "  x = Data() -> (f32[1024]) <index = 1>\n"
    "  h = Relu(x) -> (f32[1024])\n"
    "  r = If(c, h) -> (f32[1024]) {\n"
    "    graph then {\n"
    "      t = Data() -> (f32[1024]) <_parent_node_index = 1>\n"
    "      ta = Neg(t) -> (f32[1024])\n"
    "      tb = Abs(ta) -> (f32[1024])\n"
    "      tout = NetOutput(tb <_parent_node_index = 0>)\n"
    "    }\n"
    "    graph else {\n"
    "      e = Data() -> (f32[1024]) <_parent_node_index = 1>\n"
    "      ea = Abs(e) -> (f32[1024])\n"
    "      eb = Neg(ea) -> (f32[1024])\n"
    "      eout = NetOutput(eb <_parent_node_index = 0>)\n"
    "    }\n"
    "  }\n"
    "  a = Relu(r) -> (f32[10])\n"
    "  b = Relu(r) -> (f32[100])\n"
    "  ar = HcomAllReduce(a, b) -> (f32[10], f32[100])\n"
    "  y = Add(ar:0, ar:1) -> (f32[1024])\n"
    "  out = NetOutput(y)\n"
    "}\n";

typedef struct fixture {
    ag_ctx *ctx;
    ag_ops *ops;
    ag_graph *g;
    ag_plan *p;
} fixture;

static ag_status load(ag_ctx *ctx, const char *text, ag_ops **ops, ag_graph **g)
{
    ag_status st = ag_ops_create(ctx, ops);
    if (st != AG_OK)
        return st;
    st = ag_text_read(ctx, text, strlen(text), "test.agt", g);
    if (st != AG_OK) {
        ag_ops_destroy(*ops);
        *ops = NULL;
    }
    return st;
}

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    fx->ctx = agtest_ctx();
    assert_int_equal(load(fx->ctx, k_graph, &fx->ops, &fx->g), AG_OK);
    assert_int_equal(ag_plan_build(fx->ctx, fx->g, fx->ops, NULL, &fx->p), AG_OK);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    ag_plan_destroy(fx->p);
    ag_graph_destroy(fx->g);
    ag_ops_destroy(fx->ops);
    ag_ctx_destroy(fx->ctx);
    free(fx);
    return 0;
}

/* Tensor index of node name's output o. */
static uint32_t tensor_of(const fixture *fx, const char *name, uint32_t o)
{
    for (uint32_t k = 0; k < ag_plan_tensor_count(fx->p); k++) {
        const ag_plan_tensor *t = ag_plan_tensor_at(fx->p, k);
        if (t->output == o && strcmp(ag_node_name(fx->g, t->node), name) == 0)
            return k;
    }
    fail_msg("no tensor %s:%u", name, o);
    return AG_NONE;
}

static void test_real_plan_passes(void **state)
{
    fixture *fx = *state;
    assert_int_equal(ag_plan_check(fx->p), AG_OK);
    assert_true(ag_plan_peak_bytes(fx->p) >= ag_plan_lower_bound_bytes(fx->p));
    assert_int_equal(ag_plan_arena_count(fx->p), 1);
    assert_int_equal(ag_plan_arena_mem_type(fx->p, 0), AG_MEM_HBM);
    /* Exclusive branches: the two first temporaries share bytes. */
    const ag_plan_tensor *ta = ag_plan_tensor_at(fx->p, tensor_of(fx, "ta", 0));
    const ag_plan_tensor *ea = ag_plan_tensor_at(fx->p, tensor_of(fx, "ea", 0));
    assert_int_equal(ta->region, AG_REGION_ARENA);
    assert_int_equal(ta->offset, ea->offset);
    assert_int_not_equal(ta->buffer, ea->buffer);
    /* The branch results are the If's output buffer. */
    assert_int_equal(ag_plan_tensor_at(fx->p, tensor_of(fx, "tb", 0))->buffer,
                     ag_plan_tensor_at(fx->p, tensor_of(fx, "r", 0))->buffer);
    /* User IO outside the arena. */
    assert_int_equal(ag_plan_tensor_at(fx->p, tensor_of(fx, "x", 0))->region, AG_REGION_USER_INPUT);
    assert_int_equal(ag_plan_tensor_at(fx->p, tensor_of(fx, "y", 0))->region, AG_REGION_USER_OUTPUT);
    /* Every arena offset is aligned to the default 512. */
    for (uint32_t k = 0; k < ag_plan_tensor_count(fx->p); k++)
        if (ag_plan_tensor_at(fx->p, k)->region == AG_REGION_ARENA)
            assert_int_equal(ag_plan_tensor_at(fx->p, k)->offset % 512, 0);
    /* The collective's inputs: back to back in operand order. */
    const ag_plan_tensor *a = ag_plan_tensor_at(fx->p, tensor_of(fx, "a", 0));
    const ag_plan_tensor *b = ag_plan_tensor_at(fx->p, tensor_of(fx, "b", 0));
    assert_int_equal(b->offset, a->offset + 512);
}

static void test_planted_overlap(void **state)
{
    fixture *fx = *state;
    ag_plan *p = fx->p;
    /* h is alive across the If; move ta's buffer onto it. */
    uint32_t th = tensor_of(fx, "h", 0), tt = tensor_of(fx, "ta", 0);
    uint32_t bt = p->tensors[tt].buffer;
    uint64_t saved = p->buffers[bt].offset;
    p->buffers[bt].offset = p->tensors[th].offset;
    p->tensors[tt].offset = p->tensors[th].offset;
    assert_int_equal(ag_plan_check(p), AG_EVERIFY);
    assert_errmsg(fx->ctx, "overlap");
    p->buffers[bt].offset = saved;
    p->tensors[tt].offset = saved;
    assert_int_equal(ag_plan_check(p), AG_OK);
    /* A tensor off its buffer's offset. */
    p->tensors[tt].offset = saved + 512;
    assert_int_equal(ag_plan_check(p), AG_EVERIFY);
    assert_errmsg(fx->ctx, "offset differs");
    p->tensors[tt].offset = saved;
}

static void test_planted_misalignment_and_group(void **state)
{
    fixture *fx = *state;
    ag_plan *p = fx->p;
    uint32_t tb = tensor_of(fx, "b", 0);
    uint32_t buf = p->tensors[tb].buffer;
    uint64_t saved = p->tensors[tb].offset;
    p->tensors[tb].offset = saved + 512;
    p->buffers[buf].offset = saved + 512;
    assert_int_equal(ag_plan_check(p), AG_EVERIFY);
    assert_errmsg(fx->ctx, "continuous");
    p->tensors[tb].offset = saved;
    p->buffers[buf].offset = saved;
    uint32_t th = tensor_of(fx, "h", 0);
    buf = p->tensors[th].buffer;
    saved = p->tensors[th].offset;
    p->tensors[th].offset = saved + 8;
    p->buffers[buf].offset = saved + 8;
    assert_int_equal(ag_plan_check(p), AG_EVERIFY);
    p->tensors[th].offset = saved;
    p->buffers[buf].offset = saved;
    /* A user input moved into the arena. */
    uint32_t tx = tensor_of(fx, "x", 0);
    buf = p->tensors[tx].buffer;
    p->tensors[tx].region = AG_REGION_ARENA;
    p->buffers[buf].region = AG_REGION_ARENA;
    assert_int_equal(ag_plan_check(p), AG_EVERIFY);
    p->tensors[tx].region = AG_REGION_USER_INPUT;
    p->buffers[buf].region = AG_REGION_USER_INPUT;
    assert_int_equal(ag_plan_check(p), AG_OK);
}

static void test_align_and_no_zero_copy(void **state)
{
    fixture *fx = *state;
    ag_plan_opts o = ag_plan_defaults();
    o.align = 4096;
    o.zero_copy = false;
    ag_plan *p = NULL;
    assert_int_equal(ag_plan_build(fx->ctx, fx->g, fx->ops, &o, &p), AG_OK);
    assert_int_equal(ag_plan_check(p), AG_OK);
    for (uint32_t k = 0; k < ag_plan_tensor_count(p); k++) {
        const ag_plan_tensor *t = ag_plan_tensor_at(p, k);
        assert_int_not_equal(t->region, AG_REGION_USER_INPUT);
        assert_int_not_equal(t->region, AG_REGION_USER_OUTPUT);
        if (t->region == AG_REGION_ARENA)
            assert_int_equal(t->offset % 4096, 0);
    }
    ag_plan_destroy(p);
    o.align = 3;
    assert_int_equal(ag_plan_build(fx->ctx, fx->g, fx->ops, &o, &p), AG_EINVAL);
    assert_null(p);
}

static void test_unknown_size(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_ops *ops;
    ag_graph *g;
    const char *t = "graph g {\n  x = Data() -> (f32[?]) <index = 0>\n  y = Relu(x) -> (f32[?])\n"
                    "  z = Neg(y) -> (f32[?])\n  out = NetOutput(z)\n}\n";
    assert_int_equal(load(ctx, t, &ops, &g), AG_OK);
    ag_plan *p = NULL;
    assert_int_equal(ag_plan_build(ctx, g, ops, NULL, &p), AG_EINVAL);
    assert_errmsg(ctx, "node 'y' (Relu) output 0");
    assert_null(p);
    ag_graph_destroy(g);
    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
}

/* A block split in place (PhonySplit) and a view of one slice. */
static const char *const k_split =
    "graph g {\n"
    "  x = Data() -> (f32[12]) <index = 0>\n"
    "  b = Relu(x) -> (f32[12])\n"
    "  sp = PhonySplit(b) -> (f32[3], f32[4], f32[5])\n"
    "  v = Reshape(sp:1) -> (f32[2, 2])\n"
    "  u0 = Relu(sp:0) -> (f32[3])\n"
    "  u1 = Relu(v) -> (f32[2, 2])\n"
    "  u2 = Relu(sp:2) -> (f32[5])\n"
    "  m = Two(x) -> (f32[12], f32[12]) <atomic_output_index = [0, 1]>\n"
    "  mm = Relu(m:0) -> (f32[12])\n"
    "  out = NetOutput(u0, u1, u2, mm, m:1)\n"
    "}\n";

static void test_slices(void **state)
{
    (void)state;
    fixture f = {agtest_ctx(), NULL, NULL, NULL};
    fixture *fx = &f;
    assert_int_equal(load(fx->ctx, k_split, &fx->ops, &fx->g), AG_OK);
    assert_int_equal(ag_plan_build(fx->ctx, fx->g, fx->ops, NULL, &fx->p), AG_OK);
    ag_plan *p = fx->p;
    assert_int_equal(ag_plan_check(p), AG_OK);
    uint32_t tb = tensor_of(fx, "b", 0), t0 = tensor_of(fx, "sp", 0), t1 = tensor_of(fx, "sp", 1);
    uint32_t t2 = tensor_of(fx, "sp", 2), tv = tensor_of(fx, "v", 0);
    uint64_t base = p->tensors[tb].offset;
    /* Back to back by their own bytes (12, 16, 20), no padding. */
    assert_int_equal(p->tensors[t0].offset, base);
    assert_int_equal(p->tensors[t1].offset, base + 12);
    assert_int_equal(p->tensors[t2].offset, base + 28);
    assert_int_equal(p->tensors[tv].offset, base + 12);
    for (uint32_t t = t0; t <= t2; t++)
        assert_int_equal(p->tensors[t].buffer, p->tensors[tb].buffer);
    /* A slice one byte off: not right after the previous one. */
    p->tensors[t1].offset += 4;
    assert_int_equal(ag_plan_check(p), AG_EVERIFY);
    assert_errmsg(fx->ctx, "node 'sp' output 1");
    assert_errmsg(fx->ctx, "slice not right after the previous slice");
    p->tensors[t1].offset -= 4;
    /* The first slice away from its block's start. */
    p->tensors[t0].offset += 12;
    assert_int_equal(ag_plan_check(p), AG_EVERIFY);
    assert_errmsg(fx->ctx, "first slice not at the start of its block");
    p->tensors[t0].offset -= 12;
    /* The last slice larger than the block has room for. */
    p->tensors[t2].size += 4;
    assert_int_equal(ag_plan_check(p), AG_EVERIFY);
    assert_errmsg(fx->ctx, "slice ends beyond its block");
    p->tensors[t2].size -= 4;
    /* The view of slice 1 at the buffer's start, where it was before. */
    p->tensors[tv].offset = base;
    assert_int_equal(ag_plan_check(p), AG_EVERIFY);
    assert_errmsg(fx->ctx, "node 'v' output 0");
    assert_errmsg(fx->ctx, "offset differs from the tensor it views");
    p->tensors[tv].offset = base + 12;
    assert_int_equal(ag_plan_check(p), AG_OK);
    /* m's output 1 is the caller's: no group for one clean, and a note. */
    assert_int_equal(ag_plan_note_count(p), 1);
    assert_non_null(strstr(ag_plan_note_at(p, 0), "node 'm' (Two) output 1 in graph 'g': atomic outputs not grouped"));
    ag_plan_destroy(fx->p);
    ag_graph_destroy(fx->g);
    ag_ops_destroy(fx->ops);
    ag_ctx_destroy(fx->ctx);
}

static ag_status sweep_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_ops *ops = NULL;
    ag_graph *g = NULL;
    ag_plan *p = NULL;
    ag_status st = load(ctx, ud ? (const char *)ud : k_graph, &ops, &g);
    if (st == AG_OK)
        st = ag_plan_build(ctx, g, ops, NULL, &p);
    if (st == AG_OK)
        st = ag_plan_check(p);
    if (st == AG_OK) {
        ag_membuf mb;
        ag_membuf_init(&mb, ctx);
        st = ag_plan_write_json(p, ag_sink_membuf(&mb));
        if (st == AG_OK)
            st = ag_plan_write_csv(p, 0, ag_sink_membuf(&mb));
        ag_membuf_free(&mb);
    }
    ag_plan_destroy(p);
    ag_graph_destroy(g);
    ag_ops_destroy(ops);
    return st;
}

static void test_oom_sweep(void **state)
{
    (void)state;
    assert_true(AG_TEST_OOM_SWEEP(sweep_body, NULL) > 1);
    assert_true(AG_TEST_OOM_SWEEP(sweep_body, (void *)(uintptr_t)k_split) > 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_real_plan_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_planted_overlap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_planted_misalignment_and_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_align_and_no_zero_copy, setup, teardown),
        cmocka_unit_test(test_unknown_size),
        cmocka_unit_test(test_slices),
        cmocka_unit_test(test_oom_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
