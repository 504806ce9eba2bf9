/*
 * api.c - the public collective calls: argument checks, then run or queue.
 *
 * Checks are local and happen before any communication, so a bad argument
 * on one rank fails that call cleanly without desynchronising the others.
 * Each message names the argument (as in the prototype in qccl.h) and its
 * value. Valid calls go to group.c, which runs them now or at GroupEnd.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "collectives/check.h"
#include "collectives/coll.h"
#include "collectives/group.h"
#include "collectives/reduce_kernels.h"
#include "collectives/zeropp/zpp.h"
#include "core/dtype.h"
#include "core/log.h"

/* The entry points' names, for messages (a table, not a snprintf per
 * call: formatting the name cost 10 % of a small send's time) */
const char* const coll_fns[COLL_NUM_KINDS] = {"qcclAllReduce", "qcclBroadcast",     "qcclReduce",
                                              "qcclAllGather", "qcclReduceScatter", "qcclAlltoAll",
                                              "qcclGather",    "qcclScatter",       "qcclSend",
                                              "qcclRecv",      "qcclBarrier"};
#define coll_names(kind) coll_kind_name(kind)

/* Which buffers a kind needs (on every rank, or on the root only) and which
 * of root / peer / op it takes. Sizes are checked as count x nranks for all. */
typedef struct {
  int send, send_root_only;
  int recv, recv_root_only;
  int has_op, has_root, has_peer;
} coll_shape_t;

static const coll_shape_t coll_shapes[COLL_NUM_KINDS] = {
    [COLL_ALLREDUCE] = {1, 0, 1, 0, 1, 0, 0},     [COLL_BROADCAST] = {1, 1, 1, 0, 0, 1, 0},
    [COLL_REDUCE] = {1, 0, 1, 1, 1, 1, 0},        [COLL_ALLGATHER] = {1, 0, 1, 0, 0, 0, 0},
    [COLL_REDUCESCATTER] = {1, 0, 1, 0, 1, 0, 0}, [COLL_ALLTOALL] = {1, 0, 1, 0, 0, 0, 0},
    [COLL_GATHER] = {1, 0, 1, 1, 0, 1, 0},        [COLL_SCATTER] = {1, 1, 1, 0, 0, 1, 0},
    [COLL_SEND] = {1, 0, 0, 0, 0, 0, 1},          [COLL_RECV] = {0, 0, 1, 0, 0, 0, 1},
    [COLL_BARRIER] = {0, 0, 0, 0, 0, 0, 0},
};

static qcclResult_t api_check(qcclComm_t comm, const coll_args_t* a, qcclStream_t stream,
                              stream_t** s) {
  const char* fn = coll_fns[a->kind];
  const char* name = coll_names(a->kind);
  const coll_shape_t* sh = &coll_shapes[a->kind];
  QCCL_CHECK(check_comm_usable(fn, comm, stream, s));
  if (a->kind == COLL_BARRIER) return qcclSuccess;
  size_t es = dtype_size(a->datatype);
  if (es == 0)
    return QCCL_ERR(qcclInvalidArgument, "qccl%s: datatype=%d is not a qcclDataType_t", name,
                    (int)a->datatype);
  if (sh->has_op) {
    if ((int)a->op < 0 || a->op >= qcclNumOps)
      return QCCL_ERR(qcclInvalidArgument, "qccl%s: op=%d is not a qcclRedOp_t", name, (int)a->op);
    if (a->op == qcclAvg && !dtype_is_float(a->datatype))
      return QCCL_ERR(qcclInvalidArgument, "qccl%s: op=avg needs a floating datatype, not %s", name,
                      dtype_name(a->datatype));
  }
  if (sh->has_root && (a->root < 0 || a->root >= comm->nranks))
    return QCCL_ERR(qcclInvalidArgument, "qccl%s: root=%d is outside [0, %d)", name, a->root,
                    comm->nranks);
  if (sh->has_peer && (a->root < 0 || a->root >= comm->nranks))
    return QCCL_ERR(qcclInvalidArgument, "qccl%s: peer=%d is outside [0, %d)", name, a->root,
                    comm->nranks);
  /* count * nranks * element size must fit in memory */
  QCCL_CHECK(check_count(fn, "count", a->count, (size_t)comm->nranks, es, 0));
  if (a->count == 0) return qcclSuccess;
  int is_root = a->root == comm->rank;
  if (sh->send && (!sh->send_root_only || is_root) && a->sendbuff == NULL)
    return QCCL_ERR(qcclInvalidArgument, "qccl%s: sendbuff is NULL with count=%zu", name, a->count);
  if (sh->recv && (!sh->recv_root_only || is_root) && a->recvbuff == NULL)
    return QCCL_ERR(qcclInvalidArgument, "qccl%s: recvbuff is NULL with count=%zu", name, a->count);
  if (a->kind == COLL_ALLTOALL) {
    size_t bytes = a->count * es * (size_t)comm->nranks;
    const char* s = a->sendbuff;
    const char* r = a->recvbuff;
    if (s < r + bytes && r < s + bytes)
      return QCCL_ERR(qcclInvalidArgument,
                      "qcclAlltoAll: sendbuff and recvbuff overlap (there is no in-place "
                      "all-to-all)");
  }
  return qcclSuccess;
}

static qcclResult_t api_submit(qcclComm_t comm, const coll_args_t* a, qcclStream_t stream) {
  err_clear();
  stream_t* s = NULL;
  qcclResult_t r = api_check(comm, a, stream, &s);
  if (r != qcclSuccess) {
    if (comm && comm->magic == COMM_MAGIC)
      snprintf(comm->last_error, sizeof comm->last_error, "%s", err_last());
    return r;
  }
  QCCL_TRACE(LOG_COLL, "qccl%s count %zu %s %s root/peer %d", coll_names(a->kind), a->count,
             dtype_name(a->datatype), redop_name(a->op), a->root);
  if (zpp_policy_applies(comm, a)) {
    /* quantized by a policy (QCCL_POLICY, qcclCommSetPolicy): issued as its
     * ZeRO++ call, which can join a bucket in a group */
    zpp_op_t zop;
    r = zpp_policy_op(comm, a, &zop);
    if (r != qcclSuccess) return zpp_fail(comm, r);
    zop.stream = s;
    return zpp_submit(comm, &zop);
  }
  return group_submit(comm, a, s);
}

qcclResult_t qcclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           qcclDataType_t datatype, qcclRedOp_t op, qcclComm_t comm,
                           qcclStream_t stream) {
  coll_args_t a = {COLL_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, -1};
  return api_submit(comm, &a, stream);
}

qcclResult_t qcclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           qcclDataType_t datatype, int root, qcclComm_t comm,
                           qcclStream_t stream) {
  coll_args_t a = {COLL_BROADCAST, sendbuff, recvbuff, count, datatype, qcclSum, root};
  return api_submit(comm, &a, stream);
}

qcclResult_t qcclReduce(const void* sendbuff, void* recvbuff, size_t count, qcclDataType_t datatype,
                        qcclRedOp_t op, int root, qcclComm_t comm, qcclStream_t stream) {
  coll_args_t a = {COLL_REDUCE, sendbuff, recvbuff, count, datatype, op, root};
  return api_submit(comm, &a, stream);
}

qcclResult_t qcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           qcclDataType_t datatype, qcclComm_t comm, qcclStream_t stream) {
  coll_args_t a = {COLL_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, qcclSum, -1};
  return api_submit(comm, &a, stream);
}

qcclResult_t qcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               qcclDataType_t datatype, qcclRedOp_t op, qcclComm_t comm,
                               qcclStream_t stream) {
  coll_args_t a = {COLL_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, -1};
  return api_submit(comm, &a, stream);
}

qcclResult_t qcclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          qcclDataType_t datatype, qcclComm_t comm, qcclStream_t stream) {
  coll_args_t a = {COLL_ALLTOALL, sendbuff, recvbuff, count, datatype, qcclSum, -1};
  return api_submit(comm, &a, stream);
}

qcclResult_t qcclGather(const void* sendbuff, void* recvbuff, size_t count, qcclDataType_t datatype,
                        int root, qcclComm_t comm, qcclStream_t stream) {
  coll_args_t a = {COLL_GATHER, sendbuff, recvbuff, count, datatype, qcclSum, root};
  return api_submit(comm, &a, stream);
}

qcclResult_t qcclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         qcclDataType_t datatype, int root, qcclComm_t comm, qcclStream_t stream) {
  coll_args_t a = {COLL_SCATTER, sendbuff, recvbuff, count, datatype, qcclSum, root};
  return api_submit(comm, &a, stream);
}

qcclResult_t qcclSend(const void* sendbuff, size_t count, qcclDataType_t datatype, int peer,
                      qcclComm_t comm, qcclStream_t stream) {
  coll_args_t a = {COLL_SEND, sendbuff, NULL, count, datatype, qcclSum, peer};
  return api_submit(comm, &a, stream);
}

qcclResult_t qcclRecv(void* recvbuff, size_t count, qcclDataType_t datatype, int peer,
                      qcclComm_t comm, qcclStream_t stream) {
  coll_args_t a = {COLL_RECV, NULL, recvbuff, count, datatype, qcclSum, peer};
  return api_submit(comm, &a, stream);
}

qcclResult_t qcclBarrier(qcclComm_t comm, qcclStream_t stream) {
  coll_args_t a = {COLL_BARRIER, NULL, NULL, 0, qcclInt8, qcclSum, -1};
  return api_submit(comm, &a, stream);
}
