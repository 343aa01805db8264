/* Offset placement internals shared by the constructive phase (place.c)
 * and the exact search over canonical placements (place_search.c). */
#ifndef AG_PLACE_INTERNAL_H
#define AG_PLACE_INTERNAL_H

#include "aliasguard/place.h"
#include "core/internal.h"

typedef struct pl_key {
    uint64_t k1, k2;
    uint32_t idx;
} pl_key;

typedef struct pl_span {
    uint64_t off, end;
} pl_span;

typedef struct pl_set {
    uint32_t at;  /* first span in pl.pool */
    uint32_t len; /* spans in use */
    uint32_t cap; /* 0 or a power of two */
} pl_set;

typedef struct pl_node {
    pl_set cov, all; /* see pl.node */
} pl_node;

typedef struct pl {
    ag_ctx *ctx;
    const ag_buf *bufs;
    uint32_t n;
    uint64_t align;
    uint64_t *sz;      /* aligned sizes */
    /* best-fit machinery: a tree over the distinct start steps (fanout a
     * power of two) whose nodes keep, as sorted disjoint byte intervals, the
     * union of the spans of the placed buffers stored at the node (cov:
     * lifetime covers the node's steps, not its parent's) and strictly below
     * it (all) */
    uint32_t *tfirst;   /* per buffer: first step index */
    uint32_t *tend;     /* per buffer: one past the last step index */
    uint32_t npts;      /* distinct start steps (leaves) */
    uint32_t depth;     /* levels below the root */
    uint32_t lvbase[34];/* first node of each level, root first */
    uint32_t nnodes;
    pl_node *node;      /* nnodes, level by level */
    pl_span *pool;      /* storage of every set, blocks of 2^k spans */
    size_t pool_len, pool_cap;
    uint32_t pool_free[32]; /* per block class: first free block (UINT32_MAX: none) */
    pl_key *keys;       /* order scratch (n) */
    uint32_t *order;    /* current order (n) */
    uint64_t *off;      /* scratch offsets (n) */
    uint64_t *best;     /* best offsets so far (n) */
    uint64_t best_arena;
    uint64_t capacity;  /* 0 or the caller's capacity (a search target) */
    double deadline;
    uint64_t node_budget; /* search nodes over all restarts (0: no limit) */
} pl;

enum { PL_ORDER_SIZE, PL_ORDER_LENGTH, PL_ORDER_AREA, PL_ORDER_START, PL_ORDER_COUNT };

double ag_pl_now(void); /* monotonic seconds */
/* p->order := buffer ids in the order kind (PL_ORDER_*), largest key first. */
void ag_pl_make_order(pl *p, int kind);
/* Keeps p->off as the best placement when arena beats p->best_arena. */
void ag_pl_keep(pl *p, uint64_t arena);
/* Tries to improve p->best below p->best_arena until p->deadline or
 * p->node_budget nodes, stopping at lb; *proved when the best was shown
 * optimal.  With p->capacity set the capacity is the target: it stops as
 * soon as the best fits.  Deterministic when only the node budget binds. */
ag_status ag_pl_search(pl *p, uint64_t lb, bool *proved);

#endif
