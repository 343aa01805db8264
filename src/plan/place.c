/* Offset placement.  Best fit in several orders gives a first placement: a
 * tree over the steps keeps merged unions of the placed byte spans, so a pass
 * costs O(n log n) plus the gaps it reads, not the overlapping pairs.  Above
 * the lower bound, a search over canonical placements (place_search.c) tries
 * to close the gap within the effort budget. */
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

/* Block classes of the set pool: class c holds 2^c spans. */
#define PL_NO_BLOCK UINT32_MAX
/* Tree fanout: fewer levels mean fewer sets touched per buffer. */
#define PL_FANOUT_BITS 3
#define PL_FANOUT (1u << PL_FANOUT_BITS)
#define PL_MAX_DEPTH ((32 + PL_FANOUT_BITS - 1) / PL_FANOUT_BITS)
/* Sets one query reads: per level, cov of at most 2 overlapped nodes and
 * cov and all of at most 2 (FANOUT - 1) covered ones. */
#define PL_MAX_SETS ((PL_MAX_DEPTH + 1) * (2 + 4 * (PL_FANOUT - 1)))

/* Moves set s into a block of twice its capacity. */
static ag_status pl_set_grow(pl *p, pl_set *s)
{
    if (s->cap >= UINT32_C(1) << 31)
        return AG_OOM(p->ctx);
    uint32_t cap = s->cap ? s->cap * 2 : 1, c = 0;
    while ((1u << c) < cap)
        c++;
    uint32_t at;
    if (p->pool_free[c] != PL_NO_BLOCK) {
        at = p->pool_free[c];
        p->pool_free[c] = (uint32_t)p->pool[at].off;
    } else {
        if (p->pool_len + cap > UINT32_MAX)
            return AG_OOM(p->ctx);
        if (p->pool_len + cap > p->pool_cap) {
            size_t ncap = p->pool_cap ? p->pool_cap * 2 : 1024;
            while (ncap < p->pool_len + cap)
                ncap *= 2;
            pl_span *np = ag_realloc(p->ctx, p->pool, p->pool_cap * sizeof *np, ncap * sizeof *np);
            if (!np)
                return AG_OOM(p->ctx);
            p->pool = np;
            p->pool_cap = ncap;
        }
        at = (uint32_t)p->pool_len;
        p->pool_len += cap;
    }
    if (s->len)
        memcpy(p->pool + at, p->pool + s->at, s->len * sizeof *p->pool);
    if (s->cap) {
        uint32_t oc = c - 1;
        p->pool[s->at].off = p->pool_free[oc];
        p->pool_free[oc] = s->at;
    }
    s->at = at;
    s->cap = cap;
    return AG_OK;
}

/* Adds [off, end) to the union kept in s; touching intervals merge. */
static ag_status pl_set_add(pl *p, pl_set *s, uint64_t off, uint64_t end)
{
    pl_span *a = p->pool + s->at;
    uint32_t lo = 0, hi = s->len;
    while (lo < hi) { /* first interval that ends at or after off */
        uint32_t mid = lo + (hi - lo) / 2;
        if (a[mid].end < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t j = lo;
    while (j < s->len && a[j].off <= end) {
        off = a[j].off < off ? a[j].off : off;
        end = a[j].end > end ? a[j].end : end;
        j++;
    }
    if (j > lo) {
        a[lo].off = off;
        a[lo].end = end;
        if (j > lo + 1) {
            memmove(a + lo + 1, a + j, (s->len - j) * sizeof *a);
            s->len -= j - lo - 1;
        }
        return AG_OK;
    }
    if (s->len == s->cap) {
        ag_status st = pl_set_grow(p, s);
        if (st != AG_OK)
            return st;
        a = p->pool + s->at;
    }
    memmove(a + lo + 1, a + lo, (s->len - lo) * sizeof *a);
    a[lo].off = off;
    a[lo].end = end;
    s->len++;
    return AG_OK;
}

/* Node (lv, i) of the tree covers steps [i * w, (i + 1) * w) with
 * w = PL_FANOUT^(depth - lv), clipped to the steps there are. */
static uint64_t pl_width(const pl *p, uint32_t lv)
{
    return (uint64_t)1 << (PL_FANOUT_BITS * (p->depth - lv));
}

/* Records span [off, end) of a buffer alive over steps [ta, tb) below node
 * (lv, i), which it overlaps without covering: in cov of the nodes it
 * covers, in all of their proper ancestors. */
static ag_status pl_insert(pl *p, uint32_t lv, uint32_t i, uint32_t ta, uint32_t tb, uint64_t off, uint64_t end)
{
    ag_status st = pl_set_add(p, &p->node[p->lvbase[lv] + i].all, off, end);
    if (st != AG_OK)
        return st;
    uint64_t cw = pl_width(p, lv + 1), nl = i * pl_width(p, lv);
    uint32_t c0 = (uint32_t)((ta > nl ? ta : nl) / cw);
    uint32_t c1 = (uint32_t)((tb - 1) / cw); /* clamped to this node's children */
    if (c1 >= (nl / cw) + PL_FANOUT)
        c1 = (uint32_t)(nl / cw) + PL_FANOUT - 1;
    for (uint32_t c = c0; c <= c1 && st == AG_OK; c++) {
        uint64_t cl = c * cw, cr = cl + cw < p->npts ? cl + cw : p->npts;
        if (ta <= cl && cr <= tb)
            st = pl_set_add(p, &p->node[p->lvbase[lv + 1] + c].cov, off, end);
        else
            st = pl_insert(p, lv + 1, c, ta, tb, off, end);
    }
    return st;
}

typedef struct pl_query {
    const pl_span *at[PL_MAX_SETS], *end[PL_MAX_SETS];
    uint32_t k;
} pl_query;

static void pl_query_push(pl_query *q, const pl *p, const pl_set *s)
{
    if (s->len) {
        q->at[q->k] = p->pool + s->at;
        q->end[q->k] = p->pool + s->at + s->len;
        q->k++;
    }
}

/* Collects below node (lv, i), which [ta, tb) overlaps without covering, the
 * sets holding every placed buffer alive at some step of [ta, tb): cov of the
 * nodes that overlap it, cov and all of those it covers. */
static void pl_gather(const pl *p, pl_query *q, uint32_t lv, uint32_t i, uint32_t ta, uint32_t tb)
{
    pl_query_push(q, p, &p->node[p->lvbase[lv] + i].cov);
    uint64_t cw = pl_width(p, lv + 1), nl = i * pl_width(p, lv);
    uint32_t c0 = (uint32_t)((ta > nl ? ta : nl) / cw);
    uint32_t c1 = (uint32_t)((tb - 1) / cw);
    if (c1 >= (nl / cw) + PL_FANOUT)
        c1 = (uint32_t)(nl / cw) + PL_FANOUT - 1;
    for (uint32_t c = c0; c <= c1; c++) {
        uint64_t cl = c * cw, cr = cl + cw < p->npts ? cl + cw : p->npts;
        if (ta <= cl && cr <= tb) {
            pl_query_push(q, p, &p->node[p->lvbase[lv + 1] + c].cov);
            pl_query_push(q, p, &p->node[p->lvbase[lv + 1] + c].all);
        } else {
            pl_gather(p, q, lv + 1, c, ta, tb);
        }
    }
}

typedef struct pl_head {
    uint64_t off; /* offset of the set's next span */
    uint32_t set;
} pl_head;

/* Sift-down in a min-heap of set heads keyed by offset. */
static void pl_heap_down(pl_head *h, uint32_t m, uint32_t i)
{
    pl_head x = h[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= m)
            break;
        if (c + 1 < m && h[c + 1].off < h[c].off)
            c++;
        if (h[c].off >= x.off)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

typedef struct pl_scan {
    uint64_t size, cur, best_off, best_gap;
} pl_scan;

static inline void pl_scan_span(pl_scan *sc, const pl_span *x)
{
    if (x->off > sc->cur) {
        uint64_t gap = x->off - sc->cur;
        if (gap >= sc->size && gap < sc->best_gap) {
            sc->best_gap = gap;
            sc->best_off = sc->cur;
        }
    }
    sc->cur = x->end > sc->cur ? x->end : sc->cur;
}

/* Smallest gap of at least size below the top of the union of the gathered
 * sets (lowest offset among equal gaps), else the top.  The spans are
 * visited in offset order by merging the sets. */
static uint64_t pl_fit(pl_query *q, uint64_t size)
{
    pl_scan sc = {size, 0, UINT64_MAX, UINT64_MAX};
    if (q->k == 1) {
        for (const pl_span *x = q->at[0]; x < q->end[0]; x++)
            pl_scan_span(&sc, x);
    } else if (q->k == 2) {
        const pl_span *a = q->at[0], *ae = q->end[0], *b = q->at[1], *be = q->end[1];
        while (a < ae && b < be)
            pl_scan_span(&sc, a->off <= b->off ? a++ : b++);
        for (; a < ae; a++)
            pl_scan_span(&sc, a);
        for (; b < be; b++)
            pl_scan_span(&sc, b);
    } else if (q->k > 2) {
        pl_head h[PL_MAX_SETS];
        uint32_t m = q->k;
        for (uint32_t i = 0; i < m; i++) {
            h[i].off = q->at[i]->off;
            h[i].set = i;
        }
        for (uint32_t i = m / 2; i-- > 0;)
            pl_heap_down(h, m, i);
        while (m > 0) {
            uint32_t s = h[0].set;
            pl_scan_span(&sc, q->at[s]);
            if (++q->at[s] == q->end[s])
                h[0] = h[--m];
            else
                h[0].off = q->at[s]->off;
            pl_heap_down(h, m, 0);
        }
    }
    return sc.best_off == UINT64_MAX ? sc.cur : sc.best_off;
}

/* Best-fit placement of the buffers in p->order: each goes into the
 * smallest gap left by the placed buffers alive with it, else on top. */
static ag_status pl_best_fit(pl *p, uint64_t *arena_out)
{
    for (uint32_t v = 0; v < p->nnodes; v++) {
        p->node[v].cov.len = 0;
        p->node[v].all.len = 0;
    }
    /* The buffers in order, packed (p->keys is free here): k1 the size, k2
     * the step range, later the offset; sequential reads instead of random
     * ones on the way. */
    for (uint32_t t = 0; t < p->n; t++) {
        uint32_t b = p->order[t];
        p->keys[t].k1 = p->sz[b];
        p->keys[t].k2 = (uint64_t)p->tfirst[b] << 32 | p->tend[b];
        p->keys[t].idx = b;
    }
    uint64_t arena = 0;
    pl_query q;
    for (uint32_t t = 0; t < p->n; t++) {
        pl_key *x = &p->keys[t];
        uint64_t size = x->k1;
        if (size == 0) {
            x->k2 = 0;
            continue;
        }
        uint32_t ta = (uint32_t)(x->k2 >> 32), tb = (uint32_t)x->k2;
        bool whole = ta == 0 && tb == p->npts;
        q.k = 0;
        if (whole) { /* covers the root */
            pl_query_push(&q, p, &p->node[0].cov);
            pl_query_push(&q, p, &p->node[0].all);
        } else {
            pl_gather(p, &q, 0, 0, ta, tb);
        }
        uint64_t off = pl_fit(&q, size);
        x->k2 = off;
        uint64_t top = off + size;
        arena = top > arena ? top : arena;
        ag_status st = whole ? pl_set_add(p, &p->node[0].cov, off, top) : pl_insert(p, 0, 0, ta, tb, off, top);
        if (st != AG_OK)
            return st;
    }
    for (uint32_t t = 0; t < p->n; t++)
        p->off[p->keys[t].idx] = p->keys[t].k2;
    *arena_out = arena;
    return AG_OK;
}

/* Step indices: the distinct lowers, ascending; a buffer covers those in
 * [lower, upper).  Two buffers overlap in time exactly when they share one
 * (the later start lies in the earlier lifetime).  Uses p->off as scratch. */
static void pl_steps(pl *p)
{
    uint64_t *pts = p->off;
    uint32_t m = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        uint64_t l = p->bufs[p->keys[i].idx].lower;
        if (m == 0 || pts[m - 1] != l)
            pts[m++] = l;
        p->tfirst[p->keys[i].idx] = m - 1;
    }
    p->npts = m;
    for (uint32_t i = 0; i < p->n; i++) {
        uint64_t u = p->bufs[i].upper;
        uint32_t lo = p->tfirst[i] + 1, hi = m;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (pts[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        p->tend[i] = lo;
    }
    p->depth = 0;
    while (p->depth < PL_MAX_DEPTH && ((uint64_t)1 << (PL_FANOUT_BITS * p->depth)) < m)
        p->depth++;
    uint32_t nodes = 0;
    for (uint32_t lv = 0; lv <= p->depth; lv++) {
        uint64_t w = pl_width(p, lv);
        p->lvbase[lv] = nodes;
        nodes += (uint32_t)((m + w - 1) / w);
    }
    p->nnodes = nodes ? nodes : 1;
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
    ag_free(ctx, p->tfirst, n * sizeof *p->tfirst);
    ag_free(ctx, p->tend, n * sizeof *p->tend);
    ag_free(ctx, p->node, p->nnodes * sizeof *p->node);
    ag_free(ctx, p->pool, p->pool_cap * sizeof *p->pool);
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
    for (int c = 0; c < 32; c++)
        p.pool_free[c] = PL_NO_BLOCK;
    ag_status st = AG_OK;
    uint64_t lb = 0;
    bool proved = false;
    size_t nn = n ? n : 1; /* every array holds at least one element */
    p.sz = ag_calloc(ctx, n ? n : 1, sizeof *p.sz);
    p.tfirst = ag_calloc(ctx, nn, sizeof *p.tfirst);
    p.tend = ag_calloc(ctx, nn, sizeof *p.tend);
    p.keys = ag_calloc(ctx, n ? n : 1, sizeof *p.keys);
    p.order = ag_calloc(ctx, n ? n : 1, sizeof *p.order);
    p.off = ag_calloc(ctx, n ? n : 1, sizeof *p.off);
    p.best = ag_calloc(ctx, n ? n : 1, sizeof *p.best);
    if (!p.sz || !p.tfirst || !p.tend || !p.keys || !p.order || !p.off || !p.best) {
        st = AG_OOM(ctx);
        goto out;
    }
    for (uint32_t i = 0; i < n; i++)
        pl_round(bufs[i].size, o.align, &p.sz[i]);
    st = pl_bound(ctx, bufs, n, o.align, &lb);
    if (st != AG_OK)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        p.keys[i].k1 = UINT64_MAX - bufs[i].lower;
        p.keys[i].k2 = 0;
        p.keys[i].idx = i;
    }
    qsort(p.keys, n, sizeof *p.keys, pl_key_desc);
    pl_steps(&p);
    p.node = ag_calloc(ctx, p.nnodes, sizeof *p.node);
    if (!p.node) {
        st = AG_OOM(ctx);
        goto out;
    }
    p.best_arena = UINT64_MAX;
    /* Large inputs: start order (the weakest on activation-like traces) is
     * left out to stay within a few seconds per million buffers. */
    int orders = baseline ? 1 : n > 200000 ? 3 : PL_ORDER_COUNT;
    static const int kinds[PL_ORDER_COUNT] = {PL_ORDER_SIZE, PL_ORDER_AREA, PL_ORDER_LENGTH, PL_ORDER_START};
    for (int k = 0; k < orders && p.best_arena > lb; k++) {
        uint64_t arena;
        ag_pl_make_order(&p, kinds[k]);
        st = pl_best_fit(&p, &arena);
        if (st != AG_OK)
            goto out;
        ag_pl_keep(&p, arena);
    }
    if (n == 0)
        p.best_arena = 0;
    if (p.best_arena > lb && (o.effort_seconds > 0 || o.effort_nodes > 0) && !baseline) {
        /* a node budget alone keeps the result independent of the clock */
        p.deadline = o.effort_seconds > 0 ? t0 + o.effort_seconds : 1e300;
        p.node_budget = o.effort_nodes;
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
