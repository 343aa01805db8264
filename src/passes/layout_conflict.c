/* Symbol-level memory-layout conflicts (seed 3.3; reference notes 4.1, 4.3,
 * 4.4, 4.8): in every top static graph, give each anchor its attributes,
 * look at every pair of anchors that share a symbol for an absolute conflict
 * or a registered checker's verdict, and isolate the anchors found with an
 * Identity, one symbol at a time in order of symbol name. */
#include <stdio.h>
#include <stdlib.h>

#include "passes/layout_internal.h"

/* ---- the registered checker table ---- */

const ag_layout_checker_row ag_layout_checker_rows[] = {
#define AG_LAYOUT_CHECKER(a, b, fn, as_symbol, name) {AG_LA_##a, AG_LA_##b, fn, as_symbol, name},
#include "passes/layout_checkers.def"
#undef AG_LAYOUT_CHECKER
    {AG_LA_COUNT_, AG_LA_COUNT_, NULL, false, NULL} /* end marker, not a row */
};
const uint32_t ag_layout_checker_nrows =
    (uint32_t)(sizeof ag_layout_checker_rows / sizeof ag_layout_checker_rows[0]) - 1;

static const char *const attr_names[] = {
#define AG_LAYOUT_ATTR_NAME_(s) #s,
    AG_LAYOUT_ATTR_LIST(AG_LAYOUT_ATTR_NAME_)
#undef AG_LAYOUT_ATTR_NAME_
};

const char *ag_layout_attr_name(ag_layout_attr a)
{
    return (unsigned)a < AG_LA_COUNT_ ? attr_names[a] : NULL;
}

/* ---- the absolute sets (notes 4.4) ---- */

typedef struct la_pair {
    ag_layout_attr a, b;
    const char *rule;
} la_pair;

#define ABS_(a, b) {AG_LA_##a, AG_LA_##b, "layout: absolute " #a " x " #b}
static const la_pair abs_conflict[] = {
    ABS_(USER_MEMORY_INPUT, UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT),
    ABS_(USER_MEMORY_INPUT, RTS_SPECIAL_TYPE_INPUT),
    ABS_(USER_MEMORY_OUTPUT, RTS_SPECIAL_TYPE_INPUT),
    ABS_(USER_MEMORY_OUTPUT, RTS_SPECIAL_TYPE_OUTPUT),
    ABS_(USER_MEMORY_OUTPUT, CONTINUOUS_OUTPUT),
    ABS_(USER_MEMORY_OUTPUT, NOPADDING_CONTINUOUS_OUTPUT),
    ABS_(IMMUTABLE_ADDRESS_OUTPUT, RTS_SPECIAL_TYPE_INPUT),
    ABS_(IMMUTABLE_ADDRESS_OUTPUT, CONTINUOUS_INPUT),
    ABS_(CONTINUOUS_INPUT, NOPADDING_CONTINUOUS_OUTPUT),
    ABS_(CONTINUOUS_OUTPUT, NOPADDING_CONTINUOUS_INPUT),
};
#undef ABS_
static const la_pair abs_no_conflict[] = {
    {AG_LA_RTS_SPECIAL_TYPE_INPUT, AG_LA_NORMAL_OUTPUT, NULL},
    {AG_LA_USER_MEMORY_OUTPUT, AG_LA_USER_MEMORY_OUTPUT, NULL},
    {AG_LA_USER_MEMORY_INPUT, AG_LA_USER_MEMORY_OUTPUT, NULL},
};
#define N_ABS (sizeof abs_conflict / sizeof abs_conflict[0])
#define N_NOCON (sizeof abs_no_conflict / sizeof abs_no_conflict[0])

enum { ACT_NONE, ACT_NOCON, ACT_ABS, ACT_CHECK };

#define NCLS_MAP (1u << AG_LA_COUNT_)

typedef struct la_conflict {
    ag_lanchor a;
    const char *rule;
} la_conflict;

struct ag_layout_engine {
    ag_symtab *t;
    ag_arena arena;      /* lives for one Process */
    uint32_t cap;        /* node capacity at the start */
    uint32_t *pos;       /* per node: topological position */
    uint16_t *attr;      /* per anchor slot */
    ag_node_id *ref;     /* per anchor slot: ref map target */
    uint32_t *mark;      /* per anchor slot: epoch it entered the conflict set */
    uint32_t epoch;
    ag_vec conflicts;    /* la_conflict of the current symbol */
    const char *cur_rule;
    const ag_layout_checker_row *rows;
    const char **row_rule; /* per row: "layout: <name>" */
    uint8_t act[AG_LA_COUNT_][AG_LA_COUNT_];
    uint32_t arg[AG_LA_COUNT_][AG_LA_COUNT_]; /* index into abs_conflict or rows */
    bool visited[AG_LA_COUNT_][AG_LA_COUNT_];
    uint32_t *cls_of_mask; /* NCLS_MAP entries, AG_NONE between symbols */
    uint32_t counter;      /* suffix of identity names */
    /* A hypothetical merge (ag_layout_merge_check): the symbols taken as one
     * and their anchors in list order; nusyms == 0 outside such a query. */
    const uint32_t *usyms;
    uint32_t nusyms;
    ag_lanchor *uanchors;
    uint32_t nuanchors;
    bool query;          /* detection only: stop at the first conflict */
    bool qfound;         /* the pair below found it */
    ag_lanchor qa, qb;
    unsigned qx, qy;     /* their attributes in the row that fired */
};

/* ---- queries for checkers ---- */

static uint32_t slot(const ag_layout_ctx *lc, const ag_lanchor *a)
{
    return ag_symtab_slot(lc->symtab, a);
}

uint16_t ag_layout_attrs_of(const ag_layout_ctx *lc, const ag_lanchor *a)
{
    uint32_t s = slot(lc, a);
    return s == AG_NONE ? 0 : lc->eng->attr[s];
}

uint32_t ag_layout_topo_pos(const ag_layout_ctx *lc, ag_node_id n)
{
    return n < lc->eng->cap ? lc->eng->pos[n] : UINT32_MAX;
}

ag_node_id ag_layout_ref_target(const ag_layout_ctx *lc, const ag_lanchor *a)
{
    uint32_t s = slot(lc, a);
    return s == AG_NONE || a->is_input ? AG_NONE : lc->eng->ref[s];
}

ag_mem_type ag_layout_mem_type(const ag_layout_ctx *lc, const ag_lanchor *a)
{
    return a->is_input ? ag_ops_input_mem_type(lc->ops, lc->g, a->node, a->index)
                       : ag_ops_output_mem_type(lc->ops, lc->g, a->node, a->index);
}

uint32_t ag_layout_sym_size(const ag_layout_ctx *lc)
{
    if (lc->eng->nusyms)
        return lc->eng->nuanchors;
    return ag_symtab_size(lc->symtab, lc->sym);
}

const ag_lanchor *ag_layout_sym_anchor(const ag_layout_ctx *lc, uint32_t k)
{
    if (lc->eng->nusyms)
        return &lc->eng->uanchors[k];
    return ag_symtab_anchor_at(lc->symtab, lc->sym, k);
}

bool ag_layout_in_symbol(const ag_layout_ctx *lc, const ag_lanchor *a)
{
    uint32_t s = ag_symtab_symbol_of(lc->symtab, a);
    if (s == AG_NONE)
        return false;
    const ag_layout_engine *e = lc->eng;
    for (uint32_t k = 0; k < e->nusyms; k++)
        if (e->usyms[k] == s)
            return true;
    return e->nusyms == 0 && s == lc->sym;
}

static bool fixed_addr(const ag_layout_ctx *lc, ag_node_id n)
{
    return ag_node_alive(lc->g, n) && (ag_ops_node_flags(lc->ops, lc->g, n) & AG_OPF_FIXED_ADDR);
}

bool ag_layout_refresh_matters(const ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    return lc->info.fm_refreshable || (lc->info.phys_refreshable && (fixed_addr(lc, a->node) || fixed_addr(lc, b->node)));
}

static bool anchor_valid(const ag_graph *g, const ag_lanchor *a)
{
    return ag_node_alive(g, a->node) &&
           a->index < (a->is_input ? ag_node_num_inputs(g, a->node) : ag_node_num_outputs(g, a->node));
}

ag_status ag_layout_conflict_at(ag_layout_ctx *lc, const ag_lanchor *x, const char *rule)
{
    ag_layout_engine *e = lc->eng;
    if (!anchor_valid(lc->g, x))
        return AG_ERR(lc->ctx, AG_EINVAL, "layout conflict (%s): node id %u %s %u is not an anchor of the graph",
                      rule ? rule : e->cur_rule ? e->cur_rule : "?", (unsigned)x->node,
                      x->is_input ? "input" : "output", (unsigned)x->index);
    uint32_t s = slot(lc, x);
    if (s != AG_NONE) {
        if (e->mark[s] == e->epoch)
            return AG_OK;
    } else {
        for (uint32_t k = 0; k < e->conflicts.len; k++)
            if (ag_lanchor_eq(&AG_VEC_AT(e->conflicts, la_conflict, k).a, x))
                return AG_OK;
    }
    const char *r = rule ? ag_arena_strdup(&lc->scratch, rule) : e->cur_rule;
    if (r == NULL)
        return AG_OOM(lc->ctx);
    la_conflict c = {*x, r};
    if (ag_vec_push(lc->ctx, &e->conflicts, sizeof c, &c) != AG_OK)
        return AG_OOM(lc->ctx);
    if (s != AG_NONE)
        e->mark[s] = e->epoch;
    return AG_OK;
}

/* ---- graph information and static graphs (notes 4.1) ---- */

static bool node_flag(const ag_graph *g, ag_node_id n, const char *name, bool dflt)
{
    return ag_attrs_get_flag(ag_node_attrs_c(g, n), name, dflt);
}

bool ag_layout_sub_static(const ag_pass_env *env, ag_sub_id s)
{
    const ag_graph *g = env->g;
    uint32_t cnt = ag_sub_node_count(g, s);
    for (uint32_t k = 0; k < cnt; k++) {
        ag_node_id n = ag_sub_node_at(g, s, k);
        if (ag_ops_node_kind(env->ops, g, n) == AG_OPK_NETOUTPUT)
            continue;
        if (node_flag(g, n, "_is_unknown_shape", false) || node_flag(g, n, "_dynamic_shape_partitioned", false))
            return false;
    }
    return true;
}

void ag_layout_info_of(const ag_pass_env *env, ag_sub_id top, ag_layout_info *info)
{
    const ag_graph *g = env->g;
    ag_node_id opts = AG_NONE;
    uint32_t cnt = ag_sub_node_count(g, AG_ROOT);
    for (uint32_t k = 0; k < cnt && opts == AG_NONE; k++) {
        ag_node_id n = ag_sub_node_at(g, AG_ROOT, k);
        if (ag_ops_node_kind(env->ops, g, n) == AG_OPK_NETOUTPUT)
            opts = n;
    }
    info->root_static = ag_layout_sub_static(env, AG_ROOT);
    info->fm_refreshable = opts != AG_NONE && node_flag(g, opts, "_feature_map_refreshable", false);
    if (!info->root_static && top != AG_ROOT && ag_layout_sub_static(env, top))
        info->fm_refreshable = true;
    info->phys_refreshable = opts != AG_NONE && node_flag(g, opts, "_physical_memory_refreshable", false);
    info->user_in_nopad_cont_out_supported =
        opts == AG_NONE || node_flag(g, opts, "_user_input_nopadding_continuous_output", true);
}

/* ---- tables ---- */

static ag_status table_error(ag_ctx *ctx, uint32_t r, const ag_layout_checker_row *row, const char *what)
{
    return AG_ERR(ctx, AG_EINVAL, "layout checker table: row %u (%s): %s", (unsigned)r,
                  row->name ? row->name : "(unnamed)", what);
}

static ag_status build_tables(ag_layout_ctx *lc, const ag_layout_checker_row *rows, uint32_t nrows)
{
    ag_layout_engine *e = lc->eng;
    for (unsigned k = 0; k < N_NOCON; k++) {
        e->act[abs_no_conflict[k].a][abs_no_conflict[k].b] = ACT_NOCON;
        e->act[abs_no_conflict[k].b][abs_no_conflict[k].a] = ACT_NOCON;
    }
    for (unsigned x = 0; x < AG_LA_COUNT_; x++) {
        e->act[x][AG_LA_REFERENCE_OUTPUT] = ACT_NOCON;
        e->act[AG_LA_REFERENCE_OUTPUT][x] = ACT_NOCON;
    }
    for (unsigned k = 0; k < N_ABS; k++) {
        const la_pair *p = &abs_conflict[k];
        e->act[p->a][p->b] = e->act[p->b][p->a] = ACT_ABS;
        e->arg[p->a][p->b] = e->arg[p->b][p->a] = k;
    }
    e->rows = rows;
    e->row_rule = ag_arena_alloc(&e->arena, ((size_t)nrows + 1) * sizeof *e->row_rule);
    if (e->row_rule == NULL)
        return AG_OOM(lc->ctx);
    for (uint32_t r = 0; r < nrows; r++) {
        const ag_layout_checker_row *row = &rows[r];
        if ((unsigned)row->attr_a >= AG_LA_COUNT_ || (unsigned)row->attr_b >= AG_LA_COUNT_ || row->fn == NULL ||
            row->name == NULL)
            return table_error(lc->ctx, r, row, "attribute out of range, no function or no name");
        uint8_t *cell = &e->act[row->attr_a][row->attr_b];
        if (*cell == ACT_NOCON)
            return table_error(lc->ctx, r, row, "the pair is an absolute no-conflict pair");
        if (*cell == ACT_ABS)
            return table_error(lc->ctx, r, row, "the pair is an absolute conflict pair");
        if (*cell == ACT_CHECK)
            return table_error(lc->ctx, r, row, "the pair is registered twice");
        e->act[row->attr_a][row->attr_b] = e->act[row->attr_b][row->attr_a] = ACT_CHECK;
        e->arg[row->attr_a][row->attr_b] = e->arg[row->attr_b][row->attr_a] = r;
        size_t len = strlen(row->name) + sizeof "layout: ";
        char *rule = ag_arena_alloc(&e->arena, len);
        if (rule == NULL)
            return AG_OOM(lc->ctx);
        snprintf(rule, len, "layout: %s", row->name);
        e->row_rule[r] = rule;
    }
    return AG_OK;
}

/* ---- marking (notes 4.3) ---- */

static bool mem_special(ag_mem_type m)
{
    return m != AG_MEM_HBM;
}

/* The RefData (or other node) named by ref_var_src_var_name on output o of n:
 * looked up in n's graph, then in the graphs around it. */
static ag_node_id ref_var_node(const ag_graph *g, ag_node_id n, uint32_t o)
{
    const char *var = ag_ops_output_ref_var(g, n, o);
    if (var == NULL || var[0] == '\0')
        return AG_NONE;
    for (ag_sub_id s = ag_node_owner(g, n);;) {
        ag_node_id x = ag_sub_find_node(g, s, var);
        if (x != AG_NONE)
            return x;
        ag_node_id p = ag_sub_parent(g, s);
        if (p == AG_NONE)
            return AG_NONE;
        s = ag_node_owner(g, p);
    }
}

static void mark_node(ag_layout_ctx *lc, ag_node_id n)
{
    ag_layout_engine *e = lc->eng;
    const ag_graph *g = lc->g;
    const ag_ops *ops = lc->ops;
    ag_op_kind kind = ag_ops_node_kind(ops, g, n);
    uint32_t flags = ag_ops_node_flags(ops, g, n);
    uint32_t nin = ag_node_num_inputs(g, n), nout = ag_node_num_outputs(g, n);
    bool own = ag_node_owner(g, n) == lc->top;
    /* IsAddressRefreshable: fixed-address ops never; HCCL ops only with a
     * refreshable feature map; anchors the registry calls unrefreshable. */
    bool node_unrefresh = (flags & AG_OPF_FIXED_ADDR) || ((flags & AG_OPF_HCCL) && !lc->info.fm_refreshable);
    bool user_out = own && kind == AG_OPK_NETOUTPUT;
    for (uint32_t i = 0; i < nin; i++) {
        ag_lanchor a = {n, i, true};
        uint32_t s = slot(lc, &a);
        uint16_t m = 0;
        if (user_out)
            m |= AG_LA_BIT(AG_LA_USER_OUT);
        if (node_unrefresh || (ag_ops_input_flags(ops, g, n, i) & AG_OPA_UNREFRESHABLE))
            m |= AG_LA_BIT(AG_LA_UNREFRESH_IN);
        if ((flags & AG_OPF_NOPAD_CONTINUOUS_INPUT) && nin > 1)
            m |= AG_LA_BIT(AG_LA_NOPAD_CONT_IN);
        if ((flags & AG_OPF_CONTINUOUS_INPUT) && nin > 1)
            m |= AG_LA_BIT(AG_LA_CONT_IN);
        if (mem_special(ag_ops_input_mem_type(ops, g, n, i)))
            m |= AG_LA_BIT(AG_LA_RTS_IN);
        e->attr[s] = m ? m : AG_LA_BIT(AG_LA_NORMAL_IN);
    }
    bool user_in = own && ag_op_kind_is_data_like(kind);
    bool immutable = ag_op_kind_is_const_like(kind) || kind == AG_OPK_VARIABLE;
    for (uint32_t o = 0; o < nout; o++) {
        ag_lanchor a = {n, o, false};
        uint32_t s = slot(lc, &a);
        uint16_t m = 0;
        if (user_in)
            m |= AG_LA_BIT(AG_LA_USER_IN);
        if (immutable)
            m |= AG_LA_BIT(AG_LA_IMMUTABLE_OUT);
        if (node_unrefresh || (ag_ops_output_flags(ops, g, n, o) & AG_OPA_UNREFRESHABLE))
            m |= AG_LA_BIT(AG_LA_UNREFRESH_OUT);
        if ((flags & AG_OPF_NOPAD_CONTINUOUS_OUTPUT) && nout > 1)
            m |= AG_LA_BIT(AG_LA_NOPAD_CONT_OUT);
        if ((flags & AG_OPF_CONTINUOUS_OUTPUT) && nout > 1)
            m |= AG_LA_BIT(AG_LA_CONT_OUT);
        if (!user_in) {
            ag_node_id x = ref_var_node(g, n, o);
            uint32_t in;
            if (x != AG_NONE && ag_node_num_outputs(g, x) > 0) {
                ag_lanchor xo = {x, 0, false};
                uint32_t sx = ag_symtab_symbol_of(lc->symtab, &xo);
                if (sx != AG_NONE && sx == ag_symtab_symbol_of(lc->symtab, &a)) {
                    m |= AG_LA_BIT(AG_LA_REF_OUT);
                    e->ref[s] = x;
                }
            }
            if (!(m & AG_LA_BIT(AG_LA_REF_OUT)) && ag_symtab_ref_from_input(ops, g, n, o, &in))
                m |= AG_LA_BIT(AG_LA_REF_OUT);
        }
        if (mem_special(ag_ops_output_mem_type(ops, g, n, o)))
            m |= AG_LA_BIT(AG_LA_RTS_OUT);
        e->attr[s] = m ? m : AG_LA_BIT(AG_LA_NORMAL_OUT);
    }
}

/* ---- detection (notes 4.4) ---- */

static ag_status unsolvable(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b, const char *rule)
{
    /* A hypothetical merge that would carry such a pair conflicts all the
     * same: nothing could isolate it afterwards. */
    if (lc->eng->query)
        return ag_layout_conflict_at(lc, a, rule);
    if (lc->env->report == NULL)
        return AG_OK;
    const char *nodes[2] = {ag_node_name(lc->g, a->node), ag_node_name(lc->g, b->node)};
    return ag_report_warning(lc->env->report, AG_LAYOUT_PASS, "W_LAYOUT_UNSOLVABLE", nodes, 2,
                             "%s: outputs \"%s\" (%s) %u and \"%s\" (%s) %u share a buffer and neither can be "
                             "isolated by an Identity before an input; nothing inserted",
                             rule, nodes[0], ag_node_type(lc->g, a->node), (unsigned)a->index, nodes[1],
                             ag_node_type(lc->g, b->node), (unsigned)b->index);
}

static ag_status absolute(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b, const char *rule)
{
    const ag_lanchor *x;
    if (a->is_input && b->is_input)
        x = ag_layout_lower_input(lc, a, b);
    else if (a->is_input)
        x = a;
    else if (b->is_input)
        x = b;
    else
        return unsolvable(lc, a, b, rule);
    return ag_layout_conflict_at(lc, x, rule);
}

static ag_status run_checker(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b, unsigned x, unsigned y)
{
    ag_layout_engine *e = lc->eng;
    uint32_t r = e->arg[x][y];
    const ag_layout_checker_row *row = &e->rows[r];
    if (row->as_symbol) {
        if (e->visited[x][y])
            return AG_OK;
        e->visited[x][y] = e->visited[y][x] = true;
    }
    bool swapped = row->attr_a != row->attr_b && x != (unsigned)row->attr_a;
    lc->attr_a = row->attr_a;
    lc->attr_b = row->attr_b;
    lc->swapped = swapped;
    e->cur_rule = e->row_rule[r];
    ag_status st = swapped ? row->fn(lc, b, a) : row->fn(lc, a, b);
    e->cur_rule = NULL;
    return st;
}

static ag_status check_pair(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    ag_layout_engine *e = lc->eng;
    if (a->node == b->node)
        return AG_OK;
    uint16_t ta = ag_layout_attrs_of(lc, a), tb = ag_layout_attrs_of(lc, b);
    uint16_t cont_out = AG_LA_BIT(AG_LA_CONT_OUT);
    if (!a->is_input && !b->is_input && !(ta & cont_out) && !(tb & cont_out)) {
        ag_node_id ra = ag_layout_ref_target(lc, a), rb = ag_layout_ref_target(lc, b);
        if ((ra != AG_NONE && ra == b->node) || (rb != AG_NONE && rb == a->node))
            return AG_OK;
    }
    for (unsigned x = 0; x < AG_LA_COUNT_; x++) {
        if (!(ta & AG_LA_BIT(x)))
            continue;
        for (unsigned y = 0; y < AG_LA_COUNT_; y++) {
            if (!(tb & AG_LA_BIT(y)))
                continue;
            if (e->act[x][y] == ACT_ABS)
                AG_TRY(absolute(lc, a, b, abs_conflict[e->arg[x][y]].rule));
            else if (e->act[x][y] == ACT_CHECK)
                AG_TRY(run_checker(lc, a, b, x, y));
            else
                continue;
            if (e->query && e->conflicts.len > 0) {
                if (!e->qfound) {
                    e->qfound = true;
                    e->qa = *a;
                    e->qb = *b;
                    e->qx = x;
                    e->qy = y;
                }
                return AG_OK;
            }
        }
    }
    return AG_OK;
}

static bool masks_act(const ag_layout_engine *e, uint16_t ma, uint16_t mb)
{
    for (unsigned x = 0; x < AG_LA_COUNT_; x++) {
        if (!(ma & AG_LA_BIT(x)))
            continue;
        for (unsigned y = 0; y < AG_LA_COUNT_; y++)
            if ((mb & AG_LA_BIT(y)) && (e->act[x][y] == ACT_ABS || e->act[x][y] == ACT_CHECK))
                return true;
    }
    return false;
}

static int cmp_u32(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    return a < b ? -1 : a > b;
}

/* Every pair i < j of the symbol's anchors in list order, as the reference
 * does; anchors are grouped by attribute set first so that pairs whose
 * attributes can never conflict (NORMAL_INPUT readers of one buffer) cost
 * nothing. */
static ag_status detect(ag_layout_ctx *lc)
{
    ag_layout_engine *e = lc->eng;
    uint32_t m = ag_layout_sym_size(lc);
    if (m < 2)
        return AG_OK;
    uint32_t *cls = ag_arena_alloc(&lc->scratch, (size_t)m * sizeof *cls);
    uint16_t *cmask = ag_arena_alloc(&lc->scratch, (size_t)m * sizeof *cmask);
    uint32_t *start = ag_arena_alloc(&lc->scratch, ((size_t)m + 2) * sizeof *start);
    uint32_t *members = ag_arena_alloc(&lc->scratch, (size_t)m * sizeof *members);
    uint32_t *cand = ag_arena_alloc(&lc->scratch, (size_t)m * sizeof *cand);
    if (!cls || !cmask || !start || !members || !cand)
        return AG_OOM(lc->ctx);
    uint32_t ncls = 0;
    for (uint32_t i = 0; i < m; i++) {
        uint16_t mk = ag_layout_attrs_of(lc, ag_layout_sym_anchor(lc, i));
        if (e->cls_of_mask[mk] == AG_NONE) {
            e->cls_of_mask[mk] = ncls;
            cmask[ncls++] = mk;
        }
        cls[i] = e->cls_of_mask[mk];
    }
    for (uint32_t c = 0; c < ncls; c++)
        e->cls_of_mask[cmask[c]] = AG_NONE;
    uint8_t *cact = ag_arena_alloc(&lc->scratch, (size_t)ncls * ncls);
    if (cact == NULL)
        return AG_OOM(lc->ctx);
    for (uint32_t c1 = 0; c1 < ncls; c1++)
        for (uint32_t c2 = 0; c2 < ncls; c2++)
            cact[(size_t)c1 * ncls + c2] = masks_act(e, cmask[c1], cmask[c2]);
    /* Members of each class in list order (counting sort). */
    memset(start, 0, ((size_t)ncls + 2) * sizeof *start);
    for (uint32_t i = 0; i < m; i++)
        start[cls[i] + 2]++;
    for (uint32_t c = 0; c < ncls; c++)
        start[c + 2] += start[c + 1];
    for (uint32_t i = 0; i < m; i++)
        members[start[cls[i] + 1]++] = i;
    /* Now start[c] .. start[c + 1] are class c's members. */
    for (uint32_t i = 0; i + 1 < m; i++) {
        uint32_t n = 0, used = 0;
        for (uint32_t c = 0; c < ncls; c++) {
            if (!cact[(size_t)cls[i] * ncls + c])
                continue;
            uint32_t lo = start[c], hi = start[c + 1];
            while (lo < hi) { /* first member after i */
                uint32_t mid = lo + (hi - lo) / 2;
                if (members[mid] <= i)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < start[c + 1])
                used++;
            for (uint32_t k = lo; k < start[c + 1]; k++)
                cand[n++] = members[k];
        }
        if (used > 1)
            qsort(cand, n, sizeof *cand, cmp_u32);
        for (uint32_t k = 0; k < n; k++) {
            AG_TRY(check_pair(lc, ag_layout_sym_anchor(lc, i), ag_layout_sym_anchor(lc, cand[k])));
            if (e->query && e->conflicts.len > 0)
                return AG_OK; /* one conflict decides a hypothetical merge */
        }
    }
    return AG_OK;
}

/* ---- solving (notes 4.8) ---- */

static bool is_copy_kind(const ag_layout_ctx *lc, ag_node_id n)
{
    ag_op_kind k = ag_ops_node_kind(lc->ops, lc->g, n);
    return k == AG_OPK_IDENTITY || k == AG_OPK_MEMCPY;
}

void ag_layout_identity_base(const ag_graph *g, ag_node_id dst, uint32_t in_idx, uint32_t n, char *buf, size_t cap)
{
    snprintf(buf, cap, "identity_%u_%s_MemLayoutConflict_%u", (unsigned)in_idx, ag_node_name(g, dst), (unsigned)n);
}

static ag_status copy_attr(ag_graph *g, ag_node_id from, ag_node_id to, const char *name)
{
    const ag_attr *at = ag_attrs_find(ag_node_attrs_c(g, from), name);
    return at ? ag_attrs_set(g, ag_node_attrs(g, to), at) : AG_OK;
}

static ag_status move_true(ag_graph *g, ag_node_id from, ag_node_id to, const char *name)
{
    bool b = false;
    if (!ag_attrs_get_bool(ag_node_attrs_c(g, from), name, &b) || !b)
        return AG_OK;
    AG_TRY(ag_attrs_set_bool(g, ag_node_attrs(g, to), name, true));
    return ag_attrs_remove(g, ag_node_attrs(g, from), name);
}

ag_status ag_layout_identity_attrs(ag_pass_env *env, ag_node_id ident, ag_node_id src, ag_node_id dst)
{
    ag_graph *g = env->g;
    ag_attrs *a = ag_node_attrs(g, ident);
    AG_TRY(ag_attrs_set_bool(g, a, "no_need_constant_folding", false));
    AG_TRY(ag_attrs_set_bool(g, a, "_cannot_be_deleted", true));
    if (dst != AG_NONE) {
        AG_TRY(copy_attr(g, dst, ident, "_stream_label"));
        AG_TRY(copy_attr(g, dst, ident, "_rts_label_node"));
        AG_TRY(move_true(g, dst, ident, "_is_connected_to_data"));
    }
    if (src != AG_NONE) {
        AG_TRY(copy_attr(g, src, ident, "_batch_label"));
        AG_TRY(move_true(g, src, ident, "_is_connected_to_netoutput"));
    }
    return AG_OK;
}

static char *identity_name(ag_layout_ctx *lc, ag_node_id dst, uint32_t in_idx)
{
    size_t cap = strlen(ag_node_name(lc->g, dst)) + 64;
    char *buf = ag_arena_alloc(&lc->scratch, cap);
    if (buf != NULL)
        ag_layout_identity_base(lc->g, dst, in_idx, lc->eng->counter++, buf, cap);
    return buf;
}

static ag_status solve_one(ag_layout_ctx *lc, const la_conflict *c)
{
    ag_graph *g = lc->g;
    const ag_lanchor *a = &c->a;
    ag_why why = {AG_LAYOUT_PASS, c->rule};
    ag_node_id id = AG_NONE;
    if (!anchor_valid(g, a))
        return AG_OK;
    if (a->is_input) {
        if (!ag_desc_shape_known(ag_node_input_desc_c(g, a->node, a->index)))
            return AG_OK;
        ag_port p = ag_node_input_src(g, a->node, a->index);
        if (p.node == AG_NONE)
            return AG_OK;
        if (is_copy_kind(lc, p.node) && ag_node_output_nconsumers(g, p.node, p.index) == 1)
            return AG_OK; /* already isolated */
        char *name = identity_name(lc, a->node, a->index);
        if (name == NULL)
            return AG_OOM(lc->ctx);
        AG_TRY(ag_pass_insert_before(lc->env, &why, a->node, a->index, "Identity", name, &id));
        return ag_layout_identity_attrs(lc->env, id, p.node, a->node);
    }
    if (!ag_desc_shape_known(ag_node_output_desc_c(g, a->node, a->index)))
        return AG_OK;
    uint32_t nc = ag_node_output_nconsumers(g, a->node, a->index);
    if (nc == 0)
        return AG_OK; /* nobody downstream to separate */
    ag_port c0 = ag_node_output_consumer(g, a->node, a->index, 0);
    if (nc == 1 && is_copy_kind(lc, c0.node))
        return AG_OK; /* already isolated */
    char *name = identity_name(lc, c0.node, c0.index);
    if (name == NULL)
        return AG_OOM(lc->ctx);
    AG_TRY(ag_pass_insert_after(lc->env, &why, a->node, a->index, NULL, 0, "Identity", name, &id));
    return ag_layout_identity_attrs(lc->env, id, a->node, c0.node);
}

typedef struct la_sorted {
    la_conflict c;
    const char *key;
} la_sorted;

static int cmp_sorted(const void *pa, const void *pb)
{
    const la_sorted *a = pa, *b = pb;
    int r = strcmp(a->key, b->key);
    if (r != 0)
        return r;
    if (a->c.a.node != b->c.a.node)
        return a->c.a.node < b->c.a.node ? -1 : 1;
    if (a->c.a.is_input != b->c.a.is_input)
        return a->c.a.is_input ? -1 : 1;
    return a->c.a.index < b->c.a.index ? -1 : a->c.a.index > b->c.a.index;
}

static ag_status solve(ag_layout_ctx *lc)
{
    ag_layout_engine *e = lc->eng;
    uint32_t n = e->conflicts.len;
    if (n == 0)
        return AG_OK;
    la_sorted *v = ag_arena_alloc(&lc->scratch, (size_t)n * sizeof *v);
    if (v == NULL)
        return AG_OOM(lc->ctx);
    for (uint32_t k = 0; k < n; k++) {
        v[k].c = AG_VEC_AT(e->conflicts, la_conflict, k);
        size_t len = ag_lanchor_format(lc->g, &v[k].c.a, NULL, 0) + 1;
        char *key = ag_arena_alloc(&lc->scratch, len);
        if (key == NULL)
            return AG_OOM(lc->ctx);
        ag_lanchor_format(lc->g, &v[k].c.a, key, len);
        v[k].key = key;
    }
    qsort(v, n, sizeof *v, cmp_sorted);
    for (uint32_t k = 0; k < n; k++)
        AG_TRY(solve_one(lc, &v[k].c));
    return AG_OK;
}

/* ---- Process ---- */

static ag_status prepare(ag_layout_ctx *lc)
{
    ag_layout_engine *e = lc->eng;
    const ag_graph *g = lc->g;
    uint32_t ns = ag_symtab_nslots(lc->symtab);
    e->cap = ag_symtab_node_cap(lc->symtab);
    e->pos = ag_arena_alloc(&e->arena, ((size_t)e->cap + 1) * sizeof *e->pos);
    e->attr = ag_arena_alloc(&e->arena, ((size_t)ns + 1) * sizeof *e->attr);
    e->ref = ag_arena_alloc(&e->arena, ((size_t)ns + 1) * sizeof *e->ref);
    e->mark = ag_arena_alloc(&e->arena, ((size_t)ns + 1) * sizeof *e->mark);
    e->cls_of_mask = ag_arena_alloc(&e->arena, (size_t)NCLS_MAP * sizeof *e->cls_of_mask);
    if (!e->pos || !e->attr || !e->ref || !e->mark || !e->cls_of_mask)
        return AG_OOM(lc->ctx);
    memset(e->pos, 0xff, (size_t)e->cap * sizeof *e->pos);
    memset(e->ref, 0xff, (size_t)ns * sizeof *e->ref);
    memset(e->cls_of_mask, 0xff, (size_t)NCLS_MAP * sizeof *e->cls_of_mask);
    uint32_t total = ag_graph_node_count(g), count = 0;
    ag_node_id *order = ag_calloc(lc->ctx, (size_t)total + 1, sizeof *order);
    if (order == NULL)
        return AG_OOM(lc->ctx);
    ag_status st = ag_graph_topo_order(g, order, &count);
    for (uint32_t k = 0; st == AG_OK && k < count; k++)
        if (order[k] < e->cap)
            e->pos[order[k]] = k;
    ag_free(lc->ctx, order, ((size_t)total + 1) * sizeof *order);
    AG_TRY(st);
    for (ag_node_id n = 0; n < e->cap; n++) {
        ag_lanchor probe = {n, 0, true}, probe_out = {n, 0, false};
        if (!ag_node_alive(g, n))
            continue;
        /* Mapped nodes have slots for all anchors; a node without anchors
         * has nothing to mark. */
        if ((ag_node_num_inputs(g, n) > 0 && slot(lc, &probe) == AG_NONE) ||
            (ag_node_num_outputs(g, n) > 0 && slot(lc, &probe_out) == AG_NONE))
            continue;
        mark_node(lc, n);
    }
    return AG_OK;
}

static ag_status process_symbols(ag_layout_ctx *lc)
{
    ag_layout_engine *e = lc->eng;
    uint32_t count = ag_symtab_count(lc->symtab);
    for (uint32_t k = 0; k < count; k++) {
        lc->sym = ag_symtab_at(lc->symtab, k);
        e->epoch++;
        e->conflicts.len = 0;
        memset(e->visited, 0, sizeof e->visited);
        ag_status st = detect(lc);
        if (st == AG_OK)
            st = solve(lc);
        ag_arena_reset(&lc->scratch);
        AG_TRY(st);
    }
    return AG_OK;
}

ag_status ag_layout_process(ag_pass_env *env, ag_sub_id top, const ag_layout_info *info,
                            const ag_layout_checker_row *rows, uint32_t nrows)
{
    ag_ctx *ctx = ag_graph_ctx(env->g);
    ag_layout_engine e;
    memset(&e, 0, sizeof e);
    ag_arena_init(&e.arena, ctx);
    ag_layout_ctx lc;
    memset(&lc, 0, sizeof lc);
    lc.env = env;
    lc.g = env->g;
    lc.ops = env->ops;
    lc.ctx = ctx;
    lc.top = top;
    lc.info = *info;
    lc.eng = &e;
    ag_arena_init(&lc.scratch, ctx);
    ag_status st = build_tables(&lc, rows, nrows);
    if (st == AG_OK)
        st = ag_symtab_build(env, top, true, &e.t);
    if (st == AG_OK) {
        lc.symtab = e.t;
        st = prepare(&lc);
    }
    if (st == AG_OK)
        st = process_symbols(&lc);
    ag_symtab_destroy(e.t);
    ag_vec_free(ctx, &e.conflicts, sizeof(la_conflict));
    ag_arena_reset(&lc.scratch);
    ag_arena_reset(&e.arena);
    return st;
}

/* ---- hypothetical merges (notes 4.9) ---- */

struct ag_layout_merge_checker {
    ag_ctx *ctx;
    ag_layout_engine e;
    ag_layout_ctx lc;
    char rule[192]; /* the last verdict's rule */
};

void ag_layout_merge_checker_destroy(ag_layout_merge_checker *mc)
{
    if (mc == NULL)
        return;
    ag_ctx *ctx = mc->ctx;
    ag_vec_free(ctx, &mc->e.conflicts, sizeof(la_conflict));
    ag_arena_reset(&mc->lc.scratch);
    ag_arena_reset(&mc->e.arena);
    ag_free(ctx, mc, sizeof *mc);
}

ag_status ag_layout_merge_checker_create(ag_ctx *ctx, ag_pass_env *env, const ag_symtab *t, ag_sub_id top,
                                         ag_layout_merge_checker **out)
{
    *out = NULL;
    ag_layout_merge_checker *mc = ag_calloc(ctx, 1, sizeof *mc);
    if (mc == NULL)
        return AG_OOM(ctx);
    mc->ctx = ctx;
    ag_arena_init(&mc->e.arena, ctx);
    ag_layout_ctx *lc = &mc->lc;
    lc->env = env;
    lc->g = env->g;
    lc->ops = env->ops;
    lc->ctx = ctx;
    lc->top = top;
    lc->symtab = t;
    lc->eng = &mc->e;
    ag_arena_init(&lc->scratch, ctx);
    ag_layout_info_of(env, top, &lc->info);
    /* Under a dynamic root the pass treats known-shape subgraphs as
     * refreshable models of their own; one answer for every graph of t
     * must assume the stricter case. */
    if (!lc->info.root_static)
        lc->info.fm_refreshable = true;
    ag_status st = build_tables(lc, ag_layout_checker_rows, ag_layout_checker_nrows);
    if (st == AG_OK)
        st = prepare(lc);
    if (st != AG_OK) {
        ag_layout_merge_checker_destroy(mc);
        return st;
    }
    *out = mc;
    return AG_OK;
}

typedef struct la_saved_mark {
    uint32_t slot;
    uint16_t attr;
    ag_node_id ref;
} la_saved_mark;

/* Marking's reference-output test is a symbol test: an output naming a
 * variable whose buffer is one of the merged symbols becomes a reference
 * output of the merged symbol.  The old marks go to saved for the undo. */
static void remark_ref_outputs(ag_layout_ctx *lc, la_saved_mark *saved, uint32_t *nsaved)
{
    ag_layout_engine *e = lc->eng;
    *nsaved = 0;
    for (uint32_t k = 0; k < e->nuanchors; k++) {
        const ag_lanchor *x = &e->uanchors[k];
        uint32_t s = slot(lc, x);
        if (x->is_input || s == AG_NONE || !ag_node_alive(lc->g, x->node))
            continue;
        uint16_t at = e->attr[s];
        if (at & (AG_LA_BIT(AG_LA_REF_OUT) | AG_LA_BIT(AG_LA_USER_IN)))
            continue;
        ag_node_id r = ref_var_node(lc->g, x->node, x->index);
        if (r == AG_NONE || ag_node_num_outputs(lc->g, r) == 0)
            continue;
        ag_lanchor ro = {r, 0, false};
        if (!ag_layout_in_symbol(lc, &ro))
            continue;
        saved[(*nsaved)++] = (la_saved_mark){s, at, e->ref[s]};
        e->attr[s] = (uint16_t)((at & ~AG_LA_BIT(AG_LA_NORMAL_OUT)) | AG_LA_BIT(AG_LA_REF_OUT));
        e->ref[s] = r;
    }
}

ag_status ag_layout_merge_check(ag_layout_merge_checker *mc, const uint32_t *syms, uint32_t nsyms,
                                ag_layout_merge_verdict *v)
{
    ag_layout_ctx *lc = &mc->lc;
    ag_layout_engine *e = &mc->e;
    memset(v, 0, sizeof *v);
    if (nsyms == 0)
        return AG_OK;
    uint32_t m = 0;
    for (uint32_t k = 0; k < nsyms; k++)
        m += ag_symtab_size(lc->symtab, syms[k]);
    e->uanchors = ag_arena_alloc(&lc->scratch, ((size_t)m + 1) * sizeof *e->uanchors);
    la_saved_mark *saved = ag_arena_alloc(&lc->scratch, ((size_t)m + 1) * sizeof *saved);
    if (e->uanchors == NULL || saved == NULL) {
        e->uanchors = NULL;
        ag_arena_reset(&lc->scratch);
        return AG_OOM(mc->ctx);
    }
    for (uint32_t k = 0, n = 0; k < nsyms; k++)
        for (uint32_t j = 0; j < ag_symtab_size(lc->symtab, syms[k]); j++)
            e->uanchors[n++] = *ag_symtab_anchor_at(lc->symtab, syms[k], j);
    e->usyms = syms;
    e->nusyms = nsyms;
    e->nuanchors = m;
    lc->sym = syms[0];
    uint32_t nsaved = 0;
    remark_ref_outputs(lc, saved, &nsaved);
    e->epoch++;
    e->conflicts.len = 0;
    memset(e->visited, 0, sizeof e->visited);
    e->query = true;
    e->qfound = false;
    ag_status st = detect(lc);
    if (st == AG_OK && e->conflicts.len > 0) {
        const la_conflict *c = &AG_VEC_AT(e->conflicts, la_conflict, 0);
        v->conflict = true;
        snprintf(mc->rule, sizeof mc->rule, "%s", c->rule ? c->rule : "layout");
        v->rule = mc->rule;
        v->a = e->qfound ? e->qa : c->a;
        v->b = e->qfound ? e->qb : c->a;
        v->attr_a = e->qfound ? (ag_layout_attr)e->qx : AG_LA_COUNT_;
        v->attr_b = e->qfound ? (ag_layout_attr)e->qy : AG_LA_COUNT_;
    }
    while (nsaved > 0) {
        nsaved--;
        e->attr[saved[nsaved].slot] = saved[nsaved].attr;
        e->ref[saved[nsaved].slot] = saved[nsaved].ref;
    }
    e->query = false;
    e->usyms = NULL;
    e->nusyms = 0;
    e->uanchors = NULL;
    e->nuanchors = 0;
    e->conflicts.len = 0;
    ag_arena_reset(&lc->scratch);
    return st;
}

/* ---- the pass ---- */

ag_status ag_pass_layout_conflict(ag_pass_env *env)
{
    ag_graph *g = env->g;
    ag_ctx *ctx = ag_graph_ctx(g);
    uint32_t ns = ag_graph_sub_count(g);
    bool *stat = ag_calloc(ctx, (size_t)ns + 1, sizeof *stat);
    ag_sub_id *tops = ag_calloc(ctx, (size_t)ns + 1, sizeof *tops);
    if (stat == NULL || tops == NULL) {
        ag_free(ctx, stat, ((size_t)ns + 1) * sizeof *stat);
        ag_free(ctx, tops, ((size_t)ns + 1) * sizeof *tops);
        return AG_OOM(ctx);
    }
    uint32_t ntop = 0;
    for (ag_sub_id s = 0; s < ns; s++)
        stat[s] = ag_sub_alive(g, s) && ag_layout_sub_static(env, s);
    if (stat[AG_ROOT]) {
        tops[ntop++] = AG_ROOT;
    } else {
        /* Known-shape subgraphs directly under a dynamic graph are models of
         * their own (notes 4.1). */
        for (ag_sub_id s = 1; s < ns; s++) {
            ag_node_id p = ag_sub_parent(g, s);
            if (stat[s] && p != AG_NONE && !stat[ag_node_owner(g, p)])
                tops[ntop++] = s;
        }
    }
    ag_status st = AG_OK;
#if AG_LAYOUT_HAVE_CTRL_PREPASS
    for (uint32_t k = 0; st == AG_OK && k < ntop; k++)
        st = ag_layout_ctrl_node_prepass(env, tops[k]);
#endif
    for (uint32_t k = 0; st == AG_OK && k < ntop; k++) {
        ag_layout_info info;
        ag_layout_info_of(env, tops[k], &info);
        st = ag_layout_process(env, tops[k], &info, ag_layout_checker_rows, ag_layout_checker_nrows);
    }
    ag_free(ctx, stat, ((size_t)ns + 1) * sizeof *stat);
    ag_free(ctx, tops, ((size_t)ns + 1) * sizeof *tops);
    return st;
}
