/* Op semantics registry: name tables, the ops-file loader (format in
 * docs/ops.md), lookup by (type, domain), table-level queries and the dump.
 * Every load builds a complete new state (entries and maps) beside the old
 * one and swaps it in only when the whole text parsed, so a failing load
 * leaves the registry exactly as it was. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/ops_internal.h"

/* Generated from src/ops/builtin.ops by cmake/embed.cmake. */
extern const char ag_ops_builtin_text[];
extern const unsigned long ag_ops_builtin_text_len;

struct ag_ops {
    ag_ctx *ctx;
    ag_vec arenas;  /* ag_arena, one per successful load; entries live there */
    ag_vec entries; /* const ag_op_info *, every definition in load order */
    ag_vec live;    /* const ag_op_info *, the ones not overridden */
    ag_strmap any;  /* type -> index in entries (entries valid in any domain) */
    ag_strmap qual; /* domain "\n" type -> index in entries */
    const ag_op_info *dflt;
};

/* Used when no file defined "*": unknown types are read-only, fresh, kept. */
static const ag_op_info fallback_default = {
    .key = "*", .type = "*", .file = "<builtin>", .kind = AG_OPK_UNKNOWN,
    .flags = AG_OPF_SIDE_EFFECTS,
};

/* ---- name tables ---- */

static const char *const kind_names[] = {
#define X_(e, name) name,
    AG_OP_KIND_LIST(X_)
#undef X_
};
static const char *const access_names[] = {
#define X_(e, name) name,
    AG_OP_ACCESS_LIST(X_)
#undef X_
};
static const char *const rel_names[] = {
#define X_(e, name) name,
    AG_OP_REL_LIST(X_)
#undef X_
};
static const struct {
    uint32_t bit;
    const char *name;
} flag_names[] = {
#define X_(e, bit, name) {e, name},
    AG_OP_FLAG_LIST(X_)
#undef X_
}, anchor_flag_names[] = {
#define X_(e, bit, name) {e, name},
    AG_OP_ANCHOR_FLAG_LIST(X_)
#undef X_
};
#define COUNT_(a) (sizeof(a) / sizeof((a)[0]))

const char *ag_op_kind_name(ag_op_kind k)
{
    return (unsigned)k < COUNT_(kind_names) ? kind_names[k] : NULL;
}

const char *ag_op_access_name(ag_op_access a)
{
    return (unsigned)a < COUNT_(access_names) ? access_names[a] : NULL;
}

const char *ag_op_rel_name(ag_op_rel r)
{
    return (unsigned)r < COUNT_(rel_names) ? rel_names[r] : NULL;
}

const char *ag_op_flag_name(uint32_t flag)
{
    for (size_t k = 0; k < COUNT_(flag_names); k++)
        if (flag_names[k].bit == flag)
            return flag_names[k].name;
    return NULL;
}

const char *ag_op_anchor_flag_name(uint32_t flag)
{
    for (size_t k = 0; k < COUNT_(anchor_flag_names); k++)
        if (anchor_flag_names[k].bit == flag)
            return anchor_flag_names[k].name;
    return NULL;
}

static bool name_eq(const char *name, const char *s, size_t len)
{
    return strlen(name) == len && memcmp(name, s, len) == 0;
}

bool ag_op_kind_parse(const char *s, size_t len, ag_op_kind *out)
{
    for (size_t k = 0; k < COUNT_(kind_names); k++)
        if (name_eq(kind_names[k], s, len)) {
            *out = (ag_op_kind)k;
            return true;
        }
    return false;
}

bool ag_op_access_parse(const char *s, size_t len, ag_op_access *out)
{
    for (size_t k = 0; k < COUNT_(access_names); k++)
        if (name_eq(access_names[k], s, len)) {
            *out = (ag_op_access)k;
            return true;
        }
    return false;
}

size_t ag_op_flags_format(uint32_t flags, char *buf, size_t len)
{
    size_t need = 0, written = 0;
    bool full = false;
    for (size_t k = 0; k < COUNT_(flag_names); k++) {
        if (!(flags & flag_names[k].bit))
            continue;
        const char *name = flag_names[k].name;
        size_t n = strlen(name);
        size_t sep = need ? 1 : 0;
        if (!full && written + sep + n < len) {
            if (sep)
                buf[written] = ',';
            memcpy(buf + written + sep, name, n);
            written += sep + n;
        } else {
            full = true;
        }
        need += sep + n;
    }
    if (len)
        buf[written] = '\0';
    return need;
}

bool ag_op_kind_is_data_like(ag_op_kind k)
{
    return k == AG_OPK_DATA || k == AG_OPK_REF_DATA;
}

bool ag_op_kind_is_var_like(ag_op_kind k)
{
    return k == AG_OPK_VARIABLE || k == AG_OPK_REF_DATA;
}

bool ag_op_kind_is_const_like(ag_op_kind k)
{
    return k == AG_OPK_CONST || k == AG_OPK_CONST_PLACEHOLDER || k == AG_OPK_FILE_CONSTANT;
}

bool ag_op_kind_has_subgraphs(ag_op_kind k)
{
    return k == AG_OPK_IF || k == AG_OPK_CASE || k == AG_OPK_WHILE || k == AG_OPK_CALL ||
           k == AG_OPK_LOOP;
}

/* ---- table-level queries ---- */

static const op_anchor *find_anchor(const op_anchor *a, uint32_t n, uint32_t index)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a[mid].index == index)
            return &a[mid];
        if (a[mid].index < index)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Field-wise fallback: the specific anchor, then the wildcard, then defaults.
 * Anchor flags add up. */
static op_anchor resolve(const op_anchor *s, const op_anchor *w, uint32_t index)
{
    op_anchor r = {.index = index, .access = AG_ACC_RO, .rel = AG_REL_FRESH, .mem = AG_MEM_HBM};
    const op_anchor *src[2] = {w, s};
    for (int k = 0; k < 2; k++) {
        const op_anchor *a = src[k];
        if (!a)
            continue;
        if (a->set & OPA_SET_ACCESS)
            r.access = a->access;
        if (a->set & OPA_SET_REL) {
            r.rel = a->rel;
            r.rel_in = a->rel_in == AG_OPS_WILD ? index : a->rel_in;
        }
        if (a->set & OPA_SET_MEM)
            r.mem = a->mem;
        if (a->set & OPA_SET_INPLACE)
            r.inplace_in = a->inplace_in;
        r.set |= a->set;
        r.flags |= a->flags;
    }
    return r;
}

op_anchor ag__ops_input(const ag_op_info *info, uint32_t i)
{
    return resolve(find_anchor(info->ins, info->nin, i), &info->in_wild, i);
}

op_anchor ag__ops_output(const ag_op_info *info, uint32_t o)
{
    return resolve(find_anchor(info->outs, info->nout, o), &info->out_wild, o);
}

const char *ag_op_info_type(const ag_op_info *info) { return info->type; }
const char *ag_op_info_domain(const ag_op_info *info) { return info->domain; }
const char *ag_op_info_file(const ag_op_info *info) { return info->file; }
uint32_t ag_op_info_line(const ag_op_info *info) { return info->line; }
ag_op_kind ag_op_info_kind(const ag_op_info *info) { return info->kind; }
uint32_t ag_op_info_flags(const ag_op_info *info) { return info->flags; }

ag_op_access ag_op_info_input_access(const ag_op_info *info, uint32_t i)
{
    return (ag_op_access)ag__ops_input(info, i).access;
}

uint32_t ag_op_info_input_flags(const ag_op_info *info, uint32_t i)
{
    return ag__ops_input(info, i).flags;
}

ag_mem_type ag_op_info_input_mem_type(const ag_op_info *info, uint32_t i, bool *explicit_)
{
    op_anchor a = ag__ops_input(info, i);
    if (explicit_)
        *explicit_ = (a.set & OPA_SET_MEM) != 0;
    return (ag_mem_type)a.mem;
}

ag_op_rel ag_op_info_output_rel(const ag_op_info *info, uint32_t o, uint32_t *in_idx)
{
    op_anchor a = ag__ops_output(info, o);
    if (in_idx)
        *in_idx = a.rel == AG_REL_FRESH ? 0 : a.rel_in;
    return (ag_op_rel)a.rel;
}

uint32_t ag_op_info_output_flags(const ag_op_info *info, uint32_t o)
{
    return ag__ops_output(info, o).flags;
}

ag_mem_type ag_op_info_output_mem_type(const ag_op_info *info, uint32_t o, bool *explicit_)
{
    op_anchor a = ag__ops_output(info, o);
    if (explicit_)
        *explicit_ = (a.set & OPA_SET_MEM) != 0;
    return (ag_mem_type)a.mem;
}

bool ag_op_info_output_inplace(const ag_op_info *info, uint32_t o, uint32_t *in_idx)
{
    op_anchor a = ag__ops_output(info, o);
    if (!(a.set & OPA_SET_INPLACE))
        return false;
    if (in_idx)
        *in_idx = a.inplace_in;
    return true;
}

/* ---- lookup ---- */

/* The default ONNX domain has three spellings. */
static bool default_domain(const char *d, size_t n)
{
    return n == 0 || (n == 7 && memcmp(d, "ai.onnx", 7) == 0);
}

static const ag_op_info *entry_at(const ag_vec *entries, uint32_t idx)
{
    return AG_VEC_AT(*entries, const ag_op_info *, idx);
}

/* Looks up in the given maps.  Keys are built in a stack buffer: files cannot
 * define types or domains over 255 bytes, so longer ones are simply unknown. */
static const ag_op_info *lookup_in(const ag_strmap *any, const ag_strmap *qual, const ag_vec *entries,
                                   const char *type, size_t tlen, const char *domain, size_t dlen)
{
    uint32_t idx;
    char key[512];
    bool def = default_domain(domain, dlen);
    size_t dl = def ? 0 : dlen;
    if (dl + 1 + tlen < sizeof key && !memchr(type, '\n', tlen) && !memchr(domain, '\n', dl)) {
        memcpy(key, domain, dl);
        key[dl] = '\n';
        memcpy(key + dl + 1, type, tlen);
        key[dl + 1 + tlen] = '\0';
        if (ag_strmap_get(qual, key, &idx))
            return entry_at(entries, idx);
    }
    if (tlen < sizeof key && !memchr(type, '\0', tlen)) {
        memcpy(key, type, tlen);
        key[tlen] = '\0';
        if (ag_strmap_get(any, key, &idx))
            return entry_at(entries, idx);
    }
    return NULL;
}

const ag_op_info *ag_ops_lookup(const ag_ops *ops, const char *type, const char *domain)
{
    if (!ops || !type)
        return NULL;
    if (!domain)
        domain = "";
    return lookup_in(&ops->any, &ops->qual, &ops->entries, type, strlen(type), domain, strlen(domain));
}

const ag_op_info *ag_ops_default(const ag_ops *ops)
{
    return ops->dflt;
}

uint32_t ag_ops_count(const ag_ops *ops)
{
    return ops->live.len;
}

const ag_op_info *ag_ops_at(const ag_ops *ops, uint32_t k)
{
    return k < ops->live.len ? AG_VEC_AT(ops->live, const ag_op_info *, k) : NULL;
}

/* ---- the loader ---- */

typedef struct tok {
    const char *s;
    uint32_t n, line, col;
} tok;

/* Properties of the entry being read (shared by all of its types). */
typedef struct spec {
    bool has_kind, has_like;
    ag_op_kind kind;
    tok like;
    uint32_t fl_set, fl_clear;
    ag_vec ins, outs; /* op_anchor as written, the wildcard with index AG_OPS_WILD */
} spec;

typedef struct type_ref {
    tok name;
    tok domain;       /* n == 0: none given */
    bool has_domain;
} type_ref;

typedef struct parser {
    ag_ops *ops;
    ag_ctx *ctx;
    const char *filename; /* for messages */
    const char *file;     /* arena copy stored in entries */
    const char *buf;
    size_t len;
    uint32_t line;
    const char *line_start;
    ag_arena *arena;
    ag_vec entries;
    ag_strmap any, qual;
    /* current entry */
    bool open, colon;
    tok start;
    ag_vec types; /* type_ref */
    spec sp;
    /* %domain directive */
    bool has_dir_domain;
    tok dir_domain;
    /* scratch for merging anchors */
    ag_vec work_in, work_out;
} parser;

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static ag_status perr(parser *p, uint32_t line, uint32_t col, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return AG_ERR(p->ctx, AG_EPARSE, "%s:%u:%u: %s", p->filename, line, col, msg);
}

static ag_status perr_tok(parser *p, tok t, const char *what)
{
    int n = t.n > 60 ? 60 : (int)t.n;
    return perr(p, t.line, t.col, "%s '%.*s'%s", what, n, t.s, t.n > 60 ? "..." : "");
}

static bool is_type_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-' || c == '/';
}

static bool is_domain_char(char c)
{
    return is_type_char(c) && c != '/';
}

static tok sub_tok(tok t, uint32_t off, uint32_t n)
{
    tok r = {t.s + off, n, t.line, t.col + off};
    return r;
}

static bool tok_eq(tok t, const char *s)
{
    return name_eq(s, t.s, t.n);
}

/* Decimal index 0..AG_OPS_MAX_INDEX. */
static ag_status parse_index(parser *p, tok t, uint32_t *out)
{
    if (t.n == 0)
        return perr(p, t.line, t.col, "missing index");
    uint32_t v = 0;
    for (uint32_t k = 0; k < t.n; k++) {
        char c = t.s[k];
        if (c < '0' || c > '9')
            return perr_tok(p, t, "bad index");
        v = v * 10 + (uint32_t)(c - '0');
        if (v > AG_OPS_MAX_INDEX)
            return perr(p, t.line, t.col, "index %.*s out of range (at most %u)", (int)(t.n > 20 ? 20 : t.n), t.s,
                        AG_OPS_MAX_INDEX);
    }
    *out = v;
    return AG_OK;
}

static ag_status add_type(parser *p, tok t)
{
    type_ref r = {.name = t};
    uint32_t at = 0;
    while (at < t.n && t.s[at] != '@')
        at++;
    r.name.n = at;
    bool dflt = at == 1 && t.s[0] == '*'; /* the default entry */
    if (at > 255)
        return perr(p, t.line, t.col, "operator type longer than 255 bytes");
    if (!dflt) {
        if (at == 0)
            return perr(p, t.line, t.col, "missing operator type before '@'");
        for (uint32_t k = 0; k < at; k++)
            if (!is_type_char(t.s[k]))
                return perr(p, t.line, t.col + k, "invalid character in operator type '%.*s'",
                            (int)(at > 60 ? 60 : at), t.s);
    }
    if (at < t.n) {
        if (dflt)
            return perr(p, t.line, t.col + 1, "the default entry '*' cannot have a domain");
        r.domain = sub_tok(t, at + 1, t.n - at - 1);
        r.has_domain = true;
        if (r.domain.n == 0)
            return perr(p, t.line, t.col + at + 1, "missing domain after '@'");
        if (r.domain.n > 255)
            return perr(p, t.line, t.col + at + 1, "domain longer than 255 bytes");
        if (!(r.domain.n == 1 && r.domain.s[0] == '*'))
            for (uint32_t k = 0; k < r.domain.n; k++)
                if (!is_domain_char(r.domain.s[k]))
                    return perr(p, t.line, r.domain.col + k, "invalid character in domain");
    } else if (p->has_dir_domain && !dflt) {
        /* (the default entry has no domain: a %domain in force leaves it) */
        r.domain = p->dir_domain;
        r.has_domain = true;
    }
    if (ag_vec_push(p->ctx, &p->types, sizeof r, &r) != AG_OK)
        return AG_OOM(p->ctx);
    return AG_OK;
}

static bool flag_lookup(tok t, const void *table, size_t count, uint32_t *bit)
{
    const struct {
        uint32_t bit;
        const char *name;
    } *tab = table;
    for (size_t k = 0; k < count; k++)
        if (tok_eq(t, tab[k].name)) {
            *bit = tab[k].bit;
            return true;
        }
    return false;
}

static ag_status parse_flag(parser *p, tok t)
{
    bool clear = t.n > 3 && memcmp(t.s, "no-", 3) == 0;
    tok name = clear ? sub_tok(t, 3, t.n - 3) : t;
    uint32_t bit;
    if (!flag_lookup(name, flag_names, COUNT_(flag_names), &bit))
        return perr_tok(p, t, "unknown property");
    if (bit == AG_OPF_SUBGRAPHS || bit == AG_OPF_UNKNOWN)
        return perr_tok(p, t, "property is derived per node and cannot be written");
    spec *sp = &p->sp;
    if ((sp->fl_set | sp->fl_clear) & bit)
        return perr_tok(p, t, ((clear ? sp->fl_set : sp->fl_clear) & bit) ? "conflicting property"
                                                                            : "duplicate property");
    if (clear)
        sp->fl_clear |= bit;
    else
        sp->fl_set |= bit;
    return AG_OK;
}

/* "name:index" values of outputs (ref:0, view:1, reuse:0, inplace:0). */
static bool split_colon(tok item, tok *name, tok *arg)
{
    for (uint32_t k = 0; k < item.n; k++)
        if (item.s[k] == ':') {
            *name = sub_tok(item, 0, k);
            *arg = sub_tok(item, k + 1, item.n - k - 1);
            return true;
        }
    *name = item;
    arg->n = 0;
    return false;
}

static ag_status parse_anchor_item(parser *p, op_anchor *a, bool input, tok item)
{
    tok name, arg = {0};
    bool has_arg = split_colon(item, &name, &arg);
    if (item.n == 0)
        return perr(p, item.line, item.col, "empty value in list");
    uint32_t bit;
    if (!has_arg && flag_lookup(name, anchor_flag_names, COUNT_(anchor_flag_names), &bit)) {
        if (a->flags & bit)
            return perr_tok(p, item, "duplicate value");
        a->flags |= bit;
        return AG_OK;
    }
    if (tok_eq(name, "mem")) {
        if (!has_arg)
            return perr(p, item.line, item.col, "expected mem:<type> (hbm, p2p or host)");
        ag_mem_type mt;
        if (!ag_mem_type_parse(arg.s, arg.n, &mt))
            return perr_tok(p, arg, "unknown memory type");
        if (a->set & OPA_SET_MEM)
            return perr_tok(p, item, "duplicate memory type");
        a->set |= OPA_SET_MEM;
        a->mem = (uint8_t)mt;
        return AG_OK;
    }
    if (input) {
        ag_op_access acc;
        if (has_arg || !ag_op_access_parse(name.s, name.n, &acc))
            return perr_tok(p, item, "unknown input property");
        if (a->set & OPA_SET_ACCESS)
            return perr_tok(p, item, "conflicting access");
        a->set |= OPA_SET_ACCESS;
        a->access = (uint8_t)acc;
        return AG_OK;
    }
    if (tok_eq(name, "inplace")) {
        if (!has_arg)
            return perr(p, item.line, item.col, "expected inplace:<input index>");
        if (a->set & OPA_SET_INPLACE)
            return perr_tok(p, item, "duplicate value");
        AG_TRY(parse_index(p, arg, &a->inplace_in));
        a->set |= OPA_SET_INPLACE;
        return AG_OK;
    }
    ag_op_rel rel;
    if (tok_eq(name, "fresh"))
        rel = AG_REL_FRESH;
    else if (tok_eq(name, "pass"))
        rel = AG_REL_PASS;
    else if (tok_eq(name, "ref"))
        rel = AG_REL_REF;
    else if (tok_eq(name, "view"))
        rel = AG_REL_VIEW;
    else if (tok_eq(name, "reuse"))
        rel = AG_REL_REUSE;
    else
        return perr_tok(p, item, "unknown output property");
    bool needs_arg = rel == AG_REL_REF || rel == AG_REL_VIEW || rel == AG_REL_REUSE;
    if (needs_arg != has_arg)
        return needs_arg ? perr(p, item.line, item.col, "expected %s:<input index>", rel_names[rel])
                         : perr_tok(p, item, "value takes no index");
    if (a->set & OPA_SET_REL)
        return perr_tok(p, item, "conflicting output relation");
    a->set |= OPA_SET_REL;
    a->rel = (uint8_t)rel;
    if (needs_arg)
        AG_TRY(parse_index(p, arg, &a->rel_in));
    else
        a->rel_in = rel == AG_REL_PASS ? a->index : 0;
    return AG_OK;
}

/* in<sel>=v,v,... and out<sel>=v,v,... */
static ag_status parse_anchor(parser *p, tok t, bool input, uint32_t eq)
{
    uint32_t skip = input ? 2 : 3;
    tok sel = sub_tok(t, skip, eq - skip);
    op_anchor a = {0};
    if (sel.n == 1 && sel.s[0] == '*')
        a.index = AG_OPS_WILD;
    else
        AG_TRY(parse_index(p, sel, &a.index));
    ag_vec *v = input ? &p->sp.ins : &p->sp.outs;
    for (uint32_t k = 0; k < v->len; k++)
        if (AG_VEC_AT(*v, op_anchor, k).index == a.index)
            return perr_tok(p, sub_tok(t, 0, eq), "duplicate property");
    tok val = sub_tok(t, eq + 1, t.n - eq - 1);
    if (val.n == 0)
        return perr(p, t.line, t.col + eq + 1, "missing value after '='");
    uint32_t from = 0;
    for (uint32_t k = 0; k <= val.n; k++) {
        if (k == val.n || val.s[k] == ',') {
            AG_TRY(parse_anchor_item(p, &a, input, sub_tok(val, from, k - from)));
            from = k + 1;
        }
    }
    if (ag_vec_push(p->ctx, v, sizeof a, &a) != AG_OK)
        return AG_OOM(p->ctx);
    return AG_OK;
}

static ag_status parse_prop(parser *p, tok t)
{
    uint32_t eq = 0;
    while (eq < t.n && t.s[eq] != '=')
        eq++;
    if (eq == t.n)
        return parse_flag(p, t);
    tok key = sub_tok(t, 0, eq);
    tok val = sub_tok(t, eq + 1, t.n - eq - 1);
    spec *sp = &p->sp;
    if (tok_eq(key, "kind")) {
        if (sp->has_kind)
            return perr_tok(p, key, "duplicate property");
        if (!ag_op_kind_parse(val.s, val.n, &sp->kind))
            return perr_tok(p, val, "unknown kind");
        sp->has_kind = true;
        return AG_OK;
    }
    if (tok_eq(key, "like")) {
        if (sp->has_like)
            return perr_tok(p, key, "duplicate property");
        if (val.n == 0)
            return perr(p, val.line, val.col, "missing operator type after 'like='");
        sp->has_like = true;
        sp->like = val;
        return AG_OK;
    }
    bool input = key.n >= 3 && memcmp(key.s, "in", 2) == 0;
    bool output = key.n >= 4 && memcmp(key.s, "out", 3) == 0;
    if (output)
        input = false;
    if (input || output) {
        char c = key.s[input ? 2 : 3];
        if (c == '*' || (c >= '0' && c <= '9'))
            return parse_anchor(p, t, input, eq);
    }
    return perr_tok(p, key, "unknown property");
}

/* Reads one line's tokens into the open entry. */
static ag_status scan_tokens(parser *p, const char *s, const char *end)
{
    for (;;) {
        while (s < end && (*s == ' ' || *s == '\t' || *s == '\r'))
            s++;
        if (s == end || *s == '#')
            return AG_OK;
        tok t = {s, 0, p->line, (uint32_t)(s - p->line_start) + 1};
        if (!p->colon) {
            if (*s == ':') {
                p->colon = true;
                s++;
                continue;
            }
            while (s < end && *s != ' ' && *s != '\t' && *s != '\r' && *s != ':' && *s != '#')
                s++;
            t.n = (uint32_t)(s - t.s);
            AG_TRY(add_type(p, t));
            continue;
        }
        while (s < end && *s != ' ' && *s != '\t' && *s != '\r' && *s != '#')
            s++;
        t.n = (uint32_t)(s - t.s);
        AG_TRY(parse_prop(p, t));
    }
}

static ag_status push_work(parser *p, ag_vec *w, const op_anchor *a)
{
    if (ag_vec_push(p->ctx, w, sizeof *a, a) != AG_OK)
        return AG_OOM(p->ctx);
    return AG_OK;
}

/* Merges the given fields of src into dst (flags add up). */
static void merge_anchor(op_anchor *dst, const op_anchor *src)
{
    if (src->set & OPA_SET_ACCESS)
        dst->access = src->access;
    if (src->set & OPA_SET_REL) {
        dst->rel = src->rel;
        dst->rel_in = src->rel_in;
    }
    if (src->set & OPA_SET_MEM)
        dst->mem = src->mem;
    if (src->set & OPA_SET_INPLACE)
        dst->inplace_in = src->inplace_in;
    dst->set |= src->set;
    dst->flags |= src->flags;
}

/* work := base anchors (wildcard first) merged with the entry's. */
static ag_status merge_anchors(parser *p, ag_vec *work, const op_anchor *wild, const op_anchor *base,
                               uint32_t nbase, const ag_vec *given)
{
    work->len = 0;
    op_anchor w = *wild;
    w.index = AG_OPS_WILD;
    AG_TRY(push_work(p, work, &w));
    for (uint32_t k = 0; k < nbase; k++)
        AG_TRY(push_work(p, work, &base[k]));
    for (uint32_t k = 0; k < given->len; k++) {
        const op_anchor *g = &AG_VEC_AT(*given, op_anchor, k);
        uint32_t j = 0;
        while (j < work->len && AG_VEC_AT(*work, op_anchor, j).index != g->index)
            j++;
        if (j < work->len)
            merge_anchor(&AG_VEC_AT(*work, op_anchor, j), g);
        else
            AG_TRY(push_work(p, work, g));
    }
    return AG_OK;
}

static int cmp_anchor(const void *a, const void *b)
{
    uint32_t x = ((const op_anchor *)a)->index, y = ((const op_anchor *)b)->index;
    return x < y ? -1 : x > y;
}

/* Copies work[1..] (sorted) into the arena; work[0] is the wildcard. */
static ag_status freeze_anchors(parser *p, ag_vec *work, op_anchor *wild, const op_anchor **out, uint32_t *n)
{
    op_anchor *a = work->data;
    *wild = a[0];
    *n = work->len - 1;
    *out = NULL;
    if (*n == 0)
        return AG_OK;
    qsort(a + 1, *n, sizeof *a, cmp_anchor);
    op_anchor *copy = ag_arena_memdup(p->arena, a + 1, *n * sizeof *a);
    if (!copy)
        return AG_OOM(p->ctx);
    *out = copy;
    return AG_OK;
}

static char *arena_tok(parser *p, const char *a, size_t an, const char *b, size_t bn)
{
    char *s = ag_arena_alloc(p->arena, an + bn + 1);
    if (!s)
        return NULL;
    memcpy(s, a, an);
    memcpy(s + an, b, bn);
    s[an + bn] = '\0';
    return s;
}

static ag_status finish_entry(parser *p)
{
    if (!p->open)
        return AG_OK;
    p->open = false;
    spec *sp = &p->sp;
    if (p->types.len == 0)
        return perr(p, p->start.line, p->start.col, "entry has no operator type");
    if (!p->colon) {
        const type_ref *last = &AG_VEC_AT(p->types, type_ref, p->types.len - 1);
        tok lt = last->name;
        return perr(p, lt.line, lt.col, "expected ':' after the operator types");
    }

    /* The template: like=, or defaults (compute, no flags, nothing written). */
    ag_op_info tmpl = {.kind = AG_OPK_COMPUTE};
    if (sp->has_like) {
        tok lk = sp->like;
        uint32_t at = 0;
        while (at < lk.n && lk.s[at] != '@')
            at++;
        const char *dom = at < lk.n ? lk.s + at + 1 : "";
        size_t dn = at < lk.n ? lk.n - at - 1 : 0;
        const ag_op_info *base;
        if (dn == 1 && dom[0] == '*') {
            char key[256];
            uint32_t idx;
            base = NULL;
            if (at < sizeof key) {
                memcpy(key, lk.s, at);
                key[at] = '\0';
                if (ag_strmap_get(&p->any, key, &idx))
                    base = entry_at(&p->entries, idx);
            }
        } else {
            base = lookup_in(&p->any, &p->qual, &p->entries, lk.s, at, dom, dn);
        }
        if (!base)
            return perr_tok(p, lk, "like= names an unknown operator");
        tmpl = *base;
    }
    if (sp->has_kind)
        tmpl.kind = sp->kind;
    tmpl.flags = (tmpl.flags | sp->fl_set) & ~sp->fl_clear;

    AG_TRY(merge_anchors(p, &p->work_in, &tmpl.in_wild, tmpl.ins, tmpl.nin, &sp->ins));
    AG_TRY(merge_anchors(p, &p->work_out, &tmpl.out_wild, tmpl.outs, tmpl.nout, &sp->outs));
    /* An output that references input k writes it: k is writeable unless the
     * entry says otherwise. */
    for (uint32_t k = 0; k < p->work_out.len; k++) {
        op_anchor o = AG_VEC_AT(p->work_out, op_anchor, k);
        if (!(o.set & OPA_SET_REL) || o.rel != AG_REL_REF)
            continue;
        uint32_t j = 1;
        while (j < p->work_in.len && AG_VEC_AT(p->work_in, op_anchor, j).index != o.rel_in)
            j++;
        if (j == p->work_in.len) {
            op_anchor na = {.index = o.rel_in};
            AG_TRY(push_work(p, &p->work_in, &na));
        }
        op_anchor *in = &AG_VEC_AT(p->work_in, op_anchor, j);
        if (!(in->set & OPA_SET_ACCESS)) {
            in->set |= OPA_SET_ACCESS;
            in->access = AG_ACC_WRITEABLE;
        }
    }
    AG_TRY(freeze_anchors(p, &p->work_in, &tmpl.in_wild, &tmpl.ins, &tmpl.nin));
    AG_TRY(freeze_anchors(p, &p->work_out, &tmpl.out_wild, &tmpl.outs, &tmpl.nout));

    if (ag_vec_reserve(p->ctx, &p->entries, sizeof(ag_op_info *), p->types.len) != AG_OK)
        return AG_OOM(p->ctx);
    for (uint32_t k = 0; k < p->types.len; k++) {
        const type_ref *r = &AG_VEC_AT(p->types, type_ref, k);
        ag_op_info *info = ag_arena_alloc(p->arena, sizeof *info);
        if (!info)
            return AG_OOM(p->ctx);
        *info = tmpl;
        info->file = p->file;
        info->line = r->name.line;
        info->type = arena_tok(p, r->name.s, r->name.n, "", 0);
        if (!info->type)
            return AG_OOM(p->ctx);
        bool any = !r->has_domain || (r->domain.n == 1 && r->domain.s[0] == '*');
        info->qualified = !any;
        if (any) {
            info->domain = NULL;
            info->key = info->type;
        } else {
            size_t dn = default_domain(r->domain.s, r->domain.n) ? 0 : r->domain.n;
            info->domain = arena_tok(p, r->domain.s, dn, "", 0);
            char *key = arena_tok(p, r->domain.s, dn, "\n", 1);
            if (!info->domain || !key)
                return AG_OOM(p->ctx);
            info->key = arena_tok(p, key, dn + 1, r->name.s, r->name.n);
            if (!info->key)
                return AG_OOM(p->ctx);
        }
        uint32_t idx = p->entries.len;
        if (ag_strmap_put(p->ctx, info->qualified ? &p->qual : &p->any, info->key, idx) != AG_OK)
            return AG_OOM(p->ctx);
        const ag_op_info *ci = info;
        if (ag_vec_push(p->ctx, &p->entries, sizeof ci, &ci) != AG_OK)
            return AG_OOM(p->ctx);
    }
    return AG_OK;
}

static void reset_entry(parser *p, tok start)
{
    p->open = true;
    p->colon = false;
    p->start = start;
    p->types.len = 0;
    p->sp.has_kind = p->sp.has_like = false;
    p->sp.fl_set = p->sp.fl_clear = 0;
    p->sp.ins.len = p->sp.outs.len = 0;
}

static ag_status directive(parser *p, const char *s, const char *end)
{
    tok words[3];
    int n = 0;
    const char *q = s + 1;
    for (;;) {
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q == end || *q == '#')
            break;
        tok t = {q, 0, p->line, (uint32_t)(q - p->line_start) + 1};
        while (q < end && *q != ' ' && *q != '\t' && *q != '\r' && *q != '#')
            q++;
        t.n = (uint32_t)(q - t.s);
        if (n == 3)
            return perr_tok(p, t, "unexpected word");
        words[n++] = t;
    }
    if (n == 0 || !tok_eq(words[0], "domain")) {
        tok t = n ? words[0] : (tok){s, 1, p->line, (uint32_t)(s - p->line_start) + 1};
        return perr_tok(p, t, "unknown directive");
    }
    if (n != 2)
        return n < 2 ? perr(p, words[0].line, words[0].col, "%%domain takes one domain name (or *)")
                     : perr_tok(p, words[2], "unexpected word");
    tok d = words[1];
    if (d.n == 1 && d.s[0] == '*') {
        p->has_dir_domain = false;
        return AG_OK;
    }
    if (d.n > 255)
        return perr(p, d.line, d.col, "domain longer than 255 bytes");
    for (uint32_t k = 0; k < d.n; k++)
        if (!is_domain_char(d.s[k]))
            return perr(p, d.line, d.col + k, "invalid character in domain");
    p->has_dir_domain = true;
    p->dir_domain = d;
    return AG_OK;
}

static ag_status parse_all(parser *p)
{
    const char *s = p->buf, *end = p->buf + p->len;
    while (s < end) {
        const char *eol = memchr(s, '\n', (size_t)(end - s));
        if (!eol)
            eol = end;
        p->line++;
        p->line_start = s;
        for (const char *c = s; c < eol; c++) {
            unsigned char ch = (unsigned char)*c;
            if ((ch < 0x20 && ch != '\t' && ch != '\r') || ch == 0x7f)
                return perr(p, p->line, (uint32_t)(c - s) + 1, "invalid character (byte 0x%02x)", ch);
        }
        const char *f = s;
        while (f < eol && (*f == ' ' || *f == '\t' || *f == '\r'))
            f++;
        if (f == eol || *f == '#') {
            /* blank or comment line: does not end an entry */
        } else if (f != s) {
            if (!p->open)
                return perr(p, p->line, (uint32_t)(f - s) + 1,
                            "continuation line outside an entry (an entry starts in column 1)");
            AG_TRY(scan_tokens(p, f, eol));
        } else {
            AG_TRY(finish_entry(p));
            if (*f == '%') {
                AG_TRY(directive(p, f, eol));
            } else {
                tok start = {f, 1, p->line, 1};
                reset_entry(p, start);
                AG_TRY(scan_tokens(p, f, eol));
            }
        }
        s = eol < end ? eol + 1 : end;
    }
    return finish_entry(p);
}

static void parser_free(parser *p)
{
    ag_vec_free(p->ctx, &p->types, sizeof(type_ref));
    ag_vec_free(p->ctx, &p->sp.ins, sizeof(op_anchor));
    ag_vec_free(p->ctx, &p->sp.outs, sizeof(op_anchor));
    ag_vec_free(p->ctx, &p->work_in, sizeof(op_anchor));
    ag_vec_free(p->ctx, &p->work_out, sizeof(op_anchor));
}

ag_status ag_ops_load_text(ag_ops *ops, const char *buf, size_t len, const char *filename)
{
    if (!ops || (!buf && len))
        return ops ? AG_ERR(ops->ctx, AG_EINVAL, "ag_ops_load_text: NULL buffer") : AG_EINVAL;
    ag_ctx *ctx = ops->ctx;
    if (!filename)
        filename = "<text>";
    if (!buf)
        buf = "";
    if (len > UINT32_MAX)
        return AG_ERR(ctx, AG_EINVAL, "%s: ops file too large", filename);
    if (ag_vec_reserve(ctx, &ops->arenas, sizeof(ag_arena), 1) != AG_OK)
        return AG_OOM(ctx);

    ag_arena arena;
    ag_arena_init(&arena, ctx);
    parser p;
    memset(&p, 0, sizeof p);
    p.ops = ops;
    p.ctx = ctx;
    p.filename = filename;
    p.buf = buf;
    p.len = len;
    p.arena = &arena;
    ag_strmap_init(&p.any);
    ag_strmap_init(&p.qual);
    ag_vec live = {0};
    ag_status st = AG_OK;

    p.file = ag_arena_strdup(&arena, filename);
    if (!p.file || ag_vec_reserve(ctx, &p.entries, sizeof(ag_op_info *), ops->entries.len + 64) != AG_OK) {
        st = AG_OOM(ctx);
        goto fail;
    }
    /* Rebuild the maps over the existing entries, in order, so that the new
     * state is complete on its own. */
    for (uint32_t k = 0; k < ops->entries.len; k++) {
        const ag_op_info *e = entry_at(&ops->entries, k);
        AG_VEC_AT(p.entries, const ag_op_info *, k) = e;
        if (ag_strmap_put(ctx, e->qualified ? &p.qual : &p.any, e->key, k) != AG_OK) {
            st = AG_OOM(ctx);
            goto fail;
        }
    }
    p.entries.len = ops->entries.len;

    st = parse_all(&p);
    if (st != AG_OK)
        goto fail;

    if (ag_vec_reserve(ctx, &live, sizeof(ag_op_info *), p.entries.len) != AG_OK) {
        st = AG_OOM(ctx);
        goto fail;
    }
    for (uint32_t k = 0; k < p.entries.len; k++) {
        const ag_op_info *e = entry_at(&p.entries, k);
        uint32_t idx;
        if (ag_strmap_get(e->qualified ? &p.qual : &p.any, e->key, &idx) && idx == k)
            AG_VEC_AT(live, const ag_op_info *, live.len++) = e;
    }

    /* Commit: nothing below can fail. */
    parser_free(&p);
    uint32_t didx;
    ops->dflt = ag_strmap_get(&p.any, "*", &didx) ? entry_at(&p.entries, didx) : &fallback_default;
    ag_vec_free(ctx, &ops->entries, sizeof(ag_op_info *));
    ag_vec_free(ctx, &ops->live, sizeof(ag_op_info *));
    ag_strmap_free(ctx, &ops->any);
    ag_strmap_free(ctx, &ops->qual);
    ops->entries = p.entries;
    ops->live = live;
    ops->any = p.any;
    ops->qual = p.qual;
    AG_VEC_AT(ops->arenas, ag_arena, ops->arenas.len++) = arena;
    return AG_OK;

fail:
    parser_free(&p);
    ag_vec_free(ctx, &live, sizeof(ag_op_info *));
    ag_vec_free(ctx, &p.entries, sizeof(ag_op_info *));
    ag_strmap_free(ctx, &p.any);
    ag_strmap_free(ctx, &p.qual);
    ag_arena_reset(&arena);
    return st;
}

ag_status ag_ops_load_file(ag_ops *ops, const char *path)
{
    if (!ops || !path)
        return ops ? AG_ERR(ops->ctx, AG_EINVAL, "ag_ops_load_file: NULL path") : AG_EINVAL;
    char *buf;
    size_t len;
    AG_TRY(ag_read_file(ops->ctx, path, &buf, &len));
    ag_status st = ag_ops_load_text(ops, buf, len, path);
    ag_free(ops->ctx, buf, len + 1);
    return st;
}

ag_status ag_ops_create(ag_ctx *ctx, ag_ops **out)
{
    if (!ctx || !out)
        return ctx ? AG_ERR(ctx, AG_EINVAL, "ag_ops_create: NULL argument") : AG_EINVAL;
    *out = NULL;
    ag_ops *ops = ag_calloc(ctx, 1, sizeof *ops);
    if (!ops)
        return AG_OOM(ctx);
    ops->ctx = ctx;
    ag_strmap_init(&ops->any);
    ag_strmap_init(&ops->qual);
    ops->dflt = &fallback_default;
    ag_status st = ag_ops_load_text(ops, ag_ops_builtin_text, (size_t)ag_ops_builtin_text_len, "<builtin>");
    if (st != AG_OK) {
        ag_ops_destroy(ops);
        return st;
    }
    *out = ops;
    return AG_OK;
}

void ag_ops_destroy(ag_ops *ops)
{
    if (!ops)
        return;
    ag_ctx *ctx = ops->ctx;
    for (uint32_t k = 0; k < ops->arenas.len; k++)
        ag_arena_reset(&AG_VEC_AT(ops->arenas, ag_arena, k));
    ag_vec_free(ctx, &ops->arenas, sizeof(ag_arena));
    ag_vec_free(ctx, &ops->entries, sizeof(ag_op_info *));
    ag_vec_free(ctx, &ops->live, sizeof(ag_op_info *));
    ag_strmap_free(ctx, &ops->any);
    ag_strmap_free(ctx, &ops->qual);
    ag_free(ctx, ops, sizeof *ops);
}

/* ---- dump ---- */

typedef struct outbuf {
    char buf[1024];
    size_t len;
    ag_sink sink;
    ag_status st;
} outbuf;

static void ob_flush(outbuf *b)
{
    if (b->st == AG_OK && b->len)
        b->st = b->sink.write(b->sink.ud, b->buf, b->len);
    b->len = 0;
}

static void ob_put(outbuf *b, const char *s)
{
    size_t n = strlen(s);
    while (n) {
        if (b->len == sizeof b->buf)
            ob_flush(b);
        size_t c = sizeof b->buf - b->len < n ? sizeof b->buf - b->len : n;
        memcpy(b->buf + b->len, s, c);
        b->len += c;
        s += c;
        n -= c;
    }
}

static void ob_num(outbuf *b, uint32_t v)
{
    char t[16];
    snprintf(t, sizeof t, "%u", v);
    ob_put(b, t);
}

static void dump_anchor(outbuf *b, const op_anchor *a, bool input)
{
    if (!a->set && !a->flags)
        return;
    ob_put(b, input ? " in" : " out");
    if (a->index == AG_OPS_WILD)
        ob_put(b, "*");
    else
        ob_num(b, a->index);
    ob_put(b, "=");
    bool first = true;
#define SEP_() (first ? (void)(first = false) : ob_put(b, ","))
    if (a->set & OPA_SET_ACCESS) {
        SEP_();
        ob_put(b, access_names[a->access]);
    }
    if (a->set & OPA_SET_REL) {
        SEP_();
        ob_put(b, rel_names[a->rel]);
        if (a->rel == AG_REL_REF || a->rel == AG_REL_VIEW || a->rel == AG_REL_REUSE) {
            ob_put(b, ":");
            ob_num(b, a->rel_in);
        }
    }
    if (a->set & OPA_SET_INPLACE) {
        SEP_();
        ob_put(b, "inplace:");
        ob_num(b, a->inplace_in);
    }
    if (a->set & OPA_SET_MEM) {
        SEP_();
        ob_put(b, "mem:");
        ob_put(b, ag_mem_type_name((ag_mem_type)a->mem));
    }
    for (size_t k = 0; k < COUNT_(anchor_flag_names); k++)
        if (a->flags & anchor_flag_names[k].bit) {
            SEP_();
            ob_put(b, anchor_flag_names[k].name);
        }
#undef SEP_
}

ag_status ag_ops_dump(const ag_ops *ops, ag_sink sink)
{
    outbuf b;
    b.len = 0;
    b.sink = sink;
    b.st = AG_OK;
    ob_put(&b, "# aliasguard op semantics registry (format: docs/ops.md)\n");
    for (uint32_t k = 0; k < ops->live.len && b.st == AG_OK; k++) {
        const ag_op_info *e = AG_VEC_AT(ops->live, const ag_op_info *, k);
        ob_put(&b, e->type);
        if (e->domain) {
            ob_put(&b, "@");
            ob_put(&b, e->domain[0] ? e->domain : "ai.onnx");
        }
        ob_put(&b, " : kind=");
        ob_put(&b, kind_names[e->kind]);
        for (size_t f = 0; f < COUNT_(flag_names); f++)
            if (e->flags & flag_names[f].bit) {
                ob_put(&b, " ");
                ob_put(&b, flag_names[f].name);
            }
        dump_anchor(&b, &e->in_wild, true);
        for (uint32_t i = 0; i < e->nin; i++)
            dump_anchor(&b, &e->ins[i], true);
        dump_anchor(&b, &e->out_wild, false);
        for (uint32_t o = 0; o < e->nout; o++)
            dump_anchor(&b, &e->outs[o], false);
        ob_put(&b, "\n");
    }
    ob_flush(&b);
    if (b.st != AG_OK)
        return AG_ERR(ops->ctx, b.st, "writing the op registry failed");
    return AG_OK;
}
