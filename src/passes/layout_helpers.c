/* The helper algorithms the layout checkers share (reference notes 4.6):
 * which side of a pair an Identity can isolate, following reference chains
 * back to the buffer's owner, and the list comparisons the continuous-memory
 * checkers decide by. */
#include "passes/layout_internal.h"

static bool in_symbol(const ag_layout_ctx *lc, const ag_lanchor *a)
{
    return ag_layout_in_symbol(lc, a);
}

bool ag_layout_out_ref_from_input(const ag_layout_ctx *lc, const ag_lanchor *a)
{
    uint32_t nout = ag_node_num_outputs(lc->g, a->node);
    for (uint32_t o = 0; o < nout; o++) {
        ag_lanchor x = {a->node, o, false};
        if (in_symbol(lc, &x))
            return true;
    }
    return false;
}

bool ag_layout_get_ref_input(const ag_layout_ctx *lc, const ag_lanchor *a, ag_lanchor *in)
{
    uint32_t nin = ag_node_num_inputs(lc->g, a->node);
    for (uint32_t i = 0; i < nin; i++) {
        ag_lanchor x = {a->node, i, true};
        if (in_symbol(lc, &x)) {
            *in = x;
            return true;
        }
    }
    return false;
}

const ag_lanchor *ag_layout_lower_input(const ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    uint32_t pa = ag_layout_topo_pos(lc, a->node), pb = ag_layout_topo_pos(lc, b->node);
    const ag_lanchor *lo = pb < pa ? b : a, *hi = lo == a ? b : a;
    return ag_layout_out_ref_from_input(lc, lo) ? hi : lo;
}

ag_port ag_layout_real_producer(const ag_layout_ctx *lc, ag_port p)
{
    /* Each step moves to a producer earlier in the graph; the bound only
     * guards against a malformed graph. */
    for (uint32_t steps = ag_graph_node_count(lc->g); steps > 0 && p.node != AG_NONE; steps--) {
        uint32_t in;
        if (!ag_symtab_ref_from_input(lc->ops, lc->g, p.node, p.index, &in) || in == AG_NONE)
            break;
        ag_port src = ag_node_input_src(lc->g, p.node, in);
        if (src.node == AG_NONE)
            break;
        p = src;
    }
    return p;
}

static bool port_eq(ag_port a, ag_port b)
{
    return a.node == b.node && a.index == b.index;
}

bool ag_layout_all_real_inputs_same(const ag_layout_ctx *lc, ag_node_id n)
{
    uint32_t nin = ag_node_num_inputs(lc->g, n);
    ag_port first = {AG_NONE, 0};
    for (uint32_t i = 0; i < nin; i++) {
        ag_port p = ag_node_input_src(lc->g, n, i);
        if (p.node == AG_NONE)
            return false;
        p = ag_layout_real_producer(lc, p);
        if (i == 0)
            first = p;
        else if (!port_eq(p, first))
            return false;
    }
    return true;
}

static bool port_in(ag_port p, const ag_port *v, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        if (port_eq(p, v[k]))
            return true;
    return false;
}

bool ag_layout_same_or_partial_same(const ag_port *l, uint32_t nl, const ag_port *r, uint32_t nr)
{
    uint32_t i = 0, j = 0;
    bool found = false;
    for (i = 0; i < nl && !found; i++)
        for (j = 0; j < nr; j++)
            if (port_eq(l[i], r[j])) {
                found = true;
                break;
            }
    if (!found)
        return false;
    i--; /* the outer loop stepped past the match */
    if (i != 0 && j != 0)
        return false;
    while (i < nl && j < nr) {
        if (!port_eq(l[i], r[j]))
            return false;
        i++;
        j++;
    }
    /* The rest of the longer list must not come back to the other list. */
    for (; i < nl; i++)
        if (port_in(l[i], r, nr))
            return false;
    for (; j < nr; j++)
        if (port_in(r[j], l, nl))
            return false;
    return true;
}

/* True when b (nb ports) occurs as one contiguous run in a starting at a's
 * first element that is in b. */
static bool run_inside(const ag_port *a, uint32_t na, const ag_port *b, uint32_t nb)
{
    uint32_t p = 0;
    while (p < na && !port_in(a[p], b, nb))
        p++;
    if (p == na || na - p < nb)
        return false;
    for (uint32_t k = 0; k < nb; k++)
        if (!port_eq(a[p + k], b[k]))
            return false;
    return true;
}

ag_status ag_layout_nopad_cont_conflict(ag_layout_ctx *lc, ag_node_id a, ag_node_id b, bool *conflict)
{
    uint32_t na = ag_node_num_inputs(lc->g, a), nb = ag_node_num_inputs(lc->g, b);
    ag_port *pa = ag_arena_alloc(&lc->scratch, ((size_t)na + 1) * sizeof *pa);
    ag_port *pb = ag_arena_alloc(&lc->scratch, ((size_t)nb + 1) * sizeof *pb);
    if (pa == NULL || pb == NULL)
        return AG_OOM(lc->ctx);
    for (uint32_t i = 0; i < na; i++)
        pa[i] = ag_node_input_src(lc->g, a, i);
    for (uint32_t i = 0; i < nb; i++)
        pb[i] = ag_node_input_src(lc->g, b, i);
    bool common = false;
    for (uint32_t i = 0; i < na && !common; i++)
        common = pa[i].node != AG_NONE && port_in(pa[i], pb, nb);
    /* A subset or an identical list lies inside the span the allocator
     * gives the larger node; a partial overlap does not. */
    *conflict = common && !run_inside(pa, na, pb, nb) && !run_inside(pb, nb, pa, na);
    return AG_OK;
}

ag_status ag_layout_assign_var_insert_identity(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b,
                                               ag_layout_attr attr, bool *done)
{
    const ag_lanchor *r = (ag_layout_attrs_of(lc, a) & AG_LA_BIT(attr)) ? b : a;
    uint32_t m = ag_layout_sym_size(lc);
    *done = false;
    for (uint32_t k = 0; k < m; k++) {
        const ag_lanchor *x = ag_layout_sym_anchor(lc, k);
        if (!x->is_input || x->node != r->node)
            continue;
        ag_port p = ag_node_input_src(lc->g, x->node, x->index);
        if (p.node == AG_NONE || ag_ops_node_kind(lc->ops, lc->g, p.node) != AG_OPK_ASSIGN)
            continue;
        AG_TRY(ag_layout_conflict_at(lc, x, NULL));
        *done = true;
    }
    return AG_OK;
}
