/* Internal helpers shared by every module: error raising, allocation through
 * the context hook, arenas, growable arrays and a string map.  Never installed.
 * Raw malloc/free are poisoned below so that nothing bypasses the hook. */
#ifndef AG_INTERNAL_H
#define AG_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "aliasguard/aliasguard.h"

/* ---- asserts in levels: AG_DEBUG=0 (none) 1 (ag_assert) 2 (internal) 3 (expensive) ---- */
#ifndef AG_DEBUG
#define AG_DEBUG 0
#endif
void ag__assert_fail(const char *expr, const char *file, int line);
#define AG_ASSERT_AT_(lvl, e) \
    ((AG_DEBUG >= (lvl) && !(e)) ? ag__assert_fail(#e, __FILE__, __LINE__) : (void)0)
#define ag_assert(e) AG_ASSERT_AT_(1, e)
#define ag_assert_internal(e) AG_ASSERT_AT_(2, e)
#define ag_assert_expensive(e) AG_ASSERT_AT_(3, e)

/* ---- errors: always raised through AG_ERR, which records file and line ---- */
/* Formats the message into ctx, remembers code, returns code.  The message
 * should name the file, node and anchor involved. */
ag_status ag__error(ag_ctx *ctx, ag_status code, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
#define AG_ERR(ctx, code, ...) ag__error((ctx), (code), __FILE__, __LINE__, __VA_ARGS__)
/* Records AG_ENOMEM with a generic message; returns AG_ENOMEM. */
#define AG_OOM(ctx) AG_ERR((ctx), AG_ENOMEM, "out of memory")
/* Propagates a failing status. */
#define AG_TRY(expr)                   \
    do {                               \
        ag_status ag_try_st_ = (expr); \
        if (ag_try_st_ != AG_OK)       \
            return ag_try_st_;         \
    } while (0)

/* The last failure of a context, kept around a best-effort call whose own
 * failure is dropped: a destroy that cleans up after an error must not
 * erase the message the caller is about to read. */
#define AG_ERRMSG_MAX 1024
typedef struct ag_err_saved {
    ag_status last;
    const char *file;
    int line;
    char msg[AG_ERRMSG_MAX];
} ag_err_saved;
void ag_ctx_error_save(const ag_ctx *ctx, ag_err_saved *out);
void ag_ctx_error_restore(ag_ctx *ctx, const ag_err_saved *saved);

/* ---- host memory through the context hook (NULL on failure, no message) ---- */
void *ag_alloc(ag_ctx *ctx, size_t size);                 /* uninitialised */
void *ag_calloc(ag_ctx *ctx, size_t count, size_t size);  /* zeroed, overflow-checked */
void *ag_realloc(ag_ctx *ctx, void *p, size_t old_size, size_t new_size);
void ag_free(ag_ctx *ctx, void *p, size_t size);          /* NULL accepted */
char *ag_strdup(ag_ctx *ctx, const char *s);              /* free with strlen(s)+1 */

/* ---- arena: bump allocation, freed all at once ---- */
typedef struct ag_arena_chunk ag_arena_chunk;
typedef struct ag_arena {
    ag_ctx *ctx;
    ag_arena_chunk *head;
    size_t used;      /* bytes used in head */
    size_t total;     /* bytes obtained from the hook */
} ag_arena;
void ag_arena_init(ag_arena *a, ag_ctx *ctx);
void *ag_arena_alloc(ag_arena *a, size_t size);          /* 16-byte aligned, zeroed; NULL on OOM */
void *ag_arena_memdup(ag_arena *a, const void *p, size_t size);
char *ag_arena_strdup(ag_arena *a, const char *s);
char *ag_arena_strndup(ag_arena *a, const char *s, size_t n);
void ag_arena_reset(ag_arena *a);                          /* frees all chunks */

/* ---- growable array of fixed-size elements (heap, through the hook) ---- */
typedef struct ag_vec {
    void *data;
    uint32_t len;
    uint32_t cap;
} ag_vec;
/* Ensures room for n more elements of size elem; AG_ENOMEM (no message) on failure. */
ag_status ag_vec_reserve(ag_ctx *ctx, ag_vec *v, size_t elem, uint32_t n);
ag_status ag_vec_push(ag_ctx *ctx, ag_vec *v, size_t elem, const void *item);
/* For arrays kept as a pointer and a capacity of their own: data (*cap items
 * of elem bytes) reallocated to twice as many items, or first when *cap is
 * 0.  Returns the new array and updates *cap; NULL (data and *cap as they
 * were) when out of memory or past UINT32_MAX items. */
void *ag_realloc_double(ag_ctx *ctx, void *data, uint32_t *cap, size_t elem, uint32_t first);
void ag_vec_free(ag_ctx *ctx, ag_vec *v, size_t elem);
#define AG_VEC_AT(v, T, k) (((T *)(v).data)[k])

/* ---- string -> uint32 map (open addressing, XXH3 hash, heap through hook) ---- */
typedef struct ag_strmap {
    struct ag_strmap_slot *slots;
    uint32_t cap;   /* power of two or 0 */
    uint32_t count;
} ag_strmap;
void ag_strmap_init(ag_strmap *m);
void ag_strmap_free(ag_ctx *ctx, ag_strmap *m);
/* Key string must outlive the map (keys are not copied). */
ag_status ag_strmap_put(ag_ctx *ctx, ag_strmap *m, const char *key, uint32_t value);
bool ag_strmap_get(const ag_strmap *m, const char *key, uint32_t *value);
bool ag_strmap_del(ag_strmap *m, const char *key);

/* ---- buffered output to a sink (the text IR and DOT writers) ----
 * Writes are collected in buf and passed to the sink in large pieces.  The
 * first failure (of the sink, or one a writer records itself in st) stops
 * all later output; ag_bufout_flush returns it. */
typedef struct ag_bufout {
    ag_sink sink;
    ag_status st;
    size_t len;
    char buf[8192];
} ag_bufout;
void ag_bufout_init(ag_bufout *b, ag_sink sink);
void ag_bufout_put(ag_bufout *b, const void *data, size_t n);
void ag_bufout_puts(ag_bufout *b, const char *s);
ag_status ag_bufout_flush(ag_bufout *b);

/* ---- small utilities ---- */
uint64_t ag_hash_bytes(const void *p, size_t n); /* XXH3-64 */
/* Reads a whole file ("-" = stdin) into a hook-allocated buffer (*len bytes, NUL
 * appended; free with ag_free(ctx, buf, *len + 1)).  Errors name the path. */
ag_status ag_read_file(ag_ctx *ctx, const char *path, char **buf, size_t *len);

/* Poison raw allocation so that every allocation goes through the hook. */
#ifndef AG_ALLOW_RAW_MALLOC
#undef malloc
#undef calloc
#undef realloc
#undef free
#undef strdup
#define malloc(n) ag_do_not_use_malloc_use_ag_alloc(n)
#define calloc(n, m) ag_do_not_use_calloc_use_ag_calloc(n, m)
#define realloc(p, n) ag_do_not_use_realloc_use_ag_realloc(p, n)
#define free(p) ag_do_not_use_free_use_ag_free(p)
#define strdup(s) ag_do_not_use_strdup_use_ag_strdup(s)
#endif

#endif
