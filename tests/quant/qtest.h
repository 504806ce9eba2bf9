/*
 * qtest.h - helpers of the quantization tests: a seeded generator (the seed
 * is printed, QCCL_TEST_SEED replays it), data shapes, format iteration and
 * failure reporting. Header-only; each test is one small program.
 */
#ifndef QCCL_TESTS_QUANT_QTEST_H_
#define QCCL_TESTS_QUANT_QTEST_H_

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qccl.h"

static int qt_failures;

#define QT_FAIL(...)                                     \
  do {                                                   \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                        \
    fprintf(stderr, "\n");                               \
    if (++qt_failures > 20) {                            \
      fprintf(stderr, "too many failures, stopping\n");  \
      exit(1);                                           \
    }                                                    \
  } while (0)

#define QT_CHECK(cond, ...)            \
  do {                                 \
    if (!(cond)) QT_FAIL(__VA_ARGS__); \
  } while (0)

static inline int qt_done(const char* name) {
  if (qt_failures) {
    fprintf(stderr, "%s: %d failure(s)\n", name, qt_failures);
    return 1;
  }
  printf("%s: ok\n", name);
  return 0;
}

/* ---- generator (splitmix64) ---- */
typedef struct {
  uint64_t s;
} qt_rng_t;

static inline uint64_t qt_next(qt_rng_t* r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double qt_unif(qt_rng_t* r) {
  return (double)(qt_next(r) >> 11) * 0x1p-53;
}

static inline double qt_gauss(qt_rng_t* r) {
  double u = qt_unif(r), v = qt_unif(r);
  if (u < 1e-300) u = 1e-300;
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* The test seed: QCCL_TEST_SEED, else the clock; printed either way. */
static inline uint64_t qt_seed(const char* name) {
  const char* e = getenv("QCCL_TEST_SEED");
  uint64_t s;
  if (e != NULL && *e != '\0')
    s = strtoull(e, NULL, 0);
  else
    s = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
  printf("%s: seed %" PRIu64 " (replay with QCCL_TEST_SEED=%" PRIu64 ")\n", name, s, s);
  return s;
}

/* Data shapes. */
enum {
  QT_GAUSS = 0,   /* N(0, 1) times a per-block magnitude 10^[-3, 3] */
  QT_HEAVY = 1,   /* N(0, 1) with a few outliers of 50-200x per block */
  QT_UNIFORM = 2, /* U(-3, 5) */
  QT_MIXED = 3,   /* Gaussian with special blocks: zero, constant, tiny,
                     huge, NaN, Inf, subnormal, -0 */
  QT_NSHAPES = 4
};

static const char* const qt_shape_names[QT_NSHAPES] = {"gauss", "heavy", "uniform", "mixed"};

static inline void qt_fill(qt_rng_t* r, float* x, size_t n, int shape, int block) {
  double mag = 1.0;
  int special = 0;
  for (size_t i = 0; i < n; i++) {
    if (i % (size_t)block == 0) {
      mag = pow(10.0, -3.0 + 6.0 * qt_unif(r));
      special = shape == QT_MIXED ? (int)(qt_next(r) % 12) : 0;
    }
    double g = qt_gauss(r);
    float v;
    switch (shape) {
      case QT_HEAVY:
        v = (float)(qt_unif(r) < 4.0 / block ? g * (50.0 + 150.0 * qt_unif(r)) : g);
        break;
      case QT_UNIFORM:
        v = (float)(-3.0 + 8.0 * qt_unif(r));
        break;
      case QT_MIXED:
        switch (special) {
          case 1:
            v = 0.0f;
            break;
          case 2:
            v = (i & 1) ? -0.0f : 0.0f;
            break;
          case 3:
            v = 1.25f;
            break;
          case 4:
            v = (float)(g * 1e-35);
            break; /* tiny range */
          case 5:
            v = (float)(g * 1e-42);
            break; /* subnormal */
          case 6:
            v = (float)(g * 1e37);
            break; /* huge */
          case 7:
            v = qt_unif(r) < 0.02 ? NAN : (float)g;
            break;
          case 8:
            v = qt_unif(r) < 0.02 ? (qt_next(r) & 1 ? INFINITY : -INFINITY) : (float)g;
            break;
          case 9:
            v = (float)(1000.0 + g * 1e-3);
            break; /* offset, small range */
          default:
            v = (float)(g * mag);
            break;
        }
        break;
      default:
        v = (float)(g * mag);
        break;
    }
    x[i] = v;
  }
}

/* ---- specs ---- */
static inline qcclQuantSpec_t qt_spec(int bits, int block, int asym, int sr, int rotate,
                                      uint64_t seed, int rank) {
  qcclQuantSpec_t s = QCCL_QUANT_SPEC_INITIALIZER;
  s.bits = bits;
  s.block = block;
  s.mode = asym ? qcclQuantAsymmetric : qcclQuantSymmetric;
  s.rounding = sr ? qcclRoundStochastic : qcclRoundNearest;
  s.rotate = rotate;
  s.seed = seed;
  s.rank = rank;
  return s;
}

static inline const char* qt_fmt(const qcclQuantSpec_t* s, char* buf, size_t len) {
  snprintf(buf, len, "int%d %s B=%d %s%s", s->bits, s->mode ? "asym" : "sym", s->block,
           s->rounding ? "stochastic" : "nearest", s->rotate ? " rotated" : "");
  return buf;
}

static inline void* qt_malloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

/* First differing byte, or -1. */
static inline long qt_first_diff(const void* a, const void* b, size_t n) {
  const unsigned char* x = (const unsigned char*)a;
  const unsigned char* y = (const unsigned char*)b;
  for (size_t i = 0; i < n; i++)
    if (x[i] != y[i]) return (long)i;
  return -1;
}

#endif /* QCCL_TESTS_QUANT_QTEST_H_ */
