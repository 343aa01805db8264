/* AtomicAddrCleanPass (seed 3.1.5, reference notes 5.4): outputs that a node
 * accumulates into atomically must be zeroed before the node runs.  Each
 * subgraph gets one AtomicAddrClean node at its head ordered before every
 * atomic node, or, in loop graphs, one clean node per atomic node so that
 * the zeroing repeats every iteration; nodes connected to the NetOutput get
 * a clean node of their own ("dispersed"). */
#include "passes/pass_internal.h"

#include <stdio.h>

#define PASS_NAME "atomic_addr_clean"
#define CLEAN_TYPE "AtomicAddrClean"
#define RULE_HEAD "atomic: one clean at graph head"
#define RULE_LOOP "atomic: clean per atomic op in loop"
#define RULE_DISPERSED "atomic: dispersed clean for netoutput-connected node"

/* Per-node marks for the subgraph being processed. */
enum {
    M_HCOM = 1u << 0,      /* HCCL-atomic node none of whose inputs is data-like */
    M_GENTASK = 1u << 1,   /* atomic, but cleaned by its own task (need_gentask_atomic) */
    M_DISPERSED = 1u << 2, /* has a dispersed clean node */
};

typedef struct atomic_state {
    ag_pass_env *env;
    ag_graph *g;
    ag_ctx *ctx;
    uint32_t cap;     /* node ids below cap have marks / stamps */
    uint8_t *mark;    /* M_* by node id */
    uint32_t *stamp;  /* serial of the last clean node linked to the node */
    uint32_t serial;  /* serial of the clean node being linked */
    ag_vec nodes;     /* ag_node_id: snapshot of the subgraph */
    ag_vec collected; /* ag_node_id: atomic nodes that need a clean node */
    ag_vec hcom;      /* ag_node_id: collected HCCL-atomic nodes */
} atomic_state;

static ag_op_kind kind_of(const atomic_state *st, ag_node_id n)
{
    return ag_ops_node_kind(st->env->ops, st->g, n);
}

/* The reference learns that a type is atomic from the HCCL kernel store
 * (only HCCL reports it); here the registry's hccl + atomic flags say it. */
static bool hccl_type_atomic(const atomic_state *st, ag_node_id n)
{
    uint32_t f = ag_ops_node_flags(st->env->ops, st->g, n);
    return (f & AG_OPF_HCCL) && (f & AG_OPF_ATOMIC);
}

/* An HCCL-atomic node fed by a data-like node is not treated as atomic: the
 * user's input memory is not zeroed. */
static bool input_from_data(const atomic_state *st, ag_node_id n)
{
    for (uint32_t i = 0; i < ag_node_num_inputs(st->g, n); i++) {
        ag_port p = ag_node_input_src(st->g, n, i);
        if (p.node != AG_NONE && ag_op_kind_is_data_like(kind_of(st, p.node)))
            return true;
    }
    return false;
}

static bool is_hcom(const atomic_state *st, ag_node_id n)
{
    return n < st->cap && (st->mark[n] & M_HCOM);
}

static bool output_has_hcom_consumer(const atomic_state *st, ag_node_id n, uint32_t o)
{
    for (uint32_t k = 0; k < ag_node_output_nconsumers(st->g, n, o); k++)
        if (is_hcom(st, ag_node_output_consumer(st->g, n, o, k).node))
            return true;
    return false;
}

/* Every output feeds at least one HCCL-atomic node, which cleans it itself.
 * A node without outputs is not skipped (the reference skips it vacuously,
 * which would leave its atomic inputs or workspace uncleaned). */
static bool all_outputs_to_hcom(const atomic_state *st, ag_node_id n)
{
    uint32_t nout = ag_node_num_outputs(st->g, n);
    if (nout == 0)
        return false;
    for (uint32_t o = 0; o < nout; o++)
        if (!output_has_hcom_consumer(st, n, o))
            return false;
    return true;
}

/* Loop graphs also skip a node whose atomic anchors are outputs only, each
 * consumed by an HCCL-atomic node. */
static bool atomic_outputs_to_hcom(const atomic_state *st, ag_node_id n)
{
    const ag_ops *ops = st->env->ops;
    for (uint32_t i = 0; i < ag_node_num_inputs(st->g, n); i++)
        if (ag_ops_is_atomic_input(ops, st->g, n, i))
            return false;
    bool any = false;
    for (uint32_t o = 0; o < ag_node_num_outputs(st->g, n); o++) {
        if (!ag_ops_is_atomic_output(ops, st->g, n, o))
            continue;
        any = true;
        if (!output_has_hcom_consumer(st, n, o))
            return false;
    }
    return any;
}

/* Its zeroing is emitted with its own task: it feeds a _no_task node, or an
 * output aliases a variable (zeroing it would wipe the variable). */
static bool needs_own_task(const atomic_state *st, ag_node_id n)
{
    for (uint32_t o = 0; o < ag_node_num_outputs(st->g, n); o++) {
        if (ag_ops_output_ref_var(st->g, n, o))
            return true;
        for (uint32_t k = 0; k < ag_node_output_nconsumers(st->g, n, o); k++) {
            ag_node_id c = ag_node_output_consumer(st->g, n, o, k).node;
            if (ag_attrs_get_flag(ag_node_attrs_c(st->g, c), "_no_task", false))
                return true;
        }
    }
    return false;
}

/* Already cleaned: some atomic-clean node has a control edge to it (what an
 * earlier run of this pass, or the producer of the graph, left). */
static bool has_clean(const atomic_state *st, ag_node_id n)
{
    for (uint32_t k = 0; k < ag_node_num_ctrl_in(st->g, n); k++)
        if (kind_of(st, ag_node_ctrl_in(st->g, n, k)) == AG_OPK_ATOMIC_CLEAN)
            return true;
    return false;
}

static ag_status set_true_once(atomic_state *st, ag_node_id n, const char *name)
{
    ag_attrs *a = ag_node_attrs(st->g, n);
    if (ag_attrs_get_flag(a, name, false))
        return AG_OK;
    return ag_attrs_set_bool(st->g, a, name, true);
}

/* Creates a clean node in subgraph s named after base ("<node>_atomic_addr_clean"
 * for a node's own clean, "atomic_addr_clean" for the shared one), records it
 * and starts a new link serial. */
static ag_status make_clean(atomic_state *st, ag_sub_id s, const ag_why *why, ag_node_id owner_of,
                            ag_node_id *out)
{
    const char *prefix = owner_of == AG_NONE ? "" : ag_node_name(st->g, owner_of);
    const char *suffix = owner_of == AG_NONE ? "atomic_addr_clean" : "_atomic_addr_clean";
    size_t blen = strlen(prefix) + strlen(suffix) + 1;
    size_t ncap = blen + 24;
    char *buf = ag_alloc(st->ctx, blen + ncap);
    if (!buf)
        return AG_OOM(st->ctx);
    char *name = buf + blen;
    snprintf(buf, blen, "%s%s", prefix, suffix);
    ag_status rc = ag_pass_unique_name(st->env, s, buf, name, ncap);
    ag_node_id c = AG_NONE;
    if (rc == AG_OK)
        rc = ag_graph_add_node(st->g, s, CLEAN_TYPE, name, 0, 0, &c);
    ag_free(st->ctx, buf, blen + ncap);
    AG_TRY(rc);
    rc = ag_pass_record(st->env, why, c, "", owner_of == AG_NONE ? "" : ag_node_name(st->g, owner_of));
    if (rc != AG_OK) {
        ag_graph_remove_node(st->g, c);
        return rc;
    }
    st->serial++;
    *out = c;
    return AG_OK;
}

/* Control edge clean -> n, once per clean node. */
static ag_status link(atomic_state *st, const ag_why *why, ag_node_id clean, ag_node_id n)
{
    if (n < st->cap) {
        if (st->stamp[n] == st->serial)
            return AG_OK;
        st->stamp[n] = st->serial;
    }
    return ag_pass_add_ctrl(st->env, why, clean, n);
}

/* Clean node -> the producers of every HCCL-atomic node's inputs, so that the
 * zeroing cannot overlap the writes the collective reads. */
static ag_status link_hcom_producers(atomic_state *st, const ag_why *why, ag_node_id clean)
{
    for (uint32_t k = 0; k < st->hcom.len; k++) {
        ag_node_id h = AG_VEC_AT(st->hcom, ag_node_id, k);
        for (uint32_t i = 0; i < ag_node_num_inputs(st->g, h); i++) {
            ag_port p = ag_node_input_src(st->g, h, i);
            if (p.node != AG_NONE)
                AG_TRY(link(st, why, clean, p.node));
        }
    }
    return AG_OK;
}

static bool skip_successor(const atomic_state *st, ag_node_id n)
{
    if (n < st->cap && (st->mark[n] & (M_DISPERSED | M_GENTASK)))
        return true;
    ag_op_kind k = kind_of(st, n);
    return k == AG_OPK_NETOUTPUT || k == AG_OPK_ATOMIC_CLEAN;
}

/* With several streams, being first in the graph does not make the clean node
 * run first: link it to every successor of an input-less Data or Variable
 * (the first node of each stream), as the reference does. */
static ag_status link_stream_heads(atomic_state *st, const ag_why *why, ag_node_id clean)
{
    for (uint32_t k = 0; k < st->nodes.len; k++) {
        ag_node_id d = AG_VEC_AT(st->nodes, ag_node_id, k);
        ag_op_kind dk = kind_of(st, d);
        if (!ag_op_kind_is_data_like(dk) && !ag_op_kind_is_var_like(dk))
            continue;
        bool has_in = ag_node_num_ctrl_in(st->g, d) > 0;
        for (uint32_t i = 0; i < ag_node_num_inputs(st->g, d) && !has_in; i++)
            has_in = ag_node_input_src(st->g, d, i).node != AG_NONE;
        if (has_in)
            continue;
        for (uint32_t o = 0; o < ag_node_num_outputs(st->g, d); o++) {
            for (uint32_t c = 0; c < ag_node_output_nconsumers(st->g, d, o); c++) {
                ag_node_id n = ag_node_output_consumer(st->g, d, o, c).node;
                if (!skip_successor(st, n))
                    AG_TRY(link(st, why, clean, n));
            }
        }
        for (uint32_t c = 0; c < ag_node_num_ctrl_out(st->g, d); c++) {
            ag_node_id n = ag_node_ctrl_out(st->g, d, c);
            if (!skip_successor(st, n))
                AG_TRY(link(st, why, clean, n));
        }
    }
    return AG_OK;
}

/* A While body or condition runs once per iteration, as does a graph with a
 * LoopCond node (the reference's loop marker; our loops are While subgraphs). */
static bool is_loop_graph(const atomic_state *st, ag_sub_id s)
{
    ag_node_id p = ag_sub_parent(st->g, s);
    if (p != AG_NONE) {
        ag_op_kind pk = kind_of(st, p);
        if (pk == AG_OPK_WHILE || pk == AG_OPK_LOOP)
            return true;
    }
    for (uint32_t k = 0; k < st->nodes.len; k++)
        if (kind_of(st, AG_VEC_AT(st->nodes, ag_node_id, k)) == AG_OPK_LOOP_COND)
            return true;
    return false;
}

static ag_status push_id(atomic_state *st, ag_vec *v, ag_node_id n)
{
    return ag_vec_push(st->ctx, v, sizeof n, &n) == AG_OK ? AG_OK : AG_OOM(st->ctx);
}

/* IsNeedCleanNode over the snapshot: fills collected and hcom, marks nodes. */
static ag_status collect(atomic_state *st)
{
    for (uint32_t k = 0; k < st->nodes.len; k++) {
        ag_node_id n = AG_VEC_AT(st->nodes, ag_node_id, k);
        if (hccl_type_atomic(st, n) && !input_from_data(st, n))
            st->mark[n] |= M_HCOM;
    }
    for (uint32_t k = 0; k < st->nodes.len; k++) {
        ag_node_id n = AG_VEC_AT(st->nodes, ag_node_id, k);
        if (hccl_type_atomic(st, n)) {
            if (st->mark[n] & M_HCOM) {
                AG_TRY(push_id(st, &st->hcom, n));
                AG_TRY(push_id(st, &st->collected, n));
            }
            continue;
        }
        if (!(ag_ops_node_flags(st->env->ops, st->g, n) & AG_OPF_ATOMIC))
            continue;
        AG_TRY(set_true_once(st, n, "is_atomic_node"));
        /* A node once marked keeps cleaning through its own task, even when a
         * later pass removed the _no_task consumer that decided it. */
        if (ag_attrs_get_flag(ag_node_attrs_c(st->g, n), "need_gentask_atomic", false) || needs_own_task(st, n)) {
            st->mark[n] |= M_GENTASK;
            AG_TRY(set_true_once(st, n, "need_gentask_atomic"));
            continue;
        }
        AG_TRY(push_id(st, &st->collected, n));
    }
    return AG_OK;
}

static ag_status copy_stream_label(atomic_state *st, ag_node_id from, ag_node_id to)
{
    const char *label;
    if (!ag_attrs_get_string(ag_node_attrs_c(st->g, from), "_stream_label", &label))
        return AG_OK;
    return ag_attrs_set_string(st->g, ag_node_attrs(st->g, to), "_stream_label", label);
}

static ag_status handle_loop(atomic_state *st, ag_sub_id s)
{
    const ag_why why = {PASS_NAME, RULE_LOOP};
    for (uint32_t k = 0; k < st->collected.len; k++) {
        ag_node_id n = AG_VEC_AT(st->collected, ag_node_id, k);
        if (atomic_outputs_to_hcom(st, n) || all_outputs_to_hcom(st, n) || has_clean(st, n))
            continue;
        ag_node_id c;
        AG_TRY(make_clean(st, s, &why, n, &c));
        AG_TRY(link(st, &why, c, n));
        AG_TRY(copy_stream_label(st, n, c));
    }
    return AG_OK;
}

/* _is_connected_to_netoutput: the reference stores the output indices that
 * feed the NetOutput (an int list); a bool true is accepted as well. */
static bool connected_to_netoutput(const atomic_state *st, ag_node_id n)
{
    const ag_attr *a = ag_attrs_find(ag_node_attrs_c(st->g, n), "_is_connected_to_netoutput");
    if (!a)
        return false;
    switch (a->kind) {
    case AG_ATTR_INTS:
    case AG_ATTR_BOOLS:
        return a->count > 0;
    case AG_ATTR_BOOL:
        return a->v.b;
    case AG_ATTR_INT:
        return a->v.i != 0;
    default:
        return false;
    }
}

static ag_status handle_normal(atomic_state *st, ag_sub_id s)
{
    const ag_why head = {PASS_NAME, RULE_HEAD};
    const ag_why disp = {PASS_NAME, RULE_DISPERSED};
    bool need_head = false;
    /* Dispersed nodes first: the shared clean node must not link to them. */
    for (uint32_t k = 0; k < st->collected.len; k++) {
        ag_node_id n = AG_VEC_AT(st->collected, ag_node_id, k);
        if (all_outputs_to_hcom(st, n))
            continue;
        if (connected_to_netoutput(st, n) && !(st->mark[n] & M_HCOM)) {
            st->mark[n] |= M_DISPERSED;
            if (has_clean(st, n))
                continue;
            ag_node_id c;
            AG_TRY(make_clean(st, s, &disp, n, &c));
            AG_TRY(link(st, &disp, c, n));
            AG_TRY(link_hcom_producers(st, &disp, c));
        } else if (!has_clean(st, n)) {
            need_head = true;
        }
    }
    if (!need_head)
        return AG_OK;
    ag_node_id c;
    AG_TRY(make_clean(st, s, &head, AG_NONE, &c));
    for (uint32_t k = 0; k < st->collected.len; k++) {
        ag_node_id n = AG_VEC_AT(st->collected, ag_node_id, k);
        if (!(st->mark[n] & M_DISPERSED) && !all_outputs_to_hcom(st, n) && !has_clean(st, n))
            AG_TRY(link(st, &head, c, n));
    }
    AG_TRY(link_hcom_producers(st, &head, c));
    return link_stream_heads(st, &head, c);
}

static ag_status run_sub(atomic_state *st, ag_sub_id s)
{
    st->nodes.len = 0;
    st->collected.len = 0;
    st->hcom.len = 0;
    uint32_t cnt = ag_sub_node_count(st->g, s);
    if (ag_vec_reserve(st->ctx, &st->nodes, sizeof(ag_node_id), cnt) != AG_OK)
        return AG_OOM(st->ctx);
    for (uint32_t k = 0; k < cnt; k++)
        AG_VEC_AT(st->nodes, ag_node_id, st->nodes.len++) = ag_sub_node_at(st->g, s, k);
    AG_TRY(collect(st));
    if (st->collected.len == 0)
        return AG_OK;
    /* The reference compiles atomic nodes of unknown-shape graphs without
     * inserting anything, and with the "clean separately" policy gives every
     * atomic node its own task; neither option reaches this pass here. */
    return is_loop_graph(st, s) ? handle_loop(st, s) : handle_normal(st, s);
}

ag_status ag_pass_atomic_addr_clean(ag_pass_env *env)
{
    atomic_state st;
    memset(&st, 0, sizeof st);
    st.env = env;
    st.g = env->g;
    st.ctx = ag_graph_ctx(env->g);
    st.cap = ag_graph_node_capacity(env->g);
    st.mark = ag_calloc(st.ctx, st.cap ? st.cap : 1, sizeof *st.mark);
    st.stamp = ag_calloc(st.ctx, st.cap ? st.cap : 1, sizeof *st.stamp);
    ag_status rc = AG_OK;
    if (!st.mark || !st.stamp)
        rc = AG_OOM(st.ctx);
    /* The pass adds nodes, never subgraphs: the count is fixed. */
    uint32_t nsub = ag_graph_sub_count(env->g);
    for (ag_sub_id s = 0; rc == AG_OK && s < nsub; s++)
        if (ag_sub_alive(env->g, s))
            rc = run_sub(&st, s);
    ag_vec_free(st.ctx, &st.nodes, sizeof(ag_node_id));
    ag_vec_free(st.ctx, &st.collected, sizeof(ag_node_id));
    ag_vec_free(st.ctx, &st.hcom, sizeof(ag_node_id));
    ag_free(st.ctx, st.mark, (st.cap ? st.cap : 1) * sizeof *st.mark);
    ag_free(st.ctx, st.stamp, (st.cap ? st.cap : 1) * sizeof *st.stamp);
    return rc;
}
