/* The verifier's executor: legal multi-stream interleavings of a compiled
 * graph and the memory effects of every node on them (docs/verify.md).
 * Nodes sit on streams (their _stream_id, else spread at random), run FIFO
 * within a stream in compile order, and wait for data, control and
 * memory-reuse predecessors; among ready stream heads a seeded generator
 * picks.  Control nodes run their subgraphs: a chosen If/Case branch, a
 * While 0-3 times.  Reads check, writes stamp the shadow memory. */
#include <stdio.h>
#include <stdlib.h>

#include "aliasguard/infer.h"
#include "verify/verify_internal.h"

#define NONE32 UINT32_MAX
#define EXPLICIT_SLOTS 64u /* _stream_id values map onto these queues */

/* What wrote a value. */
enum { P_NONE, P_INIT, P_OUT, P_WRITE, P_GARBAGE, P_CLEAN, P_SELFCLEAN, P_HINT };
enum { R_PLAIN, R_INIT, R_SUBDATA, R_CLEAN, R_WHILE, R_BRANCH, R_CALL };
enum { PROT_NONE, PROT_VAR, PROT_CONST };

typedef struct prov {
    ag_node_id node;
    uint32_t idx;
    uint32_t what;
} prov;

typedef struct vsub {
    ag_node_id *order; /* topological order */
    uint32_t n;
    ag_node_id netout; /* first NetOutput, or AG_NONE */
    uint32_t *qstart;  /* per stream slot, scratch of one execution */
    uint32_t *qpos;
    ag_node_id *qbuf;
} vsub;

typedef struct vs {
    ag_ctx *ctx;
    const ag_graph *g;
    const ag_ops *ops;
    const ag_verify_layout *l;
    const ag_verify_opts *o;
    ag_verify_result *r;
    ag_arena arena;
    uint32_t cap, nsub, nslots;
    /* per node */
    uint8_t *role;
    uint8_t *atomic_mode; /* 0 none, 1 needs a clean, 2 cleans itself */
    uint32_t *in_base, *out_base;
    uint32_t *stream_attr;
    uint32_t *parent_index;
    int32_t *hint;
    uint32_t **ccells;  /* per control node: its input cells / carried values */
    uint32_t **coutc;   /* per control node: its output cells */
    uint32_t *npred;
    uint32_t *succ_off; /* CSR of successors (data, control, reuse) */
    ag_node_id *succ;
    /* per input */
    uint32_t *in_src;   /* flat output index of the producer */
    uint8_t *in_acc;
    /* per output */
    uint32_t *out_node;
    uint32_t *seg_a, *seg_b; /* segments of its bytes; seg_a == seg_b: none */
    uint8_t *out_rel;
    uint32_t *out_relin;
    uint8_t *out_atomic;
    uint8_t *out_prot;
    vsub *subs;
    ag_shadow sh;
    /* per schedule */
    uint32_t *cell;       /* per output */
    ag_vec cur;           /* uint32_t per cell: the value its readers expect */
    ag_vec vals;          /* prov per value */
    uint32_t *remaining;  /* per node */
    uint32_t *stream;     /* per node */
    uint64_t rng;
    uint32_t sched;
    uint64_t seed;
    uint32_t choice;      /* control-flow decisions made in this schedule */
    bool stop;
    uint64_t executed;
} vs;

/* ---- small helpers ---- */

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint32_t rnd(vs *st, uint32_t n)
{
    return n <= 1 ? 0 : (uint32_t)(splitmix(&st->rng) % n);
}

static void *scratch(vs *st, size_t count, size_t size)
{
    if (count && size > SIZE_MAX / count)
        return NULL;
    return ag_arena_alloc(&st->arena, count * size + 1);
}

static ag_status new_value(vs *st, ag_node_id n, uint32_t idx, uint32_t what, uint32_t *out)
{
    prov p = {n, idx, what};
    *out = st->vals.len;
    return ag_vec_push(st->ctx, &st->vals, sizeof p, &p) == AG_OK ? AG_OK : AG_OOM(st->ctx);
}

static ag_status new_cell(vs *st, uint32_t value, uint32_t *out)
{
    *out = st->cur.len;
    return ag_vec_push(st->ctx, &st->cur, sizeof value, &value) == AG_OK ? AG_OK : AG_OOM(st->ctx);
}

/* ---- messages ---- */

static void anchor_text(vs *st, char *buf, size_t len, ag_node_id n, bool input, uint32_t idx)
{
    snprintf(buf, len, "%s:%s%u", ag_node_name(st->g, n), input ? "in" : "out", idx);
}

static void prov_text(vs *st, char *anchor, size_t alen, char *what, size_t wlen, uint32_t v)
{
    const prov *p = &AG_VEC_AT(st->vals, prov, v);
    const ag_graph *g = st->g;
    anchor[0] = '\0';
    switch (p->what) {
    case P_NONE:
        snprintf(what, wlen, "nothing written yet");
        return;
    case P_INIT:
    case P_OUT:
        anchor_text(st, anchor, alen, p->node, false, p->idx);
        snprintf(what, wlen, "the value \"%s\" (%s) output %u wrote", ag_node_name(g, p->node),
                 ag_node_type(g, p->node), p->idx);
        return;
    case P_WRITE:
    case P_GARBAGE:
    case P_HINT:
        anchor_text(st, anchor, alen, p->node, true, p->idx);
        snprintf(what, wlen, "%s \"%s\" (%s) input %u left there",
                 p->what == P_WRITE ? "the value" : p->what == P_HINT ? "the in-place result" : "the scratch data",
                 ag_node_name(g, p->node), ag_node_type(g, p->node), p->idx);
        return;
    case P_CLEAN:
    case P_SELFCLEAN:
    default:
        snprintf(anchor, alen, "%s", ag_node_name(g, p->node));
        snprintf(what, wlen, "the zeros \"%s\" (%s) wrote", ag_node_name(g, p->node), ag_node_type(g, p->node));
        return;
    }
}

static ag_status report(vs *st, ag_verify_kind kind, const char *reader, const char *writer, uint32_t out,
                        const char *text)
{
    const ag_verify_layout *l = st->l;
    ag_node_id n = st->out_node[out];
    uint32_t o = out - st->out_base[n];
    const vl_tensor *t = ag_vl_tensor(l, n, o);
    ag_verify_violation v;
    char msg[1024];
    memset(&v, 0, sizeof v);
    v.kind = kind;
    v.reader = reader;
    v.writer = writer;
    v.space = t ? l->sp[t->space].name : "";
    v.offset = t ? t->offset : 0;
    v.size = t ? t->size : 0;
    v.seed = st->seed;
    v.schedule = st->sched;
    snprintf(msg, sizeof msg, "%s: %s; bytes %s [%llu, %llu) (seed %llu, schedule %u)", ag_verify_kind_name(kind), text,
             v.space, (unsigned long long)v.offset, (unsigned long long)(v.offset + v.size),
             (unsigned long long)v.seed, v.schedule);
    v.message = msg;
    st->stop = true;
    return ag_verify_record(st->r, st->o->max_violations, &v);
}

/* ---- shadow operations on tensors ---- */

static bool has_bytes(const vs *st, uint32_t out)
{
    return out != NONE32 && st->seg_a[out] < st->seg_b[out];
}

/* Reader anchor (n, input or caller) reads output src: its bytes must hold
 * what its cell holds now. */
static ag_status check_read(vs *st, uint32_t src, const char *reader, const char *reader_text)
{
    if (!has_bytes(st, src) || st->cell[src] == NONE32)
        return AG_OK;
    uint32_t want = AG_VEC_AT(st->cur, uint32_t, st->cell[src]), found = 0;
    if (ag_shadow_find_other(&st->sh, st->seg_a[src], st->seg_b[src], want, &found) == NONE32)
        return AG_OK;
    char wa[160], ww[256], ea[160], ew[256], text[900];
    prov_text(st, wa, sizeof wa, ww, sizeof ww, found);
    prov_text(st, ea, sizeof ea, ew, sizeof ew, want);
    snprintf(text, sizeof text, "%s expects %s but finds %s", reader_text, ew, ww);
    return report(st, AG_VIOL_STALE_READ, reader, wa, src, text);
}

/* A write by writer (anchor text) into the bytes of output dst. */
static ag_status check_protect(vs *st, uint32_t dst, bool writeable, const char *writer, const char *writer_text)
{
    uint8_t p = st->out_prot[dst];
    if (p == PROT_NONE || (p == PROT_VAR && writeable))
        return AG_OK;
    char ta[160], text[700];
    ag_node_id pn = st->out_node[dst];
    uint32_t po = dst - st->out_base[pn];
    anchor_text(st, ta, sizeof ta, pn, false, po);
    snprintf(text, sizeof text, "%s writes the %s of \"%s\" (%s) output %u", writer_text,
             p == PROT_CONST ? "constant" : "variable", ag_node_name(st->g, pn), ag_node_type(st->g, pn), po);
    return report(st, AG_VIOL_CONST_CLOBBERED, ta, writer, dst, text);
}

static void stamp(vs *st, uint32_t out, uint32_t v)
{
    if (has_bytes(st, out))
        ag_shadow_fill(&st->sh, st->seg_a[out], st->seg_b[out], v);
}

static void node_text(vs *st, char *buf, size_t len, ag_node_id n, bool input, uint32_t idx)
{
    snprintf(buf, len, "\"%s\" (%s) %s %u in graph '%s'", ag_node_name(st->g, n), ag_node_type(st->g, n),
             input ? "input" : "output", idx, ag_sub_name(st->g, ag_node_owner(st->g, n)));
}

/* ---- node execution ---- */

static ag_status run_sub(vs *st, ag_sub_id s);

static uint32_t src_of(const vs *st, ag_node_id n, uint32_t i)
{
    return st->in_src[st->in_base[n] + i];
}

/* True when an output of n is a view of input i: the node only renames
 * the buffer, its consumers are the ones that read it. */
static bool viewed_input(const vs *st, ag_node_id n, uint32_t i)
{
    for (uint32_t o = 0; o < ag_node_num_outputs(st->g, n); o++) {
        uint32_t out = st->out_base[n] + o;
        if (st->out_rel[out] == AG_REL_VIEW && st->out_relin[out] == i)
            return true;
    }
    return false;
}

static ag_status read_inputs(vs *st, ag_node_id n)
{
    if (ag_ops_node_flags(st->ops, st->g, n) & AG_OPF_SHAPE_ONLY)
        return AG_OK;
    uint32_t nin = ag_node_num_inputs(st->g, n);
    for (uint32_t i = 0; i < nin && !st->stop; i++) {
        uint32_t src = src_of(st, n, i);
        if (!has_bytes(st, src) || viewed_input(st, n, i))
            continue;
        char a[160], t[300];
        anchor_text(st, a, sizeof a, n, true, i);
        node_text(st, t, sizeof t, n, true, i);
        AG_TRY(check_read(st, src, a, t));
    }
    return AG_OK;
}

static ag_status exec_clean(vs *st, ag_node_id n)
{
    const ag_graph *g = st->g;
    for (uint32_t k = 0; k < ag_node_num_ctrl_out(g, n); k++) {
        ag_node_id m = ag_node_ctrl_out(g, n, k);
        if (st->atomic_mode[m] != 1)
            continue;
        for (uint32_t o = 0; o < ag_node_num_outputs(g, m); o++) {
            uint32_t out = st->out_base[m] + o;
            if (!st->out_atomic[out])
                continue;
            uint32_t v = 0;
            AG_TRY(new_value(st, n, m, P_CLEAN, &v));
            stamp(st, out, v);
        }
    }
    return AG_OK;
}

static ag_status check_atomic(vs *st, ag_node_id n)
{
    for (uint32_t o = 0; o < ag_node_num_outputs(st->g, n) && !st->stop; o++) {
        uint32_t out = st->out_base[n] + o;
        if (!st->out_atomic[out] || !has_bytes(st, out))
            continue;
        if (st->atomic_mode[n] == 2) {
            uint32_t v = 0;
            AG_TRY(new_value(st, n, o, P_SELFCLEAN, &v));
            stamp(st, out, v);
            continue;
        }
        uint32_t v0 = ag_shadow_get(&st->sh, st->seg_a[out]), found = 0;
        bool zero = AG_VEC_AT(st->vals, prov, v0).what == P_CLEAN || AG_VEC_AT(st->vals, prov, v0).what == P_SELFCLEAN;
        if (zero && ag_shadow_find_other(&st->sh, st->seg_a[out], st->seg_b[out], v0, &found) == NONE32)
            continue;
        if (zero)
            v0 = found;
        char a[160], wa[160], ww[256], t[300], text[700];
        anchor_text(st, a, sizeof a, n, false, o);
        node_text(st, t, sizeof t, n, false, o);
        prov_text(st, wa, sizeof wa, ww, sizeof ww, v0);
        snprintf(text, sizeof text, "%s accumulates atomically into bytes holding %s, not zeros", t, ww);
        AG_TRY(report(st, AG_VIOL_ATOMIC_NOT_CLEARED, a, wa, out, text));
    }
    return AG_OK;
}

static ag_status exec_plain(vs *st, ag_node_id n)
{
    const ag_graph *g = st->g;
    uint32_t nin = ag_node_num_inputs(g, n), nout = ag_node_num_outputs(g, n);
    AG_TRY(read_inputs(st, n));
    if (!st->stop)
        AG_TRY(check_atomic(st, n));
    /* Inputs written in place: ref targets and writeable inputs update the
     * value their cell holds; scope-writeable ones leave scratch data. */
    for (uint32_t i = 0; i < nin && !st->stop; i++) {
        uint32_t src = src_of(st, n, i);
        if (src == NONE32)
            continue;
        uint8_t acc = st->in_acc[st->in_base[n] + i];
        if (acc == AG_ACC_RO)
            continue;
        char a[160], t[300];
        anchor_text(st, a, sizeof a, n, true, i);
        node_text(st, t, sizeof t, n, true, i);
        AG_TRY(check_protect(st, src, acc == AG_ACC_WRITEABLE, a, t));
        if (st->stop)
            break;
        uint32_t v = 0;
        AG_TRY(new_value(st, n, i, acc == AG_ACC_WRITEABLE ? P_WRITE : P_GARBAGE, &v));
        stamp(st, src, v);
        if (acc == AG_ACC_WRITEABLE && st->cell[src] != NONE32)
            AG_VEC_AT(st->cur, uint32_t, st->cell[src]) = v;
    }
    for (uint32_t o = 0; o < nout && !st->stop; o++) {
        uint32_t out = st->out_base[n] + o;
        uint8_t rel = st->out_rel[out];
        uint32_t k = st->out_relin[out];
        uint32_t src = k < nin ? src_of(st, n, k) : NONE32;
        if ((rel == AG_REL_VIEW || rel == AG_REL_PASS || rel == AG_REL_REF) && src != NONE32 &&
            st->cell[src] != NONE32) {
            st->cell[out] = st->cell[src];
            continue;
        }
        if (rel == AG_REL_REUSE && src != NONE32) {
            char a[160], t[300];
            anchor_text(st, a, sizeof a, n, false, o);
            node_text(st, t, sizeof t, n, false, o);
            AG_TRY(check_protect(st, out, false, a, t));
            if (st->stop)
                break;
        }
        uint32_t v = 0, c = 0;
        AG_TRY(new_value(st, n, o, P_OUT, &v));
        AG_TRY(new_cell(st, v, &c));
        st->cell[out] = c;
        stamp(st, out, v);
        if (o == 0 && st->hint[n] >= 0) {
            uint32_t hs = src_of(st, n, (uint32_t)st->hint[n]);
            if (hs != NONE32) {
                char a[160], t[300];
                anchor_text(st, a, sizeof a, n, true, (uint32_t)st->hint[n]);
                node_text(st, t, sizeof t, n, true, (uint32_t)st->hint[n]);
                AG_TRY(check_protect(st, hs, false, a, t));
                uint32_t hv = 0;
                AG_TRY(new_value(st, n, (uint32_t)st->hint[n], P_HINT, &hv));
                stamp(st, hs, hv);
            }
        }
    }
    return AG_OK;
}

/* Subgraph Data nodes take the cells of the parent's inputs (or of the
 * loop-carried values). */
static void bind_sub(vs *st, ag_sub_id s, const uint32_t *cells, uint32_t ncells)
{
    const vsub *vb = &st->subs[s];
    for (uint32_t k = 0; k < vb->n; k++) {
        ag_node_id d = vb->order[k];
        if (st->role[d] != R_SUBDATA || ag_node_num_outputs(st->g, d) == 0)
            continue;
        uint32_t idx = st->parent_index[d];
        st->cell[st->out_base[d]] = idx < ncells ? cells[idx] : NONE32;
    }
}

/* Cells the subgraph's NetOutput hands to parent output p. */
static void collect_sub(vs *st, ag_sub_id s, uint32_t *cells, uint32_t ncells)
{
    ag_node_id net = st->subs[s].netout;
    if (net == AG_NONE)
        return;
    for (uint32_t i = 0; i < ag_node_num_inputs(st->g, net); i++) {
        int64_t idx;
        if (!ag_attrs_get_int(ag_node_input_desc_c(st->g, net, i)->attrs, "_parent_node_index", &idx) || idx < 0 ||
            (uint64_t)idx >= ncells)
            continue;
        uint32_t src = src_of(st, net, i);
        cells[idx] = src == NONE32 ? NONE32 : st->cell[src];
    }
}

static ag_status exec_control(vs *st, ag_node_id n)
{
    const ag_graph *g = st->g;
    uint32_t nin = ag_node_num_inputs(g, n), nout = ag_node_num_outputs(g, n), nsubs = ag_node_num_subs(g, n);
    AG_TRY(read_inputs(st, n));
    uint32_t *cells = st->ccells[n];
    for (uint32_t i = 0; i < nin; i++) {
        uint32_t src = src_of(st, n, i);
        cells[i] = src == NONE32 ? NONE32 : st->cell[src];
    }
    /* The first schedules take each decision in turn, so that a handful of
     * schedules already covers trip counts 0-3 and every branch. */
    uint32_t pick = st->sched < 4 ? st->sched + st->choice++ : rnd(st, 1u << 16);
    if (st->role[n] == R_WHILE) {
        ag_sub_id cond = nsubs >= 2 ? ag_node_sub(g, n, 0) : AG_NONE;
        ag_sub_id body = nsubs >= 1 ? ag_node_sub(g, n, nsubs - 1) : AG_NONE;
        uint32_t trips = st->sched < 4 ? st->sched : pick % 4;
        for (uint32_t it = 0; it <= trips && !st->stop; it++) {
            if (cond != AG_NONE) {
                bind_sub(st, cond, cells, nin);
                AG_TRY(run_sub(st, cond));
            }
            if (it == trips || body == AG_NONE || st->stop)
                break;
            bind_sub(st, body, cells, nin);
            AG_TRY(run_sub(st, body));
            collect_sub(st, body, cells, nin);
        }
        for (uint32_t o = 0; o < nout; o++)
            st->cell[st->out_base[n] + o] = o < nin ? cells[o] : NONE32;
        return AG_OK;
    }
    uint32_t *outc = st->coutc[n];
    for (uint32_t o = 0; o < nout; o++)
        outc[o] = NONE32;
    uint32_t first = 0, last = nsubs;
    if (st->role[n] == R_BRANCH && nsubs > 0) {
        /* Branches shape inference proved cannot run for the bound inputs
         * are not planned (docs/plan.md): only the others are chosen. */
        uint32_t can = 0;
        for (uint32_t k = 0; k < nsubs; k++)
            can += !ag_infer_sub_untaken(g, ag_node_sub(g, n, k));
        uint32_t want = can ? pick % can : pick % nsubs;
        for (first = 0; first < nsubs; first++)
            if ((!can || !ag_infer_sub_untaken(g, ag_node_sub(g, n, first))) && want-- == 0)
                break;
        last = first + 1;
    }
    for (uint32_t k = first; k < last && !st->stop; k++) {
        ag_sub_id s = ag_node_sub(g, n, k);
        bind_sub(st, s, cells, nin);
        AG_TRY(run_sub(st, s));
        collect_sub(st, s, outc, nout);
    }
    for (uint32_t o = 0; o < nout; o++) {
        uint32_t c = outc[o];
        if (c == NONE32) {
            /* No branch produced it: whatever reads it reads nothing written. */
            AG_TRY(new_cell(st, 0, &c));
        }
        st->cell[st->out_base[n] + o] = c;
    }
    return AG_OK;
}

static ag_status exec_node(vs *st, ag_node_id n)
{
    st->executed++;
    switch (st->role[n]) {
    case R_INIT:
    case R_SUBDATA:
        return AG_OK; /* their cells exist before the run or come from the parent */
    case R_CLEAN:
        AG_TRY(read_inputs(st, n));
        return exec_clean(st, n);
    case R_WHILE:
    case R_BRANCH:
    case R_CALL:
        return exec_control(st, n);
    default:
        return exec_plain(st, n);
    }
}

/* One execution of subgraph s: stream heads whose predecessors are done
 * are ready; the generator picks one. */
static ag_status run_sub(vs *st, ag_sub_id s)
{
    vsub *vb = &st->subs[s];
    uint32_t ns = st->nslots;
    for (uint32_t q = 0; q <= ns; q++)
        vb->qstart[q] = 0;
    for (uint32_t k = 0; k < vb->n; k++) {
        ag_node_id n = vb->order[k];
        st->remaining[n] = st->npred[n];
        vb->qstart[st->stream[n] + 1]++;
    }
    for (uint32_t q = 0; q < ns; q++)
        vb->qstart[q + 1] += vb->qstart[q];
    for (uint32_t q = 0; q < ns; q++)
        vb->qpos[q] = vb->qstart[q];
    for (uint32_t k = 0; k < vb->n; k++) {
        ag_node_id n = vb->order[k];
        vb->qbuf[vb->qpos[st->stream[n]]++] = n;
    }
    for (uint32_t q = 0; q < ns; q++)
        vb->qpos[q] = vb->qstart[q];
    uint32_t active[64 + EXPLICIT_SLOTS];
    uint32_t nact = 0;
    for (uint32_t q = 0; q < ns; q++)
        if (vb->qstart[q] < vb->qstart[q + 1])
            active[nact++] = q;
    uint32_t ready[64 + EXPLICIT_SLOTS];
    for (uint32_t done = 0; done < vb->n && !st->stop; done++) {
        uint32_t nr = 0;
        for (uint32_t a = 0; a < nact; a++) {
            uint32_t q = active[a];
            if (vb->qpos[q] < vb->qstart[q + 1] && st->remaining[vb->qbuf[vb->qpos[q]]] == 0)
                ready[nr++] = q;
        }
        if (nr == 0)
            return AG_ERR(st->ctx, AG_EINTERNAL, "verify: no node of graph '%s' can run (dependency cycle)",
                          ag_sub_name(st->g, s));
        uint32_t q = ready[rnd(st, nr)];
        ag_node_id n = vb->qbuf[vb->qpos[q]++];
        AG_TRY(exec_node(st, n));
        for (uint32_t k = st->succ_off[n]; k < st->succ_off[n + 1]; k++)
            st->remaining[st->succ[k]]--;
    }
    return AG_OK;
}

/* ---- one schedule ---- */

static ag_status run_schedule(vs *st, uint32_t index)
{
    const ag_graph *g = st->g;
    st->sched = index;
    st->rng = st->seed ^ (UINT64_C(0xd1b54a32d192ed03) * ((uint64_t)index + 1));
    st->stop = false;
    st->choice = 0;
    st->cur.len = 0;
    st->vals.len = 0;
    uint32_t v0 = 0;
    AG_TRY(new_value(st, AG_NONE, 0, P_NONE, &v0));
    ag_shadow_reset(&st->sh, v0);
    uint32_t nouts = st->out_base[st->cap];
    for (uint32_t k = 0; k < nouts; k++)
        st->cell[k] = NONE32;
    for (ag_node_id n = 0; n < st->cap; n++) {
        if (!ag_node_alive(g, n))
            continue;
        st->stream[n] = st->stream_attr[n] != NONE32 ? st->o->streams + st->stream_attr[n] % EXPLICIT_SLOTS
                                                     : rnd(st, st->o->streams);
        if (st->role[n] != R_INIT)
            continue;
        /* Constants, variables and the caller's inputs exist before the run. */
        for (uint32_t o = 0; o < ag_node_num_outputs(g, n); o++) {
            uint32_t out = st->out_base[n] + o, v = 0, c = 0;
            AG_TRY(new_value(st, n, o, P_INIT, &v));
            AG_TRY(new_cell(st, v, &c));
            st->cell[out] = c;
            stamp(st, out, v);
        }
    }
    AG_TRY(run_sub(st, AG_ROOT));
    /* The caller reads every output after the run, then owns the buffer. */
    ag_node_id net = st->subs[AG_ROOT].netout;
    for (uint32_t i = 0; net != AG_NONE && i < ag_node_num_inputs(g, net) && !st->stop; i++) {
        uint32_t src = src_of(st, net, i);
        if (!has_bytes(st, src))
            continue;
        char a[64], t[128];
        snprintf(a, sizeof a, "caller:output%u", i);
        snprintf(t, sizeof t, "the caller reading graph output %u after the run", i);
        AG_TRY(check_read(st, src, a, t));
        /* A constant handed out as the caller's buffer would be written
         * by the caller (variables are the caller's to update). */
        if (!st->stop && st->out_prot[src] == PROT_CONST) {
            snprintf(t, sizeof t, "the caller, owning graph output %u after the run,", i);
            AG_TRY(check_protect(st, src, false, a, t));
        }
    }
    return AG_OK;
}

/* ---- preparation ---- */

static ag_status prep_nodes(vs *st)
{
    const ag_graph *g = st->g;
    const ag_ops *ops = st->ops;
    uint32_t cap = st->cap;
    st->role = scratch(st, cap, 1);
    st->atomic_mode = scratch(st, cap, 1);
    st->in_base = scratch(st, (size_t)cap + 1, sizeof(uint32_t));
    st->out_base = scratch(st, (size_t)cap + 1, sizeof(uint32_t));
    st->stream_attr = scratch(st, cap, sizeof(uint32_t));
    st->parent_index = scratch(st, cap, sizeof(uint32_t));
    st->hint = scratch(st, cap, sizeof(int32_t));
    st->remaining = scratch(st, cap, sizeof(uint32_t));
    st->ccells = scratch(st, cap, sizeof(uint32_t *));
    st->coutc = scratch(st, cap, sizeof(uint32_t *));
    st->stream = scratch(st, cap, sizeof(uint32_t));
    if (!st->role || !st->atomic_mode || !st->in_base || !st->out_base || !st->stream_attr || !st->parent_index ||
        !st->hint || !st->remaining || !st->stream || !st->ccells || !st->coutc)
        return AG_OOM(st->ctx);
    uint64_t nin = 0, nout = 0;
    for (ag_node_id n = 0; n < cap; n++) {
        st->in_base[n] = (uint32_t)nin;
        st->out_base[n] = (uint32_t)nout;
        if (!ag_node_alive(g, n))
            continue;
        nin += ag_node_num_inputs(g, n);
        nout += ag_node_num_outputs(g, n);
        if (nin >= UINT32_MAX || nout >= UINT32_MAX)
            return AG_ERR(st->ctx, AG_EINVAL, "verify: graph '%s' has too many anchors", ag_sub_name(g, AG_ROOT));
    }
    st->in_base[cap] = (uint32_t)nin;
    st->out_base[cap] = (uint32_t)nout;
    st->in_src = scratch(st, nin, sizeof(uint32_t));
    st->in_acc = scratch(st, nin, 1);
    st->out_node = scratch(st, nout, sizeof(uint32_t));
    st->seg_a = scratch(st, nout, sizeof(uint32_t));
    st->seg_b = scratch(st, nout, sizeof(uint32_t));
    st->out_rel = scratch(st, nout, 1);
    st->out_relin = scratch(st, nout, sizeof(uint32_t));
    st->out_atomic = scratch(st, nout, 1);
    st->out_prot = scratch(st, nout, 1);
    st->cell = scratch(st, nout, sizeof(uint32_t));
    if (!st->in_src || !st->in_acc || !st->out_node || !st->seg_a || !st->seg_b || !st->out_rel || !st->out_relin ||
        !st->out_atomic || !st->out_prot || !st->cell)
        return AG_OOM(st->ctx);
    for (ag_node_id n = 0; n < cap; n++) {
        if (!ag_node_alive(g, n))
            continue;
        ag_op_kind kind = ag_ops_node_kind(ops, g, n);
        uint32_t flags = ag_ops_node_flags(ops, g, n);
        const ag_attrs *attrs = ag_node_attrs_c(g, n);
        int64_t v;
        bool has_pi = ag_attrs_get_int(attrs, "_parent_node_index", &v) && v >= 0 && v < UINT32_MAX;
        st->parent_index[n] = has_pi ? (uint32_t)v : NONE32;
        st->stream_attr[n] = ag_attrs_get_int(attrs, "_stream_id", &v) && v >= 0 ? (uint32_t)(v % UINT32_MAX) : NONE32;
        uint8_t role = R_PLAIN;
        if (ag_op_kind_is_const_like(kind) || ag_op_kind_is_var_like(kind) ||
            (ag_op_kind_is_data_like(kind) && !(has_pi && ag_node_owner(g, n) != AG_ROOT)))
            role = R_INIT;
        else if (ag_op_kind_is_data_like(kind))
            role = R_SUBDATA;
        else if (kind == AG_OPK_ATOMIC_CLEAN)
            role = R_CLEAN;
        else if (ag_node_num_subs(g, n) > 0)
            role = kind == AG_OPK_WHILE ? R_WHILE : (kind == AG_OPK_IF || kind == AG_OPK_CASE) ? R_BRANCH : R_CALL;
        st->role[n] = role;
        uint32_t ni = ag_node_num_inputs(g, n), no = ag_node_num_outputs(g, n);
        if (role == R_WHILE || role == R_BRANCH || role == R_CALL) {
            st->ccells[n] = scratch(st, (size_t)(ni > no ? ni : no) + 1, sizeof(uint32_t));
            st->coutc[n] = scratch(st, (size_t)no + 1, sizeof(uint32_t));
            if (!st->ccells[n] || !st->coutc[n])
                return AG_OOM(st->ctx);
        }
        bool data_in = false;
        for (uint32_t i = 0; i < ni; i++) {
            ag_port p = ag_node_input_src(g, n, i);
            uint32_t k = st->in_base[n] + i;
            st->in_src[k] = p.node == AG_NONE ? NONE32 : st->out_base[p.node] + p.index;
            st->in_acc[k] = (uint8_t)ag_ops_input_access(ops, g, n, i);
            if (p.node != AG_NONE && ag_op_kind_is_data_like(ag_ops_node_kind(ops, g, p.node)))
                data_in = true;
        }
        /* Registry ref outputs write their input even where the access
         * table says read-only (the reference's ref relation). */
        for (uint32_t o = 0; o < no; o++) {
            uint32_t k = st->out_base[n] + o, in = 0;
            ag_op_rel rel = ag_ops_output_ref(ops, g, n, o, &in);
            st->out_node[k] = n;
            st->out_rel[k] = (uint8_t)rel;
            st->out_relin[k] = rel == AG_REL_FRESH ? NONE32 : in;
            st->out_atomic[k] = (flags & AG_OPF_ATOMIC) && ag_ops_is_atomic_output(ops, g, n, o);
            st->seg_a[k] = st->seg_b[k] = 0;
            if (rel == AG_REL_REF && in < ni && st->in_acc[st->in_base[n] + in] == AG_ACC_RO)
                st->in_acc[st->in_base[n] + in] = AG_ACC_WRITEABLE;
        }
        /* Nodes with subgraphs write through their subgraphs, not their
         * access summary. */
        if (role != R_PLAIN)
            for (uint32_t i = 0; i < ni; i++)
                st->in_acc[st->in_base[n] + i] = AG_ACC_RO;
        /* Atomic outputs are zeroed by a clean node, or by the node's own
         * task (need_gentask_atomic, as atomic_addr_clean decides); an HCCL
         * atomic node fed by a graph input is not atomic for the pass. */
        st->atomic_mode[n] = 0;
        if (flags & AG_OPF_ATOMIC) {
            if ((flags & AG_OPF_HCCL) && data_in)
                for (uint32_t o = 0; o < no; o++)
                    st->out_atomic[st->out_base[n] + o] = 0;
            else
                st->atomic_mode[n] = ag_attrs_get_flag(attrs, "need_gentask_atomic", false) ? 2 : 1;
        }
        st->hint[n] = -1;
        uint32_t hk;
        if (st->o->inplace_hints && role == R_PLAIN && no >= 1 && ag_ops_inplace_hint(g, n, &hk) && hk < ni &&
            st->out_rel[st->out_base[n]] == AG_REL_FRESH)
            st->hint[n] = (int32_t)hk;
    }
    return AG_OK;
}

/* Bytes of constants may never be written; those of variables only through
 * writeable inputs.  A buffer of the constant region holding any constant
 * is a constant. */
static ag_status prep_protection(vs *st)
{
    const ag_verify_layout *l = st->l;
    uint8_t *bprot = scratch(st, (size_t)l->nbuffers + 1, 1);
    if (!bprot)
        return AG_OOM(st->ctx);
    for (ag_node_id n = 0; n < st->cap; n++) {
        if (!ag_node_alive(st->g, n))
            continue;
        ag_op_kind kind = ag_ops_node_kind(st->ops, st->g, n);
        for (uint32_t o = 0; o < ag_node_num_outputs(st->g, n); o++) {
            const vl_tensor *t = ag_vl_tensor(l, n, o);
            if (!t || !l->sp[t->space].constant || t->buffer >= l->nbuffers)
                continue;
            uint8_t p = ag_op_kind_is_const_like(kind) ? PROT_CONST : PROT_VAR;
            if (p > bprot[t->buffer])
                bprot[t->buffer] = p;
        }
    }
    for (ag_node_id n = 0; n < st->cap; n++) {
        if (!ag_node_alive(st->g, n))
            continue;
        for (uint32_t o = 0; o < ag_node_num_outputs(st->g, n); o++) {
            const vl_tensor *t = ag_vl_tensor(l, n, o);
            st->out_prot[st->out_base[n] + o] =
                t && l->sp[t->space].constant && t->buffer < l->nbuffers ? bprot[t->buffer] : PROT_NONE;
        }
    }
    return AG_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t lower_bound(const uint64_t *v, uint32_t n, uint64_t x)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Spaces go one after another in one address range (a gap between them);
 * every tensor boundary cuts a segment. */
static ag_status prep_segments(vs *st)
{
    const ag_verify_layout *l = st->l;
    uint64_t *base = scratch(st, (size_t)l->nspaces + 1, sizeof *base);
    uint64_t *ext = scratch(st, (size_t)l->nspaces + 1, sizeof *ext);
    if (!base || !ext)
        return AG_OOM(st->ctx);
    uint32_t nouts = st->out_base[st->cap];
    for (uint32_t k = 0; k < nouts; k++) {
        ag_node_id n = st->out_node[k];
        const vl_tensor *t = ag_vl_tensor(l, n, k - st->out_base[n]);
        if (t && t->offset + t->size > ext[t->space])
            ext[t->space] = t->offset + t->size;
    }
    uint64_t at = 0;
    for (uint32_t s = 0; s < l->nspaces; s++) {
        base[s] = at;
        at += ext[s] + 1;
    }
    uint64_t *cut = scratch(st, 2 * (size_t)nouts + 2, sizeof *cut);
    if (!cut)
        return AG_OOM(st->ctx);
    uint32_t nc = 0;
    cut[nc++] = 0;
    for (uint32_t k = 0; k < nouts; k++) {
        ag_node_id n = st->out_node[k];
        const vl_tensor *t = ag_vl_tensor(l, n, k - st->out_base[n]);
        if (!t)
            continue;
        cut[nc++] = base[t->space] + t->offset;
        cut[nc++] = base[t->space] + t->offset + t->size;
    }
    qsort(cut, nc, sizeof *cut, cmp_u64);
    uint32_t u = 0;
    for (uint32_t k = 0; k < nc; k++)
        if (u == 0 || cut[k] != cut[u - 1])
            cut[u++] = cut[k];
    for (uint32_t k = 0; k < nouts; k++) {
        ag_node_id n = st->out_node[k];
        const vl_tensor *t = ag_vl_tensor(l, n, k - st->out_base[n]);
        if (!t)
            continue;
        st->seg_a[k] = lower_bound(cut, u, base[t->space] + t->offset);
        st->seg_b[k] = lower_bound(cut, u, base[t->space] + t->offset + t->size);
    }
    return ag_shadow_init(&st->sh, st->ctx, u > 1 ? u - 1 : 1);
}

static ag_status prep_subs(vs *st)
{
    const ag_graph *g = st->g;
    st->nsub = ag_graph_sub_count(g);
    st->subs = scratch(st, st->nsub, sizeof *st->subs);
    if (!st->subs)
        return AG_OOM(st->ctx);
    for (ag_sub_id s = 0; s < st->nsub; s++) {
        vsub *vb = &st->subs[s];
        vb->netout = AG_NONE;
        if (!ag_sub_alive(g, s))
            continue;
        uint32_t cnt = ag_sub_node_count(g, s);
        vb->order = scratch(st, cnt, sizeof *vb->order);
        vb->qbuf = scratch(st, cnt, sizeof *vb->qbuf);
        vb->qstart = scratch(st, (size_t)st->nslots + 1, sizeof *vb->qstart);
        vb->qpos = scratch(st, st->nslots, sizeof *vb->qpos);
        if (!vb->order || !vb->qbuf || !vb->qstart || !vb->qpos)
            return AG_OOM(st->ctx);
        AG_TRY(ag_sub_topo_order(g, s, vb->order, &vb->n));
        for (uint32_t k = 0; k < vb->n && vb->netout == AG_NONE; k++)
            if (ag_ops_node_kind(st->ops, g, vb->order[k]) == AG_OPK_NETOUTPUT)
                vb->netout = vb->order[k];
    }
    return AG_OK;
}

/* ---- memory-reuse order ----
 * The plan lets a buffer take bytes an earlier buffer (in plan steps) no
 * longer needs.  On several streams that is only safe when the runtime
 * makes the new buffer's writers wait for every access of the old one, as
 * a lowering of the plan must (an event per reuse).  These waits are
 * dependencies of the schedule; a plan that overlaps buffers alive at the
 * same step gets none and is caught.  Per byte range the occupants are
 * kept newest first; an occupant shadows older ones for a new buffer when
 * it surely ran before it (its subgraph encloses the new one's). */

typedef struct occ {
    uint32_t buf;
    struct occ *next;
} occ;

typedef struct seg {
    uint64_t lo, hi;
    occ *list;
} seg;

typedef struct reuse {
    vs *st;
    uint32_t *bsub;      /* per buffer: subgraph of its first writer */
    uint32_t *w_off;     /* CSR per buffer: writer nodes */
    ag_node_id *w;
    uint32_t *a_off;     /* CSR per buffer: accessor nodes */
    ag_node_id *a;
    ag_vec pairs;        /* uint64 (pred << 32 | succ), lifted */
    ag_vec segs;         /* seg, sorted, per space in turn */
} reuse;

static bool sub_encloses(const ag_graph *g, ag_sub_id outer, ag_sub_id inner)
{
    while (inner != AG_NONE) {
        if (inner == outer)
            return true;
        ag_node_id p = ag_sub_parent(g, inner);
        inner = p == AG_NONE ? AG_NONE : ag_node_owner(g, p);
    }
    return false;
}

static ag_node_id up(const ag_graph *g, ag_node_id n)
{
    return ag_sub_parent(g, ag_node_owner(g, n));
}

static ag_status add_pair(reuse *ru, ag_node_id u, ag_node_id v)
{
    const ag_graph *g = ru->st->g;
    uint32_t du = ag_sub_depth(g, ag_node_owner(g, u)), dv = ag_sub_depth(g, ag_node_owner(g, v));
    while (du > dv) {
        u = up(g, u);
        du--;
    }
    while (dv > du) {
        v = up(g, v);
        dv--;
    }
    while (ag_node_owner(g, u) != ag_node_owner(g, v)) {
        u = up(g, u);
        v = up(g, v);
    }
    if (u == v)
        return AG_OK;
    uint64_t key = (uint64_t)u << 32 | v;
    return ag_vec_push(ru->st->ctx, &ru->pairs, sizeof key, &key) == AG_OK ? AG_OK : AG_OOM(ru->st->ctx);
}

static ag_status add_reuse(reuse *ru, uint32_t older, uint32_t newer)
{
    for (uint32_t i = ru->a_off[older]; i < ru->a_off[older + 1]; i++)
        for (uint32_t j = ru->w_off[newer]; j < ru->w_off[newer + 1]; j++)
            AG_TRY(add_pair(ru, ru->a[i], ru->w[j]));
    return AG_OK;
}

typedef struct bref {
    uint64_t first;
    uint32_t b;
} bref;

static int cmp_bref(const void *a, const void *b)
{
    const bref *x = a, *y = b;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    return x->b < y->b ? -1 : x->b > y->b;
}

/* Occupants of [lo, hi) in one space: edges to them, then the range holds b. */
static ag_status occupy(reuse *ru, uint32_t b, uint64_t lo, uint64_t hi)
{
    vs *st = ru->st;
    const vl_buffer *B = st->l->b;
    seg *sv = ru->segs.data;
    uint32_t n = ru->segs.len;
    /* First segment ending after lo. */
    uint32_t i = 0, lo_i, hi_i;
    {
        uint32_t a = 0, z = n;
        while (a < z) {
            uint32_t m = a + (z - a) / 2;
            if (sv[m].hi <= lo)
                a = m + 1;
            else
                z = m;
        }
        i = a;
    }
    lo_i = i;
    for (hi_i = lo_i; hi_i < n && sv[hi_i].lo < hi; hi_i++) {
        for (occ *o = sv[hi_i].list; o; o = o->next) {
            if (o->buf != b && B[o->buf].last < B[b].first)
                AG_TRY(add_reuse(ru, o->buf, b));
            if (sub_encloses(st->g, ru->bsub[o->buf], ru->bsub[b]))
                break;
        }
    }
    /* Rebuild [lo_i, hi_i): left remainder, covered pieces and gaps, right remainder. */
    bool root = ru->bsub[b] == AG_ROOT;
    seg tmp[2];
    uint32_t nt = 0;
    ag_vec out;
    memset(&out, 0, sizeof out);
    uint64_t at = lo;
    ag_status s = AG_OK;
    for (uint32_t k = lo_i; k < hi_i && s == AG_OK; k++) {
        seg cs = sv[k];
        if (cs.lo < lo) {
            seg left = {cs.lo, lo, cs.list};
            s = ag_vec_push(st->ctx, &out, sizeof left, &left);
            cs.lo = lo;
        }
        if (s == AG_OK && at < cs.lo) {
            occ *no = ag_arena_alloc(&st->arena, sizeof *no);
            seg gap = {at, cs.lo, no};
            if (!no)
                s = AG_ENOMEM;
            else {
                no->buf = b;
                s = ag_vec_push(st->ctx, &out, sizeof gap, &gap);
            }
        }
        uint64_t e = cs.hi < hi ? cs.hi : hi;
        if (s == AG_OK) {
            occ *no = ag_arena_alloc(&st->arena, sizeof *no);
            if (!no)
                s = AG_ENOMEM;
            else {
                no->buf = b;
                no->next = root ? NULL : cs.list;
                seg mid = {cs.lo, e, no};
                s = ag_vec_push(st->ctx, &out, sizeof mid, &mid);
            }
        }
        if (s == AG_OK && cs.hi > hi) {
            tmp[nt++] = (seg){hi, cs.hi, cs.list};
            s = ag_vec_push(st->ctx, &out, sizeof tmp[0], &tmp[nt - 1]);
        }
        at = e;
    }
    if (s == AG_OK && at < hi) {
        occ *no = ag_arena_alloc(&st->arena, sizeof *no);
        seg gap = {at, hi, no};
        if (!no)
            s = AG_ENOMEM;
        else {
            no->buf = b;
            s = ag_vec_push(st->ctx, &out, sizeof gap, &gap);
        }
    }
    /* Splice out into segs at [lo_i, hi_i). */
    uint32_t rm = hi_i - lo_i, add = out.len;
    if (s == AG_OK && add > rm)
        s = ag_vec_reserve(st->ctx, &ru->segs, sizeof(seg), ru->segs.len + (add - rm));
    if (s == AG_OK) {
        sv = ru->segs.data;
        memmove(sv + lo_i + add, sv + hi_i, (size_t)(n - hi_i) * sizeof *sv);
        memcpy(sv + lo_i, out.data, (size_t)add * sizeof *sv);
        ru->segs.len = n - rm + add;
    }
    ag_vec_free(st->ctx, &out, sizeof(seg));
    return s == AG_OK ? AG_OK : AG_OOM(st->ctx);
}

/* Whether node c zeroes output k (an atomic output of a node that needs a
 * clean) before it accumulates: the clean writes the buffer first, so it is
 * one of the buffer's writers for reuse ordering. */
static bool is_cleaner(const vs *st, uint32_t k, ag_node_id c)
{
    ag_node_id n = st->out_node[k];
    return st->out_atomic[k] && st->atomic_mode[n] == 1 && st->role[c] == R_CLEAN;
}

static ag_status prep_reuse_edges(vs *st, ag_vec *pairs)
{
    const ag_graph *g = st->g;
    const ag_verify_layout *l = st->l;
    uint32_t nb = l->nbuffers;
    reuse ru;
    memset(&ru, 0, sizeof ru);
    ru.st = st;
    ru.bsub = scratch(st, (size_t)nb + 1, sizeof *ru.bsub);
    ru.w_off = scratch(st, (size_t)nb + 2, sizeof *ru.w_off);
    ru.a_off = scratch(st, (size_t)nb + 2, sizeof *ru.a_off);
    uint64_t *lo = scratch(st, (size_t)nb + 1, sizeof *lo), *hi = scratch(st, (size_t)nb + 1, sizeof *hi);
    uint32_t *bspace = scratch(st, (size_t)nb + 1, sizeof *bspace);
    uint64_t *wstep = scratch(st, (size_t)nb + 1, sizeof *wstep);
    uint32_t *steps = scratch(st, st->cap, sizeof *steps);
    ag_node_id *order = scratch(st, (size_t)ag_graph_node_count(g) + 1, sizeof *order);
    if (!ru.bsub || !ru.w_off || !ru.a_off || !lo || !hi || !bspace || !wstep || !steps || !order)
        return AG_OOM(st->ctx);
    uint32_t norder = 0;
    AG_TRY(ag_graph_topo_order(g, order, &norder));
    for (uint32_t p = 0; p < norder; p++)
        steps[order[p]] = p;
    for (uint32_t b = 0; b < nb; b++) {
        bspace[b] = NONE32;
        lo[b] = UINT64_MAX;
        wstep[b] = UINT64_MAX;
        ru.bsub[b] = AG_ROOT;
    }
    /* Count writers (producers) and accessors (producers and consumers). */
    uint32_t nouts = st->out_base[st->cap];
    for (uint32_t k = 0; k < nouts; k++) {
        ag_node_id n = st->out_node[k];
        uint32_t o = k - st->out_base[n];
        const vl_tensor *t = ag_vl_tensor(l, n, o);
        if (!t || !l->sp[t->space].arena || t->buffer >= nb)
            continue;
        uint32_t b = t->buffer;
        bspace[b] = t->space;
        if (t->offset < lo[b])
            lo[b] = t->offset;
        if (t->offset + t->size > hi[b])
            hi[b] = t->offset + t->size;
        if (steps[n] < wstep[b]) {
            wstep[b] = steps[n];
            ru.bsub[b] = ag_node_owner(g, n);
        }
        uint32_t nc = 0;
        for (uint32_t j = 0; j < ag_node_num_ctrl_in(g, n); j++)
            nc += is_cleaner(st, k, ag_node_ctrl_in(g, n, j));
        ru.w_off[b + 2] += 1 + nc;
        ru.a_off[b + 2] += 1 + nc + ag_node_output_nconsumers(g, n, o);
    }
    for (uint32_t b = 0; b < nb; b++) {
        ru.w_off[b + 2] += ru.w_off[b + 1];
        ru.a_off[b + 2] += ru.a_off[b + 1];
    }
    ru.w = scratch(st, (size_t)ru.w_off[nb + 1] + 1, sizeof *ru.w);
    ru.a = scratch(st, (size_t)ru.a_off[nb + 1] + 1, sizeof *ru.a);
    if (!ru.w || !ru.a)
        return AG_OOM(st->ctx);
    for (uint32_t k = 0; k < nouts; k++) {
        ag_node_id n = st->out_node[k];
        uint32_t o = k - st->out_base[n];
        const vl_tensor *t = ag_vl_tensor(l, n, o);
        if (!t || !l->sp[t->space].arena || t->buffer >= nb)
            continue;
        uint32_t b = t->buffer;
        ru.w[ru.w_off[b + 1]++] = n;
        ru.a[ru.a_off[b + 1]++] = n;
        for (uint32_t j = 0; j < ag_node_num_ctrl_in(g, n); j++) {
            ag_node_id c = ag_node_ctrl_in(g, n, j);
            if (is_cleaner(st, k, c)) {
                ru.w[ru.w_off[b + 1]++] = c;
                ru.a[ru.a_off[b + 1]++] = c;
            }
        }
        for (uint32_t c = 0; c < ag_node_output_nconsumers(g, n, o); c++)
            ru.a[ru.a_off[b + 1]++] = ag_node_output_consumer(g, n, o, c).node;
    }
    /* In place: an output placed in the buffer of one of its node's inputs
     * (a plan merge, or a reuse relation) overwrites what that buffer held,
     * so its node waits for every earlier access of the buffer. */
    for (uint32_t k = 0; k < nouts; k++) {
        ag_node_id n = st->out_node[k];
        const vl_tensor *t = ag_vl_tensor(l, n, k - st->out_base[n]);
        if (!t || !l->sp[t->space].arena || t->buffer >= nb ||
            (st->out_rel[k] != AG_REL_FRESH && st->out_rel[k] != AG_REL_REUSE))
            continue;
        bool inplace = false;
        for (uint32_t i = 0; i < ag_node_num_inputs(g, n) && !inplace; i++) {
            uint32_t src = st->in_src[st->in_base[n] + i];
            if (src == NONE32)
                continue;
            ag_node_id pn = st->out_node[src];
            const vl_tensor *ti = ag_vl_tensor(l, pn, src - st->out_base[pn]);
            inplace = ti && ti->buffer == t->buffer;
        }
        if (!inplace)
            continue;
        for (uint32_t j = ru.a_off[t->buffer]; j < ru.a_off[t->buffer + 1]; j++) {
            ag_node_id a = ru.a[j];
            if (a != n && steps[a] < steps[n])
                AG_TRY(add_pair(&ru, a, n));
        }
    }
    bref *refs = scratch(st, (size_t)nb + 1, sizeof *refs);
    if (!refs)
        return AG_OOM(st->ctx);
    ag_status s = AG_OK;
    for (uint32_t sp = 0; sp < l->nspaces && s == AG_OK; sp++) {
        if (!l->sp[sp].arena)
            continue;
        uint32_t nr = 0;
        for (uint32_t b = 0; b < nb; b++)
            if (bspace[b] == sp && hi[b] > lo[b])
                refs[nr++] = (bref){l->b[b].first, b};
        qsort(refs, nr, sizeof *refs, cmp_bref);
        ru.segs.len = 0;
        for (uint32_t k = 0; k < nr && s == AG_OK; k++)
            s = occupy(&ru, refs[k].b, lo[refs[k].b], hi[refs[k].b]);
    }
    ag_vec_free(st->ctx, &ru.segs, sizeof(seg));
    *pairs = ru.pairs;
    return s;
}

static ag_status prep_succ(vs *st)
{
    const ag_graph *g = st->g;
    uint32_t cap = st->cap;
    ag_vec pairs;
    memset(&pairs, 0, sizeof pairs);
    ag_status s = prep_reuse_edges(st, &pairs);
    uint64_t *pv = pairs.data;
    st->npred = scratch(st, cap, sizeof *st->npred);
    st->succ_off = scratch(st, (size_t)cap + 2, sizeof *st->succ_off);
    if (s == AG_OK && (!st->npred || !st->succ_off))
        s = AG_OOM(st->ctx);
    if (s != AG_OK) {
        ag_vec_free(st->ctx, &pairs, sizeof(uint64_t));
        return s;
    }
    if (pairs.len)
        qsort(pv, pairs.len, sizeof *pv, cmp_u64);
    uint32_t np = 0;
    for (uint32_t k = 0; k < pairs.len; k++)
        if (np == 0 || pv[k] != pv[np - 1])
            pv[np++] = pv[k];
    /* Count: data producers, control predecessors, reuse waits. */
    for (ag_node_id n = 0; n < cap; n++) {
        if (!ag_node_alive(g, n))
            continue;
        for (uint32_t i = 0; i < ag_node_num_inputs(g, n); i++)
            if (ag_node_input_src(g, n, i).node != AG_NONE)
                st->succ_off[ag_node_input_src(g, n, i).node + 2]++;
        for (uint32_t k = 0; k < ag_node_num_ctrl_in(g, n); k++)
            st->succ_off[ag_node_ctrl_in(g, n, k) + 2]++;
    }
    for (uint32_t k = 0; k < np; k++)
        st->succ_off[(uint32_t)(pv[k] >> 32) + 2]++;
    for (uint32_t n = 0; n < cap; n++)
        st->succ_off[n + 2] += st->succ_off[n + 1];
    st->succ = scratch(st, (size_t)st->succ_off[cap + 1] + 1, sizeof *st->succ);
    if (!st->succ) {
        ag_vec_free(st->ctx, &pairs, sizeof(uint64_t));
        return AG_OOM(st->ctx);
    }
    for (ag_node_id n = 0; n < cap; n++) {
        if (!ag_node_alive(g, n))
            continue;
        for (uint32_t i = 0; i < ag_node_num_inputs(g, n); i++) {
            ag_node_id p = ag_node_input_src(g, n, i).node;
            if (p != AG_NONE) {
                st->succ[st->succ_off[p + 1]++] = n;
                st->npred[n]++;
            }
        }
        for (uint32_t k = 0; k < ag_node_num_ctrl_in(g, n); k++) {
            ag_node_id p = ag_node_ctrl_in(g, n, k);
            st->succ[st->succ_off[p + 1]++] = n;
            st->npred[n]++;
        }
    }
    for (uint32_t k = 0; k < np; k++) {
        ag_node_id u = (ag_node_id)(pv[k] >> 32), v = (ag_node_id)(pv[k] & 0xffffffffu);
        st->succ[st->succ_off[u + 1]++] = v;
        st->npred[v]++;
    }
    ag_vec_free(st->ctx, &pairs, sizeof(uint64_t));
    return AG_OK;
}

/* ---- static checks ---- */

static ag_status static_checks(vs *st)
{
    const ag_graph *g = st->g;
    const ag_verify_layout *l = st->l;
    char a[160], t[300], text[700];
    for (ag_node_id n = 0; n < st->cap; n++) {
        if (!ag_node_alive(g, n))
            continue;
        for (uint32_t o = 0; o < ag_node_num_outputs(g, n); o++) {
            const vl_tensor *tt = ag_vl_tensor(l, n, o);
            if (!tt || !l->sp[tt->space].arena || tt->offset + tt->size <= l->sp[tt->space].limit)
                continue;
            anchor_text(st, a, sizeof a, n, false, o);
            node_text(st, t, sizeof t, n, false, o);
            snprintf(text, sizeof text, "%s ends past the %s arena's %llu bytes", t, l->sp[tt->space].name,
                     (unsigned long long)l->sp[tt->space].limit);
            AG_TRY(report(st, AG_VIOL_OUT_OF_ARENA, a, "", st->out_base[n] + o, text));
        }
        /* A switch reads its input through an address fixed at load time:
         * its producer must be pinned (mark_same_addr), or reuse may move it. */
        if (!(ag_ops_node_flags(st->ops, g, n) & AG_OPF_FIXED_ADDR))
            continue;
        for (uint32_t i = 0; i < ag_node_num_inputs(g, n); i++) {
            ag_port p = ag_node_input_src(g, n, i);
            if (p.node == AG_NONE)
                continue;
            const char *name;
            const ag_attrs *pa = ag_node_attrs_c(g, p.node);
            /* One node carries one fixed address (mark_same_addr pins the
             * first output that feeds a switch): the node is what is pinned. */
            if (ag_attrs_get_string(pa, "_alloc_fixed_addr", &name))
                continue;
            anchor_text(st, a, sizeof a, n, true, i);
            char w[160];
            anchor_text(st, w, sizeof w, p.node, false, p.index);
            node_text(st, t, sizeof t, n, true, i);
            snprintf(text, sizeof text, "%s reads through a fixed address but \"%s\" (%s) output %u is not pinned "
                                        "(_alloc_fixed_addr)", t, ag_node_name(g, p.node), ag_node_type(g, p.node),
                     p.index);
            AG_TRY(report(st, AG_VIOL_UNPINNED_FIXED_ADDR, a, w, st->out_base[p.node] + p.index, text));
        }
    }
    st->stop = false;
    return AG_OK;
}

static ag_status execute(vs *st)
{
    AG_TRY(prep_nodes(st));
    AG_TRY(prep_protection(st));
    AG_TRY(prep_segments(st));
    AG_TRY(prep_subs(st));
    AG_TRY(prep_succ(st));
    AG_TRY(static_checks(st));
    const ag_verify_opts *o = st->o;
    uint32_t first = 0, count = o->schedules;
    if (o->replay >= 0) {
        first = o->replay > UINT32_MAX ? UINT32_MAX : (uint32_t)o->replay;
        count = 1;
    }
    for (uint32_t k = 0; k < count; k++) {
        AG_TRY(run_schedule(st, first + k));
        st->r->schedules++;
        if (o->progress)
            o->progress(o->progress_ud, k + 1, count);
    }
    st->r->executed = st->executed;
    return AG_OK;
}

ag_status ag_verify_execute(ag_ctx *ctx, const ag_graph *g, const ag_ops *ops, const ag_verify_layout *l,
                            const ag_verify_opts *opts, ag_verify_result *r)
{
    vs st;
    memset(&st, 0, sizeof st);
    st.ctx = ctx;
    st.g = g;
    st.ops = ops;
    st.l = l;
    st.o = opts;
    st.r = r;
    st.seed = opts->seed;
    st.cap = ag_graph_node_capacity(g);
    st.nslots = (opts->streams > 64 ? 64 : opts->streams) + EXPLICIT_SLOTS;
    ag_arena_init(&st.arena, ctx);
    ag_ops *own = NULL;
    ag_status s = AG_OK;
    if (!ops) {
        s = ag_ops_create(ctx, &own);
        st.ops = own;
    }
    if (s == AG_OK)
        s = execute(&st);
    ag_shadow_free(&st.sh);
    ag_vec_free(ctx, &st.cur, sizeof(uint32_t));
    ag_vec_free(ctx, &st.vals, sizeof(prov));
    ag_arena_reset(&st.arena);
    ag_ops_destroy(own);
    return s;
}
