/* Regions, continuous groups and slices of the memory plan (docs/plan.md
 * "Regions", reference notes 6.5-6.6): where each symbol lives, which
 * symbols must be laid out back to back in operand order so that a
 * continuous-input node (an HCCL collective, PhonyConcat) reads them as one
 * block without a copy, and where inside its buffer each tensor sits. */
#include <stdio.h>

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

/* Why symbol s cannot join a group (completing "its buffer ..."), or NULL
 * when it can. */
static const char *member_problem(const ag_plan_build_state *st, uint32_t s, const uint32_t *prev, uint32_t nprev)
{
    if (s == AG_NONE)
        return "is not connected";
    if (!st->sym[s].used)
        return "has no producer";
    switch (st->sym[s].region) {
    case AG_REGION_USER_INPUT:
        return "is the caller's input (user-input region)";
    case AG_REGION_USER_OUTPUT:
        return "is the caller's output (user-output region)";
    case AG_REGION_CONST:
        return "is a constant (constant region)";
    default:
        break;
    }
    if (st->sym[s].group != AG_NONE)
        return "is already laid out in another continuous group";
    for (uint32_t k = 0; k < nprev; k++)
        if (prev[k] == s)
            return "is the same buffer as an earlier operand";
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

/* Atomic grouping is an economy (one clean for all outputs), not a must:
 * an output that cannot join leaves every output apart, and the plan says
 * which and why. */
static ag_status atomic_apart(ag_plan_build_state *st, ag_node_id n, uint32_t o, const char *why)
{
    const ag_graph *g = st->env.g;
    return ag_plan_note(st,
                        "node '%s' (%s) output %u in graph '%s': atomic outputs not grouped for one clean: its "
                        "buffer %s",
                        ag_node_name(g, n), ag_node_type(g, n), o, ag_sub_name(g, ag_node_owner(g, n)), why);
}

static ag_status group_of(ag_plan_build_state *st, ag_node_id n, bool inputs, bool nopad, bool atomic,
                          uint32_t *buf)
{
    const ag_graph *g = st->env.g;
    uint32_t cnt = inputs ? ag_node_num_inputs(g, n) : ag_node_num_outputs(g, n);
    uint32_t m = 0;
    bool apart = false;
    for (uint32_t i = 0; i < cnt; i++) {
        if (atomic && !ag_ops_is_atomic_output(st->env.ops, g, n, i))
            continue;
        ag_lanchor a = {n, i, inputs};
        uint32_t s = ag_symtab_symbol_of(st->syms, &a);
        const char *why = member_problem(st, s, buf, m);
        if (why && atomic) {
            AG_TRY(atomic_apart(st, n, i, why));
            apart = true;
            continue;
        }
        if (why)
            return AG_ERR(st->ctx, AG_EINVAL,
                          "plan: node '%s' (%s) %s %u in graph '%s' must be laid out continuously but its buffer "
                          "%s; run the pipeline (aliasguard check/opt) first, which isolates such operands",
                          ag_node_name(g, n), ag_node_type(g, n), inputs ? "input" : "output", i,
                          ag_sub_name(g, ag_node_owner(g, n)), why);
        buf[m++] = s;
    }
    if (apart || m < 2)
        return AG_OK;
    if (atomic) {
        for (uint32_t k = 1; k < m; k++)
            if (st->sym[buf[k]].mem_type != st->sym[buf[0]].mem_type) {
                char why[96];
                snprintf(why, sizeof why, "is %s memory, another atomic output's is %s",
                         ag_mem_type_name(st->sym[buf[k]].mem_type), ag_mem_type_name(st->sym[buf[0]].mem_type));
                uint32_t o = 0;
                for (uint32_t i = 0, seen = 0; i < cnt; i++)
                    if (ag_ops_is_atomic_output(st->env.ops, g, n, i) && seen++ == k) {
                        o = i;
                        break;
                    }
                return atomic_apart(st, n, o, why);
            }
    }
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

/* ---- views and slices ---- */

bool ag_plan_slices_input(const ag_plan_build_state *st, ag_node_id n)
{
    const ag_graph *g = st->env.g;
    uint32_t f = ag_ops_node_flags(st->env.ops, g, n);
    uint32_t nout = ag_node_num_outputs(g, n);
    if (!(f & AG_OPF_NOPAD_CONTINUOUS_OUTPUT) || !(f & AG_OPF_OUTPUT_REUSE_INPUT) || nout < 2 ||
        ag_node_num_inputs(g, n) == 0 || ag_node_input_src(g, n, 0).node == AG_NONE)
        return false;
    for (uint32_t o = 0; o < nout; o++) {
        uint32_t in;
        if (ag_ops_output_ref(st->env.ops, g, n, o, &in) != AG_REL_REUSE || in != 0)
            return false;
    }
    return true;
}

uint64_t ag_plan_view_offset(const ag_plan_build_state *st, ag_node_id n, uint32_t o)
{
    ag_lanchor a = {n, o, false};
    uint32_t k = ag_symtab_slot(st->syms, &a);
    return k == AG_NONE || k >= st->nslots ? 0 : st->view_off[k];
}

/* The output whose bytes output o of n is: the producer of the input it
 * refers to (a subgraph Data: of its parent's input), when that output is
 * in the same symbol; {AG_NONE, 0} otherwise. */
ag_port ag_plan_viewed_output(const ag_plan_build_state *st, ag_node_id n, uint32_t o)
{
    const ag_graph *g = st->env.g;
    ag_port none = {AG_NONE, 0};
    uint32_t in;
    if (!ag_symtab_ref_from_input(st->env.ops, g, n, o, &in))
        return none;
    ag_port src = none;
    if (in != AG_NONE) {
        src = ag_node_input_src(g, n, in);
    } else {
        ag_node_id parent = ag_sub_parent(g, ag_node_owner(g, n));
        int64_t idx;
        if (parent != AG_NONE && ag_attrs_get_int(ag_node_attrs_c(g, n), "_parent_node_index", &idx) && idx >= 0 &&
            (uint64_t)idx < ag_node_num_inputs(g, parent))
            src = ag_node_input_src(g, parent, (uint32_t)idx);
    }
    if (src.node == AG_NONE)
        return none;
    ag_lanchor a = {n, o, false}, b = {src.node, src.index, false};
    uint32_t sa = ag_symtab_symbol_of(st->syms, &a);
    return sa != AG_NONE && sa == ag_symtab_symbol_of(st->syms, &b) ? src : none;
}

ag_status ag_plan_views(ag_plan_build_state *st)
{
    const ag_graph *g = st->env.g;
    st->nslots = ag_symtab_nslots(st->syms);
    st->view_off = ag_calloc(st->ctx, AG_PLAN_NZ(st->nslots), sizeof *st->view_off);
    if (!st->view_off)
        return AG_OOM(st->ctx);
    /* Execution order visits an input's producer (a subgraph Data's
     * parent's producer) before the output that views it. */
    for (uint32_t p = 0; p < st->norder; p++) {
        ag_node_id n = st->order[p];
        bool slices = ag_plan_slices_input(st, n);
        uint64_t run = 0; /* bytes of the earlier slices */
        for (uint32_t o = 0; o < ag_node_num_outputs(g, n); o++) {
            ag_lanchor a = {n, o, false};
            uint32_t k = ag_symtab_slot(st->syms, &a);
            ag_port src = ag_plan_viewed_output(st, n, o);
            uint64_t off = src.node == AG_NONE ? 0 : ag_plan_view_offset(st, src.node, src.index);
            if (slices && src.node != AG_NONE) {
                off += run;
                uint64_t bytes = ag_desc_size_bytes(ag_node_output_desc_c(g, n, o));
                if (bytes == AG_SIZE_UNKNOWN && o + 1 < ag_node_num_outputs(g, n))
                    return AG_ERR(st->ctx, AG_EINVAL,
                                  "plan: node '%s' (%s) output %u in graph '%s': slice of input 0's block of "
                                  "unknown size, so the later outputs have no offset; bind the input shapes "
                                  "(--input-shape)",
                                  ag_node_name(g, n), ag_node_type(g, n), o, ag_sub_name(g, ag_node_owner(g, n)));
                run += bytes == AG_SIZE_UNKNOWN ? 0 : bytes;
            }
            if (k != AG_NONE && k < st->nslots)
                st->view_off[k] = off;
        }
    }
    return AG_OK;
}
