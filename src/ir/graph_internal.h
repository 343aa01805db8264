/* Storage of the graph IR, shared by the graph modules (graph.c, graph_attrs.c,
 * graph_mutate.c, graph_verify.c, graph_equal.c, analysis/topo.c).  Nodes are
 * records in one array indexed by id; anchors are arena objects reached through
 * per-node pointer arrays so that descriptor pointers stay valid while the
 * graph grows.  Nothing here is part of the public API. */
#ifndef AG_GRAPH_INTERNAL_H
#define AG_GRAPH_INTERNAL_H

#include "core/internal.h"

/* An ordered attribute list; items live in the graph arena and are replaced
 * by a larger copy when full (the old array is simply abandoned). */
struct ag_attrs {
    ag_attr *items;
    uint32_t count;
    uint32_t cap;
};

typedef struct ag_in_anchor {
    ag_tensor_desc desc;
    ag_attrs attrs; /* desc.attrs points here */
    ag_port src;    /* {AG_NONE, 0} when unconnected */
} ag_in_anchor;

typedef struct ag_out_anchor {
    ag_tensor_desc desc;
    ag_attrs attrs;
    ag_vec cons; /* ag_port, in the order the edges were made */
} ag_out_anchor;

typedef struct ag_noderec {
    const char *name;   /* arena */
    const char *type;   /* interned (one arena copy per distinct type) */
    const char *domain; /* arena, "" = default */
    ag_sub_id owner;    /* AG_NONE once removed */
    uint32_t nin, nout;
    ag_node_id prev, next; /* stored order within owner; AG_NONE at the ends */
    ag_in_anchor **in;
    ag_out_anchor **out;
    ag_attrs *attrs;    /* arena, so the pointer survives node-array growth */
    ag_vec ctrl_in;     /* ag_node_id */
    ag_vec ctrl_out;    /* ag_node_id */
    ag_vec subs;        /* ag_sub_id */
} ag_noderec;

typedef struct ag_subrec {
    const char *name;
    ag_node_id parent; /* AG_NONE for the root */
    uint32_t depth;
    bool alive;
    ag_node_id head, tail; /* stored order, linked through the node records */
    uint32_t count;
    ag_strmap names;       /* node name -> id */
    /* ag_sub_node_at() materialises the linked order here on demand.  The
     * array is grown when nodes are added (never in an accessor), so rebuilding
     * it cannot fail; order_valid is cleared by every order change. */
    ag_node_id *order;
    uint32_t order_cap;
    bool order_valid;
} ag_subrec;

/* Set of tensors owned by the graph (pointer keys, open addressing). */
typedef struct ag_ptrset {
    uintptr_t *slots;
    uint32_t cap;
    uint32_t count;
} ag_ptrset;

struct ag_graph {
    ag_ctx *ctx;
    ag_arena arena;
    ag_vec nodes;        /* ag_noderec, indexed by id */
    ag_vec subs;         /* ag_subrec, indexed by sub id */
    ag_strmap sub_names; /* subgraph name -> id (root included) */
    ag_strmap types;     /* interned type string -> index in type_strs */
    ag_vec type_strs;    /* const char * */
    ag_ptrset tensors;   /* tensors made by ag_graph_make_tensor */
    uint32_t live_nodes;
};

#define AG_NODE(g, id) (&AG_VEC_AT((g)->nodes, ag_noderec, (id)))
#define AG_SUB(g, id) (&AG_VEC_AT((g)->subs, ag_subrec, (id)))
#define AG_NODE_IN(g, id, i) (AG_NODE(g, id)->in[(i)])
#define AG_NODE_OUT(g, id, o) (AG_NODE(g, id)->out[(o)])

/* Largest number of input or output anchors of one node. */
#define AG_MAX_ANCHORS (UINT32_C(1) << 20)

/* Node id valid and not removed. */
static inline bool ag__node_ok(const ag_graph *g, ag_node_id n)
{
    return n < g->nodes.len && AG_VEC_AT(g->nodes, ag_noderec, n).owner != AG_NONE;
}
static inline bool ag__sub_ok(const ag_graph *g, ag_sub_id s)
{
    return s < g->subs.len && AG_VEC_AT(g->subs, ag_subrec, s).alive;
}

/* ---- graph.c ---- */
/* Initialises a fresh anchor descriptor to the documented defaults. */
void ag__desc_init(ag_tensor_desc *d, ag_attrs *attrs);
/* Edge primitives that cannot fail: the caller has reserved room in every
 * vector they push to (ag_assert checks it). */
void ag__link_data(ag_graph *g, ag_node_id src, uint32_t o, ag_node_id dst, uint32_t i);
void ag__unlink_data(ag_graph *g, ag_node_id dst, uint32_t i);
bool ag__has_ctrl(const ag_graph *g, ag_node_id src, ag_node_id dst);
void ag__link_ctrl(ag_graph *g, ag_node_id src, ag_node_id dst);
void ag__unlink_ctrl(ag_graph *g, ag_node_id src, ag_node_id dst);
/* Moves node n (already in its owner's list) right before / after anchor. */
void ag__order_move(ag_graph *g, ag_node_id n, ag_node_id anchor, bool after);
/* Takes a node with no edges and no subgraphs out of the graph (rollback of a
 * freshly made node, and the last step of ag_graph_remove_node). */
void ag__node_discard(ag_graph *g, ag_node_id n);
/* True when some output of src feeds some input of dst. */
bool ag__has_data(const ag_graph *g, ag_node_id src, ag_node_id dst);
/* Status text for "node "name" (type)" prefixes. */
#define AG_NODE_FMT "node \"%s\" (%s)"
#define AG_NODE_ARGS(g, n) AG_NODE(g, n)->name, AG_NODE(g, n)->type

/* ---- graph_attrs.c ---- */
bool ag__tensor_owned(const ag_graph *g, const ag_tensor *t);
/* Reserves room for n more attributes in a (arena; may fail). */
ag_status ag__attrs_reserve(ag_graph *g, ag_attrs *a, uint32_t n);
/* Sets an attribute whose values already belong to g, without copying;
 * needs reserved room when the name is new. */
void ag__attrs_put_shared(ag_attrs *a, const ag_attr *attr);
void ag__ptrset_free(ag_ctx *ctx, ag_ptrset *s);

/* ---- graph_verify.c ---- */
/* ag_graph_verify; with quiet_oom an allocation failure returns AG_ENOMEM
 * without recording a message (used by the debug checks after mutations). */
ag_status ag__graph_verify(const ag_graph *g, bool quiet_oom);
/* Local consistency of one node's edges (debug checks); true when sound. */
bool ag__node_check(const ag_graph *g, ag_node_id n);
/* Debug hooks: at AG_DEBUG >= 2 checks the given nodes, at >= 3 the whole
 * graph; abort with a message when broken. */
void ag__debug_check_nodes(const ag_graph *g, const ag_node_id *nodes, uint32_t count);
void ag__debug_check_graph(const ag_graph *g);

/* ---- analysis/topo.c ---- */
ag_status ag__topo_order(const ag_graph *g, ag_node_id *out, uint32_t *count, bool quiet_oom);

#endif
