/*
 * reduce_kernels_impl.h - the element-wise reduction kernels, written once
 * and compiled twice: for baseline x86-64 (reduce_kernels.c) and with AVX2
 * (reduce_kernels_avx2.c), each file defining its table with RK_TABLE. The
 * kernels do the same arithmetic per element in the same order whatever
 * the vector width, and both files are built with -ffp-contract=off, so
 * both give the same bits (tests/unit/unit_reduce_isa.c checks it), but
 * for which NaN comes out where several inputs of an element are NaN (a
 * compiler may order the operands of a commutative operation either way;
 * IEEE 754 leaves that NaN's sign and payload open). Each element is
 * computed by one rank and copied to the others, so the ranks agree even
 * if they run different builds.
 *
 * Work goes in blocks of RK_BLOCK elements: the block of source 0 is loaded
 * (widened) into an accumulator array on the stack, every further source is
 * combined into it in order, and the block is narrowed once into dst. The
 * inner loops are simple enough for the compiler to vectorise, narrow
 * float conversions included (integer shifts and masks); the accumulator
 * stays in L1, so every byte of the sources is read once and every byte
 * of dst written once. Fewer passes over the block are faster: three or
 * more sources go two per pass over the accumulator ((((s0 + s1) + s2) +
 * s3) ...; three in one pass), the last pass narrowing into dst, and two
 * sources (every reduction of 2 ranks) of a type that is its own
 * accumulator (f32, f64, the integers) in one pass, each element loaded,
 * combined and stored at once. The same operations in the same order, so
 * the same bits (tests/unit/unit_reduce_isa.c checks them against an
 * element-by-element loop), with fewer loads and stores of the
 * accumulator: f32 on 2 ranks 0.64-0.97x the time, on 4 ranks 0.49-0.88x,
 * bf16 on 4 ranks 0.54-0.91x. Two narrow-float sources keep the three
 * passes: in one, 2-rank bf16 calls of 16 MiB took 1.2-1.5x the time
 * (docs/PERF.md, "Fewer passes in the reduction kernels").
 */
#ifndef QCCL_COLLECTIVES_REDUCE_KERNELS_IMPL_H_
#define QCCL_COLLECTIVES_REDUCE_KERNELS_IMPL_H_

#include <stddef.h>
#include <stdint.h>

#include "collectives/reduce_kernels.h"
#include "core/fpconv.h"

#define RK_BLOCK 512

#define RK_ID(x) (x)
#define RK_ADD(a, b) ((a) + (b))
#define RK_MUL(a, b) ((a) * (b))
#define RK_MAX(a, b) ((a) > (b) ? (a) : (b))
#define RK_MIN(a, b) ((a) < (b) ? (a) : (b))
/* NaN-propagating: a NaN in either operand wins */
#define RK_FMAX(a, b) (((a) > (b) || (a) != (a)) ? (a) : (b))
#define RK_FMIN(a, b) (((a) < (b) || (a) != (a)) ? (a) : (b))

typedef void (*rk_fn_t)(void* dst, const void* const* s, int k, size_t n, int avg_div);

/* One kernel: element type T, accumulator A, widening LOAD, narrowing
 * STORE, combining COMBINE. */
#define RK_DEFINE(NAME, T, A, LOAD, STORE, COMBINE)                                         \
  static void NAME(void* dstv, const void* const* s, int k, size_t n, int avg_div) {        \
    T* dst = (T*)dstv;                                                                      \
    if (k == 2 && sizeof(T) == sizeof(A)) {                                                 \
      const T* p0 = (const T*)s[0];                                                         \
      const T* p1 = (const T*)s[1];                                                         \
      if (avg_div > 1) {                                                                    \
        for (size_t i = 0; i < n; i++) {                                                    \
          A a = (A)LOAD(p0[i]), b = (A)LOAD(p1[i]);                                         \
          a = (A)COMBINE(a, b);                                                             \
          dst[i] = (T)STORE((A)(a / (A)avg_div));                                           \
        }                                                                                   \
      } else {                                                                              \
        for (size_t i = 0; i < n; i++) {                                                    \
          A a = (A)LOAD(p0[i]), b = (A)LOAD(p1[i]);                                         \
          dst[i] = (T)STORE((A)COMBINE(a, b));                                              \
        }                                                                                   \
      }                                                                                     \
      return;                                                                               \
    }                                                                                       \
    A acc[RK_BLOCK];                                                                        \
    if (k >= 3) {                                                                           \
      /* two sources per pass: ((s0 + s1) + s2) + ... in the same order */                  \
      for (size_t i0 = 0; i0 < n; i0 += RK_BLOCK) {                                         \
        size_t m = n - i0 < RK_BLOCK ? n - i0 : RK_BLOCK;                                   \
        const T* p0 = (const T*)s[0] + i0;                                                  \
        const T* p1 = (const T*)s[1] + i0;                                                  \
        T* d = dst + i0;                                                                    \
        if (k == 3) {                                                                       \
          const T* p2 = (const T*)s[2] + i0;                                                \
          for (size_t i = 0; i < m; i++) {                                                  \
            A a = (A)COMBINE((A)LOAD(p0[i]), (A)LOAD(p1[i]));                               \
            a = (A)COMBINE(a, (A)LOAD(p2[i]));                                              \
            d[i] = (T)STORE(avg_div > 1 ? (A)(a / (A)avg_div) : a);                         \
          }                                                                                 \
          continue;                                                                         \
        }                                                                                   \
        for (size_t i = 0; i < m; i++) acc[i] = (A)COMBINE((A)LOAD(p0[i]), (A)LOAD(p1[i])); \
        int j = 2;                                                                          \
        for (; k - j > 2; j += 2) {                                                         \
          const T* pa = (const T*)s[j] + i0;                                                \
          const T* pb = (const T*)s[j + 1] + i0;                                            \
          for (size_t i = 0; i < m; i++) {                                                  \
            A a = (A)COMBINE(acc[i], (A)LOAD(pa[i]));                                       \
            acc[i] = (A)COMBINE(a, (A)LOAD(pb[i]));                                         \
          }                                                                                 \
        }                                                                                   \
        const T* pa = (const T*)s[j] + i0;                                                  \
        if (k - j == 2) {                                                                   \
          const T* pb = (const T*)s[j + 1] + i0;                                            \
          for (size_t i = 0; i < m; i++) {                                                  \
            A a = (A)COMBINE(acc[i], (A)LOAD(pa[i]));                                       \
            a = (A)COMBINE(a, (A)LOAD(pb[i]));                                              \
            d[i] = (T)STORE(avg_div > 1 ? (A)(a / (A)avg_div) : a);                         \
          }                                                                                 \
        } else {                                                                            \
          for (size_t i = 0; i < m; i++) {                                                  \
            A a = (A)COMBINE(acc[i], (A)LOAD(pa[i]));                                       \
            d[i] = (T)STORE(avg_div > 1 ? (A)(a / (A)avg_div) : a);                         \
          }                                                                                 \
        }                                                                                   \
      }                                                                                     \
      return;                                                                               \
    }                                                                                       \
    for (size_t i0 = 0; i0 < n; i0 += RK_BLOCK) {                                           \
      size_t m = n - i0 < RK_BLOCK ? n - i0 : RK_BLOCK;                                     \
      const T* p0 = (const T*)s[0] + i0;                                                    \
      for (size_t i = 0; i < m; i++) acc[i] = (A)LOAD(p0[i]);                               \
      for (int j = 1; j < k; j++) {                                                         \
        const T* p = (const T*)s[j] + i0;                                                   \
        for (size_t i = 0; i < m; i++) {                                                    \
          A b = (A)LOAD(p[i]);                                                              \
          acc[i] = (A)COMBINE(acc[i], b);                                                   \
        }                                                                                   \
      }                                                                                     \
      if (avg_div > 1)                                                                      \
        for (size_t i = 0; i < m; i++) acc[i] = (A)(acc[i] / (A)avg_div);                   \
      for (size_t i = 0; i < m; i++) dst[i0 + i] = (T)STORE(acc[i]);                        \
    }                                                                                       \
  }

/* integers: sum and product wrap in the unsigned type, max / min compare
 * in the signed one */
#define RK_INT_FAMILY(P, T, U)                    \
  RK_DEFINE(P##_sum, T, U, RK_ID, RK_ID, RK_ADD)  \
  RK_DEFINE(P##_prod, T, U, RK_ID, RK_ID, RK_MUL) \
  RK_DEFINE(P##_max, T, T, RK_ID, RK_ID, RK_MAX)  \
  RK_DEFINE(P##_min, T, T, RK_ID, RK_ID, RK_MIN)

#define RK_FLOAT_FAMILY(P, T, A, LOAD, STORE)    \
  RK_DEFINE(P##_sum, T, A, LOAD, STORE, RK_ADD)  \
  RK_DEFINE(P##_prod, T, A, LOAD, STORE, RK_MUL) \
  RK_DEFINE(P##_max, T, A, LOAD, STORE, RK_FMAX) \
  RK_DEFINE(P##_min, T, A, LOAD, STORE, RK_FMIN)

RK_INT_FAMILY(rk_i8, int8_t, uint8_t)
RK_INT_FAMILY(rk_u8, uint8_t, uint8_t)
RK_INT_FAMILY(rk_i32, int32_t, uint32_t)
RK_INT_FAMILY(rk_u32, uint32_t, uint32_t)
RK_INT_FAMILY(rk_i64, int64_t, uint64_t)
RK_INT_FAMILY(rk_u64, uint64_t, uint64_t)
RK_FLOAT_FAMILY(rk_f32, float, float, RK_ID, RK_ID)
RK_FLOAT_FAMILY(rk_f64, double, double, RK_ID, RK_ID)
RK_FLOAT_FAMILY(rk_f16, uint16_t, float, qccl_f16_to_f32, qccl_f32_to_f16)
RK_FLOAT_FAMILY(rk_bf16, uint16_t, float, qccl_bf16_to_f32, qccl_f32_to_bf16)
RK_FLOAT_FAMILY(rk_e4m3, uint8_t, float, qccl_e4m3_to_f32, qccl_f32_to_e4m3)
RK_FLOAT_FAMILY(rk_e5m2, uint8_t, float, qccl_e5m2_to_f32, qccl_f32_to_e5m2)

/* [type][op]; avg uses the sum kernel with a divisor; NULL: not allowed */
#define RK_ROW(P) \
  { P##_sum, P##_prod, P##_max, P##_min, P##_sum }
#define RK_IROW(P) \
  { P##_sum, P##_prod, P##_max, P##_min, NULL }
#define RK_TABLE(NAME)                                                        \
  const rk_fn_t NAME[qcclNumTypes][qcclNumOps] = {                            \
      [qcclInt8] = RK_IROW(rk_i8),        [qcclUint8] = RK_IROW(rk_u8),       \
      [qcclInt32] = RK_IROW(rk_i32),      [qcclUint32] = RK_IROW(rk_u32),     \
      [qcclInt64] = RK_IROW(rk_i64),      [qcclUint64] = RK_IROW(rk_u64),     \
      [qcclFloat16] = RK_ROW(rk_f16),     [qcclFloat32] = RK_ROW(rk_f32),     \
      [qcclFloat64] = RK_ROW(rk_f64),     [qcclBfloat16] = RK_ROW(rk_bf16),   \
      [qcclFloat8e4m3] = RK_ROW(rk_e4m3), [qcclFloat8e5m2] = RK_ROW(rk_e5m2), \
  }

#endif /* QCCL_COLLECTIVES_REDUCE_KERNELS_IMPL_H_ */
