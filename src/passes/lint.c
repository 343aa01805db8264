/* GraphLint (seed 3.5; reference notes 7.2): warns (W18888) wherever a node
 * that writes a buffer shared by several consumers is not ordered, by a path
 * of data or control edges, against every other consumer of that buffer; on
 * some legal schedule the two would then touch the buffer in either order.
 * Lint only reads the graph and never fails the pipeline on a finding.
 *
 * The reference closes each graph under reachability in an n x n bit matrix.
 * Here memory stays linear (about 70 bytes per node, one byte per input):
 *  - setup, O(n + m): a topological order (positions), each input's class,
 *    and labels for up to CHAINS long paths (chain labels below), which
 *    prove most "a reaches b" of a valid graph in O(1) per chain;
 *  - per output with consumer nodes C (k = |C|) of which W write, sorted by
 *    position (O(k log k)), the fast check proves that nothing is unordered:
 *    consecutive writers must reach each other, and each reader between two
 *    writers must be reached from the one before and reach the one after
 *    (reachability is transitive, so this orders every writer against every
 *    other consumer).  Each question a chain does not answer goes to a
 *    search bounded by the positions of its targets that stops once all are
 *    found; the searches of one output cover disjoint position ranges, so
 *    the check visits each node of the span [pos c1, pos ck] at most twice;
 *  - only where that check fails (there is a warning), the exact pairs: with
 *    fewer than SWEEP_WRITERS writers one forward and one backward search
 *    per writer, otherwise sweeps in topological order over the span, 64
 *    writers per sweep (one bit each), plus O(|W| k) to list the pairs.
 * Worst case per output: O(span) for the check and O(ceil(|W| / 64) * span
 * + |W| k) for the pairs, span <= n + m nodes and edges; over all outputs
 * that is O(n + m) times the number of shared outputs, reached only when
 * many of them span most of the graph and no chain covers them.  Typically
 * the consumers of one value sit close together or along a chain, and lint
 * stays near-linear: 0.24 s for a million nodes with 100,000 shared outputs,
 * 0.41 s for a million-node training step whose weights are read early and
 * updated late (README, Benchmarks). */
#include "passes/pass_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define PASS "lint"
#define CODE "W18888"
/* Warnings per output; beyond that one summary warning gives the count, so
 * a buffer fanned out to thousands of unordered writers cannot flood the
 * report with millions of pairs. */
#define PAIR_LIMIT 100
/* From this many writers on one output, its exact pairs come from sweeps of
 * 64 writers at a time instead of one search per writer. */
#define SWEEP_WRITERS 4
/* Chains (long paths) whose labels answer most "a reaches b" questions of a
 * valid graph at once; a chain that would cover fewer new nodes than
 * CHAIN_MIN is not made. */
#define CHAINS 4
#define CHAIN_MIN 16
#define CHAIN_NONE UINT32_MAX

/* How a consumer touches the buffer it reads through one input. */
enum {
    CLS_READ = 1,
    CLS_WRITE = 2,
    CLS_IGNORE = 3, /* cache-maintenance ops (the reference's Cmo) */
    CLS_MASK = 3,
    CLS_KNOWN = 4,  /* the value is computed (memo) */
    CLS_CHILD_W = 8 /* a subgraph of the node writes the Data bound to this input */
};

/* One consumer node of the output being checked. */
typedef struct cons {
    ag_node_id node;
    uint32_t pos;
    uint8_t cls;  /* CLS_READ, CLS_WRITE, or 0 when every input is ignored */
    uint32_t tgt; /* generation of the search it is a target of */
    uint32_t hit; /* generation of the search that reached it */
    uint64_t fwd; /* bit b: writer b of the batch reaches it */
    uint64_t bwd; /* bit b: it reaches writer b of the batch */
} cons;

typedef struct lint {
    ag_pass_env *env;
    ag_graph *g;
    const ag_ops *ops;
    ag_ctx *ctx;
    const char *phase;   /* "" or "before: ", "after: " */
    uint32_t cap;        /* node ids covered by the per-node arrays */
    size_t ninputs;      /* entries of cls */
    uint32_t *pos;       /* per node: 1 + topological rank; 0 for dead ids */
    uint32_t *in_base;   /* per node: offset of its inputs in cls */
    uint8_t *cls;        /* per input: CLS_* */
    uint32_t *seen;      /* per node: generation of the last search that entered it */
    uint32_t *mark;      /* per node: generation of the output it consumes */
    uint32_t *slot;      /* per node: its index in cons (when mark is current) */
    ag_node_id *stack;   /* search stack */
    ag_node_id *topo;    /* topological order: topo[pos - 1] */
    uint64_t *bits;      /* per node: writer bits of a sweep */
    uint32_t nchains;    /* chains with labels */
    uint32_t *first;     /* per chain and node: least chain index it reaches (CHAIN_NONE: none) */
    uint32_t *last;      /* per chain and node: greatest chain index reaching it (0: none) */
    uint32_t gen;        /* search generation */
    uint32_t ogen;       /* output generation */
    ag_vec cons;         /* consumers of the current output, in edge order */
    ag_vec order;        /* uint64_t (pos << 32 | cons index) of the relevant consumers, sorted */
} lint;

static cons *cons_at(lint *L, uint32_t k)
{
    return &AG_VEC_AT(L->cons, cons, k);
}

static void lint_free(lint *L)
{
    ag_ctx *ctx = L->ctx;
    size_t n = L->cap;
    ag_free(ctx, L->pos, n * sizeof *L->pos);
    ag_free(ctx, L->in_base, n * sizeof *L->in_base);
    ag_free(ctx, L->cls, L->ninputs);
    ag_free(ctx, L->seen, n * sizeof *L->seen);
    ag_free(ctx, L->mark, n * sizeof *L->mark);
    ag_free(ctx, L->slot, n * sizeof *L->slot);
    ag_free(ctx, L->stack, n * sizeof *L->stack);
    ag_free(ctx, L->topo, n * sizeof *L->topo);
    ag_free(ctx, L->bits, n * sizeof *L->bits);
    ag_free(ctx, L->first, n * CHAINS * sizeof *L->first);
    ag_free(ctx, L->last, n * CHAINS * sizeof *L->last);
    ag_vec_free(ctx, &L->cons, sizeof(cons));
    ag_vec_free(ctx, &L->order, sizeof(uint64_t));
}

/* ---- chain labels ----
 * A chain is a path c_1 -> c_2 -> ... of the graph.  first[u] is the least
 * index i such that u reaches c_i, last[v] the greatest index j such that
 * c_j reaches v.  If first[u] <= last[v], u reaches c_first, which reaches
 * c_last along the chain, which reaches v: a proof of u => v in O(1) (never
 * a disproof).  A node on the chain has first == last == its index; any
 * other has last < first.  The chains are longest paths counting only nodes
 * no earlier chain holds, so in a training graph the first one runs along
 * the forward pass and back along the gradients, and the long-range
 * questions (a weight read early, updated late) are answered without a
 * search. */

static bool on_chain(const lint *L, uint32_t c, ag_node_id n)
{
    size_t at = (size_t)c * L->cap + n;
    return L->first[at] == L->last[at];
}

/* Finds chain c and labels every node for it; false when no path adds
 * CHAIN_MIN new nodes. */
static bool make_chain(lint *L, uint32_t c, uint32_t count)
{
    const ag_graph *g = L->g;
    uint32_t *dist = L->stack, *par = L->seen; /* scratch, restored by the caller */
    uint32_t *first = L->first + (size_t)c * L->cap, *last = L->last + (size_t)c * L->cap;
    ag_node_id end = AG_NONE;
    uint32_t best_end = 0;
    for (uint32_t k = 0; k < count; k++) {
        ag_node_id v = L->topo[k];
        uint32_t best = 0;
        ag_node_id bp = AG_NONE;
        uint32_t nin = ag_node_num_inputs(g, v);
        for (uint32_t i = 0; i < nin; i++) {
            ag_node_id p = ag_node_input_src(g, v, i).node;
            if (p != AG_NONE && dist[p] > best)
                best = dist[p], bp = p;
        }
        uint32_t nctrl = ag_node_num_ctrl_in(g, v);
        for (uint32_t i = 0; i < nctrl; i++) {
            ag_node_id p = ag_node_ctrl_in(g, v, i);
            if (dist[p] > best)
                best = dist[p], bp = p;
        }
        bool old = false;
        for (uint32_t e = 0; e < c && !old; e++)
            old = on_chain(L, e, v);
        dist[v] = best + !old;
        par[v] = bp;
        if (dist[v] > best_end)
            best_end = dist[v], end = v;
    }
    if (best_end < CHAIN_MIN)
        return false;
    for (uint32_t k = 0; k < count; k++) {
        first[L->topo[k]] = CHAIN_NONE;
        last[L->topo[k]] = 0;
    }
    uint32_t len = 0;
    for (ag_node_id v = end; v != AG_NONE; v = par[v])
        len++;
    for (ag_node_id v = end; v != AG_NONE; v = par[v], len--)
        first[v] = last[v] = len;
    /* last: forward in topological order; first: backward. */
    for (uint32_t k = 0; k < count; k++) {
        ag_node_id v = L->topo[k];
        uint32_t lv = last[v];
        if (lv == 0)
            continue;
        uint32_t nout = ag_node_num_outputs(g, v);
        for (uint32_t o = 0; o < nout; o++) {
            uint32_t nc = ag_node_output_nconsumers(g, v, o);
            for (uint32_t j = 0; j < nc; j++) {
                ag_node_id s = ag_node_output_consumer(g, v, o, j).node;
                if (last[s] < lv)
                    last[s] = lv;
            }
        }
        uint32_t nctrl = ag_node_num_ctrl_out(g, v);
        for (uint32_t j = 0; j < nctrl; j++) {
            ag_node_id s = ag_node_ctrl_out(g, v, j);
            if (last[s] < lv)
                last[s] = lv;
        }
    }
    for (uint32_t k = count; k-- > 0;) {
        ag_node_id v = L->topo[k];
        uint32_t fv = first[v];
        if (fv == CHAIN_NONE)
            continue;
        uint32_t nin = ag_node_num_inputs(g, v);
        for (uint32_t i = 0; i < nin; i++) {
            ag_node_id p = ag_node_input_src(g, v, i).node;
            if (p != AG_NONE && first[p] > fv)
                first[p] = fv;
        }
        uint32_t nctrl = ag_node_num_ctrl_in(g, v);
        for (uint32_t i = 0; i < nctrl; i++) {
            ag_node_id p = ag_node_ctrl_in(g, v, i);
            if (first[p] > fv)
                first[p] = fv;
        }
    }
    return true;
}

static void make_chains(lint *L, uint32_t count)
{
    memset(L->stack, 0, (size_t)L->cap * sizeof *L->stack);
    L->nchains = 0;
    while (L->nchains < CHAINS && make_chain(L, L->nchains, count))
        L->nchains++;
    /* The search stamps were borrowed as scratch. */
    memset(L->seen, 0, (size_t)L->cap * sizeof *L->seen);
}

/* True when a chain proves that u reaches v (false proves nothing). */
static bool chain_reaches(const lint *L, ag_node_id u, ag_node_id v)
{
    for (uint32_t c = 0; c < L->nchains; c++) {
        size_t base = (size_t)c * L->cap;
        if (L->first[base + u] <= L->last[base + v])
            return true;
    }
    return false;
}

/* ---- setup ---- */

/* Per-node arrays, the topological positions, the input offsets and the
 * chain labels. */
static ag_status prepare(lint *L)
{
    ag_graph *g = L->g;
    ag_ctx *ctx = L->ctx;
    uint32_t cap = ag_graph_node_capacity(g);
    size_t n = cap ? cap : 1;
    size_t total = 0;
    for (uint32_t k = 0; k < cap; k++)
        if (ag_node_alive(g, k))
            total += ag_node_num_inputs(g, k);
    if (total >= UINT32_MAX)
        return AG_ERR(ctx, AG_EINVAL, "lint: graph %s has too many input anchors (%zu)", ag_sub_name(g, AG_ROOT),
                      total);
    L->pos = ag_calloc(ctx, n, sizeof *L->pos);
    L->in_base = ag_alloc(ctx, n * sizeof *L->in_base);
    L->cls = ag_calloc(ctx, total ? total : 1, 1);
    L->seen = ag_calloc(ctx, n, sizeof *L->seen);
    L->mark = ag_calloc(ctx, n, sizeof *L->mark);
    L->slot = ag_alloc(ctx, n * sizeof *L->slot);
    L->stack = ag_alloc(ctx, n * sizeof *L->stack);
    L->topo = ag_alloc(ctx, n * sizeof *L->topo);
    L->bits = ag_alloc(ctx, n * sizeof *L->bits);
    L->first = ag_alloc(ctx, n * CHAINS * sizeof *L->first);
    L->last = ag_alloc(ctx, n * CHAINS * sizeof *L->last);
    /* lint_free takes these sizes and skips the arrays left NULL. */
    L->cap = (uint32_t)n;
    L->ninputs = total ? total : 1;
    if (!L->pos || !L->in_base || !L->cls || !L->seen || !L->mark || !L->slot || !L->stack || !L->topo || !L->bits ||
        !L->first || !L->last)
        return AG_OOM(ctx);
    uint32_t base = 0;
    for (uint32_t k = 0; k < cap; k++) {
        L->in_base[k] = base;
        if (ag_node_alive(g, k))
            base += ag_node_num_inputs(g, k);
    }
    uint32_t count = 0;
    AG_TRY(ag_graph_topo_order(g, L->topo, &count));
    for (uint32_t k = 0; k < count; k++)
        L->pos[L->topo[k]] = k + 1;
    make_chains(L, count);
    return AG_OK;
}

/* ---- who writes ---- */

/* The reference ignores cache-maintenance ops by their original type (the
 * framework's type when the node carries one).  The registry has no kind for
 * them, so the name is compared here. */
static bool is_cmo(const ag_graph *g, ag_node_id n)
{
    const char *orig;
    if (ag_attrs_get_string(ag_node_attrs_c(g, n), "original_type", &orig))
        return strcmp(orig, "Cmo") == 0;
    return strcmp(ag_node_type(g, n), "Cmo") == 0;
}

/* The reference's writer test: an input whose name is also an output's name
 * is written in place (an op whose output "ref" is its input "ref").  Here
 * names are the tensor descriptors' value names. */
static bool name_is_output(const ag_graph *g, ag_node_id n, uint32_t i)
{
    const char *name = ag_node_input_desc_c(g, n, i)->name;
    if (name == NULL || name[0] == '\0')
        return false;
    uint32_t nout = ag_node_num_outputs(g, n);
    for (uint32_t o = 0; o < nout; o++) {
        const char *on = ag_node_output_desc_c(g, n, o)->name;
        if (on != NULL && strcmp(on, name) == 0)
            return true;
    }
    return false;
}

/* CLS_READ, CLS_WRITE or CLS_IGNORE for input i of n.  A node's subgraph
 * marks (CLS_CHILD_W) must be complete before its first query. */
static uint8_t input_class(lint *L, ag_node_id n, uint32_t i)
{
    uint8_t *c = &L->cls[L->in_base[n] + i];
    if (*c & CLS_KNOWN)
        return *c & CLS_MASK;
    const ag_graph *g = L->g;
    uint8_t v;
    if (is_cmo(g, n)) {
        v = CLS_IGNORE;
    } else {
        ag_op_access a = ag_ops_input_access(L->ops, g, n, i);
        if (a == AG_ACC_WRITEABLE || a == AG_ACC_SCOPE_WRITEABLE || (*c & CLS_CHILD_W))
            v = CLS_WRITE;
        else if (ag_node_num_subs(g, n) == 0 && name_is_output(g, n, i))
            v = CLS_WRITE; /* a node with subgraphs takes its writes from them */
        else
            v = CLS_READ;
    }
    *c = (uint8_t)(*c | CLS_KNOWN | v);
    return v;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* A node with subgraphs writes its input p when a node of one of its
 * subgraphs writes the Data bound to p (_parent_node_index), at any depth.
 * Subgraphs are visited deepest first, so a nested control node's own marks
 * are complete before its parent's subgraph asks about it.  Like the
 * reference, only the Data's direct consumers count. */
static ag_status mark_children(lint *L)
{
    ag_graph *g = L->g;
    uint32_t nsub = ag_graph_sub_count(g);
    if (nsub <= 1)
        return AG_OK;
    uint64_t *subs = ag_alloc(L->ctx, (size_t)nsub * sizeof *subs);
    if (subs == NULL)
        return AG_OOM(L->ctx);
    uint32_t m = 0;
    for (ag_sub_id s = 1; s < nsub; s++)
        if (ag_sub_alive(g, s) && ag_sub_parent(g, s) != AG_NONE)
            subs[m++] = ((uint64_t)(UINT32_MAX - ag_sub_depth(g, s)) << 32) | s;
    qsort(subs, m, sizeof *subs, cmp_u64);
    for (uint32_t k = 0; k < m; k++) {
        ag_sub_id s = (ag_sub_id)subs[k];
        ag_node_id parent = ag_sub_parent(g, s);
        uint32_t pin = ag_node_num_inputs(g, parent);
        uint32_t cnt = ag_sub_node_count(g, s);
        for (uint32_t j = 0; j < cnt; j++) {
            ag_node_id d = ag_sub_node_at(g, s, j);
            int64_t idx;
            if (!ag_op_kind_is_data_like(ag_ops_node_kind(L->ops, g, d)) ||
                !ag_attrs_get_int(ag_node_attrs_c(g, d), "_parent_node_index", &idx) || idx < 0 ||
                (uint64_t)idx >= pin)
                continue;
            uint8_t *pc = &L->cls[L->in_base[parent] + (uint32_t)idx];
            uint32_t nout = ag_node_num_outputs(g, d);
            for (uint32_t o = 0; o < nout && !(*pc & CLS_CHILD_W); o++) {
                uint32_t nc = ag_node_output_nconsumers(g, d, o);
                for (uint32_t c = 0; c < nc; c++) {
                    ag_port q = ag_node_output_consumer(g, d, o, c);
                    if (input_class(L, q.node, q.index) == CLS_WRITE) {
                        *pc |= CLS_CHILD_W;
                        break;
                    }
                }
            }
        }
    }
    ag_free(L->ctx, subs, (size_t)nsub * sizeof *subs);
    return AG_OK;
}

/* ---- bounded searches ---- */

/* Makes room for n fresh search generations; stamps restart from zero once
 * in 2^32 searches. */
static void reserve_gens(lint *L, uint32_t n)
{
    if (L->gen <= UINT32_MAX - n)
        return;
    memset(L->seen, 0, (size_t)L->cap * sizeof *L->seen);
    for (uint32_t k = 0; k < L->cons.len; k++)
        cons_at(L, k)->tgt = cons_at(L, k)->hit = 0;
    L->gen = 0;
}

static inline void visit(lint *L, ag_node_id n, bool fwd, uint32_t bound, uint32_t sg, uint32_t *sp, uint32_t *want)
{
    uint32_t p = L->pos[n];
    if (L->seen[n] == sg || (fwd ? p > bound : p < bound))
        return;
    L->seen[n] = sg;
    if (L->mark[n] == L->ogen) {
        cons *e = cons_at(L, L->slot[n]);
        if (e->tgt == sg && e->hit != sg) {
            e->hit = sg;
            (*want)--;
        }
    }
    L->stack[(*sp)++] = n;
}

/* Search sg from src along the edges (fwd) or against them, never entering
 * a node positioned beyond bound (after it forward, before it backward):
 * from there no path leads to a target.  The consumers whose tgt is sg and
 * that it reaches get hit = sg; it stops once all want of them are hit.
 * Returns how many were not reached. */
static uint32_t search(lint *L, ag_node_id src, bool fwd, uint32_t bound, uint32_t sg, uint32_t want)
{
    const ag_graph *g = L->g;
    uint32_t sp = 0;
    L->seen[src] = sg;
    L->stack[sp++] = src;
    while (sp > 0 && want > 0) {
        ag_node_id n = L->stack[--sp];
        if (fwd) {
            uint32_t nout = ag_node_num_outputs(g, n);
            for (uint32_t o = 0; o < nout; o++) {
                uint32_t nc = ag_node_output_nconsumers(g, n, o);
                for (uint32_t k = 0; k < nc; k++)
                    visit(L, ag_node_output_consumer(g, n, o, k).node, true, bound, sg, &sp, &want);
            }
            uint32_t nctrl = ag_node_num_ctrl_out(g, n);
            for (uint32_t k = 0; k < nctrl; k++)
                visit(L, ag_node_ctrl_out(g, n, k), true, bound, sg, &sp, &want);
        } else {
            uint32_t nin = ag_node_num_inputs(g, n);
            for (uint32_t i = 0; i < nin; i++) {
                ag_node_id p = ag_node_input_src(g, n, i).node;
                if (p != AG_NONE)
                    visit(L, p, false, bound, sg, &sp, &want);
            }
            uint32_t nctrl = ag_node_num_ctrl_in(g, n);
            for (uint32_t k = 0; k < nctrl; k++)
                visit(L, ag_node_ctrl_in(g, n, k), false, bound, sg, &sp, &want);
        }
    }
    return want;
}

/* Whether the consumer at order[from] reaches (fwd) or is reached from
 * every consumer at order[lo..hi]. */
static bool reaches_range(lint *L, uint32_t from, uint32_t lo, uint32_t hi, bool fwd)
{
    const uint64_t *ord = L->order.data;
    reserve_gens(L, 1);
    uint32_t sg = ++L->gen;
    ag_node_id src = cons_at(L, (uint32_t)ord[from])->node;
    uint32_t want = 0, bound = fwd ? 0 : UINT32_MAX;
    for (uint32_t j = lo; j <= hi; j++) {
        cons *e = cons_at(L, (uint32_t)ord[j]);
        if (fwd ? chain_reaches(L, src, e->node) : chain_reaches(L, e->node, src))
            continue;
        e->tgt = sg;
        want++;
        bound = fwd ? (e->pos > bound ? e->pos : bound) : (e->pos < bound ? e->pos : bound);
    }
    return want == 0 || search(L, src, fwd, bound, sg, want) == 0;
}

/* The proof that every writer is ordered against every other consumer (file
 * comment); false when some pair is not. */
static bool all_ordered(lint *L)
{
    const uint64_t *ord = L->order.data;
    uint32_t m = L->order.len;
    uint32_t prev = UINT32_MAX; /* order index of the previous writer */
    for (uint32_t t = 0; t <= m; t++) {
        if (t < m && cons_at(L, (uint32_t)ord[t])->cls != CLS_WRITE)
            continue;
        /* order[lo .. t-1] are the readers between the two writers. */
        uint32_t lo = prev == UINT32_MAX ? 0 : prev + 1;
        if (prev != UINT32_MAX) {
            uint32_t hi = t < m ? t : m - 1; /* up to the next writer itself */
            if (lo <= hi && !reaches_range(L, prev, lo, hi, true))
                return false;
        }
        if (t < m && lo < t && !reaches_range(L, t, lo, t - 1, false))
            return false;
        prev = t;
    }
    return true;
}

/* ---- warnings ---- */

static ag_status warn_pair(lint *L, ag_node_id p, uint32_t o, const cons *w, const cons *x)
{
    ag_graph *g = L->g;
    const char *nodes[2] = {ag_node_name(g, w->node), ag_node_name(g, x->node)};
    return ag_report_warning(L->env->report, PASS, CODE, nodes, 2,
                             "%sgraph '%s': no control relation between write node \"%s\" (%s) and %s node \"%s\" "
                             "(%s) on output \"%s\":%u (may cause a precision problem)",
                             L->phase, ag_sub_name(g, ag_node_owner(g, p)), nodes[0], ag_node_type(g, w->node),
                             x->cls == CLS_WRITE ? "write" : "read", nodes[1], ag_node_type(g, x->node),
                             ag_node_name(g, p), o);
}

static ag_status warn_more(lint *L, ag_node_id p, uint32_t o, uint64_t more)
{
    ag_graph *g = L->g;
    const char *nodes[1] = {ag_node_name(g, p)};
    return ag_report_warning(L->env->report, PASS, CODE, nodes, 1,
                             "%sgraph '%s': %llu more pairs of consumers of output \"%s\":%u without control "
                             "relation are not listed (at most %d per output)",
                             L->phase, ag_sub_name(g, ag_node_owner(g, p)), (unsigned long long)more, nodes[0], o,
                             PAIR_LIMIT);
}

/* Writer at cons index i alone: a forward search over the consumers after it
 * and a backward one over those before it; bit 0 of fwd/bwd tells which it
 * reached. */
static void search_one(lint *L, uint32_t i)
{
    uint32_t k = L->cons.len;
    const cons *w = cons_at(L, i);
    reserve_gens(L, 2);
    uint32_t fg = ++L->gen, bg = ++L->gen;
    uint32_t fwant = 0, bwant = 0, fbound = 0, bbound = UINT32_MAX;
    for (uint32_t j = 0; j < k; j++) {
        cons *e = cons_at(L, j);
        if (j == i || e->cls == 0)
            continue;
        if (e->pos > w->pos ? chain_reaches(L, w->node, e->node) : chain_reaches(L, e->node, w->node)) {
            e->hit = e->pos > w->pos ? fg : bg;
        } else if (e->pos > w->pos) {
            e->tgt = fg;
            fwant++;
            fbound = e->pos > fbound ? e->pos : fbound;
        } else {
            e->tgt = bg;
            bwant++;
            bbound = e->pos < bbound ? e->pos : bbound;
        }
    }
    if (fwant)
        search(L, w->node, true, fbound, fg, fwant);
    if (bwant)
        search(L, w->node, false, bbound, bg, bwant);
    for (uint32_t j = 0; j < k; j++) {
        cons *e = cons_at(L, j);
        e->fwd = e->hit == fg;
        e->bwd = e->hit == bg;
    }
}

/* Up to 64 writers at once (bit b for batch[b]): one sweep in topological
 * order over the positions from the first writer to the last consumer
 * carries each node's set of writers reaching it to its successors, and one
 * sweep backwards does the reverse.  A sweep costs the nodes and edges of
 * its position range, whatever the number of writers in the batch. */
static void sweep_batch(lint *L, const uint32_t *batch, uint32_t nb)
{
    const ag_graph *g = L->g;
    uint32_t k = L->cons.len;
    uint32_t wlo = UINT32_MAX, whi = 0, clo = UINT32_MAX, chi = 0;
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t p = cons_at(L, batch[b])->pos;
        wlo = p < wlo ? p : wlo;
        whi = p > whi ? p : whi;
    }
    for (uint32_t j = 0; j < k; j++) {
        const cons *e = cons_at(L, j);
        if (e->cls == 0)
            continue;
        clo = e->pos < clo ? e->pos : clo;
        chi = e->pos > chi ? e->pos : chi;
    }
    /* Forward over [wlo, chi]. */
    for (uint32_t p = wlo; p <= chi; p++)
        L->bits[L->topo[p - 1]] = 0;
    for (uint32_t b = 0; b < nb; b++)
        L->bits[cons_at(L, batch[b])->node] |= UINT64_C(1) << b;
    for (uint32_t p = wlo; p <= chi; p++) {
        ag_node_id n = L->topo[p - 1];
        uint64_t m = L->bits[n];
        if (m == 0)
            continue;
        uint32_t nout = ag_node_num_outputs(g, n);
        for (uint32_t o = 0; o < nout; o++) {
            uint32_t nc = ag_node_output_nconsumers(g, n, o);
            for (uint32_t c = 0; c < nc; c++) {
                ag_node_id s = ag_node_output_consumer(g, n, o, c).node;
                if (L->pos[s] <= chi)
                    L->bits[s] |= m;
            }
        }
        uint32_t nctrl = ag_node_num_ctrl_out(g, n);
        for (uint32_t c = 0; c < nctrl; c++) {
            ag_node_id s = ag_node_ctrl_out(g, n, c);
            if (L->pos[s] <= chi)
                L->bits[s] |= m;
        }
    }
    for (uint32_t j = 0; j < k; j++) {
        cons *e = cons_at(L, j);
        e->fwd = e->cls != 0 && e->pos >= wlo && e->pos <= chi ? L->bits[e->node] : 0;
    }
    /* Backward over [clo, whi]. */
    for (uint32_t p = clo; p <= whi; p++)
        L->bits[L->topo[p - 1]] = 0;
    for (uint32_t b = 0; b < nb; b++)
        L->bits[cons_at(L, batch[b])->node] |= UINT64_C(1) << b;
    for (uint32_t p = whi; p >= clo; p--) {
        ag_node_id n = L->topo[p - 1];
        uint64_t m = L->bits[n];
        if (m != 0) {
            uint32_t nin = ag_node_num_inputs(g, n);
            for (uint32_t i = 0; i < nin; i++) {
                ag_node_id q = ag_node_input_src(g, n, i).node;
                if (q != AG_NONE && L->pos[q] >= clo)
                    L->bits[q] |= m;
            }
            uint32_t nctrl = ag_node_num_ctrl_in(g, n);
            for (uint32_t c = 0; c < nctrl; c++) {
                ag_node_id q = ag_node_ctrl_in(g, n, c);
                if (L->pos[q] >= clo)
                    L->bits[q] |= m;
            }
        }
        if (p == clo)
            break;
    }
    for (uint32_t j = 0; j < k; j++) {
        cons *e = cons_at(L, j);
        e->bwd = e->cls != 0 && e->pos >= clo && e->pos <= whi ? L->bits[e->node] : 0;
    }
}

/* Every unordered pair of one output, writers in edge order, each with the
 * consumers it is not ordered against in edge order (a pair of writers is
 * listed once, under the first).  Few writers: a search each; more: sweeps
 * for 64 writers at a time. */
static ag_status report_pairs(lint *L, ag_node_id p, uint32_t o, uint32_t writers)
{
    uint32_t k = L->cons.len;
    uint32_t listed = 0;
    uint64_t more = 0;
    uint32_t per = writers >= SWEEP_WRITERS ? 64 : 1;
    uint32_t batch[64];
    for (uint32_t next = 0; next < k;) {
        uint32_t nb = 0;
        for (; next < k && nb < per; next++)
            if (cons_at(L, next)->cls == CLS_WRITE)
                batch[nb++] = next;
        if (nb == 0)
            break;
        if (per == 1)
            search_one(L, batch[0]);
        else
            sweep_batch(L, batch, nb);
        for (uint32_t b = 0; b < nb; b++) {
            uint32_t i = batch[b];
            const cons *w = cons_at(L, i);
            for (uint32_t j = 0; j < k; j++) {
                const cons *e = cons_at(L, j);
                if (j == i || e->cls == 0 || (e->cls == CLS_WRITE && j < i))
                    continue;
                if ((((e->pos > w->pos) ? e->fwd : e->bwd) >> b) & 1)
                    continue;
                if (listed < PAIR_LIMIT) {
                    AG_TRY(warn_pair(L, p, o, w, e));
                    listed++;
                } else {
                    more++;
                }
            }
        }
    }
    if (more)
        AG_TRY(warn_more(L, p, o, more));
    return AG_OK;
}

/* ---- one output, the graph ---- */

static ag_status check_output(lint *L, ag_node_id p, uint32_t o)
{
    const ag_graph *g = L->g;
    uint32_t nc = ag_node_output_nconsumers(g, p, o);
    if (++L->ogen == 0) {
        memset(L->mark, 0, (size_t)L->cap * sizeof *L->mark);
        L->ogen = 1;
    }
    L->cons.len = 0;
    if (ag_vec_reserve(L->ctx, &L->cons, sizeof(cons), nc) != AG_OK)
        return AG_OOM(L->ctx);
    uint32_t writers = 0, used = 0;
    for (uint32_t k = 0; k < nc; k++) {
        ag_port q = ag_node_output_consumer(g, p, o, k);
        uint8_t c = input_class(L, q.node, q.index);
        if (L->mark[q.node] != L->ogen) {
            L->mark[q.node] = L->ogen;
            L->slot[q.node] = L->cons.len;
            cons fresh = {q.node, L->pos[q.node], 0, 0, 0, 0, 0};
            AG_VEC_AT(L->cons, cons, L->cons.len++) = fresh;
        }
        cons *e = cons_at(L, L->slot[q.node]);
        if (c == CLS_WRITE && e->cls != CLS_WRITE) {
            used += e->cls == 0;
            e->cls = CLS_WRITE;
            writers++;
        } else if (c == CLS_READ && e->cls == 0) {
            e->cls = CLS_READ;
            used++;
        }
    }
    if (writers == 0 || used < 2)
        return AG_OK;
    L->order.len = 0;
    if (ag_vec_reserve(L->ctx, &L->order, sizeof(uint64_t), used) != AG_OK)
        return AG_OOM(L->ctx);
    for (uint32_t k = 0; k < L->cons.len; k++) {
        const cons *e = cons_at(L, k);
        if (e->cls != 0)
            AG_VEC_AT(L->order, uint64_t, L->order.len++) = ((uint64_t)e->pos << 32) | k;
    }
    qsort(L->order.data, L->order.len, sizeof(uint64_t), cmp_u64);
    if (all_ordered(L))
        return AG_OK;
    return report_pairs(L, p, o, writers);
}

/* Root first, then the subgraphs by id; nodes in stored order; outputs by
 * index: the order of the warnings. */
static ag_status check_all(lint *L)
{
    const ag_graph *g = L->g;
    uint32_t nsub = ag_graph_sub_count(g);
    for (ag_sub_id s = 0; s < nsub; s++) {
        if (!ag_sub_alive(g, s))
            continue;
        uint32_t cnt = ag_sub_node_count(g, s);
        for (uint32_t k = 0; k < cnt; k++) {
            ag_node_id n = ag_sub_node_at(g, s, k);
            uint32_t nout = ag_node_num_outputs(g, n);
            for (uint32_t o = 0; o < nout; o++)
                if (ag_node_output_nconsumers(g, n, o) >= 2)
                    AG_TRY(check_output(L, n, o));
        }
    }
    return AG_OK;
}

ag_status ag_lint_run(ag_pass_env *env, const char *phase)
{
    if (env->report == NULL)
        return AG_OK; /* lint only reports */
    char prefix[64] = "";
    if (phase != NULL && phase[0] != '\0')
        snprintf(prefix, sizeof prefix, "%s: ", phase);
    lint L;
    memset(&L, 0, sizeof L);
    L.env = env;
    L.g = env->g;
    L.ops = env->ops;
    L.ctx = ag_graph_ctx(env->g);
    L.phase = prefix;
    ag_status st = prepare(&L);
    if (st == AG_OK)
        st = mark_children(&L);
    if (st == AG_OK)
        st = check_all(&L);
    lint_free(&L);
    return st;
}

ag_status ag_pass_lint(ag_pass_env *env)
{
    return ag_lint_run(env, NULL);
}
