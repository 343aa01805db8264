/* Status codes shared by every aliasguard module.
 * Every fallible call returns an ag_status; ag_status_str() gives static text,
 * ag_ctx_errmsg() the detailed message of the last failure (file, node, anchor). */
#ifndef ALIASGUARD_STATUS_H
#define ALIASGUARD_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X-macro: name, value, text.  Values are stable and part of the ABI. */
#define AG_STATUS_LIST(X)                                                     \
    X(AG_OK, 0, "ok")                                                         \
    X(AG_ENOMEM, 1, "out of memory")                                          \
    X(AG_EINVAL, 2, "invalid argument")                                       \
    X(AG_EPARSE, 3, "parse error")                                            \
    X(AG_EIO, 4, "input/output error")                                        \
    X(AG_EUNSUPPORTED, 5, "unsupported construct")                            \
    X(AG_ENOTFOUND, 6, "not found")                                           \
    X(AG_EEXIST, 7, "already exists")                                         \
    X(AG_ECYCLE, 8, "graph has a cycle")                                      \
    X(AG_EVERIFY, 9, "graph structure is inconsistent")                       \
    X(AG_ESHAPE, 10, "shape inference failed")                                \
    X(AG_EINFEASIBLE, 11, "infeasible")                                       \
    X(AG_EDEVICE, 12, "device error")                                         \
    X(AG_EINTERNAL, 13, "internal error")

typedef enum ag_status {
#define AG_STATUS_ENUM_(name, value, text) name = value,
    AG_STATUS_LIST(AG_STATUS_ENUM_)
#undef AG_STATUS_ENUM_
} ag_status;

/* Static, never-NULL text for a status code ("unknown status" for others). */
const char *ag_status_str(ag_status st);

#ifdef __cplusplus
}
#endif
#endif
