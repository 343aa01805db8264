/* Structural validation shared by every kernel-mode entry point and by the
 * residency cache: arguments of init/prepare/launch, the signature counting
 * rule and the full callable image check (seed 004, "kernel entry
 * validation"; image rules of the residency cache).  Nothing here mutates
 * state, so a refusal is always side-effect free. */
#include "kernel/kernel_internal.h"

#define BAD(ctx, ...) AG_ERR((ctx), AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), __VA_ARGS__)

ag_status ag_kderive_counts(ag_ctx *ctx, const uint32_t *sig, int32_t sig_count, int32_t recorded_scalars,
                            int32_t *tensors, int32_t *scalars)
{
    if (sig_count < 0 || sig_count > AG_CALLABLE_MAX_ARGS)
        return BAD(ctx, "callable: sig_count %d outside [0, %d]", sig_count, AG_CALLABLE_MAX_ARGS);
    int32_t sc = 0;
    for (int32_t k = 0; k < sig_count; k++) {
        if (sig[k] > AG_ARG_INOUT)
            return BAD(ctx, "callable: signature entry %d has direction %u (not SCALAR/IN/OUT/INOUT)", k, sig[k]);
        if (sig[k] == AG_ARG_SCALAR)
            sc++;
        else if (sc > 0)
            return BAD(ctx, "callable: signature entry %d is a tensor after a scalar (tensors come first)", k);
    }
    if (sc > AG_CALLABLE_MAX_SCALARS)
        return BAD(ctx, "callable: %d scalars (at most %d)", sc, AG_CALLABLE_MAX_SCALARS);
    /* 0 means "not recorded" (also what images from before the field read),
     * so it is never compared; a recorded count must agree with the
     * signature, otherwise scalars would be counted as tensors. */
    if (recorded_scalars < 0 || recorded_scalars > AG_CALLABLE_MAX_SCALARS)
        return BAD(ctx, "callable: scalar_count %d outside [0, %d]", recorded_scalars, AG_CALLABLE_MAX_SCALARS);
    if (recorded_scalars != 0 && recorded_scalars != sc)
        return BAD(ctx, "callable: scalar_count %d disagrees with the %d SCALAR entries of the signature",
                   recorded_scalars, sc);
    *tensors = sig_count - sc;
    *scalars = sc;
    return AG_OK;
}

static ag_status check_name(ag_ctx *ctx, const char *name, uint32_t len, const char *what)
{
    if (len >= AG_CALLABLE_NAME_BYTES)
        return BAD(ctx, "callable: %s length %u (at most %d)", what, len, AG_CALLABLE_NAME_BYTES - 1);
    if (name[len] != '\0')
        return BAD(ctx, "callable: %s is not NUL-terminated at its length %u", what, len);
    for (uint32_t k = 0; k < len; k++)
        if (name[k] == '\0')
            return BAD(ctx, "callable: %s has a NUL inside its length %u", what, len);
    return AG_OK;
}

ag_status ag_callable_validate(ag_ctx *ctx, const void *image, size_t size, ag_callable_info *info)
{
    if (!image)
        return BAD(ctx, "callable: image is NULL");
    if (size < AG_CALLABLE_HEADER_BYTES)
        return BAD(ctx, "callable: image of %zu bytes is shorter than its %d-byte header", size,
                   AG_CALLABLE_HEADER_BYTES);
    if ((uintptr_t)image % AG_CALLABLE_IMAGE_ALIGN != 0)
        return BAD(ctx, "callable: image address is not %d-byte aligned", AG_CALLABLE_IMAGE_ALIGN);
    const ag_callable_header *h = image;
    int32_t tensors, scalars;
    AG_TRY(ag_kderive_counts(ctx, h->signature, h->sig_count, h->scalar_count, &tensors, &scalars));
    AG_TRY(check_name(ctx, h->func_name, h->func_name_len, "func_name"));
    AG_TRY(check_name(ctx, h->config_name, h->config_name_len, "config_name"));
    for (size_t k = 0; k < sizeof h->reserved; k++)
        if (h->reserved[k])
            return BAD(ctx, "callable '%s': reserved header byte %zu is not zero", h->func_name, k);
    if (h->child_count < 0 || h->child_count > AG_CALLABLE_MAX_CHILDREN)
        return BAD(ctx, "callable '%s': child_count %d outside [0, %d]", h->func_name, h->child_count,
                   AG_CALLABLE_MAX_CHILDREN);
    uint64_t storage = (uint64_t)size - AG_CALLABLE_HEADER_BYTES;
    uint64_t end = h->binary_size;
    if (end > storage)
        return BAD(ctx, "callable '%s': binary of %u bytes overruns the %llu storage bytes", h->func_name,
                   h->binary_size, (unsigned long long)storage);
    uint8_t seen[AG_CALLABLE_MAX_FUNC_ID / 8];
    memset(seen, 0, sizeof seen);
    const unsigned char *st = (const unsigned char *)image + AG_CALLABLE_HEADER_BYTES;
    for (int32_t c = 0; c < h->child_count; c++) {
        int32_t fid = h->child_func_ids[c];
        uint64_t off = h->child_offsets[c];
        if (fid < 0 || fid >= AG_CALLABLE_MAX_FUNC_ID)
            return BAD(ctx, "callable '%s': child %d func id %d outside [0, %d)", h->func_name, c, fid,
                       AG_CALLABLE_MAX_FUNC_ID);
        if (seen[fid / 8] & (1u << (fid % 8)))
            return BAD(ctx, "callable '%s': child %d repeats func id %d", h->func_name, c, fid);
        seen[fid / 8] |= (uint8_t)(1u << (fid % 8));
        if (off % AG_CALLABLE_ALIGN != 0)
            return BAD(ctx, "callable '%s': child %d offset %llu is not %d-aligned", h->func_name, c,
                       (unsigned long long)off, AG_CALLABLE_ALIGN);
        if (off < end)
            return BAD(ctx, "callable '%s': child %d at offset %llu overlaps what precedes it (ends at %llu)",
                       h->func_name, c, (unsigned long long)off, (unsigned long long)end);
        if (off > storage || storage - off < AG_CORE_BINARY_OFFSET)
            return BAD(ctx, "callable '%s': child %d header at offset %llu overruns the storage", h->func_name, c,
                       (unsigned long long)off);
        ag_core_callable_header core;
        memcpy(&core, st + off, sizeof core);
        if (core.sig_count < 0 || core.sig_count > AG_CORE_MAX_ARGS)
            return BAD(ctx, "callable '%s': child %d sig_count %d outside [0, %d]", h->func_name, c, core.sig_count,
                       AG_CORE_MAX_ARGS);
        for (int32_t k = 0; k < core.sig_count; k++)
            if (core.signature[k] > AG_ARG_INOUT)
                return BAD(ctx, "callable '%s': child %d signature entry %d has direction %u", h->func_name, c, k,
                           core.signature[k]);
        if (storage - off - AG_CORE_BINARY_OFFSET < core.binary_size)
            return BAD(ctx, "callable '%s': child %d binary of %u bytes overruns the storage", h->func_name, c,
                       core.binary_size);
        end = off + AG_CORE_BINARY_OFFSET + core.binary_size;
    }
    if (end != storage)
        return BAD(ctx, "callable '%s': %llu trailing bytes after the last part of the image", h->func_name,
                   (unsigned long long)(storage - end));
    if (info) {
        info->tensor_count = tensors;
        info->scalar_count = scalars;
        info->child_count = h->child_count;
        info->bytes = size;
        memcpy(info->func_name, h->func_name, h->func_name_len + 1);
    }
    return AG_OK;
}

ag_status ag_kvalidate_init(ag_ctx *ctx, const void *ec, const void *dev, const ag_kernel_config *config,
                            uint64_t generation)
{
    if (!ec)
        return BAD(ctx, "kernel init: context is NULL");
    if (!dev)
        return BAD(ctx, "kernel init: device is NULL");
    if (generation == 0 || generation == AG_RESIDENCY_RETIRED_GENERATION)
        return BAD(ctx, "kernel init: context generation %llu is reserved (0 and all-ones are never issued)",
                   (unsigned long long)generation);
    if (!config)
        return AG_OK;
    if (config->size != sizeof *config)
        return BAD(ctx, "kernel init: config.size %zu, expected %zu", config->size, sizeof *config);
    if (config->max_callables == 0 || config->max_callables > 4096)
        return BAD(ctx, "kernel init: max_callables %u outside [1, 4096]", config->max_callables);
    if (config->arena_bytes < AG_CALLABLE_HEADER_BYTES || config->arena_bytes > (UINT64_C(1) << 40) ||
        config->arena_bytes % AG_CALLABLE_ALIGN != 0)
        return BAD(ctx, "kernel init: arena_bytes %llu must be a multiple of %d in [%d, 2^40]",
                   (unsigned long long)config->arena_bytes, AG_CALLABLE_ALIGN, AG_CALLABLE_HEADER_BYTES);
    if (config->consumer_count > 64 || (config->consumer_count && !config->consumers))
        return BAD(ctx, "kernel init: %u consumers (at most 64, array required)", config->consumer_count);
    for (uint32_t k = 0; k < config->consumer_count; k++) {
        const ag_kernel_consumer *c = &config->consumers[k];
        if (!c->name || !c->name[0] || strlen(c->name) >= AG_CALLABLE_NAME_BYTES || !c->run)
            return BAD(ctx, "kernel init: consumer %u needs a name of 1..63 bytes and a function", k);
    }
    return AG_OK;
}

ag_status ag_kvalidate_prepare(ag_ctx *ctx, const void *ec, const void *callable, size_t size, const void *out)
{
    if (!ec)
        return BAD(ctx, "kernel prepare: context is NULL");
    if (!callable)
        return BAD(ctx, "kernel prepare: callable image is NULL");
    if (!out)
        return BAD(ctx, "kernel prepare: handle output is NULL");
    if (size < AG_CALLABLE_HEADER_BYTES)
        return BAD(ctx, "kernel prepare: callable of %zu bytes is shorter than its %d-byte header", size,
                   AG_CALLABLE_HEADER_BYTES);
    if ((uintptr_t)callable % AG_CALLABLE_IMAGE_ALIGN != 0)
        return BAD(ctx, "kernel prepare: callable address is not %d-byte aligned", AG_CALLABLE_IMAGE_ALIGN);
    return AG_OK;
}

ag_status ag_kvalidate_launch(ag_ctx *ctx, const void *ec, ag_callable_handle h, const ag_kernel_args *args,
                              const void *stream, uint32_t max_callables)
{
    if (!ec)
        return BAD(ctx, "kernel launch: context is NULL");
    if (!args)
        return BAD(ctx, "kernel launch: arguments are NULL");
    if (!stream)
        return BAD(ctx, "kernel launch: caller stream is NULL");
    if (h.callable_id < 0 || h.generation == 0)
        return BAD(ctx, "kernel launch: handle {%d, %llu} is not a handle prepare issues", h.callable_id,
                   (unsigned long long)h.generation);
    if ((uint32_t)h.callable_id >= max_callables)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_COUNT_EXCEEDED), "kernel launch: callable id %d beyond the %u slots",
                      h.callable_id, max_callables);
    if (args->tensor_count > AG_KERNEL_MAX_TENSORS || args->scalar_count > AG_CALLABLE_MAX_SCALARS ||
        args->tensor_count + args->scalar_count > AG_CALLABLE_MAX_ARGS)
        return BAD(ctx, "kernel launch: %u tensors and %u scalars (at most %d, %d, %d together)", args->tensor_count,
                   args->scalar_count, AG_KERNEL_MAX_TENSORS, AG_CALLABLE_MAX_SCALARS, AG_CALLABLE_MAX_ARGS);
    if ((args->tensor_count && !args->tensors) || (args->scalar_count && !args->scalars))
        return BAD(ctx, "kernel launch: argument arrays missing for the counts given");
    return AG_OK;
}
