/* The structural verifier of the graph IR: edge symmetry, index ranges, owner
 * consistency, unique names, subgraph links, the _parent_node_index contract
 * of subgraph Data and NetOutput nodes, and acyclicity.  It shares no code
 * with the mutators it checks, runs after every mutation helper in debug
 * builds (AG_DEBUG >= 3) and reads the storage directly, never the public
 * accessors, so that it sees what is really there. */
#include <stdio.h>
#include <stdlib.h>

#include "ir/graph_internal.h"

#define VFAIL(g, ...) AG_ERR((g)->ctx, AG_EVERIFY, "verify: " __VA_ARGS__)

static ag_status verify_oom(const ag_graph *g, bool quiet)
{
    return quiet ? AG_ENOMEM : AG_OOM(g->ctx);
}

static const char *nname(const ag_graph *g, ag_node_id n)
{
    return n < g->nodes.len ? AG_NODE(g, n)->name : "?";
}

/* ---- local check of one node (debug builds) ---- */

static bool cons_has(const ag_vec *cons, ag_node_id n, uint32_t i)
{
    for (uint32_t k = 0; k < cons->len; k++) {
        ag_port p = AG_VEC_AT(*cons, ag_port, k);
        if (p.node == n && p.index == i)
            return true;
    }
    return false;
}

static bool ids_has(const ag_vec *v, ag_node_id n)
{
    for (uint32_t k = 0; k < v->len; k++)
        if (AG_VEC_AT(*v, ag_node_id, k) == n)
            return true;
    return false;
}

bool ag__node_check(const ag_graph *g, ag_node_id n)
{
    const ag_noderec *r = AG_NODE(g, n);
    for (uint32_t i = 0; i < r->nin; i++) {
        ag_port p = r->in[i]->src;
        if (p.node == AG_NONE)
            continue;
        if (!ag__node_ok(g, p.node) || AG_NODE(g, p.node)->owner != r->owner || p.index >= AG_NODE(g, p.node)->nout ||
            !cons_has(&AG_NODE_OUT(g, p.node, p.index)->cons, n, i)) {
            VFAIL(g, AG_NODE_FMT " input %u: producer id %u output %u does not list it", AG_NODE_ARGS(g, n), i, p.node,
                  p.index);
            return false;
        }
    }
    for (uint32_t o = 0; o < r->nout; o++) {
        const ag_vec *cons = &r->out[o]->cons;
        for (uint32_t k = 0; k < cons->len; k++) {
            ag_port c = AG_VEC_AT(*cons, ag_port, k);
            if (!ag__node_ok(g, c.node) || AG_NODE(g, c.node)->owner != r->owner || c.index >= AG_NODE(g, c.node)->nin ||
                AG_NODE_IN(g, c.node, c.index)->src.node != n || AG_NODE_IN(g, c.node, c.index)->src.index != o) {
                VFAIL(g, AG_NODE_FMT " output %u: consumer id %u input %u does not point back", AG_NODE_ARGS(g, n), o,
                      c.node, c.index);
                return false;
            }
        }
    }
    for (uint32_t k = 0; k < r->ctrl_out.len; k++) {
        ag_node_id c = AG_VEC_AT(r->ctrl_out, ag_node_id, k);
        if (c == n || !ag__node_ok(g, c) || AG_NODE(g, c)->owner != r->owner || !ids_has(&AG_NODE(g, c)->ctrl_in, n)) {
            VFAIL(g, AG_NODE_FMT ": control successor id %u is invalid or does not list it", AG_NODE_ARGS(g, n), c);
            return false;
        }
    }
    for (uint32_t k = 0; k < r->ctrl_in.len; k++) {
        ag_node_id c = AG_VEC_AT(r->ctrl_in, ag_node_id, k);
        if (c == n || !ag__node_ok(g, c) || AG_NODE(g, c)->owner != r->owner || !ids_has(&AG_NODE(g, c)->ctrl_out, n)) {
            VFAIL(g, AG_NODE_FMT ": control predecessor id %u is invalid or does not list it", AG_NODE_ARGS(g, n), c);
            return false;
        }
    }
    return true;
}

void ag__debug_check_nodes(const ag_graph *g, const ag_node_id *nodes, uint32_t count)
{
#if AG_DEBUG >= 2
    for (uint32_t k = 0; k < count; k++) {
        if (!ag__node_ok(g, nodes[k]) || ag__node_check(g, nodes[k]))
            continue;
        fprintf(stderr, "aliasguard: graph inconsistent after a mutation: %s\n", ag_ctx_errmsg(g->ctx));
        ag__assert_fail("ag__node_check(g, n)", __FILE__, __LINE__);
    }
#else
    (void)g;
    (void)nodes;
    (void)count;
#endif
}

void ag__debug_check_graph(const ag_graph *g)
{
#if AG_DEBUG >= 3
    ag_status st = ag__graph_verify(g, true);
    if (st != AG_OK && st != AG_ENOMEM) {
        fprintf(stderr, "aliasguard: graph inconsistent after a mutation: %s\n", ag_ctx_errmsg(g->ctx));
        ag__assert_fail("ag_graph_verify(g) == AG_OK", __FILE__, __LINE__);
    }
#else
    (void)g;
#endif
}

/* ---- full check ---- */

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static ag_status check_subs(const ag_graph *g)
{
    uint64_t listed = 0;
    for (ag_sub_id s = 0; s < g->subs.len; s++) {
        const ag_subrec *sr = AG_SUB(g, s);
        if (!sr->alive)
            continue;
        uint32_t id;
        if (!ag_strmap_get(&g->sub_names, sr->name, &id) || id != s)
            return VFAIL(g, "subgraph \"%s\" is not found under its own name", sr->name);
        if (s == AG_ROOT) {
            if (sr->parent != AG_NONE || sr->depth != 0)
                return VFAIL(g, "root graph \"%s\" has a parent node", sr->name);
        } else {
            if (!ag__node_ok(g, sr->parent))
                return VFAIL(g, "subgraph \"%s\": parent node id %u does not exist", sr->name, sr->parent);
            const ag_noderec *p = AG_NODE(g, sr->parent);
            if (!ids_has(&p->subs, s))
                return VFAIL(g, "subgraph \"%s\": parent " AG_NODE_FMT " does not list it", sr->name,
                             AG_NODE_ARGS(g, sr->parent));
            if (sr->depth != AG_SUB(g, p->owner)->depth + 1)
                return VFAIL(g, "subgraph \"%s\": depth %u, expected %u", sr->name, sr->depth,
                             AG_SUB(g, p->owner)->depth + 1);
        }
        uint32_t count = 0;
        ag_node_id prev = AG_NONE;
        for (ag_node_id n = sr->head; n != AG_NONE; n = AG_NODE(g, n)->next) {
            if (n >= g->nodes.len || count > sr->count)
                return VFAIL(g, "subgraph \"%s\": node list is broken after %u nodes", sr->name, count);
            const ag_noderec *r = AG_NODE(g, n);
            if (r->owner != s)
                return VFAIL(g, "subgraph \"%s\" lists " AG_NODE_FMT " which belongs to subgraph %u", sr->name,
                             AG_NODE_ARGS(g, n), r->owner);
            if (r->prev != prev)
                return VFAIL(g, "subgraph \"%s\": " AG_NODE_FMT " has a wrong predecessor in the stored order",
                             sr->name, AG_NODE_ARGS(g, n));
            if (!ag_strmap_get(&sr->names, r->name, &id) || id != n)
                return VFAIL(g, "subgraph \"%s\": " AG_NODE_FMT " is not found by its name (duplicate name?)",
                             sr->name, AG_NODE_ARGS(g, n));
            prev = n;
            count++;
        }
        if (count != sr->count || prev != sr->tail)
            return VFAIL(g, "subgraph \"%s\": %u nodes listed, %u counted", sr->name, count, sr->count);
        listed += count;
    }
    uint64_t live = 0;
    for (ag_node_id n = 0; n < g->nodes.len; n++)
        if (AG_NODE(g, n)->owner != AG_NONE) {
            const ag_noderec *r = AG_NODE(g, n);
            if (!ag__sub_ok(g, r->owner))
                return VFAIL(g, AG_NODE_FMT ": owner subgraph %u does not exist", AG_NODE_ARGS(g, n), r->owner);
            for (uint32_t k = 0; k < r->subs.len; k++) {
                ag_sub_id c = AG_VEC_AT(r->subs, ag_sub_id, k);
                if (!ag__sub_ok(g, c) || AG_SUB(g, c)->parent != n)
                    return VFAIL(g, AG_NODE_FMT ": subgraph %u (index %u) does not name it as parent",
                                 AG_NODE_ARGS(g, n), c, k);
            }
            live++;
        }
    if (live != listed || live != g->live_nodes)
        return VFAIL(g, "%llu live nodes, %llu in subgraph lists, %u counted", (unsigned long long)live,
                     (unsigned long long)listed, g->live_nodes);
    return AG_OK;
}

static ag_status check_desc(const ag_graph *g, ag_node_id n, const char *side, uint32_t k, const ag_tensor_desc *d,
                            const ag_attrs *own)
{
    if (d->attrs != own)
        return VFAIL(g, AG_NODE_FMT " %s %u: descriptor attributes detached", AG_NODE_ARGS(g, n), side, k);
    if (d->rank != AG_RANK_UNKNOWN && (d->rank < 0 || d->rank > AG_MAX_RANK))
        return VFAIL(g, AG_NODE_FMT " %s %u: rank %d out of range", AG_NODE_ARGS(g, n), side, k, (int)d->rank);
    if (d->rank > 0 && d->dims == NULL)
        return VFAIL(g, AG_NODE_FMT " %s %u: rank %d but no dims", AG_NODE_ARGS(g, n), side, k, (int)d->rank);
    for (int32_t j = 0; j < d->rank; j++)
        if (d->dims[j] < AG_DIM_UNKNOWN || d->dims[j] > AG_MAX_DIM)
            return VFAIL(g, AG_NODE_FMT " %s %u: dim %d is %lld", AG_NODE_ARGS(g, n), side, k, (int)j,
                         (long long)d->dims[j]);
    if (d->name == NULL)
        return VFAIL(g, AG_NODE_FMT " %s %u: descriptor name is NULL", AG_NODE_ARGS(g, n), side, k);
    return AG_OK;
}

/* Data edges: every consumer entry points at an input that points back, and
 * every connected input is hit by exactly one consumer entry. */
static ag_status check_data(const ag_graph *g, bool quiet)
{
    uint32_t cap = g->nodes.len;
    uint64_t *base = ag_alloc(g->ctx, ((size_t)cap + 1) * sizeof *base);
    if (base == NULL)
        return verify_oom(g, quiet);
    uint64_t total = 0;
    for (ag_node_id n = 0; n < cap; n++) {
        base[n] = total;
        if (AG_NODE(g, n)->owner != AG_NONE)
            total += AG_NODE(g, n)->nin;
    }
    base[cap] = total;
    unsigned char *hit = total ? ag_calloc(g->ctx, (size_t)total, 1) : NULL;
    ag_status st = AG_OK;
    if (total && hit == NULL) {
        st = verify_oom(g, quiet);
        goto out;
    }
    for (ag_node_id n = 0; n < cap && st == AG_OK; n++) {
        const ag_noderec *r = AG_NODE(g, n);
        if (r->owner == AG_NONE)
            continue;
        for (uint32_t i = 0; i < r->nin && st == AG_OK; i++) {
            ag_port p = r->in[i]->src;
            st = check_desc(g, n, "input", i, &r->in[i]->desc, &r->in[i]->attrs);
            if (st != AG_OK || p.node == AG_NONE)
                continue;
            if (!ag__node_ok(g, p.node))
                st = VFAIL(g, AG_NODE_FMT " input %u: producer id %u does not exist", AG_NODE_ARGS(g, n), i, p.node);
            else if (AG_NODE(g, p.node)->owner != r->owner)
                st = VFAIL(g, AG_NODE_FMT " input %u: producer \"%s\" is in another subgraph", AG_NODE_ARGS(g, n), i,
                           nname(g, p.node));
            else if (p.index >= AG_NODE(g, p.node)->nout)
                st = VFAIL(g, AG_NODE_FMT " input %u: producer \"%s\" output %u out of range (%u outputs)",
                           AG_NODE_ARGS(g, n), i, nname(g, p.node), p.index, AG_NODE(g, p.node)->nout);
        }
    }
    /* Outputs in a second pass, so a bad input is reported as such first. */
    for (ag_node_id n = 0; n < cap && st == AG_OK; n++) {
        const ag_noderec *r = AG_NODE(g, n);
        if (r->owner == AG_NONE)
            continue;
        for (uint32_t o = 0; o < r->nout && st == AG_OK; o++) {
            st = check_desc(g, n, "output", o, &r->out[o]->desc, &r->out[o]->attrs);
            const ag_vec *cons = &r->out[o]->cons;
            for (uint32_t k = 0; k < cons->len && st == AG_OK; k++) {
                ag_port c = AG_VEC_AT(*cons, ag_port, k);
                if (!ag__node_ok(g, c.node))
                    st = VFAIL(g, AG_NODE_FMT " output %u: consumer id %u does not exist", AG_NODE_ARGS(g, n), o,
                               c.node);
                else if (c.index >= AG_NODE(g, c.node)->nin)
                    st = VFAIL(g, AG_NODE_FMT " output %u: consumer \"%s\" input %u out of range (%u inputs)",
                               AG_NODE_ARGS(g, n), o, nname(g, c.node), c.index, AG_NODE(g, c.node)->nin);
                else if (AG_NODE_IN(g, c.node, c.index)->src.node != n ||
                         AG_NODE_IN(g, c.node, c.index)->src.index != o)
                    st = VFAIL(g, AG_NODE_FMT " output %u: consumer \"%s\" input %u is fed by another producer",
                               AG_NODE_ARGS(g, n), o, nname(g, c.node), c.index);
                else if (hit[base[c.node] + c.index]++)
                    st = VFAIL(g, AG_NODE_FMT " output %u: consumer \"%s\" input %u listed twice",
                               AG_NODE_ARGS(g, n), o, nname(g, c.node), c.index);
            }
        }
    }
    for (ag_node_id n = 0; n < cap && st == AG_OK; n++) {
        const ag_noderec *r = AG_NODE(g, n);
        if (r->owner == AG_NONE)
            continue;
        for (uint32_t i = 0; i < r->nin && st == AG_OK; i++)
            if (r->in[i]->src.node != AG_NONE && !hit[base[n] + i])
                st = VFAIL(g, AG_NODE_FMT " input %u: producer \"%s\" output %u does not list it as a consumer",
                           AG_NODE_ARGS(g, n), i, nname(g, r->in[i]->src.node), r->in[i]->src.index);
    }
out:
    ag_free(g->ctx, hit, (size_t)total);
    ag_free(g->ctx, base, ((size_t)cap + 1) * sizeof *base);
    return st;
}

/* Control edges: the (src, dst) pairs seen from both ends are the same set. */
static ag_status check_ctrl(const ag_graph *g, bool quiet)
{
    uint64_t nout = 0, nin = 0;
    for (ag_node_id n = 0; n < g->nodes.len; n++) {
        const ag_noderec *r = AG_NODE(g, n);
        if (r->owner == AG_NONE)
            continue;
        nout += r->ctrl_out.len;
        nin += r->ctrl_in.len;
        for (uint32_t k = 0; k < r->ctrl_out.len; k++) {
            ag_node_id c = AG_VEC_AT(r->ctrl_out, ag_node_id, k);
            if (c == n)
                return VFAIL(g, AG_NODE_FMT ": control edge to itself", AG_NODE_ARGS(g, n));
            if (!ag__node_ok(g, c))
                return VFAIL(g, AG_NODE_FMT ": control successor id %u does not exist", AG_NODE_ARGS(g, n), c);
            if (AG_NODE(g, c)->owner != r->owner)
                return VFAIL(g, AG_NODE_FMT ": control successor \"%s\" is in another subgraph", AG_NODE_ARGS(g, n),
                             nname(g, c));
        }
        for (uint32_t k = 0; k < r->ctrl_in.len; k++) {
            ag_node_id c = AG_VEC_AT(r->ctrl_in, ag_node_id, k);
            if (c == n || !ag__node_ok(g, c))
                return VFAIL(g, AG_NODE_FMT ": control predecessor id %u is invalid", AG_NODE_ARGS(g, n), c);
        }
    }
    if (nout == 0 && nin == 0)
        return AG_OK;
    uint64_t *a = ag_alloc(g->ctx, (size_t)(nout ? nout : 1) * sizeof *a);
    uint64_t *b = ag_alloc(g->ctx, (size_t)(nin ? nin : 1) * sizeof *b);
    ag_status st = AG_OK;
    if (a == NULL || b == NULL) {
        st = verify_oom(g, quiet);
        goto out;
    }
    uint64_t ka = 0, kb = 0;
    for (ag_node_id n = 0; n < g->nodes.len; n++) {
        const ag_noderec *r = AG_NODE(g, n);
        if (r->owner == AG_NONE)
            continue;
        for (uint32_t k = 0; k < r->ctrl_out.len; k++)
            a[ka++] = (uint64_t)n << 32 | AG_VEC_AT(r->ctrl_out, ag_node_id, k);
        for (uint32_t k = 0; k < r->ctrl_in.len; k++)
            b[kb++] = (uint64_t)AG_VEC_AT(r->ctrl_in, ag_node_id, k) << 32 | n;
    }
    qsort(a, (size_t)nout, sizeof *a, u64_cmp);
    qsort(b, (size_t)nin, sizeof *b, u64_cmp);
    for (uint64_t k = 0; k < nout || k < nin; k++) {
        if (k > 0 && k < nout && a[k] == a[k - 1]) {
            st = VFAIL(g, "control edge \"%s\" -> \"%s\" is listed twice", nname(g, (uint32_t)(a[k] >> 32)),
                       nname(g, (uint32_t)a[k]));
            break;
        }
        if (k >= nout || k >= nin || a[k] != b[k]) {
            /* The smaller of the two is missing on the other side. */
            bool from_out = k < nout && (k >= nin || a[k] < b[k]);
            uint64_t e = from_out ? a[k] : b[k];
            st = VFAIL(g, "control edge \"%s\" -> \"%s\" is listed by its %s only",
                       nname(g, (uint32_t)(e >> 32)), nname(g, (uint32_t)e), from_out ? "source" : "destination");
            break;
        }
    }
out:
    ag_free(g->ctx, a, (size_t)(nout ? nout : 1) * sizeof *a);
    ag_free(g->ctx, b, (size_t)(nin ? nin : 1) * sizeof *b);
    return st;
}

/* _parent_node_index on subgraph Data nodes and NetOutput inputs. */
static ag_status check_parent_index(const ag_graph *g)
{
    for (ag_sub_id s = 0; s < g->subs.len; s++) {
        const ag_subrec *sr = AG_SUB(g, s);
        if (!sr->alive)
            continue;
        const ag_noderec *p = s == AG_ROOT ? NULL : AG_NODE(g, sr->parent);
        ag_node_id netout = AG_NONE;
        for (ag_node_id n = sr->head; n != AG_NONE; n = AG_NODE(g, n)->next) {
            const ag_noderec *r = AG_NODE(g, n);
            if (strcmp(r->type, "NetOutput") == 0) {
                if (netout != AG_NONE)
                    return VFAIL(g, "subgraph \"%s\" has two NetOutput nodes: \"%s\" and \"%s\"", sr->name,
                                 nname(g, netout), r->name);
                netout = n;
                if (p == NULL)
                    continue;
                for (uint32_t i = 0; i < r->nin; i++) {
                    const ag_attr *at = ag_attrs_find(&r->in[i]->attrs, "_parent_node_index");
                    if (at == NULL)
                        continue;
                    if (at->kind != AG_ATTR_INT)
                        return VFAIL(g, AG_NODE_FMT " input %u: _parent_node_index is not an int",
                                     AG_NODE_ARGS(g, n), i);
                    if (at->v.i < 0 || at->v.i >= (int64_t)p->nout)
                        return VFAIL(g,
                                     AG_NODE_FMT " input %u: _parent_node_index %lld out of range (parent \"%s\" has "
                                                 "%u outputs)",
                                     AG_NODE_ARGS(g, n), i, (long long)at->v.i, p->name, p->nout);
                }
            } else if (p != NULL && strcmp(r->type, "Data") == 0) {
                const ag_attr *at = ag_attrs_find(r->attrs, "_parent_node_index");
                if (at == NULL)
                    continue;
                if (at->kind != AG_ATTR_INT)
                    return VFAIL(g, AG_NODE_FMT ": _parent_node_index is not an int", AG_NODE_ARGS(g, n));
                if (at->v.i < 0 || at->v.i >= (int64_t)p->nin)
                    return VFAIL(g, AG_NODE_FMT ": _parent_node_index %lld out of range (parent \"%s\" has %u inputs)",
                                 AG_NODE_ARGS(g, n), (long long)at->v.i, p->name, p->nin);
            }
        }
    }
    return AG_OK;
}

ag_status ag__graph_verify(const ag_graph *g, bool quiet_oom)
{
    AG_TRY(check_subs(g));
    AG_TRY(check_data(g, quiet_oom));
    AG_TRY(check_ctrl(g, quiet_oom));
    AG_TRY(check_parent_index(g));
    uint32_t n = g->live_nodes;
    ag_node_id *order = ag_alloc(g->ctx, (size_t)(n ? n : 1) * sizeof *order);
    if (order == NULL)
        return verify_oom(g, quiet_oom);
    uint32_t count = 0;
    ag_status st = ag__topo_order(g, order, &count, quiet_oom);
    ag_free(g->ctx, order, (size_t)(n ? n : 1) * sizeof *order);
    return st;
}

ag_status ag_graph_verify(const ag_graph *g)
{
    return ag__graph_verify(g, false);
}
