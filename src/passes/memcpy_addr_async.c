/* MemcpyAddrAsyncPass (seed 3.1.6, reference notes 5.6): zero copy hands the
 * user's buffers to the model by address, so anchors that need an address
 * of their own get a MemcpyAddrAsync in front: StreamMerge inputs from user
 * Data (found through subgraph boundaries), root NetOutput inputs from
 * constants, and RefData inputs of HCCL nodes whose feature map cannot be
 * refreshed. */
#include "passes/pass_internal.h"

#include <stdio.h>

#define PASS_NAME "memcpy_addr_async"
#define RULE_MERGE_ROOT "memcpy_addr_async: stream merge input from user data"
#define RULE_MERGE_KNOWN "memcpy_addr_async: stream merge input from known subgraph data"
#define RULE_NETOUTPUT "memcpy_addr_async: root netoutput input from const"
#define RULE_HCCL "memcpy_addr_async: hccl input from ref data with unrefreshable feature map"

static bool attr_bool(const ag_attrs *a, const char *name, bool *out)
{
    int64_t i;
    if (ag_attrs_get_bool(a, name, out))
        return true;
    if (!ag_attrs_get_int(a, name, &i))
        return false;
    *out = i != 0;
    return true;
}

static ag_op_kind kind_of(const ag_pass_env *env, ag_node_id n)
{
    return ag_ops_node_kind(env->ops, env->g, n);
}

/* Inserts a copy of type type on the edge feeding dst:i, named after the
 * producer.  It takes the stream label and rts label flag of label_src and
 * takes over its _is_connected_to_data mark (the copy now receives the
 * user's address). */
static ag_status insert_copy(ag_pass_env *env, const char *rule, ag_node_id dst, uint32_t i, const char *type,
                             ag_node_id label_src)
{
    ag_graph *g = env->g;
    ag_ctx *ctx = ag_graph_ctx(g);
    ag_port p = ag_node_input_src(g, dst, i);
    const char *pname = ag_node_name(g, p.node);
    size_t blen = strlen(pname) + strlen(type) + 2;
    size_t ncap = blen + 24;
    char *buf = ag_alloc(ctx, blen + ncap);
    if (!buf)
        return AG_OOM(ctx);
    char *name = buf + blen;
    snprintf(buf, blen, "%s_%s", pname, type);
    ag_status rc = ag_pass_unique_name(env, ag_node_owner(g, dst), buf, name, ncap);
    ag_node_id m = AG_NONE;
    const ag_why why = {PASS_NAME, rule};
    if (rc == AG_OK)
        rc = ag_pass_insert_before(env, &why, dst, i, type, name, &m);
    ag_free(ctx, buf, blen + ncap);
    AG_TRY(rc);

    const ag_attrs *la = ag_node_attrs_c(g, label_src);
    ag_attrs *ma = ag_node_attrs(g, m);
    const char *label;
    bool b;
    if (ag_attrs_get_string(la, "_stream_label", &label))
        AG_TRY(ag_attrs_set_string(g, ma, "_stream_label", label));
    if (attr_bool(la, "_rts_label_node", &b))
        AG_TRY(ag_attrs_set_bool(g, ma, "_rts_label_node", b));
    if (attr_bool(la, "_is_connected_to_data", &b) && b) {
        AG_TRY(ag_attrs_set_bool(g, ma, "_is_connected_to_data", true));
        AG_TRY(ag_attrs_set_bool(g, ag_node_attrs(g, label_src), "_is_connected_to_data", false));
    }
    return AG_OK;
}

static ag_status parent_index(const ag_pass_env *env, ag_node_id data, ag_node_id parent, uint32_t *out)
{
    const ag_graph *g = env->g;
    int64_t v;
    if (!ag_attrs_get_int(ag_node_attrs_c(g, data), "_parent_node_index", &v) || v < 0 ||
        (uint64_t)v >= ag_node_num_inputs(g, parent))
        return AG_ERR(ag_graph_ctx(g), AG_EINVAL,
                      "%s: node %s (%s) in graph %s: subgraph input without a valid _parent_node_index "
                      "(parent %s (%s) has %u inputs)",
                      PASS_NAME, ag_node_name(g, data), ag_node_type(g, data),
                      ag_sub_name(g, ag_node_owner(g, data)), ag_node_name(g, parent), ag_node_type(g, parent),
                      (unsigned)ag_node_num_inputs(g, parent));
    *out = (uint32_t)v;
    return AG_OK;
}

/* A PartitionedCall explicitly marked known-shape runs its subgraph as one
 * static model (the reference requires _is_unknown_shape present and false). */
static bool known_call(const ag_pass_env *env, ag_node_id n)
{
    bool unknown;
    return kind_of(env, n) == AG_OPK_CALL && attr_bool(ag_node_attrs_c(env->g, n), "_is_unknown_shape", &unknown) &&
           !unknown;
}

static bool aliases_variable(const ag_pass_env *env, ag_node_id data)
{
    const char *s;
    return ag_attrs_get_string(ag_node_attrs_c(env->g, data), "ref_var_src_var_name", &s) ||
           ag_ops_output_ref_var(env->g, data, 0) != NULL;
}

/* StreamMerge input i reads a Data node.  A root Data gets the copy right
 * there.  A subgraph Data is followed outwards (FindUserData): through
 * If/While/Case/unknown calls to the parent's input of the same index, until
 * a root Data (copy in front of the parent node that reads it) or a known
 * PartitionedCall (copy inside it, behind its Data, unless that Data aliases
 * a variable); anything else that is not a Data ends the search. */
static ag_status stream_merge_input(ag_pass_env *env, ag_node_id merge, uint32_t i)
{
    const ag_graph *g = env->g;
    ag_port p = ag_node_input_src(g, merge, i);
    if (p.node == AG_NONE || kind_of(env, p.node) != AG_OPK_DATA)
        return AG_OK;
    if (ag_node_owner(g, p.node) == AG_ROOT)
        return insert_copy(env, RULE_MERGE_ROOT, merge, i, "MemcpyAddrAsync", merge);
    ag_node_id data = p.node;
    ag_port cons = {merge, i};
    for (;;) {
        ag_node_id parent = ag_sub_parent(g, ag_node_owner(g, data));
        uint32_t k = 0;
        AG_TRY(parent_index(env, data, parent, &k));
        if (known_call(env, parent)) {
            if (aliases_variable(env, data))
                return AG_OK;
            return insert_copy(env, RULE_MERGE_KNOWN, cons.node, cons.index, "MemcpyAsync", cons.node);
        }
        ag_port q = ag_node_input_src(g, parent, k);
        if (q.node == AG_NONE || kind_of(env, q.node) != AG_OPK_DATA)
            return AG_OK;
        if (ag_node_owner(g, q.node) == AG_ROOT)
            return insert_copy(env, RULE_MERGE_ROOT, parent, k, "MemcpyAddrAsync", parent);
        data = q.node;
        cons.node = parent;
        cons.index = k;
    }
}

static bool has_zero_dim(const ag_tensor_desc *d)
{
    for (int32_t k = 0; k < d->rank; k++)
        if (d->dims[k] == 0)
            return true;
    return false;
}

/* Root NetOutput fed by a constant: the output is handed to the user by
 * address, which must not be the constant's.  (Data-fed outputs get a copy
 * only for heterogeneous, offline or single-op builds: options that do not
 * exist here.) */
static ag_status netoutput_inputs(ag_pass_env *env, ag_node_id out)
{
    const ag_graph *g = env->g;
    for (uint32_t i = 0; i < ag_node_num_inputs(g, out); i++) {
        ag_port p = ag_node_input_src(g, out, i);
        if (p.node == AG_NONE || kind_of(env, p.node) != AG_OPK_CONST ||
            has_zero_dim(ag_node_output_desc_c(g, p.node, p.index)))
            continue;
        AG_TRY(insert_copy(env, RULE_NETOUTPUT, out, i, "MemcpyAddrAsync", p.node));
    }
    return AG_OK;
}

/* An HCCL node cannot have its addresses refreshed when the feature map is
 * not refreshable, so a RefData (whose address the user refreshes) must not
 * reach it directly.  The reference reads that from a build option; here the
 * HCCL node says it with _unrefreshable_feature_map=true (default: the
 * feature map is refreshable and nothing is inserted). */
static ag_status hccl_ref_data_inputs(ag_pass_env *env, ag_node_id n)
{
    const ag_graph *g = env->g;
    for (uint32_t i = 0; i < ag_node_num_inputs(g, n); i++) {
        ag_port p = ag_node_input_src(g, n, i);
        if (p.node != AG_NONE && kind_of(env, p.node) == AG_OPK_REF_DATA)
            AG_TRY(insert_copy(env, RULE_HCCL, n, i, "MemcpyAddrAsync", p.node));
    }
    return AG_OK;
}

static ag_status visit(ag_pass_env *env, ag_node_id n)
{
    const ag_graph *g = env->g;
    ag_op_kind k = kind_of(env, n);
    if (k == AG_OPK_STREAM_MERGE) {
        for (uint32_t i = 0; i < ag_node_num_inputs(g, n); i++)
            AG_TRY(stream_merge_input(env, n, i));
    }
    if (k == AG_OPK_NETOUTPUT && ag_node_owner(g, n) == AG_ROOT)
        AG_TRY(netoutput_inputs(env, n));
    bool unrefreshable;
    if ((ag_ops_node_flags(env->ops, g, n) & AG_OPF_HCCL) &&
        attr_bool(ag_node_attrs_c(g, n), "_unrefreshable_feature_map", &unrefreshable) && unrefreshable)
        AG_TRY(hccl_ref_data_inputs(env, n));
    return AG_OK;
}

ag_status ag_pass_memcpy_addr_async(ag_pass_env *env)
{
    ag_graph *g = env->g;
    /* Nodes inserted here are copies that none of the rules applies to, so
     * the ids present at the start are all there is to visit. */
    uint32_t cap = ag_graph_node_capacity(g);
    for (ag_node_id n = 0; n < cap; n++)
        if (ag_node_alive(g, n))
            AG_TRY(visit(env, n));
    return AG_OK;
}
