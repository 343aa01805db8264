/* The context: allocator hook, last error message and the error funnel
 * (ag__error, where every AG_ERR ends: the place for a breakpoint). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AG_ALLOW_RAW_MALLOC /* the default hook is the one place libc allocation is used */
#include "core/internal.h"

struct ag_ctx {
    ag_allocator alloc;
    ag_status last;
    char errmsg[AG_ERRMSG_MAX];
    void (*err_cb)(void *ud, ag_status st, const char *msg);
    void *err_ud;
    const char *err_file; /* source origin of the last error (AG_ERR call site) */
    int err_line;
};

#if defined(__SANITIZE_ADDRESS__)
#define AG_ASAN_ 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AG_ASAN_ 1
#endif
#endif

#ifdef AG_ASAN_
/* AddressSanitizer aborts where libc's allocator answers NULL (a request
 * above its size limit, or one the system cannot map): in the sanitizer
 * build too, a host out of memory is the same clean error (a simulated
 * device as large as the address space is backed by host memory).  Read
 * by the sanitizer's runtime at start; ASAN_OPTIONS still overrides it. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}
#endif

static void *libc_realloc(void *ud, void *ptr, size_t old_size, size_t new_size)
{
    (void)ud;
    (void)old_size;
    if (new_size == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, new_size);
}

const char *ag_status_str(ag_status st)
{
    switch (st) {
#define AG_STATUS_CASE_(name, value, text) \
    case name:                             \
        return text;
        AG_STATUS_LIST(AG_STATUS_CASE_)
#undef AG_STATUS_CASE_
    }
    return "unknown status";
}

const char *ag_version(void)
{
    return AG_VERSION_STRING;
}

ag_ctx *ag_ctx_create(const ag_allocator *alloc)
{
    ag_allocator a = {sizeof(ag_allocator), libc_realloc, NULL};
    if (alloc && alloc->realloc)
        a = *alloc;
    ag_ctx *ctx = a.realloc(a.ud, NULL, 0, sizeof *ctx);
    if (!ctx)
        return NULL;
    memset(ctx, 0, sizeof *ctx);
    ctx->alloc = a;
    return ctx;
}

void ag_ctx_destroy(ag_ctx *ctx)
{
    if (!ctx)
        return;
    ag_allocator a = ctx->alloc;
    a.realloc(a.ud, ctx, sizeof *ctx, 0);
}

const char *ag_ctx_errmsg(const ag_ctx *ctx)
{
    return ctx ? ctx->errmsg : "";
}

ag_status ag_ctx_last_status(const ag_ctx *ctx)
{
    return ctx ? ctx->last : AG_OK;
}

void ag_ctx_clear_error(ag_ctx *ctx)
{
    ctx->last = AG_OK;
    ctx->errmsg[0] = '\0';
    ctx->err_file = NULL;
    ctx->err_line = 0;
}

void ag_ctx_error_save(const ag_ctx *ctx, ag_err_saved *out)
{
    out->last = ctx->last;
    out->file = ctx->err_file;
    out->line = ctx->err_line;
    memcpy(out->msg, ctx->errmsg, sizeof out->msg);
}

void ag_ctx_error_restore(ag_ctx *ctx, const ag_err_saved *saved)
{
    ctx->last = saved->last;
    ctx->err_file = saved->file;
    ctx->err_line = saved->line;
    memcpy(ctx->errmsg, saved->msg, sizeof ctx->errmsg);
}

void ag_ctx_error_origin(const ag_ctx *ctx, const char **file, int *line)
{
    *file = ctx->err_file ? ctx->err_file : "";
    *line = ctx->err_line;
}

void ag_ctx_set_error_callback(ag_ctx *ctx, void (*cb)(void *ud, ag_status st, const char *msg), void *ud)
{
    ctx->err_cb = cb;
    ctx->err_ud = ud;
}

ag_status ag__error(ag_ctx *ctx, ag_status code, const char *file, int line, const char *fmt, ...)
{
    if (!ctx)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->errmsg, sizeof ctx->errmsg, fmt, ap);
    va_end(ap);
    ctx->last = code;
    ctx->err_file = file;
    ctx->err_line = line;
    if (ctx->err_cb)
        ctx->err_cb(ctx->err_ud, code, ctx->errmsg);
    return code;
}

void ag__assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "aliasguard: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}

/* ---- allocation through the hook ---- */

void *ag_alloc(ag_ctx *ctx, size_t size)
{
    if (size == 0)
        size = 1;
    return ctx->alloc.realloc(ctx->alloc.ud, NULL, 0, size);
}

void *ag_calloc(ag_ctx *ctx, size_t count, size_t size)
{
    if (size != 0 && count > SIZE_MAX / size)
        return NULL;
    void *p = ag_alloc(ctx, count * size);
    if (p)
        memset(p, 0, count * size == 0 ? 1 : count * size);
    return p;
}

void *ag_realloc(ag_ctx *ctx, void *p, size_t old_size, size_t new_size)
{
    if (!p)
        return ag_alloc(ctx, new_size);
    if (new_size == 0)
        new_size = 1;
    return ctx->alloc.realloc(ctx->alloc.ud, p, old_size ? old_size : 1, new_size);
}

void ag_free(ag_ctx *ctx, void *p, size_t size)
{
    if (p)
        ctx->alloc.realloc(ctx->alloc.ud, p, size ? size : 1, 0);
}

void ag_ctx_free(ag_ctx *ctx, void *ptr, size_t size)
{
    ag_free(ctx, ptr, size);
}

char *ag_strdup(ag_ctx *ctx, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = ag_alloc(ctx, n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* ---- sinks ---- */

static ag_status file_write(void *ud, const void *data, size_t len)
{
    return fwrite(data, 1, len, (FILE *)ud) == len ? AG_OK : AG_EIO;
}

ag_sink ag_sink_file(FILE *f)
{
    ag_sink s = {file_write, f};
    return s;
}

void ag_membuf_init(ag_membuf *mb, ag_ctx *ctx)
{
    mb->ctx = ctx;
    mb->data = NULL;
    mb->len = 0;
    mb->cap = 0;
}

static ag_status membuf_write(void *ud, const void *data, size_t len)
{
    ag_membuf *mb = ud;
    if (len > SIZE_MAX - mb->len - 1)
        return AG_ENOMEM;
    if (mb->len + len + 1 > mb->cap) {
        size_t cap = mb->cap ? mb->cap : 256;
        while (cap < mb->len + len + 1)
            cap = cap > SIZE_MAX / 2 ? mb->len + len + 1 : cap * 2;
        char *d = ag_realloc(mb->ctx, mb->data, mb->cap, cap);
        if (!d)
            return AG_OOM(mb->ctx);
        mb->data = d;
        mb->cap = cap;
    }
    memcpy(mb->data + mb->len, data, len);
    mb->len += len;
    mb->data[mb->len] = '\0';
    return AG_OK;
}

ag_sink ag_sink_membuf(ag_membuf *mb)
{
    ag_sink s = {membuf_write, mb};
    return s;
}

void ag_membuf_free(ag_membuf *mb)
{
    ag_free(mb->ctx, mb->data, mb->cap);
    mb->data = NULL;
    mb->len = mb->cap = 0;
}

/* ---- files ---- */

ag_status ag_read_file(ag_ctx *ctx, const char *path, char **buf, size_t *len)
{
    int is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return AG_ERR(ctx, AG_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *d = ag_alloc(ctx, cap);
    if (!d) {
        if (!is_stdin)
            fclose(f);
        return AG_OOM(ctx);
    }
    for (;;) {
        if (n + 1 >= cap) {
            size_t ncap = cap * 2;
            char *nd = ncap > cap ? ag_realloc(ctx, d, cap, ncap) : NULL;
            if (!nd) {
                ag_free(ctx, d, cap);
                if (!is_stdin)
                    fclose(f);
                return AG_OOM(ctx);
            }
            d = nd;
            cap = ncap;
        }
        size_t got = fread(d + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    if (!is_stdin)
        fclose(f);
    if (bad) {
        ag_free(ctx, d, cap);
        return AG_ERR(ctx, AG_EIO, "%s: read error", path);
    }
    /* Shrink so the caller can free with (*len + 1). */
    char *fit = ag_realloc(ctx, d, cap, n + 1);
    if (!fit) {
        ag_free(ctx, d, cap);
        return AG_OOM(ctx);
    }
    fit[n] = '\0';
    *buf = fit;
    *len = n;
    return AG_OK;
}

/* ---- allocation-failure injection ---- */

void ag_testalloc_breakpoint(void)
{
    /* Intentionally empty: set a breakpoint here to stop at injected failures. */
}

void ag_testalloc_init(ag_testalloc *ta, uint64_t fail_at, int repeat)
{
    memset(ta, 0, sizeof *ta);
    ta->fail_at = fail_at;
    ta->repeat = repeat;
}

static void *testalloc_realloc(void *ud, void *ptr, size_t old_size, size_t new_size)
{
    ag_testalloc *ta = ud;
    if (new_size == 0) {
        if (ptr) {
            ta->live_blocks--;
            ta->live_bytes -= old_size;
            free(ptr);
        }
        return NULL;
    }
    ta->calls++;
    if (ta->fail_at && (ta->calls == ta->fail_at || (ta->repeat && ta->calls > ta->fail_at))) {
        ta->nfail++;
        ag_testalloc_breakpoint();
        return NULL;
    }
    void *p = realloc(ptr, new_size);
    if (!p)
        return NULL;
    if (!ptr)
        ta->live_blocks++;
    else
        ta->live_bytes -= old_size;
    ta->live_bytes += new_size;
    if (ta->live_bytes > ta->peak_bytes)
        ta->peak_bytes = ta->live_bytes;
    return p;
}

ag_allocator ag_testalloc_hook(ag_testalloc *ta)
{
    ag_allocator a = {sizeof(ag_allocator), testalloc_realloc, ta};
    return a;
}
