/* The compile pipeline: the registered passes in the order they run
 * (DESIGN.md "The compile pipeline"), lookup by name, and the runner that
 * checks the graph's structure after every pass in debug builds so that a
 * broken rewrite is caught at the pass that made it. */
#include <stdio.h>

#include "passes/pass_internal.h"
#include "passes/layout_internal.h"

/* Order matters: copies for HCCL inputs come first so the later passes see
 * them as ordinary nodes; the semantic RW conflict pass runs after every
 * other isolation exists, so it does not add a second copy where one of the
 * dedicated passes already made one; the layout conflict pass comes last, on
 * the buffers (symbols) the rewritten graph defines.  lint is listed once, first, so that
 * `opt --passes=lint` runs it alone; ag_pipeline_run runs it before the other
 * passes and again after them, on the result. */
static const ag_pass_def passes[] = {
    {"lint", "warn where a writer of a shared buffer is not ordered against its other readers and writers "
             "(W18888); first and last in the pipeline",
     ag_pass_lint},
    {"hccl_memcpy", "copy inputs that collective ops modify in place (_input_mutable) when others still read them",
     ag_pass_hccl_memcpy},
    {"hccl_continuous_memcpy",
     "copy inputs of continuous-input or P2P collective ops that come from consts, data or variables",
     ag_pass_hccl_continuous_memcpy},
    {"inplace_support_check", "mark the input an op with one output may overwrite in place",
     ag_pass_inplace_support_check},
    {"atomic_addr_clean", "clear the outputs of atomic-accumulating ops before they run",
     ag_pass_atomic_addr_clean},
    {"subgraph_isolate", "copies at If/While/Case subgraph boundaries so branch and loop buffers stay apart",
     ag_pass_subgraph_isolate},
    {"memcpy_addr_async", "address-refreshing copies between user data and stream merges, outputs and HCCL ops",
     ag_pass_memcpy_addr_async},
    {"mark_same_addr", "pin the addresses that stream-switch ops read while memory is reused",
     ag_pass_mark_same_addr},
    {"rw_conflict", "copies where a write to a shared buffer could race a read (read/write matrix)",
     ag_pass_rw_conflict},
    {"layout_conflict",
     "copies where anchors sharing one buffer need incompatible memory (user, constant, continuous, special)",
     ag_pass_layout_conflict},
};
#define N_PASSES ((uint32_t)(sizeof passes / sizeof passes[0]))

uint32_t ag_pass_count(void)
{
    return N_PASSES;
}

const ag_pass_def *ag_pass_at(uint32_t k)
{
    return k < N_PASSES ? &passes[k] : NULL;
}

const ag_pass_def *ag_pass_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (uint32_t k = 0; k < N_PASSES; k++)
        if (strcmp(passes[k].name, name) == 0)
            return &passes[k];
    return NULL;
}

static ag_status run_def(ag_pass_env *env, const ag_pass_def *p)
{
    AG_TRY(p->run(env));
#if AG_DEBUG >= 2
    ag_status st = ag_graph_verify(env->g);
    if (st != AG_OK) {
        /* The verifier's message lives in the context; copy it before the
         * new message replaces it. */
        ag_ctx *ctx = ag_graph_ctx(env->g);
        char why[512];
        snprintf(why, sizeof why, "%s", ag_ctx_errmsg(ctx));
        return AG_ERR(ctx, st, "graph %s is inconsistent after pass %s: %s", ag_sub_name(env->g, AG_ROOT), p->name,
                      why);
    }
#endif
    return AG_OK;
}

ag_status ag_pass_run(ag_pass_env *env, const char *name)
{
    const ag_pass_def *p = ag_pass_find(name);
    if (p == NULL) {
        char known[512];
        size_t len = 0;
        known[0] = '\0';
        for (uint32_t k = 0; k < N_PASSES && len < sizeof known; k++) {
            int n = snprintf(known + len, sizeof known - len, "%s%s", k ? ", " : "", passes[k].name);
            if (n < 0)
                break;
            len += (size_t)n;
        }
        return AG_ERR(ag_graph_ctx(env->g), AG_ENOTFOUND, "unknown pass '%s' (known passes: %s)",
                      name ? name : "(null)", known);
    }
    return run_def(env, p);
}

ag_status ag_pipeline_run(ag_pass_env *env)
{
    /* passes[0] is lint: its two runs are told apart in their messages. */
    AG_TRY(ag_lint_run(env, "before"));
    for (uint32_t k = 1; k < N_PASSES; k++)
        AG_TRY(run_def(env, &passes[k]));
    return ag_lint_run(env, "after");
}

static bool is_disabled(const ag_pipeline_opts *opts, const char *name)
{
    for (uint32_t k = 0; opts && k < opts->ndisabled; k++)
        if (strcmp(opts->disabled[k], name) == 0)
            return true;
    return false;
}

ag_status ag_pipeline_run_opts(ag_pass_env *env, const ag_pipeline_opts *opts)
{
    for (uint32_t k = 0; opts && k < opts->ndisabled; k++)
        if (!ag_pass_find(opts->disabled[k]))
            return ag_pass_run(env, opts->disabled[k]); /* reports the unknown name */
    bool lint = !is_disabled(opts, passes[0].name);
    if (lint)
        AG_TRY(ag_lint_run(env, "before"));
    for (uint32_t k = 1; k < N_PASSES; k++)
        if (!is_disabled(opts, passes[k].name))
            AG_TRY(run_def(env, &passes[k]));
    return lint ? ag_lint_run(env, "after") : AG_OK;
}
