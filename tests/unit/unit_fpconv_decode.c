/*
 * unit_fpconv_decode - every code of f16 (65536), bf16 (65536), e4m3 (256)
 * and e5m2 (256) decoded by the library's src/core/fpconv.h must equal the
 * independent reference (ref_fp.c): the same value and sign, NaN for NaN.
 */
#include <math.h>
#include <stdio.h>
#include <stdint.h>

#include "core/fpconv.h"
#include "ref_fp.h"

static int failures;

static float lib_decode(const ref_fmt_t* f, uint32_t c) {
  if (f == REF_F16) return qccl_f16_to_f32((uint16_t)c);
  if (f == REF_BF16) return qccl_bf16_to_f32((uint16_t)c);
  if (f == REF_E4M3) return qccl_e4m3_to_f32((uint8_t)c);
  return qccl_e5m2_to_f32((uint8_t)c);
}

static void check_format(const ref_fmt_t* f) {
  uint32_t n = 1u << ref_fmt_bits(f);
  int bad = 0;
  for (uint32_t c = 0; c < n; c++) {
    double want = ref_decode(f, c);
    float got = lib_decode(f, c);
    int ok = isnan(want) ? isnan(got) : ((double)got == want && !signbit(got) == !signbit(want));
    if (!ok) {
      if (bad < 10)
        printf("FAIL %s decode 0x%04x: library %.9g, reference %.17g\n", ref_fmt_name(f), c,
               (double)got, want);
      bad++;
    }
  }
  printf("%s: %u codes, %d mismatch(es)\n", ref_fmt_name(f), n, bad);
  failures += bad;
}

int main(void) {
  check_format(REF_F16);
  check_format(REF_BF16);
  check_format(REF_E4M3);
  check_format(REF_E5M2);
  return failures ? 1 : 0;
}
