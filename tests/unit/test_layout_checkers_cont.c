/* Table-driven tests of the continuous, no-padding, special-memory and
 * immutable layout checkers: for every registered row of these families a
 * graph where it isolates an anchor and one where it accepts the sharing,
 * with the pair's anchors in either order of the symbol's list where a graph
 * can give that order; the full checker table runs, a second run adds
 * nothing, and allocation failures are swept. */
#include "support/agtest.h"

#include "passes/layout_internal.h"

#include <stdio.h>

/* ---- the full table, every row wrapped to record its calls ---- */

#define MAX_ROWS 128
#define MAX_CALLS 64

typedef struct call_rec {
    ag_layout_attr attr_a, attr_b;
    bool swapped;
} call_rec;

static call_rec g_calls[MAX_CALLS];
static uint32_t g_ncalls;
static ag_layout_checker_row g_rows[MAX_ROWS];

static ag_status t_wrap(ag_layout_ctx *lc, const ag_lanchor *a, const ag_lanchor *b)
{
    if (g_ncalls < MAX_CALLS)
        g_calls[g_ncalls++] = (call_rec){lc->attr_a, lc->attr_b, lc->swapped};
    for (uint32_t r = 0; r < ag_layout_checker_nrows; r++) {
        const ag_layout_checker_row *row = &ag_layout_checker_rows[r];
        if (row->attr_a == lc->attr_a && row->attr_b == lc->attr_b)
            return row->fn(lc, a, b);
    }
    fail_msg("no row for the call");
    return AG_EINVAL;
}

static void wrap_rows(void)
{
    assert_true(ag_layout_checker_nrows <= MAX_ROWS);
    for (uint32_t r = 0; r < ag_layout_checker_nrows; r++) {
        g_rows[r] = ag_layout_checker_rows[r];
        g_rows[r].fn = t_wrap;
    }
}

/* ---- the cases ---- */

#define LA(x) AG_LA_##x

typedef struct cont_case {
    ag_layout_attr ra, rb; /* the row */
    int swapped;           /* expected lc->swapped of a call of the row */
    const char *body;      /* nodes after x, r, z, w */
    const char *expect;    /* "producer>consumer ..." of the isolations, in order; "" none */
} cont_case;

#define CI "continuous_input = true"
#define NPI "_no_padding_continuous_input = true"
#define CO "continuous_output = true"
#define NPO "_no_padding_continuous_output = true"
#define REUSE "<reuse_input = true>"

/* Rows whose continuous attribute K is an input (CONT_IN or NOPAD_CONT_IN)
 * against special memory. */
#define CIN_RTS_CASES(KA, K)                                                                                      \
    /* (K, RTS_IN): continuous input first, then the other way round */                                          \
    {LA(KA), LA(RTS_IN), 0, "c = CC(r, z) -> (f32[8]) <" K ">\n p = P(r) -> (f32[4]) <_input_memory_type = [1]>\n", \
     "r:0>c:0"},                                                                                                   \
    {LA(KA), LA(RTS_IN), 1, "p = P(r) -> (f32[4]) <_input_memory_type = [1]>\n c = CC(r, z) -> (f32[8]) <" K ">\n", \
     "r:0>c:0"},                                                                                                   \
    {LA(KA), LA(RTS_IN), 0,                                                                                       \
     "c = CC(r, z) -> (f32[8]) <" K ", _input_memory_type = [1, 1]>\n p = P(r) -> (f32[4]) <_input_memory_type = [1]>\n", \
     ""},                                                                                                          \
    {LA(KA), LA(RTS_IN), 1,                                                                                       \
     "p = P(r) -> (f32[4]) <_input_memory_type = [1]>\n c = CC(r, z) -> (f32[8]) <" K ", _input_memory_type = [1, 1]>\n", \
     ""},                                                                                                          \
    /* the continuous node's output is the buffer too: the special input */                                      \
    {LA(KA), LA(RTS_IN), 0,                                                                                       \
     "c = CC(r, z) -> (f32[8] " REUSE ") <" K ">\n p = P(r) -> (f32[4]) <_input_memory_type = [1]>\n", "r:0>p:0"},  \
    /* (K, RTS_OUT): the special output first, then the continuous input first */                                \
    {LA(KA), LA(RTS_OUT), 1, "q = Q(z) -> (f32[4]) <_output_memory_type = [1]>\n c = CC(q, w) -> (f32[8]) <" K ">\n", \
     "q:0>c:0"},                                                                                                   \
    {LA(KA), LA(RTS_OUT), 1,                                                                                      \
     "q = Q(z) -> (f32[4]) <_output_memory_type = [1]>\n"                                                         \
     " c = CC(q, w) -> (f32[8]) <" K ", _input_memory_type = [1, 1]>\n",                                          \
     ""},                                                                                                          \
    {LA(KA), LA(RTS_OUT), 0,                                                                                      \
     "c = CC(r, w) -> (f32[8]) <" K ">\n q = Q(r) -> (f32[4] " REUSE ") <_output_memory_type = [1]>\n", "r:0>c:0"}, \
    {LA(KA), LA(RTS_OUT), 0,                                                                                      \
     "c = CC(r, w) -> (f32[8]) <" K ", _input_memory_type = [1, 1]>\n"                                             \
     " q = Q(r) -> (f32[4] " REUSE ") <_output_memory_type = [1]>\n",                                              \
     ""}

/* Rows whose continuous attribute K is an output (CONT_OUT or
 * NOPAD_CONT_OUT) against special memory. */
#define COUT_RTS_CASES(KA, K)                                                                                     \
    {LA(KA), LA(RTS_IN), 0, "s = SC(r) -> (f32[2], f32[2]) <" K ">\n p = P(s) -> (f32[2]) <_input_memory_type = [1]>\n", \
     "s:0>p:0"},                                                                                                   \
    {LA(KA), LA(RTS_IN), 0,                                                                                       \
     "s = SC(r) -> (f32[2], f32[2]) <" K ", _output_memory_type = [1, 1]>\n"                                       \
     " p = P(s) -> (f32[2]) <_input_memory_type = [1]>\n",                                                         \
     ""},                                                                                                          \
    {LA(KA), LA(RTS_IN), 1,                                                                                       \
     "p = P(r) -> (f32[4]) <_input_memory_type = [1]>\n s = SC(r) -> (f32[2] " REUSE ", f32[2]) <" K ">\n"          \
     " u = Relu(s) -> (f32[2])\n",                                                                                 \
     "s:0>u:0"},                                                                                                   \
    {LA(KA), LA(RTS_IN), 1,                                                                                       \
     "p = P(r) -> (f32[4]) <_input_memory_type = [1]>\n"                                                          \
     " s = SC(r) -> (f32[2] " REUSE ", f32[2]) <" K ", _output_memory_type = [1, 1]>\n u = Relu(s) -> (f32[2])\n",  \
     ""},                                                                                                          \
    {LA(KA), LA(RTS_OUT), 0,                                                                                      \
     "s = SC(r) -> (f32[2], f32[2]) <" K ">\n q = Q(s) -> (f32[2] " REUSE ") <_output_memory_type = [1]>\n",        \
     "s:0>q:0"},                                                                                                   \
    {LA(KA), LA(RTS_OUT), 0,                                                                                      \
     "s = SC(r) -> (f32[2], f32[2]) <" K ", _output_memory_type = [1, 1]>\n"                                       \
     " q = Q(s) -> (f32[2] " REUSE ") <_output_memory_type = [1]>\n",                                              \
     ""},                                                                                                          \
    {LA(KA), LA(RTS_OUT), 1,                                                                                      \
     "q = Q(r) -> (f32[4]) <_output_memory_type = [1]>\n s = SC(q) -> (f32[2] " REUSE ", f32[2]) <" K ">\n"         \
     " u = Relu(s) -> (f32[2])\n",                                                                                 \
     "s:0>u:0"},                                                                                                   \
    {LA(KA), LA(RTS_OUT), 1,                                                                                      \
     "q = Q(r) -> (f32[4]) <_output_memory_type = [1]>\n"                                                         \
     " s = SC(q) -> (f32[2] " REUSE ", f32[2]) <" K ", _output_memory_type = [1, 1]>\n u = Relu(s) -> (f32[2])\n",  \
     ""}

static const cont_case cases[] = {
    /* continuous_input_and_continuous_input: one output feeding two
     * continuous inputs (the second consumer is isolated, whichever is
     * declared first), cascaded continuous inputs, and the same buffer
     * reaching a second continuous node through a view (accepted). */
    {LA(CONT_IN), LA(CONT_IN), 0, "b = CC(r, z) -> (f32[8]) <" CI ">\n a = CC(r, w) -> (f32[8]) <" CI ">\n", "r:0>a:0"},
    {LA(CONT_IN), LA(CONT_IN), 0, "a = CC(r, w) -> (f32[8]) <" CI ">\n b = CC(r, z) -> (f32[8]) <" CI ">\n", "r:0>b:0"},
    {LA(CONT_IN), LA(CONT_IN), 0,
     "c1 = CC(r, z) -> (f32[8] " REUSE ") <" CI ">\n c2 = CC(c1, w) -> (f32[12]) <" CI ">\n", "c1:0>c2:0"},
    {LA(CONT_IN), LA(CONT_IN), 0,
     "a = CC(r, z) -> (f32[8]) <" CI ">\n v = V(r) -> (f32[4] " REUSE ")\n b = CC(v, w) -> (f32[8]) <" CI ">\n", ""},
    {LA(CONT_IN), LA(CONT_IN), 0,
     "v = V(r) -> (f32[4] " REUSE ")\n b = CC(v, w) -> (f32[8]) <" CI ">\n a = CC(r, z) -> (f32[8]) <" CI ">\n", ""},
    {LA(CONT_IN), LA(NOPAD_CONT_IN), 0, "a = CC(r, z) -> (f32[8]) <" CI ">\n p = NP(r, w) -> (f32[8]) <" NPI ">\n",
     "r:0>p:0"},
    {LA(CONT_IN), LA(NOPAD_CONT_IN), 1, "p = NP(r, w) -> (f32[8]) <" NPI ">\n a = CC(r, z) -> (f32[8]) <" CI ">\n",
     "r:0>a:0"},
    {LA(CONT_IN), LA(NOPAD_CONT_IN), 0,
     "a = CC(r, z) -> (f32[8]) <" CI ">\n v = V(r) -> (f32[4] " REUSE ")\n p = NP(v, w) -> (f32[8]) <" NPI ">\n", ""},
    {LA(CONT_IN), LA(NOPAD_CONT_IN), 1,
     "p = NP(r, w) -> (f32[8]) <" NPI ">\n v = V(r) -> (f32[4] " REUSE ")\n a = CC(v, z) -> (f32[8]) <" CI ">\n", ""},

    /* continuous_out_and_continuous_out: a continuous-output node fed by
     * another one (the producer's output is isolated); a view between them
     * is accepted. */
    {LA(CONT_OUT), LA(CONT_OUT), 0,
     "s1 = SC(r) -> (f32[2], f32[2]) <" CO ">\n s2 = SC(s1) -> (f32[1] " REUSE ", f32[1]) <" CO ">\n", "s1:0>s2:0"},
    {LA(CONT_OUT), LA(CONT_OUT), 0,
     "s1 = SC(r) -> (f32[2], f32[2]) <" CO ">\n v = V(s1) -> (f32[2] " REUSE ")\n"
     " s2 = SC(v) -> (f32[1] " REUSE ", f32[1]) <" CO ">\n",
     ""},
    {LA(CONT_OUT), LA(NOPAD_CONT_OUT), 0,
     "s1 = SC(r) -> (f32[2], f32[2]) <" CO ">\n s2 = SN(s1) -> (f32[1], f32[1]) <" NPO ", _output_reuse_input = true>\n",
     "s1:0>s2:0"},
    {LA(CONT_OUT), LA(NOPAD_CONT_OUT), 1,
     "s1 = SN(r) -> (f32[2], f32[2]) <" NPO ">\n s2 = SC(s1) -> (f32[1] " REUSE ", f32[1]) <" CO ">\n", "s1:0>s2:0"},
    {LA(CONT_OUT), LA(NOPAD_CONT_OUT), 0,
     "s1 = SC(r) -> (f32[2], f32[2]) <" CO ">\n v = V(s1) -> (f32[2] " REUSE ")\n"
     " s2 = SN(v) -> (f32[1], f32[1]) <" NPO ", _output_reuse_input = true>\n",
     ""},
    {LA(CONT_OUT), LA(NOPAD_CONT_OUT), 1,
     "s1 = SN(r) -> (f32[2], f32[2]) <" NPO ">\n v = V(s1) -> (f32[2] " REUSE ")\n"
     " s2 = SC(v) -> (f32[1] " REUSE ", f32[1]) <" CO ">\n",
     ""},

    /* continuous_output_and_continuous_input: the concat takes the split's
     * outputs reversed (s:0's symbol isolates the split's output, the first
     * anchor of the pair; then s:1 alone at the concat's head is a partial
     * match) or in order or an aligned part (accepted); with the input first in
     * the symbol the input is isolated.  (The input cannot come first and
     * still take the split's outputs: they come after it.) */
    {LA(CONT_IN), LA(CONT_OUT), 1, "s = SC(r) -> (f32[2], f32[2]) <" CO ">\n c = CC(s:1, s) -> (f32[4]) <" CI ">\n",
     "s:0>c:1"},
    {LA(CONT_IN), LA(CONT_OUT), 1, "s = SC(r) -> (f32[2], f32[2]) <" CO ">\n c = CC(s, s:1) -> (f32[4]) <" CI ">\n", ""},
    {LA(CONT_IN), LA(CONT_OUT), 1,
     "s = SC(r) -> (f32[2], f32[2], f32[2]) <" CO ">\n c = CC(s:1, s:2) -> (f32[4]) <" CI ">\n", ""},
    {LA(CONT_IN), LA(CONT_OUT), 0,
     "c = CC(r, z) -> (f32[8]) <" CI ">\n s = SC(r) -> (f32[2] " REUSE ", f32[2]) <" CO ">\n", "r:0>c:0"},

    /* continuous_in_out_and_rts_special_mem_in_out (8 rows) */
    CIN_RTS_CASES(CONT_IN, CI),
    CIN_RTS_CASES(NOPAD_CONT_IN, NPI),
    COUT_RTS_CASES(CONT_OUT, CO),
    COUT_RTS_CASES(NOPAD_CONT_OUT, NPO),

    /* immutable_out_and_continuous_out: before the continuous node's input
     * (not after the variable); after an Assign the Assign's output.  The
     * checker always isolates and the variable's output always starts the
     * symbol, so there is neither an accepting case nor another order. */
    {LA(IMMUTABLE_OUT), LA(CONT_OUT), 0,
     "v = Variable() -> (f32[4])\n s = SC(v) -> (f32[2] " REUSE ", f32[2]) <" CO ">\n", "v:0>s:0"},
    {LA(IMMUTABLE_OUT), LA(CONT_OUT), 0,
     "v = Variable() -> (f32[4])\n a = Assign(v, r) -> (f32[4])\n s = SC(a) -> (f32[2] " REUSE ", f32[2]) <" CO ">\n",
     "a:0>s:0"},
    {LA(IMMUTABLE_OUT), LA(NOPAD_CONT_OUT), 0,
     "v = Variable() -> (f32[4])\n s = SN(v) -> (f32[2], f32[2]) <" NPO ", _output_reuse_input = true>\n", "v:0>s:0"},

    /* immutable_out_and_nopadding_continuous_in: accepted when every input
     * is the variable itself (in-place slice writers). */
    {LA(IMMUTABLE_OUT), LA(NOPAD_CONT_IN), 0, "v = Variable() -> (f32[4])\n p = NP(v, r) -> (f32[8]) <" NPI ">\n",
     "v:0>p:0"},
    {LA(IMMUTABLE_OUT), LA(NOPAD_CONT_IN), 0,
     "v = Variable() -> (f32[4])\n a1 = SA(v) -> (f32[4] " REUSE ")\n a2 = SA(v) -> (f32[4] " REUSE ")\n"
     " p = NP(a1, a2) -> (f32[8]) <" NPI ">\n",
     ""},

    /* immutable_out_and_rts_specail_out: after the variable, or after the
     * Assign feeding the special node (always isolates). */
    {LA(IMMUTABLE_OUT), LA(RTS_OUT), 0,
     "v = Variable() -> (f32[4])\n q = Q(v) -> (f32[4] " REUSE ") <_output_memory_type = [1]>\n", "v:0>q:0"},
    {LA(IMMUTABLE_OUT), LA(RTS_OUT), 0,
     "v = Variable() -> (f32[4])\n a = Assign(v, r) -> (f32[4])\n"
     " q = Q(a) -> (f32[4] " REUSE ") <_output_memory_type = [1]>\n",
     "a:0>q:0"},

    /* nopadding_continuous_input_and_nopadding_continuous_input: a partial
     * overlap isolates the second consumer of the shared output; a run
     * inside the other is accepted. */
    {LA(NOPAD_CONT_IN), LA(NOPAD_CONT_IN), 0,
     "s = S3(r) -> (f32[1], f32[1], f32[1])\n pa = NP(s, s:1) -> (f32[2]) <" NPI ">\n"
     " pb = NP(s:1, s:2) -> (f32[2]) <" NPI ">\n",
     "s:1>pb:0"},
    {LA(NOPAD_CONT_IN), LA(NOPAD_CONT_IN), 0,
     "s = S3(r) -> (f32[1], f32[1], f32[1])\n pb = NP(s:1, s:2) -> (f32[2]) <" NPI ">\n"
     " pa = NP(s, s:1) -> (f32[2]) <" NPI ">\n",
     "s:1>pa:1"},
    {LA(NOPAD_CONT_IN), LA(NOPAD_CONT_IN), 0,
     "s = S3(r) -> (f32[1], f32[1], f32[1])\n pa = NP(s, s:1, s:2) -> (f32[3]) <" NPI ">\n"
     " pb = NP(s:1, s:2) -> (f32[2]) <" NPI ">\n",
     ""},
    {LA(NOPAD_CONT_IN), LA(NOPAD_CONT_IN), 0,
     "s = S3(r) -> (f32[1], f32[1], f32[1])\n pb = NP(s:1, s:2) -> (f32[2]) <" NPI ">\n"
     " pa = NP(s, s:1, s:2) -> (f32[3]) <" NPI ">\n",
     ""},

    /* nopadding_continuous_input_and_nopadding_continuous_out: a concat
     * feeding the split's input 0 is one block; otherwise the concat's
     * input.  (The output cannot come first with the concat feeding it.) */
    {LA(NOPAD_CONT_IN), LA(NOPAD_CONT_OUT), 1,
     "s = SN(r) -> (f32[2], f32[2]) <" NPO ">\n p = NP(s, z) -> (f32[6]) <" NPI ">\n", "s:0>p:0"},
    {LA(NOPAD_CONT_IN), LA(NOPAD_CONT_OUT), 0,
     "p = NP(r, z) -> (f32[8]) <" NPI ">\n s = SN(r) -> (f32[2], f32[2]) <" NPO ", _output_reuse_input = true>\n",
     "r:0>p:0"},
    {LA(NOPAD_CONT_IN), LA(NOPAD_CONT_OUT), 0,
     "p = NP(r, z) -> (f32[8]) <" NPI ", _output_reuse_input = true>\n"
     " s = SN(p) -> (f32[4], f32[4]) <" NPO ", _output_reuse_input = true>\n",
     ""},

    /* nopadding_continuous_out_and_nopadding_continuous_out */
    {LA(NOPAD_CONT_OUT), LA(NOPAD_CONT_OUT), 0,
     "s1 = SN(r) -> (f32[2], f32[2]) <" NPO ">\n s2 = SN(s1) -> (f32[1], f32[1]) <" NPO ", _output_reuse_input = true>\n",
     "s1:0>s2:0"},
    {LA(NOPAD_CONT_OUT), LA(NOPAD_CONT_OUT), 0,
     "s1 = SN(r) -> (f32[2], f32[2]) <" NPO ">\n v = V(s1) -> (f32[2] " REUSE ")\n"
     " s2 = SN(v) -> (f32[1], f32[1]) <" NPO ", _output_reuse_input = true>\n",
     ""},

    /* rts_special_in_and_rts_special_in: the input of the node first in the
     * topological order, unless its output is the buffer. */
    {LA(RTS_IN), LA(RTS_IN), 0,
     "pa = P(r) -> (f32[4]) <_input_memory_type = [1]>\n pb = P(r) -> (f32[4]) <_input_memory_type = [2]>\n", "r:0>pa:0"},
    {LA(RTS_IN), LA(RTS_IN), 0,
     "pb = P(r) -> (f32[4]) <_input_memory_type = [2]>\n pa = P(r) -> (f32[4]) <_input_memory_type = [1]>\n", "r:0>pb:0"},
    {LA(RTS_IN), LA(RTS_IN), 0,
     "pa = P(r) -> (f32[4] " REUSE ") <_input_memory_type = [1]>\n pb = P(r) -> (f32[4]) <_input_memory_type = [2]>\n",
     "r:0>pb:0"},
    {LA(RTS_IN), LA(RTS_IN), 0,
     "pa = P(r) -> (f32[4]) <_input_memory_type = [1]>\n pb = P(r) -> (f32[4]) <_input_memory_type = [1]>\n", ""},

    /* rts_special_in_and_rts_special_out: the output, in either order */
    {LA(RTS_IN), LA(RTS_OUT), 1,
     "q = Q(z) -> (f32[4]) <_output_memory_type = [1]>\n p = P(q) -> (f32[4]) <_input_memory_type = [2]>\n", "q:0>p:0"},
    {LA(RTS_IN), LA(RTS_OUT), 1,
     "q = Q(z) -> (f32[4]) <_output_memory_type = [1]>\n p = P(q) -> (f32[4]) <_input_memory_type = [1]>\n", ""},
    {LA(RTS_IN), LA(RTS_OUT), 0,
     "p = P(r) -> (f32[4]) <_input_memory_type = [2]>\n q = Q(r) -> (f32[4] " REUSE ") <_output_memory_type = [1]>\n"
     " u = Relu(q) -> (f32[4])\n",
     "q:0>u:0"},
    {LA(RTS_IN), LA(RTS_OUT), 0,
     "p = P(r) -> (f32[4]) <_input_memory_type = [1]>\n q = Q(r) -> (f32[4] " REUSE ") <_output_memory_type = [1]>\n"
     " u = Relu(q) -> (f32[4])\n",
     ""},

    /* rts_special_out_and_rts_special_out: the output of the earlier node */
    {LA(RTS_OUT), LA(RTS_OUT), 0,
     "q1 = Q(z) -> (f32[4]) <_output_memory_type = [1]>\n"
     " q2 = Q(q1) -> (f32[4] " REUSE ") <_output_memory_type = [2]>\n u = Relu(q2) -> (f32[4])\n",
     "q1:0>q2:0"},
    {LA(RTS_OUT), LA(RTS_OUT), 0,
     "q1 = Q(z) -> (f32[4]) <_output_memory_type = [1]>\n"
     " q2 = Q(q1) -> (f32[4] " REUSE ") <_output_memory_type = [1]>\n u = Relu(q2) -> (f32[4])\n",
     ""},
};

#define NCASES (sizeof cases / sizeof cases[0])

static char *case_text(const cont_case *c)
{
    static const char head[] = "graph g {\n"
                               " x = Data() -> (f32[4]) <index = 0>\n"
                               " r = Relu(x) -> (f32[4])\n"
                               " z = Relu(x) -> (f32[4])\n"
                               " w = Relu(x) -> (f32[4])\n";
    size_t n = sizeof head + strlen(c->body) + 8;
    char *t = malloc(n);
    assert_non_null(t);
    snprintf(t, n, "%s %s}\n", head, c->body);
    return t;
}

static const ag_layout_info default_info = {true, false, false, true};

static bool row_called(const cont_case *c, int swapped)
{
    for (uint32_t k = 0; k < g_ncalls; k++)
        if (g_calls[k].attr_a == c->ra && g_calls[k].attr_b == c->rb && (int)g_calls[k].swapped == swapped)
            return true;
    return false;
}

static void run_case(size_t idx)
{
    const cont_case *c = &cases[idx];
    char *text = case_text(c);
    ag_ctx *ctx = agtest_ctx();
    ag_graph *g = NULL;
    ag_ops *ops = NULL;
    ag_report *rep = NULL;
    if (ag_text_read(ctx, text, strlen(text), "case.agt", &g) != AG_OK)
        fail_msg("case %zu: parse: %s", idx, ag_ctx_errmsg(ctx));
    assert_int_equal(ag_ops_create(ctx, &ops), AG_OK);
    assert_int_equal(ag_report_create(ctx, &rep), AG_OK);
    ag_pass_env env = {g, ops, rep};
    g_ncalls = 0;
    if (ag_layout_process(&env, AG_ROOT, &default_info, g_rows, ag_layout_checker_nrows) != AG_OK)
        fail_msg("case %zu: layout: %s", idx, ag_ctx_errmsg(ctx));
    assert_int_equal(ag_graph_verify(g), AG_OK);
    if (!row_called(c, c->swapped))
        fail_msg("case %zu: row (%s, %s) not called with swapped=%d", idx, ag_layout_attr_name(c->ra),
                 ag_layout_attr_name(c->rb), c->swapped);

    /* The isolations, in order, against the expectation. */
    char got[512] = "";
    size_t len = 0;
    uint32_t niso = ag_report_isolation_count(rep);
    for (uint32_t k = 0; k < niso; k++) {
        const ag_isolation *iso = ag_report_isolation_at(rep, k);
        len += (size_t)snprintf(got + len, sizeof got - len, "%s%s>%s", k ? " " : "", iso->producer, iso->consumer);
        assert_true(len < sizeof got);
        /* Each isolation names the row's checker and a real Identity. */
        char rule[160];
        const ag_layout_checker_row *row = NULL;
        for (uint32_t r = 0; r < ag_layout_checker_nrows; r++)
            if (ag_layout_checker_rows[r].attr_a == c->ra && ag_layout_checker_rows[r].attr_b == c->rb)
                row = &ag_layout_checker_rows[r];
        assert_non_null(row);
        snprintf(rule, sizeof rule, "layout: %s", row->name);
        if (strcmp(iso->rule, rule) != 0)
            fail_msg("case %zu: isolation %u rule \"%s\", expected \"%s\"", idx, k, iso->rule, rule);
        ag_node_id id = agtest_find(g, AG_ROOT, iso->node);
        assert_string_equal(ag_node_type(g, id), "Identity");
    }
    if (strcmp(got, c->expect) != 0)
        fail_msg("case %zu (%s x %s): isolations \"%s\", expected \"%s\"", idx, ag_layout_attr_name(c->ra),
                 ag_layout_attr_name(c->rb), got, c->expect);
    /* The consumer of each isolation now reads the Identity. */
    for (uint32_t k = 0; k < niso; k++) {
        const ag_isolation *iso = ag_report_isolation_at(rep, k);
        char cname[64];
        unsigned ci;
        const char *colon = strrchr(iso->consumer, ':');
        assert_non_null(colon);
        snprintf(cname, sizeof cname, "%.*s", (int)(colon - iso->consumer), iso->consumer);
        ci = (unsigned)atoi(colon + 1);
        ag_port p = ag_node_input_src(g, agtest_find(g, AG_ROOT, cname), ci);
        assert_string_equal(ag_node_name(g, p.node), iso->node);
    }

    /* A second run inserts nothing. */
    uint32_t before = ag_graph_node_count(g);
    if (ag_layout_process(&env, AG_ROOT, &default_info, g_rows, ag_layout_checker_nrows) != AG_OK)
        fail_msg("case %zu: second run: %s", idx, ag_ctx_errmsg(ctx));
    assert_int_equal(ag_report_isolation_count(rep), niso);
    assert_int_equal(ag_graph_node_count(g), before);

    ag_report_destroy(rep);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    ag_ctx_destroy(ctx);
    free(text);
}

static void test_cases(void **state)
{
    (void)state;
    wrap_rows();
    for (size_t k = 0; k < NCASES; k++)
        run_case(k);
}

/* Every row of these families has a firing and an accepting case (except
 * the two immutable checkers that always isolate) and, where a graph can
 * give it, cases in both orders. */
static void test_coverage(void **state)
{
    (void)state;
    static const char *const fams[] = {"continuous_input_and_continuous_input",
                                       "continuous_out_and_continuous_out",
                                       "continuous_output_and_continuous_input",
                                       "continuous_in_out_and_rts_special_mem_in_out",
                                       "immutable_out_and_continuous_out",
                                       "immutable_out_and_nopadding_continuous_in",
                                       "immutable_out_and_rts_specail_out",
                                       "nopadding_continuous_input_and_nopadding_continuous_input",
                                       "nopadding_continuous_input_and_nopadding_continuous_out",
                                       "nopadding_continuous_out_and_nopadding_continuous_out",
                                       "rts_special_in_and_rts_special_in",
                                       "rts_special_in_and_rts_special_out",
                                       "rts_special_out_and_rts_special_out"};
    uint32_t nrows = 0;
    for (uint32_t r = 0; r < ag_layout_checker_nrows; r++) {
        const ag_layout_checker_row *row = &ag_layout_checker_rows[r];
        bool mine = false;
        for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++)
            mine = mine || strcmp(row->name, fams[f]) == 0;
        if (!mine)
            continue;
        nrows++;
        bool fire = false, accept = false;
        for (size_t k = 0; k < NCASES; k++) {
            if (cases[k].ra != row->attr_a || cases[k].rb != row->attr_b)
                continue;
            fire = fire || cases[k].expect[0] != '\0';
            accept = accept || cases[k].expect[0] == '\0';
        }
        if (!fire)
            fail_msg("row %s (%s, %s) has no firing case", row->name, ag_layout_attr_name(row->attr_a),
                     ag_layout_attr_name(row->attr_b));
        bool always = row->attr_a == AG_LA_IMMUTABLE_OUT &&
                      (row->attr_b == AG_LA_CONT_OUT || row->attr_b == AG_LA_NOPAD_CONT_OUT || row->attr_b == AG_LA_RTS_OUT);
        if (!accept && !always)
            fail_msg("row %s (%s, %s) has no accepting case", row->name, ag_layout_attr_name(row->attr_a),
                     ag_layout_attr_name(row->attr_b));
    }
    assert_int_equal(nrows, 23);
}

/* Allocation failures in the checkers: a graph where several of them
 * isolate. */
static const char *oom_graph = "graph g {\n"
                               " x = Data() -> (f32[4]) <index = 0>\n"
                               " r = Relu(x) -> (f32[4])\n"
                               " z = Relu(x) -> (f32[4])\n"
                               " s = SC(r) -> (f32[2], f32[2]) <continuous_output = true>\n"
                               " c = CC(s:1, s) -> (f32[4]) <continuous_input = true>\n"
                               " a = CC(z, r) -> (f32[8]) <continuous_input = true>\n"
                               " b = CC(z, r) -> (f32[8]) <continuous_input = true>\n"
                               " t = S3(r) -> (f32[1], f32[1], f32[1])\n"
                               " pa = NP(t, t:1) -> (f32[2]) <_no_padding_continuous_input = true>\n"
                               " pb = NP(t:1, t:2) -> (f32[2]) <_no_padding_continuous_input = true>\n"
                               " q1 = Q(z) -> (f32[4]) <_output_memory_type = [1]>\n"
                               " q2 = Q(q1) -> (f32[4] <reuse_input = true>) <_output_memory_type = [2]>\n"
                               " u = Relu(q2) -> (f32[4])\n"
                               "}\n";

static ag_status oom_body(ag_ctx *ctx, void *ud)
{
    (void)ud;
    ag_graph *g = NULL;
    ag_ops *ops = NULL;
    ag_report *rep = NULL;
    ag_status st = agtest_pass_inputs(ctx, oom_graph, &g, &ops, &rep);
    if (st == AG_OK) {
        ag_pass_env env = {g, ops, rep};
        st = ag_pass_run(&env, "layout_conflict");
        if (st == AG_OK)
            assert_int_equal(ag_report_isolation_count(rep), 5);
    }
    ag_report_destroy(rep);
    ag_ops_destroy(ops);
    ag_graph_destroy(g);
    return st;
}

static void test_oom(void **state)
{
    (void)state;
    assert_true(AG_TEST_OOM_SWEEP(oom_body, NULL) > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_coverage),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
