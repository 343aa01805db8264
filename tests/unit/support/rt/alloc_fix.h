/* Fixtures shared by the allocator's unit tests (test_rt_alloc_*.c): an
 * allocator on the simulated device with its streams, checks that its heaps
 * are whole and that everything went back to the device, a gate kernel that
 * keeps a stream busy, and the traces more than one file replays.  Include
 * after support/agtest.h. */
#ifndef AG_TEST_RT_ALLOC_FIX_H
#define AG_TEST_RT_ALLOC_FIX_H

#include <stdatomic.h>

#include "aliasguard/alloc.h"
#include "aliasguard/device.h"
#include "rt/alloc_internal.h"

/* An allocator on a simulated device of its own, with n streams. */
typedef struct fix {
    ag_ctx *ctx;
    ag_device *dev;
    ag_dev_stream **s;
    uint32_t n;
    ag_memalloc *a;
} fix;

/* Opens f: hbm bytes of device memory (0: the simulated device's default);
 * cfg NULL for the defaults, n streams and mode set in any case; ta NULL,
 * or the test allocator the context allocates through. */
void fix_open_with(fix *f, uint32_t n, ag_alloc_mode mode, uint64_t hbm, const ag_alloc_config *cfg,
                   ag_testalloc *ta);
void fix_open_cfg(fix *f, uint32_t n, ag_alloc_mode mode, uint64_t hbm, const ag_alloc_config *cfg);
void fix_open(fix *f, uint32_t n, ag_alloc_mode mode, uint64_t hbm);
/* Whether L1 and every pool pass their heap check. */
bool heaps_ok(const ag_memalloc *a);
/* Asserts the heaps whole, destroys the allocator, asserts that no device
 * memory is left, and closes the rest. */
void fix_close(fix *f);
ag_alloc_stats stats(ag_memalloc *a);
/* An allocation on stream s that must succeed. */
ag_block *xmalloc(fix *f, uint32_t s, uint64_t size);

/* A kernel that spins until *(atomic_int *)arg, and its launch on stream s
 * of f: events recorded behind it stay incomplete until the test opens it. */
ag_status gate_kernel(void *arg);
void gate(fix *f, uint32_t s, atomic_int *open);

/* n streams made on sim and an allocator of them on dev (sim, or a
 * wrapper of it) with the defaults but mode and memory type. */
ag_memalloc *alloc_on(ag_ctx *ctx, ag_device *sim, ag_device *dev, ag_dev_stream **s, uint32_t n,
                      ag_alloc_mode mode, ag_mem_type mt);
/* Destroys dev and ctx once nothing is left on the device. */
void close_empty(ag_ctx *ctx, ag_device *dev);
/* Replays t on dev in mode, with the reuse checker, under the timing
 * model with kernels of ticks operations. */
ag_status replay_in(ag_ctx *ctx, ag_device *dev, const ag_alloc_trace *t, ag_alloc_mode mode, uint32_t ticks,
                    ag_alloc_replay_result *r);

/* text (named "t") replayed as replay_in does on a simulated device of
 * its own: an unordered reuse is AG_EINTERNAL.  For host OOM sweeps. */
ag_status replay_text(ag_ctx *ctx, const char *text, ag_alloc_mode mode, uint32_t ticks, ag_alloc_replay_result *r);
/* One replay of text (checked, runs executions in a row) in mode on a
 * simulated device of hbm bytes (0: the default) whose entries all fail
 * from the n-th call on, returning an error or poisoning the device
 * (pmode): it ends in AG_OK with no unordered reuse, or in a clean error
 * with its message, and leaves nothing on the device.  Returns how many
 * calls failed (0: the replay made fewer than n); a replay that ran
 * through adds its regions gathered, fallbacks and graph-pool reuses to
 * *ran. */
uint64_t trace_fault_at(const char *text, ag_alloc_mode mode, uint64_t hbm, uint32_t ticks, uint32_t runs,
                        int pmode, uint64_t n, ag_alloc_stats *ran);

/* Two streams, one cross-stream tensor: 13 operations. */
extern const char trace_text[];
/* Out of memory on a busy 4 MiB device (as tests/lit/rt/Inputs): reclaim,
 * a pending block freed only by waiting for the device; lend, a free half
 * region serving another stream as a borrowed block once the device is
 * idle (the baseline, whose pools are private, cannot serve it). */
extern const char reclaim_text[];
extern const char lend_text[];

#endif
