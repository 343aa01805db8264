/* The execution-mode latch: a context's identity (PROGRAM or KERNEL) is
 * written once by whichever init runs first and never changes again, so a
 * context whose kernel init failed can never be recycled as a program
 * context (seed 004, "ExecutionModeLatch"). */
#include "kernel/kernel_internal.h"

ag_status ag_latch_set(ag_mode_latch *l, ag_exec_mode mode)
{
    if (l->latched && l->mode != mode)
        return AG_KST(AG_KERNEL_ERR_INVALID_STATE);
    l->mode = mode;
    l->latched = true;
    return AG_OK;
}

bool ag_latch_is_kernel(const ag_mode_latch *l)
{
    return l->latched && l->mode == AG_EXEC_KERNEL;
}
