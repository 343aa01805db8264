/* Semantic read/write conflict pass (seed 3.2; reference notes 3): classify
 * every output by who may still read its buffer and every input by how its
 * node writes it, subgraph boundaries innermost first, and insert an Identity
 * where the decision matrix says a write could reach a constant or another
 * reader; make the order of accesses it leaves in place explicit. */
#include "passes/pass_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define PASS "rw_conflict"

/* The reference's InputRWType and OutputRWType, in its order. */
typedef enum rw_in { IN_RO, IN_W, IN_SW, IN_INVALID } rw_in;
typedef enum rw_out { OUT_RO_CONST, OUT_RO, OUT_SOFT, OUT_W, OUT_INVALID } rw_out;
typedef enum rw_res { RES_NONE, RES_IDENTITY, RES_WRONG } rw_res;

#define NOREC 0xffu /* no type recorded for a subgraph boundary anchor */

static const char *const in_names[] = {"ReadOnly", "Writeable", "ScopeWriteable", "Invalid"};
static const char *const out_names[] = {"ReadOnlyConst", "ReadOnly", "SoftRead", "Writeable", "Invalid"};

/* State of one run; nothing survives the call. */
typedef struct rw {
    ag_pass_env *env;
    ag_graph *g;
    const ag_ops *ops;
    ag_ctx *ctx;
    ag_arena arena;
    uint32_t cap;        /* nodes with smaller ids existed when the run started */
    uint32_t *in_base;   /* per node: offset of its inputs in the flat arrays */
    uint32_t *out_base;  /* per node: offset of its outputs */
    uint32_t *out_ref;   /* per output: the input it is a ref of, or AG_NONE */
    uint32_t *in_ref;    /* per input: the output that is a ref of it, or AG_NONE */
    uint8_t *data_rec;   /* per node: input type recorded for a subgraph Data */
    uint8_t *net_rec;    /* per input: type recorded for a subgraph NetOutput input */
    uint32_t nsub;
    bool *marked;        /* per subgraph: boundaries are classified */
    ag_node_id *netout;  /* per subgraph: its (first) NetOutput */
    ag_node_id **data_of;  /* per subgraph: Data node by parent input index */
    uint32_t **outidx_of;  /* per subgraph: NetOutput input by parent output index */
    uint32_t counter;    /* suffix of the next Identity name */
    ag_vec work;         /* identities to (re)visit, ag_node_id */
    uint8_t *queued;     /* per node: in work after the current position */
    uint32_t qcap;
    ag_aliases *alias;   /* buffers across views, refs and boundaries; made on the first writer */
    ag_vec alias_kept;   /* ag_node_id: identities kept for a write through an alias */
    bool rechecking;     /* in recheck_alias_kept */
} rw;

/* ---- small queries ---- */

static ag_op_kind kind_of(const rw *st, ag_node_id n)
{
    return ag_ops_node_kind(st->ops, st->g, n);
}

static bool skip_rw(const rw *st, ag_node_id n)
{
    return ag_attrs_get_flag(ag_node_attrs_c(st->g, n), "_skip_rw_conflict", false);
}

static bool owner_parent_is_while(const rw *st, ag_node_id n)
{
    ag_node_id p = ag_sub_parent(st->g, ag_node_owner(st->g, n));
    return p != AG_NONE && kind_of(st, p) == AG_OPK_WHILE;
}

static bool is_subgraph_data(const rw *st, ag_node_id n)
{
    int64_t idx;
    return ag_node_owner(st->g, n) != AG_ROOT && ag_op_kind_is_data_like(kind_of(st, n)) &&
           ag_attrs_get_int(ag_node_attrs_c(st->g, n), "_parent_node_index", &idx);
}

static bool is_subgraph_netoutput(const rw *st, ag_node_id n)
{
    return ag_node_owner(st->g, n) != AG_ROOT && kind_of(st, n) == AG_OPK_NETOUTPUT;
}

/* The copies this pass reasons about: one input, one output. */
static bool is_identity(const rw *st, ag_node_id n)
{
    return kind_of(st, n) == AG_OPK_IDENTITY && ag_node_num_inputs(st->g, n) == 1 &&
           ag_node_num_outputs(st->g, n) == 1;
}

static uint32_t out_ref(const rw *st, ag_node_id n, uint32_t o)
{
    return n < st->cap ? st->out_ref[st->out_base[n] + o] : AG_NONE;
}

static uint32_t in_ref(const rw *st, ag_node_id n, uint32_t i)
{
    return n < st->cap ? st->in_ref[st->in_base[n] + i] : AG_NONE;
}

/* ---- MarkRefRelations (notes 3.3) ----
 * An output is a ref of an input when the registry says so (Assign out0 =
 * ref:0, also `reference` with equal names) or, as in the reference, when
 * the output's value name equals an input's value name whatever the
 * `reference` attribute says.  Names are not compared for copies (identity,
 * memcpy kinds): the insertion helpers give a copy's input and output the
 * producer's value name, and a copy never writes its input.  Outputs the
 * registry already relates otherwise (view, pass, reuse) keep that relation.
 * Unlike the reference, `reference=true` is not written back onto the node:
 * the pass changes the graph only through recorded isolations. */

static uint32_t name_match(rw *st, ag_node_id n, const char *oname, ag_strmap *names, bool *built,
                           ag_status *err)
{
    const ag_graph *g = st->g;
    uint32_t nin = ag_node_num_inputs(g, n);
    *err = AG_OK;
    if (nin <= 16) {
        for (uint32_t i = 0; i < nin; i++) {
            const char *iname = ag_node_input_desc_c(g, n, i)->name;
            if (iname && iname[0] && strcmp(iname, oname) == 0)
                return i;
        }
        return AG_NONE;
    }
    /* Wide nodes: one hash of the input names instead of nin*nout compares. */
    if (!*built) {
        for (uint32_t i = nin; i-- > 0;) {
            const char *iname = ag_node_input_desc_c(g, n, i)->name;
            if (iname && iname[0] && ag_strmap_put(st->ctx, names, iname, i) != AG_OK) {
                *err = AG_OOM(st->ctx);
                return AG_NONE;
            }
        }
        *built = true;
    }
    uint32_t v;
    return ag_strmap_get(names, oname, &v) ? v : AG_NONE;
}

static ag_status mark_refs_node(rw *st, ag_node_id n)
{
    ag_graph *g = st->g;
    uint32_t nin = ag_node_num_inputs(g, n), nout = ag_node_num_outputs(g, n);
    const ag_op_info *info = ag_ops_node_info(st->ops, g, n);
    ag_op_kind kind = ag_op_info_kind(info);
    bool by_name = kind != AG_OPK_IDENTITY && kind != AG_OPK_MEMCPY;
    ag_strmap names;
    bool built = false;
    ag_status st_ = AG_OK;
    ag_strmap_init(&names);
    for (uint32_t o = 0; o < nout && st_ == AG_OK; o++) {
        uint32_t tin = 0, in = AG_NONE;
        /* The registry hides a ref to a missing input (reads as fresh); here
         * it is a broken graph. */
        if (ag_op_info_output_rel(info, o, &tin) == AG_REL_REF && tin >= nin) {
            st_ = AG_ERR(st->ctx, AG_EINVAL,
                         "graph '%s': node \"%s\" (%s) output %u is a ref of input %u, which does not exist (%u inputs)",
                         ag_sub_name(g, ag_node_owner(g, n)), ag_node_name(g, n), ag_node_type(g, n), o, tin, nin);
            break;
        }
        uint32_t k;
        ag_op_rel rel = ag_ops_output_ref(st->ops, g, n, o, &k);
        if (rel == AG_REL_REF) {
            in = k;
        } else if (rel == AG_REL_FRESH && by_name) {
            const char *oname = ag_node_output_desc_c(g, n, o)->name;
            if (oname && oname[0])
                in = name_match(st, n, oname, &names, &built, &st_);
        }
        if (in == AG_NONE)
            continue;
        if (ag_node_input_src(g, n, in).node == AG_NONE) {
            st_ = AG_ERR(st->ctx, AG_EINVAL,
                         "graph '%s': node \"%s\" (%s) output %u is a ref of input %u, which is unconnected",
                         ag_sub_name(g, ag_node_owner(g, n)), ag_node_name(g, n), ag_node_type(g, n), o, in);
            break;
        }
        st->out_ref[st->out_base[n] + o] = in;
        if (st->in_ref[st->in_base[n] + in] == AG_NONE)
            st->in_ref[st->in_base[n] + in] = o;
    }
    ag_strmap_free(st->ctx, &names);
    return st_;
}

static ag_status mark_ref_relations(rw *st)
{
    ag_graph *g = st->g;
    uint64_t nin = 0, nout = 0;
    st->in_base = ag_arena_alloc(&st->arena, (size_t)st->cap * sizeof(uint32_t) + 1);
    st->out_base = ag_arena_alloc(&st->arena, (size_t)st->cap * sizeof(uint32_t) + 1);
    st->data_rec = ag_arena_alloc(&st->arena, (size_t)st->cap + 1);
    if (!st->in_base || !st->out_base || !st->data_rec)
        return AG_OOM(st->ctx);
    memset(st->data_rec, NOREC, st->cap);
    for (ag_node_id n = 0; n < st->cap; n++) {
        st->in_base[n] = (uint32_t)nin;
        st->out_base[n] = (uint32_t)nout;
        if (!ag_node_alive(g, n))
            continue;
        nin += ag_node_num_inputs(g, n);
        nout += ag_node_num_outputs(g, n);
        if (nin > UINT32_MAX || nout > UINT32_MAX)
            return AG_ERR(st->ctx, AG_EINVAL, "graph '%s': too many anchors", ag_sub_name(g, AG_ROOT));
    }
    st->in_ref = ag_arena_alloc(&st->arena, (size_t)nin * sizeof(uint32_t) + 1);
    st->out_ref = ag_arena_alloc(&st->arena, (size_t)nout * sizeof(uint32_t) + 1);
    st->net_rec = ag_arena_alloc(&st->arena, (size_t)nin + 1);
    if (!st->in_ref || !st->out_ref || !st->net_rec)
        return AG_OOM(st->ctx);
    memset(st->in_ref, 0xff, (size_t)nin * sizeof(uint32_t)); /* AG_NONE */
    memset(st->out_ref, 0xff, (size_t)nout * sizeof(uint32_t));
    memset(st->net_rec, NOREC, (size_t)nin);
    for (ag_node_id n = 0; n < st->cap; n++)
        if (ag_node_alive(g, n))
            AG_TRY(mark_refs_node(st, n));
    return AG_OK;
}

/* ---- subgraph tables, checked before anything changes ---- */

static ag_status bad_boundary(rw *st, ag_sub_id s, ag_node_id n, const char *what)
{
    ag_graph *g = st->g;
    ag_node_id p = ag_sub_parent(g, s);
    return AG_ERR(st->ctx, AG_EINVAL, "subgraph '%s' of node \"%s\" (%s): node \"%s\" (%s) %s", ag_sub_name(g, s),
                  ag_node_name(g, p), ag_node_type(g, p), ag_node_name(g, n), ag_node_type(g, n), what);
}

static ag_status index_subgraph(rw *st, ag_sub_id s)
{
    ag_graph *g = st->g;
    ag_node_id parent = ag_sub_parent(g, s);
    uint32_t pin = ag_node_num_inputs(g, parent), pout = ag_node_num_outputs(g, parent);
    ag_node_id *data = ag_arena_alloc(&st->arena, (size_t)pin * sizeof *data + 1);
    uint32_t *outidx = ag_arena_alloc(&st->arena, (size_t)pout * sizeof *outidx + 1);
    if (!data || !outidx)
        return AG_OOM(st->ctx);
    memset(data, 0xff, (size_t)pin * sizeof *data);
    memset(outidx, 0xff, (size_t)pout * sizeof *outidx);
    st->data_of[s] = data;
    st->outidx_of[s] = outidx;
    uint32_t cnt = ag_sub_node_count(g, s);
    char what[160];
    for (uint32_t k = 0; k < cnt; k++) {
        ag_node_id n = ag_sub_node_at(g, s, k);
        ag_op_kind kind = kind_of(st, n);
        if (ag_op_kind_is_data_like(kind)) {
            int64_t idx;
            if (!ag_attrs_get_int(ag_node_attrs_c(g, n), "_parent_node_index", &idx)) {
                /* A RefData without the index is a variable of the subgraph. */
                if (kind == AG_OPK_REF_DATA)
                    continue;
                return bad_boundary(st, s, n, "output 0: subgraph input without _parent_node_index");
            }
            if (idx < 0 || (uint64_t)idx >= pin) {
                snprintf(what, sizeof what, "output 0: _parent_node_index %lld out of range (parent has %u inputs)",
                         (long long)idx, pin);
                return bad_boundary(st, s, n, what);
            }
            if (data[idx] != AG_NONE) {
                snprintf(what, sizeof what, "output 0: _parent_node_index %lld already used by node \"%s\"",
                         (long long)idx, ag_node_name(g, data[idx]));
                return bad_boundary(st, s, n, what);
            }
            data[idx] = n;
        } else if (kind == AG_OPK_NETOUTPUT) {
            bool first = st->netout[s] == AG_NONE;
            if (first)
                st->netout[s] = n;
            uint32_t nin = ag_node_num_inputs(g, n);
            for (uint32_t i = 0; i < nin; i++) {
                int64_t idx;
                if (!ag_attrs_get_int(ag_node_input_desc_c(g, n, i)->attrs, "_parent_node_index", &idx)) {
                    snprintf(what, sizeof what, "input %u: subgraph output without _parent_node_index", i);
                    return bad_boundary(st, s, n, what);
                }
                if (first && idx >= 0 && (uint64_t)idx < pout && outidx[idx] == AG_NONE)
                    outidx[idx] = i;
            }
        }
    }
    return AG_OK;
}

static ag_status index_subgraphs(rw *st)
{
    ag_graph *g = st->g;
    st->nsub = ag_graph_sub_count(g);
    st->marked = ag_arena_alloc(&st->arena, (size_t)st->nsub * sizeof *st->marked);
    st->netout = ag_arena_alloc(&st->arena, (size_t)st->nsub * sizeof *st->netout);
    st->data_of = ag_arena_alloc(&st->arena, (size_t)st->nsub * sizeof *st->data_of);
    st->outidx_of = ag_arena_alloc(&st->arena, (size_t)st->nsub * sizeof *st->outidx_of);
    if (!st->marked || !st->netout || !st->data_of || !st->outidx_of)
        return AG_OOM(st->ctx);
    for (ag_sub_id s = 0; s < st->nsub; s++) {
        st->netout[s] = AG_NONE;
        ag_node_id p = ag_sub_parent(g, s);
        /* While bodies and conditions are isolated elsewhere (notes 3.7). */
        if (s == AG_ROOT || !ag_sub_alive(g, s) || p == AG_NONE || kind_of(st, p) == AG_OPK_WHILE)
            continue;
        st->marked[s] = true;
        AG_TRY(index_subgraph(st, s));
    }
    return AG_OK;
}

/* ---- RW types (notes 3.4 - 3.6) ---- */

static rw_in combine(rw_in a, rw_in b)
{
    if (a == IN_INVALID || b == IN_INVALID)
        return IN_INVALID;
    if (a == IN_RO)
        return b;
    if (b == IN_RO || a == b)
        return a;
    return IN_INVALID; /* Writeable with ScopeWriteable */
}

/* Single-node rule (notes 3.6 step 3); the registry applies While kind,
 * _special_input_size and _input_mutable first. */
static rw_in plain_input_type(const rw *st, ag_node_id n, uint32_t i)
{
    ag_op_access acc = ag_ops_input_access(st->ops, st->g, n, i);
    if (acc == AG_ACC_SCOPE_WRITEABLE)
        return IN_SW;
    if (kind_of(st, n) == AG_OPK_PHONY)
        return IN_RO;
    if (in_ref(st, n, i) != AG_NONE || acc == AG_ACC_WRITEABLE)
        return IN_W;
    return IN_RO;
}

static rw_in input_type(const rw *st, ag_node_id n, uint32_t i)
{
    const ag_graph *g = st->g;
    if (kind_of(st, n) == AG_OPK_WHILE)
        return IN_SW;
    uint32_t nsubs = ag_node_num_subs(g, n);
    if (nsubs == 0)
        return plain_input_type(st, n, i);
    int64_t special;
    if (ag_attrs_get_int(ag_node_input_desc_c(g, n, i)->attrs, "_special_input_size", &special) && special > 0)
        return IN_SW;
    /* A branch that does not use input i adds nothing (the cond of an If). */
    rw_in acc = IN_RO;
    for (uint32_t k = 0; k < nsubs; k++) {
        ag_sub_id s = ag_node_sub(g, n, k);
        if (s >= st->nsub || !st->marked[s])
            continue;
        ag_node_id d = st->data_of[s][i];
        if (d == AG_NONE)
            continue;
        if (d >= st->cap || st->data_rec[d] == NOREC)
            return IN_INVALID;
        acc = combine(acc, (rw_in)st->data_rec[d]);
        if (acc == IN_INVALID)
            break;
    }
    return acc;
}

static rw_out output_type(const rw *st, ag_node_id n, uint32_t o);

static rw_out plain_output_type(const rw *st, ag_node_id n, uint32_t o)
{
    const ag_graph *g = st->g;
    ag_op_kind kind = kind_of(st, n);
    if (ag_op_kind_is_var_like(kind))
        return OUT_W;
    if (ag_op_kind_is_data_like(kind)) {
        int64_t idx;
        /* Root inputs count as writeable: callers may hand in buffers the
         * graph is meant to update (the reference does the same). */
        if (!ag_attrs_get_int(ag_node_attrs_c(g, n), "_parent_node_index", &idx))
            return OUT_W;
        ag_node_id p = ag_sub_parent(g, ag_node_owner(g, n));
        if (p == AG_NONE || idx < 0 || (uint64_t)idx >= ag_node_num_inputs(g, p))
            return OUT_INVALID;
        ag_port src = ag_node_input_src(g, p, (uint32_t)idx);
        return src.node == AG_NONE ? OUT_INVALID : output_type(st, src.node, src.index);
    }
    if (out_ref(st, n, o) != AG_NONE)
        return OUT_W;
    /* FileConstant is const-like in the registry and is protected as well;
     * the reference's set is Const, Constant and ConstPlaceHolder only. */
    if (ag_op_kind_is_const_like(kind))
        return OUT_RO_CONST;
    return ag_node_output_nconsumers(g, n, o) > 1 ? OUT_RO : OUT_SOFT;
}

static rw_out output_type(const rw *st, ag_node_id n, uint32_t o)
{
    const ag_graph *g = st->g;
    if (kind_of(st, n) == AG_OPK_WHILE)
        return OUT_SOFT;
    uint32_t nsubs = ag_node_num_subs(g, n);
    if (nsubs == 0)
        return plain_output_type(st, n, o);
    rw_out r = OUT_SOFT;
    /* Only a single-subgraph parent (a call) passes its body's output
     * through; for If/Case the branch types are not used here (notes 3.5). */
    if (nsubs == 1) {
        ag_sub_id s = ag_node_sub(g, n, 0);
        if (s >= st->nsub || !st->marked[s] || st->netout[s] == AG_NONE)
            return OUT_INVALID;
        ag_node_id net = st->netout[s];
        uint32_t j = st->outidx_of[s][o];
        if (j == AG_NONE || net >= st->cap)
            return OUT_INVALID;
        uint8_t rec = st->net_rec[st->in_base[net] + j];
        if (rec == NOREC || rec == OUT_INVALID)
            return OUT_INVALID;
        if (rec == OUT_W)
            return OUT_W;
        r = (rw_out)rec;
    }
    return ag_node_output_nconsumers(g, n, o) > 1 ? OUT_RO : r;
}

/* The decision matrix (notes 3.8). */
static rw_res matrix(rw_out out, rw_in in)
{
    if (out == OUT_INVALID || in == IN_INVALID)
        return RES_WRONG;
    switch (out) {
    case OUT_RO_CONST:
        return in == IN_RO ? RES_NONE : RES_IDENTITY;
    case OUT_RO:
    case OUT_W:
        return in == IN_SW ? RES_IDENTITY : RES_NONE;
    default:
        return RES_NONE;
    }
}

/* ---- writes through aliases ----
 * The matrix judges an edge by its producer's output alone, so a write
 * through a view, a ref output (an Assign's output is its variable) or a
 * subgraph boundary reaches constants and readers it does not see.  For a
 * writing input the matrix lets through, the buffer's symbol decides as the
 * matrix would on the whole buffer: a constant in it is ReadOnlyConst for
 * any write; for a scope write, a variable (Writeable) or a reader that no
 * path runs before the writer (ReadOnly) needs the copy too. */
static ag_status alias_needs_copy(rw *st, ag_port p, ag_port c, ag_node_id skip, rw_in t, char *rule, size_t cap,
                                  bool *need)
{
    *need = false;
    if (t != IN_W && t != IN_SW)
        return AG_OK;
    if (st->alias == NULL)
        AG_TRY(ag_aliases_create(st->env, &st->alias));
    ag_alias_hit hit;
    unsigned want = AG_ALIAS_WANT_CONST | (t == IN_SW ? AG_ALIAS_WANT_VAR | AG_ALIAS_WANT_READERS : 0u);
    AG_TRY(ag_alias_judge(st->alias, p, c.node, skip, want, &hit));
    if (hit.kind == AG_ALIAS_NONE)
        return AG_OK;
    rw_out row = hit.kind == AG_ALIAS_CONST ? OUT_RO_CONST : hit.kind == AG_ALIAS_VAR ? OUT_W : OUT_RO;
    char base[64];
    snprintf(base, sizeof base, "matrix %s x %s", out_names[row], in_names[t]);
    ag_alias_rule(st->alias, base, p, &hit, rule, cap);
    *need = true;
    return AG_OK;
}

/* ---- changes ---- */

static bool have_report(const rw *st)
{
    return st->env->report != NULL;
}

static ag_status warn_invalid(rw *st, ag_port src, ag_port dst, rw_out out, rw_in in)
{
    if (!have_report(st))
        return AG_OK;
    ag_graph *g = st->g;
    const char *nodes[2] = {ag_node_name(g, src.node), ag_node_name(g, dst.node)};
    return ag_report_warning(st->env->report, PASS, "W_RW_INVALID", nodes, 2,
                             "graph '%s': node \"%s\" (%s) output %u is %s and node \"%s\" (%s) input %u is %s: the "
                             "read/write types contradict each other (wrong graph); nothing inserted",
                             ag_sub_name(g, ag_node_owner(g, src.node)), nodes[0], ag_node_type(g, src.node),
                             src.index, out_names[out], nodes[1], ag_node_type(g, dst.node), dst.index, in_names[in]);
}

/* The pass took an Identity out (it separated nothing).  The report has
 * isolations and warnings only; a removal is neither, so it goes out as a
 * warning whose code starts with N_ (a note: nothing is wrong). */
static ag_status note_removed(rw *st, ag_node_id id, ag_port src, const char *why)
{
    if (!have_report(st))
        return AG_OK;
    ag_graph *g = st->g;
    const char *nodes[2] = {ag_node_name(g, id), ag_node_name(g, src.node)};
    return ag_report_warning(st->env->report, PASS, "N_RW_REMOVED_IDENTITY", nodes, 2,
                             "graph '%s': removed node \"%s\" (%s) after node \"%s\" (%s) output %u: %s",
                             ag_sub_name(g, ag_node_owner(g, id)), nodes[0], ag_node_type(g, id), nodes[1],
                             ag_node_type(g, src.node), src.index, why);
}

/* "<producer>_Identity<N>", the first N (counting over the run) that is free
 * in the producer's subgraph.  *buf is allocated; free with *cap. */
static ag_status identity_name(rw *st, ag_node_id producer, char **buf, size_t *cap)
{
    const char *base = ag_node_name(st->g, producer);
    ag_sub_id s = ag_node_owner(st->g, producer);
    size_t len = strlen(base) + 32;
    char *name = ag_alloc(st->ctx, len);
    if (!name)
        return AG_OOM(st->ctx);
    do
        snprintf(name, len, "%s_Identity%u", base, st->counter++);
    while (ag_sub_find_node(st->g, s, name) != AG_NONE);
    *buf = name;
    *cap = len;
    return AG_OK;
}

/* Notes 3.9.4: the copy carries the producer's _batch_label and nothing
 * else.  The seed's prose gives these identities _cannot_be_deleted=true and
 * no_need_constant_folding=false; the reference code sets neither, and we
 * follow the code (so a later run may still remove an identity that no longer
 * separates anything). */
static ag_status finish_identity(rw *st, ag_node_id id, ag_node_id producer)
{
    const ag_attr *label = ag_attrs_find(ag_node_attrs_c(st->g, producer), "_batch_label");
    return label ? ag_attrs_set(st->g, ag_node_attrs(st->g, id), label) : AG_OK;
}

/* Identity on the edge feeding dst:i; the helper moves dst's incoming control
 * edges onto it (notes 2.1).  producer gives the name and _batch_label: the
 * edge's producer, or for a split identity the node before it. */
static ag_status insert_before(rw *st, ag_node_id dst, uint32_t i, ag_node_id producer, const char *rule)
{
    char *name = NULL;
    size_t cap = 0;
    AG_TRY(identity_name(st, producer, &name, &cap));
    ag_why why = {PASS, rule};
    ag_node_id id;
    ag_status s = ag_pass_insert_before(st->env, &why, dst, i, "Identity", name, &id);
    ag_free(st->ctx, name, cap);
    if (s == AG_OK)
        s = ag_aliases_changed(st->alias, id, false);
    return s == AG_OK ? finish_identity(st, id, producer) : s;
}

/* Identity after src:o for the one consumer dst:i; the helper moves src's
 * outgoing control edges onto it (notes 2.1), so whatever waited for src
 * now waits for the copy, which still runs after src. */
static ag_status insert_after(rw *st, ag_port src, ag_port dst, const char *rule)
{
    char *name = NULL;
    size_t cap = 0;
    AG_TRY(identity_name(st, src.node, &name, &cap));
    ag_why why = {PASS, rule};
    ag_node_id id;
    ag_status s = ag_pass_insert_after(st->env, &why, src.node, src.index, &dst, 1, "Identity", name, &id);
    ag_free(st->ctx, name, cap);
    if (s == AG_OK)
        s = ag_aliases_changed(st->alias, id, false);
    return s == AG_OK ? finish_identity(st, id, src.node) : s;
}

static ag_status add_ctrl(rw *st, ag_node_id a, ag_node_id b, const char *rule)
{
    if (a == b)
        return AG_OK;
    ag_why why = {PASS, rule};
    AG_TRY(ag_pass_add_ctrl(st->env, &why, a, b));
    return ag_aliases_changed(st->alias, AG_NONE, false);
}

/* Copies of a node's control edges, taken before the node changes. */
static ag_status ctrl_snapshot(rw *st, ag_node_id n, bool in, ag_node_id **out, uint32_t *count)
{
    uint32_t c = in ? ag_node_num_ctrl_in(st->g, n) : ag_node_num_ctrl_out(st->g, n);
    ag_node_id *v = ag_arena_alloc(&st->arena, (size_t)c * sizeof *v + 1);
    if (!v)
        return AG_OOM(st->ctx);
    for (uint32_t k = 0; k < c; k++)
        v[k] = in ? ag_node_ctrl_in(st->g, n, k) : ag_node_ctrl_out(st->g, n, k);
    *out = v;
    *count = c;
    return AG_OK;
}

/* Takes identity id out: its producer feeds its consumer (if any) directly,
 * every order it imposed is kept by control edges (what the reference's
 * IsolateNode does, but through the recorded helper), then it is removed. */
static ag_status remove_identity(rw *st, ag_node_id id, const char *rule, const char *why)
{
    ag_graph *g = st->g;
    ag_port src = ag_node_input_src(g, id, 0);
    ag_port c = {AG_NONE, 0};
    if (ag_node_output_nconsumers(g, id, 0) == 1)
        c = ag_node_output_consumer(g, id, 0, 0);
    ag_node_id *pred = NULL, *succ = NULL;
    uint32_t np = 0, ns = 0;
    AG_TRY(ctrl_snapshot(st, id, true, &pred, &np));
    AG_TRY(ctrl_snapshot(st, id, false, &succ, &ns));
    AG_TRY(note_removed(st, id, src, why));
    if (c.node != AG_NONE) {
        AG_TRY(ag_graph_remove_edge(g, id, 0, c.node, c.index));
        AG_TRY(ag_graph_add_edge(g, src.node, src.index, c.node, c.index));
    }
    for (uint32_t a = 0; a < np; a++) {
        if (c.node != AG_NONE)
            AG_TRY(add_ctrl(st, pred[a], c.node, rule));
        for (uint32_t b = 0; b < ns; b++)
            AG_TRY(add_ctrl(st, pred[a], succ[b], rule));
    }
    for (uint32_t b = 0; b < ns; b++)
        AG_TRY(add_ctrl(st, src.node, succ[b], rule));
    /* Two buffers became one: the symbols are rebuilt on the next question. */
    AG_TRY(ag_aliases_changed(st->alias, AG_NONE, true));
    return ag_graph_remove_node(g, id);
}

/* ---- subgraph boundaries (notes 3.7) ---- */

/* True when a Writeable value leaving subgraph output k of parent may stay
 * aliased: nobody after the parent writes it, and no branch hands out a
 * shared read-only buffer under the same output. */
static bool optimizable_by_parent(const rw *st, ag_node_id parent, uint32_t k)
{
    const ag_graph *g = st->g;
    if (kind_of(st, parent) == AG_OPK_CALL || k >= ag_node_num_outputs(g, parent))
        return true;
    uint32_t nsubs = ag_node_num_subs(g, parent);
    if (nsubs > 1) {
        for (uint32_t b = 0; b < nsubs; b++) {
            ag_sub_id s = ag_node_sub(g, parent, b);
            if (s >= st->nsub || !st->marked[s] || st->netout[s] == AG_NONE || st->outidx_of[s][k] == AG_NONE)
                continue;
            ag_port p = ag_node_input_src(g, st->netout[s], st->outidx_of[s][k]);
            if (p.node != AG_NONE && output_type(st, p.node, p.index) == OUT_RO)
                return false;
        }
    }
    uint32_t nc = ag_node_output_nconsumers(g, parent, k);
    for (uint32_t c = 0; c < nc; c++) {
        ag_port p = ag_node_output_consumer(g, parent, k, c);
        if (ag_node_num_subs(g, p.node) > 0 || plain_input_type(st, p.node, p.index) != IN_RO)
            return false;
    }
    return true;
}

static ag_status mark_subgraph(rw *st, ag_sub_id s, bool insert)
{
    ag_graph *g = st->g;
    ag_node_id parent = ag_sub_parent(g, s);
    /* Inserting an identity adds nodes to s: work on a copy of its list. */
    uint32_t cnt = ag_sub_node_count(g, s);
    ag_node_id *nodes = ag_arena_alloc(&st->arena, (size_t)cnt * sizeof *nodes + 1);
    if (!nodes)
        return AG_OOM(st->ctx);
    for (uint32_t k = 0; k < cnt; k++)
        nodes[k] = ag_sub_node_at(g, s, k);
    for (uint32_t k = 0; k < cnt; k++) {
        ag_node_id n = nodes[k];
        ag_op_kind kind = kind_of(st, n);
        if (ag_op_kind_is_data_like(kind) && is_subgraph_data(st, n)) {
            rw_in acc = IN_RO;
            uint32_t nc = ag_node_num_outputs(g, n) ? ag_node_output_nconsumers(g, n, 0) : 0;
            for (uint32_t c = 0; c < nc; c++) {
                ag_port p = ag_node_output_consumer(g, n, 0, c);
                acc = combine(acc, input_type(st, p.node, p.index));
            }
            st->data_rec[n] = (uint8_t)acc;
        } else if (kind == AG_OPK_NETOUTPUT) {
            uint32_t nin = ag_node_num_inputs(g, n);
            for (uint32_t i = 0; i < nin; i++) {
                int64_t idx = -1;
                ag_attrs_get_int(ag_node_input_desc_c(g, n, i)->attrs, "_parent_node_index", &idx);
                ag_port src = ag_node_input_src(g, n, i);
                rw_out t = src.node == AG_NONE ? OUT_INVALID : output_type(st, src.node, src.index);
                if (t == OUT_W && !(idx >= 0 && idx <= UINT32_MAX && optimizable_by_parent(st, parent, (uint32_t)idx))) {
                    ag_port dst = {n, i};
                    if (insert)
                        AG_TRY(insert_after(st, src, dst, "subgraph output Writeable not optimizable by parent"));
                    t = OUT_SOFT;
                }
                st->net_rec[st->in_base[n] + i] = (uint8_t)t;
            }
        }
    }
    return AG_OK;
}

typedef struct sub_key {
    uint32_t depth;
    ag_sub_id s;
} sub_key;

static int sub_key_cmp(const void *a, const void *b)
{
    const sub_key *x = a, *y = b;
    if (x->depth != y->depth)
        return x->depth > y->depth ? -1 : 1;
    return x->s > y->s ? -1 : (x->s < y->s);
}

/* Innermost first, so that a parent's boundary sees its children's types;
 * the reference walks its subgraph list backwards, which assumes inner
 * subgraphs were registered later.  Depth order does not.  Without insert
 * only the types are recorded (a copy that would be made records SoftRead,
 * as it does with insert). */
static ag_status mark_all_subgraphs(rw *st, bool insert)
{
    sub_key *keys = ag_arena_alloc(&st->arena, (size_t)st->nsub * sizeof *keys + 1);
    if (!keys)
        return AG_OOM(st->ctx);
    uint32_t n = 0;
    for (ag_sub_id s = 0; s < st->nsub; s++)
        if (st->marked[s])
            keys[n++] = (sub_key){ag_sub_depth(st->g, s), s};
    qsort(keys, n, sizeof *keys, sub_key_cmp);
    for (uint32_t k = 0; k < n; k++)
        AG_TRY(mark_subgraph(st, keys[k].s, insert));
    return AG_OK;
}

/* ---- identities already in the graph (notes 3.9.1, 3.9.2) ---- */

/* SplitIdentity (notes 3.9.1), reaching in one run what the reference
 * reaches in two.  The reference puts a fresh copy between the shared
 * identity and each writing consumer and links readers to the producer
 * directly; its RemoveNoUseIdentity then keeps the old identity when two
 * copies hang off it, and on its next run removes it, and also removes the
 * copy in front of an Assign whenever the producer is not a constant
 * (ReadOnly x Writeable needs nothing).  Here every consumer moves to the
 * producer, a ScopeWriteable input gets its copy there, a Writeable one only
 * where the matrix demands it, and the emptied identity goes: the same
 * buffers, no copy of a copy, and a second run finds nothing to do. */
static ag_status split_identity(rw *st, ag_node_id id)
{
    ag_graph *g = st->g;
    uint32_t nc = ag_node_output_nconsumers(g, id, 0);
    ag_port p = ag_node_input_src(g, id, 0);
    if (nc <= 1 || p.node == AG_NONE)
        return AG_OK;
    ag_port *cons = ag_arena_alloc(&st->arena, (size_t)nc * sizeof *cons);
    rw_in *types = ag_arena_alloc(&st->arena, (size_t)nc * sizeof *types);
    ag_node_id *pred = NULL, *succ = NULL;
    uint32_t np = 0, ns = 0;
    if (!cons || !types)
        return AG_OOM(st->ctx);
    AG_TRY(ctrl_snapshot(st, id, true, &pred, &np));
    AG_TRY(ctrl_snapshot(st, id, false, &succ, &ns));
    for (uint32_t k = 0; k < nc; k++) {
        cons[k] = ag_node_output_consumer(g, id, 0, k);
        types[k] = input_type(st, cons[k].node, cons[k].index);
    }
    /* Whether a Writeable consumer needs a copy does not depend on how many
     * consumers the producer has (constants and invalid types only). */
    bool copy_writers = matrix(output_type(st, p.node, p.index), IN_W) != RES_NONE;
    for (uint32_t k = 0; k < nc; k++) {
        ag_port c = cons[k];
        /* The identity's control edges are kept on both ends. */
        AG_TRY(ag_graph_remove_edge(g, id, 0, c.node, c.index));
        AG_TRY(ag_graph_add_edge(g, p.node, p.index, c.node, c.index));
        for (uint32_t a = 0; a < np; a++)
            AG_TRY(add_ctrl(st, pred[a], c.node, "split identity: keep control order"));
        for (uint32_t b = 0; b < ns; b++)
            AG_TRY(add_ctrl(st, p.node, succ[b], "split identity: keep control order"));
        /* A write through an alias of the producer is judged with the other
         * copies (insert_as_needed), once the matrix copies that cut
         * constants off exist. */
        if (types[k] == IN_SW || (types[k] == IN_W && copy_writers))
            AG_TRY(insert_before(st, c.node, c.index, p.node, "split identity"));
    }
    return remove_identity(st, id, "split identity: keep control order",
                           "its consumers read the producer or copies of their own");
}

/* The reference's IsIdentityUsefulForRWControl: the identity's control edge
 * makes a read of a variable happen before an Assign writes it. */
static bool identity_orders_variable(const rw *st, ag_node_id id, ag_port p)
{
    const ag_graph *g = st->g;
    if (!ag_op_kind_is_var_like(kind_of(st, p.node)))
        return false;
    uint32_t ns = ag_node_num_ctrl_out(g, id);
    for (uint32_t k = 0; k < ns; k++) {
        ag_node_id s = ag_node_ctrl_out(g, id, k);
        if (kind_of(st, s) != AG_OPK_ASSIGN)
            continue;
        uint32_t nin = ag_node_num_inputs(g, s);
        for (uint32_t i = 0; i < nin; i++) {
            ag_port q = ag_node_input_src(g, s, i);
            if (q.node == p.node && q.index == p.index)
                return true;
        }
    }
    return false;
}

static ag_status remove_no_use_identity(rw *st, ag_node_id id)
{
    ag_graph *g = st->g;
    ag_port p = ag_node_input_src(g, id, 0);
    uint32_t nc = ag_node_output_nconsumers(g, id, 0);
    if (p.node == AG_NONE || nc > 1)
        return AG_OK;
    ag_port c = nc ? ag_node_output_consumer(g, id, 0, 0) : (ag_port){AG_NONE, 0};
    if (c.node != AG_NONE && (kind_of(st, c.node) == AG_OPK_STREAM_MERGE || is_subgraph_netoutput(st, c.node) ||
                              ag_node_num_subs(g, c.node) > 0))
        return AG_OK;
    if (is_subgraph_data(st, p.node) || ag_node_num_subs(g, p.node) > 0)
        return AG_OK;
    if (nc && ag_node_num_ctrl_out(g, id) > 0 && identity_orders_variable(st, id, p))
        return AG_OK;
    if (nc && matrix(output_type(st, p.node, p.index), input_type(st, c.node, c.index)) != RES_NONE)
        return AG_OK;
    if (nc && !skip_rw(st, c.node)) {
        /* The copy a write through an alias needed (insert_as_needed). */
        char rule[256];
        bool need = false;
        AG_TRY(alias_needs_copy(st, p, c, id, input_type(st, c.node, c.index), rule, sizeof rule, &need));
        if (need) {
            /* Judged again after the matrix copies (recheck_alias_kept): a
             * copy made later may cut the constant off. */
            if (!st->rechecking && ag_vec_push(st->ctx, &st->alias_kept, sizeof id, &id) != AG_OK)
                return AG_OOM(st->ctx);
            return AG_OK;
        }
    }
    return remove_identity(st, id, "remove no-use identity: keep control order",
                           nc ? "the matrix needs no copy between its producer and its consumer"
                              : "it has no consumer");
}

/* ---- InsertIdentityAsNeeded (notes 3.9.3) ---- */

/* NeedCheckSkipIdentity: may the last consumer write the buffer in place? */
static bool need_check_skip(const rw *st, rw_out t, ag_node_id n, uint32_t o)
{
    const ag_graph *g = st->g;
    if (t == OUT_RO)
        return true;
    if (t != OUT_W)
        return false;
    ag_port cur = {n, o};
    for (uint32_t steps = 0; steps <= st->cap; steps++) {
        if (ag_node_output_nconsumers(g, cur.node, cur.index) > 1)
            return false;
        if (ag_op_kind_is_data_like(kind_of(st, cur.node))) {
            int64_t idx;
            return !ag_attrs_get_int(ag_node_attrs_c(g, cur.node), "_parent_node_index", &idx);
        }
        uint32_t in = out_ref(st, cur.node, cur.index);
        if (in == AG_NONE)
            return true;
        cur = ag_node_input_src(g, cur.node, in);
        if (cur.node == AG_NONE)
            return false;
    }
    return false;
}

/* One consumer as the matrix sees it.  A consumer that is an Identity
 * feeding a single writing input already isolates that input: it is seen
 * as that input, marked isolated, so a second run finds the same groups
 * (for "all consumers are inputs of one node") as the first did before it
 * inserted the copies, and inserts nothing more. */
typedef struct cons_view {
    ag_port port;     /* the consumer anchor of the output */
    ag_node_id key;   /* node whose input it stands for */
    rw_in type;
    bool isolated;
    bool ignored;     /* _skip_rw_conflict */
} cons_view;

static void view_consumer(const rw *st, ag_port c, cons_view *v)
{
    const ag_graph *g = st->g;
    v->port = c;
    v->key = c.node;
    v->isolated = false;
    v->ignored = skip_rw(st, c.node);
    if (v->ignored)
        return;
    if (is_identity(st, c.node) && ag_node_output_nconsumers(g, c.node, 0) == 1) {
        ag_port d = ag_node_output_consumer(g, c.node, 0, 0);
        rw_in t = skip_rw(st, d.node) ? IN_RO : input_type(st, d.node, d.index);
        if (t == IN_SW || t == IN_W) {
            v->key = d.node;
            v->type = t;
            v->isolated = true;
            return;
        }
    }
    v->type = input_type(st, c.node, c.index);
}

static ag_status views_of(rw *st, ag_node_id n, uint32_t o, cons_view **out, uint32_t *count)
{
    uint32_t nc = ag_node_output_nconsumers(st->g, n, o);
    cons_view *v = ag_arena_alloc(&st->arena, (size_t)nc * sizeof *v + 1);
    if (!v)
        return AG_OOM(st->ctx);
    for (uint32_t k = 0; k < nc; k++)
        view_consumer(st, ag_node_output_consumer(st->g, n, o, k), &v[k]);
    *out = v;
    *count = nc;
    return AG_OK;
}

static ag_status insert_as_needed(rw *st, ag_node_id n)
{
    ag_graph *g = st->g;
    uint32_t nout = ag_node_num_outputs(g, n);
    for (uint32_t o = 0; o < nout; o++) {
        if (ag_node_output_nconsumers(g, n, o) == 0)
            continue;
        rw_out t = output_type(st, n, o);
        cons_view *v = NULL;
        uint32_t nc = 0;
        AG_TRY(views_of(st, n, o, &v, &nc));
        /* The reference lets the last consumer write in place when every
         * consumer is a ScopeWriteable input of one node: the node reads all
         * of them before it writes, whatever the schedule.  "Last" is the
         * last consumer not yet isolated, so the answer does not depend on
         * where a copy inserted earlier sits in the consumer list. */
        bool skip = need_check_skip(st, t, n, o) && t != OUT_INVALID;
        ag_node_id first = AG_NONE;
        uint32_t last = AG_NONE;
        for (uint32_t k = 0; k < nc && skip; k++) {
            if (v[k].ignored)
                continue;
            if (first == AG_NONE)
                first = v[k].key;
            if (v[k].key != first || v[k].type != IN_SW)
                skip = false;
            if (!v[k].isolated)
                last = k;
        }
        for (uint32_t k = 0; k < nc; k++) {
            if (v[k].ignored)
                continue;
            rw_res r = matrix(t, v[k].type);
            if (r == RES_WRONG) {
                AG_TRY(warn_invalid(st, (ag_port){n, o}, v[k].port, t, v[k].type));
                continue;
            }
            if (v[k].isolated)
                continue;
            char rule[256];
            if (r == RES_NONE || (skip && k == last)) {
                bool need = false;
                AG_TRY(alias_needs_copy(st, (ag_port){n, o}, v[k].port, AG_NONE, v[k].type, rule, sizeof rule,
                                        &need));
                if (need)
                    AG_TRY(insert_before(st, v[k].port.node, v[k].port.index, n, rule));
                continue;
            }
            snprintf(rule, sizeof rule, "matrix %s x %s", out_names[t], in_names[v[k].type]);
            AG_TRY(insert_before(st, v[k].port.node, v[k].port.index, n, rule));
        }
    }
    return AG_OK;
}

/* ---- order of accesses left in place ----
 * The matrix leaves a Writeable input and other readers or writers of the
 * same buffer in place (Writeable x Writeable, ReadOnly x Writeable): that
 * is only right in program order.  Where no path orders two of them, a
 * control edge in topological order does.  Writers are chained, and each
 * reader is put after the writer before it and before the writer after it,
 * which orders it against every writer through the chain: at most one edge
 * per writer and two per reader. */

typedef struct access {
    ag_node_id node;
    uint64_t pos;
    bool writer;
} access;

static int access_cmp(const void *a, const void *b)
{
    const access *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    return (int)y->writer - (int)x->writer; /* a node's write entry first */
}

static ag_status order_output(rw *st, ag_reach *reach, ag_node_id n, uint32_t o)
{
    ag_graph *g = st->g;
    uint32_t nc = ag_node_output_nconsumers(g, n, o);
    if (nc < 2)
        return AG_OK;
    rw_out t = output_type(st, n, o);
    if (t == OUT_INVALID)
        return AG_OK;
    access *acc = ag_arena_alloc(&st->arena, (size_t)nc * sizeof *acc);
    if (!acc)
        return AG_OOM(st->ctx);
    uint32_t na = 0, nw = 0;
    for (uint32_t k = 0; k < nc; k++) {
        ag_port c = ag_node_output_consumer(g, n, o, k);
        if (skip_rw(st, c.node))
            continue;
        bool w = input_type(st, c.node, c.index) != IN_RO;
        acc[na++] = (access){c.node, ag_reach_pos(reach, c.node), w};
        nw += w;
    }
    if (nw == 0)
        return AG_OK;
    qsort(acc, na, sizeof *acc, access_cmp);
    /* One entry per node: a node that writes the buffer through one input
     * and reads it through another is ordered as a writer. */
    uint32_t m = 0;
    for (uint32_t k = 0; k < na; k++)
        if (m == 0 || acc[m - 1].node != acc[k].node)
            acc[m++] = acc[k];
    ag_node_id prev_w = AG_NONE;
    for (uint32_t k = 0; k < m; k++) {
        if (acc[k].writer) {
            if (prev_w != AG_NONE && !ag_reaches(reach, prev_w, acc[k].node))
                AG_TRY(add_ctrl(st, prev_w, acc[k].node, "rw: order writers"));
            prev_w = acc[k].node;
            continue;
        }
        if (prev_w != AG_NONE && !ag_reaches(reach, prev_w, acc[k].node))
            AG_TRY(add_ctrl(st, prev_w, acc[k].node, "rw: order writer before reader"));
        for (uint32_t j = k + 1; j < m; j++)
            if (acc[j].writer) {
                if (!ag_reaches(reach, acc[k].node, acc[j].node))
                    AG_TRY(add_ctrl(st, acc[k].node, acc[j].node, "rw: order reader before writer"));
                break;
            }
    }
    return AG_OK;
}

static ag_status order_accesses(rw *st)
{
    ag_graph *g = st->g;
    ag_reach *reach = NULL;
    ag_status s = ag_reach_create(g, &reach);
    /* Edges are only ever added from an earlier to a later position, so the
     * index's order stays topological and needs no update meanwhile. */
    uint32_t nsub = ag_graph_sub_count(g);
    for (ag_sub_id sub = 0; sub < nsub && s == AG_OK; sub++) {
        if (!ag_sub_alive(g, sub))
            continue;
        ag_node_id p = ag_sub_parent(g, sub);
        if (p != AG_NONE && kind_of(st, p) == AG_OPK_WHILE)
            continue;
        uint32_t cnt = ag_sub_node_count(g, sub);
        for (uint32_t k = 0; k < cnt && s == AG_OK; k++) {
            ag_node_id n = ag_sub_node_at(g, sub, k);
            uint32_t nout = ag_node_num_outputs(g, n);
            for (uint32_t o = 0; o < nout && s == AG_OK; o++)
                s = order_output(st, reach, n, o);
        }
    }
    ag_reach_destroy(reach);
    return s;
}

/* ---- the driver (notes 3.9) ---- */

static bool skip_in_main_loop(const rw *st, ag_node_id n)
{
    const ag_graph *g = st->g;
    if (!ag_node_alive(g, n) || owner_parent_is_while(st, n))
        return true;
    if (ag_node_owner(g, n) != AG_ROOT) {
        ag_op_kind k = kind_of(st, n);
        if (k == AG_OPK_DATA || k == AG_OPK_NETOUTPUT)
            return true;
    }
    return ag_attrs_get_flag(ag_node_attrs_c(g, n), "_cannot_be_deleted", false);
}

static ag_status enqueue(rw *st, ag_node_id n)
{
    if (n >= st->qcap) {
        uint32_t cap = st->qcap * 2 > n + 64 ? st->qcap * 2 : n + 64;
        uint8_t *q = ag_arena_alloc(&st->arena, cap);
        if (!q)
            return AG_OOM(st->ctx);
        if (st->qcap)
            memcpy(q, st->queued, st->qcap);
        st->queued = q;
        st->qcap = cap;
    }
    if (st->queued[n])
        return AG_OK;
    if (ag_vec_push(st->ctx, &st->work, sizeof n, &n) != AG_OK)
        return AG_OOM(st->ctx);
    st->queued[n] = 1;
    return AG_OK;
}

static bool identity_to_visit(const rw *st, ag_node_id n)
{
    return !skip_in_main_loop(st, n) && is_identity(st, n);
}

/* After an identity went, its producer has other consumers: every identity
 * that reads it (and the producer itself, if an identity) may now decide
 * differently. */
static ag_status requeue_around(rw *st, ag_port p)
{
    if (p.node == AG_NONE || !ag_node_alive(st->g, p.node))
        return AG_OK;
    if (identity_to_visit(st, p.node))
        AG_TRY(enqueue(st, p.node));
    uint32_t nc = ag_node_output_nconsumers(st->g, p.node, p.index);
    for (uint32_t k = 0; k < nc; k++) {
        ag_node_id c = ag_node_output_consumer(st->g, p.node, p.index, k).node;
        if (identity_to_visit(st, c))
            AG_TRY(enqueue(st, c));
    }
    return AG_OK;
}

/* Identities first, until none changes any more.  The reference handles
 * each identity when the topological walk reaches it, between the copy
 * decisions of other nodes, so removing an identity that has no consumer can
 * leave a copy decided earlier for its producer's other consumers needless
 * (their count dropped), and the next run would take it out again.  Settling
 * the identities first, and revisiting those next to a change, makes the
 * copy decisions below final. */
static ag_status settle_identities(rw *st, const ag_node_id *order, uint32_t count)
{
    for (uint32_t k = 0; k < count; k++)
        if (identity_to_visit(st, order[k]))
            AG_TRY(enqueue(st, order[k]));
    for (uint32_t head = 0; head < st->work.len; head++) {
        ag_node_id n = AG_VEC_AT(st->work, ag_node_id, head);
        st->queued[n] = 0;
        if (!identity_to_visit(st, n))
            continue;
        ag_port p = ag_node_input_src(st->g, n, 0);
        AG_TRY(split_identity(st, n));
        if (ag_node_alive(st->g, n))
            AG_TRY(remove_no_use_identity(st, n));
        if (!ag_node_alive(st->g, n))
            AG_TRY(requeue_around(st, p));
    }
    return AG_OK;
}

/* An identity kept in settle_identities only because a write through an
 * alias needed it is judged again once the matrix copies exist: a copy in
 * front of an Assign of a constant, say, takes the constant out of the
 * buffer, and the next run would remove the identity. */
static ag_status recheck_alias_kept(rw *st)
{
    st->rechecking = true;
    for (uint32_t k = 0; k < st->alias_kept.len; k++) {
        ag_node_id id = AG_VEC_AT(st->alias_kept, ag_node_id, k);
        if (ag_node_alive(st->g, id) && is_identity(st, id))
            AG_TRY(remove_no_use_identity(st, id));
    }
    st->rechecking = false;
    return AG_OK;
}

/* The reference's HandleMemoryRWConflict, in phases so that a second run on
 * the result finds nothing to do: refs; boundary types; identities settled;
 * boundaries with their copies; copies by the matrix over a snapshot of the
 * nodes; then control edges for the accesses left in place. */
static ag_status run(rw *st)
{
    ag_graph *g = st->g;
    AG_TRY(mark_ref_relations(st));
    AG_TRY(index_subgraphs(st));
    /* Boundary types first, for the identity decisions; then the boundaries
     * again, with copies, now that identities next to them may have moved
     * (a boundary decision depends on the consumers of the parent). */
    AG_TRY(mark_all_subgraphs(st, false));
    uint32_t count = ag_graph_node_count(g);
    ag_node_id *order = ag_arena_alloc(&st->arena, (size_t)count * sizeof *order + 1);
    if (!order)
        return AG_OOM(st->ctx);
    AG_TRY(ag_graph_topo_order(g, order, &count));
    AG_TRY(settle_identities(st, order, count));
    AG_TRY(mark_all_subgraphs(st, true));
    /* Copies inserted below are not visited (a snapshot, as in the
     * reference); they have one consumer each and would need nothing. */
    count = ag_graph_node_count(g);
    order = ag_arena_alloc(&st->arena, (size_t)count * sizeof *order + 1);
    if (!order)
        return AG_OOM(st->ctx);
    AG_TRY(ag_graph_topo_order(g, order, &count));
    for (uint32_t k = 0; k < count; k++)
        if (!skip_in_main_loop(st, order[k]))
            AG_TRY(insert_as_needed(st, order[k]));
    AG_TRY(recheck_alias_kept(st));
    return order_accesses(st);
}

ag_status ag_pass_rw_conflict(ag_pass_env *env)
{
    rw st;
    memset(&st, 0, sizeof st);
    st.env = env;
    st.g = env->g;
    st.ops = env->ops;
    st.ctx = ag_graph_ctx(env->g);
    st.cap = ag_graph_node_capacity(env->g);
    ag_arena_init(&st.arena, st.ctx);
    ag_status s = run(&st);
    ag_vec_free(st.ctx, &st.work, sizeof(ag_node_id));
    ag_vec_free(st.ctx, &st.alias_kept, sizeof(ag_node_id));
    ag_aliases_destroy(st.alias);
    ag_arena_reset(&st.arena);
    return s;
}
