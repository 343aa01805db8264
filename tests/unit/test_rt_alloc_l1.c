/* Unit tests of the allocator's first layer: the span heap over a fake
 * backing (split, merge, exact fits, node counts, the keep and alone rules,
 * bins, max_split, records moved with a region) and L1, the caching
 * allocator that takes physical memory from the device (geometric growth,
 * a region beside a tail, its records, large segments kept, trim and retry,
 * a region grown for a request serving it again, oversize requests, the
 * host failing during growth). */
#include "support/agtest.h"
#include "support/rt/alloc_fix.h"

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

/* A heap over a fake backing, with a context of its own. */
typedef struct fheap {
    ag_ctx *ctx;
    fake_backing fb;
    ag_heap h;
} fheap;

static void fheap_open(fheap *f, uint64_t quantum, uint64_t split_min, uint64_t max_split)
{
    f->ctx = agtest_ctx();
    f->fb = (fake_backing){0};
    ag_heap_init(&f->h, f->ctx, quantum, split_min, max_split, fake_grow, fake_release, &f->fb, false);
}

/* Destroys the heap, checks that it gave every byte back, and closes the
 * context (the backing's counts stay readable). */
static void fheap_close(fheap *f)
{
    ag_heap_destroy(&f->h);
    assert_int_equal(f->fb.live, 0);
    ag_ctx_destroy(f->ctx);
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
    fheap f;
    fheap_open(&f, 512, 512, UINT64_MAX);
    assert_int_equal(ag_heap_grow(&f.h, 8192), AG_OK);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    ag_span *a = ag_heap_take(&f.h, 1024);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    ag_span *b = ag_heap_take(&f.h, 2048);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    ag_span *c = ag_heap_take(&f.h, 1024);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    /* split: consecutive pieces of one region */
    assert_int_equal(b->addr, a->addr + 1024);
    assert_int_equal(c->addr, b->addr + 2048);
    assert_int_equal(f.h.used, 4096);
    assert_true(ag_heap_check(&f.h));
    /* freeing the middle leaves a hole that an exact request refills */
    ag_heap_put(&f.h, b);
    assert_true(ag_heap_check(&f.h));
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    ag_span *b2 = ag_heap_take(&f.h, 2048);
    assert_int_equal(b2->addr, a->addr + 1024);
    /* a request larger than the hole goes to the tail */
    ag_heap_put(&f.h, b2);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    ag_span *d = ag_heap_take(&f.h, 3072);
    assert_int_equal(d->addr, c->addr + 1024);
    /* merge: freeing a then c joins a, the hole and c into one span */
    ag_heap_put(&f.h, a);
    ag_heap_put(&f.h, c);
    assert_true(ag_heap_check(&f.h));
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    ag_span *e = ag_heap_take(&f.h, 4096);
    assert_int_equal(e->addr, a->addr);
    /* trim returns nothing while a span is taken, the region once all is free */
    assert_int_equal(ag_heap_trim(&f.h), 0);
    ag_heap_put(&f.h, d);
    ag_heap_put(&f.h, e);
    assert_true(ag_heap_check(&f.h));
    assert_int_equal(ag_heap_trim(&f.h), 8192);
    assert_int_equal(f.fb.live, 0);
    assert_int_equal(f.h.reserved, 0);
    fheap_close(&f);
}

static void test_heap_max_split(void **state)
{
    (void)state;
    fheap f;
    /* spans of 64 KiB or more are never split nor given to smaller requests */
    fheap_open(&f, 512, 512, 65536);
    assert_int_equal(ag_heap_grow(&f.h, 131072), AG_OK);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    assert_null(ag_heap_take(&f.h, 1024));
    ag_span *big = ag_heap_take(&f.h, 100000 / 512 * 512 + 512);
    assert_non_null(big);
    assert_int_equal(big->size, 131072); /* whole, not split */
    ag_heap_put(&f.h, big);
    /* under pressure (or after a growth that could not stay below
     * max_split) a smaller request takes it whole */
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    big = ag_heap_take_any(&f.h, 1024);
    assert_non_null(big);
    assert_int_equal(big->size, 131072);
    ag_heap_put(&f.h, big);
    assert_true(ag_heap_check(&f.h));
    fheap_close(&f);
}

/* keep: spans that large serve requests that large only (split for them);
 * alone: requests that large take no span more than slack percent larger */
static void test_heap_keep_alone(void **state)
{
    (void)state;
    fheap f;
    fheap_open(&f, 512, 512, UINT64_MAX);
    f.h.keep = f.h.alone = 65536;
    f.h.slack = 0; /* exact fits only */
    assert_int_equal(ag_heap_grow(&f.h, 131072), AG_OK);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    assert_null(ag_heap_take(&f.h, 98304));
    f.h.slack = 50;
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    assert_null(ag_heap_take(&f.h, 1024));  /* kept for a large request */
    assert_null(ag_heap_take(&f.h, 65536)); /* twice its size: too large */
    ag_span *big = ag_heap_take(&f.h, 98304); /* 128 KiB < 1.5 x 96 KiB */
    assert_non_null(big);
    assert_int_equal(big->size, 98304); /* split for it */
    assert_true(ag_heap_check(&f.h));
    /* the 32 KiB remainder is below keep: a small request takes it */
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    ag_span *small = ag_heap_take(&f.h, 1024);
    assert_non_null(small);
    assert_int_equal(small->addr, big->addr + 98304);
    ag_heap_put(&f.h, small);
    ag_heap_put(&f.h, big);
    /* without the rules the same spans serve anything */
    f.h.keep = f.h.alone = UINT64_MAX;
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    small = ag_heap_take(&f.h, 1024);
    assert_non_null(small);
    ag_heap_put(&f.h, small);
    assert_true(ag_heap_check(&f.h));
    fheap_close(&f);
}

/* A span of exactly max_split bytes is "that large": a smaller request
 * (even one just a quantum short) does not take it, under pressure it
 * serves a smaller request whole, unsplit, and a request of its size
 * takes it. */
static void test_heap_max_split_exact(void **state)
{
    (void)state;
    fheap f;
    fheap_open(&f, 512, 512, 65536);
    assert_int_equal(ag_heap_grow(&f.h, 65536), AG_OK);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    assert_null(ag_heap_take(&f.h, 1024));
    assert_null(ag_heap_take(&f.h, 65536 - 512));
    ag_span *s = ag_heap_take_any(&f.h, 1024);
    assert_non_null(s);
    assert_int_equal(s->size, 65536); /* whole */
    ag_heap_put(&f.h, s);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    s = ag_heap_take(&f.h, 65536);
    assert_non_null(s);
    assert_int_equal(s->size, 65536);
    ag_heap_put(&f.h, s);
    assert_true(ag_heap_check(&f.h));
    fheap_close(&f);
    assert_int_equal(f.fb.grows, 1);
}

/* A free span of exactly keep bytes still serves a request of exactly
 * keep bytes; only smaller requests are refused it. */
static void test_heap_keep_exact(void **state)
{
    (void)state;
    fheap f;
    fheap_open(&f, 512, 512, UINT64_MAX);
    f.h.keep = 65536;
    assert_int_equal(ag_heap_grow(&f.h, 65536), AG_OK);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    assert_null(ag_heap_take(&f.h, 65536 - 512));
    ag_span *s = ag_heap_take(&f.h, 65536);
    assert_non_null(s);
    assert_int_equal(s->size, 65536);
    ag_heap_put(&f.h, s);
    assert_true(ag_heap_check(&f.h));
    fheap_close(&f);
}

/* A remainder of exactly split_min bytes is worth keeping: it is split off
 * and serves the next request from the same region. */
static void test_heap_split_min_exact(void **state)
{
    (void)state;
    fheap f;
    fheap_open(&f, 512, 1024, UINT64_MAX);
    assert_int_equal(ag_heap_grow(&f.h, 4096), AG_OK);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    ag_span *a = ag_heap_take(&f.h, 3072);
    assert_non_null(a);
    assert_int_equal(a->size, 3072);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    ag_span *b = ag_heap_take(&f.h, 1024);
    assert_non_null(b);
    assert_int_equal(b->addr, a->addr + 3072);
    /* a smaller remainder stays with the span it was cut from */
    ag_heap_put(&f.h, b);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    b = ag_heap_take(&f.h, 512);
    assert_int_equal(b->size, 1024);
    ag_heap_put(&f.h, b);
    ag_heap_put(&f.h, a);
    assert_true(ag_heap_check(&f.h));
    assert_int_equal(f.fb.grows, 1);
    fheap_close(&f);
}

/* Best fit breaks ties by address: of two free spans of the same size,
 * both larger than the request, the lower one is cut, whichever was
 * freed last. */
static void test_heap_best_fit_lowest(void **state)
{
    (void)state;
    fheap f;
    fheap_open(&f, 512, 512, UINT64_MAX);
    assert_int_equal(ag_heap_grow(&f.h, 8192), AG_OK);
    ag_span *p[4];
    static const uint64_t sz[4] = {2048, 1024, 2048, 3072};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
        p[k] = ag_heap_take(&f.h, sz[k]);
        assert_non_null(p[k]);
    }
    uintptr_t lo = p[0]->addr;
    ag_heap_put(&f.h, p[0]);
    ag_heap_put(&f.h, p[2]);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    ag_span *t = ag_heap_take(&f.h, 1536);
    assert_non_null(t);
    assert_int_equal(t->addr, lo);
    ag_heap_put(&f.h, t);
    ag_heap_put(&f.h, p[1]);
    ag_heap_put(&f.h, p[3]);
    assert_true(ag_heap_check(&f.h));
    assert_int_equal(ag_heap_trim(&f.h), 8192);
    fheap_close(&f);
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
    assert_true(agtest_errmsg_has(ctx, "l1_segment 18446744073709551615 must be at most 4611686018427387903 bytes"));
    ag_alloc_config_default(&c);
    c.nstreams = 1;
    c.page_size = UINT64_C(1) << 63; /* a power of two, above every request */
    assert_int_equal(ag_alloc_create(ctx, dev, &s, &c, &a), AG_EINVAL);
    assert_true(agtest_errmsg_has(ctx, "page_size 9223372036854775808 must be at most"));
    ag_dev_stream_destroy(dev, s);
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
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

/* L1 caches free memory up to l1_cache_limit bytes inclusive: a clean that
 * leaves exactly that much in L1 returns nothing to the device; one byte
 * less of limit and the free segment goes back. */
static void test_l1_cache_limit_exact(void **state)
{
    (void)state;
    for (int below = 0; below < 2; below++) {
        ag_alloc_config c;
        ag_alloc_config_default(&c);
        c.l1_cache_limit = (12u << 20) - (uint64_t)below;
        fix f;
        fix_open_cfg(&f, 1, AG_ALLOC_MULTI, 0, &c);
        ag_block *g = xmalloc(&f, 0, 12u << 20);
        assert_int_equal(ag_alloc_free(f.a, g, 0), AG_OK);
        assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
        ag_alloc_stats s = stats(f.a);
        assert_int_equal(s.device_frees, below ? 1 : 0);
        assert_int_equal(s.reserved, below ? 0 : 12u << 20);
        assert_int_equal(ag_heap_cached(&f.a->l1), below ? 0 : 12u << 20);
        fix_close(&f);
    }
}

/* When the device refuses the segment L1 would grow by but has room for
 * the request alone, L1 grows by the request alone: no trim and retry
 * (a device of exactly one small region). */
static void test_l1_segment_refused(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    uint64_t region = c.small_region / 8u; /* a small pool's region with L1 */
    fix f;
    fix_open(&f, 1, AG_ALLOC_MULTI, region);
    ag_block *b = xmalloc(&f, 0, 4096);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.retries, 0);
    assert_int_equal(s.reserved, region);
    assert_int_equal(s.device_allocs, 1);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    fix_close(&f);
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

/* An exact fit ends the search in its bin: of two free spans of exactly
 * the request's size, the one freed last (the bin's head) serves, whatever
 * the addresses; ties by address are broken among larger spans only, so
 * that an exact bin is never scanned. */
static void test_heap_exact_fit_first(void **state)
{
    (void)state;
    fheap f;
    fheap_open(&f, 512, 512, UINT64_MAX);
    assert_int_equal(ag_heap_grow(&f.h, 8192), AG_OK);
    ag_span *p[4];
    static const uint64_t sz[4] = {1024, 1024, 1024, 5120};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
        p[k] = ag_heap_take(&f.h, sz[k]);
        assert_non_null(p[k]);
    }
    uintptr_t lo = p[0]->addr, hi = p[2]->addr;
    ag_heap_put(&f.h, p[0]);
    ag_heap_put(&f.h, p[2]); /* freed last, at the higher address */
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    ag_span *t = ag_heap_take(&f.h, 1024);
    assert_non_null(t);
    assert_int_equal(t->addr, hi);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    ag_span *u = ag_heap_take(&f.h, 1024);
    assert_non_null(u);
    assert_int_equal(u->addr, lo);
    /* a free first span with taken ones after it: the region stays */
    ag_heap_put(&f.h, u);
    assert_int_equal(ag_heap_trim(&f.h), 0);
    assert_int_equal(f.fb.releases, 0);
    ag_heap_put(&f.h, t);
    ag_heap_put(&f.h, p[1]);
    ag_heap_put(&f.h, p[3]);
    assert_true(ag_heap_check(&f.h));
    assert_int_equal(ag_heap_trim(&f.h), 8192);
    assert_int_equal(f.fb.releases, 1);
    fheap_close(&f);
}

/* Span nodes a heap can hand out without allocating: its given-back list
 * and the untouched rest of its newest chunk. */
static uint32_t count_spare_nodes(const ag_heap *h)
{
    uint32_t n = h->nfresh;
    for (const ag_span *s = h->spare; s; s = s->fnext)
        n++;
    return n;
}

/* nspare counts exactly the nodes a heap holds in reserve, across chunks:
 * the newest chunk's last node joins the given-back ones when a new chunk
 * comes, counted once; and a reserve leaves two nodes, as a growth takes
 * two (the region's and the cut's).  (With one short, a growth runs out of
 * nodes.)  A region of 200 quanta cut one quantum at a time needs three
 * chunks of 64 nodes; the growth beside it, with one node left, a fourth. */
static void test_heap_node_count(void **state)
{
    (void)state;
    fheap f;
    fheap_open(&f, 512, 512, UINT64_MAX);
    assert_int_equal(ag_heap_grow(&f.h, 200u * 512u), AG_OK);
    assert_int_equal(f.h.nspare, 63);
    ag_span *p[190];
    for (int k = 0; k < 190; k++) {
        assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
        assert_int_equal(f.h.nspare, count_spare_nodes(&f.h));
        p[k] = ag_heap_take(&f.h, 512);
        assert_non_null(p[k]);
        assert_int_equal(f.h.nspare, count_spare_nodes(&f.h));
        if (k == 149) {
            assert_int_equal(f.h.nchunks, 3);
            assert_int_equal(f.h.nspare, 3u * 64u - 1u - 150u); /* the region's node and one per cut */
        }
    }
    /* the reserve before the last cut found two nodes: one is left */
    assert_int_equal(f.h.nchunks, 3);
    assert_int_equal(f.h.nspare, 1);
    ag_span *g = NULL;
    assert_int_equal(ag_heap_grow_take(&f.h, 4096, 512, &g), AG_OK);
    assert_int_equal(g->size, 512);
    assert_int_equal(f.h.nchunks, 4);
    assert_int_equal(f.h.nspare, 1u + 64u - 2u);
    assert_int_equal(f.h.nspare, count_spare_nodes(&f.h));
    ag_heap_put(&f.h, g);
    for (int k = 0; k < 190; k++)
        ag_heap_put(&f.h, p[k]);
    assert_int_equal(f.h.nspare, 4u * 64u - 2u); /* one node a region */
    assert_int_equal(f.h.nspare, count_spare_nodes(&f.h));
    assert_true(ag_heap_check(&f.h));
    assert_int_equal(ag_heap_trim(&f.h), 200u * 512u + 4096u);
    fheap_close(&f);
    assert_int_equal(f.fb.grows, 2);
}

/* A request whose growth is exactly the waste limit (size + over_waste)
 * still takes a span of that growth: a span no larger than what the owner
 * grows for a request always serves it again.  max_split 64 KiB, growth in
 * 4 KiB, over_waste 512 B: a request of 67.5 KiB grows 68 KiB, exactly
 * its size plus over_waste. */
static void test_heap_growth_at_waste_limit(void **state)
{
    (void)state;
    fheap f;
    fheap_open(&f, 512, 512, 65536);
    ag_heap_set_growth(&f.h, 4096, 4096);
    f.h.over_waste = 512;
    const uint64_t want = 65536 + 3584, grown = 69632;
    assert_int_equal(ag_round_up(want, 4096), grown);
    assert_int_equal(ag_heap_grow(&f.h, grown), AG_OK);
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    ag_span *s = ag_heap_take(&f.h, want);
    assert_non_null(s);
    assert_int_equal(s->size, grown); /* whole: past max_split */
    ag_heap_put(&f.h, s);
    /* 4 KiB less grows 64 KiB: 68 KiB wastes more than over_waste for it */
    assert_int_equal(ag_heap_reserve(&f.h), AG_OK);
    assert_null(ag_heap_take(&f.h, want - 4096));
    assert_true(ag_heap_check(&f.h));
    fheap_close(&f);
    assert_int_equal(f.fb.grows, 1);
}

/* A free L1 span of large_alone bytes is kept for requests that large only
 * when large_alone exceeds l1_segment; at exactly l1_segment (2 MiB) a
 * small region is cut from it: no device call. */
static void test_l1_keep_at_segment(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.large_alone = c.l1_segment;
    fix f;
    fix_open_cfg(&f, 2, AG_ALLOC_MULTI, 0, &c);
    assert_int_equal(f.a->l1.keep, UINT64_MAX);
    f.a->cfg.l1_cache_limit = 64u << 20; /* the clean gives the region to L1, which keeps it */
    ag_block *g = xmalloc(&f, 0, 2u << 20);
    uintptr_t lo = (uintptr_t)ag_block_ptr(g);
    assert_int_equal(ag_alloc_free(f.a, g, 0), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(ag_heap_cached(&f.a->l1), 2u << 20);
    ag_block *small = xmalloc(&f, 1, 4096);
    uintptr_t p = (uintptr_t)ag_block_ptr(small);
    assert_true(p >= lo && p < lo + (2u << 20));
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.device_allocs, 1);
    assert_int_equal(s.reserved, 2u << 20);
    assert_int_equal(ag_heap_cached(&f.a->l1), (2u << 20) - (256u << 10));
    assert_int_equal(ag_alloc_free(f.a, small, 1), AG_OK);
    fix_close(&f);
}

/* Trim and retry trims L1 before the pools give their regions back: a
 * segment L1 cached goes to the device even when a pool region serves
 * the retry.  A 24 MiB device: L1 caches a 4 MiB segment, stream 0's pool
 * a 16 MiB region; stream 1's 6 MiB region does not fit beside them. */
static void test_retry_trims_l1_first(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 24u << 20);
    f.a->cfg.l1_cache_limit = 64u << 20;
    ag_block *a = xmalloc(&f, 0, 3u << 20);
    assert_int_equal(ag_alloc_free(f.a, a, 0), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    f.a->cfg.l1_cache_limit = UINT64_MAX;
    assert_int_equal(ag_heap_cached(&f.a->l1), 4u << 20);
    ag_block *big = xmalloc(&f, 0, 16u << 20);
    void *p = ag_block_ptr(big);
    assert_int_equal(ag_alloc_free(f.a, big, 0), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.reserved, 20u << 20);
    assert_int_equal(s.device_allocs, 2);
    ag_block *c = xmalloc(&f, 1, 5u << 20);
    s = stats(f.a);
    assert_ptr_equal(ag_block_ptr(c), p); /* cut from the pool's region, in L1 now */
    assert_int_equal(s.retries, 1);
    assert_int_equal(s.device_allocs, 2);
    assert_int_equal(s.device_frees, 1); /* L1's 4 MiB segment */
    assert_int_equal(s.reserved, 16u << 20);
    assert_int_equal(ag_heap_cached(&f.a->l1), 10u << 20);
    assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
    fix_close(&f);
}

/* Under pressure L1's retry takes any free span, the keep rule aside: on a
 * 24 MiB device stream 0's pool holds a free 24 MiB region, and stream 1's
 * 4 MiB region, which the device refuses, is cut from it once the pool
 * gives it to L1 (a span of large_alone or more, kept from smaller
 * requests otherwise), instead of the segment going to the device. */
static void test_retry_ignores_keep(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 24u << 20);
    ag_block *a = xmalloc(&f, 0, 24u << 20);
    void *p = ag_block_ptr(a);
    assert_int_equal(ag_alloc_free(f.a, a, 0), AG_OK);
    ag_block *c = xmalloc(&f, 1, 4u << 20);
    ag_alloc_stats s = stats(f.a);
    assert_ptr_equal(ag_block_ptr(c), p);
    assert_int_equal(s.retries, 1);
    assert_int_equal(s.device_allocs, 1);
    assert_int_equal(s.device_frees, 0);
    assert_int_equal(s.reserved, 24u << 20);
    assert_int_equal(ag_heap_cached(&f.a->l1), 20u << 20);
    assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
    fix_close(&f);
}

/* L1 gives a span of max_split or more only to a request that wastes less
 * than large_region of it, as the pools do: without steal (no keep or
 * alone rule in L1) a 200 MiB segment the clean gave to L1 does not serve
 * a 40 MiB request whole; the device grows. */
static void test_l1_oversize_waste(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.max_split = 32u << 20;
    c.steal = 0;
    fix f;
    fix_open_cfg(&f, 1, AG_ALLOC_MULTI, 0, &c);
    ag_block *big = xmalloc(&f, 0, 200u << 20);
    assert_int_equal(ag_alloc_free(f.a, big, 0), AG_OK);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(ag_heap_cached(&f.a->l1), 200u << 20);
    ag_block *mid = xmalloc(&f, 0, 40u << 20);
    assert_int_equal(ag_block_size(mid), 40u << 20);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.device_allocs, 2);
    assert_int_equal(s.reserved, 240u << 20);
    assert_int_equal(ag_heap_cached(&f.a->l1), 200u << 20);
    assert_int_equal(ag_alloc_free(f.a, mid, 0), AG_OK);
    fix_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap_split_merge),
        cmocka_unit_test(test_heap_max_split),
        cmocka_unit_test(test_max_split_below_regions),
        cmocka_unit_test(test_heap_keep_alone),
        cmocka_unit_test(test_bins),
        cmocka_unit_test(test_heap_max_split_exact),
        cmocka_unit_test(test_heap_keep_exact),
        cmocka_unit_test(test_heap_split_min_exact),
        cmocka_unit_test(test_heap_best_fit_lowest),
        cmocka_unit_test(test_l1_geometric),
        cmocka_unit_test(test_l1_tail),
        cmocka_unit_test(test_l1_prepared),
        cmocka_unit_test(test_heap_adopt_records),
        cmocka_unit_test(test_l1_keeps_large),
        cmocka_unit_test(test_l1_cache_limit_exact),
        cmocka_unit_test(test_trim_and_retry),
        cmocka_unit_test(test_l1_segment_refused),
        cmocka_unit_test(test_oversize_waste),
        cmocka_unit_test(test_growth_serves_again),
        cmocka_unit_test(test_move_keeps_max_split),
        cmocka_unit_test(test_host_oom_in_growth),
        cmocka_unit_test(test_heap_exact_fit_first),
        cmocka_unit_test(test_heap_node_count),
        cmocka_unit_test(test_heap_growth_at_waste_limit),
        cmocka_unit_test(test_l1_keep_at_segment),
        cmocka_unit_test(test_retry_trims_l1_first),
        cmocka_unit_test(test_retry_ignores_keep),
        cmocka_unit_test(test_l1_oversize_waste),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
