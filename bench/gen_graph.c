/* Synthetic .agt generator for the import/inference benchmark (bench/run.sh).
 * Writes a graph of exactly N nodes with the mix of a convolutional network:
 * residual Conv/Relu/Add blocks (branch and join), classifier heads whose
 * Reshape is fed by a Shape -> Gather -> Concat chain, weights as elided
 * constants, small shape constants written out, a few control edges, and an
 * If with two subgraphs every so often.  With --conflicts it also writes what
 * the compile passes act on: an in-place collective (HcomAllReduce with
 * _input_mutable) on a shared activation every few blocks, and a While whose
 * body holds an If (subgraphs two levels deep) every so often.  With --lint
 * it writes the lint benchmark instead: blocks of ten small nodes, each with
 * one output shared by a writer (Assign) and a reader, ordered by a control
 * edge in two blocks of three and racing in the third, plus one variable
 * written and read every few dozen blocks across the whole graph (ordered
 * through the main chain): a tenth of all outputs have several consumers.
 * With --train it writes a training step of N nodes: a chain of layers
 * reading one weight each, the loss, the gradients back through the chain,
 * and per layer an Assign updating the weight after its last read (a control
 * edge), so each weight is read early, read again late and written last.
 * usage: gen_graph N [SEED] [--conflicts | --lint | --train] > out.agt */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shape of the activations flowing through the blocks. */
#define ACT "f32[1,64,28,28]"

enum {
    BLOCK_NODES = 9,   /* w1 b1 conv1 relu1 w2 b2 conv2 add relu */
    HEAD_NODES = 10,   /* shape idx gather m1 concat reshape wfc mm bfc addfc */
    IF_NODES = 7,      /* if + (data, op, netoutput) in each branch */
    HEAD_EVERY = 10,   /* a head after every 10th block */
    IF_EVERY = 25,     /* an If after every 25th block */
    CTRL_EVERY = 7,    /* a control edge into every 7th block */
    HCCL_NODES = 1,    /* allreduce */
    HCCL_EVERY = 5,    /* --conflicts: an in-place allreduce after every 5th block */
    WHILE_NODES = 22,  /* zero lim while + cond (5) + body (14) */
    WHILE_EVERY = 50,  /* --conflicts: a While with a nested If after every 50th block */
};

typedef struct gen {
    FILE *f;
    uint64_t rng;
    uint64_t left;     /* nodes still to write, NetOutput included */
    uint64_t blocks, heads, ifs, fill, hccls, whiles;
    char h[32];        /* name of the node holding the current activation */
    char prev_relu[32];
} gen;

static uint64_t next_digest(gen *g)
{
    /* splitmix64: deterministic digests for the elided weights */
    uint64_t z = (g->rng += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void weight(gen *g, const char *name, const char *type)
{
    fprintf(g->f, "  %s = Const() -> (%s = elided 0x%016" PRIx64 ")\n", name, type, next_digest(g));
}

static void block(gen *g)
{
    uint64_t k = g->blocks++;
    FILE *f = g->f;
    char ctrl[48] = "";
    if (k % CTRL_EVERY == CTRL_EVERY - 1 && g->prev_relu[0])
        snprintf(ctrl, sizeof ctrl, ", ^%s", g->prev_relu);
    fprintf(f, "  # residual block %" PRIu64 "\n", k);
    char w[32], b[32];
    snprintf(w, sizeof w, "w%" PRIu64 "a", k);
    snprintf(b, sizeof b, "b%" PRIu64 "a", k);
    weight(g, w, "f32[64,64,3,3]");
    weight(g, b, "f32[64]");
    fprintf(f, "  conv%" PRIu64 "a = Conv(%s, %s, %s%s) -> (?) <kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1]>\n",
            k, g->h, w, b, ctrl);
    fprintf(f, "  relu%" PRIu64 "a = Relu(conv%" PRIu64 "a) -> (?)\n", k, k);
    snprintf(w, sizeof w, "w%" PRIu64 "b", k);
    snprintf(b, sizeof b, "b%" PRIu64 "b", k);
    weight(g, w, "f32[64,64,3,3]");
    weight(g, b, "f32[64]");
    fprintf(f, "  conv%" PRIu64 "b = Conv(relu%" PRIu64 "a, %s, %s) -> (?) <kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1]>\n",
            k, k, w, b);
    fprintf(f, "  add%" PRIu64 " = Add(conv%" PRIu64 "b, %s) -> (?)\n", k, k, g->h);
    fprintf(f, "  relu%" PRIu64 " = Relu(add%" PRIu64 ") -> (?)\n", k, k);
    snprintf(g->h, sizeof g->h, "relu%" PRIu64, k);
    snprintf(g->prev_relu, sizeof g->prev_relu, "relu%" PRIu64 "a", k);
    g->left -= BLOCK_NODES;
}

/* Flatten by Reshape(h, Concat(Gather(Shape(h), [0]), [-1])), then a dense layer. */
static void head(gen *g)
{
    uint64_t k = g->heads++;
    FILE *f = g->f;
    fprintf(f, "  # classifier head %" PRIu64 "\n", k);
    fprintf(f, "  shape%" PRIu64 " = Shape(%s) -> (?)\n", k, g->h);
    fprintf(f, "  idx%" PRIu64 " = Const() -> (i64[1] = {0})\n", k);
    fprintf(f, "  batch%" PRIu64 " = Gather(shape%" PRIu64 ", idx%" PRIu64 ") -> (?) <axis = 0>\n", k, k, k);
    fprintf(f, "  rest%" PRIu64 " = Const() -> (i64[1] = {-1})\n", k);
    fprintf(f, "  dims%" PRIu64 " = Concat(batch%" PRIu64 ", rest%" PRIu64 ") -> (?) <axis = 0>\n", k, k, k);
    fprintf(f, "  flat%" PRIu64 " = Reshape(%s, dims%" PRIu64 ") -> (?)\n", k, g->h, k);
    char w[32];
    snprintf(w, sizeof w, "wfc%" PRIu64, k);
    weight(g, w, "f32[50176,10]");
    fprintf(f, "  mm%" PRIu64 " = MatMul(flat%" PRIu64 ", wfc%" PRIu64 ") -> (?)\n", k, k, k);
    snprintf(w, sizeof w, "bfc%" PRIu64, k);
    weight(g, w, "f32[10]");
    fprintf(f, "  logits%" PRIu64 " = Add(mm%" PRIu64 ", bfc%" PRIu64 ") -> (?)\n", k, k, k);
    g->left -= HEAD_NODES;
}

/* If(cond, h): then applies Relu, else Neg; input 1 of the If feeds the
 * subgraph Data nodes, the NetOutput input 0 becomes the If's output 0. */
static void branch(gen *g)
{
    uint64_t k = g->ifs++;
    FILE *f = g->f;
    fprintf(f, "  # conditional %" PRIu64 "\n", k);
    fprintf(f, "  if%" PRIu64 " = If(cond, %s) -> (?) {\n", k, g->h);
    fprintf(f, "    graph then%" PRIu64 " {\n", k);
    fprintf(f, "      t_in = Data() -> (?) <_parent_node_index = 1>\n");
    fprintf(f, "      t_op = Relu(t_in) -> (?)\n");
    fprintf(f, "      t_out = NetOutput(t_op <_parent_node_index = 0>)\n");
    fprintf(f, "    }\n");
    fprintf(f, "    graph else%" PRIu64 " {\n", k);
    fprintf(f, "      e_in = Data() -> (?) <_parent_node_index = 1>\n");
    fprintf(f, "      e_op = Neg(e_in) -> (?)\n");
    fprintf(f, "      e_out = NetOutput(e_op <_parent_node_index = 0>)\n");
    fprintf(f, "    }\n");
    fprintf(f, "  }\n");
    snprintf(g->h, sizeof g->h, "if%" PRIu64, k);
    g->left -= IF_NODES;
}

/* The block's output, shared by the next block's Conv and Add, is also
 * reduced in place by a collective: the hccl and RW passes must isolate it. */
static void allreduce(gen *g)
{
    uint64_t k = g->hccls++;
    fprintf(g->f, "  ar%" PRIu64 " = HcomAllReduce(%s) -> (?) <reduction = \"sum\", _input_mutable = true>\n", k, g->h);
    g->left -= HCCL_NODES;
}

/* While(0, 3, h) whose body applies an If (Relu or Neg) to the carried h. */
static void loop(gen *g)
{
    uint64_t k = g->whiles++;
    FILE *f = g->f;
    fprintf(f, "  # loop %" PRIu64 "\n", k);
    fprintf(f, "  zero%" PRIu64 " = Const() -> (i64[] = {0})\n", k);
    fprintf(f, "  lim%" PRIu64 " = Const() -> (i64[] = {3})\n", k);
    fprintf(f, "  wl%" PRIu64 " = While(zero%" PRIu64 ", lim%" PRIu64 ", %s) -> (?, ?, ?) {\n", k, k, k, g->h);
    fprintf(f, "    graph wcond%" PRIu64 " {\n", k);
    fprintf(f, "      i = Data() -> (?) <_parent_node_index = 0>\n");
    fprintf(f, "      n = Data() -> (?) <_parent_node_index = 1>\n");
    fprintf(f, "      h = Data() -> (?) <_parent_node_index = 2>\n");
    fprintf(f, "      more = Less(i, n) -> (?)\n");
    fprintf(f, "      out = NetOutput(more)\n");
    fprintf(f, "    }\n");
    fprintf(f, "    graph wbody%" PRIu64 " {\n", k);
    fprintf(f, "      i = Data() -> (?) <_parent_node_index = 0>\n");
    fprintf(f, "      n = Data() -> (?) <_parent_node_index = 1>\n");
    fprintf(f, "      h = Data() -> (?) <_parent_node_index = 2>\n");
    fprintf(f, "      one = Const() -> (i64[] = {1})\n");
    fprintf(f, "      i_next = Add(i, one) -> (?)\n");
    fprintf(f, "      odd = Less(i, n) -> (?)\n");
    fprintf(f, "      pick = If(odd, h) -> (?) {\n");
    fprintf(f, "        graph wthen%" PRIu64 " {\n", k);
    fprintf(f, "          t_in = Data() -> (?) <_parent_node_index = 1>\n");
    fprintf(f, "          t_op = Relu(t_in) -> (?)\n");
    fprintf(f, "          t_out = NetOutput(t_op <_parent_node_index = 0>)\n");
    fprintf(f, "        }\n");
    fprintf(f, "        graph welse%" PRIu64 " {\n", k);
    fprintf(f, "          e_in = Data() -> (?) <_parent_node_index = 1>\n");
    fprintf(f, "          e_op = Neg(e_in) -> (?)\n");
    fprintf(f, "          e_out = NetOutput(e_op <_parent_node_index = 0>)\n");
    fprintf(f, "        }\n");
    fprintf(f, "      }\n");
    fprintf(f, "      out = NetOutput(i_next <_parent_node_index = 0>, n <_parent_node_index = 1>, "
               "pick <_parent_node_index = 2>)\n");
    fprintf(f, "    }\n");
    fprintf(f, "  }\n");
    snprintf(g->h, sizeof g->h, "wl%" PRIu64 ":2", k);
    g->left -= WHILE_NODES;
}

/* --lint: LINT_NODES per block (file comment); h is the chain's head. */
enum {
    LINT_NODES = 10,
    LINT_RACE_EVERY = 3,   /* the reader of every 3rd block is unordered */
    LINT_SHARED_EVERY = 40 /* the shared variable is written, then read, every 40 blocks */
};

static void lint_block(gen *g)
{
    uint64_t k = g->blocks++;
    FILE *f = g->f;
    const char *t = "f32[4]";
    fprintf(f, "  # lint block %" PRIu64 "\n", k);
    fprintf(f, "  a%" PRIu64 " = Relu(%s) -> (%s)\n", k, g->h, t);
    fprintf(f, "  b%" PRIu64 " = Neg(a%" PRIu64 ") -> (%s)\n", k, k, t);
    fprintf(f, "  c%" PRIu64 " = Abs(b%" PRIu64 ") -> (%s)\n", k, k, t);
    fprintf(f, "  d%" PRIu64 " = Sqrt(c%" PRIu64 ") -> (%s)\n", k, k, t);
    fprintf(f, "  v%" PRIu64 " = Variable() -> (%s)\n", k, t);
    fprintf(f, "  w%" PRIu64 " = Assign(v%" PRIu64 ", d%" PRIu64 ") -> (%s)\n", k, k, k, t);
    if (k % LINT_RACE_EVERY == LINT_RACE_EVERY - 1)
        fprintf(f, "  r%" PRIu64 " = Relu(v%" PRIu64 ") -> (%s)\n", k, k, t);
    else
        fprintf(f, "  r%" PRIu64 " = Relu(v%" PRIu64 ", ^w%" PRIu64 ") -> (%s)\n", k, k, k, t);
    fprintf(f, "  e%" PRIu64 " = Add(w%" PRIu64 ", r%" PRIu64 ") -> (%s)\n", k, k, k, t);
    fprintf(f, "  f%" PRIu64 " = Relu(e%" PRIu64 ") -> (%s)\n", k, k, t);
    /* The shared variable: written at the head of the chain every
     * LINT_SHARED_EVERY blocks, read half-way between; both feed the chain,
     * so every write is ordered against every other access through it. */
    if (k % LINT_SHARED_EVERY == 0)
        fprintf(f, "  h%" PRIu64 " = Assign(shared, f%" PRIu64 ") -> (%s)\n", k, k, t);
    else if (k % LINT_SHARED_EVERY == LINT_SHARED_EVERY / 2)
        fprintf(f, "  h%" PRIu64 " = Mul(f%" PRIu64 ", shared) -> (%s)\n", k, k, t);
    else
        fprintf(f, "  h%" PRIu64 " = Neg(f%" PRIu64 ") -> (%s)\n", k, k, t);
    snprintf(g->h, sizeof g->h, "h%" PRIu64, k);
    g->left -= LINT_NODES;
}

/* --train: 5 nodes per layer (weight, forward Mul, weight gradient, input
 * gradient, update) plus x, loss and the NetOutput. */
static int gen_train(gen *g)
{
    FILE *f = g->f;
    uint64_t layers = g->left >= 3 + 5 ? (g->left - 3) / 5 : 0;
    uint64_t fill = g->left - 3 - 5 * layers;
    fprintf(f, "graph train {\n  x = Data() -> (f32[4] \"x\")\n");
    for (uint64_t l = 0; l < layers; l++)
        fprintf(f, "  W%" PRIu64 " = Variable() -> (f32[4])\n", l);
    char h[32] = "x";
    for (uint64_t l = 0; l < layers; l++) {
        fprintf(f, "  h%" PRIu64 " = Mul(%s, W%" PRIu64 ") -> (f32[4])\n", l, h, l);
        snprintf(h, sizeof h, "h%" PRIu64, l);
    }
    for (uint64_t k = 0; k < fill; k++) {
        fprintf(f, "  fill%" PRIu64 " = Relu(%s) -> (f32[4])\n", k, h);
        snprintf(h, sizeof h, "fill%" PRIu64, k);
    }
    fprintf(f, "  loss = Neg(%s) -> (f32[4])\n", h);
    char d[32] = "loss";
    for (uint64_t l = layers; l-- > 0;) {
        char in[32] = "x";
        if (l > 0)
            snprintf(in, sizeof in, "h%" PRIu64, l - 1);
        fprintf(f, "  dW%" PRIu64 " = Mul(%s, %s) -> (f32[4])\n", l, in, d);
        fprintf(f, "  d%" PRIu64 " = Mul(%s, W%" PRIu64 ") -> (f32[4])\n", l, d, l);
        fprintf(f, "  u%" PRIu64 " = Assign(W%" PRIu64 ", dW%" PRIu64 ", ^d%" PRIu64 ") -> (f32[4])\n", l, l, l, l);
        snprintf(d, sizeof d, "d%" PRIu64, l);
    }
    fprintf(f, "  out = NetOutput(%s)\n}\n", d);
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "gen_graph: write failed: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

static int gen_lint(gen *g)
{
    FILE *f = g->f;
    fprintf(f, "graph lint {\n");
    fprintf(f, "  x = Data() -> (f32[4] \"x\")\n");
    fprintf(f, "  shared = Variable() -> (f32[4])\n");
    g->left -= 3; /* x, shared, and the NetOutput written last */
    snprintf(g->h, sizeof g->h, "x");
    while (g->left >= LINT_NODES)
        lint_block(g);
    for (; g->left > 0; g->left--) {
        uint64_t k = g->fill++;
        fprintf(f, "  fill%" PRIu64 " = Relu(%s) -> (f32[4])\n", k, g->h);
        snprintf(g->h, sizeof g->h, "fill%" PRIu64, k);
    }
    fprintf(f, "  out = NetOutput(%s)\n}\n", g->h);
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "gen_graph: write failed: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    bool conflicts = false, lint = false, train = false;
    if (argc >= 2 && strcmp(argv[argc - 1], "--conflicts") == 0) {
        conflicts = true;
        argc--;
    } else if (argc >= 2 && strcmp(argv[argc - 1], "--lint") == 0) {
        lint = true;
        argc--;
    } else if (argc >= 2 && strcmp(argv[argc - 1], "--train") == 0) {
        train = true;
        argc--;
    }
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: gen_graph N [SEED] [--conflicts | --lint | --train] > out.agt   (N >= 3 nodes)\n");
        return 2;
    }
    char *end;
    errno = 0;
    unsigned long long n = strtoull(argv[1], &end, 10);
    if (errno || *end || n < 3 || argv[1][0] == '-') {
        fprintf(stderr, "gen_graph: N must be an integer >= 3 (got '%s')\n", argv[1]);
        return 2;
    }
    unsigned long long seed = 1;
    if (argc == 3) {
        seed = strtoull(argv[2], &end, 10);
        if (*end || argv[2][0] == '-') {
            fprintf(stderr, "gen_graph: SEED must be a non-negative integer (got '%s')\n", argv[2]);
            return 2;
        }
    }
    static char buf[1 << 20];
    setvbuf(stdout, buf, _IOFBF, sizeof buf);

    gen g = {stdout, seed, n, 0, 0, 0, 0, 0, 0, "x", ""};
    FILE *f = g.f;
    if (lint) {
        fprintf(f, "# lint benchmark graph: %llu nodes (bench/gen_graph %llu %llu --lint)\n", n, n, seed);
        return gen_lint(&g);
    }
    if (train) {
        fprintf(f, "# training step graph: %llu nodes (bench/gen_graph %llu %llu --train)\n", n, n, seed);
        return gen_train(&g);
    }
    fprintf(f, "# synthetic benchmark graph: %llu nodes (bench/gen_graph %llu %llu)\n", n, n, seed);
    fprintf(f, "graph synthetic {\n");
    fprintf(f, "  x = Data() -> (" ACT " \"x\")\n");
    fprintf(f, "  cond = Data() -> (bool[] \"cond\")\n");
    g.left -= 3; /* x, cond, and the NetOutput written last */
    while (g.left >= BLOCK_NODES) {
        block(&g);
        if (g.blocks % HEAD_EVERY == 0 && g.left >= HEAD_NODES)
            head(&g);
        if (g.blocks % IF_EVERY == 0 && g.left >= IF_NODES)
            branch(&g);
        if (conflicts && g.blocks % HCCL_EVERY == 0 && g.left >= HCCL_NODES)
            allreduce(&g);
        if (conflicts && g.blocks % WHILE_EVERY == 0 && g.left >= WHILE_NODES)
            loop(&g);
    }
    /* Whatever is left: a chain of Relu nodes, so the count is exact. */
    for (; g.left > 0; g.left--) {
        uint64_t k = g.fill++;
        fprintf(f, "  fill%" PRIu64 " = Relu(%s) -> (?)\n", k, g.h);
        snprintf(g.h, sizeof g.h, "fill%" PRIu64, k);
    }
    fprintf(f, "  out = NetOutput(%s", g.h);
    for (uint64_t k = 0; k < g.heads; k++)
        fprintf(f, ", logits%" PRIu64, k);
    fprintf(f, ")\n}\n");
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "gen_graph: write failed: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
