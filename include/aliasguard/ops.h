/* Op semantics registry: for each operator type, how it touches memory
 * (read-only / writeable / scope-writeable inputs, outputs that reference or
 * view an input, continuous or no-padding needs, atomic outputs, shape-only,
 * special memory types, unrefreshable addresses).  A builtin table is compiled
 * in (src/ops/builtin.ops); user files (--ops FILE) add or override entries;
 * node attributes override per node.  Passes ask here, never compare types. */
#ifndef ALIASGUARD_OPS_H
#define ALIASGUARD_OPS_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_ops ag_ops;

/* Creates a registry holding the builtin table. */
ag_status ag_ops_create(ag_ctx *ctx, ag_ops **out);
/* Destroys a registry; NULL is accepted. */
void ag_ops_destroy(ag_ops *ops);
/* Adds or overrides entries from ops-file text (format: docs/ops.md); errors
 * are "file:line:col: message".  On failure the registry is unchanged. */
ag_status ag_ops_load_text(ag_ops *ops, const char *buf, size_t len, const char *filename);
/* Same, reading a file. */
ag_status ag_ops_load_file(ag_ops *ops, const char *path);

/* ---- enumerations (names are the spellings of the ops file, docs/ops.md) ---- */

/* What an operator is, as far as memory passes care.  X(enum, name). */
#define AG_OP_KIND_LIST(X)                                                         \
    X(AG_OPK_UNKNOWN, "unknown")                     /* not in the registry */      \
    X(AG_OPK_COMPUTE, "compute")                     /* reads inputs, fresh outputs */ \
    X(AG_OPK_DATA, "data")                           /* Data, AippData, AnnData */  \
    X(AG_OPK_REF_DATA, "ref-data")                   /* RefData: data- and var-like */ \
    X(AG_OPK_VARIABLE, "variable")                   /* Variable, VariableV2 */     \
    X(AG_OPK_CONST, "const")                         /* Const, Constant */          \
    X(AG_OPK_CONST_PLACEHOLDER, "const-placeholder") /* ConstPlaceHolder */         \
    X(AG_OPK_FILE_CONSTANT, "file-constant")         /* FileConstant */             \
    X(AG_OPK_NETOUTPUT, "netoutput")                                                \
    X(AG_OPK_IDENTITY, "identity")                   /* Identity, ReadVariableOp */ \
    X(AG_OPK_ASSIGN, "assign")                       /* Assign, AssignAdd, ... */   \
    X(AG_OPK_COLLECTIVE, "collective")               /* Hcom* */                    \
    X(AG_OPK_IF, "if")                               /* If, _If, StatelessIf */     \
    X(AG_OPK_CASE, "case")                           /* Case, StatelessCase */      \
    X(AG_OPK_WHILE, "while")                         /* While, _While, StatelessWhile */ \
    X(AG_OPK_CALL, "call")                           /* PartitionedCall */          \
    X(AG_OPK_LOOP, "loop")                           /* ONNX Loop / Scan not lowered */ \
    X(AG_OPK_MERGE, "merge")                         /* Merge, RefMerge */          \
    X(AG_OPK_STREAM_MERGE, "stream-merge")           /* StreamMerge */              \
    X(AG_OPK_SWITCH, "switch")                       /* Switch, RefSwitch, SwitchN */ \
    X(AG_OPK_NEXT_ITERATION, "next-iteration")       /* NextIteration */            \
    X(AG_OPK_LOOP_COND, "loop-cond")                 /* LoopCond */                 \
    X(AG_OPK_CONTROL, "control")                     /* other stream/label/frame ops */ \
    X(AG_OPK_MEMCPY, "memcpy")                       /* MemcpyAsync, MemcpyAddrAsync */ \
    X(AG_OPK_ATOMIC_CLEAN, "atomic-clean")           /* AtomicAddrClean, MemSet */  \
    X(AG_OPK_POINT_FROM_INPUTS, "point-from-inputs")                                \
    X(AG_OPK_VIEW, "view")                           /* Reshape, Squeeze, ... */    \
    X(AG_OPK_SHAPE, "shape")                         /* Shape, ShapeN, Rank, Size */ \
    X(AG_OPK_PHONY, "phony")                         /* PhonyConcat, PhonySplit */  \
    X(AG_OPK_NOOP, "noop")

typedef enum ag_op_kind {
#define AG_OP_KIND_ENUM_(e, name) e,
    AG_OP_KIND_LIST(AG_OP_KIND_ENUM_)
#undef AG_OP_KIND_ENUM_
    AG_OPK_COUNT_
} ag_op_kind;

/* How a node touches one input (the reference's InputRWType). */
#define AG_OP_ACCESS_LIST(X)                                                     \
    X(AG_ACC_RO, "ro")                        /* only read */                      \
    X(AG_ACC_WRITEABLE, "writeable")          /* written in place, visible after */ \
    X(AG_ACC_SCOPE_WRITEABLE, "scope-writeable") /* written in place, private garbage */

typedef enum ag_op_access {
#define AG_OP_ACCESS_ENUM_(e, name) e,
    AG_OP_ACCESS_LIST(AG_OP_ACCESS_ENUM_)
#undef AG_OP_ACCESS_ENUM_
    AG_ACC_COUNT_
} ag_op_access;

/* Whose buffer an output is (the reference's IsRefFromInput, refined). */
#define AG_OP_REL_LIST(X)                                                        \
    X(AG_REL_FRESH, "fresh") /* its own buffer */                                 \
    X(AG_REL_REF, "ref")     /* input k's buffer after the node wrote it (Assign) */ \
    X(AG_REL_VIEW, "view")   /* input k's buffer, unchanged (Reshape, Merge) */   \
    X(AG_REL_PASS, "pass")   /* input of the same index (NetOutput, While) */     \
    X(AG_REL_REUSE, "reuse") /* input k's buffer, overwritten in place (reuse_input) */

typedef enum ag_op_rel {
#define AG_OP_REL_ENUM_(e, name) e,
    AG_OP_REL_LIST(AG_OP_REL_ENUM_)
#undef AG_OP_REL_ENUM_
    AG_REL_COUNT_
} ag_op_rel;

/* Node-level flags.  X(enum, bit, name). */
#define AG_OP_FLAG_LIST(X)                                                         \
    X(AG_OPF_CONTINUOUS_INPUT, 0, "continuous-input")                              \
    X(AG_OPF_CONTINUOUS_OUTPUT, 1, "continuous-output")                            \
    X(AG_OPF_NOPAD_CONTINUOUS_INPUT, 2, "nopad-continuous-input")                  \
    X(AG_OPF_NOPAD_CONTINUOUS_OUTPUT, 3, "nopad-continuous-output")                \
    X(AG_OPF_OUTPUT_REUSE_INPUT, 4, "output-reuse-input") /* _output_reuse_input */ \
    X(AG_OPF_ATOMIC, 5, "atomic")               /* is_atomic_node */               \
    X(AG_OPF_SHAPE_ONLY, 6, "shape-only")       /* reads only input shapes */      \
    X(AG_OPF_SIDE_EFFECTS, 7, "side-effects")   /* never removed or merged */      \
    X(AG_OPF_UNREFRESHABLE, 8, "unrefreshable") /* no address refresh, all anchors */ \
    X(AG_OPF_FIXED_ADDR, 9, "fixed-addr")       /* no physical refresh either */    \
    X(AG_OPF_HCCL, 10, "hccl")                  /* HCCL engine: unrefreshable unless
                                                   the feature map is refreshable */ \
    X(AG_OPF_SUBGRAPHS, 11, "subgraphs")        /* owns subgraphs (node level) */   \
    X(AG_OPF_UNKNOWN, 12, "unknown")            /* type not in the registry */

enum {
#define AG_OP_FLAG_ENUM_(e, bit, name) e = 1u << (bit),
    AG_OP_FLAG_LIST(AG_OP_FLAG_ENUM_)
#undef AG_OP_FLAG_ENUM_
};

/* Anchor-level flags (one input or output).  X(enum, bit, name). */
#define AG_OP_ANCHOR_FLAG_LIST(X)                                      \
    X(AG_OPA_ATOMIC, 0, "atomic")               /* accumulates: zero first */ \
    X(AG_OPA_UNREFRESHABLE, 1, "unrefreshable") /* address cannot be refreshed */

enum {
#define AG_OP_ANCHOR_FLAG_ENUM_(e, bit, name) e = 1u << (bit),
    AG_OP_ANCHOR_FLAG_LIST(AG_OP_ANCHOR_FLAG_ENUM_)
#undef AG_OP_ANCHOR_FLAG_ENUM_
};

/* Static names ("compute", "ro", "ref", ...); NULL for out-of-range values. */
const char *ag_op_kind_name(ag_op_kind k);
const char *ag_op_access_name(ag_op_access a);
const char *ag_op_rel_name(ag_op_rel r);
/* Name of a single flag bit (AG_OPF_x / AG_OPA_x); NULL if not exactly one known bit. */
const char *ag_op_flag_name(uint32_t flag);
const char *ag_op_anchor_flag_name(uint32_t flag);
/* Parse a name of the lists above (len bytes, not NUL-terminated); false if unknown. */
bool ag_op_kind_parse(const char *s, size_t len, ag_op_kind *out);
bool ag_op_access_parse(const char *s, size_t len, ag_op_access *out);
/* Writes "a,b,c" (or "" for 0) for node flags into buf; returns the length it
 * needed (snprintf-like, output truncated to len-1 bytes and NUL-terminated). */
size_t ag_op_flags_format(uint32_t flags, char *buf, size_t len);

/* Kind predicates: the reference's op-type sets (reference notes 2.2). */
bool ag_op_kind_is_data_like(ag_op_kind k);  /* data, ref-data */
bool ag_op_kind_is_var_like(ag_op_kind k);   /* variable, ref-data */
bool ag_op_kind_is_const_like(ag_op_kind k); /* const, const-placeholder, file-constant */
bool ag_op_kind_has_subgraphs(ag_op_kind k); /* if, case, while, call, loop */

/* ---- table level: one registry entry, no node attributes applied ---- */

typedef struct ag_op_info ag_op_info;

/* Entry for (type, domain): first one qualified with exactly that domain, then
 * one valid in any domain; domain NULL, "" and "ai.onnx" are the default ONNX
 * domain.  NULL when the type is not known.  Valid until the next load. */
const ag_op_info *ag_ops_lookup(const ag_ops *ops, const char *type, const char *domain);
/* The entry used for types that are not known (file entry "*"); never NULL. */
const ag_op_info *ag_ops_default(const ag_ops *ops);
/* Current entries (overridden ones excluded) in order of definition. */
uint32_t ag_ops_count(const ag_ops *ops);
const ag_op_info *ag_ops_at(const ag_ops *ops, uint32_t k);

const char *ag_op_info_type(const ag_op_info *info);
const char *ag_op_info_domain(const ag_op_info *info); /* NULL: any domain */
/* Where the entry was defined ("<builtin>" for the compiled-in table). */
const char *ag_op_info_file(const ag_op_info *info);
uint32_t ag_op_info_line(const ag_op_info *info);
ag_op_kind ag_op_info_kind(const ag_op_info *info);
uint32_t ag_op_info_flags(const ag_op_info *info); /* AG_OPF_* */
ag_op_access ag_op_info_input_access(const ag_op_info *info, uint32_t i);
uint32_t ag_op_info_input_flags(const ag_op_info *info, uint32_t i); /* AG_OPA_* */
/* Memory type of input i; *explicit_ (may be NULL) tells whether the table says so. */
ag_mem_type ag_op_info_input_mem_type(const ag_op_info *info, uint32_t i, bool *explicit_);
/* Relation of output o; *in_idx (may be NULL) gets the input for ref/view/pass/reuse. */
ag_op_rel ag_op_info_output_rel(const ag_op_info *info, uint32_t o, uint32_t *in_idx);
uint32_t ag_op_info_output_flags(const ag_op_info *info, uint32_t o);
ag_mem_type ag_op_info_output_mem_type(const ag_op_info *info, uint32_t o, bool *explicit_);
/* In-place candidate of output o (may share input *in_idx if it dies there). */
bool ag_op_info_output_inplace(const ag_op_info *info, uint32_t o, uint32_t *in_idx);

/* Prints every current entry in the ops-file format; loading the print into a
 * registry reproduces the same entries (type, domain and properties). */
ag_status ag_ops_dump(const ag_ops *ops, ag_sink sink);

/* ---- node level: table entry of the node's (type, domain) with the node's
 * attributes applied (docs/ops.md "Node attributes").  Never fail; anchors out
 * of range read as ro / fresh / hbm / no flags. ---- */

/* Entry used for node n: its type's, or ag_ops_default() when unknown. */
const ag_op_info *ag_ops_node_info(const ag_ops *ops, const ag_graph *g, ag_node_id n);
ag_op_kind ag_ops_node_kind(const ag_ops *ops, const ag_graph *g, ag_node_id n);
/* AG_OPF_* with continuous_*, _no_padding_continuous_*, _output_reuse_input,
 * is_atomic_node / atomic_*_index applied; AG_OPF_SUBGRAPHS if the node has
 * subgraphs; AG_OPF_UNKNOWN if its type is not known. */
uint32_t ag_ops_node_flags(const ag_ops *ops, const ag_graph *g, ag_node_id n);
/* Access of input i: While kind, _special_input_size, _input_mutable, then
 * reference + equal tensor names (writeable), then the table (notes 3.6). */
ag_op_access ag_ops_input_access(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t i);
/* Relation of output o in IsRefFromInput order (pass-through incl. subgraph
 * Data, table view, table ref, reference + names, reuse_input, no-padding
 * reuse, table reuse).  *in_idx (may be NULL) is always < the input count;
 * a relation naming a missing input reads as fresh. */
ag_op_rel ag_ops_output_ref(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t o, uint32_t *in_idx);
/* Memory type: _input_memory_type / _output_memory_type entry, else the
 * table's explicit type, else the anchor's tensor descriptor. */
ag_mem_type ag_ops_input_mem_type(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t i);
ag_mem_type ag_ops_output_mem_type(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t o);
/* AG_OPA_* of one anchor (atomic_input_index / atomic_output_index applied;
 * AG_OPF_UNREFRESHABLE of the node sets AG_OPA_UNREFRESHABLE everywhere). */
uint32_t ag_ops_input_flags(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t i);
uint32_t ag_ops_output_flags(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t o);
bool ag_ops_is_atomic_input(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t i);
bool ag_ops_is_atomic_output(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t o);
/* In-place candidate of output o: _output_inplace_ability (flat [out, in]
 * pairs) when the node has it, else the table. */
bool ag_ops_output_inplace(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t o, uint32_t *in_idx);
/* The _inplace_support_input_index hint on output 0's descriptor. */
bool ag_ops_inplace_hint(const ag_graph *g, ag_node_id n, uint32_t *in_idx);
/* ref_var_src_var_name of output o ("this output aliases variable X"), or NULL. */
const char *ag_ops_output_ref_var(const ag_graph *g, ag_node_id n, uint32_t o);

#ifdef __cplusplus
}
#endif
#endif
