/* Fuzz target of the callable image validator shared by every kernel-mode
 * entry: any bytes are either refused with INVALID_ARGUMENT and a message, or
 * accepted; an accepted image must then stage, hit and close cleanly in the
 * residency cache on a host-memory fake device (also under host allocation
 * failures, leaking nothing), and prepare and launch through the public API on
 * the simulated device, where the device entry must agree on its counts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aliasguard/device.h"
#include "aliasguard/kernel.h"
#include "kernel/kernel_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                 \
    do {                                          \
        fprintf(stderr, "fuzz_callable: " __VA_ARGS__); \
        fputc('\n', stderr);                      \
        abort();                                  \
    } while (0)

/* ---- fake device: device memory is host memory ---- */
typedef struct fdev {
    void *blocks[4];
    size_t nblocks;
} fdev;

static ag_status f_allocate(void *ud, uint64_t bytes, uint64_t *addr)
{
    fdev *d = ud;
    if (d->nblocks == sizeof d->blocks / sizeof d->blocks[0])
        FAIL("more device blocks than the cache ever needs");
    void *p = aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64));
    if (!p)
        abort();
    d->blocks[d->nblocks++] = p;
    *addr = (uint64_t)(uintptr_t)p;
    return AG_OK;
}

static ag_status f_release(void *ud, uint64_t addr)
{
    fdev *d = ud;
    for (size_t k = 0; k < d->nblocks; k++)
        if ((uintptr_t)d->blocks[k] == addr) {
            free(d->blocks[k]);
            d->blocks[k] = d->blocks[--d->nblocks];
            return AG_OK;
        }
    FAIL("release of an unknown block");
}

static ag_status f_copy(void *ud, uint64_t dst, const void *src, uint64_t bytes)
{
    (void)ud;
    memcpy((void *)(uintptr_t)dst, src, (size_t)bytes);
    return AG_OK;
}

static ag_status f_patch(void *ud, const ag_residency_entry *e)
{
    (void)ud;
    unsigned char *img = (unsigned char *)(uintptr_t)e->res.device_address;
    const ag_callable_header *h = (const void *)img;
    for (int32_t k = 0; k < h->child_count; k++) {
        unsigned char *c = img + AG_CALLABLE_HEADER_BYTES + h->child_offsets[k];
        uint64_t v = (uint64_t)(uintptr_t)(c + AG_CORE_BINARY_OFFSET);
        memcpy(c + offsetof(ag_core_callable_header, resolved_addr), &v, sizeof v);
    }
    return AG_OK;
}

static ag_status f_wait(void *ud)
{
    (void)ud;
    return AG_OK;
}

static uint64_t align64(uint64_t v)
{
    return (v + 63) / 64 * 64;
}

/* Stage, commit, hit, resolve, close.  Returns the first failing status
 * (only AG_ENOMEM is acceptable, under injection). */
static ag_status cache_life(ag_ctx *ctx, const void *img, size_t size, const ag_callable_info *info)
{
    fdev d = {0};
    ag_residency_ops ops = {&d, f_allocate, f_release, f_copy, f_patch, f_wait};
    ag_residency c;
    ag_status st = ag_residency_init(ctx, &c, 2, align64(size));
    if (st != AG_OK)
        return st;
    ag_callable_handle h = {0}, again = {0};
    bool hit = false, poison = false;
    st = ag_residency_open(&c, &ops, 7);
    if (st == AG_OK) {
        st = ag_residency_stage(&c, &ops, img, size, &h, &hit, &poison);
        if (poison || (st != AG_OK && st != AG_ENOMEM))
            FAIL("stage of an accepted image: %d (%s)", (int)st, ag_ctx_errmsg(ctx));
    }
    if (st == AG_OK) {
        if (hit || h.callable_id != 0 || h.generation != 7)
            FAIL("first stage: hit %d, handle {%d, %llu}", hit, h.callable_id, (unsigned long long)h.generation);
        ag_residency_commit(&c, h.callable_id);
        const ag_residency_entry *e = NULL;
        if (ag_residency_resolve(&c, h, &e) != AG_OK || e->res.bytes != size)
            FAIL("resolve after commit");
        /* The device copy is the image, but for the children's resolved_addr. */
        const unsigned char *dev = (const void *)(uintptr_t)e->res.device_address;
        if (memcmp(dev, img, AG_CALLABLE_HEADER_BYTES) != 0)
            FAIL("device copy of the header differs");
        if (e->info.tensor_count != info->tensor_count || e->info.scalar_count != info->scalar_count)
            FAIL("cached counts differ from the validator's");
        /* The same bytes hit even though the arena is now full. */
        st = ag_residency_stage(&c, &ops, img, size, &again, &hit, &poison);
        if (st != AG_OK || !hit || again.callable_id != h.callable_id || again.generation != h.generation)
            FAIL("identical content did not hit: %d", (int)st);
        if (ag_residency_count(&c) != 1 || ag_residency_bytes(&c) != align64(size) ||
            ag_residency_host_bytes(&c) != size)
            FAIL("accounting after one admission");
    }
    if (ag_residency_close(&c, &ops) != AG_OK || ag_residency_release_descriptors(&c, &ops) != AG_OK)
        FAIL("close of the cache");
    ag_residency_free(&c);
    if (d.nblocks != 0)
        FAIL("device blocks left after close");
    return st;
}

/* A consumer that checks the invocation against the validator's counts. */
typedef struct expect {
    const ag_callable_info *info;
    int runs;
} expect;

static int expect_counts(void *ud, const ag_kernel_invocation *inv)
{
    expect *x = ud;
    x->runs++;
    if (inv->header->tensor_count != x->info->tensor_count || inv->header->scalar_count != x->info->scalar_count)
        return AG_KDISPATCH_PAYLOAD_REJECTED;
    return AG_KDISPATCH_SUCCESS;
}

static bool builtin_name(const char *name)
{
    return !strcmp(name, AG_KERNEL_CONSUMER_SCALED_ADD) || !strcmp(name, AG_KERNEL_CONSUMER_FILL) ||
           !strcmp(name, AG_KERNEL_CONSUMER_COPY);
}

/* Prepare (twice: the second is a hit) and launch on the simulated device. */
static void public_life(const void *img, size_t size, const ag_callable_info *info)
{
    ag_ctx *ctx = ag_ctx_create(NULL);
    ag_device *dev = NULL;
    ag_dev_stream *s = NULL;
    ag_exec_context *ec = NULL;
    if (!ctx || ag_device_sim_create(ctx, NULL, &dev) != AG_OK || ag_dev_stream_create(dev, &s) != AG_OK ||
        ag_exec_context_create(ctx, &ec) != AG_OK)
        abort();
    expect x = {info, 0};
    bool named = info->func_name[0] != '\0' && !builtin_name(info->func_name);
    ag_kernel_consumer cons = {info->func_name, expect_counts, &x};
    ag_kernel_config cfg = ag_kernel_config_defaults();
    cfg.max_callables = 1;
    cfg.arena_bytes = align64(size); /* exactly one image: the hit below comes with the arena full */
    cfg.consumers = named ? &cons : NULL;
    cfg.consumer_count = named ? 1 : 0;
    if (ag_kernel_mode_init(ec, dev, &cfg, 11) != AG_OK)
        FAIL("init: %s", ag_ctx_errmsg(ctx));
    ag_callable_handle h, again;
    ag_status st = ag_kernel_mode_prepare_callable(ec, img, size, &h);
    bool builtin = builtin_name(info->func_name);
    if (named || builtin) {
        if (st != AG_OK)
            FAIL("prepare of an accepted image: %d (%s)", (int)st, ag_ctx_errmsg(ctx));
        if (ag_kernel_mode_prepare_callable(ec, img, size, &again) != AG_OK || again.callable_id != h.callable_id ||
            again.generation != h.generation)
            FAIL("identical content did not hit through prepare");
    } else if (st != (ag_status)AG_KERNEL_ERR_UNSUPPORTED || h.callable_id != -1) {
        FAIL("prepare without a consumer: %d", (int)st);
    }
    if (named) {
        /* Zero tensors (the consumer reads none of them). */
        static const ag_kernel_tensor tensors[AG_KERNEL_MAX_TENSORS];
        static const uint64_t scalars[AG_CALLABLE_MAX_SCALARS];
        ag_kernel_args args = {(uint32_t)info->tensor_count, (uint32_t)info->scalar_count, tensors, scalars};
        if (ag_kernel_mode_launch(ec, h, &args, s) != AG_OK)
            FAIL("launch: %s", ag_ctx_errmsg(ctx));
        if (ag_dev_stream_synchronize(dev, s) != AG_OK || x.runs != 1)
            FAIL("the device entry refused a prepared callable (runs %d)", x.runs);
        ag_kernel_dispatch_report rep;
        if (ag_kernel_dispatch_report_of(ec, &rep) != AG_OK || rep.executions != 1 || rep.rejections != 0)
            FAIL("dispatch report");
    }
    if (ag_kernel_mode_finalize(ec) != AG_OK || ag_exec_context_destroy(ec) != AG_OK)
        FAIL("close: %s", ag_ctx_errmsg(ctx));
    ag_dev_stream_destroy(dev, s);
    ag_dev_stats ds = {.size = sizeof ds};
    ag_dev_stats_get(dev, &ds);
    if (ds.live_streams || ds.live_events || ds.mem[AG_MEM_HBM].live || ds.mem[AG_MEM_HOST].live)
        FAIL("device resources left after destroy");
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The validator requires a 16-aligned image: give it one. */
    void *img = aligned_alloc(64, size ? align64(size) : 64);
    if (!img)
        abort();
    if (size)
        memcpy(img, data, size);
    ag_ctx *ctx = ag_ctx_create(NULL);
    if (!ctx)
        abort();
    ag_callable_info info;
    memset(&info, 0, sizeof info);
    ag_status st = ag_callable_validate(ctx, img, size, &info);
    if (st != AG_OK) {
        if (st != (ag_status)AG_KERNEL_ERR_INVALID_ARGUMENT || strncmp(ag_ctx_errmsg(ctx), "callable", 8) != 0)
            FAIL("refusal %d: %s", (int)st, ag_ctx_errmsg(ctx));
        /* A misaligned image is refused whatever its bytes. */
        if (size >= 1 && ag_callable_validate(ctx, (unsigned char *)img + 1, size - 1, NULL) == AG_OK)
            FAIL("a misaligned image was accepted");
        ag_ctx_destroy(ctx);
        free(img);
        return 0;
    }
    if (info.bytes != size || info.tensor_count < 0 || info.scalar_count < 0 ||
        info.tensor_count + info.scalar_count != ((const ag_callable_header *)img)->sig_count ||
        strlen(info.func_name) >= AG_CALLABLE_NAME_BYTES)
        FAIL("inconsistent facts of an accepted image");
    /* Too large for the cache: refused before the image is read. */
    {
        fdev d = {0};
        ag_residency_ops ops = {&d, f_allocate, f_release, f_copy, f_patch, f_wait};
        ag_residency c;
        ag_callable_handle h;
        bool hit, poison;
        if (ag_residency_init(ctx, &c, 1, align64(size) - 64) != AG_OK || ag_residency_open(&c, &ops, 3) != AG_OK)
            abort();
        st = ag_residency_stage(&c, &ops, img, size, &h, &hit, &poison);
        if (st != (ag_status)AG_KERNEL_ERR_BYTES_EXCEEDED || h.callable_id != -1)
            FAIL("an image larger than the arena: %d", (int)st);
        if (ag_residency_close(&c, &ops) != AG_OK || ag_residency_release_descriptors(&c, &ops) != AG_OK)
            abort();
        ag_residency_free(&c);
    }
    if (cache_life(ctx, img, size, &info) != AG_OK)
        FAIL("cache life without injection failed");
    ag_ctx_destroy(ctx);
    /* Host allocation failures at every allocating call of the cache life. */
    for (uint64_t k = 1;; k++) {
        ag_testalloc ta;
        ag_testalloc_init(&ta, 0, 0);
        ag_allocator hook = ag_testalloc_hook(&ta);
        ag_ctx *octx = ag_ctx_create(&hook);
        if (!octx)
            abort();
        ta.fail_at = ta.calls + k;
        ag_status ost = cache_life(octx, img, size, &info);
        bool injected = ta.nfail > 0;
        ag_ctx_destroy(octx);
        if (ost != AG_OK && ost != AG_ENOMEM)
            FAIL("cache life under allocation failure %llu: %d", (unsigned long long)k, (int)ost);
        if (ta.live_blocks != 0)
            FAIL("%llu blocks leaked under allocation failure %llu", (unsigned long long)ta.live_blocks,
                 (unsigned long long)k);
        if (!injected)
            break;
    }
    public_life(img, size, &info);
    free(img);
    return 0;
}
