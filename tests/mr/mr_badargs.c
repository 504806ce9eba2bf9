/*
 * mr_badargs - bad arguments are refused before any communication, with
 * the documented result and a qcclGetLastError message naming the argument.
 *
 * Ranks take turns: on turn k only rank k makes every bad call below, while
 * the others go straight on; then all ranks run a checked AllReduce. A bad
 * call that communicated (or left state behind) would hang or corrupt that
 * AllReduce; qcclCommGetAsyncError must still report qcclSuccess. Checked:
 *   NULL comm (every call)                      qcclInvalidArgument "comm"
 *   NULL sendbuff / recvbuff with count > 0     qcclInvalidArgument "sendbuff"/"recvbuff"
 *     (only where the buffer is used: root-only buffers on the root)
 *   count * element size overflowing size_t,
 *     and nranks * count * size for the gathering/scattering calls
 *                                               qcclInvalidArgument "count"
 *   datatype 12 and -1                          qcclInvalidArgument "datatype"
 *   op 5 and -1, avg on every integer type      qcclInvalidArgument "op"
 *   root -1 and nranks                          qcclInvalidArgument "root"
 *   peer -1 and nranks                          qcclInvalidArgument "peer"
 *   a stream that is not a host stream          qcclInvalidArgument "stream"
 *   NULL output of Count/UserRank/GetAsyncError/GetVersion  qcclInvalidArgument
 *   qcclGroupEnd without qcclGroupStart         qcclInvalidUsage
 *   qcclGetErrorString: a distinct non-empty string per result code
 * Finally, after qcclCommFinalize a collective is refused (no hang) while
 * the query functions still answer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mr_util.h"

static mr_case_t* cur;

static void expect(qcclResult_t got, qcclResult_t want, qcclComm_t comm, const char* name,
                   const char* call) {
  if (got != want) {
    mr_case_fail(cur, "%s returned %s (%d), expected %s", call, qcclGetErrorString(got), (int)got,
                 qcclGetErrorString(want));
    return;
  }
  const char* msg = qcclGetLastError(comm);
  if (!msg) {
    mr_case_fail(cur, "%s: qcclGetLastError returned NULL", call);
    return;
  }
  if (name && !strstr(msg, name))
    mr_case_fail(cur, "%s: message \"%s\" does not name \"%s\"", call, msg, name);
}

#define EXPECT(call, want, comm, name) expect((call), (want), (comm), (name), #call)

static void bad_calls(mr_t* t) {
  qcclComm_t comm = t->comm;
  const int W = t->nranks, me = t->rank;
  const qcclDataType_t dt = qcclInt32;
  const size_t n = 16;
  /* buffers large enough for every valid use with n */
  int32_t* s = calloc(n * (size_t)W, 4);
  int32_t* r = calloc(n * (size_t)W, 4);
  if (!s || !r) mr_die(t, "out of memory");
  const qcclComm_t NC = NULL;
  const qcclResult_t INV = qcclInvalidArgument;

  /* NULL comm */
  EXPECT(qcclAllReduce(s, r, n, dt, qcclSum, NC, NULL), INV, NULL, "comm");
  EXPECT(qcclBroadcast(s, r, n, dt, 0, NC, NULL), INV, NULL, "comm");
  EXPECT(qcclReduce(s, r, n, dt, qcclSum, 0, NC, NULL), INV, NULL, "comm");
  EXPECT(qcclAllGather(s, r, n, dt, NC, NULL), INV, NULL, "comm");
  EXPECT(qcclReduceScatter(s, r, n, dt, qcclSum, NC, NULL), INV, NULL, "comm");
  EXPECT(qcclAlltoAll(s, r, n, dt, NC, NULL), INV, NULL, "comm");
  EXPECT(qcclGather(s, r, n, dt, 0, NC, NULL), INV, NULL, "comm");
  EXPECT(qcclScatter(s, r, n, dt, 0, NC, NULL), INV, NULL, "comm");
  EXPECT(qcclSend(s, n, dt, 0, NC, NULL), INV, NULL, "comm");
  EXPECT(qcclRecv(r, n, dt, 0, NC, NULL), INV, NULL, "comm");
  EXPECT(qcclBarrier(NC, NULL), INV, NULL, "comm");
  int x = -7;
  qcclResult_t ae = qcclSuccess;
  EXPECT(qcclCommCount(NC, &x), INV, NULL, NULL);
  EXPECT(qcclCommUserRank(NC, &x), INV, NULL, NULL);
  EXPECT(qcclCommGetAsyncError(NC, &ae), INV, NULL, NULL);
  if (x != -7) mr_case_fail(cur, "a failed query wrote its output");

  /* NULL outputs */
  EXPECT(qcclCommCount(comm, NULL), INV, comm, NULL);
  EXPECT(qcclCommUserRank(comm, NULL), INV, comm, NULL);
  EXPECT(qcclCommGetAsyncError(comm, NULL), INV, comm, NULL);
  EXPECT(qcclGetVersion(NULL), INV, NULL, NULL);

  /* NULL buffers with count > 0 */
  EXPECT(qcclAllReduce(NULL, r, n, dt, qcclSum, comm, NULL), INV, comm, "sendbuff");
  EXPECT(qcclAllReduce(s, NULL, n, dt, qcclSum, comm, NULL), INV, comm, "recvbuff");
  EXPECT(qcclBroadcast(NULL, r, n, dt, me, comm, NULL), INV, comm, "sendbuff");
  EXPECT(qcclBroadcast(s, NULL, n, dt, me, comm, NULL), INV, comm, "recvbuff");
  EXPECT(qcclBroadcast(s, NULL, n, dt, (me + 1) % W, comm, NULL), INV, comm, "recvbuff");
  EXPECT(qcclReduce(NULL, r, n, dt, qcclSum, me, comm, NULL), INV, comm, "sendbuff");
  EXPECT(qcclReduce(NULL, r, n, dt, qcclSum, (me + 1) % W, comm, NULL), INV, comm, "sendbuff");
  EXPECT(qcclReduce(s, NULL, n, dt, qcclSum, me, comm, NULL), INV, comm, "recvbuff");
  EXPECT(qcclAllGather(NULL, r, n, dt, comm, NULL), INV, comm, "sendbuff");
  EXPECT(qcclAllGather(s, NULL, n, dt, comm, NULL), INV, comm, "recvbuff");
  EXPECT(qcclReduceScatter(NULL, r, n, dt, qcclSum, comm, NULL), INV, comm, "sendbuff");
  EXPECT(qcclReduceScatter(s, NULL, n, dt, qcclSum, comm, NULL), INV, comm, "recvbuff");
  EXPECT(qcclAlltoAll(NULL, r, n, dt, comm, NULL), INV, comm, "sendbuff");
  EXPECT(qcclAlltoAll(s, NULL, n, dt, comm, NULL), INV, comm, "recvbuff");
  EXPECT(qcclGather(NULL, r, n, dt, me, comm, NULL), INV, comm, "sendbuff");
  EXPECT(qcclGather(NULL, r, n, dt, (me + 1) % W, comm, NULL), INV, comm, "sendbuff");
  EXPECT(qcclGather(s, NULL, n, dt, me, comm, NULL), INV, comm, "recvbuff");
  EXPECT(qcclScatter(NULL, r, n, dt, me, comm, NULL), INV, comm, "sendbuff");
  EXPECT(qcclScatter(s, NULL, n, dt, me, comm, NULL), INV, comm, "recvbuff");
  EXPECT(qcclScatter(s, NULL, n, dt, (me + 1) % W, comm, NULL), INV, comm, "recvbuff");
  EXPECT(qcclSend(NULL, n, dt, (me + 1) % W, comm, NULL), INV, comm, "sendbuff");
  EXPECT(qcclRecv(NULL, n, dt, (me + 1) % W, comm, NULL), INV, comm, "recvbuff");

  /* count * size overflow */
  const size_t huge = SIZE_MAX / 2 + 1; /* * 4 bytes overflows */
  EXPECT(qcclAllReduce(s, r, huge, dt, qcclSum, comm, NULL), INV, comm, "count");
  EXPECT(qcclBroadcast(s, r, huge, dt, 0, comm, NULL), INV, comm, "count");
  EXPECT(qcclReduce(s, r, huge, dt, qcclSum, 0, comm, NULL), INV, comm, "count");
  EXPECT(qcclAllGather(s, r, huge, dt, comm, NULL), INV, comm, "count");
  EXPECT(qcclReduceScatter(s, r, huge, dt, qcclSum, comm, NULL), INV, comm, "count");
  EXPECT(qcclAlltoAll(s, r, huge, dt, comm, NULL), INV, comm, "count");
  EXPECT(qcclGather(s, r, huge, dt, 0, comm, NULL), INV, comm, "count");
  EXPECT(qcclScatter(s, r, huge, dt, 0, comm, NULL), INV, comm, "count");
  EXPECT(qcclSend(s, huge, dt, (me + 1) % W, comm, NULL), INV, comm, "count");
  EXPECT(qcclRecv(r, huge, dt, (me + 1) % W, comm, NULL), INV, comm, "count");
  if (W >= 2) {
    /* count * 4 fits, nranks * count * 4 does not */
    const size_t big = SIZE_MAX / (4 * (size_t)W) + 1;
    EXPECT(qcclAllGather(s, r, big, dt, comm, NULL), INV, comm, "count");
    EXPECT(qcclReduceScatter(s, r, big, dt, qcclSum, comm, NULL), INV, comm, "count");
    EXPECT(qcclAlltoAll(s, r, big, dt, comm, NULL), INV, comm, "count");
    EXPECT(qcclGather(s, r, big, dt, me, comm, NULL), INV, comm, "count");
    EXPECT(qcclScatter(s, r, big, dt, me, comm, NULL), INV, comm, "count");
  }

  /* unknown datatype */
  const qcclDataType_t bad_dts[2] = {(qcclDataType_t)12, (qcclDataType_t)-1};
  for (int i = 0; i < 2; i++) {
    qcclDataType_t b = bad_dts[i];
    EXPECT(qcclAllReduce(s, r, n, b, qcclSum, comm, NULL), INV, comm, "datatype");
    EXPECT(qcclBroadcast(s, r, n, b, 0, comm, NULL), INV, comm, "datatype");
    EXPECT(qcclReduce(s, r, n, b, qcclSum, 0, comm, NULL), INV, comm, "datatype");
    EXPECT(qcclAllGather(s, r, n, b, comm, NULL), INV, comm, "datatype");
    EXPECT(qcclReduceScatter(s, r, n, b, qcclSum, comm, NULL), INV, comm, "datatype");
    EXPECT(qcclAlltoAll(s, r, n, b, comm, NULL), INV, comm, "datatype");
    EXPECT(qcclGather(s, r, n, b, 0, comm, NULL), INV, comm, "datatype");
    EXPECT(qcclScatter(s, r, n, b, 0, comm, NULL), INV, comm, "datatype");
    EXPECT(qcclSend(s, n, b, (me + 1) % W, comm, NULL), INV, comm, "datatype");
    EXPECT(qcclRecv(r, n, b, (me + 1) % W, comm, NULL), INV, comm, "datatype");
  }

  /* unknown op, avg on integers */
  const qcclRedOp_t bad_ops[2] = {(qcclRedOp_t)5, (qcclRedOp_t)-1};
  for (int i = 0; i < 2; i++) {
    qcclRedOp_t b = bad_ops[i];
    EXPECT(qcclAllReduce(s, r, n, qcclFloat32, b, comm, NULL), INV, comm, "op");
    EXPECT(qcclReduce(s, r, n, qcclFloat32, b, 0, comm, NULL), INV, comm, "op");
    EXPECT(qcclReduceScatter(s, r, n, qcclFloat32, b, comm, NULL), INV, comm, "op");
  }
  static const qcclDataType_t ints[6] = {qcclInt8,   qcclUint8, qcclInt32,
                                         qcclUint32, qcclInt64, qcclUint64};
  for (int i = 0; i < 6; i++) {
    EXPECT(qcclAllReduce(s, r, n, ints[i], qcclAvg, comm, NULL), INV, comm, "op");
    EXPECT(qcclReduce(s, r, n, ints[i], qcclAvg, 0, comm, NULL), INV, comm, "op");
    EXPECT(qcclReduceScatter(s, r, n, ints[i], qcclAvg, comm, NULL), INV, comm, "op");
  }

  /* root and peer out of range */
  const int bad_ranks[2] = {-1, W};
  for (int i = 0; i < 2; i++) {
    int b = bad_ranks[i];
    EXPECT(qcclBroadcast(s, r, n, dt, b, comm, NULL), INV, comm, "root");
    EXPECT(qcclReduce(s, r, n, dt, qcclSum, b, comm, NULL), INV, comm, "root");
    EXPECT(qcclGather(s, r, n, dt, b, comm, NULL), INV, comm, "root");
    EXPECT(qcclScatter(s, r, n, dt, b, comm, NULL), INV, comm, "root");
    EXPECT(qcclSend(s, n, dt, b, comm, NULL), INV, comm, "peer");
    EXPECT(qcclRecv(r, n, dt, b, comm, NULL), INV, comm, "peer");
  }

  /* a stream that is not a host stream (the address of a buffer) */
  void* st = (void*)s;
  const qcclResult_t U = qcclInvalidArgument;
  EXPECT(qcclAllReduce(s, r, n, dt, qcclSum, comm, st), U, comm, "stream");
  EXPECT(qcclBroadcast(s, r, n, dt, 0, comm, st), U, comm, "stream");
  EXPECT(qcclReduce(s, r, n, dt, qcclSum, 0, comm, st), U, comm, "stream");
  EXPECT(qcclAllGather(s, r, n, dt, comm, st), U, comm, "stream");
  EXPECT(qcclReduceScatter(s, r, n, dt, qcclSum, comm, st), U, comm, "stream");
  EXPECT(qcclAlltoAll(s, r, n, dt, comm, st), U, comm, "stream");
  EXPECT(qcclGather(s, r, n, dt, 0, comm, st), U, comm, "stream");
  EXPECT(qcclScatter(s, r, n, dt, 0, comm, st), U, comm, "stream");
  EXPECT(qcclSend(s, n, dt, (me + 1) % W, comm, st), U, comm, "stream");
  EXPECT(qcclRecv(r, n, dt, (me + 1) % W, comm, st), U, comm, "stream");
  EXPECT(qcclBarrier(comm, st), U, comm, "stream");

  /* group misuse */
  EXPECT(qcclGroupEnd(), qcclInvalidUsage, NULL, NULL);

  free(s);
  free(r);
}

static void check_error_strings(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "badargs error strings")) return;
  const char* seen[qcclNumResults];
  for (int i = 0; i < qcclNumResults; i++) {
    seen[i] = qcclGetErrorString((qcclResult_t)i);
    if (!seen[i] || !*seen[i]) {
      mr_case_fail(&c, "qcclGetErrorString(%d) is NULL or empty", i);
      continue;
    }
    for (int j = 0; j < i; j++)
      if (seen[j] && strcmp(seen[i], seen[j]) == 0)
        mr_case_fail(&c, "qcclGetErrorString(%d) == qcclGetErrorString(%d) (\"%s\")", i, j,
                     seen[i]);
  }
  if (!qcclGetErrorString((qcclResult_t)qcclNumResults) || !qcclGetErrorString((qcclResult_t)-1))
    mr_case_fail(&c, "qcclGetErrorString of an unknown code is NULL");
  int v = 0;
  if (qcclGetVersion(&v) != qcclSuccess || v != QCCL_VERSION_CODE)
    mr_case_fail(&c, "qcclGetVersion gave %d, header says %d", v, QCCL_VERSION_CODE);
  mr_case_end(&c);
}

/* all ranks: an AllReduce that must be exact, and no asynchronous error */
static void sync_check(mr_t* t, int turn) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "badargs sync after turn %d", turn)) return;
  const size_t n = 1031;
  int64_t* v = malloc(n * sizeof *v);
  if (!v) mr_die(t, "out of memory");
  for (size_t i = 0; i < n; i++) v[i] = (int64_t)(t->rank + 1) * (int64_t)(i + turn);
  MR_OK(&c, qcclAllReduce(v, v, n, qcclInt64, qcclSum, t->comm, NULL));
  int64_t w = (int64_t)t->nranks * (t->nranks + 1) / 2;
  for (size_t i = 0; i < n; i++)
    if (v[i] != w * (int64_t)(i + turn)) {
      mr_case_fail(&c, "element %zu: got %lld expected %lld", i, (long long)v[i],
                   (long long)(w * (int64_t)(i + turn)));
      break;
    }
  qcclResult_t ae = qcclInternalError;
  MR_OK(&c, qcclCommGetAsyncError(t->comm, &ae));
  if (ae != qcclSuccess)
    mr_case_fail(&c, "qcclCommGetAsyncError reports %s after bad calls", qcclGetErrorString(ae));
  free(v);
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  check_error_strings(&t);
  for (int turn = 0; turn < t.nranks; turn++) {
    if (t.rank == turn) {
      mr_case_t c;
      if (mr_case_begin(&t, &c, "badargs rank %d alone", turn)) {
        cur = &c;
        bad_calls(&t);
        mr_case_end(&c);
      }
    }
    sync_check(&t, turn);
  }
  /* after qcclCommFinalize: collectives refused, queries answered */
  mr_case_t c;
  if (mr_case_begin(&t, &c, "badargs after finalize")) {
    MR_OK(&c, qcclCommFinalize(t.comm));
    int32_t v = 1;
    double t0 = mr_now();
    qcclResult_t r = qcclAllReduce(&v, &v, 1, qcclInt32, qcclSum, t.comm, NULL);
    if (r == qcclSuccess) mr_case_fail(&c, "qcclAllReduce after qcclCommFinalize succeeded");
    if (mr_now() - t0 > 5)
      mr_case_fail(&c, "qcclAllReduce after finalize took %.1f s", mr_now() - t0);
    int n = 0;
    if (qcclCommCount(t.comm, &n) != qcclSuccess || n != t.nranks)
      mr_case_fail(&c, "qcclCommCount after finalize failed or gave %d", n);
    MR_OK(&c, qcclCommDestroy(t.comm));
    t.comm = NULL;
    mr_case_end(&c);
  }
  return mr_finish(&t);
}
