/*
 * quant_avx512.c - the block kernels with AVX-512 F/BW/VL (and F16C), 16
 * floats per vector, masked tails. Built with -mavx512f -mavx512bw
 * -mavx512vl -mf16c -ffp-contract=off and only called after cpuid says so.
 *
 * Each kernel is its scalar twin (quant_scalar.c) with the same f32
 * operations in the same order per element: mul, roundscale (nearest or
 * floor: exact, like the scalar rne/floor), min/max clamp, truncation of an
 * integral value. Walsh-Hadamard stages h = 1, 2, 4, 8 run inside a vector
 * (permute, then add for the lanes without bit h and sub for those with it),
 * stages h >= 16 between vectors: the same butterflies as the scalar loop.
 * Large outputs use non-temporal stores when 64-byte aligned.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant_impl.h"

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define FLOOR (_MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)

static inline __mmask16 a5_mask(int r) {
  return (__mmask16)((1u << r) - 1u);
}

static inline __m512i a5_hash(__m512i x) {
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32(0x7feb352d));
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 15));
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32((int)0x846ca68bu));
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
  return x;
}

static void a5_stats(const float* x, int nr, int asym, quant_stats_t* st) {
  const __m512i absm = _mm512_set1_epi32(0x7fffffff);
  __m512i am = _mm512_setzero_si512(), am2 = _mm512_setzero_si512();
  __m512 mn = _mm512_set1_ps(INFINITY), mx = _mm512_set1_ps(-INFINITY);
  int i = 0;
  if (!asym) {
    for (; i + 32 <= nr; i += 32) {
      am = _mm512_max_epu32(am, _mm512_and_si512(_mm512_loadu_si512(x + i), absm));
      am2 = _mm512_max_epu32(am2, _mm512_and_si512(_mm512_loadu_si512(x + i + 16), absm));
    }
  } else {
    __m512 mn2 = mn, mx2 = mx;
    for (; i + 32 <= nr; i += 32) {
      __m512 v = _mm512_loadu_ps(x + i), w = _mm512_loadu_ps(x + i + 16);
      am = _mm512_max_epu32(am, _mm512_and_si512(_mm512_castps_si512(v), absm));
      am2 = _mm512_max_epu32(am2, _mm512_and_si512(_mm512_castps_si512(w), absm));
      mn = _mm512_min_ps(mn, v);
      mx = _mm512_max_ps(mx, v);
      mn2 = _mm512_min_ps(mn2, w);
      mx2 = _mm512_max_ps(mx2, w);
    }
    mn = _mm512_min_ps(mn, mn2);
    mx = _mm512_max_ps(mx, mx2);
  }
  am = _mm512_max_epu32(am, am2);
  for (; i + 16 <= nr; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    am = _mm512_max_epu32(am, _mm512_and_si512(_mm512_castps_si512(v), absm));
    if (asym) {
      mn = _mm512_min_ps(mn, v);
      mx = _mm512_max_ps(mx, v);
    }
  }
  if (i < nr) {
    __mmask16 k = a5_mask(nr - i);
    __m512 v = _mm512_maskz_loadu_ps(k, x + i);
    am = _mm512_max_epu32(am, _mm512_and_si512(_mm512_castps_si512(v), absm));
    if (asym) {
      mn = _mm512_mask_min_ps(mn, k, mn, v);
      mx = _mm512_mask_max_ps(mx, k, mx, v);
    }
  }
  st->amax = (uint32_t)_mm512_reduce_max_epu32(am);
  st->mn = asym ? _mm512_reduce_min_ps(mn) : 0.0f;
  st->mx = asym ? _mm512_reduce_max_ps(mx) : 0.0f;
}

/* Per-block constants of the encoder. */
typedef struct {
  __m512 lo, inv;
  __m512i cmin, cmax, k0, k1;
  int asym, sr;
} a5_enc_t;

/* Codes of 16 elements as int32. Round-to-nearest needs no clamp: |x| <= m
 * (or 0 <= x - lo <= hi - lo) bounds |t| by qmax (1 + 2^-23) < qmax + 1/2,
 * so rne(t) is already in range, as the scalar clamp finds. */
static inline __m512i a5_code(const a5_enc_t* e, __m512 v, __m512i idx) {
  __m512 t = _mm512_mul_ps(e->asym ? _mm512_sub_ps(v, e->lo) : v, e->inv);
  if (!e->sr) return _mm512_cvt_roundps_epi32(t, RNE);
  __m512i h = a5_hash(_mm512_xor_si512(idx, e->k0));
  h = _mm512_srli_epi32(a5_hash(_mm512_xor_si512(h, e->k1)), 8);
  __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(h), _mm512_set1_ps(QM_U_SCALE));
  __m512i q = _mm512_cvt_roundps_epi32(_mm512_add_ps(t, u), FLOOR);
  return _mm512_min_epi32(_mm512_max_epi32(q, e->cmin), e->cmax);
}

/* 64 codes (int32 in q[0..3]) as 64 bytes in element order. */
static inline __m512i a5_pack8(const __m512i* q, int asym) {
  __m512i p01 = _mm512_packs_epi32(q[0], q[1]);
  __m512i p23 = _mm512_packs_epi32(q[2], q[3]);
  __m512i b = asym ? _mm512_packus_epi16(p01, p23) : _mm512_packs_epi16(p01, p23);
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(order, b);
}

/* Low byte of each 64-bit lane = even code | odd code << 4. */
static inline __m512i a5_pair4(__m512i q) {
  __m512i v = _mm512_and_si512(q, _mm512_set1_epi32(0xf));
  return _mm512_or_si512(v, _mm512_srli_epi64(v, 28));
}

static void a5_encode(const quant_ctx_t* c, const qm_block_t* b, const float* x, int nr,
                      uint64_t idx, uint8_t* codes) {
  a5_enc_t e;
  e.asym = c->asym;
  e.sr = c->stochastic;
  e.lo = _mm512_set1_ps(b->lo);
  e.inv = _mm512_set1_ps(b->inv);
  e.cmin = _mm512_set1_epi32(c->asym ? 0 : -c->qmax);
  e.cmax = _mm512_set1_epi32(c->qmax);
  e.k0 = _mm512_set1_epi32((int)c->key.k0);
  e.k1 = _mm512_set1_epi32((int)qm_sr_hi(c->key, idx));
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i vidx = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)idx), iota);
  const __m512i step = _mm512_set1_epi32(16);
  /* non-temporal only for whole cache lines: a line written partly with
   * streaming and partly with ordinary stores is very slow */
  int nt =
      c->stream && ((uintptr_t)codes & 63) == 0 && qm_block_code_bytes(c->block, c->bits) % 64 == 0;
  int i = 0;
  for (; i + 64 <= nr; i += 64) {
    __m512i q[4];
    for (int j = 0; j < 4; j++) {
      q[j] = a5_code(&e, _mm512_loadu_ps(x + i + 16 * j), vidx);
      vidx = _mm512_add_epi32(vidx, step);
    }
    __m512i b = a5_pack8(q, c->asym);
    if (c->bits == 8) {
      if (nt)
        _mm512_stream_si512((void*)(codes + i), b);
      else
        _mm512_storeu_si512(codes + i, b);
    } else {
      __m512i v = _mm512_and_si512(b, _mm512_set1_epi16(0x0f0f));
      v = _mm512_or_si512(v, _mm512_srli_epi16(v, 4));
      __m256i h = _mm512_cvtepi16_epi8(v);
      if (nt)
        _mm256_stream_si256((__m256i*)(void*)(codes + i / 2), h);
      else
        _mm256_storeu_si256((__m256i*)(void*)(codes + i / 2), h);
    }
  }
  for (; i < nr; i += 16) {
    int rem = nr - i < 16 ? nr - i : 16;
    __mmask16 k = a5_mask(rem);
    __m512i q = a5_code(&e, _mm512_maskz_loadu_ps(k, x + i), vidx);
    vidx = _mm512_add_epi32(vidx, step);
    /* plain stores (a masked store to an uncached line stalls on Zen 4) */
    if (c->bits == 8) {
      __m128i b = _mm512_cvtepi32_epi8(q);
      if (rem == 16) {
        _mm_storeu_si128((__m128i*)(void*)(codes + i), b);
      } else {
        uint8_t buf[16];
        _mm_storeu_si128((__m128i*)(void*)buf, b);
        memcpy(codes + i, buf, (size_t)rem);
      }
    } else {
      __m128i b = _mm512_cvtepi64_epi8(a5_pair4(_mm512_maskz_mov_epi32(k, q)));
      if (rem == 16) {
        _mm_storel_epi64((__m128i*)(void*)(codes + i / 2), b);
      } else {
        uint8_t buf[16];
        _mm_storeu_si128((__m128i*)(void*)buf, b);
        memcpy(codes + i / 2, buf, (size_t)(rem + 1) / 2);
      }
    }
  }
}

/* Codes 16 elements from i: as int32 lanes. */
static inline __m512i a5_get8(const uint8_t* codes, int asym, __mmask16 k) {
  __m128i b = _mm_maskz_loadu_epi8(k, codes);
  return asym ? _mm512_cvtepu8_epi32(b) : _mm512_cvtepi8_epi32(b);
}

static inline __m512i a5_get4(const uint8_t* codes, int asym, __mmask8 kb) {
  __m512i w = _mm512_cvtepu8_epi64(_mm_maskz_loadu_epi8(kb, codes));
  w = _mm512_and_si512(_mm512_or_si512(w, _mm512_slli_epi64(w, 28)),
                       _mm512_set1_epi64(0x0000000f0000000fll));
  if (!asym) {
    const __m512i eight = _mm512_set1_epi32(8);
    w = _mm512_sub_epi32(_mm512_xor_si512(w, eight), eight);
  }
  return w;
}

static inline __m512 a5_value(__m512i q, __m512 s, __m512 lo, int asym) {
  __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(q), s);
  return asym ? _mm512_add_ps(lo, v) : v;
}

/* Values of the codes of elements i .. i + rem - 1 (rem <= 16). */
static inline __m512 a5_values(const quant_ctx_t* c, const uint8_t* codes, int i, int rem, __m512 s,
                               __m512 lo) {
  __m512i q;
  if (c->bits == 8)
    q = a5_get8(codes + i, c->asym, a5_mask(rem));
  else
    q = a5_get4(codes + i / 2, c->asym, (__mmask8)((1u << ((rem + 1) / 2)) - 1u));
  return a5_value(q, s, lo, c->asym);
}

/* 64 codes from codes[i] (int8) or codes[i / 2] (int4) as 64 signed or
 * unsigned bytes in element order. */
static inline __m512i a5_bytes64(const quant_ctx_t* c, const uint8_t* codes, int i) {
  if (c->bits == 8) return _mm512_loadu_si512(codes + i);
  __m512i w =
      _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i*)(const void*)(codes + i / 2)));
  w = _mm512_or_si512(_mm512_and_si512(w, _mm512_set1_epi16(0x0f)),
                      _mm512_and_si512(_mm512_slli_epi16(w, 4), _mm512_set1_epi16(0x0f00)));
  if (!c->asym) {
    const __m512i eight = _mm512_set1_epi8(8);
    w = _mm512_sub_epi8(_mm512_xor_si512(w, eight), eight);
  }
  return w;
}

/* Values of 64 codes in v[0..3]. */
static inline void a5_values64(const quant_ctx_t* c, const uint8_t* codes, int i, __m512 s,
                               __m512 lo, __m512* v) {
  __m512i b = a5_bytes64(c, codes, i);
  int sgn = !c->asym;
  v[0] = a5_value(sgn ? _mm512_cvtepi8_epi32(_mm512_castsi512_si128(b))
                      : _mm512_cvtepu8_epi32(_mm512_castsi512_si128(b)),
                  s, lo, c->asym);
  v[1] = a5_value(sgn ? _mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(b, 1))
                      : _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(b, 1)),
                  s, lo, c->asym);
  v[2] = a5_value(sgn ? _mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(b, 2))
                      : _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(b, 2)),
                  s, lo, c->asym);
  v[3] = a5_value(sgn ? _mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(b, 3))
                      : _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(b, 3)),
                  s, lo, c->asym);
}

/* The first n (< 16) lanes of v to out with plain (unmasked) stores: a
 * masked store to a line that is not cached stalls on Zen 4. */
static inline void a5_store_part(float* out, __m512 v, int n) {
  float buf[16] __attribute__((aligned(64)));
  _mm512_store_ps(buf, v);
  memcpy(out, buf, (size_t)n * sizeof(float));
}

/* With stream, the output is written non-temporally from its first 64-byte
 * boundary on (the elements before it, and a short tail, with plain
 * stores), whatever its alignment; int4 needs an even number of head
 * elements (else ordinary stores throughout). */
static void a5_decode(const quant_ctx_t* c, float scale, float lo, const uint8_t* codes, int nr,
                      float* out, int stream) {
  const __m512 s = _mm512_set1_ps(scale), l = _mm512_set1_ps(lo);
  uintptr_t a = (uintptr_t)out;
  int i = 0;
  if (stream && (a & 3) == 0) {
    int head = (int)(((64 - (a & 63)) & 63) / 4);
    if (head <= nr && !(c->bits == 4 && (head & 1))) {
      if (head > 0) a5_store_part(out, a5_values(c, codes, 0, head, s, l), head);
      for (i = head; i + 64 <= nr; i += 64) {
        __m512 v[4];
        a5_values64(c, codes, i, s, l, v);
        for (int j = 0; j < 4; j++) _mm512_stream_ps(out + i + 16 * j, v[j]);
      }
      for (; i + 16 <= nr; i += 16) _mm512_stream_ps(out + i, a5_values(c, codes, i, 16, s, l));
      if (i < nr) a5_store_part(out + i, a5_values(c, codes, i, nr - i, s, l), nr - i);
      return;
    }
  } else {
    for (; i + 64 <= nr; i += 64) {
      __m512 v[4];
      a5_values64(c, codes, i, s, l, v);
      for (int j = 0; j < 4; j++) _mm512_storeu_ps(out + i + 16 * j, v[j]);
    }
  }
  for (; i < nr; i += 16) {
    int rem = nr - i < 16 ? nr - i : 16;
    if (rem == 16)
      _mm512_storeu_ps(out + i, a5_values(c, codes, i, 16, s, l));
    else
      a5_store_part(out + i, a5_values(c, codes, i, rem, s, l), rem);
  }
}

static void a5_decode_acc(const quant_ctx_t* c, float scale, float lo, const uint8_t* codes, int nr,
                          float* acc) {
  const __m512 s = _mm512_set1_ps(scale), l = _mm512_set1_ps(lo);
  int i = 0;
  for (; i + 64 <= nr; i += 64) {
    __m512 v[4];
    a5_values64(c, codes, i, s, l, v);
    for (int j = 0; j < 4; j++)
      _mm512_storeu_ps(acc + i + 16 * j, _mm512_add_ps(_mm512_loadu_ps(acc + i + 16 * j), v[j]));
  }
  for (; i < nr; i += 16) {
    int rem = nr - i < 16 ? nr - i : 16;
    __m512 a = _mm512_maskz_loadu_ps(a5_mask(rem), acc + i);
    a = _mm512_add_ps(a, a5_values(c, codes, i, rem, s, l));
    if (rem == 16)
      _mm512_storeu_ps(acc + i, a);
    else
      a5_store_part(acc + i, a, rem);
  }
}

/* Stages h = 1, 2, 4, 8 of 16 consecutive elements. */
static inline __m512 a5_fwht16(__m512 v) {
  __m512 p = _mm512_permute_ps(v, 0xb1);
  v = _mm512_mask_sub_ps(_mm512_add_ps(v, p), 0xaaaa, p, v);
  p = _mm512_permute_ps(v, 0x4e);
  v = _mm512_mask_sub_ps(_mm512_add_ps(v, p), 0xcccc, p, v);
  p = _mm512_shuffle_f32x4(v, v, 0xb1);
  v = _mm512_mask_sub_ps(_mm512_add_ps(v, p), 0xf0f0, p, v);
  p = _mm512_shuffle_f32x4(v, v, 0x4e);
  v = _mm512_mask_sub_ps(_mm512_add_ps(v, p), 0xff00, p, v);
  return v;
}

/* The stages h = 16 .. 8 nv between nv consecutive vectors held in
 * registers, after the in-vector stages (nv a constant power of two <= 16
 * once inlined, so v stays in registers). */
static inline __attribute__((always_inline)) void a5_fwht_regs(__m512* v, int nv) {
  for (int i = 0; i < nv; i++) v[i] = a5_fwht16(v[i]);
  for (int h = 1; h < nv; h <<= 1) {
    for (int i = 0; i < nv; i += 2 * h) {
      for (int j = i; j < i + h; j++) {
        __m512 a = v[j], b = v[j + h];
        v[j] = _mm512_add_ps(a, b);
        v[j + h] = _mm512_sub_ps(a, b);
      }
    }
  }
}

/* One tile of 16 nv elements through registers: sign flips (forward) or the
 * multiplication by f (inverse) on the way in, the stages up to h = 8 nv, and
 * the sign flips on the way out when flip_out (inverse, whole block). */
static inline __attribute__((always_inline)) void a5_tile(float* x, const uint32_t* mask, int nv,
                                                          int inverse, float f, int flip_out) {
  __m512 v[16];
  const __m512 vf = _mm512_set1_ps(f);
  for (int i = 0; i < nv; i++) {
    __m512 a = _mm512_loadu_ps(x + 16 * i);
    if (inverse)
      a = _mm512_mul_ps(a, vf);
    else
      a = _mm512_castsi512_ps(
          _mm512_xor_si512(_mm512_castps_si512(a), _mm512_loadu_si512(mask + 16 * i)));
    v[i] = a;
  }
  a5_fwht_regs(v, nv);
  for (int i = 0; i < nv; i++) {
    __m512 a = v[i];
    if (flip_out)
      a = _mm512_castsi512_ps(
          _mm512_xor_si512(_mm512_castps_si512(a), _mm512_loadu_si512(mask + 16 * i)));
    _mm512_storeu_ps(x + 16 * i, a);
  }
}

/* Tiles of min(B, 256) elements, then the stages h >= 256 through memory
 * (the stages inside a tile touch only that tile, so the order is the
 * scalar one). */
static void a5_transform(float* x, const uint32_t* mask, int block, int inverse, float f) {
  int flip_out = inverse && block <= 256;
  for (int c = 0; c < block; c += 256) {
    switch (block) {
      case 32:
        a5_tile(x, mask, 2, inverse, f, flip_out);
        break;
      case 64:
        a5_tile(x, mask, 4, inverse, f, flip_out);
        break;
      case 128:
        a5_tile(x, mask, 8, inverse, f, flip_out);
        break;
      default:
        a5_tile(x + c, mask + c, 16, inverse, f, flip_out);
        break;
    }
  }
  for (int h = 256; h < block; h <<= 1) {
    for (int i = 0; i < block; i += 2 * h) {
      for (int j = i; j < i + h; j += 16) {
        __m512 a = _mm512_loadu_ps(x + j), b = _mm512_loadu_ps(x + j + h);
        _mm512_storeu_ps(x + j, _mm512_add_ps(a, b));
        _mm512_storeu_ps(x + j + h, _mm512_sub_ps(a, b));
      }
    }
  }
}

static void a5_flip(float* x, const uint32_t* mask, int n) {
  for (int i = 0; i < n; i += 16) {
    __mmask16 k = a5_mask(n - i < 16 ? n - i : 16);
    __m512i v = _mm512_maskz_loadu_epi32(k, x + i);
    __m512i m = _mm512_maskz_loadu_epi32(k, mask + i);
    _mm512_mask_storeu_epi32(x + i, k, _mm512_xor_si512(v, m));
  }
}

static void a5_rotate(float* x, const uint32_t* mask, int block) {
  a5_transform(x, mask, block, 0, 1.0f);
}

static void a5_unrotate(float* x, const uint32_t* mask, int block, float f) {
  a5_transform(x, mask, block, 1, f);
  if (block > 256) a5_flip(x, mask, block);
}

static void a5_add(float* acc, const float* x, int n) {
  for (int i = 0; i < n; i += 16) {
    __mmask16 k = a5_mask(n - i < 16 ? n - i : 16);
    __m512 a = _mm512_maskz_loadu_ps(k, acc + i);
    _mm512_mask_storeu_ps(acc + i, k, _mm512_add_ps(a, _mm512_maskz_loadu_ps(k, x + i)));
  }
}

static void a5_sub(float* r, const float* a, const float* b, int n) {
  for (int i = 0; i < n; i += 16) {
    __mmask16 k = a5_mask(n - i < 16 ? n - i : 16);
    __m512 va = _mm512_maskz_loadu_ps(k, a + i);
    _mm512_mask_storeu_ps(r + i, k, _mm512_sub_ps(va, _mm512_maskz_loadu_ps(k, b + i)));
  }
}

static void a5_load(const void* src, qcclDataType_t type, size_t n, float* dst) {
  const unsigned char* s = (const unsigned char*)src;
  for (size_t i = 0; i < n; i += 16) {
    __mmask16 k = a5_mask(n - i < 16 ? (int)(n - i) : 16);
    __m512 v;
    if (type == qcclFloat32) {
      v = _mm512_maskz_loadu_ps(k, s + 4 * i);
    } else {
      __m256i h = _mm256_maskz_loadu_epi16(k, s + 2 * i);
      if (type == qcclFloat16)
        v = _mm512_cvtph_ps(h);
      else
        v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    _mm512_mask_storeu_ps(dst + i, k, v);
  }
}

/* f32 -> bf16 of 16 values, as fpconv.h: nearest even, NaN stays quiet NaN. */
static inline __m256i a5_to_bf16(__m512 v) {
  __m512i x = _mm512_castps_si512(v);
  __m512i hi = _mm512_srli_epi32(x, 16);
  __m512i r = _mm512_add_epi32(
      x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(hi, _mm512_set1_epi32(1))));
  r = _mm512_srli_epi32(r, 16);
  __mmask16 nan_lanes = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan_lanes, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

/* Writes the first cnt (<= 16) of 16 values as type at element i of d: nt,
 * non-temporal (cnt 16, d + i aligned to 16 elements); partial vectors with
 * plain stores (a masked store to an uncached line stalls on Zen 4). */
static inline void a5_put16(unsigned char* d, size_t i, __m512 v, qcclDataType_t type, int cnt,
                            int nt) {
  if (type == qcclFloat32) {
    if (cnt < 16)
      a5_store_part((float*)(void*)(d + 4 * i), v, cnt);
    else if (nt)
      _mm512_stream_ps((float*)(void*)(d + 4 * i), v);
    else
      _mm512_storeu_ps(d + 4 * i, v);
    return;
  }
  __m256i h = type == qcclFloat16 ? _mm512_cvtps_ph(v, RNE) : a5_to_bf16(v);
  if (cnt < 16) {
    uint16_t buf[16] __attribute__((aligned(32)));
    _mm256_store_si256((__m256i*)(void*)buf, h);
    memcpy(d + 2 * i, buf, (size_t)cnt * 2);
  } else if (nt) {
    _mm256_stream_si256((__m256i*)(void*)(d + 2 * i), h);
  } else {
    _mm256_storeu_si256((__m256i*)(void*)(d + 2 * i), h);
  }
}

/* With stream, the first elements up to a 16-element boundary of dst are
 * stored normally and the rest non-temporally, whatever dst's alignment
 * (dst must be aligned to its element size). */
static void a5_store(const float* src, size_t n, qcclDataType_t type, void* dst, int stream) {
  unsigned char* d = (unsigned char*)dst;
  size_t es = type == qcclFloat32 ? 4 : 2, i = 0;
  uintptr_t a = (uintptr_t)dst;
  int nt = stream && a % es == 0;
  if (nt) {
    size_t head = ((16 * es - a % (16 * es)) % (16 * es)) / es;
    if (head > n) head = n;
    if (head > 0)
      a5_put16(d, 0, _mm512_maskz_loadu_ps(a5_mask((int)head), src), type, (int)head, 0);
    i = head;
  }
  for (; i + 16 <= n; i += 16) a5_put16(d, i, _mm512_loadu_ps(src + i), type, 16, nt);
  if (i < n)
    a5_put16(d, i, _mm512_maskz_loadu_ps(a5_mask((int)(n - i)), src + i), type, (int)(n - i), 0);
}

static void a5_fence(void) {
  _mm_sfence();
}

static void a5_quantize_f32(const quant_ctx_t* c, const float* x, size_t nblocks, uint64_t idx,
                            unsigned char* scales, unsigned char* mins, uint8_t* codes) {
  quant_encode_blocks(a5_stats, a5_encode, c, x, nblocks, idx, scales, mins, codes);
}

static void a5_dequantize_f32(const quant_ctx_t* c, const unsigned char* scales,
                              const unsigned char* mins, const uint8_t* codes, size_t nblocks,
                              float* out, int stream) {
  quant_decode_blocks(a5_decode, c, scales, mins, codes, nblocks, out, stream);
}

const quant_kernels_t quant_kernels_avx512 = {
    .stats = a5_stats,
    .encode = a5_encode,
    .decode = a5_decode,
    .decode_acc = a5_decode_acc,
    .rotate = a5_rotate,
    .unrotate = a5_unrotate,
    .add = a5_add,
    .sub = a5_sub,
    .load = a5_load,
    .store = a5_store,
    .fence = a5_fence,
    .quantize_f32 = a5_quantize_f32,
    .dequantize_f32 = a5_dequantize_f32,
};
