/* Growable arrays and the string map used across the IR and passes.  Both
 * allocate through the context hook and report failure without a message, so
 * callers decide what to say. */
#include <xxhash.h>

#include "core/internal.h"

uint64_t ag_hash_bytes(const void *p, size_t n)
{
    return (uint64_t)XXH3_64bits(p, n);
}

ag_status ag_vec_reserve(ag_ctx *ctx, ag_vec *v, size_t elem, uint32_t n)
{
    if (n <= v->cap - v->len)
        return AG_OK;
    uint64_t want = (uint64_t)v->len + n;
    if (want > UINT32_MAX)
        return AG_ENOMEM;
    uint64_t cap = v->cap ? v->cap : 4;
    while (cap < want)
        cap *= 2;
    if (cap > UINT32_MAX)
        cap = UINT32_MAX;
    if (cap > SIZE_MAX / elem)
        return AG_ENOMEM;
    void *d = ag_realloc(ctx, v->data, (size_t)v->cap * elem, (size_t)cap * elem);
    if (!d)
        return AG_ENOMEM;
    v->data = d;
    v->cap = (uint32_t)cap;
    return AG_OK;
}

void *ag_realloc_double(ag_ctx *ctx, void *data, uint32_t *cap, size_t elem, uint32_t first)
{
    uint64_t nc = *cap ? (uint64_t)*cap * 2u : first;
    if (nc > UINT32_MAX || nc > SIZE_MAX / elem)
        return NULL;
    void *d = ag_realloc(ctx, data, (size_t)*cap * elem, (size_t)nc * elem);
    if (d)
        *cap = (uint32_t)nc;
    return d;
}

ag_status ag_vec_push(ag_ctx *ctx, ag_vec *v, size_t elem, const void *item)
{
    if (v->len == v->cap && ag_vec_reserve(ctx, v, elem, 1) != AG_OK)
        return AG_ENOMEM;
    memcpy((char *)v->data + (size_t)v->len * elem, item, elem);
    v->len++;
    return AG_OK;
}

void ag_vec_free(ag_ctx *ctx, ag_vec *v, size_t elem)
{
    if (v->data)
        ag_free(ctx, v->data, (size_t)v->cap * elem);
    v->data = NULL;
    v->len = v->cap = 0;
}

/* ---- string map: open addressing with linear probing and tombstones ---- */

struct ag_strmap_slot {
    const char *key; /* NULL empty; AG_STRMAP_TOMB deleted */
    uint64_t hash;
    uint32_t value;
};

static const char ag_strmap_tomb_[1];
#define AG_STRMAP_TOMB ag_strmap_tomb_

void ag_strmap_init(ag_strmap *m)
{
    m->slots = NULL;
    m->cap = 0;
    m->count = 0;
}

void ag_strmap_free(ag_ctx *ctx, ag_strmap *m)
{
    if (m->slots)
        ag_free(ctx, m->slots, (size_t)m->cap * sizeof *m->slots);
    ag_strmap_init(m);
}

static uint64_t strhash(const char *s)
{
    return ag_hash_bytes(s, strlen(s));
}

static struct ag_strmap_slot *find_slot(const ag_strmap *m, const char *key, uint64_t h)
{
    if (!m->cap)
        return NULL;
    uint32_t mask = m->cap - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        struct ag_strmap_slot *s = &m->slots[i];
        if (!s->key)
            return NULL;
        if (s->key != AG_STRMAP_TOMB && s->hash == h && strcmp(s->key, key) == 0)
            return s;
    }
}

static ag_status grow(ag_ctx *ctx, ag_strmap *m)
{
    uint32_t ncap = m->cap ? m->cap * 2 : 16;
    if (ncap == 0)
        return AG_ENOMEM;
    struct ag_strmap_slot *ns = ag_calloc(ctx, ncap, sizeof *ns);
    if (!ns)
        return AG_ENOMEM;
    uint32_t count = 0;
    for (uint32_t i = 0; i < m->cap; i++) {
        struct ag_strmap_slot *s = &m->slots[i];
        if (!s->key || s->key == AG_STRMAP_TOMB)
            continue;
        uint32_t j = (uint32_t)s->hash & (ncap - 1);
        while (ns[j].key)
            j = (j + 1) & (ncap - 1);
        ns[j] = *s;
        count++;
    }
    if (m->slots)
        ag_free(ctx, m->slots, (size_t)m->cap * sizeof *m->slots);
    m->slots = ns;
    m->cap = ncap;
    m->count = count;
    return AG_OK;
}

ag_status ag_strmap_put(ag_ctx *ctx, ag_strmap *m, const char *key, uint32_t value)
{
    uint64_t h = strhash(key);
    struct ag_strmap_slot *s = find_slot(m, key, h);
    if (s) {
        s->value = value;
        return AG_OK;
    }
    /* count includes tombstones so probing always terminates. */
    if ((uint64_t)(m->count + 1) * 4 > (uint64_t)m->cap * 3 && grow(ctx, m) != AG_OK)
        return AG_ENOMEM;
    uint32_t mask = m->cap - 1;
    uint32_t i = (uint32_t)h & mask;
    while (m->slots[i].key && m->slots[i].key != AG_STRMAP_TOMB)
        i = (i + 1) & mask;
    if (!m->slots[i].key)
        m->count++;
    m->slots[i].key = key;
    m->slots[i].hash = h;
    m->slots[i].value = value;
    return AG_OK;
}

bool ag_strmap_get(const ag_strmap *m, const char *key, uint32_t *value)
{
    struct ag_strmap_slot *s = find_slot(m, key, strhash(key));
    if (!s)
        return false;
    if (value)
        *value = s->value;
    return true;
}

bool ag_strmap_del(ag_strmap *m, const char *key)
{
    struct ag_strmap_slot *s = find_slot(m, key, strhash(key));
    if (!s)
        return false;
    s->key = AG_STRMAP_TOMB;
    return true;
}
