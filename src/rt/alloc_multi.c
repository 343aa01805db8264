/* The multi-stream mode (seed §4.2.3-§4.2.6): allocation from the stream's
 * pool or its borrow allocator, cross-stream access marking the MIF, free
 * with its three recycle modes (birth, borrow, local), and the event kernels
 * that carry local-recycle notices and borrowed blocks between streams.
 * Notices are applied when the host issues the wait: every later request on
 * the waiting stream is enqueued after that wait, so the reuse is ordered. */
#include "rt/alloc_internal.h"

/* Parks b in stream's borrow allocator with a fresh MIF (seed: borrow
 * recycle); it goes home with the next send from stream to its birth.
 * The rarer branch of global_recycle, kept out of its callers. */
static __attribute__((noinline)) void borrow_recycle(ag_memalloc *a, ag_block *b, uint32_t stream)
{
    ag_lrec_forget(a, b);
    b->version++;
    if (b->shared)
        ag_mif_reset(a, b);
    memset(b->occ, 0, (size_t)a->n * sizeof(uint32_t));
    b->shared = false;
    b->users = 0;
    /* Events its fallback recorded before the notice came are stale now
     * (the version moved: the poll skips their entries); counted still,
     * they would make the next fallback of the lent block look done. */
    b->events = 0;
    ag_borrow_insert(a, &a->st[stream].borrow, b, stream);
    a->s.borrow_recycles++;
}

/* No stream occupies b in stream's view: recycle it there.  Inline in
 * the free and the wait, whose common end it is (a call of its own cost
 * oww_embedding 1-2% in time once, for the same instructions). */
static inline __attribute__((always_inline)) void global_recycle(ag_memalloc *a, ag_block *b, uint32_t stream)
{
    if (stream == b->birth)
        ag_birth_recycle(a, b);
    else
        borrow_recycle(a, b, stream);
}

/* A look at the waiting blocks that the device or the host refused (an
 * event it could not make or answer, room for a record): those blocks
 * stay waiting, as safe as before, and the request may still be served
 * from the caches or by growth.  On a healthy device the refusal is
 * counted (reclaims_refused) and forgotten; a poisoned device fails the
 * request with the refusal's message. */
static __attribute__((noinline)) ag_status reclaim_refused(ag_memalloc *a, ag_status st)
{
    if (ag_dev_device_state(a->dev, NULL) == AG_DEV_POISONED)
        return st;
    a->s.reclaims_refused++;
    ag_ctx_clear_error(a->ctx);
    ag_ctx_clear_error(ag_device_ctx(a->dev));
    return AG_OK;
}

/* A pool miss's look at the blocks waiting for notices (their events,
 * ag_lazy_flush) and at the deferred frees' events (ag_base_poll). */
static ag_status miss_reclaim(ag_memalloc *a)
{
    ag_status st = ag_lazy_flush(a);
    if (st != AG_OK) {
        /* the poll still runs; the flush's refusal, and its message, stand
         * (the device's part too, which a failed request's message quotes) */
        ag_err_saved saved;
        char devmsg[sizeof a->devmsg];
        ag_ctx_error_save(a->ctx, &saved);
        memcpy(devmsg, a->devmsg, sizeof devmsg);
        (void)ag_base_poll(a, false);
        ag_ctx_error_restore(a->ctx, &saved);
        memcpy(a->devmsg, devmsg, sizeof devmsg);
    } else {
        st = ag_base_poll(a, false);
    }
    return st == AG_OK ? AG_OK : reclaim_refused(a, st);
}

/* What the stream's own cache could not serve (ag_multi_malloc looked at
 * its recent blocks and its pool, with the pool reserved and b, a block
 * object, taken for the request): a borrowed block, a poll and a second
 * look, growth, the reclaim.  Apart, so that the common allocations do
 * not pay for its frame. */
static __attribute__((noinline)) ag_status malloc_miss(ag_memalloc *a, uint32_t stream, uint64_t size, uint64_t r,
                                                       ag_block *b, ag_block **out)
{
    ag_astream *as = &a->st[stream];
    bool polled = false, reclaimed = false, looked = true; /* by ag_multi_malloc */
    bool unmoved = false; /* a region counted on to move in could not */
    ag_move mv = {NULL, 0};
again:;
    uint32_t pool = ag_pool_of(a, r);
    ag_span *span = NULL;
    ag_block *lent = NULL;
    uint32_t owner = stream; /* the pool the span comes from */
    /* Own cache first; then a borrowed block that wastes at most the size
     * asked for; then growth; under pressure, any borrowed block. */
    if (!looked) {
        if ((b = ag_recent_take(a, stream, r)) != NULL) {
            ag_handout(a, b, stream, size);
            *out = b;
            return AG_OK;
        }
        AG_TRY(ag_heap_reserve(&as->pool[pool]));
        AG_TRY(ag_block_get(a, &b));
        span = ag_heap_take(&as->pool[pool], r);
    }
    looked = false;
    if (!span && a->recent_kept) {
        /* The first miss since the resource clean: the front caches give
         * their blocks back to the pools, where they merge, so that a
         * region one of them kept shows wholly free again (to this
         * stream's next look, or to a move between pools). */
        ag_block_put(a, b);
        a->recent_kept = false;
        ag_recent_flush_all(a);
        goto again;
    }
    if (!span && a->cfg.borrow && as->borrow.count)
        lent = ag_borrow_take(a, &as->borrow, r, 2u * r);
    if (!span && !lent && (a->npend || a->nlazy) && !polled &&
        (unmoved || !ag_pool_can_move(a, stream, r, &mv))) {
        /* before growing: the waiting blocks whose users are idle now,
         * and what the deferred frees' events release (into the pool or
         * the recent blocks); then look again.  A wholly free region of
         * another pool that moves here grows nothing: the look waits for
         * a miss that would grow (at busy kernels most of it would ask
         * and record for blocks still in use) */
        ag_block_put(a, b);
        polled = true;
        a->poll_tick = 0;
        AG_TRY(miss_reclaim(a));
        goto again;
    }
    if (!span && !lent) {
        /* the host's records first: a failure there is no device refusal */
        ag_status st = ag_pool_prepare(a, stream, r);
        if (st != AG_OK) {
            ag_block_put(a, b);
            return st;
        }
        st = ag_pool_take(a, stream, r, true, &mv, &pool, &span);
        mv.span = NULL;
        if (st == AG_OK && !span) {
            /* the region did not move: the look comes first after all */
            ag_block_put(a, b);
            unmoved = true;
            goto again;
        }
        if (st == AG_ENOMEM && a->cfg.borrow && as->borrow.count &&
            (lent = ag_borrow_take(a, &as->borrow, r, UINT64_MAX)) != NULL)
            ag_ctx_clear_error(a->ctx); /* served: the device's refusal is no failure */
        if (!lent && st == AG_ENOMEM && !reclaimed) {
            /* The last resort, as the baseline's: wait for the device, so
             * that every block waiting for a notice or an event is free,
             * give the pools' free regions back, and try once more. */
            ag_block_put(a, b);
            reclaimed = true;
            a->s.retries++;
            ag_ctx_clear_error(a->ctx);
            AG_TRY(ag_multi_clean(a));
            goto again;
        }
        if (!lent && st == AG_ENOMEM) {
            /* Still short: any free span of the stream's own pool, even one
             * the alone bound kept from this request; then, since nothing
             * was enqueued since the reclaim, a free block of another
             * stream's pool is idle: it serves as a borrowed block and
             * goes home as one. */
            for (uint32_t k = 0; k < a->n && !span; k++) {
                uint32_t o = (stream + k) % a->n;
                if (ag_heap_reserve(&a->st[o].pool[pool]) != AG_OK)
                    continue;
                if ((span = ag_heap_take_any(&a->st[o].pool[pool], r)) != NULL)
                    owner = o;
            }
            if (span) {
                ag_ctx_clear_error(a->ctx);
                st = AG_OK;
            }
        }
        if (!lent && st != AG_OK) {
            ag_block_put(a, b);
            return st;
        }
    }
    if (lent) {
        ag_block_put(a, b);
        b = lent;
        b->state = AG_BLK_LIVE;
        as->st.borrow_hits++;
        a->s.borrow_hits++;
    } else {
        ag_block_bind(b, span, pool, owner);
    }
    b->shared = false;
    ag_handout(a, b, stream, size);
    *out = b;
    return AG_OK;
}

ag_status ag_multi_malloc(ag_memalloc *a, uint32_t stream, uint64_t size, ag_block **out)
{
    /* A poll at every allocation mostly asks again for events already
     * found busy: it is due every poll_every-th one, and at a pool miss. */
    if (a->npend && a->cfg.poll_every && ++a->poll_tick >= a->cfg.poll_every) {
        a->poll_tick = 0;
        ag_status st = ag_base_poll(a, false);
        if (st != AG_OK)
            AG_TRY(reclaim_refused(a, st));
    }
    uint64_t r = ag_pool_round(a, size);
    ag_block *b = ag_recent_take(a, stream, r);
    if (!b) {
        /* the stream's own pool, as malloc_miss looks first */
        uint32_t pool = ag_pool_of(a, r);
        ag_heap *h = &a->st[stream].pool[pool];
        AG_TRY(ag_heap_reserve(h));
        AG_TRY(ag_block_get(a, &b));
        ag_span *span = ag_heap_take(h, r);
        if (!span)
            return malloc_miss(a, stream, size, r, b, out);
        ag_block_bind(b, span, pool, stream);
        b->shared = false;
    }
    ag_handout(a, b, stream, size);
    *out = b;
    return AG_OK;
}

/* Beyond 64 streams: the views that exist learn dst's use.  Apart, so
 * that the dense access saves no registers for its calls. */
static __attribute__((noinline)) void access_sparse(ag_memalloc *a, ag_block *b, uint32_t dst)
{
    ag_block_mif_materialise(a, b);
    ag_mif_join(a, b, dst);
}

ag_status ag_multi_access(ag_memalloc *a, ag_block *b, uint32_t dst)
{
    if (a->cfg.mem_type == AG_MEM_HOST || (!b->shared && dst == b->holder)) {
        /* host memory is shared without stream constraint; same stream: one more use */
        b->occ[dst]++;
        b->users++;
        return AG_OK;
    }
    /* Notices already sent do not know dst uses the block (chan_apply). */
    if (b->occ[dst] == 0)
        b->joined[dst] = ++b->jep;
    if (a->w == 1) {
        /* one word a row: the holder's bit (first sharing) and dst's at once */
        uint64_t bits = UINT64_C(1) << dst;
        uint64_t *mif = b->mif;
        uint32_t n = a->n;
        if (!b->shared) {
            /* the first other stream: every row is empty, so it is written */
            b->shared = true;
            if (b->occ[b->holder] > 0)
                bits |= UINT64_C(1) << b->holder;
            for (uint32_t m = 0; m < n; m++)
                mif[m] = bits;
        } else {
            for (uint32_t m = 0; m < n; m++)
                mif[m] |= bits;
        }
    } else {
        access_sparse(a, b, dst);
    }
    b->occ[dst]++;
    b->users++;
    return AG_OK;
}

static inline void fallback_done(ag_memalloc *a, ag_block *b)
{
    ag_stat_unpend(a, b);
    a->s.polled_recycles++;
    ag_birth_recycle(a, b);
}

/* Whether b's fallback records its events at its last free: a block of at
 * least fallback_min, or any on a device that cannot say whether a stream
 * is idle (it asks the event instead). */
static bool fallback_now(const ag_memalloc *a, const ag_block *b)
{
    return b->size >= a->cfg.fallback_min || a->no_stream_query;
}

/* b waits on the list for its notices, or for a pool miss to record its
 * events (room reserved by the caller). */
static void lazy_wait(ag_memalloc *a, ag_block *b)
{
    a->lazy[a->nlazy++] = (ag_lazy){b, b->version};
    a->s.fallbacks_deferred++;
}

/* A fallback some of whose events could not be recorded (the device
 * refused one, or a user captures): counted, they would never let b go
 * home.  b is to wait again, for a later look or the clean; the events
 * queued for it since queued (the count of deferred frees before) and the
 * notices of its releases go stale with a new version. */
static void fallback_undo(ag_memalloc *a, ag_block *b, uint64_t queued)
{
    b->events = 0;
    if (a->npend != queued) {
        ag_lrec_forget(a, b);
        b->version++;
    }
}

/* The fallback's events at once (a block of at least fallback_min, or a
 * device that cannot say whether a stream is idle).  Every user is asked
 * before any event is recorded: one that captures, or that the device
 * cannot answer for, leaves the block waiting, as a smaller one does, with
 * nothing recorded on the others.  Apart, for its array of answers. */
static __attribute__((noinline)) ag_status defer_now(ag_memalloc *a, ag_block *b, const uint64_t *any)
{
    ag_status first = AG_OK;
    uint8_t asked[AG_ALLOC_MAX_STREAMS];
    uint32_t u, nbusy = 0;
    bool stop = false, captured = false;
    AG_MIF_EACH(any, a->w, u) {
        ag_pend_out out = a->no_stream_query ? AG_PEND_UNKNOWN : ag_pend_ask(a, u, &first);
        asked[u] = (uint8_t)out;
        nbusy += out == AG_PEND_BUSY || out == AG_PEND_UNKNOWN;
        captured = captured || out == AG_PEND_CAPTURING;
        stop = stop || out == AG_PEND_CAPTURING || out == AG_PEND_FAILED;
    }
    a->s.capture_waits += captured; /* (once for the block) */
    if (stop || nbusy == 0) {
        if (stop)
            lazy_wait(a, b);
        else
            fallback_done(a, b); /* every user was idle already: home at once */
        return first;
    }
    b->events = nbusy;
    uint64_t queued = a->npend;
    bool missed = false; /* a record the device refused, or a capture begun since the question */
    AG_MIF_EACH(any, a->w, u)
        if (asked[u] == AG_PEND_BUSY || asked[u] == AG_PEND_UNKNOWN) {
            /* (a device that cannot say whether a stream is idle: its event) */
            ag_pend_out out = ag_pend_record(a, u, b, asked[u] == AG_PEND_UNKNOWN, &first);
            b->events -= out == AG_PEND_IDLE;
            captured = captured || out == AG_PEND_CAPTURING;
            missed = missed || out == AG_PEND_CAPTURING || out == AG_PEND_FAILED;
        }
    a->s.capture_waits += captured; /* (at most once for the block: none was asked capturing) */
    if (missed) {
        fallback_undo(a, b, queued);
        lazy_wait(a, b);
    } else if (b->events == 0) {
        fallback_done(a, b);
    }
    return first;
}

/* Every user has freed b but the notices that would let a stream reuse it
 * have not arrived: as a fallback, each other user stream is asked whether
 * it is idle (then it needs nothing more).  If one is busy, a block of at
 * least fallback_min records an event on each busy one, and once the host
 * sees them all complete the block goes home (ag_base_poll), unless a
 * notice recycled it first (its version moved).  A smaller block waits for
 * its notices, which recycle most blocks at no device cost, and a pool
 * miss that still finds it waiting records the events then: recorded later
 * than the last use, they order after it just as well.  The users are in
 * b's scratch row; room for the events, or for the waiting entry, was
 * reserved by the caller. */
static ag_status defer_free(ag_memalloc *a, ag_block *b)
{
    const uint64_t *any = ag_mif_scratch(a, b);
    uint32_t u;
    if (!fallback_now(a, b)) {
        bool busy = false;
        AG_MIF_EACH(any, a->w, u)
            busy = busy || !ag_stream_idle(a, u);
        if (!busy) {
            fallback_done(a, b); /* every user was idle already: home at once */
            return AG_OK;
        }
        if (!a->no_stream_query) {
            lazy_wait(a, b);
            return AG_OK;
        }
        /* the device proved unable to tell just now: no query had
         * succeeded before, so the events were reserved */
    }
    return defer_now(a, b, any);
}

/* Whether the block of a waiting entry still waits: no notice recycled it
 * (version), and no event was recorded for it. */
static bool lazy_waiting(const ag_lazy *e)
{
    const ag_block *b = e->blk;
    return b->version == e->version && b->state == AG_BLK_LIVE && b->users == 0 && b->events == 0;
}

ag_status ag_lazy_grow(ag_memalloc *a)
{
    uint32_t keep = 0;
    for (uint32_t k = 0; k < a->nlazy; k++)
        if (lazy_waiting(&a->lazy[k]))
            a->lazy[keep++] = a->lazy[k];
    a->nlazy = keep;
    /* grow only a list still three quarters full: amortised, each entry is
     * looked at a bounded number of times */
    if (keep < a->caplazy - a->caplazy / 4u)
        return AG_OK;
    ag_lazy *l = ag_realloc_double(a->ctx, a->lazy, &a->caplazy, sizeof *l, 16u);
    if (!l)
        return AG_OOM(a->ctx);
    a->lazy = l;
    return AG_OK;
}

ag_status ag_lazy_flush(ag_memalloc *a)
{
    uint8_t asked[AG_ALLOC_MAX_STREAMS];
    memset(asked, 0, a->n);
    uint32_t keep = 0;
    ag_status first = AG_OK;
    for (uint32_t k = 0; k < a->nlazy; k++) {
        ag_lazy e = a->lazy[k];
        if (!lazy_waiting(&e))
            continue; /* a notice recycled it */
        if (first != AG_OK) {
            a->lazy[keep++] = e;
            continue;
        }
        ag_block *b = e.blk;
        uint64_t *any = ag_mif_users(a, b);
        ag_mif_clear(any, a->w, 0, b->birth);
        uint32_t u, nbusy = 0;
        ag_status st = AG_OK;
        bool capturing = false; /* a user this look found capturing (asked 3) */
        AG_MIF_EACH(any, a->w, u)
            if (!ag_stream_seen_idle(a, u, asked)) {
                nbusy++;
                capturing = capturing || asked[u] == 3;
                if (st == AG_OK)
                    st = ag_pend_reserve(a, u);
            }
        if (st == AG_OK && nbusy)
            st = ag_ev_reserve(a, b->birth, nbusy);
        if (st != AG_OK) {
            first = st; /* it stays waiting */
            a->lazy[keep++] = e;
            continue;
        }
        if (nbusy == 0) {
            fallback_done(a, b);
            continue;
        }
        if (capturing) {
            a->s.capture_waits++;
            a->lazy[keep++] = e;
            continue;
        }
        a->s.fallbacks_recorded++;
        b->events = nbusy;
        uint64_t queued = a->npend;
        bool missed = false, declined = false; /* an event the device refused, or a user that captures */
        AG_MIF_EACH(any, a->w, u)
            if (asked[u] != 1) {
                ag_pend_out out = ag_pend_record(a, u, b, false, &first);
                if (out == AG_PEND_CAPTURING)
                    asked[u] = 3;
                declined = declined || out == AG_PEND_CAPTURING;
                missed = missed || out != AG_PEND_QUEUED;
            }
        a->s.capture_waits += declined; /* (once for the block) */
        if (missed) {
            a->s.fallbacks_recorded--;
            fallback_undo(a, b, queued);
            a->lazy[keep++] = (ag_lazy){b, b->version};
        }
    }
    a->nlazy = keep;
    return first;
}

/* Whether s's view of b is empty once s's own bit is cleared. */
static bool row_empty_but(const ag_memalloc *a, const ag_block *b, uint32_t s)
{
    const uint64_t *row = ag_mif_view(a, b, s);
    for (uint32_t k = 0; k < a->w; k++) {
        uint64_t word = row[k];
        if (k == s / 64u)
            word &= ~(UINT64_C(1) << (s % 64u));
        if (word)
            return false;
    }
    return true;
}

/* The last use of a shared block, not known free by stream: the fallback.
 * Apart, so that the common frees do not pay for its frame. */
static __attribute__((noinline)) ag_status last_free(ag_memalloc *a, ag_block *b, uint32_t stream)
{
    ag_assert(b->users == 1 && b->occ[stream] == 1); /* the one use left is stream's */
    AG_TRY(ag_lrec_reserve(a, stream));
    AG_TRY(ag_mif_room(a, b, stream));
    /* Reserve the fallback's events, or its waiting entry, before changing
     * anything (one event per stream that any view still counts). */
    uint64_t *any = ag_mif_users(a, b);
    /* The birth stream needs no event: the block goes back to its pool,
     * where its own order covers its last use. */
    ag_mif_clear(any, a->w, 0, b->birth);
    uint32_t nusers = 0;
    for (uint32_t k = 0; k < a->w; k++)
        for (uint64_t m = any[k]; m; m &= m - 1u)
            nusers++;
    bool now = fallback_now(a, b);
    ag_status dev = AG_OK; /* the device could not make the events */
    if (nusers && (now || !a->stream_query_ok)) { /* (the device may yet prove unable to tell) */
        uint32_t u;
        AG_MIF_EACH(any, a->w, u)
            AG_TRY(ag_pend_reserve(a, u));
        dev = ag_ev_reserve(a, stream, nusers);
        if (dev != AG_OK && dev != AG_EDEVICE)
            return dev;
    }
    if (nusers) /* (with now, should a user capture) */
        AG_TRY(ag_lazy_reserve(a));
    b->occ[stream] = 0;
    b->users = 0;
    ag_mif_clear(ag_mif_own(a, b, stream), a->w, 0, stream);
    if (nusers == 0) {
        /* only the birth stream may still be busy with it: home at once */
        ag_stat_unused(a, b, false);
        a->s.polled_recycles++;
        ag_birth_recycle(a, b);
        return AG_OK;
    }
    ag_stat_unused(a, b, true);
    uint32_t version = b->version;
    ag_status st = dev;
    if (dev == AG_OK) {
        st = defer_free(a, b);
    } else {
        /* no event to record: the block waits for its notices, or for a
         * pool miss to record them; the use is released all the same */
        lazy_wait(a, b);
    }
    /* still waiting (not home at once): the other streams may learn of the
     * release from stream's notices before the fallback completes */
    if (b->version == version)
        ag_lrec_append(a, stream, b);
    return st;
}

ag_status ag_multi_free(ag_memalloc *a, ag_block *b, uint32_t stream)
{
    if (a->cfg.mem_type == AG_MEM_HOST) {
        b->occ[stream]--;
        if (--b->users == 0) {
            ag_stat_unused(a, b, false);
            ag_birth_recycle(a, b);
        }
        return AG_OK;
    }
    if (!b->shared) {
        b->occ[stream]--;
        if (--b->users == 0) {
            ag_stat_unused(a, b, false);
            global_recycle(a, b, stream);
        }
        return AG_OK;
    }
    if (b->users == 1) {
        /* The last use, and stream knows every other one is over: recycle
         * at once, with no bookkeeping for notices or the fallback.  The
         * use count guards the bitmap: a block some stream still declares
         * in use is never recycled, whatever a view says. */
        if (!row_empty_but(a, b, stream))
            return last_free(a, b, stream);
        b->occ[stream] = 0;
        b->users = 0;
        ag_stat_unused(a, b, false);
        global_recycle(a, b, stream);
        return AG_OK;
    }
    /* not the last use: stream may release its share, to be told in its
     * notices */
    if (b->occ[stream] == 1) {
        AG_TRY(ag_lrec_reserve(a, stream));
        AG_TRY(ag_mif_room(a, b, stream));
    }
    b->occ[stream]--;
    b->users--;
    if (b->occ[stream] == 0) {
        ag_mif_clear(ag_mif_own(a, b, stream), a->w, 0, stream);
        ag_lrec_append(a, stream, b);
    }
    return AG_OK;
}

/* ---- event kernels ---- */

static ag_status chan_get(ag_memalloc *a, uint32_t src, uint32_t dst, ag_chan **out)
{
    ag_chan **slot = &a->chans[(size_t)src * a->n + dst];
    if (!*slot) {
        ag_chan *c = ag_alloc(a->ctx, ag_chan_bytes(a->w));
        if (!c)
            return AG_OOM(a->ctx);
        memset(c, 0, sizeof *c); /* the slots are written before they are read */
        c->notes = (ag_notice *)(c + 1);
        c->rows = (uint64_t *)(c->notes + AG_CHAN_SLOTS);
        c->capnotes = AG_CHAN_SLOTS;
        ag_status st = ag_dev_event_create(a->dev, &c->ev);
        if (st != AG_OK) {
            ag_dev_note(a);
            ag_free(a->ctx, c, ag_chan_bytes(a->w));
            return AG_ERR(a->ctx, st, "event from stream %u to stream %u: %s", src, dst, a->devmsg);
        }
        c->dst = dst;
        c->made = a->made;
        a->made = c;
        *slot = c;
    }
    *out = *slot;
    return AG_OK;
}

static ag_status chan_reserve(ag_memalloc *a, ag_chan *c, uint32_t more)
{
    if (c->nnotes + more <= c->capnotes)
        return AG_OK;
    uint32_t nc = c->capnotes;
    while (nc < c->nnotes + more)
        nc *= 2u;
    /* the notices, then their rows, in one allocation */
    ag_notice *nt = ag_alloc(a->ctx, ag_chan_slot_bytes(nc, a->w));
    if (!nt)
        return AG_OOM(a->ctx);
    uint64_t *rows = (uint64_t *)(nt + nc);
    if (c->nnotes) {
        memcpy(nt, c->notes, c->nnotes * sizeof *nt);
        memcpy(rows, c->rows, (size_t)c->nnotes * a->w * sizeof(uint64_t));
    }
    if (!ag_chan_slots_inline(c))
        ag_free(a->ctx, c->notes, ag_chan_slot_bytes(c->capnotes, a->w));
    c->notes = nt;
    c->rows = rows;
    c->capnotes = nc;
    return AG_OK;
}

/* A send from a capturing stream: its record goes into the graph, as the
 * caller asked, but stands for none of src's eager work, so it carries
 * nothing; the releases and the borrowed blocks it would carry wait for
 * the next send from src to dst outside a capture.  It records the
 * channel's graph event, never its eager one: a launch of the graph
 * records the event again, at the launch's point, and the eager one must
 * keep src's last eager point, which what the channel still holds was
 * sent with. */
static __attribute__((noinline)) ag_status captured_send(ag_memalloc *a, ag_chan *c, uint32_t src)
{
    if (!c->gev)
        AG_TRY(ag_dev_event_create(a->dev, &c->gev));
    AG_TRY(ag_dev_event_record(a->dev, c->gev, a->streams[src]));
    a->s.captured_kernels++;
    c->glast = true;
    return AG_OK;
}

ag_status ag_multi_send(ag_memalloc *a, uint32_t src, uint32_t dst)
{
    ag_chan *c = NULL;
    AG_TRY(chan_get(a, src, dst, &c));
    ag_astream *s = &a->st[src];
    /* The entries since the last send to dst (an upper bound: some may
     * name recycled blocks). */
    uint32_t from = s->nlive ? ag_lrec_cursor(s, dst) : s->nlrec;
    if (from < s->nlrec)
        AG_TRY(chan_reserve(a, c, s->nlrec - from));
    /* The channel's event stands for src's eager work only: even a send
     * that carries nothing records the graph's event when captured
     * (captured_send), for a launch would move the channel's. */
    bool eager = true;
    ag_status st = ag_dev_event_record_eager(a->dev, c->ev, a->streams[src], &eager);
    if (st == AG_OK && !eager)
        st = captured_send(a, c, src);
    if (st != AG_OK) {
        ag_dev_note(a);
        return AG_ERR(a->ctx, st, "send from stream %u to stream %u: %s", src, dst, a->devmsg);
    }
    c->recorded = true;
    if (!eager)
        return AG_OK;
    c->glast = false;
    for (uint32_t k = from; k < s->nlrec; k++) {
        if (!ag_lrec_live(&s->lrec[k]))
            continue; /* recycled since */
        ag_block *b = s->lrec[k].blk;
        ag_notice *n = &c->notes[c->nnotes];
        n->blk = b;
        n->version = s->lrec[k].version;
        n->jep = b->jep;
        if (a->w == 1)
            c->rows[c->nnotes] = b->mif[src];
        else
            memcpy(c->rows + (size_t)c->nnotes * a->w, ag_mif_view(a, b, src), a->w * sizeof(uint64_t));
        c->nnotes++;
        a->s.notices_sent++;
    }
    ag_lrec_set_cursor(s, dst, s->nlrec);
    /* Borrowed blocks born on dst go home with this event. */
    ag_block *b;
    while (s->borrow.count && (b = s->borrow.by_birth[dst]) != NULL) {
        ag_borrow_remove(a, &s->borrow, b);
        b->state = AG_BLK_TRANSIT;
        b->link = c->home;
        c->home = b;
        a->transit_bytes += b->size;
    }
    return AG_OK;
}

/* Applies what c carried to dst: occupancy merged, recycles, blocks home. */
static void chan_apply(ag_memalloc *a, ag_chan *c, uint32_t dst)
{
    for (uint32_t k = 0; k < c->nnotes; k++) {
        ag_notice *n = &c->notes[k];
        ag_block *b = n->blk;
        if (b->version != n->version || b->state != AG_BLK_LIVE) {
            a->s.notices_stale++; /* recycled since: another waiter was first */
            continue;
        }
        if (!ag_mif_try_room(a, b, dst)) {
            /* no host memory for dst's row: dst learns nothing from it,
             * and the block waits for the fallback (or a later notice) */
            a->s.notices_dropped++;
            continue;
        }
        a->s.notices_applied++;
        /* A stream that joined since the send is absent from the carried
         * row, yet still uses the block: its bit must survive the merge. */
        uint64_t *d = ag_mif_own(a, b, dst);
        if (n->jep == b->jep)
            ag_row_and(d, c->rows + (size_t)k * a->w, a->w);
        else
            ag_row_and_since(d, a->n, c->rows + (size_t)k * a->w, b->joined, n->jep);
        if (b->users == 0 && !ag_row_any(d, a->w)) {
            ag_stat_unpend(a, b);
            global_recycle(a, b, dst);
        }
    }
    c->nnotes = 0;
    ag_block *b = c->home;
    c->home = NULL;
    while (b) {
        ag_block *nx = b->link;
        ag_assert(b->birth == dst);
        a->s.returned_home++;
        a->transit_bytes -= b->size;
        ag_birth_recycle(a, b);
        b = nx;
    }
}

ag_status ag_multi_wait(ag_memalloc *a, uint32_t dst, uint32_t src)
{
    ag_chan *c = a->chans[(size_t)src * a->n + dst];
    if (!c || !c->recorded)
        return AG_OK;
    ag_status st;
    if (c->glast || (!c->nnotes && !c->home)) {
        /* applies nothing (most sends carry nothing; after a captured send,
         * what the channel holds waits for the next eager one): the
         * caller's order alone, captured or not */
        st = ag_dev_stream_wait_event(a->dev, a->streams[dst], c->glast ? c->gev : c->ev);
    } else {
        bool eager = true;
        st = ag_dev_stream_wait_event_eager(a->dev, a->streams[dst], c->ev, &eager);
        if (st == AG_OK && eager) {
            chan_apply(a, c, dst);
        } else if (st == AG_OK) {
            /* dst captures: the wait goes into the graph, and orders none
             * of dst's eager work; what the channel carries waits for
             * dst's next wait for src outside a capture */
            a->s.captured_kernels++;
            st = ag_dev_stream_wait_event(a->dev, a->streams[dst], c->ev);
        }
    }
    if (st != AG_OK) {
        ag_dev_note(a);
        return AG_ERR(a->ctx, st, "stream %u waiting for stream %u: %s", dst, src, a->devmsg);
    }
    return AG_OK;
}

/* b's birth stream learns what every other stream knows (the clean, when
 * everything enqueued has run).  Sparse: a view without a row of its own
 * is the common one, which holds the birth's view already.  False when
 * there was no host memory for the birth's row. */
static bool birth_learns_all(ag_memalloc *a, ag_block *b)
{
    uint32_t w = a->w;
    if (w == 1) {
        for (uint32_t o = 0; o < a->n; o++)
            if (o != b->birth)
                b->mif[b->birth] &= b->mif[o];
        return true;
    }
    uint64_t *d = NULL;
    for (uint32_t r = 0; r < b->nrows; r++)
        if (ag_mif_rowsrc(w, b)[r] != b->birth) {
            if (!d) {
                /* may add a row, or move them all: read again below */
                if (!ag_mif_try_room(a, b, b->birth))
                    return false;
                d = ag_mif_own(a, b, b->birth);
            }
            ag_row_and(d, ag_mif_row(b, w, r), w);
        }
    return true;
}

ag_status ag_multi_clean(ag_memalloc *a)
{
    AG_TRY(ag_clean_sync(a));
    /* The front caches stay: the next execution's first requests find
     * their blocks whole; a pool miss gives them back (malloc_miss). */
    a->recent_kept = true;
    /* Everything enqueued has run: every channel's load may be applied. */
    for (ag_chan *c = a->made; c; c = c->made)
        if (c->nnotes || c->home)
            chan_apply(a, c, c->dst);
    /* Local-recycle entries: the birth stream learns from every stream. */
    bool lrecs = a->s.local_recycles != a->clean_lrecs;
    for (uint32_t s = 0; lrecs && s < a->n; s++) {
        ag_astream *as = &a->st[s];
        for (uint32_t k = 0; as->nlive && k < as->nlrec; k++) {
            if (!ag_lrec_live(&as->lrec[k]))
                continue;
            ag_block *b = as->lrec[k].blk;
            /* without the birth's row, its users being none is enough:
             * every use it had has run */
            bool learnt = birth_learns_all(a, b);
            if (b->users == 0 && (!learnt || !ag_row_any(ag_mif_view(a, b, b->birth), a->w))) {
                ag_stat_unpend(a, b);
                ag_birth_recycle(a, b);
            }
        }
    }
    /* The lists start afresh: blocks still in use forget their entries
     * (uncounting them; entries no block counts are dropped with the list). */
    for (uint32_t s = 0; lrecs && s < a->n; s++) {
        ag_astream *as = &a->st[s];
        for (uint32_t k = 0; as->nlive && k < as->nlrec; k++)
            if (ag_lrec_live(&as->lrec[k]))
                ag_lrec_forget(a, as->lrec[k].blk);
        as->nlive = 0;
        ag_lrec_reset(as);
    }
    a->clean_lrecs = a->s.local_recycles;
    /* Deferred frees: every event has completed, every stream is idle; the
     * synchronise above marked every stream's epoch seen, so the poll asks
     * the device nothing (nor counts a second synchronisation). */
    AG_TRY(ag_base_poll(a, false));
    ag_assert(a->npend == 0);
    for (uint32_t k = 0; k < a->nlazy; k++)
        if (lazy_waiting(&a->lazy[k]))
            fallback_done(a, a->lazy[k].blk);
    a->nlazy = 0;
    /* Every borrowed block goes home; pools give wholly free regions to L1. */
    bool borrows = a->s.borrow_recycles != a->clean_borrows;
    for (uint32_t s = 0; borrows && s < a->n; s++) {
        ag_borrow *br = &a->st[s].borrow;
        for (uint32_t o = 0; o < a->n && br->count; o++) {
            ag_block *b;
            while ((b = br->by_birth[o]) != NULL) {
                ag_borrow_remove(a, br, b);
                a->s.returned_home++;
                ag_birth_recycle(a, b);
            }
        }
    }
    a->clean_borrows = a->s.borrow_recycles;
    /* Pools give their wholly free regions to L1.  With steal they may keep
     * them instead: after the synchronise they are idle, and a pool that
     * needs memory takes one whole, with no event, before L1 grows; so the
     * next execution finds the regions this one cut, where merging them in
     * L1 would have it cut them anew (and grow the device for what no
     * longer fits).  A cache limit still gives them to L1, which gives the
     * excess to the device. */
    if (!a->cfg.steal || a->cfg.l1_cache_limit != UINT64_MAX)
        ag_pools_release(a, false);
    return AG_OK;
}
