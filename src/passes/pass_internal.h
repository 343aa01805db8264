/* Helpers shared by the passes: inserting an isolating Identity with the
 * attributes the reference system gives it and recording why, and the
 * per-pass entry points registered in pipeline.c. */
#ifndef AG_PASS_INTERNAL_H
#define AG_PASS_INTERNAL_H

#include "core/internal.h"
#include "aliasguard/passes.h"

/* Why an isolation is made, as recorded in the report. */
typedef struct ag_why {
    const char *pass;
    const char *rule;
} ag_why;

/* Nodes inserted through ag_pass_insert_before/after get _cannot_be_deleted=
 * true, except those of rw_conflict (the reference leaves its identities
 * removable): rw_conflict's removal of useless identities judges by the RW
 * matrix alone and would otherwise undo an isolation another rule required
 * (a copy between a RefData and a continuous-input collective, say). */
#define AG_PASS_RW_CONFLICT "rw_conflict"

/* Inserts a node of type type (one input, one output; "Identity" or
 * "MemcpyAsync"...) on the edge feeding dst:i (ag_graph_insert_before), named
 * name (NULL: "<producer>_<pass>_Identity<k>", made unique), with input and
 * output descriptors copied from the producer's output descriptor (attributes
 * dropped), and records the isolation.  *out (may be NULL) gets the node. */
ag_status ag_pass_insert_before(ag_pass_env *env, const ag_why *why, ag_node_id dst, uint32_t i, const char *type,
                                const char *name, ag_node_id *out);
/* Same, inserted after src:o for the given consumers (NULL: all) with
 * ag_graph_insert_after; records one isolation per consumer moved. */
ag_status ag_pass_insert_after(ag_pass_env *env, const ag_why *why, ag_node_id src, uint32_t o, const ag_port *dsts,
                               uint32_t ndsts, const char *type, const char *name, ag_node_id *out);
/* Adds control edge src -> dst (if absent) and records it as an isolation of
 * kind "control" between producer/consumer src and dst. */
ag_status ag_pass_add_ctrl(ag_pass_env *env, const ag_why *why, ag_node_id src, ag_node_id dst);
/* Records an isolation for a node the pass made itself (multi-port copies,
 * Assign write-backs, clean nodes), with free-form producer/consumer text. */
ag_status ag_pass_record(ag_pass_env *env, const ag_why *why, ag_node_id node, const char *producer,
                         const char *consumer);
/* Writes into buf a node name unique in subgraph s built from base ("base",
 * then "base_1", "base_2", ...).  AG_EINVAL if cap is too small. */
ag_status ag_pass_unique_name(ag_pass_env *env, ag_sub_id s, const char *base, char *buf, size_t cap);

/* ---- order between nodes (src/analysis/reach.c) ----
 * Passes must keep isolations valid under every legal schedule, so "runs
 * before" means "a path of data or control edges leads there", never "comes
 * earlier in one topological order".  A reach index answers path queries
 * within one subgraph by a depth-first search bounded by topological
 * positions (no allocation per query); it must be rebuilt (or refreshed with
 * ag_reach_update) after the pass changes edges. */
typedef struct ag_reach ag_reach;
ag_status ag_reach_create(ag_graph *g, ag_reach **out);
void ag_reach_destroy(ag_reach *r);
/* Recomputes positions after edges or nodes changed. */
ag_status ag_reach_update(ag_reach *r);
/* True when a path of data/control edges leads from a to b (a != b, same subgraph). */
bool ag_reaches(ag_reach *r, ag_node_id a, ag_node_id b);
/* Position of n in the topological order used (smaller runs earlier in that
 * order); AG_REACH_NOPOS for dead nodes and nodes made since the last update. */
#define AG_REACH_NOPOS UINT64_MAX
uint64_t ag_reach_pos(const ag_reach *r, ag_node_id n);
/* Gives a node made since the last update (an inserted copy) a position
 * between its predecessors and successors; *placed is false when that is not
 * possible (a neighbour is new too, or no room), and the caller updates. */
ag_status ag_reach_place(ag_reach *r, ag_node_id n, bool *placed);
/* True when an edge src -> dst agrees with the positions (src earlier); an
 * edge against them requires ag_reach_update before the next query. */
bool ag_reach_edge_consistent(const ag_reach *r, ag_node_id src, ag_node_id dst);

/* Inserts the HCCL copy before input i of hccl (shared by hccl_memcpy.c and
 * hccl_continuous_memcpy.c): an Identity named <hccl>_<tag>_Identity<i> with
 * no_need_constant_folding=false, then the broadcast write-back Assign when
 * the rules ask for it. */
ag_status ag_hccl_insert_identity(ag_pass_env *env, const ag_why *why, const char *tag, ag_node_id hccl, uint32_t i);

/* ---- writes that reach a buffer through an alias (alias_writes.c) ----
 * A write through a view, a ref output or a subgraph boundary changes the
 * whole symbol (symbols.h) of the written input, not only the producer's
 * direct consumers.  An ag_aliases holds the symbols of every graph, built
 * once on the first question (O(nodes + anchors)), and a reach index; the
 * pass reports each change it makes with ag_aliases_changed. */
typedef struct ag_aliases ag_aliases;
ag_status ag_aliases_create(ag_pass_env *env, ag_aliases **out);
void ag_aliases_destroy(ag_aliases *a);
/* The graph changed: made is a node inserted on an edge (AG_NONE: edges of
 * existing nodes changed), placed in the reach index or refreshed before the
 * next question; rebuild: buffers changed (an identity removed), so the
 * symbols are rebuilt on the next question.  a may be NULL. */
ag_status ag_aliases_changed(ag_aliases *a, ag_node_id made, bool rebuild);
/* The reach index, refreshed after the changes reported. */
ag_status ag_alias_reach(ag_aliases *a, ag_reach **out);

/* One node that reads the buffer a writer writes. */
typedef struct ag_alias_reader {
    ag_node_id node;   /* the reader; a copy made since the symbols were built counts for the input it feeds */
    ag_node_id lifted; /* node, or its ancestor in the deepest subgraph that also holds the writer */
    ag_node_id writer; /* the writer, or its ancestor there */
    bool made;         /* made since the symbols were built (a copy of this run) */
    bool after_run;    /* a root NetOutput: the caller reads the buffer after the run */
} ag_alias_reader;
/* Appends to *out (ag_alias_reader) every node that reads the buffer of
 * output p (its symbol), except writer w, skip (a copy between p and w, or
 * AG_NONE), shape-only nodes, inputs a node only views (its consumers read),
 * readers inside w's own subgraphs, and readers of w's outputs that alias the
 * buffer (they read what w wrote).  O(size of the symbol). */
ag_status ag_alias_readers(ag_aliases *a, ag_port p, ag_node_id w, ag_node_id skip, ag_vec *out);

typedef enum ag_alias_kind { AG_ALIAS_NONE, AG_ALIAS_CONST, AG_ALIAS_VAR, AG_ALIAS_READER } ag_alias_kind;
#define AG_ALIAS_WANT_CONST 1u   /* the buffer holds a constant */
#define AG_ALIAS_WANT_VAR 2u     /* ... a variable */
#define AG_ALIAS_WANT_READERS 4u /* ... is read by a node no path orders before w */
typedef struct ag_alias_hit {
    ag_alias_kind kind;
    ag_node_id node; /* the constant, variable or reader found */
} ag_alias_hit;
/* The first reason (constant, variable, reader, as asked in want) why w
 * writing the buffer of output p (through copy skip, or AG_NONE) reaches
 * beyond its own input; kind AG_ALIAS_NONE when there is none. */
ag_status ag_alias_judge(ag_aliases *a, ag_port p, ag_node_id w, ag_node_id skip, unsigned want, ag_alias_hit *hit);
/* *same: outputs p and q are one buffer (the same symbol, no copy between). */
ag_status ag_alias_same(ag_aliases *a, ag_port p, ag_port q, bool *same);
/* "<base> through view n3 (constant k)": how p shares its buffer, for ag_why. */
void ag_alias_rule(ag_aliases *a, const char *base, ag_port p, const ag_alias_hit *hit, char *buf, size_t cap);

/* Registered passes (pipeline.c holds the order). */
ag_status ag_pass_hccl_memcpy(ag_pass_env *env);            /* hccl_memcpy.c */
ag_status ag_pass_hccl_continuous_memcpy(ag_pass_env *env); /* hccl_continuous_memcpy.c */
ag_status ag_pass_inplace_support_check(ag_pass_env *env);  /* inplace_support_check.c */
ag_status ag_pass_atomic_addr_clean(ag_pass_env *env);      /* atomic_clean.c */
ag_status ag_pass_subgraph_isolate(ag_pass_env *env);       /* subgraph_isolate.c */
ag_status ag_pass_memcpy_addr_async(ag_pass_env *env);      /* memcpy_addr_async.c */
ag_status ag_pass_mark_same_addr(ag_pass_env *env);         /* mark_same_addr.c */
ag_status ag_pass_rw_conflict(ag_pass_env *env);            /* rw_conflict.c */
ag_status ag_pass_lint(ag_pass_env *env);                   /* lint.c: ag_lint_run without a phase */

#endif
