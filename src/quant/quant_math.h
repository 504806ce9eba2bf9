/*
 * quant_math.h - the block math of quantization wire format v1, shared by
 * the C kernels (scalar, AVX2, AVX-512) and the CUDA kernels.
 *
 * Everything that decides a bit of the format lives here once: the chunk
 * layout, the per-block parameters (scale, minimum, multiplier), the code of
 * one element, the value of one code, the stochastic-rounding generator and
 * the rotation signs. The SIMD kernels vectorise exactly these operations
 * (one f32 operation for one f32 operation, no contraction), so every
 * implementation gives the same bytes. docs/QUANT.md is the prose twin.
 *
 * Per block of B elements (f32 math, each operation rounded to nearest even):
 *   symmetric:  m = max|x|, qmax = 2^(b-1) - 1, scale = m / qmax,
 *               inv = qmax / m, q = clamp(rne(x * inv), -qmax, qmax),
 *               x' = q * scale
 *   asymmetric: lo = min x, hi = max x, L = 2^b - 1, scale = (hi - lo) / L,
 *               inv = L / (hi - lo), q = clamp(rne((x - lo) * inv), 0, L),
 *               x' = lo + q * scale
 *   stochastic rounding replaces rne(t) by floor(t + u), u in [0, 1) from a
 *   counter-based hash of (seed, rank, element index).
 * Special blocks (2^126 bounds one codec pass; collectives that sum before
 * quantizing again hold to 2^126 / W, docs/ZEROPP.md "Range"): any
 * |x| >= 2^126, NaN or Inf makes an overflow block
 * (scale and minimum NaN, codes 0, dequantizes to NaN); m == 0 or hi == lo
 * makes a zero-range block (scale 0, codes 0); a range below 2^-100 is
 * computed prescaled by 2^64 so that inv stays finite.
 */
#ifndef QCCL_QUANT_MATH_H_
#define QCCL_QUANT_MATH_H_

#include <stddef.h>
#include <stdint.h>

#include "core/fpconv.h"

#if defined(__CUDA_ARCH__)
#define QM_MUL(a, b) __fmul_rn((a), (b))
#define QM_ADD(a, b) __fadd_rn((a), (b))
#define QM_SUB(a, b) __fsub_rn((a), (b))
#define QM_DIV(a, b) __fdiv_rn((a), (b))
#else
/* These files are compiled with -ffp-contract=off: no fused multiply-add. */
#define QM_MUL(a, b) ((a) * (b))
#define QM_ADD(a, b) ((a) + (b))
#define QM_SUB(a, b) ((a) - (b))
#define QM_DIV(a, b) ((a) / (b))
#endif

#define QM_VERSION 1
#define QM_BLOCK_MIN 32
#define QM_BLOCK_MAX 4096
#define QM_ALIGN 16               /* header and chunk padding */
#define QM_LIMIT_BITS 0x7e800000u /* 2^126: |x| at or above it is an overflow */
#define QM_TINY_BITS 0x0d800000u  /* 2^-100: smaller ranges are prescaled */
#define QM_PRESCALE 0x1p64f       /* 2^64 */
#define QM_QNAN_BITS 0x7fc00000u  /* the NaN every implementation writes */
#define QM_U_SCALE 0x1p-24f       /* 24-bit uniform -> [0, 1) */
#define QM_RNE_MAGIC 12582912.0f  /* 1.5 * 2^23 */

/* ---- layout: a pure function of (n, B, bits, mode, rotation) ---------- */

/* Blocks of a chunk of n elements. */
QCCL_HD size_t qm_nblocks(size_t n, int block) {
  return n / (size_t)block + (n % (size_t)block != 0);
}

/* Elements covered by codes: n, or n rounded up to whole blocks with rotation. */
QCCL_HD size_t qm_coded_elems(size_t n, int block, int rotate) {
  return rotate ? qm_nblocks(n, block) * (size_t)block : n;
}

QCCL_HD size_t qm_round16(size_t x) {
  return (x + (QM_ALIGN - 1)) & ~(size_t)(QM_ALIGN - 1);
}

/* Bytes of the header: nb scales (and nb minimums when asymmetric), padded. */
QCCL_HD size_t qm_header_bytes(size_t n, int block, int asym) {
  return qm_round16(qm_nblocks(n, block) * 4u * (asym ? 2u : 1u));
}

/* Bytes of the codes of n coded elements. */
QCCL_HD size_t qm_code_bytes(size_t coded, int bits) {
  return (coded * (size_t)bits + 7u) / 8u;
}

/* Bytes of the whole chunk. */
QCCL_HD size_t qm_chunk_bytes(size_t n, int block, int bits, int asym, int rotate) {
  if (n == 0) return 0;
  return qm_round16(qm_header_bytes(n, block, asym) +
                    qm_code_bytes(qm_coded_elems(n, block, rotate), bits));
}

/* Bytes of codes of one full block. */
QCCL_HD size_t qm_block_code_bytes(int block, int bits) {
  return (size_t)block * (size_t)bits / 8u;
}

/* ---- rounding ----------------------------------------------------------- */

/* Round to nearest, ties to even, of |t| < 2^22 (always so here: |t| is at
 * most qmax or L times 1 + 2^-22). */
QCCL_HD float qm_rne(float t) {
#if defined(__CUDA_ARCH__)
  return rintf(t);
#else
  return (t + QM_RNE_MAGIC) - QM_RNE_MAGIC;
#endif
}

/* floor(t) for |t| < 2^22. */
QCCL_HD float qm_floor(float t) {
  float r = qm_rne(t);
  return r > t ? r - 1.0f : r;
}

/* ---- counter-based generator -------------------------------------------- */

/* A 32-bit bijective mixer (two multiply-xorshift rounds). */
QCCL_HD uint32_t qm_hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

typedef struct {
  uint32_t k0, k1;
} qm_key_t;

/* Key of the stochastic-rounding stream of (seed, rank). */
QCCL_HD qm_key_t qm_sr_key(uint64_t seed, uint32_t rank) {
  qm_key_t k;
  uint32_t a = qm_hash32((uint32_t)seed ^ 0x9e3779b9u);
  k.k0 = qm_hash32((uint32_t)(seed >> 32) ^ a ^ 0x85ebca6bu);
  k.k1 = qm_hash32(rank ^ k.k0 ^ 0xc2b2ae35u);
  return k;
}

/* The per-2^32-elements part of the second round's key. */
QCCL_HD uint32_t qm_sr_hi(qm_key_t k, uint64_t idx) {
  return k.k1 ^ ((uint32_t)(idx >> 32) * 0x9e3779b9u);
}

/* The 24-bit draw of element idx (index0 + position in the coded chunk). */
QCCL_HD uint32_t qm_sr_bits(qm_key_t k, uint64_t idx) {
  uint32_t h = qm_hash32((uint32_t)idx ^ k.k0);
  return qm_hash32(h ^ qm_sr_hi(k, idx)) >> 8;
}

/* u in [0, 1), exact in f32. */
QCCL_HD float qm_sr_u(qm_key_t k, uint64_t idx) {
  return QM_MUL((float)qm_sr_bits(k, idx), QM_U_SCALE);
}

/* Key of the rotation signs: depends on the seed only (never the rank), so
 * every rank rotates a block the same way. */
QCCL_HD qm_key_t qm_sign_key(uint64_t seed) {
  qm_key_t k;
  uint32_t a = qm_hash32((uint32_t)seed ^ 0x27d4eb2fu);
  k.k0 = qm_hash32((uint32_t)(seed >> 32) ^ a ^ 0x165667b1u);
  k.k1 = qm_hash32(k.k0 ^ 0xd3a2646cu);
  return k;
}

/* Sign bit (0 or 0x80000000) of position j (0 <= j < B) of every block. */
QCCL_HD uint32_t qm_sign_mask(qm_key_t k, uint32_t j) {
  return qm_hash32(qm_hash32(j ^ k.k0) ^ k.k1) & 0x80000000u;
}

/* ---- block parameters --------------------------------------------------- */

enum { QM_NORMAL = 0, QM_ZERO = 1, QM_TINY = 2, QM_OVERFLOW = 3 };

typedef struct {
  float scale; /* stored in the header; NaN for an overflow block */
  float lo;    /* asymmetric minimum, stored; 0 when symmetric */
  float inv;   /* code = round(((x - lo) * pre) * inv) */
  float pre;   /* 1, or 2^64 for a tiny block */
  int kind;    /* QM_NORMAL, QM_ZERO, QM_TINY, QM_OVERFLOW */
} qm_block_t;

/* Largest code magnitude: qmax (symmetric) or L (asymmetric). */
QCCL_HD int qm_qmax(int bits, int asym) {
  return asym ? (1 << bits) - 1 : (1 << (bits - 1)) - 1;
}

QCCL_HD qm_block_t qm_block_overflow(void) {
  qm_block_t b;
  b.scale = qccl_bits_f32(QM_QNAN_BITS);
  b.lo = b.scale;
  b.inv = 0.0f;
  b.pre = 1.0f;
  b.kind = QM_OVERFLOW;
  return b;
}

/* Symmetric block from amax = the largest (|x| bits & 0x7fffffff). */
QCCL_HD qm_block_t qm_block_sym(uint32_t amax, int bits) {
  qm_block_t b;
  float qmax = (float)qm_qmax(bits, 0);
  if (amax >= QM_LIMIT_BITS) return qm_block_overflow();
  b.lo = 0.0f;
  b.pre = 1.0f;
  if (amax == 0) {
    b.scale = 0.0f;
    b.inv = 0.0f;
    b.kind = QM_ZERO;
    return b;
  }
  float m = qccl_bits_f32(amax);
  b.scale = QM_DIV(m, qmax);
  if (amax < QM_TINY_BITS) {
    b.pre = QM_PRESCALE;
    b.inv = QM_DIV(qmax, QM_MUL(m, b.pre));
    b.kind = QM_TINY;
  } else {
    b.inv = QM_DIV(qmax, m);
    b.kind = QM_NORMAL;
  }
  return b;
}

/* Asymmetric block from the minimum, maximum and amax (as above). mn and mx
 * are ignored for an overflow block. -0 and +0 are made +0, so the stored
 * minimum does not depend on the order of a min reduction. */
QCCL_HD qm_block_t qm_block_asym(float mn, float mx, uint32_t amax, int bits) {
  qm_block_t b;
  float levels = (float)qm_qmax(bits, 1);
  if (amax >= QM_LIMIT_BITS) return qm_block_overflow();
  b.lo = QM_ADD(mn, 0.0f);
  float hi = QM_ADD(mx, 0.0f);
  float r = QM_SUB(hi, b.lo); /* < 2^127: finite */
  b.pre = 1.0f;
  if (r == 0.0f) {
    b.scale = 0.0f;
    b.inv = 0.0f;
    b.kind = QM_ZERO;
    return b;
  }
  b.scale = QM_DIV(r, levels);
  if (qccl_f32_bits(r) < QM_TINY_BITS) {
    b.pre = QM_PRESCALE;
    b.inv = QM_DIV(levels, QM_MUL(r, b.pre));
    b.kind = QM_TINY;
  } else {
    b.inv = QM_DIV(levels, r);
    b.kind = QM_NORMAL;
  }
  return b;
}

/* ---- one element -------------------------------------------------------- */

/* The code of x in a QM_NORMAL or QM_TINY block (signed for symmetric).
 * sr selects floor(t + u) instead of rne(t). For QM_NORMAL blocks pre is 1
 * and the multiplication by it is exact, so SIMD kernels may skip it. */
QCCL_HD int qm_code(float x, const qm_block_t* b, int asym, int qmax, int sr, float u) {
  float d = asym ? QM_SUB(x, b->lo) : x;
  float t = QM_MUL(QM_MUL(d, b->pre), b->inv);
  float r = sr ? qm_floor(QM_ADD(t, u)) : qm_rne(t);
  float lo = asym ? 0.0f : -(float)qmax;
  float hi = (float)qmax;
  r = r < lo ? lo : r;
  r = r > hi ? hi : r;
  return (int)r;
}

/* The value of code q (as stored: two's complement for symmetric). */
QCCL_HD float qm_value(int q, float scale, float lo, int asym) {
  float v = QM_MUL((float)q, scale);
  return asym ? QM_ADD(lo, v) : v;
}

/* Reads the code of element j from a block's code bytes. */
QCCL_HD int qm_get_code(const uint8_t* codes, size_t j, int bits, int asym) {
  if (bits == 8) return asym ? (int)codes[j] : (int)(int8_t)codes[j];
  int nib = (codes[j >> 1] >> ((j & 1) * 4)) & 0xf;
  return asym ? nib : (nib ^ 8) - 8;
}

/* Packs an int4 pair: element 2i in the low nibble, 2i+1 in the high one. */
QCCL_HD uint8_t qm_pack4(int even, int odd) {
  return (uint8_t)(((unsigned)even & 0xfu) | (((unsigned)odd & 0xfu) << 4));
}

/* ---- the a-priori error bound ------------------------------------------- */

/* Bound of |x - x'| on every element of a block with this scale and
 * minimum: scale / 2 for round-to-nearest (scale for stochastic rounding),
 * plus f32 rounding (relative 2^-20 of the largest dequantized magnitude,
 * times 1 + log2(B) with rotation), plus 2^-126 for subnormal results. NaN
 * for an overflow block. */
QCCL_HD float qm_error_bound(float scale, float lo, int bits, int asym, int sr, int rotate,
                             int block) {
  if (!(scale - scale == 0.0f) || !(lo - lo == 0.0f)) return qccl_bits_f32(QM_QNAN_BITS);
  float top = QM_MUL((float)qm_qmax(bits, asym), scale);
  if (asym) top = QM_ADD(top, lo < 0.0f ? -lo : lo);
  float f = 0x1p-20f;
  if (rotate) {
    int lg = 0;
    while ((1 << lg) < block) lg++;
    f = QM_MUL(f, (float)(1 + lg));
  }
  return QM_ADD(QM_ADD(sr ? scale : QM_MUL(scale, 0.5f), QM_MUL(top, f)), 0x1p-126f);
}

#endif /* QCCL_QUANT_MATH_H_ */
