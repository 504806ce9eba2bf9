/*
 * ref_fp.c - the reference codec of ref_fp.h. Values are computed with
 * ldexp from the code's fields; encoding is a binary search over the sorted
 * table of all positive finite values of the format followed by an exact
 * midpoint comparison (long double holds every value and midpoint of these
 * formats exactly).
 */
#include "ref_fp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct ref_fmt {
  const char* name;
  int ebits, mbits, bias;
  int has_inf;     /* exponent all ones: inf (mantissa 0) or NaN */
  int saturates;   /* overflow -> largest finite (fp8, SATFINITE) */
  uint32_t nan;    /* the canonical positive NaN code produced by encode */
  double* table;   /* value of each positive finite code, ascending */
  uint32_t ncodes; /* entries in table (= max code + 1) */
};

static struct ref_fmt fmt_f16 = {"f16", 5, 10, 15, 1, 0, 0x7e00u, NULL, 0};
static struct ref_fmt fmt_bf16 = {"bf16", 8, 7, 127, 1, 0, 0x7fc0u, NULL, 0};
static struct ref_fmt fmt_e4m3 = {"e4m3", 4, 3, 7, 0, 1, 0x7fu, NULL, 0};
static struct ref_fmt fmt_e5m2 = {"e5m2", 5, 2, 15, 1, 1, 0x7eu, NULL, 0};

const ref_fmt_t* const REF_F16 = &fmt_f16;
const ref_fmt_t* const REF_BF16 = &fmt_bf16;
const ref_fmt_t* const REF_E4M3 = &fmt_e4m3;
const ref_fmt_t* const REF_E5M2 = &fmt_e5m2;

const char* ref_fmt_name(const ref_fmt_t* f) {
  return f->name;
}
int ref_fmt_bits(const ref_fmt_t* f) {
  return 1 + f->ebits + f->mbits;
}
int ref_fmt_mbits(const ref_fmt_t* f) {
  return f->mbits;
}
int ref_fmt_ebits(const ref_fmt_t* f) {
  return f->ebits;
}
int ref_fmt_bias(const ref_fmt_t* f) {
  return f->bias;
}
int ref_fmt_emin(const ref_fmt_t* f) {
  return 1 - f->bias;
}
int ref_fmt_has_inf(const ref_fmt_t* f) {
  return f->has_inf;
}
int ref_fmt_saturates(const ref_fmt_t* f) {
  return f->saturates;
}

uint32_t ref_make_code(const ref_fmt_t* f, int sign, int expfield, uint32_t mant) {
  return ((uint32_t)(sign != 0) << (f->ebits + f->mbits)) | ((uint32_t)expfield << f->mbits) |
         (mant & ((1u << f->mbits) - 1u));
}

int ref_is_nan_code(const ref_fmt_t* f, uint32_t code) {
  uint32_t e = (code >> f->mbits) & ((1u << f->ebits) - 1u);
  uint32_t m = code & ((1u << f->mbits) - 1u);
  uint32_t emax = (1u << f->ebits) - 1u;
  if (e != emax) return 0;
  if (f->has_inf) return m != 0;
  return m == (1u << f->mbits) - 1u; /* e4m3: only S.1111.111 */
}

int ref_is_inf_code(const ref_fmt_t* f, uint32_t code) {
  uint32_t e = (code >> f->mbits) & ((1u << f->ebits) - 1u);
  uint32_t m = code & ((1u << f->mbits) - 1u);
  return f->has_inf && e == (1u << f->ebits) - 1u && m == 0;
}

double ref_decode(const ref_fmt_t* f, uint32_t code) {
  int sign = (int)((code >> (f->ebits + f->mbits)) & 1u);
  int e = (int)((code >> f->mbits) & ((1u << f->ebits) - 1u));
  int m = (int)(code & ((1u << f->mbits) - 1u));
  double v;
  if (ref_is_nan_code(f, code)) {
    v = NAN;
  } else if (ref_is_inf_code(f, code)) {
    v = INFINITY;
  } else if (e == 0) {
    v = ldexp((double)m, 1 - f->bias - f->mbits); /* subnormal: m * 2^(emin - mbits) */
  } else {
    v = ldexp((double)(m + (1 << f->mbits)), e - f->bias - f->mbits);
  }
  return sign ? -v : v;
}

uint32_t ref_max_code(const ref_fmt_t* f) {
  uint32_t emax = (1u << f->ebits) - 1u;
  uint32_t mmask = (1u << f->mbits) - 1u;
  if (f->has_inf) return ((emax - 1u) << f->mbits) | mmask;
  return (emax << f->mbits) | (mmask - 1u); /* e4m3: S.1111.110 = 448 */
}

double ref_max_finite(const ref_fmt_t* f) {
  return ref_decode(f, ref_max_code(f));
}

/* Builds the ascending table of positive finite values on first use. */
static void build_table(struct ref_fmt* f) {
  if (f->table) return;
  uint32_t n = ref_max_code(f) + 1u;
  double* t = malloc(n * sizeof *t);
  if (!t) {
    fprintf(stderr, "ref_fp: out of memory\n");
    abort();
  }
  for (uint32_t c = 0; c < n; c++) {
    t[c] = ref_decode(f, c);
    if (c > 0 && !(t[c] > t[c - 1])) {
      fprintf(stderr, "ref_fp: %s table not ascending at code %u\n", f->name, c);
      abort();
    }
  }
  f->ncodes = n;
  f->table = t;
}

uint32_t ref_encode(const ref_fmt_t* fc, long double x) {
  struct ref_fmt* f = (struct ref_fmt*)fc;
  build_table(f);
  uint32_t sign = signbit(x) ? 1u << (f->ebits + f->mbits) : 0u;
  if (isnan(x)) return sign | f->nan;
  long double a = fabsl(x);
  uint32_t maxc = f->ncodes - 1u;
  long double maxv = f->table[maxc];
  if (a > maxv) {
    if (f->saturates) return sign | maxc;
    /* IEEE: round as if the exponent were unbounded; the next value after
     * max is 2^(emax+1), and the tie rounds to it (max's last bit is odd). */
    int emax = (1 << f->ebits) - 2 - f->bias;
    long double over = (maxv + ldexpl(1.0L, emax + 1)) / 2.0L;
    if (a >= over) return sign | ref_make_code(f, 0, (1 << f->ebits) - 1, 0);
    return sign | maxc;
  }
  /* largest code c with table[c] <= a */
  uint32_t lo = 0, hi = maxc;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo + 1u) / 2u;
    if ((long double)f->table[mid] <= a)
      lo = mid;
    else
      hi = mid - 1u;
  }
  uint32_t c = lo;
  if ((long double)f->table[c] == a) return sign | c;
  long double m = ((long double)f->table[c] + (long double)f->table[c + 1u]) / 2.0L;
  uint32_t r;
  if (a < m)
    r = c;
  else if (a > m)
    r = c + 1u;
  else
    r = (c & 1u) ? c + 1u : c;
  return sign | r;
}

double ref_ulp(const ref_fmt_t* f, long double x) {
  long double a = fabsl(x);
  int emin = 1 - f->bias;
  if (isinf(a) || isnan(a) || a > (long double)ref_max_finite(f)) a = ref_max_finite(f);
  if (a < ldexpl(1.0L, emin)) return ldexp(1.0, emin - f->mbits);
  int e = ilogbl(a);
  return ldexp(1.0, e - f->mbits);
}
