/* The report every pass writes its explanations into, and the helpers that
 * make a change and explain it in one step (isolating node on an edge,
 * control edge, free-form record).  A helper either makes its change and
 * records it, or fails leaving graph and report as they were. */
#include <stdio.h>

#include "passes/pass_internal.h"

struct ag_report {
    ag_ctx *ctx;
    ag_arena strings; /* every string and node-name array the report holds */
    ag_vec isos;      /* ag_isolation */
    ag_vec warns;     /* ag_warning */
};

ag_status ag_report_create(ag_ctx *ctx, ag_report **out)
{
    *out = NULL;
    ag_report *r = ag_calloc(ctx, 1, sizeof *r);
    if (r == NULL)
        return AG_OOM(ctx);
    r->ctx = ctx;
    ag_arena_init(&r->strings, ctx);
    *out = r;
    return AG_OK;
}

void ag_report_destroy(ag_report *r)
{
    if (r == NULL)
        return;
    ag_ctx *ctx = r->ctx;
    ag_arena_reset(&r->strings);
    ag_vec_free(ctx, &r->isos, sizeof(ag_isolation));
    ag_vec_free(ctx, &r->warns, sizeof(ag_warning));
    ag_free(ctx, r, sizeof *r);
}

uint32_t ag_report_isolation_count(const ag_report *r)
{
    return r ? r->isos.len : 0;
}

const ag_isolation *ag_report_isolation_at(const ag_report *r, uint32_t k)
{
    return r && k < r->isos.len ? &AG_VEC_AT(r->isos, ag_isolation, k) : NULL;
}

uint32_t ag_report_warning_count(const ag_report *r)
{
    return r ? r->warns.len : 0;
}

const ag_warning *ag_report_warning_at(const ag_report *r, uint32_t k)
{
    return r && k < r->warns.len ? &AG_VEC_AT(r->warns, ag_warning, k) : NULL;
}

static const char *report_str(ag_report *r, const char *s)
{
    return ag_arena_strdup(&r->strings, s ? s : "");
}

/* Copies iso's strings into the report's arena.  On failure the arena may
 * keep some copies; they are unreachable and freed with the report. */
static ag_status copy_isolation(ag_report *r, const ag_isolation *iso, ag_isolation *out)
{
    out->pass = report_str(r, iso->pass);
    out->rule = report_str(r, iso->rule);
    out->kind = report_str(r, iso->kind);
    out->graph = report_str(r, iso->graph);
    out->node = report_str(r, iso->node);
    out->producer = report_str(r, iso->producer);
    out->consumer = report_str(r, iso->consumer);
    if (!out->pass || !out->rule || !out->kind || !out->graph || !out->node || !out->producer || !out->consumer)
        return AG_OOM(r->ctx);
    return AG_OK;
}

ag_status ag_report_isolation(ag_report *r, const ag_isolation *iso)
{
    ag_isolation copy;
    AG_TRY(copy_isolation(r, iso, &copy));
    if (ag_vec_push(r->ctx, &r->isos, sizeof copy, &copy) != AG_OK)
        return AG_OOM(r->ctx);
    return AG_OK;
}

ag_status ag_report_warning(ag_report *r, const char *pass, const char *code, const char *const *nodes,
                            uint32_t nnodes, const char *fmt, ...)
{
    ag_warning w = {0};
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return AG_ERR(r->ctx, AG_EINVAL, "warning %s of pass %s: message format failed", code ? code : "",
                      pass ? pass : "");
    char *msg;
    if ((size_t)n < sizeof small) {
        msg = ag_arena_strdup(&r->strings, small);
    } else {
        msg = ag_arena_alloc(&r->strings, (size_t)n + 1);
        if (msg != NULL) {
            va_start(ap, fmt);
            vsnprintf(msg, (size_t)n + 1, fmt, ap);
            va_end(ap);
        }
    }
    w.message = msg;
    w.pass = report_str(r, pass);
    w.code = report_str(r, code);
    w.nnodes = nnodes;
    const char **names = NULL;
    bool names_ok = true;
    if (nnodes > 0) {
        names = ag_arena_alloc(&r->strings, (size_t)nnodes * sizeof *names);
        names_ok = names != NULL;
        for (uint32_t k = 0; names_ok && k < nnodes; k++)
            names_ok = (names[k] = report_str(r, nodes[k])) != NULL;
    }
    w.nodes = names;
    if (!msg || !w.pass || !w.code || !names_ok || ag_vec_push(r->ctx, &r->warns, sizeof w, &w) != AG_OK)
        return AG_OOM(r->ctx);
    return AG_OK;
}

/* ---- unique names ---- */

ag_status ag_pass_unique_name(ag_pass_env *env, ag_sub_id s, const char *base, char *buf, size_t cap)
{
    ag_ctx *ctx = ag_graph_ctx(env->g);
    size_t len = strlen(base);
    if (len + 1 > cap)
        return AG_ERR(ctx, AG_EINVAL, "node name '%s' in graph %s: longer than the %zu-byte buffer", base,
                      ag_sub_name(env->g, s), cap);
    memcpy(buf, base, len + 1);
    for (uint32_t k = 1; ag_sub_find_node(env->g, s, buf) != AG_NONE; k++) {
        int n = snprintf(buf, cap, "%s_%u", base, (unsigned)k);
        if (n < 0 || (size_t)n >= cap)
            return AG_ERR(ctx, AG_EINVAL, "node name '%s_%u' in graph %s: longer than the %zu-byte buffer", base,
                          (unsigned)k, ag_sub_name(env->g, s), cap);
    }
    return AG_OK;
}

/* A fresh name for a node of type type that pass inserts next to producer:
 * name itself when given (made unique), else "<producer>_<pass>_<type><k>"
 * with the smallest k >= 0 not yet used in s.  *out is hook-allocated
 * (*cap bytes). */
static ag_status insert_name(ag_pass_env *env, ag_sub_id s, const char *name, const char *producer,
                             const char *pass, const char *type, char **out, size_t *cap)
{
    ag_ctx *ctx = ag_graph_ctx(env->g);
    size_t n = name ? strlen(name) + 16 : strlen(producer) + strlen(pass) + strlen(type) + 16;
    char *buf = ag_alloc(ctx, n);
    if (buf == NULL)
        return AG_OOM(ctx);
    ag_status st = AG_OK;
    if (name) {
        st = ag_pass_unique_name(env, s, name, buf, n);
    } else {
        for (uint32_t k = 0;; k++) {
            snprintf(buf, n, "%s_%s_%s%u", producer, pass, type, (unsigned)k);
            if (ag_sub_find_node(env->g, s, buf) == AG_NONE)
                break;
        }
    }
    if (st != AG_OK) {
        ag_free(ctx, buf, n);
        return st;
    }
    *out = buf;
    *cap = n;
    return AG_OK;
}

/* "name:index" in the report's arena. */
static const char *anchor_str(ag_report *r, const ag_graph *g, ag_node_id n, uint32_t index)
{
    const char *nm = ag_node_name(g, n);
    size_t len = strlen(nm) + 12;
    char *s = ag_arena_alloc(&r->strings, len);
    if (s != NULL)
        snprintf(s, len, "%s:%u", nm, (unsigned)index);
    return s;
}

/* Fills the strings of an isolation in the report's arena (kind, graph and
 * node taken from node) and makes room for nrec more entries, so that the
 * push after the graph change cannot fail. */
static ag_status prepare_record(ag_pass_env *env, const ag_why *why, const char *kind, ag_sub_id s,
                                const char *node, ag_isolation *iso, uint32_t nrec)
{
    ag_report *r = env->report;
    ag_isolation in = {why->pass, why->rule, kind, ag_sub_name(env->g, s), node, "", ""};
    AG_TRY(copy_isolation(r, &in, iso));
    if (ag_vec_reserve(r->ctx, &r->isos, sizeof(ag_isolation), nrec) != AG_OK)
        return AG_OOM(r->ctx);
    return AG_OK;
}

static void push_reserved(ag_report *r, const ag_isolation *iso)
{
    ag_assert(r->isos.len < r->isos.cap);
    AG_VEC_AT(r->isos, ag_isolation, r->isos.len++) = *iso;
}

static ag_status check_env_node(ag_pass_env *env, const char *what, ag_node_id n)
{
    if (!ag_node_alive(env->g, n))
        return AG_ERR(ag_graph_ctx(env->g), AG_EINVAL, "%s: node id %u is not a live node", what, (unsigned)n);
    return AG_OK;
}

/* Creates the node to insert in subgraph s with both descriptors typed like
 * the producer's output desc.  On failure nothing is left in the graph. */
static ag_status make_isolation_node(ag_pass_env *env, ag_sub_id s, const char *type, const char *name,
                                     ag_port producer, const ag_why *why, ag_node_id *out)
{
    const char *pass = why->pass;
    ag_graph *g = env->g;
    ag_ctx *ctx = ag_graph_ctx(g);
    char *nm = NULL;
    size_t cap = 0;
    AG_TRY(insert_name(env, s, name, ag_node_name(g, producer.node), pass, type, &nm, &cap));
    ag_node_id n = AG_NONE;
    ag_status st = ag_graph_add_node(g, s, type, nm, 1, 1, &n);
    ag_free(ctx, nm, cap);
    if (st != AG_OK)
        return st;
    const ag_tensor_desc *pd = ag_node_output_desc_c(g, producer.node, producer.index);
    if ((st = ag_desc_copy_type(g, ag_node_input_desc(g, n, 0), pd)) != AG_OK ||
        (st = ag_desc_copy_type(g, ag_node_output_desc(g, n, 0), pd)) != AG_OK ||
        (strcmp(pass, AG_PASS_RW_CONFLICT) != 0 && (st = ag_attrs_set_bool(g, ag_node_attrs(g, n), "_cannot_be_deleted", true)) != AG_OK)) {
        ag_graph_remove_node(g, n);
        return st;
    }
    *out = n;
    return AG_OK;
}

ag_status ag_pass_insert_before(ag_pass_env *env, const ag_why *why, ag_node_id dst, uint32_t i, const char *type,
                                const char *name, ag_node_id *out)
{
    ag_graph *g = env->g;
    ag_ctx *ctx = ag_graph_ctx(g);
    AG_TRY(check_env_node(env, "insert before", dst));
    if (i >= ag_node_num_inputs(g, dst))
        return AG_ERR(ctx, AG_EINVAL, "%s: node %s (%s) input %u out of range (%u inputs)", why->pass,
                      ag_node_name(g, dst), ag_node_type(g, dst), (unsigned)i, (unsigned)ag_node_num_inputs(g, dst));
    ag_port p = ag_node_input_src(g, dst, i);
    if (p.node == AG_NONE)
        return AG_ERR(ctx, AG_EINVAL, "%s: node %s (%s) input %u has no producer to isolate", why->pass,
                      ag_node_name(g, dst), ag_node_type(g, dst), (unsigned)i);
    ag_sub_id s = ag_node_owner(g, dst);
    ag_node_id n = AG_NONE;
    AG_TRY(make_isolation_node(env, s, type, name, p, why, &n));
    ag_isolation iso;
    ag_status st = AG_OK;
    if (env->report != NULL) {
        if ((st = prepare_record(env, why, type, s, ag_node_name(g, n), &iso, 1)) != AG_OK)
            goto fail;
        iso.producer = anchor_str(env->report, g, p.node, p.index);
        iso.consumer = anchor_str(env->report, g, dst, i);
        if (!iso.producer || !iso.consumer) {
            st = AG_OOM(ctx);
            goto fail;
        }
    }
    if ((st = ag_graph_insert_before(g, dst, i, n, 0, 0)) != AG_OK)
        goto fail;
    if (env->report != NULL)
        push_reserved(env->report, &iso);
    if (out)
        *out = n;
    return AG_OK;
fail:
    ag_graph_remove_node(g, n);
    return st;
}

ag_status ag_pass_insert_after(ag_pass_env *env, const ag_why *why, ag_node_id src, uint32_t o, const ag_port *dsts,
                               uint32_t ndsts, const char *type, const char *name, ag_node_id *out)
{
    ag_graph *g = env->g;
    ag_ctx *ctx = ag_graph_ctx(g);
    AG_TRY(check_env_node(env, "insert after", src));
    if (o >= ag_node_num_outputs(g, src))
        return AG_ERR(ctx, AG_EINVAL, "%s: node %s (%s) output %u out of range (%u outputs)", why->pass,
                      ag_node_name(g, src), ag_node_type(g, src), (unsigned)o, (unsigned)ag_node_num_outputs(g, src));
    ag_sub_id s = ag_node_owner(g, src);
    ag_port p = {src, o};
    ag_node_id n = AG_NONE;
    AG_TRY(make_isolation_node(env, s, type, name, p, why, &n));

    /* The consumers moved, captured before the edges change.  With none the
     * node still gets one entry (consumer ""): every inserted node is
     * explained. */
    uint32_t nc = dsts ? ndsts : ag_node_output_nconsumers(g, src, o);
    uint32_t nrec = nc ? nc : 1;
    ag_isolation *recs = NULL;
    ag_status st = AG_OK;
    if (env->report != NULL) {
        ag_isolation base;
        if ((st = prepare_record(env, why, type, s, ag_node_name(g, n), &base, nrec)) != AG_OK)
            goto fail;
        base.producer = anchor_str(env->report, g, src, o);
        recs = ag_arena_alloc(&env->report->strings, (size_t)nrec * sizeof *recs);
        if (base.producer == NULL || recs == NULL) {
            st = AG_OOM(ctx);
            goto fail;
        }
        recs[0] = base;
        for (uint32_t k = 0; k < nc; k++) {
            ag_port c = dsts ? dsts[k] : ag_node_output_consumer(g, src, o, k);
            recs[k] = base;
            /* A bad entry in dsts is rejected by ag_graph_insert_after below. */
            recs[k].consumer = ag_node_alive(g, c.node) ? anchor_str(env->report, g, c.node, c.index) : "";
            if (recs[k].consumer == NULL) {
                st = AG_OOM(ctx);
                goto fail;
            }
        }
    }
    if ((st = ag_graph_insert_after(g, src, o, dsts, ndsts, n, 0, 0)) != AG_OK)
        goto fail;
    for (uint32_t k = 0; recs != NULL && k < nrec; k++)
        push_reserved(env->report, &recs[k]);
    if (out)
        *out = n;
    return AG_OK;
fail:
    ag_graph_remove_node(g, n);
    return st;
}

static bool has_ctrl_edge(const ag_graph *g, ag_node_id src, ag_node_id dst)
{
    uint32_t nout = ag_node_num_ctrl_out(g, src), nin = ag_node_num_ctrl_in(g, dst);
    if (nout <= nin) {
        for (uint32_t k = 0; k < nout; k++)
            if (ag_node_ctrl_out(g, src, k) == dst)
                return true;
    } else {
        for (uint32_t k = 0; k < nin; k++)
            if (ag_node_ctrl_in(g, dst, k) == src)
                return true;
    }
    return false;
}

ag_status ag_pass_add_ctrl(ag_pass_env *env, const ag_why *why, ag_node_id src, ag_node_id dst)
{
    ag_graph *g = env->g;
    AG_TRY(check_env_node(env, "add control edge", src));
    AG_TRY(check_env_node(env, "add control edge", dst));
    if (has_ctrl_edge(g, src, dst))
        return AG_OK;
    ag_isolation iso;
    if (env->report != NULL) {
        AG_TRY(prepare_record(env, why, "control", ag_node_owner(g, src), "", &iso, 1));
        iso.producer = report_str(env->report, ag_node_name(g, src));
        iso.consumer = report_str(env->report, ag_node_name(g, dst));
        if (!iso.producer || !iso.consumer)
            return AG_OOM(ag_graph_ctx(g));
    }
    AG_TRY(ag_graph_add_ctrl_edge(g, src, dst));
    if (env->report != NULL)
        push_reserved(env->report, &iso);
    return AG_OK;
}

ag_status ag_pass_record(ag_pass_env *env, const ag_why *why, ag_node_id node, const char *producer,
                         const char *consumer)
{
    ag_graph *g = env->g;
    AG_TRY(check_env_node(env, "record isolation", node));
    if (env->report == NULL)
        return AG_OK;
    ag_isolation iso = {why->pass,           why->rule, ag_node_type(g, node), ag_sub_name(g, ag_node_owner(g, node)),
                        ag_node_name(g, node), producer,  consumer};
    return ag_report_isolation(env->report, &iso);
}

bool ag_warning_is_note(const ag_warning *w)
{
    return w->code[0] == 'N' && w->code[1] == '_';
}

uint32_t ag_report_findings(const ag_report *r)
{
    uint32_t n = ag_report_isolation_count(r);
    for (uint32_t k = 0; k < ag_report_warning_count(r); k++)
        if (!ag_warning_is_note(ag_report_warning_at(r, k)))
            n++;
    return n;
}
