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
#include <string.h>

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
  int stream;     /* encoders may write codes with non-temporal stores */
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
  /* The rotation of one block x[0..B), B >= 32, in place: x = H (s o x),
   * where s o x flips the signs of x[j] with mask[j] set (bit 31) and H is
   * the unnormalized Walsh-Hadamard transform, run as stages h = 1, 2, 4,
   * ..., B/2 of butterflies (a, b) -> (a + b, a - b). */
  void (*rotate)(float* x, const uint32_t* mask, int block);
  /* Its inverse, x = s o H (x * f) with f = 1/B: multiply, the same stages,
   * then the sign flips. */
  void (*unrotate)(float* x, const uint32_t* mask, int block, float f);
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
  /* Optional fast paths (NULL: the drivers loop over the kernels above):
   * nblocks full blocks of f32 without rotation, with the same results as
   * quant_encode_block / quant_decode_block per block. */
  void (*quantize_f32)(const quant_ctx_t* c, const float* x, size_t nblocks, uint64_t idx,
                       unsigned char* scales, unsigned char* mins, uint8_t* codes);
  void (*dequantize_f32)(const quant_ctx_t* c, const unsigned char* scales,
                         const unsigned char* mins, const uint8_t* codes, size_t nblocks,
                         float* out, int stream);
} quant_kernels_t;

extern const quant_kernels_t quant_kernels_scalar;

typedef void (*quant_stats_fn)(const float* x, int nr, int asym, quant_stats_t* st);
typedef void (*quant_encode_fn)(const quant_ctx_t* c, const qm_block_t* b, const float* x, int nr,
                                uint64_t idx, uint8_t* codes);
typedef void (*quant_decode_fn)(const quant_ctx_t* c, float scale, float lo, const uint8_t* codes,
                                int nr, float* out, int stream);

/* The parameters of a block from its statistics. */
static inline qm_block_t quant_block_from_stats(const quant_ctx_t* c, const quant_stats_t* st) {
  return c->asym ? qm_block_asym(st->mn, st->mx, st->amax, c->bits)
                 : qm_block_sym(st->amax, c->bits);
}

/* The codes of a block with parameters b, the special blocks handled here
 * for every ISA: zero-range and overflow blocks get zero codes; tiny
 * blocks, and stochastic blocks whose generator index crosses a multiple of
 * 2^32, take the scalar encoder. */
static inline __attribute__((always_inline)) void quant_emit_block(quant_encode_fn encode,
                                                                   const quant_ctx_t* c,
                                                                   const qm_block_t* b,
                                                                   const float* x, int nr,
                                                                   uint64_t idx, uint8_t* codes) {
  if (b->kind == QM_ZERO || b->kind == QM_OVERFLOW) {
    memset(codes, 0, qm_code_bytes((size_t)nr, c->bits));
  } else if (b->kind == QM_TINY ||
             (c->stochastic && (idx >> 32) != ((idx + (uint64_t)nr - 1) >> 32))) {
    quant_kernels_scalar.encode(c, b, x, nr, idx, codes);
  } else {
    encode(c, b, x, nr, idx, codes);
  }
}

/* Full f32 blocks without rotation, software-pipelined: the statistics and
 * parameters (two divisions) of block b + 1 are computed before the codes of
 * block b, so their latency overlaps the encoding. */
static inline __attribute__((always_inline)) void quant_encode_blocks(
    quant_stats_fn stats, quant_encode_fn encode, const quant_ctx_t* c, const float* x,
    size_t nblocks, uint64_t idx, unsigned char* scales, unsigned char* mins, uint8_t* codes) {
  size_t bs = (size_t)c->block, cb = qm_block_code_bytes(c->block, c->bits);
  quant_stats_t st;
  if (nblocks == 0) return;
  stats(x, c->block, c->asym, &st);
  qm_block_t cur = quant_block_from_stats(c, &st);
  for (size_t b = 0; b < nblocks; b++) {
    qm_block_t next = cur;
    if (b + 1 < nblocks) {
      stats(x + (b + 1) * bs, c->block, c->asym, &st);
      next = quant_block_from_stats(c, &st);
    }
    memcpy(scales + 4 * b, &cur.scale, 4);
    if (mins != NULL) memcpy(mins + 4 * b, &cur.lo, 4);
    quant_emit_block(encode, c, &cur, x + b * bs, c->block, idx + b * bs, codes + b * cb);
    cur = next;
  }
}

/* The scale and minimum of block b of a chunk with nb blocks (mins NULL when
 * symmetric); returns 0 for an overflow block (a non-finite scale or min). */
static inline int quant_block_params(const unsigned char* scales, const unsigned char* mins,
                                     size_t b, float* scale, float* lo) {
  memcpy(scale, scales + 4 * b, 4);
  *lo = 0.0f;
  if (mins != NULL) memcpy(lo, mins + 4 * b, 4);
  return *scale - *scale == 0.0f && *lo - *lo == 0.0f;
}

/* Full f32 blocks of a chunk without rotation: an overflow block gives NaN. */
static inline __attribute__((always_inline)) void quant_decode_blocks(
    quant_decode_fn decode, const quant_ctx_t* c, const unsigned char* scales,
    const unsigned char* mins, const uint8_t* codes, size_t nblocks, float* out, int stream) {
  size_t cb = qm_block_code_bytes(c->block, c->bits);
  for (size_t b = 0; b < nblocks; b++) {
    float scale, lo;
    float* o = out + b * (size_t)c->block;
    if (quant_block_params(scales, mins, b, &scale, &lo)) {
      decode(c, scale, lo, codes + b * cb, c->block, o, stream);
    } else {
      float qnan = qccl_bits_f32(QM_QNAN_BITS);
      for (int i = 0; i < c->block; i++) memcpy(o + i, &qnan, 4);
    }
  }
}
#if defined(QUANT_X86)
extern const quant_kernels_t quant_kernels_avx2;
extern const quant_kernels_t quant_kernels_avx512;
#endif

/* The kernels of isa (NULL if not built). */
const quant_kernels_t* quant_kernels(quant_isa_t isa);

/* Outputs at least this many bytes are written with non-temporal stores. */
#define QUANT_STREAM_BYTES ((size_t)8 << 20)

#endif /* QCCL_QUANT_IMPL_H_ */
