/* Unit tests of the host-heap setting the timing programs apply before a
 * replay (tools/host_heap.h): once pinned, a block above glibc's largest
 * mmap threshold comes from the heap, not from a mapping of its own, and
 * freeing it does not give the heap back.  The simulated device's
 * allocations then cost the same in every replay, whichever mode ran
 * before.  Under a sanitizer (its own allocator) or another C library the
 * setting does not apply and the test is skipped. */
#include "support/agtest.h"

#include <stdlib.h>

#include "../../tools/host_heap.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define HEAP_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HEAP_SANITIZED 1
#endif
#if defined(__GLIBC__) && !defined(HEAP_SANITIZED)
#define HEAP_TESTABLE 1
#else
#define HEAP_TESTABLE 0
#endif

/* 40 MiB: above the 32 MiB that glibc's adaptive threshold can reach. */
#define BIG ((size_t)40 << 20)

static void test_big_block_from_heap_and_kept(void **state)
{
    (void)state;
#if HEAP_TESTABLE
    pin_host_heap();
    struct mallinfo2 before = mallinfo2();
    char *p = malloc(BIG);
    assert_non_null(p);
    p[0] = 1;
    p[BIG - 1] = 2; /* touched: a real block */
    struct mallinfo2 during = mallinfo2();
    assert_int_equal(during.hblks, before.hblks);   /* no mapping of its own */
    assert_true(during.arena >= before.arena + BIG); /* the heap grew for it */
    free(p);
    struct mallinfo2 after = mallinfo2();
    assert_int_equal(after.arena, during.arena); /* not trimmed */
    assert_true(after.fordblks >= BIG);          /* kept, free, for the next */
    /* the next block of that size reuses it: the heap does not grow */
    p = malloc(BIG);
    assert_non_null(p);
    struct mallinfo2 again = mallinfo2();
    assert_int_equal(again.arena, during.arena);
    assert_int_equal(again.hblks, before.hblks);
    free(p);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_big_block_from_heap_and_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
