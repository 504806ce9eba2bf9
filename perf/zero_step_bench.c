/*
 * zero_step_bench.c - qccl-zero-step-bench: ZeRO-3 training steps of the
 * engine (include/qccl_zero.h) for a GPT-like parameter list, with the
 * forward and backward compute replaced by waits, plain against ZeRO++.
 * Public API only. Issue 15's benchmark; it needs a quiet machine.
 *
 *   qcclrun -n 4 --nodes 2 --link 1gbit -- qccl-zero-step-bench --mode zpp
 *
 * Options: --mode plain|zpp (zpp: qwZ int8, hpZ over the node, qgZ 8/4),
 * --layers L --dim d --vocab V (default GPT-2 small: 12, 768, 50257, about
 * 124M parameters), --fwd-ms T (the forward wait per layer; backward waits
 * 2T), --steps N (after one warm-up step that records the gather order),
 * --prefetch E (stage3_prefetch_bucket_size, elements; 0 = no prefetch).
 *
 * Per step (medians over ranks' maxima): the step time, the waits, the
 * exposed communication (step - waits), the inter-node and intra-node
 * bytes a rank sent (qcclCommGetStats), and the optimizer kernels alone
 * (qcclZeroStepInfo_t.optimizerSeconds) against the memory bound of the bytes it
 * must touch at --membw GB/s (default: measured here with memcpy of
 * 256 MiB): AdamW on the fp32 shard reads master, m, v (12 B) and the
 * gradient shard (2 B: bf16, grad_accum_dtype's default at one micro-step)
 * and writes master, m, v (12 B) plus the bf16 parameter shard (2 B) per
 * element.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qccl.h"
#include "qccl_zero.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void wait_ms(double ms) { /* a busy wait: compute keeps its core */
  double end = now() + ms * 1e-3;
  while (now() < end) {
  }
}

#define CHECK(call)                                                            \
  do {                                                                         \
    qcclResult_t r_ = (call);                                                  \
    if (r_ != qcclSuccess) {                                                   \
      const char* m_ = qcclZeroGetLastError();                                 \
      fprintf(stderr, "%s: %s\n", #call, m_[0] ? m_ : qcclGetLastError(NULL)); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static const char* opt(int argc, char** argv, const char* name, const char* def) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0) return argv[i + 1];
  return def;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double memcpy_gbs(void) {
  size_t n = 256u << 20;
  char *a = malloc(n), *b = malloc(n);
  memset(a, 1, n);
  memset(b, 2, n);
  double best = 1e30;
  for (int i = 0; i < 3; i++) {
    double t0 = now();
    memcpy(b, a, n);
    best = fmin(best, now() - t0);
  }
  free(a);
  free(b);
  return 2.0 * (double)n / best / 1e9; /* bytes read + written */
}

int main(int argc, char** argv) {
  const char* mode = opt(argc, argv, "--mode", "plain");
  int zpp = strcmp(mode, "zpp") == 0;
  size_t L = (size_t)atoi(opt(argc, argv, "--layers", "12"));
  size_t d = (size_t)atoi(opt(argc, argv, "--dim", "768"));
  size_t V = (size_t)atoi(opt(argc, argv, "--vocab", "50257"));
  double fwd_ms = atof(opt(argc, argv, "--fwd-ms", "20"));
  int steps = atoi(opt(argc, argv, "--steps", "3"));
  size_t prefetch = (size_t)atof(opt(argc, argv, "--prefetch", "5e7"));
  double membw = atof(opt(argc, argv, "--membw", "0"));

  qcclComm_t comm;
  CHECK(qcclCommInitFromEnv(&comm));
  int rank, W, node, nnodes, lrank, lsize;
  CHECK(qcclCommUserRank(comm, &rank));
  CHECK(qcclCommCount(comm, &W));
  CHECK(qcclCommNodeInfo(comm, &node, &nnodes, &lrank, &lsize));
  if (membw <= 0) membw = memcpy_gbs();

  qcclZeroConfig_t cfg = QCCL_ZERO_CONFIG_INITIALIZER;
  cfg.stage = 3;
  cfg.bf16 = 1;
  cfg.overlapComm = prefetch > 0;
  cfg.prefetchBucketSize = prefetch;
  cfg.persistenceThreshold = 100000;
  cfg.quantizedWeights = zpp;
  cfg.quantizedGradients = zpp;
  cfg.hpzPartitionSize = zpp && lsize > 1 ? lsize : 0;
  qcclZero_t z;
  CHECK(qcclZeroCreate(comm, &cfg, &z));

  /* GPT-2's list: embeddings, per layer (ln, qkv, proj, ln, fc, out), final ln */
  int layer_first[256], nparams = 0;
  size_t maxc = 0, psi = 0;
  char name[64];
#define ADD(n, c)                                                 \
  do {                                                            \
    CHECK(qcclZeroRegister(z, n, (c), qcclBfloat16, NULL, NULL)); \
    nparams++;                                                    \
    psi += (c);                                                   \
    if ((c) > maxc) maxc = (c);                                   \
  } while (0)
  ADD("wte", V * d);
  ADD("wpe", 1024 * d);
  for (size_t l = 0; l < L && l < 256; l++) {
    layer_first[l] = nparams;
    const char* parts[] = {"ln1.w", "ln1.b", "qkv.w", "qkv.b", "proj.w", "proj.b",
                           "ln2.w", "ln2.b", "fc.w",  "fc.b",  "out.w",  "out.b"};
    size_t counts[] = {d, d, 3 * d * d, 3 * d, d * d, d, d, d, 4 * d * d, 4 * d, 4 * d * d, d};
    for (int i = 0; i < 12; i++) {
      snprintf(name, sizeof name, "h%zu.%s", l, parts[i]);
      ADD(name, counts[i]);
    }
  }
  ADD("lnf.w", d);
  ADD("lnf.b", d);
  uint16_t* grad = calloc(maxc, 2);
  if (rank == 0)
    printf(
        "qccl-zero-step-bench: %s, %zu parameters (%zu layers, d %zu), W %d on %d nodes, "
        "forward wait %.1f ms per layer, prefetch %zu, memory bound %.1f GB/s\n",
        mode, psi, L, d, W, nnodes, fwd_ms, prefetch, membw);

  double *t_step = calloc((size_t)steps + 1, sizeof(double)),
         *t_wait = calloc((size_t)steps + 1, sizeof(double)),
         *t_opt = calloc((size_t)steps + 1, sizeof(double));
  qcclStats_t s0 = QCCL_STATS_INITIALIZER, s1 = QCCL_STATS_INITIALIZER;
  for (int step = 0; step <= steps; step++) { /* step 0: warm-up, records the order */
    CHECK(qcclBarrier(comm, NULL));
    CHECK(qcclCommGetStats(comm, &s0));
    double t0 = now(), waited = 0.0;
    void* w;
    for (int p = 0; p < nparams; p++) { /* forward: a wait after each layer's parameters */
      CHECK(qcclZeroGather(z, p, qcclZeroForward, &w));
      CHECK(qcclZeroRelease(z, p));
      for (size_t l = 0; l < L; l++)
        if (p == layer_first[l] + 11) {
          double a = now();
          wait_ms(fwd_ms);
          waited += now() - a;
        }
    }
    for (int p = nparams - 1; p >= 0; p--) {
      CHECK(qcclZeroGather(z, p, qcclZeroBackward, &w));
      for (size_t l = 0; l < L; l++)
        if (p == layer_first[l] + 11) {
          double a = now();
          wait_ms(2 * fwd_ms);
          waited += now() - a;
        }
      CHECK(qcclZeroGradient(z, p, grad));
      CHECK(qcclZeroRelease(z, p));
    }
    qcclZeroStepInfo_t info;
    CHECK(qcclZeroStep(z, &info));
    double t_end = now();
    CHECK(qcclCommGetStats(comm, &s1));
    double v[3] = {t_end - t0, waited, info.optimizerSeconds};
    CHECK(qcclAllReduce(v, v, 3, qcclFloat64, qcclMax, comm, NULL));
    t_step[step] = v[0];
    t_wait[step] = v[1];
    t_opt[step] = v[2];
    double bytes[2] = {(double)(s1.total.bytesInter - s0.total.bytesInter),
                       (double)(s1.total.bytesIntra - s0.total.bytesIntra)};
    CHECK(qcclAllReduce(bytes, bytes, 2, qcclFloat64, qcclAvg, comm, NULL));
    if (rank == 0 && step > 0)
      printf(
          "step %d: %.3f s, waits %.3f s, exposed communication %.3f s, inter-node %.1f MB, "
          "intra-node %.1f MB per rank, optimizer %.4f s\n",
          step, v[0], v[1], v[0] - v[1], bytes[0] / 1e6, bytes[1] / 1e6, v[2]);
  }
  qsort(t_step + 1, (size_t)steps, sizeof(double), cmp_double);
  qsort(t_opt + 1, (size_t)steps, sizeof(double), cmp_double);
  double shard = (double)psi / W;
  double bound = shard * 28.0 / (membw * 1e9); /* 14 B read + 14 B written per element */
  double opt_med = t_opt[1 + steps / 2];
  if (rank == 0)
    printf(
        "median step %.3f s; optimizer kernels %.4f s for %.0f elements per rank (slowest "
        "rank): %.2f of the memory bound (%.4f s at %.1f GB/s)\n",
        t_step[1 + steps / 2], opt_med, shard, bound / opt_med, bound, membw);
  free(t_step);
  free(t_wait);
  free(t_opt);
  free(grad);
  CHECK(qcclZeroDestroy(z));
  CHECK(qcclCommDestroy(comm));
  return 0;
}
