/* Kernel mode: the device-side entry, given hand-built device state (kernel
 * args, runtime image, register table, descriptors, a resident image): one
 * rejection per malformed packet field, in the documented order, and the
 * consumer runs only for a packet that matches the current descriptor. */
#include "support/agtest.h"

#include "kernel/kernel_internal.h"

typedef struct world {
    ag_kkernel_args ka;
    ag_kruntime_image rt;
    ag_kernel_consumer consumers[1];
    ag_kregister_entry reg[4];
    ag_kernel_residency desc[4];
    ag_kernel_dispatch_report report;
    unsigned char *image;
    size_t image_bytes;
    int consumed;
    uint64_t last_scalar;
} world;

typedef struct blob {
    _Alignas(16) ag_kernel_dispatch_packet p;
    ag_kernel_tensor t[2];
    uint64_t s[1];
} blob;

static int counting_consumer(void *ud, const ag_kernel_invocation *inv)
{
    world *w = ud;
    w->consumed++;
    w->last_scalar = inv->scalars[0];
    assert_int_equal(inv->tensors[1].bytes, 8);
    assert_ptr_equal(inv->image, w->image);
    return AG_KDISPATCH_SUCCESS;
}

static const ag_arg_dir sig[] = {AG_ARG_IN, AG_ARG_OUT, AG_ARG_SCALAR};

static void world_init(world *w)
{
    memset(w, 0, sizeof *w);
    ag_callable_desc d = {.func_name = "count", .signature = sig, .sig_count = 3};
    assert_int_equal(ag_callable_image_size(NULL, &d, &w->image_bytes), AG_OK);
    w->image = aligned_alloc(64, (w->image_bytes + 63) / 64 * 64);
    assert_int_equal(ag_callable_write(NULL, &d, w->image, w->image_bytes), AG_OK);
    w->consumers[0] = (ag_kernel_consumer){"count", counting_consumer, w};
    w->rt = (ag_kruntime_image){.magic = AG_KRUNTIME_MAGIC, .generation = 17, .max_callables = 4,
                                .consumer_count = 1, .consumers = w->consumers};
    w->ka = (ag_kkernel_args){.runtime_image = (uintptr_t)&w->rt, .register_table = (uintptr_t)w->reg,
                              .descriptors = (uintptr_t)w->desc, .max_callables = 4,
                              .report = (uintptr_t)&w->report};
    w->desc[2] = (ag_kernel_residency){.generation = 17, .device_address = (uintptr_t)w->image,
                                       .bytes = w->image_bytes, .callable_id = 2};
    w->reg[2] = (ag_kregister_entry){.generation = 17, .callable_id = 2, .consumer = 0};
}

static void good_packet(const world *w, blob *b)
{
    memset(b, 0, sizeof *b);
    b->p.packet_bytes = sizeof *b;
    b->p.residency_address = (uintptr_t)&w->desc[2];
    b->p.header = (ag_kernel_invocation_header){.mode = AG_EXEC_KERNEL, .callable_id = 2, .generation = 17,
                                                .payload_bytes = sizeof *b - 56, .tensor_count = 2,
                                                .scalar_count = 1};
    b->t[0] = (ag_kernel_tensor){0x1000, 8};
    b->t[1] = (ag_kernel_tensor){0x2000, 8};
    b->s[0] = 1234;
}

typedef struct row {
    const char *what;
    void (*apply)(world *w, blob *b);
    int want;
} row;

static void r_size_small(world *w, blob *b) { (void)w; b->p.packet_bytes = 55; }
static void r_payload_len(world *w, blob *b) { (void)w; b->p.header.payload_bytes += 8; }
static void r_mode(world *w, blob *b) { (void)w; b->p.header.mode = AG_EXEC_PROGRAM; }
static void r_id_neg(world *w, blob *b) { (void)w; b->p.header.callable_id = -1; }
static void r_id_range(world *w, blob *b)
{
    b->p.header.callable_id = 4; /* beyond this context's 4 slots */
    b->p.residency_address = (uintptr_t)&w->desc[0] + 4 * 32;
}
static void r_gen_zero(world *w, blob *b) { (void)w; b->p.header.generation = 0; }
static void r_tensors(world *w, blob *b) { (void)w; b->p.header.tensor_count = 257; }
static void r_tensors_neg(world *w, blob *b) { (void)w; b->p.header.tensor_count = -1; }
static void r_scalars(world *w, blob *b) { (void)w; b->p.header.scalar_count = 129; }
static void r_sum(world *w, blob *b)
{
    (void)w;
    b->p.header.tensor_count = 200;
    b->p.header.scalar_count = 100;
}
static void r_host_copy(world *w, blob *b) { (void)w; b->p.header.host_copy_tensor_count = 1; }
static void r_reserved(world *w, blob *b) { (void)w; b->p.header.reserved = 1; }
static void r_counts_vs_payload(world *w, blob *b)
{
    (void)w;
    b->p.header.tensor_count = 1; /* payload no longer matches the counts */
}
static void r_res_zero(world *w, blob *b) { (void)w; b->p.residency_address = 0; }
static void r_res_align(world *w, blob *b) { (void)w; b->p.residency_address += 4; }
static void r_res_overflow(world *w, blob *b) { (void)w; b->p.residency_address = UINT64_MAX - 7; }
static void r_res_other_slot(world *w, blob *b) { b->p.residency_address = (uintptr_t)&w->desc[1]; }
static void r_desc_id(world *w, blob *b) { (void)b; w->desc[2].callable_id = 3; }
static void r_desc_gen0(world *w, blob *b) { (void)b; w->desc[2].generation = 0; }
static void r_desc_addr0(world *w, blob *b) { (void)b; w->desc[2].device_address = 0; }
static void r_desc_bytes0(world *w, blob *b) { (void)b; w->desc[2].bytes = 0; }
static void r_desc_reserved(world *w, blob *b) { (void)b; w->desc[2].reserved = 9; }
static void r_stale_packet(world *w, blob *b) { (void)w; b->p.header.generation = 16; }
static void r_retired_slot(world *w, blob *b) { (void)b; w->desc[2].generation = AG_RESIDENCY_RETIRED_GENERATION; }
static void r_unregistered(world *w, blob *b) { (void)b; memset(&w->reg[2], 0, sizeof w->reg[2]); }
static void r_reg_stale(world *w, blob *b) { (void)b; w->reg[2].generation = 18; }
static void r_no_runtime(world *w, blob *b) { (void)b; w->rt.magic = 0; }
static void r_no_consumer(world *w, blob *b) { (void)b; w->reg[2].consumer = 1; }
static void r_counts_vs_image(world *w, blob *b)
{
    (void)w;
    /* Consistent packet, but the resident callable takes 2 tensors, 1 scalar. */
    b->p.header.tensor_count = 3;
    b->p.header.scalar_count = 0;
}

static void every_malformed_packet_field_is_rejected(void **state)
{
    (void)state;
    static const row rows[] = {
        {"packet shorter than the prefix", r_size_small, AG_KDISPATCH_INVALID_ARGS},
        {"payload length", r_payload_len, AG_KDISPATCH_INVALID_ARGS},
        {"mode", r_mode, AG_KDISPATCH_INVALID_ARGS},
        {"negative id", r_id_neg, AG_KDISPATCH_INVALID_ARGS},
        {"id beyond the slots", r_id_range, AG_KDISPATCH_INVALID_ARGS},
        {"generation 0", r_gen_zero, AG_KDISPATCH_INVALID_ARGS},
        {"tensor count", r_tensors, AG_KDISPATCH_INVALID_ARGS},
        {"negative tensor count", r_tensors_neg, AG_KDISPATCH_INVALID_ARGS},
        {"scalar count", r_scalars, AG_KDISPATCH_INVALID_ARGS},
        {"tensors + scalars", r_sum, AG_KDISPATCH_INVALID_ARGS},
        {"host-copy count", r_host_copy, AG_KDISPATCH_INVALID_ARGS},
        {"reserved", r_reserved, AG_KDISPATCH_INVALID_ARGS},
        {"counts vs payload", r_counts_vs_payload, AG_KDISPATCH_INVALID_ARGS},
        {"residency address 0", r_res_zero, AG_KDISPATCH_INVALID_ARGS},
        {"residency address misaligned", r_res_align, AG_KDISPATCH_INVALID_ARGS},
        {"residency address overflow", r_res_overflow, AG_KDISPATCH_INVALID_ARGS},
        {"residency address of another slot", r_res_other_slot, AG_KDISPATCH_INVALID_ARGS},
        {"descriptor id", r_desc_id, AG_KDISPATCH_NOT_RESIDENT},
        {"descriptor generation 0", r_desc_gen0, AG_KDISPATCH_NOT_RESIDENT},
        {"descriptor address 0", r_desc_addr0, AG_KDISPATCH_NOT_RESIDENT},
        {"descriptor bytes 0", r_desc_bytes0, AG_KDISPATCH_NOT_RESIDENT},
        {"descriptor reserved", r_desc_reserved, AG_KDISPATCH_NOT_RESIDENT},
        {"stale packet", r_stale_packet, AG_KDISPATCH_STALE},
        {"retired slot", r_retired_slot, AG_KDISPATCH_STALE},
        {"unregistered id", r_unregistered, AG_KDISPATCH_NOT_RESIDENT},
        {"registration of another generation", r_reg_stale, AG_KDISPATCH_NOT_RESIDENT},
        {"runtime never initialized", r_no_runtime, AG_KDISPATCH_UNSUPPORTED_PAYLOAD},
        {"consumer index", r_no_consumer, AG_KDISPATCH_UNSUPPORTED_PAYLOAD},
        {"counts vs the resident callable", r_counts_vs_image, AG_KDISPATCH_INVALID_ARGS},
    };
    world w;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        world_init(&w);
        /* r_counts_vs_image needs a payload for 3 tensors. */
        _Alignas(16) unsigned char raw[sizeof(blob) + 64];
        memset(raw, 0, sizeof raw);
        blob *b = (blob *)(void *)raw;
        good_packet(&w, b);
        rows[r].apply(&w, b);
        if (rows[r].apply == r_counts_vs_image) {
            b->p.header.payload_bytes = 3 * sizeof(ag_kernel_tensor);
            b->p.packet_bytes = 56 + b->p.header.payload_bytes;
        }
        int got = ag_kernel_device_exec(&w.ka, b);
        if (got != rows[r].want)
            fail_msg("row '%s': status %d, expected %d", rows[r].what, got, rows[r].want);
        assert_int_equal(w.consumed, 0);
        free(w.image);
    }
}

static void null_and_misaligned_pointers(void **state)
{
    (void)state;
    world w;
    world_init(&w);
    blob b;
    good_packet(&w, &b);
    assert_int_equal(ag_kernel_device_exec(&w.ka, NULL), AG_KDISPATCH_INVALID_ARGS);
    assert_int_equal(ag_kernel_device_exec(NULL, &b), AG_KDISPATCH_INVALID_ARGS);
    _Alignas(16) unsigned char raw[sizeof b + 8];
    memcpy(raw + 4, &b, sizeof b);
    assert_int_equal(ag_kernel_device_exec(&w.ka, raw + 4), AG_KDISPATCH_INVALID_ARGS);
    assert_int_equal(w.consumed, 0);
    free(w.image);
}

static void a_matching_packet_reaches_the_consumer_every_time(void **state)
{
    (void)state;
    world w;
    world_init(&w);
    blob b;
    good_packet(&w, &b);
    for (int k = 0; k < 3; k++)
        assert_int_equal(ag_kernel_device_exec(&w.ka, &b), AG_KDISPATCH_SUCCESS);
    assert_int_equal(w.consumed, 3);
    assert_int_equal(w.last_scalar, 1234);
    /* The descriptor is read anew on each execution: once its generation
     * moves on, the very same bytes are stale. */
    w.desc[2].generation = 18;
    assert_int_equal(ag_kernel_device_exec(&w.ka, &b), AG_KDISPATCH_STALE);
    assert_int_equal(w.consumed, 3);
    free(w.image);
}


/* The order of the device-side checks (reference 5.10): with two defects,
 * the earlier class wins, so a packet is judged before its descriptor is
 * read, the descriptor before the generation, the generation before the
 * registration, the registration before the counts. */
static void checks_run_in_the_documented_order(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        void (*first)(world *w, blob *b);
        void (*second)(world *w, blob *b);
        int want;
    } pairs[] = {
        {"packet before descriptor", r_mode, r_desc_id, AG_KDISPATCH_INVALID_ARGS},
        {"residency address before descriptor", r_res_other_slot, r_desc_gen0, AG_KDISPATCH_INVALID_ARGS},
        {"descriptor before generation", r_desc_reserved, r_stale_packet, AG_KDISPATCH_NOT_RESIDENT},
        {"generation before registration", r_retired_slot, r_unregistered, AG_KDISPATCH_STALE},
        {"registration before runtime", r_reg_stale, r_no_runtime, AG_KDISPATCH_NOT_RESIDENT},
        {"runtime before counts", r_no_consumer, r_counts_vs_image, AG_KDISPATCH_UNSUPPORTED_PAYLOAD},
    };
    world w;
    for (size_t r = 0; r < sizeof pairs / sizeof pairs[0]; r++) {
        world_init(&w);
        _Alignas(16) unsigned char raw[sizeof(blob) + 64];
        memset(raw, 0, sizeof raw);
        blob *b = (blob *)(void *)raw;
        good_packet(&w, b);
        pairs[r].second(&w, b);
        pairs[r].first(&w, b);
        if (pairs[r].second == r_counts_vs_image) {
            b->p.header.payload_bytes = 3 * sizeof(ag_kernel_tensor);
            b->p.packet_bytes = 56 + b->p.header.payload_bytes;
        }
        int got = ag_kernel_device_exec(&w.ka, b);
        if (got != pairs[r].want)
            fail_msg("pair '%s': status %d, expected %d", pairs[r].what, got, pairs[r].want);
        assert_int_equal(w.consumed, 0);
        free(w.image);
    }
    /* A packet refused on its own fields never reads the kernel args. */
    world_init(&w);
    blob bb;
    good_packet(&w, &bb);
    bb.p.header.host_copy_tensor_count = 2;
    assert_int_equal(ag_kdispatch_check_packet(&bb), AG_KDISPATCH_INVALID_ARGS);
    _Alignas(16) unsigned char junk[8] = {0};
    assert_int_equal(ag_kernel_device_exec(junk, &bb), AG_KDISPATCH_INVALID_ARGS);
    free(w.image);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_malformed_packet_field_is_rejected),
        cmocka_unit_test(null_and_misaligned_pointers),
        cmocka_unit_test(a_matching_packet_reaches_the_consumer_every_time),
        cmocka_unit_test(checks_run_in_the_documented_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
