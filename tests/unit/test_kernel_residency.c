/* Kernel mode: the callable residency cache against a fake device: content
 * identity (hash, length and bytes), sequential ids, hits even when full,
 * COUNT/BYTES limits that leave residents intact, staging conflicts, a forced
 * hash collision, stale and not-resident handles, every row of the rollback
 * table, a device failure at every call, and host allocation failures. */
#include "support/agtest.h"

#include "kernel/kernel_internal.h"

#define assert_st(got, want) assert_int_equal((int)(got), (int)(want))

/* ---------------------------------------------------------------- fake device */

typedef struct fdev {
    uint64_t calls;   /* every op call */
    uint64_t fail_at; /* fail the Nth call (1-based), 0 never */
    int fail_waits;   /* additionally fail this many waits */
    uint64_t allocs, frees, copies, copy_bytes, patches;
    void *blocks[8];
    size_t nblocks;
} fdev;

static bool fail_now(fdev *d)
{
    return ++d->calls == d->fail_at;
}

static ag_status f_allocate(void *ud, uint64_t bytes, uint64_t *addr)
{
    fdev *d = ud;
    if (fail_now(d))
        return AG_ENOMEM;
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    assert_non_null(p);
    d->blocks[d->nblocks++] = p;
    d->allocs++;
    *addr = (uint64_t)(uintptr_t)p;
    return AG_OK;
}

static ag_status f_release(void *ud, uint64_t addr)
{
    fdev *d = ud;
    for (size_t k = 0; k < d->nblocks; k++)
        if (d->blocks[k] == (void *)(uintptr_t)addr) {
            free(d->blocks[k]);
            d->blocks[k] = d->blocks[--d->nblocks];
            d->frees++;
            return AG_OK;
        }
    fail_msg("release of an unknown block");
    return AG_EINTERNAL;
}

static ag_status f_copy(void *ud, uint64_t dst, const void *src, uint64_t bytes)
{
    fdev *d = ud;
    if (fail_now(d))
        return AG_EDEVICE;
    memcpy((void *)(uintptr_t)dst, src, bytes);
    d->copies++;
    d->copy_bytes += bytes;
    return AG_OK;
}

static ag_status f_patch(void *ud, const ag_residency_entry *e)
{
    fdev *d = ud;
    if (fail_now(d))
        return AG_EDEVICE;
    unsigned char *img = (unsigned char *)(uintptr_t)e->res.device_address;
    const ag_callable_header *h = (const void *)img;
    for (int32_t k = 0; k < h->child_count; k++) {
        unsigned char *c = img + AG_CALLABLE_HEADER_BYTES + h->child_offsets[k];
        uint64_t v = (uint64_t)(uintptr_t)(c + AG_CORE_BINARY_OFFSET);
        memcpy(c + offsetof(ag_core_callable_header, resolved_addr), &v, 8);
    }
    d->patches++;
    return AG_OK;
}

static ag_status f_wait(void *ud)
{
    fdev *d = ud;
    if (fail_now(d))
        return AG_EDEVICE;
    if (d->fail_waits > 0) {
        d->fail_waits--;
        return AG_EDEVICE;
    }
    return AG_OK;
}

static ag_residency_ops fops(fdev *d)
{
    ag_residency_ops o = {d, f_allocate, f_release, f_copy, f_patch, f_wait};
    return o;
}

static void fdev_done(fdev *d)
{
    for (size_t k = 0; k < d->nblocks; k++)
        free(d->blocks[k]);
    d->nblocks = 0;
}

/* ---------------------------------------------------------------- images */

static const ag_arg_dir sig[] = {AG_ARG_IN, AG_ARG_OUT, AG_ARG_SCALAR};

/* An image whose binary holds `seed` repeated: distinct seeds, distinct content. */
static void *image(uint32_t binary_size, unsigned seed, uint32_t nchildren, size_t *size)
{
    unsigned char *b = malloc(binary_size ? binary_size : 1);
    memset(b, (int)(seed & 0xff), binary_size);
    if (binary_size >= 4)
        memcpy(b, &seed, 4);
    ag_callable_child ch[2] = {{.func_id = 1, .binary = b, .binary_size = binary_size < 8 ? binary_size : 8},
                               {.func_id = 2, .signature = sig, .sig_count = 2}};
    ag_callable_desc d = {.func_name = "ag.fill", .signature = sig, .sig_count = 3, .binary = b,
                          .binary_size = binary_size, .children = ch, .child_count = nchildren};
    assert_st(ag_callable_image_size(NULL, &d, size), AG_OK);
    void *img = aligned_alloc(64, (*size + 63) / 64 * 64);
    assert_st(ag_callable_write(NULL, &d, img, *size), AG_OK);
    free(b);
    return img;
}

typedef struct fixture {
    ag_ctx *ctx;
    fdev dev;
    ag_residency_ops ops;
    ag_residency c;
} fixture;

static void open_cache(fixture *f, uint32_t max_ids, uint64_t bytes, uint64_t gen)
{
    memset(f, 0, sizeof *f);
    f->ctx = agtest_ctx();
    f->ops = fops(&f->dev);
    assert_st(ag_residency_init(f->ctx, &f->c, max_ids, bytes), AG_OK);
    assert_st(ag_residency_open(&f->c, &f->ops, gen), AG_OK);
}

static void close_cache(fixture *f)
{
    assert_st(ag_residency_close(&f->c, &f->ops), AG_OK);
    assert_st(ag_residency_release_descriptors(&f->c, &f->ops), AG_OK);
    ag_residency_free(&f->c);
    assert_int_equal(f->dev.nblocks, 0);
    fdev_done(&f->dev);
    ag_ctx_destroy(f->ctx);
}

/* stage + commit; returns the status of stage. */
static ag_status admit(fixture *f, const void *img, size_t size, ag_callable_handle *h, bool *hit)
{
    bool poison = false;
    ag_status st = ag_residency_stage(&f->c, &f->ops, img, size, h, hit, &poison);
    assert_false(poison);
    if (st == AG_OK && !*hit)
        ag_residency_commit(&f->c, h->callable_id);
    return st;
}

static const ag_kernel_residency *slot(const fixture *f, int32_t id)
{
    return (const ag_kernel_residency *)(uintptr_t)(f->c.descriptors + (uint64_t)id * 32);
}

/* ---------------------------------------------------------------- tests */

static void miss_uploads_image_descriptor_and_patches_children(void **state)
{
    (void)state;
    fixture f;
    open_cache(&f, 64, 1 << 20, 17);
    size_t size;
    unsigned char *img = image(100, 1, 2, &size);
    unsigned char *orig = malloc(size);
    memcpy(orig, img, size);
    ag_callable_handle h;
    bool hit;
    assert_st(admit(&f, img, size, &h, &hit), AG_OK);
    assert_false(hit);
    assert_int_equal(h.callable_id, 0);
    assert_int_equal(h.generation, 17);
    assert_memory_equal(img, orig, size); /* the caller's bytes are never patched */
    const ag_kernel_residency *r = slot(&f, 0);
    assert_int_equal(r->generation, 17);
    assert_int_equal(r->callable_id, 0);
    assert_int_equal(r->bytes, size);
    assert_int_equal(r->reserved, 0);
    assert_int_equal(r->device_address, f.c.arena); /* the first image starts the arena */
    const unsigned char *dev = (const void *)(uintptr_t)r->device_address;
    const ag_callable_header *dh = (const void *)dev;
    for (int k = 0; k < 2; k++) {
        uint64_t child = r->device_address + AG_CALLABLE_HEADER_BYTES + dh->child_offsets[k];
        ag_core_callable_header core;
        memcpy(&core, (const void *)(uintptr_t)child, sizeof core);
        assert_int_equal(core.resolved_addr, child + AG_CORE_BINARY_OFFSET);
    }
    assert_memory_equal(dev, orig, AG_CALLABLE_HEADER_BYTES); /* header untouched on device */
    /* Accounting: 64-aligned charge, sum of sizes, ready count. */
    assert_int_equal(ag_residency_count(&f.c), 1);
    assert_int_equal(ag_residency_bytes(&f.c), (size + 63) / 64 * 64);
    assert_int_equal(ag_residency_host_bytes(&f.c), size);
    /* A second, different image is appended 64-aligned after the first. */
    size_t size2;
    void *img2 = image(77, 2, 0, &size2);
    ag_callable_handle h2;
    assert_st(admit(&f, img2, size2, &h2, &hit), AG_OK);
    assert_int_equal(h2.callable_id, 1);
    assert_int_equal(slot(&f, 1)->device_address, f.c.arena + (size + 63) / 64 * 64);
    assert_int_equal(slot(&f, 1)->device_address % 64, 0);
    const ag_residency_entry *e;
    assert_st(ag_residency_resolve(&f.c, h2, &e), AG_OK);
    assert_int_equal(e->res.device_address, slot(&f, 1)->device_address);
    free(img);
    free(img2);
    free(orig);
    close_cache(&f);
}

static void identical_content_hits_even_when_full(void **state)
{
    (void)state;
    fixture f;
    open_cache(&f, 3, 1 << 20, 5);
    size_t size;
    void *imgs[3];
    ag_callable_handle hs[3];
    bool hit;
    for (unsigned k = 0; k < 3; k++) {
        imgs[k] = image(64, k + 10, 0, &size);
        assert_st(admit(&f, imgs[k], size, &hs[k], &hit), AG_OK);
        assert_int_equal(hs[k].callable_id, (int)k);
    }
    uint64_t copies = f.dev.copies, used = ag_residency_bytes(&f.c);
    /* The same content from another buffer (identity is content, not pointer). */
    void *again = aligned_alloc(64, (size + 63) / 64 * 64);
    memcpy(again, imgs[1], size);
    ag_callable_handle h;
    assert_st(admit(&f, again, size, &h, &hit), AG_OK);
    assert_true(hit);
    assert_int_equal(h.callable_id, 1);
    assert_int_equal(h.generation, 5);
    assert_int_equal(f.dev.copies, copies); /* no upload */
    assert_int_equal(ag_residency_bytes(&f.c), used);
    /* A new image is the 4th: refused, and the residents still hit. */
    size_t s4;
    void *img4 = image(64, 99, 0, &s4);
    assert_st(admit(&f, img4, s4, &h, &hit), AG_KERNEL_ERR_COUNT_EXCEEDED);
    assert_int_equal(h.callable_id, -1);
    assert_int_equal(h.generation, 0);
    assert_int_equal(ag_residency_count(&f.c), 3);
    assert_int_equal(ag_residency_bytes(&f.c), used);
    for (unsigned k = 0; k < 3; k++) {
        assert_st(admit(&f, imgs[k], size, &h, &hit), AG_OK);
        assert_true(hit);
        assert_int_equal(h.callable_id, (int)k);
    }
    for (unsigned k = 0; k < 3; k++)
        free(imgs[k]);
    free(again);
    free(img4);
    close_cache(&f);
}

/* The 65th unique image with the default 64 slots. */
static void sixty_fifth_image_is_count_exceeded(void **state)
{
    (void)state;
    fixture f;
    open_cache(&f, 64, UINT64_C(512) << 20, 7);
    ag_callable_handle h;
    bool hit;
    size_t size;
    for (unsigned k = 0; k < 64; k++) {
        void *img = image(16, k, 0, &size);
        assert_st(admit(&f, img, size, &h, &hit), AG_OK);
        assert_int_equal(h.callable_id, (int)k); /* sequential ids */
        free(img);
    }
    void *img = image(16, 64, 0, &size);
    ag_ctx_clear_error(f.ctx);
    assert_st(admit(&f, img, size, &h, &hit), AG_KERNEL_ERR_COUNT_EXCEEDED);
    assert_errmsg(f.ctx, "number 65");
    assert_int_equal(ag_residency_count(&f.c), 64);
    const ag_residency_entry *e;
    ag_callable_handle h0 = {.callable_id = 0, .generation = 7};
    assert_st(ag_residency_resolve(&f.c, h0, &e), AG_OK);
    free(img);
    close_cache(&f);
}

static void byte_budget_single_and_cumulative(void **state)
{
    (void)state;
    size_t size;
    void *img = image(1000, 1, 0, &size);
    uint64_t charge = (size + 63) / 64 * 64;
    fixture f;
    /* Room for exactly two charges. */
    open_cache(&f, 64, 2 * charge, 3);
    ag_callable_handle h;
    bool hit;
    /* A single image larger than the whole budget, refused before it is read. */
    assert_st(admit(&f, img, 2 * charge + 1, &h, &hit), AG_KERNEL_ERR_BYTES_EXCEEDED);
    assert_int_equal(f.dev.allocs, 1); /* descriptors only: no arena yet */
    assert_st(admit(&f, img, size, &h, &hit), AG_OK);
    void *img2 = image(1000, 2, 0, &size);
    assert_st(admit(&f, img2, size, &h, &hit), AG_OK);
    uint64_t copies = f.dev.copies;
    void *img3 = image(1000, 3, 0, &size);
    assert_st(admit(&f, img3, size, &h, &hit), AG_KERNEL_ERR_BYTES_EXCEEDED);
    assert_int_equal(f.dev.copies, copies); /* nothing uploaded */
    assert_int_equal(ag_residency_bytes(&f.c), 2 * charge);
    assert_int_equal(ag_residency_count(&f.c), 2);
    /* Existing entries intact: both still hit; the arena was never grown. */
    assert_st(admit(&f, img, size, &h, &hit), AG_OK);
    assert_true(hit);
    assert_int_equal(f.dev.allocs, 2);
    free(img);
    free(img2);
    free(img3);
    close_cache(&f);
}

static ag_hash128 constant_hash(const void *p, size_t n)
{
    (void)p;
    (void)n;
    ag_hash128 h = {42, 42};
    return h;
}

static void same_hash_different_bytes_is_refused(void **state)
{
    (void)state;
    fixture f;
    open_cache(&f, 64, 1 << 20, 3);
    f.c.hash = constant_hash; /* every image collides */
    size_t s1, s2, s3;
    void *a = image(64, 1, 0, &s1);
    void *b = image(64, 2, 0, &s2); /* same length, different bytes */
    void *c = image(96, 3, 0, &s3); /* different length */
    ag_callable_handle h;
    bool hit;
    assert_st(admit(&f, a, s1, &h, &hit), AG_OK);
    uint64_t copies = f.dev.copies;
    ag_ctx_clear_error(f.ctx);
    assert_st(admit(&f, b, s2, &h, &hit), AG_KERNEL_ERR_INVALID_STATE);
    assert_errmsg(f.ctx, "never reused on the hash alone");
    assert_int_equal(h.callable_id, -1);
    assert_st(admit(&f, c, s3, &h, &hit), AG_KERNEL_ERR_INVALID_STATE);
    assert_int_equal(f.dev.copies, copies);
    assert_int_equal(ag_residency_count(&f.c), 1);
    /* The true owner of the hash still hits. */
    assert_st(admit(&f, a, s1, &h, &hit), AG_OK);
    assert_true(hit);
    free(a);
    free(b);
    free(c);
    close_cache(&f);
}

static void staging_conflicts(void **state)
{
    (void)state;
    fixture f;
    open_cache(&f, 64, 1 << 20, 3);
    size_t s1, s2;
    void *a = image(64, 1, 0, &s1);
    void *b = image(64, 2, 0, &s2);
    ag_callable_handle h, h2;
    bool hit, poison;
    assert_st(ag_residency_stage(&f.c, &f.ops, a, s1, &h, &hit, &poison), AG_OK);
    assert_int_equal(h.callable_id, 0);
    /* Unready: not launchable yet, not counted as resident. */
    const ag_residency_entry *e;
    assert_st(ag_residency_resolve(&f.c, h, &e), AG_KERNEL_ERR_NOT_RESIDENT);
    assert_int_equal(ag_residency_count(&f.c), 0);
    /* Identical content still staging: no id is handed out. */
    assert_st(ag_residency_stage(&f.c, &f.ops, a, s1, &h2, &hit, &poison), AG_KERNEL_ERR_INVALID_STATE);
    assert_int_equal(h2.callable_id, -1);
    /* Another image while one is pending. */
    assert_st(ag_residency_stage(&f.c, &f.ops, b, s2, &h2, &hit, &poison), AG_KERNEL_ERR_INVALID_STATE);
    /* Commit of a wrong id is ignored; rollback of the candidate returns its charge. */
    ag_residency_commit(&f.c, 5);
    assert_st(ag_residency_resolve(&f.c, h, &e), AG_KERNEL_ERR_NOT_RESIDENT);
    ag_residency_rollback(&f.c, 0);
    assert_int_equal(ag_residency_bytes(&f.c), 0);
    /* The id is issued again to the next admission. */
    assert_st(admit(&f, b, s2, &h2, &hit), AG_OK);
    assert_int_equal(h2.callable_id, 0);
    /* Committed entries are never rolled back. */
    ag_residency_rollback(&f.c, 0);
    assert_int_equal(ag_residency_count(&f.c), 1);
    free(a);
    free(b);
    close_cache(&f);
}

static void resolve_errors(void **state)
{
    (void)state;
    fixture fa, fb;
    open_cache(&fa, 64, 1 << 20, 17);
    open_cache(&fb, 64, 1 << 20, 18);
    size_t s1, s2;
    void *a = image(64, 1, 0, &s1);
    void *b = image(64, 2, 0, &s2);
    ag_callable_handle ha, hb;
    bool hit;
    assert_st(admit(&fa, a, s1, &ha, &hit), AG_OK);
    assert_st(admit(&fb, b, s2, &hb, &hit), AG_OK);
    assert_int_equal(ha.callable_id, hb.callable_id); /* same id in two contexts */
    const ag_residency_entry *e = (const void *)1;
    /* A handle from another context with the same id: stale. */
    assert_st(ag_residency_resolve(&fb.c, ha, &e), AG_KERNEL_ERR_STALE);
    assert_null(e);
    assert_st(ag_residency_resolve(&fb.c, hb, &e), AG_OK);
    /* Not resident, malformed, beyond the slots. */
    ag_callable_handle h = {.callable_id = 5, .generation = 18};
    assert_st(ag_residency_resolve(&fb.c, h, &e), AG_KERNEL_ERR_NOT_RESIDENT);
    h.callable_id = -1;
    assert_st(ag_residency_resolve(&fb.c, h, &e), AG_KERNEL_ERR_INVALID_ARGUMENT);
    h.callable_id = 0;
    h.generation = 0;
    assert_st(ag_residency_resolve(&fb.c, h, &e), AG_KERNEL_ERR_INVALID_ARGUMENT);
    h.callable_id = 64;
    h.generation = 18;
    assert_st(ag_residency_resolve(&fb.c, h, &e), AG_KERNEL_ERR_COUNT_EXCEEDED);
    /* Close retires the slot on the device and refuses every host lookup. */
    assert_st(ag_residency_close(&fb.c, &fb.ops), AG_OK);
    assert_int_equal(slot(&fb, 0)->generation, AG_RESIDENCY_RETIRED_GENERATION);
    assert_int_equal(slot(&fb, 0)->callable_id, 0);
    assert_st(ag_residency_resolve(&fb.c, hb, &e), AG_KERNEL_ERR_INVALID_STATE);
    assert_st(admit(&fb, b, s2, &hb, &hit), AG_KERNEL_ERR_INVALID_STATE);
    free(a);
    free(b);
    close_cache(&fa);
    close_cache(&fb);
}

/* Rollback table: a device failure at every call of a miss leaves nothing
 * admitted, and the same stage then succeeds. */
static void device_failure_at_every_call_rolls_back(void **state)
{
    (void)state;
    size_t s0, s1;
    void *first = image(200, 1, 0, &s0);
    void *img = image(300, 2, 2, &s1);
    for (uint64_t n = 1;; n++) {
        fixture f;
        open_cache(&f, 64, 1 << 20, 9);
        ag_callable_handle h;
        bool hit, poison;
        assert_st(admit(&f, first, s0, &h, &hit), AG_OK);
        uint64_t used = ag_residency_bytes(&f.c);
        f.dev.calls = 0;
        f.dev.fail_at = n;
        ag_status st = ag_residency_stage(&f.c, &f.ops, img, s1, &h, &hit, &poison);
        bool injected = f.dev.calls >= n;
        f.dev.fail_at = 0;
        assert_false(poison);
        if (!injected) {
            assert_st(st, AG_OK);
            ag_residency_commit(&f.c, h.callable_id);
            close_cache(&f);
            assert_true(n > 4);
            break;
        }
        assert_true(st != AG_OK);
        assert_int_equal(h.callable_id, -1);
        assert_int_equal(ag_residency_bytes(&f.c), used);
        assert_int_equal(ag_residency_count(&f.c), 1);
        assert_int_equal(f.c.count, 1);
        /* Retry succeeds with the id the failed attempt would have had. */
        assert_st(admit(&f, img, s1, &h, &hit), AG_OK);
        assert_int_equal(h.callable_id, 1);
        assert_int_equal(slot(&f, 1)->generation, 9);
        close_cache(&f);
    }
    free(first);
    free(img);
}

/* When the stream cannot be shown idle after a failure, the candidate stays
 * (its memory may still be read) and the caller is told to poison. */
static void unquiesced_failure_keeps_the_candidate(void **state)
{
    (void)state;
    fixture f;
    open_cache(&f, 64, 1 << 20, 9);
    size_t s;
    void *img = image(100, 1, 0, &s);
    ag_callable_handle h;
    bool hit, poison;
    f.dev.fail_waits = 2;
    assert_st(ag_residency_stage(&f.c, &f.ops, img, s, &h, &hit, &poison), AG_EDEVICE);
    assert_true(poison);
    assert_int_equal(f.c.count, 1);
    assert_false(f.c.entries[0].ready);
    assert_non_null(f.c.entries[0].host_copy);
    assert_int_equal(ag_residency_count(&f.c), 0);
    free(img);
    close_cache(&f);
}

static void close_is_retriable(void **state)
{
    (void)state;
    fixture f;
    open_cache(&f, 64, 1 << 20, 9);
    size_t s;
    void *img = image(100, 1, 0, &s);
    ag_callable_handle h;
    bool hit;
    assert_st(admit(&f, img, s, &h, &hit), AG_OK);
    f.dev.fail_waits = 1;
    assert_st(ag_residency_close(&f.c, &f.ops), AG_EDEVICE);
    assert_true(f.c.arena != 0); /* kept for the retry */
    assert_int_equal(f.dev.frees, 0);
    free(img);
    close_cache(&f); /* retries and succeeds */
    assert_int_equal(f.dev.frees, 2);
}


static int hash_calls;
static ag_hash128 counting_hash(const void *p, size_t n)
{
    hash_calls++;
    return ag_khash_xxh3(p, n);
}

/* Rollback table: a malformed image is refused before it is hashed or
 * uploaded (reference 5.8.2 step 4 precedes steps 5-14); an unopened cache
 * (no generation) refuses everything (step 2). */
static void malformed_image_refused_before_hash_and_upload(void **state)
{
    (void)state;
    fixture f;
    open_cache(&f, 64, 1 << 20, 3);
    f.c.hash = counting_hash;
    hash_calls = 0;
    size_t s;
    unsigned char *img = image(100, 1, 2, &s);
    ag_callable_handle h;
    bool hit;
    /* A trailing byte, a bad direction, a duplicated child func id. */
    unsigned char *longer = aligned_alloc(64, (s + 1 + 63) / 64 * 64);
    memcpy(longer, img, s);
    longer[s] = 0;
    assert_st(admit(&f, longer, s + 1, &h, &hit), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_int_equal(h.callable_id, -1);
    ((ag_callable_header *)(void *)img)->signature[0] = 7;
    assert_st(admit(&f, img, s, &h, &hit), AG_KERNEL_ERR_INVALID_ARGUMENT);
    ((ag_callable_header *)(void *)img)->signature[0] = AG_ARG_IN;
    ((ag_callable_header *)(void *)img)->child_func_ids[1] = 1;
    assert_st(admit(&f, img, s, &h, &hit), AG_KERNEL_ERR_INVALID_ARGUMENT);
    assert_int_equal(hash_calls, 0);
    assert_int_equal(f.dev.allocs, 1); /* the descriptor table only: no arena */
    assert_int_equal(f.dev.copies, 1); /* its clearing only */
    assert_int_equal(f.c.count, 0);
    assert_int_equal(ag_residency_bytes(&f.c), 0);
    ((ag_callable_header *)(void *)img)->child_func_ids[1] = 2;
    assert_st(admit(&f, img, s, &h, &hit), AG_OK);
    assert_int_equal(hash_calls, 1);
    assert_int_equal(h.callable_id, 0);

    ag_residency unopened;
    assert_st(ag_residency_init(f.ctx, &unopened, 4, 1 << 20), AG_OK);
    bool poison;
    assert_st(ag_residency_stage(&unopened, &f.ops, img, s, &h, &hit, &poison), AG_KERNEL_ERR_INVALID_STATE);
    assert_int_equal(h.callable_id, -1);
    ag_residency_free(&unopened);
    free(img);
    free(longer);
    close_cache(&f);
}

/* Close clears the host metadata once the device side is settled: the
 * accounting reads zero and no lookup succeeds. */
static void closed_cache_accounts_nothing(void **state)
{
    (void)state;
    fixture f;
    open_cache(&f, 64, 1 << 20, 3);
    size_t s1, s2;
    void *a = image(64, 1, 0, &s1);
    void *b = image(64, 2, 1, &s2);
    ag_callable_handle ha, hb;
    bool hit;
    assert_st(admit(&f, a, s1, &ha, &hit), AG_OK);
    assert_st(admit(&f, b, s2, &hb, &hit), AG_OK);
    assert_int_equal(ag_residency_count(&f.c), 2);
    assert_st(ag_residency_close(&f.c, &f.ops), AG_OK);
    assert_int_equal(ag_residency_count(&f.c), 0);
    assert_int_equal(ag_residency_bytes(&f.c), 0);
    assert_int_equal(ag_residency_host_bytes(&f.c), 0);
    assert_int_equal(f.c.arena, 0);
    const ag_residency_entry *e;
    assert_st(ag_residency_resolve(&f.c, hb, &e), AG_KERNEL_ERR_INVALID_STATE);
    /* The device slots stay retired (a captured packet finds them). */
    assert_int_equal(slot(&f, 1)->generation, AG_RESIDENCY_RETIRED_GENERATION);
    assert_int_equal(slot(&f, 1)->callable_id, 1);
    free(a);
    free(b);
    close_cache(&f);
}

typedef struct oom_case {
    void *img;
    size_t size;
} oom_case;

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    oom_case *oc = ud;
    fdev d = {0};
    ag_residency_ops o = fops(&d);
    ag_residency c;
    ag_status st = ag_residency_init(ctx, &c, 64, 1 << 20);
    if (st != AG_OK)
        return st;
    ag_callable_handle h;
    bool hit, poison;
    st = ag_residency_open(&c, &o, 3);
    if (st == AG_OK)
        st = ag_residency_stage(&c, &o, oc->img, oc->size, &h, &hit, &poison);
    if (st == AG_OK)
        ag_residency_commit(&c, h.callable_id);
    assert_int_equal(ag_residency_count(&c), st == AG_OK ? 1 : 0);
    assert_st(ag_residency_close(&c, &o), AG_OK);
    assert_st(ag_residency_release_descriptors(&c, &o), AG_OK);
    ag_residency_free(&c);
    assert_int_equal(d.nblocks, 0);
    return st;
}

static void host_allocation_failures_leak_nothing(void **state)
{
    (void)state;
    oom_case oc;
    oc.img = image(500, 4, 1, &oc.size);
    assert_true(AG_TEST_OOM_SWEEP(oom_body, &oc) > 1);
    free(oc.img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(miss_uploads_image_descriptor_and_patches_children),
        cmocka_unit_test(identical_content_hits_even_when_full),
        cmocka_unit_test(sixty_fifth_image_is_count_exceeded),
        cmocka_unit_test(byte_budget_single_and_cumulative),
        cmocka_unit_test(same_hash_different_bytes_is_refused),
        cmocka_unit_test(staging_conflicts),
        cmocka_unit_test(resolve_errors),
        cmocka_unit_test(device_failure_at_every_call_rolls_back),
        cmocka_unit_test(unquiesced_failure_keeps_the_candidate),
        cmocka_unit_test(close_is_retriable),
        cmocka_unit_test(host_allocation_failures_leak_nothing),
        cmocka_unit_test(malformed_image_refused_before_hash_and_upload),
        cmocka_unit_test(closed_cache_accounts_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
