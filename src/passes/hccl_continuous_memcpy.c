/* HcclContinuousMemcpyPass (seed 3.1.2, reference notes 5.2): an op that
 * needs its inputs laid out as one contiguous block cannot take a buffer the
 * planner does not place (const, graph input, variable) or one that another
 * contiguous block claims too; an input that must live in P2P memory cannot
 * be such a fixed buffer either.  Each of those inputs gets its own copy. */
#include "passes/pass_internal.h"

#define PASS "hccl_continuous_memcpy"
#define TAG "HcclContinuousMemcpyPass"

/* Buffers the memory planner does not place: Const/Constant, data-like and
 * var-like producers (the reference's type sets, notes 2.2). */
static bool fixed_producer(const ag_pass_env *env, ag_node_id p)
{
    ag_op_kind k = ag_ops_node_kind(env->ops, env->g, p);
    return k == AG_OPK_CONST || ag_op_kind_is_data_like(k) || ag_op_kind_is_var_like(k);
}

/* Inputs fed by src that need a contiguous block; a node taking src twice
 * counts twice, since one buffer cannot sit at two places of a block. */
static uint32_t continuous_readers(const ag_pass_env *env, ag_port src)
{
    const ag_graph *g = env->g;
    uint32_t nc = ag_node_output_nconsumers(g, src.node, src.index), n = 0;
    for (uint32_t k = 0; k < nc; k++)
        if (ag_ops_node_flags(env->ops, g, ag_node_output_consumer(g, src.node, src.index, k).node) &
            AG_OPF_CONTINUOUS_INPUT)
            n++;
    return n;
}

static ag_status handle_node(ag_pass_env *env, ag_node_id n)
{
    ag_graph *g = env->g;
    uint32_t nin = ag_node_num_inputs(g, n);
    if (ag_ops_node_flags(env->ops, g, n) & AG_OPF_CONTINUOUS_INPUT) {
        for (uint32_t i = 0; i < nin; i++) {
            ag_port src = ag_node_input_src(g, n, i);
            if (src.node == AG_NONE)
                continue;
            ag_why why = {.pass = PASS, .rule = NULL};
            if (fixed_producer(env, src.node))
                why.rule = "hccl continuous: const/data/variable input";
            else if (continuous_readers(env, src) > 1)
                why.rule = "hccl continuous: input shared by continuous consumers";
            else
                continue;
            AG_TRY(ag_hccl_insert_identity(env, &why, TAG, n, i));
        }
    }
    /* After the loop above an input copied there has an Identity producer,
     * so it is not copied twice. */
    for (uint32_t i = 0; i < nin; i++) {
        if (ag_ops_input_mem_type(env->ops, g, n, i) != AG_MEM_P2P)
            continue;
        ag_port src = ag_node_input_src(g, n, i);
        if (src.node == AG_NONE || !fixed_producer(env, src.node))
            continue;
        ag_why why = {.pass = PASS, .rule = "hccl continuous: p2p input from const/data/variable"};
        AG_TRY(ag_hccl_insert_identity(env, &why, TAG, n, i));
    }
    return AG_OK;
}

ag_status ag_pass_hccl_continuous_memcpy(ag_pass_env *env)
{
    ag_graph *g = env->g;
    /* Nodes in creation order, those that existed when the pass started (the
     * copies it inserts need nothing themselves). */
    uint32_t cap0 = ag_graph_node_capacity(g);
    for (ag_node_id n = 0; n < cap0; n++) {
        if (!ag_node_alive(g, n))
            continue;
        AG_TRY(handle_node(env, n));
    }
    return AG_OK;
}
