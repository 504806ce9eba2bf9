/*
 * gpu_quant_bench - speed of the CUDA codec kernels: per format and size,
 * quantize and dequantize in elements per second and bytes moved per second
 * (bytes read + written), beside cudaMemcpy device-to-device's bytes moved
 * per second (2 x size per copy) measured in the same run. Medians of
 * --reps timed runs (CUDA events) after a warm-up. Exits 77 without a GPU.
 *
 *   qccl-gpu-quant-bench [--sizes 64M,1G] [--reps N]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/quant_cuda.h"

#define CU(call)                                                                                  \
  do {                                                                                            \
    int e_ = (call);                                                                              \
    if (e_ != 0) {                                                                                \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, quant_cuda_error_string(e_)); \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

static int cmp_float(const void* a, const void* b) {
  float x = *(const float*)a, y = *(const float*)b;
  return x < y ? -1 : x > y;
}

static float median(float* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_float);
  return v[n / 2];
}

typedef struct {
  const char* name;
  int bits, block, asym, sr, rotate;
} fmt_t;

static const fmt_t fmts[] = {
    {"int8:sym:b256", 8, 256, 0, 0, 0},     {"int8:asym:b256", 8, 256, 1, 0, 0},
    {"int4:sym:b256", 4, 256, 0, 0, 0},     {"int4:asym:b128", 4, 128, 1, 0, 0},
    {"int8:sym:b256:sr", 8, 256, 0, 1, 0},  {"int8:sym:b256:rot", 8, 256, 0, 0, 1},
    {"int4:sym:b128:rot", 4, 128, 0, 0, 1}, {"int8:sym:b4096", 8, 4096, 0, 0, 0},
    {"int8:sym:b32", 8, 32, 0, 0, 0},
};

static size_t parse_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  if (*end == 'K') v *= 1024;
  if (*end == 'M') v *= 1024 * 1024;
  if (*end == 'G') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

int main(int argc, char** argv) {
  const char* sizes_arg = "64M,1G";
  int reps = 21;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--sizes") == 0)
      sizes_arg = argv[i + 1];
    else if (strcmp(argv[i], "--reps") == 0)
      reps = atoi(argv[i + 1]);
  }
  if (reps < 1) reps = 1;
  int count = 0;
  int e = quant_cuda_device_count(&count);
  if (e != 0 || count < 1) {
    printf("qccl-gpu-quant-bench: no usable GPU (%s)\n",
           e ? quant_cuda_error_string(e) : "no device");
    return 77;
  }
  char dev[128] = "?";
  quant_cuda_device_name(dev, sizeof dev);
  printf("# qccl-gpu-quant-bench on %s, f32 input, median of %d, GB/s = (read + written) / s\n",
         dev, reps);
  printf("%-20s %8s %10s %10s %10s %10s %10s %7s %7s\n", "format", "size", "D2D GB/s", "q Gelem/s",
         "q GB/s", "dq Gelem/s", "dq GB/s", "q/D2D", "dq/D2D");
  float* t = (float*)malloc(sizeof(float) * (size_t)reps);
  char buf[256];
  snprintf(buf, sizeof buf, "%s", sizes_arg);
  for (char* tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
    size_t bytes = parse_size(tok), n = bytes / 4;
    void *src, *out, *cp, *chunk;
    CU(quant_cuda_malloc(&src, bytes));
    CU(quant_cuda_malloc(&out, bytes));
    CU(quant_cuda_malloc(&cp, bytes));
    CU(quant_cuda_malloc(&chunk, bytes / 2 + (1 << 20)));
    /* Gaussian-ish data made on the host once */
    float* h = (float*)malloc(bytes);
    uint64_t s = 1;
    for (size_t i = 0; i < n; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      h[i] = (float)((int32_t)(s >> 32)) * 0x1p-31f;
    }
    CU(quant_cuda_memcpy(src, h, bytes, 0));
    free(h);
    CU(quant_cuda_memcpy(cp, src, bytes, 2));
    for (int r = 0; r < reps; r++) {
      CU(quant_cuda_timer_start());
      CU(quant_cuda_memcpy(cp, src, bytes, 2));
      CU(quant_cuda_timer_stop(&t[r]));
    }
    double d2d = 2.0 * (double)bytes / (median(t, reps) * 1e-3) / 1e9;
    for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++) {
      quant_params_t p;
      memset(&p, 0, sizeof p);
      p.bits = fmts[fi].bits;
      p.block = fmts[fi].block;
      p.asym = fmts[fi].asym;
      p.stochastic = fmts[fi].sr;
      p.rotate = fmts[fi].rotate;
      p.seed = 42;
      size_t cb = quant_chunk_bytes(&p, n);
      CU(quant_cuda_quantize(&p, src, qcclFloat32, n, chunk, NULL));
      for (int r = 0; r < reps; r++) {
        CU(quant_cuda_timer_start());
        CU(quant_cuda_quantize(&p, src, qcclFloat32, n, chunk, NULL));
        CU(quant_cuda_timer_stop(&t[r]));
      }
      double tq = median(t, reps) * 1e-3;
      CU(quant_cuda_dequantize(&p, chunk, n, qcclFloat32, out, NULL));
      for (int r = 0; r < reps; r++) {
        CU(quant_cuda_timer_start());
        CU(quant_cuda_dequantize(&p, chunk, n, qcclFloat32, out, NULL));
        CU(quant_cuda_timer_stop(&t[r]));
      }
      double td = median(t, reps) * 1e-3;
      double moved = (double)(bytes + cb);
      printf("%-20s %7zuM %10.1f %10.2f %10.1f %10.2f %10.1f %7.2f %7.2f\n", fmts[fi].name,
             bytes >> 20, d2d, (double)n / tq / 1e9, moved / tq / 1e9, (double)n / td / 1e9,
             moved / td / 1e9, moved / tq / 1e9 / d2d, moved / td / 1e9 / d2d);
      fflush(stdout);
    }
    quant_cuda_free(src);
    quant_cuda_free(out);
    quant_cuda_free(cp);
    quant_cuda_free(chunk);
  }
  free(t);
  return 0;
}
