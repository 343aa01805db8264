/* Built-in payload consumers: small kernels that do real work on device
 * memory, so launches, captures and replays are judged by the numbers they
 * leave behind rather than by return codes.  Each checks its own arguments
 * and refuses (PAYLOAD_REJECTED) instead of touching memory it was not
 * given.  Tensors are float32; a float scalar travels as its bit pattern. */
#include "kernel/kernel_internal.h"

static float scalar_f32(uint64_t v)
{
    uint32_t bits = (uint32_t)v;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static bool f32_tensor(const ag_kernel_tensor *t, uint64_t bytes)
{
    return t->addr != 0 && t->addr % sizeof(float) == 0 && t->bytes == bytes && bytes % sizeof(float) == 0;
}

static float *f32(const ag_kernel_tensor *t)
{
    return (float *)(uintptr_t)t->addr;
}

static int scaled_add(void *ud, const ag_kernel_invocation *inv)
{
    (void)ud;
    if (inv->header->tensor_count != 3 || inv->header->scalar_count != 1)
        return AG_KDISPATCH_PAYLOAD_REJECTED;
    const ag_kernel_tensor *t = inv->tensors;
    uint64_t n = t[0].bytes;
    if (!f32_tensor(&t[0], n) || !f32_tensor(&t[1], n) || !f32_tensor(&t[2], n))
        return AG_KDISPATCH_PAYLOAD_REJECTED;
    const float *x = f32(&t[0]), *y = f32(&t[1]);
    float *z = f32(&t[2]);
    float alpha = scalar_f32(inv->scalars[0]);
    for (uint64_t k = 0; k < n / sizeof(float); k++)
        z[k] = x[k] + alpha * y[k];
    return AG_KDISPATCH_SUCCESS;
}

static int fill(void *ud, const ag_kernel_invocation *inv)
{
    (void)ud;
    if (inv->header->tensor_count != 1 || inv->header->scalar_count != 1)
        return AG_KDISPATCH_PAYLOAD_REJECTED;
    const ag_kernel_tensor *t = inv->tensors;
    if (!f32_tensor(&t[0], t[0].bytes))
        return AG_KDISPATCH_PAYLOAD_REJECTED;
    float *z = f32(&t[0]);
    float v = scalar_f32(inv->scalars[0]);
    for (uint64_t k = 0; k < t[0].bytes / sizeof(float); k++)
        z[k] = v;
    return AG_KDISPATCH_SUCCESS;
}

static int copy(void *ud, const ag_kernel_invocation *inv)
{
    (void)ud;
    if (inv->header->tensor_count != 2 || inv->header->scalar_count != 0)
        return AG_KDISPATCH_PAYLOAD_REJECTED;
    const ag_kernel_tensor *t = inv->tensors;
    if (!t[0].addr || !t[1].addr || t[0].bytes != t[1].bytes)
        return AG_KDISPATCH_PAYLOAD_REJECTED;
    memmove((void *)(uintptr_t)t[1].addr, (const void *)(uintptr_t)t[0].addr, t[0].bytes);
    return AG_KDISPATCH_SUCCESS;
}

static const ag_kernel_consumer builtins[] = {
    {AG_KERNEL_CONSUMER_SCALED_ADD, scaled_add, NULL},
    {AG_KERNEL_CONSUMER_FILL, fill, NULL},
    {AG_KERNEL_CONSUMER_COPY, copy, NULL},
};

uint32_t ag_kernel_builtin_consumers(const ag_kernel_consumer **out)
{
    *out = builtins;
    return (uint32_t)(sizeof builtins / sizeof builtins[0]);
}
