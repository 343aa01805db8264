/* Unit tests of the baseline mode, the PyTorch-style strategy in the same
 * code base: blocks private to their allocation stream, cross-stream frees
 * deferred on events and polled, the deferred-free queue staying bounded,
 * and a failed record with and without a failed synchronise. */
#include "support/agtest.h"
#include "support/rt/alloc_fix.h"

/* A deferred free's queue stays as long as its pending entries, not as
 * long as the execution: here stream 1's newest entry is always pending
 * when a poll pops the older ones, so the queue never empties; 20,000
 * deferred frees must not leave 20,000 slots behind (the popped front is
 * reused).  Baseline mode, where every cross-stream free is deferred. */
static void test_pend_queue_bounded(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_device *sim = NULL, *dev = NULL;
    ag_timed *t = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &sim), AG_OK);
    assert_int_equal(ag_timed_wrap(sim, 4, &t, &dev), AG_OK);
    ag_dev_stream *s[2];
    for (int k = 0; k < 2; k++)
        assert_int_equal(ag_dev_stream_create(dev, &s[k]), AG_OK);
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.nstreams = 2;
    c.mode = AG_ALLOC_BASELINE;
    ag_memalloc *a = NULL;
    assert_int_equal(ag_alloc_create(ctx, dev, s, &c, &a), AG_OK);
    uint32_t most = 0;
    for (int i = 0; i < 20000; i++) {
        ag_block *b = NULL;
        ag_timed_tick(t);
        assert_int_equal(ag_alloc_malloc(a, 0, 4096, &b), AG_OK);
        ag_timed_kernel(t, s[0]);
        ag_timed_tick(t);
        assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
        ag_timed_kernel(t, s[1]);
        ag_timed_tick(t);
        assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
        ag_timed_tick(t);
        assert_int_equal(ag_alloc_free(a, b, 0), AG_OK);
        uint32_t left = a->st[1].npend - a->st[1].pend_head;
        most = left > most ? left : most;
    }
    assert_true(most >= 1 && most <= 4); /* a few pending at a time */
    assert_true(a->st[1].cappend <= 16);
    assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
    ag_alloc_stats st = {.size = sizeof st};
    ag_alloc_stats_get(a, &st, NULL);
    assert_int_equal(st.allocated, 0);
    ag_alloc_destroy(a);
    for (int k = 0; k < 2; k++)
        ag_dev_stream_destroy(dev, s[k]);
    ag_device_destroy(dev);
    ag_device_destroy(sim);
    ag_ctx_destroy(ctx);
}

static void test_baseline(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_BASELINE, 0);
    ag_block *b = xmalloc(&f, 0, 4096);
    void *p = ag_block_ptr(b);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.pending, 4096);
    /* private to stream 0: stream 1 never gets it */
    ag_block *c = xmalloc(&f, 1, 4096);
    assert_ptr_not_equal(ag_block_ptr(c), p);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    s = stats(f.a);
    assert_int_equal(s.pending, 0);
    ag_block *d = xmalloc(&f, 0, 4096);
    assert_ptr_equal(ag_block_ptr(d), p);
    assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, d, 0), AG_OK);
    fix_close(&f);
}

/* The baseline's last free of a shared block whose event fails to record
 * (sync_too: and the stream's synchronise standing in for it): the free
 * returns the device's error with its use released; the block goes home
 * at once after the synchronise, or else at the clean after its device
 * synchronise. */
static void base_record_fails(bool sync_too)
{
    ag_ctx *ctx = agtest_ctx();
    ag_device *sim = NULL, *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, NULL, &sim), AG_OK);
    ag_dev_fault fl;
    uint32_t mask = AG_DEV_ENTRY_BIT(AG_DEV_E_EVENT_RECORD) | (sync_too ? AG_DEV_ENTRY_BIT(AG_DEV_E_STREAM_SYNC) : 0u);
    ag_dev_fault_init(&fl, mask, 0, sync_too, AG_FAULT_RETURN);
    assert_int_equal(ag_device_fault_wrap(ctx, sim, &fl, &dev), AG_OK);
    ag_dev_stream *s[2];
    ag_memalloc *a = alloc_on(ctx, sim, dev, s, 2, AG_ALLOC_BASELINE, AG_MEM_HBM);
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 65536, &b), AG_OK);
    void *mem = ag_block_ptr(b);
    assert_int_equal(ag_alloc_access(a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(a, b, 1), AG_OK);
    fl.fail_at = fl.calls + 1u; /* the record of the last free, on stream 1 (and what follows) */
    assert_int_equal(ag_alloc_free(a, b, 0), AG_EDEVICE);
    assert_true(agtest_errmsg_has(ctx, "stream 1: recording the event of a deferred free"));
    fl.fail_at = 0;
    fl.repeat = 0;
    ag_alloc_stats st = stats(a);
    assert_int_equal(st.pending, sync_too ? 65536 : 0);
    assert_int_equal(st.allocated, 0);
    assert_int_equal(a->npend, 0);
    if (sync_too)
        assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
    ag_block *again = NULL;
    assert_int_equal(ag_alloc_malloc(a, 0, 65536, &again), AG_OK);
    assert_ptr_equal(ag_block_ptr(again), mem);
    assert_int_equal(ag_alloc_free(a, again, 0), AG_OK);
    assert_int_equal(ag_alloc_sync(a, AG_SYNC_CLEAN), AG_OK);
    st = stats(a);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.cached, st.reserved);
    ag_alloc_destroy(a);
    for (int k = 0; k < 2; k++)
        ag_dev_stream_destroy(sim, s[k]);
    ag_device_destroy(dev);
    close_empty(ctx, sim);
}

static void test_base_record_fails(void **state)
{
    (void)state;
    base_record_fails(false);
    base_record_fails(true);
}

/* A stream's deferred-free queue moves its entries down instead of
 * growing once at least half of it is popped: exactly half is enough. */
static void test_pend_queue_half_popped(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_BASELINE, 0);
    ag_astream *s = &f.a->st[1];
    while (s->cappend < 16)
        assert_int_equal(ag_pend_grow(f.a, 1), AG_OK);
    uint32_t cap = s->cappend;
    memset(s->pend, 0, cap * sizeof *s->pend);
    for (uint32_t k = 0; k < cap; k++)
        s->pend[k].seq = k;
    s->npend = cap;
    s->pend_head = cap / 2u; /* half popped: room, no growth */
    assert_int_equal(ag_pend_grow(f.a, 1), AG_OK);
    assert_int_equal(s->cappend, cap);
    assert_int_equal(s->pend_head, 0);
    assert_int_equal(s->npend, cap / 2u);
    assert_int_equal(s->pend[0].seq, cap / 2u); /* the entries kept, in order */
    s->npend = cap;
    s->pend_head = cap / 2u - 1u; /* less than half: it grows */
    assert_int_equal(ag_pend_grow(f.a, 1), AG_OK);
    assert_int_equal(s->cappend, 2u * cap);
    s->npend = s->pend_head = 0;
    fix_close(&f);
}

/* A block every user has freed but whose events are still pending is no
 * longer live: a late access or free is refused with AG_EINVAL naming it,
 * and changes nothing (it stays pending, and goes home at the clean). */
static void test_freed_block_refused(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_BASELINE, 0);
    atomic_int open = 0;
    gate(&f, 1, &open);
    ag_block *b = xmalloc(&f, 0, 4096);
    void *p = ag_block_ptr(b);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(stats(f.a).pending, 4096);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_EINVAL);
    assert_errmsg(f.ctx, "access: the block is not live");
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_EINVAL);
    assert_errmsg(f.ctx, "free: the block is not live");
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.pending, 4096);
    assert_int_equal(s.allocated, 0);
    assert_int_equal(s.frees, 1);
    atomic_store(&open, 1);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(stats(f.a).pending, 0);
    ag_block *c = xmalloc(&f, 0, 4096);
    assert_ptr_equal(ag_block_ptr(c), p);
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
    fix_close(&f);
}

/* The baseline's last resort when the device refuses a region: one
 * blocking poll of the pending events (a synchronisation, counted even
 * with none pending), every wholly free region of every stream given
 * back, and the request retried, here grown for itself alone in the room
 * stream 0's free region left. */
static void test_last_resort(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_BASELINE, 4u << 20);
    ag_block *b = xmalloc(&f, 0, 1u << 20);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.reserved, 2u << 20);
    assert_int_equal(s.syncs, 0);
    ag_block *c = xmalloc(&f, 1, 3u << 20);
    s = stats(f.a);
    assert_int_equal(s.retries, 1);
    assert_int_equal(s.syncs, 1);
    assert_int_equal(s.device_frees, 1);
    assert_int_equal(s.reserved, 3u << 20);
    assert_int_equal(s.allocated, 3u << 20);
    assert_int_equal(s.ooms, 0);
    assert_int_equal(ag_alloc_free(f.a, c, 1), AG_OK);
    fix_close(&f);
}

/* A second use on the block's own stream shares it with nobody: its last
 * free sends it home at once, with no event recorded (nothing pending). */
static void test_same_stream_use_private(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 2, AG_ALLOC_BASELINE, 0);
    ag_block *b = xmalloc(&f, 0, 4096);
    void *p = ag_block_ptr(b);
    assert_int_equal(ag_alloc_access(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(stats(f.a).allocated, 4096);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    ag_alloc_stats s = stats(f.a);
    assert_int_equal(s.allocated, 0);
    assert_int_equal(s.pending, 0);
    assert_int_equal(f.a->npend, 0);
    assert_int_equal(f.a->nev, 0); /* no event was ever made */
    ag_block *c = xmalloc(&f, 0, 4096);
    assert_ptr_equal(ag_block_ptr(c), p);
    assert_int_equal(stats(f.a).event_polls, 0);
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
    fix_close(&f);
}

/* A block object that served a shared block comes back with its view
 * cleared: reused for a block stream 2 alone shares, the last free
 * records one event (on stream 2), none on stream 1, which used the
 * earlier block. */
static void test_reused_object_view_cleared(void **state)
{
    (void)state;
    fix f;
    fix_open(&f, 3, AG_ALLOC_BASELINE, 0);
    ag_block *b = xmalloc(&f, 0, 4096);
    assert_int_equal(ag_alloc_access(f.a, b, 1), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, b, 1), AG_OK);
    assert_int_equal(f.a->npend, 1);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    assert_int_equal(f.a->npend, 0);
    ag_block *c = xmalloc(&f, 0, 4096);
    assert_ptr_equal(c, b); /* the same object, reused */
    assert_int_equal(ag_alloc_access(f.a, c, 2), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, c, 0), AG_OK);
    assert_int_equal(ag_alloc_free(f.a, c, 2), AG_OK);
    assert_int_equal(f.a->npend, 1);
    assert_int_equal(f.a->st[1].npend, 0);
    assert_int_equal(f.a->st[2].npend, 1);
    assert_int_equal(ag_alloc_sync(f.a, AG_SYNC_CLEAN), AG_OK);
    fix_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pend_queue_bounded),
        cmocka_unit_test(test_pend_queue_half_popped),
        cmocka_unit_test(test_baseline),
        cmocka_unit_test(test_base_record_fails),
        cmocka_unit_test(test_freed_block_refused),
        cmocka_unit_test(test_last_resort),
        cmocka_unit_test(test_same_stream_use_private),
        cmocka_unit_test(test_reused_object_view_cleared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
