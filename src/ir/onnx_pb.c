/* ONNX protobuf layer of the importer: unpacks a ModelProto through the
 * context's allocator (after bounding its nesting depth), converts
 * TensorProtos into IR tensors (raw little-endian bytes) and reads declared
 * TypeProtos.  The graph mapping itself is in onnx_import.c. */
#include <inttypes.h>
#include <stdio.h>

#include "ir/onnx_internal.h"

/* ---- allocator ---- */

/* Header in front of every protobuf-c block: its size, padded so the block
 * keeps the alignment of the hook's allocation. */
#define PB_HDR ((size_t)16)

static void *pb_alloc(void *ud, size_t size)
{
    ag_onnx_pb_alloc *a = ud;
    if (size > SIZE_MAX - PB_HDR) {
        a->oom = true;
        return NULL;
    }
    unsigned char *p = ag_alloc(a->ctx, size + PB_HDR);
    if (!p) {
        a->oom = true;
        return NULL;
    }
    memcpy(p, &size, sizeof size);
    return p + PB_HDR;
}

static void pb_free(void *ud, void *ptr)
{
    ag_onnx_pb_alloc *a = ud;
    if (!ptr)
        return;
    unsigned char *p = (unsigned char *)ptr - PB_HDR;
    size_t size;
    memcpy(&size, p, sizeof size);
    ag_free(a->ctx, p, size + PB_HDR);
}

/* ---- nesting depth ---- */

static bool read_varint(const uint8_t *p, size_t len, size_t *i, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64 && *i < len; shift += 7) {
        uint8_t b = p[(*i)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* False when messages nest deeper than AG_ONNX_MAX_DEPTH.  protobuf-c
 * recurses once per level without a limit, so a crafted file could exhaust
 * the stack; the descriptors tell which length-delimited fields are messages.
 * Malformed wire data is left for protobuf-c to reject: scanning just stops. */
static bool depth_ok(const uint8_t *p, size_t len, const ProtobufCMessageDescriptor *d, unsigned depth)
{
    size_t i = 0;
    while (i < len) {
        uint64_t key, v;
        if (!read_varint(p, len, &i, &key))
            return true;
        switch (key & 7) {
        case 0:
            if (!read_varint(p, len, &i, &v))
                return true;
            break;
        case 1:
            if (len - i < 8)
                return true;
            i += 8;
            break;
        case 5:
            if (len - i < 4)
                return true;
            i += 4;
            break;
        case 2: {
            if (!read_varint(p, len, &i, &v) || v > len - i)
                return true;
            uint64_t num = key >> 3;
            const ProtobufCFieldDescriptor *f =
                num <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)num) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (depth + 1 > AG_ONNX_MAX_DEPTH)
                    return false;
                if (!depth_ok(p + i, (size_t)v, f->descriptor, depth + 1))
                    return false;
            }
            i += (size_t)v;
            break;
        }
        default:
            return true;
        }
    }
    return true;
}

ag_status ag_onnx_unpack(ag_ctx *ctx, const void *buf, size_t len, const char *file,
                         ag_onnx_pb_alloc *pa, Onnx__ModelProto **out)
{
    *out = NULL;
    pa->pa.alloc = pb_alloc;
    pa->pa.free = pb_free;
    pa->pa.allocator_data = pa;
    pa->ctx = ctx;
    pa->oom = false;
    if (len > AG_ONNX_MAX_BYTES)
        return AG_ERR(ctx, AG_EUNSUPPORTED, "%s: model of %zu bytes exceeds the 2 GiB protobuf limit", file,
                      len);
    if (!depth_ok(buf, len, &onnx__model_proto__descriptor, 1))
        return AG_ERR(ctx, AG_EUNSUPPORTED, "%s: messages nested deeper than %d levels are not supported",
                      file, AG_ONNX_MAX_DEPTH);
    Onnx__ModelProto *m = onnx__model_proto__unpack(&pa->pa, len, buf);
    if (!m) {
        if (pa->oom)
            return AG_OOM(ctx);
        return AG_ERR(ctx, AG_EPARSE, "%s: not a valid ONNX ModelProto", file);
    }
    if (!m->graph) {
        ag_onnx_free_model(pa, m);
        return AG_ERR(ctx, AG_EPARSE, "%s: not a valid ONNX ModelProto (it has no graph)", file);
    }
    *out = m;
    return AG_OK;
}

void ag_onnx_free_model(ag_onnx_pb_alloc *pa, Onnx__ModelProto *m)
{
    if (m)
        onnx__model_proto__free_unpacked(m, &pa->pa);
}

/* ---- shapes in messages ---- */

void ag_onnx_fmt_shape(char *buf, size_t cap, ag_dtype dt, int32_t rank, const int64_t *dims)
{
    if (!cap)
        return;
    size_t n = 0;
    int w;
    buf[0] = '\0';
#define APPEND_(...)                                              \
    do {                                                          \
        w = snprintf(buf + n, cap - n, __VA_ARGS__);              \
        if (w < 0 || (size_t)w >= cap - n)                        \
            return;                                               \
        n += (size_t)w;                                           \
    } while (0)
    if (dt != AG_DT_UNDEFINED && ag_dtype_name(dt))
        APPEND_("%s", ag_dtype_name(dt));
    if (rank < 0) {
        APPEND_("[*]");
        return;
    }
    APPEND_("[");
    for (int32_t k = 0; k < rank; k++) {
        if (dims[k] < 0)
            APPEND_("%s?", k ? "," : "");
        else
            APPEND_("%s%" PRId64, k ? "," : "", dims[k]);
    }
    APPEND_("]");
#undef APPEND_
}

/* ---- tensors ---- */

static void put_le(uint8_t *dst, uint64_t v, unsigned bytes)
{
    for (unsigned k = 0; k < bytes; k++)
        dst[k] = (uint8_t)(v >> (8 * k));
}

static ag_status count_error(ag_ctx *ctx, const char *file, const char *what, const char *field, size_t have,
                             uint64_t want)
{
    if (have == 0)
        return AG_ERR(ctx, AG_EPARSE, "%s: %s has no data (%" PRIu64 " values expected in %s or raw_data)",
                      file, what, want, field);
    return AG_ERR(ctx, AG_EPARSE, "%s: %s has %zu values in %s, its shape needs %" PRIu64, file, what, have,
                  field, want);
}

/* Builds the string array of a STRING tensor in one scratch block. */
static ag_status tensor_strings(ag_graph *g, const char *file, const char *what, const Onnx__TensorProto *tp,
                                ag_tensor *t, const ag_tensor **out)
{
    ag_ctx *ctx = ag_graph_ctx(g);
    size_t n = tp->n_string_data, total = n * sizeof(char *);
    if (n > SIZE_MAX / sizeof(char *) / 2)
        return AG_OOM(ctx);
    for (size_t k = 0; k < n; k++) {
        const ProtobufCBinaryData *s = &tp->string_data[k];
        if (s->len && memchr(s->data, 0, s->len))
            return AG_ERR(ctx, AG_EUNSUPPORTED, "%s: string %zu of %s contains a NUL byte", file, k, what);
        if (s->len + 1 > SIZE_MAX - total)
            return AG_OOM(ctx);
        total += s->len + 1;
    }
    char *block = ag_alloc(ctx, total ? total : 1);
    if (!block)
        return AG_OOM(ctx);
    char **ptrs = (char **)(void *)block;
    char *chars = block + n * sizeof(char *);
    for (size_t k = 0; k < n; k++) {
        const ProtobufCBinaryData *s = &tp->string_data[k];
        if (s->len)
            memcpy(chars, s->data, s->len);
        chars[s->len] = '\0';
        ptrs[k] = chars;
        chars += s->len + 1;
    }
    t->strings = (const char *const *)ptrs;
    ag_status st = ag_graph_make_tensor(g, t, out);
    ag_free(ctx, block, total ? total : 1);
    return st == AG_ENOMEM ? AG_OOM(ctx) : st;
}

ag_status ag_onnx_tensor(ag_graph *g, const char *file, const char *what, const Onnx__TensorProto *tp,
                         const ag_tensor **out)
{
    ag_ctx *ctx = ag_graph_ctx(g);
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        const char *loc = "?";
        for (size_t k = 0; k < tp->n_external_data; k++) {
            const Onnx__StringStringEntryProto *e = tp->external_data[k];
            if (e && e->key && strcmp(e->key, "location") == 0 && e->value)
                loc = e->value;
        }
        return AG_ERR(ctx, AG_EUNSUPPORTED, "%s: external data file '%s' for %s is not supported", file, loc,
                      what);
    }
    if (tp->segment)
        return AG_ERR(ctx, AG_EUNSUPPORTED, "%s: segmented %s is not supported", file, what);
    if (!tp->has_data_type || tp->data_type == 0)
        return AG_ERR(ctx, AG_EPARSE, "%s: %s has no data type", file, what);
    if (!ag_dtype_valid(tp->data_type))
        return AG_ERR(ctx, AG_EUNSUPPORTED, "%s: data type %" PRId32 " of %s is not supported", file,
                      tp->data_type, what);
    ag_dtype dt = (ag_dtype)tp->data_type;
    if (tp->n_dims > AG_MAX_RANK)
        return AG_ERR(ctx, AG_EPARSE, "%s: %s has rank %zu (more than %d)", file, what, tp->n_dims,
                      AG_MAX_RANK);
    uint64_t numel = 1;
    for (size_t k = 0; k < tp->n_dims; k++) {
        int64_t d = tp->dims[k];
        if (d < 0 || d > AG_MAX_DIM)
            return AG_ERR(ctx, AG_EPARSE, "%s: %s has dimension %zu of extent %" PRId64, file, what, k, d);
        if (d && numel > UINT64_MAX / 128 / (uint64_t)d)
            return AG_ERR(ctx, AG_EPARSE, "%s: %s has too many elements", file, what);
        numel *= (uint64_t)d;
    }
    ag_tensor t = {.dtype = dt, .rank = (int32_t)tp->n_dims, .dims = tp->dims};
    static const uint8_t empty_data[1];

    if (dt == AG_DT_STRING) {
        if (tp->has_raw_data && tp->raw_data.len)
            return AG_ERR(ctx, AG_EPARSE, "%s: %s is a string tensor with raw_data", file, what);
        if (tp->n_string_data != numel)
            return count_error(ctx, file, what, "string_data", tp->n_string_data, numel);
        return tensor_strings(g, file, what, tp, &t, out);
    }

    unsigned bits = ag_dtype_bits(dt);
    uint64_t nbytes = (numel * bits + 7) / 8;
    if (nbytes > SIZE_MAX)
        return AG_ERR(ctx, AG_EPARSE, "%s: %s has too many elements", file, what);
    t.nbytes = nbytes;
    if (tp->has_raw_data && (tp->raw_data.len || numel == 0)) {
        if (tp->raw_data.len != nbytes)
            return AG_ERR(ctx, AG_EPARSE,
                          "%s: %s has %zu bytes of raw data, its shape and type need %" PRIu64, file, what,
                          tp->raw_data.len, nbytes);
        /* ONNX raw_data is little-endian, the IR's byte order. */
        t.data = nbytes ? (const void *)tp->raw_data.data : (const void *)empty_data;
        ag_status st = ag_graph_make_tensor(g, &t, out);
        return st == AG_ENOMEM ? AG_OOM(ctx) : st;
    }
    if (numel == 0) {
        t.data = empty_data;
        ag_status st = ag_graph_make_tensor(g, &t, out);
        return st == AG_ENOMEM ? AG_OOM(ctx) : st;
    }

    /* Typed fields: re-encode as little-endian bytes.  The field's count is
     * checked first, so a shape that claims more than the file holds is an
     * error, not an allocation of what it claims. */
    const char *field;
    size_t have;
    uint64_t want = numel;
    unsigned w = bits / 8;
    switch (dt) {
    case AG_DT_F32:
    case AG_DT_C64:
        field = "float_data", have = tp->n_float_data, want = dt == AG_DT_C64 ? 2 * numel : numel;
        break;
    case AG_DT_F64:
    case AG_DT_C128:
        field = "double_data", have = tp->n_double_data, want = dt == AG_DT_C128 ? 2 * numel : numel;
        break;
    case AG_DT_I64:
        field = "int64_data", have = tp->n_int64_data;
        break;
    case AG_DT_U32:
    case AG_DT_U64:
        field = "uint64_data", have = tp->n_uint64_data;
        break;
    default:
        /* Everything of 32 bits or fewer: one int32_data entry per element
         * (16-bit floats as their bit pattern); 4-bit types hold one packed
         * byte (two elements) per entry. */
        field = "int32_data", have = tp->n_int32_data;
        w = bits >= 8 ? bits / 8 : 1;
        want = bits >= 8 ? numel : nbytes;
        break;
    }
    if (have != want)
        return count_error(ctx, file, what, field, have, want);
    uint8_t *buf = ag_alloc(ctx, (size_t)nbytes);
    if (!buf)
        return AG_OOM(ctx);
    switch (dt) {
    case AG_DT_F32:
    case AG_DT_C64:
        for (uint64_t k = 0; k < want; k++) {
            uint32_t u;
            memcpy(&u, &tp->float_data[k], 4);
            put_le(buf + 4 * k, u, 4);
        }
        break;
    case AG_DT_F64:
    case AG_DT_C128:
        for (uint64_t k = 0; k < want; k++) {
            uint64_t u;
            memcpy(&u, &tp->double_data[k], 8);
            put_le(buf + 8 * k, u, 8);
        }
        break;
    case AG_DT_I64:
        for (uint64_t k = 0; k < want; k++)
            put_le(buf + 8 * k, (uint64_t)tp->int64_data[k], 8);
        break;
    case AG_DT_U32:
    case AG_DT_U64:
        for (uint64_t k = 0; k < want; k++)
            put_le(buf + w * k, tp->uint64_data[k], w);
        break;
    default:
        for (uint64_t k = 0; k < want; k++)
            put_le(buf + w * k, (uint32_t)tp->int32_data[k], w);
        break;
    }
    t.data = buf;
    ag_status st = ag_graph_make_tensor(g, &t, out);
    if (st == AG_ENOMEM)
        st = AG_OOM(ctx);
    ag_free(ctx, buf, (size_t)nbytes);
    return st;
}

/* ---- declared types ---- */

ag_status ag_onnx_type_read(ag_ctx *ctx, const char *file, const char *what, const Onnx__TypeProto *tp,
                            ag_onnx_type *out)
{
    out->dtype = AG_DT_UNDEFINED;
    out->rank = AG_RANK_UNKNOWN;
    if (!tp)
        return AG_OK;
    switch (tp->value_case) {
    case ONNX__TYPE_PROTO__VALUE__NOT_SET:
        return AG_OK;
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        break;
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
        return AG_ERR(ctx, AG_EUNSUPPORTED, "%s: sequence type on %s is not supported", file, what);
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
        return AG_ERR(ctx, AG_EUNSUPPORTED, "%s: map type on %s is not supported", file, what);
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
        return AG_ERR(ctx, AG_EUNSUPPORTED, "%s: optional type on %s is not supported", file, what);
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
        return AG_ERR(ctx, AG_EUNSUPPORTED, "%s: sparse tensor type on %s is not supported", file, what);
    default:
        return AG_ERR(ctx, AG_EUNSUPPORTED, "%s: type kind %d on %s is not supported", file,
                      (int)tp->value_case, what);
    }
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (!tt)
        return AG_OK;
    if (tt->has_elem_type && tt->elem_type != 0) {
        if (!ag_dtype_valid(tt->elem_type))
            return AG_ERR(ctx, AG_EUNSUPPORTED, "%s: data type %" PRId32 " of %s is not supported", file,
                          tt->elem_type, what);
        out->dtype = (ag_dtype)tt->elem_type;
    }
    const Onnx__TensorShapeProto *sh = tt->shape;
    if (!sh)
        return AG_OK;
    if (sh->n_dim > AG_MAX_RANK)
        return AG_ERR(ctx, AG_EPARSE, "%s: %s has rank %zu (more than %d)", file, what, sh->n_dim,
                      AG_MAX_RANK);
    for (size_t k = 0; k < sh->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *d = sh->dim[k];
        int64_t v = AG_DIM_UNKNOWN;
        if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            v = d->dim_value;
            /* Some exporters write -1 for "unknown"; anything else negative is absurd. */
            if (v < AG_DIM_UNKNOWN || v > AG_MAX_DIM)
                return AG_ERR(ctx, AG_EPARSE, "%s: %s has dimension %zu of extent %" PRId64, file, what, k,
                              v);
        }
        out->dims[k] = v;
    }
    out->rank = (int32_t)sh->n_dim;
    return AG_OK;
}
