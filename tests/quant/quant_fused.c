/*
 * quant_fused - the internal fused operations against their definitions
 * composed from the public codec (default implementation):
 *  - dequantize-accumulate == acc + qcclDequantize(chunk), f32 addition,
 *    bit for bit;
 *  - reduce-requantize (no rotation) == qcclQuantize(out, ((y0 + y1) + y2))
 *    with y_j = qcclDequantize(in, chunk_j), bit for bit; with a residual r:
 *    qcclQuantize(out, sum + r) and r' = (sum + r) - qcclDequantize(out);
 *  - with rotation the sum runs in the rotated domain: the dequantized
 *    result is within the output format's bound (scale / 2, + the inputs'
 *    f32 rounding) of the sum of the dequantized inputs;
 *  - error feedback: T requantizations of the same sum with the residual
 *    average to the sum within scale / T;
 *  - an overflow input block makes an overflow output block and resets the
 *    residual; mismatched block sizes or rotation are refused.
 */
#include "qtest.h"
#include "quant/quant.h"

static qt_rng_t rng;
static quant_isa_t isa;

static quant_params_t params(const qcclQuantSpec_t* s, uint64_t index0) {
  quant_params_t p;
  quant_params_from_spec(s, &p);
  p.index0 = index0;
  return p;
}

static void compose(int f) {
  char fb[96];
  const size_t n = 1000 + qt_next(&rng) % 3000;
  const int B = 32 << (qt_next(&rng) % 5);
  qcclQuantSpec_t si = qt_spec(f & 1 ? 4 : 8, B, (f >> 1) & 1, (f >> 2) & 1, 0, qt_next(&rng), 1);
  qcclQuantSpec_t so =
      qt_spec(f & 1 ? 8 : 4, B, !((f >> 1) & 1), !((f >> 2) & 1), 0, qt_next(&rng), 2);
  qt_fmt(&si, fb, sizeof fb);
  quant_params_t pi = params(&si, 0), po = params(&so, 0);
  size_t ci, co;
  qcclQuantSize(n, &si, &ci);
  qcclQuantSize(n, &so, &co);
  float* x = (float*)qt_malloc(n * 4);
  float* sum = (float*)qt_malloc(n * 4);
  float* y = (float*)qt_malloc(n * 4);
  float* acc = (float*)qt_malloc(n * 4);
  float* r = (float*)qt_malloc(n * 4);
  float* r2 = (float*)qt_malloc(n * 4);
  unsigned char* ch[3];
  const void* srcs[3];
  for (int j = 0; j < 3; j++) {
    ch[j] = (unsigned char*)qt_malloc(ci);
    qt_fill(&rng, x, n, QT_GAUSS, B);
    qcclQuantize(x, n, qcclFloat32, &si, ch[j]);
    srcs[j] = ch[j];
    qcclDequantize(ch[j], n, qcclFloat32, &si, y);
    for (size_t i = 0; i < n; i++) sum[i] = j == 0 ? y[i] : sum[i] + y[i];
  }
  /* dequantize-accumulate */
  for (size_t i = 0; i < n; i++) acc[i] = x[i];
  quant_dequantize_acc(isa, &pi, ch[2], n, acc);
  qcclDequantize(ch[2], n, qcclFloat32, &si, y);
  for (size_t i = 0; i < n; i++)
    QT_CHECK(acc[i] == x[i] + y[i] || (isnan(acc[i]) && isnan(y[i])),
             "%s: dequantize_acc element %zu: %.9g, expected %.9g", fb, i, acc[i], x[i] + y[i]);
  /* reduce-requantize without residual */
  unsigned char* o1 = (unsigned char*)qt_malloc(co);
  unsigned char* o2 = (unsigned char*)qt_malloc(co);
  QT_CHECK(quant_reduce_requant(isa, &pi, srcs, 3, n, &po, NULL, o1) == qcclSuccess, "rr");
  qcclQuantize(sum, n, qcclFloat32, &so, o2);
  QT_CHECK(memcmp(o1, o2, co) == 0, "%s: reduce_requant differs from quantize(sum)", fb);
  /* with a residual */
  for (size_t i = 0; i < n; i++) r[i] = r2[i] = (float)(qt_gauss(&rng) * 0.01);
  quant_reduce_requant(isa, &pi, srcs, 3, n, &po, r, o1);
  for (size_t i = 0; i < n; i++) acc[i] = sum[i] + r2[i];
  qcclQuantize(acc, n, qcclFloat32, &so, o2);
  QT_CHECK(memcmp(o1, o2, co) == 0, "%s: reduce_requant with residual differs", fb);
  qcclDequantize(o2, n, qcclFloat32, &so, y);
  for (size_t i = 0; i < n; i++)
    QT_CHECK(r[i] == acc[i] - y[i], "%s: residual %zu: %.9g, expected %.9g", fb, i, r[i],
             acc[i] - y[i]);
  for (int j = 0; j < 3; j++) free(ch[j]);
  free(x);
  free(sum);
  free(y);
  free(acc);
  free(r);
  free(r2);
  free(o1);
  free(o2);
}

static void rotated(void) {
  const size_t n = 3000;
  const int B = 256;
  qcclQuantSpec_t si = qt_spec(8, B, 0, 0, 1, 4242, 0), so = qt_spec(4, B, 1, 0, 1, 4242, 0);
  quant_params_t pi = params(&si, 0), po = params(&so, 0);
  size_t ci, co;
  qcclQuantSize(n, &si, &ci);
  qcclQuantSize(n, &so, &co);
  float* x = (float*)qt_malloc(n * 4);
  float* sum = (float*)qt_malloc(n * 4);
  float* y = (float*)qt_malloc(n * 4);
  unsigned char* ch[4];
  const void* srcs[4];
  for (int j = 0; j < 4; j++) {
    ch[j] = (unsigned char*)qt_malloc(ci);
    qt_fill(&rng, x, n, QT_GAUSS, 100000);
    qcclQuantize(x, n, qcclFloat32, &si, ch[j]);
    srcs[j] = ch[j];
    qcclDequantize(ch[j], n, qcclFloat32, &si, y);
    for (size_t i = 0; i < n; i++) sum[i] = j == 0 ? y[i] : sum[i] + y[i];
  }
  unsigned char* o = (unsigned char*)qt_malloc(co);
  QT_CHECK(quant_reduce_requant(isa, &pi, srcs, 4, n, &po, NULL, o) == qcclSuccess, "rr rot");
  qcclDequantize(o, n, qcclFloat32, &so, y);
  float pb[16], mb;
  qcclQuantErrorBound(o, n, &so, pb, &mb);
  for (size_t i = 0; i < n; i++) {
    double m = 0;
    for (size_t k = i / B * B; k < (i / B + 1) * B && k < n; k++) m = fmax(m, fabs(sum[k]));
    double allow = pb[i / B] + 1e-5 * m * 8;
    QT_CHECK(fabs((double)y[i] - sum[i]) <= allow,
             "rotated reduce_requant element %zu: %.6g vs sum %.6g (allow %.3g)", i, y[i], sum[i],
             allow);
  }
  /* mismatched specs are refused */
  quant_params_t bad = po;
  bad.block = 128;
  QT_CHECK(quant_reduce_requant(isa, &pi, srcs, 4, n, &bad, NULL, o) == qcclInvalidArgument,
           "block mismatch accepted");
  bad = po;
  bad.seed = 1;
  QT_CHECK(quant_reduce_requant(isa, &pi, srcs, 4, n, &bad, NULL, o) == qcclInvalidArgument,
           "rotation seed mismatch accepted");
  bad = po;
  bad.rotate = 0;
  QT_CHECK(quant_reduce_requant(isa, &pi, srcs, 4, n, &bad, NULL, o) == qcclInvalidArgument,
           "rotation mismatch accepted");
  QT_CHECK(quant_reduce_requant(isa, &pi, srcs, 0, n, &po, NULL, o) == qcclInvalidArgument,
           "k = 0 accepted");
  for (int j = 0; j < 4; j++) free(ch[j]);
  free(x);
  free(sum);
  free(y);
  free(o);
}

static void feedback_and_overflow(void) {
  const size_t n = 512;
  const int B = 128, T = 64;
  qcclQuantSpec_t si = qt_spec(8, B, 0, 0, 0, 0, 0), so = qt_spec(4, B, 0, 0, 0, 0, 0);
  quant_params_t pi = params(&si, 0), po = params(&so, 0);
  size_t ci, co;
  qcclQuantSize(n, &si, &ci);
  qcclQuantSize(n, &so, &co);
  float x[512], y[512], r[512], target[512];
  double mean[512] = {0};
  unsigned char c[1024], o[1024];
  for (size_t i = 0; i < n; i++) x[i] = (float)qt_gauss(&rng);
  qcclQuantize(x, n, qcclFloat32, &si, c);
  qcclDequantize(c, n, qcclFloat32, &si, target);
  const void* srcs[1] = {c};
  memset(r, 0, sizeof r);
  for (int t = 0; t < T; t++) {
    quant_reduce_requant(isa, &pi, srcs, 1, n, &po, r, o);
    qcclDequantize(o, n, qcclFloat32, &so, y);
    for (size_t i = 0; i < n; i++) mean[i] += y[i];
  }
  float pb[8], mb;
  qcclQuantErrorBound(o, n, &so, pb, &mb);
  for (size_t i = 0; i < n; i++) {
    double e = fabs(mean[i] / T - target[i]);
    QT_CHECK(e <= 2.5 * pb[i / B] / T + 1e-5, "error feedback: element %zu mean error %.3g", i, e);
  }
  /* without feedback the int4 error stays at scale / 2 for some element */
  double worst = 0;
  qcclQuantize(target, n, qcclFloat32, &so, o);
  qcclDequantize(o, n, qcclFloat32, &so, y);
  for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)y[i] - target[i]));
  QT_CHECK(worst > 4 * pb[0] / T, "feedback test cannot tell (%.3g)", worst);

  /* an overflow block in one input: that block overflows, its residual is 0 */
  x[B + 3] = INFINITY;
  unsigned char c2[1024];
  qcclQuantize(x, n, qcclFloat32, &si, c2);
  const void* two[2] = {c, c2};
  for (size_t i = 0; i < n; i++) r[i] = 0.5f;
  quant_reduce_requant(isa, &pi, two, 2, n, &po, r, o);
  qcclDequantize(o, n, qcclFloat32, &so, y);
  for (size_t i = 0; i < n; i++) {
    int ov = i / B == 1;
    QT_CHECK(isnan(y[i]) == ov, "overflow propagation: element %zu is %g", i, y[i]);
    if (ov) QT_CHECK(r[i] == 0.0f, "overflow block residual %g not reset", r[i]);
  }
}

int main(void) {
  rng.s = qt_seed("quant_fused");
  if (quant_isa_default(&isa) != qcclSuccess) {
    fprintf(stderr, "quant_fused: %s\n", qcclGetLastError(NULL));
    return 1;
  }
  printf("quant_fused: implementation %s\n", quant_isa_name(isa));
  for (int f = 0; f < 8; f++)
    for (int k = 0; k < 3; k++) compose(f);
  rotated();
  feedback_and_overflow();
  return qt_done("quant_fused");
}
