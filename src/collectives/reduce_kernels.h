/*
 * reduce_kernels.h - element-wise reductions of k sources, in the fixed
 * order 0..k-1 (so every rank and every run computes the same bits).
 *
 * Integer sum and product wrap around (two's complement). f16, bf16 and
 * fp8 are reduced in f32 and rounded once; f32 in f32; f64 in f64. Max and
 * min propagate NaN. Avg is the sum divided by avg_div in the accumulation
 * type.
 */
#ifndef QCCL_COLLECTIVES_REDUCE_KERNELS_H_
#define QCCL_COLLECTIVES_REDUCE_KERNELS_H_

#include <stddef.h>

#include "qccl.h"

/* dst[i] = op(srcs[0][i], ..., srcs[k-1][i]) for i < n. dst may equal a
 * source only if it is the same pointer at the same offset. */
void reduce_kernel(void* dst, const void* const* srcs, int k, size_t n, qcclDataType_t t,
                   qcclRedOp_t op, int avg_div);

/* reduce_kernel with the baseline (avx2 0) or the AVX2 build of the
 * kernels (avx2 1: only where reduce_isa_avx2 could choose it), for the
 * test that both give the same bits (NaN payloads aside:
 * reduce_kernels_impl.h). */
void reduce_kernel_isa(int avx2, void* dst, const void* const* srcs, int k, size_t n,
                       qcclDataType_t t, qcclRedOp_t op, int avg_div);

/* 1 if reduce_kernel runs the AVX2 build (the CPU has AVX2 and
 * QCCL_REDUCE_ISA is not scalar). */
int reduce_isa_avx2(void);

/* As reduce_kernel for a narrow float t, but leaves the f32 accumulation
 * in dst unrounded (for algorithms whose later stages go on in f32, so the
 * result is still rounded once). Same order, same bits as reduce_kernel
 * before its final rounding. */
void reduce_kernel_widen(float* dst, const void* const* srcs, int k, size_t n, qcclDataType_t t,
                         qcclRedOp_t op);

/* The type reductions of t are computed in: qcclFloat32 for the narrow
 * floats (f16, bf16, fp8), t itself otherwise. */
qcclDataType_t reduce_work_type(qcclDataType_t t);

/* Widens n elements of t into f32 / narrows f32 into t (round to nearest
 * even, fp8 saturating), for t a narrow float. */
void convert_to_f32(float* dst, const void* src, size_t n, qcclDataType_t t);
void convert_from_f32(void* dst, const float* src, size_t n, qcclDataType_t t);

#endif /* QCCL_COLLECTIVES_REDUCE_KERNELS_H_ */
