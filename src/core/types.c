/* Name tables and sizes of the IR value types, generated from the X-macro
 * lists in include/aliasguard/types.h so names and enums never drift. */
#include "core/internal.h"

static const struct {
    const char *name;
    unsigned bits;
} dtype_table[AG_DT_COUNT_] = {
#define AG_DTYPE_ROW_(e, num, name, bits) [num] = {name, bits},
    AG_DTYPE_LIST(AG_DTYPE_ROW_)
#undef AG_DTYPE_ROW_
};

const char *ag_dtype_name(ag_dtype dt)
{
    if ((int)dt < 0 || dt >= AG_DT_COUNT_)
        return NULL;
    return dtype_table[dt].name;
}

bool ag_dtype_valid(int value)
{
    return value > 0 && value < AG_DT_COUNT_;
}

unsigned ag_dtype_bits(ag_dtype dt)
{
    if ((int)dt < 0 || dt >= AG_DT_COUNT_)
        return 0;
    return dtype_table[dt].bits;
}

static bool name_eq(const char *name, const char *s, size_t len)
{
    return strlen(name) == len && memcmp(name, s, len) == 0;
}

bool ag_dtype_parse(const char *name, size_t len, ag_dtype *out)
{
    for (int i = 0; i < AG_DT_COUNT_; i++) {
        if (name_eq(dtype_table[i].name, name, len)) {
            *out = (ag_dtype)i;
            return true;
        }
    }
    return false;
}

static const char *const memtype_names[AG_MEM_COUNT_] = {
#define AG_MEMTYPE_ROW_(e, name) [e] = name,
    AG_MEMTYPE_LIST(AG_MEMTYPE_ROW_)
#undef AG_MEMTYPE_ROW_
};

const char *ag_mem_type_name(ag_mem_type mt)
{
    return (int)mt >= 0 && mt < AG_MEM_COUNT_ ? memtype_names[mt] : NULL;
}

bool ag_mem_type_parse(const char *name, size_t len, ag_mem_type *out)
{
    for (int i = 0; i < AG_MEM_COUNT_; i++) {
        if (name_eq(memtype_names[i], name, len)) {
            *out = (ag_mem_type)i;
            return true;
        }
    }
    return false;
}

static const char *const format_names[AG_FMT_COUNT_] = {
#define AG_FORMAT_ROW_(e, name) [e] = name,
    AG_FORMAT_LIST(AG_FORMAT_ROW_)
#undef AG_FORMAT_ROW_
};

const char *ag_format_name(ag_format f)
{
    return (int)f >= 0 && f < AG_FMT_COUNT_ ? format_names[f] : NULL;
}

bool ag_format_parse(const char *name, size_t len, ag_format *out)
{
    for (int i = 0; i < AG_FMT_COUNT_; i++) {
        if (name_eq(format_names[i], name, len)) {
            *out = (ag_format)i;
            return true;
        }
    }
    return false;
}

uint64_t ag_dims_numel(int32_t rank, const int64_t *dims)
{
    uint64_t n = 1;
    for (int32_t i = 0; i < rank; i++) {
        uint64_t d = (uint64_t)dims[i];
        if (d != 0 && n > UINT64_MAX / d)
            return UINT64_MAX;
        n *= d;
    }
    return n;
}

uint64_t ag_tensor_numel(const ag_tensor *t)
{
    return ag_dims_numel(t->rank, t->dims);
}

bool ag_dtype_is_int(ag_dtype dt)
{
    switch (dt) {
    case AG_DT_U8: case AG_DT_I8: case AG_DT_U16: case AG_DT_I16: case AG_DT_I32:
    case AG_DT_I64: case AG_DT_U32: case AG_DT_U64: case AG_DT_BOOL:
        return true;
    default:
        return false;
    }
}

bool ag_dtype_is_float(ag_dtype dt)
{
    return dt == AG_DT_F32 || dt == AG_DT_F64 || dt == AG_DT_F16 || dt == AG_DT_BF16;
}

const char *ag_attr_kind_name(ag_attr_kind k)
{
    switch (k) {
    case AG_ATTR_BOOL: return "bool";
    case AG_ATTR_INT: return "int";
    case AG_ATTR_FLOAT: return "float";
    case AG_ATTR_STRING: return "string";
    case AG_ATTR_TENSOR: return "tensor";
    case AG_ATTR_BOOLS: return "bools";
    case AG_ATTR_INTS: return "ints";
    case AG_ATTR_FLOATS: return "floats";
    case AG_ATTR_STRINGS: return "strings";
    case AG_ATTR_TENSORS: return "tensors";
    }
    return "unknown";
}
