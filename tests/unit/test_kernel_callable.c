/* Kernel mode: the callable image format and the structural validation every
 * entry point shares: layout of built images, the sig_count / scalar_count
 * rule (0 = not recorded), and one refusal per malformed field. */
#include "support/agtest.h"

#include "kernel/kernel_internal.h"

#define assert_st(got, want) assert_int_equal((int)(got), (int)(want))

static void *build(const ag_callable_desc *d, size_t *size)
{
    assert_st(ag_callable_image_size(NULL, d, size), AG_OK);
    void *img = aligned_alloc(64, (*size + 63) / 64 * 64);
    assert_non_null(img);
    assert_st(ag_callable_write(NULL, d, img, *size), AG_OK);
    return img;
}

static const ag_arg_dir sig_add[] = {AG_ARG_IN, AG_ARG_IN, AG_ARG_OUT, AG_ARG_SCALAR};
static const ag_arg_dir sig_child[] = {AG_ARG_IN, AG_ARG_INOUT};
static const unsigned char bin[100] = {1, 2, 3};

static ag_callable_desc two_children(ag_callable_child ch[2])
{
    ch[0] = (ag_callable_child){.func_id = 7, .signature = sig_child, .sig_count = 2, .binary = bin, .binary_size = 10};
    ch[1] = (ag_callable_child){.func_id = 3, .signature = sig_child, .sig_count = 1, .binary = bin, .binary_size = 33};
    ag_callable_desc d = {.func_name = "ag.scaled_add", .config_name = "cfg", .signature = sig_add, .sig_count = 4,
                          .binary = bin, .binary_size = 100, .children = ch, .child_count = 2};
    return d;
}

static void layout_of_a_built_image(void **state)
{
    (void)state;
    ag_callable_child ch[2];
    ag_callable_desc d = two_children(ch);
    size_t size;
    unsigned char *img = build(&d, &size);
    const ag_callable_header *h = (const void *)img;
    /* binary 100 -> child 0 at 128, 192 + 10 -> ends 330 -> child 1 at 384, ends 384 + 192 + 33 */
    assert_int_equal(h->child_offsets[0], 128);
    assert_int_equal(h->child_offsets[1], 384);
    assert_int_equal(size, AG_CALLABLE_HEADER_BYTES + 384 + 192 + 33);
    assert_int_equal(h->sig_count, 4);
    assert_int_equal(h->scalar_count, 0);
    assert_int_equal(h->func_name_len, strlen("ag.scaled_add"));
    assert_string_equal(h->func_name, "ag.scaled_add");
    assert_string_equal(h->config_name, "cfg");
    const ag_core_callable_header *c1 = (const void *)(img + AG_CALLABLE_HEADER_BYTES + 384);
    assert_int_equal(c1->sig_count, 1);
    assert_int_equal(c1->binary_size, 33);
    assert_int_equal(c1->resolved_addr, 0);
    assert_memory_equal(img + AG_CALLABLE_HEADER_BYTES + 384 + AG_CORE_BINARY_OFFSET, bin, 33);
    ag_callable_info info;
    assert_st(ag_callable_validate(NULL, img, size, &info), AG_OK);
    assert_int_equal(info.tensor_count, 3);
    assert_int_equal(info.scalar_count, 1);
    assert_int_equal(info.child_count, 2);
    assert_string_equal(info.func_name, "ag.scaled_add");
    free(img);
}

static void scalar_count_zero_means_not_recorded(void **state)
{
    (void)state;
    int32_t t, s;
    uint32_t sig[4] = {AG_ARG_IN, AG_ARG_OUT, AG_ARG_SCALAR, AG_ARG_SCALAR};
    /* Not recorded: derived from the signature, never subtracted as 0. */
    assert_st(ag_kderive_counts(NULL, sig, 4, 0, &t, &s), AG_OK);
    assert_int_equal(t, 2);
    assert_int_equal(s, 2);
    assert_st(ag_kderive_counts(NULL, sig, 4, 2, &t, &s), AG_OK);
    assert_int_equal(t, 2);
    assert_st(ag_kderive_counts(NULL, sig, 4, 1, &t, &s), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_st(ag_kderive_counts(NULL, sig, 4, -1, &t, &s), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_st(ag_kderive_counts(NULL, sig, 4, 129, &t, &s), AG_KERNEL_ERR_INVALID_ARGUMENT);
    uint32_t late[3] = {AG_ARG_SCALAR, AG_ARG_IN, AG_ARG_OUT};
    assert_st(ag_kderive_counts(NULL, late, 3, 0, &t, &s), AG_KERNEL_ERR_INVALID_ARGUMENT);
    uint32_t bad[1] = {4};
    assert_st(ag_kderive_counts(NULL, bad, 1, 0, &t, &s), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_st(ag_kderive_counts(NULL, sig, -1, 0, &t, &s), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_st(ag_kderive_counts(NULL, sig, 257, 0, &t, &s), AG_KERNEL_ERR_INVALID_ARGUMENT);
    uint32_t many[256];
    for (int k = 0; k < 256; k++)
        many[k] = AG_ARG_SCALAR;
    assert_st(ag_kderive_counts(NULL, many, 128, 0, &t, &s), AG_OK);
    assert_st(ag_kderive_counts(NULL, many, 129, 0, &t, &s), AG_KERNEL_ERR_INVALID_ARGUMENT);
    /* A recorded count equal to the signature's is accepted by the builder too. */
    ag_callable_desc d = {.func_name = "f", .signature = sig_add, .sig_count = 4, .scalar_count = 1};
    size_t size;
    void *img = build(&d, &size);
    ag_callable_info info;
    assert_st(ag_callable_validate(NULL, img, size, &info), AG_OK);
    assert_int_equal(info.scalar_count, 1);
    free(img);
    d.scalar_count = 2;
    assert_st(ag_callable_image_size(NULL, &d, &size), AG_KERNEL_ERR_INVALID_ARGUMENT);
}

/* One mutation per row; each must be refused with INVALID_ARGUMENT and a
 * message naming what is wrong. */
typedef struct mutation {
    const char *what;
    void (*apply)(unsigned char *img, size_t *size);
    const char *needle;
} mutation;

#define H(img) ((ag_callable_header *)(void *)(img))
static void m_sig_count(unsigned char *i, size_t *n) { (void)n; H(i)->sig_count = 257; }
static void m_sig_neg(unsigned char *i, size_t *n) { (void)n; H(i)->sig_count = -1; }
static void m_sig_dir(unsigned char *i, size_t *n) { (void)n; H(i)->signature[1] = 9; }
static void m_sig_order(unsigned char *i, size_t *n) { (void)n; H(i)->signature[0] = AG_ARG_SCALAR; }
static void m_scalar_count(unsigned char *i, size_t *n) { (void)n; H(i)->scalar_count = 3; }
static void m_name_len(unsigned char *i, size_t *n) { (void)n; H(i)->func_name_len = 64; }
static void m_name_nul(unsigned char *i, size_t *n) { (void)n; H(i)->func_name_len = 3; }
static void m_name_inner_nul(unsigned char *i, size_t *n) { (void)n; H(i)->func_name[1] = '\0'; }
static void m_config_len(unsigned char *i, size_t *n) { (void)n; H(i)->config_name_len = 200; }
static void m_reserved(unsigned char *i, size_t *n) { (void)n; H(i)->reserved[3] = 1; }
static void m_child_count(unsigned char *i, size_t *n) { (void)n; H(i)->child_count = 1025; }
static void m_child_neg(unsigned char *i, size_t *n) { (void)n; H(i)->child_count = -2; }
static void m_binary(unsigned char *i, size_t *n) { (void)n; H(i)->binary_size = 100000; }
static void m_fid(unsigned char *i, size_t *n) { (void)n; H(i)->child_func_ids[1] = 1024; }
static void m_fid_neg(unsigned char *i, size_t *n) { (void)n; H(i)->child_func_ids[0] = -1; }
static void m_fid_dup(unsigned char *i, size_t *n) { (void)n; H(i)->child_func_ids[1] = 7; }
static void m_off_align(unsigned char *i, size_t *n) { (void)n; H(i)->child_offsets[1] = 392; }
static void m_off_overlap(unsigned char *i, size_t *n) { (void)n; H(i)->child_offsets[0] = 64; }
static void m_off_beyond(unsigned char *i, size_t *n) { (void)n; H(i)->child_offsets[1] = 1u << 20; }
static void m_child_sig(unsigned char *i, size_t *n)
{
    (void)n;
    ((ag_core_callable_header *)(void *)(i + AG_CALLABLE_HEADER_BYTES + 128))->sig_count = 33;
}
static void m_child_dir(unsigned char *i, size_t *n)
{
    (void)n;
    ((ag_core_callable_header *)(void *)(i + AG_CALLABLE_HEADER_BYTES + 128))->signature[0] = 7;
}
static void m_child_binary(unsigned char *i, size_t *n)
{
    (void)n;
    ((ag_core_callable_header *)(void *)(i + AG_CALLABLE_HEADER_BYTES + 384))->binary_size = 34;
}
static void m_trailing(unsigned char *i, size_t *n) { (void)i; *n += 1; }
static void m_short(unsigned char *i, size_t *n) { (void)i; *n -= 1; }
static void m_header_only(unsigned char *i, size_t *n) { (void)i; *n = AG_CALLABLE_HEADER_BYTES - 1; }

static void every_malformed_field_is_refused(void **state)
{
    (void)state;
    static const mutation rows[] = {
        {"sig_count > 256", m_sig_count, "sig_count 257"},
        {"sig_count < 0", m_sig_neg, "sig_count -1"},
        {"direction", m_sig_dir, "direction 9"},
        {"tensor after scalar", m_sig_order, "tensor after a scalar"},
        {"scalar_count disagrees", m_scalar_count, "scalar_count 3"},
        {"name length", m_name_len, "func_name length 64"},
        {"name not NUL at length", m_name_nul, "not NUL-terminated"},
        {"NUL inside name", m_name_inner_nul, "NUL inside"},
        {"config name length", m_config_len, "config_name length 200"},
        {"reserved", m_reserved, "reserved header byte 3"},
        {"child_count > 1024", m_child_count, "child_count 1025"},
        {"child_count < 0", m_child_neg, "child_count -2"},
        {"binary overruns", m_binary, "binary of 100000 bytes"},
        {"func id range", m_fid, "func id 1024"},
        {"func id negative", m_fid_neg, "func id -1"},
        {"func id repeated", m_fid_dup, "repeats func id 7"},
        {"child alignment", m_off_align, "not 64-aligned"},
        {"child overlaps binary", m_off_overlap, "overlaps"},
        {"child beyond storage", m_off_beyond, "overruns the storage"},
        {"child sig_count", m_child_sig, "child 0 sig_count 33"},
        {"child direction", m_child_dir, "child 0 signature entry 0"},
        {"child binary overruns", m_child_binary, "child 1 binary of 34 bytes"},
        {"trailing bytes", m_trailing, "1 trailing bytes"},
        {"short image", m_short, "child 1 binary"},
        {"shorter than header", m_header_only, "shorter than its"},
    };
    ag_callable_child ch[2];
    ag_callable_desc d = two_children(ch);
    size_t size;
    unsigned char *good = build(&d, &size);
    unsigned char *img = aligned_alloc(64, (size + 127) / 64 * 64);
    ag_ctx *ctx = agtest_ctx();
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        memset(img, 0, (size + 127) / 64 * 64);
        memcpy(img, good, size);
        size_t n = size;
        rows[r].apply(img, &n);
        ag_status st = ag_callable_validate(ctx, img, n, NULL);
        if ((int)st != AG_KERNEL_ERR_INVALID_ARGUMENT)
            fail_msg("row '%s': status %d", rows[r].what, (int)st);
        if (!agtest_errmsg_has(ctx, rows[r].needle))
            fail_msg("row '%s': message '%s' lacks '%s'", rows[r].what, ag_ctx_errmsg(ctx), rows[r].needle);
    }
    /* Null and misaligned images. */
    assert_st(ag_callable_validate(ctx, NULL, size, NULL), AG_KERNEL_ERR_INVALID_ARGUMENT);
    memcpy(img + 8, good, size);
    assert_st(ag_callable_validate(ctx, img + 8, size, NULL), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_errmsg(ctx, "16-byte aligned");
    /* The untouched image still passes. */
    assert_st(ag_callable_validate(ctx, good, size, NULL), AG_OK);
    ag_ctx_destroy(ctx);
    free(img);
    free(good);
}

static void builder_refuses_bad_descriptions(void **state)
{
    (void)state;
    size_t size;
    ag_callable_desc d = {.func_name = NULL};
    assert_st(ag_callable_image_size(NULL, &d, &size), AG_KERNEL_ERR_INVALID_ARGUMENT);
    char longname[80];
    memset(longname, 'x', sizeof longname - 1);
    longname[79] = '\0';
    d.func_name = longname;
    assert_st(ag_callable_image_size(NULL, &d, &size), AG_KERNEL_ERR_INVALID_ARGUMENT);
    d.func_name = "f";
    d.sig_count = 2; /* no signature array */
    assert_st(ag_callable_image_size(NULL, &d, &size), AG_KERNEL_ERR_INVALID_ARGUMENT);
    d.sig_count = 0;
    ag_callable_child ch[2] = {{.func_id = 1}, {.func_id = 1}};
    d.children = ch;
    d.child_count = 2;
    assert_st(ag_callable_image_size(NULL, &d, &size), AG_OK);
    void *img = aligned_alloc(64, (size + 63) / 64 * 64);
    assert_st(ag_callable_write(NULL, &d, img, size), AG_KERNEL_ERR_INVALID_ARGUMENT); /* repeated func id */
    ch[1].func_id = 2;
    assert_st(ag_callable_write(NULL, &d, img, size - 1), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_st(ag_callable_write(NULL, &d, (char *)img + 8, size), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_st(ag_callable_write(NULL, &d, img, size), AG_OK);
    free(img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layout_of_a_built_image),
        cmocka_unit_test(scalar_count_zero_means_not_recorded),
        cmocka_unit_test(every_malformed_field_is_refused),
        cmocka_unit_test(builder_refuses_bad_descriptions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
