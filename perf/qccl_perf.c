/*
 * qccl_perf.c - qccl-perf, the nccl-tests of qccl: the qccl backend of the
 * shared driver (one small run function per collective) and main().
 *
 *   qcclrun -n 4 -- qccl-perf allreduce -b 8 -e 256M -f 2
 *   mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 qccl-perf allgather
 *   torchrun --no-python --nproc-per-node 2 qccl-perf alltoall -b 1K -e 1M -f 4
 *   qccl-perf quant -b 64K -e 16M -f 4        (the codec alone, one process)
 *   qcclrun -n 4 -- qccl-perf reducescatter_q -q int4 -d bfloat16   (ZeRO++, no -c check)
 *
 * The communicator comes from the launcher's environment
 * (qcclCommInitFromEnv). Only include/qccl.h is used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"
#include "qccl.h"

/* Bytes this rank put on the wires per call of one size (quantized runs). */
typedef struct {
  size_t count;
  uint64_t calls, intra, inter;
} qp_wire_t;

#define QP_MAX_SIZES 64

typedef struct {
  qcclComm_t comm;
  int rank, nranks;
  char err[512];
  /* quantized runs (allgather_q, reducescatter_q, allreduce_q) */
  qcclQuantSpec_t spec;
  qcclReduceScatterQConfig_t cfg;
  qp_wire_t wire[QP_MAX_SIZES];
  int nwire;
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

/* ---- the quantized collectives: the same buffers as their plain twins;
 * the bytes of every call are read from the counters, per size ---- */

static void qp_wire_add(qp_ctx_t* q, size_t n, const qcclStats_t* s0, const qcclStats_t* s1) {
  int i = 0;
  while (i < q->nwire && q->wire[i].count != n) i++;
  if (i == q->nwire) {
    if (q->nwire == QP_MAX_SIZES) return;
    q->wire[q->nwire++] = (qp_wire_t){n, 0, 0, 0};
  }
  q->wire[i].calls++;
  q->wire[i].intra += s1->total.bytesIntra - s0->total.bytesIntra;
  q->wire[i].inter += s1->total.bytesInter - s0->total.bytesInter;
}

static int qp_quantized(qp_ctx_t* q, int which, void* s, void* r, size_t n, qcclDataType_t t,
                        qcclRedOp_t op) {
  qcclStats_t s0 = QCCL_STATS_INITIALIZER, s1 = QCCL_STATS_INITIALIZER;
  qcclCommGetStats(q->comm, &s0);
  qcclResult_t res = which == PERF_ALLGATHER ? qcclAllGatherQ(s, r, n, t, &q->spec, q->comm, NULL)
                     : which == PERF_REDUCESCATTER
                         ? qcclReduceScatterQ(s, r, n, t, op, &q->cfg, q->comm, NULL)
                         : qcclAllReduceQ(s, r, n, t, op, &q->cfg, q->comm, NULL);
  qcclCommGetStats(q->comm, &s1);
  if (res == qcclSuccess) qp_wire_add(q, n, &s0, &s1);
  return res;
}

static int qp_allgather_q(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                          int root) {
  (void)root;
  return qp_quantized(ctx, PERF_ALLGATHER, s, r, n, t, op);
}

static int qp_reducescatter_q(void* ctx, void* s, void* r, size_t n, qcclDataType_t t,
                              qcclRedOp_t op, int root) {
  (void)root;
  return qp_quantized(ctx, PERF_REDUCESCATTER, s, r, n, t, op);
}

static int qp_allreduce_q(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                          int root) {
  (void)root;
  return qp_quantized(ctx, PERF_ALLREDUCE, s, r, n, t, op);
}

static const perf_run_fn qp_runs_q[PERF_NUM_COLLS] = {
    [PERF_ALLREDUCE] = qp_allreduce_q,
    [PERF_ALLGATHER] = qp_allgather_q,
    [PERF_REDUCESCATTER] = qp_reducescatter_q,
};

/* The extra columns of a quantized run: wire bytes per rank and call (all
 * transports, and across nodes), the mean over ranks. */
static void qp_print_wire(qp_ctx_t* q, const char* name, const char* fmt) {
  if (q->rank == 0)
    printf(
        "# %s %s: bytes sent per rank and call (mean over ranks, from qcclCommGetStats)\n"
        "# %12s  %16s  %16s\n",
        name, fmt, "count", "wire bytes", "inter-node bytes");
  for (int i = 0; i < q->nwire; i++) {
    double v[2] = {(double)(q->wire[i].intra + q->wire[i].inter) / (double)q->wire[i].calls,
                   (double)q->wire[i].inter / (double)q->wire[i].calls};
    if (qcclAllReduce(v, v, 2, qcclFloat64, qcclSum, q->comm, NULL) != qcclSuccess) return;
    if (q->rank == 0)
      printf("  %12zu  %16.0f  %16.0f\n", q->wire[i].count, v[0] / q->nranks, v[1] / q->nranks);
  }
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

/* -R 1: qcclMemAlloc, whose memory the ranks of a host read in place. */
static void* qp_mem_alloc(void* ctx, size_t bytes) {
  void* p = NULL;
  (void)ctx;
  return qcclMemAlloc(&p, bytes ? bytes : 1) == qcclSuccess ? p : NULL;
}

static void qp_mem_free(void* ctx, void* p) {
  (void)ctx;
  qcclMemFree(p);
}

static int qp_collective(const char* prog, const perf_coll_t* coll, const perf_args_t* a,
                         int quantized) {
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
                       qp_barrier, qp_supports, qp_error,         qp_mem_alloc,
                       qp_mem_free};
  char fmt[64] = "";
  if (quantized) {
    perf_quant_opt_t qo = a->quant;
    if (!qo.set) perf_parse_quant("int8", &qo);
    perf_quant_name(&qo, fmt, sizeof fmt);
    q.spec = (qcclQuantSpec_t)QCCL_QUANT_SPEC_INITIALIZER;
    q.spec.bits = qo.bits;
    q.spec.block = qo.block;
    q.spec.mode = qo.asym ? qcclQuantAsymmetric : qcclQuantSymmetric;
    q.spec.rotate = qo.rotate;
    q.spec.rounding = qo.stochastic ? qcclRoundStochastic : qcclRoundNearest;
    /* the reductions: -q across nodes, int8 (same block, rotation) inside */
    q.cfg = (qcclReduceScatterQConfig_t)QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER;
    q.cfg.inter = q.spec;
    q.cfg.intra = q.spec;
    q.cfg.intra.bits = 8;
    be.runs = qp_runs_q;
  }
  int rc = perf_run(coll, a, &be);
  if (quantized && rc == PERF_EXIT_OK) qp_print_wire(&q, prog, fmt);
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
    /* allgather_q, reducescatter_q, allreduce_q: the plain twin's buffers,
     * the quantized call; results are approximate, so the exact check is
     * off (tests/zeropp checks them against their error bounds) */
    char base[32];
    snprintf(base, sizeof base, "%.*s", (int)(strlen(name) - 2), name);
    a.check = 0;
    return qp_collective(prog, perf_coll_find(base), &a, 1);
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
  return qp_collective(prog, coll, &a, 0);
}
