/*
 * zero_mlp - a small trainer over the ZeRO engine: an MLP (16 -> 64 -> 64
 * -> 4, tanh) learns a fixed random "teacher" network, with forward and
 * backward in plain C (f32), driven by a DeepSpeed config file.
 *
 *   qcclrun -n 4 -- zero_mlp ds_zero3.json [steps [--check]]
 *
 * Each rank draws its own micro-batches (16 samples); the engine averages
 * the gradients over ranks and accumulation steps, shards what the config's
 * stage says, and runs the optimizer. Parameters are f32, or bf16 / f16
 * when the config enables bf16 / fp16 (then the gradient is of the loss
 * times the loss scale, and the engine unscales it). Rank 0 prints the
 * loss curve: the mean loss over all ranks (one all-reduce) per step.
 * --check exits 1 unless the last loss is below a quarter of the first.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qccl.h"
#include "qccl_zero.h"

#define NL 3
static const int dims[NL + 1] = {16, 64, 64, 4};
#define BATCH 16

static uint64_t rng_next(uint64_t* s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static float rng_unit(uint64_t* s) { /* uniform in [-1, 1) */
  return (float)((double)(rng_next(s) >> 40) / (double)(1ull << 23) - 1.0);
}

/* parameters in and out of the engine's dtype */
static float load(const void* p, qcclDataType_t dt, size_t i) {
  if (dt == qcclFloat32) return ((const float*)p)[i];
  if (dt == qcclFloat16) return (float)((const _Float16*)p)[i];
  uint32_t u = (uint32_t)((const uint16_t*)p)[i] << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static void store(void* p, qcclDataType_t dt, size_t i, float x) {
  if (dt == qcclFloat32) {
    ((float*)p)[i] = x;
  } else if (dt == qcclFloat16) {
    ((_Float16*)p)[i] = (_Float16)x;
  } else {
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even (finite values) */
    ((uint16_t*)p)[i] = (uint16_t)(u >> 16);
  }
}

/* y = f(x) for the network w (weights [out][in], then bias), keeping activations. */
static void forward(float* const* w, const float* x, float act[NL + 1][64]) {
  memcpy(act[0], x, sizeof(float) * (size_t)dims[0]);
  for (int l = 0; l < NL; l++)
    for (int o = 0; o < dims[l + 1]; o++) {
      float z = w[2 * l + 1][o];
      for (int i = 0; i < dims[l]; i++) z += w[2 * l][o * dims[l] + i] * act[l][i];
      act[l + 1][o] = l + 1 < NL ? tanhf(z) : z;
    }
}

#define CHECK(call)                                                                   \
  do {                                                                                \
    qcclResult_t r_ = (call);                                                         \
    if (r_ != qcclSuccess) {                                                          \
      const char* m_ = qcclZeroGetLastError();                                        \
      fprintf(stderr, "%s failed: %s\n", #call, m_[0] ? m_ : qcclGetLastError(NULL)); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s CONFIG.json [steps]\n", argv[0]);
    return 2;
  }
  int steps = argc > 2 ? atoi(argv[2]) : 40;
  int check = argc > 3 && strcmp(argv[3], "--check") == 0;
  double first = 0.0, last = 0.0;
  qcclZeroConfig_t cfg;
  CHECK(qcclZeroConfigLoad(argv[1], &cfg));
  qcclComm_t comm;
  CHECK(qcclCommInitFromEnv(&comm));
  int rank, nranks;
  CHECK(qcclCommUserRank(comm, &rank));
  CHECK(qcclCommCount(comm, &nranks));
  qcclZero_t z;
  CHECK(qcclZeroCreate(comm, &cfg, &z));
  qcclDataType_t dt = cfg.bf16 ? qcclBfloat16 : cfg.fp16 ? qcclFloat16 : qcclFloat32;

  /* the teacher and the student's initial weights: the same on every rank */
  float *teacher[2 * NL], *w[2 * NL], *g[2 * NL];
  size_t count[2 * NL];
  void* tmp = malloc(64 * 64 * 4);
  uint64_t s = 42;
  for (int l = 0; l < NL; l++)
    for (int b = 0; b < 2; b++) {
      int p = 2 * l + b;
      count[p] = b ? (size_t)dims[l + 1] : (size_t)dims[l] * (size_t)dims[l + 1];
      teacher[p] = malloc(count[p] * sizeof(float));
      w[p] = malloc(count[p] * sizeof(float));
      g[p] = malloc(count[p] * sizeof(float));
      float sc = 1.0f / sqrtf((float)dims[l]);
      for (size_t i = 0; i < count[p]; i++) teacher[p][i] = 2.0f * sc * rng_unit(&s);
      for (size_t i = 0; i < count[p]; i++) store(tmp, dt, i, sc * rng_unit(&s));
      char name[32];
      snprintf(name, sizeof name, "layer%d.%s", l + 1, b ? "bias" : "weight");
      CHECK(qcclZeroRegister(z, name, count[p], dt, tmp, NULL));
    }

  uint64_t data = 1000 + (uint64_t)rank;
  if (rank == 0)
    printf("zero_mlp: %s, stage %d, %d ranks, %s params, %d micro-steps per step\n", argv[1],
           cfg.stage, nranks,
           dt == qcclFloat32    ? "f32"
           : dt == qcclBfloat16 ? "bf16"
                                : "f16",
           cfg.gradAccumSteps);
  for (int step = 0; step < steps; step++) {
    double loss = 0.0;
    qcclZeroStepInfo_t info;
    for (int micro = 0; micro < cfg.gradAccumSteps; micro++) {
      double scale;
      CHECK(qcclZeroGetLossScale(z, &scale));
      for (int p = 0; p < 2 * NL; p++) { /* forward: gather, use, release */
        void* d;
        CHECK(qcclZeroGather(z, p, qcclZeroForward, &d));
        for (size_t i = 0; i < count[p]; i++) w[p][i] = load(d, dt, i);
        CHECK(qcclZeroRelease(z, p));
        memset(g[p], 0, count[p] * sizeof(float));
      }
      for (int n = 0; n < BATCH; n++) {
        float x[16], act[NL + 1][64], tact[NL + 1][64], delta[64], prev[64];
        for (int i = 0; i < dims[0]; i++) x[i] = rng_unit(&data);
        forward(teacher, x, tact);
        forward(w, x, act);
        for (int o = 0; o < dims[NL]; o++) {
          float d = act[NL][o] - tact[NL][o];
          loss += 0.5 * d * d / BATCH / cfg.gradAccumSteps;
          delta[o] = d / BATCH;
        }
        for (int l = NL - 1; l >= 0; l--) {
          for (int o = 0; o < dims[l + 1]; o++) {
            for (int i = 0; i < dims[l]; i++) g[2 * l][o * dims[l] + i] += delta[o] * act[l][i];
            g[2 * l + 1][o] += delta[o];
          }
          if (l == 0) break;
          for (int i = 0; i < dims[l]; i++) {
            float acc = 0.0f;
            for (int o = 0; o < dims[l + 1]; o++) acc += w[2 * l][o * dims[l] + i] * delta[o];
            prev[i] = acc * (1.0f - act[l][i] * act[l][i]);
          }
          memcpy(delta, prev, sizeof(float) * (size_t)dims[l]);
        }
      }
      for (int p = 2 * NL - 1; p >= 0; p--) { /* backward: gather, gradient, release */
        void* d;
        CHECK(qcclZeroGather(z, p, qcclZeroBackward, &d));
        for (size_t i = 0; i < count[p]; i++) store(tmp, dt, i, (float)(g[p][i] * scale));
        CHECK(qcclZeroGradient(z, p, tmp));
        CHECK(qcclZeroRelease(z, p));
      }
      CHECK(qcclZeroStep(z, &info));
    }
    CHECK(qcclAllReduce(&loss, &loss, 1, qcclFloat64, qcclAvg, comm, NULL));
    if (step == 0) first = loss;
    last = loss;
    if (rank == 0)
      printf("step %3d  loss %.6f  grad-norm %.4f  loss-scale %g%s\n", step, loss, info.gradNorm,
             info.lossScale, info.overflow ? "  (overflow: skipped)" : "");
  }
  CHECK(qcclZeroDestroy(z));
  for (int p = 0; p < 2 * NL; p++) {
    free(teacher[p]);
    free(w[p]);
    free(g[p]);
  }
  free(tmp);
  CHECK(qcclCommDestroy(comm));
  if (check && !(last < first / 4)) {
    fprintf(stderr, "zero_mlp: the loss went from %g to %g (not below a quarter)\n", first, last);
    return 1;
  }
  return 0;
}
