/* Unit tests of the third layer and the cross-stream state of the multi
 * mode: the block object's MIF (one word a row up to 64 streams, sparse
 * rows beyond, 256 streams), the three recycle modes (birth, borrow,
 * local), version-filtered notices (the three-way fan-out, a stream
 * joining after a send), the fallback and its events, the borrow allocator
 * (a larger cached block lent, then another), and host memory shared with
 * no stream constraint. */
#include <stdatomic.h>

#include "support/agtest.h"
#include "support/rt/alloc_fix.h"

/* The row operations on four-word rows (256 streams). */
static void test_mif_rows_256(void **state)
{
    (void)state;
    uint32_t n = 256, w = ag_mif_words(n);
    assert_int_equal(w, 4);
    uint64_t d[4] = {0}, row[4] = {0};
    uint32_t joined[256] = {0};
    ag_mif_set(d, w, 0, 200);
    ag_mif_set(d, w, 0, 3);
    ag_mif_set(d, w, 0, 130);
    assert_true(ag_mif_is_set(d, w, 0, 200) && ag_mif_is_set(d, w, 0, 3) && !ag_mif_is_set(d, w, 0, 199));
    /* a view that knows 200 released */
    memcpy(row, d, sizeof row);
    ag_mif_clear(row, w, 0, 200);
    ag_row_and(d, row, w);
    assert_false(ag_mif_is_set(d, w, 0, 200));
    /* a view from before 130 joined: 130's bit is kept, 3's goes */
    uint64_t old[4] = {0};
    joined[130] = 7;
    joined[3] = 2;
    ag_row_and_since(d, n, old, joined, 5);
    assert_true(ag_mif_is_set(d, w, 0, 130));
    assert_false(ag_mif_is_set(d, w, 0, 3));
    assert_true(ag_row_any(d, w));
    ag_mif_clear(d, w, 0, 130);
    assert_false(ag_row_any(d, w));
    uint32_t seen[4], k = 0, u;
    AG_MIF_EACH(row, w, u)
    seen[k++] = u;
    assert_int_equal(k, 2);
    assert_int_equal(seen[0], 3);
    assert_int_equal(seen[1], 130);
}

static void test_birth_recycle(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    ag_block *b = xmalloc(&f, 0, 1000);
    void *p = ag_block_ptr(b);
    assert_int_equal(ag_block_size(b), 1024);
    assert_int_equal(ag_block_birth(b), 0);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.birth_recycles, 1);
    assert_int_equal(s.allocated, 0);
    assert_int_equal(s.peak_allocated, 1024);
    /* the cached span is handed out again on the same stream */
    b = xmalloc(&f, 0, 900);
    assert_ptr_equal(ag_block_ptr(b), p);
    /* another stream never gets it from stream 0's pool */
    ag_block *c = xmalloc(&f, 1, 900);
    assert_ptr_not_equal(ag_block_ptr(c), p);
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_EINVAL); /* stream 0 does not use c */
    assert_errmsg(f.ctx, "does not use the block");
    assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    fix_close(&f);
}

/* A block of size bytes born on stream 0 and used by stream 1, which stays
 * busy until *open: the events of its release on 1 stay incomplete. */
static ag_block *shared_with_busy_1(fix *f, atomic_int *open, uint64_t size)
{
    gate(f, 1, open);
    ag_block *b = xmalloc(f, 0, size);
    assert_int_equal(ag_alloc_access(f->a, b, 1), AG_OK);
    return b;
}

/* Born on 0, used by 1; 0 drops it first (local recycle), 1 drops it next
 * (local recycle too: 1 does not know 0 is done); the event 0 -> 1 tells 1,
 * which borrows it; 1 reuses it, frees it, and the event 1 -> 0 sends it home.
 * Stream 1 is kept busy, so the polled fallback cannot see its use end. */
static void test_local_borrow_home(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    ag_block *b = shared_with_busy_1(&f, &open, 4096);
    void *p = ag_block_ptr(b);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.local_recycles, 2);
    assert_int_equal(s.pending, 4096);
    assert_int_equal(s.birth_recycles + s.borrow_recycles, 0);
    /* stream 0 must not see the memory yet */
    ag_block *x = xmalloc(&f, 0, 4096);
    assert_ptr_not_equal(ag_block_ptr(x), p);
    assert_int_equal(ag_alloc_send(f.a, 0, 1), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 1, 0), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.borrow_recycles, 1);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.borrowed, 4096);
    /* stream 1 borrows it */
    ag_block *y = xmalloc(&f, 1, 4000);
    assert_ptr_equal(ag_block_ptr(y), p);
    assert_int_equal(ag_block_birth(y), 0);
    s = stats(f.a);
    assert_int_equal(s.borrow_hits, 1);
    assert_int_equal(ag_alloc_free(f.a, y, 1), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.borrow_recycles, 2);
    /* the next event from 1 to 0 takes it home; on its way it is still
     * cached memory (reserved = allocated + pending + cached throughout) */
    uint64_t cached = s.cached;
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.borrowed, 0);
    assert_int_equal(s.cached, cached);
    assert_int_equal(s.reserved, s.allocated + s.pending + s.cached);
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.returned_home, 1);
    assert_int_equal(s.borrowed, 0);
    assert_int_equal(s.cached, cached);
    assert_int_equal(ag_alloc_free(f.a, x, 0), AG_OK);
    ag_block *z = xmalloc(&f, 0, 4096);
    assert_true(ag_block_ptr(z) == p || ag_block_ptr(z) == ag_block_ptr(x));
    assert_int_equal(ag_alloc_free(f.a, z, 0), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.polled_recycles, 0);
    atomic_store(&open, 1);
    fix_close(&f);
}

/* The polled fallback: every user has freed a shared block and no event
 * edge follows; once the host sees the other user's event complete, the
 * block goes home without a notice, and no notice is sent for it later. */
static void test_polled_fallback(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    f.a->cfg.poll_every = 1; /* the fallback polled at every allocation */
    f.a->cfg.fallback_min = 0; /* recorded at the last free, whatever the size */
    atomic_int open = 0;
    ag_block *b = shared_with_busy_1(&f, &open, 4096);
    void *p = ag_block_ptr(b);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.pending, 4096);
    /* stream 1 is still busy: its event is not complete */
    ag_block *x = xmalloc(&f, 0, 4096);
    assert_ptr_not_equal(ag_block_ptr(x), p);
    atomic_store(&open, 1);
    assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[1]), AG_OK);
    ag_block *y = xmalloc(&f, 0, 4096);
    assert_ptr_equal(ag_block_ptr(y), p);
    s = stats(f.a);
    assert_int_equal(s.polled_recycles, 1);
    assert_int_equal(s.pending, 0);
    assert_true(s.event_polls >= 2);
    /* stream 1's local-recycle entry names a recycled block: the next
     * event 1 -> 0 drops it instead of carrying it */
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.notices_sent, 0);
    assert_int_equal(s.notices_applied, 0);
    assert_int_equal(ag_alloc_free(f.a, x, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    fix_close(&f);
}

/* When the deferred frees' events are polled (poll_every): with 0, only
 * when a pool cannot serve a request; then what the poll releases serves
 * it instead of growth.  With 3, at every third allocation as well. */
static void test_poll_every(void **state)
{
    (void)state;
    for (uint32_t every = 0; every <= 3; every += 3) {
        fix f;
        fix_open(&f, 2, AG_ALLOC_MULTI, 0);
        f.a->cfg.poll_every = every;
        f.a->cfg.fallback_min = 0;
        atomic_int open = 0;
        /* stream 1's pool holds a region from now on */
        ag_block *w = xmalloc(&f, 1, 4096);
        assert_int_equal(ag_alloc_free(f.a, w, 1), AG_OK);
        gate(&f, 1, &open);
        /* fill stream 0's first small region (256 KiB) but for b */
        ag_block *b = xmalloc(&f, 0, 128u << 10);
        ag_block *fill = xmalloc(&f, 0, 128u << 10);
        void *p = ag_block_ptr(b);
        assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
        ag_alloc_stats s = stats(f.a);
        assert_int_equal(s.pending, 128u << 10);
        uint64_t polls = s.event_polls, grown = s.device_allocs;
        atomic_store(&open, 1);
        assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[1]), AG_OK);
        /* two allocations stream 1's pool serves: no poll yet */
        ag_block *x = xmalloc(&f, 1, 4096);
        ag_block *y = xmalloc(&f, 1, 4096);
        s = stats(f.a);
        assert_int_equal(s.event_polls, polls);
        assert_int_equal(s.pending, 128u << 10);
        ag_block *z = NULL;
        if (every == 3) {
            /* the third is due to poll: b goes home */
            z = xmalloc(&f, 1, 4096);
            s = stats(f.a);
            assert_int_equal(s.event_polls, polls + 1);
            assert_int_equal(s.pending, 0);
        }
        /* stream 0's pool is full: the miss polls (every == 0) and b's
         * memory serves the request, with no growth */
        ag_block *c = xmalloc(&f, 0, 128u << 10);
        assert_ptr_equal(ag_block_ptr(c), p);
        s = stats(f.a);
        assert_int_equal(s.pending, 0);
        assert_int_equal(s.polled_recycles, 1);
        assert_int_equal(s.device_allocs, grown);
        ag_block *done[] = {fill, x, y, c};
        for (int k = 0; k < 4; k++)
            assert_int_equal(ag_alloc_free(f.a, done[k], k == 1 || k == 2 ? 1 : 0), AG_OK);
        if (z)
            assert_int_equal(ag_alloc_free(f.a, z, 1), AG_OK);
        fix_close(&f);
    }
}

/* A fallback event seen complete at the last free also completes every
 * older one of its stream (a stream runs in order): the queued entry of an
 * earlier block is popped by the next poll without asking the device. */
static void test_later_point_seen(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    f.a->cfg.poll_every = 1; /* the fallback polled at every allocation */
    f.a->cfg.fallback_min = 0; /* recorded at the last free, whatever the size */
    atomic_int open = 0;
    ag_block *b = shared_with_busy_1(&f, &open, 4096);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK); /* 1 is busy: queued */
    assert_int_equal(f.a->npend, 1);
    ag_block *c = xmalloc(&f, 0, 8192); /* polls b's event: still busy */
    assert_int_equal(ag_alloc_access(f.a, c, 1), AG_OK);
    assert_int_equal(f.a->npend, 1);
    atomic_store(&open, 1);
    assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[1]), AG_OK);
    ag_alloc_stats s = stats(f.a);
    uint64_t polls = s.event_polls, asked = s.stream_queries;
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK); /* 1 is idle: home at once, no event */
    s = stats(f.a);
    assert_int_equal(s.stream_queries, asked + 1);
    assert_int_equal(s.event_polls, polls);
    assert_int_equal(s.polled_recycles, 1);
    assert_int_equal(f.a->npend, 1);
    /* b's releases on both streams wait in their local-recycle lists */
    assert_int_equal(f.a->st[0].nlive, 1);
    assert_int_equal(f.a->st[1].nlive, 1);
    ag_block *x = xmalloc(&f, 0, 4096); /* the poll pops b's entry unasked */
    s = stats(f.a);
    assert_int_equal(s.event_polls, polls);
    assert_int_equal(s.polled_recycles, 2);
    assert_int_equal(s.pending, 0);
    assert_int_equal(f.a->npend, 0);
    /* recycled by the poll: those entries are stale now */
    assert_int_equal(f.a->st[0].nlive, 0);
    assert_int_equal(f.a->st[1].nlive, 0);
    assert_int_equal(ag_alloc_free(f.a, x, 0), AG_OK);
    fix_close(&f);
}

/* Below fallback_min, the last free of a shared block whose other user is
 * busy records no event: the block waits, and a notice recycles it with
 * no device event at all. */
static void test_fallback_waits_for_notice(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    ag_block *b = shared_with_busy_1(&f, &open, 4096);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.pending, 4096);
    assert_int_equal(s.fallbacks_deferred, 1);
    assert_int_equal(f.a->npend, 0); /* no event recorded */
    assert_int_equal(f.a->nlazy, 1);
    uint64_t nev = f.a->nev;
    /* 1 tells 0 it is done: 0 recycles the block, still with no event */
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.notices_applied, 1);
    assert_int_equal(s.event_polls, 0);
    assert_int_equal(s.fallbacks_recorded, 0);
    assert_int_equal(f.a->nev, nev);
    atomic_store(&open, 1);
    fix_close(&f);
}

/* A block whose fallback recorded an event, then recycled into a borrow
 * allocator by a notice before that event completed, is lent out with no
 * events counted: its next last free waits like any other block, and the
 * next pool miss, finding every user idle, sends it home (a stale count
 * once made that miss take the entry for recycled and drop it, leaving
 * the block pending until the next clean). */
static void test_lent_block_fallback(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 3, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    gate(&f, 1, &open);
    ag_block *b = xmalloc(&f, 0, 4096);
    void *mem = ag_block_ptr(b);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_access(f.a, b, 2), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 2), AG_OK); /* 1 is busy: b waits */
    assert_int_equal(f.a->nlazy, 1);
    ag_block *x = xmalloc(&f, 1, 4096); /* a pool miss: b's event on 1 */
    assert_int_equal(stats(f.a).fallbacks_recorded, 1);
    assert_int_equal(b->events, 1);
    /* 0 and 1 tell 2 they are done: 2's view empties, b is borrowed there */
    assert_int_equal(ag_alloc_send(f.a, 0, 2), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 2, 0), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 1, 2), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 2, 1), AG_OK);
    assert_int_equal(stats(f.a).borrow_recycles, 1);
    assert_int_equal(b->events, 0);
    ag_block *c = xmalloc(&f, 2, 4096); /* lent from 2's borrow allocator */
    assert_ptr_equal(ag_block_ptr(c), mem);
    assert_int_equal(ag_alloc_access(f.a, c, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, c, 2), AG_OK); /* 2 runs behind 1's gate: c waits */
    assert_int_equal(f.a->nlazy, 1);
    assert_int_equal(stats(f.a).pending, 4096);
    atomic_store(&open, 1);
    assert_int_equal(ag_dev_synchronize(f.dev), AG_OK);
    uint64_t recycled = stats(f.a).polled_recycles;
    ag_block *y = xmalloc(&f, 2, 4096); /* a pool miss: every user of c is idle */
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.polled_recycles, recycled + 1u);
    assert_int_equal(f.a->nlazy, 0);
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, y, 2), AG_OK);
    fix_close(&f);
}

/* Stream 0's first small region (256 KiB) full: a block of 128 KiB that
 * waits for its notices (shared with 1, kept busy) and *fill; only a pool
 * miss looks at waiting blocks.  Returns the waiting block's memory. */
static void *waiting_in_full_region(fix *f, atomic_int *open, ag_block **fill)
{
    f->a->cfg.poll_every = 0;
    ag_block *b = shared_with_busy_1(f, open, 128u << 10);
    *fill = xmalloc(f, 0, 128u << 10);
    void *p = ag_block_ptr(b);
    assert_int_equal(ag_alloc_free(f->a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f->a, b, 0), AG_OK);
    assert_int_equal(f->a->nlazy, 1);
    return p;
}

/* A pool miss looks at the waiting blocks: one whose user is still busy
 * gets its event then (polled like any deferred free, and recycled once
 * complete); one whose user is idle by then goes home with no event and
 * serves the request instead of growth. */
static void test_fallback_at_miss(void **state)
{
    (void)state;
    for (int idle = 0; idle <= 1; idle++) {
        fix f;
        fix_open(&f, 2, AG_ALLOC_MULTI, 0);
        atomic_int open = 0;
        ag_block *fill = NULL;
        void *p = waiting_in_full_region(&f, &open, &fill);
        if (idle) {
            atomic_store(&open, 1);
            assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[1]), AG_OK);
        }
        ag_alloc_stats s = stats(f.a);
        uint64_t grown = s.device_allocs;
        ag_block *c = xmalloc(&f, 0, 128u << 10); /* the pool is full: a miss */
        s = stats(f.a);
        assert_int_equal(f.a->nlazy, 0);
        if (idle) {
            assert_ptr_equal(ag_block_ptr(c), p);
            assert_int_equal(s.fallbacks_recorded, 0);
            assert_int_equal(s.polled_recycles, 1);
            assert_int_equal(s.pending, 0);
            assert_int_equal(s.device_allocs, grown);
            assert_int_equal(f.a->npend, 0);
        } else {
            assert_ptr_not_equal(ag_block_ptr(c), p);
            assert_int_equal(s.fallbacks_recorded, 1);
            assert_int_equal(s.pending, 128u << 10);
            assert_int_equal(f.a->npend, 1);
            atomic_store(&open, 1);
            assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[1]), AG_OK);
            ag_block *e = xmalloc(&f, 0, 128u << 10); /* the rest of c's region */
            ag_block *d = xmalloc(&f, 0, 128u << 10); /* a miss again: the poll finds the event done */
            assert_ptr_equal(ag_block_ptr(d), p);
            s = stats(f.a);
            assert_int_equal(s.polled_recycles, 1);
            assert_int_equal(s.pending, 0);
            assert_int_equal(ag_alloc_free(f.a, d, 0), AG_OK);
            assert_int_equal(ag_alloc_free(f.a, e, 0), AG_OK);
        }
        assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, fill, 0), AG_OK);
        fix_close(&f);
    }
}

/* A pool miss that a wholly free region of another pool serves grows
 * nothing: the waiting blocks are left to their notices (no look, no
 * event).  A miss that would grow looks at them first, also one whose
 * region cannot move after all (its owner captures: no event orders it). */
static void test_miss_moves_before_look(void **state)
{
    (void)state;
    for (int captured = 0; captured <= 1; captured++) {
        fix f;
        fix_open(&f, 3, AG_ALLOC_MULTI, 0);
        atomic_int open = 0;
        /* stream 2's first small region, wholly free again once the block
         * waits (its miss came first: nothing waited to look at) */
        ag_block *r = xmalloc(&f, 2, 256u << 10);
        void *moved = ag_block_ptr(r);
        ag_block *fill = NULL;
        (void)waiting_in_full_region(&f, &open, &fill);
        assert_int_equal(ag_alloc_free(f.a, r, 2), AG_OK); /* L1 holds nothing more */
        if (captured)
            assert_int_equal(ag_dev_capture_begin(f.dev, f.s[2]), AG_OK);
        ag_alloc_stats s = stats(f.a);
        uint64_t grown = s.device_allocs;
        ag_block *c = xmalloc(&f, 0, 128u << 10); /* a miss: 2's region moves to 0 */
        s = stats(f.a);
        if (captured) {
            ag_dev_graph *g = NULL;
            assert_ptr_not_equal(ag_block_ptr(c), moved);
            assert_int_equal(s.regions_moved, 0);
            assert_true(s.capture_waits > 0);
            assert_int_equal(s.fallbacks_recorded, 1); /* before the growth */
            assert_true(s.device_allocs > grown);
            assert_int_equal(ag_dev_capture_end(f.dev, f.s[2], &g), AG_OK);
            ag_dev_graph_destroy(f.dev, g);
            atomic_store(&open, 1);
            assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
            assert_int_equal(ag_alloc_free(f.a, fill, 0), AG_OK);
            fix_close(&f);
            continue;
        }
        assert_ptr_equal(ag_block_ptr(c), moved);
        assert_int_equal(s.regions_moved, 1);
        assert_int_equal(s.device_allocs, grown);
        assert_int_equal(s.fallbacks_recorded, 0);
        assert_int_equal(f.a->npend, 0);
        assert_int_equal(f.a->nlazy, 1); /* b still waits, unlooked at */
        assert_int_equal(s.pending, 128u << 10);
        ag_block *d = xmalloc(&f, 0, 128u << 10); /* the rest of the moved region */
        ag_block *e = xmalloc(&f, 0, 128u << 10); /* a miss that would grow: the look */
        s = stats(f.a);
        assert_int_equal(s.fallbacks_recorded, 1);
        assert_int_equal(f.a->npend, 1);
        assert_int_equal(s.regions_moved, 1);
        atomic_store(&open, 1);
        ag_block *blocks[] = {c, d, e, fill};
        for (int k = 0; k < 4; k++)
            assert_int_equal(ag_alloc_free(f.a, blocks[k], 0), AG_OK);
        fix_close(&f);
    }
}

/* At least fallback_min bytes, the event is recorded at the last free; the
 * resource clean recycles a waiting block. */
static void test_fallback_min(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    f.a->cfg.fallback_min = 8192;
    atomic_int open = 0;
    ag_block *big = shared_with_busy_1(&f, &open, 8192);
    ag_block *small = xmalloc(&f, 0, 4096);
    assert_int_equal(ag_alloc_access(f.a, small, 1), AG_OK);
    ag_block *frees[] = {big, small};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(ag_alloc_free(f.a, frees[k], 1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, frees[k], 0), AG_OK);
    }
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(f.a->npend, 1); /* big's event */
    assert_int_equal(f.a->nlazy, 1); /* small waits */
    assert_int_equal(s.fallbacks_deferred, 1);
    assert_int_equal(s.pending, 8192 + 4096);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.pending, 0);
    assert_int_equal(f.a->nlazy, 0);
    assert_int_equal(f.a->npend, 0);
    /* a block still waiting when the allocator goes: its memory goes back
     * to the device with the rest (fix_close checks the device is empty) */
    ag_block *late = xmalloc(&f, 0, 4096);
    assert_int_equal(ag_alloc_access(f.a, late, 1), AG_OK);
    atomic_store(&open, 0);
    gate(&f, 1, &open);
    assert_int_equal(ag_alloc_free(f.a, late, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, late, 0), AG_OK);
    assert_int_equal(f.a->nlazy, 1);
    atomic_store(&open, 1);
    fix_close(&f);
}

/* Blocks that notices recycle leave stale entries behind; with no pool
 * miss to clear them, the list drops them when full instead of growing:
 * a long run of such frees keeps it small. */
static void test_fallback_list_bounded(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    gate(&f, 1, &open);
    for (int k = 0; k < 1000; k++) {
        ag_block *b = xmalloc(&f, 0, 4096);
        assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
        assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);
        assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    }
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.fallbacks_deferred, 1000);
    assert_int_equal(s.pending, 0);
    assert_true(f.a->caplazy <= 16);
    atomic_store(&open, 1);
    fix_close(&f);
}

/* The consumer drops first, the birth stream last: the event 1 -> 0 lets 0
 * recycle at birth. */
static void test_local_then_birth(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    ag_block *b = shared_with_busy_1(&f, &open, 512); /* the fallback's event stays incomplete */
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(stats(f.a).birth_recycles, 0);
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.birth_recycles, 1);
    assert_int_equal(s.notices_applied, 1);
    /* a wait without a new send carries nothing */
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    assert_int_equal(stats(f.a).notices_applied, 1);
    atomic_store(&open, 1);
    fix_close(&f);
}

/* Three-way fan-out: born on 0, used by 1 and 2, all drop it; every stream's
 * notices reach the others.  Exactly one recycle; the later waiters find the
 * version moved on and skip their notices. */
static void test_fanout_stale(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 3, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    gate(&f, 1, &open);
    gate(&f, 2, &open);
    ag_block *b = xmalloc(&f, 0, 2048);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_access(f.a, b, 2), AG_OK);
    for (uint32_t s = 0; s < 3; s++)
        assert_int_equal(ag_alloc_free(f.a, b, s), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 0, 1), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 0, 2), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 1, 2), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 2, 1), AG_OK);
    assert_int_equal(stats(f.a).notices_sent, 4);
    assert_int_equal(ag_alloc_wait(f.a, 2, 1), AG_OK);
    assert_int_equal(stats(f.a).borrow_recycles, 0);
    assert_int_equal(ag_alloc_wait(f.a, 2, 0), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.borrow_recycles, 1); /* stream 2 recycled it */
    assert_int_equal(s.notices_stale, 0);
    assert_int_equal(ag_alloc_wait(f.a, 1, 0), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 1, 2), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.notices_stale, 2);
    assert_int_equal(s.borrow_recycles + s.birth_recycles, 1);
    assert_int_equal(s.pending, 0);
    /* an entry already stale is not even sent again */
    assert_int_equal(ag_alloc_send(f.a, 0, 2), AG_OK);
    assert_int_equal(stats(f.a).notices_sent, 4);
    atomic_store(&open, 1);
    fix_close(&f);
}

/* Each list counts its live entries, so that a send skips a list whose
 * entries are all stale; a recycle uncounts them.  A block released on
 * more streams than it has counting slots stays counted in the lists of
 * the extra streams (never fewer than the live entries). */
static void test_live_entries(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 5, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    for (uint32_t k = 0; k < 5; k++) /* no fallback may recycle behind the test's back */
        gate(&f, k, &open);
    ag_block *b = xmalloc(&f, 0, 4096);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(f.a->st[1].nlive, 1);
    assert_int_equal(f.a->st[0].nlive, 1);
    /* 1 learns 0 is done and recycles it: both entries are stale now */
    assert_int_equal(ag_alloc_send(f.a, 0, 1), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 1, 0), AG_OK);
    assert_int_equal(stats(f.a).borrow_recycles, 1);
    assert_int_equal(f.a->st[1].nlive, 0);
    assert_int_equal(f.a->st[0].nlive, 0);
    uint64_t sent = stats(f.a).notices_sent;
    assert_int_equal(ag_alloc_send(f.a, 1, 2), AG_OK);
    assert_int_equal(stats(f.a).notices_sent, sent);
    /* a new release on 1 is sent, the stale one is not */
    ag_block *c = xmalloc(&f, 0, 8192);
    assert_int_equal(ag_alloc_access(f.a, c, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
    assert_int_equal(f.a->st[1].nlive, 1);
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);
    assert_int_equal(stats(f.a).notices_sent, sent + 1);
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    ag_alloc_stats st = stats(f.a);
    assert_int_equal(st.returned_home, 1); /* b, borrowed by 1, went home with the event */
    assert_int_equal(st.birth_recycles, 2);
    assert_int_equal(f.a->st[1].nlive, 0);
    /* five streams release d: the first three are counted on the block,
     * 4 and 0 only in their own lists, which count the entry until their
     * next compaction (a stale entry there is scanned, never sent) */
    ag_block *d = xmalloc(&f, 0, 2048);
    for (uint32_t k = 1; k < 5; k++)
        assert_int_equal(ag_alloc_access(f.a, d, k), AG_OK);
    for (uint32_t k = 1; k < 5; k++)
        assert_int_equal(ag_alloc_free(f.a, d, k), AG_OK);
    assert_int_equal(d->lr_used, 3);
    assert_true(d->lr_over);
    assert_int_equal(ag_alloc_free(f.a, d, 0), AG_OK);
    sent = stats(f.a).notices_sent;
    for (uint32_t k = 1; k < 5; k++) {
        assert_int_equal(ag_alloc_send(f.a, k, 0), AG_OK);
        assert_int_equal(ag_alloc_wait(f.a, 0, k), AG_OK);
    }
    st = stats(f.a);
    assert_int_equal(st.notices_sent, sent + 4);
    assert_int_equal(st.birth_recycles, 3); /* 0 learnt that every user is done */
    assert_int_equal(st.pending, 0);
    for (uint32_t k = 1; k < 4; k++)
        assert_int_equal(f.a->st[k].nlive, 0);
    assert_int_equal(f.a->st[4].nlive, 1);
    assert_int_equal(f.a->st[0].nlive, 1);
    assert_int_equal(ag_alloc_send(f.a, 4, 1), AG_OK);
    assert_int_equal(stats(f.a).notices_sent, sent + 4);
    atomic_store(&open, 1);
    /* the final clean starts every list afresh */
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    for (uint32_t k = 0; k < 5; k++) {
        assert_int_equal(f.a->st[k].nlive, 0);
        assert_int_equal(f.a->st[k].nlrec, 0);
    }
    fix_close(&f);
}

/* Puts a block of size on stream 1's borrow allocator (born on 0). */
/* A notice carries its sender's view at the send; a stream that starts
 * using the block after that send is not in the view, yet has not
 * released anything.  Born on 0 and used by 1; 0 drops it and tells 3;
 * then 2 starts using it (kept busy by a gate) and drops it, 1 drops it
 * last and tells 3.  Stream 3 has learnt that 0 and 1 are done, never
 * that 2 is: it must not recycle the block while 2 may still run. */
static void test_join_after_send(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 4, AG_ALLOC_MULTI, 0);
    f.a->cfg.poll_every = 1; /* the fallback polled at every allocation */
    atomic_int open = 0;
    gate(&f, 2, &open);
    ag_block *b = xmalloc(&f, 0, 4096);
    void *p = ag_block_ptr(b);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 0, 1), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 1, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 0, 3), AG_OK); /* carries 0's view: only 1 uses it */
    assert_int_equal(ag_alloc_access(f.a, b, 2), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 1, 2), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 2, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 2), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 1, 3), AG_OK); /* 1's view: 0 and 2 use it */
    assert_int_equal(ag_alloc_wait(f.a, 3, 0), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 3, 1), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.birth_recycles + s.borrow_recycles, 0);
    assert_int_equal(s.pending, 4096);
    ag_block *x = xmalloc(&f, 3, 4096);
    assert_ptr_not_equal(ag_block_ptr(x), p);
    /* once 2 is done, the fallback sends it home */
    atomic_store(&open, 1);
    assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[2]), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[1]), AG_OK);
    ag_block *y = xmalloc(&f, 0, 4096);
    s = stats(f.a);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.polled_recycles, 1);
    assert_ptr_equal(ag_block_ptr(y), p);
    assert_int_equal(ag_alloc_free(f.a, x, 3), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    fix_close(&f);
}

static void park_on_1(fix *f, uint64_t size)
{
    ag_block *b = xmalloc(f, 0, size);
    assert_int_equal(ag_alloc_access(f->a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f->a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f->a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_send(f->a, 0, 1), AG_OK);
    assert_int_equal(ag_alloc_wait(f->a, 1, 0), AG_OK);
}

/* A borrow served by a larger cached size must empty that size's bucket, not
 * the requested one: the next borrow must find nothing there, not crash.
 * A bucket that still holds a block stays marked. */
static void test_borrow_larger_then_again(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    gate(&f, 1, &open); /* the blocks wait for notices, not for the fallback */
    park_on_1(&f, 16384);
    ag_borrow *br = &f.a->st[1].borrow;
    assert_int_equal(br->count, 1);
    ag_block *x = xmalloc(&f, 1, 12288); /* takes the 16 KiB block */
    assert_int_equal(ag_block_size(x), 16384);
    assert_int_equal(br->count, 0);
    for (uint32_t k = 0; k < AG_BINWORDS; k++)
        assert_int_equal(br->binmap[k], 0);
    ag_block *y = xmalloc(&f, 1, 12288); /* nothing to borrow: own pool */
    assert_int_equal(ag_block_size(y), 12288);
    assert_int_equal(stats(f.a).borrow_hits, 1);
    /* the same through the internal entry, with two sizes parked */
    park_on_1(&f, 8192);
    park_on_1(&f, 32768);
    assert_null(ag_borrow_take(f.a, br, 40000, UINT64_MAX));
    ag_block *t1 = ag_borrow_take(f.a, br, 4096, UINT64_MAX);
    assert_int_equal(t1->size, 8192);
    ag_block *t2 = ag_borrow_take(f.a, br, 4096, UINT64_MAX);
    assert_int_equal(t2->size, 32768);
    assert_null(ag_borrow_take(f.a, br, 4096, UINT64_MAX));
    /* two blocks in one bin: taking one leaves the bin marked for the
     * other, which a smaller request then finds through the bin map */
    park_on_1(&f, 32768);
    park_on_1(&f, 32768);
    ag_block *t3 = ag_borrow_take(f.a, br, 32768, UINT64_MAX);
    assert_non_null(t3);
    ag_block *t4 = ag_borrow_take(f.a, br, 4096, UINT64_MAX);
    assert_non_null(t4);
    assert_int_equal(t4->size, 32768);
    assert_null(ag_borrow_take(f.a, br, 4096, UINT64_MAX));
    ag_borrow_insert(f.a, br, t1, 1);
    ag_borrow_insert(f.a, br, t2, 1);
    ag_borrow_insert(f.a, br, t3, 1);
    ag_borrow_insert(f.a, br, t4, 1);
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, y, 1), AG_OK);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(br->count, 0);
    fix_close(&f);
}

/* A device with no room left: a small request that finds no span and no
 * borrowed block of a fitting size takes any borrowed one, however large,
 * and succeeds with no failure left on the context. */
static void test_borrow_when_full(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 1u << 20);
    atomic_int open = 0;
    gate(&f, 1, &open);
    park_on_1(&f, 1u << 20);
    assert_int_equal(f.a->st[1].borrow.count, 1);
    assert_int_equal(stats(f.a).reserved, 1u << 20);
    ag_block *x = xmalloc(&f, 1, 4096);
    assert_int_equal(ag_block_size(x), 1u << 20);
    assert_int_equal(stats(f.a).borrow_hits, 1);
    assert_int_equal(ag_ctx_last_status(f.ctx), AG_OK);
    assert_string_equal(ag_ctx_errmsg(f.ctx), "");
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    fix_close(&f);
}

static void test_streams_256(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 256, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    gate(&f, 0, &open);
    gate(&f, 64, &open);
    gate(&f, 130, &open);
    ag_block *b = xmalloc(&f, 255, 1 << 20);
    void *p = ag_block_ptr(b);
    assert_int_equal(ag_alloc_access(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_access(f.a, b, 130), AG_OK);
    assert_int_equal(ag_alloc_access(f.a, b, 64), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 255), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 64), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 130), AG_OK);
    /* 130 learns from 0, 64 and 255; then it holds nothing and borrows */
    uint32_t from[3] = {0, 64, 255};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ag_alloc_send(f.a, from[k], 130), AG_OK);
        assert_int_equal(ag_alloc_wait(f.a, 130, from[k]), AG_OK);
    }
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.borrow_recycles, 1);
    ag_block *c = xmalloc(&f, 130, 1 << 20);
    assert_ptr_equal(ag_block_ptr(c), p);
    assert_int_equal(ag_alloc_free(f.a, c, 130), AG_OK);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_LAST), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.borrowed, 0);
    assert_int_equal(s.allocated, 0);
    fix_close(&f);
}

static bool view_has(fix *f, ag_block *b, uint32_t m, uint32_t s)
{
    return ag_mif_is_set(ag_mif_view(f->a, b, m), f->a->w, 0, s);
}

/* Beyond 64 streams the MIF stores the common view and a row for each
 * stream whose view differs: a release or a notice makes the row, a join
 * reaches the common view and every row, a notice sent before a join keeps
 * the joiner's bit, and the recycle forgets the rows. */
static void test_mif_sparse_256(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 256, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    gate(&f, 3, &open);
    gate(&f, 130, &open);
    ag_block *b = xmalloc(&f, 200, 4096);
    assert_int_equal(ag_alloc_access(f.a, b, 3), AG_OK);
    for (uint32_t m = 0; m < 256; m++)
        assert_true(view_has(&f, b, m, 200) && view_has(&f, b, m, 3) && !view_has(&f, b, m, 130));
    assert_int_equal(b->nrows, 0);
    /* 200 releases: its own row, without its bit */
    assert_int_equal(ag_alloc_free(f.a, b, 200), AG_OK);
    assert_int_equal(b->nrows, 1);
    assert_false(view_has(&f, b, 200, 200));
    assert_true(view_has(&f, b, 255, 200));
    /* a notice to 255, sent before 130 joins and applied after */
    assert_int_equal(ag_alloc_send(f.a, 200, 255), AG_OK);
    assert_int_equal(ag_alloc_access(f.a, b, 130), AG_OK);
    assert_true(view_has(&f, b, 200, 130) && view_has(&f, b, 7, 130));
    assert_int_equal(ag_alloc_wait(f.a, 255, 200), AG_OK);
    assert_int_equal(b->nrows, 2);
    assert_false(view_has(&f, b, 255, 200));
    assert_true(view_has(&f, b, 255, 130) && view_has(&f, b, 255, 3));
    assert_true(view_has(&f, b, 0, 200)); /* a stream with no row: the common view */
    /* 3 releases; 130's free is the last: its view still counts 3 and 200 */
    assert_int_equal(ag_alloc_free(f.a, b, 3), AG_OK);
    assert_int_equal(b->nrows, 3);
    assert_int_equal(b->rowcap, 4); /* room for the rows made, not for 256 */
    assert_true(ag_block_bytes(256, 4) < 3u * 1024u);
    uint32_t version = b->version;
    assert_int_equal(ag_alloc_free(f.a, b, 130), AG_OK);
    const uint64_t *users = ag_mif_scratch(f.a, b); /* as the last free left it */
    assert_true(ag_mif_is_set(users, f.a->w, 0, 3) && ag_mif_is_set(users, f.a->w, 0, 130));
    assert_false(ag_mif_is_set(users, f.a->w, 0, 200)); /* the birth needs no event */
    assert_int_equal(b->version, version); /* 3 and 130 are busy: it waits */
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_LAST), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(stats(f.a).allocated, 0);
    /* handed out again: the same object, no rows, every view empty */
    ag_block *c = xmalloc(&f, 200, 4096);
    assert_ptr_equal(c, b);
    assert_int_equal(c->nrows, 0);
    for (uint32_t m = 0; m < 256; m++)
        assert_int_equal(ag_mif_rowof(256, c)[m], 0);
    assert_int_equal(ag_alloc_access(f.a, c, 9), AG_OK);
    assert_true(view_has(&f, c, 255, 9) && view_has(&f, c, 255, 200) && !view_has(&f, c, 255, 3));
    assert_int_equal(ag_alloc_free(f.a, c, 9), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, c, 200), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    fix_close(&f);
}

/* Every stream with a row of its own (sparse MIF): the users are the union
 * of the rows, no longer the common view.  Here every stream learnt that 5
 * released, so 5 is no user, though it joined. */
static void test_mif_sparse_all_rows(void **state)
{
    (void)state;
    fix f;
    const uint32_t n = 72;
    fix_open(&f, n, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    gate(&f, 1, &open);
    ag_block *b = xmalloc(&f, 0, 4096);
    for (uint32_t m = 1; m < n; m++)
        assert_int_equal(ag_alloc_access(f.a, b, m), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 5), AG_OK);
    for (uint32_t m = 0; m < n; m++)
        if (m != 5) {
            assert_int_equal(ag_alloc_send(f.a, 5, m), AG_OK);
            assert_int_equal(ag_alloc_wait(f.a, m, 5), AG_OK);
        }
    assert_int_equal(b->nrows, n);
    assert_int_equal(b->rowcap, n); /* 4, 8, ..., 64, then every stream */
    for (uint32_t m = 0; m < n; m++)
        assert_false(view_has(&f, b, m, 5));
    assert_true(view_has(&f, b, 0, 1));
    assert_true(ag_mif_is_set(b->mif, f.a->w, 0, 5)); /* the common view still has it */
    const uint64_t *users = ag_mif_users(f.a, b);
    for (uint32_t m = 0; m < n; m++)
        assert_int_equal(ag_mif_is_set(users, f.a->w, 0, m), m != 5);
    for (uint32_t m = 0; m < n; m++)
        if (m != 5)
            assert_int_equal(ag_alloc_free(f.a, b, m), AG_OK);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(stats(f.a).allocated, 0);
    fix_close(&f);
}

/* No host memory for a sparse row: a release fails cleanly and changes
 * nothing; a notice whose receiver has no row is dropped (the receiver
 * learns nothing, the block waits for its fallback); nothing leaks. */
static void test_mif_rows_oom(void **state)
{
    (void)state;
    ag_testalloc ta;
    ag_testalloc_init(&ta, 0, 0);
    fix f;
    fix_open_with(&f, 65, AG_ALLOC_MULTI, 0, NULL, &ta);
    ag_block *b = xmalloc(&f, 0, 4096);
    for (uint32_t m = 1; m <= 5; m++)
        assert_int_equal(ag_alloc_access(f.a, b, m), AG_OK);
    /* 1 releases: its row needs the first row buffer; each host
     * allocation of the free fails in turn, then none */
    bool views = false;
    for (uint64_t k = 1;; k++) {
        uint64_t nfail = ta.nfail;
        ta.fail_at = ta.calls + k;
        ag_status st = ag_alloc_free(f.a, b, 1);
        if (ta.nfail == nfail) {
            assert_int_equal(st, AG_OK);
            break;
        }
        assert_int_equal(st, AG_ENOMEM);
        views = views || agtest_errmsg_has(f.ctx, "views of a block shared among 65 streams");
        assert_int_equal(b->occ[1], 1);
        assert_int_equal(b->users, 6);
        assert_int_equal(b->nrows, 0);
        assert_true(view_has(&f, b, 1, 1));
    }
    ta.fail_at = 0;
    assert_true(views);
    assert_int_equal(b->nrows, 1);
    assert_false(view_has(&f, b, 1, 1));
    for (uint32_t m = 2; m <= 4; m++)
        assert_int_equal(ag_alloc_free(f.a, b, m), AG_OK);
    assert_int_equal(b->nrows, 4);
    assert_int_equal(b->rowcap, 4);
    /* a notice from 1 to 5: 5's row would need a larger buffer */
    assert_int_equal(ag_alloc_send(f.a, 1, 5), AG_OK);
    uint64_t nfail = ta.nfail;
    ta.fail_at = ta.calls + 1u;
    assert_int_equal(ag_alloc_wait(f.a, 5, 1), AG_OK);
    assert_int_equal(ta.nfail, nfail + 1u);
    ta.fail_at = 0;
    assert_int_equal(stats(f.a).notices_dropped, 1);
    assert_int_equal(stats(f.a).notices_applied, 0);
    assert_int_equal(b->nrows, 4);
    assert_true(view_has(&f, b, 5, 1)); /* 5 still counts 1 as a user */
    /* the last two frees: the fallback finds every stream idle */
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 5), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(stats(f.a).allocated, 0);
    assert_int_equal(stats(f.a).pending, 0);
    fix_close(&f);
    assert_int_equal(ta.live_blocks, 0);
}

/* The resource clean tells a block's birth stream what every stream
 * learnt, which may need a row of its own; with no host memory for it, the
 * block must still not be recycled while a stream uses it.  Four releases
 * fill the row buffer (four rows), so the birth's row needs a larger one;
 * each host allocation of the clean fails in turn, then none. */
static void test_clean_rows_oom(void **state)
{
    (void)state;
    ag_testalloc ta;
    ag_testalloc_init(&ta, 0, 0);
    fix f;
    fix_open_with(&f, 65, AG_ALLOC_MULTI, 0, NULL, &ta);
    ag_block *b = xmalloc(&f, 0, 4096);
    for (uint32_t m = 1; m <= 5; m++)
        assert_int_equal(ag_alloc_access(f.a, b, m), AG_OK);
    for (uint32_t m = 1; m <= 4; m++)
        assert_int_equal(ag_alloc_free(f.a, b, m), AG_OK);
    assert_int_equal(b->nrows, b->rowcap);
    bool failed = false;
    for (uint64_t k = 1;; k++) {
        uint64_t nfail = ta.nfail;
        ta.fail_at = ta.calls + k;
        ag_status st = ag_alloc_sync(f.a, AG_SYNC_CLEAN);
        bool none = ta.nfail == nfail;
        ta.fail_at = 0;
        assert_true(st == AG_OK || st == AG_ENOMEM);
        failed = failed || !none;
        /* 0 and 5 still use it: live, counted, never handed out again */
        assert_int_equal(b->state, AG_BLK_LIVE);
        assert_int_equal(b->users, 2);
        assert_int_equal(stats(f.a).allocated, 4096);
        ag_block *x = xmalloc(&f, 0, 4096);
        assert_ptr_not_equal(ag_block_ptr(x), ag_block_ptr(b));
        assert_int_equal(ag_alloc_free(f.a, x, 0), AG_OK);
        if (none)
            break;
    }
    assert_true(failed);
    assert_int_equal(ag_alloc_free(f.a, b, 5), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(stats(f.a).allocated, 0);
    fix_close(&f);
    assert_int_equal(ta.live_blocks, 0);
}

/* A stream's local-recycle list drops the entries it has sent to every
 * other stream when it would grow, and keeps the others (with the cursor
 * of each stream where it was): 200 releases on stream 1, each sent to
 * every stream at once, keep the list at its first size; with a stream
 * that is never sent to, the list keeps them all, and no entry is sent
 * twice to the others.  The counts of live entries stay exact: none once
 * the blocks are gone. */
static void test_lrec_compaction(void **state)
{
    (void)state;
    for (uint32_t n = 3; n <= 4; n++) {
        fix f;
        fix_open(&f, n, AG_ALLOC_MULTI, 0);
        enum { K = 200 };
        ag_block *b[K];
        for (uint32_t k = 0; k < K; k++) {
            b[k] = xmalloc(&f, 0, 4096);
            assert_int_equal(ag_alloc_access(f.a, b[k], 1), AG_OK);
            assert_int_equal(ag_alloc_access(f.a, b[k], 2), AG_OK);
            assert_int_equal(ag_alloc_free(f.a, b[k], 1), AG_OK);
            for (uint32_t d = 0; d < 3; d += 2) { /* to 0 and 2, never to 3 */
                assert_int_equal(ag_alloc_send(f.a, 1, d), AG_OK);
                assert_int_equal(ag_alloc_wait(f.a, d, 1), AG_OK);
            }
        }
        ag_astream *s1 = &f.a->st[1];
        assert_int_equal(stats(f.a).notices_sent, 2 * K);
        if (n == 3)
            assert_true(s1->caplrec <= 32);
        else
            assert_int_equal(s1->nlive, K);
        for (uint32_t k = 0; k < K; k++) {
            assert_int_equal(ag_alloc_free(f.a, b[k], 2), AG_OK);
            assert_int_equal(ag_alloc_free(f.a, b[k], 0), AG_OK);
        }
        assert_int_equal(stats(f.a).allocated, 0);
        assert_int_equal(s1->nlive, 0);
        assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
        fix_close(&f);
    }
}

static void test_host_memory_shared(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    ag_dev_stream *s[2];
    ag_memalloc *a = alloc_on(ctx, dev, dev, s, 2, AG_ALLOC_MULTI, AG_MEM_HOST);
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 100, &b), AG_OK);
    assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
    ag_alloc_stats st = {.size = sizeof st};
    ag_alloc_stats_get(a, &st, NULL);
    assert_int_equal(st.birth_recycles, 1); /* shared: no events needed */
    assert_int_equal(st.local_recycles, 0);
    ag_alloc_destroy(a);
    for (int k = 0; k < 2; k++)
        ag_dev_stream_destroy(dev, s[k]);
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
}

/* A block lent by a notice (borrow recycle) starts a new version: the
 * event its fallback recorded before the notice stands for the old one
 * and counts nothing for the new one.  Here that event (on 1) completes
 * while the lent block's own fallback still waits for a busy stream 3:
 * the block must stay pending.  poll_every 0, so that no poll runs while
 * the block sits in the borrow allocator (which would drop the stale entry
 * for its state alone). */
static void test_stale_event_after_borrow(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.fallback_min = 0;
    c.poll_every = 0;
    fix f;
    fix_open_cfg(&f, 4, AG_ALLOC_MULTI, 0, &c);
    atomic_int open1 = 0, open3 = 0;
    gate(&f, 1, &open1);
    ag_block *b = xmalloc(&f, 0, 4096);
    void *mem = ag_block_ptr(b);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_access(f.a, b, 2), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 2), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK); /* the last: an event on busy 1 */
    assert_int_equal(f.a->npend, 1);
    /* 2 learns that 0 and 1 released it: lent to 2 */
    assert_int_equal(ag_alloc_send(f.a, 0, 2), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 2, 0), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 1, 2), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 2, 1), AG_OK);
    assert_int_equal(stats(f.a).borrow_recycles, 1);
    ag_block *d = xmalloc(&f, 2, 4096);
    assert_ptr_equal(ag_block_ptr(d), mem);
    assert_int_equal(ag_alloc_access(f.a, d, 3), AG_OK);
    gate(&f, 3, &open3);
    assert_int_equal(ag_alloc_free(f.a, d, 3), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, d, 2), AG_OK); /* events on 2 and on busy 3 */
    atomic_store(&open1, 1);
    assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[1]), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[2]), AG_OK);
    uint64_t recycled = stats(f.a).polled_recycles;
    ag_block *x = xmalloc(&f, 1, 4096); /* a pool miss: the poll */
    assert_int_equal(stats(f.a).polled_recycles, recycled); /* 3 may still use it */
    assert_int_equal(stats(f.a).pending, 4096);
    atomic_store(&open3, 1);
    assert_int_equal(ag_dev_synchronize(f.dev), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    fix_close(&f);
}

/* The last free of a stream that knows every other use is over (a notice
 * told it) recycles at once: no idle query, no event, no fallback. */
static void test_last_free_known(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    ag_block *b = xmalloc(&f, 0, 4096);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 0, 1), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 1, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.borrow_recycles, 1); /* lent to 1, where it was freed */
    assert_int_equal(s.polled_recycles, 0);
    assert_int_equal(s.stream_queries, 0);
    assert_int_equal(s.pending, 0);
    assert_int_equal(f.a->npend + f.a->nlazy, 0);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    fix_close(&f);
}

/* A send carries the releases since the last send to that stream, once:
 * a second send and wait carry nothing again. */
static void test_send_once(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 3, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    gate(&f, 2, &open); /* 2 keeps its use: the block stays live */
    ag_block *b = xmalloc(&f, 0, 4096);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_access(f.a, b, 2), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);
        assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    }
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.notices_sent, 1);
    assert_int_equal(s.notices_applied, 1);
    assert_int_equal(s.notices_stale, 0);
    assert_int_equal(ag_alloc_free(f.a, b, 2), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    fix_close(&f);
}

/* A small shared block's last free asks its other users whether they are
 * idle until one is busy, and no further: one busy user is enough for it
 * to wait for its notices. */
static void test_idle_queries_stop(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 3, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    gate(&f, 1, &open);
    gate(&f, 2, &open);
    ag_block *b = xmalloc(&f, 0, 4096);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_access(f.a, b, 2), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 2), AG_OK);
    uint64_t asked = stats(f.a).stream_queries;
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.stream_queries, asked + 1);
    assert_int_equal(s.fallbacks_deferred, 1);
    assert_int_equal(s.pending, 4096);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(stats(f.a).pending, 0);
    fix_close(&f);
}

/* A notice sent when the joins had reached epoch e knows every stream that
 * joined up to e: the last of them (joined exactly at e) is in its row, and
 * its release there counts; only a stream that joined after the send keeps
 * its bit.  Here every use ends and each release reaches 0 by a notice:
 * the block goes home by the notices alone. */
static void test_join_at_send(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 4, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    for (uint32_t s = 1; s < 4; s++)
        gate(&f, s, &open); /* no stream is idle: only notices recycle */
    ag_block *b = xmalloc(&f, 0, 4096);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_access(f.a, b, 2), AG_OK); /* the join the send sees last */
    assert_int_equal(ag_alloc_free(f.a, b, 2), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 2, 0), AG_OK);
    assert_int_equal(ag_alloc_access(f.a, b, 3), AG_OK); /* after the send */
    assert_int_equal(ag_alloc_wait(f.a, 0, 2), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 3), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    for (uint32_t s = 1; s < 4; s += 2) {
        assert_int_equal(ag_alloc_send(f.a, s, 0), AG_OK);
        assert_int_equal(ag_alloc_wait(f.a, 0, s), AG_OK);
    }
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.polled_recycles, 0);
    assert_int_equal(s.birth_recycles, 1);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    fix_close(&f);
}

/* A request borrows the smallest parked block that fits, and the hit
 * counts for the borrowing stream too; a block more than twice the size
 * asked for stays parked for a request it fits better. */
static void test_borrow_fit(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    gate(&f, 1, &open);
    park_on_1(&f, 45056);
    park_on_1(&f, 40960);
    ag_block *y = xmalloc(&f, 1, 40960); /* 1's pool is empty; both fit: the smaller */
    assert_int_equal(ag_block_size(y), 40960);
    ag_alloc_stream_stats ss[2];
    ag_alloc_stats s = {.size = sizeof s};
    ag_alloc_stats_get(f.a, &s, ss);
    assert_int_equal(s.borrow_hits, 1);
    assert_int_equal(ss[1].borrow_hits, 1);
    assert_int_equal(ss[0].borrow_hits, 0);
    ag_block *x = xmalloc(&f, 1, 4096); /* 44 KiB is more than twice 4 KiB: growth */
    assert_int_equal(ag_block_size(x), 4096);
    assert_int_equal(stats(f.a).borrow_hits, 1);
    assert_int_equal(f.a->st[1].borrow.count, 1);
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, y, 1), AG_OK);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    fix_close(&f);
}

/* With borrow off (borrow 0) no request takes a block parked in its
 * stream's borrow allocator: a block born on 0 and freed last on 1 waits
 * there for its way home, and stream 1's request of its size is served by
 * stream 1's own pool, with no borrow hit.  The next send 1 -> 0 takes the
 * parked block home as usual. */
static void test_borrow_off(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.borrow = 0;
    fix f;
    fix_open_cfg(&f, 2, AG_ALLOC_MULTI, 0, &c);
    atomic_int open = 0;
    gate(&f, 1, &open); /* the block waits for its notices, not for the fallback */
    park_on_1(&f, 16384);
    ag_borrow *br = &f.a->st[1].borrow;
    assert_int_equal(br->count, 1);
    ag_block *x = xmalloc(&f, 1, 16384);
    assert_int_equal(ag_block_birth(x), 1);
    assert_int_equal(br->count, 1);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.borrow_hits, 0);
    assert_int_equal(s.borrowed, 16384);
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    assert_int_equal(br->count, 0);
    assert_int_equal(stats(f.a).returned_home, 1);
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    atomic_store(&open, 1);
    fix_close(&f);
}

/* poll_every counts the allocations made while a deferred free waits for
 * its event, from the last poll: those made before the event was queued
 * do not count, and a pool miss's poll starts the count again.  Stream 1
 * stays busy, so every poll asks the device about the one event. */
static void test_poll_count_restarts(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    f.a->cfg.poll_every = 3;
    f.a->cfg.fallback_min = 0; /* the event recorded at the last free */
    atomic_int open = 0;
    ag_block *b = shared_with_busy_1(&f, &open, 4096);
    ag_block *pad = xmalloc(&f, 0, 4096); /* nothing pending: not counted */
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(f.a->npend, 1);
    uint64_t polls = stats(f.a).event_polls;
    ag_block *x = xmalloc(&f, 0, 4096); /* the first counted */
    assert_int_equal(stats(f.a).event_polls, polls);
    /* stream 0's 256 KiB region cannot hold this, and L1 serves it: the
     * miss polls first, and the count starts again */
    ag_block *big = xmalloc(&f, 0, 256u << 10);
    assert_int_equal(stats(f.a).event_polls, polls + 1u);
    ag_block *y[3];
    y[0] = xmalloc(&f, 0, 4096);
    y[1] = xmalloc(&f, 0, 4096);
    assert_int_equal(stats(f.a).event_polls, polls + 1u);
    y[2] = xmalloc(&f, 0, 4096); /* the third since the miss: due */
    assert_int_equal(stats(f.a).event_polls, polls + 2u);
    assert_int_equal(f.a->npend, 1); /* still busy */
    atomic_store(&open, 1);
    ag_block *done[] = {pad, x, big, y[0], y[1], y[2]};
    for (int k = 0; k < 6; k++)
        assert_int_equal(ag_alloc_free(f.a, done[k], 0), AG_OK);
    fix_close(&f);
}

/* A look at a waiting block asks nothing of its birth stream, whose own
 * order covers its use there: block b (born on 0, used by 1) waits; both
 * streams are busy at stream 0's pool miss, which records an event on
 * stream 1 only; once stream 1 is done, the next poll sends b home while
 * stream 0 still runs. */
static void test_look_skips_birth(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    f.a->cfg.poll_every = 1;
    atomic_int open0 = 0, open1 = 0;
    ag_block *b = shared_with_busy_1(&f, &open1, 4096);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(f.a->nlazy, 1);
    gate(&f, 0, &open0);
    ag_block *x = xmalloc(&f, 0, 1u << 20); /* a miss: the look */
    assert_int_equal(f.a->npend, 1);
    assert_int_equal(b->events, 1);
    assert_int_equal(stats(f.a).fallbacks_recorded, 1);
    atomic_store(&open1, 1);
    assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[1]), AG_OK);
    ag_block *y = xmalloc(&f, 0, 4096); /* polls: stream 1's event is complete */
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.polled_recycles, 1);
    assert_int_equal(f.a->npend, 0);
    atomic_store(&open0, 1);
    assert_int_equal(ag_alloc_free(f.a, x, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    fix_close(&f);
}

/* A notice names a block and its version: one sent before the block was
 * recycled and handed out again must not touch the new use.  Old use: b
 * born on 0, used by 1; 0 releases and sends to 1; 1 drops it last (idle:
 * home at once, into 0's front cache).  New use: the same block object on
 * 0 again, shared with 1; only then does 1 wait for the old send.  Its
 * notice is stale: 1's view keeps 0's bit, so 1's last free (stream 0
 * still busy) sends the block home to 0 rather than lending it to 1, and
 * stream 1's next request gets other memory. */
static void test_stale_notice_new_use(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    ag_block *b = xmalloc(&f, 0, 4096);
    void *p = ag_block_ptr(b);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 0, 1), AG_OK); /* carries 0's release */
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK); /* 1 idle: home at once */
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.polled_recycles, 1);
    ag_block *c = xmalloc(&f, 0, 4096);
    assert_ptr_equal(c, b); /* the same block object, a new version */
    assert_ptr_equal(ag_block_ptr(c), p);
    assert_int_equal(ag_alloc_access(f.a, c, 1), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 1, 0), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.notices_stale, 1);
    assert_int_equal(s.notices_applied, 0);
    atomic_int open = 0;
    gate(&f, 0, &open); /* stream 0 still runs its use of c */
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.borrow_recycles, 0);
    assert_int_equal(f.a->st[1].borrow.count, 0);
    ag_block *x = xmalloc(&f, 1, 4096);
    assert_ptr_not_equal(ag_block_ptr(x), p);
    assert_int_equal(stats(f.a).borrow_hits, 0);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    fix_close(&f);
}

/* Whether a miss moves a region or looks first is weighed for the pool
 * that grows now, not the one that grew last: block b waits (stream 1
 * busy); stream 2 grows a region (its miss looks at b and records b's
 * event) and frees it; stream 0's miss then moves that region in, with no
 * poll before it. */
static void test_move_decision_current_pool(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 3, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    ag_block *fill = NULL;
    (void)waiting_in_full_region(&f, &open, &fill);
    ag_block *r = xmalloc(&f, 2, 256u << 10); /* L1's tail: L1 holds nothing more */
    void *moved = ag_block_ptr(r);
    assert_int_equal(ag_heap_cached(&f.a->l1), 0);
    assert_int_equal(f.a->npend, 1); /* b's event, recorded by that miss */
    assert_int_equal(ag_alloc_free(f.a, r, 2), AG_OK);
    uint64_t polls = stats(f.a).event_polls;
    ag_block *c = xmalloc(&f, 0, 128u << 10);
    ag_alloc_stats s = stats(f.a);
    assert_ptr_equal(ag_block_ptr(c), moved);
    assert_int_equal(s.regions_moved, 1);
    assert_int_equal(s.event_polls, polls);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, fill, 0), AG_OK);
    fix_close(&f);
}

/* What a user reads while blocks sit in every place at once: one live on
 * stream 0, one in stream 0's front cache, one parked in stream 1's borrow
 * allocator.  reserved = allocated + pending + cached; the borrowed block
 * counts in cached and borrowed, and for stream 1 (which holds it), not
 * stream 0 (its birth); stream 0's cached is its small region less what
 * is live or lent, the front cache included (one 256 KiB region, as in
 * test_clean_keeps_front); fragmentation comes from the
 * peaks, not the current figures. */
static void test_stats_parts(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    ag_block *b = shared_with_busy_1(&f, &open, 4096);
    ag_block *live = xmalloc(&f, 0, 8192);
    ag_block *r = xmalloc(&f, 0, 2048);
    assert_int_equal(ag_alloc_free(f.a, r, 0), AG_OK); /* into the front cache */
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 0, 1), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 1, 0), AG_OK);
    ag_alloc_stats s = {.size = sizeof s};
    ag_alloc_stream_stats ss[2];
    ag_alloc_stats_get(f.a, &s, ss);
    assert_int_equal(s.allocated, 8192);
    assert_int_equal(s.peak_allocated, 4096 + 8192 + 2048);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.borrowed, 4096);
    assert_int_equal(s.reserved, s.allocated + s.pending + s.cached);
    assert_int_equal(ss[0].allocated, 8192);
    assert_int_equal(ss[1].allocated, 0);
    assert_int_equal(ss[0].borrowed, 0);
    assert_int_equal(ss[1].borrowed, 4096);
    assert_int_equal(ss[1].cached, 0); /* no pool of its own; the borrowed block is not cached there */
    assert_int_equal(ss[0].cached, (256u << 10) - 8192 - 4096); /* its 256 KiB region */
    assert_int_equal(f.a->st[0].recent_bytes, 2048);
    double frag = 1.0 - (double)(4096 + 8192 + 2048) / (double)s.peak_reserved;
    assert_true(s.fragmentation > frag - 1e-12 && s.fragmentation < frag + 1e-12);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_free(f.a, live, 0), AG_OK);
    fix_close(&f);
}

/* The first and last sync stages carry and apply what an explicit event
 * would: as in test_local_borrow_home, but the event 0 -> 1 is the first
 * stage (stream 1 borrows the block), and the event 1 -> 0 the last
 * stage (the block goes home).  Stream 1 stays busy throughout. */
static void test_sync_stages_apply(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    ag_block *b = shared_with_busy_1(&f, &open, 4096);
    void *p = ag_block_ptr(b);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(stats(f.a).pending, 4096);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_FIRST), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.borrow_recycles, 1);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.borrowed, 4096);
    ag_block *y = xmalloc(&f, 1, 4000);
    assert_ptr_equal(ag_block_ptr(y), p);
    assert_int_equal(ag_alloc_free(f.a, y, 1), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_LAST), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.returned_home, 1);
    assert_int_equal(s.borrowed, 0);
    assert_int_equal(s.reserved, s.allocated + s.pending + s.cached);
    atomic_store(&open, 1);
    fix_close(&f);
}

/* The borrow allocator gives a request no block more than twice its size,
 * even one in the bin that bounds the search (9216 bytes sit in the bin of
 * 8192): stream 1's request of 4096 leaves the 9216-byte borrowed block
 * parked. */
static void test_borrow_size_bounds(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 64u << 20);
    atomic_int open = 0;
    ag_block *b = shared_with_busy_1(&f, &open, 9216);
    void *p = ag_block_ptr(b);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 0, 1), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 1, 0), AG_OK);
    assert_int_equal(stats(f.a).borrowed, 9216);
    ag_block *y = xmalloc(&f, 1, 4096);
    assert_ptr_not_equal(ag_block_ptr(y), p);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.borrow_hits, 0);
    assert_int_equal(s.borrowed, 9216);
    assert_int_equal(ag_alloc_free(f.a, y, 1), AG_OK);
    atomic_store(&open, 1);
    fix_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mif_rows_256),
        cmocka_unit_test(test_birth_recycle),
        cmocka_unit_test(test_local_borrow_home),
        cmocka_unit_test(test_polled_fallback),
        cmocka_unit_test(test_poll_every),
        cmocka_unit_test(test_later_point_seen),
        cmocka_unit_test(test_fallback_waits_for_notice),
        cmocka_unit_test(test_fallback_at_miss),
        cmocka_unit_test(test_lent_block_fallback),
        cmocka_unit_test(test_miss_moves_before_look),
        cmocka_unit_test(test_fallback_min),
        cmocka_unit_test(test_fallback_list_bounded),
        cmocka_unit_test(test_local_then_birth),
        cmocka_unit_test(test_fanout_stale),
        cmocka_unit_test(test_live_entries),
        cmocka_unit_test(test_join_after_send),
        cmocka_unit_test(test_borrow_larger_then_again),
        cmocka_unit_test(test_borrow_when_full),
        cmocka_unit_test(test_streams_256),
        cmocka_unit_test(test_mif_sparse_256),
        cmocka_unit_test(test_mif_sparse_all_rows),
        cmocka_unit_test(test_mif_rows_oom),
        cmocka_unit_test(test_clean_rows_oom),
        cmocka_unit_test(test_lrec_compaction),
        cmocka_unit_test(test_host_memory_shared),
        cmocka_unit_test(test_stale_event_after_borrow),
        cmocka_unit_test(test_last_free_known),
        cmocka_unit_test(test_send_once),
        cmocka_unit_test(test_idle_queries_stop),
        cmocka_unit_test(test_join_at_send),
        cmocka_unit_test(test_borrow_fit),
        cmocka_unit_test(test_borrow_off),
        cmocka_unit_test(test_poll_count_restarts),
        cmocka_unit_test(test_look_skips_birth),
        cmocka_unit_test(test_stale_notice_new_use),
        cmocka_unit_test(test_move_decision_current_pool),
        cmocka_unit_test(test_stats_parts),
        cmocka_unit_test(test_sync_stages_apply),
        cmocka_unit_test(test_borrow_size_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
