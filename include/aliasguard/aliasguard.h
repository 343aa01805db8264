/* aliasguard: shared accelerator memory made safe.  Umbrella header. */
#ifndef ALIASGUARD_H
#define ALIASGUARD_H

#define AG_VERSION_MAJOR 0
#define AG_VERSION_MINOR 1
#define AG_VERSION_PATCH 0
#define AG_VERSION_STRING "0.1.0"

#include "status.h"
#include "ctx.h"
#include "types.h"
#include "graph.h"
#include "text.h"
#include "onnx.h"
#include "infer.h"
#include "ops.h"
#include "dot.h"
#include "passes.h"
#include "place.h"
#include "plan.h"
#include "device.h"
#include "alloc.h"
#include "verify.h"
#include "kernel.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Version of the library actually linked ("0.1.0"). */
const char *ag_version(void);
#ifdef __cplusplus
}
#endif
#endif
