/* The kernel-mode lifecycle (seed 004): execution context, program/kernel
 * init, callable preparation, launch and close, wired onto the device seam.
 * Each lifecycle piece reaches the device only through its own operation
 * table (ag_kcontext_ops, ag_residency_ops, and launch's single enqueue), so
 * launch cannot synchronize, allocate or inspect a capture. */
#include "kernel/kernel_internal.h"

struct ag_exec_context {
    ag_ctx *ctx;
    ag_mode_latch latch;
    ag_device *dev; /* borrowed from the caller */
    ag_kstate state;
    ag_residency cache;
    bool host_ready; /* config, cache metadata and mirrors allocated */
    uint32_t max_callables;
    uint64_t arena_bytes;
    ag_kernel_consumer *consumers;
    char (*consumer_names)[AG_CALLABLE_NAME_BYTES];
    uint32_t nconsumers;
    /* Host mirrors: the sources of the copies to device memory, stable for
     * the life of the context so a queued copy never reads freed memory. */
    ag_kkernel_args ka;
    ag_kruntime_image rt;
    ag_kregister_entry *reg;
    /* Persistent device state, kept until destroy so that a captured packet
     * replayed after close still finds memory to be rejected by. */
    void *persist; /* kernel args | runtime image | consumer table | register table */
    uint64_t ka_addr, rt_addr, consumers_addr, reg_addr;
    ag_kernel_dispatch_report *report; /* AG_MEM_HOST: written by the device entry */
    unsigned char *blob;               /* launch staging (AG_KLAUNCH_MAX_BYTES) */
};

ag_kernel_config ag_kernel_config_defaults(void)
{
    ag_kernel_config c = {
        .size = sizeof c,
        .max_callables = 64,
        .arena_bytes = UINT64_C(512) << 20,
    };
    return c;
}

/* ---------------------------------------------------------------- device tables */

static ag_status kc_create_stream(void *ud, int kind, void **out)
{
    (void)kind;
    ag_exec_context *ec = ud;
    ag_dev_stream *s = NULL;
    ag_status st = ag_dev_stream_create(ec->dev, &s);
    *out = s;
    return st;
}

static ag_status kc_destroy_stream(void *ud, void *s)
{
    ag_exec_context *ec = ud;
    ag_dev_stream_destroy(ec->dev, s);
    return AG_OK;
}

static ag_status kc_create_event(void *ud, int kind, void **out)
{
    (void)kind;
    ag_exec_context *ec = ud;
    ag_dev_event *e = NULL;
    ag_status st = ag_dev_event_create(ec->dev, &e);
    *out = e;
    return st;
}

static ag_status kc_destroy_event(void *ud, void *e)
{
    ag_exec_context *ec = ud;
    ag_dev_event_destroy(ec->dev, e);
    return AG_OK;
}

static ag_dev_stream *own_stream(const ag_exec_context *ec)
{
    return ec->state.streams[AG_KSTREAM_AICPU];
}

static ag_status rs_allocate(void *ud, uint64_t bytes, uint64_t *addr)
{
    ag_exec_context *ec = ud;
    void *p = NULL;
    if (bytes > SIZE_MAX)
        return AG_ERR(ec->ctx, AG_ENOMEM, "kernel: %llu bytes exceed the address space", (unsigned long long)bytes);
    ag_status st = ag_dev_mem_alloc(ec->dev, AG_MEM_HBM, (size_t)bytes, AG_CALLABLE_ALIGN, &p);
    *addr = (uint64_t)(uintptr_t)p;
    return st;
}

static ag_status rs_release(void *ud, uint64_t addr)
{
    ag_exec_context *ec = ud;
    ag_dev_mem_free(ec->dev, (void *)(uintptr_t)addr);
    return AG_OK;
}

static ag_status rs_copy_h2d(void *ud, uint64_t dst, const void *src, uint64_t bytes)
{
    ag_exec_context *ec = ud;
    return ag_dev_memcpy_async(ec->dev, AG_COPY_H2D, (void *)(uintptr_t)dst, src, (size_t)bytes, own_stream(ec));
}

/* Device side: points each child's resolved_addr at its binary in this copy. */
static ag_status patch_children_kernel(void *arg)
{
    unsigned char *img = arg;
    const ag_callable_header *h = arg;
    for (int32_t k = 0; k < h->child_count; k++) {
        unsigned char *child = img + AG_CALLABLE_HEADER_BYTES + h->child_offsets[k];
        uint64_t resolved = (uint64_t)(uintptr_t)(child + AG_CORE_BINARY_OFFSET);
        memcpy(child + offsetof(ag_core_callable_header, resolved_addr), &resolved, sizeof resolved);
    }
    return AG_OK;
}

static ag_status rs_patch_children(void *ud, const ag_residency_entry *e)
{
    ag_exec_context *ec = ud;
    return ag_dev_launch(ec->dev, own_stream(ec), patch_children_kernel, (void *)(uintptr_t)e->res.device_address,
                         "ag.kernel.patch_children");
}

static ag_status rs_wait(void *ud)
{
    ag_exec_context *ec = ud;
    return ag_dev_stream_synchronize(ec->dev, own_stream(ec));
}

static ag_kcontext_ops context_ops(ag_exec_context *ec)
{
    ag_kcontext_ops o = {ec, kc_create_stream, kc_destroy_stream, kc_create_event, kc_destroy_event};
    return o;
}

static ag_residency_ops residency_ops(ag_exec_context *ec)
{
    ag_residency_ops o = {ec, rs_allocate, rs_release, rs_copy_h2d, rs_patch_children, rs_wait};
    return o;
}

/* ---------------------------------------------------------------- context */

ag_status ag_exec_context_create(ag_ctx *ctx, ag_exec_context **out)
{
    if (!out)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "exec context: no output pointer");
    *out = NULL;
    ag_exec_context *ec = ag_calloc(ctx, 1, sizeof *ec);
    if (!ec)
        return AG_OOM(ctx);
    ec->ctx = ctx;
    ag_kstate_init(&ec->state);
    *out = ec;
    return AG_OK;
}

static void free_host(ag_exec_context *ec)
{
    if (!ec->host_ready)
        return;
    ag_residency_free(&ec->cache);
    ag_free(ec->ctx, ec->consumers, (size_t)ec->nconsumers * sizeof *ec->consumers);
    ag_free(ec->ctx, ec->consumer_names, (size_t)ec->nconsumers * sizeof *ec->consumer_names);
    ag_free(ec->ctx, ec->reg, (size_t)ec->max_callables * sizeof *ec->reg);
    ag_free(ec->ctx, ec->blob, AG_KLAUNCH_MAX_BYTES);
    ec->consumers = NULL;
    ec->consumer_names = NULL;
    ec->reg = NULL;
    ec->blob = NULL;
    ec->host_ready = false;
}

/* Device memory that outlives close; only after every stream is gone. */
static void free_persistent(ag_exec_context *ec)
{
    if (!ec->dev)
        return;
    ag_residency_ops ro = residency_ops(ec);
    (void)ag_residency_release_descriptors(&ec->cache, &ro); /* the seam's free cannot fail */
    ag_dev_mem_free(ec->dev, ec->persist);
    ag_dev_mem_free(ec->dev, ec->report);
    ec->persist = NULL;
    ec->report = NULL;
}

ag_status ag_exec_context_destroy(ag_exec_context *ec)
{
    if (!ec)
        return AG_OK;
    if (ag_kstate_has_live_resources(&ec->state))
        return AG_ERR(ec->ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE),
                      "exec context: destroy refused in phase %s: the context still owns streams and events "
                      "(ag_kernel_mode_finalize first)",
                      ag_kernel_phase_name(ec->state.phase));
    free_persistent(ec);
    free_host(ec);
    ag_free(ec->ctx, ec, sizeof *ec);
    return AG_OK;
}

bool ag_exec_context_mode(const ag_exec_context *ec, ag_exec_mode *mode)
{
    if (!ec || !ec->latch.latched)
        return false;
    if (mode)
        *mode = ec->latch.mode;
    return true;
}

ag_kernel_phase ag_kernel_phase_of(const ag_exec_context *ec)
{
    return ec ? ec->state.phase : AG_KPHASE_NEW;
}

ag_status ag_kernel_runtime_error(const ag_exec_context *ec)
{
    return ec ? ec->state.runtime_error : AG_OK;
}

ag_status ag_kernel_teardown_error(const ag_exec_context *ec)
{
    return ec ? ec->state.teardown_error : AG_OK;
}

ag_status ag_program_init(ag_exec_context *ec, ag_device *dev)
{
    if (!ec || !dev)
        return AG_ERR(ec ? ec->ctx : NULL, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "program init: %s is NULL",
                      ec ? "device" : "context");
    /* The latch comes first: a kernel context is refused before anything
     * of the program path runs. */
    if (ag_latch_set(&ec->latch, AG_EXEC_PROGRAM) != AG_OK)
        return AG_ERR(ec->ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE),
                      "program init: the context is latched KERNEL (an execution identity never changes)");
    return AG_OK;
}

int ag_kernel_mode_supported(const ag_exec_context *ec)
{
    return ec && !(ec->latch.latched && ec->latch.mode == AG_EXEC_PROGRAM);
}

/* ---------------------------------------------------------------- init */

/* Host-side state of a kernel context: consumer table, cache metadata,
 * register mirror, launch staging.  All or nothing. */
static ag_status alloc_host(ag_exec_context *ec, const ag_kernel_config *cfg)
{
    const ag_kernel_consumer *builtins;
    uint32_t nb = ag_kernel_builtin_consumers(&builtins);
    uint32_t n = nb + cfg->consumer_count;
    ec->max_callables = cfg->max_callables;
    ec->arena_bytes = cfg->arena_bytes;
    ec->nconsumers = n;
    ec->consumers = ag_calloc(ec->ctx, n, sizeof *ec->consumers);
    ec->consumer_names = ag_calloc(ec->ctx, n, sizeof *ec->consumer_names);
    ec->reg = ag_calloc(ec->ctx, cfg->max_callables, sizeof *ec->reg);
    ec->blob = ag_calloc(ec->ctx, 1, AG_KLAUNCH_MAX_BYTES);
    ag_status st = (ec->consumers && ec->consumer_names && ec->reg && ec->blob) ? AG_OK : AG_ENOMEM;
    if (st == AG_OK)
        st = ag_residency_init(ec->ctx, &ec->cache, cfg->max_callables, cfg->arena_bytes);
    if (st != AG_OK) {
        ag_free(ec->ctx, ec->consumers, (size_t)n * sizeof *ec->consumers);
        ag_free(ec->ctx, ec->consumer_names, (size_t)n * sizeof *ec->consumer_names);
        ag_free(ec->ctx, ec->reg, (size_t)cfg->max_callables * sizeof *ec->reg);
        ag_free(ec->ctx, ec->blob, AG_KLAUNCH_MAX_BYTES);
        ec->consumers = NULL;
        ec->consumer_names = NULL;
        ec->reg = NULL;
        ec->blob = NULL;
        return AG_OOM(ec->ctx);
    }
    /* Later changes to the caller's config or consumer array have no effect:
     * the table and its names are copied. */
    for (uint32_t k = 0; k < n; k++) {
        const ag_kernel_consumer *src = k < nb ? &builtins[k] : &cfg->consumers[k - nb];
        memcpy(ec->consumer_names[k], src->name, strlen(src->name) + 1);
        ec->consumers[k] = *src;
        ec->consumers[k].name = ec->consumer_names[k];
    }
    ec->host_ready = true;
    return AG_OK;
}

/* Device side, once per context on its own stream: the runtime image
 * becomes valid only when this has run. */
static ag_status device_init_kernel(void *arg)
{
    const ag_kkernel_args *ka = arg;
    ag_kruntime_image *rt = (ag_kruntime_image *)(uintptr_t)ka->runtime_image;
    memset((void *)(uintptr_t)ka->report, 0, sizeof(ag_kernel_dispatch_report));
    rt->magic = AG_KRUNTIME_MAGIC;
    return AG_OK;
}

static uint64_t align64(uint64_t v)
{
    return (v + 63) / 64 * 64;
}

/* Persistent device state: descriptors, the runtime image with its consumer
 * table, the register table, the kernel args, the dispatch report; then the
 * one-shot device init.  Runs on the context's own stream. */
static ag_status init_persistent(ag_exec_context *ec, uint64_t generation)
{
    ag_residency_ops ro = residency_ops(ec);
    AG_TRY(ag_residency_open(&ec->cache, &ro, generation));

    uint64_t ka_off = 0;
    uint64_t rt_off = align64(sizeof(ag_kkernel_args));
    uint64_t cons_off = rt_off + align64(sizeof(ag_kruntime_image));
    uint64_t reg_off = cons_off + align64((uint64_t)ec->nconsumers * sizeof(ag_kernel_consumer));
    uint64_t total = reg_off + (uint64_t)ec->max_callables * sizeof(ag_kregister_entry);
    ag_status st = ag_dev_mem_alloc(ec->dev, AG_MEM_HBM, (size_t)total, AG_CALLABLE_ALIGN, &ec->persist);
    if (st != AG_OK)
        return st;
    st = ag_dev_mem_alloc(ec->dev, AG_MEM_HOST, sizeof(ag_kernel_dispatch_report), AG_CALLABLE_ALIGN,
                          (void **)&ec->report);
    if (st != AG_OK)
        return st;
    uint64_t base = (uint64_t)(uintptr_t)ec->persist;
    ec->ka_addr = base + ka_off;
    ec->rt_addr = base + rt_off;
    ec->consumers_addr = base + cons_off;
    ec->reg_addr = base + reg_off;
    ec->rt = (ag_kruntime_image){
        .magic = 0,
        .generation = generation,
        .max_callables = ec->max_callables,
        .consumer_count = ec->nconsumers,
        .consumers = (const ag_kernel_consumer *)(uintptr_t)ec->consumers_addr,
    };
    ec->ka = (ag_kkernel_args){
        .runtime_image = ec->rt_addr,
        .register_table = ec->reg_addr,
        .descriptors = ec->cache.descriptors,
        .max_callables = ec->max_callables,
        .report = (uint64_t)(uintptr_t)ec->report,
    };
    ag_dev_stream *s = own_stream(ec);
    st = ag_dev_memcpy_async(ec->dev, AG_COPY_H2D, (void *)(uintptr_t)ec->ka_addr, &ec->ka, sizeof ec->ka, s);
    if (st == AG_OK)
        st = ag_dev_memcpy_async(ec->dev, AG_COPY_H2D, (void *)(uintptr_t)ec->rt_addr, &ec->rt, sizeof ec->rt, s);
    if (st == AG_OK)
        st = ag_dev_memcpy_async(ec->dev, AG_COPY_H2D, (void *)(uintptr_t)ec->consumers_addr, ec->consumers,
                                 (size_t)ec->nconsumers * sizeof *ec->consumers, s);
    if (st == AG_OK)
        st = ag_dev_memcpy_async(ec->dev, AG_COPY_H2D, (void *)(uintptr_t)ec->reg_addr, ec->reg,
                                 (size_t)ec->max_callables * sizeof *ec->reg, s);
    if (st == AG_OK)
        st = ag_dev_launch(ec->dev, s, device_init_kernel, (void *)(uintptr_t)ec->ka_addr, "ag.kernel.device_init");
    if (st == AG_OK)
        st = ag_dev_stream_synchronize(ec->dev, s);
    return st;
}

ag_status ag_kernel_mode_init(ag_exec_context *ec, ag_device *dev, const ag_kernel_config *config,
                              uint64_t generation)
{
    ag_ctx *ctx = ec ? ec->ctx : NULL;
    AG_TRY(ag_kvalidate_init(ctx, ec, dev, config, generation));
    ag_kernel_config cfg = config ? *config : ag_kernel_config_defaults();
    if (ec->state.phase != AG_KPHASE_NEW || ec->host_ready)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE),
                      "kernel init: the context is in phase %s (init runs once, on a New context)",
                      ag_kernel_phase_name(ec->state.phase));
    if (ec->latch.latched && ec->latch.mode == AG_EXEC_PROGRAM)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE),
                      "kernel init: the context is latched PROGRAM (an execution identity never changes)");
    /* Host allocations come before the latch, so running out of host memory
     * leaves a context that is still free to become either mode. */
    AG_TRY(alloc_host(ec, &cfg));
    (void)ag_latch_set(&ec->latch, AG_EXEC_KERNEL); /* checked just above */
    ec->dev = dev;
    ag_kcontext_ops ops = context_ops(ec);
    ag_status st = ag_kstate_initialize(ctx, &ec->state, &ops, generation);
    if (st != AG_OK) {
        if (ec->state.phase == AG_KPHASE_NEW) {
            /* Fully rolled back: init may be tried again (still KERNEL). */
            free_host(ec);
            ec->dev = NULL;
        }
        return st;
    }
    st = init_persistent(ec, generation);
    if (st != AG_OK) {
        ag_kstate_poison(&ec->state, st);
        return AG_ERR(ctx, st,
                      "kernel init: preparing the persistent device state failed (%s); the context is Poisoned "
                      "and must be finalized",
                      ag_status_str(st));
    }
    return AG_OK;
}

/* ---------------------------------------------------------------- prepare */

static bool kernel_accepting(const ag_exec_context *ec)
{
    return ag_latch_is_kernel(&ec->latch) && ag_kstate_accepts_dispatch(&ec->state);
}

static ag_status refuse_phase(ag_exec_context *ec, const char *entry)
{
    if (!ag_latch_is_kernel(&ec->latch))
        return AG_ERR(ec->ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE), "kernel %s: the context is %s", entry,
                      ec->latch.latched ? "latched PROGRAM" : "not initialized for kernel mode");
    return AG_ERR(ec->ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE), "kernel %s: the context is %s", entry,
                  ag_kernel_phase_name(ec->state.phase));
}

/* Device-side registration: the register table entry that binds the id to
 * its consumer for this generation.  On failure the entry is cleared again
 * (once the stream is idle) so the slot reads as unregistered. */
static ag_status register_callable(ag_exec_context *ec, int32_t id, uint32_t consumer, bool *poison)
{
    ag_dev_stream *s = own_stream(ec);
    uint64_t dst = ec->reg_addr + (uint64_t)id * sizeof(ag_kregister_entry);
    ec->reg[id] = (ag_kregister_entry){.generation = ec->cache.generation, .callable_id = id, .consumer = consumer};
    ag_status st = ag_dev_memcpy_async(ec->dev, AG_COPY_H2D, (void *)(uintptr_t)dst, &ec->reg[id],
                                       sizeof ec->reg[id], s);
    if (st == AG_OK)
        st = ag_dev_stream_synchronize(ec->dev, s);
    if (st != AG_OK) {
        *poison = ag_dev_stream_synchronize(ec->dev, s) != AG_OK;
        if (!*poison)
            memset(&ec->reg[id], 0, sizeof ec->reg[id]);
    }
    return st;
}

ag_status ag_kernel_mode_prepare_callable(ag_exec_context *ec, const void *callable, size_t callable_size,
                                          ag_callable_handle *out)
{
    ag_ctx *ctx = ec ? ec->ctx : NULL;
    if (out)
        *out = (ag_callable_handle){.callable_id = -1};
    AG_TRY(ag_kvalidate_prepare(ctx, ec, callable, callable_size, out));
    if (!kernel_accepting(ec))
        return refuse_phase(ec, "prepare");
    ag_residency_ops ro = residency_ops(ec);
    ag_callable_handle h;
    bool hit = false, poison = false;
    ag_status st = ag_residency_stage(&ec->cache, &ro, callable, callable_size, &h, &hit, &poison);
    if (st != AG_OK) {
        if (poison)
            ag_kstate_poison(&ec->state, st);
        return st;
    }
    if (hit) {
        *out = h;
        return AG_OK;
    }
    const ag_residency_entry *e = &ec->cache.entries[h.callable_id];
    uint32_t consumer = 0;
    while (consumer < ec->nconsumers && strcmp(ec->consumers[consumer].name, e->info.func_name) != 0)
        consumer++;
    if (consumer == ec->nconsumers) {
        ag_status err = AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_UNSUPPORTED),
                               "kernel prepare: callable '%s' names no payload consumer of this context",
                               e->info.func_name);
        ag_residency_rollback(&ec->cache, h.callable_id);
        return err;
    }
    st = register_callable(ec, h.callable_id, consumer, &poison);
    if (st != AG_OK) {
        if (poison) {
            ag_kstate_poison(&ec->state, st);
            return AG_ERR(ctx, st, "kernel prepare: registering id %d failed (%s) and the stream could not be "
                                   "shown idle; the context is Poisoned",
                          h.callable_id, ag_status_str(st));
        }
        ag_residency_rollback(&ec->cache, h.callable_id);
        return AG_ERR(ctx, st, "kernel prepare: registering id %d failed (%s); nothing was admitted", h.callable_id,
                      ag_status_str(st));
    }
    st = ag_kstate_mark_ready_enqueued(ctx, &ec->state);
    if (st != AG_OK) {
        ag_residency_rollback(&ec->cache, h.callable_id);
        return st;
    }
    ag_residency_commit(&ec->cache, h.callable_id);
    *out = h;
    return AG_OK;
}

/* ---------------------------------------------------------------- launch */

/* The stream-side wrapper of the device entry: runs it, keeps the report,
 * and fails the operation on a refusal (the device reports the fault). */
static ag_status entry_kernel(void *arg)
{
    const ag_klaunch_blob *b = arg;
    const void *ka = (const void *)(uintptr_t)b->kernel_args;
    int rc = ag_kernel_device_exec(ka, &b->packet);
    if (ka && (uintptr_t)ka % 8 == 0) {
        const ag_kkernel_args *args = ka;
        ag_kernel_dispatch_report *r = (ag_kernel_dispatch_report *)(uintptr_t)args->report;
        __atomic_fetch_add(&r->executions, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&r->last_status, (uint32_t)rc, __ATOMIC_RELAXED);
        if (rc != AG_KDISPATCH_SUCCESS) {
            uint32_t none = 0;
            __atomic_fetch_add(&r->rejections, 1, __ATOMIC_RELAXED);
            __atomic_compare_exchange_n(&r->first_reject_status, &none, (uint32_t)rc, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED);
        }
    }
    switch (rc) {
    case AG_KDISPATCH_SUCCESS:
        return AG_OK;
    case AG_KDISPATCH_NOT_RESIDENT:
        return AG_KST(AG_KERNEL_ERR_NOT_RESIDENT);
    case AG_KDISPATCH_STALE:
        return AG_KST(AG_KERNEL_ERR_STALE);
    case AG_KDISPATCH_UNSUPPORTED_PAYLOAD:
        return AG_KST(AG_KERNEL_ERR_UNSUPPORTED);
    default:
        return AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT);
    }
}

ag_status ag_kernel_mode_launch(ag_exec_context *ec, ag_callable_handle handle, const ag_kernel_args *args,
                                ag_dev_stream *caller_stream)
{
    ag_ctx *ctx = ec ? ec->ctx : NULL;
    AG_TRY(ag_kvalidate_launch(ctx, ec, handle, args, caller_stream,
                               ec && ec->max_callables ? ec->max_callables : 64));
    if (!kernel_accepting(ec))
        return refuse_phase(ec, "launch");
    const ag_residency_entry *e = NULL;
    AG_TRY(ag_residency_resolve(&ec->cache, handle, &e));
    if ((int32_t)args->tensor_count != e->info.tensor_count || (int32_t)args->scalar_count != e->info.scalar_count)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT),
                      "kernel launch: callable '%s' (id %d) takes %d tensors and %d scalars, got %u and %u",
                      e->info.func_name, handle.callable_id, e->info.tensor_count, e->info.scalar_count,
                      args->tensor_count, args->scalar_count);
    size_t tbytes = (size_t)args->tensor_count * sizeof(ag_kernel_tensor);
    size_t sbytes = (size_t)args->scalar_count * sizeof(uint64_t);
    ag_klaunch_blob *b = (ag_klaunch_blob *)(void *)ec->blob;
    memset(b, 0, sizeof *b);
    b->kernel_args = ec->ka_addr;
    b->packet.packet_bytes = AG_KERNEL_PACKET_PREFIX_BYTES + tbytes + sbytes;
    b->packet.residency_address = e->descriptor_address;
    b->packet.header = (ag_kernel_invocation_header){
        .mode = AG_EXEC_KERNEL,
        .callable_id = handle.callable_id,
        .generation = handle.generation,
        .payload_bytes = tbytes + sbytes,
        .tensor_count = (int32_t)args->tensor_count,
        .scalar_count = (int32_t)args->scalar_count,
    };
    unsigned char *payload = ec->blob + sizeof *b;
    if (tbytes)
        memcpy(payload, args->tensors, tbytes);
    if (sbytes)
        memcpy(payload + tbytes, args->scalars, sbytes);
    /* One operation on the caller's stream, arguments by value: the caller
     * may capture it, and every replay re-validates the same bytes. */
    ag_status st = ag_dev_launch_copy(ec->dev, caller_stream, entry_kernel, ec->blob, sizeof *b + tbytes + sbytes,
                                      "ag.kernel.entry");
    if (st != AG_OK)
        return AG_ERR(ctx, st, "kernel launch: enqueueing callable '%s' (id %d) on the caller's stream failed (%s)",
                      e->info.func_name, handle.callable_id, ag_status_str(st));
    return AG_OK;
}

/* ---------------------------------------------------------------- close */

static ag_status release_owned(void *ud)
{
    ag_exec_context *ec = ud;
    ag_residency_ops ro = residency_ops(ec);
    if (!ec->dev)
        return AG_OK;
    /* A poisoned device drops queued work and refuses copies: release
     * without writing (nothing will execute a retired slot anyway). */
    if (ag_dev_device_state(ec->dev, NULL) == AG_DEV_POISONED) {
        ag_residency_abandon(&ec->cache, &ro);
        return AG_OK;
    }
    if (!own_stream(ec)) {
        ag_residency_abandon(&ec->cache, &ro);
        return AG_OK;
    }
    return ag_residency_close(&ec->cache, &ro);
}

ag_status ag_kernel_mode_finalize(ag_exec_context *ec)
{
    if (!ec)
        return AG_ERR(NULL, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "kernel finalize: context is NULL");
    if (!ag_latch_is_kernel(&ec->latch))
        return AG_ERR(ec->ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE), "kernel finalize: the context is %s",
                      ec->latch.latched ? "latched PROGRAM" : "not a kernel context");
    return ag_kstate_close(ec->ctx, &ec->state, release_owned, ec);
}

ag_status ag_kernel_residency_stats_of(const ag_exec_context *ec, ag_kernel_residency_stats *out)
{
    if (!ec || !out)
        return AG_ERR(ec ? ec->ctx : NULL, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "kernel stats: NULL argument");
    memset(out, 0, sizeof *out);
    if (!ec->host_ready)
        return AG_OK;
    out->resident_count = ag_residency_count(&ec->cache);
    out->resident_bytes = ag_residency_bytes(&ec->cache);
    out->image_bytes = ag_residency_host_bytes(&ec->cache);
    out->arena_bytes = ec->cache.arena ? ec->cache.byte_limit : 0;
    return AG_OK;
}

ag_status ag_kernel_dispatch_report_of(const ag_exec_context *ec, ag_kernel_dispatch_report *out)
{
    if (!ec || !out)
        return AG_ERR(ec ? ec->ctx : NULL, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "kernel report: NULL argument");
    memset(out, 0, sizeof *out);
    if (!ec->report)
        return AG_OK;
    out->executions = __atomic_load_n(&ec->report->executions, __ATOMIC_RELAXED);
    out->rejections = __atomic_load_n(&ec->report->rejections, __ATOMIC_RELAXED);
    out->last_status = __atomic_load_n(&ec->report->last_status, __ATOMIC_RELAXED);
    out->first_reject_status = __atomic_load_n(&ec->report->first_reject_status, __ATOMIC_RELAXED);
    return AG_OK;
}
