/* Unit tests of the second layer, the per-stream pools: the alone bound
 * and its rounding, regions moved between pools (with an event, or none
 * once the owner was seen past it), the gather of a segment's regions,
 * what the resource clean keeps (pool regions, front caches) and counts,
 * the front cache's order, and the reclaim on a small device. */
#include <sched.h>
#include <stdatomic.h>

#include "support/agtest.h"
#include "support/rt/alloc_fix.h"

/* A large block's region empties on stream 0; stream 1 needs a region of
 * that size: the region moves, ordered by an event 0 -> 1, instead of
 * growing the device.  Without the move the device grows. */
static void test_region_move(void **state)
{
    (void)state;
    for (int steal = 1; steal >= 0; steal--) {
        fix f;
        fix_open(&f, 2, AG_ALLOC_MULTI, 0);
        f.a->cfg.steal = (uint32_t)steal;
        ag_block *b = xmalloc(&f, 0, 3u << 20);
        void *p = ag_block_ptr(b);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
        ag_block *c = xmalloc(&f, 1, 3u << 20);
        ag_alloc_stats s = stats(f.a);
        if (steal) {
            assert_ptr_equal(ag_block_ptr(c), p);
            assert_int_equal(s.regions_moved, 1);
            assert_int_equal(s.region_waits, 1);
            assert_int_equal(s.peak_reserved, 4u << 20);
        } else {
            assert_ptr_not_equal(ag_block_ptr(c), p);
            assert_int_equal(s.regions_moved, 0);
            assert_true(s.peak_reserved > (4u << 20));
        }
        assert_true(ag_heap_check(&f.a->st[0].pool[AG_POOL_LARGE]));
        assert_true(ag_heap_check(&f.a->st[1].pool[AG_POOL_LARGE]));
        assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
        fix_close(&f);
    }
}

/* A region whose owner the host has already seen complete past the point
 * where it emptied moves with no event: a deferred free recorded on stream
 * 0 after the region emptied, seen complete at once, says so.
 * The stream wait comes back once stream 0 has queued work again. */
static void test_region_move_seen(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    ag_block *x = xmalloc(&f, 0, 3u << 20);
    void *p = ag_block_ptr(x);
    assert_int_equal(ag_alloc_free(f.a, x, 0), AG_OK);
    /* born on 1, dropped last by 0: the fallback records an event on 0,
     * which is idle: the host sees it complete at once and b goes home */
    ag_block *b = xmalloc(&f, 1, 512);
    assert_int_equal(ag_alloc_access(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(f.a->npend, 0);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.polled_recycles, 1);
    assert_int_equal(s.pending, 0);
    ag_block *c = xmalloc(&f, 1, 3u << 20);
    s = stats(f.a);
    assert_ptr_equal(ag_block_ptr(c), p);
    assert_int_equal(s.polled_recycles, 1);
    assert_int_equal(s.regions_moved, 1);
    assert_int_equal(s.region_waits, 0);
    assert_true(heaps_ok(f.a));
    /* emptied again on 1, nothing seen since: the move back needs the event */
    assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
    ag_block *d = xmalloc(&f, 0, 3u << 20);
    s = stats(f.a);
    assert_ptr_equal(ag_block_ptr(d), p);
    assert_int_equal(s.regions_moved, 2);
    assert_int_equal(s.region_waits, 1);
    assert_true(heaps_ok(f.a));
    assert_int_equal(ag_alloc_free(f.a, d, 0), AG_OK);
    fix_close(&f);
}

/* The resource clean leaves the front caches as they are: the next
 * execution's first request of a size finds its block whole.  The first
 * pool miss of any stream after the clean gives every front cache back to
 * its pool, so that a region one of them kept shows wholly free: to the
 * missing stream's next look, or as a region another stream moves instead
 * of the device growing. */
static void test_clean_keeps_front(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    ag_block *a0 = xmalloc(&f, 0, 4096); /* a 512 KiB segment, a 256 KiB region for stream 0 */
    ag_block *c = xmalloc(&f, 1, 256u << 10); /* the rest of the segment, stream 1's region */
    assert_int_equal(ag_heap_cached(&f.a->l1), 0);
    void *p = ag_block_ptr(a0);
    assert_int_equal(ag_alloc_free(f.a, a0, 0), AG_OK);
    assert_int_equal(f.a->st[0].nrecent, 1);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_LAST), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(f.a->st[0].nrecent, 1); /* kept across the clean */
    a0 = xmalloc(&f, 0, 4096);
    assert_ptr_equal(ag_block_ptr(a0), p);
    assert_int_equal(f.a->st[0].nrecent, 0); /* served from it */
    ag_block *a1 = xmalloc(&f, 0, 8192);
    assert_int_equal(ag_alloc_free(f.a, a1, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, a0, 0), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_LAST), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(f.a->st[0].nrecent, 2);
    a1 = xmalloc(&f, 0, 1024); /* the pool serves it: the front cache stays */
    assert_int_equal(f.a->st[0].nrecent, 2);
    assert_int_equal(ag_alloc_free(f.a, a1, 0), AG_OK);
    a1 = xmalloc(&f, 0, 250u << 10); /* a miss: the region merges whole and serves it */
    assert_int_equal(f.a->st[0].nrecent, 0);
    assert_ptr_equal(ag_block_ptr(a1), p);
    assert_int_equal(stats(f.a).device_allocs, 1);
    assert_int_equal(ag_alloc_free(f.a, a1, 0), AG_OK); /* too large for the front cache */
    assert_int_equal(f.a->st[0].nrecent, 0);
    a0 = xmalloc(&f, 0, 4096);
    assert_int_equal(ag_alloc_free(f.a, a0, 0), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_LAST), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(f.a->st[0].nrecent, 1);
    /* stream 1's region is full: its miss moves stream 0's region, whose
     * one block the front cache kept, rather than growing the device */
    ag_block *d = xmalloc(&f, 1, 8192);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(f.a->st[0].nrecent, 0);
    assert_int_equal(s.device_allocs, 1);
    assert_int_equal(s.regions_moved, 1);
    assert_ptr_equal(ag_block_ptr(d), p);
    assert_int_equal(ag_alloc_free(f.a, d, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
    assert_true(heaps_ok(f.a));
    fix_close(&f);
}

/* The front cache keeps the front_blocks blocks recycled last, oldest
 * first: a block recycled into a full cache sends the oldest back to its
 * pool, and a block taken from the middle leaves the others in their
 * order.  Both modes share it; front_blocks 0 turns it off. */
static void test_front_evicts_oldest(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        for (uint32_t fb = 4; fb <= AG_ALLOC_MAX_FRONT; fb += AG_ALLOC_MAX_FRONT - 4u) {
            ag_alloc_config c;
            ag_alloc_config_default(&c);
            assert_int_equal(c.front_blocks, 4);
            c.front_blocks = fb;
            fix f;
            fix_open_cfg(&f, 1, mode ? AG_ALLOC_BASELINE : AG_ALLOC_MULTI, 0, &c);
            uint32_t n = fb + 3u;
            ag_block *b[AG_ALLOC_MAX_FRONT + 3u];
            void *p[AG_ALLOC_MAX_FRONT + 3u];
            for (uint32_t k = 0; k < n; k++) { /* sizes 1, 2, ... KiB */
                b[k] = xmalloc(&f, 0, (k + 1u) << 10);
                p[k] = ag_block_ptr(b[k]);
            }
            ag_astream *s = &f.a->st[0];
            for (uint32_t k = 0; k < fb; k++)
                assert_int_equal(ag_alloc_free(f.a, b[k], 0), AG_OK);
            assert_int_equal(s->nrecent, fb);
            /* full: the next one sends the oldest (1 KiB) back to the pool */
            assert_int_equal(ag_alloc_free(f.a, b[fb], 0), AG_OK);
            assert_int_equal(s->nrecent, fb);
            assert_int_equal(s->recent[0]->size, 2u << 10);
            assert_int_equal(s->recent[fb - 1u]->size, (fb + 1u) << 10);
            /* the oldest left (2 KiB) is taken: the others keep their order */
            b[1] = xmalloc(&f, 0, 2u << 10);
            assert_ptr_equal(ag_block_ptr(b[1]), p[1]);
            assert_int_equal(s->nrecent, fb - 1u);
            assert_int_equal(s->recent[0]->size, 3u << 10);
            /* two more: the first fills the cache, the second sends 3 KiB back */
            assert_int_equal(ag_alloc_free(f.a, b[fb + 1u], 0), AG_OK);
            assert_int_equal(ag_alloc_free(f.a, b[fb + 2u], 0), AG_OK);
            assert_int_equal(s->nrecent, fb);
            assert_int_equal(s->recent[0]->size, 4u << 10);
            /* a size sent back comes from the pool, and the cache stays */
            ag_block *x = xmalloc(&f, 0, 3u << 10);
            assert_int_equal(s->nrecent, fb);
            /* the newest is served from the cache, whole */
            b[n - 1u] = xmalloc(&f, 0, (uint64_t)n << 10);
            assert_ptr_equal(ag_block_ptr(b[n - 1u]), p[n - 1u]);
            assert_int_equal(s->nrecent, fb - 1u);
            assert_true(heaps_ok(f.a));
            assert_int_equal(ag_alloc_free(f.a, x, 0), AG_OK);
            assert_int_equal(ag_alloc_free(f.a, b[1], 0), AG_OK);
            assert_int_equal(ag_alloc_free(f.a, b[n - 1u], 0), AG_OK);
            fix_close(&f);
        }
        /* without front caches every block goes back to its pool */
        ag_alloc_config c;
        ag_alloc_config_default(&c);
        c.front_blocks = 0;
        fix f;
        fix_open_cfg(&f, 1, mode ? AG_ALLOC_BASELINE : AG_ALLOC_MULTI, 0, &c);
        ag_block *x = xmalloc(&f, 0, 4096);
        assert_int_equal(ag_alloc_free(f.a, x, 0), AG_OK);
        assert_int_equal(f.a->st[0].nrecent, 0);
        assert_int_equal(stats(f.a).cached, stats(f.a).reserved);
        fix_close(&f);
    }
}

/* Between two executions the pools keep their regions: after the clean
 * they are idle, and another stream takes one whole with no event and no
 * device call.  With a cache limit they go to L1, which gives the excess
 * to the device. */
static void test_clean_keeps_regions(void **state)
{
    (void)state;
    for (int limit = 0; limit < 2; limit++) {
        fix f;
        fix_open(&f, 2, AG_ALLOC_MULTI, 0);
        if (limit)
            f.a->cfg.l1_cache_limit = 0;
        ag_block *b = xmalloc(&f, 0, 3u << 20);
        void *p = ag_block_ptr(b);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
        assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_LAST), AG_OK);
        assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
        ag_alloc_stats s = stats(f.a);
        if (limit) {
            assert_int_equal(s.reserved, 0);
            assert_int_equal(s.device_frees, 1);
        } else {
            assert_int_equal(s.reserved, 4u << 20);
            assert_int_equal(ag_heap_cached(&f.a->l1), 0);
            assert_int_equal(ag_heap_cached(&f.a->st[0].pool[AG_POOL_LARGE]), 4u << 20);
            ag_block *c = xmalloc(&f, 1, 3u << 20);
            s = stats(f.a);
            assert_ptr_equal(ag_block_ptr(c), p);
            assert_int_equal(s.device_allocs, 1);
            assert_int_equal(s.regions_moved, 1);
            assert_int_equal(s.region_waits, 0); /* idle since the clean */
            assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
        }
        fix_close(&f);
    }
}

/* A region cut for a large request alone serves a request of about its
 * size only: a 32 MiB region is not cut for 20 MiB (it would be gone when
 * 32 MiB come again), but serves 22 MiB (less than half again as large,
 * large_slack 50%); with large_slack 100% it serves 20 MiB too. */
static void test_alone_bound(void **state)
{
    (void)state;
    assert_int_equal(ag_fit_limit(100, 50), 151);
    assert_int_equal(ag_fit_limit(100, 0), 101);
    assert_int_equal(ag_fit_limit(UINT64_MAX / 2u, 100), UINT64_MAX);
    assert_int_equal(ag_fit_limit(UINT64_MAX - 1u, 0), UINT64_MAX);
    ag_alloc_config cfg;
    ag_alloc_config_default(&cfg);
    cfg.large_slack = 100;
    fix f;
    fix_open_cfg(&f, 1, AG_ALLOC_MULTI, 0, &cfg);
    ag_block *w = xmalloc(&f, 0, 32u << 20);
    void *pw = ag_block_ptr(w);
    assert_int_equal(ag_alloc_free(f.a, w, 0), AG_OK);
    w = xmalloc(&f, 0, 20u << 20);
    assert_ptr_equal(ag_block_ptr(w), pw);
    assert_int_equal(ag_alloc_free(f.a, w, 0), AG_OK);
    fix_close(&f);
    fix_open(&f, 1, AG_ALLOC_MULTI, 0);
    ag_block *a = xmalloc(&f, 0, 32u << 20);
    void *pa = ag_block_ptr(a);
    assert_int_equal(ag_alloc_free(f.a, a, 0), AG_OK);
    ag_block *b = xmalloc(&f, 0, 20u << 20);
    assert_ptr_not_equal(ag_block_ptr(b), pa);
    assert_int_equal(stats(f.a).device_allocs, 2);
    a = xmalloc(&f, 0, 32u << 20);
    assert_ptr_equal(ag_block_ptr(a), pa);
    assert_int_equal(stats(f.a).device_allocs, 2);
    assert_int_equal(ag_alloc_free(f.a, a, 0), AG_OK);
    ag_block *c = xmalloc(&f, 0, 22u << 20);
    assert_ptr_equal(ag_block_ptr(c), pa);
    assert_int_equal(stats(f.a).device_allocs, 2);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
    fix_close(&f);
}

/* A request of large_alone or more gets a region of its own: the multi mode
 * rounds it to alone_round (64 KiB, L1's page), the baseline to large_round
 * (2 MiB).  24 MiB + 2560 B reserves 24 MiB + 64 KiB, or 26 MiB; with
 * alone_round 2 MiB the multi mode reserves 26 MiB too. */
static void test_alone_round(void **state)
{
    (void)state;
    const uint64_t want = (24u << 20) + 2560u;
    struct {
        ag_alloc_mode mode;
        uint64_t alone_round, reserved;
    } cases[] = {
        {AG_ALLOC_MULTI, 64u << 10, (24u << 20) + (64u << 10)},
        {AG_ALLOC_BASELINE, 64u << 10, 26u << 20},
        {AG_ALLOC_MULTI, 2u << 20, 26u << 20},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ag_alloc_config cfg;
        ag_alloc_config_default(&cfg);
        cfg.mode = cases[k].mode;
        cfg.alone_round = cases[k].alone_round;
        fix f;
        fix_open_cfg(&f, 1, cases[k].mode, 0, &cfg);
        ag_block *b = xmalloc(&f, 0, want);
        ag_alloc_stats s = stats(f.a);
        assert_int_equal(s.reserved, cases[k].reserved);
        assert_int_equal(s.device_allocs, 1);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
        fix_close(&f);
    }
}

/* A move never takes a region of the growing pool itself: its own free
 * region refused by the alone bound (30 MiB + 64 KiB for 20 MiB + 512 B,
 * more than large_slack above it) stays where it is, though it is within
 * the move's limit for the request's 20 MiB + 64 KiB region; the device
 * grows. */
static void test_move_skips_own_pool(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 1, AG_ALLOC_MULTI, 0);
    const uint64_t own = (30u << 20) + (64u << 10);
    ag_block *a = xmalloc(&f, 0, own);
    void *pa = ag_block_ptr(a);
    assert_int_equal(ag_alloc_free(f.a, a, 0), AG_OK);
    ag_block *b = xmalloc(&f, 0, (20u << 20) + 512u);
    ag_alloc_stats s = stats(f.a);
    assert_ptr_not_equal(ag_block_ptr(b), pa);
    assert_int_equal(s.regions_moved, 0);
    assert_int_equal(s.regions_gathered, 0);
    assert_int_equal(s.device_allocs, 2);
    assert_int_equal(s.reserved, own + (20u << 20) + (64u << 10));
    assert_int_equal(ag_heap_cached(&f.a->st[0].pool[AG_POOL_LARGE]), own);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    fix_close(&f);
}

/* The alone bound is the request's, not its region's: 30 MiB + 64 KiB is
 * more than 50% above a request of 20 MiB + 512 bytes, though not above
 * its region (20 MiB + 64 KiB, rounded to alone_round).  Such a region
 * neither moves from another stream's pool (variant 0) nor is cut from a
 * span L1 caches (variant 1, where a cache limit sends the pools' regions
 * to L1 at the clean): the device grows for the request instead. */
static void test_alone_bound_is_request(void **state)
{
    (void)state;
    const uint64_t big = (30u << 20) + (64u << 10), want = (20u << 20) + 512u;
    assert_true(big >= ag_fit_limit(want, 50));
    assert_true(big < ag_fit_limit(want + (64u << 10) - 512u, 50));
    for (int v = 0; v < 2; v++) {
        ag_alloc_config c;
        ag_alloc_config_default(&c);
        if (v == 1)
            c.l1_cache_limit = 1u << 30;
        fix f;
        fix_open_cfg(&f, 2, AG_ALLOC_MULTI, 0, &c);
        ag_block *x = xmalloc(&f, 1, big);
        void *px = ag_block_ptr(x);
        assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
        if (v == 1) {
            assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
            assert_int_equal(ag_heap_cached(&f.a->l1), big);
        }
        ag_block *y = xmalloc(&f, 0, want);
        ag_alloc_stats s = stats(f.a);
        assert_ptr_not_equal(ag_block_ptr(y), px);
        assert_int_equal(s.regions_moved, 0);
        assert_int_equal(s.device_allocs, 2);
        assert_int_equal(s.reserved, big + (20u << 20) + (64u << 10));
        assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
        fix_close(&f);
    }
}

/* The smallest bin holding a region that needs no event ends the search:
 * stream 1's idle 4 MiB + 64 KiB region serves stream 0's request of that
 * size, not stream 0's own free small region of 5 MiB in the next bin
 * (small regions of 5 MiB: small_size 4 MiB, small_region 40 MiB). */
static void test_move_nearest_idle(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.small_size = 4u << 20;
    c.small_region = 40u << 20;
    c.large_round = 64u << 10;
    const uint64_t want = (4u << 20) + (64u << 10);
    fix f;
    fix_open_cfg(&f, 2, AG_ALLOC_MULTI, 0, &c);
    ag_block *x = xmalloc(&f, 1, want);
    void *px = ag_block_ptr(x);
    ag_block *own = xmalloc(&f, 0, 1u << 20);
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, own, 0), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_LAST), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(ag_heap_cached(&f.a->st[0].pool[AG_POOL_SMALL]), 5u << 20);
    ag_block *b = xmalloc(&f, 0, want);
    ag_alloc_stats s = stats(f.a);
    assert_ptr_equal(ag_block_ptr(b), px);
    assert_int_equal(ag_block_size(b), want);
    assert_int_equal(s.regions_moved, 1);
    assert_int_equal(s.region_waits, 0); /* idle since the clean */
    assert_int_equal(s.device_allocs, 2);
    assert_int_equal(ag_heap_cached(&f.a->st[0].pool[AG_POOL_SMALL]), 5u << 20);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    fix_close(&f);
}

/* Stream 1 frees a region of have bytes, then stream 0 asks for want: the
 * region must not move (stream 0 gets another block, of want bytes, and no
 * move is counted).  Returns that block; *s, the statistics right after
 * the request. */
static ag_block *region_stays(fix *f, uint64_t have, uint64_t want, ag_alloc_stats *s)
{
    ag_block *x = xmalloc(f, 1, have);
    void *px = ag_block_ptr(x);
    assert_int_equal(ag_alloc_free(f->a, x, 1), AG_OK);
    ag_block *y = xmalloc(f, 0, want);
    *s = stats(f->a);
    assert_ptr_not_equal(ag_block_ptr(y), px);
    assert_int_equal(ag_block_size(y), want);
    assert_int_equal(s->regions_moved, 0);
    return y;
}

/* A move stays below max_split for a smaller request also when its limit
 * (the size asked plus one L1 segment) is exactly max_split: a free 4 MiB
 * region of stream 1 (max_split 4 MiB) is not given whole to stream 0's
 * 2 MiB request. */
static void test_move_max_split_exact(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.max_split = 4u << 20;
    fix f;
    fix_open_cfg(&f, 2, AG_ALLOC_MULTI, 0, &c);
    ag_alloc_stats s;
    ag_block *y = region_stays(&f, 4u << 20, 2u << 20, &s);
    assert_int_equal(s.reserved, 6u << 20);
    assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    fix_close(&f);
}

/* A move to a request of max_split or more wastes less than large_region:
 * with large_slack 100% a 20 MiB request (max_split 16 MiB) would take up
 * to 40 MiB, but a free 40 MiB region wastes exactly large_region (20 MiB)
 * and stays; the gather gives it to L1, which does not serve it either. */
static void test_move_oversize_waste_exact(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.max_split = 16u << 20;
    c.large_slack = 100;
    fix f;
    fix_open_cfg(&f, 2, AG_ALLOC_MULTI, 0, &c);
    ag_alloc_stats s;
    ag_block *y = region_stays(&f, 40u << 20, 20u << 20, &s);
    assert_int_equal(s.regions_gathered, 1);
    assert_int_equal(s.reserved, 60u << 20);
    assert_int_equal(ag_heap_cached(&f.a->l1), 40u << 20);
    assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    fix_close(&f);
}

/* A move to a request of large_alone or more takes no region of
 * ag_fit_limit(size, large_slack) bytes or more, as the pools would not:
 * with 64-byte pages and large_slack 1%, a 6400-byte region is just more
 * than 1% larger than a 6336-byte request and stays with stream 1. */
static void test_move_alone_limit_exact(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.min_block = 64;
    c.page_size = 64;
    c.l1_segment = 64; /* L1 grows by the request alone */
    c.small_size = 1024;
    c.large_alone = 4096;
    c.large_slack = 1;
    c.alone_round = 64;
    assert_int_equal(ag_fit_limit(6336, 1), 6400);
    fix f;
    fix_open_cfg(&f, 2, AG_ALLOC_MULTI, 0, &c);
    ag_alloc_stats s;
    ag_block *y = region_stays(&f, 6400, 6336, &s);
    assert_int_equal(s.device_allocs, 2);
    assert_int_equal(s.reserved, 6400 + 6336);
    assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    fix_close(&f);
}

/* A region moves only when L1 caches less than the region: with exactly
 * the region cached (the 256 KiB tail of L1's first 512 KiB segment) L1
 * serves it, and stream 1's free region of that size stays. */
static void test_move_l1_holds_exact(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    ag_block *x = xmalloc(&f, 1, 128u << 10); /* a 256 KiB small region */
    void *px = ag_block_ptr(x);
    assert_int_equal(ag_heap_cached(&f.a->l1), 256u << 10);
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    ag_block *y = xmalloc(&f, 0, 128u << 10);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal((uintptr_t)ag_block_ptr(y), (uintptr_t)px + (256u << 10));
    assert_int_equal(s.regions_moved, 0);
    assert_int_equal(s.region_waits, 0);
    assert_int_equal(s.device_allocs, 1);
    assert_int_equal(ag_heap_cached(&f.a->l1), 0);
    assert_int_equal(ag_heap_cached(&f.a->st[1].pool[AG_POOL_SMALL]), 256u << 10);
    assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    fix_close(&f);
}

/* A request of exactly large_alone is alone: its region is rounded to
 * alone_round (64 KiB), not to large_round (4 MiB here): 10 MiB reserves
 * 10 MiB, not 12 MiB. */
static void test_alone_round_exact(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.large_round = 4u << 20;
    fix f;
    fix_open_cfg(&f, 1, AG_ALLOC_MULTI, 0, &c);
    ag_block *b = xmalloc(&f, 0, c.large_alone);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.reserved, c.large_alone);
    assert_int_equal(s.device_allocs, 1);
    assert_int_equal(ag_heap_cached(&f.a->st[0].pool[AG_POOL_LARGE]), 0);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    fix_close(&f);
}

/* Before the device memory grows past its peak, idle free regions of the
 * pools go back to L1 and merge: two 4 MiB regions stream 1 cut from an
 * 8 MiB segment serve stream 0's 8 MiB request again, with no device call.
 * Without the gather the device grows to twice the memory. */
/* An 8 MiB segment in L1 (the clean gives stream 0's region back under a
 * cache limit), then cut into two 4 MiB regions for stream 1's blocks x
 * and y; returns the segment's address. */
static void *cut_segment(fix *f, ag_block **x, ag_block **y)
{
    f->a->cfg.l1_cache_limit = 64u << 20;
    ag_block *g = xmalloc(f, 0, 8u << 20);
    void *p = ag_block_ptr(g);
    assert_int_equal(ag_alloc_free(f->a, g, 0), AG_OK);
    assert_int_equal(ag_alloc_sync(f->a, AG_SYNC_CLEAN), AG_OK);
    f->a->cfg.l1_cache_limit = UINT64_MAX;
    *x = xmalloc(f, 1, 3u << 20);
    *y = xmalloc(f, 1, 3u << 20);
    assert_ptr_equal(ag_block_ptr(*x), p);
    return p;
}

static void test_gather(void **state)
{
    (void)state;
    for (int gather = 1; gather >= 0; gather--) {
        fix f;
        fix_open(&f, 2, AG_ALLOC_MULTI, 0);
        f.a->cfg.gather_min = gather ? 1u << 20 : UINT64_MAX;
        ag_block *x, *y;
        void *p = cut_segment(&f, &x, &y);
        assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, y, 1), AG_OK);
        ag_block *g = xmalloc(&f, 0, 8u << 20);
        ag_alloc_stats s = stats(f.a);
        if (gather) {
            assert_ptr_equal(ag_block_ptr(g), p);
            assert_int_equal(s.regions_gathered, 2);
            assert_int_equal(s.device_allocs, 1);
            assert_int_equal(s.peak_reserved, 8u << 20);
        } else {
            assert_ptr_not_equal(ag_block_ptr(g), p);
            assert_int_equal(s.regions_gathered, 0);
            assert_int_equal(s.peak_reserved, 16u << 20);
        }
        assert_true(heaps_ok(f.a));
        assert_int_equal(ag_alloc_free(f.a, g, 0), AG_OK);
        fix_close(&f);
    }
}

/* Work still queued on a pool's stream keeps its region out of the gather
 * (it could still touch the memory); once the stream is idle it goes. */
static ag_status slow_kernel(void *arg)
{
    atomic_int *go = arg;
    while (!atomic_load(go))
        sched_yield();
    return AG_OK;
}

static void test_gather_busy(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    f.a->cfg.gather_min = 1u << 20;
    ag_block *x, *y;
    cut_segment(&f, &x, &y);
    static atomic_int go;
    atomic_store(&go, 0);
    assert_int_equal(ag_dev_launch(f.dev, f.s[1], slow_kernel, &go, "slow"), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, y, 1), AG_OK);
    ag_block *g = xmalloc(&f, 0, 8u << 20);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.regions_gathered, 0);
    assert_int_equal(s.device_allocs, 2);
    atomic_store(&go, 1);
    assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[1]), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, g, 0), AG_OK);
    fix_close(&f);
}

/* The gather runs for a request of gather_min bytes exactly (8 MiB). */
static void test_gather_min_exact(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    f.a->cfg.gather_min = 8u << 20;
    ag_block *x, *y;
    void *p = cut_segment(&f, &x, &y);
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, y, 1), AG_OK);
    ag_block *g = xmalloc(&f, 0, 8u << 20);
    ag_alloc_stats s = stats(f.a);
    assert_ptr_equal(ag_block_ptr(g), p);
    assert_int_equal(s.regions_gathered, 2);
    assert_int_equal(s.device_allocs, 1);
    assert_int_equal(s.peak_reserved, 8u << 20);
    assert_int_equal(ag_alloc_free(f.a, g, 0), AG_OK);
    fix_close(&f);
}

/* The gather runs only before the device memory grows past its peak:
 * after a peak of 16 MiB (an 8 MiB segment grown, then given back by a
 * clean under a zero cache limit) an 8 MiB growth back to 16 MiB leaves
 * stream 1's two free 4 MiB regions in its pool. */
static void test_gather_at_peak(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    f.a->cfg.gather_min = 1u << 20;
    ag_block *x, *y;
    void *p = cut_segment(&f, &x, &y);
    ag_block *z = xmalloc(&f, 0, 8u << 20);
    assert_int_equal(ag_alloc_free(f.a, z, 0), AG_OK);
    f.a->cfg.l1_cache_limit = 0;
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    f.a->cfg.l1_cache_limit = UINT64_MAX;
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.reserved, 8u << 20);
    assert_int_equal(s.peak_reserved, 16u << 20);
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, y, 1), AG_OK);
    ag_block *g = xmalloc(&f, 0, 8u << 20);
    s = stats(f.a);
    assert_ptr_not_equal(ag_block_ptr(g), p);
    assert_int_equal(s.regions_gathered, 0);
    assert_int_equal(s.device_allocs, 3);
    assert_int_equal(s.reserved, 16u << 20);
    assert_int_equal(s.peak_reserved, 16u << 20);
    assert_int_equal(ag_heap_cached(&f.a->st[1].pool[AG_POOL_LARGE]), 8u << 20);
    assert_int_equal(ag_alloc_free(f.a, g, 0), AG_OK);
    fix_close(&f);
}

/* The gather leaves the growing pool's own free regions alone: stream 0's
 * free 32 MiB region, refused to its 20 MiB request by the alone bound,
 * stays in its pool (the next 32 MiB request takes it there). */
static void test_gather_skips_growing_pool(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 1, AG_ALLOC_MULTI, 0);
    ag_block *a = xmalloc(&f, 0, 32u << 20);
    assert_int_equal(ag_alloc_free(f.a, a, 0), AG_OK);
    ag_block *b = xmalloc(&f, 0, 20u << 20);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.regions_gathered, 0);
    assert_int_equal(s.device_allocs, 2);
    assert_int_equal(ag_heap_cached(&f.a->st[0].pool[AG_POOL_LARGE]), 32u << 20);
    assert_int_equal(ag_heap_cached(&f.a->l1), 0);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    fix_close(&f);
}

/* Under memory pressure the alone bound gives way: on a 24 MiB device
 * stream 0 holds an 8 MiB block cut from a 24 MiB region, and a 10 MiB
 * request can only have the region's free 16 MiB, more than large_slack
 * above it: stream 0's own, or lent to stream 1. */
static void test_pressure_ignores_bound(void **state)
{
    (void)state;
    for (uint32_t s1 = 0; s1 < 2; s1++) {
        fix f;
        fix_open(&f, 2, AG_ALLOC_MULTI, 24u << 20);
        ag_block *a = xmalloc(&f, 0, 24u << 20);
        assert_int_equal(ag_alloc_free(f.a, a, 0), AG_OK);
        ag_block *b = xmalloc(&f, 0, 8u << 20);
        ag_block *c = xmalloc(&f, s1, 10u << 20);
        /* served: the device's refusal on the way is no failure */
        assert_int_equal(ag_ctx_last_status(f.ctx), AG_OK);
        assert_string_equal(ag_ctx_errmsg(f.ctx), "");
        ag_alloc_stats s = stats(f.a);
        assert_int_equal(s.device_allocs, 1);
        assert_int_equal(s.peak_reserved, 24u << 20);
        assert_int_equal(ag_alloc_free(f.a, c, s1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
        fix_close(&f);
    }
}

static void test_oom_reclaim(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device_sim_config dc = ag_device_sim_defaults();
    dc.capacity[AG_MEM_HBM] = 4u << 20;
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, &dc, &dev), AG_OK);
    for (int k = 0; k < 2; k++) {
        const char *text = k == 0 ? reclaim_text : lend_text;
        ag_alloc_trace *t = NULL;
        assert_int_equal(ag_alloc_trace_parse(ctx, "t", text, strlen(text), &t), AG_OK);
        for (int mode = 0; mode < 2; mode++) {
            ag_alloc_replay_result r;
            ag_status st = replay_in(ctx, dev, t, (ag_alloc_mode)mode, 8, &r);
            if (k == 1 && mode == AG_ALLOC_BASELINE) {
                assert_int_equal(st, AG_ENOMEM);
                assert_errmsg(ctx, "t:5: stream 1: cannot allocate 2097152 bytes of hbm memory");
                continue;
            }
            assert_int_equal(st, AG_OK);
            assert_int_equal(r.violations, 0);
            assert_true(r.stats.retries >= 1);
            assert_int_equal(r.stats.peak_reserved, 4u << 20);
            if (mode == AG_ALLOC_MULTI && k == 1) {
                assert_int_equal(r.stats.borrow_recycles, 1);
                assert_int_equal(r.stats.returned_home, 1);
            }
        }
        ag_alloc_trace_destroy(t);
    }
    close_empty(ctx, dev);
}

/* One resource clean is one synchronisation, in both modes; the front
 * cache keeps no block of the large pool, whatever small_size is. */
static void test_clean_counts_and_front(void **state)
{
    (void)state;
    for (int m = 0; m < 2; m++) {
        ag_alloc_config c;
        ag_alloc_config_default(&c);
        c.small_size = 4096;
        fix f;
        fix_open_cfg(&f, 2, m ? AG_ALLOC_BASELINE : AG_ALLOC_MULTI, 0, &c);
        ag_block *small = xmalloc(&f, 0, 4096), *large = xmalloc(&f, 0, 8192);
        ag_block *shared = xmalloc(&f, 0, 4096);
        assert_int_equal(ag_alloc_access(f.a, shared, 1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, shared, 1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, shared, 0), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, small, 0), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, large, 0), AG_OK);
        bool kept_small = false;
        for (uint32_t k = 0; k < f.a->st[0].nrecent; k++) {
            assert_true(f.a->st[0].recent[k] != large);
            assert_true(f.a->st[0].recent[k]->pool == AG_POOL_SMALL);
            kept_small = kept_small || f.a->st[0].recent[k] == small;
        }
        assert_true(kept_small);
        uint64_t before = stats(f.a).syncs;
        assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
        ag_alloc_stats s = stats(f.a);
        assert_int_equal(s.syncs, before + 1u);
        assert_int_equal(s.pending, 0);
        assert_int_equal(s.cached, s.reserved);
        fix_close(&f);
    }
}

/* How many block objects the allocator has made (each lives until the
 * allocator is destroyed). */
static uint32_t block_objects(const ag_memalloc *a)
{
    uint32_t n = 0;
    for (const ag_block *b = a->all; b; b = b->all_next)
        n++;
    return n;
}

/* A pool miss hands out the block object its request took first and takes
 * no second one: ten requests on one stream, each larger than the last
 * (so that none finds a span in the pool), each freed before the next,
 * leave one block object in all, not one more per miss. */
static void test_miss_one_block_object(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 1, AG_ALLOC_MULTI, 0);
    for (uint32_t k = 1; k <= 10; k++) {
        ag_block *b = xmalloc(&f, 0, (uint64_t)k << 20);
        assert_int_equal(block_objects(f.a), 1);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    }
    assert_true(stats(f.a).device_allocs >= 5);
    fix_close(&f);
}

/* A request no device state can serve (a 2 MiB device, 4 MiB asked) goes
 * through every round: L1's trim and retry, the reclaim, and L1's trim and
 * retry again after it, three counted in retries, then fails with one
 * oom, the message naming the request, and nothing held. */
static void test_unservable_rounds(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 1, AG_ALLOC_MULTI, 2u << 20);
    ag_block *none = NULL;
    assert_int_equal(ag_alloc_malloc(f.a, 0, 4u << 20, &none), AG_ENOMEM);
    assert_null(none);
    assert_errmsg(f.ctx, "stream 0: cannot allocate 4194304 bytes of hbm memory");
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.retries, 3);
    assert_int_equal(s.ooms, 1);
    assert_int_equal(s.syncs, 1); /* the reclaim's synchronise */
    assert_int_equal(s.allocated, 0);
    assert_int_equal(s.reserved, 0);
    fix_close(&f);
}

/* A move for a small region wastes up to one L1 segment, not only the
 * region's own size: stream 1's wholly free 1 MiB small region (L1 grew
 * by exactly that, and caches nothing) moves to stream 0, whose 4 KiB
 * request wants a 256 KiB region, instead of the device growing. */
static void test_move_within_segment(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    ag_block *x = xmalloc(&f, 1, 1u << 20);
    void *px = ag_block_ptr(x);
    assert_int_equal(ag_heap_cached(&f.a->l1), 0);
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    ag_block *y = xmalloc(&f, 0, 4096);
    ag_alloc_stats s = stats(f.a);
    assert_ptr_equal(ag_block_ptr(y), px);
    assert_int_equal(s.regions_moved, 1);
    assert_int_equal(s.device_allocs, 1);
    assert_int_equal(s.peak_reserved, 1u << 20);
    assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    fix_close(&f);
}

/* A request of exactly large_alone (10 MiB) is alone for a move too: a
 * free 16 MiB region of stream 1 is more than large_slack (50%) above it
 * and stays; the device grows for the request. */
static void test_move_alone_exact(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    assert_int_equal(f.a->cfg.large_alone, 10u << 20);
    ag_alloc_stats s;
    ag_block *y = region_stays(&f, 16u << 20, 10u << 20, &s);
    assert_int_equal(s.device_allocs, 2);
    assert_int_equal(s.reserved, 26u << 20);
    assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    fix_close(&f);
}

/* A region of the stream's own other pool moves with no event, whatever
 * the host has seen of the stream: its own order covers its last use.
 * Stream 0's small region (5 MiB: small_size 4 MiB, small_region 40 MiB),
 * wholly free again, serves its large pool's 4 MiB + 64 KiB request. */
static void test_move_own_pool_no_event(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.small_size = 4u << 20;
    c.small_region = 40u << 20;
    c.large_round = 64u << 10;
    fix f;
    fix_open_cfg(&f, 1, AG_ALLOC_MULTI, 0, &c);
    ag_block *x = xmalloc(&f, 0, 128u << 10); /* too large for the front cache */
    void *px = ag_block_ptr(x);
    assert_int_equal(ag_alloc_free(f.a, x, 0), AG_OK);
    assert_int_equal(ag_heap_cached(&f.a->st[0].pool[AG_POOL_SMALL]), 5u << 20);
    ag_block *y = xmalloc(&f, 0, (4u << 20) + (64u << 10));
    ag_alloc_stats s = stats(f.a);
    assert_ptr_equal(ag_block_ptr(y), px);
    assert_int_equal(s.regions_moved, 1);
    assert_int_equal(s.region_waits, 0);
    assert_int_equal(s.device_allocs, 1);
    assert_int_equal(ag_heap_cached(&f.a->st[0].pool[AG_POOL_SMALL]), 0);
    assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    fix_close(&f);
}

/* The gather first gives the front caches back to their pools: a region
 * that only a front-cached block kept from being wholly free (stream 1's
 * 256 KiB small region, its 4 KiB block freed into the front cache) goes
 * back to L1 too, and merges there with the rest of its segment. */
static void test_gather_flushes_front(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    f.a->cfg.gather_min = 1u << 20;
    ag_block *x = xmalloc(&f, 1, 4096); /* a 512 KiB segment: a 256 KiB region, a 256 KiB tail */
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    assert_int_equal(f.a->st[1].nrecent, 1);
    assert_int_equal(ag_heap_cached(&f.a->l1), 256u << 10);
    ag_block *g = xmalloc(&f, 0, 12u << 20); /* a new peak: the gather */
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.regions_gathered, 1);
    assert_int_equal(f.a->st[1].nrecent, 0);
    assert_int_equal(ag_heap_cached(&f.a->st[1].pool[AG_POOL_SMALL]), 0);
    assert_int_equal(ag_heap_cached(&f.a->l1), 512u << 10); /* merged whole */
    assert_int_equal(ag_alloc_free(f.a, g, 0), AG_OK);
    fix_close(&f);
}

/* A move gives the growing pool at least the region it would grow by: a
 * smaller wholly free region elsewhere stays, though it could hold the
 * request itself, and the miss, which will grow, looks at the waiting
 * blocks first.  Small requests up to 64 KiB (a 256 KiB region), large
 * ones rounded to 64 KiB: stream 1 frees a 128 KiB large region (L1
 * caches nothing); block w waits for stream 2 (busy); stream 0's 32 KiB
 * request records w's event, then grows the device. */
static void test_move_not_below_region(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.small_size = 64u << 10;
    c.large_round = 64u << 10;
    fix f;
    fix_open_cfg(&f, 3, AG_ALLOC_MULTI, 0, &c);
    atomic_int open = 0;
    gate(&f, 2, &open);
    ag_block *a = xmalloc(&f, 1, 128u << 10); /* L1: a 512 KiB segment */
    ag_block *b = xmalloc(&f, 1, 384u << 10); /* the rest of it */
    ag_block *w = xmalloc(&f, 0, 512u << 10); /* a segment of its own */
    assert_int_equal(ag_heap_cached(&f.a->l1), 0);
    assert_int_equal(ag_alloc_access(f.a, w, 2), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, w, 2), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, w, 0), AG_OK);
    assert_int_equal(f.a->nlazy, 1);
    assert_int_equal(ag_alloc_free(f.a, a, 1), AG_OK);
    assert_int_equal(ag_heap_cached(&f.a->st[1].pool[AG_POOL_LARGE]), 128u << 10);
    ag_block *y = xmalloc(&f, 0, 32u << 10);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.regions_moved, 0);
    assert_int_equal(s.fallbacks_recorded, 1);
    assert_int_equal(s.device_allocs, 3);
    assert_int_equal(ag_heap_cached(&f.a->st[1].pool[AG_POOL_LARGE]), 128u << 10);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    fix_close(&f);
}

/* In the baseline a request of exactly large_alone (10 MiB) is alone: its
 * region is the request rounded to large_round, 10 MiB, not a large_region
 * (20 MiB) shared with smaller requests. */
static void test_baseline_alone_exact(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 1, AG_ALLOC_BASELINE, 0);
    ag_block *b = xmalloc(&f, 0, f.a->cfg.large_alone);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.reserved, 10u << 20);
    assert_int_equal(s.device_allocs, 1);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    fix_close(&f);
}

/* The front cache's bytes in the statistics: with a fifth block the
 * oldest goes back to the pool and stops counting as front-cache bytes,
 * and a pool miss that gives the front cache back leaves none; throughout,
 * with nothing live or pending, cached is all that is reserved. */
static void test_front_cache_bytes(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 1, AG_ALLOC_MULTI, 0);
    ag_block *b[5];
    for (int k = 0; k < 5; k++)
        b[k] = xmalloc(&f, 0, 4096);
    for (int k = 0; k < 5; k++)
        assert_int_equal(ag_alloc_free(f.a, b[k], 0), AG_OK);
    assert_int_equal(f.a->st[0].nrecent, 4);
    assert_int_equal(f.a->st[0].recent_bytes, 4 * 4096);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.allocated, 0);
    assert_int_equal(s.cached, s.reserved);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(f.a->st[0].nrecent, 4); /* kept across the clean */
    ag_block *big = xmalloc(&f, 0, 250u << 10); /* a miss: the front cache goes back */
    assert_int_equal(f.a->st[0].nrecent, 0);
    assert_int_equal(f.a->st[0].recent_bytes, 0);
    s = stats(f.a);
    assert_int_equal(s.allocated, 250u << 10);
    assert_int_equal(s.cached, s.reserved - s.allocated);
    assert_int_equal(ag_alloc_free(f.a, big, 0), AG_OK);
    fix_close(&f);
}

/* A block of max_split is never given to a smaller request, so the front
 * cache, which serves the next request of the same size, keeps none that
 * large: with max_split equal to a 4 KiB page, a freed 4 KiB block goes
 * back to its pool. */
static void test_front_cache_below_max_split(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.page_size = 4096;
    c.max_split = 4096;
    fix f;
    fix_open_cfg(&f, 1, AG_ALLOC_MULTI, 0, &c);
    assert_int_equal(f.a->front_max, 4095);
    ag_block *b = xmalloc(&f, 0, 4096);
    assert_int_equal(ag_block_size(b), 4096);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(f.a->st[0].nrecent, 0);
    assert_int_equal(f.a->st[0].recent_bytes, 0);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.birth_recycles, 1);
    assert_int_equal(s.cached, s.reserved);
    fix_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_region_move),
        cmocka_unit_test(test_region_move_seen),
        cmocka_unit_test(test_move_skips_own_pool),
        cmocka_unit_test(test_alone_bound_is_request),
        cmocka_unit_test(test_move_nearest_idle),
        cmocka_unit_test(test_move_max_split_exact),
        cmocka_unit_test(test_front_cache_below_max_split),
        cmocka_unit_test(test_move_oversize_waste_exact),
        cmocka_unit_test(test_move_alone_limit_exact),
        cmocka_unit_test(test_move_l1_holds_exact),
        cmocka_unit_test(test_clean_keeps_regions),
        cmocka_unit_test(test_clean_keeps_front),
        cmocka_unit_test(test_front_evicts_oldest),
        cmocka_unit_test(test_alone_bound),
        cmocka_unit_test(test_alone_round),
        cmocka_unit_test(test_alone_round_exact),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_gather_busy),
        cmocka_unit_test(test_gather_min_exact),
        cmocka_unit_test(test_gather_at_peak),
        cmocka_unit_test(test_gather_skips_growing_pool),
        cmocka_unit_test(test_pressure_ignores_bound),
        cmocka_unit_test(test_oom_reclaim),
        cmocka_unit_test(test_clean_counts_and_front),
        cmocka_unit_test(test_miss_one_block_object),
        cmocka_unit_test(test_unservable_rounds),
        cmocka_unit_test(test_move_within_segment),
        cmocka_unit_test(test_move_alone_exact),
        cmocka_unit_test(test_move_own_pool_no_event),
        cmocka_unit_test(test_gather_flushes_front),
        cmocka_unit_test(test_move_not_below_region),
        cmocka_unit_test(test_baseline_alone_exact),
        cmocka_unit_test(test_front_cache_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
