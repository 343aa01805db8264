/* The memory planner's working state (docs/plan.md).  plan.c builds it in
 * phases: steps (lifetime.c), symbols with sizes, regions and lifetimes,
 * continuous groups (regions.c), optional in-place merging (inplace.c),
 * placement per arena (ag_place), then freezes it into an ag_plan.  The
 * checker (plan_check.c) reads only the frozen ag_plan. */
#ifndef AG_PLAN_INTERNAL_H
#define AG_PLAN_INTERNAL_H

#include "aliasguard/place.h"
#include "aliasguard/plan.h"
#include "core/internal.h"
#include "passes/symbols.h"

/* One memory symbol of the graph (ag_symtab id = index into st->sym). */
typedef struct ag_plan_sym {
    uint64_t first;        /* first step an anchor is written; UINT64_MAX: never */
    uint64_t last;         /* last step an anchor is read or written (inclusive) */
    uint64_t size;         /* largest anchor size in bytes */
    ag_mem_type mem_type;  /* of the producing output */
    ag_plan_region region;
    ag_port producer;      /* the output that creates the buffer ({AG_NONE,0}: none) */
    uint32_t user_index;   /* root input / output index for the user regions */
    /* In-place / alias merge: AG_NONE, or the symbol whose buffer this one
     * uses (always a root of the merge forest; see ag_plan_merge). */
    uint32_t merged_into;
    const char *reason;    /* why merged (st->scratch), NULL when not merged */
    uint32_t group;        /* continuous group, AG_NONE */
    uint64_t group_off;    /* offset inside the group */
    uint64_t offset;       /* out: offset in its region */
    bool used;             /* has at least one anchor with a tensor */
} ag_plan_sym;

/* A continuous group: the symbols of one node's inputs (or outputs) placed
 * back to back in operand order, each member aligned unless nopad. */
typedef struct ag_plan_group {
    ag_node_id node;
    bool inputs;          /* input group (Concat-like) or output group */
    bool nopad;           /* no-padding: members packed without alignment */
    bool atomic;          /* atomic outputs grouped for one clean */
    uint32_t first;       /* index into st->group_members */
    uint32_t count;
    uint64_t size;        /* total, aligned to opts.align */
    uint64_t lo, hi;      /* union of members' lifetimes (inclusive) */
    ag_mem_type mem_type;
    uint64_t offset;      /* out */
} ag_plan_group;

/* One in-place decision (kept for the report and the checker). */
typedef struct ag_plan_inplace_dec {
    ag_node_id node;
    uint32_t input;
    uint32_t output;
    const char *reason;   /* st->scratch */
} ag_plan_inplace_dec;

typedef struct ag_plan_build_state {
    ag_ctx *ctx;
    ag_pass_env env;          /* g, ops; report NULL */
    ag_plan_opts opts;
    ag_arena scratch;         /* freed with the state */
    ag_symtab *syms;          /* nested symbol table of the root */
    uint32_t nsym;            /* ag_symtab ids 0..nsym-1 */
    ag_plan_sym *sym;         /* nsym entries */

    /* Execution order and virtual steps (lifetime.c). */
    ag_node_id *order;        /* ag_graph_topo_order */
    uint32_t norder;
    uint64_t *step;           /* per node id (capacity entries); UINT64_MAX: dead */
    uint64_t nsteps;          /* steps 0..nsteps-1 */

    ag_vec groups;            /* ag_plan_group */
    ag_vec group_members;     /* uint32_t symbol ids */
    ag_vec inplace;           /* ag_plan_inplace_dec */
    ag_vec refused;           /* ag_plan_inplace_dec: candidates the layout test refused */
    ag_vec notes;             /* const char * (st->scratch): what the plan could not do */

    /* Byte offset of each output anchor inside its symbol's buffer, by
     * ag_symtab_slot (ag_plan_views): non-zero for the slices of a block
     * (the outputs of a no-padding continuous output node that reuses its
     * input) and for everything that views them. */
    uint64_t *view_off;
    uint32_t nslots;
} ag_plan_build_state;

/* ---- phases ---- */

/* Steps: root node at topo position p gets a step; a control node's
 * subgraph nodes get steps right after it; exclusive If/Case branches and
 * While cond/body follow one another (lifetime.c). */
ag_status ag_plan_steps(ag_plan_build_state *st);
/* Sizes, memory types, regions and lifetimes of every symbol (lifetime.c);
 * AG_EINVAL naming the tensor whose size is unknown (user IO excepted). */
ag_status ag_plan_lifetimes(ag_plan_build_state *st);
/* Region of symbol s from its anchors (regions.c): a root data-like output
 * makes it user input (arena with zero_copy off), a const-/variable-like
 * output constant, a root NetOutput input user output, else arena. */
ag_plan_region ag_plan_classify(const ag_plan_build_state *st, uint32_t s, bool *root_in, bool *root_out);
/* Continuous input/output groups (regions.c).  Atomic outputs that cannot
 * be grouped get a note (ag_plan_note). */
ag_status ag_plan_groups(ag_plan_build_state *st);
/* View offsets of every output anchor (regions.c, fills st->view_off):
 * an output that refers to an input (ag_symtab_ref_from_input) sits where
 * that input's producer sits; output k of a no-padding continuous output
 * node reusing input 0 (PhonySplit) adds the byte sizes of outputs 0..k-1,
 * packed without alignment as the reference lays such blocks out.
 * AG_EINVAL naming the output when such a size is unknown. */
ag_status ag_plan_views(ag_plan_build_state *st);
/* Node n lays its outputs out as consecutive slices of input 0's buffer:
 * a no-padding continuous output node with output reuse (PhonySplit) whose
 * every output reuses input 0, which is connected. */
bool ag_plan_slices_input(const ag_plan_build_state *st, ag_node_id n);
/* The output whose bytes output o of n is (the producer of the input it
 * views, passes, references or reuses; for a subgraph Data, of its
 * parent's input) when both are one symbol, else {AG_NONE, 0}. */
ag_port ag_plan_viewed_output(const ag_plan_build_state *st, ag_node_id n, uint32_t o);
/* View offset of node n's output o (0 without a slot). */
uint64_t ag_plan_view_offset(const ag_plan_build_state *st, ag_node_id n, uint32_t o);
/* Appends a formatted note (copied into st->scratch). */
ag_status ag_plan_note(ag_plan_build_state *st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* In-place merging (inplace.c): for each in-place candidate whose input's
 * symbol dies at the node, merges the output's symbol into the input's with
 * ag_plan_merge.  Runs after ag_plan_lifetimes and ag_plan_groups, before
 * placement, only when opts.inplace. */
ag_status ag_plan_inplace(ag_plan_build_state *st);

/* Root of the merge forest containing symbol s. */
uint32_t ag_plan_sym_root(const ag_plan_build_state *st, uint32_t s);
/* Merges symbol from into symbol into (both roots, same memory type and
 * region kind, neither in a continuous group, from's lifetime starting at
 * or after into's end): into's lifetime becomes the union and its size the
 * max, from->merged_into = into, and the decision (node, input, output,
 * reason copied) is recorded.  AG_EINVAL when a condition fails. */
ag_status ag_plan_merge(ag_plan_build_state *st, uint32_t from, uint32_t into, ag_node_id node, uint32_t input,
                        uint32_t output, const char *reason);

/* ---- the frozen plan (plan.c builds it; plan_check.c reads it) ---- */

typedef struct ag_plan_buffer {
    const char *name;
    uint64_t first, last;     /* inclusive steps */
    uint64_t size;
    uint64_t offset;
    ag_plan_region region;
    ag_mem_type mem_type;
    uint32_t arena;           /* arena index, AG_NONE outside arenas */
    uint32_t cgroup;          /* continuous group it belongs to, AG_NONE */
} ag_plan_buffer;

typedef struct ag_plan_arena {
    ag_mem_type mem_type;
    uint64_t size;
    uint64_t lower_bound;
} ag_plan_arena;

enum { AG_PLAN_IO_INPUT = 1, AG_PLAN_IO_OUTPUT = 2 };

typedef struct ag_plan_node {
    const char *name;
    uint32_t in_first, nin;
    uint32_t out_first, nout;
} ag_plan_node;

/* Allocation count for n elements (never 0, so NULL means failure). */
#define AG_PLAN_NZ(n) ((size_t)(n) ? (size_t)(n) : (size_t)1)

/* The slices of one block: output tensors first..first+count-1 of node,
 * laid out back to back from the start of input 0's producer tensor
 * (input; AG_NONE when unconnected). */
typedef struct ag_plan_slice {
    const char *node;
    uint32_t input;
    uint32_t first, count;
} ag_plan_slice;

/* A continuous group as laid out: member tensors in operand order. */
typedef struct ag_plan_cgroup {
    const char *node;
    bool inputs, nopad;
    uint32_t first, count;    /* into p->cmembers (tensor indices) */
} ag_plan_cgroup;

struct ag_plan {
    ag_ctx *ctx;
    ag_arena mem;             /* names and strings */
    uint64_t align;
    uint64_t capacity;
    ag_plan_arena arenas[AG_MEM_COUNT_];
    uint32_t narenas;
    ag_plan_buffer *buffers;
    uint32_t nbuffers;
    ag_plan_tensor *tensors;
    const char **tensor_node_names;
    /* Per tensor: 0, or AG_PLAN_IO_INPUT / AG_PLAN_IO_OUTPUT for a root
     * graph input (data-like output) / output (feeds the root NetOutput). */
    uint8_t *tensor_io;
    uint32_t ntensors;
    bool zero_copy;
    ag_plan_cgroup *cgroups;
    uint32_t ncgroups;
    uint32_t *cmembers;
    uint32_t ncmembers;
    ag_plan_inplace_rec *inplace;
    uint32_t (*inplace_tensors)[2]; /* [input's producer tensor, output tensor] */
    uint32_t ninplace;
    ag_plan_inplace_rec *refused;   /* in-place candidates the layout test refused */
    uint32_t nrefused;
    const char **notes;
    uint32_t nnotes;
    /* Per tensor: the tensor whose bytes it is (the producer of the input
     * an output views, passes or reuses), AG_NONE for a buffer's own
     * tensors.  The checker pins each such tensor to that one's offset. */
    uint32_t *tensor_ref;
    ag_plan_slice *slices;
    uint32_t nslices;
    /* output_reuse_input_mem_indexes: [out, in] pairs of the root graph. */
    uint32_t (*reuse)[2];
    uint32_t nreuse, reuse_cap;
    /* Nodes in execution order, for the _input_offset / _output_offset
     * annotations: input k's producer tensor is node_inputs[in_first + k]
     * (AG_NONE when unconnected); outputs are tensors out_first.. . */
    ag_plan_node *nodes;
    uint32_t nnodes;
    uint32_t *node_inputs;
    uint32_t nnode_inputs;
    uint64_t peak, lower_bound;
};

#endif
