/*
 * zero_bench.c - qccl-zero-bench: the ZeRO++ collectives against qccl's
 * own plain collectives in the same run (docs/PERF.md, "ZeRO++
 * collectives"). Public API only.
 *
 *   qcclrun -n 4 --placement 0,0,1,1 --link 1gbit -- qccl-zero-bench -b 64M
 *
 * A tensor of -b bytes of bf16 (weights or gradients; W shards) is moved
 * by: the plain bf16 all-gather and qwZ (int8, B = 256); hpZ's node-local
 * gather from secondary shards; the plain bf16 reduce-scatter and qgZ
 * (8/4, 4/4, 8/4 with rotation, 8/4 with error feedback). Each is timed
 * -n times after -w warm-ups (a barrier before each call; the slowest
 * rank's time; the median is printed), with the inter-node bytes a rank
 * sent per call (qcclCommGetStats, the mean over ranks) and, for the reductions, the relative
 * l2 error of the result against an f64 reference (for error feedback
 * also the error of the mean of the -n results). Then the traffic of one
 * ZeRO-3 step (forward gather, backward gather, gradient reduce-scatter),
 * plain and ZeRO++ (qwZ + secondary fill, hpZ, qgZ 8/4), from the
 * counters. --gathers stops after the gathers. --step plain|zpp runs only that step (-n times), so
 * that the links' own counters (qcclrun --link-stats) measure it alone.
 *
 * Inputs: N(0, 1) with one element in 4096 scaled by 10 (heavy tails, as
 * gradients have), a pure function of (rank, index).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qccl.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static float gen(int rank, size_t i) {
  uint64_t h = mix(((uint64_t)rank << 40) ^ i);
  double u1 = ((double)(h >> 11) + 0.5) * 0x1p-53, u2 = (double)(mix(h) >> 11) * 0x1p-53;
  double g = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
  if ((h & 4095) == 7) g *= 10;
  return (float)g;
}

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

#define CHECK(call)                                                               \
  do {                                                                            \
    qcclResult_t r_ = (call);                                                     \
    if (r_ != qcclSuccess) {                                                      \
      fprintf(stderr, "zero_bench: %s: %s (%s)\n", #call, qcclGetErrorString(r_), \
              qcclGetLastError(comm));                                            \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

static qcclComm_t comm;
static int W, rank_;

static double max_over_ranks(double v) {
  CHECK(qcclAllReduce(&v, &v, 1, qcclFloat64, qcclMax, comm, NULL));
  return v;
}

static double sum_over_ranks(double v) {
  CHECK(qcclAllReduce(&v, &v, 1, qcclFloat64, qcclSum, comm, NULL));
  return v;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static uint64_t inter_bytes(void) {
  qcclStats_t s = QCCL_STATS_INITIALIZER;
  CHECK(qcclCommGetStats(comm, &s));
  return s.total.bytesInter;
}

typedef void (*op_fn)(void* arg);

/* Times fn: warm-up, then iters calls; returns the median of the slowest
 * rank's times and sets *bytes to the inter-node bytes per call (this
 * rank). */
static double time_op(op_fn fn, void* arg, int warmup, int iters, double* bytes) {
  for (int i = 0; i < warmup; i++) fn(arg);
  double* t = malloc(sizeof *t * (size_t)iters);
  for (int i = 0; i < iters; i++) {
    CHECK(qcclBarrier(comm, NULL));
    double t0 = now();
    fn(arg);
    t[i] = now() - t0;
  }
  for (int i = 0; i < iters; i++) t[i] = max_over_ranks(t[i]);
  qsort(t, (size_t)iters, sizeof *t, cmp_double);
  double med = t[iters / 2];
  free(t);
  /* bytes of one call, measured alone */
  CHECK(qcclBarrier(comm, NULL));
  uint64_t before = inter_bytes();
  fn(arg);
  *bytes = sum_over_ranks((double)(inter_bytes() - before)) / W;
  return med;
}

typedef struct {
  size_t shard; /* elements per rank */
  uint16_t* shardbuf;
  uint16_t* full;
  uint16_t* grads;
  uint16_t* out;
  qcclQuantSpec_t spec;
  qcclReduceScatterQConfig_t cfg;
  qcclSecondary_t sec;
} bench_t;

static void op_ag(void* p) {
  bench_t* b = p;
  CHECK(qcclAllGather(b->shardbuf, b->full, b->shard, qcclBfloat16, comm, NULL));
}
static void op_agq(void* p) {
  bench_t* b = p;
  CHECK(qcclAllGatherQ(b->shardbuf, b->full, b->shard, qcclBfloat16, &b->spec, comm, NULL));
}
static void op_agq_fill(void* p) {
  bench_t* b = p;
  CHECK(qcclAllGatherQSecondary(b->shardbuf, b->full, b->shard, qcclBfloat16, &b->spec, b->sec, 1,
                                comm, NULL));
}
static void op_hpz(void* p) {
  bench_t* b = p;
  CHECK(qcclSecondaryAllGather(b->sec, b->full, 1, NULL));
}
static void op_rs(void* p) {
  bench_t* b = p;
  CHECK(qcclReduceScatter(b->grads, b->out, b->shard, qcclBfloat16, qcclSum, comm, NULL));
}
static void op_rsq(void* p) {
  bench_t* b = p;
  CHECK(qcclReduceScatterQ(b->grads, b->out, b->shard, qcclBfloat16, qcclSum, &b->cfg, comm, NULL));
}

/* relative l2 error of out (this rank's shard of the sum) over all ranks */
static double rel_error(const bench_t* b, const double* mean) {
  double e2 = 0, r2 = 0;
  for (size_t i = 0; i < b->shard; i++) {
    double s = 0;
    for (int r = 0; r < W; r++) s += from_bf16(to_bf16(gen(r, (size_t)rank_ * b->shard + i)));
    double y = mean ? mean[i] : from_bf16(b->out[i]);
    e2 += (y - s) * (y - s);
    r2 += s * s;
  }
  return sqrt(sum_over_ranks(e2) / sum_over_ranks(r2));
}

int main(int argc, char** argv) {
  size_t bytes = (size_t)64 << 20;
  int iters = 5, warmup = 1;
  const char* step = NULL;
  int only_ag = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-b") && i + 1 < argc) {
      char* end;
      bytes = strtoull(argv[++i], &end, 10);
      if (*end == 'K') bytes <<= 10;
      if (*end == 'M') bytes <<= 20;
      if (*end == 'G') bytes <<= 30;
    } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      iters = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "-w") && i + 1 < argc) {
      warmup = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--gathers")) {
      only_ag = 1;
    } else if (!strcmp(argv[i], "--step") && i + 1 < argc) {
      step = argv[++i];
    } else {
      fprintf(stderr,
              "usage: qccl-zero-bench [-b BYTES] [-n ITERS] [-w WARMUP] [--gathers] [--step "
              "plain|zpp]\n");
      return 2;
    }
  }
  if (iters < 1) iters = 1;
  CHECK(qcclCommInitFromEnv(&comm));
  CHECK(qcclCommCount(comm, &W));
  CHECK(qcclCommUserRank(comm, &rank_));
  bench_t b;
  memset(&b, 0, sizeof b);
  b.shard = bytes / 2 / (size_t)W;
  size_t T = b.shard * (size_t)W;
  b.shardbuf = malloc(b.shard * 2);
  b.full = malloc(T * 2);
  b.grads = malloc(T * 2);
  b.out = malloc(b.shard * 2);
  for (size_t i = 0; i < b.shard; i++) b.shardbuf[i] = to_bf16(gen(rank_ + 1000, i));
  for (size_t i = 0; i < T; i++) b.grads[i] = to_bf16(gen(rank_, i));
  b.spec = (qcclQuantSpec_t)QCCL_QUANT_SPEC_INITIALIZER;
  b.cfg = (qcclReduceScatterQConfig_t)QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER;
  CHECK(qcclSecondaryCreate(comm, b.shard, qcclBfloat16, NULL, &b.sec));

  if (step != NULL) {
    /* one kind of ZeRO-3 step, -n times, for the links' counters */
    int zpp = strcmp(step, "zpp") == 0;
    CHECK(qcclCommResetStats(comm));
    double t0 = now();
    for (int i = 0; i < iters; i++) {
      if (zpp) {
        op_agq_fill(&b);
        op_hpz(&b);
        op_rsq(&b);
      } else {
        op_ag(&b);
        op_ag(&b);
        op_rs(&b);
      }
    }
    double t = max_over_ranks(now() - t0) / iters;
    double inter = sum_over_ranks((double)inter_bytes());
    if (rank_ == 0)
      printf(
          "step %s: %d steps of %zu bytes of bf16, %.3f s per step, inter-node bytes (all "
          "ranks, counters) %.0f per step\n",
          zpp ? "ZeRO++" : "plain", iters, T * 2, t, inter / iters);
    qcclSecondaryDestroy(b.sec);
    qcclCommFinalize(comm);
    qcclCommDestroy(comm);
    return 0;
  }

  if (rank_ == 0)
    printf(
        "# qccl-zero-bench: %d ranks, %zu bytes of bf16 (%zu elements per rank), %d iters\n"
        "# %-26s %10s %10s %16s %14s\n",
        W, T * 2, b.shard, iters, "operation", "time (s)", "speedup", "inter B/rank", "rel. error");
  double bytes_ag, bytes_agq, bytes_hpz, bytes_rs, bytes_q;
  double t_ag = time_op(op_ag, &b, warmup, iters, &bytes_ag);
  double t_agq = time_op(op_agq, &b, warmup, iters, &bytes_agq);
  op_agq_fill(&b);
  double t_hpz = time_op(op_hpz, &b, warmup, iters, &bytes_hpz);
  if (rank_ == 0) {
    printf("  %-26s %10.4f %10s %16.0f %14s\n", "allgather bf16 (plain)", t_ag, "1.00", bytes_ag,
           "0");
    printf("  %-26s %10.4f %10.2f %16.0f %14s\n", "qwZ allgather int8 b256", t_agq, t_ag / t_agq,
           bytes_agq, "-");
    printf("  %-26s %10.4f %10.2f %16.0f %14s\n", "hpZ node allgather", t_hpz, t_ag / t_hpz,
           bytes_hpz, "-");
  }
  if (only_ag) goto end;
  double t_rs = time_op(op_rs, &b, warmup, iters, &bytes_rs);
  double err_rs = rel_error(&b, NULL);
  if (rank_ == 0)
    printf("  %-26s %10.4f %10s %16.0f %14.3g\n", "reducescatter bf16 (plain)", t_rs, "1.00",
           bytes_rs, err_rs);
  struct {
    const char* name;
    int in, out, rot, ef;
  } modes[4] = {{"qgZ 4/4", 4, 4, 0, 0},
                {"qgZ 8/4", 8, 4, 0, 0},
                {"qgZ 8/4 + rotation", 8, 4, 1, 0},
                {"qgZ 8/4 + error feedback", 8, 4, 0, 1}};
  double* mean = malloc(sizeof *mean * b.shard);
  for (int m = 0; m < 4; m++) {
    b.cfg = (qcclReduceScatterQConfig_t)QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER;
    b.cfg.intra.bits = modes[m].in;
    b.cfg.inter.bits = modes[m].out;
    b.cfg.intra.rotate = b.cfg.inter.rotate = modes[m].rot;
    b.cfg.intra.seed = b.cfg.inter.seed = 12345;
    b.cfg.errorFeedback = modes[m].ef;
    b.cfg.residualTag = m;
    double t = time_op(op_rsq, &b, warmup, iters, &bytes_q);
    double err = rel_error(&b, NULL);
    /* error of the mean of iters results (error feedback makes it shrink) */
    for (size_t i = 0; i < b.shard; i++) mean[i] = 0;
    for (int k = 0; k < iters; k++) {
      op_rsq(&b);
      for (size_t i = 0; i < b.shard; i++) mean[i] += from_bf16(b.out[i]) / iters;
    }
    double err_mean = rel_error(&b, mean);
    if (rank_ == 0)
      printf("  %-26s %10.4f %10.2f %16.0f %8.3g (mean of %d: %.3g)\n", modes[m].name, t, t_rs / t,
             bytes_q, err, iters, err_mean);
  }
  free(mean);
  /* one ZeRO-3 step's traffic, counters */
  b.cfg = (qcclReduceScatterQConfig_t)QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER;
  CHECK(qcclBarrier(comm, NULL));
  uint64_t s0 = inter_bytes();
  op_ag(&b);
  op_ag(&b);
  op_rs(&b);
  uint64_t s1 = inter_bytes();
  op_agq_fill(&b);
  op_hpz(&b);
  op_rsq(&b);
  uint64_t s2 = inter_bytes();
  double plain = sum_over_ranks((double)(s1 - s0)), zpp = sum_over_ranks((double)(s2 - s1));
  if (rank_ == 0)
    printf("# one ZeRO-3 step, inter-node bytes (all ranks): plain %.0f, ZeRO++ %.0f, ratio %.4f\n",
           plain, zpp, zpp / plain);
end:
  qcclSecondaryDestroy(b.sec);
  CHECK(qcclCommFinalize(comm));
  CHECK(qcclCommDestroy(comm));
  free(b.shardbuf);
  free(b.full);
  free(b.grads);
  free(b.out);
  return 0;
}
