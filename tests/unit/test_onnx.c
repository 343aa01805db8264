/* Unit tests of the ONNX importer: small ModelProtos built in memory with the
 * protobuf-c structs and packed, then imported; checks the mapping (Const,
 * Data, NetOutput, If/Loop/Scan subgraphs, _parent_node_index, captures
 * chained through two levels, custom domains), every error class with its
 * message, declared-type filling and an OOM sweep over the import. */
#include "support/agtest.h"

#include <stdio.h>

#include "onnx.pb-c.h"

/* ---- ModelProto builders (everything from a pool freed per test) ---- */
#define OB_CAP 32 /* capacity of every repeated field built here */

typedef struct ob_pool {
    void **blocks;
    size_t n, cap;
} ob_pool;

static ob_pool ob_pool_;

static void *ob_alloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p)
        abort();
    if (ob_pool_.n == ob_pool_.cap) {
        ob_pool_.cap = ob_pool_.cap ? 2 * ob_pool_.cap : 256;
        ob_pool_.blocks = realloc(ob_pool_.blocks, ob_pool_.cap * sizeof(void *));
        if (!ob_pool_.blocks)
            abort();
    }
    ob_pool_.blocks[ob_pool_.n++] = p;
    return p;
}

static void ob_pool_free(void)
{
    for (size_t k = 0; k < ob_pool_.n; k++)
        free(ob_pool_.blocks[k]);
    free(ob_pool_.blocks);
    memset(&ob_pool_, 0, sizeof ob_pool_);
}

static char *ob_str(const char *s)
{
    char *p = ob_alloc(strlen(s) + 1);
    memcpy(p, s, strlen(s) + 1);
    return p;
}

/* "a,,b" -> {"a", "", "b"}; "" -> none. */
static size_t ob_split(const char *list, char ***out)
{
    char **v = ob_alloc(OB_CAP * sizeof *v);
    size_t n = 0;
    if (*list) {
        const char *s = list;
        for (;;) {
            const char *c = strchr(s, ',');
            size_t len = c ? (size_t)(c - s) : strlen(s);
            char *e = ob_alloc(len + 1);
            memcpy(e, s, len);
            v[n++] = e;
            if (!c)
                break;
            s = c + 1;
        }
    }
    *out = v;
    return n;
}

/* Tensor type; dim -1 becomes a dim_param "N", -2 no value, other values dim_value; rank < 0: no shape. */
static Onnx__TypeProto *ob_type(int elem, int rank, const int64_t *dims)
{
    Onnx__TypeProto *t = ob_alloc(sizeof *t);
    onnx__type_proto__init(t);
    Onnx__TypeProto__Tensor *tt = ob_alloc(sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = elem != 0;
    tt->elem_type = elem;
    if (rank >= 0) {
        Onnx__TensorShapeProto *sh = ob_alloc(sizeof *sh);
        onnx__tensor_shape_proto__init(sh);
        sh->n_dim = (size_t)rank;
        sh->dim = ob_alloc((size_t)(rank + 1) * sizeof *sh->dim);
        for (int k = 0; k < rank; k++) {
            Onnx__TensorShapeProto__Dimension *d = ob_alloc(sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            if (dims[k] >= 0 || dims[k] < -2) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = dims[k];
            } else if (dims[k] == -1) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = ob_str("N");
            }
            sh->dim[k] = d;
        }
        tt->shape = sh;
    }
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    return t;
}

static Onnx__ValueInfoProto *ob_vi(const char *name, int elem, int rank, const int64_t *dims)
{
    Onnx__ValueInfoProto *v = ob_alloc(sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = ob_str(name);
    v->type = elem || rank >= 0 ? ob_type(elem, rank, dims) : NULL;
    return v;
}

/* A value whose type is a sequence of f32 tensors. */
static Onnx__ValueInfoProto *ob_vi_seq(const char *name)
{
    Onnx__ValueInfoProto *v = ob_vi(name, 0, -1, NULL);
    Onnx__TypeProto *t = ob_alloc(sizeof *t);
    onnx__type_proto__init(t);
    Onnx__TypeProto__Sequence *sq = ob_alloc(sizeof *sq);
    onnx__type_proto__sequence__init(sq);
    sq->elem_type = ob_type(1, -1, NULL);
    t->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
    t->sequence_type = sq;
    v->type = t;
    return v;
}

static Onnx__TensorProto *ob_tensor(const char *name, int dtype, int rank, const int64_t *dims)
{
    Onnx__TensorProto *t = ob_alloc(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = ob_str(name);
    t->has_data_type = 1;
    t->data_type = dtype;
    t->n_dims = (size_t)rank;
    t->dims = ob_alloc((size_t)(rank + 1) * sizeof(int64_t));
    if (rank > 0)
        memcpy(t->dims, dims, (size_t)rank * sizeof(int64_t));
    return t;
}

static Onnx__TensorProto *ob_tensor_f32(const char *name, int rank, const int64_t *dims, const float *v, size_t n)
{
    Onnx__TensorProto *t = ob_tensor(name, 1, rank, dims);
    t->n_float_data = n;
    t->float_data = ob_alloc((n + 1) * sizeof(float));
    memcpy(t->float_data, v, n * sizeof(float));
    return t;
}

static Onnx__TensorProto *ob_tensor_raw(const char *name, int dtype, int rank, const int64_t *dims, const void *raw,
                                        size_t len)
{
    Onnx__TensorProto *t = ob_tensor(name, dtype, rank, dims);
    t->has_raw_data = 1;
    t->raw_data.len = len;
    t->raw_data.data = ob_alloc(len);
    memcpy(t->raw_data.data, raw, len);
    return t;
}

static Onnx__NodeProto *ob_node(const char *op, const char *name, const char *ins, const char *outs)
{
    Onnx__NodeProto *n = ob_alloc(sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = ob_str(op);
    n->name = ob_str(name);
    n->n_input = ob_split(ins, &n->input);
    n->n_output = ob_split(outs, &n->output);
    n->attribute = ob_alloc(OB_CAP * sizeof *n->attribute);
    return n;
}

static Onnx__AttributeProto *ob_attr(Onnx__NodeProto *n, const char *name, Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = ob_alloc(sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = ob_str(name);
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

static void ob_attr_int(Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = ob_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static void ob_attr_ints(Onnx__NodeProto *n, const char *name, const int64_t *v, size_t count)
{
    Onnx__AttributeProto *a = ob_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = count;
    a->ints = ob_alloc((count + 1) * sizeof(int64_t));
    memcpy(a->ints, v, count * sizeof(int64_t));
}

static void ob_attr_float(Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = ob_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

static void ob_attr_string(Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = ob_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)ob_str(v);
}

static void ob_attr_tensor(Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t)
{
    ob_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t = t;
}

static Onnx__GraphProto *ob_graph(const char *name)
{
    Onnx__GraphProto *g = ob_alloc(sizeof *g);
    onnx__graph_proto__init(g);
    g->name = ob_str(name);
    g->node = ob_alloc(OB_CAP * sizeof *g->node);
    g->input = ob_alloc(OB_CAP * sizeof *g->input);
    g->output = ob_alloc(OB_CAP * sizeof *g->output);
    g->initializer = ob_alloc(OB_CAP * sizeof *g->initializer);
    g->value_info = ob_alloc(OB_CAP * sizeof *g->value_info);
    return g;
}

static void ob_attr_graph(Onnx__NodeProto *n, const char *name, Onnx__GraphProto *g)
{
    ob_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = g;
}

static Onnx__NodeProto *ob_add(Onnx__GraphProto *g, Onnx__NodeProto *n)
{
    g->node[g->n_node++] = n;
    return n;
}
static void ob_in(Onnx__GraphProto *g, Onnx__ValueInfoProto *v) { g->input[g->n_input++] = v; }
static void ob_out(Onnx__GraphProto *g, Onnx__ValueInfoProto *v) { g->output[g->n_output++] = v; }
static void ob_init(Onnx__GraphProto *g, Onnx__TensorProto *t) { g->initializer[g->n_initializer++] = t; }
static void ob_vinfo(Onnx__GraphProto *g, Onnx__ValueInfoProto *v) { g->value_info[g->n_value_info++] = v; }

/* Packs a model around g (IR version 8, default opset given); *len bytes, pool-owned. */
static uint8_t *ob_pack(Onnx__GraphProto *g, int64_t opset, size_t *len)
{
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    Onnx__OperatorSetIdProto os = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    Onnx__OperatorSetIdProto *osp = &os;
    os.domain = (char *)"";
    os.has_version = 1;
    os.version = opset;
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.n_opset_import = 1;
    m.opset_import = &osp;
    m.graph = g;
    *len = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = ob_alloc(*len);
    onnx__model_proto__pack(&m, buf);
    return buf;
}


/* ---- helpers ---- */

static const int64_t D2x3[] = {2, 3};
static const int64_t D3[] = {3};
static const int64_t DN3[] = {-1, 3};

static ag_onnx_opts plain_opts(void)
{
    ag_onnx_opts o = ag_onnx_defaults();
    o.infer_shapes = false;
    o.use_declared = false;
    return o;
}

/* Imports (asserting success) with the given options. */
static ag_graph *import_ok(ag_ctx *ctx, const uint8_t *buf, size_t len, const ag_onnx_opts *o)
{
    ag_graph *g = NULL;
    ag_status st = ag_onnx_import(ctx, buf, len, "t.onnx", o, &g);
    if (st != AG_OK)
        fail_msg("import failed: %s: %s", ag_status_str(st), ag_ctx_errmsg(ctx));
    assert_non_null(g);
    assert_int_equal(ag_graph_verify(g), AG_OK);
    return g;
}

/* Imports expecting failure st with a message containing needle. */
static void import_fails(const uint8_t *buf, size_t len, ag_status st, const char *needle)
{
    ag_ctx *ctx = agtest_ctx();
    ag_onnx_opts o = plain_opts();
    ag_graph *g = (ag_graph *)1;
    ag_status got = ag_onnx_import(ctx, buf, len, "bad.onnx", &o, &g);
    if (got != st)
        fail_msg("expected %s (%s), got %s: %s", ag_status_str(st), needle, ag_status_str(got), ag_ctx_errmsg(ctx));
    assert_null(g);
    assert_errmsg(ctx, "bad.onnx");
    assert_errmsg(ctx, needle);
    ag_ctx_destroy(ctx);
}

static int64_t attr_int(const ag_attrs *a, const char *name)
{
    int64_t v = -12345;
    if (!ag_attrs_get_int(a, name, &v))
        fail_msg("no int attribute %s", name);
    return v;
}

static int64_t pni_of_data(const ag_graph *g, ag_node_id n)
{
    return attr_int(ag_node_attrs_c(g, n), "_parent_node_index");
}

static int64_t pni_of_input(const ag_graph *g, ag_node_id n, uint32_t i)
{
    return attr_int(ag_node_input_desc_c(g, n, i)->attrs, "_parent_node_index");
}

/* The NetOutput of subgraph s. */
static ag_node_id netoutput_of(const ag_graph *g, ag_sub_id s)
{
    for (uint32_t k = 0; k < ag_sub_node_count(g, s); k++) {
        ag_node_id n = ag_sub_node_at(g, s, k);
        if (strcmp(ag_node_type(g, n), "NetOutput") == 0)
            return n;
    }
    fail_msg("subgraph %s has no NetOutput", ag_sub_name(g, s));
    return AG_NONE;
}

static void assert_src(const ag_graph *g, ag_node_id n, uint32_t i, ag_node_id src, uint32_t o)
{
    ag_port p = ag_node_input_src(g, n, i);
    assert_int_equal(p.node, src);
    assert_int_equal(p.index, o);
}

/* x:f32[N,3], w (initializer), c = Constant(value_ints [1,2]), y = Add(x, w), z = Mul(y, c_f). */
static Onnx__GraphProto *basic_graph(void)
{
    Onnx__GraphProto *g = ob_graph("basic");
    ob_in(g, ob_vi("x", 1, 2, DN3));
    static const float w[] = {1, 2, 3};
    ob_init(g, ob_tensor_f32("w", 1, D3, w, 3));
    Onnx__NodeProto *c = ob_add(g, ob_node("Constant", "c", "", "cv"));
    static const int64_t cv[] = {1, 2};
    ob_attr_ints(c, "value_ints", cv, 2);
    ob_add(g, ob_node("Add", "add", "x,w", "y"));
    ob_add(g, ob_node("Relu", "", "y", "r"));
    ob_add(g, ob_node("Relu", "", "r", "r2"));
    ob_out(g, ob_vi("r2", 1, 2, DN3));
    ob_out(g, ob_vi("cv", 7, 1, (const int64_t[]){2}));
    return g;
}

/* ---- mapping ---- */

static void test_basic_mapping(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = ob_pack(basic_graph(), 13, &len);
    ag_ctx *ctx = agtest_ctx();
    ag_onnx_opts o = plain_opts();
    ag_onnx_report rep;
    o.report = &rep;
    ag_graph *g = import_ok(ctx, buf, len, &o);
    assert_int_equal(rep.ir_version, 8);
    assert_int_equal(rep.opset, 13);
    assert_string_equal(ag_sub_name(g, AG_ROOT), "basic");

    ag_node_id x = agtest_find(g, AG_ROOT, "x");
    assert_string_equal(ag_node_type(g, x), "Data");
    assert_int_equal(attr_int(ag_node_attrs_c(g, x), "index"), 0);
    const ag_tensor_desc *xd = ag_node_output_desc_c(g, x, 0);
    assert_int_equal(xd->dtype, AG_DT_F32);
    assert_int_equal(xd->rank, 2);
    assert_int_equal(xd->dims[0], AG_DIM_UNKNOWN);
    assert_int_equal(xd->dims[1], 3);
    assert_string_equal(xd->name, "x");

    ag_node_id w = agtest_find(g, AG_ROOT, "w");
    assert_string_equal(ag_node_type(g, w), "Const");
    const ag_attr *wv = ag_attrs_find(ag_node_attrs_c(g, w), "value");
    assert_non_null(wv);
    assert_int_equal(wv->kind, AG_ATTR_TENSOR);
    assert_int_equal(wv->v.t->dtype, AG_DT_F32);
    assert_int_equal(wv->v.t->nbytes, 12);
    float f[3];
    memcpy(f, wv->v.t->data, 12);
    assert_true(f[0] == 1.0f && f[2] == 3.0f);
    assert_non_null(ag_node_output_desc_c(g, w, 0)->value);

    ag_node_id c = agtest_find(g, AG_ROOT, "c");
    assert_string_equal(ag_node_type(g, c), "Const");
    const ag_tensor_desc *cd = ag_node_output_desc_c(g, c, 0);
    assert_int_equal(cd->dtype, AG_DT_I64);
    assert_int_equal(cd->rank, 1);
    assert_int_equal(cd->dims[0], 2);
    assert_non_null(cd->value);
    assert_int_equal(cd->value->nbytes, 16);

    ag_node_id add = agtest_find(g, AG_ROOT, "add");
    assert_string_equal(ag_node_type(g, add), "Add");
    assert_src(g, add, 0, x, 0);
    assert_src(g, add, 1, w, 0);
    assert_string_equal(ag_node_output_desc_c(g, add, 0)->name, "y");
    /* unnamed nodes get <op_type>_<index>, unique */
    ag_node_id r1 = agtest_find(g, AG_ROOT, "Relu_2");
    ag_node_id r2 = agtest_find(g, AG_ROOT, "Relu_3");
    assert_src(g, r2, 0, r1, 0);

    ag_node_id no = netoutput_of(g, AG_ROOT);
    assert_int_equal(ag_node_num_inputs(g, no), 2);
    assert_src(g, no, 0, r2, 0);
    assert_src(g, no, 1, c, 0);
    assert_string_equal(ag_node_input_desc_c(g, no, 0)->name, "r2");
    assert_string_equal(ag_node_input_desc_c(g, no, 1)->name, "cv");
    ag_graph_destroy(g);

    /* --input-shape binds the dynamic dim */
    const char *bind[] = {"x=4,3"};
    o.input_shapes = bind;
    o.n_input_shapes = 1;
    g = import_ok(ctx, buf, len, &o);
    xd = ag_node_output_desc_c(g, agtest_find(g, AG_ROOT, "x"), 0);
    assert_int_equal(xd->dims[0], 4);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
    ob_pool_free();
}

static void test_custom_domain_attrs(void **state)
{
    (void)state;
    Onnx__GraphProto *gp = ob_graph("m");
    ob_in(gp, ob_vi("v", 1, 1, D3));
    ob_in(gp, ob_vi("u", 1, 1, D3));
    Onnx__NodeProto *n = ob_add(gp, ob_node("Assign", "assign", "v,u", "o"));
    n->domain = ob_str("ai.custom");
    static const int64_t one[] = {1};
    ob_attr_ints(n, "_input_mutable", one, 1);
    ob_attr_int(n, "i", -7);
    ob_attr_float(n, "f", 0.5f);
    ob_attr_string(n, "s", "hello");
    static const float tv[] = {1, 2, 3};
    ob_attr_tensor(n, "t", ob_tensor_f32("", 1, D3, tv, 3));
    Onnx__AttributeProto *ss = ob_attr(n, "ss", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
    ss->n_strings = 2;
    ss->strings = ob_alloc(2 * sizeof *ss->strings);
    ss->strings[0].data = (uint8_t *)ob_str("a");
    ss->strings[0].len = 1;
    ss->strings[1].data = (uint8_t *)ob_str("bc");
    ss->strings[1].len = 2;
    Onnx__AttributeProto *fs = ob_attr(n, "fs", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    fs->n_floats = 2;
    fs->floats = ob_alloc(2 * sizeof(float));
    fs->floats[1] = 2.5f;
    Onnx__AttributeProto *ts = ob_attr(n, "ts", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS);
    ts->n_tensors = 1;
    ts->tensors = ob_alloc(sizeof *ts->tensors);
    static const int32_t i8raw = 0x05;
    ts->tensors[0] = ob_tensor_raw("", 3, 0, NULL, &i8raw, 1);
    ob_out(gp, ob_vi("o", 1, 1, D3));
    size_t len;
    uint8_t *buf = ob_pack(gp, 17, &len);
    ag_ctx *ctx = agtest_ctx();
    ag_onnx_opts o = plain_opts();
    ag_graph *g = import_ok(ctx, buf, len, &o);
    ag_node_id a = agtest_find(g, AG_ROOT, "assign");
    assert_string_equal(ag_node_type(g, a), "Assign");
    assert_string_equal(ag_node_domain(g, a), "ai.custom");
    const ag_attrs *at = ag_node_attrs_c(g, a);
    const int64_t *iv;
    uint32_t cnt;
    assert_true(ag_attrs_get_ints(at, "_input_mutable", &iv, &cnt));
    assert_int_equal(cnt, 1);
    assert_int_equal(iv[0], 1);
    assert_int_equal(attr_int(at, "i"), -7);
    float fv;
    assert_true(ag_attrs_get_float(at, "f", &fv));
    assert_true(fv == 0.5f);
    const char *sv;
    assert_true(ag_attrs_get_string(at, "s", &sv));
    assert_string_equal(sv, "hello");
    assert_int_equal(ag_attrs_find(at, "t")->kind, AG_ATTR_TENSOR);
    const ag_attr *ssa = ag_attrs_find(at, "ss");
    assert_int_equal(ssa->kind, AG_ATTR_STRINGS);
    assert_int_equal(ssa->count, 2);
    assert_string_equal(ssa->v.ss[1], "bc");
    const ag_attr *fsa = ag_attrs_find(at, "fs");
    assert_int_equal(fsa->kind, AG_ATTR_FLOATS);
    assert_true(fsa->v.fs[1] == 2.5f);
    const ag_attr *tsa = ag_attrs_find(at, "ts");
    assert_int_equal(tsa->kind, AG_ATTR_TENSORS);
    assert_int_equal(tsa->v.ts[0]->dtype, AG_DT_I8);
    assert_int_equal(((const uint8_t *)tsa->v.ts[0]->data)[0], 5);
    /* attribute order is kept */
    assert_string_equal(ag_attrs_at(at, 0)->name, "_input_mutable");
    assert_string_equal(ag_attrs_at(at, 7)->name, "ts");
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
    ob_pool_free();
}

/* y = If(c) then: Add(x, x) else: Mul(x, k); x and k come from outside. */
static Onnx__GraphProto *if_graph(void)
{
    Onnx__GraphProto *g = ob_graph("m");
    ob_in(g, ob_vi("c", 9, 0, NULL));
    ob_in(g, ob_vi("x", 1, 1, D3));
    ob_in(g, ob_vi("k", 1, 1, D3));
    Onnx__GraphProto *th = ob_graph("then");
    ob_add(th, ob_node("Add", "tadd", "x,x", "ty"));
    ob_out(th, ob_vi("ty", 1, 1, D3));
    Onnx__GraphProto *el = ob_graph("else");
    ob_add(el, ob_node("Mul", "emul", "x,k", "ey"));
    ob_out(el, ob_vi("ey", 1, 1, D3));
    Onnx__NodeProto *n = ob_add(g, ob_node("If", "if", "c", "y"));
    /* else first: the importer must still order then, else */
    ob_attr_graph(n, "else_branch", el);
    ob_attr_graph(n, "then_branch", th);
    ob_add(g, ob_node("Neg", "neg", "y", "z"));
    ob_out(g, ob_vi("z", 1, 1, D3));
    return g;
}

static void test_if(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = ob_pack(if_graph(), 13, &len);
    ag_ctx *ctx = agtest_ctx();
    ag_onnx_opts o = plain_opts();
    ag_graph *g = import_ok(ctx, buf, len, &o);
    ag_node_id n = agtest_find(g, AG_ROOT, "if");
    assert_string_equal(ag_node_type(g, n), "If");
    assert_int_equal(ag_node_num_subs(g, n), 2);
    ag_sub_id th = ag_node_sub(g, n, 0), el = ag_node_sub(g, n, 1);
    assert_string_equal(ag_sub_name(g, th), "if/then_branch");
    assert_string_equal(ag_sub_name(g, el), "if/else_branch");
    /* inputs: cond, then captured x (shared by both branches), k */
    assert_int_equal(ag_node_num_inputs(g, n), 3);
    assert_src(g, n, 0, agtest_find(g, AG_ROOT, "c"), 0);
    assert_src(g, n, 1, agtest_find(g, AG_ROOT, "x"), 0);
    assert_src(g, n, 2, agtest_find(g, AG_ROOT, "k"), 0);
    ag_node_id tx = agtest_find(g, th, "x");
    assert_string_equal(ag_node_type(g, tx), "Data");
    assert_int_equal(pni_of_data(g, tx), 1);
    ag_node_id tadd = agtest_find(g, th, "tadd");
    assert_src(g, tadd, 0, tx, 0);
    assert_src(g, tadd, 1, tx, 0);
    assert_int_equal(pni_of_data(g, agtest_find(g, el, "x")), 1);
    assert_int_equal(pni_of_data(g, agtest_find(g, el, "k")), 2);
    ag_node_id tno = netoutput_of(g, th);
    assert_src(g, tno, 0, tadd, 0);
    assert_int_equal(pni_of_input(g, tno, 0), 0);
    assert_int_equal(pni_of_input(g, netoutput_of(g, el), 0), 0);
    assert_src(g, agtest_find(g, AG_ROOT, "neg"), 0, n, 0);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
    ob_pool_free();
}

/* opts.input_values: a bound condition reaches inference, which records the
 * branch taken; a bad value fails naming the file and the binding. */
static void test_if_input_value(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = ob_pack(if_graph(), 13, &len);
    ag_ctx *ctx = agtest_ctx();
    ag_onnx_report rep;
    ag_onnx_opts o = ag_onnx_defaults();
    const char *values[] = {"c=0", "k=2"};
    o.input_values = values;
    o.n_input_values = 2;
    o.report = &rep;
    ag_graph *g = import_ok(ctx, buf, len, &o);
    ag_node_id n = agtest_find(g, AG_ROOT, "if");
    assert_int_equal(attr_int(ag_node_attrs_c(g, n), "_taken_branch"), 1);
    const ag_tensor *kv = ag_node_output_desc_c(g, agtest_find(g, AG_ROOT, "k"), 0)->value;
    assert_non_null(kv);
    assert_int_equal(kv->nbytes, 12);
    float k2;
    memcpy(&k2, (const unsigned char *)kv->data + 8, sizeof k2);
    assert_true(k2 == 2.0f);
    assert_int_equal(rep.infer.unknown_tensors, 0);
    assert_int_equal(rep.infer.unknown_untaken, 0);
    ag_graph_destroy(g);

    const char *bad[] = {"c=2"};
    o.input_values = bad;
    o.n_input_values = 1;
    g = (ag_graph *)1;
    assert_int_equal(ag_onnx_import(ctx, buf, len, "t.onnx", &o, &g), AG_EINVAL);
    assert_null(g);
    assert_errmsg(ctx, "t.onnx: input value binding 'c=2': value 0 is out of range for bool");
    o.input_values = NULL;
    assert_int_equal(ag_onnx_import(ctx, buf, len, "t.onnx", &o, &g), AG_EINVAL);
    assert_errmsg(ctx, "input values given without the list");
    ag_ctx_destroy(ctx);
    ob_pool_free();
}

/* Loop(M, cond, v) body(i, c, v) -> (c2, v2, scan) with an outer value z. */
static Onnx__GraphProto *loop_graph(bool with_m)
{
    Onnx__GraphProto *g = ob_graph("m");
    ob_in(g, ob_vi("M", 7, 0, NULL));
    ob_in(g, ob_vi("cond", 9, 0, NULL));
    ob_in(g, ob_vi("v0", 1, 1, D3));
    ob_in(g, ob_vi("z", 1, 1, D3));
    Onnx__GraphProto *b = ob_graph("body");
    ob_in(b, ob_vi("i", 7, 0, NULL));
    ob_in(b, ob_vi("c", 9, 0, NULL));
    ob_in(b, ob_vi("v", 1, -1, NULL));
    ob_add(b, ob_node("Add", "badd", "v,z", "v2"));
    ob_add(b, ob_node("Identity", "bid", "c", "c2"));
    ob_add(b, ob_node("Identity", "bscan", "v2", "s"));
    ob_out(b, ob_vi("c2", 9, 0, NULL));
    ob_out(b, ob_vi("v2", 1, 1, D3));
    ob_out(b, ob_vi("s", 1, 1, D3));
    Onnx__NodeProto *n = ob_add(g, ob_node("Loop", "loop", with_m ? "M,cond,v0" : ",cond,v0", "vf,sf"));
    ob_attr_graph(n, "body", b);
    ob_add(g, ob_node("Neg", "neg", "vf", "o"));
    ob_out(g, ob_vi("o", 1, 1, D3));
    ob_out(g, ob_vi("sf", 1, 2, (const int64_t[]){-1, 3}));
    return g;
}

static void test_loop(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = ob_pack(loop_graph(true), 13, &len);
    ag_ctx *ctx = agtest_ctx();
    ag_onnx_opts o = plain_opts();
    ag_graph *g = import_ok(ctx, buf, len, &o);
    ag_node_id n = agtest_find(g, AG_ROOT, "loop");
    assert_string_equal(ag_node_type(g, n), "While");
    const char *ot;
    assert_true(ag_attrs_get_string(ag_node_attrs_c(g, n), "original_type", &ot));
    assert_string_equal(ot, "Loop");
    /* inputs: M, cond, iteration counter, v0, captured z */
    assert_int_equal(ag_node_num_inputs(g, n), 5);
    assert_src(g, n, 0, agtest_find(g, AG_ROOT, "M"), 0);
    assert_src(g, n, 1, agtest_find(g, AG_ROOT, "cond"), 0);
    ag_node_id it0 = ag_node_input_src(g, n, 2).node;
    assert_string_equal(ag_node_type(g, it0), "Const");
    assert_int_equal(ag_node_output_desc_c(g, it0, 0)->value->dtype, AG_DT_I64);
    assert_src(g, n, 3, agtest_find(g, AG_ROOT, "v0"), 0);
    assert_src(g, n, 4, agtest_find(g, AG_ROOT, "z"), 0);
    assert_int_equal(attr_int(ag_node_attrs_c(g, n), "_num_captured"), 1);
    /* outputs: M, cond, iteration, vf, z passed through, then sf at index
     * nin so that no scan output shares an index with an input */
    assert_int_equal(ag_node_num_outputs(g, n), 6);
    assert_string_equal(ag_node_output_desc_c(g, n, 3)->name, "vf");
    assert_string_equal(ag_node_output_desc_c(g, n, 4)->name, "");
    assert_int_equal(ag_node_output_nconsumers(g, n, 4), 0);
    assert_string_equal(ag_node_output_desc_c(g, n, 5)->name, "sf");
    assert_src(g, agtest_find(g, AG_ROOT, "neg"), 0, n, 3);
    assert_src(g, netoutput_of(g, AG_ROOT), 1, n, 5);

    assert_int_equal(ag_node_num_subs(g, n), 2);
    ag_sub_id cs = ag_node_sub(g, n, 0), bs = ag_node_sub(g, n, 1);
    assert_string_equal(ag_sub_name(g, cs), "loop/cond");
    assert_string_equal(ag_sub_name(g, bs), "loop/body");
    /* cond: And(Less(iteration, M), cond) */
    ag_node_id keep = agtest_find(g, cs, "keep_going");
    ag_node_id less = agtest_find(g, cs, "below_trip_count");
    assert_string_equal(ag_node_type(g, keep), "And");
    assert_string_equal(ag_node_type(g, less), "Less");
    assert_int_equal(pni_of_data(g, ag_node_input_src(g, less, 0).node), 2);
    assert_int_equal(pni_of_data(g, ag_node_input_src(g, less, 1).node), 0);
    assert_int_equal(pni_of_data(g, ag_node_input_src(g, keep, 1).node), 1);
    assert_src(g, netoutput_of(g, cs), 0, keep, 0);
    /* body inputs */
    assert_int_equal(pni_of_data(g, agtest_find(g, bs, "i")), 2);
    assert_int_equal(pni_of_data(g, agtest_find(g, bs, "c")), 1);
    assert_int_equal(pni_of_data(g, agtest_find(g, bs, "v")), 3);
    assert_int_equal(pni_of_data(g, agtest_find(g, bs, "z")), 4);
    assert_int_equal(pni_of_data(g, agtest_find(g, bs, "trip_count")), 0);
    /* body outputs: M, c2, i+1, v2, z (its own Data), s */
    ag_node_id bno = netoutput_of(g, bs);
    assert_int_equal(ag_node_num_inputs(g, bno), 6);
    for (uint32_t k = 0; k < 6; k++)
        assert_int_equal(pni_of_input(g, bno, k), k);
    assert_src(g, bno, 0, agtest_find(g, bs, "trip_count"), 0);
    assert_src(g, bno, 1, agtest_find(g, bs, "bid"), 0);
    ag_node_id next = ag_node_input_src(g, bno, 2).node;
    assert_string_equal(ag_node_type(g, next), "Add");
    assert_src(g, next, 0, agtest_find(g, bs, "i"), 0);
    assert_src(g, bno, 3, agtest_find(g, bs, "badd"), 0);
    assert_src(g, bno, 4, agtest_find(g, bs, "z"), 0);
    assert_string_equal(ag_node_input_desc_c(g, bno, 4)->name, "z");
    assert_src(g, bno, 5, agtest_find(g, bs, "bscan"), 0);
    assert_string_equal(ag_node_input_desc_c(g, bno, 5)->name, "s");
    assert_true(pni_of_input(g, bno, 5) >= ag_node_num_inputs(g, n));
    assert_int_equal(ag_graph_verify(g), AG_OK);
    ag_graph_destroy(g);

    /* absent M: an unbounded trip count constant */
    buf = ob_pack(loop_graph(false), 13, &len);
    g = import_ok(ctx, buf, len, &o);
    n = agtest_find(g, AG_ROOT, "loop");
    ag_node_id m = ag_node_input_src(g, n, 0).node;
    assert_string_equal(ag_node_type(g, m), "Const");
    int64_t mv;
    memcpy(&mv, ag_node_output_desc_c(g, m, 0)->value->data, 8);
    assert_true(mv == INT64_MAX);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
    ob_pool_free();
}

static void test_scan(void **state)
{
    (void)state;
    Onnx__GraphProto *g = ob_graph("m");
    ob_in(g, ob_vi("s0", 1, 1, D3));
    ob_in(g, ob_vi("xs", 1, 2, (const int64_t[]){5, 3}));
    Onnx__GraphProto *b = ob_graph("body");
    ob_in(b, ob_vi("s", 1, 1, D3));
    ob_in(b, ob_vi("x", 1, 1, D3));
    ob_add(b, ob_node("Add", "acc", "s,x", "s2"));
    ob_add(b, ob_node("Identity", "copy", "s2", "y"));
    ob_out(b, ob_vi("s2", 1, 1, D3));
    ob_out(b, ob_vi("y", 1, 1, D3));
    Onnx__NodeProto *n = ob_add(g, ob_node("Scan", "scan", "s0,xs", "sf,ys"));
    ob_attr_graph(n, "body", b);
    ob_attr_int(n, "num_scan_inputs", 1);
    ob_out(g, ob_vi("sf", 1, 1, D3));
    ob_out(g, ob_vi("ys", 1, 2, (const int64_t[]){5, 3}));
    size_t len;
    uint8_t *buf = ob_pack(g, 11, &len);
    ag_ctx *ctx = agtest_ctx();
    ag_onnx_opts o = plain_opts();
    ag_graph *ig = import_ok(ctx, buf, len, &o);
    ag_node_id sn = agtest_find(ig, AG_ROOT, "scan");
    assert_string_equal(ag_node_type(ig, sn), "Scan");
    assert_int_equal(attr_int(ag_node_attrs_c(ig, sn), "num_scan_inputs"), 1);
    assert_null(ag_attrs_find(ag_node_attrs_c(ig, sn), "body"));
    assert_int_equal(ag_node_num_subs(ig, sn), 1);
    ag_sub_id bs = ag_node_sub(ig, sn, 0);
    assert_int_equal(pni_of_data(ig, agtest_find(ig, bs, "s")), 0);
    assert_int_equal(pni_of_data(ig, agtest_find(ig, bs, "x")), 1);
    ag_node_id bno = netoutput_of(ig, bs);
    assert_int_equal(pni_of_input(ig, bno, 0), 0);
    assert_int_equal(pni_of_input(ig, bno, 1), 1);
    ag_graph_destroy(ig);
    ag_ctx_destroy(ctx);
    ob_pool_free();
}

/* a is defined at the root and read two If levels down. */
static Onnx__GraphProto *nested_graph(void)
{
    Onnx__GraphProto *g = ob_graph("m");
    ob_in(g, ob_vi("c", 9, 0, NULL));
    ob_in(g, ob_vi("a", 1, 1, D3));
    Onnx__GraphProto *inner_then = ob_graph("it");
    ob_add(inner_then, ob_node("Neg", "deep", "a", "d"));
    ob_out(inner_then, ob_vi("d", 1, 1, D3));
    Onnx__GraphProto *inner_else = ob_graph("ie");
    ob_add(inner_else, ob_node("Identity", "pass", "a", "e"));
    ob_out(inner_else, ob_vi("e", 1, 1, D3));
    Onnx__GraphProto *outer_then = ob_graph("ot");
    Onnx__NodeProto *in = ob_add(outer_then, ob_node("If", "inner", "c", "r"));
    ob_attr_graph(in, "then_branch", inner_then);
    ob_attr_graph(in, "else_branch", inner_else);
    ob_out(outer_then, ob_vi("r", 1, 1, D3));
    Onnx__GraphProto *outer_else = ob_graph("oe");
    ob_add(outer_else, ob_node("Identity", "oid", "a", "q"));
    ob_out(outer_else, ob_vi("q", 1, 1, D3));
    Onnx__NodeProto *out = ob_add(g, ob_node("If", "outer", "c", "y"));
    ob_attr_graph(out, "then_branch", outer_then);
    ob_attr_graph(out, "else_branch", outer_else);
    ob_out(g, ob_vi("y", 1, 1, D3));
    return g;
}

static void test_nested_capture(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = ob_pack(nested_graph(), 13, &len);
    ag_ctx *ctx = agtest_ctx();
    ag_onnx_opts o = plain_opts();
    ag_graph *g = import_ok(ctx, buf, len, &o);
    ag_node_id outer = agtest_find(g, AG_ROOT, "outer");
    /* outer: cond, then c (captured by the inner If's cond) and a */
    ag_sub_id ot = ag_node_sub(g, outer, 0);
    ag_node_id inner = agtest_find(g, ot, "inner");
    ag_node_id a_root = agtest_find(g, AG_ROOT, "a");
    uint32_t a_idx = AG_NONE;
    for (uint32_t i = 1; i < ag_node_num_inputs(g, outer); i++)
        if (ag_node_input_src(g, outer, i).node == a_root)
            a_idx = i;
    assert_int_not_equal(a_idx, AG_NONE);
    ag_node_id a_ot = agtest_find(g, ot, "a");
    assert_string_equal(ag_node_type(g, a_ot), "Data");
    assert_int_equal(pni_of_data(g, a_ot), a_idx);
    /* the inner If reads a through the outer branch's Data */
    uint32_t b_idx = AG_NONE;
    for (uint32_t i = 1; i < ag_node_num_inputs(g, inner); i++)
        if (ag_node_input_src(g, inner, i).node == a_ot)
            b_idx = i;
    assert_int_not_equal(b_idx, AG_NONE);
    ag_sub_id it = ag_node_sub(g, inner, 0), ie = ag_node_sub(g, inner, 1);
    ag_node_id a_it = agtest_find(g, it, "a");
    assert_int_equal(pni_of_data(g, a_it), b_idx);
    assert_src(g, agtest_find(g, it, "deep"), 0, a_it, 0);
    assert_int_equal(pni_of_data(g, agtest_find(g, ie, "a")), b_idx);
    /* the else branch of the outer If uses the same outer input */
    assert_int_equal(pni_of_data(g, agtest_find(g, ag_node_sub(g, outer, 1), "a")), a_idx);
    assert_int_equal(ag_sub_depth(g, it), 2);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
    ob_pool_free();
}

/* ---- declared types ---- */

static void test_declared(void **state)
{
    (void)state;
    Onnx__GraphProto *gp = ob_graph("m");
    ob_in(gp, ob_vi("x", 1, 2, D2x3));
    Onnx__NodeProto *n = ob_add(gp, ob_node("Mystery", "myst", "x", "y"));
    n->domain = ob_str("ai.custom");
    ob_add(gp, ob_node("Relu", "relu", "x", "r"));
    ob_vinfo(gp, ob_vi("y", 1, 2, (const int64_t[]){4, 5}));
    ob_out(gp, ob_vi("y", 1, 2, (const int64_t[]){4, 5}));
    ob_out(gp, ob_vi("r", 1, 2, (const int64_t[]){2, 4})); /* wrong on purpose */
    size_t len;
    uint8_t *buf = ob_pack(gp, 13, &len);
    ag_ctx *ctx = agtest_ctx();
    ag_onnx_opts o = ag_onnx_defaults();
    ag_onnx_report rep;
    o.report = &rep;
    ag_graph *g = import_ok(ctx, buf, len, &o);
    const ag_tensor_desc *yd = ag_node_output_desc_c(g, agtest_find(g, AG_ROOT, "myst"), 0);
    assert_int_equal(yd->dtype, AG_DT_F32);
    assert_int_equal(yd->rank, 2);
    assert_int_equal(yd->dims[1], 5);
    assert_true(rep.declared_filled >= 1);
    /* Relu keeps its inferred [2,3]; the declared [2,4] is counted and described */
    const ag_tensor_desc *rd = ag_node_output_desc_c(g, agtest_find(g, AG_ROOT, "relu"), 0);
    if (rd->rank == 2 && rd->dims[1] == 3) {
        assert_int_equal(rep.declared_mismatches, 1);
        assert_non_null(strstr(rep.first_mismatch, "relu"));
        assert_non_null(strstr(rep.first_mismatch, "declared f32[2,4]"));
    }
    /* consumers see the filled type */
    const ag_tensor_desc *nd = ag_node_input_desc_c(g, netoutput_of(g, AG_ROOT), 0);
    assert_int_equal(nd->rank, 2);
    assert_int_equal(nd->dims[0], 4);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
    ob_pool_free();
}

/* ---- errors ---- */

static void test_error_bytes(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = ob_pack(if_graph(), 13, &len);
    for (size_t cut = 1; cut < len; cut += 7)
        import_fails(buf, cut, AG_EPARSE, "not a valid ONNX ModelProto");
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x12, 0x99, 0x01};
    import_fails(junk, sizeof junk, AG_EPARSE, "not a valid ONNX ModelProto");
    import_fails(junk, 0, AG_EPARSE, "not a valid ONNX ModelProto");
    /* deep nesting (graph.node.attribute.g...) is refused before protobuf-c recurses on it */
    size_t cap = 1 << 16, n = 0;
    uint8_t *deep = ob_alloc(cap), *tmp = ob_alloc(cap);
    static const uint8_t chain[3] = {0x32, 0x2a, 0x0a}; /* Attribute.g, Node.attribute, Graph.node */
    for (int k = 0; k < 3000; k++) {
        size_t m = 0;
        tmp[m++] = chain[k % 3];
        for (size_t v = n; ; v >>= 7) {
            tmp[m++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
            if (v <= 0x7f)
                break;
        }
        assert_true(m + n + 8 < cap);
        memcpy(tmp + m, deep, n);
        memcpy(deep, tmp, m + n);
        n += m;
    }
    memmove(deep + 3, deep, n);
    deep[0] = 0x3a; /* Model.graph */
    deep[1] = (uint8_t)((n & 0x7f) | 0x80);
    deep[2] = (uint8_t)(n >> 7);
    assert_true(n < (1u << 14));
    import_fails(deep, n + 3, AG_EUNSUPPORTED, "nested deeper than");
    ob_pool_free();
}

/* Builds a one-node model around node n with inputs x:f32[3]. */
static uint8_t *one_node(Onnx__NodeProto *n, size_t *len)
{
    Onnx__GraphProto *g = ob_graph("m");
    ob_in(g, ob_vi("x", 1, 1, D3));
    ob_add(g, n);
    ob_out(g, ob_vi(n->n_output ? n->output[0] : "x", 1, 1, D3));
    return ob_pack(g, 13, len);
}

static void test_error_graph(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf;

    buf = one_node(ob_node("Add", "add", "x,nope", "y"), &len);
    import_fails(buf, len, AG_EPARSE, "node 'add' (Add) input 1: value 'nope' is not defined");

    Onnx__GraphProto *g = ob_graph("m");
    ob_in(g, ob_vi("x", 1, 1, D3));
    ob_add(g, ob_node("Relu", "r1", "x", "y"));
    ob_add(g, ob_node("Relu", "r2", "x", "y"));
    ob_out(g, ob_vi("y", 1, 1, D3));
    buf = ob_pack(g, 13, &len);
    import_fails(buf, len, AG_EPARSE, "value 'y' is defined twice in graph 'm' (again by node 'r2' (Relu) output 0)");

    g = ob_graph("m");
    ob_in(g, ob_vi("x", 1, 1, D3));
    ob_out(g, ob_vi("missing", 1, 1, D3));
    buf = ob_pack(g, 13, &len);
    import_fails(buf, len, AG_EPARSE, "output 'missing' of graph 'm' is not defined");

    g = ob_graph("m");
    ob_in(g, ob_vi_seq("xs"));
    ob_out(g, ob_vi("xs", 1, 1, D3));
    buf = ob_pack(g, 13, &len);
    import_fails(buf, len, AG_EUNSUPPORTED, "sequence type on input 'xs' of graph 'm' is not supported");

    g = ob_graph("m");
    ob_in(g, ob_vi("x", 1, 1, D3));
    ob_add(g, ob_node("SequenceConstruct", "sc", "x", "s"));
    ob_out(g, ob_vi("x", 1, 1, D3));
    buf = ob_pack(g, 13, &len);
    import_fails(buf, len, AG_EUNSUPPORTED, "node 'sc' (SequenceConstruct) of graph 'm' produces a sequence value");

    Onnx__NodeProto *n = ob_node("Foo", "foo", "x", "y");
    ob_attr(n, "sp", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR);
    buf = one_node(n, &len);
    import_fails(buf, len, AG_EUNSUPPORTED, "sparse tensor attribute 'sp' of node 'foo' (Foo) is not supported");

    n = ob_node("Foo", "foo", "x", "y");
    ob_attr(n, "tp", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO);
    buf = one_node(n, &len);
    import_fails(buf, len, AG_EUNSUPPORTED, "type-valued attribute 'tp' of node 'foo' (Foo) is not supported");

    n = ob_node("Loop", "lp", ",,x", "y");
    buf = one_node(n, &len);
    import_fails(buf, len, AG_EPARSE, "node 'lp' (Loop) has no graph attribute 'body'");

    n = ob_node("If", "if", "x", "y");
    ob_attr_graph(n, "then_branch", ob_graph("t"));
    buf = one_node(n, &len);
    import_fails(buf, len, AG_EPARSE, "node 'if' (If) has no graph attribute 'else_branch'");

    /* op types that name the IR's own structural nodes */
    buf = one_node(ob_node("NetOutput", "no", "x", "y"), &len);
    import_fails(buf, len, AG_EUNSUPPORTED,
                 "node 'no' (NetOutput, domain '') of graph 'm': the op type names a node of aliasguard's own");
    n = ob_node("Data", "d", "x", "y");
    n->domain = ob_str("ai.custom");
    buf = one_node(n, &len);
    import_fails(buf, len, AG_EUNSUPPORTED, "node 'd' (Data, domain 'ai.custom') of graph 'm': the op type names");
    buf = one_node(ob_node("Const", "c", "x", "y"), &len);
    import_fails(buf, len, AG_EUNSUPPORTED, "node 'c' (Const, domain '')");
    buf = one_node(ob_node("While", "w", "x", "y"), &len);
    import_fails(buf, len, AG_EUNSUPPORTED, "node 'w' (While, domain '')");
    n = ob_node("If", "if", "x", "y");
    n->domain = ob_str("ai.custom");
    buf = one_node(n, &len);
    import_fails(buf, len, AG_EUNSUPPORTED, "node 'if' (If, domain 'ai.custom')");
    n = ob_node("Scan", "sc", "x", "y");
    n->domain = ob_str("com.example");
    buf = one_node(n, &len);
    import_fails(buf, len, AG_EUNSUPPORTED, "node 'sc' (Scan, domain 'com.example')");
    /* the same names are plain operators once they name nothing of the IR:
     * a custom-domain Loop (the IR's loop is While) */
    n = ob_node("Loop", "lp", "x", "y");
    n->domain = ob_str("ai.custom");
    buf = one_node(n, &len);
    {
        ag_ctx *ctx = agtest_ctx();
        ag_onnx_opts o = plain_opts();
        ag_graph *ig = import_ok(ctx, buf, len, &o);
        assert_string_equal(ag_node_type(ig, agtest_find(ig, AG_ROOT, "lp")), "Loop");
        ag_graph_destroy(ig);
        ag_ctx_destroy(ctx);
    }

    g = ob_graph("m");
    ob_in(g, ob_vi("x", 1, 2, (const int64_t[]){2, -5}));
    ob_out(g, ob_vi("x", 1, 1, D3));
    buf = ob_pack(g, 13, &len);
    import_fails(buf, len, AG_EPARSE, "input 'x' of graph 'm' has dimension 1 of extent -5");

    g = ob_graph("m");
    ob_in(g, ob_vi("x", 1, 1, (const int64_t[]){INT64_C(1) << 50}));
    ob_out(g, ob_vi("x", 1, 1, D3));
    buf = ob_pack(g, 13, &len);
    import_fails(buf, len, AG_EPARSE, "dimension 0 of extent");

    int64_t big[AG_MAX_RANK + 1];
    for (int k = 0; k <= AG_MAX_RANK; k++)
        big[k] = 1;
    g = ob_graph("m");
    ob_in(g, ob_vi("x", 1, AG_MAX_RANK + 1, big));
    ob_out(g, ob_vi("x", 1, 1, D3));
    buf = ob_pack(g, 13, &len);
    import_fails(buf, len, AG_EPARSE, "input 'x' of graph 'm' has rank 65");

    g = ob_graph("m");
    ob_in(g, ob_vi("x", 99, 1, D3));
    ob_out(g, ob_vi("x", 1, 1, D3));
    buf = ob_pack(g, 13, &len);
    import_fails(buf, len, AG_EUNSUPPORTED, "data type 99 of input 'x' of graph 'm' is not supported");
    ob_pool_free();
}

/* A model whose only initializer is t. */
static uint8_t *one_init(Onnx__TensorProto *t, size_t *len)
{
    Onnx__GraphProto *g = ob_graph("m");
    ob_init(g, t);
    ob_out(g, ob_vi(t->name, 0, -1, NULL));
    return ob_pack(g, 13, len);
}

static void test_error_tensors(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf;
    static const float v[] = {1, 2};
    buf = one_init(ob_tensor_f32("w", 1, D3, v, 2), &len);
    import_fails(buf, len, AG_EPARSE, "initializer 'w' of graph 'm' has 2 values in float_data, its shape needs 3");

    buf = one_init(ob_tensor_raw("w", 1, 1, D3, v, 8), &len);
    import_fails(buf, len, AG_EPARSE, "initializer 'w' of graph 'm' has 8 bytes of raw data, its shape and type need 12");

    buf = one_init(ob_tensor("w", 1, 1, D3), &len);
    import_fails(buf, len, AG_EPARSE, "initializer 'w' of graph 'm' has no data");

    /* a shape that claims 256 TiB beside two values: refused by count, not
     * by trying to allocate what it claims */
    buf = one_init(ob_tensor_f32("w", 3, (const int64_t[]){1 << 20, 1 << 20, 64}, v, 2), &len);
    import_fails(buf, len, AG_EPARSE, "initializer 'w' of graph 'm' has 2 values in float_data, its shape needs 70368744177664");

    buf = one_init(ob_tensor_raw("w", 77, 1, D3, v, 8), &len);
    import_fails(buf, len, AG_EUNSUPPORTED, "data type 77 of initializer 'w' of graph 'm' is not supported");

    buf = one_init(ob_tensor_raw("w", 1, 2, (const int64_t[]){-2, 3}, v, 8), &len);
    import_fails(buf, len, AG_EPARSE, "initializer 'w' of graph 'm' has dimension 0 of extent -2");

    Onnx__TensorProto *t = ob_tensor("w", 1, 1, D3);
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    Onnx__StringStringEntryProto *e = ob_alloc(sizeof *e);
    onnx__string_string_entry_proto__init(e);
    e->key = ob_str("location");
    e->value = ob_str("x.bin");
    t->n_external_data = 1;
    t->external_data = ob_alloc(sizeof *t->external_data);
    t->external_data[0] = e;
    buf = one_init(t, &len);
    import_fails(buf, len, AG_EUNSUPPORTED, "external data file 'x.bin' for initializer 'w' of graph 'm' is not supported");

    Onnx__GraphProto *g = ob_graph("m");
    ob_in(g, ob_vi("x", 1, 1, D3));
    Onnx__SparseTensorProto *sp = ob_alloc(sizeof *sp);
    onnx__sparse_tensor_proto__init(sp);
    sp->values = ob_tensor_f32("sw", 1, (const int64_t[]){1}, v, 1);
    g->n_sparse_initializer = 1;
    g->sparse_initializer = ob_alloc(sizeof *g->sparse_initializer);
    g->sparse_initializer[0] = sp;
    ob_out(g, ob_vi("x", 1, 1, D3));
    buf = ob_pack(g, 13, &len);
    import_fails(buf, len, AG_EUNSUPPORTED, "sparse initializer 'sw' of graph 'm' is not supported");

    /* typed fields of the narrow types and strings convert */
    g = ob_graph("m");
    Onnx__TensorProto *h = ob_tensor("h", 10, 1, (const int64_t[]){2});
    h->n_int32_data = 2;
    h->int32_data = ob_alloc(2 * sizeof(int32_t));
    h->int32_data[0] = 0x3c00;
    h->int32_data[1] = 0xc000;
    ob_init(g, h);
    Onnx__TensorProto *s = ob_tensor("s", 8, 1, (const int64_t[]){2});
    s->n_string_data = 2;
    s->string_data = ob_alloc(2 * sizeof *s->string_data);
    s->string_data[0].data = (uint8_t *)ob_str("ab");
    s->string_data[0].len = 2;
    s->string_data[1].data = (uint8_t *)ob_str("");
    ob_init(g, s);
    ob_out(g, ob_vi("h", 0, -1, NULL));
    ob_out(g, ob_vi("s", 0, -1, NULL));
    buf = ob_pack(g, 13, &len);
    ag_ctx *ctx = agtest_ctx();
    ag_onnx_opts o = plain_opts();
    ag_graph *ig = import_ok(ctx, buf, len, &o);
    const ag_tensor *ht = ag_node_output_desc_c(ig, agtest_find(ig, AG_ROOT, "h"), 0)->value;
    const uint8_t *hb = ht->data;
    assert_int_equal(ht->nbytes, 4);
    assert_true(hb[0] == 0x00 && hb[1] == 0x3c && hb[2] == 0x00 && hb[3] == 0xc0);
    const ag_tensor *st = ag_node_output_desc_c(ig, agtest_find(ig, AG_ROOT, "s"), 0)->value;
    assert_int_equal(st->dtype, AG_DT_STRING);
    assert_string_equal(st->strings[0], "ab");
    assert_string_equal(st->strings[1], "");
    ag_graph_destroy(ig);
    ag_ctx_destroy(ctx);
    ob_pool_free();
}

static void test_import_file(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = ob_pack(if_graph(), 13, &len);
    char path[512];
    snprintf(path, sizeof path, "%s/test_onnx_tmp.onnx", AG_BINARY_DIR);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    fclose(f);
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = NULL;
    ag_onnx_opts o = plain_opts();
    assert_int_equal(ag_onnx_import_file(ctx, path, &o, &g), AG_OK);
    assert_int_not_equal(agtest_find(g, AG_ROOT, "if"), AG_NONE);
    ag_graph_destroy(g);
    remove(path);
    assert_int_equal(ag_onnx_import_file(ctx, path, &o, &g), AG_EIO);
    assert_errmsg(ctx, path);
    ag_ctx_destroy(ctx);
    ob_pool_free();
}

/* ---- OOM ---- */

typedef struct oom_case {
    const uint8_t *buf;
    size_t len;
    bool infer;
} oom_case;

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    const oom_case *c = ud;
    ag_onnx_opts o = ag_onnx_defaults();
    o.infer_shapes = c->infer;
    ag_graph *g = NULL;
    ag_status st = ag_onnx_import(ctx, c->buf, c->len, "oom.onnx", &o, &g);
    if (st == AG_OK)
        assert_non_null(g);
    else
        assert_null(g);
    ag_graph_destroy(g);
    return st;
}

static void test_oom(void **state)
{
    (void)state;
    Onnx__GraphProto *gp = loop_graph(true);
    /* put the nested If model's If node into the same graph for coverage */
    Onnx__GraphProto *nested = nested_graph();
    ob_in(gp, ob_vi("c", 9, 0, NULL));
    ob_in(gp, ob_vi("a", 1, 1, D3));
    ob_add(gp, nested->node[0]);
    ob_out(gp, ob_vi("y", 1, 1, D3));
    Onnx__NodeProto *cn = ob_add(gp, ob_node("Constant", "k", "", "kv"));
    static const float kv[] = {1, 2, 3};
    ob_attr_tensor(cn, "value", ob_tensor_f32("", 1, D3, kv, 3));
    ob_out(gp, ob_vi("kv", 1, 1, D3));
    oom_case c;
    c.buf = ob_pack(gp, 13, &c.len);
    c.infer = false;
    assert_true(AG_TEST_OOM_SWEEP(oom_body, &c) > 10);
    c.infer = true;
    assert_true(AG_TEST_OOM_SWEEP(oom_body, &c) > 10);
    ob_pool_free();
}

/* Loop "outer" whose body runs Loop "inner"; the inner body reads the root
 * value z (captured through both levels) and has a scan output the outer
 * body consumes.  with_extra adds a graph attribute to the outer Loop that
 * reads the root value y, which no body reads. */
static Onnx__GraphProto *nested_loop_graph(bool with_extra)
{
    Onnx__GraphProto *g = ob_graph("m");
    ob_in(g, ob_vi("M", 7, 0, NULL));
    ob_in(g, ob_vi("cond", 9, 0, NULL));
    ob_in(g, ob_vi("v0", 1, 1, D3));
    ob_in(g, ob_vi("z", 1, 1, D3));
    ob_in(g, ob_vi("y", 1, 1, D3));
    Onnx__GraphProto *ib = ob_graph("ib");
    ob_in(ib, ob_vi("j", 7, 0, NULL));
    ob_in(ib, ob_vi("ci", 9, 0, NULL));
    ob_in(ib, ob_vi("w", 1, -1, NULL));
    ob_add(ib, ob_node("Add", "iadd", "w,z", "w2"));
    ob_add(ib, ob_node("Identity", "icond", "ci", "ci2"));
    ob_add(ib, ob_node("Identity", "iscan", "w2", "t"));
    ob_out(ib, ob_vi("ci2", 9, 0, NULL));
    ob_out(ib, ob_vi("w2", 1, 1, D3));
    ob_out(ib, ob_vi("t", 1, 1, D3));
    Onnx__GraphProto *ob = ob_graph("ob");
    ob_in(ob, ob_vi("i", 7, 0, NULL));
    ob_in(ob, ob_vi("c", 9, 0, NULL));
    ob_in(ob, ob_vi("v", 1, -1, NULL));
    Onnx__NodeProto *in = ob_add(ob, ob_node("Loop", "inner", ",c,v", "v2,ts"));
    ob_attr_graph(in, "body", ib);
    ob_add(ob, ob_node("Identity", "ocond", "c", "c2"));
    ob_add(ob, ob_node("ReduceSum", "oscan", "ts", "s"));
    ob_out(ob, ob_vi("c2", 9, 0, NULL));
    ob_out(ob, ob_vi("v2", 1, 1, D3));
    ob_out(ob, ob_vi("s", 1, -1, NULL));
    Onnx__NodeProto *out = ob_add(g, ob_node("Loop", "outer", "M,cond,v0", "vf,sf"));
    ob_attr_graph(out, "body", ob);
    if (with_extra) {
        Onnx__GraphProto *x = ob_graph("x");
        ob_add(x, ob_node("Neg", "xneg", "y", "yn"));
        ob_out(x, ob_vi("yn", 1, 1, D3));
        ob_attr_graph(out, "extra", x);
    }
    ob_add(g, ob_node("Neg", "neg", "vf", "o"));
    ob_out(g, ob_vi("o", 1, 1, D3));
    ob_out(g, ob_vi("sf", 1, -1, NULL));
    return g;
}

/* Input of n fed by src:0, or AG_NONE. */
static uint32_t input_fed_by(const ag_graph *g, ag_node_id n, ag_node_id src)
{
    for (uint32_t i = 0; i < ag_node_num_inputs(g, n); i++)
        if (ag_node_input_src(g, n, i).node == src)
            return i;
    return AG_NONE;
}

static void test_nested_loop_capture(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = ob_pack(nested_loop_graph(false), 13, &len);
    ag_ctx *ctx = agtest_ctx();
    ag_onnx_opts o = plain_opts();
    ag_graph *g = import_ok(ctx, buf, len, &o);
    ag_node_id outer = agtest_find(g, AG_ROOT, "outer");
    ag_sub_id obs = ag_node_sub(g, outer, 1);
    ag_node_id inner = agtest_find(g, obs, "inner");
    ag_sub_id ibs = ag_node_sub(g, inner, 1);
    /* outer: inputs M, cond, iteration, v0, z; outputs M, cond, iteration,
     * vf, z, sf */
    assert_int_equal(ag_node_num_inputs(g, outer), 5);
    assert_int_equal(input_fed_by(g, outer, agtest_find(g, AG_ROOT, "z")), 4);
    assert_int_equal(ag_node_num_outputs(g, outer), 6);
    assert_string_equal(ag_node_output_desc_c(g, outer, 5)->name, "sf");
    assert_src(g, netoutput_of(g, AG_ROOT), 1, outer, 5);
    assert_src(g, agtest_find(g, AG_ROOT, "neg"), 0, outer, 3);
    /* the outer body's z Data feeds the inner While and passes through */
    ag_node_id oz = agtest_find(g, obs, "z");
    assert_int_equal(pni_of_data(g, oz), 4);
    ag_node_id obno = netoutput_of(g, obs);
    assert_int_equal(ag_node_num_inputs(g, obno), 6);
    for (uint32_t k = 0; k < 6; k++)
        assert_int_equal(pni_of_input(g, obno, k), k);
    assert_src(g, obno, 3, inner, 3);
    assert_src(g, obno, 4, oz, 0);
    assert_src(g, obno, 5, agtest_find(g, obs, "oscan"), 0);
    /* the intermediate While passes z through as well; its scan output,
     * read by the outer body, moved to index nin */
    assert_int_equal(ag_node_num_inputs(g, inner), 5);
    assert_int_equal(input_fed_by(g, inner, oz), 4);
    assert_int_equal(attr_int(ag_node_attrs_c(g, inner), "_num_captured"), 1);
    assert_int_equal(ag_node_num_outputs(g, inner), 6);
    assert_string_equal(ag_node_output_desc_c(g, inner, 3)->name, "v2");
    assert_string_equal(ag_node_output_desc_c(g, inner, 4)->name, "");
    assert_int_equal(ag_node_output_nconsumers(g, inner, 4), 0);
    assert_string_equal(ag_node_output_desc_c(g, inner, 5)->name, "ts");
    assert_src(g, agtest_find(g, obs, "oscan"), 0, inner, 5);
    ag_node_id iz = agtest_find(g, ibs, "z");
    assert_int_equal(pni_of_data(g, iz), 4);
    assert_src(g, agtest_find(g, ibs, "iadd"), 1, iz, 0);
    ag_node_id ibno = netoutput_of(g, ibs);
    assert_int_equal(ag_node_num_inputs(g, ibno), 6);
    for (uint32_t k = 0; k < 6; k++)
        assert_int_equal(pni_of_input(g, ibno, k), k);
    assert_src(g, ibno, 4, iz, 0);
    assert_src(g, ibno, 5, agtest_find(g, ibs, "iscan"), 0);
    assert_int_equal(ag_graph_verify(g), AG_OK);
    ag_graph_destroy(g);

    /* inferred: captured outputs keep the input's type; scan outputs stack */
    ag_onnx_opts io = ag_onnx_defaults();
    io.use_declared = false;
    g = import_ok(ctx, buf, len, &io);
    outer = agtest_find(g, AG_ROOT, "outer");
    inner = agtest_find(g, ag_node_sub(g, outer, 1), "inner");
    assert_int_equal(ag_node_output_desc_c(g, outer, 4)->dtype, AG_DT_F32);
    assert_int_equal(ag_node_output_desc_c(g, outer, 4)->rank, 1);
    assert_int_equal(ag_node_output_desc_c(g, outer, 4)->dims[0], 3);
    assert_int_equal(ag_node_output_desc_c(g, inner, 4)->rank, 1);
    assert_int_equal(ag_node_output_desc_c(g, inner, 4)->dims[0], 3);
    const ag_tensor_desc *ts = ag_node_output_desc_c(g, inner, 5);
    assert_int_equal(ts->dtype, AG_DT_F32);
    assert_int_equal(ts->rank, 2);
    assert_int_equal(ts->dims[1], 3);
    /* s = ReduceSum(ts) keeps its dims: [1,1]; stacked: [?,1,1] */
    const ag_tensor_desc *sf = ag_node_output_desc_c(g, outer, 5);
    assert_int_equal(sf->dtype, AG_DT_F32);
    assert_int_equal(sf->rank, 3);
    assert_int_equal(sf->dims[1], 1);
    assert_int_equal(sf->dims[2], 1);
    ag_graph_destroy(g);

    /* a value only an extra graph attribute reads is carried by the body too */
    buf = ob_pack(nested_loop_graph(true), 13, &len);
    g = import_ok(ctx, buf, len, &o);
    outer = agtest_find(g, AG_ROOT, "outer");
    obs = ag_node_sub(g, outer, 1);
    assert_int_equal(ag_node_num_subs(g, outer), 3);
    assert_int_equal(ag_node_num_inputs(g, outer), 6);
    assert_int_equal(input_fed_by(g, outer, agtest_find(g, AG_ROOT, "y")), 5);
    assert_int_equal(attr_int(ag_node_attrs_c(g, outer), "_num_captured"), 2);
    assert_int_equal(ag_node_num_outputs(g, outer), 7);
    assert_string_equal(ag_node_output_desc_c(g, outer, 6)->name, "sf");
    ag_node_id oy = agtest_find(g, obs, "y");
    assert_string_equal(ag_node_type(g, oy), "Data");
    assert_int_equal(pni_of_data(g, oy), 5);
    obno = netoutput_of(g, obs);
    assert_int_equal(ag_node_num_inputs(g, obno), 7);
    assert_src(g, obno, 5, oy, 0);
    assert_int_equal(pni_of_input(g, obno, 5), 5);
    assert_int_equal(pni_of_input(g, obno, 6), 6);
    assert_src(g, obno, 6, agtest_find(g, obs, "oscan"), 0);
    assert_int_equal(ag_graph_verify(g), AG_OK);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);

    oom_case c;
    c.buf = buf;
    c.len = len;
    c.infer = true;
    assert_true(AG_TEST_OOM_SWEEP(oom_body, &c) > 10);
    ob_pool_free();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_mapping), cmocka_unit_test(test_custom_domain_attrs),
        cmocka_unit_test(test_if),            cmocka_unit_test(test_if_input_value),
        cmocka_unit_test(test_loop),
        cmocka_unit_test(test_scan),          cmocka_unit_test(test_nested_capture),
        cmocka_unit_test(test_declared),      cmocka_unit_test(test_error_bytes),
        cmocka_unit_test(test_error_graph),   cmocka_unit_test(test_error_tensors),
        cmocka_unit_test(test_import_file),   cmocka_unit_test(test_oom),
        cmocka_unit_test(test_nested_loop_capture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
