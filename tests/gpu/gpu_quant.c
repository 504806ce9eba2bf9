/*
 * gpu_quant - the CUDA codec kernels (libqccl_quant_cuda) against the
 * scalar C definition, byte for byte: quantize (f32, f16, bf16 sources),
 * dequantize (f32, f16, bf16), dequantize-accumulate and the fused
 * reduce-requantize with a residual, for all formats (int8/int4, sym/asym,
 * nearest/stochastic, rotation, B = 32, 64, 128, 256, 4096) and sizes 1,
 * B - 1, B + 1, primes and ~1e6, on data with special blocks, on aligned
 * device buffers and on buffers shifted off 16-byte alignment (the kernels'
 * element-wise path). Exits 77 (skip) when
 * there is no usable GPU (no driver: cudaGetDeviceCount fails, error 35).
 */
#include "../quant/qtest.h"
#include "quant/quant.h"
#include "quant/quant_cuda.h"

static qt_rng_t rng;
static int checked;

#define CU(call)                                                         \
  do {                                                                   \
    int e_ = (call);                                                     \
    if (e_ != 0) {                                                       \
      fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
              quant_cuda_error_string(e_));                              \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

static size_t tsize(qcclDataType_t t) {
  return t == qcclFloat32 ? 4 : 2;
}

/* Device buffers of a case: allocated with room for a shift of off bytes
 * (0, or 4 to leave 16-byte alignment), used at base + off. */
static size_t off;

static void* dev_alloc(size_t bytes) {
  void* d = NULL;
  CU(quant_cuda_malloc(&d, bytes + off + 16));
  return (char*)d + off;
}

static void dev_free(void* d) {
  quant_cuda_free((char*)d - off);
}

static void* dev_copy(const void* h, size_t bytes) {
  void* d = dev_alloc(bytes);
  if (bytes) CU(quant_cuda_memcpy(d, h, bytes, 0));
  return d;
}

static void host_get(void* h, const void* d, size_t bytes) {
  CU(quant_cuda_sync());
  if (bytes) CU(quant_cuda_memcpy(h, d, bytes, 1));
}

static void compare(const quant_params_t* p, const char* what, const void* ref, const void* got,
                    size_t bytes, size_t n, qcclDataType_t t) {
  long d = qt_first_diff(ref, got, bytes);
  checked++;
  if (d >= 0)
    QT_FAIL(
        "cuda %s: int%d %s B=%d %s%s n=%zu type=%d shift=%zu: first differing byte %ld (0x%02x vs "
        "0x%02x)",
        what, p->bits, p->asym ? "asym" : "sym", p->block, p->stochastic ? "stochastic" : "nearest",
        p->rotate ? " rotated" : "", n, (int)t, off, d, ((const unsigned char*)ref)[d],
        ((const unsigned char*)got)[d]);
}

static void one_case(const quant_params_t* p, qcclDataType_t t, size_t n, int shape) {
  size_t es = tsize(t), cb = quant_chunk_bytes(p, n), ne = quant_coded_elems(p, n);
  float* x = (float*)qt_malloc(n * 4);
  qt_fill(&rng, x, n, shape, p->block);
  unsigned char* src = (unsigned char*)qt_malloc(n * es);
  for (size_t i = 0; i < n; i++) { /* any fixed narrowing: both sides see the same bits */
    uint32_t u;
    memcpy(&u, x + i, 4);
    if (t == qcclFloat32)
      memcpy(src + 4 * i, &u, 4);
    else {
      uint16_t h = (uint16_t)(u >> 16);
      memcpy(src + 2 * i, &h, 2);
    }
  }
  unsigned char* ref = (unsigned char*)qt_malloc(cb);
  unsigned char* got = (unsigned char*)qt_malloc(cb);
  quant_quantize(QUANT_ISA_SCALAR, p, src, t, n, ref);
  void* dsrc = dev_copy(src, n * es);
  void* dchunk = dev_alloc(cb);
  CU(quant_cuda_memset(dchunk, 0xa5, cb));
  CU(quant_cuda_quantize(p, dsrc, t, n, dchunk, NULL));
  host_get(got, dchunk, cb);
  compare(p, "quantize", ref, got, cb, n, t);

  /* dequantize the reference chunk on the GPU */
  CU(quant_cuda_memcpy(dchunk, ref, cb, 0));
  unsigned char* hr = (unsigned char*)qt_malloc(n * 4 + 4);
  unsigned char* hg = (unsigned char*)qt_malloc(n * 4 + 4);
  void* dout = dev_alloc(n * 4 + 4);
  const qcclDataType_t outs[3] = {qcclFloat32, qcclFloat16, qcclBfloat16};
  for (int k = 0; k < 3; k++) {
    quant_dequantize(QUANT_ISA_SCALAR, p, ref, n, outs[k], hr);
    CU(quant_cuda_dequantize(p, dchunk, n, outs[k], dout, NULL));
    host_get(hg, dout, n * tsize(outs[k]));
    compare(p, "dequantize", hr, hg, n * tsize(outs[k]), n, outs[k]);
  }
  /* dequantize-accumulate */
  float* acc = (float*)hr;
  for (size_t i = 0; i < n; i++) acc[i] = (float)qt_gauss(&rng);
  CU(quant_cuda_memcpy(dout, acc, n * 4, 0));
  quant_dequantize_acc(QUANT_ISA_SCALAR, p, ref, n, acc);
  CU(quant_cuda_dequantize_acc(p, dchunk, n, (float*)dout, NULL));
  host_get(hg, dout, n * 4);
  compare(p, "dequantize_acc", hr, hg, n * 4, n, qcclFloat32);

  /* reduce-requantize of three chunks into another format, with a residual */
  quant_params_t q = *p;
  q.bits = p->bits == 8 ? 4 : 8;
  q.stochastic = !p->stochastic;
  q.index0 = 777;
  const void* hsrcs[3];
  const void* dsrcs[3];
  unsigned char* chunks[3];
  for (int k = 0; k < 3; k++) {
    chunks[k] = (unsigned char*)qt_malloc(cb);
    qt_fill(&rng, x, n, shape, p->block);
    quant_quantize(QUANT_ISA_SCALAR, p, x, qcclFloat32, n, chunks[k]);
    hsrcs[k] = chunks[k];
    dsrcs[k] = dev_copy(chunks[k], cb);
  }
  size_t ob = quant_chunk_bytes(&q, n);
  unsigned char* o0 = (unsigned char*)qt_malloc(ob);
  unsigned char* o1 = (unsigned char*)qt_malloc(ob);
  float* res = (float*)qt_malloc(ne * 4);
  float* res1 = (float*)qt_malloc(ne * 4);
  for (size_t i = 0; i < ne; i++) res[i] = (float)(qt_gauss(&rng) * 0.01);
  void* dres = dev_copy(res, ne * 4);
  void* dob = dev_alloc(ob);
  quant_reduce_requant(QUANT_ISA_SCALAR, p, hsrcs, 3, n, &q, res, o0);
  CU(quant_cuda_reduce_requant(p, dsrcs, 3, n, &q, (float*)dres, dob, NULL));
  host_get(o1, dob, ob);
  host_get(res1, dres, ne * 4);
  compare(p, "reduce_requant", o0, o1, ob, n, qcclFloat32);
  compare(p, "reduce_requant residual", res, res1, ne * 4, n, qcclFloat32);

  for (int k = 0; k < 3; k++) {
    free(chunks[k]);
    dev_free((void*)dsrcs[k]);
  }
  dev_free(dres);
  dev_free(dob);
  dev_free(dsrc);
  dev_free(dchunk);
  dev_free(dout);
  free(o0);
  free(o1);
  free(res);
  free(res1);
  free(x);
  free(src);
  free(ref);
  free(got);
  free(hr);
  free(hg);
}

int main(void) {
  int count = 0;
  int e = quant_cuda_device_count(&count);
  if (e != 0 || count < 1) {
    printf("gpu_quant: no usable GPU (%s), skipped\n",
           e != 0 ? quant_cuda_error_string(e) : "no device");
    return 77;
  }
  char name[128] = "?";
  quant_cuda_device_name(name, sizeof name);
  printf("gpu_quant: device %s\n", name);
  rng.s = qt_seed("gpu_quant");
  const int blocks[5] = {32, 64, 128, 256, 4096};
  const qcclDataType_t types[3] = {qcclFloat32, qcclFloat16, qcclBfloat16};
  for (int f = 0; f < 16; f++) {
    for (int bi = 0; bi < 5; bi++) {
      quant_params_t p;
      memset(&p, 0, sizeof p);
      p.bits = f & 1 ? 4 : 8;
      p.asym = (f >> 1) & 1;
      p.stochastic = (f >> 2) & 1;
      p.rotate = (f >> 3) & 1;
      p.block = blocks[bi];
      p.seed = qt_next(&rng);
      p.rank = (uint32_t)(qt_next(&rng) % 64);
      p.index0 = bi == 4 ? 0xfffffff0ull - 100 : qt_next(&rng) >> 24;
      const size_t B = (size_t)p.block;
      const size_t sizes[] = {1, B - 1, B + 1, 97, 4099, 3 * B + 7};
      for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int ti = 0; ti < 3; ti++) {
          off = 0;
          one_case(&p, types[ti], sizes[si], (int)((si + (size_t)ti + (size_t)f) % QT_NSHAPES));
          off = 4;
          one_case(&p, types[ti], sizes[si], (int)((si + (size_t)ti + (size_t)f + 1) % QT_NSHAPES));
        }
      off = 0;
      if (bi == 3) one_case(&p, qcclFloat32, 1000003, f % QT_NSHAPES);
    }
  }
  printf("gpu_quant: %d comparisons\n", checked);
  return qt_done("gpu_quant");
}
