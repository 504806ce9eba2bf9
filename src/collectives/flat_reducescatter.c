/*
 * flat_reducescatter.c - ReduceScatter over point-to-point, for
 * communicators that span hosts.
 *
 * Ring: the W blocks of sendbuff are copied (widened to f32 for the narrow
 * floats) into scratch; in step s rank r sends block r-s-1 to r+1 and
 * reduces block r-s-2 received from r-1 into its copy, so after W-1 steps
 * it holds block r reduced over all ranks. Each rank sends (W-1)/W of the
 * buffer, the least a reduce-scatter can.
 */
#include "collectives/coll.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"

qcclResult_t flat_reducescatter(qcclComm_t comm, const coll_args_t* a) {
  int w = comm->nranks, r = comm->rank;
  int next = (r + 1) % w, prev = (r + w - 1) % w;
  qcclDataType_t t = a->datatype, wt = reduce_work_type(t);
  size_t es = dtype_size(t), wes = dtype_size(wt), n = a->count;
  size_t block = n * wes;
  char* work;
  QCCL_CHECK(comm_scratch(comm, 0, block * (size_t)(w + 1) + 1, (void**)&work));
  char* tmp = work + block * (size_t)w;
  if (wt == t)
    memcpy(work, a->sendbuff, n * es * (size_t)w);
  else
    convert_to_f32((float*)work, a->sendbuff, n * (size_t)w, t);
  qcclRedOp_t rop = a->op == qcclAvg ? qcclSum : a->op;
  for (int s = 0; s < w - 1; s++) {
    int si = (r - s - 1 + 2 * w) % w, ri = (r - s - 2 + 2 * w) % w;
    QCCL_CHECK(p2p_sendrecv(comm, next, work + (size_t)si * block, block, prev, tmp, block));
    const void* srcs[2] = {work + (size_t)ri * block, tmp};
    reduce_kernel(work + (size_t)ri * block, srcs, 2, n, wt, rop, 0);
  }
  char* mine = work + (size_t)r * block;
  if (a->op == qcclAvg) {
    const void* own[1] = {mine};
    reduce_kernel(mine, own, 1, n, wt, qcclAvg, w);
  }
  if (wt == t)
    memcpy(a->recvbuff, mine, n * es);
  else
    convert_from_f32(a->recvbuff, (const float*)mine, n, t);
  return qcclSuccess;
}
