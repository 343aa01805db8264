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

typedef struct pl {
    ag_ctx *ctx;
    const ag_buf *bufs;
    uint32_t n;
    uint64_t align;
    uint64_t *sz;      /* aligned sizes */
    /* best-fit machinery */
    uint32_t *by_lower; /* buffer ids sorted by lower */
    uint32_t *pos;      /* position of a buffer in by_lower */
    uint64_t *tree;     /* max upper (+1; 0 = nothing placed) over by_lower, 2*leaves */
    uint32_t leaves;
    pl_span *spans;     /* overlap scratch (n) */
    pl_key *keys;       /* order scratch (n) */
    uint32_t *order;    /* current order (n) */
    uint64_t *off;      /* scratch offsets (n) */
    uint64_t *best;     /* best offsets so far (n) */
    uint64_t best_arena;
    uint64_t capacity;  /* 0 or the caller's capacity (a search target) */
    double deadline;
} pl;

enum { PL_ORDER_SIZE, PL_ORDER_LENGTH, PL_ORDER_AREA, PL_ORDER_START, PL_ORDER_COUNT };

double ag_pl_now(void); /* monotonic seconds */
/* p->order := buffer ids in the order kind (PL_ORDER_*), largest key first. */
void ag_pl_make_order(pl *p, int kind);
/* Keeps p->off as the best placement when arena beats p->best_arena. */
void ag_pl_keep(pl *p, uint64_t arena);
/* Tries to improve p->best below p->best_arena until p->deadline, stopping
 * at lb; *proved when the best was shown optimal. */
ag_status ag_pl_search(pl *p, uint64_t lb, bool *proved);

#endif
