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
