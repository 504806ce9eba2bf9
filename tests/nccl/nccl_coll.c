/*
 * nccl_coll.c - an NCCL program (the CUDA toolkit's nccl.h) run on qccl's
 * drop-in libnccl.so.2 with host buffers: every collective, send / recv,
 * groups, split, the config and scalable inits, the queries, ncclMemAlloc
 * and the calls that cannot be mapped (each an error naming the call).
 *
 * Every result is checked against an independent reference that each rank
 * computes from all ranks' inputs (nt_util.h): exact for integers (with the
 * type's wrap-around), within a few ulps times the sum of magnitudes for
 * f32 / f64. Counts 0, 1, 1009 and one random count in [2, 40000]; in place
 * and out of place alternate; every root for the rooted calls.
 *   usage: qcclrun -n W -- nccl_coll     (W >= 1; QCCL_TEST_SEED replays)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nt_util.h"

static int W, R;
static ncclComm_t comm;

static void* xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (p == NULL) nt_fail("out of memory (%zu bytes)", n);
  memset(p, 0xa5, n); /* never zero: a result that was not written shows */
  return p;
}

static void fill(void* buf, int tag, int r, size_t base, size_t n, ncclDataType_t t, int small) {
  for (size_t i = 0; i < n; i++) nt_store(buf, i, t, nt_value(tag, r, base + i, t, small));
}

/* ------------------------------------------------------------------------ */

static void t_allreduce(size_t count, ncclDataType_t t, ncclRedOp_t op, int in_place, int tag) {
  int small = op == ncclProd;
  size_t es = nt_size(t);
  void* send = xmalloc(count * es);
  void* recv = in_place ? send : xmalloc(count * es);
  fill(send, tag, R, 0, count, t, small);
  NT_CHECK(ncclAllReduce(send, recv, count, t, op, comm, NULL));
  char what[128];
  snprintf(what, sizeof what, "ncclAllReduce %s op %d count %zu%s", nt_type_name(t), (int)op, count,
           in_place ? " in place" : "");
  for (size_t i = 0; i < count; i++) {
    double mag, ref = nt_reduce_ref(tag, i, t, op, small, NULL, 0, &mag);
    nt_compare(recv, i, t, op, ref, mag, W, what);
  }
  if (!in_place) free(recv);
  free(send);
}

static void t_reduce(size_t count, ncclDataType_t t, ncclRedOp_t op, int root, int tag) {
  size_t es = nt_size(t);
  void* send = xmalloc(count * es);
  void* recv = R == root ? xmalloc(count * es) : NULL; /* NULL elsewhere, as NCCL allows */
  fill(send, tag, R, 0, count, t, 0);
  NT_CHECK(ncclReduce(send, recv, count, t, op, root, comm, NULL));
  if (R == root) {
    char what[128];
    snprintf(what, sizeof what, "ncclReduce %s op %d root %d count %zu", nt_type_name(t), (int)op,
             root, count);
    for (size_t i = 0; i < count; i++) {
      double mag, ref = nt_reduce_ref(tag, i, t, op, 0, NULL, 0, &mag);
      nt_compare(recv, i, t, op, ref, mag, W, what);
    }
    free(recv);
  }
  free(send);
}

static void t_broadcast(size_t count, ncclDataType_t t, int root, int bcast, int tag) {
  size_t es = nt_size(t);
  void* buf = xmalloc(count * es);
  void* send = xmalloc(count * es);
  fill(send, tag, R, 0, count, t, 0); /* every rank its own values: only root's may arrive */
  if (R == root) memcpy(buf, send, count * es);
  if (bcast)
    NT_CHECK(ncclBcast(buf, count, t, root, comm, NULL));
  else
    NT_CHECK(ncclBroadcast(send, buf, count, t, root, comm, NULL));
  for (size_t i = 0; i < count; i++)
    if (nt_load(buf, i, t) != nt_value(tag, root, i, t, 0))
      nt_fail("%s %s root %d count %zu: element %zu differs", bcast ? "ncclBcast" : "ncclBroadcast",
              nt_type_name(t), root, count, i);
  free(send);
  free(buf);
}

static void t_allgather(size_t count, ncclDataType_t t, int in_place, int tag) {
  size_t es = nt_size(t);
  char* recv = xmalloc(count * es * (size_t)W);
  char* send = in_place ? recv + (size_t)R * count * es : xmalloc(count * es);
  fill(send, tag, R, 0, count, t, 0);
  NT_CHECK(ncclAllGather(send, recv, count, t, comm, NULL));
  for (int r = 0; r < W; r++)
    for (size_t i = 0; i < count; i++)
      if (nt_load(recv, (size_t)r * count + i, t) != nt_value(tag, r, i, t, 0))
        nt_fail("ncclAllGather %s count %zu%s: element %zu of rank %d differs", nt_type_name(t),
                count, in_place ? " in place" : "", i, r);
  if (!in_place) free(send);
  free(recv);
}

static void t_reducescatter(size_t count, ncclDataType_t t, ncclRedOp_t op, int in_place, int tag) {
  size_t es = nt_size(t);
  char* send = xmalloc(count * es * (size_t)W);
  char* recv = in_place ? send + (size_t)R * count * es : xmalloc(count * es);
  fill(send, tag, R, 0, count * (size_t)W, t, 0);
  NT_CHECK(ncclReduceScatter(send, recv, count, t, op, comm, NULL));
  char what[128];
  snprintf(what, sizeof what, "ncclReduceScatter %s op %d count %zu%s", nt_type_name(t), (int)op,
           count, in_place ? " in place" : "");
  for (size_t i = 0; i < count; i++) {
    double mag, ref = nt_reduce_ref(tag, (size_t)R * count + i, t, op, 0, NULL, 0, &mag);
    nt_compare(recv, i, t, op, ref, mag, W, what);
  }
  if (!in_place) free(recv);
  free(send);
}

static void t_alltoall(size_t count, ncclDataType_t t, int tag) {
  size_t es = nt_size(t);
  void* send = xmalloc(count * es * (size_t)W);
  void* recv = xmalloc(count * es * (size_t)W);
  fill(send, tag, R, 0, count * (size_t)W, t, 0); /* block j of rank r: elements j*count... */
  NT_CHECK(ncclAlltoAll(send, recv, count, t, comm, NULL));
  for (int r = 0; r < W; r++)
    for (size_t i = 0; i < count; i++)
      if (nt_load(recv, (size_t)r * count + i, t) != nt_value(tag, r, (size_t)R * count + i, t, 0))
        nt_fail("ncclAlltoAll %s count %zu: element %zu from rank %d differs", nt_type_name(t),
                count, i, r);
  free(recv);
  free(send);
}

static void t_gather_scatter(size_t count, ncclDataType_t t, int root, int tag) {
  size_t es = nt_size(t);
  void* send = xmalloc(count * es);
  void* all = xmalloc(count * es * (size_t)W);
  fill(send, tag, R, 0, count, t, 0);
  NT_CHECK(ncclGather(send, all, count, t, root, comm, NULL));
  if (R == root)
    for (int r = 0; r < W; r++)
      for (size_t i = 0; i < count; i++)
        if (nt_load(all, (size_t)r * count + i, t) != nt_value(tag, r, i, t, 0))
          nt_fail("ncclGather %s root %d count %zu: element %zu of rank %d differs",
                  nt_type_name(t), root, count, i, r);
  /* scatter back what root gathered, shifted by one rank */
  if (R == root) fill(all, tag + 1, root, 0, count * (size_t)W, t, 0);
  NT_CHECK(ncclScatter(all, send, count, t, root, comm, NULL));
  for (size_t i = 0; i < count; i++)
    if (nt_load(send, i, t) != nt_value(tag + 1, root, (size_t)R * count + i, t, 0))
      nt_fail("ncclScatter %s root %d count %zu: element %zu differs", nt_type_name(t), root, count,
              i);
  free(all);
  free(send);
}

/* Ring shift inside a group, a pairwise exchange with every peer (self
 * included), nested groups, and collectives inside a group. */
static void t_sendrecv(size_t count, int tag) {
  ncclDataType_t t = ncclInt32;
  size_t es = nt_size(t);
  int next = (R + 1) % W, prev = (R + W - 1) % W;
  void* send = xmalloc(count * es);
  void* recv = xmalloc(count * es);
  fill(send, tag, R, 0, count, t, 0);
  NT_CHECK(ncclGroupStart());
  NT_CHECK(ncclSend(send, count, t, next, comm, NULL));
  NT_CHECK(ncclRecv(recv, count, t, prev, comm, NULL));
  NT_CHECK(ncclGroupEnd());
  for (size_t i = 0; i < count; i++)
    if (nt_load(recv, i, t) != nt_value(tag, prev, i, t, 0))
      nt_fail("ring shift count %zu: element %zu from rank %d differs", count, i, prev);

  /* all pairs in one group (nested once), each pair its own values */
  char* sends = xmalloc(count * es * (size_t)W);
  char* recvs = xmalloc(count * es * (size_t)W);
  for (int p = 0; p < W; p++)
    fill(sends + (size_t)p * count * es, tag + 1, R * W + p, 0, count, t, 0);
  NT_CHECK(ncclGroupStart());
  NT_CHECK(ncclGroupStart());
  for (int p = 0; p < W; p++) {
    NT_CHECK(ncclSend(sends + (size_t)p * count * es, count, t, p, comm, NULL));
    NT_CHECK(ncclRecv(recvs + (size_t)p * count * es, count, t, p, comm, NULL));
  }
  NT_CHECK(ncclGroupEnd());
  NT_CHECK(ncclGroupEnd());
  for (int p = 0; p < W; p++)
    for (size_t i = 0; i < count; i++)
      if (nt_load(recvs + (size_t)p * count * es, i, t) != nt_value(tag + 1, p * W + R, i, t, 0))
        nt_fail("pairwise exchange count %zu: element %zu from rank %d differs", count, i, p);

  /* two collectives in one group: they run in order at ncclGroupEnd */
  int32_t a = R + 1, b = 0;
  double c = R * 0.5, d = 0;
  NT_CHECK(ncclGroupStart());
  NT_CHECK(ncclAllReduce(&a, &b, 1, ncclInt32, ncclSum, comm, NULL));
  NT_CHECK(ncclAllReduce(&c, &d, 1, ncclFloat64, ncclMax, comm, NULL));
  NT_CHECK(ncclGroupEnd());
  if (b != W * (W + 1) / 2 || d != (W - 1) * 0.5)
    nt_fail("collectives in a group: %d and %g, expected %d and %g", b, d, W * (W + 1) / 2,
            (W - 1) * 0.5);
  free(recvs);
  free(sends);
  free(recv);
  free(send);
}

/* ncclCommSplit: halves by parity with reversed keys, a split that leaves
 * rank 0 out, and a config on the split. */
static void t_split(int tag) {
  ncclComm_t sub;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.commName = "nccl-test-half";
  NT_CHECK(ncclCommSplit(comm, R % 2, -R, &sub, &cfg));
  int members[64], n = 0;
  for (int r = W - 1; r >= 0; r--)
    if (r % 2 == R % 2) members[n++] = r; /* key -r: the highest rank first */
  int sn, sr;
  NT_CHECK(ncclCommCount(sub, &sn));
  NT_CHECK(ncclCommUserRank(sub, &sr));
  if (sn != n || members[sr] != R)
    nt_fail("ncclCommSplit: rank %d of %d in the half, expected %d members with this rank", sr, sn,
            n);
  size_t count = 517;
  int64_t* x = xmalloc(count * 8);
  int64_t* y = xmalloc(count * 8);
  fill(x, tag, R, 0, count, ncclInt64, 0);
  NT_CHECK(ncclAllReduce(x, y, count, ncclInt64, ncclSum, sub, NULL));
  for (size_t i = 0; i < count; i++)
    nt_compare(y, i, ncclInt64, ncclSum,
               nt_reduce_ref(tag, i, ncclInt64, ncclSum, 0, members, n, NULL), 0, n,
               "ncclAllReduce on a split");
  NT_CHECK(ncclCommDestroy(sub));

  ncclComm_t rest = (ncclComm_t)&rest;
  NT_CHECK(ncclCommSplit(comm, R == 0 && W > 1 ? NCCL_SPLIT_NOCOLOR : 7, R, &rest, NULL));
  if (R == 0 && W > 1) {
    if (rest != NULL) nt_fail("ncclCommSplit with NCCL_SPLIT_NOCOLOR gave a communicator");
  } else {
    NT_CHECK(ncclCommCount(rest, &sn));
    if (sn != (W > 1 ? W - 1 : 1)) nt_fail("ncclCommSplit without rank 0: %d ranks", sn);
    int32_t one = 1, sum = 0;
    NT_CHECK(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, rest, NULL));
    if (sum != sn) nt_fail("ncclAllReduce without rank 0: %d, expected %d", sum, sn);
    NT_CHECK(ncclCommAbort(rest)); /* local, bounded: the others abort theirs too */
  }
  free(y);
  free(x);
}

/* Communicators made by ncclCommInitRankConfig (non-blocking accepted),
 * ncclCommInitRankScalable and ncclCommInitAll (one device). */
static void t_inits(void) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "nccl-test-config";
  ncclComm_t c2;
  nt_init_comm(&c2, 1, &cfg);
  int32_t v = R, s = -1;
  ncclResult_t async = ncclInProgress;
  NT_CHECK(ncclAllReduce(&v, &s, 1, ncclInt32, ncclMax, c2, NULL));
  NT_CHECK(ncclCommGetAsyncError(c2, &async));
  if (s != W - 1 || async != ncclSuccess)
    nt_fail("non-blocking config comm: max %d, async %d", s, (int)async);
  NT_CHECK(ncclCommFinalize(c2));
  NT_CHECK(ncclCommDestroy(c2));

  ncclUniqueId ids[2];
  nt_exchange_id(&ids[0], 2);
  ids[1] = ids[0];
  ncclComm_t c3;
  NT_CHECK(ncclGroupStart()); /* NCCL allows inits inside a group */
  NT_CHECK(ncclCommInitRankScalable(&c3, W, R, 2, ids, NULL));
  NT_CHECK(ncclGroupEnd());
  nt_id_done(2);
  s = -1;
  NT_CHECK(ncclAllReduce(&v, &s, 1, ncclInt32, ncclMin, c3, NULL));
  if (s != 0) nt_fail("scalable-init comm: min %d", s);
  NT_CHECK(ncclCommDestroy(c3));

  ncclComm_t one[2];
  NT_CHECK(ncclCommInitAll(one, 1, NULL));
  double x[3] = {1.5, -2, R}, y[3];
  NT_CHECK(ncclAllReduce(x, y, 3, ncclFloat64, ncclSum, one[0], NULL));
  if (memcmp(x, y, sizeof x) != 0) nt_fail("ncclCommInitAll(1): a sum over one rank changed");
  int n1;
  NT_CHECK(ncclCommCount(one[0], &n1));
  if (n1 != 1) nt_fail("ncclCommInitAll(1): %d ranks", n1);
  NT_CHECK(ncclCommDestroy(one[0]));
}

/* ncclMemAlloc buffers in an AllGather, then freed. */
static void t_memalloc(int tag) {
  size_t count = 3001;
  double *send, *recv;
  NT_CHECK(ncclMemAlloc((void**)&send, count * 8));
  NT_CHECK(ncclMemAlloc((void**)&recv, count * 8 * (size_t)W));
  fill(send, tag, R, 0, count, ncclFloat64, 0);
  NT_CHECK(ncclAllGather(send, recv, count, ncclFloat64, comm, NULL));
  for (int r = 0; r < W; r++)
    for (size_t i = 0; i < count; i++)
      if (recv[(size_t)r * count + i] != nt_value(tag, r, i, ncclFloat64, 0))
        nt_fail("ncclAllGather of ncclMemAlloc buffers: element %zu of rank %d", i, r);
  NT_CHECK(ncclMemFree(recv));
  NT_CHECK(ncclMemFree(send));
  int not_ours;
  nt_expect_error(ncclMemFree(&not_ours), ncclInvalidArgument, "ncclMemFree(stack pointer)",
                  "ncclMemFree", NULL);
}

/* What cannot be mapped, and bad arguments: errors naming the call. */
static void t_errors(void) {
  float f = 1;
  nt_expect_error(ncclAllReduce(&f, &f, 1, (ncclDataType_t)99, ncclSum, comm, NULL),
                  ncclInvalidArgument, "ncclAllReduce with datatype 99", "ncclAllReduce",
                  "datatype");
  nt_expect_error(ncclReduceScatter(&f, &f, 1, ncclFloat32, (ncclRedOp_t)9, comm, NULL),
                  ncclInvalidArgument, "ncclReduceScatter with op 9", "ncclReduceScatter", "op");
  nt_expect_error(ncclAllGather(&f, &f, 1, ncclFloat32, NULL, NULL), ncclInvalidArgument,
                  "ncclAllGather on comm NULL", "ncclAllGather", "comm");
  ncclRedOp_t op;
  nt_expect_error(ncclRedOpCreatePreMulSum(&op, &f, ncclFloat32, ncclScalarHostImmediate, comm),
                  ncclInvalidUsage, "ncclRedOpCreatePreMulSum", "ncclRedOpCreatePreMulSum",
                  "not supported");
  nt_expect_error(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument, "ncclRedOpDestroy(sum)",
                  "ncclRedOpDestroy", "built-in");
  ncclComm_t two[2];
  nt_expect_error(ncclCommInitAll(two, 2, NULL), ncclInvalidUsage, "ncclCommInitAll(2)",
                  "ncclCommInitAll", "ndev = 2");
  nt_expect_error(ncclCommRevoke(comm, 0), ncclInvalidUsage, "ncclCommRevoke", "ncclCommRevoke",
                  NULL);
  ncclComm_t shrunk;
  int excl = 0;
  nt_expect_error(ncclCommShrink(comm, &excl, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT),
                  ncclInvalidUsage, "ncclCommShrink", "ncclCommShrink", NULL);
  ncclWindow_t win;
  nt_expect_error(ncclCommWindowRegister(comm, &f, 4, &win, NCCL_WIN_DEFAULT), ncclInvalidUsage,
                  "ncclCommWindowRegister", "ncclCommWindowRegister", NULL);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  nt_expect_error(ncclGroupSimulateEnd(&sim), ncclInvalidUsage, "ncclGroupSimulateEnd",
                  "ncclGroupSimulateEnd", NULL);
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0x12345678;
  ncclComm_t c;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  nt_expect_error(ncclCommInitRankConfig(&c, W, id, R, &bad), ncclInvalidArgument,
                  "ncclCommInitRankConfig with a bad magic", "ncclCommInitRankConfig", "config");
  void* handle = NULL;
  NT_CHECK(ncclCommRegister(comm, &f, sizeof f, &handle));
  NT_CHECK(ncclCommDeregister(comm, handle));
  for (int r = 0; r < ncclNumResults; r++)
    if (ncclGetErrorString((ncclResult_t)r) == NULL) nt_fail("ncclGetErrorString(%d) is NULL", r);
  /* the communicator still works after the refused calls */
  int32_t one = 1, sum = 0;
  NT_CHECK(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, comm, NULL));
  if (sum != W) nt_fail("ncclAllReduce after the errors: %d", sum);
}

int main(void) {
  nt_setup();
  W = nt_nranks;
  R = nt_rank;
  nt_init_comm(&comm, 0, NULL);
  int n, r, dev = -1;
  ncclResult_t async = ncclInProgress;
  NT_CHECK(ncclCommCount(comm, &n));
  NT_CHECK(ncclCommUserRank(comm, &r));
  NT_CHECK(ncclCommCuDevice(comm, &dev));
  NT_CHECK(ncclCommGetAsyncError(comm, &async));
  if (n != W || r != R || dev != 0 || async != ncclSuccess)
    nt_fail("queries: count %d rank %d device %d async %d", n, r, dev, (int)async);

  size_t counts[4] = {0, 1, 1009, 2 + nt_hash(1, 2, 3) % 40000};
  int tag = 100;
  for (int k = 0; k < 4; k++) {
    size_t c = counts[k];
    int ip = k % 2;
    t_allreduce(c, ncclInt32, ncclSum, ip, tag++);
    t_allreduce(c, ncclInt32, ncclProd, !ip, tag++);
    t_allreduce(c, ncclUint8, ncclSum, ip, tag++); /* wraps mod 256 */
    t_allreduce(c, ncclInt64, ncclMin, !ip, tag++);
    t_allreduce(c, ncclFloat64, ncclSum, ip, tag++);
    t_allreduce(c, ncclFloat32, ncclAvg, !ip, tag++);
    t_allreduce(c, ncclFloat32, ncclMax, ip, tag++);
    t_allreduce(c, ncclBfloat16, ncclSum, !ip, tag++);
    t_broadcast(c, ncclFloat32, k % W, 0, tag++);
    t_broadcast(c, ncclInt64, (k + 1) % W, 1, tag++);
    t_allgather(c, ncclUint8, ip, tag++);
    t_allgather(c, ncclFloat64, !ip, tag++);
    t_reducescatter(c, ncclInt32, ncclSum, ip, tag++);
    t_reducescatter(c, ncclFloat64, ncclAvg, !ip, tag++);
    t_alltoall(c, ncclInt32, tag++);
    t_sendrecv(c, tag);
    tag += 2;
  }
  for (int root = 0; root < W; root++) {
    t_reduce(1009, ncclInt32, ncclSum, root, tag++);
    t_reduce(33, ncclFloat64, ncclMax, root, tag++);
    t_gather_scatter(777, ncclInt64, root, tag);
    tag += 2;
  }
  t_split(tag++);
  t_inits();
  t_memalloc(tag++);
  t_errors();
  NT_CHECK(ncclCommFinalize(comm));
  NT_CHECK(ncclCommDestroy(comm));
  NT_CHECK(ncclCommDestroy(NULL));
  printf("rank %d of %d: ok\n", R, W);
  return 0;
}
