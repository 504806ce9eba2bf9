/*
 * launch_twice - two communicators from the environment in one process,
 * both alive at once (under PMIx each takes its own key and fence), then a
 * third after both are gone. Each AllReduce of the rank numbers must give
 * W(W-1)/2 on its communicator. Prints "launch_twice: PASS" on rank 0.
 */
#include <stdio.h>

#include "qccl.h"

static int check(qcclComm_t c, const char* what) {
  int rank = -1, n = -1;
  qcclCommUserRank(c, &rank);
  qcclCommCount(c, &n);
  double v = rank;
  qcclResult_t r = qcclAllReduce(&v, &v, 1, qcclFloat64, qcclSum, c, NULL);
  if (r != qcclSuccess || v != n * (n - 1) / 2.0) {
    printf("launch_twice: FAIL: %s: %s, sum %g of %d ranks\n", what, qcclGetErrorString(r), v, n);
    return 1;
  }
  return 0;
}

int main(void) {
  qcclComm_t a, b, c;
  if (qcclCommInitFromEnv(&a) != qcclSuccess || qcclCommInitFromEnv(&b) != qcclSuccess) {
    printf("launch_twice: FAIL: init: %s\n", qcclGetLastError(NULL));
    return 1;
  }
  int bad = check(b, "second") + check(a, "first");
  qcclCommDestroy(a);
  qcclCommDestroy(b);
  if (qcclCommInitFromEnv(&c) != qcclSuccess) {
    printf("launch_twice: FAIL: third init: %s\n", qcclGetLastError(NULL));
    return 1;
  }
  bad += check(c, "third");
  int rank = -1;
  qcclCommUserRank(c, &rank);
  qcclCommDestroy(c);
  if (rank == 0 && !bad) printf("launch_twice: PASS\n");
  return bad != 0;
}
