/*
 * unit_ref_fp - checks the tests' own reference codec (ref_fp.c) against
 * values taken from the format specifications (IEEE 754 binary16, bfloat16,
 * OCP 8-bit floating point v1.0), so that the reference used by
 * unit_fpconv_* and the multi-rank tests is itself anchored to the specs
 * and not only to the library it judges.
 */
#include <math.h>
#include <stdio.h>
#include <stdint.h>

#include "ref_fp.h"

static int failures;

static void expect_value(const ref_fmt_t* f, uint32_t code, double want) {
  double got = ref_decode(f, code);
  int ok = isnan(want) ? isnan(got) : (got == want && !signbit(got) == !signbit(want));
  if (!ok) {
    printf("FAIL decode %s 0x%x: got %.17g want %.17g\n", ref_fmt_name(f), code, got, want);
    failures++;
  }
}

static void expect_code(const ref_fmt_t* f, long double x, uint32_t want) {
  uint32_t got = ref_encode(f, x);
  if (got != want) {
    printf("FAIL encode %s %.21Lg: got 0x%x want 0x%x\n", ref_fmt_name(f), x, got, want);
    failures++;
  }
}

static void expect_double(const char* what, double got, double want) {
  if (got != want) {
    printf("FAIL %s: got %.17g want %.17g\n", what, got, want);
    failures++;
  }
}

int main(void) {
  /* binary16 */
  expect_value(REF_F16, 0x3c00, 1.0);
  expect_value(REF_F16, 0xc000, -2.0);
  expect_value(REF_F16, 0x7bff, 65504.0);
  expect_value(REF_F16, 0x0400, ldexp(1.0, -14));
  expect_value(REF_F16, 0x03ff, ldexp(1023.0, -24));
  expect_value(REF_F16, 0x0001, ldexp(1.0, -24));
  expect_value(REF_F16, 0x8000, -0.0);
  expect_value(REF_F16, 0x3555, 0.333251953125);
  expect_value(REF_F16, 0x7c00, INFINITY);
  expect_value(REF_F16, 0xfc00, -INFINITY);
  expect_value(REF_F16, 0x7e00, NAN);
  expect_value(REF_F16, 0x7c01, NAN);
  expect_code(REF_F16, 65519.0L, 0x7bff);
  expect_code(REF_F16, 65520.0L, 0x7c00); /* tie between max and 2^16: to inf */
  expect_code(REF_F16, -1e6L, 0xfc00);
  expect_code(REF_F16, 1.0L + ldexpl(1, -11), 0x3c00);     /* tie: even */
  expect_code(REF_F16, 1.0L + 3 * ldexpl(1, -11), 0x3c02); /* tie: even */
  expect_code(REF_F16, ldexpl(1, -25), 0x0000);            /* half the smallest: 0 */
  expect_code(REF_F16, ldexpl(1, -25) * 1.0001L, 0x0001);
  expect_code(REF_F16, 3 * ldexpl(1, -25), 0x0002);
  expect_code(REF_F16, -ldexpl(1, -30), 0x8000);
  expect_code(REF_F16, NAN, 0x7e00);
  expect_code(REF_F16, 0.1L, 0x2e66);
  /* bfloat16 */
  expect_value(REF_BF16, 0x3f80, 1.0);
  expect_value(REF_BF16, 0x7f7f, 3.3895313892515355e38);
  expect_value(REF_BF16, 0x0080, ldexp(1.0, -126));
  expect_value(REF_BF16, 0x0001, ldexp(1.0, -133));
  expect_value(REF_BF16, 0x7f80, INFINITY);
  expect_value(REF_BF16, 0x7fc0, NAN);
  expect_code(REF_BF16, 1.0L + ldexpl(1, -8), 0x3f80);
  expect_code(REF_BF16, 1.0L + 3 * ldexpl(1, -8), 0x3f82);
  expect_code(REF_BF16, 3.40e38L, 0x7f80);
  expect_code(REF_BF16, 0.1L, 0x3dcd);
  /* e4m3 (FN): no infinities, S.1111.111 is NaN, max 448 */
  expect_value(REF_E4M3, 0x38, 1.0);
  expect_value(REF_E4M3, 0x7e, 448.0);
  expect_value(REF_E4M3, 0xfe, -448.0);
  expect_value(REF_E4M3, 0x7f, NAN);
  expect_value(REF_E4M3, 0x78, 256.0);
  expect_value(REF_E4M3, 0x08, ldexp(1.0, -6));
  expect_value(REF_E4M3, 0x01, ldexp(1.0, -9));
  expect_code(REF_E4M3, 464.0L, 0x7e); /* beyond max: saturate */
  expect_code(REF_E4M3, -1000.0L, 0xfe);
  expect_code(REF_E4M3, INFINITY, 0x7e);
  expect_code(REF_E4M3, 17.0L, 0x58); /* tie between 16 and 18: even */
  expect_code(REF_E4M3, 19.0L, 0x5a); /* tie between 18 and 20: even */
  /* e5m2: max 57344, infinities, NaN */
  expect_value(REF_E5M2, 0x3c, 1.0);
  expect_value(REF_E5M2, 0x7b, 57344.0);
  expect_value(REF_E5M2, 0x7c, INFINITY);
  expect_value(REF_E5M2, 0x7d, NAN);
  expect_value(REF_E5M2, 0x04, ldexp(1.0, -14));
  expect_value(REF_E5M2, 0x01, ldexp(1.0, -16));
  expect_code(REF_E5M2, 1e6L, 0x7b);
  expect_code(REF_E5M2, -INFINITY, 0xfb);
  expect_code(REF_E5M2, 1.125L, 0x3c); /* tie between 1 and 1.25: even */
  /* spacing */
  expect_double("ulp f16 1", ref_ulp(REF_F16, 1.0L), ldexp(1, -10));
  expect_double("ulp f16 0", ref_ulp(REF_F16, 0.0L), ldexp(1, -24));
  expect_double("ulp e4m3 300", ref_ulp(REF_E4M3, 300.0L), 32.0);
  expect_double("ulp bf16 -3", ref_ulp(REF_BF16, -3.0L), ldexp(1, -6));
  /* every finite code round-trips through the reference */
  const ref_fmt_t* fmts[] = {REF_F16, REF_BF16, REF_E4M3, REF_E5M2};
  for (int k = 0; k < 4; k++) {
    const ref_fmt_t* f = fmts[k];
    uint32_t n = 1u << ref_fmt_bits(f);
    for (uint32_t c = 0; c < n; c++) {
      if (ref_is_nan_code(f, c)) continue;
      uint32_t back = ref_encode(f, ref_decode(f, c));
      if (back != c && !(ref_fmt_saturates(f) && ref_is_inf_code(f, c))) {
        printf("FAIL round trip %s 0x%x -> 0x%x\n", ref_fmt_name(f), c, back);
        failures++;
      }
    }
  }
  printf("unit_ref_fp: %d failure(s)\n", failures);
  return failures ? 1 : 0;
}
