/* Unit tests of the core utilities: context and error funnel, allocator hook
 * and failure injection, arena, growable arrays, string map, type tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "core/internal.h"

static void test_status_str(void **state)
{
    (void)state;
    assert_string_equal(ag_status_str(AG_OK), "ok");
    assert_string_equal(ag_status_str(AG_ENOMEM), "out of memory");
    assert_string_equal(ag_status_str((ag_status)999), "unknown status");
    assert_string_equal(ag_version(), AG_VERSION_STRING);
}

static int cb_calls;
static void on_error(void *ud, ag_status st, const char *msg)
{
    (void)ud;
    assert_int_equal(st, AG_EPARSE);
    assert_string_equal(msg, "x.agt:3:4: bad token");
    cb_calls++;
}

static void test_error_funnel(void **state)
{
    (void)state;
    ag_ctx *ctx = ag_ctx_create(NULL);
    assert_non_null(ctx);
    assert_string_equal(ag_ctx_errmsg(ctx), "");
    ag_ctx_set_error_callback(ctx, on_error, NULL);
    ag_status st = AG_ERR(ctx, AG_EPARSE, "%s:%d:%d: bad token", "x.agt", 3, 4);
    assert_int_equal(st, AG_EPARSE);
    assert_int_equal(cb_calls, 1);
    assert_int_equal(ag_ctx_last_status(ctx), AG_EPARSE);
    assert_string_equal(ag_ctx_errmsg(ctx), "x.agt:3:4: bad token");
    const char *file;
    int line;
    ag_ctx_error_origin(ctx, &file, &line);
    assert_non_null(strstr(file, "test_core.c"));
    assert_true(line > 0);
    ag_ctx_clear_error(ctx);
    assert_int_equal(ag_ctx_last_status(ctx), AG_OK);
    assert_string_equal(ag_ctx_errmsg(ctx), "");
    ag_ctx_destroy(ctx);
    ag_ctx_destroy(NULL);
}

static void test_testalloc_counts_and_fails(void **state)
{
    (void)state;
    ag_testalloc ta;
    ag_testalloc_init(&ta, 3, 0);
    ag_allocator hook = ag_testalloc_hook(&ta);
    ag_ctx *ctx = ag_ctx_create(&hook); /* call 1 */
    assert_non_null(ctx);
    void *a = ag_alloc(ctx, 10); /* call 2 */
    assert_non_null(a);
    assert_null(ag_alloc(ctx, 10)); /* call 3 fails */
    void *b = ag_alloc(ctx, 20);     /* call 4: transient fault, works again */
    assert_non_null(b);
    assert_int_equal(ta.nfail, 1);
    assert_int_equal(ta.live_blocks, 3);
    assert_true(ta.live_bytes > 30); /* the context itself plus 10 + 20 */
    b = ag_realloc(ctx, b, 20, 40);
    assert_non_null(b);
    ag_free(ctx, a, 10);
    ag_free(ctx, b, 40);
    ag_ctx_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
    assert_int_equal(ta.live_bytes, 0);

    ag_testalloc_init(&ta, 2, 1); /* persistent fault from call 2 on */
    hook = ag_testalloc_hook(&ta);
    ctx = ag_ctx_create(&hook);
    assert_non_null(ctx);
    assert_null(ag_alloc(ctx, 1));
    assert_null(ag_alloc(ctx, 1));
    assert_int_equal(ta.nfail, 2);
    ag_ctx_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
}

static void test_arena(void **state)
{
    (void)state;
    ag_testalloc ta;
    ag_testalloc_init(&ta, 0, 0);
    ag_allocator hook = ag_testalloc_hook(&ta);
    ag_ctx *ctx = ag_ctx_create(&hook);
    ag_arena a;
    ag_arena_init(&a, ctx);
    char *s = ag_arena_strdup(&a, "hello");
    assert_string_equal(s, "hello");
    assert_int_equal((uintptr_t)s % 16, 0);
    unsigned char *big = ag_arena_alloc(&a, 1 << 20); /* own chunk */
    assert_non_null(big);
    assert_int_equal(big[12345], 0);
    char *t = ag_arena_strndup(&a, "worldwide", 5);
    assert_string_equal(t, "world");
    assert_string_equal(s, "hello");
    for (int i = 0; i < 10000; i++)
        assert_non_null(ag_arena_alloc(&a, 24));
    ag_arena_reset(&a);
    ag_ctx_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
}

/* ag_realloc_double: first items, then twice as many each time, contents
 * kept; a failed realloc or a count past UINT32_MAX leaves array and
 * capacity as they were. */
static void test_realloc_double(void **state)
{
    (void)state;
    ag_testalloc ta;
    ag_testalloc_init(&ta, 0, 0);
    ag_allocator hook = ag_testalloc_hook(&ta);
    ag_ctx *ctx = ag_ctx_create(&hook);
    uint32_t cap = 0;
    uint32_t *v = ag_realloc_double(ctx, NULL, &cap, sizeof *v, 4u);
    assert_non_null(v);
    assert_int_equal(cap, 4);
    for (uint32_t i = 0; i < 4; i++)
        v[i] = i * 7u;
    v = ag_realloc_double(ctx, v, &cap, sizeof *v, 4u);
    assert_non_null(v);
    assert_int_equal(cap, 8);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(v[i], i * 7u);
    ta.fail_at = ta.calls + 1u; /* the next call fails */
    assert_null(ag_realloc_double(ctx, v, &cap, sizeof *v, 4u));
    assert_int_equal(cap, 8);
    assert_int_equal(v[3], 21);
    uint32_t huge = UINT32_MAX / 2u + 1u;
    assert_null(ag_realloc_double(ctx, v, &huge, sizeof *v, 4u));
    assert_int_equal(huge, UINT32_MAX / 2u + 1u);
    ag_free(ctx, v, cap * sizeof *v);
    ag_ctx_destroy(ctx);
    assert_int_equal(ta.live_blocks, 0);
}

static void test_vec_and_map(void **state)
{
    (void)state;
    ag_ctx *ctx = ag_ctx_create(NULL);
    ag_vec v = {0};
    for (uint32_t i = 0; i < 1000; i++)
        assert_int_equal(ag_vec_push(ctx, &v, sizeof(uint32_t), &i), AG_OK);
    assert_int_equal(v.len, 1000);
    assert_int_equal(AG_VEC_AT(v, uint32_t, 777), 777);
    ag_vec_free(ctx, &v, sizeof(uint32_t));
    assert_null(v.data);

    static char keys[2000][16];
    ag_strmap m;
    ag_strmap_init(&m);
    for (uint32_t i = 0; i < 2000; i++) {
        snprintf(keys[i], sizeof keys[i], "k%u", i);
        assert_int_equal(ag_strmap_put(ctx, &m, keys[i], i), AG_OK);
    }
    uint32_t val;
    for (uint32_t i = 0; i < 2000; i++) {
        assert_true(ag_strmap_get(&m, keys[i], &val));
        assert_int_equal(val, i);
    }
    assert_false(ag_strmap_get(&m, "nope", &val));
    assert_true(ag_strmap_del(&m, "k5"));
    assert_false(ag_strmap_get(&m, "k5", &val));
    assert_false(ag_strmap_del(&m, "k5"));
    assert_int_equal(ag_strmap_put(ctx, &m, keys[5], 55), AG_OK);
    assert_true(ag_strmap_get(&m, "k5", &val));
    assert_int_equal(val, 55);
    assert_int_equal(ag_strmap_put(ctx, &m, keys[6], 66), AG_OK); /* replace */
    assert_true(ag_strmap_get(&m, "k6", &val));
    assert_int_equal(val, 66);
    ag_strmap_free(ctx, &m);
    ag_ctx_destroy(ctx);
}

static void test_map_oom(void **state)
{
    (void)state;
    static char keys[100][8];
    for (uint64_t n = 1;; n++) {
        ag_testalloc ta;
        ag_testalloc_init(&ta, n, 0);
        ag_allocator hook = ag_testalloc_hook(&ta);
        ag_ctx *ctx = ag_ctx_create(&hook);
        if (!ctx)
            continue;
        ag_strmap m;
        ag_strmap_init(&m);
        ag_status st = AG_OK;
        uint32_t inserted = 0;
        for (uint32_t i = 0; i < 100 && st == AG_OK; i++) {
            snprintf(keys[i], sizeof keys[i], "k%u", i);
            st = ag_strmap_put(ctx, &m, keys[i], i);
            if (st == AG_OK)
                inserted++;
        }
        assert_true(st == AG_OK || st == AG_ENOMEM);
        for (uint32_t i = 0; i < inserted; i++)
            assert_true(ag_strmap_get(&m, keys[i], NULL));
        ag_strmap_free(ctx, &m);
        ag_ctx_destroy(ctx);
        assert_int_equal(ta.live_blocks, 0);
        if (ta.nfail == 0)
            break;
    }
}

static void test_membuf_and_readfile(void **state)
{
    (void)state;
    ag_ctx *ctx = ag_ctx_create(NULL);
    ag_membuf mb;
    ag_membuf_init(&mb, ctx);
    ag_sink s = ag_sink_membuf(&mb);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(s.write(s.ud, "abc", 3), AG_OK);
    assert_int_equal(mb.len, 3000);
    assert_int_equal(mb.data[3000], '\0');
    ag_membuf_free(&mb);

    char *buf;
    size_t len;
    assert_int_equal(ag_read_file(ctx, AG_SOURCE_DIR "/tests/unit/test_core.c", &buf, &len), AG_OK);
    assert_true(len > 100);
    assert_non_null(strstr(buf, "test_membuf_and_readfile"));
    ag_free(ctx, buf, len + 1);
    assert_int_equal(ag_read_file(ctx, "/nonexistent/x.agt", &buf, &len), AG_EIO);
    assert_non_null(strstr(ag_ctx_errmsg(ctx), "/nonexistent/x.agt: cannot open"));
    ag_ctx_destroy(ctx);
}

static void test_types(void **state)
{
    (void)state;
    assert_string_equal(ag_dtype_name(AG_DT_F32), "f32");
    assert_int_equal(ag_dtype_bits(AG_DT_I4), 4);
    assert_int_equal(ag_dtype_bits(AG_DT_STRING), 0);
    ag_dtype dt;
    assert_true(ag_dtype_parse("bf16", 4, &dt));
    assert_int_equal(dt, AG_DT_BF16);
    assert_false(ag_dtype_parse("f33", 3, &dt));
    assert_false(ag_dtype_parse("f3", 2, &dt));
    assert_null(ag_dtype_name((ag_dtype)99));
    assert_true(ag_dtype_valid(7));
    assert_false(ag_dtype_valid(0));
    assert_false(ag_dtype_valid(40));
    ag_mem_type mt;
    assert_true(ag_mem_type_parse("p2p", 3, &mt));
    assert_int_equal(mt, AG_MEM_P2P);
    assert_string_equal(ag_mem_type_name(AG_MEM_HOST), "host");
    ag_format f;
    assert_true(ag_format_parse("NC1HWC0", 7, &f));
    assert_string_equal(ag_format_name(f), "NC1HWC0");
    int64_t dims[3] = {2, 3, 4};
    ag_tensor t = {.dtype = AG_DT_F32, .rank = 3, .dims = dims};
    assert_int_equal(ag_tensor_numel(&t), 24);
    int64_t huge[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 1 << 20};
    t.dims = huge;
    assert_true(ag_tensor_numel(&t) == UINT64_MAX);
    assert_string_equal(ag_attr_kind_name(AG_ATTR_TENSORS), "tensors");
    assert_true(ag_dtype_is_int(AG_DT_BOOL));
    assert_true(ag_dtype_is_int(AG_DT_U64));
    assert_false(ag_dtype_is_int(AG_DT_F16));
    assert_true(ag_dtype_is_float(AG_DT_BF16));
    assert_false(ag_dtype_is_float(AG_DT_F8E5M2));
    assert_false(ag_dtype_is_float(AG_DT_I32));
    assert_int_equal(ag_dims_numel(0, NULL), 1);
    assert_int_equal(ag_dims_numel(3, dims), 24);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_str),
        cmocka_unit_test(test_error_funnel),
        cmocka_unit_test(test_testalloc_counts_and_fails),
        cmocka_unit_test(test_arena),
        cmocka_unit_test(test_realloc_double),
        cmocka_unit_test(test_vec_and_map),
        cmocka_unit_test(test_map_oom),
        cmocka_unit_test(test_membuf_and_readfile),
        cmocka_unit_test(test_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
