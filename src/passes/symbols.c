/* Memory symbols of a graph (reference notes 4.2): which anchors share one
 * buffer.  Nodes are visited in topological order so every producer has its
 * symbol before its consumers ask for it; symbols are named after the anchor
 * that created them and united by the reference's size rule. */
#include <stdio.h>
#include <stdlib.h>

#include "passes/symbols.h"

#define PNI "_parent_node_index"

typedef struct sym_rec {
    const char *name; /* arena */
    ag_vec anchors;   /* ag_lanchor */
    bool alive;
} sym_rec;

typedef struct sym_key {
    const char *name;
    uint32_t id;
} sym_key;

struct ag_symtab {
    ag_ctx *ctx;
    const ag_graph *g;
    const ag_ops *ops;
    ag_arena arena;
    ag_sub_id top;
    bool nested;
    uint32_t cap;      /* node capacity at the build */
    uint32_t *in_base; /* per node: first flat input slot, AG_NONE outside the mapped graphs */
    uint32_t *out_base;
    uint32_t *in_cnt;
    uint32_t *out_cnt;
    size_t base_cap;   /* entries of the four arrays above when heap-allocated (one-subgraph tables) */
    uint32_t *in_sym;  /* per flat slot: symbol id or AG_NONE */
    uint32_t *out_sym;
    uint32_t nin, nout; /* flat slots */
    ag_vec syms;       /* sym_rec, indexed by symbol id */
    uint32_t *order;   /* live symbol ids by name */
    uint32_t norder;
};

/* ---- small queries ---- */

static ag_op_kind kind_of(const ag_symtab *t, ag_node_id n)
{
    return ag_ops_node_kind(t->ops, t->g, n);
}

static const char *sub_desc(const ag_graph *g, ag_sub_id s, char *buf, size_t cap)
{
    ag_node_id p = ag_sub_parent(g, s);
    if (p == AG_NONE)
        snprintf(buf, cap, "graph '%s'", ag_sub_name(g, s));
    else
        snprintf(buf, cap, "subgraph '%s' of node \"%s\" (%s)", ag_sub_name(g, s), ag_node_name(g, p),
                 ag_node_type(g, p));
    return buf;
}

bool ag_symtab_is_subgraph_data(const ag_ops *ops, const ag_graph *g, ag_node_id n)
{
    int64_t idx;
    return ag_sub_parent(g, ag_node_owner(g, n)) != AG_NONE && ag_op_kind_is_data_like(ag_ops_node_kind(ops, g, n)) &&
           ag_attrs_get_int(ag_node_attrs_c(g, n), PNI, &idx);
}

bool ag_symtab_ref_from_input(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t o, uint32_t *in_idx)
{
    if (ag_node_num_inputs(g, n) == 0 && ag_symtab_is_subgraph_data(ops, g, n)) {
        *in_idx = AG_NONE;
        return true;
    }
    uint32_t k = 0;
    if (ag_ops_output_ref(ops, g, n, o, &k) == AG_REL_FRESH)
        return false;
    *in_idx = k;
    return true;
}

size_t ag_lanchor_format(const ag_graph *g, const ag_lanchor *a, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s_%s_%u", ag_node_name(g, a->node), a->is_input ? "in" : "out", (unsigned)a->index);
    return n < 0 ? 0 : (size_t)n;
}

bool ag_lanchor_eq(const ag_lanchor *a, const ag_lanchor *b)
{
    return a->node == b->node && a->index == b->index && a->is_input == b->is_input;
}

/* Flat slot of an anchor, or NULL outside the mapped graphs. */
static uint32_t *slot_of(const ag_symtab *t, const ag_lanchor *a)
{
    if (a->node >= t->cap)
        return NULL;
    /* A one-subgraph table fills its per-node arrays for that subgraph's
     * nodes only (build), so any other node is outside it. */
    if (!t->nested && (!ag_node_alive(t->g, a->node) || ag_node_owner(t->g, a->node) != t->top))
        return NULL;
    if (a->is_input) {
        if (t->in_base[a->node] == AG_NONE || a->index >= t->in_cnt[a->node])
            return NULL;
        return &t->in_sym[t->in_base[a->node] + a->index];
    }
    if (t->out_base[a->node] == AG_NONE || a->index >= t->out_cnt[a->node])
        return NULL;
    return &t->out_sym[t->out_base[a->node] + a->index];
}

uint32_t ag_symtab_symbol_of(const ag_symtab *t, const ag_lanchor *a)
{
    const uint32_t *s = slot_of(t, a);
    return s ? *s : AG_NONE;
}

static sym_rec *sym_at(const ag_symtab *t, uint32_t id)
{
    return &AG_VEC_AT(t->syms, sym_rec, id);
}

/* ---- table edits ---- */

static ag_status new_symbol(ag_symtab *t, const ag_lanchor *a)
{
    uint32_t *slot = slot_of(t, a);
    ag_assert_internal(slot != NULL && *slot == AG_NONE);
    size_t need = ag_lanchor_format(t->g, a, NULL, 0) + 1;
    char *name = ag_arena_alloc(&t->arena, need);
    if (name == NULL)
        return AG_OOM(t->ctx);
    ag_lanchor_format(t->g, a, name, need);
    sym_rec rec = {name, {0}, true};
    if (ag_vec_push(t->ctx, &rec.anchors, sizeof *a, a) != AG_OK)
        return AG_OOM(t->ctx);
    if (ag_vec_push(t->ctx, &t->syms, sizeof rec, &rec) != AG_OK) {
        ag_vec_free(t->ctx, &rec.anchors, sizeof *a);
        return AG_OOM(t->ctx);
    }
    *slot = t->syms.len - 1;
    return AG_OK;
}

/* Appends a (not yet placed) to symbol sym. */
static ag_status join(ag_symtab *t, const ag_lanchor *a, uint32_t sym)
{
    uint32_t *slot = slot_of(t, a);
    ag_assert_internal(slot != NULL);
    if (*slot != AG_NONE)
        return AG_OK;
    if (ag_vec_push(t->ctx, &sym_at(t, sym)->anchors, sizeof *a, a) != AG_OK)
        return AG_OOM(t->ctx);
    *slot = sym;
    return AG_OK;
}

static ag_status unvisited(ag_symtab *t, const ag_lanchor *from, const ag_lanchor *need)
{
    char where[256];
    const ag_graph *g = t->g;
    return AG_ERR(t->ctx, AG_EINVAL,
                  "%s: node \"%s\" (%s) %s %u: the buffer of node \"%s\" (%s) output %u has no symbol yet "
                  "(producer not visited before its consumer)",
                  sub_desc(g, ag_node_owner(g, from->node), where, sizeof where), ag_node_name(g, from->node),
                  ag_node_type(g, from->node), from->is_input ? "input" : "output", (unsigned)from->index,
                  ag_node_name(g, need->node), ag_node_type(g, need->node), (unsigned)need->index);
}

/* a joins the symbol of existing anchor e. */
static ag_status join_anchor(ag_symtab *t, const ag_lanchor *a, const ag_lanchor *e)
{
    uint32_t s = ag_symtab_symbol_of(t, e);
    if (s == AG_NONE)
        return unvisited(t, a, e);
    return join(t, a, s);
}

/* UnionSymbolMapping: the larger list survives (the second on a tie). */
static ag_status unite(ag_symtab *t, const ag_lanchor *a1, const ag_lanchor *a2, uint32_t *out)
{
    uint32_t s1 = ag_symtab_symbol_of(t, a1), s2 = ag_symtab_symbol_of(t, a2);
    if (s1 == AG_NONE)
        return unvisited(t, a2, a1);
    if (s2 == AG_NONE)
        return unvisited(t, a1, a2);
    if (s1 == s2) {
        *out = s1;
        return AG_OK;
    }
    sym_rec *r1 = sym_at(t, s1), *r2 = sym_at(t, s2);
    uint32_t keep = r1->anchors.len > r2->anchors.len ? s1 : s2;
    uint32_t drop = keep == s1 ? s2 : s1;
    sym_rec *rk = sym_at(t, keep), *rd = sym_at(t, drop);
    if (ag_vec_reserve(t->ctx, &rk->anchors, sizeof(ag_lanchor), rd->anchors.len) != AG_OK)
        return AG_OOM(t->ctx);
    for (uint32_t k = 0; k < rd->anchors.len; k++) {
        ag_lanchor x = AG_VEC_AT(rd->anchors, ag_lanchor, k);
        AG_VEC_AT(rk->anchors, ag_lanchor, rk->anchors.len++) = x;
        *slot_of(t, &x) = keep;
    }
    ag_vec_free(t->ctx, &rd->anchors, sizeof(ag_lanchor));
    rd->alive = false;
    *out = keep;
    return AG_OK;
}

/* ---- visiting nodes ---- */

static ag_status plain_input(ag_symtab *t, ag_node_id n, uint32_t i)
{
    ag_lanchor a = {n, i, true};
    ag_port p = ag_node_input_src(t->g, n, i);
    if (p.node == AG_NONE)
        return new_symbol(t, &a);
    ag_lanchor e = {p.node, p.index, false};
    return join_anchor(t, &a, &e);
}

/* NetOutput of a subgraph below top: input i with _parent_node_index k ties
 * its producer to the parent's output k. */
static ag_status subgraph_output(ag_symtab *t, ag_node_id n)
{
    const ag_graph *g = t->g;
    ag_node_id parent = ag_sub_parent(g, ag_node_owner(g, n));
    uint32_t nin = ag_node_num_inputs(g, n);
    for (uint32_t i = 0; i < nin; i++) {
        int64_t k;
        ag_port p = ag_node_input_src(g, n, i);
        if (p.node == AG_NONE || !ag_attrs_get_int(ag_node_input_desc_c(g, n, i)->attrs, PNI, &k)) {
            AG_TRY(plain_input(t, n, i));
            continue;
        }
        if (k < 0 || (uint64_t)k >= ag_node_num_outputs(g, parent)) {
            char where[256];
            return AG_ERR(t->ctx, AG_EINVAL, "%s: node \"%s\" (%s) input %u: _parent_node_index %lld out of range "
                                             "(parent has %u outputs)",
                          sub_desc(g, ag_node_owner(g, n), where, sizeof where), ag_node_name(g, n),
                          ag_node_type(g, n), (unsigned)i, (long long)k, (unsigned)ag_node_num_outputs(g, parent));
        }
        ag_lanchor prod = {p.node, p.index, false}, pout = {parent, (uint32_t)k, false}, a = {n, i, true};
        uint32_t sym;
        AG_TRY(unite(t, &prod, &pout, &sym));
        AG_TRY(join(t, &a, sym));
    }
    return AG_OK;
}

/* Merge / StreamMerge: every producer's buffer is the same one. */
static ag_status merge_inputs(ag_symtab *t, ag_node_id n)
{
    const ag_graph *g = t->g;
    uint32_t nin = ag_node_num_inputs(g, n);
    ag_lanchor best = {AG_NONE, 0, false};
    uint32_t best_size = 0;
    for (uint32_t i = 0; i < nin; i++) {
        ag_port p = ag_node_input_src(g, n, i);
        if (p.node == AG_NONE)
            continue;
        ag_lanchor e = {p.node, p.index, false};
        uint32_t s = ag_symtab_symbol_of(t, &e);
        if (s == AG_NONE) {
            ag_lanchor a = {n, i, true};
            return unvisited(t, &a, &e);
        }
        if (sym_at(t, s)->anchors.len > best_size) {
            best = e;
            best_size = sym_at(t, s)->anchors.len;
        }
    }
    if (best.node == AG_NONE)
        return AG_OK; /* nothing connected: the reference maps none of the inputs */
    uint32_t sym = AG_NONE;
    for (uint32_t i = 0; i < nin; i++) {
        ag_port p = ag_node_input_src(g, n, i);
        if (p.node == AG_NONE)
            continue;
        ag_lanchor e = {p.node, p.index, false};
        AG_TRY(unite(t, &best, &e, &sym));
    }
    for (uint32_t i = 0; i < nin; i++) {
        ag_port p = ag_node_input_src(g, n, i);
        if (p.node != AG_NONE) {
            ag_lanchor a = {n, i, true};
            AG_TRY(join(t, &a, sym));
            continue;
        }
        const char *next = NULL;
        if (!ag_attrs_get_string(ag_node_attrs_c(g, n), "_next_iteration_node", &next) || next == NULL ||
            next[0] == '\0')
            continue;
        ag_node_id nx = ag_sub_find_node(g, ag_node_owner(g, n), next);
        if (nx == AG_NONE || ag_node_num_outputs(g, nx) == 0) {
            char where[256];
            return AG_ERR(t->ctx, AG_EINVAL,
                          "%s: node \"%s\" (%s) input %u: _next_iteration_node \"%s\" is not a node with an output "
                          "in this graph",
                          sub_desc(g, ag_node_owner(g, n), where, sizeof where), ag_node_name(g, n),
                          ag_node_type(g, n), (unsigned)i, next);
        }
        ag_lanchor a = {nx, 0, false};
        if (slot_of(t, &a) != NULL)
            AG_TRY(join(t, &a, sym));
    }
    return AG_OK;
}

static ag_status map_inputs(ag_symtab *t, ag_node_id n)
{
    const ag_graph *g = t->g;
    ag_op_kind k = kind_of(t, n);
    bool nested_node = ag_node_owner(g, n) != t->top;
    if (nested_node && k == AG_OPK_NETOUTPUT)
        return subgraph_output(t, n);
    uint32_t nin = ag_node_num_inputs(g, n);
    if (nested_node && nin > 0 && ag_symtab_is_subgraph_data(t->ops, g, n)) {
        /* An IR that gives a subgraph Data an input: it stands for the
         * parent's input (input 0 only, as in the reference). */
        int64_t idx = 0;
        ag_attrs_get_int(ag_node_attrs_c(g, n), PNI, &idx);
        ag_node_id parent = ag_sub_parent(g, ag_node_owner(g, n));
        if (idx >= 0 && (uint64_t)idx < ag_node_num_inputs(g, parent)) {
            ag_port p = ag_node_input_src(g, parent, (uint32_t)idx);
            for (uint32_t i = 0; i < nin; i++) {
                ag_lanchor a = {n, i, true};
                if (i == 0 && p.node != AG_NONE) {
                    ag_lanchor e = {p.node, p.index, false};
                    AG_TRY(join_anchor(t, &a, &e));
                } else {
                    AG_TRY(new_symbol(t, &a));
                }
            }
            return AG_OK;
        }
    }
    if (k == AG_OPK_MERGE || k == AG_OPK_STREAM_MERGE)
        return merge_inputs(t, n);
    for (uint32_t i = 0; i < nin; i++)
        AG_TRY(plain_input(t, n, i));
    return AG_OK;
}

/* The RefData a "ref from other" output refers to, or AG_NONE. */
static ag_status ref_other_target(ag_symtab *t, ag_node_id n, uint32_t o, ag_node_id *out)
{
    const ag_graph *g = t->g;
    *out = AG_NONE;
    const char *var = ag_ops_output_ref_var(g, n, o);
    if (var != NULL && var[0] != '\0') {
        ag_node_id x = ag_sub_find_node(g, ag_node_owner(g, n), var);
        if (x != AG_NONE && kind_of(t, x) == AG_OPK_REF_DATA)
            *out = x;
        return AG_OK;
    }
    int64_t idx;
    ag_sub_id s = ag_node_owner(g, n);
    if (kind_of(t, n) != AG_OPK_REF_DATA || ag_sub_parent(g, s) == AG_NONE ||
        ag_attrs_get_int(ag_node_attrs_c(g, n), PNI, &idx))
        return AG_OK;
    /* A RefData inside a subgraph stands for the subgraph input that is
     * ordered before it by a control edge. */
    uint32_t nc = ag_node_num_ctrl_in(g, n);
    for (uint32_t k = 0; k < nc; k++) {
        ag_node_id d = ag_node_ctrl_in(g, n, k);
        if (ag_op_kind_is_data_like(kind_of(t, d))) {
            *out = d;
            return AG_OK;
        }
    }
    char where[256];
    return AG_ERR(t->ctx, AG_EINVAL,
                  "%s: node \"%s\" (%s) output %u: a RefData inside a subgraph needs a control edge from the "
                  "subgraph input it refers to",
                  sub_desc(g, s, where, sizeof where), ag_node_name(g, n), ag_node_type(g, n), (unsigned)o);
}

static ag_status map_outputs(ag_symtab *t, ag_node_id n)
{
    const ag_graph *g = t->g;
    uint32_t nout = ag_node_num_outputs(g, n);
    for (uint32_t o = 0; o < nout; o++) {
        ag_lanchor a = {n, o, false};
        if (ag_symtab_symbol_of(t, &a) != AG_NONE)
            continue;
        ag_node_id x;
        AG_TRY(ref_other_target(t, n, o, &x));
        if (x != AG_NONE && x != n) {
            ag_lanchor xo = {x, 0, false};
            uint32_t s = ag_symtab_symbol_of(t, &xo);
            if (s != AG_NONE) {
                AG_TRY(join(t, &a, s));
                continue;
            }
        }
        uint32_t in;
        if (ag_symtab_ref_from_input(t->ops, g, n, o, &in)) {
            if (in != AG_NONE) {
                ag_lanchor ia = {n, in, true};
                if (ag_symtab_symbol_of(t, &ia) != AG_NONE) {
                    AG_TRY(join_anchor(t, &a, &ia));
                    continue;
                }
            } else if (ag_node_owner(g, n) != t->top) {
                /* Subgraph input below top: the parent's producer's buffer. */
                int64_t idx = -1;
                ag_attrs_get_int(ag_node_attrs_c(g, n), PNI, &idx);
                ag_node_id parent = ag_sub_parent(g, ag_node_owner(g, n));
                if (idx < 0 || (uint64_t)idx >= ag_node_num_inputs(g, parent)) {
                    char where[256];
                    return AG_ERR(t->ctx, AG_EINVAL,
                                  "%s: node \"%s\" (%s) output 0: _parent_node_index %lld out of range (parent has "
                                  "%u inputs)",
                                  sub_desc(g, ag_node_owner(g, n), where, sizeof where), ag_node_name(g, n),
                                  ag_node_type(g, n), (long long)idx, (unsigned)ag_node_num_inputs(g, parent));
                }
                ag_port p = ag_node_input_src(g, parent, (uint32_t)idx);
                if (p.node != AG_NONE) {
                    ag_lanchor e = {p.node, p.index, false};
                    AG_TRY(join_anchor(t, &a, &e));
                    continue;
                }
            }
        }
        AG_TRY(new_symbol(t, &a));
    }
    return AG_OK;
}

/* ---- build ---- */

static int cmp_key(const void *pa, const void *pb)
{
    const sym_key *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    if (c != 0)
        return c;
    return a->id < b->id ? -1 : a->id > b->id;
}

static ag_status sort_symbols(ag_symtab *t)
{
    uint32_t live = 0;
    for (uint32_t s = 0; s < t->syms.len; s++)
        live += sym_at(t, s)->alive;
    sym_key *keys = ag_calloc(t->ctx, (size_t)live + 1, sizeof *keys);
    t->order = ag_arena_alloc(&t->arena, ((size_t)live + 1) * sizeof *t->order);
    if (keys == NULL || t->order == NULL) {
        ag_free(t->ctx, keys, ((size_t)live + 1) * sizeof *keys);
        return AG_OOM(t->ctx);
    }
    uint32_t k = 0;
    for (uint32_t s = 0; s < t->syms.len; s++)
        if (sym_at(t, s)->alive)
            keys[k++] = (sym_key){sym_at(t, s)->name, s};
    qsort(keys, live, sizeof *keys, cmp_key);
    for (k = 0; k < live; k++)
        t->order[k] = keys[k].id;
    t->norder = live;
    ag_free(t->ctx, keys, ((size_t)live + 1) * sizeof *keys);
    return AG_OK;
}

/* Per subgraph: is it mapped (top, or below top when nested)? */
static ag_status scope_of(ag_symtab *t, bool **out)
{
    const ag_graph *g = t->g;
    uint32_t ns = ag_graph_sub_count(g);
    bool *in = ag_arena_alloc(&t->arena, (size_t)ns + 1);
    if (in == NULL)
        return AG_OOM(t->ctx);
    for (ag_sub_id s = 0; s < ns; s++) {
        if (!ag_sub_alive(g, s))
            continue;
        if (!t->nested) {
            in[s] = s == t->top;
            continue;
        }
        for (ag_sub_id x = s;;) {
            if (x == t->top) {
                in[s] = true;
                break;
            }
            ag_node_id p = ag_sub_parent(g, x);
            if (p == AG_NONE)
                break;
            x = ag_node_owner(g, p);
        }
    }
    *out = in;
    return AG_OK;
}

static ag_status build(ag_symtab *t)
{
    const ag_graph *g = t->g;
    bool *in_scope = NULL; /* nested tables only: a one-subgraph table walks its own nodes */
    if (t->nested)
        AG_TRY(scope_of(t, &in_scope));
    size_t cap = (size_t)t->cap + 1;
    if (t->nested) {
        t->in_base = ag_arena_alloc(&t->arena, cap * sizeof(uint32_t));
        t->out_base = ag_arena_alloc(&t->arena, cap * sizeof(uint32_t));
        t->in_cnt = ag_arena_alloc(&t->arena, cap * sizeof(uint32_t));
        t->out_cnt = ag_arena_alloc(&t->arena, cap * sizeof(uint32_t));
    } else {
        /* A table of one subgraph (the control-flow pre-pass makes one per
         * branch) must cost what the subgraph costs: the arrays stay
         * uninitialised and only the subgraph's nodes are filled; slot_of
         * rejects every other node by its owner. */
        t->base_cap = cap;
        t->in_base = ag_alloc(t->ctx, cap * sizeof(uint32_t));
        t->out_base = ag_alloc(t->ctx, cap * sizeof(uint32_t));
        t->in_cnt = ag_alloc(t->ctx, cap * sizeof(uint32_t));
        t->out_cnt = ag_alloc(t->ctx, cap * sizeof(uint32_t));
    }
    if (!t->in_base || !t->out_base || !t->in_cnt || !t->out_cnt)
        return AG_OOM(t->ctx);
    uint64_t nin = 0, nout = 0;
    uint32_t nscan = t->nested ? t->cap : ag_sub_node_count(g, t->top);
    for (uint32_t k = 0; k < nscan; k++) {
        ag_node_id n = t->nested ? k : ag_sub_node_at(g, t->top, k);
        t->in_base[n] = t->out_base[n] = AG_NONE;
        if (!ag_node_alive(g, n) || (in_scope && !in_scope[ag_node_owner(g, n)]))
            continue;
        t->in_base[n] = (uint32_t)nin;
        t->out_base[n] = (uint32_t)nout;
        t->in_cnt[n] = ag_node_num_inputs(g, n);
        t->out_cnt[n] = ag_node_num_outputs(g, n);
        nin += t->in_cnt[n];
        nout += t->out_cnt[n];
        if (nin + nout >= UINT32_MAX)
            return AG_ERR(t->ctx, AG_EINVAL, "graph '%s': too many anchors", ag_sub_name(g, t->top));
    }
    t->in_sym = ag_arena_alloc(&t->arena, (size_t)(nin + 1) * sizeof(uint32_t));
    t->out_sym = ag_arena_alloc(&t->arena, (size_t)(nout + 1) * sizeof(uint32_t));
    if (!t->in_sym || !t->out_sym)
        return AG_OOM(t->ctx);
    t->nin = (uint32_t)nin;
    t->nout = (uint32_t)nout;
    memset(t->in_sym, 0xff, (size_t)nin * sizeof(uint32_t));
    memset(t->out_sym, 0xff, (size_t)nout * sizeof(uint32_t));

    /* A table of one subgraph alone needs only that subgraph's order: the
     * control-flow pre-pass builds one per branch, and sorting the whole
     * graph each time would make it quadratic. */
    uint32_t total = t->nested ? ag_graph_node_count(g) : ag_sub_node_count(g, t->top), count = 0;
    ag_node_id *order = ag_calloc(t->ctx, (size_t)total + 1, sizeof *order);
    if (order == NULL)
        return AG_OOM(t->ctx);
    ag_status st = t->nested ? ag_graph_topo_order(g, order, &count) : ag_sub_topo_order(g, t->top, order, &count);
    for (uint32_t k = 0; st == AG_OK && k < count; k++) {
        ag_node_id n = order[k];
        if (n >= t->cap || t->in_base[n] == AG_NONE)
            continue;
        if ((st = map_inputs(t, n)) == AG_OK)
            st = map_outputs(t, n);
    }
    ag_free(t->ctx, order, ((size_t)total + 1) * sizeof *order);
    AG_TRY(st);
    return sort_symbols(t);
}

ag_status ag_symtab_build(ag_pass_env *env, ag_sub_id top, bool nested, ag_symtab **out)
{
    ag_graph *g = env->g;
    ag_ctx *ctx = ag_graph_ctx(g);
    *out = NULL;
    if (!ag_sub_alive(g, top))
        return AG_ERR(ctx, AG_EINVAL, "symbol table: subgraph id %u is not a live subgraph", (unsigned)top);
    ag_symtab *t = ag_calloc(ctx, 1, sizeof *t);
    if (t == NULL)
        return AG_OOM(ctx);
    t->ctx = ctx;
    t->g = g;
    t->ops = env->ops;
    t->top = top;
    t->nested = nested;
    t->cap = ag_graph_node_capacity(g);
    ag_arena_init(&t->arena, ctx);
    ag_status st = build(t);
    if (st != AG_OK) {
        ag_symtab_destroy(t);
        return st;
    }
    *out = t;
    return AG_OK;
}

void ag_symtab_destroy(ag_symtab *t)
{
    if (t == NULL)
        return;
    for (uint32_t s = 0; s < t->syms.len; s++)
        ag_vec_free(t->ctx, &sym_at(t, s)->anchors, sizeof(ag_lanchor));
    ag_vec_free(t->ctx, &t->syms, sizeof(sym_rec));
    if (t->base_cap) {
        ag_free(t->ctx, t->in_base, t->base_cap * sizeof(uint32_t));
        ag_free(t->ctx, t->out_base, t->base_cap * sizeof(uint32_t));
        ag_free(t->ctx, t->in_cnt, t->base_cap * sizeof(uint32_t));
        ag_free(t->ctx, t->out_cnt, t->base_cap * sizeof(uint32_t));
    }
    ag_arena_reset(&t->arena);
    ag_free(t->ctx, t, sizeof *t);
}

uint32_t ag_symtab_count(const ag_symtab *t)
{
    return t->norder;
}

uint32_t ag_symtab_at(const ag_symtab *t, uint32_t k)
{
    return k < t->norder ? t->order[k] : AG_NONE;
}

const char *ag_symtab_name(const ag_symtab *t, uint32_t sym)
{
    return sym < t->syms.len ? sym_at(t, sym)->name : NULL;
}

uint32_t ag_symtab_size(const ag_symtab *t, uint32_t sym)
{
    return sym < t->syms.len ? sym_at(t, sym)->anchors.len : 0;
}

const ag_lanchor *ag_symtab_anchor_at(const ag_symtab *t, uint32_t sym, uint32_t k)
{
    if (sym >= t->syms.len || k >= sym_at(t, sym)->anchors.len)
        return NULL;
    return &AG_VEC_AT(sym_at(t, sym)->anchors, ag_lanchor, k);
}

uint32_t ag_symtab_slot(const ag_symtab *t, const ag_lanchor *a)
{
    const uint32_t *s = slot_of(t, a);
    if (s == NULL)
        return AG_NONE;
    return a->is_input ? (uint32_t)(s - t->in_sym) : t->nin + (uint32_t)(s - t->out_sym);
}

uint32_t ag_symtab_nslots(const ag_symtab *t)
{
    return t->nin + t->nout;
}

uint32_t ag_symtab_node_cap(const ag_symtab *t)
{
    return t->cap;
}
