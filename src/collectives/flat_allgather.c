/*
 * flat_allgather.c - AllGather over point-to-point, for communicators that
 * span hosts. Ring: in step s rank r passes block r-s to r+1 and receives
 * block r-s-1 from r-1 straight into recvbuff; (W-1)/W of the result is
 * sent and received per rank, the least an all-gather can.
 */
#include "collectives/coll.h"
#include "core/dtype.h"

qcclResult_t flat_allgather(qcclComm_t comm, const coll_args_t* a) {
  int w = comm->nranks, r = comm->rank;
  int next = (r + 1) % w, prev = (r + w - 1) % w;
  size_t bytes = a->count * dtype_size(a->datatype);
  char* out = a->recvbuff;
  coll_copy(out + (size_t)r * bytes, a->sendbuff, bytes);
  for (int s = 0; s < w - 1; s++) {
    int si = (r - s + w) % w, ri = (r - s - 1 + w) % w;
    QCCL_CHECK(p2p_sendrecv(comm, next, out + (size_t)si * bytes, bytes, prev,
                            out + (size_t)ri * bytes, bytes));
  }
  return qcclSuccess;
}
