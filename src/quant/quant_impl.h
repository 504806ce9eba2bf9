/*
 * quant_impl.h - the block kernels one implementation (ISA) provides, used
 * by the chunk drivers in quant_chunk.c. Private to src/quant.
 *
 * The drivers do everything that is per block rather than per element (the
 * block parameters from quant_math.h, overflow, zero-range and tiny blocks,
 * NaN fill, layout), so a kernel only loops over elements of an ordinary
 * block. Each kernel performs, element by element, exactly the f32
 * operations of its scalar twin in quant_scalar.c.
 */
#ifndef QCCL_QUANT_IMPL_H_
#define QCCL_QUANT_IMPL_H_

#include <stddef.h>
#include <stdint.h>

#include "qccl.h"
#include "quant/quant.h"
#include "quant/quant_math.h"

/* Per-call constants of the kernels. */
typedef struct quant_ctx {
  int bits;       /* 8 or 4 */
  int asym;       /* 0 or 1 */
  int stochastic; /* 0 or 1 */
  int block;      /* B */
  int qmax;       /* qm_qmax(bits, asym) */
  qm_key_t key;   /* stochastic-rounding key of (seed, rank) */
} quant_ctx_t;

/* The statistics of a block that decide its parameters. */
typedef struct quant_stats {
  uint32_t amax; /* max over elements of (bits & 0x7fffffff) */
  float mn, mx;  /* min and max (asymmetric only; meaningless with NaN) */
} quant_stats_t;

typedef struct quant_kernels {
  /* Statistics of x[0..nr), 1 <= nr <= B (mn, mx only if asym). */
  void (*stats)(const float* x, int nr, int asym, quant_stats_t* st);
  /* Codes of x[0..nr) in a QM_NORMAL block b; writes ceil(nr * bits / 8)
   * bytes (an unused last nibble is 0). idx is the generator index of x[0];
   * the drivers guarantee that idx .. idx + nr - 1 share their high 32 bits. */
  void (*encode)(const quant_ctx_t* c, const qm_block_t* b, const float* x, int nr, uint64_t idx,
                 uint8_t* codes);
  /* out[i] = value of code i, i < nr, for a finite scale and minimum.
   * stream: non-temporal stores allowed (the driver fences afterwards). */
  void (*decode)(const quant_ctx_t* c, float scale, float lo, const uint8_t* codes, int nr,
                 float* out, int stream);
  /* acc[i] = acc[i] + value of code i, i < nr. */
  void (*decode_acc)(const quant_ctx_t* c, float scale, float lo, const uint8_t* codes, int nr,
                     float* acc);
  /* In-place unnormalized Walsh-Hadamard transform of x[0..B), B >= 32:
   * stages h = 1, 2, 4, ..., B/2, butterflies (a, b) -> (a + b, a - b). */
  void (*fwht)(float* x, int block);
  /* x[i] ^= mask[i] (sign flips), i < n. */
  void (*flip)(float* x, const uint32_t* mask, int n);
  /* x[i] = x[i] * f, i < n. */
  void (*mul)(float* x, float f, int n);
  /* acc[i] = acc[i] + x[i], i < n. */
  void (*add)(float* acc, const float* x, int n);
  /* r[i] = a[i] - b[i], i < n. */
  void (*sub)(float* r, const float* a, const float* b, int n);
  /* dst[i] = f32 of src[i] (f32, f16, bf16: exact), i < n. */
  void (*load)(const void* src, qcclDataType_t type, size_t n, float* dst);
  /* dst[i] = src[i] rounded to type (nearest even), i < n. */
  void (*store)(const float* src, size_t n, qcclDataType_t type, void* dst, int stream);
  /* Orders non-temporal stores before later ones (may be NULL). */
  void (*fence)(void);
} quant_kernels_t;

extern const quant_kernels_t quant_kernels_scalar;
#if defined(QUANT_X86)
extern const quant_kernels_t quant_kernels_avx2;
extern const quant_kernels_t quant_kernels_avx512;
#endif

/* The kernels of isa (NULL if not built). */
const quant_kernels_t* quant_kernels(quant_isa_t isa);

/* Outputs at least this many bytes are written with non-temporal stores. */
#define QUANT_STREAM_BYTES ((size_t)8 << 20)

#endif /* QCCL_QUANT_IMPL_H_ */
