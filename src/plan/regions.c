/* Regions and continuous groups of the memory plan (docs/plan.md "Regions",
 * reference notes 6.5-6.6): where each symbol lives, and which symbols must
 * be laid out back to back in operand order so that a continuous-input node
 * (an HCCL collective, PhonyConcat) reads them as one block without a copy. */
#include "plan/plan_internal.h"

ag_plan_region ag_plan_classify(const ag_plan_build_state *st, uint32_t s, bool *root_in, bool *root_out)
{
    const ag_graph *g = st->env.g;
    const ag_ops *ops = st->env.ops;
    bool in = false, out = false, konst = false;
    uint32_t na = ag_symtab_size(st->syms, s);
    for (uint32_t k = 0; k < na; k++) {
        const ag_lanchor *a = ag_symtab_anchor_at(st->syms, s, k);
        ag_op_kind kind = ag_ops_node_kind(ops, g, a->node);
        bool root = ag_node_owner(g, a->node) == AG_ROOT;
        if (a->is_input) {
            if (root && kind == AG_OPK_NETOUTPUT)
                out = true;
            continue;
        }
        if (root && ag_op_kind_is_data_like(kind))
            in = true;
        else if (ag_op_kind_is_const_like(kind) || ag_op_kind_is_var_like(kind))
            konst = true;
    }
    *root_in = in;
    *root_out = out;
    if (in && st->opts.zero_copy)
        return AG_REGION_USER_INPUT;
    if (konst)
        return AG_REGION_CONST;
    if (out && st->opts.zero_copy)
        return AG_REGION_USER_OUTPUT;
    return AG_REGION_ARENA;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return a <= 1 ? v : (v + a - 1) / a * a;
}

/* Why symbol s cannot join a group, or NULL when it can. */
static const char *member_problem(const ag_plan_build_state *st, uint32_t s, const uint32_t *prev, uint32_t nprev)
{
    if (s == AG_NONE || !st->sym[s].used)
        return "has no producer";
    if (st->sym[s].region != AG_REGION_ARENA)
        return ag_plan_region_name(st->sym[s].region);
    if (st->sym[s].group != AG_NONE)
        return "already laid out in another continuous group";
    for (uint32_t k = 0; k < nprev; k++)
        if (prev[k] == s)
            return "the same buffer as an earlier operand";
    return NULL;
}

static ag_status add_group(ag_plan_build_state *st, ag_node_id n, bool inputs, bool nopad, bool atomic,
                           const uint32_t *members, uint32_t count)
{
    ag_plan_group gr = {0};
    gr.node = n;
    gr.inputs = inputs;
    gr.nopad = nopad;
    gr.atomic = atomic;
    gr.first = st->group_members.len;
    gr.count = count;
    gr.lo = UINT64_MAX;
    gr.mem_type = st->sym[members[0]].mem_type;
    if (ag_vec_reserve(st->ctx, &st->groups, sizeof gr, 1) != AG_OK ||
        ag_vec_reserve(st->ctx, &st->group_members, sizeof(uint32_t), count) != AG_OK)
        return AG_OOM(st->ctx);
    /* A no-padding group advances by each operand's own bytes: with output
     * reuse (PhonyConcat) operand 0's buffer is the whole concatenation and
     * holds the later operands, so its symbol is larger than its operand.
     * Such groups join every anchor in order (group_of), so member k is
     * anchor k.  The block covers every member's full extent. */
    uint64_t off = 0, end = 0;
    for (uint32_t k = 0; k < count; k++) {
        ag_plan_sym *ps = &st->sym[members[k]];
        ps->group = st->groups.len;
        ps->group_off = off;
        if (nopad) {
            const ag_tensor_desc *d = inputs ? ag_node_input_desc_c(st->env.g, n, k)
                                             : ag_node_output_desc_c(st->env.g, n, k);
            uint64_t bytes = ag_desc_size_bytes(d);
            off += bytes == AG_SIZE_UNKNOWN ? ps->size : bytes;
        } else {
            off += align_up(ps->size, st->opts.align);
        }
        if (ps->group_off + ps->size > end)
            end = ps->group_off + ps->size;
        if (ps->first < gr.lo)
            gr.lo = ps->first;
        if (ps->last > gr.hi)
            gr.hi = ps->last;
        AG_VEC_AT(st->group_members, uint32_t, st->group_members.len++) = members[k];
    }
    gr.size = align_up(off > end ? off : end, st->opts.align);
    AG_VEC_AT(st->groups, ag_plan_group, st->groups.len++) = gr;
    return AG_OK;
}

static ag_status group_of(ag_plan_build_state *st, ag_node_id n, bool inputs, bool nopad, bool atomic,
                          uint32_t *buf)
{
    const ag_graph *g = st->env.g;
    uint32_t cnt = inputs ? ag_node_num_inputs(g, n) : ag_node_num_outputs(g, n);
    uint32_t m = 0;
    for (uint32_t i = 0; i < cnt; i++) {
        if (atomic && !ag_ops_is_atomic_output(st->env.ops, g, n, i))
            continue;
        ag_lanchor a = {n, i, inputs};
        uint32_t s = ag_symtab_symbol_of(st->syms, &a);
        const char *why = member_problem(st, s, buf, m);
        if (why && atomic)
            return AG_OK; /* atomic grouping is an economy (one clean), not a must */
        if (why)
            return AG_ERR(st->ctx, AG_EINVAL,
                          "plan: node '%s' (%s) %s %u in graph '%s' must be laid out continuously but its buffer "
                          "%s; run the pipeline (aliasguard check/opt) first, which isolates such operands",
                          ag_node_name(g, n), ag_node_type(g, n), inputs ? "input" : "output", i,
                          ag_sub_name(g, ag_node_owner(g, n)), s == AG_NONE ? "is not connected" : why);
        buf[m++] = s;
    }
    if (m < 2)
        return AG_OK;
    if (atomic)
        for (uint32_t k = 1; k < m; k++)
            if (st->sym[buf[k]].mem_type != st->sym[buf[0]].mem_type)
                return AG_OK;
    for (uint32_t k = 1; k < m; k++)
        if (st->sym[buf[k]].mem_type != st->sym[buf[0]].mem_type)
            return AG_ERR(st->ctx, AG_EINVAL,
                          "plan: node '%s' (%s) in graph '%s': continuous operands 0 and %u have different memory "
                          "types (%s, %s)",
                          ag_node_name(g, n), ag_node_type(g, n), ag_sub_name(g, ag_node_owner(g, n)), k,
                          ag_mem_type_name(st->sym[buf[0]].mem_type), ag_mem_type_name(st->sym[buf[k]].mem_type));
    return add_group(st, n, inputs, nopad, atomic, buf, m);
}

/* An output group whose outputs are views of an input (no-padding
 * continuous output with output reuse, PhonySplit) needs no layout of its
 * own: the outputs live in the input's buffer. */
static bool outputs_alias_inputs(const ag_plan_build_state *st, ag_node_id n)
{
    uint32_t nout = ag_node_num_outputs(st->env.g, n);
    for (uint32_t o = 0; o < nout; o++)
        if (ag_ops_output_ref(st->env.ops, st->env.g, n, o, NULL) != AG_REL_FRESH)
            return true;
    return false;
}

ag_status ag_plan_groups(ag_plan_build_state *st)
{
    const ag_graph *g = st->env.g;
    uint32_t maxio = 1;
    for (uint32_t p = 0; p < st->norder; p++) {
        ag_node_id n = st->order[p];
        if (ag_node_num_inputs(g, n) > maxio)
            maxio = ag_node_num_inputs(g, n);
        if (ag_node_num_outputs(g, n) > maxio)
            maxio = ag_node_num_outputs(g, n);
    }
    uint32_t *buf = ag_calloc(st->ctx, maxio, sizeof *buf);
    if (!buf)
        return AG_OOM(st->ctx);
    ag_status rc = AG_OK;
    for (uint32_t p = 0; p < st->norder && rc == AG_OK; p++) {
        ag_node_id n = st->order[p];
        uint32_t f = ag_ops_node_flags(st->env.ops, g, n);
        bool cin = f & AG_OPF_CONTINUOUS_INPUT, nin = f & AG_OPF_NOPAD_CONTINUOUS_INPUT;
        bool cout = f & AG_OPF_CONTINUOUS_OUTPUT, nout = f & AG_OPF_NOPAD_CONTINUOUS_OUTPUT;
        if ((cin || nin) && ag_node_num_inputs(g, n) > 1)
            rc = group_of(st, n, true, nin && !cin, false, buf);
        if (rc != AG_OK)
            break;
        if ((cout || nout) && ag_node_num_outputs(g, n) > 1 && !outputs_alias_inputs(st, n))
            rc = group_of(st, n, false, nout && !cout, false, buf);
        else if ((f & AG_OPF_ATOMIC) && ag_node_num_outputs(g, n) > 1)
            rc = group_of(st, n, false, false, true, buf);
    }
    ag_free(st->ctx, buf, (size_t)maxio * sizeof *buf);
    return rc;
}
