/*
 * qccl_perf.c - qccl-perf, the nccl-tests of qccl: the qccl backend of the
 * shared driver (one small run function per collective) and main().
 *
 *   qcclrun -n 4 -- qccl-perf allreduce -b 8 -e 256M -f 2
 *   mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 qccl-perf allgather
 *   torchrun --no-python --nproc-per-node 2 qccl-perf alltoall -b 1K -e 1M -f 4
 *   qccl-perf quant -b 64K -e 16M -f 4        (the codec alone, one process)
 *
 * The communicator comes from the launcher's environment
 * (qcclCommInitFromEnv). Only include/qccl.h is used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"
#include "qccl.h"

typedef struct {
  qcclComm_t comm;
  int rank, nranks;
  char err[512];
} qp_ctx_t;

/* ---- the fourth function of each collective: the call ---- */

static int qp_allreduce(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                        int root) {
  (void)root;
  return qcclAllReduce(s, r, n, t, op, ((qp_ctx_t*)ctx)->comm, NULL);
}

static int qp_allgather(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                        int root) {
  (void)op, (void)root;
  return qcclAllGather(s, r, n, t, ((qp_ctx_t*)ctx)->comm, NULL);
}

static int qp_reducescatter(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                            int root) {
  (void)root;
  return qcclReduceScatter(s, r, n, t, op, ((qp_ctx_t*)ctx)->comm, NULL);
}

static int qp_alltoall(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                       int root) {
  (void)op, (void)root;
  return qcclAlltoAll(s, r, n, t, ((qp_ctx_t*)ctx)->comm, NULL);
}

static int qp_broadcast(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                        int root) {
  (void)op;
  return qcclBroadcast(s, r, n, t, root, ((qp_ctx_t*)ctx)->comm, NULL);
}

static int qp_reduce(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                     int root) {
  return qcclReduce(s, r, n, t, op, root, ((qp_ctx_t*)ctx)->comm, NULL);
}

static int qp_gather(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                     int root) {
  (void)op;
  return qcclGather(s, r, n, t, root, ((qp_ctx_t*)ctx)->comm, NULL);
}

static int qp_scatter(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                      int root) {
  (void)op;
  return qcclScatter(s, r, n, t, root, ((qp_ctx_t*)ctx)->comm, NULL);
}

/* A ring shift: send to rank+1, receive from rank-1, in one group. */
static int qp_sendrecv(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                       int root) {
  (void)op, (void)root;
  qp_ctx_t* q = ctx;
  int next = (q->rank + 1) % q->nranks, prev = (q->rank + q->nranks - 1) % q->nranks;
  qcclResult_t res = qcclGroupStart();
  if (res != qcclSuccess) return res;
  qcclResult_t rs = qcclSend(s, n, t, next, q->comm, NULL);
  qcclResult_t rr = qcclRecv(r, n, t, prev, q->comm, NULL);
  res = qcclGroupEnd();
  return rs != qcclSuccess ? rs : rr != qcclSuccess ? rr : res;
}

static const perf_run_fn qp_runs[PERF_NUM_COLLS] = {
    [PERF_ALLREDUCE] = qp_allreduce,
    [PERF_ALLGATHER] = qp_allgather,
    [PERF_REDUCESCATTER] = qp_reducescatter,
    [PERF_ALLTOALL] = qp_alltoall,
    [PERF_BROADCAST] = qp_broadcast,
    [PERF_REDUCE] = qp_reduce,
    [PERF_GATHER] = qp_gather,
    [PERF_SCATTER] = qp_scatter,
    [PERF_SENDRECV] = qp_sendrecv,
};

/* ---- what the driver needs besides the calls ---- */

static int qp_allreduce_f64(void* ctx, double* v, size_t n, perf_combine_t how) {
  qcclRedOp_t op = how == PERF_COMBINE_MIN ? qcclMin : how == PERF_COMBINE_MAX ? qcclMax : qcclSum;
  return qcclAllReduce(v, v, n, qcclFloat64, op, ((qp_ctx_t*)ctx)->comm, NULL);
}

static int qp_allgather_bytes(void* ctx, const void* mine, void* all, size_t len) {
  return qcclAllGather(mine, all, len, qcclUint8, ((qp_ctx_t*)ctx)->comm, NULL);
}

static int qp_barrier(void* ctx) {
  return qcclBarrier(((qp_ctx_t*)ctx)->comm, NULL);
}

static int qp_supports(void* ctx, perf_coll_id_t id, qcclDataType_t t, qcclRedOp_t op) {
  (void)ctx, (void)id, (void)t, (void)op;
  return 1;
}

static const char* qp_error(void* ctx, int rc) {
  qp_ctx_t* q = ctx;
  snprintf(q->err, sizeof q->err, "%s: %s", qcclGetErrorString((qcclResult_t)rc),
           qcclGetLastError(q->comm));
  return q->err;
}

static int qp_collective(const char* prog, const perf_coll_t* coll, const perf_args_t* a) {
  if (a->timeout_s > 0) { /* a peer that stops answering fails the call, not hangs it */
    char t[32];
    snprintf(t, sizeof t, "%d", a->timeout_s);
    setenv("QCCL_TIMEOUT", t, 1);
  }
  qp_ctx_t q;
  memset(&q, 0, sizeof q);
  qcclResult_t res = qcclCommInitFromEnv(&q.comm);
  if (res != qcclSuccess) {
    fprintf(stderr, "%s: qcclCommInitFromEnv: %s: %s\n", prog, qcclGetErrorString(res),
            qcclGetLastError(NULL));
    return PERF_EXIT_LIBRARY;
  }
  if (qcclCommUserRank(q.comm, &q.rank) != qcclSuccess ||
      qcclCommCount(q.comm, &q.nranks) != qcclSuccess) {
    fprintf(stderr, "%s: %s\n", prog, qcclGetLastError(q.comm));
    qcclCommAbort(q.comm);
    return PERF_EXIT_LIBRARY;
  }
  int v = 0;
  char version[32];
  qcclGetVersion(&v);
  snprintf(version, sizeof version, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
  perf_backend_t be = {"qccl",     version,     q.rank,           q.nranks,
                       &q,         qp_runs,     qp_allreduce_f64, qp_allgather_bytes,
                       qp_barrier, qp_supports, qp_error};
  int rc = perf_run(coll, a, &be);
  if (rc == PERF_EXIT_LIBRARY)
    qcclCommAbort(q.comm); /* peers blocked on this rank get an error, not a hang */
  else if (qcclCommFinalize(q.comm) != qcclSuccess || qcclCommDestroy(q.comm) != qcclSuccess) {
    fprintf(stderr, "%s: rank %d: teardown: %s\n", prog, q.rank, qcclGetLastError(q.comm));
    rc = rc ? rc : PERF_EXIT_LIBRARY;
  }
  return rc;
}

int main(int argc, char** argv) {
  const char* prog = "qccl-perf";
  if (argc < 2 || argv[1][0] == '-') {
    perf_usage(prog, 1);
    return PERF_EXIT_USAGE;
  }
  const char* name = argv[1];
  argv[1] = (char*)prog; /* the flags follow the collective's name */
  perf_args_t a;
  perf_args_defaults(&a);
  if (perf_args_parse(argc - 1, argv + 1, &a) != 0) {
    perf_usage(prog, 1);
    return PERF_EXIT_USAGE;
  }
  if (perf_coll_is_future_quantized(name)) {
    fprintf(stderr,
            "%s: %s: the quantized collectives (allgather_q, reducescatter_q, allreduce_q) "
            "arrive with issue 7 and are not in this build; try `%s quant` for the codec\n",
            prog, name, prog);
    return PERF_EXIT_USAGE;
  }
  if (strcmp(name, "quant") == 0) return perf_quant_main(&a);
  const perf_coll_t* coll = perf_coll_find(name);
  if (coll == NULL) {
    fprintf(stderr, "%s: unknown collective '%s'\n", prog, name);
    perf_usage(prog, 1);
    return PERF_EXIT_USAGE;
  }
  if (a.quant.set) {
    fprintf(stderr,
            "%s: -q sets the format of a quantized collective (allgather_q, ...) or of `quant`; "
            "%s is a plain collective\n",
            prog, name);
    return PERF_EXIT_USAGE;
  }
  return qp_collective(prog, coll, &a);
}
