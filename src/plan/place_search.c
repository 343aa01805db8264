/* Exact search over canonical placements: every buffer at 0 or on top of
 * a time-overlapping buffer, taken in (offset, rank) order, with per-section
 * capacity inference, restarted with several branching orders under growing
 * node limits until the lower bound is reached or the budget ends. */
#include <stdlib.h>
#include <string.h>

#include "plan/place_internal.h"

/* Searching canonical placements keeps per-level candidate lists (quadratic
 * in the buffers) and an undo log (buffers x sections): past these sizes only
 * the constructive phase runs. */
#define PL_SEARCH_MAX_BUFS 4096u
#define PL_SEARCH_MAX_CELLS (16u * 1024u * 1024u)

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
    if (++s->nodes > s->node_limit || ((s->nodes & 1023u) == 0 && ag_pl_now() > s->p->deadline)) {
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
    ag_pl_make_order(p, kind);
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
ag_status ag_pl_search(pl *p, uint64_t lb, bool *proved)
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
                    ag_pl_keep(p, s.found);
                } else if (r == 0) {
                    lo = cap + 1;
                } else {
                    any_cut = true;
                }
                if (p->best_arena <= lb || ag_pl_now() >= p->deadline)
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

