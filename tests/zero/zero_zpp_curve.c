/*
 * zero_zpp_curve - ZeRO++ loss curves against plain ZeRO-3.
 *
 * Run as one rank under qcclrun (the meson test: 2 simulated hosts of 2
 * ranks when UCX is built, else W = 4 on one host). Four engines on the
 * same communicator train the same MLP (16 -> 64 -> 64 -> 8, tanh, bf16
 * parameters, 5,784 elements; the three weight matrices are gathered at
 * stage 3, the biases persistent) from the same initial weights on the
 * same data, in lockstep:
 *   plain  stage 3
 *   qwz    stage 3, int8 forward gathers (qcclAllGatherQ)
 *   qgz    stage 3, qgZ gradients (8 bits inside a node, 4 across)
 *   zpp    all three: qwZ, hpZ backward gathers (the node's secondary
 *          shard), qgZ
 * AdamW (lr 3e-3), batch 16 per rank and step, --steps (default 80). The
 * data: x uniform in [-1, 1]^16, y = a fixed random teacher MLP of x
 * (from the printed seed, so a failure replays). The loss of a step is
 * the mean over all ranks' samples (one f64 all-reduce), computed in f64
 * from the parameters each engine handed out.
 *
 * Checks: plain training works (its last loss below half its first), and
 * every step's loss of each ZeRO++ engine is within --dist (default 0.05:
 * 5%) relative distance of the plain engine's loss of the same step. The
 * measured maxima are printed by rank 0 (docs/ZERO.md quotes them).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mr_util.h"
#include "qccl_zero.h"

#define NL 3
static const int g_dims[NL + 1] = {16, 64, 64, 8};
#define NP (2 * NL)
#define NE 4
#define BATCH 16
static size_t g_count[NP];
static const char* g_names[NP] = {"l1.weight", "l1.bias",   "l2.weight",
                                  "l2.bias",   "l3.weight", "l3.bias"};
static const char* g_engine[NE] = {"plain", "qwz", "qgz", "zpp"};

static double unit_rand(uint64_t seed, uint64_t j, uint64_t k) {
  uint64_t h = mr_mix(seed ^ mr_mix(j * 0x9e3779b97f4a7c15ull + k + 1));
  return ((double)(h >> 11) / 9007199254740992.0) * 2.0 - 1.0;
}

static uint16_t to_bf16(double x) {
  float f = (float)x;
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static double from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Forward of the MLP with weights w (f64) on x; act[l] are the layers' outputs. */
static void forward(double* const* w, const double* x, double act[NL + 1][64]) {
  memcpy(act[0], x, sizeof(double) * (size_t)g_dims[0]);
  for (int l = 0; l < NL; l++) {
    const double *W = w[2 * l], *b = w[2 * l + 1];
    for (int o = 0; o < g_dims[l + 1]; o++) {
      double z = b[o];
      for (int i = 0; i < g_dims[l]; i++) z += W[o * g_dims[l] + i] * act[l][i];
      act[l + 1][o] = l + 1 < NL ? tanh(z) : z;
    }
  }
}

/* Sample j: x, and y from the teacher. */
static void sample(uint64_t seed, double* const* teacher, uint64_t j, double* x, double* y) {
  double act[NL + 1][64];
  for (int k = 0; k < g_dims[0]; k++) x[k] = unit_rand(seed ^ 0x1234, j, (uint64_t)k);
  forward(teacher, x, act);
  memcpy(y, act[NL], sizeof(double) * (size_t)g_dims[NL]);
}

/* Adds the gradient of (1/n) sum 0.5 |out - y|^2 over this rank's batch
 * into g (n = the global batch); returns this rank's part of that loss. */
static double grad(double* const* w, const double (*xs)[16], const double (*ys)[8], int b, double n,
                   double** g) {
  double loss = 0.0;
  for (int s = 0; s < b; s++) {
    double act[NL + 1][64], delta[64], prev[64];
    forward(w, xs[s], act);
    for (int o = 0; o < g_dims[NL]; o++) {
      double d = act[NL][o] - ys[s][o];
      loss += 0.5 * d * d / n;
      delta[o] = d / n;
    }
    for (int l = NL - 1; l >= 0; l--) {
      const double* W = w[2 * l];
      for (int o = 0; o < g_dims[l + 1]; o++) {
        for (int i = 0; i < g_dims[l]; i++) g[2 * l][o * g_dims[l] + i] += delta[o] * act[l][i];
        g[2 * l + 1][o] += delta[o];
      }
      if (l == 0) break;
      for (int i = 0; i < g_dims[l]; i++) {
        double s2 = 0.0;
        for (int o = 0; o < g_dims[l + 1]; o++) s2 += W[o * g_dims[l] + i] * delta[o];
        prev[i] = s2 * (1.0 - act[l][i] * act[l][i]);
      }
      memcpy(delta, prev, sizeof(double) * (size_t)g_dims[l]);
    }
  }
  return loss;
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  for (int l = 0; l < NL; l++) {
    g_count[2 * l] = (size_t)g_dims[l] * (size_t)g_dims[l + 1];
    g_count[2 * l + 1] = (size_t)g_dims[l + 1];
  }
  const char* so = mr_opt(&t, "--steps");
  const char* dso = mr_opt(&t, "--dist");
  const int steps = so ? atoi(so) : 80;
  const double dist = dso ? atof(dso) : 0.05;
  mr_case_t c;
  if (mr_case_begin(&t, &c, "zpp curves W%d", t.nranks)) {
    int node, nnodes, lrank, lsize;
    MR_OK(&c, qcclCommNodeInfo(t.comm, &node, &nnodes, &lrank, &lsize));
    const uint64_t seed = c.cseed;
    double *teacher[NP], *w[NP], *g[NP];
    uint16_t* buf[NP];
    for (int p = 0; p < NP; p++) {
      size_t n = g_count[p];
      teacher[p] = malloc(n * sizeof(double));
      w[p] = malloc(n * sizeof(double));
      g[p] = malloc(n * sizeof(double));
      buf[p] = malloc(n * sizeof(uint16_t));
      double fan = sqrt((double)g_dims[p / 2]);
      for (size_t i = 0; i < n; i++) {
        teacher[p][i] = 1.5 * unit_rand(seed ^ 0x7ea, (uint64_t)p, i) / fan;
        buf[p][i] = to_bf16(unit_rand(seed ^ 0xabc, (uint64_t)p, i) / fan);
      }
    }
    qcclZero_t z[NE];
    for (int e = 0; e < NE; e++) {
      qcclZeroConfig_t cfg = QCCL_ZERO_CONFIG_INITIALIZER;
      cfg.stage = 3;
      cfg.bf16 = 1;
      cfg.lr = 3e-3;
      cfg.weightDecay = 0.0;
      cfg.persistenceThreshold = 100; /* the biases */
      cfg.quantizedWeights = e == 1 || e == 3;
      cfg.quantizedGradients = e == 2 || e == 3;
      cfg.hpzPartitionSize = e == 3 && lsize > 1 ? lsize : 0;
      cfg.qwzBlock = 64;
      cfg.qgzBlock = 64;
      MR_OK(&c, qcclZeroCreate(t.comm, &cfg, &z[e]));
      for (int p = 0; p < NP; p++)
        MR_OK(&c, qcclZeroRegister(z[e], g_names[p], g_count[p], qcclBfloat16, buf[p], NULL));
    }
    const double nglob = (double)BATCH * t.nranks;
    double first = 0.0, last = 0.0, worst[NE] = {0}, at[NE] = {0};
    double(*xs)[16] = malloc(sizeof(double[16]) * BATCH);
    double(*ys)[8] = malloc(sizeof(double[8]) * BATCH);
    for (int step = 0; step < steps && !c.bad; step++) {
      for (int s = 0; s < BATCH; s++)
        sample(seed, teacher, (uint64_t)(step * t.nranks + t.rank) * BATCH + (uint64_t)s, xs[s],
               ys[s]);
      double loss[NE];
      for (int e = 0; e < NE; e++) {
        for (int p = 0; p < NP; p++) {
          void* d;
          MR_OK(&c, qcclZeroGather(z[e], p, qcclZeroForward, &d));
          for (size_t i = 0; i < g_count[p]; i++) w[p][i] = from_bf16(((uint16_t*)d)[i]);
          MR_OK(&c, qcclZeroRelease(z[e], p));
          memset(g[p], 0, g_count[p] * sizeof(double));
        }
        loss[e] = grad(w, (const double(*)[16])xs, (const double(*)[8])ys, BATCH, nglob, g);
        for (int p = NP - 1; p >= 0; p--) {
          void* d;
          MR_OK(&c, qcclZeroGather(z[e], p, qcclZeroBackward, &d));
          for (size_t i = 0; i < g_count[p]; i++) buf[p][i] = to_bf16(g[p][i] * t.nranks);
          MR_OK(&c, qcclZeroGradient(z[e], p, buf[p]));
          MR_OK(&c, qcclZeroRelease(z[e], p));
        }
        MR_OK(&c, qcclZeroStep(z[e], NULL));
      }
      MR_OK(&c, qcclAllReduce(loss, loss, NE, qcclFloat64, qcclSum, t.comm, NULL));
      if (step == 0) first = loss[0];
      last = loss[0];
      for (int e = 1; e < NE; e++) {
        double r = fabs(loss[e] - loss[0]) / loss[0];
        if (r > worst[e]) worst[e] = r, at[e] = step;
        if (!(r <= dist))
          mr_case_fail(&c, "step %d: %s loss %.6g, plain %.6g: relative distance %.4f > %.4f", step,
                       g_engine[e], loss[e], loss[0], r, dist);
      }
      if (t.rank == 0 && t.verbose)
        printf("step %d loss plain %.6f qwz %.6f qgz %.6f zpp %.6f\n", step, loss[0], loss[1],
               loss[2], loss[3]);
    }
    if (!c.bad && !(last < 0.5 * first))
      mr_case_fail(&c, "plain training did not learn: loss %.6g -> %.6g", first, last);
    if (t.rank == 0)
      printf(
          "W=%d on %d node(s), seed %llu, %d steps: plain loss %.6f -> %.6f; largest relative "
          "distance to plain: qwz %.4f (step %.0f), qgz %.4f (step %.0f), zpp %.4f (step %.0f); "
          "bound %.4f\n",
          t.nranks, nnodes, (unsigned long long)t.seed, steps, first, last, worst[1], at[1],
          worst[2], at[2], worst[3], at[3], dist);
    for (int e = 0; e < NE; e++) MR_OK(&c, qcclZeroDestroy(z[e]));
    for (int p = 0; p < NP; p++) {
      free(teacher[p]);
      free(w[p]);
      free(g[p]);
      free(buf[p]);
    }
    free(xs);
    free(ys);
    mr_case_end(&c);
  }
  return mr_finish(&t);
}
