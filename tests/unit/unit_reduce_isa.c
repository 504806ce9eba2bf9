/*
 * unit_reduce_isa - the reduction kernels (collectives/reduce_kernels_impl.h)
 * against an element-by-element reference, and the AVX2 build against the
 * baseline build.
 *
 * Reference: for f32, f64, int32, bf16 and f16 (the narrow ones widened,
 * combined in f32 and narrowed once), every op, 1..8
 * sources, every count below, each element combined in source order by a
 * plain loop here must come out bit for bit (NaN aside, as below), also
 * when dst is one of the sources (in place).
 *
 * AVX2: the AVX2 build gives the same
 * bits as the baseline build, for every
 * datatype and op, 1..5 sources, counts around the block size and the
 * vector widths, and inputs of random bits (so NaNs, infinities, denormals,
 * both zeros and the narrow formats' every code), from a printed seed.
 * One exception: where several inputs of an element are NaN, which NaN
 * comes out (its sign and payload) is left open, as IEEE 754 leaves it
 * (a compiler may order the operands of a commutative operation either
 * way); such an element must be a NaN in both. On a CPU or build without
 * AVX2 only the reference part runs.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives/reduce_kernels.h"
#include "core/dtype.h"

static uint64_t rng_state;

/* Element i of x (type t) is a NaN. */
static int is_nan_at(const unsigned char* x, size_t i, qcclDataType_t t) {
  switch (t) {
    case qcclFloat32: {
      float v;
      memcpy(&v, x + i * 4, 4);
      return isnan(v);
    }
    case qcclFloat64: {
      double v;
      memcpy(&v, x + i * 8, 8);
      return isnan(v);
    }
    case qcclFloat16:
    case qcclBfloat16:
    case qcclFloat8e4m3:
    case qcclFloat8e5m2: {
      float v;
      convert_to_f32(&v, x + i * dtype_size(t), 1, t);
      return isnan(v);
    }
    default:
      return 0;
  }
}

/* a and b hold the same n elements of t: equal bytes, or both NaN. */
static size_t first_difference(const unsigned char* a, const unsigned char* b, size_t n,
                               qcclDataType_t t) {
  size_t es = dtype_size(t);
  for (size_t i = 0; i < n; i++)
    if (memcmp(a + i * es, b + i * es, es) != 0 && !(is_nan_at(a, i, t) && is_nan_at(b, i, t)))
      return i;
  return n;
}

/* Element i of the in-order reduction of k sources of t (f32, f64, int32,
 * bf16, f16) by op, into out (one element). */
static void reference_at(const unsigned char* const* src, int k, size_t i, qcclDataType_t t,
                         qcclRedOp_t op, unsigned char* out) {
  if (t == qcclInt32) {
    int32_t acc, v;
    memcpy(&acc, src[0] + i * 4, 4);
    for (int j = 1; j < k; j++) {
      memcpy(&v, src[j] + i * 4, 4);
      if (op == qcclSum) acc = (int32_t)((uint32_t)acc + (uint32_t)v);
      if (op == qcclProd) acc = (int32_t)((uint32_t)acc * (uint32_t)v);
      if (op == qcclMax) acc = acc > v ? acc : v;
      if (op == qcclMin) acc = acc < v ? acc : v;
    }
    memcpy(out, &acc, 4);
    return;
  }
  if (t == qcclBfloat16 || t == qcclFloat16) {
    /* widened exactly, combined in f32, narrowed once */
    float acc, v;
    convert_to_f32(&acc, src[0] + i * 2, 1, t);
    for (int j = 1; j < k; j++) {
      convert_to_f32(&v, src[j] + i * 2, 1, t);
      if (op == qcclSum || op == qcclAvg) acc = acc + v;
      if (op == qcclProd) acc = acc * v;
      if (op == qcclMax) acc = (acc > v || acc != acc) ? acc : v;
      if (op == qcclMin) acc = (acc < v || acc != acc) ? acc : v;
    }
    if (op == qcclAvg && k > 1) acc = acc / (float)k;
    convert_from_f32(out, &acc, 1, t);
    return;
  }
#define REF_FLOAT(T)                                              \
  do {                                                            \
    T acc, v;                                                     \
    memcpy(&acc, src[0] + i * sizeof(T), sizeof(T));              \
    for (int j = 1; j < k; j++) {                                 \
      memcpy(&v, src[j] + i * sizeof(T), sizeof(T));              \
      if (op == qcclSum || op == qcclAvg) acc = acc + v;          \
      if (op == qcclProd) acc = acc * v;                          \
      if (op == qcclMax) acc = (acc > v || acc != acc) ? acc : v; \
      if (op == qcclMin) acc = (acc < v || acc != acc) ? acc : v; \
    }                                                             \
    if (op == qcclAvg && k > 1) acc = acc / (T)k;                 \
    memcpy(out, &acc, sizeof(T));                                 \
  } while (0)
  if (t == qcclFloat32) REF_FLOAT(float);
  if (t == qcclFloat64) REF_FLOAT(double);
#undef REF_FLOAT
}

static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int main(int argc, char** argv) {
  uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
  printf("unit_reduce_isa: seed %" PRIu64 " (replay: unit_reduce_isa %" PRIu64 ")\n", seed, seed);
  rng_state = seed;
  const size_t counts[] = {0, 1, 7, 8, 9, 31, 257, 511, 512, 513, 1031, 4099};
  enum { KMAX = 8, NMAX = 4099 };
  unsigned char* src[KMAX];
  for (int j = 0; j < KMAX; j++) src[j] = malloc(NMAX * 8);
  unsigned char* a = malloc(NMAX * 8);
  unsigned char* b = malloc(NMAX * 8);
  int checked = 0, bad = 0;
  /* the reference, with each build there is, out of place and in place */
  const qcclDataType_t ref_types[] = {qcclFloat32, qcclFloat64, qcclInt32, qcclBfloat16,
                                      qcclFloat16};
  for (int isa = 0; isa <= reduce_isa_avx2(); isa++)
    for (size_t ti = 0; ti < sizeof ref_types / sizeof ref_types[0]; ti++) {
      qcclDataType_t t = ref_types[ti];
      size_t es = dtype_size(t);
      for (int op = 0; op < qcclNumOps; op++) {
        if (op == qcclAvg && !dtype_is_float(t)) continue;
        for (int k = 1; k <= KMAX; k++)
          for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            size_t n = counts[c];
            for (int j = 0; j < k; j++)
              for (size_t i = 0; i < n * es; i++) src[j][i] = (unsigned char)rng_next();
            for (size_t i = 0; i < n; i++)
              reference_at((const unsigned char* const*)src, k, i, t, (qcclRedOp_t)op, b + i * es);
            const void* srcs[KMAX];
            for (int j = 0; j < k; j++) srcs[j] = src[j];
            reduce_kernel_isa(isa, a, srcs, k, n, t, (qcclRedOp_t)op, k);
            size_t i = first_difference(a, b, n, t);
            /* in place: dst is source r */
            int r = (int)(rng_next() % (uint64_t)k);
            memcpy(a, src[r], n * es);
            srcs[r] = a;
            reduce_kernel_isa(isa, a, srcs, k, n, t, (qcclRedOp_t)op, k);
            size_t i2 = first_difference(a, b, n, t);
            checked += 2;
            if ((i < n || i2 < n) && bad++ < 10)
              printf(
                  "FAIL reference %s %s op %d k %d count %zu: element %zu (in place: %zu) "
                  "differs\n",
                  isa ? "avx2" : "baseline", dtype_name(t), op, k, n, i < n ? i : i2, i2);
          }
      }
    }
  if (!reduce_isa_avx2()) {
    printf(
        "unit_reduce_isa: %d reference cases, %d differ; no AVX2 on this CPU or in this build "
        "(or QCCL_REDUCE_ISA=scalar)\n",
        checked, bad);
    for (int j = 0; j < KMAX; j++) free(src[j]);
    free(a);
    free(b);
    return bad ? 1 : 0;
  }
  for (int t = 0; t < qcclNumTypes; t++) {
    size_t es = dtype_size((qcclDataType_t)t);
    for (int op = 0; op < qcclNumOps; op++) {
      if (op == qcclAvg && !dtype_is_float((qcclDataType_t)t)) continue;
      for (int k = 1; k <= KMAX; k++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
          size_t n = counts[c];
          for (int j = 0; j < k; j++)
            for (size_t i = 0; i < n * es; i++) src[j][i] = (unsigned char)rng_next();
          const void* srcs[KMAX];
          for (int j = 0; j < k; j++) srcs[j] = src[j];
          memset(a, 0xa5, NMAX * 8);
          memset(b, 0xa5, NMAX * 8);
          reduce_kernel_isa(0, a, srcs, k, n, (qcclDataType_t)t, (qcclRedOp_t)op, k);
          reduce_kernel_isa(1, b, srcs, k, n, (qcclDataType_t)t, (qcclRedOp_t)op, k);
          checked++;
          size_t i = first_difference(a, b, n, (qcclDataType_t)t);
          if (i < n || memcmp(a + n * es, b + n * es, NMAX * 8 - n * es) != 0) {
            if (bad++ < 10)
              printf("FAIL %s op %d k %d count %zu: element %zu differs\n",
                     dtype_name((qcclDataType_t)t), op, k, n, i);
          }
        }
    }
  }
  for (int j = 0; j < KMAX; j++) free(src[j]);
  free(a);
  free(b);
  printf("unit_reduce_isa: %d cases, %d differ\n", checked, bad);
  return bad ? 1 : 0;
}
