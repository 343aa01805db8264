/* The compile pipeline: named passes over a graph, and the report in which
 * every pass explains each change it makes (the pass, the rule, the inserted
 * node or edge, and the producer and consumer anchors it separates) and
 * records warnings.  Order and rules: DESIGN.md "The compile pipeline". */
#ifndef ALIASGUARD_PASSES_H
#define ALIASGUARD_PASSES_H

#include "graph.h"
#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the report ---- */

typedef struct ag_report ag_report;

/* One isolation: a node a pass inserted (kind = its type, e.g. "Identity",
 * "MemcpyAsync", "Assign", "AtomicAddrClean") or a control edge it added to
 * make an order explicit (kind = "control", node = ""), with why.  Names are
 * copied when recorded, so they stay valid after the graph changes.
 * producer/consumer are "node:index" anchors ("node" alone for control ends,
 * "" when not applicable). */
typedef struct ag_isolation {
    const char *pass;     /* pass name, e.g. "rw_conflict" */
    const char *rule;     /* e.g. "matrix ReadOnlyConst x ScopeWriteable" */
    const char *kind;
    const char *graph;    /* subgraph name where the change was made */
    const char *node;     /* inserted node name, "" for a control edge */
    const char *producer; /* "node:out" */
    const char *consumer; /* "node:in" */
} ag_isolation;

typedef struct ag_warning {
    const char *pass;
    const char *code;      /* stable identifier, e.g. "W_RW_INVALID" */
    const char *message;
    const char *const *nodes; /* names of the nodes involved */
    uint32_t nnodes;
} ag_warning;

/* Warning codes starting with "N_" are notes: a pass reports what it did
 * (an identity it removed as useless), not a problem in the graph. */
bool ag_warning_is_note(const ag_warning *w);
/* Isolations plus warnings that are not notes: what makes `check` report
 * findings (exit 1). */
uint32_t ag_report_findings(const ag_report *r);

ag_status ag_report_create(ag_ctx *ctx, ag_report **out);
void ag_report_destroy(ag_report *r);
uint32_t ag_report_isolation_count(const ag_report *r);
const ag_isolation *ag_report_isolation_at(const ag_report *r, uint32_t k);
uint32_t ag_report_warning_count(const ag_report *r);
const ag_warning *ag_report_warning_at(const ag_report *r, uint32_t k);

/* Records an isolation (strings are copied).  Used by passes. */
ag_status ag_report_isolation(ag_report *r, const ag_isolation *iso);
/* Records a warning; nodes may be NULL when nnodes is 0. */
ag_status ag_report_warning(ag_report *r, const char *pass, const char *code, const char *const *nodes,
                            uint32_t nnodes, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

/* ---- passes ---- */

/* Everything a pass sees.  The report may be NULL (nothing is recorded). */
typedef struct ag_pass_env {
    ag_graph *g;
    const ag_ops *ops;
    ag_report *report;
} ag_pass_env;

typedef struct ag_pass_def {
    const char *name;    /* e.g. "rw_conflict" (file src/passes/rw_conflict.c) */
    const char *summary; /* one line for `aliasguard passes` */
    ag_status (*run)(ag_pass_env *env);
} ag_pass_def;

/* Passes in pipeline order. */
uint32_t ag_pass_count(void);
const ag_pass_def *ag_pass_at(uint32_t k);
const ag_pass_def *ag_pass_find(const char *name);

/* Runs one pass by name (AG_ENOTFOUND for an unknown name, listing the known
 * ones).  In debug builds the graph is verified after the pass. */
ag_status ag_pass_run(ag_pass_env *env, const char *name);
/* Runs every pass in order, with lint (ag_lint_run) first, phase "before",
 * and once more last, phase "after", on the result. */
ag_status ag_pipeline_run(ag_pass_env *env);

/* Options of ag_pipeline_run_opts.  disabled names passes the run skips
 * ("lint" skips both of its runs), so that a verifier can be shown what each
 * pass protects; an unknown name is AG_ENOTFOUND before anything runs. */
typedef struct ag_pipeline_opts {
    size_t size;                 /* sizeof(ag_pipeline_opts) */
    const char *const *disabled; /* may be NULL when ndisabled is 0 */
    uint32_t ndisabled;
} ag_pipeline_opts;
/* ag_pipeline_run without the disabled passes; opts NULL runs them all. */
ag_status ag_pipeline_run_opts(ag_pass_env *env, const ag_pipeline_opts *opts);

/* GraphLint (docs/passes.md "lint"): records a warning W18888 for every
 * writer of a buffer shared by several consumers that no path of data or
 * control edges orders against another consumer of it.  Reads the graph
 * only; does nothing without a report.  phase (NULL or "" for none) starts
 * each message as "<phase>: ". */
ag_status ag_lint_run(ag_pass_env *env, const char *phase);

#ifdef __cplusplus
}
#endif
#endif
