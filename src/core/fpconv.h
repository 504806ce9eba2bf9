/*
 * fpconv.h - conversions between f32 and the narrow float formats qccl
 * carries: IEEE binary16 (f16), bfloat16 (bf16) and the OCP fp8 formats
 * e4m3 ("FN": no infinity, one NaN pattern, max 448) and e5m2.
 *
 * Inline functions only, so that C (host) and CUDA (device) code share the
 * exact same bits: narrowing always rounds to nearest, ties to even.
 * Overflow: f16 and bf16 go to infinity (IEEE); fp8 saturates to the
 * largest finite value (CUDA's __NV_SATFINITE, which NCCL's fp8 reductions
 * use). NaN stays NaN in every format.
 */
#ifndef QCCL_CORE_FPCONV_H_
#define QCCL_CORE_FPCONV_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define QCCL_HD __host__ __device__ __forceinline__
#else
#define QCCL_HD static inline
#endif

QCCL_HD uint32_t qccl_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

QCCL_HD float qccl_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* f16 -> f32, exact. */
QCCL_HD float qccl_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    /* zero or subnormal: man * 2^-24, exact in f32 */
    float v = (float)man * 5.9604644775390625e-8f;
    return qccl_bits_f32(qccl_f32_bits(v) | sign);
  }
  if (exp == 31) return qccl_bits_f32(sign | 0x7f800000u | (man << 13));
  return qccl_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/* f32 -> f16, round to nearest even; overflow to infinity. */
QCCL_HD uint16_t qccl_f32_to_f16(float f) {
  uint32_t x = qccl_f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return (uint16_t)(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
  if (x < 0x38800000u) {
    /* below the smallest normal (2^-14): subnormal code = rne(|f| * 2^24) */
    float a = qccl_bits_f32(x) * 16777216.0f;
    return (uint16_t)(sign | (uint16_t)rintf(a));
  }
  /* normal: rebias the exponent (127 -> 15) and round 23 -> 10 mantissa bits */
  x = x - (112u << 23);
  x = x + 0xfffu + ((x >> 13) & 1u);
  return (uint16_t)(sign | (uint16_t)(x >> 13));
}

/* bf16 -> f32, exact. */
QCCL_HD float qccl_bf16_to_f32(uint16_t b) {
  return qccl_bits_f32((uint32_t)b << 16);
}

/* f32 -> bf16, round to nearest even; NaN stays a (quiet) NaN. */
QCCL_HD uint16_t qccl_f32_to_bf16(float f) {
  uint32_t x = qccl_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u);
  x = x + 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

/* Generic fp8 decode: 1 sign bit, ebits exponent bits, mbits mantissa bits. */
QCCL_HD float qccl_fp8_decode(uint8_t c, int mbits, int bias) {
  int sign = c >> 7;
  int exp = (c >> mbits) & ((1 << (7 - mbits)) - 1);
  int man = c & ((1 << mbits) - 1);
  float v;
  if (exp == 0)
    v = ldexpf((float)man, 1 - bias - mbits);
  else
    v = ldexpf((float)((1 << mbits) | man), exp - bias - mbits);
  return sign ? -v : v;
}

/* Generic fp8 encode, round to nearest even, saturating to max_code (the
 * code of the largest finite magnitude). */
QCCL_HD uint8_t qccl_fp8_encode(float f, int mbits, int bias, uint8_t max_code, uint8_t nan_code) {
  uint8_t sign = (uint8_t)(qccl_f32_bits(f) >> 31 << 7);
  float a = fabsf(f);
  if (a != a) return (uint8_t)(sign | nan_code);
  float maxv = qccl_fp8_decode(max_code, mbits, bias);
  if (a >= maxv) return (uint8_t)(sign | max_code);
  int emin = 1 - bias; /* exponent of the smallest normal */
  int code;
  if (a < ldexpf(1.0f, emin)) {
    /* subnormal: multiples of 2^(emin - mbits); rounding up may reach the
     * smallest normal, whose code is exactly 1 << mbits */
    code = (int)rintf(ldexpf(a, mbits - emin));
  } else {
    int e;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    e -= 1;                  /* a = (2m) * 2^e, 2m in [1, 2) */
    int q = (int)rintf(ldexpf(2.0f * m - 1.0f, mbits));
    if (q == (1 << mbits)) {
      q = 0;
      e += 1;
    }
    code = ((e + bias) << mbits) | q;
  }
  if (code > max_code) code = max_code;
  return (uint8_t)(sign | code);
}

QCCL_HD float qccl_e4m3_to_f32(uint8_t c) {
  if ((c & 0x7f) == 0x7f) return qccl_bits_f32(0x7fc00000u | ((uint32_t)(c >> 7) << 31));
  return qccl_fp8_decode(c, 3, 7);
}

QCCL_HD uint8_t qccl_f32_to_e4m3(float f) {
  return qccl_fp8_encode(f, 3, 7, 0x7e, 0x7f);
}

QCCL_HD float qccl_e5m2_to_f32(uint8_t c) {
  int exp = (c >> 2) & 0x1f;
  if (exp == 31) {
    uint32_t s = (uint32_t)(c >> 7) << 31;
    return qccl_bits_f32(s | ((c & 3) ? 0x7fc00000u : 0x7f800000u));
  }
  return qccl_fp8_decode(c, 2, 15);
}

QCCL_HD uint8_t qccl_f32_to_e5m2(float f) {
  return qccl_fp8_encode(f, 2, 15, 0x7b, 0x7e);
}

#endif /* QCCL_CORE_FPCONV_H_ */
