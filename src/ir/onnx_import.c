/* ONNX import: maps a ModelProto onto the graph IR (DESIGN.md "The IR"; the
 * exact mapping is documented in docs/onnx.md).  Initializers and Constant
 * become Const, graph inputs Data, outputs one NetOutput; If, Loop and Scan
 * become If, While and Scan with subgraphs; values a subgraph reads from an
 * enclosing graph become explicit inputs of the control node.  Then bound
 * input shapes, shape inference and the model's declared types fill descs. */
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include "ir/onnx_internal.h"

#define PNI "_parent_node_index"

/* Producer of a value: node and output index. */
typedef struct imp_val {
    ag_node_id node;
    uint32_t out;
} imp_val;

/* Names visible in one graph.  A subgraph's scope has its enclosing graph's
 * as parent; caps is shared by all subgraphs of one control node so that a
 * value captured by both If branches becomes a single input. */
typedef struct scope {
    struct scope *parent;
    ag_sub_id sub;
    ag_node_id ctrl;   /* control node owning sub; AG_NONE for the root */
    ag_strmap *caps;   /* captured name -> input index of ctrl */
    ag_strmap names;   /* value name -> index into vals */
    ag_vec vals;       /* imp_val */
    const char *gname; /* graph name for messages */
} scope;

/* Which GraphProto declared the values of a subgraph (for use_declared). */
typedef struct sub_decl {
    ag_sub_id sub;
    const Onnx__GraphProto *gp;
} sub_decl;

typedef struct imp {
    ag_ctx *ctx;
    ag_graph *g;
    const char *file;
    int64_t opset;     /* default-domain opset; 0 when not imported */
    ag_arena scratch;  /* generated names, strings for messages and attributes */
    ag_vec decls;      /* sub_decl */
} imp;

/* How a graph's inputs and outputs bind to its control node. */
typedef enum gmode { G_ROOT, G_GENERIC, G_IF, G_SCAN, G_LOOP_BODY } gmode;
typedef struct gbind {
    gmode mode;
    uint32_t in_off; /* G_SCAN: 1 for Scan-8, whose input 0 is sequence_lens */
    uint32_t nin;    /* control node's inputs / outputs before captures */
    uint32_t nout;
} gbind;

typedef enum node_kind { K_OTHER, K_CONST, K_IF, K_LOOP, K_SCAN } node_kind;

/* ---- small helpers ---- */

/* Formats into the scratch arena; NULL on OOM. */
static char *im_fmt(imp *im, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static char *im_fmt(imp *im, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = ag_arena_alloc(&im->scratch, (size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static const char *str_or(const char *s, const char *dflt)
{
    return s && *s ? s : dflt;
}

/* A node name free in subgraph s: want itself when free, else base, base_1, ... */
static ag_status unique_node_name(imp *im, ag_sub_id s, const char *want, const char *base, const char **out)
{
    if (want && *want && ag_sub_find_node(im->g, s, want) == AG_NONE) {
        *out = want;
        return AG_OK;
    }
    const char *name = base;
    for (uint32_t k = 1; ag_sub_find_node(im->g, s, name) != AG_NONE; k++) {
        name = im_fmt(im, "%s_%" PRIu32, base, k);
        if (!name)
            return AG_OOM(im->ctx);
    }
    *out = name;
    return AG_OK;
}

static ag_status add_node(imp *im, ag_sub_id s, const char *type, const char *want, const char *base,
                          uint32_t nin, uint32_t nout, ag_node_id *out)
{
    const char *name = NULL;
    AG_TRY(unique_node_name(im, s, want, base, &name));
    return ag_graph_add_node(im->g, s, type, name, nin, nout, out);
}

static ag_status set_desc_type(ag_graph *g, ag_tensor_desc *d, const char *name, ag_dtype dt, int32_t rank,
                               const int64_t *dims)
{
    if (name)
        AG_TRY(ag_desc_set_name(g, d, name));
    d->dtype = dt;
    return ag_desc_set_shape(g, d, rank, dims);
}

/* Makes n a Const holding t: attribute "value" and the value on output 0. */
static ag_status set_const(ag_graph *g, ag_node_id n, const ag_tensor *t)
{
    ag_attr a = {.name = "value", .kind = AG_ATTR_TENSOR, .count = 1};
    a.v.t = t;
    AG_TRY(ag_attrs_set(g, ag_node_attrs(g, n), &a));
    ag_tensor_desc *d = ag_node_output_desc(g, n, 0);
    AG_TRY(set_desc_type(g, d, NULL, t->dtype, t->rank, t->dims));
    return ag_desc_set_value(g, d, t);
}

/* A scalar Const of a fixed-size type holding bits (little-endian). */
static ag_status add_const_scalar(imp *im, ag_sub_id s, const char *base, ag_dtype dt, uint64_t bits,
                                  ag_node_id *out)
{
    uint8_t bytes[8];
    unsigned w = ag_dtype_bits(dt) / 8;
    for (unsigned k = 0; k < w; k++)
        bytes[k] = (uint8_t)(bits >> (8 * k));
    ag_tensor t = {.dtype = dt, .rank = 0, .nbytes = w, .data = bytes};
    const ag_tensor *gt;
    AG_TRY(ag_graph_make_tensor(im->g, &t, &gt));
    AG_TRY(add_node(im, s, "Const", NULL, base, 0, 1, out));
    AG_TRY(ag_desc_set_name(im->g, ag_node_output_desc(im->g, *out, 0), ag_node_name(im->g, *out)));
    return set_const(im->g, *out, gt);
}

/* ---- scopes ---- */

static void scope_init(scope *sc, scope *parent, ag_sub_id sub, ag_node_id ctrl, ag_strmap *caps,
                       const char *gname)
{
    memset(sc, 0, sizeof *sc);
    sc->parent = parent;
    sc->sub = sub;
    sc->ctrl = ctrl;
    sc->caps = caps;
    sc->gname = gname;
    ag_strmap_init(&sc->names);
}

static void scope_free(ag_ctx *ctx, scope *sc)
{
    ag_strmap_free(ctx, &sc->names);
    ag_vec_free(ctx, &sc->vals, sizeof(imp_val));
}

/* Defines name in sc (names outlive the maps: they belong to the model). */
static ag_status define(imp *im, scope *sc, const char *name, ag_node_id n, uint32_t o, const char *by)
{
    uint32_t k;
    if (ag_strmap_get(&sc->names, name, &k))
        return AG_ERR(im->ctx, AG_EPARSE, "%s: value '%s' is defined twice in graph '%s' (again by %s)",
                      im->file, name, sc->gname, by ? by : "?");
    imp_val v = {n, o};
    if (ag_vec_push(im->ctx, &sc->vals, sizeof v, &v) != AG_OK ||
        ag_strmap_put(im->ctx, &sc->names, name, sc->vals.len - 1) != AG_OK)
        return AG_OOM(im->ctx);
    return AG_OK;
}

/* Finds the producer of name seen from sc.  A name from an enclosing graph
 * is captured: the control node gets a new input fed by the outer producer
 * (itself captured level by level), and sc a Data bound to that input. */
static ag_status resolve(imp *im, scope *sc, const char *name, imp_val *out, bool *found)
{
    uint32_t k;
    if (ag_strmap_get(&sc->names, name, &k)) {
        *out = AG_VEC_AT(sc->vals, imp_val, k);
        *found = true;
        return AG_OK;
    }
    *found = false;
    if (!sc->parent)
        return AG_OK;
    imp_val pv;
    AG_TRY(resolve(im, sc->parent, name, &pv, found));
    if (!*found)
        return AG_OK;
    ag_graph *g = im->g;
    uint32_t idx;
    if (!ag_strmap_get(sc->caps, name, &idx)) {
        idx = ag_node_num_inputs(g, sc->ctrl);
        AG_TRY(ag_node_set_io_count(g, sc->ctrl, idx + 1, ag_node_num_outputs(g, sc->ctrl)));
        AG_TRY(ag_graph_add_edge(g, pv.node, pv.out, sc->ctrl, idx));
        if (ag_strmap_put(im->ctx, sc->caps, name, idx) != AG_OK)
            return AG_OOM(im->ctx);
    }
    ag_node_id d;
    AG_TRY(add_node(im, sc->sub, "Data", name, "captured", 0, 1, &d));
    AG_TRY(ag_attrs_set_int(g, ag_node_attrs(g, d), PNI, idx));
    ag_tensor_desc *dd = ag_node_output_desc(g, d, 0);
    AG_TRY(ag_desc_copy_type(g, dd, ag_node_output_desc_c(g, pv.node, pv.out)));
    AG_TRY(ag_desc_set_name(g, dd, name));
    AG_TRY(define(im, sc, name, d, 0, "a captured value"));
    *out = (imp_val){d, 0};
    *found = true;
    return AG_OK;
}

/* ---- attributes ---- */

static ag_status bytes_str(imp *im, const ProtobufCBinaryData *b, const char *what, const char **out)
{
    if (b->len && memchr(b->data, 0, b->len))
        return AG_ERR(im->ctx, AG_EUNSUPPORTED, "%s: %s contains a NUL byte", im->file, what);
    char *s = ag_arena_strndup(&im->scratch, b->len ? (const char *)b->data : "", b->len);
    if (!s)
        return AG_OOM(im->ctx);
    *out = s;
    return AG_OK;
}

/* The attribute's type; files from before types were recorded leave it
 * unset, then the field that holds a value tells. */
static Onnx__AttributeProto__AttributeType attr_type(const Onnx__AttributeProto *a)
{
    if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
        return a->type;
    if (a->has_f)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    if (a->has_i)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    if (a->has_s)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    if (a->t)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    if (a->g)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    if (a->n_floats)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    if (a->n_ints)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    if (a->n_strings)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
    if (a->n_tensors)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS;
    if (a->n_graphs)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS;
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

static bool is_graph_attr(const Onnx__AttributeProto *a)
{
    Onnx__AttributeProto__AttributeType t = attr_type(a);
    return t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH || t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS;
}

/* Copies one non-graph attribute of ONNX node n (op type op) onto the node. */
static ag_status set_attr(imp *im, ag_node_id n, const char *op, const Onnx__AttributeProto *a)
{
    ag_graph *g = im->g;
    const char *nname = ag_node_name(g, n);
    if (!a->name || !*a->name)
        return AG_ERR(im->ctx, AG_EPARSE, "%s: node '%s' (%s) has an attribute without a name", im->file, nname,
                      op);
    const char *what = im_fmt(im, "attribute '%s' of node '%s' (%s)", a->name, nname, op);
    if (!what)
        return AG_OOM(im->ctx);
    if (a->n_floats > UINT32_MAX || a->n_ints > UINT32_MAX || a->n_strings > UINT32_MAX ||
        a->n_tensors > UINT32_MAX)
        return AG_ERR(im->ctx, AG_EUNSUPPORTED, "%s: %s is too long", im->file, what);
    ag_attr at = {.name = a->name, .count = 1};
    switch (attr_type(a)) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        at.kind = AG_ATTR_FLOAT;
        at.v.f = a->f;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        at.kind = AG_ATTR_INT;
        at.v.i = a->i;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        at.kind = AG_ATTR_STRING;
        AG_TRY(bytes_str(im, &a->s, what, &at.v.s));
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
        if (!a->t)
            return AG_ERR(im->ctx, AG_EPARSE, "%s: %s has no tensor", im->file, what);
        at.kind = AG_ATTR_TENSOR;
        AG_TRY(ag_onnx_tensor(g, im->file, what, a->t, &at.v.t));
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        at.kind = AG_ATTR_FLOATS;
        at.count = (uint32_t)a->n_floats;
        at.v.fs = a->floats;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        at.kind = AG_ATTR_INTS;
        at.count = (uint32_t)a->n_ints;
        at.v.is = a->ints;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
        at.kind = AG_ATTR_STRINGS;
        at.count = (uint32_t)a->n_strings;
        const char **ss = ag_arena_alloc(&im->scratch, (a->n_strings ? a->n_strings : 1) * sizeof *ss);
        if (!ss)
            return AG_OOM(im->ctx);
        for (size_t k = 0; k < a->n_strings; k++)
            AG_TRY(bytes_str(im, &a->strings[k], what, &ss[k]));
        at.v.ss = ss;
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS: {
        at.kind = AG_ATTR_TENSORS;
        at.count = (uint32_t)a->n_tensors;
        const ag_tensor **ts = ag_arena_alloc(&im->scratch, (a->n_tensors ? a->n_tensors : 1) * sizeof *ts);
        if (!ts)
            return AG_OOM(im->ctx);
        for (size_t k = 0; k < a->n_tensors; k++) {
            if (!a->tensors[k])
                return AG_ERR(im->ctx, AG_EPARSE, "%s: %s has an empty tensor", im->file, what);
            AG_TRY(ag_onnx_tensor(g, im->file, what, a->tensors[k], &ts[k]));
        }
        at.v.ts = ts;
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
        return AG_OK; /* become subgraphs */
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS:
        return AG_ERR(im->ctx, AG_EUNSUPPORTED, "%s: sparse tensor %s is not supported", im->file, what);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS:
        return AG_ERR(im->ctx, AG_EUNSUPPORTED, "%s: type-valued %s is not supported", im->file, what);
    default:
        return AG_ERR(im->ctx, AG_EPARSE, "%s: %s has no value or an unknown type (%d)", im->file, what,
                      (int)a->type);
    }
    return ag_attrs_set(g, ag_node_attrs(g, n), &at);
}

static const Onnx__AttributeProto *find_attr(const Onnx__NodeProto *np, const char *name)
{
    for (size_t k = 0; k < np->n_attribute; k++) {
        const Onnx__AttributeProto *a = np->attribute[k];
        if (a && a->name && strcmp(a->name, name) == 0)
            return a;
    }
    return NULL;
}

static const Onnx__GraphProto *graph_attr(const Onnx__NodeProto *np, const char *name)
{
    const Onnx__AttributeProto *a = find_attr(np, name);
    return a && attr_type(a) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH ? a->g : NULL;
}

/* ---- Constant ---- */

/* A 1-D or scalar tensor of fixed-size elements from host values. */
static ag_status small_tensor(imp *im, ag_dtype dt, bool scalar, const void *vals, size_t n, unsigned w,
                              const ag_tensor **out)
{
    if (n > (size_t)AG_MAX_DIM)
        return AG_ERR(im->ctx, AG_EUNSUPPORTED, "%s: constant list too long", im->file);
    uint8_t *buf = ag_arena_alloc(&im->scratch, n ? n * w : 1);
    int64_t *dims = ag_arena_alloc(&im->scratch, sizeof *dims);
    if (!buf || !dims)
        return AG_OOM(im->ctx);
    const uint8_t *src = vals;
    for (size_t k = 0; k < n; k++) {
        uint64_t v = 0;
        if (w == 4) {
            uint32_t u;
            memcpy(&u, src + 4 * k, 4);
            v = u;
        } else {
            memcpy(&v, src + 8 * k, 8);
        }
        for (unsigned b = 0; b < w; b++)
            buf[w * k + b] = (uint8_t)(v >> (8 * b));
    }
    dims[0] = (int64_t)n;
    ag_tensor t = {.dtype = dt, .rank = scalar ? 0 : 1, .dims = dims, .nbytes = n * w, .data = buf};
    return ag_graph_make_tensor(im->g, &t, out);
}

static ag_status string_tensor(imp *im, bool scalar, const ProtobufCBinaryData *vals, size_t n,
                               const char *what, const ag_tensor **out)
{
    const char **ss = ag_arena_alloc(&im->scratch, (n ? n : 1) * sizeof *ss);
    int64_t *dims = ag_arena_alloc(&im->scratch, sizeof *dims);
    if (!ss || !dims)
        return AG_OOM(im->ctx);
    for (size_t k = 0; k < n; k++)
        AG_TRY(bytes_str(im, &vals[k], what, &ss[k]));
    dims[0] = (int64_t)n;
    ag_tensor t = {.dtype = AG_DT_STRING, .rank = scalar ? 0 : 1, .dims = dims, .strings = ss};
    return ag_graph_make_tensor(im->g, &t, out);
}

/* The value of a Constant node, from whichever value_* attribute it has. */
static ag_status constant_value(imp *im, const Onnx__NodeProto *np, ag_node_id n, const ag_tensor **out)
{
    const char *nname = ag_node_name(im->g, n);
    for (size_t k = 0; k < np->n_attribute; k++) {
        const Onnx__AttributeProto *a = np->attribute[k];
        if (!a || !a->name)
            continue;
        const char *what = im_fmt(im, "attribute '%s' of node '%s' (Constant)", a->name, nname);
        if (!what)
            return AG_OOM(im->ctx);
        Onnx__AttributeProto__AttributeType t = attr_type(a);
        if (strcmp(a->name, "value") == 0 && t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR && a->t)
            return ag_onnx_tensor(im->g, im->file, what, a->t, out);
        if (strcmp(a->name, "value_float") == 0 && t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)
            return small_tensor(im, AG_DT_F32, true, &a->f, 1, 4, out);
        if (strcmp(a->name, "value_floats") == 0 && t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS)
            return small_tensor(im, AG_DT_F32, false, a->floats, a->n_floats, 4, out);
        if (strcmp(a->name, "value_int") == 0 && t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
            return small_tensor(im, AG_DT_I64, true, &a->i, 1, 8, out);
        if (strcmp(a->name, "value_ints") == 0 && t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
            return small_tensor(im, AG_DT_I64, false, a->ints, a->n_ints, 8, out);
        if (strcmp(a->name, "value_string") == 0 && t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
            return string_tensor(im, true, &a->s, 1, what, out);
        if (strcmp(a->name, "value_strings") == 0 && t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS)
            return string_tensor(im, false, a->strings, a->n_strings, what, out);
        if (strcmp(a->name, "sparse_value") == 0)
            return AG_ERR(im->ctx, AG_EUNSUPPORTED, "%s: sparse %s is not supported", im->file, what);
    }
    return AG_ERR(im->ctx, AG_EPARSE, "%s: node '%s' (Constant) has no value attribute", im->file, nname);
}

/* ---- graphs ---- */

static ag_status build_graph(imp *im, scope *sc, const Onnx__GraphProto *gp, const gbind *b);

static int64_t in_pni(const gbind *b, size_t i)
{
    switch (b->mode) {
    case G_ROOT:
    case G_IF:
        return -1;
    case G_LOOP_BODY: /* body (iteration, cond, v...) -> While (M, cond, iteration, v...) */
        return i == 0 ? 2 : i == 1 ? 1 : (int64_t)i + 1;
    default:
        return i + b->in_off < b->nin ? (int64_t)(i + b->in_off) : -1;
    }
}

static int64_t out_pni(const gbind *b, size_t j)
{
    switch (b->mode) {
    case G_ROOT:
        return -1;
    case G_LOOP_BODY: /* body (cond, v..., scan...) -> While (M, cond, iteration, v..., scan...);
                       * loop_pass_captures moves the scan outputs behind the captures */
        return j == 0 ? 1 : (int64_t)j + 2;
    default:
        return j < b->nout ? (int64_t)j : -1;
    }
}

/* Creates subgraph attr of control node ctrl from gp and builds it. */
static ag_status build_sub(imp *im, scope *psc, ag_node_id ctrl, ag_strmap *caps, const char *attr,
                           const Onnx__GraphProto *gp, const gbind *b)
{
    const char *base = im_fmt(im, "%s/%s", ag_node_name(im->g, ctrl), attr);
    if (!base)
        return AG_OOM(im->ctx);
    const char *name = base;
    for (uint32_t k = 1; ag_graph_find_sub(im->g, name) != AG_NONE; k++)
        if (!(name = im_fmt(im, "%s_%" PRIu32, base, k)))
            return AG_OOM(im->ctx);
    ag_sub_id s;
    AG_TRY(ag_graph_add_subgraph(im->g, ctrl, name, &s));
    scope sc;
    scope_init(&sc, psc, s, ctrl, caps, ag_sub_name(im->g, s));
    ag_status st = build_graph(im, &sc, gp, b);
    scope_free(im->ctx, &sc);
    return st;
}

/* While's cond subgraph: keep going while iteration < M and cond. */
static ag_status build_loop_cond(imp *im, ag_node_id wh)
{
    ag_graph *g = im->g;
    const char *name = im_fmt(im, "%s/cond", ag_node_name(g, wh));
    if (!name)
        return AG_OOM(im->ctx);
    for (uint32_t k = 1; ag_graph_find_sub(g, name) != AG_NONE; k++)
        if (!(name = im_fmt(im, "%s/cond_%" PRIu32, ag_node_name(g, wh), k)))
            return AG_OOM(im->ctx);
    ag_sub_id s;
    AG_TRY(ag_graph_add_subgraph(g, wh, name, &s));
    static const char *const dnames[3] = {"trip_count", "cond", "iteration"};
    static const ag_dtype dtypes[3] = {AG_DT_I64, AG_DT_BOOL, AG_DT_I64};
    ag_node_id d[3], lt, andn, no;
    for (uint32_t k = 0; k < 3; k++) {
        AG_TRY(ag_graph_add_node(g, s, "Data", dnames[k], 0, 1, &d[k]));
        AG_TRY(ag_attrs_set_int(g, ag_node_attrs(g, d[k]), PNI, k));
        AG_TRY(set_desc_type(g, ag_node_output_desc(g, d[k], 0), dnames[k], dtypes[k], 0, NULL));
    }
    AG_TRY(ag_graph_add_node(g, s, "Less", "below_trip_count", 2, 1, &lt));
    AG_TRY(ag_graph_add_node(g, s, "And", "keep_going", 2, 1, &andn));
    AG_TRY(ag_graph_add_node(g, s, "NetOutput", "NetOutput", 1, 0, &no));
    AG_TRY(set_desc_type(g, ag_node_output_desc(g, lt, 0), "below_trip_count", AG_DT_BOOL, 0, NULL));
    AG_TRY(set_desc_type(g, ag_node_output_desc(g, andn, 0), "keep_going", AG_DT_BOOL, 0, NULL));
    AG_TRY(ag_graph_add_edge(g, d[2], 0, lt, 0));
    AG_TRY(ag_graph_add_edge(g, d[0], 0, lt, 1));
    AG_TRY(ag_graph_add_edge(g, lt, 0, andn, 0));
    AG_TRY(ag_graph_add_edge(g, d[1], 0, andn, 1));
    AG_TRY(ag_graph_add_edge(g, andn, 0, no, 0));
    AG_TRY(ag_desc_set_name(g, ag_node_input_desc(g, no, 0), "keep_going"));
    sub_decl sd = {s, NULL};
    return ag_vec_push(im->ctx, &im->decls, sizeof sd, &sd) == AG_OK ? AG_OK : AG_OOM(im->ctx);
}

/* Whether dom (NULL, "" or "ai.onnx") names the default ONNX domain. */
static bool onnx_domain(const char *dom)
{
    return !dom || !*dom || strcmp(dom, "ai.onnx") == 0;
}

/* Default-domain ops whose output is a sequence or an optional: the IR has
 * tensors only, and passing such values off as tensors would mislead every
 * memory decision made on them. */
static const char *non_tensor_output(const Onnx__NodeProto *np)
{
    static const char *const seq_ops[] = {"SequenceConstruct", "SequenceEmpty", "SequenceInsert",
                                          "SequenceErase", "SplitToSequence", "SequenceMap"};
    if (!onnx_domain(np->domain))
        return NULL;
    for (size_t k = 0; k < sizeof seq_ops / sizeof seq_ops[0]; k++)
        if (strcmp(np->op_type, seq_ops[k]) == 0)
            return "a sequence";
    if (strcmp(np->op_type, "Optional") == 0)
        return "an optional";
    return NULL;
}

/* Whether np's op type would name one of the IR's own structural nodes,
 * which the importer builds from the file's structure: graph inputs
 * (Data), outputs (NetOutput), constants (Const) and control flow (While
 * from Loop; If and Scan from the ONNX ops of those names, so only those
 * are theirs).  Taken as a node type they would make a second output node
 * or a graph input with a producer, or control flow without subgraphs. */
static bool reserved_type(const Onnx__NodeProto *np)
{
    static const char *const always[] = {"Data", "NetOutput", "Const", "While"};
    for (size_t k = 0; k < sizeof always / sizeof always[0]; k++)
        if (strcmp(np->op_type, always[k]) == 0)
            return true;
    return !onnx_domain(np->domain) && (strcmp(np->op_type, "If") == 0 || strcmp(np->op_type, "Scan") == 0);
}

static node_kind kind_of(const Onnx__NodeProto *np)
{
    if (!onnx_domain(np->domain))
        return K_OTHER;
    if (strcmp(np->op_type, "Constant") == 0)
        return K_CONST;
    if (strcmp(np->op_type, "If") == 0)
        return K_IF;
    if (strcmp(np->op_type, "Loop") == 0)
        return K_LOOP;
    if (strcmp(np->op_type, "Scan") == 0)
        return K_SCAN;
    return K_OTHER;
}

/* First pass over a graph's nodes: creates node k and defines its outputs. */
static ag_status create_node(imp *im, scope *sc, const Onnx__NodeProto *np, size_t k, ag_node_id *out)
{
    ag_graph *g = im->g;
    if (!np || !np->op_type || !*np->op_type)
        return AG_ERR(im->ctx, AG_EPARSE, "%s: node %zu ('%s') of graph '%s' has no op_type", im->file, k,
                      np && np->name ? np->name : "", sc->gname);
    const char *op = np->op_type;
    if (reserved_type(np))
        return AG_ERR(im->ctx, AG_EUNSUPPORTED,
                      "%s: node '%s' (%s, domain '%s') of graph '%s': the op type names a node of aliasguard's own "
                      "graph structure (graph inputs, outputs, constants, control flow) and cannot be imported "
                      "as an operator",
                      im->file, str_or(np->name, "?"), op, np->domain ? np->domain : "", sc->gname);
    const char *nt = non_tensor_output(np);
    if (nt)
        return AG_ERR(im->ctx, AG_EUNSUPPORTED, "%s: node '%s' (%s) of graph '%s' produces %s value, which is not supported",
                      im->file, str_or(np->name, "?"), op, sc->gname, nt);
    if (np->n_input > UINT32_MAX / 4 || np->n_output > UINT32_MAX / 4)
        return AG_ERR(im->ctx, AG_EUNSUPPORTED, "%s: node '%s' (%s) has too many inputs or outputs", im->file,
                      str_or(np->name, "?"), op);
    node_kind kind = kind_of(np);
    const char *type = op;
    uint32_t nin = (uint32_t)np->n_input, nout = (uint32_t)np->n_output, oshift = 0;
    const char *nname = str_or(np->name, op);
    switch (kind) {
    case K_CONST:
        if (np->n_input || np->n_output != 1)
            return AG_ERR(im->ctx, AG_EPARSE, "%s: node '%s' (Constant) must have no input and one output",
                          im->file, nname);
        type = "Const";
        break;
    case K_IF:
        break;
    case K_SCAN:
        break;
    case K_LOOP: {
        const Onnx__GraphProto *body = graph_attr(np, "body");
        if (!body)
            return AG_ERR(im->ctx, AG_EPARSE, "%s: node '%s' (Loop) has no graph attribute 'body'", im->file,
                          nname);
        if (np->n_input < 2 || body->n_input != np->n_input)
            return AG_ERR(im->ctx, AG_EPARSE,
                          "%s: node '%s' (Loop) has %zu inputs but its body %zu (the body takes the "
                          "iteration number, the condition and each loop-carried value)",
                          im->file, nname, np->n_input, body->n_input);
        size_t ncarried = np->n_input - 2;
        if (body->n_output < 1 + ncarried || np->n_output > body->n_output - 1 ||
            body->n_output > UINT32_MAX / 4)
            return AG_ERR(im->ctx, AG_EPARSE,
                          "%s: node '%s' (Loop) has %zu outputs and %zu loop-carried values but its body "
                          "%zu outputs (the body returns the condition, each loop-carried value and the "
                          "scan outputs)",
                          im->file, nname, np->n_output, ncarried, body->n_output);
        type = "While";
        nin = (uint32_t)ncarried + 3;
        nout = (uint32_t)body->n_output + 2;
        oshift = 3;
        break;
    }
    case K_OTHER:
        break;
    }
    const char *base = im_fmt(im, "%s_%zu", op, k);
    if (!base)
        return AG_OOM(im->ctx);
    AG_TRY(add_node(im, sc->sub, type, np->name, base, nin, nout, out));
    ag_node_id n = *out;
    if (!onnx_domain(np->domain))
        AG_TRY(ag_node_set_domain(g, n, np->domain));
    for (size_t j = 0; j < np->n_output; j++) {
        const char *oname = np->output[j];
        if (!oname || !*oname)
            continue;
        AG_TRY(ag_desc_set_name(g, ag_node_output_desc(g, n, (uint32_t)j + oshift), oname));
        char by[160];
        snprintf(by, sizeof by, "node '%s' (%s) output %zu", ag_node_name(g, n), op, j);
        AG_TRY(define(im, sc, oname, n, (uint32_t)j + oshift, by));
    }
    if (kind == K_CONST) {
        const ag_tensor *t;
        AG_TRY(constant_value(im, np, n, &t));
        AG_TRY(set_const(g, n, t));
    }
    return AG_OK;
}

/* Loop -> While: the parent-side trip count, condition and iteration counter. */
static ag_status connect_loop_extras(imp *im, scope *sc, const Onnx__NodeProto *np, ag_node_id wh)
{
    ag_graph *g = im->g;
    const char *wname = ag_node_name(g, wh);
    ag_node_id c;
    const char *base;
    if (!np->input[0] || !*np->input[0]) {
        if (!(base = im_fmt(im, "%s/trip_count", wname)))
            return AG_OOM(im->ctx);
        AG_TRY(add_const_scalar(im, sc->sub, base, AG_DT_I64, (uint64_t)INT64_MAX, &c));
        AG_TRY(ag_graph_add_edge(g, c, 0, wh, 0));
    }
    if (!np->input[1] || !*np->input[1]) {
        if (!(base = im_fmt(im, "%s/cond_init", wname)))
            return AG_OOM(im->ctx);
        AG_TRY(add_const_scalar(im, sc->sub, base, AG_DT_BOOL, 1, &c));
        AG_TRY(ag_graph_add_edge(g, c, 0, wh, 1));
    }
    if (!(base = im_fmt(im, "%s/iteration_init", wname)))
        return AG_OOM(im->ctx);
    AG_TRY(add_const_scalar(im, sc->sub, base, AG_DT_I64, 0, &c));
    AG_TRY(ag_graph_add_edge(g, c, 0, wh, 2));
    return ag_attrs_set_string(g, ag_node_attrs(g, wh), "original_type", "Loop");
}

/* Moves While output from to output to (free): its consumers, its descriptor
 * and the scope entry naming it; from is left blank. */
static ag_status move_loop_output(imp *im, scope *sc, ag_node_id wh, uint32_t from, uint32_t to)
{
    ag_graph *g = im->g;
    while (ag_node_output_nconsumers(g, wh, from)) {
        ag_port c = ag_node_output_consumer(g, wh, from, 0);
        AG_TRY(ag_graph_remove_edge(g, wh, from, c.node, c.index));
        AG_TRY(ag_graph_add_edge(g, wh, to, c.node, c.index));
    }
    ag_tensor_desc *fd = ag_node_output_desc(g, wh, from);
    AG_TRY(ag_desc_copy_type(g, ag_node_output_desc(g, wh, to), fd));
    AG_TRY(ag_desc_set_name(g, fd, NULL));
    AG_TRY(ag_desc_set_value(g, fd, NULL));
    AG_TRY(ag_desc_set_shape(g, fd, AG_RANK_UNKNOWN, NULL));
    fd->dtype = AG_DT_UNDEFINED;
    for (uint32_t k = 0; k < sc->vals.len; k++) {
        imp_val *v = &AG_VEC_AT(sc->vals, imp_val, k);
        if (v->node == wh && v->out == from)
            v->out = to;
    }
    return AG_OK;
}

/* Connects src:o to input i of the body NetOutput no as parent output i. */
static ag_status loop_body_result(imp *im, ag_node_id no, uint32_t i, ag_port src, const char *name)
{
    ag_graph *g = im->g;
    ag_tensor_desc *d = ag_node_input_desc(g, no, i);
    if (src.node != AG_NONE) {
        AG_TRY(ag_graph_add_edge(g, src.node, src.index, no, i));
        /* i may be a slot just vacated: refresh the copied type. */
        AG_TRY(ag_desc_copy_type(g, d, ag_node_output_desc_c(g, src.node, src.index)));
    }
    AG_TRY(ag_desc_set_name(g, d, name));
    return ag_attrs_set_int(g, d->attrs, PNI, i);
}

/* Loop -> While, once the subgraphs are built and the captures known: a
 * While carries every input, output i being the final value of input i, so
 * each captured value passes through the body unchanged and leaves as output
 * 3+N+c; the scan outputs move behind them and start at the While's input
 * count.  (Left where they were, scan output k would share its index with
 * captured input k, and an alias rule would pair the two.) */
static ag_status loop_pass_captures(imp *im, scope *sc, ag_node_id wh, uint32_t ncarried)
{
    ag_graph *g = im->g;
    uint32_t first = 3 + ncarried; /* first captured input, first scan output so far */
    uint32_t nin = ag_node_num_inputs(g, wh), nout = ag_node_num_outputs(g, wh);
    if (nin <= first)
        return AG_OK;
    uint32_t ncap = nin - first, nscan = nout - first;
    AG_TRY(ag_node_set_io_count(g, wh, nin, nout + ncap));
    /* Backwards: every destination is fresh or already vacated. */
    for (uint32_t k = nscan; k-- > 0;)
        AG_TRY(move_loop_output(im, sc, wh, first + k, nin + k));

    ag_sub_id body = ag_node_sub(g, wh, 1); /* after the generated cond */
    ag_node_id no = AG_NONE;
    ag_node_id *cap = ag_alloc(im->ctx, (size_t)ncap * sizeof *cap);
    if (!cap)
        return AG_OOM(im->ctx);
    for (uint32_t c = 0; c < ncap; c++)
        cap[c] = AG_NONE;
    uint32_t nn = ag_sub_node_count(g, body);
    for (uint32_t k = 0; k < nn; k++) {
        ag_node_id n = ag_sub_node_at(g, body, k);
        int64_t p;
        if (strcmp(ag_node_type(g, n), "NetOutput") == 0)
            no = n;
        else if (strcmp(ag_node_type(g, n), "Data") == 0 && ag_attrs_get_int(ag_node_attrs_c(g, n), PNI, &p) &&
                 p >= first && p < nin)
            cap[p - first] = n;
    }
    ag_status st = AG_OK;
    if (no == AG_NONE)
        st = AG_ERR(im->ctx, AG_EINTERNAL, "%s: node '%s' (While): body '%s' has no NetOutput", im->file,
                    ag_node_name(g, wh), ag_sub_name(g, body));
    if (st == AG_OK)
        st = ag_node_set_io_count(g, no, nout + ncap, 0);
    for (uint32_t k = nscan; st == AG_OK && k-- > 0;) {
        uint32_t from = first + k;
        ag_port src = ag_node_input_src(g, no, from);
        const char *name = ag_node_input_desc_c(g, no, from)->name;
        if (src.node != AG_NONE)
            st = ag_graph_remove_edge(g, src.node, src.index, no, from);
        if (st == AG_OK)
            st = loop_body_result(im, no, nin + k, src, name);
    }
    for (uint32_t c = 0; st == AG_OK && c < ncap; c++) {
        /* Only an extra graph attribute of the Loop may have captured a
         * value the body never reads: the body still carries it. */
        if (cap[c] == AG_NONE) {
            const ag_tensor_desc *pd = ag_node_input_desc_c(g, wh, first + c);
            st = add_node(im, body, "Data", pd->name, "captured", 0, 1, &cap[c]);
            if (st == AG_OK)
                st = ag_attrs_set_int(g, ag_node_attrs(g, cap[c]), PNI, first + c);
            if (st == AG_OK)
                st = ag_desc_copy_type(g, ag_node_output_desc(g, cap[c], 0), pd);
        }
        if (st == AG_OK)
            st = loop_body_result(im, no, first + c, (ag_port){cap[c], 0},
                                  ag_node_output_desc_c(g, cap[c], 0)->name);
    }
    ag_free(im->ctx, cap, (size_t)ncap * sizeof *cap);
    return st;
}

static ag_status build_subgraphs(imp *im, scope *sc, const Onnx__NodeProto *np, ag_node_id n, node_kind kind,
                                 ag_strmap *caps)
{
    ag_graph *g = im->g;
    const char *op = np->op_type;
    gbind b = {G_GENERIC, 0, ag_node_num_inputs(g, n), ag_node_num_outputs(g, n)};
    const char *known[2] = {NULL, NULL};
    if (kind == K_IF) {
        known[0] = "then_branch";
        known[1] = "else_branch";
        b.mode = G_IF;
    } else if (kind == K_LOOP) {
        known[0] = "body";
        b.mode = G_LOOP_BODY;
        AG_TRY(build_loop_cond(im, n));
    } else if (kind == K_SCAN) {
        known[0] = "body";
        b.mode = G_SCAN;
        b.in_off = im->opset > 0 && im->opset < 9 ? 1 : 0;
    }
    for (int k = 0; k < 2 && known[k]; k++) {
        const Onnx__GraphProto *sg = graph_attr(np, known[k]);
        if (!sg)
            return AG_ERR(im->ctx, AG_EPARSE, "%s: node '%s' (%s) has no graph attribute '%s'", im->file,
                          ag_node_name(g, n), op, known[k]);
        AG_TRY(build_sub(im, sc, n, caps, known[k], sg, &b));
    }
    /* Any other graph-valued attribute: a subgraph bound position by position. */
    b.mode = G_GENERIC;
    b.in_off = 0;
    for (size_t k = 0; k < np->n_attribute; k++) {
        const Onnx__AttributeProto *a = np->attribute[k];
        if (!a || !is_graph_attr(a) || !a->name ||
            (known[0] && strcmp(a->name, known[0]) == 0) || (known[1] && strcmp(a->name, known[1]) == 0))
            continue;
        if (attr_type(a) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH) {
            if (!a->g)
                return AG_ERR(im->ctx, AG_EPARSE, "%s: attribute '%s' of node '%s' (%s) has no graph", im->file,
                              a->name, ag_node_name(g, n), op);
            AG_TRY(build_sub(im, sc, n, caps, a->name, a->g, &b));
            continue;
        }
        for (size_t j = 0; j < a->n_graphs; j++) {
            const char *an = im_fmt(im, "%s_%zu", a->name, j);
            if (!an)
                return AG_OOM(im->ctx);
            if (!a->graphs[j])
                return AG_ERR(im->ctx, AG_EPARSE, "%s: attribute '%s' of node '%s' (%s) has an empty graph",
                              im->file, a->name, ag_node_name(g, n), op);
            AG_TRY(build_sub(im, sc, n, caps, an, a->graphs[j], &b));
        }
    }
    return AG_OK;
}

/* Second pass: edges, attributes and subgraphs of node n (from np). */
static ag_status connect_node(imp *im, scope *sc, const Onnx__NodeProto *np, ag_node_id n)
{
    ag_graph *g = im->g;
    node_kind kind = kind_of(np);
    const char *op = np->op_type;
    for (size_t i = 0; i < np->n_input; i++) {
        const char *name = np->input[i];
        if (!name || !*name)
            continue; /* an omitted optional input */
        imp_val v;
        bool found;
        AG_TRY(resolve(im, sc, name, &v, &found));
        if (!found)
            return AG_ERR(im->ctx, AG_EPARSE, "%s: node '%s' (%s) input %zu: value '%s' is not defined in graph '%s'",
                          im->file, ag_node_name(g, n), op, i, name, sc->gname);
        uint32_t dst = kind == K_LOOP && i >= 2 ? (uint32_t)i + 1 : (uint32_t)i;
        AG_TRY(ag_graph_add_edge(g, v.node, v.out, n, dst));
    }
    if (kind == K_CONST)
        return AG_OK;
    if (kind == K_LOOP)
        AG_TRY(connect_loop_extras(im, sc, np, n));
    for (size_t k = 0; k < np->n_attribute; k++) {
        if (!np->attribute[k])
            return AG_ERR(im->ctx, AG_EPARSE, "%s: node '%s' (%s) has an empty attribute", im->file,
                          ag_node_name(g, n), op);
        AG_TRY(set_attr(im, n, op, np->attribute[k]));
    }
    ag_strmap caps;
    ag_strmap_init(&caps);
    ag_status st = build_subgraphs(im, sc, np, n, kind, &caps);
    if (st == AG_OK && kind == K_LOOP)
        st = loop_pass_captures(im, sc, n, (uint32_t)np->n_input - 2);
    /* Captured values are the control node's trailing inputs; the count
     * tells loop-carried and scanned inputs from them. */
    if (st == AG_OK && caps.count)
        st = ag_attrs_set_int(g, ag_node_attrs(g, n), "_num_captured", caps.count);
    ag_strmap_free(im->ctx, &caps);
    return st;
}

/* Loop body extras: the trip count passes through, the counter advances. */
static ag_status loop_body_outputs(imp *im, scope *sc, ag_node_id iter_data, ag_node_id m_data, ag_node_id no)
{
    ag_graph *g = im->g;
    ag_node_id one, add;
    AG_TRY(add_const_scalar(im, sc->sub, "iteration_one", AG_DT_I64, 1, &one));
    AG_TRY(add_node(im, sc->sub, "Add", NULL, "iteration_next", 2, 1, &add));
    AG_TRY(set_desc_type(g, ag_node_output_desc(g, add, 0), ag_node_name(g, add), AG_DT_I64, 0, NULL));
    AG_TRY(ag_graph_add_edge(g, iter_data, 0, add, 0));
    AG_TRY(ag_graph_add_edge(g, one, 0, add, 1));
    AG_TRY(ag_graph_add_edge(g, m_data, 0, no, 0));
    AG_TRY(ag_graph_add_edge(g, add, 0, no, 2));
    ag_tensor_desc *d0 = ag_node_input_desc(g, no, 0), *d2 = ag_node_input_desc(g, no, 2);
    AG_TRY(ag_desc_set_name(g, d0, ag_node_name(g, m_data)));
    AG_TRY(ag_attrs_set_int(g, d0->attrs, PNI, 0));
    AG_TRY(ag_desc_set_name(g, d2, ag_node_name(g, add)));
    return ag_attrs_set_int(g, d2->attrs, PNI, 2);
}

static ag_status check_value_types(imp *im, scope *sc, const Onnx__GraphProto *gp)
{
    ag_onnx_type ty;
    for (size_t k = 0; k < gp->n_value_info; k++) {
        const Onnx__ValueInfoProto *vi = gp->value_info[k];
        if (!vi)
            continue;
        const char *what = im_fmt(im, "value '%s' of graph '%s'", str_or(vi->name, "?"), sc->gname);
        if (!what)
            return AG_OOM(im->ctx);
        AG_TRY(ag_onnx_type_read(im->ctx, im->file, what, vi->type, &ty));
    }
    for (size_t k = 0; k < gp->n_output; k++) {
        const Onnx__ValueInfoProto *vi = gp->output[k];
        if (!vi || !vi->name || !*vi->name)
            return AG_ERR(im->ctx, AG_EPARSE, "%s: output %zu of graph '%s' has no name", im->file, k,
                          sc->gname);
        const char *what = im_fmt(im, "output '%s' of graph '%s'", vi->name, sc->gname);
        if (!what)
            return AG_OOM(im->ctx);
        AG_TRY(ag_onnx_type_read(im->ctx, im->file, what, vi->type, &ty));
    }
    if (gp->n_sparse_initializer) {
        const Onnx__SparseTensorProto *sp = gp->sparse_initializer[0];
        const char *name = sp && sp->values ? str_or(sp->values->name, "?") : "?";
        return AG_ERR(im->ctx, AG_EUNSUPPORTED, "%s: sparse initializer '%s' of graph '%s' is not supported",
                      im->file, name, sc->gname);
    }
    return AG_OK;
}

static bool is_initializer(const Onnx__GraphProto *gp, const char *name)
{
    for (size_t k = 0; k < gp->n_initializer; k++)
        if (gp->initializer[k] && gp->initializer[k]->name && strcmp(gp->initializer[k]->name, name) == 0)
            return true;
    return false;
}

static ag_status build_inputs(imp *im, scope *sc, const Onnx__GraphProto *gp, const gbind *b,
                              ag_node_id *iter_data)
{
    ag_graph *g = im->g;
    int64_t index = 0;
    for (size_t k = 0; k < gp->n_input; k++) {
        const Onnx__ValueInfoProto *vi = gp->input[k];
        if (!vi || !vi->name || !*vi->name)
            return AG_ERR(im->ctx, AG_EPARSE, "%s: input %zu of graph '%s' has no name", im->file, k, sc->gname);
        const char *what = im_fmt(im, "input '%s' of graph '%s'", vi->name, sc->gname);
        if (!what)
            return AG_OOM(im->ctx);
        ag_onnx_type ty;
        AG_TRY(ag_onnx_type_read(im->ctx, im->file, what, vi->type, &ty));
        /* Before IR version 4 initializers were also listed as inputs (with
         * the initializer as default): the Const stands for both. */
        if (is_initializer(gp, vi->name))
            continue;
        ag_node_id n;
        AG_TRY(add_node(im, sc->sub, "Data", vi->name, "input", 0, 1, &n));
        if (b->mode == G_ROOT) {
            AG_TRY(ag_attrs_set_int(g, ag_node_attrs(g, n), "index", index++));
        } else {
            int64_t p = in_pni(b, k);
            if (p >= 0)
                AG_TRY(ag_attrs_set_int(g, ag_node_attrs(g, n), PNI, p));
        }
        AG_TRY(set_desc_type(g, ag_node_output_desc(g, n, 0), vi->name, ty.dtype, ty.rank, ty.dims));
        char by[160];
        snprintf(by, sizeof by, "graph input %zu", k);
        AG_TRY(define(im, sc, vi->name, n, 0, by));
        if (k == 0)
            *iter_data = n;
    }
    return AG_OK;
}

static ag_status build_initializers(imp *im, scope *sc, const Onnx__GraphProto *gp)
{
    ag_graph *g = im->g;
    for (size_t k = 0; k < gp->n_initializer; k++) {
        const Onnx__TensorProto *tp = gp->initializer[k];
        if (!tp || !tp->name || !*tp->name)
            return AG_ERR(im->ctx, AG_EPARSE, "%s: initializer %zu of graph '%s' has no name", im->file, k,
                          sc->gname);
        const char *what = im_fmt(im, "initializer '%s' of graph '%s'", tp->name, sc->gname);
        if (!what)
            return AG_OOM(im->ctx);
        const ag_tensor *t;
        AG_TRY(ag_onnx_tensor(g, im->file, what, tp, &t));
        ag_node_id n;
        AG_TRY(add_node(im, sc->sub, "Const", tp->name, "initializer", 0, 1, &n));
        AG_TRY(ag_desc_set_name(g, ag_node_output_desc(g, n, 0), tp->name));
        AG_TRY(set_const(g, n, t));
        AG_TRY(define(im, sc, tp->name, n, 0, what));
    }
    return AG_OK;
}

static ag_status build_outputs(imp *im, scope *sc, const Onnx__GraphProto *gp, const gbind *b,
                               ag_node_id iter_data, ag_node_id m_data)
{
    ag_graph *g = im->g;
    bool loop = b->mode == G_LOOP_BODY;
    uint32_t nin = (uint32_t)gp->n_output + (loop ? 2 : 0);
    ag_node_id no;
    AG_TRY(add_node(im, sc->sub, "NetOutput", "NetOutput", "NetOutput", nin, 0, &no));
    for (size_t j = 0; j < gp->n_output; j++) {
        const char *name = gp->output[j]->name; /* checked by check_value_types */
        imp_val v;
        bool found;
        AG_TRY(resolve(im, sc, name, &v, &found));
        if (!found)
            return AG_ERR(im->ctx, AG_EPARSE, "%s: output '%s' of graph '%s' is not defined", im->file, name,
                          sc->gname);
        uint32_t dst = loop ? (j == 0 ? 1 : (uint32_t)j + 2) : (uint32_t)j;
        AG_TRY(ag_graph_add_edge(g, v.node, v.out, no, dst));
        ag_tensor_desc *d = ag_node_input_desc(g, no, dst);
        AG_TRY(ag_desc_set_name(g, d, name));
        int64_t p = out_pni(b, j);
        if (p >= 0)
            AG_TRY(ag_attrs_set_int(g, d->attrs, PNI, p));
    }
    if (loop)
        AG_TRY(loop_body_outputs(im, sc, iter_data, m_data, no));
    return AG_OK;
}

static ag_status build_graph(imp *im, scope *sc, const Onnx__GraphProto *gp, const gbind *b)
{
    ag_graph *g = im->g;
    sub_decl sd = {sc->sub, gp};
    if (ag_vec_push(im->ctx, &im->decls, sizeof sd, &sd) != AG_OK)
        return AG_OOM(im->ctx);
    AG_TRY(check_value_types(im, sc, gp));
    AG_TRY(build_initializers(im, sc, gp));
    ag_node_id iter_data = AG_NONE, m_data = AG_NONE;
    AG_TRY(build_inputs(im, sc, gp, b, &iter_data));
    if (b->mode == G_LOOP_BODY) {
        if (iter_data == AG_NONE)
            return AG_ERR(im->ctx, AG_EPARSE, "%s: graph '%s': the iteration number of a Loop body cannot be an initializer",
                          im->file, sc->gname);
        AG_TRY(add_node(im, sc->sub, "Data", "trip_count", "trip_count", 0, 1, &m_data));
        AG_TRY(ag_attrs_set_int(g, ag_node_attrs(g, m_data), PNI, 0));
        AG_TRY(set_desc_type(g, ag_node_output_desc(g, m_data, 0), ag_node_name(g, m_data), AG_DT_I64, 0, NULL));
    }
    ag_node_id *ids = NULL;
    if (gp->n_node) {
        ids = ag_calloc(im->ctx, gp->n_node, sizeof *ids);
        if (!ids)
            return AG_OOM(im->ctx);
    }
    ag_status st = AG_OK;
    for (size_t k = 0; k < gp->n_node && st == AG_OK; k++)
        st = create_node(im, sc, gp->node[k], k, &ids[k]);
    for (size_t k = 0; k < gp->n_node && st == AG_OK; k++)
        st = connect_node(im, sc, gp->node[k], ids[k]);
    if (ids)
        ag_free(im->ctx, ids, gp->n_node * sizeof *ids);
    AG_TRY(st);
    return build_outputs(im, sc, gp, b, iter_data, m_data);
}

/* ---- declared types after inference ---- */

static ag_status sync_consumers(ag_graph *g, ag_node_id n, uint32_t o)
{
    const ag_tensor_desc *d = ag_node_output_desc_c(g, n, o);
    for (uint32_t k = 0; k < ag_node_output_nconsumers(g, n, o); k++) {
        ag_port c = ag_node_output_consumer(g, n, o, k);
        ag_tensor_desc *cd = ag_node_input_desc(g, c.node, c.index);
        cd->dtype = d->dtype;
        AG_TRY(ag_desc_set_shape(g, cd, d->rank, d->dims));
    }
    return AG_OK;
}

/* Compares (and, where unknown, fills) output o of n with a declared type. */
static ag_status apply_declared(imp *im, ag_node_id n, uint32_t o, const ag_onnx_type *ty, ag_onnx_report *rep)
{
    ag_graph *g = im->g;
    ag_tensor_desc *d = ag_node_output_desc(g, n, o);
    bool changed = false, mismatch = false;
    ag_dtype had_dt = d->dtype;
    int32_t had_rank = d->rank;
    int64_t had[AG_MAX_RANK];
    if (had_rank > 0)
        memcpy(had, d->dims, (size_t)had_rank * sizeof *had);
    if (ty->dtype != AG_DT_UNDEFINED) {
        if (d->dtype == AG_DT_UNDEFINED) {
            d->dtype = ty->dtype;
            changed = true;
        } else if (d->dtype != ty->dtype) {
            mismatch = true;
        }
    }
    if (ty->rank >= 0) {
        if (had_rank < 0) {
            AG_TRY(ag_desc_set_shape(g, d, ty->rank, ty->dims));
            changed = true;
        } else if (had_rank != ty->rank) {
            mismatch = true;
        } else {
            int64_t dims[AG_MAX_RANK];
            bool filled = false;
            for (int32_t k = 0; k < had_rank; k++) {
                dims[k] = had[k];
                if (had[k] < 0 && ty->dims[k] >= 0) {
                    dims[k] = ty->dims[k];
                    filled = true;
                } else if (had[k] >= 0 && ty->dims[k] >= 0 && had[k] != ty->dims[k]) {
                    mismatch = true;
                }
            }
            if (filled) {
                AG_TRY(ag_desc_set_shape(g, d, had_rank, dims));
                changed = true;
            }
        }
    }
    if (mismatch) {
        if (rep->declared_mismatches++ == 0) {
            char a[96], b[96];
            ag_onnx_fmt_shape(a, sizeof a, had_dt, had_rank, had);
            ag_onnx_fmt_shape(b, sizeof b, ty->dtype, ty->rank, ty->dims);
            snprintf(rep->first_mismatch, sizeof rep->first_mismatch, "node %s (%s) output %" PRIu32 ": inferred %s declared %s",
                     ag_node_name(g, n), ag_node_type(g, n), o, a, b);
        }
    }
    if (changed) {
        rep->declared_filled++;
        AG_TRY(sync_consumers(g, n, o));
    }
    return AG_OK;
}

static ag_status use_declared(imp *im, ag_onnx_report *rep)
{
    ag_graph *g = im->g;
    ag_status st = AG_OK;
    for (uint32_t k = 0; k < im->decls.len && st == AG_OK; k++) {
        sub_decl sd = AG_VEC_AT(im->decls, sub_decl, k);
        /* A branch that cannot run for the bound inputs is left as inference
         * saw it: declared shapes there would not survive a second run, which
         * infers such a branch from unknown inputs again. */
        if (!sd.gp || ag_infer_sub_untaken(g, sd.sub))
            continue;
        const Onnx__GraphProto *gp = sd.gp;
        ag_strmap m;
        ag_strmap_init(&m);
        for (size_t j = 0; j < gp->n_value_info + gp->n_output && st == AG_OK; j++) {
            const Onnx__ValueInfoProto *vi =
                j < gp->n_value_info ? gp->value_info[j] : gp->output[j - gp->n_value_info];
            if (vi && vi->name && *vi->name && ag_strmap_put(im->ctx, &m, vi->name, (uint32_t)j) != AG_OK)
                st = AG_OOM(im->ctx);
        }
        uint32_t nn = ag_sub_node_count(g, sd.sub);
        for (uint32_t i = 0; i < nn && st == AG_OK; i++) {
            ag_node_id n = ag_sub_node_at(g, sd.sub, i);
            for (uint32_t o = 0; o < ag_node_num_outputs(g, n) && st == AG_OK; o++) {
                const char *name = ag_node_output_desc_c(g, n, o)->name;
                uint32_t j;
                if (!name || !*name || !ag_strmap_get(&m, name, &j))
                    continue;
                const Onnx__ValueInfoProto *vi =
                    j < gp->n_value_info ? gp->value_info[j] : gp->output[j - gp->n_value_info];
                ag_onnx_type ty;
                st = ag_onnx_type_read(im->ctx, im->file, name, vi->type, &ty);
                if (st == AG_OK)
                    st = apply_declared(im, n, o, &ty, rep);
            }
        }
        ag_strmap_free(im->ctx, &m);
    }
    return st;
}

static void count_unknown(void *ud, ag_node_id n, uint32_t o)
{
    (void)n;
    (void)o;
    ++*(uint32_t *)ud;
}

/* Re-raises a failure of another module with the file name in front. */
static ag_status with_file(imp *im, ag_status st)
{
    if (st == AG_OK || st == AG_ENOMEM)
        return st;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ag_ctx_errmsg(im->ctx));
    return AG_ERR(im->ctx, st, "%s: %s", im->file, msg);
}

/* ---- entry points ---- */

ag_onnx_opts ag_onnx_defaults(void)
{
    ag_onnx_opts o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.infer_shapes = true;
    o.use_declared = true;
    return o;
}

static int64_t default_opset(const Onnx__ModelProto *m)
{
    for (size_t k = 0; k < m->n_opset_import; k++) {
        const Onnx__OperatorSetIdProto *os = m->opset_import[k];
        if (os && onnx_domain(os->domain))
            return os->has_version ? os->version : 0;
    }
    return 0;
}

static ag_status import_model(imp *im, const Onnx__ModelProto *m, const ag_onnx_opts *opts, ag_onnx_report *rep)
{
    im->opset = default_opset(m);
    scope root;
    scope_init(&root, NULL, AG_ROOT, AG_NONE, NULL, ag_sub_name(im->g, AG_ROOT));
    gbind b = {G_ROOT, 0, 0, 0};
    ag_status st = build_graph(im, &root, m->graph, &b);
    scope_free(im->ctx, &root);
    AG_TRY(st);
    for (uint32_t k = 0; k < opts->n_input_shapes; k++)
        AG_TRY(with_file(im, ag_infer_apply_binding(im->g, opts->input_shapes[k])));
    for (uint32_t k = 0; k < opts->n_input_values; k++)
        AG_TRY(with_file(im, ag_infer_apply_value_binding(im->g, opts->input_values[k])));
    rep->infer.size = sizeof rep->infer;
    if (opts->infer_shapes)
        AG_TRY(with_file(im, ag_infer_shapes(im->g, &rep->infer)));
    if (opts->use_declared) {
        AG_TRY(use_declared(im, rep));
        /* Declared types can sharpen what inference derives downstream of
         * them (a loop-carried value whose body output was declared): run
         * inference once more, so the graph is the fixed point that inferring
         * it again (e.g. after a .agt round trip) would reach. */
        if (opts->infer_shapes && rep->declared_filled > 0)
            AG_TRY(with_file(im, ag_infer_shapes(im->g, &rep->infer)));
    }
    rep->infer.unknown_tensors = 0;
    ag_infer_each_unknown(im->g, count_unknown, &rep->infer.unknown_tensors);
    rep->infer.unknown_untaken = 0;
    ag_infer_each_unknown_untaken(im->g, count_unknown, &rep->infer.unknown_untaken);
    rep->ir_version = m->has_ir_version ? m->ir_version : 0;
    rep->opset = im->opset;
#if AG_DEBUG >= 2
    AG_TRY(ag_graph_verify(im->g));
#endif
    return AG_OK;
}

ag_status ag_onnx_import(ag_ctx *ctx, const void *buf, size_t len, const char *filename,
                         const ag_onnx_opts *opts, ag_graph **out)
{
    if (!ctx)
        return AG_EINVAL;
    if (!out || (!buf && len))
        return AG_ERR(ctx, AG_EINVAL, "ag_onnx_import: NULL buffer or output");
    *out = NULL;
    const char *file = filename ? filename : "<onnx>";
    ag_onnx_opts dflt = ag_onnx_defaults();
    if (!opts)
        opts = &dflt;
    if (opts->n_input_shapes && !opts->input_shapes)
        return AG_ERR(ctx, AG_EINVAL, "%s: %" PRIu32 " input shapes given without the list", file,
                      opts->n_input_shapes);
    if (opts->n_input_values && !opts->input_values)
        return AG_ERR(ctx, AG_EINVAL, "%s: %" PRIu32 " input values given without the list", file,
                      opts->n_input_values);
    static const uint8_t empty[1];
    ag_onnx_pb_alloc pa;
    Onnx__ModelProto *m;
    AG_TRY(ag_onnx_unpack(ctx, buf ? buf : empty, len, file, &pa, &m));

    imp im;
    memset(&im, 0, sizeof im);
    im.ctx = ctx;
    im.file = file;
    ag_arena_init(&im.scratch, ctx);
    ag_onnx_report rep;
    memset(&rep, 0, sizeof rep);
    rep.size = sizeof rep;
    ag_status st = ag_graph_create(ctx, str_or(m->graph->name, "main"), &im.g);
    if (st == AG_OK)
        st = import_model(&im, m, opts, &rep);
    ag_arena_reset(&im.scratch);
    ag_vec_free(ctx, &im.decls, sizeof(sub_decl));
    ag_onnx_free_model(&pa, m);
    if (st != AG_OK) {
        ag_graph_destroy(im.g);
        return st;
    }
    if (opts->report)
        *opts->report = rep;
    *out = im.g;
    return AG_OK;
}

ag_status ag_onnx_import_file(ag_ctx *ctx, const char *path, const ag_onnx_opts *opts, ag_graph **out)
{
    if (!ctx)
        return AG_EINVAL;
    if (!path || !out)
        return AG_ERR(ctx, AG_EINVAL, "ag_onnx_import_file: NULL path or output");
    *out = NULL;
    struct stat sb;
    if (strcmp(path, "-") != 0 && stat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
        (uint64_t)sb.st_size > (uint64_t)AG_ONNX_MAX_BYTES)
        return AG_ERR(ctx, AG_EUNSUPPORTED, "%s: model of %" PRIu64 " bytes exceeds the 2 GiB protobuf limit",
                      path, (uint64_t)sb.st_size);
    char *buf;
    size_t len;
    AG_TRY(ag_read_file(ctx, path, &buf, &len));
    ag_status st = ag_onnx_import(ctx, buf, len, path, opts, out);
    ag_free(ctx, buf, len + 1);
    return st;
}
