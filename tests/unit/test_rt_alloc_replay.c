/* Unit tests of trace replay: parse errors naming the line, a replay in
 * both modes under the reuse checker, the checker finding an unordered
 * reuse at 3, 256 and 1,024 streams, its marks staying bounded, a use
 * the trace does not order after its alloc, and the timed device's
 * refusals and failures. */
#include "support/agtest.h"
#include "support/rt/alloc_fix.h"
#include "support/rt/dev_fix.h"

/* A timed device (the timing model, kernels of ticks) over a simulated
 * one, with ns streams and ne events made on it (dev_fix.h); with
 * fail_query, a fault wrapper between them fails the inner device's first
 * event_query. */
typedef struct timed_fix {
    ag_ctx *ctx;
    ag_device *sim, *fw, *dev;
    ag_timed *t;
    ag_dev_fault fl;
    rt_handles h;
} timed_fix;

static void timed_open(timed_fix *x, uint64_t ticks, bool fail_query, uint32_t ns, uint32_t ne)
{
    memset(x, 0, sizeof *x);
    x->ctx = agtest_ctx();
    assert_int_equal(ag_device_sim_create(x->ctx, NULL, &x->sim), AG_OK);
    ag_device *inner = x->sim;
    if (fail_query) {
        ag_dev_fault_init(&x->fl, AG_DEV_ENTRY_BIT(AG_DEV_E_EVENT_QUERY), 1, 0, AG_FAULT_RETURN);
        assert_int_equal(ag_device_fault_wrap(x->ctx, x->sim, &x->fl, &x->fw), AG_OK);
        inner = x->fw;
    }
    assert_int_equal(ag_timed_wrap(inner, ticks, &x->t, &x->dev), AG_OK);
    handles_open(&x->h, x->dev, ns, ne);
}

static void timed_close(timed_fix *x)
{
    handles_close(&x->h);
    ag_device_destroy(x->dev);
    if (x->fw)
        ag_device_destroy(x->fw);
    ag_device_destroy(x->sim);
    ag_ctx_destroy(x->ctx);
}

/* The timed device answers a query from its model when the model says
 * busy, yet still refuses what the seam says it refuses: a query of a
 * capturing stream, and any query once the device is poisoned. */
static void test_timed_refuses(void **state)
{
    (void)state;
    timed_fix x;
    timed_open(&x, 10, false, 1, 1);
    ag_ctx *ctx = x.ctx;
    ag_device *dev = x.dev;
    ag_timed *t = x.t;
    ag_dev_stream *s = x.h.s[0];
    ag_dev_event *e = x.h.e[0];
    ag_timed_kernel(t, s); /* busy for 10 ticks in the model */
    assert_int_equal(ag_dev_event_record(dev, e, s), AG_OK);
    bool idle = true, done = true;
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_OK);
    assert_false(idle);
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_OK);
    assert_false(done);
    assert_int_equal(ag_dev_capture_begin(dev, s), AG_OK);
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_EINVAL);
    assert_true(agtest_errmsg_has(ctx, "is capturing"));
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_end(dev, s, &g), AG_OK);
    ag_dev_graph_destroy(dev, g);
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_OK);
    ag_dev_poison(dev, "a test fault");
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_EDEVICE);
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_EDEVICE);
    assert_true(agtest_errmsg_has(ctx, "a test fault"));
    timed_close(&x);
}

/* The timed device says whether a stream captures (without the inner
 * device while none does and it is healthy, refusing once it is
 * poisoned), and an eager record or wait it declines leaves its model as
 * it was: the event keeps its modelled time, the stream its finish. */
static void test_timed_capture(void **state)
{
    (void)state;
    timed_fix x;
    timed_open(&x, 10, false, 2, 2);
    ag_device *dev = x.dev;
    ag_dev_stream *s = x.h.s[0], *s2 = x.h.s[1];
    ag_dev_event *busy = x.h.e[0], *fresh = x.h.e[1];
    ag_timed_kernel(x.t, s); /* busy for 10 ticks in the model */
    assert_int_equal(ag_dev_event_record(dev, busy, s), AG_OK);
    bool capt = true, rec = true, enq = true, done = false, idle = false;
    assert_int_equal(ag_dev_stream_capturing(dev, s, &capt), AG_OK);
    assert_false(capt);
    assert_int_equal(ag_dev_capture_begin(dev, s), AG_OK);
    assert_int_equal(ag_dev_stream_capturing(dev, s, &capt), AG_OK);
    assert_true(capt);
    assert_int_equal(ag_dev_event_record_eager(dev, fresh, s, &rec), AG_OK);
    assert_false(rec);
    assert_int_equal(ag_dev_event_query(dev, fresh, &done), AG_OK);
    assert_true(done); /* not at s's modelled finish */
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_end(dev, s, &g), AG_OK);
    ag_dev_graph_destroy(dev, g);
    assert_int_equal(ag_dev_capture_begin(dev, s2), AG_OK);
    assert_int_equal(ag_dev_stream_wait_event_eager(dev, s2, busy, &enq), AG_OK);
    assert_false(enq);
    assert_int_equal(ag_dev_capture_end(dev, s2, &g), AG_OK);
    ag_dev_graph_destroy(dev, g);
    assert_int_equal(ag_dev_stream_query(dev, s2, &idle), AG_OK);
    assert_true(idle); /* its finish not moved to the busy event's */
    /* eager, as the plain forms: the model moves */
    assert_int_equal(ag_dev_stream_wait_event_eager(dev, s2, busy, &enq), AG_OK);
    assert_true(enq);
    assert_int_equal(ag_dev_stream_query(dev, s2, &idle), AG_OK);
    assert_false(idle);
    assert_int_equal(ag_dev_event_record_eager(dev, fresh, s, &rec), AG_OK);
    assert_true(rec);
    assert_int_equal(ag_dev_event_query(dev, fresh, &done), AG_OK);
    assert_false(done);
    ag_dev_poison(dev, "a test fault");
    assert_int_equal(ag_dev_stream_capturing(dev, s, &capt), AG_EDEVICE);
    assert_true(agtest_errmsg_has(x.ctx, "a test fault"));
    timed_close(&x);
}

/* The timed device passes on an inner event_query failure where its model
 * says the event is complete (as its stream_query does). */
static void test_timed_query_failure(void **state)
{
    (void)state;
    timed_fix x;
    timed_open(&x, 10, true, 1, 1);
    ag_ctx *ctx = x.ctx;
    ag_device *dev = x.dev;
    ag_dev_stream *s = x.h.s[0];
    ag_dev_event *e = x.h.e[0];
    assert_int_equal(ag_dev_event_record(dev, e, s), AG_OK);
    bool done = false;
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_EDEVICE);
    assert_errmsg(ctx, "event_query: injected fault");
    assert_int_equal(x.fl.nfail, 1);
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_OK); /* the next one answers */
    assert_true(done);
    timed_close(&x);
}

/* In the timing model a stream is idle once the host clock has reached the
 * finish time of its last modelled kernel: busy one tick before, idle at
 * that very tick. */
static void test_timed_idle_at_finish(void **state)
{
    (void)state;
    timed_fix x;
    timed_open(&x, 2, false, 1, 0);
    ag_device *dev = x.dev;
    ag_timed *t = x.t;
    ag_dev_stream *s = x.h.s[0];
    ag_timed_kernel(t, s); /* finishes at tick 2 */
    bool idle = true;
    ag_timed_tick(t);
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_OK);
    assert_false(idle);
    ag_timed_tick(t);
    assert_int_equal(ag_timed_now(t), 2);
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_OK);
    assert_true(idle);
    timed_close(&x);
}

/* In the timing model a stream waiting for an event that completes earlier
 * than the stream's own work keeps its own (later) finish time. */
static void test_timed_wait_keeps_later_finish(void **state)
{
    (void)state;
    timed_fix x;
    timed_open(&x, 10, false, 2, 1);
    ag_device *dev = x.dev;
    ag_timed *t = x.t;
    ag_dev_stream *s1 = x.h.s[0], *s2 = x.h.s[1];
    ag_dev_event *e = x.h.e[0];
    ag_timed_kernel(t, s1);                                /* s1 busy until tick 10 */
    assert_int_equal(ag_dev_event_record(dev, e, s2), AG_OK); /* s2 idle: e complete at 0 */
    assert_int_equal(ag_dev_stream_wait_event(dev, s1, e), AG_OK);
    bool idle = true;
    assert_int_equal(ag_dev_stream_query(dev, s1, &idle), AG_OK);
    assert_false(idle);
    assert_int_equal(ag_timed_makespan(t), 10);
    timed_close(&x);
}

/* Once a capture has ended, the timed device answers a query the model
 * says is busy from the model alone, without calling the inner device (a
 * fault plan on the inner device's event_query sees no call). */
static void test_timed_busy_after_capture(void **state)
{
    (void)state;
    timed_fix x;
    timed_open(&x, 10, true, 1, 1);
    ag_device *dev = x.dev;
    ag_timed *t = x.t;
    ag_dev_stream *s = x.h.s[0];
    ag_dev_event *e = x.h.e[0];
    assert_int_equal(ag_dev_capture_begin(dev, s), AG_OK);
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_end(dev, s, &g), AG_OK);
    ag_dev_graph_destroy(dev, g);
    ag_timed_kernel(t, s);
    assert_int_equal(ag_dev_event_record(dev, e, s), AG_OK);
    bool done = true;
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_OK);
    assert_false(done);
    assert_int_equal(x.fl.calls, 0);
    timed_close(&x);
}

/* ag_dev_mem_free with NULL returns in the seam: no backend sees it (a
 * backend that did would count it, as the timed device counts every
 * entry; the simulated device would only assert). */
static void test_free_null_in_seam(void **state)
{
    (void)state;
    timed_fix x;
    timed_open(&x, 0, false, 0, 0);
    void *p = NULL;
    assert_int_equal(ag_dev_mem_alloc(x.dev, AG_MEM_HBM, 256, 0, &p), AG_OK);
    uint64_t calls = ag_timed_calls(x.t);
    ag_dev_mem_free(x.dev, NULL);
    assert_int_equal(ag_timed_calls(x.t), calls);
    ag_dev_mem_free(x.dev, p);
    assert_int_equal(ag_timed_calls(x.t), calls + 1u);
    timed_close(&x);
}

/* A trace text the reader refuses, and the message that names its line. */
typedef struct bad_trace {
    const char *text, *msg;
} bad_trace;

static void parse_fails(ag_ctx *ctx, const bad_trace *bad, size_t n)
{
    ag_alloc_trace *t = NULL;
    for (size_t k = 0; k < n; k++) {
        assert_int_equal(ag_alloc_trace_parse(ctx, "t", bad[k].text, strlen(bad[k].text), &t), AG_EPARSE);
        assert_errmsg(ctx, bad[k].msg);
    }
}

static void test_trace_parse_errors(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_alloc_trace *t = NULL;
    const bad_trace bad[] = {
        {"alloc a 10 0\nfrob\n", "t:2: unknown operation 'frob'"},
        {"streams 2\nalloc a 10 2\n", "t:2: stream 2 out of range"},
        {"free q 0\n", "t:1: block 'q' was never allocated"},
        {"alloc a 0 0\n", "t:1: 'alloc' needs a size"},
        {"alloc a 10 0 9\n", "t:1: unexpected text"},
        {"record 1 1\n", "t:1: a stream cannot record"},
        {"alloc a 10 0\nstreams 3\n", "t:2: 'streams' must come before"},
        /* a long word is shortened as an ID is, marked so: 64 bytes stay
         * whole, 65 show 61 and '...' */
        {"oooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo\n",
         "t:1: unknown operation 'oooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo' (expected"},
        {"ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo\n",
         "t:1: unknown operation 'ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo...' (expected"},
    };
    parse_fails(ctx, bad, sizeof bad / sizeof bad[0]);
    assert_int_equal(ag_alloc_trace_parse(ctx, "t", trace_text, strlen(trace_text), &t), AG_OK);
    assert_int_equal(ag_alloc_trace_streams(t), 2);
    assert_int_equal(ag_alloc_trace_ops(t), 13);
    ag_alloc_trace_destroy(t);
    ag_ctx_destroy(ctx);
}

/* The reader's edges: a size up to 2^64 - 1 and not one more, a digit
 * string only, stream numbers below 4096, a count from 1 to 4096 given
 * once, '#' ending a word, CR LF line ends, a stream left in a pool at
 * the last stream number, and the stream count a trace implies (one more
 * than the largest stream named; one for a trace that names none). */
static void test_trace_parse_edges(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_alloc_trace *t = NULL;
    const bad_trace bad[] = {
        {"alloc a 18446744073709551616 0\n", "t:1: 'alloc' needs a size"},
        {"alloc a 18446744073709551617 0\n", "t:1: 'alloc' needs a size"},
        {"alloc a 1x 0\n", "t:1: 'alloc' needs a size"},
        {"alloc a 10 4096\n", "t:1: expected a stream number below 4096"},
        {"alloc a 10 0\nfree a\n", "t:2: expected a stream number below 4096"},
        {"streams 0\n", "t:1: 'streams' needs a count from 1 to 4096"},
        {"streams 4097\n", "t:1: 'streams' needs a count from 1 to 4096"},
        {"streams 2\nstreams 3\n", "t:2: 'streams' must come before every operation"},
        {"wait 2 2\n", "t:1: a stream cannot record for or wait on itself"},
        {"alloc a 10 0\n\n# a comment\nsync 0\n", "t:4: unexpected text after the operation"},
        {"pool_begin g 4095\n", "t:1: stream 4095 allocates from graph pool 'g' at the end of the trace"},
    };
    parse_fails(ctx, bad, sizeof bad / sizeof bad[0]);
    struct {
        const char *text;
        uint32_t streams;
        uint64_t ops;
    } good[] = {
        {"alloc a 18446744073709551615 0\nfree a 0\n", 1, 2},
        {"", 1, 0},
        {"sync\n", 1, 1},
        {"streams 4096\nalloc a 10 4095\n", 4096, 1},
        {"alloc a 10 1\nuse a 2\nfree a 2\nfree a 1\n", 3, 4},
        {"alloc a 10 0#x\r\nfree a 0\r\nsync # done\r\n", 1, 3},
    };
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        assert_int_equal(ag_alloc_trace_parse(ctx, "t", good[k].text, strlen(good[k].text), &t), AG_OK);
        assert_int_equal(ag_alloc_trace_streams(t), good[k].streams);
        assert_int_equal(ag_alloc_trace_ops(t), good[k].ops);
        ag_alloc_trace_destroy(t);
    }
    ag_ctx_destroy(ctx);
}

/* A caller's shorter result gets what fits, its size told; options
 * shorter than this version's are refused. */
static void test_replay_sizes(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    ag_alloc_trace *t = NULL;
    assert_int_equal(ag_alloc_trace_parse(ctx, "t", trace_text, strlen(trace_text), &t), AG_OK);
    ag_alloc_replay_result r;
    memset(&r, 0xAB, sizeof r);
    r.size = offsetof(ag_alloc_replay_result, count);
    assert_int_equal(ag_alloc_replay(ctx, dev, t, NULL, NULL, &r), AG_OK);
    assert_int_equal(r.size, offsetof(ag_alloc_replay_result, count));
    assert_int_equal(r.stats.peak_allocated, 4096 + 1024);
    const unsigned char *tail = (const unsigned char *)&r + offsetof(ag_alloc_replay_result, count);
    assert_int_equal(tail[0], 0xAB); /* not written */
    ag_alloc_replay_opts o = {.size = sizeof o - 1u};
    assert_int_equal(ag_alloc_replay(ctx, dev, t, NULL, &o, NULL), AG_EINVAL);
    assert_errmsg(ctx, "replay: options size");
    ag_alloc_trace_destroy(t);
    close_empty(ctx, dev);
}

static void test_trace_replay(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    ag_alloc_trace *t = NULL;
    assert_int_equal(ag_alloc_trace_parse(ctx, "t", trace_text, strlen(trace_text), &t), AG_OK);
    for (int mode = 0; mode < 2; mode++) {
        ag_alloc_replay_result r;
        assert_int_equal(replay_in(ctx, dev, t, (ag_alloc_mode)mode, 0, &r), AG_OK);
        assert_int_equal(r.violations, 0);
        assert_int_equal(r.count[AG_TOP_ALLOC], 3);
        assert_int_equal(r.count[AG_TOP_SYNC], 2);
        assert_int_equal(r.stats.peak_allocated, 4096 + 1024); /* z reuses x's place in time */
        assert_int_equal(r.stats.allocated, 0);
        /* at least the region's allocation and the final synchronise */
        assert_true(r.device_calls >= 2);
        if (mode == AG_ALLOC_MULTI)
            assert_int_equal(r.stats.borrow_recycles + r.stats.birth_recycles, 3);
    }
    ag_alloc_trace_destroy(t);
    close_empty(ctx, dev);
}

/* The checker finds a reuse the trace does not order, at every stream
 * count it supports (one word of clock per stream, beyond 64 as below):
 * host memory is recycled at its last free without any event (the host
 * vouches for the streams' work), so stream 0 gets the memory stream k
 * used with nothing ordering k's use before it; a record and a wait order
 * it.  On device memory the allocator itself orders the reuse. */
static void test_check_finds_reuse(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    const uint32_t counts[] = {3, 256, AG_ALLOC_CHECK_MAX_STREAMS};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        uint32_t n = counts[i], k = n - 2u;
        for (int ordered = 0; ordered < 2; ordered++) {
            char text[256];
            int len = snprintf(text, sizeof text, "streams %u\nalloc a 4096 0\nuse a %u\nfree a %u\n", n, k, k);
            if (ordered)
                len += snprintf(text + len, sizeof text - (size_t)len, "record %u 0\nwait 0 %u\n", k, k);
            snprintf(text + len, sizeof text - (size_t)len, "free a 0\nalloc b 4096 0\nfree b 0\n");
            ag_alloc_trace *t = NULL;
            assert_int_equal(ag_alloc_trace_parse(ctx, "t", text, strlen(text), &t), AG_OK);
            for (int mode = 0; mode < 2; mode++)
                for (int host = 0; host < 2; host++) {
                    ag_alloc_config c;
                    ag_alloc_config_default(&c);
                    c.mode = (ag_alloc_mode)mode;
                    c.mem_type = host ? AG_MEM_HOST : AG_MEM_HBM;
                    ag_alloc_replay_result r = {.size = sizeof r};
                    ag_alloc_replay_opts o = {.size = sizeof o, .check = true, .kernel_ticks = 4};
                    assert_int_equal(ag_alloc_replay(ctx, dev, t, &c, &o, &r), AG_OK);
                    assert_int_equal(r.violations, host && !ordered ? 1 : 0);
                    assert_int_equal(r.stats.peak_allocated, 4096);
                }
            ag_alloc_trace_destroy(t);
        }
    }
    /* one more stream than the check holds: refused, the limit named */
    char text[64];
    snprintf(text, sizeof text, "streams %u\nalloc a 16 0\nfree a 0\n", AG_ALLOC_CHECK_MAX_STREAMS + 1u);
    ag_alloc_trace *t = NULL;
    assert_int_equal(ag_alloc_trace_parse(ctx, "t", text, strlen(text), &t), AG_OK);
    ag_alloc_replay_result r = {.size = sizeof r};
    ag_alloc_replay_opts o = {.size = sizeof o, .check = true};
    assert_int_equal(ag_alloc_replay(ctx, dev, t, NULL, &o, &r), AG_EINVAL);
    assert_errmsg(ctx, "t: replay check: at most 1024 streams, the replay has 1025");
    ag_alloc_trace_destroy(t);
    close_empty(ctx, dev);
}

/* The violations of a trace on host memory (recycled at its last free,
 * with no event: only the trace orders a reuse), multi mode, checked. */
static uint64_t host_violations(ag_ctx *ctx, ag_device *dev, const char *text)
{
    ag_alloc_trace *t = NULL;
    assert_int_equal(ag_alloc_trace_parse(ctx, "t", text, strlen(text), &t), AG_OK);
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.mem_type = AG_MEM_HOST;
    ag_alloc_replay_result r = {.size = sizeof r};
    ag_alloc_replay_opts o = {.size = sizeof o, .check = true};
    assert_int_equal(ag_alloc_replay(ctx, dev, t, &c, &o, &r), AG_OK);
    ag_alloc_trace_destroy(t);
    return r.violations;
}

/* A handout takes its range out of the freed memory it overlaps (the
 * check's treap): the rest of that memory keeps its history for the next
 * handout there.  a (192 KiB, above the front cache's blocks, used by 1
 * with no order) is freed; b takes its first 64 KiB on 0 (stream 1's use
 * unordered: 1); c takes the other 128 KiB, also on 0 (the stream's pool),
 * and stream 1's use of that part counts again, unless 0 waited for 1
 * after b (stream 0's own uses are ordered either way); a thousand blocks,
 * each freed then reused by a smaller one, leave their tails behind. */
static void test_check_carves(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    const char *head = "streams 2\nalloc a 196608 0\nuse a 1\nfree a 1\nfree a 0\nalloc b 65536 0\n";
    char text[512];
    snprintf(text, sizeof text, "%salloc c 131072 0\nfree c 0\nfree b 0\n", head);
    assert_int_equal(host_violations(ctx, dev, text), 2);
    snprintf(text, sizeof text, "%srecord 1 0\nwait 0 1\nalloc c 131072 0\nfree c 0\nfree b 0\n", head);
    assert_int_equal(host_violations(ctx, dev, text), 1);
    /* 1,000 blocks of decreasing size on one stream, each handed out over
     * the last one's memory: ordered by the stream itself, no violation */
    size_t cap = 64u * 1000u, len = 0;
    char *big = malloc(cap);
    assert_non_null(big);
    for (uint32_t k = 0; k < 1000; k++)
        len += (size_t)snprintf(big + len, cap - len, "alloc x%u %u 0\nfree x%u 0\n", k, (1200u - k) * 512u, k);
    assert_int_equal(host_violations(ctx, dev, big), 0);
    free(big);
    close_empty(ctx, dev);
}

/* What the checker holds of a use, on host memory (multi mode): a
 * stream's latest operation on a block counts, not its first (stream 1
 * uses a again, or frees it, after the record stream 0 waits for: one
 * violation each); a sync orders every stream's work before the reuse;
 * freed memory touching the new block's ends is not checked (b takes c's
 * place, next to a's, in either order: none); the end of a node that a
 * handout covers exactly is gone for the next handout there (d: none
 * beyond b's and c's); and an allocator's wait orders only the stream
 * that waits. */
static void test_check_uses_held(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    struct {
        const char *text;
        uint64_t violations;
    } cases[] = {
        {"streams 2\nalloc a 4096 0\nuse a 1\nrecord 1 0\nwait 0 1\nuse a 1\nfree a 1\nfree a 1\nfree a 0\n"
         "alloc b 4096 0\nfree b 0\n",
         1},
        {"streams 2\nalloc a 4096 0\nuse a 1\nrecord 1 0\nfree a 1\nwait 0 1\nfree a 0\nalloc b 4096 0\nfree b 0\n", 1},
        {"streams 2\nalloc a 4096 0\nuse a 1\nfree a 1\nfree a 0\nsync\nalloc b 4096 0\nfree b 0\n", 0},
        {"streams 2\nalloc a 65536 0\nalloc c 65536 0\nuse a 1\nfree a 1\nfree a 0\nfree c 0\nalloc b 65536 0\n"
         "free b 0\n",
         0},
        {"streams 2\nalloc c 65536 0\nalloc a 65536 0\nuse a 1\nfree a 1\nfree a 0\nfree c 0\nalloc b 65536 0\n"
         "free b 0\n",
         0},
        {"streams 2\nalloc a 196608 0\nuse a 1\nfree a 1\nfree a 0\nalloc b 65536 0\nalloc c 131072 0\nfree c 0\n"
         "free b 0\nalloc d 262144 0\nfree d 0\n",
         2},
        /* b and c take a's two halves: each meets stream 1's use */
        {"streams 2\nalloc a 131072 0\nuse a 1\nfree a 1\nfree a 0\nalloc b 65536 0\nalloc c 65536 0\nfree b 0\n"
         "alloc d 131072 0\nfree d 0\nfree c 0\n",
         2},
        /* stream 0's region moves to stream 1 behind an event: stream 1
         * learns what 0 knew, stream 2 (which gets a back) does not */
        {"streams 3\nalloc a 4096 2\nuse a 0\nfree a 0\nfree a 2\nalloc x 4194304 0\nfree x 0\n"
         "alloc y 4194304 1\nfree y 1\nalloc b 4096 2\nfree b 2\n",
         1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        assert_int_equal(host_violations(ctx, dev, cases[k].text), cases[k].violations);
    close_empty(ctx, dev);
}

/* The checker's happens-before marks live as long as a deferred free
 * holds one: host memory stays flat over many runs of a trace, both where
 * the deferred frees all complete now and then (the first trace, with a
 * sync) and where one always stays pending while the older ones complete
 * (the second, in the baseline with kernels of 4 ticks: the queue never
 * empties, so the marks and the queue must be trimmed from the front). */
static const char marks_sync_text[] = "streams 64\nalloc a 100 0\nuse a 1\nfree a 0\nfree a 1\nrecord 1 0\nwait 0 1\nsync\n";

static const char marks_pending_text[] = "streams 64\nalloc a 4096 0\nuse a 1\nfree a 1\nfree a 0\n";

static uint64_t check_peak(const char *text, ag_alloc_mode mode, uint32_t ticks, uint32_t runs)
{
    ag_testalloc ta;
    ag_ctx *ctx = agtest_ctx_counted(&ta);
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    ag_alloc_trace *t = NULL;
    assert_int_equal(ag_alloc_trace_parse(ctx, "marks", text, strlen(text), &t), AG_OK);
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.mode = mode;
    ag_alloc_replay_opts o = {.size = sizeof o, .check = true, .kernel_ticks = ticks, .runs = runs};
    ag_alloc_replay_result r = {.size = sizeof r};
    assert_int_equal(ag_alloc_replay(ctx, dev, t, &c, &o, &r), AG_OK);
    assert_int_equal(r.violations, 0);
    ag_alloc_trace_destroy(t);
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
    return ta.peak_bytes;
}

/* The trace's own order: a use that the trace's records, waits and syncs
 * do not put after the block's alloc on another stream (the traced
 * program's race).  Block a (line 2, stream 0) is used by stream 1 at
 * line 11 with no wait since its alloc.  Before that use, a shared
 * block's last free on stream 1 asks stream 0 whether it is idle, and in
 * a replay the host's answer orders stream 0's alloc before stream 1's
 * later work (the replay's check finds nothing wrong); the order check
 * asks the trace alone and still counts the use.  Stream 0's use of y
 * (after a record and a wait), b's use (the same), c's (after a sync) and
 * a use on the alloc's own stream are ordered; d is allocated after the
 * last record from 0 to 1, so the wait that follows orders d's use not. */
static const char unordered_text[] = "streams 2\n"
                                     "alloc a 64 0\n"
                                     "alloc y 4096 1\n"
                                     "record 1 0\n"
                                     "wait 0 1\n"
                                     "use y 0\n"
                                     "free y 0\n"
                                     "free y 1\n" /* the last free: stream 0 asked */
                                     "use a 0\n"
                                     "free a 0\n"
                                     "use a 1\n" /* line 11: unordered */
                                     "free a 1\n"
                                     "free a 0\n"
                                     "alloc b 64 0\n"
                                     "record 0 1\n"
                                     "wait 1 0\n"
                                     "use b 1\n"
                                     "free b 1\n"
                                     "free b 0\n"
                                     "alloc c 64 0\n"
                                     "sync\n"
                                     "use c 1\n"
                                     "free c 1\n"
                                     "free c 0\n"
                                     "record 0 1\n"
                                     "alloc d 64 0\n"
                                     "wait 1 0\n"
                                     "use d 1\n" /* line 28: unordered */
                                     "free d 1\n"
                                     "free d 0\n";

static void test_trace_order(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    ag_alloc_trace *t = NULL;
    assert_int_equal(ag_alloc_trace_parse(ctx, "t", unordered_text, strlen(unordered_text), &t), AG_OK);
    ag_alloc_trace_order o = {.size = sizeof o};
    assert_int_equal(ag_alloc_trace_order_check(ctx, t, &o), AG_OK);
    assert_int_equal(o.size, sizeof o);
    assert_int_equal(o.unordered_uses, 2);
    assert_string_equal(o.first, "t:11: stream 1 uses block 'a', allocated on stream 0 at line 2, with no record "
                                 "and wait (or sync) ordering it after the alloc");
    /* replays, checked, in both modes: the allocator orders every reuse, and
     * the multi mode asked stream 0 before line 11 */
    for (int mode = 0; mode < 2; mode++) {
        ag_alloc_replay_result r;
        assert_int_equal(replay_in(ctx, dev, t, (ag_alloc_mode)mode, 0, &r), AG_OK);
        assert_int_equal(r.violations, 0);
        if (mode == AG_ALLOC_MULTI)
            assert_true(r.stats.stream_queries > 0);
    }
    /* a caller's shorter struct gets what fits */
    ag_alloc_trace_order small;
    memset(&small, 0xAB, sizeof small);
    small.size = offsetof(ag_alloc_trace_order, first);
    assert_int_equal(ag_alloc_trace_order_check(ctx, t, &small), AG_OK);
    assert_int_equal(small.size, offsetof(ag_alloc_trace_order, first));
    assert_int_equal(small.unordered_uses, 2);
    assert_int_equal((unsigned char)small.first[0], 0xAB); /* not written */
    small.size = 0;
    assert_int_equal(ag_alloc_trace_order_check(ctx, t, &small), AG_EINVAL);
    assert_errmsg(ctx, "trace order check: trace or result missing, or result size 0");
    ag_alloc_trace_destroy(t);
    /* a trace in order: nothing, and an empty first */
    const char *fine = "streams 2\nalloc a 64 0\nrecord 0 1\nwait 1 0\nuse a 1\nfree a 1\nfree a 0\n";
    assert_int_equal(ag_alloc_trace_parse(ctx, "fine", fine, strlen(fine), &t), AG_OK);
    o = (ag_alloc_trace_order){.size = sizeof o};
    memset(o.first, 'x', sizeof o.first);
    assert_int_equal(ag_alloc_trace_order_check(ctx, t, &o), AG_OK);
    assert_int_equal(o.unordered_uses, 0);
    assert_string_equal(o.first, "");
    ag_alloc_trace_destroy(t);
    /* the same limit as the replay's check */
    const char *wide = "streams 1025\nalloc a 64 1024\nfree a 1024\n";
    assert_int_equal(ag_alloc_trace_parse(ctx, "wide", wide, strlen(wide), &t), AG_OK);
    assert_int_equal(ag_alloc_trace_order_check(ctx, t, &o), AG_EINVAL);
    assert_errmsg(ctx, "wide: trace order check: at most 1024 streams, the trace has 1025");
    ag_alloc_trace_destroy(t);
    close_empty(ctx, dev);
}

/* The order check's clocks, and its host memory.  Stream 1 learns stream
 * 0's alloc of a from 0's record, then waits for stream 2's record, made
 * before 2 knew of a: a wait merges what it learns and never forgets, so
 * a's use on 1 is ordered.  Block b is allocated again on stream 2, after
 * stream 1 learned of its first alloc: the latest alloc counts, and names
 * its own line.  Every host allocation the check makes is given back with
 * the size it was made with, and a host failure at any of them is a clean
 * AG_ENOMEM that leaves the caller's result as it was. */
static const char order_clock_text[] = "streams 3\n"
                                       "alloc a 64 0\n"
                                       "alloc b 64 0\n"
                                       "record 2 1\n" /* 2 knows nothing of 0 */
                                       "record 0 1\n"
                                       "wait 1 0\n"
                                       "wait 1 2\n"
                                       "use a 1\n" /* ordered: the wait above merged */
                                       "free a 1\n"
                                       "free a 0\n"
                                       "use b 1\n" /* ordered after b's first alloc */
                                       "free b 1\n"
                                       "free b 0\n"
                                       "alloc b 64 2\n"
                                       "use b 1\n" /* line 15: not after the alloc on 2 */
                                       "free b 1\n"
                                       "free b 2\n";

static void test_trace_order_clocks(void **state)
{
    (void)state;
    ag_testalloc ta;
    ag_ctx *ctx = agtest_ctx_counted(&ta);
    ag_alloc_trace *t = NULL;
    assert_int_equal(ag_alloc_trace_parse(ctx, "t", order_clock_text, strlen(order_clock_text), &t), AG_OK);
    uint64_t blocks = ta.live_blocks, bytes = ta.live_bytes, calls = ta.calls;
    ag_alloc_trace_order o = {.size = sizeof o};
    assert_int_equal(ag_alloc_trace_order_check(ctx, t, &o), AG_OK);
    assert_int_equal(o.unordered_uses, 1);
    assert_string_equal(o.first, "t:15: stream 1 uses block 'b', allocated on stream 2 at line 14, with no record "
                                 "and wait (or sync) ordering it after the alloc");
    assert_int_equal(ta.live_blocks, blocks);
    assert_int_equal(ta.live_bytes, bytes);
    uint64_t made = ta.calls - calls;
    assert_int_equal(made, 6); /* four arrays and a row for each of the two pairs that record */
    for (uint64_t k = 1; k <= made; k++) {
        ta.fail_at = ta.calls + k;
        ag_alloc_trace_order f = {.size = sizeof f, .unordered_uses = 7};
        assert_int_equal(ag_alloc_trace_order_check(ctx, t, &f), AG_ENOMEM);
        ta.fail_at = 0;
        assert_int_equal(f.unordered_uses, 7);
        assert_int_equal(ta.live_blocks, blocks);
        assert_int_equal(ta.live_bytes, bytes);
    }
    ag_alloc_trace_destroy(t);
    ag_ctx_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
}

/* A sync orders every stream's work before what follows, the last
 * stream's included: a's use on 0 (allocated on the last stream) and b's
 * on the last stream (allocated on 0) are ordered. */
static void test_trace_order_sync(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    const char *text = "streams 3\nalloc a 64 2\nalloc b 64 0\nsync\nuse a 0\nuse b 2\nfree a 0\nfree b 2\nfree a 2\n"
                       "free b 0\n";
    ag_alloc_trace *t = NULL;
    assert_int_equal(ag_alloc_trace_parse(ctx, "t", text, strlen(text), &t), AG_OK);
    ag_alloc_trace_order o = {.size = sizeof o};
    assert_int_equal(ag_alloc_trace_order_check(ctx, t, &o), AG_OK);
    assert_int_equal(o.unordered_uses, 0);
    ag_alloc_trace_destroy(t);
    ag_ctx_destroy(ctx);
}

/* With fallback_min 0 every shared last free asks its users at once; an
 * idle answer sends the block home, and the checker must learn from it
 * that the host saw those streams' work done (the happens-before hook), or
 * it reports the block's next reuse as unordered.  Both modes' replays of
 * the shared traces, instant and timed kernels: no violation. */
static void test_check_fallback_now(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    const char *texts[] = {trace_text, reclaim_text, lend_text, unordered_text};
    uint64_t queries = 0;
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        ag_alloc_trace *t = NULL;
        assert_int_equal(ag_alloc_trace_parse(ctx, "t", texts[k], strlen(texts[k]), &t), AG_OK);
        for (uint32_t ticks = 0; ticks <= 4; ticks += 4) {
            ag_alloc_config c;
            ag_alloc_config_default(&c);
            c.fallback_min = 0;
            ag_alloc_replay_opts o = {.size = sizeof o, .check = true, .kernel_ticks = ticks, .runs = 3};
            ag_alloc_replay_result r = {.size = sizeof r};
            assert_int_equal(ag_alloc_replay(ctx, dev, t, &c, &o, &r), AG_OK);
            assert_int_equal(r.violations, 0);
            queries += r.stats.stream_queries;
        }
        ag_alloc_trace_destroy(t);
    }
    assert_true(queries > 0);
    close_empty(ctx, dev);
}

static void test_check_marks_bounded(void **state)
{
    (void)state;
    uint64_t few = check_peak(marks_sync_text, AG_ALLOC_MULTI, 0, 10);
    uint64_t many = check_peak(marks_sync_text, AG_ALLOC_MULTI, 0, 400);
    assert_true(many <= few + 4096u);
    few = check_peak(marks_pending_text, AG_ALLOC_BASELINE, 4, 100);
    many = check_peak(marks_pending_text, AG_ALLOC_BASELINE, 4, 4000);
    assert_true(many <= few + 8192u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timed_refuses),
        cmocka_unit_test(test_timed_capture),
        cmocka_unit_test(test_timed_query_failure),
        cmocka_unit_test(test_timed_idle_at_finish),
        cmocka_unit_test(test_timed_wait_keeps_later_finish),
        cmocka_unit_test(test_timed_busy_after_capture),
        cmocka_unit_test(test_free_null_in_seam),
        cmocka_unit_test(test_trace_parse_errors),
        cmocka_unit_test(test_trace_parse_edges),
        cmocka_unit_test(test_trace_replay),
        cmocka_unit_test(test_replay_sizes),
        cmocka_unit_test(test_check_finds_reuse),
        cmocka_unit_test(test_check_carves),
        cmocka_unit_test(test_check_uses_held),
        cmocka_unit_test(test_check_marks_bounded),
        cmocka_unit_test(test_trace_order),
        cmocka_unit_test(test_trace_order_clocks),
        cmocka_unit_test(test_trace_order_sync),
        cmocka_unit_test(test_check_fallback_now),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
