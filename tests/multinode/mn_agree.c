/*
 * mn_agree - ranks of different hosts that disagree on a call are told so,
 * every one of them, naming the argument (issue 14, points 3 and 7, across
 * hosts). Run on simulated hosts, e.g. qcclrun -n 4 --placement 0,0,1,1.
 *
 * Each case splits a fresh communicator off the launcher's one (which
 * stays healthy, for the cases' own bookkeeping), lets the ranks of the
 * last host make a call that differs from the other hosts' in one way
 * (the ranks of each host agree among themselves, so the node's check in
 * the segment cannot see it), and requires on every rank, within
 * QCCL_TIMEOUT / 2:
 *   - the call returns qcclInvalidUsage, or (a rank whose part of the call
 *     ended before any rank saw the difference, e.g. a broadcast's root)
 *     returns success and its next call returns qcclInvalidUsage;
 *   - qcclGetLastError(comm) names the argument that differs and two
 *     ranks;
 *   - qcclCommGetAsyncError reports the failure.
 * The point-to-point case: rank 0 sends 4 MiB to the first rank of the
 * last host, which receives 2 MiB; both fail promptly, naming both sizes
 * (before, the sender returned success).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mr/mr_util.h"

typedef enum { K_COUNT, K_DTYPE, K_OP, K_ROOT, K_COLL, K_SPEC, K_EXTRA, K_P2P, K_NUM } kind_t;
static const char* const kind_names[K_NUM] = {"count",      "datatype", "op",    "root",
                                              "collective", "spec",     "extra", "p2p"};
/* what the message must say */
static const char* const kind_words[K_NUM] = {
    "count (",          "datatype (",        "op (",    "root (",
    "the collective (", "quantization spec", "count (", "bytes where the matching qcclRecv"};

/* The case's call on this rank; odd: this rank is on the last host. */
static qcclResult_t call(kind_t k, int odd, qcclComm_t c, int rank, int W, float* in, float* out,
                         size_t n) {
  qcclQuantSpec_t q = QCCL_QUANT_SPEC_INITIALIZER;
  switch (k) {
    case K_COUNT:
      return qcclAllReduce(in, out, odd ? n + 1 : n, qcclFloat32, qcclSum, c, NULL);
    case K_DTYPE:
      return qcclAllReduce(in, out, n, odd ? qcclInt32 : qcclFloat32, qcclSum, c, NULL);
    case K_OP:
      return qcclAllReduce(in, out, n, qcclFloat32, odd ? qcclMax : qcclSum, c, NULL);
    case K_ROOT:
      return qcclBroadcast(in, out, n, qcclFloat32, odd ? W - 1 : 0, c, NULL);
    case K_COLL:
      return odd ? qcclAllGather(in, out, n / (size_t)W, qcclFloat32, c, NULL)
                 : qcclAllReduce(in, out, n, qcclFloat32, qcclSum, c, NULL);
    case K_SPEC:
      q.bits = odd ? 4 : 8;
      return qcclAllGatherQ(in, out, n / (size_t)W, qcclFloat32, &q, c, NULL);
    case K_EXTRA:
      if (odd) {
        qcclResult_t r = qcclAllReduce(in, out, 8, qcclFloat32, qcclSum, c, NULL);
        if (r != qcclSuccess) return r;
      }
      return qcclAllReduce(in, out, n, qcclFloat32, qcclSum, c, NULL);
    case K_P2P:
    default:
      (void)rank;
      return qcclSuccess; /* below */
  }
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const int W = t.nranks;
  int node, nnodes, local, lsize;
  if (qcclCommNodeInfo(t.comm, &node, &nnodes, &local, &lsize) != qcclSuccess || nnodes < 2)
    mr_die(&t, "needs ranks on 2 hosts or more");
  const char* te = getenv("QCCL_TIMEOUT");
  double limit = (te ? atof(te) : 600) / 2;
  const int odd = node == nnodes - 1;
  const size_t n = (size_t)W * 4096; /* 64 KiB per rank's block: some go eager, some not */
  float* in = calloc(n + 1, sizeof *in);
  float* out = calloc(n * (size_t)W + 1, sizeof *out);
  const size_t big = 4u << 20;
  char* p2p = calloc(big, 1);
  if (!in || !out || !p2p) mr_die(&t, "out of memory");
  for (size_t i = 0; i <= n; i++) in[i] = 1;
  /* the receiver of the p2p case: the first rank of the last host */
  int recv_rank = -1;
  {
    int mine = odd ? t.rank : W, first = W;
    /* every rank learns the lowest rank of the last host over the base comm */
    int* all = calloc((size_t)W, sizeof *all);
    if (qcclAllGather(&mine, all, 1, qcclInt32, t.comm, NULL) != qcclSuccess)
      mr_die(&t, "AllGather on the launcher's communicator failed");
    for (int i = 0; i < W; i++)
      if (all[i] < first) first = all[i];
    recv_rank = first;
    free(all);
  }
  for (int k = 0; k < K_NUM; k++) {
    mr_case_t c;
    if (!mr_case_begin(&t, &c, "hosts disagree: %s", kind_names[k])) continue;
    qcclComm_t sub = NULL;
    MR_OK(&c, qcclCommSplit(t.comm, 0, t.rank, &sub, NULL));
    double t0 = mr_now();
    qcclResult_t r;
    int part = 1; /* this rank takes part in the case */
    if (k == K_P2P) {
      if (t.rank == 0)
        r = qcclSend(p2p, big, qcclInt8, recv_rank, sub, NULL);
      else if (t.rank == recv_rank)
        r = qcclRecv(p2p, big / 2, qcclInt8, 0, sub, NULL);
      else
        part = 0, r = qcclSuccess;
    } else {
      r = call((kind_t)k, odd, sub, t.rank, W, in, out, n);
    }
    double el = mr_now() - t0;
    char msg[600];
    snprintf(msg, sizeof msg, "%s", qcclGetLastError(sub));
    int via_next = 0;
    if (part && r == qcclSuccess && k != K_P2P) {
      /* this rank's part ended before anyone saw the difference */
      via_next = 1;
      r = qcclAllReduce(in, out, 4, qcclFloat32, qcclSum, sub, NULL);
      el = mr_now() - t0;
      snprintf(msg, sizeof msg, "%s", qcclGetLastError(sub));
    }
    printf("rank %d (host %d) %s: %s%s in %.3f s: %s\n", t.rank, node, kind_names[k],
           qcclGetErrorString(r), via_next ? " (next call)" : "", el, msg);
    fflush(stdout);
    if (part) {
      if (r != qcclInvalidUsage)
        mr_case_fail(&c, "%s: %s, not invalid usage", kind_names[k], qcclGetErrorString(r));
      else if (strstr(msg, kind_words[k]) == NULL || strstr(msg, "rank") == NULL)
        mr_case_fail(&c, "%s: the message does not name \"%s\" and the ranks: %s", kind_names[k],
                     kind_words[k], msg);
      if (el > limit) mr_case_fail(&c, "%s: took %.1f s", kind_names[k], el);
      qcclResult_t ae = qcclSuccess;
      qcclCommGetAsyncError(sub, &ae);
      if (ae != qcclInvalidUsage)
        mr_case_fail(&c, "%s: qcclCommGetAsyncError gives %s", kind_names[k],
                     qcclGetErrorString(ae));
    }
    qcclCommDestroy(sub);
    mr_case_end(&c);
  }
  free(in);
  free(out);
  free(p2p);
  return mr_finish(&t);
}
