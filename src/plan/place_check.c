/* Independent placement checker: a sweep over time keeping the live buffers
 * ordered by offset, so each arriving buffer is compared with its address
 * neighbours only.  Written apart from the solver so that a solver bug cannot
 * hide behind a shared helper. */
#include <stdlib.h>
#include <string.h>

#include "aliasguard/place.h"
#include "core/internal.h"

typedef struct ck_ent {
    uint64_t key; /* lower (arrivals) or upper (departures) */
    uint32_t id;
} ck_ent;

static int ck_ent_cmp(const void *pa, const void *pb)
{
    const ck_ent *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Live buffers sorted by (offset, id). */
static bool ck_before(const ag_buf *bufs, uint32_t a, uint32_t b)
{
    if (bufs[a].offset != bufs[b].offset)
        return bufs[a].offset < bufs[b].offset;
    return a < b;
}

static uint32_t ck_slot(const ag_buf *bufs, const uint32_t *live, uint32_t nlive, uint32_t id)
{
    uint32_t lo = 0, hi = nlive;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ck_before(bufs, live[mid], id))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static ag_status ck_overlap(ag_ctx *ctx, const ag_buf *bufs, uint32_t a, uint32_t b)
{
    if (a > b) {
        uint32_t t = a;
        a = b;
        b = t;
    }
    const ag_buf *x = &bufs[a], *y = &bufs[b];
    uint64_t step = x->lower > y->lower ? x->lower : y->lower;
    return AG_ERR(ctx, AG_EVERIFY,
                  "placement: buffer %u (bytes [%llu, %llu), steps [%llu, %llu)) and buffer %u (bytes [%llu, %llu), "
                  "steps [%llu, %llu)) overlap at step %llu",
                  a, (unsigned long long)x->offset, (unsigned long long)(x->offset + x->size),
                  (unsigned long long)x->lower, (unsigned long long)x->upper, b, (unsigned long long)y->offset,
                  (unsigned long long)(y->offset + y->size), (unsigned long long)y->lower,
                  (unsigned long long)y->upper, (unsigned long long)step);
}

ag_status ag_place_check(ag_ctx *ctx, const ag_buf *bufs, uint32_t n, uint64_t align, uint64_t capacity)
{
    if (align == 0)
        return AG_ERR(ctx, AG_EINVAL, "placement check: align must be at least 1");
    if (n > 0 && !bufs)
        return AG_ERR(ctx, AG_EINVAL, "placement check: no buffer array for %u buffers", n);
    uint32_t m = 0; /* buffers with bytes */
    for (uint32_t i = 0; i < n; i++) {
        const ag_buf *x = &bufs[i];
        if (x->upper <= x->lower)
            return AG_ERR(ctx, AG_EVERIFY, "placement: buffer %u has an empty lifetime [%llu, %llu)", i,
                          (unsigned long long)x->lower, (unsigned long long)x->upper);
        if (x->offset % align != 0)
            return AG_ERR(ctx, AG_EVERIFY, "placement: buffer %u offset %llu is not a multiple of %llu", i,
                          (unsigned long long)x->offset, (unsigned long long)align);
        if (x->size > UINT64_MAX - x->offset)
            return AG_ERR(ctx, AG_EVERIFY, "placement: buffer %u: offset %llu + size %llu overflows", i,
                          (unsigned long long)x->offset, (unsigned long long)x->size);
        if (capacity != 0 && x->offset + x->size > capacity)
            return AG_ERR(ctx, AG_EVERIFY, "placement: buffer %u (bytes [%llu, %llu)) exceeds capacity %llu", i,
                          (unsigned long long)x->offset, (unsigned long long)(x->offset + x->size),
                          (unsigned long long)capacity);
        m += x->size != 0;
    }
    if (m == 0)
        return AG_OK;
    ck_ent *arr = ag_calloc(ctx, m, sizeof *arr);
    ck_ent *dep = ag_calloc(ctx, m, sizeof *dep);
    uint32_t *live = ag_calloc(ctx, m, sizeof *live);
    ag_status st = AG_OK;
    if (!arr || !dep || !live) {
        st = AG_OOM(ctx);
        goto out;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (bufs[i].size == 0)
            continue;
        arr[k].key = bufs[i].lower;
        arr[k].id = i;
        dep[k].key = bufs[i].upper;
        dep[k].id = i;
        k++;
    }
    qsort(arr, m, sizeof *arr, ck_ent_cmp);
    qsort(dep, m, sizeof *dep, ck_ent_cmp);
    uint32_t nlive = 0, d = 0;
    for (uint32_t a = 0; a < m; a++) {
        uint32_t id = arr[a].id;
        /* half-open lifetimes: whatever ends at or before this start is gone */
        while (d < m && dep[d].key <= arr[a].key) {
            uint32_t gone = dep[d++].id;
            uint32_t at = ck_slot(bufs, live, nlive, gone);
            if (at >= nlive || live[at] != gone) {
                st = AG_ERR(ctx, AG_EINTERNAL, "placement check: buffer %u missing from the live set", gone);
                goto out;
            }
            memmove(live + at, live + at + 1, (size_t)(nlive - at - 1) * sizeof *live);
            nlive--;
        }
        uint32_t at = ck_slot(bufs, live, nlive, id);
        const ag_buf *x = &bufs[id];
        if (at > 0) {
            const ag_buf *p = &bufs[live[at - 1]];
            if (p->offset + p->size > x->offset) {
                st = ck_overlap(ctx, bufs, live[at - 1], id);
                goto out;
            }
        }
        if (at < nlive && x->offset + x->size > bufs[live[at]].offset) {
            st = ck_overlap(ctx, bufs, id, live[at]);
            goto out;
        }
        memmove(live + at + 1, live + at, (size_t)(nlive - at) * sizeof *live);
        live[at] = id;
        nlive++;
    }
out:
    ag_free(ctx, arr, (size_t)m * sizeof *arr);
    ag_free(ctx, dep, (size_t)m * sizeof *dep);
    ag_free(ctx, live, (size_t)m * sizeof *live);
    return st;
}
