/*
 * eng_fault - faults with calls in flight, judged by tests/mr/fault.sh
 * (each survivor prints one "MRFAULT verdict" line with its elapsed time
 * and the limit it must meet).
 *
 *   --mode kill-queued     every rank queues calls on a host stream; the
 *                          last rank kills itself (SIGKILL) right after
 *                          queueing (a survivor's later call may be refused
 *                          at once with the communicator's error once an
 *                          earlier one failed). Every survivor's qcclStreamSynchronize
 *                          must fail (qcclRemoteError or qcclTimeout) within
 *                          QCCL_TIMEOUT + slack, qcclCommGetAsyncError must
 *                          hold the error, and a later call must fail at once.
 *   --mode abort-stream    ranks 0..W-2 queue an all-reduce that cannot end
 *                          (the last rank never calls) and wait in
 *                          qcclStreamSynchronize while a second thread calls
 *                          qcclCommAbort: the wait must end with an error
 *                          within 1 s of the abort.
 *   --mode abort-blocking  the same with the all-reduce called with stream
 *                          NULL in the second thread, and the abort from the
 *                          main thread (PyTorch's watchdog): the blocked call
 *                          must return an error within 1 s, and nothing may
 *                          crash (the communicator is freed only after it).
 *   --mode abort-recv      as abort-blocking with a qcclRecv from the last
 *                          rank, which never sends (over UCX across hosts).
 * --coll is accepted for fault.sh and ignored.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../mr/mr_util.h"

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

enum { N_ELEMS = 1 << 18 };

typedef struct {
  qcclComm_t comm;
  const char* mode;
  int last;
  float* buf;
  qcclResult_t result;
  double returned;
} blocked_t;

static void* blocked_main(void* arg) {
  blocked_t* b = arg;
  if (strcmp(b->mode, "abort-recv") == 0)
    b->result = qcclRecv(b->buf, N_ELEMS, qcclFloat32, b->last, b->comm, NULL);
  else
    b->result = qcclAllReduce(b->buf, b->buf, N_ELEMS, qcclFloat32, qcclSum, b->comm, NULL);
  b->returned = mr_now();
  return NULL;
}

typedef struct {
  qcclComm_t comm;
  double delay, at;
} aborter_t;

static void* aborter_main(void* arg) {
  aborter_t* a = arg;
  sleep_s(a->delay);
  a->at = mr_now();
  qcclCommAbort(a->comm);
  return NULL;
}

static void verdict(int rank, const char* mode, qcclResult_t r, double elapsed, double limit,
                    const char* extra) {
  int ok = r != qcclSuccess && elapsed <= limit && extra == NULL;
  printf("MRFAULT verdict rank=%d mode=%s result=%s elapsed=%.3f limit=%.3f %s%s%s\n", rank, mode,
         qcclGetErrorString(r), elapsed, limit, ok ? "PASS" : "FAIL", extra ? " " : "",
         extra ? extra : "");
  fflush(stdout);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const char* mode = mr_opt(&t, "--mode");
  if (mode == NULL) mr_die(&t, "--mode is required");
  const int W = t.nranks, last = W - 1;
  const char* e = getenv("QCCL_TIMEOUT");
  const char* sl = getenv("QCCL_MR_FAULT_SLACK");
  double timeout = e ? atof(e) : 600, slack = sl ? atof(sl) : 6;
  if (W < 2) mr_die(&t, "needs 2 ranks or more");
  float* buf = calloc(N_ELEMS, sizeof *buf);
  qcclStream_t s;
  if (qcclStreamCreate(&s) != qcclSuccess) mr_die(&t, "qcclStreamCreate");
  /* one good call first, so every rank is connected */
  if (qcclAllReduce(buf, buf, N_ELEMS, qcclFloat32, qcclSum, t.comm, NULL) != qcclSuccess)
    mr_die(&t, "first all-reduce: %s", qcclGetLastError(t.comm));

  if (strcmp(mode, "kill-queued") == 0) {
    if (t.rank == last) {
      for (int i = 0; i < 3; i++) qcclAllReduce(buf, buf, N_ELEMS, qcclFloat32, qcclSum, t.comm, s);
      printf("MRFAULT victim rank raises SIGKILL now\n");
      fflush(stdout);
      raise(SIGKILL);
    }
    sleep_s(0.05);
    double t0 = mr_now();
    /* a call queued once an earlier one has failed may return the
     * communicator's error at once; any other refusal is a bug */
    qcclResult_t q = qcclSuccess;
    for (int i = 0; i < 10 && q == qcclSuccess; i++) {
      q = qcclAllReduce(buf, buf, N_ELEMS, qcclFloat32, qcclSum, t.comm, s);
      if (q != qcclSuccess && (i == 0 || (q != qcclRemoteError && q != qcclTimeout)))
        mr_die(&t, "queueing call %d failed at once: %s", i, qcclGetLastError(t.comm));
    }
    qcclResult_t r = qcclStreamSynchronize(s);
    double el = mr_now() - t0;
    qcclResult_t ae = qcclSuccess;
    qcclCommGetAsyncError(t.comm, &ae);
    const char* extra = NULL;
    if (ae == qcclSuccess) extra = "qcclCommGetAsyncError is still qcclSuccess";
    double t1 = mr_now();
    qcclResult_t later = qcclAllReduce(buf, buf, 16, qcclFloat32, qcclSum, t.comm, NULL);
    if (later == qcclSuccess || mr_now() - t1 > 0.5) extra = "a later call did not fail at once";
    verdict(t.rank, mode, r, el, timeout + slack, extra);
    qcclStreamDestroy(s);
    qcclCommDestroy(t.comm);
    return 0;
  }

  if (strcmp(mode, "abort-stream") != 0 && strcmp(mode, "abort-blocking") != 0 &&
      strcmp(mode, "abort-recv") != 0)
    mr_die(&t, "unknown --mode %s", mode);
  if (t.rank == last) {
    /* never joins; leaves after the others aborted */
    sleep_s(2.0);
    qcclStreamDestroy(s);
    qcclCommDestroy(t.comm);
    free(buf);
    return 0;
  }
  aborter_t ab = {t.comm, 0.3, 0};
  double start = mr_now();
  qcclResult_t r;
  double returned;
  if (strcmp(mode, "abort-stream") == 0) {
    pthread_t th;
    if (qcclAllReduce(buf, buf, N_ELEMS, qcclFloat32, qcclSum, t.comm, s) != qcclSuccess)
      mr_die(&t, "queueing failed");
    pthread_create(&th, NULL, aborter_main, &ab);
    r = qcclStreamSynchronize(s);
    returned = mr_now();
    pthread_join(th, NULL);
  } else {
    blocked_t b = {t.comm, mode, last, buf, qcclSuccess, 0};
    pthread_t th;
    pthread_create(&th, NULL, blocked_main, &b);
    aborter_main(&ab);
    pthread_join(th, NULL);
    r = b.result;
    returned = b.returned;
  }
  /* returned before the abort (a peer's abort reached it first) counts as 0 */
  double after = returned > ab.at ? returned - ab.at : 0;
  /* an abort (this rank's or a peer's, ~0.3 s in) must be what ended it */
  verdict(t.rank, mode, r, after, 1.0,
          returned - start < 0.2 ? "the call ended before any rank aborted" : NULL);
  qcclStreamDestroy(s);
  free(buf);
  return 0;
}
