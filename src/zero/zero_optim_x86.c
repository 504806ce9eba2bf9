/*
 * zero_optim_x86.c - the optimizer kernels of zero_optim.c in AVX2 (8
 * floats) and AVX-512 (16 floats), each compiled for its ISA with a target
 * attribute and chosen at run time. Every operation is the scalar
 * definition's, in its order, one IEEE operation per intrinsic (add, sub,
 * mul, div, sqrt: correctly rounded at any width; no fused multiply-add),
 * so the results are bitwise equal to the scalar kernels; the tail of each
 * array goes through the scalar kernel itself.
 */
#include "zero.h"

#if defined(__x86_64__)
#include <immintrin.h>

/* The three kernels for one ISA: V the vector type, N its width, P the
 * intrinsic prefix (_mm256 / _mm512), T the target attribute. */
#define ZERO_KERNELS(SUF, V, N, P, T)                                                             \
  __attribute__((target(T))) void zero_optim_apply_##SUF(                                         \
      const zero_optim_args_t* a, float* w, float* m, float* v, const float* g, size_t n) {       \
    size_t i = 0;                                                                                 \
    const float c1s = 1.0f - a->beta1, c2s = 1.0f - a->beta2;                                     \
    const V b1 = P##_set1_ps(a->beta1), b2 = P##_set1_ps(a->beta2);                               \
    const V c1 = P##_set1_ps(c1s), c2 = P##_set1_ps(c2s), lr = P##_set1_ps(a->lr);                \
    const V wd = P##_set1_ps(a->wd), eps = P##_set1_ps(a->eps);                                   \
    const V bc1 = P##_set1_ps(a->bc1), bc2 = P##_set1_ps(a->bc2);                                 \
    if (a->kind == qcclZeroAdamW || a->kind == qcclZeroAdam) {                                    \
      const V decay = P##_set1_ps(a->lr * a->wd);                                                 \
      const int decoupled = a->kind == qcclZeroAdamW;                                             \
      for (; i + N <= n; i += N) {                                                                \
        V gi = P##_loadu_ps(g + i), wi = P##_loadu_ps(w + i);                                     \
        if (!decoupled) gi = P##_add_ps(gi, P##_mul_ps(wd, wi));                                  \
        V mi = P##_add_ps(P##_mul_ps(b1, P##_loadu_ps(m + i)), P##_mul_ps(c1, gi));               \
        V vi =                                                                                    \
            P##_add_ps(P##_mul_ps(b2, P##_loadu_ps(v + i)), P##_mul_ps(c2, P##_mul_ps(gi, gi)));  \
        P##_storeu_ps(m + i, mi);                                                                 \
        P##_storeu_ps(v + i, vi);                                                                 \
        if (decoupled) wi = P##_sub_ps(wi, P##_mul_ps(decay, wi));                                \
        V den = P##_add_ps(P##_sqrt_ps(P##_div_ps(vi, bc2)), eps);                                \
        P##_storeu_ps(w + i,                                                                      \
                      P##_sub_ps(wi, P##_mul_ps(lr, P##_div_ps(P##_div_ps(mi, bc1), den))));      \
      }                                                                                           \
    } else if (a->kind == qcclZeroSGD) {                                                          \
      const V mu = P##_set1_ps(a->momentum);                                                      \
      for (; i + N <= n; i += N) {                                                                \
        V wi = P##_loadu_ps(w + i);                                                               \
        V gi = P##_add_ps(P##_loadu_ps(g + i), P##_mul_ps(wd, wi));                               \
        if (a->momentum != 0.0f) {                                                                \
          V mi = P##_add_ps(P##_mul_ps(mu, P##_loadu_ps(m + i)), gi);                             \
          P##_storeu_ps(m + i, mi);                                                               \
          gi = a->nesterov ? P##_add_ps(gi, P##_mul_ps(mu, mi)) : mi;                             \
        }                                                                                         \
        P##_storeu_ps(w + i, P##_sub_ps(wi, P##_mul_ps(lr, gi)));                                 \
      }                                                                                           \
    }                                                                                             \
    if (a->kind != qcclZeroLamb) zero_optim_apply_scalar(a, w + i, m + i, v + i, g + i, n - i);   \
  }                                                                                               \
                                                                                                  \
  __attribute__((target(T))) void zero_lamb_update_##SUF(                                         \
      const zero_optim_args_t* a, const float* w, float* m, float* v, float* g, size_t n) {       \
    size_t i = 0;                                                                                 \
    const V b1 = P##_set1_ps(a->beta1), b2 = P##_set1_ps(a->beta2);                               \
    const V c1 = P##_set1_ps(1.0f - a->beta1), c2 = P##_set1_ps(1.0f - a->beta2);                 \
    const V wd = P##_set1_ps(a->wd), eps = P##_set1_ps(a->eps);                                   \
    const V bc1 = P##_set1_ps(a->bc1), bc2 = P##_set1_ps(a->bc2);                                 \
    for (; i + N <= n; i += N) {                                                                  \
      V gi = P##_loadu_ps(g + i);                                                                 \
      V mi = P##_add_ps(P##_mul_ps(b1, P##_loadu_ps(m + i)), P##_mul_ps(c1, gi));                 \
      V vi = P##_add_ps(P##_mul_ps(b2, P##_loadu_ps(v + i)), P##_mul_ps(c2, P##_mul_ps(gi, gi))); \
      P##_storeu_ps(m + i, mi);                                                                   \
      P##_storeu_ps(v + i, vi);                                                                   \
      V den = P##_add_ps(P##_sqrt_ps(P##_div_ps(vi, bc2)), eps);                                  \
      V ui =                                                                                      \
          P##_add_ps(P##_div_ps(P##_div_ps(mi, bc1), den), P##_mul_ps(wd, P##_loadu_ps(w + i)));  \
      P##_storeu_ps(g + i, ui);                                                                   \
    }                                                                                             \
    zero_lamb_update_scalar(a, w + i, m + i, v + i, g + i, n - i);                                \
  }                                                                                               \
                                                                                                  \
  __attribute__((target(T))) void zero_lamb_apply_##SUF(float* w, const float* u, size_t n,       \
                                                        float lr_ratio) {                         \
    size_t i = 0;                                                                                 \
    const V r = P##_set1_ps(lr_ratio);                                                            \
    for (; i + N <= n; i += N)                                                                    \
      P##_storeu_ps(w + i, P##_sub_ps(P##_loadu_ps(w + i), P##_mul_ps(r, P##_loadu_ps(u + i))));  \
    zero_lamb_apply_scalar(w + i, u + i, n - i, lr_ratio);                                        \
  }

ZERO_KERNELS(avx2, __m256, 8, _mm256, "avx2")
ZERO_KERNELS(avx512, __m512, 16, _mm512, "avx512f")

#endif /* __x86_64__ */
