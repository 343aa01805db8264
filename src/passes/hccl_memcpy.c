/* HcclMemcpyPass (seed 3.1.1, reference notes 5.1): collective ops that
 * modify their inputs in place (_input_mutable: HcomAllReduce, HcomBroadcast)
 * get an Identity before an input that a const or variable provides, or that
 * another reader may still read after the write.  Order between the writer and
 * the other readers is decided by paths, never by one topological order. */
#include <stdio.h>

#include "passes/pass_internal.h"

#define PASS "hccl_memcpy"

/* ---- HcomBroadcast write-back ---- */

/* The registry has no property that singles out a broadcast among the
 * in-place collectives, yet only a broadcast's result is meant to end up in
 * the variable it read: this one rule compares the operator type. */
static bool is_broadcast(const ag_graph *g, ag_node_id n)
{
    return strcmp(ag_node_type(g, n), "HcomBroadcast") == 0;
}

static bool feeds_assign(const ag_pass_env *env, ag_node_id n)
{
    const ag_graph *g = env->g;
    uint32_t nout = ag_node_num_outputs(g, n);
    for (uint32_t o = 0; o < nout; o++) {
        uint32_t nc = ag_node_output_nconsumers(g, n, o);
        for (uint32_t k = 0; k < nc; k++)
            if (ag_ops_node_kind(env->ops, g, ag_node_output_consumer(g, n, o, k).node) == AG_OPK_ASSIGN)
                return true;
    }
    return false;
}

/* Makes an Assign that writes hccl:idx back into variable var (its output
 * var_out), ordered before everything that runs after the broadcast: the
 * copy that now feeds the broadcast would otherwise leave the variable with
 * its old value.  On failure the graph is as it was. */
static ag_status add_write_back(ag_pass_env *env, const char *pass, ag_node_id hccl, uint32_t idx, ag_port var)
{
    ag_graph *g = env->g;
    ag_ctx *ctx = ag_graph_ctx(g);
    ag_sub_id s = ag_node_owner(g, hccl);
    const char *hname = ag_node_name(g, hccl);
    size_t cap = strlen(hname) + 48;
    char *base = ag_alloc(ctx, cap), *name = ag_alloc(ctx, cap);
    ag_status st = AG_OK;
    ag_node_id a = AG_NONE;
    if (base == NULL || name == NULL) {
        st = AG_OOM(ctx);
        goto done;
    }
    snprintf(base, cap, "%s_Assign_%u", hname, (unsigned)idx);
    if ((st = ag_pass_unique_name(env, s, base, name, cap)) != AG_OK ||
        (st = ag_graph_add_node(g, s, "Assign", name, 2, 1, &a)) != AG_OK)
        goto done;
    const ag_tensor_desc *vd = ag_node_output_desc_c(g, var.node, var.index);
    if ((st = ag_desc_copy_type(g, ag_node_input_desc(g, a, 0), vd)) != AG_OK ||
        (st = ag_desc_copy_type(g, ag_node_input_desc(g, a, 1), vd)) != AG_OK ||
        (st = ag_desc_copy_type(g, ag_node_output_desc(g, a, 0), vd)) != AG_OK ||
        (st = ag_graph_add_edge(g, var.node, var.index, a, 0)) != AG_OK ||
        (st = ag_graph_add_edge(g, hccl, idx, a, 1)) != AG_OK)
        goto done;
    uint32_t nc = ag_node_output_nconsumers(g, hccl, idx);
    for (uint32_t k = 0; k < nc && st == AG_OK; k++) {
        ag_node_id c = ag_node_output_consumer(g, hccl, idx, k).node;
        if (c != a)
            st = ag_graph_add_ctrl_edge(g, a, c);
    }
    uint32_t nctrl = ag_node_num_ctrl_out(g, hccl);
    for (uint32_t k = 0; k < nctrl && st == AG_OK; k++)
        st = ag_graph_add_ctrl_edge(g, a, ag_node_ctrl_out(g, hccl, k));
    if (st != AG_OK)
        goto done;

    char prod[32], cons[32];
    snprintf(prod, sizeof prod, ":%u", (unsigned)idx);
    snprintf(cons, sizeof cons, ":%u", (unsigned)var.index);
    size_t plen = strlen(hname) + strlen(prod) + 1, clen = strlen(ag_node_name(g, var.node)) + strlen(cons) + 1;
    char *p = ag_alloc(ctx, plen), *c = ag_alloc(ctx, clen);
    if (p == NULL || c == NULL) {
        st = AG_OOM(ctx);
    } else {
        snprintf(p, plen, "%s%s", hname, prod);
        snprintf(c, clen, "%s%s", ag_node_name(g, var.node), cons);
        ag_why why = {.pass = pass, .rule = "hccl: broadcast write-back"};
        st = ag_pass_record(env, &why, a, p, c);
    }
    ag_free(ctx, p, plen);
    ag_free(ctx, c, clen);
done:
    if (st != AG_OK && a != AG_NONE)
        ag_graph_remove_node(g, a);
    ag_free(ctx, base, cap);
    ag_free(ctx, name, cap);
    return st;
}

ag_status ag_hccl_insert_identity(ag_pass_env *env, const ag_why *why, const char *tag, ag_node_id hccl,
                                  uint32_t i)
{
    ag_graph *g = env->g;
    ag_ctx *ctx = ag_graph_ctx(g);
    ag_port src = ag_node_input_src(g, hccl, i);
    const char *hname = ag_node_name(g, hccl);
    size_t cap = strlen(hname) + strlen(tag) + 32;
    char *name = ag_alloc(ctx, cap);
    if (name == NULL)
        return AG_OOM(ctx);
    snprintf(name, cap, "%s_%s_Identity%u", hname, tag, (unsigned)i);
    ag_node_id id = AG_NONE;
    ag_status st = ag_pass_insert_before(env, why, hccl, i, "Identity", name, &id);
    ag_free(ctx, name, cap);
    AG_TRY(st);
    /* The attribute the reference gives these copies (notes 5.1). */
    AG_TRY(ag_attrs_set_bool(g, ag_node_attrs(g, id), "no_need_constant_folding", false));
    if (is_broadcast(g, hccl) && i < ag_node_num_outputs(g, hccl) &&
        ag_op_kind_is_var_like(ag_ops_node_kind(env->ops, g, src.node)) && !feeds_assign(env, src.node))
        AG_TRY(add_write_back(env, why->pass, hccl, i, src));
    return AG_OK;
}

/* ---- the pass ---- */

typedef struct hccl_state {
    ag_pass_env *env;
    uint32_t cap0;    /* ids at or above were made by this run */
    ag_reach *reach;  /* made on the first order query */
    bool stale;       /* the graph changed since the index was refreshed */
} hccl_state;

/* Writes in place through _input_mutable: collectives (table) or any node
 * with the attribute.  While inputs are scope-writeable too, but a loop's
 * private rewrite is the subgraph pass's business, not this one's. */
static bool is_mutable_node(const ag_pass_env *env, ag_node_id n)
{
    const ag_graph *g = env->g;
    ag_op_kind k = ag_ops_node_kind(env->ops, g, n);
    if (k == AG_OPK_WHILE)
        return false;
    return k == AG_OPK_COLLECTIVE || (ag_ops_node_flags(env->ops, g, n) & AG_OPF_HCCL) ||
           ag_attrs_find(ag_node_attrs_c(g, n), "_input_mutable") != NULL;
}

/* Reads only shapes: a shape op, or a view whose every reader is one (the
 * view itself reads no bytes). */
static bool shape_only_branch(const ag_pass_env *env, ag_node_id n)
{
    const ag_graph *g = env->g;
    if (ag_ops_node_flags(env->ops, g, n) & AG_OPF_SHAPE_ONLY)
        return true;
    if (ag_ops_node_kind(env->ops, g, n) != AG_OPK_VIEW)
        return false;
    uint32_t nout = ag_node_num_outputs(g, n);
    for (uint32_t o = 0; o < nout; o++) {
        uint32_t nc = ag_node_output_nconsumers(g, n, o);
        for (uint32_t k = 0; k < nc; k++)
            if (!(ag_ops_node_flags(env->ops, g, ag_node_output_consumer(g, n, o, k).node) & AG_OPF_SHAPE_ONLY))
                return false;
    }
    return true;
}

/* Paths through nodes made since the last refresh are invisible to the
 * index, so it is refreshed (O(nodes)) before a query that follows a change:
 * at most once per collective input that other nodes read too. */
static ag_status fresh_reach(hccl_state *st)
{
    if (st->reach == NULL) {
        AG_TRY(ag_reach_create(st->env->g, &st->reach));
    } else if (st->stale) {
        AG_TRY(ag_reach_update(st->reach));
    }
    st->stale = false;
    return AG_OK;
}

/* After a copy was inserted before input i of h: give it a position in the
 * reach index, or mark the index for a full update when that is not possible
 * (a broadcast write-back Assign was made too, say). */
static ag_status note_copy(hccl_state *st, ag_node_id h, uint32_t i, uint32_t cap_before)
{
    if (st->reach == NULL || st->stale)
        return AG_OK;
    ag_graph *g = st->env->g;
    if (ag_graph_node_capacity(g) != cap_before + 1) {
        st->stale = true;
        return AG_OK;
    }
    bool placed = false;
    AG_TRY(ag_reach_place(st->reach, ag_node_input_src(g, h, i).node, &placed));
    if (!placed)
        st->stale = true;
    return AG_OK;
}

/* What one other reader s of the hccl node's input buffer needs. */
typedef enum sib_need { SIB_NOTHING, SIB_ORDER, SIB_COPY } sib_need;

static ag_status classify_sibling(hccl_state *st, ag_node_id h, ag_node_id s, sib_need *out)
{
    *out = SIB_NOTHING;
    if (shape_only_branch(st->env, s))
        return AG_OK;
    AG_TRY(fresh_reach(st));
    if (ag_reaches(st->reach, s, h))
        return AG_OK; /* read before the write on every schedule */
    if (ag_reaches(st->reach, h, s)) {
        *out = SIB_COPY; /* read after the write on every schedule */
        return AG_OK;
    }
    /* Unordered.  The reference compares topological ids: a sibling with a
     * greater id than the HCCL node needs the copy (reference notes 11 item 2:
     * the code, not the design text's "less").  A copy this run made sits at
     * its producer's id there, so it reads first.  Any other order is one
     * schedule among many, so it is made explicit with a control edge. */
    if (s < st->cap0 && ag_reach_pos(st->reach, s) > ag_reach_pos(st->reach, h))
        *out = SIB_COPY;
    else
        *out = SIB_ORDER;
    return AG_OK;
}

/* Input i of h reads src, which other nodes read too: copy it, or order the
 * other readers before the write and mark h so the RW pass trusts it. */
static ag_status handle_shared_input(hccl_state *st, ag_node_id h, uint32_t i, ag_port src)
{
    ag_pass_env *env = st->env;
    ag_graph *g = env->g;
    ag_ctx *ctx = ag_graph_ctx(g);
    uint32_t nc = ag_node_output_nconsumers(g, src.node, src.index);
    uint8_t *needs = ag_alloc(ctx, nc);
    if (needs == NULL)
        return AG_OOM(ctx);
    ag_status rc = AG_OK;
    bool copy = false;
    for (uint32_t k = 0; k < nc && !copy && rc == AG_OK; k++) {
        ag_node_id s = ag_node_output_consumer(g, src.node, src.index, k).node;
        sib_need need = SIB_NOTHING;
        if (s != h)
            rc = classify_sibling(st, h, s, &need);
        needs[k] = (uint8_t)need;
        copy = need == SIB_COPY;
    }
    if (rc == AG_OK && copy) {
        ag_why why = {.pass = PASS, .rule = "hccl: sibling reads after in-place write"};
        uint32_t cap = ag_graph_node_capacity(g);
        rc = ag_hccl_insert_identity(env, &why, "HcclMemcpyPass", h, i);
        if (rc == AG_OK)
            rc = note_copy(st, h, i, cap);
    } else if (rc == AG_OK) {
        /* No copy: every unordered reader must finish before the write.  An
         * edge s -> h keeps the graph acyclic since h does not reach s.  The
         * consumer list is unchanged: control edges move no data edge. */
        ag_why why = {.pass = PASS, .rule = "hccl: order sibling read before in-place write"};
        for (uint32_t k = 0; k < nc && rc == AG_OK; k++) {
            if (needs[k] != SIB_ORDER)
                continue;
            ag_node_id s = ag_node_output_consumer(g, src.node, src.index, k).node;
            /* An edge against the index's positions invalidates them. */
            if (!ag_reach_edge_consistent(st->reach, s, h))
                st->stale = true;
            rc = ag_pass_add_ctrl(env, &why, s, h);
        }
        bool skip = false;
        if (rc == AG_OK && (!ag_attrs_get_bool(ag_node_attrs_c(g, h), "_skip_rw_conflict", &skip) || !skip))
            rc = ag_attrs_set_bool(g, ag_node_attrs(g, h), "_skip_rw_conflict", true);
    }
    ag_free(ctx, needs, nc);
    return rc;
}

static ag_status handle_node(hccl_state *st, ag_node_id h)
{
    ag_pass_env *env = st->env;
    ag_graph *g = env->g;
    uint32_t nin = ag_node_num_inputs(g, h);
    for (uint32_t i = 0; i < nin; i++) {
        if (ag_ops_input_access(env->ops, g, h, i) != AG_ACC_SCOPE_WRITEABLE)
            continue;
        ag_port src = ag_node_input_src(g, h, i);
        if (src.node == AG_NONE)
            return AG_ERR(ag_graph_ctx(g), AG_EINVAL,
                          "%s: graph %s: node %s (%s) input %u is not connected, but the node modifies it in "
                          "place (_input_mutable)",
                          PASS, ag_sub_name(g, ag_node_owner(g, h)), ag_node_name(g, h), ag_node_type(g, h),
                          (unsigned)i);
        ag_op_kind pk = ag_ops_node_kind(env->ops, g, src.node);
        if (pk == AG_OPK_CONST || pk == AG_OPK_VARIABLE) {
            ag_why why = {.pass = PASS, .rule = "hccl: const/variable input"};
            uint32_t cap = ag_graph_node_capacity(g);
            AG_TRY(ag_hccl_insert_identity(env, &why, "HcclMemcpyPass", h, i));
            AG_TRY(note_copy(st, h, i, cap));
            continue;
        }
        if (ag_node_output_nconsumers(g, src.node, src.index) <= 1)
            continue;
        AG_TRY(handle_shared_input(st, h, i, src));
    }
    return AG_OK;
}

ag_status ag_pass_hccl_memcpy(ag_pass_env *env)
{
    ag_graph *g = env->g;
    ag_ctx *ctx = ag_graph_ctx(g);
    uint32_t total = ag_graph_node_count(g), count = total;
    if (total < 2)
        return AG_OK;
    /* The reference visits each graph's nodes in topological order; the
     * order across subgraphs does not matter, they share no edges. */
    ag_node_id *order = ag_alloc(ctx, (size_t)total * sizeof *order);
    if (order == NULL)
        return AG_OOM(ctx);
    hccl_state st = {env, ag_graph_node_capacity(g), NULL, false};
    ag_status rc = ag_graph_topo_order(g, order, &count);
    for (uint32_t k = 0; k < count && rc == AG_OK; k++) {
        ag_node_id n = order[k];
        if (ag_sub_node_count(g, ag_node_owner(g, n)) < 2 || !is_mutable_node(env, n))
            continue;
        rc = handle_node(&st, n);
    }
    ag_reach_destroy(st.reach);
    ag_free(ctx, order, (size_t)total * sizeof *order);
    return rc;
}
