/* MarkSameAddrPass (seed 3.1.7): StreamSwitch and LabelSwitchByIndex read
 * their input through an address fixed when the model is loaded, so with
 * dynamic and static memory reuse the producer of that input must keep one
 * physical address.  The producer gets _alloc_fixed_addr (the output's value
 * name) and _alloc_fixed_addr_index (the output index); nothing is inserted. */
#include "passes/pass_internal.h"

/* The registry's fixed-addr flag names the switch types (the builtin table
 * also lists StreamSwitchN and LabelSwitch, which read their input the same
 * way). */
static bool feeds_fixed_addr(const ag_pass_env *env, ag_node_id n, uint32_t o)
{
    const ag_graph *g = env->g;
    for (uint32_t k = 0; k < ag_node_output_nconsumers(g, n, o); k++) {
        ag_node_id c = ag_node_output_consumer(g, n, o, k).node;
        if (ag_ops_node_flags(env->ops, g, c) & AG_OPF_FIXED_ADDR)
            return true;
    }
    return false;
}

static ag_status mark(ag_pass_env *env, ag_node_id n, uint32_t o)
{
    ag_graph *g = env->g;
    ag_attrs *a = ag_node_attrs(g, n);
    const char *name = ag_node_output_desc_c(g, n, o)->name;
    const char *old;
    int64_t old_idx;
    if (ag_attrs_get_string(a, "_alloc_fixed_addr", &old) && strcmp(old, name) == 0 &&
        ag_attrs_get_int(a, "_alloc_fixed_addr_index", &old_idx) && old_idx == (int64_t)o)
        return AG_OK;
    AG_TRY(ag_attrs_set_string(g, a, "_alloc_fixed_addr", name));
    return ag_attrs_set_int(g, a, "_alloc_fixed_addr_index", (int64_t)o);
}

/* Every subgraph is visited: after control-flow lowering the switches may
 * sit in any of them.  Only the first output that feeds a switch is marked,
 * as in the reference (one node carries one fixed address). */
ag_status ag_pass_mark_same_addr(ag_pass_env *env)
{
    ag_graph *g = env->g;
    for (ag_sub_id s = 0; s < ag_graph_sub_count(g); s++) {
        if (!ag_sub_alive(g, s))
            continue;
        for (uint32_t k = 0; k < ag_sub_node_count(g, s); k++) {
            ag_node_id n = ag_sub_node_at(g, s, k);
            for (uint32_t o = 0; o < ag_node_num_outputs(g, n); o++) {
                if (feeds_fixed_addr(env, n, o)) {
                    AG_TRY(mark(env, n, o));
                    break;
                }
            }
        }
    }
    return AG_OK;
}
