/* Block objects and what hangs off them (seed §4.2.2, §4.2.6): the MIF
 * occupancy views (one row per observing stream up to 64 streams, beyond
 * that the common view and a row per stream whose view differs; as many
 * words as the stream count needs), the pooled block objects whose version survives
 * reuse so that stale notices can be recognised, the L3 borrow allocator,
 * and each stream's local-recycle list. */
#include "rt/alloc_internal.h"

void ag_row_and_since(uint64_t *d, uint32_t n, const uint64_t *row, const uint32_t *joined, uint32_t since)
{
    uint32_t w = ag_mif_words(n);
    for (uint32_t k = 0; k < w; k++) {
        uint64_t keep = row[k];
        for (uint32_t u = k * 64u; u < n && u < (k + 1u) * 64u; u++)
            if ((int32_t)(joined[u] - since) > 0) /* wrap-safe: joined after the view */
                keep |= UINT64_C(1) << (u % 64u);
        d[k] &= keep;
    }
}

bool ag_mif_grow(ag_memalloc *a, ag_block *b)
{
    uint32_t w = a->w, cap = b->rowcap ? 2u * b->rowcap : 4u;
    if (cap > a->n)
        cap = a->n;
    ag_assert(w > 1u && b->nrows == b->rowcap && cap > b->rowcap);
    uint64_t *rows = ag_alloc(a->ctx, ag_mif_rows_bytes(cap, w));
    if (!rows)
        return false;
    if (b->rows) {
        memcpy(rows, b->rows, (size_t)b->nrows * w * sizeof *rows);
        memcpy(rows + (size_t)cap * w, ag_mif_rowsrc(w, b), b->nrows * sizeof(uint16_t));
        ag_free(a->ctx, b->rows, ag_mif_rows_bytes(b->rowcap, w));
    }
    b->rows = rows;
    b->rowcap = cap;
    return true;
}

ag_status ag_mif_oom(ag_memalloc *a)
{
    return AG_ERR(a->ctx, AG_ENOMEM, "out of memory: the views of a block shared among %u streams", a->n);
}

uint64_t *ag_mif_make_row(ag_memalloc *a, ag_block *b, uint32_t m)
{
    uint32_t w = a->w, r = b->nrows++;
    ag_assert(w > 1u && r < b->rowcap && ag_mif_rowof(a->n, b)[m] == 0);
    uint64_t *row = ag_mif_row(b, w, r);
    memcpy(row, b->mif, w * sizeof *row);
    ag_mif_rowof(a->n, b)[m] = (uint16_t)(r + 1u);
    ag_mif_rowsrc(w, b)[r] = (uint16_t)m;
    return row;
}

void ag_mif_join(ag_memalloc *a, ag_block *b, uint32_t s)
{
    uint32_t w = a->w;
    uint64_t bit = UINT64_C(1) << (s % 64u);
    uint64_t *p = b->mif + s / 64u;
    if (w == 1u) {
        for (uint32_t m = 0; m < a->n; m++)
            p[m] |= bit;
        return;
    }
    *p |= bit; /* the common view, then each row */
    for (uint32_t r = 0; r < b->nrows; r++)
        ag_mif_row(b, w, r)[s / 64u] |= bit;
}

void ag_mif_reset_sparse(const ag_memalloc *a, ag_block *b)
{
    memset(b->mif, 0, a->w * sizeof *b->mif);
    if (b->nrows == 0)
        return;
    uint16_t *rowof = ag_mif_rowof(a->n, b), *rowsrc = ag_mif_rowsrc(a->w, b);
    for (uint32_t r = 0; r < b->nrows; r++)
        rowof[rowsrc[r]] = 0;
    b->nrows = 0;
}

/* ---- block objects: pooled, never freed before the allocator ---- */

ag_status ag_block_get(ag_memalloc *a, ag_block **out)
{
    ag_block *b = a->pool_free;
    if (b) {
        a->pool_free = b->link;
        if (b->shared)
            ag_mif_reset(a, b);
        memset(b->occ, 0, (size_t)a->n * sizeof(uint32_t));
    } else {
        b = ag_calloc(a->ctx, 1, ag_block_bytes(a->n, a->w));
        if (!b)
            return AG_OOM(a->ctx);
        b->mif = (uint64_t *)(b + 1);
        b->occ = (uint32_t *)(b->mif + ag_mif_all_words(a->n, a->w));
        b->joined = b->occ + a->n;
        b->owner = a;
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
        ag_mif_join(a, b, b->holder);
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

/* Drops the entries sent to every other stream (those before the lowest
 * cursor) and those whose block was recycled since; cursors follow. */
static void lrec_compact(ag_memalloc *a, uint32_t stream)
{
    ag_astream *s = &a->st[stream];
    uint32_t lo = s->nlrec;
    for (uint32_t d = 0; d < a->n; d++)
        if (d != stream && ag_lrec_cursor(s, d) < lo)
            lo = ag_lrec_cursor(s, d);
    uint32_t out = 0;
    for (uint32_t k = 0; k < s->nlrec; k++) {
        s->lrec[k].kept = out;
        bool live = ag_lrec_live(&s->lrec[k]);
        if (live && k < lo)
            ag_lr_count(s->lrec[k].blk, stream, -1); /* sent everywhere: dropped */
        out += k >= lo && live;
    }
    for (uint32_t d = 0; d < a->n; d++) {
        uint32_t c = ag_lrec_cursor(s, d);
        ag_lrec_set_cursor(s, d, c < s->nlrec ? s->lrec[c].kept : out);
    }
    out = 0;
    for (uint32_t k = lo; k < s->nlrec; k++)
        if (s->lrec[k].blk)
            s->lrec[out++] = s->lrec[k];
    s->nlrec = out;
    s->nlive = out; /* exact again, uncounted entries included */
}

ag_status ag_lrec_grow(ag_memalloc *a, uint32_t stream)
{
    ag_astream *s = &a->st[stream];
    lrec_compact(a, stream);
    /* keep half the room to spare, so that compactions stay rare (each
     * reads every entry) */
    if (s->nlrec < s->caplrec / 2u)
        return AG_OK;
    ag_lrec *l = ag_realloc_double(a->ctx, s->lrec, &s->caplrec, sizeof *l, 16u);
    if (!l)
        return s->nlrec < s->caplrec ? AG_OK : AG_OOM(a->ctx);
    s->lrec = l;
    return AG_OK;
}

/* ---- the front cache ---- */

void ag_recent_evict(ag_memalloc *a, uint32_t stream)
{
    ag_astream *s = &a->st[stream];
    ag_block *b = s->recent[0];
    s->nrecent--;
    memmove(&s->recent[0], &s->recent[1], s->nrecent * sizeof s->recent[0]);
    s->recent_bytes -= b->size;
    ag_block_to_pool(a, b);
}

static void recent_flush(ag_memalloc *a, uint32_t stream)
{
    ag_astream *s = &a->st[stream];
    while (s->nrecent)
        ag_block_to_pool(a, s->recent[--s->nrecent]);
    s->recent_bytes = 0;
}

void ag_recent_flush_all(ag_memalloc *a)
{
    for (uint32_t k = 0; k < a->n; k++)
        recent_flush(a, k);
}
