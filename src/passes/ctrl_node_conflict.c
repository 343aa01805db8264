/* The control-flow pre-pass of the layout-conflict pass (seed 3.3.4,
 * reference notes 4.7): before symbols are checked, every If/Case branch gets
 * one multi-port Identity in front of its NetOutput for outputs whose buffer
 * is a branch input, a constant, a variable or another output of the branch,
 * and every While body gets its output copy and a copy after Data nodes that
 * change loop position, so each parent output owns a buffer of its own.
 *
 * Idempotence.  Every input an Identity bridges is fed by that Identity
 * afterwards: its symbol is the Identity's own output, which is none of the
 * conflicting kinds, and the While rules skip inputs already fed by a copy
 * with a single consumer (so also the body copies of subgraph_isolate) and
 * Data nodes no longer wired straight to the NetOutput.
 *
 * Allocation failure.  Everything that can fail before the first edge changes
 * is undone; a failure while the ports of one Identity are being linked
 * leaves a valid graph whose remaining ports are unconnected. */
#include <stdio.h>
#include <stdlib.h>

#include "passes/layout_internal.h"

#define PNI "_parent_node_index"

#define R_IF_SRC "layout ctrl: if/case branch output from data/const/variable"
#define R_IF_TWICE "layout ctrl: if/case branch output produced twice"
#define R_WHILE_OUT "layout ctrl: while body output copy"
#define R_WHILE_DATA "layout ctrl: while body data position change"

typedef struct cn_state {
    ag_pass_env *env;
    ag_graph *g;
    const ag_ops *ops;
    ag_ctx *ctx;
    uint32_t counter; /* the <N> of identity names */
    ag_vec ports;     /* uint32_t: NetOutput inputs to bridge */
    ag_vec rules;     /* const char *: rule of each of them */
    ag_vec datas;     /* ag_node_id: Data nodes to bridge */
} cn_state;

/* One NetOutput input with its symbol, sorted to find shared symbols. */
typedef struct cn_in {
    uint32_t sym;
    uint32_t idx;
} cn_in;

static ag_op_kind kind_of(const cn_state *st, ag_node_id n)
{
    return ag_ops_node_kind(st->ops, st->g, n);
}

static bool is_copy_kind(const cn_state *st, ag_node_id n)
{
    ag_op_kind k = kind_of(st, n);
    return k == AG_OPK_IDENTITY || k == AG_OPK_MEMCPY;
}

/* Producer p is a copy that feeds only this one consumer (notes 4.8's
 * "already isolated"). */
static bool already_copied(const cn_state *st, ag_port p)
{
    return is_copy_kind(st, p.node) && ag_node_output_nconsumers(st->g, p.node, p.index) == 1;
}

static ag_node_id first_netoutput(const cn_state *st, ag_sub_id s)
{
    uint32_t cnt = ag_sub_node_count(st->g, s);
    for (uint32_t k = 0; k < cnt; k++) {
        ag_node_id n = ag_sub_node_at(st->g, s, k);
        if (kind_of(st, n) == AG_OPK_NETOUTPUT)
            return n;
    }
    return AG_NONE;
}

static bool push_u32(cn_state *st, ag_vec *v, uint32_t x)
{
    return ag_vec_push(st->ctx, v, sizeof x, &x) == AG_OK;
}

static ag_status push_port(cn_state *st, uint32_t idx, const char *rule)
{
    if (!push_u32(st, &st->ports, idx) || ag_vec_push(st->ctx, &st->rules, sizeof rule, &rule) != AG_OK)
        return AG_OOM(st->ctx);
    return AG_OK;
}

/* ---- making and linking the multi-port Identity ---- */

/* Records port c of ident between prod and cons. */
static ag_status record_port(cn_state *st, const char *rule, ag_node_id ident, ag_port prod, ag_port cons)
{
    const char *pn = ag_node_name(st->g, prod.node), *cn = ag_node_name(st->g, cons.node);
    size_t lp = strlen(pn) + 12, lc = strlen(cn) + 12;
    char *buf = ag_alloc(st->ctx, lp + lc);
    if (buf == NULL)
        return AG_OOM(st->ctx);
    snprintf(buf, lp, "%s:%u", pn, (unsigned)prod.index);
    snprintf(buf + lp, lc, "%s:%u", cn, (unsigned)cons.index);
    ag_why why = {AG_LAYOUT_PASS, rule};
    ag_status rc = ag_pass_record(st->env, &why, ident, buf, buf + lp);
    ag_free(st->ctx, buf, lp + lc);
    return rc;
}

/* Creates an unconnected Identity with m ports in subgraph s, named after
 * input in_idx of dst; port c carries the type of srcs[c]. */
static ag_status new_identity(cn_state *st, ag_sub_id s, ag_node_id dst, uint32_t in_idx, const ag_port *srcs,
                              uint32_t m, ag_node_id *out)
{
    ag_graph *g = st->g;
    size_t bcap = strlen(ag_node_name(g, dst)) + 64, ncap = bcap + 24;
    char *base = ag_alloc(st->ctx, bcap + ncap);
    if (base == NULL)
        return AG_OOM(st->ctx);
    char *name = base + bcap;
    ag_layout_identity_base(g, dst, in_idx, st->counter++, base, bcap);
    ag_node_id n = AG_NONE;
    ag_status rc = ag_pass_unique_name(st->env, s, base, name, ncap);
    if (rc == AG_OK)
        rc = ag_graph_add_node(g, s, "Identity", name, m, m, &n);
    ag_free(st->ctx, base, bcap + ncap);
    AG_TRY(rc);
    for (uint32_t c = 0; rc == AG_OK && c < m; c++) {
        const ag_tensor_desc *d = ag_node_output_desc_c(g, srcs[c].node, srcs[c].index);
        rc = ag_desc_copy_type(g, ag_node_input_desc(g, n, c), d);
        if (rc == AG_OK)
            rc = ag_desc_copy_type(g, ag_node_output_desc(g, n, c), d);
    }
    if (rc != AG_OK) {
        (void)ag_graph_remove_node(g, n);
        return rc;
    }
    *out = n;
    return AG_OK;
}

/* One Identity whose port c sits on the edge feeding no:ins[c] (InsertNodeBefore
 * per port: the NetOutput's incoming control edges move onto it). */
static ag_status identity_before(cn_state *st, ag_node_id no, const uint32_t *ins, const char *const *rules,
                                 uint32_t m)
{
    ag_graph *g = st->g;
    ag_port *srcs = ag_alloc(st->ctx, (size_t)m * sizeof *srcs);
    if (srcs == NULL)
        return AG_OOM(st->ctx);
    for (uint32_t c = 0; c < m; c++)
        srcs[c] = ag_node_input_src(g, no, ins[c]);
    ag_node_id n = AG_NONE;
    ag_status rc = new_identity(st, ag_node_owner(g, no), no, ins[0], srcs, m, &n);
    if (rc == AG_OK) {
        for (uint32_t c = 0; rc == AG_OK && c < m; c++)
            rc = ag_layout_identity_attrs(st->env, n, srcs[c].node, no);
        if (rc != AG_OK)
            (void)ag_graph_remove_node(g, n);
    }
    for (uint32_t c = 0; rc == AG_OK && c < m; c++) {
        rc = ag_graph_insert_before(g, no, ins[c], n, c, c);
        if (rc == AG_OK)
            rc = record_port(st, rules[c], n, srcs[c], (ag_port){no, ins[c]});
        else if (c == 0)
            (void)ag_graph_remove_node(g, n);
    }
    ag_free(st->ctx, srcs, (size_t)m * sizeof *srcs);
    return rc;
}

/* One Identity whose port k bridges datas[k]:0 to all of its consumers. */
static ag_status identity_after(cn_state *st, ag_sub_id s, const ag_node_id *datas, uint32_t m, const char *rule)
{
    ag_graph *g = st->g;
    ag_port *srcs = ag_alloc(st->ctx, (size_t)m * sizeof *srcs);
    if (srcs == NULL)
        return AG_OOM(st->ctx);
    for (uint32_t k = 0; k < m; k++)
        srcs[k] = (ag_port){datas[k], 0};
    ag_port c0 = ag_node_output_consumer(g, datas[0], 0, 0);
    ag_node_id n = AG_NONE;
    ag_status rc = new_identity(st, s, c0.node, c0.index, srcs, m, &n);
    if (rc == AG_OK) {
        for (uint32_t k = 0; rc == AG_OK && k < m; k++)
            rc = ag_layout_identity_attrs(st->env, n, datas[k], ag_node_output_consumer(g, datas[k], 0, 0).node);
        if (rc != AG_OK)
            (void)ag_graph_remove_node(g, n);
    }
    for (uint32_t k = 0; rc == AG_OK && k < m; k++) {
        ag_port ck = ag_node_output_consumer(g, datas[k], 0, 0);
        rc = ag_graph_insert_after(g, datas[k], 0, NULL, 0, n, k, k);
        if (rc == AG_OK)
            rc = record_port(st, rule, n, srcs[k], ck);
        else if (k == 0)
            (void)ag_graph_remove_node(g, n);
    }
    ag_free(st->ctx, srcs, (size_t)m * sizeof *srcs);
    return rc;
}

/* ---- If / Case: CheckOneSubGraphConflict ---- */

/* The buffer of a symbol is one a branch must not hand to its parent as an
 * output: an out-anchor of a Data of the branch, a constant, a variable, or a
 * node referring to a variable (ref_var_src_var_name on an output
 * descriptor or on the node). */
static bool symbol_fixed(const cn_state *st, const ag_symtab *t, uint32_t sym, ag_sub_id branch)
{
    uint32_t sz = ag_symtab_size(t, sym);
    for (uint32_t k = 0; k < sz; k++) {
        const ag_lanchor *a = ag_symtab_anchor_at(t, sym, k);
        if (a->is_input)
            continue;
        ag_op_kind kd = kind_of(st, a->node);
        if (ag_op_kind_is_data_like(kd) && ag_node_owner(st->g, a->node) == branch)
            return true;
        if (ag_op_kind_is_const_like(kd) || ag_op_kind_is_var_like(kd))
            return true;
        if (ag_attrs_find(ag_node_attrs_c(st->g, a->node), "ref_var_src_var_name") != NULL)
            return true;
        uint32_t nout = ag_node_num_outputs(st->g, a->node);
        for (uint32_t o = 0; o < nout; o++)
            if (ag_ops_output_ref_var(st->g, a->node, o) != NULL)
                return true;
    }
    return false;
}

static int cmp_in(const void *pa, const void *pb)
{
    const cn_in *a = pa, *b = pb;
    if (a->sym != b->sym)
        return a->sym < b->sym ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int cmp_u32(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    return a < b ? -1 : a > b;
}

/* Selects the conflicting inputs of NetOutput no into st->ports/rules, in
 * input order. */
static ag_status branch_conflicts(cn_state *st, const ag_symtab *t, ag_sub_id branch, ag_node_id no)
{
    ag_graph *g = st->g;
    uint32_t nin = ag_node_num_inputs(g, no), m = 0;
    cn_in *v = ag_alloc(st->ctx, ((size_t)nin + 1) * sizeof *v);
    if (v == NULL)
        return AG_OOM(st->ctx);
    for (uint32_t i = 0; i < nin; i++) {
        ag_lanchor a = {no, i, true};
        uint32_t sym = ag_symtab_symbol_of(t, &a);
        if (ag_node_input_src(g, no, i).node == AG_NONE || sym == AG_NONE)
            continue; /* nothing to bridge */
        v[m++] = (cn_in){sym, i};
    }
    qsort(v, m, sizeof *v, cmp_in);
    /* Per symbol: all its inputs conflict when the buffer is fixed, else all
     * but the first (the earlier input keeps the producer's buffer). */
    ag_status rc = AG_OK;
    uint32_t nsel = 0;
    for (uint32_t k = 0; rc == AG_OK && k < m;) {
        uint32_t e = k + 1;
        while (e < m && v[e].sym == v[k].sym)
            e++;
        bool fixed = symbol_fixed(st, t, v[k].sym, branch);
        for (uint32_t j = fixed ? k : k + 1; j < e; j++) {
            /* Reuse the array: selected inputs are packed at the front, with
             * their rule kept in sym's place (0 = fixed, 1 = twice). */
            v[nsel++] = (cn_in){fixed ? 0u : 1u, v[j].idx};
        }
        k = e;
    }
    /* Input order, which the Identity's ports follow. */
    uint32_t *order = ag_alloc(st->ctx, ((size_t)nsel + 1) * sizeof *order);
    if (order == NULL)
        rc = AG_OOM(st->ctx);
    for (uint32_t k = 0; rc == AG_OK && k < nsel; k++)
        order[k] = v[k].idx << 1 | v[k].sym;
    if (rc == AG_OK)
        qsort(order, nsel, sizeof *order, cmp_u32);
    for (uint32_t k = 0; rc == AG_OK && k < nsel; k++)
        rc = push_port(st, order[k] >> 1, (order[k] & 1u) ? R_IF_TWICE : R_IF_SRC);
    if (order != NULL)
        ag_free(st->ctx, order, ((size_t)nsel + 1) * sizeof *order);
    ag_free(st->ctx, v, ((size_t)nin + 1) * sizeof *v);
    return rc;
}

static ag_status check_branch(cn_state *st, ag_sub_id branch)
{
    ag_node_id no = first_netoutput(st, branch);
    if (no == AG_NONE)
        return AG_OK;
    if (ag_node_num_inputs(st->g, no) >= (UINT32_MAX >> 1))
        return AG_ERR(st->ctx, AG_EINVAL, "node '%s' (NetOutput) in graph %s: too many inputs",
                      ag_node_name(st->g, no), ag_sub_name(st->g, branch));
    ag_symtab *t = NULL;
    AG_TRY(ag_symtab_build(st->env, branch, false, &t));
    st->ports.len = st->rules.len = 0;
    ag_status rc = branch_conflicts(st, t, branch, no);
    ag_symtab_destroy(t);
    AG_TRY(rc);
    if (st->ports.len == 0)
        return AG_OK;
    return identity_before(st, no, st->ports.data, st->rules.data, st->ports.len);
}

static ag_status solve_branches(cn_state *st, ag_node_id n, bool is_if)
{
    uint32_t nb = ag_node_num_subs(st->g, n);
    if (is_if && nb > 2)
        nb = 2;
    for (uint32_t b = 0; b < nb; b++)
        AG_TRY(check_branch(st, ag_node_sub(st->g, n, b)));
    return AG_OK;
}

/* ---- While ---- */

static bool node_pni(const ag_graph *g, ag_node_id n, int64_t *idx)
{
    return ag_attrs_get_int(ag_node_attrs_c(g, n), PNI, idx);
}

static bool input_pni(const ag_graph *g, ag_node_id n, uint32_t i, int64_t *idx)
{
    return ag_attrs_get_int(ag_node_input_desc_c(g, n, i)->attrs, PNI, idx);
}

static bool is_body_data(const cn_state *st, ag_node_id n)
{
    int64_t p;
    return ag_op_kind_is_data_like(kind_of(st, n)) && ag_node_num_outputs(st->g, n) > 0 && node_pni(st->g, n, &p);
}

/* GetWhileBodyDataToNetoutputNodes: a body Data whose only consumer is a
 * NetOutput input is a bypass when both carry the same parent index (the
 * loop buffer is handed back untouched), else it changes position. */
static ag_status body_data_to_netoutput(cn_state *st, ag_sub_id body, ag_node_id no, bool *bypass)
{
    ag_graph *g = st->g;
    uint32_t cnt = ag_sub_node_count(g, body);
    st->datas.len = 0;
    for (uint32_t k = 0; k < cnt; k++) {
        ag_node_id n = ag_sub_node_at(g, body, k);
        int64_t p, q;
        if (!is_body_data(st, n) || ag_node_output_nconsumers(g, n, 0) != 1)
            continue;
        ag_port c = ag_node_output_consumer(g, n, 0, 0);
        if (c.node != no || !node_pni(g, n, &p) || !input_pni(g, no, c.index, &q))
            continue;
        if (p == q)
            bypass[c.index] = true;
        else if (!push_u32(st, &st->datas, n))
            return AG_OOM(st->ctx);
    }
    return AG_OK;
}

/* IsWhileNeedInsertIdentityAtOutput. */
static ag_status while_needs_output_copy(cn_state *st, ag_sub_id body, ag_node_id no, bool *need)
{
    ag_graph *g = st->g;
    *need = true;
    if (ag_node_num_inputs(g, no) != 1)
        return AG_OK;
    ag_node_id d = AG_NONE;
    uint32_t cnt = ag_sub_node_count(g, body);
    for (uint32_t k = 0; k < cnt && d == AG_NONE; k++)
        if (is_body_data(st, ag_sub_node_at(g, body, k)))
            d = ag_sub_node_at(g, body, k);
    if (d == AG_NONE || ag_node_output_nconsumers(g, d, 0) != 1)
        return AG_OK;
    ag_symtab *t = NULL;
    AG_TRY(ag_symtab_build(st->env, body, false, &t));
    uint32_t nsym = ag_symtab_count(t);
    if (nsym != 2) {
        /* One symbol: the Data goes straight back.  More than two: the body
         * computes through intermediate buffers, unless the result's buffer
         * must also be part of a continuous input. */
        *need = false;
        ag_lanchor a = {no, 0, true};
        uint32_t sym = ag_symtab_symbol_of(t, &a);
        uint32_t sz = sym == AG_NONE ? 0 : ag_symtab_size(t, sym);
        for (uint32_t k = 0; k < sz && !*need; k++) {
            const ag_lanchor *x = ag_symtab_anchor_at(t, sym, k);
            if (x->is_input &&
                (ag_ops_node_flags(st->ops, g, x->node) & (AG_OPF_CONTINUOUS_INPUT | AG_OPF_NOPAD_CONTINUOUS_INPUT)))
                *need = true;
        }
    }
    ag_symtab_destroy(t);
    return AG_OK;
}

static ag_status solve_while(cn_state *st, ag_node_id w)
{
    ag_graph *g = st->g;
    if (ag_node_num_subs(g, w) < 2)
        return AG_ERR(st->ctx, AG_EINVAL, "node '%s' (%s) in graph %s: a While needs a cond and a body subgraph",
                      ag_node_name(g, w), ag_node_type(g, w), ag_sub_name(g, ag_node_owner(g, w)));
    ag_sub_id body = ag_node_sub(g, w, 1);
    ag_node_id no = first_netoutput(st, body);
    if (no == AG_NONE)
        return AG_ERR(st->ctx, AG_EINVAL, "node '%s' (%s): body graph %s has no NetOutput", ag_node_name(g, w),
                      ag_node_type(g, w), ag_sub_name(g, body));
    uint32_t nin = ag_node_num_inputs(g, no);
    bool *bypass = ag_calloc(st->ctx, (size_t)nin + 1, sizeof *bypass);
    if (bypass == NULL)
        return AG_OOM(st->ctx);
    bool need = false;
    ag_status rc = body_data_to_netoutput(st, body, no, bypass);
    if (rc == AG_OK)
        rc = while_needs_output_copy(st, body, no, &need);
    st->ports.len = st->rules.len = 0;
    for (uint32_t j = 0; rc == AG_OK && need && j < nin; j++) {
        ag_port p = ag_node_input_src(g, no, j);
        if (bypass[j] || p.node == AG_NONE || already_copied(st, p) ||
            !ag_desc_shape_known(ag_node_input_desc_c(g, no, j)))
            continue;
        rc = push_port(st, j, R_WHILE_OUT);
    }
    ag_free(st->ctx, bypass, ((size_t)nin + 1) * sizeof *bypass);
    AG_TRY(rc);
    if (st->ports.len > 0)
        AG_TRY(identity_before(st, no, st->ports.data, st->rules.data, st->ports.len));
    /* The changed Data were chosen before the output copy: each still has one
     * consumer (that copy, or the NetOutput). */
    if (st->datas.len > 0)
        AG_TRY(identity_after(st, body, st->datas.data, st->datas.len, R_WHILE_DATA));
    return AG_OK;
}

/* ---- driver ---- */

static bool sub_under(const ag_graph *g, ag_sub_id s, ag_sub_id top)
{
    for (uint32_t guard = ag_graph_sub_count(g) + 1; guard > 0; guard--) {
        if (s == top)
            return true;
        ag_node_id p = ag_sub_parent(g, s);
        if (s == AG_ROOT || p == AG_NONE)
            return false;
        s = ag_node_owner(g, p);
    }
    return false;
}

/* The If/Case/While nodes of top and every subgraph below it, parents before
 * the nodes of their subgraphs (ag_graph_topo_order). */
static ag_status collect(cn_state *st, ag_sub_id top, ag_vec *out)
{
    ag_graph *g = st->g;
    uint32_t total = ag_graph_node_count(g), count = 0;
    uint32_t nsubs = ag_graph_sub_count(g);
    ag_node_id *order = ag_alloc(st->ctx, ((size_t)total + 1) * sizeof *order);
    bool *under = ag_calloc(st->ctx, (size_t)nsubs + 1, sizeof *under);
    ag_status rc = order && under ? AG_OK : AG_OOM(st->ctx);
    if (rc == AG_OK)
        rc = ag_graph_topo_order(g, order, &count);
    for (ag_sub_id s = 0; rc == AG_OK && s < nsubs; s++)
        under[s] = ag_sub_alive(g, s) && sub_under(g, s, top);
    for (uint32_t k = 0; rc == AG_OK && k < count; k++) {
        ag_op_kind kd = kind_of(st, order[k]);
        if ((kd == AG_OPK_IF || kd == AG_OPK_CASE || kd == AG_OPK_WHILE) && under[ag_node_owner(g, order[k])] &&
            !push_u32(st, out, order[k]))
            rc = AG_OOM(st->ctx);
    }
    if (order != NULL)
        ag_free(st->ctx, order, ((size_t)total + 1) * sizeof *order);
    if (under != NULL)
        ag_free(st->ctx, under, ((size_t)nsubs + 1) * sizeof *under);
    return rc;
}

ag_status ag_layout_ctrl_node_prepass(ag_pass_env *env, ag_sub_id top)
{
    cn_state st;
    memset(&st, 0, sizeof st);
    st.env = env;
    st.g = env->g;
    st.ops = env->ops;
    st.ctx = ag_graph_ctx(env->g);
    ag_vec nodes = {0};
    ag_status rc = collect(&st, top, &nodes);
    for (uint32_t k = 0; rc == AG_OK && k < nodes.len; k++) {
        ag_node_id n = AG_VEC_AT(nodes, ag_node_id, k);
        ag_op_kind kd = kind_of(&st, n);
        rc = kd == AG_OPK_WHILE ? solve_while(&st, n) : solve_branches(&st, n, kd == AG_OPK_IF);
    }
    ag_vec_free(st.ctx, &nodes, sizeof(ag_node_id));
    ag_vec_free(st.ctx, &st.ports, sizeof(uint32_t));
    ag_vec_free(st.ctx, &st.rules, sizeof(const char *));
    ag_vec_free(st.ctx, &st.datas, sizeof(ag_node_id));
    return rc;
}
