/*
 * hier.h - the two-level algorithms (one file each: hier_allreduce.c, ...),
 * for communicators whose hosts hold equal numbers of ranks (comm->rail
 * exists): compositions (plan.h) of leaves on the node communicator
 * (shared memory) and on the rail of equal local index (the network),
 * pipelined by segments (hier_pipe.h) where the call is large.
 */
#ifndef QCCL_COLLECTIVES_HIER_H_
#define QCCL_COLLECTIVES_HIER_H_

#include "collectives/plan.h"

qcclResult_t hier_allreduce_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t hier_allgather_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t hier_reducescatter_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t hier_broadcast_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t hier_reduce_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);

#endif /* QCCL_COLLECTIVES_HIER_H_ */
