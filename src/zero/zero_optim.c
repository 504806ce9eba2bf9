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
 *
 * These scalar loops are the definition; zero_optim_x86.c has AVX2 and
 * AVX-512 versions of the same operations in the same order (IEEE add,
 * mul, div and sqrt are correctly rounded in every width, and nothing is
 * fused), so their results are bitwise equal. The best the CPU has is
 * chosen at run time (QCCL_ZERO_ISA forces one; tests/zero/zero_optim_isa
 * compares them). LAMB's norms are summed here in element order, after
 * any kernel.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zero.h"

void zero_optim_apply_scalar(const zero_optim_args_t* a, float* w, float* m, float* v,
                             const float* g, size_t n) {
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

void zero_lamb_update_scalar(const zero_optim_args_t* a, const float* w, float* m, float* v,
                             float* g, size_t n) {
  const float b1 = a->beta1, b2 = a->beta2, wd = a->wd, eps = a->eps;
  const float c1 = 1.0f - b1, c2 = 1.0f - b2;
  for (size_t i = 0; i < n; i++) {
    float gi = g[i];
    float mi = b1 * m[i] + c1 * gi;
    float vi = b2 * v[i] + c2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    g[i] = (mi / a->bc1) / (sqrtf(vi / a->bc2) + eps) + wd * w[i];
  }
}

void zero_lamb_apply_scalar(float* w, const float* u, size_t n, float lr_ratio) {
  for (size_t i = 0; i < n; i++) w[i] = w[i] - lr_ratio * u[i];
}

/* ---- dispatch: the best kernels the CPU has, or QCCL_ZERO_ISA ---- */

static zero_isa_t zero_isa_detect(void) {
  zero_isa_t best = ZERO_ISA_SCALAR;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) best = ZERO_ISA_AVX2;
  if (__builtin_cpu_supports("avx512f")) best = ZERO_ISA_AVX512;
#endif
  const char* e = getenv("QCCL_ZERO_ISA");
  if (e != NULL) {
    zero_isa_t want = strcmp(e, "scalar") == 0   ? ZERO_ISA_SCALAR
                      : strcmp(e, "avx2") == 0   ? ZERO_ISA_AVX2
                      : strcmp(e, "avx512") == 0 ? ZERO_ISA_AVX512
                                                 : best;
    if (want <= best) best = want; /* never one the CPU lacks */
  }
  return best;
}

zero_isa_t zero_isa(void) {
  static _Atomic int cached = -1;
  int v = cached;
  if (v < 0) cached = v = (int)zero_isa_detect();
  return (zero_isa_t)v;
}

void zero_optim_apply_isa(zero_isa_t isa, const zero_optim_args_t* a, float* w, float* m, float* v,
                          const float* g, size_t n) {
#if defined(__x86_64__)
  if (isa == ZERO_ISA_AVX512) return zero_optim_apply_avx512(a, w, m, v, g, n);
  if (isa == ZERO_ISA_AVX2) return zero_optim_apply_avx2(a, w, m, v, g, n);
#endif
  (void)isa;
  zero_optim_apply_scalar(a, w, m, v, g, n);
}

void zero_lamb_update_isa(zero_isa_t isa, const zero_optim_args_t* a, const float* w, float* m,
                          float* v, float* g, size_t n) {
#if defined(__x86_64__)
  if (isa == ZERO_ISA_AVX512) return zero_lamb_update_avx512(a, w, m, v, g, n);
  if (isa == ZERO_ISA_AVX2) return zero_lamb_update_avx2(a, w, m, v, g, n);
#endif
  (void)isa;
  zero_lamb_update_scalar(a, w, m, v, g, n);
}

void zero_lamb_apply_isa(zero_isa_t isa, float* w, const float* u, size_t n, float lr_ratio) {
#if defined(__x86_64__)
  if (isa == ZERO_ISA_AVX512) return zero_lamb_apply_avx512(w, u, n, lr_ratio);
  if (isa == ZERO_ISA_AVX2) return zero_lamb_apply_avx2(w, u, n, lr_ratio);
#endif
  (void)isa;
  zero_lamb_apply_scalar(w, u, n, lr_ratio);
}

void zero_optim_apply(const zero_optim_args_t* a, float* w, float* m, float* v, const float* g,
                      size_t n) {
  zero_optim_apply_isa(zero_isa(), a, w, m, v, g, n);
}

void zero_lamb_direction(const zero_optim_args_t* a, const float* w, float* m, float* v, float* g,
                         size_t n, double* wsq, double* usq) {
  zero_lamb_update_isa(zero_isa(), a, w, m, v, g, n);
  double sw = 0.0, su = 0.0; /* in element order, whatever the kernel */
  for (size_t i = 0; i < n; i++) {
    sw += (double)w[i] * (double)w[i];
    su += (double)g[i] * (double)g[i];
  }
  *wsq += sw;
  *usq += su;
}

void zero_lamb_apply(float* w, const float* u, size_t n, float lr_ratio) {
  zero_lamb_apply_isa(zero_isa(), w, u, n, lr_ratio);
}

void zero_lamb_redo(const zero_optim_args_t* a, const float* w, const float* m, const float* v,
                    float* u, size_t n) {
  const float wd = a->wd, eps = a->eps;
  for (size_t i = 0; i < n; i++) u[i] = (m[i] / a->bc1) / (sqrtf(v[i] / a->bc2) + eps) + wd * w[i];
}
