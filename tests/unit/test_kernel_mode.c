/* Kernel mode end to end on the simulated device: the latch both ways through
 * the public entries, the order of refusals, launches whose numbers are
 * checked, capture -> replay -> stale after close, limits as parameters,
 * injected device failures at every call of init, prepare and close, and
 * host allocation failures over a whole context life. */
#include "support/agtest.h"

#include "aliasguard/device.h"
#include "aliasguard/kernel.h"

#define assert_st(got, want) assert_int_equal((int)(got), (int)(want))

#define N 256 /* floats per tensor */

static const ag_arg_dir sig_add[] = {AG_ARG_IN, AG_ARG_IN, AG_ARG_OUT, AG_ARG_SCALAR};
static const ag_arg_dir sig_fill[] = {AG_ARG_OUT, AG_ARG_SCALAR};
static const ag_arg_dir sig_copy[] = {AG_ARG_IN, AG_ARG_OUT};

typedef struct img {
    void *p;
    size_t n;
} img;

/* A callable for consumer `name`; salt makes otherwise equal images differ. */
static img make_image(const char *name, const ag_arg_dir *sig, uint32_t nsig, uint32_t salt, uint32_t binary)
{
    unsigned char *bin = calloc(1, binary + 16); /* the child reads 16 bytes */
    memcpy(bin, &salt, 4);
    ag_callable_child ch = {.func_id = 3, .signature = sig, .sig_count = nsig < 2 ? nsig : 2, .binary = bin,
                            .binary_size = 16};
    ag_callable_desc d = {.func_name = name, .signature = sig, .sig_count = nsig, .binary = bin,
                          .binary_size = binary + 4, .children = &ch, .child_count = 1};
    img m;
    assert_st(ag_callable_image_size(NULL, &d, &m.n), AG_OK);
    m.p = aligned_alloc(64, (m.n + 63) / 64 * 64);
    assert_st(ag_callable_write(NULL, &d, m.p, m.n), AG_OK);
    free(bin);
    return m;
}

static uint64_t f32(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

typedef struct rig {
    ag_ctx *dctx;   /* the device's */
    ag_ctx *ctx;    /* the kernel context's */
    ag_device *sim;
    ag_device *dev; /* sim, or a fault wrapper around it */
    ag_dev_fault fault;
    ag_dev_stream *caller;
    float *x, *y, *z; /* device tensors */
} rig;

static void put(rig *r, float *dst, const float *src)
{
    assert_st(ag_dev_memcpy_async(r->dev, AG_COPY_H2D, dst, src, N * sizeof(float), r->caller), AG_OK);
    assert_st(ag_dev_stream_synchronize(r->dev, r->caller), AG_OK);
}

static void get(rig *r, float *dst, const float *src)
{
    assert_st(ag_dev_memcpy_async(r->dev, AG_COPY_D2H, dst, src, N * sizeof(float), r->caller), AG_OK);
    assert_st(ag_dev_stream_synchronize(r->dev, r->caller), AG_OK);
}

static void rig_open(rig *r, ag_ctx *ctx, bool wrap)
{
    memset(r, 0, sizeof *r);
    r->dctx = agtest_ctx();
    r->ctx = ctx ? ctx : agtest_ctx();
    assert_st(ag_device_sim_create(r->dctx, NULL, &r->sim), AG_OK);
    r->dev = r->sim;
    if (wrap) {
        ag_dev_fault_init(&r->fault, 0, 0, 0, AG_FAULT_RETURN);
        assert_st(ag_device_fault_wrap(r->dctx, r->sim, &r->fault, &r->dev), AG_OK);
    }
    assert_st(ag_dev_stream_create(r->dev, &r->caller), AG_OK);
    assert_st(ag_dev_mem_alloc(r->dev, AG_MEM_HBM, N * sizeof(float), 0, (void **)&r->x), AG_OK);
    assert_st(ag_dev_mem_alloc(r->dev, AG_MEM_HBM, N * sizeof(float), 0, (void **)&r->y), AG_OK);
    assert_st(ag_dev_mem_alloc(r->dev, AG_MEM_HBM, N * sizeof(float), 0, (void **)&r->z), AG_OK);
    float hx[N], hy[N];
    for (int k = 0; k < N; k++) {
        hx[k] = (float)k;
        hy[k] = 2.0f;
    }
    put(r, r->x, hx);
    put(r, r->y, hy);
}

/* Asserts that every device allocation, stream and event of the kernel
 * context is gone (the rig's own three tensors and stream remain). */
static void assert_only_rig_left(rig *r)
{
    ag_dev_stats st = {.size = sizeof st};
    ag_dev_stats_get(r->sim, &st);
    assert_int_equal(st.mem[AG_MEM_HBM].live, 3);
    assert_int_equal(st.mem[AG_MEM_HOST].live, 0);
    assert_int_equal(st.live_streams, 1);
    assert_int_equal(st.live_events, 0);
}

static void rig_close(rig *r, bool own_ctx)
{
    ag_dev_mem_free(r->dev, r->x);
    ag_dev_mem_free(r->dev, r->y);
    ag_dev_mem_free(r->dev, r->z);
    ag_dev_stream_destroy(r->dev, r->caller);
    if (r->dev != r->sim)
        ag_device_destroy(r->dev);
    ag_device_destroy(r->sim);
    ag_ctx_destroy(r->dctx);
    if (own_ctx)
        ag_ctx_destroy(r->ctx);
}

static ag_exec_context *kernel_ctx(rig *r, uint64_t gen)
{
    ag_exec_context *ec;
    assert_st(ag_exec_context_create(r->ctx, &ec), AG_OK);
    assert_st(ag_kernel_mode_init(ec, r->dev, NULL, gen), AG_OK);
    return ec;
}

static void finish(ag_exec_context *ec)
{
    assert_st(ag_kernel_mode_finalize(ec), AG_OK);
    assert_int_equal(ag_kernel_phase_of(ec), AG_KPHASE_CLOSED);
    assert_st(ag_exec_context_destroy(ec), AG_OK);
}

static ag_kernel_args add_args(rig *r, ag_kernel_tensor t[3], uint64_t *alpha, float a)
{
    t[0] = (ag_kernel_tensor){(uintptr_t)r->x, N * sizeof(float)};
    t[1] = (ag_kernel_tensor){(uintptr_t)r->y, N * sizeof(float)};
    t[2] = (ag_kernel_tensor){(uintptr_t)r->z, N * sizeof(float)};
    *alpha = f32(a);
    ag_kernel_args args = {.tensor_count = 3, .scalar_count = 1, .tensors = t, .scalars = alpha};
    return args;
}

/* ---------------------------------------------------------------- latch */

static void latch_both_ways(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, NULL, false);
    ag_exec_context *p, *k;
    assert_st(ag_exec_context_create(r.ctx, &p), AG_OK);
    assert_true(ag_kernel_mode_supported(p));
    assert_false(ag_exec_context_mode(p, NULL));
    assert_st(ag_program_init(p, r.dev), AG_OK);
    assert_st(ag_program_init(p, r.dev), AG_OK); /* idempotent relatch */
    ag_exec_mode m;
    assert_true(ag_exec_context_mode(p, &m));
    assert_int_equal(m, AG_EXEC_PROGRAM);
    assert_false(ag_kernel_mode_supported(p));
    assert_st(ag_kernel_mode_init(p, r.dev, NULL, 5), AG_KERNEL_ERR_INVALID_STATE);
    assert_errmsg(r.ctx, "latched PROGRAM");
    ag_callable_handle h;
    img im = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 1, 0);
    assert_st(ag_kernel_mode_prepare_callable(p, im.p, im.n, &h), AG_KERNEL_ERR_INVALID_STATE);
    assert_st(ag_kernel_mode_finalize(p), AG_KERNEL_ERR_INVALID_STATE);
    assert_st(ag_exec_context_destroy(p), AG_OK);

    k = kernel_ctx(&r, 6);
    assert_true(ag_exec_context_mode(k, &m));
    assert_int_equal(m, AG_EXEC_KERNEL);
    assert_st(ag_program_init(k, r.dev), AG_KERNEL_ERR_INVALID_STATE);
    assert_errmsg(r.ctx, "latched KERNEL");
    assert_st(ag_kernel_mode_init(k, r.dev, NULL, 7), AG_KERNEL_ERR_INVALID_STATE); /* repeated init */
    finish(k);
    free(im.p);
    assert_only_rig_left(&r);
    rig_close(&r, true);
}

static void failed_kernel_init_never_becomes_a_program_context(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, NULL, true);
    ag_exec_context *ec;
    assert_st(ag_exec_context_create(r.ctx, &ec), AG_OK);
    ag_dev_fault_init(&r.fault, AG_DEV_ENTRY_BIT(AG_DEV_E_STREAM_CREATE), 1, 0, AG_FAULT_RETURN);
    assert_st(ag_kernel_mode_init(ec, r.dev, NULL, 5), AG_ENOMEM);
    assert_int_equal(ag_kernel_phase_of(ec), AG_KPHASE_NEW); /* rolled back ... */
    ag_exec_mode m;
    assert_true(ag_exec_context_mode(ec, &m)); /* ... but the identity stays */
    assert_int_equal(m, AG_EXEC_KERNEL);
    assert_st(ag_program_init(ec, r.dev), AG_KERNEL_ERR_INVALID_STATE);
    /* A fully rolled-back init may be retried. */
    ag_dev_fault_init(&r.fault, 0, 0, 0, AG_FAULT_RETURN);
    assert_st(ag_kernel_mode_init(ec, r.dev, NULL, 5), AG_OK);
    assert_int_equal(ag_kernel_phase_of(ec), AG_KPHASE_COLLECTING);
    finish(ec);
    assert_only_rig_left(&r);
    rig_close(&r, true);
}

static void refusal_order_structure_before_phase(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, NULL, false);
    ag_exec_context *ec;
    assert_st(ag_exec_context_create(r.ctx, &ec), AG_OK);
    img im = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 1, 0);
    ag_callable_handle h = {.callable_id = 7, .generation = 1};
    ag_kernel_args none = {0};
    /* Malformed calls are INVALID_ARGUMENT even on a context never initialized ... */
    assert_st(ag_kernel_mode_prepare_callable(ec, im.p, 100, &h), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_int_equal(h.callable_id, -1);
    assert_st(ag_kernel_mode_prepare_callable(ec, (char *)im.p + 8, im.n, &h), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_st(ag_kernel_mode_prepare_callable(ec, im.p, im.n, NULL), AG_KERNEL_ERR_INVALID_ARGUMENT);
    ag_callable_handle bad = {.callable_id = 0, .generation = 0};
    assert_st(ag_kernel_mode_launch(ec, bad, &none, r.caller), AG_KERNEL_ERR_INVALID_ARGUMENT);
    ag_callable_handle far = {.callable_id = 64, .generation = 3};
    assert_st(ag_kernel_mode_launch(ec, far, &none, r.caller), AG_KERNEL_ERR_COUNT_EXCEEDED);
    ag_callable_handle ok = {.callable_id = 0, .generation = 3};
    assert_st(ag_kernel_mode_launch(ec, ok, &none, NULL), AG_KERNEL_ERR_INVALID_ARGUMENT);
    /* ... and a well-formed one is INVALID_STATE. */
    assert_st(ag_kernel_mode_prepare_callable(ec, im.p, im.n, &h), AG_KERNEL_ERR_INVALID_STATE);
    assert_st(ag_kernel_mode_launch(ec, ok, &none, r.caller), AG_KERNEL_ERR_INVALID_STATE);
    /* Init: arguments and config before anything; nothing latched by a refusal. */
    assert_st(ag_kernel_mode_init(ec, NULL, NULL, 5), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_st(ag_kernel_mode_init(ec, r.dev, NULL, 0), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_st(ag_kernel_mode_init(ec, r.dev, NULL, UINT64_MAX), AG_KERNEL_ERR_INVALID_ARGUMENT);
    ag_kernel_config cfg = ag_kernel_config_defaults();
    cfg.max_callables = 0;
    assert_st(ag_kernel_mode_init(ec, r.dev, &cfg, 5), AG_KERNEL_ERR_INVALID_ARGUMENT);
    cfg = ag_kernel_config_defaults();
    cfg.arena_bytes = 100;
    assert_st(ag_kernel_mode_init(ec, r.dev, &cfg, 5), AG_KERNEL_ERR_INVALID_ARGUMENT);
    cfg = ag_kernel_config_defaults();
    cfg.consumer_count = 1;
    assert_st(ag_kernel_mode_init(ec, r.dev, &cfg, 5), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_st(ag_kernel_mode_init(NULL, r.dev, NULL, 5), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_false(ag_exec_context_mode(ec, NULL));
    assert_st(ag_kernel_mode_finalize(ec), AG_KERNEL_ERR_INVALID_STATE); /* not a kernel context */
    assert_st(ag_program_init(ec, r.dev), AG_OK); /* still free to become either */
    assert_st(ag_exec_context_destroy(ec), AG_OK);
    free(im.p);
    rig_close(&r, true);
}

/* ---------------------------------------------------------------- launches */

static void launches_compute_and_hits_reuse(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, NULL, false);
    ag_exec_context *ec = kernel_ctx(&r, 11);
    img add = make_image(AG_KERNEL_CONSUMER_SCALED_ADD, sig_add, 4, 1, 100);
    img fill = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 2, 50);
    ag_callable_handle ha, hf, again;
    assert_st(ag_kernel_mode_prepare_callable(ec, add.p, add.n, &ha), AG_OK);
    assert_int_equal(ag_kernel_phase_of(ec), AG_KPHASE_READY_ENQUEUED);
    assert_st(ag_kernel_mode_prepare_callable(ec, fill.p, fill.n, &hf), AG_OK);
    assert_int_equal(ha.callable_id, 0);
    assert_int_equal(hf.callable_id, 1);
    assert_int_equal(ha.generation, 11);
    ag_kernel_residency_stats rs;
    assert_st(ag_kernel_residency_stats_of(ec, &rs), AG_OK);
    assert_int_equal(rs.resident_count, 2);
    assert_int_equal(rs.image_bytes, add.n + fill.n);
    assert_int_equal(rs.resident_bytes, (add.n + 63) / 64 * 64 + (fill.n + 63) / 64 * 64);
    assert_int_equal(rs.arena_bytes, UINT64_C(512) << 20);
    /* Identical content: the original handle, nothing new. */
    assert_st(ag_kernel_mode_prepare_callable(ec, add.p, add.n, &again), AG_OK);
    assert_int_equal(again.callable_id, 0);
    assert_int_equal(again.generation, 11);
    ag_kernel_residency_stats rs2;
    assert_st(ag_kernel_residency_stats_of(ec, &rs2), AG_OK);
    assert_memory_equal(&rs, &rs2, sizeof rs);

    ag_kernel_tensor t[3];
    uint64_t alpha;
    ag_kernel_args args = add_args(&r, t, &alpha, 0.5f);
    assert_st(ag_kernel_mode_launch(ec, ha, &args, r.caller), AG_OK);
    float out[N];
    get(&r, out, r.z);
    for (int k = 0; k < N; k++)
        assert_true(out[k] == (float)k + 1.0f);
    /* fill z with 7, then z = x + 3 * z: two launches queued back to back. */
    uint64_t seven = f32(7.0f);
    ag_kernel_tensor tz = {(uintptr_t)r.z, N * sizeof(float)};
    ag_kernel_args fa = {.tensor_count = 1, .scalar_count = 1, .tensors = &tz, .scalars = &seven};
    assert_st(ag_kernel_mode_launch(ec, hf, &fa, r.caller), AG_OK);
    ag_kernel_tensor t2[3] = {t[0], t[2], t[2]};
    uint64_t three = f32(3.0f);
    ag_kernel_args a2 = {.tensor_count = 3, .scalar_count = 1, .tensors = t2, .scalars = &three};
    assert_st(ag_kernel_mode_launch(ec, ha, &a2, r.caller), AG_OK);
    get(&r, out, r.z);
    for (int k = 0; k < N; k++)
        assert_true(out[k] == (float)k + 21.0f);
    ag_kernel_dispatch_report rep;
    assert_st(ag_kernel_dispatch_report_of(ec, &rep), AG_OK);
    assert_int_equal(rep.executions, 3);
    assert_int_equal(rep.rejections, 0);

    /* Host refusals before anything is enqueued. */
    ag_callable_handle missing = {.callable_id = 5, .generation = 11};
    assert_st(ag_kernel_mode_launch(ec, missing, &args, r.caller), AG_KERNEL_ERR_NOT_RESIDENT);
    ag_callable_handle other = {.callable_id = 0, .generation = 12};
    assert_st(ag_kernel_mode_launch(ec, other, &args, r.caller), AG_KERNEL_ERR_STALE);
    assert_st(ag_kernel_mode_launch(ec, hf, &args, r.caller), AG_KERNEL_ERR_INVALID_ARGUMENT); /* counts */
    assert_errmsg(r.ctx, "takes 1 tensors and 1 scalars");
    /* A callable naming no consumer of this context. */
    img unknown = make_image("no.such.consumer", sig_fill, 2, 3, 0);
    ag_callable_handle hu;
    assert_st(ag_kernel_mode_prepare_callable(ec, unknown.p, unknown.n, &hu), AG_KERNEL_ERR_UNSUPPORTED);
    assert_int_equal(hu.callable_id, -1);
    assert_st(ag_kernel_residency_stats_of(ec, &rs2), AG_OK);
    assert_memory_equal(&rs, &rs2, sizeof rs);
    /* Destroy is refused while the context owns streams and events. */
    assert_st(ag_exec_context_destroy(ec), AG_KERNEL_ERR_INVALID_STATE);
    finish(ec);
    assert_st(ag_kernel_mode_prepare_callable(ec = kernel_ctx(&r, 13), add.p, add.n, &again), AG_OK);
    finish(ec);
    free(add.p);
    free(fill.p);
    free(unknown.p);
    assert_only_rig_left(&r);
    rig_close(&r, true);
}

static void stale_handle_from_another_context(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, NULL, false);
    /* Two default arenas would not fit the simulated 1 GiB together. */
    ag_kernel_config cfg = ag_kernel_config_defaults();
    cfg.arena_bytes = 1 << 20;
    ag_exec_context *a, *b;
    assert_st(ag_exec_context_create(r.ctx, &a), AG_OK);
    assert_st(ag_exec_context_create(r.ctx, &b), AG_OK);
    assert_st(ag_kernel_mode_init(a, r.dev, &cfg, 17), AG_OK);
    assert_st(ag_kernel_mode_init(b, r.dev, &cfg, 18), AG_OK);
    img ia = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 1, 0);
    img ib = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 2, 0);
    ag_callable_handle ha, hb;
    assert_st(ag_kernel_mode_prepare_callable(a, ia.p, ia.n, &ha), AG_OK);
    assert_st(ag_kernel_mode_prepare_callable(b, ib.p, ib.n, &hb), AG_OK);
    assert_int_equal(ha.callable_id, hb.callable_id);
    uint64_t v = f32(1.0f);
    ag_kernel_tensor tz = {(uintptr_t)r.z, N * sizeof(float)};
    ag_kernel_args fa = {.tensor_count = 1, .scalar_count = 1, .tensors = &tz, .scalars = &v};
    assert_st(ag_kernel_mode_launch(b, ha, &fa, r.caller), AG_KERNEL_ERR_STALE);
    assert_st(ag_kernel_mode_launch(a, hb, &fa, r.caller), AG_KERNEL_ERR_STALE);
    finish(a);
    finish(b);
    free(ia.p);
    free(ib.p);
    rig_close(&r, true);
}

static void capture_replay_then_stale_after_close(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, NULL, false);
    ag_exec_context *ec = kernel_ctx(&r, 21);
    img add = make_image(AG_KERNEL_CONSUMER_SCALED_ADD, sig_add, 4, 1, 0);
    img cp = make_image(AG_KERNEL_CONSUMER_COPY, sig_copy, 2, 2, 0);
    ag_callable_handle ha, hc;
    assert_st(ag_kernel_mode_prepare_callable(ec, add.p, add.n, &ha), AG_OK);
    assert_st(ag_kernel_mode_prepare_callable(ec, cp.p, cp.n, &hc), AG_OK);
    /* Graph: z = x + 2 y; y = z.  Each replay doubles-and-adds. */
    ag_kernel_tensor t[3];
    uint64_t alpha;
    ag_kernel_args args = add_args(&r, t, &alpha, 2.0f);
    ag_kernel_tensor tc[2] = {t[2], t[1]};
    ag_kernel_args ca = {.tensor_count = 2, .tensors = tc};
    assert_st(ag_dev_capture_begin(r.dev, r.caller), AG_OK);
    assert_st(ag_kernel_mode_launch(ec, ha, &args, r.caller), AG_OK);
    assert_st(ag_kernel_mode_launch(ec, hc, &ca, r.caller), AG_OK);
    /* The caller's argument buffers are reused at once: launches took copies. */
    alpha = f32(-100.0f);
    tc[0] = tc[1];
    ag_dev_graph *g;
    assert_st(ag_dev_capture_end(r.dev, r.caller, &g), AG_OK);
    ag_kernel_dispatch_report rep;
    assert_st(ag_kernel_dispatch_report_of(ec, &rep), AG_OK);
    assert_int_equal(rep.executions, 0); /* captured, not run */
    float y[N], z[N];
    for (int replay = 1; replay <= 3; replay++) {
        assert_st(ag_dev_graph_launch(r.dev, g, r.caller), AG_OK);
        get(&r, z, r.z);
        get(&r, y, r.y);
        /* y_0 = 2; y_n = x + 2 y_{n-1} */
        for (int k = 0; k < N; k++) {
            float want = 2.0f;
            for (int n = 0; n < replay; n++)
                want = (float)k + 2.0f * want;
            assert_true(z[k] == want);
            assert_true(y[k] == want);
        }
    }
    assert_st(ag_kernel_dispatch_report_of(ec, &rep), AG_OK);
    assert_int_equal(rep.executions, 6);
    assert_int_equal(rep.rejections, 0);

    /* Close retires every slot; the captured packets are now stale. */
    assert_st(ag_kernel_mode_finalize(ec), AG_OK);
    assert_st(ag_dev_graph_launch(r.dev, g, r.caller), AG_OK);
    assert_st(ag_dev_stream_synchronize(r.dev, r.caller), AG_EDEVICE);
    const char *why = NULL;
    assert_int_equal(ag_dev_device_state(r.dev, &why), AG_DEV_POISONED);
    assert_non_null(strstr(why, "ag.kernel.entry"));
    assert_st(ag_kernel_dispatch_report_of(ec, &rep), AG_OK);
    assert_int_equal(rep.executions, 7); /* the first rejection poisons; the rest is dropped */
    assert_int_equal(rep.rejections, 1);
    assert_int_equal(rep.first_reject_status, AG_KDISPATCH_STALE);
    ag_dev_graph_destroy(r.dev, g);
    assert_st(ag_exec_context_destroy(ec), AG_OK);
    free(add.p);
    free(cp.p);
    assert_only_rig_left(&r);
    rig_close(&r, true);
}

static void limits_are_parameters(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, NULL, false);
    ag_exec_context *ec;
    assert_st(ag_exec_context_create(r.ctx, &ec), AG_OK);
    img a = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 1, 1000);
    img b = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 2, 1000);
    img c = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 3, 1000);
    img big = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 4, 60000);
    ag_kernel_config cfg = ag_kernel_config_defaults();
    cfg.max_callables = 2;
    cfg.arena_bytes = 4 * ((a.n + 63) / 64 * 64);
    assert_st(ag_kernel_mode_init(ec, r.dev, &cfg, 3), AG_OK);
    ag_callable_handle h;
    assert_st(ag_kernel_mode_prepare_callable(ec, big.p, big.n, &h), AG_KERNEL_ERR_BYTES_EXCEEDED);
    assert_st(ag_kernel_mode_prepare_callable(ec, a.p, a.n, &h), AG_OK);
    assert_st(ag_kernel_mode_prepare_callable(ec, b.p, b.n, &h), AG_OK);
    assert_st(ag_kernel_mode_prepare_callable(ec, c.p, c.n, &h), AG_KERNEL_ERR_COUNT_EXCEEDED);
    assert_st(ag_kernel_mode_prepare_callable(ec, a.p, a.n, &h), AG_OK); /* hit while full */
    assert_int_equal(h.callable_id, 0);
    ag_callable_handle far = {.callable_id = 2, .generation = 3};
    ag_kernel_args none = {0};
    assert_st(ag_kernel_mode_launch(ec, far, &none, r.caller), AG_KERNEL_ERR_COUNT_EXCEEDED);
    ag_kernel_residency_stats rs;
    assert_st(ag_kernel_residency_stats_of(ec, &rs), AG_OK);
    assert_int_equal(rs.arena_bytes, cfg.arena_bytes);
    finish(ec);
    free(a.p);
    free(b.p);
    free(c.p);
    free(big.p);
    rig_close(&r, true);
}

/* ---------------------------------------------------------------- failures */

/* A failure at every device call of prepare, for the first callable (the
 * arena is allocated then) and for a later one: rolled back, the retry
 * succeeds and computes. */
static void device_failure_at_every_call_of_prepare(void **state)
{
    (void)state;
    img first = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 1, 0);
    img add = make_image(AG_KERNEL_CONSUMER_SCALED_ADD, sig_add, 4, 2, 300);
    for (int later = 0; later < 2; later++) {
        uint64_t n;
        for (n = 1;; n++) {
            rig r;
            rig_open(&r, NULL, true);
            ag_exec_context *ec = kernel_ctx(&r, 31);
            ag_callable_handle h;
            if (later)
                assert_st(ag_kernel_mode_prepare_callable(ec, first.p, first.n, &h), AG_OK);
            ag_kernel_residency_stats before, after;
            assert_st(ag_kernel_residency_stats_of(ec, &before), AG_OK);
            ag_kernel_phase phase = ag_kernel_phase_of(ec);
            ag_dev_fault_init(&r.fault, AG_DEV_ENTRY_ALL, n, 0, AG_FAULT_RETURN);
            ag_status st = ag_kernel_mode_prepare_callable(ec, add.p, add.n, &h);
            bool injected = r.fault.nfail > 0;
            ag_dev_fault_init(&r.fault, 0, 0, 0, AG_FAULT_RETURN);
            if (injected) {
                assert_true(st != AG_OK);
                assert_int_equal(h.callable_id, -1);
                assert_int_equal(ag_kernel_phase_of(ec), phase); /* rolled back, not poisoned */
                assert_st(ag_kernel_residency_stats_of(ec, &after), AG_OK);
                assert_int_equal(after.resident_count, before.resident_count);
                assert_int_equal(after.resident_bytes, before.resident_bytes);
                assert_int_equal(after.image_bytes, before.image_bytes);
                /* The retry succeeds and the callable works. */
                assert_st(ag_kernel_mode_prepare_callable(ec, add.p, add.n, &h), AG_OK);
            } else {
                assert_st(st, AG_OK);
            }
            assert_int_equal(h.callable_id, later);
            ag_kernel_tensor t[3];
            uint64_t alpha;
            ag_kernel_args args = add_args(&r, t, &alpha, 1.0f);
            assert_st(ag_kernel_mode_launch(ec, h, &args, r.caller), AG_OK);
            float out[N];
            get(&r, out, r.z);
            for (int k = 0; k < N; k++)
                assert_true(out[k] == (float)k + 2.0f);
            finish(ec);
            assert_only_rig_left(&r);
            rig_close(&r, true);
            if (!injected)
                break;
        }
        assert_true(n > 4);
    }
    free(first.p);
    free(add.p);
}

/* The seed's limits with the default config: the 65th unique image. */
static void sixty_fifth_image_with_the_defaults(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, NULL, false);
    ag_exec_context *ec = kernel_ctx(&r, 91);
    img imgs[65];
    ag_callable_handle h;
    for (int k = 0; k < 65; k++) {
        imgs[k] = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, (uint32_t)k + 100, 0);
        ag_status st = ag_kernel_mode_prepare_callable(ec, imgs[k].p, imgs[k].n, &h);
        assert_st(st, k < 64 ? AG_OK : AG_KERNEL_ERR_COUNT_EXCEEDED);
        assert_int_equal(h.callable_id, k < 64 ? k : -1);
    }
    ag_kernel_residency_stats rs;
    assert_st(ag_kernel_residency_stats_of(ec, &rs), AG_OK);
    assert_int_equal(rs.resident_count, 64);
    /* Every resident still hits and launches. */
    assert_st(ag_kernel_mode_prepare_callable(ec, imgs[63].p, imgs[63].n, &h), AG_OK);
    assert_int_equal(h.callable_id, 63);
    uint64_t v = f32(4.0f);
    ag_kernel_tensor tz = {(uintptr_t)r.z, N * sizeof(float)};
    ag_kernel_args fa = {.tensor_count = 1, .scalar_count = 1, .tensors = &tz, .scalars = &v};
    assert_st(ag_kernel_mode_launch(ec, h, &fa, r.caller), AG_OK);
    float out[N];
    get(&r, out, r.z);
    assert_true(out[0] == 4.0f && out[N - 1] == 4.0f);
    finish(ec);
    for (int k = 0; k < 65; k++)
        free(imgs[k].p);
    rig_close(&r, true);
}

static void device_failure_at_every_call_of_init(void **state)
{
    (void)state;
    int rolled_back = 0, poisoned = 0;
    uint64_t n;
    for (n = 1;; n++) {
        rig r;
        rig_open(&r, NULL, true);
        ag_exec_context *ec;
        assert_st(ag_exec_context_create(r.ctx, &ec), AG_OK);
        ag_dev_fault_init(&r.fault, AG_DEV_ENTRY_ALL, n, 0, AG_FAULT_RETURN);
        ag_status st = ag_kernel_mode_init(ec, r.dev, NULL, 41);
        bool injected = r.fault.nfail > 0;
        ag_dev_fault_init(&r.fault, 0, 0, 0, AG_FAULT_RETURN);
        ag_kernel_phase ph = ag_kernel_phase_of(ec);
        if (injected) {
            assert_true(st != AG_OK);
            assert_true(ph == AG_KPHASE_NEW || ph == AG_KPHASE_POISONED);
            assert_st(ag_program_init(ec, r.dev), AG_KERNEL_ERR_INVALID_STATE);
            if (ph == AG_KPHASE_POISONED) {
                poisoned++;
                assert_st(ag_kernel_runtime_error(ec), st);
                assert_st(ag_kernel_mode_init(ec, r.dev, NULL, 41), AG_KERNEL_ERR_INVALID_STATE);
            } else {
                /* Rolled back: nothing of the device is held, and init may be retried. */
                rolled_back++;
                ag_dev_stats ds = {.size = sizeof ds};
                ag_dev_stats_get(r.sim, &ds);
                assert_int_equal(ds.live_streams, 1);
                assert_int_equal(ds.live_events, 0);
                assert_st(ag_kernel_mode_init(ec, r.dev, NULL, 41), AG_OK);
            }
        } else {
            assert_st(st, AG_OK);
        }
        finish(ec);
        assert_only_rig_left(&r);
        rig_close(&r, true);
        if (!injected)
            break;
    }
    assert_true(n > 8);
    /* Both rows of the phase table: stream/event creation (New) and the
     * persistent state after it (Poisoned). */
    assert_true(rolled_back >= 7);
    assert_true(poisoned > 0);
}

/* An asynchronous device failure during prepare: the stream cannot be shown
 * idle, so the candidate is kept and the context poisoned; finalize still
 * releases everything without writing to the poisoned device. */
static void asynchronous_failure_in_prepare_poisons(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, NULL, true);
    ag_exec_context *ec = kernel_ctx(&r, 81);
    img im = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 1, 0);
    ag_callable_handle h;
    ag_dev_fault_init(&r.fault, AG_DEV_ENTRY_BIT(AG_DEV_E_LAUNCH), 1, 0, AG_FAULT_DEFERRED);
    ag_status st = ag_kernel_mode_prepare_callable(ec, im.p, im.n, &h);
    assert_int_equal(r.fault.nfail, 1);
    assert_st(st, AG_EDEVICE);
    assert_int_equal(h.callable_id, -1);
    assert_int_equal(ag_kernel_phase_of(ec), AG_KPHASE_POISONED);
    assert_st(ag_kernel_runtime_error(ec), AG_EDEVICE);
    assert_st(ag_kernel_mode_prepare_callable(ec, im.p, im.n, &h), AG_KERNEL_ERR_INVALID_STATE);
    ag_kernel_args none = {0};
    ag_callable_handle h0 = {.callable_id = 0, .generation = 81};
    assert_st(ag_kernel_mode_launch(ec, h0, &none, r.caller), AG_KERNEL_ERR_INVALID_STATE);
    assert_st(ag_exec_context_destroy(ec), AG_KERNEL_ERR_INVALID_STATE);
    finish(ec);
    free(im.p);
    assert_only_rig_left(&r);
    rig_close(&r, true);
}

static void close_is_retriable(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, NULL, true);
    ag_exec_context *ec = kernel_ctx(&r, 51);
    img im = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 1, 0);
    ag_callable_handle h;
    assert_st(ag_kernel_mode_prepare_callable(ec, im.p, im.n, &h), AG_OK);
    uint64_t n;
    for (n = 1;; n++) {
        ag_dev_fault_init(&r.fault, AG_DEV_ENTRY_ALL, n, 0, AG_FAULT_RETURN);
        ag_status st = ag_kernel_mode_finalize(ec);
        bool injected = r.fault.nfail > 0;
        ag_dev_fault_init(&r.fault, 0, 0, 0, AG_FAULT_RETURN);
        if (!injected) {
            assert_st(st, AG_OK);
            break;
        }
        assert_true(st != AG_OK);
        assert_int_equal(ag_kernel_phase_of(ec), AG_KPHASE_CLOSING);
        assert_true(ag_kernel_teardown_error(ec) != AG_OK);
        assert_st(ag_exec_context_destroy(ec), AG_KERNEL_ERR_INVALID_STATE);
        assert_st(ag_kernel_mode_prepare_callable(ec, im.p, im.n, &h), AG_KERNEL_ERR_INVALID_STATE);
    }
    assert_true(n > 1);
    assert_int_equal(ag_kernel_phase_of(ec), AG_KPHASE_CLOSED);
    assert_true(ag_kernel_teardown_error(ec) != AG_OK); /* the first teardown error stays */
    assert_st(ag_kernel_mode_finalize(ec), AG_OK);      /* idempotent */
    assert_st(ag_exec_context_destroy(ec), AG_OK);
    free(im.p);
    assert_only_rig_left(&r);
    rig_close(&r, true);
}

static void close_after_the_device_was_poisoned(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, NULL, false);
    ag_exec_context *ec = kernel_ctx(&r, 61);
    img im = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 1, 0);
    ag_callable_handle h;
    assert_st(ag_kernel_mode_prepare_callable(ec, im.p, im.n, &h), AG_OK);
    ag_dev_poison(r.dev, "test");
    finish(ec);
    free(im.p);
    assert_only_rig_left(&r);
    rig_close(&r, true);
}


/* ---------------------------------------------------------------- ownership */

static ag_dev_stats stats_of(ag_device *dev)
{
    ag_dev_stats st = {.size = sizeof st};
    ag_dev_stats_get(dev, &st);
    return st;
}

/* Seed: the runtime image, register table and kernel args are allocated
 * once per context; the context owns its streams and events until close and
 * never destroys, resets or synchronizes away what it borrowed. */
static void persistent_state_once_streams_owned_until_close(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, NULL, false);
    ag_dev_stats base = stats_of(r.sim);
    ag_exec_context *ec = kernel_ctx(&r, 101);
    ag_dev_stats st = stats_of(r.sim);
    assert_int_equal(st.live_streams, base.live_streams + 2);
    assert_int_equal(st.live_events, base.live_events + 5);
    /* Descriptor table + one block of persistent state; the dispatch report. */
    assert_int_equal(st.mem[AG_MEM_HBM].live, base.mem[AG_MEM_HBM].live + 2);
    assert_int_equal(st.mem[AG_MEM_HOST].live, base.mem[AG_MEM_HOST].live + 1);
    uint64_t nalloc = st.mem[AG_MEM_HBM].nalloc;

    img add = make_image(AG_KERNEL_CONSUMER_SCALED_ADD, sig_add, 4, 1, 0);
    img fill = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 2, 0);
    ag_callable_handle ha, hf;
    assert_st(ag_kernel_mode_prepare_callable(ec, add.p, add.n, &ha), AG_OK);
    st = stats_of(r.sim);
    assert_int_equal(st.mem[AG_MEM_HBM].nalloc, nalloc + 1); /* the arena, at the first miss */
    assert_st(ag_kernel_mode_prepare_callable(ec, fill.p, fill.n, &hf), AG_OK);
    ag_kernel_tensor t[3];
    uint64_t alpha;
    ag_kernel_args args = add_args(&r, t, &alpha, 1.0f);
    for (int k = 0; k < 4; k++)
        assert_st(ag_kernel_mode_launch(ec, ha, &args, r.caller), AG_OK);
    assert_st(ag_dev_stream_synchronize(r.dev, r.caller), AG_OK);
    st = stats_of(r.sim);
    assert_int_equal(st.mem[AG_MEM_HBM].nalloc, nalloc + 1); /* never grown, nothing per launch */
    assert_int_equal(st.live_streams, base.live_streams + 2);
    assert_int_equal(st.live_events, base.live_events + 5);

    /* Close: own streams, events and the arena go; the caller's stream and
     * tensors stay usable and the device healthy. */
    assert_st(ag_kernel_mode_finalize(ec), AG_OK);
    st = stats_of(r.sim);
    assert_int_equal(st.live_streams, base.live_streams);
    assert_int_equal(st.live_events, base.live_events);
    assert_int_equal(st.mem[AG_MEM_HBM].live, base.mem[AG_MEM_HBM].live + 2); /* kept for late replays */
    ag_kernel_residency_stats rs;
    assert_st(ag_kernel_residency_stats_of(ec, &rs), AG_OK);
    assert_int_equal(rs.resident_count, 0);
    assert_int_equal(rs.resident_bytes, 0);
    assert_int_equal(rs.image_bytes, 0);
    assert_int_equal(rs.arena_bytes, 0);
    assert_int_equal(ag_dev_device_state(r.dev, NULL), AG_DEV_HEALTHY);
    float out[N], in[N];
    for (int k = 0; k < N; k++)
        in[k] = (float)-k;
    put(&r, r.z, in);
    get(&r, out, r.z);
    assert_memory_equal(out, in, sizeof in);
    assert_st(ag_exec_context_destroy(ec), AG_OK);
    assert_only_rig_left(&r);
    free(add.p);
    free(fill.p);
    rig_close(&r, true);
}

/* Seed: a launch is one bounded asynchronous operation on the caller's
 * stream: exactly one device call (the enqueue), no synchronize, no
 * allocation on the device or by the context on the host. */
static void launch_is_one_operation_on_the_caller_stream(void **state)
{
    (void)state;
    ag_testalloc ta;
    ag_ctx *kctx = agtest_ctx_counted(&ta);
    rig r;
    rig_open(&r, kctx, true);
    ag_exec_context *ec = kernel_ctx(&r, 111);
    img add = make_image(AG_KERNEL_CONSUMER_SCALED_ADD, sig_add, 4, 1, 0);
    ag_callable_handle h;
    assert_st(ag_kernel_mode_prepare_callable(ec, add.p, add.n, &h), AG_OK);
    ag_kernel_tensor t[3];
    uint64_t alpha;
    ag_kernel_args args = add_args(&r, t, &alpha, 1.0f);
    ag_dev_stats before = stats_of(r.sim);
    uint64_t host_calls = ta.calls;
    ag_dev_fault_init(&r.fault, AG_DEV_ENTRY_ALL, 0, 0, AG_FAULT_RETURN); /* count only */
    assert_st(ag_kernel_mode_launch(ec, h, &args, r.caller), AG_OK);
    assert_int_equal(r.fault.calls, 1);
    ag_dev_fault_init(&r.fault, AG_DEV_ENTRY_BIT(AG_DEV_E_LAUNCH), 0, 0, AG_FAULT_RETURN);
    assert_st(ag_kernel_mode_launch(ec, h, &args, r.caller), AG_OK);
    assert_int_equal(r.fault.calls, 1); /* and that one call is the enqueue */
    assert_int_equal(ta.calls, host_calls);
    ag_dev_stats after = stats_of(r.sim);
    assert_int_equal(after.mem[AG_MEM_HBM].nalloc, before.mem[AG_MEM_HBM].nalloc);
    assert_int_equal(after.mem[AG_MEM_HOST].nalloc, before.mem[AG_MEM_HOST].nalloc);
    /* Both ran, on the caller's stream, in order with its other work. */
    float out[N];
    get(&r, out, r.z);
    assert_true(out[5] == 7.0f);
    ag_kernel_dispatch_report rep;
    assert_st(ag_kernel_dispatch_report_of(ec, &rep), AG_OK);
    assert_int_equal(rep.executions, 2);
    /* An enqueue refused by the device poisons nothing: the caller may retry. */
    ag_dev_fault_init(&r.fault, AG_DEV_ENTRY_BIT(AG_DEV_E_LAUNCH), 1, 0, AG_FAULT_RETURN);
    assert_st(ag_kernel_mode_launch(ec, h, &args, r.caller), AG_EDEVICE);
    assert_int_equal(ag_kernel_phase_of(ec), AG_KPHASE_READY_ENQUEUED);
    ag_dev_fault_init(&r.fault, 0, 0, 0, AG_FAULT_RETURN);
    assert_st(ag_kernel_mode_launch(ec, h, &args, r.caller), AG_OK);
    assert_st(ag_dev_stream_synchronize(r.dev, r.caller), AG_OK);
    finish(ec);
    free(add.p);
    assert_only_rig_left(&r);
    rig_close(&r, true);
    assert_int_equal(ta.live_blocks, 0);
}

typedef struct negate_ud {
    int runs;
} negate_ud;

/* A caller-supplied consumer: z = -x. */
static int negate(void *ud, const ag_kernel_invocation *inv)
{
    negate_ud *u = ud;
    u->runs++;
    if (inv->header->tensor_count != 2 || inv->tensors[0].bytes != inv->tensors[1].bytes)
        return AG_KDISPATCH_PAYLOAD_REJECTED;
    const float *x = (const float *)(uintptr_t)inv->tensors[0].addr;
    float *z = (float *)(uintptr_t)inv->tensors[1].addr;
    for (uint64_t k = 0; k < inv->tensors[0].bytes / sizeof(float); k++)
        z[k] = -x[k];
    return AG_KDISPATCH_SUCCESS;
}

/* Seed: the config is context-static: copied at init, later changes to the
 * caller's buffers have no effect. */
static void config_is_copied_at_init(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, NULL, false);
    negate_ud u = {0};
    char name[16] = "user.negate";
    ag_kernel_consumer cons = {name, negate, &u};
    ag_kernel_config cfg = ag_kernel_config_defaults();
    cfg.max_callables = 2;
    cfg.arena_bytes = 1 << 20;
    cfg.consumers = &cons;
    cfg.consumer_count = 1;
    ag_exec_context *ec;
    assert_st(ag_exec_context_create(r.ctx, &ec), AG_OK);
    assert_st(ag_kernel_mode_init(ec, r.dev, &cfg, 121), AG_OK);
    /* Scribble over everything the caller passed. */
    memcpy(name, "user.other", 11);
    cons.run = NULL;
    cfg.max_callables = 1;
    cfg.arena_bytes = 64;
    cfg.consumers = NULL;
    img neg = make_image("user.negate", sig_copy, 2, 1, 0);
    img fill = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 2, 0);
    img other = make_image("user.other", sig_copy, 2, 3, 0);
    ag_callable_handle hn, hf, ho;
    assert_st(ag_kernel_mode_prepare_callable(ec, neg.p, neg.n, &hn), AG_OK);
    assert_st(ag_kernel_mode_prepare_callable(ec, fill.p, fill.n, &hf), AG_OK); /* 2 slots, as at init */
    assert_st(ag_kernel_mode_prepare_callable(ec, other.p, other.n, &ho), AG_KERNEL_ERR_COUNT_EXCEEDED);
    ag_kernel_tensor t[2] = {{(uintptr_t)r.x, N * sizeof(float)}, {(uintptr_t)r.z, N * sizeof(float)}};
    ag_kernel_args a = {.tensor_count = 2, .tensors = t};
    assert_st(ag_kernel_mode_launch(ec, hn, &a, r.caller), AG_OK);
    float out[N];
    get(&r, out, r.z);
    for (int k = 0; k < N; k++)
        assert_true(out[k] == -(float)k);
    assert_int_equal(u.runs, 1);
    ag_kernel_residency_stats rs;
    assert_st(ag_kernel_residency_stats_of(ec, &rs), AG_OK);
    assert_int_equal(rs.arena_bytes, 1 << 20);
    finish(ec);
    free(neg.p);
    free(fill.p);
    free(other.p);
    assert_only_rig_left(&r);
    rig_close(&r, true);
}

/* Phase table: Closing is sticky and Closed is terminal; both accept only
 * finalize (reference 5.4), and neither identity can be taken again. */
static void closing_and_closed_refuse_all_but_finalize(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, NULL, true);
    ag_exec_context *ec = kernel_ctx(&r, 131);
    img im = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 1, 0);
    ag_callable_handle h;
    assert_st(ag_kernel_mode_prepare_callable(ec, im.p, im.n, &h), AG_OK);
    uint64_t v = f32(2.0f);
    ag_kernel_tensor tz = {(uintptr_t)r.z, N * sizeof(float)};
    ag_kernel_args fa = {.tensor_count = 1, .scalar_count = 1, .tensors = &tz, .scalars = &v};
    for (int closed = 0; closed < 2; closed++) {
        if (!closed) {
            /* The descriptor retirement fails: Closing. */
            ag_dev_fault_init(&r.fault, AG_DEV_ENTRY_BIT(AG_DEV_E_MEMCPY), 1, 0, AG_FAULT_RETURN);
            assert_st(ag_kernel_mode_finalize(ec), AG_EDEVICE);
            ag_dev_fault_init(&r.fault, 0, 0, 0, AG_FAULT_RETURN);
            assert_int_equal(ag_kernel_phase_of(ec), AG_KPHASE_CLOSING);
        } else {
            assert_st(ag_kernel_mode_finalize(ec), AG_OK);
            assert_int_equal(ag_kernel_phase_of(ec), AG_KPHASE_CLOSED);
        }
        ag_kernel_phase ph = ag_kernel_phase_of(ec);
        assert_st(ag_kernel_mode_prepare_callable(ec, im.p, im.n, &h), AG_KERNEL_ERR_INVALID_STATE);
        assert_int_equal(h.callable_id, -1);
        ag_callable_handle h0 = {.callable_id = 0, .generation = 131};
        assert_st(ag_kernel_mode_launch(ec, h0, &fa, r.caller), AG_KERNEL_ERR_INVALID_STATE);
        assert_st(ag_kernel_mode_init(ec, r.dev, NULL, 132), AG_KERNEL_ERR_INVALID_STATE);
        assert_st(ag_program_init(ec, r.dev), AG_KERNEL_ERR_INVALID_STATE);
        assert_int_equal(ag_kernel_phase_of(ec), ph);
    }
    assert_st(ag_kernel_mode_finalize(ec), AG_OK); /* idempotent */
    ag_kernel_dispatch_report rep;
    assert_st(ag_kernel_dispatch_report_of(ec, &rep), AG_OK);
    assert_int_equal(rep.executions, 0); /* nothing refused above reached the device */
    assert_st(ag_exec_context_destroy(ec), AG_OK);
    free(im.p);
    assert_only_rig_left(&r);
    rig_close(&r, true);
}

/* Rollback table, last row: an asynchronous failure at any stream operation
 * of prepare (uploads, child patch, register-table write) poisons the
 * context; the candidate stays unready with its charge, residents stay, and
 * finalize releases everything. */
static void asynchronous_failure_at_every_stream_op_of_prepare(void **state)
{
    (void)state;
    img first = make_image(AG_KERNEL_CONSUMER_FILL, sig_fill, 2, 1, 0);
    img add = make_image(AG_KERNEL_CONSUMER_SCALED_ADD, sig_add, 4, 2, 0);
    uint64_t n;
    for (n = 1;; n++) {
        rig r;
        rig_open(&r, NULL, true);
        ag_exec_context *ec = kernel_ctx(&r, 141);
        ag_callable_handle h;
        assert_st(ag_kernel_mode_prepare_callable(ec, first.p, first.n, &h), AG_OK);
        ag_kernel_residency_stats before, after;
        assert_st(ag_kernel_residency_stats_of(ec, &before), AG_OK);
        ag_dev_fault_init(&r.fault, AG_DEV_ENTRY_BIT(AG_DEV_E_MEMCPY) | AG_DEV_ENTRY_BIT(AG_DEV_E_LAUNCH), n, 0,
                          AG_FAULT_DEFERRED);
        ag_status st = ag_kernel_mode_prepare_callable(ec, add.p, add.n, &h);
        bool injected = r.fault.nfail > 0;
        ag_dev_fault_init(&r.fault, 0, 0, 0, AG_FAULT_RETURN);
        assert_st(ag_kernel_residency_stats_of(ec, &after), AG_OK);
        if (injected) {
            assert_st(st, AG_EDEVICE);
            assert_int_equal(h.callable_id, -1);
            assert_int_equal(ag_kernel_phase_of(ec), AG_KPHASE_POISONED);
            assert_st(ag_kernel_runtime_error(ec), AG_EDEVICE);
            assert_int_equal(after.resident_count, before.resident_count); /* never launchable */
            assert_true(after.resident_bytes > before.resident_bytes);     /* its memory is kept */
            assert_st(ag_kernel_mode_prepare_callable(ec, first.p, first.n, &h), AG_KERNEL_ERR_INVALID_STATE);
        } else {
            assert_st(st, AG_OK);
        }
        finish(ec);
        assert_only_rig_left(&r);
        rig_close(&r, true);
        if (!injected)
            break;
    }
    assert_true(n > 3); /* image, descriptor, register entry at least */
    free(first.p);
    free(add.p);
}

typedef struct life {
    img add;
} life;

static ag_status life_body(ag_ctx *ctx, void *ud)
{
    life *l = ud;
    rig r;
    rig_open(&r, ctx, false);
    ag_exec_context *ec = NULL;
    ag_status st = ag_exec_context_create(ctx, &ec);
    if (st == AG_OK)
        st = ag_kernel_mode_init(ec, r.dev, NULL, 71);
    ag_callable_handle h;
    if (st == AG_OK)
        st = ag_kernel_mode_prepare_callable(ec, l->add.p, l->add.n, &h);
    if (st == AG_OK) {
        ag_kernel_tensor t[3];
        uint64_t alpha;
        ag_kernel_args args = add_args(&r, t, &alpha, 1.0f);
        st = ag_kernel_mode_launch(ec, h, &args, r.caller);
        assert_st(ag_dev_stream_synchronize(r.dev, r.caller), AG_OK);
    }
    if (ec) {
        if (ag_kernel_phase_of(ec) != AG_KPHASE_NEW || ag_exec_context_mode(ec, NULL))
            assert_st(ag_kernel_mode_finalize(ec), AG_OK);
        assert_st(ag_exec_context_destroy(ec), AG_OK);
    }
    assert_only_rig_left(&r);
    rig_close(&r, false);
    return st;
}

static void host_allocation_failures_over_a_life(void **state)
{
    (void)state;
    life l = {make_image(AG_KERNEL_CONSUMER_SCALED_ADD, sig_add, 4, 1, 64)};
    assert_true(AG_TEST_OOM_SWEEP(life_body, &l) > 3);
    free(l.add.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(latch_both_ways),
        cmocka_unit_test(failed_kernel_init_never_becomes_a_program_context),
        cmocka_unit_test(refusal_order_structure_before_phase),
        cmocka_unit_test(launches_compute_and_hits_reuse),
        cmocka_unit_test(stale_handle_from_another_context),
        cmocka_unit_test(capture_replay_then_stale_after_close),
        cmocka_unit_test(limits_are_parameters),
        cmocka_unit_test(sixty_fifth_image_with_the_defaults),
        cmocka_unit_test(device_failure_at_every_call_of_prepare),
        cmocka_unit_test(device_failure_at_every_call_of_init),
        cmocka_unit_test(asynchronous_failure_in_prepare_poisons),
        cmocka_unit_test(close_is_retriable),
        cmocka_unit_test(close_after_the_device_was_poisoned),
        cmocka_unit_test(host_allocation_failures_over_a_life),
        cmocka_unit_test(persistent_state_once_streams_owned_until_close),
        cmocka_unit_test(launch_is_one_operation_on_the_caller_stream),
        cmocka_unit_test(config_is_copied_at_init),
        cmocka_unit_test(closing_and_closed_refuse_all_but_finalize),
        cmocka_unit_test(asynchronous_failure_at_every_stream_op_of_prepare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
