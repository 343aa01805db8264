/* Fuzz target of the text IR reader: any bytes must either be rejected with
 * a message or parse into a graph whose print parses back to an equal graph
 * and prints identically (the canonical-print promise of docs/ir.md). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aliasguard/aliasguard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *print(ag_graph *g, size_t *len)
{
    ag_membuf mb;
    ag_membuf_init(&mb, ag_graph_ctx(g));
    ag_text_write_opts o = ag_text_write_defaults();
    o.elide_bytes = UINT64_MAX;
    ag_status st = ag_text_write(g, &o, ag_sink_membuf(&mb));
    if (st != AG_OK) {
        fprintf(stderr, "fuzz_text: printing a parsed graph failed: %s\n", ag_ctx_errmsg(ag_graph_ctx(g)));
        abort();
    }
    char *out = malloc(mb.len + 1);
    if (!out)
        abort();
    memcpy(out, mb.data ? mb.data : "", mb.len);
    out[mb.len] = 0;
    *len = mb.len;
    ag_membuf_free(&mb);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ag_ctx *ctx = ag_ctx_create(NULL);
    if (!ctx)
        return 0;
    ag_graph *g = NULL;
    if (ag_text_read(ctx, (const char *)data, size, "fuzz.agt", &g) != AG_OK) {
        if (g != NULL || ag_ctx_errmsg(ctx)[0] == 0)
            abort(); /* failures leave no graph and always explain themselves */
        ag_ctx_destroy(ctx);
        return 0;
    }
    size_t n1, n2;
    char *p1 = print(g, &n1);
    ag_graph *h = NULL;
    if (ag_text_read(ctx, p1, n1, "print.agt", &h) != AG_OK) {
        fprintf(stderr, "fuzz_text: the print does not parse: %s\n%s", ag_ctx_errmsg(ctx), p1);
        abort();
    }
    char why[256] = "";
    if (!ag_graph_equal(g, h, why, sizeof why)) {
        fprintf(stderr, "fuzz_text: reparsed graph differs: %s\n", why);
        abort();
    }
    char *p2 = print(h, &n2);
    if (n1 != n2 || memcmp(p1, p2, n1) != 0) {
        fprintf(stderr, "fuzz_text: second print differs\n--- first\n%s--- second\n%s", p1, p2);
        abort();
    }
    free(p1);
    free(p2);
    ag_graph_destroy(g);
    ag_graph_destroy(h);
    ag_ctx_destroy(ctx);
    return 0;
}
