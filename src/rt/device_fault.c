/* Fault-injecting device: forwards every entry to an inner device and fails
 * the Nth counted call of the selected entries, at once (with or without
 * poisoning) or deferred onto the stream as an asynchronous device error.
 * Fault sweeps run the runtime over N = 1, 2, ... through this wrapper. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "core/internal.h"
#include "rt/rt_internal.h"

typedef struct fault_dev {
    ag_ctx *ctx;
    ag_device *inner;
    ag_dev_fault *f;
    pthread_mutex_t mu; /* guards f's counters: kernels may call entries from workers */
} fault_dev;

static const ag_status entry_status[] = {
#define AG_DEV_ENTRY_ST_(e, name, st) st,
    AG_DEV_ENTRY_LIST(AG_DEV_ENTRY_ST_)
#undef AG_DEV_ENTRY_ST_
};

/* Static kernel names, so a deferred fault names the call it stands for. */
static const char *const deferred_names[] = {
#define AG_DEV_ENTRY_DEFER_(e, name, st) "injected fault in " name,
    AG_DEV_ENTRY_LIST(AG_DEV_ENTRY_DEFER_)
#undef AG_DEV_ENTRY_DEFER_
};

void ag_dev_fault_init(ag_dev_fault *f, uint32_t mask, uint64_t fail_at, int repeat, ag_dev_fault_mode mode)
{
    memset(f, 0, sizeof *f);
    f->mask = mask;
    f->fail_at = fail_at;
    f->repeat = repeat;
    f->mode = mode;
}

static ag_status failing_kernel(void *arg)
{
    (void)arg;
    return AG_EDEVICE;
}

/* Counts a call of entry e; returns true when the call must not go on, with
 * *st set.  s is the stream the call enqueues on (NULL for other entries);
 * *deferred: a failing kernel went ahead of the call on s. */
static bool inject(fault_dev *w, ag_dev_entry e, ag_dev_stream *s, ag_status *st, bool *deferred)
{
    ag_dev_fault *f = w->f;
    pthread_mutex_lock(&w->mu);
    bool fail = false;
    uint64_t n = 0;
    if (f->mask & AG_DEV_ENTRY_BIT(e)) {
        n = ++f->calls;
        fail = f->fail_at && (n == f->fail_at || (f->repeat && n > f->fail_at));
        if (fail)
            f->nfail++;
    }
    ag_dev_fault_mode mode = f->mode;
    pthread_mutex_unlock(&w->mu);
    if (!fail)
        return false;
    ag_testalloc_breakpoint();
    if (mode == AG_FAULT_DEFERRED && s) {
        /* The failing kernel goes first and the real call still follows, so
         * the ordering the call promised (an event record or wait) is kept:
         * everything behind the fault is dropped, nothing races past it. */
        *st = ag_dev_launch(w->inner, s, failing_kernel, NULL, deferred_names[e]);
        *deferred = *st == AG_OK;
        return *st != AG_OK;
    }
    if (mode == AG_FAULT_POISON)
        ag_dev_poison(w->inner, deferred_names[e]);
    *st = AG_ERR(w->ctx, entry_status[e], "device %s: injected fault (counted call %llu)", ag_dev_entry_name(e),
                 (unsigned long long)n);
    return true;
}

/* A call that enqueues nothing: counts it, returns the injected failure. */
#define INJECT(w, e)                                          \
    do {                                                      \
        ag_status inj_st_;                                    \
        bool inj_deferred_ = false;                           \
        if (inject((w), (e), NULL, &inj_st_, &inj_deferred_)) \
            return inj_st_;                                   \
    } while (0)

/* A call that enqueues on stream s: the same, and deferred_ says whether a
 * failing kernel went ahead of it (for settle). */
#define INJECT_ON(w, e, s)                               \
    bool deferred_ = false;                              \
    do {                                                 \
        ag_status inj_st_;                               \
        if (inject((w), (e), (s), &inj_st_, &deferred_)) \
            return inj_st_;                              \
    } while (0)

/* The call behind a deferred fault: should the failing kernel already have
 * run and poisoned the device, the device's refusal (AG_EDEVICE) is that
 * failure, which the next synchronisation reports, not this call's
 * (everything behind the fault is dropped either way).  A call whose own
 * arguments are wrong is refused alike in either state (AG_EINVAL), and
 * keeps its refusal: the fault fires all the same at that point of the
 * stream. */
static ag_status settle(fault_dev *w, bool deferred, ag_status st)
{
    if (st == AG_EDEVICE && deferred && ag_dev_device_state(w->inner, NULL) == AG_DEV_POISONED) {
        ag_ctx_clear_error(w->ctx);
        return AG_OK;
    }
    return st;
}

static void fault_destroy(void *impl)
{
    fault_dev *w = impl;
    pthread_mutex_destroy(&w->mu);
    ag_free(w->ctx, w, sizeof *w);
}

static ag_status fault_mem_alloc(void *impl, ag_mem_type type, size_t bytes, size_t align, void **out)
{
    fault_dev *w = impl;
    INJECT(w, AG_DEV_E_MEM_ALLOC);
    return ag_dev_mem_alloc(w->inner, type, bytes, align, out);
}

static void fault_mem_free(void *impl, void *ptr)
{
    fault_dev *w = impl;
    ag_dev_mem_free(w->inner, ptr);
}

static ag_status fault_memcpy_async(void *impl, ag_dev_copy_kind kind, void *dst, const void *src, size_t n,
                                    ag_dev_stream *s)
{
    fault_dev *w = impl;
    INJECT_ON(w, AG_DEV_E_MEMCPY, s);
    return settle(w, deferred_, ag_dev_memcpy_async(w->inner, kind, dst, src, n, s));
}

static ag_status fault_memset_async(void *impl, void *dst, int value, size_t n, ag_dev_stream *s)
{
    fault_dev *w = impl;
    INJECT_ON(w, AG_DEV_E_MEMSET, s);
    return settle(w, deferred_, ag_dev_memset_async(w->inner, dst, value, n, s));
}

static ag_status fault_launch(void *impl, ag_dev_stream *s, ag_dev_kernel_fn fn, void *arg, const char *name)
{
    fault_dev *w = impl;
    INJECT_ON(w, AG_DEV_E_LAUNCH, s);
    return settle(w, deferred_, ag_dev_launch(w->inner, s, fn, arg, name));
}

/* Counted as a launch: to a fault plan, both forms are one kind of call. */
static ag_status fault_launch_copy(void *impl, ag_dev_stream *s, ag_dev_kernel_fn fn, const void *args, size_t n,
                                   const char *name)
{
    fault_dev *w = impl;
    INJECT_ON(w, AG_DEV_E_LAUNCH, s);
    return settle(w, deferred_, ag_dev_launch_copy(w->inner, s, fn, args, n, name));
}

static ag_status fault_stream_create(void *impl, ag_dev_stream **out)
{
    fault_dev *w = impl;
    INJECT(w, AG_DEV_E_STREAM_CREATE);
    return ag_dev_stream_create(w->inner, out);
}

static void fault_stream_destroy(void *impl, ag_dev_stream *s)
{
    fault_dev *w = impl;
    ag_dev_stream_destroy(w->inner, s);
}

static ag_status fault_stream_synchronize(void *impl, ag_dev_stream *s)
{
    fault_dev *w = impl;
    INJECT(w, AG_DEV_E_STREAM_SYNC);
    return ag_dev_stream_synchronize(w->inner, s);
}

static ag_status fault_event_create(void *impl, ag_dev_event **out)
{
    fault_dev *w = impl;
    INJECT(w, AG_DEV_E_EVENT_CREATE);
    return ag_dev_event_create(w->inner, out);
}

static void fault_event_destroy(void *impl, ag_dev_event *e)
{
    fault_dev *w = impl;
    ag_dev_event_destroy(w->inner, e);
}

static ag_status fault_event_record(void *impl, ag_dev_event *e, ag_dev_stream *s)
{
    fault_dev *w = impl;
    INJECT_ON(w, AG_DEV_E_EVENT_RECORD, s);
    return settle(w, deferred_, ag_dev_event_record(w->inner, e, s));
}

static ag_status fault_stream_wait_event(void *impl, ag_dev_stream *s, ag_dev_event *e)
{
    fault_dev *w = impl;
    INJECT_ON(w, AG_DEV_E_STREAM_WAIT, s);
    return settle(w, deferred_, ag_dev_stream_wait_event(w->inner, s, e));
}

static ag_status fault_event_record_eager(void *impl, ag_dev_event *e, ag_dev_stream *s, bool *recorded)
{
    fault_dev *w = impl;
    INJECT_ON(w, AG_DEV_E_EVENT_RECORD, s);
    *recorded = true; /* (behind a deferred fault, a refusal read as success) */
    return settle(w, deferred_, ag_dev_event_record_eager(w->inner, e, s, recorded));
}

static ag_status fault_stream_wait_event_eager(void *impl, ag_dev_stream *s, ag_dev_event *e, bool *enqueued)
{
    fault_dev *w = impl;
    INJECT_ON(w, AG_DEV_E_STREAM_WAIT, s);
    *enqueued = true;
    return settle(w, deferred_, ag_dev_stream_wait_event_eager(w->inner, s, e, enqueued));
}

static ag_status fault_event_query(void *impl, ag_dev_event *e, bool *done)
{
    fault_dev *w = impl;
    INJECT(w, AG_DEV_E_EVENT_QUERY);
    return ag_dev_event_query(w->inner, e, done);
}

static ag_status fault_stream_query(void *impl, ag_dev_stream *s, bool *idle)
{
    fault_dev *w = impl;
    INJECT(w, AG_DEV_E_STREAM_QUERY);
    return ag_dev_stream_query(w->inner, s, idle);
}

static ag_status fault_stream_capturing(void *impl, ag_dev_stream *s, bool *capturing)
{
    fault_dev *w = impl;
    INJECT(w, AG_DEV_E_STREAM_CAPTURING);
    return ag_dev_stream_capturing(w->inner, s, capturing);
}

static ag_status fault_event_synchronize(void *impl, ag_dev_event *e)
{
    fault_dev *w = impl;
    INJECT(w, AG_DEV_E_EVENT_SYNC);
    return ag_dev_event_synchronize(w->inner, e);
}

static ag_status fault_capture_begin(void *impl, ag_dev_stream *s)
{
    fault_dev *w = impl;
    INJECT(w, AG_DEV_E_CAPTURE_BEGIN);
    return ag_dev_capture_begin(w->inner, s);
}

static ag_status fault_capture_end(void *impl, ag_dev_stream *s, ag_dev_graph **out)
{
    fault_dev *w = impl;
    INJECT(w, AG_DEV_E_CAPTURE_END);
    return ag_dev_capture_end(w->inner, s, out);
}

static ag_status fault_graph_launch(void *impl, ag_dev_graph *g, ag_dev_stream *s)
{
    fault_dev *w = impl;
    INJECT_ON(w, AG_DEV_E_GRAPH_LAUNCH, s);
    return settle(w, deferred_, ag_dev_graph_launch(w->inner, g, s));
}

static void fault_graph_destroy(void *impl, ag_dev_graph *g)
{
    fault_dev *w = impl;
    ag_dev_graph_destroy(w->inner, g);
}

static ag_status fault_synchronize(void *impl)
{
    fault_dev *w = impl;
    INJECT(w, AG_DEV_E_SYNC);
    return ag_dev_synchronize(w->inner);
}

static ag_dev_state fault_state(void *impl, const char **why)
{
    fault_dev *w = impl;
    return ag_dev_device_state(w->inner, why);
}

static void fault_poison(void *impl, const char *why)
{
    fault_dev *w = impl;
    ag_dev_poison(w->inner, why);
}

static void fault_stats(void *impl, ag_dev_stats *out)
{
    fault_dev *w = impl;
    ag_dev_stats_get(w->inner, out);
}

static const ag_device_ops fault_ops = {
    .size = sizeof(ag_device_ops),
    .name = "fault",
    .destroy = fault_destroy,
    .mem_alloc = fault_mem_alloc,
    .mem_free = fault_mem_free,
    .memcpy_async = fault_memcpy_async,
    .memset_async = fault_memset_async,
    .launch = fault_launch,
    .stream_create = fault_stream_create,
    .stream_destroy = fault_stream_destroy,
    .stream_synchronize = fault_stream_synchronize,
    .event_create = fault_event_create,
    .event_destroy = fault_event_destroy,
    .event_record = fault_event_record,
    .stream_wait_event = fault_stream_wait_event,
    .event_query = fault_event_query,
    .stream_query = fault_stream_query,
    .stream_capturing = fault_stream_capturing,
    .event_record_eager = fault_event_record_eager,
    .stream_wait_event_eager = fault_stream_wait_event_eager,
    .event_synchronize = fault_event_synchronize,
    .capture_begin = fault_capture_begin,
    .capture_end = fault_capture_end,
    .graph_launch = fault_graph_launch,
    .graph_destroy = fault_graph_destroy,
    .synchronize = fault_synchronize,
    .state = fault_state,
    .poison = fault_poison,
    .stats = fault_stats,
    .launch_copy = fault_launch_copy,
};

ag_status ag_device_fault_wrap(ag_ctx *ctx, ag_device *inner, ag_dev_fault *f, ag_device **out)
{
    if (!out)
        return AG_ERR(ctx, AG_EINVAL, "device fault_wrap: out is NULL");
    *out = NULL;
    if (!inner || !f)
        return AG_ERR(ctx, AG_EINVAL, "device fault_wrap: inner device or fault plan is NULL");
    fault_dev *w = ag_calloc(ctx, 1, sizeof *w);
    if (!w)
        return AG_OOM(ctx);
    w->ctx = ctx;
    w->inner = inner;
    w->f = f;
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        ag_free(ctx, w, sizeof *w);
        return AG_ERR(ctx, AG_EDEVICE, "device fault_wrap: cannot create a mutex");
    }
    ag_status st = ag_device_create(ctx, &fault_ops, w, out);
    if (st != AG_OK) {
        pthread_mutex_destroy(&w->mu);
        ag_free(ctx, w, sizeof *w);
    }
    return st;
}
