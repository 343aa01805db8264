/* ONNX import: a ModelProto becomes an ag_graph following DESIGN.md's mapping
 * (initializers and Constant -> Const, inputs -> Data, outputs -> NetOutput,
 * If -> If, Loop -> While, Scan -> Scan with subgraphs, captured outer values
 * -> explicit control-node inputs plus subgraph Data). */
#ifndef ALIASGUARD_ONNX_H
#define ALIASGUARD_ONNX_H

#include "graph.h"
#include "infer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the importer saw, for reports and tests (all counts over subgraphs too). */
typedef struct ag_onnx_report {
    size_t size;                   /* sizeof(ag_onnx_report) */
    int64_t ir_version;
    int64_t opset;                 /* default-domain opset import */
    uint32_t declared_filled;      /* anchors inference left unknown, filled from value_info/outputs */
    uint32_t declared_mismatches;  /* anchors where inferred and declared known shapes differ */
    char first_mismatch[256];      /* "node N output 0: inferred [..] declared [..]" or "" */
    ag_infer_stats infer;          /* stats of the inference run */
} ag_onnx_report;

typedef struct ag_onnx_opts {
    size_t size;                     /* sizeof(ag_onnx_opts) */
    const char *const *input_shapes; /* "NAME=d0,d1,..." bindings for dynamic dims */
    uint32_t n_input_shapes;
    bool infer_shapes;               /* run ag_infer_shapes after import */
    bool use_declared;               /* after inference, fill still-unknown anchors from the
                                        model's value_info/output types (never overrides) */
    ag_onnx_report *report;          /* optional out: filled on success */
    const char *const *input_values; /* "NAME=v" / "NAME=v0,v1,..." known input values
                                        (ag_infer_apply_value_binding), applied after
                                        input_shapes: a sample rate that selects a branch */
    uint32_t n_input_values;
} ag_onnx_opts;

ag_onnx_opts ag_onnx_defaults(void); /* no bindings, infer_shapes and use_declared true */

/* Imports a serialized ModelProto.  filename names the input in messages. */
ag_status ag_onnx_import(ag_ctx *ctx, const void *buf, size_t len, const char *filename,
                         const ag_onnx_opts *opts, ag_graph **out);
ag_status ag_onnx_import_file(ag_ctx *ctx, const char *path, const ag_onnx_opts *opts, ag_graph **out);

#ifdef __cplusplus
}
#endif
#endif
