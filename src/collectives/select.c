/*
 * select.c - which algorithm runs a plain collective, and its plan.
 *
 * One host: the node's algorithms over its shared segment (node.h).
 * Several hosts: two-level where the hosts hold equal numbers of ranks
 * (but Reduce of a narrow float, which its stages would round twice),
 * else the flat algorithms over point-to-point. QCCL_ALGO overrides; an
 * impossible choice is logged. The choice is made once per plan (plan.h:
 * plans are cached by collective, count, type, op and root), and logged
 * at INFO when it is made.
 */
#include "collectives/flat.h"
#include "collectives/hier.h"
#include "collectives/node.h"
#include "collectives/select.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/log.h"

/* The node algorithm of a plain kind. */
static qcclResult_t select_node(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  switch (a->kind) {
    case COLL_ALLREDUCE:
      return node_allreduce_plan(comm, a, out);
    case COLL_BROADCAST:
      return node_broadcast_plan(comm, a, out);
    case COLL_REDUCE:
      return node_reduce_plan(comm, a, out);
    case COLL_ALLGATHER:
      return node_allgather_plan(comm, a, out);
    case COLL_REDUCESCATTER:
      return node_reducescatter_plan(comm, a, out);
    case COLL_ALLTOALL:
      return node_alltoall_plan(comm, a, out);
    case COLL_GATHER:
      return node_gather_plan(comm, a, out);
    case COLL_SCATTER:
      return node_scatter_plan(comm, a, out);
    case COLL_BARRIER:
      return node_barrier_plan(comm, a, out);
    default:
      return QCCL_ERR(qcclInternalError, "select: kind %d is not a collective", (int)a->kind);
  }
}

/* Communicators that span hosts: two-level where the hosts hold equal
 * numbers of ranks (but Reduce of a narrow float, which its stages would
 * round twice), else the flat algorithms over point-to-point. QCCL_ALGO
 * overrides; an impossible choice is logged. */
static int coll_pick_hier(qcclComm_t comm, const coll_args_t* a) {
  int has_op = a->kind == COLL_ALLREDUCE || a->kind == COLL_REDUCESCATTER || a->kind == COLL_REDUCE;
  int has_hier = has_op || a->kind == COLL_ALLGATHER || a->kind == COLL_BROADCAST;
  if (!has_hier) return 0;
  /* narrow floats: AllReduce and ReduceScatter keep f32 between their
   * stages; Reduce's node stage would round, so it stays flat */
  int narrow = reduce_work_type(a->datatype) != a->datatype;
  int can = comm->rail != NULL && !(narrow && a->kind == COLL_REDUCE);
  int algo = comm->algo[a->kind];
  if (algo == COLL_ALGO_HIER && !can)
    QCCL_INFO(LOG_COLL, "QCCL_ALGO %s:hier is not possible here (%s): flat",
              coll_kind_name(a->kind),
              comm->rail ? "narrow float type" : "hosts hold different numbers of ranks");
  int hier = can && algo != COLL_ALGO_FLAT;
  QCCL_INFO(LOG_COLL, "%s of %zu x %s on %d ranks / %d hosts: %s", coll_kind_name(a->kind),
            a->count, dtype_name(a->datatype), comm->nranks, comm->nnodes, hier ? "hier" : "flat");
  return hier;
}

/* The algorithm across hosts. */
static qcclResult_t select_hosts(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  int hier = coll_pick_hier(comm, a);
  switch (a->kind) {
    case COLL_ALLREDUCE:
      return hier ? hier_allreduce_plan(comm, a, out) : flat_allreduce_plan(comm, a, out);
    case COLL_BROADCAST:
      return hier ? hier_broadcast_plan(comm, a, out) : flat_broadcast_plan(comm, a, out);
    case COLL_REDUCE:
      return hier ? hier_reduce_plan(comm, a, out) : flat_reduce_plan(comm, a, out);
    case COLL_ALLGATHER:
      return hier ? hier_allgather_plan(comm, a, out) : flat_allgather_plan(comm, a, out);
    case COLL_REDUCESCATTER:
      return hier ? hier_reducescatter_plan(comm, a, out) : flat_reducescatter_plan(comm, a, out);
    case COLL_ALLTOALL:
      return flat_alltoall_plan(comm, a, out);
    case COLL_GATHER:
      return flat_gather_plan(comm, a, out);
    case COLL_SCATTER:
      return flat_scatter_plan(comm, a, out);
    case COLL_BARRIER:
      return flat_barrier_plan(comm, a, out);
    default:
      return QCCL_ERR(qcclInternalError, "select: kind %d is not a collective", (int)a->kind);
  }
}

qcclResult_t select_plan(qcclComm_t comm, const coll_args_t* a, const void* ctx, plan_t** out) {
  (void)ctx;
  return comm->nnodes > 1 ? select_hosts(comm, a, out) : select_node(comm, a, out);
}
