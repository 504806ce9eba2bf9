/*
 * hier_rooted.c - two-level Broadcast and Reduce, for communicators whose
 * hosts hold equal numbers of ranks (comm->rail exists), through the rail
 * of the root's local index: on every host, the rank with that index acts
 * as the host's leader for this call.
 *
 * Broadcast: the root sends the buffer to the other N-1 leaders over the
 * network (flat_direct.c), then each leader broadcasts it inside its host
 * (shared memory). Reduce: each host reduces onto its leader (shared
 * memory), then the leaders reduce onto the root (flat_allreduce.c's ring,
 * over the network). Either way each host's link carries the buffer about
 * once, where the flat algorithms send it once per remote rank. Avg sums
 * and divides by W at the root. Narrow floats take the flat Reduce (they
 * would be rounded twice here).
 */
#include "collectives/coll.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "topology/rankmap.h"

qcclResult_t hier_broadcast(qcclComm_t comm, const coll_args_t* a) {
  int lr = comm->rankmap->local_rank[a->root];
  if (comm->node->rank == lr) {
    coll_args_t rail = *a;
    rail.root = comm->node_of[a->root]; /* the rail holds one rank per host, by host */
    QCCL_CHECK(flat_broadcast(comm->rail, &rail));
  }
  coll_args_t node = {COLL_BROADCAST, a->recvbuff, a->recvbuff, a->count, a->datatype, qcclSum, lr};
  return node_run(comm->node, &node);
}

qcclResult_t hier_reduce(qcclComm_t comm, const coll_args_t* a) {
  int lr = comm->rankmap->local_rank[a->root];
  qcclRedOp_t op = a->op == qcclAvg ? qcclSum : a->op;
  void* partial = NULL;
  QCCL_CHECK(comm_scratch(comm, 0, a->count * dtype_size(a->datatype), &partial));
  coll_args_t node = {COLL_REDUCE, a->sendbuff, partial, a->count, a->datatype, op, lr};
  QCCL_CHECK(node_run(comm->node, &node));
  if (comm->node->rank != lr) return qcclSuccess;
  coll_args_t rail = {COLL_REDUCE, partial, a->recvbuff,           a->count,
                      a->datatype, op,      comm->node_of[a->root]};
  QCCL_CHECK(flat_reduce(comm->rail, &rail));
  if (comm->rank == a->root && a->op == qcclAvg) {
    const void* own[1] = {a->recvbuff};
    reduce_kernel(a->recvbuff, own, 1, a->count, a->datatype, qcclAvg, comm->nranks);
  }
  return qcclSuccess;
}
