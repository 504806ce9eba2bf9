/*
 * mr_departure - a rank that returns from a collective and at once destroys
 * its communicator must not make the collective fail on slower ranks: once
 * a rank's call has returned, the others need nothing more from it.
 *
 * Each round makes a sub-communicator (qcclCommSplit, one color) of the
 * job, runs one AllReduce on it (int8 sum, count 2^(12 + round % 11),
 * up to 2^22),
 * checks the result, and destroys the sub-communicator immediately, with no
 * barrier: with more ranks than cores, some ranks are still inside the
 * AllReduce when the first ones destroy. Every call must succeed with the
 * right result; a failure is reported with the message the library gave.
 * 40 rounds (10 with --quick).
 */
#include <stdio.h>
#include <stdlib.h>

#include "mr_util.h"

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const int W = t.nranks, me = t.rank;
  const int rounds = t.quick ? 10 : 40;
  const size_t nmax = (size_t)1 << 22;
  int8_t* v = malloc(nmax);
  if (!v) mr_die(&t, "out of memory");
  for (int round = 0; round < rounds; round++) {
    mr_case_t c;
    if (!mr_case_begin(&t, &c, "departure round=%d", round)) continue;
    const size_t n = (size_t)1 << (12 + round % 11);
    qcclComm_t sub = NULL;
    MR_OK(&c, qcclCommSplit(t.comm, 0, me, &sub, NULL));
    for (size_t i = 0; i < n; i++) v[i] = (int8_t)((me + 1) * (int)(i % 5));
    qcclResult_t r = qcclAllReduce(v, v, n, qcclInt8, qcclSum, sub, NULL);
    if (r != qcclSuccess) {
      mr_case_fail(&c, "qcclAllReduce (count %zu) returned %s: \"%s\"", n, qcclGetErrorString(r),
                   qcclGetLastError(sub));
    } else {
      const int w = W * (W + 1) / 2;
      for (size_t i = 0; i < n; i++)
        if (v[i] != (int8_t)(w * (int)(i % 5))) {
          mr_case_fail(&c, "element %zu: got %d expected %d", i, v[i], (int8_t)(w * (int)(i % 5)));
          break;
        }
    }
    MR_OK(&c, qcclCommDestroy(sub));
    mr_case_end(&c);
  }
  free(v);
  return mr_finish(&t);
}
