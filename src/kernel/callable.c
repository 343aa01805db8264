/* The callable image format (seed 004 "ChipCallable"): a fixed 9376-byte
 * header (signature, counts, names, child table), then storage holding the
 * orchestration binary and each child at the next 64-byte boundary.  Offsets
 * are pinned here and by the ABI test; ag_callable_write lays images out in
 * canonical packing. */
#include <stdalign.h>

#include "kernel/kernel_internal.h"

#define AG_PIN(type, field, off) _Static_assert(offsetof(type, field) == (off), #type "." #field " offset")
AG_PIN(ag_callable_header, signature, 0);
AG_PIN(ag_callable_header, sig_count, 1024);
AG_PIN(ag_callable_header, binary_size, 1028);
AG_PIN(ag_callable_header, func_name, 1032);
AG_PIN(ag_callable_header, func_name_len, 1096);
AG_PIN(ag_callable_header, child_func_ids, 1100);
AG_PIN(ag_callable_header, child_offsets, 5196);
AG_PIN(ag_callable_header, child_count, 9292);
AG_PIN(ag_callable_header, config_name, 9296);
AG_PIN(ag_callable_header, config_name_len, 9360);
AG_PIN(ag_callable_header, scalar_count, 9364);
AG_PIN(ag_callable_header, reserved, 9368);
_Static_assert(sizeof(ag_callable_header) == AG_CALLABLE_HEADER_BYTES, "callable header size");
_Static_assert(AG_CALLABLE_HEADER_BYTES % AG_CALLABLE_IMAGE_ALIGN == 0, "storage keeps the image alignment");
AG_PIN(ag_core_callable_header, signature, 0);
AG_PIN(ag_core_callable_header, sig_count, 128);
AG_PIN(ag_core_callable_header, binary_size, 132);
AG_PIN(ag_core_callable_header, resolved_addr, 136);
_Static_assert(sizeof(ag_core_callable_header) == AG_CORE_HEADER_BYTES, "core header size");
_Static_assert(alignof(ag_core_callable_header) <= AG_CALLABLE_IMAGE_ALIGN, "children land aligned");
_Static_assert(AG_CORE_BINARY_OFFSET % AG_CALLABLE_ALIGN == 0 && AG_CORE_BINARY_OFFSET >= AG_CORE_HEADER_BYTES,
               "child binary offset");

static uint64_t align_up64(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* Checks desc and computes each child's storage offset (canonical packing). */
static ag_status layout(ag_ctx *ctx, const ag_callable_desc *d, uint64_t *total, uint32_t *offsets)
{
    if (!d)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "callable: no description");
    if (!d->func_name || strlen(d->func_name) >= AG_CALLABLE_NAME_BYTES)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "callable: func_name missing or 64 bytes or longer");
    if (d->config_name && strlen(d->config_name) >= AG_CALLABLE_NAME_BYTES)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "callable '%s': config_name 64 bytes or longer",
                      d->func_name);
    if (d->sig_count > AG_CALLABLE_MAX_ARGS || (d->sig_count && !d->signature))
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "callable '%s': signature of %u entries",
                      d->func_name, d->sig_count);
    if (d->binary_size && !d->binary)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "callable '%s': binary size without a binary",
                      d->func_name);
    if (d->child_count > AG_CALLABLE_MAX_CHILDREN || (d->child_count && !d->children))
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "callable '%s': %u children", d->func_name,
                      d->child_count);
    uint32_t sig[AG_CALLABLE_MAX_ARGS];
    for (uint32_t k = 0; k < d->sig_count; k++)
        sig[k] = (uint32_t)d->signature[k];
    int32_t t, sc;
    AG_TRY(ag_kderive_counts(ctx, sig, (int32_t)d->sig_count, d->scalar_count, &t, &sc));
    uint64_t end = d->binary_size;
    for (uint32_t c = 0; c < d->child_count; c++) {
        const ag_callable_child *ch = &d->children[c];
        if (ch->sig_count > AG_CORE_MAX_ARGS || (ch->sig_count && !ch->signature) || (ch->binary_size && !ch->binary))
            return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "callable '%s': child %u malformed",
                          d->func_name, c);
        end = align_up64(end, AG_CALLABLE_ALIGN);
        if (end > UINT32_MAX)
            return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "callable '%s': child %u offset beyond 4 GiB",
                          d->func_name, c);
        offsets[c] = (uint32_t)end;
        end += AG_CORE_BINARY_OFFSET + (uint64_t)ch->binary_size;
    }
    *total = AG_CALLABLE_HEADER_BYTES + end;
    if (*total > SIZE_MAX)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "callable '%s': image too large", d->func_name);
    return AG_OK;
}

ag_status ag_callable_image_size(ag_ctx *ctx, const ag_callable_desc *desc, size_t *size)
{
    uint32_t offsets[AG_CALLABLE_MAX_CHILDREN];
    uint64_t total = 0;
    if (!size)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "callable: no size output");
    AG_TRY(layout(ctx, desc, &total, offsets));
    *size = (size_t)total;
    return AG_OK;
}

static void put_name(char *dst, uint32_t *len, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    memcpy(dst, src ? src : "", n);
    *len = (uint32_t)n;
}

ag_status ag_callable_write(ag_ctx *ctx, const ag_callable_desc *desc, void *buf, size_t size)
{
    uint32_t offsets[AG_CALLABLE_MAX_CHILDREN];
    uint64_t total = 0;
    AG_TRY(layout(ctx, desc, &total, offsets));
    if (!buf || ((uintptr_t)buf % AG_CALLABLE_IMAGE_ALIGN) != 0 || size != total)
        return AG_ERR(ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT),
                      "callable '%s': output buffer must be %d-aligned and exactly %llu bytes (got %zu)",
                      desc->func_name, AG_CALLABLE_IMAGE_ALIGN, (unsigned long long)total, size);
    unsigned char *img = buf;
    memset(img, 0, size);
    ag_callable_header *h = buf;
    for (uint32_t k = 0; k < desc->sig_count; k++)
        h->signature[k] = (uint32_t)desc->signature[k];
    h->sig_count = (int32_t)desc->sig_count;
    h->binary_size = desc->binary_size;
    put_name(h->func_name, &h->func_name_len, desc->func_name);
    put_name(h->config_name, &h->config_name_len, desc->config_name);
    h->child_count = (int32_t)desc->child_count;
    h->scalar_count = desc->scalar_count;
    unsigned char *storage = img + AG_CALLABLE_HEADER_BYTES;
    if (desc->binary_size)
        memcpy(storage, desc->binary, desc->binary_size);
    for (uint32_t c = 0; c < desc->child_count; c++) {
        const ag_callable_child *ch = &desc->children[c];
        h->child_func_ids[c] = ch->func_id;
        h->child_offsets[c] = offsets[c];
        ag_core_callable_header *core = (ag_core_callable_header *)(void *)(storage + offsets[c]);
        for (uint32_t k = 0; k < ch->sig_count; k++)
            core->signature[k] = (uint32_t)ch->signature[k];
        core->sig_count = (int32_t)ch->sig_count;
        core->binary_size = ch->binary_size;
        core->resolved_addr = 0;
        if (ch->binary_size)
            memcpy(storage + offsets[c] + AG_CORE_BINARY_OFFSET, ch->binary, ch->binary_size);
    }
    /* The builder's output must pass the same validation every entry applies
     * (duplicate func ids, for instance, are only caught there). */
    return ag_callable_validate(ctx, buf, size, NULL);
}
