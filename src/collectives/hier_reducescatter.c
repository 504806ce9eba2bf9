/*
 * hier_reducescatter.c - the two-level ReduceScatter, for communicators
 * whose hosts hold equal numbers of ranks (L each, N hosts; comm->rail
 * exists).
 *
 *   1. the blocks of sendbuff are reordered by owner's local index, then
 *      host: block (l, n) is the one that rank (host n, local index l)
 *      receives (ranks of a host need not be contiguous);
 *   2. node reduce-scatter (shared memory): local rank l gets the N blocks
 *      of its index, reduced over its host;
 *   3. rail reduce-scatter (UCX, flat_reducescatter.c's ring among the N
 *      ranks of local index l): each gets its own block reduced over all.
 * Each rank sends (N-1) blocks over the network (the flat ring sends W-1
 * per crossing): each host's link carries L(N-1) blocks, the least a
 * reduce-scatter across N hosts can. Avg sums and divides by W at the end.
 * Narrow floats take the flat ring (they would be rounded at each stage).
 */
#include "collectives/coll.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"

qcclResult_t hier_reducescatter(qcclComm_t comm, const coll_args_t* a) {
  int N = comm->nnodes, L = comm->node->nranks;
  size_t bytes = a->count * dtype_size(a->datatype);
  qcclRedOp_t op = a->op == qcclAvg ? qcclSum : a->op;
  char *order, *part;
  QCCL_CHECK(comm_scratch(comm, 0, (size_t)N * (size_t)L * bytes, (void**)&order));
  QCCL_CHECK(comm_scratch(comm, 1, (size_t)N * bytes, (void**)&part));
  const char* in = a->sendbuff;
  for (int l = 0; l < L; l++)
    for (int n = 0; n < N; n++)
      memcpy(order + ((size_t)l * (size_t)N + (size_t)n) * bytes,
             in + (size_t)coll_rank_at(comm, n, l) * bytes, bytes);
  coll_args_t node = {COLL_REDUCESCATTER, order, part, (size_t)N * a->count, a->datatype, op, -1};
  QCCL_CHECK(coll_reducescatter(comm->node, &node));
  coll_args_t rail = {COLL_REDUCESCATTER, part, a->recvbuff, a->count, a->datatype, op, -1};
  QCCL_CHECK(flat_reducescatter(comm->rail, &rail));
  if (a->op == qcclAvg) {
    const void* own[1] = {a->recvbuff};
    reduce_kernel(a->recvbuff, own, 1, a->count, a->datatype, qcclAvg, comm->nranks);
  }
  return qcclSuccess;
}
