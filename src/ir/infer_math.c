/* Shape and dtype inference rules of the "math" family: elementwise ops,
 * reductions, matrix products, convolutions and pooling, normalisations,
 * recurrent cells, quantisation, signal processing, losses and the
 * com.microsoft contrib ops seen in exported models.  Rules follow the ONNX
 * operator definitions (shape formulas of the operator documentation). */
#include <math.h>
#include <stdio.h>

#include "ir/infer_internal.h"

/* ------------------------------------------------------------------------ */
/* small helpers                                                              */
/* ------------------------------------------------------------------------ */

#define UNK AG_DIM_UNKNOWN

static const ag_tensor_desc *inp(const ag_infer_node *in, uint32_t i)
{
    return ag_inf_in(in, i);
}

static ag_dtype in_dt(const ag_infer_node *in, uint32_t i)
{
    const ag_tensor_desc *d = ag_inf_in(in, i);
    return d ? d->dtype : AG_DT_UNDEFINED;
}

static int32_t in_rank(const ag_infer_node *in, uint32_t i)
{
    const ag_tensor_desc *d = ag_inf_in(in, i);
    return d ? d->rank : AG_RANK_UNKNOWN;
}

/* Dim k of input i, or UNK when the input, its rank or the dim is unknown. */
static int64_t in_dim(const ag_infer_node *in, uint32_t i, int32_t k)
{
    const ag_tensor_desc *d = ag_inf_in(in, i);
    if (!d || d->rank < 0 || k < 0 || k >= d->rank)
        return UNK;
    return d->dims[k];
}

/* Writes output o unless the node has fewer outputs (an omitted optional one). */
static ag_status set_out(ag_infer_node *in, uint32_t o, ag_dtype dt, int32_t rank, const int64_t *dims)
{
    if (o >= ag_inf_nout(in))
        return AG_OK;
    return ag_inf_set_out(in, o, dt, rank, dims);
}

/* Output o gets input i's shape and the given dtype. */
static ag_status set_out_like(ag_infer_node *in, uint32_t o, uint32_t i, ag_dtype dt)
{
    const ag_tensor_desc *d = ag_inf_in(in, i);
    if (!d)
        return set_out(in, o, dt, AG_RANK_UNKNOWN, NULL);
    return set_out(in, o, dt, d->rank, d->dims);
}

static ag_status set_out_unknown(ag_infer_node *in, uint32_t o, ag_dtype dt)
{
    return set_out(in, o, dt, AG_RANK_UNKNOWN, NULL);
}

/* Output o: rank known, every dim unknown. */
static ag_status set_out_rank(ag_infer_node *in, uint32_t o, ag_dtype dt, int32_t rank)
{
    int64_t dims[AG_MAX_RANK];
    if (rank < 0 || rank > AG_MAX_RANK)
        return set_out_unknown(in, o, dt);
    for (int32_t k = 0; k < rank; k++)
        dims[k] = UNK;
    return set_out(in, o, dt, rank, dims);
}

/* First known dtype among inputs (ONNX ops with one type variable T). */
static ag_dtype first_dt(const ag_infer_node *in)
{
    uint32_t n = ag_inf_nin(in);
    for (uint32_t i = 0; i < n; i++) {
        ag_dtype dt = in_dt(in, i);
        if (dt != AG_DT_UNDEFINED)
            return dt;
    }
    return AG_DT_UNDEFINED;
}

/* dtype attribute (ONNX DataType number) or dflt when absent or invalid. */
static ag_dtype attr_dtype_or(const ag_infer_node *in, const char *name, ag_dtype dflt)
{
    int64_t v;
    if (ag_inf_attr_int(in, name, &v) && v > 0 && v < AG_DT_COUNT_ && ag_dtype_valid((int)v))
        return (ag_dtype)v;
    return dflt;
}

static void fmt_shape(char *buf, size_t len, int32_t rank, const int64_t *dims)
{
    size_t used = 0;
    if (len == 0)
        return;
    buf[0] = '\0';
    if (rank < 0) {
        snprintf(buf, len, "[?rank]");
        return;
    }
    used += (size_t)snprintf(buf + used, len - used, "[");
    for (int32_t k = 0; k < rank && used < len; k++) {
        if (dims[k] < 0)
            used += (size_t)snprintf(buf + used, len - used, "%s?", k ? "," : "");
        else
            used += (size_t)snprintf(buf + used, len - used, "%s%lld", k ? "," : "", (long long)dims[k]);
    }
    if (used < len)
        snprintf(buf + used, len - used, "]");
}

static void fmt_desc(char *buf, size_t len, const ag_tensor_desc *d)
{
    if (!d)
        snprintf(buf, len, "(absent)");
    else
        fmt_shape(buf, len, d->rank, d->dims);
}

/* Binary ops before opset 7 broadcast B onto A (attribute "broadcast", with an
 * optional "axis") or required equal shapes: either way the result is A's.
 * The attribute also marks such nodes when the opset is not known. */
static bool legacy_broadcast(const ag_infer_node *in)
{
    int64_t b;
    return (in->opset > 0 && in->opset < 7) || ag_inf_attr_int(in, "broadcast", &b);
}

/* Integer value of a scalar or one-element input, if known. */
static bool in_scalar_int(const ag_infer_node *in, uint32_t i, int64_t *out)
{
    uint64_t cnt = 0;
    int64_t v[1];
    if (!ag_inf_tensor_ints(ag_inf_in_value(in, i), v, 1, &cnt) || cnt != 1)
        return false;
    *out = v[0];
    return true;
}

/* Two dims must agree when both known; returns the known one (or UNK). */
static bool dim_merge(int64_t a, int64_t b, int64_t *out)
{
    if (a >= 0 && b >= 0 && a != b)
        return false;
    *out = a >= 0 ? a : b;
    return true;
}

static int64_t dim_mul(int64_t a, int64_t b)
{
    if (a < 0 || b < 0)
        return UNK;
    if (a != 0 && b > AG_MAX_DIM / a)
        return UNK;
    return a * b;
}

static int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

static int64_t ceildiv(int64_t a, int64_t b)
{
    return -floordiv(-a, b);
}

/* ------------------------------------------------------------------------ */
/* small constant values (shape arithmetic in exported graphs)                */
/* ------------------------------------------------------------------------ */

/* Elementwise results are only evaluated for tiny tensors: exporters compute
 * shapes with them (Shape -> Mul -> Concat -> Reshape), never real data. */
#define MV_CAP 256

typedef struct mval {
    ag_dtype dt;
    bool isf;        /* floating dtype: use f[]; otherwise i[] (bool as 0/1) */
    int32_t rank;
    const int64_t *dims;
    uint64_t n;
    int64_t i[MV_CAP];
    double f[MV_CAP];
} mval;

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f;
    int m = h & 0x3ff;
    double v;
    if (e == 0)
        v = ldexp((double)m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexp((double)(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}

static bool mval_read(const ag_tensor *t, mval *v)
{
    const unsigned char *p;
    unsigned bits;
    uint64_t n;
    if (!t || !t->data || (!ag_dtype_is_float(t->dtype) && !ag_dtype_is_int(t->dtype)))
        return false;
    n = ag_tensor_numel(t);
    bits = ag_dtype_bits(t->dtype);
    if (n > MV_CAP || bits == 0 || t->nbytes < n * (bits / 8))
        return false;
    v->dt = t->dtype;
    v->isf = ag_dtype_is_float(t->dtype);
    v->rank = t->rank;
    v->dims = t->dims;
    v->n = n;
    p = t->data;
    for (uint64_t k = 0; k < n; k++) {
        const unsigned char *q = p + k * (bits / 8);
        uint64_t raw = 0;
        for (unsigned b = 0; b < bits / 8; b++)
            raw |= (uint64_t)q[b] << (8 * b);
        switch (t->dtype) {
        case AG_DT_F32: {
            uint32_t u = (uint32_t)raw;
            float fl;
            memcpy(&fl, &u, sizeof fl);
            v->f[k] = fl;
            break;
        }
        case AG_DT_F64: memcpy(&v->f[k], &raw, sizeof(double)); break;
        case AG_DT_F16: v->f[k] = half_to_double((uint16_t)raw); break;
        case AG_DT_BF16: {
            uint32_t u = (uint32_t)raw << 16;
            float fl;
            memcpy(&fl, &u, sizeof fl);
            v->f[k] = fl;
            break;
        }
        case AG_DT_I8: v->i[k] = (int8_t)(uint8_t)raw; break;
        case AG_DT_I16: v->i[k] = (int16_t)(uint16_t)raw; break;
        case AG_DT_I32: v->i[k] = (int32_t)(uint32_t)raw; break;
        case AG_DT_I64: v->i[k] = (int64_t)raw; break;
        case AG_DT_BOOL: v->i[k] = raw != 0; break;
        default: v->i[k] = (int64_t)raw; break; /* unsigned */
        }
        if (!v->isf)
            v->f[k] = (double)v->i[k];
    }
    return true;
}

/* Attaches the values (as dtype dt) to output o.  Types outside the small set
 * handled here leave the value unset but keep shape and dtype. */
static ag_status mval_emit(ag_infer_node *in, uint32_t o, ag_dtype dt, int32_t rank, const int64_t *dims,
                           uint64_t n, const int64_t *iv, const double *fv)
{
    unsigned char buf[MV_CAP * 8];
    unsigned bytes = ag_dtype_bits(dt) / 8;
    ag_tensor t;
    const ag_tensor *owned;
    if (o >= ag_inf_nout(in))
        return AG_OK;
    if (n > MV_CAP || bytes == 0 || dt == AG_DT_F16 || dt == AG_DT_BF16 ||
        (!ag_dtype_is_float(dt) && !ag_dtype_is_int(dt)))
        return ag_inf_set_out(in, o, dt, rank, dims);
    for (uint64_t k = 0; k < n; k++) {
        unsigned char *q = buf + k * bytes;
        uint64_t raw;
        if (dt == AG_DT_F32) {
            float fl = (float)fv[k];
            uint32_t u;
            memcpy(&u, &fl, sizeof u);
            raw = u;
        } else if (dt == AG_DT_F64) {
            memcpy(&raw, &fv[k], sizeof raw);
        } else if (dt == AG_DT_BOOL) {
            raw = iv[k] != 0;
        } else {
            raw = (uint64_t)iv[k];
        }
        for (unsigned b = 0; b < bytes; b++)
            q[b] = (unsigned char)(raw >> (8 * b));
    }
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    t.dims = dims;
    t.nbytes = n * bytes;
    t.data = buf;
    AG_TRY(ag_graph_make_tensor(in->g, &t, &owned));
    return ag_inf_set_out_value(in, o, owned);
}

/* Flat index into an input of shape (r, d) broadcast onto output (ro, od). */
static uint64_t bcast_index(uint64_t flat, int32_t ro, const int64_t *od, int32_t r, const int64_t *d)
{
    uint64_t idx = 0, mul = 1;
    for (int32_t k = ro - 1; k >= 0; k--) {
        uint64_t c = (uint64_t)flat % (uint64_t)od[k];
        int32_t j = k - (ro - r);
        flat /= (uint64_t)od[k];
        if (j >= 0) {
            if (d[j] != 1)
                idx += c * mul;
            mul *= (uint64_t)d[j];
        }
    }
    return idx;
}

/* ------------------------------------------------------------------------ */
/* elementwise ops                                                            */
/* ------------------------------------------------------------------------ */

typedef enum ew_op {
    EW_NONE,
    /* unary */
    EW_RECIP, EW_SQRT, EW_SIGN, EW_ROUND, EW_RELU, EW_EXP, EW_LOG, EW_BITNOT, EW_ISNAN, EW_ISINF,
    /* binary / variadic (Add, Sub, Mul, Div, Mod, Min, Max, comparisons, And, Or, Not, Neg
     * and Abs are the core family's, with their value folding: infer_core.c) */
    EW_POW, EW_SUM, EW_MEAN, EW_XOR, EW_BITAND, EW_BITOR, EW_BITXOR, EW_SHIFT
} ew_op;

static int64_t iwrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t iwrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* One integer step; false when the result is undefined (division by zero). */
static bool ew_int(ew_op op, int64_t a, int64_t b, const char *dir, int64_t *r)
{
    switch (op) {
    case EW_SUM: *r = iwrap_add(a, b); return true;
    case EW_POW: {
        int64_t acc = 1, base = a, e = b;
        if (e < 0)
            return false;
        while (e > 0) {
            if (e & 1)
                acc = iwrap_mul(acc, base);
            base = iwrap_mul(base, base);
            e >>= 1;
        }
        *r = acc;
        return true;
    }
    case EW_XOR: *r = (a != 0) != (b != 0); return true;
    case EW_BITAND: *r = a & b; return true;
    case EW_BITOR: *r = a | b; return true;
    case EW_BITXOR: *r = a ^ b; return true;
    case EW_SHIFT:
        if (b < 0 || b >= 64)
            *r = 0;
        else if (dir && strcmp(dir, "LEFT") == 0)
            *r = (int64_t)((uint64_t)a << b);
        else
            *r = (int64_t)((uint64_t)a >> b);
        return true;
    default:
        return false;
    }
}

static bool ew_float(ew_op op, double a, double b, double *r)
{
    switch (op) {
    case EW_SUM: *r = a + b; return true;
    case EW_POW: *r = pow(a, b); return true;
    default: return false;
    }
}

static bool ew_unary(ew_op op, bool isf, int64_t a, double x, int64_t *ri, double *rf)
{
    if (!isf) {
        switch (op) {
        case EW_SIGN: *ri = (a > 0) - (a < 0); return true;
        case EW_RELU: *ri = a > 0 ? a : 0; return true;
        case EW_BITNOT: *ri = ~a; return true;
        case EW_ISNAN: case EW_ISINF: *ri = 0; return true;
        default: return false;
        }
    }
    switch (op) {
    case EW_RECIP: *rf = 1.0 / x; return true;
    case EW_SQRT: *rf = sqrt(x); return true;
    case EW_SIGN: *rf = (x > 0) - (x < 0); return true;
    case EW_ROUND: *rf = nearbyint(x); return true;
    case EW_RELU: *rf = x > 0 ? x : 0; return true;
    case EW_EXP: *rf = exp(x); return true;
    case EW_LOG: *rf = log(x); return true;
    case EW_ISNAN: *ri = isnan(x) != 0; return true;
    case EW_ISINF: *ri = isinf(x) != 0; return true;
    default: return false;
    }
}

/* Unary elementwise: shape of input 0, dtype out_dt (UNDEFINED = input's). */
static ag_status ew_unary_rule(ag_infer_node *in, ew_op op, ag_dtype out_dt)
{
    const ag_tensor_desc *x = inp(in, 0);
    ag_dtype dt = out_dt != AG_DT_UNDEFINED ? out_dt : (x ? x->dtype : AG_DT_UNDEFINED);
    mval a;
    int64_t ri[MV_CAP];
    double rf[MV_CAP];
    if (!x)
        return set_out_unknown(in, 0, dt);
    if (op != EW_NONE && mval_read(x->value, &a)) {
        bool ok = true;
        bool out_isf = ag_dtype_is_float(dt);
        for (uint64_t k = 0; k < a.n && ok; k++) {
            int64_t r_i = 0;
            double r_f = 0;
            ok = ew_unary(op, a.isf, a.i[k], a.f[k], &r_i, &r_f);
            if (out_isf) {
                rf[k] = a.isf ? r_f : (double)r_i;
            } else {
                ri[k] = (a.isf && op != EW_ISNAN && op != EW_ISINF) ? (int64_t)r_f : r_i;
                rf[k] = (double)ri[k];
            }
        }
        if (ok)
            return mval_emit(in, 0, dt, a.rank, a.dims, a.n, ri, rf);
    }
    return set_out(in, 0, dt, x->rank, x->dims);
}

/* Multidirectional broadcast of all present inputs, then value evaluation. */
static ag_status ew_nary_rule(ag_infer_node *in, ew_op op)
{
    uint32_t nin = ag_inf_nin(in);
    int64_t dims[AG_MAX_RANK], tmp[AG_MAX_RANK];
    int32_t rank = 0;
    bool rank_known = true, any = false;
    ag_dtype dt = first_dt(in);
    if (op == EW_XOR)
        dt = AG_DT_BOOL;
    /* Before opset 7 (8 for the variadic ops) shapes were equal or B was
     * broadcast onto A: the result has A's shape. */
    if (legacy_broadcast(in))
        return set_out_like(in, 0, 0, dt);
    for (uint32_t i = 0; i < nin; i++) {
        const ag_tensor_desc *d = inp(in, i);
        int32_t r2;
        if (!d)
            continue;
        if (d->rank < 0) {
            rank_known = false;
            continue;
        }
        if (!any) {
            rank = d->rank;
            if (rank)
                memcpy(dims, d->dims, (size_t)rank * sizeof *dims);
            any = true;
            continue;
        }
        if (!ag_inf_broadcast(rank, dims, d->rank, d->dims, &r2, tmp)) {
            char a[160], b[160];
            fmt_shape(a, sizeof a, rank, dims);
            fmt_desc(b, sizeof b, d);
            return ag_inf_fail(in, "input %u of shape %s does not broadcast with %s", i, b, a);
        }
        rank = r2;
        if (rank)
            memcpy(dims, tmp, (size_t)rank * sizeof *dims);
    }
    if (!any)
        return set_out_unknown(in, 0, dt);
    if (!rank_known) {
        /* The rank is at least the largest known one; dims stay unknown. */
        return set_out_unknown(in, 0, dt);
    }
    /* Value evaluation for small known inputs. */
    if (op != EW_NONE) {
        mval *v = NULL;
        mval vals[2];
        bool ok = nin >= 1;
        uint64_t n = 1;
        int64_t ri[MV_CAP];
        double rf[MV_CAP];
        const char *dir = ag_inf_attr_string_or(in, "direction", "");
        bool isf = false;
        for (int32_t k = 0; k < rank; k++)
            n = dims[k] >= 0 ? n * (uint64_t)dims[k] : UINT64_MAX;
        if (n > MV_CAP)
            ok = false;
        /* Variadic ops are folded pairwise into vals[0]. */
        for (uint32_t i = 0; ok && i < nin; i++) {
            const ag_tensor_desc *d = inp(in, i);
            mval *cur = i == 0 ? &vals[0] : &vals[1];
            if (!d || !mval_read(d->value, cur)) {
                ok = false;
                break;
            }
            if (i == 0) {
                isf = cur->isf;
                continue;
            }
            if (cur->isf != isf) {
                ok = false;
                break;
            }
            for (uint64_t k = 0; k < n && ok; k++) {
                uint64_t ia = bcast_index(k, rank, dims, vals[0].rank, vals[0].dims);
                uint64_t ib = bcast_index(k, rank, dims, cur->rank, cur->dims);
                ew_op fold = (op == EW_MEAN) ? EW_SUM : op;
                if (isf) {
                    ok = ew_float(fold, vals[0].f[ia], cur->f[ib], &rf[k]);
                    ri[k] = (int64_t)rf[k];
                } else {
                    ok = ew_int(fold, vals[0].i[ia], cur->i[ib], dir, &ri[k]);
                    rf[k] = (double)ri[k];
                }
            }
            if (!ok)
                break;
            /* The running result now has the output's shape. */
            v = &vals[0];
            v->rank = rank;
            v->dims = dims;
            v->n = n;
            if (op == EW_XOR) {
                memcpy(v->i, ri, n * sizeof *ri);
                for (uint64_t k = 0; k < n; k++)
                    v->f[k] = (double)ri[k];
                v->isf = false;
                isf = false;
            } else {
                memcpy(v->i, ri, n * sizeof *ri);
                memcpy(v->f, rf, n * sizeof *rf);
            }
        }
        if (ok && v && nin >= 2) {
            if (op == EW_MEAN) {
                if (!v->isf)
                    ok = false; /* integer Mean is not defined in ONNX */
                for (uint64_t k = 0; ok && k < n; k++)
                    v->f[k] /= (double)nin;
            }
            if (ok)
                return mval_emit(in, 0, dt, rank, dims, n, v->i, v->f);
        }
    }
    return set_out(in, 0, dt, rank, dims);
}

#define EW_UNARY(fname, op, dt) \
    static ag_status fname(ag_infer_node *in) { return ew_unary_rule(in, op, dt); }
#define EW_NARY(fname, op) \
    static ag_status fname(ag_infer_node *in) { return ew_nary_rule(in, op); }

EW_UNARY(r_same, EW_NONE, AG_DT_UNDEFINED)
EW_UNARY(r_recip, EW_RECIP, AG_DT_UNDEFINED)
EW_UNARY(r_sqrt, EW_SQRT, AG_DT_UNDEFINED)
EW_UNARY(r_sign, EW_SIGN, AG_DT_UNDEFINED)
EW_UNARY(r_round, EW_ROUND, AG_DT_UNDEFINED)
EW_UNARY(r_relu, EW_RELU, AG_DT_UNDEFINED)
EW_UNARY(r_exp, EW_EXP, AG_DT_UNDEFINED)
EW_UNARY(r_log, EW_LOG, AG_DT_UNDEFINED)
EW_UNARY(r_bitnot, EW_BITNOT, AG_DT_UNDEFINED)
EW_UNARY(r_isnan, EW_ISNAN, AG_DT_BOOL)
EW_UNARY(r_isinf, EW_ISINF, AG_DT_BOOL)
EW_NARY(r_pow, EW_POW)
EW_NARY(r_sum, EW_SUM)
EW_NARY(r_mean, EW_MEAN)
EW_NARY(r_xor, EW_XOR)
EW_NARY(r_bitand, EW_BITAND)
EW_NARY(r_bitor, EW_BITOR)
EW_NARY(r_bitxor, EW_BITXOR)
EW_NARY(r_bitshift, EW_SHIFT)
/* Broadcast shape only: ops whose other inputs are biases/slopes (BiasGelu,
 * PRelu, BiasAdd) and the binary ops of the core family when reached here. */
EW_NARY(r_bcast, EW_NONE)

/* Pow: dtype of the base (T), not of the exponent. */
static ag_status r_pow_typed(ag_infer_node *in)
{
    ag_dtype base = in_dt(in, 0);
    const ag_tensor_desc *e = inp(in, 1);
    if (e && base != AG_DT_UNDEFINED && e->dtype != base && e->dtype != AG_DT_UNDEFINED) {
        /* mixed types: evaluate the shape only, typed as the base */
        int64_t dims[AG_MAX_RANK];
        int32_t r = 0;
        const ag_tensor_desc *b = inp(in, 0);
        if (legacy_broadcast(in))
            return set_out_like(in, 0, 0, base);
        if (!b || b->rank < 0 || e->rank < 0)
            return set_out_unknown(in, 0, base);
        if (!ag_inf_broadcast(b->rank, b->dims, e->rank, e->dims, &r, dims)) {
            char sa[160], sb[160];
            fmt_desc(sa, sizeof sa, b);
            fmt_desc(sb, sizeof sb, e);
            return ag_inf_fail(in, "input 1 of shape %s does not broadcast with input 0 of shape %s", sb, sa);
        }
        return set_out(in, 0, base, r, dims);
    }
    return r_pow(in);
}

/* PRelu: slope broadcasts onto X (unidirectional); the result has X's shape. */
static ag_status r_prelu(ag_infer_node *in)
{
    const ag_tensor_desc *x = inp(in, 0), *s = inp(in, 1);
    int64_t dims[AG_MAX_RANK];
    int32_t r = 0;
    if (x && s && x->rank >= 0 && s->rank >= 0 && !legacy_broadcast(in)) {
        bool ok = ag_inf_broadcast(x->rank, x->dims, s->rank, s->dims, &r, dims) && r == x->rank;
        for (int32_t k = 0; ok && k < r; k++)
            ok = x->dims[k] < 0 || x->dims[k] == dims[k];
        /* Before opset 7 the slope was per channel: [C] against [N, C, ...]. */
        if (!ok && s->rank == 1 && x->rank >= 2 && (s->dims[0] < 0 || x->dims[1] < 0 || s->dims[0] == x->dims[1]))
            return set_out(in, 0, x->dtype, x->rank, x->dims);
        if (!ok) {
            char sa[160], sb[160];
            fmt_desc(sa, sizeof sa, x);
            fmt_desc(sb, sizeof sb, s);
            return ag_inf_fail(in, "slope (input 1) of shape %s does not broadcast onto X of shape %s", sb, sa);
        }
        return set_out(in, 0, x->dtype, r, dims);
    }
    return set_out_like(in, 0, 0, in_dt(in, 0));
}

/* Clip, Dropout-free activations and other ops whose output 0 is input 0. */
static ag_status r_first(ag_infer_node *in)
{
    return set_out_like(in, 0, 0, in_dt(in, 0));
}

/* Dropout: output, and mask. */
static ag_status r_dropout(ag_infer_node *in)
{
    int64_t is_test;
    /* The mask became bool in opset 10; opset 6 nodes carry "is_test". */
    ag_dtype mdt = ((in->opset > 0 && in->opset < 10) || ag_inf_attr_int(in, "is_test", &is_test))
                       ? in_dt(in, 0)
                       : AG_DT_BOOL;
    AG_TRY(set_out_like(in, 0, 0, in_dt(in, 0)));
    return set_out_like(in, 1, 0, mdt);
}

/* ------------------------------------------------------------------------ */
/* reductions                                                                 */
/* ------------------------------------------------------------------------ */

typedef enum red_op { RED_NONE, RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_PROD } red_op;

/* Reads the reduced axes (attribute before opset 18 / 13 for ReduceSum, input 1
 * after).  *known false when axes come from an input whose value is unknown. */
static ag_status red_axes(ag_infer_node *in, int32_t rank, bool axes[AG_MAX_RANK], bool *all, bool *known,
                          uint32_t *count)
{
    int64_t buf[AG_MAX_RANK];
    const int64_t *ax = NULL;
    uint32_t n = 0;
    uint64_t cnt = 0;
    const ag_tensor_desc *ai = ag_inf_nin(in) > 1 ? inp(in, 1) : NULL;
    *all = false;
    *known = true;
    *count = 0;
    if (ai) {
        if (!ag_inf_tensor_ints(ai->value, buf, AG_MAX_RANK, &cnt)) {
            if (ai->rank == 1 && ai->dims[0] == 0) {
                cnt = 0;
            } else {
                *known = false;
                return AG_OK;
            }
        }
        ax = buf;
        n = (uint32_t)cnt;
    } else if (!ag_inf_attr_ints(in, "axes", &ax, &n)) {
        n = 0;
    }
    for (int32_t k = 0; k < rank; k++)
        axes[k] = false;
    if (n == 0) {
        if (ag_inf_attr_int_or(in, "noop_with_empty_axes", 0)) {
            *count = 0;
            return AG_OK;
        }
        *all = true;
        for (int32_t k = 0; k < rank; k++)
            axes[k] = true;
        *count = (uint32_t)(rank > 0 ? rank : 0);
        return AG_OK;
    }
    if (rank < 0) {
        *known = false;
        return AG_OK;
    }
    for (uint32_t j = 0; j < n; j++) {
        int32_t a;
        if (!ag_inf_axis(ax[j], rank, &a))
            return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)ax[j], rank);
        if (!axes[a])
            (*count)++;
        axes[a] = true;
    }
    return AG_OK;
}

static ag_status reduce_rule(ag_infer_node *in, red_op rop)
{
    const ag_tensor_desc *x = inp(in, 0);
    ag_dtype dt = in_dt(in, 0);
    int64_t keep = ag_inf_attr_int_or(in, "keepdims", 1);
    bool axes[AG_MAX_RANK], all, known;
    uint32_t cnt;
    int64_t dims[AG_MAX_RANK];
    int32_t r = 0;
    if (!x || x->rank < 0) {
        /* Reducing everything without keepdims gives a scalar whatever the rank. */
        const ag_tensor_desc *ai = ag_inf_nin(in) > 1 ? inp(in, 1) : NULL;
        uint32_t na = 0;
        const int64_t *ax;
        if (!keep && !ai && !ag_inf_attr_ints(in, "axes", &ax, &na) &&
            !ag_inf_attr_int_or(in, "noop_with_empty_axes", 0))
            return set_out(in, 0, dt, 0, NULL);
        return set_out_unknown(in, 0, dt);
    }
    AG_TRY(red_axes(in, x->rank, axes, &all, &known, &cnt));
    if (!known) {
        if (keep)
            return set_out_rank(in, 0, dt, x->rank);
        return set_out_unknown(in, 0, dt);
    }
    (void)all;
    for (int32_t k = 0; k < x->rank; k++) {
        if (!axes[k])
            dims[r++] = x->dims[k];
        else if (keep)
            dims[r++] = 1;
    }
    /* Value evaluation of small integer/float inputs (shape arithmetic). */
    if (rop != RED_NONE) {
        mval v;
        int64_t ri[MV_CAP];
        double rf[MV_CAP];
        bool seen[MV_CAP];
        uint64_t nout = 1;
        for (int32_t k = 0; k < r; k++)
            nout *= (uint64_t)(dims[k] >= 0 ? dims[k] : 0);
        if (mval_read(x->value, &v) && nout <= MV_CAP && nout > 0 && !(rop == RED_MEAN && !v.isf)) {
            memset(seen, 0, sizeof seen);
            for (uint64_t k = 0; k < v.n; k++) {
                /* output flat index: drop reduced coordinates */
                uint64_t rem = k, o = 0, mul = 1;
                for (int32_t a = x->rank - 1; a >= 0; a--) {
                    uint64_t c = rem % (uint64_t)x->dims[a];
                    rem /= (uint64_t)x->dims[a];
                    if (!axes[a]) {
                        o += c * mul;
                        mul *= (uint64_t)x->dims[a];
                    }
                }
                if (!seen[o]) {
                    seen[o] = true;
                    ri[o] = v.i[k];
                    rf[o] = v.f[k];
                    continue;
                }
                switch (rop) {
                case RED_SUM: case RED_MEAN: ri[o] = iwrap_add(ri[o], v.i[k]); rf[o] += v.f[k]; break;
                case RED_PROD: ri[o] = iwrap_mul(ri[o], v.i[k]); rf[o] *= v.f[k]; break;
                case RED_MAX: if (v.i[k] > ri[o]) ri[o] = v.i[k]; if (v.f[k] > rf[o]) rf[o] = v.f[k]; break;
                case RED_MIN: if (v.i[k] < ri[o]) ri[o] = v.i[k]; if (v.f[k] < rf[o]) rf[o] = v.f[k]; break;
                default: break;
                }
            }
            if (rop == RED_MEAN) {
                for (uint64_t o = 0; o < nout; o++)
                    rf[o] /= (double)(v.n / nout);
            }
            if (v.n > 0)
                return mval_emit(in, 0, dt, r, dims, nout, ri, rf);
        }
    }
    return set_out(in, 0, dt, r, dims);
}

static ag_status r_reduce(ag_infer_node *in) { return reduce_rule(in, RED_NONE); }
static ag_status r_reduce_sum(ag_infer_node *in) { return reduce_rule(in, RED_SUM); }
static ag_status r_reduce_mean(ag_infer_node *in) { return reduce_rule(in, RED_MEAN); }
static ag_status r_reduce_max(ag_infer_node *in) { return reduce_rule(in, RED_MAX); }
static ag_status r_reduce_min(ag_infer_node *in) { return reduce_rule(in, RED_MIN); }

/* ArgMax / ArgMin: one axis, int64 indices. */
static ag_status r_argmax(ag_infer_node *in)
{
    const ag_tensor_desc *x = inp(in, 0);
    int64_t keep = ag_inf_attr_int_or(in, "keepdims", 1);
    int64_t axis = ag_inf_attr_int_or(in, "axis", 0);
    int64_t dims[AG_MAX_RANK];
    int32_t a, r = 0;
    if (!x || x->rank < 0)
        return set_out_unknown(in, 0, AG_DT_I64);
    if (!ag_inf_axis(axis, x->rank, &a))
        return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)axis, x->rank);
    for (int32_t k = 0; k < x->rank; k++) {
        if (k != a)
            dims[r++] = x->dims[k];
        else if (keep)
            dims[r++] = 1;
    }
    return set_out(in, 0, AG_DT_I64, r, dims);
}

/* Softmax-style ops keep the shape; validate the axis when the rank is known. */
static ag_status r_axis_same(ag_infer_node *in)
{
    const ag_tensor_desc *x = inp(in, 0);
    int64_t axis;
    int32_t a;
    if (x && x->rank > 0 && ag_inf_attr_int(in, "axis", &axis) && !ag_inf_axis(axis, x->rank, &a))
        return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)axis, x->rank);
    return set_out_like(in, 0, 0, in_dt(in, 0));
}

/* ------------------------------------------------------------------------ */
/* matrix products                                                            */
/* ------------------------------------------------------------------------ */

/* numpy matmul of shapes a and b (1-D operands are promoted then squeezed). */
static ag_status matmul_shape(ag_infer_node *in, uint32_t ia, uint32_t ib, bool trans_a, bool trans_b,
                              int64_t n_override, int32_t *rank, int64_t *dims)
{
    const ag_tensor_desc *a = inp(in, ia), *b = inp(in, ib);
    int64_t ad[AG_MAX_RANK], bd[AG_MAX_RANK], batch[AG_MAX_RANK];
    int32_t ra, rb, rbatch, r = 0;
    int64_t m, ka, kb, n, k;
    if (!a || !b || a->rank < 0 || (b->rank < 0 && n_override < 0)) {
        *rank = AG_RANK_UNKNOWN;
        return AG_OK;
    }
    if (a->rank == 0 || b->rank == 0)
        return ag_inf_fail(in, "input %u or %u is a scalar (rank 0); matrix product needs rank >= 1", ia, ib);
    ra = a->rank;
    memcpy(ad, a->dims, (size_t)ra * sizeof *ad);
    if (ra == 1) {
        ad[1] = ad[0];
        ad[0] = 1;
        ra = 2;
    }
    rb = b->rank;
    memcpy(bd, b->dims, (size_t)rb * sizeof *bd);
    if (rb == 1) {
        bd[1] = 1;
        rb = 2;
    }
    if (trans_a) {
        int64_t t = ad[ra - 1];
        ad[ra - 1] = ad[ra - 2];
        ad[ra - 2] = t;
    }
    if (trans_b) {
        int64_t t = bd[rb - 1];
        bd[rb - 1] = bd[rb - 2];
        bd[rb - 2] = t;
    }
    m = ad[ra - 2];
    ka = ad[ra - 1];
    kb = bd[rb - 2];
    n = n_override >= 0 ? n_override : bd[rb - 1];
    if (!dim_merge(ka, kb, &k)) {
        char sa[160], sb[160];
        fmt_desc(sa, sizeof sa, a);
        fmt_desc(sb, sizeof sb, b);
        return ag_inf_fail(in, "inner dimensions differ: input %u %s (K=%lld) x input %u %s (K=%lld)", ia, sa,
                           (long long)ka, ib, sb, (long long)kb);
    }
    if (!ag_inf_broadcast(ra - 2, ad, rb - 2, bd, &rbatch, batch)) {
        char sa[160], sb[160];
        fmt_desc(sa, sizeof sa, a);
        fmt_desc(sb, sizeof sb, b);
        return ag_inf_fail(in, "batch dimensions of input %u %s and input %u %s do not broadcast", ia, sa, ib,
                           sb);
    }
    for (int32_t j = 0; j < rbatch; j++)
        dims[r++] = batch[j];
    if (a->rank != 1)
        dims[r++] = m;
    if (b->rank != 1)
        dims[r++] = n;
    *rank = r;
    return AG_OK;
}

static ag_status matmul_rule(ag_infer_node *in, uint32_t ia, uint32_t ib, ag_dtype dt, bool ta, bool tb)
{
    int64_t dims[AG_MAX_RANK];
    int32_t r = 0;
    AG_TRY(matmul_shape(in, ia, ib, ta, tb, -1, &r, dims));
    return set_out(in, 0, dt, r, dims);
}

static ag_status r_matmul(ag_infer_node *in)
{
    return matmul_rule(in, 0, 1, first_dt(in), false, false);
}

static ag_status r_matmul_integer(ag_infer_node *in)
{
    return matmul_rule(in, 0, 1, AG_DT_I32, false, false);
}

/* QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): y has y_zp's type. */
static ag_status r_qlinear_matmul(ag_infer_node *in)
{
    ag_dtype dt = in_dt(in, 7) != AG_DT_UNDEFINED ? in_dt(in, 7) : in_dt(in, 0);
    return matmul_rule(in, 0, 3, dt, false, false);
}

/* com.microsoft FusedMatMul: MatMul with transA/transB on the last two dims. */
static ag_status r_fused_matmul(ag_infer_node *in)
{
    bool ta = ag_inf_attr_int_or(in, "transA", 0) != 0, tb = ag_inf_attr_int_or(in, "transB", 0) != 0;
    if ((ta && in_rank(in, 0) == 1) || (tb && in_rank(in, 1) == 1))
        return set_out_unknown(in, 0, in_dt(in, 0));
    return matmul_rule(in, 0, 1, in_dt(in, 0), ta, tb);
}

/* com.microsoft MatMulNBits: A [..., K] x packed B -> [..., N] (N attribute). */
static ag_status r_matmul_nbits(ag_infer_node *in)
{
    const ag_tensor_desc *a = inp(in, 0);
    int64_t n = ag_inf_attr_int_or(in, "N", UNK), k = ag_inf_attr_int_or(in, "K", UNK);
    int64_t dims[AG_MAX_RANK];
    if (!a || a->rank < 1)
        return set_out_unknown(in, 0, in_dt(in, 0));
    if (k >= 0 && a->dims[a->rank - 1] >= 0 && a->dims[a->rank - 1] != k)
        return ag_inf_fail(in, "input 0 last dimension %lld differs from attribute K=%lld",
                           (long long)a->dims[a->rank - 1], (long long)k);
    memcpy(dims, a->dims, (size_t)a->rank * sizeof *dims);
    dims[a->rank - 1] = n;
    return set_out(in, 0, a->dtype, a->rank, dims);
}

/* Gemm: A [M,K] (or transposed) x B [K,N] -> [M,N]. */
static ag_status r_gemm(ag_infer_node *in)
{
    const ag_tensor_desc *a = inp(in, 0), *b = inp(in, 1);
    bool ta = ag_inf_attr_int_or(in, "transA", 0) != 0, tb = ag_inf_attr_int_or(in, "transB", 0) != 0;
    int64_t dims[2], ka, kb, k;
    ag_dtype dt = first_dt(in);
    if (!a || !b || a->rank != 2 || b->rank != 2) {
        if ((a && a->rank >= 0 && a->rank != 2) || (b && b->rank >= 0 && b->rank != 2))
            return ag_inf_fail(in, "inputs must be 2-D (input 0 rank %d, input 1 rank %d)", a ? a->rank : -1,
                               b ? b->rank : -1);
        return set_out_rank(in, 0, dt, 2);
    }
    dims[0] = ta ? a->dims[1] : a->dims[0];
    ka = ta ? a->dims[0] : a->dims[1];
    kb = tb ? b->dims[1] : b->dims[0];
    dims[1] = tb ? b->dims[0] : b->dims[1];
    if (!dim_merge(ka, kb, &k))
        return ag_inf_fail(in, "inner dimensions differ: A gives K=%lld, B gives K=%lld (transA=%d transB=%d)",
                           (long long)ka, (long long)kb, ta, tb);
    return set_out(in, 0, dt, 2, dims);
}

/* Einsum: output labels explicit after "->", else the labels used once, sorted. */
static ag_status r_einsum(ag_infer_node *in)
{
    const char *eq = ag_inf_attr_string_or(in, "equation", NULL);
    ag_dtype dt = first_dt(in);
    int64_t label_dim[128];
    int label_count[128];
    int64_t ell[AG_MAX_RANK], tmp[AG_MAX_RANK];
    int32_t ell_rank = 0;
    bool ell_seen = false;
    char terms[8][AG_MAX_RANK + 8];
    uint32_t nterms = 0, nin = ag_inf_nin(in);
    const char *p, *arrow;
    int64_t dims[AG_MAX_RANK];
    int32_t r = 0;
    if (!eq)
        return set_out_unknown(in, 0, dt);
    for (int c = 0; c < 128; c++) {
        label_dim[c] = UNK;
        label_count[c] = 0;
    }
    arrow = strstr(eq, "->");
    /* split the input part into terms (spaces ignored) */
    p = eq;
    while (p && (!arrow || p < arrow)) {
        size_t len = 0;
        if (nterms >= 8)
            return set_out_unknown(in, 0, dt);
        while (*p && *p != ',' && (!arrow || p < arrow)) {
            if (*p != ' ') {
                if (len >= sizeof terms[0] - 1)
                    return ag_inf_fail(in, "equation term too long in \"%s\"", eq);
                terms[nterms][len++] = *p;
            }
            p++;
        }
        terms[nterms][len] = '\0';
        nterms++;
        if (*p == ',')
            p++;
        else
            break;
    }
    if (nterms != nin)
        return ag_inf_fail(in, "equation \"%s\" has %u operand terms but the node has %u inputs", eq, nterms,
                           nin);
    for (uint32_t t = 0; t < nterms; t++) {
        const ag_tensor_desc *d = inp(in, t);
        const char *s = terms[t];
        int32_t letters = 0, pos = 0;
        bool has_ell = strstr(s, "...") != NULL;
        for (const char *q = s; *q; q++)
            if (*q != '.')
                letters++;
        if (!d || d->rank < 0)
            return set_out_unknown(in, 0, dt);
        if ((!has_ell && letters != d->rank) || (has_ell && letters > d->rank))
            return ag_inf_fail(in, "equation term \"%s\" does not match input %u of rank %d", s, t, d->rank);
        for (const char *q = s; *q;) {
            if (*q == '.') {
                if (strncmp(q, "...", 3) != 0)
                    return ag_inf_fail(in, "malformed ellipsis in equation \"%s\"", eq);
                int32_t ne = d->rank - letters, r2;
                if (!ell_seen) {
                    ell_rank = ne;
                    memcpy(ell, d->dims + pos, (size_t)ne * sizeof *ell);
                    ell_seen = true;
                } else {
                    if (!ag_inf_broadcast(ell_rank, ell, ne, d->dims + pos, &r2, tmp))
                        return ag_inf_fail(in, "ellipsis dimensions of input %u do not broadcast", t);
                    ell_rank = r2;
                    memcpy(ell, tmp, (size_t)r2 * sizeof *ell);
                }
                pos += ne;
                q += 3;
                continue;
            }
            {
                unsigned char c = (unsigned char)*q;
                int64_t m;
                if (c >= 128)
                    return ag_inf_fail(in, "bad label in equation \"%s\"", eq);
                if (!dim_merge(label_dim[c], d->dims[pos], &m) &&
                    !(label_dim[c] == 1 || d->dims[pos] == 1))
                    return ag_inf_fail(in, "label '%c' has extents %lld and %lld", c, (long long)label_dim[c],
                                       (long long)d->dims[pos]);
                if (label_dim[c] == 1 || label_dim[c] < 0)
                    label_dim[c] = d->dims[pos];
                label_count[c]++;
                pos++;
                q++;
            }
        }
    }
    if (arrow) {
        for (const char *q = arrow + 2; *q;) {
            if (*q == ' ') {
                q++;
                continue;
            }
            if (*q == '.') {
                if (strncmp(q, "...", 3) != 0 || r + ell_rank > AG_MAX_RANK)
                    return ag_inf_fail(in, "malformed output term in equation \"%s\"", eq);
                for (int32_t j = 0; j < ell_rank; j++)
                    dims[r++] = ell[j];
                q += 3;
                continue;
            }
            if ((unsigned char)*q >= 128 || r >= AG_MAX_RANK)
                return ag_inf_fail(in, "bad output term in equation \"%s\"", eq);
            dims[r++] = label_dim[(unsigned char)*q];
            q++;
        }
    } else {
        for (int32_t j = 0; j < ell_rank; j++)
            dims[r++] = ell[j];
        for (int c = 0; c < 128; c++)
            if (label_count[c] == 1 && r < AG_MAX_RANK)
                dims[r++] = label_dim[c];
    }
    return set_out(in, 0, dt, r, dims);
}

/* Det: [*, M, M] -> [*]. */
static ag_status r_det(ag_infer_node *in)
{
    const ag_tensor_desc *x = inp(in, 0);
    int64_t m;
    if (!x || x->rank < 0)
        return set_out_unknown(in, 0, in_dt(in, 0));
    if (x->rank < 2 || !dim_merge(x->dims[x->rank - 1], x->dims[x->rank - 2], &m)) {
        char s[160];
        fmt_desc(s, sizeof s, x);
        return ag_inf_fail(in, "input 0 %s is not a (batch of) square matrices", s);
    }
    return set_out(in, 0, x->dtype, x->rank - 2, x->dims);
}

/* ------------------------------------------------------------------------ */
/* convolution and pooling                                                    */
/* ------------------------------------------------------------------------ */

typedef struct win {
    int32_t n;                  /* spatial rank */
    int64_t k[AG_MAX_RANK];     /* kernel extent (UNK if unknown) */
    int64_t s[AG_MAX_RANK];
    int64_t d[AG_MAX_RANK];
    int64_t pb[AG_MAX_RANK], pe[AG_MAX_RANK];
    int64_t op[AG_MAX_RANK];    /* output_padding (ConvTranspose) */
    const char *auto_pad;
} win;

/* Reads kernel/strides/dilations/pads for n spatial dims.  Kernel from the
 * attribute, else from weight input w (dims 2..), else unknown. */
static ag_status win_read(ag_infer_node *in, int32_t n, int32_t w, win *p)
{
    const int64_t *v;
    uint32_t c;
    p->n = n;
    for (int32_t i = 0; i < n; i++) {
        p->k[i] = w >= 0 ? in_dim(in, (uint32_t)w, i + 2) : UNK;
        p->s[i] = 1;
        p->d[i] = 1;
        p->pb[i] = p->pe[i] = 0;
        p->op[i] = 0;
    }
    if (ag_inf_attr_ints(in, "kernel_shape", &v, &c)) {
        if ((int32_t)c != n)
            return ag_inf_fail(in, "kernel_shape has %u entries, input 0 has %d spatial dims", c, n);
        for (int32_t i = 0; i < n; i++)
            p->k[i] = v[i];
    }
    if (ag_inf_attr_ints(in, "strides", &v, &c) && c > 0) {
        if ((int32_t)c != n)
            return ag_inf_fail(in, "strides has %u entries, input 0 has %d spatial dims", c, n);
        for (int32_t i = 0; i < n; i++)
            p->s[i] = v[i];
    }
    if (ag_inf_attr_ints(in, "dilations", &v, &c) && c > 0) {
        if ((int32_t)c != n)
            return ag_inf_fail(in, "dilations has %u entries, input 0 has %d spatial dims", c, n);
        for (int32_t i = 0; i < n; i++)
            p->d[i] = v[i];
    }
    if (ag_inf_attr_ints(in, "pads", &v, &c) && c > 0) {
        if ((int32_t)c != 2 * n)
            return ag_inf_fail(in, "pads has %u entries, expected %d", c, 2 * n);
        for (int32_t i = 0; i < n; i++) {
            p->pb[i] = v[i];
            p->pe[i] = v[i + n];
        }
    }
    if (ag_inf_attr_ints(in, "output_padding", &v, &c) && c > 0) {
        if ((int32_t)c != n)
            return ag_inf_fail(in, "output_padding has %u entries, expected %d", c, n);
        for (int32_t i = 0; i < n; i++)
            p->op[i] = v[i];
    }
    for (int32_t i = 0; i < n; i++)
        if (p->s[i] <= 0 || p->d[i] <= 0)
            return ag_inf_fail(in, "strides and dilations must be positive");
    p->auto_pad = ag_inf_attr_string_or(in, "auto_pad", "NOTSET");
    return AG_OK;
}

/* Output extent of one spatial dim of a forward window (Conv, pooling). */
static ag_status win_out(ag_infer_node *in, const win *p, int32_t i, int64_t x, bool ceil_mode, int64_t *out)
{
    int64_t ek, num, o;
    if (x < 0 || p->k[i] < 0) {
        *out = UNK;
        return AG_OK;
    }
    ek = (p->k[i] - 1) * p->d[i] + 1;
    if (strcmp(p->auto_pad, "SAME_UPPER") == 0 || strcmp(p->auto_pad, "SAME_LOWER") == 0) {
        *out = ceildiv(x, p->s[i]);
        return AG_OK;
    }
    if (strcmp(p->auto_pad, "VALID") == 0)
        num = x - ek;
    else
        num = x + p->pb[i] + p->pe[i] - ek;
    if (num < 0)
        return ag_inf_fail(in, "window of extent %lld does not fit spatial dim %d of extent %lld (padded %lld)",
                           (long long)ek, i, (long long)x, (long long)(x + p->pb[i] + p->pe[i]));
    o = (ceil_mode ? ceildiv(num, p->s[i]) : num / p->s[i]) + 1;
    /* The last window must start inside the input or the begin padding. */
    if (ceil_mode && (o - 1) * p->s[i] >= x + p->pb[i])
        o--;
    *out = o;
    return AG_OK;
}

/* Conv-like: X at xi, W at wi (kernel dims 2..), output dtype dt. */
static ag_status conv_rule(ag_infer_node *in, uint32_t xi, uint32_t wi, ag_dtype dt)
{
    const ag_tensor_desc *x = inp(in, xi), *w = inp(in, wi);
    int64_t dims[AG_MAX_RANK];
    int32_t rank;
    win p = {0};
    if (!x || x->rank < 0) {
        if (w && w->rank >= 3) {
            AG_TRY(set_out_rank(in, 0, dt, w->rank));
            return AG_OK;
        }
        return set_out_unknown(in, 0, dt);
    }
    rank = x->rank;
    if (rank < 3)
        return ag_inf_fail(in, "input %u has rank %d; convolution needs [N, C, spatial...]", xi, rank);
    if (w && w->rank >= 0 && w->rank != rank)
        return ag_inf_fail(in, "weight (input %u) has rank %d, input %u has rank %d", wi, w->rank, xi, rank);
    AG_TRY(win_read(in, rank - 2, (int32_t)wi, &p));
    {
        int64_t group = ag_inf_attr_int_or(in, "group", 1);
        int64_t c = x->dims[1], wc = in_dim(in, wi, 1);
        if (c >= 0 && wc >= 0 && group > 0 && c != wc * group)
            return ag_inf_fail(in, "input %u has %lld channels but weight expects %lld x group %lld", xi,
                               (long long)c, (long long)wc, (long long)group);
    }
    dims[0] = x->dims[0];
    dims[1] = in_dim(in, wi, 0);
    for (int32_t i = 0; i < p.n; i++)
        AG_TRY(win_out(in, &p, i, x->dims[i + 2], false, &dims[i + 2]));
    return set_out(in, 0, dt, rank, dims);
}

static ag_status r_conv(ag_infer_node *in)
{
    return conv_rule(in, 0, 1, first_dt(in));
}

static ag_status r_conv_integer(ag_infer_node *in)
{
    return conv_rule(in, 0, 1, AG_DT_I32);
}

/* QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B). */
static ag_status r_qlinear_conv(ag_infer_node *in)
{
    ag_dtype dt = in_dt(in, 7) != AG_DT_UNDEFINED ? in_dt(in, 7) : in_dt(in, 0);
    return conv_rule(in, 0, 3, dt);
}

static ag_status r_conv_transpose(ag_infer_node *in)
{
    const ag_tensor_desc *x = inp(in, 0);
    ag_dtype dt = first_dt(in);
    int64_t dims[AG_MAX_RANK], group = ag_inf_attr_int_or(in, "group", 1);
    const int64_t *os;
    uint32_t nos = 0;
    int32_t rank;
    win p = {0};
    if (!x || x->rank < 0)
        return set_out_unknown(in, 0, dt);
    rank = x->rank;
    if (rank < 3)
        return ag_inf_fail(in, "input 0 has rank %d; ConvTranspose needs [N, C, spatial...]", rank);
    AG_TRY(win_read(in, rank - 2, 1, &p));
    dims[0] = x->dims[0];
    dims[1] = dim_mul(in_dim(in, 1, 1), group);
    if (ag_inf_attr_ints(in, "output_shape", &os, &nos) && nos > 0) {
        if ((int32_t)nos != p.n && (int32_t)nos != rank)
            return ag_inf_fail(in, "output_shape has %u entries, expected %d", nos, p.n);
        for (int32_t i = 0; i < p.n; i++)
            dims[i + 2] = os[(int32_t)nos - p.n + i];
        return set_out(in, 0, dt, rank, dims);
    }
    for (int32_t i = 0; i < p.n; i++) {
        int64_t xd = x->dims[i + 2], o;
        if (xd < 0 || p.k[i] < 0) {
            dims[i + 2] = UNK;
            continue;
        }
        if (strcmp(p.auto_pad, "SAME_UPPER") == 0 || strcmp(p.auto_pad, "SAME_LOWER") == 0) {
            dims[i + 2] = xd * p.s[i];
            continue;
        }
        if (strcmp(p.auto_pad, "VALID") == 0)
            p.pb[i] = p.pe[i] = 0;
        o = p.s[i] * (xd - 1) + p.op[i] + (p.k[i] - 1) * p.d[i] + 1 - p.pb[i] - p.pe[i];
        if (o < 0)
            return ag_inf_fail(in, "spatial dim %d of the output would be negative (%lld)", i, (long long)o);
        dims[i + 2] = o;
    }
    return set_out(in, 0, dt, rank, dims);
}

/* MaxPool / AveragePool / LpPool; MaxPool's output 1 holds int64 indices. */
static ag_status r_pool(ag_infer_node *in)
{
    const ag_tensor_desc *x = inp(in, 0);
    ag_dtype dt = in_dt(in, 0);
    int64_t dims[AG_MAX_RANK];
    bool ceil_mode = ag_inf_attr_int_or(in, "ceil_mode", 0) != 0;
    win p = {0};
    if (!x || x->rank < 0) {
        AG_TRY(set_out_unknown(in, 0, dt));
        return set_out_unknown(in, 1, AG_DT_I64);
    }
    if (x->rank < 3)
        return ag_inf_fail(in, "input 0 has rank %d; pooling needs [N, C, spatial...]", x->rank);
    AG_TRY(win_read(in, x->rank - 2, -1, &p));
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int32_t i = 0; i < p.n; i++)
        AG_TRY(win_out(in, &p, i, x->dims[i + 2], ceil_mode, &dims[i + 2]));
    AG_TRY(set_out(in, 0, dt, x->rank, dims));
    return set_out(in, 1, AG_DT_I64, x->rank, dims);
}

/* GlobalXxxPool: spatial dims become 1. */
static ag_status r_global_pool(ag_infer_node *in)
{
    const ag_tensor_desc *x = inp(in, 0);
    int64_t dims[AG_MAX_RANK];
    if (!x || x->rank < 0)
        return set_out_unknown(in, 0, in_dt(in, 0));
    if (x->rank < 2)
        return ag_inf_fail(in, "input 0 has rank %d; global pooling needs [N, C, ...]", x->rank);
    for (int32_t k = 0; k < x->rank; k++)
        dims[k] = k < 2 ? x->dims[k] : 1;
    return set_out(in, 0, x->dtype, x->rank, dims);
}

/* MaxUnpool(X, I, output_shape?). */
static ag_status r_max_unpool(ag_infer_node *in)
{
    const ag_tensor_desc *x = inp(in, 0);
    ag_dtype dt = in_dt(in, 0);
    int64_t dims[AG_MAX_RANK];
    uint64_t cnt = 0;
    win p = {0};
    if (ag_inf_nin(in) > 2 && inp(in, 2)) {
        /* output_shape given: it is the whole shape; its length is the rank */
        int64_t r = in_dim(in, 2, 0);
        if (ag_inf_tensor_ints(ag_inf_in_value(in, 2), dims, AG_MAX_RANK, &cnt))
            return set_out(in, 0, dt, (int32_t)cnt, dims);
        if (x && x->rank >= 0)
            return set_out_rank(in, 0, dt, x->rank);
        return set_out_rank(in, 0, dt, r >= 0 && r <= AG_MAX_RANK ? (int32_t)r : AG_RANK_UNKNOWN);
    }
    if (!x || x->rank < 0)
        return set_out_unknown(in, 0, dt);
    if (x->rank < 3)
        return ag_inf_fail(in, "input 0 has rank %d; MaxUnpool needs [N, C, spatial...]", x->rank);
    AG_TRY(win_read(in, x->rank - 2, -1, &p));
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int32_t i = 0; i < p.n; i++) {
        int64_t xd = x->dims[i + 2];
        dims[i + 2] = (xd < 0 || p.k[i] < 0) ? UNK : (xd - 1) * p.s[i] + p.k[i] - p.pb[i] - p.pe[i];
    }
    return set_out(in, 0, dt, x->rank, dims);
}

/* MaxRoiPool(X, rois [R, 5]) -> [R, C, pooled...]. */
static ag_status r_max_roi_pool(ag_infer_node *in)
{
    const int64_t *ps;
    uint32_t n = 0;
    int64_t dims[AG_MAX_RANK];
    ag_dtype dt = in_dt(in, 0);
    if (!ag_inf_attr_ints(in, "pooled_shape", &ps, &n) || n + 2 > AG_MAX_RANK)
        return set_out_unknown(in, 0, dt);
    dims[0] = in_dim(in, 1, 0);
    dims[1] = in_dim(in, 0, 1);
    for (uint32_t i = 0; i < n; i++)
        dims[i + 2] = ps[i];
    return set_out(in, 0, dt, (int32_t)n + 2, dims);
}

/* RoiAlign(X [N,C,H,W], rois [R,4], batch_indices [R]) -> [R, C, oh, ow]. */
static ag_status r_roi_align(ag_infer_node *in)
{
    int64_t dims[4], r;
    if (!dim_merge(in_dim(in, 1, 0), in_dim(in, 2, 0), &r))
        return ag_inf_fail(in, "rois (input 1) and batch_indices (input 2) disagree on the number of boxes");
    dims[0] = r;
    dims[1] = in_dim(in, 0, 1);
    dims[2] = ag_inf_attr_int_or(in, "output_height", 1);
    dims[3] = ag_inf_attr_int_or(in, "output_width", 1);
    return set_out(in, 0, in_dt(in, 0), 4, dims);
}

/* ------------------------------------------------------------------------ */
/* normalisation                                                              */
/* ------------------------------------------------------------------------ */

/* BatchNormalization: Y like X; running/saved statistics [C]. */
static ag_status r_batch_norm(ag_infer_node *in)
{
    int64_t c = in_dim(in, 0, 1), cs = c;
    ag_dtype sdt = in_dt(in, 3) != AG_DT_UNDEFINED ? in_dt(in, 3) : in_dt(in, 0);
    if (!dim_merge(c, in_dim(in, 1, 0), &cs) && in_rank(in, 1) == 1)
        return ag_inf_fail(in, "scale (input 1) has %lld entries, input 0 has %lld channels",
                           (long long)in_dim(in, 1, 0), (long long)c);
    AG_TRY(set_out_like(in, 0, 0, in_dt(in, 0)));
    for (uint32_t o = 1; o < ag_inf_nout(in); o++)
        AG_TRY(set_out(in, o, sdt, 1, &cs));
    return AG_OK;
}

/* LayerNormalization: Y like X; Mean and InvStdDev keep the leading dims
 * (before axis) and have 1 elsewhere, typed by stash_type. */
static ag_status layer_norm_stats(ag_infer_node *in, uint32_t first_out, int64_t axis, ag_dtype sdt)
{
    const ag_tensor_desc *x = inp(in, 0);
    int64_t dims[AG_MAX_RANK];
    int32_t a;
    if (!x || x->rank < 0) {
        for (uint32_t o = first_out; o < first_out + 2; o++)
            AG_TRY(set_out_unknown(in, o, sdt));
        return AG_OK;
    }
    if (!ag_inf_axis(axis, x->rank, &a))
        return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)axis, x->rank);
    for (int32_t k = 0; k < x->rank; k++)
        dims[k] = k < a ? x->dims[k] : 1;
    for (uint32_t o = first_out; o < first_out + 2; o++)
        AG_TRY(set_out(in, o, sdt, x->rank, dims));
    return AG_OK;
}

static ag_status r_layer_norm(ag_infer_node *in)
{
    int64_t axis = ag_inf_attr_int_or(in, "axis", -1);
    ag_dtype sdt = attr_dtype_or(in, "stash_type", AG_DT_F32);
    AG_TRY(set_out_like(in, 0, 0, in_dt(in, 0)));
    return layer_norm_stats(in, 1, axis, sdt);
}

/* com.microsoft SkipLayerNormalization(input, skip, gamma, beta?, bias?):
 * output, mean, inv_std_var, input_skip_bias_sum. */
static ag_status r_skip_layer_norm(ag_infer_node *in)
{
    const ag_tensor_desc *x = inp(in, 0), *s = inp(in, 1);
    if (x && s && x->rank >= 0 && s->rank >= 0) {
        int64_t dims[AG_MAX_RANK];
        int32_t r = 0;
        if (!ag_inf_broadcast(x->rank, x->dims, s->rank, s->dims, &r, dims) || r != x->rank) {
            char sa[160], sb[160];
            fmt_desc(sa, sizeof sa, x);
            fmt_desc(sb, sizeof sb, s);
            return ag_inf_fail(in, "skip (input 1) %s does not broadcast onto input 0 %s", sb, sa);
        }
    }
    AG_TRY(set_out_like(in, 0, 0, in_dt(in, 0)));
    AG_TRY(layer_norm_stats(in, 1, -1, AG_DT_F32));
    return set_out_like(in, 3, 0, in_dt(in, 0));
}

/* com.microsoft SimplifiedLayerNormalization: Y and InvStdDev. */
static ag_status r_simplified_layer_norm(ag_infer_node *in)
{
    const ag_tensor_desc *x = inp(in, 0);
    int64_t axis = ag_inf_attr_int_or(in, "axis", -1);
    ag_dtype sdt = attr_dtype_or(in, "stash_type", AG_DT_F32);
    int64_t dims[AG_MAX_RANK];
    int32_t a;
    AG_TRY(set_out_like(in, 0, 0, in_dt(in, 0)));
    if (!x || x->rank < 0)
        return set_out_unknown(in, 1, sdt);
    if (!ag_inf_axis(axis, x->rank, &a))
        return ag_inf_fail(in, "axis %lld out of range for input 0 of rank %d", (long long)axis, x->rank);
    for (int32_t k = 0; k < x->rank; k++)
        dims[k] = k < a ? x->dims[k] : 1;
    return set_out(in, 1, sdt, x->rank, dims);
}

/* ------------------------------------------------------------------------ */
/* recurrent cells                                                            */
/* ------------------------------------------------------------------------ */

/* RNN / GRU / LSTM: Y, Y_h (and Y_c for LSTM); layout 0 is [seq, batch, ...]. */
static ag_status r_rnn(ag_infer_node *in)
{
    const char *dir = ag_inf_attr_string_or(in, "direction", "forward");
    int64_t layout = ag_inf_attr_int_or(in, "layout", 0);
    int64_t nd = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
    int64_t hidden = ag_inf_attr_int_or(in, "hidden_size", UNK);
    int64_t seq = in_dim(in, 0, layout ? 1 : 0), batch = in_dim(in, 0, layout ? 0 : 1);
    ag_dtype dt = in_dt(in, 0);
    int64_t y[4], yh[3];
    if (hidden < 0)
        hidden = in_dim(in, 2, 2); /* R: [num_directions, gates*hidden, hidden] */
    if (in_rank(in, 0) >= 0 && in_rank(in, 0) != 3)
        return ag_inf_fail(in, "input 0 has rank %d, expected 3", in_rank(in, 0));
    if (layout) {
        y[0] = batch, y[1] = seq, y[2] = nd, y[3] = hidden;
        yh[0] = batch, yh[1] = nd, yh[2] = hidden;
    } else {
        y[0] = seq, y[1] = nd, y[2] = batch, y[3] = hidden;
        yh[0] = nd, yh[1] = batch, yh[2] = hidden;
    }
    AG_TRY(set_out(in, 0, dt, 4, y));
    AG_TRY(set_out(in, 1, dt, 3, yh));
    return set_out(in, 2, dt, 3, yh);
}

/* ------------------------------------------------------------------------ */
/* quantisation                                                               */
/* ------------------------------------------------------------------------ */

static ag_status r_quantize(ag_infer_node *in)
{
    ag_dtype dt = AG_DT_UNDEFINED;
    if (ag_inf_nin(in) > 2 && inp(in, 2))
        dt = in_dt(in, 2);
    if (dt == AG_DT_UNDEFINED)
        dt = attr_dtype_or(in, "output_dtype", AG_DT_U8);
    return set_out_like(in, 0, 0, dt);
}

static ag_status r_dequantize(ag_infer_node *in)
{
    ag_dtype dt = in_dt(in, 1);
    if (dt == AG_DT_UNDEFINED)
        dt = AG_DT_F32;
    return set_out_like(in, 0, 0, dt);
}

static ag_status r_dynamic_quantize(ag_infer_node *in)
{
    AG_TRY(set_out_like(in, 0, 0, AG_DT_U8));
    AG_TRY(set_out(in, 1, AG_DT_F32, 0, NULL));
    return set_out(in, 2, AG_DT_U8, 0, NULL);
}

/* ------------------------------------------------------------------------ */
/* data-dependent and random ops                                              */
/* ------------------------------------------------------------------------ */

/* NonMaxSuppression: [num_selected, 3], num_selected is data-dependent. */
static ag_status r_nms(ag_infer_node *in)
{
    int64_t dims[2] = {UNK, 3};
    return set_out(in, 0, AG_DT_I64, 2, dims);
}

static ag_status r_random(ag_infer_node *in)
{
    const int64_t *s;
    uint32_t n = 0;
    ag_dtype dt = attr_dtype_or(in, "dtype", AG_DT_F32);
    if (!ag_inf_attr_ints(in, "shape", &s, &n))
        return set_out_unknown(in, 0, dt);
    return set_out(in, 0, dt, (int32_t)n, s);
}

static ag_status r_random_like(ag_infer_node *in)
{
    return set_out_like(in, 0, 0, attr_dtype_or(in, "dtype", in_dt(in, 0)));
}

static ag_status r_multinomial(ag_infer_node *in)
{
    int64_t dims[2];
    dims[0] = in_dim(in, 0, 0);
    dims[1] = ag_inf_attr_int_or(in, "sample_size", 1);
    return set_out(in, 0, attr_dtype_or(in, "dtype", AG_DT_I32), 2, dims);
}

/* ------------------------------------------------------------------------ */
/* signal processing                                                          */
/* ------------------------------------------------------------------------ */

/* DFT(input [.., n, .., 1|2], dft_length?, axis? (input since opset 20)). */
static ag_status r_dft(ag_infer_node *in)
{
    const ag_tensor_desc *x = inp(in, 0);
    int64_t axis, len, dims[AG_MAX_RANK];
    bool onesided = ag_inf_attr_int_or(in, "onesided", 0) != 0;
    int32_t a;
    ag_dtype dt = in_dt(in, 0);
    if (!x || x->rank < 0)
        return set_out_unknown(in, 0, dt);
    if (in->opset >= 20) {
        axis = -2;
        if (ag_inf_nin(in) > 2 && inp(in, 2) && !in_scalar_int(in, 2, &axis))
            return set_out_rank(in, 0, dt, x->rank);
    } else {
        axis = ag_inf_attr_int_or(in, "axis", 1);
    }
    if (x->rank < 2 || !ag_inf_axis(axis, x->rank, &a) || a == x->rank - 1)
        return ag_inf_fail(in, "axis %lld is not a signal axis of input 0 (rank %d)", (long long)axis, x->rank);
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    len = x->dims[a];
    if (ag_inf_nin(in) > 1 && inp(in, 1) && !in_scalar_int(in, 1, &len))
        len = UNK;
    dims[a] = (onesided && len >= 0) ? len / 2 + 1 : len;
    dims[x->rank - 1] = 2;
    return set_out(in, 0, dt, x->rank, dims);
}

/* STFT(signal [B, L, 1|2], frame_step, window?, frame_length?) -> [B, frames, bins, 2]. */
static ag_status r_stft(ag_infer_node *in)
{
    int64_t step, flen = UNK, len = in_dim(in, 0, 1), dims[4];
    bool onesided = ag_inf_attr_int_or(in, "onesided", 1) != 0;
    if (!in_scalar_int(in, 1, &step))
        step = UNK;
    if (ag_inf_nin(in) > 3 && inp(in, 3)) {
        if (!in_scalar_int(in, 3, &flen))
            flen = UNK;
    } else if (ag_inf_nin(in) > 2 && inp(in, 2)) {
        flen = in_dim(in, 2, 0);
    }
    if (step != UNK && step <= 0)
        return ag_inf_fail(in, "frame_step (input 1) must be positive, got %lld", (long long)step);
    if (len >= 0 && flen > len)
        return ag_inf_fail(in, "frame length %lld exceeds the signal length %lld", (long long)flen, (long long)len);
    dims[0] = in_dim(in, 0, 0);
    dims[1] = (len >= 0 && flen >= 0 && step > 0) ? (len - flen) / step + 1 : UNK;
    dims[2] = flen < 0 ? UNK : onesided ? flen / 2 + 1 : flen;
    dims[3] = 2;
    return set_out(in, 0, in_dt(in, 0), 4, dims);
}

/* MelWeightMatrix(num_mel_bins, dft_length, ...) -> [dft_length/2 + 1, num_mel_bins]. */
static ag_status r_mel_weight(ag_infer_node *in)
{
    int64_t dims[2] = {UNK, UNK}, bins, len;
    if (in_scalar_int(in, 1, &len)) {
        if (len < 0)
            return ag_inf_fail(in, "dft_length (input 1) is negative (%lld)", (long long)len);
        dims[0] = len / 2 + 1;
    }
    if (in_scalar_int(in, 0, &bins)) {
        if (bins < 0)
            return ag_inf_fail(in, "num_mel_bins (input 0) is negative (%lld)", (long long)bins);
        dims[1] = bins;
    }
    return set_out(in, 0, attr_dtype_or(in, "output_datatype", AG_DT_F32), 2, dims);
}

/* HannWindow / HammingWindow / BlackmanWindow(size) -> [size]. */
static ag_status r_window(ag_infer_node *in)
{
    int64_t n;
    if (!in_scalar_int(in, 0, &n))
        n = UNK;
    else if (n < 0)
        return ag_inf_fail(in, "window size (input 0) is negative (%lld)", (long long)n);
    return set_out(in, 0, attr_dtype_or(in, "output_datatype", AG_DT_F32), 1, &n);
}

/* ------------------------------------------------------------------------ */
/* the rest                                                                   */
/* ------------------------------------------------------------------------ */

/* GridSample(X [N, C, D...], grid [N, D_out..., r]) -> [N, C, D_out...]. */
static ag_status r_grid_sample(ag_infer_node *in)
{
    const ag_tensor_desc *x = inp(in, 0), *g = inp(in, 1);
    int64_t dims[AG_MAX_RANK];
    int32_t r;
    ag_dtype dt = in_dt(in, 0);
    if (!g || g->rank < 0) {
        if (x && x->rank >= 0)
            return set_out_rank(in, 0, dt, x->rank);
        return set_out_unknown(in, 0, dt);
    }
    r = g->rank;
    if (r < 3 || (x && x->rank >= 0 && x->rank != r))
        return ag_inf_fail(in, "grid (input 1) of rank %d does not match input 0 of rank %d", r,
                           x ? x->rank : -1);
    if (!dim_merge(in_dim(in, 0, 0), g->dims[0], &dims[0]))
        return ag_inf_fail(in, "batch of input 0 (%lld) and grid (%lld) differ", (long long)in_dim(in, 0, 0),
                           (long long)g->dims[0]);
    dims[1] = in_dim(in, 0, 1);
    for (int32_t k = 1; k < r - 1; k++)
        dims[k + 1] = g->dims[k];
    return set_out(in, 0, dt, r, dims);
}

/* CenterCropPad(X, shape) with optional axes. */
static ag_status r_center_crop_pad(ag_infer_node *in)
{
    const ag_tensor_desc *x = inp(in, 0);
    int64_t shp[AG_MAX_RANK], dims[AG_MAX_RANK];
    uint64_t cnt = 0;
    const int64_t *ax;
    uint32_t nax = 0;
    ag_dtype dt = in_dt(in, 0);
    if (!x || x->rank < 0)
        return set_out_unknown(in, 0, dt);
    if (!ag_inf_tensor_ints(ag_inf_in_value(in, 1), shp, AG_MAX_RANK, &cnt))
        return set_out_rank(in, 0, dt, x->rank);
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    if (ag_inf_attr_ints(in, "axes", &ax, &nax) && nax > 0) {
        if (cnt != nax)
            return ag_inf_fail(in, "shape (input 1) has %llu entries but axes has %u", (unsigned long long)cnt, nax);
        for (uint32_t j = 0; j < nax; j++) {
            int32_t a;
            if (!ag_inf_axis(ax[j], x->rank, &a))
                return ag_inf_fail(in, "axis %lld out of range for rank %d", (long long)ax[j], x->rank);
            dims[a] = shp[j];
        }
    } else {
        if ((int32_t)cnt != x->rank)
            return ag_inf_fail(in, "shape (input 1) has %llu entries, input 0 has rank %d",
                               (unsigned long long)cnt, x->rank);
        memcpy(dims, shp, cnt * sizeof *dims);
    }
    return set_out(in, 0, dt, x->rank, dims);
}

/* Col2Im(input [N, C*prod(block), L], image_shape, block_shape) -> [N, C, image...]. */
static ag_status r_col2im(ag_infer_node *in)
{
    int64_t img[AG_MAX_RANK], blk[AG_MAX_RANK], dims[AG_MAX_RANK], prod = 1, cb = in_dim(in, 0, 1);
    uint64_t ni = 0, nb = 0;
    ag_dtype dt = in_dt(in, 0);
    if (!ag_inf_tensor_ints(ag_inf_in_value(in, 1), img, AG_MAX_RANK - 2, &ni)) {
        int64_t n = in_dim(in, 1, 0);
        return set_out_rank(in, 0, dt, n >= 0 && n <= AG_MAX_RANK - 2 ? (int32_t)n + 2 : -1);
    }
    dims[0] = in_dim(in, 0, 0);
    if (ag_inf_tensor_ints(ag_inf_in_value(in, 2), blk, AG_MAX_RANK, &nb)) {
        for (uint64_t j = 0; j < nb; j++)
            prod = dim_mul(prod, blk[j]);
        if (cb >= 0 && prod > 0 && cb % prod != 0)
            return ag_inf_fail(in, "input 0 dim 1 (%lld) is not a multiple of the block size %lld",
                               (long long)cb, (long long)prod);
        dims[1] = (cb >= 0 && prod > 0) ? cb / prod : UNK;
    } else {
        dims[1] = UNK;
    }
    memcpy(dims + 2, img, ni * sizeof *dims);
    return set_out(in, 0, dt, (int32_t)ni + 2, dims);
}

/* SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss: loss is a scalar unless
 * reduction is "none" (then the labels' shape); SCE's output 1 is log_prob. */
static ag_status r_loss(ag_infer_node *in)
{
    const char *red = ag_inf_attr_string_or(in, "reduction", "mean");
    ag_dtype dt = in_dt(in, 0);
    if (strcmp(red, "none") == 0) {
        const ag_tensor_desc *x = inp(in, 0);
        if (in_rank(in, 1) >= 0) {
            AG_TRY(set_out_like(in, 0, 1, dt));
        } else if (x && x->rank >= 2) {
            int64_t dims[AG_MAX_RANK];
            dims[0] = x->dims[0];
            memcpy(dims + 1, x->dims + 2, (size_t)(x->rank - 2) * sizeof *dims);
            AG_TRY(set_out(in, 0, dt, x->rank - 1, dims));
        } else {
            AG_TRY(set_out_unknown(in, 0, dt));
        }
    } else {
        AG_TRY(set_out(in, 0, dt, 0, NULL));
    }
    return set_out_like(in, 1, 0, dt);
}

/* TfIdfVectorizer: [C] -> [max(ngram_indexes)+1], [N, C] -> [N, ...], float. */
static ag_status r_tfidf(ag_infer_node *in)
{
    const int64_t *idx;
    uint32_t n = 0;
    int64_t width = UNK, dims[2];
    int32_t r = in_rank(in, 0);
    if (ag_inf_attr_ints(in, "ngram_indexes", &idx, &n)) {
        width = 0;
        for (uint32_t j = 0; j < n; j++)
            if (idx[j] + 1 > width)
                width = idx[j] + 1;
    }
    if (r == 1)
        return set_out(in, 0, AG_DT_F32, 1, &width);
    if (r == 2) {
        dims[0] = in_dim(in, 0, 0);
        dims[1] = width;
        return set_out(in, 0, AG_DT_F32, 2, dims);
    }
    return set_out_unknown(in, 0, AG_DT_F32);
}

/* StringNormalizer: stop words remove a data-dependent number of strings. */
static ag_status r_string_normalizer(ag_infer_node *in)
{
    const ag_attr *sw = ag_attrs_find(ag_node_attrs_c(in->g, in->n), "stopwords");
    const ag_tensor_desc *x = inp(in, 0);
    if (sw && sw->count > 0) {
        int64_t dims[AG_MAX_RANK];
        if (!x || x->rank < 1)
            return set_out_unknown(in, 0, AG_DT_STRING);
        memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
        dims[x->rank - 1] = UNK;
        return set_out(in, 0, AG_DT_STRING, x->rank, dims);
    }
    return set_out_like(in, 0, 0, AG_DT_STRING);
}

/* Adagrad / Adam / Momentum (ai.onnx.preview.training): inputs R, T, then n
 * tensors per group; each output group has the shape of one input group. */
static ag_status training_rule(ag_infer_node *in, uint32_t in_groups, const uint32_t *map, uint32_t out_groups)
{
    uint32_t nin = ag_inf_nin(in);
    uint32_t n;
    if (nin < 2 || (nin - 2) % in_groups != 0)
        return ag_inf_fail(in, "%u inputs do not split into R, T and %u equal groups", nin, in_groups);
    n = (nin - 2) / in_groups;
    for (uint32_t g = 0; g < out_groups; g++)
        for (uint32_t j = 0; j < n; j++)
            AG_TRY(set_out_like(in, g * n + j, 2 + map[g] * n + j, in_dt(in, 2 + map[g] * n + j)));
    return AG_OK;
}

static ag_status r_adagrad(ag_infer_node *in)
{
    static const uint32_t map[2] = {0, 2}; /* X, G, H -> X_new, H_new */
    return training_rule(in, 3, map, 2);
}

static ag_status r_adam(ag_infer_node *in)
{
    static const uint32_t map[3] = {0, 2, 3}; /* X, G, V, H -> X_new, V_new, H_new */
    return training_rule(in, 4, map, 3);
}

static ag_status r_momentum(ag_infer_node *in)
{
    static const uint32_t map[2] = {0, 2}; /* X, G, V -> X_new, V_new */
    return training_rule(in, 3, map, 2);
}

/* com.microsoft Attention(input [B,S,H], weights [H, 3*Hd], bias, mask?, past?):
 * output [B, S, v_hidden]; present [2, B, heads, P+S, head] (shape kept unknown). */
static ag_status r_ms_attention(ag_infer_node *in)
{
    const ag_tensor_desc *x = inp(in, 0);
    const int64_t *qkv;
    uint32_t n = 0;
    int64_t dims[3], w = in_dim(in, 1, 1);
    ag_dtype dt = in_dt(in, 0);
    if (!x || x->rank != 3) {
        AG_TRY(set_out_unknown(in, 0, dt));
        return set_out_unknown(in, 1, dt);
    }
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    if (ag_inf_attr_ints(in, "qkv_hidden_sizes", &qkv, &n) && n == 3)
        dims[2] = qkv[2];
    else
        dims[2] = (w >= 0 && w % 3 == 0) ? w / 3 : UNK;
    AG_TRY(set_out(in, 0, dt, 3, dims));
    return set_out_unknown(in, 1, dt);
}

/* ------------------------------------------------------------------------ */
/* the table                                                                  */
/* ------------------------------------------------------------------------ */

/* Op types owned by the core family (Add, Sub, Mul, Div, Mod, Neg, Abs,
 * comparisons, Not, And, Or, Where, Min, Max, Floor, Ceil, ReduceProd, ...)
 * are looked up there first; the entries below cover everything else. */
/* Gradient kernels of the reference system: the gradient has the shape of
 * the incoming gradient (input 0). */
static ag_status r_grad_like0(ag_infer_node *in)
{
    return ag_inf_same_as_input(in, 0, 0);
}

/* (Sparse)SoftmaxCrossEntropyWithLogits(features [N, C], labels): the loss per
 * example [N] and the gradient with respect to the features [N, C]. */
static ag_status r_xent_with_logits(ag_infer_node *in)
{
    const ag_tensor_desc *f = ag_inf_in(in, 0);
    if (!f)
        return AG_OK;
    AG_TRY(ag_inf_same_as_input(in, 1, 0));
    if (f->rank < 0)
        return set_out(in, 0, f->dtype, AG_RANK_UNKNOWN, NULL);
    if (f->rank != 2)
        return ag_inf_fail(in, "features must be 2-D [batch, classes], got rank %d", (int)f->rank);
    return set_out(in, 0, f->dtype, 1, f->dims);
}

const ag_infer_rule ag_infer_rules_math[] = {
    {"ReluGrad", r_grad_like0}, {"ReluGradV2", r_grad_like0}, {"SigmoidGrad", r_grad_like0},
    {"TanhGrad", r_grad_like0}, {"SoftmaxGrad", r_grad_like0}, {"GeluGrad", r_grad_like0},
    {"FastGeluGrad", r_grad_like0}, {"SqrtGrad", r_grad_like0}, {"RsqrtGrad", r_grad_like0},
    {"SoftmaxCrossEntropyWithLogits", r_xent_with_logits},
    {"SparseSoftmaxCrossEntropyWithLogits", r_xent_with_logits},
    /* unary, same type and shape */
    {"Exp", r_exp}, {"Log", r_log}, {"Sqrt", r_sqrt}, {"Reciprocal", r_recip}, {"Round", r_round},
    {"Sign", r_sign}, {"Relu", r_relu}, {"BitwiseNot", r_bitnot},
    {"Sin", r_same}, {"Cos", r_same}, {"Tan", r_same}, {"Asin", r_same}, {"Acos", r_same}, {"Atan", r_same},
    {"Sinh", r_same}, {"Cosh", r_same}, {"Asinh", r_same}, {"Acosh", r_same}, {"Atanh", r_same},
    {"Erf", r_same}, {"LeakyRelu", r_same}, {"Elu", r_same}, {"Selu", r_same}, {"Celu", r_same},
    {"ThresholdedRelu", r_same}, {"Sigmoid", r_same}, {"HardSigmoid", r_same}, {"HardSwish", r_same},
    {"Softplus", r_same}, {"Softsign", r_same}, {"Mish", r_same}, {"Gelu", r_same}, {"Tanh", r_same},
    {"Shrink", r_same}, {"Clip", r_first}, {"CumSum", r_first}, {"ReverseSequence", r_first},
    {"LRN", r_first}, {"LpNormalization", r_first}, {"MeanVarianceNormalization", r_first},
    {"InstanceNormalization", r_first}, {"GroupNormalization", r_first},
    {"IsNaN", r_isnan}, {"IsInf", r_isinf},
    /* softmax family */
    {"Softmax", r_axis_same}, {"LogSoftmax", r_axis_same}, {"Hardmax", r_axis_same},
    /* binary and variadic with broadcasting */
    {"Pow", r_pow_typed}, {"Sum", r_sum}, {"Mean", r_mean}, {"Xor", r_xor}, {"BitShift", r_bitshift},
    {"BitwiseAnd", r_bitand}, {"BitwiseOr", r_bitor}, {"BitwiseXor", r_bitxor}, {"PRelu", r_prelu},
    /* reductions */
    {"ReduceSum", r_reduce_sum}, {"ReduceMean", r_reduce_mean}, {"ReduceMax", r_reduce_max},
    {"ReduceMin", r_reduce_min}, {"ReduceL1", r_reduce}, {"ReduceL2", r_reduce}, {"ReduceLogSum", r_reduce},
    {"ReduceLogSumExp", r_reduce}, {"ReduceSumSquare", r_reduce}, {"ArgMax", r_argmax}, {"ArgMin", r_argmax},
    /* matrix products */
    {"MatMul", r_matmul}, {"MatMulInteger", r_matmul_integer}, {"QLinearMatMul", r_qlinear_matmul},
    {"Gemm", r_gemm}, {"Einsum", r_einsum}, {"Det", r_det},
    /* convolution and pooling */
    {"Conv", r_conv}, {"ConvInteger", r_conv_integer}, {"QLinearConv", r_qlinear_conv},
    {"ConvTranspose", r_conv_transpose}, {"MaxPool", r_pool}, {"AveragePool", r_pool}, {"LpPool", r_pool},
    {"GlobalAveragePool", r_global_pool}, {"GlobalMaxPool", r_global_pool}, {"GlobalLpPool", r_global_pool},
    {"MaxUnpool", r_max_unpool}, {"MaxRoiPool", r_max_roi_pool}, {"RoiAlign", r_roi_align},
    /* normalisation and dropout */
    {"BatchNormalization", r_batch_norm}, {"LayerNormalization", r_layer_norm}, {"Dropout", r_dropout},
    /* recurrent */
    {"RNN", r_rnn}, {"GRU", r_rnn}, {"LSTM", r_rnn},
    /* quantisation */
    {"QuantizeLinear", r_quantize}, {"DequantizeLinear", r_dequantize},
    {"DynamicQuantizeLinear", r_dynamic_quantize},
    /* data-dependent, random */
    {"NonMaxSuppression", r_nms}, {"Bernoulli", r_random_like}, {"RandomNormal", r_random},
    {"RandomUniform", r_random}, {"RandomNormalLike", r_random_like}, {"RandomUniformLike", r_random_like},
    {"Multinomial", r_multinomial},
    /* signal processing */
    {"DFT", r_dft}, {"STFT", r_stft}, {"MelWeightMatrix", r_mel_weight}, {"HannWindow", r_window},
    {"HammingWindow", r_window}, {"BlackmanWindow", r_window},
    /* the rest */
    {"GridSample", r_grid_sample}, {"CenterCropPad", r_center_crop_pad}, {"Col2Im", r_col2im},
    {"SoftmaxCrossEntropyLoss", r_loss}, {"NegativeLogLikelihoodLoss", r_loss},
    {"TfIdfVectorizer", r_tfidf}, {"StringNormalizer", r_string_normalizer},
    {"Adagrad", r_adagrad}, {"Adam", r_adam}, {"Momentum", r_momentum},
    /* com.microsoft contrib ops */
    {"FusedConv", r_conv}, {"FusedGemm", r_gemm}, {"FusedMatMul", r_fused_matmul},
    {"MatMulNBits", r_matmul_nbits}, {"BiasGelu", r_bcast}, {"FastGelu", r_bcast}, {"QuickGelu", r_same},
    {"BiasAdd", r_bcast}, {"SkipLayerNormalization", r_skip_layer_norm},
    {"SimplifiedLayerNormalization", r_simplified_layer_norm}, {"Attention", r_ms_attention},
    {NULL, NULL}};
