/*
 * group.h - qcclGroupStart / qcclGroupEnd: a per-thread queue of calls.
 */
#ifndef QCCL_COLLECTIVES_GROUP_H_
#define QCCL_COLLECTIVES_GROUP_H_

#include "collectives/coll.h"
#include "core/stream.h"

/* Runs a validated call now (s NULL) or queues it on host stream s, or
 * adds it to the open group. */
qcclResult_t group_submit(qcclComm_t comm, const coll_args_t* a, stream_t* s);

#endif /* QCCL_COLLECTIVES_GROUP_H_ */
