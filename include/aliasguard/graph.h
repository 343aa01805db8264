/* The graph IR: one ag_graph holds the root graph and all of its (nested)
 * subgraphs.  Nodes are addressed by 32-bit ids that are unique across all
 * subgraphs and stay valid until the node is removed; every node belongs to
 * exactly one subgraph (its owner).  Subgraph 0 (AG_ROOT) is the root graph.
 * Strings, shapes and attribute values are owned by the graph. */
#ifndef ALIASGUARD_GRAPH_H
#define ALIASGUARD_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "ctx.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_graph ag_graph;
typedef struct ag_attrs ag_attrs; /* an ordered attribute list (node or tensor desc) */
typedef uint32_t ag_node_id;
typedef uint32_t ag_sub_id;

#define AG_NONE UINT32_MAX /* "no node", "no subgraph", "no producer" */
#define AG_ROOT 0u         /* the root graph's subgraph id */

/* One end of a data edge: a node and an input or output index. */
typedef struct ag_port {
    ag_node_id node;
    uint32_t index;
} ag_port;

/* Descriptor of the tensor at one anchor.  Scalar fields may be written
 * directly; pointer fields only through the setters below (they copy into the
 * graph).  An input anchor's descriptor starts as a copy of its producer's
 * output descriptor when the edge is made; shape inference keeps them in step.
 * Anchor-specific attributes (_parent_node_index on a NetOutput input, ...)
 * live in attrs. */
typedef struct ag_tensor_desc {
    const char *name;         /* value name (the ONNX value name); "" if none */
    ag_dtype dtype;
    int32_t rank;             /* AG_RANK_UNKNOWN or 0..AG_MAX_RANK */
    const int64_t *dims;      /* rank entries; AG_DIM_UNKNOWN for unknown ones */
    ag_mem_type mem_type;
    ag_format format;
    const ag_tensor *value;   /* statically known value, or NULL */
    ag_attrs *attrs;          /* never NULL */
} ag_tensor_desc;

/* ---- lifecycle ---- */

/* Creates an empty graph whose root is named name (copied). */
ag_status ag_graph_create(ag_ctx *ctx, const char *name, ag_graph **out);
/* Destroys the graph and everything it owns; NULL is accepted. */
void ag_graph_destroy(ag_graph *g);
ag_ctx *ag_graph_ctx(const ag_graph *g);

/* ---- subgraphs ---- */

/* Number of subgraphs including the root; ids are 0..count-1 (removed
 * subgraphs keep their id and report ag_sub_alive() false). */
uint32_t ag_graph_sub_count(const ag_graph *g);
bool ag_sub_alive(const ag_graph *g, ag_sub_id s);
const char *ag_sub_name(const ag_graph *g, ag_sub_id s);
/* Parent control node of a subgraph; AG_NONE for the root. */
ag_node_id ag_sub_parent(const ag_graph *g, ag_sub_id s);
/* Nesting depth: 0 for the root, 1 for a subgraph of a root node, ... */
uint32_t ag_sub_depth(const ag_graph *g, ag_sub_id s);
/* Live nodes of a subgraph in their stored order (creation order, with nodes
 * made by the insert helpers placed next to the anchor node). */
uint32_t ag_sub_node_count(const ag_graph *g, ag_sub_id s);
ag_node_id ag_sub_node_at(const ag_graph *g, ag_sub_id s, uint32_t k);
/* Node of subgraph s with this name, or AG_NONE. */
ag_node_id ag_sub_find_node(const ag_graph *g, ag_sub_id s, const char *name);
/* Subgraph whose name is name, or AG_NONE (subgraph names are unique). */
ag_sub_id ag_graph_find_sub(const ag_graph *g, const char *name);
/* Creates a new empty subgraph named name (unique, copied) and appends it to
 * parent's subgraph list (If: then, else; While: cond, body; Case: branches). */
ag_status ag_graph_add_subgraph(ag_graph *g, ag_node_id parent, const char *name, ag_sub_id *out);

/* ---- nodes ---- */

/* One more than the largest node id ever handed out. */
uint32_t ag_graph_node_capacity(const ag_graph *g);
/* Number of live nodes over all subgraphs. */
uint32_t ag_graph_node_count(const ag_graph *g);
bool ag_node_alive(const ag_graph *g, ag_node_id n);

/* Adds a node to subgraph s.  name must be unique within s; NULL or "" asks
 * for a generated one ("<type>_<id>").  Inputs start unconnected. */
ag_status ag_graph_add_node(ag_graph *g, ag_sub_id s, const char *type, const char *name,
                            uint32_t nin, uint32_t nout, ag_node_id *out);
/* Grows the number of input/output anchors (never shrinks). */
ag_status ag_node_set_io_count(ag_graph *g, ag_node_id n, uint32_t nin, uint32_t nout);
/* Renames a node (unique within its subgraph) / changes its type / domain. */
ag_status ag_node_set_name(ag_graph *g, ag_node_id n, const char *name);
ag_status ag_node_set_type(ag_graph *g, ag_node_id n, const char *type);
ag_status ag_node_set_domain(ag_graph *g, ag_node_id n, const char *domain);

const char *ag_node_name(const ag_graph *g, ag_node_id n);
const char *ag_node_type(const ag_graph *g, ag_node_id n);
const char *ag_node_domain(const ag_graph *g, ag_node_id n); /* "" = default */
ag_sub_id ag_node_owner(const ag_graph *g, ag_node_id n);
uint32_t ag_node_num_inputs(const ag_graph *g, ag_node_id n);
uint32_t ag_node_num_outputs(const ag_graph *g, ag_node_id n);
/* Producer of input i: {node, output index}, or {AG_NONE, 0} if unconnected. */
ag_port ag_node_input_src(const ag_graph *g, ag_node_id n, uint32_t i);
/* Consumers of output o, in the order the edges were made. */
uint32_t ag_node_output_nconsumers(const ag_graph *g, ag_node_id n, uint32_t o);
ag_port ag_node_output_consumer(const ag_graph *g, ag_node_id n, uint32_t o, uint32_t k);
/* Control edges (no data): predecessors that must finish before n starts. */
uint32_t ag_node_num_ctrl_in(const ag_graph *g, ag_node_id n);
ag_node_id ag_node_ctrl_in(const ag_graph *g, ag_node_id n, uint32_t k);
uint32_t ag_node_num_ctrl_out(const ag_graph *g, ag_node_id n);
ag_node_id ag_node_ctrl_out(const ag_graph *g, ag_node_id n, uint32_t k);
/* Subgraphs of a control node, by index. */
uint32_t ag_node_num_subs(const ag_graph *g, ag_node_id n);
ag_sub_id ag_node_sub(const ag_graph *g, ag_node_id n, uint32_t k);

ag_attrs *ag_node_attrs(ag_graph *g, ag_node_id n);
const ag_attrs *ag_node_attrs_c(const ag_graph *g, ag_node_id n);
ag_tensor_desc *ag_node_input_desc(ag_graph *g, ag_node_id n, uint32_t i);
ag_tensor_desc *ag_node_output_desc(ag_graph *g, ag_node_id n, uint32_t o);
const ag_tensor_desc *ag_node_input_desc_c(const ag_graph *g, ag_node_id n, uint32_t i);
const ag_tensor_desc *ag_node_output_desc_c(const ag_graph *g, ag_node_id n, uint32_t o);

/* ---- tensor descriptors ---- */

ag_status ag_desc_set_name(ag_graph *g, ag_tensor_desc *d, const char *name);
/* rank may be AG_RANK_UNKNOWN (dims ignored); dims may hold AG_DIM_UNKNOWN. */
ag_status ag_desc_set_shape(ag_graph *g, ag_tensor_desc *d, int32_t rank, const int64_t *dims);
/* Attaches a known value (deep-copied unless it already belongs to g); NULL clears. */
ag_status ag_desc_set_value(ag_graph *g, ag_tensor_desc *d, const ag_tensor *value);
/* Copies dtype, shape, mem_type, format, name and value (not attrs) from src. */
ag_status ag_desc_copy_type(ag_graph *g, ag_tensor_desc *dst, const ag_tensor_desc *src);
/* True when rank and every dim are known. */
bool ag_desc_shape_known(const ag_tensor_desc *d);
/* Element count, or UINT64_MAX when unknown or overflowing. */
uint64_t ag_desc_numel(const ag_tensor_desc *d);
/* Raw byte size (numel * element bits / 8, rounded up), AG_SIZE_UNKNOWN when
 * the shape or dtype is unknown.  No alignment or padding is applied here. */
uint64_t ag_desc_size_bytes(const ag_tensor_desc *d);

/* ---- attributes ---- */

uint32_t ag_attrs_count(const ag_attrs *a);
const ag_attr *ag_attrs_at(const ag_attrs *a, uint32_t k);
const ag_attr *ag_attrs_find(const ag_attrs *a, const char *name);
/* Sets (deep copy into g) an attribute, replacing one of the same name in
 * place, otherwise appending: insertion order is kept. */
ag_status ag_attrs_set(ag_graph *g, ag_attrs *a, const ag_attr *attr);
/* Removes an attribute; AG_ENOTFOUND if absent. */
ag_status ag_attrs_remove(ag_graph *g, ag_attrs *a, const char *name);
/* Typed getters: false when absent or of another kind. */
bool ag_attrs_get_bool(const ag_attrs *a, const char *name, bool *out);
bool ag_attrs_get_int(const ag_attrs *a, const char *name, int64_t *out);
bool ag_attrs_get_float(const ag_attrs *a, const char *name, float *out);
bool ag_attrs_get_string(const ag_attrs *a, const char *name, const char **out);
bool ag_attrs_get_ints(const ag_attrs *a, const char *name, const int64_t **out, uint32_t *count);
/* A flag: the value of a bool attribute, or an int attribute's != 0 (flags
 * written by other tools are often ints); dflt when absent or of another
 * kind. */
bool ag_attrs_get_flag(const ag_attrs *a, const char *name, bool dflt);
/* Typed setters (wrappers of ag_attrs_set). */
ag_status ag_attrs_set_bool(ag_graph *g, ag_attrs *a, const char *name, bool v);
ag_status ag_attrs_set_int(ag_graph *g, ag_attrs *a, const char *name, int64_t v);
ag_status ag_attrs_set_string(ag_graph *g, ag_attrs *a, const char *name, const char *v);
ag_status ag_attrs_set_ints(ag_graph *g, ag_attrs *a, const char *name, const int64_t *v, uint32_t count);

/* Makes a graph-owned tensor (deep copy of the given fields; digest computed
 * from data when present, taken from t->digest when data is NULL). */
ag_status ag_graph_make_tensor(ag_graph *g, const ag_tensor *t, const ag_tensor **out);

/* ---- edges ---- */

/* Connects output src:o to input dst:i (same subgraph, dst:i unconnected). */
ag_status ag_graph_add_edge(ag_graph *g, ag_node_id src, uint32_t o, ag_node_id dst, uint32_t i);
/* Removes that edge; AG_ENOTFOUND if it does not exist. */
ag_status ag_graph_remove_edge(ag_graph *g, ag_node_id src, uint32_t o, ag_node_id dst, uint32_t i);
/* Adds control edge src -> dst (same subgraph; no self-loops; idempotent). */
ag_status ag_graph_add_ctrl_edge(ag_graph *g, ag_node_id src, ag_node_id dst);
ag_status ag_graph_remove_ctrl_edge(ag_graph *g, ag_node_id src, ag_node_id dst);

/* ---- mutation helpers every pass uses (reference notes 2.1) ---- */

/* Inserts node (already created in dst's subgraph, input node_in and output
 * node_out free) on the edge feeding dst:i: producer -> node:node_in,
 * node:node_out -> dst:i.  Then moves every incoming control edge of dst onto
 * node, except those from atomic-clean nodes (AtomicAddrClean, MemSet), and
 * copies the stream-label/core-number/super-kernel attributes of dst.  The node
 * is placed right before dst in the stored order. */
ag_status ag_graph_insert_before(ag_graph *g, ag_node_id dst, uint32_t i, ag_node_id node,
                                 uint32_t node_in, uint32_t node_out);
/* Inserts node after output src:o: src:o -> node:node_in and, for each given
 * consumer (all current consumers when dsts is NULL), src:o -> dst becomes
 * node:node_out -> dst.  Unless src is a Switch/RefSwitch/SwitchN, moves every
 * outgoing control edge of src onto node; copies the same attributes from src.
 * The node is placed right after src in the stored order. */
ag_status ag_graph_insert_after(ag_graph *g, ag_node_id src, uint32_t o, const ag_port *dsts,
                                uint32_t ndsts, ag_node_id node, uint32_t node_in, uint32_t node_out);
/* Takes n out of the graph, keeping dependencies: for each i < map_len with
 * io_map[i] >= 0, the producer of input i is connected to every consumer of
 * output io_map[i]; every (predecessor, successor) pair over data and control
 * edges not already connected by data gets a control edge (a NoOp hub node is
 * used when |pred|*|succ| > 1000 and > |pred|+|succ|).  n is left with no
 * edges but stays in the graph. */
ag_status ag_graph_isolate_node(ag_graph *g, ag_node_id n, const int32_t *io_map, uint32_t map_len);
/* Removes n, its edges and its subgraphs (recursively).  Its id is not reused. */
ag_status ag_graph_remove_node(ag_graph *g, ag_node_id n);

/* ---- order and checks ---- */

/* Topological order of all live nodes across subgraphs: each subgraph is
 * sorted by Kahn's algorithm over data and control edges (ties broken by
 * stored order) and a control node's subgraph nodes follow it immediately,
 * subgraph 0 first.  out must hold ag_graph_node_count() ids.  AG_ECYCLE
 * names a node on the cycle. */
ag_status ag_graph_topo_order(const ag_graph *g, ag_node_id *out, uint32_t *count);
/* Topological order of the live nodes of subgraph s alone (the order
 * ag_graph_topo_order gives them, without the nodes of nested subgraphs);
 * out must hold ag_sub_node_count(s) ids.  Costs what the subgraph costs. */
ag_status ag_sub_topo_order(const ag_graph *g, ag_sub_id s, ag_node_id *out, uint32_t *count);
/* Full structural check: edge symmetry, index ranges, owner consistency,
 * unique names, subgraph parents, _parent_node_index ranges, acyclicity.
 * The message names the node and anchor. */
ag_status ag_graph_verify(const ag_graph *g);
/* Structural equality of two graphs (names, types, domains, edges, control
 * edges, subgraphs, attributes, descriptors, tensor digests).  On difference
 * returns false and writes a one-line reason into why (if not NULL). */
bool ag_graph_equal(const ag_graph *a, const ag_graph *b, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
