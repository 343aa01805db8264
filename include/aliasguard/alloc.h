/* The multi-stream caching allocator of the device runtime (seed §4.2,
 * docs/runtime.md "Allocator"): L1 caches device memory in page spans, L2 is
 * one pool per stream, L3 lends blocks freed last on a stream that did not
 * allocate them.  A baseline mode (blocks private to their stream, frees
 * deferred on polled events) runs the same traces for comparison. */
#ifndef ALIASGUARD_ALLOC_H
#define ALIASGUARD_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ctx.h"
#include "device.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_memalloc ag_memalloc;
/* One live block.  Valid from ag_alloc_malloc until the last stream that
 * uses it has freed it; the allocator owns it. */
typedef struct ag_block ag_block;

/* Most logical streams one allocator serves (the occupancy bitmaps are sized
 * by the configured count, not by this limit). */
#define AG_ALLOC_MAX_STREAMS 4096u
#define AG_ALLOC_MAX_FRONT 8u /* most blocks a stream's front cache holds */

typedef enum ag_alloc_mode {
    AG_ALLOC_MULTI = 0,   /* seed §4.2: occupancy bitmaps, versions, event notices, borrowing */
    AG_ALLOC_BASELINE = 1 /* per-stream private pools, cross-stream frees wait on polled events */
} ag_alloc_mode;

/* Every threshold.  ag_alloc_config_default() fills the values the docs list;
 * change fields after it.  All sizes in bytes; powers of two where noted. */
typedef struct ag_alloc_config {
    size_t size;           /* sizeof(ag_alloc_config) */
    ag_alloc_mode mode;
    ag_mem_type mem_type;  /* memory type served (AG_MEM_HOST blocks are shared, not wandered) */
    uint32_t nstreams;     /* logical streams 0..nstreams-1 (1..AG_ALLOC_MAX_STREAMS) */
    uint64_t min_block;    /* request rounding quantum of the pools (power of two, >= 64; 512) */
    uint64_t page_size;    /* L1 quantum (power of two, multiple of min_block; 64 KiB) */
    /* l1_segment and the region sizes: at most 2^62 - 1 bytes, as requests */
    uint64_t l1_segment;   /* least bytes L1 asks the device for at once (2 MiB); with
                            * steal, L1 asks for a quarter of it first, then for as
                            * much as it holds, until it reaches this, and for the
                            * request alone while it caches spans too small for it */
    uint64_t small_size;   /* requests up to this come from small regions (1 MiB) */
    uint64_t small_region; /* pool region for small requests (2 MiB) */
    uint64_t large_region; /* pool region for requests below large_alone (20 MiB) */
    uint64_t large_alone;  /* requests from here get a region of their own (10 MiB) */
    uint64_t large_round;  /* ... rounded up to a multiple of this (2 MiB) */
    uint64_t alone_round;  /* multi mode with steal: a request of large_alone or more
                            * gets a region rounded up to a multiple of this instead
                            * (64 KiB: L1 hands out pages, so a coarser quantum only
                            * adds a tail no other request of that size uses) */
    uint64_t split_small;  /* least remainder split off in small regions (512) */
    uint64_t split_large;  /* least remainder split off in large regions (1 MiB + 1) */
    uint64_t max_split;    /* blocks this large are never split nor given to smaller
                            * requests (UINT64_MAX = no limit); a region or segment
                            * that would be this large is grown for the request alone */
    uint64_t l1_cache_limit; /* L1 returns free segments to the device above this (UINT64_MAX) */
    uint32_t borrow;       /* nonzero: streams borrow blocks freed last there (L3; 1) */
    uint32_t steal;        /* multi mode, nonzero: before asking the device, a pool takes
                            * a wholly free region of another stream's pool, ordered
                            * by an event (stream wait, no host blocking), and every
                            * large request gets a region of its own (rounded to
                            * large_round, or alone_round from large_alone on) so
                            * that regions empty often (1) */
    uint32_t poll_every;   /* multi mode: the events of deferred frees are polled when
                            * a pool cannot serve a request (unless a free region
                            * of another pool moves in instead; see steal), and
                            * otherwise at every
                            * poll_every-th allocation (0: only then; 1: at each one,
                            * as the baseline does; 3) */
    uint64_t gather_min;   /* multi mode with steal: before a request of at least this
                            * many bytes grows the device memory past its peak, the
                            * pools' idle wholly free regions go back to L1, merge
                            * there and serve it if they can (10 MiB; UINT64_MAX:
                            * never) */
    uint32_t large_slack;  /* multi mode with steal: a request of large_alone or more
                            * takes no free span, pool region or moved region more
                            * than this many percent larger than itself (50) */
    uint64_t fallback_min; /* multi mode: when the last free of a shared block finds
                            * another user stream busy, a block of at least this
                            * many bytes records an event there at once (the
                            * fallback to its notices); a smaller one waits for its
                            * notices, and a pool miss records the events of those
                            * still waiting (64 MiB; 0: every block at once;
                            * UINT64_MAX: none) */
    uint32_t front_blocks; /* the front cache: each stream keeps whole the last this
                            * many blocks of at most page_size it recycled at birth,
                            * for requests of the same rounded size; one more sends
                            * the oldest back to its pool (0..AG_ALLOC_MAX_FRONT;
                            * 0: none; 4) */
} ag_alloc_config;

void ag_alloc_config_default(ag_alloc_config *cfg);

/* Statistics: bytes are the rounded block sizes unless named "requested". */
typedef struct ag_alloc_stream_stats {
    uint64_t allocated, peak_allocated; /* live blocks allocated on this stream (a
                                         * borrowed one counts here, not at its birth) */
    uint64_t cached;                    /* free bytes in this stream's pools */
    uint64_t borrowed;                  /* bytes parked in this stream's borrow allocator */
    uint64_t mallocs, frees, borrow_hits;
} ag_alloc_stream_stats;

typedef struct ag_alloc_stats {
    size_t size;             /* sizeof(ag_alloc_stats): set by the caller */
    uint64_t allocated, peak_allocated;
    uint64_t requested, peak_requested;
    uint64_t reserved, peak_reserved; /* device bytes held */
    uint64_t cached;   /* reserved but in no live block: free spans of L1 and the pools, and borrow */
    uint64_t borrowed; /* bytes parked in borrow allocators (part of allocated-by-nobody) */
    uint64_t pending;  /* bytes freed by their user streams but not yet reusable (events) */
    double fragmentation; /* 1 - peak_allocated / peak_reserved (0 when nothing reserved) */
    uint64_t mallocs, frees, device_allocs, device_frees;
    uint64_t retries; /* trim-and-retry rounds after a device refusal */
    uint64_t ooms;    /* requests that failed for device memory (the device refused,
                       * or no device holds the size); not host out of memory */
    uint64_t birth_recycles, borrow_recycles, local_recycles;
    uint64_t borrow_hits, returned_home;
    uint64_t notices_sent, notices_applied, notices_stale;
    uint64_t event_polls, syncs; /* events queried; full synchronisations */
    /* multi mode: shared blocks recycled without a notice (the host saw
     * every other user's event complete, or only the birth stream used
     * them); wholly free pool regions moved to another pool instead of
     * growing, and how many of those moves made a stream wait on an event */
    uint64_t polled_recycles, regions_moved, region_waits;
    /* multi mode: streams asked whether idle (an idle one needs no event):
     * at a shared block's last free, at a pool miss for the blocks waiting
     * for notices, and by the gather */
    uint64_t stream_queries;
    /* multi mode: idle wholly free pool regions given back to L1 before a
     * growth past the peak (ag_alloc_config.gather_min) */
    uint64_t regions_gathered;
    /* multi mode: shared blocks whose last free found another user busy and
     * left their fallback events to a pool miss (ag_alloc_config.fallback_min),
     * and how many of those a pool miss still found waiting for a notice */
    uint64_t fallbacks_deferred, fallbacks_recorded;
    /* multi mode beyond 64 streams: notices left unapplied because the host
     * had no memory for the receiving stream's view (the blocks wait for
     * their fallback instead) */
    uint64_t notices_dropped;
    /* multi mode: pool misses whose look at the waiting blocks the device
     * or the host refused (an event it could not make or answer): those
     * blocks kept waiting and the request went on to grow */
    uint64_t reclaims_refused;
    /* last frees and pool-miss looks that found a user stream of a waiting
     * block capturing, once for the block however many users capture (no
     * event can stand for their eager work then: the block waited, in the
     * multi mode for a later look, in the baseline for the clean), and
     * region moves given up because the owner or the growing stream
     * captured */
    uint64_t capture_waits;
    /* sends from, and waits into, a capturing stream: their record or wait
     * went into the graph, and what they carry waited for the next send
     * and wait outside a capture */
    uint64_t captured_kernels;
    /* graph pools (ag_alloc_pool_create): pools not yet released; bytes of
     * blocks parked in them (part of allocated); requests served by a
     * parked block */
    uint64_t graph_pools, graph_parked, graph_reuses;
} ag_alloc_stats;

/* Creates an allocator over dev for the streams streams[0..cfg->nstreams-1]
 * (borrowed; they must belong to dev and outlive the allocator).  cfg NULL
 * means defaults with one stream.  Host allocations and errors go through
 * ctx, always under the allocator's own lock: ctx must not be used by other
 * threads meanwhile (it may be the device's ctx only if the device is driven
 * from one thread).  *out owned by the caller (ag_alloc_destroy). */
ag_status ag_alloc_create(ag_ctx *ctx, ag_device *dev, ag_dev_stream *const *streams, const ag_alloc_config *cfg,
                          ag_memalloc **out);
/* Synchronises the device, recycles everything and returns all memory to
 * the device.  Blocks still live are reclaimed (counted in the stats only).
 * Memory goes back only once the device's work on it is proven done: the
 * device synchronise succeeded, each of the allocator's streams
 * synchronised alone, or the device is poisoned (queued work dropped).
 * Otherwise (a stream is capturing, a call from a kernel, a failing
 * synchronise) the device memory stays allocated, for ag_device_destroy
 * to free, and ctx holds an AG_EDEVICE error naming the stream and the
 * bytes kept.  NULL accepted. */
void ag_alloc_destroy(ag_memalloc *a);

/* Allocates at least size (> 0) bytes for use on stream.  Own pool first,
 * then (multi mode) the stream's borrow allocator, then L1, then L1 trims
 * every cache and retries.  AG_ENOMEM (device or host exhausted; the message
 * gives requested, allocated and reserved bytes) or AG_EDEVICE. */
ag_status ag_alloc_malloc(ag_memalloc *a, uint32_t stream, uint64_t size, ag_block **out);
/* Stream dst starts using blk (a tensor consumed on another stream).  Call it
 * in the order of a stream that uses blk now, before dst's use is enqueued,
 * and make dst wait (an event) before it touches blk.  Device memory:
 * dst becomes an occupant in every stream's view (wander); host memory:
 * plain sharing.  Same stream: one more use.  AG_ENOMEM only. */
ag_status ag_alloc_access(ag_memalloc *a, ag_block *blk, uint32_t dst);
/* Stream drops one use of blk (its last use is already enqueued).  The block
 * is recycled when the allocator knows no stream can still touch it; for
 * host memory (AG_MEM_HOST: plain sharing, no events) at its last free, so
 * the host must have seen every stream's use of it complete before then.
 * AG_ENOMEM (host memory): nothing changed, the free may be retried.
 * AG_EDEVICE: the device failed (its own out of host memory included) while
 * the free made or recorded its events;
 * the use is released all the same (never free it again), and the block waits
 * until the allocator knows the streams are done (a notice, a synchronise,
 * the clean). */
ag_status ag_alloc_free(ag_memalloc *a, ag_block *blk, uint32_t stream);

/* Capture.  The allocator orders the streams' eager work: it never lets an
 * event recorded on a capturing stream decide a reuse (a block whose user
 * captures waits until a look after the capture, or the clean).  Work a
 * graph captured runs when the graph is launched, on the launch's stream:
 * a block a graph touches is used by that stream from the launch (declare
 * it with ag_alloc_access there) and must stay allocated until the last
 * launch is enqueued, then be freed on that stream. */

/* Graph pools: memory private to captured work (as PyTorch gives each
 * CUDA graph a private pool).  A graph's launches replay its work on the
 * addresses the capture got, so a block the capture allocated and freed
 * must stay out of other requests' reach until no launch can come.
 *
 * ag_alloc_pool_create gives a new pool's ID (1, 2, ...).  Between
 * ag_alloc_pool_begin(a, stream, pool) and ag_alloc_pool_end(a, stream),
 * stream's requests come from the pool: the smallest block parked there
 * that stream allocated, that no other stream used since, and that holds
 * the size at most twice; else new memory, as any request.  The pool keeps
 * a use of every block allocated in it: a user's last free parks the block
 * (still allocated; graph_parked in the statistics) instead of recycling
 * it, and only requests of the same stream in the same pool get it again.
 * They follow the stream's order, as every launch of the captured work
 * does; graphs that share a pool must launch in the order they were
 * captured, one after the other.  The capture is the caller's
 * (ag_dev_capture_begin on the stream); a pool serves requests outside a
 * capture as well.  AG_EINVAL: an unknown or released pool, a stream that
 * already allocates from a pool (begin) or from none (end).
 *
 * ag_alloc_pool_release(a, pool, stream): no graph that allocated from the
 * pool will be launched again, and the launches so far are enqueued on
 * stream (or ordered before its current point).  Every other stream that
 * allocated in the pool is made to wait for stream (ag_alloc_send and
 * ag_alloc_wait); then the pool drops its use of each block: a parked one
 * is recycled as if its user had freed it there, a live one becomes an
 * ordinary block.  The pool is gone.  Host memory (AG_MEM_HOST, plain
 * sharing): a parked block is recycled at once, so the host must have seen
 * the launches complete, as for ag_alloc_free.  AG_EINVAL: an unknown
 * pool, one that a stream still allocates from, or stream or a stream
 * that allocated in the pool capturing.  AG_ENOMEM (host) or AG_EDEVICE
 * from a send or wait: the blocks not yet given up stay in the pool, and
 * the release may be tried again; AG_EDEVICE from a block's recycling (as
 * ag_alloc_free): the release went on (the try that ends it reports it),
 * and the pool is gone. */
ag_status ag_alloc_pool_create(ag_memalloc *a, uint32_t *pool);
ag_status ag_alloc_pool_begin(ag_memalloc *a, uint32_t stream, uint32_t pool);
ag_status ag_alloc_pool_end(ag_memalloc *a, uint32_t stream);
ag_status ag_alloc_pool_release(ag_memalloc *a, uint32_t pool, uint32_t stream);

/* Event kernels: records an event on src for dst, carrying src's recycle
 * notices and the borrowed blocks born on dst (multi mode).  From a
 * capturing src the record goes into the graph and carries nothing (the
 * next send outside a capture carries it).  AG_ENOMEM, AG_EDEVICE. */
ag_status ag_alloc_send(ag_memalloc *a, uint32_t src, uint32_t dst);
/* Makes dst wait for the last send from src to dst and applies what it
 * carried: occupancy merged, blocks recycled, borrowed blocks home.  Stale
 * notices (the block was recycled since) are skipped.  No send yet: no-op.
 * Into a capturing dst the wait goes into the graph and applies nothing
 * (dst's next wait for src outside a capture applies it). */
ag_status ag_alloc_wait(ag_memalloc *a, uint32_t dst, uint32_t src);

/* The three sync stages: first (stream 0 to every other stream, at the
 * start), last (every stream to stream 0, at the end), clean (synchronise
 * the device, recycle every block and return pool memory to L1). */
typedef enum ag_alloc_stage {
    AG_SYNC_FIRST = 0,
    AG_SYNC_LAST = 1,
    AG_SYNC_CLEAN = 2
} ag_alloc_stage;
ag_status ag_alloc_sync(ag_memalloc *a, ag_alloc_stage stage);

/* Device address of a live block, its rounded size, its birth stream. */
void *ag_block_ptr(const ag_block *blk);
uint64_t ag_block_size(const ag_block *blk);
uint32_t ag_block_birth(const ag_block *blk);

/* Fills *out (out->size set by the caller); stream may be NULL or an array
 * of nstreams entries. */
void ag_alloc_stats_get(ag_memalloc *a, ag_alloc_stats *out, ag_alloc_stream_stats *streams);
const char *ag_alloc_mode_name(ag_alloc_mode m); /* "multi", "baseline" */

/* ---- trace replay (docs/runtime.md "Trace format") ----
 * One operation per line, '#' starts a comment:
 *   streams N             number of streams (optional; first operation line)
 *   alloc ID SIZE STREAM  ID (a word) is allocated for STREAM
 *   use ID STREAM         STREAM starts using ID (cross-stream access)
 *   free ID STREAM        STREAM drops its use of ID
 *   record SRC DST        event kernel on SRC for DST
 *   wait DST SRC          DST waits for SRC's last record for DST
 *   sync                  last sync stage, then resource clean
 *   pool_begin P STREAM   STREAM's allocations come from graph pool P (a
 *                         word; a new pool at its first begin, or after its
 *                         release) until
 *   pool_end STREAM
 *   pool_release P STREAM graph pool P is released on STREAM (no stream
 *                         allocates from it); every pool begun must be
 *                         ended and released by the end of the trace */
typedef struct ag_alloc_trace ag_alloc_trace;

/* Parses text (len bytes); errors name the file (name) and line. */
ag_status ag_alloc_trace_parse(ag_ctx *ctx, const char *name, const char *text, size_t len,
                               ag_alloc_trace **out);
void ag_alloc_trace_destroy(ag_alloc_trace *t);
uint32_t ag_alloc_trace_streams(const ag_alloc_trace *t);
uint64_t ag_alloc_trace_ops(const ag_alloc_trace *t);

/* Operation kinds, for the timing table of a replay. */
#define AG_TRACE_OP_LIST(X) \
    X(AG_TOP_ALLOC, "alloc") X(AG_TOP_USE, "use") X(AG_TOP_FREE, "free") X(AG_TOP_RECORD, "record") \
    X(AG_TOP_WAIT, "wait") X(AG_TOP_SYNC, "sync") X(AG_TOP_POOL, "pool")
typedef enum ag_trace_op {
#define AG_TRACE_OP_ENUM_(e, name) e,
    AG_TRACE_OP_LIST(AG_TRACE_OP_ENUM_)
#undef AG_TRACE_OP_ENUM_
    AG_TOP_COUNT_
} ag_trace_op;
const char *ag_trace_op_name(ag_trace_op op);

/* How a replay runs.  The timing model (docs/runtime.md): the host spends
 * one tick per trace operation; every alloc and use enqueues a modelled
 * kernel of kernel_ticks on its stream (0: work is instant, the device is
 * always idle); an event is complete once the host clock has passed the
 * finish time of its stream's work before the record. */
/* The check keeps a vector clock per stream and a slot per pair of
 * streams (n x n words each: 16 MiB at the limit), and n words for each
 * pair that records; beyond the limit a replay with the check is refused. */
#define AG_ALLOC_CHECK_MAX_STREAMS 1024u

typedef struct ag_alloc_replay_opts {
    size_t size;           /* sizeof(ag_alloc_replay_opts) */
    bool check;            /* verify every handed-out block (happens-before); at
                            * most AG_ALLOC_CHECK_MAX_STREAMS streams */
    uint32_t kernel_ticks; /* duration of one modelled kernel, in host operations */
    uint32_t runs;         /* executions of the trace, one after the other with the
                            * same allocator (0 or 1: once); from the second on,
                            * every block must have been freed by the end */
} ag_alloc_replay_opts;

typedef struct ag_alloc_replay_result {
    size_t size; /* sizeof(ag_alloc_replay_result): set by the caller */
    ag_alloc_stats stats;     /* at the end (before the allocator is destroyed) */
    uint64_t count[AG_TOP_COUNT_];
    double seconds[AG_TOP_COUNT_]; /* wall time spent in each kind */
    double total_seconds;
    uint64_t violations; /* --check: (reuse, earlier user stream) pairs where that
                          * stream's last use is not ordered before the reuse, and
                          * handouts over memory a live block holds */
    uint64_t device_ticks; /* modelled makespan: when the last stream finishes */
    uint64_t device_calls; /* device entries the allocator called during the timed
                            * replay (on an accelerator, each is a driver call) */
} ag_alloc_replay_result;

/* The trace's own order (docs/runtime.md "Trace format"): the 'use' lines
 * on a stream that the trace's records, waits and syncs do not order after
 * the block's latest alloc on another stream.  Each is a race in the traced
 * program (its reads may come before the producer's writes), which no
 * allocator can order.  Independent of any replay: the allocator's own
 * events and waits do not count.  A use of an ID never allocated before it
 * is the replay's error, not counted here.  At most
 * AG_ALLOC_CHECK_MAX_STREAMS streams.  Host memory, freed before it
 * returns: the clocks and a slot per pair of streams (two tables of n x n
 * words: 16 MiB at the limit), n words for each pair that records, and 24
 * bytes per ID. */
typedef struct ag_alloc_trace_order {
    size_t size;             /* sizeof(ag_alloc_trace_order): set by the caller */
    uint64_t unordered_uses; /* such use lines */
    char first[320];         /* the first of them, "TRACE:LINE: ..." ("": none) */
} ag_alloc_trace_order;

ag_status ag_alloc_trace_order_check(ag_ctx *ctx, const ag_alloc_trace *t, ag_alloc_trace_order *out);

/* Replays t on dev (streams created here, through the timing model) with
 * cfg (nstreams taken from the trace when cfg->nstreams is smaller); opts
 * NULL: no check, instant kernels.  The check verifies every handed-out
 * block against the happens-before order of the trace's events, host
 * synchronisations, events the allocator saw complete and the waits it
 * enqueued itself.  Ends with a sync; opts->runs replays the trace that
 * many times in a row (repeated executions of one graph: the allocator's
 * steady state), counting and timing them all. */
ag_status ag_alloc_replay(ag_ctx *ctx, ag_device *dev, const ag_alloc_trace *t, const ag_alloc_config *cfg,
                          const ag_alloc_replay_opts *opts, ag_alloc_replay_result *res);

#ifdef __cplusplus
}
#endif
#endif
