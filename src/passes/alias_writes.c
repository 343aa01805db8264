/* Writes that reach a buffer through an alias: a write through a view, a ref
 * output or a subgraph boundary changes the whole symbol (symbols.h) of the
 * written input, not only the producer's direct consumers.  hccl_memcpy,
 * subgraph_isolate and rw_conflict ask here whether that symbol holds a
 * constant or a variable, and which other nodes read it and in what order. */
#include "passes/symbols.h"

#include <stdio.h>

struct ag_aliases {
    ag_pass_env *env;
    ag_graph *g;
    ag_ctx *ctx;
    ag_symtab *tab;     /* NULL until the first question, or after a rebuild request */
    ag_reach *reach;    /* NULL until the first order question */
    bool reach_stale;   /* the graph changed since the index was refreshed */
    uint32_t nslots;    /* of tab */
    uint32_t *src_done; /* per symbol id: 1 + generation when the sources below were computed */
    ag_node_id *src_const, *src_var;
    uint32_t *slot_mark; /* per anchor slot: epoch of the forward walk that reached it */
    uint32_t *node_mark; /* per node id below the build's capacity: epoch of the reader scan */
    uint32_t *down_mark; /* per node id: epoch of the forward walk, for nodes with subgraphs it reached */
    uint32_t cap;
    uint32_t epoch;
    uint32_t gen;        /* bumped per build */
    uint32_t changes;    /* copies made since the build */
    uint32_t *valid;     /* per anchor slot: 2 * (changes + 1) + (0 invalid, 1 valid) when known */
    ag_vec walk;         /* ag_port: outputs still to follow forward */
    ag_vec chain;        /* ag_port: outputs on the way up (out_valid) */
};

/* ---- lifetime ---- */

ag_status ag_aliases_create(ag_pass_env *env, ag_aliases **out)
{
    ag_ctx *ctx = ag_graph_ctx(env->g);
    *out = NULL;
    ag_aliases *a = ag_calloc(ctx, 1, sizeof *a);
    if (a == NULL)
        return AG_OOM(ctx);
    a->env = env;
    a->g = env->g;
    a->ctx = ctx;
    *out = a;
    return AG_OK;
}

static void drop_table(ag_aliases *a)
{
    ag_ctx *ctx = a->ctx;
    size_t ns = a->nslots + 1;
    ag_free(ctx, a->src_done, ns * sizeof *a->src_done);
    ag_free(ctx, a->src_const, ns * sizeof *a->src_const);
    ag_free(ctx, a->src_var, ns * sizeof *a->src_var);
    ag_free(ctx, a->slot_mark, ns * sizeof *a->slot_mark);
    ag_free(ctx, a->valid, ns * sizeof *a->valid);
    ag_free(ctx, a->node_mark, ((size_t)a->cap + 1) * sizeof *a->node_mark);
    ag_free(ctx, a->down_mark, ((size_t)a->cap + 1) * sizeof *a->down_mark);
    a->src_done = a->slot_mark = a->node_mark = a->valid = a->down_mark = NULL;
    a->src_const = a->src_var = NULL;
    ag_symtab_destroy(a->tab);
    a->tab = NULL;
    a->nslots = a->cap = 0;
}

void ag_aliases_destroy(ag_aliases *a)
{
    if (a == NULL)
        return;
    drop_table(a);
    ag_reach_destroy(a->reach);
    ag_vec_free(a->ctx, &a->walk, sizeof(ag_port));
    ag_vec_free(a->ctx, &a->chain, sizeof(ag_port));
    ag_free(a->ctx, a, sizeof *a);
}

/* Symbols of every graph, built on the first question after a creation or
 * a rebuild request: O(nodes + anchors). */
static ag_status table(ag_aliases *a)
{
    if (a->tab != NULL)
        return AG_OK;
    ag_symtab *t = NULL;
    AG_TRY(ag_symtab_build(a->env, AG_ROOT, true, &t));
    a->tab = t;
    a->nslots = ag_symtab_nslots(t);
    a->cap = ag_symtab_node_cap(t);
    size_t ns = (size_t)a->nslots + 1;
    a->src_done = ag_calloc(a->ctx, ns, sizeof *a->src_done);
    a->src_const = ag_alloc(a->ctx, ns * sizeof *a->src_const);
    a->src_var = ag_alloc(a->ctx, ns * sizeof *a->src_var);
    a->slot_mark = ag_calloc(a->ctx, ns, sizeof *a->slot_mark);
    a->valid = ag_calloc(a->ctx, ns, sizeof *a->valid);
    a->node_mark = ag_calloc(a->ctx, (size_t)a->cap + 1, sizeof *a->node_mark);
    a->down_mark = ag_calloc(a->ctx, (size_t)a->cap + 1, sizeof *a->down_mark);
    if (!a->src_done || !a->src_const || !a->src_var || !a->slot_mark || !a->valid || !a->node_mark ||
        !a->down_mark) {
        drop_table(a);
        return AG_OOM(a->ctx);
    }
    a->epoch = 0;
    a->gen++;
    a->changes = 0;
    return AG_OK;
}

ag_status ag_aliases_changed(ag_aliases *a, ag_node_id made, bool rebuild)
{
    if (a == NULL)
        return AG_OK;
    if (rebuild)
        drop_table(a);
    else if (made != AG_NONE && a->tab != NULL)
        a->changes++;
    if (a->reach == NULL || a->reach_stale)
        return AG_OK;
    if (rebuild || made == AG_NONE) {
        a->reach_stale = true;
        return AG_OK;
    }
    bool placed = false;
    AG_TRY(ag_reach_place(a->reach, made, &placed));
    if (!placed)
        a->reach_stale = true;
    return AG_OK;
}

ag_status ag_alias_reach(ag_aliases *a, ag_reach **out)
{
    if (a->reach == NULL) {
        AG_TRY(ag_reach_create(a->g, &a->reach));
    } else if (a->reach_stale) {
        AG_TRY(ag_reach_update(a->reach));
    }
    a->reach_stale = false;
    *out = a->reach;
    return AG_OK;
}

/* ---- small queries ---- */

static ag_op_kind kind_of(const ag_aliases *a, ag_node_id n)
{
    return ag_ops_node_kind(a->env->ops, a->g, n);
}

static uint32_t out_symbol(const ag_aliases *a, ag_port p)
{
    ag_lanchor an = {p.node, p.index, false};
    return p.node == AG_NONE ? AG_NONE : ag_symtab_symbol_of(a->tab, &an);
}

/* The input whose buffer output p is (an output that refers to one of its
 * node's inputs, or a subgraph Data's parent input), as a port; AG_NONE
 * when p is a buffer of its own. */
static ag_port up(const ag_aliases *a, ag_port p)
{
    const ag_graph *g = a->g;
    ag_port none = {AG_NONE, 0};
    uint32_t in = 0;
    if (!ag_symtab_ref_from_input(a->env->ops, g, p.node, p.index, &in))
        return none;
    if (in != AG_NONE)
        return in < ag_node_num_inputs(g, p.node) ? ag_node_input_src(g, p.node, in) : none;
    int64_t idx;
    ag_node_id par = ag_sub_parent(g, ag_node_owner(g, p.node));
    if (par == AG_NONE || !ag_attrs_get_int(ag_node_attrs_c(g, p.node), "_parent_node_index", &idx) || idx < 0 ||
        (uint64_t)idx >= ag_node_num_inputs(g, par))
        return none;
    return ag_node_input_src(g, par, (uint32_t)idx);
}

/* Copies only ever split a buffer: an output still belongs to its symbol
 * of the build unless the chain of outputs it refers to, up to the buffer's
 * own output, now passes through a node made since the build.  Known
 * answers are kept per slot until the next copy; each query walks a chain
 * once. */
static ag_status out_valid(ag_aliases *a, ag_port p, bool *ok)
{
    if (p.node == AG_NONE || p.node >= a->cap) {
        *ok = false;
        return AG_OK;
    }
    if (a->changes == 0) {
        *ok = true;
        return AG_OK;
    }
    uint32_t known = 2 * (a->changes + 1);
    a->chain.len = 0;
    bool res = true;
    for (ag_port q = p;;) {
        ag_lanchor an = {q.node, q.index, false};
        uint32_t slot = q.node < a->cap ? ag_symtab_slot(a->tab, &an) : AG_NONE;
        if (slot == AG_NONE) {
            res = false;
            break;
        }
        if (a->valid[slot] / 2 * 2 == known) {
            res = a->valid[slot] & 1;
            break;
        }
        if (ag_vec_push(a->ctx, &a->chain, sizeof q, &q) != AG_OK)
            return AG_OOM(a->ctx);
        ag_port u = up(a, q);
        if (u.node == AG_NONE)
            break; /* the buffer's own output */
        q = u;
        if (a->chain.len > a->cap) { /* a cycle through refs: not a valid graph */
            res = false;
            break;
        }
    }
    for (uint32_t k = 0; k < a->chain.len; k++) {
        ag_port q = AG_VEC_AT(a->chain, ag_port, k);
        ag_lanchor an = {q.node, q.index, false};
        a->valid[ag_symtab_slot(a->tab, &an)] = known + (res ? 1u : 0u);
    }
    *ok = res;
    return AG_OK;
}

/* Symbol of output p as it stands now, AG_NONE when a copy made since the
 * build gave it a buffer of its own. */
static ag_status live_symbol(ag_aliases *a, ag_port p, uint32_t *s)
{
    bool ok = false;
    *s = AG_NONE;
    AG_TRY(out_valid(a, p, &ok));
    if (ok)
        *s = out_symbol(a, p);
    return AG_OK;
}

static bool input_viewed(const ag_aliases *a, ag_node_id n, uint32_t i)
{
    uint32_t nout = ag_node_num_outputs(a->g, n);
    for (uint32_t o = 0; o < nout; o++) {
        uint32_t k = 0;
        if (ag_ops_output_ref(a->env->ops, a->g, n, o, &k) == AG_REL_VIEW && k == i)
            return true;
    }
    return false;
}

/* First constant and first variable output of symbol s, once per build. */
static void sources(ag_aliases *a, uint32_t s)
{
    if (a->src_done[s] == a->gen)
        return;
    a->src_done[s] = a->gen;
    a->src_const[s] = a->src_var[s] = AG_NONE;
    uint32_t size = ag_symtab_size(a->tab, s);
    for (uint32_t k = 0; k < size; k++) {
        const ag_lanchor *an = ag_symtab_anchor_at(a->tab, s, k);
        if (an->is_input || !ag_node_alive(a->g, an->node))
            continue;
        ag_op_kind kind = kind_of(a, an->node);
        if (ag_op_kind_is_const_like(kind) && a->src_const[s] == AG_NONE)
            a->src_const[s] = an->node;
        else if (ag_op_kind_is_var_like(kind) && a->src_var[s] == AG_NONE)
            a->src_var[s] = an->node;
    }
}

/* x and y, or their ancestors, in the deepest subgraph holding both. */
static void lift(const ag_graph *g, ag_node_id *x, ag_node_id *y)
{
    ag_node_id a = *x, b = *y;
    while (ag_sub_depth(g, ag_node_owner(g, a)) > ag_sub_depth(g, ag_node_owner(g, b)))
        a = ag_sub_parent(g, ag_node_owner(g, a));
    while (ag_sub_depth(g, ag_node_owner(g, b)) > ag_sub_depth(g, ag_node_owner(g, a)))
        b = ag_sub_parent(g, ag_node_owner(g, b));
    while (ag_node_owner(g, a) != ag_node_owner(g, b)) {
        a = ag_sub_parent(g, ag_node_owner(g, a));
        b = ag_sub_parent(g, ag_node_owner(g, b));
    }
    *x = a;
    *y = b;
}

static ag_status next_epoch(ag_aliases *a, uint32_t *e)
{
    if (++a->epoch == 0) {
        memset(a->slot_mark, 0, ((size_t)a->nslots + 1) * sizeof *a->slot_mark);
        memset(a->node_mark, 0, ((size_t)a->cap + 1) * sizeof *a->node_mark);
        memset(a->down_mark, 0, ((size_t)a->cap + 1) * sizeof *a->down_mark);
        a->epoch = 1;
    }
    *e = a->epoch;
    return AG_OK;
}

/* Pushes output q when it is still part of symbol s. */
static ag_status push_out(ag_aliases *a, ag_port q, uint32_t s)
{
    uint32_t qs = AG_NONE;
    AG_TRY(live_symbol(a, q, &qs));
    if (qs != s)
        return AG_OK;
    return ag_vec_push(a->ctx, &a->walk, sizeof q, &q) == AG_OK ? AG_OK : AG_OOM(a->ctx);
}

/* The outputs a consumer c:ci hands the buffer on through: outputs that
 * refer to the input, the parent's output for a subgraph NetOutput input,
 * the Data bound to the input in each subgraph of c. */
static ag_status follow_consumer(ag_aliases *a, ag_port c, uint32_t s)
{
    const ag_graph *g = a->g;
    uint32_t cout = ag_node_num_outputs(g, c.node);
    for (uint32_t o = 0; o < cout; o++) {
        uint32_t in = 0;
        if (ag_symtab_ref_from_input(a->env->ops, g, c.node, o, &in) && in == c.index)
            AG_TRY(push_out(a, (ag_port){c.node, o}, s));
    }
    ag_node_id par = ag_sub_parent(g, ag_node_owner(g, c.node));
    int64_t idx;
    if (par != AG_NONE && kind_of(a, c.node) == AG_OPK_NETOUTPUT &&
        ag_attrs_get_int(ag_node_input_desc_c(g, c.node, c.index)->attrs, "_parent_node_index", &idx) && idx >= 0 &&
        (uint64_t)idx < ag_node_num_outputs(g, par))
        AG_TRY(push_out(a, (ag_port){par, (uint32_t)idx}, s));
    uint32_t nsubs = ag_node_num_subs(g, c.node);
    for (uint32_t k = 0; k < nsubs; k++) {
        ag_sub_id sub = ag_node_sub(g, c.node, k);
        uint32_t cnt = ag_sub_node_count(g, sub);
        for (uint32_t j = 0; j < cnt; j++) {
            ag_node_id d = ag_sub_node_at(g, sub, j);
            if (ag_node_num_outputs(g, d) > 0 && ag_symtab_is_subgraph_data(a->env->ops, g, d) &&
                ag_attrs_get_int(ag_node_attrs_c(g, d), "_parent_node_index", &idx) && idx == (int64_t)c.index)
                AG_TRY(push_out(a, (ag_port){d, 0}, s));
        }
    }
    return AG_OK;
}

/* Marks (epoch e) the inputs that read what w wrote: consumers of w's
 * outputs in symbol s, and onward wherever they hand the same buffer on
 * (ref outputs, subgraph boundaries).  Each input is marked once. */
static ag_status mark_downstream(ag_aliases *a, ag_node_id w, uint32_t s, uint32_t e)
{
    const ag_graph *g = a->g;
    a->walk.len = 0;
    if (w >= a->cap)
        return AG_OK;
    uint32_t nout = ag_node_num_outputs(g, w);
    for (uint32_t o = 0; o < nout; o++)
        AG_TRY(push_out(a, (ag_port){w, o}, s));
    while (a->walk.len > 0) {
        ag_port p = AG_VEC_AT(a->walk, ag_port, --a->walk.len);
        uint32_t nc = ag_node_output_nconsumers(g, p.node, p.index);
        for (uint32_t k = 0; k < nc; k++) {
            ag_port c = ag_node_output_consumer(g, p.node, p.index, k);
            ag_lanchor an = {c.node, c.index, true};
            uint32_t slot = ag_symtab_slot(a->tab, &an);
            if (slot == AG_NONE || a->slot_mark[slot] == e)
                continue;
            a->slot_mark[slot] = e;
            /* A loop or branch that takes what w wrote reads and writes it
             * inside: everything there comes after the write. */
            if (ag_node_num_subs(g, c.node) > 0 && c.node < a->cap)
                a->down_mark[c.node] = e;
            AG_TRY(follow_consumer(a, c, s));
        }
    }
    return AG_OK;
}

/* True when node m sits inside a node with subgraphs that the forward walk
 * of epoch e reached. */
static bool inside_downstream(const ag_aliases *a, ag_node_id m, uint32_t e)
{
    const ag_graph *g = a->g;
    for (ag_node_id x = ag_sub_parent(g, ag_node_owner(g, m)); x != AG_NONE; x = ag_sub_parent(g, ag_node_owner(g, x)))
        if (x < a->cap && a->down_mark[x] == e)
            return true;
    return false;
}

/* The node that reads symbol s through input anchor an today: its own node,
 * or a copy made since the build that now feeds it from s; AG_NONE when the
 * anchor no longer reads s. */
static ag_status current_reader(ag_aliases *a, const ag_lanchor *an, uint32_t s, bool *made, ag_node_id *out)
{
    const ag_graph *g = a->g;
    *made = false;
    *out = AG_NONE;
    if (!ag_node_alive(g, an->node) || an->index >= ag_node_num_inputs(g, an->node))
        return AG_OK;
    ag_port q = ag_node_input_src(g, an->node, an->index);
    if (q.node == AG_NONE)
        return AG_OK;
    uint32_t qs = AG_NONE;
    if (q.node < a->cap) {
        AG_TRY(live_symbol(a, q, &qs));
        if (qs == s)
            *out = an->node;
        return AG_OK;
    }
    /* A copy inserted on this edge: port k of a copy reads its input k. */
    uint32_t nin = ag_node_num_inputs(g, q.node);
    if (nin == 0)
        return AG_OK;
    ag_port r = ag_node_input_src(g, q.node, q.index < nin ? q.index : 0);
    if (r.node == AG_NONE)
        return AG_OK;
    AG_TRY(live_symbol(a, r, &qs));
    if (qs == s) {
        *made = true;
        *out = q.node;
    }
    return AG_OK;
}

ag_status ag_alias_readers(ag_aliases *a, ag_port p, ag_node_id w, ag_node_id skip, ag_vec *out)
{
    AG_TRY(table(a));
    uint32_t s = AG_NONE;
    AG_TRY(live_symbol(a, p, &s));
    if (s == AG_NONE)
        return AG_OK;
    const ag_graph *g = a->g;
    uint32_t e;
    AG_TRY(next_epoch(a, &e));
    AG_TRY(mark_downstream(a, w, s, e));
    uint32_t size = ag_symtab_size(a->tab, s);
    for (uint32_t k = 0; k < size; k++) {
        const ag_lanchor *an = ag_symtab_anchor_at(a->tab, s, k);
        if (!an->is_input)
            continue;
        uint32_t slot = ag_symtab_slot(a->tab, an);
        if (slot != AG_NONE && a->slot_mark[slot] == e)
            continue;
        bool made = false;
        ag_node_id m = AG_NONE;
        AG_TRY(current_reader(a, an, s, &made, &m));
        if (m == AG_NONE || m == w || m == skip || inside_downstream(a, m, e))
            continue;
        if (!made && (ag_ops_node_flags(a->env->ops, g, m) & AG_OPF_SHAPE_ONLY))
            continue;
        if (!made && input_viewed(a, m, an->index))
            continue;
        if (!made) {
            if (a->node_mark[m] == e)
                continue;
            a->node_mark[m] = e;
        }
        ag_node_id lr = m, lw = w;
        lift(g, &lr, &lw);
        if (lr == lw)
            continue; /* inside w's own subgraphs, or w inside the reader's */
        ag_alias_reader r = {m, lr, lw, made,
                             !made && kind_of(a, m) == AG_OPK_NETOUTPUT && ag_node_owner(g, m) == AG_ROOT};
        if (ag_vec_push(a->ctx, out, sizeof r, &r) != AG_OK)
            return AG_OOM(a->ctx);
    }
    return AG_OK;
}

/* True when node k sits inside w's own subgraphs: what a loop body or a
 * branch does to its own constants is the subgraph's business, not a write
 * by w. */
static bool inside(const ag_graph *g, ag_node_id k, ag_node_id w)
{
    ag_node_id x = k, y = w;
    lift(g, &x, &y);
    return x == y;
}

/* A constant (var false) or variable of symbol s outside w's subgraphs. */
static ag_node_id source_of(ag_aliases *a, uint32_t s, ag_node_id w, bool var)
{
    sources(a, s);
    ag_node_id k = var ? a->src_var[s] : a->src_const[s];
    if (k == AG_NONE || !inside(a->g, k, w))
        return k;
    uint32_t size = ag_symtab_size(a->tab, s);
    for (uint32_t j = 0; j < size; j++) {
        const ag_lanchor *an = ag_symtab_anchor_at(a->tab, s, j);
        if (an->is_input || !ag_node_alive(a->g, an->node))
            continue;
        ag_op_kind kind = kind_of(a, an->node);
        bool hit = var ? ag_op_kind_is_var_like(kind) : ag_op_kind_is_const_like(kind);
        if (hit && !inside(a->g, an->node, w))
            return an->node;
    }
    return AG_NONE;
}

ag_status ag_alias_judge(ag_aliases *a, ag_port p, ag_node_id w, ag_node_id skip, unsigned want, ag_alias_hit *hit)
{
    memset(hit, 0, sizeof *hit);
    hit->kind = AG_ALIAS_NONE;
    hit->node = AG_NONE;
    if (p.node == AG_NONE)
        return AG_OK;
    AG_TRY(table(a));
    uint32_t s = AG_NONE;
    AG_TRY(live_symbol(a, p, &s));
    if (s == AG_NONE)
        return AG_OK;
    ag_node_id k;
    if ((want & AG_ALIAS_WANT_CONST) && (k = source_of(a, s, w, false)) != AG_NONE) {
        hit->kind = AG_ALIAS_CONST;
        hit->node = k;
        return AG_OK;
    }
    if ((want & AG_ALIAS_WANT_VAR) && (k = source_of(a, s, w, true)) != AG_NONE) {
        hit->kind = AG_ALIAS_VAR;
        hit->node = k;
        return AG_OK;
    }
    if (!(want & AG_ALIAS_WANT_READERS))
        return AG_OK;
    ag_vec rs = {0};
    ag_status st = ag_alias_readers(a, p, w, skip, &rs);
    ag_reach *reach = NULL;
    for (uint32_t j = 0; j < rs.len && st == AG_OK; j++) {
        const ag_alias_reader *r = &AG_VEC_AT(rs, ag_alias_reader, j);
        bool before = false;
        if (!r->after_run) {
            if (reach == NULL)
                st = ag_alias_reach(a, &reach);
            if (st != AG_OK)
                break;
            before = ag_reaches(reach, r->lifted, r->writer);
        }
        if (!before) {
            hit->kind = AG_ALIAS_READER;
            hit->node = r->node;
            break;
        }
    }
    ag_vec_free(a->ctx, &rs, sizeof(ag_alias_reader));
    return st;
}

ag_status ag_alias_same(ag_aliases *a, ag_port p, ag_port q, bool *same)
{
    *same = false;
    if (p.node == AG_NONE || q.node == AG_NONE)
        return AG_OK;
    AG_TRY(table(a));
    uint32_t sp = AG_NONE, sq = AG_NONE;
    AG_TRY(live_symbol(a, p, &sp));
    AG_TRY(live_symbol(a, q, &sq));
    *same = sp != AG_NONE && sp == sq;
    return AG_OK;
}

/* ---- explanations ---- */

/* How output p shares its buffer, "" when it is a fresh output of its own. */
static void share_text(const ag_aliases *a, ag_port p, char *buf, size_t cap)
{
    const ag_graph *g = a->g;
    buf[0] = '\0';
    if (p.node == AG_NONE)
        return;
    const char *name = ag_node_name(g, p.node);
    ag_op_kind kind = kind_of(a, p.node);
    uint32_t in = 0;
    if (ag_symtab_is_subgraph_data(a->env->ops, g, p.node) && ag_node_num_inputs(g, p.node) == 0) {
        ag_node_id par = ag_sub_parent(g, ag_node_owner(g, p.node));
        snprintf(buf, cap, "subgraph input %s of %s", name, par == AG_NONE ? "?" : ag_node_name(g, par));
        return;
    }
    if (kind == AG_OPK_WHILE) {
        snprintf(buf, cap, "loop %s", name);
        return;
    }
    if (ag_node_num_subs(g, p.node) > 0) {
        snprintf(buf, cap, "%s output of %s", kind == AG_OPK_CALL ? "call" : "branch", name);
        return;
    }
    switch (ag_ops_output_ref(a->env->ops, g, p.node, p.index, &in)) {
    case AG_REL_VIEW:
        snprintf(buf, cap, "view %s", name);
        break;
    case AG_REL_REF:
        snprintf(buf, cap, "ref output of %s", name);
        break;
    case AG_REL_PASS:
        snprintf(buf, cap, "pass-through %s", name);
        break;
    case AG_REL_REUSE:
        snprintf(buf, cap, "in-place output of %s", name);
        break;
    default:
        break;
    }
}

void ag_alias_rule(ag_aliases *a, const char *base, ag_port p, const ag_alias_hit *hit, char *buf, size_t cap)
{
    const ag_graph *g = a->g;
    char path[160];
    share_text(a, p, path, sizeof path);
    if (path[0] == '\0' && hit->kind == AG_ALIAS_READER && hit->node != AG_NONE) {
        /* The writer's producer is plain: the reader sees it through an alias. */
        ag_node_id m = hit->node;
        for (uint32_t i = 0; i < ag_node_num_inputs(g, m) && path[0] == '\0'; i++) {
            ag_port q = ag_node_input_src(g, m, i);
            if (q.node != AG_NONE && q.node != p.node)
                share_text(a, q, path, sizeof path);
        }
    }
    const char *what = hit->kind == AG_ALIAS_CONST ? "constant" : hit->kind == AG_ALIAS_VAR ? "variable" : "reader";
    const char *who = hit->node != AG_NONE ? ag_node_name(g, hit->node) : "?";
    if (path[0])
        snprintf(buf, cap, "%s through %s (%s %s)", base, path, what, who);
    else
        snprintf(buf, cap, "%s through a buffer shared with %s %s", base, what, who);
}
