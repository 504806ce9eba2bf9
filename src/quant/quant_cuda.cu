/*
 * quant_cuda.cu - the CUDA kernels of the codec: quantize, dequantize,
 * dequantize-accumulate and the fused reduce-requantize, bit-identical to
 * the scalar C definition because every element operation comes from
 * quant_math.h (f32 with __fmul_rn / __fadd_rn / __fdiv_rn, built with
 * -fmad=false) and every block decision is the same.
 *
 * One warp per quantization block of B elements: lane l holds elements
 * j = 32 e + l, e < B / 32, in registers, so loads and stores of a warp
 * touch consecutive addresses. Block statistics are warp reductions (max of
 * |x| bits, min and max: exact, any order). The Walsh-Hadamard transform
 * runs its stages h = 1..16 across lanes (shuffle, add or subtract by lane
 * bit) and h >= 32 inside each lane, in the scalar order. int4 pairs meet by
 * a shuffle with the neighbour lane. Cost: one read of the input, one write
 * of the output; the header and padding bytes are written by the warps of
 * the first and last blocks.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant_cuda.h"
#include "quant/quant_math.h"

#define FULL 0xffffffffu
#define QK_EXPORT __attribute__((visibility("default")))
#define WARPS 4 /* warps per thread block */

namespace {

struct qk_fmt {
  int bits, asym, sr, rotate, block, qmax;
  qm_key_t key;  /* stochastic rounding */
  qm_key_t skey; /* rotation signs */
  unsigned long long index0;
};

struct qk_layout {
  size_t n, nb, hdr, used, end, total; /* header used bytes, end of codes, chunk */
};

struct qk_srcs {
  const unsigned char* p[QUANT_CUDA_MAX_K];
  int k;
};

qk_fmt make_fmt(const quant_params_t* p) {
  qk_fmt f;
  f.bits = p->bits;
  f.asym = p->asym;
  f.sr = p->stochastic;
  f.rotate = p->rotate;
  f.block = p->block;
  f.qmax = qm_qmax(p->bits, p->asym);
  f.key = qm_sr_key(p->seed, p->rank);
  f.skey = qm_sign_key(p->seed);
  f.index0 = p->index0;
  return f;
}

qk_layout make_layout(const quant_params_t* p, size_t n) {
  qk_layout l;
  l.n = n;
  l.nb = qm_nblocks(n, p->block);
  l.hdr = qm_header_bytes(n, p->block, p->asym);
  l.used = l.nb * 4u * (p->asym ? 2u : 1u);
  l.end = l.hdr + qm_code_bytes(qm_coded_elems(n, p->block, p->rotate), p->bits);
  l.total = qm_chunk_bytes(n, p->block, p->bits, p->asym, p->rotate);
  return l;
}

__device__ __forceinline__ float qk_load(const void* src, int type, size_t i) {
  if (type == qcclFloat16) return qccl_f16_to_f32(((const uint16_t*)src)[i]);
  if (type == qcclBfloat16) return qccl_bf16_to_f32(((const uint16_t*)src)[i]);
  return ((const float*)src)[i];
}

__device__ __forceinline__ void qk_store(void* dst, int type, size_t i, float v) {
  if (type == qcclFloat16)
    ((uint16_t*)dst)[i] = qccl_f32_to_f16(v);
  else if (type == qcclBfloat16)
    ((uint16_t*)dst)[i] = qccl_f32_to_bf16(v);
  else
    ((float*)dst)[i] = v;
}

__device__ __forceinline__ int qk_finite(float v) {
  return __fsub_rn(v, v) == 0.0f;
}

/* Unnormalized Walsh-Hadamard transform of the warp's block, scalar order. */
template <int EPL>
__device__ __forceinline__ void qk_fwht(float (&v)[EPL], int lane) {
#pragma unroll
  for (int h = 1; h < 32; h <<= 1) {
#pragma unroll
    for (int e = 0; e < EPL; e++) {
      float p = __shfl_xor_sync(FULL, v[e], h);
      v[e] = (lane & h) ? QM_SUB(p, v[e]) : QM_ADD(v[e], p);
    }
  }
#pragma unroll
  for (int hh = 1; hh < EPL; hh <<= 1) {
#pragma unroll
    for (int e = 0; e < EPL; e++) {
      if (!(e & hh)) {
        float a = v[e], b = v[e + hh];
        v[e] = QM_ADD(a, b);
        v[e + hh] = QM_SUB(a, b);
      }
    }
  }
}

template <int EPL>
__device__ __forceinline__ void qk_flip(float (&v)[EPL], const qk_fmt& f, int lane) {
#pragma unroll
  for (int e = 0; e < EPL; e++)
    v[e] = qccl_bits_f32(qccl_f32_bits(v[e]) ^ qm_sign_mask(f.skey, (uint32_t)(32 * e + lane)));
}

/* Parameters of the warp's block from its ne values (the same in all lanes). */
template <int EPL>
__device__ __forceinline__ qm_block_t qk_params(const float (&v)[EPL], int ne, const qk_fmt& f,
                                                int lane) {
  uint32_t amax = 0;
  float mn = qccl_bits_f32(0x7f800000u), mx = -mn;
#pragma unroll
  for (int e = 0; e < EPL; e++) {
    if (32 * e + lane < ne) {
      uint32_t a = qccl_f32_bits(v[e]) & 0x7fffffffu;
      amax = a > amax ? a : amax;
      mn = v[e] < mn ? v[e] : mn;
      mx = v[e] > mx ? v[e] : mx;
    }
  }
  amax = __reduce_max_sync(FULL, amax);
#pragma unroll
  for (int h = 16; h > 0; h >>= 1) {
    float a = __shfl_xor_sync(FULL, mn, h), b = __shfl_xor_sync(FULL, mx, h);
    mn = a < mn ? a : mn;
    mx = b > mx ? b : mx;
  }
  return f.asym ? qm_block_asym(mn, mx, amax, f.bits) : qm_block_sym(amax, f.bits);
}

/* Writes the codes of the warp's block (ne values) at codes, and its scale
 * and minimum into the header. */
template <int EPL>
__device__ __forceinline__ void qk_emit(const float (&v)[EPL], int ne, const qm_block_t& b,
                                        const qk_fmt& f, const qk_layout& l, size_t blk,
                                        unsigned char* dst, int lane) {
  uint8_t* codes = dst + l.hdr + blk * qm_block_code_bytes(f.block, f.bits);
  unsigned long long idx = f.index0 + blk * (size_t)f.block;
  int special = b.kind == QM_ZERO || b.kind == QM_OVERFLOW;
#pragma unroll
  for (int e = 0; e < EPL; e++) {
    int j = 32 * e + lane;
    int q = 0;
    if (!special && j < ne) {
      float u = f.sr ? qm_sr_u(f.key, idx + (unsigned long long)j) : 0.0f;
      q = qm_code(v[e], &b, f.asym, f.qmax, f.sr, u);
    }
    if (f.bits == 8) {
      if (j < ne) codes[j] = (uint8_t)q;
    } else {
      int odd = __shfl_down_sync(FULL, q, 1);
      if (!(lane & 1) && j < ne) codes[j >> 1] = qm_pack4(q, j + 1 < ne ? odd : 0);
    }
  }
  if (lane == 0) {
    ((float*)dst)[blk] = b.scale;
    if (f.asym) ((float*)dst)[l.nb + blk] = b.lo;
  }
  /* padding: after the header's floats (block 0) and after the codes (last block) */
  if (blk == 0 && lane < (int)(l.hdr - l.used)) dst[l.used + (size_t)lane] = 0;
  if (blk == l.nb - 1 && lane < (int)(l.total - l.end)) dst[l.end + (size_t)lane] = 0;
}

/* The values (rotated domain) of block blk of chunk src, 0 beyond ne; returns
 * 0 for an overflow block. */
template <int EPL>
__device__ __forceinline__ int qk_values(float (&y)[EPL], const unsigned char* src, int ne,
                                         const qk_fmt& f, const qk_layout& l, size_t blk,
                                         int lane) {
  float scale = ((const float*)src)[blk];
  float lo = f.asym ? ((const float*)src)[l.nb + blk] : 0.0f;
  if (!qk_finite(scale) || !qk_finite(lo)) return 0;
  const uint8_t* codes = src + l.hdr + blk * qm_block_code_bytes(f.block, f.bits);
#pragma unroll
  for (int e = 0; e < EPL; e++) {
    int j = 32 * e + lane;
    y[e] =
        j < ne ? qm_value(qm_get_code(codes, (size_t)j, f.bits, f.asym), scale, lo, f.asym) : 0.0f;
  }
  return 1;
}

/* The original-domain values of a dequantized block (in place). */
template <int EPL>
__device__ __forceinline__ void qk_unrotate(float (&y)[EPL], const qk_fmt& f, int lane) {
  float inv = 1.0f / (float)f.block; /* a power of two: exact */
#pragma unroll
  for (int e = 0; e < EPL; e++) y[e] = QM_MUL(y[e], inv);
  qk_fwht<EPL>(y, lane);
  qk_flip<EPL>(y, f, lane);
}

__device__ __forceinline__ size_t qk_block_index() {
  return (size_t)blockIdx.x * WARPS + threadIdx.x / 32;
}

template <int EPL>
__global__ void qk_quantize(qk_fmt f, qk_layout l, const void* src, int type, unsigned char* dst) {
  size_t blk = qk_block_index();
  int lane = threadIdx.x & 31;
  if (blk >= l.nb) return;
  size_t first = blk * (size_t)f.block;
  int nr = (int)(l.n - first < (size_t)f.block ? l.n - first : (size_t)f.block);
  float v[EPL];
#pragma unroll
  for (int e = 0; e < EPL; e++) {
    int j = 32 * e + lane;
    v[e] = j < nr ? qk_load(src, type, first + (size_t)j) : 0.0f;
  }
  int ne = nr;
  if (f.rotate) {
    qk_flip<EPL>(v, f, lane);
    qk_fwht<EPL>(v, lane);
    ne = f.block;
  }
  qm_block_t b = qk_params<EPL>(v, ne, f, lane);
  qk_emit<EPL>(v, ne, b, f, l, blk, dst, lane);
}

template <int EPL>
__global__ void qk_dequantize(qk_fmt f, qk_layout l, const unsigned char* src, int type, void* dst,
                              int acc) {
  size_t blk = qk_block_index();
  int lane = threadIdx.x & 31;
  if (blk >= l.nb) return;
  size_t first = blk * (size_t)f.block;
  int nr = (int)(l.n - first < (size_t)f.block ? l.n - first : (size_t)f.block);
  float y[EPL];
  int ok = qk_values<EPL>(y, src, f.rotate ? f.block : nr, f, l, blk, lane);
  if (ok && f.rotate) qk_unrotate<EPL>(y, f, lane);
  float qnan = qccl_bits_f32(QM_QNAN_BITS);
#pragma unroll
  for (int e = 0; e < EPL; e++) {
    int j = 32 * e + lane;
    if (j >= nr) continue;
    size_t i = first + (size_t)j;
    if (acc) {
      float* a = (float*)dst;
      a[i] = ok ? QM_ADD(a[i], y[e]) : qnan;
    } else {
      qk_store(dst, type, i, ok ? y[e] : qnan);
    }
  }
}

template <int EPL>
__global__ void qk_reduce_requant(qk_fmt fi, qk_layout li, qk_srcs s, qk_fmt fo, qk_layout lo,
                                  float* residual, unsigned char* dst) {
  size_t blk = qk_block_index();
  int lane = threadIdx.x & 31;
  if (blk >= li.nb) return;
  size_t first = blk * (size_t)fi.block;
  int nr = (int)(li.n - first < (size_t)fi.block ? li.n - first : (size_t)fi.block);
  int ne = fi.rotate ? fi.block : nr;
  float acc[EPL], y[EPL];
  int ok = qk_values<EPL>(acc, s.p[0], ne, fi, li, blk, lane);
  for (int k = 1; k < s.k && ok; k++) {
    ok = qk_values<EPL>(y, s.p[k], ne, fi, li, blk, lane);
#pragma unroll
    for (int e = 0; e < EPL; e++) acc[e] = QM_ADD(acc[e], y[e]);
  }
  if (ok && residual != NULL) {
#pragma unroll
    for (int e = 0; e < EPL; e++) {
      int j = 32 * e + lane;
      if (j < ne) acc[e] = QM_ADD(acc[e], residual[first + (size_t)j]);
    }
  }
  qm_block_t b = ok ? qk_params<EPL>(acc, ne, fo, lane) : qm_block_overflow();
  qk_emit<EPL>(acc, ne, b, fo, lo, blk, dst, lane);
  if (residual == NULL) return;
  __syncwarp();
  int fin = qk_finite(b.scale) && qk_finite(b.lo);
  if (fin) qk_values<EPL>(y, dst, ne, fo, lo, blk, lane);
#pragma unroll
  for (int e = 0; e < EPL; e++) {
    int j = 32 * e + lane;
    if (j < ne) residual[first + (size_t)j] = fin ? QM_SUB(acc[e], y[e]) : 0.0f;
  }
}

unsigned grid_of(size_t nb) {
  return (unsigned)((nb + WARPS - 1) / WARPS);
}

int check(const quant_params_t* p, size_t n) {
  if (p == NULL || (p->bits != 4 && p->bits != 8) || p->block < QM_BLOCK_MIN ||
      p->block > QM_BLOCK_MAX || (p->block & (p->block - 1)) != 0 || n > QUANT_MAX_COUNT)
    return 1;
  return 0;
}

int check_type(qcclDataType_t t) {
  return t != qcclFloat32 && t != qcclFloat16 && t != qcclBfloat16;
}

#define QK_DISPATCH(B, LAUNCH) \
  switch ((B) / 32) {          \
    case 1:                    \
      LAUNCH(1);               \
      break;                   \
    case 2:                    \
      LAUNCH(2);               \
      break;                   \
    case 4:                    \
      LAUNCH(4);               \
      break;                   \
    case 8:                    \
      LAUNCH(8);               \
      break;                   \
    case 16:                   \
      LAUNCH(16);              \
      break;                   \
    case 32:                   \
      LAUNCH(32);              \
      break;                   \
    case 64:                   \
      LAUNCH(64);              \
      break;                   \
    default:                   \
      LAUNCH(128);             \
      break;                   \
  }

}  // namespace

extern "C" QK_EXPORT int quant_cuda_quantize(const quant_params_t* p, const void* src,
                                             qcclDataType_t type, size_t n, void* dst,
                                             void* stream) {
  if (check(p, n) || check_type(type) || (n > 0 && (src == NULL || dst == NULL)))
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  qk_fmt f = make_fmt(p);
  qk_layout l = make_layout(p, n);
  cudaStream_t st = (cudaStream_t)stream;
#define LAUNCH(E) \
  qk_quantize<E><<<grid_of(l.nb), 32 * WARPS, 0, st>>>(f, l, src, (int)type, (unsigned char*)dst)
  QK_DISPATCH(p->block, LAUNCH)
#undef LAUNCH
  return cudaGetLastError();
}

extern "C" QK_EXPORT int quant_cuda_dequantize(const quant_params_t* p, const void* src, size_t n,
                                               qcclDataType_t type, void* dst, void* stream) {
  if (check(p, n) || check_type(type) || (n > 0 && (src == NULL || dst == NULL)))
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  qk_fmt f = make_fmt(p);
  qk_layout l = make_layout(p, n);
  cudaStream_t st = (cudaStream_t)stream;
#define LAUNCH(E)  \
  qk_dequantize<E> \
      <<<grid_of(l.nb), 32 * WARPS, 0, st>>>(f, l, (const unsigned char*)src, (int)type, dst, 0)
  QK_DISPATCH(p->block, LAUNCH)
#undef LAUNCH
  return cudaGetLastError();
}

extern "C" QK_EXPORT int quant_cuda_dequantize_acc(const quant_params_t* p, const void* src,
                                                   size_t n, float* acc, void* stream) {
  if (check(p, n) || (n > 0 && (src == NULL || acc == NULL))) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  qk_fmt f = make_fmt(p);
  qk_layout l = make_layout(p, n);
  cudaStream_t st = (cudaStream_t)stream;
#define LAUNCH(E)                                                                         \
  qk_dequantize<E><<<grid_of(l.nb), 32 * WARPS, 0, st>>>(f, l, (const unsigned char*)src, \
                                                         (int)qcclFloat32, acc, 1)
  QK_DISPATCH(p->block, LAUNCH)
#undef LAUNCH
  return cudaGetLastError();
}

extern "C" QK_EXPORT int quant_cuda_reduce_requant(const quant_params_t* in,
                                                   const void* const* srcs, int k, size_t n,
                                                   const quant_params_t* out, float* residual,
                                                   void* dst, void* stream) {
  if (check(in, n) || check(out, n) || k < 1 || k > QUANT_CUDA_MAX_K || in->block != out->block ||
      in->rotate != out->rotate || (in->rotate && in->seed != out->seed) ||
      (n > 0 && (srcs == NULL || dst == NULL)))
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  qk_srcs s;
  memset(&s, 0, sizeof s);
  s.k = k;
  for (int j = 0; j < k; j++) {
    if (srcs[j] == NULL) return cudaErrorInvalidValue;
    s.p[j] = (const unsigned char*)srcs[j];
  }
  qk_fmt fi = make_fmt(in), fo = make_fmt(out);
  qk_layout li = make_layout(in, n), lo = make_layout(out, n);
  cudaStream_t st = (cudaStream_t)stream;
#define LAUNCH(E)      \
  qk_reduce_requant<E> \
      <<<grid_of(li.nb), 32 * WARPS, 0, st>>>(fi, li, s, fo, lo, residual, (unsigned char*)dst)
  QK_DISPATCH(in->block, LAUNCH)
#undef LAUNCH
  return cudaGetLastError();
}

extern "C" QK_EXPORT int quant_cuda_device_count(int* count) {
  return cudaGetDeviceCount(count);
}

extern "C" QK_EXPORT const char* quant_cuda_error_string(int err) {
  return cudaGetErrorString((cudaError_t)err);
}

extern "C" QK_EXPORT int quant_cuda_device_name(char* name, size_t len) {
  cudaDeviceProp prop;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, dev);
  if (e == cudaSuccess && len > 0) {
    strncpy(name, prop.name, len - 1);
    name[len - 1] = '\0';
  }
  return e;
}

extern "C" QK_EXPORT int quant_cuda_malloc(void** ptr, size_t bytes) {
  return cudaMalloc(ptr, bytes);
}

extern "C" QK_EXPORT int quant_cuda_free(void* ptr) {
  return cudaFree(ptr);
}

extern "C" QK_EXPORT int quant_cuda_memcpy(void* dst, const void* src, size_t bytes, int kind) {
  cudaMemcpyKind k = kind == 0   ? cudaMemcpyHostToDevice
                     : kind == 1 ? cudaMemcpyDeviceToHost
                                 : cudaMemcpyDeviceToDevice;
  return cudaMemcpy(dst, src, bytes, k);
}

extern "C" QK_EXPORT int quant_cuda_memset(void* ptr, int value, size_t bytes) {
  return cudaMemset(ptr, value, bytes);
}

extern "C" QK_EXPORT int quant_cuda_sync(void) {
  return cudaDeviceSynchronize();
}

static cudaEvent_t timer_ev[2];

extern "C" QK_EXPORT int quant_cuda_timer_start(void) {
  cudaError_t e = cudaSuccess;
  if (timer_ev[0] == NULL) {
    e = cudaEventCreate(&timer_ev[0]);
    if (e == cudaSuccess) e = cudaEventCreate(&timer_ev[1]);
    if (e != cudaSuccess) return e;
  }
  return cudaEventRecord(timer_ev[0], 0);
}

extern "C" QK_EXPORT int quant_cuda_timer_stop(float* ms) {
  cudaError_t e = cudaEventRecord(timer_ev[1], 0);
  if (e == cudaSuccess) e = cudaEventSynchronize(timer_ev[1]);
  if (e == cudaSuccess) e = cudaEventElapsedTime(ms, timer_ev[0], timer_ev[1]);
  return e;
}
