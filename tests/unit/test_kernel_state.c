/* Kernel mode: the execution-mode latch and the context phase machine, table
 * driven against a fake device operation table (creation failures at every
 * step, failing rollback, retriable close, poison and error slots). */
#include "support/agtest.h"

#include "kernel/kernel_internal.h"

#define assert_st(got, want) assert_int_equal((int)(got), (int)(want))

/* ---------------------------------------------------------------- latch */

static void latch_starts_unlatched_and_is_write_once(void **state)
{
    (void)state;
    ag_mode_latch l = {0};
    assert_false(l.latched);
    assert_false(ag_latch_is_kernel(&l));
    assert_st(ag_latch_set(&l, AG_EXEC_KERNEL), AG_OK);
    assert_true(ag_latch_is_kernel(&l));
    assert_st(ag_latch_set(&l, AG_EXEC_KERNEL), AG_OK); /* idempotent */
    assert_st(ag_latch_set(&l, AG_EXEC_PROGRAM), AG_KERNEL_ERR_INVALID_STATE);
    assert_true(ag_latch_is_kernel(&l)); /* the refusal changed nothing */

    ag_mode_latch p = {0};
    assert_st(ag_latch_set(&p, AG_EXEC_PROGRAM), AG_OK);
    assert_st(ag_latch_set(&p, AG_EXEC_PROGRAM), AG_OK);
    assert_st(ag_latch_set(&p, AG_EXEC_KERNEL), AG_KERNEL_ERR_INVALID_STATE);
    assert_false(ag_latch_is_kernel(&p));
    assert_int_equal(p.mode, AG_EXEC_PROGRAM);
}

/* ---------------------------------------------------------------- fake device */

typedef struct fake {
    int create_calls;    /* creations seen (streams and events) */
    int fail_create_at;  /* 1-based; 0 never */
    int fail_destroys;   /* this many destroy calls fail, then they succeed */
    int live;            /* handles alive */
    int destroyed_order[16];
    int ndestroyed;
    int tokens[16];
} fake;

static ag_status f_create(fake *f, void **out)
{
    f->create_calls++;
    if (f->fail_create_at && f->create_calls == f->fail_create_at)
        return AG_ENOMEM;
    int k = f->create_calls - 1;
    f->tokens[k] = k + 1;
    *out = &f->tokens[k];
    f->live++;
    return AG_OK;
}

static ag_status f_destroy(fake *f, void *h)
{
    if (f->fail_destroys > 0) {
        f->fail_destroys--;
        return AG_EDEVICE;
    }
    f->destroyed_order[f->ndestroyed++] = *(int *)h;
    f->live--;
    return AG_OK;
}

static ag_status f_create_stream(void *ud, int kind, void **out)
{
    (void)kind;
    return f_create(ud, out);
}
static ag_status f_create_event(void *ud, int kind, void **out)
{
    (void)kind;
    return f_create(ud, out);
}
static ag_status f_destroy_h(void *ud, void *h)
{
    return f_destroy(ud, h);
}

static ag_kcontext_ops fake_ops(fake *f)
{
    ag_kcontext_ops o = {f, f_create_stream, f_destroy_h, f_create_event, f_destroy_h};
    return o;
}

/* ---------------------------------------------------------------- phases */

static void initialize_creates_two_streams_then_five_events(void **state)
{
    (void)state;
    fake f = {0};
    ag_kstate s;
    ag_kstate_init(&s);
    assert_int_equal(s.phase, AG_KPHASE_NEW);
    ag_kcontext_ops o = fake_ops(&f);
    assert_st(ag_kstate_initialize(NULL, &s, &o, 17), AG_OK);
    assert_int_equal(s.phase, AG_KPHASE_COLLECTING);
    assert_int_equal(f.live, AG_KSTREAM_COUNT + AG_KEVENT_COUNT);
    assert_true(ag_kstate_accepts_dispatch(&s));
    assert_int_equal(s.generation, 17);
    /* A second initialize is refused and changes nothing. */
    assert_st(ag_kstate_initialize(NULL, &s, &o, 18), AG_KERNEL_ERR_INVALID_STATE);
    assert_int_equal(s.generation, 17);
    assert_int_equal(f.create_calls, 7);
    /* Close destroys events in reverse order, then streams in reverse. */
    assert_st(ag_kstate_close(NULL, &s, NULL, NULL), AG_OK);
    assert_int_equal(s.phase, AG_KPHASE_CLOSED);
    int want[] = {7, 6, 5, 4, 3, 2, 1};
    assert_int_equal(f.ndestroyed, 7);
    for (int k = 0; k < 7; k++)
        assert_int_equal(f.destroyed_order[k], want[k]);
    assert_int_equal(f.live, 0);
    assert_st(ag_kstate_close(NULL, &s, NULL, NULL), AG_OK); /* idempotent */
    assert_st(ag_kstate_initialize(NULL, &s, &o, 19), AG_KERNEL_ERR_INVALID_STATE); /* Closed is terminal */
}

static void initialize_refuses_bad_arguments_and_incomplete_tables(void **state)
{
    (void)state;
    fake f = {0};
    ag_kstate s;
    ag_kstate_init(&s);
    ag_kcontext_ops o = fake_ops(&f);
    assert_st(ag_kstate_initialize(NULL, &s, &o, 0), AG_KERNEL_ERR_INVALID_ARGUMENT);
    o.destroy_event = NULL;
    assert_st(ag_kstate_initialize(NULL, &s, &o, 5), AG_KERNEL_ERR_INTERNAL);
    assert_int_equal(s.phase, AG_KPHASE_NEW);
    assert_int_equal(f.create_calls, 0);
}

/* Every creation step failing in turn: rollback returns to New and the
 * context can be initialized again. */
static void creation_failure_at_every_step_rolls_back(void **state)
{
    (void)state;
    for (int n = 1; n <= AG_KSTREAM_COUNT + AG_KEVENT_COUNT; n++) {
        fake f = {.fail_create_at = n};
        ag_kstate s;
        ag_kstate_init(&s);
        ag_kcontext_ops o = fake_ops(&f);
        assert_st(ag_kstate_initialize(NULL, &s, &o, 3), AG_ENOMEM);
        assert_int_equal(s.phase, AG_KPHASE_NEW);
        assert_int_equal(f.live, 0);
        assert_int_equal(s.generation, 0);
        assert_false(ag_kstate_has_live_resources(&s));
        f.fail_create_at = 0;
        assert_st(ag_kstate_initialize(NULL, &s, &o, 3), AG_OK);
        assert_int_equal(s.phase, AG_KPHASE_COLLECTING);
        assert_st(ag_kstate_close(NULL, &s, NULL, NULL), AG_OK);
        assert_int_equal(f.live, 0);
    }
}

static void failed_rollback_lands_in_closing_with_both_errors(void **state)
{
    (void)state;
    fake f = {.fail_create_at = 5, .fail_destroys = 1};
    ag_kstate s;
    ag_kstate_init(&s);
    ag_kcontext_ops o = fake_ops(&f);
    /* The creation error is reported, the cleanup error latched. */
    assert_st(ag_kstate_initialize(NULL, &s, &o, 3), AG_ENOMEM);
    assert_int_equal(s.phase, AG_KPHASE_CLOSING);
    assert_st(s.teardown_error, AG_EDEVICE);
    assert_st(s.runtime_error, AG_OK);
    assert_true(ag_kstate_has_live_resources(&s));
    assert_false(ag_kstate_accepts_dispatch(&s));
    assert_st(ag_kstate_initialize(NULL, &s, &o, 3), AG_KERNEL_ERR_INVALID_STATE); /* sticky */
    assert_st(ag_kstate_mark_ready_enqueued(NULL, &s), AG_KERNEL_ERR_INVALID_STATE);
    /* Close retries what is left. */
    assert_st(ag_kstate_close(NULL, &s, NULL, NULL), AG_OK);
    assert_int_equal(s.phase, AG_KPHASE_CLOSED);
    assert_int_equal(f.live, 0);
    assert_st(s.teardown_error, AG_EDEVICE); /* the first teardown error stays latched */
}

static void ready_poison_and_dispatch_table(void **state)
{
    (void)state;
    fake f = {0};
    ag_kstate s;
    ag_kstate_init(&s);
    /* New: not ready, poison ignored, close goes straight to Closed. */
    assert_st(ag_kstate_mark_ready_enqueued(NULL, &s), AG_KERNEL_ERR_INVALID_STATE);
    ag_kstate_poison(&s, AG_EDEVICE);
    assert_int_equal(s.phase, AG_KPHASE_NEW);
    assert_st(s.runtime_error, AG_OK);

    ag_kcontext_ops o = fake_ops(&f);
    assert_st(ag_kstate_initialize(NULL, &s, &o, 9), AG_OK);
    assert_st(ag_kstate_mark_ready_enqueued(NULL, &s), AG_OK);
    assert_int_equal(s.phase, AG_KPHASE_READY_ENQUEUED);
    assert_st(ag_kstate_mark_ready_enqueued(NULL, &s), AG_OK); /* stays open for more */
    assert_true(ag_kstate_accepts_dispatch(&s));
    ag_kstate_poison(&s, AG_KST(AG_KERNEL_ERR_INTERNAL));
    assert_int_equal(s.phase, AG_KPHASE_POISONED);
    ag_kstate_poison(&s, AG_EDEVICE); /* the first cause is kept */
    assert_st(s.runtime_error, AG_KERNEL_ERR_INTERNAL);
    assert_false(ag_kstate_accepts_dispatch(&s));
    assert_st(ag_kstate_mark_ready_enqueued(NULL, &s), AG_KERNEL_ERR_INVALID_STATE);
    /* Poisoned accepts close. */
    assert_st(ag_kstate_close(NULL, &s, NULL, NULL), AG_OK);
    assert_int_equal(s.phase, AG_KPHASE_CLOSED);
    assert_st(s.runtime_error, AG_KERNEL_ERR_INTERNAL);
    assert_st(s.teardown_error, AG_OK);
    ag_kstate_poison(&s, AG_EDEVICE); /* ignored once closed */
    assert_int_equal(s.phase, AG_KPHASE_CLOSED);

    ag_kstate n;
    ag_kstate_init(&n);
    assert_st(ag_kstate_close(NULL, &n, NULL, NULL), AG_OK);
    assert_int_equal(n.phase, AG_KPHASE_CLOSED);
    n.phase = AG_KPHASE_INITIALIZING; /* only visible inside initialize; close refuses it */
    assert_st(ag_kstate_close(NULL, &n, NULL, NULL), AG_KERNEL_ERR_INVALID_STATE);
}

typedef struct release_plan {
    int calls;
    int fail_first;
} release_plan;

static ag_status plan_release(void *ud)
{
    release_plan *p = ud;
    return ++p->calls <= p->fail_first ? AG_EDEVICE : AG_OK;
}

static void close_is_retriable_and_sticky(void **state)
{
    (void)state;
    fake f = {0};
    ag_kstate s;
    ag_kstate_init(&s);
    ag_kcontext_ops o = fake_ops(&f);
    assert_st(ag_kstate_initialize(NULL, &s, &o, 9), AG_OK);
    /* Owned memory fails to go: every stream and event is kept. */
    release_plan rp = {.fail_first = 1};
    assert_st(ag_kstate_close(NULL, &s, plan_release, &rp), AG_EDEVICE);
    assert_int_equal(s.phase, AG_KPHASE_CLOSING);
    assert_int_equal(f.live, 7);
    assert_false(ag_kstate_accepts_dispatch(&s));
    assert_st(ag_kstate_mark_ready_enqueued(NULL, &s), AG_KERNEL_ERR_INVALID_STATE);
    ag_kstate_poison(&s, AG_ENOMEM); /* Closing ignores poison */
    assert_int_equal(s.phase, AG_KPHASE_CLOSING);
    assert_st(s.runtime_error, AG_OK);
    /* Then two handles fail to go: the others are destroyed and cleared. */
    f.fail_destroys = 2;
    assert_st(ag_kstate_close(NULL, &s, plan_release, &rp), AG_EDEVICE);
    assert_int_equal(s.phase, AG_KPHASE_CLOSING);
    assert_int_equal(f.live, 2);
    /* The retry only redoes what is left. */
    assert_st(ag_kstate_close(NULL, &s, plan_release, &rp), AG_OK);
    assert_int_equal(s.phase, AG_KPHASE_CLOSED);
    assert_int_equal(f.live, 0);
    assert_int_equal(f.ndestroyed, 7);
    assert_st(s.teardown_error, AG_EDEVICE);
    assert_int_equal(rp.calls, 3);
}

static void phase_names(void **state)
{
    (void)state;
    assert_string_equal(ag_kernel_phase_name(AG_KPHASE_READY_ENQUEUED), "ReadyEnqueued");
    assert_string_equal(ag_kernel_phase_name(AG_KPHASE_CLOSING), "Closing");
    assert_string_equal(ag_kernel_phase_name((ag_kernel_phase)42), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(latch_starts_unlatched_and_is_write_once),
        cmocka_unit_test(initialize_creates_two_streams_then_five_events),
        cmocka_unit_test(initialize_refuses_bad_arguments_and_incomplete_tables),
        cmocka_unit_test(creation_failure_at_every_step_rolls_back),
        cmocka_unit_test(failed_rollback_lands_in_closing_with_both_errors),
        cmocka_unit_test(ready_poison_and_dispatch_table),
        cmocka_unit_test(close_is_retriable_and_sticky),
        cmocka_unit_test(phase_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
