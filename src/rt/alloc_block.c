/* Block objects and what hangs off them (seed §4.2.2, §4.2.6): the MIF
 * occupancy bitmap (one row per observing stream, as many words as the
 * stream count needs), the pooled block objects whose version survives
 * reuse so that stale notices can be recognised, the L3 borrow allocator,
 * and each stream's local-recycle list. */
#include "rt/alloc_internal.h"

void ag_mif_set_all_observers(uint64_t *mif, uint32_t n, uint32_t s)
{
    uint32_t w = ag_mif_words(n);
    uint64_t bit = UINT64_C(1) << (s % 64u);
    uint64_t *p = mif + s / 64u;
    for (uint32_t m = 0; m < n; m++, p += w)
        *p |= bit;
}

bool ag_mif_any_set(const uint64_t *mif, uint32_t w, uint32_t m)
{
    const uint64_t *row = mif + (size_t)m * w;
    for (uint32_t k = 0; k < w; k++)
        if (row[k])
            return true;
    return false;
}

void ag_mif_merge(uint64_t *mif, uint32_t w, uint32_t dst, const uint64_t *row)
{
    uint64_t *d = mif + (size_t)dst * w;
    for (uint32_t k = 0; k < w; k++)
        d[k] &= row[k];
}

/* ---- block objects: pooled, never freed before the allocator ---- */

static size_t block_bytes(const ag_memalloc *a)
{
    /* nstreams rows and one scratch row, then the use counts */
    return sizeof(ag_block) + (size_t)(a->n + 1u) * a->w * sizeof(uint64_t) + (size_t)a->n * sizeof(uint32_t);
}

ag_status ag_block_get(ag_memalloc *a, ag_block **out)
{
    ag_block *b = a->pool_free;
    if (b) {
        a->pool_free = b->link;
        if (b->shared)
            memset(b->mif, 0, (size_t)a->n * a->w * sizeof(uint64_t));
        memset(b->occ, 0, (size_t)a->n * sizeof(uint32_t));
    } else {
        b = ag_calloc(a->ctx, 1, block_bytes(a));
        if (!b)
            return AG_OOM(a->ctx);
        b->mif = (uint64_t *)(b + 1);
        b->occ = (uint32_t *)(b->mif + (size_t)(a->n + 1u) * a->w);
        b->all_next = a->all;
        a->all = b;
    }
    b->link = NULL;
    b->span = NULL;
    b->shared = false;
    b->users = 0;
    b->events = 0;
    b->state = AG_BLK_LIVE;
    *out = b;
    return AG_OK;
}

void ag_block_put(ag_memalloc *a, ag_block *b)
{
    b->state = AG_BLK_FREE;
    b->span = NULL;
    b->link = a->pool_free;
    a->pool_free = b;
}

void ag_block_mif_materialise(ag_memalloc *a, ag_block *b)
{
    if (b->shared)
        return;
    b->shared = true;
    if (b->occ[b->holder] > 0)
        ag_mif_set_all_observers(b->mif, a->n, b->holder);
}

/* ---- L3: borrowed blocks by size bin and by birth stream ---- */

void ag_borrow_insert(ag_memalloc *a, ag_borrow *br, ag_block *b, uint32_t holder)
{
    uint32_t bin = ag_alloc_bin(b->size / a->cfg.min_block);
    b->bbin = bin;
    b->holder = holder;
    b->state = AG_BLK_BORROWED;
    b->bs_prev = NULL;
    b->bs_next = br->bins[bin];
    if (b->bs_next)
        b->bs_next->bs_prev = b;
    br->bins[bin] = b;
    br->binmap[bin / 64u] |= UINT64_C(1) << (bin % 64u);
    b->bb_prev = NULL;
    b->bb_next = br->by_birth[b->birth];
    if (b->bb_next)
        b->bb_next->bb_prev = b;
    br->by_birth[b->birth] = b;
    br->bytes += b->size;
    br->count++;
}

void ag_borrow_remove(ag_memalloc *a, ag_borrow *br, ag_block *b)
{
    (void)a;
    ag_assert(b->state == AG_BLK_BORROWED);
    if (b->bs_prev)
        b->bs_prev->bs_next = b->bs_next;
    else
        br->bins[b->bbin] = b->bs_next;
    if (b->bs_next)
        b->bs_next->bs_prev = b->bs_prev;
    /* The bin is emptied by its own index, never by the request's size. */
    if (!br->bins[b->bbin])
        br->binmap[b->bbin / 64u] &= ~(UINT64_C(1) << (b->bbin % 64u));
    if (b->bb_prev)
        b->bb_prev->bb_next = b->bb_next;
    else
        br->by_birth[b->birth] = b->bb_next;
    if (b->bb_next)
        b->bb_next->bb_prev = b->bb_prev;
    b->bs_prev = b->bs_next = b->bb_prev = b->bb_next = NULL;
    br->bytes -= b->size;
    br->count--;
}

static ag_block *borrow_best(ag_block *head, uint64_t size, uint64_t max)
{
    ag_block *best = NULL;
    for (ag_block *b = head; b; b = b->bs_next)
        if (b->size >= size && b->size <= max && (!best || b->size < best->size))
            best = b;
    return best;
}

ag_block *ag_borrow_take(ag_memalloc *a, ag_borrow *br, uint64_t size, uint64_t max)
{
    uint32_t bin = ag_alloc_bin(size / a->cfg.min_block);
    uint32_t last = max / a->cfg.min_block >= UINT64_C(1) << 62 ? AG_NBINS - 1u : ag_alloc_bin(max / a->cfg.min_block);
    ag_block *b = borrow_best(br->bins[bin], size, max);
    for (uint32_t nb = bin + 1u; !b; nb++) {
        nb = ag_binmap_next(br->binmap, nb);
        if (nb > last)
            return NULL;
        b = borrow_best(br->bins[nb], size, max);
    }
    ag_borrow_remove(a, br, b);
    return b;
}

/* ---- local-recycle lists ---- */

ag_status ag_lrec_reserve(ag_memalloc *a, uint32_t stream)
{
    ag_astream *s = &a->st[stream];
    if (s->nlrec < s->caplrec)
        return AG_OK;
    ag_lrec_compact(a, stream);
    if (s->nlrec < s->caplrec)
        return AG_OK;
    uint32_t nc = s->caplrec ? s->caplrec * 2u : 16u;
    size_t ow = (size_t)s->caplrec * a->w * sizeof(uint64_t), nw = (size_t)nc * a->w * sizeof(uint64_t);
    ag_lrec *l = ag_alloc(a->ctx, nc * sizeof *l);
    uint64_t *sent = ag_alloc(a->ctx, nw);
    if (!l || !sent) {
        ag_free(a->ctx, l, nc * sizeof *l);
        ag_free(a->ctx, sent, nw);
        return AG_OOM(a->ctx);
    }
    if (s->nlrec) {
        memcpy(l, s->lrec, s->nlrec * sizeof *l);
        memcpy(sent, s->sent, (size_t)s->nlrec * a->w * sizeof(uint64_t));
    }
    ag_free(a->ctx, s->lrec, s->caplrec * sizeof *l);
    ag_free(a->ctx, s->sent, ow);
    s->lrec = l;
    s->sent = sent;
    s->caplrec = nc;
    return AG_OK;
}

void ag_lrec_append(ag_memalloc *a, uint32_t stream, ag_block *b)
{
    ag_astream *s = &a->st[stream];
    ag_assert(s->nlrec < s->caplrec);
    uint32_t k = s->nlrec++;
    s->lrec[k].blk = b;
    s->lrec[k].version = b->version;
    memset(ag_lrec_sent(a, stream, k), 0, a->w * sizeof(uint64_t));
    a->s.local_recycles++;
}

static bool sent_to_all(const ag_memalloc *a, const uint64_t *sent, uint32_t self)
{
    for (uint32_t k = 0; k < a->w; k++) {
        uint64_t want = ~UINT64_C(0);
        if (k == a->w - 1u && a->n % 64u)
            want = (UINT64_C(1) << (a->n % 64u)) - 1u;
        if (k == self / 64u)
            want &= ~(UINT64_C(1) << (self % 64u));
        if ((sent[k] & want) != want)
            return false;
    }
    return true;
}

void ag_lrec_compact(ag_memalloc *a, uint32_t stream)
{
    ag_astream *s = &a->st[stream];
    uint32_t out = 0;
    for (uint32_t k = 0; k < s->nlrec; k++) {
        ag_lrec *e = &s->lrec[k];
        if (e->blk->version != e->version || e->blk->state != AG_BLK_LIVE)
            continue;
        if (sent_to_all(a, ag_lrec_sent(a, stream, k), stream))
            continue;
        if (out != k) {
            s->lrec[out] = *e;
            memcpy(ag_lrec_sent(a, stream, out), ag_lrec_sent(a, stream, k), a->w * sizeof(uint64_t));
        }
        out++;
    }
    s->nlrec = out;
}

/* ---- the front cache ---- */

void ag_recent_flush(ag_memalloc *a, uint32_t stream)
{
    ag_astream *s = &a->st[stream];
    while (s->nrecent) {
        ag_block *b = s->recent[--s->nrecent];
        ag_heap_put(&s->pool[b->pool], b->span);
        ag_block_put(a, b);
    }
    s->recent_bytes = 0;
}
