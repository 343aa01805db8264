/* InplaceSupportCheckPass (seed 3.1.4, reference notes 5.5): marks on output
 * 0 of single-output nodes the first input whose buffer the output could
 * reuse (_inplace_support_input_index).  The hint is for other components;
 * the memory planner's in-place merging reads _output_inplace_ability.  The
 * reference runs this pass only for host execution; here it always runs. */
#include "passes/pass_internal.h"

/* Sources whose memory must not be overwritten: graph inputs, constants
 * (Const and Constant only, as in the reference) and variables. */
static bool is_source(ag_op_kind k)
{
    return ag_op_kind_is_data_like(k) || k == AG_OPK_CONST || ag_op_kind_is_var_like(k);
}

static bool same_type(const ag_tensor_desc *a, const ag_tensor_desc *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (int32_t d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return false;
    return true;
}

/* First input that passes every check, or UINT32_MAX. */
static uint32_t inplace_input(const ag_pass_env *env, ag_node_id n)
{
    const ag_graph *g = env->g;
    const ag_tensor_desc *out = ag_node_output_desc_c(g, n, 0);
    for (uint32_t i = 0; i < ag_node_num_inputs(g, n); i++) {
        ag_port p = ag_node_input_src(g, n, i);
        if (p.node == AG_NONE || is_source(ag_ops_node_kind(env->ops, g, p.node)))
            continue;
        /* Another reader of the producer's buffer would see it overwritten. */
        if (ag_node_output_nconsumers(g, p.node, p.index) != 1)
            continue;
        if (same_type(ag_node_input_desc_c(g, n, i), out))
            return i;
    }
    return UINT32_MAX;
}

ag_status ag_pass_inplace_support_check(ag_pass_env *env)
{
    ag_graph *g = env->g;
    for (ag_sub_id s = 0; s < ag_graph_sub_count(g); s++) {
        if (!ag_sub_alive(g, s))
            continue;
        for (uint32_t k = 0; k < ag_sub_node_count(g, s); k++) {
            ag_node_id n = ag_sub_node_at(g, s, k);
            if (ag_node_num_outputs(g, n) != 1)
                continue;
            uint32_t i = inplace_input(env, n);
            if (i == UINT32_MAX)
                continue;
            ag_tensor_desc *d = ag_node_output_desc(g, n, 0);
            int64_t old;
            if (ag_attrs_get_int(d->attrs, "_inplace_support_input_index", &old) && old == (int64_t)i)
                continue;
            AG_TRY(ag_attrs_set_int(g, d->attrs, "_inplace_support_input_index", (int64_t)i));
        }
    }
    return AG_OK;
}
