/* Shape inference against the ONNX backend test suite (Debian libonnx-testdata):
 * every model is imported with inference on and without the declared-type
 * fallback, and each root NetOutput input is compared with the model's
 * declared graph output type.  A known dtype or dim that differs from the
 * declaration is a bug in a rule; a still-unknown output is accepted only for
 * the data-dependent ops of the allow-list below.  Skips when the suite is
 * not installed; models the importer refuses (sequences, optionals) are skipped. */
#define _POSIX_C_SOURCE 200809L
#include "support/agtest.h"

#include <dirent.h>
#include <stdio.h>

#include "onnx.pb-c.h"

#define TESTDATA_DIR "/usr/share/libonnx-testdata/data"

static const char *const suites[] = {"node", "simple", "pytorch-converted", "pytorch-operator"};

/* Models whose outputs may stay unknown, with why.  Matched as a prefix of the
 * model's directory name.  The backend tests feed shape-defining operands
 * (shape, axes, pads, repeats, sizes, k, ...) as graph inputs whose values
 * exist only in the test data: for inference they are run-time data. */
#define RUNTIME_OPERAND "a shape-defining operand is a graph input (value known only at run time)"
static const struct {
    const char *prefix;
    const char *reason;
} allow_unknown[] = {
    {"test_nonzero", "output length is the number of nonzero elements (data)"},
    {"test_nonmaxsuppression", "number of selected boxes depends on the scores (data)"},
    {"test_unique", "number of unique values depends on the data"},
    {"test_compress", "output length is the number of true conditions (data)"},
    {"test_strnorm", "stop words remove a data-dependent number of strings"},
    {"test_gradient_of_", "Gradient (training graph op) is not inferred"},
    {"test_reshape_", RUNTIME_OPERAND},
    {"test_slice", RUNTIME_OPERAND},
    {"test_split_variable_parts", RUNTIME_OPERAND},
    {"test_split_zero_size_splits", RUNTIME_OPERAND},
    {"test_squeeze", RUNTIME_OPERAND},
    {"test_unsqueeze", RUNTIME_OPERAND},
    {"test_tile", RUNTIME_OPERAND},
    {"test_top_k", RUNTIME_OPERAND},
    {"test_onehot", RUNTIME_OPERAND},
    {"test_range_", RUNTIME_OPERAND},
    {"test_constantofshape", RUNTIME_OPERAND},
    {"test_expand_", RUNTIME_OPERAND},
    {"test_constant_pad", RUNTIME_OPERAND},
    {"test_edge_pad", RUNTIME_OPERAND},
    {"test_reflect_pad", RUNTIME_OPERAND},
    {"test_resize_", RUNTIME_OPERAND},
    {"test_upsample_", RUNTIME_OPERAND},
    {"test_reduce_sum_", RUNTIME_OPERAND},
    {"test_maxunpool_export_with_output_shape", RUNTIME_OPERAND},
    {"test_stft", RUNTIME_OPERAND},
    {"test_blackmanwindow", RUNTIME_OPERAND},
    {"test_hammingwindow", RUNTIME_OPERAND},
    {"test_hannwindow", RUNTIME_OPERAND},
    {"test_melweightmatrix", RUNTIME_OPERAND},
    {"test_loop11", "slice bounds depend on the iteration counter (no symbolic dims)"},
};

typedef struct tally {
    uint32_t models, imported, unsupported, errors;
    uint32_t exact, mismatch, unknown, unknown_allowed;
} tally;

static const char *allowed_reason(const char *model)
{
    for (size_t k = 0; k < sizeof allow_unknown / sizeof allow_unknown[0]; k++)
        if (strncmp(model, allow_unknown[k].prefix, strlen(allow_unknown[k].prefix)) == 0)
            return allow_unknown[k].reason;
    return NULL;
}

static void fmt_inferred(char *buf, size_t len, const ag_tensor_desc *d)
{
    size_t u = 0;
    const char *dn = ag_dtype_name(d->dtype);
    u += (size_t)snprintf(buf + u, len - u, "%s", dn ? dn : "?");
    if (d->rank < 0) {
        snprintf(buf + u, len - u, "[?rank]");
        return;
    }
    u += (size_t)snprintf(buf + u, len - u, "[");
    for (int32_t k = 0; k < d->rank && u < len; k++)
        u += (size_t)snprintf(buf + u, len - u, k ? ",%lld" : "%lld", (long long)d->dims[k]);
    if (u < len)
        snprintf(buf + u, len - u, "]");
}

static void fmt_declared(char *buf, size_t len, const Onnx__TypeProto__Tensor *tt)
{
    size_t u = 0;
    const char *dn = ag_dtype_valid(tt->elem_type) ? ag_dtype_name((ag_dtype)tt->elem_type) : "?";
    u += (size_t)snprintf(buf + u, len - u, "%s", dn);
    if (!tt->shape) {
        snprintf(buf + u, len - u, "[?rank]");
        return;
    }
    u += (size_t)snprintf(buf + u, len - u, "[");
    for (size_t k = 0; k < tt->shape->n_dim && u < len; k++) {
        const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[k];
        if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            u += (size_t)snprintf(buf + u, len - u, k ? ",%lld" : "%lld", (long long)dm->dim_value);
        else
            u += (size_t)snprintf(buf + u, len - u, k ? ",?" : "?");
    }
    if (u < len)
        snprintf(buf + u, len - u, "]");
}

/* 1: exact (everything declared is inferred), 0: some declared part still
 * unknown, -1: a known part contradicts the declaration. */
static int compare(const ag_tensor_desc *d, const Onnx__TypeProto__Tensor *tt)
{
    int res = 1;
    if (tt->elem_type != 0) {
        if (d->dtype == AG_DT_UNDEFINED)
            res = 0;
        else if ((int)d->dtype != tt->elem_type)
            return -1;
    }
    if (!tt->shape)
        return res;
    if (d->rank < 0)
        return 0;
    if ((size_t)d->rank != tt->shape->n_dim)
        return -1;
    for (size_t k = 0; k < tt->shape->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[k];
        if (dm->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            continue;
        if (d->dims[k] < 0)
            res = 0;
        else if (d->dims[k] != dm->dim_value)
            return -1;
    }
    return res;
}

static ag_node_id find_netoutput(const ag_graph *g)
{
    uint32_t n = ag_sub_node_count(g, AG_ROOT);
    for (uint32_t k = 0; k < n; k++) {
        ag_node_id id = ag_sub_node_at(g, AG_ROOT, k);
        if (strcmp(ag_node_type(g, id), "NetOutput") == 0)
            return id;
    }
    return AG_NONE;
}

static void check_model(const char *suite, const char *model, tally *t)
{
    char path[1024];
    size_t len = 0;
    char *buf;
    Onnx__ModelProto *mp;
    ag_ctx *ctx;
    ag_graph *g = NULL;
    ag_onnx_opts opts = ag_onnx_defaults();
    ag_status st;
    FILE *f;
    snprintf(path, sizeof path, "%s/%s/%s/model.onnx", TESTDATA_DIR, suite, model);
    f = fopen(path, "rb");
    if (!f)
        return;
    fclose(f);
    t->models++;
    buf = agtest_read_file(path, &len);
    mp = onnx__model_proto__unpack(NULL, len, (const uint8_t *)buf);
    assert_non_null(mp);
    ctx = agtest_ctx();
    opts.use_declared = false;
    opts.infer_shapes = true;
    st = ag_onnx_import(ctx, buf, len, path, &opts, &g);
    if (st == AG_EUNSUPPORTED) {
        t->unsupported++;
    } else if (st != AG_OK) {
        t->errors++;
        print_message("ERROR %s/%s: %s: %s\n", suite, model, ag_status_str(st), ag_ctx_errmsg(ctx));
    } else {
        ag_node_id out = find_netoutput(g);
        t->imported++;
        assert_true(out != AG_NONE);
        assert_true(mp->graph != NULL);
        assert_int_equal(ag_node_num_inputs(g, out), mp->graph->n_output);
        for (size_t k = 0; k < mp->graph->n_output; k++) {
            const Onnx__ValueInfoProto *vi = mp->graph->output[k];
            const ag_tensor_desc *d = ag_node_input_desc_c(g, out, (uint32_t)k);
            char a[256], b[256];
            int c;
            if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
                continue;
            c = compare(d, vi->type->tensor_type);
            if (c == 1) {
                t->exact++;
                continue;
            }
            fmt_inferred(a, sizeof a, d);
            fmt_declared(b, sizeof b, vi->type->tensor_type);
            if (c < 0) {
                t->mismatch++;
                print_message("MISMATCH %s/%s output %zu (%s): inferred %s declared %s\n", suite, model, k,
                              vi->name, a, b);
            } else if (allowed_reason(model)) {
                t->unknown_allowed++;
            } else {
                t->unknown++;
                print_message("UNKNOWN %s/%s output %zu (%s): inferred %s declared %s\n", suite, model, k,
                              vi->name, a, b);
            }
        }
    }
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
    onnx__model_proto__free_unpacked(mp, NULL);
    free(buf);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_suite(const char *suite, tally *t)
{
    char dir[512];
    DIR *d;
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0;
    snprintf(dir, sizeof dir, "%s/%s", TESTDATA_DIR, suite);
    d = opendir(dir);
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            names = realloc(names, cap * sizeof *names);
            assert_non_null(names);
        }
        names[n] = strdup(e->d_name);
        assert_non_null(names[n]);
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_names);
    for (size_t k = 0; k < n; k++) {
        check_model(suite, names[k], t);
        free(names[k]);
    }
    free(names);
}

static void test_testdata(void **state)
{
    tally t;
    DIR *d = opendir(TESTDATA_DIR);
    (void)state;
    if (!d)
        skip();
    closedir(d);
    memset(&t, 0, sizeof t);
    for (size_t k = 0; k < sizeof suites / sizeof suites[0]; k++)
        run_suite(suites[k], &t);
    print_message("testdata: %u models, %u imported, %u unsupported, %u import errors\n", t.models, t.imported,
                  t.unsupported, t.errors);
    print_message("testdata outputs: %u exact, %u mismatch, %u unknown (+%u allowed unknown)\n", t.exact,
                  t.mismatch, t.unknown, t.unknown_allowed);
    if (t.models == 0)
        skip();
    assert_int_equal(t.mismatch, 0);
    assert_int_equal(t.unknown, 0);
    assert_int_equal(t.errors, 0);
    assert_true(t.imported > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_testdata),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
