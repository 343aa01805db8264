/* aliasguard info: a summary of a graph — node count, subgraphs and their
 * nesting depth, op-type histogram, tensor bytes per memory type (known
 * output sizes), and the tensors whose shape stayed unknown after inference.
 * Text for people, --json for scripts; --stats adds load/inference times. */
#define _XOPEN_SOURCE 700

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <jansson.h>

#include "cli.h"

/* ---- op-type histogram: open addressing over the graph's type strings ---- */

typedef struct op_count {
    const char *type; /* owned by the graph */
    uint64_t count;
    bool unknown;     /* some node of this type is not in the op registry */
} op_count;

typedef struct op_hist {
    op_count *slots;
    size_t cap; /* power of two */
    size_t len;
} op_hist;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* Counts one node of this type; returns its slot, NULL when out of memory. */
static op_count *hist_add(op_hist *h, const char *type)
{
    if ((h->len + 1) * 2 > h->cap) {
        size_t ncap = h->cap ? h->cap * 2 : 64;
        op_count *ns = calloc(ncap, sizeof *ns);
        if (!ns)
            return NULL;
        for (size_t k = 0; k < h->cap; k++) {
            if (!h->slots[k].type)
                continue;
            size_t j = (size_t)hash_str(h->slots[k].type) & (ncap - 1);
            while (ns[j].type)
                j = (j + 1) & (ncap - 1);
            ns[j] = h->slots[k];
        }
        free(h->slots);
        h->slots = ns;
        h->cap = ncap;
    }
    size_t j = (size_t)hash_str(type) & (h->cap - 1);
    while (h->slots[j].type && strcmp(h->slots[j].type, type) != 0)
        j = (j + 1) & (h->cap - 1);
    if (!h->slots[j].type) {
        h->slots[j].type = type;
        h->len++;
    }
    h->slots[j].count++;
    return &h->slots[j];
}

/* Most frequent first, then by name, so the output is stable. */
static int cmp_count(const void *pa, const void *pb)
{
    const op_count *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return strcmp(a->type, b->type);
}

/* Packs the used slots to the front and sorts them; returns their number. */
static size_t hist_sorted(op_hist *h)
{
    size_t n = 0;
    for (size_t k = 0; k < h->cap; k++)
        if (h->slots[k].type)
            h->slots[n++] = h->slots[k];
    if (n > 1)
        qsort(h->slots, n, sizeof *h->slots, cmp_count);
    return n;
}

/* ---- the summary ---- */

typedef struct unknown_out {
    ag_node_id node;
    uint32_t out;
} unknown_out;

typedef struct summary {
    const ag_graph *g;
    uint32_t max_depth;
    op_hist hist;
    size_t n_types;
    uint64_t bytes[AG_MEM_COUNT_];
    uint64_t outputs;       /* output anchors over all live nodes */
    uint64_t outputs_sized; /* ... whose byte size is known */
    uint64_t kinds[AG_OPK_COUNT_]; /* nodes per op-registry kind */
    uint32_t n_ops_files;          /* --ops files loaded on top of the builtin table */
    unknown_out *unknown;
    size_t n_unknown, cap_unknown;
    uint32_t n_untaken; /* unknown outputs in branches that cannot run (not listed) */
    bool oom;
} summary;

static void collect_unknown(void *ud, ag_node_id n, uint32_t o)
{
    summary *s = ud;
    if (s->oom)
        return;
    if (s->n_unknown == s->cap_unknown) {
        size_t ncap = s->cap_unknown ? s->cap_unknown * 2 : 64;
        unknown_out *nu = realloc(s->unknown, ncap * sizeof *nu);
        if (!nu) {
            s->oom = true;
            return;
        }
        s->unknown = nu;
        s->cap_unknown = ncap;
    }
    s->unknown[s->n_unknown].node = n;
    s->unknown[s->n_unknown].out = o;
    s->n_unknown++;
}

static void count_untaken(void *ud, ag_node_id n, uint32_t o)
{
    (void)n;
    (void)o;
    ++*(uint32_t *)ud;
}

static bool summarize(const ag_graph *g, const ag_ops *ops, summary *s, uint32_t n_ops_files)
{
    memset(s, 0, sizeof *s);
    s->g = g;
    s->n_ops_files = n_ops_files;
    uint32_t nsub = ag_graph_sub_count(g);
    for (ag_sub_id sub = 0; sub < nsub; sub++) {
        if (!ag_sub_alive(g, sub))
            continue;
        uint32_t d = ag_sub_depth(g, sub);
        if (d > s->max_depth)
            s->max_depth = d;
        uint32_t nn = ag_sub_node_count(g, sub);
        for (uint32_t k = 0; k < nn; k++) {
            ag_node_id n = ag_sub_node_at(g, sub, k);
            op_count *slot = hist_add(&s->hist, ag_node_type(g, n));
            if (!slot)
                return false;
            ag_op_kind kind = ag_ops_node_kind(ops, g, n);
            if ((unsigned)kind < AG_OPK_COUNT_)
                s->kinds[kind]++;
            if (kind == AG_OPK_UNKNOWN)
                slot->unknown = true;
            uint32_t nout = ag_node_num_outputs(g, n);
            for (uint32_t o = 0; o < nout; o++) {
                const ag_tensor_desc *desc = ag_node_output_desc_c(g, n, o);
                uint64_t b = ag_desc_size_bytes(desc);
                s->outputs++;
                if (b == AG_SIZE_UNKNOWN || (unsigned)desc->mem_type >= AG_MEM_COUNT_)
                    continue;
                s->outputs_sized++;
                uint64_t *acc = &s->bytes[desc->mem_type];
                *acc = b > UINT64_MAX - *acc ? UINT64_MAX : *acc + b;
            }
        }
    }
    s->n_types = hist_sorted(&s->hist);
    ag_infer_each_unknown(g, collect_unknown, s);
    ag_infer_each_unknown_untaken(g, count_untaken, &s->n_untaken);
    return !s->oom;
}

static void summary_free(summary *s)
{
    free(s->hist.slots);
    free(s->unknown);
}

/* ---- text output ---- */

/* Prints a node as "name" in the root and "subgraph/name" elsewhere, so that
 * equal names in different subgraphs stay apart. */
static void print_node_ref(FILE *f, const ag_graph *g, ag_node_id n)
{
    ag_sub_id sub = ag_node_owner(g, n);
    if (sub != AG_ROOT)
        fprintf(f, "%s/", ag_sub_name(g, sub));
    fputs(ag_node_name(g, n), f);
}

static void print_bytes(FILE *f, uint64_t b)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)b;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    fprintf(f, "%llu", (unsigned long long)b);
    if (u > 0)
        fprintf(f, " (%.1f %s)", v, units[u]);
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
    return ru.ru_maxrss; /* KiB on Linux */
}

typedef struct info_opts {
    const char *input;
    uint64_t limit; /* list at most this many subgraphs / unknown tensors; 0 = all */
    bool json;
    bool stats;
} info_opts;

static void print_text(FILE *f, const info_opts *io, const cli_load_info *li, const summary *s)
{
    const ag_graph *g = s->g;
    uint64_t limit = io->limit ? io->limit : UINT64_MAX;
    fprintf(f, "input: %s (%s)\n", io->input, cli_format_name(li->format));
    fprintf(f, "graph: %s\n", ag_sub_name(g, AG_ROOT));
    if (li->have_onnx) {
        fprintf(f, "onnx: ir_version %lld, opset %lld, declared shapes used %u, mismatches %u\n",
                (long long)li->onnx.ir_version, (long long)li->onnx.opset, li->onnx.declared_filled,
                li->onnx.declared_mismatches);
        if (li->onnx.first_mismatch[0])
            fprintf(f, "  first mismatch: %s\n", li->onnx.first_mismatch);
    }
    fprintf(f, "nodes: %u\n", ag_graph_node_count(g));

    uint32_t nsub = ag_graph_sub_count(g), alive = 0;
    for (ag_sub_id sub = 0; sub < nsub; sub++)
        alive += ag_sub_alive(g, sub);
    fprintf(f, "subgraphs: %u (max depth %u)\n", alive, s->max_depth);
    uint64_t shown = 0;
    for (ag_sub_id sub = 0; sub < nsub; sub++) {
        if (!ag_sub_alive(g, sub))
            continue;
        if (shown++ == limit) {
            fprintf(f, "  ... %llu more (--limit 0 lists all)\n", (unsigned long long)(alive - limit));
            break;
        }
        fprintf(f, "  %s: depth %u, %u nodes", ag_sub_name(g, sub), ag_sub_depth(g, sub),
                ag_sub_node_count(g, sub));
        ag_node_id parent = ag_sub_parent(g, sub);
        if (parent != AG_NONE) {
            fputs(", parent ", f);
            print_node_ref(f, g, parent);
            fprintf(f, " (%s)", ag_node_type(g, parent));
        }
        fputc('\n', f);
    }

    fprintf(f, "ops: %zu types\n", s->n_types);
    for (size_t k = 0; k < s->n_types; k++)
        fprintf(f, "  %-24s %llu\n", s->hist.slots[k].type, (unsigned long long)s->hist.slots[k].count);

    fprintf(f, "op kinds: builtin table");
    if (s->n_ops_files)
        fprintf(f, " + %u ops file%s", s->n_ops_files, s->n_ops_files > 1 ? "s" : "");
    fputc('\n', f);
    for (int k = 0; k < AG_OPK_COUNT_; k++)
        if (s->kinds[k])
            fprintf(f, "  %-24s %llu\n", ag_op_kind_name((ag_op_kind)k), (unsigned long long)s->kinds[k]);
    if (s->kinds[AG_OPK_UNKNOWN]) {
        fputs("  types not in the registry:", f);
        for (size_t k = 0; k < s->n_types; k++)
            if (s->hist.slots[k].unknown)
                fprintf(f, " %s", s->hist.slots[k].type);
        fputc('\n', f);
    }

    fprintf(f, "tensor bytes: %llu of %llu outputs sized\n", (unsigned long long)s->outputs_sized,
            (unsigned long long)s->outputs);
    for (int mt = 0; mt < AG_MEM_COUNT_; mt++) {
        fprintf(f, "  %-6s ", ag_mem_type_name((ag_mem_type)mt));
        print_bytes(f, s->bytes[mt]);
        fputc('\n', f);
    }

    if (li->inferred)
        fprintf(f, "inference: %u nodes visited, %u without a rule\n", li->infer.nodes, li->infer.no_rule);
    else
        fputs("inference: not run\n", f);
    fprintf(f, "unknown shapes: %zu\n", s->n_unknown);
    for (size_t k = 0; k < s->n_unknown; k++) {
        if (k == limit) {
            fprintf(f, "  ... %llu more (--limit 0 lists all)\n", (unsigned long long)(s->n_unknown - limit));
            break;
        }
        const ag_tensor_desc *d = ag_node_output_desc_c(g, s->unknown[k].node, s->unknown[k].out);
        fputs("  ", f);
        print_node_ref(f, g, s->unknown[k].node);
        fprintf(f, ":%u %s\n", s->unknown[k].out, d->name && d->name[0] ? d->name : "-");
    }
    if (s->n_untaken)
        fprintf(f, "unknown in branches not taken: %u\n", s->n_untaken);
    if (io->stats) {
        fprintf(f, "stats: load %.3f ms", li->load_ms);
        if (li->infer_ms >= 0)
            fprintf(f, ", infer %.3f ms", li->infer_ms);
        else if (li->inferred)
            fputs(" (inference included)", f);
        fprintf(f, ", peak rss %ld KiB\n", peak_rss_kib());
    }
}

/* ---- JSON output ---- */

/* Length of the valid UTF-8 sequence at p (n bytes left), 0 if invalid
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (len > n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t j = 2; j < len; j++)
        if ((p[j] & 0xc0) != 0x80)
            return 0;
    return len;
}

/* JSON strings must be UTF-8 and graph names need not be (ONNX names are raw
 * bytes, which jansson refuses), so invalid bytes become '?'.  NULL on OOM. */
static json_t *jstr(const char *str)
{
    if (!str)
        str = "";
    size_t n = strlen(str), k = 0, len;
    const unsigned char *p = (const unsigned char *)str;
    while (k < n && (len = utf8_seq(p + k, n - k)) != 0)
        k += len;
    if (k == n)
        return json_stringn(str, n);
    char *clean = malloc(n + 1);
    if (!clean)
        return NULL;
    memcpy(clean, str, k);
    while (k < n) {
        len = utf8_seq(p + k, n - k);
        if (len == 0) {
            clean[k++] = '?';
            continue;
        }
        memcpy(clean + k, str + k, len);
        k += len;
    }
    json_t *j = json_stringn(clean, n);
    free(clean);
    return j;
}

static json_t *jint(uint64_t v)
{
    return json_integer(v > (uint64_t)LLONG_MAX ? (json_int_t)LLONG_MAX : (json_int_t)v);
}

/* Each part is checked as it is added: a constructor returns NULL and a setter
 * -1 when memory runs out (set_new/append_new release val then), and *ok
 * records the first failure. */
static bool jset(json_t *obj, const char *key, json_t *val, bool *ok)
{
    if (!val || json_object_set_new(obj, key, val) != 0)
        *ok = false;
    return *ok;
}

static bool jpush(json_t *arr, json_t *val, bool *ok)
{
    if (!val || json_array_append_new(arr, val) != 0)
        *ok = false;
    return *ok;
}

/* {"subgraph", "node", "type"} naming node n; NULL on OOM. */
static json_t *jnode_ref(const ag_graph *g, ag_node_id n)
{
    bool ok = true;
    json_t *o = json_object();
    if (!o)
        return NULL;
    jset(o, "subgraph", jstr(ag_sub_name(g, ag_node_owner(g, n))), &ok);
    jset(o, "node", jstr(ag_node_name(g, n)), &ok);
    jset(o, "type", jstr(ag_node_type(g, n)), &ok);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static bool print_json(FILE *f, const info_opts *io, const cli_load_info *li, const summary *s)
{
    const ag_graph *g = s->g;
    bool ok = true;
    json_t *root = json_object();
    if (!root)
        goto oom;
    jset(root, "input", jstr(io->input), &ok);
    jset(root, "format", jstr(cli_format_name(li->format)), &ok);
    jset(root, "graph", jstr(ag_sub_name(g, AG_ROOT)), &ok);
    if (li->have_onnx) {
        json_t *on = json_object();
        jset(root, "onnx", on, &ok);
        if (ok) {
            jset(on, "ir_version", json_integer(li->onnx.ir_version), &ok);
            jset(on, "opset", json_integer(li->onnx.opset), &ok);
            jset(on, "declared_filled", jint(li->onnx.declared_filled), &ok);
            jset(on, "declared_mismatches", jint(li->onnx.declared_mismatches), &ok);
            jset(on, "first_mismatch", jstr(li->onnx.first_mismatch), &ok);
        }
    }
    jset(root, "nodes", jint(ag_graph_node_count(g)), &ok);
    jset(root, "max_depth", jint(s->max_depth), &ok);

    json_t *subs = json_array();
    jset(root, "subgraphs", subs, &ok);
    uint32_t nsub = ag_graph_sub_count(g);
    for (ag_sub_id sub = 0; ok && sub < nsub; sub++) {
        if (!ag_sub_alive(g, sub))
            continue;
        json_t *o = json_object();
        if (!jpush(subs, o, &ok))
            break;
        jset(o, "name", jstr(ag_sub_name(g, sub)), &ok);
        jset(o, "depth", jint(ag_sub_depth(g, sub)), &ok);
        jset(o, "nodes", jint(ag_sub_node_count(g, sub)), &ok);
        ag_node_id parent = ag_sub_parent(g, sub);
        jset(o, "parent", parent == AG_NONE ? json_null() : jnode_ref(g, parent), &ok);
    }

    json_t *ops = json_object();
    jset(root, "ops", ops, &ok);
    for (size_t k = 0; ok && k < s->n_types; k++) {
        /* Keys must be UTF-8 too; two types equal after sanitizing share a key. */
        json_t *key = jstr(s->hist.slots[k].type);
        if (!key) {
            ok = false;
            break;
        }
        const char *ks = json_string_value(key);
        json_t *prev = json_object_get(ops, ks);
        uint64_t c = s->hist.slots[k].count + (prev ? (uint64_t)json_integer_value(prev) : 0);
        jset(ops, ks, jint(c), &ok);
        json_decref(key);
    }

    json_t *kinds = json_object();
    jset(root, "op_kinds", kinds, &ok);
    for (int k = 0; ok && k < AG_OPK_COUNT_; k++)
        if (s->kinds[k])
            jset(kinds, ag_op_kind_name((ag_op_kind)k), jint(s->kinds[k]), &ok);
    json_t *unk_types = json_array();
    jset(root, "unknown_types", unk_types, &ok);
    for (size_t k = 0; ok && k < s->n_types; k++)
        if (s->hist.slots[k].unknown)
            jpush(unk_types, jstr(s->hist.slots[k].type), &ok);
    jset(root, "ops_files", jint(s->n_ops_files), &ok);
    json_t *tb = json_object();
    jset(root, "tensor_bytes", tb, &ok);
    for (int mt = 0; ok && mt < AG_MEM_COUNT_; mt++)
        jset(tb, ag_mem_type_name((ag_mem_type)mt), jint(s->bytes[mt]), &ok);
    jset(root, "outputs", jint(s->outputs), &ok);
    jset(root, "outputs_sized", jint(s->outputs_sized), &ok);

    if (li->inferred) {
        json_t *inf = json_object();
        jset(root, "inference", inf, &ok);
        if (ok) {
            jset(inf, "nodes", jint(li->infer.nodes), &ok);
            jset(inf, "no_rule", jint(li->infer.no_rule), &ok);
        }
    } else {
        jset(root, "inference", json_null(), &ok);
    }

    json_t *unk = json_object(), *list = json_array();
    jset(root, "unknown_shapes", unk, &ok);
    if (ok) {
        jset(unk, "count", jint(s->n_unknown), &ok);
        jset(unk, "tensors", list, &ok);
        jset(unk, "untaken", jint(s->n_untaken), &ok);
    } else {
        json_decref(list);
    }
    for (size_t k = 0; ok && k < s->n_unknown; k++) {
        const ag_tensor_desc *d = ag_node_output_desc_c(g, s->unknown[k].node, s->unknown[k].out);
        json_t *o = jnode_ref(g, s->unknown[k].node);
        if (!jpush(list, o, &ok))
            break;
        jset(o, "output", jint(s->unknown[k].out), &ok);
        jset(o, "name", jstr(d->name ? d->name : ""), &ok);
    }

    if (io->stats) {
        json_t *st = json_object();
        jset(root, "stats", st, &ok);
        if (ok) {
            jset(st, "load_ms", json_real(li->load_ms), &ok);
            jset(st, "infer_ms", li->infer_ms >= 0 ? json_real(li->infer_ms) : json_null(), &ok);
            jset(st, "peak_rss_kib", json_integer(peak_rss_kib()), &ok);
        }
    }
    if (!ok)
        goto oom;
    if (json_dumpf(root, f, JSON_INDENT(2)) != 0 || fputc('\n', f) == EOF) {
        json_decref(root);
        cli_err("writing standard output failed");
        return false;
    }
    json_decref(root);
    return true;
oom:
    json_decref(root);
    cli_err("%s: out of memory while building the JSON output", io->input);
    return false;
}

/* ---- the command ---- */

void cmd_info_help(FILE *f)
{
    fputs("usage: aliasguard info [options] INPUT\n"
          "\n"
          "Summarises INPUT (an ONNX model or a .agt file, '-' for standard input):\n"
          "node count, subgraphs with their nesting depth and parent node, the op-type\n"
          "histogram, node counts per op-registry kind (with the types the registry\n"
          "does not know), tensor bytes per memory type (the sum of the output sizes\n"
          "that are known), and the outputs whose shape or dtype stayed unknown, each\n"
          "as 'node:output value-name' ('subgraph/node' outside the root).  Unknown\n"
          "outputs inside the branches of an If or Case whose condition is known\n"
          "(--input-value) and that are not taken cannot occur for these inputs: they\n"
          "are counted apart, as 'unknown in branches not taken'.\n"
          "\n"
          "Options:\n"
          "  --json                   print one JSON object instead of text\n"
          "  --limit N                list at most N subgraphs and unknown tensors in the\n"
          "                           text output (default 20; 0 lists all; JSON lists all)\n"
          "  --stats                  also report load and inference times and peak memory\n"
          "  -h, --help               show this help\n",
          f);
    cli_help_load_opts(f);
}

static int info_option(cli_args *a, void *state)
{
    info_opts *io = state;
    const char *v;
    int r;
    if (cli_opt_flag(a, "--json", NULL)) {
        io->json = true;
        return 1;
    }
    if (cli_opt_flag(a, "--stats", NULL)) {
        io->stats = true;
        return 1;
    }
    if ((r = cli_opt_value(a, "--limit", NULL, &v)) != 0)
        return r < 0 || !cli_parse_u64(a->cmd, "--limit", v, &io->limit) ? -1 : 1;
    return 0;
}

static int info_run(ag_ctx *ctx, ag_graph *g, cli_load_info *li, const char *input, const char *output,
                    const cli_load_opts *lo, void *state)
{
    (void)output;
    info_opts *io = state;
    io->input = input;
    int rc = CLI_EXIT_USAGE;
    /* Kinds come from the registry: the builtin table, plus --ops files. */
    ag_status st = li->ops ? AG_OK : ag_ops_create(ctx, &li->ops);
    summary s;
    memset(&s, 0, sizeof s);
    if (st != AG_OK) {
        cli_err_ctx(ctx, st, "operator registry");
    } else if (summarize(g, li->ops, &s, lo->n_ops_files)) {
        bool ok = true;
        if (io->json)
            ok = print_json(stdout, io, li, &s);
        else
            print_text(stdout, io, li, &s);
        if (cli_close_output(stdout, NULL, ok))
            rc = CLI_EXIT_OK;
    } else {
        cli_err("%s: out of memory while summarising", input);
    }
    summary_free(&s);
    return rc;
}

int cmd_info(int argc, char **argv)
{
    static const cli_graph_cmd cmd = {"info", cmd_info_help, info_option, info_run, false};
    info_opts io = {NULL, 20, false, false};
    return cli_graph_command(&cmd, &io, argc, argv);
}
