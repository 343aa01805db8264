/* The span heap under every layer of the allocator (seed §4.2.1): L1 cuts
 * device segments into page spans, each stream pool cuts L1 spans into
 * blocks.  Free spans sit in size bins (a bitmap finds the first non-empty
 * one); a take splits off a remainder worth keeping, a put merges with free
 * neighbours, and wholly free regions go back to the backing on a trim. */
#include "rt/alloc_internal.h"
#include "rt/rt_internal.h"

#define AG_SPAN_CHUNK 64u
/* Region records are allocated this many at a time, and never leave the
 * heap that allocated them (ag_heap_adopt copies one). */
#define AG_REGION_CHUNK 8u

typedef struct region_chunk {
    struct region_chunk *next;
    ag_region recs[AG_REGION_CHUNK];
} region_chunk;

uint32_t ag_alloc_bin(uint64_t units)
{
    if (units < 16)
        return (uint32_t)units;
    uint32_t fl = 63u - (uint32_t)__builtin_clzll(units);
    uint32_t sl = (uint32_t)(units >> (fl - 2u)) & 3u;
    return 16u + (fl - 4u) * 4u + sl;
}

uint32_t ag_binmap_next(const uint64_t *map, uint32_t from)
{
    if (from >= AG_NBINS)
        return AG_NBINS;
    uint32_t wi = from / 64u;
    uint64_t word = map[wi] & (~UINT64_C(0) << (from % 64u));
    for (;;) {
        if (word)
            return wi * 64u + (uint32_t)__builtin_ctzll(word);
        if (++wi == AG_BINWORDS)
            return AG_NBINS;
        word = map[wi];
    }
}

void ag_heap_init(ag_heap *h, ag_ctx *ctx, uint64_t quantum, uint64_t split_min, uint64_t max_split,
                  ag_heap_grow_fn grow, ag_heap_release_fn release, void *ud, bool poison)
{
    memset(h, 0, sizeof *h);
    h->ctx = ctx;
    h->quantum = quantum;
    h->split_min = split_min < quantum ? quantum : split_min;
    h->max_split = max_split;
    h->keep = UINT64_MAX;
    h->alone = UINT64_MAX;
    h->over_waste = UINT64_MAX;
    h->grow = grow;
    h->release = release;
    h->ud = ud;
    h->poison = poison;
    ag_assert(quantum && !(quantum & (quantum - 1u)));
    h->qshift = (uint32_t)__builtin_ctzll(quantum);
    ag_heap_set_growth(h, quantum, quantum);
}

void ag_heap_set_growth(ag_heap *h, uint64_t grow_q, uint64_t alone_q)
{
    ag_assert(grow_q % h->quantum == 0 && alone_q % h->quantum == 0);
    h->grow_q = grow_q;
    h->alone_q = alone_q;
    /* the least request whose growth, rounded to grow_q, reaches max_split */
    uint64_t m = ag_round_up(h->max_split, grow_q);
    h->oversize = m == UINT64_MAX ? h->max_split : m == 0 ? 0 : m - grow_q + 1u;
}

void ag_heap_share_whole(ag_heap *h, ag_wholeset *set, const uint64_t *epoch, uint32_t tag)
{
    ag_assert(h->nwhole == 0);
    h->whole = set;
    h->epoch = epoch;
    h->tag = tag;
}

static void whole_add(ag_heap *h, ag_span *s)
{
    ag_wholeset *w = h->whole;
    h->nwhole++;
    if (!w)
        return;
    uint32_t b = ag_alloc_bin(s->size >> w->qshift);
    s->heap = h;
    s->stamp = h->epoch ? *h->epoch + 1u : 0;
    s->wbin = b;
    s->wprev = NULL;
    s->wnext = w->bins[b];
    if (s->wnext)
        s->wnext->wprev = s;
    w->bins[b] = s;
    w->binmap[b / 64u] |= UINT64_C(1) << (b % 64u);
}

static void whole_del(ag_heap *h, ag_span *s)
{
    ag_wholeset *w = h->whole;
    h->nwhole--;
    if (!w)
        return;
    if (s->wprev)
        s->wprev->wnext = s->wnext;
    else
        w->bins[s->wbin] = s->wnext;
    if (s->wnext)
        s->wnext->wprev = s->wprev;
    if (!w->bins[s->wbin])
        w->binmap[s->wbin / 64u] &= ~(UINT64_C(1) << (s->wbin % 64u));
    s->wprev = s->wnext = NULL;
}

static void bin_insert(ag_heap *h, ag_span *s)
{
    uint32_t b = ag_alloc_bin(s->size >> h->qshift);
    s->bin = b;
    s->fprev = NULL;
    s->fnext = h->bins[b];
    if (s->fnext)
        s->fnext->fprev = s;
    h->bins[b] = s;
    h->binmap[b / 64u] |= UINT64_C(1) << (b % 64u);
}

static void bin_remove(ag_heap *h, ag_span *s)
{
    if (s->fprev)
        s->fprev->fnext = s->fnext;
    else
        h->bins[s->bin] = s->fnext;
    if (s->fnext)
        s->fnext->fprev = s->fprev;
    if (!h->bins[s->bin])
        h->binmap[s->bin / 64u] &= ~(UINT64_C(1) << (s->bin % 64u));
    s->fprev = s->fnext = NULL;
}

static void node_put(ag_heap *h, ag_span *s)
{
    s->fnext = h->spare;
    h->spare = s;
    h->nspare++;
}

static ag_span *node_get(ag_heap *h)
{
    ag_span *s = h->spare;
    if (s) {
        h->spare = s->fnext;
    } else {
        ag_assert(h->nfresh);
        s = h->fresh++;
        h->nfresh--;
    }
    h->nspare--;
    memset(s, 0, sizeof *s);
    return s;
}

ag_status ag_heap_reserve(ag_heap *h)
{
    if (h->nspare >= 2)
        return AG_OK;
    /* the newest chunk's last node joins the given-back ones */
    while (h->nfresh) {
        node_put(h, h->fresh++);
        h->nfresh--;
        h->nspare--;
    }
    if (h->nchunks == h->capchunks) {
        void **c = ag_realloc_double(h->ctx, h->chunks, &h->capchunks, sizeof *c, 8u);
        if (!c)
            return AG_OOM(h->ctx);
        h->chunks = c;
    }
    ag_span *chunk = ag_alloc(h->ctx, AG_SPAN_CHUNK * sizeof *chunk);
    if (!chunk)
        return AG_OOM(h->ctx);
    h->chunks[h->nchunks++] = chunk;
    /* nodes are touched when first handed out, not all at once here */
    h->fresh = chunk;
    h->nfresh = AG_SPAN_CHUNK;
    h->nspare += AG_SPAN_CHUNK;
    return AG_OK;
}

/* Smallest span of at least size in bin b (spans of other bins all fit or
 * all do not), skipping spans of cap bytes or more (reserved for larger
 * requests). */
static ag_span *best_in_bin(const ag_heap *h, uint32_t b, uint64_t size, uint64_t cap)
{
    ag_span *best = NULL;
    for (ag_span *s = h->bins[b]; s; s = s->fnext) {
        if (s->size < size || s->size >= cap)
            continue;
        if (!best || s->size < best->size || (s->size == best->size && s->addr < best->addr))
            best = s;
        if (best->size == size)
            break;
    }
    return best;
}

static ag_span *carve(ag_heap *h, ag_span *s, uint64_t size);

static ag_span *take(ag_heap *h, uint64_t size, uint64_t cap);

ag_span *ag_heap_take(ag_heap *h, uint64_t size)
{
    return ag_heap_take_for(h, size, size);
}

ag_span *ag_heap_take_for(ag_heap *h, uint64_t size, uint64_t want)
{
    /* spans of max_split or more serve only requests whose growth is that
     * large (never split), wasting less than over_waste; spans of keep or
     * more serve only requests that
     * large (split for them); a request of alone or more takes no span
     * more than slack percent larger, nor larger than its own growth */
    uint64_t cap = size < h->oversize                  ? h->max_split
                   : size > UINT64_MAX - h->over_waste ? UINT64_MAX
                                                       : size + h->over_waste;
    if (size >= h->oversize)
        cap = ag_admit_growth(cap, ag_round_up(size, h->grow_q));
    if (size < h->keep && h->keep < cap)
        cap = h->keep;
    if (size >= h->alone) {
        uint64_t lim = ag_alone_cap(h->alone, h->slack, size, want,
                                    ag_round_up(ag_round_up(size, h->alone_q), h->grow_q));
        cap = lim < cap ? lim : cap;
    }
    return take(h, size, cap);
}

ag_span *ag_heap_take_any(ag_heap *h, uint64_t size)
{
    ag_span *s = take(h, size, size < h->oversize ? h->max_split : UINT64_MAX);
    /* nothing below max_split: a larger span serves whole (carve does not
     * split it), as a growth that could not stay below max_split would */
    return s || size >= h->oversize ? s : take(h, size, UINT64_MAX);
}

static ag_span *take(ag_heap *h, uint64_t size, uint64_t cap)
{
    ag_assert(size > 0 && size % h->quantum == 0);
    uint32_t b = ag_alloc_bin(size >> h->qshift);
    ag_span *s = best_in_bin(h, b, size, cap);
    if (!s) {
        uint32_t lim = AG_NBINS;
        if (cap != UINT64_MAX && ag_alloc_bin(cap >> h->qshift) + 1u < lim)
            lim = ag_alloc_bin(cap >> h->qshift) + 1u;
        for (uint32_t nb = ag_binmap_next(h->binmap, b + 1u); nb < lim; nb = ag_binmap_next(h->binmap, nb + 1u)) {
            s = best_in_bin(h, nb, size, cap);
            if (s)
                break;
        }
        if (!s)
            return NULL;
    }
    bin_remove(h, s);
    if (!s->prev && !s->next)
        whole_del(h, s);
    return carve(h, s, size);
}

/* Takes the first size bytes of free span s (out of the bins), splitting
 * off the remainder when it is worth keeping. */
static ag_span *carve(ag_heap *h, ag_span *s, uint64_t size)
{
    uint64_t rest = s->size - size;
    if (rest >= h->split_min && s->size < h->max_split) {
        ag_span *r = node_get(h);
        r->addr = s->addr + size;
        r->size = rest;
        r->region = s->region;
        r->prev = s;
        r->next = s->next;
        if (s->next)
            s->next->prev = r;
        s->next = r;
        s->size = size;
        r->is_free = true;
        bin_insert(h, r);
    }
    s->is_free = false;
    h->used += s->size;
    if (h->poison)
        ag_rt_mark_access((void *)s->addr, s->size);
    return s;
}

/* A region record into and out of its heap's list and totals. */
static void region_link(ag_heap *h, ag_region *r)
{
    r->prev = NULL;
    r->next = h->regions;
    if (r->next)
        r->next->prev = r;
    h->regions = r;
    h->reserved += r->size;
    h->nregions++;
}

static void region_unlink(ag_heap *h, ag_region *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        h->regions = r->next;
    if (r->next)
        r->next->prev = r->prev;
    h->reserved -= r->size;
    h->nregions--;
}

/* Lists region r in h and returns the one free span that covers it (h has
 * a node reserved). */
static ag_span *region_enter(ag_heap *h, ag_region *r)
{
    region_link(h, r);
    ag_span *s = node_get(h);
    s->addr = r->addr;
    s->size = r->size;
    s->region = r;
    s->is_free = true;
    return s;
}

/* The span of a wholly free region leaves h's bins and whole set; its
 * region, still listed, is returned. */
static ag_region *whole_out(ag_heap *h, ag_span *s)
{
    ag_assert(s->is_free && !s->prev && !s->next);
    ag_region *r = s->region;
    bin_remove(h, s);
    whole_del(h, s);
    node_put(h, s);
    return r;
}

/* Region records are kept for the next grow: pools that hand regions to
 * L1 and take them back often would otherwise allocate each time. */
static void region_spare(ag_heap *h, ag_region *r)
{
    r->next = h->spare_regions;
    h->spare_regions = r;
}

/* A spare record of h (ag_heap_prepare made one), holding addr, size and
 * cookie, not yet listed. */
static ag_region *region_new(ag_heap *h, uintptr_t addr, uint64_t size, void *cookie)
{
    ag_region *r = h->spare_regions;
    ag_assert(r);
    h->spare_regions = r->next;
    memset(r, 0, sizeof *r);
    r->addr = addr;
    r->size = size;
    r->cookie = cookie;
    return r;
}

ag_status ag_heap_prepare(ag_heap *h)
{
    AG_TRY(ag_heap_reserve(h));
    if (!h->spare_regions) {
        region_chunk *c = ag_alloc(h->ctx, sizeof *c);
        if (!c)
            return AG_OOM(h->ctx);
        c->next = h->region_chunks;
        h->region_chunks = c;
        for (uint32_t k = AG_REGION_CHUNK; k-- > 0;)
            region_spare(h, &c->recs[k]);
    }
    return AG_OK;
}

/* A new region of at least size bytes from the backing: its one span,
 * free, in no bin yet. */
static ag_status grow_span(ag_heap *h, uint64_t size, ag_span **out)
{
    ag_assert(size > 0 && size % h->quantum == 0);
    AG_TRY(ag_heap_prepare(h));
    uintptr_t addr = 0;
    void *cookie = NULL;
    uint64_t got = size;
    AG_TRY(h->grow(h->ud, size, &addr, &cookie, &got));
    ag_assert(got >= size && got % h->quantum == 0);
    ag_span *s = region_enter(h, region_new(h, addr, got, cookie));
    if (h->poison)
        ag_rt_mark_noaccess((void *)s->addr, s->size);
    *out = s;
    return AG_OK;
}

ag_status ag_heap_grow(ag_heap *h, uint64_t size)
{
    ag_span *s = NULL;
    AG_TRY(grow_span(h, size, &s));
    bin_insert(h, s);
    whole_add(h, s);
    return AG_OK;
}

ag_status ag_heap_grow_take(ag_heap *h, uint64_t region, uint64_t size, ag_span **out)
{
    ag_assert(size <= region);
    ag_span *s = NULL;
    AG_TRY(grow_span(h, region, &s));
    *out = carve(h, s, size);
    return AG_OK;
}

/* Folds right into its free address neighbour left; right's node is spare
 * then.  Only the span that was in a bin leaves it. */
static ag_span *absorb(ag_heap *h, ag_span *left, ag_span *right, ag_span *binned)
{
    bin_remove(h, binned);
    left->size += right->size;
    left->next = right->next;
    if (right->next)
        right->next->prev = left;
    node_put(h, right);
    return left;
}

ag_span *ag_heap_put(ag_heap *h, ag_span *s)
{
    ag_assert(!s->is_free);
    h->used -= s->size;
    if (h->poison)
        ag_rt_mark_noaccess((void *)s->addr, s->size);
    s->is_free = true;
    if (s->prev && s->prev->is_free)
        s = absorb(h, s->prev, s, s->prev);
    if (s->next && s->next->is_free)
        s = absorb(h, s, s->next, s->next);
    bin_insert(h, s);
    if (!s->prev && !s->next)
        whole_add(h, s);
    return s;
}

void *ag_heap_detach(ag_heap *h, ag_span *s)
{
    ag_region *r = whole_out(h, s);
    void *cookie = r->cookie;
    region_unlink(h, r);
    region_spare(h, r);
    return cookie;
}

ag_span *ag_heap_adopt(ag_heap *to, ag_span *s, uint64_t size)
{
    ag_heap *from = s->heap;
    ag_assert(from != to && size <= s->size);
    ag_region *r = whole_out(from, s);
    region_unlink(from, r);
    ag_region *mine = region_new(to, r->addr, r->size, r->cookie);
    region_spare(from, r);
    return carve(to, region_enter(to, mine), size);
}

static void region_release(ag_heap *h, ag_region *r)
{
    region_unlink(h, r);
    if (h->poison)
        ag_rt_mark_access((void *)r->addr, r->size);
    h->release(h->ud, r->addr, r->size, r->cookie);
    region_spare(h, r);
}

uint64_t ag_heap_trim(ag_heap *h)
{
    uint64_t freed = 0;
    /* A region is wholly free when one free span covers it; free spans
     * that start a region are found through the bins. */
    for (uint32_t b = ag_binmap_next(h->binmap, 0); b < AG_NBINS; b = ag_binmap_next(h->binmap, b + 1u)) {
        ag_span *s = h->bins[b];
        while (s) {
            ag_span *nx = s->fnext;
            if (!s->prev && !s->next) {
                ag_region *r = whole_out(h, s);
                freed += r->size;
                region_release(h, r);
            }
            s = nx;
        }
    }
    return freed;
}

void ag_heap_destroy(ag_heap *h)
{
    /* a shared whole set outlives this heap: take its spans out */
    for (uint32_t b = 0; h->whole && h->nwhole && b < AG_NBINS; b++)
        for (ag_span *s = h->whole->bins[b], *nx; s; s = nx) {
            nx = s->wnext;
            if (s->heap == h)
                whole_del(h, s);
        }
    while (h->regions)
        region_release(h, h->regions);
    for (region_chunk *c = h->region_chunks, *nx; c; c = nx) {
        nx = c->next;
        ag_free(h->ctx, c, sizeof *c);
    }
    for (uint32_t k = 0; k < h->nchunks; k++)
        ag_free(h->ctx, h->chunks[k], AG_SPAN_CHUNK * sizeof(ag_span));
    ag_free(h->ctx, h->chunks, h->capchunks * sizeof *h->chunks);
    memset(h, 0, sizeof *h);
}

bool ag_heap_check(const ag_heap *h)
{
    uint64_t reserved = 0, used = 0, nfree = 0;
    uint32_t whole = 0, nregions = 0;
    for (const ag_region *r = h->regions; r; r = r->next) {
        reserved += r->size;
        nregions++;
    }
    for (uint32_t b = 0; b < AG_NBINS; b++) {
        bool bit = (h->binmap[b / 64u] >> (b % 64u)) & 1u;
        if (bit != (h->bins[b] != NULL))
            return false;
        for (const ag_span *s = h->bins[b]; s; s = s->fnext) {
            if (!s->is_free || s->bin != b || ag_alloc_bin(s->size / h->quantum) != b)
                return false;
            if ((s->prev && s->prev->is_free) || (s->next && s->next->is_free))
                return false;
            if (s->prev && s->prev->addr + s->prev->size != s->addr)
                return false;
            if (s->next && s->addr + s->size != s->next->addr)
                return false;
            if (s->addr < s->region->addr || s->addr + s->size > s->region->addr + s->region->size)
                return false;
            nfree += s->size;
            whole += !s->prev && !s->next;
        }
    }
    used = reserved - nfree;
    uint32_t listed = 0;
    for (uint32_t b = 0; h->whole && b < AG_NBINS; b++) {
        bool bit = (h->whole->binmap[b / 64u] >> (b % 64u)) & 1u;
        if (bit != (h->whole->bins[b] != NULL))
            return false;
        for (const ag_span *s = h->whole->bins[b]; s; s = s->wnext) {
            if (s->heap != h)
                continue;
            if (!s->is_free || s->prev || s->next || s->wbin != b)
                return false;
            listed++;
        }
    }
    return reserved == h->reserved && nregions == h->nregions && used == h->used && whole == h->nwhole &&
           (!h->whole || listed == whole);
}

bool ag_heap_has_free_region(const ag_heap *h)
{
    return h->nwhole > 0;
}
