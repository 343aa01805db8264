/* The device seam's dispatch layer: checks the preconditions stated once in
 * device.h, then forwards to the backend's function table.  Backends can
 * therefore trust their arguments and stay small (seed §4.2 runs on top). */
#include "core/internal.h"
#include "rt/rt_internal.h"

struct ag_device {
    ag_ctx *ctx;
    const ag_device_ops *ops;
    void *impl;
};

static const char *const copy_names[] = {
#define AG_DEV_COPY_NAME_(e, name) name,
    AG_DEV_COPY_LIST(AG_DEV_COPY_NAME_)
#undef AG_DEV_COPY_NAME_
};

static const char *const entry_names[] = {
#define AG_DEV_ENTRY_NAME_(e, name, st) name,
    AG_DEV_ENTRY_LIST(AG_DEV_ENTRY_NAME_)
#undef AG_DEV_ENTRY_NAME_
};

const char *ag_dev_copy_kind_name(ag_dev_copy_kind k)
{
    return (unsigned)k < AG_COPY_COUNT_ ? copy_names[k] : NULL;
}

const char *ag_dev_entry_name(ag_dev_entry e)
{
    return (unsigned)e < AG_DEV_E_COUNT_ ? entry_names[e] : NULL;
}

/* Whether the table is long enough to hold member `m` (tables grow at the
 * end; one built against an older header is shorter). */
#define OPS_HAS(o, m) ((o)->size >= offsetof(ag_device_ops, m) + sizeof((o)->m))

static bool ops_complete(const ag_device_ops *o)
{
    if ((OPS_HAS(o, launch_copy) && !o->launch_copy) || (OPS_HAS(o, stream_query) && !o->stream_query) ||
        (OPS_HAS(o, stream_capturing) && !o->stream_capturing) ||
        (OPS_HAS(o, event_record_eager) && !o->event_record_eager) ||
        (OPS_HAS(o, stream_wait_event_eager) && !o->stream_wait_event_eager))
        return false;
    return o->size >= AG_DEVICE_OPS_SIZE_V1 && o->name && o->destroy && o->mem_alloc && o->mem_free && o->memcpy_async &&
           o->memset_async && o->launch && o->stream_create && o->stream_destroy && o->stream_synchronize &&
           o->event_create && o->event_destroy && o->event_record && o->stream_wait_event && o->event_query &&
           o->event_synchronize && o->capture_begin && o->capture_end && o->graph_launch && o->graph_destroy &&
           o->synchronize && o->state && o->poison && o->stats;
}

ag_status ag_device_create(ag_ctx *ctx, const ag_device_ops *ops, void *impl, ag_device **out)
{
    if (!out)
        return AG_ERR(ctx, AG_EINVAL, "device create: out is NULL");
    *out = NULL;
    if (!ops || !ops_complete(ops))
        return AG_ERR(ctx, AG_EINVAL, "device create: the backend's function table is incomplete");
    ag_device *dev = ag_calloc(ctx, 1, sizeof *dev);
    if (!dev)
        return AG_OOM(ctx);
    dev->ctx = ctx;
    dev->ops = ops;
    dev->impl = impl;
    *out = dev;
    return AG_OK;
}

void ag_device_destroy(ag_device *dev)
{
    if (!dev)
        return;
    dev->ops->destroy(dev->impl);
    ag_free(dev->ctx, dev, sizeof *dev);
}

const char *ag_device_backend(const ag_device *dev)
{
    return dev ? dev->ops->name : "";
}

ag_ctx *ag_device_ctx(const ag_device *dev)
{
    return dev ? dev->ctx : NULL;
}

/* A NULL device has no context to carry a message: that is a programming
 * error caught by the assert in debug builds, AG_EINVAL otherwise. */
#define CHECK_DEV(dev)                 \
    do {                               \
        ag_assert((dev) != NULL);      \
        if (!(dev))                    \
            return AG_EINVAL;          \
    } while (0)
#define CHECK_ARG(dev, cond, entry, what)                                              \
    do {                                                                               \
        if (!(cond))                                                                   \
            return AG_ERR((dev)->ctx, AG_EINVAL, "device %s: %s", (entry), (what));    \
    } while (0)

static bool is_pow2(size_t x)
{
    return x && !(x & (x - 1));
}

ag_status ag_dev_mem_alloc(ag_device *dev, ag_mem_type type, size_t bytes, size_t align, void **out)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, out, "mem_alloc", "out is NULL");
    *out = NULL;
    CHECK_ARG(dev, (unsigned)type < AG_MEM_COUNT_, "mem_alloc", "memory type out of range");
    CHECK_ARG(dev, bytes > 0, "mem_alloc", "zero bytes requested");
    CHECK_ARG(dev, align == 0 || (is_pow2(align) && align <= AG_DEV_MAX_ALIGN), "mem_alloc",
              "alignment is not a power of two up to 65536");
    if (align == 0)
        align = AG_DEV_DEFAULT_ALIGN;
    if (align < AG_DEV_MIN_ALIGN)
        align = AG_DEV_MIN_ALIGN;
    CHECK_ARG(dev, bytes <= SIZE_MAX / 2, "mem_alloc", "size is absurd");
    return dev->ops->mem_alloc(dev->impl, type, bytes, align, out);
}

void ag_dev_mem_free(ag_device *dev, void *ptr)
{
    ag_assert(dev != NULL);
    if (!dev || !ptr)
        return;
    dev->ops->mem_free(dev->impl, ptr);
}

/* A copy or memset of no bytes enqueues nothing, yet a poisoned device
 * refuses it as it refuses every such entry. */
static ag_status nothing_to_do(ag_device *dev, const char *entry)
{
    const char *why = "";
    if (ag_dev_device_state(dev, &why) == AG_DEV_HEALTHY)
        return AG_OK;
    return AG_ERR(dev->ctx, AG_EDEVICE, "device %s: the device is poisoned: %s", entry, why);
}

ag_status ag_dev_memcpy_async(ag_device *dev, ag_dev_copy_kind kind, void *dst, const void *src, size_t n,
                              ag_dev_stream *s)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, (unsigned)kind < AG_COPY_COUNT_, "memcpy_async", "copy kind out of range");
    CHECK_ARG(dev, s, "memcpy_async", "stream is NULL");
    if (n == 0)
        return nothing_to_do(dev, "memcpy_async");
    CHECK_ARG(dev, dst && src, "memcpy_async", "NULL source or destination");
    return dev->ops->memcpy_async(dev->impl, kind, dst, src, n, s);
}

ag_status ag_dev_memset_async(ag_device *dev, void *dst, int value, size_t n, ag_dev_stream *s)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, s, "memset_async", "stream is NULL");
    if (n == 0)
        return nothing_to_do(dev, "memset_async");
    CHECK_ARG(dev, dst, "memset_async", "destination is NULL");
    return dev->ops->memset_async(dev->impl, dst, value, n, s);
}

ag_status ag_dev_launch(ag_device *dev, ag_dev_stream *s, ag_dev_kernel_fn fn, void *arg, const char *name)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, s, "launch", "stream is NULL");
    CHECK_ARG(dev, fn, "launch", "kernel function is NULL");
    return dev->ops->launch(dev->impl, s, fn, arg, name ? name : "kernel");
}

ag_status ag_dev_stream_query(ag_device *dev, ag_dev_stream *s, bool *idle)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, s && idle, "stream_query", "stream or out is NULL");
    if (!OPS_HAS(dev->ops, stream_query))
        return AG_ERR(dev->ctx, AG_EUNSUPPORTED, "device stream_query: backend '%s' predates this entry",
                      dev->ops->name);
    return dev->ops->stream_query(dev->impl, s, idle);
}

ag_status ag_dev_stream_capturing(ag_device *dev, ag_dev_stream *s, bool *capturing)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, s && capturing, "stream_capturing", "stream or out is NULL");
    if (!OPS_HAS(dev->ops, stream_capturing))
        return AG_ERR(dev->ctx, AG_EUNSUPPORTED, "device stream_capturing: backend '%s' predates this entry",
                      dev->ops->name);
    return dev->ops->stream_capturing(dev->impl, s, capturing);
}

ag_status ag_dev_launch_copy(ag_device *dev, ag_dev_stream *s, ag_dev_kernel_fn fn, const void *args, size_t n,
                             const char *name)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, s, "launch_copy", "stream is NULL");
    CHECK_ARG(dev, fn, "launch_copy", "kernel function is NULL");
    CHECK_ARG(dev, args, "launch_copy", "argument block is NULL");
    if (n == 0 || n > AG_DEV_LAUNCH_ARGS_MAX)
        return AG_ERR(dev->ctx, AG_EINVAL, "device launch_copy: argument block of %zu bytes (must be 1 to %u)", n,
                      AG_DEV_LAUNCH_ARGS_MAX);
    if (!OPS_HAS(dev->ops, launch_copy))
        return AG_ERR(dev->ctx, AG_EUNSUPPORTED, "device launch_copy: backend '%s' predates this entry",
                      dev->ops->name);
    return dev->ops->launch_copy(dev->impl, s, fn, args, n, name ? name : "kernel");
}

ag_status ag_dev_stream_create(ag_device *dev, ag_dev_stream **out)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, out, "stream_create", "out is NULL");
    *out = NULL;
    return dev->ops->stream_create(dev->impl, out);
}

void ag_dev_stream_destroy(ag_device *dev, ag_dev_stream *s)
{
    ag_assert(dev != NULL);
    if (!dev || !s)
        return;
    dev->ops->stream_destroy(dev->impl, s);
}

ag_status ag_dev_stream_synchronize(ag_device *dev, ag_dev_stream *s)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, s, "stream_synchronize", "stream is NULL");
    return dev->ops->stream_synchronize(dev->impl, s);
}

ag_status ag_dev_event_create(ag_device *dev, ag_dev_event **out)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, out, "event_create", "out is NULL");
    *out = NULL;
    return dev->ops->event_create(dev->impl, out);
}

void ag_dev_event_destroy(ag_device *dev, ag_dev_event *e)
{
    ag_assert(dev != NULL);
    if (!dev || !e)
        return;
    dev->ops->event_destroy(dev->impl, e);
}

ag_status ag_dev_event_record(ag_device *dev, ag_dev_event *e, ag_dev_stream *s)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, e && s, "event_record", "event or stream is NULL");
    return dev->ops->event_record(dev->impl, e, s);
}

ag_status ag_dev_stream_wait_event(ag_device *dev, ag_dev_stream *s, ag_dev_event *e)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, e && s, "stream_wait_event", "event or stream is NULL");
    return dev->ops->stream_wait_event(dev->impl, s, e);
}

ag_status ag_dev_event_record_eager(ag_device *dev, ag_dev_event *e, ag_dev_stream *s, bool *recorded)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, e && s && recorded, "event_record_eager", "event, stream or out is NULL");
    if (!OPS_HAS(dev->ops, event_record_eager)) {
        *recorded = true;
        return dev->ops->event_record(dev->impl, e, s);
    }
    return dev->ops->event_record_eager(dev->impl, e, s, recorded);
}

ag_status ag_dev_stream_wait_event_eager(ag_device *dev, ag_dev_stream *s, ag_dev_event *e, bool *enqueued)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, e && s && enqueued, "stream_wait_event_eager", "event, stream or out is NULL");
    if (!OPS_HAS(dev->ops, stream_wait_event_eager)) {
        *enqueued = true;
        return dev->ops->stream_wait_event(dev->impl, s, e);
    }
    return dev->ops->stream_wait_event_eager(dev->impl, s, e, enqueued);
}

ag_status ag_dev_event_query(ag_device *dev, ag_dev_event *e, bool *done)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, e && done, "event_query", "event or out is NULL");
    return dev->ops->event_query(dev->impl, e, done);
}

ag_status ag_dev_event_synchronize(ag_device *dev, ag_dev_event *e)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, e, "event_synchronize", "event is NULL");
    return dev->ops->event_synchronize(dev->impl, e);
}

ag_status ag_dev_capture_begin(ag_device *dev, ag_dev_stream *s)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, s, "capture_begin", "stream is NULL");
    return dev->ops->capture_begin(dev->impl, s);
}

ag_status ag_dev_capture_end(ag_device *dev, ag_dev_stream *s, ag_dev_graph **out)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, s && out, "capture_end", "stream or out is NULL");
    *out = NULL;
    return dev->ops->capture_end(dev->impl, s, out);
}

ag_status ag_dev_graph_launch(ag_device *dev, ag_dev_graph *g, ag_dev_stream *s)
{
    CHECK_DEV(dev);
    CHECK_ARG(dev, g && s, "graph_launch", "graph or stream is NULL");
    return dev->ops->graph_launch(dev->impl, g, s);
}

void ag_dev_graph_destroy(ag_device *dev, ag_dev_graph *g)
{
    ag_assert(dev != NULL);
    if (!dev || !g)
        return;
    dev->ops->graph_destroy(dev->impl, g);
}

ag_status ag_dev_synchronize(ag_device *dev)
{
    CHECK_DEV(dev);
    return dev->ops->synchronize(dev->impl);
}

ag_dev_state ag_dev_device_state(ag_device *dev, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    ag_assert(dev != NULL);
    if (!dev) {
        *why = "";
        return AG_DEV_POISONED;
    }
    return dev->ops->state(dev->impl, why);
}

void ag_dev_poison(ag_device *dev, const char *why)
{
    ag_assert(dev != NULL);
    if (!dev)
        return;
    dev->ops->poison(dev->impl, why ? why : "poisoned by the caller");
}

void ag_dev_stats_get(ag_device *dev, ag_dev_stats *out)
{
    ag_assert(dev != NULL && out != NULL);
    if (!dev || !out || out->size == 0)
        return;
    ag_dev_stats full;
    memset(&full, 0, sizeof full);
    full.size = sizeof full;
    dev->ops->stats(dev->impl, &full);
    size_t n = out->size < sizeof full ? out->size : sizeof full;
    size_t keep = out->size;
    memcpy(out, &full, n);
    out->size = keep;
}
