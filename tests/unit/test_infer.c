/* Unit tests of the shape inference framework (src/ir/infer.c) and of the
 * core rule family (src/ir/infer_core.c): shapes of every core rule, constant
 * and partly known value propagation through shape chains, control flow
 * (If, Case, While, Scan; branches that cannot run for a known condition),
 * input shape and value bindings, statistics, contradictions and
 * allocation-failure sweeps.  Graphs are built with the graph API. */
#include "support/agtest.h"

#include <stdio.h>

#define U AG_DIM_UNKNOWN
#define NOIN AG_NONE

typedef struct tt {
    ag_ctx *ctx;
    ag_graph *g;
} tt;

static tt *tt_new(void)
{
    tt *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->ctx = agtest_ctx();
    assert_int_equal(ag_graph_create(t->ctx, "m", &t->g), AG_OK);
    return t;
}

static void tt_free(tt *t)
{
    ag_graph_destroy(t->g);
    ag_ctx_destroy(t->ctx);
    free(t);
}

static ag_node_id data_in(tt *t, ag_sub_id s, const char *name, ag_dtype dt, int32_t rank, const int64_t *dims)
{
    ag_node_id n = agtest_node(t->g, s, "Data", name, 0, 1);
    ag_tensor_desc *d = ag_node_output_desc(t->g, n, 0);
    d->dtype = dt;
    assert_int_equal(ag_desc_set_shape(t->g, d, rank, dims), AG_OK);
    return n;
}

static ag_node_id data(tt *t, const char *name, ag_dtype dt, int32_t rank, const int64_t *dims)
{
    return data_in(t, AG_ROOT, name, dt, rank, dims);
}

/* A subgraph Data bound to parent input p. */
static ag_node_id sub_data(tt *t, ag_sub_id s, const char *name, int64_t p)
{
    ag_node_id n = agtest_node(t->g, s, "Data", name, 0, 1);
    assert_int_equal(ag_attrs_set_int(t->g, ag_node_attrs(t->g, n), "_parent_node_index", p), AG_OK);
    return n;
}

static const ag_tensor *tensor(tt *t, ag_dtype dt, int32_t rank, const int64_t *dims, const void *bytes,
                               size_t elem)
{
    ag_tensor v;
    const ag_tensor *owned;
    uint64_t numel = 1;
    for (int32_t k = 0; k < rank; k++)
        numel *= (uint64_t)dims[k];
    memset(&v, 0, sizeof v);
    v.dtype = dt;
    v.rank = rank;
    v.dims = dims;
    v.nbytes = numel * elem;
    v.data = bytes;
    assert_int_equal(ag_graph_make_tensor(t->g, &v, &owned), AG_OK);
    return owned;
}

static void attr_tensor(tt *t, ag_node_id n, const char *name, const ag_tensor *v)
{
    ag_attr a;
    memset(&a, 0, sizeof a);
    a.name = name;
    a.kind = AG_ATTR_TENSOR;
    a.count = 1;
    a.v.t = v;
    assert_int_equal(ag_attrs_set(t->g, ag_node_attrs(t->g, n), &a), AG_OK);
}

/* A Const node; its descriptor is left unknown so that the rule fills it. */
static ag_node_id cst_in(tt *t, ag_sub_id s, const char *name, ag_dtype dt, int32_t rank, const int64_t *dims,
                         const void *bytes, size_t elem)
{
    ag_node_id n = agtest_node(t->g, s, "Const", name, 0, 1);
    attr_tensor(t, n, "value", tensor(t, dt, rank, dims, bytes, elem));
    return n;
}

static ag_node_id ci64(tt *t, const char *name, int32_t rank, const int64_t *dims, const int64_t *v)
{
    return cst_in(t, AG_ROOT, name, AG_DT_I64, rank, dims, v, 8);
}

static ag_node_id cf32(tt *t, const char *name, int32_t rank, const int64_t *dims, const float *v)
{
    return cst_in(t, AG_ROOT, name, AG_DT_F32, rank, dims, v, 4);
}

/* A 1-D i64 constant. */
#define VEC(t, name, ...)                                                                  \
    ci64((t), (name), 1, (const int64_t[]){sizeof((const int64_t[]){__VA_ARGS__}) / 8},    \
         (const int64_t[]){__VA_ARGS__})
/* A scalar i64 constant. */
#define SCALAR(t, name, v) ci64((t), (name), 0, NULL, (const int64_t[]){v})

static ag_node_id op_in(tt *t, ag_sub_id s, const char *type, const char *name, uint32_t nin, const ag_node_id *srcs,
                        uint32_t nout)
{
    ag_node_id n = agtest_node(t->g, s, type, name, nin, nout);
    for (uint32_t i = 0; i < nin; i++)
        if (srcs[i] != NOIN)
            agtest_edge(t->g, srcs[i], 0, n, i);
    return n;
}

#define OP(t, type, name, nout, ...)                                                               \
    op_in((t), AG_ROOT, (type), (name), sizeof((ag_node_id[]){__VA_ARGS__}) / sizeof(ag_node_id), \
          (ag_node_id[]){__VA_ARGS__}, (nout))

static void aint(tt *t, ag_node_id n, const char *name, int64_t v)
{
    assert_int_equal(ag_attrs_set_int(t->g, ag_node_attrs(t->g, n), name, v), AG_OK);
}

#define AINTS(t, n, name, ...)                                                                            \
    assert_int_equal(ag_attrs_set_ints((t)->g, ag_node_attrs((t)->g, (n)), (name), (const int64_t[]){__VA_ARGS__}, \
                                       sizeof((const int64_t[]){__VA_ARGS__}) / 8),                        \
                     AG_OK)

static void astr(tt *t, ag_node_id n, const char *name, const char *v)
{
    assert_int_equal(ag_attrs_set_string(t->g, ag_node_attrs(t->g, n), name, v), AG_OK);
}

static void run(tt *t)
{
    ag_status st = ag_infer_shapes(t->g, NULL);
    if (st != AG_OK)
        print_error("inference failed: %s\n", ag_ctx_errmsg(t->ctx));
    assert_int_equal(st, AG_OK);
}

/* "f32[2,?,4]", "i64[*]" (unknown rank), "?[]" (unknown dtype, scalar). */
static const char *sh(tt *t, ag_node_id n, uint32_t o)
{
    static char buf[512];
    const ag_tensor_desc *d = ag_node_output_desc_c(t->g, n, o);
    const char *dn = d->dtype == AG_DT_UNDEFINED ? "?" : ag_dtype_name(d->dtype);
    size_t len = (size_t)snprintf(buf, sizeof buf, "%s[", dn);
    if (d->rank < 0) {
        snprintf(buf + len, sizeof buf - len, "*]");
        return buf;
    }
    for (int32_t k = 0; k < d->rank; k++) {
        if (d->dims[k] == U)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s?", k ? "," : "");
        else
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%lld", k ? "," : "", (long long)d->dims[k]);
    }
    snprintf(buf + len, sizeof buf - len, "]");
    return buf;
}

/* Elements of the known value of output o ("1,2,3"), "-" when none. */
static const char *val(tt *t, ag_node_id n, uint32_t o)
{
    static char buf[1024];
    const ag_tensor *v = ag_node_output_desc_c(t->g, n, o)->value;
    if (!v || !v->data)
        return "-";
    uint64_t cnt = ag_tensor_numel(v);
    size_t len = 0;
    buf[0] = '\0';
    for (uint64_t k = 0; k < cnt && len < sizeof buf - 40; k++) {
        const unsigned char *p = (const unsigned char *)v->data;
        const char *sep = k ? "," : "";
        switch (v->dtype) {
        case AG_DT_I64: {
            int64_t x;
            memcpy(&x, p + k * 8, 8);
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%lld", sep, (long long)x);
            break;
        }
        case AG_DT_I32: {
            int32_t x;
            memcpy(&x, p + k * 4, 4);
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%d", sep, (int)x);
            break;
        }
        case AG_DT_BOOL:
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%d", sep, (int)p[k]);
            break;
        case AG_DT_F32: {
            float x;
            memcpy(&x, p + k * 4, 4);
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%g", sep, (double)x);
            break;
        }
        default:
            return "?";
        }
    }
    return buf;
}

#define SH(t, n, o, want) assert_string_equal(sh((t), (n), (o)), (want))
#define VAL(t, n, o, want) assert_string_equal(val((t), (n), (o)), (want))

/* Runs inference expecting AG_ESHAPE naming node name and containing needle. */
static void expect_eshape(tt *t, const char *name, const char *type, const char *needle)
{
    char node[160];
    assert_int_equal(ag_infer_shapes(t->g, NULL), AG_ESHAPE);
    snprintf(node, sizeof node, "node %s (%s): ", name, type);
    assert_errmsg(t->ctx, node);
    if (needle)
        assert_errmsg(t->ctx, needle);
}

/* ---------------------------------------------------------------- sources */

static void test_sources(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id x = data(t, "x", AG_DT_F16, 2, (const int64_t[]){U, 7});
    ag_node_id c = VEC(t, "c", 4, 5, 6);
    ag_node_id cv = agtest_node(t->g, AG_ROOT, "Constant", "cv", 0, 1);
    AINTS(t, cv, "value_ints", 1, 2);
    ag_node_id cf = agtest_node(t->g, AG_ROOT, "Constant", "cf", 0, 1);
    assert_int_equal(ag_attrs_set(t->g, ag_node_attrs(t->g, cf),
                                  &(ag_attr){.name = "value_float", .kind = AG_ATTR_FLOAT, .count = 1, .v.f = 2.5f}),
                     AG_OK);
    ag_node_id cs = OP(t, "ConstantOfShape", "cs", 1, c);
    ag_node_id var = agtest_node(t->g, AG_ROOT, "Variable", "var", 0, 1);
    ag_tensor_desc *vd = ag_node_output_desc(t->g, var, 0);
    vd->dtype = AG_DT_F32;
    assert_int_equal(ag_desc_set_shape(t->g, vd, 1, (const int64_t[]){9}), AG_OK);
    ag_node_id cs2 = OP(t, "ConstantOfShape", "cs2", 1, VEC(t, "c2", 2, 3));
    int32_t seven = 7;
    attr_tensor(t, cs2, "value", tensor(t, AG_DT_I32, 1, (const int64_t[]){1}, &seven, 4));
    run(t);
    SH(t, x, 0, "f16[?,7]");
    SH(t, c, 0, "i64[3]");
    VAL(t, c, 0, "4,5,6");
    SH(t, cv, 0, "i64[2]");
    VAL(t, cv, 0, "1,2");
    SH(t, cf, 0, "f32[]");
    VAL(t, cf, 0, "2.5");
    SH(t, cs, 0, "f32[4,5,6]");
    SH(t, var, 0, "f32[9]");
    SH(t, cs2, 0, "i32[2,3]");
    VAL(t, cs2, 0, "7,7,7,7,7,7");
    tt_free(t);
}

/* ------------------------------------------------------- value chains */

static void test_chain_static_reshape(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id x = data(t, "x", AG_DT_F32, 4, (const int64_t[]){2, 3, 4, 5});
    ag_node_id s = OP(t, "Shape", "s", 1, x);
    ag_node_id g = OP(t, "Gather", "g", 1, s, SCALAR(t, "i0", 0));
    ag_node_id u = OP(t, "Unsqueeze", "u", 1, g, VEC(t, "ax", 0));
    ag_node_id c = OP(t, "Concat", "c", 1, u, VEC(t, "m1", -1));
    aint(t, c, "axis", 0);
    ag_node_id r = OP(t, "Reshape", "r", 1, x, c);
    run(t);
    SH(t, s, 0, "i64[4]");
    VAL(t, s, 0, "2,3,4,5");
    SH(t, g, 0, "i64[]");
    VAL(t, g, 0, "2");
    VAL(t, u, 0, "2");
    VAL(t, c, 0, "2,-1");
    SH(t, r, 0, "f32[2,60]");
    tt_free(t);
}

/* x [?,3,4,5]: the batch dim is unknown, yet Shape's other elements are known
 * and travel through Gather/Slice/Concat as a partly known value. */
static void test_chain_partial_values(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id x = data(t, "x", AG_DT_F32, 4, (const int64_t[]){U, 3, 4, 5});
    ag_node_id s = OP(t, "Shape", "s", 1, x);
    ag_node_id b = OP(t, "Gather", "b", 1, s, VEC(t, "i0", 0));
    ag_node_id tail = OP(t, "Slice", "tail", 1, s, VEC(t, "st", 1), VEC(t, "en", 4));
    ag_node_id prod = OP(t, "ReduceProd", "prod", 1, tail);
    ag_node_id c = OP(t, "Concat", "c", 1, b, prod);
    aint(t, c, "axis", 0);
    ag_node_id r = OP(t, "Reshape", "r", 1, x, c);
    ag_node_id g1 = OP(t, "Gather", "g1", 1, s, SCALAR(t, "i1", 1));
    ag_node_id e = OP(t, "Expand", "e", 1, data(t, "y", AG_DT_F32, 1, (const int64_t[]){1}), s);
    ag_node_id r0 = OP(t, "Reshape", "r0", 1, x, VEC(t, "z", 0, -1));
    run(t);
    SH(t, s, 0, "i64[4]");
    VAL(t, s, 0, "-");
    VAL(t, tail, 0, "3,4,5");
    SH(t, prod, 0, "i64[1]");
    VAL(t, prod, 0, "60");
    SH(t, c, 0, "i64[2]");
    SH(t, r, 0, "f32[?,60]");
    VAL(t, g1, 0, "3");
    SH(t, e, 0, "f32[?,3,4,5]");
    SH(t, r0, 0, "f32[?,60]");
    tt_free(t);
}

/* Resize sizes computed as floor(shape[2:4] * 2.0) concatenated to shape[0:2]. */
static void test_chain_resize_sizes(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id x = data(t, "x", AG_DT_F32, 4, (const int64_t[]){1, 3, 8, 6});
    ag_node_id s = OP(t, "Shape", "s", 1, x);
    ag_node_id hw = OP(t, "Slice", "hw", 1, s, VEC(t, "b2", 2), VEC(t, "e4", 4));
    ag_node_id nc = OP(t, "Slice", "nc", 1, s, VEC(t, "b0", 0), VEC(t, "e2", 2));
    ag_node_id hwf = OP(t, "Cast", "hwf", 1, hw);
    aint(t, hwf, "to", AG_DT_F32);
    ag_node_id mul = OP(t, "Mul", "mul", 1, hwf, cf32(t, "two", 1, (const int64_t[]){1}, (const float[]){2.5f}));
    ag_node_id fl = OP(t, "Floor", "fl", 1, mul);
    ag_node_id hwi = OP(t, "Cast", "hwi", 1, fl);
    aint(t, hwi, "to", AG_DT_I64);
    ag_node_id sizes = OP(t, "Concat", "sizes", 1, nc, hwi);
    aint(t, sizes, "axis", 0);
    ag_node_id rs = OP(t, "Resize", "rs", 1, x, NOIN, NOIN, sizes);
    ag_node_id rsc = OP(t, "Resize", "rsc", 1, x, NOIN,
                        cf32(t, "sc", 1, (const int64_t[]){4}, (const float[]){1, 1, 0.5f, 1.5f}));
    ag_node_id up = OP(t, "Upsample", "up", 1, x);
    assert_int_equal(ag_attrs_set(t->g, ag_node_attrs(t->g, up),
                                  &(ag_attr){.name = "scales", .kind = AG_ATTR_FLOATS, .count = 4,
                                             .v.fs = (const float[]){1, 1, 2, 2}}),
                     AG_OK);
    ag_node_id keep = OP(t, "Resize", "keep", 1, x, NOIN, NOIN, VEC(t, "sz2", 4, 4));
    AINTS(t, keep, "axes", 2, 3);
    astr(t, keep, "keep_aspect_ratio_policy", "not_larger");
    ag_node_id unk = OP(t, "Resize", "unk", 1, x, NOIN, NOIN, data(t, "dyn", AG_DT_I64, 1, (const int64_t[]){4}));
    run(t);
    VAL(t, mul, 0, "20,15");
    VAL(t, hwi, 0, "20,15");
    VAL(t, sizes, 0, "1,3,20,15");
    SH(t, rs, 0, "f32[1,3,20,15]");
    SH(t, rsc, 0, "f32[1,3,4,9]");
    SH(t, up, 0, "f32[1,3,16,12]");
    SH(t, keep, 0, "f32[1,3,4,3]");
    SH(t, unk, 0, "f32[?,?,?,?]");
    tt_free(t);
}

/* ----------------------------------------------------------- reshaping */

static void test_reshape_family(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id x = data(t, "x", AG_DT_F32, 3, (const int64_t[]){2, 3, 4});
    ag_node_id r1 = OP(t, "Reshape", "r1", 1, x, VEC(t, "s1", 0, -1));
    ag_node_id r2 = OP(t, "Reshape", "r2", 1, x, VEC(t, "s2", -1));
    ag_node_id r3 = OP(t, "Reshape", "r3", 1, data(t, "e", AG_DT_F32, 2, (const int64_t[]){0, 4}), VEC(t, "s3", 0, 4));
    aint(t, r3, "allowzero", 1);
    ag_node_id r4 = OP(t, "Reshape", "r4", 1, x, data(t, "dyn", AG_DT_I64, 1, (const int64_t[]){2}));
    ag_node_id r5 = agtest_node(t->g, AG_ROOT, "Reshape", "r5", 1, 1); /* GE form: shape attribute */
    agtest_edge(t->g, x, 0, r5, 0);
    AINTS(t, r5, "shape", 4, 6);
    ag_node_id fl = OP(t, "Flatten", "fl", 1, x);
    ag_node_id fl0 = OP(t, "Flatten", "fl0", 1, x);
    aint(t, fl0, "axis", 0);
    ag_node_id fln = OP(t, "Flatten", "fln", 1, x);
    aint(t, fln, "axis", -1);
    ag_node_id y = data(t, "y", AG_DT_I32, 4, (const int64_t[]){1, 5, 1, U});
    ag_node_id sq = OP(t, "Squeeze", "sq", 1, y, VEC(t, "a0", 0, 2));
    ag_node_id sqa = OP(t, "Squeeze", "sqa", 1, y);
    AINTS(t, sqa, "axes", -2);
    ag_node_id sqn = OP(t, "Squeeze", "sqn", 1, y); /* no axes, an unknown dim: rank unknown */
    ag_node_id sqk = OP(t, "Squeeze", "sqk", 1, data(t, "z", AG_DT_I32, 3, (const int64_t[]){1, 2, 1}));
    ag_node_id us = OP(t, "Unsqueeze", "us", 1, x, VEC(t, "ua", 0, -1));
    ag_node_id usa = OP(t, "Unsqueeze", "usa", 1, x);
    AINTS(t, usa, "axes", 1);
    ag_node_id ed = OP(t, "ExpandDims", "ed", 1, x, SCALAR(t, "eax", -1));
    ag_node_id tr = OP(t, "Transpose", "tr", 1, x);
    ag_node_id trp = OP(t, "Transpose", "trp", 1, x);
    AINTS(t, trp, "perm", 1, 0, 2);
    ag_node_id tab = ci64(t, "tab", 2, (const int64_t[]){2, 3}, (const int64_t[]){1, 2, 3, 4, 5, 6});
    ag_node_id trv = OP(t, "Transpose", "trv", 1, tab);
    ag_node_id flat = OP(t, "Reshape", "flat", 1, trv, VEC(t, "m1", -1));
    run(t);
    SH(t, trv, 0, "i64[3,2]");
    VAL(t, flat, 0, "1,4,2,5,3,6");
    SH(t, r1, 0, "f32[2,12]");
    SH(t, r2, 0, "f32[24]");
    SH(t, r3, 0, "f32[0,4]");
    SH(t, r4, 0, "f32[?,?]");
    SH(t, r5, 0, "f32[4,6]");
    SH(t, fl, 0, "f32[2,12]");
    SH(t, fl0, 0, "f32[1,24]");
    SH(t, fln, 0, "f32[6,4]");
    SH(t, sq, 0, "i32[5,?]");
    SH(t, sqa, 0, "i32[1,5,?]");
    SH(t, sqn, 0, "i32[*]");
    SH(t, sqk, 0, "i32[2]");
    SH(t, us, 0, "f32[1,2,3,4,1]");
    SH(t, usa, 0, "f32[2,1,3,4]");
    SH(t, ed, 0, "f32[2,3,4,1]");
    SH(t, tr, 0, "f32[4,3,2]");
    SH(t, trp, 0, "f32[3,2,4]");
    tt_free(t);
}

static void test_reshape_errors(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id x = data(t, "x", AG_DT_F32, 2, (const int64_t[]){2, 3});
    OP(t, "Reshape", "bad_count", 1, x, VEC(t, "s", 4, 2));
    expect_eshape(t, "bad_count", "Reshape", "6 elements");
    tt_free(t);

    t = tt_new();
    x = data(t, "x", AG_DT_F32, 2, (const int64_t[]){2, 3});
    OP(t, "Reshape", "two_neg", 1, x, VEC(t, "s", -1, -1));
    expect_eshape(t, "two_neg", "Reshape", "more than one -1");
    tt_free(t);

    t = tt_new();
    x = data(t, "x", AG_DT_F32, 2, (const int64_t[]){2, 3});
    OP(t, "Reshape", "not_mult", 1, x, VEC(t, "s", 4, -1));
    expect_eshape(t, "not_mult", "Reshape", "not a multiple");
    tt_free(t);

    t = tt_new();
    x = data(t, "x", AG_DT_F32, 2, (const int64_t[]){2, 3});
    OP(t, "Squeeze", "sq", 1, x, VEC(t, "a", 1));
    expect_eshape(t, "sq", "Squeeze", "extent is 3");
    tt_free(t);

    t = tt_new();
    x = data(t, "x", AG_DT_F32, 2, (const int64_t[]){2, 3});
    ag_node_id tr = OP(t, "Transpose", "tr", 1, x);
    AINTS(t, tr, "perm", 0, 0);
    expect_eshape(t, "tr", "Transpose", "permutation");
    tt_free(t);
}

/* ------------------------------------------------- joining and splitting */

static void test_concat_split_slice(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id a = data(t, "a", AG_DT_F32, 3, (const int64_t[]){2, U, 4});
    ag_node_id b = data(t, "b", AG_DT_F32, 3, (const int64_t[]){2, 5, 3});
    ag_node_id c = OP(t, "Concat", "c", 1, a, b);
    aint(t, c, "axis", -1);
    ag_node_id c2 = OP(t, "Concat", "c2", 1, data(t, "a2d", AG_DT_F32, 3, (const int64_t[]){2, U, 3}), b);
    aint(t, c2, "axis", 1);
    ag_node_id m = data(t, "m", AG_DT_F32, 2, (const int64_t[]){10, 6});
    ag_node_id sp = OP(t, "Split", "sp", 3, m, VEC(t, "parts", 2, 3, 5));
    ag_node_id spa = OP(t, "Split", "spa", 2, m);
    aint(t, spa, "axis", 1);
    AINTS(t, spa, "split", 4, 2);
    ag_node_id spe = OP(t, "Split", "spe", 2, m);
    ag_node_id spn = OP(t, "Split", "spn", 3, m);
    aint(t, spn, "num_outputs", 3);
    aint(t, spn, "axis", 1);
    ag_node_id spv = OP(t, "Split", "spv", 2, VEC(t, "v", 7, 8, 9, 10));
    ag_node_id sl = OP(t, "Slice", "sl", 1, m, VEC(t, "s0", -3), VEC(t, "e0", 1000), VEC(t, "a0", 0));
    ag_node_id slr = OP(t, "Slice", "slr", 1, m, VEC(t, "s1", -1, 5), VEC(t, "e1", INT64_MIN, 0),
                        VEC(t, "a1", 0, 1), VEC(t, "p1", -2, -2));
    ag_node_id slo = OP(t, "Slice", "slo", 1, m); /* opset < 10: attributes */
    AINTS(t, slo, "starts", 1);
    AINTS(t, slo, "ends", 3);
    AINTS(t, slo, "axes", 1);
    ag_node_id slv = OP(t, "Slice", "slv", 1, VEC(t, "vals", 1, 2, 3, 4, 5, 6), VEC(t, "s2", 5), VEC(t, "e2", 0),
                        VEC(t, "a2", 0), VEC(t, "p2", -2));
    ag_node_id sld = OP(t, "Slice", "sld", 1, m, data(t, "st", AG_DT_I64, 1, (const int64_t[]){1}),
                        VEC(t, "e3", 4), VEC(t, "a3", 1));
    run(t);
    SH(t, c, 0, "f32[2,5,7]");
    SH(t, c2, 0, "f32[2,?,3]");
    SH(t, sp, 0, "f32[2,6]");
    SH(t, sp, 1, "f32[3,6]");
    SH(t, sp, 2, "f32[5,6]");
    SH(t, spa, 0, "f32[10,4]");
    SH(t, spa, 1, "f32[10,2]");
    SH(t, spe, 1, "f32[5,6]");
    SH(t, spn, 0, "f32[10,2]");
    SH(t, spn, 2, "f32[10,2]");
    VAL(t, spv, 0, "7,8");
    VAL(t, spv, 1, "9,10");
    SH(t, sl, 0, "f32[3,6]");
    SH(t, slr, 0, "f32[5,3]");
    SH(t, slo, 0, "f32[10,2]");
    VAL(t, slv, 0, "6,4,2");
    SH(t, sld, 0, "f32[10,?]");
    tt_free(t);

    t = tt_new();
    a = data(t, "a", AG_DT_F32, 2, (const int64_t[]){2, 3});
    b = data(t, "b", AG_DT_F32, 2, (const int64_t[]){4, 3});
    c = OP(t, "Concat", "cat", 1, a, b);
    aint(t, c, "axis", 1);
    expect_eshape(t, "cat", "Concat", "input 1: dimension 0 is 4");
    tt_free(t);

    t = tt_new();
    m = data(t, "m", AG_DT_F32, 1, (const int64_t[]){10});
    OP(t, "Split", "spl", 2, m, VEC(t, "p", 3, 3));
    expect_eshape(t, "spl", "Split", "sum to 6");
    tt_free(t);
}

/* ------------------------------------------------------------ indexing */

static void test_gather_scatter(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id d = data(t, "d", AG_DT_F32, 3, (const int64_t[]){5, 6, 7});
    ag_node_id i = data(t, "i", AG_DT_I64, 2, (const int64_t[]){2, 3});
    ag_node_id g = OP(t, "Gather", "g", 1, d, i);
    aint(t, g, "axis", 1);
    ag_node_id gv = OP(t, "Gather", "gv", 1, VEC(t, "tab", 10, 20, 30), VEC(t, "ix", -1, 0));
    ag_node_id ge = OP(t, "GatherElements", "ge", 1, d, data(t, "ie", AG_DT_I64, 3, (const int64_t[]){5, 2, 7}));
    ag_node_id gn = OP(t, "GatherND", "gn", 1, d, data(t, "in", AG_DT_I64, 2, (const int64_t[]){4, 2}));
    ag_node_id gnb = OP(t, "GatherND", "gnb", 1, d, data(t, "inb", AG_DT_I64, 3, (const int64_t[]){5, 3, 1}));
    aint(t, gnb, "batch_dims", 1);
    ag_node_id u = data(t, "u", AG_DT_F32, 1, (const int64_t[]){4});
    ag_node_id snd = OP(t, "ScatterND", "snd", 1, d, i, u);
    ag_node_id sel = OP(t, "ScatterElements", "sel", 1, d, i, u);
    ag_node_id sc = OP(t, "Scatter", "sc", 1, d, i, u);
    run(t);
    SH(t, g, 0, "f32[5,2,3,7]");
    SH(t, gv, 0, "i64[2]");
    VAL(t, gv, 0, "30,10");
    SH(t, ge, 0, "f32[5,2,7]");
    SH(t, gn, 0, "f32[4,7]");
    SH(t, gnb, 0, "f32[5,3,7]");
    SH(t, snd, 0, "f32[5,6,7]");
    SH(t, sel, 0, "f32[5,6,7]");
    SH(t, sc, 0, "f32[5,6,7]");
    tt_free(t);

    t = tt_new();
    OP(t, "Gather", "oob", 1, VEC(t, "tab", 1, 2), SCALAR(t, "ix", 2));
    expect_eshape(t, "oob", "Gather", "index 2 out of range");
    tt_free(t);
}

/* -------------------------------------------------- broadcasting, padding */

static void test_expand_tile_pad(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id x = data(t, "x", AG_DT_F32, 2, (const int64_t[]){3, 1});
    ag_node_id e = OP(t, "Expand", "e", 1, x, VEC(t, "s", 2, 1, 4));
    ag_node_id ev = OP(t, "Expand", "ev", 1, VEC(t, "v", 1, 2), VEC(t, "s2", 2, 2));
    ag_node_id ed = OP(t, "Expand", "ed", 1, x, data(t, "dyn", AG_DT_I64, 1, (const int64_t[]){3}));
    ag_node_id ti = OP(t, "Tile", "ti", 1, x, VEC(t, "r", 2, 5));
    ag_node_id tv = OP(t, "Tile", "tv", 1, VEC(t, "v2", 1, 2), VEC(t, "r2", 2));
    ag_node_id p = OP(t, "Pad", "p", 1, x, VEC(t, "pads", 1, 0, 2, 3));
    ag_node_id pa = OP(t, "Pad", "pa", 1, x);
    AINTS(t, pa, "pads", 0, 1, -1, 1);
    ag_node_id pax = OP(t, "Pad", "pax", 1, x, VEC(t, "pads2", 2, 2), NOIN, VEC(t, "axes", 1));
    run(t);
    SH(t, e, 0, "f32[2,3,4]");
    SH(t, ev, 0, "i64[2,2]");
    VAL(t, ev, 0, "1,2,1,2");
    SH(t, ed, 0, "f32[?,3,?]");
    SH(t, ti, 0, "f32[6,5]");
    VAL(t, tv, 0, "1,2,1,2");
    SH(t, p, 0, "f32[6,4]");
    SH(t, pa, 0, "f32[2,3]");
    SH(t, pax, 0, "f32[3,5]");
    tt_free(t);

    t = tt_new();
    x = data(t, "x", AG_DT_F32, 2, (const int64_t[]){3, 2});
    OP(t, "Expand", "bad", 1, x, VEC(t, "s", 3, 4));
    expect_eshape(t, "bad", "Expand", "cannot be expanded");
    tt_free(t);

    t = tt_new();
    x = data(t, "x", AG_DT_F32, 1, (const int64_t[]){3});
    OP(t, "Pad", "neg", 1, x, VEC(t, "pads", -2, -2));
    expect_eshape(t, "neg", "Pad", "negative extent");
    tt_free(t);
}

/* ----------------------------------------------- generators and others */

static void test_generators_and_misc(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id r = OP(t, "Range", "r", 1, SCALAR(t, "s", 2), SCALAR(t, "l", 11), SCALAR(t, "d", 3));
    ag_node_id rf = OP(t, "Range", "rf", 1, cf32(t, "fs", 0, NULL, (const float[]){0}),
                       cf32(t, "fl", 0, NULL, (const float[]){1}), cf32(t, "fd", 0, NULL, (const float[]){0.25f}));
    ag_node_id rd = OP(t, "Range", "rd", 1, SCALAR(t, "s2", 0), data(t, "lim", AG_DT_I64, 0, NULL), SCALAR(t, "d2", 1));
    ag_node_id x = data(t, "x", AG_DT_F32, 3, (const int64_t[]){2, 8, 6});
    ag_node_id nz = OP(t, "NonZero", "nz", 1, x);
    ag_node_id nzv = OP(t, "NonZero", "nzv", 1, VEC(t, "nzin", 0, 3, 0, 4));
    ag_node_id tk = OP(t, "TopK", "tk", 2, x, VEC(t, "k", 3));
    aint(t, tk, "axis", 1);
    ag_node_id oh = OP(t, "OneHot", "oh", 1, data(t, "ids", AG_DT_I64, 1, (const int64_t[]){5}), SCALAR(t, "depth", 10),
                       cf32(t, "ohv", 1, (const int64_t[]){2}, (const float[]){0, 1}));
    ag_node_id img = data(t, "img", AG_DT_F32, 4, (const int64_t[]){1, 8, 4, 6});
    ag_node_id d2s = OP(t, "DepthToSpace", "d2s", 1, img);
    aint(t, d2s, "blocksize", 2);
    ag_node_id s2d = OP(t, "SpaceToDepth", "s2d", 1, img);
    aint(t, s2d, "blocksize", 2);
    ag_node_id cp = OP(t, "Compress", "cp", 1, x, data(t, "cond", AG_DT_BOOL, 1, (const int64_t[]){8}));
    aint(t, cp, "axis", 1);
    ag_node_id cpf = OP(t, "Compress", "cpf", 1, x, data(t, "cond2", AG_DT_BOOL, 1, (const int64_t[]){8}));
    ag_node_id un = OP(t, "Unique", "un", 4, x);
    ag_node_id ey = OP(t, "EyeLike", "ey", 1, data(t, "sq", AG_DT_F32, 2, (const int64_t[]){3, 3}));
    aint(t, ey, "dtype", AG_DT_I32);
    ag_node_id trl = OP(t, "Trilu", "trl", 1, x);
    run(t);
    SH(t, r, 0, "i64[3]");
    VAL(t, r, 0, "2,5,8");
    SH(t, rf, 0, "f32[4]");
    VAL(t, rf, 0, "0,0.25,0.5,0.75");
    SH(t, rd, 0, "i64[?]");
    SH(t, nz, 0, "i64[3,?]");
    SH(t, nzv, 0, "i64[1,2]");
    SH(t, tk, 0, "f32[2,3,6]");
    SH(t, tk, 1, "i64[2,3,6]");
    SH(t, oh, 0, "f32[5,10]");
    SH(t, d2s, 0, "f32[1,2,8,12]");
    SH(t, s2d, 0, "f32[1,32,2,3]");
    SH(t, cp, 0, "f32[2,?,6]");
    SH(t, cpf, 0, "f32[?]");
    SH(t, un, 0, "f32[?]");
    SH(t, un, 1, "i64[?]");
    SH(t, un, 2, "i64[96]");
    SH(t, un, 3, "i64[?]");
    SH(t, ey, 0, "i32[3,3]");
    SH(t, trl, 0, "f32[2,8,6]");
    tt_free(t);

    t = tt_new();
    x = data(t, "x", AG_DT_F32, 2, (const int64_t[]){2, 3});
    ag_node_id bad = OP(t, "TopK", "tk", 2, x, VEC(t, "k", 4));
    (void)bad;
    expect_eshape(t, "tk", "TopK", "k = 4");
    tt_free(t);
}

/* ----------------------------------------------------- elementwise values */

static void test_elementwise_values(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id a = VEC(t, "a", 7, -7, 9);
    ag_node_id b = SCALAR(t, "b", 2);
    ag_node_id add = OP(t, "Add", "add", 1, a, b);
    ag_node_id sub = OP(t, "Sub", "sub", 1, a, b);
    ag_node_id mul = OP(t, "Mul", "mul", 1, a, b);
    ag_node_id dv = OP(t, "Div", "div", 1, a, b);
    ag_node_id md = OP(t, "Mod", "mod", 1, a, SCALAR(t, "b3", 3));
    ag_node_id mdf = OP(t, "Mod", "modf", 1, a, SCALAR(t, "b4", 3));
    aint(t, mdf, "fmod", 1);
    ag_node_id ng = OP(t, "Neg", "neg", 1, a);
    ag_node_id eq = OP(t, "Equal", "eq", 1, a, SCALAR(t, "b5", 9));
    ag_node_id lt = OP(t, "Less", "lt", 1, a, b);
    ag_node_id gt = OP(t, "Greater", "gt", 1, a, b);
    ag_node_id nt = OP(t, "Not", "not", 1, gt);
    ag_node_id wh = OP(t, "Where", "where", 1, lt, a, SCALAR(t, "zero", 0));
    ag_node_id mn = OP(t, "Min", "min", 1, a, b, SCALAR(t, "m1", 5));
    ag_node_id mx = OP(t, "Max", "max", 1, a, b);
    ag_node_id f = cf32(t, "f", 1, (const int64_t[]){2}, (const float[]){1.5f, -1.5f});
    ag_node_id fl = OP(t, "Floor", "floor", 1, f);
    ag_node_id ce = OP(t, "Ceil", "ceil", 1, f);
    ag_node_id c32 = OP(t, "Cast", "c32", 1, a);
    aint(t, c32, "to", AG_DT_I32);
    ag_node_id cfl = OP(t, "Cast", "cfl", 1, f); /* 1.5 is not an integer: shape only */
    aint(t, cfl, "to", AG_DT_I64);
    ag_node_id cl = OP(t, "CastLike", "cl", 1, a, f);
    ag_node_id x = data(t, "x", AG_DT_F32, 3, (const int64_t[]){2, 1, 4});
    ag_node_id y = data(t, "y", AG_DT_F32, 2, (const int64_t[]){3, U});
    ag_node_id bc = OP(t, "Add", "bc", 1, x, y);
    ag_node_id rp = OP(t, "ReduceProd", "rp", 1, x, VEC(t, "ax", 2));
    aint(t, rp, "keepdims", 0);
    ag_node_id id = OP(t, "Identity", "id", 1, a);
    run(t);
    VAL(t, add, 0, "9,-5,11");
    VAL(t, sub, 0, "5,-9,7");
    VAL(t, mul, 0, "14,-14,18");
    VAL(t, dv, 0, "3,-3,4");
    VAL(t, md, 0, "1,2,0");
    VAL(t, mdf, 0, "1,-1,0");
    VAL(t, ng, 0, "-7,7,-9");
    SH(t, eq, 0, "bool[3]");
    VAL(t, eq, 0, "0,0,1");
    VAL(t, lt, 0, "0,1,0");
    VAL(t, gt, 0, "1,0,1");
    VAL(t, nt, 0, "0,1,0");
    VAL(t, wh, 0, "0,-7,0");
    VAL(t, mn, 0, "2,-7,2");
    VAL(t, mx, 0, "7,2,9");
    VAL(t, fl, 0, "1,-2");
    VAL(t, ce, 0, "2,-1");
    SH(t, c32, 0, "i32[3]");
    VAL(t, c32, 0, "7,-7,9");
    SH(t, cfl, 0, "i64[2]");
    VAL(t, cfl, 0, "-");
    SH(t, cl, 0, "f32[3]");
    VAL(t, cl, 0, "7,-7,9");
    SH(t, bc, 0, "f32[2,3,4]");
    SH(t, rp, 0, "f32[2,1]");
    VAL(t, id, 0, "7,-7,9");
    tt_free(t);

    t = tt_new();
    OP(t, "Add", "badd", 1, data(t, "p", AG_DT_F32, 1, (const int64_t[]){3}),
       data(t, "q", AG_DT_F32, 1, (const int64_t[]){4}));
    expect_eshape(t, "badd", "Add", "does not broadcast");
    tt_free(t);
}

/* ------------------------------------------------- reference-system ops */

static void test_reference_ops(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id v = data(t, "v", AG_DT_F32, 2, (const int64_t[]){8, 4});
    ag_node_id w = data(t, "w", AG_DT_F32, 2, (const int64_t[]){8, 4});
    ag_node_id rv = OP(t, "ReadVariableOp", "rv", 1, v);
    ag_node_id as = OP(t, "Assign", "as", 1, v, w);
    ag_node_id asc = OP(t, "Assign", "asc", 1, v, w);
    assert_int_equal(ag_node_set_domain(t->g, asc, "ai.custom"), AG_OK);
    ag_node_id aa = OP(t, "AssignAddVariableOp", "aa", 1, v, w);
    ag_node_id am = OP(t, "ApplyMomentum", "am", 1, v, w, w, w, w);
    ag_node_id ar = OP(t, "HcomAllReduce", "ar", 2, v, w);
    ag_node_id bcst = OP(t, "HcomBroadcast", "bcst", 1, v);
    ag_node_id ag = OP(t, "HcomAllGather", "ag", 1, v);
    aint(t, ag, "rank_size", 4);
    ag_node_id rs = OP(t, "HcomReduceScatter", "rs", 1, v);
    aint(t, rs, "rank_size", 4);
    ag_node_id a2a = OP(t, "HcomAllToAllV", "a2a", 1, v, VEC(t, "sc", 1), VEC(t, "sd", 0), VEC(t, "rc", 1),
                        VEC(t, "rd", 0));
    ag_node_id mc = OP(t, "MemcpyAsync", "mc", 1, v);
    ag_node_id mca = OP(t, "MemcpyAddrAsync", "mca", 1, v);
    ag_node_id pfi = OP(t, "PointFromInputs", "pfi", 1, v);
    ag_node_id bit = OP(t, "Bitcast", "bit", 1, v);
    aint(t, bit, "type", AG_DT_U8);
    ag_node_id bit2 = OP(t, "Bitcast", "bit2", 1, bit);
    aint(t, bit2, "type", AG_DT_I32);
    ag_node_id sw = OP(t, "Switch", "sw", 2, v, data(t, "pred", AG_DT_BOOL, 0, NULL));
    ag_node_id mg = OP(t, "Merge", "mg", 2, data(t, "m1", AG_DT_F32, 2, (const int64_t[]){8, 4}),
                       data(t, "m2", AG_DT_F32, 2, (const int64_t[]){8, 5}));
    ag_node_id aac = agtest_node(t->g, AG_ROOT, "AtomicAddrClean", "aac", 0, 0);
    ag_node_id noop = agtest_node(t->g, AG_ROOT, "NoOp", "noop", 0, 0);
    agtest_ctrl(t->g, aac, noop);
    ag_node_id var = agtest_node(t->g, AG_ROOT, "VariableV2", "var", 0, 1);
    ag_node_id ss = OP(t, "StreamSwitch", "ss", 0, v, w);
    ag_node_id lsw = OP(t, "LabelSwitchByIndex", "lsw", 0, SCALAR(t, "idx", 0));
    ag_node_id en = OP(t, "Enter", "en", 1, v);
    ag_node_id ms = OP(t, "Relu", "ms", 1, v);
    assert_int_equal(ag_node_set_domain(t->g, ms, "com.microsoft"), AG_OK);
    ag_node_id foreign = OP(t, "Relu", "foreign", 1, v);
    assert_int_equal(ag_node_set_domain(t->g, foreign, "com.example"), AG_OK);
    ag_node_id no = OP(t, "NetOutput", "out", 0, rv, as, ar);
    ag_infer_stats stats = {sizeof stats, 0, 0, 0, 0};
    assert_int_equal(ag_infer_shapes(t->g, &stats), AG_OK);
    SH(t, rv, 0, "f32[8,4]");
    SH(t, as, 0, "f32[8,4]");
    SH(t, asc, 0, "f32[8,4]");
    SH(t, aa, 0, "f32[8,4]");
    SH(t, am, 0, "f32[8,4]");
    SH(t, ar, 1, "f32[8,4]");
    SH(t, bcst, 0, "f32[8,4]");
    SH(t, ag, 0, "f32[32,4]");
    SH(t, rs, 0, "f32[2,4]");
    SH(t, a2a, 0, "f32[?]");
    SH(t, mc, 0, "f32[8,4]");
    SH(t, mca, 0, "f32[8,4]");
    SH(t, pfi, 0, "f32[8,4]");
    SH(t, bit, 0, "u8[8,4,4]");
    SH(t, bit2, 0, "i32[8,4]");
    SH(t, sw, 0, "f32[8,4]");
    SH(t, sw, 1, "f32[8,4]");
    SH(t, mg, 0, "f32[8,?]");
    SH(t, mg, 1, "i32[]");
    SH(t, var, 0, "?[*]");
    SH(t, en, 0, "f32[8,4]");
    SH(t, ms, 0, "f32[8,4]");
    SH(t, foreign, 0, "?[*]"); /* an ONNX type in a foreign domain is not ONNX's */
    (void)ss;
    (void)lsw;
    (void)no;
    assert_int_equal(stats.no_rule, 1);
    /* a2a (data-dependent length), mg (branches differ), var, foreign */
    assert_int_equal(stats.unknown_tensors, 4);
    assert_int_equal(stats.nodes, ag_graph_node_count(t->g));
    tt_free(t);

    t = tt_new();
    v = data(t, "v", AG_DT_F32, 1, (const int64_t[]){6});
    rs = OP(t, "HcomReduceScatter", "rsc", 1, v);
    aint(t, rs, "rank_size", 4);
    expect_eshape(t, "rsc", "HcomReduceScatter", "not a multiple of rank_size 4");
    tt_free(t);
}

/* --------------------------------------------------------- control flow */

static void netout_map(tt *t, ag_node_id net, uint32_t i, int64_t p)
{
    ag_tensor_desc *d = ag_node_input_desc(t->g, net, i);
    assert_int_equal(ag_attrs_set_int(t->g, d->attrs, "_parent_node_index", p), AG_OK);
}

static void test_if_case(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id c = data(t, "c", AG_DT_BOOL, 0, NULL);
    ag_node_id x = data(t, "x", AG_DT_F32, 2, (const int64_t[]){4, 6});
    ag_node_id shp = VEC(t, "shp", 6, 4);
    ag_node_id iff = OP(t, "If", "if", 3, c, x, shp);
    ag_sub_id th = agtest_sub(t->g, iff, "then");
    ag_sub_id el = agtest_sub(t->g, iff, "else");
    /* then: (x, reshape(x, shp), x) */
    ag_node_id tx = sub_data(t, th, "tx", 1);
    ag_node_id ts = sub_data(t, th, "ts", 2);
    ag_node_id tr = op_in(t, th, "Reshape", "tr", 2, (ag_node_id[]){tx, ts}, 1);
    ag_node_id tn = op_in(t, th, "NetOutput", "tn", 3, (ag_node_id[]){tx, tr, tx}, 0);
    for (uint32_t k = 0; k < 3; k++)
        netout_map(t, tn, k, k);
    /* else: (transpose(x), x, flatten-to-1-D(x)) */
    ag_node_id ex = sub_data(t, el, "ex", 1);
    ag_node_id et = op_in(t, el, "Transpose", "et", 1, &ex, 1);
    ag_node_id ef = op_in(t, el, "Reshape", "ef", 2,
                          (ag_node_id[]){ex, cst_in(t, el, "m1", AG_DT_I64, 1, (const int64_t[]){1},
                                                    (const int64_t[]){-1}, 8)},
                          1);
    ag_node_id en = op_in(t, el, "NetOutput", "en", 3, (ag_node_id[]){et, ex, ef}, 0);
    for (uint32_t k = 0; k < 3; k++)
        netout_map(t, en, k, k);
    ag_node_id cs = OP(t, "Case", "case", 1, SCALAR(t, "bi", 1), x);
    ag_sub_id b0 = agtest_sub(t->g, cs, "b0");
    ag_sub_id b1 = agtest_sub(t->g, cs, "b1");
    ag_node_id b0x = sub_data(t, b0, "b0x", 1);
    netout_map(t, op_in(t, b0, "NetOutput", "b0n", 1, &b0x, 0), 0, 0);
    ag_node_id b1x = sub_data(t, b1, "b1x", 1);
    ag_node_id b1n = op_in(t, b1, "Neg", "b1neg", 1, &b1x, 1);
    netout_map(t, op_in(t, b1, "NetOutput", "b1o", 1, &b1n, 0), 0, 0);
    run(t);
    SH(t, tr, 0, "f32[6,4]"); /* the captured shape value reached the branch */
    SH(t, ef, 0, "f32[24]");
    SH(t, iff, 0, "f32[?,?]");
    SH(t, iff, 1, "f32[?,?]");
    SH(t, iff, 2, "f32[*]");
    SH(t, cs, 0, "f32[4,6]");
    tt_free(t);

    t = tt_new();
    iff = OP(t, "If", "bad_if", 1, data(t, "c2", AG_DT_BOOL, 1, (const int64_t[]){2}));
    expect_eshape(t, "bad_if", "If", "condition must hold one element");
    tt_free(t);
}

/* One If whose branches reshape x [4,6] to then_shape / else_shape. */
static ag_node_id if_reshape(tt *t, ag_node_id c, ag_node_id x, const int64_t *then_shape, const int64_t *else_shape,
                             ag_node_id *else_reshape)
{
    ag_node_id iff = OP(t, "If", "if", 1, c, x);
    const int64_t *shapes[2] = {then_shape, else_shape};
    for (int k = 0; k < 2; k++) {
        ag_sub_id b = agtest_sub(t->g, iff, k ? "else" : "then");
        ag_node_id bx = sub_data(t, b, k ? "ex" : "tx", 1);
        ag_node_id sh = cst_in(t, b, k ? "es" : "ts", AG_DT_I64, 1, (const int64_t[]){2}, shapes[k], 8);
        ag_node_id r = op_in(t, b, "Reshape", k ? "er" : "tr", 2, (ag_node_id[]){bx, sh}, 1);
        netout_map(t, op_in(t, b, "NetOutput", k ? "en" : "tn", 1, &r, 0), 0, 0);
        if (k)
            *else_reshape = r;
    }
    return iff;
}

/* A branch that contradicts itself under the bound shapes cannot be the one
 * that runs: the other branch decides; with a known condition only the taken
 * branch counts; when every branch fails the error stands. */
static void test_if_infeasible_branch(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id er;
    ag_node_id iff = if_reshape(t, data(t, "c", AG_DT_BOOL, 0, NULL), data(t, "x", AG_DT_F32, 2, (const int64_t[]){4, 6}),
                                (const int64_t[]){3, 8}, (const int64_t[]){5, 5}, &er);
    run(t);
    SH(t, iff, 0, "f32[3,8]");
    /* The dead branch is inferred as if x were unknown: only what constants
     * decide stays, here the target shape. */
    SH(t, er, 0, "f32[5,5]");
    SH(t, agtest_find(t->g, ag_graph_find_sub(t->g, "else"), "ex"), 0, "f32[*]");
    tt_free(t);

    t = tt_new();
    const unsigned char no = 0;
    iff = if_reshape(t, cst_in(t, AG_ROOT, "c", AG_DT_BOOL, 0, NULL, &no, 1),
                     data(t, "x", AG_DT_F32, 2, (const int64_t[]){4, 6}), (const int64_t[]){3, 8},
                     (const int64_t[]){2, 12}, &er);
    run(t);
    SH(t, iff, 0, "f32[2,12]");
    tt_free(t);

    t = tt_new();
    const unsigned char yes = 1;
    iff = if_reshape(t, cst_in(t, AG_ROOT, "c", AG_DT_BOOL, 0, NULL, &yes, 1),
                     data(t, "x", AG_DT_F32, 2, (const int64_t[]){4, 6}), (const int64_t[]){5, 5},
                     (const int64_t[]){2, 12}, &er);
    expect_eshape(t, "tr", "Reshape", "24 elements");
    tt_free(t);

    t = tt_new();
    iff = if_reshape(t, data(t, "c", AG_DT_BOOL, 0, NULL), data(t, "x", AG_DT_F32, 2, (const int64_t[]){4, 6}),
                     (const int64_t[]){5, 5}, (const int64_t[]){7, 7}, &er);
    expect_eshape(t, "er", "Reshape", "24 elements");
    tt_free(t);
}

/* While whose body appends a row to a carried [1,4] tensor each iteration:
 * the carried shape generalises to [?,4]; a counter stays a scalar. */
static void test_while(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id i0 = SCALAR(t, "i0", 0);
    ag_node_id acc = data(t, "acc", AG_DT_F32, 2, (const int64_t[]){1, 4});
    ag_node_id row = data(t, "row", AG_DT_F32, 2, (const int64_t[]){1, 4});
    ag_node_id wh = OP(t, "While", "wh", 3, i0, acc, row);
    ag_sub_id cond = agtest_sub(t->g, wh, "cond");
    ag_sub_id body = agtest_sub(t->g, wh, "body");
    ag_node_id ci = sub_data(t, cond, "ci", 0);
    ag_node_id lim = cst_in(t, cond, "lim", AG_DT_I64, 0, NULL, (const int64_t[]){5}, 8);
    ag_node_id lt = op_in(t, cond, "Less", "lt", 2, (ag_node_id[]){ci, lim}, 1);
    op_in(t, cond, "NetOutput", "cn", 1, &lt, 0);
    ag_node_id bi = sub_data(t, body, "bi", 0);
    ag_node_id ba = sub_data(t, body, "ba", 1);
    ag_node_id br = sub_data(t, body, "br", 2);
    ag_node_id one = cst_in(t, body, "one", AG_DT_I64, 0, NULL, (const int64_t[]){1}, 8);
    ag_node_id inc = op_in(t, body, "Add", "inc", 2, (ag_node_id[]){bi, one}, 1);
    ag_node_id cat = op_in(t, body, "Concat", "cat", 2, (ag_node_id[]){ba, br}, 1);
    aint(t, cat, "axis", 0);
    ag_node_id sh0 = op_in(t, body, "Shape", "sh0", 1, &ba, 1);
    ag_node_id bn = op_in(t, body, "NetOutput", "bn", 3, (ag_node_id[]){inc, cat, br}, 0);
    for (uint32_t k = 0; k < 3; k++)
        netout_map(t, bn, k, k);
    ag_node_id after = OP(t, "Identity", "after", 1, wh);
    (void)after;
    ag_infer_stats stats = {sizeof stats, 0, 0, 0, 0};
    assert_int_equal(ag_infer_shapes(t->g, &stats), AG_OK);
    SH(t, ba, 0, "f32[?,4]");
    SH(t, cat, 0, "f32[?,4]");
    SH(t, sh0, 0, "i64[2]");
    VAL(t, inc, 0, "-"); /* the counter changes: no value survives */
    SH(t, inc, 0, "i64[]");
    SH(t, wh, 0, "i64[]");
    SH(t, wh, 1, "f32[?,4]");
    SH(t, wh, 2, "f32[1,4]");
    SH(t, lt, 0, "bool[]");
    SH(t, after, 0, "i64[]");
    assert_int_equal(stats.nodes, ag_graph_node_count(t->g));
    tt_free(t);
}

/* ONNX Loop as imported: While (M, cond, iteration, v, captured) with
 * original_type=Loop and _num_captured=1; body output 4 passes the captured
 * value through (parent output 4 = input 4, its value kept in the body), body
 * output 5 is a scan output, and M = 3 with a passed-through true condition
 * fixes the trip count. */
static void test_loop_scan_output(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id m = SCALAR(t, "M", 3);
    const unsigned char yes = 1;
    ag_node_id c0 = cst_in(t, AG_ROOT, "c0", AG_DT_BOOL, 0, NULL, &yes, 1);
    ag_node_id it = SCALAR(t, "it0", 0);
    ag_node_id v = data(t, "v", AG_DT_F32, 1, (const int64_t[]){2});
    const float capv[2] = {1.5f, 2.5f};
    ag_node_id cap = cst_in(t, AG_ROOT, "capv", AG_DT_F32, 1, (const int64_t[]){2}, capv, 4);
    assert_int_equal(ag_desc_set_name(t->g, ag_node_output_desc(t->g, cap, 0), "capv"), AG_OK);
    ag_node_id wh = OP(t, "While", "loop", 6, m, c0, it, v, cap);
    astr(t, wh, "original_type", "Loop");
    aint(t, wh, "_num_captured", 1);
    ag_sub_id cond = agtest_sub(t->g, wh, "cond");
    ag_sub_id body = agtest_sub(t->g, wh, "body");
    ag_node_id cc = sub_data(t, cond, "cc", 1);
    op_in(t, cond, "NetOutput", "cn", 1, &cc, 0);
    ag_node_id bm = sub_data(t, body, "bm", 0);
    ag_node_id bc = sub_data(t, body, "bc", 1);
    ag_node_id bi = sub_data(t, body, "bi", 2);
    ag_node_id bv = sub_data(t, body, "bv", 3);
    ag_node_id bcap = sub_data(t, body, "capv", 4);
    ag_node_id dbl = op_in(t, body, "Add", "dbl", 2, (ag_node_id[]){bv, bcap}, 1);
    ag_node_id un = op_in(t, body, "Unsqueeze", "un", 2,
                          (ag_node_id[]){bv, cst_in(t, body, "a0", AG_DT_I64, 1, (const int64_t[]){1},
                                                    (const int64_t[]){0}, 8)},
                          1);
    ag_node_id bn = op_in(t, body, "NetOutput", "bn", 6, (ag_node_id[]){bm, bc, bi, dbl, bcap, un}, 0);
    for (uint32_t k = 0; k < 6; k++)
        netout_map(t, bn, k, k);
    run(t);
    SH(t, bcap, 0, "f32[2]");
    VAL(t, bcap, 0, "1.5,2.5");
    VAL(t, bv, 0, "-");
    SH(t, wh, 3, "f32[2]");
    SH(t, wh, 4, "f32[2]");
    SH(t, wh, 5, "f32[3,1,2]");
    tt_free(t);
}

static void test_scan(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id st = data(t, "st", AG_DT_F32, 1, (const int64_t[]){4});
    ag_node_id xs = data(t, "xs", AG_DT_F32, 2, (const int64_t[]){7, 4});
    ag_node_id sc = OP(t, "Scan", "scan", 2, st, xs);
    aint(t, sc, "num_scan_inputs", 1);
    ag_sub_id body = agtest_sub(t->g, sc, "body");
    ag_node_id bs = sub_data(t, body, "bs", 0);
    ag_node_id bx = sub_data(t, body, "bx", 1);
    ag_node_id sum = op_in(t, body, "Add", "sum", 2, (ag_node_id[]){bs, bx}, 1);
    ag_node_id bn = op_in(t, body, "NetOutput", "bn", 2, (ag_node_id[]){sum, sum}, 0);
    netout_map(t, bn, 0, 0);
    netout_map(t, bn, 1, 1);
    ag_node_id sc2 = OP(t, "Scan", "scan2", 2, st, xs);
    aint(t, sc2, "num_scan_inputs", 1);
    AINTS(t, sc2, "scan_input_axes", 1);
    AINTS(t, sc2, "scan_output_axes", -1);
    ag_sub_id body2 = agtest_sub(t->g, sc2, "body2");
    ag_node_id b2s = sub_data(t, body2, "b2s", 0);
    ag_node_id b2x = sub_data(t, body2, "b2x", 1);
    ag_node_id b2n = op_in(t, body2, "NetOutput", "b2n", 2, (ag_node_id[]){b2s, b2x}, 0);
    netout_map(t, b2n, 0, 0);
    netout_map(t, b2n, 1, 1);
    run(t);
    SH(t, bx, 0, "f32[4]");
    SH(t, sum, 0, "f32[4]");
    SH(t, sc, 0, "f32[4]");
    SH(t, sc, 1, "f32[7,4]");
    SH(t, b2x, 0, "f32[7]");
    SH(t, sc2, 1, "f32[7,4]");
    tt_free(t);
}

static void test_partitioned_call(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id x = data(t, "x", AG_DT_F32, 2, (const int64_t[]){3, 5});
    ag_node_id pc = OP(t, "PartitionedCall", "pc", 1, x);
    ag_sub_id f = agtest_sub(t->g, pc, "f");
    ag_node_id fx = sub_data(t, f, "fx", 0);
    ag_node_id ft = op_in(t, f, "Transpose", "ft", 1, &fx, 1);
    netout_map(t, op_in(t, f, "NetOutput", "fn", 1, &ft, 0), 0, 0);
    /* An unknown op type with a subgraph: its subgraph is still walked. */
    ag_node_id odd = OP(t, "MysteryCall", "odd", 1, x);
    ag_sub_id o = agtest_sub(t->g, odd, "o");
    ag_node_id oc = cst_in(t, o, "oc", AG_DT_I64, 1, (const int64_t[]){2}, (const int64_t[]){1, 2}, 8);
    ag_node_id osh = op_in(t, o, "Shape", "osh", 1, &oc, 1);
    netout_map(t, op_in(t, o, "NetOutput", "on", 1, &osh, 0), 0, 0);
    ag_infer_stats stats = {sizeof stats, 0, 0, 0, 0};
    assert_int_equal(ag_infer_shapes(t->g, &stats), AG_OK);
    SH(t, pc, 0, "f32[5,3]");
    SH(t, osh, 0, "i64[1]");
    VAL(t, osh, 0, "2");
    SH(t, odd, 0, "?[*]");
    assert_int_equal(stats.no_rule, 1);
    assert_int_equal(stats.unknown_tensors, 1);
    tt_free(t);
}

/* ------------------------------------------------------------- bindings */

static void test_bindings(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id x = data(t, "x", AG_DT_F32, 2, (const int64_t[]){U, 3});
    ag_node_id y = data(t, "y", AG_DT_I64, AG_RANK_UNKNOWN, NULL);
    assert_int_equal(ag_desc_set_name(t->g, ag_node_output_desc(t->g, y, 0), "y:0"), AG_OK);
    ag_node_id z = data(t, "z", AG_DT_F32, AG_RANK_UNKNOWN, NULL);
    ag_node_id r = OP(t, "Relu", "r", 1, x);
    (void)r;
    assert_int_equal(ag_infer_apply_binding(t->g, "x=8,3"), AG_OK);
    SH(t, x, 0, "f32[8,3]");
    assert_int_equal(ag_infer_apply_binding(t->g, "y:0= 2 , 5"), AG_OK);
    SH(t, y, 0, "i64[2,5]");
    assert_int_equal(ag_infer_apply_binding(t->g, "z="), AG_OK);
    SH(t, z, 0, "f32[]");
    assert_int_equal(ag_infer_bind_input(t->g, "x", 2, (const int64_t[]){8, 3}), AG_OK);

    assert_int_equal(ag_infer_apply_binding(t->g, "nope=1"), AG_ENOTFOUND);
    assert_errmsg(t->ctx, "no graph input named 'nope'");
    assert_errmsg(t->ctx, "x, y, z");
    assert_int_equal(ag_infer_apply_binding(t->g, "x=8"), AG_ESHAPE);
    assert_errmsg(t->ctx, "declares rank 2");
    assert_int_equal(ag_infer_apply_binding(t->g, "x=8,4"), AG_ESHAPE);
    assert_errmsg(t->ctx, "dimension 1 is 4, but node x (Data) declares 3");
    assert_int_equal(ag_infer_apply_binding(t->g, "x=8,-3"), AG_EINVAL);
    assert_errmsg(t->ctx, "not a non-negative integer");
    assert_int_equal(ag_infer_apply_binding(t->g, "x=8,,3"), AG_EINVAL);
    assert_int_equal(ag_infer_apply_binding(t->g, "x=8,3x"), AG_EINVAL);
    assert_errmsg(t->ctx, "unexpected 'x'");
    assert_int_equal(ag_infer_apply_binding(t->g, "x8"), AG_EINVAL);
    assert_errmsg(t->ctx, "expected NAME=d0,d1");
    assert_int_equal(ag_infer_apply_binding(t->g, "=1"), AG_EINVAL);
    assert_int_equal(ag_infer_apply_binding(t->g, "x=99999999999999999999,3"), AG_EINVAL);
    assert_errmsg(t->ctx, "exceeds");
    assert_int_equal(ag_infer_bind_input(t->g, "x", 2, (const int64_t[]){-1, 3}), AG_EINVAL);
    SH(t, x, 0, "f32[8,3]"); /* failed bindings leave the input alone */
    run(t);
    tt_free(t);
}

/* ---------------------------------------------- unknowns and statistics */

static void test_unknown_stays_unknown(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id x = data(t, "x", AG_DT_F32, AG_RANK_UNKNOWN, NULL);
    ag_node_id s = OP(t, "Shape", "s", 1, x);
    ag_node_id cs = OP(t, "ConstantOfShape", "cs", 1, s);
    ag_node_id r = OP(t, "Reshape", "r", 1, x, s);
    ag_node_id sz = OP(t, "Size", "sz", 1, x);
    ag_node_id y = data(t, "y", AG_DT_F32, 2, (const int64_t[]){U, 2});
    ag_node_id fl = OP(t, "Flatten", "fl", 1, y);
    ag_node_id sl = OP(t, "Slice", "sl", 1, y, VEC(t, "b", 0), VEC(t, "e", 5));
    ag_node_id mystery = OP(t, "Mystery", "mystery", 2, y);
    ag_node_id no = OP(t, "NetOutput", "out", 0, r, mystery);
    (void)no;
    ag_infer_stats stats = {sizeof stats, 0, 0, 0, 0};
    assert_int_equal(ag_infer_shapes(t->g, &stats), AG_OK);
    SH(t, s, 0, "i64[?]");
    SH(t, cs, 0, "f32[*]");
    SH(t, r, 0, "f32[*]");
    SH(t, sz, 0, "i64[]");
    VAL(t, sz, 0, "-");
    SH(t, fl, 0, "f32[?,2]");
    SH(t, sl, 0, "f32[?,2]");
    SH(t, mystery, 0, "?[*]");
    assert_int_equal(stats.nodes, ag_graph_node_count(t->g));
    assert_int_equal(stats.no_rule, 1);
    /* x, s, cs, r, y, fl, sl, mystery:0, mystery:1 (sz is i64[] and known) */
    assert_int_equal(stats.unknown_tensors, 9);
    tt_free(t);
}

static void count_cb(void *ud, ag_node_id n, uint32_t o)
{
    (void)n;
    (void)o;
    (*(uint32_t *)ud)++;
}

static void test_each_unknown(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id y = data(t, "y", AG_DT_F32, 2, (const int64_t[]){U, 2});
    OP(t, "Mystery", "m", 3, y);
    data(t, "k", AG_DT_F32, 1, (const int64_t[]){2});
    run(t);
    uint32_t count = 0;
    ag_infer_each_unknown(t->g, count_cb, &count);
    assert_int_equal(count, 4);
    tt_free(t);
}

/* Inference runs again after a binding: earlier results do not stick. */
static void test_rerun_after_binding(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id x = data(t, "x", AG_DT_F32, 2, (const int64_t[]){U, 3});
    ag_node_id s = OP(t, "Shape", "s", 1, x);
    ag_node_id cs = OP(t, "ConstantOfShape", "cs", 1, s);
    run(t);
    SH(t, cs, 0, "f32[?,3]");
    assert_int_equal(ag_infer_apply_binding(t->g, "x=5,3"), AG_OK);
    run(t);
    VAL(t, s, 0, "5,3");
    SH(t, cs, 0, "f32[5,3]");
    tt_free(t);
}

/* ------------------------------------------------------- value bindings */

/* Raw bytes of the known value of output o, NULL when none. */
static const unsigned char *raw(tt *t, ag_node_id n, uint32_t o)
{
    const ag_tensor *v = ag_node_output_desc_c(t->g, n, o)->value;
    return v ? v->data : NULL;
}

static void test_value_bindings(void **state)
{
    (void)state;
    tt *t = tt_new();
    ag_node_id sr = data(t, "sr", AG_DT_I64, 0, NULL);
    ag_node_id st = data(t, "state", AG_DT_F32, 3, (const int64_t[]){2, 1, 128});
    ag_node_id v = data(t, "v", AG_DT_I32, 1, (const int64_t[]){U});
    ag_node_id h = data(t, "h", AG_DT_F16, 1, (const int64_t[]){3});
    ag_node_id b = data(t, "b", AG_DT_BF16, 0, NULL);
    ag_node_id big = data(t, "big", AG_DT_F32, 1, (const int64_t[]){5000});
    ag_node_id u8 = data(t, "u8", AG_DT_U8, 1, (const int64_t[]){2});
    ag_node_id q = data(t, "q", AG_DT_U64, 0, NULL);
    data(t, "free", AG_DT_F32, 2, (const int64_t[]){U, 2});
    data(t, "norank", AG_DT_F32, AG_RANK_UNKNOWN, NULL);
    data(t, "notype", AG_DT_UNDEFINED, 0, NULL);
    data(t, "str", AG_DT_STRING, 0, NULL);
    ag_node_id eq = OP(t, "Equal", "eq", 1, sr, SCALAR(t, "k", 16000));

    assert_int_equal(ag_infer_apply_value_binding(t->g, "sr=16000"), AG_OK);
    SH(t, sr, 0, "i64[]");
    VAL(t, sr, 0, "16000");
    /* one value fills the whole input */
    assert_int_equal(ag_infer_apply_value_binding(t->g, "state=0"), AG_OK);
    SH(t, st, 0, "f32[2,1,128]");
    const ag_tensor *sv = ag_node_output_desc_c(t->g, st, 0)->value;
    assert_non_null(sv);
    assert_int_equal(sv->nbytes, 256 * 4);
    static const unsigned char zeros[256 * 4];
    assert_memory_equal(sv->data, zeros, sizeof zeros);
    /* a 1-D input of unknown length takes the number of values */
    assert_int_equal(ag_infer_apply_value_binding(t->g, "v= 1, -2 ,3"), AG_OK);
    SH(t, v, 0, "i32[3]");
    VAL(t, v, 0, "1,-2,3");
    /* f16 / bf16 are rounded to nearest: 1.5 = 0x3e00, -2 = 0xc000, 65504 = 0x7bff */
    assert_int_equal(ag_infer_apply_value_binding(t->g, "h=1.5,-2,65504"), AG_OK);
    assert_memory_equal(raw(t, h, 0), ((const unsigned char[]){0x00, 0x3e, 0x00, 0xc0, 0xff, 0x7b}), 6);
    assert_int_equal(ag_infer_apply_value_binding(t->g, "b=1"), AG_OK);
    assert_memory_equal(raw(t, b, 0), ((const unsigned char[]){0x80, 0x3f}), 2);
    assert_int_equal(ag_infer_apply_value_binding(t->g, "u8=0,255"), AG_OK);
    VAL(t, u8, 0, "?"); /* u8 is not printed by val(); check the bytes */
    assert_memory_equal(raw(t, u8, 0), ((const unsigned char[]){0, 255}), 2);
    assert_int_equal(ag_infer_apply_value_binding(t->g, "q=18446744073709551615"), AG_OK);
    assert_memory_equal(raw(t, q, 0), ((const unsigned char[]){255, 255, 255, 255, 255, 255, 255, 255}), 8);
    /* too large to propagate: checked, shape kept, no value */
    assert_int_equal(ag_infer_apply_value_binding(t->g, "big=0"), AG_OK);
    SH(t, big, 0, "f32[5000]");
    assert_null(ag_node_output_desc_c(t->g, big, 0)->value);

    assert_int_equal(ag_infer_apply_value_binding(t->g, "nope=1"), AG_ENOTFOUND);
    assert_errmsg(t->ctx, "input value binding: no graph input named 'nope'");
    assert_errmsg(t->ctx, "sr, state, v");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "sr=1.5"), AG_EINVAL);
    assert_errmsg(t->ctx, "value 0 is not an integer (the input is i64)");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "sr=abc"), AG_EINVAL);
    assert_int_equal(ag_infer_apply_value_binding(t->g, "sr=99999999999999999999"), AG_EINVAL);
    assert_errmsg(t->ctx, "out of range for i64");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "u8=1,256"), AG_EINVAL);
    assert_errmsg(t->ctx, "value 1 is out of range for u8");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "q=-1"), AG_EINVAL);
    assert_errmsg(t->ctx, "out of range for u64");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "u8=1,2,3"), AG_EINVAL);
    assert_errmsg(t->ctx, "3 values, but node u8 (Data) holds 2 elements");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "state=0,,0"), AG_EINVAL);
    assert_errmsg(t->ctx, "value 1 is missing");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "sr="), AG_EINVAL);
    assert_errmsg(t->ctx, "value 0 is missing");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "sr=1;"), AG_EINVAL);
    assert_int_equal(ag_infer_apply_value_binding(t->g, "h=1e10"), AG_EINVAL);
    assert_errmsg(t->ctx, "out of range for f16");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "state=1e39"), AG_EINVAL);
    assert_errmsg(t->ctx, "out of range for f32");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "state=x"), AG_EINVAL);
    assert_errmsg(t->ctx, "value 0 is not a number (the input is f32)");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "free=1"), AG_EINVAL);
    assert_errmsg(t->ctx, "dimension 0 of node free (Data) is unknown");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "norank=1"), AG_EINVAL);
    assert_errmsg(t->ctx, "unknown shape");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "notype=1"), AG_EINVAL);
    assert_errmsg(t->ctx, "of unknown data type");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "str=1"), AG_EINVAL);
    assert_errmsg(t->ctx, "is string");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "sr16000"), AG_EINVAL);
    assert_errmsg(t->ctx, "expected NAME=v");
    /* the tensor form: dtype and shape must fit the declaration */
    const ag_tensor *f = tensor(t, AG_DT_F32, 0, NULL, (const float[]){1.0f}, 4);
    assert_int_equal(ag_infer_bind_value(t->g, "sr", f), AG_EINVAL);
    assert_errmsg(t->ctx, "the value is f32, but node sr (Data) declares i64");
    const ag_tensor *two = tensor(t, AG_DT_U8, 1, (const int64_t[]){3}, (const unsigned char[]){1, 2, 3}, 1);
    assert_int_equal(ag_infer_bind_value(t->g, "u8", two), AG_ESHAPE);
    assert_errmsg(t->ctx, "dimension 0 is 3, but node u8 (Data) declares 2");
    assert_int_equal(ag_infer_bind_value(t->g, "sr", NULL), AG_EINVAL);
    /* failed bindings leave the inputs alone */
    VAL(t, sr, 0, "16000");
    assert_memory_equal(raw(t, u8, 0), ((const unsigned char[]){0, 255}), 2);
    SH(t, st, 0, "f32[2,1,128]");

    /* inference keeps a bound value and propagates it */
    run(t);
    VAL(t, sr, 0, "16000");
    VAL(t, eq, 0, "1");
    assert_int_equal(ag_infer_apply_value_binding(t->g, "sr=8000"), AG_OK);
    run(t);
    VAL(t, eq, 0, "0");
    tt_free(t);
}

/* An If on a bound sample rate: 16 kHz runs the then branch; the else
 * branch (with a nested If) cannot run, so its unknowns are counted apart. */
static const char if_sr_agt[] =
    "graph m {\n"
    "  sr = Data() -> (i64[] \"sr\")\n"
    "  x = Data() -> (f32[4,6] \"x\")\n"
    "  k = Const() -> (i64[] = {16000})\n"
    "  eq = Equal(sr, k) -> (?)\n"
    "  sel = If(eq, x) -> (?) {\n"
    "    graph then_b {\n"
    "      tx = Data() -> (?) <_parent_node_index = 1>\n"
    "      ts = Const() -> (i64[2] = {3, 8})\n"
    "      tr = Reshape(tx, ts) -> (?)\n"
    "      tn = NetOutput(tr <_parent_node_index = 0>)\n"
    "    }\n"
    "    graph else_b {\n"
    "      ex = Data() -> (?) <_parent_node_index = 1>\n"
    "      em = Mystery(ex) -> (?)\n"
    "      inner = If(em, ex) -> (?) {\n"
    "        graph in_then {\n"
    "          a = Data() -> (?) <_parent_node_index = 1>\n"
    "          m2 = Mystery(a) -> (?)\n"
    "          an = NetOutput(m2 <_parent_node_index = 0>)\n"
    "        }\n"
    "        graph in_else {\n"
    "          b = Data() -> (?) <_parent_node_index = 1>\n"
    "          bn = Neg(b) -> (?)\n"
    "          bo = NetOutput(bn <_parent_node_index = 0>)\n"
    "        }\n"
    "      }\n"
    "      en = NetOutput(inner <_parent_node_index = 0>)\n"
    "    }\n"
    "  }\n"
    "  r = Relu(sel) -> (?)\n"
    "  out = NetOutput(r)\n"
    "}\n";

static int64_t taken_attr(const ag_graph *g, ag_node_id n)
{
    int64_t v;
    return ag_attrs_get_int(ag_node_attrs_c(g, n), "_taken_branch", &v) ? v : -1;
}

static void infer_stats(tt *t, ag_infer_stats *s)
{
    memset(s, 0, sizeof *s);
    s->size = sizeof *s;
    ag_status st = ag_infer_shapes(t->g, s);
    if (st != AG_OK)
        print_error("inference failed: %s\n", ag_ctx_errmsg(t->ctx));
    assert_int_equal(st, AG_OK);
}

static void test_if_known_condition(void **state)
{
    (void)state;
    tt *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->ctx = agtest_ctx();
    assert_int_equal(ag_text_read(t->ctx, if_sr_agt, sizeof if_sr_agt - 1, "if_sr.agt", &t->g), AG_OK);
    ag_node_id sel = agtest_find(t->g, AG_ROOT, "sel"), r = agtest_find(t->g, AG_ROOT, "r");
    ag_sub_id else_b = ag_graph_find_sub(t->g, "else_b");
    ag_node_id inner = agtest_find(t->g, else_b, "inner");
    ag_infer_stats s;

    /* sr unknown: both branches may run */
    infer_stats(t, &s);
    assert_int_equal(s.unknown_tensors, 5); /* em, m2, inner, sel, r */
    assert_int_equal(s.unknown_untaken, 0);
    assert_int_equal(taken_attr(t->g, sel), -1);

    assert_int_equal(ag_infer_apply_value_binding(t->g, "sr=16000"), AG_OK);
    infer_stats(t, &s);
    SH(t, sel, 0, "f32[3,8]");
    SH(t, r, 0, "f32[3,8]");
    assert_int_equal(taken_attr(t->g, sel), 0);
    assert_int_equal(taken_attr(t->g, inner), -1); /* its condition stays unknown */
    assert_int_equal(s.unknown_tensors, 0);
    assert_int_equal(s.unknown_untaken, 3); /* em, m2 (nested), inner */
    uint32_t count = 0;
    ag_infer_each_unknown(t->g, count_cb, &count);
    assert_int_equal(count, 0);
    ag_infer_each_unknown_untaken(t->g, count_cb, &count);
    assert_int_equal(count, 3);
    assert_true(ag_infer_sub_untaken(t->g, else_b));
    assert_true(ag_infer_sub_untaken(t->g, ag_graph_find_sub(t->g, "in_then")));
    assert_false(ag_infer_sub_untaken(t->g, ag_graph_find_sub(t->g, "then_b")));
    assert_false(ag_infer_sub_untaken(t->g, AG_ROOT));
    /* a second run finds the same */
    infer_stats(t, &s);
    assert_int_equal(taken_attr(t->g, sel), 0);
    assert_int_equal(s.unknown_tensors, 0);
    assert_int_equal(s.unknown_untaken, 3);

    /* another value: the attribute is recomputed, not trusted (shapes of the
     * earlier run stay as declarations, so only the attribute is checked) */
    assert_int_equal(ag_infer_apply_value_binding(t->g, "sr=8000"), AG_OK);
    infer_stats(t, &s);
    assert_int_equal(taken_attr(t->g, sel), 1);
    assert_int_equal(s.unknown_untaken, 0); /* the then branch is fully known */

    /* no value any more: the attribute goes away */
    assert_int_equal(ag_desc_set_value(t->g, ag_node_output_desc(t->g, agtest_find(t->g, AG_ROOT, "sr"), 0), NULL),
                     AG_OK);
    infer_stats(t, &s);
    assert_int_equal(taken_attr(t->g, sel), -1);
    assert_int_equal(s.unknown_untaken, 0);
    /* an attribute on a node that is not an If or Case is not inference's */
    assert_int_equal(ag_attrs_set_int(t->g, ag_node_attrs(t->g, r), "_taken_branch", 1), AG_OK);
    assert_false(ag_infer_sub_untaken(t->g, else_b));
    tt_free(t);

    /* 8 kHz from the start: the else branch runs and decides the output */
    t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->ctx = agtest_ctx();
    assert_int_equal(ag_text_read(t->ctx, if_sr_agt, sizeof if_sr_agt - 1, "if_sr.agt", &t->g), AG_OK);
    assert_int_equal(ag_infer_apply_value_binding(t->g, "sr=8000"), AG_OK);
    infer_stats(t, &s);
    sel = agtest_find(t->g, AG_ROOT, "sel");
    assert_int_equal(taken_attr(t->g, sel), 1);
    SH(t, sel, 0, "f32[*]");
    assert_int_equal(s.unknown_tensors, 5); /* em, m2, inner, sel, r */
    assert_int_equal(s.unknown_untaken, 0);
    tt_free(t);

    /* Case: an out-of-range index selects the last branch */
    t = tt_new();
    ag_node_id x = data(t, "x", AG_DT_F32, 2, (const int64_t[]){4, 6});
    ag_node_id cs = OP(t, "Case", "case", 1, SCALAR(t, "bi", 7), x);
    ag_sub_id b0 = agtest_sub(t->g, cs, "b0");
    ag_sub_id b1 = agtest_sub(t->g, cs, "b1");
    ag_node_id b0m = op_in(t, b0, "Mystery", "b0m", 1, (ag_node_id[]){sub_data(t, b0, "b0x", 1)}, 1);
    netout_map(t, op_in(t, b0, "NetOutput", "b0n", 1, &b0m, 0), 0, 0);
    ag_node_id b1n = op_in(t, b1, "Neg", "b1neg", 1, (ag_node_id[]){sub_data(t, b1, "b1x", 1)}, 1);
    netout_map(t, op_in(t, b1, "NetOutput", "b1o", 1, &b1n, 0), 0, 0);
    infer_stats(t, &s);
    assert_int_equal(taken_attr(t->g, cs), 1);
    SH(t, cs, 0, "f32[4,6]");
    assert_int_equal(s.unknown_tensors, 0);
    assert_int_equal(s.unknown_untaken, 1); /* b0m */
    tt_free(t);
}

/* Value binding and inference with a known condition under allocation failures. */
static ag_status oom_value_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_graph *g = NULL;
    ag_status st = ag_text_read(ctx, if_sr_agt, sizeof if_sr_agt - 1, "if_sr.agt", &g);
    if (st != AG_OK)
        return st;
    ag_infer_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    st = ag_infer_apply_value_binding(g, "sr=16000");
    if (st == AG_OK)
        st = ag_infer_apply_value_binding(g, "x=0.5");
    if (st == AG_OK)
        st = ag_infer_shapes(g, &s);
    if (st == AG_OK && (s.unknown_tensors != 0 || s.unknown_untaken != 3))
        st = AG_EINTERNAL;
    ag_graph_destroy(g);
    return st;
}

static void test_oom_value_binding(void **state)
{
    (void)state;
    assert_true(AG_TEST_OOM_SWEEP(oom_value_body, NULL) > 10);
}

/* ---------------------------------------------------------------- OOM */

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_graph *g = NULL;
    ag_status st = ag_graph_create(ctx, "m", &g);
    if (st != AG_OK)
        return st;
    ag_node_id x, s, ga, u, c, r, iff, tx, tn, wh, bi, one, inc, bn;
    ag_sub_id th, el, cond, body;
    const int64_t xd[] = {U, 3, 4};
    const int64_t v0[] = {0}, vm1[] = {-1}, d1[] = {1};
    const ag_tensor *tv;
#define T(e)              \
    do {                  \
        st = (e);         \
        if (st != AG_OK)  \
            goto out;     \
    } while (0)
    T(ag_graph_add_node(g, AG_ROOT, "Data", "x", 0, 1, &x));
    ag_node_output_desc(g, x, 0)->dtype = AG_DT_F32;
    T(ag_desc_set_shape(g, ag_node_output_desc(g, x, 0), 3, xd));
    ag_node_id k0, km1;
    T(ag_graph_add_node(g, AG_ROOT, "Const", "k0", 0, 1, &k0));
    T(ag_graph_make_tensor(g, &(ag_tensor){.dtype = AG_DT_I64, .rank = 1, .dims = d1, .nbytes = 8, .data = v0}, &tv));
    T(ag_attrs_set(g, ag_node_attrs(g, k0), &(ag_attr){.name = "value", .kind = AG_ATTR_TENSOR, .count = 1, .v.t = tv}));
    T(ag_graph_add_node(g, AG_ROOT, "Const", "km1", 0, 1, &km1));
    T(ag_graph_make_tensor(g, &(ag_tensor){.dtype = AG_DT_I64, .rank = 1, .dims = d1, .nbytes = 8, .data = vm1}, &tv));
    T(ag_attrs_set(g, ag_node_attrs(g, km1), &(ag_attr){.name = "value", .kind = AG_ATTR_TENSOR, .count = 1, .v.t = tv}));
    T(ag_graph_add_node(g, AG_ROOT, "Shape", "s", 1, 1, &s));
    T(ag_graph_add_edge(g, x, 0, s, 0));
    T(ag_graph_add_node(g, AG_ROOT, "Gather", "ga", 2, 1, &ga));
    T(ag_graph_add_edge(g, s, 0, ga, 0));
    ag_node_id ks;
    T(ag_graph_add_node(g, AG_ROOT, "Const", "ks", 0, 1, &ks));
    T(ag_graph_make_tensor(g, &(ag_tensor){.dtype = AG_DT_I64, .rank = 0, .nbytes = 8, .data = v0}, &tv));
    T(ag_attrs_set(g, ag_node_attrs(g, ks), &(ag_attr){.name = "value", .kind = AG_ATTR_TENSOR, .count = 1, .v.t = tv}));
    T(ag_graph_add_edge(g, ks, 0, ga, 1));
    T(ag_graph_add_node(g, AG_ROOT, "Unsqueeze", "u", 2, 1, &u));
    T(ag_graph_add_edge(g, ga, 0, u, 0));
    T(ag_graph_add_edge(g, k0, 0, u, 1));
    T(ag_graph_add_node(g, AG_ROOT, "Concat", "c", 2, 1, &c));
    T(ag_attrs_set_int(g, ag_node_attrs(g, c), "axis", 0));
    T(ag_graph_add_edge(g, u, 0, c, 0));
    T(ag_graph_add_edge(g, km1, 0, c, 1));
    T(ag_graph_add_node(g, AG_ROOT, "Reshape", "r", 2, 1, &r));
    T(ag_graph_add_edge(g, x, 0, r, 0));
    T(ag_graph_add_edge(g, c, 0, r, 1));
    T(ag_graph_add_node(g, AG_ROOT, "If", "if", 2, 1, &iff));
    T(ag_graph_add_edge(g, ga, 0, iff, 0));
    T(ag_graph_add_edge(g, r, 0, iff, 1));
    T(ag_graph_add_subgraph(g, iff, "then", &th));
    T(ag_graph_add_subgraph(g, iff, "else", &el));
    ag_sub_id br[2] = {th, el};
    for (int k = 0; k < 2; k++) {
        T(ag_graph_add_node(g, br[k], "Data", "d", 0, 1, &tx));
        T(ag_attrs_set_int(g, ag_node_attrs(g, tx), "_parent_node_index", 1));
        T(ag_graph_add_node(g, br[k], "NetOutput", "n", 1, 0, &tn));
        T(ag_graph_add_edge(g, tx, 0, tn, 0));
        T(ag_attrs_set_int(g, ag_node_input_desc(g, tn, 0)->attrs, "_parent_node_index", 0));
    }
    T(ag_graph_add_node(g, AG_ROOT, "While", "wh", 1, 1, &wh));
    T(ag_graph_add_edge(g, ga, 0, wh, 0));
    T(ag_graph_add_subgraph(g, wh, "cond", &cond));
    T(ag_graph_add_subgraph(g, wh, "body", &body));
    T(ag_graph_add_node(g, cond, "Data", "ci", 0, 1, &bi));
    T(ag_attrs_set_int(g, ag_node_attrs(g, bi), "_parent_node_index", 0));
    T(ag_graph_add_node(g, cond, "NetOutput", "cn", 1, 0, &bn));
    T(ag_graph_add_edge(g, bi, 0, bn, 0));
    T(ag_graph_add_node(g, body, "Data", "bi", 0, 1, &bi));
    T(ag_attrs_set_int(g, ag_node_attrs(g, bi), "_parent_node_index", 0));
    T(ag_graph_add_node(g, body, "Unsqueeze", "grow", 2, 1, &inc));
    T(ag_graph_add_node(g, body, "Const", "ax", 0, 1, &one));
    T(ag_graph_make_tensor(g, &(ag_tensor){.dtype = AG_DT_I64, .rank = 1, .dims = d1, .nbytes = 8, .data = v0}, &tv));
    T(ag_attrs_set(g, ag_node_attrs(g, one), &(ag_attr){.name = "value", .kind = AG_ATTR_TENSOR, .count = 1, .v.t = tv}));
    T(ag_graph_add_edge(g, bi, 0, inc, 0));
    T(ag_graph_add_edge(g, one, 0, inc, 1));
    T(ag_graph_add_node(g, body, "NetOutput", "bn", 1, 0, &bn));
    T(ag_graph_add_edge(g, inc, 0, bn, 0));
    T(ag_attrs_set_int(g, ag_node_input_desc(g, bn, 0)->attrs, "_parent_node_index", 0));
    T(ag_infer_apply_binding(g, "x=2,3,4"));
    ag_infer_stats stats = {sizeof stats, 0, 0, 0, 0};
    T(ag_infer_shapes(g, &stats));
    if (ag_node_output_desc_c(g, r, 0)->rank != 2 || ag_node_output_desc_c(g, r, 0)->dims[1] != 12)
        st = AG_EINTERNAL;
    if (ag_node_output_desc_c(g, wh, 0)->rank != AG_RANK_UNKNOWN)
        st = AG_EINTERNAL;
#undef T
out:
    ag_graph_destroy(g);
    return st;
}

static void test_oom_sweep(void **state)
{
    (void)state;
    assert_true(AG_TEST_OOM_SWEEP(oom_body, NULL) > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sources),
        cmocka_unit_test(test_chain_static_reshape),
        cmocka_unit_test(test_chain_partial_values),
        cmocka_unit_test(test_chain_resize_sizes),
        cmocka_unit_test(test_reshape_family),
        cmocka_unit_test(test_reshape_errors),
        cmocka_unit_test(test_concat_split_slice),
        cmocka_unit_test(test_gather_scatter),
        cmocka_unit_test(test_expand_tile_pad),
        cmocka_unit_test(test_generators_and_misc),
        cmocka_unit_test(test_elementwise_values),
        cmocka_unit_test(test_reference_ops),
        cmocka_unit_test(test_if_case),
        cmocka_unit_test(test_if_infeasible_branch),
        cmocka_unit_test(test_while),
        cmocka_unit_test(test_loop_scan_output),
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_partitioned_call),
        cmocka_unit_test(test_bindings),
        cmocka_unit_test(test_unknown_stays_unknown),
        cmocka_unit_test(test_each_unknown),
        cmocka_unit_test(test_rerun_after_binding),
        cmocka_unit_test(test_value_bindings),
        cmocka_unit_test(test_if_known_condition),
        cmocka_unit_test(test_oom_value_binding),
        cmocka_unit_test(test_oom_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
