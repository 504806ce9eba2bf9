/*
 * zero_fp.c - element conversions between f32 and the parameter types
 * (f32, bf16, f16), rounding to nearest even, NaN kept NaN and overflow to
 * Inf (so an f16 overflow stays visible to the loss scaler). bf16 is the
 * top half of an f32; f16 goes through the compiler's _Float16, whose
 * conversions are IEEE round-to-nearest-even.
 */
#include <string.h>

#include "zero.h"

size_t zero_dtype_size(qcclDataType_t dtype) {
  switch (dtype) {
    case qcclFloat32:
      return 4;
    case qcclBfloat16:
      return 2;
    case qcclFloat16:
      return 2;
    default:
      return 0;
  }
}

const char* zero_dtype_name(qcclDataType_t dtype) {
  switch (dtype) {
    case qcclFloat32:
      return "F32";
    case qcclBfloat16:
      return "BF16";
    case qcclFloat16:
      return "F16";
    default:
      return "?";
  }
}

static float zero_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t zero_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float zero_load(const void* buf, qcclDataType_t dtype, size_t i) {
  switch (dtype) {
    case qcclFloat32:
      return ((const float*)buf)[i];
    case qcclBfloat16:
      return zero_bf16_to_f32(((const uint16_t*)buf)[i]);
    case qcclFloat16:
      return (float)((const _Float16*)buf)[i];
    default:
      return 0.0f;
  }
}

void zero_store(void* buf, qcclDataType_t dtype, size_t i, float x) {
  switch (dtype) {
    case qcclFloat32:
      ((float*)buf)[i] = x;
      break;
    case qcclBfloat16:
      ((uint16_t*)buf)[i] = zero_f32_to_bf16(x);
      break;
    case qcclFloat16:
      ((_Float16*)buf)[i] = (_Float16)x;
      break;
    default:
      break;
  }
}

void zero_from_f32(void* dst, qcclDataType_t dtype, const float* src, size_t n) {
  if (dtype == qcclFloat32) {
    memcpy(dst, src, n * sizeof(float));
  } else if (dtype == qcclBfloat16) {
    uint16_t* d = dst;
    for (size_t i = 0; i < n; i++) d[i] = zero_f32_to_bf16(src[i]);
  } else if (dtype == qcclFloat16) {
    _Float16* d = dst;
    for (size_t i = 0; i < n; i++) d[i] = (_Float16)src[i];
  }
}

void zero_add_to_f32(float* acc, const void* src, qcclDataType_t dtype, size_t n) {
  if (dtype == qcclFloat32) {
    const float* s = src;
    for (size_t i = 0; i < n; i++) acc[i] += s[i];
  } else if (dtype == qcclBfloat16) {
    const uint16_t* s = src;
    for (size_t i = 0; i < n; i++) acc[i] += zero_bf16_to_f32(s[i]);
  } else if (dtype == qcclFloat16) {
    const _Float16* s = src;
    for (size_t i = 0; i < n; i++) acc[i] += (float)s[i];
  }
}

void zero_to_f32_scaled(float* dst, const void* src, qcclDataType_t dtype, size_t n, float scale) {
  if (dtype == qcclBfloat16) {
    const uint16_t* s = src;
    for (size_t i = 0; i < n; i++) dst[i] = zero_bf16_to_f32(s[i]) * scale;
    return;
  }
  zero_to_f32(dst, src, dtype, n);
  if (scale != 1.0f)
    for (size_t i = 0; i < n; i++) dst[i] = dst[i] * scale;
}

void zero_to_f32(float* dst, const void* src, qcclDataType_t dtype, size_t n) {
  if (dtype == qcclFloat32) {
    memcpy(dst, src, n * sizeof(float));
  } else if (dtype == qcclBfloat16) {
    const uint16_t* s = src;
    for (size_t i = 0; i < n; i++) dst[i] = zero_bf16_to_f32(s[i]);
  } else if (dtype == qcclFloat16) {
    const _Float16* s = src;
    for (size_t i = 0; i < n; i++) dst[i] = (float)s[i];
  }
}

void zero_accumulate(void* acc, qcclDataType_t atype, const void* src, qcclDataType_t stype,
                     size_t n) {
  if (atype == qcclFloat32) {
    zero_add_to_f32(acc, src, stype, n);
    return;
  }
  for (size_t i = 0; i < n; i++)
    zero_store(acc, atype, i, zero_load(acc, atype, i) + zero_load(src, stype, i));
}
