/* The layout checkers of continuous, no-padding continuous, special-memory
 * (RTS) and immutable anchors (reference notes 4.5, rows registered in
 * layout_checkers.def): each decides whether two anchors of one symbol can
 * really share the buffer and, if not, which anchor an Identity isolates. */
#include <stdlib.h>

#include "passes/layout_internal.h"

#define CONT_IN_BITS (AG_LA_BIT(AG_LA_CONT_IN) | AG_LA_BIT(AG_LA_NOPAD_CONT_IN))
#define CONT_OUT_BITS (AG_LA_BIT(AG_LA_CONT_OUT) | AG_LA_BIT(AG_LA_NOPAD_CONT_OUT))

/* Node-level continuity: the marking gives every input (output) of such a
 * node the attribute, so the first anchor tells.  Nodes made during the run
 * have no attributes and never count. */
static bool node_in_has(const ag_layout_ctx *lc, ag_node_id n, uint16_t bits)
{
    if (ag_node_num_inputs(lc->g, n) == 0)
        return false;
    ag_lanchor a = {n, 0, true};
    return (ag_layout_attrs_of(lc, &a) & bits) != 0;
}

static bool node_out_has(const ag_layout_ctx *lc, ag_node_id n, uint16_t bits)
{
    if (ag_node_num_outputs(lc->g, n) == 0)
        return false;
    ag_lanchor a = {n, 0, false};
    return (ag_layout_attrs_of(lc, &a) & bits) != 0;
}

static int cmp_node(const void *pa, const void *pb)
{
    ag_node_id a = *(const ag_node_id *)pa, b = *(const ag_node_id *)pb;
    return a < b ? -1 : a > b;
}

/* The distinct nodes of the current symbol that pass the test, sorted by id
 * (for binary search); in scratch memory. */
typedef bool (*node_pred)(const ag_layout_ctx *lc, ag_node_id n, uint16_t bits);

static ag_status sym_nodes(ag_layout_ctx *lc, node_pred pred, uint16_t bits, ag_node_id **out, uint32_t *count)
{
    uint32_t m = ag_layout_sym_size(lc), n = 0;
    ag_node_id *v = ag_arena_alloc(&lc->scratch, ((size_t)m + 1) * sizeof *v);
    if (v == NULL)
        return AG_OOM(lc->ctx);
    for (uint32_t k = 0; k < m; k++) {
        ag_node_id x = ag_layout_sym_anchor(lc, k)->node;
        if (pred(lc, x, bits))
            v[n++] = x;
    }
    qsort(v, n, sizeof *v, cmp_node);
    uint32_t u = 0;
    for (uint32_t k = 0; k < n; k++)
        if (u == 0 || v[u - 1] != v[k])
            v[u++] = v[k];
    *out = v;
    *count = u;
    return AG_OK;
}

static bool node_in_set(const ag_node_id *v, uint32_t n, ag_node_id x)
{
    return n > 0 && bsearch(&x, v, n, sizeof *v, cmp_node) != NULL;
}

/* Every output of the symbol that feeds two or more inputs of nodes with
 * the given input attributes: each such input but the first (in consumer
 * order) gets an Identity, since one buffer cannot sit at two places of
 * continuous blocks. */
static ag_status multi_continuous_consumers(ag_layout_ctx *lc, uint16_t bits)
{
    uint32_t m = ag_layout_sym_size(lc);
    for (uint32_t k = 0; k < m; k++) {
        const ag_lanchor *o = ag_layout_sym_anchor(lc, k);
        if (o->is_input)
            continue;
        ag_lanchor out = *o;
        uint32_t nc = ag_node_output_nconsumers(lc->g, out.node, out.index), seen = 0;
        for (uint32_t c = 0; c < nc; c++) {
            ag_port p = ag_node_output_consumer(lc->g, out.node, out.index, c);
            if (!node_in_has(lc, p.node, bits))
                continue;
            if (seen++ > 0) {
                ag_lanchor in = {p.node, p.index, true};
                AG_TRY(ag_layout_conflict_at(lc, &in, NULL));
            }
        }
    }
    return AG_OK;
}

/* ---- continuous_input_and_continuous_input ---- */

ag_status ag_lc_cont_in_cont_in(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    (void)a;
    (void)b;
    AG_TRY(multi_continuous_consumers(lc, CONT_IN_BITS));
    /* Cascaded continuous-input nodes of the symbol: the consumer's input
     * fed by the other node is isolated. */
    ag_node_id *set = NULL;
    uint32_t n = 0;
    AG_TRY(sym_nodes(lc, node_in_has, CONT_IN_BITS, &set, &n));
    for (uint32_t k = 0; k < n; k++) {
        uint32_t nout = ag_node_num_outputs(lc->g, set[k]);
        for (uint32_t o = 0; o < nout; o++) {
            uint32_t nc = ag_node_output_nconsumers(lc->g, set[k], o);
            for (uint32_t c = 0; c < nc; c++) {
                ag_port p = ag_node_output_consumer(lc->g, set[k], o, c);
                if (!node_in_set(set, n, p.node))
                    continue;
                ag_lanchor in = {p.node, p.index, true};
                AG_TRY(ag_layout_conflict_at(lc, &in, NULL));
            }
        }
    }
    return AG_OK;
}

/* ---- continuous_out_and_continuous_out, nopadding_continuous_out_and_nopadding_continuous_out ---- */

/* Among the symbol's nodes whose outputs carry bits, one fed by another:
 * the producer's output gets the Identity (two continuous output blocks
 * cannot both hold the buffer). */
static ag_status cascaded_continuous_outputs(ag_layout_ctx *lc, uint16_t bits)
{
    ag_node_id *set = NULL;
    uint32_t n = 0;
    AG_TRY(sym_nodes(lc, node_out_has, bits, &set, &n));
    for (uint32_t k = 0; k < n; k++) {
        uint32_t nin = ag_node_num_inputs(lc->g, set[k]);
        for (uint32_t i = 0; i < nin; i++) {
            ag_port p = ag_node_input_src(lc->g, set[k], i);
            if (p.node == AG_NONE || !node_in_set(set, n, p.node))
                continue;
            ag_lanchor out = {p.node, p.index, false};
            AG_TRY(ag_layout_conflict_at(lc, &out, NULL));
        }
    }
    return AG_OK;
}

ag_status ag_lc_cont_out_cont_out(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    (void)a;
    (void)b;
    return cascaded_continuous_outputs(lc, CONT_OUT_BITS);
}

ag_status ag_lc_nopad_out_nopad_out(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    (void)a;
    (void)b;
    return cascaded_continuous_outputs(lc, AG_LA_BIT(AG_LA_NOPAD_CONT_OUT));
}

/* ---- continuous_output_and_continuous_input ---- */

/* a: the continuous input, b: the continuous output.  The input node's real
 * producers must be the output node's outputs in order (or an aligned part
 * of them): then both blocks are one.  Otherwise the anchor that comes
 * first in the symbol is isolated, as the reference does. */
ag_status ag_lc_cont_out_cont_in(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    uint32_t nl = ag_node_num_outputs(lc->g, b->node), nr = ag_node_num_inputs(lc->g, a->node);
    ag_port *l = ag_arena_alloc(&lc->scratch, ((size_t)nl + 1) * sizeof *l);
    ag_port *r = ag_arena_alloc(&lc->scratch, ((size_t)nr + 1) * sizeof *r);
    if (l == NULL || r == NULL)
        return AG_OOM(lc->ctx);
    for (uint32_t o = 0; o < nl; o++)
        l[o] = (ag_port){b->node, o};
    for (uint32_t i = 0; i < nr; i++) {
        ag_port p = ag_node_input_src(lc->g, a->node, i);
        r[i] = p.node == AG_NONE ? p : ag_layout_real_producer(lc, p);
    }
    if (ag_layout_same_or_partial_same(l, nl, r, nr))
        return AG_OK;
    return ag_layout_conflict_at(lc, lc->swapped ? b : a, NULL);
}

/* ---- continuous_in_out_and_rts_special_mem_in_out ---- */

/* a: the continuous anchor, b: the special-memory one.  A continuous anchor
 * in special memory itself is fine.  Otherwise the continuous anchor is
 * isolated, unless it is an input whose node's output is this buffer too
 * (an Identity before it would not separate anything): then the special
 * anchor. */
ag_status ag_lc_cont_rts(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    if (ag_layout_mem_type(lc, a) != AG_MEM_HBM)
        return AG_OK;
    if (a->is_input && ag_layout_out_ref_from_input(lc, a))
        return ag_layout_conflict_at(lc, b, NULL);
    return ag_layout_conflict_at(lc, a, NULL);
}

/* ---- immutable_out_and_continuous_out ---- */

/* a: the variable or constant, b: the continuous output (a node whose
 * output is the variable's buffer, e.g. a collective working in place).
 * After an Assign the Assign's output is isolated; otherwise the Identity
 * goes before the continuous node's input, not after the variable, so that
 * the variable's other writers still update the variable itself. */
ag_status ag_lc_immutable_cont_out(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    bool done = false;
    AG_TRY(ag_layout_assign_var_insert_identity(lc, a, b, AG_LA_IMMUTABLE_OUT, &done));
    if (done)
        return AG_OK;
    ag_lanchor in;
    if (!ag_layout_get_ref_input(lc, b, &in))
        return AG_ERR(lc->ctx, AG_EINVAL,
                      "layout: immutable_out_and_continuous_out: node \"%s\" (%s) output %u shares the buffer of "
                      "\"%s\" (%s) output %u but none of its inputs does",
                      ag_node_name(lc->g, b->node), ag_node_type(lc->g, b->node), (unsigned)b->index,
                      ag_node_name(lc->g, a->node), ag_node_type(lc->g, a->node), (unsigned)a->index);
    return ag_layout_conflict_at(lc, &in, NULL);
}

/* ---- immutable_out_and_nopadding_continuous_in ---- */

/* a: the variable or constant, b: the no-padding continuous input.  When
 * all inputs of that node come from one buffer (in-place slice writers of
 * one variable feeding a PhonyConcat) the block is the variable itself. */
ag_status ag_lc_immutable_nopad_in(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    (void)a;
    if (ag_layout_all_real_inputs_same(lc, b->node))
        return AG_OK;
    return ag_layout_conflict_at(lc, b, NULL);
}

/* ---- immutable_out_and_rts_specail_out ---- */

ag_status ag_lc_immutable_rts_out(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    bool done = false;
    AG_TRY(ag_layout_assign_var_insert_identity(lc, a, b, AG_LA_IMMUTABLE_OUT, &done));
    if (done)
        return AG_OK;
    return ag_layout_conflict_at(lc, a, NULL);
}

/* ---- nopadding_continuous_input_and_nopadding_continuous_input ---- */

/* Run once per symbol on its first pair: when the two nodes' input lists
 * overlap without one lying inside the other, every output feeding several
 * no-padding continuous inputs keeps its first consumer only. */
ag_status ag_lc_nopad_in_nopad_in(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    bool conflict = false;
    AG_TRY(ag_layout_nopad_cont_conflict(lc, a->node, b->node, &conflict));
    if (!conflict)
        return AG_OK;
    return multi_continuous_consumers(lc, AG_LA_BIT(AG_LA_NOPAD_CONT_IN));
}

/* ---- nopadding_continuous_input_and_nopadding_continuous_out ---- */

/* a: the no-padding continuous input, b: the no-padding continuous output.
 * A concat whose output 0 is the split's input 0 (PhonyConcat feeding
 * PhonySplit) lays out one block; anything else isolates the input. */
ag_status ag_lc_nopad_in_nopad_out(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    if (ag_node_num_inputs(lc->g, b->node) > 0 && ag_node_num_outputs(lc->g, a->node) > 0) {
        ag_port p = ag_node_input_src(lc->g, b->node, 0);
        if (p.node == a->node && p.index == 0)
            return AG_OK;
    }
    return ag_layout_conflict_at(lc, a, NULL);
}

/* ---- rts_special_in_and_rts_special_in, _in_and_rts_special_out, _out_and_rts_special_out ---- */

static bool same_mem(const ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    return ag_layout_mem_type(lc, a) == ag_layout_mem_type(lc, b);
}

/* Two inputs in different special memories: the one of the node earlier in
 * the topological order (a deterministic choice, not an execution order),
 * unless its node's output is this buffer, then the other. */
ag_status ag_lc_rts_in_rts_in(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    if (same_mem(lc, a, b))
        return AG_OK;
    return ag_layout_conflict_at(lc, ag_layout_lower_input(lc, a, b), NULL);
}

/* a: the special input, b: the special output; different types isolate the
 * output (an Identity after it for all consumers). */
ag_status ag_lc_rts_in_rts_out(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    if (same_mem(lc, a, b))
        return AG_OK;
    return ag_layout_conflict_at(lc, b, NULL);
}

ag_status ag_lc_rts_out_rts_out(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    if (same_mem(lc, a, b))
        return AG_OK;
    uint32_t pa = ag_layout_topo_pos(lc, a->node), pb = ag_layout_topo_pos(lc, b->node);
    return ag_layout_conflict_at(lc, pb < pa ? b : a, NULL);
}
