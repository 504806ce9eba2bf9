/*
 * reduce_kernels.c - element-wise reductions of k sources (see the header):
 * the baseline x86-64 build of the kernels (reduce_kernels_impl.h), and the
 * choice between it and the AVX2 build (reduce_kernels_avx2.c), made once
 * per process: with QCCL_REDUCE_ISA unset and a CPU with AVX2, the AVX2
 * build for every type and size (the narrow floats' widening and narrowing
 * take 0.52-0.72 of the baseline's time in a 2-rank bf16 AllReduce of
 * 16 KiB-16 MiB; f32 0.80-0.84 at 1-16 MiB; and on the Xeon guest f32
 * Reduce / AllReduce of 16-128 KiB on 2 ranks 0.82-0.92, 4-8 KiB even,
 * where the AMD guest had read 1.05-1.12 within its noise and the
 * baseline had stayed below 65536 elements: docs/PERF.md, "Reduction
 * kernels for AVX2" and "AVX2 at every size"). QCCL_REDUCE_ISA=scalar or
 * avx2 forces one build.
 * Both give the same bits (but for which of several NaN inputs comes out,
 * reduce_kernels_impl.h), and each element is computed by one rank, so
 * ranks may even choose differently.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "collectives/reduce_kernels_impl.h"
#include "core/dtype.h"
#include "core/env.h"
#include "core/log.h"

static RK_TABLE(rk_table_base);
#if defined(REDUCE_X86)
extern const rk_fn_t rk_table_avx2[qcclNumTypes][qcclNumOps];
#endif

static const rk_fn_t (*rk_table)[qcclNumOps];
static pthread_once_t rk_once = PTHREAD_ONCE_INIT;

static void rk_choose(void) {
  rk_table = rk_table_base;
  int avx2 = 0;
#if defined(REDUCE_X86)
  __builtin_cpu_init();
  avx2 = __builtin_cpu_supports("avx2");
#endif
  const char* want = env_get("QCCL_REDUCE_ISA");
  int scalar = want != NULL && env_word_is(want, "scalar");
  if (want != NULL && want[0] != '\0' && !scalar && !env_word_is(want, "avx2"))
    QCCL_WARN(LOG_COLL, "QCCL_REDUCE_ISA=%.40s: unknown (scalar or avx2): the default", want);
  if (want != NULL && env_word_is(want, "avx2") && !avx2)
    QCCL_WARN(LOG_COLL, "QCCL_REDUCE_ISA=avx2: this CPU (or build) lacks AVX2: scalar");
#if defined(REDUCE_X86)
  if (avx2 && !scalar) rk_table = rk_table_avx2;
#endif
  QCCL_INFO(LOG_COLL, "reduction kernels: %s", rk_table == rk_table_base ? "scalar" : "avx2");
}

int reduce_isa_avx2(void) {
  pthread_once(&rk_once, rk_choose);
  return rk_table != rk_table_base;
}

void reduce_kernel_isa(int avx2, void* dst, const void* const* srcs, int k, size_t n,
                       qcclDataType_t t, qcclRedOp_t op, int avg_div) {
  const rk_fn_t(*table)[qcclNumOps] = rk_table_base;
#if defined(REDUCE_X86)
  if (avx2) table = rk_table_avx2;
#else
  (void)avx2;
#endif
  table[t][op](dst, srcs, k, n, op == qcclAvg ? avg_div : 0);
}

void reduce_kernel(void* dst, const void* const* srcs, int k, size_t n, qcclDataType_t t,
                   qcclRedOp_t op, int avg_div) {
  pthread_once(&rk_once, rk_choose);
  rk_table[t][op](dst, srcs, k, n, op == qcclAvg ? avg_div : 0);
}

qcclDataType_t reduce_work_type(qcclDataType_t t) {
  return (t == qcclFloat16 || t == qcclBfloat16 || t == qcclFloat8e4m3 || t == qcclFloat8e5m2)
             ? qcclFloat32
             : t;
}

void reduce_kernel_widen(float* dst, const void* const* srcs, int k, size_t n, qcclDataType_t t,
                         qcclRedOp_t op) {
  float conv[RK_BLOCK];
  size_t es = dtype_size(t);
  for (size_t i0 = 0; i0 < n; i0 += RK_BLOCK) {
    size_t m = n - i0 < RK_BLOCK ? n - i0 : RK_BLOCK;
    convert_to_f32(dst + i0, (const char*)srcs[0] + i0 * es, m, t);
    for (int j = 1; j < k; j++) {
      convert_to_f32(conv, (const char*)srcs[j] + i0 * es, m, t);
      const void* two[2] = {dst + i0, conv};
      reduce_kernel(dst + i0, two, 2, m, qcclFloat32, op, 0);
    }
  }
}

void convert_to_f32(float* dst, const void* src, size_t n, qcclDataType_t t) {
  const uint16_t* h = src;
  const uint8_t* b = src;
  for (size_t i = 0; i < n; i++) {
    switch (t) {
      case qcclFloat16:
        dst[i] = qccl_f16_to_f32(h[i]);
        break;
      case qcclBfloat16:
        dst[i] = qccl_bf16_to_f32(h[i]);
        break;
      case qcclFloat8e4m3:
        dst[i] = qccl_e4m3_to_f32(b[i]);
        break;
      default:
        dst[i] = qccl_e5m2_to_f32(b[i]);
        break;
    }
  }
}

void convert_from_f32(void* dst, const float* src, size_t n, qcclDataType_t t) {
  uint16_t* h = dst;
  uint8_t* b = dst;
  for (size_t i = 0; i < n; i++) {
    switch (t) {
      case qcclFloat16:
        h[i] = qccl_f32_to_f16(src[i]);
        break;
      case qcclBfloat16:
        h[i] = qccl_f32_to_bf16(src[i]);
        break;
      case qcclFloat8e4m3:
        b[i] = qccl_f32_to_e4m3(src[i]);
        break;
      default:
        b[i] = qccl_f32_to_e5m2(src[i]);
        break;
    }
  }
}
