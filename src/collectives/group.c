/*
 * group.c - group semantics (NCCL's) and the hand-over of calls to the
 * engine: between qcclGroupStart and the matching qcclGroupEnd calls are
 * queued in this thread; the outermost GroupEnd hands them to the engine
 * as one batch, run in the order they were made. Consecutive sends and
 * receives form one step progressed together (p2p_run), so exchanges that
 * depend on each other (a ring shift, pipeline stages) cannot deadlock;
 * consecutive calls of a layer above (group_kind_t: the ZeRO++ calls) go
 * to that layer together, which fuses them into buckets;
 * collectives run one after the other. Outside a group a call is a batch
 * of one.
 *
 * A batch runs now on the caller's thread (stream NULL) or is queued on a
 * host stream (engine.c); every call of a group must name the same
 * stream, since the group is one unit of that stream.
 *
 * The queue is thread-local, as NCCL's group state is: the one piece of
 * per-thread state besides the last error message.
 */
#include "collectives/group.h"

#include <stdlib.h>
#include <string.h>

#include "collectives/engine.h"
#include "collectives/p2p.h"
#include "collectives/select.h"
#include "core/log.h"

typedef struct {
  qcclComm_t comm;
  coll_args_t args;
  const group_kind_t* xk; /* a call of a layer above (group.h), or NULL */
  void* x;                /* its record */
} group_op_t;

typedef struct {
  group_op_t* ops;
  int n;
  int owned; /* ops and their records are the batch's, freed with it */
} group_batch_t;

/* Batches of up to GROUP_SMALL calls keep their bookkeeping on the stack. */
#define GROUP_SMALL 16

static _Thread_local int group_depth;
static _Thread_local group_op_t* group_ops;
static _Thread_local int group_n, group_cap;
static _Thread_local stream_t* group_stream;

static int group_is_p2p(const coll_args_t* a) {
  return a->kind == COLL_SEND || a->kind == COLL_RECV;
}

/* ---- running a batch (on the caller's thread or a stream's) ------------- */

/* Runs the calls [i, j) of one kind of a layer above, together. */
static qcclResult_t group_run_kind(const group_op_t* ops, int i, int j) {
  void* small[GROUP_SMALL];
  void** xs = j - i <= GROUP_SMALL ? small : malloc(sizeof *xs * (size_t)(j - i));
  if (!xs) return QCCL_ERR(qcclSystemError, "out of memory running a group");
  for (int k = i; k < j; k++) xs[k - i] = ops[k].x;
  qcclResult_t r = ops[i].xk->run(xs, j - i);
  if (xs != small) free(xs);
  return r;
}

/* Runs ops [i, j) of one p2p step. */
static qcclResult_t group_run_p2p_ops(const group_op_t* ops, int i, int j) {
  int n = j - i;
  if (n == 1) {
    qcclComm_t c = ops[i].comm;
    return p2p_run(&ops[i].args, &c, 1);
  }
  /* on the stack for the usual few (a call's latency is a few µs); not
   * zeroed (1 KiB of stores, 7 % of a small exchange's time): the first n
   * are filled below, which GCC cannot see */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  coll_args_t small_args[GROUP_SMALL];
  qcclComm_t small_comms[GROUP_SMALL];
  int small = n <= GROUP_SMALL;
  coll_args_t* args = small ? small_args : malloc(sizeof *args * (size_t)n);
  qcclComm_t* comms = small ? small_comms : malloc(sizeof *comms * (size_t)n);
  qcclResult_t r;
  if (!args || !comms) {
    r = QCCL_ERR(qcclSystemError, "out of memory running a group");
  } else {
    for (int k = 0; k < n; k++) {
      args[k] = ops[i + k].args;
      comms[k] = ops[i + k].comm;
    }
    r = p2p_run(args, comms, n);
  }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  if (!small) {
    free(args);
    free(comms);
  }
  return r;
}

/* Runs ops [i, j) of one p2p step: the user's sends and receives, each
 * counted as one call, their bytes under the same slot. */
static qcclResult_t group_run_p2p(const group_op_t* ops, int i, int j) {
  for (int k = i; k < j; k++) coll_stats_enter(ops[k].comm, qcclStatSendRecv, 1);
  qcclResult_t r = group_run_p2p_ops(ops, i, j);
  for (int k = i; k < j; k++) coll_stats_leave(ops[k].comm);
  return r;
}

/* Runs one plain collective of the user's on the communicator of its lane
 * (engine.h): counted under its slot, through the plan the selection
 * builds (kept in the lane's cache), as one plan with the agreement on
 * its arguments (agree.c), a failure recorded on the lane. */
static qcclResult_t group_run_coll(const group_op_t* op, const engine_turn_t* t, int j,
                                   qcclComm_t* ran) {
  *ran = op->comm;
  QCCL_CHECK(engine_lane(t, j, ran));
  qcclComm_t comm = *ran;
  const coll_args_t* a = &op->args;
  uint64_t rec[COLL_AGREE_WORDS];
  coll_agree_record((int)a->kind, a->count, a->datatype, a->op, a->root, 0, rec);
  coll_stats_enter(comm, coll_stat_slot_of(a->kind), 1);
  plan_t* call = NULL;
  qcclResult_t r = qcclSuccess;
  /* NCCL's rule: a collective of zero elements is a no-op (its buffers may
   * be NULL); its agreement still runs */
  if (a->count > 0 || a->kind == COLL_BARRIER) r = plan_get(comm, a, select_plan, NULL, &call);
  if (r == qcclSuccess) r = coll_agree_run(comm, rec, call);
  if (call != NULL) plan_put(call);
  coll_stats_leave(comm);
  /* a failure's message reaches the communicator the user called as the
   * run ends (engine_run), from whichever lane it came */
  return comm_fail(comm, r);
}

static qcclResult_t group_run_batch(void* arg, const engine_turn_t* turns) {
  const group_batch_t* b = arg;
  const group_op_t* ops = b->ops;
  qcclResult_t r = qcclSuccess;
  int used[b->n > 0 ? b->n : 1]; /* plain collectives run so far, per turn */
  memset(used, 0, sizeof used);
  int i = 0;
  while (i < b->n && r == qcclSuccess) {
    /* a comm that failed or was aborted since the call was issued */
    r = comm_usable("qccl", ops[i].comm);
    if (r != qcclSuccess) break;
    int j = i + 1;
    qcclComm_t ran = ops[i].comm; /* the lane a plain collective ran on */
    if (ops[i].xk != NULL) {
      while (j < b->n && ops[j].xk == ops[i].xk) j++;
      for (int k = i; k < j && r == qcclSuccess; k++) r = ops[k].xk->begin(ops[k].comm, ops[k].x);
      if (r == qcclSuccess) r = group_run_kind(ops, i, j);
    } else if (group_is_p2p(&ops[i].args)) {
      while (j < b->n && ops[j].xk == NULL && group_is_p2p(&ops[j].args)) j++;
      for (int k = i; k < j; k++) coll_wire_call(ops[k].comm, COLL_WIRE_P2P);
      r = group_run_p2p(ops, i, j);
    } else {
      int t = 0;
      while (turns[t].comm != ops[i].comm) t++;
      r = group_run_coll(&ops[i], &turns[t], used[t]++, &ran);
    }
    /* a call that failed while it ran left its ranks out of step (its
     * stages on internal communicators too): the communicator stays failed,
     * and across hosts every rank hears why (agree.c) */
    for (int k = i; k < j && r != qcclSuccess && r != qcclInvalidArgument; k++) {
      qcclResult_t rk = coll_agree_failed(k == i ? ran : ops[k].comm, r);
      if (k == i) r = rk;
      if (atomic_load(&ops[k].comm->async_error) == qcclSuccess || rk == qcclInvalidUsage) {
        ops[k].comm->async_error = rk;
        snprintf(ops[k].comm->fail_reason, sizeof ops[k].comm->fail_reason, "%s", err_last());
      }
    }
    i = j;
  }
  return r;
}

static void group_batch_free(void* arg) {
  group_batch_t* b = arg;
  if (b->owned) {
    for (int k = 0; k < b->n; k++) free(b->ops[k].x);
    free(b->ops);
  }
  free(b);
}

/* Hands ops[0..n) to the engine. owned: the ops array (and every record) is
 * heap memory the batch takes over; else it is the caller's, and the
 * batch is copied first if it has to wait on a stream. */
static qcclResult_t group_exec(group_op_t* ops, int n, int owned, stream_t* s) {
  /* the distinct communicators of the batch (on the stack for a few) */
  qcclComm_t small_comms[GROUP_SMALL], *comms = small_comms;
  int small_ncoll[GROUP_SMALL] = {0}, *ncoll = small_ncoll;
  if (n > GROUP_SMALL) {
    comms = malloc(sizeof *comms * (size_t)n);
    ncoll = calloc((size_t)n, sizeof *ncoll);
    if (comms == NULL || ncoll == NULL) {
      free(comms);
      free(ncoll);
      return QCCL_ERR(qcclSystemError, "out of memory running a group");
    }
  }
  int nc = 0;
  for (int k = 0; k < n; k++) {
    int m = 0;
    while (m < nc && comms[m] != ops[k].comm) m++;
    if (m == nc) comms[nc++] = ops[k].comm;
    if (ops[k].xk == NULL && !group_is_p2p(&ops[k].args)) ncoll[m]++;
  }
  /* one plain collective may run beside other lanes' calls */
  int alone = !(n == 1 && ncoll[0] == 1);
  qcclResult_t r;
  if (s == NULL) {
    group_batch_t b = {ops, n, 0};
    r = engine_submit(comms, ncoll, nc, alone, NULL, group_run_batch, &b, NULL);
    if (owned) {
      for (int k = 0; k < n; k++) free(ops[k].x);
      free(ops);
    }
  } else {
    group_batch_t* b = malloc(sizeof *b);
    if (b != NULL && !owned) {
      group_op_t* copy = malloc(sizeof *copy * (size_t)n);
      if (copy == NULL) {
        free(b);
        b = NULL;
      } else {
        for (int k = 0; k < n; k++) copy[k] = ops[k]; /* a lone record is copied by the caller */
        ops = copy;
      }
    }
    if (b == NULL) {
      r = QCCL_ERR(qcclSystemError, "out of memory queueing a call on a stream");
    } else {
      *b = (group_batch_t){ops, n, 1};
      r = engine_submit(comms, ncoll, nc, alone, s, group_run_batch, b, group_batch_free);
    }
  }
  if (n > GROUP_SMALL) {
    free(ncoll);
    free(comms);
  }
  return r;
}

/* ---- submitting calls --------------------------------------------------- */

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

/* A call in an open group must name the group's stream. */
static qcclResult_t group_check_stream(stream_t* s) {
  if (group_n > 0 && s != group_stream)
    return QCCL_ERR(qcclInvalidUsage,
                    "stream=%p differs from the stream of the group's first call (%p): a group "
                    "is one unit of one stream",
                    (void*)s, (void*)group_stream);
  group_stream = s;
  return qcclSuccess;
}

qcclResult_t group_submit(qcclComm_t comm, const coll_args_t* a, stream_t* s) {
  if (group_depth == 0) {
    group_op_t one = {comm, *a, NULL, NULL};
    return group_exec(&one, 1, 0, s);
  }
  QCCL_CHECK(group_check_stream(s));
  QCCL_CHECK(group_grow());
  group_ops[group_n] = (group_op_t){comm, *a, NULL, NULL};
  group_n++;
  return qcclSuccess;
}

qcclResult_t group_submit_call(qcclComm_t comm, const group_kind_t* k, const void* rec,
                               stream_t* s) {
  const coll_args_t none = {COLL_BARRIER, NULL, NULL, 0, qcclUint8, qcclSum, -1};
  if (group_depth == 0 && s == NULL) {
    group_op_t one = {comm, none, k, (void*)rec};
    return group_exec(&one, 1, 0, NULL);
  }
  if (group_depth > 0) QCCL_CHECK(group_check_stream(s));
  void* x = malloc(k->size);
  if (!x) return QCCL_ERR(qcclSystemError, "out of memory queueing a call");
  memcpy(x, rec, k->size);
  if (group_depth == 0) {
    group_op_t* one = malloc(sizeof *one);
    if (!one) {
      free(x);
      return QCCL_ERR(qcclSystemError, "out of memory queueing a call");
    }
    *one = (group_op_t){comm, none, k, x};
    return group_exec(one, 1, 1, s);
  }
  qcclResult_t r = group_grow();
  if (r != qcclSuccess) {
    free(x);
    return r;
  }
  group_ops[group_n] = (group_op_t){comm, none, k, x};
  group_n++;
  return qcclSuccess;
}

qcclResult_t qcclGroupStart(void) {
  group_depth++;
  return qcclSuccess;
}

qcclResult_t qcclGroupEnd(void) {
  if (group_depth == 0)
    return QCCL_ERR(qcclInvalidUsage, "qcclGroupEnd without a matching qcclGroupStart");
  if (--group_depth > 0) return qcclSuccess;
  err_clear();
  group_op_t* ops = group_ops;
  int n = group_n;
  stream_t* s = group_stream;
  int cap = group_cap;
  group_ops = NULL;
  group_n = group_cap = 0;
  group_stream = NULL;
  if (n == 0) {
    free(ops);
    return qcclSuccess;
  }
  if (s != NULL) return group_exec(ops, n, 1, s); /* the queued batch owns ops */
  qcclResult_t r = group_exec(ops, n, 0, NULL);
  for (int k = 0; k < n; k++) free(ops[k].x);
  /* the array serves this thread's next group, unless the batch started
   * one of its own */
  if (group_ops == NULL && group_depth == 0) {
    group_ops = ops;
    group_cap = cap;
  } else {
    free(ops);
  }
  return r;
}
