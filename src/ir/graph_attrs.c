/* Values held by the graph: attribute lists, tensor descriptors and constant
 * tensors.  Everything is deep-copied into the graph arena and immutable once
 * attached, so values can be shared between anchors of the same graph; a
 * pointer set records which tensors the graph made, so they are not copied
 * again when attached a second time. */
#include <stdio.h>

#include "ir/graph_internal.h"

static const char ag_attrs_empty_[] = "";

/* ---- owned-tensor set ---- */

static uint32_t ptr_slot(uintptr_t p, uint32_t cap)
{
    uint64_t h = (uint64_t)(p >> 4) * UINT64_C(0x9E3779B97F4A7C15);
    return (uint32_t)(h >> 32) & (cap - 1);
}

bool ag__tensor_owned(const ag_graph *g, const ag_tensor *t)
{
    const ag_ptrset *s = &g->tensors;
    if (s->cap == 0 || t == NULL)
        return false;
    uintptr_t key = (uintptr_t)t;
    for (uint32_t i = ptr_slot(key, s->cap);; i = (i + 1) & (s->cap - 1)) {
        if (s->slots[i] == key)
            return true;
        if (s->slots[i] == 0)
            return false;
    }
}

static ag_status ptrset_add(ag_ctx *ctx, ag_ptrset *s, uintptr_t key)
{
    if ((uint64_t)(s->count + 1) * 2 > s->cap) {
        uint32_t ncap = s->cap ? s->cap * 2 : 64;
        if (ncap == 0)
            return AG_ENOMEM;
        uintptr_t *ns = ag_calloc(ctx, ncap, sizeof *ns);
        if (ns == NULL)
            return AG_ENOMEM;
        for (uint32_t k = 0; k < s->cap; k++) {
            if (s->slots[k] == 0)
                continue;
            uint32_t j = ptr_slot(s->slots[k], ncap);
            while (ns[j] != 0)
                j = (j + 1) & (ncap - 1);
            ns[j] = s->slots[k];
        }
        ag__ptrset_free(ctx, s);
        s->slots = ns;
        s->cap = ncap;
    }
    uint32_t i = ptr_slot(key, s->cap);
    while (s->slots[i] != 0 && s->slots[i] != key)
        i = (i + 1) & (s->cap - 1);
    if (s->slots[i] == 0) {
        s->slots[i] = key;
        s->count++;
    }
    return AG_OK;
}

void ag__ptrset_free(ag_ctx *ctx, ag_ptrset *s)
{
    if (s->slots)
        ag_free(ctx, s->slots, (size_t)s->cap * sizeof *s->slots);
    s->slots = NULL;
    s->cap = 0;
    s->count = 0;
}

/* ---- tensors ---- */

static ag_status check_dims(ag_graph *g, const char *what, int32_t rank, const int64_t *dims, bool allow_unknown)
{
    if (rank < 0 || rank > AG_MAX_RANK)
        return AG_ERR(g->ctx, AG_EINVAL, "%s: rank %d out of range (0..%d)", what, (int)rank, AG_MAX_RANK);
    if (rank > 0 && dims == NULL)
        return AG_ERR(g->ctx, AG_EINVAL, "%s: rank %d but no dims", what, (int)rank);
    for (int32_t k = 0; k < rank; k++) {
        int64_t lo = allow_unknown ? AG_DIM_UNKNOWN : 0;
        if (dims[k] < lo || dims[k] > AG_MAX_DIM)
            return AG_ERR(g->ctx, AG_EINVAL, "%s: dim %d is %lld (must be %s0..2^40)", what, (int)k,
                          (long long)dims[k], allow_unknown ? "-1 or " : "");
    }
    return AG_OK;
}

/* Digest of a string tensor: each string followed by its NUL, concatenated. */
static ag_status strings_digest(ag_graph *g, const char *const *ss, uint64_t n, uint64_t *out)
{
    size_t total = 0;
    for (uint64_t k = 0; k < n; k++)
        total += strlen(ss[k]) + 1;
    char *buf = ag_alloc(g->ctx, total ? total : 1);
    if (buf == NULL)
        return AG_ENOMEM;
    size_t at = 0;
    for (uint64_t k = 0; k < n; k++) {
        size_t l = strlen(ss[k]) + 1;
        memcpy(buf + at, ss[k], l);
        at += l;
    }
    *out = ag_hash_bytes(buf, total);
    ag_free(g->ctx, buf, total ? total : 1);
    return AG_OK;
}

ag_status ag_graph_make_tensor(ag_graph *g, const ag_tensor *t, const ag_tensor **out)
{
    *out = NULL;
    if (t == NULL)
        return AG_ERR(g->ctx, AG_EINVAL, "make tensor: NULL tensor");
    if (ag__tensor_owned(g, t)) {
        *out = t; /* immutable and already ours */
        return AG_OK;
    }
    if (!ag_dtype_valid((int)t->dtype))
        return AG_ERR(g->ctx, AG_EINVAL, "make tensor: invalid data type %d", (int)t->dtype);
    AG_TRY(check_dims(g, "make tensor", t->rank, t->dims, false));
    uint64_t numel = ag_tensor_numel(t);
    if (numel == UINT64_MAX || numel > UINT64_MAX / 128)
        return AG_ERR(g->ctx, AG_EINVAL, "make tensor: element count overflows");
    const char *dt = ag_dtype_name(t->dtype);
    if (t->dtype == AG_DT_STRING) {
        if (t->nbytes != 0 || t->data != NULL)
            return AG_ERR(g->ctx, AG_EINVAL, "make tensor (string): raw data must be empty, got %llu bytes",
                          (unsigned long long)t->nbytes);
        if (t->strings != NULL) {
            if (numel > SIZE_MAX / sizeof(char *))
                return AG_ERR(g->ctx, AG_EINVAL, "make tensor (string): too many elements");
            for (uint64_t k = 0; k < numel; k++)
                if (t->strings[k] == NULL)
                    return AG_ERR(g->ctx, AG_EINVAL, "make tensor (string): element %llu is NULL",
                                  (unsigned long long)k);
        }
    } else {
        uint64_t want = (numel * ag_dtype_bits(t->dtype) + 7) / 8;
        if (t->nbytes != want)
            return AG_ERR(g->ctx, AG_EINVAL, "make tensor (%s, %llu elements): %llu bytes given, %llu expected", dt,
                          (unsigned long long)numel, (unsigned long long)t->nbytes, (unsigned long long)want);
        if (t->nbytes > SIZE_MAX / 2)
            return AG_ERR(g->ctx, AG_EINVAL, "make tensor (%s): %llu bytes is too large", dt,
                          (unsigned long long)t->nbytes);
        if (t->strings != NULL)
            return AG_ERR(g->ctx, AG_EINVAL, "make tensor (%s): strings given for a non-string type", dt);
    }

    ag_tensor *c = ag_arena_alloc(&g->arena, sizeof *c);
    if (c == NULL)
        return AG_OOM(g->ctx);
    *c = *t;
    c->dims = NULL;
    c->data = NULL;
    c->strings = NULL;
    if (t->rank > 0 && (c->dims = ag_arena_memdup(&g->arena, t->dims, (size_t)t->rank * sizeof *t->dims)) == NULL)
        return AG_OOM(g->ctx);
    if (t->data != NULL) {
        if ((c->data = ag_arena_memdup(&g->arena, t->data, (size_t)t->nbytes)) == NULL)
            return AG_OOM(g->ctx);
        c->digest = ag_hash_bytes(t->data, (size_t)t->nbytes);
    } else if (t->strings != NULL) {
        const char **ss = ag_arena_alloc(&g->arena, (size_t)numel * sizeof *ss);
        if (ss == NULL && numel > 0)
            return AG_OOM(g->ctx);
        for (uint64_t k = 0; k < numel; k++)
            if ((ss[k] = ag_arena_strdup(&g->arena, t->strings[k])) == NULL)
                return AG_OOM(g->ctx);
        c->strings = ss;
        if (strings_digest(g, ss, numel, &c->digest) != AG_OK)
            return AG_OOM(g->ctx);
    }
    if (ptrset_add(g->ctx, &g->tensors, (uintptr_t)c) != AG_OK)
        return AG_OOM(g->ctx);
    *out = c;
    return AG_OK;
}

static ag_status own_tensor(ag_graph *g, const ag_tensor *t, const ag_tensor **out)
{
    if (ag__tensor_owned(g, t)) {
        *out = t;
        return AG_OK;
    }
    return ag_graph_make_tensor(g, t, out);
}

/* ---- attribute lists ---- */

uint32_t ag_attrs_count(const ag_attrs *a)
{
    return a ? a->count : 0;
}

const ag_attr *ag_attrs_at(const ag_attrs *a, uint32_t k)
{
    return a && k < a->count ? &a->items[k] : NULL;
}

static int32_t attrs_index(const ag_attrs *a, const char *name)
{
    if (a == NULL || name == NULL)
        return -1;
    for (uint32_t k = 0; k < a->count; k++)
        if (strcmp(a->items[k].name, name) == 0)
            return (int32_t)k;
    return -1;
}

const ag_attr *ag_attrs_find(const ag_attrs *a, const char *name)
{
    int32_t k = attrs_index(a, name);
    return k < 0 ? NULL : &a->items[k];
}

ag_status ag__attrs_reserve(ag_graph *g, ag_attrs *a, uint32_t n)
{
    if (a->cap - a->count >= n)
        return AG_OK;
    uint64_t want = (uint64_t)a->count + n;
    uint64_t ncap = a->cap ? (uint64_t)a->cap * 2 : 4;
    while (ncap < want)
        ncap *= 2;
    if (ncap > UINT32_MAX / 2)
        return AG_ENOMEM;
    ag_attr *items = ag_arena_alloc(&g->arena, (size_t)ncap * sizeof *items);
    if (items == NULL)
        return AG_ENOMEM;
    if (a->count)
        memcpy(items, a->items, (size_t)a->count * sizeof *items);
    a->items = items;
    a->cap = (uint32_t)ncap;
    return AG_OK;
}

void ag__attrs_put_shared(ag_attrs *a, const ag_attr *attr)
{
    int32_t k = attrs_index(a, attr->name);
    if (k >= 0) {
        a->items[k] = *attr;
        return;
    }
    ag_assert(a->count < a->cap);
    a->items[a->count++] = *attr;
}

/* Deep copy of attr's value into c (name not touched). */
static ag_status copy_value(ag_graph *g, const ag_attr *attr, ag_attr *c)
{
    ag_ctx *ctx = g->ctx;
    const char *nm = attr->name;
    uint32_t n = attr->count;
    c->kind = attr->kind;
    c->count = n;
    switch (attr->kind) {
    case AG_ATTR_BOOL:
    case AG_ATTR_INT:
    case AG_ATTR_FLOAT:
        c->count = 1;
        c->v = attr->v;
        return AG_OK;
    case AG_ATTR_STRING:
        c->count = 1;
        if (attr->v.s == NULL)
            return AG_ERR(ctx, AG_EINVAL, "attribute \"%s\": string value is NULL", nm);
        if ((c->v.s = ag_arena_strdup(&g->arena, attr->v.s)) == NULL)
            return AG_OOM(ctx);
        return AG_OK;
    case AG_ATTR_TENSOR:
        c->count = 1;
        if (attr->v.t == NULL)
            return AG_ERR(ctx, AG_EINVAL, "attribute \"%s\": tensor value is NULL", nm);
        return own_tensor(g, attr->v.t, &c->v.t);
    default:
        break;
    }
    if (n > 0 && attr->v.is == NULL) /* any list pointer: they share the union */
        return AG_ERR(ctx, AG_EINVAL, "attribute \"%s\": %u list elements but no values", nm, n);
    if (n > (UINT32_MAX >> 4))
        return AG_ERR(ctx, AG_EINVAL, "attribute \"%s\": list of %u elements is too long", nm, n);
    switch (attr->kind) {
    case AG_ATTR_BOOLS:
        c->v.bs = n ? ag_arena_memdup(&g->arena, attr->v.bs, (size_t)n * sizeof(bool)) : NULL;
        break;
    case AG_ATTR_INTS:
        c->v.is = n ? ag_arena_memdup(&g->arena, attr->v.is, (size_t)n * sizeof(int64_t)) : NULL;
        break;
    case AG_ATTR_FLOATS:
        c->v.fs = n ? ag_arena_memdup(&g->arena, attr->v.fs, (size_t)n * sizeof(float)) : NULL;
        break;
    case AG_ATTR_STRINGS: {
        const char **ss = n ? ag_arena_alloc(&g->arena, (size_t)n * sizeof *ss) : NULL;
        if (n && ss == NULL)
            return AG_OOM(ctx);
        for (uint32_t k = 0; k < n; k++) {
            if (attr->v.ss[k] == NULL)
                return AG_ERR(ctx, AG_EINVAL, "attribute \"%s\": string %u is NULL", nm, k);
            if ((ss[k] = ag_arena_strdup(&g->arena, attr->v.ss[k])) == NULL)
                return AG_OOM(ctx);
        }
        c->v.ss = ss;
        return AG_OK;
    }
    case AG_ATTR_TENSORS: {
        const ag_tensor **ts = n ? ag_arena_alloc(&g->arena, (size_t)n * sizeof *ts) : NULL;
        if (n && ts == NULL)
            return AG_OOM(ctx);
        for (uint32_t k = 0; k < n; k++) {
            if (attr->v.ts[k] == NULL)
                return AG_ERR(ctx, AG_EINVAL, "attribute \"%s\": tensor %u is NULL", nm, k);
            AG_TRY(own_tensor(g, attr->v.ts[k], &ts[k]));
        }
        c->v.ts = ts;
        return AG_OK;
    }
    default:
        return AG_ERR(ctx, AG_EINVAL, "attribute \"%s\": invalid kind %d", nm, (int)attr->kind);
    }
    if (n && c->v.is == NULL)
        return AG_OOM(ctx);
    return AG_OK;
}

ag_status ag_attrs_set(ag_graph *g, ag_attrs *a, const ag_attr *attr)
{
    if (a == NULL || attr == NULL)
        return AG_ERR(g->ctx, AG_EINVAL, "set attribute: NULL attribute list or attribute");
    if (attr->name == NULL || attr->name[0] == '\0')
        return AG_ERR(g->ctx, AG_EINVAL, "set attribute: empty name");
    ag_attr c;
    memset(&c, 0, sizeof c);
    AG_TRY(copy_value(g, attr, &c));
    int32_t k = attrs_index(a, attr->name);
    if (k >= 0) {
        c.name = a->items[k].name;
        a->items[k] = c;
        return AG_OK;
    }
    if ((c.name = ag_arena_strdup(&g->arena, attr->name)) == NULL || ag__attrs_reserve(g, a, 1) != AG_OK)
        return AG_OOM(g->ctx);
    a->items[a->count++] = c;
    return AG_OK;
}

ag_status ag_attrs_remove(ag_graph *g, ag_attrs *a, const char *name)
{
    int32_t k = attrs_index(a, name);
    if (k < 0)
        return AG_ERR(g->ctx, AG_ENOTFOUND, "remove attribute: no attribute \"%s\"", name ? name : "");
    memmove(&a->items[k], &a->items[k + 1], (size_t)(a->count - (uint32_t)k - 1) * sizeof *a->items);
    a->count--;
    return AG_OK;
}

static const ag_attr *find_kind(const ag_attrs *a, const char *name, ag_attr_kind kind)
{
    const ag_attr *at = ag_attrs_find(a, name);
    return at && at->kind == kind ? at : NULL;
}

bool ag_attrs_get_bool(const ag_attrs *a, const char *name, bool *out)
{
    const ag_attr *at = find_kind(a, name, AG_ATTR_BOOL);
    if (at && out)
        *out = at->v.b;
    return at != NULL;
}

bool ag_attrs_get_flag(const ag_attrs *a, const char *name, bool dflt)
{
    bool b;
    int64_t i;
    if (ag_attrs_get_bool(a, name, &b))
        return b;
    if (ag_attrs_get_int(a, name, &i))
        return i != 0;
    return dflt;
}

bool ag_attrs_get_int(const ag_attrs *a, const char *name, int64_t *out)
{
    const ag_attr *at = find_kind(a, name, AG_ATTR_INT);
    if (at && out)
        *out = at->v.i;
    return at != NULL;
}

bool ag_attrs_get_float(const ag_attrs *a, const char *name, float *out)
{
    const ag_attr *at = find_kind(a, name, AG_ATTR_FLOAT);
    if (at && out)
        *out = at->v.f;
    return at != NULL;
}

bool ag_attrs_get_string(const ag_attrs *a, const char *name, const char **out)
{
    const ag_attr *at = find_kind(a, name, AG_ATTR_STRING);
    if (at && out)
        *out = at->v.s;
    return at != NULL;
}

bool ag_attrs_get_ints(const ag_attrs *a, const char *name, const int64_t **out, uint32_t *count)
{
    const ag_attr *at = find_kind(a, name, AG_ATTR_INTS);
    if (at) {
        if (out)
            *out = at->v.is;
        if (count)
            *count = at->count;
    }
    return at != NULL;
}

ag_status ag_attrs_set_bool(ag_graph *g, ag_attrs *a, const char *name, bool v)
{
    ag_attr at = {.name = name, .kind = AG_ATTR_BOOL, .count = 1, .v.b = v};
    return ag_attrs_set(g, a, &at);
}

ag_status ag_attrs_set_int(ag_graph *g, ag_attrs *a, const char *name, int64_t v)
{
    ag_attr at = {.name = name, .kind = AG_ATTR_INT, .count = 1, .v.i = v};
    return ag_attrs_set(g, a, &at);
}

ag_status ag_attrs_set_string(ag_graph *g, ag_attrs *a, const char *name, const char *v)
{
    ag_attr at = {.name = name, .kind = AG_ATTR_STRING, .count = 1, .v.s = v};
    return ag_attrs_set(g, a, &at);
}

ag_status ag_attrs_set_ints(ag_graph *g, ag_attrs *a, const char *name, const int64_t *v, uint32_t count)
{
    ag_attr at = {.name = name, .kind = AG_ATTR_INTS, .count = count, .v.is = v};
    return ag_attrs_set(g, a, &at);
}

/* ---- tensor descriptors ---- */

ag_status ag_desc_set_name(ag_graph *g, ag_tensor_desc *d, const char *name)
{
    const char *c = ag_attrs_empty_;
    if (name != NULL && name[0] != '\0' && (c = ag_arena_strdup(&g->arena, name)) == NULL)
        return AG_OOM(g->ctx);
    d->name = c;
    return AG_OK;
}

static const char *desc_label(const ag_tensor_desc *d)
{
    return d->name && d->name[0] ? d->name : "(unnamed)";
}

ag_status ag_desc_set_shape(ag_graph *g, ag_tensor_desc *d, int32_t rank, const int64_t *dims)
{
    if (rank == AG_RANK_UNKNOWN) {
        d->rank = AG_RANK_UNKNOWN;
        d->dims = NULL;
        return AG_OK;
    }
    if (rank < 0 || rank > AG_MAX_RANK)
        return AG_ERR(g->ctx, AG_EINVAL, "tensor \"%s\": rank %d out of range (-1 or 0..%d)", desc_label(d),
                      (int)rank, AG_MAX_RANK);
    char what[160];
    snprintf(what, sizeof what, "tensor \"%s\"", desc_label(d));
    AG_TRY(check_dims(g, what, rank, dims, true));
    const int64_t *c = NULL;
    if (rank > 0 && (c = ag_arena_memdup(&g->arena, dims, (size_t)rank * sizeof *dims)) == NULL)
        return AG_OOM(g->ctx);
    d->rank = rank;
    d->dims = c;
    return AG_OK;
}

ag_status ag_desc_set_value(ag_graph *g, ag_tensor_desc *d, const ag_tensor *value)
{
    const ag_tensor *c = NULL;
    if (value != NULL)
        AG_TRY(own_tensor(g, value, &c));
    d->value = c;
    return AG_OK;
}

ag_status ag_desc_copy_type(ag_graph *g, ag_tensor_desc *dst, const ag_tensor_desc *src)
{
    if (dst == src)
        return AG_OK;
    if (src->rank != AG_RANK_UNKNOWN && (src->rank < 0 || src->rank > AG_MAX_RANK))
        return AG_ERR(g->ctx, AG_EINVAL, "copy tensor type from \"%s\": rank %d out of range", desc_label(src),
                      (int)src->rank);
    /* rank is a scalar field a caller may have set without dims. */
    if (src->rank > 0 && src->dims == NULL)
        return AG_ERR(g->ctx, AG_EINVAL, "copy tensor type from \"%s\": rank %d but no dims", desc_label(src),
                      (int)src->rank);
    const char *name = ag_attrs_empty_;
    const int64_t *dims = NULL;
    const ag_tensor *value = NULL;
    if (src->name != NULL && src->name[0] != '\0' && (name = ag_arena_strdup(&g->arena, src->name)) == NULL)
        return AG_OOM(g->ctx);
    if (src->rank > 0 &&
        (dims = ag_arena_memdup(&g->arena, src->dims, (size_t)src->rank * sizeof *src->dims)) == NULL)
        return AG_OOM(g->ctx);
    if (src->value != NULL)
        AG_TRY(own_tensor(g, src->value, &value));
    dst->name = name;
    dst->dtype = src->dtype;
    dst->rank = src->rank;
    dst->dims = dims;
    dst->mem_type = src->mem_type;
    dst->format = src->format;
    dst->value = value;
    return AG_OK;
}

bool ag_desc_shape_known(const ag_tensor_desc *d)
{
    if (d->rank < 0 || d->rank > AG_MAX_RANK || (d->rank > 0 && d->dims == NULL))
        return false;
    for (int32_t k = 0; k < d->rank; k++)
        if (d->dims[k] < 0)
            return false;
    return true;
}

uint64_t ag_desc_numel(const ag_tensor_desc *d)
{
    if (!ag_desc_shape_known(d))
        return UINT64_MAX;
    return ag_dims_numel(d->rank, d->dims);
}

uint64_t ag_desc_size_bytes(const ag_tensor_desc *d)
{
    unsigned bits = ag_dtype_bits(d->dtype);
    uint64_t n = ag_desc_numel(d);
    if (bits == 0 || n == UINT64_MAX || n > (UINT64_MAX - 7) / bits)
        return AG_SIZE_UNKNOWN;
    return (n * bits + 7) / 8;
}
