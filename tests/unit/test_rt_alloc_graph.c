/* Unit tests of the graph pools (alloc.h "Graph pools"): memory a capture
 * allocated and freed stays out of every other request's reach while its
 * graph may be launched, is reused inside the pool in the stream's own
 * order, and goes back, ordered after the launches, at the release.  The
 * corruption tests write through kernels, captured and eager, and read
 * what the memory holds once the device is idle. */
#define _POSIX_C_SOURCE 200809L
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

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

/* Opens f (n streams, mode, the defaults) with one new pool; its ID. */
static uint32_t open_pool(fix *f, uint32_t n, ag_alloc_mode mode)
{
    fix_open(f, n, mode, 0);
    return pool_new(f);
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
    uint32_t pool = open_pool(&f, 2, mode);
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
    uint32_t pool = open_pool(&f, 2, mode);
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

/* The release holds back every stream that allocated in the pool until
 * the launches' stream reaches its current point, for certain, not by the
 * luck of the threads: a graph captured on stream 1 is launched on stream
 * 2 behind a shut gate; after the release, stream 1's eager request gets
 * the memory back and a kernel there writes it.  While the gate stays
 * shut, stream 1 must stay busy (it waits for stream 2), however long the
 * host looks; an unordered stream 1 runs its write at once and goes idle
 * (opening the gate right after the write is enqueued would catch a
 * missing or misdirected wait only when the write won the race).  While
 * stream 1 captures, the release is refused. */
static void release_holds_streams(ag_alloc_mode mode)
{
    fix f;
    uint32_t pool = open_pool(&f, 3, mode);
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
    /* 100 ms of looking: an unordered write has run long before */
    bool idle = false;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        assert_int_equal(ag_dev_stream_query(f.dev, f.s[1], &idle), AG_OK);
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &t1);
    } while (!idle && (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 100000000L);
    assert_false(idle); /* stream 1 waits for the launch */
    atomic_store(&open, 1);
    assert_int_equal(ag_dev_synchronize(f.dev), AG_OK);
    assert_int_equal(*bp, 9);
    assert_int_equal(ag_alloc_free(f.a, x[0], 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, x[1], 1), AG_OK);
    ag_dev_graph_destroy(f.dev, g);
    fix_close(&f);
}

static void test_release_holds_streams(void **state)
{
    (void)state;
    each_mode(release_holds_streams);
}

/* A release on a stream that captures is refused as well: its send to the
 * allocating streams would go into the graph, and their waits would order
 * them after nothing eager.  Nothing changes; once the capture ends, the
 * release goes through. */
static void release_stream_captures(ag_alloc_mode mode)
{
    fix f;
    uint32_t pool = open_pool(&f, 3, mode);
    assert_int_equal(ag_alloc_pool_begin(f.a, 1, pool), AG_OK);
    ag_block *b = xmalloc(&f, 1, 4096);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_pool_end(f.a, 1), AG_OK);
    assert_int_equal(ag_dev_capture_begin(f.dev, f.s[2]), AG_OK);
    assert_int_equal(ag_alloc_pool_release(f.a, pool, 2), AG_EINVAL);
    assert_true(agtest_errmsg_has(f.ctx, "stream 2 captures"));
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.graph_pools, 1);
    assert_int_equal(s.graph_parked, 4096);
    ag_dev_graph *g = capture_end(&f, 2);
    assert_int_equal(ag_alloc_pool_release(f.a, pool, 2), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.graph_pools, 0);
    assert_int_equal(s.allocated, 0);
    ag_dev_graph_destroy(f.dev, g);
    fix_close(&f);
}

static void test_release_stream_captures(void **state)
{
    (void)state;
    each_mode(release_stream_captures);
}

/* Parked blocks of one size class on one stream (4096..8191 bytes: A 4096,
 * B 6144, C 7168, parked in that order): a request takes the smallest
 * block that holds it at most twice, exactly twice included, and each one
 * taken leaves the class's list whole.  Taken from the head (C), the tail
 * (A) and then the middle (B), none is lost from the list and none stays
 * on it to be handed out a second time. */
static void pool_best_fit(ag_alloc_mode mode)
{
    fix f;
    uint32_t pool = open_pool(&f, 1, mode);
    assert_int_equal(ag_alloc_pool_begin(f.a, 0, pool), AG_OK);
    ag_block *a = xmalloc(&f, 0, 4096), *b = xmalloc(&f, 0, 6144), *c = xmalloc(&f, 0, 7168);
    ag_block *d = xmalloc(&f, 0, 8192);
    void *ap = ag_block_ptr(a), *bp = ag_block_ptr(b), *cp = ag_block_ptr(c), *dp = ag_block_ptr(d);
    assert_int_equal(ag_block_size(b), 6144);
    assert_int_equal(ag_block_size(c), 7168);
    assert_int_equal(ag_alloc_free(f.a, a, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
    ag_block *t[6];
    t[0] = xmalloc(&f, 0, 7168); /* only C holds it */
    assert_ptr_equal(ag_block_ptr(t[0]), cp);
    t[1] = xmalloc(&f, 0, 3500); /* A and B hold it: the smaller */
    assert_ptr_equal(ag_block_ptr(t[1]), ap);
    t[2] = xmalloc(&f, 0, 6144); /* B, still listed */
    assert_ptr_equal(ag_block_ptr(t[2]), bp);
    t[3] = xmalloc(&f, 0, 6144); /* nothing parked holds it: new memory */
    t[4] = xmalloc(&f, 0, 7000);
    void *taken[3] = {ap, bp, cp};
    for (int k = 3; k < 5; k++)
        for (int j = 0; j < 3; j++)
            assert_ptr_not_equal(ag_block_ptr(t[k]), taken[j]);
    assert_int_equal(stats(f.a).graph_reuses, 3);
    /* exactly twice the request */
    assert_int_equal(ag_alloc_free(f.a, d, 0), AG_OK);
    t[5] = xmalloc(&f, 0, 4096);
    assert_ptr_equal(ag_block_ptr(t[5]), dp);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.graph_reuses, 4);
    assert_int_equal(s.graph_parked, 0);
    for (int k = 0; k < 6; k++)
        assert_int_equal(ag_alloc_free(f.a, t[k], 0), AG_OK);
    assert_int_equal(ag_alloc_pool_end(f.a, 0), AG_OK);
    assert_int_equal(ag_alloc_pool_release(f.a, pool, 0), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.allocated, 0);
    assert_int_equal(s.mallocs, s.frees);
    fix_close(&f);
}

static void test_pool_best_fit(void **state)
{
    (void)state;
    each_mode(pool_best_fit);
}

/* The statistics through a park, a reuse and a release, per stream too
 * (stream 1 allocates from the pool, stream 0 does nothing): a parked
 * block stays allocated and counts its user's free once; a reuse counts a
 * malloc on its stream and may raise the peak of requested bytes; the
 * release recycles the parked block without a second free, and leaves the
 * live one (y) with its request. */
static void pool_stats(ag_alloc_mode mode)
{
    fix f;
    uint32_t pool = open_pool(&f, 2, mode);
    assert_int_equal(ag_alloc_pool_begin(f.a, 1, pool), AG_OK);
    ag_block *x = xmalloc(&f, 1, 8192);
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    ag_block *y = xmalloc(&f, 1, 1000); /* new memory: 1024 bytes */
    ag_alloc_stream_stats ss[2];
    ag_alloc_stats s = {.size = sizeof s};
    ag_alloc_stats_get(f.a, &s, ss);
    assert_int_equal(s.requested, 1000);
    assert_int_equal(s.peak_requested, 8192);
    assert_int_equal(ss[1].frees, 1);
    assert_int_equal(ss[1].allocated, 8192 + 1024);
    ag_block *z = xmalloc(&f, 1, 8000); /* x's block again */
    assert_ptr_equal(ag_block_ptr(z), ag_block_ptr(x));
    ag_alloc_stats_get(f.a, &s, ss);
    assert_int_equal(s.requested, 9000);
    assert_int_equal(s.peak_requested, 9000);
    assert_int_equal(s.mallocs, 3);
    assert_int_equal(ss[1].mallocs, 3);
    assert_int_equal(ss[1].allocated, 8192 + 1024);
    assert_int_equal(ss[0].mallocs, 0);
    assert_int_equal(ag_alloc_free(f.a, z, 1), AG_OK);
    ag_alloc_stats_get(f.a, &s, ss);
    assert_int_equal(s.frees, 2);
    assert_int_equal(ss[1].frees, 2);
    assert_int_equal(s.requested, 1000);
    assert_int_equal(ag_alloc_pool_end(f.a, 1), AG_OK);
    assert_int_equal(ag_alloc_pool_release(f.a, pool, 1), AG_OK);
    ag_alloc_stats_get(f.a, &s, ss);
    assert_int_equal(s.mallocs, 3);
    assert_int_equal(s.frees, 2);
    assert_int_equal(ss[1].frees, 2);
    assert_int_equal(s.requested, 1000);
    assert_int_equal(s.allocated, 1024);
    assert_int_equal(ss[1].allocated, 1024);
    assert_int_equal(s.graph_parked, 0);
    assert_int_equal(ag_alloc_free(f.a, y, 1), AG_OK);
    ag_alloc_stats_get(f.a, &s, ss);
    assert_int_equal(s.frees, 3);
    assert_int_equal(ss[1].frees, 3);
    assert_int_equal(s.requested, 0);
    assert_int_equal(s.allocated, 0);
    assert_int_equal(ss[1].allocated, 0);
    fix_close(&f);
}

static void test_pool_stats(void **state)
{
    (void)state;
    each_mode(pool_stats);
}

/* Host memory failing at each allocation of a release whose recycling
 * needs some (stream 0 allocated three blocks: C parked and used by no
 * other stream, recycled first; B parked after stream 2 used it, whose
 * recycling reserves a notice entry or an event; A still used by stream
 * 1).  A release that fails keeps what it did not give up in the pool:
 * a parked block stays parked (neither freed nor used by anyone), the
 * statistics add up, the pool may be begun again, and its lists still
 * serve a request; the release tried again goes through. */
static uint64_t release_oom_at(ag_alloc_mode mode, uint64_t n)
{
    ag_testalloc ta;
    fix f;
    ag_testalloc_init(&ta, 0, 0);
    fix_open_with(&f, 3, mode, 0, NULL, &ta);
    uint32_t pool = pool_new(&f);
    assert_int_equal(ag_alloc_pool_begin(f.a, 0, pool), AG_OK);
    ag_block *a = xmalloc(&f, 0, 4096), *b = xmalloc(&f, 0, 8192), *c = xmalloc(&f, 0, 16384);
    void *cp = ag_block_ptr(c);
    assert_int_equal(ag_alloc_access(f.a, a, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, a, 0), AG_OK);
    assert_int_equal(ag_alloc_access(f.a, b, 2), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 2), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
    assert_int_equal(ag_alloc_pool_end(f.a, 0), AG_OK);
    ta.fail_at = ta.calls + n;
    ag_status st = ag_alloc_pool_release(f.a, pool, 0);
    uint64_t nfail = ta.nfail;
    ta.fail_at = 0;
    ag_alloc_stats s = stats(f.a);
    if (nfail) {
        assert_int_equal(st, AG_ENOMEM);
        assert_int_equal(s.graph_pools, 1);
        /* B is still the pool's: parked, not live */
        assert_int_equal(ag_alloc_free(f.a, b, 2), AG_EINVAL);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_EINVAL);
        assert_int_equal(ag_alloc_access(f.a, b, 0), AG_EINVAL);
        assert_true(s.graph_parked == 8192 + 16384 || s.graph_parked == 8192);
        assert_int_equal(s.allocated, 4096 + s.graph_parked);
        assert_int_equal(s.frees, 2);
        /* the pool serves its stream again: C if still parked, else new */
        assert_int_equal(ag_alloc_pool_begin(f.a, 0, pool), AG_OK);
        ag_block *c2 = xmalloc(&f, 0, 16384);
        assert_true(s.graph_parked == 8192 || ag_block_ptr(c2) == cp);
        assert_int_equal(ag_alloc_free(f.a, c2, 0), AG_OK);
        assert_int_equal(ag_alloc_pool_end(f.a, 0), AG_OK);
        st = ag_alloc_pool_release(f.a, pool, 0);
        s = stats(f.a);
    }
    assert_int_equal(st, AG_OK);
    assert_int_equal(s.graph_pools, 0);
    assert_int_equal(s.graph_parked, 0);
    assert_int_equal(s.allocated, 4096);
    assert_int_equal(ag_alloc_free(f.a, a, 1), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.allocated, 0);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.mallocs, s.frees);
    fix_close(&f);
    assert_int_equal(ta.live_blocks, 0);
    return nfail;
}

static void test_release_oom_sweep(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        uint64_t n = 1;
        while (release_oom_at((ag_alloc_mode)mode, n))
            n++;
        assert_true(n > 2); /* the scratch, and some of the recycling */
    }
}

/* A parked block is nobody's to free or use: refused on any stream as not
 * live, the pool's own use included. */
static void parked_refused(ag_alloc_mode mode)
{
    fix f;
    uint32_t pool = open_pool(&f, 2, mode);
    assert_int_equal(ag_alloc_pool_begin(f.a, 0, pool), AG_OK);
    ag_block *b = xmalloc(&f, 0, 4096);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    for (uint32_t s = 0; s < 2; s++) {
        assert_int_equal(ag_alloc_free(f.a, b, s), AG_EINVAL);
        assert_true(agtest_errmsg_has(f.ctx, "not live"));
        assert_int_equal(ag_alloc_access(f.a, b, s), AG_EINVAL);
        assert_true(agtest_errmsg_has(f.ctx, "not live"));
    }
    assert_int_equal(stats(f.a).graph_parked, 4096);
    assert_int_equal(ag_alloc_pool_end(f.a, 0), AG_OK);
    assert_int_equal(ag_alloc_pool_release(f.a, pool, 0), AG_OK);
    fix_close(&f);
}

static void test_parked_refused(void **state)
{
    (void)state;
    each_mode(parked_refused);
}

/* The side table of pool blocks: many blocks in one pool at once (the
 * table grows past several sizes, each entry of its own), then pools
 * made, used and released over and over, whose entries are used again:
 * the host memory the allocator holds stays what the first round made,
 * and nothing is left when it is destroyed with a pool and a parked
 * block still there. */
static void pool_table(ag_alloc_mode mode)
{
    ag_testalloc ta;
    fix f;
    ag_testalloc_init(&ta, 0, 0);
    fix_open_with(&f, 2, mode, 0, NULL, &ta);
    uint32_t pool = pool_new(&f);
    assert_int_equal(ag_alloc_pool_begin(f.a, 1, pool), AG_OK);
    enum { NB = 100 };
    ag_block *b[NB];
    for (int k = 0; k < NB; k++)
        b[k] = xmalloc(&f, 1, 512u * (uint64_t)(k + 1));
    for (int k = 0; k < NB; k++)
        assert_int_equal(ag_alloc_free(f.a, b[k], 1), AG_OK);
    for (int k = NB; k-- > 0;) {
        ag_block *c = xmalloc(&f, 1, 512u * (uint64_t)(k + 1));
        assert_ptr_equal(c, b[k]); /* each its own block back */
        assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
    }
    assert_int_equal(stats(f.a).graph_reuses, NB);
    assert_int_equal(ag_alloc_pool_end(f.a, 1), AG_OK);
    assert_int_equal(ag_alloc_pool_release(f.a, pool, 0), AG_OK);
    uint64_t held = 0;
    for (int round = 0; round < 40; round++) {
        pool = pool_new(&f);
        assert_int_equal(ag_alloc_pool_begin(f.a, 0, pool), AG_OK);
        ag_block *x = xmalloc(&f, 0, 4096), *y = xmalloc(&f, 0, 4096);
        assert_int_equal(ag_alloc_free(f.a, x, 0), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
        assert_int_equal(ag_alloc_pool_end(f.a, 0), AG_OK);
        assert_int_equal(ag_alloc_pool_release(f.a, pool, 0), AG_OK);
        if (round == 0)
            held = ta.live_bytes;
        assert_int_equal(ta.live_bytes, held);
    }
    pool = pool_new(&f);
    assert_int_equal(ag_alloc_pool_begin(f.a, 1, pool), AG_OK);
    ag_block *z = xmalloc(&f, 1, 4096);
    assert_int_equal(ag_alloc_free(f.a, z, 1), AG_OK);
    fix_close(&f);
    assert_int_equal(ta.live_blocks, 0);
}

static void test_pool_table(void **state)
{
    (void)state;
    each_mode(pool_table);
}

/* Multi mode: a block born on stream 1 and lent to stream 0 (stream 1's
 * use released by a notice, stream 0's last free recycling it into its
 * borrow allocator) serves stream 0's request in a pool.  Parked, it
 * stays the pool's: stream 0's send to stream 1 does not take it home,
 * and stream 1's request gets other memory; stream 0's next request in
 * the pool gets it again.  The release recycles it where its stream
 * freed it, into stream 0's borrow allocator, and it goes home to stream
 * 1 with stream 0's next send, after which stream 1 gets it back. */
static void test_pool_borrowed_block(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    ag_block *b = xmalloc(&f, 1, 4096);
    void *bp = ag_block_ptr(b);
    assert_int_equal(ag_alloc_access(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    ag_alloc_stream_stats ss[2];
    ag_alloc_stats s = {.size = sizeof s};
    ag_alloc_stats_get(f.a, &s, ss);
    assert_int_equal(ss[0].borrowed, 4096);
    uint32_t pool = pool_new(&f);
    assert_int_equal(ag_alloc_pool_begin(f.a, 0, pool), AG_OK);
    ag_block *c = xmalloc(&f, 0, 4096);
    assert_ptr_equal(ag_block_ptr(c), bp);
    assert_int_equal(ag_block_birth(c), 1);
    assert_int_equal(stats(f.a).borrow_hits, 1);
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 0, 1), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 1, 0), AG_OK);
    ag_block *o = xmalloc(&f, 1, 4096);
    assert_ptr_not_equal(ag_block_ptr(o), bp);
    ag_block *d = xmalloc(&f, 0, 4096);
    assert_ptr_equal(ag_block_ptr(d), bp);
    assert_int_equal(ag_alloc_free(f.a, d, 0), AG_OK);
    assert_int_equal(ag_alloc_pool_end(f.a, 0), AG_OK);
    assert_int_equal(ag_alloc_pool_release(f.a, pool, 0), AG_OK);
    ag_alloc_stats_get(f.a, &s, ss);
    assert_int_equal(ss[0].borrowed, 4096);
    assert_int_equal(s.graph_parked, 0);
    assert_int_equal(s.allocated, 4096); /* o */
    ag_block *e = xmalloc(&f, 1, 4096); /* not home yet */
    assert_ptr_not_equal(ag_block_ptr(e), bp);
    assert_int_equal(ag_alloc_send(f.a, 0, 1), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 1, 0), AG_OK);
    ag_alloc_stats_get(f.a, &s, ss);
    assert_int_equal(ss[0].borrowed, 0);
    assert_int_equal(s.returned_home, 1);
    ag_block *g = xmalloc(&f, 1, 4096);
    assert_ptr_equal(ag_block_ptr(g), bp);
    assert_int_equal(ag_alloc_free(f.a, o, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, e, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, g, 1), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.allocated, 0);
    assert_int_equal(s.mallocs, s.frees);
    fix_close(&f);
}

/* Host memory (plain sharing, no events): a pool block used by another
 * stream and freed by both is parked all the same, kept from every
 * request (the stream's own outside the pool, another stream's), while a
 * block only its stream used serves that stream's next request in the
 * pool; the release gives both back and the counts add up. */
static void pool_host(ag_alloc_mode mode)
{
    fix f;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.mem_type = AG_MEM_HOST;
    fix_open_cfg(&f, 2, mode, 0, &c);
    uint32_t pool = pool_new(&f);
    assert_int_equal(ag_alloc_pool_begin(f.a, 0, pool), AG_OK);
    ag_block *b = xmalloc(&f, 0, 4096);
    void *bp = ag_block_ptr(b);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(stats(f.a).graph_parked, 4096);
    ag_block *x = xmalloc(&f, 0, 4096); /* b is shared: kept */
    ag_block *z = xmalloc(&f, 0, 2048);
    void *zp = ag_block_ptr(z);
    assert_int_equal(ag_alloc_free(f.a, z, 0), AG_OK);
    ag_block *w = xmalloc(&f, 0, 2048);
    assert_ptr_equal(ag_block_ptr(w), zp);
    assert_int_equal(ag_alloc_pool_end(f.a, 0), AG_OK);
    ag_block *y = xmalloc(&f, 1, 4096);
    ag_block *v = xmalloc(&f, 0, 4096);
    assert_ptr_not_equal(ag_block_ptr(x), bp);
    assert_ptr_not_equal(ag_block_ptr(y), bp);
    assert_ptr_not_equal(ag_block_ptr(v), bp);
    assert_int_equal(ag_alloc_free(f.a, x, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, y, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, v, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, w, 0), AG_OK);
    assert_int_equal(ag_alloc_pool_release(f.a, pool, 1), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.allocated, 0);
    assert_int_equal(s.graph_parked, 0);
    assert_int_equal(s.mallocs, 6);
    assert_int_equal(s.frees, 6);
    fix_close(&f);
}

static void test_pool_host(void **state)
{
    (void)state;
    each_mode(pool_host);
}

/* A block's recycling that fails on the device (its fallback event cannot
 * be recorded: the use is released all the same) is reported by the try
 * of the release that ends it, also when a later block of the same try ran
 * out of host memory and a second try finished the release.  Forty parked
 * blocks, each shared with stream 1, which a gate keeps busy, so that each
 * last free records its event at once (fallback_min 0); the first record
 * fails, and the host fails at each allocation in turn. */
static void test_release_reports_failure(void **state)
{
    (void)state;
    enum { NB = 40 };
    bool both = false; /* some N failed the host after the device */
    for (uint64_t n = 1;; n++) {
        assert_true(n < 1000);
        ag_testalloc ta;
        ag_testalloc_init(&ta, 0, 0);
        ag_allocator hook = ag_testalloc_hook(&ta);
        ag_ctx *ctx = ag_ctx_create(&hook);
        ag_device *sim = NULL, *dev = NULL;
        assert_int_equal(ag_device_sim_create(ctx, NULL, &sim), AG_OK);
        ag_dev_fault fl;
        ag_dev_fault_init(&fl, AG_DEV_ENTRY_BIT(AG_DEV_E_EVENT_RECORD), 0, 0, AG_FAULT_RETURN);
        assert_int_equal(ag_device_fault_wrap(ctx, sim, &fl, &dev), AG_OK);
        ag_dev_stream *s[2] = {0};
        for (int k = 0; k < 2; k++)
            assert_int_equal(ag_dev_stream_create(sim, &s[k]), AG_OK);
        ag_alloc_config c;
        ag_alloc_config_default(&c);
        c.nstreams = 2;
        c.fallback_min = 0;
        ag_memalloc *a = NULL;
        assert_int_equal(ag_alloc_create(ctx, dev, s, &c, &a), AG_OK);
        atomic_int open = 0;
        assert_int_equal(ag_dev_launch(sim, s[1], gate_kernel, &open, "gate"), AG_OK);
        uint32_t pool = 0;
        assert_int_equal(ag_alloc_pool_create(a, &pool), AG_OK);
        assert_int_equal(ag_alloc_pool_begin(a, 0, pool), AG_OK);
        for (int k = 0; k < NB; k++) {
            ag_block *b = NULL;
            assert_int_equal(ag_alloc_malloc(a, 0, 4096, &b), AG_OK);
            assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
            assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
            assert_int_equal(ag_alloc_free(a, b, 0), AG_OK);
        }
        assert_int_equal(ag_alloc_pool_end(a, 0), AG_OK);
        fl.fail_at = fl.calls + 1u; /* the first block's event */
        ta.fail_at = ta.calls + n;
        ag_status st = ag_alloc_pool_release(a, pool, 0);
        bool host = ta.nfail > 0;
        ta.fail_at = 0;
        if (st == AG_ENOMEM) {
            both = both || fl.nfail > 0;
            st = ag_alloc_pool_release(a, pool, 0);
        }
        assert_int_equal(fl.nfail, 1);
        assert_int_equal(st, AG_EDEVICE);
        assert_int_equal(stats(a).graph_pools, 0);
        atomic_store(&open, 1);
        ag_alloc_destroy(a);
        for (int k = 0; k < 2; k++)
            ag_dev_stream_destroy(sim, s[k]);
        ag_device_destroy(dev);
        close_empty(ctx, sim);
        assert_int_equal(ta.live_blocks, 0);
        if (!host)
            break;
    }
    assert_true(both);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_keeps_captured),
        cmocka_unit_test(test_pool_reuse),
        cmocka_unit_test(test_pool_arguments),
        cmocka_unit_test(test_pool_oom_sweep),
        cmocka_unit_test(test_pool_fault_sweep),
        cmocka_unit_test(test_release_retry),
        cmocka_unit_test(test_release_holds_streams),
        cmocka_unit_test(test_release_stream_captures),
        cmocka_unit_test(test_pool_best_fit),
        cmocka_unit_test(test_pool_stats),
        cmocka_unit_test(test_release_oom_sweep),
        cmocka_unit_test(test_parked_refused),
        cmocka_unit_test(test_pool_table),
        cmocka_unit_test(test_pool_borrowed_block),
        cmocka_unit_test(test_pool_host),
        cmocka_unit_test(test_release_reports_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
