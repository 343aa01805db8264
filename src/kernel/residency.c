/* The kernel callable residency cache (seed 004): callables are identified by
 * content (XXH3-128 hash, length and a byte comparison: never the hash
 * alone), get sequential ids and {id, generation} handles, and live in one
 * device arena allocated at the first miss and never grown.  Staging uploads
 * an unready candidate that prepare then commits or rolls back; capacity
 * refusals never evict or disturb existing residents. */
#include <xxhash.h>

#include "kernel/kernel_internal.h"

_Static_assert(sizeof(ag_kernel_residency) == 32, "descriptor size");

ag_hash128 ag_khash_xxh3(const void *p, size_t n)
{
    XXH128_hash_t h = XXH3_128bits(p, n);
    ag_hash128 r = {h.low64, h.high64};
    return r;
}

static uint64_t charge_of(uint64_t bytes)
{
    return (bytes + AG_CALLABLE_ALIGN - 1) / AG_CALLABLE_ALIGN * AG_CALLABLE_ALIGN;
}

ag_status ag_residency_init(ag_ctx *ctx, ag_residency *c, uint32_t max_ids, uint64_t byte_limit)
{
    memset(c, 0, sizeof *c);
    c->ctx = ctx;
    c->max_ids = max_ids;
    c->byte_limit = byte_limit;
    c->hash = ag_khash_xxh3;
    c->entries = ag_calloc(ctx, max_ids, sizeof *c->entries);
    if (!c->entries)
        return AG_OOM(ctx);
    return AG_OK;
}

static void drop_entry(ag_residency *c, ag_residency_entry *e)
{
    ag_free(c->ctx, e->host_copy, e->res.bytes);
    memset(e, 0, sizeof *e);
}

void ag_residency_free(ag_residency *c)
{
    if (!c->entries)
        return;
    for (uint32_t k = 0; k < c->count; k++)
        drop_entry(c, &c->entries[k]);
    ag_free(c->ctx, c->entries, (size_t)c->max_ids * sizeof *c->entries);
    c->entries = NULL;
    c->count = 0;
}

/* Source of the descriptor-table clearing: static, so it outlives any
 * queued copy. */
static const ag_kernel_residency zero_slots[64];

ag_status ag_residency_open(ag_residency *c, const ag_residency_ops *ops, uint64_t generation)
{
    if (c->generation != 0 || c->descriptors != 0 || generation == 0)
        return AG_ERR(c->ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE), "residency: opened twice or with generation 0");
    uint64_t bytes = (uint64_t)c->max_ids * sizeof(ag_kernel_residency);
    uint64_t addr = 0;
    ag_status st = ops->allocate(ops->ud, bytes, &addr);
    if (st != AG_OK)
        return AG_ERR(c->ctx, st, "residency: allocating the %llu-byte descriptor table failed (%s)",
                      (unsigned long long)bytes, ag_status_str(st));
    /* Kept from here on: close and destroy release it, after the stream has
     * been shown idle. */
    c->descriptors = addr;
    /* Zeroed slots read as "not resident" on the device. */
    for (uint64_t off = 0; off < bytes && st == AG_OK; off += sizeof zero_slots) {
        uint64_t n = bytes - off < sizeof zero_slots ? bytes - off : sizeof zero_slots;
        st = ops->copy_h2d(ops->ud, addr + off, zero_slots, n);
    }
    if (st == AG_OK)
        st = ops->wait(ops->ud);
    if (st != AG_OK)
        return AG_ERR(c->ctx, st, "residency: clearing the descriptor table failed (%s)", ag_status_str(st));
    c->generation = generation;
    return AG_OK;
}

/* Removes the newest entry, returning its charge. */
static void remove_candidate(ag_residency *c)
{
    ag_residency_entry *e = &c->entries[c->count - 1];
    c->used -= e->charged;
    drop_entry(c, e);
    c->count--;
}

ag_status ag_residency_stage(ag_residency *c, const ag_residency_ops *ops, const void *image, size_t bytes,
                             ag_callable_handle *out, bool *hit, bool *poison)
{
    out->callable_id = -1;
    out->reserved = 0;
    out->generation = 0;
    *hit = false;
    *poison = false;
    if (c->closing || c->generation == 0)
        return AG_ERR(c->ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE), "residency: %s",
                      c->closing ? "the cache is closing" : "the cache has no generation yet");
    if (bytes > c->byte_limit)
        return AG_ERR(c->ctx, AG_KST(AG_KERNEL_ERR_BYTES_EXCEEDED),
                      "residency: a callable of %zu bytes exceeds the %llu-byte arena", bytes,
                      (unsigned long long)c->byte_limit);
    ag_callable_info info;
    AG_TRY(ag_callable_validate(c->ctx, image, bytes, &info));
    ag_hash128 hash = c->hash(image, bytes);

    for (uint32_t k = 0; k < c->count; k++) {
        ag_residency_entry *e = &c->entries[k];
        if (e->hash.lo != hash.lo || e->hash.hi != hash.hi)
            continue;
        if (e->res.bytes != bytes || memcmp(e->host_copy, image, bytes) != 0)
            return AG_ERR(c->ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE),
                          "residency: callable '%s' has the content hash of resident id %d but different bytes; "
                          "code is never reused on the hash alone",
                          info.func_name, e->res.callable_id);
        if (!e->ready)
            return AG_ERR(c->ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE),
                          "residency: callable '%s' is identical to id %d, which is still being staged",
                          info.func_name, e->res.callable_id);
        out->callable_id = e->res.callable_id;
        out->generation = e->res.generation;
        *hit = true;
        return AG_OK;
    }
    if (c->count > 0 && !c->entries[c->count - 1].ready)
        return AG_ERR(c->ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE),
                      "residency: id %d is staged but neither committed nor rolled back",
                      c->entries[c->count - 1].res.callable_id);
    if (c->count >= c->max_ids)
        return AG_ERR(c->ctx, AG_KST(AG_KERNEL_ERR_COUNT_EXCEEDED),
                      "residency: callable '%s' would be number %u; the cache holds %u (no eviction)",
                      info.func_name, c->count + 1, c->max_ids);
    uint64_t charged = charge_of(bytes);
    if (charged > c->byte_limit - c->used)
        return AG_ERR(c->ctx, AG_KST(AG_KERNEL_ERR_BYTES_EXCEEDED),
                      "residency: callable '%s' needs %llu bytes; %llu of %llu are in use", info.func_name,
                      (unsigned long long)charged, (unsigned long long)c->used, (unsigned long long)c->byte_limit);

    ag_residency_entry *e = &c->entries[c->count];
    memset(e, 0, sizeof *e);
    e->host_copy = ag_alloc(c->ctx, bytes);
    if (!e->host_copy)
        return AG_OOM(c->ctx);
    memcpy(e->host_copy, image, bytes);
    e->hash = hash;
    e->info = info;
    e->charged = charged;
    e->res.callable_id = (int32_t)c->count;
    e->res.generation = c->generation;
    e->res.bytes = bytes;
    e->descriptor_address = c->descriptors + (uint64_t)c->count * sizeof(ag_kernel_residency);
    c->count++;
    c->used += charged;

    ag_status st = AG_OK;
    const char *step = "allocating the arena";
    if (!c->arena) {
        uint64_t addr = 0;
        if ((st = ops->allocate(ops->ud, c->byte_limit, &addr)) == AG_OK)
            c->arena = addr;
    }
    /* Every source below is owned by the cache (the host copy, the entry),
     * never the caller's image, so a copy still queued after a failure reads
     * nothing the caller may free. */
    if (st == AG_OK) {
        e->res.device_address = c->arena + (c->used - charged);
        step = "uploading the image";
        st = ops->copy_h2d(ops->ud, e->res.device_address, e->host_copy, bytes);
    }
    /* Each child's dispatch address is patched in the device copy only; the
     * caller's bytes and the host copy stay as given (content identity). */
    if (st == AG_OK && info.child_count > 0) {
        step = "patching the children's dispatch addresses";
        st = ops->patch_children(ops->ud, e);
    }
    if (st == AG_OK) {
        step = "uploading the descriptor";
        st = ops->copy_h2d(ops->ud, e->descriptor_address, &e->res, sizeof e->res);
    }
    if (st == AG_OK) {
        step = "waiting for the upload";
        st = ops->wait(ops->ud);
    }
    if (st != AG_OK) {
        int32_t id = e->res.callable_id;
        if (ops->wait(ops->ud) != AG_OK) {
            *poison = true;
            return AG_ERR(c->ctx, st,
                          "residency: %s for callable '%s' (id %d) failed (%s) and the stream could not be "
                          "shown idle; the candidate stays unready",
                          step, info.func_name, id, ag_status_str(st));
        }
        remove_candidate(c);
        return AG_ERR(c->ctx, st, "residency: %s for callable '%s' (id %d) failed (%s); nothing was admitted", step,
                      info.func_name, id, ag_status_str(st));
    }
    out->callable_id = e->res.callable_id;
    out->generation = e->res.generation;
    return AG_OK;
}

void ag_residency_commit(ag_residency *c, int32_t id)
{
    if (c->closing || c->count == 0)
        return;
    ag_residency_entry *e = &c->entries[c->count - 1];
    if (e->res.callable_id == id)
        e->ready = true;
}

void ag_residency_rollback(ag_residency *c, int32_t id)
{
    if (c->closing || c->count == 0)
        return;
    ag_residency_entry *e = &c->entries[c->count - 1];
    if (!e->ready && e->res.callable_id == id)
        remove_candidate(c);
}

ag_status ag_residency_resolve(const ag_residency *c, ag_callable_handle h, const ag_residency_entry **out)
{
    *out = NULL;
    if (c->closing)
        return AG_ERR(c->ctx, AG_KST(AG_KERNEL_ERR_INVALID_STATE), "residency: the cache is closing");
    if (h.callable_id < 0 || h.generation == 0)
        return AG_ERR(c->ctx, AG_KST(AG_KERNEL_ERR_INVALID_ARGUMENT), "residency: handle {%d, %llu} is malformed",
                      h.callable_id, (unsigned long long)h.generation);
    if ((uint32_t)h.callable_id >= c->max_ids)
        return AG_ERR(c->ctx, AG_KST(AG_KERNEL_ERR_COUNT_EXCEEDED), "residency: id %d beyond the %u slots",
                      h.callable_id, c->max_ids);
    if ((uint32_t)h.callable_id < c->count && c->entries[h.callable_id].ready) {
        const ag_residency_entry *e = &c->entries[h.callable_id];
        if (e->res.generation != h.generation)
            return AG_ERR(c->ctx, AG_KST(AG_KERNEL_ERR_STALE),
                          "residency: handle {%d, %llu} is stale: the slot holds generation %llu", h.callable_id,
                          (unsigned long long)h.generation, (unsigned long long)e->res.generation);
        *out = e;
        return AG_OK;
    }
    return AG_ERR(c->ctx, AG_KST(AG_KERNEL_ERR_NOT_RESIDENT), "residency: no callable is resident under id %d",
                  h.callable_id);
}

uint32_t ag_residency_count(const ag_residency *c)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < c->count; k++)
        n += c->entries[k].ready;
    return n;
}

uint64_t ag_residency_bytes(const ag_residency *c)
{
    return c->used;
}

uint64_t ag_residency_host_bytes(const ag_residency *c)
{
    uint64_t n = 0;
    for (uint32_t k = 0; k < c->count; k++)
        n += c->entries[k].res.bytes;
    return n;
}

/* The host metadata goes once the device side is settled (reference close:
 * "clear metadata"), so the accounting of a closed cache reads all zero. */
static void forget_entries(ag_residency *c)
{
    for (uint32_t k = 0; k < c->count; k++)
        drop_entry(c, &c->entries[k]);
    c->count = 0;
    c->used = 0;
}

ag_status ag_residency_close(ag_residency *c, const ag_residency_ops *ops)
{
    c->closing = true;
    ag_status st = AG_OK;
    /* Retiring keeps every other field, so a captured packet still finds its
     * slot and is rejected as stale, never executed.  A retry copies every
     * slot again; a slot already retired is not written again, because the
     * copies of a failed attempt may still be reading it (a copy reads its
     * host source when it runs on the stream, and a failed attempt may not
     * have waited for them). */
    for (uint32_t k = 0; k < c->count && c->descriptors && st == AG_OK; k++) {
        ag_residency_entry *e = &c->entries[k];
        if (e->res.generation != AG_RESIDENCY_RETIRED_GENERATION)
            e->res.generation = AG_RESIDENCY_RETIRED_GENERATION;
        st = ops->copy_h2d(ops->ud, e->descriptor_address, &e->res, sizeof e->res);
    }
    if (st == AG_OK)
        st = ops->wait(ops->ud);
    if (st != AG_OK)
        return AG_ERR(c->ctx, st, "residency: retiring the descriptor slots failed (%s)", ag_status_str(st));
    if (c->arena) {
        if ((st = ops->release(ops->ud, c->arena)) != AG_OK)
            return AG_ERR(c->ctx, st, "residency: releasing the arena failed (%s)", ag_status_str(st));
        c->arena = 0;
    }
    forget_entries(c);
    return AG_OK;
}

void ag_residency_abandon(ag_residency *c, const ag_residency_ops *ops)
{
    c->closing = true;
    if (c->arena && ops->release(ops->ud, c->arena) == AG_OK)
        c->arena = 0;
    forget_entries(c);
}

ag_status ag_residency_release_descriptors(ag_residency *c, const ag_residency_ops *ops)
{
    if (!c->descriptors)
        return AG_OK;
    ag_status st = ops->release(ops->ud, c->descriptors);
    if (st != AG_OK)
        return AG_ERR(c->ctx, st, "residency: releasing the descriptor table failed (%s)", ag_status_str(st));
    c->descriptors = 0;
    return AG_OK;
}
