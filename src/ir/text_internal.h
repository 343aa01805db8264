/* Pieces shared by the text IR reader (text_read.c) and writer
 * (text_write.c): the lexical rules that decide when a name needs quotes, and
 * the limits the format imposes.  Grammar and rationale: docs/ir.md. */
#ifndef AG_TEXT_INTERNAL_H
#define AG_TEXT_INTERNAL_H

#include "core/internal.h"

/* Deepest subgraph nesting the reader accepts (the parser recurses once per
 * level, so this bounds its stack use). */
#define AG_TEXT_MAX_DEPTH 64

/* Characters of a bare (unquoted) name: [A-Za-z_][A-Za-z0-9_./]* */
static inline bool ag_text_name_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static inline bool ag_text_name_char(unsigned char c)
{
    return ag_text_name_start(c) || (c >= '0' && c <= '9') || c == '.' || c == '/';
}

#endif
