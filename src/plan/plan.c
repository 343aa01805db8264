/* The memory planner (docs/plan.md, seed 3.4, reference notes 6): builds
 * the symbols' lifetimes, regions and continuous groups, merges in-place
 * pairs, packs each arena with the placement engine (place.h) and freezes
 * the result into an ag_plan, which the independent checker validates. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan_internal.h"

static const char *const region_names[] = {
#define AG_PLAN_REGION_NAME_(e, name) name,
    AG_PLAN_REGION_LIST(AG_PLAN_REGION_NAME_)
#undef AG_PLAN_REGION_NAME_
};

const char *ag_plan_region_name(ag_plan_region r)
{
    return (unsigned)r < AG_REGION_COUNT_ ? region_names[r] : "?";
}

ag_plan_opts ag_plan_defaults(void)
{
    ag_plan_opts o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.align = 512;
    o.effort_seconds = 0;
    o.inplace = true;
    o.zero_copy = true;
    o.capacity = 0;
    o.effort_nodes = 20000;
    return o;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return a <= 1 ? v : (v + a - 1) / a * a;
}

ag_status ag_plan_note(ag_plan_build_state *st, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    const char *copy = ag_arena_strdup(&st->scratch, buf);
    if (!copy || ag_vec_push(st->ctx, &st->notes, sizeof copy, &copy) != AG_OK)
        return AG_OOM(st->ctx);
    return AG_OK;
}

uint32_t ag_plan_sym_root(const ag_plan_build_state *st, uint32_t s)
{
    while (st->sym[s].merged_into != AG_NONE)
        s = st->sym[s].merged_into;
    return s;
}

ag_status ag_plan_merge(ag_plan_build_state *st, uint32_t from, uint32_t into, ag_node_id node, uint32_t input,
                        uint32_t output, const char *reason)
{
    const ag_graph *g = st->env.g;
    ag_plan_sym *f = &st->sym[from], *t = &st->sym[into];
    const char *why = NULL;
    if (f->merged_into != AG_NONE || t->merged_into != AG_NONE)
        why = "a symbol is already merged";
    else if (from == into)
        why = "the same symbol";
    else if (f->mem_type != t->mem_type)
        why = "different memory types";
    else if (f->region != AG_REGION_ARENA || t->region != AG_REGION_ARENA)
        why = "a symbol is outside the arena";
    else if (f->group != AG_NONE || t->group != AG_NONE)
        why = "a symbol is in a continuous group";
    else if (!f->used || !t->used || f->first < t->last)
        why = "the lifetimes overlap";
    if (why)
        return AG_ERR(st->ctx, AG_EINVAL, "plan: cannot merge output %u of node '%s' (%s) into input %u: %s", output,
                      ag_node_name(g, node), ag_node_type(g, node), input, why);
    ag_plan_inplace_dec d = {node, input, output, ag_arena_strdup(&st->scratch, reason ? reason : "")};
    if (!d.reason || ag_vec_push(st->ctx, &st->inplace, sizeof d, &d) != AG_OK)
        return AG_OOM(st->ctx);
    if (f->first < t->first)
        t->first = f->first;
    if (f->last > t->last)
        t->last = f->last;
    if (f->size > t->size)
        t->size = f->size;
    f->merged_into = into;
    f->reason = d.reason;
    return AG_OK;
}

/* Packs arena mt: ungrouped merge roots and groups as ag_bufs. */
static ag_status place_arena(ag_plan_build_state *st, ag_mem_type mt, ag_plan *p)
{
    uint32_t ngroups = st->groups.len, n = 0;
    ag_buf *bufs = ag_calloc(st->ctx, AG_PLAN_NZ((size_t)st->nsym + ngroups), sizeof *bufs);
    uint32_t *who = ag_calloc(st->ctx, AG_PLAN_NZ((size_t)st->nsym + ngroups), sizeof *who);
    if (!bufs || !who) {
        ag_free(st->ctx, bufs, (AG_PLAN_NZ((size_t)st->nsym + ngroups)) * sizeof *bufs);
        ag_free(st->ctx, who, (AG_PLAN_NZ((size_t)st->nsym + ngroups)) * sizeof *who);
        return AG_OOM(st->ctx);
    }
    for (uint32_t s = 0; s < st->nsym; s++) {
        const ag_plan_sym *ps = &st->sym[s];
        if (!ps->used || ps->region != AG_REGION_ARENA || ps->mem_type != mt || ps->merged_into != AG_NONE ||
            ps->group != AG_NONE)
            continue;
        bufs[n] = (ag_buf){ps->first, ps->last + 1, align_up(ps->size, st->opts.align), 0};
        who[n++] = s;
    }
    for (uint32_t k = 0; k < ngroups; k++) {
        const ag_plan_group *gr = &AG_VEC_AT(st->groups, ag_plan_group, k);
        if (gr->mem_type != mt)
            continue;
        bufs[n] = (ag_buf){gr->lo, gr->hi + 1, gr->size, 0};
        who[n++] = st->nsym + k;
    }
    ag_status rc = AG_OK;
    if (n > 0) {
        ag_place_opts po = ag_place_defaults();
        po.align = st->opts.align ? st->opts.align : 1;
        po.capacity = st->opts.capacity;
        po.effort_seconds = st->opts.effort_seconds;
        po.effort_nodes = st->opts.effort_nodes;
        ag_place_result res;
        memset(&res, 0, sizeof res);
        res.size = sizeof res;
        rc = ag_place(st->ctx, bufs, n, &po, &res);
        if (rc == AG_OK) {
            for (uint32_t k = 0; k < n; k++) {
                if (who[k] < st->nsym) {
                    st->sym[who[k]].offset = bufs[k].offset;
                    continue;
                }
                ag_plan_group *gr = &AG_VEC_AT(st->groups, ag_plan_group, who[k] - st->nsym);
                gr->offset = bufs[k].offset;
                for (uint32_t m = 0; m < gr->count; m++) {
                    uint32_t s = AG_VEC_AT(st->group_members, uint32_t, gr->first + m);
                    st->sym[s].offset = gr->offset + st->sym[s].group_off;
                }
            }
            ag_plan_arena *ar = &p->arenas[p->narenas++];
            ar->mem_type = mt;
            ar->size = res.arena_bytes;
            ar->lower_bound = ag_place_lower_bound(bufs, n, po.align);
            p->peak += ar->size;
            p->lower_bound += ar->lower_bound;
        }
    }
    ag_free(st->ctx, bufs, (AG_PLAN_NZ((size_t)st->nsym + ngroups)) * sizeof *bufs);
    ag_free(st->ctx, who, (AG_PLAN_NZ((size_t)st->nsym + ngroups)) * sizeof *who);
    return rc;
}

/* Constants are laid out one after another in their own region. */
static void place_constants(ag_plan_build_state *st)
{
    uint64_t off = 0;
    for (uint32_t s = 0; s < st->nsym; s++) {
        ag_plan_sym *ps = &st->sym[s];
        if (!ps->used || ps->region != AG_REGION_CONST)
            continue;
        ps->offset = off;
        off += align_up(ps->size, st->opts.align);
    }
}

static void plan_free(ag_plan *p)
{
    ag_ctx *ctx = p->ctx;
    ag_free(ctx, p->buffers, AG_PLAN_NZ(p->nbuffers) * sizeof *p->buffers);
    ag_free(ctx, p->tensors, AG_PLAN_NZ(p->ntensors) * sizeof *p->tensors);
    ag_free(ctx, p->tensor_node_names, AG_PLAN_NZ(p->ntensors) * sizeof *p->tensor_node_names);
    ag_free(ctx, p->tensor_io, AG_PLAN_NZ(p->ntensors));
    ag_free(ctx, p->cgroups, AG_PLAN_NZ(p->ncgroups) * sizeof *p->cgroups);
    ag_free(ctx, p->cmembers, AG_PLAN_NZ(p->ncmembers) * sizeof *p->cmembers);
    ag_free(ctx, p->inplace, AG_PLAN_NZ(p->ninplace) * sizeof *p->inplace);
    ag_free(ctx, p->inplace_tensors, AG_PLAN_NZ(p->ninplace) * sizeof *p->inplace_tensors);
    ag_free(ctx, p->refused, AG_PLAN_NZ(p->nrefused) * sizeof *p->refused);
    ag_free(ctx, p->notes, AG_PLAN_NZ(p->nnotes) * sizeof *p->notes);
    ag_free(ctx, p->tensor_ref, AG_PLAN_NZ(p->ntensors) * sizeof *p->tensor_ref);
    ag_free(ctx, p->slices, AG_PLAN_NZ(p->nslices) * sizeof *p->slices);
    ag_free(ctx, p->reuse, AG_PLAN_NZ(p->reuse_cap) * sizeof *p->reuse);
    ag_free(ctx, p->nodes, AG_PLAN_NZ(p->nnodes) * sizeof *p->nodes);
    ag_free(ctx, p->node_inputs, AG_PLAN_NZ(p->nnode_inputs) * sizeof *p->node_inputs);
    ag_arena_reset(&p->mem);
    ag_free(ctx, p, sizeof *p);
}

void ag_plan_destroy(ag_plan *p)
{
    if (p)
        plan_free(p);
}

/* Index of the tensor of each output: first_tensor[node] + o. */
/* Copies one in-place decision (taken or refused) into the plan's arena;
 * false on allocation failure. */
static bool copy_inplace_rec(ag_plan *p, const ag_graph *g, const ag_plan_inplace_dec *d, ag_plan_inplace_rec *r)
{
    r->node = ag_arena_strdup(&p->mem, ag_node_name(g, d->node));
    r->reason = ag_arena_strdup(&p->mem, d->reason);
    r->input = d->input;
    r->output = d->output;
    return r->node != NULL && r->reason != NULL;
}

static ag_status freeze(ag_plan_build_state *st, ag_plan *p)
{
    ag_ctx *ctx = st->ctx;
    const ag_graph *g = st->env.g;
    uint32_t cap = ag_graph_node_capacity(g);
    uint32_t *first_tensor = ag_calloc(ctx, AG_PLAN_NZ(cap), sizeof *first_tensor);
    uint32_t *bufof = ag_calloc(ctx, AG_PLAN_NZ(st->nsym), sizeof *bufof);
    ag_status rc = AG_OK;
    if (!first_tensor || !bufof) {
        rc = AG_OOM(ctx);
        goto out;
    }
    /* Buffers: one per used merge root. */
    uint32_t nb = 0;
    for (uint32_t s = 0; s < st->nsym; s++)
        bufof[s] = st->sym[s].used && st->sym[s].merged_into == AG_NONE ? nb++ : AG_NONE;
    uint32_t nt = 0;
    for (uint32_t k = 0; k < st->norder; k++) {
        first_tensor[st->order[k]] = nt;
        nt += ag_node_num_outputs(g, st->order[k]);
    }
    p->buffers = ag_calloc(ctx, AG_PLAN_NZ(nb), sizeof *p->buffers);
    p->nbuffers = nb;
    p->tensors = ag_calloc(ctx, AG_PLAN_NZ(nt), sizeof *p->tensors);
    p->tensor_node_names = ag_calloc(ctx, AG_PLAN_NZ(nt), sizeof *p->tensor_node_names);
    p->tensor_io = ag_calloc(ctx, AG_PLAN_NZ(nt), 1);
    p->tensor_ref = ag_calloc(ctx, AG_PLAN_NZ(nt), sizeof *p->tensor_ref);
    p->ntensors = nt;
    if (!p->buffers || !p->tensors || !p->tensor_node_names || !p->tensor_io || !p->tensor_ref) {
        rc = AG_OOM(ctx);
        goto out;
    }
    for (uint32_t s = 0; s < st->nsym; s++) {
        if (bufof[s] == AG_NONE)
            continue;
        const ag_plan_sym *ps = &st->sym[s];
        ag_plan_buffer *b = &p->buffers[bufof[s]];
        b->name = ag_arena_strdup(&p->mem, ag_symtab_name(st->syms, s));
        if (!b->name) {
            rc = AG_OOM(ctx);
            goto out;
        }
        b->first = ps->first;
        b->last = ps->last;
        /* Arena buffers occupy their aligned size, except members of a
         * no-padding group, which the next member follows directly. */
        bool packed = ps->group != AG_NONE && AG_VEC_AT(st->groups, ag_plan_group, ps->group).nopad;
        b->size = ps->region == AG_REGION_ARENA && !packed ? align_up(ps->size, st->opts.align) : ps->size;
        b->offset = ps->offset;
        b->region = ps->region;
        b->mem_type = ps->mem_type;
        b->arena = AG_NONE;
        b->cgroup = ps->group;
        for (uint32_t a = 0; a < p->narenas && ps->region == AG_REGION_ARENA; a++)
            if (p->arenas[a].mem_type == ps->mem_type)
                b->arena = a;
    }
    for (uint32_t k = 0; k < st->norder; k++) {
        ag_node_id n = st->order[k];
        const char *nm = ag_arena_strdup(&p->mem, ag_node_name(g, n));
        if (!nm) {
            rc = AG_OOM(ctx);
            goto out;
        }
        bool root_data = ag_node_owner(g, n) == AG_ROOT && ag_op_kind_is_data_like(ag_ops_node_kind(st->env.ops, g, n));
        for (uint32_t o = 0; o < ag_node_num_outputs(g, n); o++) {
            uint32_t ti = first_tensor[n] + o;
            ag_plan_tensor *t = &p->tensors[ti];
            p->tensor_node_names[ti] = nm;
            ag_lanchor a = {n, o, false};
            uint32_t s = ag_symtab_symbol_of(st->syms, &a);
            t->node = n;
            t->output = o;
            t->buffer = AG_NONE;
            p->tensor_ref[ti] = AG_NONE;
            t->size = ag_desc_size_bytes(ag_node_output_desc_c(g, n, o));
            if (s == AG_NONE)
                continue;
            uint32_t r = ag_plan_sym_root(st, s);
            t->buffer = bufof[r];
            t->region = st->sym[r].region;
            t->mem_type = st->sym[r].mem_type;
            /* A member's own offset (group members), else its root's; a
             * slice of a block, or a view of one, further in. */
            t->offset = (st->sym[s].group != AG_NONE ? st->sym[s].offset : st->sym[r].offset) +
                        ag_plan_view_offset(st, n, o);
            ag_port src = ag_plan_viewed_output(st, n, o);
            if (src.node != AG_NONE)
                p->tensor_ref[ti] = first_tensor[src.node] + src.index;
            if (root_data)
                p->tensor_io[ti] |= AG_PLAN_IO_INPUT;
            for (uint32_t c = 0; c < ag_node_output_nconsumers(g, n, o); c++) {
                ag_port cp = ag_node_output_consumer(g, n, o, c);
                if (ag_node_owner(g, cp.node) == AG_ROOT &&
                    ag_ops_node_kind(st->env.ops, g, cp.node) == AG_OPK_NETOUTPUT)
                    p->tensor_io[ti] |= AG_PLAN_IO_OUTPUT;
            }
        }
    }
    /* Nodes and their input producers, for the IO offset annotations. */
    p->nnodes = st->norder;
    for (uint32_t k = 0; k < st->norder; k++)
        p->nnode_inputs += ag_node_num_inputs(g, st->order[k]);
    p->nodes = ag_calloc(ctx, AG_PLAN_NZ(p->nnodes), sizeof *p->nodes);
    p->node_inputs = ag_calloc(ctx, AG_PLAN_NZ(p->nnode_inputs), sizeof *p->node_inputs);
    if (!p->nodes || !p->node_inputs) {
        rc = AG_OOM(ctx);
        goto out;
    }
    for (uint32_t k = 0, ni = 0; k < st->norder; k++) {
        ag_node_id n = st->order[k];
        ag_plan_node *pn = &p->nodes[k];
        pn->in_first = ni;
        pn->nin = ag_node_num_inputs(g, n);
        pn->out_first = first_tensor[n];
        pn->nout = ag_node_num_outputs(g, n);
        pn->name = pn->nout ? p->tensor_node_names[first_tensor[n]] : ag_arena_strdup(&p->mem, ag_node_name(g, n));
        if (!pn->name) {
            rc = AG_OOM(ctx);
            goto out;
        }
        for (uint32_t i = 0; i < pn->nin; i++) {
            ag_port src = ag_node_input_src(g, n, i);
            p->node_inputs[ni++] = src.node == AG_NONE ? AG_NONE : first_tensor[src.node] + src.index;
        }
    }
    /* Continuous groups as tensor lists (the producer tensor of each member). */
    p->ncgroups = st->groups.len;
    p->ncmembers = st->group_members.len;
    p->cgroups = ag_calloc(ctx, AG_PLAN_NZ(p->ncgroups), sizeof *p->cgroups);
    p->cmembers = ag_calloc(ctx, AG_PLAN_NZ(p->ncmembers), sizeof *p->cmembers);
    if (!p->cgroups || !p->cmembers) {
        rc = AG_OOM(ctx);
        goto out;
    }
    for (uint32_t k = 0; k < p->ncgroups; k++) {
        const ag_plan_group *gr = &AG_VEC_AT(st->groups, ag_plan_group, k);
        ag_plan_cgroup *cg = &p->cgroups[k];
        cg->node = ag_arena_strdup(&p->mem, ag_node_name(g, gr->node));
        if (!cg->node) {
            rc = AG_OOM(ctx);
            goto out;
        }
        cg->inputs = gr->inputs;
        cg->nopad = gr->nopad;
        cg->first = gr->first;
        cg->count = gr->count;
        for (uint32_t m = 0; m < gr->count; m++) {
            ag_port pr = st->sym[AG_VEC_AT(st->group_members, uint32_t, gr->first + m)].producer;
            p->cmembers[gr->first + m] = first_tensor[pr.node] + pr.index;
        }
    }
    /* Slices: the outputs of each no-padding continuous output node that
     * reuses its input 0. */
    for (uint32_t k = 0; k < st->norder; k++)
        p->nslices += ag_plan_slices_input(st, st->order[k]);
    p->slices = ag_calloc(ctx, AG_PLAN_NZ(p->nslices), sizeof *p->slices);
    if (!p->slices) {
        rc = AG_OOM(ctx);
        goto out;
    }
    for (uint32_t k = 0, m = 0; k < st->norder; k++) {
        ag_node_id n = st->order[k];
        if (!ag_plan_slices_input(st, n))
            continue;
        ag_plan_slice *sl = &p->slices[m++];
        sl->node = p->tensor_node_names[first_tensor[n]];
        ag_port src = ag_node_input_src(g, n, 0);
        sl->input = src.node == AG_NONE ? AG_NONE : first_tensor[src.node] + src.index;
        sl->first = first_tensor[n];
        sl->count = ag_node_num_outputs(g, n);
    }
    /* Notes and refused in-place candidates. */
    p->nnotes = st->notes.len;
    p->nrefused = st->refused.len;
    p->notes = ag_calloc(ctx, AG_PLAN_NZ(p->nnotes), sizeof *p->notes);
    p->refused = ag_calloc(ctx, AG_PLAN_NZ(p->nrefused), sizeof *p->refused);
    if (!p->notes || !p->refused) {
        rc = AG_OOM(ctx);
        goto out;
    }
    for (uint32_t k = 0; k < p->nnotes; k++) {
        p->notes[k] = ag_arena_strdup(&p->mem, AG_VEC_AT(st->notes, const char *, k));
        if (!p->notes[k]) {
            rc = AG_OOM(ctx);
            goto out;
        }
    }
    for (uint32_t k = 0; k < p->nrefused; k++) {
        if (!copy_inplace_rec(p, g, &AG_VEC_AT(st->refused, ag_plan_inplace_dec, k), &p->refused[k])) {
            rc = AG_OOM(ctx);
            goto out;
        }
    }
    /* In-place decisions. */
    p->ninplace = st->inplace.len;
    p->inplace = ag_calloc(ctx, AG_PLAN_NZ(p->ninplace), sizeof *p->inplace);
    p->inplace_tensors = ag_calloc(ctx, AG_PLAN_NZ(p->ninplace), sizeof *p->inplace_tensors);
    if (!p->inplace || !p->inplace_tensors) {
        rc = AG_OOM(ctx);
        goto out;
    }
    for (uint32_t k = 0; k < p->ninplace; k++) {
        const ag_plan_inplace_dec *d = &AG_VEC_AT(st->inplace, ag_plan_inplace_dec, k);
        if (!copy_inplace_rec(p, g, d, &p->inplace[k])) {
            rc = AG_OOM(ctx);
            goto out;
        }
        ag_port src = ag_node_input_src(g, d->node, d->input);
        p->inplace_tensors[k][0] = src.node == AG_NONE ? AG_NONE : first_tensor[src.node] + src.index;
        p->inplace_tensors[k][1] = first_tensor[d->node] + d->output;
    }
    /* output_reuse_input_mem_indexes: root output k whose buffer is root
     * input j's (the output is written in place into the caller's input).
     * The root inputs are collected once, with their index and buffer, so
     * the pairs cost outputs x inputs, not outputs x nodes. */
    ag_node_id netout = AG_NONE;
    uint32_t nroot = ag_sub_node_count(g, AG_ROOT), ndata = 0;
    for (uint32_t k = 0; k < nroot; k++) {
        ag_node_id n = ag_sub_node_at(g, AG_ROOT, k);
        ag_op_kind kd = ag_ops_node_kind(st->env.ops, g, n);
        if (kd == AG_OPK_NETOUTPUT)
            netout = n;
        else if (ag_op_kind_is_data_like(kd))
            ndata++;
    }
    if (netout != AG_NONE && ndata > 0) {
        uint32_t (*datas)[2] = ag_calloc(ctx, ndata, sizeof *datas); /* {input index, buffer root} */
        if (!datas) {
            rc = AG_OOM(ctx);
            goto out;
        }
        uint32_t di = 0;
        for (uint32_t k = 0; k < nroot; k++) {
            ag_node_id n = ag_sub_node_at(g, AG_ROOT, k);
            if (!ag_op_kind_is_data_like(ag_ops_node_kind(st->env.ops, g, n)))
                continue;
            int64_t idx;
            datas[di][0] = ag_attrs_get_int(ag_node_attrs_c(g, n), "index", &idx) && idx >= 0 ? (uint32_t)idx : di;
            ag_lanchor d = {n, 0, false};
            uint32_t sd = ag_symtab_symbol_of(st->syms, &d);
            datas[di][1] = sd == AG_NONE ? AG_NONE : ag_plan_sym_root(st, sd);
            di++;
        }
        uint32_t nin = ag_node_num_inputs(g, netout);
        p->reuse_cap = nin * ndata;
        p->reuse = ag_calloc(ctx, AG_PLAN_NZ(p->reuse_cap), sizeof *p->reuse);
        if (!p->reuse) {
            ag_free(ctx, datas, (size_t)ndata * sizeof *datas);
            rc = AG_OOM(ctx);
            goto out;
        }
        for (uint32_t i = 0; i < nin; i++) {
            ag_lanchor a = {netout, i, true};
            uint32_t so = ag_symtab_symbol_of(st->syms, &a);
            if (so == AG_NONE)
                continue;
            so = ag_plan_sym_root(st, so);
            for (uint32_t k = 0; k < ndata; k++)
                if (datas[k][1] == so) {
                    p->reuse[p->nreuse][0] = i;
                    p->reuse[p->nreuse][1] = datas[k][0];
                    p->nreuse++;
                }
        }
        ag_free(ctx, datas, (size_t)ndata * sizeof *datas);
    }
    rc = AG_OK;
out:
    ag_free(ctx, first_tensor, AG_PLAN_NZ(cap) * sizeof *first_tensor);
    ag_free(ctx, bufof, AG_PLAN_NZ(st->nsym) * sizeof *bufof);
    return rc;
}

static void state_free(ag_plan_build_state *st)
{
    ag_symtab_destroy(st->syms);
    ag_free(st->ctx, st->sym, AG_PLAN_NZ(st->nsym) * sizeof *st->sym);
    ag_free(st->ctx, st->order, AG_PLAN_NZ(ag_graph_node_count(st->env.g)) * sizeof *st->order);
    ag_free(st->ctx, st->step, AG_PLAN_NZ(ag_graph_node_capacity(st->env.g)) * sizeof *st->step);
    ag_vec_free(st->ctx, &st->groups, sizeof(ag_plan_group));
    ag_vec_free(st->ctx, &st->group_members, sizeof(uint32_t));
    ag_vec_free(st->ctx, &st->inplace, sizeof(ag_plan_inplace_dec));
    ag_vec_free(st->ctx, &st->refused, sizeof(ag_plan_inplace_dec));
    ag_vec_free(st->ctx, &st->notes, sizeof(const char *));
    ag_free(st->ctx, st->view_off, AG_PLAN_NZ(st->nslots) * sizeof *st->view_off);
    ag_arena_reset(&st->scratch);
}

ag_status ag_plan_build(ag_ctx *ctx, const ag_graph *g, const ag_ops *ops, const ag_plan_opts *opts,
                        ag_plan **out)
{
    *out = NULL;
    ag_plan_build_state st;
    memset(&st, 0, sizeof st);
    st.ctx = ctx;
    /* The symbol table takes a pass environment; it only reads the graph. */
    st.env.g = (ag_graph *)(uintptr_t)g;
    st.env.ops = ops;
    st.opts = opts ? *opts : ag_plan_defaults();
    if (st.opts.align == 0)
        st.opts.align = 1;
    if (st.opts.align & (st.opts.align - 1))
        return AG_ERR(ctx, AG_EINVAL, "plan: alignment %" PRIu64 " is not a power of two", st.opts.align);
    ag_arena_init(&st.scratch, ctx);
    ag_plan *p = ag_calloc(ctx, 1, sizeof *p);
    if (!p)
        return AG_OOM(ctx);
    p->ctx = ctx;
    ag_arena_init(&p->mem, ctx);
    p->align = st.opts.align;
    p->capacity = st.opts.capacity;
    p->zero_copy = st.opts.zero_copy;
    ag_status rc = ag_symtab_build(&st.env, AG_ROOT, true, &st.syms);
    if (rc == AG_OK) {
        st.nsym = 0;
        for (uint32_t k = 0; k < ag_symtab_count(st.syms); k++)
            if (ag_symtab_at(st.syms, k) + 1 > st.nsym)
                st.nsym = ag_symtab_at(st.syms, k) + 1;
        st.sym = ag_calloc(ctx, AG_PLAN_NZ(st.nsym), sizeof *st.sym);
        if (!st.sym)
            rc = AG_OOM(ctx);
    }
    if (rc == AG_OK)
        rc = ag_plan_steps(&st);
    if (rc == AG_OK)
        rc = ag_plan_lifetimes(&st);
    if (rc == AG_OK)
        rc = ag_plan_groups(&st);
    if (rc == AG_OK)
        rc = ag_plan_views(&st);
    if (rc == AG_OK && st.opts.inplace)
        rc = ag_plan_inplace(&st);
    for (uint32_t mt = 0; mt < AG_MEM_COUNT_ && rc == AG_OK; mt++)
        rc = place_arena(&st, (ag_mem_type)mt, p);
    if (rc == AG_OK) {
        place_constants(&st);
        rc = freeze(&st, p);
    }
    state_free(&st);
    if (rc != AG_OK) {
        plan_free(p);
        return rc;
    }
    *out = p;
    return AG_OK;
}

/* ---- accessors ---- */

uint64_t ag_plan_peak_bytes(const ag_plan *p) { return p->peak; }
uint64_t ag_plan_lower_bound_bytes(const ag_plan *p) { return p->lower_bound; }
uint32_t ag_plan_arena_count(const ag_plan *p) { return p->narenas; }
ag_mem_type ag_plan_arena_mem_type(const ag_plan *p, uint32_t k) { return p->arenas[k].mem_type; }
uint64_t ag_plan_arena_size(const ag_plan *p, uint32_t k) { return p->arenas[k].size; }
uint64_t ag_plan_arena_lower_bound(const ag_plan *p, uint32_t k) { return p->arenas[k].lower_bound; }
uint32_t ag_plan_tensor_count(const ag_plan *p) { return p->ntensors; }
const ag_plan_tensor *ag_plan_tensor_at(const ag_plan *p, uint32_t k) { return &p->tensors[k]; }
uint32_t ag_plan_buffer_count(const ag_plan *p) { return p->nbuffers; }
const char *ag_plan_buffer_name(const ag_plan *p, uint32_t b) { return p->buffers[b].name; }
uint64_t ag_plan_buffer_size(const ag_plan *p, uint32_t b) { return p->buffers[b].size; }
uint64_t ag_plan_buffer_offset(const ag_plan *p, uint32_t b) { return p->buffers[b].offset; }
ag_plan_region ag_plan_buffer_region(const ag_plan *p, uint32_t b) { return p->buffers[b].region; }
ag_mem_type ag_plan_buffer_mem_type(const ag_plan *p, uint32_t b) { return p->buffers[b].mem_type; }
uint32_t ag_plan_inplace_count(const ag_plan *p) { return p->ninplace; }
const ag_plan_inplace_rec *ag_plan_inplace_at(const ag_plan *p, uint32_t k) { return &p->inplace[k]; }
uint32_t ag_plan_inplace_refused_count(const ag_plan *p) { return p->nrefused; }
const ag_plan_inplace_rec *ag_plan_inplace_refused_at(const ag_plan *p, uint32_t k) { return &p->refused[k]; }
uint32_t ag_plan_note_count(const ag_plan *p) { return p->nnotes; }
const char *ag_plan_note_at(const ag_plan *p, uint32_t k) { return p->notes[k]; }

void ag_plan_buffer_span(const ag_plan *p, uint32_t b, uint64_t *first, uint64_t *last)
{
    *first = p->buffers[b].first;
    *last = p->buffers[b].last;
}

/* ---- output ---- */

static void put_str(ag_bufout *o, const char *s)
{
    ag_bufout_puts(o, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            ag_bufout_put(o, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            ag_bufout_puts(o, esc);
        } else {
            ag_bufout_put(o, s, 1);
        }
    }
    ag_bufout_puts(o, "\"");
}

static void put_u64(ag_bufout *o, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, v);
    ag_bufout_puts(o, b);
}

/* Offset of a tensor for the IO annotations: -1 outside arenas and
 * constants (user memory, bound at run time). */
static void put_io_offset(ag_bufout *o, const ag_plan *p, uint32_t t)
{
    if (t == AG_NONE || p->tensors[t].buffer == AG_NONE || p->tensors[t].region == AG_REGION_USER_INPUT ||
        p->tensors[t].region == AG_REGION_USER_OUTPUT)
        ag_bufout_puts(o, "-1");
    else
        put_u64(o, p->tensors[t].offset);
}

static void put_inplace_recs(ag_bufout *o, const ag_plan_inplace_rec *recs, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        const ag_plan_inplace_rec *r = &recs[k];
        ag_bufout_puts(o, k ? ", {\"node\": " : "{\"node\": ");
        put_str(o, r->node);
        ag_bufout_puts(o, ", \"input\": ");
        put_u64(o, r->input);
        ag_bufout_puts(o, ", \"output\": ");
        put_u64(o, r->output);
        ag_bufout_puts(o, ", \"reason\": ");
        put_str(o, r->reason);
        ag_bufout_puts(o, "}");
    }
}

ag_status ag_plan_write_json(const ag_plan *p, ag_sink sink)
{
    ag_bufout o;
    ag_bufout_init(&o, sink);
    ag_bufout_puts(&o, "{\"peak_bytes\": ");
    put_u64(&o, p->peak);
    ag_bufout_puts(&o, ", \"lower_bound_bytes\": ");
    put_u64(&o, p->lower_bound);
    ag_bufout_puts(&o, ", \"align\": ");
    put_u64(&o, p->align);
    ag_bufout_puts(&o, ",\n \"arenas\": [");
    for (uint32_t k = 0; k < p->narenas; k++) {
        ag_bufout_puts(&o, k ? ", {\"memory_type\": " : "{\"memory_type\": ");
        put_str(&o, ag_mem_type_name(p->arenas[k].mem_type));
        ag_bufout_puts(&o, ", \"size_bytes\": ");
        put_u64(&o, p->arenas[k].size);
        ag_bufout_puts(&o, ", \"lower_bound_bytes\": ");
        put_u64(&o, p->arenas[k].lower_bound);
        ag_bufout_puts(&o, "}");
    }
    ag_bufout_puts(&o, "],\n \"tensors\": [");
    bool firstt = true;
    for (uint32_t k = 0; k < p->ntensors; k++) {
        const ag_plan_tensor *t = &p->tensors[k];
        if (t->buffer == AG_NONE)
            continue;
        ag_bufout_puts(&o, firstt ? "\n  {\"node\": " : ",\n  {\"node\": ");
        firstt = false;
        put_str(&o, p->tensor_node_names[k]);
        ag_bufout_puts(&o, ", \"output\": ");
        put_u64(&o, t->output);
        ag_bufout_puts(&o, ", \"symbol\": ");
        put_str(&o, p->buffers[t->buffer].name);
        ag_bufout_puts(&o, ", \"region\": ");
        put_str(&o, ag_plan_region_name(t->region));
        ag_bufout_puts(&o, ", \"memory_type\": ");
        put_str(&o, ag_mem_type_name(t->mem_type));
        ag_bufout_puts(&o, ", \"offset\": ");
        put_u64(&o, t->offset);
        ag_bufout_puts(&o, ", \"size\": ");
        if (t->size == AG_SIZE_UNKNOWN)
            ag_bufout_puts(&o, "null");
        else
            put_u64(&o, t->size);
        ag_bufout_puts(&o, ", \"first_step\": ");
        put_u64(&o, p->buffers[t->buffer].first);
        ag_bufout_puts(&o, ", \"last_step\": ");
        put_u64(&o, p->buffers[t->buffer].last);
        ag_bufout_puts(&o, "}");
    }
    ag_bufout_puts(&o, "],\n \"io_offsets\": [");
    for (uint32_t k = 0; k < p->nnodes; k++) {
        const ag_plan_node *n = &p->nodes[k];
        ag_bufout_puts(&o, k ? ",\n  {\"node\": " : "\n  {\"node\": ");
        put_str(&o, n->name);
        ag_bufout_puts(&o, ", \"_input_offset\": [");
        for (uint32_t i = 0; i < n->nin; i++) {
            if (i)
                ag_bufout_puts(&o, ", ");
            put_io_offset(&o, p, p->node_inputs[n->in_first + i]);
        }
        ag_bufout_puts(&o, "], \"_output_offset\": [");
        for (uint32_t i = 0; i < n->nout; i++) {
            if (i)
                ag_bufout_puts(&o, ", ");
            put_io_offset(&o, p, n->out_first + i);
        }
        ag_bufout_puts(&o, "]}");
    }
    ag_bufout_puts(&o, "],\n \"continuous\": [");
    for (uint32_t k = 0; k < p->ncgroups; k++) {
        const ag_plan_cgroup *cg = &p->cgroups[k];
        ag_bufout_puts(&o, k ? ", {\"node\": " : "{\"node\": ");
        put_str(&o, cg->node);
        ag_bufout_puts(&o, cg->inputs ? ", \"operands\": \"inputs\"" : ", \"operands\": \"outputs\"");
        ag_bufout_puts(&o, cg->nopad ? ", \"no_padding\": true, \"offsets\": [" : ", \"no_padding\": false, \"offsets\": [");
        for (uint32_t m = 0; m < cg->count; m++) {
            if (m)
                ag_bufout_puts(&o, ", ");
            put_u64(&o, p->tensors[p->cmembers[cg->first + m]].offset);
        }
        ag_bufout_puts(&o, "]}");
    }
    ag_bufout_puts(&o, "],\n \"slices\": [");
    for (uint32_t k = 0; k < p->nslices; k++) {
        const ag_plan_slice *sl = &p->slices[k];
        ag_bufout_puts(&o, k ? ", {\"node\": " : "{\"node\": ");
        put_str(&o, sl->node);
        ag_bufout_puts(&o, ", \"offsets\": [");
        for (uint32_t m = 0; m < sl->count; m++) {
            if (m)
                ag_bufout_puts(&o, ", ");
            put_u64(&o, p->tensors[sl->first + m].offset);
        }
        ag_bufout_puts(&o, "]}");
    }
    ag_bufout_puts(&o, "],\n \"inplace\": [");
    put_inplace_recs(&o, p->inplace, p->ninplace);
    ag_bufout_puts(&o, "],\n \"inplace_refused\": [");
    put_inplace_recs(&o, p->refused, p->nrefused);
    ag_bufout_puts(&o, "],\n \"notes\": [");
    for (uint32_t k = 0; k < p->nnotes; k++) {
        if (k)
            ag_bufout_puts(&o, ", ");
        put_str(&o, p->notes[k]);
    }
    ag_bufout_puts(&o, "],\n \"output_reuse_input_mem_indexes\": [");
    for (uint32_t k = 0; k < p->nreuse; k++) {
        ag_bufout_puts(&o, k ? ", [" : "[");
        put_u64(&o, p->reuse[k][0]);
        ag_bufout_puts(&o, ", ");
        put_u64(&o, p->reuse[k][1]);
        ag_bufout_puts(&o, "]");
    }
    ag_bufout_puts(&o, "]}\n");
    return ag_bufout_flush(&o);
}

static void put_csv(ag_bufout *o, uint32_t id, uint64_t lower, uint64_t upper, uint64_t size)
{
    char line[96];
    snprintf(line, sizeof line, "%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", id, lower, upper, size);
    ag_bufout_puts(o, line);
}

ag_status ag_plan_write_csv(const ag_plan *p, uint32_t k, ag_sink sink)
{
    ag_bufout o;
    ag_bufout_init(&o, sink);
    ag_bufout_puts(&o, "id,lower,upper,size\n");
    uint32_t id = 0;
    for (uint32_t b = 0; b < p->nbuffers; b++) {
        const ag_plan_buffer *pb = &p->buffers[b];
        if (pb->arena != k || pb->cgroup != AG_NONE)
            continue;
        put_csv(&o, id++, pb->first, pb->last + 1, pb->size);
    }
    /* A continuous group is one buffer of the placement problem. */
    for (uint32_t c = 0; c < p->ncgroups; c++) {
        const ag_plan_cgroup *cg = &p->cgroups[c];
        uint64_t lo = UINT64_MAX, hi = 0, start = UINT64_MAX, end = 0;
        bool here = false;
        for (uint32_t m = 0; m < cg->count; m++) {
            const ag_plan_tensor *t = &p->tensors[p->cmembers[cg->first + m]];
            const ag_plan_buffer *pb = &p->buffers[t->buffer];
            here = pb->arena == k;
            lo = pb->first < lo ? pb->first : lo;
            hi = pb->last > hi ? pb->last : hi;
            start = t->offset < start ? t->offset : start;
            end = t->offset + pb->size > end ? t->offset + pb->size : end;
        }
        if (here && cg->count > 0)
            put_csv(&o, id++, lo, hi + 1, align_up(end - start, p->align));
    }
    return ag_bufout_flush(&o);
}
