/* Bump allocation for the graph's lifetime (names, shapes, attribute values):
 * nothing is freed one by one; ag_arena_reset returns every chunk at once. */
#include "core/internal.h"

struct ag_arena_chunk {
    ag_arena_chunk *next;
    size_t size; /* payload bytes after the header */
    _Alignas(16) unsigned char data[];
};

#define AG_ARENA_CHUNK 65536

void ag_arena_init(ag_arena *a, ag_ctx *ctx)
{
    a->ctx = ctx;
    a->head = NULL;
    a->used = 0;
    a->total = 0;
}

void *ag_arena_alloc(ag_arena *a, size_t size)
{
    size_t need = (size + 15) & ~(size_t)15;
    if (need < size)
        return NULL;
    if (need == 0)
        need = 16;
    if (!a->head || a->used + need > a->head->size) {
        size_t payload = need > AG_ARENA_CHUNK / 4 ? need : AG_ARENA_CHUNK;
        if (payload > SIZE_MAX - sizeof(ag_arena_chunk))
            return NULL;
        ag_arena_chunk *c = ag_alloc(a->ctx, sizeof *c + payload);
        if (!c)
            return NULL;
        c->size = payload;
        a->total += sizeof *c + payload;
        if (a->head && payload != AG_ARENA_CHUNK) {
            /* A large block gets its own chunk behind the current head, so the
             * head's free space is not wasted. */
            c->next = a->head->next;
            a->head->next = c;
            memset(c->data, 0, need);
            return c->data;
        }
        c->next = a->head;
        a->head = c;
        a->used = 0;
    }
    void *p = a->head->data + a->used;
    a->used += need;
    memset(p, 0, need);
    return p;
}

void *ag_arena_memdup(ag_arena *a, const void *p, size_t size)
{
    void *d = ag_arena_alloc(a, size);
    if (d && size)
        memcpy(d, p, size);
    return d;
}

char *ag_arena_strndup(ag_arena *a, const char *s, size_t n)
{
    char *d = ag_arena_alloc(a, n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

char *ag_arena_strdup(ag_arena *a, const char *s)
{
    return ag_arena_strndup(a, s, strlen(s));
}

void ag_arena_reset(ag_arena *a)
{
    ag_arena_chunk *c = a->head;
    while (c) {
        ag_arena_chunk *next = c->next;
        ag_free(a->ctx, c, sizeof *c + c->size);
        c = next;
    }
    a->head = NULL;
    a->used = 0;
    a->total = 0;
}
