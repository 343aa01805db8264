/* Reachability between nodes of one subgraph ("does a path of data or
 * control edges lead from a to b?"), the order test the passes use instead of
 * trusting one topological order.  A query is a depth-first search from a that
 * never enters nodes placed after b in a topological order (no path from them
 * can reach b); visited marks are generation stamps, so a query allocates
 * nothing and clears nothing.  Positions are spaced AG_REACH_GAP apart, so a
 * node a pass inserts can be placed between its neighbours (ag_reach_place)
 * without recomputing the order: a pass that inserts one copy per collective
 * stays linear instead of re-sorting the graph after each. */
#include "passes/pass_internal.h"

#define AG_REACH_GAP (UINT64_C(1) << 20)

struct ag_reach {
    ag_graph *g;
    ag_ctx *ctx;
    uint32_t cap;        /* node ids covered by the arrays */
    uint64_t *pos;       /* topological position; AG_REACH_NOPOS for dead or new ids */
    uint32_t *stamp;     /* last query that visited the node */
    ag_node_id *stack;   /* DFS stack: each node is pushed at most once per query */
    ag_node_id *order;   /* scratch for ag_graph_topo_order */
    uint32_t gen;
};

void ag_reach_destroy(ag_reach *r)
{
    if (r == NULL)
        return;
    ag_ctx *ctx = r->ctx;
    size_t n = r->cap;
    ag_free(ctx, r->pos, n * sizeof *r->pos);
    ag_free(ctx, r->stamp, n * sizeof *r->stamp);
    ag_free(ctx, r->stack, n * sizeof *r->stack);
    ag_free(ctx, r->order, n * sizeof *r->order);
    ag_free(ctx, r, sizeof *r);
}

/* Grows the per-node arrays to the graph's id capacity.  All four are
 * obtained before any is replaced, so a failure leaves r as it was. */
static ag_status grow(ag_reach *r)
{
    uint32_t cap = ag_graph_node_capacity(r->g);
    if (cap <= r->cap)
        return AG_OK;
    /* Geometric growth: passes place inserted nodes one at a time. */
    if (r->cap && cap < r->cap + r->cap / 2 && r->cap + r->cap / 2 > r->cap)
        cap = r->cap + r->cap / 2;
    ag_ctx *ctx = r->ctx;
    uint64_t *pos = ag_alloc(ctx, (size_t)cap * sizeof *pos);
    uint32_t *stamp = ag_calloc(ctx, cap, sizeof *stamp);
    ag_node_id *stack = ag_alloc(ctx, (size_t)cap * sizeof *stack);
    ag_node_id *order = ag_alloc(ctx, (size_t)cap * sizeof *order);
    if (!pos || !stamp || !stack || !order) {
        ag_free(ctx, pos, (size_t)cap * sizeof *pos);
        ag_free(ctx, stamp, (size_t)cap * sizeof *stamp);
        ag_free(ctx, stack, (size_t)cap * sizeof *stack);
        ag_free(ctx, order, (size_t)cap * sizeof *order);
        return AG_OOM(ctx);
    }
    size_t old = r->cap;
    /* Positions carry over, so the index still answers for the old nodes if
     * the recomputation that follows fails. */
    if (old) {
        memcpy(stamp, r->stamp, old * sizeof *stamp);
        memcpy(pos, r->pos, old * sizeof *pos);
    }
    for (size_t k = old; k < cap; k++)
        pos[k] = AG_REACH_NOPOS;
    ag_free(ctx, r->pos, old * sizeof *r->pos);
    ag_free(ctx, r->stamp, old * sizeof *r->stamp);
    ag_free(ctx, r->stack, old * sizeof *r->stack);
    ag_free(ctx, r->order, old * sizeof *r->order);
    r->pos = pos;
    r->stamp = stamp;
    r->stack = stack;
    r->order = order;
    r->cap = cap;
    return AG_OK;
}

ag_status ag_reach_update(ag_reach *r)
{
    AG_TRY(grow(r));
    uint32_t count = 0;
    AG_TRY(ag_graph_topo_order(r->g, r->order, &count));
    for (uint32_t k = 0; k < r->cap; k++)
        r->pos[k] = AG_REACH_NOPOS;
    for (uint32_t k = 0; k < count; k++)
        r->pos[r->order[k]] = ((uint64_t)k + 1) * AG_REACH_GAP;
    return AG_OK;
}

ag_status ag_reach_create(ag_graph *g, ag_reach **out)
{
    *out = NULL;
    ag_ctx *ctx = ag_graph_ctx(g);
    ag_reach *r = ag_calloc(ctx, 1, sizeof *r);
    if (r == NULL)
        return AG_OOM(ctx);
    r->g = g;
    r->ctx = ctx;
    ag_status st = ag_reach_update(r);
    if (st != AG_OK) {
        ag_reach_destroy(r);
        return st;
    }
    *out = r;
    return AG_OK;
}

uint64_t ag_reach_pos(const ag_reach *r, ag_node_id n)
{
    return n < r->cap ? r->pos[n] : AG_REACH_NOPOS;
}

ag_status ag_reach_place(ag_reach *r, ag_node_id n, bool *placed)
{
    *placed = false;
    AG_TRY(grow(r));
    const ag_graph *g = r->g;
    if (!ag_node_alive(g, n) || n >= r->cap)
        return AG_OK;
    /* lo: the latest predecessor, hi: the earliest successor.  A neighbour
     * without a position (another new node) leaves the placement undecided. */
    uint64_t lo = 0, hi = AG_REACH_NOPOS;
    uint32_t nin = ag_node_num_inputs(g, n);
    for (uint32_t i = 0; i < nin; i++) {
        ag_node_id p = ag_node_input_src(g, n, i).node;
        if (p == AG_NONE)
            continue;
        if (ag_reach_pos(r, p) == AG_REACH_NOPOS)
            return AG_OK;
        if (r->pos[p] > lo)
            lo = r->pos[p];
    }
    for (uint32_t k = 0; k < ag_node_num_ctrl_in(g, n); k++) {
        ag_node_id p = ag_node_ctrl_in(g, n, k);
        if (ag_reach_pos(r, p) == AG_REACH_NOPOS)
            return AG_OK;
        if (r->pos[p] > lo)
            lo = r->pos[p];
    }
    uint32_t nout = ag_node_num_outputs(g, n);
    for (uint32_t o = 0; o < nout; o++) {
        uint32_t nc = ag_node_output_nconsumers(g, n, o);
        for (uint32_t k = 0; k < nc; k++) {
            ag_node_id c = ag_node_output_consumer(g, n, o, k).node;
            if (ag_reach_pos(r, c) == AG_REACH_NOPOS)
                return AG_OK;
            if (r->pos[c] < hi)
                hi = r->pos[c];
        }
    }
    for (uint32_t k = 0; k < ag_node_num_ctrl_out(g, n); k++) {
        ag_node_id c = ag_node_ctrl_out(g, n, k);
        if (ag_reach_pos(r, c) == AG_REACH_NOPOS)
            return AG_OK;
        if (r->pos[c] < hi)
            hi = r->pos[c];
    }
    if (hi == AG_REACH_NOPOS)
        hi = lo + 2 * AG_REACH_GAP;
    if (hi <= lo || hi - lo < 2)
        return AG_OK; /* no room between the neighbours: the caller updates */
    r->pos[n] = lo + (hi - lo) / 2;
    *placed = true;
    return AG_OK;
}

bool ag_reach_edge_consistent(const ag_reach *r, ag_node_id src, ag_node_id dst)
{
    uint64_t ps = ag_reach_pos(r, src), pd = ag_reach_pos(r, dst);
    return ps != AG_REACH_NOPOS && pd != AG_REACH_NOPOS && ps < pd;
}

/* Pushes n if it can still lead to a node at position limit and was not seen
 * in this query. */
static inline void visit(ag_reach *r, ag_node_id n, uint64_t limit, uint32_t *sp)
{
    if (n >= r->cap || r->pos[n] > limit || r->stamp[n] == r->gen)
        return;
    r->stamp[n] = r->gen;
    r->stack[(*sp)++] = n;
}

bool ag_reaches(ag_reach *r, ag_node_id a, ag_node_id b)
{
    const ag_graph *g = r->g;
    uint64_t pa = ag_reach_pos(r, a), pb = ag_reach_pos(r, b);
    /* Nodes made after the last update have no position: the caller must
     * refresh the index after changing the graph. */
    ag_assert_internal(pa != AG_REACH_NOPOS && pb != AG_REACH_NOPOS);
    if (pa == AG_REACH_NOPOS || pb == AG_REACH_NOPOS || pa >= pb)
        return false;
    if (ag_node_owner(g, a) != ag_node_owner(g, b))
        return false;
    if (++r->gen == 0) {
        /* Stamps wrapped: forget every old mark once in 2^32 queries. */
        memset(r->stamp, 0, (size_t)r->cap * sizeof *r->stamp);
        r->gen = 1;
    }
    uint32_t sp = 0;
    r->stamp[a] = r->gen;
    r->stack[sp++] = a;
    while (sp > 0) {
        ag_node_id n = r->stack[--sp];
        if (n == b)
            return true;
        uint32_t nout = ag_node_num_outputs(g, n);
        for (uint32_t o = 0; o < nout; o++) {
            uint32_t nc = ag_node_output_nconsumers(g, n, o);
            for (uint32_t k = 0; k < nc; k++)
                visit(r, ag_node_output_consumer(g, n, o, k).node, pb, &sp);
        }
        uint32_t nctrl = ag_node_num_ctrl_out(g, n);
        for (uint32_t k = 0; k < nctrl; k++)
            visit(r, ag_node_ctrl_out(g, n, k), pb, &sp);
    }
    return false;
}
