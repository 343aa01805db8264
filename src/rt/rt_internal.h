/* Internal helpers of the runtime (src/rt): telling ASan and Valgrind which
 * bytes of device memory are live.  Pools that hand out pieces of one big
 * device allocation mark free pieces inaccessible and live pieces accessible,
 * so a kernel touching a freed block is reported where it happens. */
#ifndef AG_RT_INTERNAL_H
#define AG_RT_INTERNAL_H

#include <stddef.h>

#include "aliasguard/device.h"

#if defined(__SANITIZE_ADDRESS__)
#define AG_RT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AG_RT_ASAN 1
#endif
#endif

#ifdef AG_RT_ASAN
#include <sanitizer/asan_interface.h>
#endif

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define AG_RT_VALGRIND 1
#endif
#endif

/* Marks [p, p+n) as not to be touched (freed pool space, alignment slack).
 * ASan works on 8-byte granules: a range that does not start on one leaves
 * the bytes before the next granule accessible. */
static inline void ag_rt_mark_noaccess(const void *p, size_t n)
{
#ifdef AG_RT_ASAN
    ASAN_POISON_MEMORY_REGION(p, n);
#endif
#ifdef AG_RT_VALGRIND
    (void)VALGRIND_MAKE_MEM_NOACCESS(p, n);
#endif
    (void)p;
    (void)n;
}

/* Marks [p, p+n) as live again (handed out, or about to be given back to the
 * host allocator). */
static inline void ag_rt_mark_access(const void *p, size_t n)
{
#ifdef AG_RT_ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
#ifdef AG_RT_VALGRIND
    (void)VALGRIND_MAKE_MEM_DEFINED(p, n);
#endif
    (void)p;
    (void)n;
}

#endif
