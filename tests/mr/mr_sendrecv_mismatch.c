/*
 * mr_sendrecv_mismatch - a receive whose byte count differs from the
 * matching send is reported as qcclInvalidUsage on the receiver, and the
 * receive buffer is never written past its end.
 *
 * Usage (under qcclrun, W >= 2; ranks above 1 only create the
 * communicator): mr_sendrecv_mismatch --case short|long [--group]
 *   short  rank 0 sends 100 int32, rank 1 receives 150 (fewer bytes came)
 *   long   rank 0 sends 150 int32, rank 1 receives 100 (more bytes came)
 *   big    rank 0 sends 4 MiB, rank 1 receives 2 MiB: the sender cannot
 *          finish (the ring is smaller than the message), and must fail
 *          with qcclInvalidUsage within 3 s, not wait for its timeout
 *          (issue 14: it waited QCCL_TIMEOUT); the receiver stays 4 s
 *          after its own failure, so its exit cannot be what tells the
 *          sender
 *   --group  both calls inside qcclGroupStart/End
 * In short and long the sender may succeed or fail (qcclInvalidUsage,
 * qcclRemoteError or qcclTimeout); both must return within QCCL_TIMEOUT
 * (+ 10 s of slack).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mr_util.h"

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const char* which = mr_opt(&t, "--case");
  const int group = mr_flag(&t, "--group");
  if (!which || (strcmp(which, "short") && strcmp(which, "long") && strcmp(which, "big")) ||
      t.nranks < 2)
    mr_die(&t, "usage: --case short|long|big [--group], W >= 2");
  const int big = strcmp(which, "big") == 0;
  const size_t send_n = big ? 1 << 20 : strcmp(which, "short") == 0 ? 100 : 150;
  const size_t recv_n = big ? 1 << 19 : strcmp(which, "short") == 0 ? 150 : 100;
  const char* tenv = getenv("QCCL_TIMEOUT");
  const double limit = (tenv ? atof(tenv) : 60.0) + 10.0;
  mr_case_t c;
  mr_case_begin(&t, &c, "mismatch %s%s", which, group ? " group" : "");
  qcclResult_t r = qcclSuccess;
  double t0 = mr_now();
  mr_buf_t b;
  mr_buf_alloc(&b, (t.rank == 0 ? send_n : recv_n) * 4, 0);
  if (t.rank == 0) {
    mr_fill(qcclInt32, qcclSum, MR_GEN_RAW, c.cseed, 0, t.nranks, b.p, 0, send_n);
    if (group) qcclGroupStart();
    r = qcclSend(b.p, send_n, qcclInt32, 1, t.comm, NULL);
    if (group) {
      qcclResult_t e = qcclGroupEnd();
      if (r == qcclSuccess) r = e;
    }
    printf("sender: %s (%.2f s)%s%s\n", qcclGetErrorString(r), mr_now() - t0, r ? ": " : "",
           r ? qcclGetLastError(t.comm) : "");
    if (r != qcclSuccess && r != qcclInvalidUsage && r != qcclRemoteError && r != qcclTimeout)
      mr_case_fail(&c, "sender got %s", qcclGetErrorString(r));
    if (big && (r != qcclInvalidUsage || mr_now() - t0 > 3.0))
      mr_case_fail(&c,
                   "sender of the larger message got %s after %.2f s: expected "
                   "qcclInvalidUsage within 3 s",
                   qcclGetErrorString(r), mr_now() - t0);
  } else if (t.rank == 1) {
    if (group) qcclGroupStart();
    r = qcclRecv(b.p, recv_n, qcclInt32, 0, t.comm, NULL);
    if (group) {
      qcclResult_t e = qcclGroupEnd();
      if (r == qcclSuccess) r = e;
    }
    printf("receiver: %s (%.2f s)%s%s\n", qcclGetErrorString(r), mr_now() - t0, r ? ": " : "",
           r ? qcclGetLastError(t.comm) : "");
    if (r != qcclInvalidUsage)
      mr_case_fail(&c, "receiver got %s, expected qcclInvalidUsage", qcclGetErrorString(r));
    else if (!*qcclGetLastError(t.comm))
      mr_case_fail(&c, "qcclGetLastError is empty after the failure");
    /* stay (as an application would): the sender must not learn of the
     * failure from this rank's exit */
    if (big) usleep(4000000);
  }
  mr_buf_check_guards(&c, &b, t.rank == 0 ? "send buffer" : "receive buffer");
  if (mr_now() - t0 > limit)
    mr_case_fail(&c, "took %.1f s, more than QCCL_TIMEOUT + 10 s", mr_now() - t0);
  mr_buf_free(&b);
  mr_case_end(&c);
  /* the communicator may be in error now: free it locally */
  qcclCommDestroy(t.comm);
  t.comm = NULL;
  return mr_finish(&t);
}
