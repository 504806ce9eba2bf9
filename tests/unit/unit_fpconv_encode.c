/*
 * unit_fpconv_encode - f32 -> f16 / bf16 / e4m3 / e5m2 rounding of the
 * library's src/core/fpconv.h against the independent reference
 * (ref_fp.c: nearest code by table search, ties to even, f16/bf16 overflow
 * to infinity, fp8 saturating). Inputs, per format:
 *   - a strided sweep of all 2^32 f32 bit patterns (stride 1021, random
 *     start), so every exponent and sign is visited;
 *   - random bit patterns and random values in the format's range;
 *   - every finite code's value, its f32 neighbours, and the exact midpoint
 *     to the next code with its neighbours (every tie case);
 *   - boundaries: largest finite, the overflow tie, beyond, infinities,
 *     NaNs (quiet, signalling, negative), zeros, the subnormal ties.
 * Every NaN must encode to a NaN code; everything else to the reference's
 * exact code. Usage: unit_fpconv_encode [--seed N] (default from time).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/fpconv.h"
#include "ref_fp.h"

static uint64_t rng_state;

static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static uint32_t lib_encode(const ref_fmt_t* f, float x) {
  if (f == REF_F16) return qccl_f32_to_f16(x);
  if (f == REF_BF16) return qccl_f32_to_bf16(x);
  if (f == REF_E4M3) return qccl_f32_to_e4m3(x);
  return qccl_f32_to_e5m2(x);
}

static long checked, bad;

static void check_one(const ref_fmt_t* f, float x) {
  uint32_t got = lib_encode(f, x);
  uint32_t want = ref_encode(f, (long double)x);
  int ok = ref_is_nan_code(f, want) ? ref_is_nan_code(f, got) : got == want;
  checked++;
  if (!ok) {
    if (bad < 20)
      printf("FAIL %s encode f32 0x%08x (%.9g): library 0x%02x, reference 0x%02x\n",
             ref_fmt_name(f), to_bits(x), (double)x, got, want);
    bad++;
  }
}

static void check_both_signs(const ref_fmt_t* f, float x) {
  check_one(f, x);
  check_one(f, -x);
}

static void check_format(const ref_fmt_t* f) {
  long bad0 = bad, checked0 = checked;
  /* strided sweep of all bit patterns */
  const uint64_t stride = 1021;
  for (uint64_t u = rng_next() % stride; u <= 0xffffffffull; u += stride)
    check_one(f, from_bits((uint32_t)u));
  /* random bit patterns */
  for (int i = 0; i < 300000; i++) check_one(f, from_bits((uint32_t)rng_next()));
  /* random values across the format's range, and a little beyond */
  int emin = ref_fmt_emin(f), mbits = ref_fmt_mbits(f);
  int emax = (int)ilogb(ref_max_finite(f));
  for (int i = 0; i < 300000; i++) {
    uint64_t r = rng_next();
    int e = emin - mbits - 3 + (int)(r % (uint64_t)(emax - (emin - mbits - 3) + 4));
    float m = 1.0f + (float)((r >> 20) & 0x7fffff) / 8388608.0f;
    float x = ldexpf(m, e);
    check_one(f, (r >> 63) ? -x : x);
  }
  /* every finite code, its neighbours, and every midpoint with neighbours */
  uint32_t maxc = ref_max_code(f);
  for (uint32_t c = 0; c <= maxc; c++) {
    float v = (float)ref_decode(f, c);
    check_both_signs(f, v);
    check_both_signs(f, nextafterf(v, INFINITY));
    if (v > 0) check_both_signs(f, nextafterf(v, 0.0f));
    double next = c < maxc ? ref_decode(f, c + 1) : ldexp(1.0, emax + 1);
    float mid = (float)((ref_decode(f, c) + next) / 2); /* exact in f32 for these formats */
    check_both_signs(f, mid);
    check_both_signs(f, nextafterf(mid, INFINITY));
    check_both_signs(f, nextafterf(mid, 0.0f));
  }
  /* boundaries */
  float maxv = (float)ref_max_finite(f);
  float specials[] = {0.0f,
                      INFINITY,
                      NAN,
                      from_bits(0x7f800001u), /* signalling NaN */
                      from_bits(0x7fffffffu),
                      FLT_MAX,
                      FLT_MIN,
                      from_bits(1u), /* smallest f32 subnormal */
                      maxv,
                      maxv * 2.0f,
                      maxv * 1.5f,
                      (float)ref_decode(f, 1) / 2.0f,
                      nextafterf((float)ref_decode(f, 1) / 2.0f, INFINITY),
                      (float)ref_decode(f, 1) * 1.5f,
                      (float)ref_decode(f, 1) * 0.25f,
                      ldexpf(1.0f, emin),
                      nextafterf(ldexpf(1.0f, emin), 0.0f)};
  for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
    check_both_signs(f, specials[i]);
  printf("%s: %ld inputs, %ld mismatch(es)\n", ref_fmt_name(f), checked - checked0, bad - bad0);
}

int main(int argc, char** argv) {
  uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = strtoull(argv[++i], NULL, 0);
    } else {
      fprintf(stderr, "usage: %s [--seed N]\n", argv[0]);
      return 2;
    }
  }
  printf("seed=%llu (replay: %s --seed %llu)\n", (unsigned long long)seed, argv[0],
         (unsigned long long)seed);
  rng_state = seed;
  check_format(REF_F16);
  check_format(REF_BF16);
  check_format(REF_E4M3);
  check_format(REF_E5M2);
  return bad ? 1 : 0;
}
