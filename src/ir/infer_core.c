/* Shape inference rules of the "core" family: sources (Data, Const), shape
 * and index manipulation with propagation of small constant values (the
 * Shape -> Gather -> Concat -> Reshape chains of exported models, including
 * partly known shape vectors), control flow (If, Case, While/Loop, Scan) and
 * the reference system's own op types.  Rules follow the ONNX operator docs. */
#include <math.h>
#include <stdio.h>

#include "ir/infer_internal.h"

#define UNK AG_DIM_UNKNOWN
#define UNKE AG_INF_UNKNOWN_ELEM
#define MAXV AG_INFER_MAX_VALUE_ELEMS

/* ------------------------------------------------------------------------ */
/* shapes                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct shp {
    int32_t rank; /* AG_RANK_UNKNOWN or 0..AG_MAX_RANK */
    int64_t d[AG_MAX_RANK];
} shp;

/* Shape of input i (unknown rank when the input is absent). */
static shp in_shape(const ag_infer_node *in, uint32_t i)
{
    shp s;
    const ag_tensor_desc *d = ag_inf_in(in, i);
    s.rank = d ? d->rank : AG_RANK_UNKNOWN;
    if (s.rank > 0)
        memcpy(s.d, d->dims, (size_t)s.rank * sizeof *s.d);
    return s;
}

static ag_dtype in_dt(const ag_infer_node *in, uint32_t i)
{
    const ag_tensor_desc *d = ag_inf_in(in, i);
    return d ? d->dtype : AG_DT_UNDEFINED;
}

static bool has_in(const ag_infer_node *in, uint32_t i)
{
    return ag_inf_in(in, i) != NULL;
}

static ag_status set_shp(ag_infer_node *in, uint32_t o, ag_dtype dt, const shp *s)
{
    return ag_inf_set_out(in, o, dt, s->rank, s->d);
}

static ag_status set_rank_unknown_dims(ag_infer_node *in, uint32_t o, ag_dtype dt, int32_t rank)
{
    shp s;
    s.rank = rank;
    for (int32_t k = 0; k < rank && k < AG_MAX_RANK; k++)
        s.d[k] = UNK;
    return set_shp(in, o, dt, &s);
}

static bool shp_known(const shp *s)
{
    if (s->rank < 0)
        return false;
    for (int32_t k = 0; k < s->rank; k++)
        if (s->d[k] == UNK)
            return false;
    return true;
}

/* Product of dims; UNK if any is unknown; INT64_MAX past AG_MAX_DIM^2 range. */
static int64_t shp_numel(const shp *s, int32_t from, int32_t to)
{
    int64_t n = 1;
    for (int32_t k = from; k < to; k++) {
        if (s->d[k] == UNK)
            return UNK;
        if (s->d[k] != 0 && n > INT64_MAX / s->d[k])
            n = INT64_MAX;
        else
            n *= s->d[k];
    }
    return n;
}

/* Products and sums of dims: unknown propagates; overflow gives a value that
 * ag_inf_set_out rejects as absurd rather than wrapping. */
static int64_t dmul(int64_t a, int64_t b)
{
    if (a == UNK || b == UNK)
        return UNK;
    if (a != 0 && b > INT64_MAX / a)
        return INT64_MAX;
    return a * b;
}

static int64_t dadd(int64_t a, int64_t b)
{
    if (a == UNK || b == UNK)
        return UNK;
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    return a + b;
}

static void fmt_shape(char *buf, size_t cap, const shp *s)
{
    if (s->rank < 0) {
        snprintf(buf, cap, "[*]");
        return;
    }
    size_t len = 0;
    buf[len++] = '[';
    for (int32_t k = 0; k < s->rank && len + 24 < cap; k++) {
        int w = s->d[k] == UNK ? snprintf(buf + len, cap - len, "%s?", k ? "," : "")
                               : snprintf(buf + len, cap - len, "%s%lld", k ? "," : "", (long long)s->d[k]);
        if (w > 0)
            len += (size_t)w;
    }
    snprintf(buf + len, cap - len, "]");
}

/* ------------------------------------------------------------------------ */
/* values: integers (elements may be UNKE) or floats (always fully known)     */
/* ------------------------------------------------------------------------ */

typedef struct vals {
    bool isf;
    uint64_t n;
    union {
        int64_t i[MAXV];
        double f[MAXV];
    } u;
} vals;

static uint64_t rd_le(const unsigned char *p, unsigned n)
{
    uint64_t u = 0;
    for (unsigned b = 0; b < n; b++)
        u |= (uint64_t)p[b] << (8 * b);
    return u;
}

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

static bool tensor_vals(const ag_tensor *t, vals *v)
{
    if (!t)
        return false;
    if (ag_dtype_is_int(t->dtype)) {
        v->isf = false;
        return ag_inf_tensor_ints(t, v->u.i, MAXV, &v->n);
    }
    if (!ag_dtype_is_float(t->dtype))
        return false;
    uint64_t n = ag_tensor_numel(t);
    unsigned sz = ag_dtype_bits(t->dtype) / 8;
    if (n == UINT64_MAX || n > MAXV || (n > 0 && (!t->data || t->nbytes < n * sz)))
        return false;
    const unsigned char *p = t->data;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t u = rd_le(p + k * sz, sz);
        double d;
        if (t->dtype == AG_DT_F64) {
            memcpy(&d, &u, sizeof d);
        } else if (t->dtype == AG_DT_F32) {
            uint32_t w = (uint32_t)u;
            float f;
            memcpy(&f, &w, sizeof f);
            d = f;
        } else if (t->dtype == AG_DT_F16) {
            d = half_to_double((uint16_t)u);
        } else {
            uint32_t w = (uint32_t)u << 16;
            float f;
            memcpy(&f, &w, sizeof f);
            d = f;
        }
        v->u.f[k] = d;
    }
    v->isf = true;
    v->n = n;
    return true;
}

/* Value of input i: the full value, or (integers only) a partial one. */
static bool in_vals(const ag_infer_node *in, uint32_t i, vals *v)
{
    if (tensor_vals(ag_inf_in_value(in, i), v))
        return true;
    v->isf = false;
    return ag_inf_in_partial(in, i, v->u.i, MAXV, &v->n);
}

/* Integer elements of input i (full value only, no unknown elements). */
static bool in_ints_full(const ag_infer_node *in, uint32_t i, vals *v)
{
    if (!tensor_vals(ag_inf_in_value(in, i), v))
        return false;
    if (v->isf) {
        for (uint64_t k = 0; k < v->n; k++) {
            double d = v->u.f[k];
            if (!(d == floor(d)) || fabs(d) > 9.0e18)
                return false;
            v->u.i[k] = (int64_t)d;
        }
        v->isf = false;
    }
    return true;
}

static bool vals_all_known(const vals *v)
{
    if (v->isf)
        return true;
    for (uint64_t k = 0; k < v->n; k++)
        if (v->u.i[k] == UNKE)
            return false;
    return true;
}

static void wr_le(unsigned char *p, uint64_t u, unsigned n)
{
    for (unsigned b = 0; b < n; b++)
        p[b] = (unsigned char)(u >> (8 * b));
}

/* Sets output o to dtype dt, shape (rank, dims) and the value v when it can be
 * represented; a value with unknown elements becomes a partial value. */
static ag_status out_vals(ag_infer_node *in, uint32_t o, ag_dtype dt, int32_t rank, const int64_t *dims,
                          const vals *v)
{
    AG_TRY(ag_inf_set_out(in, o, dt, rank, dims));
    if (o >= ag_inf_nout(in) || rank < 0)
        return AG_OK;
    uint64_t n = 1;
    for (int32_t k = 0; k < rank; k++) {
        if (dims[k] < 0 || dims[k] > MAXV)
            return AG_OK;
        n *= (uint64_t)dims[k];
        if (n > MAXV)
            return AG_OK;
    }
    if (n != v->n)
        return AG_OK;
    if (!vals_all_known(v)) {
        if (rank <= 1 && dt == AG_DT_I64)
            return ag_inf_set_out_partial(in, o, n, v->u.i);
        return AG_OK;
    }
    bool fl = dt == AG_DT_F32 || dt == AG_DT_F64;
    if (!fl && !ag_dtype_is_int(dt))
        return AG_OK;
    unsigned sz = ag_dtype_bits(dt) / 8;
    unsigned char bytes[MAXV * 8];
    for (uint64_t k = 0; k < n; k++) {
        unsigned char *p = bytes + k * sz;
        if (fl) {
            double d = v->isf ? v->u.f[k] : (double)v->u.i[k];
            if (dt == AG_DT_F64) {
                uint64_t u;
                memcpy(&u, &d, sizeof u);
                wr_le(p, u, 8);
            } else {
                float f = (float)d;
                uint32_t u;
                memcpy(&u, &f, sizeof u);
                wr_le(p, u, 4);
            }
        } else {
            int64_t x;
            if (v->isf) {
                double d = v->u.f[k];
                if (!(d == floor(d)) || fabs(d) > 9.0e18)
                    return AG_OK; /* not exactly representable: shape only */
                x = (int64_t)d;
            } else {
                x = v->u.i[k];
            }
            if (dt == AG_DT_BOOL)
                x = x != 0;
            wr_le(p, (uint64_t)x, sz);
        }
    }
    ag_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    t.dims = dims;
    t.nbytes = n * sz;
    t.data = bytes;
    const ag_tensor *gt;
    AG_TRY(ag_graph_make_tensor(in->g, &t, &gt));
    return ag_desc_set_value(in->g, ag_node_output_desc(in->g, in->n, o), gt);
}

/* Output o: shape s and, when input i has a (partial) value, the same
 * elements (Reshape, Squeeze, Identity ... keep element order). */
static ag_status out_same_elems(ag_infer_node *in, uint32_t o, ag_dtype dt, const shp *s, uint32_t i)
{
    vals v;
    if (s->rank >= 0 && in_vals(in, i, &v))
        return out_vals(in, o, dt, s->rank, s->d, &v);
    return set_shp(in, o, dt, s);
}

/* Offset into a broadcast input (rank ri, dims di) of output element k
 * (output rank ro, dims dout). */
static uint64_t bcast_off(uint64_t k, int32_t ro, const int64_t *dout, int32_t ri, const int64_t *di)
{
    uint64_t off = 0, stride = 1;
    for (int32_t a = ro - 1; a >= 0; a--) {
        uint64_t idx = k % (uint64_t)dout[a];
        k /= (uint64_t)dout[a];
        int32_t b = a - (ro - ri);
        if (b >= 0) {
            if (di[b] != 1)
                off += idx * stride;
            stride *= (uint64_t)di[b];
        }
    }
    return off;
}

/* ------------------------------------------------------------------------ */
/* control-flow helpers                                                       */
/* ------------------------------------------------------------------------ */

static bool is_data_type(const char *t)
{
    return !strcmp(t, "Data") || !strcmp(t, "RefData");
}

/* Writes dtype, shape and value into a descriptor that is not an output of
 * the node being inferred (subgraph Data nodes). */
static ag_status desc_assign(ag_graph *g, ag_tensor_desc *d, ag_dtype dt, const shp *s, const ag_tensor *value)
{
    d->dtype = dt;
    AG_TRY(ag_desc_set_shape(g, d, s->rank, s->d));
    return ag_desc_set_value(g, d, value);
}

static shp desc_shp(const ag_tensor_desc *d)
{
    shp s;
    s.rank = d->rank;
    if (s.rank > 0)
        memcpy(s.d, d->dims, (size_t)s.rank * sizeof *s.d);
    return s;
}

/* Shape that covers both a and b: equal dims stay, differing dims become
 * unknown, differing ranks give unknown rank. */
static shp shp_merge(const shp *a, const shp *b)
{
    shp r;
    if (a->rank != b->rank || a->rank < 0) {
        r.rank = AG_RANK_UNKNOWN;
        return r;
    }
    r.rank = a->rank;
    for (int32_t k = 0; k < r.rank; k++)
        r.d[k] = a->d[k] == b->d[k] ? a->d[k] : UNK;
    return r;
}

static bool shp_equal(const shp *a, const shp *b)
{
    if (a->rank != b->rank)
        return false;
    for (int32_t k = 0; k < a->rank; k++)
        if (a->d[k] != b->d[k])
            return false;
    return true;
}

/* Parent input index of a subgraph Data node, or -1. */
static int64_t data_parent_index(const ag_graph *g, ag_node_id n)
{
    int64_t p;
    if (!is_data_type(ag_node_type(g, n)) || ag_node_num_outputs(g, n) == 0)
        return -1;
    if (!ag_attrs_get_int(ag_node_attrs_c(g, n), "_parent_node_index", &p))
        return -1;
    return p;
}

/* One subgraph of the node being inferred, indexed by parent position:
 * data[p] is the Data bound to parent input p, out[p] the NetOutput input
 * leaving as parent output p (AG_NONE when absent).  Built once per rule run
 * so that control nodes with many inputs stay linear. */
typedef struct subview {
    ag_sub_id s;
    ag_node_id net;
    uint32_t n;
    ag_node_id *data;
    uint32_t *out;
} subview;

static void subview_free(ag_ctx *ctx, subview *v)
{
    ag_free(ctx, v->data, (size_t)v->n * sizeof *v->data);
    ag_free(ctx, v->out, (size_t)v->n * sizeof *v->out);
    v->data = NULL;
    v->out = NULL;
}

static ag_status subview_init(ag_infer_node *in, ag_sub_id s, subview *v)
{
    ag_graph *g = in->g;
    uint32_t nin = ag_inf_nin(in), nout = ag_inf_nout(in);
    v->s = s;
    v->net = AG_NONE;
    v->n = (nin > nout ? nin : nout) + 1;
    v->data = ag_alloc(in->ctx, (size_t)v->n * sizeof *v->data);
    v->out = ag_alloc(in->ctx, (size_t)v->n * sizeof *v->out);
    if (!v->data || !v->out) {
        subview_free(in->ctx, v);
        return AG_OOM(in->ctx);
    }
    for (uint32_t k = 0; k < v->n; k++)
        v->data[k] = v->out[k] = AG_NONE;
    uint32_t cnt = ag_sub_node_count(g, s);
    for (uint32_t k = 0; k < cnt; k++) {
        ag_node_id n = ag_sub_node_at(g, s, k);
        int64_t p = data_parent_index(g, n);
        if (p >= 0 && p < v->n && v->data[p] == AG_NONE)
            v->data[p] = n;
        if (v->net == AG_NONE && !strcmp(ag_node_type(g, n), "NetOutput"))
            v->net = n;
    }
    uint32_t nn = v->net == AG_NONE ? 0 : ag_node_num_inputs(g, v->net);
    for (uint32_t i = 0; i < nn; i++) {
        int64_t q;
        if (ag_attrs_get_int(ag_node_input_desc_c(g, v->net, i)->attrs, "_parent_node_index", &q) && q >= 0 &&
            q < v->n && v->out[q] == AG_NONE)
            v->out[q] = i;
    }
    return AG_OK;
}

/* Subgraph output descriptor leaving as parent output p, or NULL. */
static const ag_tensor_desc *sub_output(const ag_graph *g, const subview *v, int64_t p)
{
    if (p < 0 || p >= v->n || v->out[p] == AG_NONE)
        return NULL;
    return ag_node_input_desc_c(g, v->net, v->out[p]);
}

static ag_tensor_desc *sub_input(ag_graph *g, const subview *v, int64_t p)
{
    if (p < 0 || p >= v->n || v->data[p] == AG_NONE)
        return NULL;
    return ag_node_output_desc(g, v->data[p], 0);
}

/* Binds every Data of the subgraph to the parent input its
 * _parent_node_index names (the parent decides: a shape the Data declared
 * may be left over from an earlier pass). */
static ag_status bind_sub_inputs(ag_infer_node *in, const subview *v, bool with_value)
{
    uint32_t nin = ag_inf_nin(in);
    for (uint32_t p = 0; p < nin && p < v->n; p++) {
        ag_tensor_desc *d = sub_input(in->g, v, p);
        const ag_tensor_desc *pd = ag_inf_in(in, p);
        if (!d || !pd)
            continue;
        shp ps = desc_shp(pd);
        ag_dtype dt = pd->dtype != AG_DT_UNDEFINED ? pd->dtype : d->dtype;
        AG_TRY(desc_assign(in->g, d, dt, &ps, with_value ? pd->value : NULL));
    }
    return AG_OK;
}

/* A branch that cannot run with the parent's shapes is inferred again as if
 * its inputs were unknown: what only depends on constants (captured values
 * included) keeps its shape, the rest becomes unknown rather than nonsense. */
static ag_status forget_branch_inputs(ag_infer_node *in, const subview *v)
{
    uint32_t nin = ag_inf_nin(in);
    for (uint32_t p = 0; p < nin && p < v->n; p++) {
        ag_tensor_desc *d = sub_input(in->g, v, p);
        if (!d || d->value)
            continue;
        shp u;
        u.rank = AG_RANK_UNKNOWN;
        AG_TRY(desc_assign(in->g, d, d->dtype, &u, NULL));
    }
    return AG_OK;
}

/* Branching ops (If, Case): every subgraph sees the same inputs; each parent
 * output covers the matching output of every branch.  A branch whose shapes
 * contradict themselves cannot be the one that runs with these inputs (a
 * model with an 8 kHz and a 16 kHz branch, bound to 16 kHz input): the
 * others decide, unless no branch is left. */
static ag_status branches_run(ag_infer_node *in, subview *views, uint32_t nsub, int64_t taken)
{
    ag_graph *g = in->g;
    uint32_t nout = ag_inf_nout(in), feasible = 0;
    bool *dead = ag_calloc(in->ctx, nsub, sizeof *dead);
    if (!dead)
        return AG_OOM(in->ctx);
    ag_status st = AG_OK;
    for (uint32_t k = 0; k < nsub && st == AG_OK; k++) {
        st = bind_sub_inputs(in, &views[k], true);
        if (st == AG_OK)
            st = ag_inf_run_sub(in, views[k].s);
        bool forgivable = taken >= 0 ? (int64_t)k != taken : nsub > 1 && (k + 1 < nsub || feasible > 0);
        if (st == AG_ESHAPE && forgivable) {
            dead[k] = true;
            ag_ctx_clear_error(in->ctx);
            st = forget_branch_inputs(in, &views[k]);
            if (st == AG_OK)
                st = ag_inf_run_sub_lenient(in, views[k].s);
        } else if (st == AG_OK) {
            feasible++;
            /* With a known selector only the taken branch gives the outputs. */
            dead[k] = taken >= 0 && (int64_t)k != taken;
        }
    }
    for (uint32_t o = 0; o < nout && st == AG_OK; o++) {
        shp m;
        ag_dtype dt = AG_DT_UNDEFINED;
        bool any = false, all = true;
        for (uint32_t k = 0; k < nsub; k++) {
            if (dead[k])
                continue;
            const ag_tensor_desc *d = sub_output(g, &views[k], o);
            if (!d) {
                all = false;
                continue;
            }
            shp s = desc_shp(d);
            if (dt == AG_DT_UNDEFINED)
                dt = d->dtype;
            else if (d->dtype != AG_DT_UNDEFINED && d->dtype != dt) {
                st = ag_inf_fail(in, "output %u: branch %u gives %s, an earlier branch %s", o, k,
                                 ag_dtype_name(d->dtype), ag_dtype_name(dt));
                break;
            }
            m = any ? shp_merge(&m, &s) : s;
            any = true;
        }
        if (st != AG_OK || !any)
            continue;
        if (!all)
            m.rank = AG_RANK_UNKNOWN;
        st = set_shp(in, o, dt, &m);
    }
    ag_free(in->ctx, dead, (size_t)nsub * sizeof *dead);
    return st;
}

/* Branch selected by a known input 0: If's condition (then = 0, else = 1),
 * Case's index (out of range selects the last branch); -1 when unknown. */
static int64_t taken_branch(ag_infer_node *in, uint32_t nsub)
{
    vals v;
    if (!tensor_vals(ag_inf_in_value(in, 0), &v) || v.n != 1)
        return -1;
    bool nz = v.isf ? v.u.f[0] != 0 : v.u.i[0] != 0;
    if (!strcmp(ag_node_type(in->g, in->n), "Case")) {
        if (v.isf)
            return -1;
        return v.u.i[0] >= 0 && v.u.i[0] < nsub ? v.u.i[0] : (int64_t)nsub - 1;
    }
    if (nsub != 2 || ag_inf_nin(in) == 0 || !strstr(ag_node_type(in->g, in->n), "If"))
        return -1;
    return nz ? 0 : 1;
}

/* The branch that runs is an inference result (attribute _taken_branch,
 * docs/onnx.md): reports leave the other branches' unknowns aside.  Every run
 * recomputes it, since a selector value may appear or go away. */
static ag_status record_taken(ag_infer_node *in, int64_t taken)
{
    ag_attrs *a = ag_node_attrs(in->g, in->n);
    int64_t old;
    if (taken < 0)
        return ag_attrs_find(a, "_taken_branch") ? ag_attrs_remove(in->g, a, "_taken_branch") : AG_OK;
    if (ag_attrs_get_int(a, "_taken_branch", &old) && old == taken)
        return AG_OK;
    return ag_attrs_set_int(in->g, a, "_taken_branch", taken);
}

static ag_status rule_branches(ag_infer_node *in)
{
    uint32_t nsub = ag_node_num_subs(in->g, in->n);
    if (nsub == 0)
        return AG_OK;
    subview *views = ag_calloc(in->ctx, nsub, sizeof *views);
    if (!views)
        return AG_OOM(in->ctx);
    ag_status st = AG_OK;
    uint32_t made = 0;
    for (; made < nsub && st == AG_OK; made++)
        st = subview_init(in, ag_node_sub(in->g, in->n, made), &views[made]);
    if (st == AG_OK) {
        int64_t taken = taken_branch(in, nsub);
        st = branches_run(in, views, nsub, taken);
        if (st == AG_OK)
            st = record_taken(in, taken);
    } else {
        made--; /* the failed one freed itself */
    }
    for (uint32_t k = 0; k < made; k++)
        subview_free(in->ctx, &views[k]);
    ag_free(in->ctx, views, (size_t)nsub * sizeof *views);
    return st;
}

static ag_status rule_if(ag_infer_node *in)
{
    const ag_tensor_desc *c = ag_inf_in(in, 0);
    if (c && c->rank > 0) {
        shp s = desc_shp(c);
        int64_t n = shp_numel(&s, 0, s.rank);
        if (n != UNK && n != 1)
            return ag_inf_fail(in, "input 0: condition must hold one element, has %lld", (long long)n);
    }
    return rule_branches(in);
}

/* Number of trailing parent inputs that carry captured outer values
 * (attribute _num_captured, set by the ONNX importer; absent means none). */
static uint32_t captured_count(const ag_infer_node *in)
{
    uint32_t nin = ag_inf_nin(in);
    int64_t c = ag_inf_attr_int_or(in, "_num_captured", 0);
    return c < 0 ? 0 : c > nin ? nin : (uint32_t)c;
}

/* Loops (the reference While; ONNX Loop is imported as one, see docs/onnx.md).
 * Every input is loop-carried: body Data p receives input p, body output p
 * feeds it back and leaves as parent output p.  The trailing _num_captured
 * inputs are captured values the body passes through unchanged, so they keep
 * their known values; parent outputs past the inputs are scan outputs,
 * stacked over the iterations (leading dim = trip count when known).  Where
 * the body changes a carried shape from one iteration to the next, the
 * changed dims become unknown: the body is inferred with the initial shapes,
 * generalised, and inferred once more. */
static ag_status loop_run(ag_infer_node *in, subview *body, subview *cond)
{
    ag_graph *g = in->g;
    uint32_t nin = ag_inf_nin(in), nout = ag_inf_nout(in);
    bool onnx = !strcmp(ag_inf_attr_string_or(in, "original_type", ""), "Loop");
    uint32_t ncapt = captured_count(in);
    uint32_t ncarried = nin < nout ? nin : nout;
    uint32_t nvar = nin - ncapt < ncarried ? nin - ncapt : ncarried; /* carried, not captured */

    /* Pass 1: initial shapes; only captured values keep their known values. */
    AG_TRY(bind_sub_inputs(in, body, true));
    for (uint32_t p = 0; p < nvar; p++) {
        ag_tensor_desc *d = sub_input(g, body, p);
        if (d)
            AG_TRY(ag_desc_set_value(g, d, NULL));
    }
    AG_TRY(ag_inf_run_sub(in, body->s));

    bool changed = false;
    for (uint32_t p = 0; p < ncarried; p++) {
        ag_tensor_desc *d = sub_input(g, body, p);
        const ag_tensor_desc *od = sub_output(g, body, p);
        if (!d || !od)
            continue;
        shp a = desc_shp(d), b = desc_shp(od);
        if (!shp_equal(&a, &b)) {
            shp m = shp_merge(&a, &b);
            AG_TRY(desc_assign(g, d, d->dtype, &m, NULL));
            changed = true;
        }
    }
    if (changed)
        AG_TRY(ag_inf_rerun_sub(in, body->s));

    /* An imported ONNX Loop runs exactly M times when M is known and its
     * condition starts true and is passed through unchanged by the body. */
    int64_t trips = UNK;
    vals mv, cv;
    if (onnx && ncarried >= 3 && in_ints_full(in, 0, &mv) && mv.n == 1 && mv.u.i[0] >= 0 &&
        mv.u.i[0] <= AG_MAX_DIM && in_ints_full(in, 1, &cv) && cv.n == 1 && cv.u.i[0] != 0 &&
        body->net != AG_NONE && body->out[1] != AG_NONE && body->data[1] != AG_NONE &&
        ag_node_input_src(g, body->net, body->out[1]).node == body->data[1])
        trips = mv.u.i[0];

    if (cond) {
        /* The condition sees the carried values as the body does. */
        AG_TRY(bind_sub_inputs(in, cond, true));
        for (uint32_t p = 0; p < nvar; p++) {
            ag_tensor_desc *d = sub_input(g, cond, p);
            const ag_tensor_desc *bd = sub_input(g, body, p);
            if (!d)
                continue;
            if (bd) {
                shp s = desc_shp(bd);
                AG_TRY(desc_assign(g, d, bd->dtype != AG_DT_UNDEFINED ? bd->dtype : d->dtype, &s, NULL));
            } else {
                AG_TRY(ag_desc_set_value(g, d, NULL));
            }
        }
        AG_TRY(ag_inf_run_sub(in, cond->s));
    }

    for (uint32_t o = 0; o < nout; o++) {
        const ag_tensor_desc *od = sub_output(g, body, o);
        if (o < ncarried) {
            const ag_tensor_desc *id = ag_inf_in(in, o);
            if (!od && !id)
                continue;
            shp s = od ? desc_shp(od) : desc_shp(id);
            if (od && id) {
                shp t = desc_shp(id);
                s = shp_merge(&s, &t);
            }
            ag_dtype dt = od && od->dtype != AG_DT_UNDEFINED ? od->dtype : id ? id->dtype : AG_DT_UNDEFINED;
            AG_TRY(set_shp(in, o, dt, &s));
        } else if (od) {
            shp s = desc_shp(od), r;
            r.rank = s.rank < 0 || s.rank >= AG_MAX_RANK ? AG_RANK_UNKNOWN : s.rank + 1;
            r.d[0] = trips;
            for (int32_t a = 0; a < s.rank && r.rank > 0; a++)
                r.d[a + 1] = s.d[a];
            AG_TRY(set_shp(in, o, od->dtype, &r));
        }
    }
    return AG_OK;
}

static ag_status rule_loop(ag_infer_node *in)
{
    uint32_t nsub = ag_node_num_subs(in->g, in->n);
    if (nsub == 0)
        return AG_OK;
    subview body, cond;
    AG_TRY(subview_init(in, ag_node_sub(in->g, in->n, nsub >= 2 ? 1 : 0), &body));
    ag_status st = AG_OK;
    if (nsub >= 2) {
        st = subview_init(in, ag_node_sub(in->g, in->n, 0), &cond);
        if (st != AG_OK) {
            subview_free(in->ctx, &body);
            return st;
        }
    }
    st = loop_run(in, &body, nsub >= 2 ? &cond : NULL);
    subview_free(in->ctx, &body);
    if (nsub >= 2)
        subview_free(in->ctx, &cond);
    return st;
}

/* Drops dims a (and b, when b >= 0) from s. */
static shp shp_drop(const shp *s, int32_t a, int32_t b)
{
    shp r;
    r.rank = s->rank < 0 ? AG_RANK_UNKNOWN : 0;
    for (int32_t k = 0; k < s->rank; k++)
        if (k != a && k != b)
            r.d[r.rank++] = s->d[k];
    return r;
}

/* Inserts extent d at position a of s (rank known, below AG_MAX_RANK). */
static shp shp_insert(const shp *s, int32_t a, int64_t d)
{
    shp r;
    r.rank = s->rank + 1;
    for (int32_t k = 0, c = 0; k < r.rank; k++)
        r.d[k] = k == a ? d : s->d[c++];
    return r;
}

/* ONNX Scan.  Opset 9+: inputs (N states, M scan inputs, captured...), body
 * inputs (N states, M slices without the scan axis), body outputs (N states,
 * K per-iteration values); parent outputs (N final states, K stacked values
 * with the iteration count inserted at scan_output_axes).  Opset 8 (input 0
 * is sequence_lens, which no body input receives): every input and output
 * carries a leading batch dim, scan inputs and outputs then the sequence. */
static ag_status scan_run(ag_infer_node *in, const subview *body)
{
    ag_graph *g = in->g;
    uint32_t nin = ag_inf_nin(in), nout = ag_inf_nout(in);
    int64_t m;
    if (!ag_inf_attr_int(in, "num_scan_inputs", &m) || m < 0 || m > nin)
        return AG_OK;
    bool v8 = nin > 0 && body->data[0] == AG_NONE;
    int64_t off = v8 ? 1 : 0;
    /* States come first; captured outer values come after the scan inputs. */
    int64_t ncapt = captured_count(in);
    int64_t nstates = (int64_t)nin - off - m - ncapt;
    if (nstates < 0 || nstates > nout)
        return ag_inf_fail(in, "cannot split %u inputs into states and %lld scan inputs", nin, (long long)m);
    const int64_t *in_axes = NULL, *out_axes = NULL;
    uint32_t nia = 0, noa = 0;
    if (!v8) {
        ag_inf_attr_ints(in, "scan_input_axes", &in_axes, &nia);
        ag_inf_attr_ints(in, "scan_output_axes", &out_axes, &noa);
    }

    int64_t iters = UNK, batch = UNK;
    bool iters_set = false;
    AG_TRY(bind_sub_inputs(in, body, false));
    for (int64_t p = off + nstates; p < off + nstates + m; p++) {
        ag_tensor_desc *d = sub_input(g, body, p);
        const ag_tensor_desc *pd = ag_inf_in(in, (uint32_t)p);
        if (!d || !pd)
            continue;
        shp s = desc_shp(pd), r;
        if (s.rank < 0) {
            r.rank = AG_RANK_UNKNOWN;
        } else if (v8) {
            if (s.rank < 2)
                return ag_inf_fail(in, "input %lld: rank %d lacks the batch and sequence dimensions", (long long)p,
                                   (int)s.rank);
            if (batch == UNK)
                batch = s.d[0];
            if (iters == UNK)
                iters = s.d[1];
            r = shp_drop(&s, 0, 1);
        } else {
            int64_t j = p - nstates;
            int64_t ax = (uint64_t)j < nia ? in_axes[j] : 0;
            int32_t a;
            if (!ag_inf_axis(ax, s.rank, &a))
                return ag_inf_fail(in, "input %lld: scan axis %lld out of range for rank %d", (long long)p,
                                   (long long)ax, (int)s.rank);
            if (iters_set && iters != UNK && s.d[a] != UNK && s.d[a] != iters)
                return ag_inf_fail(in, "input %lld: %lld iterations, an earlier scan input has %lld", (long long)p,
                                   (long long)s.d[a], (long long)iters);
            if (!iters_set || iters == UNK)
                iters = s.d[a];
            iters_set = true;
            r = shp_drop(&s, a, -1);
        }
        AG_TRY(desc_assign(g, d, pd->dtype, &r, NULL));
    }
    for (int64_t p = off; v8 && p < off + nstates; p++) {
        /* Opset 8 states carry the batch dim outside the body. */
        ag_tensor_desc *d = sub_input(g, body, p);
        const ag_tensor_desc *pd = ag_inf_in(in, (uint32_t)p);
        if (!d || !pd)
            continue;
        shp s = desc_shp(pd);
        if (s.rank == 0)
            return ag_inf_fail(in, "input %lld: a state needs the batch dimension", (long long)p);
        if (s.rank > 0 && batch == UNK)
            batch = s.d[0];
        shp r = shp_drop(&s, 0, -1);
        AG_TRY(desc_assign(g, d, pd->dtype, &r, NULL));
    }
    AG_TRY(ag_inf_run_sub(in, body->s));
    for (uint32_t o = 0; o < nout; o++) {
        const ag_tensor_desc *od = sub_output(g, body, o);
        if (!od)
            continue;
        shp s = desc_shp(od), r;
        bool state = (int64_t)o < nstates;
        int32_t extra = (v8 ? 1 : 0) + (state ? 0 : 1);
        if (s.rank < 0 || s.rank + extra > AG_MAX_RANK) {
            r.rank = AG_RANK_UNKNOWN;
        } else if (v8) {
            r = state ? shp_insert(&s, 0, batch) : shp_insert(&s, 0, iters);
            if (!state)
                r = shp_insert(&r, 0, batch);
        } else if (state) {
            r = s;
        } else {
            int64_t j = (int64_t)o - nstates;
            int64_t ax = (uint64_t)j < noa ? out_axes[j] : 0;
            int32_t a;
            if (!ag_inf_axis(ax, s.rank + 1, &a))
                return ag_inf_fail(in, "output %u: scan output axis %lld out of range for rank %d", o,
                                   (long long)ax, (int)s.rank + 1);
            r = shp_insert(&s, a, iters);
        }
        if (state) {
            const ag_tensor_desc *id = ag_inf_in(in, (uint32_t)(o + off));
            if (id) {
                shp t = desc_shp(id);
                r = shp_merge(&r, &t);
            }
        }
        AG_TRY(set_shp(in, o, od->dtype, &r));
    }
    return AG_OK;
}

static ag_status rule_scan(ag_infer_node *in)
{
    if (ag_node_num_subs(in->g, in->n) == 0)
        return AG_OK;
    subview body;
    AG_TRY(subview_init(in, ag_node_sub(in->g, in->n, 0), &body));
    ag_status st = scan_run(in, &body);
    subview_free(in->ctx, &body);
    return st;
}

/* Function-call-like nodes: inputs bind by index, outputs come back by index. */
static ag_status rule_call(ag_infer_node *in)
{
    return rule_branches(in);
}

/* ------------------------------------------------------------------------ */
/* sources                                                                    */
/* ------------------------------------------------------------------------ */

/* Data, Variable, RefData ...: keep the declared (or bound) descriptor. */
static ag_status rule_keep(ag_infer_node *in)
{
    (void)in;
    return AG_OK;
}

static ag_status make_const(ag_infer_node *in, ag_dtype dt, int32_t rank, const int64_t *dims, const void *data,
                            uint64_t nbytes)
{
    ag_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    t.dims = dims;
    t.nbytes = nbytes;
    t.data = data;
    const ag_tensor *gt;
    AG_TRY(ag_graph_make_tensor(in->g, &t, &gt));
    return ag_inf_set_out_value(in, 0, gt);
}

static ag_status rule_const(ag_infer_node *in)
{
    const ag_tensor *t = ag_inf_attr_tensor(in, "value");
    if (t)
        return ag_inf_set_out_value(in, 0, t);
    const ag_attrs *at = ag_node_attrs_c(in->g, in->n);
    const ag_attr *a;
    if ((a = ag_attrs_find(at, "value_int")) && a->kind == AG_ATTR_INT) {
        unsigned char b[8];
        wr_le(b, (uint64_t)a->v.i, 8);
        return make_const(in, AG_DT_I64, 0, NULL, b, 8);
    }
    if ((a = ag_attrs_find(at, "value_ints")) && (a->kind == AG_ATTR_INTS || a->kind == AG_ATTR_INT)) {
        vals v;
        const int64_t *p = a->kind == AG_ATTR_INTS ? a->v.is : &a->v.i;
        uint32_t n = a->kind == AG_ATTR_INTS ? a->count : 1;
        int64_t dims[1] = {n};
        if (n > MAXV)
            return ag_inf_set_out(in, 0, AG_DT_I64, 1, dims);
        v.isf = false;
        v.n = n;
        memcpy(v.u.i, p, (size_t)n * sizeof *p);
        return out_vals(in, 0, AG_DT_I64, 1, dims, &v);
    }
    if ((a = ag_attrs_find(at, "value_float")) && a->kind == AG_ATTR_FLOAT) {
        unsigned char b[4];
        uint32_t u;
        memcpy(&u, &a->v.f, sizeof u);
        wr_le(b, u, 4);
        return make_const(in, AG_DT_F32, 0, NULL, b, 4);
    }
    if ((a = ag_attrs_find(at, "value_floats")) && a->kind == AG_ATTR_FLOATS) {
        vals v;
        int64_t dims[1] = {a->count};
        if (a->count > MAXV)
            return ag_inf_set_out(in, 0, AG_DT_F32, 1, dims);
        v.isf = true;
        v.n = a->count;
        for (uint32_t k = 0; k < a->count; k++)
            v.u.f[k] = a->v.fs[k];
        return out_vals(in, 0, AG_DT_F32, 1, dims, &v);
    }
    if ((a = ag_attrs_find(at, "value_string")) && a->kind == AG_ATTR_STRING)
        return ag_inf_set_out(in, 0, AG_DT_STRING, 0, NULL);
    if ((a = ag_attrs_find(at, "value_strings")) && a->kind == AG_ATTR_STRINGS) {
        int64_t dims[1] = {a->count};
        return ag_inf_set_out(in, 0, AG_DT_STRING, 1, dims);
    }
    return AG_OK; /* nothing to go by: keep the declared descriptor */
}

static ag_status rule_constant_of_shape(ag_infer_node *in)
{
    const ag_tensor *vt = ag_inf_attr_tensor(in, "value");
    ag_dtype dt = vt ? vt->dtype : AG_DT_F32;
    vals v;
    shp s;
    if (!in_vals(in, 0, &v) || v.isf || v.n > AG_MAX_RANK) {
        shp is = in_shape(in, 0);
        int32_t r = is.rank == 1 && is.d[0] != UNK && is.d[0] <= AG_MAX_RANK ? (int32_t)is.d[0] : AG_RANK_UNKNOWN;
        return set_rank_unknown_dims(in, 0, dt, r);
    }
    s.rank = (int32_t)v.n;
    for (int32_t k = 0; k < s.rank; k++) {
        if (v.u.i[k] == UNKE) {
            s.d[k] = UNK;
        } else if (v.u.i[k] < 0) {
            return ag_inf_fail(in, "input 0: dimension %d is negative (%lld)", (int)k, (long long)v.u.i[k]);
        } else {
            s.d[k] = v.u.i[k];
        }
    }
    int64_t n = shp_numel(&s, 0, s.rank);
    unsigned sz = ag_dtype_bits(dt) / 8;
    bool have = !vt || (vt->data && ag_tensor_numel(vt) == 1 && vt->nbytes >= sz);
    if (n == UNK || n > MAXV || sz == 0 || dt == AG_DT_STRING || !have)
        return set_shp(in, 0, dt, &s);
    unsigned char bytes[MAXV * 8];
    unsigned char one[8] = {0};
    if (vt)
        memcpy(one, vt->data, sz);
    for (int64_t k = 0; k < n; k++)
        memcpy(bytes + (size_t)k * sz, one, sz);
    return make_const(in, dt, s.rank, s.d, bytes, (uint64_t)n * sz);
}

/* ------------------------------------------------------------------------ */
/* shape queries                                                              */
/* ------------------------------------------------------------------------ */

static ag_status rule_shape(ag_infer_node *in)
{
    shp s = in_shape(in, 0);
    int64_t one = UNK;
    if (s.rank < 0)
        return ag_inf_set_out(in, 0, AG_DT_I64, 1, &one);
    int64_t start = ag_inf_attr_int_or(in, "start", 0), end = ag_inf_attr_int_or(in, "end", s.rank);
    if (start < 0)
        start += s.rank;
    if (end < 0)
        end += s.rank;
    start = start < 0 ? 0 : start > s.rank ? s.rank : start;
    end = end < 0 ? 0 : end > s.rank ? s.rank : end;
    vals v;
    v.isf = false;
    v.n = end > start ? (uint64_t)(end - start) : 0;
    for (uint64_t k = 0; k < v.n; k++) {
        int64_t d = s.d[start + (int64_t)k];
        v.u.i[k] = d == UNK ? UNKE : d;
    }
    int64_t dims[1] = {(int64_t)v.n};
    return out_vals(in, 0, AG_DT_I64, 1, dims, &v);
}

static ag_status rule_size(ag_infer_node *in)
{
    shp s = in_shape(in, 0);
    vals v;
    v.isf = false;
    v.n = 1;
    v.u.i[0] = s.rank < 0 ? UNKE : shp_numel(&s, 0, s.rank);
    if (v.u.i[0] == UNK || v.u.i[0] == INT64_MAX) /* unknown, or past what is counted */
        v.u.i[0] = UNKE;
    return out_vals(in, 0, AG_DT_I64, 0, NULL, &v);
}

/* ------------------------------------------------------------------------ */
/* reshaping                                                                  */
/* ------------------------------------------------------------------------ */

static ag_status rule_reshape(ag_infer_node *in)
{
    shp is = in_shape(in, 0);
    ag_dtype dt = in_dt(in, 0);
    vals sv;
    bool have;
    if (has_in(in, 1)) {
        have = in_vals(in, 1, &sv) && !sv.isf;
    } else {
        const int64_t *a;
        uint32_t n;
        have = ag_inf_attr_ints(in, "shape", &a, &n) && n <= MAXV;
        if (have) {
            sv.isf = false;
            sv.n = n;
            memcpy(sv.u.i, a, (size_t)n * sizeof *a);
        }
    }
    if (!have || sv.n > AG_MAX_RANK) {
        shp ss = in_shape(in, 1);
        int32_t r = ss.rank == 1 && ss.d[0] != UNK && ss.d[0] <= AG_MAX_RANK ? (int32_t)ss.d[0] : AG_RANK_UNKNOWN;
        return set_rank_unknown_dims(in, 0, dt, r);
    }
    bool allowzero = ag_inf_attr_int_or(in, "allowzero", 0) != 0;
    shp os;
    os.rank = (int32_t)sv.n;
    int32_t neg = -1;
    bool matched[AG_MAX_RANK] = {false};
    for (int32_t k = 0; k < os.rank; k++) {
        int64_t e = sv.u.i[k];
        if (e == UNKE) {
            os.d[k] = UNK;
        } else if (e == -1) {
            if (neg >= 0)
                return ag_inf_fail(in, "input 1: more than one -1 in the target shape");
            neg = k;
            os.d[k] = UNK;
        } else if (e == 0 && !allowzero) {
            if (is.rank >= 0 && k >= is.rank)
                return ag_inf_fail(in, "input 1: element %d is 0 (copy) but the input has rank %d", (int)k,
                                   (int)is.rank);
            os.d[k] = is.rank >= 0 ? is.d[k] : UNK;
            if (is.rank >= 0)
                matched[k] = true;
        } else if (e < 0) {
            return ag_inf_fail(in, "input 1: element %d is %lld", (int)k, (long long)e);
        } else {
            os.d[k] = e;
        }
    }
    if (is.rank >= 0) {
        /* Dims copied by 0 cancel on both sides, so [?,3,4] -> [0,-1] still
         * gives [?,12]. */
        int64_t in_rest = 1, out_rest = 1;
        bool in_known = true, out_known = true;
        for (int32_t k = 0; k < is.rank; k++) {
            if (k < os.rank && matched[k])
                continue;
            if (is.d[k] == UNK)
                in_known = false;
            else
                in_rest = dmul(in_rest, is.d[k]);
        }
        for (int32_t k = 0; k < os.rank; k++) {
            if (matched[k] || k == neg)
                continue;
            if (os.d[k] == UNK)
                out_known = false;
            else
                out_rest = dmul(out_rest, os.d[k]);
        }
        if (in_known && out_known && in_rest != INT64_MAX && out_rest != INT64_MAX) {
            if (neg >= 0) {
                if (out_rest == 0) {
                    if (in_rest != 0)
                        return ag_inf_fail(in, "input 1: -1 next to a zero dimension");
                } else {
                    if (in_rest % out_rest != 0) {
                        char b[256];
                        fmt_shape(b, sizeof b, &is);
                        return ag_inf_fail(in, "cannot reshape input 0 %s: %lld elements are not a multiple of %lld",
                                           b, (long long)in_rest, (long long)out_rest);
                    }
                    os.d[neg] = in_rest / out_rest;
                }
            } else if (in_rest != out_rest) {
                char b1[256], b2[256];
                fmt_shape(b1, sizeof b1, &is);
                fmt_shape(b2, sizeof b2, &os);
                return ag_inf_fail(in, "cannot reshape input 0 %s (%lld elements) to %s (%lld elements)", b1,
                                   (long long)in_rest, b2, (long long)out_rest);
            }
        }
    }
    return out_same_elems(in, 0, dt, &os, 0);
}

static ag_status rule_flatten(ag_infer_node *in)
{
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 0);
    int64_t axis = ag_inf_attr_int_or(in, "axis", 1);
    os.rank = 2;
    if (is.rank < 0) {
        os.d[0] = os.d[1] = UNK;
        return set_shp(in, 0, dt, &os);
    }
    if (axis < 0)
        axis += is.rank;
    if (axis < 0 || axis > is.rank)
        return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d",
                           (long long)ag_inf_attr_int_or(in, "axis", 1), (int)is.rank);
    os.d[0] = shp_numel(&is, 0, (int32_t)axis);
    os.d[1] = shp_numel(&is, (int32_t)axis, is.rank);
    return out_same_elems(in, 0, dt, &os, 0);
}

/* Axes from input ai (newer opsets) or attribute "axes"; false when absent
 * or unknown.  *given tells whether the node specifies axes at all. */
static bool get_axes(const ag_infer_node *in, uint32_t ai, int64_t *axes, uint32_t *n, bool *given)
{
    const int64_t *a;
    uint32_t na;
    *given = false;
    if (has_in(in, ai)) {
        *given = true;
        vals v;
        if (!in_ints_full(in, ai, &v) || v.n > AG_MAX_RANK)
            return false;
        memcpy(axes, v.u.i, (size_t)v.n * sizeof *axes);
        *n = (uint32_t)v.n;
        return true;
    }
    if (ag_inf_attr_ints(in, "axes", &a, &na)) {
        *given = true;
        if (na > AG_MAX_RANK)
            return false;
        memcpy(axes, a, (size_t)na * sizeof *a);
        *n = na;
        return true;
    }
    return false;
}

static ag_status rule_squeeze(ag_infer_node *in)
{
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 0);
    int64_t axes[AG_MAX_RANK];
    uint32_t na = 0;
    bool given;
    bool known = get_axes(in, 1, axes, &na, &given);
    if (is.rank < 0 || (given && !known)) {
        return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
    }
    bool drop[AG_MAX_RANK] = {false};
    if (!given || na == 0) {
        for (int32_t k = 0; k < is.rank; k++) {
            if (is.d[k] == UNK)
                return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
            drop[k] = is.d[k] == 1;
        }
    } else {
        for (uint32_t j = 0; j < na; j++) {
            int32_t a;
            if (!ag_inf_axis(axes[j], is.rank, &a))
                return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)axes[j],
                                   (int)is.rank);
            if (is.d[a] != UNK && is.d[a] != 1)
                return ag_inf_fail(in, "cannot squeeze axis %lld of input 0: its extent is %lld", (long long)axes[j],
                                   (long long)is.d[a]);
            drop[a] = true;
        }
    }
    os.rank = 0;
    for (int32_t k = 0; k < is.rank; k++)
        if (!drop[k])
            os.d[os.rank++] = is.d[k];
    return out_same_elems(in, 0, dt, &os, 0);
}

/* Inserts size-1 dims at the given axes (normalised against the output rank). */
static ag_status unsqueeze_to(ag_infer_node *in, const shp *is, const int64_t *axes, uint32_t na, shp *os)
{
    if (is->rank < 0) {
        os->rank = AG_RANK_UNKNOWN;
        return AG_OK;
    }
    int32_t r = is->rank + (int32_t)na;
    if (r > AG_MAX_RANK)
        return ag_inf_fail(in, "output rank %d is too large", (int)r);
    bool ins[AG_MAX_RANK] = {false};
    for (uint32_t j = 0; j < na; j++) {
        int32_t a;
        if (!ag_inf_axis(axes[j], r, &a))
            return ag_inf_fail(in, "axis %lld out of range for output rank %d", (long long)axes[j], (int)r);
        if (ins[a])
            return ag_inf_fail(in, "axis %lld given twice", (long long)axes[j]);
        ins[a] = true;
    }
    os->rank = r;
    for (int32_t k = 0, c = 0; k < r; k++)
        os->d[k] = ins[k] ? 1 : is->d[c++];
    return AG_OK;
}

static ag_status rule_unsqueeze(ag_infer_node *in)
{
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 0);
    int64_t axes[AG_MAX_RANK];
    uint32_t na = 0;
    bool given;
    if (!get_axes(in, 1, axes, &na, &given))
        return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
    AG_TRY(unsqueeze_to(in, &is, axes, na, &os));
    return out_same_elems(in, 0, dt, &os, 0);
}

static ag_status rule_expand_dims(ag_infer_node *in)
{
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 0);
    int64_t axis;
    vals v;
    if (has_in(in, 1)) {
        if (!in_ints_full(in, 1, &v) || v.n != 1)
            return ag_inf_set_out(in, 0, dt, is.rank < 0 ? AG_RANK_UNKNOWN : is.rank + 1, NULL);
        axis = v.u.i[0];
    } else if (!ag_inf_attr_int(in, "axis", &axis)) {
        return AG_OK;
    }
    AG_TRY(unsqueeze_to(in, &is, &axis, 1, &os));
    return out_same_elems(in, 0, dt, &os, 0);
}

static ag_status rule_transpose(ag_infer_node *in)
{
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 0);
    if (is.rank < 0)
        return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
    const int64_t *perm;
    uint32_t np;
    int64_t rev[AG_MAX_RANK];
    if (!ag_inf_attr_ints(in, "perm", &perm, &np)) {
        for (int32_t k = 0; k < is.rank; k++)
            rev[k] = is.rank - 1 - k;
        perm = rev;
        np = (uint32_t)is.rank;
    }
    if (np != (uint32_t)is.rank)
        return ag_inf_fail(in, "perm has %u entries for input 0 of rank %d", np, (int)is.rank);
    bool seen[AG_MAX_RANK] = {false};
    os.rank = is.rank;
    for (uint32_t k = 0; k < np; k++) {
        int32_t a;
        if (!ag_inf_axis(perm[k], is.rank, &a) || seen[a])
            return ag_inf_fail(in, "perm is not a permutation of 0..%d", (int)is.rank - 1);
        seen[a] = true;
        os.d[k] = is.d[a];
    }
    vals v;
    if (!shp_known(&is) || !in_vals(in, 0, &v))
        return set_shp(in, 0, dt, &os);
    /* Small constant values move too (pads built as a [2,n] table and
     * transposed before a Reshape, in exported Pad chains). */
    int64_t stride[AG_MAX_RANK], st = 1;
    for (int32_t k = is.rank - 1; k >= 0; k--) {
        stride[k] = st;
        st *= is.d[k];
    }
    vals out;
    out.isf = v.isf;
    out.n = v.n;
    for (uint64_t e = 0; e < v.n; e++) {
        uint64_t rem = e;
        int64_t off = 0;
        for (int32_t k = os.rank - 1; k >= 0; k--) {
            int32_t a;
            ag_inf_axis(perm[k], is.rank, &a);
            off += (int64_t)(rem % (uint64_t)os.d[k]) * stride[a];
            rem /= (uint64_t)os.d[k];
        }
        if (v.isf)
            out.u.f[e] = v.u.f[off];
        else
            out.u.i[e] = v.u.i[off];
    }
    return out_vals(in, 0, dt, os.rank, os.d, &out);
}

/* ------------------------------------------------------------------------ */
/* joining and splitting                                                      */
/* ------------------------------------------------------------------------ */

static ag_status rule_concat(ag_infer_node *in)
{
    uint32_t nin = ag_inf_nin(in);
    int64_t axis;
    if (!ag_inf_attr_int(in, "axis", &axis))
        axis = ag_inf_attr_int_or(in, "concat_dim", 0);
    shp os;
    os.rank = AG_RANK_UNKNOWN;
    ag_dtype dt = AG_DT_UNDEFINED;
    int32_t a = 0;
    int64_t sum = 0;
    uint32_t present = 0;
    for (uint32_t i = 0; i < nin; i++) {
        if (!has_in(in, i))
            continue;
        shp s = in_shape(in, i);
        if (dt == AG_DT_UNDEFINED)
            dt = in_dt(in, i);
        present++;
        if (s.rank < 0) {
            sum = UNK;
            continue;
        }
        if (os.rank < 0) {
            if (!ag_inf_axis(axis, s.rank, &a))
                return ag_inf_fail(in, "axis %lld out of range for input %u of rank %d", (long long)axis, i,
                                   (int)s.rank);
            os = s;
        } else if (s.rank != os.rank) {
            return ag_inf_fail(in, "input %u has rank %d, an earlier input rank %d", i, (int)s.rank, (int)os.rank);
        } else {
            for (int32_t k = 0; k < s.rank; k++) {
                if (k == a)
                    continue;
                if (os.d[k] == UNK)
                    os.d[k] = s.d[k];
                else if (s.d[k] != UNK && s.d[k] != os.d[k])
                    return ag_inf_fail(in, "input %u: dimension %d is %lld, an earlier input has %lld", i, (int)k,
                                       (long long)s.d[k], (long long)os.d[k]);
            }
        }
        sum = dadd(sum, s.d[a]);
    }
    if (os.rank < 0 || present == 0)
        return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
    os.d[a] = sum;
    /* Values: concatenate along the axis. */
    int64_t outer = shp_numel(&os, 0, a), inner = shp_numel(&os, a + 1, os.rank);
    int64_t total = shp_numel(&os, 0, os.rank);
    if (outer == UNK || inner == UNK || total == UNK || total > MAXV)
        return set_shp(in, 0, dt, &os);
    vals out, v;
    out.n = (uint64_t)total;
    out.isf = false;
    bool first = true;
    uint64_t base = 0;
    for (uint32_t i = 0; i < nin; i++) {
        if (!has_in(in, i))
            continue;
        shp s = in_shape(in, i);
        if (!in_vals(in, i, &v) || s.rank != os.rank || s.d[a] == UNK)
            return set_shp(in, 0, dt, &os);
        if (first)
            out.isf = v.isf;
        else if (out.isf != v.isf)
            return set_shp(in, 0, dt, &os);
        first = false;
        uint64_t chunk = (uint64_t)s.d[a] * (uint64_t)inner;
        if (v.n != chunk * (uint64_t)outer)
            return set_shp(in, 0, dt, &os);
        for (int64_t o = 0; o < outer; o++) {
            uint64_t dst = (uint64_t)o * (uint64_t)os.d[a] * (uint64_t)inner + base;
            if (v.isf)
                memcpy(&out.u.f[dst], &v.u.f[(uint64_t)o * chunk], (size_t)chunk * sizeof(double));
            else
                memcpy(&out.u.i[dst], &v.u.i[(uint64_t)o * chunk], (size_t)chunk * sizeof(int64_t));
        }
        base += chunk;
    }
    return out_vals(in, 0, dt, os.rank, os.d, &out);
}

/* Copies the elements of v (shape s) selected by per-axis start/step/len
 * into out (shape with len dims). */
static void slice_vals(const vals *v, const shp *s, const int64_t *start, const int64_t *step, const shp *os,
                       vals *out)
{
    uint64_t n = 1;
    for (int32_t k = 0; k < os->rank; k++)
        n *= (uint64_t)os->d[k];
    int64_t stride[AG_MAX_RANK];
    int64_t st = 1;
    for (int32_t k = s->rank - 1; k >= 0; k--) {
        stride[k] = st;
        st *= s->d[k];
    }
    out->isf = v->isf;
    out->n = n;
    for (uint64_t e = 0; e < n; e++) {
        uint64_t rem = e;
        int64_t off = 0;
        for (int32_t k = os->rank - 1; k >= 0; k--) {
            int64_t idx = (int64_t)(rem % (uint64_t)os->d[k]);
            rem /= (uint64_t)os->d[k];
            off += (start[k] + idx * step[k]) * stride[k];
        }
        if (v->isf)
            out->u.f[e] = v->u.f[off];
        else
            out->u.i[e] = v->u.i[off];
    }
}

static ag_status rule_split(ag_infer_node *in)
{
    shp is = in_shape(in, 0);
    ag_dtype dt = in_dt(in, 0);
    uint32_t nout = ag_inf_nout(in);
    int64_t axis = ag_inf_attr_int_or(in, "axis", 0);
    if (nout == 0)
        return AG_OK;
    if (is.rank < 0) {
        for (uint32_t o = 0; o < nout; o++)
            AG_TRY(ag_inf_set_out(in, o, dt, AG_RANK_UNKNOWN, NULL));
        return AG_OK;
    }
    int32_t a;
    if (!ag_inf_axis(axis, is.rank, &a))
        return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)axis, (int)is.rank);
    int64_t sizes[AG_MAX_RANK * 4];
    uint32_t ns = 0;
    bool known = true;
    const int64_t *sa;
    uint32_t nsa;
    vals v;
    if (has_in(in, 1)) {
        if (in_ints_full(in, 1, &v) && v.n <= sizeof sizes / sizeof *sizes) {
            ns = (uint32_t)v.n;
            memcpy(sizes, v.u.i, (size_t)ns * sizeof *sizes);
        } else {
            known = false;
        }
    } else if (ag_inf_attr_ints(in, "split", &sa, &nsa)) {
        if (nsa > sizeof sizes / sizeof *sizes)
            known = false;
        else {
            ns = nsa;
            memcpy(sizes, sa, (size_t)ns * sizeof *sizes);
        }
    } else {
        int64_t nparts = ag_inf_attr_int_or(in, "num_outputs", 0);
        bool explicit_n = nparts > 0;
        if (!explicit_n)
            nparts = nout;
        if (nparts != nout)
            return ag_inf_fail(in, "num_outputs is %lld but the node has %u outputs", (long long)nparts, nout);
        if (nout > sizeof sizes / sizeof *sizes || is.d[a] == UNK) {
            known = false;
        } else {
            int64_t d = is.d[a];
            if (!explicit_n && d % nparts != 0)
                return ag_inf_fail(in, "cannot split extent %lld of axis %d into %lld equal parts", (long long)d,
                                   (int)a, (long long)nparts);
            int64_t chunk = (d + nparts - 1) / nparts;
            ns = nout;
            for (uint32_t k = 0; k < nout; k++) {
                int64_t rest = d - chunk * (int64_t)k;
                sizes[k] = rest < 0 ? 0 : rest < chunk ? rest : chunk;
            }
        }
    }
    if (known) {
        if (ns != nout)
            return ag_inf_fail(in, "split has %u sizes for %u outputs", ns, nout);
        int64_t sum = 0;
        for (uint32_t k = 0; k < ns; k++) {
            if (sizes[k] < 0)
                return ag_inf_fail(in, "split size %u is negative (%lld)", k, (long long)sizes[k]);
            sum = dadd(sum, sizes[k]);
        }
        if (is.d[a] != UNK && sum != is.d[a])
            return ag_inf_fail(in, "split sizes sum to %lld, axis %d of input 0 has %lld", (long long)sum, (int)a,
                               (long long)is.d[a]);
    }
    bool have_v = known && shp_known(&is) && in_vals(in, 0, &v);
    int64_t off = 0;
    for (uint32_t o = 0; o < nout; o++) {
        shp os = is;
        os.d[a] = known ? sizes[o] : UNK;
        if (have_v) {
            int64_t start[AG_MAX_RANK] = {0}, step[AG_MAX_RANK];
            for (int32_t k = 0; k < is.rank; k++)
                step[k] = 1;
            start[a] = off;
            vals out;
            slice_vals(&v, &is, start, step, &os, &out);
            AG_TRY(out_vals(in, o, dt, os.rank, os.d, &out));
        } else {
            AG_TRY(set_shp(in, o, dt, &os));
        }
        if (known)
            off += sizes[o];
    }
    return AG_OK;
}

static ag_status rule_slice(ag_infer_node *in)
{
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 0);
    if (is.rank < 0)
        return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
    os = is;
    int64_t starts[AG_MAX_RANK], ends[AG_MAX_RANK], axes[AG_MAX_RANK], steps[AG_MAX_RANK];
    uint32_t n = 0;
    bool known = true;
    vals v;
    const int64_t *a;
    uint32_t na;
    bool from_inputs = ag_inf_nin(in) >= 3 && has_in(in, 1);
    if (from_inputs) {
        if (!in_ints_full(in, 1, &v) || v.n > AG_MAX_RANK)
            known = false;
        else {
            n = (uint32_t)v.n;
            memcpy(starts, v.u.i, (size_t)n * sizeof *starts);
        }
        if (known && (!in_ints_full(in, 2, &v) || v.n != n))
            known = false;
        else if (known)
            memcpy(ends, v.u.i, (size_t)n * sizeof *ends);
        if (known && has_in(in, 3)) {
            if (!in_ints_full(in, 3, &v) || v.n != n)
                known = false;
            else
                memcpy(axes, v.u.i, (size_t)n * sizeof *axes);
        } else {
            for (uint32_t k = 0; k < n; k++)
                axes[k] = k;
        }
        if (known && has_in(in, 4)) {
            if (!in_ints_full(in, 4, &v) || v.n != n)
                known = false;
            else
                memcpy(steps, v.u.i, (size_t)n * sizeof *steps);
        } else {
            for (uint32_t k = 0; k < n; k++)
                steps[k] = 1;
        }
        if (!known && has_in(in, 3) && in_ints_full(in, 3, &v) && v.n <= AG_MAX_RANK) {
            /* Bounds unknown but axes known: only those axes lose their extent. */
            for (uint64_t k = 0; k < v.n; k++) {
                int32_t ax;
                if (ag_inf_axis(v.u.i[k], is.rank, &ax))
                    os.d[ax] = UNK;
            }
            return set_shp(in, 0, dt, &os);
        }
    } else {
        if (!ag_inf_attr_ints(in, "starts", &a, &na) || na > AG_MAX_RANK)
            return set_rank_unknown_dims(in, 0, dt, is.rank);
        n = na;
        memcpy(starts, a, (size_t)n * sizeof *a);
        if (!ag_inf_attr_ints(in, "ends", &a, &na) || na != n)
            return ag_inf_fail(in, "attributes starts and ends differ in length");
        memcpy(ends, a, (size_t)n * sizeof *a);
        if (ag_inf_attr_ints(in, "axes", &a, &na)) {
            if (na != n)
                return ag_inf_fail(in, "attribute axes has %u entries, starts %u", na, n);
            memcpy(axes, a, (size_t)n * sizeof *a);
        } else {
            for (uint32_t k = 0; k < n; k++)
                axes[k] = k;
        }
        for (uint32_t k = 0; k < n; k++)
            steps[k] = 1;
    }
    if (!known)
        return set_rank_unknown_dims(in, 0, dt, is.rank);
    int64_t vstart[AG_MAX_RANK] = {0}, vstep[AG_MAX_RANK];
    bool seen[AG_MAX_RANK] = {false};
    for (int32_t k = 0; k < is.rank; k++)
        vstep[k] = 1;
    for (uint32_t k = 0; k < n; k++) {
        int32_t ax;
        if (!ag_inf_axis(axes[k], is.rank, &ax))
            return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)axes[k], (int)is.rank);
        if (seen[ax])
            return ag_inf_fail(in, "axis %lld given twice", (long long)axes[k]);
        seen[ax] = true;
        int64_t st = steps[k], d = is.d[ax];
        if (st == 0)
            return ag_inf_fail(in, "step for axis %lld is 0", (long long)axes[k]);
        if (d == UNK) {
            os.d[ax] = UNK;
            continue;
        }
        int64_t s = starts[k], e = ends[k];
        if (s < 0)
            s = s < -d ? 0 : s + d;
        if (e < 0)
            e = e < -d ? -1 : e + d;
        int64_t len;
        if (st > 0) {
            s = s < 0 ? 0 : s > d ? d : s;
            e = e < 0 ? 0 : e > d ? d : e;
            len = e > s ? (e - s + st - 1) / st : 0;
        } else {
            s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
            len = s > e ? (s - e + (-st) - 1) / (-st) : 0;
        }
        os.d[ax] = len;
        vstart[ax] = s;
        vstep[ax] = st;
    }
    if (shp_known(&is) && shp_known(&os) && in_vals(in, 0, &v)) {
        vals out;
        slice_vals(&v, &is, vstart, vstep, &os, &out);
        return out_vals(in, 0, dt, os.rank, os.d, &out);
    }
    return set_shp(in, 0, dt, &os);
}

/* ------------------------------------------------------------------------ */
/* indexing                                                                   */
/* ------------------------------------------------------------------------ */

static ag_status rule_gather(ag_infer_node *in)
{
    shp ds = in_shape(in, 0), is = in_shape(in, 1), os;
    ag_dtype dt = in_dt(in, 0);
    int64_t axis = ag_inf_attr_int_or(in, "axis", 0);
    if (ds.rank < 0 || is.rank < 0)
        return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
    int32_t a;
    if (!ag_inf_axis(axis, ds.rank, &a))
        return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)axis, (int)ds.rank);
    os.rank = ds.rank - 1 + is.rank;
    if (os.rank > AG_MAX_RANK)
        return ag_inf_fail(in, "output rank %d is too large", (int)os.rank);
    int32_t c = 0;
    for (int32_t k = 0; k < a; k++)
        os.d[c++] = ds.d[k];
    for (int32_t k = 0; k < is.rank; k++)
        os.d[c++] = is.d[k];
    for (int32_t k = a + 1; k < ds.rank; k++)
        os.d[c++] = ds.d[k];
    vals dv, iv;
    if (!shp_known(&ds) || !shp_known(&os) || !in_vals(in, 0, &dv) || !in_ints_full(in, 1, &iv))
        return set_shp(in, 0, dt, &os);
    int64_t outer = shp_numel(&ds, 0, a), inner = shp_numel(&ds, a + 1, ds.rank), dax = ds.d[a];
    int64_t total = shp_numel(&os, 0, os.rank);
    if (total > MAXV || (uint64_t)(outer * dax * inner) != dv.n)
        return set_shp(in, 0, dt, &os);
    vals out;
    out.isf = dv.isf;
    out.n = (uint64_t)total;
    uint64_t e = 0;
    for (int64_t o = 0; o < outer; o++)
        for (uint64_t j = 0; j < iv.n; j++) {
            int64_t idx = iv.u.i[j];
            if (idx < -dax || idx >= dax)
                return ag_inf_fail(in, "input 1: index %lld out of range for extent %lld of axis %d",
                                   (long long)idx, (long long)dax, (int)a);
            if (idx < 0)
                idx += dax;
            for (int64_t k = 0; k < inner; k++, e++) {
                uint64_t src = (uint64_t)((o * dax + idx) * inner + k);
                if (dv.isf)
                    out.u.f[e] = dv.u.f[src];
                else
                    out.u.i[e] = dv.u.i[src];
            }
        }
    return out_vals(in, 0, dt, os.rank, os.d, &out);
}

static ag_status rule_gather_elements(ag_infer_node *in)
{
    shp ds = in_shape(in, 0), is = in_shape(in, 1);
    if (ds.rank >= 0 && is.rank >= 0 && ds.rank != is.rank)
        return ag_inf_fail(in, "input 1 has rank %d, input 0 rank %d", (int)is.rank, (int)ds.rank);
    return set_shp(in, 0, in_dt(in, 0), &is);
}

static ag_status rule_gather_nd(ag_infer_node *in)
{
    shp ds = in_shape(in, 0), is = in_shape(in, 1), os;
    ag_dtype dt = in_dt(in, 0);
    int64_t b = ag_inf_attr_int_or(in, "batch_dims", 0);
    if (ds.rank < 0 || is.rank < 1 || is.d[is.rank - 1] == UNK)
        return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
    int64_t last = is.d[is.rank - 1];
    if (b < 0 || b >= is.rank || b >= ds.rank || last + b > ds.rank)
        return ag_inf_fail(in, "indices of depth %lld with batch_dims %lld do not fit input 0 of rank %d",
                           (long long)last, (long long)b, (int)ds.rank);
    os.rank = 0;
    for (int32_t k = 0; k < is.rank - 1; k++)
        os.d[os.rank++] = is.d[k];
    for (int64_t k = b + last; k < ds.rank; k++)
        os.d[os.rank++] = ds.d[k];
    return set_shp(in, 0, dt, &os);
}

static ag_status rule_like_input0(ag_infer_node *in)
{
    return ag_inf_same_as_input(in, 0, 0);
}

/* ------------------------------------------------------------------------ */
/* broadcasting and repetition                                                */
/* ------------------------------------------------------------------------ */

static ag_status broadcast_all(ag_infer_node *in, uint32_t first, uint32_t count, shp *os)
{
    bool any = false;
    for (uint32_t i = first; i < first + count; i++) {
        if (!has_in(in, i))
            continue;
        shp s = in_shape(in, i);
        if (!any) {
            *os = s;
            any = true;
            continue;
        }
        shp r;
        if (!ag_inf_broadcast(os->rank, os->d, s.rank, s.d, &r.rank, r.d)) {
            char b1[256], b2[256];
            fmt_shape(b1, sizeof b1, os);
            fmt_shape(b2, sizeof b2, &s);
            return ag_inf_fail(in, "input %u: shape %s does not broadcast with %s", i, b2, b1);
        }
        *os = r;
    }
    if (!any)
        os->rank = AG_RANK_UNKNOWN;
    return AG_OK;
}

static ag_status rule_expand(ag_infer_node *in)
{
    shp is = in_shape(in, 0), ss, os;
    ag_dtype dt = in_dt(in, 0);
    vals v;
    if (!in_vals(in, 1, &v) || v.isf || v.n > AG_MAX_RANK) {
        shp sh = in_shape(in, 1);
        if (sh.rank != 1 || sh.d[0] == UNK || sh.d[0] > AG_MAX_RANK || is.rank < 0)
            return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
        ss.rank = (int32_t)sh.d[0];
        for (int32_t k = 0; k < ss.rank; k++)
            ss.d[k] = UNK;
    } else {
        ss.rank = (int32_t)v.n;
        for (int32_t k = 0; k < ss.rank; k++) {
            if (v.u.i[k] != UNKE && v.u.i[k] < 0)
                return ag_inf_fail(in, "input 1: dimension %d is negative (%lld)", (int)k, (long long)v.u.i[k]);
            ss.d[k] = v.u.i[k] == UNKE ? UNK : v.u.i[k];
        }
    }
    if (is.rank < 0) {
        return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
    }
    if (!ag_inf_broadcast(is.rank, is.d, ss.rank, ss.d, &os.rank, os.d)) {
        char b1[256], b2[256];
        fmt_shape(b1, sizeof b1, &is);
        fmt_shape(b2, sizeof b2, &ss);
        return ag_inf_fail(in, "input 0 %s cannot be expanded to %s", b1, b2);
    }
    int64_t total = shp_numel(&os, 0, os.rank);
    vals dv;
    if (total == UNK || total > MAXV || !shp_known(&is) || !in_vals(in, 0, &dv))
        return set_shp(in, 0, dt, &os);
    vals out;
    out.isf = dv.isf;
    out.n = (uint64_t)total;
    for (uint64_t k = 0; k < out.n; k++) {
        uint64_t src = bcast_off(k, os.rank, os.d, is.rank, is.d);
        if (dv.isf)
            out.u.f[k] = dv.u.f[src];
        else
            out.u.i[k] = dv.u.i[src];
    }
    return out_vals(in, 0, dt, os.rank, os.d, &out);
}

static ag_status rule_tile(ag_infer_node *in)
{
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 0);
    vals v;
    bool known;
    const int64_t *a;
    uint32_t na;
    if (has_in(in, 1)) {
        known = in_vals(in, 1, &v) && !v.isf;
    } else {
        known = ag_inf_attr_ints(in, "multiples", &a, &na) && na <= AG_MAX_RANK;
        if (known) {
            v.isf = false;
            v.n = na;
            memcpy(v.u.i, a, (size_t)na * sizeof *a);
        }
    }
    if (is.rank < 0)
        return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
    if (!known)
        return set_rank_unknown_dims(in, 0, dt, is.rank);
    if (v.n != (uint64_t)is.rank)
        return ag_inf_fail(in, "input 1 has %llu repeats for input 0 of rank %d", (unsigned long long)v.n,
                           (int)is.rank);
    os.rank = is.rank;
    for (int32_t k = 0; k < is.rank; k++) {
        if (v.u.i[k] != UNKE && v.u.i[k] < 0)
            return ag_inf_fail(in, "input 1: repeat %d is negative (%lld)", (int)k, (long long)v.u.i[k]);
        os.d[k] = v.u.i[k] == UNKE ? UNK : dmul(is.d[k], v.u.i[k]);
    }
    int64_t total = shp_numel(&os, 0, os.rank);
    vals dv;
    if (total == UNK || total > MAXV || !shp_known(&is) || !in_vals(in, 0, &dv))
        return set_shp(in, 0, dt, &os);
    vals out;
    out.isf = dv.isf;
    out.n = (uint64_t)total;
    for (uint64_t k = 0; k < out.n; k++) {
        uint64_t rem = k, off = 0, stride = 1;
        for (int32_t d = os.rank - 1; d >= 0; d--) {
            uint64_t idx = rem % (uint64_t)os.d[d];
            rem /= (uint64_t)os.d[d];
            off += (idx % (uint64_t)is.d[d]) * stride;
            stride *= (uint64_t)is.d[d];
        }
        if (dv.isf)
            out.u.f[k] = dv.u.f[off];
        else
            out.u.i[k] = dv.u.i[off];
    }
    return out_vals(in, 0, dt, os.rank, os.d, &out);
}

static ag_status rule_pad(ag_infer_node *in)
{
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 0);
    if (is.rank < 0)
        return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
    os = is;
    int64_t pads[2 * AG_MAX_RANK], axes[AG_MAX_RANK];
    uint32_t np = 0, nax;
    const int64_t *a;
    uint32_t na;
    vals v;
    if (has_in(in, 1)) {
        if (!in_vals(in, 1, &v) || v.isf || v.n > 2 * AG_MAX_RANK)
            return set_rank_unknown_dims(in, 0, dt, is.rank);
        np = (uint32_t)v.n;
        memcpy(pads, v.u.i, (size_t)np * sizeof *pads);
    } else if (ag_inf_attr_ints(in, "pads", &a, &na) || ag_inf_attr_ints(in, "paddings", &a, &na)) {
        if (na > 2 * AG_MAX_RANK)
            return ag_inf_fail(in, "%u pads for input 0 of rank %d", na, (int)is.rank);
        np = na;
        memcpy(pads, a, (size_t)np * sizeof *pads);
    } else {
        return set_shp(in, 0, dt, &is);
    }
    bool given;
    uint32_t n_axes = 0;
    if (get_axes(in, 3, axes, &n_axes, &given) && given && ag_inf_nin(in) > 3) {
        nax = n_axes;
    } else if (given && ag_inf_nin(in) > 3) {
        return set_rank_unknown_dims(in, 0, dt, is.rank);
    } else {
        nax = (uint32_t)is.rank;
        for (uint32_t k = 0; k < nax; k++)
            axes[k] = k;
    }
    if (np != 2 * nax)
        return ag_inf_fail(in, "%u pads for %u axes (need twice as many)", np, nax);
    for (uint32_t k = 0; k < nax; k++) {
        int32_t ax;
        if (!ag_inf_axis(axes[k], is.rank, &ax))
            return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)axes[k], (int)is.rank);
        int64_t b = pads[k], e = pads[k + nax];
        if (b == UNKE || e == UNKE || is.d[ax] == UNK) {
            os.d[ax] = UNK;
            continue;
        }
        int64_t d = is.d[ax] + b + e;
        if (d < 0)
            return ag_inf_fail(in, "padding axis %d (extent %lld) by %lld and %lld leaves a negative extent", (int)ax,
                               (long long)is.d[ax], (long long)b, (long long)e);
        os.d[ax] = d;
    }
    return set_shp(in, 0, dt, &os);
}

/* Resize (opset 10: X, scales; 11+: X, roi, scales, sizes) and Upsample
 * (scales attribute, or input 1). */
static ag_status rule_resize(ag_infer_node *in)
{
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 0);
    if (is.rank < 0)
        return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
    os = is;
    bool upsample = !strcmp(ag_node_type(in->g, in->n), "Upsample");
    uint32_t nin = ag_inf_nin(in);
    uint32_t scales_i = upsample || nin == 2 ? 1 : 2, sizes_i = upsample || nin == 2 ? UINT32_MAX : 3;
    int64_t axes[AG_MAX_RANK];
    uint32_t nax = 0;
    const int64_t *a;
    uint32_t na;
    if (ag_inf_attr_ints(in, "axes", &a, &na)) {
        if (na > AG_MAX_RANK)
            return ag_inf_fail(in, "attribute axes has %u entries", na);
        nax = na;
        for (uint32_t k = 0; k < na; k++) {
            int32_t ax;
            if (!ag_inf_axis(a[k], is.rank, &ax))
                return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)a[k],
                                   (int)is.rank);
            axes[k] = ax;
        }
    } else {
        nax = (uint32_t)is.rank;
        for (uint32_t k = 0; k < nax; k++)
            axes[k] = k;
    }
    vals v;
    /* sizes */
    if (sizes_i != UINT32_MAX && has_in(in, sizes_i)) {
        shp ss = in_shape(in, sizes_i);
        bool empty = ss.rank == 1 && ss.d[0] == 0;
        if (!empty) {
            if (!in_vals(in, sizes_i, &v) || v.isf) {
                for (uint32_t k = 0; k < nax; k++)
                    os.d[axes[k]] = UNK;
                return set_shp(in, 0, dt, &os);
            }
            if (v.n != nax)
                return ag_inf_fail(in, "input %u has %llu sizes for %u axes", sizes_i, (unsigned long long)v.n, nax);
            const char *policy = ag_inf_attr_string_or(in, "keep_aspect_ratio_policy", "stretch");
            bool stretch = !strcmp(policy, "stretch");
            double scale = 0;
            for (uint32_t k = 0; k < nax && !stretch; k++) {
                int64_t d = is.d[axes[k]];
                if (v.u.i[k] == UNKE || d == UNK || d == 0) {
                    for (uint32_t j = 0; j < nax; j++)
                        os.d[axes[j]] = UNK;
                    return set_shp(in, 0, dt, &os);
                }
                double s = (double)v.u.i[k] / (double)d;
                if (k == 0 || (!strcmp(policy, "not_larger") ? s < scale : s > scale))
                    scale = s;
            }
            for (uint32_t k = 0; k < nax; k++) {
                int64_t e = v.u.i[k];
                if (e != UNKE && e < 0)
                    return ag_inf_fail(in, "input %u: size %u is negative (%lld)", sizes_i, k, (long long)e);
                if (stretch)
                    os.d[axes[k]] = e == UNKE ? UNK : e;
                else
                    os.d[axes[k]] = (int64_t)floor(scale * (double)is.d[axes[k]] + 0.5);
            }
            return set_shp(in, 0, dt, &os);
        }
    }
    /* scales */
    bool have = false;
    if (has_in(in, scales_i)) {
        shp ss = in_shape(in, scales_i);
        bool empty = ss.rank == 1 && ss.d[0] == 0;
        if (!empty) {
            if (!tensor_vals(ag_inf_in_value(in, scales_i), &v)) {
                for (uint32_t k = 0; k < nax; k++)
                    os.d[axes[k]] = UNK;
                return set_shp(in, 0, dt, &os);
            }
            have = true;
        }
    } else {
        const ag_attr *sa = ag_attrs_find(ag_node_attrs_c(in->g, in->n), "scales");
        if (sa && sa->kind == AG_ATTR_FLOATS && sa->count <= AG_MAX_RANK) {
            v.isf = true;
            v.n = sa->count;
            for (uint32_t k = 0; k < sa->count; k++)
                v.u.f[k] = sa->v.fs[k];
            have = true;
        }
    }
    if (!have) {
        for (uint32_t k = 0; k < nax; k++)
            os.d[axes[k]] = UNK;
        return set_shp(in, 0, dt, &os);
    }
    if (v.n != nax)
        return ag_inf_fail(in, "%llu scales for %u axes", (unsigned long long)v.n, nax);
    for (uint32_t k = 0; k < nax; k++) {
        double s = v.isf ? v.u.f[k] : (double)v.u.i[k];
        int64_t d = is.d[axes[k]];
        if (!(s >= 0) || (!v.isf && v.u.i[k] == UNKE)) {
            if (!v.isf && v.u.i[k] == UNKE) {
                os.d[axes[k]] = UNK;
                continue;
            }
            return ag_inf_fail(in, "scale %u is not a non-negative number", k);
        }
        os.d[axes[k]] = d == UNK ? UNK : (int64_t)floor((double)d * s);
    }
    return set_shp(in, 0, dt, &os);
}

/* ------------------------------------------------------------------------ */
/* generators                                                                 */
/* ------------------------------------------------------------------------ */

static ag_status rule_range(ag_infer_node *in)
{
    ag_dtype dt = in_dt(in, 0);
    vals s, l, d;
    int64_t unk = UNK;
    if (!tensor_vals(ag_inf_in_value(in, 0), &s) || !tensor_vals(ag_inf_in_value(in, 1), &l) ||
        !tensor_vals(ag_inf_in_value(in, 2), &d) || s.n != 1 || l.n != 1 || d.n != 1 || s.isf != l.isf ||
        s.isf != d.isf)
        return ag_inf_set_out(in, 0, dt, 1, &unk);
    vals out;
    out.isf = s.isf;
    int64_t n;
    if (!s.isf) {
        int64_t st = s.u.i[0], lim = l.u.i[0], de = d.u.i[0];
        if (de == 0)
            return ag_inf_fail(in, "input 2: delta is 0");
        /* Work in doubles for the count: the operands may be near INT64 limits. */
        double cnt = ceil(((double)lim - (double)st) / (double)de);
        if (cnt > (double)AG_MAX_DIM)
            return ag_inf_fail(in, "range of %.0f elements is absurdly large", cnt);
        n = cnt > 0 ? (int64_t)cnt : 0;
        if (n <= MAXV)
            for (int64_t k = 0; k < n; k++)
                out.u.i[k] = st + k * de;
    } else {
        double st = s.u.f[0], lim = l.u.f[0], de = d.u.f[0];
        if (de == 0)
            return ag_inf_fail(in, "input 2: delta is 0");
        double cnt = ceil((lim - st) / de);
        if (!(cnt <= (double)AG_MAX_DIM))
            return ag_inf_fail(in, "range of %.0f elements is absurdly large", cnt);
        n = cnt > 0 ? (int64_t)cnt : 0;
        if (n <= MAXV)
            for (int64_t k = 0; k < n; k++)
                out.u.f[k] = st + (double)k * de;
    }
    out.n = n <= MAXV ? (uint64_t)n : 0;
    return out_vals(in, 0, dt, 1, &n, &out);
}

static ag_status rule_nonzero(ag_infer_node *in)
{
    shp is = in_shape(in, 0);
    int64_t dims[2] = {is.rank < 0 ? UNK : is.rank, UNK};
    vals v;
    if (is.rank >= 0 && tensor_vals(ag_inf_in_value(in, 0), &v)) {
        int64_t c = 0;
        for (uint64_t k = 0; k < v.n; k++)
            c += v.isf ? v.u.f[k] != 0 : v.u.i[k] != 0;
        dims[1] = c;
    }
    return ag_inf_set_out(in, 0, AG_DT_I64, 2, dims);
}

static ag_status rule_eye_like(ag_infer_node *in)
{
    shp is = in_shape(in, 0);
    int64_t dt = ag_inf_attr_int_or(in, "dtype", in_dt(in, 0));
    if (is.rank >= 0 && is.rank != 2)
        return ag_inf_fail(in, "input 0 must have rank 2, has %d", (int)is.rank);
    if (!ag_dtype_valid((int)dt))
        dt = AG_DT_UNDEFINED;
    return set_shp(in, 0, (ag_dtype)dt, &is);
}

static ag_status rule_onehot(ag_infer_node *in)
{
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 2);
    int64_t axis = ag_inf_attr_int_or(in, "axis", -1);
    if (is.rank < 0)
        return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
    int32_t a;
    if (is.rank + 1 > AG_MAX_RANK || !ag_inf_axis(axis, is.rank + 1, &a))
        return ag_inf_fail(in, "axis %lld out of range for output rank %d", (long long)axis, (int)is.rank + 1);
    int64_t depth = UNK;
    vals v;
    if (tensor_vals(ag_inf_in_value(in, 1), &v) && v.n == 1) {
        double d = v.isf ? v.u.f[0] : (double)v.u.i[0];
        if (!(d >= 1) || d > (double)AG_MAX_DIM)
            return ag_inf_fail(in, "input 1: depth %g is not a positive extent", d);
        depth = (int64_t)d;
    }
    os.rank = is.rank + 1;
    for (int32_t k = 0, c = 0; k < os.rank; k++)
        os.d[k] = k == a ? depth : is.d[c++];
    return set_shp(in, 0, dt, &os);
}

/* ------------------------------------------------------------------------ */
/* other shape rules                                                          */
/* ------------------------------------------------------------------------ */

static ag_status rule_topk(ag_infer_node *in)
{
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 0);
    int64_t axis = ag_inf_attr_int_or(in, "axis", -1);
    if (is.rank < 0) {
        AG_TRY(ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL));
        return ag_inf_set_out(in, 1, AG_DT_I64, AG_RANK_UNKNOWN, NULL);
    }
    int32_t a;
    if (!ag_inf_axis(axis, is.rank, &a))
        return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)axis, (int)is.rank);
    int64_t k = UNK;
    vals v;
    if (has_in(in, 1)) {
        if (in_ints_full(in, 1, &v) && v.n == 1)
            k = v.u.i[0];
    } else {
        k = ag_inf_attr_int_or(in, "k", UNK);
    }
    if (k != UNK && (k < 0 || (is.d[a] != UNK && k > is.d[a])))
        return ag_inf_fail(in, "k = %lld does not fit extent %lld of axis %d", (long long)k, (long long)is.d[a],
                           (int)a);
    os = is;
    os.d[a] = k;
    AG_TRY(set_shp(in, 0, dt, &os));
    return set_shp(in, 1, AG_DT_I64, &os);
}

static ag_status rule_depth_space(ag_infer_node *in)
{
    bool to_space = !strcmp(ag_node_type(in->g, in->n), "DepthToSpace");
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 0);
    int64_t b;
    if (!ag_inf_attr_int(in, "blocksize", &b) || b <= 0)
        return ag_inf_fail(in, "attribute blocksize is missing or not positive");
    if (is.rank < 0)
        return set_rank_unknown_dims(in, 0, dt, 4);
    if (is.rank != 4)
        return ag_inf_fail(in, "input 0 must have rank 4, has %d", (int)is.rank);
    os = is;
    int64_t bb = b * b;
    if (to_space) {
        if (is.d[1] != UNK && is.d[1] % bb != 0)
            return ag_inf_fail(in, "channels %lld are not a multiple of blocksize^2 = %lld", (long long)is.d[1],
                               (long long)bb);
        os.d[1] = is.d[1] == UNK ? UNK : is.d[1] / bb;
        os.d[2] = dmul(is.d[2], b);
        os.d[3] = dmul(is.d[3], b);
    } else {
        for (int k = 2; k < 4; k++)
            if (is.d[k] != UNK && is.d[k] % b != 0)
                return ag_inf_fail(in, "dimension %d (%lld) is not a multiple of blocksize %lld", k,
                                   (long long)is.d[k], (long long)b);
        os.d[1] = dmul(is.d[1], bb);
        os.d[2] = is.d[2] == UNK ? UNK : is.d[2] / b;
        os.d[3] = is.d[3] == UNK ? UNK : is.d[3] / b;
    }
    return set_shp(in, 0, dt, &os);
}

static ag_status rule_compress(ag_infer_node *in)
{
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 0);
    int64_t count = UNK;
    vals v;
    if (tensor_vals(ag_inf_in_value(in, 1), &v) && !v.isf) {
        count = 0;
        for (uint64_t k = 0; k < v.n; k++)
            count += v.u.i[k] != 0;
    }
    int64_t axis;
    if (!ag_inf_attr_int(in, "axis", &axis))
        return ag_inf_set_out(in, 0, dt, 1, &count);
    if (is.rank < 0)
        return ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL);
    int32_t a;
    if (!ag_inf_axis(axis, is.rank, &a))
        return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)axis, (int)is.rank);
    os = is;
    os.d[a] = count;
    return set_shp(in, 0, dt, &os);
}

static ag_status rule_unique(ag_infer_node *in)
{
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 0);
    int64_t unk = UNK, axis;
    if (!ag_inf_attr_int(in, "axis", &axis)) {
        int64_t n = is.rank < 0 ? UNK : shp_numel(&is, 0, is.rank);
        AG_TRY(ag_inf_set_out(in, 0, dt, 1, &unk));
        AG_TRY(ag_inf_set_out(in, 1, AG_DT_I64, 1, &unk));
        AG_TRY(ag_inf_set_out(in, 2, AG_DT_I64, 1, &n));
        return ag_inf_set_out(in, 3, AG_DT_I64, 1, &unk);
    }
    if (is.rank < 0) {
        AG_TRY(ag_inf_set_out(in, 0, dt, AG_RANK_UNKNOWN, NULL));
        AG_TRY(ag_inf_set_out(in, 2, AG_DT_I64, 1, &unk));
    } else {
        int32_t a;
        if (!ag_inf_axis(axis, is.rank, &a))
            return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)axis, (int)is.rank);
        os = is;
        os.d[a] = UNK;
        AG_TRY(set_shp(in, 0, dt, &os));
        AG_TRY(ag_inf_set_out(in, 2, AG_DT_I64, 1, &is.d[a]));
    }
    AG_TRY(ag_inf_set_out(in, 1, AG_DT_I64, 1, &unk));
    return ag_inf_set_out(in, 3, AG_DT_I64, 1, &unk);
}

/* ------------------------------------------------------------------------ */
/* elementwise ops with value propagation                                     */
/* ------------------------------------------------------------------------ */

typedef enum ew_op {
    EW_ADD, EW_SUB, EW_MUL, EW_DIV, EW_MOD, EW_MIN, EW_MAX, EW_EQ, EW_LT, EW_GT, EW_LE, EW_GE, EW_AND, EW_OR
} ew_op;

static const struct {
    const char *name;
    ew_op op;
} ew_ops[] = {
    {"Add", EW_ADD}, {"Sub", EW_SUB}, {"Mul", EW_MUL}, {"Div", EW_DIV}, {"Mod", EW_MOD},
    {"Min", EW_MIN}, {"Max", EW_MAX}, {"Equal", EW_EQ}, {"Less", EW_LT}, {"Greater", EW_GT},
    {"LessOrEqual", EW_LE}, {"GreaterOrEqual", EW_GE}, {"And", EW_AND}, {"Or", EW_OR},
};

static bool ew_bool_result(ew_op op)
{
    return op >= EW_EQ;
}

/* Integer op; false when the result is not defined (division by zero). */
static bool ew_int(ew_op op, int64_t a, int64_t b, bool fmod_c, int64_t *r)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case EW_ADD: *r = (int64_t)(ua + ub); return true;
    case EW_SUB: *r = (int64_t)(ua - ub); return true;
    case EW_MUL: *r = (int64_t)(ua * ub); return true;
    case EW_DIV:
        if (b == 0 || (a == INT64_MIN && b == -1))
            return false;
        *r = a / b;
        return true;
    case EW_MOD:
        if (b == 0 || (a == INT64_MIN && b == -1))
            return false;
        *r = a % b;
        if (!fmod_c && *r != 0 && ((*r < 0) != (b < 0)))
            *r += b; /* ONNX Mod with fmod=0: the sign of the divisor */
        return true;
    case EW_MIN: *r = a < b ? a : b; return true;
    case EW_MAX: *r = a > b ? a : b; return true;
    case EW_EQ: *r = a == b; return true;
    case EW_LT: *r = a < b; return true;
    case EW_GT: *r = a > b; return true;
    case EW_LE: *r = a <= b; return true;
    case EW_GE: *r = a >= b; return true;
    case EW_AND: *r = a && b; return true;
    case EW_OR: *r = a || b; return true;
    }
    return false;
}

static double ew_float(ew_op op, double a, double b, bool *is_bool)
{
    *is_bool = ew_bool_result(op);
    switch (op) {
    case EW_ADD: return a + b;
    case EW_SUB: return a - b;
    case EW_MUL: return a * b;
    case EW_DIV: return a / b;
    case EW_MOD: return fmod(a, b);
    case EW_MIN: return a < b ? a : b;
    case EW_MAX: return a > b ? a : b;
    case EW_EQ: return a == b;
    case EW_LT: return a < b;
    case EW_GT: return a > b;
    case EW_LE: return a <= b;
    case EW_GE: return a >= b;
    case EW_AND: return a != 0 && b != 0;
    case EW_OR: return a != 0 || b != 0;
    }
    return 0;
}

static ag_status rule_elementwise(ag_infer_node *in)
{
    const char *type = ag_node_type(in->g, in->n);
    ew_op op = EW_ADD;
    for (size_t k = 0; k < sizeof ew_ops / sizeof *ew_ops; k++)
        if (!strcmp(ew_ops[k].name, type))
            op = ew_ops[k].op;
    uint32_t nin = ag_inf_nin(in);
    shp os;
    AG_TRY(broadcast_all(in, 0, nin, &os));
    ag_dtype dt = ew_bool_result(op) ? AG_DT_BOOL : in_dt(in, 0);
    int64_t total = os.rank < 0 ? UNK : shp_numel(&os, 0, os.rank);
    if (total == UNK || total > MAXV || nin == 0)
        return set_shp(in, 0, dt, &os);
    bool fmod_c = ag_inf_attr_int_or(in, "fmod", 0) != 0;
    /* Fold the inputs left to right (Min/Max are variadic). */
    vals acc, v;
    shp accs;
    bool started = false;
    for (uint32_t i = 0; i < nin; i++) {
        if (!has_in(in, i))
            continue;
        shp s = in_shape(in, i);
        if (!shp_known(&s) || !in_vals(in, i, &v))
            return set_shp(in, 0, dt, &os);
        if (!started) {
            acc = v;
            accs = s;
            started = true;
            continue;
        }
        if (v.isf != acc.isf)
            return set_shp(in, 0, dt, &os);
        shp rs;
        if (!ag_inf_broadcast(accs.rank, accs.d, s.rank, s.d, &rs.rank, rs.d))
            return set_shp(in, 0, dt, &os);
        uint64_t n = (uint64_t)shp_numel(&rs, 0, rs.rank);
        vals r;
        r.isf = acc.isf && !ew_bool_result(op);
        r.n = n;
        for (uint64_t k = 0; k < n; k++) {
            uint64_t ia = bcast_off(k, rs.rank, rs.d, accs.rank, accs.d);
            uint64_t ib = bcast_off(k, rs.rank, rs.d, s.rank, s.d);
            if (acc.isf) {
                bool isb;
                double x = ew_float(op, acc.u.f[ia], v.u.f[ib], &isb);
                if (isb)
                    r.u.i[k] = x != 0;
                else
                    r.u.f[k] = x;
            } else {
                int64_t a = acc.u.i[ia], b = v.u.i[ib], x;
                if (a == UNKE || b == UNKE || !ew_int(op, a, b, fmod_c, &x))
                    x = UNKE;
                r.u.i[k] = x;
            }
        }
        acc = r;
        accs = rs;
    }
    if (!started)
        return set_shp(in, 0, dt, &os);
    return out_vals(in, 0, dt, os.rank, os.d, &acc);
}

static ag_status rule_unary(ag_infer_node *in)
{
    const char *type = ag_node_type(in->g, in->n);
    shp is = in_shape(in, 0);
    ag_dtype dt = in_dt(in, 0);
    vals v;
    if (!shp_known(&is) || !in_vals(in, 0, &v))
        return set_shp(in, 0, dt, &is);
    for (uint64_t k = 0; k < v.n; k++) {
        if (v.isf) {
            double x = v.u.f[k];
            if (!strcmp(type, "Neg"))
                x = -x;
            else if (!strcmp(type, "Abs"))
                x = fabs(x);
            else if (!strcmp(type, "Floor"))
                x = floor(x);
            else if (!strcmp(type, "Ceil"))
                x = ceil(x);
            else if (!strcmp(type, "Not"))
                x = x == 0;
            v.u.f[k] = x;
        } else {
            int64_t x = v.u.i[k];
            if (x == UNKE)
                continue;
            if (!strcmp(type, "Neg"))
                x = (int64_t)(0 - (uint64_t)x);
            else if (!strcmp(type, "Abs"))
                x = x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
            else if (!strcmp(type, "Not"))
                x = x == 0;
            v.u.i[k] = x;
        }
    }
    return out_vals(in, 0, dt, is.rank, is.d, &v);
}

static ag_status rule_where(ag_infer_node *in)
{
    shp os;
    AG_TRY(broadcast_all(in, 0, 3, &os));
    ag_dtype dt = in_dt(in, 1);
    int64_t total = os.rank < 0 ? UNK : shp_numel(&os, 0, os.rank);
    vals c, x, y;
    shp cs = in_shape(in, 0), xs = in_shape(in, 1), ys = in_shape(in, 2);
    if (total == UNK || total > MAXV || !shp_known(&cs) || !shp_known(&xs) || !shp_known(&ys) ||
        !in_vals(in, 0, &c) || !in_vals(in, 1, &x) || !in_vals(in, 2, &y) || c.isf || x.isf != y.isf)
        return set_shp(in, 0, dt, &os);
    vals r;
    r.isf = x.isf;
    r.n = (uint64_t)total;
    for (uint64_t k = 0; k < r.n; k++) {
        int64_t cv = c.u.i[bcast_off(k, os.rank, os.d, cs.rank, cs.d)];
        uint64_t ix = bcast_off(k, os.rank, os.d, xs.rank, xs.d), iy = bcast_off(k, os.rank, os.d, ys.rank, ys.d);
        if (r.isf)
            r.u.f[k] = cv ? x.u.f[ix] : y.u.f[iy];
        else
            r.u.i[k] = cv == UNKE ? UNKE : cv ? x.u.i[ix] : y.u.i[iy];
    }
    return out_vals(in, 0, dt, os.rank, os.d, &r);
}

static ag_status cast_to(ag_infer_node *in, ag_dtype to)
{
    shp is = in_shape(in, 0);
    vals v;
    if (!shp_known(&is) && is.rank != 1)
        return set_shp(in, 0, to, &is);
    if (!in_vals(in, 0, &v))
        return set_shp(in, 0, to, &is);
    if (ag_dtype_is_int(to) && v.isf) {
        for (uint64_t k = 0; k < v.n; k++) {
            double d = v.u.f[k];
            if (!(d == floor(d)) || fabs(d) > 9.0e18)
                return set_shp(in, 0, to, &is); /* not exact: shape only */
            v.u.i[k] = (int64_t)d;
        }
        v.isf = false;
    } else if (!ag_dtype_is_int(to) && !v.isf) {
        if (!vals_all_known(&v))
            return set_shp(in, 0, to, &is);
        for (uint64_t k = 0; k < v.n; k++)
            v.u.f[k] = (double)v.u.i[k];
        v.isf = true;
    }
    if (!v.isf) {
        /* Wrap to the target width the way a conversion would. */
        unsigned bits = ag_dtype_bits(to);
        bool sgn = to == AG_DT_I8 || to == AG_DT_I16 || to == AG_DT_I32 || to == AG_DT_I64;
        for (uint64_t k = 0; k < v.n; k++) {
            int64_t x = v.u.i[k];
            if (x == UNKE)
                continue;
            if (to == AG_DT_BOOL)
                x = x != 0;
            else if (bits < 64) {
                uint64_t u = (uint64_t)x & ((UINT64_C(1) << bits) - 1);
                if (sgn && (u >> (bits - 1)) & 1)
                    u |= ~UINT64_C(0) << bits;
                x = (int64_t)u;
            }
            v.u.i[k] = x;
        }
    }
    return out_vals(in, 0, to, is.rank, is.d, &v);
}

static ag_status rule_cast(ag_infer_node *in)
{
    int64_t to;
    if (!ag_inf_attr_int(in, "to", &to) && !ag_inf_attr_int(in, "dst_type", &to))
        return ag_inf_same_as_input(in, 0, 0);
    if (!ag_dtype_valid((int)to) || to != (int)to)
        return ag_inf_fail(in, "attribute to = %lld is not a data type", (long long)to);
    return cast_to(in, (ag_dtype)to);
}

static ag_status rule_cast_like(ag_infer_node *in)
{
    ag_dtype to = in_dt(in, 1);
    if (to == AG_DT_UNDEFINED)
        return ag_inf_same_as_input(in, 0, 0);
    return cast_to(in, to);
}

static ag_status rule_reduce_prod(ag_infer_node *in)
{
    shp is = in_shape(in, 0), os;
    ag_dtype dt = in_dt(in, 0);
    bool keep = ag_inf_attr_int_or(in, "keepdims", 1) != 0;
    bool noop_empty = ag_inf_attr_int_or(in, "noop_with_empty_axes", 0) != 0;
    int64_t axes[AG_MAX_RANK];
    uint32_t na = 0;
    bool given;
    bool known = get_axes(in, 1, axes, &na, &given);
    if (is.rank < 0 || (given && !known))
        return ag_inf_set_out(in, 0, dt, keep && is.rank >= 0 ? is.rank : AG_RANK_UNKNOWN, NULL);
    bool red[AG_MAX_RANK] = {false};
    if (!given || na == 0) {
        if (noop_empty)
            return out_same_elems(in, 0, dt, &is, 0);
        for (int32_t k = 0; k < is.rank; k++)
            red[k] = true;
    } else {
        for (uint32_t k = 0; k < na; k++) {
            int32_t a;
            if (!ag_inf_axis(axes[k], is.rank, &a))
                return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)axes[k],
                                   (int)is.rank);
            red[a] = true;
        }
    }
    os.rank = 0;
    bool all = true;
    for (int32_t k = 0; k < is.rank; k++) {
        if (red[k]) {
            if (keep)
                os.d[os.rank++] = 1;
        } else {
            all = false;
            os.d[os.rank++] = is.d[k];
        }
    }
    vals v;
    if (all && shp_known(&is) && in_vals(in, 0, &v)) {
        vals r;
        r.isf = v.isf;
        r.n = 1;
        if (v.isf) {
            r.u.f[0] = 1;
            for (uint64_t k = 0; k < v.n; k++)
                r.u.f[0] *= v.u.f[k];
        } else {
            int64_t p = 1;
            for (uint64_t k = 0; k < v.n && p != UNKE; k++) {
                if (v.u.i[k] == UNKE)
                    p = UNKE;
                else
                    p = (int64_t)((uint64_t)p * (uint64_t)v.u.i[k]);
            }
            r.u.i[0] = p;
        }
        return out_vals(in, 0, dt, os.rank, os.d, &r);
    }
    return set_shp(in, 0, dt, &os);
}

/* ------------------------------------------------------------------------ */
/* pass-through and reference-system ops                                      */
/* ------------------------------------------------------------------------ */

static ag_status rule_identity(ag_infer_node *in)
{
    shp is = in_shape(in, 0);
    return out_same_elems(in, 0, in_dt(in, 0), &is, 0);
}

/* Output k mirrors input k (collectives that keep shapes, copies, control
 * markers, Enter/Exit, NetOutput with outputs). */
static ag_status rule_passthrough(ag_infer_node *in)
{
    uint32_t nin = ag_inf_nin(in), nout = ag_inf_nout(in);
    for (uint32_t k = 0; k < nin && k < nout; k++)
        AG_TRY(ag_inf_same_as_input(in, k, k));
    return AG_OK;
}

/* Assign-like and optimizer updates: output 0 is the updated variable. */
static ag_status rule_assign(ag_infer_node *in)
{
    return ag_inf_same_as_input(in, 0, 0);
}

static ag_status hcom_scale_dim0(ag_infer_node *in, bool gather)
{
    uint32_t nin = ag_inf_nin(in), nout = ag_inf_nout(in);
    int64_t rs = ag_inf_attr_int_or(in, "rank_size", UNK);
    if (rs != UNK && rs <= 0)
        return ag_inf_fail(in, "attribute rank_size is %lld", (long long)rs);
    for (uint32_t k = 0; k < nin && k < nout; k++) {
        shp s = in_shape(in, k);
        if (s.rank == 0)
            return ag_inf_fail(in, "input %u is a scalar; the collective works on dimension 0", k);
        if (s.rank > 0) {
            if (gather) {
                s.d[0] = rs == UNK ? UNK : dmul(s.d[0], rs);
            } else if (s.d[0] != UNK && rs != UNK) {
                if (s.d[0] % rs != 0)
                    return ag_inf_fail(in, "input %u: dimension 0 (%lld) is not a multiple of rank_size %lld", k,
                                       (long long)s.d[0], (long long)rs);
                s.d[0] /= rs;
            } else {
                s.d[0] = UNK;
            }
        }
        AG_TRY(set_shp(in, k, in_dt(in, k), &s));
    }
    return AG_OK;
}

static ag_status rule_hcom_allgather(ag_infer_node *in)
{
    return hcom_scale_dim0(in, true);
}

static ag_status rule_hcom_reducescatter(ag_infer_node *in)
{
    return hcom_scale_dim0(in, false);
}

/* HcomAllToAllV: what arrives depends on the receive counts at run time. */
static ag_status rule_hcom_alltoallv(ag_infer_node *in)
{
    int64_t unk = UNK;
    return ag_inf_set_out(in, 0, in_dt(in, 0), 1, &unk);
}

/* Merge: the value of whichever input arrives; output 1 is its index. */
static ag_status rule_merge(ag_infer_node *in)
{
    uint32_t nin = ag_inf_nin(in);
    shp m;
    m.rank = AG_RANK_UNKNOWN;
    ag_dtype dt = AG_DT_UNDEFINED;
    bool any = false;
    for (uint32_t i = 0; i < nin; i++) {
        if (!has_in(in, i))
            continue;
        shp s = in_shape(in, i);
        if (dt == AG_DT_UNDEFINED)
            dt = in_dt(in, i);
        m = any ? shp_merge(&m, &s) : s;
        any = true;
    }
    if (any)
        AG_TRY(set_shp(in, 0, dt, &m));
    return ag_inf_set_out(in, 1, AG_DT_I32, 0, NULL);
}

static ag_status rule_switch(ag_infer_node *in)
{
    AG_TRY(ag_inf_same_as_input(in, 0, 0));
    return ag_inf_same_as_input(in, 1, 0);
}

static ag_status rule_bitcast(ag_infer_node *in)
{
    shp is = in_shape(in, 0);
    int64_t to;
    if (!ag_inf_attr_int(in, "type", &to) || !ag_dtype_valid((int)to) || to != (int)to)
        return ag_inf_fail(in, "attribute type is missing or not a data type");
    unsigned ib = ag_dtype_bits(in_dt(in, 0)), ob = ag_dtype_bits((ag_dtype)to);
    if (is.rank < 0 || ib == 0 || ob == 0 || ib == ob)
        return set_shp(in, 0, (ag_dtype)to, &is);
    if (ib > ob) {
        if (ib % ob != 0 || is.rank >= AG_MAX_RANK)
            return ag_inf_fail(in, "cannot bitcast %u-bit elements to %u-bit ones", ib, ob);
        is.d[is.rank++] = ib / ob;
    } else {
        if (ob % ib != 0 || is.rank == 0)
            return ag_inf_fail(in, "cannot bitcast %u-bit elements to %u-bit ones", ib, ob);
        int64_t last = is.d[is.rank - 1];
        if (last != UNK && last != (int64_t)(ob / ib))
            return ag_inf_fail(in, "last dimension must be %u to bitcast to %u-bit elements, is %lld", ob / ib, ob,
                               (long long)last);
        is.rank--;
    }
    return set_shp(in, 0, (ag_dtype)to, &is);
}

static ag_status rule_no_outputs(ag_infer_node *in)
{
    return rule_passthrough(in);
}

const ag_infer_rule ag_infer_rules_core[] = {
    /* sources */
    {"Data", rule_keep}, {"RefData", rule_keep}, {"AippData", rule_keep}, {"AnnData", rule_keep},
    {"Variable", rule_keep}, {"VariableV2", rule_keep}, {"ConstPlaceHolder", rule_keep},
    {"FileConstant", rule_keep}, {"HcomReceive", rule_keep},
    {"Const", rule_const}, {"Constant", rule_const}, {"ConstantOfShape", rule_constant_of_shape},
    /* shape queries and reshaping */
    {"Shape", rule_shape}, {"Size", rule_size}, {"Reshape", rule_reshape}, {"Flatten", rule_flatten},
    {"Squeeze", rule_squeeze}, {"Unsqueeze", rule_unsqueeze}, {"ExpandDims", rule_expand_dims},
    {"Transpose", rule_transpose}, {"Bitcast", rule_bitcast},
    /* joining, splitting, indexing */
    {"Concat", rule_concat}, {"ConcatV2", rule_concat}, {"Split", rule_split}, {"Slice", rule_slice},
    {"Gather", rule_gather}, {"GatherV2", rule_gather}, {"GatherElements", rule_gather_elements},
    {"GatherND", rule_gather_nd}, {"ScatterND", rule_like_input0}, {"ScatterElements", rule_like_input0},
    {"Scatter", rule_like_input0}, {"Expand", rule_expand}, {"Tile", rule_tile}, {"Pad", rule_pad},
    {"Resize", rule_resize}, {"Upsample", rule_resize},
    /* generators and data-dependent shapes */
    {"Range", rule_range}, {"NonZero", rule_nonzero}, {"TopK", rule_topk}, {"OneHot", rule_onehot},
    {"DepthToSpace", rule_depth_space}, {"SpaceToDepth", rule_depth_space}, {"Compress", rule_compress},
    {"Unique", rule_unique}, {"EyeLike", rule_eye_like}, {"Trilu", rule_like_input0},
    /* elementwise with values */
    {"Add", rule_elementwise}, {"Sub", rule_elementwise}, {"Mul", rule_elementwise}, {"Div", rule_elementwise},
    {"Mod", rule_elementwise}, {"Min", rule_elementwise}, {"Max", rule_elementwise},
    {"Equal", rule_elementwise}, {"Less", rule_elementwise}, {"Greater", rule_elementwise},
    {"LessOrEqual", rule_elementwise}, {"GreaterOrEqual", rule_elementwise}, {"And", rule_elementwise},
    {"Or", rule_elementwise}, {"Neg", rule_unary}, {"Abs", rule_unary}, {"Floor", rule_unary},
    {"Ceil", rule_unary}, {"Not", rule_unary}, {"Where", rule_where}, {"Cast", rule_cast},
    {"CastLike", rule_cast_like}, {"ReduceProd", rule_reduce_prod},
    /* control flow */
    {"If", rule_if}, {"_If", rule_if}, {"StatelessIf", rule_if}, {"Case", rule_branches},
    {"While", rule_loop}, {"_While", rule_loop}, {"StatelessWhile", rule_loop}, {"Loop", rule_loop},
    {"Scan", rule_scan}, {"PartitionedCall", rule_call}, {"StatefulPartitionedCall", rule_call},
    /* pass-through and reference-system ops */
    {"Identity", rule_identity}, {"ReadVariableOp", rule_identity}, {"RefIdentity", rule_identity},
    {"Assign", rule_assign}, {"AssignAdd", rule_assign}, {"AssignSub", rule_assign},
    {"AssignVariableOp", rule_assign}, {"AssignAddVariableOp", rule_assign},
    {"AssignSubVariableOp", rule_assign}, {"ApplyMomentum", rule_passthrough},
    {"HcomAllReduce", rule_passthrough}, {"HcomBroadcast", rule_passthrough},
    {"HcomReduce", rule_passthrough}, {"HcomAllToAll", rule_passthrough},
    {"HcomAllGather", rule_hcom_allgather}, {"HcomReduceScatter", rule_hcom_reducescatter},
    {"HcomAllToAllV", rule_hcom_alltoallv}, {"HcomSend", rule_no_outputs},
    {"MemcpyAsync", rule_passthrough}, {"MemcpyAddrAsync", rule_passthrough},
    {"AtomicAddrClean", rule_no_outputs}, {"MemSet", rule_no_outputs},
    {"PointFromInputs", rule_passthrough}, {"StreamSwitch", rule_no_outputs},
    {"StreamActive", rule_no_outputs}, {"LabelSwitchByIndex", rule_no_outputs}, {"LabelSet", rule_no_outputs},
    {"LabelGoto", rule_no_outputs}, {"LabelGotoEx", rule_no_outputs}, {"NoOp", rule_no_outputs},
    {"Merge", rule_merge}, {"RefMerge", rule_merge}, {"Switch", rule_switch}, {"RefSwitch", rule_switch},
    {"Enter", rule_passthrough}, {"RefEnter", rule_passthrough}, {"Exit", rule_passthrough},
    {"RefExit", rule_passthrough}, {"NextIteration", rule_passthrough}, {"RefNextIteration", rule_passthrough},
    {"LoopCond", rule_passthrough}, {"NetOutput", rule_passthrough},
    {NULL, NULL},
};
