/* The mutation helpers every pass uses (reference notes §2.1): insert a node
 * before an input or after an output with the control-edge migration rules,
 * isolate a node keeping its dependencies, remove a node with its subgraphs.
 * Each helper validates, then reserves all memory it will need, then changes
 * the graph with primitives that cannot fail: a failure leaves it untouched. */
#include <stdio.h>
#include <stdlib.h>

#include "ir/graph_internal.h"

/* String attributes that follow a node onto the node inserted next to it, so
 * the copy runs on the same stream, core budget and super-kernel scope. */
static const char *const copied_attrs[] = {"_user_stream_label", "_op_aicore_num", "_op_vectorcore_num",
                                           "_super_kernel_scope", "_super_kernel_options"};
#define NCOPIED (sizeof copied_attrs / sizeof copied_attrs[0])

/* Control edges from these stay on the node they guard: the clean must finish
 * right before that node's atomic accumulation, not before the copy. */
static bool is_atomic_clean(const char *type)
{
    return strcmp(type, "AtomicAddrClean") == 0 || strcmp(type, "MemSet") == 0;
}

/* A Switch's outgoing control edges select a branch; they must not move. */
static bool is_switch(const char *type)
{
    return strcmp(type, "Switch") == 0 || strcmp(type, "RefSwitch") == 0 || strcmp(type, "SwitchN") == 0;
}

static ag_status check_node(ag_graph *g, const char *what, ag_node_id n)
{
    if (!ag__node_ok(g, n))
        return AG_ERR(g->ctx, AG_EINVAL, "%s: node id %u does not exist", what, n);
    return AG_OK;
}

/* Reserves room on node for the whitelisted attributes of from. */
static ag_status reserve_copied_attrs(ag_graph *g, ag_node_id from, ag_node_id node)
{
    uint32_t k = 0;
    for (size_t a = 0; a < NCOPIED; a++) {
        const ag_attr *at = ag_attrs_find(AG_NODE(g, from)->attrs, copied_attrs[a]);
        if (at && at->kind == AG_ATTR_STRING && !ag_attrs_find(AG_NODE(g, node)->attrs, copied_attrs[a]))
            k++;
    }
    return ag__attrs_reserve(g, AG_NODE(g, node)->attrs, k);
}

static void copy_attrs(ag_graph *g, ag_node_id from, ag_node_id node)
{
    for (size_t a = 0; a < NCOPIED; a++) {
        const ag_attr *at = ag_attrs_find(AG_NODE(g, from)->attrs, copied_attrs[a]);
        /* Values are immutable arena data of the same graph: share them. */
        if (at && at->kind == AG_ATTR_STRING)
            ag__attrs_put_shared(AG_NODE(g, node)->attrs, at);
    }
}

/* Copies the node ids of v into a fresh array (NULL with *n == 0 when empty). */
static ag_status snapshot_ids(ag_graph *g, const ag_vec *v, ag_node_id **out, uint32_t *n)
{
    *out = NULL;
    *n = v->len;
    if (v->len == 0)
        return AG_OK;
    *out = ag_alloc(g->ctx, (size_t)v->len * sizeof **out);
    if (*out == NULL)
        return AG_ENOMEM;
    memcpy(*out, v->data, (size_t)v->len * sizeof **out);
    return AG_OK;
}

ag_status ag_graph_insert_before(ag_graph *g, ag_node_id dst, uint32_t i, ag_node_id node, uint32_t node_in,
                                 uint32_t node_out)
{
    ag_ctx *ctx = g->ctx;
    AG_TRY(check_node(g, "insert before", dst));
    AG_TRY(check_node(g, "insert before", node));
    ag_noderec *d = AG_NODE(g, dst), *nr = AG_NODE(g, node);
    if (node == dst)
        return AG_ERR(ctx, AG_EINVAL, "insert " AG_NODE_FMT " before itself", AG_NODE_ARGS(g, node));
    if (d->owner != nr->owner)
        return AG_ERR(ctx, AG_EINVAL, "insert " AG_NODE_FMT " before " AG_NODE_FMT ": different subgraphs",
                      AG_NODE_ARGS(g, node), AG_NODE_ARGS(g, dst));
    if (i >= d->nin)
        return AG_ERR(ctx, AG_EINVAL, AG_NODE_FMT ": input %u out of range (%u inputs)", AG_NODE_ARGS(g, dst), i,
                      d->nin);
    if (node_in >= nr->nin || node_out >= nr->nout)
        return AG_ERR(ctx, AG_EINVAL, "insert " AG_NODE_FMT ": input %u / output %u out of range (%u inputs, %u outputs)",
                      AG_NODE_ARGS(g, node), node_in, node_out, nr->nin, nr->nout);
    ag_port p = d->in[i]->src;
    if (p.node == AG_NONE)
        return AG_ERR(ctx, AG_EINVAL, "insert before " AG_NODE_FMT " input %u: the input has no producer",
                      AG_NODE_ARGS(g, dst), i);
    if (p.node == node)
        return AG_ERR(ctx, AG_EINVAL, "insert " AG_NODE_FMT " before " AG_NODE_FMT " input %u: it already feeds it",
                      AG_NODE_ARGS(g, node), AG_NODE_ARGS(g, dst), i);
    if (nr->in[node_in]->src.node != AG_NONE)
        return AG_ERR(ctx, AG_EEXIST, "insert " AG_NODE_FMT ": its input %u is already connected",
                      AG_NODE_ARGS(g, node), node_in);
    if (nr->out[node_out]->cons.len != 0)
        return AG_ERR(ctx, AG_EEXIST, "insert " AG_NODE_FMT ": its output %u already has consumers",
                      AG_NODE_ARGS(g, node), node_out);

    /* Control predecessors of dst that move onto node. */
    ag_node_id *moved = NULL;
    uint32_t nmoved = 0;
    if (snapshot_ids(g, &d->ctrl_in, &moved, &nmoved) != AG_OK)
        return AG_OOM(ctx);
    uint32_t moved_alloc = nmoved;
    uint32_t w = 0;
    for (uint32_t k = 0; k < nmoved; k++) {
        ag_node_id c = moved[k];
        if (c != node && !is_atomic_clean(AG_NODE(g, c)->type))
            moved[w++] = c;
    }
    nmoved = w;
    ag_status st = AG_OK;
    ag_tensor_desc *nd = &AG_NODE_IN(g, node, node_in)->desc;
    if (ag_vec_reserve(ctx, &AG_NODE_OUT(g, p.node, p.index)->cons, sizeof(ag_port), 1) != AG_OK ||
        ag_vec_reserve(ctx, &AG_NODE_OUT(g, node, node_out)->cons, sizeof(ag_port), 1) != AG_OK ||
        ag_vec_reserve(ctx, &AG_NODE(g, node)->ctrl_in, sizeof(ag_node_id), nmoved) != AG_OK ||
        reserve_copied_attrs(g, dst, node) != AG_OK) {
        st = AG_OOM(ctx);
        goto out;
    }
    if (nd->dtype == AG_DT_UNDEFINED &&
        (st = ag_desc_copy_type(g, nd, &AG_NODE_OUT(g, p.node, p.index)->desc)) != AG_OK)
        goto out;

    ag__unlink_data(g, dst, i);
    ag__link_data(g, p.node, p.index, node, node_in);
    ag__link_data(g, node, node_out, dst, i);
    for (uint32_t k = 0; k < nmoved; k++) {
        /* Unlinking c -> dst frees the slot in c's list that c -> node takes. */
        ag__unlink_ctrl(g, moved[k], dst);
        if (!ag__has_ctrl(g, moved[k], node))
            ag__link_ctrl(g, moved[k], node);
    }
    copy_attrs(g, dst, node);
    ag__order_move(g, node, dst, false);
    ag_node_id touched[3] = {dst, node, p.node};
    ag__debug_check_nodes(g, touched, 3);
    ag__debug_check_nodes(g, moved, nmoved);
    ag__debug_check_graph(g);
out:
    ag_free(ctx, moved, (size_t)moved_alloc * sizeof *moved);
    return st;
}

static int port_cmp(const void *a, const void *b)
{
    const ag_port *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

ag_status ag_graph_insert_after(ag_graph *g, ag_node_id src, uint32_t o, const ag_port *dsts, uint32_t ndsts,
                                ag_node_id node, uint32_t node_in, uint32_t node_out)
{
    ag_ctx *ctx = g->ctx;
    AG_TRY(check_node(g, "insert after", src));
    AG_TRY(check_node(g, "insert after", node));
    ag_noderec *s = AG_NODE(g, src), *nr = AG_NODE(g, node);
    if (node == src)
        return AG_ERR(ctx, AG_EINVAL, "insert " AG_NODE_FMT " after itself", AG_NODE_ARGS(g, node));
    if (s->owner != nr->owner)
        return AG_ERR(ctx, AG_EINVAL, "insert " AG_NODE_FMT " after " AG_NODE_FMT ": different subgraphs",
                      AG_NODE_ARGS(g, node), AG_NODE_ARGS(g, src));
    if (o >= s->nout)
        return AG_ERR(ctx, AG_EINVAL, AG_NODE_FMT ": output %u out of range (%u outputs)", AG_NODE_ARGS(g, src), o,
                      s->nout);
    if (node_in >= nr->nin || node_out >= nr->nout)
        return AG_ERR(ctx, AG_EINVAL, "insert " AG_NODE_FMT ": input %u / output %u out of range (%u inputs, %u outputs)",
                      AG_NODE_ARGS(g, node), node_in, node_out, nr->nin, nr->nout);
    if (nr->in[node_in]->src.node != AG_NONE)
        return AG_ERR(ctx, AG_EEXIST, "insert " AG_NODE_FMT ": its input %u is already connected",
                      AG_NODE_ARGS(g, node), node_in);

    /* The consumers to move, as a private sorted copy (duplicates show up as
     * neighbours); with dsts == NULL every consumer except node itself. */
    const ag_vec *cons = &s->out[o]->cons;
    uint32_t nd = dsts ? ndsts : cons->len;
    ag_port *mv = nd ? ag_alloc(ctx, (size_t)nd * sizeof *mv) : NULL;
    ag_node_id *moved = NULL;
    uint32_t nmoved = 0, moved_alloc = 0;
    ag_status st = AG_OK;
    if (nd && mv == NULL)
        return AG_OOM(ctx);
    uint32_t nmv = 0;
    for (uint32_t k = 0; k < nd; k++) {
        ag_port p = dsts ? dsts[k] : AG_VEC_AT(*cons, ag_port, k);
        if (!dsts && p.node == node)
            continue;
        if (dsts) {
            if (!ag__node_ok(g, p.node) || p.index >= AG_NODE(g, p.node)->nin ||
                AG_NODE_IN(g, p.node, p.index)->src.node != src || AG_NODE_IN(g, p.node, p.index)->src.index != o) {
                st = AG_ERR(ctx, AG_ENOTFOUND, "insert after " AG_NODE_FMT " output %u: node id %u input %u is not one of its consumers",
                            AG_NODE_ARGS(g, src), o, p.node, p.index);
                goto out;
            }
            if (p.node == node) {
                st = AG_ERR(ctx, AG_EINVAL, "insert " AG_NODE_FMT " after " AG_NODE_FMT ": it cannot consume its own output",
                            AG_NODE_ARGS(g, node), AG_NODE_ARGS(g, src));
                goto out;
            }
        }
        mv[nmv++] = p;
    }
    if (dsts && nmv > 1) {
        qsort(mv, nmv, sizeof *mv, port_cmp);
        for (uint32_t k = 1; k < nmv; k++)
            if (mv[k].node == mv[k - 1].node && mv[k].index == mv[k - 1].index) {
                st = AG_ERR(ctx, AG_EINVAL, "insert after " AG_NODE_FMT ": consumer " AG_NODE_FMT " input %u listed twice",
                            AG_NODE_ARGS(g, src), AG_NODE_ARGS(g, mv[k].node), mv[k].index);
                goto out;
            }
    }
    if (!is_switch(s->type)) {
        if (snapshot_ids(g, &s->ctrl_out, &moved, &nmoved) != AG_OK) {
            st = AG_OOM(ctx);
            goto out;
        }
        moved_alloc = nmoved;
        uint32_t w = 0;
        for (uint32_t k = 0; k < nmoved; k++)
            if (moved[k] != node)
                moved[w++] = moved[k];
        nmoved = w;
    }
    ag_tensor_desc *ndesc = &AG_NODE_IN(g, node, node_in)->desc;
    if (ag_vec_reserve(ctx, &AG_NODE_OUT(g, src, o)->cons, sizeof(ag_port), 1) != AG_OK ||
        ag_vec_reserve(ctx, &AG_NODE_OUT(g, node, node_out)->cons, sizeof(ag_port), nmv) != AG_OK ||
        ag_vec_reserve(ctx, &AG_NODE(g, node)->ctrl_out, sizeof(ag_node_id), nmoved) != AG_OK ||
        reserve_copied_attrs(g, src, node) != AG_OK) {
        st = AG_OOM(ctx);
        goto out;
    }
    if (ndesc->dtype == AG_DT_UNDEFINED &&
        (st = ag_desc_copy_type(g, ndesc, &AG_NODE_OUT(g, src, o)->desc)) != AG_OK)
        goto out;

    ag__link_data(g, src, o, node, node_in);
    /* Keep the consumers' original order on node's output when dsts was NULL. */
    for (uint32_t k = 0; k < nmv; k++) {
        ag__unlink_data(g, mv[k].node, mv[k].index);
        ag__link_data(g, node, node_out, mv[k].node, mv[k].index);
    }
    for (uint32_t k = 0; k < nmoved; k++) {
        ag__unlink_ctrl(g, src, moved[k]);
        if (!ag__has_ctrl(g, node, moved[k]))
            ag__link_ctrl(g, node, moved[k]);
    }
    copy_attrs(g, src, node);
    ag__order_move(g, node, src, true);
    ag_node_id touched[2] = {src, node};
    ag__debug_check_nodes(g, touched, 2);
    ag__debug_check_nodes(g, moved, nmoved);
    ag__debug_check_graph(g);
out:
    ag_free(ctx, mv, (size_t)nd * sizeof *mv);
    ag_free(ctx, moved, (size_t)moved_alloc * sizeof *moved);
    return st;
}

static int id_cmp(const void *a, const void *b)
{
    ag_node_id x = *(const ag_node_id *)a, y = *(const ag_node_id *)b;
    return x < y ? -1 : x > y;
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts ids and drops duplicates; returns the new count. */
static uint32_t sort_unique(ag_node_id *ids, uint32_t n)
{
    if (n < 2)
        return n;
    qsort(ids, n, sizeof *ids, id_cmp);
    uint32_t w = 1;
    for (uint32_t k = 1; k < n; k++)
        if (ids[k] != ids[w - 1])
            ids[w++] = ids[k];
    return w;
}

static bool sorted_has_u64(const uint64_t *v, uint32_t n, uint64_t key)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (v[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo] == key;
}

/* Scratch state of ag_graph_isolate_node, freed in one place. */
typedef struct isolate_tmp {
    ag_node_id *preds, *succs;
    uint32_t npred, nsucc, pred_alloc, succ_alloc;
    uint64_t *relinked; /* (producer << 32 | consumer) of the data edges the io_map makes */
    uint32_t nrelinked;
    uint32_t *pairs; /* new control edges as (pred index, succ index) */
    uint32_t npairs, pairs_alloc;
    uint32_t *succ_in; /* per succ: number of new edges into it */
} isolate_tmp;

static void isolate_tmp_free(ag_ctx *ctx, isolate_tmp *t)
{
    ag_free(ctx, t->preds, (size_t)t->pred_alloc * sizeof *t->preds);
    ag_free(ctx, t->succs, (size_t)t->succ_alloc * sizeof *t->succs);
    ag_free(ctx, t->relinked, (size_t)t->nrelinked * sizeof *t->relinked);
    ag_free(ctx, t->pairs, (size_t)t->pairs_alloc * 2 * sizeof *t->pairs);
    ag_free(ctx, t->succ_in, (size_t)t->succ_alloc * sizeof *t->succ_in);
}

ag_status ag_graph_isolate_node(ag_graph *g, ag_node_id n, const int32_t *io_map, uint32_t map_len)
{
    ag_ctx *ctx = g->ctx;
    AG_TRY(check_node(g, "isolate", n));
    ag_noderec *r = AG_NODE(g, n);
    if (map_len > 0 && io_map == NULL)
        return AG_ERR(ctx, AG_EINVAL, "isolate " AG_NODE_FMT ": io_map is NULL but map_len is %u", AG_NODE_ARGS(g, n),
                      map_len);
    if (map_len > r->nin)
        return AG_ERR(ctx, AG_EINVAL, "isolate " AG_NODE_FMT ": io_map has %u entries but the node has %u inputs",
                      AG_NODE_ARGS(g, n), map_len, r->nin);
    for (uint32_t i = 0; i < map_len; i++) {
        if (io_map[i] >= 0 && (uint32_t)io_map[i] >= r->nout)
            return AG_ERR(ctx, AG_EINVAL, "isolate " AG_NODE_FMT ": input %u maps to output %d out of range (%u outputs)",
                          AG_NODE_ARGS(g, n), i, io_map[i], r->nout);
        if (io_map[i] < 0 || r->in[i]->src.node == AG_NONE || r->in[i]->src.node == n ||
            r->out[io_map[i]]->cons.len == 0)
            continue;
        /* A consumer input takes one producer: two inputs cannot feed one output. */
        for (uint32_t j = 0; j < i; j++)
            if (io_map[j] == io_map[i] && r->in[j]->src.node != AG_NONE && r->in[j]->src.node != n)
                return AG_ERR(ctx, AG_EINVAL, "isolate " AG_NODE_FMT ": inputs %u and %u both map to output %d",
                              AG_NODE_ARGS(g, n), j, i, io_map[i]);
    }

    isolate_tmp t;
    memset(&t, 0, sizeof t);
    ag_status st = AG_OK;
    ag_node_id hub = AG_NONE;

    /* Predecessors and successors over data and control edges. */
    uint64_t npred = r->ctrl_in.len, nsucc = r->ctrl_out.len, nrel = 0;
    for (uint32_t i = 0; i < r->nin; i++)
        npred += r->in[i]->src.node != AG_NONE;
    for (uint32_t o = 0; o < r->nout; o++)
        nsucc += r->out[o]->cons.len;
    for (uint32_t i = 0; i < map_len; i++)
        if (io_map[i] >= 0 && r->in[i]->src.node != AG_NONE && r->in[i]->src.node != n)
            nrel += r->out[io_map[i]]->cons.len;
    if (npred > UINT32_MAX / 2 || nsucc > UINT32_MAX / 2 || nrel > UINT32_MAX / 2)
        return AG_ERR(ctx, AG_EINVAL, "isolate " AG_NODE_FMT ": too many edges", AG_NODE_ARGS(g, n));
    t.pred_alloc = (uint32_t)npred;
    t.succ_alloc = (uint32_t)nsucc;
    t.nrelinked = (uint32_t)nrel;
    if ((npred && (t.preds = ag_alloc(ctx, (size_t)npred * sizeof *t.preds)) == NULL) ||
        (nsucc && (t.succs = ag_alloc(ctx, (size_t)nsucc * sizeof *t.succs)) == NULL) ||
        (nsucc && (t.succ_in = ag_calloc(ctx, (size_t)nsucc, sizeof *t.succ_in)) == NULL) ||
        (nrel && (t.relinked = ag_alloc(ctx, (size_t)nrel * sizeof *t.relinked)) == NULL)) {
        st = AG_OOM(ctx);
        goto out;
    }
    for (uint32_t i = 0; i < r->nin; i++)
        if (r->in[i]->src.node != AG_NONE && r->in[i]->src.node != n)
            t.preds[t.npred++] = r->in[i]->src.node;
    for (uint32_t k = 0; k < r->ctrl_in.len; k++)
        t.preds[t.npred++] = AG_VEC_AT(r->ctrl_in, ag_node_id, k);
    for (uint32_t o = 0; o < r->nout; o++)
        for (uint32_t k = 0; k < r->out[o]->cons.len; k++) {
            ag_node_id c = AG_VEC_AT(r->out[o]->cons, ag_port, k).node;
            if (c != n)
                t.succs[t.nsucc++] = c;
        }
    for (uint32_t k = 0; k < r->ctrl_out.len; k++)
        t.succs[t.nsucc++] = AG_VEC_AT(r->ctrl_out, ag_node_id, k);
    t.npred = sort_unique(t.preds, t.npred);
    t.nsucc = sort_unique(t.succs, t.nsucc);

    /* Data re-links: room on each producer output for all edges it gains. */
    uint32_t nr = 0;
    for (uint32_t i = 0; i < map_len; i++) {
        ag_port p = r->in[i]->src;
        if (io_map[i] < 0 || p.node == AG_NONE || p.node == n)
            continue;
        const ag_vec *oc = &r->out[io_map[i]]->cons;
        for (uint32_t k = 0; k < oc->len; k++)
            t.relinked[nr++] = (uint64_t)p.node << 32 | AG_VEC_AT(*oc, ag_port, k).node;
        uint32_t gain = 0;
        for (uint32_t j = 0; j < map_len; j++) {
            ag_port q = r->in[j]->src;
            if (io_map[j] >= 0 && q.node == p.node && q.index == p.index)
                gain += r->out[io_map[j]]->cons.len;
        }
        if (ag_vec_reserve(ctx, &AG_NODE_OUT(g, p.node, p.index)->cons, sizeof(ag_port), gain) != AG_OK) {
            st = AG_OOM(ctx);
            goto out;
        }
    }
    if (nr > 1)
        qsort(t.relinked, nr, sizeof *t.relinked, u64_cmp);

    uint64_t prod = (uint64_t)t.npred * t.nsucc;
    bool use_hub = prod > 1000 && prod > (uint64_t)t.npred + t.nsucc;
    if (use_hub) {
        char name[64];
        snprintf(name, sizeof name, "%.40s_ctrl_hub", r->name);
        bool taken = ag_strmap_get(&AG_SUB(g, r->owner)->names, name, NULL);
        if ((st = ag_graph_add_node(g, r->owner, "NoOp", taken ? NULL : name, 0, 0, &hub)) != AG_OK)
            goto out;
        r = AG_NODE(g, n); /* the node array may have moved */
        if (ag_vec_reserve(ctx, &AG_NODE(g, hub)->ctrl_in, sizeof(ag_node_id), t.npred) != AG_OK ||
            ag_vec_reserve(ctx, &AG_NODE(g, hub)->ctrl_out, sizeof(ag_node_id), t.nsucc) != AG_OK) {
            st = AG_OOM(ctx);
            goto out;
        }
        for (uint32_t k = 0; k < t.npred; k++)
            if (ag_vec_reserve(ctx, &AG_NODE(g, t.preds[k])->ctrl_out, sizeof(ag_node_id), 1) != AG_OK) {
                st = AG_OOM(ctx);
                goto out;
            }
        for (uint32_t k = 0; k < t.nsucc; k++)
            if (ag_vec_reserve(ctx, &AG_NODE(g, t.succs[k])->ctrl_in, sizeof(ag_node_id), 1) != AG_OK) {
                st = AG_OOM(ctx);
                goto out;
            }
    } else if (prod > 0) {
        t.pairs_alloc = (uint32_t)prod;
        if ((t.pairs = ag_alloc(ctx, (size_t)prod * 2 * sizeof *t.pairs)) == NULL) {
            st = AG_OOM(ctx);
            goto out;
        }
        for (uint32_t a = 0; a < t.npred; a++) {
            ag_node_id p = t.preds[a];
            uint32_t gain = 0;
            for (uint32_t b = 0; b < t.nsucc; b++) {
                ag_node_id s = t.succs[b];
                if (p == s || ag__has_ctrl(g, p, s) || ag__has_data(g, p, s) ||
                    sorted_has_u64(t.relinked, nr, (uint64_t)p << 32 | s))
                    continue;
                t.pairs[2 * t.npairs] = a;
                t.pairs[2 * t.npairs + 1] = b;
                t.npairs++;
                t.succ_in[b]++;
                gain++;
            }
            if (ag_vec_reserve(ctx, &AG_NODE(g, p)->ctrl_out, sizeof(ag_node_id), gain) != AG_OK) {
                st = AG_OOM(ctx);
                goto out;
            }
        }
        for (uint32_t b = 0; b < t.nsucc; b++)
            if (ag_vec_reserve(ctx, &AG_NODE(g, t.succs[b])->ctrl_in, sizeof(ag_node_id), t.succ_in[b]) != AG_OK) {
                st = AG_OOM(ctx);
                goto out;
            }
    }

    /* Commit: nothing below can fail. */
    for (uint32_t i = 0; i < map_len; i++) {
        ag_port p = r->in[i]->src;
        if (io_map[i] < 0 || p.node == AG_NONE || p.node == n)
            continue;
        ag__unlink_data(g, n, i);
        ag_out_anchor *oa = r->out[io_map[i]];
        while (oa->cons.len > 0) {
            ag_port c = AG_VEC_AT(oa->cons, ag_port, 0);
            ag__unlink_data(g, c.node, c.index);
            if (c.node != n)
                ag__link_data(g, p.node, p.index, c.node, c.index);
        }
    }
    for (uint32_t i = 0; i < r->nin; i++)
        ag__unlink_data(g, n, i);
    for (uint32_t o = 0; o < r->nout; o++)
        while (r->out[o]->cons.len > 0) {
            ag_port c = AG_VEC_AT(r->out[o]->cons, ag_port, r->out[o]->cons.len - 1);
            ag__unlink_data(g, c.node, c.index);
        }
    while (r->ctrl_in.len > 0)
        ag__unlink_ctrl(g, AG_VEC_AT(r->ctrl_in, ag_node_id, r->ctrl_in.len - 1), n);
    while (r->ctrl_out.len > 0)
        ag__unlink_ctrl(g, n, AG_VEC_AT(r->ctrl_out, ag_node_id, r->ctrl_out.len - 1));
    if (use_hub) {
        for (uint32_t k = 0; k < t.npred; k++)
            ag__link_ctrl(g, t.preds[k], hub);
        for (uint32_t k = 0; k < t.nsucc; k++)
            ag__link_ctrl(g, hub, t.succs[k]);
        ag__order_move(g, hub, n, true);
    } else {
        for (uint32_t k = 0; k < t.npairs; k++)
            ag__link_ctrl(g, t.preds[t.pairs[2 * k]], t.succs[t.pairs[2 * k + 1]]);
    }
    hub = AG_NONE; /* kept */
    ag__debug_check_nodes(g, &n, 1);
    ag__debug_check_nodes(g, t.preds, t.npred);
    ag__debug_check_nodes(g, t.succs, t.nsucc);
    ag__debug_check_graph(g);
out:
    if (hub != AG_NONE)
        ag__node_discard(g, hub); /* made for this call, still without edges */
    isolate_tmp_free(ctx, &t);
    return st;
}

/* Drops every node of a dying subgraph without unlinking edge by edge: edges
 * never leave a subgraph, so all their ends die together. */
static void kill_sub(ag_graph *g, ag_sub_id s)
{
    ag_subrec *sr = AG_SUB(g, s);
    for (ag_node_id m = sr->head; m != AG_NONE;) {
        ag_noderec *mr = AG_NODE(g, m);
        ag_node_id next = mr->next;
        ag_vec_free(g->ctx, &mr->ctrl_in, sizeof(ag_node_id));
        ag_vec_free(g->ctx, &mr->ctrl_out, sizeof(ag_node_id));
        ag_vec_free(g->ctx, &mr->subs, sizeof(ag_sub_id));
        for (uint32_t o = 0; o < mr->nout; o++)
            ag_vec_free(g->ctx, &mr->out[o]->cons, sizeof(ag_port));
        mr->owner = AG_NONE;
        mr->prev = mr->next = AG_NONE;
        g->live_nodes--;
        m = next;
    }
    ag_strmap_del(&g->sub_names, sr->name);
    ag_strmap_free(g->ctx, &sr->names);
    ag_free(g->ctx, sr->order, (size_t)sr->order_cap * sizeof *sr->order);
    sr->order = NULL;
    sr->order_cap = 0;
    sr->order_valid = false;
    sr->head = sr->tail = AG_NONE;
    sr->count = 0;
    sr->alive = false;
}

ag_status ag_graph_remove_node(ag_graph *g, ag_node_id n)
{
    AG_TRY(check_node(g, "remove node", n));
    ag_noderec *r = AG_NODE(g, n);

    /* Former neighbours, for the debug check; skipped when that allocation fails. */
    ag_node_id *nb = NULL;
    uint32_t nnb = 0, nb_alloc = 0;
#if AG_DEBUG >= 2
    nb_alloc = r->ctrl_in.len + r->ctrl_out.len + r->nin;
    for (uint32_t o = 0; o < r->nout; o++)
        nb_alloc += r->out[o]->cons.len;
    nb = nb_alloc ? ag_alloc(g->ctx, (size_t)nb_alloc * sizeof *nb) : NULL;
    if (nb != NULL) {
        for (uint32_t i = 0; i < r->nin; i++)
            if (r->in[i]->src.node != AG_NONE)
                nb[nnb++] = r->in[i]->src.node;
        for (uint32_t o = 0; o < r->nout; o++)
            for (uint32_t k = 0; k < r->out[o]->cons.len; k++)
                nb[nnb++] = AG_VEC_AT(r->out[o]->cons, ag_port, k).node;
        for (uint32_t k = 0; k < r->ctrl_in.len; k++)
            nb[nnb++] = AG_VEC_AT(r->ctrl_in, ag_node_id, k);
        for (uint32_t k = 0; k < r->ctrl_out.len; k++)
            nb[nnb++] = AG_VEC_AT(r->ctrl_out, ag_node_id, k);
    }
#endif

    /* A subgraph is created after its parent node, which is created after its
     * own subgraph: one pass in id order reaches nested subgraphs after the
     * subgraph holding their parent has died. */
    for (ag_sub_id s = 1; s < g->subs.len; s++) {
        ag_subrec *sr = AG_SUB(g, s);
        if (sr->alive && (sr->parent == n || !ag__node_ok(g, sr->parent)))
            kill_sub(g, s);
    }
    for (uint32_t i = 0; i < r->nin; i++)
        ag__unlink_data(g, n, i);
    for (uint32_t o = 0; o < r->nout; o++)
        while (r->out[o]->cons.len > 0) {
            ag_port c = AG_VEC_AT(r->out[o]->cons, ag_port, r->out[o]->cons.len - 1);
            ag__unlink_data(g, c.node, c.index);
        }
    while (r->ctrl_in.len > 0)
        ag__unlink_ctrl(g, AG_VEC_AT(r->ctrl_in, ag_node_id, r->ctrl_in.len - 1), n);
    while (r->ctrl_out.len > 0)
        ag__unlink_ctrl(g, n, AG_VEC_AT(r->ctrl_out, ag_node_id, r->ctrl_out.len - 1));
    ag__node_discard(g, n);

    ag__debug_check_nodes(g, nb, nnb);
    ag_free(g->ctx, nb, (size_t)nb_alloc * sizeof *nb);
    ag__debug_check_graph(g);
    return AG_OK;
}
