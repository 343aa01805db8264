/* Node-level op semantics: the registry entry of a node's type with the
 * node's own attributes applied on top (the reference system's attribute
 * names, reference notes 2.3), in the orders of IsRefFromInput (2.4) and of
 * the input RW type (3.6).  Queries never fail: absent or malformed
 * attributes are ignored here. */
#include "ops/ops_internal.h"

const ag_op_info *ag_ops_node_info(const ag_ops *ops, const ag_graph *g, ag_node_id n)
{
    const ag_op_info *info = ag_ops_lookup(ops, ag_node_type(g, n), ag_node_domain(g, n));
    return info ? info : ag_ops_default(ops);
}

ag_op_kind ag_ops_node_kind(const ag_ops *ops, const ag_graph *g, ag_node_id n)
{
    return ag_op_info_kind(ag_ops_node_info(ops, g, n));
}

/* Bool attribute, also accepting an int (0 / nonzero) as written by tools
 * that have no bool type. */
static bool attr_truth(const ag_attrs *a, const char *name, bool *v)
{
    const ag_attr *at = ag_attrs_find(a, name);
    if (!at)
        return false;
    if (at->kind == AG_ATTR_BOOL) {
        *v = at->v.b;
        return true;
    }
    if (at->kind == AG_ATTR_INT) {
        *v = at->v.i != 0;
        return true;
    }
    return false;
}

/* Index lists (atomic_output_index, ...): an int list or a single int. */
static bool attr_lists(const ag_attr *at, uint32_t idx)
{
    if (!at)
        return false;
    if (at->kind == AG_ATTR_INT)
        return at->v.i >= 0 && (uint64_t)at->v.i == idx;
    if (at->kind == AG_ATTR_INTS)
        for (uint32_t k = 0; k < at->count; k++)
            if (at->v.is[k] >= 0 && (uint64_t)at->v.is[k] == idx)
                return true;
    return false;
}

static bool attr_nonempty_list(const ag_attrs *a, const char *name)
{
    const ag_attr *at = ag_attrs_find(a, name);
    return at && ((at->kind == AG_ATTR_INTS && at->count > 0) || at->kind == AG_ATTR_INT);
}

static void apply_bool(const ag_attrs *a, const char *name, uint32_t bit, uint32_t *flags)
{
    bool v;
    if (attr_truth(a, name, &v))
        *flags = v ? (*flags | bit) : (*flags & ~bit);
}

uint32_t ag_ops_node_flags(const ag_ops *ops, const ag_graph *g, ag_node_id n)
{
    const ag_op_info *known = ag_ops_lookup(ops, ag_node_type(g, n), ag_node_domain(g, n));
    const ag_op_info *info = known ? known : ag_ops_default(ops);
    uint32_t flags = ag_op_info_flags(info);
    if (!known)
        flags |= AG_OPF_UNKNOWN;
    const ag_attrs *a = ag_node_attrs_c(g, n);
    apply_bool(a, "continuous_input", AG_OPF_CONTINUOUS_INPUT, &flags);
    apply_bool(a, "continuous_output", AG_OPF_CONTINUOUS_OUTPUT, &flags);
    apply_bool(a, "_no_padding_continuous_input", AG_OPF_NOPAD_CONTINUOUS_INPUT, &flags);
    apply_bool(a, "_no_padding_continuous_output", AG_OPF_NOPAD_CONTINUOUS_OUTPUT, &flags);
    apply_bool(a, "_output_reuse_input", AG_OPF_OUTPUT_REUSE_INPUT, &flags);
    apply_bool(a, "is_atomic_node", AG_OPF_ATOMIC, &flags);
    /* The reference marks a node atomic as soon as it lists atomic anchors. */
    if (attr_nonempty_list(a, "atomic_output_index") || attr_nonempty_list(a, "atomic_input_index"))
        flags |= AG_OPF_ATOMIC;
    if (ag_op_kind_has_subgraphs(ag_op_info_kind(info)) || ag_node_num_subs(g, n) > 0)
        flags |= AG_OPF_SUBGRAPHS;
    return flags;
}

static const char *desc_name(const ag_tensor_desc *d)
{
    return d && d->name && d->name[0] ? d->name : NULL;
}

static bool node_reference(const ag_graph *g, ag_node_id n)
{
    bool v = false;
    return attr_truth(ag_node_attrs_c(g, n), "reference", &v) && v;
}

ag_op_access ag_ops_input_access(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t i)
{
    if (i >= ag_node_num_inputs(g, n))
        return AG_ACC_RO;
    const ag_op_info *info = ag_ops_node_info(ops, g, n);
    /* While rewrites its loop-carried inputs every iteration, whatever the
     * attributes say (reference notes 3.6 step 1). */
    if (ag_op_info_kind(info) == AG_OPK_WHILE)
        return AG_ACC_SCOPE_WRITEABLE;
    const ag_tensor_desc *d = ag_node_input_desc_c(g, n, i);
    int64_t special;
    /* Inputs given doubled memory must not share it with anyone. */
    if (d && ag_attrs_get_int(d->attrs, "_special_input_size", &special) && special > 0)
        return AG_ACC_SCOPE_WRITEABLE;
    ag_op_access acc = ag_op_info_input_access(info, i);
    const ag_attr *mut = ag_attrs_find(ag_node_attrs_c(g, n), "_input_mutable");
    if (mut) {
        /* When present the attribute alone decides scope-writeability. */
        bool listed = mut->kind == AG_ATTR_INTS ? attr_lists(mut, i)
                      : mut->kind == AG_ATTR_BOOL ? mut->v.b
                      : mut->kind == AG_ATTR_INT  ? mut->v.i != 0
                                                  : acc == AG_ACC_SCOPE_WRITEABLE;
        if (listed)
            return AG_ACC_SCOPE_WRITEABLE;
        if (acc == AG_ACC_SCOPE_WRITEABLE)
            acc = AG_ACC_RO;
    }
    /* Phony concat/split share names only to express aliasing; they never write. */
    if (ag_op_info_kind(info) == AG_OPK_PHONY)
        return AG_ACC_RO;
    if (acc == AG_ACC_RO && node_reference(g, n)) {
        const char *name = desc_name(d);
        uint32_t nout = ag_node_num_outputs(g, n);
        for (uint32_t o = 0; name && o < nout; o++) {
            const char *oname = desc_name(ag_node_output_desc_c(g, n, o));
            if (oname && strcmp(oname, name) == 0)
                return AG_ACC_WRITEABLE;
        }
    }
    return acc;
}

static bool subgraph_input(const ag_graph *g, ag_node_id n, ag_op_kind kind)
{
    int64_t idx;
    return ag_op_kind_is_data_like(kind) && ag_sub_parent(g, ag_node_owner(g, n)) != AG_NONE &&
           ag_attrs_get_int(ag_node_attrs_c(g, n), "_parent_node_index", &idx);
}

static ag_op_rel out_rel(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t o, uint32_t *in)
{
    const ag_op_info *info = ag_ops_node_info(ops, g, n);
    ag_op_kind kind = ag_op_info_kind(info);
    uint32_t tin;
    ag_op_rel trel = ag_op_info_output_rel(info, o, &tin);
    /* 1. pass-through nodes and subgraph inputs */
    if (trel == AG_REL_PASS) {
        *in = tin;
        return AG_REL_PASS;
    }
    if (subgraph_input(g, n, kind)) {
        *in = o;
        return AG_REL_PASS;
    }
    /* 2. Merge / Reshape-like views; 3. ref outputs, then reference + names */
    if (trel == AG_REL_VIEW || trel == AG_REL_REF) {
        *in = tin;
        return trel;
    }
    const ag_tensor_desc *d = ag_node_output_desc_c(g, n, o);
    if (node_reference(g, n)) {
        const char *name = desc_name(d);
        uint32_t nin = ag_node_num_inputs(g, n);
        for (uint32_t i = 0; name && i < nin; i++) {
            const char *iname = desc_name(ag_node_input_desc_c(g, n, i));
            if (iname && strcmp(iname, name) == 0) {
                *in = i;
                return AG_REL_REF;
            }
        }
    }
    /* 4. reuse_input on the output descriptor (the table's reuse first) */
    if (trel == AG_REL_REUSE) {
        *in = tin;
        return AG_REL_REUSE;
    }
    bool reuse = false;
    if (d && attr_truth(d->attrs, "reuse_input", &reuse) && reuse) {
        int64_t idx = 0;
        ag_attrs_get_int(d->attrs, "reuse_input_index", &idx);
        *in = idx >= 0 && idx <= UINT32_MAX ? (uint32_t)idx : UINT32_MAX;
        return AG_REL_REUSE;
    }
    /* 5. no-padding continuous node reusing its input: input 0 for every output */
    uint32_t flags = ag_ops_node_flags(ops, g, n);
    if ((flags & (AG_OPF_NOPAD_CONTINUOUS_INPUT | AG_OPF_NOPAD_CONTINUOUS_OUTPUT)) &&
        (flags & AG_OPF_OUTPUT_REUSE_INPUT)) {
        *in = 0;
        return AG_REL_REUSE;
    }
    return AG_REL_FRESH;
}

ag_op_rel ag_ops_output_ref(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t o, uint32_t *in_idx)
{
    uint32_t in = 0;
    ag_op_rel rel = AG_REL_FRESH;
    if (o < ag_node_num_outputs(g, n)) {
        rel = out_rel(ops, g, n, o, &in);
        if (rel != AG_REL_FRESH && in >= ag_node_num_inputs(g, n)) {
            rel = AG_REL_FRESH;
            in = 0;
        }
    }
    if (in_idx)
        *in_idx = rel == AG_REL_FRESH ? 0 : in;
    return rel;
}

/* _input_memory_type / _output_memory_type entry k: our memory type numbers
 * (0 hbm, 1 p2p, 2 host) or names. */
static bool attr_mem_type(const ag_attrs *a, const char *name, uint32_t k, ag_mem_type *out)
{
    const ag_attr *at = ag_attrs_find(a, name);
    if (!at || k >= at->count)
        return false;
    if (at->kind == AG_ATTR_INTS) {
        int64_t v = at->v.is[k];
        if (v < 0 || v >= AG_MEM_COUNT_)
            return false;
        *out = (ag_mem_type)v;
        return true;
    }
    if (at->kind == AG_ATTR_STRINGS)
        return ag_mem_type_parse(at->v.ss[k], strlen(at->v.ss[k]), out);
    return false;
}

ag_mem_type ag_ops_input_mem_type(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t i)
{
    if (i >= ag_node_num_inputs(g, n))
        return AG_MEM_HBM;
    ag_mem_type mt;
    if (attr_mem_type(ag_node_attrs_c(g, n), "_input_memory_type", i, &mt))
        return mt;
    bool expl;
    mt = ag_op_info_input_mem_type(ag_ops_node_info(ops, g, n), i, &expl);
    if (expl)
        return mt;
    const ag_tensor_desc *d = ag_node_input_desc_c(g, n, i);
    return d ? d->mem_type : AG_MEM_HBM;
}

ag_mem_type ag_ops_output_mem_type(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t o)
{
    if (o >= ag_node_num_outputs(g, n))
        return AG_MEM_HBM;
    ag_mem_type mt;
    if (attr_mem_type(ag_node_attrs_c(g, n), "_output_memory_type", o, &mt))
        return mt;
    bool expl;
    mt = ag_op_info_output_mem_type(ag_ops_node_info(ops, g, n), o, &expl);
    if (expl)
        return mt;
    const ag_tensor_desc *d = ag_node_output_desc_c(g, n, o);
    return d ? d->mem_type : AG_MEM_HBM;
}

static uint32_t anchor_flags(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t k, bool input)
{
    if (k >= (input ? ag_node_num_inputs(g, n) : ag_node_num_outputs(g, n)))
        return 0;
    const ag_op_info *info = ag_ops_node_info(ops, g, n);
    uint32_t f = input ? ag_op_info_input_flags(info, k) : ag_op_info_output_flags(info, k);
    if (ag_op_info_flags(info) & AG_OPF_UNREFRESHABLE)
        f |= AG_OPA_UNREFRESHABLE;
    const ag_attr *at = ag_attrs_find(ag_node_attrs_c(g, n), input ? "atomic_input_index" : "atomic_output_index");
    if (attr_lists(at, k))
        f |= AG_OPA_ATOMIC;
    return f;
}

uint32_t ag_ops_input_flags(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t i)
{
    return anchor_flags(ops, g, n, i, true);
}

uint32_t ag_ops_output_flags(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t o)
{
    return anchor_flags(ops, g, n, o, false);
}

bool ag_ops_is_atomic_input(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t i)
{
    return (anchor_flags(ops, g, n, i, true) & AG_OPA_ATOMIC) != 0;
}

bool ag_ops_is_atomic_output(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t o)
{
    return (anchor_flags(ops, g, n, o, false) & AG_OPA_ATOMIC) != 0;
}

bool ag_ops_output_inplace(const ag_ops *ops, const ag_graph *g, ag_node_id n, uint32_t o, uint32_t *in_idx)
{
    if (o >= ag_node_num_outputs(g, n))
        return false;
    uint32_t nin = ag_node_num_inputs(g, n);
    const ag_attr *at = ag_attrs_find(ag_node_attrs_c(g, n), "_output_inplace_ability");
    if (at && at->kind == AG_ATTR_INTS) {
        for (uint32_t k = 0; k + 1 < at->count; k += 2) {
            int64_t out = at->v.is[k], in = at->v.is[k + 1];
            if (out >= 0 && (uint64_t)out == o && in >= 0 && (uint64_t)in < nin) {
                if (in_idx)
                    *in_idx = (uint32_t)in;
                return true;
            }
        }
        return false;
    }
    uint32_t in;
    if (!ag_op_info_output_inplace(ag_ops_node_info(ops, g, n), o, &in) || in >= nin)
        return false;
    if (in_idx)
        *in_idx = in;
    return true;
}

bool ag_ops_inplace_hint(const ag_graph *g, ag_node_id n, uint32_t *in_idx)
{
    if (ag_node_num_outputs(g, n) == 0)
        return false;
    const ag_tensor_desc *d = ag_node_output_desc_c(g, n, 0);
    int64_t v;
    if (!d || !ag_attrs_get_int(d->attrs, "_inplace_support_input_index", &v) || v < 0 ||
        (uint64_t)v >= ag_node_num_inputs(g, n))
        return false;
    if (in_idx)
        *in_idx = (uint32_t)v;
    return true;
}

const char *ag_ops_output_ref_var(const ag_graph *g, ag_node_id n, uint32_t o)
{
    if (o >= ag_node_num_outputs(g, n))
        return NULL;
    const ag_tensor_desc *d = ag_node_output_desc_c(g, n, o);
    const char *s;
    return d && ag_attrs_get_string(d->attrs, "ref_var_src_var_name", &s) ? s : NULL;
}
