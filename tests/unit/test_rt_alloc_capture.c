/* Unit tests of the allocator beside stream capture: an event recorded on
 * a capturing stream goes into the graph and stands for none of that
 * stream's eager work, so the allocator never lets one decide a reuse.
 * A block whose user captures waits (both modes, both fallbacks); a send
 * from, or a wait into, a capturing stream carries or applies nothing
 * until the next one outside a capture; a region move needs both streams
 * eager.  Each test fails if the allocator trusts a captured record. */
#include <stdatomic.h>

#include "support/agtest.h"
#include "support/rt/alloc_fix.h"

static void capture_begin(fix *f, uint32_t s)
{
    assert_int_equal(ag_dev_capture_begin(f->dev, f->s[s]), AG_OK);
}

/* Ends s's capture; returns the number of event records the graph holds,
 * and its event waits in *waits (NULL: not asked), counted by the device
 * when a launch of it runs; every stream's work must be able to finish. */
static uint64_t capture_end_ops(fix *f, uint32_t s, uint64_t *waits)
{
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_end(f->dev, f->s[s], &g), AG_OK);
    ag_dev_stats before = {.size = sizeof before}, after = {.size = sizeof after};
    assert_int_equal(ag_dev_synchronize(f->dev), AG_OK);
    ag_dev_stats_get(f->dev, &before);
    assert_int_equal(ag_dev_graph_launch(f->dev, g, f->s[s]), AG_OK);
    assert_int_equal(ag_dev_synchronize(f->dev), AG_OK);
    ag_dev_stats_get(f->dev, &after);
    ag_dev_graph_destroy(f->dev, g);
    if (waits)
        *waits = after.waits - before.waits;
    return after.records - before.records;
}

static uint64_t capture_end_records(fix *f, uint32_t s)
{
    return capture_end_ops(f, s, NULL);
}

/* Opens f (two streams, mode, configuration c or the defaults) with one
 * shared block of 4096 bytes born on stream 0 and released by stream 1,
 * whose eager work, behind the gate *open, may still touch it; returns the
 * block, stream 0's use not yet freed. */
static ag_block *shared_block(fix *f, ag_alloc_mode mode, const ag_alloc_config *c, atomic_int *open)
{
    fix_open_cfg(f, 2, mode, 0, c);
    gate(f, 1, open);
    ag_block *b = xmalloc(f, 0, 4096);
    assert_int_equal(ag_alloc_access(f->a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f->a, b, 1), AG_OK); /* a release for stream 1's notices */
    return b;
}

/* Whether any of the n blocks is at p. */
static bool any_at(ag_block *const *x, uint32_t n, const void *p)
{
    for (uint32_t k = 0; k < n; k++)
        if (x[k] && ag_block_ptr(x[k]) == p)
            return true;
    return false;
}

/* Block b (born on stream 0) is used by stream 1's eager work, held busy
 * by a gate; both streams free it, and then stream 1 begins a capture.
 * Pool misses on stream 0 must not hand b out while the gate is shut:
 * the look's event on stream 1 would be captured (a never-recorded event
 * reads complete), so the block waits.  Once the capture has ended and
 * the work is done, the multi mode's next pool miss sends b home; the
 * baseline's block waits for the clean.  With fallback_min 0 the multi
 * mode records its fallback at the last free (the large-block path),
 * which must wait the same way. */
static void user_captures(ag_alloc_mode mode, uint64_t fallback_min)
{
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.fallback_min = fallback_min;
    fix f;
    atomic_int open = 0;
    ag_block *b = shared_block(&f, mode, &c, &open);
    void *p = ag_block_ptr(b);
    capture_begin(&f, 1);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_ctx_last_status(f.ctx), AG_OK); /* a query refused for the capture: forgotten */
    ag_block *x[6] = {0};
    for (uint32_t k = 0; k < 6; k++)
        x[k] = xmalloc(&f, 0, k < 3 ? (1u << 20) : 4096u);
    ag_alloc_stats s = stats(f.a);
    assert_false(any_at(x, 6, p));
    assert_int_equal(s.pending, 4096);
    assert_true(s.capture_waits > 0);
    atomic_store(&open, 1);
    assert_int_equal(capture_end_records(&f, 1), 0); /* no allocator event went into the graph */
    if (mode == AG_ALLOC_MULTI) {
        /* the next look, after the capture: home with no clean */
        ag_block *y = xmalloc(&f, 0, 2u << 20);
        assert_int_equal(stats(f.a).pending, 0);
        assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    } else {
        assert_int_equal(stats(f.a).pending, 4096);
        assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
        assert_int_equal(stats(f.a).pending, 0);
    }
    for (uint32_t k = 0; k < 6; k++)
        assert_int_equal(ag_alloc_free(f.a, x[k], 0), AG_OK);
    fix_close(&f);
}

static void test_user_captures(void **state)
{
    (void)state;
    user_captures(AG_ALLOC_MULTI, 64u << 20); /* the block waits for a pool miss */
    user_captures(AG_ALLOC_MULTI, 0);         /* the block records at its last free */
    user_captures(AG_ALLOC_BASELINE, 0);
}

/* Stream 1 releases a shared block born on stream 0 and then captures;
 * its send to stream 0 goes into the graph (the caller asked for it) but
 * carries nothing: stream 0's wait learns nothing, and the block is not
 * stream 0's again while stream 1's eager work may touch it.  After the
 * capture, the next send carries the release.  Multi mode only (the
 * baseline's sends carry nothing). */
static void test_send_from_capture(void **state)
{
    (void)state;
    fix f;
    atomic_int open = 0;
    ag_block *b = shared_block(&f, AG_ALLOC_MULTI, NULL, &open);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK); /* the last use: b waits */
    capture_begin(&f, 1);
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.captured_kernels, 1);
    assert_int_equal(s.notices_sent, 0);
    assert_int_equal(s.pending, 4096);
    atomic_store(&open, 1);
    assert_int_equal(capture_end_records(&f, 1), 1); /* the send's record is the graph's */
    /* after the capture: the release travels with the next send */
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.captured_kernels, 1);
    assert_int_equal(s.notices_sent, 1);
    assert_int_equal(s.pending, 0);
    fix_close(&f);
}

/* The same release sent before stream 0 captures: stream 0's wait goes
 * into the graph and applies nothing (stream 0's eager work is not
 * ordered after stream 1's), and the next wait outside the capture
 * applies it, with no new send.  The graph holds the wait all the same:
 * the caller asked for it, and a launch must keep its order. */
static void test_wait_into_capture(void **state)
{
    (void)state;
    fix f;
    atomic_int open = 0;
    ag_block *b = shared_block(&f, AG_ALLOC_MULTI, NULL, &open);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);
    capture_begin(&f, 0);
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.captured_kernels, 1);
    assert_int_equal(s.notices_applied, 0);
    assert_int_equal(s.pending, 4096);
    atomic_store(&open, 1);
    uint64_t waits = 0;
    assert_int_equal(capture_end_ops(&f, 0, &waits), 0);
    assert_int_equal(waits, 1); /* the wait the caller asked for is the graph's */
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.notices_applied, 1);
    assert_int_equal(s.pending, 0);
    fix_close(&f);
}

/* A region of stream 0's pool moves to stream 1 only through an event
 * recorded on 0 and waited for by 1 (test_region_move): with either
 * stream capturing, neither orders the other's eager work, so the region
 * stays and the device grows instead. */
static void test_move_needs_eager(void **state)
{
    (void)state;
    for (uint32_t capt = 0; capt < 2; capt++) {
        fix f;
        fix_open(&f, 2, AG_ALLOC_MULTI, 0);
        ag_block *b = xmalloc(&f, 0, 3u << 20);
        void *p = ag_block_ptr(b);
        assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
        capture_begin(&f, capt);
        ag_block *c = xmalloc(&f, 1, 3u << 20);
        ag_alloc_stats s = stats(f.a);
        assert_ptr_not_equal(ag_block_ptr(c), p);
        assert_int_equal(s.regions_moved, 0);
        assert_int_equal(s.capture_waits, 1);
        assert_true(s.peak_reserved > (4u << 20));
        assert_int_equal(capture_end_records(&f, capt), 0);
        assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
        fix_close(&f);
    }
}

/* Three streams: blocks b and c (born on 0) are used by stream 1, busy
 * behind a gate, and by stream 2, which captures when stream 0 frees them
 * last.  Every user is asked whether it is idle before any event is
 * recorded: stream 2's query is refused for its capture, so nothing is
 * recorded on stream 1 either, neither by the pool miss's look (which
 * passes both blocks by) nor, with fallback_min 0, by the last frees
 * (which leave them waiting); the blocks' versions, and the releases'
 * entries in the lists of streams 1 and 2, stay as they were.  (An event
 * queued on stream 1 would otherwise have to go stale with a new version,
 * or its completion would count against a block that no longer waits for
 * it.)  After the capture, with stream 1 done, the next look sends both
 * home. */
static void busy_user_captures(uint64_t fallback_min)
{
    ag_alloc_config cfg;
    ag_alloc_config_default(&cfg);
    cfg.fallback_min = fallback_min;
    cfg.poll_every = 1;
    fix f;
    fix_open_cfg(&f, 3, AG_ALLOC_MULTI, 0, &cfg);
    atomic_int open = 0;
    gate(&f, 1, &open);
    ag_block *x[2];
    void *p[2];
    for (uint32_t k = 0; k < 2; k++) {
        x[k] = xmalloc(&f, 0, 4096);
        p[k] = ag_block_ptr(x[k]);
        assert_int_equal(ag_alloc_access(f.a, x[k], 1), AG_OK);
        assert_int_equal(ag_alloc_access(f.a, x[k], 2), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, x[k], 1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, x[k], 2), AG_OK);
    }
    capture_begin(&f, 2);
    uint32_t version[2] = {x[0]->version, x[1]->version};
    ag_dev_stats d = {.size = sizeof d};
    ag_dev_stats_get(f.dev, &d);
    uint64_t records = d.records;
    for (uint32_t k = 0; k < 2; k++)
        assert_int_equal(ag_alloc_free(f.a, x[k], 0), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.capture_waits, fallback_min ? 0 : 2);
    assert_int_equal(f.a->nlazy, 2u);
    assert_int_equal(f.a->st[1].nlive + f.a->st[2].nlive, 4u);
    ag_block *y = xmalloc(&f, 0, 1u << 20); /* a pool miss: the look */
    ag_dev_stats_get(f.dev, &d);
    assert_int_equal(d.records - records, 0); /* stream 2 found capturing first */
    assert_int_equal(f.a->st[1].nlive + f.a->st[2].nlive, 4u);
    assert_int_equal(x[0]->version, version[0]);
    assert_int_equal(x[1]->version, version[1]);
    ag_alloc_stats t = stats(f.a);
    assert_int_equal(t.capture_waits - s.capture_waits, 2); /* b and c passed by */
    assert_int_equal(t.fallbacks_recorded, 0);
    assert_int_equal(t.pending, 8192);
    assert_false(any_at(&y, 1, p[0]) || any_at(&y, 1, p[1]));
    atomic_store(&open, 1);
    assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[1]), AG_OK);
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_end(f.dev, f.s[2], &g), AG_OK);
    ag_dev_graph_destroy(f.dev, g);
    ag_block *z = xmalloc(&f, 0, 2u << 20); /* the next look: both home */
    t = stats(f.a);
    assert_int_equal(t.pending, 0);
    assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, z, 0), AG_OK);
    fix_close(&f);
}

/* A block born on stream 0 whose two other users, streams 1 and 2, both
 * capture when stream 0 frees it last: capture_waits counts the block once
 * at each free or look that it holds back (the baseline's last free, the
 * multi mode's large-block fallback at the last free, a pool miss's look),
 * not once for each capturing user.  After the captures the clean sends it
 * home. */
static void two_users_capture(ag_alloc_mode mode, uint64_t fallback_min)
{
    ag_alloc_config cfg;
    ag_alloc_config_default(&cfg);
    cfg.fallback_min = fallback_min;
    fix f;
    fix_open_cfg(&f, 3, mode, 0, &cfg);
    ag_block *b = xmalloc(&f, 0, 4096);
    for (uint32_t u = 1; u < 3; u++) {
        assert_int_equal(ag_alloc_access(f.a, b, u), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, b, u), AG_OK);
    }
    for (uint32_t u = 1; u < 3; u++)
        capture_begin(&f, u);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    ag_block *y = xmalloc(&f, 0, 1u << 20); /* a pool miss (the multi mode's look) */
    ag_alloc_stats s = stats(f.a);
    /* the multi mode's large-block fallback: once at the last free and once
     * at the look; otherwise one of them */
    assert_int_equal(s.capture_waits, mode == AG_ALLOC_MULTI && fallback_min == 0 ? 2 : 1);
    assert_int_equal(s.pending, 4096);
    for (uint32_t u = 1; u < 3; u++) {
        ag_dev_graph *g = NULL;
        assert_int_equal(ag_dev_capture_end(f.dev, f.s[u], &g), AG_OK);
        ag_dev_graph_destroy(f.dev, g);
    }
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(stats(f.a).pending, 0);
    assert_int_equal(ag_alloc_free(f.a, y, 0), AG_OK);
    fix_close(&f);
}

static void test_two_users_capture(void **state)
{
    (void)state;
    two_users_capture(AG_ALLOC_BASELINE, 0);
    two_users_capture(AG_ALLOC_MULTI, 0);         /* the last free asks both */
    two_users_capture(AG_ALLOC_MULTI, 64u << 20); /* the look asks both */
}

static void test_busy_user_captures(void **state)
{
    (void)state;
    busy_user_captures(64u << 20); /* the look would record */
    busy_user_captures(0);         /* the last frees would record first */
}

/* A borrowed block born on stream 0 and freed by stream 1 (busy behind a
 * gate) goes home with the next send from 1 to 0.  From a capturing stream
 * 1 that send carries it not (its record is the graph's, and stands for
 * none of stream 1's eager work): it stays on stream 1's borrow allocator
 * until the next send outside the capture. */
static void test_borrow_home_from_capture(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    gate(&f, 1, &open);
    ag_block *b = xmalloc(&f, 0, 4096);
    void *p = ag_block_ptr(b);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_send(f.a, 0, 1), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 1, 0), AG_OK);
    ag_block *y = xmalloc(&f, 1, 4000); /* borrowed */
    assert_ptr_equal(ag_block_ptr(y), p);
    assert_int_equal(ag_alloc_free(f.a, y, 1), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.borrowed, 4096);
    capture_begin(&f, 1);
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.captured_kernels, 1);
    assert_int_equal(s.returned_home, 0);
    assert_int_equal(s.borrowed, 4096);
    atomic_store(&open, 1);
    assert_int_equal(capture_end_records(&f, 1), 1);
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.returned_home, 1);
    assert_int_equal(s.borrowed, 0);
    fix_close(&f);
}

/* Stream 1's release travels to stream 0 with an eager send, its event at
 * a point behind the gate; before stream 0 waits, stream 1 captures a
 * second send (it carries nothing) and the graph is launched on stream 0.
 * The launch records the graph's event again, at stream 0's point: were
 * it the channel's event, stream 0's wait would order nothing after
 * stream 1's eager work and still apply the release, so stream 0 would
 * reuse the block under the gate.  The channel's event keeps stream 1's
 * eager point (incomplete behind the gate); the wait after the captured
 * send applies nothing, and the release applies with the next eager send,
 * stream 0's later work waiting for the gate. */
static void test_launch_keeps_eager_point(void **state)
{
    (void)state;
    fix f;
    atomic_int open = 0;
    ag_block *b = shared_block(&f, AG_ALLOC_MULTI, NULL, &open);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK); /* the last use: b waits */
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK);  /* carries the release */
    assert_int_equal(stats(f.a).notices_sent, 1);
    capture_begin(&f, 1);
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK); /* carries nothing */
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_end(f.dev, f.s[1], &g), AG_OK);
    assert_int_equal(ag_dev_graph_launch(f.dev, g, f.s[0]), AG_OK);
    assert_int_equal(ag_dev_stream_synchronize(f.dev, f.s[0]), AG_OK); /* (no wait of stream 0's yet) */
    bool done = true;
    assert_int_equal(ag_dev_event_query(f.dev, f.a->chans[1u * f.a->n + 0u]->ev, &done), AG_OK);
    assert_false(done); /* still stream 1's point behind the gate */
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.notices_applied, 0);
    assert_int_equal(s.pending, 4096);
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK); /* eager again */
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.notices_applied, 1);
    assert_int_equal(s.pending, 0);
    ag_dev_event *e = NULL;
    assert_int_equal(ag_dev_event_create(f.dev, &e), AG_OK);
    assert_int_equal(ag_dev_event_record(f.dev, e, f.s[0]), AG_OK);
    assert_int_equal(ag_dev_event_query(f.dev, e, &done), AG_OK);
    assert_false(done); /* stream 0 is ordered after stream 1's eager work */
    atomic_store(&open, 1);
    assert_int_equal(ag_dev_synchronize(f.dev), AG_OK);
    ag_dev_event_destroy(f.dev, e);
    ag_dev_graph_destroy(f.dev, g);
    fix_close(&f);
}

/* On a poisoned device, a large block's last free (fallback_min 0) whose
 * user captures fails with the device's poison: the idle query names the
 * capture first (AG_EINVAL), but the question whether the stream captures
 * is the poisoned device's refusal, and that one stands (AG_EDEVICE, the
 * reason in the message).  A first shared block, its user idle, leaves a
 * spare event, so that the second free reaches the query. */
static void test_poisoned_capture(void **state)
{
    (void)state;
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.fallback_min = 0;
    fix f;
    fix_open_cfg(&f, 2, AG_ALLOC_MULTI, 0, &c);
    for (int k = 0; k < 2; k++) {
        ag_block *b = xmalloc(&f, 0, 4096);
        assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
        assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
        if (k == 1) {
            capture_begin(&f, 1);
            ag_dev_poison(f.dev, "poisoned by the test");
            assert_int_equal(ag_alloc_free(f.a, b, 0), AG_EDEVICE);
            assert_true(agtest_errmsg_has(f.ctx, "poisoned by the test"));
        } else {
            assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
            assert_int_equal(stats(f.a).pending, 0);
        }
    }
    assert_int_equal(stats(f.a).capture_waits, 0);
    fix_close(&f);
}

/* After a send captured into a graph, a wait for it waits for the graph's
 * event (each launch records it again), not for the channel's earlier
 * eager point: stream 1's eager send sits behind a gate, its captured one
 * after it; with the graph never launched, stream 0's wait holds nothing
 * back, and stream 0 stays idle. */
static void test_wait_after_captured_send(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_MULTI, 0);
    atomic_int open = 0;
    gate(&f, 1, &open);
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK); /* eager, behind the gate */
    capture_begin(&f, 1);
    assert_int_equal(ag_alloc_send(f.a, 1, 0), AG_OK); /* into the graph */
    ag_dev_graph *g = NULL;
    assert_int_equal(ag_dev_capture_end(f.dev, f.s[1], &g), AG_OK);
    assert_int_equal(ag_alloc_wait(f.a, 0, 1), AG_OK);
    bool idle = false;
    assert_int_equal(ag_dev_stream_query(f.dev, f.s[0], &idle), AG_OK);
    assert_true(idle);
    assert_int_equal(stats(f.a).captured_kernels, 1);
    atomic_store(&open, 1);
    assert_int_equal(ag_dev_synchronize(f.dev), AG_OK);
    ag_dev_graph_destroy(f.dev, g);
    fix_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_user_captures),
        cmocka_unit_test(test_send_from_capture),
        cmocka_unit_test(test_wait_into_capture),
        cmocka_unit_test(test_move_needs_eager),
        cmocka_unit_test(test_launch_keeps_eager_point),
        cmocka_unit_test(test_busy_user_captures),
        cmocka_unit_test(test_two_users_capture),
        cmocka_unit_test(test_borrow_home_from_capture),
        cmocka_unit_test(test_poisoned_capture),
        cmocka_unit_test(test_wait_after_captured_send),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
