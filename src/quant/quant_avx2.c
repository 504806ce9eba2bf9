/*
 * quant_avx2.c - the block kernels with AVX2 and F16C, 8 floats per vector.
 * Built with -mavx2 -mf16c -ffp-contract=off and only called after cpuid
 * says so. Encoding and decoding go 32 elements at a time (one 32-byte
 * vector of int8 codes); the remainder of a short block runs the scalar
 * kernel, whose per-element math is the same.
 *
 * Walsh-Hadamard stages h = 1, 2, 4 run inside a vector (permute, add for
 * lanes without bit h, sub for lanes with it, blend), stages h >= 8 between
 * vectors, as in the scalar loop. Large aligned outputs use non-temporal
 * stores.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant_impl.h"

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define FLOOR (_MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)

static inline __m256i a2_hash(__m256i x) {
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32((int)0x846ca68bu));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  return x;
}

static void a2_stats(const float* x, int nr, int asym, quant_stats_t* st) {
  const __m256i absm = _mm256_set1_epi32(0x7fffffff);
  __m256i am = _mm256_setzero_si256(), am2 = _mm256_setzero_si256();
  __m256 mn = _mm256_set1_ps(INFINITY), mx = _mm256_set1_ps(-INFINITY);
  int i = 0;
  if (!asym) {
    for (; i + 16 <= nr; i += 16) {
      __m256i a = _mm256_loadu_si256((const __m256i*)(const void*)(x + i));
      __m256i b = _mm256_loadu_si256((const __m256i*)(const void*)(x + i + 8));
      am = _mm256_max_epu32(am, _mm256_and_si256(a, absm));
      am2 = _mm256_max_epu32(am2, _mm256_and_si256(b, absm));
    }
    am = _mm256_max_epu32(am, am2);
  }
  for (; i + 8 <= nr; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    am = _mm256_max_epu32(am, _mm256_and_si256(_mm256_castps_si256(v), absm));
    if (asym) {
      mn = _mm256_min_ps(mn, v);
      mx = _mm256_max_ps(mx, v);
    }
  }
  uint32_t a[8];
  float lo[8], hi[8];
  _mm256_storeu_si256((__m256i*)(void*)a, am);
  _mm256_storeu_ps(lo, mn);
  _mm256_storeu_ps(hi, mx);
  uint32_t amax = 0;
  float vmn = INFINITY, vmx = -INFINITY;
  for (int j = 0; j < 8; j++) {
    amax = a[j] > amax ? a[j] : amax;
    vmn = lo[j] < vmn ? lo[j] : vmn;
    vmx = hi[j] > vmx ? hi[j] : vmx;
  }
  for (; i < nr; i++) {
    float v;
    memcpy(&v, x + i, sizeof v);
    uint32_t b = qccl_f32_bits(v) & 0x7fffffffu;
    amax = b > amax ? b : amax;
    vmn = v < vmn ? v : vmn;
    vmx = v > vmx ? v : vmx;
  }
  st->amax = amax;
  st->mn = vmn;
  st->mx = vmx;
}

typedef struct {
  __m256 lo, inv;
  __m256i cmin, cmax, k0, k1;
  int asym, sr;
} a2_enc_t;

/* Codes of 8 elements as int32. The conversion rounds to nearest even (the
 * drivers run with the default MXCSR). Round-to-nearest needs no clamp:
 * |t| <= qmax (1 + 2^-23) < qmax + 1/2, as the scalar clamp finds. */
static inline __m256i a2_code(const a2_enc_t* e, __m256 v, __m256i idx) {
  __m256 t = _mm256_mul_ps(e->asym ? _mm256_sub_ps(v, e->lo) : v, e->inv);
  if (!e->sr) return _mm256_cvtps_epi32(t);
  __m256i h = a2_hash(_mm256_xor_si256(idx, e->k0));
  h = _mm256_srli_epi32(a2_hash(_mm256_xor_si256(h, e->k1)), 8);
  __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(h), _mm256_set1_ps(QM_U_SCALE));
  __m256i q = _mm256_cvttps_epi32(_mm256_round_ps(_mm256_add_ps(t, u), FLOOR));
  return _mm256_min_epi32(_mm256_max_epi32(q, e->cmin), e->cmax);
}

static void a2_encode(const quant_ctx_t* c, const qm_block_t* b, const float* x, int nr,
                      uint64_t idx, uint8_t* codes) {
  a2_enc_t e;
  e.asym = c->asym;
  e.sr = c->stochastic;
  e.lo = _mm256_set1_ps(b->lo);
  e.inv = _mm256_set1_ps(b->inv);
  e.cmin = _mm256_set1_epi32(c->asym ? 0 : -c->qmax);
  e.cmax = _mm256_set1_epi32(c->qmax);
  e.k0 = _mm256_set1_epi32((int)c->key.k0);
  e.k1 = _mm256_set1_epi32((int)qm_sr_hi(c->key, idx));
  __m256i vidx = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)idx),
                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i step = _mm256_set1_epi32(8);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  /* non-temporal only for whole cache lines: a line written partly with
   * streaming and partly with ordinary stores is very slow */
  int nt =
      c->stream && ((uintptr_t)codes & 63) == 0 && qm_block_code_bytes(c->block, c->bits) % 64 == 0;
  int i = 0;
  for (; i + 32 <= nr; i += 32) {
    __m256i q[4];
    for (int j = 0; j < 4; j++) {
      q[j] = a2_code(&e, _mm256_loadu_ps(x + i + 8 * j), vidx);
      vidx = _mm256_add_epi32(vidx, step);
    }
    __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i by = c->asym ? _mm256_packus_epi16(p01, p23) : _mm256_packs_epi16(p01, p23);
    by = _mm256_permutevar8x32_epi32(by, order);
    if (c->bits == 8) {
      if (nt)
        _mm256_stream_si256((__m256i*)(void*)(codes + i), by);
      else
        _mm256_storeu_si256((__m256i*)(void*)(codes + i), by);
    } else {
      __m256i v = _mm256_and_si256(by, _mm256_set1_epi16(0x0f0f));
      v = _mm256_and_si256(_mm256_or_si256(v, _mm256_srli_epi16(v, 4)), _mm256_set1_epi16(0xff));
      v = _mm256_permute4x64_epi64(_mm256_packus_epi16(v, v), 0x08);
      if (nt)
        _mm_stream_si128((__m128i*)(void*)(codes + i / 2), _mm256_castsi256_si128(v));
      else
        _mm_storeu_si128((__m128i*)(void*)(codes + i / 2), _mm256_castsi256_si128(v));
    }
  }
  if (i < nr)
    quant_kernels_scalar.encode(c, b, x + i, nr - i, idx + (uint64_t)i,
                                codes + (size_t)i * (size_t)c->bits / 8);
}

static inline __m256 a2_value(__m256i q, __m256 s, __m256 lo, int asym) {
  __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(q), s);
  return asym ? _mm256_add_ps(lo, v) : v;
}

/* Values of 32 codes from element i, in v[0..3]. */
static inline void a2_values32(const quant_ctx_t* c, const uint8_t* codes, int i, __m256 s,
                               __m256 lo, __m256* v) {
  __m128i by[2];
  if (c->bits == 8) {
    by[0] = _mm_loadu_si128((const __m128i*)(const void*)(codes + i));
    by[1] = _mm_loadu_si128((const __m128i*)(const void*)(codes + i + 16));
  } else {
    const __m128i m = _mm_set1_epi8(0x0f);
    __m128i b = _mm_loadu_si128((const __m128i*)(const void*)(codes + i / 2));
    __m128i lo4 = _mm_and_si128(b, m), hi4 = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    by[0] = _mm_unpacklo_epi8(lo4, hi4);
    by[1] = _mm_unpackhi_epi8(lo4, hi4);
  }
  for (int j = 0; j < 4; j++) {
    __m128i b = j & 1 ? _mm_srli_si128(by[j >> 1], 8) : by[j >> 1];
    __m256i q;
    if (c->asym) {
      q = _mm256_cvtepu8_epi32(b);
    } else if (c->bits == 8) {
      q = _mm256_cvtepi8_epi32(b);
    } else {
      const __m256i eight = _mm256_set1_epi32(8);
      q = _mm256_sub_epi32(_mm256_xor_si256(_mm256_cvtepu8_epi32(b), eight), eight);
    }
    v[j] = a2_value(q, s, lo, c->asym);
  }
}

static void a2_decode(const quant_ctx_t* c, float scale, float lo, const uint8_t* codes, int nr,
                      float* out, int stream) {
  const __m256 s = _mm256_set1_ps(scale), l = _mm256_set1_ps(lo);
  int nt = stream && ((uintptr_t)out & 63) == 0;
  int i = 0;
  for (; i + 32 <= nr; i += 32) {
    __m256 v[4];
    a2_values32(c, codes, i, s, l, v);
    for (int j = 0; j < 4; j++) {
      if (nt)
        _mm256_stream_ps(out + i + 8 * j, v[j]);
      else
        _mm256_storeu_ps(out + i + 8 * j, v[j]);
    }
  }
  if (i < nr)
    quant_kernels_scalar.decode(c, scale, lo, codes + (size_t)i * (size_t)c->bits / 8, nr - i,
                                out + i, 0);
}

static void a2_decode_acc(const quant_ctx_t* c, float scale, float lo, const uint8_t* codes, int nr,
                          float* acc) {
  const __m256 s = _mm256_set1_ps(scale), l = _mm256_set1_ps(lo);
  int i = 0;
  for (; i + 32 <= nr; i += 32) {
    __m256 v[4];
    a2_values32(c, codes, i, s, l, v);
    for (int j = 0; j < 4; j++)
      _mm256_storeu_ps(acc + i + 8 * j, _mm256_add_ps(_mm256_loadu_ps(acc + i + 8 * j), v[j]));
  }
  if (i < nr)
    quant_kernels_scalar.decode_acc(c, scale, lo, codes + (size_t)i * (size_t)c->bits / 8, nr - i,
                                    acc + i);
}

/* Stages h = 1, 2, 4 of 8 consecutive elements. */
static inline __m256 a2_fwht8(__m256 v) {
  __m256 p = _mm256_permute_ps(v, 0xb1);
  v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xaa);
  p = _mm256_permute_ps(v, 0x4e);
  v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xcc);
  p = _mm256_permute2f128_ps(v, v, 0x01);
  v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xf0);
  return v;
}

static void a2_fwht(float* x, int block) {
  for (int i = 0; i < block; i += 8) _mm256_storeu_ps(x + i, a2_fwht8(_mm256_loadu_ps(x + i)));
  for (int h = 8; h < block; h <<= 1) {
    for (int i = 0; i < block; i += 2 * h) {
      for (int j = i; j < i + h; j += 8) {
        __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + h);
        _mm256_storeu_ps(x + j, _mm256_add_ps(a, b));
        _mm256_storeu_ps(x + j + h, _mm256_sub_ps(a, b));
      }
    }
  }
}

/* n is a block size: a multiple of 8. */
static void a2_flip(float* x, const uint32_t* mask, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i v = _mm256_loadu_si256((const __m256i*)(void*)(x + i));
    __m256i m = _mm256_loadu_si256((const __m256i*)(const void*)(mask + i));
    _mm256_storeu_si256((__m256i*)(void*)(x + i), _mm256_xor_si256(v, m));
  }
}

/* n is a block size: a multiple of 8. */
static void a2_mul(float* x, float f, int n) {
  const __m256 vf = _mm256_set1_ps(f);
  for (int i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vf));
}

static void a2_rotate(float* x, const uint32_t* mask, int block) {
  a2_flip(x, mask, block);
  a2_fwht(x, block);
}

static void a2_unrotate(float* x, const uint32_t* mask, int block, float f) {
  a2_mul(x, f, block);
  a2_fwht(x, block);
  a2_flip(x, mask, block);
}

static void a2_add(float* acc, const float* x, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_loadu_ps(x + i)));
  if (i < n) quant_kernels_scalar.add(acc + i, x + i, n - i);
}

static void a2_sub(float* r, const float* a, const float* b, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(r + i, _mm256_sub_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  if (i < n) quant_kernels_scalar.sub(r + i, a + i, b + i, n - i);
}

static void a2_load(const void* src, qcclDataType_t type, size_t n, float* dst) {
  const unsigned char* s = (const unsigned char*)src;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v;
    if (type == qcclFloat32) {
      v = _mm256_loadu_ps((const float*)(const void*)(s + 4 * i));
    } else {
      __m128i h = _mm_loadu_si128((const __m128i*)(const void*)(s + 2 * i));
      if (type == qcclFloat16)
        v = _mm256_cvtph_ps(h);
      else
        v = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    _mm256_storeu_ps(dst + i, v);
  }
  if (i < n) quant_kernels_scalar.load(s + i * (type == qcclFloat32 ? 4 : 2), type, n - i, dst + i);
}

/* f32 -> bf16 of 8 values, as fpconv.h: nearest even, NaN stays quiet NaN. */
static inline __m128i a2_to_bf16(__m256 v) {
  __m256i x = _mm256_castps_si256(v);
  __m256i hi = _mm256_srli_epi32(x, 16);
  __m256i r = _mm256_add_epi32(
      x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(hi, _mm256_set1_epi32(1))));
  r = _mm256_srli_epi32(r, 16);
  __m256i nan_lanes = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan_lanes);
  r = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  return _mm256_castsi256_si128(r);
}

static void a2_store(const float* src, size_t n, qcclDataType_t type, void* dst, int stream) {
  unsigned char* d = (unsigned char*)dst;
  int nt = stream && ((uintptr_t)dst & 63) == 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(src + i);
    if (type == qcclFloat32) {
      if (nt)
        _mm256_stream_ps((float*)(void*)(d + 4 * i), v);
      else
        _mm256_storeu_ps((float*)(void*)(d + 4 * i), v);
      continue;
    }
    __m128i h = type == qcclFloat16 ? _mm256_cvtps_ph(v, RNE) : a2_to_bf16(v);
    if (nt)
      _mm_stream_si128((__m128i*)(void*)(d + 2 * i), h);
    else
      _mm_storeu_si128((__m128i*)(void*)(d + 2 * i), h);
  }
  if (i < n)
    quant_kernels_scalar.store(src + i, n - i, type, d + i * (type == qcclFloat32 ? 4 : 2), 0);
}

static void a2_fence(void) {
  _mm_sfence();
}

static void a2_quantize_f32(const quant_ctx_t* c, const float* x, size_t nblocks, uint64_t idx,
                            unsigned char* scales, unsigned char* mins, uint8_t* codes) {
  quant_encode_blocks(a2_stats, a2_encode, c, x, nblocks, idx, scales, mins, codes);
}

static void a2_dequantize_f32(const quant_ctx_t* c, const unsigned char* scales,
                              const unsigned char* mins, const uint8_t* codes, size_t nblocks,
                              float* out, int stream) {
  quant_decode_blocks(a2_decode, c, scales, mins, codes, nblocks, out, stream);
}

const quant_kernels_t quant_kernels_avx2 = {
    .stats = a2_stats,
    .encode = a2_encode,
    .decode = a2_decode,
    .decode_acc = a2_decode_acc,
    .rotate = a2_rotate,
    .unrotate = a2_unrotate,
    .add = a2_add,
    .sub = a2_sub,
    .load = a2_load,
    .store = a2_store,
    .fence = a2_fence,
    .quantize_f32 = a2_quantize_f32,
    .dequantize_f32 = a2_dequantize_f32,
};
