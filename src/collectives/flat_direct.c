/*
 * flat_direct.c - the rooted and all-to-all collectives over point-to-
 * point, for communicators that span hosts: every transfer goes directly
 * between the two ranks concerned, all posted as one batch that progresses
 * together. Broadcast and Scatter: the root sends to each rank; Gather:
 * each rank sends to the root; AlltoAll: every pair exchanges its blocks;
 * Barrier: a ring of one-byte messages around all ranks (W-1 steps, after
 * which every rank has heard, indirectly, from every other).
 */
#include <stdlib.h>

#include "collectives/coll.h"
#include "core/dtype.h"

/* Runs n transfers of comm as one batch. */
static qcclResult_t direct_run(qcclComm_t comm, coll_args_t* ops, int n) {
  if (n == 0) return qcclSuccess;
  qcclComm_t* comms = malloc(sizeof *comms * (size_t)n);
  if (!comms) return QCCL_ERR(qcclSystemError, "out of memory");
  for (int i = 0; i < n; i++) comms[i] = comm;
  qcclResult_t r = p2p_run(ops, comms, n);
  free(comms);
  return r;
}

/* Root exchanges block i with rank i; send: root sends, else receives. */
static qcclResult_t direct_rooted(qcclComm_t comm, int root, int root_sends, const char* rootbuf,
                                  size_t stride, char* leafbuf, size_t bytes) {
  int w = comm->nranks;
  if (comm->rank != root)
    return p2p_sendrecv(comm, root_sends ? -1 : root, leafbuf, bytes, root_sends ? root : -1,
                        leafbuf, bytes);
  coll_args_t* ops = malloc(sizeof *ops * (size_t)w);
  if (!ops) return QCCL_ERR(qcclSystemError, "out of memory");
  int n = 0;
  for (int i = 0; i < w; i++) {
    if (i == root) continue;
    char* p = (char*)rootbuf + (size_t)i * stride;
    ops[n++] = root_sends ? (coll_args_t){COLL_SEND, p, NULL, bytes, qcclUint8, qcclSum, i}
                          : (coll_args_t){COLL_RECV, NULL, p, bytes, qcclUint8, qcclSum, i};
  }
  qcclResult_t r = direct_run(comm, ops, n);
  free(ops);
  return r;
}

qcclResult_t flat_broadcast(qcclComm_t comm, const coll_args_t* a) {
  size_t bytes = a->count * dtype_size(a->datatype);
  if (comm->rank == a->root) coll_copy(a->recvbuff, a->sendbuff, bytes);
  return direct_rooted(comm, a->root, 1, a->sendbuff, 0, a->recvbuff, bytes);
}

qcclResult_t flat_scatter(qcclComm_t comm, const coll_args_t* a) {
  size_t bytes = a->count * dtype_size(a->datatype);
  if (comm->rank == a->root)
    coll_copy(a->recvbuff, (const char*)a->sendbuff + (size_t)a->root * bytes, bytes);
  return direct_rooted(comm, a->root, 1, a->sendbuff, bytes, a->recvbuff, bytes);
}

qcclResult_t flat_gather(qcclComm_t comm, const coll_args_t* a) {
  size_t bytes = a->count * dtype_size(a->datatype);
  if (comm->rank == a->root) {
    coll_copy((char*)a->recvbuff + (size_t)a->root * bytes, a->sendbuff, bytes);
    return direct_rooted(comm, a->root, 0, a->recvbuff, bytes, NULL, bytes);
  }
  return direct_rooted(comm, a->root, 0, NULL, bytes, (char*)a->sendbuff, bytes);
}

qcclResult_t flat_alltoall(qcclComm_t comm, const coll_args_t* a) {
  int w = comm->nranks, r = comm->rank;
  size_t bytes = a->count * dtype_size(a->datatype);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  memcpy(out + (size_t)r * bytes, in + (size_t)r * bytes, bytes);
  coll_args_t* ops = malloc(sizeof *ops * 2 * (size_t)w);
  if (!ops) return QCCL_ERR(qcclSystemError, "out of memory");
  int n = 0;
  for (int k = 1; k < w; k++) {
    int to = (r + k) % w, from = (r - k + w) % w;
    ops[n++] =
        (coll_args_t){COLL_SEND, in + (size_t)to * bytes, NULL, bytes, qcclUint8, qcclSum, to};
    ops[n++] =
        (coll_args_t){COLL_RECV, NULL, out + (size_t)from * bytes, bytes, qcclUint8, qcclSum, from};
  }
  qcclResult_t res = direct_run(comm, ops, n);
  free(ops);
  return res;
}

qcclResult_t flat_barrier(qcclComm_t comm) {
  int w = comm->nranks, r = comm->rank;
  char token = 0, got = 0;
  for (int s = 0; s < w - 1; s++)
    QCCL_CHECK(p2p_sendrecv(comm, (r + 1) % w, &token, 1, (r + w - 1) % w, &got, 1));
  return qcclSuccess;
}
