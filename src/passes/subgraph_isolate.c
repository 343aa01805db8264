/* SubgraphPass (seed 3.1.3, reference notes 5.3): copies (Identity nodes)
 * that keep memory on the two sides of a While/If/Case/PartitionedCall
 * subgraph boundary apart: loop-carried buffers from what the body reads and
 * writes, constants from loops that write their inputs in place, branch
 * outputs from one another, subgraph inputs from continuous-memory consumers.
 *
 * Order.  Graphs are visited parents first (a subgraph's id is larger than
 * that of the graph holding its parent node), so the copies a While or If
 * makes in its subgraphs exist before the subgraph's own rules look at them,
 * and no value is copied twice.  Within one graph: subgraph Data rules, then
 * subgraph NetOutput rules, then the While and If/Case rules, so that the
 * constant test of a NetOutput input sees the copies the Data rules put in
 * front of the parent While, whatever the stored order of the nodes.
 *
 * Idempotence.  A "copy" is a node the registry calls identity that carries
 * _cannot_be_deleted=true (every copy made here), or a memcpy node.  Every
 * single-port rule looks at the producer of a value, which is a copy once the
 * rule has fired, and no rule fires on a copy.  The While body rule states it
 * explicitly: a body Data whose consumers are all one copy node is already
 * bridged, and a NetOutput input fed by a copy that bridges no Data is
 * already copied; only the remaining ones get new ports.
 *
 * Streams.  Every copy only reads its producer, except in a While body: the
 * input copy reads the loop buffers the output copy overwrites, so where no
 * path runs the one before the other a control edge does.
 *
 * Shapes.  A graph has unknown shapes when one of its nodes other than a
 * NetOutput carries _is_unknown_shape=true; a NetOutput's flag describes what
 * it hands to the parent, which is what NetOutput condition 5 asks about.  A
 * node is dynamic when it carries the flag itself (the While of the cond copy).
 * Constants are the registry's const-like kinds (Const, Constant,
 * FileConstant, ConstPlaceHolder): all are read-only memory a copy protects.
 * The "while body data bypass" row changes nothing, so it is not recorded.
 *
 * Errors (the graph is checked before anything changes): a Data in a
 * control-flow subgraph without a valid _parent_node_index, a NetOutput input
 * of such a subgraph without one (the predicate of a While condition is
 * exempt: it is no parent output), a While without cond and body, or a body
 * without exactly one NetOutput.  Subgraphs of nodes the registry does not
 * know as control flow are not boundaries this pass understands: only their
 * own While/If/Case nodes are handled. */

#include <stdio.h>

#include "passes/symbols.h"

#define PASS "subgraph_isolate"
#define PNI "_parent_node_index"

#define R_WHILE_SHARED "SubgraphPass: while input shared by several consumers"
#define R_BODY_COPY "SubgraphPass: while body input/output copy"
#define R_BODY_ORDER "SubgraphPass: while body input copy before output copy"
#define R_COND_COPY "SubgraphPass: dynamic while cond input copy"
#define R_DATA_CONT "SubgraphPass: subgraph data to continuous-input consumer"
#define R_CONST_WHILE "SubgraphPass: const into while"
#define R_NO_CONST "SubgraphPass: netoutput from const"
#define R_NO_ATOMIC "SubgraphPass: netoutput from atomic output"
#define R_NO_CONT "SubgraphPass: netoutput from continuous output"
#define R_NO_DATA "SubgraphPass: netoutput from data (parent not while)"
#define R_NO_WHILE "SubgraphPass: netoutput from while (dynamic netoutput in known-shape subgraph)"
#define R_BRANCH_TWICE "SubgraphPass: if/case branch output produced twice"

typedef struct sp_state {
    ag_pass_env *env;
    ag_graph *g;
    const ag_ops *ops;
    ag_ctx *ctx;
    uint32_t nsubs;
    bool *unknown;      /* per subgraph: some node computes with unknown shapes */
    ag_node_id *netout; /* per subgraph: its first NetOutput, or AG_NONE */
    uint32_t *mark;     /* per node id: epoch of its last mark */
    uint32_t mark_cap;
    uint32_t epoch;
    ag_vec nodes;       /* ag_node_id: snapshot of one subgraph */
    ag_vec work;        /* ag_port: output anchors still to follow */
    ag_vec todo;        /* ag_node_id: nodes still to search */
    ag_vec sel;         /* ag_node_id or uint32_t: selected anchors */
    ag_vec iset, oset;  /* ag_node_id: body input and output copies */
    ag_vec text;        /* char: anchor text of a record */
    char *base, *name;  /* node name being made, and its unique form */
    size_t name_cap;
    ag_aliases *alias;  /* buffers (symbols) across views, refs and boundaries */
} sp_state;

/* ---- small predicates ---- */

static ag_op_kind kind_of(const sp_state *st, ag_node_id n)
{
    return ag_ops_node_kind(st->ops, st->g, n);
}

static bool attr_true(const ag_graph *g, ag_node_id n, const char *name)
{
    return ag_attrs_get_flag(ag_node_attrs_c(g, n), name, false);
}

/* NodeUtils::IsDynamicShape. */
static bool node_dynamic(const sp_state *st, ag_node_id n)
{
    return attr_true(st->g, n, "_is_unknown_shape");
}

static bool is_copy(const sp_state *st, ag_node_id n)
{
    ag_op_kind k = kind_of(st, n);
    return k == AG_OPK_MEMCPY || (k == AG_OPK_IDENTITY && attr_true(st->g, n, "_cannot_be_deleted"));
}

/* Control-flow kinds whose subgraphs bind Data to node inputs and NetOutput
 * inputs to node outputs by _parent_node_index. */
static bool binds_subgraphs(ag_op_kind k)
{
    return k == AG_OPK_IF || k == AG_OPK_CASE || k == AG_OPK_WHILE || k == AG_OPK_CALL || k == AG_OPK_LOOP;
}

static bool sub_bound(const sp_state *st, ag_sub_id s)
{
    ag_node_id p = ag_sub_parent(st->g, s);
    return s != AG_ROOT && p != AG_NONE && binds_subgraphs(kind_of(st, p));
}

static bool node_pni(const ag_graph *g, ag_node_id n, int64_t *idx)
{
    return ag_attrs_get_int(ag_node_attrs_c(g, n), PNI, idx);
}

static bool input_pni(const ag_graph *g, ag_node_id n, uint32_t i, int64_t *idx)
{
    return ag_attrs_get_int(ag_node_input_desc_c(g, n, i)->attrs, PNI, idx);
}

/* ---- marks: one epoch per question, no clearing ---- */

static ag_status new_epoch(sp_state *st, uint32_t *e)
{
    uint32_t cap = ag_graph_node_capacity(st->g);
    if (cap > st->mark_cap) {
        /* Geometric growth: copies keep adding nodes between questions. */
        if (st->mark_cap > cap - cap / 2)
            cap = st->mark_cap <= UINT32_MAX / 2 ? 2 * st->mark_cap : UINT32_MAX;
        uint32_t *m = ag_realloc(st->ctx, st->mark, (size_t)st->mark_cap * sizeof *m, (size_t)cap * sizeof *m);
        if (m == NULL)
            return AG_OOM(st->ctx);
        memset(m + st->mark_cap, 0, (size_t)(cap - st->mark_cap) * sizeof *m);
        st->mark = m;
        st->mark_cap = cap;
    }
    if (++st->epoch == 0) {
        memset(st->mark, 0, (size_t)st->mark_cap * sizeof *st->mark);
        st->epoch = 1;
    }
    *e = st->epoch;
    return AG_OK;
}

static bool marked(const sp_state *st, ag_node_id n, uint32_t e)
{
    return n < st->mark_cap && st->mark[n] == e;
}

static void set_mark(sp_state *st, ag_node_id n, uint32_t e)
{
    if (n < st->mark_cap)
        st->mark[n] = e;
}

/* ---- following values across boundaries ---- */

/* Producer of input idx of NetOutput no for parent output o, or {AG_NONE, 0}. */
static ag_port netoutput_feed(const sp_state *st, ag_sub_id s, uint32_t o)
{
    ag_port none = {AG_NONE, 0};
    ag_node_id no = st->netout[s];
    if (no == AG_NONE)
        return none;
    for (uint32_t i = 0; i < ag_node_num_inputs(st->g, no); i++) {
        int64_t p;
        if (input_pni(st->g, no, i, &p) && p == (int64_t)o)
            return ag_node_input_src(st->g, no, i);
    }
    return none;
}

/* Where a value is made, crossing PartitionedCall boundaries in both
 * directions (GetInNodeCrossPartionedCallNode): a call's output is the value
 * its subgraph returns, a call subgraph's Data the call's input. */
static ag_port cross_calls(const sp_state *st, ag_port p)
{
    ag_graph *g = st->g;
    for (uint32_t guard = ag_graph_node_count(g) + 1; guard > 0 && p.node != AG_NONE; guard--) {
        ag_op_kind k = kind_of(st, p.node);
        if (k == AG_OPK_CALL && ag_node_num_subs(g, p.node) > 0) {
            ag_port q = netoutput_feed(st, ag_node_sub(g, p.node, 0), p.index);
            if (q.node == AG_NONE)
                return p;
            p = q;
            continue;
        }
        ag_node_id par = ag_sub_parent(g, ag_node_owner(g, p.node));
        int64_t idx;
        if (ag_op_kind_is_data_like(k) && par != AG_NONE && kind_of(st, par) == AG_OPK_CALL &&
            node_pni(g, p.node, &idx) && idx >= 0 && (uint64_t)idx < ag_node_num_inputs(g, par)) {
            p = ag_node_input_src(g, par, (uint32_t)idx);
            continue;
        }
        return p;
    }
    return p;
}

/* NodeUtils::GetConstOpType: the value is a constant, directly or as the
 * parent input of a subgraph Data (at any depth). */
static bool is_const_source(const sp_state *st, ag_port p)
{
    ag_graph *g = st->g;
    for (uint32_t guard = ag_graph_node_count(g) + 1; guard > 0; guard--) {
        p = cross_calls(st, p);
        if (p.node == AG_NONE)
            return false;
        ag_op_kind k = kind_of(st, p.node);
        if (ag_op_kind_is_const_like(k))
            return true;
        ag_sub_id s = ag_node_owner(g, p.node);
        ag_node_id par = ag_sub_parent(g, s);
        int64_t idx;
        if (!ag_op_kind_is_data_like(k) || !sub_bound(st, s) || !node_pni(g, p.node, &idx) || idx < 0 ||
            (uint64_t)idx >= ag_node_num_inputs(g, par))
            return false;
        p = ag_node_input_src(g, par, (uint32_t)idx);
    }
    return false;
}

/* Does some consumer of data:0 need continuous input, following consumers
 * whose output is (a view or reference of) the consumed input?  The walk is a
 * tree: each input anchor has one producer, and each output refers to one
 * input, so nothing is visited twice in an acyclic graph. */
static ag_status needs_continuous(sp_state *st, ag_node_id data, bool *out)
{
    ag_graph *g = st->g;
    *out = false;
    st->work.len = 0;
    ag_port start = {data, 0};
    if (ag_vec_push(st->ctx, &st->work, sizeof(ag_port), &start) != AG_OK)
        return AG_OOM(st->ctx);
    while (st->work.len > 0) {
        ag_port p = AG_VEC_AT(st->work, ag_port, --st->work.len);
        for (uint32_t k = 0; k < ag_node_output_nconsumers(g, p.node, p.index); k++) {
            ag_port c = ag_node_output_consumer(g, p.node, p.index, k);
            if (ag_ops_node_flags(st->ops, g, c.node) & (AG_OPF_CONTINUOUS_INPUT | AG_OPF_NOPAD_CONTINUOUS_INPUT)) {
                *out = true;
                return AG_OK;
            }
            for (uint32_t o = 0; o < ag_node_num_outputs(g, c.node); o++) {
                uint32_t in = 0;
                if (ag_ops_output_ref(st->ops, g, c.node, o, &in) == AG_REL_FRESH || in != c.index)
                    continue;
                ag_port next = {c.node, o};
                if (ag_vec_push(st->ctx, &st->work, sizeof(ag_port), &next) != AG_OK)
                    return AG_OOM(st->ctx);
            }
        }
    }
    return AG_OK;
}

/* Does the value come from a node with continuous outputs, following
 * outputs that refer to an input back to that input's producer? */
static bool from_continuous_output(const sp_state *st, ag_port p)
{
    ag_graph *g = st->g;
    for (uint32_t guard = ag_graph_node_count(g) + 1; guard > 0 && p.node != AG_NONE; guard--) {
        if (ag_ops_node_flags(st->ops, g, p.node) & (AG_OPF_CONTINUOUS_OUTPUT | AG_OPF_NOPAD_CONTINUOUS_OUTPUT))
            return true;
        uint32_t in = 0;
        if (ag_ops_output_ref(st->ops, g, p.node, p.index, &in) == AG_REL_FRESH)
            return false;
        p = ag_node_input_src(g, p.node, in);
    }
    return false;
}

static ag_status push_id(sp_state *st, ag_vec *v, ag_node_id n)
{
    return ag_vec_push(st->ctx, v, sizeof n, &n) == AG_OK ? AG_OK : AG_OOM(st->ctx);
}

/* Is there a path of data or control edges from a to b (same subgraph)?  A
 * backward search from b; marks the ancestors of b with a fresh epoch. */
static ag_status reaches(sp_state *st, ag_node_id a, ag_node_id b, bool *out)
{
    ag_graph *g = st->g;
    uint32_t e;
    AG_TRY(new_epoch(st, &e));
    *out = false;
    st->todo.len = 0;
    set_mark(st, b, e);
    AG_TRY(push_id(st, &st->todo, b));
    while (st->todo.len > 0) {
        ag_node_id n = AG_VEC_AT(st->todo, ag_node_id, --st->todo.len);
        uint32_t nin = ag_node_num_inputs(g, n), nc = ag_node_num_ctrl_in(g, n);
        for (uint32_t k = 0; k < nin + nc; k++) {
            ag_node_id p = k < nin ? ag_node_input_src(g, n, k).node : ag_node_ctrl_in(g, n, k - nin);
            if (p == AG_NONE || marked(st, p, e))
                continue;
            if (p == a) {
                *out = true;
                return AG_OK;
            }
            set_mark(st, p, e);
            AG_TRY(push_id(st, &st->todo, p));
        }
    }
    return AG_OK;
}

/* ---- making copies ---- */

/* Formats a node name into st->base. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static ag_status fmt_base(sp_state *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(st->base, st->name_cap, fmt, ap);
    va_end(ap);
    if (n < 0)
        return AG_ERR(st->ctx, AG_EINVAL, "cannot format a node name");
    if ((size_t)n + 32 > st->name_cap) {
        size_t cap = (size_t)n + 64;
        char *b = ag_alloc(st->ctx, cap), *m = ag_alloc(st->ctx, cap);
        if (b == NULL || m == NULL) {
            ag_free(st->ctx, b, cap);
            ag_free(st->ctx, m, cap);
            return AG_OOM(st->ctx);
        }
        ag_free(st->ctx, st->base, st->name_cap);
        ag_free(st->ctx, st->name, st->name_cap);
        st->base = b;
        st->name = m;
        st->name_cap = cap;
        va_start(ap, fmt);
        vsnprintf(st->base, st->name_cap, fmt, ap);
        va_end(ap);
    }
    return AG_OK;
}

static ag_status text_put(sp_state *st, const char *s)
{
    size_t n = strlen(s);
    if (n > UINT32_MAX - st->text.len - 1u ||
        ag_vec_reserve(st->ctx, &st->text, 1, (uint32_t)n + 1) != AG_OK)
        return AG_OOM(st->ctx);
    memcpy((char *)st->text.data + st->text.len, s, n + 1);
    st->text.len += (uint32_t)n;
    return AG_OK;
}

/* Appends "node:index" (after a comma unless first) to st->text. */
static ag_status text_port(sp_state *st, ag_node_id n, uint32_t idx, bool first)
{
    char num[16];
    snprintf(num, sizeof num, ":%u", idx);
    if (!first)
        AG_TRY(text_put(st, ","));
    AG_TRY(text_put(st, ag_node_name(st->g, n)));
    return text_put(st, num);
}

/* st->text = "src:o" and returns the offset where the consumer text starts,
 * which is "a:i,b:j" for the current consumers of src:o (or dst:i alone). */
static ag_status text_edge(sp_state *st, ag_node_id src, uint32_t o, ag_node_id dst, uint32_t i, uint32_t *cons_at)
{
    st->text.len = 0;
    AG_TRY(text_port(st, src, o, true));
    AG_TRY(text_put(st, "|"));
    *cons_at = st->text.len;
    if (dst != AG_NONE)
        return text_port(st, dst, i, true);
    for (uint32_t k = 0; k < ag_node_output_nconsumers(st->g, src, o); k++) {
        ag_port c = ag_node_output_consumer(st->g, src, o, k);
        AG_TRY(text_port(st, c.node, c.index, k == 0));
    }
    return AG_OK;
}

static ag_status record_text(sp_state *st, const char *rule, ag_node_id node, uint32_t cons_at)
{
    ag_why why = {PASS, rule};
    char *t = st->text.data;
    t[cons_at - 1] = '\0'; /* the '|' between producer and consumers */
    return ag_pass_record(st->env, &why, node, t, t + cons_at);
}

/* Creates an unconnected copy with nports inputs and outputs in subgraph s,
 * named after st->base, with the attributes of the reference's SubgraphPass
 * copies; _batch_label comes from the first of srcs that has one. */
static ag_status new_copy(sp_state *st, ag_sub_id s, uint32_t nports, const ag_node_id *srcs, uint32_t nsrcs,
                          ag_node_id *out)
{
    ag_graph *g = st->g;
    AG_TRY(ag_pass_unique_name(st->env, s, st->base, st->name, st->name_cap));
    ag_node_id n;
    AG_TRY(ag_graph_add_node(g, s, "Identity", st->name, nports, nports, &n));
    ag_attrs *a = ag_node_attrs(g, n);
    ag_status rc = ag_attrs_set_bool(g, a, "_cannot_be_deleted", true);
    if (rc == AG_OK)
        rc = ag_attrs_set_bool(g, a, "no_need_constant_folding", false);
    for (uint32_t k = 0; rc == AG_OK && k < nsrcs; k++) {
        const char *label;
        if (ag_attrs_get_string(ag_node_attrs_c(g, srcs[k]), "_batch_label", &label)) {
            rc = ag_attrs_set_string(g, a, "_batch_label", label);
            break;
        }
    }
    if (rc != AG_OK) {
        (void)ag_graph_remove_node(g, n);
        return rc;
    }
    *out = n;
    return AG_OK;
}

/* Port k of copy n carries the type of the value src:o. */
static ag_status copy_port_desc(sp_state *st, ag_node_id n, uint32_t k, ag_node_id src, uint32_t o)
{
    ag_graph *g = st->g;
    const ag_tensor_desc *d = ag_node_output_desc_c(g, src, o);
    AG_TRY(ag_desc_copy_type(g, ag_node_input_desc(g, n, k), d));
    return ag_desc_copy_type(g, ag_node_output_desc(g, n, k), d);
}

/* A copy of src:o for all of its consumers, named st->base. */
static ag_status copy_after(sp_state *st, const char *rule, ag_node_id src, uint32_t o)
{
    ag_graph *g = st->g;
    uint32_t cons_at;
    AG_TRY(text_edge(st, src, o, AG_NONE, 0, &cons_at));
    ag_node_id n;
    AG_TRY(new_copy(st, ag_node_owner(g, src), 1, &src, 1, &n));
    ag_status rc = copy_port_desc(st, n, 0, src, o);
    if (rc == AG_OK)
        rc = ag_graph_insert_after(g, src, o, NULL, 0, n, 0, 0);
    if (rc != AG_OK) {
        (void)ag_graph_remove_node(g, n);
        return rc;
    }
    AG_TRY(ag_aliases_changed(st->alias, n, false));
    return record_text(st, rule, n, cons_at);
}

/* A copy on the edge feeding dst:i, named st->base. */
static ag_status copy_before(sp_state *st, const char *rule, ag_node_id dst, uint32_t i)
{
    ag_graph *g = st->g;
    ag_port p = ag_node_input_src(g, dst, i);
    uint32_t cons_at;
    AG_TRY(text_edge(st, p.node, p.index, dst, i, &cons_at));
    ag_node_id n;
    AG_TRY(new_copy(st, ag_node_owner(g, dst), 1, &p.node, 1, &n));
    ag_status rc = copy_port_desc(st, n, 0, p.node, p.index);
    if (rc == AG_OK)
        rc = ag_graph_insert_before(g, dst, i, n, 0, 0);
    if (rc != AG_OK) {
        (void)ag_graph_remove_node(g, n);
        return rc;
    }
    AG_TRY(ag_aliases_changed(st->alias, n, false));
    return record_text(st, rule, n, cons_at);
}

/* One copy, named st->base, whose port k bridges datas[k]:0 to all of its
 * consumers.  A failure after the first port leaves a valid graph whose
 * remaining ports are unconnected. */
static ag_status multi_copy_after(sp_state *st, const char *rule, ag_sub_id s, const ag_node_id *datas, uint32_t nd,
                                  ag_node_id *out)
{
    ag_graph *g = st->g;
    ag_node_id n;
    AG_TRY(new_copy(st, s, nd, datas, nd, &n));
    ag_status rc = AG_OK;
    for (uint32_t k = 0; rc == AG_OK && k < nd; k++)
        rc = copy_port_desc(st, n, k, datas[k], 0);
    if (rc != AG_OK) {
        (void)ag_graph_remove_node(g, n);
        return rc;
    }
    for (uint32_t k = 0; k < nd; k++) {
        uint32_t cons_at;
        rc = text_edge(st, datas[k], 0, AG_NONE, 0, &cons_at);
        if (rc == AG_OK)
            rc = ag_graph_insert_after(g, datas[k], 0, NULL, 0, n, k, k);
        if (rc != AG_OK) {
            if (k == 0)
                (void)ag_graph_remove_node(g, n);
            return rc;
        }
        AG_TRY(record_text(st, rule, n, cons_at));
    }
    *out = n;
    return ag_aliases_changed(st->alias, n, false);
}

/* One copy, named st->base, whose port c sits on the edge feeding no:ins[c]. */
static ag_status multi_copy_before(sp_state *st, const char *rule, ag_node_id no, const uint32_t *ins, uint32_t m,
                                   ag_node_id *out)
{
    ag_graph *g = st->g;
    ag_node_id n, first = ag_node_input_src(g, no, ins[0]).node;
    AG_TRY(new_copy(st, ag_node_owner(g, no), m, &first, 1, &n));
    ag_status rc = AG_OK;
    for (uint32_t c = 0; rc == AG_OK && c < m; c++) {
        ag_port p = ag_node_input_src(g, no, ins[c]);
        rc = copy_port_desc(st, n, c, p.node, p.index);
    }
    if (rc != AG_OK) {
        (void)ag_graph_remove_node(g, n);
        return rc;
    }
    for (uint32_t c = 0; c < m; c++) {
        ag_port p = ag_node_input_src(g, no, ins[c]);
        uint32_t cons_at;
        rc = text_edge(st, p.node, p.index, no, ins[c], &cons_at);
        if (rc == AG_OK)
            rc = ag_graph_insert_before(g, no, ins[c], n, c, c);
        if (rc != AG_OK) {
            if (c == 0)
                (void)ag_graph_remove_node(g, n);
            return rc;
        }
        AG_TRY(record_text(st, rule, n, cons_at));
    }
    *out = n;
    return ag_aliases_changed(st->alias, n, false);
}

/* Copies the live nodes of subgraph s into st->nodes. */
static ag_status snapshot(sp_state *st, ag_sub_id s)
{
    uint32_t n = ag_sub_node_count(st->g, s);
    st->nodes.len = 0;
    if (ag_vec_reserve(st->ctx, &st->nodes, sizeof(ag_node_id), n) != AG_OK)
        return AG_OOM(st->ctx);
    for (uint32_t k = 0; k < n; k++)
        AG_VEC_AT(st->nodes, ag_node_id, k) = ag_sub_node_at(st->g, s, k);
    st->nodes.len = n;
    return AG_OK;
}

/* ---- the rules ---- */

/* Output p shares its buffer beyond a plain value: a view, ref or pass
 * output, a subgraph input, or an output of a node with subgraphs.  Only
 * such a value can carry a constant or other readers in unseen. */
static bool aliasing_output(const sp_state *st, ag_port p)
{
    uint32_t in = 0;
    return ag_symtab_ref_from_input(st->ops, st->g, p.node, p.index, &in) || ag_node_num_subs(st->g, p.node) > 0;
}

/* What writing the buffer of p by w reaches (ag_alias_judge); nothing for a
 * plain value, whose readers the rules see directly.  The symbols are built
 * on the first real question. */
static ag_status alias_hit(sp_state *st, ag_port p, ag_node_id w, unsigned want, ag_alias_hit *hit)
{
    hit->kind = AG_ALIAS_NONE;
    hit->node = AG_NONE;
    if (p.node == AG_NONE || !aliasing_output(st, p))
        return AG_OK;
    if (st->alias == NULL)
        AG_TRY(ag_aliases_create(st->env, &st->alias));
    return ag_alias_judge(st->alias, p, w, AG_NONE, want, hit);
}

/* A Data of a control-flow subgraph: a copy for continuous-input consumers,
 * and a copy in front of the parent While when its value is a constant. */
static ag_status data_rule(sp_state *st, ag_sub_id s, ag_node_id d)
{
    ag_graph *g = st->g;
    bool cont = false;
    if (ag_node_num_outputs(g, d) > 0) {
        AG_TRY(needs_continuous(st, d, &cont));
        if (cont) {
            AG_TRY(fmt_base(st, "%s_output_0_Memcpy", ag_node_name(g, d)));
            AG_TRY(copy_after(st, R_DATA_CONT, d, 0));
        }
    }
    ag_node_id par = ag_sub_parent(g, s);
    int64_t idx;
    if (kind_of(st, par) != AG_OPK_WHILE || !node_pni(g, d, &idx))
        return AG_OK;
    /* The While writes its inputs in place on every iteration. */
    ag_port src = ag_node_input_src(g, par, (uint32_t)idx);
    if (src.node == AG_NONE)
        return AG_OK;
    const char *rule = R_CONST_WHILE;
    char buf[256];
    if (!is_const_source(st, src)) {
        /* A constant whose buffer reaches the While through a view, a ref
         * output or another boundary is written all the same. */
        ag_alias_hit hit;
        AG_TRY(alias_hit(st, src, par, AG_ALIAS_WANT_CONST, &hit));
        if (hit.kind == AG_ALIAS_NONE)
            return AG_OK;
        ag_alias_rule(st->alias, R_CONST_WHILE, src, &hit, buf, sizeof buf);
        rule = buf;
    }
    AG_TRY(fmt_base(st, "%s_input_%u_Memcpy", ag_node_name(g, par), (uint32_t)idx));
    return copy_before(st, rule, par, (uint32_t)idx);
}

/* A NetOutput of a control-flow subgraph: a copy per input whose buffer must
 * not become the parent's output buffer (the five conditions of notes 5.3). */
static ag_status netoutput_rule(sp_state *st, ag_sub_id s, ag_node_id no)
{
    ag_graph *g = st->g;
    ag_node_id par = ag_sub_parent(g, s);
    bool parent_while = kind_of(st, par) == AG_OPK_WHILE;
    bool parent_graph_known = !st->unknown[ag_node_owner(g, par)];
    bool dyn_out = node_dynamic(st, no);
    for (uint32_t i = 0; i < ag_node_num_inputs(g, no); i++) {
        ag_port p = ag_node_input_src(g, no, i);
        if (p.node == AG_NONE)
            continue;
        ag_op_kind k = kind_of(st, p.node);
        const char *rule = NULL;
        char buf[256];
        ag_alias_hit hit = {AG_ALIAS_NONE, AG_NONE};
        uint32_t rin = 0;
        /* A view or ref of a constant is the constant's buffer too.  Across
         * boundaries the direct rule decides, as the reference does (an
         * unknown-shape branch keeps its constant output). */
        if (parent_graph_known && ag_ops_output_ref(st->ops, g, p.node, p.index, &rin) != AG_REL_FRESH &&
            !is_const_source(st, p))
            AG_TRY(alias_hit(st, p, no, AG_ALIAS_WANT_CONST, &hit));
        if (parent_graph_known && is_const_source(st, p)) {
            rule = R_NO_CONST;
        } else if (hit.kind != AG_ALIAS_NONE) {
            ag_alias_rule(st->alias, R_NO_CONST, p, &hit, buf, sizeof buf);
            rule = buf;
        } else if (ag_ops_is_atomic_output(st->ops, g, p.node, p.index) &&
                 (ag_ops_node_flags(st->ops, g, p.node) & AG_OPF_ATOMIC))
            rule = R_NO_ATOMIC;
        else if (from_continuous_output(st, p))
            rule = R_NO_CONT;
        else if (ag_op_kind_is_data_like(k) && !parent_while)
            rule = R_NO_DATA;
        else if (!st->unknown[s] && dyn_out && k == AG_OPK_WHILE)
            rule = R_NO_WHILE;
        if (rule == NULL)
            continue;
        AG_TRY(fmt_base(st, "%s_input_%u_Memcpy", ag_node_name(g, no), i));
        AG_TRY(copy_before(st, rule, no, i));
    }
    return AG_OK;
}

/* WhileInputNodes: a While writes its inputs in place, so an input whose
 * value others read too gets its own copy (variables excepted: writing them
 * is the point). */
static ag_status while_input_rule(sp_state *st, ag_node_id w)
{
    ag_graph *g = st->g;
    for (uint32_t i = 0; i < ag_node_num_inputs(g, w); i++) {
        ag_port p = ag_node_input_src(g, w, i);
        if (p.node == AG_NONE || ag_op_kind_is_var_like(kind_of(st, p.node)))
            continue;
        const char *rule = R_WHILE_SHARED;
        char buf[256];
        if (ag_node_output_nconsumers(g, p.node, p.index) <= 1) {
            /* One consumer, but the buffer may be another value's, seen
             * through a view, a ref output or a boundary, and read by others
             * that no path runs before the loop. */
            ag_alias_hit hit;
            AG_TRY(alias_hit(st, p, w, AG_ALIAS_WANT_READERS, &hit));
            /* Two loop-carried values in one buffer (two views of a value):
             * each iteration would overwrite the other. */
            for (uint32_t j = 0; j < ag_node_num_inputs(g, w) && hit.kind == AG_ALIAS_NONE && aliasing_output(st, p);
                 j++) {
                bool same = false;
                if (j != i)
                    AG_TRY(ag_alias_same(st->alias, p, ag_node_input_src(g, w, j), &same));
                if (same)
                    hit = (ag_alias_hit){AG_ALIAS_READER, w};
            }
            if (hit.kind == AG_ALIAS_NONE)
                continue;
            ag_alias_rule(st->alias, R_WHILE_SHARED, p, &hit, buf, sizeof buf);
            rule = buf;
        }
        AG_TRY(fmt_base(st, "%s_input_%u_Memcpy", ag_node_name(g, w), i));
        AG_TRY(copy_before(st, rule, w, i));
    }
    return AG_OK;
}

/* The copy node all consumers of d:0 go to, if it is one copy; else AG_NONE. */
static ag_node_id bridging_copy(const sp_state *st, ag_node_id d)
{
    ag_graph *g = st->g;
    uint32_t nc = ag_node_num_outputs(g, d) > 0 ? ag_node_output_nconsumers(g, d, 0) : 0;
    if (nc == 0)
        return AG_NONE;
    ag_node_id x = ag_node_output_consumer(g, d, 0, 0).node;
    for (uint32_t k = 1; k < nc; k++)
        if (ag_node_output_consumer(g, d, 0, k).node != x)
            return AG_NONE;
    return is_copy(st, x) ? x : AG_NONE;
}

/* Multi-port copy after every data-like node of subgraph s not yet bridged. */
static ag_status cond_copy(sp_state *st, ag_sub_id s)
{
    ag_graph *g = st->g;
    AG_TRY(snapshot(st, s));
    st->sel.len = 0;
    for (uint32_t k = 0; k < st->nodes.len; k++) {
        ag_node_id n = AG_VEC_AT(st->nodes, ag_node_id, k);
        if (ag_op_kind_is_data_like(kind_of(st, n)) && ag_node_num_outputs(g, n) > 0 &&
            bridging_copy(st, n) == AG_NONE)
            AG_TRY(push_id(st, &st->sel, n));
    }
    if (st->sel.len == 0)
        return AG_OK;
    ag_node_id c;
    AG_TRY(fmt_base(st, "%s_input_Memcpy", ag_sub_name(g, s)));
    return multi_copy_after(st, R_COND_COPY, s, st->sel.data, st->sel.len, &c);
}

/* After the body copies: every input copy must finish reading the loop
 * buffers before an output copy writes them.  A path usually says so; where
 * none does, a control edge makes the order explicit on every schedule. */
static ag_status order_body_copies(sp_state *st)
{
    ag_why why = {PASS, R_BODY_ORDER};
    for (uint32_t a = 0; a < st->iset.len; a++)
        for (uint32_t b = 0; b < st->oset.len; b++) {
            ag_node_id in = AG_VEC_AT(st->iset, ag_node_id, a), out = AG_VEC_AT(st->oset, ag_node_id, b);
            bool fwd, back;
            AG_TRY(reaches(st, in, out, &fwd));
            if (fwd)
                continue;
            AG_TRY(reaches(st, out, in, &back));
            if (back) /* the copies are ordered the other way: nothing can fix it here */
                continue;
            AG_TRY(ag_pass_add_ctrl(st->env, &why, in, out));
        }
    return AG_OK;
}

/* WhileBodySubgraph: body Data that are not passed straight back to the same
 * index read their loop buffer through one input copy, and NetOutput inputs
 * that are not such bypasses write it through one output copy. */
static ag_status while_body_rule(sp_state *st, ag_node_id w)
{
    ag_graph *g = st->g;
    ag_sub_id cond = ag_node_sub(g, w, 0), body = ag_node_sub(g, w, 1);
    if (st->unknown[body])
        return AG_OK;
    if (node_dynamic(st, w))
        AG_TRY(cond_copy(st, cond));

    ag_node_id no = st->netout[body];
    uint32_t nin = ag_node_num_inputs(g, no);
    uint32_t ei, eo;
    AG_TRY(snapshot(st, body));
    AG_TRY(new_epoch(st, &ei));
    st->sel.len = st->iset.len = st->oset.len = 0;
    for (uint32_t k = 0; k < st->nodes.len; k++) {
        ag_node_id n = AG_VEC_AT(st->nodes, ag_node_id, k);
        if (!ag_op_kind_is_data_like(kind_of(st, n)) || ag_node_num_outputs(g, n) == 0)
            continue;
        int64_t p, q;
        if (ag_node_output_nconsumers(g, n, 0) == 1) {
            ag_port c = ag_node_output_consumer(g, n, 0, 0);
            if (c.node == no && node_pni(g, n, &p) && input_pni(g, no, c.index, &q) && p == q)
                continue; /* "SubgraphPass: while body data bypass" */
        }
        ag_node_id x = bridging_copy(st, n);
        if (x != AG_NONE) {
            if (!marked(st, x, ei)) {
                set_mark(st, x, ei);
                AG_TRY(push_id(st, &st->iset, x));
            }
            continue;
        }
        AG_TRY(push_id(st, &st->sel, n));
    }
    uint32_t ndata = st->sel.len;
    AG_TRY(new_epoch(st, &eo));
    /* Marks: ei = existing input copy, eo = existing output copy (disjoint). */
    for (uint32_t j = 0; j < nin; j++) {
        ag_port p = ag_node_input_src(g, no, j);
        if (p.node == AG_NONE)
            continue;
        int64_t pj, qj;
        if (ag_op_kind_is_data_like(kind_of(st, p.node)) && ag_node_output_nconsumers(g, p.node, 0) == 1 &&
            node_pni(g, p.node, &pj) && input_pni(g, no, j, &qj) && pj == qj)
            continue; /* bypass */
        if (is_copy(st, p.node) && !marked(st, p.node, ei)) {
            if (!marked(st, p.node, eo)) {
                set_mark(st, p.node, eo);
                AG_TRY(push_id(st, &st->oset, p.node));
            }
            continue;
        }
        uint32_t jj = j;
        if (ag_vec_push(st->ctx, &st->sel, sizeof(ag_node_id), &jj) != AG_OK)
            return AG_OOM(st->ctx);
    }
    uint32_t nout = st->sel.len - ndata;
    if (ndata == 0 && nout == 0)
        return AG_OK;
    if (ndata > 0) {
        ag_node_id c;
        AG_TRY(fmt_base(st, "%s_input_Memcpy", ag_sub_name(g, body)));
        AG_TRY(multi_copy_after(st, R_BODY_COPY, body, st->sel.data, ndata, &c));
        AG_TRY(push_id(st, &st->iset, c));
    }
    if (nout > 0) {
        ag_node_id c;
        AG_TRY(fmt_base(st, "%s_output_Memcpy", ag_sub_name(g, body)));
        AG_TRY(multi_copy_before(st, R_BODY_COPY, no, (const uint32_t *)st->sel.data + ndata, nout, &c));
        AG_TRY(push_id(st, &st->oset, c));
    }
    return order_body_copies(st);
}

/* SeparateOutputsAddrOfCondSubgraph: in a known-shape graph outputs are
 * placed by symbol, so one node must not feed two outputs of a branch. */
static ag_status branch_rule(sp_state *st, ag_node_id n)
{
    ag_graph *g = st->g;
    for (uint32_t b = 0; b < ag_node_num_subs(g, n); b++) {
        ag_sub_id s = ag_node_sub(g, n, b);
        AG_TRY(snapshot(st, s));
        for (uint32_t k = 0; k < st->nodes.len; k++) {
            ag_node_id no = AG_VEC_AT(st->nodes, ag_node_id, k);
            if (kind_of(st, no) != AG_OPK_NETOUTPUT)
                continue;
            uint32_t e;
            AG_TRY(new_epoch(st, &e));
            for (uint32_t i = 0; i < ag_node_num_inputs(g, no); i++) {
                ag_port p = ag_node_input_src(g, no, i);
                if (p.node == AG_NONE)
                    continue;
                /* The rule is by producer node (two outputs of one Split
                 * count), but each port of a copy node is a buffer of its
                 * own: the multi-port copies this pass and the layout pass
                 * insert before a NetOutput only count when the same port
                 * feeds two inputs.  Without this a second pipeline run would
                 * copy the copies. */
                if (is_copy(st, p.node)) {
                    bool again = false;
                    for (uint32_t j = 0; j < i && !again; j++) {
                        ag_port q = ag_node_input_src(g, no, j);
                        again = q.node == p.node && q.index == p.index;
                    }
                    if (again) {
                        AG_TRY(fmt_base(st, "%s_output_%u_Memcpy", ag_node_name(g, p.node), p.index));
                        AG_TRY(copy_before(st, R_BRANCH_TWICE, no, i));
                    }
                    continue;
                }
                if (!marked(st, p.node, e)) {
                    set_mark(st, p.node, e);
                    continue;
                }
                AG_TRY(fmt_base(st, "%s_output_%u_Memcpy", ag_node_name(g, p.node), p.index));
                AG_TRY(copy_before(st, R_BRANCH_TWICE, no, i));
            }
        }
    }
    return AG_OK;
}

static ag_status process_sub(sp_state *st, ag_sub_id s)
{
    AG_TRY(snapshot(st, s));
    /* The rules below take other snapshots: keep this one apart. */
    uint32_t cnt = st->nodes.len;
    ag_node_id *ids = ag_alloc(st->ctx, (size_t)(cnt ? cnt : 1) * sizeof *ids);
    if (ids == NULL)
        return AG_OOM(st->ctx);
    memcpy(ids, st->nodes.data, (size_t)cnt * sizeof *ids);
    ag_status rc = AG_OK;
    bool bound = sub_bound(st, s), known = !st->unknown[s];
    for (int phase = 0; phase < 3 && rc == AG_OK; phase++)
        for (uint32_t k = 0; k < cnt && rc == AG_OK; k++) {
            ag_node_id n = ids[k];
            ag_op_kind kind = kind_of(st, n);
            if (phase == 0 && bound && ag_op_kind_is_data_like(kind))
                rc = data_rule(st, s, n);
            else if (phase == 1 && bound && kind == AG_OPK_NETOUTPUT)
                rc = netoutput_rule(st, s, n);
            else if (phase == 2 && kind == AG_OPK_WHILE) {
                rc = while_input_rule(st, n);
                if (rc == AG_OK)
                    rc = while_body_rule(st, n);
            } else if (phase == 2 && known && (kind == AG_OPK_IF || kind == AG_OPK_CASE))
                rc = branch_rule(st, n);
        }
    ag_free(st->ctx, ids, (size_t)(cnt ? cnt : 1) * sizeof *ids);
    return rc;
}

/* ---- checks before anything changes ---- */

static const char *sub_label(const ag_graph *g, ag_sub_id s)
{
    return ag_sub_name(g, s);
}

static ag_status check_node(sp_state *st, ag_sub_id s, ag_node_id n)
{
    ag_graph *g = st->g;
    ag_op_kind k = kind_of(st, n);
    if (node_dynamic(st, n) && k != AG_OPK_NETOUTPUT)
        st->unknown[s] = true;
    if (k == AG_OPK_NETOUTPUT && st->netout[s] == AG_NONE)
        st->netout[s] = n;
    if (k == AG_OPK_WHILE && ag_node_num_subs(g, n) < 2)
        return AG_ERR(st->ctx, AG_EINVAL,
                      "node '%s' (%s) in graph '%s': a While needs a cond and a body subgraph, it has %u",
                      ag_node_name(g, n), ag_node_type(g, n), sub_label(g, s), ag_node_num_subs(g, n));
    if (!sub_bound(st, s))
        return AG_OK;
    ag_node_id par = ag_sub_parent(g, s);
    if (ag_op_kind_is_data_like(k)) {
        int64_t idx;
        if (!node_pni(g, n, &idx))
            return AG_ERR(st->ctx, AG_EINVAL,
                          "node '%s' (%s) in subgraph '%s': no int attribute " PNI
                          " saying which input of '%s' (%s) it stands for",
                          ag_node_name(g, n), ag_node_type(g, n), sub_label(g, s), ag_node_name(g, par),
                          ag_node_type(g, par));
        if (idx < 0 || (uint64_t)idx >= ag_node_num_inputs(g, par))
            return AG_ERR(st->ctx, AG_EINVAL,
                          "node '%s' (%s) in subgraph '%s': " PNI " %lld is not an input of '%s' (%s), which has %u",
                          ag_node_name(g, n), ag_node_type(g, n), sub_label(g, s), (long long)idx,
                          ag_node_name(g, par), ag_node_type(g, par), ag_node_num_inputs(g, par));
    }
    /* The NetOutput of a While's cond yields the predicate, not a parent output. */
    if (k == AG_OPK_NETOUTPUT && !(kind_of(st, par) == AG_OPK_WHILE && ag_node_sub(g, par, 0) == s)) {
        for (uint32_t i = 0; i < ag_node_num_inputs(g, n); i++) {
            int64_t idx;
            if (ag_node_input_src(g, n, i).node != AG_NONE && !input_pni(g, n, i, &idx))
                return AG_ERR(st->ctx, AG_EINVAL,
                              "node '%s' (%s) input %u in subgraph '%s': no int attribute " PNI
                              " saying which output of '%s' (%s) it is",
                              ag_node_name(g, n), ag_node_type(g, n), i, sub_label(g, s), ag_node_name(g, par),
                              ag_node_type(g, par));
        }
    }
    return AG_OK;
}

static ag_status check_graph(sp_state *st)
{
    ag_graph *g = st->g;
    for (ag_sub_id s = 0; s < st->nsubs; s++) {
        st->netout[s] = AG_NONE;
        if (!ag_sub_alive(g, s))
            continue;
        for (uint32_t k = 0; k < ag_sub_node_count(g, s); k++)
            AG_TRY(check_node(st, s, ag_sub_node_at(g, s, k)));
    }
    /* Needs every subgraph's NetOutput, so after the scan. */
    for (ag_sub_id s = 0; s < st->nsubs; s++) {
        if (!ag_sub_alive(g, s))
            continue;
        for (uint32_t k = 0; k < ag_sub_node_count(g, s); k++) {
            ag_node_id n = ag_sub_node_at(g, s, k);
            if (kind_of(st, n) != AG_OPK_WHILE)
                continue;
            ag_sub_id body = ag_node_sub(g, n, 1);
            uint32_t count = 0;
            for (uint32_t j = 0; j < ag_sub_node_count(g, body); j++)
                count += kind_of(st, ag_sub_node_at(g, body, j)) == AG_OPK_NETOUTPUT;
            if (count != 1)
                return AG_ERR(st->ctx, AG_EINVAL,
                              "node '%s' (%s) in graph '%s': its body '%s' must have exactly one NetOutput, it has %u",
                              ag_node_name(g, n), ag_node_type(g, n), sub_label(g, s), ag_sub_name(g, body), count);
        }
    }
    return AG_OK;
}

ag_status ag_pass_subgraph_isolate(ag_pass_env *env)
{
    ag_graph *g = env->g;
    sp_state st;
    memset(&st, 0, sizeof st);
    st.env = env;
    st.g = g;
    st.ops = env->ops;
    st.ctx = ag_graph_ctx(g);
    st.nsubs = ag_graph_sub_count(g);
    st.name_cap = 256;
    st.unknown = ag_calloc(st.ctx, st.nsubs, sizeof *st.unknown);
    st.netout = ag_calloc(st.ctx, st.nsubs, sizeof *st.netout);
    st.base = ag_alloc(st.ctx, st.name_cap);
    st.name = ag_alloc(st.ctx, st.name_cap);
    ag_status rc = AG_OK;
    if (st.unknown == NULL || st.netout == NULL || st.base == NULL || st.name == NULL)
        rc = AG_OOM(st.ctx);
    if (rc == AG_OK)
        rc = check_graph(&st);
    for (ag_sub_id s = 0; rc == AG_OK && s < st.nsubs; s++)
        if (ag_sub_alive(g, s))
            rc = process_sub(&st, s);
    ag_free(st.ctx, st.unknown, (size_t)st.nsubs * sizeof *st.unknown);
    ag_free(st.ctx, st.netout, (size_t)st.nsubs * sizeof *st.netout);
    ag_free(st.ctx, st.base, st.name_cap);
    ag_free(st.ctx, st.name, st.name_cap);
    ag_free(st.ctx, st.mark, (size_t)st.mark_cap * sizeof *st.mark);
    ag_vec_free(st.ctx, &st.nodes, sizeof(ag_node_id));
    ag_vec_free(st.ctx, &st.work, sizeof(ag_port));
    ag_vec_free(st.ctx, &st.todo, sizeof(ag_node_id));
    ag_vec_free(st.ctx, &st.sel, sizeof(ag_node_id));
    ag_vec_free(st.ctx, &st.iset, sizeof(ag_node_id));
    ag_vec_free(st.ctx, &st.oset, sizeof(ag_node_id));
    ag_vec_free(st.ctx, &st.text, 1);
    ag_aliases_destroy(st.alias);
    return rc;
}
