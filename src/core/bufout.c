/* Buffered output to an ag_sink, shared by the writers (text IR, DOT) so
 * that each prints through small calls without a sink call per token. */
#include "core/internal.h"

void ag_bufout_init(ag_bufout *b, ag_sink sink)
{
    b->sink = sink;
    b->st = AG_OK;
    b->len = 0;
}

ag_status ag_bufout_flush(ag_bufout *b)
{
    if (b->st == AG_OK && b->len > 0)
        b->st = b->sink.write(b->sink.ud, b->buf, b->len);
    b->len = 0;
    return b->st;
}

void ag_bufout_put(ag_bufout *b, const void *data, size_t n)
{
    const char *s = data;
    while (n > 0 && b->st == AG_OK) {
        if (b->len == sizeof b->buf)
            ag_bufout_flush(b);
        size_t k = sizeof b->buf - b->len;
        if (k > n)
            k = n;
        memcpy(b->buf + b->len, s, k);
        b->len += k;
        s += k;
        n -= k;
    }
}

void ag_bufout_puts(ag_bufout *b, const char *s)
{
    ag_bufout_put(b, s, strlen(s));
}
