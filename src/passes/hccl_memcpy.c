/* HcclMemcpyPass (seed 3.1.1, reference notes 5.1): collective ops that
 * modify their inputs in place (_input_mutable: HcomAllReduce, HcomBroadcast)
 * get an Identity before an input whose buffer holds a const or variable, or
 * that another reader may still read after the write.  The buffer is the
 * input's symbol (alias_writes.c): views, ref outputs and subgraph boundaries
 * included.  Order between the writer and the other readers is decided by
 * paths, never by one topological order. */
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
    uint32_t cap0;     /* ids at or above were made by this run */
    ag_aliases *alias; /* buffers (symbols) and the reach index, made on the first question */
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

/* Inserts the copy before input i of h with the rule text and tells the
 * alias index (placed in the reach order, or refreshed on the next query:
 * a broadcast write-back Assign is made too, say). */
static ag_status insert_copy(hccl_state *st, ag_node_id h, uint32_t i, const char *rule)
{
    ag_why why = {.pass = PASS, .rule = rule};
    ag_graph *g = st->env->g;
    uint32_t cap = ag_graph_node_capacity(g);
    AG_TRY(ag_hccl_insert_identity(st->env, &why, "HcclMemcpyPass", h, i));
    ag_node_id made = ag_graph_node_capacity(g) == cap + 1 ? ag_node_input_src(g, h, i).node : AG_NONE;
    return ag_aliases_changed(st->alias, made, false);
}

/* What one other reader of the hccl node's input buffer needs. */
typedef enum sib_need { SIB_NOTHING, SIB_ORDER, SIB_COPY } sib_need;

static sib_need classify_reader(hccl_state *st, ag_reach *reach, const ag_alias_reader *r)
{
    /* The caller reads graph outputs after the run: no edge orders that. */
    if (r->after_run)
        return SIB_COPY;
    if (ag_reaches(reach, r->lifted, r->writer))
        return SIB_NOTHING; /* read before the write on every schedule */
    if (ag_reaches(reach, r->writer, r->lifted))
        return SIB_COPY; /* read after the write on every schedule */
    /* Unordered.  The reference compares topological ids: a sibling with a
     * greater id than the HCCL node needs the copy (reference notes 11 item 2:
     * the code, not the design text's "less").  A copy this run made sits at
     * its producer's id there, so it reads first.  Any other order is one
     * schedule among many, so it is made explicit with a control edge. */
    if (r->node < st->cap0 && ag_reach_pos(reach, r->lifted) > ag_reach_pos(reach, r->writer))
        return SIB_COPY;
    return SIB_ORDER;
}

/* A reader the reference sees too: a consumer of src itself (or a copy
 * made on such an edge). */
static bool direct_reader(const ag_graph *g, ag_port src, const ag_alias_reader *r)
{
    if (r->lifted != r->node)
        return false;
    uint32_t nin = ag_node_num_inputs(g, r->node);
    for (uint32_t i = 0; i < nin; i++) {
        ag_port q = ag_node_input_src(g, r->node, i);
        if (q.node == src.node && q.index == src.index)
            return true;
    }
    return false;
}

/* Input i of h reads src, whose buffer other nodes may read too (directly,
 * or through views, ref outputs and subgraph boundaries): copy it, or order
 * the other readers before the write and mark h so the RW pass trusts it. */
static ag_status handle_shared_input(hccl_state *st, ag_node_id h, uint32_t i, ag_port src)
{
    ag_pass_env *env = st->env;
    ag_graph *g = env->g;
    ag_ctx *ctx = ag_graph_ctx(g);
    ag_vec rs = {0};
    ag_reach *reach = NULL;
    ag_status rc = ag_alias_readers(st->alias, src, h, AG_NONE, &rs);
    if (rc == AG_OK && rs.len > 0)
        rc = ag_alias_reach(st->alias, &reach);
    uint32_t ncopy = AG_NONE;
    for (uint32_t k = 0; k < rs.len && rc == AG_OK && ncopy == AG_NONE; k++)
        if (classify_reader(st, reach, &AG_VEC_AT(rs, ag_alias_reader, k)) == SIB_COPY)
            ncopy = k;
    char rule[256];
    if (rc == AG_OK && ncopy != AG_NONE) {
        const ag_alias_reader *r = &AG_VEC_AT(rs, ag_alias_reader, ncopy);
        const char *base = "hccl: sibling reads after in-place write";
        ag_alias_hit hit = {AG_ALIAS_READER, r->node};
        if (direct_reader(g, src, r))
            snprintf(rule, sizeof rule, "%s", base);
        else
            ag_alias_rule(st->alias, base, src, &hit, rule, sizeof rule);
        rc = insert_copy(st, h, i, rule);
    } else if (rc == AG_OK && (rs.len > 0 || ag_node_output_nconsumers(g, src.node, src.index) > 1)) {
        /* No copy: every unordered reader must finish before the write.  An
         * edge reader -> h keeps the graph acyclic since h does not reach
         * the reader.  Readers only gain control edges here, so the readers
         * listed stay valid. */
        const char *base = "hccl: order sibling read before in-place write";
        for (uint32_t k = 0; k < rs.len && rc == AG_OK; k++) {
            const ag_alias_reader *r = &AG_VEC_AT(rs, ag_alias_reader, k);
            if (classify_reader(st, reach, r) != SIB_ORDER)
                continue;
            ag_alias_hit hit = {AG_ALIAS_READER, r->node};
            if (direct_reader(g, src, r))
                snprintf(rule, sizeof rule, "%s", base);
            else
                ag_alias_rule(st->alias, base, src, &hit, rule, sizeof rule);
            ag_why why = {.pass = PASS, .rule = rule};
            /* An edge against the index's positions invalidates them. */
            bool consistent = ag_reach_edge_consistent(reach, r->lifted, r->writer);
            rc = ag_pass_add_ctrl(env, &why, r->lifted, r->writer);
            if (rc == AG_OK && !consistent) {
                rc = ag_aliases_changed(st->alias, AG_NONE, false);
                if (rc == AG_OK)
                    rc = ag_alias_reach(st->alias, &reach);
            }
        }
        bool skip = false;
        if (rc == AG_OK && (!ag_attrs_get_bool(ag_node_attrs_c(g, h), "_skip_rw_conflict", &skip) || !skip))
            rc = ag_attrs_set_bool(g, ag_node_attrs(g, h), "_skip_rw_conflict", true);
    }
    ag_vec_free(ctx, &rs, sizeof(ag_alias_reader));
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
            AG_TRY(insert_copy(st, h, i, "hccl: const/variable input"));
            continue;
        }
        if (st->alias == NULL)
            AG_TRY(ag_aliases_create(env, &st->alias));
        /* The same rule for a constant or variable whose buffer arrives
         * through a view, a ref output (an Assign's) or a subgraph
         * boundary: the write would land in it all the same. */
        ag_alias_hit hit;
        AG_TRY(ag_alias_judge(st->alias, src, h, AG_NONE, AG_ALIAS_WANT_CONST | AG_ALIAS_WANT_VAR, &hit));
        if (hit.kind != AG_ALIAS_NONE) {
            char rule[256];
            ag_alias_rule(st->alias, "hccl: const/variable input", src, &hit, rule, sizeof rule);
            AG_TRY(insert_copy(st, h, i, rule));
            continue;
        }
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
    hccl_state st = {env, ag_graph_node_capacity(g), NULL};
    ag_status rc = ag_graph_topo_order(g, order, &count);
    for (uint32_t k = 0; k < count && rc == AG_OK; k++) {
        ag_node_id n = order[k];
        if (ag_sub_node_count(g, ag_node_owner(g, n)) < 2 || !is_mutable_node(env, n))
            continue;
        rc = handle_node(&st, n);
    }
    ag_aliases_destroy(st.alias);
    ag_free(ctx, order, (size_t)total * sizeof *order);
    return rc;
}
