/* Exact search over canonical placements: buffers are placed in increasing
 * (offset, rank) order, each at the lowest offset the buffers already placed
 * leave it, with per-section inference, dominance, symmetry and splitting at
 * free time points; the state changes by O(overlaps) per node, undone from a
 * trail.  A second scheme (fill the lowest section's floor) joins the restarts. */
#include <stdlib.h>
#include <string.h>

#include "plan/place_internal.h"

/* The search keeps the time-overlapping pairs and per-section lists: past
 * these sizes only the constructive phase runs. */
#define PL_SEARCH_MAX_BUFS 4096u
#define PL_SEARCH_MAX_CELLS (16u * 1024u * 1024u)

__extension__ typedef unsigned __int128 ps_u128;

enum { PS_MINOFF = 0, PS_PLACE = 1 };

typedef struct ps_pre {
    ps_u128 key[3];
    uint32_t item;
} ps_pre;

/* One undoable change: the old value of a field. */
typedef struct ps_undo {
    uint32_t what; /* PS_*, and for PS_MINOFF the old raiser + 1 above bit 0 */
    uint32_t idx;  /* item */
    uint64_t old;
} ps_undo;

#define PS_NONE UINT32_MAX

/* Why the search is complete (exhausting it proves a target infeasible):
 * every placement can be dropped to a gravity-packed one (each buffer at 0
 * or on top of a time-overlapping buffer) no higher, and a gravity-packed
 * placement is the result of placing its buffers in (offset, rank) order,
 * each at the top of the placed buffers it overlaps ("minoff").  Among the
 * placements within the target take one with the least sum of offsets; on
 * its path no rule below cuts:
 *  - inference: an unplaced buffer lies at or above the last offset placed
 *    and its own minoff, and those alive in one section are stacked, so a
 *    section's unplaced bytes must fit above the lowest of them;
 *  - dominance: a buffer placed at or above minoff + size of some unplaced
 *    buffer c would leave c's slot free for good (all later offsets are
 *    higher), and moving c there lowers the sum;
 *  - splitting: buffers on the two sides of a time point that no unplaced
 *    buffer crosses never meet again, so each side is searched on its own
 *    (from a fresh canonical order and a fresh rank, which only enlarges
 *    the set searched; the symmetry cut breaks ties by item index, not
 *    rank, so that ranks changing between the two items stay consistent). */
typedef struct pl_search {
    pl *p;
    uint32_t m;          /* items: the non-empty buffers */
    uint32_t nsec;       /* sections between consecutive distinct times */
    uint32_t *buf;       /* item -> buffer */
    uint64_t *sz;
    uint32_t *sl, *su;   /* section range */
    uint32_t *rank;      /* branching preference among equal offsets */
    uint32_t *ovl_at, *ovl; /* CSR: time-overlapping items */
    uint32_t *alive_at, *alive; /* CSR: items alive in each section */
    uint64_t *minoff;    /* lowest offset the placed items leave an item */
    uint32_t *unov;      /* unplaced items overlapping an item */
    uint32_t *raiser;    /* the placed item whose top is an item's minoff */
    uint32_t *cls;       /* items with the same lifetime share a class */
    uint64_t *off;
    bool *placed;
    uint64_t *total;     /* per section: bytes of unplaced items alive */
    uint32_t *wit;       /* per section: an unplaced item low enough (a cache) */
    uint32_t *cuts;      /* per boundary q|q+1: unplaced items crossing it */
    ps_undo *trail;
    size_t trail_top, trail_cap;
    uint32_t *cand;      /* per-level candidate lists, stacked */
    size_t cand_top, cand_cap;
    uint32_t *grp;       /* items of the nested parts, stacked */
    size_t grp_top, grp_cap;
    uint64_t cap;        /* target: arena <= cap */
    uint64_t nodes, node_limit;
    ps_pre *pre;         /* ranking scratch (m) */
    uint32_t *rsave;     /* ranks saved while a part is searched, parallel to grp */
    size_t rsave_cap;
    int heur;            /* the ranking heuristic of this try */
    bool dyn;
} pl_search;

/* Returns false when the stack cannot grow. */
static bool ps_reserve(pl_search *s, void **base, size_t *capn, size_t need, size_t elem)
{
    if (need <= *capn)
        return true;
    size_t n = *capn ? *capn : 256;
    while (n < need)
        n *= 2;
    void *q = ag_realloc(s->p->ctx, *base, *capn * elem, n * elem);
    if (!q)
        return false;
    *base = q;
    *capn = n;
    return true;
}

static void ps_undo_to(pl_search *s, size_t mark)
{
    while (s->trail_top > mark) {
        const ps_undo *u = &s->trail[--s->trail_top];
        switch (u->what & 1u) {
        case PS_MINOFF:
            s->minoff[u->idx] = u->old;
            s->raiser[u->idx] = (u->what >> 1) - 1;
            break;
        default: {
            uint32_t c = u->idx;
            s->placed[c] = false;
            for (uint32_t q = s->sl[c]; q < s->su[c]; q++)
                s->total[q] += s->sz[c];
            for (uint32_t q = s->sl[c]; q + 1 < s->su[c]; q++)
                s->cuts[q]++;
            for (uint32_t k = s->ovl_at[c]; k < s->ovl_at[c + 1]; k++)
                s->unov[s->ovl[k]] += !s->placed[s->ovl[k]];
            break;
        }
        }
    }
}

/* Places item c at its minoff.  Returns false when some section of
 * [q0, q1) can no longer hold its unplaced bytes above the lowest minoff
 * among them (the caller undoes); *split when c closed a boundary inside
 * the part.  The caller has checked the sections against c's offset. */
static bool ps_place(pl_search *s, uint32_t c, uint32_t q0, uint32_t q1, bool *split)
{
    uint64_t h = s->minoff[c] + s->sz[c];
    s->placed[c] = true;
    s->off[c] = s->minoff[c];
    s->trail[s->trail_top++] = (ps_undo){PS_PLACE, c, 0};
    *split = false;
    for (uint32_t q = s->sl[c]; q < s->su[c]; q++)
        s->total[q] -= s->sz[c];
    for (uint32_t q = s->sl[c]; q + 1 < s->su[c]; q++)
        if (--s->cuts[q] == 0)
            *split = true;
    for (uint32_t k = s->ovl_at[c]; k < s->ovl_at[c + 1]; k++) {
        uint32_t j = s->ovl[k];
        if (s->placed[j])
            continue;
        s->unov[j]--;
        if (s->minoff[j] >= h)
            continue;
        s->trail[s->trail_top++] = (ps_undo){PS_MINOFF | (s->raiser[j] + 1) << 1, j, s->minoff[j]};
        s->minoff[j] = h;
        s->raiser[j] = c;
    }
    /* The lowest unplaced item of a section must leave room for all of
     * them: some item with minoff <= cap - total.  Each section keeps the
     * last such item it found (a witness), rescanned only when the witness
     * was placed or raised. */
    for (uint32_t q = q0; q < q1; q++) {
        uint64_t t = s->total[q];
        if (t == 0)
            continue;
        uint64_t slack = s->cap - t;
        uint32_t w = s->wit[q];
        if (!s->placed[w] && s->minoff[w] <= slack)
            continue;
        uint32_t k = s->alive_at[q], e = s->alive_at[q + 1];
        for (; k < e; k++) {
            uint32_t j = s->alive[k];
            if (!s->placed[j] && s->minoff[j] <= slack)
                break;
        }
        if (k == e)
            return false;
        s->wit[q] = s->alive[k];
    }
    return true;
}

static int ps_dfs(pl_search *s, size_t g0, uint32_t gk, uint32_t q0, uint32_t q1, uint64_t last,
                  uint32_t min_rank);

/* Branching preferences (each key descending, then the buffer id): the
 * widest, largest-area and most crowded buffers first, in three mixes,
 * then plain size.  One rank often finds in a few thousand nodes what
 * another misses in millions.  A dynamic rank is recomputed for each part
 * after a split, with the crowding (total) of the sections at that point:
 * the buffers that are tight now come first (this closes traces that a
 * rank fixed at the root does not); one mix also runs with the rank of the
 * root kept, which is faster on others. */
enum { PS_KEY_WIDTH, PS_KEY_AREA, PS_KEY_TOTAL, PS_KEY_SIZE };
enum { PS_DYNAMIC = 3 };
static const uint8_t ps_heuristics[][4] = {
    {PS_KEY_WIDTH, PS_KEY_AREA, PS_KEY_TOTAL, 1},
    {PS_KEY_TOTAL, PS_KEY_AREA, PS_KEY_WIDTH, 1},
    {PS_KEY_TOTAL, PS_KEY_WIDTH, PS_KEY_AREA, 1},
    {PS_KEY_TOTAL, PS_KEY_WIDTH, PS_KEY_AREA, 0},
    {PS_KEY_SIZE, PS_KEY_WIDTH, PS_KEY_TOTAL, 1},
};
#define PS_NHEUR ((int)(sizeof ps_heuristics / sizeof ps_heuristics[0]))

/* The orders of the section-floor search. */
static const int ps_sec_kinds[PL_ORDER_COUNT] = {PL_ORDER_SIZE, PL_ORDER_LENGTH, PL_ORDER_AREA, PL_ORDER_START};

static int ps_pre_cmp(const void *pa, const void *pb)
{
    const ps_pre *a = pa, *b = pb;
    for (int k = 0; k < 3; k++)
        if (a->key[k] != b->key[k])
            return a->key[k] > b->key[k] ? -1 : 1;
    return a->item < b->item ? -1 : a->item > b->item;
}

/* Ranks items list[0..cnt) by heuristic s->heur with the section totals
 * of now: ranks 0..cnt-1. */
static void ps_rank(pl_search *s, const uint32_t *list, uint32_t cnt)
{
    ps_pre *pre = s->pre;
    for (uint32_t n = 0; n < cnt; n++) {
        uint32_t i = list[n];
        const ag_buf *b = &s->p->bufs[s->buf[i]];
        uint64_t width = b->upper - b->lower, tot = 0;
        for (uint32_t q = s->sl[i]; q < s->su[i]; q++)
            tot = s->total[q] > tot ? s->total[q] : tot;
        for (int k = 0; k < 3; k++) {
            switch (ps_heuristics[s->heur][k]) {
            case PS_KEY_WIDTH:
                pre[n].key[k] = width;
                break;
            case PS_KEY_AREA:
                pre[n].key[k] = (ps_u128)width * s->sz[i];
                break;
            case PS_KEY_TOTAL:
                pre[n].key[k] = tot;
                break;
            default:
                pre[n].key[k] = s->sz[i];
                break;
            }
        }
        pre[n].item = i;
    }
    qsort(pre, cnt, sizeof *pre, ps_pre_cmp);
    for (uint32_t r = 0; r < cnt; r++)
        s->rank[pre[r].item] = r;
}


/* Searches the parts of group [g0, g0 + gk) (sections [q0, q1)) split at
 * the zero-cut boundaries in [b0, b1) one after the other, each ranked
 * afresh when the rank is dynamic (and at the root): 1 when all are
 * placed (state kept), else the first failure (the caller undoes). */
static int ps_parts(pl_search *s, size_t g0, uint32_t gk, uint32_t q0, uint32_t q1, uint32_t b0, uint32_t b1)
{
    size_t top0 = s->grp_top;
    if (!ps_reserve(s, (void **)&s->grp, &s->grp_cap, top0 + gk, sizeof *s->grp) ||
        !ps_reserve(s, (void **)&s->rsave, &s->rsave_cap, top0 + gk, sizeof *s->rsave))
        return -2;
    uint32_t start = q0;
    int r = 1;
    for (uint32_t b = b0; b <= b1 && r == 1; b++) {
        uint32_t end;
        if (b == b1)
            end = q1;
        else if (b + 1 < q1 && b >= q0 && s->cuts[b] == 0)
            end = b + 1;
        else
            continue;
        uint32_t cnt = 0;
        for (uint32_t k = 0; k < gk; k++) {
            uint32_t i = s->grp[g0 + k];
            if (!s->placed[i] && s->sl[i] >= start && s->sl[i] < end)
                s->grp[top0 + cnt++] = i;
        }
        if (cnt != 0) {
            s->grp_top = top0 + cnt;
            for (uint32_t k = 0; k < cnt; k++)
                s->rsave[top0 + k] = s->rank[s->grp[top0 + k]];
            if (s->dyn || g0 == 0) /* the root group lies at 0 */
                ps_rank(s, s->grp + top0, cnt);
            r = ps_dfs(s, top0, cnt, start, end, 0, 0);
            for (uint32_t k = 0; k < cnt; k++)
                s->rank[s->grp[top0 + k]] = s->rsave[top0 + k];
            s->grp_top = top0;
        }
        start = end;
    }
    return r;
}

/* Returns 1 when the items of the group are placed within cap (the state
 * kept), 0 when the subtree holds no such placement, -1 when the node or
 * time budget ran out, -2 when out of memory. */
static int ps_dfs(pl_search *s, size_t g0, uint32_t gk, uint32_t q0, uint32_t q1, uint64_t last,
                  uint32_t min_rank)
{
    if (++s->nodes > s->node_limit || ((s->nodes & 1023u) == 0 && ag_pl_now() > s->p->deadline))
        return -1;
    uint64_t minh = UINT64_MAX;
    uint32_t left = 0;
    for (uint32_t k = 0; k < gk; k++) {
        uint32_t i = s->grp[g0 + k];
        if (s->placed[i])
            continue;
        left++;
        uint64_t h = s->minoff[i] + s->sz[i];
        if (h > s->cap)
            return 0;
        minh = h < minh ? h : minh;
    }
    if (left == 0)
        return 1;
    size_t c0 = s->cand_top;
    if (!ps_reserve(s, (void **)&s->cand, &s->cand_cap, c0 + left, sizeof *s->cand))
        return -2;
    size_t nc = 0;
    for (uint32_t k = 0; k < gk; k++) {
        uint32_t i = s->grp[g0 + k];
        if (s->placed[i])
            continue;
        uint64_t o = s->minoff[i];
        bool passed = o < last || (o == last && s->rank[i] < min_rank);
        /* nothing unplaced overlaps i: its minoff stays, and the order
         * has passed it for good */
        if (passed && s->unov[i] == 0) {
            s->cand_top = c0;
            return 0;
        }
        if (passed || o >= minh)
            continue;
        /* i right on top of an item with the same lifetime: the two can
         * swap, so only the larger below (then the lower index) */
        uint32_t a = s->raiser[i];
        if (a != PS_NONE && s->cls[a] == s->cls[i] &&
            (s->sz[i] > s->sz[a] || (s->sz[i] == s->sz[a] && i < a)))
            continue;
        /* insertion by (minoff, rank): the lists are short */
        size_t at = c0 + nc++;
        while (at > c0) {
            uint32_t j = s->cand[at - 1];
            if (s->minoff[j] < o || (s->minoff[j] == o && s->rank[j] < s->rank[i]))
                break;
            s->cand[at] = j;
            at--;
        }
        s->cand[at] = i;
    }
    s->cand_top = c0 + nc;
    /* every unplaced item lands at or above the offset placed now */
    uint64_t maxt = 0;
    for (uint32_t q = q0; q < q1; q++)
        maxt = s->total[q] > maxt ? s->total[q] : maxt;
    int r = 0;
    for (size_t t = 0; t < nc && r == 0; t++) {
        uint32_t c = s->cand[c0 + t];
        if (maxt > s->cap - s->minoff[c])
            break; /* and so for the later, higher candidates */
        /* nothing unplaced overlaps c: a later candidate's subtree would
         * pass it without placing it */
        bool last_one = s->unov[c] == 0;
        size_t need = s->trail_top + 1 + (s->ovl_at[c + 1] - s->ovl_at[c]) + s->nsec;
        if (!ps_reserve(s, (void **)&s->trail, &s->trail_cap, need, sizeof *s->trail)) {
            r = -2;
            break;
        }
        size_t mark = s->trail_top;
        uint64_t x = s->minoff[c];
        bool split;
        if (ps_place(s, c, q0, q1, &split)) {
            if (split)
                r = ps_parts(s, g0, gk, q0, q1, s->sl[c], s->su[c] - 1);
            else
                r = ps_dfs(s, g0, gk, q0, q1, x, s->rank[c] + 1);
        }
        if (r != 1)
            ps_undo_to(s, mark);
        if (last_one)
            break;
    }
    s->cand_top = c0;
    return r;
}

static int ps_u64_cmp(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return a < b ? -1 : a > b;
}

static uint32_t ps_find_time(const uint64_t *t, uint32_t nt, uint64_t v)
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

/* A second branching scheme, which closes some traces the ordered one does
 * not.  The state is a floor per time section (bytes below it are decided).  A
 * node takes the lowest section that still has unplaced buffers and either
 * puts one of them exactly on that floor (only possible when the buffer's
 * floor over its whole lifetime is that value), or declares that nothing
 * starts there and raises the section's floor to the next level a buffer
 * could start at.  Every gravity-packed placement is reached by exactly one
 * path, so exhausting the tree proves a target infeasible. */
typedef struct pl_sec {
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
    uint64_t *times;    /* distinct steps (nt) */
    uint32_t nt;
    size_t undo_top;
    uint64_t *ioff;     /* item offsets */
    bool *placed;
    uint32_t nplaced;
    uint64_t cap;       /* target: arena <= cap */
    uint64_t found;     /* arena of the solution found */
    uint64_t nodes;
    uint64_t node_limit;
    bool timed_out;
} pl_sec;

static uint64_t pl_sec_floor(const pl_sec *s, uint32_t i)
{
    uint64_t c = 0;
    for (uint32_t q = s->sl[i]; q < s->su[i]; q++)
        c = s->floor_[q] > c ? s->floor_[q] : c;
    return c;
}

/* Returns 1 when a placement within cap was found, 0 when the subtree holds
 * none, -1 when the budget ran out. */
static int pl_sec_dfs(pl_sec *s)
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
        uint64_t c = pl_sec_floor(s, i);
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
        if (s->placed[i] || pl_sec_floor(s, i) != f)
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
        r = pl_sec_dfs(s);
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
    r = pl_sec_dfs(s);
    s->floor_[low] = f;
    return r;
}

/* Lays the items out in the order kind (rank = branching order inside a
 * section) with their section ranges and the per-section alive lists. */
static void pl_sec_items(pl_sec *s, int kind, const uint64_t *times, uint32_t nt)
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
        s->sl[m] = ps_find_time(times, nt, p->bufs[b].lower);
        s->su[m] = ps_find_time(times, nt, p->bufs[b].upper);
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
static int pl_sec_try(pl_sec *s, uint64_t cap, uint64_t node_limit)
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
    return pl_sec_dfs(s);
}


/* The state before anything is placed. */
static void ps_reset(pl_search *s)
{
    memset(s->total, 0, s->nsec * sizeof *s->total);
    memset(s->cuts, 0, s->nsec * sizeof *s->cuts);
    for (uint32_t i = 0; i < s->m; i++) {
        s->placed[i] = false;
        s->minoff[i] = 0;
        s->unov[i] = s->ovl_at[i + 1] - s->ovl_at[i];
        s->raiser[i] = PS_NONE;
        for (uint32_t q = s->sl[i]; q < s->su[i]; q++) {
            s->total[q] += s->sz[i];
            s->wit[q] = i;
        }
        for (uint32_t q = s->sl[i]; q + 1 < s->su[i]; q++)
            s->cuts[q]++;
    }
    s->trail_top = 0;
    s->cand_top = 0;
    s->grp_top = 0;
}

/* One bounded search for arena <= cap: 1 found (offsets in s->off), 0
 * proved impossible, -1 out of nodes or time, -2 out of memory. */
static int ps_try(pl_search *s, uint64_t cap, uint64_t node_limit)
{
    ps_reset(s);
    s->cap = cap;
    s->nodes = 0;
    s->node_limit = node_limit;
    for (uint32_t i = 0; i < s->m; i++)
        s->grp[i] = i;
    s->grp_top = s->m;
    if (s->nsec == 0)
        return 1;
    return ps_parts(s, 0, s->m, 0, s->nsec, 0, s->nsec - 1);
}

static void ps_free(pl_search *s, size_t cells, size_t pairs)
{
    ag_ctx *ctx = s->p->ctx;
    size_t m = s->m, ns = s->nsec;
    ag_free(ctx, s->buf, m * sizeof *s->buf);
    ag_free(ctx, s->sz, m * sizeof *s->sz);
    ag_free(ctx, s->sl, m * sizeof *s->sl);
    ag_free(ctx, s->su, m * sizeof *s->su);
    ag_free(ctx, s->rank, m * sizeof *s->rank);
    ag_free(ctx, s->ovl_at, (m + 1) * sizeof *s->ovl_at);
    ag_free(ctx, s->ovl, pairs * sizeof *s->ovl);
    ag_free(ctx, s->alive_at, (ns + 1) * sizeof *s->alive_at);
    ag_free(ctx, s->alive, cells * sizeof *s->alive);
    ag_free(ctx, s->minoff, m * sizeof *s->minoff);
    ag_free(ctx, s->unov, m * sizeof *s->unov);
    ag_free(ctx, s->raiser, m * sizeof *s->raiser);
    ag_free(ctx, s->cls, m * sizeof *s->cls);
    ag_free(ctx, s->off, m * sizeof *s->off);
    ag_free(ctx, s->placed, m * sizeof *s->placed);
    ag_free(ctx, s->total, ns * sizeof *s->total);
    ag_free(ctx, s->wit, ns * sizeof *s->wit);
    ag_free(ctx, s->cuts, ns * sizeof *s->cuts);
    ag_free(ctx, s->trail, s->trail_cap * sizeof *s->trail);
    ag_free(ctx, s->cand, s->cand_cap * sizeof *s->cand);
    ag_free(ctx, s->grp, s->grp_cap * sizeof *s->grp);
    ag_free(ctx, s->pre, m * sizeof *s->pre);
    ag_free(ctx, s->rsave, s->rsave_cap * sizeof *s->rsave);
}

/* Items, sections, the per-section lists and the overlap lists. */
static ag_status ps_build(pl_search *s, size_t *cells_out, size_t *pairs_out, bool *too_big)
{
    pl *p = s->p;
    ag_ctx *ctx = p->ctx;
    size_t m = s->m, nt_alloc = m * 2;
    *too_big = false;
    uint64_t *times = ag_calloc(ctx, nt_alloc, sizeof *times);
    s->buf = ag_calloc(ctx, m, sizeof *s->buf);
    s->sz = ag_calloc(ctx, m, sizeof *s->sz);
    s->sl = ag_calloc(ctx, m, sizeof *s->sl);
    s->su = ag_calloc(ctx, m, sizeof *s->su);
    s->rank = ag_calloc(ctx, m, sizeof *s->rank);
    s->ovl_at = ag_calloc(ctx, m + 1, sizeof *s->ovl_at);
    s->minoff = ag_calloc(ctx, m, sizeof *s->minoff);
    s->unov = ag_calloc(ctx, m, sizeof *s->unov);
    s->raiser = ag_calloc(ctx, m, sizeof *s->raiser);
    s->cls = ag_calloc(ctx, m, sizeof *s->cls);
    s->off = ag_calloc(ctx, m, sizeof *s->off);
    s->placed = ag_calloc(ctx, m, sizeof *s->placed);
    s->pre = ag_calloc(ctx, m, sizeof *s->pre);
    if (!s->pre || !times || !s->buf || !s->sz || !s->sl || !s->su || !s->rank || !s->ovl_at || !s->minoff || !s->unov || !s->raiser || !s->cls || !s->off ||
        !s->placed) {
        ag_free(ctx, times, nt_alloc * sizeof *times);
        return AG_OOM(ctx);
    }
    uint32_t i = 0;
    for (uint32_t b = 0; b < p->n; b++) {
        if (p->sz[b] == 0)
            continue;
        s->buf[i] = b;
        s->sz[i] = p->sz[b];
        times[2 * i] = p->bufs[b].lower;
        times[2 * i + 1] = p->bufs[b].upper;
        i++;
    }
    qsort(times, nt_alloc, sizeof *times, ps_u64_cmp);
    uint32_t nt = 0;
    for (size_t k = 0; k < nt_alloc; k++)
        if (nt == 0 || times[nt - 1] != times[k])
            times[nt++] = times[k];
    s->nsec = nt - 1;
    size_t cells = 0, pairs = 0;
    for (i = 0; i < m; i++) {
        const ag_buf *b = &p->bufs[s->buf[i]];
        s->sl[i] = ps_find_time(times, nt, b->lower);
        s->su[i] = ps_find_time(times, nt, b->upper);
        cells += s->su[i] - s->sl[i];
    }
    ag_free(ctx, times, nt_alloc * sizeof *times);
    for (i = 0; i < m; i++) {
        uint32_t j = 0;
        while (s->sl[j] != s->sl[i] || s->su[j] != s->su[i])
            j++;
        s->cls[i] = j; /* the first item with this lifetime */
    }
    /* two items overlap in time exactly when they share a section */
    for (i = 0; i < m; i++)
        for (uint32_t j = 0; j < m; j++)
            pairs += j != i && s->sl[i] < s->su[j] && s->sl[j] < s->su[i];
    if (cells > PL_SEARCH_MAX_CELLS || pairs > PL_SEARCH_MAX_CELLS) {
        *too_big = true;
        return AG_OK;
    }
    /* the freed sizes are the allocated ones */
    *cells_out = cells ? cells : 1;
    *pairs_out = pairs ? pairs : 1;
    size_t ns = s->nsec;
    s->ovl = ag_calloc(ctx, pairs ? pairs : 1, sizeof *s->ovl);
    s->alive_at = ag_calloc(ctx, ns + 1, sizeof *s->alive_at);
    s->alive = ag_calloc(ctx, cells ? cells : 1, sizeof *s->alive);
    s->total = ag_calloc(ctx, ns, sizeof *s->total);
    s->wit = ag_calloc(ctx, ns, sizeof *s->wit);
    s->cuts = ag_calloc(ctx, ns, sizeof *s->cuts);
    if (!s->ovl || !s->alive_at || !s->alive || !s->total || !s->wit || !s->cuts)
        return AG_OOM(ctx);
    size_t k = 0;
    for (i = 0; i < m; i++) {
        s->ovl_at[i] = (uint32_t)k;
        for (uint32_t j = 0; j < m; j++)
            if (j != i && s->sl[i] < s->su[j] && s->sl[j] < s->su[i])
                s->ovl[k++] = j;
    }
    s->ovl_at[m] = (uint32_t)k;
    for (i = 0; i < m; i++)
        for (uint32_t q = s->sl[i]; q < s->su[i]; q++)
            s->alive_at[q + 1]++;
    for (uint32_t q = 0; q < ns; q++)
        s->alive_at[q + 1] += s->alive_at[q];
    for (i = 0; i < m; i++)
        for (uint32_t q = s->sl[i]; q < s->su[i]; q++)
            s->alive[s->alive_at[q]++] = i;
    for (uint32_t q = (uint32_t)ns; q > 0; q--)
        s->alive_at[q] = s->alive_at[q - 1];
    s->alive_at[0] = 0;
    return AG_OK;
}


static void pl_sec_free(pl_sec *t, ag_ctx *ctx, size_t nt_alloc, size_t cells)
{
    ag_free(ctx, t->buf, t->m * sizeof *t->buf);
    ag_free(ctx, t->sz, t->m * sizeof *t->sz);
    ag_free(ctx, t->sl, t->m * sizeof *t->sl);
    ag_free(ctx, t->su, t->m * sizeof *t->su);
    ag_free(ctx, t->ioff, t->m * sizeof *t->ioff);
    ag_free(ctx, t->cval, t->m * sizeof *t->cval);
    ag_free(ctx, t->placed, t->m * sizeof *t->placed);
    ag_free(ctx, t->times, nt_alloc * sizeof *t->times);
    ag_free(ctx, t->floor_, t->nsec * sizeof *t->floor_);
    ag_free(ctx, t->rem, t->nsec * sizeof *t->rem);
    ag_free(ctx, t->minc, t->nsec * sizeof *t->minc);
    ag_free(ctx, t->undo, cells * sizeof *t->undo);
    ag_free(ctx, t->alive, cells * sizeof *t->alive);
    ag_free(ctx, t->alive_at, ((size_t)t->nsec + 1) * sizeof *t->alive_at);
}

/* The section-floor search over the items and sections of s. */
static ag_status pl_sec_init(pl_sec *t, const pl_search *s, size_t cells)
{
    ag_ctx *ctx = s->p->ctx;
    size_t m = s->m, nt_alloc = m * 2;
    memset(t, 0, sizeof *t);
    t->p = s->p;
    t->m = s->m;
    t->nsec = s->nsec;
    t->buf = ag_calloc(ctx, m, sizeof *t->buf);
    t->sz = ag_calloc(ctx, m, sizeof *t->sz);
    t->sl = ag_calloc(ctx, m, sizeof *t->sl);
    t->su = ag_calloc(ctx, m, sizeof *t->su);
    t->ioff = ag_calloc(ctx, m, sizeof *t->ioff);
    t->cval = ag_calloc(ctx, m, sizeof *t->cval);
    t->placed = ag_calloc(ctx, m, sizeof *t->placed);
    t->times = ag_calloc(ctx, nt_alloc, sizeof *t->times);
    t->floor_ = ag_calloc(ctx, t->nsec, sizeof *t->floor_);
    t->rem = ag_calloc(ctx, t->nsec, sizeof *t->rem);
    t->minc = ag_calloc(ctx, t->nsec, sizeof *t->minc);
    t->undo = ag_calloc(ctx, cells, sizeof *t->undo);
    t->alive = ag_calloc(ctx, cells, sizeof *t->alive);
    t->alive_at = ag_calloc(ctx, (size_t)t->nsec + 1, sizeof *t->alive_at);
    if (!t->buf || !t->sz || !t->sl || !t->su || !t->ioff || !t->cval || !t->placed || !t->times || !t->floor_ ||
        !t->rem || !t->minc || !t->undo || !t->alive || !t->alive_at)
        return AG_OOM(ctx);
    const pl *p = s->p;
    uint32_t k = 0;
    for (uint32_t b = 0; b < p->n; b++) {
        if (p->sz[b] == 0)
            continue;
        t->times[2 * k] = p->bufs[b].lower;
        t->times[2 * k + 1] = p->bufs[b].upper;
        k++;
    }
    qsort(t->times, nt_alloc, sizeof *t->times, ps_u64_cmp);
    t->nt = 0;
    for (size_t i = 0; i < nt_alloc; i++)
        if (t->nt == 0 || t->times[t->nt - 1] != t->times[i])
            t->times[t->nt++] = t->times[i];
    return AG_OK;
}

/* The targets of one try each: halfway between the lowest unproved arena
 * and the best (steady progress), the lowest unproved arena itself (the
 * bound is often reachable), one byte below the best (a small step that
 * usually succeeds where the others are too hard). */
#define PS_STEPS 3
static uint64_t ps_target(uint64_t lo, uint64_t best, int step)
{
    if (best - 1 <= lo)
        return lo;
    return step == 0 ? lo + (best - 1 - lo) / 2 : step == 1 ? lo : best - 1;
}

/* Restarts both searches with several ranks and doubling node limits.
 * With a capacity at or above lb the capacity is the target (a feasibility
 * problem: done once the best fits), and tries of a quarter of the nodes
 * aim halfway to the best and just below it, so that a capacity out of
 * reach still leaves a good best to report; once a try
 * proves a target at or above the capacity impossible, the rest of the
 * budget improves the best.  Otherwise each round tries the targets of
 * ps_target, until the bound is reached, the best is proved optimal, or
 * the budget (time, or p->node_budget nodes in all) ends.  *proved when a
 * try exhausted the target just below the best. */
ag_status ag_pl_search(pl *p, uint64_t lb, bool *proved)
{
    ag_ctx *ctx = p->ctx;
    pl_search s;
    memset(&s, 0, sizeof s);
    s.p = p;
    for (uint32_t i = 0; i < p->n; i++)
        s.m += p->sz[i] != 0;
    if (s.m == 0 || s.m > PL_SEARCH_MAX_BUFS || p->best_arena == 0)
        return AG_OK;
    if (p->capacity != 0 && p->best_arena <= p->capacity)
        return AG_OK;
    /* the capacity as a target while it is not proved too small */
    uint64_t want = p->capacity >= lb ? p->capacity : 0;
    size_t cells = 0, pairs = 0;
    bool too_big = false;
    pl_sec sec;
    memset(&sec, 0, sizeof sec);
    ag_status st = ps_build(&s, &cells, &pairs, &too_big);
    if (st != AG_OK || too_big)
        goto done;
    st = pl_sec_init(&sec, &s, cells);
    if (st != AG_OK)
        goto done;
    if (!ps_reserve(&s, (void **)&s.grp, &s.grp_cap, (size_t)s.m * 4, sizeof *s.grp) ||
        !ps_reserve(&s, (void **)&s.rsave, &s.rsave_cap, (size_t)s.m * 4, sizeof *s.rsave) ||
        !ps_reserve(&s, (void **)&s.trail, &s.trail_cap, (size_t)s.m * 4 + s.nsec, sizeof *s.trail)) {
        st = AG_OOM(ctx);
        goto done;
    }
    uint64_t lo = lb; /* every arena below lo is proved impossible */
    uint64_t used = 0;
    bool stop = false;
    for (uint64_t limit = 2u * (uint64_t)s.m + 1024; !stop; limit = limit > UINT64_MAX / 2 ? UINT64_MAX : limit * 2) {
        bool any_cut = false;
        for (int e = 0; e < PS_NHEUR + PL_ORDER_COUNT && !stop; e++) {
            if (e < PS_NHEUR) {
                s.heur = e;
                s.dyn = ps_heuristics[e][PS_DYNAMIC] != 0;
            } else {
                pl_sec_items(&sec, ps_sec_kinds[e - PS_NHEUR], sec.times, sec.nt);
            }
            uint64_t prev = UINT64_MAX;
            for (int step = 0; step < PS_STEPS && !stop; step++) {
                if (lo > p->best_arena - 1) {
                    stop = true;
                    break;
                }
                uint64_t cap, lim = limit;
                if (want != 0) {
                    /* the capacity, then halfway to the best and just below it */
                    uint64_t l = lo > want + 1 ? lo : want + 1;
                    cap = step == 0 ? want : ps_target(l, p->best_arena, step == 1 ? 0 : 2);
                    if (step > 0) {
                        if (cap <= want)
                            continue;
                        lim = limit / 4 + 1;
                    }
                } else {
                    cap = ps_target(lo, p->best_arena, step);
                    /* the bound gets the full limit (it is often reached,
                     * but only after the most nodes); steps toward it a
                     * quarter, which lets the best descend faster */
                    if (step != 1)
                        lim = limit / 4 + 1;
                }
                if (cap == prev)
                    continue;
                prev = cap;
                /* the section-floor nodes cost about twice as much */
                if (e >= PS_NHEUR)
                    lim = lim / 2 + 1;
                if (p->node_budget != 0)
                    lim = p->node_budget - used < lim ? p->node_budget - used : lim;
                int r;
                const uint32_t *buf;
                const uint64_t *off, *sz;
                if (e < PS_NHEUR) {
                    r = ps_try(&s, cap, lim);
                    used += s.nodes < lim ? s.nodes : lim;
                    buf = s.buf, off = s.off, sz = s.sz;
                } else {
                    r = pl_sec_try(&sec, cap, lim);
                    used += sec.nodes < lim ? sec.nodes : lim;
                    buf = sec.buf, off = sec.ioff, sz = sec.sz;
                }
                if (r == -2) {
                    st = AG_OOM(ctx);
                    goto done;
                }
                if (r == 1) {
                    uint64_t arena = 0;
                    memset(p->off, 0, p->n * sizeof *p->off);
                    for (uint32_t i = 0; i < s.m; i++) {
                        p->off[buf[i]] = off[i];
                        arena = off[i] + sz[i] > arena ? off[i] + sz[i] : arena;
                    }
                    ag_pl_keep(p, arena);
                } else if (r == 0) {
                    lo = cap + 1;
                    want = 0; /* the capacity is proved too small */
                } else {
                    any_cut = true;
                }
                if (p->best_arena <= lb || (p->capacity != 0 && p->best_arena <= p->capacity) ||
                    ag_pl_now() >= p->deadline || (p->node_budget != 0 && used >= p->node_budget))
                    stop = true;
            }
        }
        if (!any_cut)
            stop = true;
    }
    *proved = lo > p->best_arena - 1;
done:
    pl_sec_free(&sec, ctx, (size_t)s.m * 2, cells);
    ps_free(&s, cells, pairs);
    return st;
}
