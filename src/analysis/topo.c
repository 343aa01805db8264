/* Topological order of a whole graph: each subgraph sorted by Kahn's algorithm
 * over data and control edges with ties broken by stored order, a control
 * node's subgraphs emitted right after it (depth first, no recursion).
 * A subgraph whose stored order already respects every edge is taken as it is
 * (one linear pass); otherwise a binary heap keyed by stored position is used. */
#include <stdio.h>

#include "ir/graph_internal.h"

typedef struct topo_state {
    const ag_graph *g;
    uint32_t *pos;   /* stored position within the owner subgraph */
    uint32_t *indeg; /* remaining incoming edges */
    ag_node_id *heap;
    uint32_t nheap;
} topo_state;

static bool heap_less(const topo_state *t, uint32_t a, uint32_t b)
{
    return t->pos[t->heap[a]] < t->pos[t->heap[b]];
}

static void heap_push(topo_state *t, ag_node_id n)
{
    uint32_t k = t->nheap++;
    t->heap[k] = n;
    while (k > 0) {
        uint32_t p = (k - 1) / 2;
        if (!heap_less(t, k, p))
            break;
        ag_node_id tmp = t->heap[p];
        t->heap[p] = t->heap[k];
        t->heap[k] = tmp;
        k = p;
    }
}

static ag_node_id heap_pop(topo_state *t)
{
    ag_node_id top = t->heap[0];
    t->heap[0] = t->heap[--t->nheap];
    uint32_t k = 0;
    for (;;) {
        uint32_t l = 2 * k + 1, r = l + 1, m = k;
        if (l < t->nheap && heap_less(t, l, m))
            m = l;
        if (r < t->nheap && heap_less(t, r, m))
            m = r;
        if (m == k)
            break;
        ag_node_id tmp = t->heap[m];
        t->heap[m] = t->heap[k];
        t->heap[k] = tmp;
        k = m;
    }
    return top;
}

/* True when n is a node of subgraph s (edges never leave one; this guards
 * the sort against an inconsistent graph handed to the verifier). */
static bool in_sub(const ag_graph *g, ag_node_id n, ag_sub_id s)
{
    return n < g->nodes.len && AG_NODE(g, n)->owner == s;
}

/* First predecessor of n not yet emitted (every unemitted node has one). */
static ag_node_id unemitted_pred(const topo_state *t, ag_node_id n, ag_sub_id s)
{
    const ag_graph *g = t->g;
    const ag_noderec *r = AG_NODE(g, n);
    for (uint32_t i = 0; i < r->nin; i++) {
        ag_node_id p = r->in[i]->src.node;
        if (p != AG_NONE && in_sub(g, p, s) && t->indeg[p] > 0)
            return p;
    }
    for (uint32_t k = 0; k < r->ctrl_in.len; k++) {
        ag_node_id c = AG_VEC_AT(r->ctrl_in, ag_node_id, k);
        if (in_sub(g, c, s) && t->indeg[c] > 0)
            return c;
    }
    return AG_NONE;
}

/* Names the nodes of one cycle among the unemitted nodes of subgraph s. */
static ag_status report_cycle(topo_state *t, ag_sub_id s)
{
    const ag_graph *g = t->g;
    const ag_subrec *sr = AG_SUB(g, s);
    ag_node_id x = AG_NONE;
    for (ag_node_id n = sr->head; n != AG_NONE && x == AG_NONE; n = AG_NODE(g, n)->next)
        if (t->indeg[n] > 0)
            x = n;
    /* Walking predecessors count times lands on a node that lies on a cycle. */
    for (uint32_t k = 0; k < sr->count && x != AG_NONE; k++)
        x = unemitted_pred(t, x, s);
    if (x == AG_NONE) /* cannot happen with consistent edges */
        return AG_ERR(g->ctx, AG_ECYCLE, "cycle in subgraph \"%s\"", sr->name);
    /* Collect the cycle backwards (bounded), then print it along the edges. */
    ag_node_id path[8];
    uint32_t len = 0;
    ag_node_id y = x;
    do {
        if (len < 8)
            path[len] = y;
        len++;
        y = unemitted_pred(t, y, s);
    } while (y != x && y != AG_NONE && len <= sr->count);
    char buf[512];
    size_t at = 0;
    buf[0] = '\0';
    uint32_t shown = len < 8 ? len : 8;
    for (uint32_t k = shown; k-- > 0;) {
        int w = snprintf(buf + at, sizeof buf - at, "\"%s\" -> ", AG_NODE(g, path[k])->name);
        if (w < 0 || (size_t)w >= sizeof buf - at)
            break;
        at += (size_t)w;
    }
    /* path runs backwards from x, so the print starts at path[shown-1] and a
     * complete cycle closes on that same node. */
    if (len > shown)
        snprintf(buf + at, sizeof buf - at, "...");
    else
        snprintf(buf + at, sizeof buf - at, "\"%s\"", AG_NODE(g, path[shown - 1])->name);
    return AG_ERR(g->ctx, AG_ECYCLE, "cycle in subgraph \"%s\" through " AG_NODE_FMT ": %s", sr->name,
                  AG_NODE_ARGS(g, x), buf);
}

/* Sorts subgraph s into out (sr->count ids). */
static ag_status sort_sub(topo_state *t, ag_sub_id s, ag_node_id *out)
{
    const ag_graph *g = t->g;
    const ag_subrec *sr = AG_SUB(g, s);
    uint32_t k = 0;
    for (ag_node_id n = sr->head; n != AG_NONE; n = AG_NODE(g, n)->next)
        t->pos[n] = k++;
    /* Fast path: the stored order already is topological. */
    bool ordered = true;
    k = 0;
    for (ag_node_id n = sr->head; n != AG_NONE && ordered; n = AG_NODE(g, n)->next) {
        const ag_noderec *r = AG_NODE(g, n);
        uint32_t deg = 0;
        for (uint32_t i = 0; i < r->nin; i++) {
            ag_node_id p = r->in[i]->src.node;
            if (p != AG_NONE && in_sub(g, p, s)) {
                deg++;
                if (t->pos[p] >= t->pos[n])
                    ordered = false;
            }
        }
        for (uint32_t j = 0; j < r->ctrl_in.len; j++) {
            ag_node_id c = AG_VEC_AT(r->ctrl_in, ag_node_id, j);
            if (in_sub(g, c, s)) {
                deg++;
                if (t->pos[c] >= t->pos[n])
                    ordered = false;
            }
        }
        t->indeg[n] = deg;
        out[k++] = n;
    }
    if (ordered)
        return AG_OK;
    /* Finish the in-degrees the fast path did not reach. */
    for (ag_node_id n = sr->head; n != AG_NONE; n = AG_NODE(g, n)->next) {
        const ag_noderec *r = AG_NODE(g, n);
        uint32_t deg = 0;
        for (uint32_t i = 0; i < r->nin; i++)
            deg += r->in[i]->src.node != AG_NONE && in_sub(g, r->in[i]->src.node, s);
        for (uint32_t j = 0; j < r->ctrl_in.len; j++)
            deg += in_sub(g, AG_VEC_AT(r->ctrl_in, ag_node_id, j), s);
        t->indeg[n] = deg;
    }
    t->nheap = 0;
    for (ag_node_id n = sr->head; n != AG_NONE; n = AG_NODE(g, n)->next)
        if (t->indeg[n] == 0)
            heap_push(t, n);
    uint32_t emitted = 0;
    while (t->nheap > 0) {
        ag_node_id n = heap_pop(t);
        out[emitted++] = n;
        const ag_noderec *r = AG_NODE(g, n);
        for (uint32_t o = 0; o < r->nout; o++) {
            const ag_vec *cons = &r->out[o]->cons;
            for (uint32_t j = 0; j < cons->len; j++) {
                ag_node_id c = AG_VEC_AT(*cons, ag_port, j).node;
                if (in_sub(g, c, s) && --t->indeg[c] == 0)
                    heap_push(t, c);
            }
        }
        for (uint32_t j = 0; j < r->ctrl_out.len; j++) {
            ag_node_id c = AG_VEC_AT(r->ctrl_out, ag_node_id, j);
            if (in_sub(g, c, s) && --t->indeg[c] == 0)
                heap_push(t, c);
        }
    }
    if (emitted < sr->count)
        return report_cycle(t, s);
    return AG_OK;
}

typedef struct topo_frame {
    ag_sub_id sub;
    uint32_t k;
} topo_frame;

ag_status ag__topo_order(const ag_graph *g, ag_node_id *out, uint32_t *count, bool quiet_oom)
{
    ag_ctx *ctx = g->ctx;
    uint32_t cap = g->nodes.len, nsub = g->subs.len, live = g->live_nodes;
    if (count)
        *count = 0;
    topo_state t = {.g = g};
    size_t ncap = cap ? cap : 1, nlive = live ? live : 1;
    t.pos = ag_alloc(ctx, ncap * sizeof *t.pos);
    t.indeg = ag_alloc(ctx, ncap * sizeof *t.indeg);
    t.heap = ag_alloc(ctx, nlive * sizeof *t.heap);
    ag_node_id *sorted = ag_alloc(ctx, nlive * sizeof *sorted);
    uint32_t *seg = ag_alloc(ctx, (size_t)nsub * sizeof *seg);
    topo_frame *stack = ag_alloc(ctx, ((size_t)nsub + 1) * sizeof *stack);
    ag_status st = AG_OK;
    if (!t.pos || !t.indeg || !t.heap || !sorted || !seg || !stack) {
        st = quiet_oom ? AG_ENOMEM : AG_OOM(ctx);
        goto out;
    }
    uint32_t at = 0;
    for (ag_sub_id s = 0; s < nsub && st == AG_OK; s++) {
        seg[s] = at;
        if (!AG_SUB(g, s)->alive)
            continue;
        st = sort_sub(&t, s, sorted + at);
        at += AG_SUB(g, s)->count;
    }
    if (st != AG_OK)
        goto out;
    uint32_t n = 0, depth = 0;
    stack[depth++] = (topo_frame){AG_ROOT, 0};
    while (depth > 0) {
        topo_frame *f = &stack[depth - 1];
        if (f->k == AG_SUB(g, f->sub)->count) {
            depth--;
            continue;
        }
        ag_node_id x = sorted[seg[f->sub] + f->k++];
        out[n++] = x;
        const ag_vec *subs = &AG_NODE(g, x)->subs;
        /* Pushed in reverse so that the first subgraph comes out first. */
        for (uint32_t k = subs->len; k-- > 0;) {
            ag_sub_id c = AG_VEC_AT(*subs, ag_sub_id, k);
            if (ag__sub_ok(g, c) && depth <= nsub)
                stack[depth++] = (topo_frame){c, 0};
        }
    }
    ag_assert_internal(n == live);
    if (count)
        *count = n;
out:
    ag_free(ctx, t.pos, ncap * sizeof *t.pos);
    ag_free(ctx, t.indeg, ncap * sizeof *t.indeg);
    ag_free(ctx, t.heap, nlive * sizeof *t.heap);
    ag_free(ctx, sorted, nlive * sizeof *sorted);
    ag_free(ctx, seg, (size_t)nsub * sizeof *seg);
    ag_free(ctx, stack, ((size_t)nsub + 1) * sizeof *stack);
    return st;
}

ag_status ag_graph_topo_order(const ag_graph *g, ag_node_id *out, uint32_t *count)
{
    if (out == NULL && g->live_nodes > 0)
        return AG_ERR(g->ctx, AG_EINVAL, "topological order: output buffer is NULL");
    return ag__topo_order(g, out, count, false);
}

ag_status ag_sub_topo_order(const ag_graph *g, ag_sub_id s, ag_node_id *out, uint32_t *count)
{
    *count = 0;
    if (!ag_sub_alive(g, s))
        return AG_ERR(g->ctx, AG_EINVAL, "topological order: subgraph id %u is not a live subgraph", (unsigned)s);
    ag_ctx *ctx = g->ctx;
    size_t ncap = g->nodes.len ? g->nodes.len : 1, nsub = AG_SUB(g, s)->count ? AG_SUB(g, s)->count : 1;
    topo_state t = {.g = g};
    /* pos and indeg are indexed by node id but only the subgraph's entries
     * are touched, so the cost is that of the subgraph. */
    t.pos = ag_alloc(ctx, ncap * sizeof *t.pos);
    t.indeg = ag_alloc(ctx, ncap * sizeof *t.indeg);
    t.heap = ag_alloc(ctx, nsub * sizeof *t.heap);
    ag_status st = t.pos && t.indeg && t.heap ? sort_sub(&t, s, out) : AG_OOM(ctx);
    if (st == AG_OK)
        *count = AG_SUB(g, s)->count;
    ag_free(ctx, t.pos, ncap * sizeof *t.pos);
    ag_free(ctx, t.indeg, ncap * sizeof *t.indeg);
    ag_free(ctx, t.heap, nsub * sizeof *t.heap);
    return st;
}
