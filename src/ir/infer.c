/* Shape inference framework: walks the graph in topological order, subgraph by
 * subgraph, runs the op rule of each node (tables in infer_core.c and
 * infer_math.c), keeps consumer input descriptors in step with their
 * producers, and implements the helpers rules use, input shape and value
 * bindings, and the unknown-tensor reports (which set aside branches that
 * cannot run).  Control-flow rules re-enter the walk for their subgraphs. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ir/infer_internal.h"

/* Op types of the reference system: their rules apply whatever the node's
 * domain, since front ends put them in vendor domains. */
static const char *const ref_types[] = {
    "Data", "RefData", "AippData", "AnnData", "Const", "Constant", "ConstPlaceHolder",
    "FileConstant", "Variable", "VariableV2", "NetOutput", "Identity", "ReadVariableOp",
    "Assign", "AssignAdd", "AssignSub", "AssignVariableOp", "AssignAddVariableOp",
    "AssignSubVariableOp", "ApplyMomentum", "HcomAllReduce", "HcomBroadcast", "HcomAllGather",
    "HcomReduceScatter", "HcomAllToAll", "HcomAllToAllV", "HcomReduce", "HcomSend",
    "HcomReceive", "MemcpyAsync", "MemcpyAddrAsync", "AtomicAddrClean", "MemSet",
    "PointFromInputs", "ExpandDims", "Bitcast", "StreamSwitch", "StreamActive",
    "LabelSwitchByIndex", "LabelSet", "LabelGoto", "LabelGotoEx", "Merge", "RefMerge",
    "Switch", "RefSwitch", "NoOp", "Enter", "RefEnter", "Exit", "RefExit", "NextIteration",
    "RefNextIteration", "LoopCond", "RefIdentity", "If", "_If", "StatelessIf", "While",
    "_While", "StatelessWhile", "Case", "PartitionedCall", "StatefulPartitionedCall",
    "Scan", "FlattenV2", "SqueezeV2", "UnsqueezeV2", "Reshape", "Flatten", "Squeeze",
    "Unsqueeze", "Cast", "Shape", "Size",
};

/* A partially known integer value of one output anchor (shape vectors whose
 * elements are partly unknown: the batch of Shape(x) for x [?,3,224,224]). */
typedef struct partial_ent {
    uint32_t out;
    uint32_t next; /* next entry of the same node, AG_NONE at the end */
    uint32_t off;  /* first element in the pool */
    uint32_t n;
} partial_ent;

typedef struct infer_state {
    ag_graph *g;
    ag_ctx *ctx;
    ag_strmap rules;   /* type -> index into core then math tables */
    ag_strmap refs;    /* reference-system types (value unused) */
    uint32_t ncore;
    ag_node_id *order; /* topological order grouped by subgraph */
    uint32_t order_cap;
    uint32_t node_cap;
    uint32_t *sub_start; /* nodes of subgraph s: order[sub_start[s] .. sub_start[s+1]) */
    uint32_t *sub_stamp; /* value of stamp when s was last inferred */
    uint32_t stamp;
    uint32_t nsubs;
    uint32_t *partial_head; /* per node id: first partial_ent, AG_NONE if none */
    ag_vec partials;        /* partial_ent */
    ag_vec pool;            /* int64_t */
    uint32_t rerun;         /* > 0 while a loop body or branch is inferred again */
    uint32_t lenient;       /* > 0 while contradictions only make outputs unknown */
    bool *seen;             /* per node id: counted in the statistics */
    uint32_t nodes;
    uint32_t no_rule;
} infer_state;

/* What a rule receives: the node plus a way back to the walk. */
typedef struct infer_frame {
    ag_infer_node node; /* first: rules get &frame.node */
    infer_state *st;
} infer_frame;

static infer_state *state_of(const ag_infer_node *in)
{
    return ((const infer_frame *)(const void *)in)->st;
}

/* ---- helpers for rules ---- */

uint32_t ag_inf_nin(const ag_infer_node *in)
{
    return ag_node_num_inputs(in->g, in->n);
}

uint32_t ag_inf_nout(const ag_infer_node *in)
{
    return ag_node_num_outputs(in->g, in->n);
}

const ag_tensor_desc *ag_inf_in(const ag_infer_node *in, uint32_t i)
{
    if (i >= ag_node_num_inputs(in->g, in->n))
        return NULL;
    if (ag_node_input_src(in->g, in->n, i).node == AG_NONE)
        return NULL;
    return ag_node_input_desc_c(in->g, in->n, i);
}

const ag_tensor *ag_inf_in_value(const ag_infer_node *in, uint32_t i)
{
    const ag_tensor_desc *d = ag_inf_in(in, i);
    return d ? d->value : NULL;
}

ag_status ag_inf_fail(ag_infer_node *in, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return AG_ERR(in->ctx, AG_ESHAPE, "node %s (%s): %s", ag_node_name(in->g, in->n),
                  ag_node_type(in->g, in->n), msg);
}

static ag_status check_shape(ag_infer_node *in, uint32_t o, int32_t rank, const int64_t *dims)
{
    if (rank == AG_RANK_UNKNOWN)
        return AG_OK;
    if (rank < 0 || rank > AG_MAX_RANK)
        return ag_inf_fail(in, "output %u: rank %d out of range", o, (int)rank);
    for (int32_t k = 0; k < rank; k++) {
        if (dims[k] == AG_DIM_UNKNOWN)
            continue;
        if (dims[k] < 0)
            return ag_inf_fail(in, "output %u: dimension %d is negative (%lld)", o, (int)k,
                               (long long)dims[k]);
        if (dims[k] > AG_MAX_DIM)
            return ag_inf_fail(in, "output %u: dimension %d is absurdly large (%lld)", o, (int)k,
                               (long long)dims[k]);
    }
    return AG_OK;
}

/* Writes an inferred type into output o.  What the rule could not decide
 * (unknown dtype, rank or dims) keeps what the descriptor already declared:
 * hand-written shapes survive a rule that knows less. */
ag_status ag_inf_set_out(ag_infer_node *in, uint32_t o, ag_dtype dt, int32_t rank, const int64_t *dims)
{
    if (o >= ag_node_num_outputs(in->g, in->n))
        return AG_OK; /* optional output the graph does not have */
    if (!ag_dtype_valid((int)dt) && dt != AG_DT_UNDEFINED)
        return ag_inf_fail(in, "output %u: invalid data type %d", o, (int)dt);
    AG_TRY(check_shape(in, o, rank, dims));
    ag_tensor_desc *d = ag_node_output_desc(in->g, in->n, o);
    int64_t merged[AG_MAX_RANK];
    if (rank == AG_RANK_UNKNOWN) {
        rank = d->rank;
        if (rank > 0)
            memcpy(merged, d->dims, (size_t)rank * sizeof *merged);
    } else {
        if (rank > 0)
            memcpy(merged, dims, (size_t)rank * sizeof *merged);
        if (d->rank == rank)
            for (int32_t k = 0; k < rank; k++)
                if (merged[k] == AG_DIM_UNKNOWN)
                    merged[k] = d->dims[k];
    }
    if (dt != AG_DT_UNDEFINED)
        d->dtype = dt;
    AG_TRY(ag_desc_set_value(in->g, d, NULL));
    return ag_desc_set_shape(in->g, d, rank, merged);
}

ag_status ag_inf_set_out_value(ag_infer_node *in, uint32_t o, const ag_tensor *value)
{
    if (o >= ag_node_num_outputs(in->g, in->n))
        return AG_OK;
    AG_TRY(ag_inf_set_out(in, o, value->dtype, value->rank, value->dims));
    return ag_desc_set_value(in->g, ag_node_output_desc(in->g, in->n, o), value);
}

ag_status ag_inf_same_as_input(ag_infer_node *in, uint32_t o, uint32_t i)
{
    const ag_tensor_desc *d = ag_inf_in(in, i);
    if (!d)
        return AG_OK;
    /* The input descriptor may move when the output's storage grows: copy first. */
    int64_t dims[AG_MAX_RANK];
    int32_t rank = d->rank;
    ag_dtype dt = d->dtype;
    if (rank > 0)
        memcpy(dims, d->dims, (size_t)rank * sizeof *dims);
    return ag_inf_set_out(in, o, dt, rank, dims);
}

bool ag_inf_attr_int(const ag_infer_node *in, const char *name, int64_t *out)
{
    const ag_attr *a = ag_attrs_find(ag_node_attrs_c(in->g, in->n), name);
    if (!a)
        return false;
    if (a->kind == AG_ATTR_INT) {
        *out = a->v.i;
        return true;
    }
    if (a->kind == AG_ATTR_BOOL) {
        *out = a->v.b ? 1 : 0;
        return true;
    }
    return false;
}

int64_t ag_inf_attr_int_or(const ag_infer_node *in, const char *name, int64_t dflt)
{
    int64_t v;
    return ag_inf_attr_int(in, name, &v) ? v : dflt;
}

float ag_inf_attr_float_or(const ag_infer_node *in, const char *name, float dflt)
{
    const ag_attr *a = ag_attrs_find(ag_node_attrs_c(in->g, in->n), name);
    if (a && a->kind == AG_ATTR_FLOAT)
        return a->v.f;
    if (a && a->kind == AG_ATTR_INT)
        return (float)a->v.i;
    return dflt;
}

bool ag_inf_attr_ints(const ag_infer_node *in, const char *name, const int64_t **v, uint32_t *n)
{
    const ag_attr *a = ag_attrs_find(ag_node_attrs_c(in->g, in->n), name);
    if (!a)
        return false;
    if (a->kind == AG_ATTR_INTS) {
        *v = a->v.is;
        *n = a->count;
        return true;
    }
    if (a->kind == AG_ATTR_INT) { /* a one-element list written as a scalar */
        *v = &a->v.i;
        *n = 1;
        return true;
    }
    return false;
}

const char *ag_inf_attr_string_or(const ag_infer_node *in, const char *name, const char *dflt)
{
    const char *s;
    return ag_attrs_get_string(ag_node_attrs_c(in->g, in->n), name, &s) ? s : dflt;
}

const ag_tensor *ag_inf_attr_tensor(const ag_infer_node *in, const char *name)
{
    const ag_attr *a = ag_attrs_find(ag_node_attrs_c(in->g, in->n), name);
    return a && a->kind == AG_ATTR_TENSOR ? a->v.t : NULL;
}

bool ag_inf_broadcast(int32_t ra, const int64_t *a, int32_t rb, const int64_t *b, int32_t *rout, int64_t *out)
{
    if (ra == AG_RANK_UNKNOWN || rb == AG_RANK_UNKNOWN) {
        *rout = AG_RANK_UNKNOWN;
        return true;
    }
    int32_t r = ra > rb ? ra : rb;
    for (int32_t k = 0; k < r; k++) {
        int32_t ia = k - (r - ra), ib = k - (r - rb);
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        int64_t d;
        if (da == 1)
            d = db;
        else if (db == 1)
            d = da;
        else if (da == AG_DIM_UNKNOWN)
            d = db; /* unknown must be 1 or db; either way the result is db (or unknown) */
        else if (db == AG_DIM_UNKNOWN)
            d = da;
        else if (da == db)
            d = da;
        else
            return false;
        out[k] = d;
    }
    /* An unknown dim against a known non-1 dim gives that dim; against 1 or
     * another unknown it stays unknown (handled by the order above). */
    *rout = r;
    return true;
}

bool ag_inf_axis(int64_t axis, int32_t rank, int32_t *out)
{
    if (rank < 0)
        return false;
    if (axis < 0)
        axis += rank;
    if (axis < 0 || axis >= rank)
        return false;
    *out = (int32_t)axis;
    return true;
}

bool ag_inf_tensor_ints(const ag_tensor *t, int64_t *out, uint64_t cap, uint64_t *count)
{
    if (!t || !ag_dtype_is_int(t->dtype))
        return false;
    uint64_t n = ag_tensor_numel(t);
    if (n == UINT64_MAX || n > cap)
        return false;
    unsigned sz = ag_dtype_bits(t->dtype) / 8;
    if (n > 0 && (!t->data || t->nbytes < n * sz))
        return false;
    const unsigned char *p = t->data;
    bool is_signed = t->dtype == AG_DT_I8 || t->dtype == AG_DT_I16 || t->dtype == AG_DT_I32 ||
                     t->dtype == AG_DT_I64;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t u = 0;
        for (unsigned b = 0; b < sz; b++)
            u |= (uint64_t)p[k * sz + b] << (8 * b);
        if (is_signed && sz < 8 && (u >> (8 * sz - 1)) & 1)
            u |= ~UINT64_C(0) << (8 * sz); /* sign-extend */
        out[k] = (int64_t)u;
    }
    *count = n;
    return true;
}

ag_status ag_inf_make_i64(ag_infer_node *in, int32_t rank, const int64_t *dims, const int64_t *vals,
                          const ag_tensor **out)
{
    uint64_t n = 1;
    for (int32_t k = 0; k < rank; k++)
        n *= (uint64_t)dims[k];
    if (n > AG_INFER_MAX_VALUE_ELEMS)
        return AG_ERR(in->ctx, AG_EINTERNAL, "node %s: value of %llu elements is too large to keep",
                      ag_node_name(in->g, in->n), (unsigned long long)n);
    unsigned char bytes[AG_INFER_MAX_VALUE_ELEMS * 8];
    for (uint64_t k = 0; k < n; k++)
        for (unsigned b = 0; b < 8; b++)
            bytes[k * 8 + b] = (unsigned char)((uint64_t)vals[k] >> (8 * b));
    ag_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = AG_DT_I64;
    t.rank = rank;
    t.dims = dims;
    t.nbytes = n * 8;
    t.data = bytes;
    return ag_graph_make_tensor(in->g, &t, out);
}

/* ---- partial values ---- */

static const partial_ent *partial_find(const infer_state *st, ag_node_id n, uint32_t o)
{
    for (uint32_t e = st->partial_head[n]; e != AG_NONE;) {
        const partial_ent *p = &AG_VEC_AT(st->partials, partial_ent, e);
        if (p->out == o)
            return p;
        e = p->next;
    }
    return NULL;
}

bool ag_inf_in_partial(const ag_infer_node *in, uint32_t i, int64_t *out, uint64_t cap, uint64_t *count)
{
    const ag_tensor_desc *d = ag_inf_in(in, i);
    if (!d)
        return false;
    if (d->rank <= 1 && ag_inf_tensor_ints(d->value, out, cap, count))
        return true;
    ag_port src = ag_node_input_src(in->g, in->n, i);
    const infer_state *st = state_of(in);
    const partial_ent *p = partial_find(st, src.node, src.index);
    if (!p || p->n > cap)
        return false;
    memcpy(out, &AG_VEC_AT(st->pool, int64_t, p->off), (size_t)p->n * sizeof *out);
    *count = p->n;
    return true;
}

ag_status ag_inf_set_out_partial(ag_infer_node *in, uint32_t o, uint64_t count, const int64_t *vals)
{
    if (o >= ag_node_num_outputs(in->g, in->n) || count > AG_MAX_RANK)
        return AG_OK;
    bool all_known = true;
    for (uint64_t k = 0; k < count; k++)
        all_known &= vals[k] != AG_INF_UNKNOWN_ELEM;
    infer_state *st = state_of(in);
    if (all_known) {
        /* A fully known value is a real value: keep it on the descriptor. */
        const ag_tensor_desc *d = ag_node_output_desc_c(in->g, in->n, o);
        if (d->dtype != AG_DT_I64 && d->dtype != AG_DT_UNDEFINED)
            return AG_OK; /* only i64 shape vectors are turned into values here */
        int64_t dims[1] = {(int64_t)count};
        int32_t rank = d->rank == 0 && count == 1 ? 0 : 1;
        const ag_tensor *t;
        AG_TRY(ag_inf_make_i64(in, rank, dims, vals, &t));
        return ag_inf_set_out_value(in, o, t);
    }
    if (ag_vec_reserve(st->ctx, &st->pool, sizeof(int64_t), (uint32_t)count) != AG_OK ||
        ag_vec_reserve(st->ctx, &st->partials, sizeof(partial_ent), 1) != AG_OK)
        return AG_OOM(st->ctx);
    partial_ent e = {o, st->partial_head[in->n], st->pool.len, (uint32_t)count};
    memcpy(&AG_VEC_AT(st->pool, int64_t, st->pool.len), vals, (size_t)count * sizeof *vals);
    st->pool.len += (uint32_t)count;
    AG_VEC_AT(st->partials, partial_ent, st->partials.len) = e;
    st->partial_head[in->n] = st->partials.len++;
    return AG_OK;
}

/* ---- the walk ---- */

/* Domains whose op types the rule tables describe: ONNX, its ML and training
 * extensions, and the contrib ops of exported models. */
static bool onnx_domain(const char *dom)
{
    static const char *const doms[] = {"ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training", "com.microsoft"};
    for (size_t k = 0; k < sizeof doms / sizeof *doms; k++)
        if (!strcmp(dom, doms[k]))
            return true;
    return false;
}

static const ag_infer_rule *rule_for(const infer_state *st, ag_node_id n)
{
    const char *type = ag_node_type(st->g, n);
    uint32_t idx;
    if (!ag_strmap_get(&st->rules, type, &idx))
        return NULL;
    const char *dom = ag_node_domain(st->g, n);
    if (dom && dom[0] && !onnx_domain(dom) && !ag_strmap_get(&st->refs, type, &(uint32_t){0}))
        return NULL;
    return idx < st->ncore ? &ag_infer_rules_core[idx] : &ag_infer_rules_math[idx - st->ncore];
}

/* Copies output descriptors into the input descriptors of their consumers
 * (attributes of the input descriptors, e.g. _parent_node_index, stay). */
static ag_status sync_consumers(infer_state *st, ag_node_id n)
{
    uint32_t nout = ag_node_num_outputs(st->g, n);
    for (uint32_t o = 0; o < nout; o++) {
        const ag_tensor_desc *src = ag_node_output_desc_c(st->g, n, o);
        uint32_t nc = ag_node_output_nconsumers(st->g, n, o);
        for (uint32_t k = 0; k < nc; k++) {
            ag_port c = ag_node_output_consumer(st->g, n, o, k);
            AG_TRY(ag_desc_copy_type(st->g, ag_node_input_desc(st->g, c.node, c.index), src));
        }
    }
    return AG_OK;
}

static ag_status run_sub(infer_state *st, ag_sub_id s);

static bool has_connected_input(const ag_graph *g, ag_node_id n)
{
    uint32_t nin = ag_node_num_inputs(g, n);
    for (uint32_t i = 0; i < nin; i++)
        if (ag_node_input_src(g, n, i).node != AG_NONE)
            return true;
    return false;
}

/* Resets the shapes (and values) of n's outputs to unknown, keeping dtypes. */
static ag_status forget_outputs(infer_state *st, ag_node_id n, bool shapes)
{
    uint32_t nout = ag_node_num_outputs(st->g, n);
    for (uint32_t o = 0; o < nout; o++) {
        ag_tensor_desc *d = ag_node_output_desc(st->g, n, o);
        AG_TRY(ag_desc_set_value(st->g, d, NULL));
        if (shapes)
            AG_TRY(ag_desc_set_shape(st->g, d, AG_RANK_UNKNOWN, NULL));
    }
    return AG_OK;
}

static ag_status visit(infer_state *st, ag_node_id n)
{
    ag_graph *g = st->g;
    const ag_infer_rule *r = rule_for(st, n);
    if (!st->seen[n]) {
        st->seen[n] = true;
        st->nodes++;
        st->no_rule += r == NULL;
    }
    st->partial_head[n] = AG_NONE;
    uint32_t mark = st->stamp;
    if (r) {
        /* Values are always derived afresh; in a second pass over a loop body
         * or a branch, shapes are too, so first-pass guesses cannot survive. */
        if (has_connected_input(g, n))
            AG_TRY(forget_outputs(st, n, st->rerun > 0));
        infer_frame fr = {{g, st->ctx, n, 0}, st};
        ag_status rs = r->fn(&fr.node);
        if (rs == AG_ESHAPE && st->lenient) {
            /* A branch that cannot run with these shapes: what contradicts
             * itself stays unknown, the rest is still inferred. */
            ag_ctx_clear_error(st->ctx);
            rs = forget_outputs(st, n, true);
        }
        AG_TRY(rs);
    }
    /* Subgraphs no rule walked (unknown control ops) are still inferred so
     * their own nodes get shapes. */
    uint32_t nsub = ag_node_num_subs(g, n);
    for (uint32_t k = 0; k < nsub; k++) {
        ag_sub_id s = ag_node_sub(g, n, k);
        if (s < st->nsubs && ag_sub_alive(g, s) && st->sub_stamp[s] <= mark)
            AG_TRY(run_sub(st, s));
    }
    return sync_consumers(st, n);
}

static ag_status run_sub(infer_state *st, ag_sub_id s)
{
    st->sub_stamp[s] = ++st->stamp;
    for (uint32_t k = st->sub_start[s]; k < st->sub_start[s + 1]; k++)
        AG_TRY(visit(st, st->order[k]));
    return AG_OK;
}

ag_status ag_inf_run_sub(ag_infer_node *in, ag_sub_id s)
{
    infer_state *st = state_of(in);
    if (s >= st->nsubs || !ag_sub_alive(in->g, s))
        return AG_OK;
    return run_sub(st, s);
}

ag_status ag_inf_rerun_sub(ag_infer_node *in, ag_sub_id s)
{
    infer_state *st = state_of(in);
    if (s >= st->nsubs || !ag_sub_alive(in->g, s))
        return AG_OK;
    st->rerun++;
    ag_status r = run_sub(st, s);
    st->rerun--;
    return r;
}

ag_status ag_inf_run_sub_lenient(ag_infer_node *in, ag_sub_id s)
{
    infer_state *st = state_of(in);
    if (s >= st->nsubs || !ag_sub_alive(in->g, s))
        return AG_OK;
    st->rerun++;
    st->lenient++;
    ag_status r = run_sub(st, s);
    st->lenient--;
    st->rerun--;
    return r;
}

static void state_free(infer_state *st)
{
    ag_ctx *ctx = st->ctx;
    ag_strmap_free(ctx, &st->rules);
    ag_strmap_free(ctx, &st->refs);
    ag_free(ctx, st->order, (size_t)st->order_cap * sizeof *st->order);
    ag_free(ctx, st->sub_start, ((size_t)st->nsubs + 1) * sizeof *st->sub_start);
    ag_free(ctx, st->sub_stamp, ((size_t)st->nsubs + 1) * sizeof *st->sub_stamp);
    ag_free(ctx, st->partial_head, (size_t)st->node_cap * sizeof *st->partial_head);
    ag_free(ctx, st->seen, (size_t)st->node_cap * sizeof *st->seen);
    ag_vec_free(ctx, &st->partials, sizeof(partial_ent));
    ag_vec_free(ctx, &st->pool, sizeof(int64_t));
}

static ag_status state_init(infer_state *st, ag_graph *g)
{
    memset(st, 0, sizeof *st);
    st->g = g;
    st->ctx = ag_graph_ctx(g);
    ag_ctx *ctx = st->ctx;
    ag_strmap_init(&st->rules);
    ag_strmap_init(&st->refs);
    /* One spare element each so that empty graphs need no special case. */
    st->order_cap = ag_graph_node_count(g) + 1;
    st->node_cap = ag_graph_node_capacity(g) + 1;
    st->nsubs = ag_graph_sub_count(g);
    st->order = ag_alloc(ctx, (size_t)st->order_cap * sizeof *st->order);
    st->sub_start = ag_calloc(ctx, (size_t)st->nsubs + 1, sizeof *st->sub_start);
    st->sub_stamp = ag_calloc(ctx, (size_t)st->nsubs + 1, sizeof *st->sub_stamp);
    st->partial_head = ag_alloc(ctx, (size_t)st->node_cap * sizeof *st->partial_head);
    st->seen = ag_calloc(ctx, st->node_cap, sizeof *st->seen);
    if (!st->order || !st->sub_start || !st->sub_stamp || !st->partial_head || !st->seen)
        return AG_OOM(ctx);
    for (uint32_t k = 0; k < st->node_cap; k++)
        st->partial_head[k] = AG_NONE;

    for (uint32_t k = 0; ag_infer_rules_core[k].op_type; k++, st->ncore++)
        if (ag_strmap_put(ctx, &st->rules, ag_infer_rules_core[k].op_type, k) != AG_OK)
            return AG_OOM(ctx);
    for (uint32_t k = 0; ag_infer_rules_math[k].op_type; k++) {
        uint32_t dummy;
        if (ag_strmap_get(&st->rules, ag_infer_rules_math[k].op_type, &dummy))
            continue; /* the core family wins */
        if (ag_strmap_put(ctx, &st->rules, ag_infer_rules_math[k].op_type, st->ncore + k) != AG_OK)
            return AG_OOM(ctx);
    }
    for (size_t k = 0; k < sizeof ref_types / sizeof *ref_types; k++)
        if (ag_strmap_put(ctx, &st->refs, ref_types[k], 0) != AG_OK)
            return AG_OOM(ctx);
    return AG_OK;
}

/* Groups the topological order by subgraph, keeping each subgraph's nodes in
 * their topological order (counting sort, linear). */
static ag_status group_order(infer_state *st)
{
    ag_graph *g = st->g;
    ag_ctx *ctx = st->ctx;
    uint32_t count = ag_graph_node_count(g);
    if (!count)
        return AG_OK;
    ag_node_id *topo = ag_alloc(ctx, (size_t)count * sizeof *topo);
    if (!topo)
        return AG_OOM(ctx);
    uint32_t got = 0;
    ag_status s = ag_graph_topo_order(g, topo, &got);
    if (s != AG_OK) {
        ag_free(ctx, topo, (size_t)count * sizeof *topo);
        return s;
    }
    for (uint32_t k = 0; k < got; k++)
        st->sub_start[ag_node_owner(g, topo[k]) + 1]++;
    for (uint32_t s2 = 0; s2 < st->nsubs; s2++)
        st->sub_start[s2 + 1] += st->sub_start[s2];
    /* sub_stamp doubles as the fill cursor, then is cleared. */
    for (uint32_t k = 0; k < got; k++) {
        ag_sub_id o = ag_node_owner(g, topo[k]);
        st->order[st->sub_start[o] + st->sub_stamp[o]++] = topo[k];
    }
    memset(st->sub_stamp, 0, (size_t)st->nsubs * sizeof *st->sub_stamp);
    ag_free(ctx, topo, (size_t)count * sizeof *topo);
    return AG_OK;
}

static bool desc_unknown(const ag_tensor_desc *d)
{
    return d->dtype == AG_DT_UNDEFINED || !ag_desc_shape_known(d);
}

/* Control nodes whose rule records _taken_branch (rule_branches); on any
 * other node the attribute is not inference's and is not trusted. */
static bool is_branching(const char *type)
{
    return !strcmp(type, "If") || !strcmp(type, "_If") || !strcmp(type, "StatelessIf") || !strcmp(type, "Case");
}

/* True when subgraph s is, or lies inside, a branch that cannot run: its
 * parent If/Case records another branch as the one taken.  Walks up the
 * nesting, so the cost is the depth of s. */
bool ag_infer_sub_untaken(const ag_graph *g, ag_sub_id s)
{
    while (s != AG_ROOT) {
        ag_node_id p = ag_sub_parent(g, s);
        if (p == AG_NONE)
            return false;
        int64_t taken;
        if (is_branching(ag_node_type(g, p)) && ag_attrs_get_int(ag_node_attrs_c(g, p), "_taken_branch", &taken)) {
            uint32_t nsub = ag_node_num_subs(g, p);
            for (uint32_t k = 0; k < nsub; k++)
                if (ag_node_sub(g, p, k) == s) {
                    if ((int64_t)k != taken)
                        return true;
                    break;
                }
        }
        s = ag_node_owner(g, p);
    }
    return false;
}

/* Visits the unknown output anchors of nodes in taken (untaken == false) or
 * untaken subgraphs, in node id order.  Consecutive nodes mostly share their
 * subgraph, so the last answer is kept. */
static void each_unknown(const ag_graph *g, bool untaken, void (*fn)(void *ud, ag_node_id n, uint32_t o), void *ud)
{
    uint32_t cap = ag_graph_node_capacity(g);
    ag_sub_id last = AG_ROOT;
    bool last_untaken = false;
    for (ag_node_id n = 0; n < cap; n++) {
        if (!ag_node_alive(g, n))
            continue;
        ag_sub_id s = ag_node_owner(g, n);
        if (s != last) {
            last = s;
            last_untaken = ag_infer_sub_untaken(g, s);
        }
        if (last_untaken != untaken)
            continue;
        uint32_t nout = ag_node_num_outputs(g, n);
        for (uint32_t o = 0; o < nout; o++)
            if (desc_unknown(ag_node_output_desc_c(g, n, o)))
                fn(ud, n, o);
    }
}

void ag_infer_each_unknown(const ag_graph *g, void (*fn)(void *ud, ag_node_id n, uint32_t o), void *ud)
{
    each_unknown(g, false, fn, ud);
}

void ag_infer_each_unknown_untaken(const ag_graph *g, void (*fn)(void *ud, ag_node_id n, uint32_t o), void *ud)
{
    each_unknown(g, true, fn, ud);
}

static void count_unknown(void *ud, ag_node_id n, uint32_t o)
{
    (void)n;
    (void)o;
    (*(uint32_t *)ud)++;
}

ag_status ag_infer_shapes(ag_graph *g, ag_infer_stats *stats)
{
    infer_state st;
    ag_status s = state_init(&st, g);
    if (s == AG_OK)
        s = group_order(&st);
    if (s == AG_OK && st.nsubs)
        s = run_sub(&st, AG_ROOT);
    /* Subgraphs whose parent is gone or that no walk reached. */
    for (ag_sub_id sub = 1; s == AG_OK && sub < st.nsubs; sub++)
        if (ag_sub_alive(g, sub) && st.sub_stamp[sub] == 0)
            s = run_sub(&st, sub);
    if (s == AG_OK && stats) {
        uint32_t unknown = 0;
        ag_infer_each_unknown(g, count_unknown, &unknown);
        stats->nodes = st.nodes;
        stats->no_rule = st.no_rule;
        stats->unknown_tensors = unknown;
        /* A caller built against the older, shorter struct has no room for it. */
        if (stats->size >= offsetof(ag_infer_stats, unknown_untaken) + sizeof stats->unknown_untaken) {
            unknown = 0;
            ag_infer_each_unknown_untaken(g, count_unknown, &unknown);
            stats->unknown_untaken = unknown;
        }
    }
    state_free(&st);
    return s;
}

/* ---- bindings ---- */

static ag_node_id find_input(const ag_graph *g, const char *name)
{
    uint32_t cnt = ag_sub_node_count(g, AG_ROOT);
    for (uint32_t k = 0; k < cnt; k++) {
        ag_node_id n = ag_sub_node_at(g, AG_ROOT, k);
        if (strcmp(ag_node_type(g, n), "Data") != 0 || ag_node_num_outputs(g, n) == 0)
            continue;
        if (strcmp(ag_node_name(g, n), name) == 0)
            return n;
    }
    for (uint32_t k = 0; k < cnt; k++) {
        ag_node_id n = ag_sub_node_at(g, AG_ROOT, k);
        if (strcmp(ag_node_type(g, n), "Data") != 0 || ag_node_num_outputs(g, n) == 0)
            continue;
        const char *dn = ag_node_output_desc_c(g, n, 0)->name;
        if (dn && strcmp(dn, name) == 0)
            return n;
    }
    return AG_NONE;
}

static ag_status unknown_input(ag_graph *g, const char *what, const char *name)
{
    char known[512];
    size_t len = 0;
    known[0] = '\0';
    uint32_t cnt = ag_sub_node_count(g, AG_ROOT);
    for (uint32_t k = 0; k < cnt && len + 1 < sizeof known; k++) {
        ag_node_id n = ag_sub_node_at(g, AG_ROOT, k);
        if (strcmp(ag_node_type(g, n), "Data") != 0)
            continue;
        int w = snprintf(known + len, sizeof known - len, "%s%s", len ? ", " : "", ag_node_name(g, n));
        if (w < 0 || (size_t)w >= sizeof known - len) {
            len = sizeof known - 1;
            break;
        }
        len += (size_t)w;
    }
    return AG_ERR(ag_graph_ctx(g), AG_ENOTFOUND, "%s: no graph input named '%s' (inputs: %s)", what, name,
                  len ? known : "none");
}

/* Checks that a bound shape is in range and fits what Data node n declares. */
static ag_status check_bound_shape(ag_graph *g, const char *what, const char *name, ag_node_id n, int32_t rank,
                                   const int64_t *dims)
{
    ag_ctx *ctx = ag_graph_ctx(g);
    for (int32_t k = 0; k < rank; k++)
        if (dims[k] < 0 || dims[k] > AG_MAX_DIM)
            return AG_ERR(ctx, AG_EINVAL, "%s '%s': dimension %d (%lld) out of range", what, name, (int)k,
                          (long long)dims[k]);
    const ag_tensor_desc *d = ag_node_output_desc_c(g, n, 0);
    if (d->rank != AG_RANK_UNKNOWN && d->rank != rank)
        return AG_ERR(ctx, AG_ESHAPE, "%s '%s': rank %d, but node %s (Data) declares rank %d", what, name, (int)rank,
                      ag_node_name(g, n), (int)d->rank);
    if (d->rank == rank)
        for (int32_t k = 0; k < rank; k++)
            if (d->dims[k] != AG_DIM_UNKNOWN && d->dims[k] != dims[k])
                return AG_ERR(ctx, AG_ESHAPE, "%s '%s': dimension %d is %lld, but node %s (Data) declares %lld", what,
                              name, (int)k, (long long)dims[k], ag_node_name(g, n), (long long)d->dims[k]);
    return AG_OK;
}

ag_status ag_infer_bind_input(ag_graph *g, const char *name, int32_t rank, const int64_t *dims)
{
    ag_ctx *ctx = ag_graph_ctx(g);
    if (!name || rank < 0 || rank > AG_MAX_RANK || (rank > 0 && !dims))
        return AG_ERR(ctx, AG_EINVAL, "input shape binding '%s': invalid rank %d", name ? name : "(null)",
                      (int)rank);
    for (int32_t k = 0; k < rank; k++)
        if (dims[k] < 0 || dims[k] > AG_MAX_DIM)
            return AG_ERR(ctx, AG_EINVAL, "input shape binding '%s': dimension %d (%lld) out of range", name,
                          (int)k, (long long)dims[k]);
    ag_node_id n = find_input(g, name);
    if (n == AG_NONE)
        return unknown_input(g, "input shape binding", name);
    AG_TRY(check_bound_shape(g, "input shape binding", name, n, rank, dims));
    return ag_desc_set_shape(g, ag_node_output_desc(g, n, 0), rank, dims);
}

/* Splits "NAME=REST" into name (NUL-terminated, at most 255 bytes) and the
 * text after the last '='; what and form name the binding kind in messages. */
static ag_status split_binding(ag_ctx *ctx, const char *what, const char *form, const char *binding, char name[256],
                               const char **rest)
{
    const char *eq = binding ? strrchr(binding, '=') : NULL;
    if (!eq || eq == binding)
        return AG_ERR(ctx, AG_EINVAL, "%s '%s': expected %s", what, binding ? binding : "(null)", form);
    size_t nlen = (size_t)(eq - binding);
    if (nlen >= 256)
        return AG_ERR(ctx, AG_EINVAL, "%s: name of %zu bytes is too long", what, nlen);
    memcpy(name, binding, nlen);
    name[nlen] = '\0';
    *rest = eq + 1;
    return AG_OK;
}

ag_status ag_infer_apply_binding(ag_graph *g, const char *binding)
{
    ag_ctx *ctx = ag_graph_ctx(g);
    char name[256];
    const char *rest;
    AG_TRY(split_binding(ctx, "input shape binding", "NAME=d0,d1,... (empty list = scalar)", binding, name, &rest));
    int64_t dims[AG_MAX_RANK];
    int32_t rank = 0;
    const char *p = rest;
    while (*p == ' ')
        p++;
    if (*p) {
        for (;;) {
            while (*p == ' ')
                p++;
            if (*p < '0' || *p > '9')
                return AG_ERR(ctx, AG_EINVAL,
                              "input shape binding '%s': dimension %d is not a non-negative integer", binding,
                              (int)rank);
            int64_t v = 0;
            while (*p >= '0' && *p <= '9') {
                v = v * 10 + (*p - '0');
                if (v > AG_MAX_DIM)
                    return AG_ERR(ctx, AG_EINVAL, "input shape binding '%s': dimension %d exceeds %lld", binding,
                                  (int)rank, (long long)AG_MAX_DIM);
                p++;
            }
            if (rank == AG_MAX_RANK)
                return AG_ERR(ctx, AG_EINVAL, "input shape binding '%s': more than %d dimensions", binding,
                              AG_MAX_RANK);
            dims[rank++] = v;
            while (*p == ' ')
                p++;
            if (*p == '\0')
                break;
            if (*p != ',')
                return AG_ERR(ctx, AG_EINVAL, "input shape binding '%s': unexpected '%c' after dimension %d",
                              binding, *p, (int)rank - 1);
            p++;
        }
    }
    return ag_infer_bind_input(g, name, rank, dims);
}

/* ---- value bindings ---- */

ag_status ag_infer_bind_value(ag_graph *g, const char *name, const ag_tensor *value)
{
    ag_ctx *ctx = ag_graph_ctx(g);
    const char *what = "input value binding";
    if (!name || !value)
        return AG_ERR(ctx, AG_EINVAL, "%s '%s': no value given", what, name ? name : "(null)");
    if (value->rank < 0 || value->rank > AG_MAX_RANK || (value->rank > 0 && !value->dims))
        return AG_ERR(ctx, AG_EINVAL, "%s '%s': invalid rank %d", what, name, (int)value->rank);
    if (!ag_dtype_valid((int)value->dtype) || value->dtype == AG_DT_STRING)
        return AG_ERR(ctx, AG_EINVAL, "%s '%s': values of data type %s cannot be bound", what, name,
                      ag_dtype_name(value->dtype) ? ag_dtype_name(value->dtype) : "(invalid)");
    uint64_t numel = ag_tensor_numel(value);
    /* An elided value (digest only) would stop every rule that reads it. */
    if (numel == UINT64_MAX || (numel > 0 && !value->data))
        return AG_ERR(ctx, AG_EINVAL, "%s '%s': the value has no element data", what, name);
    ag_node_id n = find_input(g, name);
    if (n == AG_NONE)
        return unknown_input(g, what, name);
    const ag_tensor_desc *d = ag_node_output_desc_c(g, n, 0);
    if (d->dtype != AG_DT_UNDEFINED && d->dtype != value->dtype)
        return AG_ERR(ctx, AG_EINVAL, "%s '%s': the value is %s, but node %s (Data) declares %s", what, name,
                      ag_dtype_name(value->dtype), ag_node_name(g, n), ag_dtype_name(d->dtype));
    AG_TRY(check_bound_shape(g, what, name, n, value->rank, value->dims));
    /* Copy first: once the shape is written nothing below can fail. */
    const ag_tensor *owned;
    AG_TRY(ag_graph_make_tensor(g, value, &owned));
    ag_tensor_desc *w = ag_node_output_desc(g, n, 0);
    AG_TRY(ag_desc_set_shape(g, w, owned->rank, owned->dims));
    w->dtype = owned->dtype;
    return ag_desc_set_value(g, w, owned);
}

static void put_le(unsigned char *p, uint64_t u, unsigned n)
{
    for (unsigned b = 0; b < n; b++)
        p[b] = (unsigned char)(u >> (8 * b));
}

/* IEEE binary16 nearest to f (ties to even); overflow gives infinity. */
static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, man = x & 0x7fffffu;
    int32_t e = (int32_t)((x >> 23) & 0xffu);
    if (e == 0xff)
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    e = e - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal half: units of 2^-24 */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e), h = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* a carry into the exponent is still the right rounding */
    return (uint16_t)(sign | h);
}

/* bfloat16 nearest to f (ties to even). */
static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))
        return (uint16_t)((x >> 16) | 0x40u); /* NaN stays a quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* Parses one element of dtype dt from the text at *pp (up to ',' or the end)
 * into p (little-endian); on success *pp points past the number. */
static ag_status parse_elem(ag_ctx *ctx, const char *binding, uint64_t k, ag_dtype dt, const char **pp,
                            unsigned char *p)
{
    const char *s = *pp;
    char *end = NULL;
    unsigned sz = ag_dtype_bits(dt) / 8;
    errno = 0;
    if (ag_dtype_is_int(dt)) {
        int64_t lo = 0, hi = INT64_MAX;
        switch (dt) {
        case AG_DT_BOOL: hi = 1; break;
        case AG_DT_U8: hi = UINT8_MAX; break;
        case AG_DT_I8: lo = INT8_MIN, hi = INT8_MAX; break;
        case AG_DT_U16: hi = UINT16_MAX; break;
        case AG_DT_I16: lo = INT16_MIN, hi = INT16_MAX; break;
        case AG_DT_U32: hi = UINT32_MAX; break;
        case AG_DT_I32: lo = INT32_MIN, hi = INT32_MAX; break;
        case AG_DT_I64: lo = INT64_MIN; break;
        default: break;
        }
        uint64_t u;
        bool range;
        if (dt == AG_DT_U64) {
            while (*s == ' ')
                s++;
            range = *s != '-'; /* strtoull would wrap "-1" around */
            u = strtoull(s, &end, 10);
            range &= errno != ERANGE;
        } else {
            long long v = strtoll(s, &end, 10);
            range = errno != ERANGE && v >= lo && v <= hi;
            u = (uint64_t)v;
        }
        if (end == s || (*end != ',' && *end != ' ' && *end != '\0'))
            return AG_ERR(ctx, AG_EINVAL, "input value binding '%s': value %llu is not an integer (the input is %s)",
                          binding, (unsigned long long)k, ag_dtype_name(dt));
        if (!range)
            return AG_ERR(ctx, AG_EINVAL, "input value binding '%s': value %llu is out of range for %s", binding,
                          (unsigned long long)k, ag_dtype_name(dt));
        if (p)
            put_le(p, u, sz);
    } else {
        double v = strtod(s, &end);
        if (end == s || (*end != ',' && *end != ' ' && *end != '\0'))
            return AG_ERR(ctx, AG_EINVAL, "input value binding '%s': value %llu is not a number (the input is %s)",
                          binding, (unsigned long long)k, ag_dtype_name(dt));
        float f = (float)v;
        uint64_t u;
        bool over = errno == ERANGE && (v > 1.0 || v < -1.0); /* underflow to 0 is fine */
        if (dt == AG_DT_F64) {
            memcpy(&u, &v, sizeof u);
        } else if (dt == AG_DT_F32) {
            uint32_t b;
            memcpy(&b, &f, sizeof b);
            u = b;
            over |= isfinite(v) && !isfinite(f);
        } else {
            uint16_t h = dt == AG_DT_F16 ? f32_to_f16(f) : f32_to_bf16(f);
            u = h;
            over |= isfinite(v) && (h & 0x7fffu) == (dt == AG_DT_F16 ? 0x7c00u : 0x7f80u);
        }
        if (over)
            return AG_ERR(ctx, AG_EINVAL, "input value binding '%s': value %llu is out of range for %s", binding,
                          (unsigned long long)k, ag_dtype_name(dt));
        if (p)
            put_le(p, u, sz);
    }
    *pp = end;
    return AG_OK;
}

/* Element data of a value binding: fills buf (NULL: only checks) with count
 * parsed values; one value fills all numel elements. */
static ag_status parse_values(ag_ctx *ctx, const char *binding, const char *p, ag_dtype dt, uint64_t numel,
                              unsigned char *buf, uint64_t *count)
{
    unsigned sz = ag_dtype_bits(dt) / 8;
    uint64_t k = 0;
    for (;;) {
        while (*p == ' ')
            p++;
        if (*p == ',' || *p == '\0')
            return AG_ERR(ctx, AG_EINVAL, "input value binding '%s': value %llu is missing", binding,
                          (unsigned long long)k);
        AG_TRY(parse_elem(ctx, binding, k, dt, &p, buf && k < numel ? buf + k * sz : NULL));
        k++;
        while (*p == ' ')
            p++;
        if (*p == '\0')
            break;
        if (*p != ',')
            return AG_ERR(ctx, AG_EINVAL, "input value binding '%s': unexpected '%c' after value %llu", binding, *p,
                          (unsigned long long)(k - 1));
        p++;
    }
    if (buf && k == 1)
        for (uint64_t e = 1; e < numel; e++)
            memcpy(buf + e * sz, buf, sz);
    *count = k;
    return AG_OK;
}

ag_status ag_infer_apply_value_binding(ag_graph *g, const char *binding)
{
    ag_ctx *ctx = ag_graph_ctx(g);
    char name[256];
    const char *rest;
    AG_TRY(split_binding(ctx, "input value binding", "NAME=v or NAME=v0,v1,...", binding, name, &rest));
    ag_node_id n = find_input(g, name);
    if (n == AG_NONE)
        return unknown_input(g, "input value binding", name);
    const ag_tensor_desc *d = ag_node_output_desc_c(g, n, 0);
    ag_dtype dt = d->dtype;
    if (!ag_dtype_is_int(dt) && !ag_dtype_is_float(dt))
        return AG_ERR(ctx, AG_EINVAL,
                      "input value binding '%s': node %s (Data) is %s; values can be given for integer, bool "
                      "and f16/bf16/f32/f64 inputs",
                      binding, ag_node_name(g, n), dt == AG_DT_UNDEFINED ? "of unknown data type" : ag_dtype_name(dt));
    int32_t rank = d->rank;
    int64_t dims[AG_MAX_RANK];
    if (rank == AG_RANK_UNKNOWN)
        return AG_ERR(ctx, AG_EINVAL, "input value binding '%s': node %s (Data) has an unknown shape; bind it first "
                      "(input shape binding)", binding, ag_node_name(g, n));
    if (rank > 0)
        memcpy(dims, d->dims, (size_t)rank * sizeof *dims);
    /* Count the values up front: a 1-D input of unknown length takes that many. */
    uint64_t given = 1;
    for (const char *p = rest; *p; p++)
        given += *p == ',';
    if (rank == 1 && dims[0] == AG_DIM_UNKNOWN)
        dims[0] = given <= (uint64_t)AG_MAX_DIM ? (int64_t)given : AG_MAX_DIM;
    uint64_t numel = 1;
    for (int32_t k = 0; k < rank; k++) {
        if (dims[k] == AG_DIM_UNKNOWN)
            return AG_ERR(ctx, AG_EINVAL,
                          "input value binding '%s': dimension %d of node %s (Data) is unknown; bind the shape "
                          "first (input shape binding)",
                          binding, (int)k, ag_node_name(g, n));
        numel = numel > 0 && (uint64_t)dims[k] > UINT64_MAX / numel ? UINT64_MAX : numel * (uint64_t)dims[k];
    }
    unsigned sz = ag_dtype_bits(dt) / 8;
    bool keep = numel <= AG_INFER_MAX_VALUE_ELEMS;
    unsigned char *buf = NULL;
    size_t bytes = keep ? (size_t)numel * sz : 0;
    if (bytes && !(buf = ag_alloc(ctx, bytes)))
        return AG_OOM(ctx);
    uint64_t count = 0;
    ag_status st = parse_values(ctx, binding, rest, dt, keep ? numel : 0, buf, &count);
    if (st == AG_OK && count != 1 && count != numel)
        st = AG_ERR(ctx, AG_EINVAL,
                    "input value binding '%s': %llu values, but node %s (Data) holds %llu elements (give one value "
                    "to fill it, or all of them)",
                    binding, (unsigned long long)count, ag_node_name(g, n), (unsigned long long)numel);
    if (st == AG_OK && keep) {
        ag_tensor t;
        memset(&t, 0, sizeof t);
        t.dtype = dt;
        t.rank = rank;
        t.dims = dims;
        t.nbytes = bytes;
        t.data = buf;
        st = ag_infer_bind_value(g, name, &t);
    } else if (st == AG_OK) {
        st = ag_infer_bind_input(g, name, rank, dims);
    }
    ag_free(ctx, buf, bytes);
    return st;
}
