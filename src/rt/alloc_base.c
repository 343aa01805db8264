/* The baseline mode, for comparison on the same traces: the strategy of a
 * per-stream caching allocator.  A block is private to the stream that
 * allocated it; other streams that use it are recorded, and its free
 * records one event on each of them.  The block returns to its pool once
 * all those events are seen complete, polled at the next allocation. */
#include "rt/alloc_internal.h"

static void pend_pop(ag_memalloc *a, ag_astream *s)
{
    ag_bpend *p = &s->pend[s->pend_head++];
    ag_block *b = p->blk;
    a->npend--;
    a->spare_ev[a->nspare_ev++] = p->ev;
    /* The host saw the point complete: whatever it enqueues from now on,
     * on any stream, comes after it. */
    ag_hb_join(a, UINT32_MAX, p->mark);
    if (p->seq > s->ev_done)
        s->ev_done = p->seq;
    if (a->cfg.mode == AG_ALLOC_MULTI) {
        /* Fallback of a shared block: recycled since by a notice, or not. */
        if (b->version == p->version && b->state == AG_BLK_LIVE && b->users == 0 && --b->events == 0) {
            ag_stat_unpend(a, b);
            a->s.polled_recycles++;
            ag_birth_recycle(a, b);
        }
    } else if (--b->events == 0) {
        ag_stat_unpend(a, b);
        ag_block_home(a, b);
    }
    if (s->pend_head == s->npend)
        s->pend_head = s->npend = 0;
}

ag_status ag_base_poll(ag_memalloc *a, bool block)
{
    if (a->npend == 0) {
        a->s.syncs += block;
        return AG_OK;
    }
    bool multi = a->cfg.mode == AG_ALLOC_MULTI;
    for (uint32_t k = 0; k < a->n; k++) {
        ag_astream *s = &a->st[k];
        while (s->pend_head < s->npend) {
            ag_bpend *p = &s->pend[s->pend_head];
            if (multi && (p->blk->version != p->version || p->blk->state != AG_BLK_LIVE)) {
                /* a notice recycled the block first: the event is not
                 * needed (re-recording moves it), nothing was learnt */
                a->npend--;
                a->spare_ev[a->nspare_ev++] = p->ev;
                if (++s->pend_head == s->npend)
                    s->pend_head = s->npend = 0;
                continue;
            }
            ag_dev_event *ev = p->ev;
            ag_status st = AG_OK;
            bool done = false;
            if (p->seq <= s->ev_done) {
                /* the host saw a later point of this stream complete (a
                 * stream runs in order): no need to ask */
                done = true;
            } else if (block) {
                st = ag_dev_event_synchronize(a->dev, ev);
                done = st == AG_OK;
            } else {
                st = ag_dev_event_query(a->dev, ev, &done);
                a->s.event_polls++;
            }
            if (st != AG_OK) {
                ag_dev_note(a);
                return AG_ERR(a->ctx, st, "stream %u: waiting for the event of a deferred free: %s", k, a->devmsg);
            }
            if (!done)
                break;
            pend_pop(a, s);
        }
    }
    if (block)
        a->s.syncs++;
    return AG_OK;
}

ag_status ag_base_malloc(ag_memalloc *a, uint32_t stream, uint64_t size, ag_block **out)
{
    AG_TRY(ag_base_poll(a, false));
    uint64_t r = ag_pool_round(a, size);
    ag_block *b = ag_recent_take(a, stream, r);
    if (b) {
        ag_handout(a, b, stream, size);
        *out = b;
        return AG_OK;
    }
    AG_TRY(ag_block_get(a, &b));
    uint32_t pool = 0;
    ag_span *span = NULL;
    ag_status st = ag_pool_take(a, stream, r, false, NULL, &pool, &span);
    if (st != AG_OK) {
        ag_block_put(a, b);
        return st;
    }
    ag_block_bind(b, span, pool, stream);
    ag_handout(a, b, stream, size);
    *out = b;
    return AG_OK;
}

ag_status ag_base_access(ag_memalloc *a, ag_block *b, uint32_t dst)
{
    b->occ[dst]++;
    b->users++;
    if (dst != b->birth && a->cfg.mem_type != AG_MEM_HOST) {
        b->shared = true; /* the object pool clears row 0 on reuse */
        ag_mif_set(b->mif, a->w, 0, dst);
    }
    return AG_OK;
}

ag_status ag_pend_grow(ag_memalloc *a, uint32_t stream)
{
    ag_astream *s = &a->st[stream];
    /* The queue empties only when every entry is popped: while one stays
     * pending, the popped ones at its front would pile up until the next
     * clean.  At least half the array popped: move the rest down instead
     * of growing (amortised, each entry moves at most once per doubling). */
    if (s->pend_head >= s->cappend / 2u && s->pend_head > 0) {
        memmove(s->pend, s->pend + s->pend_head, (size_t)(s->npend - s->pend_head) * sizeof *s->pend);
        s->npend -= s->pend_head;
        s->pend_head = 0;
        return AG_OK;
    }
    ag_bpend *p = ag_realloc_double(a->ctx, s->pend, &s->cappend, sizeof *p, 16u);
    if (!p)
        return AG_OOM(a->ctx);
    s->pend = p;
    return AG_OK;
}

ag_status ag_stream_query(ag_memalloc *a, uint32_t u, bool *idle)
{
    *idle = false;
    if (a->no_stream_query)
        return AG_EUNSUPPORTED;
    ag_status st = ag_dev_stream_query(a->dev, a->streams[u], idle);
    if (st == AG_EUNSUPPORTED) {
        a->no_stream_query = true; /* an older backend: never asked again */
        ag_ctx_clear_error(ag_device_ctx(a->dev));
    } else {
        a->s.stream_queries++;
        a->stream_query_ok |= st == AG_OK;
    }
    return st;
}

ag_status ag_stream_capturing(ag_memalloc *a, uint32_t u, bool *capturing)
{
    *capturing = false;
    if (a->no_capture_query)
        return AG_OK;
    ag_status st = ag_dev_stream_capturing(a->dev, a->streams[u], capturing);
    if (st == AG_EUNSUPPORTED) {
        a->no_capture_query = true;
        ag_ctx_clear_error(ag_device_ctx(a->dev));
        st = AG_OK;
    }
    if (st != AG_OK)
        *capturing = false; /* (the caller weighs the status) */
    return st;
}

ag_status ag_stream_sync(ag_memalloc *a, uint32_t u)
{
    uint64_t mark = ag_hb_mark(a, u); /* before the synchronise: never claims more */
    AG_TRY(ag_dev_stream_synchronize(a->dev, a->streams[u]));
    ag_hb_join(a, UINT32_MAX, mark);
    ag_epoch_done(a, u);
    return AG_OK;
}

ag_status ag_clean_sync(ag_memalloc *a)
{
    /* The marks come before the synchronise, so that they never claim work
     * another host thread enqueued after it (the clean also runs as the
     * out-of-memory reclaim, in the middle of an execution). */
    if (a->hb_mark)
        for (uint32_t s = 0; s < a->n; s++)
            a->st[s].clean_mark = ag_hb_mark(a, s);
    ag_status st = ag_dev_synchronize(a->dev);
    if (st != AG_OK) {
        ag_dev_note(a);
        return AG_ERR(a->ctx, st, "resource clean: synchronising the device: %s", a->devmsg);
    }
    a->s.syncs++;
    for (uint32_t s = 0; s < a->n; s++) {
        ag_hb_join(a, UINT32_MAX, a->st[s].clean_mark);
        ag_epoch_done(a, s);
    }
    return AG_OK;
}

ag_status ag_base_clean(ag_memalloc *a)
{
    AG_TRY(ag_clean_sync(a));
    /* every stream's epoch is seen: the poll asks the device nothing */
    AG_TRY(ag_base_poll(a, false));
    ag_assert(a->npend == 0);
    /* A block still counting events has none queued (its last free could
     * neither record one nor synchronise that stream): the synchronise
     * above covers its users. */
    for (ag_block *b = a->all; a->base_orphans && b; b = b->all_next)
        if (b->state == AG_BLK_LIVE && b->users == 0 && b->events > 0) {
            b->events = 0;
            ag_stat_unpend(a, b);
            ag_block_home(a, b);
        }
    a->base_orphans = 0;
    return AG_OK;
}

/* An idle query of stream u refused with st: asks whether u captures.
 * *capt: it does (the refusal forgotten, AG_OK).  Otherwise the status
 * that stands: the question's own failure if it failed (a poisoned device
 * refuses both, and the query may have named the capture first), else the
 * query's refusal, with its message. */
static ag_status refused_for_capture(ag_memalloc *a, uint32_t u, ag_status st, bool *capt)
{
    ag_ctx *dctx = ag_device_ctx(a->dev);
    ag_err_saved saved;
    ag_ctx_error_save(dctx, &saved);
    ag_status q = ag_stream_capturing(a, u, capt);
    if (q != AG_OK)
        return q;
    if (*capt) {
        ag_ctx_clear_error(dctx);
        return AG_OK;
    }
    ag_ctx_error_restore(dctx, &saved);
    return st;
}

/* Asks the device whether stream u is idle (*idle), without waiting; an
 * idle answer means the host has seen u's work so far (its epoch, the
 * happens-before hook).  A refused query asks whether u captures, unless
 * capt is NULL: *capt true then, with AG_OK.  Returns the status that
 * stands (refused_for_capture), AG_EUNSUPPORTED for a device that predates
 * the query. */
static ag_status ask_idle(ag_memalloc *a, uint32_t u, bool *idle, bool *capt)
{
    uint64_t mark = ag_hb_mark(a, u); /* before the query: never claims more */
    ag_status st = ag_stream_query(a, u, idle);
    if (st != AG_OK && st != AG_EUNSUPPORTED && capt)
        st = refused_for_capture(a, u, st, capt);
    if (st == AG_OK && *idle) {
        ag_hb_join(a, UINT32_MAX, mark);
        ag_epoch_done(a, u);
    }
    return st;
}

/* The same, a refusal read as busy and forgotten. */
static bool stream_idle_in(ag_memalloc *a, uint32_t u, bool *capt)
{
    bool idle = false;
    if (ask_idle(a, u, &idle, capt) != AG_OK) {
        ag_ctx_clear_error(ag_device_ctx(a->dev));
        return false;
    }
    return idle;
}

bool ag_stream_idle(ag_memalloc *a, uint32_t u)
{
    return stream_idle_in(a, u, NULL);
}

bool ag_stream_seen_idle(ag_memalloc *a, uint32_t u, uint8_t *asked)
{
    if (asked[u] == 0) {
        bool capt = false;
        asked[u] = stream_idle_in(a, u, &capt) ? 1 : capt ? 3 : 2;
    }
    return asked[u] == 1;
}

ag_pend_out ag_pend_ask(ag_memalloc *a, uint32_t u, ag_status *first)
{
    bool idle = false, capt = false;
    ag_status st = ask_idle(a, u, &idle, &capt);
    if (st == AG_EUNSUPPORTED)
        return AG_PEND_UNKNOWN;
    if (st == AG_EINVAL && !capt) {
        /* refused as the seam refuses a capturing stream, and not capturing
         * when asked: a capture that ended in between.  Asked once more. */
        ag_ctx_clear_error(ag_device_ctx(a->dev));
        st = ask_idle(a, u, &idle, &capt);
    }
    if (st != AG_OK) {
        if (*first == AG_OK) {
            ag_dev_note(a);
            *first = AG_ERR(a->ctx, st, "stream %u: asking whether it is idle, for a deferred free: %s", u,
                            a->devmsg);
        }
        return AG_PEND_FAILED;
    }
    if (capt)
        return AG_PEND_CAPTURING;
    return idle ? AG_PEND_IDLE : AG_PEND_BUSY;
}

/* (inline in the baseline's last free, which records at every one) */
static inline __attribute__((always_inline)) ag_pend_out pend_record_in(ag_memalloc *a, uint32_t u, ag_block *b,
                                                                        bool ask_event, ag_status *first)
{
    ag_astream *s = &a->st[u];
    /* the mark before the record: it never claims more than the event
     * stands for */
    uint64_t mark = ag_hb_mark(a, u);
    bool done = false, recorded = true;
    ag_dev_event *ev = a->spare_ev[--a->nspare_ev];
    ag_status st = ag_dev_event_record_eager(a->dev, ev, a->streams[u], &recorded);
    if (ask_event && st == AG_OK && recorded) {
        st = ag_dev_event_query(a->dev, ev, &done);
        a->s.event_polls++;
    }
    if (st != AG_OK || !recorded) {
        /* the block stays counted: it can only be recycled otherwise */
        a->spare_ev[a->nspare_ev++] = ev;
        if (st == AG_OK)
            return AG_PEND_CAPTURING;
        if (*first == AG_OK) {
            /* past the point of no return of a last free: the device's own
             * out of memory is its failure, never the free's "nothing
             * changed" (AG_ENOMEM) */
            ag_dev_note(a);
            *first = AG_ERR(a->ctx, st == AG_ENOMEM ? AG_EDEVICE : st,
                            "stream %u: recording the event of a deferred free: %s", u, a->devmsg);
        }
        return AG_PEND_FAILED;
    }
    if (done) {
        /* u was idle: the host has seen the point, as a poll would */
        a->spare_ev[a->nspare_ev++] = ev;
        ag_hb_join(a, UINT32_MAX, mark);
        ag_epoch_done(a, u);
        return AG_PEND_IDLE;
    }
    ag_bpend *p = &s->pend[s->npend++];
    p->ev = ev;
    p->blk = b;
    p->version = b->version;
    p->mark = mark;
    p->seq = ++s->ev_seq;
    a->npend++;
    return AG_PEND_QUEUED;
}

ag_pend_out ag_pend_record(ag_memalloc *a, uint32_t u, ag_block *b, bool ask_event, ag_status *first)
{
    return pend_record_in(a, u, b, ask_event, first);
}

/* The spare array has a slot for every event ever made, so that putting
 * one back never allocates. */
ag_status ag_ev_grow(ag_memalloc *a, uint32_t stream, uint32_t need)
{
    while (a->nspare_ev < need) {
        if (a->nev == a->capspare_ev) {
            uint32_t nc = a->capspare_ev ? a->capspare_ev * 2u : 16u;
            ag_dev_event **e = ag_realloc(a->ctx, a->spare_ev, a->capspare_ev * sizeof *e, nc * sizeof *e);
            if (!e)
                return AG_OOM(a->ctx);
            a->spare_ev = e;
            a->capspare_ev = nc;
        }
        ag_dev_event *ev = NULL;
        ag_status st = ag_dev_event_create(a->dev, &ev);
        if (st != AG_OK) {
            ag_dev_note(a);
            return AG_ERR(a->ctx, st, "stream %u: event for a deferred free: %s", stream, a->devmsg);
        }
        a->nev++;
        a->spare_ev[a->nspare_ev++] = ev;
    }
    return AG_OK;
}

static ag_status base_reserve(ag_memalloc *a, uint32_t stream, uint32_t need)
{
    AG_TRY(ag_pend_reserve(a, stream));
    return ag_ev_reserve(a, stream, need);
}

/* An event of a deferred free that could not be recorded on u: the host
 * waits for u instead, so that the block is not counted for good (nothing
 * else would recycle it in this mode).  Whether u was seen done; the
 * record's message stays the context's either way. */
static bool wait_instead(ag_memalloc *a, uint32_t u)
{
    ag_ctx *dctx = ag_device_ctx(a->dev);
    ag_err_saved saved;
    ag_ctx_error_save(dctx, &saved);
    if (ag_stream_sync(a, u) == AG_OK)
        return true;
    ag_ctx_error_restore(dctx, &saved);
    return false;
}

ag_status ag_base_free(ag_memalloc *a, ag_block *b, uint32_t stream)
{
    uint32_t u;
    /* The room for the events first: a host failure changes nothing; a
     * device that cannot make an event (AG_EDEVICE) is one that cannot
     * record it either, and the free goes on without events */
    ag_status dev = AG_OK;
    if (b->users == 1 && b->shared) {
        uint32_t k = 0;
        AG_MIF_EACH(b->mif, a->w, u) {
            ag_status st = dev == AG_OK ? base_reserve(a, u, ++k) : AG_OK;
            if (st == AG_EDEVICE)
                dev = st;
            else
                AG_TRY(st);
        }
    }
    b->occ[stream]--;
    if (--b->users > 0)
        return AG_OK;
    if (!b->shared) {
        ag_stat_unused(a, b, false);
        ag_block_home(a, b);
        return AG_OK;
    }
    ag_stat_unused(a, b, true);
    /* One event per recorded stream; the block is counted for all of them
     * first, so one that cannot be recorded keeps it out of reuse until
     * the host has waited for that stream instead.  A stream that captures
     * can take neither (its record would go into the graph, and it cannot
     * be synchronised): the block waits for the clean. */
    AG_MIF_EACH(b->mif, a->w, u)
        b->events++;
    ag_status first = dev;
    uint32_t waited = 0;
    bool lost = false, captured = false;
    AG_MIF_EACH(b->mif, a->w, u) {
        ag_pend_out out = dev == AG_OK ? pend_record_in(a, u, b, false, &first) : AG_PEND_FAILED;
        if (out == AG_PEND_CAPTURING) {
            a->s.capture_waits += !captured; /* (once for the block) */
            lost = captured = true;
        }
        else if (out == AG_PEND_FAILED && wait_instead(a, u)) /* (no query: never idle) */
            waited++;
        else if (out == AG_PEND_FAILED)
            lost = true; /* neither an event nor a synchronise: the clean's */
    }
    b->events -= waited;
    a->base_orphans += lost;
    if (b->events == 0) {
        ag_stat_unpend(a, b);
        ag_block_home(a, b);
    }
    return first;
}
