/* The timing model of an allocation-trace replay: a device that forwards
 * every entry to an inner device and keeps a virtual clock, so that work
 * takes time as on an accelerator.  The host advances one tick per trace
 * operation; a modelled kernel occupies its stream for kernel_ticks; an
 * event is complete once the host clock has reached its stream's finish
 * time at the record.  Both allocator modes replay under the same model. */
#include "rt/alloc_internal.h"

/* Pointer -> virtual time, open addressing with backward-shift deletion. */
typedef struct tmap {
    const void **keys;
    uint64_t *vals;
    uint32_t cap, len; /* cap: power of two or 0 */
} tmap;

struct ag_timed {
    ag_ctx *ctx;
    ag_device *inner;
    uint64_t now;   /* host clock */
    uint64_t ticks; /* duration of one modelled kernel */
    uint64_t end;   /* latest finish time of any stream */
    tmap streams;   /* stream -> finish time of its last enqueued work */
    tmap events;    /* event -> time its recorded point completes */
    uint64_t calls; /* entries called on this device (the allocator's device calls) */
    uint32_t capturing; /* streams in capture (begun and not ended through this wrapper) */
};

/* Fibonacci hashing: the top bits of the product, which every bit of the
 * pointer reaches (device objects sit at a fixed stride in memory). */
static uint32_t slot_of(const void *p, uint32_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)p * UINT64_C(0x9E3779B97F4A7C15);
    return (uint32_t)(h >> (64u - (uint32_t)__builtin_ctz(cap)));
}

static uint64_t *tmap_find(tmap *m, const void *k)
{
    if (!m->cap)
        return NULL;
    for (uint32_t i = slot_of(k, m->cap);; i = (i + 1u) & (m->cap - 1u)) {
        if (m->keys[i] == k)
            return &m->vals[i];
        if (!m->keys[i])
            return NULL;
    }
}

static ag_status tmap_put(ag_ctx *ctx, tmap *m, const void *k, uint64_t v)
{
    uint64_t *p = tmap_find(m, k);
    if (p) {
        *p = v;
        return AG_OK;
    }
    if ((m->len + 1u) * 2u > m->cap) {
        uint32_t nc = m->cap ? m->cap * 2u : 64u;
        const void **nk = ag_calloc(ctx, nc, sizeof *nk);
        uint64_t *nv = ag_calloc(ctx, nc, sizeof *nv);
        if (!nk || !nv) {
            ag_free(ctx, (void *)nk, nc * sizeof *nk);
            ag_free(ctx, nv, nc * sizeof *nv);
            return AG_OOM(ctx);
        }
        for (uint32_t i = 0; i < m->cap; i++) {
            if (!m->keys[i])
                continue;
            uint32_t j = slot_of(m->keys[i], nc);
            while (nk[j])
                j = (j + 1u) & (nc - 1u);
            nk[j] = m->keys[i];
            nv[j] = m->vals[i];
        }
        ag_free(ctx, (void *)m->keys, m->cap * sizeof *m->keys);
        ag_free(ctx, m->vals, m->cap * sizeof *m->vals);
        m->keys = nk;
        m->vals = nv;
        m->cap = nc;
    }
    uint32_t i = slot_of(k, m->cap);
    while (m->keys[i])
        i = (i + 1u) & (m->cap - 1u);
    m->keys[i] = k;
    m->vals[i] = v;
    m->len++;
    return AG_OK;
}

static void tmap_del(tmap *m, const void *k)
{
    uint64_t *p = tmap_find(m, k);
    if (!p)
        return;
    uint32_t i = (uint32_t)(p - m->vals), mask = m->cap - 1u;
    m->keys[i] = NULL;
    m->len--;
    /* shift back the entries of the probe run that follows */
    for (uint32_t j = (i + 1u) & mask; m->keys[j]; j = (j + 1u) & mask) {
        uint32_t home = slot_of(m->keys[j], m->cap);
        bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            m->keys[j] = NULL;
            i = j;
        }
    }
}

static void tmap_free(ag_ctx *ctx, tmap *m)
{
    ag_free(ctx, (void *)m->keys, m->cap * sizeof *m->keys);
    ag_free(ctx, m->vals, m->cap * sizeof *m->vals);
    memset(m, 0, sizeof *m);
}

static uint64_t stream_end(ag_timed *t, const ag_dev_stream *s)
{
    uint64_t *p = tmap_find(&t->streams, s);
    return p ? *p : 0;
}

static void stream_set(ag_timed *t, const ag_dev_stream *s, uint64_t v)
{
    uint64_t *p = tmap_find(&t->streams, s);
    if (p)
        *p = v;
    if (v > t->end)
        t->end = v;
}

/* ---- the backend ---- */

static void td_destroy(void *impl)
{
    ag_timed *t = impl;
    tmap_free(t->ctx, &t->streams);
    tmap_free(t->ctx, &t->events);
    ag_free(t->ctx, t, sizeof *t);
}

static ag_status td_mem_alloc(void *impl, ag_mem_type type, size_t bytes, size_t align, void **out)
{
    ((ag_timed *)impl)->calls++;
    return ag_dev_mem_alloc(((ag_timed *)impl)->inner, type, bytes, align, out);
}

static void td_mem_free(void *impl, void *ptr)
{
    ((ag_timed *)impl)->calls++;
    ag_dev_mem_free(((ag_timed *)impl)->inner, ptr);
}

static ag_status td_memcpy_async(void *impl, ag_dev_copy_kind kind, void *dst, const void *src, size_t n,
                                 ag_dev_stream *s)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    AG_TRY(ag_dev_memcpy_async(t->inner, kind, dst, src, n, s));
    ag_timed_kernel(t, s);
    return AG_OK;
}

static ag_status td_memset_async(void *impl, void *dst, int value, size_t n, ag_dev_stream *s)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    AG_TRY(ag_dev_memset_async(t->inner, dst, value, n, s));
    ag_timed_kernel(t, s);
    return AG_OK;
}

static ag_status td_launch(void *impl, ag_dev_stream *s, ag_dev_kernel_fn fn, void *arg, const char *name)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    AG_TRY(ag_dev_launch(t->inner, s, fn, arg, name));
    ag_timed_kernel(t, s);
    return AG_OK;
}

static ag_status td_launch_copy(void *impl, ag_dev_stream *s, ag_dev_kernel_fn fn, const void *args, size_t n,
                                const char *name)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    AG_TRY(ag_dev_launch_copy(t->inner, s, fn, args, n, name));
    ag_timed_kernel(t, s);
    return AG_OK;
}

static ag_status td_stream_create(void *impl, ag_dev_stream **out)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    AG_TRY(ag_dev_stream_create(t->inner, out));
    if (tmap_put(t->ctx, &t->streams, *out, t->now) != AG_OK) {
        ag_dev_stream_destroy(t->inner, *out);
        *out = NULL;
        return AG_OOM(t->ctx);
    }
    return AG_OK;
}

static void td_stream_destroy(void *impl, ag_dev_stream *s)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    tmap_del(&t->streams, s);
    ag_dev_stream_destroy(t->inner, s);
}

static ag_status td_stream_synchronize(void *impl, ag_dev_stream *s)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    AG_TRY(ag_dev_stream_synchronize(t->inner, s));
    uint64_t e = stream_end(t, s);
    if (e > t->now)
        t->now = e;
    return AG_OK;
}

static ag_status td_event_create(void *impl, ag_dev_event **out)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    AG_TRY(ag_dev_event_create(t->inner, out));
    if (tmap_put(t->ctx, &t->events, *out, 0) != AG_OK) {
        ag_dev_event_destroy(t->inner, *out);
        *out = NULL;
        return AG_OOM(t->ctx);
    }
    return AG_OK;
}

static void td_event_destroy(void *impl, ag_dev_event *e)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    tmap_del(&t->events, e);
    ag_dev_event_destroy(t->inner, e);
}

/* The model of a record made: the event completes with s's work so far. */
static void model_record(ag_timed *t, ag_dev_event *e, ag_dev_stream *s)
{
    uint64_t *p = tmap_find(&t->events, e);
    if (p)
        *p = stream_end(t, s);
}

/* The model of a wait enqueued: s's later work starts after e's point. */
static void model_wait(ag_timed *t, ag_dev_stream *s, ag_dev_event *e)
{
    uint64_t *p = tmap_find(&t->events, e);
    if (p && *p > stream_end(t, s))
        stream_set(t, s, *p);
}

static ag_status td_event_record(void *impl, ag_dev_event *e, ag_dev_stream *s)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    AG_TRY(ag_dev_event_record(t->inner, e, s));
    model_record(t, e, s);
    return AG_OK;
}

static ag_status td_stream_wait_event(void *impl, ag_dev_stream *s, ag_dev_event *e)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    AG_TRY(ag_dev_stream_wait_event(t->inner, s, e));
    model_wait(t, s, e);
    return AG_OK;
}

/* The eager forms.  While no stream captures through this wrapper, the
 * plain ones (the inner device refuses what the eager ones refuse);
 * else the inner device's eager ones, the model moved only if they act. */
static __attribute__((noinline)) ag_status td_record_capturing(ag_timed *t, ag_dev_event *e, ag_dev_stream *s,
                                                               bool *recorded)
{
    t->calls++;
    AG_TRY(ag_dev_event_record_eager(t->inner, e, s, recorded));
    if (*recorded)
        model_record(t, e, s);
    return AG_OK;
}

static ag_status td_event_record_eager(void *impl, ag_dev_event *e, ag_dev_stream *s, bool *recorded)
{
    ag_timed *t = impl;
    if (t->capturing)
        return td_record_capturing(t, e, s, recorded);
    *recorded = true;
    return td_event_record(impl, e, s);
}

static __attribute__((noinline)) ag_status td_wait_capturing(ag_timed *t, ag_dev_stream *s, ag_dev_event *e,
                                                             bool *enqueued)
{
    t->calls++;
    AG_TRY(ag_dev_stream_wait_event_eager(t->inner, s, e, enqueued));
    if (*enqueued)
        model_wait(t, s, e);
    return AG_OK;
}

static ag_status td_stream_wait_event_eager(void *impl, ag_dev_stream *s, ag_dev_event *e, bool *enqueued)
{
    ag_timed *t = impl;
    if (t->capturing)
        return td_wait_capturing(t, s, e, enqueued);
    *enqueued = true;
    return td_stream_wait_event(impl, s, e);
}

/* Busy in the model: the inner device still refuses what the seam says
 * it refuses (a poisoned device; a query of a capturing stream). */
static ag_status model_busy(ag_timed *t, ag_dev_stream *s, ag_dev_event *e)
{
    if (!t->capturing && ag_dev_device_state(t->inner, NULL) == AG_DEV_HEALTHY)
        return AG_OK;
    bool ignored;
    return s ? ag_dev_stream_query(t->inner, s, &ignored) : ag_dev_event_query(t->inner, e, &ignored);
}

static ag_status td_stream_query(void *impl, ag_dev_stream *s, bool *idle)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    if (stream_end(t, s) > t->now) {
        AG_TRY(model_busy(t, s, NULL));
        *idle = false;
        return AG_OK;
    }
    /* idle in the model: the inner device agrees, or is about to (its
     * work is instant): wait for it only then */
    AG_TRY(ag_dev_stream_query(t->inner, s, idle));
    if (!*idle)
        AG_TRY(ag_dev_stream_synchronize(t->inner, s));
    *idle = true;
    return AG_OK;
}

/* No stream captures through this wrapper and the device is healthy: the
 * answer without the inner device's lock. */
static ag_status td_stream_capturing(void *impl, ag_dev_stream *s, bool *capturing)
{
    ag_timed *t = impl;
    t->calls++;
    if (!t->capturing && ag_dev_device_state(t->inner, NULL) == AG_DEV_HEALTHY) {
        *capturing = false;
        return AG_OK;
    }
    return ag_dev_stream_capturing(t->inner, s, capturing);
}

static ag_status td_event_query(void *impl, ag_dev_event *e, bool *done)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    uint64_t *p = tmap_find(&t->events, e);
    if (p && *p > t->now) {
        AG_TRY(model_busy(t, NULL, e));
        *done = false;
        return AG_OK;
    }
    /* Complete in the model: the inner device is never behind the model
     * for long (its work is instant), so wait for it to agree, if it does
     * not already. */
    AG_TRY(ag_dev_event_query(t->inner, e, done));
    if (!*done)
        AG_TRY(ag_dev_event_synchronize(t->inner, e));
    *done = true;
    return AG_OK;
}

static ag_status td_event_synchronize(void *impl, ag_dev_event *e)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    AG_TRY(ag_dev_event_synchronize(t->inner, e));
    uint64_t *p = tmap_find(&t->events, e);
    if (p && *p > t->now)
        t->now = *p;
    return AG_OK;
}

static ag_status td_capture_begin(void *impl, ag_dev_stream *s)
{
    ag_timed *t = impl;
    t->calls++;
    AG_TRY(ag_dev_capture_begin(t->inner, s));
    t->capturing++;
    return AG_OK;
}

static ag_status td_capture_end(void *impl, ag_dev_stream *s, ag_dev_graph **out)
{
    ag_timed *t = impl;
    t->calls++;
    AG_TRY(ag_dev_capture_end(t->inner, s, out));
    t->capturing--;
    return AG_OK;
}

static ag_status td_graph_launch(void *impl, ag_dev_graph *g, ag_dev_stream *s)
{
    ((ag_timed *)impl)->calls++;
    return ag_dev_graph_launch(((ag_timed *)impl)->inner, g, s);
}

static void td_graph_destroy(void *impl, ag_dev_graph *g)
{
    ((ag_timed *)impl)->calls++;
    ag_dev_graph_destroy(((ag_timed *)impl)->inner, g);
}

static ag_status td_synchronize(void *impl)
{
    ((ag_timed *)impl)->calls++;
    ag_timed *t = impl;
    AG_TRY(ag_dev_synchronize(t->inner));
    if (t->end > t->now)
        t->now = t->end;
    return AG_OK;
}

static ag_dev_state td_state(void *impl, const char **why)
{
    ((ag_timed *)impl)->calls++;
    return ag_dev_device_state(((ag_timed *)impl)->inner, why);
}

static void td_poison(void *impl, const char *why)
{
    ((ag_timed *)impl)->calls++;
    ag_dev_poison(((ag_timed *)impl)->inner, why);
}

static void td_stats(void *impl, ag_dev_stats *out)
{
    ((ag_timed *)impl)->calls++;
    ag_dev_stats_get(((ag_timed *)impl)->inner, out);
}

static const ag_device_ops timed_ops = {
    .size = sizeof(ag_device_ops),
    .name = "timed",
    .destroy = td_destroy,
    .mem_alloc = td_mem_alloc,
    .mem_free = td_mem_free,
    .memcpy_async = td_memcpy_async,
    .memset_async = td_memset_async,
    .launch = td_launch,
    .stream_create = td_stream_create,
    .stream_destroy = td_stream_destroy,
    .stream_synchronize = td_stream_synchronize,
    .event_create = td_event_create,
    .event_destroy = td_event_destroy,
    .event_record = td_event_record,
    .stream_wait_event = td_stream_wait_event,
    .event_query = td_event_query,
    .stream_query = td_stream_query,
    .stream_capturing = td_stream_capturing,
    .event_record_eager = td_event_record_eager,
    .stream_wait_event_eager = td_stream_wait_event_eager,
    .event_synchronize = td_event_synchronize,
    .capture_begin = td_capture_begin,
    .capture_end = td_capture_end,
    .graph_launch = td_graph_launch,
    .graph_destroy = td_graph_destroy,
    .synchronize = td_synchronize,
    .state = td_state,
    .poison = td_poison,
    .stats = td_stats,
    .launch_copy = td_launch_copy,
};

ag_status ag_timed_wrap(ag_device *inner, uint64_t kernel_ticks, ag_timed **tw, ag_device **out)
{
    ag_ctx *ctx = ag_device_ctx(inner);
    ag_timed *t = ag_calloc(ctx, 1, sizeof *t);
    if (!t)
        return AG_OOM(ctx);
    t->ctx = ctx;
    t->inner = inner;
    t->ticks = kernel_ticks;
    ag_status st = ag_device_create(ctx, &timed_ops, t, out);
    if (st != AG_OK) {
        ag_free(ctx, t, sizeof *t);
        return st;
    }
    *tw = t;
    return AG_OK;
}

void ag_timed_tick(ag_timed *t)
{
    t->now++;
}

void ag_timed_kernel(ag_timed *t, const ag_dev_stream *s)
{
    uint64_t e = stream_end(t, s);
    stream_set(t, s, (e > t->now ? e : t->now) + t->ticks);
}

uint64_t ag_timed_now(const ag_timed *t)
{
    return t->now;
}

uint64_t ag_timed_calls(const ag_timed *t)
{
    return t->calls;
}

uint64_t ag_timed_makespan(const ag_timed *t)
{
    return t->end > t->now ? t->end : t->now;
}
