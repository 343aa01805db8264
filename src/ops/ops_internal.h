/* Representation of op registry entries, shared by the loader (ops.c) and the
 * node-level queries (ops_node.c).  An entry keeps only what its file said:
 * a wildcard anchor ("in*", "out*") and sorted specific anchors; queries fall
 * back field by field from the specific anchor to the wildcard to defaults. */
#ifndef AG_OPS_INTERNAL_H
#define AG_OPS_INTERNAL_H

#include "core/internal.h"

#define AG_OPS_MAX_INDEX 4095u  /* largest anchor index an ops file may name */
#define AG_OPS_WILD UINT32_MAX  /* anchor selector "*" */

/* Which fields of an op_anchor were given. */
enum {
    OPA_SET_ACCESS = 1,
    OPA_SET_REL = 2,
    OPA_SET_MEM = 4,
    OPA_SET_INPLACE = 8,
};

typedef struct op_anchor {
    uint32_t index;      /* anchor index or AG_OPS_WILD */
    uint8_t set;         /* OPA_SET_* */
    uint8_t access;      /* ag_op_access (inputs) */
    uint8_t rel;         /* ag_op_rel (outputs) */
    uint8_t mem;         /* ag_mem_type */
    uint32_t rel_in;     /* input of ref/view/reuse (pass: the anchor's own index) */
    uint32_t inplace_in; /* in-place candidate input (outputs) */
    uint32_t flags;      /* AG_OPA_*, added to the wildcard's */
} op_anchor;

struct ag_op_info {
    const char *key;     /* map key: type, or domain "\n" type when qualified */
    bool qualified;
    const char *type;
    const char *domain;  /* NULL: any domain; "" the default ONNX domain */
    const char *file;
    uint32_t line;
    ag_op_kind kind;
    uint32_t flags;      /* AG_OPF_* as written in the table */
    op_anchor in_wild;   /* set == 0 and flags == 0 when absent */
    op_anchor out_wild;
    uint32_t nin, nout;
    const op_anchor *ins;  /* sorted by index */
    const op_anchor *outs;
};

/* Effective input/output anchor of an entry after the field-wise fallback
 * (specific, then wildcard, then defaults: ro, fresh, hbm, no flags). */
op_anchor ag__ops_input(const ag_op_info *info, uint32_t i);
op_anchor ag__ops_output(const ag_op_info *info, uint32_t o);

#endif
