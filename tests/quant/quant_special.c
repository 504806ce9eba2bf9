/*
 * quant_special - special blocks and the exact bytes of wire format v1:
 *  - golden chunks computed here by hand (int8 and int4, symmetric and
 *    asymmetric): header, padding, codes, nibble order;
 *  - chunk sizes against the layout formula, for many (n, B, bits, mode,
 *    rotation), and zero padding;
 *  - zero blocks (+0 and -0), constant blocks, tiny and subnormal blocks;
 *  - NaN, +Inf, -Inf and |x| >= 2^126 make an overflow block: scale (and
 *    minimum) NaN, codes 0, every element NaN in f32 / f16 / bf16, the error
 *    bound NaN, dequantize-accumulate NaN; neighbouring blocks unaffected;
 *  - the largest value below 2^126 is not an overflow.
 * Runs on the default implementation (QCCL_QUANT_ISA to pick another).
 */
#include "qtest.h"
#include "quant/quant.h"

static float rd(const unsigned char* p) {
  float v;
  memcpy(&v, p, 4);
  return v;
}

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static void golden(void) {
  /* int8 symmetric, B = 32, x = 0..31: m = 31, scale = 31/127, codes
   * round(i * 127 / 31) (no ties: 127 and 31 are coprime) */
  float x[40];
  for (int i = 0; i < 40; i++) x[i] = (float)i;
  qcclQuantSpec_t s = qt_spec(8, 32, 0, 0, 0, 0, 0);
  unsigned char c[256];
  size_t cb = 0;
  qcclQuantSize(32, &s, &cb);
  QT_CHECK(cb == 48, "int8 sym 32 elements: %zu bytes, expected 16 + 32", cb);
  memset(c, 0xee, sizeof c);
  QT_CHECK(qcclQuantize(x, 32, qcclFloat32, &s, c) == qcclSuccess, "quantize");
  QT_CHECK(bits_of(rd(c)) == bits_of(31.0f / 127.0f), "scale %.9g", rd(c));
  for (int i = 4; i < 16; i++) QT_CHECK(c[i] == 0, "header padding byte %d is 0x%02x", i, c[i]);
  for (int i = 0; i < 32; i++) {
    int q = (int)lround(i * 127.0 / 31.0);
    QT_CHECK(c[16 + i] == (unsigned char)q, "int8 code %d: 0x%02x, expected 0x%02x", i, c[16 + i],
             q);
  }
  QT_CHECK(c[48] == 0xee, "wrote past the chunk");

  /* the same, negated: two's complement codes */
  float xn[32];
  for (int i = 0; i < 32; i++) xn[i] = -(float)i;
  qcclQuantize(xn, 32, qcclFloat32, &s, c);
  for (int i = 0; i < 32; i++) {
    int q = -(int)lround(i * 127.0 / 31.0);
    QT_CHECK(c[16 + i] == (unsigned char)(signed char)q, "negative code %d: 0x%02x", i, c[16 + i]);
  }

  /* int4 symmetric, 33 elements (two blocks): block 0 codes round(i*7/31),
   * element 2i low nibble; block 1 holds x = 32 alone: code 7, high nibble 0 */
  s = qt_spec(4, 32, 0, 0, 0, 0, 0);
  qcclQuantSize(33, &s, &cb);
  QT_CHECK(cb == 48, "int4 sym 33 elements: %zu bytes, expected 16 + 17 -> 48", cb);
  memset(c, 0xee, sizeof c);
  qcclQuantize(x, 33, qcclFloat32, &s, c);
  QT_CHECK(bits_of(rd(c)) == bits_of(31.0f / 7.0f) && bits_of(rd(c + 4)) == bits_of(32.0f / 7.0f),
           "int4 scales %.9g %.9g", rd(c), rd(c + 4));
  for (int i = 8; i < 16; i++) QT_CHECK(c[i] == 0, "header padding byte %d", i);
  for (int i = 0; i < 16; i++) {
    int lo = (int)lround(2 * i * 7.0 / 31.0), hi = (int)lround((2 * i + 1) * 7.0 / 31.0);
    QT_CHECK(c[16 + i] == (unsigned char)(lo | hi << 4), "int4 byte %d: 0x%02x, expected 0x%02x", i,
             c[16 + i], lo | hi << 4);
  }
  QT_CHECK(c[32] == 0x07, "int4 last byte 0x%02x, expected 0x07 (unused nibble 0)", c[32]);
  for (int i = 33; i < 48; i++) QT_CHECK(c[i] == 0, "tail padding byte %d is 0x%02x", i, c[i]);
  QT_CHECK(c[48] == 0xee, "wrote past the chunk");
  /* negative int4: -3 is 0xd */
  float xs[32] = {0};
  xs[0] = -3.0f;
  xs[1] = 7.0f;
  qcclQuantize(xs, 32, qcclFloat32, &s, c);
  QT_CHECK(c[16] == 0x7d, "int4 pair (-3, 7): 0x%02x, expected 0x7d", c[16]);

  /* asymmetric int8: x = -1 + i/8: lo = -1, scale = (31/8)/255, codes
   * round(i/8 * 255 / (31/8)) = round(i * 255 / 31) */
  float xa[32];
  for (int i = 0; i < 32; i++) xa[i] = -1.0f + (float)i / 8.0f;
  s = qt_spec(8, 32, 1, 0, 0, 0, 0);
  qcclQuantSize(32, &s, &cb);
  QT_CHECK(cb == 48, "int8 asym 32 elements: %zu bytes", cb);
  qcclQuantize(xa, 32, qcclFloat32, &s, c);
  QT_CHECK(bits_of(rd(c)) == bits_of(3.875f / 255.0f), "asym scale %.9g", rd(c));
  QT_CHECK(rd(c + 4) == -1.0f, "asym minimum %.9g", rd(c + 4));
  for (int i = 0; i < 32; i++)
    QT_CHECK(c[16 + i] == (unsigned char)lround(i * 255.0 / 31.0), "asym code %d: %d", i,
             c[16 + i]);
}

static size_t r16(size_t v) {
  return (v + 15) / 16 * 16;
}

static void sizes(void) {
  const size_t ns[] = {0, 1, 2, 31, 32, 33, 255, 256, 257, 1000, 4095, 4096, 4097, 123457};
  for (int bits = 4; bits <= 8; bits += 4)
    for (int asym = 0; asym < 2; asym++)
      for (int rot = 0; rot < 2; rot++)
        for (int B = 32; B <= 4096; B *= 2)
          for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            size_t n = ns[k], nb = (n + (size_t)B - 1) / (size_t)B;
            size_t coded = rot ? nb * (size_t)B : n;
            size_t expect =
                n ? r16(r16(nb * 4 * (asym ? 2 : 1)) + (coded * (size_t)bits + 7) / 8) : 0;
            qcclQuantSpec_t s = qt_spec(bits, B, asym, 0, rot, 5, 0);
            size_t got = 1;
            QT_CHECK(qcclQuantSize(n, &s, &got) == qcclSuccess && got == expect,
                     "size n=%zu B=%d bits=%d asym=%d rot=%d: %zu, expected %zu", n, B, bits, asym,
                     rot, got, expect);
            s.rounding = qcclRoundStochastic;
            s.seed = 99;
            s.rank = 3;
            size_t got2 = 0;
            qcclQuantSize(n, &s, &got2);
            QT_CHECK(got2 == got, "size depends on rounding/seed/rank");
          }
}

static void special_blocks(int bits, int asym) {
  const size_t B = 64, nb = 10, n = nb * B - 5;
  float x[640];
  qt_rng_t r = {(uint64_t)(bits * 7 + asym)};
  for (size_t i = 0; i < n; i++) x[i] = (float)qt_gauss(&r);
  /* block 0: +0; 1: mixed -0/+0; 2: constant 2.5; 3: NaN; 4: +Inf; 5: -Inf;
   * 6: one element at 2^126; 7: largest float below 2^126; 8: subnormal;
   * 9: ordinary (short) */
  for (size_t i = 0; i < B; i++) {
    x[i] = 0.0f;
    x[B + i] = (i & 1) ? -0.0f : 0.0f;
    x[2 * B + i] = 2.5f;
    x[8 * B + i] = (float)(qt_gauss(&r) * 1e-41);
  }
  x[3 * B + 17] = NAN;
  x[4 * B + 3] = INFINITY;
  x[5 * B + 63] = -INFINITY;
  x[6 * B + 5] = -0x1p126f;
  x[7 * B + 9] = nextafterf(0x1p126f, 0.0f);
  qcclQuantSpec_t s = qt_spec(bits, (int)B, asym, 0, 0, 0, 0);
  unsigned char c[4096];
  size_t cb;
  qcclQuantSize(n, &s, &cb);
  QT_CHECK(qcclQuantize(x, n, qcclFloat32, &s, c) == qcclSuccess, "quantize");
  float y[640];
  uint16_t h[640], g[640];
  qcclDequantize(c, n, qcclFloat32, &s, y);
  qcclDequantize(c, n, qcclFloat16, &s, h);
  qcclDequantize(c, n, qcclBfloat16, &s, g);
  size_t hdr = r16(nb * 4 * (asym ? 2 : 1)), cbb = B * (size_t)bits / 8;
  const char* what = asym ? "asym" : "sym";
  for (size_t b = 0; b < nb; b++) {
    float sc = rd(c + 4 * b), mn = asym ? rd(c + 4 * (nb + b)) : 0.0f;
    size_t nr = b == nb - 1 ? n - b * B : B;
    int overflow = b >= 3 && b <= 6;
    if (overflow) {
      QT_CHECK(bits_of(sc) == 0x7fc00000u, "int%d %s block %zu: scale 0x%08x, expected NaN", bits,
               what, b, bits_of(sc));
      if (asym) QT_CHECK(bits_of(mn) == 0x7fc00000u, "block %zu: minimum not NaN", b);
      for (size_t i = 0; i < cbb; i++)
        QT_CHECK(c[hdr + b * cbb + i] == 0, "block %zu: overflow codes not 0", b);
      for (size_t i = b * B; i < b * B + nr; i++) {
        QT_CHECK(bits_of(y[i]) == 0x7fc00000u, "block %zu element %zu: f32 0x%08x", b, i,
                 bits_of(y[i]));
        QT_CHECK(h[i] == 0x7e00 && g[i] == 0x7fc0, "block %zu: f16 0x%04x bf16 0x%04x", b, h[i],
                 g[i]);
      }
      continue;
    }
    for (size_t i = b * B; i < b * B + nr; i++)
      QT_CHECK(!isnan(y[i]) && !isinf(y[i]), "int%d %s block %zu element %zu: %g", bits, what, b, i,
               y[i]);
    if (b <= 1) {
      QT_CHECK(bits_of(sc) == 0, "zero block %zu: scale 0x%08x", b, bits_of(sc));
      if (asym) QT_CHECK(bits_of(mn) == 0, "zero block %zu: minimum 0x%08x (+0)", b, bits_of(mn));
      for (size_t i = b * B; i < (b + 1) * B; i++)
        QT_CHECK(bits_of(y[i]) == 0, "zero block %zu: element 0x%08x, expected +0", b,
                 bits_of(y[i]));
    }
    if (b == 2) {
      for (size_t i = 2 * B; i < 3 * B; i++)
        QT_CHECK(fabsf(y[i] - 2.5f) <= 2.5f * 0x1p-22f, "constant block: %.9g", y[i]);
      if (asym) QT_CHECK(sc == 0.0f && mn == 2.5f, "constant asym block: scale %g min %g", sc, mn);
    }
    if (b == 7) {
      QT_CHECK(fabsf(y[7 * B + 9] - x[7 * B + 9]) <= 0x1p126f * 0x1p-20f,
               "below-limit block: %g for %g", y[7 * B + 9], x[7 * B + 9]);
    }
    if (b == 8) {
      double m = 0;
      for (size_t i = 8 * B; i < 9 * B; i++) m = fmax(m, fabs(x[i]));
      QT_CHECK(sc > 0.0f, "subnormal block: scale %g", sc);
      for (size_t i = 8 * B; i < 9 * B; i++)
        QT_CHECK(fabs((double)x[i] - y[i]) <= sc / 2 + 0x1p-140, "subnormal block: %g for %g", y[i],
                 x[i]);
    }
  }
  /* the bound: NaN for overflow blocks and as the maximum */
  float pb[16], mb = 0;
  qcclQuantErrorBound(c, n, &s, pb, &mb);
  QT_CHECK(isnan(mb), "max bound %g with overflow blocks", mb);
  for (size_t b = 0; b < nb; b++)
    QT_CHECK(isnan(pb[b]) == (b >= 3 && b <= 6), "bound of block %zu: %g", b, pb[b]);
  /* dequantize-accumulate: overflow blocks give NaN, others add */
  float acc[640];
  for (size_t i = 0; i < n; i++) acc[i] = 1.0f;
  quant_params_t p;
  quant_params_from_spec(&s, &p);
  quant_isa_t isa;
  quant_isa_default(&isa);
  quant_dequantize_acc(isa, &p, c, n, acc);
  for (size_t i = 0; i < n; i++) {
    size_t b = i / B;
    if (b >= 3 && b <= 6)
      QT_CHECK(bits_of(acc[i]) == 0x7fc00000u, "acc of overflow block: %g", acc[i]);
    else
      QT_CHECK(acc[i] == 1.0f + y[i], "acc element %zu: %g, expected %g", i, acc[i], 1.0f + y[i]);
  }
  /* neighbours are unaffected: block 9 alone gives the same codes */
  unsigned char c2[256];
  qcclQuantize(x + 9 * B, n - 9 * B, qcclFloat32, &s, c2);
  size_t hdr2 = 16;
  QT_CHECK(memcmp(c2 + hdr2, c + hdr + 9 * cbb, ((n - 9 * B) * (size_t)bits + 7) / 8) == 0,
           "block 9 depends on its neighbours");
}

int main(void) {
  printf("quant_special: deterministic data\n");
  golden();
  sizes();
  for (int bits = 4; bits <= 8; bits += 4)
    for (int asym = 0; asym < 2; asym++) special_blocks(bits, asym);
  return qt_done("quant_special");
}
