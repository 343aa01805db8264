/* Fuzz target of the ops-file loader: any bytes must either be rejected with
 * a "fuzz.ops:line:col:" message leaving the registry exactly as it was, or
 * load into entries whose dump loads back into an identical dump.  Each input
 * is also loaded under allocation failures at a few points; nothing may leak. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aliasguard/aliasguard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *dump(ag_ctx *ctx, const ag_ops *ops)
{
    ag_membuf mb;
    ag_membuf_init(&mb, ctx);
    if (ag_ops_dump(ops, ag_sink_membuf(&mb)) != AG_OK) {
        ag_membuf_free(&mb);
        return NULL;
    }
    char *out = malloc(mb.len + 1);
    if (!out)
        abort();
    memcpy(out, mb.data ? mb.data : "", mb.len);
    out[mb.len] = 0;
    ag_membuf_free(&mb);
    return out;
}

/* Touches every query of every current entry (sanitizers watch the reads). */
static unsigned query_all(const ag_ops *ops)
{
    unsigned h = 0;
    for (uint32_t k = 0; k < ag_ops_count(ops); k++) {
        const ag_op_info *e = ag_ops_at(ops, k);
        h += ag_op_info_kind(e) + ag_op_info_flags(e);
        if (ag_ops_lookup(ops, ag_op_info_type(e), ag_op_info_domain(e)) == NULL &&
            ag_op_info_domain(e) == NULL)
            abort(); /* a current any-domain entry is found by its type */
        for (uint32_t i = 0; i < 5; i++) {
            uint32_t in = 0;
            bool ex;
            h += ag_op_info_input_access(e, i) + ag_op_info_input_flags(e, i);
            h += ag_op_info_input_mem_type(e, i, &ex) + ag_op_info_output_mem_type(e, i, &ex);
            h += ag_op_info_output_rel(e, i, &in) + in + ag_op_info_output_flags(e, i);
            h += ag_op_info_output_inplace(e, i, &in);
        }
    }
    return h;
}

static void check_plain(const uint8_t *data, size_t size)
{
    ag_ctx *ctx = ag_ctx_create(NULL);
    ag_ops *ops = NULL;
    if (!ctx || ag_ops_create(ctx, &ops) != AG_OK)
        abort();
    char *before = dump(ctx, ops);
    if (!before)
        abort();
    ag_status st = ag_ops_load_text(ops, (const char *)data, size, "fuzz.ops");
    char *after = dump(ctx, ops);
    if (!after)
        abort();
    if (st != AG_OK) {
        if (st != AG_EPARSE || strncmp(ag_ctx_errmsg(ctx), "fuzz.ops:", 9) != 0) {
            fprintf(stderr, "fuzz_ops: bad failure %d: %s\n", (int)st, ag_ctx_errmsg(ctx));
            abort();
        }
        if (strcmp(before, after) != 0) {
            fprintf(stderr, "fuzz_ops: a failed load changed the registry\n");
            abort();
        }
    } else {
        (void)query_all(ops);
        ag_ops *again = NULL;
        if (ag_ops_create(ctx, &again) != AG_OK)
            abort();
        if (ag_ops_load_text(again, after, strlen(after), "dump.ops") != AG_OK) {
            fprintf(stderr, "fuzz_ops: the dump does not load: %s\n%s", ag_ctx_errmsg(ctx), after);
            abort();
        }
        char *second = dump(ctx, again);
        if (!second || strcmp(after, second) != 0) {
            fprintf(stderr, "fuzz_ops: dump of the dump differs\n");
            abort();
        }
        free(second);
        ag_ops_destroy(again);
    }
    free(before);
    free(after);
    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
}

static void check_oom(const uint8_t *data, size_t size, uint64_t k)
{
    ag_testalloc ta;
    ag_testalloc_init(&ta, 0, 0);
    ag_allocator hook = ag_testalloc_hook(&ta);
    ag_ctx *ctx = ag_ctx_create(&hook);
    ag_ops *ops = NULL;
    if (!ctx || ag_ops_create(ctx, &ops) != AG_OK)
        abort();
    uint32_t count = ag_ops_count(ops);
    ta.fail_at = ta.calls + k;
    ag_status st = ag_ops_load_text(ops, (const char *)data, size, "fuzz.ops");
    ta.fail_at = 0;
    if (st != AG_OK && st != AG_ENOMEM && st != AG_EPARSE)
        abort();
    if (st != AG_OK && ag_ops_count(ops) != count)
        abort();
    (void)query_all(ops);
    ag_ops_destroy(ops);
    ag_ctx_destroy(ctx);
    if (ta.live_blocks != 0) {
        fprintf(stderr, "fuzz_ops: %llu blocks leaked with failure at +%llu\n",
                (unsigned long long)ta.live_blocks, (unsigned long long)k);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_plain(data, size);
    static const uint64_t points[] = {1, 2, 3, 5, 8, 13, 40};
    for (size_t k = 0; k < sizeof points / sizeof points[0]; k++)
        check_oom(data, size, points[k]);
    return 0;
}
