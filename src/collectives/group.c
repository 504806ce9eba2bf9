/*
 * group.c - group semantics (NCCL's): between qcclGroupStart and the
 * matching qcclGroupEnd calls are queued in this thread; the outermost
 * GroupEnd runs them in the order they were made. Consecutive sends and
 * receives form one batch that is progressed together (p2p_run), so
 * exchanges that depend on each other (a ring shift, pipeline stages)
 * cannot deadlock; collectives run one after the other.
 *
 * The queue is thread-local, as NCCL's group state is: the one piece of
 * per-thread state besides the last error message.
 */
#include "collectives/group.h"

#include <stdlib.h>

#include "core/log.h"
#include "collectives/zeropp/zero.h"

typedef struct {
  qcclComm_t comm;
  coll_args_t args;
  zero_op_t* zq; /* a ZeRO++ call (src/collectives/zeropp), or NULL */
} group_op_t;

static _Thread_local int group_depth;
static _Thread_local group_op_t* group_ops;
static _Thread_local int group_n, group_cap;

static int group_is_p2p(const coll_args_t* a) {
  return a->kind == COLL_SEND || a->kind == COLL_RECV;
}

static qcclResult_t group_grow(void) {
  if (group_n == group_cap) {
    int cap = group_cap ? group_cap * 2 : 16;
    group_op_t* ops = realloc(group_ops, sizeof *ops * (size_t)cap);
    if (!ops) return QCCL_ERR(qcclSystemError, "out of memory queueing a grouped call");
    group_ops = ops;
    group_cap = cap;
  }
  return qcclSuccess;
}

qcclResult_t group_submit(qcclComm_t comm, const coll_args_t* a) {
  if (group_depth == 0) {
    if (group_is_p2p(a)) return p2p_run(a, &comm, 1);
    return coll_run(comm, a);
  }
  QCCL_CHECK(group_grow());
  zero_op_t* zq = NULL;
  if (zero_policy_applies(comm, a)) {
    /* quantized by a policy: queued as its ZeRO++ call, so it can join a bucket */
    zq = malloc(sizeof *zq);
    if (!zq) return QCCL_ERR(qcclSystemError, "out of memory queueing a grouped call");
    qcclResult_t r = zero_policy_op(comm, a, zq);
    if (r != qcclSuccess) {
      free(zq);
      return r;
    }
  }
  group_ops[group_n].comm = comm;
  group_ops[group_n].args = *a;
  group_ops[group_n].zq = zq;
  group_n++;
  return qcclSuccess;
}

qcclResult_t group_submit_zero(qcclComm_t comm, const zero_op_t* op) {
  if (group_depth == 0) {
    zero_op_t* one = (zero_op_t*)op;
    return zero_run_ops(&one, 1);
  }
  QCCL_CHECK(group_grow());
  zero_op_t* zq = malloc(sizeof *zq);
  if (!zq) return QCCL_ERR(qcclSystemError, "out of memory queueing a grouped call");
  *zq = *op;
  group_ops[group_n].comm = comm;
  group_ops[group_n].args = (coll_args_t){COLL_BARRIER, NULL, NULL, 0, qcclUint8, qcclSum, -1};
  group_ops[group_n].zq = zq;
  group_n++;
  return qcclSuccess;
}

/* Runs the ZeRO++ calls [i, j) (zero_run_ops fuses what it can). */
static qcclResult_t group_run_zero(int i, int j) {
  zero_op_t** zs = malloc(sizeof *zs * (size_t)(j - i));
  if (!zs) return QCCL_ERR(qcclSystemError, "out of memory running a group");
  for (int k = i; k < j; k++) zs[k - i] = group_ops[k].zq;
  qcclResult_t r = zero_run_ops(zs, j - i);
  free(zs);
  return r;
}

qcclResult_t qcclGroupStart(void) {
  group_depth++;
  return qcclSuccess;
}

/* Runs ops [i, j) of one p2p batch. */
static qcclResult_t group_run_p2p(int i, int j) {
  int n = j - i;
  coll_args_t* args = malloc(sizeof *args * (size_t)n);
  qcclComm_t* comms = malloc(sizeof *comms * (size_t)n);
  qcclResult_t r;
  if (!args || !comms) {
    r = QCCL_ERR(qcclSystemError, "out of memory running a group");
  } else {
    for (int k = 0; k < n; k++) {
      args[k] = group_ops[i + k].args;
      comms[k] = group_ops[i + k].comm;
    }
    r = p2p_run(args, comms, n);
  }
  free(args);
  free(comms);
  return r;
}

qcclResult_t qcclGroupEnd(void) {
  if (group_depth == 0)
    return QCCL_ERR(qcclInvalidUsage, "qcclGroupEnd without a matching qcclGroupStart");
  if (--group_depth > 0) return qcclSuccess;
  err_clear();
  qcclResult_t r = qcclSuccess;
  int i = 0;
  while (i < group_n && r == qcclSuccess) {
    if (group_ops[i].zq != NULL) {
      int j = i;
      while (j < group_n && group_ops[j].zq != NULL) j++;
      r = group_run_zero(i, j);
      i = j;
    } else if (group_is_p2p(&group_ops[i].args)) {
      int j = i;
      while (j < group_n && group_is_p2p(&group_ops[j].args)) j++;
      r = group_run_p2p(i, j);
      i = j;
    } else {
      r = coll_run(group_ops[i].comm, &group_ops[i].args);
      i++;
    }
  }
  for (int k = 0; k < group_n; k++) free(group_ops[k].zq);
  group_n = 0;
  free(group_ops);
  group_ops = NULL;
  group_cap = 0;
  return r;
}
