/* Kernel mode: a context that borrows a caller's device and stream and
 * enqueues one bounded asynchronous operation per launch, so launches can be
 * captured into a graph and replayed.  A write-once execution-mode latch, a
 * context phase machine, a content-addressed callable residency cache with
 * generation guards, and a fixed invocation packet that the device-side entry
 * validates again on every execution (seed 004). */
#ifndef ALIASGUARD_KERNEL_H
#define ALIASGUARD_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctx.h"
#include "device.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status codes ----
 * Kernel-mode entries return AG_OK, AG_ENOMEM (host allocation) or one of
 * the kernel band of ag_status (status.h, AG_KERNEL_ERR_*: the seed's
 * values at or below -1000, pinned by a test); ag_status_str names them. */

/* ---- Execution identity ---- */
typedef enum ag_exec_mode {
    AG_EXEC_PROGRAM = 0, /* owns the device; latched by ag_program_init */
    AG_EXEC_KERNEL = 1   /* borrows the caller's device; latched by ag_kernel_mode_init */
} ag_exec_mode;

/* Phases of a kernel context (values pinned). */
typedef enum ag_kernel_phase {
    AG_KPHASE_NEW = 0,
    AG_KPHASE_INITIALIZING = 1,
    AG_KPHASE_COLLECTING = 2,
    AG_KPHASE_READY_ENQUEUED = 3,
    AG_KPHASE_POISONED = 4,
    AG_KPHASE_CLOSING = 5,
    AG_KPHASE_CLOSED = 6
} ag_kernel_phase;
const char *ag_kernel_phase_name(ag_kernel_phase p);

/* ---- Callable image (wire format; offsets pinned by static asserts) ----
 *
 *   0      signature[256]   u32 each: ag_arg_dir, tensors first, scalars last
 *   1024   sig_count        i32, tensors + scalars
 *   1028   binary_size      u32, orchestration binary at storage+0
 *   1032   func_name[64]    NUL-terminated; names the payload consumer
 *   1096   func_name_len    u32, < 64, byte at func_name[len] is NUL
 *   1100   child_func_ids[1024]  i32, distinct, in [0, 1024)
 *   5196   child_offsets[1024]   u32, relative to storage, 64-aligned
 *   9292   child_count      i32
 *   9296   config_name[64], 9360 config_name_len
 *   9364   scalar_count     i32: 0 = not recorded (derive from the signature)
 *   9368   reserved[8]      zero
 *   9376   storage: binary, then each child (144-byte core header, binary at +192)
 *
 * The image pointer must be 16-aligned; the image ends exactly where its
 * last part ends (no trailing bytes). */
typedef enum ag_arg_dir { AG_ARG_SCALAR = 0, AG_ARG_IN = 1, AG_ARG_OUT = 2, AG_ARG_INOUT = 3 } ag_arg_dir;

#define AG_CALLABLE_MAX_ARGS 256       /* tensors + scalars of a callable */
#define AG_CALLABLE_MAX_SCALARS 128
#define AG_CALLABLE_MAX_CHILDREN 1024
#define AG_CALLABLE_MAX_FUNC_ID 1024   /* child func ids in [0, 1024) */
#define AG_CALLABLE_NAME_BYTES 64
#define AG_CALLABLE_ALIGN 64           /* children and arena images */
#define AG_CALLABLE_IMAGE_ALIGN 16     /* the caller's image pointer */
#define AG_CALLABLE_HEADER_BYTES 9376
#define AG_CORE_MAX_ARGS 32
#define AG_CORE_HEADER_BYTES 144
#define AG_CORE_BINARY_OFFSET 192

typedef struct ag_callable_header {
    uint32_t signature[AG_CALLABLE_MAX_ARGS];
    int32_t sig_count;
    uint32_t binary_size;
    char func_name[AG_CALLABLE_NAME_BYTES];
    uint32_t func_name_len;
    int32_t child_func_ids[AG_CALLABLE_MAX_CHILDREN];
    uint32_t child_offsets[AG_CALLABLE_MAX_CHILDREN];
    int32_t child_count;
    char config_name[AG_CALLABLE_NAME_BYTES];
    uint32_t config_name_len;
    int32_t scalar_count;
    uint8_t reserved[8];
} ag_callable_header;

typedef struct ag_core_callable_header {
    uint32_t signature[AG_CORE_MAX_ARGS];
    int32_t sig_count;
    uint32_t binary_size;
    uint64_t resolved_addr; /* device address of the child binary, written at upload */
} ag_core_callable_header;

/* What a builder describes; ag_callable_write lays it out. */
typedef struct ag_callable_child {
    int32_t func_id;
    const ag_arg_dir *signature;
    uint32_t sig_count;
    const void *binary;
    uint32_t binary_size;
} ag_callable_child;

typedef struct ag_callable_desc {
    const char *func_name;   /* required, < 64 bytes */
    const char *config_name; /* optional (NULL = "") */
    const ag_arg_dir *signature;
    uint32_t sig_count;
    int32_t scalar_count;    /* 0 = not recorded; otherwise must match the signature */
    const void *binary;
    uint32_t binary_size;
    const ag_callable_child *children;
    uint32_t child_count;
} ag_callable_desc;

/* Bytes the image of desc takes (canonical packing). */
ag_status ag_callable_image_size(ag_ctx *ctx, const ag_callable_desc *desc, size_t *size);
/* Writes the image of desc into buf (16-aligned, exactly ag_callable_image_size bytes). */
ag_status ag_callable_write(ag_ctx *ctx, const ag_callable_desc *desc, void *buf, size_t size);

/* Facts read from a validated image. */
typedef struct ag_callable_info {
    int32_t tensor_count;
    int32_t scalar_count;  /* effective: the field when nonzero, else the signature's SCALARs */
    int32_t child_count;
    size_t bytes;
    char func_name[AG_CALLABLE_NAME_BYTES];
} ag_callable_info;
/* Full structural validation (the one every entry point uses); AG_OK or
 * AG_KERNEL_ERR_INVALID_ARGUMENT with a message naming the field. */
ag_status ag_callable_validate(ag_ctx *ctx, const void *image, size_t size, ag_callable_info *info);

/* ---- Handles, launch arguments, wire packets ---- */
typedef struct ag_callable_handle {
    int32_t callable_id; /* context-local, issued sequentially */
    uint32_t reserved;
    uint64_t generation; /* the context generation; 0 = invalid */
} ag_callable_handle;

/* A tensor argument: a caller-owned device address, never read on the host. */
typedef struct ag_kernel_tensor {
    uint64_t addr;
    uint64_t bytes;
} ag_kernel_tensor;

typedef struct ag_kernel_args {
    uint32_t tensor_count;
    uint32_t scalar_count;
    const ag_kernel_tensor *tensors;
    const uint64_t *scalars;
} ag_kernel_args;

/* Invocation header (40 bytes, pointer-free, little-endian host layout). */
typedef struct ag_kernel_invocation_header {
    uint32_t mode;          /* ag_exec_mode of the issuer; must be KERNEL */
    int32_t callable_id;
    uint64_t generation;    /* occupancy generation of the residency slot; 0 = not recorded */
    uint64_t payload_bytes; /* runtime payload that follows the packet prefix */
    int32_t tensor_count;
    int32_t scalar_count;   /* effective count (derived when the image records 0) */
    int32_t host_copy_tensor_count; /* reserved for a future contract; must be 0 */
    uint32_t reserved;      /* zero */
} ag_kernel_invocation_header;

/* Dispatch packet prefix (56 bytes); payload follows: tensor_count
 * ag_kernel_tensor entries, then scalar_count uint64 scalars. */
typedef struct ag_kernel_dispatch_packet {
    uint64_t packet_bytes;      /* prefix + payload */
    uint64_t residency_address; /* the issuing context's descriptor slot */
    ag_kernel_invocation_header header;
} ag_kernel_dispatch_packet;

/* Residency descriptor of one slot (32 bytes, device memory). */
typedef struct ag_kernel_residency {
    uint64_t generation;
    uint64_t device_address; /* uploaded image */
    uint64_t bytes;
    int32_t callable_id;
    uint32_t reserved;       /* zero */
} ag_kernel_residency;

#define AG_KERNEL_PACKET_PREFIX_BYTES 56
#define AG_KERNEL_MAX_TENSORS 256
#define AG_KERNEL_MAX_PAYLOAD_BYTES \
    (AG_KERNEL_MAX_TENSORS * sizeof(ag_kernel_tensor) + AG_CALLABLE_MAX_SCALARS * sizeof(uint64_t))

/* Status of a device-side execution (distinct from host codes). */
typedef enum ag_kernel_dispatch_status {
    AG_KDISPATCH_SUCCESS = 0,
    AG_KDISPATCH_INVALID_ARGS = 1,
    AG_KDISPATCH_NOT_RESIDENT = 2,
    AG_KDISPATCH_STALE = 3,
    AG_KDISPATCH_UNSUPPORTED_PAYLOAD = 4,
    AG_KDISPATCH_PAYLOAD_REJECTED = 5 /* a consumer refused its arguments */
} ag_kernel_dispatch_status;

/* ---- Payload consumers (run on the device, after validation) ---- */
typedef struct ag_kernel_invocation {
    const ag_kernel_invocation_header *header;
    const ag_kernel_residency *resident; /* the snapshot that was validated */
    const ag_callable_header *image;     /* resident image, device memory */
    const ag_kernel_tensor *tensors;
    const uint64_t *scalars;
} ag_kernel_invocation;

/* Returns an ag_kernel_dispatch_status. */
typedef int (*ag_kernel_consumer_fn)(void *ud, const ag_kernel_invocation *inv);
typedef struct ag_kernel_consumer {
    const char *name; /* matched against the callable's func_name */
    ag_kernel_consumer_fn run;
    void *ud;
} ag_kernel_consumer;

/* Built-in consumers (float32 tensors, scalars as float bit patterns in the
 * low 32 bits):
 *   "ag.scaled_add"  IN x, IN y, OUT z; SCALAR alpha:  z = x + alpha * y
 *   "ag.fill"        OUT z; SCALAR value:             z = value
 *   "ag.copy"        IN x, OUT z:                       z = x */
#define AG_KERNEL_CONSUMER_SCALED_ADD "ag.scaled_add"
#define AG_KERNEL_CONSUMER_FILL "ag.fill"
#define AG_KERNEL_CONSUMER_COPY "ag.copy"

/* ---- Context-static configuration ---- */
typedef struct ag_kernel_config {
    size_t size;              /* sizeof(ag_kernel_config) */
    uint32_t max_callables;   /* residency slots (default 64) */
    uint64_t arena_bytes;     /* image budget = arena size (default 512 MiB) */
    const ag_kernel_consumer *consumers; /* extra consumers, copied at init */
    uint32_t consumer_count;
} ag_kernel_config;
ag_kernel_config ag_kernel_config_defaults(void);

/* ---- The execution context ---- */
typedef struct ag_exec_context ag_exec_context;

/* Creates a mode-less context; the first init latches its identity. */
ag_status ag_exec_context_create(ag_ctx *ctx, ag_exec_context **out);
/* Frees the context.  Refuses (AG_KERNEL_ERR_INVALID_STATE, nothing freed)
 * while a kernel context still owns device resources: finalize first.  The
 * borrowed device must still be alive.  NULL is accepted. */
ag_status ag_exec_context_destroy(ag_exec_context *ec);
/* The latched mode; false when nothing latched yet. */
bool ag_exec_context_mode(const ag_exec_context *ec, ag_exec_mode *mode);
ag_kernel_phase ag_kernel_phase_of(const ag_exec_context *ec);
/* First cause of poisoning and first teardown failure (AG_OK when none). */
ag_status ag_kernel_runtime_error(const ag_exec_context *ec);
ag_status ag_kernel_teardown_error(const ag_exec_context *ec);

/* Program-mode init: latches PROGRAM before anything else; a KERNEL context
 * refuses with AG_KERNEL_ERR_INVALID_STATE.  Idempotent for PROGRAM. */
ag_status ag_program_init(ag_exec_context *ec, ag_device *dev);

/* Nonzero when this context can execute kernel launches. */
int ag_kernel_mode_supported(const ag_exec_context *ec);

/* Kernel-mode init.  Borrows dev (never resets, synchronizes or destroys
 * it; the device has no per-thread binding to change).  generation: nonzero,
 * not all-ones, unique per context in the process (the caller mints it).
 * Creates the context's own 2 streams and 5 events and its persistent device
 * state (runtime image, register table, kernel args, residency descriptors,
 * dispatch report), and runs the one-shot device init on its own stream.
 * Order of refusals: arguments and config (INVALID_ARGUMENT), phase not New
 * (INVALID_STATE), latch held by PROGRAM (INVALID_STATE).  A refusal before
 * the latch leaves the context untouched; a failure after it leaves the
 * context KERNEL for good: New again when everything was rolled back (init
 * may be retried), otherwise Poisoned or Closing (finalize it). */
ag_status ag_kernel_mode_init(ag_exec_context *ec, ag_device *dev, const ag_kernel_config *config,
                              uint64_t generation);

/* Makes a callable image resident and returns its handle.  Outside capture;
 * may allocate and copy.  Identical content returns the original handle
 * (even when the cache is full).  Any failure leaves existing residents and
 * accounting as they were (*out = {-1, 0, 0}). */
ag_status ag_kernel_mode_prepare_callable(ag_exec_context *ec, const void *callable, size_t callable_size,
                                          ag_callable_handle *out);

/* Enqueues one bounded asynchronous operation on caller_stream: the
 * device-side entry, its packet passed by value (ag_dev_launch_copy: the
 * seam keeps the copy, a captured graph keeps it for every replay).  No
 * allocation by the context, no synchronize, no capture query; capturable.  Host refusals: arguments
 * (INVALID_ARGUMENT; id beyond the slots COUNT_EXCEEDED), phase
 * (INVALID_STATE), handle (NOT_RESIDENT, STALE), counts against the
 * callable's signature (INVALID_ARGUMENT).  Device refusals surface through
 * the caller's stream. */
ag_status ag_kernel_mode_launch(ag_exec_context *ec, ag_callable_handle handle, const ag_kernel_args *args,
                                ag_dev_stream *caller_stream);

/* Closes a kernel context: retires every descriptor slot (captured packets
 * of this context are then rejected as stale), releases the arena, persistent
 * state, events and streams.  Never resets the device, never exits.  A
 * failure leaves the context Closing with what is left; call again to retry.
 * Idempotent once Closed; the caller has stopped launching and drained. */
ag_status ag_kernel_mode_finalize(ag_exec_context *ec);

/* Cache accounting. */
typedef struct ag_kernel_residency_stats {
    uint32_t resident_count;  /* committed callables */
    uint64_t resident_bytes;  /* charged arena bytes (64-aligned sizes) */
    uint64_t image_bytes;     /* sum of unique image sizes */
    uint64_t arena_bytes;     /* 0 until the arena is allocated */
} ag_kernel_residency_stats;
ag_status ag_kernel_residency_stats_of(const ag_exec_context *ec, ag_kernel_residency_stats *out);

/* What the device-side entry has done for this context, eager and replayed
 * executions alike.  A rejected execution runs no consumer and fails on its
 * stream (the simulated device then reports the fault); the report keeps
 * the reason.  Read after synchronizing the streams concerned. */
typedef struct ag_kernel_dispatch_report {
    uint64_t executions; /* entries run (accepted or not) */
    uint64_t rejections; /* refused before or by the consumer */
    uint32_t last_status;         /* ag_kernel_dispatch_status of the latest execution */
    uint32_t first_reject_status; /* of the first refusal (0 = none) */
} ag_kernel_dispatch_report;
ag_status ag_kernel_dispatch_report_of(const ag_exec_context *ec, ag_kernel_dispatch_report *out);

/* The device-side entry: validates packet against the context's current
 * residency descriptor (order in docs/kernel.md), then runs the consumer.
 * kernel_args is the context's persistent kernel-args block.  Returns an
 * ag_kernel_dispatch_status.  Exposed so tests can hand it malformed packets. */
int ag_kernel_device_exec(const void *kernel_args, const void *packet);

#ifdef __cplusplus
}
#endif
#endif
