/* Shape inference internals: the per-op rule interface shared by the rule
 * families (infer_core.c: framework, shape/value ops, control flow;
 * infer_math.c: elementwise, NN, reductions, the rest of ONNX).
 * A rule reads input descriptors and node attributes and writes output
 * descriptors; it never changes edges. */
#ifndef AG_INFER_INTERNAL_H
#define AG_INFER_INTERNAL_H

#include "core/internal.h"

typedef struct ag_infer_node {
    ag_graph *g;
    ag_ctx *ctx;
    ag_node_id n;
    int64_t opset;   /* opset version of the node's domain (0 = unknown/latest) */
} ag_infer_node;

/* A rule returns AG_OK also when it could not decide a shape (outputs stay
 * unknown); AG_ESHAPE (via ag_inf_fail) only for contradictions. */
typedef ag_status (*ag_infer_fn)(ag_infer_node *in);

typedef struct ag_infer_rule {
    const char *op_type; /* ONNX op type (default domain) */
    ag_infer_fn fn;
} ag_infer_rule;

/* Rule tables, each terminated by {NULL, NULL}. */
extern const ag_infer_rule ag_infer_rules_core[];
extern const ag_infer_rule ag_infer_rules_math[];

/* Number of inputs, and input i's descriptor (NULL when i is out of range or
 * the input is an omitted optional input). */
uint32_t ag_inf_nin(const ag_infer_node *in);
uint32_t ag_inf_nout(const ag_infer_node *in);
const ag_tensor_desc *ag_inf_in(const ag_infer_node *in, uint32_t i);
/* Known constant value of input i (its descriptor's value), or NULL. */
const ag_tensor *ag_inf_in_value(const ag_infer_node *in, uint32_t i);
/* Sets output o's dtype and shape (rank may be AG_RANK_UNKNOWN). */
ag_status ag_inf_set_out(ag_infer_node *in, uint32_t o, ag_dtype dt, int32_t rank, const int64_t *dims);
/* Sets output o's type, shape and known value in one go (value dims = shape). */
ag_status ag_inf_set_out_value(ag_infer_node *in, uint32_t o, const ag_tensor *value);
/* Copies dtype and shape of input i to output o (value not copied). */
ag_status ag_inf_same_as_input(ag_infer_node *in, uint32_t o, uint32_t i);
/* Raises AG_ESHAPE with "node NAME (TYPE): message". */
ag_status ag_inf_fail(ag_infer_node *in, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Attribute access on the node being inferred. */
bool ag_inf_attr_int(const ag_infer_node *in, const char *name, int64_t *out);
int64_t ag_inf_attr_int_or(const ag_infer_node *in, const char *name, int64_t dflt);
float ag_inf_attr_float_or(const ag_infer_node *in, const char *name, float dflt);
bool ag_inf_attr_ints(const ag_infer_node *in, const char *name, const int64_t **v, uint32_t *n);
const char *ag_inf_attr_string_or(const ag_infer_node *in, const char *name, const char *dflt);
const ag_tensor *ag_inf_attr_tensor(const ag_infer_node *in, const char *name);

/* Multidirectional (numpy) broadcast of two shapes.  Unknown dims propagate as
 * AG_DIM_UNKNOWN; incompatible known dims return false.  out holds AG_MAX_RANK. */
bool ag_inf_broadcast(int32_t ra, const int64_t *a, int32_t rb, const int64_t *b, int32_t *rout, int64_t *out);
/* Normalises axis into [0, rank) (negative counts from the end); false if out of range. */
bool ag_inf_axis(int64_t axis, int32_t rank, int32_t *out);
/* Reads an integer tensor (i32/i64/u8... any integer dtype) into int64 values;
 * false when t is NULL, elided, non-integer or has more than cap elements. */
bool ag_inf_tensor_ints(const ag_tensor *t, int64_t *out, uint64_t cap, uint64_t *count);
/* Makes a small i64 tensor value (for value propagation). */
ag_status ag_inf_make_i64(ag_infer_node *in, int32_t rank, const int64_t *dims, const int64_t *vals,
                          const ag_tensor **out);

/* Largest value propagated as a constant (elements); bigger results keep shape only. */
#define AG_INFER_MAX_VALUE_ELEMS 4096


/* ---- additions: subgraph walks and partially known values ---- */

/* Infers every node of subgraph s in topological order.  Control-flow rules
 * call it after setting the subgraph's Data descriptors; it may be called
 * again for the same subgraph. */
ag_status ag_inf_run_sub(ag_infer_node *in, ag_sub_id s);
/* Same, for a second pass over a loop body: outputs of the subgraph's nodes are
 * reset to unknown before their rules run, so no first-pass shape survives. */
ag_status ag_inf_rerun_sub(ag_infer_node *in, ag_sub_id s);
/* Second pass over a branch that contradicted itself (it cannot be the one
 * that runs with these shapes): a rule's AG_ESHAPE only leaves that node's
 * outputs unknown, and inference goes on. */
ag_status ag_inf_run_sub_lenient(ag_infer_node *in, ag_sub_id s);

/* An element of a partially known integer value that is not known. */
#define AG_INF_UNKNOWN_ELEM INT64_MIN
/* Integer value of input i (scalar or 1-D) whose elements may be partly
 * unknown (AG_INF_UNKNOWN_ELEM): the full value when known, else what the
 * producer recorded with ag_inf_set_out_partial.  False when neither. */
bool ag_inf_in_partial(const ag_infer_node *in, uint32_t i, int64_t *out, uint64_t cap, uint64_t *count);
/* Records a partially known value of output o (at most AG_MAX_RANK elements,
 * set after the output's shape); a fully known one becomes the output's value. */
ag_status ag_inf_set_out_partial(ag_infer_node *in, uint32_t o, uint64_t count, const int64_t *vals);

#endif
