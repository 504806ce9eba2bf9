/*
 * quant_cuda.h - the CUDA kernels of the quantization codec (wire format
 * v1), in libqccl_quant_cuda.so, built only when nvcc is found. They give
 * the same bytes as the scalar C definition (tests/gpu compares them).
 *
 * Pointers are device pointers: element arrays naturally aligned, chunks 4-
 * byte aligned (cudaMalloc gives 256). stream is a cudaStream_t (NULL: the
 * default stream); the calls only enqueue. Every function returns a
 * cudaError_t value: 0 is success, cudaErrorInvalidValue (1) a bad argument.
 */
#ifndef QCCL_QUANT_CUDA_H_
#define QCCL_QUANT_CUDA_H_

#include <stddef.h>

#include "quant/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most chunks quant_cuda_reduce_requant sums in one call. */
#define QUANT_CUDA_MAX_K 64

int quant_cuda_quantize(const quant_params_t* p, const void* src, qcclDataType_t type, size_t n,
                        void* dst, void* stream);
int quant_cuda_dequantize(const quant_params_t* p, const void* src, size_t n, qcclDataType_t type,
                          void* dst, void* stream);
int quant_cuda_dequantize_acc(const quant_params_t* p, const void* src, size_t n, float* acc,
                              void* stream);
/* srcs is a host array of k device pointers (k <= QUANT_CUDA_MAX_K). */
int quant_cuda_reduce_requant(const quant_params_t* in, const void* const* srcs, int k, size_t n,
                              const quant_params_t* out, float* residual, void* dst, void* stream);

/* Helpers for tests and benchmarks, so that they need no CUDA headers. */
int quant_cuda_device_count(int* count);
const char* quant_cuda_error_string(int err);
int quant_cuda_device_name(char* name, size_t len);
int quant_cuda_malloc(void** ptr, size_t bytes);
int quant_cuda_free(void* ptr);
/* kind: 0 host to device, 1 device to host, 2 device to device. */
int quant_cuda_memcpy(void* dst, const void* src, size_t bytes, int kind);
int quant_cuda_memset(void* ptr, int value, size_t bytes);
int quant_cuda_sync(void);
/* Events on the default stream: start, then stop gives the milliseconds. */
int quant_cuda_timer_start(void);
int quant_cuda_timer_stop(float* ms);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QCCL_QUANT_CUDA_H_ */
