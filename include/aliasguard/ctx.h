/* The context: the host allocator hook, the last error message, and the
 * allocation-failure injection harness used by the OOM sweeps.
 * A context is not thread-safe; use one per thread. */
#ifndef ALIASGUARD_CTX_H
#define ALIASGUARD_CTX_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_ctx ag_ctx;

/* Host allocator hook.  realloc(ud, NULL, 0, n) allocates, realloc(ud, p, old, 0)
 * frees (returns NULL), otherwise resizes.  old_size is always the size that was
 * asked for when p was obtained, so a hook need not keep headers. */
typedef struct ag_allocator {
    size_t size; /* sizeof(ag_allocator), for growth */
    void *(*realloc)(void *ud, void *ptr, size_t old_size, size_t new_size);
    void *ud;
} ag_allocator;

/* Creates a context.  alloc may be NULL (the C library allocator is used);
 * the hook must outlive the context.  Returns NULL only when allocation fails. */
ag_ctx *ag_ctx_create(const ag_allocator *alloc);
/* Destroys a context created by ag_ctx_create; NULL is accepted.  Every object
 * made with the context must have been destroyed first. */
void ag_ctx_destroy(ag_ctx *ctx);

/* Detailed message of the last failure ("" if none); valid until the next call
 * that fails on this context. */
const char *ag_ctx_errmsg(const ag_ctx *ctx);
/* Status of the last recorded failure (AG_OK if none). */
ag_status ag_ctx_last_status(const ag_ctx *ctx);
/* Library source file and line that raised the last failure (for bug reports). */
void ag_ctx_error_origin(const ag_ctx *ctx, const char **file, int *line);
/* Forgets the last failure. */
void ag_ctx_clear_error(ag_ctx *ctx);
/* Optional callback receiving each error message as it is raised. */
void ag_ctx_set_error_callback(ag_ctx *ctx, void (*cb)(void *ud, ag_status st, const char *msg), void *ud);

/* Frees a block the library returned to the caller (documented per call). */
void ag_ctx_free(ag_ctx *ctx, void *ptr, size_t size);

/* ---- Output sinks: writers never touch FILE* directly. ---- */
typedef struct ag_sink {
    ag_status (*write)(void *ud, const void *data, size_t len);
    void *ud;
} ag_sink;

/* A sink writing to an open stdio stream (AG_EIO on short writes). */
ag_sink ag_sink_file(FILE *f);

/* Growable memory buffer; data is NUL-terminated after each write. */
typedef struct ag_membuf {
    ag_ctx *ctx;
    char *data;
    size_t len;
    size_t cap;
} ag_membuf;
void ag_membuf_init(ag_membuf *mb, ag_ctx *ctx);
ag_sink ag_sink_membuf(ag_membuf *mb);
void ag_membuf_free(ag_membuf *mb);

/* ---- Allocation-failure injection (tests, fuzzers, OOM sweeps). ----
 * A test allocator wraps the C library allocator: it fails the fail_at-th call
 * (1-based; 0 = never) and, when repeat is nonzero, every call after it too.
 * It counts live blocks and bytes so a test can assert nothing leaked. */
typedef struct ag_testalloc {
    uint64_t fail_at;   /* fail the Nth allocating call; 0 never */
    int repeat;         /* nonzero: keep failing after the first failure */
    uint64_t calls;     /* allocating calls seen (frees are not counted) */
    uint64_t nfail;     /* failures injected */
    uint64_t live_blocks;
    uint64_t live_bytes;
    uint64_t peak_bytes;
} ag_testalloc;

/* Resets counters and arms failure at call n (0 = never). */
void ag_testalloc_init(ag_testalloc *ta, uint64_t fail_at, int repeat);
/* Allocator hook backed by ta; ta must outlive every context using it. */
ag_allocator ag_testalloc_hook(ag_testalloc *ta);
/* Empty function called on each injected failure: a place for a breakpoint. */
void ag_testalloc_breakpoint(void);

#ifdef __cplusplus
}
#endif
#endif
