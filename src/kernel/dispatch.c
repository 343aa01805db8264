/* The device-side kernel entry (seed 004, "simpler_aicpu_kernel_exec"): runs
 * on the stream for every execution, eager or replayed from a captured graph,
 * and re-validates the packet against the issuing context's *current*
 * residency descriptor before any payload is read or any consumer runs.  A
 * captured packet whose slot generation moved on (context closed) is stale.
 * In the simulated device, device addresses are host-addressable. */
#include "kernel/kernel_internal.h"

#define AG_PIN(type, field, off) _Static_assert(offsetof(type, field) == (off), #type "." #field " offset")
AG_PIN(ag_kernel_invocation_header, mode, 0);
AG_PIN(ag_kernel_invocation_header, callable_id, 4);
AG_PIN(ag_kernel_invocation_header, generation, 8);
AG_PIN(ag_kernel_invocation_header, payload_bytes, 16);
AG_PIN(ag_kernel_invocation_header, tensor_count, 24);
AG_PIN(ag_kernel_invocation_header, scalar_count, 28);
AG_PIN(ag_kernel_invocation_header, host_copy_tensor_count, 32);
AG_PIN(ag_kernel_invocation_header, reserved, 36);
_Static_assert(sizeof(ag_kernel_invocation_header) == 40, "invocation header size");
AG_PIN(ag_kernel_dispatch_packet, packet_bytes, 0);
AG_PIN(ag_kernel_dispatch_packet, residency_address, 8);
AG_PIN(ag_kernel_dispatch_packet, header, 16);
_Static_assert(sizeof(ag_kernel_dispatch_packet) == AG_KERNEL_PACKET_PREFIX_BYTES, "packet prefix size");
AG_PIN(ag_kernel_residency, generation, 0);
AG_PIN(ag_kernel_residency, device_address, 8);
AG_PIN(ag_kernel_residency, bytes, 16);
AG_PIN(ag_kernel_residency, callable_id, 24);
AG_PIN(ag_kernel_residency, reserved, 28);
_Static_assert(sizeof(ag_kernel_residency) == 32, "descriptor size");
_Static_assert(sizeof(ag_callable_handle) == 16, "handle size");
_Static_assert(sizeof(ag_kernel_tensor) == 16, "tensor argument size");

static const void *dev_ptr(uint64_t addr)
{
    return (const void *)(uintptr_t)addr;
}

int ag_kdispatch_check_packet(const void *packet)
{
    if (!packet || (uintptr_t)packet % 8 != 0)
        return AG_KDISPATCH_INVALID_ARGS;
    ag_kernel_dispatch_packet p;
    memcpy(&p, packet, sizeof p);
    const ag_kernel_invocation_header *h = &p.header;
    if (p.packet_bytes < AG_KERNEL_PACKET_PREFIX_BYTES || p.packet_bytes > SIZE_MAX)
        return AG_KDISPATCH_INVALID_ARGS;
    if (h->payload_bytes != p.packet_bytes - AG_KERNEL_PACKET_PREFIX_BYTES)
        return AG_KDISPATCH_INVALID_ARGS;
    if (h->mode != AG_EXEC_KERNEL)
        return AG_KDISPATCH_INVALID_ARGS;
    if (h->callable_id < 0 || h->generation == 0)
        return AG_KDISPATCH_INVALID_ARGS;
    if (h->tensor_count < 0 || h->tensor_count > AG_KERNEL_MAX_TENSORS || h->scalar_count < 0 ||
        h->scalar_count > AG_CALLABLE_MAX_SCALARS || h->tensor_count + h->scalar_count > AG_CALLABLE_MAX_ARGS)
        return AG_KDISPATCH_INVALID_ARGS;
    if (h->host_copy_tensor_count != 0 || h->reserved != 0)
        return AG_KDISPATCH_INVALID_ARGS;
    if (h->payload_bytes !=
        (uint64_t)h->tensor_count * sizeof(ag_kernel_tensor) + (uint64_t)h->scalar_count * sizeof(uint64_t))
        return AG_KDISPATCH_INVALID_ARGS;
    if (p.residency_address == 0 || p.residency_address % 8 != 0 ||
        p.residency_address > UINT64_MAX - sizeof(ag_kernel_residency))
        return AG_KDISPATCH_INVALID_ARGS;
    return AG_KDISPATCH_SUCCESS;
}

int ag_kernel_device_exec(const void *kernel_args, const void *packet)
{
    int rc = ag_kdispatch_check_packet(packet);
    if (rc != AG_KDISPATCH_SUCCESS)
        return rc;
    if (!kernel_args || (uintptr_t)kernel_args % 8 != 0)
        return AG_KDISPATCH_INVALID_ARGS;
    ag_kkernel_args ka;
    memcpy(&ka, kernel_args, sizeof ka);
    ag_kernel_dispatch_packet p;
    memcpy(&p, packet, sizeof p);
    const ag_kernel_invocation_header *h = &p.header;
    /* The id bound and the slot address come from the context's own kernel
     * args, never from the packet alone: a packet cannot point the entry at
     * arbitrary memory. */
    if ((uint64_t)h->callable_id >= ka.max_callables)
        return AG_KDISPATCH_INVALID_ARGS;
    if (p.residency_address != ka.descriptors + (uint64_t)h->callable_id * sizeof(ag_kernel_residency))
        return AG_KDISPATCH_INVALID_ARGS;

    /* Snapshot by value: nothing may write a descriptor while an execution
     * that can read it is in flight (the caller quiesces before close). */
    ag_kernel_residency res;
    memcpy(&res, dev_ptr(p.residency_address), sizeof res);
    if (res.callable_id != h->callable_id || res.generation == 0 || res.device_address == 0 || res.bytes == 0 ||
        res.reserved != 0)
        return AG_KDISPATCH_NOT_RESIDENT;
    if (res.generation != h->generation)
        return AG_KDISPATCH_STALE;

    ag_kregister_entry reg;
    memcpy(&reg, dev_ptr(ka.register_table + (uint64_t)h->callable_id * sizeof reg), sizeof reg);
    if (reg.callable_id != h->callable_id || reg.generation != h->generation)
        return AG_KDISPATCH_NOT_RESIDENT;
    ag_kruntime_image rt;
    memcpy(&rt, dev_ptr(ka.runtime_image), sizeof rt);
    if (rt.magic != AG_KRUNTIME_MAGIC || reg.consumer >= rt.consumer_count)
        return AG_KDISPATCH_UNSUPPORTED_PAYLOAD;

    /* The packet's counts must be the resident callable's own counts. */
    const ag_callable_header *img = dev_ptr(res.device_address);
    int32_t tensors = 0, scalars = 0;
    if (ag_kderive_counts(NULL, img->signature, img->sig_count, img->scalar_count, &tensors, &scalars) != AG_OK ||
        tensors != h->tensor_count || scalars != h->scalar_count)
        return AG_KDISPATCH_INVALID_ARGS;

    const unsigned char *payload = (const unsigned char *)packet + AG_KERNEL_PACKET_PREFIX_BYTES;
    ag_kernel_invocation inv = {
        .header = h,
        .resident = &res,
        .image = img,
        .tensors = (const ag_kernel_tensor *)(const void *)payload,
        .scalars = (const uint64_t *)(const void *)(payload + (size_t)h->tensor_count * sizeof(ag_kernel_tensor)),
    };
    const ag_kernel_consumer *c = &rt.consumers[reg.consumer];
    return c->run(c->ud, &inv);
}
