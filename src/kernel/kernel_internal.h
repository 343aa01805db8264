/* Kernel-mode internals: the execution-mode latch, the context phase machine
 * with its restricted operation table, the residency cache, the shared entry
 * validation and the device-side layouts (runtime image, register table,
 * kernel args).  Each piece takes a small table of function pointers, so the
 * forbidden operations (synchronize on launch, reset, capture queries, model
 * attachment) cannot even be expressed, and tests can supply fakes. */
#ifndef AG_KERNEL_INTERNAL_H
#define AG_KERNEL_INTERNAL_H

#include "aliasguard/kernel.h"
#include "core/internal.h"

/* Converts an int code of the kernel band to ag_status (see kernel.h). */
#define AG_KST(code) ((ag_status)(code))

/* ---- latch.c: write-once execution identity ---- */
typedef struct ag_mode_latch {
    bool latched;
    ag_exec_mode mode; /* meaningful only when latched */
} ag_mode_latch;
/* Latches mode; idempotent for the held mode, INVALID_STATE for the other.
 * There is no unlatch: neither finalize nor an error clears it. */
ag_status ag_latch_set(ag_mode_latch *l, ag_exec_mode mode);
bool ag_latch_is_kernel(const ag_mode_latch *l);

/* ---- state.c: the phase machine ---- */
enum { AG_KSTREAM_AICPU, AG_KSTREAM_AICORE, AG_KSTREAM_COUNT };
enum { AG_KEVENT_START, AG_KEVENT_AICORE_START, AG_KEVENT_AICORE_DONE, AG_KEVENT_AICPU_DONE,
       AG_KEVENT_SERIAL_TAIL, AG_KEVENT_COUNT };

/* Init/close vocabulary: nothing else can be asked of the device here. */
typedef struct ag_kcontext_ops {
    void *ud;
    ag_status (*create_stream)(void *ud, int kind, void **stream);
    ag_status (*destroy_stream)(void *ud, void *stream);
    ag_status (*create_event)(void *ud, int kind, void **event);
    ag_status (*destroy_event)(void *ud, void *event);
} ag_kcontext_ops;
bool ag_kcontext_ops_valid(const ag_kcontext_ops *ops);

typedef struct ag_kstate {
    ag_kernel_phase phase;
    uint64_t generation;    /* 0 until initialized */
    ag_kcontext_ops ops;
    bool has_ops;
    void *streams[AG_KSTREAM_COUNT];
    void *events[AG_KEVENT_COUNT];
    ag_status runtime_error;  /* first poison cause */
    ag_status teardown_error; /* first cleanup failure */
} ag_kstate;

void ag_kstate_init(ag_kstate *s);
/* New -> Collecting: creates 2 streams then 5 events.  A creation failure rolls back (New, context reusable); a failing
 * rollback leaves Closing with the cleanup error latched. */
ag_status ag_kstate_initialize(ag_ctx *ctx, ag_kstate *s, const ag_kcontext_ops *ops, uint64_t generation);
ag_status ag_kstate_mark_ready_enqueued(ag_ctx *ctx, ag_kstate *s);
/* Collecting/ReadyEnqueued -> Poisoned; the first cause is kept; otherwise ignored. */
void ag_kstate_poison(ag_kstate *s, ag_status cause);
bool ag_kstate_accepts_dispatch(const ag_kstate *s);
bool ag_kstate_has_live_resources(const ag_kstate *s);
/* Optional hook run first by close to release other context-owned resources;
 * a failure keeps every stream and event for the retry. */
typedef ag_status (*ag_kstate_release_fn)(void *ud);
/* See the table in docs/kernel.md: New -> Closed; open phases -> Closing ->
 * Closed on full success; failure stays Closing (retriable). */
ag_status ag_kstate_close(ag_ctx *ctx, ag_kstate *s, ag_kstate_release_fn release, void *ud);

/* ---- validate.c: shared entry validation (mutates nothing) ---- */
ag_status ag_kvalidate_init(ag_ctx *ctx, const void *ec, const void *dev, const ag_kernel_config *config,
                            uint64_t generation);
ag_status ag_kvalidate_prepare(ag_ctx *ctx, const void *ec, const void *callable, size_t size, const void *out);
ag_status ag_kvalidate_launch(ag_ctx *ctx, const void *ec, ag_callable_handle h, const ag_kernel_args *args,
                              const void *stream, uint32_t max_callables);
/* The seed's counting rule over a signature: entries in SCALAR..INOUT, no
 * tensor after a scalar, counts in range; tensor and scalar counts derived.  The
 * recorded scalar_count (0 = not recorded) must agree when nonzero. */
ag_status ag_kderive_counts(ag_ctx *ctx, const uint32_t *sig, int32_t sig_count, int32_t recorded_scalars,
                            int32_t *tensors, int32_t *scalars);

/* ---- residency.c: the callable residency cache ---- */
typedef struct ag_hash128 {
    uint64_t lo, hi;
} ag_hash128;
typedef ag_hash128 (*ag_khash_fn)(const void *p, size_t n);
ag_hash128 ag_khash_xxh3(const void *p, size_t n);

/* Cache vocabulary: device allocation and release, H2D copies and the child
 * patch enqueued on the context's own stream, and waiting for that stream.
 * A copy's source stays valid until wait has returned AG_OK. */
typedef struct ag_residency_entry ag_residency_entry;
typedef struct ag_residency_ops {
    void *ud;
    ag_status (*allocate)(void *ud, uint64_t bytes, uint64_t *addr);
    ag_status (*release)(void *ud, uint64_t addr);
    ag_status (*copy_h2d)(void *ud, uint64_t dst, const void *src, uint64_t bytes);
    /* Writes each child's resolved_addr in the device copy of e's image. */
    ag_status (*patch_children)(void *ud, const ag_residency_entry *e);
    ag_status (*wait)(void *ud);
} ag_residency_ops;

struct ag_residency_entry {
    ag_kernel_residency res;     /* what was uploaded to the descriptor slot */
    uint64_t descriptor_address;
    uint64_t charged;            /* align_up(bytes, 64) */
    ag_hash128 hash;
    void *host_copy;             /* immutable copy for byte comparison */
    ag_callable_info info;
    bool ready;
};

#define AG_RESIDENCY_RETIRED_GENERATION UINT64_MAX

typedef struct ag_residency {
    ag_ctx *ctx;
    uint32_t max_ids;
    uint64_t byte_limit;
    uint64_t used;         /* charged bytes, staged candidate included */
    uint64_t generation;   /* context generation; 0 = not set */
    bool closing;
    uint64_t arena;        /* 0 until the first miss */
    uint64_t descriptors;  /* max_ids x 32 bytes; outlives close until destroy */
    ag_residency_entry *entries; /* max_ids slots, count used */
    uint32_t count;
    ag_khash_fn hash;
} ag_residency;

/* Host-side setup (entries array); no device call. */
ag_status ag_residency_init(ag_ctx *ctx, ag_residency *c, uint32_t max_ids, uint64_t byte_limit);
/* Frees host metadata only. */
void ag_residency_free(ag_residency *c);
/* Allocates and zeroes the descriptor table; sets the generation. */
ag_status ag_residency_open(ag_residency *c, const ag_residency_ops *ops, uint64_t generation);
/* Stages image: a hit returns the ready entry's handle (*hit); a miss
 * uploads the image and its descriptor as an unready candidate.  On a
 * failure the candidate is removed, unless the stream could not be shown
 * idle afterwards: then it stays (unready, its memory kept for the device)
 * and *poison tells the caller to poison the context. */
ag_status ag_residency_stage(ag_residency *c, const ag_residency_ops *ops, const void *image, size_t bytes,
                             ag_callable_handle *out, bool *hit, bool *poison);
void ag_residency_commit(ag_residency *c, int32_t id);
void ag_residency_rollback(ag_residency *c, int32_t id);
/* Read-only lookup of a launchable entry. */
ag_status ag_residency_resolve(const ag_residency *c, ag_callable_handle h, const ag_residency_entry **out);
uint32_t ag_residency_count(const ag_residency *c);
uint64_t ag_residency_bytes(const ag_residency *c);
uint64_t ag_residency_host_bytes(const ag_residency *c);
/* Close: withdraws host lookups, writes the retired generation into every
 * used descriptor slot, releases the arena, then drops the entries (the
 * accounting reads zero).  Retriable on failure: entries stay until then. */
ag_status ag_residency_close(ag_residency *c, const ag_residency_ops *ops);
/* Close after the device was poisoned: its queued work is dropped, so the
 * arena and host copies go without any device write. */
void ag_residency_abandon(ag_residency *c, const ag_residency_ops *ops);
/* Releases the descriptor table (context destroy). */
ag_status ag_residency_release_descriptors(ag_residency *c, const ag_residency_ops *ops);

/* ---- device-side layouts (device memory, written by the host at init/prepare) ---- */
#define AG_KRUNTIME_MAGIC UINT64_C(0x6167b4e47e1c0de1)
typedef struct ag_kruntime_image {
    uint64_t magic;          /* written by the one-shot device init */
    uint64_t generation;
    uint32_t max_callables;
    uint32_t consumer_count;
    const ag_kernel_consumer *consumers; /* device copy of the consumer table */
} ag_kruntime_image;

typedef struct ag_kregister_entry {
    uint64_t generation;  /* 0: nothing registered */
    int32_t callable_id;
    uint32_t consumer;    /* index into the runtime image's consumer table */
} ag_kregister_entry;

typedef struct ag_kkernel_args {
    uint64_t runtime_image;  /* ag_kruntime_image */
    uint64_t register_table; /* max_callables ag_kregister_entry */
    uint64_t descriptors;    /* max_callables ag_kernel_residency */
    uint64_t max_callables;
    uint64_t report;         /* ag_kernel_dispatch_report, host-visible memory */
    uint64_t reserved;
} ag_kkernel_args;

/* What a launch hands the stream: kernel args address, then the packet. */
typedef struct ag_klaunch_blob {
    uint64_t kernel_args;
    uint64_t reserved;
    ag_kernel_dispatch_packet packet;
} ag_klaunch_blob;
#define AG_KLAUNCH_MAX_BYTES (sizeof(ag_klaunch_blob) + AG_KERNEL_MAX_PAYLOAD_BYTES)
_Static_assert(AG_KLAUNCH_MAX_BYTES <= AG_DEV_LAUNCH_ARGS_MAX, "the largest launch fits the seam's argument copy");
_Static_assert(AG_DEV_LAUNCH_ARGS_ALIGN % 8 == 0, "the device entry needs an 8-aligned packet");

/* dispatch.c: the packet checks before the descriptor is read (steps 1-3). */
int ag_kdispatch_check_packet(const void *packet);
/* consumers.c: built-in table. */
uint32_t ag_kernel_builtin_consumers(const ag_kernel_consumer **out);

#endif
