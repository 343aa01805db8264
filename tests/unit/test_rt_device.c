/* Device seam and simulated device: FIFO order, asynchrony, cross-stream
 * order only through events, capture/replay, capacity per memory type,
 * poisoning, argument checks, host OOM sweeps and device fault sweeps. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "support/agtest.h"
#include "aliasguard/alloc.h"
#include "aliasguard/device.h"
#include "support/rt/dev_fix.h"

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#ifdef TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

/* ---- helpers ---- */

/* A kernel that blocks its stream until the test opens the gate. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
    int entered;
} gate;

static void gate_init(gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = 0;
    g->entered = 0;
}

static void gate_fini(gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

static ag_status gate_kernel(void *arg)
{
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    return AG_OK;
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_wait_entered(gate *g)
{
    pthread_mutex_lock(&g->mu);
    while (!g->entered)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

typedef struct log_arg {
    int *log;
    int *len;
    int value;
} log_arg;

static ag_status log_kernel(void *arg)
{
    log_arg *a = arg;
    a->log[(*a->len)++] = a->value;
    return AG_OK;
}

static ag_status incr_kernel(void *arg)
{
    ++*(int *)arg;
    return AG_OK;
}

static ag_status fail_kernel(void *arg)
{
    (void)arg;
    return AG_EINVAL;
}

/* Copies *src (an int) to *dst: a kernel reading what another stream wrote. */
typedef struct pair {
    int *dst;
    const int *src;
} pair;

static ag_status copy_int_kernel(void *arg)
{
    pair *p = arg;
    *p->dst = *p->src;
    return AG_OK;
}

static ag_device *sim(ag_ctx *ctx, uint64_t hbm, uint64_t p2p, uint64_t host)
{
    ag_device_sim_config c = ag_device_sim_defaults();
    c.capacity[AG_MEM_HBM] = hbm;
    c.capacity[AG_MEM_P2P] = p2p;
    c.capacity[AG_MEM_HOST] = host;
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, &c, &dev), AG_OK);
    assert_string_equal(ag_device_backend(dev), "sim");
    return dev;
}

static ag_dev_stats stats(ag_device *dev)
{
    ag_dev_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    ag_dev_stats_get(dev, &st);
    return st;
}

/* A context and a device of the test's own, with the streams and events
 * of h made on it (dev_fix.h); devfix_close destroys them all, the device
 * and then the context last. */
typedef struct devfix {
    ag_ctx *ctx;
    ag_device *dev;
    rt_handles h;
} devfix;

/* Opens f on dev, a device of ctx: both become f's. */
static void devfix_open_on(devfix *f, ag_ctx *ctx, ag_device *dev, uint32_t ns, uint32_t ne)
{
    f->ctx = ctx;
    f->dev = dev;
    handles_open(&f->h, dev, ns, ne);
}

/* The same on a simulated device with 1 MiB of HBM only. */
static void devfix_open(devfix *f, ag_ctx *ctx, uint32_t ns, uint32_t ne)
{
    devfix_open_on(f, ctx, sim(ctx, 1 << 20, 0, 0), ns, ne);
}

static void devfix_close(devfix *f)
{
    handles_close(&f->h);
    ag_device_destroy(f->dev);
    ag_ctx_destroy(f->ctx);
}

/* ---- tests ---- */

static void test_fifo_order_and_copies(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    devfix f;
    devfix_open_on(&f, ctx, sim(ctx, 1 << 20, 1 << 20, 1 << 20), 1, 0);
    ag_device *dev = f.dev;
    ag_dev_stream *s = f.h.s[0];

    enum { N = 500 };
    static int log[N];
    int len = 0;
    static log_arg args[N];
    for (int k = 0; k < N; k++) {
        args[k] = (log_arg){log, &len, k};
        assert_int_equal(ag_dev_launch(dev, s, log_kernel, &args[k], "log"), AG_OK);
    }

    /* A chain of copies through HBM, P2P and pinned host memory. */
    unsigned char in[1000], out[1000];
    for (int k = 0; k < 1000; k++)
        in[k] = (unsigned char)(k * 7 + 3);
    memset(out, 0, sizeof out);
    void *a, *b, *c, *h;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 1000, 0, &a), AG_OK);
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 1000, 4096, &b), AG_OK);
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_P2P, 1000, 1, &c), AG_OK);
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HOST, 1000, 0, &h), AG_OK);
    assert_int_equal((uintptr_t)a % AG_DEV_DEFAULT_ALIGN, 0);
    assert_int_equal((uintptr_t)b % 4096, 0);
    assert_int_equal((uintptr_t)c % AG_DEV_MIN_ALIGN, 0);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_H2D, a, in, 1000, s), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2D, b, a, 1000, s), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_P2P, c, b, 1000, s), AG_OK);
    assert_int_equal(ag_dev_memset_async(dev, (char *)c + 10, 0xAB, 5, s), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, h, c, 1000, s), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_H2D, a, h, 1000, s), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, out, a, 1000, s), AG_OK);
    /* Overlapping D2D copy has memmove semantics. */
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2D, (char *)b + 1, b, 999, s), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);

    assert_int_equal(len, N);
    for (int k = 0; k < N; k++)
        assert_int_equal(log[k], k);
    for (int k = 0; k < 1000; k++) {
        unsigned char want = (k >= 10 && k < 15) ? 0xAB : in[k];
        assert_int_equal(out[k], want);
    }
    assert_memory_equal((const char *)b + 1, in, 999);

    ag_dev_stats st = stats(dev);
    assert_int_equal(st.launches, N);
    assert_int_equal(st.copies[AG_COPY_H2D], 2);
    assert_int_equal(st.copies[AG_COPY_D2D], 2);
    assert_int_equal(st.copies[AG_COPY_P2P], 1);
    assert_int_equal(st.copies[AG_COPY_D2H], 2);
    assert_int_equal(st.copy_bytes[AG_COPY_D2D], 1999);
    assert_int_equal(st.memsets, 1);
    assert_int_equal(st.mem[AG_MEM_HBM].used, 2000);
    assert_int_equal(st.mem[AG_MEM_HBM].live, 2);
    assert_int_equal(st.mem[AG_MEM_P2P].used, 1000);
    assert_int_equal(st.mem[AG_MEM_HOST].used, 1000);
    assert_int_equal(st.live_streams, 1);

    ag_dev_mem_free(dev, a);
    ag_dev_mem_free(dev, b);
    ag_dev_mem_free(dev, c);
    ag_dev_mem_free(dev, h);
    ag_dev_mem_free(dev, NULL);
    st = stats(dev);
    assert_int_equal(st.mem[AG_MEM_HBM].used, 0);
    assert_int_equal(st.mem[AG_MEM_HBM].peak, 2000);
    assert_int_equal(st.mem[AG_MEM_HBM].nfree, 2);
    ag_dev_stream_destroy(dev, NULL);
    devfix_close(&f);
}

/* Work runs later: a copy enqueued behind a blocked kernel has not run yet. */
static void test_asynchronous(void **state)
{
    (void)state;
    devfix f;
    devfix_open(&f, agtest_ctx(), 1, 1);
    ag_device *dev = f.dev;
    ag_dev_stream *s = f.h.s[0];
    ag_dev_event *e = f.h.e[0];
    void *a;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 0, &a), AG_OK);
    gate g;
    gate_init(&g);
    int in = 42, out = 0;
    bool done = false;
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_OK);
    assert_true(done); /* never recorded: complete */
    assert_int_equal(ag_dev_launch(dev, s, gate_kernel, &g, "gate"), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_H2D, a, &in, sizeof in, s), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, &out, a, sizeof out, s), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e, s), AG_OK);
    gate_wait_entered(&g);
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_OK);
    assert_false(done);
    assert_int_equal(stats(dev).copies[AG_COPY_D2H], 0);
    gate_open(&g);
    assert_int_equal(ag_dev_event_synchronize(dev, e), AG_OK);
    assert_int_equal(out, 42);
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_OK);
    assert_true(done);
    ag_dev_mem_free(dev, a);
    devfix_close(&f);
    gate_fini(&g);
}

/* Streams run independently; only an event wait orders them. */
static void test_cross_stream_events(void **state)
{
    (void)state;
    devfix f;
    devfix_open(&f, agtest_ctx(), 2, 1);
    ag_device *dev = f.dev;
    ag_dev_stream *s1 = f.h.s[0], *s2 = f.h.s[1];
    ag_dev_event *e = f.h.e[0];
    gate g;
    gate_init(&g);

    /* s1 is blocked; s2 without a wait finishes anyway. */
    int x = 0, y = -1, z = -1;
    assert_int_equal(ag_dev_launch(dev, s1, gate_kernel, &g, "gate"), AG_OK);
    assert_int_equal(ag_dev_launch(dev, s1, incr_kernel, &x, "incr"), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e, s1), AG_OK);
    int free_runs = 0;
    assert_int_equal(ag_dev_launch(dev, s2, incr_kernel, &free_runs, "incr"), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s2), AG_OK);
    assert_int_equal(free_runs, 1);

    /* s2 now waits for e: its kernel sees s1's write. */
    pair p = {&y, &x};
    assert_int_equal(ag_dev_stream_wait_event(dev, s2, e), AG_OK);
    assert_int_equal(ag_dev_launch(dev, s2, copy_int_kernel, &p, "copy"), AG_OK);
    bool done = true;
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_OK);
    assert_false(done);
    /* Re-recording moves the event; the queued wait keeps its old point. */
    assert_int_equal(ag_dev_event_record(dev, e, s2), AG_OK);
    gate_open(&g);
    assert_int_equal(ag_dev_synchronize(dev), AG_OK);
    assert_int_equal(y, 1);

    /* Waiting on an event of one's own stream, or a completed one, adds nothing. */
    pair q = {&z, &y};
    assert_int_equal(ag_dev_stream_wait_event(dev, s2, e), AG_OK);
    assert_int_equal(ag_dev_launch(dev, s2, copy_int_kernel, &q, "copy"), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s2), AG_OK);
    assert_int_equal(z, 1);
    assert_int_equal(stats(dev).waits, 2);
    assert_int_equal(stats(dev).records, 2);

    /* An event recorded on a stream that is then destroyed is complete. */
    assert_int_equal(ag_dev_event_record(dev, e, s1), AG_OK);
    handles_drop_stream(&f.h, 0);
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_OK);
    assert_true(done);
    assert_int_equal(ag_dev_event_synchronize(dev, e), AG_OK);
    assert_int_equal(ag_dev_stream_wait_event(dev, s2, e), AG_OK);

    devfix_close(&f);
    gate_fini(&g);
}

static void test_capture_replay(void **state)
{
    (void)state;
    ag_testalloc ta;
    ag_ctx *ctx = agtest_ctx_counted(&ta);
    devfix f;
    devfix_open(&f, ctx, 3, 1);
    ag_device *dev = f.dev;
    ag_dev_stream *s1 = f.h.s[0], *s2 = f.h.s[1], *s3 = f.h.s[2];
    ag_dev_event *e = f.h.e[0];
    void *a;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 16, 0, &a), AG_OK);

    int count = 0, seen = -1;
    unsigned char out[16];
    pair p = {&seen, &count};
    assert_int_equal(ag_dev_capture_begin(dev, s1), AG_OK);
    assert_int_equal(ag_dev_capture_begin(dev, s1), AG_EINVAL);
    assert_int_equal(ag_dev_memset_async(dev, a, 7, 16, s1), AG_OK);
    assert_int_equal(ag_dev_launch(dev, s1, incr_kernel, &count, "incr"), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, out, a, 16, s1), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e, s1), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s1), AG_EINVAL);
    assert_errmsg(ctx, "capturing");
    assert_int_equal(ag_dev_synchronize(dev), AG_EINVAL);
    /* Other streams are not captured. */
    int other = 0;
    assert_int_equal(ag_dev_launch(dev, s2, incr_kernel, &other, "incr"), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s2), AG_OK);
    assert_int_equal(other, 1);
    ag_dev_graph *g;
    assert_int_equal(ag_dev_capture_end(dev, s1, &g), AG_OK);
    ag_dev_graph *none = g;
    assert_int_equal(ag_dev_capture_end(dev, s1, &none), AG_EINVAL);
    assert_null(none);
    assert_int_equal(ag_dev_synchronize(dev), AG_OK);
    assert_int_equal(count, 0); /* captured, not run */
    assert_int_equal(stats(dev).records, 0);

    /* Replay three times on s3; s2 waits for the event recorded by the replay. */
    for (int k = 0; k < 3; k++)
        if (ag_dev_graph_launch(dev, g, s3) != AG_OK)
            fail_msg("%s", ag_ctx_errmsg(ctx));
    assert_int_equal(ag_dev_stream_wait_event(dev, s2, e), AG_OK);
    assert_int_equal(ag_dev_launch(dev, s2, copy_int_kernel, &p, "copy"), AG_OK);
    assert_int_equal(ag_dev_synchronize(dev), AG_OK);
    assert_int_equal(count, 3);
    assert_int_equal(seen, 3);
    for (int k = 0; k < 16; k++)
        assert_int_equal(out[k], 7);
    ag_dev_stats st = stats(dev);
    assert_int_equal(st.graph_launches, 3);
    assert_int_equal(st.records, 3);
    assert_int_equal(st.live_graphs, 1);

    /* A graph nested into another capture, and an event kept alive by graphs. */
    assert_int_equal(ag_dev_capture_begin(dev, s2), AG_OK);
    assert_int_equal(ag_dev_graph_launch(dev, g, s2), AG_OK);
    assert_int_equal(ag_dev_stream_wait_event(dev, s2, e), AG_OK);
    ag_dev_graph *g2;
    assert_int_equal(ag_dev_capture_end(dev, s2, &g2), AG_OK);
    assert_int_equal(stats(dev).graph_launches, 3); /* captured: nothing was enqueued */
    handles_drop_event(&f.h, 0);
    assert_int_equal(stats(dev).live_events, 0);
    ag_dev_graph_destroy(dev, g);
    assert_int_equal(ag_dev_graph_launch(dev, g2, s1), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s1), AG_OK);
    assert_int_equal(count, 4);
    assert_int_equal(stats(dev).graph_launches, 4);

    /* Replay refuses (all or nothing) once captured memory is gone. */
    ag_dev_mem_free(dev, a);
    assert_int_equal(ag_dev_graph_launch(dev, g2, s1), AG_EINVAL);
    assert_errmsg(ctx, "operation 0");
    assert_int_equal(ag_dev_stream_synchronize(dev, s1), AG_OK);
    assert_int_equal(count, 4);
    ag_dev_graph_destroy(dev, g2);

    /* A stream destroyed while capturing abandons the capture (no leak). */
    assert_int_equal(ag_dev_event_create(dev, &e), AG_OK);
    assert_int_equal(ag_dev_capture_begin(dev, s3), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e, s3), AG_OK);
    ag_dev_event_destroy(dev, e);
    handles_drop_stream(&f.h, 2);

    devfix_close(&f);
    assert_int_equal(ta.live_blocks, 0);
}

static void test_capacity(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = sim(ctx, 4096, 0, 100);
    void *a, *b;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 4000, 0, &a), AG_OK);
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 96, 0, &b), AG_OK);
    void *c = (void *)1;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 1, 0, &c), AG_ENOMEM);
    assert_null(c);
    assert_errmsg(ctx, "hbm memory exhausted: 1 bytes requested, 4096 of 4096 in use");
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_P2P, 1, 0, &c), AG_ENOMEM);
    assert_errmsg(ctx, "p2p memory exhausted");
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HOST, 101, 0, &c), AG_ENOMEM);
    ag_dev_stats st = stats(dev);
    assert_int_equal(st.mem[AG_MEM_HBM].nfail, 1);
    assert_int_equal(st.mem[AG_MEM_HBM].used, 4096);
    assert_int_equal(st.mem[AG_MEM_HBM].capacity, 4096);
    assert_int_equal(st.mem[AG_MEM_P2P].nfail, 1);
    assert_int_equal(st.mem[AG_MEM_HOST].nfail, 1);
    ag_dev_mem_free(dev, b);
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 96, 0, &c), AG_OK);
    ag_dev_mem_free(dev, c);
    ag_dev_mem_free(dev, a);
    st = stats(dev);
    assert_int_equal(st.mem[AG_MEM_HBM].used, 0);
    assert_int_equal(st.mem[AG_MEM_HBM].peak, 4096);
    assert_int_equal(st.mem[AG_MEM_HBM].nalloc, 3);
    assert_int_equal(st.mem[AG_MEM_HBM].live, 0);

#ifdef TEST_ASAN
    /* ASan sees live device memory as addressable, slack and freed memory not. */
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 100, 4096, &c), AG_OK);
    assert_null(__asan_region_is_poisoned(c, 100));
    assert_true(__asan_address_is_poisoned((char *)c + 104));
    ag_dev_mem_free(dev, c);
    assert_true(__asan_address_is_poisoned(c));
#endif

    /* Argument checks. */
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 0, 0, &c), AG_EINVAL);
    assert_errmsg(ctx, "mem_alloc: zero bytes");
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 8, 48, &c), AG_EINVAL);
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 8, 1u << 20, &c), AG_EINVAL);
    assert_int_equal(ag_dev_mem_alloc(dev, (ag_mem_type)7, 8, 0, &c), AG_EINVAL);
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 8, 0, NULL), AG_EINVAL);
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
}

static void test_copy_checks(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = sim(ctx, 1 << 20, 1 << 20, 1 << 20);
    ag_dev_stream *s;
    assert_int_equal(ag_dev_stream_create(dev, &s), AG_OK);
    void *a, *b, *h;
    char host[64] = {0};
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 0, &a), AG_OK);
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 0, &b), AG_OK);
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HOST, 64, 0, &h), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_H2D, host, host, 8, s), AG_EINVAL);
    assert_errmsg(ctx, "destination is not inside one live HBM/P2P allocation");
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_H2D, h, host, 8, s), AG_EINVAL);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_H2D, a, b, 8, s), AG_EINVAL);
    assert_errmsg(ctx, "source is device memory");
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, host, (char *)a + 60, 8, s), AG_EINVAL);
    assert_errmsg(ctx, "stream 0");
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, b, a, 8, s), AG_EINVAL);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_P2P, b, a, 8, s), AG_EINVAL);
    assert_errmsg(ctx, "neither side is P2P memory");
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2D, b, host, 8, s), AG_EINVAL);
    assert_int_equal(ag_dev_memcpy_async(dev, (ag_dev_copy_kind)9, b, a, 8, s), AG_EINVAL);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2D, b, a, 8, NULL), AG_EINVAL);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2D, b, a, 0, s), AG_OK);
    assert_int_equal(ag_dev_memset_async(dev, host, 0, 8, s), AG_EINVAL);
    assert_int_equal(ag_dev_memset_async(dev, h, 0, 65, s), AG_EINVAL);
    assert_int_equal(ag_dev_memset_async(dev, h, 1, 64, s), AG_OK);
    assert_int_equal(ag_dev_launch(dev, s, NULL, NULL, "x"), AG_EINVAL);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, host, h, 64, s), AG_EINVAL);
    assert_errmsg(ctx, "source is not inside one live HBM/P2P allocation");
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);
    /* HOST memory is host-accessible once the stream is synchronised. */
    assert_int_equal(((unsigned char *)h)[63], 1);
    assert_int_equal(ag_dev_device_state(dev, NULL), AG_DEV_HEALTHY);
    assert_string_equal(ag_dev_copy_kind_name(AG_COPY_P2P), "p2p");
    assert_null(ag_dev_copy_kind_name(AG_COPY_COUNT_));
    assert_string_equal(ag_dev_entry_name(AG_DEV_E_GRAPH_LAUNCH), "graph_launch");
    assert_null(ag_dev_entry_name(AG_DEV_E_COUNT_));
    ag_device_destroy(dev); /* frees the stream and memory left behind */
    ag_ctx_destroy(ctx);
}

static ag_status sync_from_kernel(void *arg)
{
    void **a = arg;
    ag_device *dev = a[0];
    ag_status *out = a[2];
    out[0] = ag_dev_stream_synchronize(dev, a[1]);
    out[1] = ag_dev_synchronize(dev);
    return AG_OK;
}

static void test_poisoned(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    devfix f;
    devfix_open(&f, ctx, 2, 1);
    ag_device *dev = f.dev;
    ag_dev_stream *s1 = f.h.s[0], *s2 = f.h.s[1];
    ag_dev_event *e = f.h.e[0];
    void *a;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 0, &a), AG_OK);

    /* Waiting entries refuse to run inside a kernel. */
    ag_status from_kernel[2] = {AG_OK, AG_OK};
    void *args[3] = {dev, s1, from_kernel};
    assert_int_equal(ag_dev_launch(dev, s1, sync_from_kernel, args, "sync"), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s1), AG_OK);
    assert_int_equal(from_kernel[0], AG_EINVAL);
    assert_int_equal(from_kernel[1], AG_EINVAL);

    /* A failing kernel poisons; work behind it is dropped; waits still return. */
    gate g;
    gate_init(&g);
    int after = 0;
    assert_int_equal(ag_dev_launch(dev, s2, gate_kernel, &g, "gate"), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e, s2), AG_OK);
    assert_int_equal(ag_dev_stream_wait_event(dev, s1, e), AG_OK);
    assert_int_equal(ag_dev_launch(dev, s1, incr_kernel, &after, "incr"), AG_OK);
    assert_int_equal(ag_dev_launch(dev, s2, fail_kernel, NULL, "broken_kernel"), AG_OK);
    assert_int_equal(ag_dev_launch(dev, s2, incr_kernel, &after, "incr"), AG_OK);
    gate_wait_entered(&g);
    gate_open(&g);
    assert_int_equal(ag_dev_stream_synchronize(dev, s2), AG_EDEVICE);
    assert_errmsg(ctx, "kernel 'broken_kernel' failed: invalid argument");
    assert_int_equal(ag_dev_stream_synchronize(dev, s1), AG_EDEVICE);
    const char *why = NULL;
    assert_int_equal(ag_dev_device_state(dev, &why), AG_DEV_POISONED);
    assert_non_null(strstr(why, "broken_kernel"));
    /* s1 may have run its kernel before the fault; s2's was dropped. */
    assert_true(after <= 1);
    assert_true(stats(dev).dropped >= 1);

    /* Sticky: everything fails with the reason, cleanup still works. */
    void *b = NULL;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 0, &b), AG_EDEVICE);
    assert_errmsg(ctx, "poisoned: stream 1: kernel 'broken_kernel'");
    assert_int_equal(ag_dev_memset_async(dev, a, 0, 64, s1), AG_EDEVICE);
    /* nothing to enqueue is refused the same */
    assert_int_equal(ag_dev_memset_async(dev, a, 0, 0, s1), AG_EDEVICE);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2D, a, a, 0, s1), AG_EDEVICE);
    assert_errmsg(ctx, "device memcpy_async: the device is poisoned: stream 1: kernel 'broken_kernel'");
    assert_int_equal(ag_dev_event_record(dev, e, s1), AG_EDEVICE);
    assert_int_equal(ag_dev_synchronize(dev), AG_EDEVICE);
    assert_int_equal(ag_dev_event_synchronize(dev, e), AG_EDEVICE);
    ag_dev_stream *s3 = NULL;
    assert_int_equal(ag_dev_stream_create(dev, &s3), AG_EDEVICE);
    assert_null(s3);
    ag_dev_poison(dev, "second fault");
    assert_int_equal(ag_dev_device_state(dev, &why), AG_DEV_POISONED);
    assert_null(strstr(why, "second"));
    ag_dev_mem_free(dev, a);
    assert_int_equal(stats(dev).mem[AG_MEM_HBM].used, 0);
    devfix_close(&f);
    gate_fini(&g);
}

/* Work that touches memory freed before it ran is a device fault, caught
 * before any byte is touched (so ASan stays quiet). */
static void test_use_after_free_poisons(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    devfix f;
    devfix_open(&f, ctx, 1, 0);
    ag_device *dev = f.dev;
    ag_dev_stream *s = f.h.s[0];
    void *a;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 0, &a), AG_OK);
    gate g;
    gate_init(&g);
    assert_int_equal(ag_dev_launch(dev, s, gate_kernel, &g, "gate"), AG_OK);
    assert_int_equal(ag_dev_memset_async(dev, a, 0, 64, s), AG_OK);
    ag_dev_mem_free(dev, a);
    gate_open(&g);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_EDEVICE);
    assert_errmsg(ctx, "memset of 64 bytes");
    assert_errmsg(ctx, "when it ran");
    devfix_close(&f);
    gate_fini(&g);
}

/* Destroying a device with queued work drains it first. */
static void test_destroy_drains(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = sim(ctx, 1 << 20, 0, 0);
    ag_dev_stream *s[3];
    int count[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++)
        assert_int_equal(ag_dev_stream_create(dev, &s[k]), AG_OK);
    for (int r = 0; r < 200; r++)
        for (int k = 0; k < 3; k++)
            assert_int_equal(ag_dev_launch(dev, s[k], incr_kernel, &count[k], NULL), AG_OK);
    ag_dev_event *e;
    assert_int_equal(ag_dev_event_create(dev, &e), AG_OK);
    ag_dev_graph *g;
    assert_int_equal(ag_dev_capture_begin(dev, s[0]), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e, s[0]), AG_OK);
    assert_int_equal(ag_dev_capture_end(dev, s[0], &g), AG_OK);
    ag_device_destroy(dev); /* the stream, event and graph are freed here */
    for (int k = 0; k < 3; k++)
        assert_int_equal(count[k], 200);
    ag_ctx_destroy(ctx);
}

/* ---- launch_copy ---- */

/* An argument block the size of a kernel-mode packet: the kernel checks that
 * it got a 16-byte-aligned copy holding one byte value throughout, and logs
 * the sequence number it carries. */
typedef struct packet {
    int *log;
    int *len;
    int seq;
    unsigned char fill[5200];
} packet;

static void packet_set(packet *p, int *log, int *len, int seq)
{
    p->log = log;
    p->len = len;
    p->seq = seq;
    memset(p->fill, seq & 0xff, sizeof p->fill);
}

static ag_status packet_kernel(void *arg)
{
    const packet *p = arg;
    if ((uintptr_t)arg % AG_DEV_LAUNCH_ARGS_ALIGN != 0)
        return AG_EINVAL; /* poisons the device, naming the kernel */
    for (size_t k = 0; k < sizeof p->fill; k++)
        if (p->fill[k] != (unsigned char)(p->seq & 0xff))
            return AG_EINTERNAL;
    p->log[(*p->len)++] = p->seq;
    return AG_OK;
}

/* Sums a block of the largest size; the sum goes to the int after it. */
static ag_status sum_kernel(void *arg)
{
    const unsigned char *b = arg;
    int *out;
    memcpy(&out, b, sizeof out);
    int sum = 0;
    for (size_t k = sizeof out; k < AG_DEV_LAUNCH_ARGS_MAX; k++)
        sum += b[k];
    *out = sum;
    return AG_OK;
}

/* The caller overwrites its block right after each call, while the stream
 * is still held by a gate: every kernel sees the bytes of its own call. */
static void test_launch_copy_eager(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    devfix f;
    devfix_open(&f, ctx, 1, 0);
    ag_device *dev = f.dev;
    ag_dev_stream *s = f.h.s[0];
    gate g;
    gate_init(&g);
    assert_int_equal(ag_dev_launch(dev, s, gate_kernel, &g, "gate"), AG_OK);
    static packet buf;
    int log[16], len = 0;
    for (int k = 0; k < 10; k++) {
        packet_set(&buf, log, &len, 40 + k);
        assert_int_equal(ag_dev_launch_copy(dev, s, packet_kernel, &buf, sizeof buf, "packet"), AG_OK);
        packet_set(&buf, log, &len, 99); /* reused at once */
    }
    assert_int_equal(len, 0); /* nothing ran yet */
    gate_open(&g);
    if (ag_dev_stream_synchronize(dev, s) != AG_OK)
        fail_msg("%s", ag_ctx_errmsg(ctx));
    assert_int_equal(len, 10);
    for (int k = 0; k < 10; k++)
        assert_int_equal(log[k], 40 + k);

    /* The largest block is accepted whole. */
    unsigned char *big = malloc(AG_DEV_LAUNCH_ARGS_MAX);
    assert_non_null(big);
    int sum = -1, *sum_at = &sum, want = 0;
    memcpy(big, &sum_at, sizeof sum_at);
    for (size_t k = sizeof sum_at; k < AG_DEV_LAUNCH_ARGS_MAX; k++) {
        big[k] = (unsigned char)(k * 7);
        want += big[k];
    }
    assert_int_equal(ag_dev_launch_copy(dev, s, sum_kernel, big, AG_DEV_LAUNCH_ARGS_MAX, NULL), AG_OK);
    memset(big, 0, AG_DEV_LAUNCH_ARGS_MAX);
    free(big);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);
    assert_int_equal(sum, want);
    assert_int_equal(stats(dev).launches, 12);

    /* Argument checks: nothing enqueued, message names the entry. */
    assert_int_equal(ag_dev_launch_copy(dev, s, packet_kernel, &buf, 0, "packet"), AG_EINVAL);
    assert_errmsg(ctx, "launch_copy: argument block of 0 bytes");
    assert_int_equal(ag_dev_launch_copy(dev, s, packet_kernel, &buf, AG_DEV_LAUNCH_ARGS_MAX + 1u, "packet"),
                     AG_EINVAL);
    assert_errmsg(ctx, "must be 1 to");
    assert_int_equal(ag_dev_launch_copy(dev, s, packet_kernel, NULL, 8, "packet"), AG_EINVAL);
    assert_errmsg(ctx, "argument block is NULL");
    assert_int_equal(ag_dev_launch_copy(dev, s, NULL, &buf, 8, "packet"), AG_EINVAL);
    assert_int_equal(ag_dev_launch_copy(dev, NULL, packet_kernel, &buf, 8, "packet"), AG_EINVAL);
    assert_int_equal(ag_dev_synchronize(dev), AG_OK);
    assert_int_equal(stats(dev).launches, 12);

    /* A failing kernel names itself; later calls see the poison. */
    packet_set(&buf, log, &len, 3);
    buf.fill[100] ^= 1;
    assert_int_equal(ag_dev_launch_copy(dev, s, packet_kernel, &buf, sizeof buf, "packet"), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_EDEVICE);
    assert_errmsg(ctx, "kernel 'packet' failed");
    assert_int_equal(ag_dev_launch_copy(dev, s, packet_kernel, &buf, sizeof buf, "packet"), AG_EDEVICE);
    devfix_close(&f);
    gate_fini(&g);
}

/* Captured launch_copy: every replay sees the bytes of the capture, the
 * graph owns the copies until it is destroyed (even with a replay still
 * queued), and then they are freed. */
static void test_launch_copy_capture(void **state)
{
    (void)state;
    ag_testalloc ta;
    ag_ctx *ctx = agtest_ctx_counted(&ta);
    devfix f;
    devfix_open(&f, ctx, 2, 0);
    ag_device *dev = f.dev;
    ag_dev_stream *s1 = f.h.s[0], *s2 = f.h.s[1];
    gate gt;
    gate_init(&gt);
    static packet buf;
    int log[32], len = 0;
    uint64_t base = ta.live_blocks;

    assert_int_equal(ag_dev_capture_begin(dev, s1), AG_OK);
    packet_set(&buf, log, &len, 7);
    assert_int_equal(ag_dev_launch_copy(dev, s1, packet_kernel, &buf, sizeof buf, "packet"), AG_OK);
    packet_set(&buf, log, &len, 8);
    assert_int_equal(ag_dev_launch_copy(dev, s1, packet_kernel, &buf, sizeof buf, "packet"), AG_OK);
    packet_set(&buf, log, &len, 99);
    ag_dev_graph *g;
    assert_int_equal(ag_dev_capture_end(dev, s1, &g), AG_OK);
    assert_true(ta.live_blocks > base);
    uint64_t with_graph = ta.live_blocks;
    assert_int_equal(ag_dev_synchronize(dev), AG_OK);
    assert_int_equal(len, 0);

    for (int r = 0; r < 3; r++)
        assert_int_equal(ag_dev_graph_launch(dev, g, s1), AG_OK);
    assert_int_equal(ta.live_blocks, with_graph); /* replays copy nothing */
    if (ag_dev_synchronize(dev) != AG_OK)
        fail_msg("%s", ag_ctx_errmsg(ctx));
    assert_int_equal(len, 6);
    for (int k = 0; k < 6; k++)
        assert_int_equal(log[k], 7 + k % 2);

    /* Nested into another capture, the copies are shared, not duplicated. */
    assert_int_equal(ag_dev_capture_begin(dev, s2), AG_OK);
    assert_int_equal(ag_dev_graph_launch(dev, g, s2), AG_OK);
    ag_dev_graph *g2;
    assert_int_equal(ag_dev_capture_end(dev, s2, &g2), AG_OK);

    /* Destroyed with replays still queued behind a gate: they still run on
     * the captured bytes (ASan checks they are not freed yet). */
    assert_int_equal(ag_dev_launch(dev, s1, gate_kernel, &gt, "gate"), AG_OK);
    assert_int_equal(ag_dev_graph_launch(dev, g, s1), AG_OK);
    assert_int_equal(ag_dev_graph_launch(dev, g2, s1), AG_OK);
    gate_wait_entered(&gt);
    ag_dev_graph_destroy(dev, g);
    ag_dev_graph_destroy(dev, g2);
    gate_open(&gt);
    assert_int_equal(ag_dev_synchronize(dev), AG_OK);
    assert_int_equal(len, 10);
    for (int k = 6; k < 10; k++)
        assert_int_equal(log[k], 7 + k % 2);
    assert_int_equal(ta.live_blocks, base);

    /* Same without queued replays: destroy frees the copies at once. */
    assert_int_equal(ag_dev_capture_begin(dev, s2), AG_OK);
    assert_int_equal(ag_dev_launch_copy(dev, s2, packet_kernel, &buf, sizeof buf, "packet"), AG_OK);
    assert_int_equal(ag_dev_capture_end(dev, s2, &g), AG_OK);
    ag_dev_graph_destroy(dev, g);
    assert_int_equal(ta.live_blocks, base);

    /* Eager copies are freed once the work ran and the host synchronised;
     * an abandoned capture frees its copies too. */
    for (int k = 0; k < 5; k++) {
        packet_set(&buf, log, &len, k);
        assert_int_equal(ag_dev_launch_copy(dev, s2, packet_kernel, &buf, sizeof buf, "packet"), AG_OK);
    }
    assert_int_equal(ag_dev_stream_synchronize(dev, s2), AG_OK);
    assert_int_equal(len, 15);
    assert_int_equal(ta.live_blocks, base);
    assert_int_equal(ag_dev_capture_begin(dev, s2), AG_OK);
    assert_int_equal(ag_dev_launch_copy(dev, s2, packet_kernel, &buf, sizeof buf, "packet"), AG_OK);
    handles_drop_stream(&f.h, 1);
    assert_true(ta.live_blocks < base);
    assert_int_equal(ag_dev_device_state(dev, NULL), AG_DEV_HEALTHY);

    devfix_close(&f);
    gate_fini(&gt);
    assert_int_equal(ta.live_blocks, 0);
}

/* launch_copy under host OOM: every failure is AG_ENOMEM with nothing
 * enqueued and nothing leaked (eager and captured). */
typedef struct add_args {
    int *counter;
    int add;
} add_args;

static ag_status add_kernel(void *arg)
{
    const add_args *a = arg;
    *a->counter += a->add;
    return AG_OK;
}

static ag_status launch_copy_oom_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_device *dev = NULL;
    ag_dev_stream *s = NULL;
    ag_dev_graph *g = NULL;
    int counter = 0, launched = 0;
    ag_status st = ag_device_sim_create(ctx, NULL, &dev);
    if (st != AG_OK)
        return st;
    st = ag_dev_stream_create(dev, &s);
    for (int k = 0; k < 40 && st == AG_OK; k++) { /* past the ring's first growth */
        add_args a = {&counter, 1};
        st = ag_dev_launch_copy(dev, s, add_kernel, &a, sizeof a, "add");
        launched += st == AG_OK;
    }
    if (st == AG_OK)
        st = ag_dev_capture_begin(dev, s);
    if (st == AG_OK) {
        add_args a = {&counter, 100};
        st = ag_dev_launch_copy(dev, s, add_kernel, &a, sizeof a, "add");
        ag_status est = ag_dev_capture_end(dev, s, &g);
        if (st == AG_OK)
            st = est;
    }
    if (st == AG_OK)
        st = ag_dev_graph_launch(dev, g, s);
    if (s)
        assert_int_equal(ag_dev_device_state(dev, NULL), AG_DEV_HEALTHY);
    ag_dev_graph_destroy(dev, g);
    ag_dev_stream_destroy(dev, s); /* drains; abandons a capture left open */
    assert_int_equal(counter, launched + (st == AG_OK ? 100 : 0));
    ag_device_destroy(dev);
    return st;
}

static void test_launch_copy_oom(void **state)
{
    (void)state;
    assert_true(AG_TEST_OOM_SWEEP(launch_copy_oom_body, NULL) > 40);
}

/* AG_MEM_HOST is mapped pinned memory: kernels write it directly and the
 * host reads it with plain loads once it has synchronised (stream, event or
 * device); the host's writes before enqueuing are seen by the kernel.  Under
 * ThreadSanitizer this checks the device publishes the order. */
typedef struct host_rw {
    int *host;
    int n;
    int add;
} host_rw;

static ag_status host_rw_kernel(void *arg)
{
    const host_rw *h = arg;
    for (int k = 0; k < h->n; k++)
        h->host[k] += h->add;
    return AG_OK;
}

static void test_host_memory_direct(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    devfix f;
    devfix_open_on(&f, ctx, sim(ctx, 1 << 20, 0, 1 << 20), 2, 1);
    ag_device *dev = f.dev;
    ag_dev_stream *s1 = f.h.s[0], *s2 = f.h.s[1];
    ag_dev_event *e = f.h.e[0];
    void *hp;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HOST, 64 * sizeof(int), 0, &hp), AG_OK);
    int *h = hp;
    for (int k = 0; k < 64; k++)
        h[k] = k; /* host writes before enqueuing */
    host_rw arg = {h, 64, 1000};
    assert_int_equal(ag_dev_launch_copy(dev, s1, host_rw_kernel, &arg, sizeof arg, "host_rw"), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s1), AG_OK);
    for (int k = 0; k < 64; k++)
        assert_int_equal(h[k], k + 1000);
    /* Written on s2, read after an event recorded behind it. */
    arg.add = 1;
    for (int r = 0; r < 50; r++) {
        assert_int_equal(ag_dev_launch_copy(dev, s2, host_rw_kernel, &arg, sizeof arg, "host_rw"), AG_OK);
        assert_int_equal(ag_dev_event_record(dev, e, s2), AG_OK);
        assert_int_equal(ag_dev_event_synchronize(dev, e), AG_OK);
        assert_int_equal(h[r % 64], r % 64 + 1001 + r);
    }
    /* Read after event_query says done. */
    assert_int_equal(ag_dev_launch_copy(dev, s1, host_rw_kernel, &arg, sizeof arg, "host_rw"), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e, s1), AG_OK);
    bool done = false;
    while (!done)
        assert_int_equal(ag_dev_event_query(dev, e, &done), AG_OK);
    assert_int_equal(h[0], 1051);
    ag_dev_mem_free(dev, hp);
    devfix_close(&f);
}

/* stream_query: idle with nothing queued, busy behind a kernel, idle again
 * once it ran; refused while capturing, on a poisoned device, and for NULL
 * arguments; a fault wrapper counts and fails it like any entry. */
static void test_stream_query(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    devfix f;
    devfix_open(&f, ctx, 1, 0);
    ag_device *dev = f.dev;
    ag_dev_stream *s = f.h.s[0];
    bool idle = false;
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_OK);
    assert_true(idle);
    gate g;
    gate_init(&g);
    assert_int_equal(ag_dev_launch(dev, s, gate_kernel, &g, "gate"), AG_OK);
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_OK);
    assert_false(idle);
    gate_open(&g);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_OK);
    assert_true(idle);
    gate_fini(&g);
    assert_int_equal(ag_dev_stream_query(dev, s, NULL), AG_EINVAL);
    assert_int_equal(ag_dev_stream_query(dev, NULL, &idle), AG_EINVAL);
    assert_int_equal(ag_dev_capture_begin(dev, s), AG_OK);
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_EINVAL);
    assert_errmsg(ctx, "capturing");
    ag_dev_graph *gr = NULL;
    assert_int_equal(ag_dev_capture_end(dev, s, &gr), AG_OK);
    ag_dev_graph_destroy(dev, gr);
    /* through a fault wrapper: the first call fails */
    ag_dev_fault plan;
    ag_dev_fault_init(&plan, AG_DEV_ENTRY_BIT(AG_DEV_E_STREAM_QUERY), 1, 0, AG_FAULT_RETURN);
    ag_device *w = NULL;
    assert_int_equal(ag_device_fault_wrap(ctx, dev, &plan, &w), AG_OK);
    assert_int_equal(ag_dev_stream_query(w, s, &idle), AG_EDEVICE);
    assert_errmsg(ctx, "stream_query: injected fault");
    assert_int_equal(ag_dev_stream_query(w, s, &idle), AG_OK);
    assert_true(idle);
    assert_int_equal(plan.calls, 2);
    ag_device_destroy(w);
    ag_dev_poison(dev, "test fault");
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_EDEVICE);
    devfix_close(&f);
}

/* A backend built against the first table (size AG_DEVICE_OPS_SIZE_V1):
 * here one forwarding to a simulated device.  It keeps working, and
 * launch_copy reports that it lacks the entry. */
static ag_device *legacy_inner(void *impl)
{
    return impl;
}
static void lg_destroy(void *impl)
{
    (void)impl;
}
static ag_status lg_mem_alloc(void *impl, ag_mem_type type, size_t bytes, size_t align, void **out)
{
    return ag_dev_mem_alloc(legacy_inner(impl), type, bytes, align, out);
}
static void lg_mem_free(void *impl, void *ptr)
{
    ag_dev_mem_free(legacy_inner(impl), ptr);
}
static ag_status lg_memcpy(void *impl, ag_dev_copy_kind kind, void *dst, const void *src, size_t n,
                           ag_dev_stream *s)
{
    return ag_dev_memcpy_async(legacy_inner(impl), kind, dst, src, n, s);
}
static ag_status lg_memset(void *impl, void *dst, int value, size_t n, ag_dev_stream *s)
{
    return ag_dev_memset_async(legacy_inner(impl), dst, value, n, s);
}
static ag_status lg_launch(void *impl, ag_dev_stream *s, ag_dev_kernel_fn fn, void *arg, const char *name)
{
    return ag_dev_launch(legacy_inner(impl), s, fn, arg, name);
}
static ag_status lg_launch_copy(void *impl, ag_dev_stream *s, ag_dev_kernel_fn fn, const void *args, size_t n,
                                const char *name)
{
    return ag_dev_launch_copy(legacy_inner(impl), s, fn, args, n, name);
}
static ag_status lg_stream_create(void *impl, ag_dev_stream **out)
{
    return ag_dev_stream_create(legacy_inner(impl), out);
}
static void lg_stream_destroy(void *impl, ag_dev_stream *s)
{
    ag_dev_stream_destroy(legacy_inner(impl), s);
}
static ag_status lg_stream_sync(void *impl, ag_dev_stream *s)
{
    return ag_dev_stream_synchronize(legacy_inner(impl), s);
}
static ag_status lg_event_create(void *impl, ag_dev_event **out)
{
    return ag_dev_event_create(legacy_inner(impl), out);
}
static void lg_event_destroy(void *impl, ag_dev_event *e)
{
    ag_dev_event_destroy(legacy_inner(impl), e);
}
static ag_status lg_event_record(void *impl, ag_dev_event *e, ag_dev_stream *s)
{
    return ag_dev_event_record(legacy_inner(impl), e, s);
}
static ag_status lg_stream_wait(void *impl, ag_dev_stream *s, ag_dev_event *e)
{
    return ag_dev_stream_wait_event(legacy_inner(impl), s, e);
}
static ag_status lg_event_query(void *impl, ag_dev_event *e, bool *done)
{
    return ag_dev_event_query(legacy_inner(impl), e, done);
}
static ag_status lg_event_sync(void *impl, ag_dev_event *e)
{
    return ag_dev_event_synchronize(legacy_inner(impl), e);
}
static ag_status lg_capture_begin(void *impl, ag_dev_stream *s)
{
    return ag_dev_capture_begin(legacy_inner(impl), s);
}
static ag_status lg_capture_end(void *impl, ag_dev_stream *s, ag_dev_graph **out)
{
    return ag_dev_capture_end(legacy_inner(impl), s, out);
}
static ag_status lg_graph_launch(void *impl, ag_dev_graph *g, ag_dev_stream *s)
{
    return ag_dev_graph_launch(legacy_inner(impl), g, s);
}
static void lg_graph_destroy(void *impl, ag_dev_graph *g)
{
    ag_dev_graph_destroy(legacy_inner(impl), g);
}
static ag_status lg_sync(void *impl)
{
    return ag_dev_synchronize(legacy_inner(impl));
}
static ag_dev_state lg_state(void *impl, const char **why)
{
    return ag_dev_device_state(legacy_inner(impl), why);
}
static void lg_poison(void *impl, const char *why)
{
    ag_dev_poison(legacy_inner(impl), why);
}
static void lg_stats(void *impl, ag_dev_stats *out)
{
    ag_dev_stats_get(legacy_inner(impl), out);
}

/* The forwarding table of the second size (up to launch_copy), named name:
 * tests shorten, lengthen or change it. */
static ag_device_ops lg_ops(const char *name)
{
    return (ag_device_ops){
        .size = AG_DEVICE_OPS_SIZE_V2, .name = name, .destroy = lg_destroy, .mem_alloc = lg_mem_alloc,
        .mem_free = lg_mem_free, .memcpy_async = lg_memcpy, .memset_async = lg_memset, .launch = lg_launch,
        .stream_create = lg_stream_create, .stream_destroy = lg_stream_destroy,
        .stream_synchronize = lg_stream_sync, .event_create = lg_event_create, .event_destroy = lg_event_destroy,
        .event_record = lg_event_record, .stream_wait_event = lg_stream_wait, .event_query = lg_event_query,
        .event_synchronize = lg_event_sync, .capture_begin = lg_capture_begin, .capture_end = lg_capture_end,
        .graph_launch = lg_graph_launch, .graph_destroy = lg_graph_destroy, .synchronize = lg_sync,
        .state = lg_state, .poison = lg_poison, .stats = lg_stats, .launch_copy = lg_launch_copy,
    };
}

static ag_status lg_stream_query(void *impl, ag_dev_stream *s, bool *idle)
{
    return ag_dev_stream_query(legacy_inner(impl), s, idle);
}
static ag_status lg_stream_capturing(void *impl, ag_dev_stream *s, bool *capturing)
{
    return ag_dev_stream_capturing(legacy_inner(impl), s, capturing);
}
static ag_status lg_record_eager(void *impl, ag_dev_event *e, ag_dev_stream *s, bool *recorded)
{
    return ag_dev_event_record_eager(legacy_inner(impl), e, s, recorded);
}
static ag_status lg_wait_eager(void *impl, ag_dev_stream *s, ag_dev_event *e, bool *enqueued)
{
    return ag_dev_stream_wait_event_eager(legacy_inner(impl), s, e, enqueued);
}

/* A table of the current size forwarding every entry to the inner device,
 * with stream_query as given (NULL: the one entry missing). */
static ag_device_ops full_ops(const char *name, ag_status (*stream_query)(void *, ag_dev_stream *, bool *))
{
    ag_device_ops ops = lg_ops(name);
    ops.size = sizeof ops;
    ops.stream_query = stream_query;
    ops.stream_capturing = lg_stream_capturing;
    ops.event_record_eager = lg_record_eager;
    ops.stream_wait_event_eager = lg_wait_eager;
    return ops;
}

/* A device that hands out the memory of its first allocation of at least
 * 8 MiB again for the next one (a backend aliasing its allocations); the
 * free of the alias is dropped, so that the memory is freed once. */
static void *alias_first;
static int alias_dups;
static ag_status alias_mem_alloc(void *impl, ag_mem_type type, size_t bytes, size_t align, void **out)
{
    if (alias_first && bytes >= (8u << 20)) {
        alias_dups++;
        *out = alias_first;
        return AG_OK;
    }
    ag_status st = lg_mem_alloc(impl, type, bytes, align, out);
    if (st == AG_OK && bytes >= (8u << 20))
        alias_first = *out;
    return st;
}
static void alias_mem_free(void *impl, void *ptr)
{
    if (ptr && ptr == alias_first && alias_dups > 0) {
        alias_dups--;
        return;
    }
    lg_mem_free(impl, ptr);
}

/* Replays text under the check on a device of table ops over a simulated
 * one (hbm bytes), in mode, with the pools private to their streams when
 * private_pools (no borrow, no steal); the result. */
static ag_alloc_replay_result checked_replay(ag_device_ops ops, size_t hbm, const char *text, int mode,
                                             bool private_pools)
{
    ag_ctx *ctx = agtest_ctx();
    ag_device *inner = sim(ctx, hbm, 0, 0), *dev = NULL;
    assert_int_equal(ag_device_create(ctx, &ops, inner, &dev), AG_OK);
    ag_alloc_trace *t = NULL;
    assert_int_equal(ag_alloc_trace_parse(ctx, "t", text, strlen(text), &t), AG_OK);
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.mode = (ag_alloc_mode)mode;
    if (private_pools)
        c.borrow = c.steal = 0;
    ag_alloc_replay_opts o = {.size = sizeof o, .check = true};
    ag_alloc_replay_result r = {.size = sizeof r};
    assert_int_equal(ag_alloc_replay(ctx, dev, t, &c, &o, &r), AG_OK);
    ag_alloc_trace_destroy(t);
    ag_device_destroy(dev);
    ag_device_destroy(inner);
    ag_ctx_destroy(ctx);
    return r;
}

/* The replay's check counts a block handed out over memory that a live
 * block holds, in either mode: two 12 MiB requests on a device that gives
 * both the same memory.  The same trace on a forwarding device counts
 * nothing. */
static void test_check_sees_live_overlap(void **state)
{
    (void)state;
    static const char text[] = "alloc a 12582912 0\nalloc b 12582912 1\nfree a 0\nfree b 1\n";
    for (int mode = 0; mode < 2; mode++)
        for (int alias = 0; alias <= 1; alias++) {
            ag_device_ops ops = full_ops(alias ? "alias" : "forward", lg_stream_query);
            if (alias) {
                ops.mem_alloc = alias_mem_alloc;
                ops.mem_free = alias_mem_free;
            }
            alias_first = NULL;
            alias_dups = 0;
            ag_alloc_replay_result r = checked_replay(ops, 64u << 20, text, mode, false);
            assert_int_equal(r.violations, alias ? 1 : 0);
            assert_int_equal(alias_dups, 0); /* the alias was made, and freed */
            assert_int_equal(r.stats.device_allocs, 2);
        }
}

/* A device whose k-th allocation is the memory at inside_at[k] of one
 * buffer (a backend reusing addresses inside memory it was given back);
 * its frees keep the buffer. */
static char *inside_buf;
static uint32_t inside_k;
static const size_t inside_at[] = {0, 2u << 20, 14u << 20};
static ag_status inside_mem_alloc(void *impl, ag_mem_type type, size_t bytes, size_t align, void **out)
{
    (void)impl, (void)type, (void)align;
    assert_true(inside_k < sizeof inside_at / sizeof *inside_at);
    assert_true(inside_at[inside_k] + bytes <= (64u << 20));
    *out = inside_buf + inside_at[inside_k++];
    return AG_OK;
}
static void inside_mem_free(void *impl, void *ptr)
{
    (void)impl;
    assert_true((char *)ptr >= inside_buf && (char *)ptr < inside_buf + (64u << 20));
}

/* The replay's check splits freed memory that a handout starts inside: a
 * 24 MiB block freed on stream 0 is at [0, 24M); stream 1 gets [2M, 12M)
 * unordered (its front, [0, 2M), stays freed; counted once), frees it, and
 * stream 2 gets [14M, 24M), inside the freed tail [12M, 24M) and ending
 * with it: that tail kept stream 0's use (counted again).  Stream 1 then gets
 * b's memory back from its pool: ordered after b, and after nothing of a's
 * (the front was cut at 2M).  With the pools private to their streams every
 * other request reaches the device, in either mode. */
static void test_check_splits_freed_range(void **state)
{
    (void)state;
    static const char text[] = "alloc a 25165824 0\nfree a 0\nalloc b 10485760 1\nfree b 1\n"
                               "alloc c 10485760 2\nfree c 2\nalloc d 10485760 1\nfree d 1\n";
    inside_buf = malloc(64u << 20);
    assert_non_null(inside_buf);
    for (int mode = 0; mode < 2; mode++) {
        ag_device_ops ops = full_ops("inside", lg_stream_query);
        ops.mem_alloc = inside_mem_alloc;
        ops.mem_free = inside_mem_free;
        inside_k = 0;
        ag_alloc_replay_result r = checked_replay(ops, 1u << 20, text, mode, true);
        assert_int_equal(inside_k, 3);
        assert_int_equal(r.violations, 2);
    }
    free(inside_buf);
    inside_buf = NULL;
}

/* A record that the device refuses for want of host memory, once armed. */
static atomic_int record_nomem;
static ag_status nomem_record_eager(void *impl, ag_dev_event *e, ag_dev_stream *s, bool *recorded)
{
    if (atomic_exchange(&record_nomem, 0)) {
        *recorded = false;
        return AG_ENOMEM;
    }
    return lg_record_eager(impl, e, s, recorded);
}

/* A device whose event record runs out of host memory at a shared block's
 * last free, after the use was released: the free says AG_EDEVICE (the
 * use is gone: a retry is refused), never AG_ENOMEM, which promises that
 * nothing changed and invites a retry that would free the block again.
 * Both modes (the multi mode records at once with fallback_min 0). */
static void test_record_nomem_after_release(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        ag_ctx *ctx = agtest_ctx();
        ag_device *inner = sim(ctx, 1 << 20, 0, 0), *dev = NULL;
        ag_device_ops ops = full_ops("nomem", lg_stream_query);
        ops.event_record_eager = nomem_record_eager;
        assert_int_equal(ag_device_create(ctx, &ops, inner, &dev), AG_OK);
        ag_dev_stream *ss[2] = {0};
        for (int k = 0; k < 2; k++)
            assert_int_equal(ag_dev_stream_create(dev, &ss[k]), AG_OK);
        ag_alloc_config c;
        ag_alloc_config_default(&c);
        c.nstreams = 2;
        c.mode = (ag_alloc_mode)mode;
        c.fallback_min = 0;
        ag_memalloc *a = NULL;
        assert_int_equal(ag_alloc_create(ctx, dev, ss, &c, &a), AG_OK);
        /* the multi mode records only on a busy user; the baseline on
         * every one, and synchronises one whose record failed instead */
        gate held;
        gate_init(&held);
        if (mode == AG_ALLOC_MULTI)
            assert_int_equal(ag_dev_launch(dev, ss[1], gate_kernel, &held, "held"), AG_OK);
        ag_block *b = NULL;
        assert_int_equal(ag_alloc_malloc(a, 0, 4096, &b), AG_OK);
        assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
        assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
        atomic_store(&record_nomem, 1);
        assert_int_equal(ag_alloc_free(a, b, 0), AG_EDEVICE);
        assert_int_equal(atomic_load(&record_nomem), 0); /* the record was asked */
        assert_errmsg(ctx, "recording the event of a deferred free");
        assert_int_equal(ag_alloc_free(a, b, 0), AG_EINVAL); /* released all the same */
        gate_open(&held);
        assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
        ag_alloc_stats st = {.size = sizeof st};
        ag_alloc_stats_get(a, &st, NULL);
        assert_int_equal(st.allocated, 0);
        assert_int_equal(st.pending, 0);
        ag_alloc_destroy(a);
        for (int k = 0; k < 2; k++)
            ag_dev_stream_destroy(dev, ss[k]);
        ag_device_destroy(dev);
        ag_device_destroy(inner);
        ag_ctx_destroy(ctx);
        gate_fini(&held);
    }
}

static void test_legacy_table(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *inner = sim(ctx, 1 << 20, 0, 0), *dev = NULL;
    ag_device_ops ops = lg_ops("legacy");
    ops.size = AG_DEVICE_OPS_SIZE_V1;
    ops.launch_copy = NULL; /* beyond size: never read */
    assert_int_equal(ag_device_create(ctx, &ops, inner, &dev), AG_OK);
    ag_dev_stream *s;
    assert_int_equal(ag_dev_stream_create(dev, &s), AG_OK);
    int count = 0;
    assert_int_equal(ag_dev_launch(dev, s, incr_kernel, &count, "incr"), AG_OK);
    assert_int_equal(ag_dev_launch_copy(dev, s, incr_kernel, &count, sizeof count, "incr"), AG_EUNSUPPORTED);
    assert_errmsg(ctx, "backend 'legacy' predates");
    bool idle = false;
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_EUNSUPPORTED);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);
    assert_int_equal(count, 1);
    ag_dev_stream_destroy(dev, s);
    ag_device_destroy(dev);

    /* The second table (up to launch_copy) lacks stream_query only. */
    ops.size = AG_DEVICE_OPS_SIZE_V2;
    ops.launch_copy = lg_launch_copy;
    assert_int_equal(ag_device_create(ctx, &ops, inner, &dev), AG_OK);
    assert_int_equal(ag_dev_stream_create(dev, &s), AG_OK);
    assert_int_equal(ag_dev_launch_copy(dev, s, incr_kernel, &count, sizeof count, "incr"), AG_OK);
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_EUNSUPPORTED);
    assert_errmsg(ctx, "stream_query: backend 'legacy' predates");
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);
    /* The allocator asks such a device about an event instead: a shared
     * block whose users are idle still goes home at its last free. */
    ag_dev_stream *s2;
    assert_int_equal(ag_dev_stream_create(dev, &s2), AG_OK);
    ag_dev_stream *ss[2] = {s, s2};
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.nstreams = 2;
    ag_memalloc *a = NULL;
    assert_int_equal(ag_alloc_create(ctx, dev, ss, &c, &a), AG_OK);
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 4096, &b), AG_OK);
    assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
    ag_alloc_stats st = {.size = sizeof st};
    ag_alloc_stats_get(a, &st, NULL);
    assert_int_equal(st.stream_queries, 0);
    assert_int_equal(st.event_polls, 1);
    assert_int_equal(st.polled_recycles, 1);
    assert_int_equal(st.pending, 0);
    ag_alloc_destroy(a);
    ag_dev_stream_destroy(dev, s2);
    ag_dev_stream_destroy(dev, s);
    ag_device_destroy(dev);

    /* The third table (up to stream_query) cannot say whether a stream
     * captures: the eager record and wait are the plain ones, captured. */
    ops.size = AG_DEVICE_OPS_SIZE_V3;
    ops.stream_query = lg_stream_query;
    assert_int_equal(ag_device_create(ctx, &ops, inner, &dev), AG_OK);
    assert_int_equal(ag_dev_stream_create(dev, &s), AG_OK);
    assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_OK);
    bool capt = false, rec = false, enq = false;
    assert_int_equal(ag_dev_stream_capturing(dev, s, &capt), AG_EUNSUPPORTED);
    assert_errmsg(ctx, "stream_capturing: backend 'legacy' predates");
    ag_dev_event *e = NULL;
    assert_int_equal(ag_dev_event_create(dev, &e), AG_OK);
    uint64_t records = stats(inner).records;
    assert_int_equal(ag_dev_capture_begin(dev, s), AG_OK);
    assert_int_equal(ag_dev_event_record_eager(dev, e, s, &rec), AG_OK);
    assert_int_equal(ag_dev_stream_wait_event_eager(dev, s, e, &enq), AG_OK);
    assert_true(rec && enq);
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_end(dev, s, &g), AG_OK);
    assert_int_equal(ag_dev_graph_launch(dev, g, s), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);
    assert_int_equal(stats(inner).records, records + 1); /* the captured record, at the replay */
    ag_dev_graph_destroy(dev, g);
    ag_dev_event_destroy(dev, e);
    ag_dev_stream_destroy(dev, s);
    ag_device_destroy(dev);

    /* A table of the current size must set each of the capture entries:
     * one left NULL is refused (the others set), all three are taken. */
    ops.size = sizeof ops;
    for (uint32_t k = 0; k < 4; k++) {
        ops.stream_capturing = k == 0 ? NULL : lg_stream_capturing;
        ops.event_record_eager = k == 1 ? NULL : lg_record_eager;
        ops.stream_wait_event_eager = k == 2 ? NULL : lg_wait_eager;
        dev = NULL;
        assert_int_equal(ag_device_create(ctx, &ops, inner, &dev), k < 3 ? AG_EINVAL : AG_OK);
        if (k < 3)
            assert_errmsg(ctx, "incomplete");
    }
    assert_int_equal(ag_dev_stream_create(dev, &s), AG_OK);
    assert_int_equal(ag_dev_capture_begin(dev, s), AG_OK);
    rec = enq = true;
    assert_int_equal(ag_dev_stream_capturing(dev, s, &capt), AG_OK);
    assert_int_equal(ag_dev_event_create(dev, &e), AG_OK);
    assert_int_equal(ag_dev_event_record_eager(dev, e, s, &rec), AG_OK);
    assert_int_equal(ag_dev_stream_wait_event_eager(dev, s, e, &enq), AG_OK);
    assert_true(capt && !rec && !enq); /* the backend's answers */
    assert_int_equal(ag_dev_capture_end(dev, s, &g), AG_OK);
    ag_dev_graph_destroy(dev, g);
    ag_dev_event_destroy(dev, e);
    ag_dev_stream_destroy(dev, s);
    ag_device_destroy(dev);
    ops.stream_capturing = NULL;
    ops.event_record_eager = NULL;
    ops.stream_wait_event_eager = NULL;
    ops.launch_copy = NULL;
    ops.stream_query = NULL;

    /* A table of the current size must set the new entries; a shorter one
     * than the first is refused. */
    assert_int_equal(ag_device_create(ctx, &ops, inner, &dev), AG_EINVAL);
    assert_errmsg(ctx, "incomplete");
    ops.size = AG_DEVICE_OPS_SIZE_V1 - sizeof(void *);
    assert_int_equal(ag_device_create(ctx, &ops, inner, &dev), AG_EINVAL);
    ag_device_destroy(inner);
    ag_ctx_destroy(ctx);
}

/* The second table (no stream_query) with fallback_min 0: the large-block
 * path meets the missing query at its first question, and takes the event
 * instead, recorded and asked at once.  Both users idle: the shared block
 * goes home at its last free, no event left queued, and the event goes
 * back to the spares (the allocator's destroy leaves none on the device). */
static void test_legacy_fallback_now(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *inner = sim(ctx, 1 << 20, 0, 0), *dev = NULL;
    ag_device_ops ops = lg_ops("legacy");
    assert_int_equal(ag_device_create(ctx, &ops, inner, &dev), AG_OK);
    ag_dev_stream *ss[2];
    for (int k = 0; k < 2; k++)
        assert_int_equal(ag_dev_stream_create(dev, &ss[k]), AG_OK);
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.nstreams = 2;
    c.fallback_min = 0;
    c.poll_every = 0; /* polls at pool misses only */
    ag_memalloc *a = NULL;
    assert_int_equal(ag_alloc_create(ctx, dev, ss, &c, &a), AG_OK);
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 4096, &b), AG_OK);
    assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 0), AG_OK);
    ag_alloc_stats st = {.size = sizeof st};
    ag_alloc_stats_get(a, &st, NULL);
    assert_int_equal(st.stream_queries, 0);
    assert_int_equal(st.event_polls, 1);
    assert_int_equal(st.polled_recycles, 1);
    assert_int_equal(st.pending, 0);
    /* Block c's event on stream 1 (busy behind a gate) is queued; block d's,
     * recorded once the gate is open, answers done at once: the host has
     * seen stream 1 reach a point after c's event, so the next poll (a pool
     * miss) releases c without asking the device about its event. */
    gate g;
    gate_init(&g);
    assert_int_equal(ag_dev_launch(dev, ss[1], gate_kernel, &g, "gate"), AG_OK);
    ag_block *cd[2] = {NULL, NULL}, *x = NULL;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(ag_alloc_malloc(a, 0, 4096, &cd[k]), AG_OK);
        assert_int_equal(ag_alloc_access(a, cd[k], 1), AG_OK);
        assert_int_equal(ag_alloc_free(a, cd[k], 1), AG_OK);
        assert_int_equal(ag_alloc_free(a, cd[k], 0), AG_OK);
        if (k == 0) {
            gate_open(&g);
            assert_int_equal(ag_dev_stream_synchronize(dev, ss[1]), AG_OK); /* unknown to the allocator */
        }
    }
    ag_alloc_stats_get(a, &st, NULL);
    assert_int_equal(st.event_polls, 3);
    assert_int_equal(st.pending, 4096); /* c's */
    assert_int_equal(ag_alloc_malloc(a, 0, 1u << 20, &x), AG_OK);
    ag_alloc_stats_get(a, &st, NULL);
    assert_int_equal(st.event_polls, 3);
    assert_int_equal(st.pending, 0);
    assert_int_equal(ag_alloc_free(a, x, 0), AG_OK);
    gate_fini(&g);
    ag_alloc_destroy(a);
    assert_int_equal(stats(inner).live_events, 0); /* the asked events were kept, and destroyed */
    for (int k = 0; k < 2; k++)
        ag_dev_stream_destroy(dev, ss[k]);
    ag_device_destroy(dev);
    ag_device_destroy(inner);
    ag_ctx_destroy(ctx);
}

/* A table whose idle query, once armed, begins a capture on the stream it
 * has just answered busy for: a capture begun between the allocator's
 * question and its record.  (One hook for the file's one such test.) */
static ag_dev_stream *capture_after_query;

static ag_status hook_stream_query(void *impl, ag_dev_stream *s, bool *idle)
{
    ag_status st = ag_dev_stream_query(legacy_inner(impl), s, idle);
    if (st == AG_OK && !*idle && s == capture_after_query) {
        capture_after_query = NULL;
        assert_int_equal(ag_dev_capture_begin(legacy_inner(impl), s), AG_OK);
    }
    return st;
}

/* Three streams on the hook's table, a block born on 0 used by 1 and 2,
 * both busy behind gates, and stream 2 beginning its capture just after
 * its answer, so that its eager record is declined after stream 1's was
 * made.  With fallback_min 0 (variant 0) the last free's event on stream 1
 * goes stale with a new version and the block waits: counted still, that
 * event's completion would leave the block one event short for good.  In
 * a pool miss's look (variant 1, two small blocks waiting) the first
 * block's record on 2 is declined, its event on 1 goes stale the same way,
 * and the look passes the second block by, knowing stream 2 captures: one
 * record in all.  After the capture, with the gates open, the next look
 * sends every block home, no clean needed. */
static void capture_between(int variant)
{
    ag_ctx *ctx = agtest_ctx();
    ag_device *inner = sim(ctx, 4 << 20, 0, 0), *dev = NULL;
    ag_device_ops ops = full_ops("hook", hook_stream_query);
    assert_int_equal(ag_device_create(ctx, &ops, inner, &dev), AG_OK);
    ag_dev_stream *ss[3];
    for (int k = 0; k < 3; k++)
        assert_int_equal(ag_dev_stream_create(dev, &ss[k]), AG_OK);
    gate g[2];
    for (int k = 0; k < 2; k++) {
        gate_init(&g[k]);
        assert_int_equal(ag_dev_launch(dev, ss[k + 1], gate_kernel, &g[k], "gate"), AG_OK);
    }
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.nstreams = 3;
    if (variant == 0)
        c.fallback_min = 0;
    ag_memalloc *a = NULL;
    assert_int_equal(ag_alloc_create(ctx, dev, ss, &c, &a), AG_OK);
    uint32_t nb = variant == 0 ? 1u : 2u;
    ag_block *b[2] = {NULL, NULL}, *x = NULL, *y = NULL;
    for (uint32_t k = 0; k < nb; k++) {
        assert_int_equal(ag_alloc_malloc(a, 0, 4096, &b[k]), AG_OK);
        for (uint32_t u = 1; u < 3; u++) {
            assert_int_equal(ag_alloc_access(a, b[k], u), AG_OK);
            assert_int_equal(ag_alloc_free(a, b[k], u), AG_OK);
        }
    }
    uint64_t records = stats(inner).records;
    capture_after_query = ss[2];
    ag_alloc_stats st = {.size = sizeof st};
    if (variant == 0) {
        assert_int_equal(ag_alloc_free(a, b[0], 0), AG_OK);
    } else {
        for (uint32_t k = 0; k < nb; k++)
            assert_int_equal(ag_alloc_free(a, b[k], 0), AG_OK); /* small: they wait */
        ag_alloc_stats_get(a, &st, NULL);
        assert_int_equal(st.capture_waits, 0);
        assert_int_equal(ag_alloc_malloc(a, 0, 1u << 20, &x), AG_OK); /* a pool miss: the look */
    }
    assert_null(capture_after_query); /* stream 2 captures */
    assert_int_equal(stats(inner).records - records, 1); /* stream 1's, for the first block */
    ag_alloc_stats_get(a, &st, NULL);
    assert_int_equal(st.capture_waits, nb); /* the declined record; the block passed by */
    assert_int_equal(st.pending, nb * 4096u);
    assert_int_equal(st.fallbacks_recorded, 0);
    ag_dev_graph *gr = NULL;
    assert_int_equal(ag_dev_capture_end(dev, ss[2], &gr), AG_OK);
    ag_dev_graph_destroy(dev, gr);
    for (int k = 0; k < 2; k++) {
        gate_open(&g[k]);
        assert_int_equal(ag_dev_stream_synchronize(dev, ss[k + 1]), AG_OK);
    }
    assert_int_equal(ag_alloc_malloc(a, 0, 2u << 20, &y), AG_OK); /* the next look */
    ag_alloc_stats_get(a, &st, NULL);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.syncs, 0);
    if (x)
        assert_int_equal(ag_alloc_free(a, x, 0), AG_OK);
    assert_int_equal(ag_alloc_free(a, y, 0), AG_OK);
    ag_alloc_destroy(a);
    for (int k = 0; k < 3; k++)
        ag_dev_stream_destroy(dev, ss[k]);
    for (int k = 0; k < 2; k++)
        gate_fini(&g[k]);
    ag_device_destroy(dev);
    ag_device_destroy(inner);
    ag_ctx_destroy(ctx);
}

static void test_capture_between_query_and_record(void **state)
{
    (void)state;
    capture_between(0); /* the large block's last free */
    capture_between(1); /* a pool miss's look */
}

/* A table whose idle query, once armed, ends the capture of the stream it
 * has just refused as capturing: a capture that ends between the
 * allocator's refused question and its question whether the stream
 * captures. */
static ag_dev_stream *capture_ends_after_query;

static ag_status hook_query_ends_capture(void *impl, ag_dev_stream *s, bool *idle)
{
    ag_status st = ag_dev_stream_query(legacy_inner(impl), s, idle);
    if (st == AG_EINVAL && s == capture_ends_after_query) {
        capture_ends_after_query = NULL;
        ag_dev_graph *g = NULL;
        assert_int_equal(ag_dev_capture_end(legacy_inner(impl), s, &g), AG_OK);
        ag_dev_graph_destroy(legacy_inner(impl), g);
    }
    return st;
}

/* A block born on stream 0, used by stream 1 (busy behind a gate), which
 * captures when stream 0 frees the block last (fallback_min 0: the large
 * block's path asks at once).  The query is refused for the capture, which
 * ends before the allocator asks whether stream 1 captures: the refusal no
 * longer holds, so the allocator asks again (busy) and records the event,
 * where it once returned the stale refusal (AG_EINVAL) from the free.  The
 * block goes home once the gate is open. */
static void test_capture_ends_before_question(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *inner = sim(ctx, 4 << 20, 0, 0), *dev = NULL;
    ag_device_ops ops = full_ops("hook", hook_query_ends_capture);
    assert_int_equal(ag_device_create(ctx, &ops, inner, &dev), AG_OK);
    ag_dev_stream *ss[2];
    for (int k = 0; k < 2; k++)
        assert_int_equal(ag_dev_stream_create(dev, &ss[k]), AG_OK);
    gate g;
    gate_init(&g);
    assert_int_equal(ag_dev_launch(dev, ss[1], gate_kernel, &g, "gate"), AG_OK);
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.nstreams = 2;
    c.fallback_min = 0;
    ag_memalloc *a = NULL;
    assert_int_equal(ag_alloc_create(ctx, dev, ss, &c, &a), AG_OK);
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 4096, &b), AG_OK);
    assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
    assert_int_equal(ag_dev_capture_begin(dev, ss[1]), AG_OK);
    uint64_t records = stats(inner).records;
    capture_ends_after_query = ss[1];
    assert_int_equal(ag_alloc_free(a, b, 0), AG_OK);
    assert_null(capture_ends_after_query); /* the capture ended in the query */
    assert_int_equal(ag_ctx_last_status(ctx), AG_OK);
    assert_int_equal(stats(inner).records - records, 1); /* the event on stream 1 */
    ag_alloc_stats st = {.size = sizeof st};
    ag_alloc_stats_get(a, &st, NULL);
    assert_int_equal(st.capture_waits, 0);
    assert_int_equal(st.pending, 4096);
    gate_open(&g);
    assert_int_equal(ag_dev_stream_synchronize(dev, ss[1]), AG_OK);
    assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
    ag_alloc_stats_get(a, &st, NULL);
    assert_int_equal(st.pending, 0);
    ag_alloc_destroy(a);
    for (int k = 0; k < 2; k++)
        ag_dev_stream_destroy(dev, ss[k]);
    gate_fini(&g);
    ag_device_destroy(dev);
    ag_device_destroy(inner);
    ag_ctx_destroy(ctx);
}

/* stream_capturing answers between capture_begin and capture_end only,
 * refuses on a poisoned device and checks its arguments.  The eager record
 * and wait act as the plain forms on a stream that is not capturing and
 * decline on a capturing one, where the plain forms go into the graph: the
 * event keeps its earlier eager point (busy behind a gate; one never
 * recorded stays complete), and the graph holds no record or wait of
 * theirs. */
static void test_capture_eager(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    devfix f;
    devfix_open(&f, ctx, 2, 2);
    ag_device *dev = f.dev;
    ag_dev_stream *s1 = f.h.s[0], *s2 = f.h.s[1];
    ag_dev_event *e = f.h.e[0], *fresh = f.h.e[1];
    bool capt = true, rec = false, enq = false, done = false;
    assert_int_equal(ag_dev_stream_capturing(dev, s1, &capt), AG_OK);
    assert_false(capt);
    assert_int_equal(ag_dev_stream_capturing(dev, s1, NULL), AG_EINVAL);
    assert_errmsg(ctx, "stream_capturing");
    assert_int_equal(ag_dev_event_record_eager(dev, e, s1, NULL), AG_EINVAL);
    assert_int_equal(ag_dev_stream_wait_event_eager(dev, s1, e, NULL), AG_EINVAL);

    /* eager, on a stream that is not capturing: the plain forms */
    gate g;
    gate_init(&g);
    assert_int_equal(ag_dev_launch(dev, s1, gate_kernel, &g, "gate"), AG_OK);
    assert_int_equal(ag_dev_event_record_eager(dev, e, s1, &rec), AG_OK);
    assert_true(rec);
    assert_int_equal(ag_dev_stream_wait_event_eager(dev, s2, e, &enq), AG_OK);
    assert_true(enq);
    int after = 0;
    assert_int_equal(ag_dev_launch(dev, s2, incr_kernel, &after, "incr"), AG_OK);
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_OK);
    assert_false(done);
    assert_int_equal(stats(dev).records, 1);
    assert_int_equal(stats(dev).waits, 1);

    /* s1 captures: the eager forms decline, the plain ones are captured */
    assert_int_equal(ag_dev_capture_begin(dev, s1), AG_OK);
    assert_int_equal(ag_dev_stream_capturing(dev, s1, &capt), AG_OK);
    assert_true(capt);
    assert_int_equal(ag_dev_stream_capturing(dev, s2, &capt), AG_OK);
    assert_false(capt);
    rec = enq = true;
    assert_int_equal(ag_dev_event_record_eager(dev, fresh, s1, &rec), AG_OK);
    assert_false(rec);
    assert_int_equal(ag_dev_event_record_eager(dev, e, s1, &rec), AG_OK);
    assert_false(rec);
    assert_int_equal(ag_dev_stream_wait_event_eager(dev, s1, e, &enq), AG_OK);
    assert_false(enq);
    assert_int_equal(ag_dev_event_query(dev, fresh, &done), AG_OK);
    assert_true(done); /* never recorded */
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_OK);
    assert_false(done); /* still the point behind the gate */
    assert_int_equal(ag_dev_event_record(dev, fresh, s1), AG_OK); /* into the graph */
    assert_int_equal(ag_dev_event_query(dev, fresh, &done), AG_OK);
    assert_true(done); /* a captured record is no eager point */
    assert_int_equal(stats(dev).records, 1);
    assert_int_equal(stats(dev).waits, 1);
    ag_dev_graph *gr = NULL;
    assert_int_equal(ag_dev_capture_end(dev, s1, &gr), AG_OK);
    assert_int_equal(ag_dev_stream_capturing(dev, s1, &capt), AG_OK);
    assert_false(capt);
    gate_open(&g);
    assert_int_equal(ag_dev_synchronize(dev), AG_OK);
    assert_int_equal(after, 1);
    assert_int_equal(ag_dev_graph_launch(dev, gr, s2), AG_OK);
    assert_int_equal(ag_dev_synchronize(dev), AG_OK);
    ag_dev_stats st = stats(dev);
    assert_int_equal(st.records, 2); /* the plain record only */
    assert_int_equal(st.waits, 1);
    ag_dev_graph_destroy(dev, gr);

    /* a poisoned device refuses all three */
    ag_dev_poison(dev, "test");
    assert_int_equal(ag_dev_stream_capturing(dev, s1, &capt), AG_EDEVICE);
    assert_int_equal(ag_dev_event_record_eager(dev, e, s1, &rec), AG_EDEVICE);
    assert_errmsg(ctx, "event_record_eager");
    assert_int_equal(ag_dev_stream_wait_event_eager(dev, s1, e, &enq), AG_EDEVICE);
    assert_errmsg(ctx, "stream_wait_event_eager");
    devfix_close(&f);
    gate_fini(&g);
}

/* The fault wrapper counts the eager record and wait as event_record and
 * stream_wait_event, and fails them there; stream_capturing is an entry of
 * its own. */
static void test_fault_eager_entries(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *inner = sim(ctx, 1 << 20, 0, 0);
    const ag_dev_entry ents[3] = {AG_DEV_E_EVENT_RECORD, AG_DEV_E_STREAM_WAIT, AG_DEV_E_STREAM_CAPTURING};
    for (uint32_t k = 0; k < 3; k++) {
        ag_dev_fault plan;
        ag_dev_fault_init(&plan, AG_DEV_ENTRY_BIT(ents[k]), 2, 0, AG_FAULT_RETURN);
        ag_device *dev = NULL;
        assert_int_equal(ag_device_fault_wrap(ctx, inner, &plan, &dev), AG_OK);
        ag_dev_stream *s;
        ag_dev_event *e;
        assert_int_equal(ag_dev_stream_create(dev, &s), AG_OK);
        assert_int_equal(ag_dev_event_create(dev, &e), AG_OK);
        bool out = false;
        ag_status first, second;
        if (k == 0) {
            first = ag_dev_event_record(dev, e, s);
            second = ag_dev_event_record_eager(dev, e, s, &out);
        } else if (k == 1) {
            first = ag_dev_stream_wait_event(dev, s, e);
            second = ag_dev_stream_wait_event_eager(dev, s, e, &out);
        } else {
            first = ag_dev_stream_capturing(dev, s, &out);
            second = ag_dev_stream_capturing(dev, s, &out);
        }
        assert_int_equal(first, AG_OK);
        assert_int_equal(second, AG_EDEVICE);
        assert_errmsg(ctx, "injected fault");
        assert_int_equal(plan.nfail, 1);
        ag_dev_event_destroy(dev, e);
        ag_dev_stream_destroy(dev, s);
        ag_device_destroy(dev);
    }
    ag_device_destroy(inner);
    ag_ctx_destroy(ctx);
}

/* ---- the scenario swept under host OOM and device faults ---- */

/* What the scenario's kernels add up to: incr + add(1) on s2, then two
 * replays of incr + add(2) on s1. */
#define SCEN_KERNELS (1 + 1 + 2 * (1 + 2))

typedef struct scen_out {
    int kernels;
    ag_dev_state state;
} scen_out;

/* Streams, events, memory of each type, copies of each kind, kernels by
 * launch and launch_copy, a capture and two replays.  Returns the first failure; always cleans up:
 * streams are destroyed (drained) before the memory they touch is freed. */
static ag_status scenario(ag_device *dev, scen_out *so)
{
    ag_dev_stream *s1 = NULL, *s2 = NULL;
    ag_dev_event *e = NULL;
    ag_dev_graph *g = NULL;
    void *a = NULL, *b = NULL, *h = NULL;
    unsigned char in[256], out[256];
    for (int k = 0; k < 256; k++)
        in[k] = (unsigned char)(255 - k);
    memset(out, 0, sizeof out);
    add_args aa = {&so->kernels, 1};
    bool done = false;
    ag_status st;
#define STEP(x)              \
    do {                     \
        if ((st = (x)) != AG_OK) \
            goto out;        \
    } while (0)
    STEP(ag_dev_stream_create(dev, &s1));
    STEP(ag_dev_stream_create(dev, &s2));
    STEP(ag_dev_event_create(dev, &e));
    STEP(ag_dev_mem_alloc(dev, AG_MEM_HBM, 256, 0, &a));
    STEP(ag_dev_mem_alloc(dev, AG_MEM_P2P, 256, 0, &b));
    STEP(ag_dev_mem_alloc(dev, AG_MEM_HOST, 256, 0, &h));
    STEP(ag_dev_memcpy_async(dev, AG_COPY_H2D, a, in, 256, s1));
    STEP(ag_dev_event_record(dev, e, s1));
    STEP(ag_dev_stream_wait_event(dev, s2, e));
    STEP(ag_dev_memcpy_async(dev, AG_COPY_P2P, b, a, 256, s2));
    STEP(ag_dev_launch(dev, s2, incr_kernel, &so->kernels, "incr"));
    STEP(ag_dev_launch_copy(dev, s2, add_kernel, &aa, sizeof aa, "add"));
    aa.add = 1000; /* the copy was taken */
    STEP(ag_dev_capture_begin(dev, s1));
    STEP(ag_dev_memset_async(dev, a, 0, 16, s1));
    STEP(ag_dev_memcpy_async(dev, AG_COPY_D2D, (char *)a + 16, b, 16, s1));
    STEP(ag_dev_launch(dev, s1, incr_kernel, &so->kernels, "incr"));
    aa.add = 2;
    STEP(ag_dev_launch_copy(dev, s1, add_kernel, &aa, sizeof aa, "add"));
    aa.add = 1000;
    STEP(ag_dev_capture_end(dev, s1, &g));
    STEP(ag_dev_event_record(dev, e, s2));
    STEP(ag_dev_stream_wait_event(dev, s1, e));
    STEP(ag_dev_graph_launch(dev, g, s1));
    STEP(ag_dev_graph_launch(dev, g, s1));
    STEP(ag_dev_memcpy_async(dev, AG_COPY_D2H, h, a, 256, s1));
    STEP(ag_dev_memcpy_async(dev, AG_COPY_H2D, b, h, 256, s1));
    STEP(ag_dev_memcpy_async(dev, AG_COPY_D2H, out, b, 256, s1));
    STEP(ag_dev_event_record(dev, e, s1));
    STEP(ag_dev_stream_synchronize(dev, s2));
    STEP(ag_dev_event_synchronize(dev, e));
    STEP(ag_dev_event_query(dev, e, &done));
    STEP(ag_dev_synchronize(dev));
#undef STEP
    /* Only now may the host read what the device wrote. */
    for (int k = 0; k < 256; k++) {
        unsigned char want = k < 16 ? 0 : k < 32 ? in[k - 16] : in[k];
        if (out[k] != want || !done) {
            st = AG_EINTERNAL;
            break;
        }
    }
out:
    so->state = ag_dev_device_state(dev, NULL);
    ag_dev_graph_destroy(dev, g);
    ag_dev_stream_destroy(dev, s1);
    ag_dev_stream_destroy(dev, s2);
    ag_dev_event_destroy(dev, e);
    ag_dev_mem_free(dev, a);
    ag_dev_mem_free(dev, b);
    ag_dev_mem_free(dev, h);
    return st;
}

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_device *dev = NULL;
    ag_status cst = ag_device_sim_create(ctx, NULL, &dev);
    if (cst != AG_OK)
        return cst;
    scen_out so = {0, AG_DEV_HEALTHY};
    ag_status st = scenario(dev, &so);
    ag_dev_stats s = stats(dev);
    for (int t = 0; t < AG_MEM_COUNT_; t++)
        assert_int_equal(s.mem[t].used, 0);
    assert_int_equal(s.live_streams + s.live_events + s.live_graphs, 0);
    assert_int_equal(so.state, AG_DEV_HEALTHY);
    if (st == AG_OK)
        assert_int_equal(so.kernels, SCEN_KERNELS);
    ag_device_destroy(dev);
    return st;
}

static void test_oom_sweep(void **state)
{
    (void)state;
    assert_true(AG_TEST_OOM_SWEEP(oom_body, NULL) > 10);
}

/* Runs the scenario under a fault wrapper at every N; returns the number of
 * runs that injected a failure. */
static uint64_t fault_sweep(uint32_t mask, ag_dev_fault_mode mode)
{
    uint64_t failing = 0;
    for (uint64_t n = 0;; n++) {
        ag_testalloc ta;
        ag_ctx *ctx = agtest_ctx_counted(&ta);
        ag_device *inner = NULL, *dev = NULL;
        assert_int_equal(ag_device_sim_create(ctx, NULL, &inner), AG_OK);
        ag_dev_fault f;
        ag_dev_fault_init(&f, mask, n, 0, mode);
        assert_int_equal(ag_device_fault_wrap(ctx, inner, &f, &dev), AG_OK);
        assert_string_equal(ag_device_backend(dev), "fault");
        scen_out so = {0, AG_DEV_HEALTHY};
        ag_status st = scenario(dev, &so);
        if (n == 0 || f.nfail == 0) {
            assert_int_equal(st, AG_OK);
            assert_int_equal(so.kernels, SCEN_KERNELS);
        } else {
            if (st != AG_ENOMEM && st != AG_EDEVICE)
                fprintf(stderr, "fault sweep n=%llu: %s: %s\n", (unsigned long long)n, ag_status_str(st),
                        ag_ctx_errmsg(ctx));
            assert_true(st == AG_ENOMEM || st == AG_EDEVICE);
            assert_int_equal(f.nfail, 1);
            if (mode == AG_FAULT_RETURN)
                assert_int_equal(so.state, AG_DEV_HEALTHY);
            else if (st == AG_EDEVICE && so.state == AG_DEV_POISONED)
                assert_true(agtest_errmsg_has(ctx, "injected"));
            failing++;
        }
        ag_dev_stats s = stats(dev);
        for (int t = 0; t < AG_MEM_COUNT_; t++)
            assert_int_equal(s.mem[t].used, 0);
        assert_int_equal(s.live_streams + s.live_events + s.live_graphs, 0);
        ag_device_destroy(dev);
        ag_device_destroy(inner);
        ag_ctx_destroy(ctx);
        assert_int_equal(ta.live_blocks, 0);
        if (n > 0 && f.nfail == 0)
            break;
        assert_true(n < 1000);
    }
    return failing;
}

static void test_fault_sweep_per_entry(void **state)
{
    (void)state;
    /* 3 allocations and 6 copies in the scenario. */
    assert_int_equal(fault_sweep(AG_DEV_ENTRY_BIT(AG_DEV_E_MEM_ALLOC), AG_FAULT_RETURN), 3);
    assert_int_equal(fault_sweep(AG_DEV_ENTRY_BIT(AG_DEV_E_MEMCPY), AG_FAULT_RETURN), 6);
    assert_int_equal(fault_sweep(AG_DEV_ENTRY_BIT(AG_DEV_E_MEMCPY), AG_FAULT_DEFERRED), 6);
    assert_int_equal(fault_sweep(AG_DEV_ENTRY_BIT(AG_DEV_E_MEM_ALLOC) | AG_DEV_ENTRY_BIT(AG_DEV_E_MEMCPY),
                                 AG_FAULT_POISON),
                     9);
    /* launch and launch_copy both count as AG_DEV_E_LAUNCH: 2 + 2 calls. */
    assert_int_equal(fault_sweep(AG_DEV_ENTRY_BIT(AG_DEV_E_LAUNCH), AG_FAULT_RETURN), 4);
    assert_int_equal(fault_sweep(AG_DEV_ENTRY_BIT(AG_DEV_E_LAUNCH), AG_FAULT_DEFERRED), 4);
    assert_int_equal(fault_sweep(AG_DEV_ENTRY_BIT(AG_DEV_E_LAUNCH), AG_FAULT_POISON), 4);
}

static void test_fault_sweep_all_entries(void **state)
{
    (void)state;
    uint64_t n = fault_sweep(AG_DEV_ENTRY_ALL, AG_FAULT_RETURN);
    assert_int_equal(n, 30);
    assert_int_equal(fault_sweep(AG_DEV_ENTRY_ALL, AG_FAULT_DEFERRED), n);
    assert_int_equal(fault_sweep(AG_DEV_ENTRY_ALL, AG_FAULT_POISON), n);
}

/* A simulated device with 1 MiB of HBM behind a fault wrapper planned by
 * ag_dev_fault_init's mask, fail_at, repeat and mode (with mid, a backend
 * of that table between the two), then a stream and bytes of HBM made
 * through the wrapper.  wrapfix_close frees and destroys them in reverse. */
typedef struct wrapfix {
    ag_ctx *ctx;
    ag_device *inner, *mid, *dev;
    ag_dev_fault f;
    ag_dev_stream *s;
    void *a;
} wrapfix;

static void wrapfix_open(wrapfix *w, const ag_device_ops *mid, uint32_t mask, uint64_t fail_at, int repeat,
                         ag_dev_fault_mode mode, size_t bytes)
{
    memset(w, 0, sizeof *w);
    w->ctx = agtest_ctx();
    w->inner = sim(w->ctx, 1 << 20, 0, 0);
    if (mid)
        assert_int_equal(ag_device_create(w->ctx, mid, w->inner, &w->mid), AG_OK);
    ag_dev_fault_init(&w->f, mask, fail_at, repeat, mode);
    assert_int_equal(ag_device_fault_wrap(w->ctx, mid ? w->mid : w->inner, &w->f, &w->dev), AG_OK);
    assert_int_equal(ag_dev_stream_create(w->dev, &w->s), AG_OK);
    assert_int_equal(ag_dev_mem_alloc(w->dev, AG_MEM_HBM, bytes, 0, &w->a), AG_OK);
}

/* A wrapper that defers a memset failure (the fail_at-th, and every later
 * one with repeat). */
static void memset_fault_open(wrapfix *w, uint64_t fail_at, int repeat, size_t bytes)
{
    wrapfix_open(w, NULL, AG_DEV_ENTRY_BIT(AG_DEV_E_MEMSET), fail_at, repeat, AG_FAULT_DEFERRED, bytes);
}

static void wrapfix_close(wrapfix *w)
{
    ag_dev_mem_free(w->dev, w->a);
    ag_dev_stream_destroy(w->dev, w->s);
    ag_device_destroy(w->dev);
    ag_device_destroy(w->mid);
    ag_device_destroy(w->inner);
    ag_ctx_destroy(w->ctx);
}

/* A deferred fault on a capturing stream is captured with the call: the
 * device stays healthy until a replay of the graph reaches it. */
static void test_fault_deferred_in_capture(void **state)
{
    (void)state;
    wrapfix m;
    memset_fault_open(&m, 1, 0, 64);
    assert_int_equal(ag_dev_capture_begin(m.dev, m.s), AG_OK);
    assert_int_equal(ag_dev_memset_async(m.dev, m.a, 0, 64, m.s), AG_OK);
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_end(m.dev, m.s, &g), AG_OK);
    assert_int_equal(m.f.nfail, 1);
    assert_int_equal(ag_dev_synchronize(m.dev), AG_OK);
    assert_int_equal(ag_dev_device_state(m.inner, NULL), AG_DEV_HEALTHY);
    assert_int_equal(ag_dev_graph_launch(m.dev, g, m.s), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(m.dev, m.s), AG_EDEVICE);
    assert_errmsg(m.ctx, "kernel 'injected fault in memset_async' failed");
    assert_int_equal(ag_dev_device_state(m.inner, NULL), AG_DEV_POISONED);
    ag_dev_graph_destroy(m.dev, g);
    wrapfix_close(&m);
}

/* A deferred fault surfaces at the next synchronisation, naming the call. */
static void test_fault_deferred_message(void **state)
{
    (void)state;
    wrapfix m;
    memset_fault_open(&m, 2, 1, 8);
    assert_int_equal(ag_dev_memset_async(m.dev, m.a, 0, 8, m.s), AG_OK);
    assert_int_equal(ag_dev_memset_async(m.dev, m.a, 0, 8, m.s), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(m.dev, m.s), AG_EDEVICE);
    assert_errmsg(m.ctx, "kernel 'injected fault in memset_async' failed");
    assert_int_equal(ag_dev_memset_async(m.dev, m.a, 0, 8, m.s), AG_EDEVICE); /* poisoned now */
    assert_int_equal(m.f.calls, 3);
    assert_int_equal(m.f.nfail, 2);
    assert_int_equal(ag_dev_device_state(m.inner, NULL), AG_DEV_POISONED);
    wrapfix_close(&m);
}

static void test_backend_table_checked(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.size = sizeof ops;
    ag_device *dev = (ag_device *)1;
    assert_int_equal(ag_device_create(ctx, &ops, NULL, &dev), AG_EINVAL);
    assert_null(dev);
    assert_errmsg(ctx, "incomplete");
    ag_device_sim_config c = ag_device_sim_defaults();
    c.size = 4;
    assert_int_equal(ag_device_sim_create(ctx, &c, &dev), AG_EINVAL);
    assert_int_equal(ag_device_fault_wrap(ctx, NULL, NULL, &dev), AG_EINVAL);
    ag_device_destroy(NULL);
    ag_ctx_destroy(ctx);
}

/* The host side of a copy: ordinary host memory, or a range inside one
 * HOST allocation that must still be there when the copy runs; never
 * device memory, nor a device allocation's alignment slack, nor a range
 * running out of a HOST allocation. */
static void test_copy_host_side(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    devfix f;
    devfix_open_on(&f, ctx, dev, 1, 0);
    ag_dev_stream *s = f.h.s[0];
    char *a = NULL, *b = NULL, *h = NULL;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 65536, (void **)&a), AG_OK);
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 0, (void **)&b), AG_OK);
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HOST, 4096, 0, (void **)&h), AG_OK);
    /* a host range that starts before a device allocation and runs into it */
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, a - 16, b, 32, s), AG_EINVAL);
    assert_true(agtest_errmsg_has(ctx, "destination is device memory (use a d2d copy)"));
    /* one in the slack after it */
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, a + 64, a, 16, s), AG_EINVAL);
    assert_true(agtest_errmsg_has(ctx, "destination is device memory"));
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_H2D, b, a - 8, 16, s), AG_EINVAL);
    assert_true(agtest_errmsg_has(ctx, "source is device memory"));
    /* a range running out of a HOST allocation */
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_H2D, b, h + 4090, 16, s), AG_EINVAL);
    assert_true(agtest_errmsg_has(ctx, "source meets a HOST allocation but is not inside it"));
    /* ordinary host memory and a HOST range inside serve */
    char plain[64];
    memset(plain, 7, sizeof plain);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_H2D, b, plain, 64, s), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, h + 100, b, 64, s), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);
    assert_int_equal(h[100], 7);
    assert_int_equal(ag_dev_device_state(dev, NULL), AG_DEV_HEALTHY);
    /* a HOST allocation freed while a copy from it is queued: the copy
     * finds it gone and poisons the device instead of reading freed memory */
    gate g;
    gate_init(&g);
    assert_int_equal(ag_dev_launch(dev, s, gate_kernel, &g, "gate"), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_H2D, b, h, 64, s), AG_OK);
    gate_wait_entered(&g);
    ag_dev_mem_free(dev, h);
    gate_open(&g);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_EDEVICE);
    assert_true(agtest_errmsg_has(ctx, "source HOST allocation is gone when it ran"));
    assert_int_equal(ag_dev_device_state(dev, NULL), AG_DEV_POISONED);
    gate_fini(&g);
    ag_dev_mem_free(dev, a);
    ag_dev_mem_free(dev, b);
    devfix_close(&f);
}

/* A deferred fault's call keeps its own status whether or not the failing
 * kernel has run: a backend that lets the stream's queued work run before
 * forwarding the copy makes sure it has (the device is poisoned when the
 * real call arrives).  A copy out of its allocation stays AG_EINVAL; a
 * valid one is AG_OK, the fault surfacing at the next synchronisation. */
static ag_status sync_first_memcpy(void *impl, ag_dev_copy_kind kind, void *dst, const void *src, size_t n,
                                   ag_dev_stream *s)
{
    (void)ag_dev_stream_synchronize(legacy_inner(impl), s);
    return ag_dev_memcpy_async(legacy_inner(impl), kind, dst, src, n, s);
}

/* The second table with that memcpy_async; the device keeps a pointer to
 * it, so it must outlive the device. */
static ag_device_ops syncfirst_ops(void)
{
    ag_device_ops o = lg_ops("syncfirst");
    o.memcpy_async = sync_first_memcpy;
    return o;
}

static void test_deferred_fault_status(void **state)
{
    (void)state;
    for (int valid = 0; valid < 2; valid++) {
        const ag_device_ops mid = syncfirst_ops();
        wrapfix w;
        wrapfix_open(&w, &mid, AG_DEV_ENTRY_BIT(AG_DEV_E_MEMCPY), 1, 0, AG_FAULT_DEFERRED, 64);
        ag_ctx *ctx = w.ctx;
        char host[128] = {0};
        ag_status st = ag_dev_memcpy_async(w.dev, AG_COPY_H2D, w.a, host, valid ? 64 : sizeof host, w.s);
        assert_int_equal(w.f.nfail, 1);
        assert_int_equal(ag_dev_device_state(w.inner, NULL), AG_DEV_POISONED); /* the kernel ran first */
        if (valid) {
            assert_int_equal(st, AG_OK);
        } else {
            assert_int_equal(st, AG_EINVAL);
            assert_errmsg(ctx, "destination is not inside one live HBM/P2P allocation");
        }
        assert_int_equal(ag_dev_stream_synchronize(w.dev, w.s), AG_EDEVICE);
        assert_errmsg(ctx, "injected fault in memcpy_async");
        wrapfix_close(&w);
    }
}

/* The failing kernel not run yet: a refused call keeps its AG_EINVAL, and
 * the fault still fires at that point of the stream (device.h). */
static void test_deferred_fault_refused_call(void **state)
{
    (void)state;
    wrapfix m;
    memset_fault_open(&m, 1, 0, 64);
    gate g;
    gate_init(&g);
    assert_int_equal(ag_dev_launch(m.dev, m.s, gate_kernel, &g, "gate"), AG_OK);
    gate_wait_entered(&g);
    assert_int_equal(ag_dev_memset_async(m.dev, m.a, 0, 128, m.s), AG_EINVAL); /* out of range */
    assert_int_equal(m.f.nfail, 1);
    assert_int_equal(ag_dev_device_state(m.inner, NULL), AG_DEV_HEALTHY);
    gate_open(&g);
    assert_int_equal(ag_dev_stream_synchronize(m.dev, m.s), AG_EDEVICE);
    assert_int_equal(ag_dev_device_state(m.inner, NULL), AG_DEV_POISONED);
    gate_fini(&g);
    wrapfix_close(&m);
}

/* ag_dev_synchronize waits for the work enqueued before the call only:
 * work another thread enqueues meanwhile (here, waiting for what the host
 * does once the synchronise has returned) is not waited for.  The other
 * thread enqueues 300 ms after the start, when the host is inside the call
 * (if the host had not even set its flag by then, the try proves nothing
 * and is made again), then lets the earlier work finish; it opens the late
 * work's gate itself only if the synchronise is still blocked 3 s later. */
typedef struct late_work {
    ag_device *dev;
    ag_dev_stream *s1;
    gate *early, *late;
    ag_dev_event *ev; /* the event the host waits for, recorded again behind the late work; NULL: synchronize */
    atomic_int entering, returned;
    ag_status launched, recorded;
    int overwaited, inconclusive;
} late_work;

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *late_thread(void *arg)
{
    late_work *l = arg;
    nap_ms(300);
    l->inconclusive = !atomic_load(&l->entering);
    l->launched = ag_dev_launch(l->dev, l->s1, gate_kernel, l->late, "late");
    if (l->ev)
        l->recorded = ag_dev_event_record(l->dev, l->ev, l->s1);
    if (l->inconclusive)
        gate_open(l->late); /* enqueued before the call: rightly waited for */
    gate_open(l->early);
    for (int k = 0; k < 300 && !atomic_load(&l->returned); k++)
        nap_ms(10);
    if (!atomic_load(&l->returned)) {
        l->overwaited = 1;
        gate_open(l->late);
    }
    return NULL;
}

/* The same for event_synchronize: it waits for the point the event stood
 * for at the call, not for a record another thread makes meanwhile. */
static void test_synchronize_earlier_work(void **state)
{
    (void)state;
    for (int event = 0; event < 2; event++)
        for (int attempt = 0;; attempt++) {
            assert_true(attempt < 5);
            devfix f;
            devfix_open(&f, agtest_ctx(), 2, 1); /* stream 0 waited for first */
            ag_device *dev = f.dev;
            ag_dev_stream *s0 = f.h.s[0], *s1 = f.h.s[1];
            ag_dev_event *ev = f.h.e[0];
            gate early, late;
            gate_init(&early);
            gate_init(&late);
            assert_int_equal(ag_dev_launch(dev, s0, gate_kernel, &early, "early"), AG_OK);
            assert_int_equal(ag_dev_event_record(dev, ev, s0), AG_OK);
            late_work l = {.dev = dev, .s1 = s1, .early = &early, .late = &late, .ev = event ? ev : NULL};
            pthread_t th;
            assert_int_equal(pthread_create(&th, NULL, late_thread, &l), 0);
            atomic_store(&l.entering, 1);
            assert_int_equal(event ? ag_dev_event_synchronize(dev, ev) : ag_dev_synchronize(dev), AG_OK);
            atomic_store(&l.returned, 1);
            pthread_join(th, NULL);
            assert_int_equal(l.launched, AG_OK);
            assert_int_equal(l.recorded, AG_OK);
            assert_false(l.overwaited);
            gate_open(&late);
            assert_int_equal(ag_dev_synchronize(dev), AG_OK);
            devfix_close(&f);
            gate_fini(&early);
            gate_fini(&late);
            if (!l.inconclusive)
                break;
        }
}

/* A stream wait the host cannot queue (no host memory to grow the queue)
 * is refused and not counted in the device's waits. */
static void test_wait_refused_uncounted(void **state)
{
    (void)state;
    ag_testalloc ta;
    devfix f;
    devfix_open(&f, agtest_ctx_counted(&ta), 2, 1);
    ag_device *dev = f.dev;
    ag_dev_stream *s0 = f.h.s[0], *s1 = f.h.s[1];
    ag_dev_event *e = f.h.e[0];
    gate g0, g1;
    gate_init(&g0);
    gate_init(&g1);
    assert_int_equal(ag_dev_launch(dev, s0, gate_kernel, &g0, "busy"), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e, s0), AG_OK); /* not complete */
    /* stream 1's queue full: its first kernel runs (holding nothing), the
     * rest wait behind it */
    assert_int_equal(ag_dev_launch(dev, s1, gate_kernel, &g1, "busy"), AG_OK);
    gate_wait_entered(&g1);
    int count = 0;
    for (uint32_t k = 0; k < 16; k++)
        assert_int_equal(ag_dev_launch(dev, s1, incr_kernel, &count, "incr"), AG_OK);
    ag_dev_stats before = {.size = sizeof before}, after = {.size = sizeof after};
    ag_dev_stats_get(dev, &before);
    ta.fail_at = ta.calls + 1u;
    ag_status st = ag_dev_stream_wait_event(dev, s1, e);
    ta.fail_at = 0;
    ag_dev_stats_get(dev, &after);
    assert_int_equal(ta.nfail, 1); /* the queue's growth */
    assert_int_equal(st, AG_ENOMEM);
    assert_int_equal(after.waits, before.waits);
    assert_int_equal(ag_dev_stream_wait_event(dev, s1, e), AG_OK);
    gate_open(&g0);
    gate_open(&g1);
    assert_int_equal(ag_dev_synchronize(dev), AG_OK);
    assert_int_equal(count, 16);
    devfix_close(&f);
    gate_fini(&g0);
    gate_fini(&g1);
    assert_int_equal(ta.live_blocks, 0);
}

/* What a kernel enqueues while the host synchronises is covered when the
 * kernel is: a parent kernel, enqueued before the call, launches a slow
 * child on the same stream, on a stream of a higher id and on one of a
 * lower id (walked before the parent's); the synchronise returns only
 * once the child has run. */
typedef struct child_work {
    ag_device *dev;
    ag_dev_stream *target;
    atomic_int ran;
} child_work;

static ag_status slow_child(void *arg)
{
    nap_ms(50);
    atomic_store(&((child_work *)arg)->ran, 1);
    return AG_OK;
}

static ag_status parent_kernel(void *arg)
{
    child_work *c = arg;
    nap_ms(20); /* the host is inside the synchronise by now, most times */
    return ag_dev_launch(c->dev, c->target, slow_child, c, "child");
}

static void test_synchronize_kernel_children(void **state)
{
    (void)state;
    for (int where = 0; where < 3; where++) {
        devfix f;
        devfix_open(&f, agtest_ctx(), 2, 0);
        ag_device *dev = f.dev;
        ag_dev_stream *const *s = f.h.s;
        /* the parent on stream 0 (same stream, or child on 1), or on 1 (child on 0) */
        ag_dev_stream *on = where == 2 ? s[1] : s[0];
        child_work c = {.dev = dev, .target = where == 0 ? s[0] : where == 1 ? s[1] : s[0]};
        assert_int_equal(ag_dev_launch(dev, on, parent_kernel, &c, "parent"), AG_OK);
        assert_int_equal(ag_dev_synchronize(dev), AG_OK);
        assert_true(atomic_load(&c.ran));
        bool idle = false;
        for (int k = 0; k < 2; k++) {
            assert_int_equal(ag_dev_stream_query(dev, s[k], &idle), AG_OK);
            assert_true(idle);
        }
        devfix_close(&f);
    }
}

/* An event named by a captured record is kept alive by the graph: the
 * user's destroy leaves its memory in place until the graph is destroyed. */
static void test_graph_keeps_event_alive(void **state)
{
    (void)state;
    ag_testalloc ta;
    devfix f;
    devfix_open(&f, agtest_ctx_counted(&ta), 1, 1);
    ag_device *dev = f.dev;
    ag_dev_stream *s = f.h.s[0];
    ag_dev_event *e = f.h.e[0];
    assert_int_equal(ag_dev_capture_begin(dev, s), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e, s), AG_OK);
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_end(dev, s, &g), AG_OK);
    uint64_t live = ta.live_blocks;
    handles_drop_event(&f.h, 0);
    assert_int_equal(stats(dev).live_events, 0);
    assert_int_equal(ta.live_blocks, live); /* still held by the graph */
    assert_int_equal(ag_dev_graph_launch(dev, g, s), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);
    ag_dev_graph_destroy(dev, g); /* frees the event too: no leak below */
    devfix_close(&f);
    assert_int_equal(ta.live_blocks, 0);
}

/* In poisoning mode an injected failure shows at once: the call fails
 * (stream work included, which is not deferred) and the inner device is
 * poisoned before any synchronisation, naming the entry. */
static void test_fault_poison_mode_at_once(void **state)
{
    (void)state;
    wrapfix w;
    wrapfix_open(&w, NULL, AG_DEV_ENTRY_BIT(AG_DEV_E_MEMSET), 1, 0, AG_FAULT_POISON, 64);
    assert_int_equal(ag_dev_device_state(w.inner, NULL), AG_DEV_HEALTHY);
    assert_int_equal(ag_dev_memset_async(w.dev, w.a, 0, 64, w.s), AG_EDEVICE);
    assert_errmsg(w.ctx, "memset_async: injected fault");
    const char *why = NULL;
    assert_int_equal(ag_dev_device_state(w.inner, &why), AG_DEV_POISONED);
    assert_non_null(strstr(why, "memset_async"));
    assert_int_equal(stats(w.inner).memsets, 0);
    assert_int_equal(w.f.nfail, 1);
    wrapfix_close(&w);
}

/* A graph whose ranges are all valid is refused by a poisoned device
 * (AG_EDEVICE, nothing enqueued, no replay counted). */
static void test_graph_launch_poisoned(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    devfix f;
    devfix_open(&f, ctx, 1, 0);
    ag_device *dev = f.dev;
    ag_dev_stream *s = f.h.s[0];
    void *a = NULL;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 0, &a), AG_OK);
    assert_int_equal(ag_dev_capture_begin(dev, s), AG_OK);
    assert_int_equal(ag_dev_memset_async(dev, a, 1, 64, s), AG_OK);
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_end(dev, s, &g), AG_OK);
    ag_dev_poison(dev, "a test fault");
    assert_int_equal(ag_dev_graph_launch(dev, g, s), AG_EDEVICE);
    assert_errmsg(ctx, "graph_launch: the device is poisoned: a test fault");
    assert_int_equal(stats(dev).graph_launches, 0);
    ag_dev_graph_destroy(dev, g);
    ag_dev_mem_free(dev, a);
    devfix_close(&f);
}

/* A copy needs both a source and a destination: either one NULL (the other
 * valid) is AG_EINVAL at the call, naming the argument, with nothing
 * enqueued. */
static void test_copy_null_side(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    devfix f;
    devfix_open(&f, ctx, 1, 0);
    ag_device *dev = f.dev;
    ag_dev_stream *s = f.h.s[0];
    void *a = NULL;
    char host[64] = {0};
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 0, &a), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_H2D, a, NULL, 64, s), AG_EINVAL);
    assert_errmsg(ctx, "memcpy_async: NULL source or destination");
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, NULL, a, 64, s), AG_EINVAL);
    assert_errmsg(ctx, "memcpy_async: NULL source or destination");
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_H2D, a, host, 64, s), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);
    assert_int_equal(stats(dev).copies[AG_COPY_H2D], 1);
    assert_int_equal(stats(dev).copies[AG_COPY_D2H], 0);
    ag_dev_mem_free(dev, a);
    devfix_close(&f);
}

/* ---- edges: poison during waits, queue growth, bounds, fault plans ---- */

/* Opens a gate if the host has not come back from a call within 5 s, so a
 * call that must return at once fails its test instead of hanging it.  A
 * working device returns within milliseconds: the delay only bounds how long
 * a broken one is given, it orders nothing. */
typedef struct watchdog {
    pthread_t th;
    gate *g;
    atomic_int returned;
    int fired;
} watchdog;

static void *watchdog_main(void *arg)
{
    watchdog *w = arg;
    for (int k = 0; k < 500 && !atomic_load(&w->returned); k++)
        nap_ms(10);
    if (!atomic_load(&w->returned)) {
        w->fired = 1;
        gate_open(w->g);
    }
    return NULL;
}

static void watchdog_start(watchdog *w, gate *g)
{
    w->g = g;
    atomic_init(&w->returned, 0);
    w->fired = 0;
    assert_int_equal(pthread_create(&w->th, NULL, watchdog_main, w), 0);
}

/* The host came back: stops the watchdog; whether it had to open the gate. */
static bool watchdog_stop(watchdog *w)
{
    atomic_store(&w->returned, 1);
    pthread_join(w->th, NULL);
    return w->fired != 0;
}

/* Poison ends a stream's wait on another stream at once: the waiting stream
 * drains, its later work dropped, while the stream it waits for is still
 * held by a running kernel (device.h: streams still drain, so waits
 * return).  The host first synchronises with an event recorded just before
 * the wait; the waiting worker holds the device's lock from completing the
 * kernel ahead of the wait until it sleeps inside it, so the poison finds
 * it asleep there and must wake it. */
static void test_poison_ends_stream_wait(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    devfix f;
    devfix_open(&f, ctx, 2, 2);
    ag_device *dev = f.dev;
    ag_dev_stream *s1 = f.h.s[0], *s2 = f.h.s[1];
    ag_dev_event *e1 = f.h.e[0], *e2 = f.h.e[1];
    gate held, start;
    gate_init(&held);
    gate_init(&start);
    int after = 0;
    assert_int_equal(ag_dev_launch(dev, s1, gate_kernel, &held, "held"), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e1, s1), AG_OK);
    gate_wait_entered(&held); /* running: the poison cannot drop it */
    assert_int_equal(ag_dev_launch(dev, s2, gate_kernel, &start, "start"), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e2, s2), AG_OK);
    assert_int_equal(ag_dev_stream_wait_event(dev, s2, e1), AG_OK);
    assert_int_equal(ag_dev_launch(dev, s2, incr_kernel, &after, "after"), AG_OK);
    gate_open(&start);
    assert_int_equal(ag_dev_event_synchronize(dev, e2), AG_OK); /* s2 now sleeps in its wait */
    ag_dev_poison(dev, "a test fault");
    watchdog w;
    watchdog_start(&w, &held);
    ag_status st = ag_dev_stream_synchronize(dev, s2);
    bool fired = watchdog_stop(&w);
    ag_dev_stats ds = stats(dev);
    gate_open(&held);
    assert_false(fired); /* returned with s1 still held */
    assert_int_equal(st, AG_EDEVICE);
    assert_errmsg(ctx, "stream_synchronize: the device is poisoned: a test fault");
    assert_int_equal(after, 0);
    assert_int_equal(ds.dropped, 1); /* s2's kernel; s1's was running */
    devfix_close(&f);
    gate_fini(&held);
    gate_fini(&start);
}

/* Opens a gate after a nap, noting first that it did: a call that returns
 * before the note returned with the gated kernel still running. */
typedef struct late_opener {
    pthread_t th;
    gate *g;
    atomic_int opened;
} late_opener;

static void *late_opener_main(void *arg)
{
    late_opener *o = arg;
    nap_ms(100);
    atomic_store(&o->opened, 1);
    gate_open(o->g);
    return NULL;
}

/* On a poisoned device each synchronising entry (event, stream, device)
 * still waits for a kernel already running, so that the host may free what
 * it touches once the call returns, and then returns AG_EDEVICE.  The
 * work queued behind the kernel is dropped. */
static void test_synchronize_poisoned_waits_running(void **state)
{
    (void)state;
    static const char *const entry[] = {"event_synchronize", "stream_synchronize", "synchronize"};
    for (int which = 0; which < 3; which++) {
        ag_ctx *ctx = agtest_ctx();
        devfix f;
        devfix_open(&f, ctx, 1, 1);
        ag_device *dev = f.dev;
        ag_dev_stream *s = f.h.s[0];
        ag_dev_event *e = f.h.e[0];
        gate held;
        gate_init(&held);
        int after = 0;
        assert_int_equal(ag_dev_launch(dev, s, gate_kernel, &held, "held"), AG_OK);
        assert_int_equal(ag_dev_event_record(dev, e, s), AG_OK);
        assert_int_equal(ag_dev_launch(dev, s, incr_kernel, &after, "after"), AG_OK);
        gate_wait_entered(&held); /* running: poison cannot drop it */
        ag_dev_poison(dev, "a test fault");
        late_opener o = {.g = &held};
        atomic_init(&o.opened, 0);
        assert_int_equal(pthread_create(&o.th, NULL, late_opener_main, &o), 0);
        ag_status st = which == 0   ? ag_dev_event_synchronize(dev, e)
                       : which == 1 ? ag_dev_stream_synchronize(dev, s)
                                    : ag_dev_synchronize(dev);
        int opened = atomic_load(&o.opened);
        pthread_join(o.th, NULL);
        assert_int_equal(opened, 1); /* not back before the kernel ended */
        assert_int_equal(st, AG_EDEVICE);
        char want[96];
        snprintf(want, sizeof want, "%s: the device is poisoned: a test fault", entry[which]);
        assert_errmsg(ctx, want);
        assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_EDEVICE);
        assert_int_equal(after, 0);
        assert_int_equal(stats(dev).dropped, 1);
        devfix_close(&f);
        gate_fini(&held);
    }
}

/* A stream's queue (16 operations at first) grows only when an operation
 * does not fit: the launch that fills it exactly takes no host memory, nor
 * does a wait on an event of the same stream (FIFO order satisfies it, so
 * nothing is queued, yet it counts as a wait); the next operation must
 * grow the queue, and fails with AG_ENOMEM when the host cannot. */
static void test_queue_grows_on_demand(void **state)
{
    (void)state;
    ag_testalloc ta;
    devfix f;
    devfix_open(&f, agtest_ctx_counted(&ta), 1, 1);
    ag_device *dev = f.dev;
    ag_dev_stream *s = f.h.s[0];
    ag_dev_event *e = f.h.e[0];
    gate g;
    gate_init(&g);
    assert_int_equal(ag_dev_launch(dev, s, gate_kernel, &g, "gate"), AG_OK);
    gate_wait_entered(&g); /* the gate left the queue: it is empty */
    int count = 0;
    for (int k = 0; k < 15; k++)
        assert_int_equal(ag_dev_launch(dev, s, incr_kernel, &count, "incr"), AG_OK);
    /* statuses are kept and checked once the gate is open */
    ta.fail_at = ta.calls + 1u; /* the next host allocation fails */
    ag_status fill = ag_dev_launch(dev, s, incr_kernel, &count, "incr"); /* 16 of 16 */
    ag_status rec = ag_dev_event_record(dev, e, s);
    uint64_t waits = stats(dev).waits;
    ag_status waited = ag_dev_stream_wait_event(dev, s, e);
    uint64_t waits_after = stats(dev).waits, nfail_before = ta.nfail;
    ag_status grow = ag_dev_launch(dev, s, incr_kernel, &count, "incr"); /* 17: must grow */
    uint64_t nfail_after = ta.nfail;
    ta.fail_at = 0;
    ag_status again = ag_dev_launch(dev, s, incr_kernel, &count, "incr");
    gate_open(&g);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);
    assert_int_equal(fill, AG_OK);
    assert_int_equal(rec, AG_OK);
    assert_int_equal(waited, AG_OK);
    assert_int_equal(waits_after, waits + 1);
    assert_int_equal(nfail_before, 0);
    assert_int_equal(grow, AG_ENOMEM);
    assert_int_equal(nfail_after, 1);
    assert_int_equal(again, AG_OK);
    assert_int_equal(count, 17);
    assert_int_equal(ag_dev_device_state(dev, NULL), AG_DEV_HEALTHY);
    devfix_close(&f);
    gate_fini(&g);
    assert_int_equal(ta.live_blocks, 0);
}

/* A d2h copy into a HOST allocation must find it still there when the copy
 * runs: freed meanwhile, the copy poisons the device instead of writing
 * freed memory (the destination side of test_copy_host_side's check). */
static void test_copy_into_freed_host_poisons(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    devfix f;
    devfix_open_on(&f, ctx, sim(ctx, 1 << 20, 0, 1 << 20), 1, 0);
    ag_device *dev = f.dev;
    ag_dev_stream *s = f.h.s[0];
    void *b = NULL, *h = NULL;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 0, &b), AG_OK);
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HOST, 4096, 0, &h), AG_OK);
    gate g;
    gate_init(&g);
    assert_int_equal(ag_dev_launch(dev, s, gate_kernel, &g, "gate"), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, h, b, 64, s), AG_OK);
    gate_wait_entered(&g);
    ag_dev_mem_free(dev, h);
    gate_open(&g);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_EDEVICE);
    assert_errmsg(ctx, "d2h of 64 bytes");
    assert_errmsg(ctx, "destination HOST allocation is gone when it ran");
    assert_int_equal(ag_dev_device_state(dev, NULL), AG_DEV_POISONED);
    assert_int_equal(stats(dev).copies[AG_COPY_D2H], 0);
    ag_dev_mem_free(dev, b);
    devfix_close(&f);
    gate_fini(&g);
}

/* mem_alloc's bounds: AG_MEM_COUNT_ itself is out of range, and a size above
 * SIZE_MAX / 2 is absurd; both are AG_EINVAL naming the argument (not a
 * capacity failure), with nothing allocated or counted. */
static void test_mem_alloc_bounds(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = sim(ctx, 1 << 20, 1 << 20, 1 << 20);
    void *p = (void *)1;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_COUNT_, 8, 0, &p), AG_EINVAL);
    assert_null(p);
    assert_errmsg(ctx, "mem_alloc: memory type out of range");
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, SIZE_MAX / 2 + 1u, 0, &p), AG_EINVAL);
    assert_errmsg(ctx, "mem_alloc: size is absurd");
    ag_dev_stats st = stats(dev);
    for (int t = 0; t < AG_MEM_COUNT_; t++) {
        assert_int_equal(st.mem[t].nalloc, 0);
        assert_int_equal(st.mem[t].nfail, 0);
        assert_int_equal(st.mem[t].used, 0);
    }
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
}

/* A caller built against a shorter ag_dev_stats (its size covering only the
 * memory statistics) gets those filled, nothing past its size written, and
 * its size field kept. */
static void test_stats_shorter_struct(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = sim(ctx, 1 << 20, 0, 0);
    void *a = NULL;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 100, 0, &a), AG_OK);
    ag_dev_stats st;
    memset(&st, 0xA5, sizeof st);
    const size_t part = offsetof(ag_dev_stats, copies);
    st.size = part;
    ag_dev_stats_get(dev, &st);
    assert_int_equal(st.size, part);
    assert_int_equal(st.mem[AG_MEM_HBM].used, 100);
    assert_int_equal(st.mem[AG_MEM_HBM].nalloc, 1);
    assert_int_equal(st.mem[AG_MEM_HBM].capacity, 1 << 20);
    const unsigned char *past = (const unsigned char *)&st + part;
    for (size_t k = 0; k < sizeof st - part; k++)
        assert_int_equal(past[k], 0xA5);
    ag_dev_mem_free(dev, a);
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
}

/* ag_dev_poison with a NULL reason poisons with a stated default reason,
 * which later refusals carry. */
static void test_poison_default_reason(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = sim(ctx, 1 << 20, 0, 0);
    ag_dev_poison(dev, NULL);
    const char *why = NULL;
    assert_int_equal(ag_dev_device_state(dev, &why), AG_DEV_POISONED);
    assert_string_equal(why, "poisoned by the caller");
    ag_dev_stream *s = NULL;
    assert_int_equal(ag_dev_stream_create(dev, &s), AG_EDEVICE);
    assert_errmsg(ctx, "stream_create: the device is poisoned: poisoned by the caller");
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
}

/* A table of the current size must set stream_query as well as launch_copy:
 * one that leaves only stream_query NULL is refused at creation. */
static void test_table_needs_stream_query(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *inner = sim(ctx, 1 << 20, 0, 0), *dev = (ag_device *)1;
    /* every other entry of the current size set: only stream_query is missing */
    ag_device_ops ops = full_ops("nosq", NULL);
    assert_int_equal(ag_device_create(ctx, &ops, inner, &dev), AG_EINVAL);
    assert_null(dev);
    assert_errmsg(ctx, "device create: the backend's function table is incomplete");
    ag_device_destroy(inner);
    ag_ctx_destroy(ctx);
}

/* A replay enqueues a captured wait as if stream_wait_event were called
 * again: it counts as a wait, and the replayed kernel behind it sees what
 * the awaited stream wrote after a kernel that was still running at the
 * replay. */
static void test_replay_enqueues_captured_wait(void **state)
{
    (void)state;
    devfix f;
    devfix_open(&f, agtest_ctx(), 2, 1);
    ag_device *dev = f.dev;
    ag_dev_stream *s1 = f.h.s[0], *s2 = f.h.s[1];
    ag_dev_event *e = f.h.e[0];
    int x = 0, y = -1;
    pair p = {&y, &x};
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_begin(dev, s2), AG_OK);
    assert_int_equal(ag_dev_stream_wait_event(dev, s2, e), AG_OK);
    assert_int_equal(ag_dev_launch(dev, s2, copy_int_kernel, &p, "copy"), AG_OK);
    assert_int_equal(ag_dev_capture_end(dev, s2, &g), AG_OK);
    assert_int_equal(stats(dev).waits, 0); /* captured, not enqueued */
    gate held;
    gate_init(&held);
    assert_int_equal(ag_dev_launch(dev, s1, gate_kernel, &held, "held"), AG_OK);
    assert_int_equal(ag_dev_launch(dev, s1, incr_kernel, &x, "incr"), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e, s1), AG_OK);
    ag_status st = ag_dev_graph_launch(dev, g, s2);
    uint64_t waits = stats(dev).waits;
    gate_open(&held);
    assert_int_equal(ag_dev_synchronize(dev), AG_OK);
    assert_int_equal(st, AG_OK);
    assert_int_equal(waits, 1);
    assert_int_equal(y, 1);
    ag_dev_graph_destroy(dev, g);
    devfix_close(&f);
    gate_fini(&held);
}

/* fail_at 0 means never, with repeat as without: every counted call goes
 * through and is counted, none fails. */
static void test_fault_never_with_repeat(void **state)
{
    (void)state;
    wrapfix w;
    wrapfix_open(&w, NULL, AG_DEV_ENTRY_ALL, 0, 1, AG_FAULT_RETURN, 64);
    assert_int_equal(ag_dev_memset_async(w.dev, w.a, 3, 64, w.s), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(w.dev, w.s), AG_OK);
    assert_int_equal(w.f.calls, 4); /* stream_create, mem_alloc, memset, stream_synchronize */
    assert_int_equal(w.f.nfail, 0);
    assert_int_equal(stats(w.inner).memsets, 1);
    assert_int_equal(ag_dev_device_state(w.inner, NULL), AG_DEV_HEALTHY);
    wrapfix_close(&w);
}

/* The valid call behind a deferred fault whose kernel already poisoned the
 * device returns AG_OK and leaves no error on the context: the refusal it
 * met was the fault's, which the next synchronisation reports. */
static void test_deferred_fault_clears_refusal(void **state)
{
    (void)state;
    const ag_device_ops mid = syncfirst_ops();
    wrapfix w;
    wrapfix_open(&w, &mid, AG_DEV_ENTRY_BIT(AG_DEV_E_MEMCPY), 1, 0, AG_FAULT_DEFERRED, 64);
    ag_ctx *ctx = w.ctx;
    char host[64] = {0};
    assert_int_equal(ag_dev_memcpy_async(w.dev, AG_COPY_H2D, w.a, host, 64, w.s), AG_OK);
    assert_int_equal(ag_dev_device_state(w.inner, NULL), AG_DEV_POISONED); /* the kernel ran first */
    assert_int_equal(ag_ctx_last_status(ctx), AG_OK);
    assert_string_equal(ag_ctx_errmsg(ctx), "");
    assert_int_equal(ag_dev_stream_synchronize(w.dev, w.s), AG_EDEVICE);
    assert_errmsg(ctx, "injected fault in memcpy_async");
    wrapfix_close(&w);
}

/* Through a fault wrapper with no fault planned (or one planned for other
 * calls), a poisoned inner device's refusal of stream work reaches the
 * caller as it is: only the call behind a deferred fault of its own turns
 * AG_EDEVICE into success. */
static void test_fault_wrapper_passes_refusal(void **state)
{
    (void)state;
    for (int planned = 0; planned < 2; planned++) {
        /* planned: a deferred fault for memcpy, which this test never calls */
        wrapfix w;
        wrapfix_open(&w, NULL, planned ? AG_DEV_ENTRY_BIT(AG_DEV_E_MEMCPY) : 0, planned ? 1 : 0, 0,
                     AG_FAULT_DEFERRED, 64);
        ag_ctx *ctx = w.ctx;
        ag_dev_event *e = NULL;
        assert_int_equal(ag_dev_event_create(w.dev, &e), AG_OK);
        ag_dev_poison(w.inner, "a test fault");
        assert_int_equal(ag_dev_memset_async(w.dev, w.a, 0, 64, w.s), AG_EDEVICE);
        assert_errmsg(ctx, "a test fault");
        ag_ctx_clear_error(ctx);
        assert_int_equal(ag_dev_event_record(w.dev, e, w.s), AG_EDEVICE);
        assert_errmsg(ctx, "a test fault");
        assert_int_equal(w.f.nfail, 0);
        ag_dev_event_destroy(w.dev, e);
        wrapfix_close(&w);
    }
}

/* ---- argument checks, refused creates, backend tables, fault forwarding ---- */

/* Every entry checks its handles, out-pointers and copy kind (AG_COPY_COUNT_
 * is out of range): AG_EINVAL naming the entry, with nothing enqueued,
 * recorded or begun. */
static void test_null_arguments(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    devfix f;
    devfix_open(&f, ctx, 1, 1);
    ag_device *dev = f.dev;
    ag_dev_stream *s = f.h.s[0];
    ag_dev_event *e = f.h.e[0];
    void *a = NULL;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 0, &a), AG_OK);
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_begin(dev, s), AG_OK);
    assert_int_equal(ag_dev_capture_end(dev, s, &g), AG_OK); /* an empty graph */
    int x = 0;
    bool flag = true;
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_COUNT_, a, a, 8, s), AG_EINVAL);
    assert_errmsg(ctx, "memcpy_async: copy kind out of range");
    assert_int_equal(ag_dev_memset_async(dev, a, 0, 8, NULL), AG_EINVAL);
    assert_errmsg(ctx, "memset_async: stream is NULL");
    assert_int_equal(ag_dev_memset_async(dev, NULL, 0, 8, s), AG_EINVAL);
    assert_errmsg(ctx, "memset_async: destination is NULL");
    assert_int_equal(ag_dev_launch(dev, NULL, incr_kernel, &x, "incr"), AG_EINVAL);
    assert_errmsg(ctx, "launch: stream is NULL");
    assert_int_equal(ag_dev_stream_create(dev, NULL), AG_EINVAL);
    assert_errmsg(ctx, "stream_create: out is NULL");
    assert_int_equal(ag_dev_stream_synchronize(dev, NULL), AG_EINVAL);
    assert_errmsg(ctx, "stream_synchronize: stream is NULL");
    assert_int_equal(ag_dev_event_create(dev, NULL), AG_EINVAL);
    assert_errmsg(ctx, "event_create: out is NULL");
    assert_int_equal(ag_dev_event_record(dev, NULL, s), AG_EINVAL);
    assert_errmsg(ctx, "event_record: event or stream is NULL");
    assert_int_equal(ag_dev_event_record(dev, e, NULL), AG_EINVAL);
    assert_int_equal(ag_dev_stream_wait_event(dev, s, NULL), AG_EINVAL);
    assert_errmsg(ctx, "stream_wait_event: event or stream is NULL");
    assert_int_equal(ag_dev_stream_wait_event(dev, NULL, e), AG_EINVAL);
    assert_int_equal(ag_dev_event_record_eager(dev, NULL, s, &flag), AG_EINVAL);
    assert_errmsg(ctx, "event_record_eager: event, stream or out is NULL");
    assert_int_equal(ag_dev_event_record_eager(dev, e, NULL, &flag), AG_EINVAL);
    assert_int_equal(ag_dev_stream_wait_event_eager(dev, NULL, e, &flag), AG_EINVAL);
    assert_errmsg(ctx, "stream_wait_event_eager: event, stream or out is NULL");
    assert_int_equal(ag_dev_stream_wait_event_eager(dev, s, NULL, &flag), AG_EINVAL);
    assert_true(flag); /* untouched */
    assert_int_equal(ag_dev_event_query(dev, NULL, &flag), AG_EINVAL);
    assert_errmsg(ctx, "event_query: event or out is NULL");
    assert_int_equal(ag_dev_event_query(dev, e, NULL), AG_EINVAL);
    assert_int_equal(ag_dev_event_synchronize(dev, NULL), AG_EINVAL);
    assert_errmsg(ctx, "event_synchronize: event is NULL");
    assert_int_equal(ag_dev_capture_begin(dev, NULL), AG_EINVAL);
    assert_errmsg(ctx, "capture_begin: stream is NULL");
    assert_int_equal(ag_dev_capture_end(dev, s, NULL), AG_EINVAL);
    assert_errmsg(ctx, "capture_end: stream or out is NULL");
    assert_int_equal(ag_dev_graph_launch(dev, NULL, s), AG_EINVAL);
    assert_errmsg(ctx, "graph_launch: graph or stream is NULL");
    assert_int_equal(ag_dev_graph_launch(dev, g, NULL), AG_EINVAL);
    assert_int_equal(ag_dev_stream_capturing(dev, NULL, &flag), AG_EINVAL);
    assert_errmsg(ctx, "stream_capturing: stream or out is NULL");
    assert_int_equal(ag_dev_stream_capturing(dev, s, &flag), AG_OK);
    assert_false(flag);
    ag_dev_stats st = stats(dev);
    assert_int_equal(st.copies[AG_COPY_D2D] + st.memsets + st.launches, 0);
    assert_int_equal(st.records + st.waits + st.graph_launches, 0);
    assert_int_equal(st.live_streams, 1);
    assert_int_equal(st.live_events, 1);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);
    assert_int_equal(x, 0);
    assert_int_equal(ag_dev_device_state(dev, NULL), AG_DEV_HEALTHY);

    /* The constructors check theirs too. */
    ag_device *w = (ag_device *)1;
    ag_dev_fault plan;
    ag_dev_fault_init(&plan, AG_DEV_ENTRY_ALL, 1, 0, AG_FAULT_RETURN);
    assert_int_equal(ag_device_fault_wrap(ctx, dev, NULL, &w), AG_EINVAL);
    assert_null(w);
    assert_errmsg(ctx, "fault_wrap: inner device or fault plan is NULL");
    assert_int_equal(ag_device_fault_wrap(ctx, dev, &plan, NULL), AG_EINVAL);
    assert_int_equal(ag_device_sim_create(ctx, NULL, NULL), AG_EINVAL);
    assert_int_equal(ag_device_create(ctx, NULL, NULL, &w), AG_EINVAL);
    assert_errmsg(ctx, "incomplete");
    assert_int_equal(plan.calls, 0);
    assert_ptr_equal(ag_device_ctx(dev), ctx);
    assert_null(ag_device_ctx(NULL));
    assert_string_equal(ag_device_backend(NULL), "");
    ag_dev_graph_destroy(dev, g);
    ag_dev_mem_free(dev, a);
    devfix_close(&f);
}

/* A create refused by a poisoned device leaves its out-pointer NULL, as a
 * refused allocation does, and makes nothing. */
static void test_refused_create_clears_out(void **state)
{
    (void)state;
    ag_testalloc ta;
    ag_ctx *ctx = agtest_ctx_counted(&ta);
    ag_device *dev = sim(ctx, 1 << 20, 0, 0);
    ag_dev_poison(dev, "a test fault");
    uint64_t live = ta.live_blocks;
    ag_dev_stream *s = (ag_dev_stream *)1;
    ag_dev_event *e = (ag_dev_event *)1;
    assert_int_equal(ag_dev_stream_create(dev, &s), AG_EDEVICE);
    assert_errmsg(ctx, "stream_create: the device is poisoned: a test fault");
    assert_null(s);
    assert_int_equal(ag_dev_event_create(dev, &e), AG_EDEVICE);
    assert_errmsg(ctx, "event_create: the device is poisoned: a test fault");
    assert_null(e);
    assert_int_equal(ta.live_blocks, live);
    ag_dev_stats st = stats(dev);
    assert_int_equal(st.live_streams + st.live_events, 0);
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
}

/* A poisoned device refuses the capture entries and the event query as it
 * refuses every other entry: no capture begins, none ends into a graph
 * (the stream's destroy abandons it), and the message carries the reason. */
static void test_poisoned_capture_and_query(void **state)
{
    (void)state;
    ag_testalloc ta;
    ag_ctx *ctx = agtest_ctx_counted(&ta);
    devfix f;
    devfix_open(&f, ctx, 2, 1);
    ag_device *dev = f.dev;
    ag_dev_stream *s0 = f.h.s[0], *s1 = f.h.s[1];
    ag_dev_event *e = f.h.e[0];
    assert_int_equal(ag_dev_event_record(dev, e, s0), AG_OK);
    assert_int_equal(ag_dev_capture_begin(dev, s1), AG_OK);
    ag_dev_poison(dev, "a test fault");
    bool done = false;
    assert_int_equal(ag_dev_event_query(dev, e, &done), AG_EDEVICE);
    assert_errmsg(ctx, "event_query: the device is poisoned: a test fault");
    assert_int_equal(ag_dev_capture_begin(dev, s0), AG_EDEVICE);
    assert_errmsg(ctx, "capture_begin: the device is poisoned: a test fault");
    ag_dev_graph *g = (ag_dev_graph *)1;
    assert_int_equal(ag_dev_capture_end(dev, s1, &g), AG_EDEVICE);
    assert_errmsg(ctx, "capture_end: the device is poisoned: a test fault");
    assert_null(g);
    assert_int_equal(stats(dev).live_graphs, 0);
    assert_int_equal(ag_dev_stream_wait_event(dev, s0, e), AG_EDEVICE);
    assert_errmsg(ctx, "stream_wait_event: the device is poisoned: a test fault");
    int x = 0;
    assert_int_equal(ag_dev_launch(dev, s0, incr_kernel, &x, "incr"), AG_EDEVICE);
    assert_errmsg(ctx, "launch: the device is poisoned: a test fault");
    /* s0 never captured: its synchronise is refused for the poison only */
    assert_int_equal(ag_dev_stream_synchronize(dev, s0), AG_EDEVICE);
    assert_errmsg(ctx, "stream_synchronize: the device is poisoned");
    assert_int_equal(x, 0);
    devfix_close(&f);
    assert_int_equal(ta.live_blocks, 0);
}

/* event_synchronize is a waiting entry: called from a kernel it is refused
 * (AG_EINVAL), even for an event that would not make it wait. */
typedef struct evsync_arg {
    ag_device *dev;
    ag_dev_event *e;
    ag_status st;
} evsync_arg;

static ag_status evsync_kernel(void *arg)
{
    evsync_arg *a = arg;
    a->st = ag_dev_event_synchronize(a->dev, a->e);
    return AG_OK;
}

static void test_event_synchronize_from_kernel(void **state)
{
    (void)state;
    devfix f;
    devfix_open(&f, agtest_ctx(), 1, 1);
    evsync_arg a = {f.dev, f.h.e[0], AG_OK}; /* never recorded: complete */
    assert_int_equal(ag_dev_launch(f.dev, f.h.s[0], evsync_kernel, &a, "evsync"), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(f.dev, f.h.s[0]), AG_OK);
    assert_int_equal(a.st, AG_EINVAL);
    assert_int_equal(ag_dev_device_state(f.dev, NULL), AG_DEV_HEALTHY);
    devfix_close(&f);
}

/* A kernel launched without a name is called "kernel" in the message of
 * the fault it causes (launch and launch_copy alike). */
static void test_kernel_default_name(void **state)
{
    (void)state;
    for (int copy = 0; copy < 2; copy++) {
        ag_ctx *ctx = agtest_ctx();
        devfix f;
        devfix_open(&f, ctx, 1, 0);
        int x = 0;
        ag_status st = copy ? ag_dev_launch_copy(f.dev, f.h.s[0], fail_kernel, &x, sizeof x, NULL)
                            : ag_dev_launch(f.dev, f.h.s[0], fail_kernel, NULL, NULL);
        assert_int_equal(st, AG_OK);
        assert_int_equal(ag_dev_stream_synchronize(f.dev, f.h.s[0]), AG_EDEVICE);
        const char *why = NULL;
        assert_int_equal(ag_dev_device_state(f.dev, &why), AG_DEV_POISONED);
        assert_non_null(strstr(why, "kernel 'kernel' failed: invalid argument"));
        devfix_close(&f);
    }
}

/* Clears entry k of a table (0: the name; the order of ag_device_ops);
 * false past the last. */
static bool ops_drop(ag_device_ops *o, int k)
{
    switch (k) {
    case 0: o->name = NULL; break;
    case 1: o->destroy = NULL; break;
    case 2: o->mem_alloc = NULL; break;
    case 3: o->mem_free = NULL; break;
    case 4: o->memcpy_async = NULL; break;
    case 5: o->memset_async = NULL; break;
    case 6: o->launch = NULL; break;
    case 7: o->stream_create = NULL; break;
    case 8: o->stream_destroy = NULL; break;
    case 9: o->stream_synchronize = NULL; break;
    case 10: o->event_create = NULL; break;
    case 11: o->event_destroy = NULL; break;
    case 12: o->event_record = NULL; break;
    case 13: o->stream_wait_event = NULL; break;
    case 14: o->event_query = NULL; break;
    case 15: o->event_synchronize = NULL; break;
    case 16: o->capture_begin = NULL; break;
    case 17: o->capture_end = NULL; break;
    case 18: o->graph_launch = NULL; break;
    case 19: o->graph_destroy = NULL; break;
    case 20: o->synchronize = NULL; break;
    case 21: o->state = NULL; break;
    case 22: o->poison = NULL; break;
    case 23: o->stats = NULL; break;
    case 24: o->launch_copy = NULL; break;
    case 25: o->stream_query = NULL; break;
    case 26: o->stream_capturing = NULL; break;
    case 27: o->event_record_eager = NULL; break;
    case 28: o->stream_wait_event_eager = NULL; break;
    default: return false;
    }
    return true;
}

/* A table of the current size lacking any one entry, or its name, is
 * refused at creation; the complete one is taken. */
static void test_table_each_entry_required(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *inner = sim(ctx, 1 << 20, 0, 0), *dev = NULL;
    int k = 0;
    for (;; k++) {
        ag_device_ops ops = full_ops("each", lg_stream_query);
        if (!ops_drop(&ops, k))
            break;
        dev = (ag_device *)1;
        if (ag_device_create(ctx, &ops, inner, &dev) != AG_EINVAL)
            fail_msg("a table without entry %d was taken", k);
        assert_null(dev);
        assert_errmsg(ctx, "the backend's function table is incomplete");
    }
    assert_int_equal(k, 29);
    const ag_device_ops ops = full_ops("each", lg_stream_query);
    assert_int_equal(ag_device_create(ctx, &ops, inner, &dev), AG_OK);
    assert_string_equal(ag_device_backend(dev), "each");
    ag_device_destroy(dev);
    ag_device_destroy(inner);
    ag_ctx_destroy(ctx);
}

/* The wrapper forwards what it never fails: statistics, state and poison
 * reach the inner device, through the wrapper as directly. */
static void test_fault_wrapper_forwards(void **state)
{
    (void)state;
    wrapfix w;
    wrapfix_open(&w, NULL, AG_DEV_ENTRY_ALL, 0, 0, AG_FAULT_RETURN, 64);
    ag_dev_stats st = stats(w.dev);
    assert_int_equal(st.mem[AG_MEM_HBM].used, 64);
    assert_int_equal(st.mem[AG_MEM_HBM].capacity, 1 << 20);
    assert_int_equal(st.live_streams, 1);
    assert_int_equal(ag_dev_memset_async(w.dev, w.a, 5, 64, w.s), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(w.dev, w.s), AG_OK);
    assert_int_equal(stats(w.dev).memsets, 1);
    const char *why = NULL;
    assert_int_equal(ag_dev_device_state(w.dev, &why), AG_DEV_HEALTHY);
    assert_string_equal(why, "");
    ag_dev_poison(w.dev, "poisoned through the wrapper");
    assert_int_equal(ag_dev_device_state(w.inner, &why), AG_DEV_POISONED);
    assert_string_equal(why, "poisoned through the wrapper");
    why = NULL;
    assert_int_equal(ag_dev_device_state(w.dev, &why), AG_DEV_POISONED);
    assert_string_equal(why, "poisoned through the wrapper");
    assert_int_equal(w.f.nfail, 0);
    ag_dev_mem_free(w.dev, w.a); /* freed through the wrapper */
    w.a = NULL;
    assert_int_equal(stats(w.inner).mem[AG_MEM_HBM].used, 0);
    wrapfix_close(&w);
}

/* A hook placing every block of 64 KiB or more 256 bytes past a 64 KiB
 * boundary (smaller ones come from the C library): a device allocation
 * aligned to 64 KiB then has 65280 bytes of slack before it, for sure. */
#define SKEW_BIG 65536u
#define SKEW 256u

static void *skew_realloc(void *ud, void *p, size_t old, size_t n)
{
    if (n == 0) {
        if (p)
            free(old >= SKEW_BIG ? (char *)p - SKEW : p);
        return NULL;
    }
    if (!p) {
        if (n < SKEW_BIG)
            return malloc(n);
        void *raw = NULL;
        return posix_memalign(&raw, SKEW_BIG, n + SKEW) == 0 ? (char *)raw + SKEW : NULL;
    }
    if (old < SKEW_BIG && n < SKEW_BIG)
        return realloc(p, n);
    void *q = skew_realloc(ud, NULL, 0, n);
    if (q) {
        memcpy(q, p, old < n ? old : n);
        skew_realloc(ud, p, old, 0);
    }
    return q;
}

/* The host side of a copy never lies in a device allocation's slack before
 * it (even touching no allocation's bytes), nor starts before a HOST
 * allocation it runs into; nothing is enqueued. */
static void test_copy_host_side_slack(void **state)
{
    (void)state;
    const ag_allocator hook = {sizeof hook, skew_realloc, NULL};
    ag_ctx *ctx = ag_ctx_create(&hook);
    assert_non_null(ctx);
    devfix f;
    devfix_open_on(&f, ctx, sim(ctx, 1 << 20, 0, 1 << 20), 1, 0);
    ag_device *dev = f.dev;
    ag_dev_stream *s = f.h.s[0];
    char *a = NULL, *h = NULL;
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 65536, (void **)&a), AG_OK);
    assert_int_equal((uintptr_t)a % 65536, 0);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, a - 64, a, 32, s), AG_EINVAL);
    assert_errmsg(ctx, "destination is device memory (use a d2d copy)");
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_H2D, a, a - 64, 32, s), AG_EINVAL);
    assert_errmsg(ctx, "source is device memory (use a d2d copy)");
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HOST, 4096, 0, (void **)&h), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_H2D, a, h - 8, 16, s), AG_EINVAL);
    assert_errmsg(ctx, "source meets a HOST allocation but is not inside it");
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, h - 8, a, 16, s), AG_EINVAL);
    assert_errmsg(ctx, "destination meets a HOST allocation but is not inside it");
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);
    ag_dev_stats st = stats(dev);
    assert_int_equal(st.copies[AG_COPY_D2H] + st.copies[AG_COPY_H2D], 0);
    assert_int_equal(ag_dev_device_state(dev, NULL), AG_DEV_HEALTHY);
    ag_dev_mem_free(dev, h);
    ag_dev_mem_free(dev, a);
    devfix_close(&f);
}

/* A p2p copy needs P2P memory on one side, either one: from P2P memory
 * into HBM as well as the other way. */
static void test_p2p_either_side(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    devfix f;
    devfix_open_on(&f, ctx, sim(ctx, 1 << 20, 1 << 20, 0), 1, 0);
    ag_device *dev = f.dev;
    ag_dev_stream *s = f.h.s[0];
    void *hbm = NULL, *p2p = NULL;
    unsigned char out[64];
    memset(out, 0, sizeof out);
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 0, &hbm), AG_OK);
    assert_int_equal(ag_dev_mem_alloc(dev, AG_MEM_P2P, 64, 0, &p2p), AG_OK);
    assert_int_equal(ag_dev_memset_async(dev, p2p, 9, 64, s), AG_OK);
    if (ag_dev_memcpy_async(dev, AG_COPY_P2P, hbm, p2p, 64, s) != AG_OK)
        fail_msg("%s", ag_ctx_errmsg(ctx));
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_D2H, out, hbm, 64, s), AG_OK);
    assert_int_equal(ag_dev_memcpy_async(dev, AG_COPY_P2P, p2p, hbm, 64, s), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);
    for (int k = 0; k < 64; k++)
        assert_int_equal(out[k], 9);
    assert_int_equal(stats(dev).copies[AG_COPY_P2P], 2);
    ag_dev_mem_free(dev, hbm);
    ag_dev_mem_free(dev, p2p);
    devfix_close(&f);
}

/* launch_copy frees the argument blocks of kernels that have run (their
 * worker only retires them): a host that never synchronises, and only asks
 * whether the stream is idle, holds the block of its last call alone.  A
 * graph's destroy frees the retired blocks too. */
static void test_launch_copy_reclaims(void **state)
{
    (void)state;
    ag_testalloc ta;
    devfix f;
    devfix_open(&f, agtest_ctx_counted(&ta), 1, 0);
    ag_device *dev = f.dev;
    ag_dev_stream *s = f.h.s[0];
    int counter = 0;
    add_args aa = {&counter, 1};
    uint64_t base = ta.live_blocks;
    for (int k = 0; k < 5; k++) {
        assert_int_equal(ag_dev_launch_copy(dev, s, add_kernel, &aa, sizeof aa, "add"), AG_OK);
        bool idle = false;
        while (!idle)
            assert_int_equal(ag_dev_stream_query(dev, s, &idle), AG_OK);
        assert_int_equal(ta.live_blocks, base + 1);
    }
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_begin(dev, s), AG_OK);
    assert_int_equal(ag_dev_capture_end(dev, s, &g), AG_OK); /* an empty graph */
    ag_dev_graph_destroy(dev, g);
    assert_int_equal(ta.live_blocks, base);
    assert_int_equal(ag_dev_launch_copy(dev, s, add_kernel, &aa, sizeof aa, "add"), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s), AG_OK);
    assert_int_equal(ta.live_blocks, base);
    assert_int_equal(counter, 6);
    devfix_close(&f);
    assert_int_equal(ta.live_blocks, 0);
}

/* A backend whose eager record and wait let the stream's queued work run
 * first, as sync_first_memcpy does for copies. */
static ag_status sync_first_record_eager(void *impl, ag_dev_event *e, ag_dev_stream *s, bool *recorded)
{
    (void)ag_dev_stream_synchronize(legacy_inner(impl), s);
    return ag_dev_event_record_eager(legacy_inner(impl), e, s, recorded);
}

static ag_status sync_first_wait_eager(void *impl, ag_dev_stream *s, ag_dev_event *e, bool *enqueued)
{
    (void)ag_dev_stream_synchronize(legacy_inner(impl), s);
    return ag_dev_stream_wait_event_eager(legacy_inner(impl), s, e, enqueued);
}

/* The eager record and wait behind a deferred fault whose kernel already
 * poisoned the device: like the plain forms they succeed, the fault
 * surfacing at the next synchronisation, and say they were made (the
 * stream does not capture). */
static void test_deferred_fault_eager_forms(void **state)
{
    (void)state;
    for (int wait = 0; wait < 2; wait++) {
        ag_device_ops mid = full_ops("syncfirst", lg_stream_query);
        mid.event_record_eager = sync_first_record_eager;
        mid.stream_wait_event_eager = sync_first_wait_eager;
        wrapfix w;
        wrapfix_open(&w, &mid, AG_DEV_ENTRY_BIT(wait ? AG_DEV_E_STREAM_WAIT : AG_DEV_E_EVENT_RECORD), 1, 0,
                     AG_FAULT_DEFERRED, 64);
        ag_dev_event *e = NULL;
        assert_int_equal(ag_dev_event_create(w.dev, &e), AG_OK);
        bool made = false;
        ag_status st = wait ? ag_dev_stream_wait_event_eager(w.dev, w.s, e, &made)
                            : ag_dev_event_record_eager(w.dev, e, w.s, &made);
        assert_int_equal(st, AG_OK);
        assert_true(made);
        assert_int_equal(w.f.nfail, 1);
        assert_int_equal(ag_dev_device_state(w.inner, NULL), AG_DEV_POISONED); /* the kernel ran first */
        assert_int_equal(ag_dev_stream_synchronize(w.dev, w.s), AG_EDEVICE);
        assert_errmsg(w.ctx, wait ? "injected fault in stream_wait_event" : "injected fault in event_record");
        ag_dev_event_destroy(w.dev, e);
        wrapfix_close(&w);
    }
}

/* A wait on an event of another stream whose point has completed needs no
 * ordering: like a wait on the stream's own event, it queues nothing, so
 * it takes no host memory on a full queue, and counts as a wait. */
static void test_wait_on_complete_event_queues_nothing(void **state)
{
    (void)state;
    ag_testalloc ta;
    devfix f;
    devfix_open(&f, agtest_ctx_counted(&ta), 2, 1);
    ag_device *dev = f.dev;
    ag_dev_stream *s0 = f.h.s[0], *s1 = f.h.s[1];
    ag_dev_event *e = f.h.e[0];
    int other = 0, count = 0;
    assert_int_equal(ag_dev_launch(dev, s1, incr_kernel, &other, "incr"), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e, s1), AG_OK);
    assert_int_equal(ag_dev_event_synchronize(dev, e), AG_OK); /* complete */
    gate g;
    gate_init(&g);
    assert_int_equal(ag_dev_launch(dev, s0, gate_kernel, &g, "gate"), AG_OK);
    gate_wait_entered(&g); /* the gate left the queue: it is empty */
    for (int k = 0; k < 16; k++) /* 16 of 16 */
        assert_int_equal(ag_dev_launch(dev, s0, incr_kernel, &count, "incr"), AG_OK);
    uint64_t waits = stats(dev).waits;
    ta.fail_at = ta.calls + 1u; /* the next host allocation fails */
    ag_status waited = ag_dev_stream_wait_event(dev, s0, e);
    uint64_t nfail = ta.nfail;
    ta.fail_at = 0;
    gate_open(&g);
    assert_int_equal(ag_dev_stream_synchronize(dev, s0), AG_OK);
    assert_int_equal(waited, AG_OK);
    assert_int_equal(nfail, 0);
    assert_int_equal(stats(dev).waits, waits + 1);
    assert_int_equal(count, 16);
    assert_int_equal(other, 1);
    devfix_close(&f);
    gate_fini(&g);
    assert_int_equal(ta.live_blocks, 0);
}

/* A queued wait on a stream destroyed before the wait runs is met (the
 * destroy drained that stream): the waiting stream goes on. */
static void test_wait_on_destroyed_stream(void **state)
{
    (void)state;
    devfix f;
    devfix_open(&f, agtest_ctx(), 2, 1);
    ag_device *dev = f.dev;
    ag_dev_stream *s0 = f.h.s[0], *s1 = f.h.s[1];
    ag_dev_event *e = f.h.e[0];
    gate g0, g1;
    gate_init(&g0);
    gate_init(&g1);
    int x = 0, y = -1;
    pair p = {&y, &x};
    assert_int_equal(ag_dev_launch(dev, s1, gate_kernel, &g1, "held"), AG_OK);
    assert_int_equal(ag_dev_launch(dev, s1, incr_kernel, &x, "incr"), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e, s1), AG_OK);
    assert_int_equal(ag_dev_launch(dev, s0, gate_kernel, &g0, "held"), AG_OK);
    assert_int_equal(ag_dev_stream_wait_event(dev, s0, e), AG_OK); /* queued: e not complete */
    assert_int_equal(ag_dev_launch(dev, s0, copy_int_kernel, &p, "copy"), AG_OK);
    gate_open(&g1);
    handles_drop_stream(&f.h, 1); /* drains s1, then it is gone */
    gate_open(&g0);
    assert_int_equal(ag_dev_stream_synchronize(dev, s0), AG_OK);
    assert_int_equal(y, 1);
    assert_int_equal(stats(dev).waits, 1);
    assert_int_equal(ag_dev_device_state(dev, NULL), AG_DEV_HEALTHY);
    devfix_close(&f);
    gate_fini(&g0);
    gate_fini(&g1);
}

/* A graph launched into a capture is all or nothing there too: when the
 * host cannot make room for its operations, the launch is AG_ENOMEM and
 * the capture holds none of them; a retry captures the graph once. */
static void test_graph_into_capture_oom(void **state)
{
    (void)state;
    ag_testalloc ta;
    devfix f;
    devfix_open(&f, agtest_ctx_counted(&ta), 2, 0);
    ag_device *dev = f.dev;
    ag_dev_stream *s1 = f.h.s[0], *s2 = f.h.s[1];
    int count = 0;
    ag_dev_graph *g = NULL, *g2 = NULL;
    assert_int_equal(ag_dev_capture_begin(dev, s1), AG_OK);
    for (int k = 0; k < 3; k++)
        assert_int_equal(ag_dev_launch(dev, s1, incr_kernel, &count, "incr"), AG_OK);
    assert_int_equal(ag_dev_capture_end(dev, s1, &g), AG_OK);
    assert_int_equal(ag_dev_capture_begin(dev, s2), AG_OK);
    ta.fail_at = ta.calls + 1u; /* the next host allocation fails */
    ag_status st = ag_dev_graph_launch(dev, g, s2);
    ta.fail_at = 0;
    assert_int_equal(st, AG_ENOMEM);
    assert_int_equal(ta.nfail, 1);
    assert_int_equal(ag_dev_graph_launch(dev, g, s2), AG_OK);
    assert_int_equal(ag_dev_capture_end(dev, s2, &g2), AG_OK);
    assert_int_equal(ag_dev_graph_launch(dev, g2, s1), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(dev, s1), AG_OK);
    assert_int_equal(count, 3);
    ag_dev_graph_destroy(dev, g);
    ag_dev_graph_destroy(dev, g2);
    devfix_close(&f);
    assert_int_equal(ta.live_blocks, 0);
}

/* Destroying the device frees whatever the caller left behind: streams
 * with queued copies of arguments, a capture in progress, events (one kept
 * by a graph too), graphs and memory of each type. */
static void test_destroy_frees_leftovers(void **state)
{
    (void)state;
    ag_testalloc ta;
    ag_ctx *ctx = agtest_ctx_counted(&ta);
    ag_device *dev = sim(ctx, 1 << 20, 1 << 20, 1 << 20);
    ag_dev_stream *s1 = NULL, *s2 = NULL;
    ag_dev_event *e1 = NULL, *e2 = NULL;
    ag_dev_graph *g = NULL;
    void *m[AG_MEM_COUNT_];
    assert_int_equal(ag_dev_stream_create(dev, &s1), AG_OK);
    assert_int_equal(ag_dev_stream_create(dev, &s2), AG_OK);
    assert_int_equal(ag_dev_event_create(dev, &e1), AG_OK);
    assert_int_equal(ag_dev_event_create(dev, &e2), AG_OK);
    for (int t = 0; t < AG_MEM_COUNT_; t++)
        assert_int_equal(ag_dev_mem_alloc(dev, (ag_mem_type)t, 64, 0, &m[t]), AG_OK);
    int counter = 0;
    add_args aa = {&counter, 1};
    assert_int_equal(ag_dev_capture_begin(dev, s1), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e1, s1), AG_OK);
    assert_int_equal(ag_dev_launch_copy(dev, s1, add_kernel, &aa, sizeof aa, "add"), AG_OK);
    assert_int_equal(ag_dev_capture_end(dev, s1, &g), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e2, s2), AG_OK);
    assert_int_equal(ag_dev_launch_copy(dev, s2, add_kernel, &aa, sizeof aa, "add"), AG_OK);
    assert_int_equal(ag_dev_capture_begin(dev, s2), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, e1, s2), AG_OK);
    ag_device_destroy(dev);
    assert_int_equal(counter, 1); /* the queued kernel ran; the captured ones never */
    ag_ctx_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
}

/* A backend whose copies fail with a device error of their own, leaving
 * the device healthy. */
static ag_status refusing_memcpy(void *impl, ag_dev_copy_kind kind, void *dst, const void *src, size_t n,
                                 ag_dev_stream *s)
{
    (void)impl;
    (void)kind;
    (void)dst;
    (void)src;
    (void)n;
    (void)s;
    return AG_EDEVICE;
}

/* Behind a deferred fault whose kernel has not run yet (the stream is held
 * by a gate), a call's own AG_EDEVICE from a healthy device is its own
 * failure and is passed on; the fault still fires at its point. */
static void test_deferred_fault_keeps_own_error(void **state)
{
    (void)state;
    ag_device_ops mid = full_ops("refusing", lg_stream_query);
    mid.memcpy_async = refusing_memcpy;
    wrapfix w;
    wrapfix_open(&w, &mid, AG_DEV_ENTRY_BIT(AG_DEV_E_MEMCPY), 1, 0, AG_FAULT_DEFERRED, 64);
    gate g;
    gate_init(&g);
    assert_int_equal(ag_dev_launch(w.dev, w.s, gate_kernel, &g, "gate"), AG_OK);
    gate_wait_entered(&g);
    char host[64] = {0};
    ag_status st = ag_dev_memcpy_async(w.dev, AG_COPY_H2D, w.a, host, 64, w.s);
    ag_dev_state before = ag_dev_device_state(w.inner, NULL);
    gate_open(&g);
    assert_int_equal(w.f.nfail, 1);
    assert_int_equal(before, AG_DEV_HEALTHY);
    assert_int_equal(st, AG_EDEVICE);
    assert_int_equal(ag_dev_stream_synchronize(w.dev, w.s), AG_EDEVICE);
    assert_errmsg(w.ctx, "injected fault in memcpy_async");
    gate_fini(&g);
    wrapfix_close(&w);
}

/* A deferred fault in graph_launch is stream work like any other: the
 * launch succeeds, the fault fires when the stream reaches it and the
 * replay behind it is dropped. */
static void test_fault_deferred_graph_launch(void **state)
{
    (void)state;
    wrapfix w;
    wrapfix_open(&w, NULL, AG_DEV_ENTRY_BIT(AG_DEV_E_GRAPH_LAUNCH), 1, 0, AG_FAULT_DEFERRED, 64);
    int count = 0;
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_begin(w.dev, w.s), AG_OK);
    assert_int_equal(ag_dev_launch(w.dev, w.s, incr_kernel, &count, "incr"), AG_OK);
    assert_int_equal(ag_dev_capture_end(w.dev, w.s, &g), AG_OK);
    assert_int_equal(ag_dev_graph_launch(w.dev, g, w.s), AG_OK);
    assert_int_equal(w.f.nfail, 1);
    assert_int_equal(ag_dev_stream_synchronize(w.dev, w.s), AG_EDEVICE);
    assert_errmsg(w.ctx, "kernel 'injected fault in graph_launch' failed");
    assert_int_equal(count, 0);
    ag_dev_graph_destroy(w.dev, g);
    wrapfix_close(&w);
}

/* An injected failure returns what the real call would when it runs out:
 * AG_ENOMEM for the entries that take a resource (allocation, stream,
 * event, capture end), AG_EDEVICE for the others; the message names the
 * entry. */
static void test_fault_status_per_entry(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *inner = sim(ctx, 1 << 20, 0, 0);
    ag_dev_stream *s = NULL;
    assert_int_equal(ag_dev_stream_create(inner, &s), AG_OK);
    for (int k = 0; k < 5; k++) {
        const ag_dev_entry ents[5] = {AG_DEV_E_MEM_ALLOC, AG_DEV_E_STREAM_CREATE, AG_DEV_E_EVENT_CREATE,
                                      AG_DEV_E_CAPTURE_END, AG_DEV_E_SYNC};
        ag_dev_fault plan;
        ag_dev_fault_init(&plan, AG_DEV_ENTRY_BIT(ents[k]), 1, 0, AG_FAULT_RETURN);
        ag_device *dev = NULL;
        assert_int_equal(ag_device_fault_wrap(ctx, inner, &plan, &dev), AG_OK);
        void *p = NULL;
        ag_dev_stream *s2 = NULL;
        ag_dev_event *e = NULL;
        ag_dev_graph *g = NULL;
        ag_status st;
        if (k == 0) {
            st = ag_dev_mem_alloc(dev, AG_MEM_HBM, 64, 0, &p);
        } else if (k == 1) {
            st = ag_dev_stream_create(dev, &s2);
        } else if (k == 2) {
            st = ag_dev_event_create(dev, &e);
        } else if (k == 3) {
            assert_int_equal(ag_dev_capture_begin(dev, s), AG_OK);
            st = ag_dev_capture_end(dev, s, &g);
            assert_int_equal(ag_dev_capture_end(inner, s, &g), AG_OK); /* still capturing */
            ag_dev_graph_destroy(inner, g);
        } else {
            st = ag_dev_synchronize(dev);
        }
        assert_int_equal(st, k < 4 ? AG_ENOMEM : AG_EDEVICE);
        assert_true(agtest_errmsg_has(ctx, ag_dev_entry_name(ents[k])));
        assert_errmsg(ctx, "injected fault");
        assert_null(p);
        assert_null(s2);
        assert_null(e);
        assert_int_equal(plan.nfail, 1);
        ag_device_destroy(dev);
    }
    ag_dev_stats st = stats(inner);
    assert_int_equal(st.mem[AG_MEM_HBM].nalloc + st.live_events + st.live_graphs, 0);
    assert_int_equal(st.live_streams, 1);
    ag_dev_stream_destroy(inner, s);
    ag_device_destroy(inner);
    ag_ctx_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_order_and_copies),
        cmocka_unit_test(test_asynchronous),
        cmocka_unit_test(test_cross_stream_events),
        cmocka_unit_test(test_capture_replay),
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_copy_checks),
        cmocka_unit_test(test_poisoned),
        cmocka_unit_test(test_use_after_free_poisons),
        cmocka_unit_test(test_destroy_drains),
        cmocka_unit_test(test_oom_sweep),
        cmocka_unit_test(test_fault_sweep_per_entry),
        cmocka_unit_test(test_fault_sweep_all_entries),
        cmocka_unit_test(test_fault_deferred_message),
        cmocka_unit_test(test_fault_deferred_in_capture),
        cmocka_unit_test(test_backend_table_checked),
        cmocka_unit_test(test_launch_copy_eager),
        cmocka_unit_test(test_launch_copy_capture),
        cmocka_unit_test(test_launch_copy_oom),
        cmocka_unit_test(test_host_memory_direct),
        cmocka_unit_test(test_stream_query),
        cmocka_unit_test(test_legacy_table),
        cmocka_unit_test(test_record_nomem_after_release),
        cmocka_unit_test(test_check_sees_live_overlap),
        cmocka_unit_test(test_check_splits_freed_range),
        cmocka_unit_test(test_legacy_fallback_now),
        cmocka_unit_test(test_capture_between_query_and_record),
        cmocka_unit_test(test_capture_ends_before_question),
        cmocka_unit_test(test_capture_eager),
        cmocka_unit_test(test_fault_eager_entries),
        cmocka_unit_test(test_copy_host_side),
        cmocka_unit_test(test_deferred_fault_status),
        cmocka_unit_test(test_deferred_fault_refused_call),
        cmocka_unit_test(test_synchronize_earlier_work),
        cmocka_unit_test(test_synchronize_kernel_children),
        cmocka_unit_test(test_wait_refused_uncounted),
        cmocka_unit_test(test_graph_keeps_event_alive),
        cmocka_unit_test(test_fault_poison_mode_at_once),
        cmocka_unit_test(test_graph_launch_poisoned),
        cmocka_unit_test(test_copy_null_side),
        cmocka_unit_test(test_poison_ends_stream_wait),
        cmocka_unit_test(test_synchronize_poisoned_waits_running),
        cmocka_unit_test(test_queue_grows_on_demand),
        cmocka_unit_test(test_copy_into_freed_host_poisons),
        cmocka_unit_test(test_mem_alloc_bounds),
        cmocka_unit_test(test_stats_shorter_struct),
        cmocka_unit_test(test_poison_default_reason),
        cmocka_unit_test(test_table_needs_stream_query),
        cmocka_unit_test(test_replay_enqueues_captured_wait),
        cmocka_unit_test(test_fault_never_with_repeat),
        cmocka_unit_test(test_deferred_fault_clears_refusal),
        cmocka_unit_test(test_fault_wrapper_passes_refusal),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_refused_create_clears_out),
        cmocka_unit_test(test_poisoned_capture_and_query),
        cmocka_unit_test(test_event_synchronize_from_kernel),
        cmocka_unit_test(test_kernel_default_name),
        cmocka_unit_test(test_table_each_entry_required),
        cmocka_unit_test(test_fault_wrapper_forwards),
        cmocka_unit_test(test_copy_host_side_slack),
        cmocka_unit_test(test_p2p_either_side),
        cmocka_unit_test(test_launch_copy_reclaims),
        cmocka_unit_test(test_deferred_fault_eager_forms),
        cmocka_unit_test(test_wait_on_complete_event_queues_nothing),
        cmocka_unit_test(test_wait_on_destroyed_stream),
        cmocka_unit_test(test_graph_into_capture_oom),
        cmocka_unit_test(test_destroy_frees_leftovers),
        cmocka_unit_test(test_deferred_fault_keeps_own_error),
        cmocka_unit_test(test_fault_deferred_graph_launch),
        cmocka_unit_test(test_fault_status_per_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
