/*
 * quant_isa_equal - every implementation (AVX2, AVX-512 where the CPU has
 * them) against the scalar definition, byte for byte: quantize, dequantize
 * (f32, f16, bf16), dequantize-accumulate and the fused reduce-requantize,
 * over all formats (int8/int4, symmetric/asymmetric, nearest/stochastic,
 * with and without rotation, B = 32, 256, 4096), sizes 0, 1, B - 1, B,
 * B + 1, primes, ~1e6 and ~8.5e6 (outputs past the non-temporal store
 * threshold, 64-byte aligned and off by 16), data with special blocks (NaN,
 * Inf, zero, constant, tiny, huge, subnormal), pointers off by 1, 4, 12.
 * Exits 77 (skip) when the CPU has no SIMD implementation.
 */
#include "qtest.h"
#include "quant/quant.h"

static qt_rng_t rng;
static int checked;

/* 64-byte aligned buffers: the offsets below decide the alignment. */
static void* abuf(size_t n) {
  void* p = aligned_alloc(64, (n + 127) / 64 * 64);
  if (p == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return p;
}

static size_t tsize(qcclDataType_t t) {
  return t == qcclFloat32 ? 4 : 2;
}

/* Narrows f32 data to type t in place of a buffer (for f16/bf16 sources). */
static void to_type(const float* x, size_t n, qcclDataType_t t, void* out) {
  if (t == qcclFloat32) {
    memcpy(out, x, n * 4);
    return;
  }
  /* any fixed narrowing works: the implementations see the same bits */
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, x + i, 4);
    uint16_t h = t == qcclBfloat16 ? (uint16_t)(u >> 16)
                                   : (uint16_t)(((u >> 16) & 0x8000u) | ((u >> 13) & 0x7fffu));
    memcpy((char*)out + 2 * i, &h, 2);
  }
}

static void compare(quant_isa_t isa, const quant_params_t* p, const char* what, const void* ref,
                    const void* got, size_t bytes, size_t n, qcclDataType_t t) {
  long d = qt_first_diff(ref, got, bytes);
  checked++;
  if (d >= 0)
    QT_FAIL("%s %s: int%d %s B=%d %s%s n=%zu type=%d: first differing byte %ld (0x%02x vs 0x%02x)",
            quant_isa_name(isa), what, p->bits, p->asym ? "asym" : "sym", p->block,
            p->stochastic ? "stochastic" : "nearest", p->rotate ? " rotated" : "", n, (int)t, d,
            ((const unsigned char*)ref)[d], ((const unsigned char*)got)[d]);
}

static void one_case(quant_isa_t isa, const quant_params_t* p, qcclDataType_t t, size_t n,
                     int shape, size_t off) {
  size_t es = tsize(t);
  size_t cb = quant_chunk_bytes(p, n);
  size_t ne = quant_coded_elems(p, n);
  float* x = (float*)abuf(n * 4 + 16);
  qt_fill(&rng, x, n, shape, p->block);
  unsigned char* src = (unsigned char*)abuf(n * es + 16);
  to_type(x, n, t, src + off);
  unsigned char* c0 = (unsigned char*)abuf(cb + 16);
  unsigned char* c1 = (unsigned char*)abuf(cb + 16);
  memset(c0, 0xa5, cb + 16);
  memset(c1, 0x5a, cb + 16);
  qcclResult_t r0 = quant_quantize(QUANT_ISA_SCALAR, p, src + off, t, n, c0 + off);
  qcclResult_t r1 = quant_quantize(isa, p, src + off, t, n, c1 + off);
  QT_CHECK(r0 == qcclSuccess && r1 == qcclSuccess, "quantize failed: %d %d", r0, r1);
  compare(isa, p, "quantize", c0 + off, c1 + off, cb, n, t);

  /* dequantize into every type, from the scalar chunk */
  unsigned char* d0 = (unsigned char*)abuf(n * 4 + 16);
  unsigned char* d1 = (unsigned char*)abuf(n * 4 + 16);
  qcclDataType_t outs[3] = {qcclFloat32, qcclFloat16, qcclBfloat16};
  for (int k = 0; k < 3; k++) {
    memset(d0, 0, n * 4 + 16);
    memset(d1, 0xff, n * 4 + 16);
    quant_dequantize(QUANT_ISA_SCALAR, p, c0 + off, n, outs[k], d0 + off);
    quant_dequantize(isa, p, c0 + off, n, outs[k], d1 + off);
    compare(isa, p, "dequantize", d0 + off, d1 + off, n * tsize(outs[k]), n, outs[k]);
  }

  /* dequantize-accumulate (acc element-aligned, not vector-aligned) */
  float* a0 = (float*)abuf(n * 4 + 16);
  float* a1 = (float*)abuf(n * 4 + 16);
  for (size_t i = 0; i < n + 4; i++) a0[i] = (float)qt_gauss(&rng);
  memcpy(a1, a0, n * 4 + 16);
  size_t ao = (off / 4) % 4;
  quant_dequantize_acc(QUANT_ISA_SCALAR, p, c0 + off, n, a0 + ao);
  quant_dequantize_acc(isa, p, c0 + off, n, a1 + ao);
  compare(isa, p, "dequantize_acc", a0, a1, n * 4 + 16, n, qcclFloat32);

  /* fused reduce-requantize of three chunks into another format, with and
   * without a residual */
  if (n < 100000) {
    quant_params_t q = *p;
    q.bits = p->bits == 8 ? 4 : 8;
    q.stochastic = !p->stochastic;
    q.index0 = 12345;
    unsigned char* ch[3];
    const void* srcs[3];
    for (int k = 0; k < 3; k++) {
      ch[k] = (unsigned char*)abuf(cb + 16);
      qt_fill(&rng, x, n, shape, p->block);
      quant_quantize(QUANT_ISA_SCALAR, p, x, qcclFloat32, n, ch[k] + off);
      srcs[k] = ch[k] + off;
    }
    size_t ob = quant_chunk_bytes(&q, n);
    unsigned char* o0 = (unsigned char*)abuf(ob + 16);
    unsigned char* o1 = (unsigned char*)abuf(ob + 16);
    float* res0 = (float*)abuf(ne * 4 + 4);
    float* res1 = (float*)abuf(ne * 4 + 4);
    for (int with_res = 0; with_res < 2; with_res++) {
      for (size_t i = 0; i < ne; i++) res0[i] = (float)(qt_gauss(&rng) * 0.01);
      memcpy(res1, res0, ne * 4);
      memset(o0, 1, ob + 16);
      memset(o1, 2, ob + 16);
      quant_reduce_requant(QUANT_ISA_SCALAR, p, srcs, 3, n, &q, with_res ? res0 : NULL, o0);
      quant_reduce_requant(isa, p, srcs, 3, n, &q, with_res ? res1 : NULL, o1);
      compare(isa, p, "reduce_requant", o0, o1, ob, n, qcclFloat32);
      if (with_res) compare(isa, p, "reduce_requant residual", res0, res1, ne * 4, n, qcclFloat32);
    }
    for (int k = 0; k < 3; k++) free(ch[k]);
    free(o0);
    free(o1);
    free(res0);
    free(res1);
  }
  free(x);
  free(src);
  free(c0);
  free(c1);
  free(d0);
  free(d1);
  free(a0);
  free(a1);
}

int main(void) {
  rng.s = qt_seed("quant_isa_equal");
  int any = 0;
  const int blocks[3] = {32, 256, 4096};
  const qcclDataType_t types[3] = {qcclFloat32, qcclFloat16, qcclBfloat16};
  const size_t offs[4] = {0, 1, 4, 12};
  for (int isa = QUANT_ISA_AVX2; isa < QUANT_ISA_COUNT; isa++) {
    if (!quant_isa_available((quant_isa_t)isa)) {
      printf("%s: not available on this CPU, skipped\n", quant_isa_name((quant_isa_t)isa));
      continue;
    }
    any = 1;
    int count = 0;
    for (int f = 0; f < 16; f++) {
      for (int bi = 0; bi < 3; bi++) {
        quant_params_t p;
        memset(&p, 0, sizeof p);
        p.bits = f & 1 ? 4 : 8;
        p.asym = (f >> 1) & 1;
        p.stochastic = (f >> 2) & 1;
        p.rotate = (f >> 3) & 1;
        p.block = blocks[bi];
        p.seed = qt_next(&rng);
        p.rank = (uint32_t)(qt_next(&rng) % 64);
        p.index0 = qt_next(&rng) % 3 == 0 ? 0xfffffff0ull - 7 : qt_next(&rng) >> 20;
        const size_t B = (size_t)p.block;
        size_t sizes[] = {0, 1, B - 1, B, B + 1, 97, 1009, 4099, 3 * B + 7};
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
          for (int ti = 0; ti < 3; ti++) {
            int shape = (int)((si + (size_t)ti + (size_t)f) % QT_NSHAPES);
            one_case((quant_isa_t)isa, &p, types[ti], sizes[si], shape, offs[count++ % 4]);
          }
        }
        /* large: ~1e6 elements, f32, B = 256, four formats */
        if (bi == 1 && (f == 0 || f == 3 || f == 5 || f == 14))
          one_case((quant_isa_t)isa, &p, qcclFloat32, 1000003, f % QT_NSHAPES, 4);
        /* past the streaming threshold, aligned and not */
        if (bi == 1 && (f == 0 || f == 7))
          one_case((quant_isa_t)isa, &p, qcclFloat32, 8500001, QT_GAUSS, f == 0 ? 0 : 16);
      }
    }
  }
  if (!any) {
    printf("quant_isa_equal: no SIMD implementation on this CPU\n");
    return 77;
  }
  printf("quant_isa_equal: %d comparisons\n", checked);
  return qt_done("quant_isa_equal");
}
