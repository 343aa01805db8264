/* Acceptance over real models: the npm model corpus (bench/corpus.json,
 * fetched by scripts/fetch-corpus) is imported with its manifest input shapes
 * and values and must infer completely (unknowns inside branches that cannot
 * run for those values are reported, not counted) and round-trip through the
 * text IR; every
 * /usr/share/libonnx-testdata model is imported and each refusal must be an
 * AG_EUNSUPPORTED naming the value or node.  A summary (refusals by reason,
 * models whose inferred shapes disagree with the declared ones) is written to
 * <build>/corpus-summary.txt.  Skips when the data is absent. */
#define _POSIX_C_SOURCE 200809L
#include "support/agtest.h"

#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#define TESTDATA "/usr/share/libonnx-testdata/data"

/* ---- a minimal JSON reader for the manifest ---- */

typedef enum { J_NULL, J_NUM, J_STR, J_ARR, J_OBJ, J_BOOL } jkind;
typedef struct jval {
    jkind kind;
    double num;
    char *str;            /* J_STR */
    struct jval *items;   /* J_ARR / J_OBJ values */
    char **keys;          /* J_OBJ keys */
    size_t n;
} jval;

static const char *jws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    return p;
}

static const char *jparse(const char *p, jval *out);

static const char *jstring(const char *p, char **out)
{
    if (*p != '"')
        return NULL;
    p++;
    size_t cap = 64, n = 0;
    char *s = malloc(cap);
    while (*p && *p != '"') {
        char c = *p++;
        if (c == '\\') {
            c = *p++;
            if (c == 'n')
                c = '\n';
            else if (c == 't')
                c = '\t';
            else if (c == 'u') { /* manifest is ASCII; keep the escape as '?' */
                for (int k = 0; k < 4 && *p; k++)
                    p++;
                c = '?';
            }
        }
        if (n + 2 > cap)
            s = realloc(s, cap *= 2);
        s[n++] = c;
    }
    if (*p != '"') {
        free(s);
        return NULL;
    }
    s[n] = '\0';
    *out = s;
    return p + 1;
}

static const char *jparse(const char *p, jval *out)
{
    memset(out, 0, sizeof *out);
    p = jws(p);
    if (*p == '"') {
        out->kind = J_STR;
        return jstring(p, &out->str);
    }
    if (*p == '{' || *p == '[') {
        bool obj = *p == '{';
        char close = obj ? '}' : ']';
        out->kind = obj ? J_OBJ : J_ARR;
        p = jws(p + 1);
        size_t cap = 0;
        while (*p && *p != close) {
            if (out->n == cap) {
                cap = cap ? 2 * cap : 8;
                out->items = realloc(out->items, cap * sizeof *out->items);
                out->keys = realloc(out->keys, cap * sizeof *out->keys);
            }
            out->keys[out->n] = NULL;
            if (obj) {
                p = jstring(p, &out->keys[out->n]);
                if (!p)
                    return NULL;
                p = jws(p);
                if (*p++ != ':')
                    return NULL;
            }
            p = jparse(p, &out->items[out->n]);
            if (!p)
                return NULL;
            out->n++;
            p = jws(p);
            if (*p == ',')
                p = jws(p + 1);
        }
        return *p == close ? p + 1 : NULL;
    }
    if (strncmp(p, "true", 4) == 0 || strncmp(p, "false", 5) == 0) {
        out->kind = J_BOOL;
        out->num = *p == 't';
        return p + (*p == 't' ? 4 : 5);
    }
    if (strncmp(p, "null", 4) == 0)
        return p + 4;
    char *end;
    out->num = strtod(p, &end);
    out->kind = J_NUM;
    return end == p ? NULL : end;
}

static void jfree(jval *v)
{
    for (size_t k = 0; k < v->n; k++) {
        jfree(&v->items[k]);
        free(v->keys[k]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
}

static const jval *jget(const jval *o, const char *key)
{
    if (o->kind != J_OBJ)
        return NULL;
    for (size_t k = 0; k < o->n; k++)
        if (strcmp(o->keys[k], key) == 0)
            return &o->items[k];
    return NULL;
}

/* ---- corpus ---- */

static const char *corpus_dir(char *buf, size_t cap)
{
    const char *env = getenv("AG_CORPUS_DIR");
    if (env && *env)
        snprintf(buf, cap, "%s", env);
    else
        snprintf(buf, cap, "%s/.cache/aliasguard/corpus", getenv("HOME") ? getenv("HOME") : ".");
    return buf;
}

static bool is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static ag_status print_agt(const ag_graph *g, ag_membuf *mb)
{
    ag_membuf_init(mb, ag_graph_ctx(g));
    return ag_text_write(g, NULL, ag_sink_membuf(mb));
}

static void report_unknown(void *ud, ag_node_id n, uint32_t o)
{
    void **u = ud;
    const ag_graph *g = u[0];
    unsigned *shown = u[1];
    if ((*shown)++ < 3)
        printf("    unknown: node %s (%s) output %u\n", ag_node_name(g, n), ag_node_type(g, n), o);
}

static void test_corpus_models(void **state)
{
    (void)state;
    char dir[1024], path[1400], manifest_path[1024];
    corpus_dir(dir, sizeof dir);
    if (!is_dir(dir)) {
        printf("corpus directory %s missing (run scripts/fetch-corpus): skipped\n", dir);
        skip();
    }
    snprintf(manifest_path, sizeof manifest_path, "%s/bench/corpus.json", AG_SOURCE_DIR);
    char *text = agtest_read_file(manifest_path, NULL);
    jval man;
    assert_non_null(jparse(text, &man));
    free(text);
    const jval *models = jget(&man, "models");
    assert_non_null(models);
    assert_int_equal(models->kind, J_ARR);

    ag_ctx *ctx = agtest_ctx();
    unsigned imported = 0, with_unknown = 0, missing = 0;
    double slowest = 0;
    const char *slowest_id = "";
    for (size_t m = 0; m < models->n; m++) {
        const jval *e = &models->items[m];
        const char *id = jget(e, "id")->str;
        snprintf(path, sizeof path, "%s/%s.onnx", dir, id);
        struct stat sb;
        if (stat(path, &sb) != 0) {
            printf("  %-20s not in the cache (run scripts/fetch-corpus)\n", id);
            missing++;
            continue;
        }
        /* --input-shape and --input-value bindings from the manifest */
        const jval *inputs = jget(e, "inputs");
        char bind_store[16][256], value_store[16][64];
        const char *binds[16], *values[16];
        uint32_t nb = 0, nv = 0;
        for (size_t k = 0; inputs && k < inputs->n && nb < 16; k++) {
            const jval *dims = jget(&inputs->items[k], "dims");
            int w = snprintf(bind_store[nb], sizeof bind_store[nb], "%s=", inputs->keys[k]);
            for (size_t d = 0; dims && d < dims->n; d++)
                w += snprintf(bind_store[nb] + w, sizeof bind_store[nb] - (size_t)w, "%s%lld", d ? "," : "",
                              (long long)dims->items[d].num);
            binds[nb] = bind_store[nb];
            nb++;
            const jval *v = jget(&inputs->items[k], "value");
            if (v && v->kind == J_NUM) {
                /* %.17g prints integral numbers without a fraction, as integer inputs need */
                snprintf(value_store[nv], sizeof value_store[nv], "%s=%.17g", inputs->keys[k], v->num);
                values[nv] = value_store[nv];
                nv++;
            }
        }
        ag_onnx_opts o = ag_onnx_defaults();
        ag_onnx_report rep;
        o.report = &rep;
        o.input_shapes = binds;
        o.n_input_shapes = nb;
        o.input_values = values;
        o.n_input_values = nv;
        ag_graph *g = NULL;
        double t0 = now_ms();
        ag_status st = ag_onnx_import_file(ctx, path, &o, &g);
        double ms = now_ms() - t0;
        if (st != AG_OK)
            fail_msg("%s: import failed: %s: %s", id, ag_status_str(st), ag_ctx_errmsg(ctx));
        imported++;
        if (ms > slowest) {
            slowest = ms;
            slowest_id = id;
        }
        printf("  %-20s %7.1f ms %5u nodes %3u subgraphs, %u unknown tensors (+%u in branches not taken), %u "
               "declared mismatches\n",
               id, ms, ag_graph_node_count(g), ag_graph_sub_count(g), rep.infer.unknown_tensors,
               rep.infer.unknown_untaken, rep.declared_mismatches);
        if (rep.infer.unknown_tensors) {
            unsigned shown = 0;
            void *ud[2] = {g, &shown};
            ag_infer_each_unknown(g, report_unknown, ud);
            with_unknown++;
        }
        /* text IR round trip: print, read, equal, print again byte-identical */
        ag_membuf a, b;
        assert_int_equal(print_agt(g, &a), AG_OK);
        ag_graph *g2 = NULL;
        st = ag_text_read(ctx, a.data, a.len, id, &g2);
        if (st != AG_OK)
            fail_msg("%s: printed .agt does not parse: %s", id, ag_ctx_errmsg(ctx));
        assert_graph_equal(g, g2);
        assert_int_equal(print_agt(g2, &b), AG_OK);
        assert_int_equal(a.len, b.len);
        assert_memory_equal(a.data, b.data, a.len);
        ag_membuf_free(&b);
        /* Inference on the printed graph (bound values and _taken_branch
         * included) finds the same and changes nothing: it is idempotent. */
        ag_infer_stats again = {sizeof again, 0, 0, 0, 0};
        st = ag_infer_shapes(g2, &again);
        if (st != AG_OK)
            fail_msg("%s: inference on the printed .agt failed: %s", id, ag_ctx_errmsg(ctx));
        assert_int_equal(again.unknown_tensors, rep.infer.unknown_tensors);
        assert_int_equal(again.unknown_untaken, rep.infer.unknown_untaken);
        assert_int_equal(print_agt(g2, &b), AG_OK);
        if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0)
            fail_msg("%s: a second inference run changed the printed graph", id);
        ag_membuf_free(&a);
        ag_membuf_free(&b);
        ag_graph_destroy(g2);
        ag_graph_destroy(g);
    }
    printf("corpus: %u imported, %u missing, %u with unknown tensors; slowest import %s (%.1f ms)\n", imported,
           missing, with_unknown, slowest_id, slowest);
    ag_ctx_destroy(ctx);
    jfree(&man);
    /* every model of the corpus has fully static input shapes in the manifest */
    assert_int_equal(with_unknown, 0);
}

/* ---- libonnx-testdata ---- */

typedef struct reason {
    char key[200];
    unsigned count;
    char example[300];
} reason;

typedef struct sweep {
    ag_ctx *ctx;
    unsigned loaded, refused;
    reason reasons[64];
    unsigned nreasons;
    char **bad;            /* failures of any other kind */
    unsigned nbad;
    char **mismatch;       /* node tests whose declared shapes disagree with inference */
    unsigned nmismatch;
    unsigned long long total_mismatches;
} sweep;

/* A reason with quoted names and the file prefix removed. */
static void reason_key(const char *msg, char *out, size_t cap)
{
    const char *p = strstr(msg, ".onnx: ");
    p = p ? p + 7 : msg;
    size_t n = 0;
    bool quoted = false;
    for (; *p && n + 2 < cap; p++) {
        if (*p == '\'') {
            quoted = !quoted;
            if (quoted)
                out[n++] = '_';
            continue;
        }
        if (!quoted)
            out[n++] = *p;
    }
    out[n] = '\0';
}

static void add_str(char ***list, unsigned *n, const char *s)
{
    *list = realloc(*list, (*n + 1) * sizeof **list);
    (*list)[*n] = strdup(s);
    ++*n;
}

static void import_one(sweep *sw, const char *path)
{
    ag_onnx_opts o = ag_onnx_defaults();
    ag_onnx_report rep;
    o.report = &rep;
    ag_graph *g = NULL;
    ag_status st = ag_onnx_import_file(sw->ctx, path, &o, &g);
    const char *rel = path + strlen(TESTDATA) + 1;
    if (st == AG_OK) {
        sw->loaded++;
        if (rep.declared_mismatches && strncmp(rel, "node/", 5) == 0) {
            char line[700];
            snprintf(line, sizeof line, "%s: %u (%s)", rel, rep.declared_mismatches, rep.first_mismatch);
            add_str(&sw->mismatch, &sw->nmismatch, line);
            sw->total_mismatches += rep.declared_mismatches;
        }
        ag_graph_destroy(g);
        return;
    }
    const char *msg = ag_ctx_errmsg(sw->ctx);
    if (st != AG_EUNSUPPORTED || !strchr(msg, '\'')) {
        char line[900];
        snprintf(line, sizeof line, "%s: %s: %s", rel, ag_status_str(st), msg);
        add_str(&sw->bad, &sw->nbad, line);
        return;
    }
    sw->refused++;
    char key[200];
    reason_key(msg, key, sizeof key);
    unsigned k = 0;
    while (k < sw->nreasons && strcmp(sw->reasons[k].key, key) != 0)
        k++;
    if (k == sw->nreasons && k < 64) {
        snprintf(sw->reasons[k].key, sizeof sw->reasons[k].key, "%s", key);
        snprintf(sw->reasons[k].example, sizeof sw->reasons[k].example, "%s", rel);
        sw->nreasons++;
    }
    if (k < 64)
        sw->reasons[k].count++;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Collects every model.onnx under dir (sorted, for a stable summary). */
static void collect(const char *dir, char ***list, unsigned *n)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char sub[2048];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        if (is_dir(sub))
            collect(sub, list, n);
        else if (strcmp(e->d_name, "model.onnx") == 0)
            add_str(list, n, sub);
    }
    closedir(d);
}

static void test_testdata(void **state)
{
    (void)state;
    if (!is_dir(TESTDATA)) {
        printf("%s missing (Debian libonnx-testdata): skipped\n", TESTDATA);
        skip();
    }
    char **files = NULL;
    unsigned nfiles = 0;
    collect(TESTDATA, &files, &nfiles);
    qsort(files, nfiles, sizeof *files, cmp_str);
    sweep *sw = calloc(1, sizeof *sw);
    sw->ctx = agtest_ctx();
    double t0 = now_ms();
    for (unsigned k = 0; k < nfiles; k++)
        import_one(sw, files[k]);
    double ms = now_ms() - t0;

    char sum_path[1024];
    snprintf(sum_path, sizeof sum_path, "%s/corpus-summary.txt", AG_BINARY_DIR);
    FILE *f = fopen(sum_path, "w");
    assert_non_null(f);
    FILE *outs[2] = {stdout, f};
    for (int o = 0; o < 2; o++) {
        FILE *out = outs[o];
        fprintf(out, "libonnx-testdata: %u models, %u loaded, %u refused, %u failed otherwise (%.0f ms)\n", nfiles,
                sw->loaded, sw->refused, sw->nbad, ms);
        fprintf(out, "refusals by reason:\n");
        for (unsigned k = 0; k < sw->nreasons; k++)
            fprintf(out, "  %4u  %s  (e.g. %s)\n", sw->reasons[k].count, sw->reasons[k].key,
                    sw->reasons[k].example);
        fprintf(out, "node tests whose inferred shapes disagree with the declared ones: %u models, %llu anchors\n",
                sw->nmismatch, sw->total_mismatches);
        for (unsigned k = 0; k < sw->nmismatch; k++)
            fprintf(out, "  %s\n", sw->mismatch[k]);
        if (sw->nbad) {
            fprintf(out, "failures other than a refusal:\n");
            for (unsigned k = 0; k < sw->nbad; k++)
                fprintf(out, "  %s\n", sw->bad[k]);
        }
    }
    fclose(f);
    unsigned nbad = sw->nbad, loaded = sw->loaded, refused = sw->refused;
    for (unsigned k = 0; k < sw->nbad; k++)
        free(sw->bad[k]);
    for (unsigned k = 0; k < sw->nmismatch; k++)
        free(sw->mismatch[k]);
    for (unsigned k = 0; k < nfiles; k++)
        free(files[k]);
    free(files);
    free(sw->bad);
    free(sw->mismatch);
    ag_ctx_destroy(sw->ctx);
    free(sw);
    assert_int_equal(nbad, 0);
    assert_int_equal(loaded + refused, nfiles);
    assert_true(loaded > refused);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_models),
        cmocka_unit_test(test_testdata),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
