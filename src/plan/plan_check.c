/* Independent checker of a frozen memory plan (STYLE "Checking", reference
 * notes 6.9).  It reads only the ag_plan and recomputes every property from
 * the tensors and buffers, sharing no code with the planner, so a planner
 * bug shows up as a rejected plan instead of a silent overlap. */
#include <inttypes.h>
#include <stdlib.h>

#include "aliasguard/place.h"
#include "plan/plan_internal.h"

typedef struct chk_iv {
    uint64_t off, end, first, last;
    uint32_t buf;
} chk_iv;

static int chk_cmp_off(const void *a, const void *b)
{
    const chk_iv *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return x->buf < y->buf ? -1 : x->buf > y->buf;
}

static uint64_t chk_round(uint64_t v, uint64_t a)
{
    return a <= 1 ? v : v + (a - v % a) % a;
}

static ag_status chk_fail_tensor(const ag_plan *p, uint32_t t, const char *what)
{
    return AG_ERR(p->ctx, AG_EVERIFY, "plan check: node '%s' output %u (buffer '%s'): %s",
                  p->tensor_node_names[t], p->tensors[t].output,
                  p->tensors[t].buffer == AG_NONE ? "-" : p->buffers[p->tensors[t].buffer].name, what);
}

/* Sets *clean when no two buffers of iv (one arena) alive at a common step
 * share a byte; members of one no-padding group are merged into one block
 * first.  Uses the placement checker's sweep. */
static ag_status chk_disjoint(ag_ctx *ctx, const ag_plan *p, const chk_iv *iv, uint32_t m, bool *clean)
{
    *clean = false;
    ag_buf *bufs = ag_calloc(ctx, AG_PLAN_NZ(m), sizeof *bufs);
    uint32_t *gslot = ag_alloc(ctx, AG_PLAN_NZ(p->ncgroups) * sizeof *gslot);
    if (!bufs || !gslot) {
        ag_free(ctx, bufs, AG_PLAN_NZ(m) * sizeof *bufs);
        ag_free(ctx, gslot, AG_PLAN_NZ(p->ncgroups) * sizeof *gslot);
        return AG_OOM(ctx);
    }
    for (uint32_t g = 0; g < p->ncgroups; g++)
        gslot[g] = AG_NONE;
    uint32_t nb = 0;
    for (uint32_t i = 0; i < m; i++) {
        uint32_t g = p->buffers[iv[i].buf].cgroup;
        bool merge = g != AG_NONE && p->cgroups[g].nopad;
        if (merge && gslot[g] != AG_NONE) {
            ag_buf *b = &bufs[gslot[g]];
            uint64_t end = b->offset + b->size;
            if (iv[i].off < b->offset)
                b->offset = iv[i].off;
            if (iv[i].end > end)
                end = iv[i].end;
            b->size = end - b->offset;
            if (iv[i].first < b->lower)
                b->lower = iv[i].first;
            if (iv[i].last + 1 > b->upper)
                b->upper = iv[i].last + 1;
            continue;
        }
        if (merge)
            gslot[g] = nb;
        bufs[nb++] = (ag_buf){iv[i].first, iv[i].last + 1, iv[i].end - iv[i].off, iv[i].off};
    }
    ag_status st = ag_place_check(ctx, bufs, nb, 1, 0);
    if (st == AG_OK)
        *clean = true;
    else if (st == AG_EVERIFY)
        st = AG_OK; /* the caller names the pair */
    ag_free(ctx, bufs, AG_PLAN_NZ(m) * sizeof *bufs);
    ag_free(ctx, gslot, AG_PLAN_NZ(p->ncgroups) * sizeof *gslot);
    return st;
}

/* The slices of each block: in the block's buffer, the first at the
 * block's start, each next one right after the previous one's bytes (no
 * padding), the last ending inside the block.  Exact adjacency makes them
 * disjoint.  Marks the slice tensors in sliced. */
static ag_status chk_slices(const ag_plan *p, uint8_t *sliced)
{
    for (uint32_t k = 0; k < p->nslices; k++) {
        const ag_plan_slice *sl = &p->slices[k];
        if (sl->count == 0)
            continue;
        if (sl->input == AG_NONE || p->tensors[sl->input].buffer == AG_NONE)
            return chk_fail_tensor(p, sl->first, "slice of a block that has no buffer");
        const ag_plan_tensor *in = &p->tensors[sl->input];
        uint64_t at = in->offset;
        for (uint32_t m = 0; m < sl->count; m++) {
            uint32_t t = sl->first + m;
            const ag_plan_tensor *pt = &p->tensors[t];
            sliced[t] = 1;
            if (pt->buffer != in->buffer)
                return chk_fail_tensor(p, t, "slice outside its block's buffer");
            if (pt->offset != at)
                return chk_fail_tensor(p, t, m == 0 ? "first slice not at the start of its block"
                                                    : "slice not right after the previous slice");
            if (pt->size == AG_SIZE_UNKNOWN) {
                if (m + 1 < sl->count)
                    return chk_fail_tensor(p, t, "slice of unknown size followed by another slice");
                continue;
            }
            at += pt->size;
            if (in->size != AG_SIZE_UNKNOWN && at > in->offset + in->size)
                return chk_fail_tensor(p, t, "slice ends beyond its block");
        }
    }
    return AG_OK;
}

/* Per tensor: the offset, region and memory type of its buffer (a view:
 * the offset of the tensor it views; a slice: checked by chk_slices); user
 * IO outside the arenas; its bytes inside its buffer and the arena. */
static ag_status chk_tensors(const ag_plan *p, const uint8_t *sliced)
{
    for (uint32_t t = 0; t < p->ntensors; t++) {
        const ag_plan_tensor *pt = &p->tensors[t];
        if (pt->buffer == AG_NONE)
            continue;
        const ag_plan_buffer *b = &p->buffers[pt->buffer];
        if (pt->region != b->region || pt->mem_type != b->mem_type)
            return chk_fail_tensor(p, t, "region or memory type differs from its buffer's");
        uint32_t r = p->tensor_ref[t];
        if (!sliced[t] && b->cgroup == AG_NONE) {
            if (r != AG_NONE && p->tensors[r].buffer != pt->buffer)
                return chk_fail_tensor(p, t, "not in the buffer of the tensor it views");
            if (r != AG_NONE && pt->offset != p->tensors[r].offset)
                return chk_fail_tensor(p, t, "offset differs from the tensor it views");
            if (r == AG_NONE && pt->offset != b->offset)
                return chk_fail_tensor(p, t, "offset differs from its buffer's");
        }
        if (p->zero_copy && p->tensor_io[t] && pt->region == AG_REGION_ARENA)
            return chk_fail_tensor(p, t, "a user input/output placed in an arena");
        if (pt->size != AG_SIZE_UNKNOWN && pt->size > b->size)
            return chk_fail_tensor(p, t, "larger than its buffer");
        if (pt->size != AG_SIZE_UNKNOWN && (pt->offset < b->offset || pt->offset - b->offset > b->size - pt->size))
            return chk_fail_tensor(p, t, "outside its buffer's bytes");
        if (b->region == AG_REGION_ARENA) {
            if (b->arena >= p->narenas || p->arenas[b->arena].mem_type != b->mem_type)
                return chk_fail_tensor(p, t, "in an arena of another memory type");
            if (b->offset + b->size > p->arenas[b->arena].size)
                return chk_fail_tensor(p, t, "beyond the end of its arena");
            if (p->capacity && p->arenas[b->arena].size > p->capacity)
                return chk_fail_tensor(p, t, "its arena exceeds the capacity");
        }
    }
    return AG_OK;
}

ag_status ag_plan_check(const ag_plan *p)
{
    ag_ctx *ctx = p->ctx;
    uint8_t *sliced = ag_calloc(ctx, AG_PLAN_NZ(p->ntensors), 1);
    if (!sliced)
        return AG_OOM(ctx);
    ag_status st = chk_slices(p, sliced);
    if (st == AG_OK)
        st = chk_tensors(p, sliced);
    ag_free(ctx, sliced, AG_PLAN_NZ(p->ntensors));
    AG_TRY(st);
    /* Continuous groups: members back to back in operand order; the first
     * aligned, every member aligned unless no-padding. */
    for (uint32_t c = 0; c < p->ncgroups; c++) {
        const ag_plan_cgroup *cg = &p->cgroups[c];
        for (uint32_t m = 0; m < cg->count; m++) {
            uint32_t t = p->cmembers[cg->first + m];
            const ag_plan_tensor *pt = &p->tensors[t];
            if (pt->region != AG_REGION_ARENA)
                return chk_fail_tensor(p, t, "continuous operand outside the arena");
            if ((m == 0 || !cg->nopad) && pt->offset % p->align)
                return chk_fail_tensor(p, t, "continuous operand not aligned");
            if (m == 0)
                continue;
            uint32_t pv = p->cmembers[cg->first + m - 1];
            uint64_t psz = p->tensors[pv].size;
            uint64_t want = p->tensors[pv].offset + (cg->nopad ? psz : chk_round(psz, p->align));
            if (pt->offset != want)
                return chk_fail_tensor(p, t, "continuous operand not right after the previous one");
        }
    }
    /* In-place decisions: input and output share bytes. */
    for (uint32_t k = 0; k < p->ninplace; k++) {
        uint32_t ti = p->inplace_tensors[k][0], to = p->inplace_tensors[k][1];
        if (ti == AG_NONE || p->tensors[ti].offset != p->tensors[to].offset ||
            p->tensors[ti].region != p->tensors[to].region)
            return chk_fail_tensor(p, to, "in-place output not at its input's offset");
    }
    /* Arena buffers: aligned and, when alive at a common step, disjoint.
     * Sorted by offset, each buffer is compared with those starting before
     * its end. */
    uint32_t n = 0;
    for (uint32_t b = 0; b < p->nbuffers; b++)
        n += p->buffers[b].region == AG_REGION_ARENA;
    chk_iv *iv = ag_calloc(ctx, AG_PLAN_NZ(n), sizeof *iv);
    if (!iv)
        return AG_OOM(ctx);
    ag_status rc = AG_OK;
    for (uint32_t a = 0; a < p->narenas && rc == AG_OK; a++) {
        uint32_t m = 0;
        for (uint32_t b = 0; b < p->nbuffers; b++) {
            const ag_plan_buffer *pb = &p->buffers[b];
            if (pb->region != AG_REGION_ARENA || pb->arena != a || pb->size == 0)
                continue;
            if (pb->cgroup == AG_NONE && pb->offset % p->align) {
                rc = AG_ERR(ctx, AG_EVERIFY, "plan check: buffer '%s' offset %" PRIu64 " not a multiple of %" PRIu64,
                            pb->name, pb->offset, p->align);
                break;
            }
            iv[m++] = (chk_iv){pb->offset, pb->offset + pb->size, pb->first, pb->last, b};
        }
        if (rc != AG_OK)
            break;
        /* Disjointness first by a sweep over time (ag_place_check, the
         * placement checker, which shares no code with the planner either):
         * O(m log m).  The members of one no-padding group count as one block.
         * Only when it finds an overlap does the pairwise scan below run, to
         * name the two buffers. */
        bool clean = false;
        rc = chk_disjoint(ctx, p, iv, m, &clean);
        if (rc != AG_OK || clean) {
            for (uint32_t i = 0; i < m && rc == AG_OK; i++)
                if (iv[i].end > p->arenas[a].size)
                    rc = AG_ERR(ctx, AG_EVERIFY, "plan check: buffer '%s' ends beyond its arena (%" PRIu64 " > %" PRIu64 ")",
                                p->buffers[iv[i].buf].name, iv[i].end, p->arenas[a].size);
            if (rc == AG_OK && p->arenas[a].size < p->arenas[a].lower_bound)
                rc = AG_ERR(ctx, AG_EVERIFY, "plan check: %s arena smaller than its lower bound",
                            ag_mem_type_name(p->arenas[a].mem_type));
            continue;
        }
        qsort(iv, m, sizeof *iv, chk_cmp_off);
        for (uint32_t i = 0; i < m && rc == AG_OK; i++)
            for (uint32_t j = i + 1; j < m && iv[j].off < iv[i].end; j++) {
                /* Members of one no-padding group form one block: an operand
                 * whose buffer is the whole concatenation (output reuse)
                 * holds the later operands; the group's own checks above
                 * keep them in order. */
                uint32_t gi = p->buffers[iv[i].buf].cgroup, gj = p->buffers[iv[j].buf].cgroup;
                if (gi != AG_NONE && gi == gj && p->cgroups[gi].nopad)
                    continue;
                if (iv[i].first <= iv[j].last && iv[j].first <= iv[i].last) {
                    rc = AG_ERR(ctx, AG_EVERIFY,
                                "plan check: buffers '%s' [%" PRIu64 ", %" PRIu64 ") and '%s' [%" PRIu64 ", %" PRIu64
                                ") overlap in %s arena while both alive (steps %" PRIu64 "-%" PRIu64 " and %" PRIu64
                                "-%" PRIu64 ")",
                                p->buffers[iv[i].buf].name, iv[i].off, iv[i].end, p->buffers[iv[j].buf].name,
                                iv[j].off, iv[j].end, ag_mem_type_name(p->arenas[a].mem_type), iv[i].first,
                                iv[i].last, iv[j].first, iv[j].last);
                    break;
                }
            }
        for (uint32_t i = 0; i < m && rc == AG_OK; i++)
            if (iv[i].end > p->arenas[a].size)
                rc = AG_ERR(ctx, AG_EVERIFY, "plan check: buffer '%s' ends beyond its arena (%" PRIu64 " > %" PRIu64 ")",
                            p->buffers[iv[i].buf].name, iv[i].end, p->arenas[a].size);
        if (rc == AG_OK && p->arenas[a].size < p->arenas[a].lower_bound)
            rc = AG_ERR(ctx, AG_EVERIFY, "plan check: %s arena smaller than its lower bound",
                        ag_mem_type_name(p->arenas[a].mem_type));
    }
    ag_free(ctx, iv, AG_PLAN_NZ(n) * sizeof *iv);
    return rc;
}
