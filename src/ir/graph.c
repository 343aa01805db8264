/* The graph IR core: lifecycle, subgraphs, nodes, anchors and the data and
 * control edge primitives (DESIGN "The IR").  Every public mutator checks its
 * arguments and reserves memory before it changes anything, so a failure
 * (AG_ENOMEM included) leaves the graph as it was.  Attribute values and
 * descriptors are in graph_attrs.c, the insertion helpers in graph_mutate.c. */
#include <stdio.h>

#include "ir/graph_internal.h"

static const char ag_empty_str_[] = "";

void ag__desc_init(ag_tensor_desc *d, ag_attrs *attrs)
{
    d->name = ag_empty_str_;
    d->dtype = AG_DT_UNDEFINED;
    d->rank = AG_RANK_UNKNOWN;
    d->dims = NULL;
    d->mem_type = AG_MEM_HBM;
    d->format = AG_FMT_ND;
    d->value = NULL;
    d->attrs = attrs;
    attrs->items = NULL;
    attrs->count = 0;
    attrs->cap = 0;
}

/* ---- lifecycle ---- */

static void sub_free(ag_ctx *ctx, ag_subrec *s)
{
    ag_strmap_free(ctx, &s->names);
    if (s->order)
        ag_free(ctx, s->order, (size_t)s->order_cap * sizeof *s->order);
    s->order = NULL;
    s->order_cap = 0;
    s->order_valid = false;
}

static void node_free_vecs(ag_ctx *ctx, ag_noderec *r)
{
    ag_vec_free(ctx, &r->ctrl_in, sizeof(ag_node_id));
    ag_vec_free(ctx, &r->ctrl_out, sizeof(ag_node_id));
    ag_vec_free(ctx, &r->subs, sizeof(ag_sub_id));
    for (uint32_t o = 0; o < r->nout; o++)
        ag_vec_free(ctx, &r->out[o]->cons, sizeof(ag_port));
}

ag_status ag_graph_create(ag_ctx *ctx, const char *name, ag_graph **out)
{
    if (ctx == NULL || out == NULL)
        return AG_EINVAL;
    *out = NULL;
    if (name == NULL)
        return AG_ERR(ctx, AG_EINVAL, "ag_graph_create: root graph name is NULL");
    ag_graph *g = ag_calloc(ctx, 1, sizeof *g);
    if (g == NULL)
        return AG_OOM(ctx);
    g->ctx = ctx;
    ag_arena_init(&g->arena, ctx);
    ag_strmap_init(&g->sub_names);
    ag_strmap_init(&g->types);
    ag_subrec root = {0};
    root.parent = AG_NONE;
    root.alive = true;
    root.head = root.tail = AG_NONE;
    ag_strmap_init(&root.names);
    root.name = ag_arena_strdup(&g->arena, name);
    if (root.name == NULL || ag_vec_push(ctx, &g->subs, sizeof root, &root) != AG_OK ||
        ag_strmap_put(ctx, &g->sub_names, root.name, AG_ROOT) != AG_OK) {
        ag_graph_destroy(g);
        return AG_OOM(ctx);
    }
    *out = g;
    return AG_OK;
}

void ag_graph_destroy(ag_graph *g)
{
    if (g == NULL)
        return;
    ag_ctx *ctx = g->ctx;
    for (uint32_t n = 0; n < g->nodes.len; n++)
        node_free_vecs(ctx, AG_NODE(g, n));
    for (uint32_t s = 0; s < g->subs.len; s++)
        sub_free(ctx, AG_SUB(g, s));
    ag_vec_free(ctx, &g->nodes, sizeof(ag_noderec));
    ag_vec_free(ctx, &g->subs, sizeof(ag_subrec));
    ag_vec_free(ctx, &g->type_strs, sizeof(const char *));
    ag_strmap_free(ctx, &g->sub_names);
    ag_strmap_free(ctx, &g->types);
    ag__ptrset_free(ctx, &g->tensors);
    ag_arena_reset(&g->arena);
    ag_free(ctx, g, sizeof *g);
}

ag_ctx *ag_graph_ctx(const ag_graph *g)
{
    return g ? g->ctx : NULL;
}

/* ---- subgraphs ---- */

uint32_t ag_graph_sub_count(const ag_graph *g)
{
    return g->subs.len;
}

bool ag_sub_alive(const ag_graph *g, ag_sub_id s)
{
    return ag__sub_ok(g, s);
}

const char *ag_sub_name(const ag_graph *g, ag_sub_id s)
{
    return s < g->subs.len ? AG_SUB(g, s)->name : ag_empty_str_;
}

ag_node_id ag_sub_parent(const ag_graph *g, ag_sub_id s)
{
    return s < g->subs.len ? AG_SUB(g, s)->parent : AG_NONE;
}

uint32_t ag_sub_depth(const ag_graph *g, ag_sub_id s)
{
    return s < g->subs.len ? AG_SUB(g, s)->depth : 0;
}

uint32_t ag_sub_node_count(const ag_graph *g, ag_sub_id s)
{
    return ag__sub_ok(g, s) ? AG_SUB(g, s)->count : 0;
}

ag_node_id ag_sub_node_at(const ag_graph *g, ag_sub_id s, uint32_t k)
{
    if (!ag__sub_ok(g, s))
        return AG_NONE;
    /* The record is reached through g->subs.data, which is not const: the
     * cache is refreshed in place (order_cap >= count is kept by add_node). */
    ag_subrec *sr = AG_SUB(g, s);
    if (k >= sr->count)
        return AG_NONE;
    if (!sr->order_valid) {
        uint32_t j = 0;
        for (ag_node_id n = sr->head; n != AG_NONE; n = AG_NODE(g, n)->next)
            sr->order[j++] = n;
        ag_assert_internal(j == sr->count);
        sr->order_valid = true;
    }
    return sr->order[k];
}

ag_node_id ag_sub_find_node(const ag_graph *g, ag_sub_id s, const char *name)
{
    uint32_t id;
    if (!ag__sub_ok(g, s) || name == NULL || !ag_strmap_get(&AG_SUB(g, s)->names, name, &id))
        return AG_NONE;
    return id;
}

ag_sub_id ag_graph_find_sub(const ag_graph *g, const char *name)
{
    uint32_t id;
    if (name == NULL || !ag_strmap_get(&g->sub_names, name, &id))
        return AG_NONE;
    return id;
}

ag_status ag_graph_add_subgraph(ag_graph *g, ag_node_id parent, const char *name, ag_sub_id *out)
{
    ag_ctx *ctx = g->ctx;
    if (out)
        *out = AG_NONE;
    if (!ag__node_ok(g, parent))
        return AG_ERR(ctx, AG_EINVAL, "add subgraph: node id %u does not exist", parent);
    if (name == NULL || name[0] == '\0')
        return AG_ERR(ctx, AG_EINVAL, AG_NODE_FMT ": subgraph name is empty", AG_NODE_ARGS(g, parent));
    if (ag_strmap_get(&g->sub_names, name, NULL))
        return AG_ERR(ctx, AG_EEXIST, AG_NODE_FMT ": subgraph name \"%s\" is already used", AG_NODE_ARGS(g, parent),
                      name);
    if (g->subs.len >= AG_NONE - 1)
        return AG_ERR(ctx, AG_EINVAL, "add subgraph \"%s\": too many subgraphs", name);
    ag_sub_id id = g->subs.len;
    ag_subrec sr = {0};
    sr.parent = parent;
    sr.depth = AG_SUB(g, AG_NODE(g, parent)->owner)->depth + 1;
    sr.alive = true;
    sr.head = sr.tail = AG_NONE;
    ag_strmap_init(&sr.names);
    if (ag_vec_reserve(ctx, &AG_NODE(g, parent)->subs, sizeof(ag_sub_id), 1) != AG_OK ||
        ag_vec_reserve(ctx, &g->subs, sizeof(ag_subrec), 1) != AG_OK ||
        (sr.name = ag_arena_strdup(&g->arena, name)) == NULL ||
        ag_strmap_put(ctx, &g->sub_names, sr.name, id) != AG_OK)
        return AG_OOM(ctx);
    ag_status st = ag_vec_push(ctx, &g->subs, sizeof sr, &sr);
    ag_assert(st == AG_OK);
    st = ag_vec_push(ctx, &AG_NODE(g, parent)->subs, sizeof id, &id);
    ag_assert(st == AG_OK);
    (void)st;
    if (out)
        *out = id;
    return AG_OK;
}

/* ---- nodes ---- */

uint32_t ag_graph_node_capacity(const ag_graph *g)
{
    return g->nodes.len;
}

uint32_t ag_graph_node_count(const ag_graph *g)
{
    return g->live_nodes;
}

bool ag_node_alive(const ag_graph *g, ag_node_id n)
{
    return ag__node_ok(g, n);
}

static const char *intern_type(ag_graph *g, const char *type)
{
    uint32_t k;
    if (ag_strmap_get(&g->types, type, &k))
        return AG_VEC_AT(g->type_strs, const char *, k);
    char *copy;
    if (ag_vec_reserve(g->ctx, &g->type_strs, sizeof(const char *), 1) != AG_OK ||
        (copy = ag_arena_strdup(&g->arena, type)) == NULL ||
        ag_strmap_put(g->ctx, &g->types, copy, g->type_strs.len) != AG_OK)
        return NULL;
    const char *c = copy;
    ag_status st = ag_vec_push(g->ctx, &g->type_strs, sizeof c, &c);
    ag_assert(st == AG_OK);
    (void)st;
    return copy;
}

/* New pointer arrays holding the old anchors plus fresh ones up to newn.
 * Both arrays stay NULL when the count does not change. */
static ag_status grow_anchors(ag_graph *g, const ag_noderec *r, uint32_t nin, uint32_t nout, ag_in_anchor ***in,
                              ag_out_anchor ***out)
{
    uint32_t oin = r ? r->nin : 0, oout = r ? r->nout : 0;
    *in = NULL;
    *out = NULL;
    if (nin > oin) {
        ag_in_anchor **arr = ag_arena_alloc(&g->arena, (size_t)nin * sizeof *arr);
        ag_in_anchor *blk = ag_arena_alloc(&g->arena, (size_t)(nin - oin) * sizeof *blk);
        if (arr == NULL || blk == NULL)
            return AG_ENOMEM;
        if (oin)
            memcpy(arr, r->in, (size_t)oin * sizeof *arr);
        for (uint32_t k = 0; k < nin - oin; k++) {
            ag__desc_init(&blk[k].desc, &blk[k].attrs);
            blk[k].src.node = AG_NONE;
            blk[k].src.index = 0;
            arr[oin + k] = &blk[k];
        }
        *in = arr;
    }
    if (nout > oout) {
        ag_out_anchor **arr = ag_arena_alloc(&g->arena, (size_t)nout * sizeof *arr);
        ag_out_anchor *blk = ag_arena_alloc(&g->arena, (size_t)(nout - oout) * sizeof *blk);
        if (arr == NULL || blk == NULL)
            return AG_ENOMEM;
        if (oout)
            memcpy(arr, r->out, (size_t)oout * sizeof *arr);
        for (uint32_t k = 0; k < nout - oout; k++) {
            ag__desc_init(&blk[k].desc, &blk[k].attrs);
            arr[oout + k] = &blk[k];
        }
        *out = arr;
    }
    return AG_OK;
}

/* A name "<type>_<id>" (with a "_<k>" suffix if a user took it) in the arena. */
static const char *generated_name(ag_graph *g, ag_sub_id s, const char *type, ag_node_id id)
{
    size_t cap = strlen(type) + 40;
    char *buf = ag_alloc(g->ctx, cap);
    if (buf == NULL)
        return NULL;
    snprintf(buf, cap, "%s_%u", type, id);
    for (uint32_t k = 1; ag_strmap_get(&AG_SUB(g, s)->names, buf, NULL); k++)
        snprintf(buf, cap, "%s_%u_%u", type, id, k);
    const char *r = ag_arena_strdup(&g->arena, buf);
    ag_free(g->ctx, buf, cap);
    return r;
}

ag_status ag_graph_add_node(ag_graph *g, ag_sub_id s, const char *type, const char *name, uint32_t nin,
                            uint32_t nout, ag_node_id *out)
{
    ag_ctx *ctx = g->ctx;
    if (out)
        *out = AG_NONE;
    if (!ag__sub_ok(g, s))
        return AG_ERR(ctx, AG_EINVAL, "add node \"%s\": subgraph %u does not exist", name ? name : "", s);
    if (type == NULL || type[0] == '\0')
        return AG_ERR(ctx, AG_EINVAL, "add node \"%s\" to subgraph \"%s\": empty type", name ? name : "",
                      AG_SUB(g, s)->name);
    if (nin > AG_MAX_ANCHORS || nout > AG_MAX_ANCHORS)
        return AG_ERR(ctx, AG_EINVAL, "add node \"%s\" (%s): %u inputs / %u outputs exceed the limit of %u",
                      name ? name : "", type, nin, nout, AG_MAX_ANCHORS);
    bool named = name != NULL && name[0] != '\0';
    if (named && ag_strmap_get(&AG_SUB(g, s)->names, name, NULL))
        return AG_ERR(ctx, AG_EEXIST, "add node \"%s\" (%s): subgraph \"%s\" already has a node of that name", name,
                      type, AG_SUB(g, s)->name);
    if (g->nodes.len >= AG_NONE - 1)
        return AG_ERR(ctx, AG_EINVAL, "add node \"%s\" (%s): too many nodes", name ? name : "", type);

    ag_node_id id = g->nodes.len;
    ag_subrec *sr = AG_SUB(g, s);
    if (ag_vec_reserve(ctx, &g->nodes, sizeof(ag_noderec), 1) != AG_OK)
        return AG_OOM(ctx);
    if (sr->order_cap < sr->count + 1) {
        uint32_t ncap = sr->order_cap ? sr->order_cap * 2 : 16;
        if (ncap < sr->order_cap)
            return AG_OOM(ctx);
        ag_node_id *no = ag_realloc(ctx, sr->order, (size_t)sr->order_cap * sizeof *no, (size_t)ncap * sizeof *no);
        if (no == NULL)
            return AG_OOM(ctx);
        sr->order = no;
        sr->order_cap = ncap;
    }
    ag_noderec r = {0};
    r.owner = s;
    r.nin = nin;
    r.nout = nout;
    r.prev = sr->tail;
    r.next = AG_NONE;
    r.domain = ag_empty_str_;
    if ((r.type = intern_type(g, type)) == NULL)
        return AG_OOM(ctx);
    r.name = named ? ag_arena_strdup(&g->arena, name) : generated_name(g, s, r.type, id);
    if (r.name == NULL || grow_anchors(g, NULL, nin, nout, &r.in, &r.out) != AG_OK ||
        (r.attrs = ag_arena_alloc(&g->arena, sizeof *r.attrs)) == NULL ||
        ag_strmap_put(ctx, &sr->names, r.name, id) != AG_OK)
        return AG_OOM(ctx);

    ag_status st = ag_vec_push(ctx, &g->nodes, sizeof r, &r);
    ag_assert(st == AG_OK);
    (void)st;
    if (sr->tail != AG_NONE)
        AG_NODE(g, sr->tail)->next = id;
    else
        sr->head = id;
    sr->tail = id;
    if (sr->order_valid)
        sr->order[sr->count] = id; /* appending keeps the cache valid */
    sr->count++;
    g->live_nodes++;
    if (out)
        *out = id;
    return AG_OK;
}

ag_status ag_node_set_io_count(ag_graph *g, ag_node_id n, uint32_t nin, uint32_t nout)
{
    if (!ag__node_ok(g, n))
        return AG_ERR(g->ctx, AG_EINVAL, "set io count: node id %u does not exist", n);
    if (nin > AG_MAX_ANCHORS || nout > AG_MAX_ANCHORS)
        return AG_ERR(g->ctx, AG_EINVAL, AG_NODE_FMT ": %u inputs / %u outputs exceed the limit of %u",
                      AG_NODE_ARGS(g, n), nin, nout, AG_MAX_ANCHORS);
    ag_in_anchor **in;
    ag_out_anchor **out;
    if (grow_anchors(g, AG_NODE(g, n), nin, nout, &in, &out) != AG_OK)
        return AG_OOM(g->ctx);
    ag_noderec *r = AG_NODE(g, n);
    if (in) {
        r->in = in;
        r->nin = nin;
    }
    if (out) {
        r->out = out;
        r->nout = nout;
    }
    return AG_OK;
}

ag_status ag_node_set_name(ag_graph *g, ag_node_id n, const char *name)
{
    if (!ag__node_ok(g, n))
        return AG_ERR(g->ctx, AG_EINVAL, "set name: node id %u does not exist", n);
    if (name == NULL || name[0] == '\0')
        return AG_ERR(g->ctx, AG_EINVAL, AG_NODE_FMT ": new name is empty", AG_NODE_ARGS(g, n));
    ag_noderec *r = AG_NODE(g, n);
    if (strcmp(r->name, name) == 0)
        return AG_OK;
    ag_subrec *sr = AG_SUB(g, r->owner);
    if (ag_strmap_get(&sr->names, name, NULL))
        return AG_ERR(g->ctx, AG_EEXIST, AG_NODE_FMT ": cannot rename to \"%s\": subgraph \"%s\" already has it",
                      AG_NODE_ARGS(g, n), name, sr->name);
    const char *copy = ag_arena_strdup(&g->arena, name);
    if (copy == NULL || ag_strmap_put(g->ctx, &sr->names, copy, n) != AG_OK)
        return AG_OOM(g->ctx);
    ag_strmap_del(&sr->names, r->name);
    r->name = copy;
    return AG_OK;
}

ag_status ag_node_set_type(ag_graph *g, ag_node_id n, const char *type)
{
    if (!ag__node_ok(g, n))
        return AG_ERR(g->ctx, AG_EINVAL, "set type: node id %u does not exist", n);
    if (type == NULL || type[0] == '\0')
        return AG_ERR(g->ctx, AG_EINVAL, AG_NODE_FMT ": new type is empty", AG_NODE_ARGS(g, n));
    const char *t = intern_type(g, type);
    if (t == NULL)
        return AG_OOM(g->ctx);
    AG_NODE(g, n)->type = t;
    return AG_OK;
}

ag_status ag_node_set_domain(ag_graph *g, ag_node_id n, const char *domain)
{
    if (!ag__node_ok(g, n))
        return AG_ERR(g->ctx, AG_EINVAL, "set domain: node id %u does not exist", n);
    const char *d = ag_empty_str_;
    if (domain != NULL && domain[0] != '\0' && (d = ag_arena_strdup(&g->arena, domain)) == NULL)
        return AG_OOM(g->ctx);
    AG_NODE(g, n)->domain = d;
    return AG_OK;
}

const char *ag_node_name(const ag_graph *g, ag_node_id n)
{
    return n < g->nodes.len ? AG_NODE(g, n)->name : ag_empty_str_;
}

const char *ag_node_type(const ag_graph *g, ag_node_id n)
{
    return n < g->nodes.len ? AG_NODE(g, n)->type : ag_empty_str_;
}

const char *ag_node_domain(const ag_graph *g, ag_node_id n)
{
    return n < g->nodes.len ? AG_NODE(g, n)->domain : ag_empty_str_;
}

ag_sub_id ag_node_owner(const ag_graph *g, ag_node_id n)
{
    return n < g->nodes.len ? AG_NODE(g, n)->owner : AG_NONE;
}

uint32_t ag_node_num_inputs(const ag_graph *g, ag_node_id n)
{
    return ag__node_ok(g, n) ? AG_NODE(g, n)->nin : 0;
}

uint32_t ag_node_num_outputs(const ag_graph *g, ag_node_id n)
{
    return ag__node_ok(g, n) ? AG_NODE(g, n)->nout : 0;
}

ag_port ag_node_input_src(const ag_graph *g, ag_node_id n, uint32_t i)
{
    ag_port none = {AG_NONE, 0};
    if (!ag__node_ok(g, n) || i >= AG_NODE(g, n)->nin)
        return none;
    return AG_NODE_IN(g, n, i)->src;
}

uint32_t ag_node_output_nconsumers(const ag_graph *g, ag_node_id n, uint32_t o)
{
    if (!ag__node_ok(g, n) || o >= AG_NODE(g, n)->nout)
        return 0;
    return AG_NODE_OUT(g, n, o)->cons.len;
}

ag_port ag_node_output_consumer(const ag_graph *g, ag_node_id n, uint32_t o, uint32_t k)
{
    ag_port none = {AG_NONE, 0};
    if (!ag__node_ok(g, n) || o >= AG_NODE(g, n)->nout || k >= AG_NODE_OUT(g, n, o)->cons.len)
        return none;
    return AG_VEC_AT(AG_NODE_OUT(g, n, o)->cons, ag_port, k);
}

uint32_t ag_node_num_ctrl_in(const ag_graph *g, ag_node_id n)
{
    return ag__node_ok(g, n) ? AG_NODE(g, n)->ctrl_in.len : 0;
}

ag_node_id ag_node_ctrl_in(const ag_graph *g, ag_node_id n, uint32_t k)
{
    if (!ag__node_ok(g, n) || k >= AG_NODE(g, n)->ctrl_in.len)
        return AG_NONE;
    return AG_VEC_AT(AG_NODE(g, n)->ctrl_in, ag_node_id, k);
}

uint32_t ag_node_num_ctrl_out(const ag_graph *g, ag_node_id n)
{
    return ag__node_ok(g, n) ? AG_NODE(g, n)->ctrl_out.len : 0;
}

ag_node_id ag_node_ctrl_out(const ag_graph *g, ag_node_id n, uint32_t k)
{
    if (!ag__node_ok(g, n) || k >= AG_NODE(g, n)->ctrl_out.len)
        return AG_NONE;
    return AG_VEC_AT(AG_NODE(g, n)->ctrl_out, ag_node_id, k);
}

uint32_t ag_node_num_subs(const ag_graph *g, ag_node_id n)
{
    return ag__node_ok(g, n) ? AG_NODE(g, n)->subs.len : 0;
}

ag_sub_id ag_node_sub(const ag_graph *g, ag_node_id n, uint32_t k)
{
    if (!ag__node_ok(g, n) || k >= AG_NODE(g, n)->subs.len)
        return AG_NONE;
    return AG_VEC_AT(AG_NODE(g, n)->subs, ag_sub_id, k);
}

ag_attrs *ag_node_attrs(ag_graph *g, ag_node_id n)
{
    return ag__node_ok(g, n) ? AG_NODE(g, n)->attrs : NULL;
}

const ag_attrs *ag_node_attrs_c(const ag_graph *g, ag_node_id n)
{
    return ag__node_ok(g, n) ? AG_NODE(g, n)->attrs : NULL;
}

ag_tensor_desc *ag_node_input_desc(ag_graph *g, ag_node_id n, uint32_t i)
{
    if (!ag__node_ok(g, n) || i >= AG_NODE(g, n)->nin)
        return NULL;
    return &AG_NODE_IN(g, n, i)->desc;
}

ag_tensor_desc *ag_node_output_desc(ag_graph *g, ag_node_id n, uint32_t o)
{
    if (!ag__node_ok(g, n) || o >= AG_NODE(g, n)->nout)
        return NULL;
    return &AG_NODE_OUT(g, n, o)->desc;
}

const ag_tensor_desc *ag_node_input_desc_c(const ag_graph *g, ag_node_id n, uint32_t i)
{
    if (!ag__node_ok(g, n) || i >= AG_NODE(g, n)->nin)
        return NULL;
    return &AG_NODE_IN(g, n, i)->desc;
}

const ag_tensor_desc *ag_node_output_desc_c(const ag_graph *g, ag_node_id n, uint32_t o)
{
    if (!ag__node_ok(g, n) || o >= AG_NODE(g, n)->nout)
        return NULL;
    return &AG_NODE_OUT(g, n, o)->desc;
}

/* ---- stored order ---- */

static void order_unlink(ag_graph *g, ag_node_id n)
{
    ag_noderec *r = AG_NODE(g, n);
    ag_subrec *sr = AG_SUB(g, r->owner);
    if (r->prev != AG_NONE)
        AG_NODE(g, r->prev)->next = r->next;
    else
        sr->head = r->next;
    if (r->next != AG_NONE)
        AG_NODE(g, r->next)->prev = r->prev;
    else
        sr->tail = r->prev;
    r->prev = r->next = AG_NONE;
    sr->order_valid = false;
}

void ag__order_move(ag_graph *g, ag_node_id n, ag_node_id anchor, bool after)
{
    if (n == anchor)
        return;
    order_unlink(g, n);
    ag_noderec *r = AG_NODE(g, n);
    ag_noderec *a = AG_NODE(g, anchor);
    ag_subrec *sr = AG_SUB(g, r->owner);
    if (after) {
        r->prev = anchor;
        r->next = a->next;
        if (a->next != AG_NONE)
            AG_NODE(g, a->next)->prev = n;
        else
            sr->tail = n;
        a->next = n;
    } else {
        r->next = anchor;
        r->prev = a->prev;
        if (a->prev != AG_NONE)
            AG_NODE(g, a->prev)->next = n;
        else
            sr->head = n;
        a->prev = n;
    }
}

void ag__node_discard(ag_graph *g, ag_node_id n)
{
    ag_noderec *r = AG_NODE(g, n);
    ag_subrec *sr = AG_SUB(g, r->owner);
    order_unlink(g, n);
    ag_strmap_del(&sr->names, r->name);
    sr->count--;
    node_free_vecs(g->ctx, r);
    r->owner = AG_NONE;
    g->live_nodes--;
}

/* ---- edge primitives ---- */

void ag__link_data(ag_graph *g, ag_node_id src, uint32_t o, ag_node_id dst, uint32_t i)
{
    ag_port p = {dst, i};
    ag_status st = ag_vec_push(g->ctx, &AG_NODE_OUT(g, src, o)->cons, sizeof p, &p);
    ag_assert(st == AG_OK); /* room was reserved by the caller */
    (void)st;
    AG_NODE_IN(g, dst, i)->src.node = src;
    AG_NODE_IN(g, dst, i)->src.index = o;
}

static void vec_remove_at(ag_vec *v, size_t elem, uint32_t k)
{
    char *d = v->data;
    memmove(d + (size_t)k * elem, d + (size_t)(k + 1) * elem, (size_t)(v->len - k - 1) * elem);
    v->len--;
}

void ag__unlink_data(ag_graph *g, ag_node_id dst, uint32_t i)
{
    ag_in_anchor *in = AG_NODE_IN(g, dst, i);
    if (in->src.node == AG_NONE)
        return;
    ag_vec *cons = &AG_NODE_OUT(g, in->src.node, in->src.index)->cons;
    /* Search from the end: the edge removed is most often a recent one. */
    for (uint32_t k = cons->len; k-- > 0;) {
        ag_port p = AG_VEC_AT(*cons, ag_port, k);
        if (p.node == dst && p.index == i) {
            vec_remove_at(cons, sizeof(ag_port), k);
            break;
        }
    }
    in->src.node = AG_NONE;
    in->src.index = 0;
}

static bool vec_has_id(const ag_vec *v, ag_node_id id)
{
    for (uint32_t k = 0; k < v->len; k++)
        if (AG_VEC_AT(*v, ag_node_id, k) == id)
            return true;
    return false;
}

static void vec_remove_id(ag_vec *v, ag_node_id id)
{
    for (uint32_t k = 0; k < v->len; k++)
        if (AG_VEC_AT(*v, ag_node_id, k) == id) {
            vec_remove_at(v, sizeof(ag_node_id), k);
            return;
        }
}

bool ag__has_ctrl(const ag_graph *g, ag_node_id src, ag_node_id dst)
{
    const ag_vec *a = &AG_NODE(g, src)->ctrl_out, *b = &AG_NODE(g, dst)->ctrl_in;
    return a->len <= b->len ? vec_has_id(a, dst) : vec_has_id(b, src);
}

void ag__link_ctrl(ag_graph *g, ag_node_id src, ag_node_id dst)
{
    ag_status st = ag_vec_push(g->ctx, &AG_NODE(g, src)->ctrl_out, sizeof dst, &dst);
    ag_assert(st == AG_OK);
    st = ag_vec_push(g->ctx, &AG_NODE(g, dst)->ctrl_in, sizeof src, &src);
    ag_assert(st == AG_OK);
    (void)st;
}

void ag__unlink_ctrl(ag_graph *g, ag_node_id src, ag_node_id dst)
{
    vec_remove_id(&AG_NODE(g, src)->ctrl_out, dst);
    vec_remove_id(&AG_NODE(g, dst)->ctrl_in, src);
}

bool ag__has_data(const ag_graph *g, ag_node_id src, ag_node_id dst)
{
    const ag_noderec *r = AG_NODE(g, dst);
    for (uint32_t i = 0; i < r->nin; i++)
        if (r->in[i]->src.node == src)
            return true;
    return false;
}

/* ---- public edge API ---- */

static ag_status check_pair(ag_graph *g, const char *what, ag_node_id src, ag_node_id dst)
{
    if (!ag__node_ok(g, src))
        return AG_ERR(g->ctx, AG_EINVAL, "%s: source node id %u does not exist", what, src);
    if (!ag__node_ok(g, dst))
        return AG_ERR(g->ctx, AG_EINVAL, "%s: destination node id %u does not exist", what, dst);
    ag_sub_id a = AG_NODE(g, src)->owner, b = AG_NODE(g, dst)->owner;
    if (a != b)
        return AG_ERR(g->ctx, AG_EINVAL,
                      "%s " AG_NODE_FMT " -> " AG_NODE_FMT ": nodes are in different subgraphs (\"%s\" and \"%s\")",
                      what, AG_NODE_ARGS(g, src), AG_NODE_ARGS(g, dst), AG_SUB(g, a)->name, AG_SUB(g, b)->name);
    return AG_OK;
}

static ag_status check_ports(ag_graph *g, ag_node_id src, uint32_t o, ag_node_id dst, uint32_t i)
{
    if (o >= AG_NODE(g, src)->nout)
        return AG_ERR(g->ctx, AG_EINVAL, AG_NODE_FMT ": output %u out of range (%u outputs)", AG_NODE_ARGS(g, src), o,
                      AG_NODE(g, src)->nout);
    if (i >= AG_NODE(g, dst)->nin)
        return AG_ERR(g->ctx, AG_EINVAL, AG_NODE_FMT ": input %u out of range (%u inputs)", AG_NODE_ARGS(g, dst), i,
                      AG_NODE(g, dst)->nin);
    return AG_OK;
}

ag_status ag_graph_add_edge(ag_graph *g, ag_node_id src, uint32_t o, ag_node_id dst, uint32_t i)
{
    AG_TRY(check_pair(g, "data edge", src, dst));
    AG_TRY(check_ports(g, src, o, dst, i));
    ag_in_anchor *in = AG_NODE_IN(g, dst, i);
    if (in->src.node != AG_NONE)
        return AG_ERR(g->ctx, AG_EEXIST, AG_NODE_FMT ": input %u is already connected (from \"%s\" output %u)",
                      AG_NODE_ARGS(g, dst), i, AG_NODE(g, in->src.node)->name, in->src.index);
    ag_out_anchor *out = AG_NODE_OUT(g, src, o);
    if (ag_vec_reserve(g->ctx, &out->cons, sizeof(ag_port), 1) != AG_OK)
        return AG_OOM(g->ctx);
    if (in->desc.dtype == AG_DT_UNDEFINED)
        AG_TRY(ag_desc_copy_type(g, &in->desc, &out->desc));
    ag__link_data(g, src, o, dst, i);
#if AG_DEBUG >= 2
    ag_assert_internal(in->src.node == src && in->src.index == o);
    ag_assert_internal(AG_VEC_AT(out->cons, ag_port, out->cons.len - 1).node == dst);
#endif
    return AG_OK;
}

ag_status ag_graph_remove_edge(ag_graph *g, ag_node_id src, uint32_t o, ag_node_id dst, uint32_t i)
{
    AG_TRY(check_pair(g, "remove data edge", src, dst));
    AG_TRY(check_ports(g, src, o, dst, i));
    ag_port p = AG_NODE_IN(g, dst, i)->src;
    if (p.node != src || p.index != o)
        return AG_ERR(g->ctx, AG_ENOTFOUND, "remove data edge: " AG_NODE_FMT " input %u is not fed by \"%s\" output %u",
                      AG_NODE_ARGS(g, dst), i, AG_NODE(g, src)->name, o);
    uint32_t before = AG_NODE_OUT(g, src, o)->cons.len;
    ag__unlink_data(g, dst, i);
    ag_assert_internal(AG_NODE_OUT(g, src, o)->cons.len + 1 == before);
    (void)before;
    return AG_OK;
}

ag_status ag_graph_add_ctrl_edge(ag_graph *g, ag_node_id src, ag_node_id dst)
{
    AG_TRY(check_pair(g, "control edge", src, dst));
    if (src == dst)
        return AG_ERR(g->ctx, AG_EINVAL, "control edge " AG_NODE_FMT " -> itself: self-loops are not allowed",
                      AG_NODE_ARGS(g, src));
    if (ag__has_ctrl(g, src, dst))
        return AG_OK;
    if (ag_vec_reserve(g->ctx, &AG_NODE(g, src)->ctrl_out, sizeof(ag_node_id), 1) != AG_OK ||
        ag_vec_reserve(g->ctx, &AG_NODE(g, dst)->ctrl_in, sizeof(ag_node_id), 1) != AG_OK)
        return AG_OOM(g->ctx);
    ag__link_ctrl(g, src, dst);
    return AG_OK;
}

ag_status ag_graph_remove_ctrl_edge(ag_graph *g, ag_node_id src, ag_node_id dst)
{
    AG_TRY(check_pair(g, "remove control edge", src, dst));
    if (!ag__has_ctrl(g, src, dst))
        return AG_ERR(g->ctx, AG_ENOTFOUND, "remove control edge: no control edge " AG_NODE_FMT " -> " AG_NODE_FMT,
                      AG_NODE_ARGS(g, src), AG_NODE_ARGS(g, dst));
    ag__unlink_ctrl(g, src, dst);
    return AG_OK;
}
