/* Symbol-level memory-layout conflicts (seed 3.3; reference notes 4): the 14
 * anchor attributes, the context a conflict checker sees, the checker table
 * (layout_checkers.def), the helper algorithms of notes 4.6, the identities
 * the solver inserts, and the control-flow pre-pass entry point. */
#ifndef AG_LAYOUT_INTERNAL_H
#define AG_LAYOUT_INTERNAL_H

#include "passes/symbols.h"

#define AG_LAYOUT_PASS "layout_conflict"

/* ---- anchor attributes (notes 4.3), in the reference's order ----
 * X(suffix); rule strings print the full name (ag_layout_attr_name). */
#define AG_LAYOUT_ATTR_LIST(X)                                   \
    X(USER_MEMORY_INPUT)                                         \
    X(USER_MEMORY_OUTPUT)                                        \
    X(IMMUTABLE_ADDRESS_OUTPUT)                                  \
    X(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT)               \
    X(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT)                \
    X(CONTINUOUS_INPUT)                                          \
    X(CONTINUOUS_OUTPUT)                                         \
    X(NOPADDING_CONTINUOUS_INPUT)                                \
    X(NOPADDING_CONTINUOUS_OUTPUT)                               \
    X(RTS_SPECIAL_TYPE_INPUT)                                    \
    X(RTS_SPECIAL_TYPE_OUTPUT)                                   \
    X(REFERENCE_OUTPUT)                                          \
    X(NORMAL_INPUT)                                              \
    X(NORMAL_OUTPUT)

typedef enum ag_layout_attr {
#define AG_LAYOUT_ATTR_ENUM_(s) AG_LA_##s,
    AG_LAYOUT_ATTR_LIST(AG_LAYOUT_ATTR_ENUM_)
#undef AG_LAYOUT_ATTR_ENUM_
    AG_LA_COUNT_
} ag_layout_attr;

/* Short aliases used by the checker table and the checkers. */
#define AG_LA_USER_IN AG_LA_USER_MEMORY_INPUT
#define AG_LA_USER_OUT AG_LA_USER_MEMORY_OUTPUT
#define AG_LA_IMMUTABLE_OUT AG_LA_IMMUTABLE_ADDRESS_OUTPUT
#define AG_LA_UNREFRESH_OUT AG_LA_UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT
#define AG_LA_UNREFRESH_IN AG_LA_UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT
#define AG_LA_CONT_IN AG_LA_CONTINUOUS_INPUT
#define AG_LA_CONT_OUT AG_LA_CONTINUOUS_OUTPUT
#define AG_LA_NOPAD_CONT_IN AG_LA_NOPADDING_CONTINUOUS_INPUT
#define AG_LA_NOPAD_CONT_OUT AG_LA_NOPADDING_CONTINUOUS_OUTPUT
#define AG_LA_RTS_IN AG_LA_RTS_SPECIAL_TYPE_INPUT
#define AG_LA_RTS_OUT AG_LA_RTS_SPECIAL_TYPE_OUTPUT
#define AG_LA_REF_OUT AG_LA_REFERENCE_OUTPUT
#define AG_LA_NORMAL_IN AG_LA_NORMAL_INPUT
#define AG_LA_NORMAL_OUT AG_LA_NORMAL_OUTPUT

#define AG_LA_BIT(a) ((uint16_t)(1u << (a)))

/* "USER_MEMORY_INPUT", ...; NULL out of range. */
const char *ag_layout_attr_name(ag_layout_attr a);

/* ---- graph information (notes 4.1 GraphInfo) ----
 * No build options exist here; the root graph's first NetOutput may carry
 * them as attributes (absent: the default):
 *   _feature_map_refreshable (bool, false): the reference's
 *       ge.featureBaseRefreshable; also true for a known-shape graph under a
 *       dynamic root;
 *   _physical_memory_refreshable (bool, false): physical memory refresh mode;
 *   _user_input_nopadding_continuous_output (bool, true): false models an
 *       offline build, single-op or heterogeneous deployment.
 * root_static: the root graph is static (no node of the root other than a
 * NetOutput carries _is_unknown_shape=true or _dynamic_shape_partitioned=true). */
typedef struct ag_layout_info {
    bool root_static;
    bool fm_refreshable;
    bool phys_refreshable;
    bool user_in_nopad_cont_out_supported;
} ag_layout_info;

/* ---- the context a checker sees ---- */

typedef struct ag_layout_ctx ag_layout_ctx;
typedef struct ag_layout_engine ag_layout_engine; /* private to layout_conflict.c */

/* Returns AG_OK whether or not it found a conflict (conflicts are reported
 * with ag_layout_conflict_at); an error status aborts the pass. */
typedef ag_status (*ag_layout_checker_fn)(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b);

/* One checker table row: fn handles anchors with attributes (attr_a, attr_b),
 * in either order.  as_symbol: runs at most once per symbol for this
 * attribute pair (the reference's call-as-symbol checkers, which examine the
 * whole symbol). */
typedef struct ag_layout_checker_row {
    ag_layout_attr attr_a, attr_b;
    ag_layout_checker_fn fn;
    bool as_symbol;
    const char *name; /* the reference's file/function name, e.g. "unrefresh_in_checker" */
} ag_layout_checker_row;

struct ag_layout_ctx {
    ag_pass_env *env;
    ag_graph *g;
    const ag_ops *ops;
    ag_ctx *ctx;
    ag_sub_id top;          /* the static graph being processed */
    const ag_symtab *symtab;
    uint32_t sym;           /* the symbol being examined */
    ag_layout_info info;
    /* The current checker call: the engine passes anchors so that a carries
     * attr_a and b carries attr_b of the row; swapped is true when b comes
     * first in the symbol's list (the reference's pair order is (b, a)). */
    ag_layout_attr attr_a, attr_b;
    bool swapped;
    /* Scratch memory for checkers, reset after each symbol. */
    ag_arena scratch;
    ag_layout_engine *eng;
};

/* Attribute bits (AG_LA_BIT) of an anchor; 0 for anchors of nodes made during
 * the run. */
uint16_t ag_layout_attrs_of(const ag_layout_ctx *lc, const ag_lanchor *a);
/* Position of node n in the topological order of the run's start (smaller
 * earlier); UINT32_MAX for nodes made since.  Used only as the reference's
 * deterministic "lower topo id" tie-break, never as an execution order. */
uint32_t ag_layout_topo_pos(const ag_layout_ctx *lc, ag_node_id n);
/* The ref map: node X when output a (an out-anchor) carries
 * ref_var_src_var_name = X and X's output 0 is in the same symbol; else
 * AG_NONE. */
ag_node_id ag_layout_ref_target(const ag_layout_ctx *lc, const ag_lanchor *a);
/* Memory type of an anchor (ag_ops_input_mem_type / ag_ops_output_mem_type);
 * every type but hbm is "special" (RTS_SPECIAL_TYPE_*). */
ag_mem_type ag_layout_mem_type(const ag_layout_ctx *lc, const ag_lanchor *a);
/* The anchors of the current symbol (list order). */
uint32_t ag_layout_sym_size(const ag_layout_ctx *lc);
const ag_lanchor *ag_layout_sym_anchor(const ag_layout_ctx *lc, uint32_t k);
/* Anchor a belongs to the current symbol (during ag_layout_merge_check: to
 * one of the symbols taken as one). */
bool ag_layout_in_symbol(const ag_layout_ctx *lc, const ag_lanchor *a);
/* FM or PHYS of notes 4.5: fm_refreshable, or phys_refreshable and the node of
 * a or b cannot have its physical address refreshed (fixed-addr ops). */
bool ag_layout_refresh_matters(const ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b);

/* Puts anchor x into the current symbol's conflict set (an Identity will go
 * before it when x is an input, after it for all consumers when an output).
 * rule: the isolation's rule text (copied); NULL means the current checker's
 * ("layout: <name>").  An anchor already in the set keeps its first rule. */
ag_status ag_layout_conflict_at(ag_layout_ctx *lc, const ag_lanchor *x, const char *rule);

/* ---- helper algorithms (notes 4.6; layout_helpers.c) ---- */

/* IsNodeOutRefFromInput: some output of in-anchor a's node is in the current
 * symbol. */
bool ag_layout_out_ref_from_input(const ag_layout_ctx *lc, const ag_lanchor *a);
/* GetRefInput: the input of out-anchor a's node that is in the current
 * symbol; false when none. */
bool ag_layout_get_ref_input(const ag_layout_ctx *lc, const ag_lanchor *a, ag_lanchor *in);
/* The absolute-conflict side choice for two in-anchors: the one whose node
 * has the lower topological position, unless its node's output is in the
 * symbol (ag_layout_out_ref_from_input), then the other. */
const ag_lanchor *ag_layout_lower_input(const ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b);
/* Follows output p back through outputs that refer to an input
 * (ag_symtab_ref_from_input, repeatedly) to the output that owns the buffer;
 * a subgraph Data stops the walk. */
ag_port ag_layout_real_producer(const ag_layout_ctx *lc, ag_port p);
/* AllRealInputsAreTheSameOutAnchor(n): every input's real producer is one
 * output (unconnected inputs make it false). */
bool ag_layout_all_real_inputs_same(const ag_layout_ctx *lc, ag_node_id n);
/* IsSameOrPartialSame(L, R) on port lists (continuous outputs vs the real
 * producers of continuous inputs). */
bool ag_layout_same_or_partial_same(const ag_port *l, uint32_t nl, const ag_port *r, uint32_t nr);
/* IsNoPaddingContinuousNodeConflict(a, b) on the producers of the inputs of
 * nodes a and b.  May allocate (AG_ENOMEM); *conflict gets the answer. */
ag_status ag_layout_nopad_cont_conflict(ag_layout_ctx *lc, ag_node_id a, ag_node_id b, bool *conflict);
/* AssignVarInsertIdentity(attr): R = the anchor of (a, b) whose attributes do
 * not include attr; every in-anchor of the current symbol on R's node whose
 * producer is assign-like goes into the conflict set (rule NULL: the current
 * checker's).  *done is true when there was at least one. */
ag_status ag_layout_assign_var_insert_identity(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b,
                                               ag_layout_attr attr, bool *done);

/* ---- the checker table (layout_checkers.def) ----
 * AG_LAYOUT_CHECKER(A, B, fn, as_symbol, "name") with A, B attribute
 * suffixes (USER_IN, CONT_OUT, ... as aliased above).  Each fn is declared
 * here from the table, so adding a checker is one table line plus its
 * function. */
#define AG_LAYOUT_CHECKER(a, b, fn, as_symbol, name) ag_status fn(ag_layout_ctx *lc, const ag_lanchor *x, const ag_lanchor *y);
#include "passes/layout_checkers.def"
#undef AG_LAYOUT_CHECKER

/* The registered rows (the table above) and their count. */
extern const ag_layout_checker_row ag_layout_checker_rows[];
extern const uint32_t ag_layout_checker_nrows;

/* ---- the engine (layout_conflict.c) ---- */

/* Runs Process (notes 4.1) on one static graph top with the given info and
 * checker table: symbols, marking, detection and solving, symbol by symbol.
 * Exposed for tests (their own checker tables) and the pass. */
ag_status ag_layout_process(ag_pass_env *env, ag_sub_id top, const ag_layout_info *info,
                            const ag_layout_checker_row *rows, uint32_t nrows);
/* Graph information of the processed graph top (see ag_layout_info). */
void ag_layout_info_of(const ag_pass_env *env, ag_sub_id top, ag_layout_info *info);
/* Static graph test of notes 4.1 (no node other than a NetOutput carries
 * _is_unknown_shape=true or _dynamic_shape_partitioned=true). */
bool ag_layout_sub_static(const ag_pass_env *env, ag_sub_id s);

/* ---- hypothetical merges (notes 4.9, used by the planner's in-place step) ----
 * Would symbols of t, united into one, carry a layout conflict the engine
 * would have to resolve?  The answer reruns marking's reference-output test
 * and detection (absolute sets and the checker table) over the anchors of
 * those symbols only, without changing t or the graph; solving never runs.
 * The checker allocates through ctx and borrows env (its graph and ops) and
 * t, which must outlive it;
 * top is the graph t was built for (its Data and NetOutput are user memory).
 * Creating it marks every anchor once (linear in the graph); each query
 * then costs the anchors of its symbols. */
typedef struct ag_layout_merge_checker ag_layout_merge_checker;

typedef struct ag_layout_merge_verdict {
    bool conflict;
    /* When conflict: the rule ("layout: <checker name>" or "layout: absolute
     * A x B"; valid until the next query), the pair of anchors whose check
     * found it and their attributes in the row that fired. */
    const char *rule;
    ag_lanchor a, b;
    ag_layout_attr attr_a, attr_b;
} ag_layout_merge_verdict;

ag_status ag_layout_merge_checker_create(ag_ctx *ctx, ag_pass_env *env, const ag_symtab *t, ag_sub_id top,
                                         ag_layout_merge_checker **out);
void ag_layout_merge_checker_destroy(ag_layout_merge_checker *mc);
/* syms: nsyms distinct symbol ids of t (list order: syms[0]'s anchors first,
 * the name of the merged symbol). */
ag_status ag_layout_merge_check(ag_layout_merge_checker *mc, const uint32_t *syms, uint32_t nsyms,
                                ag_layout_merge_verdict *v);

/* The registered pass (pipeline.c). */
ag_status ag_pass_layout_conflict(ag_pass_env *env);

/* ---- identities the layout code inserts (notes 4.8) ---- */

/* The name base "identity_<in idx>_<dst node>_MemLayoutConflict_<n>" into buf
 * (then made unique by the caller with ag_pass_unique_name). */
void ag_layout_identity_base(const ag_graph *g, ag_node_id dst, uint32_t in_idx, uint32_t n, char *buf, size_t cap);
/* Gives inserted node ident the layout-conflict attributes: no_need_constant_
 * folding=false, _cannot_be_deleted=true, _stream_label and _rts_label_node
 * from dst, _batch_label from src, moves _is_connected_to_data=true from dst
 * and _is_connected_to_netoutput=true from src onto ident.  src or dst may be
 * AG_NONE. */
ag_status ag_layout_identity_attrs(ag_pass_env *env, ag_node_id ident, ag_node_id src, ag_node_id dst);

/* ---- the control-flow pre-pass (notes 4.7; ctrl_node_conflict.c) ----
 * Run on each top static graph before Process.  Called by the pass once
 * AG_LAYOUT_HAVE_CTRL_PREPASS is 1. */
#define AG_LAYOUT_HAVE_CTRL_PREPASS 1
ag_status ag_layout_ctrl_node_prepass(ag_pass_env *env, ag_sub_id top);

#endif
