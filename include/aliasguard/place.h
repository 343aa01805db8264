/* Offset placement: given buffers with lifetimes (half-open [lower, upper)
 * in some step count) and sizes, assign byte offsets so that no two buffers
 * alive at the same time overlap, using as few bytes as possible.  The lower
 * bound is the largest total size alive at one step.  Independent of graphs:
 * the memory planner and `aliasguard place` (MiniMalloc CSV traces) share it. */
#ifndef ALIASGUARD_PLACE_H
#define ALIASGUARD_PLACE_H

#include <stdbool.h>
#include <stdint.h>

#include "ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_buf {
    uint64_t lower;  /* first step the buffer is alive */
    uint64_t upper;  /* first step it is dead again (upper > lower) */
    uint64_t size;   /* bytes (0 allowed: placed at 0, overlaps nothing) */
    uint64_t offset; /* out: byte offset */
} ag_buf;

typedef struct ag_place_opts {
    size_t size;          /* sizeof(ag_place_opts) */
    uint64_t align;       /* every offset a multiple of this (1 = none) */
    uint64_t capacity;    /* 0: none; otherwise AG_EINFEASIBLE if no placement fits */
    double effort_seconds;/* improvement budget after the constructive placement (0: none) */
    uint64_t effort_nodes;/* search node budget over all restarts (0: none); with
                           * effort_seconds 0 the search runs on nodes alone, so the
                           * result depends only on the input and the options */
} ag_place_opts;

typedef struct ag_place_result {
    size_t size;               /* sizeof(ag_place_result) */
    uint64_t arena_bytes;      /* max(offset + size) */
    uint64_t lower_bound_bytes;/* max over steps of the aligned sizes alive */
    double seconds;            /* wall time spent */
    bool optimal;              /* arena_bytes == lower_bound_bytes, or proved optimal */
} ag_place_result;

ag_place_opts ag_place_defaults(void); /* align 1, no capacity, effort 1 s */
/* The lower bound of a set of buffers (sizes rounded up to align). */
uint64_t ag_place_lower_bound(const ag_buf *bufs, uint32_t n, uint64_t align);
/* Places bufs (offsets written in place).  Deterministic for given input and
 * options when effort_seconds is 0. */
ag_status ag_place(ag_ctx *ctx, ag_buf *bufs, uint32_t n, const ag_place_opts *opts, ag_place_result *res);
/* The baseline: one best-fit pass in decreasing size order (TFLite/XLA
 * style greedy by size), no search.  Fills offsets and res like ag_place. */
ag_status ag_place_greedy_by_size(ag_ctx *ctx, ag_buf *bufs, uint32_t n, uint64_t align, ag_place_result *res);
/* Independent checker (shares no code with ag_place): time-overlapping
 * buffers do not overlap in bytes, offsets aligned, everything within
 * capacity (0: unchecked).  On failure AG_EVERIFY naming the two buffers. */
ag_status ag_place_check(ag_ctx *ctx, const ag_buf *bufs, uint32_t n, uint64_t align, uint64_t capacity);

#ifdef __cplusplus
}
#endif
#endif
