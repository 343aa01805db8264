/* The allocator tests' shared fixtures (alloc_fix.h). */
#include <sched.h>

#include "support/agtest.h"
#include "support/rt/alloc_fix.h"

void fix_open_with(fix *f, uint32_t n, ag_alloc_mode mode, uint64_t hbm, const ag_alloc_config *cfg,
                   ag_testalloc *ta)
{
    memset(f, 0, sizeof *f);
    if (ta) {
 ag_allocator hook = ag_testalloc_hook(ta);
 f->ctx = ag_ctx_create(&hook);
 assert_non_null(f->ctx);
    } else {
 f->ctx = agtest_ctx();
    }
    ag_device_sim_config dc = ag_device_sim_defaults();
    if (hbm)
 dc.capacity[AG_MEM_HBM] = hbm;
    assert_int_equal(ag_device_sim_create(f->ctx, &dc, &f->dev), AG_OK);
    f->n = n;
    f->s = calloc(n, sizeof *f->s);
    for (uint32_t k = 0; k < n; k++)
 assert_int_equal(ag_dev_stream_create(f->dev, &f->s[k]), AG_OK);
    ag_alloc_config c;
    if (cfg)
 c = *cfg;
    else
 ag_alloc_config_default(&c);
    c.nstreams = n;
    c.mode = mode;
    assert_int_equal(ag_alloc_create(f->ctx, f->dev, f->s, &c, &f->a), AG_OK);
}

void fix_open_cfg(fix *f, uint32_t n, ag_alloc_mode mode, uint64_t hbm, const ag_alloc_config *cfg)
{
    fix_open_with(f, n, mode, hbm, cfg, NULL);
}

void fix_open(fix *f, uint32_t n, ag_alloc_mode mode, uint64_t hbm)
{
    fix_open_cfg(f, n, mode, hbm, NULL);
}

bool heaps_ok(const ag_memalloc *a)
{
    if (!ag_heap_check(&a->l1))
 return false;
    for (uint32_t k = 0; k < a->n; k++)
 if (!ag_heap_check(&a->st[k].pool[0]) || !ag_heap_check(&a->st[k].pool[1]))
     return false;
    return true;
}

void fix_close(fix *f)
{
    assert_true(heaps_ok(f->a));
    ag_alloc_destroy(f->a);
    ag_dev_stats ds = {.size = sizeof ds};
    ag_dev_stats_get(f->dev, &ds);
    assert_int_equal(ds.mem[AG_MEM_HBM].live, 0); /* everything went back to the device */
    for (uint32_t k = 0; k < f->n; k++)
 ag_dev_stream_destroy(f->dev, f->s[k]);
    free(f->s);
    ag_device_destroy(f->dev);
    ag_ctx_destroy(f->ctx);
}

ag_alloc_stats stats(ag_memalloc *a)
{
    ag_alloc_stats s = {.size = sizeof s};
    ag_alloc_stats_get(a, &s, NULL);
    return s;
}

ag_block *xmalloc(fix *f, uint32_t s, uint64_t size)
{
    ag_block *b = NULL;
    assert_int_equal(ag_alloc_malloc(f->a, s, size, &b), AG_OK);
    assert_non_null(b);
    return b;
}

ag_status gate_kernel(void *arg)
{
    atomic_int *open = arg;
    while (!atomic_load(open))
 sched_yield();
    return AG_OK;
}

void gate(fix *f, uint32_t s, atomic_int *open)
{
    assert_int_equal(ag_dev_launch(f->dev, f->s[s], gate_kernel, open, "gate"), AG_OK);
}

ag_memalloc *alloc_on(ag_ctx *ctx, ag_device *sim, ag_device *dev, ag_dev_stream **s, uint32_t n,
                      ag_alloc_mode mode, ag_mem_type mt)
{
    for (uint32_t k = 0; k < n; k++)
 assert_int_equal(ag_dev_stream_create(sim, &s[k]), AG_OK);
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.nstreams = n;
    c.mode = mode;
    c.mem_type = mt;
    ag_memalloc *a = NULL;
    assert_int_equal(ag_alloc_create(ctx, dev, s, &c, &a), AG_OK);
    return a;
}

const char trace_text[] = "# two streams, one cross-stream tensor\n"
                          "streams 2\n"
                          "alloc x 4096 0\n"
                          "record 0 1\n"
                          "wait 1 0\n"
                          "use x 1\n"
                          "alloc y 1000 1   # private to 1\n"
                          "free x 0\n"
                          "free y 1\n"
                          "free x 1\n"
                          "record 1 0\n"
                          "wait 0 1\n"
                          "alloc z 4096 0\n"
                          "free z 0\n"
                          "sync\n";

void close_empty(ag_ctx *ctx, ag_device *dev)
{
    ag_dev_stats ds = {.size = sizeof ds};
    ag_dev_stats_get(dev, &ds);
    assert_int_equal(ds.mem[AG_MEM_HBM].live, 0);
    ag_device_destroy(dev);
    ag_ctx_destroy(ctx);
}

ag_status replay_in(ag_ctx *ctx, ag_device *dev, const ag_alloc_trace *t, ag_alloc_mode mode, uint32_t ticks,
                    ag_alloc_replay_result *r)
{
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.mode = mode;
    *r = (ag_alloc_replay_result){.size = sizeof *r};
    ag_alloc_replay_opts o = {.size = sizeof o, .check = true, .kernel_ticks = ticks};
    return ag_alloc_replay(ctx, dev, t, &c, &o, r);
}

const char reclaim_text[] = "streams 2\nalloc a 2097152 0\nrecord 0 1\nwait 1 0\nuse a 1\nfree a 0\n"
                            "free a 1\nalloc b 4194304 0\nfree b 0\nsync\n";

const char lend_text[] = "streams 2\nalloc c 4194304 0\nfree c 0\nalloc d 2097152 0\nalloc e 2097152 1\n"
                         "free e 1\nrecord 1 0\nwait 0 1\nfree d 0\nsync\n";

/* See alloc_fix.h. */
uint64_t trace_fault_at(const char *text, ag_alloc_mode mode, uint64_t hbm, uint32_t ticks, uint32_t runs,
                               int pmode, uint64_t n, ag_alloc_stats *ran)
{
    ag_ctx *ctx = agtest_ctx();
    ag_device_sim_config dc = ag_device_sim_defaults();
    if (hbm)
        dc.capacity[AG_MEM_HBM] = hbm;
    ag_device *sim = NULL, *dev = NULL;
    assert_int_equal(ag_device_sim_create(ctx, &dc, &sim), AG_OK);
    ag_dev_fault fl;
    ag_dev_fault_init(&fl, AG_DEV_ENTRY_ALL, n, 0, pmode ? AG_FAULT_POISON : AG_FAULT_RETURN);
    assert_int_equal(ag_device_fault_wrap(ctx, sim, &fl, &dev), AG_OK);
    ag_alloc_trace *t = NULL;
    assert_int_equal(ag_alloc_trace_parse(ctx, "t", text, strlen(text), &t), AG_OK);
    ag_alloc_config c;
    ag_alloc_config_default(&c);
    c.mode = mode;
    ag_alloc_replay_opts o = {.size = sizeof o, .check = true, .kernel_ticks = ticks, .runs = runs};
    ag_alloc_replay_result r = {.size = sizeof r};
    ag_status st = ag_alloc_replay(ctx, dev, t, &c, &o, &r);
    if (st != AG_OK) {
        assert_true(st == AG_ENOMEM || st == AG_EDEVICE);
        assert_true(ag_ctx_errmsg(ctx)[0] != '\0');
    } else {
        assert_int_equal(r.violations, 0);
        ran->regions_gathered += r.stats.regions_gathered;
        ran->fallbacks_deferred += r.stats.fallbacks_deferred;
        ran->fallbacks_recorded += r.stats.fallbacks_recorded;
        ran->graph_reuses += r.stats.graph_reuses;
    }
    uint64_t nfail = fl.nfail;
    ag_alloc_trace_destroy(t);
    ag_device_destroy(dev);
    close_empty(ctx, sim);
    return nfail;
}

ag_status replay_text(ag_ctx *ctx, const char *text, ag_alloc_mode mode, uint32_t ticks, ag_alloc_replay_result *r)
{
    ag_alloc_trace *t = NULL;
    AG_TRY(ag_alloc_trace_parse(ctx, "t", text, strlen(text), &t));
    ag_device *dev = NULL;
    ag_status st = ag_device_sim_create(ctx, NULL, &dev);
    if (st == AG_OK) {
        st = replay_in(ctx, dev, t, mode, ticks, r);
        if (st == AG_OK && r->violations)
            st = AG_EINTERNAL;
    }
    ag_device_destroy(dev);
    ag_alloc_trace_destroy(t);
    return st;
}
