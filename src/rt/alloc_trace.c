/* Allocation traces (docs/runtime.md "Trace format"): the parser and the
 * replay on a device with either mode.  The replay times every operation
 * and, on request, checks each handed-out block against the order the
 * trace's events establish: every stream that used the memory before must
 * be ordered before the new owner (by waits, a sync, or, in the baseline
 * mode, a completed point the allocator could have observed). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "rt/alloc_internal.h"

enum { POOL_BEGIN = 0, POOL_END, POOL_RELEASE };

typedef struct trace_op {
    uint8_t kind;
    uint8_t sub; /* AG_TOP_POOL: POOL_BEGIN, POOL_END or POOL_RELEASE */
    uint32_t id; /* alloc/use/free: index of the ID; pool: of the pool's name */
    uint32_t s1, s2;
    uint64_t line; /* in the trace's text, for the replay's errors */
    uint64_t size;
} trace_op;

struct ag_alloc_trace {
    ag_ctx *ctx;
    ag_arena arena; /* ID strings and the trace's name */
    ag_vec ops;     /* trace_op */
    ag_vec ids;     /* const char *: each ID's text, by index */
    ag_vec pools;   /* const char *: each graph pool's name, by index */
    const char *name;
    uint32_t nids, nstreams;
};

static const char *const op_names[] = {
#define AG_TRACE_OP_NAME_(e, name) name,
    AG_TRACE_OP_LIST(AG_TRACE_OP_NAME_)
#undef AG_TRACE_OP_NAME_
};

const char *ag_trace_op_name(ag_trace_op op)
{
    return (unsigned)op < AG_TOP_COUNT_ ? op_names[op] : NULL;
}

void ag_alloc_trace_destroy(ag_alloc_trace *t)
{
    if (!t)
        return;
    ag_vec_free(t->ctx, &t->ops, sizeof(trace_op));
    ag_vec_free(t->ctx, &t->ids, sizeof(const char *));
    ag_vec_free(t->ctx, &t->pools, sizeof(const char *));
    ag_arena_reset(&t->arena);
    ag_free(t->ctx, t, sizeof *t);
}

uint32_t ag_alloc_trace_streams(const ag_alloc_trace *t)
{
    return t->nstreams;
}

uint64_t ag_alloc_trace_ops(const ag_alloc_trace *t)
{
    return t->ops.len;
}

/* Next blank-separated word of the line [*p, end); NULL at the end. */
static const char *word(const char **p, const char *end, size_t *len)
{
    const char *s = *p;
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\r'))
        s++;
    if (s == end || *s == '#') {
        *p = end;
        return NULL;
    }
    const char *e = s;
    while (e < end && *e != ' ' && *e != '\t' && *e != '\r' && *e != '#')
        e++;
    *len = (size_t)(e - s);
    *p = e;
    return s;
}

static bool parse_u64(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    while (len > 1 && *s == '0') { /* leading zeros: the value counts, not its spelling */
        s++;
        len--;
    }
    if (len == 0 || len > 20)
        return false;
    for (size_t k = 0; k < len; k++) {
        if (s[k] < '0' || s[k] > '9')
            return false;
        uint64_t d = (uint64_t)(s[k] - '0');
        if (v > (UINT64_MAX - d) / 10u)
            return false;
        v = v * 10u + d;
    }
    *out = v;
    return true;
}

/* A graph pool while the trace is read: the streams allocating from it,
 * and the line of its begin still open (for errors); released: not begun
 * since its release (or never). */
typedef struct pool_state {
    uint32_t routed;
    bool live;
    uint64_t line;
} pool_state;

typedef struct parser {
    ag_alloc_trace *t;
    ag_strmap ids;
    ag_strmap pool_ids;
    ag_vec pool_st; /* pool_state, by pool index */
    uint32_t *in_pool; /* per stream (AG_ALLOC_MAX_STREAMS, made at the first pool_begin): pool index + 1, or 0 */
    uint64_t *in_line; /* ... the line of that begin */
    const char *name;
    uint64_t line;
    bool have_streams;
} parser;

/* An ID as errors show it: at most 64 characters, so that the message's
 * reason is never cut off behind a long one. */
typedef struct id_text {
    char s[72];
} id_text;

/* A word of the trace (n bytes at w) for a message: up to 64 bytes, a
 * longer one shortened to 61 and '...', so that the reason still shows. */
static id_text word_show(const char *w, size_t n)
{
    id_text t;
    if (n <= 64)
        snprintf(t.s, sizeof t.s, "%.*s", (int)n, w);
    else
        snprintf(t.s, sizeof t.s, "%.61s...", w);
    return t;
}

static id_text id_show(const char *id)
{
    return word_show(id, strlen(id));
}

static ag_status perr(parser *ps, const char *what)
{
    return AG_ERR(ps->t->ctx, AG_EPARSE, "%s:%llu: %s", ps->name, (unsigned long long)ps->line, what);
}

static ag_status get_stream(parser *ps, const char **p, const char *end, uint32_t *out)
{
    size_t len = 0;
    const char *w = word(p, end, &len);
    uint64_t v;
    if (!w || !parse_u64(w, len, &v) || v >= AG_ALLOC_MAX_STREAMS)
        return AG_ERR(ps->t->ctx, AG_EPARSE, "%s:%llu: expected a stream number below %u", ps->name,
                      (unsigned long long)ps->line,
                      AG_ALLOC_MAX_STREAMS);
    if (ps->have_streams && v >= ps->t->nstreams)
        return AG_ERR(ps->t->ctx, AG_EPARSE, "%s:%llu: stream %llu out of range (streams %u)", ps->name,
                      (unsigned long long)ps->line,
                      (unsigned long long)v, ps->t->nstreams);
    if (!ps->have_streams && v + 1u > ps->t->nstreams)
        ps->t->nstreams = (uint32_t)v + 1u;
    *out = (uint32_t)v;
    return AG_OK;
}

/* The next word, copied into the trace's arena; none: AG_EPARSE with
 * missing as the reason. */
static ag_status get_word(parser *ps, const char **p, const char *end, const char *missing, char **key)
{
    size_t len = 0;
    const char *w = word(p, end, &len);
    if (!w)
        return perr(ps, missing);
    *key = ag_arena_strndup(&ps->t->arena, w, len);
    return *key ? AG_OK : AG_OOM(ps->t->ctx);
}

static ag_status get_id(parser *ps, const char **p, const char *end, bool create, uint32_t *out)
{
    char *key;
    AG_TRY(get_word(ps, p, end, "expected a block ID", &key));
    uint32_t v;
    if (ag_strmap_get(&ps->ids, key, &v)) {
        *out = v;
        return AG_OK;
    }
    if (!create)
        return AG_ERR(ps->t->ctx, AG_EPARSE, "%s:%llu: block '%s' was never allocated", ps->name,
                      (unsigned long long)ps->line, id_show(key).s);
    AG_TRY(ag_strmap_put(ps->t->ctx, &ps->ids, key, ps->t->nids) == AG_OK ? AG_OK : AG_OOM(ps->t->ctx));
    AG_TRY(ag_vec_push(ps->t->ctx, &ps->t->ids, sizeof key, &key) == AG_OK ? AG_OK : AG_OOM(ps->t->ctx));
    *out = ps->t->nids++;
    return AG_OK;
}

static const char *pool_name(const ag_alloc_trace *t, uint32_t k)
{
    return ((const char *const *)t->pools.data)[k];
}

/* A graph pool's name: its index, a new one at its first mention. */
static ag_status get_pool(parser *ps, const char **p, const char *end, uint32_t *out)
{
    char *key;
    AG_TRY(get_word(ps, p, end, "expected a graph pool's name", &key));
    if (ag_strmap_get(&ps->pool_ids, key, out))
        return AG_OK;
    pool_state z = {0};
    uint32_t k = (uint32_t)ps->t->pools.len;
    if (ag_strmap_put(ps->t->ctx, &ps->pool_ids, key, k) != AG_OK ||
        ag_vec_push(ps->t->ctx, &ps->t->pools, sizeof key, &key) != AG_OK ||
        ag_vec_push(ps->t->ctx, &ps->pool_st, sizeof z, &z) != AG_OK)
        return AG_OOM(ps->t->ctx);
    *out = k;
    return AG_OK;
}

/* pool_begin P S, pool_end S, pool_release P S: each stream in at most
 * one pool at a time, a pool released only when no stream is in it. */
static ag_status parse_pool(parser *ps, trace_op *op, const char **p, const char *end)
{
    if (!ps->in_pool) {
        ps->in_pool = ag_calloc(ps->t->ctx, AG_ALLOC_MAX_STREAMS, sizeof *ps->in_pool);
        ps->in_line = ag_calloc(ps->t->ctx, AG_ALLOC_MAX_STREAMS, sizeof *ps->in_line);
        if (!ps->in_pool || !ps->in_line)
            return AG_OOM(ps->t->ctx);
    }
    ag_ctx *ctx = ps->t->ctx;
    unsigned long long line = (unsigned long long)ps->line;
    if (op->sub != POOL_END)
        AG_TRY(get_pool(ps, p, end, &op->id));
    AG_TRY(get_stream(ps, p, end, &op->s1));
    uint32_t *in = &ps->in_pool[op->s1];
    if (op->sub == POOL_END) {
        if (!*in)
            return AG_ERR(ctx, AG_EPARSE, "%s:%llu: stream %u allocates from no graph pool", ps->name, line, op->s1);
        op->id = *in - 1u;
        AG_VEC_AT(ps->pool_st, pool_state, op->id).routed--;
        *in = 0;
        return AG_OK;
    }
    pool_state *g = &AG_VEC_AT(ps->pool_st, pool_state, op->id);
    if (op->sub == POOL_BEGIN) {
        if (*in)
            return AG_ERR(ctx, AG_EPARSE, "%s:%llu: stream %u already allocates from graph pool '%s' (line %llu)",
                          ps->name, line, op->s1, id_show(pool_name(ps->t, *in - 1u)).s,
                          (unsigned long long)ps->in_line[op->s1]);
        if (!g->live)
            g->line = ps->line;
        g->live = true;
        g->routed++;
        *in = op->id + 1u;
        ps->in_line[op->s1] = ps->line;
        return AG_OK;
    }
    if (!g->live)
        return AG_ERR(ctx, AG_EPARSE, "%s:%llu: graph pool '%s' was never begun, or is released", ps->name, line,
                      id_show(pool_name(ps->t, op->id)).s);
    if (g->routed)
        return AG_ERR(ctx, AG_EPARSE, "%s:%llu: graph pool '%s': %u stream(s) still allocate from it (pool_end first)",
                      ps->name, line, id_show(pool_name(ps->t, op->id)).s, g->routed);
    g->live = false;
    return AG_OK;
}

/* At the end: every pool ended and released. */
static ag_status pools_closed(parser *ps)
{
    for (uint32_t s = 0; ps->in_pool && s < AG_ALLOC_MAX_STREAMS; s++)
        if (ps->in_pool[s])
            return AG_ERR(ps->t->ctx, AG_EPARSE, "%s:%llu: stream %u allocates from graph pool '%s' at the end of "
                          "the trace (pool_end missing)", ps->name, (unsigned long long)ps->in_line[s], s,
                          id_show(pool_name(ps->t, ps->in_pool[s] - 1u)).s);
    for (uint32_t k = 0; k < ps->pool_st.len; k++) {
        const pool_state *g = &AG_VEC_AT(ps->pool_st, pool_state, k);
        if (g->live)
            return AG_ERR(ps->t->ctx, AG_EPARSE, "%s:%llu: graph pool '%s' is never released (pool_release missing)",
                          ps->name, (unsigned long long)g->line, id_show(pool_name(ps->t, k)).s);
    }
    return AG_OK;
}

static ag_status parse_line(parser *ps, const char *p, const char *end)
{
    size_t len = 0;
    const char *w = word(&p, end, &len);
    if (!w)
        return AG_OK;
    trace_op op = {.line = ps->line};
#define IS(lit) (len == sizeof(lit) - 1u && memcmp(w, lit, len) == 0)
    if (IS("streams")) {
        uint64_t v;
        const char *n = word(&p, end, &len);
        if (ps->t->ops.len || ps->have_streams)
            return perr(ps, "'streams' must come before every operation");
        if (!n || !parse_u64(n, len, &v) || v == 0 || v > AG_ALLOC_MAX_STREAMS)
            return perr(ps, "'streams' needs a count from 1 to 4096");
        ps->t->nstreams = (uint32_t)v;
        ps->have_streams = true;
        goto tail;
    } else if (IS("alloc")) {
        op.kind = AG_TOP_ALLOC;
        AG_TRY(get_id(ps, &p, end, true, &op.id));
        const char *n = word(&p, end, &len);
        if (!n || !parse_u64(n, len, &op.size) || op.size == 0)
            return perr(ps, "'alloc' needs a size in bytes, a whole number from 1 to 18446744073709551615");
        AG_TRY(get_stream(ps, &p, end, &op.s1));
    } else if (IS("use") || IS("free")) {
        op.kind = IS("use") ? AG_TOP_USE : AG_TOP_FREE;
        AG_TRY(get_id(ps, &p, end, false, &op.id));
        AG_TRY(get_stream(ps, &p, end, &op.s1));
    } else if (IS("record") || IS("wait")) {
        op.kind = IS("record") ? AG_TOP_RECORD : AG_TOP_WAIT;
        AG_TRY(get_stream(ps, &p, end, &op.s1));
        AG_TRY(get_stream(ps, &p, end, &op.s2));
        if (op.s1 == op.s2)
            return perr(ps, "a stream cannot record for or wait on itself");
    } else if (IS("sync")) {
        op.kind = AG_TOP_SYNC;
    } else if (IS("pool_begin") || IS("pool_end") || IS("pool_release")) {
        op.kind = AG_TOP_POOL;
        op.sub = IS("pool_begin") ? POOL_BEGIN : IS("pool_end") ? POOL_END : POOL_RELEASE;
        AG_TRY(parse_pool(ps, &op, &p, end));
    } else {
        return AG_ERR(ps->t->ctx, AG_EPARSE,
                      "%s:%llu: unknown operation '%s' (expected streams, alloc, use, free, record, wait, sync, "
                      "pool_begin, pool_end, pool_release)",
                      ps->name, (unsigned long long)ps->line, word_show(w, len).s);
    }
#undef IS
    if (ag_vec_push(ps->t->ctx, &ps->t->ops, sizeof op, &op) != AG_OK)
        return AG_OOM(ps->t->ctx);
tail:
    if (word(&p, end, &len))
        return perr(ps, "unexpected text after the operation");
    return AG_OK;
}

ag_status ag_alloc_trace_parse(ag_ctx *ctx, const char *name, const char *text, size_t len, ag_alloc_trace **out)
{
    if (!name)
        name = "<trace>";
    ag_alloc_trace *t = ag_calloc(ctx, 1, sizeof *t);
    if (!t)
        return AG_OOM(ctx);
    t->ctx = ctx;
    ag_arena_init(&t->arena, ctx);
    t->name = ag_arena_strdup(&t->arena, name);
    if (!t->name) {
        ag_alloc_trace_destroy(t);
        return AG_OOM(ctx);
    }
    parser ps = {.t = t, .name = t->name};
    ag_strmap_init(&ps.ids);
    ag_strmap_init(&ps.pool_ids);
    ag_status st = AG_OK;
    const char *p = text, *end = text + len;
    while (p < end && st == AG_OK) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        ps.line++;
        if (memchr(p, '\0', (size_t)(le - p)))
            /* the words are kept as C strings: one would end there */
            st = perr(&ps, "a NUL byte in the line (a text trace has none)");
        else
            st = parse_line(&ps, p, le);
        p = nl ? nl + 1 : end;
    }
    if (st == AG_OK)
        st = pools_closed(&ps);
    if (st == AG_OK && t->nstreams == 0)
        t->nstreams = 1;
    ag_strmap_free(ctx, &ps.ids);
    ag_strmap_free(ctx, &ps.pool_ids);
    ag_vec_free(ctx, &ps.pool_st, sizeof(pool_state));
    ag_free(ctx, ps.in_pool, AG_ALLOC_MAX_STREAMS * sizeof *ps.in_pool);
    ag_free(ctx, ps.in_line, AG_ALLOC_MAX_STREAMS * sizeof *ps.in_line);
    if (st != AG_OK) {
        ag_alloc_trace_destroy(t);
        return st;
    }
    *out = t;
    return AG_OK;
}

/* ---- replay ---- */

/* A stream's last use of a block: its position in that stream. */
typedef struct use_at {
    uint32_t stream;
    uint32_t pad_;
    uint64_t pos;
} use_at;

/* Memory freed and not handed out since: a node of a treap keyed by lo
 * (random priorities), its ranges disjoint.  A handout carves its range
 * out, so that a long trace keeps one node per range of memory whose last
 * use is still to be checked, and finds the ranges it overlaps in
 * logarithmic time. */
typedef struct retired {
    uintptr_t lo, hi;
    ag_vec uses; /* use_at: each stream that used the memory, its last use */
    uint32_t prio;
    struct retired *left, *right;
} retired;

typedef struct replay {
    ag_ctx *ctx;
    ag_device *dev;
    const ag_alloc_trace *t;
    ag_memalloc *a;
    uint32_t n;
    bool check;
    ag_dev_stream **streams;
    ag_block **blk;      /* per ID: live block or NULL */
    uint32_t *pool;      /* per graph pool of the trace: the allocator's ID, 0 when released */
    uint32_t *users;     /* per ID: streams' uses not yet freed */
    uint32_t live;       /* IDs live now */
    uint64_t *pos;       /* per stream: operations so far */
    uint64_t *clock;     /* n x n: what stream s knows of stream u */
    uint64_t **evclock;  /* n x n: clock carried by the last record src -> dst
                          * (n words, made at the pair's first record) */
    ag_vec *uses;        /* per ID: use_at, the streams that used it so far */
    retired *ret;        /* the treap's root */
    uint32_t nret;       /* its nodes */
    retired *held;       /* the live blocks' memory (nodes without uses) */
    uint32_t rng;        /* xorshift state of the priorities */
    uintptr_t last_lo;   /* where the last retire put its node (a failed
                          * free may leave its block object recycled) */
    uint64_t violations;
    ag_vec marks;        /* n words per mark the allocator took (hooks), from mark_base + 1 on */
    uint64_t mark_base;  /* marks dropped from the front: no deferred free held them */
    uint64_t trim_at;    /* marks stored before the next look for ones to drop */
    bool hook_oom;       /* a mark could not be stored: fail the replay */
    ag_timed *timed;
} replay;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void know_all(replay *r)
{
    for (uint32_t s = 0; s < r->n; s++)
        for (uint32_t u = 0; u < r->n; u++)
            r->clock[(size_t)s * r->n + u] = r->pos[u];
}

/* The allocator's happens-before hooks: a mark is a copy of the stream's
 * clock; a join merges it into one stream's clock or into every one. */
static uint64_t hb_mark(void *ud, uint32_t stream)
{
    replay *r = ud;
    size_t n = r->n;
    uint64_t *row = r->clock + stream * n;
    row[stream] = r->pos[stream];
    size_t at = r->marks.len;
    for (size_t u = 0; u < n; u++)
        if (ag_vec_push(r->ctx, &r->marks, sizeof(uint64_t), &row[u]) != AG_OK) {
            r->hook_oom = true;
            r->marks.len = at;
            return 0;
        }
    return r->mark_base + at / n + 1u;
}

/* Stream row c learns what clock m knows. */
static void clock_merge(uint64_t *c, const uint64_t *m, size_t n)
{
    for (size_t u = 0; u < n; u++)
        if (m[u] > c[u])
            c[u] = m[u];
}

static void hb_join(void *ud, uint32_t stream, uint64_t mark)
{
    replay *r = ud;
    size_t n = r->n;
    if (mark == 0)
        return;
    ag_assert(mark > r->mark_base); /* a mark still held is never dropped */
    const uint64_t *m = (const uint64_t *)r->marks.data + (mark - 1u - r->mark_base) * n;
    for (uint32_t s = stream == UINT32_MAX ? 0 : stream; s < n; s++) {
        clock_merge(r->clock + s * n, m, n);
        if (stream != UINT32_MAX)
            break;
    }
}

/* Drops the marks no deferred free holds any more: only a deferred free's
 * entry holds a mark past the call that took it, marks are taken in
 * increasing order, and each stream's queue holds them in that order, so
 * the oldest one held is the front of some queue.  Looked for once the
 * marks stored have doubled: amortised, each is moved at most once. */
static void marks_trim(replay *r)
{
    size_t n = r->n;
    uint64_t stored = r->marks.len / n;
    if (r->a->npend == 0) {
        r->mark_base += stored;
        r->marks.len = 0;
        return;
    }
    if (stored < r->trim_at)
        return;
    uint64_t oldest = r->mark_base + stored + 1u;
    for (uint32_t k = 0; k < r->n; k++) {
        const ag_astream *s = &r->a->st[k];
        if (s->pend_head < s->npend && s->pend[s->pend_head].mark && s->pend[s->pend_head].mark < oldest)
            oldest = s->pend[s->pend_head].mark;
    }
    uint64_t drop = oldest - 1u - r->mark_base;
    if (drop) {
        uint64_t *m = r->marks.data;
        memmove(m, m + drop * n, (size_t)(stored - drop) * n * sizeof *m);
        r->marks.len = (uint32_t)((stored - drop) * n);
        r->mark_base += drop;
    }
    r->trim_at = 2u * (stored - drop) > 64u ? 2u * (stored - drop) : 64u;
}

/* ---- the retired memory (treap) ---- */

/* *l takes the nodes of t with lo below key, *r the others. */
static void ret_split(retired *t, uintptr_t key, retired **l, retired **r)
{
    if (!t) {
        *l = *r = NULL;
    } else if (t->lo < key) {
        ret_split(t->right, key, &t->right, r);
        *l = t;
    } else {
        ret_split(t->left, key, l, &t->left);
        *r = t;
    }
}

/* Every node of l below every node of r. */
static retired *ret_merge(retired *l, retired *r)
{
    if (!l)
        return r;
    if (!r)
        return l;
    if (l->prio > r->prio) {
        l->right = ret_merge(l->right, r);
        return l;
    }
    r->left = ret_merge(l, r->left);
    return r;
}

/* Frees a node (the caller uncounts it if it was in the treap). */
static void ret_free(replay *r, retired *e)
{
    ag_vec_free(r->ctx, &e->uses, sizeof(use_at));
    ag_free(r->ctx, e, sizeof *e);
}

static void ret_free_all(replay *r, retired *t)
{
    if (!t)
        return;
    ret_free_all(r, t->left);
    ret_free_all(r, t->right);
    ret_free(r, t);
}

static retired *ret_new(replay *r, uintptr_t lo, uintptr_t hi)
{
    retired *e = ag_alloc(r->ctx, sizeof *e);
    if (!e)
        return NULL;
    memset(e, 0, sizeof *e);
    e->lo = lo;
    e->hi = hi;
    r->rng ^= r->rng << 13;
    r->rng ^= r->rng >> 17;
    r->rng ^= r->rng << 5;
    e->prio = r->rng;
    return e;
}

/* The node of t that starts last below key (NULL: none). */
static retired *ret_last_below(retired *t, uintptr_t key)
{
    retired *pred = NULL;
    while (t)
        if (t->lo < key) {
            pred = t;
            t = t->right;
        } else {
            t = t->left;
        }
    return pred;
}

/* Puts e into the treap at *root, by its lo. */
static void ret_insert(retired **root, retired *e)
{
    retired *left, *right;
    ret_split(*root, e->lo, &left, &right);
    *root = ret_merge(ret_merge(left, e), right);
}

/* The treap's shape (debug level 3): in order of lo, ranges disjoint and
 * not empty, each priority at least its children's; the nodes counted. */
static uint32_t ret_valid(const retired *t, uintptr_t lo, uintptr_t hi)
{
    if (!t)
        return 0;
    if (t->lo < lo || t->hi > hi || t->lo >= t->hi || (t->left && t->left->prio > t->prio) ||
        (t->right && t->right->prio > t->prio))
        return UINT32_MAX;
    uint32_t a = ret_valid(t->left, lo, t->lo), b = ret_valid(t->right, t->hi, hi);
    return a == UINT32_MAX || b == UINT32_MAX ? UINT32_MAX : a + b + 1u;
}

/* Counts the uses of e that stream s is not ordered after (s UINT32_MAX:
 * no check). */
static void ret_check(replay *r, const retired *e, uint32_t s)
{
    if (s == UINT32_MAX)
        return;
    const use_at *u = e->uses.data;
    for (uint32_t j = 0; j < e->uses.len; j++)
        if (r->clock[(size_t)s * r->n + u[j].stream] < u[j].pos)
            r->violations++;
}

/* Visits t, the nodes that start in [lo, hi), in order: each is checked and
 * freed, but a last one reaching past hi, which keeps its part from hi on
 * (returned). */
static retired *ret_drain(replay *r, retired *t, uintptr_t hi, uint32_t s)
{
    if (!t)
        return NULL;
    retired *keep = ret_drain(r, t->left, hi, s);
    retired *right = t->right;
    ret_check(r, t, s);
    if (t->hi > hi) {
        t->lo = hi;
        t->left = t->right = NULL;
        keep = t;
    } else {
        ret_free(r, t);
        r->nret--;
    }
    retired *k2 = ret_drain(r, right, hi, s);
    return k2 ? k2 : keep;
}

/* The retired memory loses [lo, hi), each node it overlapped checked for
 * stream s first (UINT32_MAX: none).  A node reaching over both ends
 * splits, which takes a node and a copy of its uses: made before anything
 * changes, so that a host out of memory leaves the treap as it was. */
static ag_status ret_carve(replay *r, uintptr_t lo, uintptr_t hi, uint32_t s)
{
    retired *pred = ret_last_below(r->ret, lo);
    retired *piece = NULL;
    if (pred && pred->hi > hi) {
        piece = ret_new(r, hi, pred->hi);
        if (!piece)
            return AG_OOM(r->ctx);
        if (pred->uses.len && ag_vec_reserve(r->ctx, &piece->uses, sizeof(use_at), pred->uses.len) != AG_OK) {
            ret_free(r, piece);
            return AG_OOM(r->ctx);
        }
        memcpy(piece->uses.data, pred->uses.data, pred->uses.len * sizeof(use_at));
        piece->uses.len = pred->uses.len;
    }
    retired *left, *mid, *right;
    ret_split(r->ret, lo, &left, &mid);
    ret_split(mid, hi, &mid, &right);
    if (pred && pred->hi > lo) {
        ret_check(r, pred, s);
        pred->hi = lo;
    }
    retired *kept = ret_drain(r, mid, hi, s);
    if (kept)
        right = ret_merge(kept, right);
    if (piece) {
        right = ret_merge(piece, right);
        r->nret++;
    }
    r->ret = ret_merge(left, right);
    ag_assert_expensive(ret_valid(r->ret, 0, UINTPTR_MAX) == r->nret);
    return AG_OK;
}

/* A node for id's block's range (*out), that range carved out of the
 * retired memory first, each node it overlapped checked for stream s
 * (UINT32_MAX: none).  On failure nothing changed. */
static ag_status carve_for(replay *r, uint32_t id, uint32_t s, retired **out)
{
    uintptr_t lo = (uintptr_t)ag_block_ptr(r->blk[id]);
    retired *e = ret_new(r, lo, lo + ag_block_size(r->blk[id]));
    if (!e)
        return AG_OOM(r->ctx);
    ag_status st = ret_carve(r, e->lo, e->hi, s);
    if (st != AG_OK) {
        ret_free(r, e);
        return st;
    }
    *out = e;
    return AG_OK;
}

/* The block just handed to stream s for ID id must be ordered after every
 * earlier use of any memory it overlaps; that memory is no longer retired
 * (the new owner's own uses will stand for it), and held by the block. */
static ag_status check_handout(replay *r, uint32_t id, uint32_t s)
{
    retired *h = NULL;
    AG_TRY(carve_for(r, id, s, &h));
    uintptr_t lo = h->lo, hi = h->hi;
    /* nor over a live block's memory: the one that starts last below hi
     * is the only one that can reach past lo (live blocks are disjoint
     * unless this has counted already) */
    const retired *pred = ret_last_below(r->held, hi);
    if (pred && pred->hi > lo)
        r->violations++;
    ret_insert(&r->held, h);
    return AG_OK;
}

/* Takes out of the treap at *root a node that starts at lo (there must be
 * one; alone: the only one) and returns it, its children put back. */
static retired *ret_cut_at(retired **root, uintptr_t lo, bool alone)
{
    retired *left, *mid, *right;
    ret_split(*root, lo, &left, &mid);
    ret_split(mid, lo + 1u, &mid, &right);
    ag_assert(mid && (!alone || (!mid->left && !mid->right)));
    retired *rest = ret_merge(mid->left, mid->right);
    mid->left = mid->right = NULL;
    *root = ret_merge(ret_merge(left, rest), right);
    return mid;
}

/* The memory of a block at lo is no longer held (its last free); a
 * counted overlap may have left a second node there. */
static void unhold(replay *r, uintptr_t lo)
{
    ret_free(r, ret_cut_at(&r->held, lo, false));
}

/* The memory of id keeps its uses, for the blocks handed out over it
 * later; the ID starts a new list at its next alloc.  (The carve finds
 * nothing: the handout took the range out, and live blocks do not
 * overlap.) */
static ag_status retire(replay *r, uint32_t id)
{
    retired *e = NULL;
    AG_TRY(carve_for(r, id, UINT32_MAX, &e));
    e->uses = r->uses[id];
    memset(&r->uses[id], 0, sizeof r->uses[id]);
    ret_insert(&r->ret, e);
    r->nret++;
    r->last_lo = e->lo;
    return AG_OK;
}

/* The free of id failed: its uses are its own again. */
static void unretire(replay *r, uint32_t id)
{
    retired *e = ret_cut_at(&r->ret, r->last_lo, true);
    r->uses[id] = e->uses;
    memset(&e->uses, 0, sizeof e->uses);
    ret_free(r, e);
    r->nret--;
}

/* Stream s used id at its position now. */
static ag_status note_use(replay *r, uint32_t id, uint32_t s)
{
    ag_vec *v = &r->uses[id];
    use_at *u = v->data;
    for (uint32_t j = 0; j < v->len; j++)
        if (u[j].stream == s) {
            u[j].pos = r->pos[s];
            return AG_OK;
        }
    use_at add = {.stream = s, .pos = r->pos[s]};
    return ag_vec_push(r->ctx, v, sizeof add, &add) == AG_OK ? AG_OK : AG_OOM(r->ctx);
}

/* The ID of a trace's block, for errors. */
static id_text id_name(const ag_alloc_trace *t, uint32_t id)
{
    return id_show(((const char *const *)t->ids.data)[id]);
}

/* The message of the failure st: the context's, or the status's name. */
typedef struct fail_text {
    char s[512];
} fail_text;

static fail_text fail_msg(ag_ctx *ctx, ag_status st)
{
    fail_text t;
    const char *m = ag_ctx_last_status(ctx) == st ? ag_ctx_errmsg(ctx) : NULL;
    snprintf(t.s, sizeof t.s, "%s", m && *m ? m : ag_status_str(st));
    return t;
}

/* A failure at op (the replay's own checks or the allocator's): its
 * message, with the place in the trace in front. */
static ag_status at_op(replay *r, const trace_op *op, ag_status st)
{
    return AG_ERR(r->ctx, st, "%s:%llu: %s", r->t->name, (unsigned long long)op->line, fail_msg(r->ctx, st).s);
}

/* A use or free the allocator refused: its message, with the block named
 * (the allocator knows blocks, not the trace's IDs). */
static ag_status blk_fail(replay *r, const trace_op *op, ag_status st)
{
    return AG_ERR(r->ctx, st, "block '%s': %s", id_name(r->t, op->id).s, fail_msg(r->ctx, st).s);
}

static ag_status run_op(replay *r, const trace_op *op)
{
    ag_ctx *ctx = r->ctx;
    size_t n = r->n;
    switch (op->kind) {
    case AG_TOP_ALLOC:
        if (r->blk[op->id])
            return AG_ERR(ctx, AG_EINVAL, "block '%s' allocated again before its last free", id_name(r->t, op->id).s);
        AG_TRY(ag_alloc_malloc(r->a, op->s1, op->size, &r->blk[op->id]));
        r->live++;
        ag_timed_kernel(r->timed, r->streams[op->s1]); /* the producer */
        r->users[op->id] = 1;
        if (r->check) {
            r->pos[op->s1]++;
            r->clock[op->s1 * n + op->s1] = r->pos[op->s1];
            ag_assert(r->uses[op->id].len == 0); /* moved to the retired memory at its last free */
            AG_TRY(check_handout(r, op->id, op->s1));
            AG_TRY(note_use(r, op->id, op->s1));
        }
        return AG_OK;
    case AG_TOP_USE:
    case AG_TOP_FREE: {
        ag_block *b = r->blk[op->id];
        if (!b)
            return AG_ERR(ctx, AG_EINVAL, "block '%s' is not live: every stream that used it has freed it",
                          id_name(r->t, op->id).s);
        if (r->check) {
            r->pos[op->s1]++;
            r->clock[op->s1 * n + op->s1] = r->pos[op->s1];
            AG_TRY(note_use(r, op->id, op->s1));
        }
        if (op->kind == AG_TOP_USE) {
            ag_status st = ag_alloc_access(r->a, b, op->s1);
            if (st != AG_OK)
                return blk_fail(r, op, st);
            ag_timed_kernel(r->timed, r->streams[op->s1]); /* a consumer */
            r->users[op->id]++;
            return AG_OK;
        }
        /* the last free makes the memory reusable: retire it first */
        bool last = r->users[op->id] == 1;
        uintptr_t lo = (uintptr_t)ag_block_ptr(b);
        if (r->check && last)
            AG_TRY(retire(r, op->id));
        ag_status st = ag_alloc_free(r->a, b, op->s1);
        if (st != AG_OK) {
            if (r->check && last)
                unretire(r, op->id);
            return blk_fail(r, op, st);
        }
        if (--r->users[op->id] == 0) {
            r->blk[op->id] = NULL;
            r->live--;
            if (r->check)
                unhold(r, lo);
        }
        return AG_OK;
    }
    case AG_TOP_RECORD: {
        uint64_t **ev = r->check ? &r->evclock[op->s1 * n + op->s2] : NULL;
        if (ev && !*ev && !(*ev = ag_alloc(ctx, n * sizeof **ev)))
            return AG_OOM(ctx);
        AG_TRY(ag_alloc_send(r->a, op->s1, op->s2));
        if (ev) {
            r->clock[op->s1 * n + op->s1] = r->pos[op->s1];
            memcpy(*ev, r->clock + op->s1 * n, n * sizeof **ev);
        }
        return AG_OK;
    }
    case AG_TOP_WAIT:
        AG_TRY(ag_alloc_wait(r->a, op->s1, op->s2));
        if (r->check && r->evclock[op->s2 * n + op->s1]) /* (none: no record yet) */
            clock_merge(r->clock + op->s1 * n, r->evclock[op->s2 * n + op->s1], n);
        return AG_OK;
    case AG_TOP_SYNC:
        AG_TRY(ag_alloc_sync(r->a, AG_SYNC_LAST));
        AG_TRY(ag_alloc_sync(r->a, AG_SYNC_CLEAN));
        if (r->check)
            know_all(r);
        return AG_OK;
    case AG_TOP_POOL: {
        uint32_t *id = &r->pool[op->id];
        if (op->sub == POOL_BEGIN) {
            if (!*id)
                AG_TRY(ag_alloc_pool_create(r->a, id));
            return ag_alloc_pool_begin(r->a, op->s1, *id);
        }
        if (op->sub == POOL_END)
            return ag_alloc_pool_end(r->a, op->s1);
        AG_TRY(ag_alloc_pool_release(r->a, *id, op->s1));
        *id = 0;
        return AG_OK;
    }
    }
    return AG_ERR(ctx, AG_EINTERNAL, "unknown operation kind %u", op->kind);
}

static void replay_free(replay *r, ag_device *tdev, ag_dev_stream **streams)
{
    ag_ctx *ctx = r->ctx;
    size_t n = r->n;
    ag_alloc_destroy(r->a);
    ag_vec_free(ctx, &r->marks, sizeof(uint64_t));
    if (streams) {
        for (uint32_t k = 0; k < n; k++)
            ag_dev_stream_destroy(tdev, streams[k]);
        ag_free(ctx, streams, n * sizeof *streams);
    }
    ag_device_destroy(tdev);
    ret_free_all(r, r->ret);
    ret_free_all(r, r->held);
    ag_free(ctx, r->blk, (size_t)r->t->nids * sizeof *r->blk);
    ag_free(ctx, r->pool, r->t->pools.len * sizeof *r->pool);
    ag_free(ctx, r->users, (size_t)r->t->nids * sizeof *r->users);
    ag_free(ctx, r->pos, n * sizeof *r->pos);
    ag_free(ctx, r->clock, n * n * sizeof *r->clock);
    if (r->evclock) {
        for (size_t k = 0; k < n * n; k++)
            if (r->evclock[k])
                ag_free(ctx, r->evclock[k], n * sizeof(uint64_t));
        ag_free(ctx, r->evclock, n * n * sizeof *r->evclock);
    }
    if (r->uses) {
        for (uint32_t k = 0; k < r->t->nids; k++)
            ag_vec_free(ctx, &r->uses[k], sizeof(use_at));
        ag_free(ctx, r->uses, (size_t)r->t->nids * sizeof *r->uses);
    }
}

ag_status ag_alloc_replay(ag_ctx *ctx, ag_device *dev, const ag_alloc_trace *t, const ag_alloc_config *cfg,
                          const ag_alloc_replay_opts *opts, ag_alloc_replay_result *res)
{
    ag_alloc_config c;
    if (cfg)
        c = *cfg;
    else
        ag_alloc_config_default(&c);
    ag_alloc_replay_opts o = {.size = sizeof o};
    if (opts) {
        if (opts->size < sizeof o)
            return AG_ERR(ctx, AG_EINVAL, "replay: options size %zu, expected %zu", opts->size, sizeof o);
        o = *opts;
    }
    if (c.nstreams < t->nstreams)
        c.nstreams = t->nstreams;
    if (o.check && c.nstreams > AG_ALLOC_CHECK_MAX_STREAMS)
        return AG_ERR(ctx, AG_EINVAL, "%s: replay check: at most %u streams, the replay has %u", t->name,
                      AG_ALLOC_CHECK_MAX_STREAMS, c.nstreams);
    replay r = {.ctx = ctx, .dev = dev, .t = t, .n = c.nstreams, .check = o.check, .rng = 2463534242u};
    size_t n = r.n;
    ag_device *tdev = NULL;
    AG_TRY(ag_timed_wrap(dev, o.kernel_ticks, &r.timed, &tdev));
    ag_dev_stream **streams = ag_calloc(ctx, n, sizeof *streams);
    if (!streams) {
        ag_device_destroy(tdev);
        return AG_OOM(ctx);
    }
    r.streams = streams;
    ag_status st = AG_OK;
    for (uint32_t k = 0; k < n && st == AG_OK; k++)
        st = ag_dev_stream_create(tdev, &streams[k]);
    if (st != AG_OK) {
        replay_free(&r, tdev, streams);
        return st;
    }
    if (t->nids) {
        r.blk = ag_calloc(ctx, t->nids, sizeof *r.blk);
        r.users = ag_calloc(ctx, t->nids, sizeof *r.users);
        if (!r.blk || !r.users)
            st = AG_OOM(ctx);
    }
    if (t->pools.len && !(r.pool = ag_calloc(ctx, t->pools.len, sizeof *r.pool)))
        st = AG_OOM(ctx);
    if (o.check) {
        r.pos = ag_calloc(ctx, n, sizeof *r.pos);
        r.clock = ag_calloc(ctx, n * n, sizeof *r.clock);
        r.evclock = ag_calloc(ctx, n * n, sizeof *r.evclock);
        r.uses = t->nids ? ag_calloc(ctx, t->nids, sizeof *r.uses) : NULL;
        if (!r.pos || !r.clock || !r.evclock || (t->nids && !r.uses))
            st = AG_OOM(ctx);
    }
    if (st == AG_OK)
        st = ag_alloc_create(ctx, tdev, streams, &c, &r.a);
    if (st == AG_OK && o.check) {
        r.a->hb_mark = hb_mark;
        r.a->hb_join = hb_join;
        r.a->hb_ud = &r;
    }
    ag_alloc_replay_result out;
    memset(&out, 0, sizeof out);
    out.size = sizeof out;
    const trace_op *ops = t->ops.data;
    uint64_t calls0 = ag_timed_calls(r.timed);
    uint32_t runs = o.runs ? o.runs : 1u;
    double t0 = now_s();
    for (uint32_t run = 0; run < runs && st == AG_OK; run++) {
        /* from the end: an ID allocated more than once is live by its last alloc */
        for (uint32_t k = t->ops.len; run > 0 && r.live && k-- > 0;)
            if (ops[k].kind == AG_TOP_ALLOC && r.blk[ops[k].id]) {
                st = AG_ERR(ctx, AG_EINVAL,
                            "%s:%llu: block '%s' is still live at the end of the trace, which %u runs replay "
                            "again: every block must be freed",
                            t->name, (unsigned long long)ops[k].line, id_name(t, ops[k].id).s, runs);
                break;
            }
        for (uint32_t k = 0; k < t->ops.len && st == AG_OK; k++) {
            ag_timed_tick(r.timed);
            double a0 = now_s();
            st = run_op(&r, &ops[k]);
            double a1 = now_s();
            if (st != AG_OK)
                st = at_op(&r, &ops[k], st);
            out.count[ops[k].kind]++;
            out.seconds[ops[k].kind] += a1 - a0;
            if (st == AG_OK && r.hook_oom)
                st = AG_OOM(ctx);
            if (r.check)
                marks_trim(&r);
        }
    }
    if (st == AG_OK) {
        ag_timed_tick(r.timed);
        double a0 = now_s();
        st = ag_alloc_sync(r.a, AG_SYNC_LAST);
        if (st == AG_OK)
            st = ag_alloc_sync(r.a, AG_SYNC_CLEAN);
        out.count[AG_TOP_SYNC]++;
        out.seconds[AG_TOP_SYNC] += now_s() - a0;
    }
    out.total_seconds = now_s() - t0;
    out.device_calls = ag_timed_calls(r.timed) - calls0;
    if (st == AG_OK && r.hook_oom)
        st = AG_OOM(ctx);
    if (st == AG_OK) {
        out.stats.size = sizeof out.stats;
        ag_alloc_stats_get(r.a, &out.stats, NULL);
        out.violations = r.violations;
        out.device_ticks = ag_timed_makespan(r.timed);
        if (res) {
            size_t sz = res->size < sizeof out ? res->size : sizeof out;
            memcpy(res, &out, sz);
            res->size = sz;
        }
    }
    replay_free(&r, tdev, streams);
    return st;
}

/* ---- the trace's own order ---- */

/* Where an ID was last allocated: the stream, its position then, the line. */
typedef struct produced {
    uint64_t pos, line; /* line 0: never allocated yet */
    uint32_t stream;
} produced;

typedef struct order_pass {
    size_t n;
    uint64_t *pos;    /* per stream: its alloc, use and free lines so far */
    uint64_t *clock;  /* n x n: what stream s knows of stream u */
    uint64_t **ev;    /* n x n: the clock the last record src -> dst carried
                       * (n words, made at the pair's first record) */
    produced *prod;   /* per ID */
} order_pass;

static void order_free(ag_ctx *ctx, order_pass *o, uint32_t nids)
{
    size_t n = o->n;
    if (o->ev)
        for (size_t k = 0; k < n * n; k++)
            ag_free(ctx, o->ev[k], n * sizeof(uint64_t));
    ag_free(ctx, o->ev, n * n * sizeof *o->ev);
    ag_free(ctx, o->clock, n * n * sizeof *o->clock);
    ag_free(ctx, o->pos, n * sizeof *o->pos);
    ag_free(ctx, o->prod, (size_t)nids * sizeof *o->prod);
}

/* One operation of the pass; a use the clocks do not put after its block's
 * alloc is counted in *r (the first described). */
static ag_status order_step(ag_ctx *ctx, const ag_alloc_trace *t, order_pass *o, const trace_op *op,
                            ag_alloc_trace_order *r)
{
    size_t n = o->n;
    uint64_t *row = o->clock + (size_t)op->s1 * n;
    switch (op->kind) {
    case AG_TOP_ALLOC:
    case AG_TOP_USE:
    case AG_TOP_FREE:
        row[op->s1] = ++o->pos[op->s1];
        if (op->kind == AG_TOP_ALLOC) {
            o->prod[op->id] = (produced){.pos = o->pos[op->s1], .line = op->line, .stream = op->s1};
            return AG_OK;
        }
        const produced *p = &o->prod[op->id];
        if (op->kind == AG_TOP_FREE || !p->line || p->stream == op->s1 || row[p->stream] >= p->pos)
            return AG_OK;
        if (r->unordered_uses++ == 0)
            snprintf(r->first, sizeof r->first,
                     "%s:%llu: stream %u uses block '%s', allocated on stream %u at line %llu, with no record and "
                     "wait (or sync) ordering it after the alloc",
                     t->name, (unsigned long long)op->line, op->s1, id_name(t, op->id).s, p->stream,
                     (unsigned long long)p->line);
        return AG_OK;
    case AG_TOP_RECORD: {
        uint64_t **ev = &o->ev[(size_t)op->s1 * n + op->s2];
        if (!*ev && !(*ev = ag_alloc(ctx, n * sizeof **ev)))
            return AG_OOM(ctx);
        memcpy(*ev, row, n * sizeof **ev);
        return AG_OK;
    }
    case AG_TOP_WAIT:
        if (o->ev[(size_t)op->s2 * n + op->s1]) /* (none: no record yet) */
            clock_merge(row, o->ev[(size_t)op->s2 * n + op->s1], n);
        return AG_OK;
    case AG_TOP_SYNC:
        for (size_t s = 0; s < n; s++)
            memcpy(o->clock + s * n, o->pos, n * sizeof *o->pos);
        return AG_OK;
    case AG_TOP_POOL:
        return AG_OK; /* (a release's waits are the allocator's, not the trace's) */
    }
    return AG_ERR(ctx, AG_EINTERNAL, "unknown operation kind %u", op->kind);
}

ag_status ag_alloc_trace_order_check(ag_ctx *ctx, const ag_alloc_trace *t, ag_alloc_trace_order *out)
{
    if (!t || !out || out->size == 0)
        return AG_ERR(ctx, AG_EINVAL, "trace order check: trace or result missing, or result size 0");
    size_t n = t->nstreams;
    if (n > AG_ALLOC_CHECK_MAX_STREAMS)
        return AG_ERR(ctx, AG_EINVAL, "%s: trace order check: at most %u streams, the trace has %zu", t->name,
                      AG_ALLOC_CHECK_MAX_STREAMS, n);
    ag_alloc_trace_order r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    order_pass o = {.n = n};
    o.pos = ag_calloc(ctx, n, sizeof *o.pos);
    o.clock = ag_calloc(ctx, n * n, sizeof *o.clock);
    o.ev = ag_calloc(ctx, n * n, sizeof *o.ev);
    o.prod = ag_calloc(ctx, t->nids, sizeof *o.prod);
    ag_status st = o.pos && o.clock && o.ev && o.prod ? AG_OK : AG_OOM(ctx);
    const trace_op *ops = t->ops.data;
    for (size_t k = 0; k < t->ops.len && st == AG_OK; k++)
        st = order_step(ctx, t, &o, &ops[k], &r);
    order_free(ctx, &o, t->nids);
    if (st != AG_OK)
        return st;
    size_t sz = out->size < sizeof r ? out->size : sizeof r;
    memcpy(out, &r, sz);
    out->size = sz;
    return AG_OK;
}
