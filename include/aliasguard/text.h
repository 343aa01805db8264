/* The text IR (.agt): reader and writer.  Format: docs/ir.md.  Printing a
 * parsed file and parsing the print again gives the same graph, and the second
 * print is byte-identical to the first. */
#ifndef ALIASGUARD_TEXT_H
#define ALIASGUARD_TEXT_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parses .agt text.  filename is used in "file:line:col: message" errors
 * (ag_ctx_errmsg); the buffer need not be NUL-terminated. */
ag_status ag_text_read(ag_ctx *ctx, const char *buf, size_t len, const char *filename, ag_graph **out);
/* Reads and parses a file ("-" is standard input). */
ag_status ag_text_read_file(ag_ctx *ctx, const char *path, ag_graph **out);

typedef struct ag_text_write_opts {
    size_t size;          /* sizeof(ag_text_write_opts) */
    uint64_t elide_bytes; /* tensor values larger than this print as elided
                             (dtype, dims, digest); UINT64_MAX: never elide */
} ag_text_write_opts;

/* Default options: elide values over 4096 bytes. */
ag_text_write_opts ag_text_write_defaults(void);
/* Prints g to sink; opts may be NULL for the defaults. */
ag_status ag_text_write(const ag_graph *g, const ag_text_write_opts *opts, ag_sink sink);

#ifdef __cplusplus
}
#endif
#endif
