/* Kernel mode from a caller's point of view: the caller owns a device and a
 * stream; a kernel context borrows them, prepares two callables (a scaled
 * vector add and a copy), launches them, captures the same launches into a
 * graph, replays it, and checks every number.  Exits 0 on success. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aliasguard/aliasguard.h"
#include "aliasguard/device.h"
#include "aliasguard/kernel.h"

#define N 1024

#define CHECK(call)                                                                                   \
    do {                                                                                              \
        ag_status st_ = (call);                                                                       \
        if (st_ != AG_OK) {                                                                           \
            fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, ag_status_str(st_), \
                    ag_ctx_errmsg(ctx));                                                              \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)

/* Builds a callable image for one of the built-in consumers. */
static void *callable(ag_ctx *ctx, const char *consumer, const ag_arg_dir *sig, uint32_t nsig, size_t *size)
{
    static const unsigned char orchestration[32] = "orchestration code goes here";
    ag_callable_desc d = {.func_name = consumer, .signature = sig, .sig_count = nsig,
                          .binary = orchestration, .binary_size = sizeof orchestration};
    CHECK(ag_callable_image_size(ctx, &d, size));
    void *img = aligned_alloc(AG_CALLABLE_ALIGN, (*size + AG_CALLABLE_ALIGN - 1) / AG_CALLABLE_ALIGN * AG_CALLABLE_ALIGN);
    if (!img)
        exit(1);
    CHECK(ag_callable_write(ctx, &d, img, *size));
    return img;
}

static uint64_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static int expect(const char *what, const float *got, float (*want)(int k))
{
    for (int k = 0; k < N; k++)
        if (got[k] != want(k)) {
            fprintf(stderr, "%s: element %d is %g, expected %g\n", what, k, (double)got[k], (double)want(k));
            return 1;
        }
    printf("%s: %d elements correct\n", what, N);
    return 0;
}

static float want_eager(int k) { return (float)k + 0.5f * 3.0f; }  /* z = x + 0.5 y, y = 3 */
static float want_replay1(int k) { return (float)k + 0.5f * 10.0f; } /* y changed to 10 before the replay */
static float want_replay2(int k) { return (float)k + 0.5f * want_replay1(k); } /* y = previous z */

int main(void)
{
    ag_ctx *ctx = ag_ctx_create(NULL);
    if (!ctx)
        return 1;
    /* The caller's device and stream: kernel mode borrows them. */
    ag_device *dev;
    ag_dev_stream *stream;
    CHECK(ag_device_sim_create(ctx, NULL, &dev));
    CHECK(ag_dev_stream_create(dev, &stream));
    float *x, *y, *z;
    CHECK(ag_dev_mem_alloc(dev, AG_MEM_HBM, N * sizeof(float), 0, (void **)&x));
    CHECK(ag_dev_mem_alloc(dev, AG_MEM_HBM, N * sizeof(float), 0, (void **)&y));
    CHECK(ag_dev_mem_alloc(dev, AG_MEM_HBM, N * sizeof(float), 0, (void **)&z));
    static float hx[N], hy[N], hz[N];
    for (int k = 0; k < N; k++) {
        hx[k] = (float)k;
        hy[k] = 3.0f;
    }
    CHECK(ag_dev_memcpy_async(dev, AG_COPY_H2D, x, hx, sizeof hx, stream));
    CHECK(ag_dev_memcpy_async(dev, AG_COPY_H2D, y, hy, sizeof hy, stream));
    CHECK(ag_dev_stream_synchronize(dev, stream));

    /* A kernel context on that device; 1 is this process's first context generation. */
    ag_exec_context *ec;
    CHECK(ag_exec_context_create(ctx, &ec));
    ag_kernel_config cfg = ag_kernel_config_defaults();
    cfg.arena_bytes = 1 << 20; /* this example's callables are small */
    CHECK(ag_kernel_mode_init(ec, dev, &cfg, 1));

    static const ag_arg_dir add_sig[] = {AG_ARG_IN, AG_ARG_IN, AG_ARG_OUT, AG_ARG_SCALAR};
    static const ag_arg_dir copy_sig[] = {AG_ARG_IN, AG_ARG_OUT};
    size_t add_size, copy_size;
    void *add_img = callable(ctx, AG_KERNEL_CONSUMER_SCALED_ADD, add_sig, 4, &add_size);
    void *copy_img = callable(ctx, AG_KERNEL_CONSUMER_COPY, copy_sig, 2, &copy_size);
    ag_callable_handle add, copy;
    CHECK(ag_kernel_mode_prepare_callable(ec, add_img, add_size, &add));
    CHECK(ag_kernel_mode_prepare_callable(ec, copy_img, copy_size, &copy));
    printf("prepared: scaled_add {id %d, generation %llu}, copy {id %d, generation %llu}\n", add.callable_id,
           (unsigned long long)add.generation, copy.callable_id, (unsigned long long)copy.generation);

    /* Eager: z = x + 0.5 y. */
    ag_kernel_tensor add_t[3] = {{(uintptr_t)x, sizeof hx}, {(uintptr_t)y, sizeof hy}, {(uintptr_t)z, sizeof hz}};
    uint64_t alpha = f32_bits(0.5f);
    ag_kernel_args add_args = {.tensor_count = 3, .scalar_count = 1, .tensors = add_t, .scalars = &alpha};
    CHECK(ag_kernel_mode_launch(ec, add, &add_args, stream));
    CHECK(ag_dev_memcpy_async(dev, AG_COPY_D2H, hz, z, sizeof hz, stream));
    CHECK(ag_dev_stream_synchronize(dev, stream));
    int bad = expect("eager launch", hz, want_eager);

    /* Captured: z = x + 0.5 y, then y = z; replayed twice. */
    ag_kernel_tensor copy_t[2] = {{(uintptr_t)z, sizeof hz}, {(uintptr_t)y, sizeof hy}};
    ag_kernel_args copy_args = {.tensor_count = 2, .tensors = copy_t};
    ag_dev_graph *graph;
    CHECK(ag_dev_capture_begin(dev, stream));
    CHECK(ag_kernel_mode_launch(ec, add, &add_args, stream));
    CHECK(ag_kernel_mode_launch(ec, copy, &copy_args, stream));
    CHECK(ag_dev_capture_end(dev, stream, &graph));
    for (int k = 0; k < N; k++)
        hy[k] = 10.0f;
    CHECK(ag_dev_memcpy_async(dev, AG_COPY_H2D, y, hy, sizeof hy, stream));
    CHECK(ag_dev_graph_launch(dev, graph, stream));
    CHECK(ag_dev_memcpy_async(dev, AG_COPY_D2H, hz, z, sizeof hz, stream));
    CHECK(ag_dev_stream_synchronize(dev, stream));
    bad |= expect("replay 1", hz, want_replay1);
    CHECK(ag_dev_graph_launch(dev, graph, stream));
    CHECK(ag_dev_memcpy_async(dev, AG_COPY_D2H, hz, z, sizeof hz, stream));
    CHECK(ag_dev_stream_synchronize(dev, stream));
    bad |= expect("replay 2", hz, want_replay2);

    ag_kernel_dispatch_report rep;
    CHECK(ag_kernel_dispatch_report_of(ec, &rep));
    printf("device entry: %llu executions, %llu rejected\n", (unsigned long long)rep.executions,
           (unsigned long long)rep.rejections);
    bad |= rep.executions != 5 || rep.rejections != 0;

    /* Graphs that reference the context go first, then the context; the
     * device and stream stay the caller's. */
    ag_dev_graph_destroy(dev, graph);
    CHECK(ag_kernel_mode_finalize(ec));
    CHECK(ag_exec_context_destroy(ec));
    free(add_img);
    free(copy_img);
    ag_dev_mem_free(dev, x);
    ag_dev_mem_free(dev, y);
    ag_dev_mem_free(dev, z);
    ag_dev_stream_destroy(dev, stream);
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
    printf("%s\n", bad ? "FAILED" : "ok");
    return bad;
}
