/*
 * mn_sticky - an error stays, on every rank, across hosts (issue 14,
 * point 2). Run on simulated hosts, e.g. qcclrun -n 4 --placement 0,0,1,1.
 *
 * Every rank of the last host calls AllReduce with one element more than
 * the ranks of the other hosts: the ranks of each host agree among
 * themselves (the node's check cannot see it), the hosts do not. Then
 * every rank makes three correct AllReduce calls (count 4, every input 1,
 * sum W). Required on every rank:
 *   - no call after the first failure seen anywhere returns success with
 *     a wrong sum (the failure was qcclRemoteError or qcclInvalidUsage:
 *     a rank whose receive matched a message of the other call, or a
 *     peer that told it);
 *   - the third correct call fails on every rank (the communicator stays
 *     failed everywhere), each call within QCCL_TIMEOUT + slack;
 *   - some rank failed the disagreeing call or the first correct one.
 * Before the fix the ranks that received over UCX got qcclInvalidUsage
 * while the others returned success, and the next correct call returned
 * success with the sum 2 instead of 4.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../mr/mr_util.h"

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const int W = t.nranks;
  int node, nnodes, local, lsize;
  if (qcclCommNodeInfo(t.comm, &node, &nnodes, &local, &lsize) != qcclSuccess || nnodes < 2)
    mr_die(&t, "needs ranks on 2 hosts or more");
  const char* te = getenv("QCCL_TIMEOUT");
  double limit = (te ? atof(te) : 600) + 10;
  mr_case_t c;
  if (mr_case_begin(&t, &c, "hosts disagree on count, then correct calls")) {
    const size_t n = 1 << 16;
    float* in = calloc(n + 1, sizeof *in);
    float* out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; i <= n; i++) in[i] = 1;
    size_t mine = node == nnodes - 1 ? n + 1 : n;
    double t0 = mr_now();
    qcclResult_t r0 = qcclAllReduce(in, out, mine, qcclFloat32, qcclSum, t.comm, NULL);
    printf("rank %d (host %d): disagreeing call: %s (%.3f s)\n", t.rank, node,
           qcclGetErrorString(r0), mr_now() - t0);
    if (mr_now() - t0 > limit) mr_case_fail(&c, "the disagreeing call took %.1f s", mr_now() - t0);
    int failed = r0 != qcclSuccess;
    qcclResult_t r[3];
    for (int k = 0; k < 3; k++) {
      float x[4] = {1, 1, 1, 1}, y[4] = {0, 0, 0, 0};
      t0 = mr_now();
      r[k] = qcclAllReduce(x, y, 4, qcclFloat32, qcclSum, t.comm, NULL);
      double el = mr_now() - t0;
      printf("rank %d: correct call %d: %s (%.3f s) sum %g\n", t.rank, k, qcclGetErrorString(r[k]),
             el, y[0]);
      if (el > limit) mr_case_fail(&c, "correct call %d took %.1f s", k, el);
      if (r[k] == qcclSuccess && y[0] != (float)W)
        mr_case_fail(&c, "correct call %d returned success with the sum %g, not %d", k, y[0], W);
      if (r[k] == qcclSuccess && failed)
        mr_case_fail(&c, "correct call %d succeeded after this rank saw a failure", k);
      failed |= r[k] != qcclSuccess;
    }
    if (r[2] == qcclSuccess)
      mr_case_fail(&c, "the third correct call succeeded: the error did not stay");
    qcclResult_t ae = qcclSuccess;
    qcclCommGetAsyncError(t.comm, &ae);
    if (ae == qcclSuccess) mr_case_fail(&c, "qcclCommGetAsyncError is qcclSuccess");
    free(in);
    free(out);
    mr_case_end(&c);
  }
  /* the communicator failed: report and leave without the collective
   * summary of mr_finish */
  printf("mn_sticky rank %d: %s\n", t.rank, t.failed ? "FAIL" : "PASS");
  fflush(stdout);
  qcclCommDestroy(t.comm);
  return t.failed ? 1 : 0;
}
