/* Graph pools: memory private to captured work (include/aliasguard/alloc.h
 * "Graph pools").  A pool keeps one use of its own of every block allocated
 * in it, so that the modes' recycling never sees the last use while the
 * pool lives; a user's last free parks the block for the same stream's
 * next requests in the pool, and the release drops the pool's uses through
 * the modes' own free, after the streams waited for the launches.  A pool
 * block's bookkeeping lives in a side table (ag_gref), so that a block
 * object grows by one index only. */
#include "rt/alloc_internal.h"

static uint32_t gbin(uint64_t size)
{
    uint32_t c = 0;
    while (size >>= 1)
        c++;
    return c; /* floor(log2(size)), < AG_GBINS for size > 0 */
}

static ag_gref *gref_of(ag_memalloc *a, const ag_block *b)
{
    return &a->gref[b->gref];
}

/* ---- the table of entries ---- */

/* A free entry, made if needed (AG_ENOMEM, nothing changed). */
static ag_status gref_new(ag_memalloc *a, uint32_t *out)
{
    if (a->gref_free) {
        *out = a->gref_free;
        a->gref_free = a->gref[*out].next;
        return AG_OK;
    }
    if (a->ngref == UINT32_MAX - 1u)
        return AG_ERR(a->ctx, AG_ENOMEM, "graph pools: more than %u blocks", UINT32_MAX - 2u);
    if (a->ngref + 1u >= a->capgref) {
        ag_gref *t = ag_realloc_double(a->ctx, a->gref, &a->capgref, sizeof *t, 16u);
        if (!t)
            return AG_OOM(a->ctx);
        a->gref = t;
    }
    *out = ++a->ngref; /* (entry 0 stays unused: 0 ends a list) */
    return AG_OK;
}

static void gref_put(ag_memalloc *a, uint32_t k)
{
    a->gref[k].pool = NULL;
    a->gref[k].blk = NULL;
    a->gref[k].next = a->gref_free;
    a->gref_free = k;
}

/* ---- lists ---- */

static void bin_insert(ag_memalloc *a, ag_gpool *p, uint32_t k)
{
    ag_gref *g = &a->gref[k];
    uint32_t *head = &p->bins[g->stream][gbin(g->blk->size)];
    g->bprev = 0;
    g->bnext = *head;
    if (*head)
        a->gref[*head].bprev = k;
    *head = k;
}

static void bin_remove(ag_memalloc *a, ag_gpool *p, uint32_t k)
{
    ag_gref *g = &a->gref[k];
    if (g->bprev)
        a->gref[g->bprev].bnext = g->bnext;
    else
        p->bins[g->stream][gbin(g->blk->size)] = g->bnext;
    if (g->bnext)
        a->gref[g->bnext].bprev = g->bprev;
    g->bprev = g->bnext = 0;
}

static void link_block(ag_memalloc *a, ag_gpool *p, uint32_t k)
{
    ag_gref *g = &a->gref[k];
    g->pool = p;
    g->prev = 0;
    g->next = p->blocks;
    if (p->blocks)
        a->gref[p->blocks].prev = k;
    p->blocks = k;
}

static void unlink_block(ag_memalloc *a, ag_gpool *p, uint32_t k)
{
    ag_gref *g = &a->gref[k];
    if (g->prev)
        a->gref[g->prev].next = g->next;
    else
        p->blocks = g->next;
    if (g->next)
        a->gref[g->next].prev = g->prev;
    g->prev = g->next = 0;
}

/* The smallest block of one class that holds size at most twice, or 0. */
static uint32_t bin_best(ag_memalloc *a, uint32_t head, uint64_t size)
{
    uint32_t best = 0;
    for (uint32_t k = head; k; k = a->gref[k].bnext) {
        uint64_t bs = a->gref[k].blk->size;
        if (bs >= size && bs - size <= size && (!best || bs < a->gref[best].blk->size))
            best = k;
    }
    return best;
}

/* ---- the operations of the allocator's entries ---- */

/* A parked block of p that serves stream's request of size, made live for
 * the caller, or NULL. */
static ag_block *take(ag_memalloc *a, ag_gpool *p, uint32_t stream, uint64_t size)
{
    if (!p->bins || !p->bins[stream])
        return NULL;
    /* A block holds the size at most twice: its class is the request's or
     * the next one. */
    uint32_t c = gbin(size);
    uint32_t k = bin_best(a, p->bins[stream][c], size);
    if (!k && c + 1u < AG_GBINS)
        k = bin_best(a, p->bins[stream][c + 1u], size);
    if (!k)
        return NULL;
    bin_remove(a, p, k);
    ag_gref *g = &a->gref[k];
    ag_block *b = g->blk;
    g->parked = false;
    /* Allocated all along (graph_parked): only the request and the counts
     * change; the user's use joins the pool's on stream. */
    ag_alloc_stats *s = &a->s;
    s->graph_parked -= b->size;
    s->graph_reuses++;
    s->mallocs++;
    a->st[stream].st.mallocs++;
    b->requested = size;
    s->requested += size;
    if (s->requested > s->peak_requested)
        s->peak_requested = s->requested;
    b->occ[stream]++;
    b->users++;
    return b;
}

ag_status ag_gpool_malloc(ag_memalloc *a, uint32_t stream, uint64_t size, ag_block **out)
{
    ag_gpool *p = a->st[stream].gpool;
    ag_block *b = take(a, p, stream, size);
    if (b) {
        *out = b;
        return AG_OK;
    }
    uint32_t k = 0;
    AG_TRY(gref_new(a, &k));
    ag_status st = ag_mode_malloc(a, stream, size, &b);
    if (st != AG_OK) {
        gref_put(a, k);
        return st;
    }
    ag_gref *g = &a->gref[k];
    g->blk = b;
    g->stream = stream;
    g->parked = g->shared = false;
    g->bprev = g->bnext = 0;
    link_block(a, p, k);
    b->gref = k;
    b->occ[stream]++; /* the pool's use */
    b->users++;
    *out = b;
    return AG_OK;
}

ag_status ag_gpool_access(ag_memalloc *a, ag_block *b, uint32_t dst)
{
    ag_gref *g = gref_of(a, b);
    if (g->parked)
        return AG_ERR(a->ctx, AG_EINVAL, "access: the block is not live");
    AG_TRY(ag_mode_access(a, b, dst));
    if (dst != g->stream)
        a->gref[b->gref].shared = true; /* the pool's reuse follows its stream's order alone */
    return AG_OK;
}

ag_status ag_gpool_free(ag_memalloc *a, ag_block *b, uint32_t stream)
{
    uint32_t k = b->gref;
    ag_gref *g = &a->gref[k];
    ag_gpool *p = g->pool;
    if (g->parked)
        return AG_ERR(a->ctx, AG_EINVAL, "free: the block is not live");
    if (b->occ[stream] <= (stream == g->stream)) /* (one use on its stream is the pool's) */
        return ag_alloc_not_user(a, b, stream);
    /* The free that leaves the pool's use alone parks an unshared block
     * in its stream's lists, made first. */
    bool last = b->users == 2u;
    if (last && !g->shared && !p->bins) {
        p->bins = ag_calloc(a->ctx, a->n, sizeof *p->bins);
        if (!p->bins)
            return AG_OOM(a->ctx);
    }
    if (last && !g->shared && !p->bins[g->stream]) {
        p->bins[g->stream] = ag_calloc(a->ctx, AG_GBINS, sizeof **p->bins);
        if (!p->bins[g->stream])
            return AG_OOM(a->ctx);
    }
    AG_TRY(ag_mode_free(a, b, stream));
    if (!last)
        return AG_OK;
    ag_assert(b->users == 1u && b->occ[g->stream] == 1u);
    /* The user's free, counted as one; the bytes stay allocated. */
    a->s.frees++;
    a->st[b->astream].st.frees++;
    a->s.requested -= b->requested;
    b->requested = 0;
    g->parked = true;
    a->s.graph_parked += b->size;
    if (!g->shared) /* (another stream's order is not the pool's: kept until the release) */
        bin_insert(a, p, k);
    return AG_OK;
}

static void pool_free(ag_memalloc *a, ag_gpool *p)
{
    if (p->bins) {
        for (uint32_t k = 0; k < a->n; k++)
            ag_free(a->ctx, p->bins[k], AG_GBINS * sizeof **p->bins);
        ag_free(a->ctx, p->bins, (size_t)a->n * sizeof *p->bins);
    }
    ag_free(a->ctx, p, sizeof *p);
}

void ag_gpool_destroy_all(ag_memalloc *a)
{
    for (ag_gpool *p = a->gpools; p;) {
        ag_gpool *nx = p->next;
        pool_free(a, p);
        p = nx;
    }
    a->gpools = NULL;
    ag_free(a->ctx, a->gref, a->capgref * sizeof *a->gref);
    a->gref = NULL;
}

/* ---- entries ---- */

static ag_gpool *pool_find(ag_memalloc *a, uint32_t id)
{
    for (ag_gpool *p = a->gpools; p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

static ag_status pool_get(ag_memalloc *a, const char *what, uint32_t id, ag_gpool **out)
{
    *out = pool_find(a, id);
    if (!*out)
        return AG_ERR(a->ctx, AG_EINVAL, "%s: graph pool %u is unknown or released", what, id);
    return AG_OK;
}

static ag_status create_locked(ag_memalloc *a, uint32_t *pool)
{
    if (!pool)
        return AG_ERR(a->ctx, AG_EINVAL, "pool_create: pool is NULL");
    if (a->gpool_id == UINT32_MAX)
        return AG_ERR(a->ctx, AG_EINVAL, "pool_create: every graph pool ID was given");
    ag_gpool *p = ag_calloc(a->ctx, 1, sizeof *p);
    if (!p)
        return AG_OOM(a->ctx);
    p->id = ++a->gpool_id;
    p->next = a->gpools;
    a->gpools = p;
    a->s.graph_pools++;
    *pool = p->id;
    return AG_OK;
}

static ag_status begin_locked(ag_memalloc *a, uint32_t stream, uint32_t pool)
{
    ag_gpool *p;
    AG_TRY(ag_alloc_check_stream(a, "pool_begin", stream));
    AG_TRY(pool_get(a, "pool_begin", pool, &p));
    if (a->st[stream].gpool)
        return AG_ERR(a->ctx, AG_EINVAL, "pool_begin: stream %u already allocates from graph pool %u", stream,
                      a->st[stream].gpool->id);
    a->st[stream].gpool = p;
    p->routed++;
    a->routed++;
    return AG_OK;
}

static ag_status end_locked(ag_memalloc *a, uint32_t stream)
{
    AG_TRY(ag_alloc_check_stream(a, "pool_end", stream));
    ag_gpool *p = a->st[stream].gpool;
    if (!p)
        return AG_ERR(a->ctx, AG_EINVAL, "pool_end: stream %u allocates from no graph pool", stream);
    a->st[stream].gpool = NULL;
    p->routed--;
    a->routed--;
    return AG_OK;
}

static ag_status not_capturing(ag_memalloc *a, uint32_t pool, uint32_t s)
{
    bool capt = false;
    ag_status st = ag_stream_capturing(a, s, &capt);
    if (st != AG_OK) {
        ag_dev_note(a);
        return AG_ERR(a->ctx, st, "pool_release: graph pool %u: stream %u: %s", pool, s, a->devmsg);
    }
    if (capt)
        return AG_ERR(a->ctx, AG_EINVAL,
                      "pool_release: graph pool %u: stream %u captures (its wait would go into the graph)", pool, s);
    return AG_OK;
}

/* Every stream that allocated in p, but stream, waits for stream's work
 * (the launches), each once. */
static ag_status release_order(ag_memalloc *a, ag_gpool *p, uint32_t stream)
{
    uint64_t *seen = ag_calloc(a->ctx, a->w, sizeof *seen);
    if (!seen)
        return AG_OOM(a->ctx);
    ag_status st = not_capturing(a, p->id, stream);
    for (uint32_t k = p->blocks; k && st == AG_OK; k = a->gref[k].next) {
        uint32_t s = a->gref[k].stream;
        if (s == stream || (seen[s / 64u] >> (s % 64u)) & 1u)
            continue;
        seen[s / 64u] |= UINT64_C(1) << (s % 64u);
        st = not_capturing(a, p->id, s);
    }
    for (uint32_t s = 0; s < a->n && st == AG_OK; s++)
        if ((seen[s / 64u] >> (s % 64u)) & 1u) {
            st = ag_multi_send(a, stream, s);
            if (st == AG_OK)
                st = ag_multi_wait(a, s, stream);
            if (st == AG_OK) /* (the replay's check: an order the trace does not give) */
                ag_hb_join(a, s, ag_hb_mark(a, stream));
        }
    ag_free(a->ctx, seen, a->w * sizeof *seen);
    return st;
}

static ag_status release_locked(ag_memalloc *a, uint32_t pool, uint32_t stream)
{
    ag_gpool *p;
    AG_TRY(ag_alloc_check_stream(a, "pool_release", stream));
    AG_TRY(pool_get(a, "pool_release", pool, &p));
    if (p->routed)
        return AG_ERR(a->ctx, AG_EINVAL, "pool_release: graph pool %u: %u stream(s) still allocate from it", pool,
                      p->routed);
    AG_TRY(release_order(a, p, stream));
    /* The pool's use of each block, dropped on its stream, which now waits
     * for the launches: a parked block's last use, recycled there. */
    while (p->blocks) {
        uint32_t k = p->blocks;
        ag_gref *g = &a->gref[k];
        ag_block *b = g->blk;
        bool parked = g->parked;
        uint32_t s = g->stream, users = b->users;
        uint64_t size = b->size;
        uint32_t astream = b->astream;
        b->gref = 0;
        ag_status st = ag_mode_free(a, b, s);
        if (st == AG_ENOMEM && b->state == AG_BLK_LIVE && b->users == users) {
            b->gref = k; /* nothing changed: still the pool's, for a later try */
            return st;
        }
        if (st != AG_OK && p->failed == AG_OK)
            p->failed = st; /* the use is released all the same */
        g = &a->gref[k];
        if (parked && !g->shared)
            bin_remove(a, p, k);
        unlink_block(a, p, k);
        gref_put(a, k);
        if (parked) {
            /* its user's free was counted at the park */
            a->s.frees--;
            a->st[astream].st.frees--;
            a->s.graph_parked -= size;
        }
    }
    ag_gpool **link = &a->gpools;
    while (*link != p)
        link = &(*link)->next;
    *link = p->next;
    ag_status failed = p->failed;
    pool_free(a, p);
    a->s.graph_pools--;
    if (failed != AG_OK && ag_ctx_last_status(a->ctx) != failed)
        /* (an earlier try's, whose message a later failure replaced) */
        return AG_ERR(a->ctx, failed, "pool_release: graph pool %u: a block's recycling failed (%s) in an "
                      "earlier try, its use released all the same", pool, ag_status_str(failed));
    return failed;
}

ag_status ag_alloc_pool_create(ag_memalloc *a, uint32_t *pool)
{
    AG_ALLOC_ENTRY(a, create_locked(a, pool));
}

ag_status ag_alloc_pool_begin(ag_memalloc *a, uint32_t stream, uint32_t pool)
{
    AG_ALLOC_ENTRY(a, begin_locked(a, stream, pool));
}

ag_status ag_alloc_pool_end(ag_memalloc *a, uint32_t stream)
{
    AG_ALLOC_ENTRY(a, end_locked(a, stream));
}

ag_status ag_alloc_pool_release(ag_memalloc *a, uint32_t pool, uint32_t stream)
{
    AG_ALLOC_ENTRY(a, release_locked(a, pool, stream));
}
