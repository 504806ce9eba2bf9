/*
 * mr_agree - ranks that disagree on a call (QCCL_CHECK, collectives/agree.c).
 *
 * Each case makes a fresh communicator (a split of the job's), where the
 * last rank calls with one argument different from the others': count,
 * datatype, op, root, the collective itself, a quantization spec, a qgZ
 * configuration. Every rank must get qcclInvalidUsage (not success, not a
 * hang) with a message that names the argument, then every later call on
 * that communicator must fail on every rank too (the communicator stays
 * failed), while the job's communicator still works. A case where all
 * agree must pass, on the same kind of fresh communicator.
 *
 * A rooted call may end on a rank before the others have posted their
 * records (an eager Broadcast's root, a reader of the root it believes
 * in): that rank's call may return success; then (odd ranks) its next
 * call, which runs on the other lane, must fail, and qcclCommFinalize
 * (which compares what is left) must return qcclInvalidUsage naming the
 * argument.
 *
 *   --off   run with QCCL_CHECK=0: a disagreement on the op (which cannot
 *           hang) is then not noticed, and the call returns success.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mr_util.h"

enum {
  D_NONE,
  D_COUNT,
  D_TYPE,
  D_OP,
  D_ROOT,
  D_COLL,
  D_COLL_Q,
  D_SPEC_BITS,
  D_SPEC_BLOCK,
  D_RSQ_CFG,
  D_ARQ_OP,
  D_BCAST_ROOT,
  D_EXTRA_CALL,
  D_NUM
};
static const char* const dnames[D_NUM] = {"agree",
                                          "count",
                                          "datatype",
                                          "op",
                                          "root",
                                          "collective",
                                          "collective",
                                          "quantization spec",
                                          "quantization spec",
                                          "quantization spec",
                                          "op",
                                          "root",
                                          "collective"};
static const char* const cnames[D_NUM] = {"allreduce",
                                          "allreduce",
                                          "allreduce",
                                          "allreduce",
                                          "reduce",
                                          "allreduce vs allgather",
                                          "allgatherQ vs allgather",
                                          "allgatherQ bits",
                                          "allgatherQ block",
                                          "reducescatterQ inter bits",
                                          "allreduceQ sum vs avg",
                                          "broadcast",
                                          "an extra barrier on one rank"};

static qcclResult_t one_call(int d, int odd, qcclComm_t c, float* in, float* out, size_t n, int W) {
  qcclQuantSpec_t spec = QCCL_QUANT_SPEC_INITIALIZER;
  qcclReduceScatterQConfig_t cfg = QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER;
  switch (d) {
    case D_NONE:
      return qcclAllReduce(in, out, n, qcclFloat32, qcclSum, c, NULL);
    case D_COUNT:
      return qcclAllReduce(in, out, odd ? n + 1 : n, qcclFloat32, qcclSum, c, NULL);
    case D_TYPE:
      return qcclAllReduce(in, out, n, odd ? qcclInt32 : qcclFloat32, qcclSum, c, NULL);
    case D_OP:
      return qcclAllReduce(in, out, n, qcclFloat32, odd ? qcclMax : qcclSum, c, NULL);
    case D_ROOT:
      return qcclReduce(in, out, n, qcclFloat32, qcclSum, odd ? W - 1 : 0, c, NULL);
    case D_COLL:
      return odd ? qcclAllGather(in, out, n / (size_t)W, qcclFloat32, c, NULL)
                 : qcclAllReduce(in, out, n, qcclFloat32, qcclSum, c, NULL);
    case D_COLL_Q:
      return odd ? qcclAllGather(in, out, n / (size_t)W, qcclFloat32, c, NULL)
                 : qcclAllGatherQ(in, out, n / (size_t)W, qcclFloat32, &spec, c, NULL);
    case D_SPEC_BITS:
      spec.bits = odd ? 4 : 8;
      return qcclAllGatherQ(in, out, n / (size_t)W, qcclFloat32, &spec, c, NULL);
    case D_SPEC_BLOCK:
      spec.block = odd ? 128 : 256;
      return qcclAllGatherQ(in, out, n / (size_t)W, qcclFloat32, &spec, c, NULL);
    case D_RSQ_CFG:
      cfg.inter.bits = odd ? 8 : 4;
      return qcclReduceScatterQ(in, out, n / (size_t)W, qcclFloat32, qcclSum, &cfg, c, NULL);
    case D_ARQ_OP:
      return qcclAllReduceQ(in, out, n, qcclFloat32, odd ? qcclAvg : qcclSum, NULL, c, NULL);
    case D_BCAST_ROOT:
      return qcclBroadcast(in, out, n, qcclFloat32, odd ? 1 % W : 0, c, NULL);
    case D_EXTRA_CALL:
      if (odd) {
        qcclResult_t r = qcclBarrier(c, NULL);
        if (r != qcclSuccess) return r;
      }
      return qcclAllReduce(in, out, n, qcclFloat32, qcclSum, c, NULL);
  }
  return qcclInternalError;
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const int W = t.nranks;
  const int off = mr_flag(&t, "--off");
  const size_t n = 4096;
  float* in = calloc(2 * n * (size_t)W, sizeof *in);
  float* out = calloc(2 * n * (size_t)W, sizeof *out);
  for (size_t i = 0; i < 2 * n * (size_t)W; i++) in[i] = (float)(i % 13);
  for (int d = 0; d < D_NUM; d++) {
    if (off && d != D_OP && d != D_NONE) continue;
    if (W < 2 && d != D_NONE) continue;
    mr_case_t c;
    if (!mr_case_begin(&t, &c, "disagree on %s (%s)", dnames[d], cnames[d])) continue;
    qcclComm_t sub;
    MR_OK(&c, qcclCommSplit(t.comm, 0, t.rank, &sub, NULL));
    int odd = t.rank == W - 1;
    if (d == D_ROOT || d == D_BCAST_ROOT) {
      /* both lanes made first: the call after the disagreement runs on
       * the other lane */
      MR_OK(&c, qcclAllReduce(in, out, n, qcclFloat32, qcclSum, sub, NULL));
      MR_OK(&c, qcclAllReduce(in, out, n, qcclFloat32, qcclSum, sub, NULL));
    }
    qcclResult_t r = one_call(d, odd, sub, in, out, n, W);
    const char* msg = qcclGetLastError(sub);
    int deferred = 0;
    if (r == qcclSuccess && !off && (d == D_ROOT || d == D_BCAST_ROOT)) {
      /* this rank's part did not wait for every peer: its next call fails
       * (on the other lane with the peers' failure), and Finalize names
       * the disagreement */
      deferred = 1;
      if (t.rank % 2) {
        qcclResult_t next = qcclAllReduce(in, out, 8, qcclFloat32, qcclSum, sub, NULL);
        if (next == qcclSuccess) mr_case_fail(&c, "the call after the disagreement succeeded");
      }
      r = qcclCommFinalize(sub);
      msg = qcclGetLastError(sub);
    }
    if (d == D_NONE || off) {
      if (r != qcclSuccess)
        mr_case_fail(&c, "ranks that agree (or QCCL_CHECK=0) got %s: %s", qcclGetErrorString(r),
                     msg);
    } else {
      if (r != qcclInvalidUsage)
        mr_case_fail(&c, "got %s, not qcclInvalidUsage%s: %s", qcclGetErrorString(r),
                     deferred ? " (at the call after)" : "", msg);
      else if (!strstr(msg, dnames[d]) || !strstr(msg, "rank"))
        mr_case_fail(&c, "the message does not name %s and the ranks: %s", dnames[d], msg);
      /* the communicator stays failed on every rank */
      qcclResult_t later = qcclAllReduce(in, out, 8, qcclFloat32, qcclSum, sub, NULL);
      qcclResult_t ae = qcclSuccess;
      qcclCommGetAsyncError(sub, &ae);
      if (later == qcclSuccess || ae == qcclSuccess)
        mr_case_fail(&c, "after the disagreement a correct call gave %s (async error %s)",
                     qcclGetErrorString(later), qcclGetErrorString(ae));
    }
    MR_OK(&c, qcclCommDestroy(sub));
    /* the job's communicator is untouched */
    MR_OK(&c, qcclAllReduce(in, out, 8, qcclFloat32, qcclSum, t.comm, NULL));
    mr_case_end(&c);
  }
  free(in);
  free(out);
  return mr_finish(&t);
}
