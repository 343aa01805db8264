/* Writer of the text IR (.agt).  The output is canonical: nodes in each
 * subgraph's stored order, attributes in stored order, one spelling for every
 * value (shortest round-tripping floats, fixed quoting rules), so printing a
 * parsed print gives the same bytes.  Format and grammar: docs/ir.md. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ir/text_internal.h"

typedef struct writer {
    ag_bufout out; /* out.st: the first failure, the writer's own ones included */
    const ag_graph *g;
    ag_ctx *ctx;
    uint64_t elide_bytes;
} writer;

static void put(writer *w, const char *s, size_t n)
{
    ag_bufout_put(&w->out, s, n);
}

static void puts_(writer *w, const char *s)
{
    ag_bufout_puts(&w->out, s);
}

static void putc_(writer *w, char c)
{
    put(w, &c, 1);
}

static void indent(writer *w, uint32_t depth)
{
    for (uint32_t k = 0; k < depth; k++)
        put(w, "  ", 2);
}

static void put_u64(writer *w, uint64_t v)
{
    char b[24];
    int n = snprintf(b, sizeof b, "%" PRIu64, v);
    put(w, b, (size_t)n);
}

static void put_i64(writer *w, int64_t v)
{
    char b[24];
    int n = snprintf(b, sizeof b, "%" PRId64, v);
    put(w, b, (size_t)n);
}

/* "..." with \\ \" \n \t \r and \xHH for every other byte outside 0x20..0x7e,
 * so the file stays printable ASCII whatever the names hold. */
static void put_quoted(writer *w, const char *s)
{
    static const char hexd[] = "0123456789abcdef";
    putc_(w, '"');
    for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
        unsigned char c = *q;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(w, e, 2);
        } else if (c == '\n') {
            put(w, "\\n", 2);
        } else if (c == '\t') {
            put(w, "\\t", 2);
        } else if (c == '\r') {
            put(w, "\\r", 2);
        } else if (c < 0x20 || c > 0x7e) {
            char e[4] = {'\\', 'x', hexd[c >> 4], hexd[c & 15]};
            put(w, e, 4);
        } else {
            putc_(w, (char)c);
        }
    }
    putc_(w, '"');
}

/* Bare when it matches [A-Za-z_][A-Za-z0-9_./]*, quoted otherwise. */
static void put_name(writer *w, const char *s)
{
    bool bare = ag_text_name_start((unsigned char)s[0]);
    for (const char *q = s; bare && *q; q++)
        bare = ag_text_name_char((unsigned char)*q);
    if (bare)
        puts_(w, s);
    else
        put_quoted(w, s);
}

/* Shortest decimal that reads back to the same value; always carries a '.',
 * an exponent or a word, so the reader sees a float, never an int.  Integral
 * values below 2^24 (f32) / 2^53 (f64) are printed in full ("100.0", not
 * "1e+02"). */
static void put_real(writer *w, double v, bool single)
{
    char b[64];
    uint64_t bits;
    if (isnan(v)) {
        if (single) {
            float f = (float)v;
            uint32_t b32;
            memcpy(&b32, &f, 4);
            bits = b32;
        } else {
            memcpy(&bits, &v, 8);
        }
        if (bits == (single ? 0x7fc00000u : 0x7ff8000000000000ull))
            puts_(w, "nan");
        else if (bits == (single ? 0xffc00000u : 0xfff8000000000000ull))
            puts_(w, "-nan");
        else {
            snprintf(b, sizeof b, single ? "nan(0x%08" PRIx64 ")" : "nan(0x%016" PRIx64 ")", bits);
            puts_(w, b);
        }
        return;
    }
    if (isinf(v)) {
        puts_(w, v < 0 ? "-inf" : "inf");
        return;
    }
    int maxp = single ? 9 : 17;
    for (int prec = 1; prec <= maxp; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, v);
        if (single ? strtof(b, NULL) == (float)v : strtod(b, NULL) == v)
            break;
    }
    if (strchr(b, 'e') && fabs(v) < (single ? 16777216.0 : 9007199254740992.0) && v == floor(v))
        snprintf(b, sizeof b, "%.0f", v);
    if (!strchr(b, '.') && !strchr(b, 'e'))
        strcat(b, ".0");
    puts_(w, b);
}

/* The same value bit for bit: NaN payloads must survive the double round. */
static void put_f32(writer *w, float f)
{
    if (isnan(f)) {
        uint32_t b32;
        memcpy(&b32, &f, 4);
        char b[32];
        if (b32 == 0x7fc00000u)
            puts_(w, "nan");
        else if (b32 == 0xffc00000u)
            puts_(w, "-nan");
        else {
            snprintf(b, sizeof b, "nan(0x%08" PRIx32 ")", b32);
            puts_(w, b);
        }
        return;
    }
    put_real(w, f, true);
}

/* ---------------------------------------------------------------- tensors */

static uint64_t rd_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned k = 0; k < n; k++)
        v |= (uint64_t)p[k] << (8 * k);
    return v;
}

static void put_dims(writer *w, int32_t rank, const int64_t *dims)
{
    putc_(w, '[');
    for (int32_t k = 0; k < rank; k++) {
        if (k)
            putc_(w, ',');
        if (dims[k] < 0)
            putc_(w, '?');
        else
            put_i64(w, dims[k]);
    }
    putc_(w, ']');
}

static uint64_t tensor_bytes(const ag_tensor *t)
{
    if (t->dtype != AG_DT_STRING)
        return t->nbytes;
    uint64_t n = 0, numel = ag_tensor_numel(t);
    for (uint64_t k = 0; t->strings && k < numel; k++)
        n += strlen(t->strings[k]) + 1;
    return n;
}

static bool elided(const writer *w, const ag_tensor *t)
{
    if (t->dtype == AG_DT_STRING)
        return t->strings == NULL || tensor_bytes(t) > w->elide_bytes;
    return t->data == NULL || t->nbytes > w->elide_bytes;
}

/* {values}, x"hex" or elided 0xDIGEST. */
static void put_tensor_body(writer *w, const ag_tensor *t)
{
    static const char hexd[] = "0123456789abcdef";
    if (elided(w, t)) {
        char b[40];
        snprintf(b, sizeof b, "elided 0x%016" PRIx64, t->digest);
        puts_(w, b);
        return;
    }
    uint64_t numel = ag_tensor_numel(t);
    const uint8_t *d = t->data;
    if (t->dtype == AG_DT_STRING) {
        putc_(w, '{');
        for (uint64_t k = 0; k < numel; k++) {
            if (k)
                put(w, ", ", 2);
            put_quoted(w, t->strings[k]);
        }
        putc_(w, '}');
        return;
    }
    unsigned esz = 0;
    bool sgn = false, typed = true;
    switch (t->dtype) {
    case AG_DT_I8: esz = 1; sgn = true; break;
    case AG_DT_U8: esz = 1; break;
    case AG_DT_I16: esz = 2; sgn = true; break;
    case AG_DT_U16: esz = 2; break;
    case AG_DT_I32: esz = 4; sgn = true; break;
    case AG_DT_U32: esz = 4; break;
    case AG_DT_I64: esz = 8; sgn = true; break;
    case AG_DT_U64: esz = 8; break;
    case AG_DT_F32: esz = 4; break;
    case AG_DT_F64: esz = 8; break;
    case AG_DT_BOOL:
        esz = 1;
        for (uint64_t k = 0; k < t->nbytes && typed; k++)
            typed = d[k] <= 1;
        break;
    default: typed = false; break;
    }
    if (typed && numel * esz != t->nbytes)
        typed = false;
    if (!typed) {
        put(w, "x\"", 2);
        for (uint64_t k = 0; k < t->nbytes; k++) {
            char e[2] = {hexd[d[k] >> 4], hexd[d[k] & 15]};
            put(w, e, 2);
        }
        putc_(w, '"');
        return;
    }
    putc_(w, '{');
    for (uint64_t k = 0; k < numel; k++) {
        if (k)
            put(w, ", ", 2);
        uint64_t v = rd_le(d + k * esz, esz);
        if (t->dtype == AG_DT_BOOL) {
            puts_(w, v ? "true" : "false");
        } else if (t->dtype == AG_DT_F32) {
            uint32_t b32 = (uint32_t)v;
            float f;
            memcpy(&f, &b32, 4);
            put_f32(w, f);
        } else if (t->dtype == AG_DT_F64) {
            double x;
            memcpy(&x, &v, 8);
            put_real(w, x, false);
        } else if (sgn) {
            unsigned sh = 64 - 8 * esz;
            put_i64(w, (int64_t)(v << sh) >> sh);
        } else {
            put_u64(w, v);
        }
    }
    putc_(w, '}');
}

static void put_tensor(writer *w, const ag_tensor *t)
{
    const char *dn = ag_dtype_name(t->dtype);
    if (!dn || t->dtype == AG_DT_UNDEFINED) {
        if (w->out.st == AG_OK)
            w->out.st = AG_ERR(w->ctx, AG_EINVAL, "text writer: tensor with invalid dtype %d", (int)t->dtype);
        return;
    }
    puts_(w, dn);
    put_dims(w, t->rank, t->dims);
    putc_(w, ' ');
    put_tensor_body(w, t);
}

/* ------------------------------------------------------------- attributes */

static void put_attr_value(writer *w, const ag_attr *a)
{
    switch (a->kind) {
    case AG_ATTR_BOOL: puts_(w, a->v.b ? "true" : "false"); return;
    case AG_ATTR_INT: put_i64(w, a->v.i); return;
    case AG_ATTR_FLOAT: put_f32(w, a->v.f); return;
    case AG_ATTR_STRING: put_quoted(w, a->v.s); return;
    case AG_ATTR_TENSOR: put_tensor(w, a->v.t); return;
    default: break;
    }
    if (a->kind < AG_ATTR_BOOLS || a->kind > AG_ATTR_TENSORS) {
        if (w->out.st == AG_OK)
            w->out.st = AG_ERR(w->ctx, AG_EINVAL, "text writer: attribute '%s' has invalid kind %d", a->name, (int)a->kind);
        return;
    }
    if (a->count == 0) {
        puts_(w, ag_attr_kind_name(a->kind));
        put(w, " []", 3);
        return;
    }
    putc_(w, '[');
    for (uint32_t k = 0; k < a->count; k++) {
        if (k)
            put(w, ", ", 2);
        switch (a->kind) {
        case AG_ATTR_BOOLS: puts_(w, a->v.bs[k] ? "true" : "false"); break;
        case AG_ATTR_INTS: put_i64(w, a->v.is[k]); break;
        case AG_ATTR_FLOATS: put_f32(w, a->v.fs[k]); break;
        case AG_ATTR_STRINGS: put_quoted(w, a->v.ss[k]); break;
        default: put_tensor(w, a->v.ts[k]); break;
        }
    }
    putc_(w, ']');
}

/* " <name = value, ...>" when a holds anything. */
static void put_attrs(writer *w, const ag_attrs *a)
{
    uint32_t n = ag_attrs_count(a);
    if (n == 0)
        return;
    put(w, " <", 2);
    for (uint32_t k = 0; k < n; k++) {
        const ag_attr *at = ag_attrs_at(a, k);
        if (k)
            put(w, ", ", 2);
        put_name(w, at->name);
        put(w, " = ", 3);
        put_attr_value(w, at);
    }
    putc_(w, '>');
}

/* ------------------------------------------------------------ descriptors */

static bool dims_equal(int32_t ra, const int64_t *a, int32_t rb, const int64_t *b)
{
    if (ra != rb)
        return false;
    for (int32_t k = 0; k < ra; k++)
        if (a[k] != b[k])
            return false;
    return true;
}

static bool same_value(const ag_tensor *a, const ag_tensor *b);

/* The node's tensor attribute holding exactly value t ("value" of a Const),
 * so the descriptor can refer to it instead of printing the tensor twice. */
static const char *value_attr(const ag_attrs *node_attrs, const ag_tensor *t)
{
    for (uint32_t k = 0; node_attrs && k < ag_attrs_count(node_attrs); k++) {
        const ag_attr *a = ag_attrs_at(node_attrs, k);
        if (a->kind == AG_ATTR_TENSOR && same_value(a->v.t, t))
            return a->name;
    }
    return NULL;
}

/* TYPESHAPE ["name"] [mem] [format] [= value | = @attr]; attributes are the
 * caller's.  node_attrs is given for output descriptors only. */
static void put_desc(writer *w, const ag_tensor_desc *d, const ag_attrs *node_attrs)
{
    if (d->dtype == AG_DT_UNDEFINED) {
        putc_(w, '?');
    } else {
        const char *dn = ag_dtype_name(d->dtype);
        if (!dn) {
            if (w->out.st == AG_OK)
                w->out.st = AG_ERR(w->ctx, AG_EINVAL, "text writer: descriptor with invalid dtype %d", (int)d->dtype);
            return;
        }
        puts_(w, dn);
    }
    if (d->rank >= 0)
        put_dims(w, d->rank, d->dims);
    if (d->name && d->name[0]) {
        putc_(w, ' ');
        put_quoted(w, d->name);
    }
    if (d->mem_type != AG_MEM_HBM) {
        const char *mn = ag_mem_type_name(d->mem_type);
        if (!mn) {
            if (w->out.st == AG_OK)
                w->out.st = AG_ERR(w->ctx, AG_EINVAL, "text writer: invalid memory type %d", (int)d->mem_type);
            return;
        }
        putc_(w, ' ');
        puts_(w, mn);
    }
    if (d->format != AG_FMT_ND) {
        const char *fn = ag_format_name(d->format);
        if (!fn) {
            if (w->out.st == AG_OK)
                w->out.st = AG_ERR(w->ctx, AG_EINVAL, "text writer: invalid format %d", (int)d->format);
            return;
        }
        putc_(w, ' ');
        puts_(w, fn);
    }
    const char *ref = d->value ? value_attr(node_attrs, d->value) : NULL;
    if (ref) {
        put(w, " = @", 4);
        put_name(w, ref);
    } else if (d->value) {
        put(w, " = ", 3);
        if (d->value->dtype == d->dtype && dims_equal(d->rank, d->dims, d->value->rank, d->value->dims))
            put_tensor_body(w, d->value);
        else
            put_tensor(w, d->value);
    }
}

static bool same_value(const ag_tensor *a, const ag_tensor *b)
{
    if (!a || !b)
        return a == b;
    return a == b || (a->dtype == b->dtype && a->digest == b->digest && (a->data == NULL) == (b->data == NULL) &&
                      (a->strings == NULL) == (b->strings == NULL) && dims_equal(a->rank, a->dims, b->rank, b->dims));
}

/* Fields an edge copies from the producer (attributes excluded). */
static bool same_type(const ag_tensor_desc *a, const ag_tensor_desc *b)
{
    return a->dtype == b->dtype && a->mem_type == b->mem_type && a->format == b->format &&
           strcmp(a->name ? a->name : "", b->name ? b->name : "") == 0 &&
           (a->rank < 0 ? b->rank < 0 : dims_equal(a->rank, a->dims, b->rank, b->dims)) && same_value(a->value, b->value);
}

static const ag_tensor_desc default_desc = {"", AG_DT_UNDEFINED, AG_RANK_UNKNOWN, NULL, AG_MEM_HBM, AG_FMT_ND, NULL, NULL};

/* ------------------------------------------------------------------ nodes */

static void put_sub(writer *w, ag_sub_id s, uint32_t depth);

static void put_node(writer *w, ag_node_id n, uint32_t depth)
{
    const ag_graph *g = w->g;
    indent(w, depth);
    put_name(w, ag_node_name(g, n));
    put(w, " = ", 3);
    put_name(w, ag_node_type(g, n));
    const char *dom = ag_node_domain(g, n);
    if (dom && dom[0]) {
        putc_(w, '@');
        put_name(w, dom);
    }
    putc_(w, '(');
    uint32_t nin = ag_node_num_inputs(g, n), nout = ag_node_num_outputs(g, n);
    for (uint32_t i = 0; i < nin; i++) {
        if (i)
            put(w, ", ", 2);
        ag_port src = ag_node_input_src(g, n, i);
        const ag_tensor_desc *d = ag_node_input_desc_c(g, n, i);
        const ag_tensor_desc *ref = &default_desc;
        if (src.node == AG_NONE) {
            putc_(w, '-');
        } else {
            put_name(w, ag_node_name(g, src.node));
            if (src.index != 0) {
                putc_(w, ':');
                put_u64(w, src.index);
            }
            ref = ag_node_output_desc_c(g, src.node, src.index);
        }
        if (!same_type(d, ref)) {
            put(w, " as ", 4);
            put_desc(w, d, NULL);
        }
        put_attrs(w, d->attrs);
    }
    for (uint32_t k = 0; k < ag_node_num_ctrl_in(g, n); k++) {
        if (nin || k)
            put(w, ", ", 2);
        putc_(w, '^');
        put_name(w, ag_node_name(g, ag_node_ctrl_in(g, n, k)));
    }
    putc_(w, ')');
    if (nout) {
        put(w, " -> (", 5);
        for (uint32_t o = 0; o < nout; o++) {
            const ag_tensor_desc *d = ag_node_output_desc_c(g, n, o);
            if (o)
                put(w, ", ", 2);
            put_desc(w, d, ag_node_attrs_c(g, n));
            put_attrs(w, d->attrs);
        }
        putc_(w, ')');
    }
    put_attrs(w, ag_node_attrs_c(g, n));
    uint32_t nsubs = ag_node_num_subs(g, n);
    if (nsubs) {
        put(w, " {\n", 3);
        for (uint32_t k = 0; k < nsubs; k++) {
            ag_sub_id s = ag_node_sub(g, n, k);
            if (s != AG_NONE && ag_sub_alive(g, s))
                put_sub(w, s, depth + 1);
        }
        indent(w, depth);
        putc_(w, '}');
    }
    putc_(w, '\n');
}

static void put_sub(writer *w, ag_sub_id s, uint32_t depth)
{
    const ag_graph *g = w->g;
    indent(w, depth);
    put(w, "graph ", 6);
    put_name(w, ag_sub_name(g, s));
    put(w, " {\n", 3);
    uint32_t cnt = ag_sub_node_count(g, s);
    for (uint32_t k = 0; k < cnt && w->out.st == AG_OK; k++)
        put_node(w, ag_sub_node_at(g, s, k), depth + 1);
    indent(w, depth);
    put(w, "}\n", 2);
}

ag_text_write_opts ag_text_write_defaults(void)
{
    ag_text_write_opts o;
    o.size = sizeof o;
    o.elide_bytes = 4096;
    return o;
}

ag_status ag_text_write(const ag_graph *g, const ag_text_write_opts *opts, ag_sink sink)
{
    if (!g)
        return AG_EINVAL;
    ag_ctx *ctx = ag_graph_ctx(g);
    if (!sink.write)
        return AG_ERR(ctx, AG_EINVAL, "ag_text_write: sink without a write function");
    ag_text_write_opts o = ag_text_write_defaults();
    if (opts) {
        if (opts->size < offsetof(ag_text_write_opts, elide_bytes) + sizeof opts->elide_bytes)
            return AG_ERR(ctx, AG_EINVAL, "ag_text_write: options size %zu too small", opts->size);
        o.elide_bytes = opts->elide_bytes;
    }
    /* The writer state holds its own output buffer; keep it off the stack of
     * deep callers by allocating it through the hook. */
    writer *w = ag_alloc(ctx, sizeof *w);
    if (!w)
        return AG_OOM(ctx);
    ag_bufout_init(&w->out, sink);
    w->g = g;
    w->ctx = ctx;
    w->elide_bytes = o.elide_bytes;
    put_sub(w, AG_ROOT, 0);
    ag_status st = ag_bufout_flush(&w->out);
    ag_free(ctx, w, sizeof *w);
    return st;
}
