/* The verifier's public face: layouts built from a memory plan (the plan's
 * own placement, or a naive one with a buffer of its own for every symbol),
 * the result with its de-duplicated violations, and ag_verify.  What a run
 * executes is in schedule.c, the shadow memory in shadow.c (docs/verify.md). */
#include <stdio.h>

#include "verify/verify_internal.h"

static const char *const kind_names[] = {
#define AG_VERIFY_KIND_NAME_(e, name) name,
    AG_VERIFY_KIND_LIST(AG_VERIFY_KIND_NAME_)
#undef AG_VERIFY_KIND_NAME_
};

const char *ag_verify_kind_name(ag_verify_kind k)
{
    return (unsigned)k < AG_VIOL_COUNT_ ? kind_names[k] : NULL;
}

ag_verify_opts ag_verify_defaults(void)
{
    ag_verify_opts o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.schedules = 64;
    o.streams = 4;
    o.seed = 1;
    o.replay = -1;
    o.max_violations = 16;
    return o;
}

/* ---- layouts ---- */

void ag_verify_layout_destroy(ag_verify_layout *l)
{
    if (!l)
        return;
    ag_ctx *ctx = l->ctx;
    size_t cap = l->cap ? l->cap : 1;
    ag_free(ctx, l->out_base, cap * sizeof *l->out_base);
    ag_free(ctx, l->nout, cap * sizeof *l->nout);
    ag_free(ctx, l->t, (size_t)(l->ntensors ? l->ntensors : 1) * sizeof *l->t);
    ag_free(ctx, l->sp, (size_t)l->spcap * sizeof *l->sp);
    ag_free(ctx, l->b, (size_t)(l->nbuffers ? l->nbuffers : 1) * sizeof *l->b);
    ag_free(ctx, l, sizeof *l);
}

const vl_tensor *ag_vl_tensor(const ag_verify_layout *l, ag_node_id n, uint32_t o)
{
    if (n >= l->cap || l->out_base[n] == UINT32_MAX || o >= l->nout[n])
        return NULL;
    const vl_tensor *t = &l->t[l->out_base[n] + o];
    return t->space == UINT32_MAX ? NULL : t;
}

bool ag_verify_layout_offset(const ag_verify_layout *l, ag_node_id n, uint32_t o, uint64_t *offset)
{
    const vl_tensor *t = ag_vl_tensor(l, n, o);
    if (t && offset)
        *offset = t->offset;
    return t != NULL;
}

ag_status ag_verify_layout_move(ag_verify_layout *l, ag_node_id n, uint32_t o, uint64_t offset)
{
    const vl_tensor *t = ag_vl_tensor(l, n, o);
    if (!t)
        return AG_ERR(l->ctx, AG_ENOTFOUND, "verify layout: node %u output %u has no bytes", n, o);
    l->t[l->out_base[n] + o].offset = offset;
    return AG_OK;
}

/* Spaces: one arena per memory type, the constant region, and one space per
 * user buffer (each is a separate allocation of the caller's). */
typedef struct layout_build {
    ag_verify_layout *l;
    uint32_t arena_space[AG_MEM_COUNT_];
    uint32_t const_space;
    uint32_t *user_space; /* per buffer */
} layout_build;

static ag_status add_space(layout_build *lb, const char *name, bool arena, bool constant, uint64_t limit,
                           uint32_t *out)
{
    ag_verify_layout *l = lb->l;
    if (l->nspaces == l->spcap) {
        uint32_t nc = l->spcap ? 2 * l->spcap : 8;
        vl_space *ns = ag_realloc(l->ctx, l->sp, (size_t)l->spcap * sizeof *ns, (size_t)nc * sizeof *ns);
        if (!ns)
            return AG_OOM(l->ctx);
        l->sp = ns;
        l->spcap = nc;
    }
    vl_space *s = &l->sp[l->nspaces];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->arena = arena;
    s->constant = constant;
    s->limit = limit;
    *out = l->nspaces++;
    return AG_OK;
}

static ag_status tensor_space(layout_build *lb, const ag_plan *p, const ag_plan_tensor *pt, uint32_t *out)
{
    char name[48];
    switch (pt->region) {
    case AG_REGION_ARENA:
        if (lb->arena_space[pt->mem_type] == UINT32_MAX)
            AG_TRY(add_space(lb, ag_mem_type_name(pt->mem_type), true, false, 0, &lb->arena_space[pt->mem_type]));
        *out = lb->arena_space[pt->mem_type];
        return AG_OK;
    case AG_REGION_CONST:
        if (lb->const_space == UINT32_MAX)
            AG_TRY(add_space(lb, "constant", false, true, 0, &lb->const_space));
        *out = lb->const_space;
        return AG_OK;
    case AG_REGION_USER_INPUT:
    case AG_REGION_USER_OUTPUT:
    default:
        if (lb->user_space[pt->buffer] == UINT32_MAX) {
            snprintf(name, sizeof name, "%s %s", ag_plan_region_name(pt->region), ag_plan_buffer_name(p, pt->buffer));
            AG_TRY(add_space(lb, name, false, false, 0, &lb->user_space[pt->buffer]));
        }
        *out = lb->user_space[pt->buffer];
        return AG_OK;
    }
}

/* Naive placement: each arena buffer gets bytes no other buffer uses, in
 * buffer order, aligned like the plan's; tensors keep their place within
 * their buffer. */
static ag_status place_naive(ag_verify_layout *l, const ag_plan *p)
{
    uint32_t nb = l->nbuffers;
    uint64_t *base = ag_calloc(l->ctx, nb ? nb : 1, sizeof *base);
    /* One pass over buffers per arena space, in buffer order. */
    uint64_t *end = ag_calloc(l->ctx, l->nspaces ? l->nspaces : 1, sizeof *end);
    uint32_t *bspace = ag_alloc(l->ctx, (size_t)(nb ? nb : 1) * sizeof *bspace);
    if (!base || !end || !bspace) {
        ag_free(l->ctx, base, (size_t)(nb ? nb : 1) * sizeof *base);
        ag_free(l->ctx, end, (size_t)(l->nspaces ? l->nspaces : 1) * sizeof *end);
        ag_free(l->ctx, bspace, (size_t)(nb ? nb : 1) * sizeof *bspace);
        return AG_OOM(l->ctx);
    }
    for (uint32_t b = 0; b < nb; b++)
        bspace[b] = UINT32_MAX;
    for (uint32_t k = 0; k < l->ntensors; k++)
        if (l->t[k].space != UINT32_MAX && l->sp[l->t[k].space].arena && l->t[k].buffer < nb)
            bspace[l->t[k].buffer] = l->t[k].space;
    for (uint32_t b = 0; b < nb; b++) {
        if (bspace[b] == UINT32_MAX)
            continue;
        uint64_t sz = ag_plan_buffer_size(p, b);
        base[b] = end[bspace[b]];
        end[bspace[b]] += (sz + 511) / 512 * 512 + 512;
    }
    for (uint32_t k = 0; k < l->ntensors; k++) {
        vl_tensor *t = &l->t[k];
        if (t->space == UINT32_MAX || !l->sp[t->space].arena || t->buffer >= nb)
            continue;
        t->offset = base[t->buffer] + (t->offset - ag_plan_buffer_offset(p, t->buffer));
    }
    for (uint32_t s = 0; s < l->nspaces; s++)
        if (l->sp[s].arena)
            l->sp[s].limit = end[s];
    ag_free(l->ctx, base, (size_t)(nb ? nb : 1) * sizeof *base);
    ag_free(l->ctx, end, (size_t)(l->nspaces ? l->nspaces : 1) * sizeof *end);
    ag_free(l->ctx, bspace, (size_t)(nb ? nb : 1) * sizeof *bspace);
    return AG_OK;
}

static ag_status layout_fill(layout_build *lb, const ag_graph *g, const ag_plan *p, bool naive)
{
    ag_verify_layout *l = lb->l;
    ag_ctx *ctx = l->ctx;
    l->cap = ag_graph_node_capacity(g);
    l->out_base = ag_alloc(ctx, (size_t)(l->cap ? l->cap : 1) * sizeof *l->out_base);
    l->nout = ag_calloc(ctx, l->cap ? l->cap : 1, sizeof *l->nout);
    if (!l->out_base || !l->nout)
        return AG_OOM(ctx);
    uint64_t nt = 0;
    for (ag_node_id n = 0; n < l->cap; n++) {
        l->out_base[n] = UINT32_MAX;
        if (!ag_node_alive(g, n))
            continue;
        l->out_base[n] = (uint32_t)nt;
        l->nout[n] = ag_node_num_outputs(g, n);
        nt += l->nout[n];
        if (nt >= UINT32_MAX)
            return AG_ERR(ctx, AG_EINVAL, "verify: graph '%s' has too many outputs", ag_sub_name(g, AG_ROOT));
    }
    l->t = ag_alloc(ctx, (size_t)(nt ? nt : 1) * sizeof *l->t);
    if (!l->t)
        return AG_OOM(ctx);
    l->ntensors = (uint32_t)nt;
    for (uint32_t k = 0; k < l->ntensors; k++)
        l->t[k] = (vl_tensor){UINT32_MAX, UINT32_MAX, 0, 0};
    l->nbuffers = ag_plan_buffer_count(p);
    l->b = ag_calloc(ctx, l->nbuffers ? l->nbuffers : 1, sizeof *l->b);
    lb->user_space = ag_alloc(ctx, (size_t)(l->nbuffers ? l->nbuffers : 1) * sizeof *lb->user_space);
    if (!l->b || !lb->user_space)
        return AG_OOM(ctx);
    for (uint32_t b = 0; b < l->nbuffers; b++) {
        lb->user_space[b] = UINT32_MAX;
        ag_plan_buffer_span(p, b, &l->b[b].first, &l->b[b].last);
        l->b[b].arena = ag_plan_buffer_region(p, b) == AG_REGION_ARENA;
    }
    for (uint32_t k = 0; k < ag_plan_arena_count(p); k++) {
        ag_mem_type mt = ag_plan_arena_mem_type(p, k);
        if (lb->arena_space[mt] == UINT32_MAX)
            AG_TRY(add_space(lb, ag_mem_type_name(mt), true, false, ag_plan_arena_size(p, k), &lb->arena_space[mt]));
    }
    for (uint32_t k = 0; k < ag_plan_tensor_count(p); k++) {
        const ag_plan_tensor *pt = ag_plan_tensor_at(p, k);
        if (pt->node >= l->cap || !ag_node_alive(g, pt->node) || pt->output >= l->nout[pt->node] ||
            pt->buffer >= l->nbuffers)
            return AG_ERR(ctx, AG_EINVAL, "verify: the plan's tensor %u (node %u output %u) is not in graph '%s'",
                          k, pt->node, pt->output, ag_sub_name(g, AG_ROOT));
        uint64_t size = pt->size;
        bool user = pt->region == AG_REGION_USER_INPUT || pt->region == AG_REGION_USER_OUTPUT;
        if (size == AG_SIZE_UNKNOWN)
            size = user ? 1 : 0; /* a caller's buffer of unknown size is still one buffer */
        if (size == 0)
            continue;
        vl_tensor *t = &l->t[l->out_base[pt->node] + pt->output];
        AG_TRY(tensor_space(lb, p, pt, &t->space));
        t->buffer = pt->buffer;
        t->offset = pt->offset;
        t->size = size;
    }
    return naive ? place_naive(l, p) : AG_OK;
}

ag_status ag_verify_layout_from_plan(ag_ctx *ctx, const ag_graph *g, const ag_plan *p, bool naive,
                                     ag_verify_layout **out)
{
    *out = NULL;
    ag_verify_layout *l = ag_calloc(ctx, 1, sizeof *l);
    if (!l)
        return AG_OOM(ctx);
    l->ctx = ctx;
    layout_build lb;
    memset(&lb, 0, sizeof lb);
    lb.l = l;
    for (int k = 0; k < AG_MEM_COUNT_; k++)
        lb.arena_space[k] = UINT32_MAX;
    lb.const_space = UINT32_MAX;
    ag_status st = layout_fill(&lb, g, p, naive);
    if (lb.user_space)
        ag_free(ctx, lb.user_space, (size_t)(l->nbuffers ? l->nbuffers : 1) * sizeof *lb.user_space);
    if (st != AG_OK) {
        ag_verify_layout_destroy(l);
        return st;
    }
    *out = l;
    return AG_OK;
}

/* ---- results ---- */

uint32_t ag_verify_violation_count(const ag_verify_result *r)
{
    return r->viol.len;
}

const ag_verify_violation *ag_verify_violation_at(const ag_verify_result *r, uint32_t k)
{
    return k < r->viol.len ? &AG_VEC_AT(r->viol, ag_verify_violation, k) : NULL;
}

uint32_t ag_verify_schedules_run(const ag_verify_result *r)
{
    return r->schedules;
}

uint64_t ag_verify_seed(const ag_verify_result *r)
{
    return r->seed;
}

uint64_t ag_verify_nodes_executed(const ag_verify_result *r)
{
    return r->executed;
}

void ag_verify_result_destroy(ag_verify_result *r)
{
    if (!r)
        return;
    ag_vec_free(r->ctx, &r->viol, sizeof(ag_verify_violation));
    ag_arena_reset(&r->arena);
    ag_free(r->ctx, r, sizeof *r);
}

ag_status ag_verify_record(ag_verify_result *r, uint32_t max, const ag_verify_violation *v)
{
    for (uint32_t k = 0; k < r->viol.len; k++) {
        const ag_verify_violation *o = &AG_VEC_AT(r->viol, ag_verify_violation, k);
        if (o->kind == v->kind && strcmp(o->reader, v->reader) == 0 && strcmp(o->writer, v->writer) == 0)
            return AG_OK;
    }
    if (r->viol.len >= max)
        return AG_OK;
    ag_verify_violation c = *v;
    c.reader = ag_arena_strdup(&r->arena, v->reader);
    c.writer = ag_arena_strdup(&r->arena, v->writer);
    c.space = ag_arena_strdup(&r->arena, v->space);
    c.message = ag_arena_strdup(&r->arena, v->message);
    if (!c.reader || !c.writer || !c.space || !c.message)
        return AG_OOM(r->ctx);
    return ag_vec_push(r->ctx, &r->viol, sizeof c, &c) == AG_OK ? AG_OK : AG_OOM(r->ctx);
}

/* ---- running ---- */

ag_status ag_verify_layout_run(ag_ctx *ctx, const ag_graph *g, const ag_ops *ops, const ag_verify_layout *l,
                               const ag_verify_opts *opts, ag_verify_result **out)
{
    *out = NULL;
    ag_verify_opts o = ag_verify_defaults();
    if (opts)
        o = *opts;
    if (o.streams == 0)
        o.streams = 1;
    if (o.streams > 64)
        o.streams = 64;
    if (o.max_violations == 0)
        o.max_violations = 1;
    if (l->cap != ag_graph_node_capacity(g))
        return AG_ERR(ctx, AG_EINVAL, "verify: the layout was made for another graph than '%s'",
                      ag_sub_name(g, AG_ROOT));
    ag_verify_result *r = ag_calloc(ctx, 1, sizeof *r);
    if (!r)
        return AG_OOM(ctx);
    r->ctx = ctx;
    ag_arena_init(&r->arena, ctx);
    r->seed = o.seed;
    ag_status st = ag_verify_execute(ctx, g, ops, l, &o, r);
    if (st != AG_OK) {
        ag_verify_result_destroy(r);
        return st;
    }
    *out = r;
    return AG_OK;
}

ag_status ag_verify(ag_ctx *ctx, const ag_graph *g, const ag_ops *ops, const ag_plan *p, const ag_verify_opts *opts,
                    ag_verify_result **out)
{
    *out = NULL;
    ag_verify_layout *l = NULL;
    AG_TRY(ag_verify_layout_from_plan(ctx, g, p, false, &l));
    ag_status st = ag_verify_layout_run(ctx, g, ops, l, opts, out);
    ag_verify_layout_destroy(l);
    return st;
}
