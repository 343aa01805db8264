/* Allocator benchmarks: the cached alloc/free pair on one stream against
 * glibc malloc in the same run, and multi-stream traces (synthetic, or
 * derived from an ONNX model executed on several streams) replayed with the
 * multi-stream mode and the baseline: peak reserved and time per operation.
 *   alloc pair [N]                 ns per pair, both allocators
 *   alloc synth SEED OPS STREAMS   prints a synthetic trace
 *   alloc model FILE.onnx STREAMS [--input-shape=NAME=D0,D1,...] [--input-value=NAME=V,...]
 *                                  prints the trace of the model's execution
 *                                  with its inputs bound as given (the corpus
 *                                  manifest's shapes: a dynamic dimension left
 *                                  open makes tensors of unknown size)
 *   alloc compare TRACE [TICKS]    replays TRACE with both modes in turn (best of 9) under
 *                                  the timing model: kernels of TICKS host
 *                                  operations (default 0, an idle device) */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aliasguard/aliasguard.h"
#include "aliasguard/alloc.h"
#include "aliasguard/device.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ctx NULL: a failed system call, errno says why */
static int die(const char *what, ag_ctx *ctx)
{
    fprintf(stderr, "alloc bench: %s: %s\n", what, ctx ? ag_ctx_errmsg(ctx) : strerror(errno));
    return 2;
}

static int bench_pair(uint64_t n)
{
    ag_ctx *ctx = ag_ctx_create(NULL);
    ag_device *dev = NULL;
    ag_dev_stream *s = NULL;
    ag_memalloc *a = NULL;
    if (ag_device_sim_create(ctx, NULL, &dev) || ag_dev_stream_create(dev, &s) ||
        ag_alloc_create(ctx, dev, &s, NULL, &a))
        return die("setup", ctx);
    ag_block *b = NULL;
    if (ag_alloc_malloc(a, 0, 4096, &b) || ag_alloc_free(a, b, 0))
        return die("warm-up", ctx);
    double best_ag = 1e9, best_libc = 1e9;
    volatile uintptr_t sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        for (uint64_t k = 0; k < n; k++) {
            ag_alloc_malloc(a, 0, 4096, &b);
            sink += (uintptr_t)ag_block_ptr(b);
            ag_alloc_free(a, b, 0);
        }
        double t1 = now_s();
        for (uint64_t k = 0; k < n; k++) {
            void *p = malloc(4096);
            sink += (uintptr_t)p;
            free(p);
        }
        double t2 = now_s();
        if ((t1 - t0) / (double)n < best_ag)
            best_ag = (t1 - t0) / (double)n;
        if ((t2 - t1) / (double)n < best_libc)
            best_libc = (t2 - t1) / (double)n;
    }
    printf("cached pair (4 KiB, one stream): aliasguard %.1f ns, glibc malloc %.1f ns, ratio %.2f\n", best_ag * 1e9,
           best_libc * 1e9, best_ag / best_libc);
    if (sink == 1)
        printf("(unreachable: keeps the loops)\n");
    ag_alloc_destroy(a);
    ag_dev_stream_destroy(dev, s);
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
    return 0;
}

/* xorshift64*: deterministic across platforms */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

/* Tensors produced on one stream, consumed on one or two others a little
 * later, with event edges where the consumers need them. */
static int synth(uint64_t seed, uint64_t ops, uint32_t n)
{
    uint64_t st = seed * 2654435761u + 1u;
    typedef struct live {
        uint64_t id;
        uint32_t holders[3], nh;
        uint64_t due;
    } live;
    live *L = calloc(4096, sizeof *L);
    uint32_t nl = 0;
    uint64_t id = 0;
    printf("streams %u\n", n);
    for (uint64_t step = 0; step < ops; step++) {
        uint32_t s = (uint32_t)(rnd(&st) % n);
        if (nl < 4096 && rnd(&st) % 100 < 55) {
            uint64_t size = UINT64_C(512) << (rnd(&st) % 13); /* 512 B .. 2 MiB */
            size += rnd(&st) % size;
            live *e = &L[nl++];
            e->id = id++;
            e->nh = 1;
            e->holders[0] = s;
            e->due = step + 4 + rnd(&st) % 64;
            printf("alloc t%llu %llu %u\n", (unsigned long long)e->id, (unsigned long long)size, s);
            uint32_t nc = (uint32_t)(rnd(&st) % 3);
            for (uint32_t c = 0; c < nc && n > 1; c++) {
                uint32_t t = (uint32_t)(rnd(&st) % n);
                bool dup = false;
                for (uint32_t k = 0; k < e->nh; k++)
                    dup |= e->holders[k] == t;
                if (dup)
                    continue;
                printf("record %u %u\nwait %u %u\nuse t%llu %u\n", s, t, t, s, (unsigned long long)e->id, t);
                e->holders[e->nh++] = t;
            }
        }
        for (uint32_t k = 0; k < nl;) {
            if (L[k].due > step) {
                k++;
                continue;
            }
            for (uint32_t h = 0; h < L[k].nh; h++)
                printf("free t%llu %u\n", (unsigned long long)L[k].id, L[k].holders[h]);
            L[k] = L[--nl];
        }
        if (n > 1 && rnd(&st) % 8 == 0) {
            uint32_t a = (uint32_t)(rnd(&st) % n), b = (uint32_t)(rnd(&st) % n);
            if (a != b)
                printf("record %u %u\nwait %u %u\n", a, b, b, a);
        }
    }
    for (uint32_t k = 0; k < nl; k++)
        for (uint32_t h = 0; h < L[k].nh; h++)
            printf("free t%llu %u\n", (unsigned long long)L[k].id, L[k].holders[h]);
    printf("sync\n");
    free(L);
    return 0;
}

/* A model's execution on n streams: a node continues its first input's
 * stream when it is that producer's only consumer, otherwise it starts on
 * the next stream in turn.  Outputs are allocated on the node's stream,
 * consumers on other streams wait for an event and use the tensor, and each
 * stream frees a tensor after its last use there.  Constants are not
 * allocated (weights live elsewhere). */
static int model(const char *path, uint32_t n, int nbind, char **bind)
{
    ag_ctx *ctx = ag_ctx_create(NULL);
    ag_graph *g = NULL;
    ag_onnx_opts o = ag_onnx_defaults();
    const char **shapes = calloc((size_t)nbind + 1u, sizeof *shapes);
    const char **values = calloc((size_t)nbind + 1u, sizeof *values);
    if (!shapes || !values || n == 0) {
        fprintf(stderr, "alloc model: %s\n", n == 0 ? "STREAMS must be at least 1" : "out of memory");
        return 1;
    }
    for (int k = 0; k < nbind; k++) {
        if (strncmp(bind[k], "--input-shape=", 14) == 0 && strchr(bind[k] + 14, '='))
            shapes[o.n_input_shapes++] = bind[k] + 14;
        else if (strncmp(bind[k], "--input-value=", 14) == 0 && strchr(bind[k] + 14, '='))
            values[o.n_input_values++] = bind[k] + 14;
        else {
            fprintf(stderr, "alloc model: expected --input-shape=NAME=D0,D1,... or --input-value=NAME=V, got '%s'\n",
                    bind[k]);
            return 2;
        }
    }
    o.input_shapes = shapes;
    o.input_values = values;
    ag_status ist = ag_onnx_import_file(ctx, path, &o, &g);
    free(shapes);
    free(values);
    if (ist != AG_OK)
        return die("model", ctx); /* the message names the file */
    uint32_t cap = ag_graph_node_capacity(g), cnt = 0;
    ag_node_id *order = calloc(ag_graph_node_count(g) + 1u, sizeof *order);
    uint32_t *stream = calloc(cap, sizeof *stream), *pos = calloc(cap, sizeof *pos);
    if (ag_graph_topo_order(g, order, &cnt) != AG_OK)
        return die("topological order", ctx);
    uint32_t next = 0, unknown = 0;
    for (uint32_t k = 0; k < cnt; k++) {
        ag_node_id v = order[k];
        pos[v] = k;
        ag_port src = ag_node_num_inputs(g, v) ? ag_node_input_src(g, v, 0) : (ag_port){AG_NONE, 0};
        if (src.node != AG_NONE && ag_node_output_nconsumers(g, src.node, src.index) == 1)
            stream[v] = stream[src.node];
        else
            stream[v] = next++ % n;
    }
    printf("# %s on %u streams\nstreams %u\n", path, n, n);
    for (uint32_t k = 0; k < cnt; k++) {
        ag_node_id v = order[k];
        uint32_t s = stream[v];
        /* inputs from other streams: event, then use */
        for (uint32_t i = 0; i < ag_node_num_inputs(g, v); i++) {
            ag_port p = ag_node_input_src(g, v, i);
            if (p.node == AG_NONE || strcmp(ag_node_type(g, p.node), "Const") == 0 || stream[p.node] == s)
                continue;
            /* first consumer on s of this tensor? */
            bool first = true;
            for (uint32_t c = 0; c < ag_node_output_nconsumers(g, p.node, p.index); c++) {
                ag_port q = ag_node_output_consumer(g, p.node, p.index, c);
                if (stream[q.node] == s && pos[q.node] < k)
                    first = false;
                if (q.node == v && q.index < i)
                    first = false;
            }
            if (first)
                printf("record %u %u\nwait %u %u\nuse n%u_%u %u\n", stream[p.node], s, s, stream[p.node], p.node,
                       p.index, s);
        }
        if (strcmp(ag_node_type(g, v), "Const") != 0) {
            for (uint32_t j = 0; j < ag_node_num_outputs(g, v); j++) {
                uint64_t bytes = ag_desc_size_bytes(ag_node_output_desc_c(g, v, j));
                if (bytes == 0 || bytes == UINT64_MAX) {
                    bytes = 4;
                    unknown++;
                }
                printf("alloc n%u_%u %llu %u\n", v, j, (unsigned long long)bytes, s);
                if (ag_node_output_nconsumers(g, v, j) == 0)
                    printf("free n%u_%u %u\n", v, j, s);
            }
        }
        /* The producer's stream holds its use until the last consumer
         * anywhere has taken its own (so the block stays live); another
         * stream drops its use after its last consumer there. */
        for (uint32_t i = 0; i < ag_node_num_inputs(g, v); i++) {
            ag_port p = ag_node_input_src(g, v, i);
            if (p.node == AG_NONE || strcmp(ag_node_type(g, p.node), "Const") == 0)
                continue;
            uint32_t ps = stream[p.node];
            bool last_here = true, last_all = true;
            for (uint32_t c = 0; c < ag_node_output_nconsumers(g, p.node, p.index); c++) {
                ag_port q = ag_node_output_consumer(g, p.node, p.index, c);
                bool later = pos[q.node] > k || (q.node == v && q.index > i);
                if (later)
                    last_all = false;
                if (stream[q.node] == s && later)
                    last_here = false;
            }
            if (s != ps && last_here)
                printf("free n%u_%u %u\n", p.node, p.index, s);
            if (last_all)
                printf("free n%u_%u %u\n", p.node, p.index, ps);
        }
    }
    printf("sync\n");
    if (unknown)
        fprintf(stderr, "%s: %u tensors of unknown size traced as 4 bytes (bind the inputs with --input-shape)\n",
                path, unknown);
    free(order);
    free(stream);
    free(pos);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
    return 0;
}

static int compare(const char *path, uint32_t ticks)
{
    ag_ctx *ctx = ag_ctx_create(NULL);
    FILE *f = fopen(path, "rb");
    if (!f)
        return die(path, NULL);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)len + 1);
    if (fread(text, 1, (size_t)len, f) != (size_t)len)
        return die(path, NULL);
    fclose(f);
    ag_alloc_trace *t = NULL;
    ag_device *dev = NULL;
    if (ag_alloc_trace_parse(ctx, path, text, (size_t)len, &t) || ag_device_sim_create(ctx, NULL, &dev))
        return die("compare", ctx); /* the message names the file and line */
    ag_alloc_replay_result best[2];
    /* Peak reserved can differ by a region between replays: best fit
     * breaks ties by address, and the device's addresses come from the
     * host.  The largest of each mode is reported, with the range. */
    uint64_t lo[2] = {UINT64_MAX, UINT64_MAX}, hi[2] = {0, 0};
    /* the modes alternate, so that a slow spell of a shared machine
     * weighs on both */
    for (int rep = 0; rep < 9; rep++) {
        for (int m = 0; m < 2; m++) {
            ag_alloc_config c;
            ag_alloc_config_default(&c);
            c.mode = (ag_alloc_mode)m;
            ag_alloc_replay_result r = {.size = sizeof r};
            ag_alloc_replay_opts o = {.size = sizeof o, .kernel_ticks = ticks};
            if (ag_alloc_replay(ctx, dev, t, &c, &o, &r))
                return die(path, ctx);
            if (rep == 0 || r.total_seconds < best[m].total_seconds)
                best[m] = r;
            uint64_t pr = r.stats.peak_reserved;
            lo[m] = pr < lo[m] ? pr : lo[m];
            hi[m] = pr > hi[m] ? pr : hi[m];
        }
    }
    uint64_t ops = ag_alloc_trace_ops(t) + 1u;
    double tm = best[0].total_seconds / (double)ops * 1e9, tb = best[1].total_seconds / (double)ops * 1e9;
    char range[2][64] = {"", ""};
    for (int m = 0; m < 2; m++)
        if (lo[m] != hi[m])
            snprintf(range[m], sizeof range[m], " (from %llu)", (unsigned long long)lo[m]);
    printf("%s: kernel %u ticks, %llu ops, %u streams; peak allocated %llu; reserved multi %llu%s, baseline %llu%s "
           "(%+.1f%%); ns/op multi %.0f, baseline %.0f (x%.2f); device ticks multi %llu, baseline %llu\n",
           path, ticks, (unsigned long long)ops, ag_alloc_trace_streams(t),
           (unsigned long long)best[0].stats.peak_allocated, (unsigned long long)hi[0], range[0],
           (unsigned long long)hi[1], range[1], ((double)hi[0] / (double)hi[1] - 1.0) * 100.0, tm, tb, tm / tb,
           (unsigned long long)best[0].device_ticks, (unsigned long long)best[1].device_ticks);
    ag_alloc_trace_destroy(t);
    ag_device_destroy(dev);
    free(text);
    ag_ctx_destroy(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "pair") == 0)
        return bench_pair(argc > 2 ? strtoull(argv[2], NULL, 10) : 2000000u);
    if (argc == 5 && strcmp(argv[1], "synth") == 0)
        return synth(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10), (uint32_t)strtoul(argv[4], NULL, 10));
    if (argc >= 4 && strcmp(argv[1], "model") == 0)
        return model(argv[2], (uint32_t)strtoul(argv[3], NULL, 10), argc - 4, argv + 4);
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "compare") == 0)
        return compare(argv[2], argc == 4 ? (uint32_t)strtoul(argv[3], NULL, 10) : 0u);
    fprintf(stderr, "usage: alloc pair [N] | synth SEED OPS STREAMS | model FILE.onnx STREAMS [--input-shape=..] [--input-value=..] | compare TRACE [TICKS]\n");
    return 2;
}
