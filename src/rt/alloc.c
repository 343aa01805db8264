/* The allocator's public entries: configuration, creation and teardown,
 * argument checks, the lock every entry takes, dispatch to the multi-stream
 * or the baseline mode, the sync stages and the statistics. */
#include <stdio.h>

#include "rt/alloc_internal.h"

void ag_alloc_config_default(ag_alloc_config *c)
{
    memset(c, 0, sizeof *c);
    c->size = sizeof *c;
    c->mode = AG_ALLOC_MULTI;
    c->mem_type = AG_MEM_HBM;
    c->nstreams = 1;
    c->min_block = 512;
    c->page_size = 64u << 10;
    c->l1_segment = 2u << 20;
    c->small_size = 1u << 20;
    c->small_region = 2u << 20;
    c->large_region = 20u << 20;
    c->large_alone = 10u << 20;
    c->large_round = 2u << 20;
    c->alone_round = 64u << 10;
    c->split_small = 512;
    c->split_large = (1u << 20) + 1u;
    c->max_split = UINT64_MAX;
    c->l1_cache_limit = UINT64_MAX;
    c->borrow = 1;
    c->steal = 1;
    c->poll_every = 3;
    c->gather_min = 10u << 20;
    c->large_slack = 50;
    c->fallback_min = 64u << 20;
    c->front_blocks = 4;
}

const char *ag_alloc_mode_name(ag_alloc_mode m)
{
    return m == AG_ALLOC_MULTI ? "multi" : m == AG_ALLOC_BASELINE ? "baseline" : NULL;
}

static bool pow2(uint64_t v)
{
    return v && !(v & (v - 1u));
}

static ag_status check_config(ag_ctx *ctx, const ag_alloc_config *c)
{
    if (c->size < sizeof *c)
        return AG_ERR(ctx, AG_EINVAL, "allocator config: size %zu, expected %zu", c->size, sizeof *c);
    if (c->mode != AG_ALLOC_MULTI && c->mode != AG_ALLOC_BASELINE)
        return AG_ERR(ctx, AG_EINVAL, "allocator config: unknown mode %d", (int)c->mode);
    if ((unsigned)c->mem_type >= AG_MEM_COUNT_)
        return AG_ERR(ctx, AG_EINVAL, "allocator config: unknown memory type %d", (int)c->mem_type);
    if (c->nstreams == 0 || c->nstreams > AG_ALLOC_MAX_STREAMS)
        return AG_ERR(ctx, AG_EINVAL, "allocator config: nstreams %u is not in 1..%u", c->nstreams,
                      AG_ALLOC_MAX_STREAMS);
    if (!pow2(c->min_block) || c->min_block < 64)
        return AG_ERR(ctx, AG_EINVAL, "allocator config: min_block %llu is not a power of two >= 64",
                      (unsigned long long)c->min_block);
    if (!pow2(c->page_size) || c->page_size < c->min_block)
        return AG_ERR(ctx, AG_EINVAL, "allocator config: page_size %llu is not a power of two >= min_block",
                      (unsigned long long)c->page_size);
    if (c->small_size == 0)
        return AG_ERR(ctx, AG_EINVAL, "allocator config: small_size must be nonzero");
    if (c->small_region < c->small_size)
        return AG_ERR(ctx, AG_EINVAL, "allocator config: small_region %llu must hold small_size %llu",
                      (unsigned long long)c->small_region, (unsigned long long)c->small_size);
    /* the byte sizes: nonzero, below 2^62 (so that rounding a size or a
     * request up to another never wraps), and the regions' in whole
     * min_blocks */
    const struct {
        const char *name;
        uint64_t v;
        bool region;
    } sz[] = {{"page_size", c->page_size, false},      {"small_region", c->small_region, true},
              {"large_region", c->large_region, true}, {"large_round", c->large_round, true},
              {"alone_round", c->alone_round, true},   {"l1_segment", c->l1_segment, false}};
    const uint64_t lim = UINT64_MAX >> 2;
    for (size_t k = 0; k < sizeof sz / sizeof sz[0]; k++) {
        if (sz[k].v == 0)
            return AG_ERR(ctx, AG_EINVAL, "allocator config: %s must be nonzero", sz[k].name);
        if (sz[k].v > lim)
            return AG_ERR(ctx, AG_EINVAL, "allocator config: %s %llu must be at most %llu bytes", sz[k].name,
                          (unsigned long long)sz[k].v, (unsigned long long)lim);
        if (sz[k].region && sz[k].v % c->min_block)
            return AG_ERR(ctx, AG_EINVAL, "allocator config: %s %llu must be a multiple of min_block %llu",
                          sz[k].name, (unsigned long long)sz[k].v, (unsigned long long)c->min_block);
    }
    if (c->front_blocks > AG_ALLOC_MAX_FRONT)
        return AG_ERR(ctx, AG_EINVAL, "allocator config: front_blocks %u is not in 0..%u", c->front_blocks,
                      AG_ALLOC_MAX_FRONT);
    if (c->large_alone > c->large_region)
        return AG_ERR(ctx, AG_EINVAL, "allocator config: large_alone %llu exceeds large_region %llu",
                      (unsigned long long)c->large_alone, (unsigned long long)c->large_region);
    return AG_OK;
}

/* The device synchronise failed: whether each of a's streams drains when
 * synchronised alone.  On a poisoned device queued work is dropped and
 * streams still drain; a capturing stream, a call from a kernel or a
 * failing device leave a stream unproven (*stuck, its message in *why). */
static bool streams_drained(ag_memalloc *a, uint32_t *stuck, char *why, size_t cap)
{
    for (uint32_t k = 0; k < a->n; k++) {
        if (ag_dev_stream_synchronize(a->dev, a->streams[k]) == AG_OK ||
            ag_dev_device_state(a->dev, NULL) == AG_DEV_POISONED)
            continue;
        *stuck = k;
        snprintf(why, cap, "%s", ag_ctx_errmsg(ag_device_ctx(a->dev)));
        return false;
    }
    return true;
}

void ag_alloc_destroy(ag_memalloc *a)
{
    if (!a)
        return;
    ag_ctx *ctx = a->ctx;
    /* Nothing queued may still touch the memory given back below.  A
     * poisoned device fails the synchronise: the caller's error stays.
     * Where no synchronise proves a stream done, the device memory stays
     * allocated (the device frees it when it is destroyed). */
    ag_ctx *dctx = ag_device_ctx(a->dev);
    ag_err_saved saved;
    ag_ctx_error_save(dctx, &saved);
    uint32_t stuck = 0;
    char why[256];
    if (ag_dev_synchronize(a->dev) != AG_OK && !streams_drained(a, &stuck, why, sizeof why))
        a->keep_device = true;
    ag_ctx_error_restore(dctx, &saved);
    uint64_t kept = a->s.reserved;
    if (a->chans) {
        for (size_t k = 0; k < (size_t)a->n * a->n; k++) {
            ag_chan *c = a->chans[k];
            if (!c)
                continue;
            ag_dev_event_destroy(a->dev, c->ev);
            ag_dev_event_destroy(a->dev, c->gev);
            if (!ag_chan_slots_inline(c))
                ag_free(ctx, c->notes, ag_chan_slot_bytes(c->capnotes, a->w));
            ag_free(ctx, c, ag_chan_bytes(a->w));
        }
        ag_free(ctx, a->chans, (size_t)a->n * a->n * sizeof *a->chans);
    }
    if (a->st) {
        for (uint32_t k = 0; k < a->n; k++) {
            ag_astream *s = &a->st[k];
            for (uint32_t i = s->pend_head; i < s->npend; i++)
                a->spare_ev[a->nspare_ev++] = s->pend[i].ev;
            ag_heap_destroy(&s->pool[0]);
            ag_heap_destroy(&s->pool[1]);
            ag_free(ctx, s->borrow.by_birth, (size_t)a->n * sizeof *s->borrow.by_birth);
            ag_free(ctx, s->lrec, s->caplrec * sizeof *s->lrec);
            ag_free(ctx, s->cursor, (size_t)a->n * sizeof *s->cursor);
            ag_free(ctx, s->pend, s->cappend * sizeof *s->pend);
        }
        ag_free(ctx, a->st, (size_t)a->n * sizeof *a->st);
    }
    ag_heap_destroy(&a->l1);
    for (uint32_t k = 0; k < a->nspare_ev; k++)
        ag_dev_event_destroy(a->dev, a->spare_ev[k]);
    ag_free(ctx, a->spare_ev, a->capspare_ev * sizeof *a->spare_ev);
    ag_free(ctx, a->lazy, a->caplazy * sizeof *a->lazy);
    ag_gpool_destroy_all(a);
    size_t bb = ag_block_bytes(a->n, a->w);
    for (ag_block *b = a->all; b;) {
        ag_block *nx = b->all_next;
        if (b->rows)
            ag_free(ctx, b->rows, ag_mif_rows_bytes(b->rowcap, a->w));
        ag_free(ctx, b, bb);
        b = nx;
    }
    ag_free(ctx, a->streams, (size_t)a->n * sizeof *a->streams);
    bool keep = a->keep_device;
    ag_free(ctx, a, sizeof *a);
    if (keep)
        (void)AG_ERR(ctx, AG_EDEVICE,
                     "ag_alloc_destroy: stream %u could not be synchronised (%s): %llu bytes of device memory "
                     "left allocated, for the device to free when it is destroyed",
                     stuck, why, (unsigned long long)kept);
}

ag_status ag_alloc_create(ag_ctx *ctx, ag_device *dev, ag_dev_stream *const *streams, const ag_alloc_config *cfg,
                          ag_memalloc **out)
{
    ag_alloc_config def;
    if (!cfg) {
        ag_alloc_config_default(&def);
        cfg = &def;
    }
    if (!dev || !streams || !out)
        return AG_ERR(ctx, AG_EINVAL, "ag_alloc_create: device, streams and out must not be NULL");
    AG_TRY(check_config(ctx, cfg));
    for (uint32_t k = 0; k < cfg->nstreams; k++)
        if (!streams[k])
            return AG_ERR(ctx, AG_EINVAL, "ag_alloc_create: stream %u is NULL", k);
    ag_memalloc *a = ag_calloc(ctx, 1, sizeof *a);
    if (!a)
        return AG_OOM(ctx);
    a->ctx = ctx;
    a->dev = dev;
    a->cfg = *cfg;
    a->front_max = cfg->page_size < cfg->small_size ? cfg->page_size : cfg->small_size;
    if (cfg->max_split <= a->front_max)
        a->front_max = cfg->max_split - (cfg->max_split > 0);
    if (cfg->front_blocks == 0)
        a->front_max = 0;
    a->cfg.size = sizeof a->cfg;
    a->n = cfg->nstreams;
    a->w = ag_mif_words(a->n);
    atomic_init(&a->lock, 0u);
    ag_status st = ag_l1_init(a);
    a->streams = ag_calloc(ctx, a->n, sizeof *a->streams);
    a->st = ag_calloc(ctx, a->n, sizeof *a->st);
    a->chans = ag_calloc(ctx, (size_t)a->n * a->n, sizeof *a->chans);
    if (st != AG_OK || !a->streams || !a->st || !a->chans)
        goto oom;
    for (uint32_t k = 0; k < a->n; k++) {
        a->streams[k] = streams[k];
        ag_pool_init(a, k);
        a->st[k].borrow.by_birth = ag_calloc(ctx, a->n, sizeof *a->st[k].borrow.by_birth);
        a->st[k].cursor = ag_calloc(ctx, a->n, sizeof *a->st[k].cursor);
        if (!a->st[k].borrow.by_birth || !a->st[k].cursor)
            goto oom;
    }
    *out = a;
    return AG_OK;
oom:
    ag_alloc_destroy(a);
    return AG_OOM(ctx);
}

/* ---- bookkeeping ---- */

void ag_stat_unpend(ag_memalloc *a, const ag_block *b)
{
    a->s.pending -= b->size;
}

ag_status ag_alloc_fail(ag_memalloc *a, ag_status st, uint32_t stream, uint64_t size)
{
    if (!a->devmsg[0])
        return st; /* host memory: the message is already there */
    a->s.ooms += st == AG_ENOMEM;
    return AG_ERR(a->ctx, st,
                  "stream %u: cannot allocate %llu bytes of %s memory (allocated %llu, reserved %llu bytes): %s",
                  stream, (unsigned long long)size, ag_mem_type_name(a->cfg.mem_type),
                  (unsigned long long)a->s.allocated, (unsigned long long)a->s.reserved, a->devmsg);
}

/* ---- entries ---- */

ag_status ag_alloc_check_stream(ag_memalloc *a, const char *what, uint32_t stream)
{
    if (stream >= a->n)
        return AG_ERR(a->ctx, AG_EINVAL, "%s: stream %u out of range (the allocator has %u streams)", what, stream,
                      a->n);
    return AG_OK;
}

static ag_status check_block(ag_memalloc *a, const char *what, const ag_block *b)
{
    if (b && b->owner != a)
        return AG_ERR(a->ctx, AG_EINVAL, "%s: the block belongs to another allocator", what);
    if (!b || b->state != AG_BLK_LIVE || b->users == 0)
        return AG_ERR(a->ctx, AG_EINVAL, "%s: the block is not live", what);
    return AG_OK;
}

ag_status ag_alloc_malloc(ag_memalloc *a, uint32_t stream, uint64_t size, ag_block **out)
{
    if (!a)
        return AG_EINVAL;
    ag_alloc_lock(a);
    ag_status st = out ? ag_alloc_check_stream(a, "malloc", stream) : AG_ERR(a->ctx, AG_EINVAL, "malloc: out is NULL");
    if (st == AG_OK && size == 0)
        st = AG_ERR(a->ctx, AG_EINVAL, "malloc on stream %u: size 0", stream);
    if (st == AG_OK && size > (UINT64_MAX >> 2)) {
        a->s.ooms++; /* no device holds it */
        st = AG_ERR(a->ctx, AG_ENOMEM, "malloc on stream %u: %llu bytes is beyond any device", stream,
                    (unsigned long long)size);
    }
    if (st == AG_OK && a->routed && a->st[stream].gpool) {
        st = ag_gpool_malloc(a, stream, size, out);
    } else if (st == AG_OK) {
        st = ag_mode_malloc(a, stream, size, out);
    }
    ag_alloc_unlock(a);
    return st;
}

/* A block use on a stream: both must be valid. */
static ag_status check_use(ag_memalloc *a, const char *what, const ag_block *blk, uint32_t stream)
{
    AG_TRY(ag_alloc_check_stream(a, what, stream));
    return check_block(a, what, blk);
}

static ag_status access_locked(ag_memalloc *a, ag_block *blk, uint32_t dst)
{
    AG_TRY(check_use(a, "access", blk, dst));
    if (blk->gref)
        return ag_gpool_access(a, blk, dst);
    return ag_mode_access(a, blk, dst);
}

ag_status ag_alloc_not_user(ag_memalloc *a, const ag_block *b, uint32_t stream)
{
    return AG_ERR(a->ctx, AG_EINVAL, "free on stream %u: the stream does not use the block (allocated on %u)", stream,
                  b->astream);
}

static ag_status free_locked(ag_memalloc *a, ag_block *blk, uint32_t stream)
{
    AG_TRY(check_use(a, "free", blk, stream));
    if (blk->gref)
        return ag_gpool_free(a, blk, stream);
    if (blk->occ[stream] == 0)
        return ag_alloc_not_user(a, blk, stream);
    return ag_mode_free(a, blk, stream);
}

/* An ordering stage between two distinct streams. */
static ag_status check_pair(ag_memalloc *a, const char *what, uint32_t s1, uint32_t s2, const char *self)
{
    AG_TRY(ag_alloc_check_stream(a, what, s1));
    AG_TRY(ag_alloc_check_stream(a, what, s2));
    if (s1 == s2)
        return AG_ERR(a->ctx, AG_EINVAL, "%s: stream %u %s", what, s1, self);
    return AG_OK;
}

static ag_status send_locked(ag_memalloc *a, uint32_t src, uint32_t dst)
{
    AG_TRY(check_pair(a, "send", src, dst, "to itself"));
    return ag_multi_send(a, src, dst);
}

static ag_status wait_locked(ag_memalloc *a, uint32_t dst, uint32_t src)
{
    AG_TRY(check_pair(a, "wait", dst, src, "on itself"));
    return ag_multi_wait(a, dst, src);
}

ag_status ag_alloc_access(ag_memalloc *a, ag_block *blk, uint32_t dst)
{
    AG_ALLOC_ENTRY(a, access_locked(a, blk, dst));
}

ag_status ag_alloc_free(ag_memalloc *a, ag_block *blk, uint32_t stream)
{
    AG_ALLOC_ENTRY(a, free_locked(a, blk, stream));
}

ag_status ag_alloc_send(ag_memalloc *a, uint32_t src, uint32_t dst)
{
    AG_ALLOC_ENTRY(a, send_locked(a, src, dst));
}

ag_status ag_alloc_wait(ag_memalloc *a, uint32_t dst, uint32_t src)
{
    AG_ALLOC_ENTRY(a, wait_locked(a, dst, src));
}

static ag_status sync_locked(ag_memalloc *a, ag_alloc_stage stage)
{
    switch (stage) {
    case AG_SYNC_FIRST:
        for (uint32_t s = 1; s < a->n; s++) {
            AG_TRY(ag_multi_send(a, 0, s));
            AG_TRY(ag_multi_wait(a, s, 0));
        }
        return AG_OK;
    case AG_SYNC_LAST:
        for (uint32_t s = 1; s < a->n; s++) {
            AG_TRY(ag_multi_send(a, s, 0));
            AG_TRY(ag_multi_wait(a, 0, s));
        }
        return AG_OK;
    case AG_SYNC_CLEAN:
        if (a->cfg.mode == AG_ALLOC_MULTI)
            return ag_multi_clean(a);
        return ag_base_clean(a);
    }
    return AG_ERR(a->ctx, AG_EINVAL, "sync: unknown stage %d", (int)stage);
}

ag_status ag_alloc_sync(ag_memalloc *a, ag_alloc_stage stage)
{
    AG_ALLOC_ENTRY(a, sync_locked(a, stage));
}

void *ag_block_ptr(const ag_block *blk)
{
    return (void *)blk->span->addr;
}

uint64_t ag_block_size(const ag_block *blk)
{
    return blk->size;
}

uint32_t ag_block_birth(const ag_block *blk)
{
    return blk->birth;
}

void ag_alloc_stats_get(ag_memalloc *a, ag_alloc_stats *out, ag_alloc_stream_stats *streams)
{
    ag_alloc_lock(a);
    size_t sz = out->size < sizeof *out ? out->size : sizeof *out;
    ag_alloc_stats s = a->s;
    s.size = sz;
    s.cached = ag_heap_cached(&a->l1) + a->transit_bytes;
    s.borrowed = 0;
    for (uint32_t k = 0; k < a->n; k++) {
        ag_astream *as = &a->st[k];
        uint64_t c = ag_heap_cached(&as->pool[0]) + ag_heap_cached(&as->pool[1]) + as->recent_bytes;
        s.cached += c + as->borrow.bytes;
        s.borrowed += as->borrow.bytes;
        if (streams) {
            streams[k] = as->st;
            streams[k].cached = c;
            streams[k].borrowed = as->borrow.bytes;
        }
    }
    s.fragmentation = s.peak_reserved ? 1.0 - (double)s.peak_allocated / (double)s.peak_reserved : 0.0;
    memcpy(out, &s, sz);
    ag_alloc_unlock(a);
}
