/* Unit tests of the graph IR: building nodes, subgraphs and edges, attributes
 * of every kind, tensor descriptors and constant tensors, error messages,
 * equality, an allocation-failure sweep and a million-node chain. */
#include "support/agtest.h"

#include <stdio.h>
#include <time.h>

#include "core/internal.h"

static ag_graph *new_graph(ag_ctx *ctx, const char *name)
{
    ag_graph *g = NULL;
    assert_int_equal(ag_graph_create(ctx, name, &g), AG_OK);
    assert_non_null(g);
    return g;
}

static void test_build_basic(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx, "main");
    assert_int_equal(ag_graph_sub_count(g), 1);
    assert_string_equal(ag_sub_name(g, AG_ROOT), "main");
    assert_int_equal(ag_sub_parent(g, AG_ROOT), AG_NONE);
    assert_int_equal(ag_graph_find_sub(g, "main"), AG_ROOT);

    ag_node_id x = agtest_node(g, AG_ROOT, "Data", "x", 0, 1);
    ag_node_id w = agtest_node(g, AG_ROOT, "Const", "w", 0, 1);
    ag_node_id conv = agtest_node(g, AG_ROOT, "Conv", "conv1", 2, 1);
    ag_node_id relu = agtest_node(g, AG_ROOT, "Relu", NULL, 1, 1);
    ag_node_id add = agtest_node(g, AG_ROOT, "Add", "", 2, 1);
    ag_node_id out = agtest_node(g, AG_ROOT, "NetOutput", "out", 1, 0);
    char buf[64];
    snprintf(buf, sizeof buf, "Relu_%u", relu);
    assert_string_equal(ag_node_name(g, relu), buf);
    snprintf(buf, sizeof buf, "Add_%u", add);
    assert_string_equal(ag_node_name(g, add), buf);
    /* A generated name never collides with a user's. */
    snprintf(buf, sizeof buf, "Relu_%u", ag_graph_node_capacity(g));
    ag_node_id squat = agtest_node(g, AG_ROOT, "Relu", buf, 0, 0);
    ag_node_id gen = agtest_node(g, AG_ROOT, "Relu", NULL, 0, 0);
    assert_string_not_equal(ag_node_name(g, gen), ag_node_name(g, squat));

    agtest_edge(g, x, 0, conv, 0);
    agtest_edge(g, w, 0, conv, 1);
    agtest_edge(g, conv, 0, relu, 0);
    agtest_edge(g, conv, 0, add, 0);
    agtest_edge(g, relu, 0, add, 1);
    agtest_edge(g, add, 0, out, 0);
    agtest_ctrl(g, x, w);

    assert_int_equal(ag_graph_node_count(g), 8);
    assert_int_equal(ag_sub_node_count(g, AG_ROOT), 8);
    assert_int_equal(ag_sub_node_at(g, AG_ROOT, 2), conv);
    assert_int_equal(ag_sub_node_at(g, AG_ROOT, 8), AG_NONE);
    assert_int_equal(ag_sub_find_node(g, AG_ROOT, "conv1"), conv);
    assert_int_equal(ag_sub_find_node(g, AG_ROOT, "nope"), AG_NONE);
    assert_string_equal(ag_node_type(g, conv), "Conv");
    assert_string_equal(ag_node_domain(g, conv), "");
    assert_int_equal(ag_node_owner(g, conv), AG_ROOT);
    ag_port p = ag_node_input_src(g, conv, 1);
    assert_int_equal(p.node, w);
    assert_int_equal(p.index, 0);
    assert_int_equal(ag_node_input_src(g, x, 0).node, AG_NONE);
    assert_int_equal(ag_node_output_nconsumers(g, conv, 0), 2);
    assert_int_equal(ag_node_output_consumer(g, conv, 0, 0).node, relu);
    assert_int_equal(ag_node_output_consumer(g, conv, 0, 1).node, add);
    assert_int_equal(ag_node_output_consumer(g, conv, 0, 1).index, 0);
    assert_int_equal(ag_node_num_ctrl_out(g, x), 1);
    assert_int_equal(ag_node_ctrl_out(g, x, 0), w);
    assert_int_equal(ag_node_ctrl_in(g, w, 0), x);
    /* Control edges are idempotent. */
    agtest_ctrl(g, x, w);
    assert_int_equal(ag_node_num_ctrl_in(g, w), 1);

    /* Subgraphs. */
    ag_node_id iff = agtest_node(g, AG_ROOT, "If", "if0", 2, 1);
    ag_sub_id then_g = agtest_sub(g, iff, "then");
    ag_sub_id else_g = agtest_sub(g, iff, "else");
    assert_int_equal(ag_node_num_subs(g, iff), 2);
    assert_int_equal(ag_node_sub(g, iff, 1), else_g);
    assert_int_equal(ag_sub_parent(g, then_g), iff);
    assert_int_equal(ag_sub_depth(g, then_g), 1);
    assert_int_equal(ag_graph_find_sub(g, "else"), else_g);
    ag_node_id td = agtest_node(g, then_g, "Data", "x", 0, 1); /* names are per subgraph */
    ag_node_id loop = agtest_node(g, then_g, "While", "loop", 1, 1);
    ag_sub_id body = agtest_sub(g, loop, "body");
    assert_int_equal(ag_sub_depth(g, body), 2);
    agtest_edge(g, td, 0, loop, 0);
    assert_int_equal(ag_sub_find_node(g, then_g, "x"), td);
    assert_int_equal(ag_sub_node_count(g, then_g), 2);

    /* Renaming, retyping, domains and anchor growth. */
    assert_int_equal(ag_node_set_name(g, relu, "relu1"), AG_OK);
    assert_int_equal(ag_sub_find_node(g, AG_ROOT, "relu1"), relu);
    assert_int_equal(ag_sub_find_node(g, AG_ROOT, buf), squat);
    assert_int_equal(ag_node_set_type(g, relu, "Gelu"), AG_OK);
    assert_string_equal(ag_node_type(g, relu), "Gelu");
    assert_int_equal(ag_node_set_domain(g, relu, "com.example"), AG_OK);
    assert_string_equal(ag_node_domain(g, relu), "com.example");
    ag_tensor_desc *d0 = ag_node_input_desc(g, conv, 0);
    assert_int_equal(ag_node_set_io_count(g, conv, 3, 2), AG_OK);
    assert_int_equal(ag_node_num_inputs(g, conv), 3);
    assert_int_equal(ag_node_num_outputs(g, conv), 2);
    assert_ptr_equal(ag_node_input_desc(g, conv, 0), d0); /* descriptors stay put */
    assert_int_equal(ag_node_input_src(g, conv, 0).node, x);
    assert_int_equal(ag_node_set_io_count(g, conv, 1, 1), AG_OK); /* never shrinks */
    assert_int_equal(ag_node_num_inputs(g, conv), 3);

    assert_int_equal(ag_graph_verify(g), AG_OK);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_errors(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx, "main");
    ag_node_id a = agtest_node(g, AG_ROOT, "Data", "a", 0, 1);
    ag_node_id conv = agtest_node(g, AG_ROOT, "Conv", "conv1", 2, 1);
    ag_node_id iff = agtest_node(g, AG_ROOT, "If", "if0", 1, 1);
    ag_sub_id sub = agtest_sub(g, iff, "then");
    ag_node_id inner = agtest_node(g, sub, "Relu", "inner", 1, 1);
    ag_node_id id;

    assert_int_equal(ag_graph_add_edge(g, a, 0, conv, 3), AG_EINVAL);
    assert_errmsg(ctx, "node \"conv1\" (Conv): input 3 out of range (2 inputs)");
    assert_int_equal(ag_graph_add_edge(g, conv, 1, a, 0), AG_EINVAL);
    assert_errmsg(ctx, "node \"conv1\" (Conv): output 1 out of range (1 outputs)");
    agtest_edge(g, a, 0, conv, 0);
    assert_int_equal(ag_graph_add_edge(g, a, 0, conv, 0), AG_EEXIST);
    assert_errmsg(ctx, "input 0 is already connected (from \"a\" output 0)");
    assert_int_equal(ag_graph_add_edge(g, a, 0, inner, 0), AG_EINVAL);
    assert_errmsg(ctx, "different subgraphs (\"main\" and \"then\")");
    assert_int_equal(ag_graph_add_edge(g, a, 0, 9999, 0), AG_EINVAL);
    assert_errmsg(ctx, "9999");
    assert_int_equal(ag_graph_remove_edge(g, a, 0, conv, 1), AG_ENOTFOUND);
    assert_errmsg(ctx, "input 1 is not fed by \"a\" output 0");
    assert_int_equal(ag_graph_add_ctrl_edge(g, a, a), AG_EINVAL);
    assert_errmsg(ctx, "self-loop");
    assert_int_equal(ag_graph_add_ctrl_edge(g, a, inner), AG_EINVAL);
    assert_int_equal(ag_graph_remove_ctrl_edge(g, a, conv), AG_ENOTFOUND);
    assert_errmsg(ctx, "no control edge node \"a\" (Data) -> node \"conv1\" (Conv)");

    assert_int_equal(ag_graph_add_node(g, AG_ROOT, "Relu", "conv1", 1, 1, &id), AG_EEXIST);
    assert_errmsg(ctx, "\"conv1\"");
    assert_int_equal(id, AG_NONE);
    assert_int_equal(ag_graph_add_node(g, AG_ROOT, "", "t", 1, 1, &id), AG_EINVAL);
    assert_int_equal(ag_graph_add_node(g, AG_ROOT, NULL, "t", 1, 1, &id), AG_EINVAL);
    assert_int_equal(ag_graph_add_node(g, 42, "Relu", "t", 1, 1, &id), AG_EINVAL);
    assert_int_equal(ag_graph_add_node(g, AG_ROOT, "Relu", "t", 1u << 30, 1, &id), AG_EINVAL);
    assert_int_equal(ag_graph_add_subgraph(g, iff, "then", NULL), AG_EEXIST);
    assert_errmsg(ctx, "\"then\" is already used");
    assert_int_equal(ag_graph_add_subgraph(g, iff, "main", NULL), AG_EEXIST);
    assert_int_equal(ag_graph_add_subgraph(g, iff, "", NULL), AG_EINVAL);
    assert_int_equal(ag_node_set_name(g, a, "conv1"), AG_EEXIST);
    assert_string_equal(ag_node_name(g, a), "a");
    assert_int_equal(ag_node_set_name(g, a, ""), AG_EINVAL);
    assert_int_equal(ag_node_set_type(g, a, ""), AG_EINVAL);

    ag_tensor_desc *d = ag_node_output_desc(g, a, 0);
    int64_t bad_rank[1] = {1};
    assert_int_equal(ag_desc_set_shape(g, d, AG_MAX_RANK + 1, bad_rank), AG_EINVAL);
    assert_errmsg(ctx, "rank 65 out of range");
    int64_t bad_dim[2] = {3, -2};
    assert_int_equal(ag_desc_set_shape(g, d, 2, bad_dim), AG_EINVAL);
    assert_errmsg(ctx, "dim 1 is -2");
    int64_t huge_dim[1] = {AG_MAX_DIM + 1};
    assert_int_equal(ag_desc_set_shape(g, d, 1, huge_dim), AG_EINVAL);
    assert_int_equal(d->rank, AG_RANK_UNKNOWN); /* unchanged */
    assert_int_equal(ag_desc_set_shape(g, d, 2, NULL), AG_EINVAL);

    ag_attr bad = {.name = "s", .kind = AG_ATTR_STRING, .count = 1, .v.s = NULL};
    assert_int_equal(ag_attrs_set(g, ag_node_attrs(g, a), &bad), AG_EINVAL);
    assert_errmsg(ctx, "attribute \"s\"");
    ag_attr noname = {.name = "", .kind = AG_ATTR_INT, .count = 1};
    assert_int_equal(ag_attrs_set(g, ag_node_attrs(g, a), &noname), AG_EINVAL);
    ag_attr badlist = {.name = "l", .kind = AG_ATTR_INTS, .count = 3, .v.is = NULL};
    assert_int_equal(ag_attrs_set(g, ag_node_attrs(g, a), &badlist), AG_EINVAL);
    assert_int_equal(ag_attrs_count(ag_node_attrs(g, a)), 0);
    assert_int_equal(ag_attrs_remove(g, ag_node_attrs(g, a), "none"), AG_ENOTFOUND);

    assert_int_equal(ag_graph_verify(g), AG_OK);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_attrs_all_kinds(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx, "main");
    ag_node_id n = agtest_node(g, AG_ROOT, "Op", "n", 0, 1);
    ag_attrs *a = ag_node_attrs(g, n);

    char sbuf[16] = "hello";
    int64_t ints[3] = {1, -2, 3};
    float floats[2] = {1.5f, -0.25f};
    bool bools[3] = {true, false, true};
    const char *strs[2] = {"p", "qq"};
    uint8_t raw[4] = {1, 2, 3, 4};
    int64_t dims[1] = {4};
    ag_tensor t = {.dtype = AG_DT_U8, .rank = 1, .dims = dims, .nbytes = 4, .data = raw};
    const ag_tensor *tl[2] = {&t, &t};

    assert_int_equal(ag_attrs_set_bool(g, a, "b", true), AG_OK);
    assert_int_equal(ag_attrs_set_int(g, a, "i", -7), AG_OK);
    ag_attr f = {.name = "f", .kind = AG_ATTR_FLOAT, .count = 1, .v.f = 2.5f};
    assert_int_equal(ag_attrs_set(g, a, &f), AG_OK);
    assert_int_equal(ag_attrs_set_string(g, a, "s", sbuf), AG_OK);
    ag_attr ta = {.name = "t", .kind = AG_ATTR_TENSOR, .count = 1, .v.t = &t};
    assert_int_equal(ag_attrs_set(g, a, &ta), AG_OK);
    ag_attr bs = {.name = "bs", .kind = AG_ATTR_BOOLS, .count = 3, .v.bs = bools};
    assert_int_equal(ag_attrs_set(g, a, &bs), AG_OK);
    assert_int_equal(ag_attrs_set_ints(g, a, "is", ints, 3), AG_OK);
    ag_attr fs = {.name = "fs", .kind = AG_ATTR_FLOATS, .count = 2, .v.fs = floats};
    assert_int_equal(ag_attrs_set(g, a, &fs), AG_OK);
    ag_attr ss = {.name = "ss", .kind = AG_ATTR_STRINGS, .count = 2, .v.ss = strs};
    assert_int_equal(ag_attrs_set(g, a, &ss), AG_OK);
    ag_attr ts = {.name = "ts", .kind = AG_ATTR_TENSORS, .count = 2, .v.ts = tl};
    assert_int_equal(ag_attrs_set(g, a, &ts), AG_OK);
    assert_int_equal(ag_attrs_set_ints(g, a, "empty", NULL, 0), AG_OK);
    assert_int_equal(ag_attrs_count(a), 11);

    /* Deep copies: changing the caller's buffers changes nothing. */
    strcpy(sbuf, "XXXXX");
    ints[0] = 99;
    raw[0] = 42;
    bool bv;
    int64_t iv;
    float fv;
    const char *sv;
    const int64_t *iv_list;
    uint32_t cnt;
    assert_true(ag_attrs_get_bool(a, "b", &bv) && bv);
    assert_true(ag_attrs_get_int(a, "i", &iv) && iv == -7);
    assert_true(ag_attrs_get_float(a, "f", &fv) && fv == 2.5f);
    assert_true(ag_attrs_get_string(a, "s", &sv));
    assert_string_equal(sv, "hello");
    assert_true(ag_attrs_get_ints(a, "is", &iv_list, &cnt));
    assert_int_equal(cnt, 3);
    assert_int_equal(iv_list[0], 1);
    assert_int_equal(iv_list[1], -2);
    assert_true(ag_attrs_get_ints(a, "empty", &iv_list, &cnt) && cnt == 0);
    /* Flags: a bool, or an int's != 0; the default when absent or of
     * another kind. */
    assert_true(ag_attrs_get_flag(a, "b", false));
    assert_true(ag_attrs_get_flag(a, "i", false));
    assert_false(ag_attrs_get_flag(a, "absent", false));
    assert_true(ag_attrs_get_flag(a, "absent", true));
    assert_true(ag_attrs_get_flag(a, "s", true));
    assert_false(ag_attrs_get_flag(a, "s", false));
    {
        ag_node_id z = agtest_node(g, AG_ROOT, "Op", "z", 0, 1);
        assert_int_equal(ag_attrs_set_int(g, ag_node_attrs(g, z), "zero", 0), AG_OK);
        assert_false(ag_attrs_get_flag(ag_node_attrs_c(g, z), "zero", true));
    }
    const ag_attr *at = ag_attrs_find(a, "t");
    assert_non_null(at);
    assert_int_equal(((const uint8_t *)at->v.t->data)[0], 1);
    assert_int_equal(at->v.t->digest, ag_hash_bytes((uint8_t[]){1, 2, 3, 4}, 4));
    at = ag_attrs_find(a, "ss");
    assert_int_equal(at->count, 2);
    assert_string_equal(at->v.ss[1], "qq");
    at = ag_attrs_find(a, "bs");
    assert_true(at->v.bs[0] && !at->v.bs[1] && at->v.bs[2]);
    at = ag_attrs_find(a, "fs");
    assert_true(at->v.fs[1] == -0.25f);
    at = ag_attrs_find(a, "ts");
    assert_int_equal(at->count, 2);
    assert_ptr_not_equal(at->v.ts[0], &t);
    /* A tensor the graph already owns is shared, not copied again. */
    const ag_tensor *owned;
    assert_int_equal(ag_graph_make_tensor(g, &t, &owned), AG_OK);
    const ag_tensor *tl2[2] = {owned, owned};
    ag_attr ts2 = {.name = "ts2", .kind = AG_ATTR_TENSORS, .count = 2, .v.ts = tl2};
    assert_int_equal(ag_attrs_set(g, a, &ts2), AG_OK);
    at = ag_attrs_find(a, "ts2");
    assert_ptr_equal(at->v.ts[0], owned);
    assert_ptr_equal(at->v.ts[1], owned);
    assert_int_equal(ag_attrs_remove(g, a, "ts2"), AG_OK);

    /* Wrong kinds and absent names. */
    assert_false(ag_attrs_get_int(a, "b", &iv));
    assert_false(ag_attrs_get_string(a, "zzz", &sv));
    assert_null(ag_attrs_find(a, "zzz"));

    /* Replacement keeps the position; removal keeps the order of the rest. */
    assert_string_equal(ag_attrs_at(a, 1)->name, "i");
    assert_int_equal(ag_attrs_set_string(g, a, "i", "now a string"), AG_OK);
    assert_int_equal(ag_attrs_count(a), 11);
    assert_string_equal(ag_attrs_at(a, 1)->name, "i");
    assert_int_equal(ag_attrs_at(a, 1)->kind, AG_ATTR_STRING);
    assert_int_equal(ag_attrs_remove(g, a, "b"), AG_OK);
    assert_int_equal(ag_attrs_count(a), 10);
    assert_string_equal(ag_attrs_at(a, 0)->name, "i");
    assert_string_equal(ag_attrs_at(a, 9)->name, "empty");
    assert_null(ag_attrs_at(a, 10));

    /* Descriptor attributes are separate lists. */
    ag_tensor_desc *d = ag_node_output_desc(g, n, 0);
    assert_non_null(d->attrs);
    assert_int_equal(ag_attrs_count(d->attrs), 0);
    assert_int_equal(ag_attrs_set_int(g, d->attrs, "_parent_node_index", 0), AG_OK);
    assert_int_equal(ag_attrs_count(d->attrs), 1);
    assert_null(ag_attrs_find(a, "_parent_node_index"));

    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_descs(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx, "main");
    ag_node_id a = agtest_node(g, AG_ROOT, "Data", "a", 0, 1);
    ag_node_id b = agtest_node(g, AG_ROOT, "Relu", "b", 1, 1);
    ag_node_id c = agtest_node(g, AG_ROOT, "Relu", "c", 1, 1);

    const ag_tensor_desc *d0 = ag_node_input_desc_c(g, b, 0);
    assert_string_equal(d0->name, "");
    assert_int_equal(d0->dtype, AG_DT_UNDEFINED);
    assert_int_equal(d0->rank, AG_RANK_UNKNOWN);
    assert_int_equal(d0->mem_type, AG_MEM_HBM);
    assert_int_equal(d0->format, AG_FMT_ND);
    assert_null(d0->value);
    assert_non_null(d0->attrs);
    assert_null(ag_node_input_desc(g, b, 1));
    assert_false(ag_desc_shape_known(d0));
    assert_int_equal(ag_desc_numel(d0), UINT64_MAX);
    assert_int_equal(ag_desc_size_bytes(d0), AG_SIZE_UNKNOWN);

    ag_tensor_desc *od = ag_node_output_desc(g, a, 0);
    int64_t dims[3] = {2, 3, 5};
    od->dtype = AG_DT_F16;
    od->format = AG_FMT_NCHW;
    od->mem_type = AG_MEM_P2P;
    assert_int_equal(ag_desc_set_shape(g, od, 3, dims), AG_OK);
    assert_int_equal(ag_desc_set_name(g, od, "x"), AG_OK);
    dims[0] = 100;
    assert_int_equal(od->dims[0], 2);
    assert_true(ag_desc_shape_known(od));
    assert_int_equal(ag_desc_numel(od), 30);
    assert_int_equal(ag_desc_size_bytes(od), 60);

    /* The edge copies the producer's type into an undefined input. */
    agtest_edge(g, a, 0, b, 0);
    const ag_tensor_desc *bd = ag_node_input_desc_c(g, b, 0);
    assert_int_equal(bd->dtype, AG_DT_F16);
    assert_int_equal(bd->rank, 3);
    assert_int_equal(bd->dims[2], 5);
    assert_string_equal(bd->name, "x");
    assert_int_equal(bd->format, AG_FMT_NCHW);
    assert_int_equal(bd->mem_type, AG_MEM_P2P);
    /* ... but leaves a defined input alone. */
    ag_tensor_desc *cd = ag_node_input_desc(g, c, 0);
    cd->dtype = AG_DT_I32;
    agtest_edge(g, a, 0, c, 0);
    assert_int_equal(cd->dtype, AG_DT_I32);
    assert_int_equal(cd->rank, AG_RANK_UNKNOWN);

    /* Unknown dims, int4 rounding, unknown rank. */
    int64_t ud[2] = {AG_DIM_UNKNOWN, 4};
    assert_int_equal(ag_desc_set_shape(g, cd, 2, ud), AG_OK);
    assert_false(ag_desc_shape_known(cd));
    assert_int_equal(ag_desc_size_bytes(cd), AG_SIZE_UNKNOWN);
    int64_t d3[1] = {3};
    cd->dtype = AG_DT_I4;
    assert_int_equal(ag_desc_set_shape(g, cd, 1, d3), AG_OK);
    assert_int_equal(ag_desc_size_bytes(cd), 2);
    assert_int_equal(ag_desc_set_shape(g, cd, 0, NULL), AG_OK);
    assert_int_equal(ag_desc_numel(cd), 1);
    cd->dtype = AG_DT_STRING;
    assert_int_equal(ag_desc_size_bytes(cd), AG_SIZE_UNKNOWN);
    assert_int_equal(ag_desc_set_shape(g, cd, AG_RANK_UNKNOWN, NULL), AG_OK);
    assert_int_equal(cd->rank, AG_RANK_UNKNOWN);

    /* Values: set, copy_type shares graph-owned values, clear. */
    int32_t vals[2] = {7, 8};
    int64_t vd[1] = {2};
    ag_tensor v = {.dtype = AG_DT_I32, .rank = 1, .dims = vd, .nbytes = 8, .data = vals};
    assert_int_equal(ag_desc_set_value(g, od, &v), AG_OK);
    assert_non_null(od->value);
    assert_ptr_not_equal(od->value, &v);
    assert_int_equal(ag_desc_copy_type(g, cd, od), AG_OK);
    assert_ptr_equal(cd->value, od->value);
    assert_int_equal(cd->dtype, AG_DT_F16);
    assert_int_equal(cd->rank, 3);
    assert_ptr_not_equal(cd->dims, od->dims);
    assert_int_equal(ag_desc_set_value(g, od, NULL), AG_OK);
    assert_null(od->value);
    ag_tensor bad = v;
    bad.nbytes = 7;
    assert_int_equal(ag_desc_set_value(g, od, &bad), AG_EINVAL);
    assert_null(od->value);

    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

static void test_tensors(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx, "main");
    const ag_tensor *out;

    float fv[6] = {1, 2, 3, 4, 5, 6};
    int64_t dims[2] = {2, 3};
    ag_tensor t = {.dtype = AG_DT_F32, .rank = 2, .dims = dims, .nbytes = 24, .data = fv, .digest = 123};
    assert_int_equal(ag_graph_make_tensor(g, &t, &out), AG_OK);
    assert_ptr_not_equal(out->data, fv);
    assert_memory_equal(out->data, fv, 24);
    assert_int_equal(out->digest, ag_hash_bytes(fv, 24)); /* computed, not taken */
    const ag_tensor *again;
    assert_int_equal(ag_graph_make_tensor(g, out, &again), AG_OK);
    assert_ptr_equal(again, out);

    /* Elided data keeps the given digest. */
    ag_tensor el = t;
    el.data = NULL;
    el.digest = 0xfeedULL;
    assert_int_equal(ag_graph_make_tensor(g, &el, &out), AG_OK);
    assert_null(out->data);
    assert_int_equal(out->digest, 0xfeedULL);
    assert_int_equal(out->nbytes, 24);

    /* Strings: digest of each string plus its NUL. */
    const char *strs[2] = {"ab", "c"};
    int64_t sd[1] = {2};
    ag_tensor st = {.dtype = AG_DT_STRING, .rank = 1, .dims = sd, .strings = strs};
    assert_int_equal(ag_graph_make_tensor(g, &st, &out), AG_OK);
    assert_string_equal(out->strings[0], "ab");
    assert_ptr_not_equal(out->strings[0], strs[0]);
    assert_int_equal(out->digest, ag_hash_bytes("ab\0c\0", 5));

    /* Scalars, empty tensors and sub-byte types. */
    int64_t sc = 5;
    ag_tensor scal = {.dtype = AG_DT_I64, .rank = 0, .nbytes = 8, .data = &sc};
    assert_int_equal(ag_graph_make_tensor(g, &scal, &out), AG_OK);
    assert_int_equal(*(const int64_t *)out->data, 5);
    int64_t zd[1] = {0};
    ag_tensor empty = {.dtype = AG_DT_F32, .rank = 1, .dims = zd, .nbytes = 0, .data = fv};
    assert_int_equal(ag_graph_make_tensor(g, &empty, &out), AG_OK);
    uint8_t nib[2] = {0x21, 0x03};
    int64_t nd[1] = {3};
    ag_tensor i4 = {.dtype = AG_DT_I4, .rank = 1, .dims = nd, .nbytes = 2, .data = nib};
    assert_int_equal(ag_graph_make_tensor(g, &i4, &out), AG_OK);

    /* Errors. */
    ag_tensor bad = t;
    bad.nbytes = 20;
    assert_int_equal(ag_graph_make_tensor(g, &bad, &out), AG_EINVAL);
    assert_errmsg(ctx, "20 bytes given, 24 expected");
    assert_null(out);
    bad = t;
    bad.dtype = AG_DT_UNDEFINED;
    assert_int_equal(ag_graph_make_tensor(g, &bad, &out), AG_EINVAL);
    bad = t;
    int64_t negd[2] = {2, -1};
    bad.dims = negd;
    assert_int_equal(ag_graph_make_tensor(g, &bad, &out), AG_EINVAL);
    assert_errmsg(ctx, "dim 1 is -1");
    bad = t;
    bad.rank = -1;
    assert_int_equal(ag_graph_make_tensor(g, &bad, &out), AG_EINVAL);
    ag_tensor sbad = st;
    sbad.nbytes = 4;
    assert_int_equal(ag_graph_make_tensor(g, &sbad, &out), AG_EINVAL);
    const char *nulls[2] = {"a", NULL};
    sbad = st;
    sbad.strings = nulls;
    assert_int_equal(ag_graph_make_tensor(g, &sbad, &out), AG_EINVAL);
    assert_errmsg(ctx, "element 1 is NULL");
    int64_t big[4] = {AG_MAX_DIM, AG_MAX_DIM, AG_MAX_DIM, AG_MAX_DIM};
    bad = t;
    bad.rank = 4;
    bad.dims = big;
    bad.data = NULL;
    assert_int_equal(ag_graph_make_tensor(g, &bad, &out), AG_EINVAL);

    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

/* A graph with subgraphs, attributes, tensors, descriptors and edges. */
static ag_status build_rich(ag_ctx *ctx, ag_graph **out)
{
    ag_graph *g = NULL;
    ag_status st;
    ag_node_id x, c, add, iff, o, td, tr, tout, ed, eout;
    ag_sub_id th, el;
    *out = NULL;
    AG_TRY(ag_graph_create(ctx, "main", &g));
#define T(e)                  \
    do {                      \
        if ((st = (e)) != AG_OK) \
            goto fail;        \
    } while (0)
    T(ag_graph_add_node(g, AG_ROOT, "Data", "x", 0, 1, &x));
    T(ag_graph_add_node(g, AG_ROOT, "Const", "c", 0, 1, &c));
    T(ag_graph_add_node(g, AG_ROOT, "Add", "add", 2, 1, &add));
    T(ag_graph_add_node(g, AG_ROOT, "If", "if", 2, 1, &iff));
    T(ag_graph_add_node(g, AG_ROOT, "NetOutput", "out", 1, 0, &o));
    int64_t dims[2] = {2, 2};
    float vals[4] = {1, 2, 3, 4};
    ag_tensor t = {.dtype = AG_DT_F32, .rank = 2, .dims = dims, .nbytes = 16, .data = vals};
    ag_attr ta = {.name = "value", .kind = AG_ATTR_TENSOR, .count = 1, .v.t = &t};
    T(ag_attrs_set(g, ag_node_attrs(g, c), &ta));
    ag_tensor_desc *xd = ag_node_output_desc(g, x, 0);
    xd->dtype = AG_DT_F32;
    T(ag_desc_set_shape(g, xd, 2, dims));
    T(ag_desc_set_name(g, xd, "x"));
    T(ag_desc_set_value(g, ag_node_output_desc(g, c, 0), &t));
    T(ag_graph_add_edge(g, x, 0, add, 0));
    T(ag_graph_add_edge(g, c, 0, add, 1));
    T(ag_graph_add_edge(g, add, 0, iff, 0));
    T(ag_graph_add_edge(g, x, 0, iff, 1));
    T(ag_graph_add_edge(g, iff, 0, o, 0));
    T(ag_graph_add_ctrl_edge(g, c, x));
    int64_t il[3] = {1, 2, 3};
    const char *sl[2] = {"u", "v"};
    ag_attr ss = {.name = "names", .kind = AG_ATTR_STRINGS, .count = 2, .v.ss = sl};
    T(ag_attrs_set_ints(g, ag_node_attrs(g, add), "axes", il, 3));
    T(ag_attrs_set(g, ag_node_attrs(g, add), &ss));
    T(ag_attrs_set_string(g, ag_node_attrs(g, add), "_user_stream_label", "s1"));
    T(ag_attrs_set_bool(g, ag_node_attrs(g, add), "flag", true));
    T(ag_graph_add_subgraph(g, iff, "then", &th));
    T(ag_graph_add_subgraph(g, iff, "else", &el));
    T(ag_graph_add_node(g, th, "Data", "d", 0, 1, &td));
    T(ag_graph_add_node(g, th, "Relu", "r", 1, 1, &tr));
    T(ag_graph_add_node(g, th, "NetOutput", "o", 1, 0, &tout));
    T(ag_attrs_set_int(g, ag_node_attrs(g, td), "_parent_node_index", 0));
    T(ag_graph_add_edge(g, td, 0, tr, 0));
    T(ag_graph_add_edge(g, tr, 0, tout, 0));
    T(ag_attrs_set_int(g, ag_node_input_desc(g, tout, 0)->attrs, "_parent_node_index", 0));
    T(ag_graph_add_node(g, el, "Data", "d", 0, 1, &ed));
    T(ag_graph_add_node(g, el, "NetOutput", "o", 1, 0, &eout));
    T(ag_attrs_set_int(g, ag_node_attrs(g, ed), "_parent_node_index", 1));
    T(ag_graph_add_edge(g, ed, 0, eout, 0));
    T(ag_node_set_io_count(g, eout, 2, 0));
    T(ag_node_set_name(g, tr, "relu"));
#undef T
    *out = g;
    return AG_OK;
fail:
    ag_graph_destroy(g);
    return st;
}

static ag_status oom_build_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_graph *g, *h;
    AG_TRY(build_rich(ctx, &g));
    ag_status st = build_rich(ctx, &h);
    if (st == AG_OK) {
        assert_graph_equal(g, h);
        st = ag_graph_verify(g);
        ag_graph_destroy(h);
    }
    ag_graph_destroy(g);
    return st;
}

static void test_oom_build(void **state)
{
    (void)state;
    uint64_t runs = AG_TEST_OOM_SWEEP(oom_build_body, NULL);
    assert_true(runs > 20);
}

static void test_equal(void **state)
{
    (void)state;
    ag_ctx *ctx = agtest_ctx();
    ag_graph *a, *b;
    char why[256];
    assert_int_equal(build_rich(ctx, &a), AG_OK);
    assert_int_equal(build_rich(ctx, &b), AG_OK);
    assert_true(ag_graph_equal(a, b, why, sizeof why));
    assert_graph_equal(b, a);

    ag_node_id add = ag_sub_find_node(b, AG_ROOT, "add");
    assert_int_equal(ag_attrs_set_int(b, ag_node_attrs(b, add), "axes", 4), AG_OK);
    assert_false(ag_graph_equal(a, b, why, sizeof why));
    assert_non_null(strstr(why, "\"axes\""));
    assert_int_equal(ag_attrs_set_ints(b, ag_node_attrs(b, add), "axes", (int64_t[]){1, 2, 3}, 3), AG_OK);
    assert_true(ag_graph_equal(a, b, why, sizeof why));

    ag_node_id c = ag_sub_find_node(b, AG_ROOT, "c");
    ag_node_id x = ag_sub_find_node(b, AG_ROOT, "x");
    assert_int_equal(ag_graph_remove_ctrl_edge(b, c, x), AG_OK);
    assert_false(ag_graph_equal(a, b, why, sizeof why));
    assert_non_null(strstr(why, "control"));
    agtest_ctrl(b, c, x);
    assert_true(ag_graph_equal(a, b, NULL, 0));

    ag_sub_id th = ag_graph_find_sub(b, "then");
    ag_node_id r = ag_sub_find_node(b, th, "relu");
    ag_node_set_type(b, r, "Gelu");
    assert_false(ag_graph_equal(a, b, why, sizeof why));
    assert_non_null(strstr(why, "Gelu"));
    ag_node_set_type(b, r, "Relu");

    ag_tensor_desc *d = ag_node_output_desc(b, x, 0);
    d->format = AG_FMT_NHWC;
    assert_false(ag_graph_equal(a, b, why, sizeof why));
    assert_non_null(strstr(why, "format"));
    d->format = AG_FMT_ND;

    /* A tensor differing in one byte differs by digest. */
    float vals[4] = {1, 2, 3, 5};
    int64_t dims[2] = {2, 2};
    ag_tensor t = {.dtype = AG_DT_F32, .rank = 2, .dims = dims, .nbytes = 16, .data = vals};
    assert_int_equal(ag_desc_set_value(b, ag_node_output_desc(b, c, 0), &t), AG_OK);
    assert_false(ag_graph_equal(a, b, why, sizeof why));
    assert_non_null(strstr(why, "digest"));

    ag_graph_destroy(a);
    ag_graph_destroy(b);
    ag_ctx_destroy(ctx);
}

/* Building a long chain must be linear: no scans per added node or edge. */
static void test_chain_1m(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    const uint32_t n = 200000;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    const uint32_t n = 200000;
#else
    const uint32_t n = 1000000;
#endif
#else
    const uint32_t n = 1000000;
#endif
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = new_graph(ctx, "chain");
    clock_t t0 = clock();
    ag_node_id prev = agtest_node(g, AG_ROOT, "Data", "in", 0, 1);
    ag_node_id id;
    char name[32];
    for (uint32_t k = 1; k < n; k++) {
        snprintf(name, sizeof name, "n%u", k);
        assert_int_equal(ag_graph_add_node(g, AG_ROOT, "Relu", name, 1, 1, &id), AG_OK);
        assert_int_equal(ag_graph_add_edge(g, prev, 0, id, 0), AG_OK);
        prev = id;
    }
    double build_s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    assert_int_equal(ag_graph_node_count(g), n);
    ag_node_id *order = malloc((size_t)n * sizeof *order);
    uint32_t cnt = 0;
    t0 = clock();
    assert_int_equal(ag_graph_topo_order(g, order, &cnt), AG_OK);
    double topo_s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    assert_int_equal(cnt, n);
    assert_int_equal(order[n - 1], prev);
    assert_int_equal(ag_sub_node_at(g, AG_ROOT, n / 2), order[n / 2]);
    assert_int_equal(ag_graph_verify(g), AG_OK);
    free(order);
    fprintf(stderr, "chain of %u nodes: build %.2fs, topo %.2fs\n", n, build_s, topo_s);
    /* Generous bound: a quadratic build takes hours at this size. */
    assert_true(build_s < 30.0);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_basic), cmocka_unit_test(test_errors), cmocka_unit_test(test_attrs_all_kinds),
        cmocka_unit_test(test_descs),       cmocka_unit_test(test_tensors), cmocka_unit_test(test_oom_build),
        cmocka_unit_test(test_equal),       cmocka_unit_test(test_chain_1m),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
