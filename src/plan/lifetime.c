/* Execution steps and buffer lifetimes for the memory plan (docs/plan.md
 * "Lifetimes", reference notes 6.7).  A symbol is alive from the first step
 * one of its anchors is written to the last step one is read; root outputs
 * live to the end, root inputs (when copied into the arena) from the start. */
#include "aliasguard/infer.h"
#include "plan/plan_internal.h"

/* Steps are positions in ag_graph_topo_order.  That order puts a control
 * node's subgraph nodes right after it, one subgraph after another, so the
 * branches of an If/Case and the cond/body of a While occupy disjoint step
 * ranges after their parent.  Buffers private to one branch therefore never
 * overlap in time with another branch's and may share bytes: at run time
 * only one branch executes.  Values crossing a subgraph boundary belong to
 * the parent's symbols (the symbol table unites them), whose lifetimes span
 * every step of the subgraphs, and a While's loop-carried values are one
 * symbol with its inputs and outputs, so they stay alive across all
 * iterations.  A loop body's own temporaries die within one iteration. */
ag_status ag_plan_steps(ag_plan_build_state *st)
{
    const ag_graph *g = st->env.g;
    uint32_t cap = ag_graph_node_capacity(g);
    uint32_t n = ag_graph_node_count(g);
    st->order = ag_calloc(st->ctx, n ? n : 1, sizeof *st->order);
    st->step = ag_calloc(st->ctx, cap ? cap : 1, sizeof *st->step);
    if (!st->order || !st->step)
        return AG_OOM(st->ctx);
    AG_TRY(ag_graph_topo_order(g, st->order, &st->norder));
    for (uint32_t k = 0; k < cap; k++)
        st->step[k] = UINT64_MAX;
    for (uint32_t p = 0; p < st->norder; p++)
        st->step[st->order[p]] = p;
    st->nsteps = st->norder;
    return AG_OK;
}

static ag_status unknown_size(ag_plan_build_state *st, ag_node_id n, uint32_t o)
{
    const ag_graph *g = st->env.g;
    const ag_tensor_desc *d = ag_node_output_desc_c(g, n, o);
    return AG_ERR(st->ctx, AG_EINVAL,
                  "plan: node '%s' (%s) output %u in graph '%s': tensor size unknown (%s); bind the input shapes "
                  "(--input-shape) so every planned tensor has a static size",
                  ag_node_name(g, n), ag_node_type(g, n), o, ag_sub_name(g, ag_node_owner(g, n)),
                  ag_desc_shape_known(d) ? "dtype without a size" : "shape not static");
}

/* An atomic output is first written by the clean node that zeroes it
 * (AtomicAddrClean, ordered before the atomic node by a control edge), not
 * by the node that accumulates into it: its buffer is alive from the
 * earliest such clean, so nothing else may take its bytes in between. */
static uint64_t clean_step(const ag_plan_build_state *st, ag_node_id n, uint32_t o, uint64_t step)
{
    const ag_graph *g = st->env.g;
    if (!ag_ops_is_atomic_output(st->env.ops, g, n, o))
        return step;
    for (uint32_t k = 0; k < ag_node_num_ctrl_in(g, n); k++) {
        ag_node_id c = ag_node_ctrl_in(g, n, k);
        if (ag_ops_node_kind(st->env.ops, g, c) == AG_OPK_ATOMIC_CLEAN && st->step[c] < step)
            step = st->step[c];
    }
    return step;
}

ag_status ag_plan_lifetimes(ag_plan_build_state *st)
{
    const ag_graph *g = st->env.g;
    uint64_t end = st->nsteps; /* one virtual step after the last node */
    for (uint32_t s = 0; s < st->nsym; s++) {
        ag_plan_sym *ps = &st->sym[s];
        ps->first = UINT64_MAX;
        ps->last = 0;
        ps->merged_into = AG_NONE;
        ps->group = AG_NONE;
        ps->producer.node = AG_NONE;
        ps->producer.index = 0;
        ps->mem_type = AG_MEM_HBM;
        bool root_in = false, root_out = false;
        ps->region = ag_plan_classify(st, s, &root_in, &root_out);
        uint32_t na = ag_symtab_size(st->syms, s);
        for (uint32_t k = 0; k < na; k++) {
            const ag_lanchor *a = ag_symtab_anchor_at(st->syms, s, k);
            uint64_t step = a->node < ag_graph_node_capacity(g) ? st->step[a->node] : UINT64_MAX;
            if (step == UINT64_MAX)
                continue;
            if (step > ps->last)
                ps->last = step;
            if (a->is_input)
                continue;
            step = clean_step(st, a->node, a->index, step);
            if (step < ps->first)
                ps->first = step;
            if (ps->producer.node == AG_NONE) {
                ps->producer.node = a->node;
                ps->producer.index = a->index;
                ps->mem_type = ag_ops_output_mem_type(st->env.ops, g, a->node, a->index);
            }
            ps->used = true;
            uint64_t sz = ag_desc_size_bytes(ag_node_output_desc_c(g, a->node, a->index));
            if (sz == AG_SIZE_UNKNOWN) {
                if (ps->region == AG_REGION_USER_INPUT || ps->region == AG_REGION_USER_OUTPUT)
                    continue; /* the caller's buffer: its size is the caller's */
                /* A branch that cannot run for the bound input values
                 * (inference's _taken_branch) needs no bytes for what it
                 * cannot size; the plan holds for those values only. */
                if (ag_infer_sub_untaken(g, ag_node_owner(g, a->node)))
                    continue;
                return unknown_size(st, a->node, a->index);
            }
            if (sz > ps->size)
                ps->size = sz;
        }
        if (!ps->used)
            continue;
        /* Copied-in inputs exist before the first node runs; outputs are
         * read by the caller after the last one. */
        if (root_in)
            ps->first = 0;
        if (root_out)
            ps->last = end;
        if (ps->region == AG_REGION_CONST) {
            ps->first = 0;
            ps->last = end;
        }
    }
    return AG_OK;
}
