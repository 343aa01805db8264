/* The device seam (docs/runtime.md): one table of functions through which the
 * runtime reaches an accelerator — memory per type, asynchronous copies,
 * streams, events, stream capture and replay, device state and statistics.
 * Backends: the simulated device (host memory and worker threads, the default)
 * and a fault-injecting wrapper around any device.  Seed §4.2 runs on top. */
#ifndef ALIASGUARD_DEVICE_H
#define ALIASGUARD_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctx.h"
#include "status.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Preconditions and semantics, stated once for every ag_dev_* entry below.
 *
 * Handles.  ag_device, ag_dev_stream, ag_dev_event and ag_dev_graph are
 * opaque.  A stream, event or graph belongs to the device that made it and is
 * passed only to that device (a fault wrapper passes its inner device's
 * handles through, so they are shared between the two).  Destroy functions
 * accept NULL.  NULL handles, NULL out-pointers, out-of-range enums and
 * misaligned/zero sizes where a size is required are AG_EINVAL with a message
 * naming the entry and the argument; nothing is changed then.
 *
 * Asynchrony.  memcpy_async, memset_async, launch, launch_copy, event_record,
 * stream_wait_event and graph_launch only enqueue work and return; the work
 * runs later, in FIFO order on its stream.  Two streams are ordered only by
 * events (stream_wait_event) and by host synchronisation (stream_synchronize,
 * event_synchronize, synchronize); nothing else orders them.  Host buffers
 * named by a copy must stay valid, and unmodified for a source, until the
 * copy has run.  Device memory must not be freed while queued work may still
 * touch it: keeping that promise is the caller's (the allocator's) job.
 *
 * Device memory.  Addresses returned by ag_dev_mem_alloc are device
 * addresses: host code must not dereference them, except inside a launched
 * callback (a "kernel").  On the simulated device they are host addresses,
 * so a kernel reads and writes them directly.  Each allocation is counted
 * against the capacity of its memory type.
 *
 * HOST memory (AG_MEM_HOST) is mapped pinned host memory, as from
 * cudaHostAlloc: both host code and kernels may read and write it directly,
 * and copies may use it as their host side.  The rule is that of any memory
 * two threads share, with synchronisation as the only ordering:
 *   - host code may read what stream work (a kernel or a copy) wrote there
 *     once it has synchronised with that work: stream_synchronize on its
 *     stream, event_synchronize on an event recorded after it, or
 *     synchronize (event_query returning done orders it too);
 *   - stream work sees what host code wrote there before enqueuing it;
 *   - anything else (host code reading while a kernel may still be writing,
 *     polling a flag) is a data race unless both sides use atomics, and even
 *     then nothing promises when a write becomes visible before the
 *     synchronisation.
 * The simulated device keeps this rule exactly (its synchronisation goes
 * through its lock, so ThreadSanitizer sees the order).
 *
 * Threads.  Every entry may be called from any thread, including from a
 * launched callback, except that the waiting entries (stream_synchronize,
 * event_synchronize, synchronize, stream_destroy, event_destroy and
 * ag_device_destroy) must not be called from a callback (AG_EINVAL where
 * detectable: waiting on one's own stream would never return).  A device
 * uses its ctx (allocation hook, error message) only inside entries and
 * under its own lock; since a ctx is not thread-safe, a device driven from
 * several threads needs a ctx that nothing else uses meanwhile.  Worker
 * threads of the simulated device never touch the ctx.
 *
 * Device state.  A device is healthy until a fault poisons it: a kernel
 * returning a failure, work touching memory that is no longer allocated,
 * ag_dev_poison, or a fault wrapper in poisoning mode.  Poison is sticky, as
 * on a real accelerator: queued work is dropped (streams still drain, so
 * waits return; a kernel already running is waited for by every
 * synchronising entry, so what it touches may be freed once one returns),
 * and every later entry returns AG_EDEVICE with the reason,
 * except mem_free, the destroy functions, device_state and stats, which keep
 * working so that a program can clean up without leaking.  A copy, memset
 * or graph launch whose ranges are wrong is refused with AG_EINVAL in
 * either state (its own error comes first).
 *
 * Capture.  Between capture_begin(s) and capture_end(s), work enqueued on s
 * (copies, memsets, launches, event records and waits) is recorded into a
 * graph instead of running; other streams are unaffected.  Waiting on a
 * capturing stream (stream_synchronize, synchronize) is AG_EINVAL.
 * graph_launch enqueues the recorded work on any stream of the device, in
 * order, as if each call were made again at that moment; a graph may be
 * launched any number of times and destroyed while its launches are still
 * queued.  Events named by a captured record or wait are kept alive by the
 * graph until ag_dev_graph_destroy.  A captured record marks a point of the
 * graph's launches, not of the stream's eager work: an event whose last
 * record was captured keeps the state of its record before (never
 * recorded: complete).  stream_capturing says whether a stream captures;
 * event_record_eager and stream_wait_event_eager refuse to be captured.
 * ------------------------------------------------------------------------- */

typedef struct ag_device ag_device;
typedef struct ag_dev_stream ag_dev_stream;
typedef struct ag_dev_event ag_dev_event;
typedef struct ag_dev_graph ag_dev_graph;

/* Direction of a copy.  HOST memory (pinned host memory from the device,
 * AG_MEM_HOST) and ordinary host memory both count as host for a copy.
 *   H2D: dst in HBM/P2P memory, src any host buffer or HOST allocation;
 *   D2H: src in HBM/P2P memory, dst any host buffer or HOST allocation;
 *   D2D: both in HBM/P2P memory (ranges may overlap: memmove semantics);
 *   P2P: both in HBM/P2P memory, at least one of them P2P memory.
 * A device range must lie inside one live allocation. */
#define AG_DEV_COPY_LIST(X) X(AG_COPY_H2D, "h2d") X(AG_COPY_D2H, "d2h") X(AG_COPY_D2D, "d2d") X(AG_COPY_P2P, "p2p")
typedef enum ag_dev_copy_kind {
#define AG_DEV_COPY_ENUM_(e, name) e,
    AG_DEV_COPY_LIST(AG_DEV_COPY_ENUM_)
#undef AG_DEV_COPY_ENUM_
    AG_COPY_COUNT_
} ag_dev_copy_kind;
const char *ag_dev_copy_kind_name(ag_dev_copy_kind k); /* "h2d", ... or NULL */

typedef enum ag_dev_state {
    AG_DEV_HEALTHY = 0,
    AG_DEV_POISONED = 1
} ag_dev_state;

/* A kernel: a host callback run on the stream's worker, in FIFO order with
 * the stream's other work.  A status other than AG_OK poisons the device,
 * naming the kernel. */
typedef ag_status (*ag_dev_kernel_fn)(void *arg);

/* Largest argument block ag_dev_launch_copy copies, and the alignment of the
 * copy a kernel receives. */
#define AG_DEV_LAUNCH_ARGS_MAX 16384u
#define AG_DEV_LAUNCH_ARGS_ALIGN 16u

/* Alignment of an allocation when 0 is passed, and the least one granted. */
#define AG_DEV_DEFAULT_ALIGN 512u
#define AG_DEV_MIN_ALIGN 64u
#define AG_DEV_MAX_ALIGN 65536u

/* ---- statistics ---- */
typedef struct ag_dev_mem_stats {
    uint64_t capacity; /* bytes this memory type may hold */
    uint64_t used;     /* bytes allocated now (as requested, before alignment) */
    uint64_t peak;     /* highest `used` since creation */
    uint64_t nalloc;   /* successful allocations */
    uint64_t nfree;    /* frees */
    uint64_t nfail;    /* allocations refused for capacity */
    uint32_t live;     /* allocations alive now */
} ag_dev_mem_stats;

typedef struct ag_dev_stats {
    size_t size; /* sizeof(ag_dev_stats): set by the caller before ag_dev_stats */
    ag_dev_mem_stats mem[AG_MEM_COUNT_];
    uint64_t copies[AG_COPY_COUNT_];     /* copies that ran */
    uint64_t copy_bytes[AG_COPY_COUNT_]; /* bytes they moved */
    uint64_t memsets;        /* memsets that ran */
    uint64_t launches;       /* kernels that ran (launch and launch_copy) */
    uint64_t records;        /* event records enqueued (captured ones at replay) */
    uint64_t waits;          /* stream waits enqueued (captured ones at replay) */
    uint64_t graph_launches; /* graph replays enqueued */
    uint64_t dropped;        /* queued operations dropped because the device was poisoned */
    uint32_t live_streams, live_events, live_graphs;
} ag_dev_stats;

/* ---- the function table a backend implements ----
 * Each entry receives the backend's own pointer (impl) and arguments that
 * the dispatch layer has already checked against the preconditions above.
 * A backend raises its errors on the ctx given to ag_device_create. */
typedef struct ag_device_ops {
    size_t size;      /* sizeof(ag_device_ops), for growth */
    const char *name; /* "sim", "fault", ... (static) */
    void (*destroy)(void *impl);
    ag_status (*mem_alloc)(void *impl, ag_mem_type type, size_t bytes, size_t align, void **out);
    void (*mem_free)(void *impl, void *ptr);
    ag_status (*memcpy_async)(void *impl, ag_dev_copy_kind kind, void *dst, const void *src, size_t n,
                              ag_dev_stream *s);
    ag_status (*memset_async)(void *impl, void *dst, int value, size_t n, ag_dev_stream *s);
    ag_status (*launch)(void *impl, ag_dev_stream *s, ag_dev_kernel_fn fn, void *arg, const char *name);
    ag_status (*stream_create)(void *impl, ag_dev_stream **out);
    void (*stream_destroy)(void *impl, ag_dev_stream *s);
    ag_status (*stream_synchronize)(void *impl, ag_dev_stream *s);
    ag_status (*event_create)(void *impl, ag_dev_event **out);
    void (*event_destroy)(void *impl, ag_dev_event *e);
    ag_status (*event_record)(void *impl, ag_dev_event *e, ag_dev_stream *s);
    ag_status (*stream_wait_event)(void *impl, ag_dev_stream *s, ag_dev_event *e);
    ag_status (*event_query)(void *impl, ag_dev_event *e, bool *done);
    ag_status (*event_synchronize)(void *impl, ag_dev_event *e);
    ag_status (*capture_begin)(void *impl, ag_dev_stream *s);
    ag_status (*capture_end)(void *impl, ag_dev_stream *s, ag_dev_graph **out);
    ag_status (*graph_launch)(void *impl, ag_dev_graph *g, ag_dev_stream *s);
    void (*graph_destroy)(void *impl, ag_dev_graph *g);
    ag_status (*synchronize)(void *impl);
    ag_dev_state (*state)(void *impl, const char **why);
    void (*poison)(void *impl, const char *why);
    void (*stats)(void *impl, ag_dev_stats *out);
    /* Members added later go here, at the end; a table whose size stops
     * short of one lacks that entry (see AG_DEVICE_OPS_SIZE_V1). */
    ag_status (*launch_copy)(void *impl, ag_dev_stream *s, ag_dev_kernel_fn fn, const void *args, size_t n,
                             const char *name);
    ag_status (*stream_query)(void *impl, ag_dev_stream *s, bool *idle);
    ag_status (*stream_capturing)(void *impl, ag_dev_stream *s, bool *capturing);
    ag_status (*event_record_eager)(void *impl, ag_dev_event *e, ag_dev_stream *s, bool *recorded);
    ag_status (*stream_wait_event_eager)(void *impl, ag_dev_stream *s, ag_dev_event *e, bool *enqueued);
} ag_device_ops;

/* Size of the first table (up to and including stats).  A backend built
 * against it still works: ag_dev_launch_copy then fails with
 * AG_EUNSUPPORTED. */
#define AG_DEVICE_OPS_SIZE_V1 offsetof(ag_device_ops, launch_copy)
/* Size of the second table (up to and including launch_copy): without
 * stream_query, which then fails with AG_EUNSUPPORTED. */
#define AG_DEVICE_OPS_SIZE_V2 offsetof(ag_device_ops, stream_query)
/* Size of the third table (up to and including stream_query): without
 * stream_capturing, which then fails with AG_EUNSUPPORTED, and the eager
 * record and wait, which then do what event_record and stream_wait_event
 * do. */
#define AG_DEVICE_OPS_SIZE_V3 offsetof(ag_device_ops, stream_capturing)

/* Wraps a backend in a device handle.  ops (static) and impl are borrowed
 * until ag_device_destroy, which calls ops->destroy(impl).  ops->size must be
 * at least AG_DEVICE_OPS_SIZE_V1, and every entry the size covers must be
 * set.  AG_ENOMEM leaves impl untouched (the caller frees it). */
ag_status ag_device_create(ag_ctx *ctx, const ag_device_ops *ops, void *impl, ag_device **out);
/* Drains every stream (queued work runs, or is dropped when poisoned), stops
 * the workers and frees every stream, event, graph and allocation the caller
 * left behind.  NULL accepted. */
void ag_device_destroy(ag_device *dev);
/* The backend's name ("sim", "fault"). */
const char *ag_device_backend(const ag_device *dev);
/* The context the device raises its errors on. */
ag_ctx *ag_device_ctx(const ag_device *dev);

/* ---- simulated device (default backend) ----
 * Device memory is host memory obtained through the ctx hook, one host block
 * per allocation, so ASan and Valgrind see exactly which device memory is
 * live (alignment slack is marked inaccessible).  A stream is a worker
 * thread with a FIFO queue; an event names a point in one stream's queue. */
typedef struct ag_device_sim_config {
    size_t size;                    /* sizeof(ag_device_sim_config) */
    uint64_t capacity[AG_MEM_COUNT_]; /* bytes per memory type (0 = that type unavailable) */
} ag_device_sim_config;
/* Defaults: 1 GiB HBM, 256 MiB P2P, 1 GiB HOST (limits, not reservations). */
ag_device_sim_config ag_device_sim_defaults(void);
/* cfg NULL means the defaults.  *out owned by the caller (ag_device_destroy). */
ag_status ag_device_sim_create(ag_ctx *ctx, const ag_device_sim_config *cfg, ag_device **out);

/* ---- fault injection (tests and fault sweeps) ----
 * The entries a wrapper can fail, with the status an injected failure returns
 * (AG_ENOMEM where the real call can run out of a resource, AG_EDEVICE
 * otherwise).  Void entries (frees, destroys, state, stats) never fail. */
#define AG_DEV_ENTRY_LIST(X)                                     \
    X(AG_DEV_E_MEM_ALLOC, "mem_alloc", AG_ENOMEM)                \
    X(AG_DEV_E_MEMCPY, "memcpy_async", AG_EDEVICE)               \
    X(AG_DEV_E_MEMSET, "memset_async", AG_EDEVICE)               \
    X(AG_DEV_E_LAUNCH, "launch", AG_EDEVICE)                     \
    X(AG_DEV_E_STREAM_CREATE, "stream_create", AG_ENOMEM)        \
    X(AG_DEV_E_STREAM_SYNC, "stream_synchronize", AG_EDEVICE)    \
    X(AG_DEV_E_EVENT_CREATE, "event_create", AG_ENOMEM)          \
    X(AG_DEV_E_EVENT_RECORD, "event_record", AG_EDEVICE)         \
    X(AG_DEV_E_STREAM_WAIT, "stream_wait_event", AG_EDEVICE)     \
    X(AG_DEV_E_EVENT_QUERY, "event_query", AG_EDEVICE)           \
    X(AG_DEV_E_EVENT_SYNC, "event_synchronize", AG_EDEVICE)      \
    X(AG_DEV_E_CAPTURE_BEGIN, "capture_begin", AG_EDEVICE)       \
    X(AG_DEV_E_CAPTURE_END, "capture_end", AG_ENOMEM)            \
    X(AG_DEV_E_GRAPH_LAUNCH, "graph_launch", AG_EDEVICE)         \
    X(AG_DEV_E_SYNC, "synchronize", AG_EDEVICE)                  \
    X(AG_DEV_E_STREAM_QUERY, "stream_query", AG_EDEVICE)         \
    X(AG_DEV_E_STREAM_CAPTURING, "stream_capturing", AG_EDEVICE)

typedef enum ag_dev_entry {
#define AG_DEV_ENTRY_ENUM_(e, name, st) e,
    AG_DEV_ENTRY_LIST(AG_DEV_ENTRY_ENUM_)
#undef AG_DEV_ENTRY_ENUM_
    AG_DEV_E_COUNT_
} ag_dev_entry;
#define AG_DEV_ENTRY_BIT(e) (UINT32_C(1) << (e))
#define AG_DEV_ENTRY_ALL ((UINT32_C(1) << AG_DEV_E_COUNT_) - 1u)
/* "mem_alloc", ... or NULL. */
const char *ag_dev_entry_name(ag_dev_entry e);

/* How an injected failure shows. */
typedef enum ag_dev_fault_mode {
    AG_FAULT_RETURN = 0, /* the call fails at once and has no effect */
    AG_FAULT_POISON,     /* the call fails at once and poisons the inner device */
    AG_FAULT_DEFERRED    /* stream work: a failing kernel is enqueued just before the
                          * real call, which then proceeds: a valid call succeeds (one
                          * with wrong arguments keeps its AG_EINVAL) and the device is
                          * poisoned when the stream reaches that point (an
                          * asynchronous device error; on a capturing stream the kernel
                          * is captured too, and poisons the device when a replay of
                          * the graph reaches it, never if the graph is not launched);
                          * other entries: AG_FAULT_RETURN */
} ag_dev_fault_mode;

/* Caller-owned plan and counters of a fault wrapper; must outlive it.  The
 * counters are updated under the wrapper's lock; read them when idle. */
typedef struct ag_dev_fault {
    uint32_t mask;          /* AG_DEV_ENTRY_BIT()s of the entries that count */
    uint64_t fail_at;       /* fail the Nth counted call (1-based); 0 = never */
    int repeat;             /* nonzero: every counted call after it fails too */
    ag_dev_fault_mode mode;
    uint64_t calls;         /* counted calls seen */
    uint64_t nfail;         /* failures injected */
} ag_dev_fault;

/* Resets the counters and arms the plan. */
void ag_dev_fault_init(ag_dev_fault *f, uint32_t mask, uint64_t fail_at, int repeat, ag_dev_fault_mode mode);
/* A device forwarding every entry to inner, failing the calls f selects.
 * inner is borrowed: destroy the wrapper before inner.  Handles made through
 * the wrapper are inner's.  *out owned by the caller (ag_device_destroy). */
ag_status ag_device_fault_wrap(ag_ctx *ctx, ag_device *inner, ag_dev_fault *f, ag_device **out);

/* ---- memory ---- */
/* Allocates bytes (> 0) of the given type, aligned to align (0 = default; a
 * power of two <= AG_DEV_MAX_ALIGN, raised to AG_DEV_MIN_ALIGN).  AG_ENOMEM
 * when the type's capacity would be exceeded or the host is out of memory. */
ag_status ag_dev_mem_alloc(ag_device *dev, ag_mem_type type, size_t bytes, size_t align, void **out);
/* Frees an allocation at once (no waiting: see "Asynchrony").  NULL accepted;
 * a pointer that is not the start of a live allocation is a fatal misuse
 * (assert).  On the simulated device, freeing memory that a stream is copying
 * at that moment poisons the device. */
void ag_dev_mem_free(ag_device *dev, void *ptr);

/* ---- stream work (asynchronous) ---- */
/* Copies n bytes (n == 0 is a no-op) in the direction kind. */
ag_status ag_dev_memcpy_async(ag_device *dev, ag_dev_copy_kind kind, void *dst, const void *src, size_t n,
                              ag_dev_stream *s);
/* Sets n bytes of device memory to (unsigned char)value. */
ag_status ag_dev_memset_async(ag_device *dev, void *dst, int value, size_t n, ag_dev_stream *s);
/* Runs fn(arg) on s.  name (static, may be NULL) names the kernel in errors.
 * arg is passed as is: what it points to must stay valid until the kernel
 * has run, and for as long as a graph that captured the launch is replayed. */
ag_status ag_dev_launch(ag_device *dev, ag_dev_stream *s, ag_dev_kernel_fn fn, void *arg, const char *name);
/* Like ag_dev_launch, but the n bytes at args (0 < n <= AG_DEV_LAUNCH_ARGS_MAX,
 * else AG_EINVAL) are copied during the call, so the caller may reuse args
 * as soon as it returns.  fn receives a pointer to the copy, aligned to
 * AG_DEV_LAUNCH_ARGS_ALIGN; the kernel reads it and must neither write
 * through it nor keep it after returning.  The copy lives until the
 * operation has run (or was dropped) when enqueued directly; when captured,
 * the graph owns it until ag_dev_graph_destroy (and until the replays still
 * queued then have run), and every replay passes the same captured bytes
 * (replays on two streams may read them at once).  Counted as AG_DEV_E_LAUNCH by a fault wrapper.  The
 * simulated device makes one host allocation per call (none per replay):
 * AG_ENOMEM when it fails, with nothing enqueued.  AG_EUNSUPPORTED from a
 * backend whose table predates the entry. */
ag_status ag_dev_launch_copy(ag_device *dev, ag_dev_stream *s, ag_dev_kernel_fn fn, const void *args, size_t n,
                             const char *name);

/* ---- streams ---- */
ag_status ag_dev_stream_create(ag_device *dev, ag_dev_stream **out);
/* Waits until the stream's queued work has run (or was dropped), then frees
 * it.  A capture in progress is abandoned. */
void ag_dev_stream_destroy(ag_device *dev, ag_dev_stream *s);
/* Blocks until all work enqueued on s before the call has run.  AG_EDEVICE
 * if the device is poisoned. */
ag_status ag_dev_stream_synchronize(ag_device *dev, ag_dev_stream *s);
/* *idle = whether all work enqueued on s before the call has completed (run,
 * or dropped by a poisoned device); never blocks.  Like event_query on an
 * event recorded on s at the call, without the event: when it answers idle,
 * host code is ordered after that work.  AG_EINVAL while s is capturing,
 * AG_EDEVICE if the device is poisoned, AG_EUNSUPPORTED for a backend whose
 * table predates the entry. */
ag_status ag_dev_stream_query(ag_device *dev, ag_dev_stream *s, bool *idle);
/* *capturing = whether s is between capture_begin and capture_end now (its
 * work, event records and waits included, goes into a graph instead of
 * running).  An event recorded on a capturing stream stands for nothing the
 * host can wait for until the graph is launched: a caller that orders
 * eager work with events (the allocator) asks first.  Never blocks.
 * AG_EDEVICE if the device is poisoned, AG_EUNSUPPORTED for a backend whose
 * table predates the entry. */
ag_status ag_dev_stream_capturing(ag_device *dev, ag_dev_stream *s, bool *capturing);

/* ---- events ---- */
ag_status ag_dev_event_create(ag_device *dev, ag_dev_event **out);
/* Frees the event; queued waits on it are unaffected (they name the point
 * the event stood for when they were enqueued). */
void ag_dev_event_destroy(ag_device *dev, ag_dev_event *e);
/* The event now stands for "all work enqueued on s so far": it completes when
 * that work has run.  Re-recording moves it to the new point. */
ag_status ag_dev_event_record(ag_device *dev, ag_dev_event *e, ag_dev_stream *s);
/* Work enqueued on s after this call waits until e's current point has
 * completed.  An event never recorded is complete. */
ag_status ag_dev_stream_wait_event(ag_device *dev, ag_dev_stream *s, ag_dev_event *e);
/* The same record and wait for a caller whose event must stand for the
 * stream's eager work (the allocator): on a stream that is not capturing
 * they do what event_record and stream_wait_event do (*recorded,
 * *enqueued true); on a capturing one they do nothing and say so (false),
 * where the plain forms would go into the graph.  The question and the
 * record are one step: a capture begun by another thread meanwhile cannot
 * come between them.  Counted and injected as the plain forms (a fault
 * wrapper's event_record and stream_wait_event entries).  A backend whose
 * table predates them cannot tell: the plain forms, true. */
ag_status ag_dev_event_record_eager(ag_device *dev, ag_dev_event *e, ag_dev_stream *s, bool *recorded);
ag_status ag_dev_stream_wait_event_eager(ag_device *dev, ag_dev_stream *s, ag_dev_event *e, bool *enqueued);
/* *done = whether e's current point has completed (never blocks). */
ag_status ag_dev_event_query(ag_device *dev, ag_dev_event *e, bool *done);
/* Blocks until e's point at the call has completed (a record another
 * thread makes meanwhile is not waited for). */
ag_status ag_dev_event_synchronize(ag_device *dev, ag_dev_event *e);

/* ---- capture and replay ---- */
ag_status ag_dev_capture_begin(ag_device *dev, ag_dev_stream *s);
/* Ends the capture on s; *out owned by the caller (ag_dev_graph_destroy).
 * On failure the capture is still in progress: retry, or destroy the stream. */
ag_status ag_dev_capture_end(ag_device *dev, ag_dev_stream *s, ag_dev_graph **out);
ag_status ag_dev_graph_launch(ag_device *dev, ag_dev_graph *g, ag_dev_stream *s);
void ag_dev_graph_destroy(ag_device *dev, ag_dev_graph *g);

/* ---- device-wide ---- */
/* Blocks until all work on every stream, enqueued before the call, has run,
 * with the work its kernels enqueue meanwhile (work other host threads
 * enqueue meanwhile is not waited for). */
ag_status ag_dev_synchronize(ag_device *dev);
/* Healthy or poisoned; *why (may be NULL) gets the first fault's message
 * ("" when healthy), valid until the device is destroyed. */
ag_dev_state ag_dev_device_state(ag_device *dev, const char **why);
/* Poisons the device with a reason (copied); the first poison wins. */
void ag_dev_poison(ag_device *dev, const char *why);
/* Fills *out (out->size must be set by the caller; fields past it are left). */
void ag_dev_stats_get(ag_device *dev, ag_dev_stats *out);

#ifdef __cplusplus
}
#endif
#endif
