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
    X(AG_EINTERNAL, 13, "internal error")                                    \
    AG_KERNEL_STATUS_LIST(X)

/* Kernel mode's band (seed 004, include/aliasguard/kernel.h): the seed's
 * values, at or below -1000.  INVALID_ARGUMENT is an addition: the seed
 * reports malformed calls as INTERNAL, which would make a caller's mistake
 * read like a broken runtime; it takes the first free value after the
 * seed's table so no seed value moves. */
#define AG_KERNEL_STATUS_LIST(X)                                                             \
    X(AG_KERNEL_ERR_INTERNAL, -1000, "kernel mode: internal failure")                       \
    X(AG_KERNEL_ERR_UNSUPPORTED, -1001, "kernel mode: unsupported")                         \
    X(AG_KERNEL_ERR_PREPARED_INCOMPATIBLE, -1002, "kernel mode: prepared run incompatible") \
    X(AG_KERNEL_ERR_INVALID_STATE, -1003, "kernel mode: call out of lifecycle order")       \
    X(AG_KERNEL_ERR_COUNT_EXCEEDED, -1004, "kernel mode: callable count exceeded")          \
    X(AG_KERNEL_ERR_BYTES_EXCEEDED, -1005, "kernel mode: callable bytes exceeded")          \
    X(AG_KERNEL_ERR_NOT_RESIDENT, -1006, "kernel mode: callable not resident")              \
    X(AG_KERNEL_ERR_STALE, -1007, "kernel mode: stale callable handle")                     \
    X(AG_KERNEL_ERR_INVALID_ARGUMENT, -1008, "kernel mode: invalid argument")

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
