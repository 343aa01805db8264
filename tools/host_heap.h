/* Fixed host-heap behaviour for the programs that time allocation-trace
 * replays (aliasguard alloc-replay, bench/alloc compare). */
#ifndef AG_TOOLS_HOST_HEAP_H
#define AG_TOOLS_HOST_HEAP_H

#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* The simulated device's memory comes from the host heap, whose glibc
 * thresholds adapt to what earlier replays freed: whichever mode ran first
 * decided whether a later device allocation mapped fresh pages (a system
 * call, and a page cleared at its first touch) or reused the heap, and
 * moved the time per operation by up to a fifth.  With no mapping of its
 * own for any block and a heap that never shrinks, a device allocation
 * costs the same in every replay of either mode: the time measured is the
 * allocator's, and the device allocations are counted apart. */
static inline void pin_host_heap(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

#endif
