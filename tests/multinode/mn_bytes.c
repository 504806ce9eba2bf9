/*
 * mn_bytes.c - inter-node bytes per rank against the analytic volume of the
 * algorithm in use (one rank; run under qcclrun --placement on simulated
 * hosts).
 *
 * The program works out the placement itself (an all-gather of every
 * rank's QCCL_HOST_ID), forces the algorithm family with --algo flat|hier
 * (QCCL_ALGO, before init), runs each collective once with counts that do
 * not divide evenly, and checks the difference of qcclCommGetStats around
 * the call: calls +1 under the right slot, nothing under the others, and
 * bytesInter equal to what that algorithm must send from this rank to
 * other hosts (within 1% and a few bytes of part rounding). The volumes
 * (B = bytes of one rank's block, W ranks, N hosts of L ranks each):
 *   AllReduce    hier 2(N-1)/N x B/L (its rail ring on its share);
 *                flat 2(W-1)/W x B if its ring successor is on another host
 *   AllGather    hier (N-1) B; flat (W-1) B if the successor is remote
 *   ReduceScatter hier (N-1) B; flat (W-1) B if the successor is remote
 *   Broadcast    hier: the root (N-1) B; flat: the root B per remote rank
 *   Reduce       hier: the ranks of the root's local index 2(N-1)/N B;
 *                flat 2(W-1)/W B if the successor is remote
 *   AlltoAll     B per remote rank; Gather: B if the root is remote;
 *   Scatter      the root B per remote rank.
 * bf16 (b = bytes of one element's part in bf16, 2/W of an element for
 * AllReduce, 2 for ReduceScatter; partial sums travel as f32, 2b):
 *   AllReduce    hier 2(N-1)/N x 2B/L (its rail ring on f32 partials);
 *                flat (1 + 2(W-2) + W-1) b n if the successor is remote
 *                (the raw first step and the rounded all-gather in bf16)
 *   ReduceScatter hier (N-1) 2B (f32 partials); flat (1 + 2(W-2)) b n
 *                (the raw first step in bf16).
 * With --out FILE, rank 0 writes each host's total counted inter-node
 * bytes (over every call, these included) as JSON, for bytes_check.py to
 * hold against the interface counters of qcclrun --link-stats.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qccl.h"

#define HOST_BYTES 128

static int rank, nranks, failures;
static int* node_of;
static int nnodes, equal_hosts, hier;

static void die(const char* what, qcclResult_t r, qcclComm_t comm) {
  fprintf(stderr, "[%d] %s failed: %s (%s)\n", rank, what, qcclGetErrorString(r),
          qcclGetLastError(comm));
  exit(1);
}
#define CHECK(call, comm)                        \
  do {                                           \
    qcclResult_t r_ = (call);                    \
    if (r_ != qcclSuccess) die(#call, r_, comm); \
  } while (0)

static int remote(int a, int b) {
  return node_of[a] != node_of[b];
}
static int nremote(int r) {
  int n = 0;
  for (int i = 0; i < nranks; i++) n += remote(r, i);
  return n;
}
static int local_index(int r) {
  int l = 0;
  for (int i = 0; i < r; i++) l += node_of[i] == node_of[r];
  return l;
}

/* Runs one call and checks its counters against expect (bytes). */
static void check(qcclComm_t comm, const char* name, int slot, double expect,
                  qcclResult_t (*run)(qcclComm_t, void*), void* arg) {
  qcclStats_t before = QCCL_STATS_INITIALIZER, after = QCCL_STATS_INITIALIZER;
  CHECK(qcclCommGetStats(comm, &before), comm);
  CHECK(run(comm, arg), comm);
  CHECK(qcclCommGetStats(comm, &after), comm);
  for (int i = 0; i < qcclStatNumColls; i++) {
    uint64_t calls = after.coll[i].calls - before.coll[i].calls;
    uint64_t inter = after.coll[i].bytesInter - before.coll[i].bytesInter;
    uint64_t intra = after.coll[i].bytesIntra - before.coll[i].bytesIntra;
    if (i != slot && (calls || inter || intra)) {
      fprintf(stderr, "[%d] FAIL %s: slot %d counted %" PRIu64 " calls %" PRIu64 " bytes\n", rank,
              name, i, calls, inter + intra);
      failures++;
    }
  }
  uint64_t calls = after.coll[slot].calls - before.coll[slot].calls;
  double got = (double)(after.coll[slot].bytesInter - before.coll[slot].bytesInter);
  int ok = calls == 1 && fabs(got - expect) <= 0.01 * expect + 64;
  printf("[%d] %-18s %-4s inter bytes %10.0f expected %10.0f %s\n", rank, name,
         hier ? "hier" : "flat", got, expect, ok ? "ok" : "FAIL");
  if (!ok) failures++;
}

/* Buffers and calls. */
typedef struct {
  float *a, *b;
  size_t n;
  int root;
} buf_t;
static qcclResult_t run_allreduce(qcclComm_t c, void* p) {
  buf_t* x = p;
  return qcclAllReduce(x->a, x->b, x->n, qcclFloat32, qcclSum, c, NULL);
}
static qcclResult_t run_allreduce_bf16(qcclComm_t c, void* p) {
  buf_t* x = p;
  return qcclAllReduce(x->a, x->b, x->n, qcclBfloat16, qcclSum, c, NULL);
}
static qcclResult_t run_reducescatter_bf16(qcclComm_t c, void* p) {
  buf_t* x = p;
  return qcclReduceScatter(x->a, x->b, x->n, qcclBfloat16, qcclSum, c, NULL);
}
static qcclResult_t run_allgather(qcclComm_t c, void* p) {
  buf_t* x = p;
  return qcclAllGather(x->a, x->b, x->n, qcclFloat32, c, NULL);
}
static qcclResult_t run_reducescatter(qcclComm_t c, void* p) {
  buf_t* x = p;
  return qcclReduceScatter(x->a, x->b, x->n, qcclFloat32, qcclSum, c, NULL);
}
static qcclResult_t run_broadcast(qcclComm_t c, void* p) {
  buf_t* x = p;
  return qcclBroadcast(x->a, x->b, x->n, qcclFloat32, x->root, c, NULL);
}
static qcclResult_t run_reduce(qcclComm_t c, void* p) {
  buf_t* x = p;
  return qcclReduce(x->a, x->b, x->n, qcclFloat32, qcclSum, x->root, c, NULL);
}
static qcclResult_t run_alltoall(qcclComm_t c, void* p) {
  buf_t* x = p;
  return qcclAlltoAll(x->a, x->b, x->n, qcclFloat32, c, NULL);
}
static qcclResult_t run_gather(qcclComm_t c, void* p) {
  buf_t* x = p;
  return qcclGather(x->a, x->b, x->n, qcclFloat32, x->root, c, NULL);
}
static qcclResult_t run_scatter(qcclComm_t c, void* p) {
  buf_t* x = p;
  return qcclScatter(x->a, x->b, x->n, qcclFloat32, x->root, c, NULL);
}

int main(int argc, char** argv) {
  const char* algo = "hier";
  const char* out = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--algo") == 0) algo = argv[i + 1];
    if (strcmp(argv[i], "--out") == 0) out = argv[i + 1];
  }
  if (strcmp(algo, "hier") != 0 && strcmp(algo, "flat") != 0) {
    fprintf(stderr, "--algo must be flat or hier\n");
    return 2;
  }
  char env[256];
  snprintf(env, sizeof env, "allreduce:%s,allgather:%s,reducescatter:%s,broadcast:%s,reduce:%s",
           algo, algo, algo, algo, algo);
  setenv("QCCL_ALGO", env, 1);
  qcclComm_t comm;
  CHECK(qcclCommInitFromEnv(&comm), NULL);
  CHECK(qcclCommUserRank(comm, &rank), comm);
  CHECK(qcclCommCount(comm, &nranks), comm);

  /* the placement, from the host identities */
  char me[HOST_BYTES] = {0};
  const char* id = getenv("QCCL_HOST_ID");
  snprintf(me, sizeof me, "%s", id ? id : "?");
  char* ids = calloc((size_t)nranks, HOST_BYTES);
  node_of = calloc((size_t)nranks, sizeof *node_of);
  CHECK(qcclAllGather(me, ids, HOST_BYTES, qcclUint8, comm, NULL), comm);
  for (int i = 0; i < nranks; i++) {
    node_of[i] = -1;
    for (int j = 0; j < i && node_of[i] < 0; j++)
      if (strcmp(ids + i * HOST_BYTES, ids + j * HOST_BYTES) == 0) node_of[i] = node_of[j];
    if (node_of[i] < 0) node_of[i] = nnodes++;
  }
  int L = 0;
  equal_hosts = 1;
  for (int h = 0; h < nnodes; h++) {
    int n = 0;
    for (int i = 0; i < nranks; i++) n += node_of[i] == h;
    if (h == 0) L = n;
    if (n != L) equal_hosts = 0;
  }
  hier = strcmp(algo, "hier") == 0 && equal_hosts && L > 1 && nnodes > 1;
  if (rank == 0)
    printf("mn_bytes: W=%d on %d hosts (%s), algorithms %s\n", nranks, nnodes,
           equal_hosts ? "equal" : "uneven", hier ? "hier" : "flat");
  int N = nnodes, W = nranks;
  int succ_remote = remote(rank, (rank + 1) % W);
  const size_t n_ar = (1 << 20) + 7, n_blk = (1 << 18) + 3, n_a2a = (1 << 16) + 1;
  size_t maxn = n_blk * (size_t)W > n_ar ? n_blk * (size_t)W : n_ar;
  buf_t x = {malloc(maxn * sizeof(float)), malloc(maxn * sizeof(float)), 0, 0};
  for (size_t i = 0; i < maxn; i++) x.a[i] = (float)((i * 7 + (size_t)rank) % 13);
  double B;

  x.n = n_ar;
  B = 4.0 * (double)n_ar;
  check(comm, "AllReduce", qcclStatAllReduce,
        hier ? 2.0 * (N - 1) / N * B / L : (succ_remote ? 2.0 * (W - 1) / W * B : 0), run_allreduce,
        &x);
  /* bf16: the same buffers read as twice as many bf16 elements */
  x.n = n_ar;
  B = 2.0 * (double)n_ar;
  check(comm, "AllReduce bf16", qcclStatAllReduce,
        hier ? 2.0 * (N - 1) / N * 2 * B / L
             : (succ_remote ? (1.0 + 2.0 * (W - 2) + (W - 1)) * B / W : 0),
        run_allreduce_bf16, &x);
  x.n = n_blk;
  B = 2.0 * (double)n_blk;
  check(comm, "ReduceScatter bf16", qcclStatReduceScatter,
        hier ? (N - 1) * 2 * B : (succ_remote ? (1.0 + 2.0 * (W - 2)) * B : 0),
        run_reducescatter_bf16, &x);
  x.n = n_blk;
  B = 4.0 * (double)n_blk;
  check(comm, "AllGather", qcclStatAllGather, hier ? (N - 1) * B : (succ_remote ? (W - 1) * B : 0),
        run_allgather, &x);
  check(comm, "ReduceScatter", qcclStatReduceScatter,
        hier ? (N - 1) * B : (succ_remote ? (W - 1) * B : 0), run_reducescatter, &x);
  x.n = n_ar;
  B = 4.0 * (double)n_ar;
  x.root = W - 1;
  check(comm, "Broadcast", qcclStatBroadcast,
        rank != x.root ? 0
        : hier         ? (N - 1) * B
                       : nremote(rank) * B,
        run_broadcast, &x);
  x.root = 1 % W;
  double rd = hier ? (local_index(rank) == local_index(x.root) ? 2.0 * (N - 1) / N * B : 0)
                   : (succ_remote ? 2.0 * (W - 1) / W * B : 0);
  check(comm, "Reduce", qcclStatReduce, rd, run_reduce, &x);
  x.n = n_a2a;
  B = 4.0 * (double)n_a2a;
  check(comm, "AlltoAll", qcclStatAlltoAll, nremote(rank) * B, run_alltoall, &x);
  x.n = n_blk;
  B = 4.0 * (double)n_blk;
  x.root = 0;
  check(comm, "Gather", qcclStatGather, remote(rank, 0) ? B : 0, run_gather, &x);
  check(comm, "Scatter", qcclStatScatter, rank == 0 ? nremote(0) * B : 0, run_scatter, &x);

  /* every byte counted so far, per host, for the wire comparison */
  qcclStats_t st = QCCL_STATS_INITIALIZER;
  CHECK(qcclCommGetStats(comm, &st), comm);
  uint64_t mine[2] = {st.total.bytesInter, (uint64_t)failures};
  uint64_t* all = calloc((size_t)W * 2, sizeof *all);
  CHECK(qcclAllGather(mine, all, 2, qcclUint64, comm, NULL), comm);
  int total_failures = 0;
  for (int i = 0; i < W; i++) total_failures += (int)all[2 * i + 1];
  if (rank == 0 && out) {
    FILE* f = fopen(out, "w");
    if (!f) {
      perror(out);
      return 1;
    }
    fprintf(f, "{\"hosts\": [");
    for (int h = 0; h < N; h++) {
      uint64_t sum = 0;
      int qh = -1;
      for (int i = 0; i < W; i++)
        if (node_of[i] == h) {
          sum += all[2 * i];
          sscanf(ids + i * HOST_BYTES, "qccl-host%d-", &qh);
        }
      fprintf(f, "%s{\"host\": %d, \"counted_inter_bytes\": %" PRIu64 "}", h ? ", " : "", qh, sum);
    }
    fprintf(f, "]}\n");
    fclose(f);
  }
  CHECK(qcclCommDestroy(comm), NULL);
  if (rank == 0) printf("mn_bytes: %s\n", total_failures ? "FAIL" : "PASS");
  return total_failures ? 1 : 0;
}
