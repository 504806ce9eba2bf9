/*
 * zero_optim.c - the optimizers, applied by each rank to its fp32 master
 * shard (scalar; every operation in f32 in the order written, built with
 * -ffp-contract=off so no fused multiply-add changes a rounding: the same
 * bits on every run and every machine).
 *
 *   Adam   g += wd w; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g g;
 *          w -= lr (m / bc1) / (sqrt(v / bc2) + eps)
 *   AdamW  as Adam without the g += wd w, and w -= (lr wd) w first
 *          (decoupled weight decay)
 *   SGD    g += wd w; with momentum mu: m = mu m + g, then g = g + mu m
 *          (Nesterov) or g = m; w -= lr g
 *   LAMB   m, v as Adam; u = (m / bc1) / (sqrt(v / bc2) + eps) + wd w;
 *          w -= lr r u with r = |w| / |u| over the whole parameter (1 if
 *          either is 0), clamped to [min_coeff, max_coeff]; the norms span
 *          the shards, so the caller all-reduces the partial sums
 * bc1 = 1 - b1^t, bc2 = 1 - b2^t for step t (from 1).
 */
#include <math.h>

#include "zero.h"

void zero_optim_apply(const zero_optim_args_t* a, float* w, float* m, float* v, const float* g,
                      size_t n) {
  const float b1 = a->beta1, b2 = a->beta2, lr = a->lr, wd = a->wd, eps = a->eps;
  const float c1 = 1.0f - b1, c2 = 1.0f - b2;
  switch (a->kind) {
    case qcclZeroAdamW:
    case qcclZeroAdam: {
      const float decay = lr * wd;
      const int decoupled = a->kind == qcclZeroAdamW;
      for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        if (!decoupled) gi = gi + wd * w[i];
        float mi = b1 * m[i] + c1 * gi;
        float vi = b2 * v[i] + c2 * (gi * gi);
        m[i] = mi;
        v[i] = vi;
        float wi = w[i];
        if (decoupled) wi = wi - decay * wi;
        float den = sqrtf(vi / a->bc2) + eps;
        w[i] = wi - lr * ((mi / a->bc1) / den);
      }
      break;
    }
    case qcclZeroSGD: {
      const float mu = a->momentum;
      for (size_t i = 0; i < n; i++) {
        float gi = g[i] + wd * w[i];
        if (mu != 0.0f) {
          float mi = mu * m[i] + gi;
          m[i] = mi;
          gi = a->nesterov ? gi + mu * mi : mi;
        }
        w[i] = w[i] - lr * gi;
      }
      break;
    }
    case qcclZeroLamb:
      break; /* two passes: zero_lamb_direction / zero_lamb_apply */
  }
}

void zero_lamb_direction(const zero_optim_args_t* a, const float* w, float* m, float* v, float* g,
                         size_t n, double* wsq, double* usq) {
  const float b1 = a->beta1, b2 = a->beta2, wd = a->wd, eps = a->eps;
  const float c1 = 1.0f - b1, c2 = 1.0f - b2;
  double sw = 0.0, su = 0.0;
  for (size_t i = 0; i < n; i++) {
    float gi = g[i];
    float mi = b1 * m[i] + c1 * gi;
    float vi = b2 * v[i] + c2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    float ui = (mi / a->bc1) / (sqrtf(vi / a->bc2) + eps) + wd * w[i];
    g[i] = ui;
    sw += (double)w[i] * (double)w[i];
    su += (double)ui * (double)ui;
  }
  *wsq += sw;
  *usq += su;
}

void zero_lamb_apply(float* w, const float* u, size_t n, float lr_ratio) {
  for (size_t i = 0; i < n; i++) w[i] = w[i] - lr_ratio * u[i];
}
