/* Offset placement.  A portfolio of best-fit constructive orders gives a
 * first placement in O(n log n + overlaps); when it is above the lower bound,
 * a depth-first search over canonical placements (every buffer at 0 or on top
 * of a time-overlapping buffer, taken in (offset, rank) order) with per-section
 * capacity inference tries to close the gap within the effort budget. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aliasguard/place.h"
#include "core/internal.h"

/* Searching canonical placements keeps per-level candidate lists (quadratic
 * in the buffers) and an undo log (buffers x sections): past these sizes only
 * the constructive phase runs. */
#define PL_SEARCH_MAX_BUFS 4096u
#define PL_SEARCH_MAX_CELLS (16u * 1024u * 1024u)

static double pl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

ag_place_opts ag_place_defaults(void)
{
    ag_place_opts o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.align = 1;
    o.capacity = 0;
    o.effort_seconds = 1.0;
    return o;
}

/* Size rounded up to align; false on overflow. */
static bool pl_round(uint64_t size, uint64_t align, uint64_t *out)
{
    uint64_t r = size % align;
    if (r == 0) {
        *out = size;
        return true;
    }
    if (size > UINT64_MAX - (align - r))
        return false;
    *out = size + (align - r);
    return true;
}

static uint64_t pl_sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ---------------------------------------------------------------- bound */

typedef struct pl_event {
    uint64_t t;
    uint64_t size;
} pl_event;

static int pl_event_cmp(const void *pa, const void *pb)
{
    const pl_event *a = pa, *b = pb;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    return a->size < b->size ? -1 : a->size > b->size;
}

/* Sums can pass 2^64 in the public bound (unvalidated sizes): 128-bit. */
__extension__ typedef unsigned __int128 pl_u128;

/* Sweep over starts and ends; at equal steps ends come first (half-open).
 * Sizes that do not round within 64 bits count as 2^64. */
static ag_status pl_bound(ag_ctx *ctx, const ag_buf *bufs, uint32_t n, uint64_t align, uint64_t *out)
{
    *out = 0;
    if (n == 0)
        return AG_OK;
    pl_event *ev = ag_calloc(ctx, (size_t)n * 2, sizeof *ev);
    if (!ev)
        return AG_OOM(ctx);
    pl_event *st = ev, *en = ev + n;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t s;
        if (!pl_round(bufs[i].size, align, &s))
            s = UINT64_MAX;
        st[i].t = bufs[i].lower;
        st[i].size = s;
        en[i].t = bufs[i].upper;
        en[i].size = s;
    }
    qsort(st, n, sizeof *st, pl_event_cmp);
    qsort(en, n, sizeof *en, pl_event_cmp);
    pl_u128 live = 0, best = 0;
    uint32_t j = 0;
    for (uint32_t i = 0; i < n; i++) {
        while (j < n && en[j].t <= st[i].t) {
            live -= en[j].size;
            j++;
        }
        live += st[i].size;
        best = live > best ? live : best;
    }
    ag_free(ctx, ev, (size_t)n * 2 * sizeof *ev);
    *out = best > UINT64_MAX ? UINT64_MAX : (uint64_t)best;
    return AG_OK;
}

uint64_t ag_place_lower_bound(const ag_buf *bufs, uint32_t n, uint64_t align)
{
    if (align == 0)
        align = 1;
    ag_ctx *ctx = ag_ctx_create(NULL);
    uint64_t lb = 0;
    if (ctx && pl_bound(ctx, bufs, n, align, &lb) == AG_OK) {
        ag_ctx_destroy(ctx);
        return lb;
    }
    ag_ctx_destroy(ctx);
    /* No memory for the sweep: the maximum is reached at some buffer's start. */
    for (uint32_t i = 0; i < n; i++) {
        uint64_t live = 0;
        for (uint32_t j = 0; j < n; j++) {
            if (bufs[j].lower <= bufs[i].lower && bufs[j].upper > bufs[i].lower) {
                uint64_t s;
                live = pl_round(bufs[j].size, align, &s) ? pl_sat_add(live, s) : UINT64_MAX;
            }
        }
        lb = live > lb ? live : lb;
    }
    return lb;
}

/* ------------------------------------------------------- constructive */

typedef struct pl_key {
    uint64_t k1, k2;
    uint32_t idx;
} pl_key;

static int pl_key_desc(const void *pa, const void *pb)
{
    const pl_key *a = pa, *b = pb;
    if (a->k1 != b->k1)
        return a->k1 > b->k1 ? -1 : 1;
    if (a->k2 != b->k2)
        return a->k2 > b->k2 ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

typedef struct pl_span {
    uint64_t off, end;
} pl_span;

static int pl_span_cmp(const void *pa, const void *pb)
{
    const pl_span *a = pa, *b = pb;
    if (a->off != b->off)
        return a->off < b->off ? -1 : 1;
    return a->end < b->end ? -1 : a->end > b->end;
}

typedef struct pl {
    ag_ctx *ctx;
    const ag_buf *bufs;
    uint32_t n;
    uint64_t align;
    uint64_t *sz;      /* aligned sizes */
    /* best-fit machinery */
    uint32_t *by_lower; /* buffer ids sorted by lower */
    uint32_t *pos;      /* position of a buffer in by_lower */
    uint64_t *tree;     /* max upper (+1; 0 = nothing placed) over by_lower, 2*leaves */
    uint32_t leaves;
    pl_span *spans;     /* overlap scratch (n) */
    pl_key *keys;       /* order scratch (n) */
    uint32_t *order;    /* current order (n) */
    uint64_t *off;      /* scratch offsets (n) */
    uint64_t *best;     /* best offsets so far (n) */
    uint64_t best_arena;
    double deadline;
} pl;

/* Collects placed buffers in by_lower[0, r) whose upper exceeds l. */
static void pl_collect(pl *p, uint32_t node, uint32_t nl, uint32_t nr, uint32_t r, uint64_t l, uint32_t *k)
{
    if (nl >= r || p->tree[node] <= l + 1 || p->tree[node] == 0)
        return;
    if (nr - nl == 1) {
        uint32_t b = p->by_lower[nl];
        p->spans[*k].off = p->off[b];
        p->spans[*k].end = p->off[b] + p->sz[b];
        (*k)++;
        return;
    }
    uint32_t mid = nl + (nr - nl) / 2;
    pl_collect(p, 2 * node, nl, mid, r, l, k);
    pl_collect(p, 2 * node + 1, mid, nr, r, l, k);
}

/* Best-fit placement of the buffers in p->order; returns the arena. */
static uint64_t pl_best_fit(pl *p)
{
    memset(p->tree, 0, sizeof *p->tree * 2 * p->leaves);
    uint64_t arena = 0;
    for (uint32_t t = 0; t < p->n; t++) {
        uint32_t b = p->order[t];
        const ag_buf *x = &p->bufs[b];
        if (p->sz[b] == 0) {
            p->off[b] = 0;
            continue;
        }
        /* placed buffers with lower < x->upper: by_lower prefix */
        uint32_t lo = 0, hi = p->n;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (p->bufs[p->by_lower[mid]].lower < x->upper)
                lo = mid + 1;
            else
                hi = mid;
        }
        uint32_t k = 0;
        pl_collect(p, 1, 0, p->leaves, lo, x->lower, &k);
        if (k > 1)
            qsort(p->spans, k, sizeof *p->spans, pl_span_cmp);
        uint64_t cur = 0, best_off = UINT64_MAX, best_gap = UINT64_MAX;
        for (uint32_t i = 0; i < k; i++) {
            if (p->spans[i].off > cur) {
                uint64_t gap = p->spans[i].off - cur;
                if (gap >= p->sz[b] && gap < best_gap) {
                    best_gap = gap;
                    best_off = cur;
                }
            }
            cur = p->spans[i].end > cur ? p->spans[i].end : cur;
        }
        if (best_off == UINT64_MAX)
            best_off = cur;
        p->off[b] = best_off;
        uint64_t top = best_off + p->sz[b];
        arena = top > arena ? top : arena;
        uint32_t node = p->leaves + p->pos[b];
        p->tree[node] = x->upper + 1;
        for (node /= 2; node >= 1; node /= 2) {
            uint64_t m = p->tree[2 * node] > p->tree[2 * node + 1] ? p->tree[2 * node] : p->tree[2 * node + 1];
            if (p->tree[node] == m)
                break;
            p->tree[node] = m;
        }
    }
    return arena;
}

enum { PL_ORDER_SIZE, PL_ORDER_LENGTH, PL_ORDER_AREA, PL_ORDER_START, PL_ORDER_COUNT };

static void pl_make_order(pl *p, int kind)
{
    for (uint32_t i = 0; i < p->n; i++) {
        const ag_buf *x = &p->bufs[i];
        uint64_t len = x->upper - x->lower;
        pl_key *k = &p->keys[i];
        k->idx = i;
        switch (kind) {
        case PL_ORDER_SIZE:
            k->k1 = p->sz[i];
            k->k2 = len;
            break;
        case PL_ORDER_LENGTH:
            k->k1 = len;
            k->k2 = p->sz[i];
            break;
        case PL_ORDER_AREA: {
            /* size x length can overflow: compare in floating point, scaled */
            double a = (double)p->sz[i] * (double)len;
            k->k1 = a >= 1.8e19 ? UINT64_MAX : (uint64_t)a;
            k->k2 = p->sz[i];
            break;
        }
        default: /* earliest start first, larger first on ties */
            k->k1 = UINT64_MAX - x->lower;
            k->k2 = p->sz[i];
            break;
        }
    }
    qsort(p->keys, p->n, sizeof *p->keys, pl_key_desc);
    for (uint32_t i = 0; i < p->n; i++)
        p->order[i] = p->keys[i].idx;
}

static void pl_keep(pl *p, uint64_t arena)
{
    if (arena < p->best_arena) {
        p->best_arena = arena;
        memcpy(p->best, p->off, sizeof *p->best * p->n);
    }
}

/* ------------------------------------------------------------- search */

/* The state is a floor per time section (bytes below it are decided).  A
 * node takes the lowest section that still has unplaced buffers and either
 * puts one of them exactly on that floor (only possible when the buffer's
 * floor over its whole lifetime is that value), or declares that nothing
 * starts there and raises the section's floor to the next level a buffer
 * could start at.  Every gravity-packed placement is reached by exactly one
 * path, so exhausting the tree proves a target infeasible. */
typedef struct pl_search {
    pl *p;
    uint32_t m;         /* items: non-empty buffers, by rank */
    uint32_t *buf;      /* item -> buffer */
    uint64_t *sz;       /* item sizes */
    uint32_t *sl, *su;  /* item section ranges */
    uint32_t nsec;
    uint32_t *alive_at; /* CSR: items alive in each section, by rank */
    uint32_t *alive;
    uint64_t *floor_;   /* per section */
    uint64_t *rem;      /* per section: bytes of unplaced items alive */
    uint64_t *minc;     /* per section scratch: lowest start of an unplaced item */
    uint64_t *cval;     /* per item scratch: lowest start given the floors */
    uint64_t *undo;     /* saved floors */
    size_t undo_top;
    uint64_t *ioff;     /* item offsets */
    bool *placed;
    uint32_t nplaced;
    uint64_t cap;       /* target: arena <= cap */
    uint64_t found;     /* arena of the solution found */
    uint64_t nodes;
    uint64_t node_limit;
    bool timed_out;
} pl_search;

static uint64_t pl_item_floor(const pl_search *s, uint32_t i)
{
    uint64_t c = 0;
    for (uint32_t q = s->sl[i]; q < s->su[i]; q++)
        c = s->floor_[q] > c ? s->floor_[q] : c;
    return c;
}

/* Returns 1 when a placement within cap was found, 0 when the subtree holds
 * none, -1 when the budget ran out. */
static int pl_dfs(pl_search *s)
{
    if (++s->nodes > s->node_limit || ((s->nodes & 1023u) == 0 && pl_now() > s->p->deadline)) {
        s->timed_out = true;
        return -1;
    }
    if (s->nplaced == s->m) {
        uint64_t arena = 0;
        for (uint32_t i = 0; i < s->m; i++) {
            uint64_t top = s->ioff[i] + s->sz[i];
            arena = top > arena ? top : arena;
        }
        s->found = arena;
        return 1;
    }
    /* inference: every unplaced item starts at or above its floor; each
     * section's unplaced bytes must fit between the lowest start and cap */
    uint32_t low = UINT32_MAX;
    for (uint32_t q = 0; q < s->nsec; q++) {
        s->minc[q] = UINT64_MAX;
        /* among the lowest sections, the one closest to the target first */
        if (s->rem[q] != 0 &&
            (low == UINT32_MAX || s->floor_[q] < s->floor_[low] ||
             (s->floor_[q] == s->floor_[low] && s->rem[q] > s->rem[low])))
            low = q;
    }
    for (uint32_t i = 0; i < s->m; i++) {
        if (s->placed[i])
            continue;
        uint64_t c = pl_item_floor(s, i);
        s->cval[i] = c;
        if (c > s->cap || s->sz[i] > s->cap - c)
            return 0;
        for (uint32_t q = s->sl[i]; q < s->su[i]; q++)
            s->minc[q] = c < s->minc[q] ? c : s->minc[q];
    }
    for (uint32_t q = 0; q < s->nsec; q++)
        if (s->rem[q] != 0 && s->rem[q] > s->cap - s->minc[q])
            return 0;
    uint64_t f = s->floor_[low];
    /* The next level anything can start at in the lowest section: an item
     * of it at its own floor, or on top of an item placed later, which is
     * not alive there (it would be the lowest) and so ends at or above its
     * floor plus its size. */
    uint64_t next = UINT64_MAX;
    uint32_t span_lo = UINT32_MAX, span_hi = 0; /* sections of the unplaced items of low */
    for (uint32_t k = s->alive_at[low]; k < s->alive_at[low + 1]; k++) {
        uint32_t i = s->alive[k];
        if (s->placed[i])
            continue;
        span_lo = s->sl[i] < span_lo ? s->sl[i] : span_lo;
        span_hi = s->su[i] > span_hi ? s->su[i] : span_hi;
        if (s->cval[i] > f && s->cval[i] < next)
            next = s->cval[i];
    }
    for (uint32_t i = 0; i < s->m; i++) {
        if (s->placed[i] || s->su[i] <= span_lo || s->sl[i] >= span_hi || (s->sl[i] <= low && low < s->su[i]))
            continue;
        uint64_t v = s->cval[i] + s->sz[i];
        next = v < next ? v : next;
    }
    int r = 0;
    for (uint32_t k = s->alive_at[low]; k < s->alive_at[low + 1] && r == 0; k++) {
        uint32_t i = s->alive[k];
        if (s->placed[i] || pl_item_floor(s, i) != f)
            continue;
        uint64_t top = f + s->sz[i];
        size_t u0 = s->undo_top;
        for (uint32_t q = s->sl[i]; q < s->su[i]; q++) {
            s->undo[s->undo_top++] = s->floor_[q];
            s->floor_[q] = top;
            s->rem[q] -= s->sz[i];
        }
        s->placed[i] = true;
        s->nplaced++;
        s->ioff[i] = f;
        r = pl_dfs(s);
        s->placed[i] = false;
        s->nplaced--;
        s->undo_top = u0;
        for (uint32_t q = s->sl[i]; q < s->su[i]; q++) {
            s->floor_[q] = s->undo[u0 + (q - s->sl[i])];
            s->rem[q] += s->sz[i];
        }
    }
    if (r != 0)
        return r;
    /* nothing starts at f in the lowest section */
    if (next > s->cap || s->rem[low] > s->cap - next)
        return 0;
    s->floor_[low] = next;
    r = pl_dfs(s);
    s->floor_[low] = f;
    return r;
}

static int pl_u64_cmp(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return a < b ? -1 : a > b;
}

static uint32_t pl_find_time(const uint64_t *t, uint32_t nt, uint64_t v)
{
    uint32_t lo = 0, hi = nt;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Lays the items out in the order kind (rank = branching order inside a
 * section) with their section ranges and the per-section alive lists. */
static void pl_search_items(pl_search *s, int kind, const uint64_t *times, uint32_t nt)
{
    pl *p = s->p;
    pl_make_order(p, kind);
    uint32_t m = 0;
    for (uint32_t k = 0; k < p->n; k++) {
        uint32_t b = p->order[k];
        if (p->sz[b] == 0)
            continue;
        s->buf[m] = b;
        s->sz[m] = p->sz[b];
        s->sl[m] = pl_find_time(times, nt, p->bufs[b].lower);
        s->su[m] = pl_find_time(times, nt, p->bufs[b].upper);
        m++;
    }
    memset(s->alive_at, 0, ((size_t)s->nsec + 1) * sizeof *s->alive_at);
    for (uint32_t i = 0; i < s->m; i++)
        for (uint32_t q = s->sl[i]; q < s->su[i]; q++)
            s->alive_at[q + 1]++;
    for (uint32_t q = 0; q < s->nsec; q++)
        s->alive_at[q + 1] += s->alive_at[q];
    for (uint32_t i = 0; i < s->m; i++)
        for (uint32_t q = s->sl[i]; q < s->su[i]; q++)
            s->alive[s->alive_at[q]++] = i;
    for (uint32_t q = s->nsec; q > 0; q--)
        s->alive_at[q] = s->alive_at[q - 1];
    s->alive_at[0] = 0;
}

/* One bounded search for arena <= cap: 1 found, 0 proved impossible, -1 out
 * of nodes or time. */
static int pl_search_try(pl_search *s, uint64_t cap, uint64_t node_limit)
{
    for (uint32_t q = 0; q < s->nsec; q++) {
        s->floor_[q] = 0;
        s->rem[q] = 0;
    }
    for (uint32_t i = 0; i < s->m; i++) {
        s->placed[i] = false;
        for (uint32_t q = s->sl[i]; q < s->su[i]; q++)
            s->rem[q] += s->sz[i];
    }
    s->cap = cap;
    s->found = 0;
    s->timed_out = false;
    s->undo_top = 0;
    s->nplaced = 0;
    s->nodes = 0;
    s->node_limit = node_limit;
    return pl_dfs(s);
}

/* Restarts the canonical search with several branching orders and doubling
 * node limits (the search is heavy-tailed: one order often finds in a few
 * thousand nodes what another misses in millions).  Each round tries one
 * byte below the best arena (a better fallback), then the bound itself, until the bound is
 * reached, the best is proved optimal, or the budget ends.  *proved is set
 * when some try exhausted the target just below the best arena. */
static ag_status pl_search_run(pl *p, uint64_t lb, bool *proved)
{
    ag_ctx *ctx = p->ctx;
    pl_search s;
    memset(&s, 0, sizeof s);
    s.p = p;
    for (uint32_t i = 0; i < p->n; i++)
        s.m += p->sz[i] != 0;
    if (s.m == 0 || s.m > PL_SEARCH_MAX_BUFS)
        return AG_OK;
    ag_status st = AG_OK;
    size_t nt_alloc = (size_t)s.m * 2;
    size_t cells = 0;
    uint64_t *times = ag_calloc(ctx, nt_alloc, sizeof *times);
    s.buf = ag_calloc(ctx, s.m, sizeof *s.buf);
    s.sz = ag_calloc(ctx, s.m, sizeof *s.sz);
    s.sl = ag_calloc(ctx, s.m, sizeof *s.sl);
    s.su = ag_calloc(ctx, s.m, sizeof *s.su);
    s.ioff = ag_calloc(ctx, s.m, sizeof *s.ioff);
    s.cval = ag_calloc(ctx, s.m, sizeof *s.cval);
    s.placed = ag_calloc(ctx, s.m, sizeof *s.placed);
    if (!s.buf || !s.sz || !s.sl || !s.su || !s.ioff || !s.cval || !s.placed || !times) {
        st = AG_OOM(ctx);
        goto done;
    }
    uint32_t m = 0;
    for (uint32_t b = 0; b < p->n; b++) {
        if (p->sz[b] == 0)
            continue;
        times[2 * m] = p->bufs[b].lower;
        times[2 * m + 1] = p->bufs[b].upper;
        m++;
    }
    qsort(times, nt_alloc, sizeof *times, pl_u64_cmp);
    uint32_t nt = 0;
    for (size_t k = 0; k < nt_alloc; k++)
        if (nt == 0 || times[nt - 1] != times[k])
            times[nt++] = times[k];
    s.nsec = nt - 1;
    for (uint32_t b = 0; b < p->n; b++)
        if (p->sz[b] != 0)
            cells += pl_find_time(times, nt, p->bufs[b].upper) - pl_find_time(times, nt, p->bufs[b].lower);
    if (cells > PL_SEARCH_MAX_CELLS)
        goto done;
    s.floor_ = ag_calloc(ctx, s.nsec, sizeof *s.floor_);
    s.rem = ag_calloc(ctx, s.nsec, sizeof *s.rem);
    s.minc = ag_calloc(ctx, s.nsec, sizeof *s.minc);
    s.undo = ag_calloc(ctx, cells, sizeof *s.undo);
    s.alive = ag_calloc(ctx, cells, sizeof *s.alive);
    s.alive_at = ag_calloc(ctx, (size_t)s.nsec + 1, sizeof *s.alive_at);
    if (!s.floor_ || !s.rem || !s.minc || !s.undo || !s.alive || !s.alive_at) {
        st = AG_OOM(ctx);
        goto done;
    }
    static const int kinds[] = {PL_ORDER_SIZE, PL_ORDER_LENGTH, PL_ORDER_AREA, PL_ORDER_START};
    const int nkinds = (int)(sizeof kinds / sizeof kinds[0]);
    uint64_t lo = lb; /* every arena below lo is proved impossible */
    bool stop = false;
    for (uint64_t limit = 32u * (uint64_t)s.m + 2048; !stop; limit = limit > UINT64_MAX / 2 ? UINT64_MAX : limit * 2) {
        bool any_cut = false;
        for (int k = 0; k < nkinds && !stop; k++) {
            pl_search_items(&s, kinds[k], times, nt);
            for (int phase = 0; phase < 2 && !stop; phase++) {
                if (p->best_arena == 0 || lo > p->best_arena - 1) {
                    stop = true;
                    break;
                }
                uint64_t cap = phase == 1 ? lo : p->best_arena - 1;
                if (phase == 1 && cap == p->best_arena - 1)
                    continue; /* the same try as phase 0 */
                int r = pl_search_try(&s, cap, limit);
                if (r == 1) {
                    for (uint32_t i = 0; i < p->n; i++)
                        p->off[i] = 0;
                    for (uint32_t i = 0; i < s.m; i++)
                        p->off[s.buf[i]] = s.ioff[i];
                    pl_keep(p, s.found);
                } else if (r == 0) {
                    lo = cap + 1;
                } else {
                    any_cut = true;
                }
                if (p->best_arena <= lb || pl_now() >= p->deadline)
                    stop = true;
            }
        }
        if (!any_cut)
            stop = true;
    }
    *proved = lo > p->best_arena - 1;
done:
    ag_free(ctx, s.buf, s.m * sizeof *s.buf);
    ag_free(ctx, s.sz, s.m * sizeof *s.sz);
    ag_free(ctx, s.sl, s.m * sizeof *s.sl);
    ag_free(ctx, s.su, s.m * sizeof *s.su);
    ag_free(ctx, s.ioff, s.m * sizeof *s.ioff);
    ag_free(ctx, s.cval, s.m * sizeof *s.cval);
    ag_free(ctx, s.placed, s.m * sizeof *s.placed);
    ag_free(ctx, times, nt_alloc * sizeof *times);
    ag_free(ctx, s.floor_, s.nsec * sizeof *s.floor_);
    ag_free(ctx, s.rem, s.nsec * sizeof *s.rem);
    ag_free(ctx, s.minc, s.nsec * sizeof *s.minc);
    ag_free(ctx, s.undo, cells * sizeof *s.undo);
    ag_free(ctx, s.alive, cells * sizeof *s.alive);
    ag_free(ctx, s.alive_at, ((size_t)s.nsec + 1) * sizeof *s.alive_at);
    return st;
}

/* ------------------------------------------------------------ driver */

static void pl_free(pl *p, size_t n)
{
    ag_ctx *ctx = p->ctx;
    ag_free(ctx, p->sz, n * sizeof *p->sz);
    ag_free(ctx, p->by_lower, n * sizeof *p->by_lower);
    ag_free(ctx, p->pos, n * sizeof *p->pos);
    ag_free(ctx, p->tree, 2 * (size_t)p->leaves * sizeof *p->tree);
    ag_free(ctx, p->spans, n * sizeof *p->spans);
    ag_free(ctx, p->keys, n * sizeof *p->keys);
    ag_free(ctx, p->order, n * sizeof *p->order);
    ag_free(ctx, p->off, n * sizeof *p->off);
    ag_free(ctx, p->best, n * sizeof *p->best);
}

static ag_status pl_run(ag_ctx *ctx, ag_buf *bufs, uint32_t n, const ag_place_opts *opts, ag_place_result *res,
                        bool baseline)
{
    double t0 = pl_now();
    ag_place_opts o = ag_place_defaults();
    if (opts) {
        if (opts->size < sizeof o)
            return AG_ERR(ctx, AG_EINVAL, "ag_place: options size %zu is smaller than expected %zu", opts->size,
                          sizeof o);
        o = *opts;
    }
    if (o.align == 0)
        return AG_ERR(ctx, AG_EINVAL, "ag_place: align must be at least 1");
    if (!(o.effort_seconds >= 0))
        return AG_ERR(ctx, AG_EINVAL, "ag_place: effort must be a non-negative number of seconds");
    if (n > 0 && !bufs)
        return AG_ERR(ctx, AG_EINVAL, "ag_place: no buffer array for %u buffers", n);
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t s;
        if (bufs[i].upper <= bufs[i].lower)
            return AG_ERR(ctx, AG_EINVAL, "ag_place: buffer %u: lifetime [%llu, %llu) is empty", i,
                          (unsigned long long)bufs[i].lower, (unsigned long long)bufs[i].upper);
        if (!pl_round(bufs[i].size, o.align, &s) || s > UINT64_MAX - total)
            return AG_ERR(ctx, AG_EINVAL, "ag_place: buffer %u: size %llu overflows 64-bit offsets", i,
                          (unsigned long long)bufs[i].size);
        total += s;
    }
    pl p;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.bufs = bufs;
    p.n = n;
    p.align = o.align;
    p.leaves = 1;
    while (p.leaves < n)
        p.leaves *= 2;
    ag_status st = AG_OK;
    uint64_t lb = 0;
    bool proved = false;
    size_t nn = n ? n : 1; /* every array holds at least one element */
    p.sz = ag_calloc(ctx, n ? n : 1, sizeof *p.sz);
    p.by_lower = ag_calloc(ctx, n ? n : 1, sizeof *p.by_lower);
    p.pos = ag_calloc(ctx, n ? n : 1, sizeof *p.pos);
    p.tree = ag_calloc(ctx, 2 * (size_t)p.leaves, sizeof *p.tree);
    p.spans = ag_calloc(ctx, n ? n : 1, sizeof *p.spans);
    p.keys = ag_calloc(ctx, n ? n : 1, sizeof *p.keys);
    p.order = ag_calloc(ctx, n ? n : 1, sizeof *p.order);
    p.off = ag_calloc(ctx, n ? n : 1, sizeof *p.off);
    p.best = ag_calloc(ctx, n ? n : 1, sizeof *p.best);
    if (!p.sz || !p.by_lower || !p.pos || !p.tree || !p.spans || !p.keys || !p.order || !p.off || !p.best) {
        st = AG_OOM(ctx);
        goto out;
    }
    for (uint32_t i = 0; i < n; i++)
        pl_round(bufs[i].size, o.align, &p.sz[i]);
    st = pl_bound(ctx, bufs, n, o.align, &lb);
    if (st != AG_OK)
        goto out;
    /* by_lower: ascending lower */
    for (uint32_t i = 0; i < n; i++) {
        p.keys[i].k1 = UINT64_MAX - bufs[i].lower;
        p.keys[i].k2 = 0;
        p.keys[i].idx = i;
    }
    qsort(p.keys, n, sizeof *p.keys, pl_key_desc);
    for (uint32_t i = 0; i < n; i++) {
        p.by_lower[i] = p.keys[i].idx;
        p.pos[p.keys[i].idx] = i;
    }
    p.best_arena = UINT64_MAX;
    /* Large inputs: two orders are enough to stay within a few seconds. */
    int orders = baseline ? 1 : n > 200000 ? 2 : PL_ORDER_COUNT;
    static const int kinds[PL_ORDER_COUNT] = {PL_ORDER_SIZE, PL_ORDER_AREA, PL_ORDER_LENGTH, PL_ORDER_START};
    for (int k = 0; k < orders && p.best_arena > lb; k++) {
        pl_make_order(&p, kinds[k]);
        pl_keep(&p, pl_best_fit(&p));
    }
    if (n == 0)
        p.best_arena = 0;
    if (p.best_arena > lb && o.effort_seconds > 0 && !baseline) {
        p.deadline = t0 + o.effort_seconds;
        st = pl_search_run(&p, lb, &proved);
        if (st != AG_OK)
            goto out;
    }
    if (o.capacity != 0 && p.best_arena > o.capacity) {
        st = AG_ERR(ctx, AG_EINFEASIBLE,
                    "ag_place: best placement needs %llu bytes, capacity is %llu (lower bound %llu)%s",
                    (unsigned long long)p.best_arena, (unsigned long long)o.capacity, (unsigned long long)lb,
                    lb > o.capacity ? ": the buffers alive at one step already exceed it" : "");
    } else {
        for (uint32_t i = 0; i < n; i++)
            bufs[i].offset = p.best[i];
    }
    if (res) {
        ag_place_result r;
        memset(&r, 0, sizeof r);
        r.size = sizeof r;
        r.arena_bytes = p.best_arena;
        r.lower_bound_bytes = lb;
        r.seconds = pl_now() - t0;
        r.optimal = p.best_arena == lb || proved;
        *res = r;
    }
out:
    pl_free(&p, nn);
    return st;
}

ag_status ag_place(ag_ctx *ctx, ag_buf *bufs, uint32_t n, const ag_place_opts *opts, ag_place_result *res)
{
    return pl_run(ctx, bufs, n, opts, res, false);
}

ag_status ag_place_greedy_by_size(ag_ctx *ctx, ag_buf *bufs, uint32_t n, uint64_t align, ag_place_result *res)
{
    ag_place_opts o = ag_place_defaults();
    o.align = align;
    o.effort_seconds = 0;
    return pl_run(ctx, bufs, n, &o, res, true);
}
