/* aliasguard alloc-replay: reads an allocation trace, replays it on the
 * simulated device with the multi-stream allocator, the baseline or both,
 * and prints peak allocated and reserved bytes, the time per operation and
 * the recycling counters; --check verifies every reuse against the trace's
 * event order. */
#include <stdlib.h>
#include <string.h>

#include "aliasguard/alloc.h"
#include "aliasguard/device.h"
#include "cli.h"
#include "host_heap.h"

void cmd_alloc_replay_help(FILE *f)
{
    fputs("usage: aliasguard alloc-replay [options] TRACE\n"
          "\n"
          "Replays TRACE (one operation per line: 'streams N', 'alloc ID SIZE STREAM',\n"
          "'use ID STREAM', 'free ID STREAM', 'record SRC DST', 'wait DST SRC', 'sync',\n"
          "'pool_begin P STREAM', 'pool_end STREAM', 'pool_release P STREAM';\n"
          "see docs/runtime.md) on the simulated device and prints, per allocator mode,\n"
          "the peak allocated and reserved bytes and the time per operation.\n"
          "\n"
          "options:\n"
          "  --mode M         multi, baseline or both (default both; both also prints\n"
          "                   the reserved-memory and time ratios)\n"
          "  --capacity N     device memory in bytes (default 1 GiB)\n"
          "  --repeat N       replay N times and keep the fastest time (default 1)\n"
          "  --runs N         replay the trace as N executions in a row with one\n"
          "                   allocator (its steady state; default 1); every block\n"
          "                   must be freed by the end of the trace\n"
          "  --kernel-ticks N timing model: every alloc and use enqueues a kernel that\n"
          "                   takes N host operations on its stream (default 0: the\n"
          "                   device is always idle); both modes replay the same model\n"
          "  --no-borrow      multi mode without the borrow allocator (L3)\n"
          "  --no-steal       multi mode without moving free pool regions between\n"
          "                   streams (large requests cut from shared large regions)\n"
          "  --poll-every N   multi mode: poll the deferred frees' events at every N-th\n"
          "                   allocation, besides a pool miss (default 3; 0: only at a\n"
          "                   pool miss; 1: at every allocation, as the baseline)\n"
          "  --gather-min N   multi mode with steal: before a request of at least N\n"
          "                   bytes grows the device memory past its peak, idle free\n"
          "                   pool regions merge back in L1 and serve it if they can\n"
          "                   (default 10485760; 'never': off)\n"
          "  --fallback-min N multi mode: a shared block of at least N bytes whose last\n"
          "                   free finds another user stream busy records an event\n"
          "                   there at once; a smaller one waits for its notices\n"
          "                   until a pool miss (default 67108864; 0: every block\n"
          "                   at once; 'never': every block waits)\n"
          "  --front-blocks N both modes: each stream keeps the last N small blocks it\n"
          "                   freed whole for requests of the same size (default 4;\n"
          "                   0..8; 0: none)\n"
          "  --check          verify that no block is handed out again before every\n"
          "                   stream that used its memory is ordered before the new user,\n"
          "                   nor over a live block's memory, and that the trace orders\n"
          "                   each 'use' after the block's alloc (at most 1024 streams)\n"
          "  -h, --help       this help\n"
          "\n"
          "exit status: 0 replayed; 1 --check found a violation or a use the trace\n"
          "does not order after its alloc; 2 usage, input or allocation error.\n",
          f);
}

static void print_result(const char *mode, const ag_alloc_replay_result *r)
{
    const ag_alloc_stats *s = &r->stats;
    printf("mode %s:\n", mode);
    printf("  peak allocated: %llu bytes\n", (unsigned long long)s->peak_allocated);
    printf("  peak reserved:  %llu bytes (fragmentation %.3f)\n", (unsigned long long)s->peak_reserved,
           s->fragmentation);
    if (s->allocated)
        /* a use is ended by a free of its own: a block short of one stays */
        printf("  live at the end: %llu bytes in blocks the trace did not free\n", (unsigned long long)s->allocated);
    uint64_t nops = 0;
    for (int k = 0; k < AG_TOP_COUNT_; k++)
        nops += r->count[k];
    printf("  time: %.6f s, %.1f ns per operation; modelled device time %llu ticks; %llu device calls\n",
           r->total_seconds, nops ? r->total_seconds * 1e9 / (double)nops : 0.0, (unsigned long long)r->device_ticks,
           (unsigned long long)r->device_calls);
    for (int k = 0; k < AG_TOP_COUNT_; k++)
        if (r->count[k])
            printf("    %-7s %10llu x %9.1f ns\n", ag_trace_op_name((ag_trace_op)k), (unsigned long long)r->count[k],
                   r->seconds[k] * 1e9 / (double)r->count[k]);
    printf("  recycles: birth %llu, borrow %llu, local %llu; borrow hits %llu, returned home %llu\n",
           (unsigned long long)s->birth_recycles, (unsigned long long)s->borrow_recycles,
           (unsigned long long)s->local_recycles, (unsigned long long)s->borrow_hits,
           (unsigned long long)s->returned_home);
    printf("  notices: sent %llu, applied %llu, stale %llu, dropped %llu; device allocations %llu, retries %llu\n",
           (unsigned long long)s->notices_sent, (unsigned long long)s->notices_applied,
           (unsigned long long)s->notices_stale, (unsigned long long)s->notices_dropped,
           (unsigned long long)s->device_allocs,
           (unsigned long long)s->retries);
    printf("  polled: %llu events queried, %llu streams asked idle, %llu recycles; regions moved %llu (%llu waits), gathered %llu\n",
           (unsigned long long)s->event_polls, (unsigned long long)s->stream_queries,
           (unsigned long long)s->polled_recycles, (unsigned long long)s->regions_moved,
           (unsigned long long)s->region_waits, (unsigned long long)s->regions_gathered);
    printf("  fallbacks: %llu waited for notices, %llu recorded at a pool miss; %llu looks refused\n",
           (unsigned long long)s->fallbacks_deferred, (unsigned long long)s->fallbacks_recorded,
           (unsigned long long)s->reclaims_refused);
    if (r->count[AG_TOP_POOL])
        printf("  graph pools: %llu requests served by a parked block\n", (unsigned long long)s->graph_reuses);
}

static double per_op(const ag_alloc_replay_result *r)
{
    uint64_t nops = 0;
    for (int k = 0; k < AG_TOP_COUNT_; k++)
        nops += r->count[k];
    return nops ? r->total_seconds / (double)nops : 0.0;
}

/* If argv[i] is the option opt with an integer value in lo..hi, stores it,
 * advances and returns 1; 0 if it is another argument; -1 after a usage
 * error (a missing or malformed value, or one out of range). */
static int opt_u64_in(cli_args *a, const char *opt, uint64_t lo, uint64_t hi, uint64_t *out)
{
    const char *val = NULL;
    int r = cli_opt_value(a, opt, NULL, &val);
    if (r <= 0)
        return r;
    if (!cli_parse_u64(a->cmd, opt, val, out))
        return -1;
    if (*out < lo || *out > hi) {
        cli_usage_error(a->cmd, "%s expects %llu to %llu", opt, (unsigned long long)lo, (unsigned long long)hi);
        return -1;
    }
    return 1;
}

/* A byte count or 'never' (UINT64_MAX); *set tells whether it was given. */
static int opt_bytes_or_never(cli_args *a, const char *opt, uint64_t *out, bool *set)
{
    const char *val = NULL;
    int r = cli_opt_value(a, opt, NULL, &val);
    if (r <= 0)
        return r;
    if (strcmp(val, "never") == 0)
        *out = UINT64_MAX;
    else if (!cli_parse_u64(a->cmd, opt, val, out))
        return -1;
    *set = true;
    return 1;
}

int cmd_alloc_replay(int argc, char **argv)
{
    cli_args a = {argc, argv, 1, "alloc-replay", false};
    const char *input = NULL, *val = NULL, *mode = "both";
    uint64_t capacity = 0, repeat = 1, runs = 1, ticks = 0, poll_every = UINT64_MAX, gather_min = 0;
    uint64_t front_blocks = UINT64_MAX;
    uint64_t fallback_min = 0;
    bool gather_set = false, fallback_set = false;
    bool check = false, borrow = true, steal = true;
    while (a.i < a.argc) {
        int r;
        if (cli_opt_end(&a))
            continue;
        if (!a.only_pos) {
            if (cli_opt_flag(&a, "--help", "-h")) {
                cmd_alloc_replay_help(stdout);
                return CLI_EXIT_OK;
            }
            if (cli_opt_flag(&a, "--check", NULL)) {
                check = true;
                continue;
            }
            if (cli_opt_flag(&a, "--no-steal", NULL)) {
                steal = false;
                continue;
            }
            if (cli_opt_flag(&a, "--no-borrow", NULL)) {
                borrow = false;
                continue;
            }
            if ((r = cli_opt_value(&a, "--mode", NULL, &mode)) != 0) {
                if (r < 0)
                    return CLI_EXIT_USAGE;
                if (strcmp(mode, "multi") && strcmp(mode, "baseline") && strcmp(mode, "both"))
                    return cli_usage_error(a.cmd, "--mode expects multi, baseline or both, got '%s'", mode);
                continue;
            }
            if ((r = cli_opt_value(&a, "--capacity", NULL, &val)) != 0) {
                if (r < 0 || !cli_parse_u64(a.cmd, "--capacity", val, &capacity))
                    return CLI_EXIT_USAGE;
                if (capacity == 0)
                    return cli_usage_error(a.cmd, "--capacity must be at least 1");
                continue;
            }
            if ((r = opt_u64_in(&a, "--repeat", 1, 1000, &repeat)) != 0) {
                if (r < 0)
                    return CLI_EXIT_USAGE;
                continue;
            }
            if ((r = opt_u64_in(&a, "--runs", 1, 100000, &runs)) != 0) {
                if (r < 0)
                    return CLI_EXIT_USAGE;
                continue;
            }
            if ((r = opt_u64_in(&a, "--poll-every", 0, UINT32_MAX, &poll_every)) != 0 ||
                (r = opt_u64_in(&a, "--front-blocks", 0, AG_ALLOC_MAX_FRONT, &front_blocks)) != 0) {
                if (r < 0)
                    return CLI_EXIT_USAGE;
                continue;
            }
            if ((r = opt_bytes_or_never(&a, "--gather-min", &gather_min, &gather_set)) != 0 ||
                (r = opt_bytes_or_never(&a, "--fallback-min", &fallback_min, &fallback_set)) != 0) {
                if (r < 0)
                    return CLI_EXIT_USAGE;
                continue;
            }
            if ((r = opt_u64_in(&a, "--kernel-ticks", 0, 1000000, &ticks)) != 0) {
                if (r < 0)
                    return CLI_EXIT_USAGE;
                continue;
            }
            if (cli_is_option(&a))
                return cli_usage_error(a.cmd, "unknown option '%s'", a.argv[a.i]);
        }
        if (input)
            return cli_usage_error(a.cmd, "unexpected argument '%s' (one trace at a time)", a.argv[a.i]);
        input = a.argv[a.i++];
    }
    if (!input)
        return cli_usage_error(a.cmd, "missing TRACE");

    ag_ctx *ctx = ag_ctx_create(NULL);
    if (!ctx) {
        cli_err("out of memory");
        return CLI_EXIT_USAGE;
    }
    int rc = CLI_EXIT_USAGE;
    char *text = NULL;
    size_t len = 0;
    ag_alloc_trace *t = NULL;
    ag_device *dev = NULL;
    if (!cli_read_all(input, &text, &len))
        goto out;
    const char *name = strcmp(input, "-") == 0 ? "<stdin>" : input; /* as the other commands */
    ag_status st = ag_alloc_trace_parse(ctx, name, text, len, &t);
    if (st != AG_OK) {
        cli_err_ctx(ctx, st, name);
        goto out;
    }
    ag_device_sim_config dc = ag_device_sim_defaults();
    if (capacity)
        dc.capacity[AG_MEM_HBM] = capacity;
    pin_host_heap();
    st = ag_device_sim_create(ctx, &dc, &dev);
    if (st != AG_OK) {
        cli_err_ctx(ctx, st, "device");
        goto out;
    }
    bool both = strcmp(mode, "both") == 0;
    ag_alloc_replay_result res[2];
    uint64_t violations = 0;
    bool headed = false;
    for (int m = 0; m < 2; m++) {
        if (!both && strcmp(mode, ag_alloc_mode_name((ag_alloc_mode)m)) != 0)
            continue;
        ag_alloc_config c;
        ag_alloc_config_default(&c);
        c.mode = (ag_alloc_mode)m;
        c.borrow = borrow;
        c.steal = steal;
        if (poll_every != UINT64_MAX)
            c.poll_every = (uint32_t)poll_every;
        if (front_blocks != UINT64_MAX)
            c.front_blocks = (uint32_t)front_blocks;
        if (gather_set)
            c.gather_min = gather_min;
        if (fallback_set)
            c.fallback_min = fallback_min;
        uint64_t most = 0; /* the check's violations: the most any replay found */
        for (uint64_t k = 0; k < repeat; k++) {
            ag_alloc_replay_result r = {.size = sizeof r};
            ag_alloc_replay_opts o = {
                .size = sizeof o, .check = check, .kernel_ticks = (uint32_t)ticks, .runs = (uint32_t)runs};
            st = ag_alloc_replay(ctx, dev, t, &c, &o, &r);
            if (st != AG_OK) {
                cli_err_ctx(ctx, st, name);
                goto out;
            }
            if (r.violations > most)
                most = r.violations;
            if (k == 0 || r.total_seconds < res[m].total_seconds)
                res[m] = r;
        }
        res[m].violations = most;
        if (!headed) {
            /* after the first replay: a trace it refuses prints nothing */
            printf("trace: %s (%llu operations, %u streams)", name, (unsigned long long)ag_alloc_trace_ops(t),
                   ag_alloc_trace_streams(t));
            if (runs > 1)
                printf(", %llu runs", (unsigned long long)runs);
            printf("\n");
            headed = true;
        }
        print_result(ag_alloc_mode_name((ag_alloc_mode)m), &res[m]);
        violations += res[m].violations;
    }
    if (both) {
        double rr = res[1].stats.peak_reserved
                        ? (double)res[0].stats.peak_reserved / (double)res[1].stats.peak_reserved
                        : 1.0;
        double tr = per_op(&res[1]) > 0 ? per_op(&res[0]) / per_op(&res[1]) : 1.0;
        printf("multi vs baseline: peak reserved x%.3f (%+.1f%%), time per operation x%.3f\n", rr,
               (rr - 1.0) * 100.0, tr);
    }
    ag_alloc_trace_order order = {.size = sizeof order};
    if (check) {
        printf("check: %llu violations\n", (unsigned long long)violations);
        st = ag_alloc_trace_order_check(ctx, t, &order);
        if (st != AG_OK) {
            cli_err_ctx(ctx, st, name);
            goto out;
        }
        if (order.unordered_uses)
            printf("check: %llu use%s not ordered after the block's alloc by the trace (a race in the traced "
                   "program), the first at %s\n",
                   (unsigned long long)order.unordered_uses, order.unordered_uses == 1 ? "" : "s", order.first);
    }
    rc = violations || order.unordered_uses ? CLI_EXIT_FINDINGS : CLI_EXIT_OK;
    if (!cli_close_output(stdout, NULL, true))
        rc = CLI_EXIT_USAGE; /* the results were lost */
out:
    ag_alloc_trace_destroy(t);
    ag_device_destroy(dev);
    free(text);
    ag_ctx_destroy(ctx);
    return rc;
}
