/*
 * quant_scalar.c - the scalar block kernels: the definition of wire format
 * v1. One element at a time, each f32 operation written out (built with
 * -ffp-contract=off), the per-element math taken from quant_math.h. The
 * AVX2, AVX-512 and CUDA kernels must produce exactly these bytes; their
 * tests compare with this file byte for byte.
 *
 * Element loads and stores go through memcpy, so no pointer needs to be
 * aligned. Cost: one pass to find the block statistics, one to encode.
 */
#include <string.h>

#include "quant/quant_impl.h"

static inline float sc_ld(const float* p) {
  float v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline void sc_st(float* p, float v) {
  memcpy(p, &v, sizeof v);
}

static void sc_stats(const float* x, int nr, int asym, quant_stats_t* st) {
  uint32_t amax = 0;
  float mn = sc_ld(x), mx = mn;
  for (int i = 0; i < nr; i++) {
    float v = sc_ld(x + i);
    uint32_t a = qccl_f32_bits(v) & 0x7fffffffu;
    amax = a > amax ? a : amax;
    if (asym) {
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
    }
  }
  st->amax = amax;
  st->mn = mn;
  st->mx = mx;
}

static void sc_encode(const quant_ctx_t* c, const qm_block_t* b, const float* x, int nr,
                      uint64_t idx, uint8_t* codes) {
  float u = 0.0f;
  if (c->bits == 8) {
    for (int i = 0; i < nr; i++) {
      if (c->stochastic) u = qm_sr_u(c->key, idx + (uint64_t)i);
      codes[i] = (uint8_t)qm_code(sc_ld(x + i), b, c->asym, c->qmax, c->stochastic, u);
    }
    return;
  }
  for (int i = 0; i < nr; i += 2) {
    if (c->stochastic) u = qm_sr_u(c->key, idx + (uint64_t)i);
    int even = qm_code(sc_ld(x + i), b, c->asym, c->qmax, c->stochastic, u);
    int odd = 0;
    if (i + 1 < nr) {
      if (c->stochastic) u = qm_sr_u(c->key, idx + (uint64_t)i + 1);
      odd = qm_code(sc_ld(x + i + 1), b, c->asym, c->qmax, c->stochastic, u);
    }
    codes[i >> 1] = qm_pack4(even, odd);
  }
}

static void sc_decode(const quant_ctx_t* c, float scale, float lo, const uint8_t* codes, int nr,
                      float* out, int stream) {
  (void)stream;
  for (int i = 0; i < nr; i++)
    sc_st(out + i, qm_value(qm_get_code(codes, (size_t)i, c->bits, c->asym), scale, lo, c->asym));
}

static void sc_decode_acc(const quant_ctx_t* c, float scale, float lo, const uint8_t* codes, int nr,
                          float* acc) {
  for (int i = 0; i < nr; i++) {
    float v = qm_value(qm_get_code(codes, (size_t)i, c->bits, c->asym), scale, lo, c->asym);
    sc_st(acc + i, QM_ADD(sc_ld(acc + i), v));
  }
}

static void sc_fwht(float* x, int block) {
  for (int h = 1; h < block; h <<= 1) {
    for (int i = 0; i < block; i += 2 * h) {
      for (int j = i; j < i + h; j++) {
        float a = x[j], b = x[j + h];
        x[j] = QM_ADD(a, b);
        x[j + h] = QM_SUB(a, b);
      }
    }
  }
}

static void sc_flip(float* x, const uint32_t* mask, int n) {
  for (int i = 0; i < n; i++) x[i] = qccl_bits_f32(qccl_f32_bits(x[i]) ^ mask[i]);
}

static void sc_mul(float* x, float f, int n) {
  for (int i = 0; i < n; i++) x[i] = QM_MUL(x[i], f);
}

static void sc_rotate(float* x, const uint32_t* mask, int block) {
  sc_flip(x, mask, block);
  sc_fwht(x, block);
}

static void sc_unrotate(float* x, const uint32_t* mask, int block, float f) {
  sc_mul(x, f, block);
  sc_fwht(x, block);
  sc_flip(x, mask, block);
}

static void sc_add(float* acc, const float* x, int n) {
  for (int i = 0; i < n; i++) sc_st(acc + i, QM_ADD(sc_ld(acc + i), sc_ld(x + i)));
}

static void sc_sub(float* r, const float* a, const float* b, int n) {
  for (int i = 0; i < n; i++) sc_st(r + i, QM_SUB(sc_ld(a + i), b[i]));
}

static void sc_load(const void* src, qcclDataType_t type, size_t n, float* dst) {
  const unsigned char* s = (const unsigned char*)src;
  uint16_t h;
  for (size_t i = 0; i < n; i++) {
    switch (type) {
      case qcclFloat16:
        memcpy(&h, s + 2 * i, 2);
        dst[i] = qccl_f16_to_f32(h);
        break;
      case qcclBfloat16:
        memcpy(&h, s + 2 * i, 2);
        dst[i] = qccl_bf16_to_f32(h);
        break;
      default:
        memcpy(dst + i, s + 4 * i, 4);
        break;
    }
  }
}

static void sc_store(const float* src, size_t n, qcclDataType_t type, void* dst, int stream) {
  unsigned char* d = (unsigned char*)dst;
  uint16_t h;
  (void)stream;
  for (size_t i = 0; i < n; i++) {
    switch (type) {
      case qcclFloat16:
        h = qccl_f32_to_f16(src[i]);
        memcpy(d + 2 * i, &h, 2);
        break;
      case qcclBfloat16:
        h = qccl_f32_to_bf16(src[i]);
        memcpy(d + 2 * i, &h, 2);
        break;
      default:
        memcpy(d + 4 * i, src + i, 4);
        break;
    }
  }
}

const quant_kernels_t quant_kernels_scalar = {
    .stats = sc_stats,
    .encode = sc_encode,
    .decode = sc_decode,
    .decode_acc = sc_decode_acc,
    .rotate = sc_rotate,
    .unrotate = sc_unrotate,
    .add = sc_add,
    .sub = sc_sub,
    .load = sc_load,
    .store = sc_store,
};
