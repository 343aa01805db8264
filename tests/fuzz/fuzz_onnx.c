/* Fuzz target for the ONNX importer: arbitrary bytes as a ModelProto, with
 * shape inference and declared-type filling on.  Each input also runs with
 * allocation failures injected at a few points; anything but a clean status,
 * or a leaked block, aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "aliasguard/aliasguard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t run(const uint8_t *data, size_t size, uint64_t fail_at)
{
    ag_testalloc ta;
    ag_testalloc_init(&ta, fail_at, 0);
    ag_allocator hook = ag_testalloc_hook(&ta);
    ag_ctx *ctx = ag_ctx_create(&hook);
    if (!ctx)
        return 0;
    ag_onnx_opts o = ag_onnx_defaults();
    ag_onnx_report rep;
    o.report = &rep;
    ag_graph *g = NULL;
    ag_status st = ag_onnx_import(ctx, data, size, "fuzz.onnx", &o, &g);
    if (st == AG_OK) {
        if (!g)
            abort();
        ag_status v = ag_graph_verify(g); /* may itself run out of injected memory */
        if (v != AG_OK && v != AG_ENOMEM) {
            fprintf(stderr, "fuzz_onnx: imported graph fails verification: %s\n", ag_ctx_errmsg(ctx));
            abort();
        }
    } else if (g || ag_ctx_errmsg(ctx)[0] == '\0') {
        abort(); /* a failure must leave no graph and say why */
    }
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
    if (ta.live_blocks != 0) {
        fprintf(stderr, "fuzz_onnx: %llu blocks leaked (fail_at %llu)\n", (unsigned long long)ta.live_blocks,
                (unsigned long long)fail_at);
        abort();
    }
    return ta.calls;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t calls = run(data, size, 0);
    if (calls > 2) {
        run(data, size, 1);
        run(data, size, calls / 2);
        run(data, size, calls - 1);
    }
    return 0;
}
