/*
 * quant_stochastic - stochastic rounding q = floor(x * inv + u):
 *  - unbiased: for values at known fractions of the grid (scale exactly 1),
 *    the mean error over N = 4000 draws (seeds 1..N) is within 5 standard
 *    errors (sqrt(f (1 - f) / N)) on every element, and the mean over all
 *    elements within 5 of its own; round-to-nearest on the same data is
 *    biased by up to 0.4 and would fail. Also on random data with int4 and
 *    asymmetric formats, against scale / (2 sqrt N);
 *  - never more than one step: |x - x'| < scale (+ f32 rounding);
 *  - grid values are exact;
 *  - reproducible for (seed, rank); another seed or rank draws differently;
 *    the draws of different ranks are uncorrelated.
 * The draws use fixed seeds, so the statistics are the same on every run.
 */
#include "qtest.h"

static float rd(const unsigned char* p) {
  float v;
  memcpy(&v, p, 4);
  return v;
}

int main(void) {
  printf("quant_stochastic: fixed seeds 1..4000\n");
  const int N = 4000;
  /* a block whose scale is exactly 1: max |x| = 127 (int8) */
  const double fr[8] = {0.1, 0.25, 0.5, 0.75, 0.9, 0.01, 0.99, 0.375};
  float x[256];
  for (int i = 0; i < 256; i++) {
    int k = (i * 37) % 250 - 125; /* integer part in -125..124 */
    x[i] = (float)(k + fr[i % 8]);
  }
  x[0] = 127.0f;
  qcclQuantSpec_t s = qt_spec(8, 256, 0, 1, 0, 0, 0);
  unsigned char c[512];
  float y[256];
  double sum[256] = {0};
  for (int d = 1; d <= N; d++) {
    s.seed = (unsigned long long)d;
    qcclQuantize(x, 256, qcclFloat32, &s, c);
    if (d == 1) QT_CHECK(rd(c) == 1.0f, "scale %g, expected 1", rd(c));
    qcclDequantize(c, 256, qcclFloat32, &s, y);
    for (int i = 0; i < 256; i++) {
      double e = (double)y[i] - x[i];
      QT_CHECK(fabs(e) < 1.0, "element %d: error %g is a step or more", i, e);
      sum[i] += e;
    }
  }
  double tot = 0, var = 0;
  for (int i = 1; i < 256; i++) {
    double f = fr[i % 8], mean = sum[i] / N, se = sqrt(f * (1 - f) / N);
    QT_CHECK(fabs(mean) <= 5 * se, "element %d (fraction %.2f): mean error %.4f, bound %.4f", i, f,
             mean, 5 * se);
    tot += sum[i];
    var += f * (1 - f) * N;
  }
  QT_CHECK(fabs(tot) <= 5 * sqrt(var), "overall mean error %.5f, bound %.5f", tot / (255.0 * N),
           5 * sqrt(var) / (255.0 * N));
  /* the same data with nearest rounding is biased: the test can see bias */
  s.rounding = qcclRoundNearest;
  qcclQuantize(x, 256, qcclFloat32, &s, c);
  qcclDequantize(c, 256, qcclFloat32, &s, y);
  double worst = 0;
  for (int i = 1; i < 256; i++) worst = fmax(worst, fabs((double)y[i] - x[i]));
  QT_CHECK(worst > 20 * sqrt(0.25 / N), "nearest rounding bias %.3g is invisible here", worst);

  /* grid values are exact */
  for (int i = 0; i < 256; i++) x[i] = (float)((i * 7) % 255 - 127);
  s = qt_spec(8, 256, 0, 1, 0, 77, 3);
  qcclQuantize(x, 256, qcclFloat32, &s, c);
  qcclDequantize(c, 256, qcclFloat32, &s, y);
  for (int i = 0; i < 256; i++) QT_CHECK(y[i] == x[i], "grid value %g became %g", x[i], y[i]);

  /* int4, asymmetric and rotated formats on random data: unbiased per element
   * against scale / (2 sqrt N), and never a step away */
  qt_rng_t r = {12345};
  const size_t n = 512;
  float* xr = (float*)qt_malloc(n * 4);
  float* yr = (float*)qt_malloc(n * 4);
  double* acc = (double*)qt_malloc(n * sizeof(double));
  for (size_t i = 0; i < n; i++) xr[i] = (float)(qt_gauss(&r) + (i % 128 == 0 ? 4 : 0));
  for (int f = 0; f < 4; f++) {
    qcclQuantSpec_t q = qt_spec(f & 1 ? 4 : 8, 128, (f >> 1) & 1, 1, 0, 0, 9);
    size_t cb;
    qcclQuantSize(n, &q, &cb);
    unsigned char* cc = (unsigned char*)qt_malloc(cb);
    memset(acc, 0, n * sizeof(double));
    const int M = 2000;
    for (int d = 1; d <= M; d++) {
      q.seed = 1000003ull * (unsigned long long)d;
      qcclQuantize(xr, n, qcclFloat32, &q, cc);
      qcclDequantize(cc, n, qcclFloat32, &q, yr);
      for (size_t i = 0; i < n; i++) acc[i] += (double)yr[i] - xr[i];
      float pb[4], mb;
      qcclQuantErrorBound(cc, n, &q, pb, &mb);
      for (size_t i = 0; i < n; i++)
        QT_CHECK(fabs((double)yr[i] - xr[i]) <= pb[i / 128], "stochastic error above its bound");
    }
    char fb[96];
    for (size_t i = 0; i < n; i++) {
      double sc = rd(cc + 4 * (i / 128));
      QT_CHECK(fabs(acc[i] / M) <= 5 * sc / (2 * sqrt(M)) + 1e-6,
               "%s element %zu: mean error %.4g, bound %.4g", qt_fmt(&q, fb, sizeof fb), i,
               acc[i] / M, 5 * sc / (2 * sqrt(M)));
    }
    free(cc);
  }

  /* reproducible; seed and rank both matter; ranks uncorrelated */
  {
    qcclQuantSpec_t a = qt_spec(8, 128, 0, 1, 0, 555, 0);
    size_t cb;
    qcclQuantSize(n, &a, &cb);
    unsigned char* c1 = (unsigned char*)qt_malloc(cb);
    unsigned char* c2 = (unsigned char*)qt_malloc(cb);
    qcclQuantize(xr, n, qcclFloat32, &a, c1);
    qcclQuantize(xr, n, qcclFloat32, &a, c2);
    QT_CHECK(memcmp(c1, c2, cb) == 0, "not reproducible for the same seed and rank");
    a.seed = 556;
    qcclQuantize(xr, n, qcclFloat32, &a, c2);
    QT_CHECK(memcmp(c1, c2, cb) != 0, "another seed draws the same");
    a.seed = 555;
    a.rank = 1;
    qcclQuantize(xr, n, qcclFloat32, &a, c2);
    QT_CHECK(memcmp(c1, c2, cb) != 0, "another rank draws the same");
    /* correlation of rounding directions between rank 0 and rank 1 */
    float y0[512], y1[512];
    double cov = 0;
    int cnt = 0;
    for (int d = 0; d < 40; d++) {
      a.seed = 900 + (unsigned long long)d;
      a.rank = 0;
      qcclQuantize(xr, n, qcclFloat32, &a, c1);
      a.rank = 1;
      qcclQuantize(xr, n, qcclFloat32, &a, c2);
      qcclDequantize(c1, n, qcclFloat32, &a, y0);
      qcclDequantize(c2, n, qcclFloat32, &a, y1);
      for (size_t i = 0; i < n; i++) {
        double sc = rd(c1 + 4 * (i / 128));
        double e0 = ((double)y0[i] - xr[i]) / sc, e1 = ((double)y1[i] - xr[i]) / sc;
        cov += e0 * e1;
        cnt++;
      }
    }
    /* |e| < 1, var <= 1/4: the mean product has sd <= 1/4 / sqrt(cnt) */
    QT_CHECK(fabs(cov / cnt) <= 5 * 0.25 / sqrt(cnt), "ranks correlated: mean product %.4f",
             cov / cnt);
    free(c1);
    free(c2);
  }
  free(xr);
  free(yr);
  free(acc);
  return qt_done("quant_stochastic");
}
