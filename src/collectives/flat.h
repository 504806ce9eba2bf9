/*
 * flat.h - the algorithms over point-to-point for communicators that span
 * hosts (any placement; one file each: flat_allreduce.c, ...): plans whose
 * steps wait on batches of transfers (p2p.h). The selection (select.c)
 * builds them when a communicator's hosts hold unequal numbers of ranks
 * (or QCCL_ALGO says flat); the two-level compositions build the rings
 * for their rails.
 *
 * Each builder takes a call checked by the entry point (count > 0 but for
 * Barrier) and returns a plan for comm, not started. The rings that serve
 * as a composition's stage take their count per start (plan_restart).
 */
#ifndef QCCL_COLLECTIVES_FLAT_H_
#define QCCL_COLLECTIVES_FLAT_H_

#include "collectives/p2p.h"

qcclResult_t flat_allreduce_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t flat_reduce_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t flat_allgather_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t flat_reducescatter_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t flat_broadcast_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t flat_gather_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t flat_scatter_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t flat_alltoall_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t flat_barrier_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);

#endif /* QCCL_COLLECTIVES_FLAT_H_ */
