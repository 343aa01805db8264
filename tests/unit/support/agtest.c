/* Shared unit-test helpers: the OOM sweep (allocation failure injected at
 * every call of an entry point, checking status and leaks), graph-building
 * shortcuts and file reading. */
#include "support/agtest.h"

#include <stdio.h>

static ag_status run_once(agtest_body_fn fn, void *ud, uint64_t fail_at, int repeat, ag_testalloc *ta)
{
    ag_testalloc_init(ta, fail_at, repeat);
    ag_allocator hook = ag_testalloc_hook(ta);
    ag_ctx *ctx = ag_ctx_create(&hook);
    if (ctx == NULL) {
        /* Only the injected failure may prevent creating the context. */
        assert_true(ta->nfail > 0);
        assert_int_equal(ta->live_blocks, 0);
        return AG_ENOMEM;
    }
    ag_status st = fn(ctx, ud);
    if (st != AG_OK && st != AG_ENOMEM)
        fprintf(stderr, "oom sweep: fail_at=%llu repeat=%d: status %s: %s\n", (unsigned long long)fail_at,
                repeat, ag_status_str(st), ag_ctx_errmsg(ctx));
    assert_true(st == AG_OK || st == AG_ENOMEM);
    if (st == AG_ENOMEM)
        assert_true(ta->nfail > 0); /* ENOMEM without an injected failure is a bug */
    ag_ctx_destroy(ctx);
    if (ta->live_blocks != 0)
        fprintf(stderr, "oom sweep: fail_at=%llu repeat=%d: %llu blocks leaked\n", (unsigned long long)fail_at,
                repeat, (unsigned long long)ta->live_blocks);
    assert_int_equal(ta->live_blocks, 0);
    return st;
}

uint64_t agtest_oom_sweep(agtest_body_fn fn, void *ud, uint64_t max_n)
{
    ag_testalloc ta;
    uint64_t runs = 0;
    /* A clean run first: the body must succeed without injection. */
    assert_int_equal(run_once(fn, ud, 0, 0, &ta), AG_OK);
    uint64_t total = ta.calls;
    runs++;
    for (uint64_t n = 1;; n++) {
        if (n > max_n)
            fail_msg("oom sweep did not finish within %llu injections", (unsigned long long)max_n);
        run_once(fn, ud, n, 0, &ta);
        runs++;
        if (ta.nfail == 0)
            break;
    }
    /* Persistent failure: cleanup paths must not depend on allocation succeeding. */
    uint64_t persist[3] = {1, total / 2 + 1, total};
    for (int k = 0; k < 3; k++) {
        if (persist[k] == 0)
            continue;
        run_once(fn, ud, persist[k], 1, &ta);
        runs++;
    }
    return runs;
}

ag_ctx *agtest_ctx(void)
{
    ag_ctx *ctx = ag_ctx_create(NULL);
    assert_non_null(ctx);
    return ctx;
}

ag_ctx *agtest_ctx_counted(ag_testalloc *ta)
{
    ag_testalloc_init(ta, 0, 0);
    ag_allocator hook = ag_testalloc_hook(ta);
    ag_ctx *ctx = ag_ctx_create(&hook);
    assert_non_null(ctx);
    return ctx;
}

bool agtest_errmsg_has(const ag_ctx *ctx, const char *needle)
{
    return strstr(ag_ctx_errmsg(ctx), needle) != NULL;
}

void agtest_assert_errmsg(const ag_ctx *ctx, const char *needle, const char *file, int line)
{
    if (!agtest_errmsg_has(ctx, needle)) {
        fprintf(stderr, "%s:%d: error message \"%s\" lacks \"%s\"\n", file, line, ag_ctx_errmsg(ctx), needle);
        fail();
    }
}

ag_node_id agtest_node(ag_graph *g, ag_sub_id s, const char *type, const char *name, uint32_t nin,
                       uint32_t nout)
{
    ag_node_id n = AG_NONE;
    ag_status st = ag_graph_add_node(g, s, type, name, nin, nout, &n);
    if (st != AG_OK)
        fprintf(stderr, "agtest_node(%s): %s\n", name ? name : "(null)", ag_ctx_errmsg(ag_graph_ctx(g)));
    assert_int_equal(st, AG_OK);
    assert_int_not_equal(n, AG_NONE);
    return n;
}

void agtest_edge(ag_graph *g, ag_node_id src, uint32_t o, ag_node_id dst, uint32_t i)
{
    ag_status st = ag_graph_add_edge(g, src, o, dst, i);
    if (st != AG_OK)
        fprintf(stderr, "agtest_edge: %s\n", ag_ctx_errmsg(ag_graph_ctx(g)));
    assert_int_equal(st, AG_OK);
}

void agtest_ctrl(ag_graph *g, ag_node_id src, ag_node_id dst)
{
    ag_status st = ag_graph_add_ctrl_edge(g, src, dst);
    if (st != AG_OK)
        fprintf(stderr, "agtest_ctrl: %s\n", ag_ctx_errmsg(ag_graph_ctx(g)));
    assert_int_equal(st, AG_OK);
}

ag_sub_id agtest_sub(ag_graph *g, ag_node_id parent, const char *name)
{
    ag_sub_id s = AG_NONE;
    ag_status st = ag_graph_add_subgraph(g, parent, name, &s);
    if (st != AG_OK)
        fprintf(stderr, "agtest_sub(%s): %s\n", name, ag_ctx_errmsg(ag_graph_ctx(g)));
    assert_int_equal(st, AG_OK);
    return s;
}

ag_node_id agtest_find(const ag_graph *g, ag_sub_id s, const char *name)
{
    ag_node_id n = ag_sub_find_node(g, s, name);
    if (n == AG_NONE)
        fprintf(stderr, "agtest_find: no node \"%s\" in subgraph %u\n", name, (unsigned)s);
    assert_int_not_equal(n, AG_NONE);
    return n;
}

char *agtest_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        cap *= 2;
        char *nb = realloc(buf, cap + 1);
        assert_non_null(nb);
        buf = nb;
    }
    assert_int_equal(ferror(f), 0);
    fclose(f);
    buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}

void agtest_assert_graph_equal(const ag_graph *a, const ag_graph *b, const char *file, int line)
{
    char why[512];
    if (!ag_graph_equal(a, b, why, sizeof why)) {
        fprintf(stderr, "%s:%d: graphs differ: %s\n", file, line, why);
        fail();
    }
}

ag_status agtest_pass_inputs(ag_ctx *ctx, const char *agt, ag_graph **g, ag_ops **ops, ag_report **rep)
{
    ag_status st = ag_text_read(ctx, agt, strlen(agt), "t.agt", g);
    if (st == AG_OK)
        st = ag_ops_create(ctx, ops);
    if (st == AG_OK)
        st = ag_report_create(ctx, rep);
    return st;
}
