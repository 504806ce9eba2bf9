/*
 * eng_stream - host streams: every collective queued on a stream gives the
 * same bits as the blocking call; many calls on several streams; streams
 * of two communicators driven from two threads; events, queries, groups,
 * waits between streams; two streams of one communicator progressing at
 * once (lanes); destroying a communicator or a stream with calls
 * in flight; bad stream arguments.
 *
 * References: the blocking call (NULL stream) on the same inputs, compared
 * bit for bit, and exact integer sums where the result is known in closed
 * form (the 100-call and two-thread cases). Inputs come from the case
 * seed (mr_util), printed by rank 0.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../mr/mr_util.h"

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* ---- every collective: stream against blocking ---------------------- */

enum {
  K_ALLREDUCE,
  K_BROADCAST,
  K_REDUCE,
  K_ALLGATHER,
  K_REDUCESCATTER,
  K_ALLTOALL,
  K_GATHER,
  K_SCATTER,
  K_SENDRECV,
  K_BARRIER,
  K_AGQ,
  K_RSQ,
  K_ARQ,
  K_HPZ,
  K_NUM
};
static const char* const knames[K_NUM] = {
    "allreduce",  "broadcast",      "reduce",     "allgather",           "reducescatter",
    "alltoall",   "gather",         "scatter",    "sendrecv(ring)",      "barrier",
    "allgatherQ", "reducescatterQ", "allreduceQ", "hpZ secondary gather"};

/* Issues collective k on stream (NULL: blocking). in has W*count
 * elements, out W*count (both from the caller). */
static qcclResult_t issue(int k, mr_t* t, const void* in, void* out, size_t count,
                          qcclDataType_t dt, qcclStream_t stream, qcclSecondary_t sec,
                          unsigned long long gen) {
  qcclComm_t c = t->comm;
  int W = t->nranks, root = (int)(count % (size_t)W);
  qcclQuantSpec_t spec = QCCL_QUANT_SPEC_INITIALIZER;
  qcclResult_t r;
  switch (k) {
    case K_ALLREDUCE:
      return qcclAllReduce(in, out, count, dt, qcclSum, c, stream);
    case K_BROADCAST:
      return qcclBroadcast(in, out, count, dt, root, c, stream);
    case K_REDUCE:
      return qcclReduce(in, out, count, dt, qcclMax, root, c, stream);
    case K_ALLGATHER:
      return qcclAllGather(in, out, count, dt, c, stream);
    case K_REDUCESCATTER:
      return qcclReduceScatter(in, out, count, dt, qcclSum, c, stream);
    case K_ALLTOALL:
      return qcclAlltoAll(in, out, count, dt, c, stream);
    case K_GATHER:
      return qcclGather(in, out, count, dt, root, c, stream);
    case K_SCATTER:
      return qcclScatter(in, out, count, dt, root, c, stream);
    case K_SENDRECV:
      if ((r = qcclGroupStart()) != qcclSuccess) return r;
      qcclSend(in, count, dt, (t->rank + 1) % W, c, stream);
      qcclRecv(out, count, dt, (t->rank + W - 1) % W, c, stream);
      return qcclGroupEnd();
    case K_BARRIER:
      return qcclBarrier(c, stream);
    case K_AGQ:
      return qcclAllGatherQ(in, out, count, dt, &spec, c, stream);
    case K_RSQ:
      return qcclReduceScatterQ(in, out, count, dt, qcclAvg, NULL, c, stream);
    case K_ARQ:
      return qcclAllReduceQ(in, out, count, dt, qcclSum, NULL, c, stream);
    case K_HPZ:
      r = qcclAllGatherQSecondary(in, out, count, dt, &spec, sec, gen, c, stream);
      if (r != qcclSuccess) return r;
      return qcclSecondaryAllGather(sec, (char*)out + (size_t)W * count * mr_dt_size(dt), gen,
                                    stream);
  }
  return qcclInvalidArgument;
}

static void case_equal(mr_t* t, int k, qcclDataType_t dt, size_t count, qcclStream_t s) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "equal %s %s count=%zu", knames[k], mr_dt_name(dt), count)) return;
  int quant = k >= K_AGQ;
  if (quant && dt != qcclFloat32 && dt != qcclBfloat16) {
    mr_case_end(&c);
    return;
  }
  size_t W = (size_t)t->nranks, es = mr_dt_size(dt);
  size_t bytes = (2 * W + 1) * count * es; /* hpZ: the gather and then the node gather */
  char* in = malloc(bytes + 1);
  char* a = malloc(bytes + 1);
  char* b = malloc(bytes + 1);
  if (!in || !a || !b) mr_die(t, "out of memory");
  /* quantized kinds need finite values: the reduce generator gives them */
  mr_fill(dt, qcclSum, quant ? MR_GEN_REDUCE : MR_GEN_RAW, c.cseed, t->rank, t->nranks, in, 0,
          W * count);
  memset(a, 0x5a, bytes);
  memset(b, 0x5a, bytes);
  qcclSecondary_t sec = NULL;
  if (k == K_HPZ) MR_OK(&c, qcclSecondaryCreate(t->comm, count, dt, NULL, &sec));
  MR_OK(&c, issue(k, t, in, a, count, dt, NULL, sec, 7));
  MR_OK(&c, issue(k, t, in, b, count, dt, s, sec, 8));
  MR_OK(&c, qcclStreamSynchronize(s));
  if (memcmp(a, b, bytes) != 0) {
    size_t i = 0;
    while (a[i] == b[i]) i++;
    mr_case_fail(&c, "stream result differs from the blocking one at byte %zu of %zu", i, bytes);
  }
  if (sec) MR_OK(&c, qcclSecondaryDestroy(sec));
  free(in);
  free(a);
  free(b);
  mr_case_end(&c);
}

/* ---- many calls over three streams: exact integer sums --------------- */

/* rank r's element i of call j: (r + 1) * (j + 1) + i; the sum over ranks
 * is (j + 1) W (W + 1) / 2 + W i. */
static int32_t val(int r, int j, size_t i) {
  return (int32_t)((r + 1) * (j + 1) + (int)i);
}
static int32_t sum(int W, int j, size_t i) {
  return (int32_t)((j + 1) * W * (W + 1) / 2 + W * (int)i);
}

static void case_many(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "100 calls on 3 streams with an event each")) return;
  enum { N = 100, S = 3 };
  const size_t n = 257;
  qcclStream_t st[S];
  qcclEvent_t ev[N];
  int32_t* in = malloc(sizeof *in * n * N);
  int32_t* out = malloc(sizeof *out * n * N);
  if (!in || !out) mr_die(t, "out of memory");
  for (int s = 0; s < S; s++) MR_OK(&c, qcclStreamCreate(&st[s]));
  for (int j = 0; j < N; j++) {
    for (size_t i = 0; i < n; i++) in[(size_t)j * n + i] = val(t->rank, j, i);
    MR_OK(&c, qcclEventCreate(&ev[j]));
    /* odd calls in place */
    int32_t* dst = j % 2 ? in + (size_t)j * n : out + (size_t)j * n;
    MR_OK(&c, qcclAllReduce(in + (size_t)j * n, dst, n, qcclInt32, qcclSum, t->comm, st[j % S]));
    MR_OK(&c, qcclEventRecord(ev[j], st[j % S]));
  }
  /* waiting in reverse order: each event covers its own call */
  for (int j = N - 1; j >= 0; j--) {
    MR_OK(&c, qcclEventSynchronize(ev[j]));
    if (qcclEventQuery(ev[j]) != qcclSuccess)
      mr_case_fail(&c, "event %d not complete after its synchronize", j);
    const int32_t* res = j % 2 ? in + (size_t)j * n : out + (size_t)j * n;
    for (size_t i = 0; i < n; i++)
      if (res[i] != sum(t->nranks, j, i)) {
        mr_case_fail(&c, "call %d element %zu: %d, expected %d", j, i, res[i],
                     sum(t->nranks, j, i));
        break;
      }
    MR_OK(&c, qcclEventDestroy(ev[j]));
  }
  for (int s = 0; s < S; s++) {
    if (qcclStreamQuery(st[s]) != qcclSuccess) mr_case_fail(&c, "stream %d not idle", s);
    MR_OK(&c, qcclStreamDestroy(st[s]));
  }
  free(in);
  free(out);
  mr_case_end(&c);
}

/* ---- the call returns before the data is there ------------------------- */

/* Every kind of call returns before its peers have even issued theirs. */
static void case_async(mr_t* t, qcclStream_t s, int k) {
  mr_case_t c;
  if (t->nranks < 2 ||
      !mr_case_begin(t, &c, "queued %s returns at once; query in progress", knames[k]))
    return;
  const size_t n = 4096;
  float* in = calloc((2 * (size_t)t->nranks + 1) * n, sizeof *in);
  float* out = calloc((2 * (size_t)t->nranks + 1) * n, sizeof *out);
  for (size_t i = 0; i < (size_t)t->nranks * n; i++) in[i] = (float)(i % 17);
  qcclSecondary_t sec = NULL;
  if (k == K_HPZ) MR_OK(&c, qcclSecondaryCreate(t->comm, n, qcclFloat32, NULL, &sec));
  int32_t x = t->rank + 1, y = 0;
  qcclEvent_t e;
  MR_OK(&c, qcclEventCreate(&e));
  if (t->rank != 0) sleep_s(0.3);
  double t0 = mr_now();
  MR_OK(&c, issue(k, t, in, out, n, qcclFloat32, s, sec, 3));
  MR_OK(&c, qcclAllReduce(&x, &y, 1, qcclInt32, qcclSum, t->comm, s));
  MR_OK(&c, qcclEventRecord(e, s));
  double dt = mr_now() - t0;
  if (t->rank == 0) {
    qcclResult_t q = qcclStreamQuery(s), qe = qcclEventQuery(e);
    if (q != qcclInProgress || qe != qcclInProgress)
      mr_case_fail(&c, "query gave %s / event %s while peers had not called yet",
                   qcclGetErrorString(q), qcclGetErrorString(qe));
    if (dt > 0.1) mr_case_fail(&c, "the queued call took %.3f s to return", dt);
  }
  MR_OK(&c, qcclEventSynchronize(e));
  if (y != t->nranks * (t->nranks + 1) / 2) mr_case_fail(&c, "sum %d", y);
  MR_OK(&c, qcclEventDestroy(e));
  MR_OK(&c, qcclStreamSynchronize(s));
  if (sec) MR_OK(&c, qcclSecondaryDestroy(sec));
  free(in);
  free(out);
  mr_case_end(&c);
}

/* ---- two communicators, two threads, two streams ---------------------- */

typedef struct {
  qcclComm_t comm;
  int rank, nranks, which, bad;
} thr_t;

static void* thr_main(void* arg) {
  thr_t* a = arg;
  enum { N = 40 };
  const size_t n = 1031;
  qcclStream_t s;
  if (qcclStreamCreate(&s) != qcclSuccess) {
    a->bad = -1;
    return NULL;
  }
  int32_t* buf = malloc(sizeof *buf * n * N);
  for (int j = 0; j < N; j++)
    for (size_t i = 0; i < n; i++) buf[(size_t)j * n + i] = val(a->rank, j + 100 * a->which, i);
  for (int j = 0; j < N; j++)
    if (qcclAllReduce(buf + (size_t)j * n, buf + (size_t)j * n, n, qcclInt32, qcclSum, a->comm,
                      s) != qcclSuccess)
      a->bad++;
  if (qcclStreamSynchronize(s) != qcclSuccess) a->bad++;
  for (int j = 0; j < N; j++)
    for (size_t i = 0; i < n; i++)
      if (buf[(size_t)j * n + i] != sum(a->nranks, j + 100 * a->which, i)) a->bad++;
  qcclStreamDestroy(s);
  free(buf);
  return NULL;
}

static void case_threads(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "streams of two communicators from two threads")) return;
  thr_t a[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    a[i] = (thr_t){NULL, t->rank, t->nranks, i, 0};
    MR_OK(&c, qcclCommSplit(t->comm, 0, t->rank, &a[i].comm, NULL));
  }
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, thr_main, &a[i]);
  for (int i = 0; i < 2; i++) {
    pthread_join(th[i], NULL);
    if (a[i].bad) mr_case_fail(&c, "thread %d: %d wrong results or failed calls", i, a[i].bad);
    MR_OK(&c, qcclCommDestroy(a[i].comm));
  }
  mr_case_end(&c);
}

/* ---- a wait between streams of two communicators ---------------------- */

static void case_wait_event(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "stream waits for another stream's event")) return;
  qcclComm_t c2;
  MR_OK(&c, qcclCommSplit(t->comm, 0, t->rank, &c2, NULL));
  qcclStream_t s1, s2;
  qcclEvent_t e;
  MR_OK(&c, qcclStreamCreate(&s1));
  MR_OK(&c, qcclStreamCreate(&s2));
  MR_OK(&c, qcclEventCreate(&e));
  const size_t n = 1 << 16;
  int32_t* x = calloc(n, sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = val(t->rank, 0, i);
  if (t->rank == 0) sleep_s(0.05);
  /* s1: x = sum over ranks (comm 1); s2 after it: x = sum of that (comm 2) */
  MR_OK(&c, qcclAllReduce(x, x, n, qcclInt32, qcclSum, t->comm, s1));
  MR_OK(&c, qcclEventRecord(e, s1));
  MR_OK(&c, qcclStreamWaitEvent(s2, e));
  MR_OK(&c, qcclAllReduce(x, x, n, qcclInt32, qcclSum, c2, s2));
  MR_OK(&c, qcclStreamSynchronize(s2));
  for (size_t i = 0; i < n; i++)
    if (x[i] != t->nranks * sum(t->nranks, 0, i)) {
      mr_case_fail(&c, "element %zu: %d, expected %d", i, x[i], t->nranks * sum(t->nranks, 0, i));
      break;
    }
  MR_OK(&c, qcclStreamDestroy(s1));
  MR_OK(&c, qcclStreamDestroy(s2));
  MR_OK(&c, qcclEventDestroy(e));
  MR_OK(&c, qcclCommDestroy(c2));
  free(x);
  mr_case_end(&c);
}

/* ---- two streams of one communicator progress at once ------------------ */

/* Lanes (collectives/engine.h): on rank 0, stream A's call X waits behind a
 * call Z of a second communicator that the other ranks make only once
 * their stream B's call Y, issued after X, has ended. If one
 * communicator's calls ran one at a time, Y would wait for X, X for Z and
 * Z for Y: the case would fail with the communicator's timeout (10 s). */
static void case_lanes(mr_t* t) {
  mr_case_t c;
  const char* lanes = getenv("QCCL_LANES");
  if (t->nranks < 2 || (lanes != NULL && atoi(lanes) < 2) ||
      !mr_case_begin(t, &c, "two streams of one communicator progress at once"))
    return;
  qcclConfig_t cfg = QCCL_CONFIG_INITIALIZER;
  cfg.timeoutSec = 10;
  qcclComm_t cx, cz;
  MR_OK(&c, qcclCommSplit(t->comm, 0, t->rank, &cx, &cfg));
  MR_OK(&c, qcclCommSplit(t->comm, 0, t->rank, &cz, &cfg));
  const size_t n = 1 << 15;
  int32_t* x = malloc(sizeof *x * n * 4);
  for (size_t i = 0; i < n * 4; i++) x[i] = val(t->rank, (int)(i / n), i % n);
  int32_t *w = x, *bx = x + n, *by = x + 2 * n, *bz = x + 3 * n;
  /* collectives 0 and 1 of cx: lane 1 is made (by the second, alone) */
  MR_OK(&c, qcclAllReduce(w, w, n, qcclInt32, qcclSum, cx, NULL));
  MR_OK(&c, qcclAllReduce(w, w, n, qcclInt32, qcclSum, cx, NULL));
  qcclStream_t a, b;
  MR_OK(&c, qcclStreamCreate(&a));
  MR_OK(&c, qcclStreamCreate(&b));
  if (t->rank == 0) MR_OK(&c, qcclAllReduce(bz, bz, n, qcclInt32, qcclSum, cz, a));
  MR_OK(&c, qcclAllReduce(bx, bx, n, qcclInt32, qcclSum, cx, a)); /* X: lane 0 */
  MR_OK(&c, qcclAllReduce(by, by, n, qcclInt32, qcclSum, cx, b)); /* Y: lane 1 */
  MR_OK(&c, qcclStreamSynchronize(b));
  if (t->rank != 0) MR_OK(&c, qcclAllReduce(bz, bz, n, qcclInt32, qcclSum, cz, NULL));
  MR_OK(&c, qcclStreamSynchronize(a));
  for (int j = 1; j < 4; j++)
    for (size_t i = 0; i < n; i++)
      if (x[(size_t)j * n + i] != sum(t->nranks, j, i)) {
        mr_case_fail(&c, "call %d element %zu: %d, expected %d", j, i, x[(size_t)j * n + i],
                     sum(t->nranks, j, i));
        break;
      }
  qcclStats_t st = QCCL_STATS_INITIALIZER;
  MR_OK(&c, qcclCommGetStats(cx, &st));
  if (st.coll[qcclStatAllReduce].calls != 4)
    mr_case_fail(&c, "cx counted %llu all-reduces over its lanes, made 4",
                 (unsigned long long)st.coll[qcclStatAllReduce].calls);
  MR_OK(&c, qcclStreamDestroy(a));
  MR_OK(&c, qcclStreamDestroy(b));
  MR_OK(&c, qcclCommDestroy(cx));
  MR_OK(&c, qcclCommDestroy(cz));
  free(x);
  mr_case_end(&c);
}

/* ---- destroy with calls in flight ---------------------------------------- */

static void case_destroy(mr_t* t, int comm_first) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "destroy the %s with 20 calls queued",
                     comm_first ? "communicator" : "stream"))
    return;
  enum { N = 20 };
  const size_t n = 4099;
  qcclComm_t c2;
  MR_OK(&c, qcclCommSplit(t->comm, 0, t->rank, &c2, NULL));
  qcclStream_t s;
  MR_OK(&c, qcclStreamCreate(&s));
  int32_t* buf = malloc(sizeof *buf * n * N);
  for (int j = 0; j < N; j++)
    for (size_t i = 0; i < n; i++) buf[(size_t)j * n + i] = val(t->rank, j, i);
  if (t->rank == 1) sleep_s(0.2); /* the others' calls wait in their queues */
  for (int j = 0; j < N; j++)
    MR_OK(&c,
          qcclAllReduce(buf + (size_t)j * n, buf + (size_t)j * n, n, qcclInt32, qcclSum, c2, s));
  if (comm_first) {
    MR_OK(&c, qcclCommDestroy(c2)); /* waits for the 20 calls */
    MR_OK(&c, qcclStreamSynchronize(s));
    MR_OK(&c, qcclStreamDestroy(s));
  } else {
    MR_OK(&c, qcclStreamDestroy(s)); /* waits for the 20 calls */
    MR_OK(&c, qcclCommDestroy(c2));
  }
  for (int j = 0; j < N; j++)
    for (size_t i = 0; i < n; i++)
      if (buf[(size_t)j * n + i] != sum(t->nranks, j, i)) {
        mr_case_fail(&c, "call %d element %zu wrong after destroy", j, i);
        j = N;
        break;
      }
  free(buf);
  mr_case_end(&c);
}

/* ---- a bucket of ZeRO++ calls in a group, on a stream ----------------------- */

/* Three qwZ gathers and two qgZ reduce-scatters in one group (fused into
 * buckets at GroupEnd), queued on a stream, against the same group run
 * blocking: the same bits. */
static void case_bucket(mr_t* t, qcclStream_t s) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "ZeRO++ bucket (group of 5 calls) on a stream")) return;
  const size_t n = 3001, W = (size_t)t->nranks;
  float* in = malloc(sizeof *in * n * W);
  float* out[2];
  for (int v = 0; v < 2; v++) out[v] = calloc(5 * n * W, sizeof *out[v]);
  mr_fill(qcclFloat32, qcclSum, MR_GEN_REDUCE, c.cseed, t->rank, t->nranks, in, 0, n * W);
  qcclQuantSpec_t spec = QCCL_QUANT_SPEC_INITIALIZER;
  for (int v = 0; v < 2; v++) {
    qcclStream_t st = v ? s : NULL;
    MR_OK(&c, qcclGroupStart());
    for (int k = 0; k < 3; k++)
      MR_OK(&c, qcclAllGatherQ(in, out[v] + (size_t)k * n * W, n, qcclFloat32, &spec, t->comm, st));
    for (int k = 3; k < 5; k++)
      MR_OK(&c, qcclReduceScatterQ(in, out[v] + (size_t)k * n * W, n, qcclFloat32, qcclSum, NULL,
                                   t->comm, st));
    MR_OK(&c, qcclGroupEnd());
  }
  MR_OK(&c, qcclStreamSynchronize(s));
  if (memcmp(out[0], out[1], sizeof *out[0] * 5 * n * W) != 0)
    mr_case_fail(&c, "the bucket on a stream differs from the blocking one");
  free(in);
  free(out[0]);
  free(out[1]);
  mr_case_end(&c);
}

/* ---- groups on streams, bad arguments ------------------------------------ */

static void case_args(mr_t* t, qcclStream_t s) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "bad stream arguments")) return;
  int32_t x = 1, y;
  qcclResult_t r = qcclAllReduce(&x, &y, 1, qcclInt32, qcclSum, t->comm, (qcclStream_t)0x1);
  if (r != qcclInvalidArgument || !strstr(qcclGetLastError(t->comm), "stream"))
    mr_case_fail(&c, "a non-host stream gave %s (%s)", qcclGetErrorString(r),
                 qcclGetLastError(t->comm));
  qcclStream_t dead;
  MR_OK(&c, qcclStreamCreate(&dead));
  MR_OK(&c, qcclStreamDestroy(dead));
  r = qcclAllGatherQ(&x, &y, 1, qcclFloat32, NULL, t->comm, dead);
  if (r != qcclInvalidArgument)
    mr_case_fail(&c, "a destroyed stream gave %s", qcclGetErrorString(r));
  if (qcclStreamSynchronize(dead) != qcclInvalidArgument)
    mr_case_fail(&c, "synchronize of a destroyed stream did not fail");
  /* a group's calls must share one stream */
  MR_OK(&c, qcclGroupStart());
  MR_OK(&c, qcclAllReduce(&x, &y, 1, qcclInt32, qcclSum, t->comm, s));
  r = qcclAllReduce(&x, &y, 1, qcclInt32, qcclSum, t->comm, NULL);
  MR_OK(&c, qcclGroupEnd());
  if (r != qcclInvalidUsage)
    mr_case_fail(&c, "a second stream in a group gave %s", qcclGetErrorString(r));
  MR_OK(&c, qcclStreamSynchronize(s));
  if (y != t->nranks) mr_case_fail(&c, "the group's one call gave %d", y);
  if (qcclStreamCreate(NULL) != qcclInvalidArgument) mr_case_fail(&c, "qcclStreamCreate(NULL)");
  if (qcclEventRecord(NULL, s) != qcclInvalidArgument) mr_case_fail(&c, "qcclEventRecord(NULL)");
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  qcclStream_t s;
  if (qcclStreamCreate(&s) != qcclSuccess) mr_die(&t, "qcclStreamCreate failed");
  const qcclDataType_t dts[] = {qcclFloat32, qcclBfloat16, qcclInt32, qcclFloat64};
  const size_t counts[] = {0, 1, 1009, 65537};
  for (int k = 0; k < K_NUM; k++)
    for (int d = 0; d < 4; d++)
      for (int n = 0; n < 4; n++) {
        if (t.quick && counts[n] > 2000 && d > 0) continue;
        if (k == K_BARRIER && (d > 0 || n > 0)) continue;
        case_equal(&t, k, dts[d], counts[n], s);
      }
  case_bucket(&t, s);
  case_many(&t);
  for (int k = 0; k < K_NUM; k++)
    if (k != K_BARRIER || t.nranks > 1) case_async(&t, s, k);
  case_threads(&t);
  case_wait_event(&t);
  case_lanes(&t);
  case_destroy(&t, 1);
  case_destroy(&t, 0);
  case_args(&t, s);
  if (qcclStreamDestroy(s) != qcclSuccess) mr_die(&t, "qcclStreamDestroy failed");
  return mr_finish(&t);
}
