/* Unit tests of the op semantics registry: the builtin table (every operator
 * type of the reference system and of ONNX), the ops-file loader and its
 * errors, per-node attribute overrides, the dump round trip and OOM sweeps. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strdup */
#include <stdio.h>
#include <time.h>

#include "support/agtest.h"

/* ---- helpers ---- */

static ag_ops *make_ops(ag_ctx *ctx)
{
    ag_ops *ops = NULL;
    assert_int_equal(ag_ops_create(ctx, &ops), AG_OK);
    assert_non_null(ops);
    return ops;
}

static char *dump_str(ag_ctx *ctx, const ag_ops *ops)
{
    ag_membuf mb;
    ag_membuf_init(&mb, ctx);
    assert_int_equal(ag_ops_dump(ops, ag_sink_membuf(&mb)), AG_OK);
    char *s = strdup(mb.data ? mb.data : "");
    ag_membuf_free(&mb);
    return s;
}

static const ag_op_info *must(const ag_ops *ops, const char *type, const char *domain)
{
    const ag_op_info *info = ag_ops_lookup(ops, type, domain);
    if (!info)
        fail_msg("op type %s (domain '%s') not in the registry", type, domain ? domain : "");
    return info;
}

static ag_status load_str(ag_ops *ops, const char *text)
{
    return ag_ops_load_text(ops, text, strlen(text), "t.ops");
}

/* ---- builtin table ---- */

static void test_builtin_kinds(void **state)
{
    (void)state;
    static const struct {
        const char *type;
        ag_op_kind kind;
    } cases[] = {
        {"Data", AG_OPK_DATA}, {"AippData", AG_OPK_DATA}, {"AnnData", AG_OPK_DATA},
        {"RefData", AG_OPK_REF_DATA}, {"Variable", AG_OPK_VARIABLE}, {"VariableV2", AG_OPK_VARIABLE},
        {"Const", AG_OPK_CONST}, {"Constant", AG_OPK_CONST},
        {"ConstPlaceHolder", AG_OPK_CONST_PLACEHOLDER}, {"FileConstant", AG_OPK_FILE_CONSTANT},
        {"NetOutput", AG_OPK_NETOUTPUT}, {"Identity", AG_OPK_IDENTITY},
        {"ReadVariableOp", AG_OPK_IDENTITY}, {"Assign", AG_OPK_ASSIGN}, {"AssignAdd", AG_OPK_ASSIGN},
        {"AssignSub", AG_OPK_ASSIGN}, {"AssignVariableOp", AG_OPK_ASSIGN},
        {"AssignAddVariableOp", AG_OPK_ASSIGN}, {"AssignSubVariableOp", AG_OPK_ASSIGN},
        {"HcomAllReduce", AG_OPK_COLLECTIVE}, {"HcomBroadcast", AG_OPK_COLLECTIVE},
        {"HcomAllGather", AG_OPK_COLLECTIVE}, {"HcomReduceScatter", AG_OPK_COLLECTIVE},
        {"HcomAllToAllV", AG_OPK_COLLECTIVE}, {"HcomSend", AG_OPK_COLLECTIVE},
        {"HcomReceive", AG_OPK_COLLECTIVE}, {"HcomReduce", AG_OPK_COLLECTIVE},
        {"If", AG_OPK_IF}, {"_If", AG_OPK_IF}, {"StatelessIf", AG_OPK_IF}, {"Case", AG_OPK_CASE},
        {"While", AG_OPK_WHILE}, {"_While", AG_OPK_WHILE}, {"StatelessWhile", AG_OPK_WHILE},
        {"PartitionedCall", AG_OPK_CALL}, {"Loop", AG_OPK_LOOP}, {"Scan", AG_OPK_LOOP},
        {"StreamSwitch", AG_OPK_CONTROL}, {"StreamActive", AG_OPK_CONTROL},
        {"LabelSwitchByIndex", AG_OPK_CONTROL}, {"LabelSet", AG_OPK_CONTROL},
        {"LabelGoto", AG_OPK_CONTROL}, {"Merge", AG_OPK_MERGE}, {"StreamMerge", AG_OPK_STREAM_MERGE},
        {"Switch", AG_OPK_SWITCH}, {"RefSwitch", AG_OPK_SWITCH}, {"SwitchN", AG_OPK_SWITCH},
        {"Enter", AG_OPK_CONTROL}, {"Exit", AG_OPK_CONTROL},
        {"NextIteration", AG_OPK_NEXT_ITERATION}, {"LoopCond", AG_OPK_LOOP_COND},
        {"MemcpyAsync", AG_OPK_MEMCPY}, {"MemcpyAddrAsync", AG_OPK_MEMCPY}, {"Memcpy", AG_OPK_MEMCPY},
        {"AtomicAddrClean", AG_OPK_ATOMIC_CLEAN}, {"MemSet", AG_OPK_ATOMIC_CLEAN},
        {"PointFromInputs", AG_OPK_POINT_FROM_INPUTS}, {"Reshape", AG_OPK_VIEW},
        {"Squeeze", AG_OPK_VIEW}, {"Unsqueeze", AG_OPK_VIEW}, {"Flatten", AG_OPK_VIEW},
        {"FlattenV2", AG_OPK_VIEW}, {"ExpandDims", AG_OPK_VIEW}, {"Bitcast", AG_OPK_VIEW},
        {"ReFormat", AG_OPK_VIEW}, {"SqueezeV2", AG_OPK_VIEW}, {"SqueezeV3", AG_OPK_VIEW},
        {"UnsqueezeV2", AG_OPK_VIEW}, {"UnsqueezeV3", AG_OPK_VIEW}, {"Shape", AG_OPK_SHAPE},
        {"ShapeN", AG_OPK_SHAPE}, {"Rank", AG_OPK_SHAPE}, {"Size", AG_OPK_SHAPE},
        {"NoOp", AG_OPK_NOOP}, {"PhonyConcat", AG_OPK_PHONY}, {"PhonySplit", AG_OPK_PHONY},
        {"Relu", AG_OPK_COMPUTE}, {"MatMul", AG_OPK_COMPUTE}, {"ApplyMomentum", AG_OPK_COMPUTE},
        {"ReluGrad", AG_OPK_COMPUTE}, {"SparseSoftmaxCrossEntropyWithLogits", AG_OPK_COMPUTE},
        {"LayerNormGrad", AG_OPK_COMPUTE},
    };
    ag_ctx *ctx = agtest_ctx();
    ag_ops *ops = make_ops(ctx);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const ag_op_info *info = must(ops, cases[k].type, NULL);
        if (ag_op_info_kind(info) != cases[k].kind)
            fail_msg("%s: kind %s, expected %s", cases[k].type, ag_op_kind_name(ag_op_info_kind(info)),
                     ag_op_kind_name(cases[k].kind));
        assert_string_equal(ag_op_info_type(info), cases[k].type);
        assert_string_equal(ag_op_info_file(info), "<builtin>");
        assert_true(ag_op_info_line(info) > 0);
    }
    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
}

static void test_builtin_properties(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_ops *ops = make_ops(ctx);
    uint32_t in = 99;

    /* Assign: input 0 written in place, output 0 is that input. */
    const ag_op_info *i = must(ops, "Assign", NULL);
    assert_int_equal(ag_op_info_input_access(i, 0), AG_ACC_WRITEABLE);
    assert_int_equal(ag_op_info_input_access(i, 1), AG_ACC_RO);
    assert_int_equal(ag_op_info_output_rel(i, 0, &in), AG_REL_REF);
    assert_int_equal(in, 0);
    assert_true(ag_op_info_flags(i) & AG_OPF_SIDE_EFFECTS);
    assert_int_equal(ag_op_info_input_access(must(ops, "AssignVariableOp", NULL), 0), AG_ACC_WRITEABLE);

    /* ApplyMomentum: var and accum written. */
    i = must(ops, "ApplyMomentum", NULL);
    assert_int_equal(ag_op_info_input_access(i, 0), AG_ACC_WRITEABLE);
    assert_int_equal(ag_op_info_input_access(i, 1), AG_ACC_WRITEABLE);
    assert_int_equal(ag_op_info_input_access(i, 2), AG_ACC_RO);
    assert_int_equal(ag_op_info_output_rel(i, 0, &in), AG_REL_REF);
    assert_int_equal(in, 0);

    /* Collectives. */
    i = must(ops, "HcomAllReduce", NULL);
    uint32_t f = ag_op_info_flags(i);
    assert_true(f & AG_OPF_CONTINUOUS_INPUT);
    assert_true(f & AG_OPF_HCCL);
    assert_true(f & AG_OPF_ATOMIC);
    assert_int_equal(ag_op_info_input_access(i, 0), AG_ACC_SCOPE_WRITEABLE);
    assert_int_equal(ag_op_info_input_access(i, 7), AG_ACC_SCOPE_WRITEABLE);
    assert_int_equal(ag_op_info_output_rel(i, 0, &in), AG_REL_FRESH);
    assert_true(ag_op_info_output_flags(i, 3) & AG_OPA_ATOMIC);
    assert_int_equal(ag_op_info_input_access(must(ops, "HcomBroadcast", NULL), 1), AG_ACC_SCOPE_WRITEABLE);
    i = must(ops, "HcomAllGather", NULL);
    assert_int_equal(ag_op_info_input_access(i, 0), AG_ACC_RO);
    assert_false(ag_op_info_flags(i) & AG_OPF_ATOMIC);

    /* Views, shape-only, copies. */
    i = must(ops, "Reshape", NULL);
    assert_int_equal(ag_op_info_output_rel(i, 0, &in), AG_REL_VIEW);
    assert_int_equal(in, 0);
    assert_int_equal(ag_op_info_input_access(i, 0), AG_ACC_RO);
    assert_int_equal(ag_op_info_output_rel(must(ops, "UnsqueezeV3", NULL), 0, &in), AG_REL_VIEW);
    assert_true(ag_op_info_flags(must(ops, "Shape", NULL)) & AG_OPF_SHAPE_ONLY);
    assert_true(ag_op_info_flags(must(ops, "Size", NULL)) & AG_OPF_SHAPE_ONLY);
    assert_false(ag_op_info_flags(must(ops, "Relu", NULL)) & AG_OPF_SHAPE_ONLY);
    /* Identity separates addresses: never an alias. */
    assert_int_equal(ag_op_info_output_rel(must(ops, "Identity", NULL), 0, &in), AG_REL_FRESH);
    assert_int_equal(ag_op_info_output_rel(must(ops, "MemcpyAsync", NULL), 0, &in), AG_REL_FRESH);

    /* Pass-through. */
    i = must(ops, "NetOutput", NULL);
    assert_int_equal(ag_op_info_output_rel(i, 3, &in), AG_REL_PASS);
    assert_int_equal(in, 3);
    i = must(ops, "While", NULL);
    assert_int_equal(ag_op_info_output_rel(i, 2, &in), AG_REL_PASS);
    assert_int_equal(in, 2);
    assert_int_equal(ag_op_info_input_access(i, 1), AG_ACC_SCOPE_WRITEABLE);
    assert_int_equal(ag_op_info_output_rel(must(ops, "PointFromInputs", NULL), 1, &in), AG_REL_PASS);
    assert_int_equal(in, 1);
    i = must(ops, "Merge", NULL);
    assert_int_equal(ag_op_info_output_rel(i, 0, &in), AG_REL_VIEW);
    assert_int_equal(ag_op_info_output_rel(i, 1, &in), AG_REL_FRESH);

    /* RefSwitch writes input 0 and every output refers to it. */
    i = must(ops, "RefSwitch", NULL);
    assert_int_equal(ag_op_info_input_access(i, 0), AG_ACC_WRITEABLE);
    assert_int_equal(ag_op_info_output_rel(i, 1, &in), AG_REL_REF);
    assert_int_equal(in, 0);

    /* Fixed addresses. */
    f = ag_op_info_flags(must(ops, "StreamSwitch", NULL));
    assert_true((f & AG_OPF_UNREFRESHABLE) && (f & AG_OPF_FIXED_ADDR));
    f = ag_op_info_flags(must(ops, "LabelSwitchByIndex", NULL));
    assert_true((f & AG_OPF_UNREFRESHABLE) && (f & AG_OPF_FIXED_ADDR));
    assert_false(ag_op_info_flags(must(ops, "StreamActive", NULL)) & AG_OPF_FIXED_ADDR);

    /* Phony concat/split. */
    f = ag_op_info_flags(must(ops, "PhonyConcat", NULL));
    assert_true((f & AG_OPF_NOPAD_CONTINUOUS_INPUT) && (f & AG_OPF_OUTPUT_REUSE_INPUT));
    f = ag_op_info_flags(must(ops, "PhonySplit", NULL));
    assert_true((f & AG_OPF_NOPAD_CONTINUOUS_OUTPUT) && (f & AG_OPF_OUTPUT_REUSE_INPUT));

    /* Unknown types: not found; the default entry is conservative-by-reference. */
    assert_null(ag_ops_lookup(ops, "NoSuchOp", NULL));
    const ag_op_info *d = ag_ops_default(ops);
    assert_string_equal(ag_op_info_type(d), "*");
    assert_int_equal(ag_op_info_kind(d), AG_OPK_UNKNOWN);
    assert_true(ag_op_info_flags(d) & AG_OPF_SIDE_EFFECTS);
    assert_int_equal(ag_op_info_input_access(d, 0), AG_ACC_RO);
    assert_int_equal(ag_op_info_output_rel(d, 0, &in), AG_REL_FRESH);

    /* Memory types default to "not said". */
    bool expl = true;
    assert_int_equal(ag_op_info_output_mem_type(must(ops, "Relu", NULL), 0, &expl), AG_MEM_HBM);
    assert_false(expl);

    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
}

/* Every (domain, op type) used by the ONNX node tests of libonnx-testdata
 * (directory /usr/share/libonnx-testdata/data/node, op_type of every node of
 * every model.onnx including subgraphs). */
static const struct {
    const char *domain, *type;
} onnx_testdata_ops[] = {
    {"", "Abs"}, {"", "Acos"}, {"", "Acosh"}, {"", "Add"}, {"", "And"}, {"", "ArgMax"},
    {"", "ArgMin"}, {"", "Asin"}, {"", "Asinh"}, {"", "Atan"}, {"", "Atanh"}, {"", "AveragePool"},
    {"", "BatchNormalization"}, {"", "Bernoulli"}, {"", "BitShift"}, {"", "BlackmanWindow"},
    {"", "Cast"}, {"", "CastLike"}, {"", "Ceil"}, {"", "Celu"}, {"", "Clip"}, {"", "Compress"},
    {"", "Concat"}, {"", "Constant"}, {"", "ConstantOfShape"}, {"", "Conv"}, {"", "ConvInteger"},
    {"", "ConvTranspose"}, {"", "Cos"}, {"", "Cosh"}, {"", "CumSum"}, {"", "DFT"},
    {"", "DepthToSpace"}, {"", "DequantizeLinear"}, {"", "Det"}, {"", "Div"}, {"", "Dropout"},
    {"", "DynamicQuantizeLinear"}, {"", "Einsum"}, {"", "Elu"}, {"", "Equal"}, {"", "Erf"},
    {"", "Exp"}, {"", "Expand"}, {"", "EyeLike"}, {"", "Flatten"}, {"", "Floor"}, {"", "GRU"},
    {"", "Gather"}, {"", "GatherElements"}, {"", "GatherND"}, {"", "Gemm"},
    {"", "GlobalAveragePool"}, {"", "GlobalMaxPool"}, {"", "Greater"}, {"", "GreaterOrEqual"},
    {"", "GridSample"}, {"", "HammingWindow"}, {"", "HannWindow"}, {"", "HardSigmoid"},
    {"", "HardSwish"}, {"", "Hardmax"}, {"", "Identity"}, {"", "If"}, {"", "InstanceNormalization"},
    {"", "IsInf"}, {"", "IsNaN"}, {"", "LRN"}, {"", "LSTM"}, {"", "LayerNormalization"},
    {"", "LeakyRelu"}, {"", "Less"}, {"", "LessOrEqual"}, {"", "Log"}, {"", "LogSoftmax"},
    {"", "Loop"}, {"", "MatMul"}, {"", "MatMulInteger"}, {"", "Max"}, {"", "MaxPool"},
    {"", "MaxUnpool"}, {"", "Mean"}, {"", "MeanVarianceNormalization"}, {"", "MelWeightMatrix"},
    {"", "Min"}, {"", "Mod"}, {"", "Mul"}, {"", "Neg"}, {"", "NegativeLogLikelihoodLoss"},
    {"", "NonMaxSuppression"}, {"", "NonZero"}, {"", "Not"}, {"", "OneHot"}, {"", "Optional"},
    {"", "OptionalGetElement"}, {"", "OptionalHasElement"}, {"", "Or"}, {"", "PRelu"}, {"", "Pad"},
    {"", "Pow"}, {"", "QLinearConv"}, {"", "QLinearMatMul"}, {"", "QuantizeLinear"}, {"", "RNN"},
    {"", "RandomUniformLike"}, {"", "Range"}, {"", "Reciprocal"}, {"", "ReduceL1"},
    {"", "ReduceL2"}, {"", "ReduceLogSum"}, {"", "ReduceLogSumExp"}, {"", "ReduceMax"},
    {"", "ReduceMean"}, {"", "ReduceMin"}, {"", "ReduceProd"}, {"", "ReduceSum"},
    {"", "ReduceSumSquare"}, {"", "Relu"}, {"", "Reshape"}, {"", "Resize"}, {"", "ReverseSequence"},
    {"", "RoiAlign"}, {"", "Round"}, {"", "STFT"}, {"", "Scan"}, {"", "Scatter"},
    {"", "ScatterElements"}, {"", "ScatterND"}, {"", "Selu"}, {"", "SequenceAt"},
    {"", "SequenceConstruct"}, {"", "SequenceEmpty"}, {"", "SequenceInsert"},
    {"", "SequenceLength"}, {"", "SequenceMap"}, {"", "Shape"}, {"", "Shrink"}, {"", "Sigmoid"},
    {"", "Sign"}, {"", "Sin"}, {"", "Sinh"}, {"", "Size"}, {"", "Slice"}, {"", "Softmax"},
    {"", "SoftmaxCrossEntropyLoss"}, {"", "Softplus"}, {"", "Softsign"}, {"", "SpaceToDepth"},
    {"", "Split"}, {"", "Sqrt"}, {"", "Squeeze"}, {"", "StringNormalizer"}, {"", "Sub"},
    {"", "Sum"}, {"", "Tan"}, {"", "Tanh"}, {"", "TfIdfVectorizer"}, {"", "ThresholdedRelu"},
    {"", "Tile"}, {"", "TopK"}, {"", "Transpose"}, {"", "Trilu"}, {"", "Unique"}, {"", "Unsqueeze"},
    {"", "Upsample"}, {"", "Where"}, {"", "Xor"}, {"ai.onnx.preview.training", "Adagrad"},
    {"ai.onnx.preview.training", "Adam"}, {"ai.onnx.preview.training", "Momentum"},
};

/* Standard ONNX operators newer than the test data (opset 18+). */
static const char *const onnx_newer_ops[] = {
    "AffineGrid", "Attention", "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "CenterCropPad",
    "Col2Im", "ConcatFromSequence", "DeformConv", "Gelu", "GlobalLpPool", "GroupNormalization",
    "ImageDecoder", "LpNormalization", "LpPool", "MaxRoiPool", "Mish", "Multinomial", "RandomNormal",
    "RandomNormalLike", "RandomUniform", "RegexFullMatch", "RMSNormalization", "RotaryEmbedding",
    "SequenceErase", "SplitToSequence", "StringConcat", "StringSplit", "Swish", "TensorScatter",
};

static void test_onnx_ops_known(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_ops *ops = make_ops(ctx);
    size_t n = sizeof onnx_testdata_ops / sizeof onnx_testdata_ops[0];
    assert_true(n >= 170);
    for (size_t k = 0; k < n; k++) {
        const ag_op_info *info = must(ops, onnx_testdata_ops[k].type, onnx_testdata_ops[k].domain);
        assert_int_not_equal(ag_op_info_kind(info), AG_OPK_UNKNOWN);
    }
    for (size_t k = 0; k < sizeof onnx_newer_ops / sizeof onnx_newer_ops[0]; k++)
        must(ops, onnx_newer_ops[k], "ai.onnx");
    /* ONNX names shared with the reference system keep its semantics. */
    assert_int_equal(ag_op_info_kind(must(ops, "Identity", "")), AG_OPK_IDENTITY);
    assert_int_equal(ag_op_info_kind(must(ops, "Flatten", "ai.onnx")), AG_OPK_VIEW);
    assert_int_equal(ag_op_info_kind(must(ops, "Size", "")), AG_OPK_SHAPE);
    assert_int_equal(ag_op_info_kind(must(ops, "TreeEnsembleClassifier", "ai.onnx.ml")), AG_OPK_COMPUTE);
    /* Domain-qualified entries do not leak into other domains. */
    assert_null(ag_ops_lookup(ops, "Adam", NULL));
    assert_null(ag_ops_lookup(ops, "ZipMap", "com.example"));
    assert_non_null(ag_ops_lookup(ops, "Relu", "com.example")); /* any-domain entry */
    /* Random generators keep their hidden state. */
    assert_true(ag_op_info_flags(must(ops, "RandomUniformLike", NULL)) & AG_OPF_SIDE_EFFECTS);
    assert_true(ag_op_info_flags(must(ops, "Bernoulli", NULL)) & AG_OPF_SIDE_EFFECTS);
    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_builtin_load_time(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    enum { N = 20 };
    double t0 = now_s();
    for (int k = 0; k < N; k++)
        ag_ops_destroy(make_ops(ctx));
    double per = (now_s() - t0) / N;
    ag_ops *ops = make_ops(ctx);
    printf("builtin registry: %u entries, create+destroy %.1f us\n", ag_ops_count(ops), per * 1e6);
    assert_true(ag_ops_count(ops) > 300);
    /* Generous bound: sanitizer and debug builds included. */
    assert_true(per < 0.05);
    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
}

/* ---- name tables ---- */

static void test_names(void **state)
{
    (void)state;
    for (int k = 0; k < AG_OPK_COUNT_; k++) {
        const char *name = ag_op_kind_name((ag_op_kind)k);
        assert_non_null(name);
        ag_op_kind back;
        assert_true(ag_op_kind_parse(name, strlen(name), &back));
        assert_int_equal(back, k);
    }
    assert_null(ag_op_kind_name(AG_OPK_COUNT_));
    assert_false(ag_op_kind_parse("views", 5, &(ag_op_kind){0}));
    for (int k = 0; k < AG_ACC_COUNT_; k++) {
        ag_op_access back;
        const char *name = ag_op_access_name((ag_op_access)k);
        assert_true(ag_op_access_parse(name, strlen(name), &back));
        assert_int_equal(back, k);
    }
    assert_string_equal(ag_op_access_name(AG_ACC_SCOPE_WRITEABLE), "scope-writeable");
    assert_string_equal(ag_op_rel_name(AG_REL_PASS), "pass");
    assert_null(ag_op_rel_name(AG_REL_COUNT_));
    assert_string_equal(ag_op_flag_name(AG_OPF_NOPAD_CONTINUOUS_INPUT), "nopad-continuous-input");
    assert_null(ag_op_flag_name(AG_OPF_ATOMIC | AG_OPF_HCCL));
    assert_string_equal(ag_op_anchor_flag_name(AG_OPA_UNREFRESHABLE), "unrefreshable");

    char buf[64];
    assert_int_equal(ag_op_flags_format(0, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    size_t need = ag_op_flags_format(AG_OPF_ATOMIC | AG_OPF_CONTINUOUS_INPUT | AG_OPF_HCCL, buf, sizeof buf);
    assert_string_equal(buf, "continuous-input,atomic,hccl");
    assert_int_equal(need, strlen("continuous-input,atomic,hccl"));
    char small[10];
    need = ag_op_flags_format(AG_OPF_ATOMIC | AG_OPF_CONTINUOUS_INPUT, small, sizeof small);
    assert_int_equal(need, strlen("continuous-input,atomic"));
    assert_true(strlen(small) < sizeof small);

    assert_true(ag_op_kind_is_data_like(AG_OPK_REF_DATA) && ag_op_kind_is_var_like(AG_OPK_REF_DATA));
    assert_false(ag_op_kind_is_var_like(AG_OPK_DATA));
    assert_true(ag_op_kind_is_const_like(AG_OPK_FILE_CONSTANT));
    assert_false(ag_op_kind_is_const_like(AG_OPK_VARIABLE));
    assert_true(ag_op_kind_has_subgraphs(AG_OPK_WHILE) && !ag_op_kind_has_subgraphs(AG_OPK_MERGE));
}

/* ---- user files ---- */

static void test_user_file(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_ops *ops = make_ops(ctx);
    uint32_t before = ag_ops_count(ops);
    const char *text =
        "# user additions\n"
        "MyAllReduce : like=HcomAllReduce in0=mem:p2p\n"
        "\n"
        "MyAssign MyAssign2 :\n"
        "  kind=assign\n"
        "    # comment inside an entry\n"
        "  out1=ref:2 in*=scope-writeable out0=inplace:1,mem:host\n"
        "Identity : kind=view out0=view:0   # later entries override earlier ones\n"
        "Relu@com.acme : kind=view out0=view:0\n"
        "HcomBroadcast : like=HcomBroadcast no-continuous-input out*=atomic\n"
        "%domain com.acme\n"
        "Gelu2 Relu6@* :\n"
        "%domain *\n"
        "Fancy:shape-only out*=pass out1=fresh\n";
    assert_int_equal(load_str(ops, text), AG_OK);
    uint32_t in;
    bool expl;

    const ag_op_info *i = must(ops, "MyAllReduce", NULL);
    assert_int_equal(ag_op_info_kind(i), AG_OPK_COLLECTIVE);
    assert_true(ag_op_info_flags(i) & AG_OPF_CONTINUOUS_INPUT);
    assert_int_equal(ag_op_info_input_access(i, 0), AG_ACC_SCOPE_WRITEABLE); /* field from in* */
    assert_int_equal(ag_op_info_input_mem_type(i, 0, &expl), AG_MEM_P2P);
    assert_true(expl);
    assert_int_equal(ag_op_info_input_mem_type(i, 1, &expl), AG_MEM_HBM);
    assert_false(expl);
    assert_string_equal(ag_op_info_file(i), "t.ops");
    assert_int_equal(ag_op_info_line(i), 2);

    i = must(ops, "MyAssign2", NULL);
    assert_int_equal(ag_op_info_line(i), 4);
    assert_int_equal(ag_op_info_kind(i), AG_OPK_ASSIGN);
    assert_int_equal(ag_op_info_output_rel(i, 1, &in), AG_REL_REF);
    assert_int_equal(in, 2);
    /* ref:2 makes input 2 writeable although in* says scope-writeable */
    assert_int_equal(ag_op_info_input_access(i, 2), AG_ACC_WRITEABLE);
    assert_int_equal(ag_op_info_input_access(i, 0), AG_ACC_SCOPE_WRITEABLE);
    assert_true(ag_op_info_output_inplace(i, 0, &in));
    assert_int_equal(in, 1);
    assert_false(ag_op_info_output_inplace(i, 1, &in));
    assert_int_equal(ag_op_info_output_mem_type(i, 0, &expl), AG_MEM_HOST);

    assert_int_equal(ag_op_info_output_rel(must(ops, "Identity", NULL), 0, &in), AG_REL_VIEW);
    assert_int_equal(ag_op_info_kind(must(ops, "Relu", "com.acme")), AG_OPK_VIEW);
    assert_int_equal(ag_op_info_kind(must(ops, "Relu", NULL)), AG_OPK_COMPUTE);
    assert_string_equal(ag_op_info_domain(must(ops, "Relu", "com.acme")), "com.acme");
    assert_null(ag_op_info_domain(must(ops, "Relu", NULL)));

    i = must(ops, "HcomBroadcast", NULL);
    assert_false(ag_op_info_flags(i) & AG_OPF_CONTINUOUS_INPUT);
    assert_true(ag_op_info_flags(i) & AG_OPF_HCCL);
    assert_true(ag_op_info_output_flags(i, 0) & AG_OPA_ATOMIC);
    assert_int_equal(ag_op_info_input_access(i, 0), AG_ACC_SCOPE_WRITEABLE);

    assert_non_null(ag_ops_lookup(ops, "Gelu2", "com.acme"));
    assert_null(ag_ops_lookup(ops, "Gelu2", NULL));
    assert_non_null(ag_ops_lookup(ops, "Relu6", "org.other"));

    i = must(ops, "Fancy", NULL);
    assert_true(ag_op_info_flags(i) & AG_OPF_SHAPE_ONLY);
    assert_int_equal(ag_op_info_output_rel(i, 0, &in), AG_REL_PASS);
    assert_int_equal(ag_op_info_output_rel(i, 1, &in), AG_REL_FRESH);
    assert_int_equal(ag_op_info_output_rel(i, 2, &in), AG_REL_PASS);
    assert_int_equal(in, 2);

    /* Identity and HcomBroadcast were overridden, not added. */
    assert_int_equal(ag_ops_count(ops), before + 7);

    /* The default entry can be made conservative, also with a %domain in
     * force, which it ignores: it stays the default entry, with no domain,
     * and the dump of the registry loads again. */
    assert_int_equal(load_str(ops, "%domain com.acme\n* : kind=unknown side-effects in*=scope-writeable\n"), AG_OK);
    assert_int_equal(ag_op_info_input_access(ag_ops_default(ops), 3), AG_ACC_SCOPE_WRITEABLE);
    assert_null(ag_op_info_domain(ag_ops_default(ops)));
    assert_int_equal(ag_ops_count(ops), before + 7);
    char *dump = dump_str(ctx, ops);
    assert_null(strstr(dump, "*@"));
    ag_ops *again = make_ops(ctx);
    assert_int_equal(load_str(again, dump), AG_OK);
    ag_ops_destroy(again);
    free(dump);
    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
}

static void test_load_file(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_ops *ops = make_ops(ctx);
    char path[256];
    snprintf(path, sizeof path, "%s/test_ops_user.ops", AG_BINARY_DIR);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("FromFile : kind=noop\nBad : in0=ro,\n", f);
    fclose(f);
    assert_int_equal(ag_ops_load_file(ops, path), AG_EPARSE);
    char want[320];
    snprintf(want, sizeof want, "%s:2:14: empty value in list", path);
    assert_string_equal(ag_ctx_errmsg(ctx), want);
    assert_null(ag_ops_lookup(ops, "FromFile", NULL));
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("FromFile : kind=noop\n", f);
    fclose(f);
    assert_int_equal(ag_ops_load_file(ops, path), AG_OK);
    assert_string_equal(ag_op_info_file(must(ops, "FromFile", NULL)), path);
    remove(path);
    assert_int_not_equal(ag_ops_load_file(ops, path), AG_OK);
    assert_errmsg(ctx, path);
    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
}

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"Foo : kind=bogus\n", "t.ops:1:12: unknown kind 'bogus'"},
        {"Foo : bogus\n", "t.ops:1:7: unknown property 'bogus'"},
        {"Foo : in0=ro in0=writeable\n", "t.ops:1:14: duplicate property 'in0'"},
        {"Foo : in9999=ro\n", "t.ops:1:9: index 9999 out of range (at most 4095)"},
        {"Foo : out0=ref:x\n", "t.ops:1:16: bad index 'x'"},
        {"\n# c\nFoo : kind=view\n  out0=view:0 out0=fresh\n", "t.ops:4:15: duplicate property 'out0'"},
        {"Foo Bar\nBaz :\n", "t.ops:1:5: expected ':' after the operator types"},
        {"Foo Bar", "t.ops:1:5: expected ':' after the operator types"},
        {"Foo kind=view\n", "t.ops:1:9: invalid character in operator type 'kind=view'"},
        {"  in0=ro\n", "t.ops:1:3: continuation line outside an entry (an entry starts in column 1)"},
        {"Foo : like=Nope\n", "t.ops:1:12: like= names an unknown operator 'Nope'"},
        {"Foo : out0=ref:0,view:1\n", "t.ops:1:18: conflicting output relation 'view:1'"},
        {"Foo : in0=ref:0\n", "t.ops:1:11: unknown input property 'ref:0'"},
        {"Foo : out0=ro\n", "t.ops:1:12: unknown output property 'ro'"},
        {"Foo : in1=ro,writeable\n", "t.ops:1:14: conflicting access 'writeable'"},
        {"Foo : atomic no-atomic\n", "t.ops:1:14: conflicting property 'no-atomic'"},
        {"Foo : atomic atomic\n", "t.ops:1:14: duplicate property 'atomic'"},
        {"Foo : subgraphs\n", "t.ops:1:7: property is derived per node and cannot be written 'subgraphs'"},
        {"%bogus\n", "t.ops:1:2: unknown directive 'bogus'"},
        {"%domain\n", "t.ops:1:2: %domain takes one domain name (or *)"},
        {"Foo@ : \n", "t.ops:1:5: missing domain after '@'"},
        {"*@x : \n", "t.ops:1:2: the default entry '*' cannot have a domain"},
        {"Foo : out0=mem:gpu\n", "t.ops:1:16: unknown memory type 'gpu'"},
        {"Fo\x01o : \n", "t.ops:1:3: invalid character (byte 0x01)"},
        {"Foo : kind=view kind=view\n", "t.ops:1:17: duplicate property 'kind'"},
        {"Foo : out0=view\n", "t.ops:1:12: expected view:<input index>"},
        {"Foo : out0=pass:1\n", "t.ops:1:12: value takes no index 'pass:1'"},
        {": kind=view\n", "t.ops:1:1: entry has no operator type"},
        {"Foo : in=ro\n", "t.ops:1:7: unknown property 'in'"},
        {"Ok : \nFoo : out0=\n", "t.ops:2:12: missing value after '='"},
    };
    ag_ctx *ctx = agtest_ctx();
    ag_ops *ops = make_ops(ctx);
    uint32_t count = ag_ops_count(ops);
    const ag_op_info *relu = must(ops, "Relu", NULL);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ag_status st = load_str(ops, cases[k].text);
        if (st != AG_EPARSE)
            fail_msg("case %zu: status %s", k, ag_status_str(st));
        if (strcmp(ag_ctx_errmsg(ctx), cases[k].msg) != 0)
            fail_msg("case %zu: message\n  got  '%s'\n  want '%s'", k, ag_ctx_errmsg(ctx), cases[k].msg);
        /* The registry is unchanged. */
        assert_int_equal(ag_ops_count(ops), count);
        assert_null(ag_ops_lookup(ops, "Foo", NULL));
        assert_null(ag_ops_lookup(ops, "Ok", NULL));
        assert_ptr_equal(ag_ops_lookup(ops, "Relu", NULL), relu);
    }
    /* Empty text and comments only are fine. */
    assert_int_equal(ag_ops_load_text(ops, NULL, 0, NULL), AG_OK);
    assert_int_equal(load_str(ops, "# nothing\n\n   \n"), AG_OK);
    assert_int_equal(ag_ops_count(ops), count);
    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
}

/* ---- dump ---- */

static void test_dump_round_trip(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_ops *a = make_ops(ctx);
    assert_int_equal(load_str(a, "X@com.acme Y : like=Assign out2=reuse:1,unrefreshable in*=mem:host\n"
                                 "Z : like=While no-side-effects continuous-output in3=atomic\n"
                                 "W@ai.onnx : kind=phony\n"),
                     AG_OK);
    char *t1 = dump_str(ctx, a);
    assert_non_null(strstr(t1, "\nAssign : kind=assign side-effects in0=writeable out0=ref:0\n"));
    assert_non_null(strstr(t1, "\nX@com.acme : kind=assign side-effects in*=mem:host in0=writeable "
                               "out0=ref:0 out2=reuse:1,unrefreshable\n"));
    assert_non_null(strstr(t1, "\nW@ai.onnx : kind=phony\n"));
    assert_non_null(strstr(t1, "\nNetOutput : kind=netoutput side-effects out*=pass\n"));
    ag_ops *b = make_ops(ctx);
    assert_int_equal(load_str(b, t1), AG_OK);
    char *t2 = dump_str(ctx, b);
    assert_string_equal(t1, t2);
    assert_int_equal(ag_ops_count(a), ag_ops_count(b));
    for (uint32_t k = 0; k < ag_ops_count(a); k++) {
        const ag_op_info *x = ag_ops_at(a, k), *y = ag_ops_at(b, k);
        assert_string_equal(ag_op_info_type(x), ag_op_info_type(y));
        assert_int_equal(ag_op_info_kind(x), ag_op_info_kind(y));
        assert_int_equal(ag_op_info_flags(x), ag_op_info_flags(y));
    }
    assert_null(ag_ops_at(a, ag_ops_count(a)));
    assert_non_null(ag_ops_lookup(b, "W", ""));
    free(t1);
    free(t2);
    ag_ops_destroy(a);
    ag_ops_destroy(b);
    ag_ctx_destroy(ctx);
}

/* ---- node level ---- */

static ag_attrs *nattrs(ag_graph *g, ag_node_id n)
{
    return ag_node_attrs(g, n);
}

static void set_ints(ag_graph *g, ag_node_id n, const char *name, const int64_t *v, uint32_t count)
{
    assert_int_equal(ag_attrs_set_ints(g, nattrs(g, n), name, v, count), AG_OK);
}

static void name_in(ag_graph *g, ag_node_id n, uint32_t i, const char *name)
{
    assert_int_equal(ag_desc_set_name(g, ag_node_input_desc(g, n, i), name), AG_OK);
}

static void name_out(ag_graph *g, ag_node_id n, uint32_t o, const char *name)
{
    assert_int_equal(ag_desc_set_name(g, ag_node_output_desc(g, n, o), name), AG_OK);
}

static void test_node_access_overrides(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_ops *ops = make_ops(ctx);
    ag_graph *g;
    assert_int_equal(ag_graph_create(ctx, "g", &g), AG_OK);

    ag_node_id as = agtest_node(g, AG_ROOT, "Assign", "as", 2, 1);
    assert_int_equal(ag_ops_node_kind(ops, g, as), AG_OPK_ASSIGN);
    assert_int_equal(ag_ops_input_access(ops, g, as, 0), AG_ACC_WRITEABLE);
    assert_int_equal(ag_ops_input_access(ops, g, as, 1), AG_ACC_RO);
    assert_int_equal(ag_ops_input_access(ops, g, as, 2), AG_ACC_RO); /* out of range */

    /* _input_mutable: bool, list, and false removing the table's scope-writeability */
    ag_node_id ar = agtest_node(g, AG_ROOT, "HcomAllReduce", "ar", 2, 2);
    assert_int_equal(ag_ops_input_access(ops, g, ar, 1), AG_ACC_SCOPE_WRITEABLE);
    assert_int_equal(ag_attrs_set_bool(g, nattrs(g, ar), "_input_mutable", false), AG_OK);
    assert_int_equal(ag_ops_input_access(ops, g, ar, 0), AG_ACC_RO);
    int64_t one = 1;
    set_ints(g, ar, "_input_mutable", &one, 1);
    assert_int_equal(ag_ops_input_access(ops, g, ar, 0), AG_ACC_RO);
    assert_int_equal(ag_ops_input_access(ops, g, ar, 1), AG_ACC_SCOPE_WRITEABLE);
    ag_node_id relu = agtest_node(g, AG_ROOT, "Relu", "relu", 1, 1);
    assert_int_equal(ag_ops_input_access(ops, g, relu, 0), AG_ACC_RO);
    assert_int_equal(ag_attrs_set_bool(g, nattrs(g, relu), "_input_mutable", true), AG_OK);
    assert_int_equal(ag_ops_input_access(ops, g, relu, 0), AG_ACC_SCOPE_WRITEABLE);
    /* _input_mutable wins over a ref input, as in the reference */
    assert_int_equal(ag_attrs_set_bool(g, nattrs(g, as), "_input_mutable", true), AG_OK);
    assert_int_equal(ag_ops_input_access(ops, g, as, 0), AG_ACC_SCOPE_WRITEABLE);

    /* _special_input_size on the input descriptor */
    ag_node_id mm = agtest_node(g, AG_ROOT, "MatMul", "mm", 2, 1);
    assert_int_equal(ag_attrs_set_int(g, ag_node_input_desc(g, mm, 1)->attrs, "_special_input_size", 64), AG_OK);
    assert_int_equal(ag_ops_input_access(ops, g, mm, 0), AG_ACC_RO);
    assert_int_equal(ag_ops_input_access(ops, g, mm, 1), AG_ACC_SCOPE_WRITEABLE);

    /* reference + equal tensor names (unknown op type) */
    ag_node_id ro = agtest_node(g, AG_ROOT, "MyRefOp", "ro", 2, 2);
    name_in(g, ro, 0, "x");
    name_in(g, ro, 1, "ref");
    name_out(g, ro, 0, "ref");
    name_out(g, ro, 1, "y");
    uint32_t in = 99;
    assert_int_equal(ag_ops_input_access(ops, g, ro, 1), AG_ACC_RO); /* no reference attr */
    assert_int_equal(ag_ops_output_ref(ops, g, ro, 0, &in), AG_REL_FRESH);
    assert_int_equal(ag_attrs_set_bool(g, nattrs(g, ro), "reference", true), AG_OK);
    assert_int_equal(ag_ops_input_access(ops, g, ro, 0), AG_ACC_RO);
    assert_int_equal(ag_ops_input_access(ops, g, ro, 1), AG_ACC_WRITEABLE);
    assert_int_equal(ag_ops_output_ref(ops, g, ro, 0, &in), AG_REL_REF);
    assert_int_equal(in, 1);
    assert_int_equal(ag_ops_output_ref(ops, g, ro, 1, &in), AG_REL_FRESH);
    assert_int_equal(in, 0);
    uint32_t f = ag_ops_node_flags(ops, g, ro);
    assert_true(f & AG_OPF_UNKNOWN);
    assert_int_equal(ag_ops_node_kind(ops, g, ro), AG_OPK_UNKNOWN);
    assert_ptr_equal(ag_ops_node_info(ops, g, ro), ag_ops_default(ops));

    /* Phony ops never write, whatever their names say, but still alias by name. */
    ag_node_id pc = agtest_node(g, AG_ROOT, "PhonyConcat", "pc", 2, 1);
    name_in(g, pc, 0, "x");
    name_out(g, pc, 0, "x");
    assert_int_equal(ag_attrs_set_bool(g, nattrs(g, pc), "reference", true), AG_OK);
    assert_int_equal(ag_ops_input_access(ops, g, pc, 0), AG_ACC_RO);
    assert_int_equal(ag_ops_output_ref(ops, g, pc, 0, &in), AG_REL_REF);

    /* Empty names never match. */
    ag_node_id e = agtest_node(g, AG_ROOT, "MyRefOp", "e", 1, 1);
    assert_int_equal(ag_attrs_set_bool(g, nattrs(g, e), "reference", true), AG_OK);
    assert_int_equal(ag_ops_input_access(ops, g, e, 0), AG_ACC_RO);
    assert_int_equal(ag_ops_output_ref(ops, g, e, 0, &in), AG_REL_FRESH);

    ag_graph_destroy(g);
    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
}

static void test_node_output_ref(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_ops *ops = make_ops(ctx);
    ag_graph *g;
    assert_int_equal(ag_graph_create(ctx, "g", &g), AG_OK);
    uint32_t in = 99;

    ag_node_id rs = agtest_node(g, AG_ROOT, "Reshape", "rs", 2, 1);
    assert_int_equal(ag_ops_output_ref(ops, g, rs, 0, &in), AG_REL_VIEW);
    assert_int_equal(in, 0);
    assert_int_equal(ag_ops_output_ref(ops, g, rs, 1, &in), AG_REL_FRESH); /* no such output */
    /* rule 2 before rule 4 */
    ag_attrs *oa = ag_node_output_desc(g, rs, 0)->attrs;
    assert_int_equal(ag_attrs_set_bool(g, oa, "reuse_input", true), AG_OK);
    assert_int_equal(ag_attrs_set_int(g, oa, "reuse_input_index", 1), AG_OK);
    assert_int_equal(ag_ops_output_ref(ops, g, rs, 0, &in), AG_REL_VIEW);
    assert_int_equal(in, 0);

    /* reuse_input on a compute node */
    ag_node_id add = agtest_node(g, AG_ROOT, "Add", "add", 2, 1);
    assert_int_equal(ag_ops_output_ref(ops, g, add, 0, &in), AG_REL_FRESH);
    oa = ag_node_output_desc(g, add, 0)->attrs;
    assert_int_equal(ag_attrs_set_bool(g, oa, "reuse_input", true), AG_OK);
    assert_int_equal(ag_ops_output_ref(ops, g, add, 0, &in), AG_REL_REUSE);
    assert_int_equal(in, 0);
    assert_int_equal(ag_attrs_set_int(g, oa, "reuse_input_index", 1), AG_OK);
    assert_int_equal(ag_ops_output_ref(ops, g, add, 0, &in), AG_REL_REUSE);
    assert_int_equal(in, 1);
    assert_int_equal(ag_attrs_set_int(g, oa, "reuse_input_index", 5), AG_OK); /* missing input */
    assert_int_equal(ag_ops_output_ref(ops, g, add, 0, &in), AG_REL_FRESH);
    assert_int_equal(ag_attrs_set_bool(g, oa, "reuse_input", false), AG_OK);
    assert_int_equal(ag_attrs_set_int(g, oa, "reuse_input_index", 1), AG_OK);
    assert_int_equal(ag_ops_output_ref(ops, g, add, 0, &in), AG_REL_FRESH);

    /* rule 5: no-padding continuous + _output_reuse_input: input 0 for every output */
    ag_node_id sp = agtest_node(g, AG_ROOT, "Split", "sp", 1, 3);
    assert_int_equal(ag_attrs_set_bool(g, nattrs(g, sp), "_no_padding_continuous_output", true), AG_OK);
    assert_int_equal(ag_ops_output_ref(ops, g, sp, 2, &in), AG_REL_FRESH);
    assert_int_equal(ag_attrs_set_bool(g, nattrs(g, sp), "_output_reuse_input", true), AG_OK);
    assert_int_equal(ag_ops_output_ref(ops, g, sp, 2, &in), AG_REL_REUSE);
    assert_int_equal(in, 0);
    assert_true(ag_ops_node_flags(ops, g, sp) & AG_OPF_NOPAD_CONTINUOUS_OUTPUT);
    /* the table's PhonySplit already has both */
    ag_node_id ps = agtest_node(g, AG_ROOT, "PhonySplit", "ps", 1, 2);
    assert_int_equal(ag_ops_output_ref(ops, g, ps, 1, &in), AG_REL_REUSE);
    assert_int_equal(ag_attrs_set_bool(g, nattrs(g, ps), "_output_reuse_input", false), AG_OK);
    assert_int_equal(ag_ops_output_ref(ops, g, ps, 1, &in), AG_REL_FRESH);

    /* pass-through: While and NetOutput-like nodes, subgraph Data */
    ag_node_id wh = agtest_node(g, AG_ROOT, "While", "wh", 3, 3);
    assert_int_equal(ag_ops_output_ref(ops, g, wh, 2, &in), AG_REL_PASS);
    assert_int_equal(in, 2);
    assert_int_equal(ag_ops_input_access(ops, g, wh, 0), AG_ACC_SCOPE_WRITEABLE);
    assert_int_equal(ag_attrs_set_bool(g, nattrs(g, wh), "_input_mutable", false), AG_OK);
    assert_int_equal(ag_ops_input_access(ops, g, wh, 0), AG_ACC_SCOPE_WRITEABLE); /* While first */
    assert_true(ag_ops_node_flags(ops, g, wh) & AG_OPF_SUBGRAPHS);
    ag_node_id pf = agtest_node(g, AG_ROOT, "PointFromInputs", "pf", 1, 2);
    assert_int_equal(ag_ops_output_ref(ops, g, pf, 0, &in), AG_REL_PASS);
    assert_int_equal(ag_ops_output_ref(ops, g, pf, 1, &in), AG_REL_FRESH); /* no input 1 */

    ag_node_id ifn = agtest_node(g, AG_ROOT, "If", "if", 2, 1);
    ag_sub_id then_g = agtest_sub(g, ifn, "then");
    ag_node_id sd = agtest_node(g, then_g, "Data", "sd", 1, 1);
    assert_int_equal(ag_ops_output_ref(ops, g, sd, 0, &in), AG_REL_FRESH);
    assert_int_equal(ag_attrs_set_int(g, nattrs(g, sd), "_parent_node_index", 1), AG_OK);
    assert_int_equal(ag_ops_output_ref(ops, g, sd, 0, &in), AG_REL_PASS);
    assert_int_equal(in, 0);
    ag_node_id rd = agtest_node(g, AG_ROOT, "Data", "rd", 1, 1);
    assert_int_equal(ag_attrs_set_int(g, nattrs(g, rd), "_parent_node_index", 0), AG_OK);
    assert_int_equal(ag_ops_output_ref(ops, g, rd, 0, &in), AG_REL_FRESH); /* root Data */
    assert_true(ag_ops_node_flags(ops, g, ifn) & AG_OPF_SUBGRAPHS);
    /* a node of any kind with real subgraphs */
    ag_node_id odd = agtest_node(g, AG_ROOT, "Relu", "odd", 1, 1);
    agtest_sub(g, odd, "odd_body");
    assert_true(ag_ops_node_flags(ops, g, odd) & AG_OPF_SUBGRAPHS);
    assert_false(ag_ops_node_flags(ops, g, add) & AG_OPF_SUBGRAPHS);

    /* NULL in_idx is accepted */
    assert_int_equal(ag_ops_output_ref(ops, g, wh, 1, NULL), AG_REL_PASS);

    ag_graph_destroy(g);
    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
}

static void test_node_flags_and_anchors(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_ops *ops = make_ops(ctx);
    assert_int_equal(load_str(ops, "MemOp : out0=mem:p2p in1=mem:host out1=inplace:0\n"), AG_OK);
    ag_graph *g;
    assert_int_equal(ag_graph_create(ctx, "g", &g), AG_OK);

    /* continuous_* and no-padding flags, bool or int */
    ag_node_id ar = agtest_node(g, AG_ROOT, "HcomAllReduce", "ar", 2, 2);
    uint32_t f = ag_ops_node_flags(ops, g, ar);
    assert_true(f & AG_OPF_CONTINUOUS_INPUT);
    assert_true(f & AG_OPF_ATOMIC);
    assert_false(f & AG_OPF_UNKNOWN);
    assert_int_equal(ag_attrs_set_bool(g, nattrs(g, ar), "continuous_input", false), AG_OK);
    assert_int_equal(ag_attrs_set_int(g, nattrs(g, ar), "continuous_output", 1), AG_OK);
    assert_int_equal(ag_attrs_set_bool(g, nattrs(g, ar), "_no_padding_continuous_input", true), AG_OK);
    f = ag_ops_node_flags(ops, g, ar);
    assert_false(f & AG_OPF_CONTINUOUS_INPUT);
    assert_true(f & AG_OPF_CONTINUOUS_OUTPUT);
    assert_true(f & AG_OPF_NOPAD_CONTINUOUS_INPUT);
    assert_true(ag_ops_is_atomic_output(ops, g, ar, 1));
    assert_false(ag_ops_is_atomic_output(ops, g, ar, 2));
    assert_int_equal(ag_attrs_set_bool(g, nattrs(g, ar), "is_atomic_node", false), AG_OK);
    assert_false(ag_ops_node_flags(ops, g, ar) & AG_OPF_ATOMIC);

    /* atomic_output_index / atomic_input_index / is_atomic_node */
    ag_node_id sc = agtest_node(g, AG_ROOT, "Split", "sc", 2, 3);
    assert_false(ag_ops_node_flags(ops, g, sc) & AG_OPF_ATOMIC);
    int64_t idx[] = {1, 2};
    set_ints(g, sc, "atomic_output_index", idx, 2);
    assert_true(ag_ops_node_flags(ops, g, sc) & AG_OPF_ATOMIC);
    assert_false(ag_ops_is_atomic_output(ops, g, sc, 0));
    assert_true(ag_ops_is_atomic_output(ops, g, sc, 1));
    assert_true(ag_ops_is_atomic_output(ops, g, sc, 2));
    assert_false(ag_ops_is_atomic_output(ops, g, sc, 3));
    assert_false(ag_ops_is_atomic_input(ops, g, sc, 1));
    assert_int_equal(ag_attrs_set_int(g, nattrs(g, sc), "atomic_input_index", 1), AG_OK);
    assert_true(ag_ops_is_atomic_input(ops, g, sc, 1));
    assert_true(ag_ops_input_flags(ops, g, sc, 1) & AG_OPA_ATOMIC);
    ag_node_id r2 = agtest_node(g, AG_ROOT, "Relu", "r2", 1, 1);
    assert_int_equal(ag_attrs_set_bool(g, nattrs(g, r2), "is_atomic_node", true), AG_OK);
    assert_true(ag_ops_node_flags(ops, g, r2) & AG_OPF_ATOMIC);
    int64_t none = 0;
    set_ints(g, r2, "atomic_output_index", &none, 0); /* empty list: no atomic anchors */
    assert_false(ag_ops_is_atomic_output(ops, g, r2, 0));

    /* unrefreshable nodes mark every anchor */
    ag_node_id ss = agtest_node(g, AG_ROOT, "StreamSwitch", "ss", 2, 1);
    f = ag_ops_node_flags(ops, g, ss);
    assert_true((f & AG_OPF_UNREFRESHABLE) && (f & AG_OPF_FIXED_ADDR));
    assert_true(ag_ops_input_flags(ops, g, ss, 1) & AG_OPA_UNREFRESHABLE);
    assert_true(ag_ops_output_flags(ops, g, ss, 0) & AG_OPA_UNREFRESHABLE);
    assert_int_equal(ag_ops_output_flags(ops, g, ss, 1), 0); /* out of range */
    assert_int_equal(ag_ops_input_flags(ops, g, r2, 0), 0);

    /* memory types: attribute, then table, then descriptor */
    ag_node_id mo = agtest_node(g, AG_ROOT, "MemOp", "mo", 2, 2);
    ag_node_output_desc(g, mo, 0)->mem_type = AG_MEM_HOST;
    ag_node_output_desc(g, mo, 1)->mem_type = AG_MEM_HOST;
    assert_int_equal(ag_ops_output_mem_type(ops, g, mo, 0), AG_MEM_P2P);
    assert_int_equal(ag_ops_output_mem_type(ops, g, mo, 1), AG_MEM_HOST);
    assert_int_equal(ag_ops_input_mem_type(ops, g, mo, 0), AG_MEM_HBM);
    assert_int_equal(ag_ops_input_mem_type(ops, g, mo, 1), AG_MEM_HOST);
    assert_int_equal(ag_ops_input_mem_type(ops, g, mo, 2), AG_MEM_HBM);
    int64_t mts[] = {AG_MEM_HBM, AG_MEM_P2P};
    set_ints(g, mo, "_output_memory_type", mts, 2);
    assert_int_equal(ag_ops_output_mem_type(ops, g, mo, 0), AG_MEM_HBM);
    assert_int_equal(ag_ops_output_mem_type(ops, g, mo, 1), AG_MEM_P2P);
    int64_t bad[] = {7};
    set_ints(g, mo, "_input_memory_type", bad, 1); /* out of range: ignored */
    assert_int_equal(ag_ops_input_mem_type(ops, g, mo, 0), AG_MEM_HBM);
    const char *names[] = {"p2p", "host"};
    ag_attr sa = {.name = "_input_memory_type", .kind = AG_ATTR_STRINGS, .count = 2};
    sa.v.ss = names;
    assert_int_equal(ag_attrs_set(g, nattrs(g, mo), &sa), AG_OK);
    assert_int_equal(ag_ops_input_mem_type(ops, g, mo, 0), AG_MEM_P2P);
    assert_int_equal(ag_ops_input_mem_type(ops, g, mo, 1), AG_MEM_HOST);

    /* in-place: table, then _output_inplace_ability; the hint; ref_var_src_var_name */
    uint32_t in = 99;
    assert_true(ag_ops_output_inplace(ops, g, mo, 1, &in));
    assert_int_equal(in, 0);
    assert_false(ag_ops_output_inplace(ops, g, mo, 0, &in));
    int64_t pairs[] = {0, 1, 1, 7};
    set_ints(g, mo, "_output_inplace_ability", pairs, 4);
    assert_true(ag_ops_output_inplace(ops, g, mo, 0, &in));
    assert_int_equal(in, 1);
    assert_false(ag_ops_output_inplace(ops, g, mo, 1, &in)); /* input 7 missing */
    assert_false(ag_ops_inplace_hint(g, mo, &in));
    assert_int_equal(ag_attrs_set_int(g, ag_node_output_desc(g, mo, 0)->attrs, "_inplace_support_input_index", 1),
                     AG_OK);
    assert_true(ag_ops_inplace_hint(g, mo, &in));
    assert_int_equal(in, 1);
    assert_null(ag_ops_output_ref_var(g, mo, 0));
    assert_int_equal(ag_attrs_set_string(g, ag_node_output_desc(g, mo, 1)->attrs, "ref_var_src_var_name", "var1"),
                     AG_OK);
    assert_string_equal(ag_ops_output_ref_var(g, mo, 1), "var1");
    assert_null(ag_ops_output_ref_var(g, mo, 2));

    /* domains of nodes */
    ag_node_id ad = agtest_node(g, AG_ROOT, "Adam", "adam", 1, 1);
    assert_true(ag_ops_node_flags(ops, g, ad) & AG_OPF_UNKNOWN);
    assert_int_equal(ag_node_set_domain(g, ad, "ai.onnx.preview.training"), AG_OK);
    assert_false(ag_ops_node_flags(ops, g, ad) & AG_OPF_UNKNOWN);
    assert_int_equal(ag_ops_node_kind(ops, g, ad), AG_OPK_COMPUTE);

    ag_graph_destroy(g);
    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
}

/* ---- OOM sweeps ---- */

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_ops *ops = NULL;
    ag_status st = ag_ops_create(ctx, &ops);
    if (st != AG_OK) {
        assert_null(ops);
        return st;
    }
    uint32_t count = ag_ops_count(ops);
    const ag_op_info *relu = ag_ops_lookup(ops, "Relu", NULL);
    st = load_str(ops, "A B@x.y : like=HcomAllReduce in0=mem:p2p out1=ref:0\nRelu : kind=view out0=view:0\n");
    if (st != AG_OK) {
        assert_int_equal(st, AG_ENOMEM);
        assert_int_equal(ag_ops_count(ops), count);
        assert_ptr_equal(ag_ops_lookup(ops, "Relu", NULL), relu);
        assert_null(ag_ops_lookup(ops, "A", NULL));
        ag_ops_destroy(ops);
        return st;
    }
    st = load_str(ops, "C : kind=view\nD : bogus\n");
    if (st != AG_EPARSE) {
        assert_int_equal(st, AG_ENOMEM);
        ag_ops_destroy(ops);
        return st;
    }
    assert_null(ag_ops_lookup(ops, "C", NULL));
    ag_membuf mb;
    ag_membuf_init(&mb, ctx);
    st = ag_ops_dump(ops, ag_sink_membuf(&mb));
    ag_membuf_free(&mb);
    ag_ops_destroy(ops);
    return st;
}

static void test_oom(void **state)
{
    (void)state;
    uint64_t runs = AG_TEST_OOM_SWEEP(oom_body, NULL);
    assert_true(runs > 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_kinds),
        cmocka_unit_test(test_builtin_properties),
        cmocka_unit_test(test_onnx_ops_known),
        cmocka_unit_test(test_builtin_load_time),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_user_file),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_dump_round_trip),
        cmocka_unit_test(test_node_access_overrides),
        cmocka_unit_test(test_node_output_ref),
        cmocka_unit_test(test_node_flags_and_anchors),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
