/* The kernel context phase machine (seed 004, "KernelExecutionState"):
 * New / Initializing / Collecting / ReadyEnqueued / Poisoned / Closing /
 * Closed, a sticky and retriable Closing, and separate slots for the first
 * runtime error and the first teardown error so one never masks the other.
 * Streams and events are made and destroyed only through ag_kcontext_ops. */
#include "kernel/kernel_internal.h"

static const char *const phase_names[] = {"New",      "Initializing", "Collecting", "ReadyEnqueued",
                                          "Poisoned", "Closing",      "Closed"};

const char *ag_kernel_phase_name(ag_kernel_phase p)
{
    return (unsigned)p < sizeof phase_names / sizeof phase_names[0] ? phase_names[p] : "unknown";
}

bool ag_kcontext_ops_valid(const ag_kcontext_ops *ops)
{
    return ops && ops->create_stream && ops->destroy_stream && ops->create_event &&
           ops->destroy_event;
}

void ag_kstate_init(ag_kstate *s)
{
    memset(s, 0, sizeof *s);
    s->phase = AG_KPHASE_NEW;
}

/* Destroys events in reverse creation order, then streams; a handle is
 * cleared once destroyed so a retry only redoes what is left.  Returns the
 * first failure. */
static ag_status destroy_handles(ag_kstate *s)
{
    ag_status first = AG_OK;
    for (int k = AG_KEVENT_COUNT - 1; k >= 0; k--) {
        if (!s->events[k])
            continue;
        ag_status st = s->ops.destroy_event(s->ops.ud, s->events[k]);
        if (st == AG_OK)
            s->events[k] = NULL;
        else if (first == AG_OK)
            first = st;
    }
    for (int k = AG_KSTREAM_COUNT - 1; k >= 0; k--) {
        if (!s->streams[k])
            continue;
        ag_status st = s->ops.destroy_stream(s->ops.ud, s->streams[k]);
        if (st == AG_OK)
            s->streams[k] = NULL;
        else if (first == AG_OK)
            first = st;
    }
    return first;
}

static void latch_teardown(ag_kstate *s, ag_status st)
{
    if (s->teardown_error == AG_OK)
        s->teardown_error = st;
}

ag_status ag_kstate_initialize(ag_ctx *ctx, ag_kstate *s, const ag_kcontext_ops *ops, uint64_t generation)
{
    if (s->phase != AG_KPHASE_NEW)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE), "kernel context: initialize in phase %s",
                      ag_kernel_phase_name(s->phase));
    if (generation == 0)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "kernel context: initialize with generation 0");
    if (!ag_kcontext_ops_valid(ops))
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INTERNAL), "kernel context: incomplete device operation table");
    ag_status st = AG_OK;
    s->phase = AG_KPHASE_INITIALIZING;
    s->ops = *ops;
    s->has_ops = true;
    s->generation = generation;
    const char *what = "stream";
    int failed = -1;
    for (int k = 0; k < AG_KSTREAM_COUNT && failed < 0; k++)
        if ((st = ops->create_stream(ops->ud, k, &s->streams[k])) != AG_OK)
            failed = k;
    if (failed < 0)
        what = "event";
    for (int k = 0; k < AG_KEVENT_COUNT && failed < 0; k++)
        if ((st = ops->create_event(ops->ud, k, &s->events[k])) != AG_OK)
            failed = k;
    if (st == AG_OK) {
        s->phase = AG_KPHASE_COLLECTING;
        return AG_OK;
    }
    ag_status cleanup = destroy_handles(s);
    if (cleanup != AG_OK) {
        /* Something the device created could not be destroyed: keep the ops
         * and the handles so finalize can retry, and never look New again. */
        latch_teardown(s, cleanup);
        s->phase = AG_KPHASE_CLOSING;
        return AG_ERR(ctx, st,
                      "kernel context: creating %s %d failed (%s) and the rollback failed too (%s); "
                      "the context is Closing",
                      what, failed, ag_status_str(st), ag_status_str(cleanup));
    }
    s->phase = AG_KPHASE_NEW;
    s->has_ops = false;
    memset(&s->ops, 0, sizeof s->ops);
    s->generation = 0;
    return AG_ERR(ctx, st, "kernel context: creating %s %d failed (%s); rolled back", what, failed,
                  ag_status_str(st));
}

ag_status ag_kstate_mark_ready_enqueued(ag_ctx *ctx, ag_kstate *s)
{
    if (s->phase != AG_KPHASE_COLLECTING && s->phase != AG_KPHASE_READY_ENQUEUED)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE), "kernel context: cannot become ready in phase %s",
                      ag_kernel_phase_name(s->phase));
    s->phase = AG_KPHASE_READY_ENQUEUED;
    return AG_OK;
}

void ag_kstate_poison(ag_kstate *s, ag_status cause)
{
    if (s->phase != AG_KPHASE_COLLECTING && s->phase != AG_KPHASE_READY_ENQUEUED)
        return;
    s->phase = AG_KPHASE_POISONED;
    if (s->runtime_error == AG_OK)
        s->runtime_error = cause;
}

bool ag_kstate_accepts_dispatch(const ag_kstate *s)
{
    return s->phase == AG_KPHASE_COLLECTING || s->phase == AG_KPHASE_READY_ENQUEUED;
}

bool ag_kstate_has_live_resources(const ag_kstate *s)
{
    for (int k = 0; k < AG_KSTREAM_COUNT; k++)
        if (s->streams[k])
            return true;
    for (int k = 0; k < AG_KEVENT_COUNT; k++)
        if (s->events[k])
            return true;
    return false;
}

ag_status ag_kstate_close(ag_ctx *ctx, ag_kstate *s, ag_kstate_release_fn release, void *ud)
{
    switch (s->phase) {
    case AG_KPHASE_NEW:
        s->phase = AG_KPHASE_CLOSED;
        return AG_OK;
    case AG_KPHASE_CLOSED:
        return AG_OK;
    case AG_KPHASE_INITIALIZING:
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE), "kernel context: close during initialization");
    default:
        break;
    }
    s->phase = AG_KPHASE_CLOSING;
    if (release) {
        ag_status st = release(ud);
        if (st != AG_OK) {
            latch_teardown(s, st);
            return AG_ERR(ctx, st, "kernel context: releasing context-owned device memory failed (%s); "
                                   "the context stays Closing, finalize again to retry",
                          ag_status_str(st));
        }
    }
    ag_status st = destroy_handles(s);
    if (st != AG_OK) {
        latch_teardown(s, st);
        return AG_ERR(ctx, st, "kernel context: destroying its streams/events failed (%s); "
                               "the context stays Closing, finalize again to retry",
                      ag_status_str(st));
    }
    s->phase = AG_KPHASE_CLOSED;
    return AG_OK;
}
