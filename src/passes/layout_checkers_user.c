/* The conditional layout checkers around user memory and unrefreshable
 * addresses (reference notes 4.5): graph inputs and outputs that share a
 * buffer with continuous, special-memory, constant or unrefreshable anchors,
 * and unrefreshable anchors that share a buffer with anything else.  Each
 * function decides which anchor of the pair an Identity isolates. */
#include "passes/layout_internal.h"

/* The user-input checkers' fallback: when the buffer reaches the other node
 * through an Assign (RefData -> Assign -> X), isolate after the Assign so the
 * variable is still written; otherwise copy the graph input (Identity after
 * the Data for all its consumers). */
static ag_status user_in_fallback(ag_layout_ctx *lc, const ag_lanchor *user_in, const ag_lanchor *other)
{
    bool done = false;
    AG_TRY(ag_layout_assign_var_insert_identity(lc, user_in, other, AG_LA_USER_IN, &done));
    return done ? AG_OK : ag_layout_conflict_at(lc, user_in, NULL);
}

/* unrefresh_in_checker: a: UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT.  When
 * addresses are never refreshed (neither a refreshable feature map nor the
 * physical refresh mode with a fixed-address node in the pair) both sides
 * keep the address they were built with; otherwise the unrefreshable input
 * must read a copy. */
ag_status ag_lc_unrefresh_in(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    if (!ag_layout_refresh_matters(lc, a, b))
        return AG_OK;
    return ag_layout_conflict_at(lc, a, NULL);
}

/* unrefresh_out_checker: a: UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT; the
 * same rule, the Identity after the unrefreshable output. */
ag_status ag_lc_unrefresh_out(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    if (!ag_layout_refresh_matters(lc, a, b))
        return AG_OK;
    return ag_layout_conflict_at(lc, a, NULL);
}

/* user_in_and_continuous_in_out_checker: a: USER_MEMORY_INPUT, b: CONTINUOUS
 * input or output.  A user buffer cannot be placed inside a continuous
 * block. */
ag_status ag_lc_user_in_cont(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    return user_in_fallback(lc, a, b);
}

/* UserInputAndNoPaddingContinuousInputChecker: a: USER_MEMORY_INPUT, b:
 * NOPADDING_CONTINUOUS_INPUT.  When every input of the concat-like node comes
 * from one buffer (a variable split into in-place slices and concatenated
 * again) the block is that buffer and nothing needs moving. */
ag_status ag_lc_user_in_nopad_cont_in(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    if (ag_layout_all_real_inputs_same(lc, b->node))
        return AG_OK;
    return user_in_fallback(lc, a, b);
}

/* UserInputAndNoPaddingContinuousOutputChecker: a: USER_MEMORY_INPUT, b:
 * NOPADDING_CONTINUOUS_OUTPUT.  The runtime can split a user buffer in place
 * unless the build cannot rely on it (offline, single-op or heterogeneous
 * builds: _user_input_nopadding_continuous_output=false). */
ag_status ag_lc_user_in_nopad_cont_out(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    if (lc->info.user_in_nopad_cont_out_supported)
        return AG_OK;
    return user_in_fallback(lc, a, b);
}

/* user_in_and_unrefresh_out_checker: a: USER_MEMORY_INPUT, b:
 * UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT.  When addresses are refreshed
 * the unrefreshable output gets its own copy; otherwise copying the user
 * input (whose address changes every run anyway) is enough. */
ag_status ag_lc_user_in_unrefresh_out(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    bool done = false;
    AG_TRY(ag_layout_assign_var_insert_identity(lc, a, b, AG_LA_USER_IN, &done));
    if (done)
        return AG_OK;
    return ag_layout_conflict_at(lc, ag_layout_refresh_matters(lc, a, b) ? b : a, NULL);
}

/* user_in_and_rts_special_out_checker: a: USER_MEMORY_INPUT, b:
 * RTS_SPECIAL_TYPE_OUTPUT.  A user buffer is never in special memory. */
ag_status ag_lc_user_in_rts_out(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    return user_in_fallback(lc, a, b);
}

/* user_out_and_continuous_input: a: USER_MEMORY_OUTPUT, b: (no-padding)
 * CONTINUOUS_INPUT.  A graph output read straight from the concat-like node
 * (whose output is its input block) is that block; any other graph output
 * sharing the buffer gets a copy. */
ag_status ag_lc_user_out_cont_in(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    ag_port p = ag_node_input_src(lc->g, a->node, a->index);
    if (p.node != AG_NONE && p.node == b->node)
        return AG_OK;
    return ag_layout_conflict_at(lc, a, NULL);
}

/* user_out_and_immutable_out_checker: a: USER_MEMORY_OUTPUT, b:
 * IMMUTABLE_ADDRESS_OUTPUT.  Only a static root hands the user its output
 * buffers (a dynamic root copies outputs itself); variables are exempt, a
 * constant returned as a graph output gets a copy. */
ag_status ag_lc_user_out_immutable_out(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    if (!lc->info.root_static)
        return AG_OK;
    if (ag_op_kind_is_var_like(ag_ops_node_kind(lc->ops, lc->g, b->node)))
        return AG_OK;
    return ag_layout_conflict_at(lc, a, NULL);
}

/* user_out_and_unrefresh_in_checker: a: USER_MEMORY_OUTPUT, b:
 * UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT.  With refreshed addresses the
 * unrefreshable input reads a copy; otherwise the graph output is copied. */
ag_status ag_lc_user_out_unrefresh_in(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    return ag_layout_conflict_at(lc, ag_layout_refresh_matters(lc, a, b) ? b : a, NULL);
}

/* user_out_and_unrefresh_out_checker: a: USER_MEMORY_OUTPUT, b:
 * UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT; the same choice, the copy
 * after the unrefreshable output. */
ag_status ag_lc_user_out_unrefresh_out(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    return ag_layout_conflict_at(lc, ag_layout_refresh_matters(lc, a, b) ? b : a, NULL);
}
