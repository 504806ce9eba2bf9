/*
 * quant_rotation - the randomized Walsh-Hadamard rotation:
 *  - round trip: dequantize(quantize(x)) with rotation is close to x
 *    (relative L2 error of int8 below 1%, and the same order as without);
 *  - a transform-only round trip: a block whose rotated values quantize
 *    exactly (x = a column of the signed Hadamard matrix, found by probing)
 *    comes back to f32 rounding;
 *  - heavy-tailed data (N(0,1) with one outlier of 20-100 sigma per 128
 *    elements: one or two per block): int4 with
 *    rotation has at least 2x lower mean squared error than without (fixed
 *    seed, B = 128 and 256, symmetric and asymmetric);
 *  - signs depend on the seed, never on the rank: same seed and different
 *    ranks give identical chunks (nearest rounding), another seed another;
 *  - a count that is not a multiple of B: the codes cover the padded block,
 *    and dequantize writes exactly count elements.
 */
#include "qtest.h"

static double rel_l2(const float* x, const float* y, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)x[i] - y[i];
    num += d * d;
    den += (double)x[i] * x[i];
  }
  return sqrt(num / den);
}

static double mse(const qcclQuantSpec_t* s, const float* x, size_t n) {
  size_t cb;
  qcclQuantSize(n, s, &cb);
  unsigned char* c = (unsigned char*)qt_malloc(cb);
  float* y = (float*)qt_malloc(n * 4);
  qcclQuantize(x, n, qcclFloat32, s, c);
  qcclDequantize(c, n, qcclFloat32, s, y);
  double e = 0;
  for (size_t i = 0; i < n; i++) e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
  free(c);
  free(y);
  return e / (double)n;
}

int main(void) {
  qt_rng_t rng = {qt_seed("quant_rotation")};
  char fb[96];

  /* round trip on Gaussian data */
  const size_t n = 100000;
  float* x = (float*)qt_malloc(n * 4);
  float* y = (float*)qt_malloc(n * 4);
  for (size_t i = 0; i < n; i++) x[i] = (float)qt_gauss(&rng);
  for (int B = 32; B <= 4096; B *= 4) {
    for (int asym = 0; asym < 2; asym++) {
      qcclQuantSpec_t s = qt_spec(8, B, asym, 0, 1, qt_next(&rng), 0);
      size_t cb;
      qcclQuantSize(n, &s, &cb);
      unsigned char* c = (unsigned char*)qt_malloc(cb);
      QT_CHECK(qcclQuantize(x, n, qcclFloat32, &s, c) == qcclSuccess, "quantize");
      QT_CHECK(qcclDequantize(c, n, qcclFloat32, &s, y) == qcclSuccess, "dequantize");
      double e = rel_l2(x, y, n);
      QT_CHECK(e < 0.01, "%s: relative L2 error %.3g", qt_fmt(&s, fb, sizeof fb), e);
      s.rotate = 0;
      double sq = 0;
      for (size_t i = 0; i < n; i++) sq += (double)x[i] * x[i];
      double plain = sqrt(mse(&s, x, n) * (double)n / sq);
      QT_CHECK(e < 2 * plain, "%s: rotated error %.3g, plain %.3g", qt_fmt(&s, fb, sizeof fb), e,
               plain);
      free(c);
    }
  }

  /* transform-only round trip: x = e_k gives y = +-1 everywhere (rotated
   * values all of magnitude 1: exactly representable codes +-qmax) */
  for (int B = 32; B <= 4096; B *= 2) {
    qcclQuantSpec_t s = qt_spec(8, B, 0, 0, 1, qt_next(&rng), 0);
    float* e = (float*)qt_malloc((size_t)B * 4);
    float* d = (float*)qt_malloc((size_t)B * 4);
    size_t cb;
    qcclQuantSize((size_t)B, &s, &cb);
    unsigned char* c = (unsigned char*)qt_malloc(cb);
    for (int k = 0; k < B; k += B / 8 + 1) {
      memset(e, 0, (size_t)B * 4);
      e[k] = 3.0f;
      qcclQuantize(e, (size_t)B, qcclFloat32, &s, c);
      qcclDequantize(c, (size_t)B, qcclFloat32, &s, d);
      for (int i = 0; i < B; i++)
        QT_CHECK(fabsf(d[i] - e[i]) <= 3.0f * 0x1p-20f, "B=%d unit vector %d: element %d: %g", B, k,
                 i, d[i]);
    }
    free(e);
    free(d);
    free(c);
  }

  /* heavy tails: int4 rotation halves the mean squared error or better */
  qt_rng_t fixed = {20240601};
  for (size_t i = 0; i < n; i++) x[i] = (float)qt_gauss(&fixed);
  for (size_t g = 0; g + 128 <= n; g += 128) { /* one outlier of 20-100 sigma per 128 */
    double o = 20.0 + 80.0 * qt_unif(&fixed);
    x[g + qt_next(&fixed) % 128] = (float)(qt_next(&fixed) & 1 ? o : -o);
  }
  for (int B = 128; B <= 256; B *= 2) {
    for (int asym = 0; asym < 2; asym++) {
      qcclQuantSpec_t s = qt_spec(4, B, asym, 0, 0, 7, 0);
      double plain = mse(&s, x, n);
      s.rotate = 1;
      double rot = mse(&s, x, n);
      printf("heavy-tailed %s: MSE %.4g plain, %.4g rotated (%.2fx)\n", qt_fmt(&s, fb, sizeof fb),
             plain, rot, plain / rot);
      QT_CHECK(rot * 2 <= plain, "%s: rotation MSE %.4g is not 2x below %.4g",
               qt_fmt(&s, fb, sizeof fb), rot, plain);
    }
  }

  /* signs: seed, not rank */
  {
    const size_t m = 1000;
    qcclQuantSpec_t s = qt_spec(8, 128, 0, 0, 1, 1234, 0);
    size_t cb;
    qcclQuantSize(m, &s, &cb);
    unsigned char* a = (unsigned char*)qt_malloc(cb);
    unsigned char* b = (unsigned char*)qt_malloc(cb);
    qcclQuantize(x, m, qcclFloat32, &s, a);
    s.rank = 5;
    qcclQuantize(x, m, qcclFloat32, &s, b);
    QT_CHECK(memcmp(a, b, cb) == 0, "rotation depends on the rank");
    s.seed = 1235;
    qcclQuantize(x, m, qcclFloat32, &s, b);
    QT_CHECK(memcmp(a, b, cb) != 0, "rotation does not depend on the seed");
    /* decoding with the wrong seed is wrong: the seed is part of the format */
    float* d = (float*)qt_malloc(m * 4);
    qcclDequantize(a, m, qcclFloat32, &s, d);
    QT_CHECK(rel_l2(x, d, m) > 0.5, "dequantizing with another seed still works");
    free(a);
    free(b);
    free(d);
  }

  /* padding: 300 elements, B = 256: 512 coded, exactly 300 written */
  {
    qcclQuantSpec_t s = qt_spec(4, 256, 1, 0, 1, 99, 0);
    size_t cb;
    qcclQuantSize(300, &s, &cb);
    QT_CHECK(cb == 16 + 256, "rotated 300 elements int4 asym B=256: %zu bytes", cb);
    unsigned char* c = (unsigned char*)qt_malloc(cb);
    qcclQuantize(x, 300, qcclFloat32, &s, c);
    for (int i = 0; i < 310; i++) y[i] = 12345.0f;
    qcclDequantize(c, 300, qcclFloat32, &s, y);
    for (int i = 300; i < 310; i++) QT_CHECK(y[i] == 12345.0f, "wrote element %d", i);
    QT_CHECK(rel_l2(x, y, 300) < 0.25, "int4 rotated padded block: error %.3g", rel_l2(x, y, 300));
    free(c);
  }
  free(x);
  free(y);
  return qt_done("quant_rotation");
}
