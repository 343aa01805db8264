/* Shadow memory of the verifier: which value every byte range holds.  The
 * address space is cut at every tensor boundary into elementary segments;
 * a segment tree with lazy assignment maps them to value ids, so a tensor's
 * write (fill) and read (find_other) cost O(log n) however many segments
 * the tensor spans (docs/verify.md "Shadow memory"). */
#include "verify/verify_internal.h"

ag_status ag_shadow_init(ag_shadow *sh, ag_ctx *ctx, uint32_t nseg)
{
    sh->ctx = ctx;
    sh->nseg = nseg ? nseg : 1;
    sh->cap = 4 * (size_t)sh->nseg;
    sh->val = ag_alloc(ctx, sh->cap * sizeof *sh->val);
    if (!sh->val)
        return AG_OOM(ctx);
    ag_shadow_reset(sh, 0);
    return AG_OK;
}

void ag_shadow_free(ag_shadow *sh)
{
    if (sh->val)
        ag_free(sh->ctx, sh->val, sh->cap * sizeof *sh->val);
    sh->val = NULL;
}

void ag_shadow_reset(ag_shadow *sh, uint32_t v)
{
    /* A uniform root hides its subtree: children are rewritten on descent. */
    sh->val[1] = v;
}

/* Tree node k covers [lo, hi). */
static void fill_rec(uint32_t *val, size_t k, uint32_t lo, uint32_t hi, uint32_t a, uint32_t b, uint32_t v)
{
    if (a <= lo && hi <= b) {
        val[k] = v;
        return;
    }
    uint32_t mid = lo + (hi - lo) / 2;
    if (val[k] != AG_SHADOW_MIXED) {
        val[2 * k] = val[k];
        val[2 * k + 1] = val[k];
    }
    if (a < mid)
        fill_rec(val, 2 * k, lo, mid, a, b, v);
    if (b > mid)
        fill_rec(val, 2 * k + 1, mid, hi, a, b, v);
    val[k] = val[2 * k] == val[2 * k + 1] ? val[2 * k] : AG_SHADOW_MIXED;
}

void ag_shadow_fill(ag_shadow *sh, uint32_t a, uint32_t b, uint32_t v)
{
    if (a < b)
        fill_rec(sh->val, 1, 0, sh->nseg, a, b, v);
}

static uint32_t find_rec(const uint32_t *val, size_t k, uint32_t lo, uint32_t hi, uint32_t a, uint32_t b, uint32_t v,
                         uint32_t *found)
{
    if (val[k] != AG_SHADOW_MIXED) {
        if (val[k] == v)
            return UINT32_MAX;
        *found = val[k];
        return a > lo ? a : lo;
    }
    uint32_t mid = lo + (hi - lo) / 2;
    if (a < mid) {
        uint32_t r = find_rec(val, 2 * k, lo, mid, a, b, v, found);
        if (r != UINT32_MAX)
            return r;
    }
    if (b > mid)
        return find_rec(val, 2 * k + 1, mid, hi, a, b, v, found);
    return UINT32_MAX;
}

uint32_t ag_shadow_find_other(const ag_shadow *sh, uint32_t a, uint32_t b, uint32_t v, uint32_t *found)
{
    if (a >= b)
        return UINT32_MAX;
    return find_rec(sh->val, 1, 0, sh->nseg, a, b, v, found);
}

uint32_t ag_shadow_get(const ag_shadow *sh, uint32_t a)
{
    size_t k = 1;
    uint32_t lo = 0, hi = sh->nseg;
    while (sh->val[k] == AG_SHADOW_MIXED) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a < mid) {
            k = 2 * k;
            hi = mid;
        } else {
            k = 2 * k + 1;
            lo = mid;
        }
    }
    return sh->val[k];
}
