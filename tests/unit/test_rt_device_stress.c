/* Multi-stream stress of the simulated device, meant for ThreadSanitizer:
 * host threads drive streams concurrently; kernels on different streams hand
 * plain (non-atomic) data to each other ordered only by events, so a missing
 * happens-before edge in the device shows up as a reported race.  Copied
 * argument blocks are shared by replays running on several streams. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "support/agtest.h"
#include "aliasguard/device.h"

enum { THREADS = 3, ROUNDS = 300, WORDS = 64 };

/* Stream A writes v into every word of buf; stream B, after waiting on A's
 * event, checks and adds one. Both touch buf with plain loads and stores. */
typedef struct stage {
    int *buf;
    int value;
    int *errors;
} stage;

static ag_status fill_kernel(void *arg)
{
    stage *s = arg;
    for (int k = 0; k < WORDS; k++)
        s->buf[k] = s->value;
    return AG_OK;
}

static ag_status check_kernel(void *arg)
{
    stage *s = arg;
    for (int k = 0; k < WORDS; k++) {
        if (s->buf[k] != s->value)
            ++*s->errors;
        s->buf[k] = s->value + 1;
    }
    return AG_OK;
}

typedef struct worker {
    ag_device *dev;
    int id;
    int buf[WORDS];
    int errors;
    stage fills[ROUNDS];
    unsigned char host_in[256], host_out[256];
    ag_status st;
} worker;

/* Ping-pong between two streams of this thread through two events, with
 * device copies in both directions and a device buffer allocated and freed
 * every round (so allocation runs concurrently with other threads' work). */
static void *drive(void *arg)
{
    worker *w = arg;
    ag_device *dev = w->dev;
    ag_dev_stream *a = NULL, *b = NULL;
    ag_dev_event *ea = NULL, *eb = NULL;
    ag_status st = AG_OK;
#define STEP(x)                  \
    do {                         \
        if ((st = (x)) != AG_OK) \
            goto out;            \
    } while (0)
    STEP(ag_dev_stream_create(dev, &a));
    STEP(ag_dev_stream_create(dev, &b));
    STEP(ag_dev_event_create(dev, &ea));
    STEP(ag_dev_event_create(dev, &eb));
    for (int r = 0; r < ROUNDS; r++) {
        w->fills[r] = (stage){w->buf, 2 * r + w->id * 100000, &w->errors};
        stage check = w->fills[r]; /* by value: launch_copy takes it */
        /* a: wait for b's previous check, then fill; b: wait for the fill, check. */
        STEP(ag_dev_stream_wait_event(dev, a, eb));
        STEP(ag_dev_launch(dev, a, fill_kernel, &w->fills[r], "fill"));
        STEP(ag_dev_event_record(dev, ea, a));
        STEP(ag_dev_stream_wait_event(dev, b, ea));
        STEP(ag_dev_launch_copy(dev, b, check_kernel, &check, sizeof check, "check"));
        STEP(ag_dev_event_record(dev, eb, b));
        if (r % 50 == 0) {
            void *d;
            STEP(ag_dev_mem_alloc(dev, AG_MEM_HBM, 256, 0, &d));
            for (int k = 0; k < 256; k++)
                w->host_in[k] = (unsigned char)(k + r + w->id);
            ag_status cst = ag_dev_memcpy_async(dev, AG_COPY_H2D, d, w->host_in, 256, a);
            if (cst == AG_OK)
                cst = ag_dev_memcpy_async(dev, AG_COPY_D2H, w->host_out, d, 256, a);
            if (cst == AG_OK)
                cst = ag_dev_stream_synchronize(dev, a);
            ag_dev_mem_free(dev, d); /* after the synchronise: nothing queued touches it */
            STEP(cst);
            if (memcmp(w->host_in, w->host_out, 256) != 0)
                w->errors++;
        }
        if (r % 97 == 0)
            STEP(ag_dev_synchronize(dev));
    }
    STEP(ag_dev_event_synchronize(dev, eb));
#undef STEP
out:
    ag_dev_stream_destroy(dev, a);
    ag_dev_stream_destroy(dev, b);
    ag_dev_event_destroy(dev, ea);
    ag_dev_event_destroy(dev, eb);
    w->st = st;
    return NULL;
}

static void test_multi_stream_threads(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    static worker ws[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        memset(&ws[t], 0, sizeof ws[t]);
        ws[t].dev = dev;
        ws[t].id = t;
        assert_int_equal(pthread_create(&th[t], NULL, drive, &ws[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_join(th[t], NULL), 0);
    for (int t = 0; t < THREADS; t++) {
        if (ws[t].st != AG_OK)
            fail_msg("thread %d: %s", t, ag_ctx_errmsg(ctx));
        assert_int_equal(ws[t].errors, 0);
        /* The last check left value + 1 in every word. */
        for (int k = 0; k < WORDS; k++)
            assert_int_equal(ws[t].buf[k], 2 * (ROUNDS - 1) + t * 100000 + 1);
    }
    ag_dev_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    ag_dev_stats_get(dev, &st);
    assert_int_equal(st.launches, (uint64_t)THREADS * ROUNDS * 2);
    assert_int_equal(st.copies[AG_COPY_H2D], (uint64_t)THREADS * (ROUNDS / 50));
    assert_int_equal(st.mem[AG_MEM_HBM].used, 0);
    assert_int_equal(st.live_streams, 0);
    assert_int_equal(ag_dev_device_state(dev, NULL), AG_DEV_HEALTHY);
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
}

/* Fan-out/fan-in across many streams from one thread: a producer stream
 * writes, N consumers read after one event, the producer reads their results
 * after N events; repeated, with a graph replay doing the same. */
typedef struct fan {
    int src;
    int dst[8];
} fan;

typedef struct fan_arg {
    fan *f;
    int k;
} fan_arg;

static ag_status produce(void *arg)
{
    fan *f = arg;
    f->src++;
    return AG_OK;
}

static ag_status consume(void *arg)
{
    fan_arg *a = arg;
    a->f->dst[a->k] = a->f->src * 10 + a->k;
    return AG_OK;
}

static ag_status gather(void *arg)
{
    fan *f = arg;
    for (int k = 0; k < 8; k++)
        if (f->dst[k] != f->src * 10 + k)
            return AG_EINTERNAL; /* a consumer ran out of order: poisons the device */
    return AG_OK;
}

static void test_fan_out_in(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    ag_dev_stream *p, *c[8];
    ag_dev_event *ep, *ec[8];
    assert_int_equal(ag_dev_stream_create(dev, &p), AG_OK);
    assert_int_equal(ag_dev_event_create(dev, &ep), AG_OK);
    for (int k = 0; k < 8; k++) {
        assert_int_equal(ag_dev_stream_create(dev, &c[k]), AG_OK);
        assert_int_equal(ag_dev_event_create(dev, &ec[k]), AG_OK);
    }
    fan f = {0, {0}};
    fan_arg args[8];
    for (int k = 0; k < 8; k++)
        args[k] = (fan_arg){&f, k};
    for (int r = 0; r < 200; r++) {
        assert_int_equal(ag_dev_launch(dev, p, produce, &f, "produce"), AG_OK);
        assert_int_equal(ag_dev_event_record(dev, ep, p), AG_OK);
        for (int k = 0; k < 8; k++) {
            assert_int_equal(ag_dev_stream_wait_event(dev, c[k], ep), AG_OK);
            assert_int_equal(ag_dev_launch(dev, c[k], consume, &args[k], "consume"), AG_OK);
            assert_int_equal(ag_dev_event_record(dev, ec[k], c[k]), AG_OK);
            assert_int_equal(ag_dev_stream_wait_event(dev, p, ec[k]), AG_OK);
        }
        assert_int_equal(ag_dev_launch(dev, p, gather, &f, "gather"), AG_OK);
    }
    assert_int_equal(ag_dev_synchronize(dev), AG_OK);
    assert_int_equal(f.src, 200);

    /* The same round captured on the producer stream (waits on consumer
     * events recorded before each replay). */
    ag_dev_graph *g;
    assert_int_equal(ag_dev_capture_begin(dev, p), AG_OK);
    assert_int_equal(ag_dev_launch(dev, p, produce, &f, "produce"), AG_OK);
    assert_int_equal(ag_dev_event_record(dev, ep, p), AG_OK);
    assert_int_equal(ag_dev_capture_end(dev, p, &g), AG_OK);
    for (int r = 0; r < 100; r++) {
        assert_int_equal(ag_dev_graph_launch(dev, g, p), AG_OK);
        for (int k = 0; k < 8; k++) {
            assert_int_equal(ag_dev_stream_wait_event(dev, c[k], ep), AG_OK);
            assert_int_equal(ag_dev_launch(dev, c[k], consume, &args[k], "consume"), AG_OK);
            assert_int_equal(ag_dev_event_record(dev, ec[k], c[k]), AG_OK);
            assert_int_equal(ag_dev_stream_wait_event(dev, p, ec[k]), AG_OK);
        }
        assert_int_equal(ag_dev_launch(dev, p, gather, &f, "gather"), AG_OK);
    }
    assert_int_equal(ag_dev_synchronize(dev), AG_OK);
    assert_int_equal(f.src, 300);
    ag_dev_graph_destroy(dev, g);
    ag_device_destroy(dev); /* streams and events left to the device */
    ag_ctx_destroy(ctx);
}

/* One graph holding a launch_copy, replayed on eight streams at once and
 * destroyed while replays are in flight: kernels on different workers read
 * the same captured bytes, and the last one done releases them. */
typedef struct tally {
    atomic_int *sum;
    int words[64];
} tally;

static ag_status tally_kernel(void *arg)
{
    const tally *t = arg;
    int s = 0;
    for (int k = 0; k < 64; k++)
        s += t->words[k];
    atomic_fetch_add(t->sum, s);
    return AG_OK;
}

static void test_launch_copy_replays_concurrent(void **state)
{
    (void)state;
    ag_testalloc ta;
    ag_ctx *ctx = agtest_ctx_counted(&ta);
    ag_device *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &dev), AG_OK);
    ag_dev_stream *c[8];
    for (int k = 0; k < 8; k++)
        assert_int_equal(ag_dev_stream_create(dev, &c[k]), AG_OK);
    atomic_int sum;
    atomic_init(&sum, 0);
    tally t = {&sum, {0}};
    for (int k = 0; k < 64; k++)
        t.words[k] = k; /* sums to 2016 */
    enum { GRAPHS = 20, REPLAYS = 10 };
    for (int r = 0; r < GRAPHS; r++) {
        ag_dev_graph *g;
        assert_int_equal(ag_dev_capture_begin(dev, c[r % 8]), AG_OK);
        assert_int_equal(ag_dev_launch_copy(dev, c[r % 8], tally_kernel, &t, sizeof t, "tally"), AG_OK);
        assert_int_equal(ag_dev_capture_end(dev, c[r % 8], &g), AG_OK);
        for (int k = 0; k < 8 * REPLAYS; k++)
            assert_int_equal(ag_dev_graph_launch(dev, g, c[k % 8]), AG_OK);
        ag_dev_graph_destroy(dev, g); /* replays still running */
    }
    assert_int_equal(ag_dev_synchronize(dev), AG_OK);
    assert_int_equal(atomic_load(&sum), GRAPHS * 8 * REPLAYS * 2016);
    for (int k = 0; k < 8; k++)
        ag_dev_stream_destroy(dev, c[k]);
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multi_stream_threads),
        cmocka_unit_test(test_fan_out_in),
        cmocka_unit_test(test_launch_copy_replays_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
