/* Graphviz export: one cluster per subgraph, data edges solid, control edges
 * dashed, anchors labelled with dtype and shape. */
#ifndef ALIASGUARD_DOT_H
#define ALIASGUARD_DOT_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

ag_status ag_dot_write(const ag_graph *g, ag_sink sink);

#ifdef __cplusplus
}
#endif
#endif
