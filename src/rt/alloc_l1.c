/* L1 and the L2 stream pools (seed §4.2.1).  L1 caches device memory in
 * page spans shared by every stream; each stream's pools (small and large
 * regions) cut L1 spans into blocks.  When the device refuses, L1 trims its
 * own cache, then synchronises the streams whose pools hold wholly free
 * regions, takes those back, and retries.  The baseline's pools sit on the
 * device directly, as a per-stream caching allocator does. */
#include <stdio.h>

#include "rt/alloc_internal.h"

void ag_dev_note(ag_memalloc *a)
{
    snprintf(a->devmsg, sizeof a->devmsg, "%s", ag_ctx_errmsg(ag_device_ctx(a->dev)));
}

static void reserved_add(ag_memalloc *a, uint64_t n)
{
    a->s.reserved += n;
    if (a->s.reserved > a->s.peak_reserved)
        a->s.peak_reserved = a->s.reserved;
    a->s.device_allocs++;
}

/* Device memory in, device memory out: the backing of L1 (multi mode) and
 * of the pools (baseline). */
static ag_status dev_grow(void *ud, uint64_t size, uintptr_t *addr, void **cookie, uint64_t *got)
{
    ag_memalloc *a = ud;
    size_t align = a->cfg.page_size < AG_DEV_MAX_ALIGN ? (size_t)a->cfg.page_size : AG_DEV_MAX_ALIGN;
    if (a->cfg.mode == AG_ALLOC_BASELINE)
        align = AG_DEV_DEFAULT_ALIGN;
    void *p = NULL;
    ag_status st = ag_dev_mem_alloc(a->dev, a->cfg.mem_type, (size_t)size, align, &p);
    if (st != AG_OK) {
        ag_dev_note(a);
        return st;
    }
    *addr = (uintptr_t)p;
    *cookie = p;
    *got = size;
    reserved_add(a, size);
    return AG_OK;
}

static void dev_release(void *ud, uintptr_t addr, uint64_t size, void *cookie)
{
    ag_memalloc *a = ud;
    (void)addr;
    if (!a->keep_device) /* (ag_alloc_destroy: queued work may still use it) */
        ag_dev_mem_free(a->dev, cookie);
    a->s.reserved -= size;
    a->s.device_frees++;
}

/* What to grow for a request of size bytes when want is the usual amount:
 * a span of max_split or more is never split (nor given to a smaller
 * request), so a growth that large is the request alone (quantum q). */
static uint64_t below_split(uint64_t want, uint64_t size, uint64_t max_split, uint64_t q)
{
    return want >= max_split ? ag_round_up(size, q) : want;
}

/* Whether the host has seen owner complete what it enqueued before s
 * became wholly free: then nothing queued touches it any more. */
static bool region_idle(const ag_memalloc *a, const ag_span *s, uint32_t owner)
{
    return s->stamp <= a->st[owner].ev_done;
}

/* The wholly free pool region that best serves a region of size for the
 * growing pool (grown for a request of a->grow_want bytes), wasting at
 * most the size asked or one L1 segment: of the
 * same stream if any (no ordering needed), else one whose owner was seen
 * past it (no ordering needed either), else the smallest (an event). */
static ag_span *steal_pick(ag_memalloc *a, uint64_t size, uint32_t *owner)
{
    ag_span *best = NULL;
    uint32_t best_rank = 3;
    uint64_t limit = size + (size > a->cfg.l1_segment ? size : a->cfg.l1_segment);
    if (size >= a->cfg.large_alone) /* as the heaps take for such a request */
        limit = ag_alone_cap(a->cfg.large_alone, a->cfg.large_slack, size, a->grow_want, size) - 1u;
    if (size < a->cfg.max_split && limit >= a->cfg.max_split)
        limit = a->cfg.max_split - 1u; /* nor a span never split for a smaller request */
    else if (size >= a->cfg.max_split && limit - size >= a->cfg.large_region)
        limit = size + a->cfg.large_region - 1u; /* nor one wasting as much as the heaps refuse */
    const ag_wholeset *w = &a->pool_whole;
    uint32_t b1 = ag_alloc_bin(limit >> w->qshift);
    /* the smallest bin holding a region that needs no event is close
     * enough to the best fit; an event is worth a larger region */
    for (uint32_t b = ag_binmap_next(w->binmap, ag_alloc_bin(size >> w->qshift)); b <= b1 && best_rank > 1;
         b = ag_binmap_next(w->binmap, b + 1u))
        for (ag_span *s = w->bins[b]; s; s = s->wnext) {
            if (s->size < size || s->size > limit || s->heap == a->grow_heap)
                continue;
            uint32_t k = s->heap->tag;
            uint32_t rank = k == a->grow_stream ? 0u : region_idle(a, s, k) ? 1u : 2u;
            if (rank < best_rank || (rank == best_rank && s->size < best->size)) {
                best = s;
                best_rank = rank;
                *owner = k;
                if (rank == 0 && s->size == size)
                    return best;
            }
        }
    return best;
}

/* A wholly free region of another pool for the growing one instead of
 * device memory.  The owner's queued work may still touch it (frees are
 * stream ordered): unless the host has seen that work complete, an event
 * recorded on the owner and waited for by the growing stream orders it
 * first, without blocking the host (neither may capture: a captured record
 * or wait orders nothing until its graph is launched).  Returns its span,
 * still in the owner's pool, or NULL (nothing fits, or no event). */
static ag_span *steal_ordered(ag_memalloc *a, uint64_t size, const ag_move *mv)
{
    uint32_t owner = 0, to = a->grow_stream;
    ag_span *s = mv && mv->span ? (owner = mv->owner, mv->span) : steal_pick(a, size, &owner);
    if (!s)
        return NULL;
    if (owner != to && !region_idle(a, s, owner)) {
        if (ag_ev_reserve(a, owner, 1) != AG_OK) {
            ag_ctx_clear_error(a->ctx);
            ag_ctx_clear_error(ag_device_ctx(a->dev));
            return NULL;
        }
        ag_dev_event *ev = a->spare_ev[a->nspare_ev - 1u];
        uint64_t mark = ag_hb_mark(a, owner); /* before the record: never claims more */
        bool rec = false, wait = false;
        if (ag_dev_event_record_eager(a->dev, ev, a->streams[owner], &rec) != AG_OK ||
            (rec && ag_dev_stream_wait_event_eager(a->dev, a->streams[to], ev, &wait) != AG_OK)) {
            ag_ctx_clear_error(ag_device_ctx(a->dev));
            return NULL;
        }
        if (!rec || !wait) {
            a->s.capture_waits++; /* a captured record or wait would order nothing */
            return NULL;
        }
        ag_hb_join(a, to, mark);
        a->s.region_waits++;
    }
    a->s.regions_moved++;
    return s;
}

/* The same region given up by its pool: its L1 span, for the growing pool
 * to wrap in a new region record. */
static ag_span *steal(ag_memalloc *a, uint64_t size)
{
    ag_span *s = steal_ordered(a, size, NULL);
    return s ? ag_heap_detach(s->heap, s) : NULL;
}

/* Before the device memory grows past its peak: the wholly free regions of
 * the pools (but the growing one) that no queued work touches any more go
 * back to L1, where they merge with their neighbours into the segments they
 * were cut from.  Returns whether any moved.  Pools cut their regions from
 * L1's cache, splitting large free segments between two executions (after
 * a resource clean); this puts such a segment together again, so that the
 * next execution's large request finds it instead of growing the device. */
static bool l1_gather(ag_memalloc *a)
{
    uint8_t asked[AG_ALLOC_MAX_STREAMS];
    memset(asked, 0, a->n);
    bool moved = false;
    ag_recent_flush_all(a);
    ag_wholeset *w = &a->pool_whole;
    for (uint32_t b = ag_binmap_next(w->binmap, 0); b < AG_NBINS; b = ag_binmap_next(w->binmap, b + 1u))
        for (ag_span *s = w->bins[b], *nx; s; s = nx) {
            nx = s->wnext;
            uint32_t k = s->heap->tag;
            if (s->heap == a->grow_heap || (!region_idle(a, s, k) && !ag_stream_seen_idle(a, k, asked)))
                continue;
            ag_heap_put(&a->l1, ag_heap_detach(s->heap, s));
            a->s.regions_gathered++;
            moved = true;
        }
    return moved;
}

/* An L1 span of at least size bytes (a multiple of the page size) for a
 * pool region: L1's cache, a free region of another pool, the device. */
static ag_status l1_take(ag_memalloc *a, uint64_t size, ag_span **out)
{
    ag_heap *h = &a->l1;
    AG_TRY(ag_heap_prepare(h)); /* (an AG_ENOMEM below is the device's) */
    /* L1 is mostly empty while the pools hold the memory */
    ag_span *s = ag_heap_cached(h) >= size ? ag_heap_take_for(h, size, a->grow_want) : NULL;
    if (s)
        goto done;
    if (a->cfg.steal && !a->steal_tried && (s = steal(a, size)) != NULL)
        goto done;
    if (a->cfg.steal && size >= a->cfg.gather_min && a->s.reserved + size > a->s.peak_reserved && l1_gather(a)) {
        /* A new peak: first what the pools cache idle, merged in L1.  (What
         * still does not serve stays cached: giving it to the device would
         * lower this peak only for the next execution to grow it again.) */
        AG_TRY(ag_heap_reserve(h));
        if ((s = ag_heap_take_for(h, size, a->grow_want)) != NULL)
            goto done;
    }
    uint64_t seg = size;
    if (size < a->cfg.l1_segment) {
        seg = ag_round_up(a->cfg.l1_segment, a->cfg.page_size);
        if (a->cfg.mode == AG_ALLOC_MULTI && a->cfg.steal) {
            /* With fine regions L1 grows geometrically up to a segment, from
             * empty: a quarter segment first, then as much as it holds
             * already, so that a small graph holds little and a large one
             * makes few device calls.  While it still caches free spans
             * that cannot serve the request, it asks for the request alone:
             * those spans are the tails of earlier segments, left at sizes
             * the graph does not ask for, and a larger segment would only
             * leave one more. */
            if (ag_heap_cached(h) > 0)
                seg = size;
            else if (a->s.reserved < seg) {
                uint64_t want = a->s.reserved > seg / 4u ? a->s.reserved : seg / 4u;
                seg = want > size ? ag_round_up(want, a->cfg.page_size) : size;
            }
        }
    }
    seg = below_split(seg, size, a->cfg.max_split, a->cfg.page_size);
    ag_status st = ag_heap_grow(h, seg);
    if (st == AG_ENOMEM && seg > size)
        st = ag_heap_grow(h, size);
    if (st == AG_ENOMEM) {
        /* Trim and retry: free what L1 caches, then what the pools cache. */
        a->s.retries++;
        ag_heap_trim(h);
        ag_pools_release(a, true);
        AG_TRY(ag_heap_reserve(h));
        s = ag_heap_take_any(h, size); /* under pressure any free span serves */
        if (s)
            goto done;
        ag_heap_trim(h);
        st = ag_heap_grow(h, size);
    }
    if (st != AG_OK)
        return st;
    AG_TRY(ag_heap_reserve(h));
    s = ag_heap_take_any(h, size); /* what grew for it serves it */
    ag_assert(s);
done:
    *out = s;
    return AG_OK;
}

static ag_status pool_grow_l1(void *ud, uint64_t size, uintptr_t *addr, void **cookie, uint64_t *got)
{
    ag_memalloc *a = ud;
    ag_span *s = NULL;
    AG_TRY(l1_take(a, size, &s));
    *addr = s->addr;
    *cookie = s;
    *got = s->size;
    return AG_OK;
}

static void pool_release_l1(void *ud, uintptr_t addr, uint64_t size, void *cookie)
{
    ag_memalloc *a = ud;
    (void)addr;
    (void)size;
    ag_heap_put(&a->l1, cookie);
    if (ag_heap_cached(&a->l1) > a->cfg.l1_cache_limit)
        ag_heap_trim(&a->l1);
}

ag_status ag_l1_init(ag_memalloc *a)
{
    a->pool_whole.qshift = (uint32_t)__builtin_ctzll(a->cfg.page_size);
    ag_heap_init(&a->l1, a->ctx, a->cfg.page_size, a->cfg.page_size, a->cfg.max_split, dev_grow, dev_release, a,
                 true);
    a->l1.over_waste = a->cfg.large_region; /* as the pools */
    /* A segment grown for a large request alone is kept for such requests:
     * cutting small regions from it between two executions would make the
     * next large request grow the device again.  By size: L1 grows a
     * segment larger than l1_segment only for a request that large. */
    if (a->cfg.mode == AG_ALLOC_MULTI && a->cfg.steal) {
        a->l1.alone = a->cfg.large_alone;
        a->l1.slack = a->cfg.large_slack;
        if (a->cfg.large_alone > ag_round_up(a->cfg.l1_segment, a->cfg.page_size))
            a->l1.keep = a->cfg.large_alone;
    }
    /* Every pool of the multi mode grows from L1: its first growth (in
     * the first allocation) need not allocate L1's own records too. */
    return a->cfg.mode == AG_ALLOC_MULTI ? ag_heap_prepare(&a->l1) : AG_OK;
}

ag_status ag_pool_init(ag_memalloc *a, uint32_t stream)
{
    ag_astream *s = &a->st[stream];
    bool multi = a->cfg.mode == AG_ALLOC_MULTI;
    ag_heap_grow_fn grow = multi ? pool_grow_l1 : dev_grow;
    ag_heap_release_fn rel = multi ? pool_release_l1 : dev_release;
    /* Pool spans are not marked inaccessible when freed: a free is stream
     * ordered, so work still queued on the freeing stream may touch them.
     * L1 spans are idle (pools give them back only after a synchronise). */
    ag_heap_init(&s->pool[AG_POOL_SMALL], a->ctx, a->cfg.min_block, a->cfg.split_small, a->cfg.max_split, grow,
                 rel, a, false);
    ag_heap_init(&s->pool[AG_POOL_LARGE], a->ctx, a->cfg.min_block, a->cfg.split_large, a->cfg.max_split, grow,
                 rel, a, false);
    for (uint32_t p = 0; p < 2; p++) {
        /* a span of max_split or more serves a request that large only if
         * it wastes less than large_region (the reference's 20 MiB) */
        s->pool[p].over_waste = a->cfg.large_region;
        if (multi) {
            ag_heap_share_whole(&s->pool[p], &a->pool_whole, &s->ev_seq, stream);
            /* the multi mode's regions are L1 pages (ag_pool_take) */
            ag_heap_set_growth(&s->pool[p], a->cfg.page_size, a->cfg.alone_round);
        }
    }
    /* A region cut for a large request alone is for a request of about
     * its size (large_slack percent larger at most), so that the next
     * execution's requests find the regions the last one left */
    if (multi && a->cfg.steal) {
        s->pool[AG_POOL_LARGE].alone = a->cfg.large_alone;
        s->pool[AG_POOL_LARGE].slack = a->cfg.large_slack;
    }
    return AG_OK;
}

uint64_t ag_pools_release(ag_memalloc *a, bool sync)
{
    uint64_t freed = 0;
    ag_recent_flush_all(a);
    for (uint32_t k = 0; k < a->n; k++) {
        ag_astream *s = &a->st[k];
        if (!ag_heap_has_free_region(&s->pool[0]) && !ag_heap_has_free_region(&s->pool[1]))
            continue;
        if (sync && ag_stream_sync(a, k) != AG_OK) {
            ag_dev_note(a);
            continue; /* a poisoned device: keep the memory, it may still be touched */
        }
        freed += ag_heap_trim(&s->pool[0]);
        freed += ag_heap_trim(&s->pool[1]);
    }
    return freed;
}

ag_status ag_pool_prepare(ag_memalloc *a, uint32_t stream, uint64_t size)
{
    AG_TRY(ag_heap_prepare(&a->st[stream].pool[ag_pool_of(a, size)]));
    return a->cfg.mode == AG_ALLOC_MULTI ? ag_heap_prepare(&a->l1) : AG_OK;
}

/* The region pool p of a stream grows by for a request of size bytes. */
static uint64_t pool_region(const ag_memalloc *a, uint32_t p, uint64_t size)
{
    const ag_alloc_config *c = &a->cfg;
    uint64_t region;
    bool cut = a->cfg.mode == AG_ALLOC_MULTI && a->cfg.steal;
    if (p == AG_POOL_SMALL && cut)
        /* L1 makes growth cheap: small regions of an eighth, so that a
         * stream with little to hold holds little */
        region = size > c->small_region / 8u ? size : c->small_region / 8u;
    else if (p == AG_POOL_SMALL)
        region = c->small_region;
    else if (size < c->large_alone && !cut)
        region = c->large_region;
    else if (size >= c->large_alone && cut)
        region = ag_round_up(size, c->alone_round);
    else
        region = ag_round_up(size, c->large_round);
    if (a->cfg.mode == AG_ALLOC_MULTI)
        region = ag_round_up(region, c->page_size);
    region = below_split(region, size, c->max_split, a->cfg.mode == AG_ALLOC_MULTI ? c->page_size : c->min_block);
    return region;
}

/* Stream's pool p is to grow for a request of size bytes (what region
 * moves and L1's takes weigh). */
static ag_heap *grow_for(ag_memalloc *a, uint32_t stream, uint32_t p, uint64_t size)
{
    a->grow_stream = stream;
    a->grow_heap = &a->st[stream].pool[p];
    a->grow_want = size;
    return a->grow_heap;
}

/* Whether a pool grows by region through a wholly free region of another
 * pool: multi mode with steal, when L1 has no room cached (a move costs
 * less than l1_take, backing and all). */
static bool grows_by_move(const ag_memalloc *a, uint64_t region)
{
    return a->cfg.mode == AG_ALLOC_MULTI && a->cfg.steal && ag_heap_cached(&a->l1) < region;
}

bool ag_pool_can_move(ag_memalloc *a, uint32_t stream, uint64_t size, ag_move *mv)
{
    uint32_t p = ag_pool_of(a, size);
    uint64_t region = pool_region(a, p, size);
    mv->span = NULL;
    if (!grows_by_move(a, region))
        return false;
    grow_for(a, stream, p, size);
    mv->span = steal_pick(a, region, &mv->owner);
    return mv->span != NULL;
}

ag_status ag_pool_take(ag_memalloc *a, uint32_t stream, uint64_t size, bool tried, const ag_move *mv, uint32_t *pool,
                       ag_span **out)
{
    const ag_alloc_config *c = &a->cfg;
    uint32_t p = ag_pool_of(a, size);
    ag_heap *h = grow_for(a, stream, p, size);
    AG_TRY(ag_heap_reserve(h));
    ag_span *s = tried ? NULL : ag_heap_take(h, size);
    if (!s) {
        uint64_t region = pool_region(a, p, size);
        ag_status st = AG_OK;
        bool move = grows_by_move(a, region);
        AG_TRY(ag_pool_prepare(a, stream, size)); /* a record for the region, moved or grown */
        ag_span *w = move ? steal_ordered(a, region, mv) : NULL;
        if (w) {
            s = ag_heap_adopt(h, w, size);
        } else if (mv && mv->span) {
            /* the move the caller counted on has no event (a stream
             * captures, or no host memory): nothing grows before it looks */
            *pool = p;
            *out = NULL;
            return AG_OK;
        } else {
            a->steal_tried = move;
            st = ag_heap_grow_take(h, region, size, &s);
            a->steal_tried = false;
        }
        if (st == AG_ENOMEM && a->cfg.mode == AG_ALLOC_BASELINE) {
            /* The baseline's last resort: wait for every pending event,
             * release every wholly free region of every stream, retry. */
            a->s.retries++;
            ag_status pst = ag_base_poll(a, true);
            if (pst != AG_OK)
                return pst;
            ag_pools_release(a, true);
            AG_TRY(ag_heap_reserve(h));
            s = ag_heap_take(h, size);
            if (!s)
                st = ag_heap_grow(h, region);
        }
        if (!s && st == AG_ENOMEM && region > size) {
            region = size;
            if (a->cfg.mode == AG_ALLOC_MULTI)
                region = ag_round_up(region, c->page_size);
            st = ag_heap_grow(h, region);
        }
        if (!s) {
            if (st != AG_OK)
                return st;
            AG_TRY(ag_heap_reserve(h));
            s = ag_heap_take_any(h, size);
            ag_assert(s);
        }
    }
    *pool = p;
    *out = s;
    return AG_OK;
}
