/* Structural equality of two graphs, the oracle of round-trip tests (text IR
 * print/parse, import/export).  Subgraphs and nodes are matched by name, not
 * by id or stored order; edges, attributes, descriptors and tensor digests
 * must agree.  The first difference found is described in one line. */
#include <stdarg.h>
#include <stdio.h>

#include "ir/graph_internal.h"

typedef struct eq_ctx {
    const ag_graph *a, *b;
    char *why;
    size_t why_len;
} eq_ctx;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static bool differ(eq_ctx *e, const char *fmt, ...)
{
    if (e->why != NULL && e->why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->why, e->why_len, fmt, ap);
        va_end(ap);
    }
    return false;
}

static bool tensor_equal(eq_ctx *e, const char *where, const ag_tensor *x, const ag_tensor *y)
{
    if (x == NULL || y == NULL) {
        if (x == y)
            return true;
        return differ(e, "%s: value %s vs %s", where, x ? "present" : "absent", y ? "present" : "absent");
    }
    if (x->dtype != y->dtype)
        return differ(e, "%s: tensor type %s vs %s", where, ag_dtype_name(x->dtype), ag_dtype_name(y->dtype));
    if (x->rank != y->rank)
        return differ(e, "%s: tensor rank %d vs %d", where, (int)x->rank, (int)y->rank);
    for (int32_t k = 0; k < x->rank; k++)
        if (x->dims[k] != y->dims[k])
            return differ(e, "%s: tensor dim %d is %lld vs %lld", where, (int)k, (long long)x->dims[k],
                          (long long)y->dims[k]);
    if (x->digest != y->digest)
        return differ(e, "%s: tensor digest %016llx vs %016llx", where, (unsigned long long)x->digest,
                      (unsigned long long)y->digest);
    return true;
}

static bool attr_equal(eq_ctx *e, const char *where, const ag_attr *x, const ag_attr *y)
{
    char w[512];
    snprintf(w, sizeof w, "%s attribute \"%s\"", where, x->name);
    if (x->kind != y->kind)
        return differ(e, "%s: kind %s vs %s", w, ag_attr_kind_name(x->kind), ag_attr_kind_name(y->kind));
    if (x->count != y->count)
        return differ(e, "%s: %u vs %u elements", w, x->count, y->count);
    uint32_t n = x->count;
    switch (x->kind) {
    case AG_ATTR_BOOL:
        return x->v.b == y->v.b || differ(e, "%s: %d vs %d", w, x->v.b, y->v.b);
    case AG_ATTR_INT:
        return x->v.i == y->v.i || differ(e, "%s: %lld vs %lld", w, (long long)x->v.i, (long long)y->v.i);
    case AG_ATTR_FLOAT:
        /* Bitwise, so that NaN equals itself and -0 differs from 0. */
        return memcmp(&x->v.f, &y->v.f, sizeof(float)) == 0 ||
               differ(e, "%s: %.9g vs %.9g", w, (double)x->v.f, (double)y->v.f);
    case AG_ATTR_STRING:
        return strcmp(x->v.s, y->v.s) == 0 || differ(e, "%s: \"%s\" vs \"%s\"", w, x->v.s, y->v.s);
    case AG_ATTR_TENSOR:
        return tensor_equal(e, w, x->v.t, y->v.t);
    case AG_ATTR_BOOLS:
        for (uint32_t k = 0; k < n; k++)
            if (x->v.bs[k] != y->v.bs[k])
                return differ(e, "%s: element %u differs", w, k);
        return true;
    case AG_ATTR_INTS:
        for (uint32_t k = 0; k < n; k++)
            if (x->v.is[k] != y->v.is[k])
                return differ(e, "%s: element %u is %lld vs %lld", w, k, (long long)x->v.is[k],
                              (long long)y->v.is[k]);
        return true;
    case AG_ATTR_FLOATS:
        if (n && memcmp(x->v.fs, y->v.fs, (size_t)n * sizeof(float)) != 0)
            return differ(e, "%s: float elements differ", w);
        return true;
    case AG_ATTR_STRINGS:
        for (uint32_t k = 0; k < n; k++)
            if (strcmp(x->v.ss[k], y->v.ss[k]) != 0)
                return differ(e, "%s: element %u is \"%s\" vs \"%s\"", w, k, x->v.ss[k], y->v.ss[k]);
        return true;
    case AG_ATTR_TENSORS:
        for (uint32_t k = 0; k < n; k++)
            if (!tensor_equal(e, w, x->v.ts[k], y->v.ts[k]))
                return false;
        return true;
    }
    return differ(e, "%s: unknown kind %d", w, (int)x->kind);
}

/* Attribute lists are compared as sets keyed by name. */
static bool attrs_equal(eq_ctx *e, const char *where, const ag_attrs *x, const ag_attrs *y)
{
    if (x->count != y->count)
        return differ(e, "%s: %u vs %u attributes", where, x->count, y->count);
    for (uint32_t k = 0; k < x->count; k++) {
        const ag_attr *ya = ag_attrs_find(y, x->items[k].name);
        if (ya == NULL)
            return differ(e, "%s: attribute \"%s\" missing in the second graph", where, x->items[k].name);
        if (!attr_equal(e, where, &x->items[k], ya))
            return false;
    }
    return true;
}

static bool desc_equal(eq_ctx *e, const char *where, const ag_tensor_desc *x, const ag_tensor_desc *y)
{
    if (strcmp(x->name, y->name) != 0)
        return differ(e, "%s: value name \"%s\" vs \"%s\"", where, x->name, y->name);
    if (x->dtype != y->dtype)
        return differ(e, "%s: dtype %s vs %s", where, ag_dtype_name(x->dtype), ag_dtype_name(y->dtype));
    if (x->rank != y->rank)
        return differ(e, "%s: rank %d vs %d", where, (int)x->rank, (int)y->rank);
    for (int32_t k = 0; k < x->rank; k++)
        if (x->dims[k] != y->dims[k])
            return differ(e, "%s: dim %d is %lld vs %lld", where, (int)k, (long long)x->dims[k],
                          (long long)y->dims[k]);
    if (x->mem_type != y->mem_type)
        return differ(e, "%s: memory type %s vs %s", where, ag_mem_type_name(x->mem_type),
                      ag_mem_type_name(y->mem_type));
    if (x->format != y->format)
        return differ(e, "%s: format %s vs %s", where, ag_format_name(x->format), ag_format_name(y->format));
    if (!tensor_equal(e, where, x->value, y->value))
        return false;
    return attrs_equal(e, where, x->attrs, y->attrs);
}

static bool node_equal(eq_ctx *e, ag_sub_id sb, ag_node_id na, ag_node_id nb)
{
    const ag_graph *a = e->a, *b = e->b;
    const ag_noderec *x = AG_NODE(a, na), *y = AG_NODE(b, nb);
    char where[512];
    snprintf(where, sizeof where, "node \"%s\" (%s) in \"%s\"", x->name, x->type, AG_SUB(a, x->owner)->name);
    if (strcmp(x->type, y->type) != 0)
        return differ(e, "%s: type \"%s\" vs \"%s\"", where, x->type, y->type);
    if (strcmp(x->domain, y->domain) != 0)
        return differ(e, "%s: domain \"%s\" vs \"%s\"", where, x->domain, y->domain);
    if (x->nin != y->nin || x->nout != y->nout)
        return differ(e, "%s: %u inputs / %u outputs vs %u / %u", where, x->nin, x->nout, y->nin, y->nout);
    for (uint32_t i = 0; i < x->nin; i++) {
        ag_port p = x->in[i]->src, q = y->in[i]->src;
        if ((p.node == AG_NONE) != (q.node == AG_NONE))
            return differ(e, "%s input %u: %s vs %s", where, i, p.node == AG_NONE ? "unconnected" : "connected",
                          q.node == AG_NONE ? "unconnected" : "connected");
        if (p.node != AG_NONE && (p.index != q.index || strcmp(AG_NODE(a, p.node)->name, AG_NODE(b, q.node)->name)))
            return differ(e, "%s input %u: fed by \"%s\":%u vs \"%s\":%u", where, i, AG_NODE(a, p.node)->name,
                          p.index, AG_NODE(b, q.node)->name, q.index);
        char w[600];
        snprintf(w, sizeof w, "%s input %u", where, i);
        if (!desc_equal(e, w, &x->in[i]->desc, &y->in[i]->desc))
            return false;
    }
    for (uint32_t o = 0; o < x->nout; o++) {
        char w[600];
        snprintf(w, sizeof w, "%s output %u", where, o);
        if (!desc_equal(e, w, &x->out[o]->desc, &y->out[o]->desc))
            return false;
    }
    if (x->ctrl_in.len != y->ctrl_in.len)
        return differ(e, "%s: %u vs %u control predecessors", where, x->ctrl_in.len, y->ctrl_in.len);
    for (uint32_t k = 0; k < x->ctrl_in.len; k++) {
        const char *pn = AG_NODE(a, AG_VEC_AT(x->ctrl_in, ag_node_id, k))->name;
        ag_node_id pb = ag_sub_find_node(b, sb, pn);
        if (pb == AG_NONE || !ag__has_ctrl(b, pb, nb))
            return differ(e, "%s: control edge from \"%s\" missing in the second graph", where, pn);
    }
    if (x->subs.len != y->subs.len)
        return differ(e, "%s: %u vs %u subgraphs", where, x->subs.len, y->subs.len);
    for (uint32_t k = 0; k < x->subs.len; k++) {
        const char *sx = AG_SUB(a, AG_VEC_AT(x->subs, ag_sub_id, k))->name;
        const char *sy = AG_SUB(b, AG_VEC_AT(y->subs, ag_sub_id, k))->name;
        if (strcmp(sx, sy) != 0)
            return differ(e, "%s: subgraph %u is \"%s\" vs \"%s\"", where, k, sx, sy);
    }
    return attrs_equal(e, where, x->attrs, y->attrs);
}

bool ag_graph_equal(const ag_graph *a, const ag_graph *b, char *why, size_t why_len)
{
    eq_ctx e = {a, b, why, why_len};
    if (why && why_len)
        why[0] = '\0';
    if (strcmp(AG_SUB(a, AG_ROOT)->name, AG_SUB(b, AG_ROOT)->name) != 0)
        return differ(&e, "root graph name \"%s\" vs \"%s\"", AG_SUB(a, AG_ROOT)->name, AG_SUB(b, AG_ROOT)->name);
    uint32_t alive_a = 0, alive_b = 0;
    for (ag_sub_id s = 0; s < a->subs.len; s++)
        alive_a += AG_SUB(a, s)->alive;
    for (ag_sub_id s = 0; s < b->subs.len; s++)
        alive_b += AG_SUB(b, s)->alive;
    if (alive_a != alive_b)
        return differ(&e, "%u vs %u subgraphs", alive_a, alive_b);
    if (a->live_nodes != b->live_nodes)
        return differ(&e, "%u vs %u nodes", a->live_nodes, b->live_nodes);
    for (ag_sub_id sa = 0; sa < a->subs.len; sa++) {
        const ag_subrec *x = AG_SUB(a, sa);
        if (!x->alive)
            continue;
        ag_sub_id sb = sa == AG_ROOT ? AG_ROOT : ag_graph_find_sub(b, x->name);
        if (sb == AG_NONE || (sb == AG_ROOT) != (sa == AG_ROOT))
            return differ(&e, "subgraph \"%s\" missing in the second graph", x->name);
        const ag_subrec *y = AG_SUB(b, sb);
        if (sa != AG_ROOT) {
            const ag_noderec *px = AG_NODE(a, x->parent), *py = AG_NODE(b, y->parent);
            if (strcmp(px->name, py->name) != 0 ||
                strcmp(AG_SUB(a, px->owner)->name, AG_SUB(b, py->owner)->name) != 0)
                return differ(&e, "subgraph \"%s\": parent \"%s\" vs \"%s\"", x->name, px->name, py->name);
        }
        if (x->count != y->count)
            return differ(&e, "subgraph \"%s\": %u vs %u nodes", x->name, x->count, y->count);
        for (ag_node_id na = x->head; na != AG_NONE; na = AG_NODE(a, na)->next) {
            ag_node_id nb = ag_sub_find_node(b, sb, AG_NODE(a, na)->name);
            if (nb == AG_NONE)
                return differ(&e, "node \"%s\" of subgraph \"%s\" missing in the second graph", AG_NODE(a, na)->name,
                              x->name);
            if (!node_equal(&e, sb, na, nb))
                return false;
        }
    }
    return true;
}
