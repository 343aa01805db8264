/* Shape and dtype inference over the IR, with propagation of small constant
 * values (Shape -> Slice -> Concat -> Reshape chains).  Works on graphs from
 * any front end; op rules follow the ONNX operator definitions. */
#ifndef ALIASGUARD_INFER_H
#define ALIASGUARD_INFER_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_infer_stats {
    size_t size;              /* sizeof(ag_infer_stats) */
    uint32_t nodes;           /* nodes visited */
    uint32_t no_rule;         /* nodes whose type has no inference rule */
    uint32_t unknown_tensors; /* output anchors whose shape stays unknown, outside
                                 branches that cannot run (see unknown_untaken) */
    uint32_t unknown_untaken; /* unknown output anchors inside the branches of an If or
                                 Case whose selector value is known and that are not the
                                 one taken (nested subgraphs included) */
} ag_infer_stats;

/* Binds the shape of the root Data node (or graph input) called name.  "NAME=d0,d1"
 * strings are parsed by ag_infer_parse_binding. */
ag_status ag_infer_bind_input(ag_graph *g, const char *name, int32_t rank, const int64_t *dims);
/* Parses and applies "NAME=d0,d1,..." (empty list = scalar). */
ag_status ag_infer_apply_binding(ag_graph *g, const char *binding);
/* Binds a known value to the root Data node (or graph input) called name, for
 * inputs that select a branch (a sample rate, a mode flag).  The value's dtype
 * must be the declared one (an undeclared dtype takes the value's) and its
 * shape must fit the declared shape, which it then fixes.  The value is copied
 * into g and stays on the Data node's output descriptor, from where value
 * propagation carries it.  On failure the input is left unchanged. */
ag_status ag_infer_bind_value(ag_graph *g, const char *name, const ag_tensor *value);
/* Parses and applies "NAME=v" or "NAME=v0,v1,...": integers for integer and
 * bool dtypes, decimal floats for f16, bf16, f32 and f64; the dtype and shape
 * are the Data node's (bind an unknown shape first with ag_infer_apply_binding;
 * a 1-D input of unknown length takes the number of values).  A single value
 * fills the whole shape.  Inputs of more than 4096 elements (the largest value
 * inference propagates) are checked but keep only their shape, no value. */
ag_status ag_infer_apply_value_binding(ag_graph *g, const char *binding);
/* Infers every output descriptor it can, in topological order, through
 * subgraphs; never sizes an unknown tensor as 0.  stats may be NULL.
 * Contradictions (e.g. MatMul with mismatched inner dims) fail with AG_ESHAPE
 * naming the node.  An If or Case whose selector value is known gets the int
 * attribute _taken_branch (index of the subgraph that runs); it is recomputed,
 * or removed, by every run. */
ag_status ag_infer_shapes(ag_graph *g, ag_infer_stats *stats);
/* Visits every output anchor whose shape or dtype is unknown (for reports),
 * except those inside branches that cannot run (per _taken_branch). */
void ag_infer_each_unknown(const ag_graph *g, void (*fn)(void *ud, ag_node_id n, uint32_t o), void *ud);
/* Visits the unknown output anchors that ag_infer_each_unknown skips: those
 * inside a branch an If or Case does not take (nested subgraphs included). */
void ag_infer_each_unknown_untaken(const ag_graph *g, void (*fn)(void *ud, ag_node_id n, uint32_t o), void *ud);
/* True when subgraph s is, or lies inside, a branch of an If or Case that
 * inference found is not taken (per _taken_branch). */
bool ag_infer_sub_untaken(const ag_graph *g, ag_sub_id s);

#ifdef __cplusplus
}
#endif
#endif
