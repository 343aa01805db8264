/* Shared helpers of the cmocka unit tests: the allocation-failure sweep that
 * every module's tests run over their entry points, small graph-building
 * shortcuts that assert success, and file reading.  Include after nothing:
 * this header pulls in what cmocka.h needs. */
#ifndef AGTEST_H
#define AGTEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "aliasguard/aliasguard.h"

/* Body of an OOM sweep: must create and destroy everything it makes with ctx
 * and return AG_OK, or the first failing status (AG_ENOMEM under injection). */
typedef ag_status (*agtest_body_fn)(ag_ctx *ctx, void *ud);

/* For N = 1, 2, ... runs fn on a fresh context whose allocator fails the Nth
 * call, until a run injects no failure (or N > max_n, which fails the test).
 * Each run must return AG_OK or AG_ENOMEM (AG_OK only when nothing failed or
 * the failure was recovered) and leave no live block.  Then runs a few times
 * with failures that persist (repeat=1).  Returns the number of runs. */
uint64_t agtest_oom_sweep(agtest_body_fn fn, void *ud, uint64_t max_n);
#define AG_TEST_OOM_SWEEP(fn, ud) agtest_oom_sweep((fn), (ud), UINT64_C(200000))

/* What a pass test needs: the graph read from .agt text (named "t.agt"),
 * the builtin ops and an empty report.  Stops at the first failure, leaving
 * what was made in the out-parameters for the caller to destroy. */
ag_status agtest_pass_inputs(ag_ctx *ctx, const char *agt, ag_graph **g, ag_ops **ops, ag_report **rep);

/* A context on the C library allocator (asserts non-NULL). */
ag_ctx *agtest_ctx(void);
/* The same through the test allocator *ta, reset and armed never to fail:
 * a test counts its live blocks and injects failures through it. */
ag_ctx *agtest_ctx_counted(ag_testalloc *ta);

/* True when the context's last error message contains needle. */
bool agtest_errmsg_has(const ag_ctx *ctx, const char *needle);
/* Asserts that the last error message of ctx contains needle, printing it if not. */
#define assert_errmsg(ctx, needle) agtest_assert_errmsg((ctx), (needle), __FILE__, __LINE__)
void agtest_assert_errmsg(const ag_ctx *ctx, const char *needle, const char *file, int line);

/* Graph shortcuts that assert AG_OK. */
ag_node_id agtest_node(ag_graph *g, ag_sub_id s, const char *type, const char *name, uint32_t nin,
                       uint32_t nout);
void agtest_edge(ag_graph *g, ag_node_id src, uint32_t o, ag_node_id dst, uint32_t i);
void agtest_ctrl(ag_graph *g, ag_node_id src, ag_node_id dst);
ag_sub_id agtest_sub(ag_graph *g, ag_node_id parent, const char *name);
/* Node by name in subgraph s (asserts it exists). */
ag_node_id agtest_find(const ag_graph *g, ag_sub_id s, const char *name);

/* Reads a whole file (malloc'ed, NUL-terminated; *len may be NULL); asserts. */
char *agtest_read_file(const char *path, size_t *len);

/* Asserts that two graphs are ag_graph_equal, printing the reason if not. */
#define assert_graph_equal(a, b) agtest_assert_graph_equal((a), (b), __FILE__, __LINE__)
void agtest_assert_graph_equal(const ag_graph *a, const ag_graph *b, const char *file, int line);

#endif
