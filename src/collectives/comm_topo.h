/*
 * comm_topo.h - the topology of a communicator: its rank map (every
 * communicator), and for communicators made by an init call the host
 * topology's dump, QCCL_BIND, and the path table at INFO. comm.c calls
 * these; the public functions (qcclCommSplitNode ...) are in comm_topo.c.
 */
#ifndef QCCL_COLLECTIVES_COMM_TOPO_H_
#define QCCL_COLLECTIVES_COMM_TOPO_H_

#include <stddef.h>

#include "collectives/coll.h"

/* Builds c->rankmap from c->node_of (after placement). */
qcclResult_t comm_topo_build(qcclComm_t c);

/* Frees c->rankmap. */
void comm_topo_free(qcclComm_t c);

/* Reads QCCL_BIND (before any communication, so a bad value fails at
 * once on every rank): a topo_bind_t. */
qcclResult_t comm_topo_bind_mode(int* mode);

/* After init: loads the host topology when it is needed (QCCL_BIND,
 * QCCL_TOPO_DUMP_FILE, INFO logging of TOPO), writes the dump, binds, and
 * logs the host topology and the path table. A dump or bind that fails is
 * a warning: the communicator is made on every rank either way. */
void comm_topo_init(qcclComm_t c, int bind_mode);

/* Logs c's rank map line and path table rows at INFO (subsystem TOPO). */
void comm_topo_log(qcclComm_t c);

/* This rank's rank-map line ("rank 3: node 1 of 2, local 1 of 2, ..."). */
void comm_topo_format_rank(qcclComm_t c, char* buf, size_t len);

/* This rank's path rows: which = 0 for host buffers (what c connected),
 * 1 for device buffers (what the build would use). */
void comm_topo_format_paths(qcclComm_t c, int which, char* buf, size_t len);

#endif /* QCCL_COLLECTIVES_COMM_TOPO_H_ */
