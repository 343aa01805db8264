/* The static memory plan of a compiled graph (docs/plan.md): every tensor
 * gets a region (arena per memory type, user input, user output, constant)
 * and a byte offset in it.  Buffers are the memory symbols of the graph;
 * their lifetimes come from the execution order, and the placement engine
 * (place.h) packs each arena.  An independent checker validates a plan. */
#ifndef ALIASGUARD_PLAN_H
#define ALIASGUARD_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "graph.h"
#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_plan ag_plan;

/* Where a buffer lives. */
#define AG_PLAN_REGION_LIST(X)                                               \
    X(AG_REGION_ARENA, "arena")             /* planned, one arena per memory type */ \
    X(AG_REGION_USER_INPUT, "user-input")   /* caller's input buffer (zero copy) */  \
    X(AG_REGION_USER_OUTPUT, "user-output") /* caller's output buffer (zero copy) */ \
    X(AG_REGION_CONST, "constant")          /* immutable weights region */

typedef enum ag_plan_region {
#define AG_PLAN_REGION_ENUM_(e, name) e,
    AG_PLAN_REGION_LIST(AG_PLAN_REGION_ENUM_)
#undef AG_PLAN_REGION_ENUM_
    AG_REGION_COUNT_
} ag_plan_region;
const char *ag_plan_region_name(ag_plan_region r);

typedef struct ag_plan_opts {
    size_t size;           /* sizeof(ag_plan_opts) */
    uint64_t align;        /* offsets multiple of this (default 512) */
    double effort_seconds; /* placement improvement budget (default 0) */
    bool inplace;          /* merge in-place candidates (default true) */
    bool zero_copy;        /* root inputs/outputs in user memory (default true) */
    uint64_t capacity;     /* per arena, 0 = unlimited */
    uint64_t effort_nodes; /* placement search nodes per arena (default 20000):
                            * bounded by nodes, not time, so a plan is the same
                            * on every machine and run */
} ag_plan_opts;

ag_plan_opts ag_plan_defaults(void);

/* Plans g as given (execution order: ag_graph_topo_order).  The graph and
 * ops are only read and may be destroyed after the call; *out is owned by
 * the caller (ag_plan_destroy).  Errors: AG_EINVAL naming the tensor whose
 * size is unknown, AG_EINFEASIBLE when an arena exceeds capacity. */
ag_status ag_plan_build(ag_ctx *ctx, const ag_graph *g, const ag_ops *ops, const ag_plan_opts *opts,
                        ag_plan **out);
void ag_plan_destroy(ag_plan *p);

/* ---- arenas ---- */
uint64_t ag_plan_peak_bytes(const ag_plan *p);        /* sum of arena sizes */
uint64_t ag_plan_lower_bound_bytes(const ag_plan *p); /* sum of arena lower bounds */
uint32_t ag_plan_arena_count(const ag_plan *p);       /* arenas with at least one buffer */
ag_mem_type ag_plan_arena_mem_type(const ag_plan *p, uint32_t k);
uint64_t ag_plan_arena_size(const ag_plan *p, uint32_t k);
uint64_t ag_plan_arena_lower_bound(const ag_plan *p, uint32_t k);

/* ---- tensors: one per output anchor of every node, in execution order ---- */
typedef struct ag_plan_tensor {
    ag_node_id node;
    uint32_t output;
    uint32_t buffer;      /* buffer index (ag_plan_buffer_*) */
    ag_plan_region region;
    ag_mem_type mem_type;
    uint64_t offset;      /* in the region (user regions: from the buffer's start); a
                           * slice of a block (PhonySplit) lies inside its buffer */
    uint64_t size;        /* bytes of this tensor */
} ag_plan_tensor;
uint32_t ag_plan_tensor_count(const ag_plan *p);
const ag_plan_tensor *ag_plan_tensor_at(const ag_plan *p, uint32_t k);

/* ---- buffers (merged symbols) ---- */
uint32_t ag_plan_buffer_count(const ag_plan *p);
const char *ag_plan_buffer_name(const ag_plan *p, uint32_t b);
/* Lifetime in steps, inclusive; size; offset; region. */
void ag_plan_buffer_span(const ag_plan *p, uint32_t b, uint64_t *first, uint64_t *last);
uint64_t ag_plan_buffer_size(const ag_plan *p, uint32_t b);
uint64_t ag_plan_buffer_offset(const ag_plan *p, uint32_t b);
ag_plan_region ag_plan_buffer_region(const ag_plan *p, uint32_t b);
ag_mem_type ag_plan_buffer_mem_type(const ag_plan *p, uint32_t b);

/* ---- in-place decisions ---- */
typedef struct ag_plan_inplace_rec {
    const char *node;   /* node name */
    uint32_t input;
    uint32_t output;
    const char *reason;
} ag_plan_inplace_rec;
uint32_t ag_plan_inplace_count(const ag_plan *p);
const ag_plan_inplace_rec *ag_plan_inplace_at(const ag_plan *p, uint32_t k);
/* Candidates that passed every other in-place step but whose merged buffer
 * would carry a layout conflict; reason names the rule and the pair of
 * anchors that found it. */
uint32_t ag_plan_inplace_refused_count(const ag_plan *p);
const ag_plan_inplace_rec *ag_plan_inplace_refused_at(const ag_plan *p, uint32_t k);

/* ---- notes: what the plan could have done but did not (atomic outputs
 * left apart), one sentence each naming the node and output ---- */
uint32_t ag_plan_note_count(const ag_plan *p);
const char *ag_plan_note_at(const ag_plan *p, uint32_t k);

/* Writes the plan as JSON (docs/plan.md). */
ag_status ag_plan_write_json(const ag_plan *p, ag_sink sink);
/* Writes arena k's placement problem as MiniMalloc CSV (id,lower,upper,size). */
ag_status ag_plan_write_csv(const ag_plan *p, uint32_t k, ag_sink sink);

/* Independent checker (shares no code with the planner): tensors of one
 * buffer share its offset (a view its viewed tensor's), the slices of a
 * block lie back to back inside it, time-overlapping buffers of an arena
 * are disjoint, offsets aligned, continuous groups laid out in operand
 * order, user IO outside arenas, everything within the arena.  AG_EVERIFY
 * naming the two tensors on failure. */
ag_status ag_plan_check(const ag_plan *p);

#ifdef __cplusplus
}
#endif
#endif
