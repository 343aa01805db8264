/* Unit tests of the math family of shape inference rules (src/ir/infer_math.c):
 * per family, shapes and dtypes with known and unknown dims, constant folding
 * of small shape arithmetic, and contradictions reported as AG_ESHAPE naming
 * the node.  Graphs are built with the graph API and run through
 * ag_infer_shapes. */
#include "support/agtest.h"

#include <stdio.h>

#define U AG_DIM_UNKNOWN
#define NOIN AG_NONE

typedef struct mt {
    ag_ctx *ctx;
    ag_graph *g;
    uint32_t nouts; /* inputs of the NetOutput node so far */
    ag_node_id netout;
} mt;

static mt *mt_new(void)
{
    mt *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->ctx = agtest_ctx();
    assert_int_equal(ag_graph_create(t->ctx, "m", &t->g), AG_OK);
    t->netout = agtest_node(t->g, AG_ROOT, "NetOutput", "out", 0, 0);
    return t;
}

static void mt_free(mt *t)
{
    ag_graph_destroy(t->g);
    ag_ctx_destroy(t->ctx);
    free(t);
}

static ag_node_id mt_data(mt *t, const char *name, ag_dtype dt, int32_t rank, const int64_t *dims)
{
    ag_node_id n = agtest_node(t->g, AG_ROOT, "Data", name, 0, 1);
    ag_tensor_desc *d = ag_node_output_desc(t->g, n, 0);
    d->dtype = dt;
    assert_int_equal(ag_desc_set_shape(t->g, d, rank, dims), AG_OK);
    return n;
}

/* A Const node holding an int64 tensor. */
static ag_node_id mt_const_i64(mt *t, const char *name, int32_t rank, const int64_t *dims, const int64_t *vals)
{
    ag_node_id n = agtest_node(t->g, AG_ROOT, "Const", name, 0, 1);
    ag_tensor v;
    const ag_tensor *owned;
    ag_attr a;
    uint64_t numel = 1;
    for (int32_t k = 0; k < rank; k++)
        numel *= (uint64_t)dims[k];
    memset(&v, 0, sizeof v);
    v.dtype = AG_DT_I64;
    v.rank = rank;
    v.dims = dims;
    v.nbytes = numel * 8;
    v.data = vals;
    assert_int_equal(ag_graph_make_tensor(t->g, &v, &owned), AG_OK);
    memset(&a, 0, sizeof a);
    a.name = "value";
    a.kind = AG_ATTR_TENSOR;
    a.count = 1;
    a.v.t = owned;
    assert_int_equal(ag_attrs_set(t->g, ag_node_attrs(t->g, n), &a), AG_OK);
    {
        ag_tensor_desc *d = ag_node_output_desc(t->g, n, 0);
        d->dtype = AG_DT_I64;
        assert_int_equal(ag_desc_set_shape(t->g, d, rank, dims), AG_OK);
        assert_int_equal(ag_desc_set_value(t->g, d, owned), AG_OK);
    }
    return n;
}

/* A node of type with inputs from srcs (output 0 of each; NOIN leaves the
 * input unconnected: an omitted optional input). */
static ag_node_id mt_op(mt *t, const char *type, const char *name, uint32_t nin, const ag_node_id *srcs,
                        uint32_t nout)
{
    ag_node_id n = agtest_node(t->g, AG_ROOT, type, name, nin, nout);
    for (uint32_t i = 0; i < nin; i++)
        if (srcs[i] != NOIN)
            agtest_edge(t->g, srcs[i], 0, n, i);
    return n;
}

static void mt_int(mt *t, ag_node_id n, const char *name, int64_t v)
{
    assert_int_equal(ag_attrs_set_int(t->g, ag_node_attrs(t->g, n), name, v), AG_OK);
}

static void mt_ints(mt *t, ag_node_id n, const char *name, const int64_t *v, uint32_t count)
{
    assert_int_equal(ag_attrs_set_ints(t->g, ag_node_attrs(t->g, n), name, v, count), AG_OK);
}

static void mt_str(mt *t, ag_node_id n, const char *name, const char *v)
{
    assert_int_equal(ag_attrs_set_string(t->g, ag_node_attrs(t->g, n), name, v), AG_OK);
}

static void mt_run(mt *t)
{
    ag_status st = ag_infer_shapes(t->g, NULL);
    if (st != AG_OK)
        print_error("inference failed: %s\n", ag_ctx_errmsg(t->ctx));
    assert_int_equal(st, AG_OK);
}

/* Asserts output o of n: dtype and shape (rank AG_RANK_UNKNOWN: rank unknown). */
static void check_out_(mt *t, ag_node_id n, uint32_t o, ag_dtype dt, int32_t rank, const int64_t *dims,
                       const char *file, int line)
{
    const ag_tensor_desc *d = ag_node_output_desc_c(t->g, n, o);
    bool ok = d->dtype == dt && d->rank == rank;
    for (int32_t k = 0; ok && k < rank; k++)
        ok = d->dims[k] == dims[k];
    if (!ok) {
        char got[256] = "", want[256] = "";
        size_t u = 0, w = 0;
        for (int32_t k = 0; k < d->rank && u < 200; k++)
            u += (size_t)snprintf(got + u, sizeof got - u, "%lld,", (long long)d->dims[k]);
        for (int32_t k = 0; k < rank && w < 200; k++)
            w += (size_t)snprintf(want + w, sizeof want - w, "%lld,", (long long)dims[k]);
        print_error("%s:%d: %s output %u: got %s rank %d [%s], want %s rank %d [%s]\n", file, line,
                    ag_node_name(t->g, n), o, ag_dtype_name(d->dtype) ? ag_dtype_name(d->dtype) : "?", d->rank,
                    got, ag_dtype_name(dt) ? ag_dtype_name(dt) : "?", rank, want);
        fail();
    }
}
#define check_out(t, n, o, dt, rank, ...)                                         \
    do {                                                                          \
        const int64_t want_[] = {0, __VA_ARGS__};                                 \
        check_out_((t), (n), (o), (dt), (rank), want_ + 1, __FILE__, __LINE__);   \
    } while (0)
#define check_scalar(t, n, o, dt) check_out_((t), (n), (o), (dt), 0, NULL, __FILE__, __LINE__)

/* Runs inference expecting AG_ESHAPE whose message names node name. */
static void expect_shape_error(mt *t, const char *name, const char *needle)
{
    char node[128];
    assert_int_equal(ag_infer_shapes(t->g, NULL), AG_ESHAPE);
    snprintf(node, sizeof node, "node %s (", name);
    assert_errmsg(t->ctx, node);
    if (needle)
        assert_errmsg(t->ctx, needle);
}

/* Integer value attached to output o of n. */
static void check_value_i64(mt *t, ag_node_id n, uint32_t o, const int64_t *want, uint64_t count)
{
    const ag_tensor_desc *d = ag_node_output_desc_c(t->g, n, o);
    assert_non_null(d->value);
    assert_int_equal(ag_tensor_numel(d->value), count);
    assert_int_equal(d->value->dtype, AG_DT_I64);
    for (uint64_t k = 0; k < count; k++) {
        int64_t v;
        memcpy(&v, (const char *)d->value->data + k * 8, 8);
        assert_int_equal(v, want[k]);
    }
}

/* ---- elementwise ---- */

static void test_unary(void **state)
{
    (void)state;
    mt *t = mt_new();
    const int64_t xd[] = {2, U, 4};
    ag_node_id x = mt_data(t, "x", AG_DT_F32, 3, xd);
    ag_node_id sig = mt_op(t, "Sigmoid", "sig", 1, &x, 1);
    ag_node_id nan = mt_op(t, "IsNaN", "nan", 1, &x, 1);
    ag_node_id clip = mt_op(t, "Clip", "clip", 3, (ag_node_id[]){x, NOIN, NOIN}, 1);
    ag_node_id sm = mt_op(t, "Softmax", "sm", 1, &x, 1);
    ag_node_id drop = mt_op(t, "Dropout", "drop", 1, &x, 2);
    ag_node_id y = mt_data(t, "y", AG_DT_F16, AG_RANK_UNKNOWN, NULL);
    ag_node_id gelu = mt_op(t, "Gelu", "gelu", 1, &y, 1);
    mt_run(t);
    check_out(t, sig, 0, AG_DT_F32, 3, 2, U, 4);
    check_out(t, nan, 0, AG_DT_BOOL, 3, 2, U, 4);
    check_out(t, clip, 0, AG_DT_F32, 3, 2, U, 4);
    check_out(t, sm, 0, AG_DT_F32, 3, 2, U, 4);
    check_out(t, drop, 0, AG_DT_F32, 3, 2, U, 4);
    check_out(t, drop, 1, AG_DT_BOOL, 3, 2, U, 4);
    check_out_(t, gelu, 0, AG_DT_F16, AG_RANK_UNKNOWN, NULL, __FILE__, __LINE__);
    mt_free(t);
}

static void test_broadcast(void **state)
{
    (void)state;
    mt *t = mt_new();
    const int64_t ad[] = {2, 1, 4}, bd[] = {3, 1}, cd[] = {U, 4};
    ag_node_id a = mt_data(t, "a", AG_DT_F32, 3, ad);
    ag_node_id b = mt_data(t, "b", AG_DT_F32, 2, bd);
    ag_node_id c = mt_data(t, "c", AG_DT_F32, 2, cd);
    ag_node_id e = mt_data(t, "e", AG_DT_I32, 0, NULL);
    ag_node_id pow = mt_op(t, "Pow", "pow", 2, (ag_node_id[]){a, e}, 1);
    ag_node_id sum = mt_op(t, "Sum", "sum", 3, (ag_node_id[]){a, b, c}, 1);
    ag_node_id mean = mt_op(t, "Mean", "mean", 2, (ag_node_id[]){b, c}, 1);
    ag_node_id sl = mt_data(t, "sl", AG_DT_F32, 2, (const int64_t[]){1, 4});
    ag_node_id prelu = mt_op(t, "PRelu", "prelu", 2, (ag_node_id[]){a, sl}, 1);
    ag_node_id p = mt_data(t, "p", AG_DT_BOOL, 1, (const int64_t[]){4});
    ag_node_id xr = mt_op(t, "Xor", "xor", 2, (ag_node_id[]){p, p}, 1);
    mt_run(t);
    check_out(t, pow, 0, AG_DT_F32, 3, 2, 1, 4);
    check_out(t, sum, 0, AG_DT_F32, 3, 2, 3, 4);
    check_out(t, mean, 0, AG_DT_F32, 2, 3, 4);
    check_out(t, prelu, 0, AG_DT_F32, 3, 2, 1, 4);
    check_out(t, xr, 0, AG_DT_BOOL, 1, 4);
    mt_free(t);

    /* PRelu's slope may not grow X. */
    t = mt_new();
    a = mt_data(t, "a", AG_DT_F32, 2, (const int64_t[]){2, 1});
    b = mt_data(t, "b", AG_DT_F32, 1, (const int64_t[]){3});
    mt_op(t, "PRelu", "bad_prelu", 2, (ag_node_id[]){a, b}, 1);
    expect_shape_error(t, "bad_prelu", "slope");
    mt_free(t);
}

static void test_broadcast_error(void **state)
{
    (void)state;
    mt *t = mt_new();
    const int64_t ad[] = {2, 3}, bd[] = {4};
    ag_node_id a = mt_data(t, "a", AG_DT_F32, 2, ad);
    ag_node_id b = mt_data(t, "b", AG_DT_F32, 1, bd);
    mt_op(t, "Sum", "bad_sum", 2, (ag_node_id[]){a, b}, 1);
    expect_shape_error(t, "bad_sum", "does not broadcast");
    mt_free(t);
}

/* Before opset 7 "broadcast"=1 maps B onto A along axis: the result is A's shape. */
static void test_legacy_broadcast(void **state)
{
    (void)state;
    mt *t = mt_new();
    ag_node_id a = mt_data(t, "a", AG_DT_F32, 4, (const int64_t[]){2, 3, 4, 5});
    ag_node_id b = mt_data(t, "b", AG_DT_F32, 1, (const int64_t[]){3});
    ag_node_id p = mt_op(t, "Pow", "pow", 2, (ag_node_id[]){a, b}, 1);
    mt_int(t, p, "broadcast", 1);
    mt_int(t, p, "axis", 1);
    mt_run(t);
    check_out(t, p, 0, AG_DT_F32, 4, 2, 3, 4, 5);
    mt_free(t);
}

/* Small integer values are folded so that shape arithmetic reaches Reshape. */
static void test_value_folding(void **state)
{
    (void)state;
    mt *t = mt_new();
    const int64_t d2[] = {2}, d1[] = {1};
    ag_node_id a = mt_const_i64(t, "a", 1, d2, (const int64_t[]){3, 4});
    ag_node_id b = mt_const_i64(t, "b", 1, d1, (const int64_t[]){2});
    ag_node_id s = mt_op(t, "Sum", "s", 2, (ag_node_id[]){a, b}, 1);
    ag_node_id pw = mt_op(t, "Pow", "pw", 2, (ag_node_id[]){a, b}, 1);
    ag_node_id sh = mt_op(t, "BitShift", "sh", 2, (ag_node_id[]){a, b}, 1);
    ag_node_id rs = mt_op(t, "ReduceSum", "rs", 1, &a, 1);
    ag_node_id rmax = mt_op(t, "ReduceMax", "rmax", 1, &a, 1);
    ag_node_id sg = mt_op(t, "Sign", "sg", 1, &a, 1);
    mt_str(t, sh, "direction", "LEFT");
    mt_int(t, rs, "keepdims", 0);
    mt_run(t);
    check_out(t, s, 0, AG_DT_I64, 1, 2);
    check_value_i64(t, s, 0, (const int64_t[]){5, 6}, 2);
    check_value_i64(t, pw, 0, (const int64_t[]){9, 16}, 2);
    check_value_i64(t, sh, 0, (const int64_t[]){12, 16}, 2);
    check_scalar(t, rs, 0, AG_DT_I64);
    check_value_i64(t, rs, 0, (const int64_t[]){7}, 1);
    check_out(t, rmax, 0, AG_DT_I64, 1, 1);
    check_value_i64(t, rmax, 0, (const int64_t[]){4}, 1);
    check_value_i64(t, sg, 0, (const int64_t[]){1, 1}, 2);
    mt_free(t);
}

/* ---- reductions ---- */

static void test_reduce(void **state)
{
    (void)state;
    mt *t = mt_new();
    const int64_t xd[] = {2, U, 4, 5};
    ag_node_id x = mt_data(t, "x", AG_DT_F32, 4, xd);
    ag_node_id ax = mt_const_i64(t, "ax", 1, (const int64_t[]){2}, (const int64_t[]){-1, 1});
    ag_node_id empty = mt_const_i64(t, "empty", 1, (const int64_t[]){0}, NULL);
    ag_node_id dyn = mt_data(t, "dyn", AG_DT_I64, 1, (const int64_t[]){U});
    ag_node_id m1 = mt_op(t, "ReduceMean", "m1", 1, &x, 1);
    ag_node_id m2 = mt_op(t, "ReduceL2", "m2", 1, &x, 1);
    ag_node_id s1 = mt_op(t, "ReduceSum", "s1", 2, (ag_node_id[]){x, ax}, 1);
    ag_node_id s2 = mt_op(t, "ReduceSum", "s2", 2, (ag_node_id[]){x, empty}, 1);
    ag_node_id s3 = mt_op(t, "ReduceMax", "s3", 2, (ag_node_id[]){x, dyn}, 1);
    ag_node_id s4 = mt_op(t, "ReduceMin", "s4", 2, (ag_node_id[]){x, dyn}, 1);
    ag_node_id am = mt_op(t, "ArgMax", "am", 1, &x, 1);
    ag_node_id an = mt_op(t, "ArgMin", "an", 1, &x, 1);
    mt_ints(t, m1, "axes", (const int64_t[]){1, 3}, 2);
    mt_ints(t, m2, "axes", (const int64_t[]){0}, 1);
    mt_int(t, m2, "keepdims", 0);
    mt_int(t, s1, "keepdims", 0);
    mt_int(t, s2, "noop_with_empty_axes", 1);
    mt_int(t, s4, "keepdims", 0);
    mt_int(t, am, "axis", -2);
    mt_int(t, an, "axis", 1);
    mt_int(t, an, "keepdims", 0);
    mt_run(t);
    check_out(t, m1, 0, AG_DT_F32, 4, 2, 1, 4, 1);
    check_out(t, m2, 0, AG_DT_F32, 3, U, 4, 5);
    check_out(t, s1, 0, AG_DT_F32, 2, 2, 4);
    check_out(t, s2, 0, AG_DT_F32, 4, 2, U, 4, 5);
    check_out(t, s3, 0, AG_DT_F32, 4, U, U, U, U);
    check_out_(t, s4, 0, AG_DT_F32, AG_RANK_UNKNOWN, NULL, __FILE__, __LINE__);
    check_out(t, am, 0, AG_DT_I64, 4, 2, U, 1, 5);
    check_out(t, an, 0, AG_DT_I64, 3, 2, 4, 5);
    mt_free(t);

    t = mt_new();
    x = mt_data(t, "x", AG_DT_F32, 2, (const int64_t[]){2, 3});
    ag_node_id bad = mt_op(t, "ReduceMean", "bad_red", 1, &x, 1);
    mt_ints(t, bad, "axes", (const int64_t[]){2}, 1);
    expect_shape_error(t, "bad_red", "axis 2");
    mt_free(t);
}

/* ---- matrix products ---- */

static void test_matmul(void **state)
{
    (void)state;
    mt *t = mt_new();
    ag_node_id a3 = mt_data(t, "a3", AG_DT_F32, 3, (const int64_t[]){2, 3, 4});
    ag_node_id b2 = mt_data(t, "b2", AG_DT_F32, 2, (const int64_t[]){4, 5});
    ag_node_id v4 = mt_data(t, "v4", AG_DT_F32, 1, (const int64_t[]){4});
    ag_node_id bu = mt_data(t, "bu", AG_DT_F32, 4, (const int64_t[]){7, 1, U, U});
    ag_node_id un = mt_data(t, "un", AG_DT_F32, AG_RANK_UNKNOWN, NULL);
    ag_node_id m1 = mt_op(t, "MatMul", "m1", 2, (ag_node_id[]){a3, b2}, 1);
    ag_node_id m2 = mt_op(t, "MatMul", "m2", 2, (ag_node_id[]){v4, b2}, 1);
    ag_node_id m3 = mt_op(t, "MatMul", "m3", 2, (ag_node_id[]){a3, v4}, 1);
    ag_node_id m4 = mt_op(t, "MatMul", "m4", 2, (ag_node_id[]){v4, v4}, 1);
    ag_node_id m5 = mt_op(t, "MatMul", "m5", 2, (ag_node_id[]){a3, bu}, 1);
    ag_node_id m6 = mt_op(t, "MatMul", "m6", 2, (ag_node_id[]){a3, un}, 1);
    ag_node_id i8a = mt_data(t, "i8a", AG_DT_U8, 2, (const int64_t[]){3, 4});
    ag_node_id i8b = mt_data(t, "i8b", AG_DT_U8, 2, (const int64_t[]){4, 2});
    ag_node_id mi = mt_op(t, "MatMulInteger", "mi", 2, (ag_node_id[]){i8a, i8b}, 1);
    ag_node_id ga = mt_data(t, "ga", AG_DT_F32, 2, (const int64_t[]){4, 3});
    ag_node_id gb = mt_data(t, "gb", AG_DT_F32, 2, (const int64_t[]){5, 4});
    ag_node_id gemm = mt_op(t, "Gemm", "gemm", 2, (ag_node_id[]){ga, gb}, 1);
    ag_node_id e1 = mt_op(t, "Einsum", "e1", 2, (ag_node_id[]){a3, b2}, 1);
    ag_node_id e2 = mt_op(t, "Einsum", "e2", 1, &a3, 1);
    ag_node_id e3 = mt_op(t, "Einsum", "e3", 2, (ag_node_id[]){bu, b2}, 1);
    ag_node_id sq = mt_data(t, "sq", AG_DT_F64, 3, (const int64_t[]){6, 3, U});
    ag_node_id det = mt_op(t, "Det", "det", 1, &sq, 1);
    mt_int(t, gemm, "transA", 1);
    mt_int(t, gemm, "transB", 1);
    mt_str(t, e1, "equation", "bij,jk->bik");
    mt_str(t, e2, "equation", "bij->ji");
    mt_str(t, e3, "equation", "...ij,jk");
    mt_run(t);
    check_out(t, m1, 0, AG_DT_F32, 3, 2, 3, 5);
    check_out(t, m2, 0, AG_DT_F32, 1, 5);
    check_out(t, m3, 0, AG_DT_F32, 2, 2, 3);
    check_scalar(t, m4, 0, AG_DT_F32);
    check_out(t, m5, 0, AG_DT_F32, 4, 7, 2, 3, U);
    check_out_(t, m6, 0, AG_DT_F32, AG_RANK_UNKNOWN, NULL, __FILE__, __LINE__);
    check_out(t, mi, 0, AG_DT_I32, 2, 3, 2);
    check_out(t, gemm, 0, AG_DT_F32, 2, 3, 5);
    check_out(t, e1, 0, AG_DT_F32, 3, 2, 3, 5);
    check_out(t, e2, 0, AG_DT_F32, 2, 4, 3);
    check_out(t, e3, 0, AG_DT_F32, 4, 7, 1, U, 5);
    check_out(t, det, 0, AG_DT_F64, 1, 6);
    mt_free(t);

    t = mt_new();
    a3 = mt_data(t, "a3", AG_DT_F32, 3, (const int64_t[]){2, 3, 4});
    b2 = mt_data(t, "b2", AG_DT_F32, 2, (const int64_t[]){5, 6});
    mt_op(t, "MatMul", "bad_mm", 2, (ag_node_id[]){a3, b2}, 1);
    expect_shape_error(t, "bad_mm", "inner dimensions");
    mt_free(t);

    t = mt_new();
    a3 = mt_data(t, "a3", AG_DT_F32, 3, (const int64_t[]){2, 3, 4});
    ag_node_id bad_e = mt_op(t, "Einsum", "bad_einsum", 1, &a3, 1);
    mt_str(t, bad_e, "equation", "ab.c");
    expect_shape_error(t, "bad_einsum", "ellipsis");
    mt_free(t);

    t = mt_new();
    ga = mt_data(t, "ga", AG_DT_F32, 2, (const int64_t[]){4, 3});
    gb = mt_data(t, "gb", AG_DT_F32, 2, (const int64_t[]){4, 5});
    mt_op(t, "Gemm", "bad_gemm", 2, (ag_node_id[]){ga, gb}, 1);
    expect_shape_error(t, "bad_gemm", "K=3");
    mt_free(t);
}

/* ---- convolution and pooling ---- */

static void test_conv(void **state)
{
    (void)state;
    mt *t = mt_new();
    ag_node_id x = mt_data(t, "x", AG_DT_F32, 4, (const int64_t[]){1, 3, 32, 31});
    ag_node_id w = mt_data(t, "w", AG_DT_F32, 4, (const int64_t[]){16, 3, 3, 3});
    ag_node_id xu = mt_data(t, "xu", AG_DT_F32, 4, (const int64_t[]){U, 3, U, 20});
    ag_node_id c1 = mt_op(t, "Conv", "c1", 2, (ag_node_id[]){x, w}, 1);
    ag_node_id c2 = mt_op(t, "Conv", "c2", 2, (ag_node_id[]){x, w}, 1);
    ag_node_id c3 = mt_op(t, "Conv", "c3", 2, (ag_node_id[]){xu, w}, 1);
    ag_node_id c4 = mt_op(t, "Conv", "c4", 2, (ag_node_id[]){x, w}, 1);
    ag_node_id wt = mt_data(t, "wt", AG_DT_F32, 4, (const int64_t[]){3, 4, 3, 3});
    ag_node_id ct = mt_op(t, "ConvTranspose", "ct", 2, (ag_node_id[]){x, wt}, 1);
    ag_node_id ct2 = mt_op(t, "ConvTranspose", "ct2", 2, (ag_node_id[]){x, wt}, 1);
    ag_node_id ct3 = mt_op(t, "ConvTranspose", "ct3", 2, (ag_node_id[]){x, wt}, 1);
    ag_node_id xi = mt_data(t, "xi", AG_DT_U8, 3, (const int64_t[]){1, 3, 10});
    ag_node_id wi = mt_data(t, "wi", AG_DT_U8, 3, (const int64_t[]){2, 3, 3});
    ag_node_id ci = mt_op(t, "ConvInteger", "ci", 2, (ag_node_id[]){xi, wi}, 1);
    mt_ints(t, c1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    mt_ints(t, c1, "strides", (const int64_t[]){2, 2}, 2);
    mt_str(t, c2, "auto_pad", "SAME_UPPER");
    mt_ints(t, c2, "strides", (const int64_t[]){2, 2}, 2);
    mt_ints(t, c3, "dilations", (const int64_t[]){2, 2}, 2);
    mt_str(t, c4, "auto_pad", "VALID");
    mt_ints(t, c4, "strides", (const int64_t[]){3, 3}, 2);
    mt_ints(t, ct, "strides", (const int64_t[]){2, 2}, 2);
    mt_ints(t, ct, "output_padding", (const int64_t[]){1, 0}, 2);
    mt_ints(t, ct, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    mt_int(t, ct2, "group", 2);
    mt_ints(t, ct2, "output_shape", (const int64_t[]){40, 41}, 2);
    mt_str(t, ct3, "auto_pad", "SAME_LOWER");
    mt_ints(t, ct3, "strides", (const int64_t[]){2, 3}, 2);
    mt_run(t);
    check_out(t, c1, 0, AG_DT_F32, 4, 1, 16, 16, 16);
    check_out(t, c2, 0, AG_DT_F32, 4, 1, 16, 16, 16);
    check_out(t, c3, 0, AG_DT_F32, 4, U, 16, U, 16);
    check_out(t, c4, 0, AG_DT_F32, 4, 1, 16, 10, 10);
    check_out(t, ct, 0, AG_DT_F32, 4, 1, 4, 64, 61);
    check_out(t, ct2, 0, AG_DT_F32, 4, 1, 8, 40, 41);
    check_out(t, ct3, 0, AG_DT_F32, 4, 1, 4, 64, 93);
    check_out(t, ci, 0, AG_DT_I32, 3, 1, 2, 8);
    mt_free(t);

    /* Channels must match weight channels x group. */
    t = mt_new();
    x = mt_data(t, "x", AG_DT_F32, 4, (const int64_t[]){1, 4, 8, 8});
    w = mt_data(t, "w", AG_DT_F32, 4, (const int64_t[]){8, 3, 3, 3});
    mt_op(t, "Conv", "bad_conv", 2, (ag_node_id[]){x, w}, 1);
    expect_shape_error(t, "bad_conv", "channels");
    mt_free(t);

    /* A kernel larger than the padded input. */
    t = mt_new();
    x = mt_data(t, "x", AG_DT_F32, 3, (const int64_t[]){1, 1, 2});
    w = mt_data(t, "w", AG_DT_F32, 3, (const int64_t[]){1, 1, 5});
    mt_op(t, "Conv", "small_conv", 2, (ag_node_id[]){x, w}, 1);
    expect_shape_error(t, "small_conv", "does not fit");
    mt_free(t);
}

static void test_pool(void **state)
{
    (void)state;
    mt *t = mt_new();
    ag_node_id x = mt_data(t, "x", AG_DT_F32, 4, (const int64_t[]){1, 3, 32, U});
    ag_node_id x5 = mt_data(t, "x5", AG_DT_F32, 4, (const int64_t[]){1, 1, 5, 5});
    ag_node_id mp = mt_op(t, "MaxPool", "mp", 1, &x, 2);
    ag_node_id mpc = mt_op(t, "MaxPool", "mpc", 1, &x5, 1);
    ag_node_id ap = mt_op(t, "AveragePool", "ap", 1, &x, 1);
    ag_node_id gp = mt_op(t, "GlobalAveragePool", "gp", 1, &x, 1);
    ag_node_id lp = mt_op(t, "LpPool", "lp", 1, &x5, 1);
    ag_node_id mu = mt_op(t, "MaxUnpool", "mu", 2, (ag_node_id[]){x5, x5}, 1);
    mt_ints(t, mp, "kernel_shape", (const int64_t[]){3, 3}, 2);
    mt_ints(t, mp, "strides", (const int64_t[]){2, 2}, 2);
    mt_ints(t, mpc, "kernel_shape", (const int64_t[]){2, 2}, 2);
    mt_ints(t, mpc, "strides", (const int64_t[]){2, 2}, 2);
    mt_int(t, mpc, "ceil_mode", 1);
    mt_ints(t, ap, "kernel_shape", (const int64_t[]){2, 2}, 2);
    mt_str(t, ap, "auto_pad", "SAME_LOWER");
    mt_ints(t, ap, "strides", (const int64_t[]){3, 3}, 2);
    mt_ints(t, lp, "kernel_shape", (const int64_t[]){3, 3}, 2);
    mt_ints(t, lp, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    mt_ints(t, mu, "kernel_shape", (const int64_t[]){2, 2}, 2);
    mt_ints(t, mu, "strides", (const int64_t[]){2, 2}, 2);
    mt_run(t);
    check_out(t, mp, 0, AG_DT_F32, 4, 1, 3, 15, U);
    check_out(t, mp, 1, AG_DT_I64, 4, 1, 3, 15, U);
    check_out(t, mpc, 0, AG_DT_F32, 4, 1, 1, 3, 3);
    check_out(t, ap, 0, AG_DT_F32, 4, 1, 3, 11, U);
    check_out(t, gp, 0, AG_DT_F32, 4, 1, 3, 1, 1);
    check_out(t, lp, 0, AG_DT_F32, 4, 1, 1, 5, 5);
    check_out(t, mu, 0, AG_DT_F32, 4, 1, 1, 10, 10);
    mt_free(t);
}

/* ---- normalisation, recurrent, quantisation ---- */

static void test_norm(void **state)
{
    (void)state;
    mt *t = mt_new();
    ag_node_id x = mt_data(t, "x", AG_DT_F16, 4, (const int64_t[]){2, 8, U, 5});
    ag_node_id c = mt_data(t, "c", AG_DT_F32, 1, (const int64_t[]){8});
    ag_node_id bn = mt_op(t, "BatchNormalization", "bn", 5, (ag_node_id[]){x, c, c, c, c}, 3);
    ag_node_id ln = mt_op(t, "LayerNormalization", "ln", 3, (ag_node_id[]){x, c, NOIN}, 3);
    ag_node_id in = mt_op(t, "InstanceNormalization", "in", 3, (ag_node_id[]){x, c, c}, 1);
    ag_node_id gn = mt_op(t, "GroupNormalization", "gn", 3, (ag_node_id[]){x, c, c}, 1);
    mt_int(t, bn, "training_mode", 1);
    mt_int(t, ln, "axis", 2);
    mt_run(t);
    check_out(t, bn, 0, AG_DT_F16, 4, 2, 8, U, 5);
    check_out(t, bn, 1, AG_DT_F32, 1, 8);
    check_out(t, bn, 2, AG_DT_F32, 1, 8);
    check_out(t, ln, 0, AG_DT_F16, 4, 2, 8, U, 5);
    check_out(t, ln, 1, AG_DT_F32, 4, 2, 8, 1, 1);
    check_out(t, ln, 2, AG_DT_F32, 4, 2, 8, 1, 1);
    check_out(t, in, 0, AG_DT_F16, 4, 2, 8, U, 5);
    check_out(t, gn, 0, AG_DT_F16, 4, 2, 8, U, 5);
    mt_free(t);

    t = mt_new();
    x = mt_data(t, "x", AG_DT_F32, 4, (const int64_t[]){2, 8, 3, 5});
    c = mt_data(t, "c", AG_DT_F32, 1, (const int64_t[]){7});
    mt_op(t, "BatchNormalization", "bad_bn", 5, (ag_node_id[]){x, c, c, c, c}, 1);
    expect_shape_error(t, "bad_bn", "channels");
    mt_free(t);
}

static void test_rnn(void **state)
{
    (void)state;
    mt *t = mt_new();
    ag_node_id x = mt_data(t, "x", AG_DT_F32, 3, (const int64_t[]){10, 4, 6});
    ag_node_id xl = mt_data(t, "xl", AG_DT_F32, 3, (const int64_t[]){4, U, 6});
    ag_node_id w = mt_data(t, "w", AG_DT_F32, 3, (const int64_t[]){2, 28, 6});
    ag_node_id r = mt_data(t, "r", AG_DT_F32, 3, (const int64_t[]){2, 28, 7});
    ag_node_id lstm = mt_op(t, "LSTM", "lstm", 3, (ag_node_id[]){x, w, r}, 3);
    ag_node_id gru = mt_op(t, "GRU", "gru", 3, (ag_node_id[]){xl, w, r}, 2);
    ag_node_id rnn = mt_op(t, "RNN", "rnn", 3, (ag_node_id[]){x, w, r}, 2);
    mt_int(t, lstm, "hidden_size", 7);
    mt_str(t, lstm, "direction", "bidirectional");
    mt_int(t, gru, "layout", 1);
    mt_int(t, gru, "hidden_size", 9);
    mt_run(t);
    check_out(t, lstm, 0, AG_DT_F32, 4, 10, 2, 4, 7);
    check_out(t, lstm, 1, AG_DT_F32, 3, 2, 4, 7);
    check_out(t, lstm, 2, AG_DT_F32, 3, 2, 4, 7);
    check_out(t, gru, 0, AG_DT_F32, 4, 4, U, 1, 9);
    check_out(t, gru, 1, AG_DT_F32, 3, 4, 1, 9);
    /* hidden size from R when the attribute is absent */
    check_out(t, rnn, 0, AG_DT_F32, 4, 10, 1, 4, 7);
    mt_free(t);
}

static void test_quant(void **state)
{
    (void)state;
    mt *t = mt_new();
    ag_node_id x = mt_data(t, "x", AG_DT_F32, 2, (const int64_t[]){U, 4});
    ag_node_id s = mt_data(t, "s", AG_DT_F32, 0, NULL);
    ag_node_id zp = mt_data(t, "zp", AG_DT_I8, 0, NULL);
    ag_node_id q1 = mt_op(t, "QuantizeLinear", "q1", 3, (ag_node_id[]){x, s, zp}, 1);
    ag_node_id q2 = mt_op(t, "QuantizeLinear", "q2", 2, (ag_node_id[]){x, s}, 1);
    ag_node_id dq = mt_op(t, "DequantizeLinear", "dq", 3, (ag_node_id[]){q1, s, zp}, 1);
    ag_node_id dy = mt_op(t, "DynamicQuantizeLinear", "dy", 1, &x, 3);
    ag_node_id a = mt_data(t, "a", AG_DT_U8, 2, (const int64_t[]){2, 4});
    ag_node_id b = mt_data(t, "b", AG_DT_U8, 2, (const int64_t[]){4, 3});
    ag_node_id qm = mt_op(t, "QLinearMatMul", "qm", 8, (ag_node_id[]){a, s, zp, b, s, zp, s, zp}, 1);
    mt_run(t);
    check_out(t, q1, 0, AG_DT_I8, 2, U, 4);
    check_out(t, q2, 0, AG_DT_U8, 2, U, 4);
    check_out(t, dq, 0, AG_DT_F32, 2, U, 4);
    check_out(t, dy, 0, AG_DT_U8, 2, U, 4);
    check_scalar(t, dy, 1, AG_DT_F32);
    check_scalar(t, dy, 2, AG_DT_U8);
    check_out(t, qm, 0, AG_DT_I8, 2, 2, 3);
    mt_free(t);
}

/* ---- signal processing, losses, data-dependent ---- */

static void test_signal(void **state)
{
    (void)state;
    mt *t = mt_new();
    ag_node_id sig = mt_data(t, "sig", AG_DT_F32, 3, (const int64_t[]){2, 1000, 1});
    ag_node_id step = mt_const_i64(t, "step", 0, NULL, (const int64_t[]){100});
    ag_node_id flen = mt_const_i64(t, "flen", 0, NULL, (const int64_t[]){256});
    ag_node_id stft = mt_op(t, "STFT", "stft", 4, (ag_node_id[]){sig, step, NOIN, flen}, 1);
    ag_node_id dft = mt_op(t, "DFT", "dft", 1, &sig, 1);
    ag_node_id win = mt_op(t, "HannWindow", "win", 1, &flen, 1);
    ag_node_id nb = mt_const_i64(t, "nb", 0, NULL, (const int64_t[]){40});
    ag_node_id mel = mt_op(t, "MelWeightMatrix", "mel", 5, (ag_node_id[]){nb, flen, step, step, step}, 1);
    mt_int(t, dft, "onesided", 1);
    mt_int(t, win, "output_datatype", AG_DT_F64);
    mt_run(t);
    check_out(t, stft, 0, AG_DT_F32, 4, 2, 8, 129, 2);
    check_out(t, dft, 0, AG_DT_F32, 3, 2, 501, 2);
    check_out(t, win, 0, AG_DT_F64, 1, 256);
    check_out(t, mel, 0, AG_DT_F32, 2, 129, 40);
    mt_free(t);
}

static void test_misc(void **state)
{
    (void)state;
    mt *t = mt_new();
    ag_node_id sc = mt_data(t, "sc", AG_DT_F32, 3, (const int64_t[]){4, 5, 6});
    ag_node_id lb = mt_data(t, "lb", AG_DT_I64, 2, (const int64_t[]){4, 6});
    ag_node_id l1 = mt_op(t, "SoftmaxCrossEntropyLoss", "l1", 2, (ag_node_id[]){sc, lb}, 2);
    ag_node_id l2 = mt_op(t, "NegativeLogLikelihoodLoss", "l2", 2, (ag_node_id[]){sc, lb}, 1);
    ag_node_id boxes = mt_data(t, "boxes", AG_DT_F32, 3, (const int64_t[]){1, 6, 4});
    ag_node_id nms = mt_op(t, "NonMaxSuppression", "nms", 2, (ag_node_id[]){boxes, boxes}, 1);
    ag_node_id img = mt_data(t, "img", AG_DT_F32, 4, (const int64_t[]){1, 3, 10, 10});
    ag_node_id grid = mt_data(t, "grid", AG_DT_F32, 4, (const int64_t[]){1, 7, U, 2});
    ag_node_id gs = mt_op(t, "GridSample", "gs", 2, (ag_node_id[]){img, grid}, 1);
    ag_node_id rn = mt_op(t, "RandomNormal", "rn", 0, NULL, 1);
    ag_node_id rl = mt_op(t, "RandomUniformLike", "rl", 1, &img, 1);
    mt_str(t, l2, "reduction", "none");
    mt_ints(t, rn, "shape", (const int64_t[]){3, 2}, 2);
    mt_int(t, rl, "dtype", AG_DT_F64);
    mt_run(t);
    check_scalar(t, l1, 0, AG_DT_F32);
    check_out(t, l1, 1, AG_DT_F32, 3, 4, 5, 6);
    check_out(t, l2, 0, AG_DT_F32, 2, 4, 6);
    check_out(t, nms, 0, AG_DT_I64, 2, U, 3);
    check_out(t, gs, 0, AG_DT_F32, 4, 1, 3, 7, U);
    check_out(t, rn, 0, AG_DT_F32, 2, 3, 2);
    check_out(t, rl, 0, AG_DT_F64, 4, 1, 3, 10, 10);
    mt_free(t);
}

/* Contrib ops of exported transformer and CNN models. */
static void test_contrib(void **state)
{
    (void)state;
    mt *t = mt_new();
    ag_node_id x = mt_data(t, "x", AG_DT_F16, 3, (const int64_t[]){2, U, 64});
    ag_node_id g = mt_data(t, "g", AG_DT_F16, 1, (const int64_t[]){64});
    ag_node_id w = mt_data(t, "w", AG_DT_F16, 2, (const int64_t[]){64, 192});
    ag_node_id q = mt_data(t, "q", AG_DT_U8, 3, (const int64_t[]){32, 2, 16});
    ag_node_id sln = mt_op(t, "SkipLayerNormalization", "sln", 3, (ag_node_id[]){x, x, g}, 4);
    ag_node_id att = mt_op(t, "Attention", "att", 2, (ag_node_id[]){x, w}, 1);
    ag_node_id nb = mt_op(t, "MatMulNBits", "nb", 2, (ag_node_id[]){x, q}, 1);
    ag_node_id fm = mt_op(t, "FusedMatMul", "fm", 2, (ag_node_id[]){x, x}, 1);
    ag_node_id bg = mt_op(t, "BiasGelu", "bg", 2, (ag_node_id[]){x, g}, 1);
    mt_int(t, nb, "N", 32);
    mt_int(t, nb, "K", 64);
    mt_int(t, fm, "transB", 1);
    mt_run(t);
    check_out(t, sln, 0, AG_DT_F16, 3, 2, U, 64);
    check_out(t, sln, 1, AG_DT_F32, 3, 2, U, 1);
    check_out(t, sln, 3, AG_DT_F16, 3, 2, U, 64);
    check_out(t, att, 0, AG_DT_F16, 3, 2, U, 64);
    check_out(t, nb, 0, AG_DT_F16, 3, 2, U, 32);
    check_out(t, fm, 0, AG_DT_F16, 3, 2, U, U);
    check_out(t, bg, 0, AG_DT_F16, 3, 2, U, 64);
    mt_free(t);
}

/* ---- allocation failures ---- */

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    ag_graph *g = NULL;
    ag_status st;
    ag_node_id x, w, conv, a, b, s, ln;
    const int64_t xd[] = {1, 3, 8, 8}, wd[] = {4, 3, 3, 3}, two[] = {2};
    const int64_t av[] = {3, 4};
    ag_tensor v;
    const ag_tensor *owned;
    (void)ud;
#define B(expr)                 \
    if ((st = (expr)) != AG_OK) \
        goto done
    B(ag_graph_create(ctx, "oom", &g));
    B(ag_graph_add_node(g, AG_ROOT, "Data", "x", 0, 1, &x));
    ag_node_output_desc(g, x, 0)->dtype = AG_DT_F32;
    B(ag_desc_set_shape(g, ag_node_output_desc(g, x, 0), 4, xd));
    B(ag_graph_add_node(g, AG_ROOT, "Data", "w", 0, 1, &w));
    ag_node_output_desc(g, w, 0)->dtype = AG_DT_F32;
    B(ag_desc_set_shape(g, ag_node_output_desc(g, w, 0), 4, wd));
    B(ag_graph_add_node(g, AG_ROOT, "Conv", "conv", 2, 1, &conv));
    B(ag_graph_add_edge(g, x, 0, conv, 0));
    B(ag_graph_add_edge(g, w, 0, conv, 1));
    B(ag_graph_add_node(g, AG_ROOT, "LayerNormalization", "ln", 2, 3, &ln));
    B(ag_graph_add_edge(g, conv, 0, ln, 0));
    B(ag_graph_add_edge(g, w, 0, ln, 1));
    memset(&v, 0, sizeof v);
    v.dtype = AG_DT_I64;
    v.rank = 1;
    v.dims = two;
    v.nbytes = 16;
    v.data = av;
    B(ag_graph_make_tensor(g, &v, &owned));
    B(ag_graph_add_node(g, AG_ROOT, "Data", "a", 0, 1, &a));
    ag_node_output_desc(g, a, 0)->dtype = AG_DT_I64;
    B(ag_desc_set_shape(g, ag_node_output_desc(g, a, 0), 1, two));
    B(ag_desc_set_value(g, ag_node_output_desc(g, a, 0), owned));
    B(ag_graph_add_node(g, AG_ROOT, "Data", "b", 0, 1, &b));
    ag_node_output_desc(g, b, 0)->dtype = AG_DT_I64;
    B(ag_desc_set_shape(g, ag_node_output_desc(g, b, 0), 1, two));
    B(ag_desc_set_value(g, ag_node_output_desc(g, b, 0), owned));
    B(ag_graph_add_node(g, AG_ROOT, "Sum", "s", 2, 1, &s));
    B(ag_graph_add_edge(g, a, 0, s, 0));
    B(ag_graph_add_edge(g, b, 0, s, 1));
    B(ag_infer_shapes(g, NULL));
    if (ag_node_output_desc_c(g, conv, 0)->rank != 4 || ag_node_output_desc_c(g, ln, 1)->rank != 4)
        st = AG_EINTERNAL;
#undef B
done:
    ag_graph_destroy(g);
    return st;
}

static void test_oom(void **state)
{
    (void)state;
    assert_true(AG_TEST_OOM_SWEEP(oom_body, NULL) > 1);
}

/* ---- gradient kernels of training graphs ---- */

static void test_training_grads(void **state)
{
    (void)state;
    mt *t = mt_new();
    const int64_t fd[] = {32, 10}, ld[] = {32}, gd[] = {U, 128};
    ag_node_id f = mt_data(t, "features", AG_DT_F32, 2, fd);
    ag_node_id l = mt_data(t, "labels", AG_DT_I64, 1, ld);
    ag_node_id g = mt_data(t, "grad", AG_DT_F16, 2, gd);
    ag_node_id srcs[2] = {f, l};
    ag_node_id xent = mt_op(t, "SparseSoftmaxCrossEntropyWithLogits", "xent", 2, srcs, 2);
    ag_node_id srcs2[2] = {g, g};
    ag_node_id rg = mt_op(t, "ReluGrad", "rg", 2, srcs2, 1);
    mt_run(t);
    check_out(t, xent, 0, AG_DT_F32, 1, 32);
    check_out(t, xent, 1, AG_DT_F32, 2, 32, 10);
    check_out(t, rg, 0, AG_DT_F16, 2, U, 128);
    mt_free(t);

    /* Features of rank 3 contradict the kernel. */
    t = mt_new();
    const int64_t bad[] = {2, 3, 4};
    f = mt_data(t, "features", AG_DT_F32, 3, bad);
    srcs[0] = f;
    srcs[1] = f;
    mt_op(t, "SoftmaxCrossEntropyWithLogits", "xent3", 2, srcs, 2);
    expect_shape_error(t, "xent3", "2-D");
    mt_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_broadcast_error), cmocka_unit_test(test_legacy_broadcast),
        cmocka_unit_test(test_value_folding), cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_matmul),       cmocka_unit_test(test_conv),
        cmocka_unit_test(test_pool),         cmocka_unit_test(test_norm),
        cmocka_unit_test(test_rnn),          cmocka_unit_test(test_quant),
        cmocka_unit_test(test_signal),       cmocka_unit_test(test_misc),
        cmocka_unit_test(test_contrib),      cmocka_unit_test(test_oom),
        cmocka_unit_test(test_training_grads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
