/*
 * group.h - qcclGroupStart / qcclGroupEnd: a per-thread queue of calls.
 */
#ifndef QCCL_COLLECTIVES_GROUP_H_
#define QCCL_COLLECTIVES_GROUP_H_

#include "collectives/coll.h"

/* Runs a validated call now, or queues it when a group is open. */
qcclResult_t group_submit(qcclComm_t comm, const coll_args_t* a);

#endif /* QCCL_COLLECTIVES_GROUP_H_ */
