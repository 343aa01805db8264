/* ONNX import internals shared by onnx_import.c (the graph mapping) and
 * onnx_pb.c (protobuf unpacking through the context hook, tensors and
 * declared types).  The generated protobuf-c code lives in onnx.pb-c.h. */
#ifndef AG_ONNX_INTERNAL_H
#define AG_ONNX_INTERNAL_H

#include "core/internal.h"
#include "onnx.pb-c.h"

/* Largest serialized model accepted: protobuf's own 2 GiB message limit. */
#define AG_ONNX_MAX_BYTES ((size_t)INT32_MAX)
/* Deepest nesting of protobuf messages accepted (a subgraph costs three
 * levels: Graph -> Node -> Attribute); bounds every recursion of the import. */
#define AG_ONNX_MAX_DEPTH 96

/* protobuf-c allocator routed through the context hook.  protobuf-c frees
 * without a size, so each block carries a small size header. */
typedef struct ag_onnx_pb_alloc {
    ProtobufCAllocator pa;
    ag_ctx *ctx;
    bool oom; /* an allocation failed during the last unpack */
} ag_onnx_pb_alloc;

/* Unpacks a ModelProto (which must have a graph).  AG_EPARSE names file for
 * bytes that are not a ModelProto, AG_EUNSUPPORTED for too large or too deeply
 * nested input, AG_ENOMEM.  Free with ag_onnx_free_model. */
ag_status ag_onnx_unpack(ag_ctx *ctx, const void *buf, size_t len, const char *file,
                         ag_onnx_pb_alloc *pa, Onnx__ModelProto **out);
void ag_onnx_free_model(ag_onnx_pb_alloc *pa, Onnx__ModelProto *m);

/* Converts a TensorProto into a graph-owned tensor.  what names the tensor in
 * messages ("initializer 'w'", "attribute 'value' of node 'c' (Constant)"). */
ag_status ag_onnx_tensor(ag_graph *g, const char *file, const char *what, const Onnx__TensorProto *tp,
                         const ag_tensor **out);

/* A declared tensor type (rank AG_RANK_UNKNOWN when the type gives no shape,
 * dtype AG_DT_UNDEFINED when it gives no element type). */
typedef struct ag_onnx_type {
    ag_dtype dtype;
    int32_t rank;
    int64_t dims[AG_MAX_RANK];
} ag_onnx_type;

/* Reads a TypeProto (NULL = nothing declared).  Non-tensor types (sequence,
 * map, optional, sparse) are AG_EUNSUPPORTED; what names the value
 * ("input 'x' of graph 'main'"). */
ag_status ag_onnx_type_read(ag_ctx *ctx, const char *file, const char *what, const Onnx__TypeProto *tp,
                            ag_onnx_type *out);

/* Writes "f32[1,3,?]" ("?" for unknown dims, "[*]" for unknown rank; the
 * dtype part is left out for AG_DT_UNDEFINED), truncating to cap. */
void ag_onnx_fmt_shape(char *buf, size_t cap, ag_dtype dt, int32_t rank, const int64_t *dims);

#endif
