/* The simulated device: the default backend of the device seam.  Device
 * memory is host memory (one hook allocation per device allocation, capacity
 * per memory type), a stream is a worker thread draining a FIFO ring, an event
 * names a point (stream, sequence number) in one stream's queue, and capture
 * records a stream's work into a replayable graph.  One lock guards it all;
 * workers run copies and kernels outside it, so streams really overlap.
 * Argument blocks copied by launch_copy are reference-counted by the queued
 * and captured operations naming them; workers never free (they never touch
 * the ctx): the last one done hands a block to a retired list that the next
 * entry on a host thread frees. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "core/internal.h"
#include "rt/rt_internal.h"

#define STREAM_MAGIC 0x5354524du /* "STRM" */
#define EVENT_MAGIC 0x4556454eu  /* "EVEN" */
#define GRAPH_MAGIC 0x47524150u  /* "GRAP" */
#define RING_MIN 16u

typedef enum sim_op_kind {
    OP_COPY,
    OP_MEMSET,
    OP_LAUNCH,
    OP_WAIT,       /* in a ring: wait until stream wait_stream has completed wait_seq */
    OP_RECORD_EV,  /* in a graph only: record `event` on the replay stream */
    OP_WAIT_EV     /* in a graph only: make the replay stream wait for `event` */
} sim_op_kind;

/* An argument block copied by launch_copy: one hook block holding this
 * header and the bytes, aligned to AG_DEV_LAUNCH_ARGS_ALIGN. */
typedef struct sim_args {
    struct sim_args *next; /* in the retired list */
    size_t raw_size;
    size_t n;
    uint32_t refs; /* operations (queued, captured, in graphs) naming it */
    unsigned char *data;
} sim_args;

typedef struct sim_op {
    sim_op_kind kind;
    ag_dev_copy_kind copy;
    int value;
    void *dst;
    const void *src;
    size_t n;
    ag_dev_kernel_fn fn;
    void *arg;
    const char *name;
    uint32_t wait_stream;
    uint64_t wait_seq;
    ag_dev_event *event;
    sim_args *args; /* OP_LAUNCH by launch_copy: the kernel gets args->data; holds a reference */
    /* OP_COPY: the host side lay inside a HOST allocation when enqueued,
     * which must still hold it when the copy runs */
    bool held_dst, held_src;
    uint64_t stamp;  /* queued: the device's count of enqueued operations at its push */
    uint64_t origin; /* the stamp it counts as for a synchronise: its own, or, pushed
                      * by a kernel, the origin of the operation running that kernel */
} sim_op;

/* One device allocation.  Records are separate hook blocks so a pointer to
 * one stays valid while a worker has it pinned (busy > 0). */
typedef struct sim_alloc {
    char *ptr;
    size_t bytes;
    char *raw;
    size_t raw_size;
    ag_mem_type type;
    uint32_t busy; /* copies running on it right now */
} sim_alloc;

typedef struct sim sim;

struct ag_dev_stream {
    uint32_t magic;
    uint32_t id;
    sim *dev;
    ag_dev_stream *prev, *next;
    pthread_t thread;
    pthread_cond_t cv_work;
    sim_op *ring;
    uint32_t cap, head, count;
    uint64_t enq_seq;  /* operations enqueued so far */
    uint64_t done_seq; /* operations completed (run or dropped) so far */
    uint64_t run_origin; /* the origin of the operation running now, 0 none */
    uint32_t nchild;     /* queued operations pushed by kernels (origin below stamp) */
    bool stop;
    bool capturing;
    ag_vec capture; /* sim_op, while capturing */
};

struct ag_dev_event {
    uint32_t magic;
    sim *dev;
    ag_dev_event *prev, *next;
    bool recorded;
    uint32_t stream_id;
    uint64_t seq;
    uint32_t grefs;  /* captured records/waits naming this event */
    bool user_dead;  /* destroyed by the user, kept for graphs */
};

struct ag_dev_graph {
    uint32_t magic;
    sim *dev;
    ag_dev_graph *prev, *next;
    sim_op *ops;
    uint32_t n, cap;
};

struct sim {
    ag_ctx *ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv_progress; /* broadcast whenever an operation completes or the device is poisoned */
    ag_dev_stats st;
    ag_vec allocs; /* sim_alloc *, sorted by ptr */
    ag_dev_stream *streams;
    ag_dev_event *events;
    ag_dev_graph *graphs;
    uint32_t next_stream_id;
    uint64_t enq_clock; /* operations enqueued on every stream so far (their stamps) */
    sim_args *retired; /* argument blocks no operation names any more */
    /* Set once, under the lock, after why; read without it by sim_state
     * (every other reader holds the lock).  Apart from the fields above,
     * which the lock and the stream workers write all the time: a reader
     * of the flag would otherwise fetch their cache line at every look. */
    char apart[64];
    atomic_bool poisoned;
    char why[512];
};

/* ---------------------------------------------------------------- helpers */

static void lock(sim *d)
{
    pthread_mutex_lock(&d->mu);
}

static void unlock(sim *d)
{
    pthread_mutex_unlock(&d->mu);
}

/* Called with the lock held.  The first fault wins and is never rewritten,
 * so readers may keep the message pointer after unlocking. */
static void poison_locked(sim *d, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void poison_locked(sim *d, const char *fmt, ...)
{
    if (d->poisoned)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->why, sizeof d->why, fmt, ap);
    va_end(ap);
    atomic_store_explicit(&d->poisoned, true, memory_order_release);
    pthread_cond_broadcast(&d->cv_progress);
}

static ag_status poisoned_err(sim *d, const char *entry)
{
    return AG_ERR(d->ctx, AG_EDEVICE, "device %s: the device is poisoned: %s", entry, d->why);
}

static bool on_worker(const sim *d)
{
    pthread_t self = pthread_self();
    for (const ag_dev_stream *s = d->streams; s; s = s->next)
        if (pthread_equal(s->thread, self))
            return true;
    return false;
}

static ag_dev_stream *stream_by_id(const sim *d, uint32_t id)
{
    for (ag_dev_stream *s = d->streams; s; s = s->next)
        if (s->id == id)
            return s;
    return NULL;
}

/* Index of the last allocation starting at or below p (or -1). */
static int64_t alloc_floor(const sim *d, const void *p)
{
    sim_alloc *const *a = d->allocs.data;
    uint32_t lo = 0, hi = d->allocs.len;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)a[mid]->ptr <= (uintptr_t)p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (int64_t)lo - 1;
}

/* The live allocation holding [p, p+n), or NULL. */
static sim_alloc *alloc_find(const sim *d, const void *p, size_t n)
{
    int64_t k = alloc_floor(d, p);
    if (k < 0)
        return NULL;
    sim_alloc *a = AG_VEC_AT(d->allocs, sim_alloc *, k);
    uintptr_t off = (uintptr_t)p - (uintptr_t)a->ptr;
    if (off >= a->bytes || n > a->bytes - off)
        return NULL;
    return a;
}

static bool is_device_mem(const sim_alloc *a)
{
    return a && (a->type == AG_MEM_HBM || a->type == AG_MEM_P2P);
}

/* The host side [p, p+n) of a copy: ordinary host memory, which no
 * allocation's block (alignment slack included) meets (*pin NULL), or a
 * range inside one live HOST allocation (*pin).  held: it lay inside a
 * HOST allocation when the copy was enqueued, and must still.  Returns a
 * reason or NULL. */
static const char *host_side(const sim *d, const void *p, size_t n, bool held, bool is_dst, sim_alloc **pin)
{
    *pin = NULL;
    if (n == 0)
        return NULL;
    uintptr_t lo = (uintptr_t)p, hi = lo + n;
    /* blocks are disjoint and sorted: only the last one starting at or
     * below the range's end, or the one after it (by its slack), can meet it */
    int64_t k = alloc_floor(d, (const char *)p + (n - 1u));
    sim_alloc *meet = NULL;
    for (int64_t j = k < 0 ? 0 : k; !meet && j <= k + 1 && j < (int64_t)d->allocs.len; j++) {
        sim_alloc *a = AG_VEC_AT(d->allocs, sim_alloc *, j);
        if ((uintptr_t)a->raw < hi && (uintptr_t)a->raw + a->raw_size > lo)
            meet = a;
    }
    if (!meet && held)
        return is_dst ? "destination HOST allocation is gone" : "source HOST allocation is gone";
    if (!meet)
        return NULL;
    if (is_device_mem(meet))
        return is_dst ? "destination is device memory (use a d2d copy)" : "source is device memory (use a d2d copy)";
    if (lo < (uintptr_t)meet->ptr || hi > (uintptr_t)meet->ptr + meet->bytes)
        return is_dst ? "destination meets a HOST allocation but is not inside it"
                      : "source meets a HOST allocation but is not inside it";
    *pin = meet;
    return NULL;
}

/* Checks the ranges of a copy or memset against live allocations; on success
 * fills the records to pin (either may be NULL).  Returns a reason or NULL. */
static const char *check_op_ranges(const sim *d, const sim_op *op, sim_alloc **pin_dst, sim_alloc **pin_src)
{
    *pin_dst = *pin_src = NULL;
    if (op->kind == OP_MEMSET) {
        *pin_dst = alloc_find(d, op->dst, op->n);
        return *pin_dst ? NULL : "destination is not inside one live device allocation";
    }
    bool dev_dst = op->copy != AG_COPY_D2H, dev_src = op->copy != AG_COPY_H2D;
    sim_alloc *da = NULL, *sa = NULL;
    const char *why = NULL;
    if (dev_dst && !is_device_mem(da = alloc_find(d, op->dst, op->n)))
        return "destination is not inside one live HBM/P2P allocation";
    if (dev_src && !is_device_mem(sa = alloc_find(d, op->src, op->n)))
        return "source is not inside one live HBM/P2P allocation";
    if (!dev_dst && (why = host_side(d, op->dst, op->n, op->held_dst, true, &da)) != NULL)
        return why;
    if (!dev_src && (why = host_side(d, op->src, op->n, op->held_src, false, &sa)) != NULL)
        return why;
    if (op->copy == AG_COPY_P2P && da->type != AG_MEM_P2P && sa->type != AG_MEM_P2P)
        return "neither side is P2P memory";
    *pin_dst = da;
    *pin_src = sa;
    return NULL;
}

static const char *op_label(const sim_op *op)
{
    switch (op->kind) {
    case OP_COPY:
        return ag_dev_copy_kind_name(op->copy);
    case OP_MEMSET:
        return "memset";
    case OP_LAUNCH:
        return op->name;
    case OP_WAIT:
    case OP_WAIT_EV:
        return "wait";
    case OP_RECORD_EV:
        return "record";
    }
    return "?";
}

/* ---------------------------------------------------------------- argument blocks */

/* A copy of n bytes at src with no reference yet, or NULL (host OOM). */
static sim_args *args_new(sim *d, const void *src, size_t n)
{
    size_t raw_size = sizeof(sim_args) + AG_DEV_LAUNCH_ARGS_ALIGN - 1 + n;
    unsigned char *raw = ag_alloc(d->ctx, raw_size);
    if (!raw)
        return NULL;
    sim_args *a = (sim_args *)(void *)raw;
    uintptr_t at = (uintptr_t)(raw + sizeof *a);
    at += (AG_DEV_LAUNCH_ARGS_ALIGN - at % AG_DEV_LAUNCH_ARGS_ALIGN) % AG_DEV_LAUNCH_ARGS_ALIGN;
    a->next = NULL;
    a->raw_size = raw_size;
    a->n = n;
    a->refs = 0;
    a->data = (unsigned char *)at;
    memcpy(a->data, src, n);
    return a;
}

static void args_free(sim *d, sim_args *a)
{
    ag_rt_mark_access(a->data, a->n);
    ag_free(d->ctx, a, a->raw_size);
}

/* Drops one reference (lock held).  On a host thread inside an entry the
 * block is freed at once; a worker retires it instead, made inaccessible so
 * that a kernel keeping the pointer is caught by ASan. */
static void args_unref(sim *d, sim_args *a, bool worker)
{
    ag_assert_internal(a->refs > 0);
    if (--a->refs > 0)
        return;
    if (!worker) {
        args_free(d, a);
        return;
    }
    ag_rt_mark_noaccess(a->data, a->n);
    a->next = d->retired;
    d->retired = a;
}

/* Frees the retired blocks (lock held, host thread inside an entry). */
static void args_reclaim(sim *d)
{
    while (d->retired) {
        sim_args *a = d->retired;
        d->retired = a->next;
        args_free(d, a);
    }
}

/* ---------------------------------------------------------------- queues */

static ag_status ring_reserve(sim *d, ag_dev_stream *s, uint32_t more)
{
    if (s->count + (uint64_t)more <= s->cap)
        return AG_OK;
    uint64_t need = (uint64_t)s->count + more;
    if (need > UINT32_MAX / 2)
        return AG_ERR(d->ctx, AG_ENOMEM, "stream %u: queue of %llu operations is too long", s->id,
                      (unsigned long long)need);
    uint32_t cap = s->cap;
    while (cap < need)
        cap *= 2;
    sim_op *ring = ag_alloc(d->ctx, (size_t)cap * sizeof *ring);
    if (!ring)
        return AG_OOM(d->ctx);
    for (uint32_t k = 0; k < s->count; k++)
        ring[k] = s->ring[(s->head + k) & (s->cap - 1)];
    ag_free(d->ctx, s->ring, (size_t)s->cap * sizeof *s->ring);
    s->ring = ring;
    s->cap = cap;
    s->head = 0;
    return AG_OK;
}

/* The device and the origin of the operation this thread runs, when it is
 * a stream's worker running one (0 otherwise): what a kernel enqueues is
 * covered by a synchronise that covers the kernel. */
static _Thread_local const sim *worker_dev;
static _Thread_local uint64_t worker_origin;

/* Room must have been reserved. */
static void ring_push(ag_dev_stream *s, const sim_op *op)
{
    ag_assert_internal(s->count < s->cap);
    sim_op *at = &s->ring[(s->head + s->count) & (s->cap - 1)];
    *at = *op;
    at->stamp = ++s->dev->enq_clock;
    at->origin = at->stamp;
    if (worker_dev == s->dev && worker_origin) {
        /* a kernel's follow-up work: as old as the work that made it */
        at->origin = worker_origin;
        s->nchild++;
    }
    if (op->args)
        op->args->refs++;
    s->count++;
    s->enq_seq++;
}

/* Sends op to s: into the capture when capturing, else onto the queue. */
static ag_status submit(sim *d, ag_dev_stream *s, const sim_op *op)
{
    if (s->capturing) {
        if (ag_vec_push(d->ctx, &s->capture, sizeof *op, op) != AG_OK)
            return AG_OOM(d->ctx);
        if (op->event)
            op->event->grefs++;
        if (op->args)
            op->args->refs++;
        return AG_OK;
    }
    AG_TRY(ring_reserve(d, s, 1));
    ring_push(s, op);
    pthread_cond_signal(&s->cv_work);
    return AG_OK;
}

static void event_free(sim *d, ag_dev_event *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        d->events = e->next;
    if (e->next)
        e->next->prev = e->prev;
    e->magic = 0;
    ag_free(d->ctx, e, sizeof *e);
}

/* Drops the event and argument references held by ops[0..n) (host thread). */
static void release_op_refs(sim *d, const sim_op *ops, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        if (ops[k].args)
            args_unref(d, ops[k].args, false);
        ag_dev_event *e = ops[k].event;
        if (!e)
            continue;
        ag_assert_internal(e->grefs > 0);
        if (--e->grefs == 0 && e->user_dead)
            event_free(d, e);
    }
}

/* ---------------------------------------------------------------- workers */

/* Runs one operation; called and returns with the lock held. */
static void run_op(sim *d, ag_dev_stream *s, const sim_op *op)
{
    if (d->poisoned) {
        d->st.dropped++;
        return;
    }
    switch (op->kind) {
    case OP_COPY:
    case OP_MEMSET: {
        sim_alloc *pd, *ps;
        const char *why = check_op_ranges(d, op, &pd, &ps);
        if (why) {
            poison_locked(d, "stream %u: %s of %zu bytes at %p: %s when it ran (freed before the work finished?)",
                          s->id, op_label(op), op->n, op->dst, why);
            return;
        }
        if (pd)
            pd->busy++;
        if (ps)
            ps->busy++;
        unlock(d);
        if (op->kind == OP_COPY)
            memmove(op->dst, op->src, op->n);
        else
            memset(op->dst, op->value, op->n);
        lock(d);
        if (pd)
            pd->busy--;
        if (ps)
            ps->busy--;
        if (op->kind == OP_COPY) {
            d->st.copies[op->copy]++;
            d->st.copy_bytes[op->copy] += op->n;
        } else {
            d->st.memsets++;
        }
        return;
    }
    case OP_LAUNCH: {
        void *arg = op->args ? (void *)op->args->data : op->arg;
        unlock(d);
        ag_status st = op->fn(arg);
        lock(d);
        d->st.launches++;
        if (st != AG_OK)
            poison_locked(d, "stream %u: kernel '%s' failed: %s", s->id, op->name, ag_status_str(st));
        return;
    }
    case OP_WAIT:
        for (;;) {
            ag_dev_stream *t = stream_by_id(d, op->wait_stream);
            if (d->poisoned || !t || t->done_seq >= op->wait_seq)
                return;
            pthread_cond_wait(&d->cv_progress, &d->mu);
        }
    case OP_RECORD_EV:
    case OP_WAIT_EV:
        break;
    }
    ag_assert_internal(!"graph-only operation in a stream queue");
}

static void *worker_main(void *arg)
{
    ag_dev_stream *s = arg;
    sim *d = s->dev;
    lock(d);
    for (;;) {
        while (s->count == 0 && !s->stop)
            pthread_cond_wait(&s->cv_work, &d->mu);
        if (s->count == 0)
            break;
        sim_op op = s->ring[s->head];
        s->head = (s->head + 1) & (s->cap - 1);
        s->count--;
        s->nchild -= op.origin != op.stamp;
        s->run_origin = op.origin;
        worker_dev = d;
        worker_origin = op.origin;
        run_op(d, s, &op);
        worker_origin = 0;
        if (op.args)
            args_unref(d, op.args, true);
        s->run_origin = 0;
        s->done_seq++;
        pthread_cond_broadcast(&d->cv_progress);
    }
    unlock(d);
    return NULL;
}

/* Whether s has completed every operation of origin up to upto (lock
 * held): the one running is later, the oldest queued one came later
 * (stamps grow in queue order, and an origin is never above its stamp),
 * and so did every origin a kernel's follow-up work carries. */
static bool stream_done_upto(const ag_dev_stream *s, uint64_t upto)
{
    if (s->run_origin && s->run_origin <= upto)
        return false;
    if (s->count && s->ring[s->head].stamp <= upto)
        return false;
    /* what kernels pushed may be older than its place in the queue */
    for (uint32_t k = 0; s->nchild && k < s->count; k++)
        if (s->ring[(s->head + k) & (s->cap - 1)].origin <= upto)
            return false;
    return true;
}

/* Waits (lock held) until s has completed operation number seq. */
static void wait_stream_seq(sim *d, const ag_dev_stream *s, uint64_t seq)
{
    while (s->done_seq < seq)
        pthread_cond_wait(&d->cv_progress, &d->mu);
}

/* Whether the point an event stands for has completed (lock held). */
static bool event_done(const sim *d, const ag_dev_event *e)
{
    if (!e->recorded)
        return true;
    const ag_dev_stream *t = stream_by_id(d, e->stream_id);
    return !t || t->done_seq >= e->seq;
}

/* ---------------------------------------------------------------- memory */

static ag_status sim_mem_alloc(void *impl, ag_mem_type type, size_t bytes, size_t align, void **out)
{
    sim *d = impl;
    ag_status st = AG_OK;
    lock(d);
    ag_dev_mem_stats *ms = &d->st.mem[type];
    if (d->poisoned) {
        st = poisoned_err(d, "mem_alloc");
        goto done;
    }
    if (bytes > ms->capacity - ms->used) {
        ms->nfail++;
        st = AG_ERR(d->ctx, AG_ENOMEM,
                    "device mem_alloc: %s memory exhausted: %zu bytes requested, %llu of %llu in use",
                    ag_mem_type_name(type), bytes, (unsigned long long)ms->used,
                    (unsigned long long)ms->capacity);
        goto done;
    }
    sim_alloc *a = ag_calloc(d->ctx, 1, sizeof *a);
    size_t raw_size = bytes + align - 1;
    char *raw = a ? ag_alloc(d->ctx, raw_size) : NULL;
    if (!raw || ag_vec_reserve(d->ctx, &d->allocs, sizeof a, 1) != AG_OK) {
        ag_free(d->ctx, raw, raw_size);
        ag_free(d->ctx, a, sizeof *a);
        st = AG_OOM(d->ctx);
        goto done;
    }
    a->raw = raw;
    a->raw_size = raw_size;
    a->ptr = raw + ((align - (uintptr_t)raw % align) % align);
    a->bytes = bytes;
    a->type = type;
    /* Keep the table sorted by address. */
    uint32_t at = (uint32_t)(alloc_floor(d, a->ptr) + 1);
    sim_alloc **arr = d->allocs.data;
    memmove(arr + at + 1, arr + at, (size_t)(d->allocs.len - at) * sizeof *arr);
    arr[at] = a;
    d->allocs.len++;
    ag_rt_mark_noaccess(raw, (size_t)(a->ptr - raw));
    ag_rt_mark_noaccess(a->ptr + bytes, raw_size - (size_t)(a->ptr - raw) - bytes);
    ms->used += bytes;
    if (ms->used > ms->peak)
        ms->peak = ms->used;
    ms->nalloc++;
    ms->live++;
    *out = a->ptr;
done:
    unlock(d);
    return st;
}

static void alloc_release(sim *d, sim_alloc *a)
{
    ag_dev_mem_stats *ms = &d->st.mem[a->type];
    ms->used -= a->bytes;
    ms->nfree++;
    ms->live--;
    ag_rt_mark_access(a->raw, a->raw_size);
    ag_free(d->ctx, a->raw, a->raw_size);
    ag_free(d->ctx, a, sizeof *a);
}

static void sim_mem_free(void *impl, void *ptr)
{
    sim *d = impl;
    lock(d);
    int64_t k = alloc_floor(d, ptr);
    sim_alloc *a = k >= 0 ? AG_VEC_AT(d->allocs, sim_alloc *, k) : NULL;
    ag_assert(a && a->ptr == ptr);
    if (!a || a->ptr != ptr) {
        unlock(d);
        return;
    }
    if (a->busy) {
        /* A stream is copying into or out of it this instant: on real hardware
         * that is silent corruption; here it is a device fault. */
        poison_locked(d, "device memory at %p (%zu bytes, %s) freed while a stream was still using it", ptr,
                      a->bytes, ag_mem_type_name(a->type));
        while (a->busy)
            pthread_cond_wait(&d->cv_progress, &d->mu);
        k = alloc_floor(d, ptr);
    }
    sim_alloc **arr = d->allocs.data;
    memmove(arr + k, arr + k + 1, (size_t)(d->allocs.len - (uint32_t)k - 1) * sizeof *arr);
    d->allocs.len--;
    alloc_release(d, a);
    unlock(d);
}

/* ---------------------------------------------------------------- stream work */

static ag_status enqueue_checked(sim *d, ag_dev_stream *s, const sim_op *op, const char *entry)
{
    ag_assert(s->magic == STREAM_MAGIC && s->dev == d);
    sim_op o = *op;
    if (o.kind == OP_COPY || o.kind == OP_MEMSET) {
        /* the call's own ranges first: refused alike in either state */
        sim_alloc *pd, *ps;
        const char *why = check_op_ranges(d, &o, &pd, &ps);
        if (why)
            return AG_ERR(d->ctx, AG_EINVAL, "device %s on stream %u: %s of %zu bytes (dst %p, src %p): %s", entry,
                          s->id, op_label(&o), o.n, o.dst, o.src, why);
        /* a HOST allocation on the host side must outlive the copy */
        o.held_dst = o.kind == OP_COPY && o.copy == AG_COPY_D2H && pd;
        o.held_src = o.kind == OP_COPY && o.copy == AG_COPY_H2D && ps;
    }
    if (d->poisoned)
        return poisoned_err(d, entry);
    return submit(d, s, &o);
}

static ag_status sim_memcpy_async(void *impl, ag_dev_copy_kind kind, void *dst, const void *src, size_t n,
                                  ag_dev_stream *s)
{
    sim *d = impl;
    sim_op op = {.kind = OP_COPY, .copy = kind, .dst = dst, .src = src, .n = n};
    lock(d);
    ag_status st = enqueue_checked(d, s, &op, "memcpy_async");
    unlock(d);
    return st;
}

static ag_status sim_memset_async(void *impl, void *dst, int value, size_t n, ag_dev_stream *s)
{
    sim *d = impl;
    sim_op op = {.kind = OP_MEMSET, .dst = dst, .value = value, .n = n};
    lock(d);
    ag_status st = enqueue_checked(d, s, &op, "memset_async");
    unlock(d);
    return st;
}

static ag_status sim_launch(void *impl, ag_dev_stream *s, ag_dev_kernel_fn fn, void *arg, const char *name)
{
    sim *d = impl;
    sim_op op = {.kind = OP_LAUNCH, .fn = fn, .arg = arg, .name = name};
    lock(d);
    ag_status st = enqueue_checked(d, s, &op, "launch");
    unlock(d);
    return st;
}

static ag_status sim_launch_copy(void *impl, ag_dev_stream *s, ag_dev_kernel_fn fn, const void *args, size_t n,
                                 const char *name)
{
    sim *d = impl;
    ag_status st;
    lock(d);
    ag_assert(s->magic == STREAM_MAGIC && s->dev == d);
    args_reclaim(d);
    if (d->poisoned) {
        st = poisoned_err(d, "launch_copy");
    } else {
        sim_op op = {.kind = OP_LAUNCH, .fn = fn, .name = name, .args = args_new(d, args, n)};
        if (!op.args) {
            st = AG_OOM(d->ctx);
        } else {
            st = submit(d, s, &op);
            if (op.args->refs == 0) /* not enqueued */
                args_free(d, op.args);
        }
    }
    unlock(d);
    return st;
}

/* ---------------------------------------------------------------- streams */

static ag_status sim_stream_create(void *impl, ag_dev_stream **out)
{
    sim *d = impl;
    ag_status st = AG_OK;
    lock(d);
    if (d->poisoned) {
        st = poisoned_err(d, "stream_create");
        goto done;
    }
    ag_dev_stream *s = ag_calloc(d->ctx, 1, sizeof *s);
    sim_op *ring = s ? ag_alloc(d->ctx, RING_MIN * sizeof *ring) : NULL;
    if (!ring) {
        ag_free(d->ctx, s, sizeof *s);
        st = AG_OOM(d->ctx);
        goto done;
    }
    s->magic = STREAM_MAGIC;
    s->dev = d;
    s->ring = ring;
    s->cap = RING_MIN;
    s->id = d->next_stream_id;
    if (pthread_cond_init(&s->cv_work, NULL) != 0) {
        st = AG_ERR(d->ctx, AG_EDEVICE, "device stream_create: cannot create a condition variable");
        goto fail;
    }
    if (pthread_create(&s->thread, NULL, worker_main, s) != 0) {
        pthread_cond_destroy(&s->cv_work);
        st = AG_ERR(d->ctx, AG_EDEVICE, "device stream_create: cannot start a worker thread");
        goto fail;
    }
    d->next_stream_id++;
    s->next = d->streams;
    if (d->streams)
        d->streams->prev = s;
    d->streams = s;
    d->st.live_streams++;
    *out = s;
    goto done;
fail:
    ag_free(d->ctx, ring, RING_MIN * sizeof *ring);
    ag_free(d->ctx, s, sizeof *s);
done:
    unlock(d);
    return st;
}

static void capture_drop(sim *d, ag_dev_stream *s)
{
    release_op_refs(d, s->capture.data, s->capture.len);
    ag_vec_free(d->ctx, &s->capture, sizeof(sim_op));
    s->capturing = false;
}

/* Lock held on entry and exit; released while joining the worker. */
static void stream_destroy_locked(sim *d, ag_dev_stream *s)
{
    if (s->capturing)
        capture_drop(d, s);
    wait_stream_seq(d, s, s->enq_seq);
    s->stop = true;
    pthread_cond_signal(&s->cv_work);
    unlock(d);
    pthread_join(s->thread, NULL);
    lock(d);
    if (s->prev)
        s->prev->next = s->next;
    else
        d->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    d->st.live_streams--;
    pthread_cond_destroy(&s->cv_work);
    ag_free(d->ctx, s->ring, (size_t)s->cap * sizeof *s->ring);
    s->magic = 0;
    ag_free(d->ctx, s, sizeof *s);
    args_reclaim(d);
    pthread_cond_broadcast(&d->cv_progress);
}

static void sim_stream_destroy(void *impl, ag_dev_stream *s)
{
    sim *d = impl;
    lock(d);
    ag_assert(s->magic == STREAM_MAGIC && s->dev == d);
    ag_assert(!on_worker(d));
    if (!on_worker(d))
        stream_destroy_locked(d, s);
    unlock(d);
}

static ag_status sim_stream_synchronize(void *impl, ag_dev_stream *s)
{
    sim *d = impl;
    ag_status st = AG_OK;
    lock(d);
    ag_assert(s->magic == STREAM_MAGIC && s->dev == d);
    if (on_worker(d))
        st = AG_ERR(d->ctx, AG_EINVAL, "device stream_synchronize: called from a kernel (would never return)");
    else if (s->capturing)
        st = AG_ERR(d->ctx, AG_EINVAL, "device stream_synchronize: stream %u is capturing", s->id);
    else {
        wait_stream_seq(d, s, s->enq_seq);
        args_reclaim(d);
        if (d->poisoned)
            st = poisoned_err(d, "stream_synchronize");
    }
    unlock(d);
    return st;
}

/* ---------------------------------------------------------------- events */

static ag_status sim_event_create(void *impl, ag_dev_event **out)
{
    sim *d = impl;
    ag_status st = AG_OK;
    lock(d);
    if (d->poisoned) {
        st = poisoned_err(d, "event_create");
    } else {
        ag_dev_event *e = ag_calloc(d->ctx, 1, sizeof *e);
        if (!e) {
            st = AG_OOM(d->ctx);
        } else {
            e->magic = EVENT_MAGIC;
            e->dev = d;
            e->next = d->events;
            if (d->events)
                d->events->prev = e;
            d->events = e;
            d->st.live_events++;
            *out = e;
        }
    }
    unlock(d);
    return st;
}

static void sim_event_destroy(void *impl, ag_dev_event *e)
{
    sim *d = impl;
    lock(d);
    ag_assert(e->magic == EVENT_MAGIC && e->dev == d && !e->user_dead);
    d->st.live_events--;
    e->user_dead = true;
    if (e->grefs == 0)
        event_free(d, e);
    unlock(d);
}

/* Enqueues on s a wait for e's current point (lock held, s not capturing). */
static ag_status wait_event_now(sim *d, ag_dev_stream *s, const ag_dev_event *e)
{
    /* Same stream, unrecorded, or already complete: FIFO order suffices. */
    if (!e->recorded || e->stream_id == s->id || event_done(d, e)) {
        d->st.waits++;
        return AG_OK;
    }
    sim_op op = {.kind = OP_WAIT, .wait_stream = e->stream_id, .wait_seq = e->seq};
    ag_status st = submit(d, s, &op);
    d->st.waits += st == AG_OK; /* (a refused wait is not one) */
    return st;
}

/* Records e on s (kind OP_RECORD_EV) or makes s wait for e's current point
 * (OP_WAIT_EV); on a capturing stream, captures it (eager NULL) or, for
 * the eager forms, declines it (*eager false). */
static inline __attribute__((always_inline)) ag_status event_op_in(sim *d, ag_dev_event *e, ag_dev_stream *s,
                                                                   sim_op_kind kind, bool *eager)
{
    ag_status st = AG_OK;
    lock(d);
    ag_assert(e->magic == EVENT_MAGIC && e->dev == d && !e->user_dead);
    ag_assert(s->magic == STREAM_MAGIC && s->dev == d);
    if (d->poisoned) {
        st = poisoned_err(d, kind == OP_RECORD_EV ? (eager ? "event_record_eager" : "event_record")
                                                  : (eager ? "stream_wait_event_eager" : "stream_wait_event"));
    } else if (s->capturing && eager) {
        *eager = false;
    } else if (s->capturing) {
        sim_op op = {.kind = kind, .event = e};
        st = submit(d, s, &op);
    } else {
        if (kind == OP_RECORD_EV) {
            e->recorded = true;
            e->stream_id = s->id;
            e->seq = s->enq_seq;
            d->st.records++;
        } else {
            st = wait_event_now(d, s, e);
        }
        if (eager)
            *eager = true;
    }
    unlock(d);
    return st;
}

static ag_status sim_event_record(void *impl, ag_dev_event *e, ag_dev_stream *s)
{
    return event_op_in(impl, e, s, OP_RECORD_EV, NULL);
}

static ag_status sim_event_record_eager(void *impl, ag_dev_event *e, ag_dev_stream *s, bool *recorded)
{
    return event_op_in(impl, e, s, OP_RECORD_EV, recorded);
}

static ag_status sim_stream_wait_event(void *impl, ag_dev_stream *s, ag_dev_event *e)
{
    return event_op_in(impl, e, s, OP_WAIT_EV, NULL);
}

static ag_status sim_stream_wait_event_eager(void *impl, ag_dev_stream *s, ag_dev_event *e, bool *enqueued)
{
    return event_op_in(impl, e, s, OP_WAIT_EV, enqueued);
}

static ag_status sim_stream_query(void *impl, ag_dev_stream *s, bool *idle)
{
    sim *d = impl;
    ag_status st = AG_OK;
    lock(d);
    ag_assert(s->magic == STREAM_MAGIC && s->dev == d);
    if (s->capturing)
        st = AG_ERR(d->ctx, AG_EINVAL, "device stream_query: stream %u is capturing", s->id);
    else if (d->poisoned)
        st = poisoned_err(d, "stream_query");
    else
        *idle = s->done_seq >= s->enq_seq;
    unlock(d);
    return st;
}

static ag_status sim_stream_capturing(void *impl, ag_dev_stream *s, bool *capturing)
{
    sim *d = impl;
    ag_status st = AG_OK;
    lock(d);
    ag_assert(s->magic == STREAM_MAGIC && s->dev == d);
    if (d->poisoned)
        st = poisoned_err(d, "stream_capturing");
    else
        *capturing = s->capturing;
    unlock(d);
    return st;
}

static ag_status sim_event_query(void *impl, ag_dev_event *e, bool *done)
{
    sim *d = impl;
    ag_status st = AG_OK;
    lock(d);
    ag_assert(e->magic == EVENT_MAGIC && e->dev == d && !e->user_dead);
    if (d->poisoned)
        st = poisoned_err(d, "event_query");
    else
        *done = event_done(d, e);
    unlock(d);
    return st;
}

static ag_status sim_event_synchronize(void *impl, ag_dev_event *e)
{
    sim *d = impl;
    ag_status st = AG_OK;
    lock(d);
    ag_assert(e->magic == EVENT_MAGIC && e->dev == d && !e->user_dead);
    if (on_worker(d)) {
        st = AG_ERR(d->ctx, AG_EINVAL, "device event_synchronize: called from a kernel (would never return)");
    } else {
        /* the point the event stands for now: a record another thread
         * makes meanwhile is not waited for.  Poisoned, the queue ahead of
         * it drains at once (dropped), but a kernel already running is
         * waited for, as stream_synchronize does: the caller may free what
         * it touches once this returns. */
        const ag_dev_event at = *e;
        while (!event_done(d, &at))
            pthread_cond_wait(&d->cv_progress, &d->mu);
        args_reclaim(d);
        if (d->poisoned)
            st = poisoned_err(d, "event_synchronize");
    }
    unlock(d);
    return st;
}

/* ---------------------------------------------------------------- capture */

static ag_status sim_capture_begin(void *impl, ag_dev_stream *s)
{
    sim *d = impl;
    ag_status st = AG_OK;
    lock(d);
    ag_assert(s->magic == STREAM_MAGIC && s->dev == d);
    if (d->poisoned)
        st = poisoned_err(d, "capture_begin");
    else if (s->capturing)
        st = AG_ERR(d->ctx, AG_EINVAL, "device capture_begin: stream %u is already capturing", s->id);
    else {
        s->capturing = true;
        s->capture = (ag_vec){0};
    }
    unlock(d);
    return st;
}

static ag_status sim_capture_end(void *impl, ag_dev_stream *s, ag_dev_graph **out)
{
    sim *d = impl;
    ag_status st = AG_OK;
    lock(d);
    ag_assert(s->magic == STREAM_MAGIC && s->dev == d);
    if (d->poisoned) {
        st = poisoned_err(d, "capture_end");
    } else if (!s->capturing) {
        st = AG_ERR(d->ctx, AG_EINVAL, "device capture_end: stream %u is not capturing", s->id);
    } else {
        ag_dev_graph *g = ag_calloc(d->ctx, 1, sizeof *g);
        if (!g) {
            st = AG_OOM(d->ctx);
        } else {
            g->magic = GRAPH_MAGIC;
            g->dev = d;
            g->ops = s->capture.data;
            g->n = s->capture.len;
            g->cap = s->capture.cap;
            s->capture = (ag_vec){0};
            s->capturing = false;
            g->next = d->graphs;
            if (d->graphs)
                d->graphs->prev = g;
            d->graphs = g;
            d->st.live_graphs++;
            *out = g;
        }
    }
    unlock(d);
    return st;
}

static ag_status sim_graph_launch(void *impl, ag_dev_graph *g, ag_dev_stream *s)
{
    sim *d = impl;
    ag_status st = AG_OK;
    lock(d);
    ag_assert(g->magic == GRAPH_MAGIC && g->dev == d);
    ag_assert(s->magic == STREAM_MAGIC && s->dev == d);
    /* All or nothing: check every range (refused alike in either state)
     * and make room before enqueuing. */
    for (uint32_t k = 0; k < g->n; k++) {
        const sim_op *op = &g->ops[k];
        if (op->kind != OP_COPY && op->kind != OP_MEMSET)
            continue;
        sim_alloc *pd, *ps;
        const char *why = check_op_ranges(d, op, &pd, &ps);
        if (why) {
            st = AG_ERR(d->ctx, AG_EINVAL, "device graph_launch on stream %u: operation %u (%s of %zu bytes): %s",
                        s->id, k, op_label(op), op->n, why);
            goto done;
        }
    }
    if (d->poisoned) {
        st = poisoned_err(d, "graph_launch");
        goto done;
    }
    if (s->capturing) {
        if (ag_vec_reserve(d->ctx, &s->capture, sizeof(sim_op), g->n) != AG_OK) {
            st = AG_OOM(d->ctx);
            goto done;
        }
        for (uint32_t k = 0; k < g->n; k++)
            (void)submit(d, s, &g->ops[k]); /* room reserved: cannot fail */
    } else {
        st = ring_reserve(d, s, g->n);
        if (st != AG_OK)
            goto done;
        for (uint32_t k = 0; k < g->n; k++) {
            const sim_op *op = &g->ops[k];
            if (op->kind == OP_RECORD_EV) {
                op->event->recorded = true;
                op->event->stream_id = s->id;
                op->event->seq = s->enq_seq;
                d->st.records++;
            } else if (op->kind == OP_WAIT_EV) {
                (void)wait_event_now(d, s, op->event); /* room reserved: cannot fail */
            } else {
                ring_push(s, op);
            }
        }
        pthread_cond_signal(&s->cv_work);
        d->st.graph_launches++; /* (into a capture: part of the graph captured) */
    }
done:
    unlock(d);
    return st;
}

static void graph_free(sim *d, ag_dev_graph *g)
{
    if (g->prev)
        g->prev->next = g->next;
    else
        d->graphs = g->next;
    if (g->next)
        g->next->prev = g->prev;
    release_op_refs(d, g->ops, g->n);
    ag_free(d->ctx, g->ops, (size_t)g->cap * sizeof *g->ops);
    g->magic = 0;
    ag_free(d->ctx, g, sizeof *g);
    d->st.live_graphs--;
}

static void sim_graph_destroy(void *impl, ag_dev_graph *g)
{
    sim *d = impl;
    lock(d);
    ag_assert(g->magic == GRAPH_MAGIC && g->dev == d);
    graph_free(d, g);
    args_reclaim(d);
    unlock(d);
}

/* ---------------------------------------------------------------- device-wide */

static ag_status sim_synchronize(void *impl)
{
    sim *d = impl;
    ag_status st = AG_OK;
    lock(d);
    if (on_worker(d)) {
        st = AG_ERR(d->ctx, AG_EINVAL, "device synchronize: called from a kernel (would never return)");
        goto done;
    }
    for (const ag_dev_stream *s = d->streams; s; s = s->next)
        if (s->capturing) {
            st = AG_ERR(d->ctx, AG_EINVAL, "device synchronize: stream %u is capturing", s->id);
            goto done;
        }
    /* Only the work enqueued before the call (stamps up to now), with what
     * its kernels enqueue (their origin): work the host enqueues while we
     * sleep may wait for what it does after this returns.  Streams may
     * come and go meanwhile: walk them by id. */
    uint64_t upto = d->enq_clock;
    for (;;) {
        /* a kernel still running may push work onto a stream done before:
         * over once a whole walk waited for nothing (one look, under the
         * lock, at every stream) */
        bool waited = false;
        for (uint32_t next = 0;;) {
            ag_dev_stream *pick = NULL;
            for (ag_dev_stream *s = d->streams; s; s = s->next)
                if (s->id >= next && (!pick || s->id < pick->id))
                    pick = s;
            if (!pick)
                break;
            next = pick->id + 1;
            uint32_t id = pick->id;
            while ((pick = stream_by_id(d, id)) && !stream_done_upto(pick, upto)) {
                waited = true;
                pthread_cond_wait(&d->cv_progress, &d->mu);
            }
        }
        if (!waited)
            break;
    }
    args_reclaim(d);
    if (d->poisoned)
        st = poisoned_err(d, "synchronize");
done:
    unlock(d);
    return st;
}

static ag_dev_state sim_state(void *impl, const char **why)
{
    /* no lock: why is written before the flag, and never again */
    sim *d = impl;
    bool p = atomic_load_explicit(&d->poisoned, memory_order_acquire);
    *why = p ? d->why : "";
    return p ? AG_DEV_POISONED : AG_DEV_HEALTHY;
}

static void sim_poison(void *impl, const char *why)
{
    sim *d = impl;
    lock(d);
    poison_locked(d, "%s", why);
    unlock(d);
}

static void sim_stats(void *impl, ag_dev_stats *out)
{
    sim *d = impl;
    lock(d);
    *out = d->st;
    unlock(d);
}

static void sim_destroy(void *impl)
{
    sim *d = impl;
    lock(d);
    ag_assert(!on_worker(d));
    while (d->streams)
        stream_destroy_locked(d, d->streams);
    while (d->graphs)
        graph_free(d, d->graphs);
    while (d->events)
        event_free(d, d->events);
    args_reclaim(d);
    for (uint32_t k = 0; k < d->allocs.len; k++)
        alloc_release(d, AG_VEC_AT(d->allocs, sim_alloc *, k));
    ag_vec_free(d->ctx, &d->allocs, sizeof(sim_alloc *));
    unlock(d);
    pthread_cond_destroy(&d->cv_progress);
    pthread_mutex_destroy(&d->mu);
    ag_free(d->ctx, d, sizeof *d);
}

static const ag_device_ops sim_ops = {
    .size = sizeof(ag_device_ops),
    .name = "sim",
    .destroy = sim_destroy,
    .mem_alloc = sim_mem_alloc,
    .mem_free = sim_mem_free,
    .memcpy_async = sim_memcpy_async,
    .memset_async = sim_memset_async,
    .launch = sim_launch,
    .stream_create = sim_stream_create,
    .stream_destroy = sim_stream_destroy,
    .stream_synchronize = sim_stream_synchronize,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .stream_wait_event = sim_stream_wait_event,
    .event_query = sim_event_query,
    .stream_query = sim_stream_query,
    .stream_capturing = sim_stream_capturing,
    .event_record_eager = sim_event_record_eager,
    .stream_wait_event_eager = sim_stream_wait_event_eager,
    .event_synchronize = sim_event_synchronize,
    .capture_begin = sim_capture_begin,
    .capture_end = sim_capture_end,
    .graph_launch = sim_graph_launch,
    .graph_destroy = sim_graph_destroy,
    .synchronize = sim_synchronize,
    .state = sim_state,
    .poison = sim_poison,
    .stats = sim_stats,
    .launch_copy = sim_launch_copy,
};

ag_device_sim_config ag_device_sim_defaults(void)
{
    ag_device_sim_config c;
    memset(&c, 0, sizeof c);
    c.size = sizeof c;
    c.capacity[AG_MEM_HBM] = UINT64_C(1) << 30;
    c.capacity[AG_MEM_P2P] = UINT64_C(256) << 20;
    c.capacity[AG_MEM_HOST] = UINT64_C(1) << 30;
    return c;
}

ag_status ag_device_sim_create(ag_ctx *ctx, const ag_device_sim_config *cfg, ag_device **out)
{
    if (!out)
        return AG_ERR(ctx, AG_EINVAL, "device sim_create: out is NULL");
    *out = NULL;
    ag_device_sim_config c = ag_device_sim_defaults();
    if (cfg) {
        if (cfg->size < sizeof c)
            return AG_ERR(ctx, AG_EINVAL, "device sim_create: config size %zu is too small", cfg->size);
        c = *cfg;
    }
    sim *d = ag_calloc(ctx, 1, sizeof *d);
    if (!d)
        return AG_OOM(ctx);
    d->ctx = ctx;
    d->st.size = sizeof d->st;
    for (int t = 0; t < AG_MEM_COUNT_; t++)
        d->st.mem[t].capacity = c.capacity[t];
    if (pthread_mutex_init(&d->mu, NULL) != 0) {
        ag_free(ctx, d, sizeof *d);
        return AG_ERR(ctx, AG_EDEVICE, "device sim_create: cannot create a mutex");
    }
    if (pthread_cond_init(&d->cv_progress, NULL) != 0) {
        pthread_mutex_destroy(&d->mu);
        ag_free(ctx, d, sizeof *d);
        return AG_ERR(ctx, AG_EDEVICE, "device sim_create: cannot create a condition variable");
    }
    ag_status st = ag_device_create(ctx, &sim_ops, d, out);
    if (st != AG_OK) {
        pthread_cond_destroy(&d->cv_progress);
        pthread_mutex_destroy(&d->mu);
        ag_free(ctx, d, sizeof *d);
    }
    return st;
}
