/* Reader of the text IR (.agt): a small lexer and a recursive-descent parser
 * that builds the graph as it reads.  Nodes are created when their statement
 * is read; data and control edges are resolved when the closing brace of
 * their subgraph is reached, so references may point forward and the whole
 * parse stays linear in the input.  Format and grammar: docs/ir.md. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ir/text_internal.h"

enum { T_EOF, T_IDENT, T_STRING, T_NUMBER, T_ARROW, T_PUNCT };

typedef struct tok {
    int kind;
    char ch;        /* T_PUNCT: the character */
    const char *p;  /* text (strings: with their quotes) */
    size_t len;
    uint32_t line, col;
} tok;

typedef struct lexstate {
    const char *cur;
    const char *lstart;
    uint32_t line;
    tok t;
} lexstate;

/* Type and shape of an input anchor given with "as", applied once the edge
 * (which copies the producer's descriptor) has been made. */
typedef struct desc_spec {
    const char *name;
    ag_dtype dtype;
    int32_t rank;
    const int64_t *dims;
    ag_mem_type mem;
    ag_format fmt;
    const ag_tensor *value;
    const char *value_ref;   /* "= @attr": the value is the node's tensor attribute attr */
    uint32_t ref_line, ref_col;
} desc_spec;

/* An output whose value is a tensor attribute of its node ("= @value"). */
typedef struct pend_ref {
    uint32_t out;
    const char *name;
    uint32_t line, col;
} pend_ref;
#define AG_TEXT_MAX_REFS 16

typedef struct pend_in {
    ag_node_id dst;
    uint32_t idx;
    const char *src;
    uint32_t out;
    uint32_t line, col;
    int32_t spec; /* index into specs, or -1 */
} pend_in;

typedef struct pend_ctrl {
    ag_node_id dst;
    const char *src;
    uint32_t line, col;
} pend_ctrl;

typedef struct loc {
    uint32_t line, col;
} loc;

typedef struct parser {
    ag_ctx *ctx;
    const char *file;
    const char *buf, *end;
    lexstate lx;
    ag_graph *g;
    ag_arena scratch; /* names and strings read so far; freed at the end */
    ag_vec pins;      /* pend_in */
    ag_vec pctrl;     /* pend_ctrl */
    ag_vec specs;     /* desc_spec */
    ag_vec locs;      /* loc, indexed by node id */
    /* element buffers reused by every attribute and tensor value */
    ag_vec bytes, i64s, f32s, bools, strs, tens;
    uint32_t depth;
} parser;

#define TK(p) (&(p)->lx.t)

/* ---------------------------------------------------------------- errors */

static ag_status perr_at(parser *p, ag_status code, uint32_t line, uint32_t col, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
static ag_status perr_at(parser *p, ag_status code, uint32_t line, uint32_t col, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return AG_ERR(p->ctx, code, "%s:%u:%u: %s", p->file, line, col, msg);
}

#define PERR(p, t, ...) perr_at((p), AG_EPARSE, (t)->line, (t)->col, __VA_ARGS__)

/* Re-raises a failure of the graph API with the location that caused it;
 * out-of-memory passes through unchanged. */
static ag_status api_err(parser *p, ag_status st, uint32_t line, uint32_t col)
{
    if (st == AG_OK || st == AG_ENOMEM)
        return st;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ag_ctx_errmsg(p->ctx));
    return perr_at(p, st, line, col, "%s", msg);
}

/* Printable excerpt of a token for messages. */
static int tok_show_len(const tok *t)
{
    return t->kind == T_EOF ? 0 : (int)(t->len > 40 ? 40 : t->len);
}
static const char *tok_show(const tok *t)
{
    return t->kind == T_EOF ? "" : t->p;
}

static ag_status expected(parser *p, const char *what)
{
    const tok *t = TK(p);
    if (t->kind == T_EOF)
        return PERR(p, t, "unexpected end of input: expected %s", what);
    return PERR(p, t, "expected %s, got '%.*s'", what, tok_show_len(t), tok_show(t));
}

/* ----------------------------------------------------------------- lexer */

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}
static bool is_hex(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static unsigned hex_val(unsigned char c)
{
    return is_digit(c) ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
}

static uint32_t col_of(const parser *p, const char *s)
{
    return (uint32_t)(s - p->lx.lstart) + 1;
}

/* Scans one string literal starting at the opening quote; checks escapes. */
static ag_status lex_string(parser *p, const char **s)
{
    const char *q = *s + 1;
    for (;;) {
        if (q >= p->end)
            return perr_at(p, AG_EPARSE, p->lx.line, col_of(p, *s), "unterminated string");
        unsigned char c = (unsigned char)*q;
        if (c == '"')
            break;
        if (c == '\n' || c == 0)
            return perr_at(p, AG_EPARSE, p->lx.line, col_of(p, q),
                           c ? "newline in string (write \\n)" : "NUL byte in string");
        if (c == '\\') {
            if (q + 1 >= p->end)
                return perr_at(p, AG_EPARSE, p->lx.line, col_of(p, *s), "unterminated string");
            unsigned char e = (unsigned char)q[1];
            if (e == 'x') {
                if (q + 3 >= p->end || !is_hex((unsigned char)q[2]) || !is_hex((unsigned char)q[3]))
                    return perr_at(p, AG_EPARSE, p->lx.line, col_of(p, q),
                                   "invalid escape: \\x needs two hex digits");
                if (hex_val((unsigned char)q[2]) == 0 && hex_val((unsigned char)q[3]) == 0)
                    return perr_at(p, AG_EPARSE, p->lx.line, col_of(p, q),
                                   "\\x00 is not allowed: strings cannot hold NUL bytes");
                q += 4;
                continue;
            }
            if (e != '\\' && e != '"' && e != 'n' && e != 't' && e != 'r')
                return perr_at(p, AG_EPARSE, p->lx.line, col_of(p, q),
                               "invalid escape '\\%c' (use \\\\, \\\", \\n, \\t, \\r or \\xHH)",
                               e >= 0x20 && e < 0x7f ? e : '?');
            q += 2;
            continue;
        }
        q++;
    }
    *s = q + 1;
    return AG_OK;
}

static ag_status lex_number(parser *p, const char **s)
{
    const char *q = *s;
    if (*q == '-')
        q++;
    if (q + 1 < p->end && q[0] == '0' && (q[1] == 'x' || q[1] == 'X')) {
        q += 2;
        const char *h = q;
        while (q < p->end && is_hex((unsigned char)*q))
            q++;
        if (q == h)
            return perr_at(p, AG_EPARSE, p->lx.line, col_of(p, *s), "malformed number");
    } else {
        while (q < p->end && is_digit((unsigned char)*q))
            q++;
        if (q < p->end && *q == '.') {
            q++;
            while (q < p->end && is_digit((unsigned char)*q))
                q++;
        }
        if (q < p->end && (*q == 'e' || *q == 'E')) {
            q++;
            if (q < p->end && (*q == '+' || *q == '-'))
                q++;
            const char *d = q;
            while (q < p->end && is_digit((unsigned char)*q))
                q++;
            if (q == d)
                return perr_at(p, AG_EPARSE, p->lx.line, col_of(p, *s), "malformed number");
        }
    }
    if (q < p->end && ag_text_name_char((unsigned char)*q))
        return perr_at(p, AG_EPARSE, p->lx.line, col_of(p, *s), "malformed number");
    *s = q;
    return AG_OK;
}

/* Advances to the next token. */
static ag_status next(parser *p)
{
    lexstate *lx = &p->lx;
    const char *s = lx->cur;
    for (;;) {
        if (s >= p->end)
            break;
        unsigned char c = (unsigned char)*s;
        if (c == ' ' || c == '\t' || c == '\r') {
            s++;
        } else if (c == '\n') {
            s++;
            lx->line++;
            lx->lstart = s;
        } else if (c == '#') {
            while (s < p->end && *s != '\n')
                s++;
        } else {
            break;
        }
    }
    tok *t = &lx->t;
    t->p = s;
    t->line = lx->line;
    t->col = col_of(p, s);
    t->ch = 0;
    if (s >= p->end) {
        t->kind = T_EOF;
        t->len = 0;
        lx->cur = s;
        return AG_OK;
    }
    unsigned char c = (unsigned char)*s;
    const char *e = s;
    if (ag_text_name_start(c)) {
        while (e < p->end && ag_text_name_char((unsigned char)*e))
            e++;
        t->kind = T_IDENT;
    } else if (c == '"') {
        AG_TRY(lex_string(p, &e));
        t->kind = T_STRING;
    } else if (is_digit(c) || (c == '-' && s + 1 < p->end && is_digit((unsigned char)s[1]))) {
        AG_TRY(lex_number(p, &e));
        t->kind = T_NUMBER;
    } else if (c == '-' && s + 1 < p->end && s[1] == '>') {
        e = s + 2;
        t->kind = T_ARROW;
    } else if (strchr("=(),:<>[]{}^@?-", c) != NULL) {
        e = s + 1;
        t->kind = T_PUNCT;
        t->ch = (char)c;
    } else {
        if (c >= 0x20 && c < 0x7f)
            return perr_at(p, AG_EPARSE, lx->line, t->col, "unexpected character '%c'", c);
        return perr_at(p, AG_EPARSE, lx->line, t->col, "unexpected byte 0x%02x", c);
    }
    t->len = (size_t)(e - s);
    lx->cur = e;
    return AG_OK;
}

static bool is_punct(const parser *p, char ch)
{
    return p->lx.t.kind == T_PUNCT && p->lx.t.ch == ch;
}
static bool is_ident(const parser *p, const char *word)
{
    const tok *t = &p->lx.t;
    return t->kind == T_IDENT && t->len == strlen(word) && memcmp(t->p, word, t->len) == 0;
}

static ag_status expect_punct(parser *p, char ch)
{
    if (!is_punct(p, ch)) {
        char what[8] = {'\'', ch, '\'', 0};
        return expected(p, what);
    }
    return next(p);
}

/* Looks at the token after the current one without consuming anything. */
static ag_status peek(parser *p, tok *out)
{
    lexstate saved = p->lx;
    ag_status st = next(p);
    *out = p->lx.t;
    p->lx = saved;
    return st;
}

/* ------------------------------------------------------ names and strings */

static ag_status oom(parser *p)
{
    return AG_OOM(p->ctx);
}

/* Decodes the current string token into the scratch arena. */
static ag_status unescape(parser *p, const char **out)
{
    const tok *t = TK(p);
    char *d = ag_arena_alloc(&p->scratch, t->len);
    if (!d)
        return oom(p);
    size_t k = 0;
    for (const char *q = t->p + 1; q < t->p + t->len - 1;) {
        if (*q != '\\') {
            d[k++] = *q++;
            continue;
        }
        switch (q[1]) {
        case 'n': d[k++] = '\n'; break;
        case 't': d[k++] = '\t'; break;
        case 'r': d[k++] = '\r'; break;
        case 'x': d[k++] = (char)(hex_val((unsigned char)q[2]) << 4 | hex_val((unsigned char)q[3])); q += 2; break;
        default: d[k++] = q[1]; break;
        }
        q += 2;
    }
    d[k] = 0;
    *out = d;
    return AG_OK;
}

/* A bare or quoted name; what names the role for errors. */
static ag_status parse_name(parser *p, const char *what, const char **out)
{
    const tok *t = TK(p);
    if (t->kind == T_IDENT) {
        char *s = ag_arena_strndup(&p->scratch, t->p, t->len);
        if (!s)
            return oom(p);
        *out = s;
    } else if (t->kind == T_STRING) {
        AG_TRY(unescape(p, out));
    } else {
        return expected(p, what);
    }
    return next(p);
}

/* ---------------------------------------------------------------- numbers */

static bool tok_is_float(const tok *t)
{
    if (t->len > 2 && (t->p[t->p[0] == '-'] == '0') && (t->p[(t->p[0] == '-') + 1] | 0x20) == 'x')
        return false;
    for (size_t i = 0; i < t->len; i++)
        if (t->p[i] == '.' || t->p[i] == 'e' || t->p[i] == 'E')
            return true;
    return false;
}

/* Integer token -> sign and magnitude. */
static ag_status tok_int(parser *p, const tok *t, bool *neg, uint64_t *mag)
{
    const char *s = t->p, *e = t->p + t->len;
    *neg = false;
    if (s < e && *s == '-') {
        *neg = true;
        s++;
    }
    unsigned base = 10;
    if (e - s > 2 && s[0] == '0' && (s[1] | 0x20) == 'x') {
        base = 16;
        s += 2;
    }
    uint64_t v = 0;
    for (; s < e; s++) {
        unsigned d = hex_val((unsigned char)*s);
        if (v > (UINT64_MAX - d) / base)
            return PERR(p, t, "integer '%.*s' out of range", tok_show_len(t), tok_show(t));
        v = v * base + d;
    }
    *mag = v;
    return AG_OK;
}

static ag_status tok_i64(parser *p, const tok *t, int64_t *out)
{
    if (t->kind != T_NUMBER || tok_is_float(t))
        return t->kind == T_NUMBER ? PERR(p, t, "expected an integer, got '%.*s'", tok_show_len(t), tok_show(t))
                                   : expected(p, "an integer");
    bool neg;
    uint64_t mag;
    AG_TRY(tok_int(p, t, &neg, &mag));
    if (mag > (uint64_t)INT64_MAX + (neg ? 1u : 0u))
        return PERR(p, t, "integer '%.*s' out of range", tok_show_len(t), tok_show(t));
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return AG_OK;
}

/* Copies a number token into a NUL-terminated buffer for strtof/strtod. */
static ag_status tok_cstr(parser *p, const tok *t, char *buf, size_t cap)
{
    if (t->len >= cap)
        return PERR(p, t, "number too long");
    memcpy(buf, t->p, t->len);
    buf[t->len] = 0;
    return AG_OK;
}

/* Reads a float (f32 when single, else f64) at the current token: a number,
 * inf, nan, nan(0xBITS), with an optional leading '-' for the words.
 * Advances past it. */
static ag_status parse_real(parser *p, bool single, double *d, float *f)
{
    tok start = *TK(p);
    bool neg = false;
    if (is_punct(p, '-')) {
        neg = true;
        AG_TRY(next(p));
    }
    const tok *t = TK(p);
    if (t->kind == T_NUMBER && !neg) {
        char buf[80];
        AG_TRY(tok_cstr(p, t, buf, sizeof buf));
        if (!tok_is_float(t)) {
            int64_t iv;
            AG_TRY(tok_i64(p, t, &iv));
            if (single)
                *f = (float)iv;
            else
                *d = (double)iv;
            return next(p);
        }
        errno = 0;
        if (single)
            *f = strtof(buf, NULL);
        else
            *d = strtod(buf, NULL);
        if (errno == ERANGE && (single ? isinf(*f) : isinf(*d)))
            return PERR(p, t, "float '%s' out of range", buf);
        return next(p);
    }
    if (t->kind == T_IDENT && t->len == 3 && memcmp(t->p, "inf", 3) == 0) {
        if (single)
            *f = neg ? -INFINITY : INFINITY;
        else
            *d = neg ? -(double)INFINITY : (double)INFINITY;
        return next(p);
    }
    if (t->kind == T_IDENT && t->len == 3 && memcmp(t->p, "nan", 3) == 0) {
        AG_TRY(next(p));
        if (is_punct(p, '(')) {
            if (neg)
                return PERR(p, &start, "nan(0x...) gives all bits: write it without '-'");
            AG_TRY(next(p));
            tok bt = *TK(p);
            bool bneg;
            uint64_t bits;
            if (bt.kind != T_NUMBER || tok_is_float(&bt) || bt.p[0] == '-')
                return expected(p, "the bits of the NaN in hex");
            AG_TRY(tok_int(p, &bt, &bneg, &bits));
            if (single) {
                uint32_t b32 = (uint32_t)bits;
                if (bits > UINT32_MAX || (b32 & 0x7f800000u) != 0x7f800000u || (b32 & 0x7fffffu) == 0)
                    return PERR(p, &bt, "0x%llx is not the bit pattern of a 32-bit NaN", (unsigned long long)bits);
                memcpy(f, &b32, 4);
            } else {
                if ((bits & 0x7ff0000000000000ull) != 0x7ff0000000000000ull || (bits & 0xfffffffffffffull) == 0)
                    return PERR(p, &bt, "0x%llx is not the bit pattern of a 64-bit NaN", (unsigned long long)bits);
                memcpy(d, &bits, 8);
            }
            AG_TRY(next(p));
            return expect_punct(p, ')');
        }
        if (single) {
            uint32_t b32 = neg ? 0xffc00000u : 0x7fc00000u;
            memcpy(f, &b32, 4);
        } else {
            uint64_t b64 = neg ? 0xfff8000000000000ull : 0x7ff8000000000000ull;
            memcpy(d, &b64, 8);
        }
        return AG_OK;
    }
    return expected(p, "a floating-point number");
}

/* ---------------------------------------------------------------- tensors */

static ag_status push(parser *p, ag_vec *v, size_t elem, const void *item)
{
    if (ag_vec_push(p->ctx, v, elem, item) != AG_OK)
        return oom(p);
    return AG_OK;
}

static ag_status push_le(parser *p, uint64_t v, unsigned nbytes)
{
    for (unsigned k = 0; k < nbytes; k++) {
        uint8_t b = (uint8_t)(v >> (8 * k));
        AG_TRY(push(p, &p->bytes, 1, &b));
    }
    return AG_OK;
}

static bool dtype_is_int(ag_dtype dt, unsigned *bytes, bool *sgn)
{
    switch (dt) {
    case AG_DT_I8: *bytes = 1; *sgn = true; return true;
    case AG_DT_U8: *bytes = 1; *sgn = false; return true;
    case AG_DT_I16: *bytes = 2; *sgn = true; return true;
    case AG_DT_U16: *bytes = 2; *sgn = false; return true;
    case AG_DT_I32: *bytes = 4; *sgn = true; return true;
    case AG_DT_U32: *bytes = 4; *sgn = false; return true;
    case AG_DT_I64: *bytes = 8; *sgn = true; return true;
    case AG_DT_U64: *bytes = 8; *sgn = false; return true;
    default: return false;
    }
}

/* One typed element of a tensor value list, appended to p->bytes. */
static ag_status parse_tensor_elem(parser *p, ag_dtype dt)
{
    const tok *t = TK(p);
    unsigned nb;
    bool sgn;
    if (dt == AG_DT_BOOL) {
        uint8_t b;
        if (is_ident(p, "true"))
            b = 1;
        else if (is_ident(p, "false"))
            b = 0;
        else
            return expected(p, "true or false");
        AG_TRY(push(p, &p->bytes, 1, &b));
        return next(p);
    }
    if (dtype_is_int(dt, &nb, &sgn)) {
        if (t->kind != T_NUMBER || tok_is_float(t))
            return t->kind == T_NUMBER ? PERR(p, t, "expected an integer, got '%.*s'", tok_show_len(t), tok_show(t))
                                       : expected(p, "an integer");
        bool neg;
        uint64_t mag;
        AG_TRY(tok_int(p, t, &neg, &mag));
        uint64_t lim_pos = sgn ? (UINT64_MAX >> (65 - 8 * nb)) : (UINT64_MAX >> (64 - 8 * nb));
        uint64_t lim_neg = sgn ? lim_pos + 1 : 0;
        if ((neg && mag > lim_neg) || (!neg && mag > lim_pos))
            return PERR(p, t, "%.*s is out of range for %s", tok_show_len(t), tok_show(t), ag_dtype_name(dt));
        AG_TRY(push_le(p, neg ? 0 - mag : mag, nb));
        return next(p);
    }
    if (dt == AG_DT_F32) {
        float f;
        double unused;
        AG_TRY(parse_real(p, true, &unused, &f));
        uint32_t b;
        memcpy(&b, &f, 4);
        return push_le(p, b, 4);
    }
    if (dt == AG_DT_F64) {
        float unused;
        double d;
        AG_TRY(parse_real(p, false, &d, &unused));
        uint64_t b;
        memcpy(&b, &d, 8);
        return push_le(p, b, 8);
    }
    return PERR(p, t, "values of dtype %s must be written as raw bytes: x\"hex\"", ag_dtype_name(dt));
}

static ag_status parse_dims(parser *p, bool allow_unknown, int32_t *rank, int64_t *dims)
{
    AG_TRY(expect_punct(p, '['));
    int32_t r = 0;
    while (!is_punct(p, ']')) {
        if (r > 0)
            AG_TRY(expect_punct(p, ','));
        const tok *t = TK(p);
        if (r == AG_MAX_RANK)
            return PERR(p, t, "rank exceeds the maximum of %d", AG_MAX_RANK);
        if (allow_unknown && is_punct(p, '?')) {
            dims[r++] = AG_DIM_UNKNOWN;
            AG_TRY(next(p));
            continue;
        }
        if (t->kind != T_NUMBER)
            return expected(p, allow_unknown ? "a dimension (a number or ?)" : "a dimension");
        int64_t v = 0;
        if (t->p[0] == '-')
            return PERR(p, t, "negative dimension %.*s%s", tok_show_len(t), tok_show(t),
                        allow_unknown ? " (write ? for an unknown one)" : "");
        AG_TRY(tok_i64(p, t, &v));
        if (v > AG_MAX_DIM)
            return PERR(p, t, "dimension %lld exceeds the maximum of %lld", (long long)v, (long long)AG_MAX_DIM);
        dims[r++] = v;
        AG_TRY(next(p));
    }
    *rank = r;
    return next(p);
}

static ag_status parse_dtype(parser *p, bool allow_unknown, ag_dtype *dt)
{
    const tok *t = TK(p);
    if (allow_unknown && is_punct(p, '?')) {
        *dt = AG_DT_UNDEFINED;
        return next(p);
    }
    if (t->kind != T_IDENT)
        return expected(p, "a data type");
    if (!ag_dtype_parse(t->p, t->len, dt) || (*dt == AG_DT_UNDEFINED && !allow_unknown))
        return PERR(p, t, "unknown data type '%.*s'", tok_show_len(t), tok_show(t));
    return next(p);
}

/* Tensor body after its type: {values}, x"hex" or elided 0xDIGEST.  Makes
 * the graph-owned tensor. */
static ag_status parse_tensor_body(parser *p, ag_dtype dt, int32_t rank, const int64_t *dims, const ag_tensor **out)
{
    tok start = *TK(p);
    ag_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    t.dims = dims;
    uint64_t numel = ag_tensor_numel(&t);
    unsigned bits = ag_dtype_bits(dt);
    if (numel == UINT64_MAX || (bits && numel > (UINT64_MAX - 7) / bits))
        return PERR(p, &start, "tensor %s with %d dims is too large", ag_dtype_name(dt), rank);
    uint64_t nbytes = dt == AG_DT_STRING ? 0 : (numel * bits + 7) / 8;
    p->bytes.len = 0;
    p->strs.len = 0;
    if (is_ident(p, "elided")) {
        AG_TRY(next(p));
        const tok *dg = TK(p);
        bool neg;
        uint64_t v;
        if (dg->kind != T_NUMBER || tok_is_float(dg) || dg->p[0] == '-')
            return expected(p, "the digest (0x and 16 hex digits)");
        AG_TRY(tok_int(p, dg, &neg, &v));
        t.digest = v;
        t.nbytes = nbytes;
        AG_TRY(next(p));
    } else if (is_ident(p, "x")) {
        AG_TRY(next(p));
        const tok *h = TK(p);
        if (h->kind != T_STRING)
            return expected(p, "a string of hex digits");
        if (dt == AG_DT_STRING)
            return PERR(p, h, "string tensors take a list of strings, not raw bytes");
        size_t nhex = h->len - 2;
        if (nhex / 2 > UINT32_MAX)
            return PERR(p, h, "raw tensor value too large");
        if (nhex % 2 || nhex / 2 != nbytes)
            return PERR(p, h, "tensor %s needs %llu bytes (%llu hex digits), got %zu hex digits",
                        ag_dtype_name(dt), (unsigned long long)nbytes, (unsigned long long)nbytes * 2, nhex);
        if (ag_vec_reserve(p->ctx, &p->bytes, 1, (uint32_t)(nhex / 2)) != AG_OK)
            return oom(p);
        for (size_t k = 0; k < nhex; k += 2) {
            unsigned char a = (unsigned char)h->p[1 + k], b = (unsigned char)h->p[2 + k];
            if (!is_hex(a) || !is_hex(b))
                return perr_at(p, AG_EPARSE, h->line, h->col + 1 + (uint32_t)k, "invalid hex digit");
            ((uint8_t *)p->bytes.data)[k / 2] = (uint8_t)(hex_val(a) << 4 | hex_val(b));
        }
        p->bytes.len = (uint32_t)(nhex / 2);
        t.data = p->bytes.data ? p->bytes.data : "";
        t.nbytes = nbytes;
        AG_TRY(next(p));
    } else if (is_punct(p, '{')) {
        AG_TRY(next(p));
        uint64_t count = 0;
        while (!is_punct(p, '}')) {
            if (count > 0)
                AG_TRY(expect_punct(p, ','));
            if (count == numel)
                return PERR(p, TK(p), "too many values: tensor %s has %llu elements", ag_dtype_name(dt),
                            (unsigned long long)numel);
            if (dt == AG_DT_STRING) {
                const char *s;
                if (TK(p)->kind != T_STRING)
                    return expected(p, "a string");
                AG_TRY(unescape(p, &s));
                AG_TRY(push(p, &p->strs, sizeof s, &s));
                AG_TRY(next(p));
            } else {
                AG_TRY(parse_tensor_elem(p, dt));
            }
            count++;
        }
        if (count != numel)
            return PERR(p, TK(p), "too few values: tensor %s has %llu elements, got %llu", ag_dtype_name(dt),
                        (unsigned long long)numel, (unsigned long long)count);
        AG_TRY(next(p));
        if (dt == AG_DT_STRING) {
            static const char *const no_strings[1] = {""};
            t.strings = p->strs.data ? (const char *const *)p->strs.data : no_strings;
        } else {
            t.data = p->bytes.data ? p->bytes.data : "";
            t.nbytes = nbytes;
        }
    } else {
        return expected(p, "a tensor value: {values}, x\"hex\" or elided 0xDIGEST");
    }
    return api_err(p, ag_graph_make_tensor(p->g, &t, out), start.line, start.col);
}

/* DTYPE[dims] BODY */
static ag_status parse_tensor(parser *p, const ag_tensor **out)
{
    ag_dtype dt;
    int32_t rank;
    int64_t dims[AG_MAX_RANK];
    AG_TRY(parse_dtype(p, false, &dt));
    AG_TRY(parse_dims(p, false, &rank, dims));
    return parse_tensor_body(p, dt, rank, dims, out);
}

/* ------------------------------------------------------------- attributes */

static const struct {
    const char *name;
    ag_attr_kind kind;
} kind_names[] = {
    {"bool", AG_ATTR_BOOL},     {"int", AG_ATTR_INT},       {"float", AG_ATTR_FLOAT},
    {"string", AG_ATTR_STRING}, {"tensor", AG_ATTR_TENSOR}, {"bools", AG_ATTR_BOOLS},
    {"ints", AG_ATTR_INTS},     {"floats", AG_ATTR_FLOATS}, {"strings", AG_ATTR_STRINGS},
    {"tensors", AG_ATTR_TENSORS},
};

static ag_attr_kind list_elem_kind(ag_attr_kind k)
{
    return k >= AG_ATTR_BOOLS ? (ag_attr_kind)(k - AG_ATTR_BOOLS + AG_ATTR_BOOL) : k;
}

/* True when the current token starts a tensor literal (DTYPE '['). */
static ag_status at_tensor(parser *p, bool *yes)
{
    ag_dtype dt;
    *yes = false;
    if (TK(p)->kind != T_IDENT || !ag_dtype_parse(TK(p)->p, TK(p)->len, &dt))
        return AG_OK;
    tok nx;
    AG_TRY(peek(p, &nx));
    *yes = nx.kind == T_PUNCT && nx.ch == '[';
    return AG_OK;
}

/* True at a token only a float can start with: 1.5, inf, nan, '-'. */
static bool starts_float(const parser *p)
{
    const tok *t = &p->lx.t;
    return (t->kind == T_NUMBER && tok_is_float(t)) || is_ident(p, "inf") || is_ident(p, "nan") || is_punct(p, '-');
}

/* Guesses the kind of a scalar from its first token (0 if none fits). */
static ag_status infer_scalar_kind(parser *p, ag_attr_kind *k)
{
    const tok *t = TK(p);
    bool ten;
    *k = 0;
    if (t->kind == T_STRING)
        *k = AG_ATTR_STRING;
    else if (t->kind == T_NUMBER)
        *k = tok_is_float(t) ? AG_ATTR_FLOAT : AG_ATTR_INT;
    else if (is_ident(p, "true") || is_ident(p, "false"))
        *k = AG_ATTR_BOOL;
    else if (starts_float(p))
        *k = AG_ATTR_FLOAT;
    else {
        AG_TRY(at_tensor(p, &ten));
        if (ten)
            *k = AG_ATTR_TENSOR;
    }
    return AG_OK;
}

/* One scalar of kind k, appended to the matching element buffer. */
static ag_status parse_scalar(parser *p, ag_attr_kind k)
{
    switch (k) {
    case AG_ATTR_BOOL: {
        bool b;
        if (is_ident(p, "true"))
            b = true;
        else if (is_ident(p, "false"))
            b = false;
        else
            return expected(p, "true or false");
        AG_TRY(push(p, &p->bools, sizeof b, &b));
        return next(p);
    }
    case AG_ATTR_INT: {
        int64_t v;
        AG_TRY(tok_i64(p, TK(p), &v));
        AG_TRY(push(p, &p->i64s, sizeof v, &v));
        return next(p);
    }
    case AG_ATTR_FLOAT: {
        float f;
        double unused;
        AG_TRY(parse_real(p, true, &unused, &f));
        return push(p, &p->f32s, sizeof f, &f);
    }
    case AG_ATTR_STRING: {
        const char *s;
        if (TK(p)->kind != T_STRING)
            return expected(p, "a string");
        AG_TRY(unescape(p, &s));
        AG_TRY(push(p, &p->strs, sizeof s, &s));
        return next(p);
    }
    case AG_ATTR_TENSOR: {
        const ag_tensor *t;
        bool ten;
        AG_TRY(at_tensor(p, &ten));
        if (!ten)
            return expected(p, "a tensor (DTYPE[dims] {values})");
        AG_TRY(parse_tensor(p, &t));
        return push(p, &p->tens, sizeof t, &t);
    }
    default:
        return expected(p, "a value");
    }
}

/* NAME '=' [KIND] VALUE, set on attrs. */
static ag_status parse_attr(parser *p, ag_attrs *attrs)
{
    tok ntok = *TK(p);
    const char *name;
    AG_TRY(parse_name(p, "an attribute name", &name));
    if (ag_attrs_find(attrs, name))
        return PERR(p, &ntok, "duplicate attribute '%s'", name);
    AG_TRY(expect_punct(p, '='));

    ag_attr_kind kind = 0;
    if (TK(p)->kind == T_IDENT) {
        bool ten;
        AG_TRY(at_tensor(p, &ten));
        for (size_t k = 0; !ten && k < sizeof kind_names / sizeof kind_names[0]; k++) {
            if (is_ident(p, kind_names[k].name)) {
                kind = kind_names[k].kind;
                AG_TRY(next(p));
                break;
            }
        }
    }
    p->bools.len = p->i64s.len = p->f32s.len = p->strs.len = p->tens.len = 0;
    bool list = kind >= AG_ATTR_BOOLS;
    if (kind == 0 && is_punct(p, '['))
        list = true;
    uint32_t count = 1;
    if (list) {
        tok lb = *TK(p);
        AG_TRY(expect_punct(p, '['));
        ag_attr_kind ek = kind ? list_elem_kind(kind) : 0;
        bool inferred = kind == 0;
        count = 0;
        while (!is_punct(p, ']')) {
            if (count > 0)
                AG_TRY(expect_punct(p, ','));
            if (ek == 0) {
                AG_TRY(infer_scalar_kind(p, &ek));
                if (ek == 0)
                    return expected(p, "a list element");
            } else if (inferred && ek == AG_ATTR_INT && starts_float(p)) {
                /* [1, 2.5]: the list is floats after all. */
                for (uint32_t k = 0; k < p->i64s.len; k++) {
                    float f = (float)AG_VEC_AT(p->i64s, int64_t, k);
                    AG_TRY(push(p, &p->f32s, sizeof f, &f));
                }
                ek = AG_ATTR_FLOAT;
            }
            AG_TRY(parse_scalar(p, ek));
            count++;
        }
        if (ek == 0)
            return PERR(p, &lb, "an empty list needs its kind: write ints [], floats [], strings [], bools [] or tensors []");
        AG_TRY(next(p));
        kind = (ag_attr_kind)(ek - AG_ATTR_BOOL + AG_ATTR_BOOLS);
    } else {
        if (kind == 0) {
            AG_TRY(infer_scalar_kind(p, &kind));
            if (kind == 0)
                return expected(p, "an attribute value");
        }
        AG_TRY(parse_scalar(p, kind));
    }

    ag_attr a;
    memset(&a, 0, sizeof a);
    a.name = name;
    a.kind = kind;
    a.count = count;
    switch (kind) {
    case AG_ATTR_BOOL: a.v.b = AG_VEC_AT(p->bools, bool, 0); break;
    case AG_ATTR_INT: a.v.i = AG_VEC_AT(p->i64s, int64_t, 0); break;
    case AG_ATTR_FLOAT: a.v.f = AG_VEC_AT(p->f32s, float, 0); break;
    case AG_ATTR_STRING: a.v.s = AG_VEC_AT(p->strs, const char *, 0); break;
    case AG_ATTR_TENSOR: a.v.t = AG_VEC_AT(p->tens, const ag_tensor *, 0); break;
    case AG_ATTR_BOOLS: a.v.bs = p->bools.data; break;
    case AG_ATTR_INTS: a.v.is = p->i64s.data; break;
    case AG_ATTR_FLOATS: a.v.fs = p->f32s.data; break;
    case AG_ATTR_STRINGS: a.v.ss = p->strs.data; break;
    case AG_ATTR_TENSORS: a.v.ts = p->tens.data; break;
    }
    return api_err(p, ag_attrs_set(p->g, attrs, &a), ntok.line, ntok.col);
}

/* '<' [attr {',' attr}] '>' */
static ag_status parse_attrs(parser *p, ag_attrs *attrs)
{
    AG_TRY(expect_punct(p, '<'));
    bool first = true;
    while (!is_punct(p, '>')) {
        if (!first)
            AG_TRY(expect_punct(p, ','));
        first = false;
        AG_TRY(parse_attr(p, attrs));
    }
    return next(p);
}

/* ------------------------------------------------------------ descriptors */

/* TYPESHAPE {modifier}: dtype and shape, then in any order a value name
 * (string), a memory type, a format and '=' VALUE.  dims must hold
 * AG_MAX_RANK entries. */
static ag_status parse_desc(parser *p, desc_spec *d, int64_t *dims)
{
    memset(d, 0, sizeof *d);
    d->name = "";
    d->mem = AG_MEM_HBM;
    d->fmt = AG_FMT_ND;
    d->dims = dims;
    AG_TRY(parse_dtype(p, true, &d->dtype));
    d->rank = AG_RANK_UNKNOWN;
    if (is_punct(p, '['))
        AG_TRY(parse_dims(p, true, &d->rank, dims));
    bool have_name = false, have_mem = false, have_fmt = false;
    for (;;) {
        const tok *t = TK(p);
        if (t->kind == T_STRING) {
            if (have_name)
                return PERR(p, t, "the value name is given twice");
            have_name = true;
            AG_TRY(unescape(p, &d->name));
            AG_TRY(next(p));
        } else if (t->kind == T_IDENT) {
            if (ag_mem_type_parse(t->p, t->len, &d->mem)) {
                if (have_mem)
                    return PERR(p, t, "the memory type is given twice");
                have_mem = true;
            } else if (ag_format_parse(t->p, t->len, &d->fmt)) {
                if (have_fmt)
                    return PERR(p, t, "the format is given twice");
                have_fmt = true;
            } else {
                return PERR(p, t, "'%.*s' is neither a memory type (hbm, p2p, host) nor a format (ND, NCHW, ...)",
                            tok_show_len(t), tok_show(t));
            }
            AG_TRY(next(p));
        } else if (is_punct(p, '=')) {
            if (d->value)
                return PERR(p, t, "the value is given twice");
            if (d->value || d->value_ref)
                return PERR(p, t, "the value is given twice");
            tok eq = *t;
            AG_TRY(next(p));
            if (is_punct(p, '@')) {
                AG_TRY(next(p));
                d->ref_line = TK(p)->line;
                d->ref_col = TK(p)->col;
                AG_TRY(parse_name(p, "the name of a tensor attribute of the node", &d->value_ref));
            } else if (is_punct(p, '{') || is_ident(p, "x") || is_ident(p, "elided")) {
                /* Shorthand: the value has the descriptor's type and shape. */
                bool known = d->dtype != AG_DT_UNDEFINED && d->rank >= 0;
                for (int32_t k = 0; known && k < d->rank; k++)
                    known = dims[k] >= 0;
                if (!known)
                    return PERR(p, &eq, "a value without its own type needs a known dtype and shape; "
                                        "write = DTYPE[dims] {...}");
                AG_TRY(parse_tensor_body(p, d->dtype, d->rank, dims, &d->value));
            } else {
                AG_TRY(parse_tensor(p, &d->value));
            }
        } else {
            return AG_OK;
        }
    }
}

static ag_status apply_desc(parser *p, ag_tensor_desc *td, const desc_spec *d, uint32_t line, uint32_t col)
{
    td->dtype = d->dtype;
    td->mem_type = d->mem;
    td->format = d->fmt;
    AG_TRY(api_err(p, ag_desc_set_name(p->g, td, d->name), line, col));
    AG_TRY(api_err(p, ag_desc_set_shape(p->g, td, d->rank, d->dims), line, col));
    return api_err(p, ag_desc_set_value(p->g, td, d->value), line, col);
}

/* ------------------------------------------------------------------ nodes */

/* Counts the data inputs and outputs of the statement ahead without
 * building anything, so the node can be made with its final anchor counts
 * (growing anchors one by one would be quadratic). */
static ag_status prescan(parser *p, uint32_t *nin, uint32_t *nout)
{
    lexstate saved = p->lx;
    ag_status st = AG_OK;
    *nin = *nout = 0;
    for (int part = 0; part < 2; part++) {
        uint32_t n = 0, depth = 0;
        bool item = false, ctrl = false;
        if (!is_punct(p, '('))
            break;
        if ((st = next(p)) != AG_OK)
            goto out;
        for (;;) {
            const tok *t = TK(p);
            if (t->kind == T_EOF) {
                if (item && !ctrl)
                    n++;
                break;
            }
            if (t->kind == T_PUNCT) {
                if (depth == 0 && t->ch == ')') {
                    if (item && !ctrl)
                        n++;
                    break;
                }
                if (depth == 0 && t->ch == ',') {
                    if (item && !ctrl)
                        n++;
                    item = ctrl = false;
                    if ((st = next(p)) != AG_OK)
                        goto out;
                    continue;
                }
                if (!item && t->ch == '^')
                    ctrl = true;
                if (strchr("([{<", t->ch))
                    depth++;
                else if (strchr(")]}>", t->ch) && depth > 0)
                    depth--;
            }
            item = true;
            if ((st = next(p)) != AG_OK)
                goto out;
        }
        if (part == 0)
            *nin = n;
        else
            *nout = n;
        if (!is_punct(p, ')') || (st = next(p)) != AG_OK)
            break;
        if (part == 0) {
            if (p->lx.t.kind != T_ARROW)
                break;
            if ((st = next(p)) != AG_OK)
                goto out;
        }
    }
out:
    p->lx = saved;
    return st;
}

static ag_status set_loc(parser *p, ag_node_id n, const tok *t)
{
    loc none = {0, 0};
    while (p->locs.len <= n)
        AG_TRY(push(p, &p->locs, sizeof none, &none));
    AG_VEC_AT(p->locs, loc, n) = (loc){t->line, t->col};
    return AG_OK;
}

static ag_status parse_body(parser *p, ag_sub_id s, const tok *open);

/* One input list item: '^'NAME, '-' or NAME[:INDEX], then [as DESC] [<attrs>]. */
static ag_status parse_input(parser *p, ag_node_id n, uint32_t *idx)
{
    tok it = *TK(p);
    if (is_punct(p, '^')) {
        AG_TRY(next(p));
        pend_ctrl pc = {n, NULL, TK(p)->line, TK(p)->col};
        AG_TRY(parse_name(p, "a node name after '^'", &pc.src));
        return push(p, &p->pctrl, sizeof pc, &pc);
    }
    uint32_t i = (*idx)++;
    if (i >= ag_node_num_inputs(p->g, n))
        return PERR(p, &it, "malformed input list");
    pend_in pi = {n, i, NULL, 0, it.line, it.col, -1};
    if (is_punct(p, '-')) {
        AG_TRY(next(p));
    } else {
        AG_TRY(parse_name(p, "an input: a node name or - for none", &pi.src));
        if (is_punct(p, ':')) {
            AG_TRY(next(p));
            const tok *t = TK(p);
            int64_t v;
            if (t->kind != T_NUMBER || t->p[0] == '-')
                return expected(p, "an output index");
            AG_TRY(tok_i64(p, t, &v));
            if (v > UINT32_MAX)
                return PERR(p, t, "output index %lld out of range", (long long)v);
            pi.out = (uint32_t)v;
            AG_TRY(next(p));
        }
    }
    if (is_ident(p, "as")) {
        tok as = *TK(p);
        AG_TRY(next(p));
        desc_spec d;
        int64_t dims[AG_MAX_RANK];
        AG_TRY(parse_desc(p, &d, dims));
        if (d.value_ref)
            return perr_at(p, AG_EPARSE, d.ref_line, d.ref_col,
                           "a value given as @%s can only stand on an output descriptor", d.value_ref);
        if (!pi.src) {
            AG_TRY(apply_desc(p, ag_node_input_desc(p->g, n, i), &d, as.line, as.col));
        } else {
            if (d.rank > 0) {
                d.dims = ag_arena_memdup(&p->scratch, dims, sizeof(int64_t) * (size_t)d.rank);
                if (!d.dims)
                    return oom(p);
            }
            pi.spec = (int32_t)p->specs.len;
            AG_TRY(push(p, &p->specs, sizeof d, &d));
        }
    }
    if (is_punct(p, '<'))
        AG_TRY(parse_attrs(p, ag_node_input_desc(p->g, n, i)->attrs));
    if (pi.src)
        AG_TRY(push(p, &p->pins, sizeof pi, &pi));
    return AG_OK;
}

/* NAME '=' TYPE ['@' DOMAIN] '(' inputs ')' ['->' '(' outputs ')'] [<attrs>]
 * ['{' {graph NAME '{' body '}'} '}'] */
static ag_status parse_node(parser *p, ag_sub_id s)
{
    pend_ref refs[AG_TEXT_MAX_REFS];
    uint32_t nrefs = 0;
    tok ntok = *TK(p);
    const char *name, *type, *domain = NULL;
    AG_TRY(parse_name(p, "a node name", &name));
    if (!*name)
        return PERR(p, &ntok, "empty node name");
    ag_node_id prev = ag_sub_find_node(p->g, s, name);
    if (prev != AG_NONE) {
        loc l = prev < p->locs.len ? AG_VEC_AT(p->locs, loc, prev) : (loc){0, 0};
        return PERR(p, &ntok, "duplicate node name '%s' in graph '%s' (first defined at line %u)", name,
                    ag_sub_name(p->g, s), l.line);
    }
    AG_TRY(expect_punct(p, '='));
    AG_TRY(parse_name(p, "a node type", &type));
    if (is_punct(p, '@')) {
        AG_TRY(next(p));
        AG_TRY(parse_name(p, "a domain", &domain));
    }
    if (!is_punct(p, '('))
        return expected(p, "'(' starting the input list");
    uint32_t nin, nout;
    AG_TRY(prescan(p, &nin, &nout));
    ag_node_id n;
    AG_TRY(api_err(p, ag_graph_add_node(p->g, s, type, name, nin, nout, &n), ntok.line, ntok.col));
    AG_TRY(set_loc(p, n, &ntok));
    if (domain)
        AG_TRY(api_err(p, ag_node_set_domain(p->g, n, domain), ntok.line, ntok.col));

    AG_TRY(next(p)); /* ( */
    uint32_t idx = 0;
    bool first = true;
    while (!is_punct(p, ')')) {
        if (TK(p)->kind == T_EOF)
            return expected(p, "')' closing the input list");
        if (!first)
            AG_TRY(expect_punct(p, ','));
        first = false;
        AG_TRY(parse_input(p, n, &idx));
    }
    if (idx != nin)
        return PERR(p, TK(p), "malformed input list");
    AG_TRY(next(p));
    if (TK(p)->kind == T_ARROW) {
        AG_TRY(next(p));
        AG_TRY(expect_punct(p, '('));
        for (uint32_t o = 0; !is_punct(p, ')'); o++) {
            if (TK(p)->kind == T_EOF)
                return expected(p, "')' closing the output list");
            if (o > 0)
                AG_TRY(expect_punct(p, ','));
            if (o >= nout)
                return PERR(p, TK(p), "malformed output list");
            tok dt = *TK(p);
            desc_spec d;
            int64_t dims[AG_MAX_RANK];
            ag_tensor_desc *od = ag_node_output_desc(p->g, n, o);
            AG_TRY(parse_desc(p, &d, dims));
            AG_TRY(apply_desc(p, od, &d, dt.line, dt.col));
            if (d.value_ref) {
                /* Resolved once the node's attributes, which follow, are read. */
                pend_ref r = {o, d.value_ref, d.ref_line, d.ref_col};
                if (nrefs == AG_TEXT_MAX_REFS)
                    return perr_at(p, AG_EPARSE, d.ref_line, d.ref_col, "more than %d outputs with @ values",
                                   AG_TEXT_MAX_REFS);
                refs[nrefs++] = r;
            }
            if (is_punct(p, '<'))
                AG_TRY(parse_attrs(p, od->attrs));
        }
        AG_TRY(next(p));
    }
    if (is_punct(p, '<'))
        AG_TRY(parse_attrs(p, ag_node_attrs(p->g, n)));
    for (uint32_t k = 0; k < nrefs; k++) {
        const ag_attr *a = ag_attrs_find(ag_node_attrs(p->g, n), refs[k].name);
        if (!a || a->kind != AG_ATTR_TENSOR)
            return perr_at(p, AG_EPARSE, refs[k].line, refs[k].col,
                           "output %u of node '%s' (%s): @%s names no tensor attribute of the node", refs[k].out,
                           ag_node_name(p->g, n), ag_node_type(p->g, n), refs[k].name);
        AG_TRY(api_err(p, ag_desc_set_value(p->g, ag_node_output_desc(p->g, n, refs[k].out), a->v.t), refs[k].line,
                       refs[k].col));
    }
    if (is_punct(p, '{')) {
        tok open = *TK(p);
        if (p->depth >= AG_TEXT_MAX_DEPTH)
            return PERR(p, &open, "subgraphs nested deeper than %d levels", AG_TEXT_MAX_DEPTH);
        AG_TRY(next(p));
        while (!is_punct(p, '}')) {
            if (!is_ident(p, "graph"))
                return expected(p, "'graph NAME {' or the '}' closing the node's subgraphs");
            AG_TRY(next(p));
            tok stok = *TK(p);
            const char *sname;
            AG_TRY(parse_name(p, "a subgraph name", &sname));
            if (ag_graph_find_sub(p->g, sname) != AG_NONE)
                return PERR(p, &stok, "duplicate graph name '%s'", sname);
            ag_sub_id sub;
            AG_TRY(api_err(p, ag_graph_add_subgraph(p->g, n, sname, &sub), stok.line, stok.col));
            tok sopen = *TK(p);
            AG_TRY(expect_punct(p, '{'));
            p->depth++;
            AG_TRY(parse_body(p, sub, &sopen));
            p->depth--;
        }
        AG_TRY(next(p));
    }
    return AG_OK;
}

/* Makes the edges recorded since marks, all inside subgraph s. */
static ag_status resolve(parser *p, ag_sub_id s, uint32_t mark_in, uint32_t mark_ctrl)
{
    ag_graph *g = p->g;
    for (uint32_t k = mark_in; k < p->pins.len; k++) {
        const pend_in *pi = &AG_VEC_AT(p->pins, pend_in, k);
        ag_node_id src = ag_sub_find_node(g, s, pi->src);
        if (src == AG_NONE)
            return perr_at(p, AG_EPARSE, pi->line, pi->col, "input %u of node '%s' (%s): no node '%s' in graph '%s'",
                           pi->idx, ag_node_name(g, pi->dst), ag_node_type(g, pi->dst), pi->src, ag_sub_name(g, s));
        if (pi->out >= ag_node_num_outputs(g, src))
            return perr_at(p, AG_EPARSE, pi->line, pi->col,
                           "input %u of node '%s' (%s): node '%s' (%s) has no output %u (it has %u)", pi->idx,
                           ag_node_name(g, pi->dst), ag_node_type(g, pi->dst), pi->src, ag_node_type(g, src), pi->out,
                           ag_node_num_outputs(g, src));
        AG_TRY(api_err(p, ag_graph_add_edge(g, src, pi->out, pi->dst, pi->idx), pi->line, pi->col));
        if (pi->spec >= 0)
            AG_TRY(apply_desc(p, ag_node_input_desc(g, pi->dst, pi->idx), &AG_VEC_AT(p->specs, desc_spec, pi->spec),
                              pi->line, pi->col));
    }
    for (uint32_t k = mark_ctrl; k < p->pctrl.len; k++) {
        const pend_ctrl *pc = &AG_VEC_AT(p->pctrl, pend_ctrl, k);
        ag_node_id src = ag_sub_find_node(g, s, pc->src);
        if (src == AG_NONE)
            return perr_at(p, AG_EPARSE, pc->line, pc->col, "control input of node '%s' (%s): no node '%s' in graph '%s'",
                           ag_node_name(g, pc->dst), ag_node_type(g, pc->dst), pc->src, ag_sub_name(g, s));
        AG_TRY(api_err(p, ag_graph_add_ctrl_edge(g, src, pc->dst), pc->line, pc->col));
    }
    p->pins.len = mark_in;
    p->pctrl.len = mark_ctrl;
    return AG_OK;
}

/* Node statements up to the closing '}' of subgraph s. */
static ag_status parse_body(parser *p, ag_sub_id s, const tok *open)
{
    uint32_t mark_in = p->pins.len, mark_ctrl = p->pctrl.len;
    while (!is_punct(p, '}')) {
        if (TK(p)->kind == T_EOF)
            return PERR(p, TK(p), "unexpected end of input: graph '%s' opened at line %u is not closed",
                        ag_sub_name(p->g, s), open->line);
        AG_TRY(parse_node(p, s));
    }
    AG_TRY(next(p));
    return resolve(p, s, mark_in, mark_ctrl);
}

/* --------------------------------------------------------------- checking */

static ag_node_id pred_at(const ag_graph *g, ag_node_id n, uint32_t k)
{
    uint32_t nin = ag_node_num_inputs(g, n);
    return k < nin ? ag_node_input_src(g, n, k).node : ag_node_ctrl_in(g, n, k - nin);
}

static bool loc_before(const parser *p, ag_node_id a, ag_node_id b)
{
    if (a >= p->locs.len || b >= p->locs.len)
        return false;
    loc la = AG_VEC_AT(p->locs, loc, a), lb = AG_VEC_AT(p->locs, loc, b);
    return la.line < lb.line || (la.line == lb.line && la.col < lb.col);
}

/* After ag_graph_verify found a cycle: finds a node on it (Kahn's algorithm
 * per subgraph, then a walk back through nodes left over) and reports it at
 * the place it was defined. */
static ag_status report_cycle(parser *p, const char *why)
{
    ag_graph *g = p->g;
    uint32_t cap = ag_graph_node_capacity(g);
    uint32_t *deg = ag_calloc(p->ctx, cap ? cap : 1, sizeof *deg);
    ag_node_id *queue = ag_calloc(p->ctx, cap ? cap : 1, sizeof *queue);
    ag_status st = AG_ECYCLE;
    if (!deg || !queue) {
        st = oom(p);
        goto done;
    }
    for (ag_sub_id s = 0; s < ag_graph_sub_count(g); s++) {
        if (!ag_sub_alive(g, s))
            continue;
        uint32_t cnt = ag_sub_node_count(g, s), head = 0, tail = 0;
        for (uint32_t k = 0; k < cnt; k++) {
            ag_node_id n = ag_sub_node_at(g, s, k);
            uint32_t npred = ag_node_num_inputs(g, n) + ag_node_num_ctrl_in(g, n);
            for (uint32_t j = 0; j < npred; j++)
                if (pred_at(g, n, j) != AG_NONE)
                    deg[n]++;
            if (deg[n] == 0)
                queue[tail++] = n;
        }
        while (head < tail) {
            ag_node_id n = queue[head++];
            for (uint32_t o = 0; o < ag_node_num_outputs(g, n); o++)
                for (uint32_t c = 0; c < ag_node_output_nconsumers(g, n, o); c++) {
                    ag_node_id d = ag_node_output_consumer(g, n, o, c).node;
                    if (--deg[d] == 0)
                        queue[tail++] = d;
                }
            for (uint32_t c = 0; c < ag_node_num_ctrl_out(g, n); c++) {
                ag_node_id d = ag_node_ctrl_out(g, n, c);
                if (--deg[d] == 0)
                    queue[tail++] = d;
            }
        }
        if (tail == cnt)
            continue;
        /* Every node left has a predecessor left; walking back must revisit. */
        ag_node_id n = AG_NONE;
        for (uint32_t k = 0; k < cnt && n == AG_NONE; k++)
            if (deg[ag_sub_node_at(g, s, k)] > 0)
                n = ag_sub_node_at(g, s, k);
        for (uint32_t step = 0; step <= cnt; step++) {
            uint32_t npred = ag_node_num_inputs(g, n) + ag_node_num_ctrl_in(g, n);
            for (uint32_t j = 0; j < npred; j++) {
                ag_node_id q = pred_at(g, n, j);
                if (q != AG_NONE && deg[q] > 0) {
                    n = q;
                    break;
                }
            }
        }
        /* Report the cycle's node that comes first in the file. */
        ag_node_id best = n, m = n;
        do {
            uint32_t npred = ag_node_num_inputs(g, m) + ag_node_num_ctrl_in(g, m);
            for (uint32_t j = 0; j < npred; j++) {
                ag_node_id q = pred_at(g, m, j);
                if (q != AG_NONE && deg[q] > 0) {
                    m = q;
                    break;
                }
            }
            if (loc_before(p, m, best))
                best = m;
        } while (m != n);
        n = best;
        loc l = n < p->locs.len ? AG_VEC_AT(p->locs, loc, n) : (loc){0, 0};
        st = perr_at(p, AG_ECYCLE, l.line, l.col, "node '%s' (%s) is on a cycle of data and control edges (%s)",
                     ag_node_name(g, n), ag_node_type(g, n), why);
        goto done;
    }
    st = AG_ERR(p->ctx, AG_ECYCLE, "%s: %s", p->file, why);
done:
    ag_free(p->ctx, deg, sizeof *deg * (cap ? cap : 1));
    ag_free(p->ctx, queue, sizeof *queue * (cap ? cap : 1));
    return st;
}

static ag_status check_graph(parser *p)
{
    ag_status st = ag_graph_verify(p->g);
    if (st == AG_OK || st == AG_ENOMEM)
        return st;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ag_ctx_errmsg(p->ctx));
    if (st == AG_ECYCLE)
        return report_cycle(p, msg);
    return AG_ERR(p->ctx, st, "%s: %s", p->file, msg);
}

/* ------------------------------------------------------------------ entry */

static ag_status parse_file(parser *p)
{
    AG_TRY(next(p));
    if (!is_ident(p, "graph"))
        return expected(p, "'graph NAME {'");
    AG_TRY(next(p));
    tok ntok = *TK(p);
    const char *name;
    AG_TRY(parse_name(p, "a graph name", &name));
    AG_TRY(api_err(p, ag_graph_create(p->ctx, name, &p->g), ntok.line, ntok.col));
    tok open = *TK(p);
    AG_TRY(expect_punct(p, '{'));
    AG_TRY(parse_body(p, AG_ROOT, &open));
    if (TK(p)->kind != T_EOF)
        return PERR(p, TK(p), "unexpected '%.*s' after the end of graph '%s'", tok_show_len(TK(p)), tok_show(TK(p)), name);
    return check_graph(p);
}

ag_status ag_text_read(ag_ctx *ctx, const char *buf, size_t len, const char *filename, ag_graph **out)
{
    if (!ctx || !out || (!buf && len))
        return ctx ? AG_ERR(ctx, AG_EINVAL, "ag_text_read: NULL argument") : AG_EINVAL;
    *out = NULL;
    parser p;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.file = filename ? filename : "<input>";
    p.buf = buf ? buf : "";
    p.end = p.buf + len;
    p.lx.cur = p.lx.lstart = p.buf;
    p.lx.line = 1;
    ag_arena_init(&p.scratch, ctx);
    ag_status st = parse_file(&p);
    if (st != AG_OK) {
        ag_graph_destroy(p.g);
        p.g = NULL;
    }
    *out = p.g;
    ag_arena_reset(&p.scratch);
    ag_vec_free(ctx, &p.pins, sizeof(pend_in));
    ag_vec_free(ctx, &p.pctrl, sizeof(pend_ctrl));
    ag_vec_free(ctx, &p.specs, sizeof(desc_spec));
    ag_vec_free(ctx, &p.locs, sizeof(loc));
    ag_vec_free(ctx, &p.bytes, 1);
    ag_vec_free(ctx, &p.i64s, sizeof(int64_t));
    ag_vec_free(ctx, &p.f32s, sizeof(float));
    ag_vec_free(ctx, &p.bools, sizeof(bool));
    ag_vec_free(ctx, &p.strs, sizeof(const char *));
    ag_vec_free(ctx, &p.tens, sizeof(const ag_tensor *));
    return st;
}

ag_status ag_text_read_file(ag_ctx *ctx, const char *path, ag_graph **out)
{
    if (!ctx || !path || !out)
        return ctx ? AG_ERR(ctx, AG_EINVAL, "ag_text_read_file: NULL argument") : AG_EINVAL;
    *out = NULL;
    char *buf;
    size_t len;
    AG_TRY(ag_read_file(ctx, path, &buf, &len));
    ag_status st = ag_text_read(ctx, buf, len, strcmp(path, "-") == 0 ? "<stdin>" : path, out);
    ag_free(ctx, buf, len + 1);
    return st;
}
