/* Unit tests of the multi-stream caching allocator, layer by layer: the span
 * heap (split, merge, trim), the MIF bitmap at 256 streams, the borrow
 * allocator, the three recycle modes, version-filtered notices, trim and
 * retry on a small device, the baseline mode, trace parsing and replay,
 * and host and device failure sweeps. */
#include <sched.h>
#include <stdatomic.h>

#include "support/agtest.h"

#include "aliasguard/alloc.h"
#include "aliasguard/device.h"
#include "rt/alloc_internal.h"

/* ---- span heap over a fake backing ---- */

typedef struct fake_backing {
    int grows, releases;
    uint64_t live;
} fake_backing;

static ag_status fake_grow(void *ud, uint64_t size, uintptr_t *addr, void **cookie, uint64_t *got)
{
    fake_backing *f = ud;
    void *p = aligned_alloc(4096, size);
    if (!p)
        return AG_ENOMEM;
    f->grows++;
    f->live += size;
    *addr = (uintptr_t)p;
    *cookie = p;
    *got = size;
    return AG_OK;
}

static void fake_release(void *ud, uintptr_t addr, uint64_t size, void *cookie)
{
    fake_backing *f = ud;
    (void)addr;
    f->releases++;
    f->live -= size;
    free(cookie);
}

static uint32_t count_spare_regions(const ag_heap *h)
{
    uint32_t n = 0;
    for (const ag_region *r = h->spare_regions; r; r = r->next)
        n++;
    return n;
}

/* A wholly free region moved between two heaps sharing a whole set takes
 * a record of the adopting heap; its old record goes back to the heap that
 * allocated it, so either heap may be destroyed first (under ASan, a record
 * freed with one heap and still listed in the other is a use after free). */
static void test_heap_adopt_records(void **state)
{
    (void)state;
    for (int first = 0; first < 2; first++) {
        ag_ctx *ctx = agtest_ctx();
        fake_backing fb = {0};
        ag_wholeset set;
        memset(&set, 0, sizeof set);
        set.qshift = 12;
        uint64_t epoch = 0;
        ag_heap h[2];
        for (int k = 0; k < 2; k++) {
            ag_heap_init(&h[k], ctx, 4096, 4096, UINT64_MAX, fake_grow, fake_release, &fb, false);
            ag_heap_share_whole(&h[k], &set, &epoch, (uint32_t)k);
        }
        assert_int_equal(ag_heap_prepare(&h[0]), AG_OK);
        ag_span *s = NULL;
        assert_int_equal(ag_heap_grow_take(&h[0], 65536, 4096, &s), AG_OK);
        ag_region *rec0 = h[0].regions;
        uint32_t spare0 = count_spare_regions(&h[0]);
        ag_span *w = ag_heap_put(&h[0], s);
        assert_true(ag_heap_has_free_region(&h[0]));
        assert_int_equal(ag_heap_prepare(&h[1]), AG_OK);
        uint32_t spare1 = count_spare_regions(&h[1]);
        ag_span *t = ag_heap_adopt(&h[1], w, 8192);
        assert_non_null(t);
        assert_int_equal(t->size, 8192);
        /* the region changed heaps, its old record did not */
        assert_null(h[0].regions);
        assert_int_equal(h[0].reserved, 0);
        assert_int_equal(h[1].reserved, 65536);
        assert_ptr_not_equal(h[1].regions, rec0);
        assert_int_equal(h[1].regions->addr, rec0->addr);
        assert_int_equal(count_spare_regions(&h[0]), spare0 + 1);
        assert_int_equal(count_spare_regions(&h[1]), spare1 - 1);
        assert_true(ag_heap_check(&h[0]) && ag_heap_check(&h[1]));
        ag_heap_put(&h[1], t);
        assert_true(ag_heap_check(&h[1]));
        ag_heap_destroy(&h[first]);
        ag_heap_destroy(&h[1 - first]);
        assert_int_equal(fb.live, 0);
        assert_int_equal(fb.grows, 1);
        assert_int_equal(fb.releases, 1);
        ag_ctx_destroy(ctx);
    }
}

static void test_heap_split_merge(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    fake_backing fb = {0};
    ag_heap h;
    ag_heap_init(&h, ctx, 512, 512, UINT64_MAX, fake_grow, fake_release, &fb, false);
    assert_int_equal(ag_heap_grow(&h, 8192), AG_OK);
    assert_int_equal(ag_heap_reserve(&h), AG_OK);
    ag_span *a = ag_heap_take(&h, 1024);
    assert_int_equal(ag_heap_reserve(&h), AG_OK);
    ag_span *b = ag_heap_take(&h, 2048);
    assert_int_equal(ag_heap_reserve(&h), AG_OK);
    ag_span *c = ag_heap_take(&h, 1024);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    /* split: consecutive pieces of one region */
    assert_int_equal(b->addr, a->addr + 1024);
    assert_int_equal(c->addr, b->addr + 2048);
    assert_int_equal(h.used, 4096);
    assert_true(ag_heap_check(&h));
    /* freeing the middle leaves a hole that an exact request refills */
    ag_heap_put(&h, b);
    assert_true(ag_heap_check(&h));
    assert_int_equal(ag_heap_reserve(&h), AG_OK);
    ag_span *b2 = ag_heap_take(&h, 2048);
    assert_int_equal(b2->addr, a->addr + 1024);
    /* a request larger than the hole goes to the tail */
    ag_heap_put(&h, b2);
    assert_int_equal(ag_heap_reserve(&h), AG_OK);
    ag_span *d = ag_heap_take(&h, 3072);
    assert_int_equal(d->addr, c->addr + 1024);
    /* merge: freeing a then c joins a, the hole and c into one span */
    ag_heap_put(&h, a);
    ag_heap_put(&h, c);
    assert_true(ag_heap_check(&h));
    assert_int_equal(ag_heap_reserve(&h), AG_OK);
    ag_span *e = ag_heap_take(&h, 4096);
    assert_int_equal(e->addr, a->addr);
    /* trim returns nothing while a span is taken, the region once all is free */
    assert_int_equal(ag_heap_trim(&h), 0);
    ag_heap_put(&h, d);
    ag_heap_put(&h, e);
    assert_true(ag_heap_check(&h));
    assert_int_equal(ag_heap_trim(&h), 8192);
    assert_int_equal(fb.live, 0);
    assert_int_equal(h.reserved, 0);
    ag_heap_destroy(&h);
    ag_ctx_destroy(ctx);
}

static void test_heap_max_split(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    fake_backing fb = {0};
    ag_heap h;
    /* spans of 64 KiB or more are never split nor given to smaller requests */
    ag_heap_init(&h, ctx, 512, 512, 65536, fake_grow, fake_release, &fb, false);
    assert_int_equal(ag_heap_grow(&h, 131072), AG_OK);
    assert_int_equal(ag_heap_reserve(&h), AG_OK);
    assert_null(ag_heap_take(&h, 1024));
    ag_span *big = ag_heap_take(&h, 100000 / 512 * 512 + 512);
    assert_non_null(big);
    assert_int_equal(big->size, 131072); /* whole, not split */
    ag_heap_put(&h, big);
    /* under pressure (or after a growth that could not stay below
     * max_split) a smaller request takes it whole */
    assert_int_equal(ag_heap_reserve(&h), AG_OK);
    big = ag_heap_take_any(&h, 1024);
    assert_non_null(big);
    assert_int_equal(big->size, 131072);
    ag_heap_put(&h, big);
    assert_true(ag_heap_check(&h));
    ag_heap_destroy(&h);
    assert_int_equal(fb.live, 0);
    ag_ctx_destroy(ctx);
}

/* keep: spans that large serve requests that large only (split for them);
 * alone: requests that large take no span more than slack percent larger */
static void test_heap_keep_alone(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    fake_backing fb = {0};
    ag_heap h;
    ag_heap_init(&h, ctx, 512, 512, UINT64_MAX, fake_grow, fake_release, &fb, false);
    h.keep = h.alone = 65536;
    h.slack = 0; /* exact fits only */
    assert_int_equal(ag_heap_grow(&h, 131072), AG_OK);
    assert_int_equal(ag_heap_reserve(&h), AG_OK);
    assert_null(ag_heap_take(&h, 98304));
    h.slack = 50;
    assert_int_equal(ag_heap_reserve(&h), AG_OK);
    assert_null(ag_heap_take(&h, 1024));  /* kept for a large request */
    assert_null(ag_heap_take(&h, 65536)); /* twice its size: too large */
    ag_span *big = ag_heap_take(&h, 98304); /* 128 KiB < 1.5 x 96 KiB */
    assert_non_null(big);
    assert_int_equal(big->size, 98304); /* split for it */
    assert_true(ag_heap_check(&h));
    /* the 32 KiB remainder is below keep: a small request takes it */
    assert_int_equal(ag_heap_reserve(&h), AG_OK);
    ag_span *small = ag_heap_take(&h, 1024);
    assert_non_null(small);
    assert_int_equal(small->addr, big->addr + 98304);
    ag_heap_put(&h, small);
    ag_heap_put(&h, big);
    /* without the rules the same spans serve anything */
    h.keep = h.alone = UINT64_MAX;
    assert_int_equal(ag_heap_reserve(&h), AG_OK);
    small = ag_heap_take(&h, 1024);
    assert_non_null(small);
    ag_heap_put(&h, small);
    assert_true(ag_heap_check(&h));
    ag_heap_destroy(&h);
    assert_int_equal(fb.live, 0);
    ag_ctx_destroy(ctx);
}

static void test_bins(void **state)
{
    (void)state;
    uint32_t prev = 0;
    for (uint64_t u = 1; u < 100000; u++) {
        uint32_t b = ag_alloc_bin(u);
        assert_true(b >= prev && b < AG_NBINS);
        prev = b;
    }
    assert_true(ag_alloc_bin(UINT64_MAX) < AG_NBINS);
    uint64_t map[AG_BINWORDS] = {0};
    map[3] = UINT64_C(1) << 5;
    assert_int_equal(ag_binmap_next(map, 0), 3 * 64 + 5);
    assert_int_equal(ag_binmap_next(map, 3 * 64 + 6), AG_NBINS);
}

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

/* ---- allocator fixtures ---- */

typedef struct fix {
    ag_ctx *ctx;
    ag_device *dev;
    ag_dev_stream **s;
    uint32_t n;
    ag_memalloc *a;
} fix;

/* cfg: NULL for the defaults with n streams in mode; ta: NULL, or the
 * test allocator the context allocates through */
static void fix_open_with(fix *f, uint32_t n, ag_alloc_mode mode, uint64_t hbm, const ag_alloc_config *cfg,
                          ag_testalloc *ta)
{
    memset(f, 0, sizeof *f);
    if (ta) {
        ag_allocator hook = ag_testalloc_hook(ta);
        f->ctx = ag_ctx_create(&hook);
        assert_non_null(f->ctx);
    } else {
        f->ctx = agtest_ctx();
    }
    ag_device_sim_config dc = ag_device_sim_defaults();
    if (hbm)
        dc.capacity[AG_MEM_HBM] = hbm;
    assert_int_equal(ag_device_sim_create(f->ctx, &dc, &f->dev), AG_OK);
    f->n = n;
    f->s = calloc(n, sizeof *f->s);
    for (uint32_t k = 0; k < n; k++)
        assert_int_equal(ag_dev_stream_create(f->dev, &f->s[k]), AG_OK);
    ag_alloc_config c;
    if (cfg)
        c = *cfg;
    else
        ag_alloc_config_default(&c);
    c.nstreams = n;
    c.mode = mode;
    assert_int_equal(ag_alloc_create(f->ctx, f->dev, f->s, &c, &f->a), AG_OK);
}

static void fix_open_cfg(fix *f, uint32_t n, ag_alloc_mode mode, uint64_t hbm, const ag_alloc_config *cfg)
{
    fix_open_with(f, n, mode, hbm, cfg, NULL);
}

static void fix_open(fix *f, uint32_t n, ag_alloc_mode mode, uint64_t hbm)
{
    fix_open_cfg(f, n, mode, hbm, NULL);
}

static bool heaps_ok(const ag_memalloc *a)
{
    if (!ag_heap_check(&a->l1))
        return false;
    for (uint32_t k = 0; k < a->n; k++)
        if (!ag_heap_check(&a->st[k].pool[0]) || !ag_heap_check(&a->st[k].pool[1]))
            return false;
    return true;
}

static void fix_close(fix *f)
{
    assert_true(heaps_ok(f->a));
    ag_alloc_destroy(f->a);
    ag_dev_stats ds = {.size = sizeof ds};
    ag_dev_stats_get(f->dev, &ds);
    assert_int_equal(ds.mem[AG_MEM_HBM].live, 0); /* everything went back to the device */
    for (uint32_t k = 0; k < f->n; k++)
        ag_dev_stream_destroy(f->dev, f->s[k]);
    free(f->s);
    ag_device_destroy(f->dev);
    ag_ctx_destroy(f->ctx);
}

static ag_alloc_stats stats(ag_memalloc *a)
{
    ag_alloc_stats s = {.size = sizeof s};
    ag_alloc_stats_get(a, &s, NULL);
    return s;
}

static ag_block *xmalloc(fix *f, uint32_t s, uint64_t size)
{
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(f->a, s, size, &b), AG_OK);
    assert_non_null(b);
    return b;
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

/* A kernel that holds its stream until the test opens the gate, so that
 * an event recorded behind it stays incomplete. */
static ag_status gate_kernel(void *arg)
{
    atomic_int *open = arg;
    while (!atomic_load(open))
        sched_yield();
    return AG_OK;
}

/* Keeps stream s busy until *open: events recorded on it stay incomplete,
 * so a shared block released there waits for notices. */
static void gate(fix *f, uint32_t s, atomic_int *open)
{
    assert_int_equal(ag_dev_launch(f->dev, f->s[s], gate_kernel, open, "gate"), AG_OK);
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
        f.a->cfg.poll_every = 0; /* only the miss looks */
        atomic_int open = 0;
        /* stream 0's first small region (256 KiB): b and fill */
        ag_block *b = shared_with_busy_1(&f, &open, 128u << 10);
        ag_block *fill = xmalloc(&f, 0, 128u << 10);
        void *p = ag_block_ptr(b);
        assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
        assert_int_equal(f.a->nlazy, 1);
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
 * the requested one: the next borrow must find nothing there, not crash. */
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
    ag_borrow_insert(f.a, br, t1, 1);
    ag_borrow_insert(f.a, br, t2, 1);
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

/* max_split below the regions and segments the allocator grows: a span
 * that large is never split, so a growth that large is the request alone
 * (else a smaller request would find no span to serve it, and a larger
 * one would hold the whole region), in both modes.  And region sizes of
 * 2^62 or more are refused. */
static void test_max_split_below_regions(void **state)
{
    (void)state;
    for (int m = 0; m < 2; m++) {
        ag_alloc_mode mode = m ? AG_ALLOC_BASELINE : AG_ALLOC_MULTI;
        ag_alloc_config c;
        ag_alloc_config_default(&c);
        c.max_split = 512u << 10;
        fix f;
        fix_open_cfg(&f, 2, mode, 0, &c);
        ag_block *a = xmalloc(&f, 0, 300u << 10);
        assert_int_equal(ag_block_size(a), 300u << 10);
        ag_block *b = xmalloc(&f, 1, 1000);
        assert_int_equal(ag_block_size(b), 1024);
        ag_block *d = xmalloc(&f, 0, 600u << 10); /* a region of its own, in pages in the multi mode */
        assert_int_equal(ag_block_size(d), m ? 600u << 10 : 640u << 10);
        assert_true(heaps_ok(f.a));
        assert_int_equal(ag_alloc_free(f.a, a, 0), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, d, 0), AG_OK);
        assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
        assert_true(heaps_ok(f.a));
        fix_close(&f);
    }
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    ag_dev_stream *s = NULL;
    assert_int_equal(ag_dev_stream_create(dev, &s), AG_OK);
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.nstreams = 1;
    c.l1_segment = UINT64_MAX;
    ag_memalloc *a = NULL;
    assert_int_equal(ag_alloc_create(ctx, dev, &s, &c, &a), AG_EINVAL);
    assert_true(agtest_errmsg_has(ctx, "l1_segment must be at most 4611686018427387903 bytes"));
    ag_alloc_config_default(&c);
    c.nstreams = 1;
    c.page_size = UINT64_C(1) << 63; /* a power of two, above every request */
    assert_int_equal(ag_alloc_create(ctx, dev, &s, &c, &a), AG_EINVAL);
    assert_true(agtest_errmsg_has(ctx, "page_size, small_region"));
    ag_dev_stream_destroy(dev, s);
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
}

/* The timed device answers a query from its model when the model says
 * busy, yet still refuses what the seam says it refuses: a query of a
 * capturing stream, and any query once the device is poisoned. */
static void test_timed_refuses(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *sim = NULL, *dev = NULL;
    ag_timed *t = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &sim), AG_OK);
    assert_int_equal(ag_timed_wrap(sim, 10, &t, &dev), AG_OK);
    ag_dev_stream *s = NULL;
    ag_dev_event *e = NULL;
    assert_int_equal(ag_dev_stream_create(dev, &s), AG_OK);
    assert_int_equal(ag_dev_event_create(dev, &e), AG_OK);
    ag_timed_kernel(t, s); /* busy for 10 ticks in the model */
    assert_int_equal(ag_dev_event_record(dev, e, s), AG_OK);
    bool idle = true, done = true;
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_OK);
    assert_false(idle);
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_OK);
    assert_false(done);
    assert_int_equal(ag_dev_capture_begin(dev, s), AG_OK);
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_EINVAL);
    assert_true(agtest_errmsg_has(ctx, "is capturing"));
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_end(dev, s, &g), AG_OK);
    ag_dev_graph_destroy(dev, g);
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_OK);
    ag_dev_poison(dev, "a test fault");
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_EDEVICE);
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_EDEVICE);
    assert_true(agtest_errmsg_has(ctx, "a test fault"));
    ag_dev_event_destroy(dev, e);
    ag_dev_stream_destroy(dev, s);
    ag_device_destroy(dev);
    ag_device_destroy(sim);
    ag_ctx_destroy(ctx);
}

/* The timed device passes on an inner event_query failure where its model
 * says the event is complete (as its stream_query does). */
static void test_timed_query_failure(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *sim = NULL, *fw = NULL, *dev = NULL;
    ag_timed *t = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &sim), AG_OK);
    ag_dev_fault fl;
    ag_dev_fault_init(&fl, AG_DEV_ENTRY_BIT(AG_DEV_E_EVENT_QUERY), 1, 0, AG_FAULT_RETURN);
    assert_int_equal(ag_device_fault_wrap(ctx, sim, &fl, &fw), AG_OK);
    assert_int_equal(ag_timed_wrap(fw, 10, &t, &dev), AG_OK);
    ag_dev_stream *s = NULL;
    ag_dev_event *e = NULL;
    assert_int_equal(ag_dev_stream_create(dev, &s), AG_OK);
    assert_int_equal(ag_dev_event_create(dev, &e), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e, s), AG_OK);
    bool done = false;
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_EDEVICE);
    assert_errmsg(ctx, "event_query: injected fault");
    assert_int_equal(fl.nfail, 1);
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_OK); /* the next one answers */
    assert_true(done);
    ag_dev_event_destroy(dev, e);
    ag_dev_stream_destroy(dev, s);
    ag_device_destroy(dev);
    ag_device_destroy(fw);
    ag_device_destroy(sim);
    ag_ctx_destroy(ctx);
}

/* A deferred free's queue stays as long as its pending entries, not as
 * long as the execution: here stream 1's newest entry is always pending
 * when a poll pops the older ones, so the queue never empties; 20,000
 * deferred frees must not leave 20,000 slots behind (the popped front is
 * reused).  Baseline mode, where every cross-stream free is deferred. */
static void test_pend_queue_bounded(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *sim = NULL, *dev = NULL;
    ag_timed *t = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &sim), AG_OK);
    assert_int_equal(ag_timed_wrap(sim, 4, &t, &dev), AG_OK);
    ag_dev_stream *s[2];
    for (int k = 0; k < 2; k++)
        assert_int_equal(ag_dev_stream_create(dev, &s[k]), AG_OK);
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.nstreams = 2;
    c.mode = AG_ALLOC_BASELINE;
    ag_memalloc *a = NULL;
    assert_int_equal(ag_alloc_create(ctx, dev, s, &c, &a), AG_OK);
    uint32_t most = 0;
    for (int i = 0; i < 20000; i++) {
        ag_block *b = NULL;
        ag_timed_tick(t);
        assert_int_equal(ag_alloc_malloc(a, 0, 4096, &b), AG_OK);
        ag_timed_kernel(t, s[0]);
        ag_timed_tick(t);
        assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
        ag_timed_kernel(t, s[1]);
        ag_timed_tick(t);
        assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
        ag_timed_tick(t);
        assert_int_equal(ag_alloc_free(a, b, 0), AG_OK);
        uint32_t left = a->st[1].npend - a->st[1].pend_head;
        most = left > most ? left : most;
    }
    assert_true(most >= 1 && most <= 4); /* a few pending at a time */
    assert_true(a->st[1].cappend <= 16);
    assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
    ag_alloc_stats st = {.size = sizeof st};
    ag_alloc_stats_get(a, &st, NULL);
    assert_int_equal(st.allocated, 0);
    ag_alloc_destroy(a);
    for (int k = 0; k < 2; k++)
        ag_dev_stream_destroy(dev, s[k]);
    ag_device_destroy(dev);
    ag_device_destroy(sim);
    ag_ctx_destroy(ctx);
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

/* With fine regions (steal), L1 asks the device for a quarter segment
 * first, then for as much as it holds already, up to one segment: a 4 KiB
 * graph holds 512 KiB (two 256 KiB small regions), and each later growth
 * doubles what is held until segments are 2 MiB.  Without steal (or in
 * the baseline) the first growth is a whole segment. */
static void test_l1_geometric(void **state)
{
    (void)state;
    for (int steal = 1; steal >= 0; steal--) {
        fix f;
        fix_open(&f, 1, AG_ALLOC_MULTI, 0);
        f.a->cfg.steal = (uint32_t)steal;
        ag_block *b[64];
        b[0] = xmalloc(&f, 0, 4096);
        ag_alloc_stats s = stats(f.a);
        assert_int_equal(s.device_allocs, 1);
        assert_int_equal(s.reserved, steal ? 512u << 10 : 2u << 20);
        /* 256 KiB blocks, each filling a small region of its own */
        uint64_t held[6] = {s.reserved};
        for (int k = 1; k < 64; k++) {
            b[k] = xmalloc(&f, 0, 256u << 10);
            s = stats(f.a);
            if (s.device_allocs <= 6 && !held[s.device_allocs - 1])
                held[s.device_allocs - 1] = s.reserved;
        }
        if (steal) {
            /* 512 KiB, then as much again each time: 1, 2, 4 MiB, then 2 MiB */
            static const uint64_t want[6] = {512u << 10, 1u << 20, 2u << 20, 4u << 20, 6u << 20, 8u << 20};
            for (int k = 0; k < 6; k++)
                assert_int_equal(held[k], want[k]);
        } else {
            for (int k = 1; k < 6; k++)
                assert_int_equal(held[k], held[k - 1] + (2u << 20));
        }
        for (int k = 0; k < 64; k++)
            assert_int_equal(ag_alloc_free(f.a, b[k], 0), AG_OK);
        fix_close(&f);
    }
}

/* The multi mode's L1 has its records before the first allocation, which
 * then allocates none for L1; the baseline, whose pools grow from the
 * device, leaves L1 empty. */
static void test_l1_prepared(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        fix f;
        fix_open(&f, 2, (ag_alloc_mode)mode, 0);
        ag_heap *l1 = &f.a->l1;
        if (mode == AG_ALLOC_BASELINE) {
            assert_int_equal(l1->nchunks, 0);
            assert_null(l1->spare_regions);
            fix_close(&f);
            continue;
        }
        assert_int_equal(l1->nchunks, 1);
        void *chunk = l1->region_chunks;
        uint32_t spare = count_spare_regions(l1);
        assert_non_null(chunk);
        assert_true(spare > 1);
        ag_block *b = xmalloc(&f, 0, 4096);
        assert_int_equal(l1->nchunks, 1);
        assert_ptr_equal(l1->region_chunks, chunk); /* no record allocated */
        assert_int_equal(count_spare_regions(l1), spare - 1); /* the first segment took one */
        assert_int_equal(stats(f.a).device_allocs, 1);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
        fix_close(&f);
    }
}

/* While L1 caches a free span too small for a pool's new region, it asks
 * the device for that region alone, not for a segment that would leave
 * one more tail; from empty it grows geometrically again. */
static void test_l1_tail(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 1, AG_ALLOC_MULTI, 0);
    ag_block *b[4];
    b[0] = xmalloc(&f, 0, 4096); /* a 512 KiB segment, a 256 KiB region cut */
    assert_int_equal(ag_heap_cached(&f.a->l1), 256u << 10);
    b[1] = xmalloc(&f, 0, 320u << 10); /* the 256 KiB tail cannot serve it */
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.device_allocs, 2);
    assert_int_equal(s.reserved, (512u + 320u) << 10);
    b[2] = xmalloc(&f, 0, 256u << 10); /* the tail serves this one */
    s = stats(f.a);
    assert_int_equal(s.device_allocs, 2);
    assert_int_equal(ag_heap_cached(&f.a->l1), 0);
    b[3] = xmalloc(&f, 0, 256u << 10); /* L1 empty: as much as it holds */
    s = stats(f.a);
    assert_int_equal(s.device_allocs, 3);
    assert_int_equal(s.reserved, 2u * ((512u + 320u) << 10));
    for (int k = 0; k < 4; k++)
        assert_int_equal(ag_alloc_free(f.a, b[k], 0), AG_OK);
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

/* A free L1 segment as large as a large request alone (10 MiB) is kept for
 * such requests: a small region does not cut it, and the large request of
 * the next execution finds it whole. */
static void test_l1_keeps_large(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    f.a->cfg.l1_cache_limit = 64u << 20; /* the clean gives the region to L1, which keeps it */
    ag_block *g = xmalloc(&f, 0, 12u << 20);
    uintptr_t lo = (uintptr_t)ag_block_ptr(g), hi = lo + (12u << 20);
    assert_int_equal(ag_alloc_free(f.a, g, 0), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(ag_heap_cached(&f.a->l1), 12u << 20);
    ag_block *small = xmalloc(&f, 1, 256u << 10);
    uintptr_t p = (uintptr_t)ag_block_ptr(small);
    assert_true(p + (256u << 10) <= lo || p >= hi);
    assert_int_equal(stats(f.a).device_allocs, 2);
    g = xmalloc(&f, 0, 12u << 20);
    assert_int_equal((uintptr_t)ag_block_ptr(g), lo);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.device_allocs, 2);
    /* and the small region alone: L1 caches a span it may not cut for it */
    assert_int_equal(s.peak_reserved, (12u << 20) + (256u << 10));
    assert_int_equal(ag_alloc_free(f.a, g, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, small, 1), AG_OK);
    fix_close(&f);
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
        ag_alloc_stats s = stats(f.a);
        assert_int_equal(s.device_allocs, 1);
        assert_int_equal(s.peak_reserved, 24u << 20);
        assert_int_equal(ag_alloc_free(f.a, c, s1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
        fix_close(&f);
    }
}

/* A device of 6 MiB: stream 0 fills and frees (its pools keep the memory),
 * stream 1 then needs memory: L1 trims, the pools give back, the retry wins. */
static void test_trim_and_retry(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 6u << 20);
    ag_block *b[4];
    for (int k = 0; k < 4; k++)
        b[k] = xmalloc(&f, 0, 1u << 20);
    for (int k = 0; k < 4; k++)
        assert_int_equal(ag_alloc_free(f.a, b[k], 0), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.allocated, 0);
    assert_true(s.reserved >= (4u << 20));
    ag_block *big = xmalloc(&f, 1, 5u << 20);
    s = stats(f.a);
    assert_true(s.retries >= 1);
    assert_true(s.reserved <= (6u << 20));
    /* too much for the device even after trimming: a clean error */
    ag_block *none = NULL;
    assert_int_equal(ag_alloc_malloc(f.a, 0, 4u << 20, &none), AG_ENOMEM);
    assert_null(none);
    assert_errmsg(f.ctx, "stream 0: cannot allocate 4194304 bytes of hbm memory");
    assert_int_equal(stats(f.a).ooms, 1);
    assert_int_equal(ag_alloc_free(f.a, big, 1), AG_OK);
    fix_close(&f);
}

static void test_baseline(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_BASELINE, 0);
    ag_block *b = xmalloc(&f, 0, 4096);
    void *p = ag_block_ptr(b);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.pending, 4096);
    /* private to stream 0: stream 1 never gets it */
    ag_block *c = xmalloc(&f, 1, 4096);
    assert_ptr_not_equal(ag_block_ptr(c), p);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.pending, 0);
    ag_block *d = xmalloc(&f, 0, 4096);
    assert_ptr_equal(ag_block_ptr(d), p);
    assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, d, 0), AG_OK);
    fix_close(&f);
}

/* n streams made on sim and an allocator of them on dev (sim, or a
 * wrapper of it) with the defaults but mode and memory type. */
static ag_memalloc *alloc_on(ag_ctx *ctx, ag_device *sim, ag_device *dev, ag_dev_stream **s, uint32_t n,
                             ag_alloc_mode mode, ag_mem_type mt)
{
    for (uint32_t k = 0; k < n; k++)
        assert_int_equal(ag_dev_stream_create(sim, &s[k]), AG_OK);
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.nstreams = n;
    c.mode = mode;
    c.mem_type = mt;
    ag_memalloc *a = NULL;
    assert_int_equal(ag_alloc_create(ctx, dev, s, &c, &a), AG_OK);
    return a;
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

/* One field out of range per case, the rest default: creation fails with
 * AG_EINVAL and a message naming what is wrong. */
static void bad_config(fix *f, void (*spoil)(ag_alloc_config *), const char *msg)
{
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    spoil(&c);
    ag_memalloc *a = NULL;
    assert_int_equal(ag_alloc_create(f->ctx, f->dev, f->s, &c, &a), AG_EINVAL);
    assert_null(a);
    assert_errmsg(f->ctx, msg);
}

static void no_streams(ag_alloc_config *c)
{
    c->nstreams = 0;
}

static void odd_min_block(ag_alloc_config *c)
{
    c->min_block = 500;
}

static void zero_alone_round(ag_alloc_config *c)
{
    c->alone_round = 0;
}

static void odd_alone_round(ag_alloc_config *c)
{
    c->alone_round = 1000;
}

static void many_front_blocks(ag_alloc_config *c)
{
    c->front_blocks = AG_ALLOC_MAX_FRONT + 1u;
}

static void test_config_errors(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 1, AG_ALLOC_MULTI, 0);
    bad_config(&f, no_streams, "nstreams 0");
    bad_config(&f, odd_min_block, "min_block 500");
    bad_config(&f, zero_alone_round, "alone_round");
    bad_config(&f, odd_alone_round, "multiples of min_block");
    bad_config(&f, many_front_blocks, "front_blocks 9 is not in 0..8");
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(f.a, 1, 64, &b), AG_EINVAL);
    assert_errmsg(f.ctx, "stream 1 out of range");
    assert_int_equal(ag_alloc_malloc(f.a, 0, 0, &b), AG_EINVAL);
    assert_int_equal(ag_alloc_send(f.a, 0, 0), AG_EINVAL);
    fix_close(&f);
}

/* ---- traces ---- */

static const char trace_text[] = "# two streams, one cross-stream tensor\n"
                                 "streams 2\n"
                                 "alloc x 4096 0\n"
                                 "record 0 1\n"
                                 "wait 1 0\n"
                                 "use x 1\n"
                                 "alloc y 1000 1   # private to 1\n"
                                 "free x 0\n"
                                 "free y 1\n"
                                 "free x 1\n"
                                 "record 1 0\n"
                                 "wait 0 1\n"
                                 "alloc z 4096 0\n"
                                 "free z 0\n"
                                 "sync\n";

static void test_trace_parse_errors(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_alloc_trace *t = NULL;
    struct {
        const char *text, *msg;
    } bad[] = {
        {"alloc a 10 0\nfrob\n", "t:2: unknown operation 'frob'"},
        {"streams 2\nalloc a 10 2\n", "t:2: stream 2 out of range"},
        {"free q 0\n", "t:1: block 'q' was never allocated"},
        {"alloc a 0 0\n", "t:1: 'alloc' needs a size"},
        {"alloc a 10 0 9\n", "t:1: unexpected text"},
        {"record 1 1\n", "t:1: a stream cannot record"},
        {"alloc a 10 0\nstreams 3\n", "t:2: 'streams' must come before"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_int_equal(ag_alloc_trace_parse(ctx, "t", bad[k].text, strlen(bad[k].text), &t), AG_EPARSE);
        assert_errmsg(ctx, bad[k].msg);
    }
    assert_int_equal(ag_alloc_trace_parse(ctx, "t", trace_text, strlen(trace_text), &t), AG_OK);
    assert_int_equal(ag_alloc_trace_streams(t), 2);
    assert_int_equal(ag_alloc_trace_ops(t), 13);
    ag_alloc_trace_destroy(t);
    ag_ctx_destroy(ctx);
}

/* Destroys dev and ctx once nothing is left on the device. */
static void close_empty(ag_ctx *ctx, ag_device *dev)
{
    ag_dev_stats ds = {.size = sizeof ds};
    ag_dev_stats_get(dev, &ds);
    assert_int_equal(ds.mem[AG_MEM_HBM].live, 0);
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
}

/* Replays t on dev in mode, with the reuse checker, under the timing
 * model with kernels of ticks operations. */
static ag_status replay_in(ag_ctx *ctx, ag_device *dev, const ag_alloc_trace *t, ag_alloc_mode mode, uint32_t ticks,
                           ag_alloc_replay_result *r)
{
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.mode = mode;
    *r = (ag_alloc_replay_result){.size = sizeof *r};
    ag_alloc_replay_opts o = {.size = sizeof o, .check = true, .kernel_ticks = ticks};
    return ag_alloc_replay(ctx, dev, t, &c, &o, r);
}

static void test_trace_replay(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    ag_alloc_trace *t = NULL;
    assert_int_equal(ag_alloc_trace_parse(ctx, "t", trace_text, strlen(trace_text), &t), AG_OK);
    for (int mode = 0; mode < 2; mode++) {
        ag_alloc_replay_result r;
        assert_int_equal(replay_in(ctx, dev, t, (ag_alloc_mode)mode, 0, &r), AG_OK);
        assert_int_equal(r.violations, 0);
        assert_int_equal(r.count[AG_TOP_ALLOC], 3);
        assert_int_equal(r.count[AG_TOP_SYNC], 2);
        assert_int_equal(r.stats.peak_allocated, 4096 + 1024); /* z reuses x's place in time */
        assert_int_equal(r.stats.allocated, 0);
        /* at least the region's allocation and the final synchronise */
        assert_true(r.device_calls >= 2);
        if (mode == AG_ALLOC_MULTI)
            assert_int_equal(r.stats.borrow_recycles + r.stats.birth_recycles, 3);
    }
    ag_alloc_trace_destroy(t);
    close_empty(ctx, dev);
}

/* The checker finds a reuse the trace does not order, at every stream
 * count it supports (one word of clock per stream, beyond 64 as below):
 * host memory is recycled at its last free without any event (the host
 * vouches for the streams' work), so stream 0 gets the memory stream k
 * used with nothing ordering k's use before it; a record and a wait order
 * it.  On device memory the allocator itself orders the reuse. */
static void test_check_finds_reuse(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    const uint32_t counts[] = {3, 256, AG_ALLOC_CHECK_MAX_STREAMS};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        uint32_t n = counts[i], k = n - 2u;
        for (int ordered = 0; ordered < 2; ordered++) {
            char text[256];
            int len = snprintf(text, sizeof text, "streams %u\nalloc a 4096 0\nuse a %u\nfree a %u\n", n, k, k);
            if (ordered)
                len += snprintf(text + len, sizeof text - (size_t)len, "record %u 0\nwait 0 %u\n", k, k);
            snprintf(text + len, sizeof text - (size_t)len, "free a 0\nalloc b 4096 0\nfree b 0\n");
            ag_alloc_trace *t = NULL;
            assert_int_equal(ag_alloc_trace_parse(ctx, "t", text, strlen(text), &t), AG_OK);
            for (int mode = 0; mode < 2; mode++)
                for (int host = 0; host < 2; host++) {
                    ag_alloc_config c;
                    ag_alloc_config_default(&c);
                    c.mode = (ag_alloc_mode)mode;
                    c.mem_type = host ? AG_MEM_HOST : AG_MEM_HBM;
                    ag_alloc_replay_result r = {.size = sizeof r};
                    ag_alloc_replay_opts o = {.size = sizeof o, .check = true, .kernel_ticks = 4};
                    assert_int_equal(ag_alloc_replay(ctx, dev, t, &c, &o, &r), AG_OK);
                    assert_int_equal(r.violations, host && !ordered ? 1 : 0);
                    assert_int_equal(r.stats.peak_allocated, 4096);
                }
            ag_alloc_trace_destroy(t);
        }
    }
    /* one more stream than the check holds: refused, the limit named */
    char text[64];
    snprintf(text, sizeof text, "streams %u\nalloc a 16 0\nfree a 0\n", AG_ALLOC_CHECK_MAX_STREAMS + 1u);
    ag_alloc_trace *t = NULL;
    assert_int_equal(ag_alloc_trace_parse(ctx, "t", text, strlen(text), &t), AG_OK);
    ag_alloc_replay_result r = {.size = sizeof r};
    ag_alloc_replay_opts o = {.size = sizeof o, .check = true};
    assert_int_equal(ag_alloc_replay(ctx, dev, t, NULL, &o, &r), AG_EINVAL);
    assert_errmsg(ctx, "t: replay check: at most 1024 streams, the replay has 1025");
    ag_alloc_trace_destroy(t);
    close_empty(ctx, dev);
}

/* Out of memory on a busy device (traces as in tests/lit/rt/Inputs):
 * reclaim, a 2 MiB block waits for stream 1's event when stream 0 asks for
 * the whole 4 MiB device, and only waiting for the device frees it; lend,
 * half of stream 0's 4 MiB region is free but cannot go back, and serves
 * stream 1 as a borrowed block once the device is idle.  The baseline,
 * whose pools are private, cannot serve the second. */
static const char reclaim_text[] = "streams 2\nalloc a 2097152 0\nrecord 0 1\nwait 1 0\nuse a 1\nfree a 0\n"
                                   "free a 1\nalloc b 4194304 0\nfree b 0\nsync\n";
static const char lend_text[] = "streams 2\nalloc c 4194304 0\nfree c 0\nalloc d 2097152 0\nalloc e 2097152 1\n"
                                "free e 1\nrecord 1 0\nwait 0 1\nfree d 0\nsync\n";

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

/* A host out of memory around a device refusal is the host's: on
 * reclaim_text the reclaim serves the request the device refused, so at
 * every host allocation of the replay a failure reads "out of memory" and
 * never "cannot allocate" (nor counts in ooms), including failures in that
 * request (the host records its retry needs were taken before the device
 * was asked, so none fails after the refusal). */
static void test_host_oom_after_refusal(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        uint64_t during = 0;
        for (uint64_t k = 1;; k++) {
            assert_true(k < 5000);
            ag_testalloc ta;
            ag_ctx *ctx = agtest_ctx_counted(&ta), *dctx = agtest_ctx();
            ag_device_sim_config dc = ag_device_sim_defaults();
            dc.capacity[AG_MEM_HBM] = 4u << 20;
            ag_device *dev = NULL;
            assert_int_equal(ag_device_sim_create(dctx, &dc, &dev), AG_OK);
            ag_alloc_trace *t = NULL;
            assert_int_equal(ag_alloc_trace_parse(ctx, "t", reclaim_text, strlen(reclaim_text), &t), AG_OK);
            ag_alloc_config c;
            ag_alloc_config_default(&c);
            c.mode = (ag_alloc_mode)mode;
            ag_alloc_replay_opts o = {.size = sizeof o, .kernel_ticks = 8};
            ag_alloc_replay_result r = {.size = sizeof r};
            ta.fail_at = ta.calls + k;
            ag_status st = ag_alloc_replay(ctx, dev, t, &c, &o, &r);
            ta.fail_at = 0;
            bool injected = ta.nfail > 0;
            if (st != AG_OK) {
                assert_true(injected);
                assert_int_equal(st, AG_ENOMEM);
                assert_true(agtest_errmsg_has(ctx, "out of memory"));
                assert_false(agtest_errmsg_has(ctx, "cannot allocate"));
                during += agtest_errmsg_has(ctx, "t:7:"); /* in the request the device refused */
            } else {
                assert_int_equal(r.stats.ooms, 0);
                assert_true(r.stats.retries >= 1);
            }
            ag_alloc_trace_destroy(t);
            close_empty(dctx, dev);
            ag_ctx_destroy(ctx);
            assert_int_equal(ta.live_blocks, 0);
            if (!injected)
                break;
        }
        assert_true(during > 0);
    }
}

/* ---- failure sweeps ---- */

static ag_status sweep_body(ag_ctx *ctx, void *ud)
{
    ag_alloc_mode mode = *(ag_alloc_mode *)ud;
    ag_alloc_trace *t = NULL;
    AG_TRY(ag_alloc_trace_parse(ctx, "t", trace_text, strlen(trace_text), &t));
    ag_device *dev = NULL;
    ag_status st = ag_device_sim_create(ctx, NULL, &dev);
    if (st == AG_OK) {
        ag_alloc_replay_result r;
        st = replay_in(ctx, dev, t, mode, 3, &r);
        if (st == AG_OK && r.violations)
            st = AG_EINTERNAL;
    }
    ag_device_destroy(dev);
    ag_alloc_trace_destroy(t);
    return st;
}

static void test_oom_sweep(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        ag_alloc_mode m = (ag_alloc_mode)mode;
        assert_true(AG_TEST_OOM_SWEEP(sweep_body, &m) > 10);
    }
}

/* Every device entry failing at every N: a clean error, the heaps intact,
 * nothing left on the device after the allocator is gone. */
static void test_device_fault_sweep(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        for (int pmode = 0; pmode < 2; pmode++) {
            uint64_t nfail = 1;
            for (uint64_t n = 1; nfail; n++) {
                assert_true(n < 10000);
                ag_ctx *ctx = agtest_ctx();
                ag_device *sim = NULL, *dev = NULL;
                assert_int_equal(ag_device_sim_create(ctx, NULL, &sim), AG_OK);
                ag_dev_fault fl;
                ag_dev_fault_init(&fl, AG_DEV_ENTRY_ALL, n, 0, pmode ? AG_FAULT_POISON : AG_FAULT_RETURN);
                assert_int_equal(ag_device_fault_wrap(ctx, sim, &fl, &dev), AG_OK);
                ag_dev_stream *s[3] = {0};
                ag_status st = AG_OK;
                for (int k = 0; k < 3 && st == AG_OK; k++)
                    st = ag_dev_stream_create(dev, &s[k]);
                ag_memalloc *a = NULL;
                if (st == AG_OK) {
                    ag_alloc_config c;
                    ag_alloc_config_default(&c);
                    c.nstreams = 3;
                    c.mode = (ag_alloc_mode)mode;
                    st = ag_alloc_create(ctx, dev, s, &c, &a);
                }
                ag_block *b[4] = {0};
                uint32_t step = 0;
                /* a fixed script; the first failure stops it */
                for (; st == AG_OK && step < 14; step++) {
                    switch (step) {
                    case 0: st = ag_alloc_malloc(a, 0, 3000, &b[0]); break;
                    case 1: st = ag_alloc_access(a, b[0], 1); break;
                    case 2: st = ag_alloc_access(a, b[0], 2); break;
                    case 3: st = ag_alloc_malloc(a, 1, 3u << 20, &b[1]); break;
                    case 4: st = ag_alloc_free(a, b[0], 0); break;
                    case 5: st = ag_alloc_free(a, b[0], 1); break;
                    case 6: st = ag_alloc_send(a, 0, 2); break;
                    case 7: st = ag_alloc_send(a, 1, 2); break;
                    case 8: st = ag_alloc_free(a, b[0], 2); break;
                    case 9: st = ag_alloc_wait(a, 2, 0); break;
                    case 10: st = ag_alloc_wait(a, 2, 1); break;
                    case 11: st = ag_alloc_free(a, b[1], 1); break;
                    case 12: st = ag_alloc_malloc(a, 2, 3000, &b[2]); break;
                    case 13: st = ag_alloc_sync(a, AG_SYNC_CLEAN); break;
                    }
                }
                if (st != AG_OK) {
                    assert_true(st == AG_ENOMEM || st == AG_EDEVICE);
                    assert_true(ag_ctx_errmsg(ctx)[0] != '\0');
                }
                if (a)
                    assert_true(heaps_ok(a));
                ag_alloc_destroy(a);
                for (int k = 0; k < 3; k++)
                    ag_dev_stream_destroy(dev, s[k]);
                nfail = fl.nfail;
                ag_device_destroy(dev);
                close_empty(ctx, sim);
            }
        }
    }
}

/* One replay of text (checked, runs executions in a row) in mode on a
 * simulated device of hbm bytes (0: the default) whose entries all fail
 * from the n-th call on, returning an error or poisoning the device
 * (pmode): it ends in AG_OK with no unordered reuse, or in a clean error
 * with its message, and leaves nothing on the device.  Returns how many
 * calls failed (0: the replay made fewer than n); a replay that ran
 * through adds its regions gathered and fallbacks to *ran. */
static uint64_t trace_fault_at(const char *text, ag_alloc_mode mode, uint64_t hbm, uint32_t ticks, uint32_t runs,
                               int pmode, uint64_t n, ag_alloc_stats *ran)
{
    ag_ctx *ctx = agtest_ctx();
    ag_device_sim_config dc = ag_device_sim_defaults();
    if (hbm)
        dc.capacity[AG_MEM_HBM] = hbm;
    ag_device *sim = NULL, *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, &dc, &sim), AG_OK);
    ag_dev_fault fl;
    ag_dev_fault_init(&fl, AG_DEV_ENTRY_ALL, n, 0, pmode ? AG_FAULT_POISON : AG_FAULT_RETURN);
    assert_int_equal(ag_device_fault_wrap(ctx, sim, &fl, &dev), AG_OK);
    ag_alloc_trace *t = NULL;
    assert_int_equal(ag_alloc_trace_parse(ctx, "t", text, strlen(text), &t), AG_OK);
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.mode = mode;
    ag_alloc_replay_opts o = {.size = sizeof o, .check = true, .kernel_ticks = ticks, .runs = runs};
    ag_alloc_replay_result r = {.size = sizeof r};
    ag_status st = ag_alloc_replay(ctx, dev, t, &c, &o, &r);
    if (st != AG_OK) {
        assert_true(st == AG_ENOMEM || st == AG_EDEVICE);
        assert_true(ag_ctx_errmsg(ctx)[0] != '\0');
    } else {
        assert_int_equal(r.violations, 0);
        ran->regions_gathered += r.stats.regions_gathered;
        ran->fallbacks_deferred += r.stats.fallbacks_deferred;
        ran->fallbacks_recorded += r.stats.fallbacks_recorded;
    }
    uint64_t nfail = fl.nfail;
    ag_alloc_trace_destroy(t);
    ag_device_destroy(dev);
    close_empty(ctx, sim);
    return nfail;
}

/* The out-of-memory traces in both modes under a device failing at every
 * N: the reclaim's synchronise and the lent block meet every failure
 * cleanly, and the error the replay returns keeps its message. */
static void test_reclaim_fault_sweep(void **state)
{
    (void)state;
    ag_alloc_stats ran = {.size = sizeof ran};
    for (int k = 0; k < 4; k++) {
        const char *text = k % 2 == 0 ? reclaim_text : lend_text;
        ag_alloc_mode mode = k < 2 ? AG_ALLOC_MULTI : AG_ALLOC_BASELINE;
        for (int pmode = 0; pmode < 2; pmode++)
            for (uint64_t n = 1; trace_fault_at(text, mode, 4u << 20, 8, 1, pmode, n, &ran); n++)
                assert_true(n < 10000);
    }
}

/* The same sweep over two executions of a trace whose second one gathers
 * idle regions back into L1 (tests/lit/rt/Inputs/gather.trace): a device
 * failure anywhere, the gather's idle queries included. */
static const char gather_text[] = "streams 3\nalloc b1 3145728 0\nfree b1 0\nalloc b2 20971520 2\nfree b2 2\n"
                                  "alloc b3 300000 2\nfree b3 2\nalloc b4 12582912 0\nalloc b5 20971520 2\n"
                                  "free b5 2\nrecord 0 2\nwait 2 0\nuse b4 2\nfree b4 2\nfree b4 0\nsync\n";

static void test_gather_fault_sweep(void **state)
{
    (void)state;
    ag_alloc_stats ran = {.size = sizeof ran};
    for (uint32_t ticks = 0; ticks <= 8; ticks += 8)
        for (int pmode = 0; pmode < 2; pmode++)
            for (uint64_t n = 1; trace_fault_at(gather_text, AG_ALLOC_MULTI, 0, ticks, 2, pmode, n, &ran); n++)
                assert_true(n < 10000);
    assert_true(ran.regions_gathered > 0); /* the replays that ran through did gather */
}

/* The same sweep over a shared block whose fallback waits for a pool miss
 * (tests/lit/rt/Inputs/fallback.trace, two executions): its user idle by
 * the miss (ticks 3) or still busy there, so that the miss records the
 * event (ticks 40).  The idle queries at the last free and at the miss,
 * the event the miss records and the clean meet every failure cleanly. */
static const char fallback_text[] = "streams 3\nalloc w 4096 2\nfree w 2\nalloc a 131072 0\nalloc f 131072 0\n"
                                    "record 0 1\nwait 1 0\nuse a 1\nfree a 1\nfree a 0\nalloc x 4096 2\n"
                                    "free x 2\nalloc y 4096 2\nfree y 2\nalloc z 4096 2\nfree z 2\n"
                                    "alloc c 131072 0\nfree c 0\nfree f 0\nsync\n";

/* The baseline's last free of a shared block whose event fails to record
 * (sync_too: and the stream's synchronise standing in for it): the free
 * returns the device's error with its use released; the block goes home
 * at once after the synchronise, or else at the clean after its device
 * synchronise. */
static void base_record_fails(bool sync_too)
{
    ag_ctx *ctx = agtest_ctx();
    ag_device *sim = NULL, *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &sim), AG_OK);
    ag_dev_fault fl;
    uint32_t mask = AG_DEV_ENTRY_BIT(AG_DEV_E_EVENT_RECORD) | (sync_too ? AG_DEV_ENTRY_BIT(AG_DEV_E_STREAM_SYNC) : 0u);
    ag_dev_fault_init(&fl, mask, 0, sync_too, AG_FAULT_RETURN);
    assert_int_equal(ag_device_fault_wrap(ctx, sim, &fl, &dev), AG_OK);
    ag_dev_stream *s[2];
    ag_memalloc *a = alloc_on(ctx, sim, dev, s, 2, AG_ALLOC_BASELINE, AG_MEM_HBM);
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 65536, &b), AG_OK);
    void *mem = ag_block_ptr(b);
    assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
    fl.fail_at = fl.calls + 1u; /* the record of the last free, on stream 1 (and what follows) */
    assert_int_equal(ag_alloc_free(a, b, 0), AG_EDEVICE);
    assert_true(agtest_errmsg_has(ctx, "stream 1: recording the event of a deferred free"));
    fl.fail_at = 0;
    fl.repeat = 0;
    ag_alloc_stats st = stats(a);
    assert_int_equal(st.pending, sync_too ? 65536 : 0);
    assert_int_equal(st.allocated, 0);
    assert_int_equal(a->npend, 0);
    if (sync_too)
        assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
    ag_block *again = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 65536, &again), AG_OK);
    assert_ptr_equal(ag_block_ptr(again), mem);
    assert_int_equal(ag_alloc_free(a, again, 0), AG_OK);
    assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
    st = stats(a);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.cached, st.reserved);
    ag_alloc_destroy(a);
    for (int k = 0; k < 2; k++)
        ag_dev_stream_destroy(sim, s[k]);
    ag_device_destroy(dev);
    close_empty(ctx, sim);
}

static void test_base_record_fails(void **state)
{
    (void)state;
    base_record_fails(false);
    base_record_fails(true);
}

/* One stream asks for size, frees it, ten times over: the region grown
 * for the first request serves every later one. */
static void same_size_reused(const ag_alloc_config *c, uint64_t size)
{
    fix f;
    fix_open_cfg(&f, 1, AG_ALLOC_MULTI, 0, c);
    for (int i = 0; i < 10; i++) {
        ag_block *b = xmalloc(&f, 0, size);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    }
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.device_allocs, 1);
    assert_int_equal(s.cached, s.reserved);
    fix_close(&f);
}

/* A region grown for a request is never too large for that request to
 * take again: a request below max_split whose region, in L1 pages,
 * reaches it; a request of large_alone or more whose region, rounded to
 * alone_round, is more than large_slack percent larger. */
static void test_growth_serves_again(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.max_split = 32u << 10; /* below a page: every region is whole */
    same_size_reused(&c, 1000);
    c.max_split = 1u << 20;
    same_size_reused(&c, 1000000);
    ag_alloc_config_default(&c);
    c.large_alone = 1u << 20;
    c.large_slack = 5;
    same_size_reused(&c, (1u << 20) + 1u);
    ag_alloc_config_default(&c);
    c.large_slack = 0;
    same_size_reused(&c, (10u << 20) + 1u);
    /* an oversize request whose region, in pages, wastes more than
     * large_region: its own region still serves it */
    ag_alloc_config_default(&c);
    c.page_size = 32u << 20;
    c.max_split = 64u << 20;
    same_size_reused(&c, 65u << 20);
}

/* A free region moved from another pool is never a span of max_split or
 * more given whole to a smaller request. */
static void test_move_keeps_max_split(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.max_split = 4u << 20;
    fix f;
    fix_open_cfg(&f, 2, AG_ALLOC_MULTI, 0, &c);
    ag_block *x = xmalloc(&f, 1, 5u << 20);
    assert_int_equal(ag_alloc_free(f.a, x, 1), AG_OK);
    ag_block *y = xmalloc(&f, 0, 3u << 20);
    assert_true(ag_block_size(y) < c.max_split);
    assert_int_equal(stats(f.a).regions_moved, 0);
    assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    fix_close(&f);
}

/* A host allocation of the allocator failing while a pool grows is the
 * host's out of memory, not the device's refusal: no trim, reclaim or
 * retry, and L1's cache stays; at each allocating call of the request,
 * both modes (the device has a context of its own: a failure there is the
 * device's).  A failure the request recovers from (an optional record)
 * serves it.  Eight regions of their own fill a pool's first chunk of
 * region records, so the ninth needs a new one. */
static void test_host_oom_in_growth(void **state)
{
    (void)state;
    for (int m = 0; m < 2; m++) {
        uint64_t failed = 0;
        for (uint64_t k = 1;; k++) {
            assert_true(k < 1000);
            ag_testalloc ta;
            ag_ctx *ctx = agtest_ctx_counted(&ta), *dctx = agtest_ctx();
            ag_device *dev = NULL;
            assert_int_equal(ag_device_sim_create(dctx, NULL, &dev), AG_OK);
            ag_dev_stream *s[2];
            ag_memalloc *a = alloc_on(ctx, dev, dev, s, 2, m ? AG_ALLOC_BASELINE : AG_ALLOC_MULTI, AG_MEM_HBM);
            ag_block *b[9] = {0}, *x = NULL;
            for (int i = 0; i < 8; i++)
                assert_int_equal(ag_alloc_malloc(a, 0, 12u << 20, &b[i]), AG_OK);
            assert_int_equal(ag_alloc_malloc(a, 1, 300000, &x), AG_OK);
            assert_int_equal(ag_alloc_free(a, x, 1), AG_OK);
            ag_alloc_stats s0 = stats(a);
            ta.fail_at = ta.calls + k;
            ag_status st = ag_alloc_malloc(a, 0, 12u << 20, &b[8]);
            ta.fail_at = 0;
            bool injected = ta.nfail > 0;
            ag_alloc_stats s1 = stats(a);
            assert_int_equal(s1.retries, 0);
            assert_int_equal(s1.device_frees, s0.device_frees);
            if (st == AG_OK) {
                assert_int_equal(ag_alloc_free(a, b[8], 0), AG_OK);
            } else {
                failed++;
                assert_true(injected);
                assert_int_equal(st, AG_ENOMEM);
                assert_true(agtest_errmsg_has(ctx, "out of memory"));
                assert_int_equal(s1.device_allocs, s0.device_allocs);
                assert_int_equal(s1.cached, s0.cached);
                assert_int_equal(s1.allocated, s0.allocated);
                assert_int_equal(s1.ooms, s0.ooms); /* the device refused nothing */
            }
            for (int i = 0; i < 8; i++)
                assert_int_equal(ag_alloc_free(a, b[i], 0), AG_OK);
            assert_true(heaps_ok(a));
            ag_alloc_destroy(a);
            for (int i = 0; i < 2; i++)
                ag_dev_stream_destroy(dev, s[i]);
            close_empty(dctx, dev);
            ag_ctx_destroy(ctx);
            assert_int_equal(ta.live_blocks, 0);
            if (!injected)
                break;
        }
        assert_true(failed > 0);
    }
}

/* The checker's happens-before marks live as long as a deferred free
 * holds one: host memory stays flat over many runs of a trace, both where
 * the deferred frees all complete now and then (the first trace, with a
 * sync) and where one always stays pending while the older ones complete
 * (the second, in the baseline with kernels of 4 ticks: the queue never
 * empties, so the marks and the queue must be trimmed from the front). */
static const char marks_sync_text[] = "streams 64\nalloc a 100 0\nuse a 1\nfree a 0\nfree a 1\nrecord 1 0\nwait 0 1\nsync\n";
static const char marks_pending_text[] = "streams 64\nalloc a 4096 0\nuse a 1\nfree a 1\nfree a 0\n";

static uint64_t check_peak(const char *text, ag_alloc_mode mode, uint32_t ticks, uint32_t runs)
{
    ag_testalloc ta;
    ag_ctx *ctx = agtest_ctx_counted(&ta);
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    ag_alloc_trace *t = NULL;
    assert_int_equal(ag_alloc_trace_parse(ctx, "marks", text, strlen(text), &t), AG_OK);
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.mode = mode;
    ag_alloc_replay_opts o = {.size = sizeof o, .check = true, .kernel_ticks = ticks, .runs = runs};
    ag_alloc_replay_result r = {.size = sizeof r};
    assert_int_equal(ag_alloc_replay(ctx, dev, t, &c, &o, &r), AG_OK);
    assert_int_equal(r.violations, 0);
    ag_alloc_trace_destroy(t);
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
    return ta.peak_bytes;
}

static void test_check_marks_bounded(void **state)
{
    (void)state;
    uint64_t few = check_peak(marks_sync_text, AG_ALLOC_MULTI, 0, 10);
    uint64_t many = check_peak(marks_sync_text, AG_ALLOC_MULTI, 0, 400);
    assert_true(many <= few + 4096u);
    few = check_peak(marks_pending_text, AG_ALLOC_BASELINE, 4, 100);
    many = check_peak(marks_pending_text, AG_ALLOC_BASELINE, 4, 4000);
    assert_true(many <= few + 8192u);
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

/* The entries refuse a block of another allocator, and name a NULL out;
 * ooms counts what the device cannot hold, not the host's out of memory. */
static void test_entry_checks(void **state)
{
    (void)state;
    for (int m = 0; m < 2; m++) {
        fix f, g;
        fix_open(&f, 2, m ? AG_ALLOC_BASELINE : AG_ALLOC_MULTI, 0);
        fix_open(&g, 2, m ? AG_ALLOC_BASELINE : AG_ALLOC_MULTI, 0);
        ag_block *b = xmalloc(&g, 0, 4096);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_EINVAL);
        assert_true(agtest_errmsg_has(f.ctx, "free: the block belongs to another allocator"));
        assert_int_equal(ag_alloc_access(f.a, b, 1), AG_EINVAL);
        assert_true(agtest_errmsg_has(f.ctx, "access: the block belongs to another allocator"));
        assert_int_equal(stats(f.a).allocated, 0);
        assert_int_equal(stats(g.a).allocated, 4096);
        assert_int_equal(ag_alloc_free(g.a, b, 0), AG_OK);
        assert_int_equal(ag_alloc_malloc(f.a, 0, 64, NULL), AG_EINVAL);
        assert_true(agtest_errmsg_has(f.ctx, "malloc: out is NULL"));
        ag_block *x = NULL;
        assert_int_equal(ag_alloc_malloc(f.a, 0, UINT64_C(1) << 63, &x), AG_ENOMEM);
        assert_int_equal(stats(f.a).ooms, 1);
        fix_close(&g);
        fix_close(&f);
    }
}

/* A span of max_split or more serves a request that large only if it
 * wastes less than large_region (the reference's 20 MiB): a 40 MiB request
 * gets a region of its own, not a free 200 MiB one. */
static void test_oversize_waste(void **state)
{
    (void)state;
    for (int m = 0; m < 2; m++) {
        ag_alloc_config c;
        ag_alloc_config_default(&c);
        c.max_split = 32u << 20;
        fix f;
        fix_open_cfg(&f, 1, m ? AG_ALLOC_BASELINE : AG_ALLOC_MULTI, 0, &c);
        ag_block *big = xmalloc(&f, 0, 200u << 20);
        void *p = ag_block_ptr(big);
        assert_int_equal(ag_alloc_free(f.a, big, 0), AG_OK);
        ag_block *mid = xmalloc(&f, 0, 40u << 20);
        assert_ptr_not_equal(ag_block_ptr(mid), p);
        assert_int_equal(ag_block_size(mid), 40u << 20);
        ag_block *again = xmalloc(&f, 0, 200u << 20);
        assert_ptr_equal(ag_block_ptr(again), p);
        assert_int_equal(stats(f.a).reserved, 240u << 20);
        assert_int_equal(ag_alloc_free(f.a, mid, 0), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, again, 0), AG_OK);
        fix_close(&f);
    }
}

/* The last free of a shared block on a device that can no longer make an
 * event: AG_EDEVICE, and as the header says, the use is released all the
 * same (a second free is refused), in both modes. */
static void test_free_on_failed_device(void **state)
{
    (void)state;
    for (int m = 0; m < 2; m++) {
        fix f;
        fix_open(&f, 2, m ? AG_ALLOC_BASELINE : AG_ALLOC_MULTI, 0);
        ag_block *b = xmalloc(&f, 0, 65536);
        assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
        ag_dev_poison(f.dev, "a test fault");
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_EDEVICE);
        assert_true(agtest_errmsg_has(f.ctx, "a test fault"));
        ag_alloc_stats s = stats(f.a);
        assert_int_equal(s.allocated, 0);
        assert_int_equal(s.frees, 1); /* the block's last use is gone */
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_EINVAL);
        fix_close(&f);
    }
}

/* A kernel that waits for the gate, then writes its block. */
typedef struct late_write {
    atomic_int open;
    void *mem;
    size_t n;
} late_write;

static ag_status late_write_kernel(void *arg)
{
    late_write *w = arg;
    while (!atomic_load(&w->open))
        sched_yield();
    memset(w->mem, 0x5a, w->n);
    return AG_OK;
}

/* The multi mode's fallback event failing to record at a shared block's
 * last free (fallback_min 0: recorded at once): the free returns the
 * device's error with its use released, and the block goes home at the
 * latest at the next clean, whether or not its stream sent its notices
 * meanwhile (three streams: 0 the birth, 1 and 2 users; the last free is
 * stream 2's, so the notice 2 -> 0 empties no view while stream 1's use
 * stands in it). */
static void multi_record_fails(int variant)
{
    ag_ctx *ctx = agtest_ctx();
    ag_device *sim = NULL, *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &sim), AG_OK);
    ag_dev_fault fl;
    ag_dev_fault_init(&fl, AG_DEV_ENTRY_BIT(AG_DEV_E_EVENT_RECORD), 0, 0, AG_FAULT_RETURN);
    assert_int_equal(ag_device_fault_wrap(ctx, sim, &fl, &dev), AG_OK);
    ag_dev_stream *s[3];
    for (int k = 0; k < 3; k++)
        assert_int_equal(ag_dev_stream_create(sim, &s[k]), AG_OK);
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.nstreams = 3;
    c.fallback_min = 0;
    ag_memalloc *a = NULL;
    assert_int_equal(ag_alloc_create(ctx, dev, s, &c, &a), AG_OK);
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 65536, &b), AG_OK);
    assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_access(a, b, 2), AG_OK);
    /* streams 1 and 2 busy: the fallback records events there */
    char scratch[2][64];
    late_write w[2] = {{.mem = scratch[0], .n = 64}, {.mem = scratch[1], .n = 64}};
    for (int k = 0; k < 2; k++)
        assert_int_equal(ag_dev_launch(sim, s[k + 1], late_write_kernel, &w[k], "busy"), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
    fl.fail_at = fl.calls + 1u; /* the first fallback record of the last free */
    ag_status st = ag_alloc_free(a, b, 2);
    fl.fail_at = 0;
    assert_int_equal(fl.nfail, 1);
    assert_int_equal(st, AG_EDEVICE);
    assert_int_equal(stats(a).allocated, 0);
    assert_int_equal(stats(a).pending, 65536); /* waiting for stream 1 and 2's work */
    for (int k = 0; k < 2; k++)
        atomic_store(&w[k].open, 1);
    if (variant > 0) {
        /* stream 2 tells every other stream of its release */
        for (uint32_t d = 0; d < 2; d++) {
            assert_int_equal(ag_alloc_send(a, 2, d), AG_OK);
            assert_int_equal(ag_alloc_wait(a, d, 2), AG_OK);
        }
    }
    if (variant > 1) {
        /* and its list starts afresh: more releases, sent everywhere */
        for (int i = 0; i < 40; i++) {
            ag_block *x = NULL;
            assert_int_equal(ag_alloc_malloc(a, 0, 4096, &x), AG_OK);
            assert_int_equal(ag_alloc_access(a, x, 2), AG_OK);
            assert_int_equal(ag_alloc_free(a, x, 2), AG_OK);
            for (uint32_t d = 0; d < 2; d++) {
                assert_int_equal(ag_alloc_send(a, 2, d), AG_OK);
                assert_int_equal(ag_alloc_wait(a, d, 2), AG_OK);
            }
            assert_int_equal(ag_alloc_free(a, x, 0), AG_OK);
        }
    }
    assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
    ag_alloc_stats st2 = stats(a);
    assert_int_equal(st2.allocated, 0);
    assert_int_equal(st2.pending, 0);
    assert_int_equal(st2.cached, st2.reserved);
    ag_alloc_destroy(a);
    for (int k = 0; k < 3; k++)
        ag_dev_stream_destroy(sim, s[k]);
    ag_device_destroy(dev);
    close_empty(ctx, sim);
}

static void test_multi_record_fails(void **state)
{
    (void)state;
    for (int v = 0; v < 3; v++)
        multi_record_fails(v);
}

/* Destroyed while one of its streams captures: no synchronise can prove
 * that stream's queued work done, so the device memory stays allocated
 * (the kernel still writing it finds it there), the error says why, and
 * the device frees it at its destroy.  With no capture, every byte goes
 * back. */
static void test_destroy_while_capturing(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        fix f;
        fix_open(&f, 2, (ag_alloc_mode)mode, 0);
        ag_block *b = xmalloc(&f, 1, 4096);
        late_write w = {.mem = ag_block_ptr(b), .n = 4096};
        assert_int_equal(ag_dev_launch(f.dev, f.s[1], late_write_kernel, &w, "late write"), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
        assert_int_equal(ag_dev_capture_begin(f.dev, f.s[1]), AG_OK);
        ag_alloc_destroy(f.a);
        assert_true(agtest_errmsg_has(f.ctx, "stream 1 could not be synchronised"));
        assert_true(agtest_errmsg_has(f.ctx, "is capturing"));
        assert_true(agtest_errmsg_has(f.ctx, "bytes of device memory left allocated"));
        ag_dev_stats ds = {.size = sizeof ds};
        ag_dev_stats_get(f.dev, &ds);
        assert_true(ds.mem[AG_MEM_HBM].live > 0);
        atomic_store(&w.open, 1);
        ag_dev_graph *g = NULL;
        assert_int_equal(ag_dev_capture_end(f.dev, f.s[1], &g), AG_OK);
        ag_dev_graph_destroy(f.dev, g);
        assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[1]), AG_OK);
        ag_dev_stats_get(f.dev, &ds);
        assert_int_equal(ds.launches, 1); /* it ran, on memory still allocated */
        assert_true(ds.mem[AG_MEM_HBM].live > 0);
        for (uint32_t k = 0; k < f.n; k++)
            ag_dev_stream_destroy(f.dev, f.s[k]);
        free(f.s);
        ag_device_destroy(f.dev); /* frees what the allocator left */
        ag_ctx_destroy(f.ctx);
    }
}

static void test_fallback_fault_sweep(void **state)
{
    (void)state;
    for (uint32_t ticks = 3; ticks <= 40; ticks += 37) {
        ag_alloc_stats ran = {.size = sizeof ran};
        for (int pmode = 0; pmode < 2; pmode++)
            for (uint64_t n = 1; trace_fault_at(fallback_text, AG_ALLOC_MULTI, 0, ticks, 2, pmode, n, &ran); n++)
                assert_true(n < 10000);
        /* the replays that ran through waited, and at ticks 40 recorded (at
         * ticks 3 a failed idle query at the miss counts as busy, too) */
        assert_true(ran.fallbacks_deferred > 0);
        if (ticks == 40)
            assert_true(ran.fallbacks_recorded > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap_split_merge),
        cmocka_unit_test(test_heap_max_split),
        cmocka_unit_test(test_max_split_below_regions),
        cmocka_unit_test(test_heap_keep_alone),
        cmocka_unit_test(test_bins),
        cmocka_unit_test(test_mif_rows_256),
        cmocka_unit_test(test_birth_recycle),
        cmocka_unit_test(test_local_borrow_home),
        cmocka_unit_test(test_polled_fallback),
        cmocka_unit_test(test_poll_every),
        cmocka_unit_test(test_later_point_seen),
        cmocka_unit_test(test_fallback_waits_for_notice),
        cmocka_unit_test(test_fallback_at_miss),
        cmocka_unit_test(test_lent_block_fallback),
        cmocka_unit_test(test_fallback_min),
        cmocka_unit_test(test_fallback_list_bounded),
        cmocka_unit_test(test_region_move),
        cmocka_unit_test(test_region_move_seen),
        cmocka_unit_test(test_local_then_birth),
        cmocka_unit_test(test_fanout_stale),
        cmocka_unit_test(test_live_entries),
        cmocka_unit_test(test_join_after_send),
        cmocka_unit_test(test_borrow_larger_then_again),
        cmocka_unit_test(test_borrow_when_full),
        cmocka_unit_test(test_timed_refuses),
        cmocka_unit_test(test_timed_query_failure),
        cmocka_unit_test(test_pend_queue_bounded),
        cmocka_unit_test(test_streams_256),
        cmocka_unit_test(test_mif_sparse_256),
        cmocka_unit_test(test_mif_sparse_all_rows),
        cmocka_unit_test(test_mif_rows_oom),
        cmocka_unit_test(test_l1_geometric),
        cmocka_unit_test(test_l1_tail),
        cmocka_unit_test(test_l1_prepared),
        cmocka_unit_test(test_heap_adopt_records),
        cmocka_unit_test(test_clean_keeps_regions),
        cmocka_unit_test(test_clean_keeps_front),
        cmocka_unit_test(test_front_evicts_oldest),
        cmocka_unit_test(test_l1_keeps_large),
        cmocka_unit_test(test_alone_bound),
        cmocka_unit_test(test_alone_round),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_gather_busy),
        cmocka_unit_test(test_pressure_ignores_bound),
        cmocka_unit_test(test_trim_and_retry),
        cmocka_unit_test(test_oom_reclaim),
        cmocka_unit_test(test_host_oom_after_refusal),
        cmocka_unit_test(test_baseline),
        cmocka_unit_test(test_host_memory_shared),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_trace_parse_errors),
        cmocka_unit_test(test_trace_replay),
        cmocka_unit_test(test_check_finds_reuse),
        cmocka_unit_test(test_oom_sweep),
        cmocka_unit_test(test_device_fault_sweep),
        cmocka_unit_test(test_reclaim_fault_sweep),
        cmocka_unit_test(test_gather_fault_sweep),
        cmocka_unit_test(test_fallback_fault_sweep),
        cmocka_unit_test(test_destroy_while_capturing),
        cmocka_unit_test(test_free_on_failed_device),
        cmocka_unit_test(test_entry_checks),
        cmocka_unit_test(test_oversize_waste),
        cmocka_unit_test(test_clean_counts_and_front),
        cmocka_unit_test(test_check_marks_bounded),
        cmocka_unit_test(test_growth_serves_again),
        cmocka_unit_test(test_move_keeps_max_split),
        cmocka_unit_test(test_host_oom_in_growth),
        cmocka_unit_test(test_base_record_fails),
        cmocka_unit_test(test_multi_record_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
