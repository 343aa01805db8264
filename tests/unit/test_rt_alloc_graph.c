/* Unit tests of the graph pools (alloc.h "Graph pools"): memory a capture
 * allocated and freed stays out of every other request's reach while its
 * graph may be launched, is reused inside the pool in the stream's own
 * order, and goes back, ordered after the launches, at the release.  The
 * corruption tests write through kernels, captured and eager, and read
 * what the memory holds once the device is idle. */
#include <stdatomic.h>

#include "support/agtest.h"
#include "support/rt/alloc_fix.h"

typedef struct put_args {
    uint32_t *p;
    uint32_t v;
} put_args;

static ag_status put_kernel(void *arg)
{
    const put_args *x = arg;
    *x->p = x->v;
    return AG_OK;
}

/* Enqueues on stream s a kernel that writes v at the start of b. */
static void put(fix *f, uint32_t s, ag_block *b, uint32_t v)
{
    put_args x = {(uint32_t *)ag_block_ptr(b), v};
    assert_int_equal(ag_dev_launch_copy(f->dev, f->s[s], put_kernel, &x, sizeof x, "put"), AG_OK);
}

static void each_mode(void (*fn)(ag_alloc_mode))
{
    fn(AG_ALLOC_MULTI);
    fn(AG_ALLOC_BASELINE);
}

static uint32_t pool_new(fix *f)
{
    uint32_t p = 0;
    assert_int_equal(ag_alloc_pool_create(f->a, &p), AG_OK);
    assert_true(p > 0);
    return p;
}

static ag_dev_graph *capture_end(fix *f, uint32_t s)
{
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_end(f->dev, f->s[s], &g), AG_OK);
    return g;
}

/* A capture on stream 0 allocates a block from a pool, writes it and frees
 * it.  Afterwards an eager request of the same size, which the front cache
 * would serve with that very block, gets other memory: a launch of the
 * graph writes the captured block and leaves the eager one alone.  After
 * the release the memory serves eager requests again. */
static void pool_keeps_captured(ag_alloc_mode mode)
{
    fix f;
    fix_open(&f, 2, mode, 0);
    uint32_t pool = pool_new(&f);
    assert_int_equal(ag_dev_capture_begin(f.dev, f.s[0]), AG_OK);
    assert_int_equal(ag_alloc_pool_begin(f.a, 0, pool), AG_OK);
    ag_block *b = xmalloc(&f, 0, 4096);
    void *bp = ag_block_ptr(b);
    put(&f, 0, b, 7);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.graph_parked, 4096);
    assert_int_equal(s.allocated, 4096); /* parked: still allocated */
    assert_int_equal(s.requested, 0);
    assert_int_equal(s.graph_pools, 1);
    assert_int_equal(ag_alloc_pool_end(f.a, 0), AG_OK);
    ag_dev_graph *g = capture_end(&f, 0);

    ag_block *e = xmalloc(&f, 0, 4096);
    ag_block *o = xmalloc(&f, 1, 4096);
    assert_ptr_not_equal(ag_block_ptr(e), bp);
    assert_ptr_not_equal(ag_block_ptr(o), bp);
    put(&f, 0, e, 1);
    assert_int_equal(ag_dev_graph_launch(f.dev, g, f.s[0]), AG_OK);
    assert_int_equal(ag_dev_synchronize(f.dev), AG_OK);
    assert_int_equal(*(uint32_t *)ag_block_ptr(e), 1);
    assert_int_equal(*(uint32_t *)bp, 7);
    assert_int_equal(ag_alloc_free(f.a, e, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, o, 1), AG_OK);

    assert_int_equal(ag_alloc_pool_release(f.a, pool, 0), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.graph_parked, 0);
    assert_int_equal(s.graph_pools, 0);
    assert_int_equal(s.allocated, 0);
    assert_int_equal(s.mallocs, s.frees);
    /* gone: a second release, or a begin, names it unknown */
    assert_int_equal(ag_alloc_pool_release(f.a, pool, 0), AG_EINVAL);
    assert_true(agtest_errmsg_has(f.ctx, "unknown or released"));
    assert_int_equal(ag_alloc_pool_begin(f.a, 0, pool), AG_EINVAL);
    ag_block *x[2] = {xmalloc(&f, 0, 4096), xmalloc(&f, 0, 4096)};
    assert_true(ag_block_ptr(x[0]) == bp || ag_block_ptr(x[1]) == bp);
    assert_int_equal(ag_alloc_free(f.a, x[0], 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, x[1], 0), AG_OK);
    ag_dev_graph_destroy(f.dev, g);
    fix_close(&f);
}

static void test_pool_keeps_captured(void **state)
{
    (void)state;
    each_mode(pool_keeps_captured);
}

/* Inside the pool a parked block serves the same stream's next request
 * that it holds at most twice; another stream's request in the same pool,
 * a smaller one, and one after a use by another stream get other memory. */
static void pool_reuse(ag_alloc_mode mode)
{
    fix f;
    fix_open(&f, 2, mode, 0);
    uint32_t pool = pool_new(&f);
    assert_int_equal(ag_alloc_pool_begin(f.a, 0, pool), AG_OK);
    assert_int_equal(ag_alloc_pool_begin(f.a, 1, pool), AG_OK);
    ag_block *b = xmalloc(&f, 0, 8192);
    void *bp = ag_block_ptr(b);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    /* a parked block is not live */
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_EINVAL);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_EINVAL);
    ag_block *o = xmalloc(&f, 1, 8192);     /* another stream */
    ag_block *small = xmalloc(&f, 0, 2048); /* more than twice its size */
    assert_ptr_not_equal(ag_block_ptr(o), bp);
    assert_ptr_not_equal(ag_block_ptr(small), bp);
    ag_block *c = xmalloc(&f, 0, 5000); /* fits, at most twice */
    assert_ptr_equal(ag_block_ptr(c), bp);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.graph_reuses, 1);
    assert_int_equal(s.graph_parked, 0);
    assert_int_equal(s.requested, 8192 + 2048 + 5000);
    /* used by stream 1: parked, but kept from stream 0's requests */
    assert_int_equal(ag_alloc_access(f.a, c, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
    /* the pool's own use is not the user's to free */
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_EINVAL);
    assert_true(agtest_errmsg_has(f.ctx, "does not use the block"));
    assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
    assert_int_equal(stats(f.a).graph_parked, 8192);
    ag_block *d = xmalloc(&f, 0, 8192);
    assert_ptr_not_equal(ag_block_ptr(d), bp);
    /* a release while streams still allocate from the pool is refused */
    assert_int_equal(ag_alloc_pool_release(f.a, pool, 0), AG_EINVAL);
    assert_true(agtest_errmsg_has(f.ctx, "still allocate"));
    assert_int_equal(ag_alloc_pool_end(f.a, 0), AG_OK);
    assert_int_equal(ag_alloc_pool_end(f.a, 1), AG_OK);
    assert_int_equal(ag_alloc_pool_end(f.a, 1), AG_EINVAL);
    assert_true(agtest_errmsg_has(f.ctx, "no graph pool"));
    /* live blocks outlive the pool as ordinary ones */
    assert_int_equal(ag_alloc_pool_release(f.a, pool, 1), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.graph_parked, 0);
    assert_int_equal(s.allocated, 8192 * 2 + 2048);
    assert_int_equal(ag_alloc_free(f.a, o, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, small, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, d, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, d, 0), AG_EINVAL); /* no pool's use left */
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.allocated, 0);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.mallocs, s.frees);
    fix_close(&f);
}

static void test_pool_reuse(void **state)
{
    (void)state;
    each_mode(pool_reuse);
}

/* The release on the launches' stream: a graph captured on stream 1 with a
 * pool block is launched on stream 2 behind a gate.  After the release,
 * stream 1's eager request gets the memory back and writes it; the write
 * must land after the launch's, however long the gate stays shut. */
static void release_after_launch(ag_alloc_mode mode)
{
    fix f;
    fix_open(&f, 3, mode, 0);
    uint32_t pool = pool_new(&f);
    assert_int_equal(ag_dev_capture_begin(f.dev, f.s[1]), AG_OK);
    assert_int_equal(ag_alloc_pool_begin(f.a, 1, pool), AG_OK);
    ag_block *b = xmalloc(&f, 1, 4096);
    uint32_t *bp = ag_block_ptr(b);
    put(&f, 1, b, 7);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_pool_end(f.a, 1), AG_OK);
    /* a capturing stream cannot be made to wait eagerly */
    assert_int_equal(ag_alloc_pool_release(f.a, pool, 2), AG_EINVAL);
    assert_true(agtest_errmsg_has(f.ctx, "captures"));
    ag_dev_graph *g = capture_end(&f, 1);
    atomic_int open = 0;
    gate(&f, 2, &open);
    assert_int_equal(ag_dev_graph_launch(f.dev, g, f.s[2]), AG_OK);
    assert_int_equal(ag_alloc_pool_release(f.a, pool, 2), AG_OK);
    ag_block *x[2] = {xmalloc(&f, 1, 4096), xmalloc(&f, 1, 4096)};
    ag_block *y = ag_block_ptr(x[0]) == bp ? x[0] : x[1];
    assert_ptr_equal(ag_block_ptr(y), bp); /* the memory is back */
    put(&f, 1, y, 9);
    atomic_store(&open, 1);
    assert_int_equal(ag_dev_synchronize(f.dev), AG_OK);
    assert_int_equal(*bp, 9);
    assert_int_equal(ag_alloc_free(f.a, x[0], 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, x[1], 1), AG_OK);
    ag_dev_graph_destroy(f.dev, g);
    fix_close(&f);
}

static void test_release_after_launch(void **state)
{
    (void)state;
    each_mode(release_after_launch);
}

/* Arguments and IDs. */
static void test_pool_arguments(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    uint32_t p1 = pool_new(&f), p2 = pool_new(&f);
    assert_int_not_equal(p1, p2);
    assert_int_equal(stats(f.a).graph_pools, 2);
    assert_int_equal(ag_alloc_pool_create(NULL, &p1), AG_EINVAL);
    assert_int_equal(ag_alloc_pool_create(f.a, NULL), AG_EINVAL);
    assert_int_equal(ag_alloc_pool_begin(f.a, 2, p1), AG_EINVAL);
    assert_true(agtest_errmsg_has(f.ctx, "out of range"));
    assert_int_equal(ag_alloc_pool_begin(f.a, 0, 0), AG_EINVAL);
    assert_int_equal(ag_alloc_pool_begin(f.a, 0, p2 + 1u), AG_EINVAL);
    assert_int_equal(ag_alloc_pool_begin(f.a, 0, p1), AG_OK);
    assert_int_equal(ag_alloc_pool_begin(f.a, 0, p2), AG_EINVAL);
    assert_true(agtest_errmsg_has(f.ctx, "already allocates from graph pool"));
    assert_int_equal(ag_alloc_pool_end(f.a, 2), AG_EINVAL);
    assert_int_equal(ag_alloc_pool_end(f.a, 0), AG_OK);
    assert_int_equal(ag_alloc_pool_release(f.a, p1, 5), AG_EINVAL);
    /* an empty pool goes at once; one left unreleased goes with the
     * allocator, its parked block with it */
    assert_int_equal(ag_alloc_pool_release(f.a, p1, 0), AG_OK);
    assert_int_equal(ag_alloc_pool_begin(f.a, 1, p2), AG_OK);
    ag_block *b = xmalloc(&f, 1, 100);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(stats(f.a).graph_parked, 512);
    fix_close(&f);
}

/* Two streams allocating in one pool (stream 1 in two pools in turn), a
 * block shared across them, reuses on both, a release on each stream. */
static const char pools_text[] = "streams 2\npool_begin a 0\npool_begin a 1\nalloc x 1000 0\nalloc y 1000 1\n"
                                 "free x 0\nalloc z 600 0\nrecord 0 1\nwait 1 0\nuse z 1\nfree y 1\n"
                                 "alloc u 900 1\nfree z 0\nfree z 1\npool_end 0\npool_begin b 0\n"
                                 "alloc w 2048 0\nfree w 0\nalloc v 2048 0\npool_end 1\npool_release a 1\n"
                                 "free v 0\nfree u 1\npool_end 0\npool_release b 0\nsync\n";

static ag_status sweep_body(ag_ctx *ctx, void *ud)
{
    ag_alloc_replay_result r;
    ag_status st = replay_text(ctx, pools_text, *(ag_alloc_mode *)ud, 3, &r);
    if (st == AG_OK && (r.stats.graph_reuses != 3 || r.stats.graph_pools))
        st = AG_EINTERNAL;
    return st;
}

/* Host out of memory at every allocation of a replay with pools (the
 * reader's pool state, the side table, the lists, the release's scratch):
 * a clean AG_ENOMEM and nothing leaked. */
static void test_pool_oom_sweep(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        ag_alloc_mode m = (ag_alloc_mode)mode;
        assert_true(AG_TEST_OOM_SWEEP(sweep_body, &m) > 10);
    }
}

/* The device failing at every N under the same replay, twice in a row:
 * the release's send and wait, and the recycling it starts, meet every
 * failure cleanly; the replays that ran through reused parked blocks. */
static void test_pool_fault_sweep(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        ag_alloc_stats ran = {.size = sizeof ran};
        for (int pmode = 0; pmode < 2; pmode++)
            for (uint64_t n = 1; trace_fault_at(pools_text, (ag_alloc_mode)mode, 0, 3, 2, pmode, n, &ran); n++)
                assert_true(n < 10000);
        assert_true(ran.graph_reuses > 0);
    }
}

/* A release refused for want of host memory gives nothing up and may be
 * tried again; so may a free that cannot make its pool's lists. */
static void test_release_retry(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        ag_testalloc ta;
        fix f;
        ag_testalloc_init(&ta, 0, 0);
        fix_open_with(&f, 2, (ag_alloc_mode)mode, 0, NULL, &ta);
        uint32_t pool = pool_new(&f);
        assert_int_equal(ag_alloc_pool_begin(f.a, 1, pool), AG_OK);
        ag_block *b = xmalloc(&f, 1, 4096);
        ta.fail_at = ta.calls + 1u; /* the pool's lists of stream 1 */
        assert_int_equal(ag_alloc_free(f.a, b, 1), AG_ENOMEM);
        ta.fail_at = 0;
        assert_int_equal(stats(f.a).graph_parked, 0);
        assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
        assert_int_equal(stats(f.a).graph_parked, 4096);
        assert_int_equal(ag_alloc_pool_end(f.a, 1), AG_OK);
        ta.fail_at = ta.calls + 1u; /* the release's scratch */
        assert_int_equal(ag_alloc_pool_release(f.a, pool, 0), AG_ENOMEM);
        ta.fail_at = 0;
        ag_alloc_stats s = stats(f.a);
        assert_int_equal(s.graph_parked, 4096);
        assert_int_equal(s.graph_pools, 1);
        assert_int_equal(ag_alloc_pool_release(f.a, pool, 0), AG_OK);
        s = stats(f.a);
        assert_int_equal(s.graph_parked, 0);
        assert_int_equal(s.graph_pools, 0);
        assert_int_equal(s.allocated, 0);
        fix_close(&f);
        assert_int_equal(ta.live_blocks, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_keeps_captured),
        cmocka_unit_test(test_pool_reuse),
        cmocka_unit_test(test_release_after_launch),
        cmocka_unit_test(test_pool_arguments),
        cmocka_unit_test(test_pool_oom_sweep),
        cmocka_unit_test(test_pool_fault_sweep),
        cmocka_unit_test(test_release_retry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
