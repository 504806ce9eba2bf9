/*
 * select.h - the choice of algorithm for a plain collective (select.c):
 * the layer between the entry points (api.c, group.c) and the algorithm
 * families (node.h, flat.h, hier.h).
 */
#ifndef QCCL_COLLECTIVES_SELECT_H_
#define QCCL_COLLECTIVES_SELECT_H_

#include "collectives/plan.h"

/* Builds the plan of a plain collective a on comm (plan_build_fn): the
 * node's algorithm on one host, across hosts the two-level or the flat
 * one. The choice is logged at INFO as it is made. */
qcclResult_t select_plan(qcclComm_t comm, const coll_args_t* a, const void* ctx, plan_t** out);

#endif /* QCCL_COLLECTIVES_SELECT_H_ */
