/* Allocator benchmarks: the cached alloc/free pair on one stream against
 * glibc malloc in the same run, and multi-stream traces (synthetic, or
 * derived from a planned ONNX model executed on several streams) replayed
 * with the multi-stream mode and the baseline: peak reserved and time per
 * operation.
 *   alloc pair [N]                 ns per pair, both allocators
 *   alloc synth SEED OPS STREAMS   prints a synthetic trace
 *   alloc model FILE.onnx STREAMS [--input-shape=NAME=D0,D1,...] [--input-value=NAME=V,...]
 *                                  compiles and plans the model with its
 *                                  inputs bound as given (the corpus
 *                                  manifest's shapes) and prints the trace of
 *                                  the plan's buffers executed on STREAMS
 *                                  streams; a tensor of unknown size is an
 *                                  error naming it
 *   alloc compare TRACE [TICKS [RUNS]]
 *                                  replays TRACE with both modes in turn (the
 *                                  best of at least 9 replays, and of as many
 *                                  as 1 s of each mode takes) under the
 *                                  timing model: kernels of TICKS host
 *                                  operations (default 0, an idle device),
 *                                  as RUNS executions in a row (default 1) */
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
#include "../tools/host_heap.h"

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

/* A planned model's execution on n streams.  The model is compiled (the
 * pipeline of 'aliasguard check') and planned ('aliasguard plan'): the
 * trace allocates the plan's buffers, so views and in-place outputs share
 * their input's block, and copies the pipeline inserted are allocated.
 * Only arena buffers come from the allocator: constants live elsewhere and
 * graph inputs and outputs are the caller's (zero copy).  A node continues
 * its first input's stream when it is that producer's only consumer,
 * otherwise it starts on the next stream in turn.  A buffer is allocated on
 * the stream of its first access; a node on another stream than an input's
 * producer, or than the last writer of a buffer it touches, waits for an
 * event there; a stream other than the buffer's uses it from its first
 * access and frees it after its last.  The birth stream holds its use until
 * the last access anywhere. */
typedef struct model_trace {
    const ag_graph *g;
    const ag_plan *p;
    uint32_t n, nb;
    uint32_t *tfirst; /* per node: index of its first plan tensor */
    uint32_t *stream; /* per node */
    uint32_t *born;   /* per buffer: allocating stream, UINT32_MAX before */
    uint32_t *wstream; /* per buffer: stream of its last writer */
    uint64_t *last;   /* per buffer: last accessing position */
    uint64_t *laston; /* per buffer and stream: last position there, +1 (0: none) */
    uint8_t *used;    /* per buffer and stream: 'use' printed */
} model_trace;

/* buffer of output o of node v in the arena, or UINT32_MAX (elsewhere, or
 * empty: a tensor with a zero dimension needs no memory) */
static uint32_t model_buffer(const model_trace *m, ag_node_id v, uint32_t o)
{
    const ag_plan_tensor *t = ag_plan_tensor_at(m->p, m->tfirst[v] + o);
    return t->region == AG_REGION_ARENA && ag_plan_buffer_size(m->p, t->buffer) ? t->buffer : UINT32_MAX;
}

/* the arena buffers node v reads or writes, each once; returns how many */
static uint32_t model_accesses(const model_trace *m, ag_node_id v, uint32_t *out, uint32_t max)
{
    uint32_t cnt = 0, ni = ag_node_num_inputs(m->g, v), no = ag_node_num_outputs(m->g, v);
    for (uint32_t k = 0; k < ni + no; k++) {
        uint32_t b = UINT32_MAX;
        if (k < ni) {
            ag_port q = ag_node_input_src(m->g, v, k);
            if (q.node != AG_NONE)
                b = model_buffer(m, q.node, q.index);
        } else {
            b = model_buffer(m, v, k - ni);
        }
        bool dup = b == UINT32_MAX;
        for (uint32_t j = 0; j < cnt && !dup; j++)
            dup = out[j] == b;
        if (!dup && cnt < max)
            out[cnt++] = b;
    }
    return cnt;
}

static void model_wait(uint32_t src, uint32_t s, bool *waited)
{
    if (src != s && !waited[src]) {
        printf("record %u %u\nwait %u %u\n", src, s, s, src);
        waited[src] = true;
    }
}

/* Stream s accesses buffer b for a node whose input came from stream from
 * (s for an output): b is allocated at its first access; otherwise s waits
 * for an event of from and of b's last writer (one per stream and node), and
 * its first access of a buffer born elsewhere is a use. */
static void model_touch(model_trace *m, uint32_t b, uint32_t s, uint32_t from, bool *waited)
{
    if (m->born[b] == UINT32_MAX) { /* its first access; a While's carried value is read first */
        printf("alloc b%u %llu %u\n", b, (unsigned long long)ag_plan_buffer_size(m->p, b), s);
        m->born[b] = m->wstream[b] = s;
        return;
    }
    model_wait(from, s, waited);
    model_wait(m->wstream[b], s, waited);
    if (m->born[b] != s && !m->used[(size_t)b * m->n + s]) {
        printf("use b%u %u\n", b, s);
        m->used[(size_t)b * m->n + s] = 1;
    }
}

/* prints the trace of the planned graph g on n streams */
static int model_print(ag_ctx *ctx, const char *path, const ag_graph *g, const ag_plan *plan, uint32_t n)
{
    model_trace m = {.g = g, .p = plan, .n = n, .nb = ag_plan_buffer_count(plan)};
    uint32_t cap = ag_graph_node_capacity(g);
    uint32_t cnt = 0, maxio = 1, next = 0;
    ag_node_id *order = calloc(ag_graph_node_count(g) + 1u, sizeof *order);
    m.tfirst = calloc(cap, sizeof *m.tfirst);
    m.stream = calloc(cap, sizeof *m.stream);
    m.born = malloc(((size_t)m.nb + 1u) * sizeof *m.born);
    m.wstream = calloc((size_t)m.nb + 1u, sizeof *m.wstream);
    m.last = calloc((size_t)m.nb + 1u, sizeof *m.last);
    m.laston = calloc((size_t)m.nb * n + 1u, sizeof *m.laston);
    m.used = calloc((size_t)m.nb * n + 1u, 1);
    uint32_t *acc = NULL;
    bool *waited = NULL;
    int rc = 0;
    if (!order || !m.tfirst || !m.stream || !m.born || !m.wstream || !m.last || !m.laston || !m.used) {
        fprintf(stderr, "alloc model: out of memory\n");
        rc = 1;
        goto done;
    }
    if (ag_graph_topo_order(g, order, &cnt) != AG_OK) {
        rc = die("topological order", ctx);
        goto done;
    }
    for (uint32_t b = 0; b < m.nb; b++)
        m.born[b] = UINT32_MAX;
    for (uint32_t k = 0; k < ag_plan_tensor_count(plan); k++) {
        const ag_plan_tensor *t = ag_plan_tensor_at(plan, k);
        if (t->output == 0)
            m.tfirst[t->node] = k;
    }
    for (uint32_t k = 0; k < cnt; k++) {
        ag_node_id v = order[k];
        for (uint32_t j = 0; j < ag_node_num_outputs(g, v); j++) {
            uint32_t ti = m.tfirst[v] + j;
            const ag_plan_tensor *t = ti < ag_plan_tensor_count(plan) ? ag_plan_tensor_at(plan, ti) : NULL;
            if (!t || t->node != v || t->output != j) {
                fprintf(stderr, "alloc model: %s: the plan has no tensor for node '%s' output %u\n", path,
                        ag_node_name(g, v), j);
                rc = 2;
                goto done;
            }
        }
        uint32_t nio = ag_node_num_inputs(g, v) + ag_node_num_outputs(g, v);
        maxio = nio > maxio ? nio : maxio;
        ag_port src = ag_node_num_inputs(g, v) ? ag_node_input_src(g, v, 0) : (ag_port){AG_NONE, 0};
        if (src.node != AG_NONE && ag_node_output_nconsumers(g, src.node, src.index) == 1)
            m.stream[v] = m.stream[src.node];
        else
            m.stream[v] = next++ % n;
    }
    acc = calloc(maxio, sizeof *acc);
    waited = calloc(n, sizeof *waited);
    if (!acc || !waited) {
        fprintf(stderr, "alloc model: out of memory\n");
        rc = 1;
        goto done;
    }
    /* each buffer's last access anywhere and per stream */
    for (uint32_t k = 0; k < cnt; k++) {
        ag_node_id v = order[k];
        uint32_t na = model_accesses(&m, v, acc, maxio);
        for (uint32_t j = 0; j < na; j++) {
            m.last[acc[j]] = k;
            m.laston[(size_t)acc[j] * n + m.stream[v]] = (uint64_t)k + 1u;
        }
    }
    const char *base = strrchr(path, '/');
    printf("# %s planned (arena %llu bytes on one stream), executed on %u streams\nstreams %u\n",
           base ? base + 1 : path, (unsigned long long)ag_plan_peak_bytes(plan), n, n);
    for (uint32_t k = 0; k < cnt; k++) {
        ag_node_id v = order[k];
        uint32_t s = m.stream[v];
        memset(waited, 0, n * sizeof *waited);
        for (uint32_t i = 0; i < ag_node_num_inputs(g, v); i++) {
            ag_port q = ag_node_input_src(g, v, i);
            uint32_t b = q.node == AG_NONE ? UINT32_MAX : model_buffer(&m, q.node, q.index);
            if (b != UINT32_MAX)
                model_touch(&m, b, s, m.stream[q.node], waited);
        }
        for (uint32_t j = 0; j < ag_node_num_outputs(g, v); j++) {
            uint32_t b = model_buffer(&m, v, j);
            if (b != UINT32_MAX) {
                model_touch(&m, b, s, s, waited);
                m.wstream[b] = s;
            }
        }
        uint32_t na = model_accesses(&m, v, acc, maxio);
        for (uint32_t j = 0; j < na; j++) {
            uint32_t b = acc[j];
            if (m.born[b] != s && m.laston[(size_t)b * n + s] == (uint64_t)k + 1u)
                printf("free b%u %u\n", b, s);
            if (m.last[b] == k)
                printf("free b%u %u\n", b, m.born[b]);
        }
    }
    printf("sync\n");
done:
    free(acc);
    free(waited);
    free(order);
    free(m.tfirst);
    free(m.stream);
    free(m.born);
    free(m.wstream);
    free(m.last);
    free(m.laston);
    free(m.used);
    return rc;
}

static int model(const char *path, uint32_t n, int nbind, char **bind)
{
    ag_onnx_opts o = ag_onnx_defaults();
    const char **shapes = calloc((size_t)nbind + 1u, sizeof *shapes);
    const char **values = calloc((size_t)nbind + 1u, sizeof *values);
    int rc = 0;
    if (!shapes || !values || n == 0) {
        fprintf(stderr, "alloc model: %s\n", n == 0 ? "STREAMS must be at least 1" : "out of memory");
        rc = 1;
    }
    for (int k = 0; k < nbind && rc == 0; k++) {
        if (strncmp(bind[k], "--input-shape=", 14) == 0 && strchr(bind[k] + 14, '='))
            shapes[o.n_input_shapes++] = bind[k] + 14;
        else if (strncmp(bind[k], "--input-value=", 14) == 0 && strchr(bind[k] + 14, '='))
            values[o.n_input_values++] = bind[k] + 14;
        else {
            fprintf(stderr, "alloc model: expected --input-shape=NAME=D0,D1,... or --input-value=NAME=V, got '%s'\n",
                    bind[k]);
            rc = 2;
        }
    }
    o.input_shapes = shapes;
    o.input_values = values;
    ag_ctx *ctx = ag_ctx_create(NULL);
    ag_graph *g = NULL;
    ag_ops *ops = NULL;
    ag_report *report = NULL;
    ag_plan *plan = NULL;
    if (rc == 0 && ag_onnx_import_file(ctx, path, &o, &g))
        rc = die("model", ctx); /* the message names the file */
    else if (rc == 0 && (ag_ops_create(ctx, &ops) || ag_report_create(ctx, &report)))
        rc = die("model", ctx);
    else if (rc == 0 && ag_pipeline_run(&(ag_pass_env){g, ops, report}))
        rc = die(path, ctx);
    else if (rc == 0 && ag_plan_build(ctx, g, ops, NULL, &plan))
        rc = die(path, ctx); /* a tensor of unknown size: the message names it */
    else if (rc == 0)
        rc = model_print(ctx, path, g, plan, n);
    free(shapes);
    free(values);
    ag_plan_destroy(plan);
    ag_report_destroy(report);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
    return rc;
}

#define COMPARE_SECONDS 1.0
#define COMPARE_MAX_REPS 1000

/* The whole of path, read until its end (a directory or an unreadable
 * file is an error, errno saying why); NULL on failure. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1u << 16, n = 0;
    char *text = malloc(cap);
    while (text) {
        n += fread(text + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *more = realloc(text, cap * 2u);
        if (!more)
            free(text);
        text = more;
        cap *= 2u;
    }
    int bad = !text || ferror(f);
    int err = text ? EIO : ENOMEM;
    if (ferror(f) && errno)
        err = errno;
    fclose(f);
    if (bad) {
        free(text);
        errno = err;
        return NULL;
    }
    *len = n;
    return text;
}

static int compare(const char *path, uint32_t ticks, uint32_t runs)
{
    pin_host_heap();
    ag_ctx *ctx = ag_ctx_create(NULL);
    size_t len = 0;
    int rc = 2;
    ag_alloc_trace *t = NULL;
    ag_device *dev = NULL;
    char *text = slurp(path, &len);
    if (!text) {
        rc = die(path, NULL);
        goto out;
    }
    if (ag_alloc_trace_parse(ctx, path, text, (size_t)len, &t) || ag_device_sim_create(ctx, NULL, &dev)) {
        rc = die("compare", ctx); /* the message names the file and line */
        goto out;
    }
    ag_alloc_replay_result best[2];
    /* Peak reserved can differ by a region between replays: best fit
     * breaks ties by address, and the device's addresses come from the
     * host.  The largest of each mode is reported, with the range. */
    uint64_t lo[2] = {UINT64_MAX, UINT64_MAX}, hi[2] = {0, 0};
    /* The modes alternate, so that a slow spell of a shared machine
     * weighs on both.  A short trace replays in a fraction of a
     * millisecond, where one slow spell decides a best of nine: replays
     * go on until each mode has run for COMPARE_SECONDS (at least 9 and
     * at most COMPARE_MAX_REPS each).  A long trace needs the second too:
     * the 128- and 256-stream synthetic ones replay in 15 to 40 ms, and
     * their first three replays run two to three times slower (the host
     * heap and the stream threads warming up), which left a best of six
     * warm replays in 0.2 s. */
    double spent[2] = {0, 0};
    for (int rep = 0; rep < 9 || (rep < COMPARE_MAX_REPS && (spent[0] < COMPARE_SECONDS || spent[1] < COMPARE_SECONDS));
         rep++) {
        for (int m = 0; m < 2; m++) {
            ag_alloc_config c;
            ag_alloc_config_default(&c);
            c.mode = (ag_alloc_mode)m;
            ag_alloc_replay_result r = {.size = sizeof r};
            ag_alloc_replay_opts o = {.size = sizeof o, .kernel_ticks = ticks, .runs = runs};
            if (ag_alloc_replay(ctx, dev, t, &c, &o, &r)) {
                rc = die("compare", ctx); /* as above */
                goto out;
            }
            spent[m] += r.total_seconds;
            if (rep == 0 || r.total_seconds < best[m].total_seconds)
                best[m] = r;
            uint64_t pr = r.stats.peak_reserved;
            lo[m] = pr < lo[m] ? pr : lo[m];
            hi[m] = pr > hi[m] ? pr : hi[m];
        }
    }
    uint64_t ops = ag_alloc_trace_ops(t) * (runs ? runs : 1u) + 1u; /* and the final sync */
    double tm = best[0].total_seconds / (double)ops * 1e9, tb = best[1].total_seconds / (double)ops * 1e9;
    char range[2][64] = {"", ""};
    for (int m = 0; m < 2; m++)
        if (lo[m] != hi[m])
            snprintf(range[m], sizeof range[m], " (from %llu)", (unsigned long long)lo[m]);
    char rs[32] = "";
    if (runs > 1)
        snprintf(rs, sizeof rs, ", %u runs", runs);
    printf("%s: kernel %u ticks%s, %llu ops, %u streams; peak allocated %llu; reserved multi %llu%s, baseline %llu%s "
           "(%+.1f%%); ns/op multi %.0f, baseline %.0f (x%.2f); device ticks multi %llu, baseline %llu; "
           "device calls multi %llu, baseline %llu\n",
           path, ticks, rs, (unsigned long long)ops, ag_alloc_trace_streams(t),
           (unsigned long long)best[0].stats.peak_allocated, (unsigned long long)hi[0], range[0],
           (unsigned long long)hi[1], range[1], hi[1] ? ((double)hi[0] / (double)hi[1] - 1.0) * 100.0 : 0.0, tm, tb,
           tb > 0 ? tm / tb : 1.0,
           (unsigned long long)best[0].device_ticks, (unsigned long long)best[1].device_ticks,
           (unsigned long long)best[0].device_calls, (unsigned long long)best[1].device_calls);
    rc = 0;
out:
    ag_alloc_trace_destroy(t);
    ag_device_destroy(dev);
    free(text);
    ag_ctx_destroy(ctx);
    return rc;
}

/* A decimal argument from lo to hi, whole; 0 when it is not one. */
static int arg_u64(const char *what, const char *text, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = text[0] >= '0' && text[0] <= '9' ? strtoull(text, &end, 10) : 0;
    if (!end || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "alloc bench: %s expects a number from %llu to %llu, not '%s'\n", what,
                (unsigned long long)lo, (unsigned long long)hi, text);
        return 0;
    }
    *out = v;
    return 1;
}

static int run(int argc, char **argv)
{
    uint64_t a = 0, b = 0, c = 0;
    if (argc >= 2 && argc <= 3 && strcmp(argv[1], "pair") == 0) {
        a = 2000000u;
        if (argc == 3 && !arg_u64("pair N", argv[2], 1, UINT64_C(1) << 40, &a))
            return 2;
        return bench_pair(a);
    }
    if (argc == 5 && strcmp(argv[1], "synth") == 0) {
        if (!arg_u64("synth SEED", argv[2], 0, UINT64_MAX, &a) || !arg_u64("synth OPS", argv[3], 0, UINT64_MAX, &b) ||
            !arg_u64("synth STREAMS", argv[4], 1, AG_ALLOC_MAX_STREAMS, &c))
            return 2;
        return synth(a, b, (uint32_t)c);
    }
    if (argc >= 4 && strcmp(argv[1], "model") == 0) {
        if (!arg_u64("model STREAMS", argv[3], 1, AG_ALLOC_MAX_STREAMS, &a))
            return 2;
        return model(argv[2], (uint32_t)a, argc - 4, argv + 4);
    }
    if (argc >= 3 && argc <= 5 && strcmp(argv[1], "compare") == 0) {
        b = 1;
        if ((argc >= 4 && !arg_u64("compare TICKS", argv[3], 0, UINT32_MAX, &a)) ||
            (argc == 5 && !arg_u64("compare RUNS", argv[4], 1, 100000, &b)))
            return 2;
        return compare(argv[2], (uint32_t)a, (uint32_t)b);
    }
    fprintf(stderr, "usage: alloc pair [N] | synth SEED OPS STREAMS | model FILE.onnx STREAMS [--input-shape=..] [--input-value=..] | compare TRACE [TICKS [RUNS]]\n");
    return 2;
}

int main(int argc, char **argv)
{
    int rc = run(argc, argv);
    /* a trace or a figure that never reached its file is a failure */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "alloc bench: writing standard output failed: %s\n", strerror(errno));
        rc = 2;
    }
    return rc;
}
