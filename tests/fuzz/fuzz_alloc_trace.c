/* Fuzz target of the allocation trace reader and replay (docs/runtime.md
 * "Trace format"): any bytes must either be refused with a message naming
 * the line, or parse into a trace whose own order the order check reads
 * (within its stream limit), and that replays on a small simulated device
 * in both allocator modes with the reuse checker on (once or several
 * times in a row), ending in AG_OK or a
 * clean error (the device full), leaving no device memory behind.  Traces
 * are capped so one input stays fast (seeds/alloc_trace/wide.trace crosses
 * 64 streams). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aliasguard/aliasguard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    ag_ctx *ctx = ag_ctx_create(NULL);
    if (!ctx)
        return 0;
    ag_alloc_trace *t = NULL;
    ag_status st = ag_alloc_trace_parse(ctx, "fuzz.trace", (const char *)data, size, &t);
    if (st != AG_OK) {
        if (ag_ctx_errmsg(ctx)[0] == '\0') {
            fprintf(stderr, "fuzz_alloc_trace: refused without a message (%s)\n", ag_status_str(st));
            abort();
        }
        ag_ctx_destroy(ctx);
        return 0;
    }
    /* the trace's own order: any parsed trace within the check's limit
     * passes; the count never exceeds the operations, and the first is
     * described exactly when there is one */
    if (ag_alloc_trace_streams(t) <= AG_ALLOC_CHECK_MAX_STREAMS) {
        ag_alloc_trace_order ord = {.size = sizeof ord};
        st = ag_alloc_trace_order_check(ctx, t, &ord);
        if (st != AG_OK || ord.unordered_uses > ag_alloc_trace_ops(t) ||
            (ord.unordered_uses != 0) != (strncmp(ord.first, "fuzz.trace:", 11) == 0)) {
            fprintf(stderr, "fuzz_alloc_trace: order check %s, %llu unordered, first '%s'\n", ag_status_str(st),
                    (unsigned long long)ord.unordered_uses, ord.first);
            abort();
        }
    }
    /* up to 8 streams; beyond 64 (views of more than one word, a sparse
     * MIF) with short traces, since each stream is a worker thread */
    uint32_t ns = ag_alloc_trace_streams(t);
    uint64_t nops = ag_alloc_trace_ops(t);
    if ((ns <= 8 && nops <= 256) || (ns <= 72 && nops <= 64)) {
        ag_device_sim_config dc = ag_device_sim_defaults();
        dc.capacity[AG_MEM_HBM] = 64u << 20;
        ag_device *dev = NULL;
        if (ag_device_sim_create(ctx, &dc, &dev) == AG_OK) {
            for (int m = 0; m < 2; m++) {
                ag_alloc_config c;
                ag_alloc_config_default(&c);
                c.mode = (ag_alloc_mode)m;
                /* the length picks the kernels' duration and one, two or
                 * three executions in a row (a live block at the end of a
                 * trace is then a clean error) */
                ag_alloc_replay_opts o = {.size = sizeof o,
                                          .check = true,
                                          .kernel_ticks = (uint32_t)(size % 5),
                                          .runs = 1u + (uint32_t)(size / 5 % 3)};
                ag_alloc_replay_result r = {.size = sizeof r};
                st = ag_alloc_replay(ctx, dev, t, &c, &o, &r);
                if (st != AG_OK && st != AG_ENOMEM && st != AG_EINFEASIBLE && st != AG_EINVAL) {
                    fprintf(stderr, "fuzz_alloc_trace: replay in %s mode failed: %s: %s\n",
                            ag_alloc_mode_name((ag_alloc_mode)m), ag_status_str(st), ag_ctx_errmsg(ctx));
                    abort();
                }
                if (st != AG_OK && ag_ctx_errmsg(ctx)[0] == '\0') {
                    fprintf(stderr, "fuzz_alloc_trace: replay in %s mode failed without a message (%s)\n",
                            ag_alloc_mode_name((ag_alloc_mode)m), ag_status_str(st));
                    abort();
                }
                if (st == AG_OK && r.violations) {
                    fprintf(stderr, "fuzz_alloc_trace: %llu reuse violations in %s mode\n",
                            (unsigned long long)r.violations, ag_alloc_mode_name((ag_alloc_mode)m));
                    abort();
                }
                ag_dev_stats ds = {.size = sizeof ds};
                ag_dev_stats_get(dev, &ds);
                if (ds.mem[AG_MEM_HBM].used != 0) {
                    fprintf(stderr, "fuzz_alloc_trace: %llu device bytes left after a %s replay\n",
                            (unsigned long long)ds.mem[AG_MEM_HBM].used, ag_alloc_mode_name((ag_alloc_mode)m));
                    abort();
                }
            }
            ag_device_destroy(dev);
        }
    }
    ag_alloc_trace_destroy(t);
    ag_ctx_destroy(ctx);
    return 0;
}
