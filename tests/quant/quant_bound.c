/*
 * quant_bound - the a-priori error bound on every element, for round-to-
 * nearest, against an independent reference computed in double: per block,
 * the stored scale (and minimum) must be max|x| / qmax (or min x and
 * (max - min) / L) to f32 accuracy, and every element must satisfy
 * |x - x'| <= scale / 2 + slack, slack = 2^-19 (1 + log2 B with rotation)
 * of the block's largest magnitude, + 2^-125. With rotation the reference
 * checks qmax * scale against ||x||_2 <= max|y| <= ||x||_1. Overflow
 * blocks (|x| >= 2^126, NaN, Inf) must dequantize to NaN and nothing else
 * may. qcclQuantErrorBound must cover the measured error and stay within
 * 2x of it. All formats, B from 32 to 4096, f32 / f16 / bf16 sources,
 * through the public API. A rounding that is not to nearest fails here.
 */
#include "qtest.h"

static qt_rng_t rng;
static double worst_ratio; /* largest error / (scale / 2 + slack) seen */

static float rd(const unsigned char* p) {
  float v;
  memcpy(&v, p, 4);
  return v;
}

static int lg2(int b) {
  int l = 0;
  while ((1 << l) < b) l++;
  return l;
}

static void check(const qcclQuantSpec_t* s, qcclDataType_t t, size_t n, int shape) {
  char fb[96];
  qt_fmt(s, fb, sizeof fb);
  const size_t B = (size_t)s->block;
  const int qmax = s->mode ? (1 << s->bits) - 1 : (1 << (s->bits - 1)) - 1;
  float* x = (float*)qt_malloc(n * 4);
  qt_fill(&rng, x, n, shape, s->block);
  /* the source in its type; x becomes its exact f32 value */
  unsigned char* src = (unsigned char*)qt_malloc(n * 4);
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, x + i, 4);
    if (t == qcclFloat32) {
      memcpy(src + 4 * i, &u, 4);
      continue;
    }
    uint16_t h;
    if (t == qcclBfloat16) {
      h = (uint16_t)(u >> 16); /* truncation: any value is fine */
      u = (uint32_t)h << 16;
    } else { /* f16 by frexp; x becomes the f16 value */
      double v = x[i], a = fabs(v);
      int e;
      h = (uint16_t)(signbit(v) ? 0x8000 : 0);
      if (isnan(v)) {
        h = 0x7e00;
        a = NAN;
      } else if (isinf(v)) {
        h |= 0x7c00;
      } else if (a >= 65504.0) {
        h |= 0x7bff;
        a = 65504.0;
      } else if (a >= 0x1p-14) {
        double m = frexp(a, &e); /* a = m 2^e, m in [0.5, 1) */
        int man = (int)floor((m * 2 - 1) * 1024);
        h |= (uint16_t)(((e - 1 + 15) << 10) | man);
        a = ldexp(1 + man / 1024.0, e - 1);
      } else {
        int man = (int)floor(a * 0x1p24);
        h |= (uint16_t)man;
        a = man * 0x1p-24;
      }
      float f = (float)(v < 0 ? -a : a);
      memcpy(&u, &f, 4);
    }
    memcpy(src + 2 * i, &h, 2);
    memcpy(x + i, &u, 4);
  }
  size_t cb = 0;
  QT_CHECK(qcclQuantSize(n, s, &cb) == qcclSuccess, "size");
  unsigned char* c = (unsigned char*)qt_malloc(cb);
  float* y = (float*)qt_malloc(n * 4);
  QT_CHECK(qcclQuantize(src, n, t, s, c) == qcclSuccess, "quantize: %s", qcclGetLastError(NULL));
  QT_CHECK(qcclDequantize(c, n, qcclFloat32, s, y) == qcclSuccess, "dequantize");
  size_t nb = (n + B - 1) / B;
  float* bound = (float*)qt_malloc(nb * 4);
  float maxb = 0;
  QT_CHECK(qcclQuantErrorBound(c, n, s, bound, &maxb) == qcclSuccess, "bound");
  double lgb = s->rotate ? 1 + lg2(s->block) : 1;
  for (size_t b = 0; b < nb; b++) {
    size_t first = b * B, nr = n - first < B ? n - first : B;
    double m = 0, mn = INFINITY, mx = -INFINITY, l1 = 0, l2 = 0;
    int bad = 0;
    for (size_t i = first; i < first + nr; i++) {
      double v = x[i];
      if (!isfinite(v)) bad = 1;
      m = fmax(m, fabs(v));
      mn = fmin(mn, v);
      mx = fmax(mx, v);
      l1 += fabs(v);
      l2 += v * v;
    }
    l2 = sqrt(l2);
    float scale = rd(c + 4 * b);
    float lo = s->mode ? rd(c + 4 * (nb + b)) : 0.0f;
    int overflow = bad || m >= 0x1p126 || (s->rotate && l2 >= 0x1p126);
    int maybe = s->rotate && !overflow && l1 >= 0x1p126; /* depends on the signs */
    if (isnan(scale)) {
      QT_CHECK(overflow || maybe, "%s: block %zu (max %g) is an overflow block", fb, b, m);
      for (size_t i = first; i < first + nr; i++)
        QT_CHECK(isnan(y[i]), "%s: element %zu of an overflow block is %g", fb, i, y[i]);
      QT_CHECK(isnan(bound[b]), "%s: bound of an overflow block is %g", fb, bound[b]);
      continue;
    }
    QT_CHECK(!overflow, "%s: block %zu (max %g) should be an overflow block", fb, b, m);
    /* the scale, independently */
    double top;
    if (s->rotate) {
      double my = qmax * (double)scale;
      if (!s->mode)
        QT_CHECK(my >= l2 * (1 - 1e-5) - 1e-37 && my <= l1 * (1 + 1e-5) + 1e-37,
                 "%s: block %zu: qmax*scale %g outside [||x||2 %g, ||x||1 %g]", fb, b, my, l2, l1);
      top = s->mode ? fabs((double)lo) + qmax * (double)scale : my;
    } else if (!s->mode) {
      double ref = m / qmax;
      QT_CHECK(fabs(scale - ref) <= ref * 0x1p-23 + 0x1p-149,
               "%s: block %zu: scale %.9g, max|x|/qmax %.9g", fb, b, scale, ref);
      top = m;
    } else {
      QT_CHECK((double)lo == mn, "%s: block %zu: min %.9g, reference %.9g", fb, b, lo, mn);
      double ref = (mx - mn) / qmax;
      QT_CHECK(fabs(scale - ref) <= ref * 0x1p-22 + 0x1p-149,
               "%s: block %zu: scale %.9g, (max-min)/L %.9g", fb, b, scale, ref);
      top = fmax(fabs(mn), fabs(mx));
    }
    double allow = (double)scale / 2 + 0x1p-19 * lgb * top + 0x1p-125;
    double worst = 0;
    for (size_t i = first; i < first + nr; i++) {
      double e = fabs((double)x[i] - (double)y[i]);
      worst = fmax(worst, e);
      if (!(e <= allow)) {
        QT_FAIL("%s n=%zu: element %zu: x %.9g x' %.9g error %.3g > scale/2 + slack %.3g", fb, n, i,
                x[i], y[i], e, allow);
        break;
      }
    }
    if (allow > 0) worst_ratio = fmax(worst_ratio, worst / allow);
    QT_CHECK(bound[b] >= worst, "%s: block %zu: qcclQuantErrorBound %.3g < measured %.3g", fb, b,
             bound[b], worst);
    QT_CHECK(bound[b] <= 2 * allow, "%s: block %zu: qcclQuantErrorBound %.3g is loose (%.3g)", fb,
             b, bound[b], allow);
    QT_CHECK(maxb >= bound[b] || isnan(maxb), "%s: max bound %g < block bound %g", fb, maxb,
             bound[b]);
  }
  free(x);
  free(src);
  free(c);
  free(y);
  free(bound);
}

int main(void) {
  rng.s = qt_seed("quant_bound");
  const int blocks[5] = {32, 128, 256, 1024, 4096};
  const qcclDataType_t types[3] = {qcclFloat32, qcclFloat16, qcclBfloat16};
  int cases = 0;
  for (int f = 0; f < 8; f++) {
    for (int bi = 0; bi < 5; bi++) {
      qcclQuantSpec_t s =
          qt_spec(f & 1 ? 4 : 8, blocks[bi], (f >> 1) & 1, 0, (f >> 2) & 1, qt_next(&rng), 0);
      for (int shape = 0; shape < QT_NSHAPES; shape++) {
        size_t n = (size_t)blocks[bi] * (3 + qt_next(&rng) % 20) + qt_next(&rng) % 100;
        check(&s, types[(size_t)(shape + bi) % 3], n, shape);
        cases++;
      }
    }
  }
  printf("quant_bound: %d cases, worst error / (scale/2 + slack) = %.4f\n", cases, worst_ratio);
  QT_CHECK(worst_ratio > 0.9, "the error never came near scale/2 (%.3f): the test is too weak",
           worst_ratio);
  return qt_done("quant_bound");
}
