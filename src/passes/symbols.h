/* Memory symbols: equivalence classes of anchors that share one buffer
 * (reference notes 4.2, the reference's GetRefMapping).  An anchor is one
 * input or output of a node; outputs that pass, view or reference an input
 * join that input's symbol, inputs join their producer's, and subgraph
 * boundaries tie parent and subgraph anchors together. */
#ifndef AG_SYMBOLS_H
#define AG_SYMBOLS_H

#include "passes/pass_internal.h"

/* One anchor: input (is_input) or output index of node. */
typedef struct ag_lanchor {
    ag_node_id node;
    uint32_t index;
    bool is_input;
} ag_lanchor;

typedef struct ag_symtab ag_symtab;

/* Builds the symbols of subgraph top.  nested: also every subgraph below top
 * (the reference's GetAllNodes), visited in ag_graph_topo_order order (a
 * subgraph's nodes right after their parent node); otherwise top's own nodes
 * alone, its subgraph boundaries left untied (what the control-flow pre-pass
 * builds for one branch).  Nodes are visited inputs first, then outputs:
 * * input of a NetOutput in a subgraph below top, with _parent_node_index k:
 *   the producer's symbol and the parent's output k's symbol are united and
 *   the input joins the result; inputs without the index join the producer;
 * * a data-like node with _parent_node_index in a subgraph below top has no
 *   input anchor in this IR: its output joins the symbol of the producer of
 *   the parent's input _parent_node_index (own symbol when unconnected);
 * * Merge / StreamMerge: the producers' symbols are united into the largest
 *   one and the connected inputs join it; an unconnected input with
 *   _next_iteration_node = N adds N's output 0;
 * * other inputs: the producer's symbol, or a new one when unconnected;
 * * outputs (unless already placed): ref_var_src_var_name naming a RefData of
 *   the same subgraph whose output 0 has a symbol joins it (a RefData without
 *   _parent_node_index in a subgraph refers to the data-like node that has a
 *   control edge into it, which must exist); then an output that refers to an
 *   input (ag_symtab_ref_from_input) joins that input's symbol; otherwise a
 *   new symbol.
 * A symbol is named after the anchor that created it; a union keeps the
 * symbol with more anchors (the second one on a tie) and appends the other's
 * anchors to its list.  A data-like node without _parent_node_index is an
 * ordinary node (own symbol).  Errors (AG_EINVAL, naming node and anchor): a
 * producer not yet visited, a _parent_node_index out of range, a missing
 * _next_iteration_node, a RefData in a subgraph without its control edge. */
ag_status ag_symtab_build(ag_pass_env *env, ag_sub_id top, bool nested, ag_symtab **out);
void ag_symtab_destroy(ag_symtab *t);

/* Symbols in lexicographic order of their names (ties: creation order). */
uint32_t ag_symtab_count(const ag_symtab *t);
/* Id of the k-th symbol in that order; ids index the accessors below. */
uint32_t ag_symtab_at(const ag_symtab *t, uint32_t k);
const char *ag_symtab_name(const ag_symtab *t, uint32_t sym);
/* Anchors of a symbol in list order (SymbolToAnchors). */
uint32_t ag_symtab_size(const ag_symtab *t, uint32_t sym);
const ag_lanchor *ag_symtab_anchor_at(const ag_symtab *t, uint32_t sym, uint32_t k);
/* Symbol of an anchor (AnchorToSymbol), AG_NONE when it has none (a node made
 * after the build, a node outside the mapped graphs, an anchor left out). */
uint32_t ag_symtab_symbol_of(const ag_symtab *t, const ag_lanchor *a);
/* Dense index of an anchor of the mapped graphs (inputs first, then
 * outputs) for per-anchor arrays of ag_symtab_nslots() entries; AG_NONE for
 * anchors outside them or made after the build. */
uint32_t ag_symtab_slot(const ag_symtab *t, const ag_lanchor *a);
uint32_t ag_symtab_nslots(const ag_symtab *t);
/* Nodes with ids below this existed at the build. */
uint32_t ag_symtab_node_cap(const ag_symtab *t);

/* "<node>_in_<i>" / "<node>_out_<i>" into buf (snprintf-like: returns the
 * length it needed, output truncated and NUL-terminated when cap > 0). */
size_t ag_lanchor_format(const ag_graph *g, const ag_lanchor *a, char *buf, size_t cap);
bool ag_lanchor_eq(const ag_lanchor *a, const ag_lanchor *b);

/* The reference's IsRefFromInput on output o of n: true when the output is
 * the buffer of an input of n (registry relation pass/view/ref/reuse, via
 * ag_ops_output_ref).  *in_idx gets that input; a data-like node with
 * _parent_node_index in a subgraph passes its parent's input through and
 * gets *in_idx = AG_NONE (it has no input anchor here). */
bool ag_symtab_ref_from_input(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t o, uint32_t *in_idx);
/* Subgraph input: data-like node carrying _parent_node_index in a subgraph. */
bool ag_symtab_is_subgraph_data(const ag_ops *ops, const ag_graph *g, ag_node_id n);

#endif
