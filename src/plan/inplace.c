/* In-place merging for the memory plan (docs/plan.md "In-place merging",
 * reference notes 6.8, seed 3.4): an output that may overwrite one of its
 * node's inputs joins that input's buffer when the input dies at the node,
 * the sizes match and the layout engine finds no conflict on the merged
 * buffer (notes 4.9, ag_layout_merge_check). */
#include <inttypes.h>
#include <stdio.h>

#include "passes/layout_internal.h"
#include "plan/plan_internal.h"

/* Per-symbol properties, computed once from the symbol's anchors. */
enum {
    SYM_KNOWN = 1,     /* the bits below are computed */
    SYM_READONLY = 2,  /* holds a data-like, variable or constant output */
    SYM_REF_READER = 4 /* read by a node with reference=true (may write it) */
};

typedef struct ip_state {
    ag_plan_build_state *st;
    uint8_t *sym_bits; /* per symbol id */
    /* The symbols of each merge set as a list: next[s] follows s, tail[r]
     * ends root r's list (AG_NONE: the end). */
    uint32_t *next, *tail;
    uint32_t *set;     /* scratch: the symbols of a hypothetical merge */
    ag_layout_merge_checker *layout;
} ip_state;

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
            if (node_is_reference(g, a->node))
                b |= SYM_REF_READER;
            continue;
        }
        ag_op_kind kind = ag_ops_node_kind(st->env.ops, g, a->node);
        if (ag_op_kind_is_data_like(kind) || ag_op_kind_is_var_like(kind) || ag_op_kind_is_const_like(kind) ||
            kind == AG_OPK_VARIABLE)
            b |= SYM_READONLY;
    }
    ip->sym_bits[s] = b;
    return b;
}

static size_t put_anchor(const ag_graph *g, const ag_lanchor *a, ag_layout_attr attr, char *buf, size_t cap)
{
    const char *an = ag_layout_attr_name(attr);
    int k = snprintf(buf, cap, "'%s' (%s) %s %u [%s]", ag_node_name(g, a->node), ag_node_type(g, a->node),
                     a->is_input ? "input" : "output", a->index, an ? an : "?");
    return k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1;
}

/* Step 6: asks the layout engine whether the merge sets of roots into and
 * from, taken as one buffer, would carry a layout conflict.  *ok is false
 * when they would; the refusal is recorded with the rule and the pair. */
static ag_status layout_ok(ip_state *ip, ag_node_id n, uint32_t o, uint32_t in, uint32_t into, uint32_t from,
                           bool *ok)
{
    ag_plan_build_state *st = ip->st;
    uint32_t m = 0;
    for (uint32_t s = into; s != AG_NONE; s = ip->next[s])
        ip->set[m++] = s;
    for (uint32_t s = from; s != AG_NONE; s = ip->next[s])
        ip->set[m++] = s;
    /* Marking the graph's anchors costs one pass over it: only once a
     * candidate gets this far. */
    if (ip->layout == NULL)
        AG_TRY(ag_layout_merge_checker_create(st->ctx, &st->env, st->syms, AG_ROOT, &ip->layout));
    ag_layout_merge_verdict v;
    AG_TRY(ag_layout_merge_check(ip->layout, ip->set, m, &v));
    *ok = !v.conflict;
    if (*ok)
        return AG_OK;
    char reason[512];
    size_t k = (size_t)snprintf(reason, sizeof reason, "%s: ", v.rule);
    if (k < sizeof reason)
        k += put_anchor(st->env.g, &v.a, v.attr_a, reason + k, sizeof reason - k);
    if (k < sizeof reason)
        k += (size_t)snprintf(reason + k, sizeof reason - k, " x ");
    if (k < sizeof reason)
        put_anchor(st->env.g, &v.b, v.attr_b, reason + k, sizeof reason - k);
    ag_plan_inplace_dec d = {n, in, o, ag_arena_strdup(&st->scratch, reason)};
    if (!d.reason || ag_vec_push(st->ctx, &st->refused, sizeof d, &d) != AG_OK)
        return AG_OOM(st->ctx);
    return AG_OK;
}

/* Whether output o of n may take input in's buffer by steps 2-5; on
 * success *from and *into are the roots to merge. */
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
    /* A slice of a larger block (PhonySplit output) sits inside its buffer,
     * not at its start, where a merged output would go. */
    if (ag_plan_view_offset(st, src.node, src.index) != 0)
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
    /* Steps 3 and 5: read-only sources and readers that may write.  Merged
     * sets only ever contain symbols that passed this test, so testing the
     * two roots and the anchors' own symbols covers their whole sets. */
    if (sym_bits(ip, ri) & (SYM_READONLY | SYM_REF_READER))
        return false;
    if (sym_bits(ip, ro) & SYM_READONLY)
        return false;
    if (sym_bits(ip, sin) & (SYM_READONLY | SYM_REF_READER))
        return false;
    if (sym_bits(ip, sout) & SYM_READONLY)
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
        bool ok;
        AG_TRY(layout_ok(ip, n, o, in, into, from, &ok));
        if (!ok)
            continue;
        uint64_t bytes = st->sym[into].size;
        char reason[160];
        snprintf(reason, sizeof reason, "inplace: %s; input dies here, same size (%" PRIu64 " bytes)",
                 by_attr ? "_output_inplace_ability" : "registry inplace relation", bytes);
        /* Step 7. */
        AG_TRY(ag_plan_merge(st, from, into, n, in, o, reason));
        ip->next[ip->tail[into]] = from;
        ip->tail[into] = ip->tail[from];
    }
    return AG_OK;
}

ag_status ag_plan_inplace(ag_plan_build_state *st)
{
    ip_state ip;
    memset(&ip, 0, sizeof ip);
    ip.st = st;
    size_t ns = AG_PLAN_NZ(st->nsym);
    ip.sym_bits = ag_calloc(st->ctx, ns, sizeof *ip.sym_bits);
    ip.next = ag_calloc(st->ctx, ns, sizeof *ip.next);
    ip.tail = ag_calloc(st->ctx, ns, sizeof *ip.tail);
    ip.set = ag_calloc(st->ctx, ns, sizeof *ip.set);
    ag_status rc = AG_OK;
    if (!ip.sym_bits || !ip.next || !ip.tail || !ip.set)
        rc = AG_OOM(st->ctx);
    for (uint32_t s = 0; s < st->nsym && rc == AG_OK; s++) {
        ip.next[s] = AG_NONE;
        ip.tail[s] = s;
    }
    for (uint32_t p = 0; p < st->norder && rc == AG_OK; p++) {
        ag_node_id n = st->order[p];
        if (st->step[n] != UINT64_MAX)
            rc = process_node(&ip, n);
    }
    ag_layout_merge_checker_destroy(ip.layout);
    ag_free(st->ctx, ip.sym_bits, ns * sizeof *ip.sym_bits);
    ag_free(st->ctx, ip.next, ns * sizeof *ip.next);
    ag_free(st->ctx, ip.tail, ns * sizeof *ip.tail);
    ag_free(st->ctx, ip.set, ns * sizeof *ip.set);
    return rc;
}
