/* Kernel-mode benchmark on the simulated device: prepare (miss) throughput
 * against plain memcpy bandwidth on the same machine, prepare-hit cost for
 * 64 KiB and 16 MiB images, launch overhead (enqueue, and enqueue + run),
 * and replay overhead per captured launch.  Best of 5 runs each.
 *   kernel [LAUNCHES]   (default 100000) */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "aliasguard/aliasguard.h"
#include "aliasguard/device.h"
#include "aliasguard/kernel.h"

#define MIB (1024.0 * 1024.0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static ag_ctx *g_ctx;
static ag_device *g_dev;

static void check(ag_status st, const char *what)
{
    if (st != AG_OK) {
        const char *why = "";
        if (g_dev)
            ag_dev_device_state(g_dev, &why);
        fprintf(stderr, "kernel bench: %s: %s (%s) %s\n", what, ag_status_str(st), ag_ctx_errmsg(g_ctx), why);
        exit(2);
    }
}

static const ag_arg_dir fill_sig[] = {AG_ARG_OUT, AG_ARG_SCALAR};

/* An image of exactly `bytes` (header included) for the fill consumer; the
 * binary starts with salt so images differ. */
static void *image(size_t bytes, uint64_t salt)
{
    size_t binary = bytes - AG_CALLABLE_HEADER_BYTES;
    unsigned char *bin = malloc(binary);
    if (!bin)
        exit(2);
    for (size_t k = 0; k < binary; k++)
        bin[k] = (unsigned char)(k * 131u + 7u);
    memcpy(bin, &salt, sizeof salt);
    ag_callable_desc d = {.func_name = AG_KERNEL_CONSUMER_FILL, .signature = fill_sig, .sig_count = 2,
                          .binary = bin, .binary_size = (uint32_t)binary};
    void *img = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!img)
        exit(2);
    check(ag_callable_write(g_ctx, &d, img, bytes), "write image");
    free(bin);
    return img;
}

static ag_exec_context *context(ag_device *dev, uint64_t gen)
{
    ag_exec_context *ec;
    check(ag_exec_context_create(g_ctx, &ec), "context");
    check(ag_kernel_mode_init(ec, dev, NULL, gen), "init");
    return ec;
}

static void close_context(ag_exec_context *ec)
{
    check(ag_kernel_mode_finalize(ec), "finalize");
    check(ag_exec_context_destroy(ec), "destroy");
}

int main(int argc, char **argv)
{
    long launches = argc > 1 ? atol(argv[1]) : 100000;
    if (launches < 1000)
        launches = 1000;
    g_ctx = ag_ctx_create(NULL);
    ag_device *dev;
    check(ag_device_sim_create(g_ctx, NULL, &dev), "device");
    g_dev = dev;
    ag_dev_stream *s;
    check(ag_dev_stream_create(dev, &s), "stream");
    uint64_t gen = 1;

    /* memcpy bandwidth on 16 MiB buffers (what a miss must at least move twice:
     * the cache's host copy and the upload). */
    const size_t big = 16u << 20;
    unsigned char *a = malloc(big), *b = malloc(big);
    memset(a, 1, big);
    memset(b, 2, big);
    double best_cpy = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        for (int k = 0; k < 8; k++) {
            memcpy(b, a, big);
            a[k] ^= b[big - 1 - (size_t)k];
        }
        double t = (now_s() - t0) / 8;
        if (t < best_cpy)
            best_cpy = t;
    }
    double memcpy_gbs = big / best_cpy / 1e9;
    /* A miss writes memory never touched before (its host copy, its arena
     * range), so page faults are part of its price: the same for memcpy. */
    double best_fresh = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        for (int k = 0; k < 8; k++) {
            /* mmap, not malloc: the C library would hand the same pages back. */
            unsigned char *f = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (f == MAP_FAILED)
                exit(2);
            memcpy(f, a, big);
            a[k] ^= f[big - 1 - (size_t)k];
            munmap(f, big);
        }
        double t = (now_s() - t0) / 8;
        if (t < best_fresh)
            best_fresh = t;
    }
    double fresh_gbs = big / best_fresh / 1e9;
    printf("memcpy 16 MiB:            %8.2f GB/s  %8.3f ms\n", memcpy_gbs, best_cpy * 1e3);
    printf("memcpy 16 MiB, fresh dst: %8.2f GB/s  %8.3f ms\n", fresh_gbs, best_fresh * 1e3);

    /* Prepare (miss): 24 distinct 16 MiB images into a fresh context. */
    enum { NMISS = 24 };
    void *imgs[NMISS];
    for (int k = 0; k < NMISS; k++)
        imgs[k] = image(big, (uint64_t)k + 1);
    double best_miss = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        ag_exec_context *ec = context(dev, gen++);
        ag_callable_handle h;
        double t0 = now_s();
        for (int k = 0; k < NMISS; k++)
            check(ag_kernel_mode_prepare_callable(ec, imgs[k], big, &h), "prepare miss");
        double t = (now_s() - t0) / NMISS;
        if (t < best_miss)
            best_miss = t;
        close_context(ec);
    }
    double miss_gbs = big / best_miss / 1e9;
    printf("prepare miss 16 MiB:      %8.2f GB/s  %8.3f ms  (%.2f x memcpy, %.2f x fresh memcpy)\n", miss_gbs,
           best_miss * 1e3, memcpy_gbs / miss_gbs, fresh_gbs / miss_gbs);

    /* Prepare (hit): the same content again, from a different buffer. */
    size_t sizes[2] = {64u << 10, big};
    for (int z = 0; z < 2; z++) {
        ag_exec_context *ec = context(dev, gen++);
        void *img = image(sizes[z], 99);
        void *same = aligned_alloc(64, sizes[z]);
        memcpy(same, img, sizes[z]);
        ag_callable_handle h;
        check(ag_kernel_mode_prepare_callable(ec, img, sizes[z], &h), "prepare");
        int reps = z == 0 ? 20000 : 40;
        double best = 1e9;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = now_s();
            for (int k = 0; k < reps; k++)
                check(ag_kernel_mode_prepare_callable(ec, same, sizes[z], &h), "prepare hit");
            double t = (now_s() - t0) / reps;
            if (t < best)
                best = t;
        }
        printf("prepare hit %-6s        %8.2f us  (%.2f GB/s: validate + hash + compare)\n",
               z == 0 ? "64 KiB" : "16 MiB", best * 1e6, sizes[z] / best / 1e9);
        free(img);
        free(same);
        close_context(ec);
    }

    /* Launch: a fill of 64 floats; enqueue cost alone and enqueue + run. */
    ag_exec_context *ec = context(dev, gen++);
    void *fill = image(AG_CALLABLE_HEADER_BYTES, 5);
    ag_callable_handle hf;
    check(ag_kernel_mode_prepare_callable(ec, fill, AG_CALLABLE_HEADER_BYTES, &hf), "prepare fill");
    float *out;
    check(ag_dev_mem_alloc(dev, AG_MEM_HBM, 64 * sizeof(float), 0, (void **)&out), "tensor");
    ag_kernel_tensor tt = {(uintptr_t)out, 64 * sizeof(float)};
    uint64_t one = 0x3f800000u;
    ag_kernel_args args = {.tensor_count = 1, .scalar_count = 1, .tensors = &tt, .scalars = &one};
    double best_enq = 1e9, best_run = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        for (long k = 0; k < launches; k++)
            check(ag_kernel_mode_launch(ec, hf, &args, s), "launch");
        double t1 = now_s();
        check(ag_dev_stream_synchronize(dev, s), "sync");
        double t2 = now_s();
        if ((t1 - t0) / launches < best_enq)
            best_enq = (t1 - t0) / launches;
        if ((t2 - t0) / launches < best_run)
            best_run = (t2 - t0) / launches;
    }
    printf("launch (enqueue)          %8.3f us\n", best_enq * 1e6);
    printf("launch (enqueue + run)    %8.3f us\n", best_run * 1e6);

    /* Replay: a graph of 100 captured launches, replayed. */
    enum { GRAPH = 100 };
    check(ag_dev_capture_begin(dev, s), "capture");
    for (int k = 0; k < GRAPH; k++)
        check(ag_kernel_mode_launch(ec, hf, &args, s), "captured launch");
    ag_dev_graph *g;
    check(ag_dev_capture_end(dev, s, &g), "capture end");
    long replays = launches / GRAPH;
    double best_rep = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        for (long k = 0; k < replays; k++)
            check(ag_dev_graph_launch(dev, g, s), "replay");
        check(ag_dev_stream_synchronize(dev, s), "sync");
        double t = (now_s() - t0) / ((double)replays * GRAPH);
        if (t < best_rep)
            best_rep = t;
    }
    printf("replay per launch         %8.3f us  (graph of %d launches, re-validated each time)\n", best_rep * 1e6,
           GRAPH);
    ag_kernel_dispatch_report rep;
    check(ag_kernel_dispatch_report_of(ec, &rep), "report");
    if (rep.rejections != 0) {
        fprintf(stderr, "kernel bench: %llu executions rejected\n", (unsigned long long)rep.rejections);
        return 1;
    }
    ag_dev_graph_destroy(dev, g);
    ag_dev_mem_free(dev, out);
    close_context(ec);
    free(fill);
    for (int k = 0; k < NMISS; k++)
        free(imgs[k]);
    free(a);
    free(b);
    ag_dev_stream_destroy(dev, s);
    ag_device_destroy(dev);
    ag_ctx_destroy(g_ctx);
    return 0;
}
