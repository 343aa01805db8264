/* Kernel mode ABI: the numeric values of the status band, modes, phases and
 * device statuses, and the size and every offset of the wire structs
 * (invocation header, packet prefix, descriptor, handle, callable headers),
 * including the exact byte encoding of one header. */
#include "support/agtest.h"

#include "aliasguard/kernel.h"

#define assert_st(got, want) assert_int_equal((int)(got), (int)(want))
#define assert_off(type, field, off) assert_int_equal(offsetof(type, field), (off))

static void status_values_are_the_seeds(void **state)
{
    (void)state;
    assert_int_equal(AG_KERNEL_ERR_INTERNAL, -1000);
    assert_int_equal(AG_KERNEL_ERR_UNSUPPORTED, -1001);
    assert_int_equal(AG_KERNEL_ERR_PREPARED_INCOMPATIBLE, -1002);
    assert_int_equal(AG_KERNEL_ERR_INVALID_STATE, -1003);
    assert_int_equal(AG_KERNEL_ERR_COUNT_EXCEEDED, -1004);
    assert_int_equal(AG_KERNEL_ERR_BYTES_EXCEEDED, -1005);
    assert_int_equal(AG_KERNEL_ERR_NOT_RESIDENT, -1006);
    assert_int_equal(AG_KERNEL_ERR_STALE, -1007);
    assert_int_equal(AG_KERNEL_ERR_INVALID_ARGUMENT, -1008);
    assert_string_equal(ag_status_str((ag_status)AG_KERNEL_ERR_STALE), "kernel mode: stale callable handle");
    assert_string_equal(ag_status_str(AG_ENOMEM), "out of memory");
    assert_int_equal(AG_EXEC_PROGRAM, 0);
    assert_int_equal(AG_EXEC_KERNEL, 1);
    assert_int_equal(AG_KPHASE_NEW, 0);
    assert_int_equal(AG_KPHASE_CLOSED, 6);
    assert_int_equal(AG_ARG_SCALAR, 0);
    assert_int_equal(AG_ARG_INOUT, 3);
    assert_int_equal(AG_KDISPATCH_SUCCESS, 0);
    assert_int_equal(AG_KDISPATCH_INVALID_ARGS, 1);
    assert_int_equal(AG_KDISPATCH_NOT_RESIDENT, 2);
    assert_int_equal(AG_KDISPATCH_STALE, 3);
    assert_int_equal(AG_KDISPATCH_UNSUPPORTED_PAYLOAD, 4);
}

static void wire_layouts_are_pinned(void **state)
{
    (void)state;
    assert_int_equal(sizeof(ag_kernel_invocation_header), 40);
    assert_off(ag_kernel_invocation_header, mode, 0);
    assert_off(ag_kernel_invocation_header, callable_id, 4);
    assert_off(ag_kernel_invocation_header, generation, 8);
    assert_off(ag_kernel_invocation_header, payload_bytes, 16);
    assert_off(ag_kernel_invocation_header, tensor_count, 24);
    assert_off(ag_kernel_invocation_header, scalar_count, 28);
    assert_off(ag_kernel_invocation_header, host_copy_tensor_count, 32);
    assert_off(ag_kernel_invocation_header, reserved, 36);
    assert_int_equal(sizeof(ag_kernel_dispatch_packet), 56);
    assert_off(ag_kernel_dispatch_packet, packet_bytes, 0);
    assert_off(ag_kernel_dispatch_packet, residency_address, 8);
    assert_off(ag_kernel_dispatch_packet, header, 16);
    assert_int_equal(sizeof(ag_kernel_residency), 32);
    assert_off(ag_kernel_residency, generation, 0);
    assert_off(ag_kernel_residency, device_address, 8);
    assert_off(ag_kernel_residency, bytes, 16);
    assert_off(ag_kernel_residency, callable_id, 24);
    assert_off(ag_kernel_residency, reserved, 28);
    assert_int_equal(sizeof(ag_callable_handle), 16);
    assert_off(ag_callable_handle, generation, 8);
    assert_int_equal(sizeof(ag_kernel_tensor), 16);
    assert_int_equal(sizeof(ag_callable_header), 9376);
    assert_off(ag_callable_header, sig_count, 1024);
    assert_off(ag_callable_header, binary_size, 1028);
    assert_off(ag_callable_header, func_name, 1032);
    assert_off(ag_callable_header, func_name_len, 1096);
    assert_off(ag_callable_header, child_func_ids, 1100);
    assert_off(ag_callable_header, child_offsets, 5196);
    assert_off(ag_callable_header, child_count, 9292);
    assert_off(ag_callable_header, config_name, 9296);
    assert_off(ag_callable_header, config_name_len, 9360);
    assert_off(ag_callable_header, scalar_count, 9364);
    assert_int_equal(sizeof(ag_core_callable_header), 144);
    assert_off(ag_core_callable_header, sig_count, 128);
    assert_off(ag_core_callable_header, binary_size, 132);
    assert_off(ag_core_callable_header, resolved_addr, 136);
    assert_int_equal(AG_CORE_BINARY_OFFSET, 192);
}

/* The exact little-endian encoding of one header, and an all-zero blob
 * reading as mode PROGRAM with nothing in it. */
static void header_encoding(void **state)
{
    (void)state;
    ag_kernel_invocation_header h = {.mode = AG_EXEC_KERNEL, .callable_id = 5, .generation = 0x0102030405060708,
                                     .payload_bytes = 0x48, .tensor_count = 3, .scalar_count = 1};
    static const unsigned char want[40] = {
        1, 0, 0, 0, 5, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1, 0x48, 0, 0, 0, 0, 0, 0, 0,
        3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    };
    assert_memory_equal(&h, want, 40);
    ag_kernel_invocation_header z;
    memset(&z, 0, sizeof z);
    assert_int_equal(z.mode, AG_EXEC_PROGRAM);
    assert_int_equal(z.generation, 0);
    assert_int_equal(z.payload_bytes, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_values_are_the_seeds),
        cmocka_unit_test(wire_layouts_are_pinned),
        cmocka_unit_test(header_encoding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
