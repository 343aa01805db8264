/* Internals of the multi-stream caching allocator (seed §4.2): the span heap
 * shared by L1 and the stream pools, the MIF occupancy bitmaps, block
 * objects with versions, the per-stream allocators (L2 pools, L3 borrow
 * allocator, local-recycle list) and the event channels carrying notices. */
#ifndef AG_ALLOC_INTERNAL_H
#define AG_ALLOC_INTERNAL_H

#include <sched.h>
#include <stdatomic.h>

#include "aliasguard/alloc.h"
#include "aliasguard/device.h"
#include "core/internal.h"

/* ---- size bins: exact for the first 16 quanta, then 4 per power of two ---- */
#define AG_NBINS 256u
#define AG_BINWORDS (AG_NBINS / 64u)
uint32_t ag_alloc_bin(uint64_t units);
/* First set bit at or after from in a bin bitmap; AG_NBINS when none. */
uint32_t ag_binmap_next(const uint64_t *map, uint32_t from);

/* ---- span heap: best fit in bins, split on take, merge on put ----
 * A region is one piece obtained from the backing (the device for L1, L1
 * for a pool); spans tile it in address order with no gap. */
typedef struct ag_region ag_region;
typedef struct ag_heap ag_heap;
typedef struct ag_span {
    uintptr_t addr;
    uint64_t size;
    struct ag_span *prev, *next;   /* address neighbours in the region */
    struct ag_span *fprev, *fnext; /* bin list (free spans) or spare list */
    ag_region *region;
    struct ag_span *wprev, *wnext; /* wholly free: its bin of the whole set */
    ag_heap *heap;                 /* wholly free: the heap it sits in */
    uint64_t stamp;                /* wholly free: the owner's epoch it needs (see ag_heap.epoch) */
    uint32_t wbin;
    uint32_t bin;
    bool is_free;
} ag_span;

struct ag_region {
    uintptr_t addr;
    uint64_t size;
    void *cookie; /* what the backing needs to take it back */
    ag_region *prev, *next;
};

/* grow: obtain at least size bytes, *got of them (raises its own error);
 * release: give them back. */
typedef ag_status (*ag_heap_grow_fn)(void *ud, uint64_t size, uintptr_t *addr, void **cookie, uint64_t *got);
typedef void (*ag_heap_release_fn)(void *ud, uintptr_t addr, uint64_t size, void *cookie);

/* Wholly free regions (their one span each) in size bins: one heap's, or
 * several heaps' together, so that a search over every pool visits the
 * regions that fit only. */
typedef struct ag_wholeset {
    ag_span *bins[AG_NBINS];
    uint64_t binmap[AG_BINWORDS];
    uint32_t qshift; /* bins count units of 1 << qshift bytes */
} ag_wholeset;

struct ag_heap {
    ag_ctx *ctx;
    uint64_t quantum, split_min, max_split;
    uint64_t keep; /* free spans this large serve only requests this large (UINT64_MAX) */
    uint64_t alone; /* requests this large take no span of ag_fit_limit(size, slack) or more (UINT64_MAX) */
    uint32_t slack; /* percent */
    /* How the owner grows the heap for a request (ag_heap_set_growth):
     * every growth a multiple of grow_q, one for a request of alone or
     * more rounded to alone_q first.  A take never refuses a span no
     * larger than such a growth, or the request could never reuse it. */
    uint64_t grow_q, alone_q;
    uint64_t oversize; /* requests this large grow spans of max_split or more: such a span serves them */
    uint64_t over_waste; /* ... if it is less than this many bytes larger (UINT64_MAX) */
    uint32_t qshift; /* log2(quantum): bins divide by a shift */
    uint32_t tag;    /* the user's label (a pool: its stream) */
    ag_heap_grow_fn grow;
    ag_heap_release_fn release;
    void *ud;
    bool poison; /* mark free spans inaccessible to ASan/Valgrind */
    uint64_t binmap[AG_BINWORDS];
    ag_region *regions;
    ag_region *spare_regions; /* unused region records */
    void *region_chunks;      /* the records' allocations, for destroy */
    ag_span *spare;          /* unused span nodes given back */
    ag_span *fresh;          /* never used nodes of the newest chunk, handed out in order */
    uint32_t nfresh;
    uint32_t nspare;         /* both kinds */
    void **chunks;           /* node chunks, for destroy */
    uint32_t nchunks, capchunks;
    uint64_t reserved, used; /* bytes in regions, bytes in taken spans */
    uint32_t nregions; /* regions in the list (ag_heap_check counts them) */
    uint32_t nwhole; /* regions wholly free (one free span covers them) */
    /* The set of wholly free regions several heaps share, or NULL
     * (ag_heap_share_whole).  A span joining it is stamped *epoch + 1: the
     * owner's ordering epoch that must be seen complete before the
     * region's memory is idle. */
    ag_wholeset *whole;
    const uint64_t *epoch;
    ag_span *bins[AG_NBINS];
};

void ag_heap_init(ag_heap *h, ag_ctx *ctx, uint64_t quantum, uint64_t split_min, uint64_t max_split,
                  ag_heap_grow_fn grow, ag_heap_release_fn release, void *ud, bool poison);
/* The owner grows h in multiples of grow_q, and for a request of h->alone
 * or more a region of its size rounded to alone_q, then to grow_q (both
 * powers of two or not, multiples of the quantum; the defaults: the quantum). */
void ag_heap_set_growth(ag_heap *h, uint64_t grow_q, uint64_t alone_q);
/* Keeps h's wholly free spans in set (shared with other heaps) and stamps
 * them from *epoch; before any region is added. */
void ag_heap_share_whole(ag_heap *h, ag_wholeset *set, const uint64_t *epoch, uint32_t tag);
/* Releases every region (taken spans included) and frees the nodes. */
void ag_heap_destroy(ag_heap *h);
/* Makes sure the next take can split without allocating: AG_ENOMEM. */
ag_status ag_heap_reserve(ag_heap *h);
/* Allocates what the first growth needs (nodes and a region record), so
 * that a heap certain to grow pays for them up front: AG_ENOMEM. */
ag_status ag_heap_prepare(ag_heap *h);
/* Takes a cached span of at least size (a multiple of quantum), splitting
 * off the remainder when it is worth keeping; NULL when none fits.  Needs a
 * prior ag_heap_reserve. */
ag_span *ag_heap_take(ag_heap *h, uint64_t size);
/* ag_heap_take of a span of size bytes grown for a request of want bytes
 * (want <= size; the pool region L1 cuts for it): a request of want >=
 * alone takes no span more than slack percent larger than want, nor larger
 * than size (its own growth). */
ag_span *ag_heap_take_for(ag_heap *h, uint64_t size, uint64_t want);
/* v rounded up to a multiple of q (> 0), UINT64_MAX where that would wrap. */
static inline uint64_t ag_round_up(uint64_t v, uint64_t q)
{
    return v > UINT64_MAX - (q - 1u) ? UINT64_MAX : (v + q - 1u) / q * q;
}
/* The least span size a request of size bytes does not take under the
 * alone rule: more than slack percent larger (UINT64_MAX when that does
 * not fit in 64 bits). */
static inline uint64_t ag_fit_limit(uint64_t size, uint32_t slack)
{
    if (slack && size / 100u + 1u > (UINT64_MAX - size - 1u) / slack)
        return UINT64_MAX; /* size + extra + 1 would not fit */
    return size + size / 100u * slack + size % 100u * slack / 100u + 1u;
}
/* An exclusive cap raised, if need be, so that a span of grown bytes (the
 * request's own growth) stays under it. */
static inline uint64_t ag_admit_growth(uint64_t cap, uint64_t grown)
{
    return grown != UINT64_MAX && grown >= cap ? grown + 1u : cap;
}
/* The alone rule's exclusive cap for a span of size bytes taken for a
 * request of want bytes (want <= size: size may be the request's region)
 * whose own growth is grown bytes: slack percent above want, or above size
 * for a request below alone whose region reaches it; never below the
 * growth.  The heaps (ag_heap_take_for) and the region moves use it. */
static inline uint64_t ag_alone_cap(uint64_t alone, uint32_t slack, uint64_t size, uint64_t want, uint64_t grown)
{
    return ag_admit_growth(ag_fit_limit(want >= alone ? want : size, slack), grown);
}
/* ag_heap_take without the keep and alone rules: after a growth for this
 * request, or under memory pressure.  A span below max_split first; if
 * none, a larger one, whole. */
ag_span *ag_heap_take_any(ag_heap *h, uint64_t size);
/* Adds a free region of at least size bytes from the backing (AG_ENOMEM or the
 * backing's status; nothing changed then). */
ag_status ag_heap_grow(ag_heap *h, uint64_t size);
/* ag_heap_grow by a region of at least region bytes, then its first size
 * bytes taken as ag_heap_take would (the caller found no cached span). */
ag_status ag_heap_grow_take(ag_heap *h, uint64_t region, uint64_t size, ag_span **out);
/* Gives a taken span back, merging it with free neighbours; returns the
 * free span that holds it now. */
ag_span *ag_heap_put(ag_heap *h, ag_span *s);
/* Takes a wholly free region out of the heap without releasing it (s is
 * its only span, free); returns its cookie. */
void *ag_heap_detach(ag_heap *h, ag_span *s);
/* Moves the wholly free region of span s (in another heap sharing the
 * whole set) into to and takes its first size bytes; to must be prepared
 * (ag_heap_prepare): the region gets one of to's records, its old record
 * stays with the heap that allocated it. */
ag_span *ag_heap_adopt(ag_heap *to, ag_span *s, uint64_t size);
/* Returns every wholly free region to the backing; bytes returned. */
uint64_t ag_heap_trim(ag_heap *h);
/* Free bytes in the heap. */
static inline uint64_t ag_heap_cached(const ag_heap *h) { return h->reserved - h->used; }
/* Structural self-check (tests, expensive asserts): chains tile regions,
 * no two free neighbours, bins hold exactly the free spans. */
bool ag_heap_check(const ag_heap *h);

/* ---- MIF: stream m's view of b, W words; bit s of m's view means "as far
 * as m knows, s still occupies the block".  Every view starts as the
 * common one (the streams that joined since the block was handed out), a
 * join adds its bit to every view, and a view only loses bits after that
 * (its stream's own release, notices merged): every view is a subset of
 * the common view.
 * Up to 64 streams (W = 1) each stream's view is stored, one word each
 * (dense: row m at mif + m, the scratch row after them).  Beyond, only the
 * views that differ from the common one are (sparse: the common view at
 * mif, the scratch row at mif + W; row r of the rows made so far at
 * rows + r W, in a buffer of its own that grows by doubling; rowof[m] is
 * m's row plus one, 0 for the common view).
 * A stream's row is made the first time its view is to lose a bit, so an
 * access, a last free and a recycle cost the rows that exist, never
 * nstreams rows, and a block object holds room for the rows it has needed,
 * not one per stream. ---- */
static inline uint32_t ag_mif_words(uint32_t n) { return (n + 63u) / 64u; }
static inline void ag_mif_set(uint64_t *mif, uint32_t w, uint32_t m, uint32_t s)
{
    mif[(size_t)m * w + s / 64u] |= UINT64_C(1) << (s % 64u);
}
static inline void ag_mif_clear(uint64_t *mif, uint32_t w, uint32_t m, uint32_t s)
{
    mif[(size_t)m * w + s / 64u] &= ~(UINT64_C(1) << (s % 64u));
}
static inline bool ag_mif_is_set(const uint64_t *mif, uint32_t w, uint32_t m, uint32_t s)
{
    return (mif[(size_t)m * w + s / 64u] >> (s % 64u)) & 1u;
}
/* Runs the statement after it with u set to each stream of row (w words),
 * lowest first: AG_MIF_EACH(row, w, u) { ... } */
#define AG_MIF_EACH(row, w, u)                                                                              \
    for (uint32_t ag_k_ = 0; ag_k_ < (w); ag_k_++)                                                          \
        for (uint64_t ag_m_ = (row)[ag_k_]; ag_m_ && ((u) = ag_k_ * 64u + (uint32_t)__builtin_ctzll(ag_m_), true); \
             ag_m_ &= ag_m_ - 1u)
static inline bool ag_row_any(const uint64_t *row, uint32_t w)
{
    for (uint32_t k = 0; k < w; k++)
        if (row[k])
            return true;
    return false;
}
/* d &= row (d's stream learns what row's stream has learnt to be released). */
static inline void ag_row_and(uint64_t *d, const uint64_t *row, uint32_t w)
{
    for (uint32_t k = 0; k < w; k++)
        d[k] &= row[k];
}
/* The same for a row carried from before the latest joins: a stream that
 * started using the block after the carried view (joined[u] after since)
 * has released nothing the view could know of, so its bit is kept. */
void ag_row_and_since(uint64_t *d, uint32_t n, const uint64_t *row, const uint32_t *joined, uint32_t since);

/* ---- block objects ---- */
#define AG_LR_SLOTS 3u
enum { AG_BLK_FREE = 0, AG_BLK_LIVE, AG_BLK_BORROWED, AG_BLK_TRANSIT };
enum { AG_POOL_SMALL = 0, AG_POOL_LARGE = 1 };

struct ag_block {
    ag_span *span; /* pool span holding the memory */
    uint64_t size; /* span size */
    uint64_t requested;
    uint32_t birth;
    uint32_t astream; /* the stream that allocated it this time (statistics) */
    uint32_t version; /* bumped on every birth or borrow recycle */
    uint32_t holder;  /* BORROWED: whose borrow allocator has it; LIVE unshared: the one occupant */
    uint32_t bbin;    /* BORROWED: size bin */
    uint32_t users;   /* sum of occ[] */
    uint32_t jep;     /* join count: bumped when a stream starts using the shared block */
    uint32_t events;  /* baseline: outstanding events */
    uint8_t pool, state;
    bool shared; /* MIF materialised (another stream used it since allocation) */
    uint16_t nrows; /* sparse MIF: rows made (every one a view that differs) */
    /* Local-recycle entries naming this version of the block: how many in
     * the list of each of up to AG_LR_SLOTS streams; lr_over: entries of
     * further streams, not counted here (their lists count them until the
     * next compaction). */
    uint8_t lr_used;
    bool lr_over;
    uint32_t lr_stream[AG_LR_SLOTS];
    uint32_t lr_count[AG_LR_SLOTS];
    const struct ag_memalloc *owner;    /* the allocator the object belongs to, for good */
    struct ag_block *all_next;          /* every block object, for destroy */
    struct ag_block *link;              /* object pool free list */
    struct ag_block *bs_prev, *bs_next; /* borrow: size bin list */
    struct ag_block *bb_prev, *bb_next; /* borrow: per-birth-stream list */
    uint32_t *occ;                      /* per-stream occupy counts */
    uint32_t *joined;                   /* per stream: jep at its latest join (never reset) */
    uint64_t *mif;                      /* the views (see above); baseline: row 0 = recorded uses */
    /* sparse MIF: room for rowcap rows of W words, then each row's stream
     * (rowcap uint16_t); kept while the object is pooled */
    uint64_t *rows;
    uint32_t rowcap;
    /* Graph pools (alloc_graph.c): the block's entry in the allocator's
     * table of pool blocks (0: none; 0 in every pooled object) */
    uint32_t gref;
};

/* Bytes of a block object: the MIF (dense: nstreams rows and the scratch
 * row; sparse: the common and scratch rows), the use counts and the join
 * marks, then for a sparse MIF each stream's row index.  A sparse MIF's
 * rows are apart (ag_mif_rows_bytes). */
static inline size_t ag_mif_all_words(uint32_t n, uint32_t w) { return (size_t)(w == 1u ? n + 1u : 2u) * w; }
static inline size_t ag_block_bytes(uint32_t n, uint32_t w)
{
    size_t idx = w == 1u ? 0u : (size_t)n * sizeof(uint16_t);
    return sizeof(ag_block) + ag_mif_all_words(n, w) * sizeof(uint64_t) + (size_t)n * 2u * sizeof(uint32_t) + idx;
}
static inline size_t ag_mif_rows_bytes(uint32_t cap, uint32_t w)
{
    return (size_t)cap * (w * sizeof(uint64_t) + sizeof(uint16_t));
}
static inline uint16_t *ag_mif_rowof(uint32_t n, const ag_block *b) { return (uint16_t *)(b->joined + n); }
/* The stream of each row made. */
static inline uint16_t *ag_mif_rowsrc(uint32_t w, const ag_block *b)
{
    return (uint16_t *)(b->rows + (size_t)b->rowcap * w);
}
/* Row r (from 0) of a sparse MIF of w words a view. */
static inline uint64_t *ag_mif_row(const ag_block *b, uint32_t w, uint32_t r) { return b->rows + (size_t)r * w; }

/* ---- L3 borrow allocator of one stream ---- */
typedef struct ag_borrow {
    ag_block **by_birth; /* nstreams list heads */
    uint64_t bytes;
    uint32_t count;
    uint64_t binmap[AG_BINWORDS];
    ag_block *bins[AG_NBINS];
} ag_borrow;

/* ---- a local-recycle entry: stream released its last use while others
 * may still occupy the block.  Entries sit in release order; a send to
 * dst carries those from the stream's cursor for dst on ---- */
typedef struct ag_lrec {
    ag_block *blk;
    uint32_t version;
    uint32_t kept; /* compaction scratch: entries kept before this one */
} ag_lrec;

/* ---- an event channel src -> dst: the device event and what the sends
 * since the last wait carried ---- */
typedef struct ag_notice { /* src's MIF row at the send is in the channel's rows */
    ag_block *blk;
    uint32_t version;
    uint32_t jep; /* the block's join count at the send */
} ag_notice;

typedef struct ag_chan {
    ag_dev_event *ev;
    /* The event a send from a capturing src records into the graph (made
     * at the first): every launch of that graph records it again, at the
     * launch's point, so it is never ev, which stands for src's last eager
     * point, the one the notices and blocks the channel holds were sent
     * with.  glast: the last send was captured (a wait then waits for gev
     * and applies nothing). */
    ag_dev_event *gev;
    bool glast;
    bool recorded;
    /* capnotes notice slots, then their rows (W words each): at first
     * the AG_CHAN_SLOTS slots allocated with the channel (ag_chan_bytes),
     * later one allocation of both (ag_chan_slot_bytes) */
    ag_notice *notes;
    uint64_t *rows;
    uint32_t nnotes, capnotes;
    ag_block *home; /* borrowed blocks going back to dst, linked by link */
    uint32_t dst;
    struct ag_chan *made; /* the channel made before this one */
} ag_chan;

/* Notice slots a channel is made with: most sends carry a few notices, and
 * the first execution then allocates nothing more for them. */
#define AG_CHAN_SLOTS 8u

/* Bytes of n notice slots with their rows of w words. */
static inline size_t ag_chan_slot_bytes(uint32_t n, uint32_t w)
{
    return (size_t)n * (sizeof(ag_notice) + (size_t)w * sizeof(uint64_t));
}

/* Bytes of a channel with its first slots. */
static inline size_t ag_chan_bytes(uint32_t w)
{
    return sizeof(ag_chan) + ag_chan_slot_bytes(AG_CHAN_SLOTS, w);
}

/* Whether c's slots are still those it was made with. */
static inline bool ag_chan_slots_inline(const ag_chan *c)
{
    return (const void *)c->notes == (const void *)(c + 1);
}

/* ---- baseline: (event, block) pairs pending per stream, in record order ---- */
typedef struct ag_bpend {
    ag_dev_event *ev;
    ag_block *blk;
    uint32_t version; /* multi mode: the block's version at the free */
    uint32_t pad_;
    uint64_t mark;    /* happens-before mark of the record (replay check) */
    uint64_t seq;     /* the stream's epoch at the record (ag_astream.ev_seq) */
} ag_bpend;

/* A shared block whose last free found another user busy, below
 * fallback_min: a notice may recycle it first (its version moves); a pool
 * miss that finds it still waiting records the events (multi mode). */
typedef struct ag_lazy {
    ag_block *blk;
    uint32_t version;
} ag_lazy;

/* Happens-before hooks of the replay's check: mark returns a token for the
 * history of stream so far; join orders stream (UINT32_MAX: every stream,
 * the host saw it complete) after a token.  NULL outside a checked replay. */
typedef uint64_t (*ag_hb_mark_fn)(void *ud, uint32_t stream);
typedef void (*ag_hb_join_fn)(void *ud, uint32_t stream, uint64_t mark);

typedef struct ag_astream {
    /* what most operations touch first, together */
    ag_lrec *lrec;
    uint32_t nlrec, caplrec;
    /* At least the entries still live (0: every entry is stale, so sends
     * skip the list and the next release starts it afresh). */
    uint32_t nlive;
    /* per destination: entries before it were sent there (the low half;
     * the high half is the list generation it belongs to, older = 0) */
    uint64_t *cursor;
    uint32_t lgen; /* bumped whenever the list starts afresh */
    ag_bpend *pend;   /* deferred frees, in record order */
    uint32_t npend, cappend, pend_head;
    /* Ordering epochs: ev_seq counts the points of this stream the host may
     * later see complete (recorded deferred-free events, synchronisations);
     * every work enqueued before point k is done once ev_done >= k. */
    uint64_t ev_seq, ev_done;
    uint64_t clean_mark; /* ag_multi_clean: the checker's mark before the synchronise */
    uint32_t nrecent;
    uint64_t recent_bytes;
    ag_block *recent[AG_ALLOC_MAX_FRONT]; /* blocks just recycled at birth, kept whole for the next request */
    ag_alloc_stream_stats st;
    ag_borrow borrow;
    ag_heap pool[2]; /* L2: small and large regions */
    struct ag_gpool *gpool; /* the graph pool this stream's requests come from now (NULL: none) */
} ag_astream;

struct ag_memalloc {
    ag_ctx *ctx;
    ag_device *dev;
    ag_alloc_config cfg;
    atomic_uint lock; /* 0 free, 1 held (ag_alloc_lock) */
    uint32_t n, w;
    uint32_t routed; /* streams whose requests come from a graph pool now */
    ag_dev_stream **streams;
    ag_heap l1;
    ag_wholeset pool_whole; /* wholly free regions of every pool (multi mode) */
    ag_astream *st;
    ag_chan **chans; /* n*n, made on first send */
    ag_chan *made;   /* the channels made, newest first (the clean visits these only) */
    ag_block *all, *pool_free;
    ag_dev_event **spare_ev; /* event pool (deferred frees, region moves) */
    uint32_t nspare_ev, capspare_ev, nev;
    uint64_t npend;  /* deferred-free entries queued over every stream */
    ag_lazy *lazy;   /* multi mode: shared blocks whose fallback waits for a pool miss */
    uint32_t nlazy, caplazy;
    uint32_t poll_tick; /* multi mode: allocations since the last poll (cfg.poll_every) */
    uint32_t grow_stream; /* the stream whose pool is growing (region moves) */
    ag_heap *grow_heap;
    uint64_t grow_want; /* the request it grows for (the alone rule's bound) */
    bool steal_tried; /* the growing pool found no region to move: L1 need not look again */
    bool recent_kept; /* the last resource clean left the front caches as they were */
    /* The local and borrow recycle counts (statistics, never reset) at the
     * end of the last resource clean: while they stand, no local-recycle
     * entry was appended and no block parked in a borrow allocator since,
     * and the clean skips the lists and the borrow allocators, which it
     * left empty. */
    uint64_t clean_lrecs, clean_borrows;
    bool no_stream_query; /* the device predates ag_dev_stream_query */
    bool no_capture_query; /* the device predates ag_dev_stream_capturing */
    bool stream_query_ok; /* ... and it answered once: it does not */
    bool keep_device;     /* ag_alloc_destroy: no synchronise proved the streams done */
    /* The largest block the front caches keep: none without front_blocks;
     * none above page_size or small_size (a large one would keep its
     * region from going back to L1, or from moving); none of max_split or
     * more (a whole region, whose size no request asks) */
    uint64_t front_max;
    uint64_t transit_bytes; /* borrowed blocks a send carries home, until the wait (cached) */
    /* baseline: blocks whose last free could neither record an event nor
     * synchronise a user stream; the clean, after its device synchronise,
     * sends them home */
    uint32_t base_orphans;
    struct ag_gpool *gpools; /* the graph pools not yet released */
    uint32_t gpool_id;       /* the last pool ID given */
    struct ag_gref *gref;    /* pool blocks' entries, from 1 */
    uint32_t ngref, capgref, gref_free;
    ag_hb_mark_fn hb_mark;
    ag_hb_join_fn hb_join;
    void *hb_ud;
    ag_alloc_stats s;
    char devmsg[256]; /* the device's message of its last failure */
};

/* Every entry holds the allocator's lock.  A plain test-and-set lock: the
 * critical sections are short and uncontended in the common case, where a
 * mutex would double the cost of a cached pair; a waiter yields its core
 * (the holder may be synchronising a stream under the lock). */
static inline void ag_alloc_lock(ag_memalloc *a)
{
    for (unsigned spins = 0;; spins++) {
        if (!atomic_load_explicit(&a->lock, memory_order_relaxed) &&
            !atomic_exchange_explicit(&a->lock, 1u, memory_order_acquire))
            return;
        if (spins >= 64u)
            sched_yield();
    }
}
static inline void ag_alloc_unlock(ag_memalloc *a)
{
    atomic_store_explicit(&a->lock, 0u, memory_order_release);
}

/* alloc_block.c */
ag_status ag_block_get(ag_memalloc *a, ag_block **out);
void ag_block_put(ag_memalloc *a, ag_block *b);
/* A free block's span back to its birth stream's pool, and its object to
 * the object pool. */
static inline void ag_block_to_pool(ag_memalloc *a, ag_block *b);
/* An unshared block's first sharing: the holder, if it still uses b, in
 * every view. */
void ag_block_mif_materialise(ag_memalloc *a, ag_block *b);
/* b's MIF (see "MIF" above).  Stream m's view, to read: */
static inline const uint64_t *ag_mif_view(const ag_memalloc *a, const ag_block *b, uint32_t m)
{
    if (a->w == 1u)
        return b->mif + m;
    uint32_t r = ag_mif_rowof(a->n, b)[m];
    return r ? ag_mif_row(b, a->w, r - 1u) : b->mif;
}
/* Room for stream m's view to change: a sparse MIF whose row buffer is
 * full grows it when m has no row yet.  ag_mif_try_room: false when the
 * host allocation fails (no message); ag_mif_room raises AG_ENOMEM. */
bool ag_mif_grow(ag_memalloc *a, ag_block *b);
static inline bool ag_mif_try_room(ag_memalloc *a, ag_block *b, uint32_t m)
{
    return a->w == 1u || b->nrows < b->rowcap || ag_mif_rowof(a->n, b)[m] != 0 || ag_mif_grow(a, b);
}
ag_status ag_mif_oom(ag_memalloc *a);
static inline ag_status ag_mif_room(ag_memalloc *a, ag_block *b, uint32_t m)
{
    return ag_mif_try_room(a, b, m) ? AG_OK : ag_mif_oom(a);
}
/* Stream m's view, to change (room made first): a sparse MIF makes m's row
 * from the common view if m has none. */
uint64_t *ag_mif_make_row(ag_memalloc *a, ag_block *b, uint32_t m);
static inline uint64_t *ag_mif_own(ag_memalloc *a, ag_block *b, uint32_t m)
{
    if (a->w == 1u)
        return b->mif + m;
    uint32_t r = ag_mif_rowof(a->n, b)[m];
    return r ? ag_mif_row(b, a->w, r - 1u) : ag_mif_make_row(a, b, m);
}
/* A row of W words for the callers' own use. */
static inline uint64_t *ag_mif_scratch(const ag_memalloc *a, const ag_block *b)
{
    return b->mif + (a->w == 1u ? a->n : a->w);
}
/* Streams that some view still counts as users: the union of the views,
 * in the scratch row.  A sparse MIF with a stream that has no row of its
 * own: the common view, which holds every other. */
static inline uint64_t *ag_mif_users(const ag_memalloc *a, const ag_block *b)
{
    uint64_t *any = ag_mif_scratch(a, b);
    if (a->w == 1u) {
        uint64_t u = 0;
        for (uint32_t m = 0; m < a->n; m++)
            u |= b->mif[m];
        any[0] = u;
        return any;
    }
    if (b->nrows < a->n) {
        memcpy(any, b->mif, a->w * sizeof *any);
        return any;
    }
    memset(any, 0, a->w * sizeof *any);
    for (uint32_t r = 0; r < b->nrows; r++) {
        const uint64_t *row = ag_mif_row(b, a->w, r);
        for (uint32_t k = 0; k < a->w; k++)
            any[k] |= row[k];
    }
    return any;
}
/* Stream s joins: its bit in every view. */
void ag_mif_join(ag_memalloc *a, ag_block *b, uint32_t s);
/* Every view empty (the block is handed out afresh). */
void ag_mif_reset_sparse(const ag_memalloc *a, ag_block *b);
static inline void ag_mif_reset(const ag_memalloc *a, ag_block *b)
{
    if (a->w == 1u)
        memset(b->mif, 0, (size_t)a->n * sizeof *b->mif);
    else
        ag_mif_reset_sparse(a, b);
}
void ag_borrow_insert(ag_memalloc *a, ag_borrow *br, ag_block *b, uint32_t holder);
void ag_borrow_remove(ag_memalloc *a, ag_borrow *br, ag_block *b);
/* Smallest borrowed block of at least size and at most max bytes; NULL if none. */
ag_block *ag_borrow_take(ag_memalloc *a, ag_borrow *br, uint64_t size, uint64_t max);
/* Local-recycle list (VersionBlocks): room for one more entry (AG_ENOMEM,
 * asked before a free changes anything; a full list is compacted first:
 * entries whose block was recycled since (version changed) and entries
 * already sent to every other stream are dropped), and append. */
ag_status ag_lrec_grow(ag_memalloc *a, uint32_t stream);
/* Where destination d's next send starts in the list, and its update. */
static inline uint32_t ag_lrec_cursor(const ag_astream *s, uint32_t d)
{
    uint64_t c = s->cursor[d];
    return (uint32_t)(c >> 32) == s->lgen ? (uint32_t)c : 0u;
}
static inline void ag_lrec_set_cursor(ag_astream *s, uint32_t d, uint32_t pos)
{
    s->cursor[d] = (uint64_t)s->lgen << 32 | pos;
}
/* Empties the list: every cursor falls back to its start. */
static inline void ag_lrec_reset(ag_astream *s)
{
    s->nlrec = 0;
    s->lgen++;
}
static inline ag_status ag_lrec_reserve(ag_memalloc *a, uint32_t stream)
{
    ag_astream *s = &a->st[stream];
    if (s->nlive == 0 && s->nlrec)
        ag_lrec_reset(s); /* none of its entries is live */
    return s->nlrec < s->caplrec ? AG_OK : ag_lrec_grow(a, stream);
}
/* Counts delta entries of stream's list for b (an entry dropped: -1). */
static inline void ag_lr_count(ag_block *b, uint32_t stream, int delta)
{
    for (uint32_t k = 0; k < b->lr_used; k++)
        if (b->lr_stream[k] == stream) {
            b->lr_count[k] += (uint32_t)delta;
            if (b->lr_count[k] == 0) {
                b->lr_used--;
                b->lr_stream[k] = b->lr_stream[b->lr_used];
                b->lr_count[k] = b->lr_count[b->lr_used];
            }
            return;
        }
    if (delta < 0)
        return; /* an uncounted entry: its list keeps counting it */
    if (b->lr_used < AG_LR_SLOTS) {
        b->lr_stream[b->lr_used] = stream;
        b->lr_count[b->lr_used++] = 1;
    } else {
        b->lr_over = true;
    }
}
static inline void ag_lrec_append(ag_memalloc *a, uint32_t stream, ag_block *b)
{
    ag_astream *s = &a->st[stream];
    ag_assert(s->nlrec < s->caplrec);
    ag_lrec *e = &s->lrec[s->nlrec++];
    e->blk = b;
    e->version = b->version;
    s->nlive++;
    ag_lr_count(b, stream, 1);
    a->s.local_recycles++;
}
/* b's version moves on: every entry naming it is stale now. */
static inline void ag_lrec_forget(ag_memalloc *a, ag_block *b)
{
    for (uint32_t k = 0; k < b->lr_used; k++)
        a->st[b->lr_stream[k]].nlive -= b->lr_count[k];
    b->lr_used = 0;
    b->lr_over = false;
}
/* Whether the entry's block is still the one released (not recycled since);
 * a stale entry is cleared so that later scans skip it unread. */
static inline bool ag_lrec_live(ag_lrec *e)
{
    if (e->blk && (e->blk->version != e->version || e->blk->state != AG_BLK_LIVE))
        e->blk = NULL; /* recycled since: stale for good, never looked up again */
    return e->blk != NULL;
}

/* The front cache of a stream: a block recycled at birth keeps its span for
 * a request of the same rounded size, so the common pair costs no split and
 * no merge.  It holds the front_blocks blocks recycled last, oldest first: a
 * block recycled into a full cache sends the oldest back to its pool (a
 * graph's sizes change as it runs, and the blocks of sizes it has left
 * behind would otherwise fill the cache for good).  Flushed whenever
 * memory has to move between layers. */
static inline ag_block *ag_recent_take(ag_memalloc *a, uint32_t stream, uint64_t size);
/* b, recycled at birth: into the front cache, or (a large block) back to
 * its pool with its object. */
static inline void ag_recent_put(ag_memalloc *a, ag_block *b);
void ag_recent_flush_all(ag_memalloc *a); /* every stream's, back to its pools */
/* The oldest block of stream's front cache back to its pool. */
void ag_recent_evict(ag_memalloc *a, uint32_t stream);

/* alloc_l1.c */
ag_status ag_l1_init(ag_memalloc *a);
ag_status ag_pool_init(ag_memalloc *a, uint32_t stream);
/* A wholly free region of another pool picked to move to a growing pool
 * (span NULL: none), valid until the pools next change. */
typedef struct ag_move {
    ag_span *span;
    uint32_t owner;
} ag_move;
/* Pool span for size on stream (pool small or large), growing the pool
 * from L1 (multi) or the device (baseline), trimming and retrying; tried:
 * the caller already found no cached span there; mv: ag_pool_can_move's
 * pick for the same request, with nothing changed since (or NULL): when
 * that region cannot move after all, *out is NULL with AG_OK and nothing
 * grew. */
ag_status ag_pool_take(ag_memalloc *a, uint32_t stream, uint64_t size, bool tried, const ag_move *mv, uint32_t *pool,
                       ag_span **out);
/* The host records a growth of stream's pool for size may need (the
 * pool's, and in the multi mode L1's), before the device is asked: an
 * AG_ENOMEM from ag_pool_take after it is the device's refusal, never
 * the host's, and only a refusal calls for trim, reclaim and retry. */
ag_status ag_pool_prepare(ag_memalloc *a, uint32_t stream, uint64_t size);
/* Whether ag_pool_take would serve a request of size bytes on stream by
 * moving a wholly free region of another pool there (no device growth):
 * the region in *mv. */
bool ag_pool_can_move(ag_memalloc *a, uint32_t stream, uint64_t size, ag_move *mv);
/* Request rounding (min_block is a power of two). */
static inline uint64_t ag_pool_round(const ag_memalloc *a, uint64_t size)
{
    return (size + a->cfg.min_block - 1u) & ~(a->cfg.min_block - 1u);
}
/* The pool of a stream that serves a rounded request of r bytes. */
static inline uint32_t ag_pool_of(const ag_memalloc *a, uint64_t r)
{
    return r <= a->cfg.small_size ? AG_POOL_SMALL : AG_POOL_LARGE;
}
/* Returns every stream's wholly free pool regions to their backing,
 * synchronising a stream first when sync (its queued work may still touch
 * memory it freed).  Bytes returned. */
uint64_t ag_pools_release(ag_memalloc *a, bool sync);
/* Keeps the device's message of a failing call for the allocator's own. */
void ag_dev_note(ag_memalloc *a);
/* Whether some region of h is wholly free. */
bool ag_heap_has_free_region(const ag_heap *h);

/* alloc_graph.c: graph pools.  A pool block's entry (ag_block.gref
 * indexes a->gref; lists link entries by index, 0 ending them): the pool
 * keeps one use of its own of the block on stream, the stream that
 * allocated it; parked: no user holds it, and if shared is false (no
 * other stream used it since) it waits in the pool's lists of stream for
 * that stream's next requests in the pool.  AG_GBINS size classes
 * (floor(log2(size))). */
#define AG_GBINS 64u
typedef struct ag_gref {
    struct ag_gpool *pool; /* NULL: a free entry (next links the free ones) */
    ag_block *blk;
    uint32_t stream;
    bool parked, shared;
    uint32_t prev, next;   /* the pool's blocks */
    uint32_t bprev, bnext; /* its parked blocks of one stream and class */
} ag_gref;
typedef struct ag_gpool {
    uint32_t id;
    uint32_t routed;       /* streams whose requests come from it now */
    struct ag_gpool *next; /* the allocator's pools */
    uint32_t blocks;       /* every block it holds, live or parked */
    uint32_t **bins;       /* per stream (made at its first park): AG_GBINS lists */
    ag_status failed;      /* the first failure of a block's recycling in a release (the
                            * use released all the same), for the try that ends it */
} ag_gpool;
/* A request of a stream routed to a pool: a parked block of the pool, made
 * live, else a new one that the pool adopts. */
ag_status ag_gpool_malloc(ag_memalloc *a, uint32_t stream, uint64_t size, ag_block **out);
/* A user's use of a pool block on dst (AG_EINVAL: parked). */
ag_status ag_gpool_access(ag_memalloc *a, ag_block *b, uint32_t dst);
/* A user's free of a pool block: the last one parks it. */
ag_status ag_gpool_free(ag_memalloc *a, ag_block *b, uint32_t stream);
/* Frees every pool, its lists and the table (ag_alloc_destroy; the blocks
 * go with the allocator's). */
void ag_gpool_destroy_all(ag_memalloc *a);

/* alloc_multi.c */
ag_status ag_multi_malloc(ag_memalloc *a, uint32_t stream, uint64_t size, ag_block **out);
ag_status ag_multi_access(ag_memalloc *a, ag_block *b, uint32_t dst);
ag_status ag_multi_free(ag_memalloc *a, ag_block *b, uint32_t stream);
ag_status ag_multi_send(ag_memalloc *a, uint32_t src, uint32_t dst);
ag_status ag_multi_wait(ag_memalloc *a, uint32_t dst, uint32_t src);
ag_status ag_multi_clean(ag_memalloc *a);
/* b back to its birth stream as a new version: its front cache, or its
 * pool.  The baseline's blocks have no local-recycle entries to forget
 * (ag_block_home); the multi mode's may (ag_birth_recycle). */
static inline void ag_block_home(ag_memalloc *a, ag_block *b);
static inline void ag_birth_recycle(ag_memalloc *a, ag_block *b);

/* Room for need more spare events (AG_ENOMEM, AG_EDEVICE). */
ag_status ag_ev_grow(ag_memalloc *a, uint32_t stream, uint32_t need);
static inline ag_status ag_ev_reserve(ag_memalloc *a, uint32_t stream, uint32_t need)
{
    return a->nspare_ev >= need ? AG_OK : ag_ev_grow(a, stream, need);
}
/* Room for one more deferred-free entry on stream. */
ag_status ag_pend_grow(ag_memalloc *a, uint32_t stream);
/* Room for one more waiting block (a full list drops the entries no
 * longer waiting first), asked before a free changes anything. */
ag_status ag_lazy_grow(ag_memalloc *a);
static inline ag_status ag_lazy_reserve(ag_memalloc *a)
{
    return a->nlazy < a->caplazy ? AG_OK : ag_lazy_grow(a);
}
/* At a pool miss: each waiting block recycled if its users are idle now,
 * else an event recorded on each busy one (polled as a deferred free). */
ag_status ag_lazy_flush(ag_memalloc *a);
static inline ag_status ag_pend_reserve(ag_memalloc *a, uint32_t stream)
{
    return a->st[stream].npend < a->st[stream].cappend ? AG_OK : ag_pend_grow(a, stream);
}
static inline uint64_t ag_hb_mark(ag_memalloc *a, uint32_t stream)
{
    return a->hb_mark ? a->hb_mark(a->hb_ud, stream) : 0;
}
static inline void ag_hb_join(ag_memalloc *a, uint32_t stream, uint64_t mark)
{
    if (a->hb_join)
        a->hb_join(a->hb_ud, stream, mark);
}

/* The host saw stream k complete everything enqueued so far. */
static inline void ag_epoch_done(ag_memalloc *a, uint32_t k)
{
    a->st[k].ev_done = ++a->st[k].ev_seq;
}

/* alloc_base.c */
ag_status ag_base_malloc(ag_memalloc *a, uint32_t stream, uint64_t size, ag_block **out);
ag_status ag_base_access(ag_memalloc *a, ag_block *b, uint32_t dst);
ag_status ag_base_free(ag_memalloc *a, ag_block *b, uint32_t stream);
/* Polls every stream's deferred frees in record order (block: wait for
 * all).  Both modes: the multi mode defers a shared block's last free the
 * same way, as a fallback to the notices its event edges carry. */
ag_status ag_base_poll(ag_memalloc *a, bool block);
void ag_base_release_events(ag_memalloc *a);
/* What ag_pend_ask found, or ag_pend_record did. */
typedef enum ag_pend_out {
    AG_PEND_QUEUED,    /* an event recorded and queued, b counted for it */
    AG_PEND_IDLE,      /* u was idle: nothing queued, u's epoch seen */
    AG_PEND_FAILED,    /* the device failed (raised into *first if the first) */
    AG_PEND_CAPTURING, /* u captures: no event could stand for its eager work */
    AG_PEND_BUSY,      /* asked: u is busy (nothing recorded yet) */
    AG_PEND_UNKNOWN    /* asked: the device cannot tell (it predates the query) */
} ag_pend_out;
/* Asks whether stream u is idle, for a deferred free (ag_dev_stream_query):
 * a query refused asks whether u captures, and any other refusal is raised
 * into *first if the first.  (The callers count capture_waits, once for a
 * block.) */
ag_pend_out ag_pend_ask(ag_memalloc *a, uint32_t u, ag_status *first);
/* Records a deferred-free event for b on stream u and queues it (room for
 * the event and the entry was reserved by the caller), with
 * ag_dev_event_record_eager: a stream that captures takes none (the caller
 * counts capture_waits).  On a device failure the first one is raised into
 * *first.
 * Unless queued, b stays counted for u.  ask_event: then ask the event
 * whether it is complete (for a device that cannot say whether a stream is
 * idle): idle if it is. */
ag_pend_out ag_pend_record(ag_memalloc *a, uint32_t u, ag_block *b, bool ask_event, ag_status *first);
/* Asks the device, without waiting, whether stream u is idle (counted in
 * stream_queries).  AG_EUNSUPPORTED: the device predates the query (then
 * and from then on, without asking; its error cleared); another failure
 * is the device's, with its message in the device's ctx. */
ag_status ag_stream_query(ag_memalloc *a, uint32_t u, bool *idle);
/* Whether stream u captures (ag_dev_stream_capturing).  An event recorded
 * on a capturing stream, or a wait enqueued on one, goes into a graph and
 * orders none of the stream's eager work: the allocator records and waits
 * on eager streams only.  A device that predates the query cannot tell:
 * not capturing (then and from then on, without asking; its error
 * cleared).  Another failure is the device's (its message in the device's
 * ctx; *capturing false, the caller weighs the status). */
ag_status ag_stream_capturing(ag_memalloc *a, uint32_t u, bool *capturing);
/* Whether the host sees stream u idle now (then every work enqueued on it
 * so far is done, and its epoch counts as seen); a device that cannot
 * tell, or fails, answers busy (its error cleared).  The second form asks
 * once per round: asked[u] is 0 before, 1 idle, 2 busy, 3 capturing (the
 * query refused for a capture, or, marked by the pool miss's look, an
 * eager record declined for one). */
bool ag_stream_idle(ag_memalloc *a, uint32_t u);
/* Synchronises stream u, and the host has seen it complete (its epoch,
 * the happens-before hook); the device's status. */
ag_status ag_stream_sync(ag_memalloc *a, uint32_t u);
bool ag_stream_seen_idle(ag_memalloc *a, uint32_t u, uint8_t *asked);
/* The resource clean's synchronise, both modes: the device, every stream's
 * epoch seen and the happens-before hook told (counted in syncs). */
ag_status ag_clean_sync(ag_memalloc *a);
/* The baseline's resource clean: the synchronise, every deferred free. */
ag_status ag_base_clean(ag_memalloc *a);

/* Bookkeeping shared by both modes: a block handed out; its last user gone
 * (pending: not yet reusable); recycled after having been pending. */
static inline void ag_stat_alloc(ag_memalloc *a, const ag_block *b);
static inline void ag_stat_unused(ag_memalloc *a, const ag_block *b, bool pending);
void ag_stat_unpend(ag_memalloc *a, const ag_block *b);
/* AG_EINVAL naming what when stream is not one of the allocator's. */
ag_status ag_alloc_check_stream(ag_memalloc *a, const char *what, uint32_t stream);
/* AG_EINVAL: a free on a stream that does not use b. */
ag_status ag_alloc_not_user(ag_memalloc *a, const ag_block *b, uint32_t stream);
/* The body of a public entry: the lock around its locked form. */
#define AG_ALLOC_ENTRY(a, call)                                                                                \
    do {                                                                                                       \
        if (!(a))                                                                                              \
            return AG_EINVAL;                                                                                  \
        ag_alloc_lock(a);                                                                                      \
        ag_status st_ = (call);                                                                                \
        ag_alloc_unlock(a);                                                                                    \
        return st_;                                                                                            \
    } while (0)
/* Raises the error of a failed device-memory request on stream. */
ag_status ag_alloc_fail(ag_memalloc *a, ag_status st, uint32_t stream, uint64_t size);
/* The mode's own request, use and free (a graph pool's and a plain
 * entry's alike); the request's device failure raised with its numbers. */
static inline ag_status ag_mode_malloc(ag_memalloc *a, uint32_t stream, uint64_t size, ag_block **out)
{
    a->devmsg[0] = '\0';
    ag_status st = a->cfg.mode == AG_ALLOC_MULTI ? ag_multi_malloc(a, stream, size, out)
                                                 : ag_base_malloc(a, stream, size, out);
    return st == AG_OK ? st : ag_alloc_fail(a, st, stream, size);
}
static inline ag_status ag_mode_access(ag_memalloc *a, ag_block *b, uint32_t dst)
{
    return a->cfg.mode == AG_ALLOC_MULTI ? ag_multi_access(a, b, dst) : ag_base_access(a, b, dst);
}
static inline ag_status ag_mode_free(ag_memalloc *a, ag_block *b, uint32_t stream)
{
    return a->cfg.mode == AG_ALLOC_MULTI ? ag_multi_free(a, b, stream) : ag_base_free(a, b, stream);
}

/* ---- hot paths, inline in every file of the allocator ---- */

static inline void ag_stat_alloc(ag_memalloc *a, const ag_block *b)
{
    ag_alloc_stats *s = &a->s;
    s->mallocs++;
    s->allocated += b->size;
    if (s->allocated > s->peak_allocated)
        s->peak_allocated = s->allocated;
    s->requested += b->requested;
    if (s->requested > s->peak_requested)
        s->peak_requested = s->requested;
    ag_alloc_stream_stats *ss = &a->st[b->astream].st;
    ss->mallocs++;
    ss->allocated += b->size;
    if (ss->allocated > ss->peak_allocated)
        ss->peak_allocated = ss->allocated;
}

/* Block object b takes span of pool (small or large) of stream birth's L2. */
static inline void ag_block_bind(ag_block *b, ag_span *span, uint32_t pool, uint32_t birth)
{
    b->span = span;
    b->size = span->size;
    b->pool = (uint8_t)pool;
    b->birth = birth;
}

/* A block handed out to stream for a request of size, one use. */
static inline void ag_handout(ag_memalloc *a, ag_block *b, uint32_t stream, uint64_t size)
{
    b->requested = size;
    b->astream = b->holder = stream;
    b->occ[stream] = 1;
    b->users = 1;
    ag_stat_alloc(a, b);
}

static inline void ag_stat_unused(ag_memalloc *a, const ag_block *b, bool pending)
{
    a->s.frees++;
    a->s.allocated -= b->size;
    a->s.requested -= b->requested;
    a->st[b->astream].st.frees++;
    a->st[b->astream].st.allocated -= b->size;
    if (pending)
        a->s.pending += b->size;
}

static inline ag_block *ag_recent_take(ag_memalloc *a, uint32_t stream, uint64_t size)
{
    ag_astream *s = &a->st[stream];
    for (uint32_t k = s->nrecent; k-- > 0;) {
        ag_block *b = s->recent[k];
        if (b->size != size)
            continue;
        s->nrecent--;
        memmove(&s->recent[k], &s->recent[k + 1u], (s->nrecent - k) * sizeof s->recent[0]);
        s->recent_bytes -= b->size;
        b->state = AG_BLK_LIVE;
        b->users = 0;
        b->events = 0;
        return b;
    }
    return NULL;
}

static inline void ag_block_to_pool(ag_memalloc *a, ag_block *b)
{
    ag_heap_put(&a->st[b->birth].pool[b->pool], b->span);
    ag_block_put(a, b);
}

static inline void ag_recent_put(ag_memalloc *a, ag_block *b)
{
    /* Only small blocks (ag_memalloc.front_max). */
    if (b->size > a->front_max) {
        ag_block_to_pool(a, b);
        return;
    }
    ag_astream *s = &a->st[b->birth];
    if (s->nrecent >= a->cfg.front_blocks)
        ag_recent_evict(a, b->birth);
    if (b->shared) {
        ag_mif_reset(a, b);
        memset(b->occ, 0, (size_t)a->n * sizeof(uint32_t));
        b->shared = false;
    }
    b->state = AG_BLK_FREE;
    s->recent[s->nrecent++] = b;
    s->recent_bytes += b->size;
}

static inline void ag_block_home(ag_memalloc *a, ag_block *b)
{
    b->version++;
    a->s.birth_recycles++;
    ag_recent_put(a, b);
}

static inline void ag_birth_recycle(ag_memalloc *a, ag_block *b)
{
    ag_lrec_forget(a, b);
    ag_block_home(a, b);
}

/* alloc_timed.c: the replay's timing model (docs/runtime.md "Trace
 * replay and its timing model"). */
typedef struct ag_timed ag_timed;
/* A device forwarding to inner (borrowed) with a virtual clock; destroyed
 * with ag_device_destroy(*out).  Unlike device.h's queries, its stream and
 * event queries may wait: where the model says the work is done they wait
 * for the inner device to agree (the model's kernels are instant there),
 * so that a replay's answers follow the model alone.  The replay calls
 * them from the host only; from a kernel they return the inner device's
 * refusal to wait. */
ag_status ag_timed_wrap(ag_device *inner, uint64_t kernel_ticks, ag_timed **tw, ag_device **out);
void ag_timed_tick(ag_timed *t);                             /* the host issued one operation */
void ag_timed_kernel(ag_timed *t, const ag_dev_stream *s);   /* a kernel enqueued on s */
uint64_t ag_timed_now(const ag_timed *t);
uint64_t ag_timed_makespan(const ag_timed *t);
uint64_t ag_timed_calls(const ag_timed *t); /* device entries called through the wrapper */

#endif
