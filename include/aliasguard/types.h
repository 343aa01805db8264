/* Value types of the IR: data types, memory types, formats, constant tensors
 * and attributes.  Data type numbers are ONNX's TensorProto.DataType values. */
#ifndef ALIASGUARD_TYPES_H
#define ALIASGUARD_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(enum, onnx number, text name, element size in bits; 0 = variable) */
#define AG_DTYPE_LIST(X)                 \
    X(AG_DT_UNDEFINED, 0, "undefined", 0) \
    X(AG_DT_F32, 1, "f32", 32)            \
    X(AG_DT_U8, 2, "u8", 8)               \
    X(AG_DT_I8, 3, "i8", 8)               \
    X(AG_DT_U16, 4, "u16", 16)            \
    X(AG_DT_I16, 5, "i16", 16)            \
    X(AG_DT_I32, 6, "i32", 32)            \
    X(AG_DT_I64, 7, "i64", 64)            \
    X(AG_DT_STRING, 8, "string", 0)       \
    X(AG_DT_BOOL, 9, "bool", 8)           \
    X(AG_DT_F16, 10, "f16", 16)           \
    X(AG_DT_F64, 11, "f64", 64)           \
    X(AG_DT_U32, 12, "u32", 32)           \
    X(AG_DT_U64, 13, "u64", 64)           \
    X(AG_DT_C64, 14, "c64", 64)           \
    X(AG_DT_C128, 15, "c128", 128)        \
    X(AG_DT_BF16, 16, "bf16", 16)         \
    X(AG_DT_F8E4M3FN, 17, "f8e4m3fn", 8)  \
    X(AG_DT_F8E4M3FNUZ, 18, "f8e4m3fnuz", 8) \
    X(AG_DT_F8E5M2, 19, "f8e5m2", 8)      \
    X(AG_DT_F8E5M2FNUZ, 20, "f8e5m2fnuz", 8) \
    X(AG_DT_U4, 21, "u4", 4)              \
    X(AG_DT_I4, 22, "i4", 4)

typedef enum ag_dtype {
#define AG_DTYPE_ENUM_(e, num, name, bits) e = num,
    AG_DTYPE_LIST(AG_DTYPE_ENUM_)
#undef AG_DTYPE_ENUM_
    AG_DT_COUNT_
} ag_dtype;

/* "f32", ... or NULL for an out-of-range value. */
const char *ag_dtype_name(ag_dtype dt);
/* Parses a name produced by ag_dtype_name; returns false if unknown. */
bool ag_dtype_parse(const char *name, size_t len, ag_dtype *out);
/* Element size in bits (4 for int4); 0 for undefined and string. */
unsigned ag_dtype_bits(ag_dtype dt);
/* True for values 1..AG_DT_COUNT_-1. */
bool ag_dtype_valid(int value);
/* Integer types, bool included (bool values are 0/1 bytes). */
bool ag_dtype_is_int(ag_dtype dt);
/* f16, bf16, f32 and f64 (the float8 types are storage formats only). */
bool ag_dtype_is_float(ag_dtype dt);

/* Memory type of a tensor: where its bytes live. */
#define AG_MEMTYPE_LIST(X) X(AG_MEM_HBM, "hbm") X(AG_MEM_P2P, "p2p") X(AG_MEM_HOST, "host")
typedef enum ag_mem_type {
#define AG_MEMTYPE_ENUM_(e, name) e,
    AG_MEMTYPE_LIST(AG_MEMTYPE_ENUM_)
#undef AG_MEMTYPE_ENUM_
    AG_MEM_COUNT_
} ag_mem_type;
const char *ag_mem_type_name(ag_mem_type mt);
bool ag_mem_type_parse(const char *name, size_t len, ag_mem_type *out);

/* Layout format of a tensor (the reference system's names). */
#define AG_FORMAT_LIST(X)                                                           \
    X(AG_FMT_ND, "ND") X(AG_FMT_NCHW, "NCHW") X(AG_FMT_NHWC, "NHWC")                 \
    X(AG_FMT_NC1HWC0, "NC1HWC0") X(AG_FMT_FRACTAL_Z, "FRACTAL_Z")                   \
    X(AG_FMT_FRACTAL_NZ, "FRACTAL_NZ") X(AG_FMT_NCDHW, "NCDHW") X(AG_FMT_NDHWC, "NDHWC")
typedef enum ag_format {
#define AG_FORMAT_ENUM_(e, name) e,
    AG_FORMAT_LIST(AG_FORMAT_ENUM_)
#undef AG_FORMAT_ENUM_
    AG_FMT_COUNT_
} ag_format;
const char *ag_format_name(ag_format f);
bool ag_format_parse(const char *name, size_t len, ag_format *out);

#define AG_DIM_UNKNOWN (-1)          /* a dimension whose extent is not known */
#define AG_RANK_UNKNOWN (-1)         /* a shape whose rank is not known */
#define AG_SIZE_UNKNOWN UINT64_MAX   /* byte size of a tensor with unknown shape */
#define AG_MAX_RANK 64               /* larger ranks are rejected as absurd */
#define AG_MAX_DIM (INT64_C(1) << 40) /* larger dims are rejected as absurd */

/* A constant tensor value (Const nodes, tensor attributes, inferred values).
 * Owned by the graph arena; immutable once attached.  data == NULL means the
 * bytes were elided (text IR with elision): dtype, dims and digest remain. */
typedef struct ag_tensor {
    ag_dtype dtype;
    int32_t rank;               /* >= 0 */
    const int64_t *dims;        /* rank entries, all >= 0 */
    uint64_t nbytes;            /* raw little-endian bytes; 0 for strings */
    const void *data;           /* nbytes bytes, or NULL when elided */
    const char *const *strings; /* numel entries for AG_DT_STRING, else NULL */
    uint64_t digest;            /* XXH3-64 of the raw bytes (strings: of their concatenation with NULs) */
} ag_tensor;

/* Number of elements (product of dims; 1 for rank 0); UINT64_MAX on overflow. */
uint64_t ag_tensor_numel(const ag_tensor *t);
/* Product of rank dims (all >= 0); UINT64_MAX on overflow. */
uint64_t ag_dims_numel(int32_t rank, const int64_t *dims);

typedef enum ag_attr_kind {
    AG_ATTR_BOOL = 1,
    AG_ATTR_INT,
    AG_ATTR_FLOAT,
    AG_ATTR_STRING,
    AG_ATTR_TENSOR,
    AG_ATTR_BOOLS,
    AG_ATTR_INTS,
    AG_ATTR_FLOATS,
    AG_ATTR_STRINGS,
    AG_ATTR_TENSORS
} ag_attr_kind;

/* "bool", "int", ... ("ints" for lists). */
const char *ag_attr_kind_name(ag_attr_kind k);

/* One named attribute.  For scalars count == 1; for lists count is the length
 * (may be 0).  Strings are NUL-terminated and may contain any byte but NUL. */
typedef struct ag_attr {
    const char *name;
    ag_attr_kind kind;
    uint32_t count;
    union {
        bool b;
        int64_t i;
        float f;
        const char *s;
        const ag_tensor *t;
        const bool *bs;
        const int64_t *is;
        const float *fs;
        const char *const *ss;
        const ag_tensor *const *ts;
    } v;
} ag_attr;

#ifdef __cplusplus
}
#endif
#endif
