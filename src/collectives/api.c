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

/* The entry points' names, for messages; coll_names drops the "qccl" (a
 * table, not a snprintf per call: formatting the name cost 10 % of a small
 * send's time) */
static const char* const coll_fns[COLL_NUM_KINDS] = {
    "qcclAllReduce",     "qcclBroadcast", "qcclReduce", "qcclAllGather",
    "qcclReduceScatter", "qcclAlltoAll",  "qcclGather", "qcclScatter",
    "qcclSend",          "qcclRecv",      "qcclBarrier"};
#define coll_names(kind) (coll_fns[kind] + 4)

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
    QCCL_INFO(LOG_COLL, "QCCL_ALGO %s:hier is not possible here (%s): flat", coll_names(a->kind),
              comm->rail ? "narrow float type" : "hosts hold different numbers of ranks");
  int hier = can && algo != COLL_ALGO_FLAT;
  QCCL_INFO(LOG_COLL, "%s of %zu x %s on %d ranks / %d hosts: %s", coll_names(a->kind), a->count,
            dtype_name(a->datatype), comm->nranks, comm->nnodes, hier ? "hier" : "flat");
  return hier;
}

static qcclResult_t coll_run_flat(qcclComm_t comm, const coll_args_t* a) {
  int hier = coll_pick_hier(comm, a);
  switch (a->kind) {
    case COLL_ALLREDUCE:
      return hier ? hier_allreduce(comm, a) : flat_allreduce(comm, a);
    case COLL_BROADCAST:
      return hier ? hier_broadcast(comm, a) : flat_broadcast(comm, a);
    case COLL_REDUCE:
      return hier ? hier_reduce(comm, a) : flat_reduce(comm, a);
    case COLL_ALLGATHER:
      return hier ? hier_allgather(comm, a) : flat_allgather(comm, a);
    case COLL_REDUCESCATTER:
      return hier ? hier_reducescatter(comm, a) : flat_reducescatter(comm, a);
    case COLL_ALLTOALL:
      return flat_alltoall(comm, a);
    case COLL_GATHER:
      return flat_gather(comm, a);
    case COLL_SCATTER:
      return flat_scatter(comm, a);
    case COLL_BARRIER:
      return flat_barrier(comm);
    default:
      return QCCL_ERR(qcclInternalError, "coll_run: kind %d is not a collective", (int)a->kind);
  }
}

static qcclResult_t coll_run_node(qcclComm_t comm, const coll_args_t* a) {
  qcclResult_t r;
  switch (a->kind) {
    case COLL_ALLREDUCE:
      r = coll_allreduce(comm, a);
      break;
    case COLL_BROADCAST:
      r = coll_broadcast(comm, a);
      break;
    case COLL_REDUCE:
      r = coll_reduce(comm, a);
      break;
    case COLL_ALLGATHER:
      r = coll_allgather(comm, a);
      break;
    case COLL_REDUCESCATTER:
      r = coll_reducescatter(comm, a);
      break;
    case COLL_ALLTOALL:
      r = coll_alltoall(comm, a);
      break;
    case COLL_GATHER:
      r = coll_gather(comm, a);
      break;
    case COLL_SCATTER:
      r = coll_scatter(comm, a);
      break;
    case COLL_BARRIER:
      r = coll_barrier(comm);
      break;
    default:
      r = QCCL_ERR(qcclInternalError, "coll_run: kind %d is not a collective", (int)a->kind);
  }
  return r;
}

/* The counter slot of each kind. */
static const int coll_stat_slot[COLL_NUM_KINDS] = {
    [COLL_ALLREDUCE] = qcclStatAllReduce,
    [COLL_BROADCAST] = qcclStatBroadcast,
    [COLL_REDUCE] = qcclStatReduce,
    [COLL_ALLGATHER] = qcclStatAllGather,
    [COLL_REDUCESCATTER] = qcclStatReduceScatter,
    [COLL_ALLTOALL] = qcclStatAlltoAll,
    [COLL_GATHER] = qcclStatGather,
    [COLL_SCATTER] = qcclStatScatter,
    [COLL_SEND] = qcclStatSendRecv,
    [COLL_RECV] = qcclStatSendRecv,
    [COLL_BARRIER] = qcclStatBarrier,
};

int coll_stat_slot_of(coll_kind_t kind) {
  return coll_stat_slot[kind];
}

qcclResult_t coll_run(qcclComm_t comm, const coll_args_t* a) {
  int prev = coll_stats_enter(comm, coll_stat_slot[a->kind]);
  qcclResult_t r = qcclSuccess;
  /* NCCL's rule: a collective of zero elements is a no-op (its buffers may
   * be NULL) */
  if (a->count > 0 || a->kind == COLL_BARRIER)
    r = comm->nnodes > 1 ? coll_run_flat(comm, a) : coll_run_node(comm, a);
  coll_stats_leave(comm, prev);
  return comm_fail(comm, r);
}
