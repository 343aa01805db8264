/* Failure tests of the allocator: host allocation failure sweeps, device
 * faults at every N of every entry (return and poison modes), faults during
 * the reclaim, the gather and a fallback, the host out of memory around a
 * device refusal, event records that fail, the destroy while a stream
 * captures, a free on a failed device, entry checks and configuration
 * errors. */
#include <sched.h>
#include <stdatomic.h>

#include "support/agtest.h"
#include "support/rt/alloc_fix.h"

/* One field out of range per case, the rest default: creation fails with
 * AG_EINVAL and a message naming what is wrong. */
static void bad_config(fix *f, void (*spoil)(ag_alloc_config *), const char *msg)
{
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    spoil(&c);
    ag_memalloc *a = NULL;
    assert_int_equal(ag_alloc_create(f->ctx, f->dev, f->s, &c, &a), AG_EINVAL);
    assert_null(a);
    assert_errmsg(f->ctx, msg);
}

static void no_streams(ag_alloc_config *c)
{
    c->nstreams = 0;
}

static void odd_min_block(ag_alloc_config *c)
{
    c->min_block = 500;
}

static void zero_alone_round(ag_alloc_config *c)
{
    c->alone_round = 0;
}

static void odd_alone_round(ag_alloc_config *c)
{
    c->alone_round = 1000;
}

static void many_front_blocks(ag_alloc_config *c)
{
    c->front_blocks = AG_ALLOC_MAX_FRONT + 1u;
}

static void test_config_errors(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 1, AG_ALLOC_MULTI, 0);
    bad_config(&f, no_streams, "nstreams 0");
    bad_config(&f, odd_min_block, "min_block 500");
    bad_config(&f, zero_alone_round, "alone_round must be nonzero");
    bad_config(&f, odd_alone_round, "alone_round 1000 must be a multiple of min_block 512");
    bad_config(&f, many_front_blocks, "front_blocks 9 is not in 0..8");
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(f.a, 1, 64, &b), AG_EINVAL);
    assert_errmsg(f.ctx, "stream 1 out of range");
    assert_int_equal(ag_alloc_malloc(f.a, 0, 0, &b), AG_EINVAL);
    assert_int_equal(ag_alloc_send(f.a, 0, 0), AG_EINVAL);
    fix_close(&f);
}

/* A host out of memory around a device refusal is the host's: on
 * reclaim_text the reclaim serves the request the device refused, so at
 * every host allocation of the replay a failure reads "out of memory" and
 * never "cannot allocate" (nor counts in ooms), including failures in that
 * request (the host records its retry needs were taken before the device
 * was asked, so none fails after the refusal). */
static void test_host_oom_after_refusal(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        uint64_t during = 0;
        for (uint64_t k = 1;; k++) {
            assert_true(k < 5000);
            ag_testalloc ta;
            ag_ctx *ctx = agtest_ctx_counted(&ta), *dctx = agtest_ctx();
            ag_device_sim_config dc = ag_device_sim_defaults();
            dc.capacity[AG_MEM_HBM] = 4u << 20;
            ag_device *dev = NULL;
            assert_int_equal(ag_device_sim_create(dctx, &dc, &dev), AG_OK);
            ag_alloc_trace *t = NULL;
            assert_int_equal(ag_alloc_trace_parse(ctx, "t", reclaim_text, strlen(reclaim_text), &t), AG_OK);
            ag_alloc_config c;
            ag_alloc_config_default(&c);
            c.mode = (ag_alloc_mode)mode;
            ag_alloc_replay_opts o = {.size = sizeof o, .kernel_ticks = 8};
            ag_alloc_replay_result r = {.size = sizeof r};
            ta.fail_at = ta.calls + k;
            ag_status st = ag_alloc_replay(ctx, dev, t, &c, &o, &r);
            ta.fail_at = 0;
            bool injected = ta.nfail > 0;
            if (st != AG_OK) {
                assert_true(injected);
                assert_int_equal(st, AG_ENOMEM);
                assert_true(agtest_errmsg_has(ctx, "out of memory"));
                assert_false(agtest_errmsg_has(ctx, "cannot allocate"));
                during += agtest_errmsg_has(ctx, "t:7:"); /* in the request the device refused */
            } else {
                assert_int_equal(r.stats.ooms, 0);
                assert_true(r.stats.retries >= 1);
            }
            ag_alloc_trace_destroy(t);
            close_empty(dctx, dev);
            ag_ctx_destroy(ctx);
            assert_int_equal(ta.live_blocks, 0);
            if (!injected)
                break;
        }
        assert_true(during > 0);
    }
}

static ag_status sweep_body(ag_ctx *ctx, void *ud)
{
    ag_alloc_replay_result r;
    return replay_text(ctx, trace_text, *(ag_alloc_mode *)ud, 3, &r);
}

static void test_oom_sweep(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        ag_alloc_mode m = (ag_alloc_mode)mode;
        assert_true(AG_TEST_OOM_SWEEP(sweep_body, &m) > 10);
    }
}

/* Every device entry failing at every N: a clean error, the heaps intact,
 * nothing left on the device after the allocator is gone. */
static void test_device_fault_sweep(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        for (int pmode = 0; pmode < 2; pmode++) {
            uint64_t nfail = 1;
            for (uint64_t n = 1; nfail; n++) {
                assert_true(n < 10000);
                ag_ctx *ctx = agtest_ctx();
                ag_device *sim = NULL, *dev = NULL;
                assert_int_equal(ag_device_sim_create(ctx, NULL, &sim), AG_OK);
                ag_dev_fault fl;
                ag_dev_fault_init(&fl, AG_DEV_ENTRY_ALL, n, 0, pmode ? AG_FAULT_POISON : AG_FAULT_RETURN);
                assert_int_equal(ag_device_fault_wrap(ctx, sim, &fl, &dev), AG_OK);
                ag_dev_stream *s[3] = {0};
                ag_status st = AG_OK;
                for (int k = 0; k < 3 && st == AG_OK; k++)
                    st = ag_dev_stream_create(dev, &s[k]);
                ag_memalloc *a = NULL;
                if (st == AG_OK) {
                    ag_alloc_config c;
                    ag_alloc_config_default(&c);
                    c.nstreams = 3;
                    c.mode = (ag_alloc_mode)mode;
                    st = ag_alloc_create(ctx, dev, s, &c, &a);
                }
                ag_block *b[4] = {0};
                uint32_t step = 0;
                /* a fixed script; the first failure stops it */
                for (; st == AG_OK && step < 14; step++) {
                    switch (step) {
                    case 0: st = ag_alloc_malloc(a, 0, 3000, &b[0]); break;
                    case 1: st = ag_alloc_access(a, b[0], 1); break;
                    case 2: st = ag_alloc_access(a, b[0], 2); break;
                    case 3: st = ag_alloc_malloc(a, 1, 3u << 20, &b[1]); break;
                    case 4: st = ag_alloc_free(a, b[0], 0); break;
                    case 5: st = ag_alloc_free(a, b[0], 1); break;
                    case 6: st = ag_alloc_send(a, 0, 2); break;
                    case 7: st = ag_alloc_send(a, 1, 2); break;
                    case 8: st = ag_alloc_free(a, b[0], 2); break;
                    case 9: st = ag_alloc_wait(a, 2, 0); break;
                    case 10: st = ag_alloc_wait(a, 2, 1); break;
                    case 11: st = ag_alloc_free(a, b[1], 1); break;
                    case 12: st = ag_alloc_malloc(a, 2, 3000, &b[2]); break;
                    case 13: st = ag_alloc_sync(a, AG_SYNC_CLEAN); break;
                    }
                }
                if (st != AG_OK) {
                    assert_true(st == AG_ENOMEM || st == AG_EDEVICE);
                    assert_true(ag_ctx_errmsg(ctx)[0] != '\0');
                }
                if (a)
                    assert_true(heaps_ok(a));
                ag_alloc_destroy(a);
                for (int k = 0; k < 3; k++)
                    ag_dev_stream_destroy(dev, s[k]);
                nfail = fl.nfail;
                ag_device_destroy(dev);
                close_empty(ctx, sim);
            }
        }
    }
}

/* The out-of-memory traces in both modes under a device failing at every
 * N: the reclaim's synchronise and the lent block meet every failure
 * cleanly, and the error the replay returns keeps its message. */
static void test_reclaim_fault_sweep(void **state)
{
    (void)state;
    ag_alloc_stats ran = {.size = sizeof ran};
    for (int k = 0; k < 4; k++) {
        const char *text = k % 2 == 0 ? reclaim_text : lend_text;
        ag_alloc_mode mode = k < 2 ? AG_ALLOC_MULTI : AG_ALLOC_BASELINE;
        for (int pmode = 0; pmode < 2; pmode++)
            for (uint64_t n = 1; trace_fault_at(text, mode, 4u << 20, 8, 1, pmode, n, &ran); n++)
                assert_true(n < 10000);
    }
}

/* The same sweep over two executions of a trace whose second one gathers
 * idle regions back into L1 (tests/lit/rt/Inputs/gather.trace): a device
 * failure anywhere, the gather's idle queries included. */
static const char gather_text[] = "streams 3\nalloc b1 3145728 0\nfree b1 0\nalloc b2 20971520 2\nfree b2 2\n"
                                  "alloc b3 300000 2\nfree b3 2\nalloc b4 12582912 0\nalloc b5 20971520 2\n"
                                  "free b5 2\nrecord 0 2\nwait 2 0\nuse b4 2\nfree b4 2\nfree b4 0\nsync\n";

static void test_gather_fault_sweep(void **state)
{
    (void)state;
    ag_alloc_stats ran = {.size = sizeof ran};
    for (uint32_t ticks = 0; ticks <= 8; ticks += 8)
        for (int pmode = 0; pmode < 2; pmode++)
            for (uint64_t n = 1; trace_fault_at(gather_text, AG_ALLOC_MULTI, 0, ticks, 2, pmode, n, &ran); n++)
                assert_true(n < 10000);
    assert_true(ran.regions_gathered > 0); /* the replays that ran through did gather */
}

/* The same sweep over a shared block whose fallback waits for a pool miss
 * (tests/lit/rt/Inputs/fallback.trace, two executions): its user idle by
 * the miss (ticks 3) or still busy there, so that the miss records the
 * event (ticks 40).  The idle queries at the last free and at the miss,
 * the event the miss records and the clean meet every failure cleanly. */
static const char fallback_text[] = "streams 3\nalloc w 4096 2\nfree w 2\nalloc a 131072 0\nalloc f 131072 0\n"
                                    "record 0 1\nwait 1 0\nuse a 1\nfree a 1\nfree a 0\nalloc x 4096 2\n"
                                    "free x 2\nalloc y 4096 2\nfree y 2\nalloc z 4096 2\nfree z 2\n"
                                    "alloc c 131072 0\nfree c 0\nfree f 0\nsync\n";

/* The entries refuse a block of another allocator, and name a NULL out;
 * ooms counts what the device cannot hold, not the host's out of memory. */
static void test_entry_checks(void **state)
{
    (void)state;
    for (int m = 0; m < 2; m++) {
        fix f, g;
        fix_open(&f, 2, m ? AG_ALLOC_BASELINE : AG_ALLOC_MULTI, 0);
        fix_open(&g, 2, m ? AG_ALLOC_BASELINE : AG_ALLOC_MULTI, 0);
        ag_block *b = xmalloc(&g, 0, 4096);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_EINVAL);
        assert_true(agtest_errmsg_has(f.ctx, "free: the block belongs to another allocator"));
        assert_int_equal(ag_alloc_access(f.a, b, 1), AG_EINVAL);
        assert_true(agtest_errmsg_has(f.ctx, "access: the block belongs to another allocator"));
        assert_int_equal(stats(f.a).allocated, 0);
        assert_int_equal(stats(g.a).allocated, 4096);
        assert_int_equal(ag_alloc_free(g.a, b, 0), AG_OK);
        assert_int_equal(ag_alloc_malloc(f.a, 0, 64, NULL), AG_EINVAL);
        assert_true(agtest_errmsg_has(f.ctx, "malloc: out is NULL"));
        ag_block *x = NULL;
        assert_int_equal(ag_alloc_malloc(f.a, 0, UINT64_C(1) << 63, &x), AG_ENOMEM);
        assert_int_equal(stats(f.a).ooms, 1);
        fix_close(&g);
        fix_close(&f);
    }
}

/* The last free of a shared block on a device that can no longer make an
 * event: AG_EDEVICE, and as the header says, the use is released all the
 * same (a second free is refused), in both modes. */
static void test_free_on_failed_device(void **state)
{
    (void)state;
    /* the baseline; the multi mode with the block waiting for its notices
     * (below fallback_min), and recording its events at once (fallback_min
     * 0: the events cannot be made, so it waits instead, in the room
     * reserved for that) */
    for (int m = 0; m < 3; m++) {
        ag_alloc_config c;
        ag_alloc_config_default(&c);
        if (m == 2)
            c.fallback_min = 0;
        fix f;
        fix_open_cfg(&f, 2, m == 1 ? AG_ALLOC_BASELINE : AG_ALLOC_MULTI, 0, &c);
        ag_block *b = xmalloc(&f, 0, 65536);
        assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
        ag_dev_poison(f.dev, "a test fault");
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_EDEVICE);
        assert_true(agtest_errmsg_has(f.ctx, "a test fault"));
        ag_alloc_stats s = stats(f.a);
        assert_int_equal(s.allocated, 0);
        assert_int_equal(s.frees, 1); /* the block's last use is gone */
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_EINVAL);
        if (m == 2)
            assert_int_equal(f.a->nlazy, 1);
        fix_close(&f);
    }
}

/* A kernel that waits for the gate, then writes its block. */
typedef struct late_write {
    atomic_int open;
    void *mem;
    size_t n;
} late_write;

static ag_status late_write_kernel(void *arg)
{
    late_write *w = arg;
    while (!atomic_load(&w->open))
        sched_yield();
    memset(w->mem, 0x5a, w->n);
    return AG_OK;
}

/* Three streams of a simulated device, and a multi-mode allocator of them
 * on a fault wrapper of it that counts the calls of one entry (nothing
 * fails until the test sets fl.fail_at); cfg with its nstreams set.  The
 * allocator's context is the device's (ctx), or one of its own (actx). */
typedef struct faulted {
    ag_ctx *ctx, *actx;
    ag_device *sim, *dev;
    ag_dev_fault fl;
    ag_dev_stream *s[3];
    ag_memalloc *a;
} faulted;

static void faulted_open_in(faulted *f, uint32_t entry, ag_alloc_config *cfg, bool apart)
{
    f->ctx = agtest_ctx();
    f->actx = apart ? agtest_ctx() : f->ctx;
    f->sim = f->dev = NULL;
    assert_int_equal(ag_device_sim_create(f->ctx, NULL, &f->sim), AG_OK);
    ag_dev_fault_init(&f->fl, AG_DEV_ENTRY_BIT(entry), 0, 0, AG_FAULT_RETURN);
    assert_int_equal(ag_device_fault_wrap(f->ctx, f->sim, &f->fl, &f->dev), AG_OK);
    for (int k = 0; k < 3; k++)
        assert_int_equal(ag_dev_stream_create(f->sim, &f->s[k]), AG_OK);
    cfg->nstreams = 3;
    f->a = NULL;
    assert_int_equal(ag_alloc_create(f->actx, f->dev, f->s, cfg, &f->a), AG_OK);
}

static void faulted_open(faulted *f, uint32_t entry, ag_alloc_config *cfg)
{
    faulted_open_in(f, entry, cfg, false);
}

/* The same with the allocator on a context apart from the device's. */
static void faulted_open_apart(faulted *f, uint32_t entry, ag_alloc_config *cfg)
{
    faulted_open_in(f, entry, cfg, true);
}

static void faulted_close(faulted *f)
{
    ag_alloc_destroy(f->a);
    for (int k = 0; k < 3; k++)
        ag_dev_stream_destroy(f->sim, f->s[k]);
    ag_device_destroy(f->dev);
    if (f->actx != f->ctx)
        ag_ctx_destroy(f->actx);
    close_empty(f->ctx, f->sim);
}

/* The multi mode's fallback event failing to record at a shared block's
 * last free (fallback_min 0: recorded at once): the free returns the
 * device's error with its use released, and the block goes home at the
 * latest at the next clean, whether or not its stream sent its notices
 * meanwhile (three streams: 0 the birth, 1 and 2 users; the last free is
 * stream 2's, so the notice 2 -> 0 empties no view while stream 1's use
 * stands in it). */
static void multi_record_fails(int variant)
{
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.fallback_min = 0;
    faulted f;
    faulted_open(&f, AG_DEV_E_EVENT_RECORD, &c);
    ag_memalloc *a = f.a;
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 65536, &b), AG_OK);
    assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_access(a, b, 2), AG_OK);
    /* streams 1 and 2 busy: the fallback records events there */
    char scratch[2][64];
    late_write w[2] = {{.mem = scratch[0], .n = 64}, {.mem = scratch[1], .n = 64}};
    for (int k = 0; k < 2; k++)
        assert_int_equal(ag_dev_launch(f.sim, f.s[k + 1], late_write_kernel, &w[k], "busy"), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
    f.fl.fail_at = f.fl.calls + 1u; /* the first fallback record of the last free */
    ag_status st = ag_alloc_free(a, b, 2);
    f.fl.fail_at = 0;
    assert_int_equal(f.fl.nfail, 1);
    assert_int_equal(st, AG_EDEVICE);
    assert_int_equal(stats(a).allocated, 0);
    assert_int_equal(stats(a).pending, 65536); /* waiting for stream 1 and 2's work */
    for (int k = 0; k < 2; k++)
        atomic_store(&w[k].open, 1);
    if (variant > 0) {
        /* stream 2 tells every other stream of its release */
        for (uint32_t d = 0; d < 2; d++) {
            assert_int_equal(ag_alloc_send(a, 2, d), AG_OK);
            assert_int_equal(ag_alloc_wait(a, d, 2), AG_OK);
        }
    }
    if (variant > 1) {
        /* and its list starts afresh: more releases, sent everywhere */
        for (int i = 0; i < 40; i++) {
            ag_block *x = NULL;
            assert_int_equal(ag_alloc_malloc(a, 0, 4096, &x), AG_OK);
            assert_int_equal(ag_alloc_access(a, x, 2), AG_OK);
            assert_int_equal(ag_alloc_free(a, x, 2), AG_OK);
            for (uint32_t d = 0; d < 2; d++) {
                assert_int_equal(ag_alloc_send(a, 2, d), AG_OK);
                assert_int_equal(ag_alloc_wait(a, d, 2), AG_OK);
            }
            assert_int_equal(ag_alloc_free(a, x, 0), AG_OK);
        }
    }
    assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
    ag_alloc_stats st2 = stats(a);
    assert_int_equal(st2.allocated, 0);
    assert_int_equal(st2.pending, 0);
    assert_int_equal(st2.cached, st2.reserved);
    faulted_close(&f);
}

/* An idle query the device refuses for a stream that does not capture (an
 * injected stream_query failure) at a shared block's last free
 * (fallback_min 0: its fallback asks at once): only a capture forgives
 * the refusal, so this one stands.  The free returns it with the use
 * released, the block keeps waiting (nothing counted as a capture wait),
 * and the clean sends it home. */
static void test_query_refused_eager(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.fallback_min = 0;
    faulted f;
    faulted_open(&f, AG_DEV_E_STREAM_QUERY, &c);
    ag_memalloc *a = f.a;
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 65536, &b), AG_OK);
    assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
    char scratch[64];
    late_write w = {.mem = scratch, .n = 64};
    assert_int_equal(ag_dev_launch(f.sim, f.s[1], late_write_kernel, &w, "busy"), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
    f.fl.fail_at = f.fl.calls + 1u; /* the fallback's idle query of stream 1 */
    ag_status st = ag_alloc_free(a, b, 0);
    f.fl.fail_at = 0;
    assert_int_equal(f.fl.nfail, 1);
    assert_int_equal(st, AG_EDEVICE);
    assert_true(agtest_errmsg_has(f.ctx, "injected fault"));
    ag_alloc_stats s = stats(a);
    assert_int_equal(s.allocated, 0);
    assert_int_equal(s.pending, 65536);
    assert_int_equal(s.capture_waits, 0);
    atomic_store(&w.open, 1);
    assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
    s = stats(a);
    assert_int_equal(s.pending, 0);
    faulted_close(&f);
}

/* At a large block's last free (fallback_min 0) every user is asked before
 * any event is recorded; streams 1 and 2 are busy.  The device refuses one
 * call there, and the free returns the refusal with the use released; the
 * block is never left counting an event that will never come, but waits
 * for a look, as the look's own refused records do.  Once both streams
 * are done, a pool miss's look sends it home without a clean.
 * - AG_DEV_E_STREAM_QUERY: the question for stream 2 (asked second) is
 *   refused, and nothing is recorded, not even on stream 1, whose answer
 *   came first; no event queued, no capture counted.
 * - AG_DEV_E_EVENT_RECORD: every user answered busy, and the first record
 *   (on stream 1) is refused. */
static void large_free_refused(ag_dev_entry entry)
{
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.fallback_min = 0;
    faulted f;
    faulted_open(&f, entry, &c);
    ag_memalloc *a = f.a;
    ag_block *b = NULL, *x = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 65536, &b), AG_OK);
    char scratch[2][64];
    late_write w[2] = {{.mem = scratch[0], .n = 64}, {.mem = scratch[1], .n = 64}};
    for (uint32_t k = 1; k < 3; k++) {
        assert_int_equal(ag_alloc_access(a, b, k), AG_OK);
        assert_int_equal(ag_dev_launch(f.sim, f.s[k], late_write_kernel, &w[k - 1], "busy"), AG_OK);
        assert_int_equal(ag_alloc_free(a, b, k), AG_OK);
    }
    bool query = entry == AG_DEV_E_STREAM_QUERY;
    ag_dev_stats d = {.size = sizeof d};
    ag_dev_stats_get(f.sim, &d);
    uint64_t records = d.records;
    f.fl.fail_at = f.fl.calls + (query ? 2u : 1u);
    ag_status st = ag_alloc_free(a, b, 0);
    f.fl.fail_at = 0;
    assert_int_equal(f.fl.nfail, 1);
    assert_int_equal(st, AG_EDEVICE);
    assert_int_equal(a->nlazy, 1);
    ag_alloc_stats s = stats(a);
    assert_int_equal(s.pending, 65536);
    if (query) {
        assert_true(agtest_errmsg_has(f.ctx, "stream 2: asking whether it is idle"));
        ag_dev_stats_get(f.sim, &d);
        assert_int_equal(d.records, records);
        assert_int_equal(a->npend, 0);
        assert_int_equal(s.capture_waits, 0);
    }
    for (int k = 0; k < 2; k++)
        atomic_store(&w[k].open, 1);
    for (int k = 1; k < 3; k++)
        assert_int_equal(ag_dev_stream_synchronize(f.sim, f.s[k]), AG_OK);
    assert_int_equal(ag_alloc_malloc(a, 0, 1u << 20, &x), AG_OK); /* a pool miss: the look */
    s = stats(a);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.syncs, 0);
    assert_int_equal(ag_alloc_free(a, x, 0), AG_OK);
    faulted_close(&f);
}

static void test_large_free_refused(void **state)
{
    (void)state;
    large_free_refused(AG_DEV_E_STREAM_QUERY);
    large_free_refused(AG_DEV_E_EVENT_RECORD);
}

static void test_multi_record_fails(void **state)
{
    (void)state;
    for (int v = 0; v < 3; v++)
        multi_record_fails(v);
}

/* A look at the waiting blocks that the device refuses does not fail the
 * request it was made for.  Variant 0: a pool miss on stream 2 finds a
 * block waiting for its notices (stream 1, its other user, is busy) and
 * cannot record the block's event; variant 1: a periodic poll
 * (poll_every 1) cannot query the event of a deferred free.  On a healthy
 * device the request is served (by growth, or from the pool), the block
 * stays pending until the clean sends it home, and the refusal is
 * counted; on a poisoned device the request fails with its message. */
static void look_refused(int variant, bool poisoned)
{
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    if (variant == 1) {
        c.fallback_min = 0; /* the last free records its event at once */
        c.poll_every = 1;
    }
    faulted f;
    faulted_open(&f, variant == 0 ? AG_DEV_E_EVENT_RECORD : AG_DEV_E_EVENT_QUERY, &c);
    ag_memalloc *a = f.a;
    atomic_int open = 0;
    assert_int_equal(ag_dev_launch(f.sim, f.s[1], gate_kernel, &open, "gate"), AG_OK);
    ag_block *b = NULL, *x = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 4096, &b), AG_OK);
    assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 0), AG_OK);
    assert_int_equal(a->nlazy, variant == 0 ? 1u : 0u);
    assert_int_equal(a->npend, variant == 1 ? 1u : 0u);
    if (poisoned)
        ag_dev_poison(f.sim, "a test fault"); /* the device refuses on its own */
    else
        f.fl.fail_at = f.fl.calls + 1u;
    ag_status st = ag_alloc_malloc(a, variant == 0 ? 2u : 0u, 4096, &x);
    f.fl.fail_at = 0;
    ag_alloc_stats st1 = stats(a);
    if (poisoned) {
        assert_int_equal(st, AG_EDEVICE);
        assert_true(agtest_errmsg_has(f.ctx, "a test fault"));
        assert_int_equal(st1.reclaims_refused, 0);
        atomic_store(&open, 1);
    } else {
        assert_int_equal(f.fl.nfail, 1);
        assert_int_equal(st, AG_OK);
        assert_int_equal(ag_ctx_last_status(f.ctx), AG_OK);
        assert_int_equal(st1.reclaims_refused, 1);
        assert_int_equal(st1.pending, 4096); /* b still waits for stream 1 */
        assert_int_equal(st1.allocated, 4096);
        atomic_store(&open, 1);
        assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
        ag_alloc_stats st2 = stats(a);
        assert_int_equal(st2.pending, 0);
        assert_int_equal(ag_alloc_free(a, x, variant == 0 ? 2u : 0u), AG_OK);
    }
    faulted_close(&f);
}

static void test_look_refused(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++)
        for (int p = 0; p < 2; p++)
            look_refused(v, p);
}

/* A refused look leaves the blocks it looked at waiting (docs/runtime.md,
 * 'A look the device refuses'): once their users are idle, the next pool
 * miss sends them home, with no clean in between.  Block b (born on stream
 * 0, 4096 bytes) waits for its notices while its other users are busy;
 * stream 0's 1 MiB request misses its pool and its record of b's events is
 * refused: variant 0, b's only busy user (stream 1), so no event at all;
 * variant 1, the second of two (streams 1 and 2), so one event is queued
 * and one is not.  The request is served by growth.  Then every user goes
 * idle, and a second 1 MiB request misses the pool again: its look must
 * find b and send it home (pending 0).  (ag_lazy_flush once dropped b's
 * entry with b->events still counting the refused record: no later miss
 * looked at b again, and only a notice or the clean brought it home.) */
static void refused_look_retried(int variant)
{
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    faulted f;
    faulted_open(&f, AG_DEV_E_EVENT_RECORD, &c);
    ag_memalloc *a = f.a;
    atomic_int open = 0;
    uint32_t nusers = variant == 0 ? 1u : 2u;
    for (uint32_t k = 1; k <= nusers; k++)
        assert_int_equal(ag_dev_launch(f.sim, f.s[k], gate_kernel, &open, "gate"), AG_OK);
    ag_block *b = NULL, *x = NULL, *y = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 4096, &b), AG_OK);
    for (uint32_t k = 1; k <= nusers; k++)
        assert_int_equal(ag_alloc_access(a, b, k), AG_OK);
    for (uint32_t k = 1; k <= nusers; k++)
        assert_int_equal(ag_alloc_free(a, b, k), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 0), AG_OK);
    assert_int_equal(a->nlazy, 1u);
    f.fl.fail_at = f.fl.calls + nusers; /* the last of the miss's records */
    assert_int_equal(ag_alloc_malloc(a, 0, 1u << 20, &x), AG_OK);
    f.fl.fail_at = 0;
    assert_int_equal(f.fl.nfail, 1);
    assert_int_equal(stats(a).reclaims_refused, 1);
    assert_int_equal(stats(a).pending, 4096);
    atomic_store(&open, 1);
    for (uint32_t k = 1; k <= nusers; k++)
        assert_int_equal(ag_dev_stream_synchronize(f.sim, f.s[k]), AG_OK);
    /* a healthy look now: every user of b is idle */
    assert_int_equal(ag_alloc_malloc(a, 0, 1u << 20, &y), AG_OK);
    ag_alloc_stats st = stats(a);
    assert_int_equal(st.reclaims_refused, 1);
    assert_int_equal(st.pending, 0);
    assert_int_equal(ag_alloc_free(a, x, 0), AG_OK);
    assert_int_equal(ag_alloc_free(a, y, 0), AG_OK);
    assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(stats(a).pending, 0);
    faulted_close(&f);
}

static void test_refused_look_retried(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++)
        refused_look_retried(v);
}

/* Destroyed while one of its streams captures: no synchronise can prove
 * that stream's queued work done, so the device memory stays allocated
 * (the kernel still writing it finds it there), the error says why, and
 * the device frees it at its destroy.  With no capture, every byte goes
 * back. */
static void test_destroy_while_capturing(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        fix f;
        fix_open(&f, 2, (ag_alloc_mode)mode, 0);
        ag_block *b = xmalloc(&f, 1, 4096);
        late_write w = {.mem = ag_block_ptr(b), .n = 4096};
        assert_int_equal(ag_dev_launch(f.dev, f.s[1], late_write_kernel, &w, "late write"), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
        assert_int_equal(ag_dev_capture_begin(f.dev, f.s[1]), AG_OK);
        ag_alloc_destroy(f.a);
        assert_true(agtest_errmsg_has(f.ctx, "stream 1 could not be synchronised"));
        assert_true(agtest_errmsg_has(f.ctx, "is capturing"));
        assert_true(agtest_errmsg_has(f.ctx, "bytes of device memory left allocated"));
        ag_dev_stats ds = {.size = sizeof ds};
        ag_dev_stats_get(f.dev, &ds);
        assert_true(ds.mem[AG_MEM_HBM].live > 0);
        atomic_store(&w.open, 1);
        ag_dev_graph *g = NULL;
        assert_int_equal(ag_dev_capture_end(f.dev, f.s[1], &g), AG_OK);
        ag_dev_graph_destroy(f.dev, g);
        assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[1]), AG_OK);
        ag_dev_stats_get(f.dev, &ds);
        assert_int_equal(ds.launches, 1); /* it ran, on memory still allocated */
        assert_true(ds.mem[AG_MEM_HBM].live > 0);
        for (uint32_t k = 0; k < f.n; k++)
            ag_dev_stream_destroy(f.dev, f.s[k]);
        free(f.s);
        ag_device_destroy(f.dev); /* frees what the allocator left */
        ag_ctx_destroy(f.ctx);
    }
}

static void test_fallback_fault_sweep(void **state)
{
    (void)state;
    for (uint32_t ticks = 3; ticks <= 40; ticks += 37) {
        ag_alloc_stats ran = {.size = sizeof ran};
        for (int pmode = 0; pmode < 2; pmode++)
            for (uint64_t n = 1; trace_fault_at(fallback_text, AG_ALLOC_MULTI, 0, ticks, 2, pmode, n, &ran); n++)
                assert_true(n < 10000);
        /* the replays that ran through waited, and at ticks 40 recorded (at
         * ticks 3 a failed idle query at the miss counts as busy, too) */
        assert_true(ran.fallbacks_deferred > 0);
        if (ticks == 40)
            assert_true(ran.fallbacks_recorded > 0);
    }
}

/* A pool miss whose look at the waiting blocks is refused still polls the
 * deferred frees' events: block w (4096 bytes, below fallback_min) waits
 * for its notices while stream 1 is busy, and block d (fallback_min bytes)
 * recorded its event on stream 2 at its last free; stream 2 is then idle.
 * On a healthy device the miss's record for w is refused, yet its poll
 * finds d's event complete and sends d home; w waits on, and the request
 * is served.  On a poisoned device the request fails with the look's
 * message, not the poll's that came after it. */
static void refused_look_polls(bool poisoned)
{
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.fallback_min = 65536;
    c.poll_every = 0; /* the miss polls, nothing else does */
    faulted f;
    faulted_open(&f, AG_DEV_E_EVENT_RECORD, &c);
    ag_memalloc *a = f.a;
    atomic_int open1 = 0, open2 = 0;
    assert_int_equal(ag_dev_launch(f.sim, f.s[1], gate_kernel, &open1, "gate"), AG_OK);
    assert_int_equal(ag_dev_launch(f.sim, f.s[2], gate_kernel, &open2, "gate"), AG_OK);
    ag_block *w = NULL, *d = NULL, *x = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 4096, &w), AG_OK);
    assert_int_equal(ag_alloc_malloc(a, 0, 65536, &d), AG_OK);
    assert_int_equal(ag_alloc_access(a, w, 1), AG_OK);
    assert_int_equal(ag_alloc_access(a, d, 2), AG_OK);
    assert_int_equal(ag_alloc_free(a, w, 1), AG_OK);
    assert_int_equal(ag_alloc_free(a, w, 0), AG_OK);
    assert_int_equal(ag_alloc_free(a, d, 2), AG_OK);
    assert_int_equal(ag_alloc_free(a, d, 0), AG_OK);
    assert_int_equal(a->nlazy, 1);
    assert_int_equal(a->npend, 1);
    atomic_store(&open2, 1);
    assert_int_equal(ag_dev_stream_synchronize(f.sim, f.s[2]), AG_OK);
    if (poisoned) {
        ag_dev_poison(f.sim, "a test fault");
        assert_int_equal(ag_alloc_malloc(a, 0, 1u << 20, &x), AG_EDEVICE);
        /* the look's device call (event_create: no spare event was
         * left for the record), not the poll's (event_query) */
        assert_true(agtest_errmsg_has(f.ctx, "event_create: the device is poisoned: a test fault"));
        assert_false(agtest_errmsg_has(f.ctx, "event_query"));
        assert_int_equal(stats(a).reclaims_refused, 0);
        atomic_store(&open1, 1);
        faulted_close(&f);
        return;
    }
    f.fl.fail_at = f.fl.calls + 1u; /* w's record on stream 1 */
    assert_int_equal(ag_alloc_malloc(a, 0, 1u << 20, &x), AG_OK);
    f.fl.fail_at = 0;
    assert_int_equal(f.fl.nfail, 1);
    ag_alloc_stats s = stats(a);
    assert_int_equal(s.reclaims_refused, 1);
    assert_int_equal(s.polled_recycles, 1);
    assert_int_equal(s.pending, 4096);
    assert_int_equal(a->npend, 0);
    assert_int_equal(ag_ctx_last_status(f.ctx), AG_OK);
    atomic_store(&open1, 1);
    assert_int_equal(ag_alloc_free(a, x, 0), AG_OK);
    assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(stats(a).pending, 0);
    faulted_close(&f);
}

static void test_refused_look_polls(void **state)
{
    (void)state;
    refused_look_polls(false);
    refused_look_polls(true);
}

/* A growth the device fails (a poisoned device: AG_EDEVICE, not its
 * refusal) fails the request at once: no trim, no reclaim, no retry
 * counted, no oom, and the device's message. */
static void test_growth_fails_at_once(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    ag_dev_poison(f.dev, "a test fault");
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(f.a, 0, 4096, &b), AG_EDEVICE);
    assert_null(b);
    assert_true(agtest_errmsg_has(f.ctx, "a test fault"));
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.retries, 0);
    assert_int_equal(s.ooms, 0);
    assert_int_equal(s.reserved, 0);
    assert_int_equal(s.allocated, 0);
    fix_close(&f);
}

/* The allocator's context need not be the device's: a periodic poll whose
 * event query is refused (stream 1 busy, poll_every 1) leaves no error on
 * either context once the request is served; the refusal is counted. */
static void test_refused_poll_own_ctx(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.fallback_min = 0; /* the last free records its event at once */
    c.poll_every = 1;
    faulted f;
    faulted_open_apart(&f, AG_DEV_E_EVENT_QUERY, &c);
    ag_memalloc *a = f.a;
    atomic_int open = 0;
    assert_int_equal(ag_dev_launch(f.sim, f.s[1], gate_kernel, &open, "gate"), AG_OK);
    ag_block *b = NULL, *x = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 4096, &b), AG_OK);
    assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 0), AG_OK);
    assert_int_equal(a->npend, 1);
    f.fl.fail_at = f.fl.calls + 1u;
    assert_int_equal(ag_alloc_malloc(a, 0, 4096, &x), AG_OK);
    f.fl.fail_at = 0;
    assert_int_equal(f.fl.nfail, 1);
    assert_int_equal(stats(a).reclaims_refused, 1);
    assert_int_equal(ag_ctx_last_status(f.actx), AG_OK);
    assert_string_equal(ag_ctx_errmsg(f.actx), "");
    assert_int_equal(ag_ctx_last_status(f.ctx), AG_OK);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_free(a, x, 0), AG_OK);
    assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(stats(a).pending, 0);
    faulted_close(&f);
}

/* A region move whose event the device cannot make (event_create refused
 * once) is given up without failing the request, and leaves no error on
 * the allocator's context (its own, not the device's): stream 0's free
 * 3 MiB region stays, and the device grows for stream 1's request. */
static void test_move_event_refused(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    faulted f;
    faulted_open_apart(&f, AG_DEV_E_EVENT_CREATE, &c);
    ag_memalloc *a = f.a;
    ag_block *x = NULL, *y = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 3u << 20, &x), AG_OK);
    void *px = ag_block_ptr(x);
    assert_int_equal(ag_alloc_free(a, x, 0), AG_OK);
    f.fl.fail_at = f.fl.calls + 1u;
    assert_int_equal(ag_alloc_malloc(a, 1, 3u << 20, &y), AG_OK);
    f.fl.fail_at = 0;
    assert_int_equal(f.fl.nfail, 1);
    assert_int_equal(ag_ctx_last_status(f.actx), AG_OK);
    assert_string_equal(ag_ctx_errmsg(f.actx), "");
    assert_int_equal(ag_ctx_last_status(f.ctx), AG_OK);
    ag_alloc_stats s = stats(a);
    assert_ptr_not_equal(ag_block_ptr(y), px);
    assert_int_equal(s.regions_moved, 0);
    assert_int_equal(s.device_allocs, 2);
    assert_int_equal(ag_heap_cached(&a->st[0].pool[AG_POOL_LARGE]), 4u << 20);
    assert_int_equal(ag_alloc_free(a, y, 1), AG_OK);
    faulted_close(&f);
}

/* A large block's fallback whose second record is refused after the first
 * was queued (fallback_min 0; users 1 and 2 busy; the record on stream 2
 * refused): the queued event must not count for the block any more (its
 * version moves), so that the block waits as a whole.  Once both users
 * are done, the resource clean (which polls before it looks at the
 * waiting blocks) sends it home. */
static void test_second_record_refused(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.fallback_min = 0;
    faulted f;
    faulted_open(&f, AG_DEV_E_EVENT_RECORD, &c);
    ag_memalloc *a = f.a;
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 65536, &b), AG_OK);
    uint32_t version = b->version;
    char scratch[2][64];
    late_write w[2] = {{.mem = scratch[0], .n = 64}, {.mem = scratch[1], .n = 64}};
    for (uint32_t k = 1; k < 3; k++) {
        assert_int_equal(ag_alloc_access(a, b, k), AG_OK);
        assert_int_equal(ag_dev_launch(f.sim, f.s[k], late_write_kernel, &w[k - 1], "busy"), AG_OK);
        assert_int_equal(ag_alloc_free(a, b, k), AG_OK);
    }
    f.fl.fail_at = f.fl.calls + 2u; /* the record on stream 2; stream 1's went through */
    assert_int_equal(ag_alloc_free(a, b, 0), AG_EDEVICE);
    f.fl.fail_at = 0;
    assert_int_equal(f.fl.nfail, 1);
    assert_int_equal(a->npend, 1);
    assert_int_equal(a->nlazy, 1);
    assert_int_equal(b->events, 0);
    assert_int_equal(b->version, version + 1u);
    assert_int_equal(stats(a).pending, 65536);
    for (int k = 0; k < 2; k++)
        atomic_store(&w[k].open, 1);
    assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
    ag_alloc_stats s = stats(a);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.polled_recycles, 1);
    assert_int_equal(a->npend, 0);
    faulted_close(&f);
}

/* A look whose first record is refused keeps every later waiting block
 * waiting, unlooked at: blocks w0 and w1 (born on 0, used by stream 1,
 * busy) wait; the miss's record for w0 is refused, so neither counts as
 * recorded and both stay on the list.  Once stream 1 is done, the next
 * miss sends both home. */
static void test_refused_look_keeps_rest(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.poll_every = 0;
    faulted f;
    faulted_open(&f, AG_DEV_E_EVENT_RECORD, &c);
    ag_memalloc *a = f.a;
    atomic_int open = 0;
    assert_int_equal(ag_dev_launch(f.sim, f.s[1], gate_kernel, &open, "gate"), AG_OK);
    ag_block *wb[2], *x = NULL, *y = NULL;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(ag_alloc_malloc(a, 0, 4096, &wb[k]), AG_OK);
        assert_int_equal(ag_alloc_access(a, wb[k], 1), AG_OK);
        assert_int_equal(ag_alloc_free(a, wb[k], 1), AG_OK);
        assert_int_equal(ag_alloc_free(a, wb[k], 0), AG_OK);
    }
    assert_int_equal(a->nlazy, 2);
    f.fl.fail_at = f.fl.calls + 1u; /* the record for w0 */
    assert_int_equal(ag_alloc_malloc(a, 0, 1u << 20, &x), AG_OK);
    f.fl.fail_at = 0;
    assert_int_equal(f.fl.nfail, 1);
    ag_alloc_stats s = stats(a);
    assert_int_equal(s.reclaims_refused, 1);
    assert_int_equal(s.fallbacks_recorded, 0);
    assert_int_equal(s.pending, 8192);
    assert_int_equal(a->nlazy, 2);
    assert_int_equal(a->npend, 0);
    atomic_store(&open, 1);
    assert_int_equal(ag_dev_stream_synchronize(f.sim, f.s[1]), AG_OK);
    assert_int_equal(ag_alloc_malloc(a, 0, 1u << 20, &y), AG_OK); /* a miss: the look */
    s = stats(a);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.polled_recycles, 2);
    assert_int_equal(s.syncs, 0);
    assert_int_equal(a->nlazy, 0);
    assert_int_equal(ag_alloc_free(a, x, 0), AG_OK);
    assert_int_equal(ag_alloc_free(a, y, 0), AG_OK);
    faulted_close(&f);
}

/* A send the device refused recorded nothing: the channel exists but holds
 * no point of stream 0, so a wait for it is no wait at all (as before any
 * send): AG_OK, and no stream wait reaches the device. */
static void test_wait_after_refused_send(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    faulted f;
    faulted_open(&f, AG_DEV_E_EVENT_RECORD, &c);
    f.fl.mask |= AG_DEV_ENTRY_BIT(AG_DEV_E_STREAM_WAIT); /* counted, never failed */
    ag_memalloc *a = f.a;
    f.fl.fail_at = f.fl.calls + 1u; /* the send's record */
    assert_int_equal(ag_alloc_send(a, 0, 1), AG_EDEVICE);
    f.fl.fail_at = 0;
    assert_int_equal(f.fl.nfail, 1);
    assert_true(agtest_errmsg_has(f.ctx, "send from stream 0 to stream 1"));
    uint64_t calls = f.fl.calls;
    assert_int_equal(ag_alloc_wait(a, 1, 0), AG_OK);
    assert_int_equal(f.fl.calls, calls);
    /* a send that goes through is waited for: a record and a wait */
    assert_int_equal(ag_alloc_send(a, 0, 1), AG_OK);
    assert_int_equal(ag_alloc_wait(a, 1, 0), AG_OK);
    assert_int_equal(f.fl.calls, calls + 2u);
    faulted_close(&f);
}

/* A configuration create must take. */
static void config_taken(fix *f, const ag_alloc_config *c)
{
    ag_memalloc *a = NULL;
    assert_int_equal(ag_alloc_create(f->ctx, f->dev, f->s, c, &a), AG_OK);
    assert_non_null(a);
    ag_alloc_destroy(a);
}

/* A configuration create must refuse, with msg in its error. */
static void config_refused(fix *f, const ag_alloc_config *c, const char *msg)
{
    ag_memalloc *a = NULL;
    assert_int_equal(ag_alloc_create(f->ctx, f->dev, f->s, c, &a), AG_EINVAL);
    assert_null(a);
    assert_errmsg(f->ctx, msg);
}

/* Every documented range of the configuration at its edges: the first
 * value outside is refused with AG_EINVAL and a message naming the field
 * (a field checked later must not be what catches it), the last value
 * inside is taken. */
static void test_config_edges(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    const uint64_t lim = UINT64_MAX >> 2;
    ag_alloc_config d, c;
    ag_alloc_config_default(&d);
    d.nstreams = 2;

    c = d;
    c.size = sizeof c - 1u;
    config_refused(&f, &c, "allocator config: size");
    c = d;
    c.mode = (ag_alloc_mode)2;
    config_refused(&f, &c, "unknown mode 2");
    c = d;
    c.mem_type = (ag_mem_type)AG_MEM_COUNT_;
    config_refused(&f, &c, "unknown memory type");
    c = d;
    c.nstreams = AG_ALLOC_MAX_STREAMS + 1u;
    config_refused(&f, &c, "nstreams 4097 is not in 1..4096");
    c = d;
    c.min_block = 32;
    config_refused(&f, &c, "min_block 32 is not a power of two >= 64");
    c = d;
    c.min_block = 96; /* >= 64, not a power of two */
    config_refused(&f, &c, "min_block 96 is not a power of two >= 64");
    c = d;
    c.page_size = 256; /* below min_block */
    config_refused(&f, &c, "page_size 256 is not a power of two >= min_block");
    c = d;
    c.page_size = 3u << 16;
    config_refused(&f, &c, "page_size 196608 is not a power of two >= min_block");
    c = d;
    c.small_size = c.small_region + 1u;
    config_refused(&f, &c, "small_region 2097152 must hold small_size 2097153");
    c = d;
    c.small_size = 0;
    config_refused(&f, &c, "small_size must be nonzero");
    c = d;
    c.l1_segment = 0;
    config_refused(&f, &c, "l1_segment must be nonzero");
    c = d;
    c.large_region = 0;
    config_refused(&f, &c, "large_region must be nonzero");
    c = d;
    c.large_round = 0;
    config_refused(&f, &c, "large_round must be nonzero");
    c = d;
    c.l1_segment = lim + 1u;
    config_refused(&f, &c, "l1_segment 4611686018427387904 must be at most 4611686018427387903 bytes");
    c = d;
    c.page_size = lim + 1u; /* a power of two */
    config_refused(&f, &c, "page_size 4611686018427387904 must be at most 4611686018427387903 bytes");
    c = d;
    c.large_region = lim + 1u;
    config_refused(&f, &c, "large_region 4611686018427387904 must be at most 4611686018427387903 bytes");
    c = d;
    c.small_region = lim + 1u;
    config_refused(&f, &c, "small_region 4611686018427387904 must be at most 4611686018427387903 bytes");
    c = d;
    c.large_round = 1000;
    config_refused(&f, &c, "large_round 1000 must be a multiple of min_block 512");
    c = d;
    c.small_region = (2u << 20) + 1000u;
    config_refused(&f, &c, "small_region 2098152 must be a multiple of min_block 512");
    c = d;
    c.large_alone = c.large_region + 1u;
    config_refused(&f, &c, "large_alone 20971521 exceeds large_region 20971520");

    /* the last values inside */
    c = d;
    c.nstreams = 1;
    c.mode = AG_ALLOC_BASELINE;
    c.mem_type = (ag_mem_type)(AG_MEM_COUNT_ - 1);
    config_taken(&f, &c);
    c = d;
    c.min_block = 64;
    c.page_size = 64;
    c.front_blocks = AG_ALLOC_MAX_FRONT;
    config_taken(&f, &c);
    c = d;
    c.small_region = c.small_size;
    c.large_alone = c.large_region;
    c.l1_segment = lim;
    config_taken(&f, &c);

    /* the arguments of create */
    ag_memalloc *a = NULL;
    ag_dev_stream *one_null[2] = {f.s[0], NULL};
    assert_int_equal(ag_alloc_create(f.ctx, f.dev, one_null, &d, &a), AG_EINVAL);
    assert_null(a);
    assert_errmsg(f.ctx, "ag_alloc_create: stream 1 is NULL");
    assert_int_equal(ag_alloc_create(f.ctx, NULL, f.s, &d, &a), AG_EINVAL);
    assert_errmsg(f.ctx, "device, streams and out must not be NULL");
    assert_null(a);
    fix_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_oom_after_refusal),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_oom_sweep),
        cmocka_unit_test(test_device_fault_sweep),
        cmocka_unit_test(test_reclaim_fault_sweep),
        cmocka_unit_test(test_gather_fault_sweep),
        cmocka_unit_test(test_fallback_fault_sweep),
        cmocka_unit_test(test_destroy_while_capturing),
        cmocka_unit_test(test_free_on_failed_device),
        cmocka_unit_test(test_entry_checks),
        cmocka_unit_test(test_multi_record_fails),
        cmocka_unit_test(test_query_refused_eager),
        cmocka_unit_test(test_large_free_refused),
        cmocka_unit_test(test_look_refused),
        cmocka_unit_test(test_refused_look_retried),
        cmocka_unit_test(test_refused_look_polls),
        cmocka_unit_test(test_growth_fails_at_once),
        cmocka_unit_test(test_refused_poll_own_ctx),
        cmocka_unit_test(test_move_event_refused),
        cmocka_unit_test(test_second_record_refused),
        cmocka_unit_test(test_refused_look_keeps_rest),
        cmocka_unit_test(test_wait_after_refused_send),
        cmocka_unit_test(test_config_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
