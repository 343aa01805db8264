/* In-place merging for the memory plan (docs/plan.md "In-place merging",
 * reference notes 6.8, seed 3.4): an output that may overwrite one of its
 * node's inputs joins that input's buffer when the input dies at the node,
 * the sizes match and the merged buffer cannot carry a layout conflict. */
#include <inttypes.h>
#include <stdio.h>

#include "plan/plan_internal.h"

/* Per-symbol properties, computed once from the symbol's anchors. */
enum {
    SYM_KNOWN = 1,     /* the bits below are computed */
    SYM_READONLY = 2,  /* holds a data-like, variable or constant output */
    SYM_SPECIAL = 4,   /* an anchor has a layout attribute other than normal,
                        * reference output or user output */
    SYM_REF_READER = 8 /* read by a node with reference=true (may write it) */
};

typedef struct ip_state {
    ag_plan_build_state *st;
    uint8_t *sym_bits; /* per symbol id */
} ip_state;

/* The layout attributes of notes 4.3 that can take part in a conflict are
 * user input, immutable, unrefreshable, continuous and special memory.  A
 * set whose anchors carry none of them (only normal inputs and outputs,
 * reference outputs and user outputs) has no pair the engine acts on, so
 * merging two such symbols never creates a layout conflict.  This is the
 * conservative form of notes 4.9's hypothetical-table check: every merge it
 * allows is conflict-free; it may refuse a merge the full engine would
 * allow (two special anchors whose checker finds no conflict). */
static bool input_special(const ag_plan_build_state *st, ag_node_id n, uint32_t i)
{
    const ag_graph *g = st->env.g;
    const ag_ops *ops = st->env.ops;
    uint32_t flags = ag_ops_node_flags(ops, g, n);
    uint32_t nin = ag_node_num_inputs(g, n);
    if (flags & (AG_OPF_FIXED_ADDR | AG_OPF_HCCL | AG_OPF_UNREFRESHABLE))
        return true;
    if ((flags & (AG_OPF_CONTINUOUS_INPUT | AG_OPF_NOPAD_CONTINUOUS_INPUT)) && nin > 1)
        return true;
    if (ag_ops_input_flags(ops, g, n, i) & AG_OPA_UNREFRESHABLE)
        return true;
    return ag_ops_input_mem_type(ops, g, n, i) != AG_MEM_HBM;
}

static bool output_special(const ag_plan_build_state *st, ag_node_id n, uint32_t o)
{
    const ag_graph *g = st->env.g;
    const ag_ops *ops = st->env.ops;
    uint32_t flags = ag_ops_node_flags(ops, g, n);
    uint32_t nout = ag_node_num_outputs(g, n);
    if (flags & (AG_OPF_FIXED_ADDR | AG_OPF_HCCL | AG_OPF_UNREFRESHABLE))
        return true;
    if ((flags & (AG_OPF_CONTINUOUS_OUTPUT | AG_OPF_NOPAD_CONTINUOUS_OUTPUT)) && nout > 1)
        return true;
    if (ag_ops_output_flags(ops, g, n, o) & AG_OPA_UNREFRESHABLE)
        return true;
    return ag_ops_output_mem_type(ops, g, n, o) != AG_MEM_HBM;
}

static bool node_is_reference(const ag_graph *g, ag_node_id n)
{
    bool ref = false;
    return ag_attrs_get_bool(ag_node_attrs_c(g, n), "reference", &ref) && ref;
}

static uint8_t sym_bits(ip_state *ip, uint32_t s)
{
    if (ip->sym_bits[s] & SYM_KNOWN)
        return ip->sym_bits[s];
    const ag_plan_build_state *st = ip->st;
    const ag_graph *g = st->env.g;
    uint8_t b = SYM_KNOWN;
    uint32_t na = ag_symtab_size(st->syms, s);
    for (uint32_t k = 0; k < na; k++) {
        const ag_lanchor *a = ag_symtab_anchor_at(st->syms, s, k);
        if (!ag_node_alive(g, a->node))
            continue;
        if (a->is_input) {
            if (input_special(st, a->node, a->index))
                b |= SYM_SPECIAL;
            if (node_is_reference(g, a->node))
                b |= SYM_REF_READER;
            continue;
        }
        ag_op_kind kind = ag_ops_node_kind(st->env.ops, g, a->node);
        if (ag_op_kind_is_data_like(kind) || ag_op_kind_is_var_like(kind) || ag_op_kind_is_const_like(kind) ||
            kind == AG_OPK_VARIABLE)
            b |= SYM_READONLY | SYM_SPECIAL;
        if (output_special(st, a->node, a->index))
            b |= SYM_SPECIAL;
    }
    ip->sym_bits[s] = b;
    return b;
}

/* Whether output o of n may take input in's buffer; on success *from and
 * *into are the symbols to merge. */
static bool candidate(ip_state *ip, ag_node_id n, uint32_t o, uint32_t in, uint32_t *from, uint32_t *into)
{
    ag_plan_build_state *st = ip->st;
    const ag_graph *g = st->env.g;
    const ag_ops *ops = st->env.ops;
    /* Step 3: exact byte sizes of the input's producer and the output. */
    ag_port src = ag_node_input_src(g, n, in);
    if (src.node == AG_NONE)
        return false;
    uint64_t si = ag_desc_size_bytes(ag_node_output_desc_c(g, src.node, src.index));
    uint64_t so = ag_desc_size_bytes(ag_node_output_desc_c(g, n, o));
    if (si == AG_SIZE_UNKNOWN || si != so)
        return false;
    /* Step 5 (node side): an output that is continuous with its siblings,
     * aliases a variable or is zeroed before the node runs (atomic) cannot
     * sit in an input's bytes. */
    const char *var = ag_ops_output_ref_var(g, n, o);
    if (var != NULL && var[0] != '\0')
        return false;
    if (ag_ops_output_flags(ops, g, n, o) & AG_OPA_ATOMIC)
        return false;
    ag_lanchor ai = {n, in, true}, ao = {n, o, false};
    uint32_t sin = ag_symtab_symbol_of(st->syms, &ai), sout = ag_symtab_symbol_of(st->syms, &ao);
    if (sin == AG_NONE || sout == AG_NONE)
        return false;
    uint32_t ri = ag_plan_sym_root(st, sin), ro = ag_plan_sym_root(st, sout);
    if (ri == ro)
        return false;
    const ag_plan_sym *pi = &st->sym[ri], *po = &st->sym[ro];
    /* ag_plan_merge's own conditions, checked here so that a refusal is a
     * filter and not an error. */
    if (!pi->used || !po->used || pi->region != AG_REGION_ARENA || po->region != AG_REGION_ARENA ||
        pi->group != AG_NONE || po->group != AG_NONE || pi->mem_type != po->mem_type)
        return false;
    /* Steps 4 and 5 (buffer side): this node is the input buffer's last
     * reader and nothing writes it later (every anchor of the buffer is at
     * or before the node's step), and nothing wrote the output's buffer
     * before this node. */
    uint64_t step = st->step[n];
    if (pi->last != step || po->first != step)
        return false;
    /* Steps 1 and 6: read-only sources, readers that may write, and
     * anchors whose layout attributes could conflict once merged.  Merged
     * sets only ever contain symbols that passed this test, so testing the
     * two roots covers their whole sets. */
    if (sym_bits(ip, ri) & (SYM_READONLY | SYM_SPECIAL | SYM_REF_READER))
        return false;
    if (sym_bits(ip, ro) & (SYM_READONLY | SYM_SPECIAL))
        return false;
    if (sym_bits(ip, sin) & (SYM_READONLY | SYM_SPECIAL | SYM_REF_READER))
        return false;
    if (sym_bits(ip, sout) & (SYM_READONLY | SYM_SPECIAL))
        return false;
    *from = ro;
    *into = ri;
    return true;
}

static ag_status process_node(ip_state *ip, ag_node_id n)
{
    ag_plan_build_state *st = ip->st;
    const ag_graph *g = st->env.g;
    const ag_ops *ops = st->env.ops;
    uint32_t flags = ag_ops_node_flags(ops, g, n);
    /* Control nodes pass their operands through (one symbol already);
     * continuous outputs are laid out as a block (notes 6.8 3c). */
    if (flags & (AG_OPF_SUBGRAPHS | AG_OPF_CONTINUOUS_OUTPUT | AG_OPF_NOPAD_CONTINUOUS_OUTPUT))
        return AG_OK;
    bool by_attr = ag_attrs_find(ag_node_attrs_c(g, n), "_output_inplace_ability") != NULL;
    uint32_t nout = ag_node_num_outputs(g, n);
    for (uint32_t o = 0; o < nout; o++) {
        uint32_t in = 0, from, into;
        /* Step 2: candidates.  Outputs that already view, pass or reuse an
         * input are in that input's symbol (the symbol table unites them),
         * so only fresh outputs remain. */
        if (ag_ops_output_ref(ops, g, n, o, NULL) != AG_REL_FRESH)
            continue;
        if (!ag_ops_output_inplace(ops, g, n, o, &in))
            continue;
        /* Step 4 of notes 6.8 (one input per output, first come) holds by
         * construction: once merged, the input's buffer lives as long as
         * the output, so a second output fails the lifetime test. */
        if (!candidate(ip, n, o, in, &from, &into))
            continue;
        uint64_t bytes = st->sym[into].size;
        char reason[160];
        snprintf(reason, sizeof reason, "inplace: %s; input dies here, same size (%" PRIu64 " bytes)",
                 by_attr ? "_output_inplace_ability" : "registry inplace relation", bytes);
        /* Step 7. */
        AG_TRY(ag_plan_merge(st, from, into, n, in, o, reason));
    }
    return AG_OK;
}

ag_status ag_plan_inplace(ag_plan_build_state *st)
{
    ip_state ip = {st, NULL};
    ip.sym_bits = ag_calloc(st->ctx, AG_PLAN_NZ(st->nsym), sizeof *ip.sym_bits);
    if (ip.sym_bits == NULL)
        return AG_OOM(st->ctx);
    ag_status rc = AG_OK;
    for (uint32_t p = 0; p < st->norder && rc == AG_OK; p++) {
        ag_node_id n = st->order[p];
        if (st->step[n] != UINT64_MAX)
            rc = process_node(&ip, n);
    }
    ag_free(st->ctx, ip.sym_bits, AG_PLAN_NZ(st->nsym) * sizeof *ip.sym_bits);
    return rc;
}
