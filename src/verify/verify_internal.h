/* Internal contract of the verifier (src/verify): the shadow memory (an
 * interval map from byte ranges to value ids, shadow.c), the layout the
 * verifier reads tensors' places from (verify.c) and the state of a run
 * that schedule.c drives.  Not installed. */
#ifndef AG_VERIFY_INTERNAL_H
#define AG_VERIFY_INTERNAL_H

#include "aliasguard/verify.h"
#include "core/internal.h"

/* ---- shadow memory ----
 * The byte boundaries every tensor can have are known before a run starts
 * (the layout), so the address space is cut into elementary segments and a
 * segment tree with lazy assignment holds one value id per segment: filling
 * or checking a range costs O(log n) whatever its length. */
typedef struct ag_shadow {
    ag_ctx *ctx;
    uint32_t nseg;
    uint32_t *val;  /* per tree node: the value of the whole subtree, or AG_SHADOW_MIXED */
    size_t cap;     /* entries of val */
} ag_shadow;

#define AG_SHADOW_MIXED UINT32_MAX

ag_status ag_shadow_init(ag_shadow *sh, ag_ctx *ctx, uint32_t nseg);
void ag_shadow_free(ag_shadow *sh);
/* Every segment holds v. */
void ag_shadow_reset(ag_shadow *sh, uint32_t v);
/* Segments [a, b) hold v. */
void ag_shadow_fill(ag_shadow *sh, uint32_t a, uint32_t b, uint32_t v);
/* First segment of [a, b) that does not hold v, or UINT32_MAX; *found gets its value. */
uint32_t ag_shadow_find_other(const ag_shadow *sh, uint32_t a, uint32_t b, uint32_t v, uint32_t *found);
/* Value held by segment a. */
uint32_t ag_shadow_get(const ag_shadow *sh, uint32_t a);

/* ---- layout ---- */

typedef struct vl_tensor {
    uint32_t space;   /* index in spaces, UINT32_MAX: no bytes */
    uint32_t buffer;  /* plan buffer */
    uint64_t offset;
    uint64_t size;
} vl_tensor;

typedef struct vl_space {
    char name[48];   /* "hbm", "constant", "user-input 3" */
    bool arena;
    bool constant;   /* the constant region (constants and variables) */
    uint64_t limit;  /* arena size (arenas only) */
} vl_space;

typedef struct vl_buffer {
    uint64_t first, last; /* steps, inclusive */
    bool arena;
} vl_buffer;

struct ag_verify_layout {
    ag_ctx *ctx;
    uint32_t cap;         /* node capacity of the graph planned */
    uint32_t *out_base;   /* per node: tensor index of output 0 (UINT32_MAX: none) */
    uint32_t *nout;       /* per node: outputs with a tensor entry */
    uint32_t ntensors;
    vl_tensor *t;
    uint32_t nspaces, spcap;
    vl_space *sp;
    uint32_t nbuffers;
    vl_buffer *b;
};

/* Tensor entry of output o of node n, or NULL. */
const vl_tensor *ag_vl_tensor(const ag_verify_layout *l, ag_node_id n, uint32_t o);

/* ---- a run ---- */

/* Runs the schedules of opts over g and l, filling r.  schedule.c. */
ag_status ag_verify_execute(ag_ctx *ctx, const ag_graph *g, const ag_ops *ops, const ag_verify_layout *l,
                            const ag_verify_opts *opts, ag_verify_result *r);

struct ag_verify_result {
    ag_ctx *ctx;
    ag_arena arena;  /* strings of the violations */
    ag_vec viol;     /* ag_verify_violation */
    uint32_t schedules;
    uint64_t seed;
    uint64_t executed;
};

/* Records a violation unless one of the same kind and anchors is already
 * recorded or the list is full (max). */
ag_status ag_verify_record(ag_verify_result *r, uint32_t max, const ag_verify_violation *v);

#endif
