/*
 * ref_fp.h - an independent reference codec for the narrow float formats
 * (IEEE binary16, bfloat16, OCP fp8 e4m3 "FN" and e5m2), written for the
 * tests only and sharing no code with the library's src/core/fpconv.h.
 *
 * Decoding is arithmetic (ldexp of the significand), not bit surgery.
 * Encoding searches the table of every finite code for the nearest value,
 * ties to the code with an even last bit, then applies the format's
 * overflow rule: f16 and bf16 go to infinity at or beyond the midpoint
 * between the largest finite value and the next power of two (IEEE), fp8
 * saturates to the largest finite value (CUDA __NV_SATFINITE), also for
 * an infinite input. NaN encodes to a NaN code of the same sign.
 *
 * tests/unit/test_fpconv checks the library against this codec and this
 * codec against constants from the format specifications; the multi-rank
 * tests (tests/mr) use it to compute expected results.
 */
#ifndef QCCL_TESTS_REF_FP_H_
#define QCCL_TESTS_REF_FP_H_

#include <stdint.h>

typedef struct ref_fmt ref_fmt_t;

extern const ref_fmt_t* const REF_F16;
extern const ref_fmt_t* const REF_BF16;
extern const ref_fmt_t* const REF_E4M3;
extern const ref_fmt_t* const REF_E5M2;

/* "f16", "bf16", "e4m3", "e5m2". */
const char* ref_fmt_name(const ref_fmt_t* f);

/* Number of codes (1 << bits) and width in bits. */
int ref_fmt_bits(const ref_fmt_t* f);

/* Mantissa bits and the exponent of the smallest normal (1 - bias). */
int ref_fmt_mbits(const ref_fmt_t* f);
int ref_fmt_emin(const ref_fmt_t* f);

/* 1 if the format has infinities (f16, bf16, e5m2). */
int ref_fmt_has_inf(const ref_fmt_t* f);

/* 1 if overflow saturates to the largest finite value (fp8). */
int ref_fmt_saturates(const ref_fmt_t* f);

/* The largest finite value and its code. */
double ref_max_finite(const ref_fmt_t* f);
uint32_t ref_max_code(const ref_fmt_t* f);

/* The value of code (NaN and infinities included, sign kept). */
double ref_decode(const ref_fmt_t* f, uint32_t code);

/* 1 if code is a NaN / an infinity of f. */
int ref_is_nan_code(const ref_fmt_t* f, uint32_t code);
int ref_is_inf_code(const ref_fmt_t* f, uint32_t code);

/* The code nearest to x under the format's rules (see above). x is a long
 * double so that exact sums can be rounded once. */
uint32_t ref_encode(const ref_fmt_t* f, long double x);

/* The spacing of f's values at magnitude |x| (subnormal spacing below the
 * smallest normal). */
double ref_ulp(const ref_fmt_t* f, long double x);

/* A code built from its fields (no checks). */
uint32_t ref_make_code(const ref_fmt_t* f, int sign, int expfield, uint32_t mant);

/* The exponent field width and bias. */
int ref_fmt_ebits(const ref_fmt_t* f);
int ref_fmt_bias(const ref_fmt_t* f);

#endif /* QCCL_TESTS_REF_FP_H_ */
