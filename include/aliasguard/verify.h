/* The verifier (DESIGN.md "Verifier", docs/verify.md): executes the memory
 * effects of a compiled graph over its memory plan — every write stamps the
 * bytes it covers with a value, every read checks its bytes still hold the
 * value it expects — over many legal multi-stream interleavings, both
 * branches of every If/Case and several While trip counts. */
#ifndef ALIASGUARD_VERIFY_H
#define ALIASGUARD_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "graph.h"
#include "ops.h"
#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What went wrong.  X(enum, name). */
#define AG_VERIFY_KIND_LIST(X)                                                       \
    X(AG_VIOL_STALE_READ, "stale read")             /* bytes no longer hold the value */ \
    X(AG_VIOL_CONST_CLOBBERED, "constant clobbered") /* a constant or variable written */ \
    X(AG_VIOL_ATOMIC_NOT_CLEARED, "atomic not cleared") /* accumulates into non-zero */  \
    X(AG_VIOL_OUT_OF_ARENA, "out of arena")         /* tensor past its arena's end */  \
    X(AG_VIOL_UNPINNED_FIXED_ADDR, "unpinned fixed address") /* switch input not pinned */

typedef enum ag_verify_kind {
#define AG_VERIFY_KIND_ENUM_(e, name) e,
    AG_VERIFY_KIND_LIST(AG_VERIFY_KIND_ENUM_)
#undef AG_VERIFY_KIND_ENUM_
    AG_VIOL_COUNT_
} ag_verify_kind;
const char *ag_verify_kind_name(ag_verify_kind k);

typedef struct ag_verify_opts {
    size_t size;             /* sizeof(ag_verify_opts) */
    uint32_t schedules;      /* interleavings to run (default 64) */
    uint32_t streams;        /* streams nodes without _stream_id are spread over (default 4) */
    uint64_t seed;           /* seed of schedule 0 (default 1) */
    int64_t replay;          /* run only this schedule index (-1: all) */
    uint32_t max_violations; /* distinct violations kept (default 16) */
    /* Execute _inplace_support_input_index hints: the node's result also
     * lands in the hinted input's bytes, as a host kernel honouring the
     * hint would do (default false; docs/verify.md). */
    bool inplace_hints;
    /* Called after each schedule (may be NULL). */
    void (*progress)(void *ud, uint32_t done, uint32_t total);
    void *progress_ud;
} ag_verify_opts;

ag_verify_opts ag_verify_defaults(void);

/* One violation.  Anchors are "node:out N" / "node:in N" / "caller:output K";
 * the range is in the named space ("hbm", "constant", "user-input 3", ...).
 * Replay: the same seed with replay = schedule. */
typedef struct ag_verify_violation {
    ag_verify_kind kind;
    const char *reader;  /* the anchor that found the problem */
    const char *writer;  /* the anchor whose write caused it ("" when none) */
    const char *space;
    uint64_t offset;
    uint64_t size;
    uint64_t seed;
    uint32_t schedule;
    const char *message; /* one line, names nodes with their types */
} ag_verify_violation;

typedef struct ag_verify_result ag_verify_result;

uint32_t ag_verify_violation_count(const ag_verify_result *r);
const ag_verify_violation *ag_verify_violation_at(const ag_verify_result *r, uint32_t k);
uint32_t ag_verify_schedules_run(const ag_verify_result *r);
uint64_t ag_verify_seed(const ag_verify_result *r);
uint64_t ag_verify_nodes_executed(const ag_verify_result *r); /* over all schedules */
void ag_verify_result_destroy(ag_verify_result *r);            /* NULL accepted */

/* ---- layouts: where every tensor lives, as the verifier sees it ---- */

typedef struct ag_verify_layout ag_verify_layout;

/* The plan's placement.  With naive, every buffer of the plan instead gets
 * bytes of its own (one buffer per symbol, nothing reused): the reference
 * the optimised plan is compared with.  g must be the graph planned. */
ag_status ag_verify_layout_from_plan(ag_ctx *ctx, const ag_graph *g, const ag_plan *p, bool naive,
                                     ag_verify_layout **out);
void ag_verify_layout_destroy(ag_verify_layout *l); /* NULL accepted */
/* Offset of output o of node n in its space; false when it has no bytes. */
bool ag_verify_layout_offset(const ag_verify_layout *l, ag_node_id n, uint32_t o, uint64_t *offset);
/* Moves output o of node n (its bytes only, not its buffer's other tensors)
 * to offset: for tests that corrupt a plan by hand.  AG_ENOTFOUND if the
 * tensor has no bytes in the layout. */
ag_status ag_verify_layout_move(ag_verify_layout *l, ag_node_id n, uint32_t o, uint64_t offset);

/* ---- running ---- */

/* Verifies g under layout l.  Graph, ops and layout are only read.  *out
 * (owned by the caller) holds the violations; AG_OK even when there are
 * some.  Errors: AG_ECYCLE, AG_ENOMEM, AG_EINVAL (layout of another graph). */
ag_status ag_verify_layout_run(ag_ctx *ctx, const ag_graph *g, const ag_ops *ops, const ag_verify_layout *l,
                               const ag_verify_opts *opts, ag_verify_result **out);
/* ag_verify_layout_run over the plan's own placement. */
ag_status ag_verify(ag_ctx *ctx, const ag_graph *g, const ag_ops *ops, const ag_plan *p, const ag_verify_opts *opts,
                    ag_verify_result **out);

#ifdef __cplusplus
}
#endif
#endif
