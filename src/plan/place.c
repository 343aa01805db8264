/* Offset placement.  A portfolio of best-fit constructive orders gives a
 * first placement in O(n log n + overlaps); when it is above the lower bound,
 * a depth-first search over canonical placements (every buffer at 0 or on top
 * of a time-overlapping buffer, taken in (offset, rank) order) with per-section
 * capacity inference tries to close the gap within the effort budget. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan/place_internal.h"

double ag_pl_now(void)
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


static int pl_key_desc(const void *pa, const void *pb)
{
    const pl_key *a = pa, *b = pb;
    if (a->k1 != b->k1)
        return a->k1 > b->k1 ? -1 : 1;
    if (a->k2 != b->k2)
        return a->k2 > b->k2 ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}


static int pl_span_cmp(const void *pa, const void *pb)
{
    const pl_span *a = pa, *b = pb;
    if (a->off != b->off)
        return a->off < b->off ? -1 : 1;
    return a->end < b->end ? -1 : a->end > b->end;
}


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


void ag_pl_make_order(pl *p, int kind)
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

void ag_pl_keep(pl *p, uint64_t arena)
{
    if (arena < p->best_arena) {
        p->best_arena = arena;
        memcpy(p->best, p->off, sizeof *p->best * p->n);
    }
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
    double t0 = ag_pl_now();
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
    p.capacity = o.capacity;
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
        ag_pl_make_order(&p, kinds[k]);
        ag_pl_keep(&p, pl_best_fit(&p));
    }
    if (n == 0)
        p.best_arena = 0;
    if (p.best_arena > lb && o.effort_seconds > 0 && !baseline) {
        p.deadline = t0 + o.effort_seconds;
        st = ag_pl_search(&p, lb, &proved);
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
        r.seconds = ag_pl_now() - t0;
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
