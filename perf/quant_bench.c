/*
 * quant_bench.c - qccl-quant-bench: speed and accuracy of the quantization
 * codec, per format, implementation (ISA) and size, on one thread.
 *
 * For each case it times quantize and dequantize (median of --reps samples
 * after one warm-up; a sample of a small size repeats the operation to
 * 64 MiB of input) and prints elements per second and bytes moved per
 * second (bytes read + bytes written), beside memcpy's bytes moved per
 * second for the same input size (2 x size per copy), whose samples
 * alternate with the codec's in the same run. Sizes are of the f32 (or f16/bf16) input: 1 MiB stays
 * in cache, 256 MiB goes to memory. --error prints the relative L2 error of every format on
 * Gaussian data and on heavy-tailed data (the same with one outlier of 20-100 sigma per 128
 * elements) beside its bytes per element.
 *
 *   qccl-quant-bench [--sizes 1M,256M] [--isa scalar,avx2,avx512]
 *                    [--formats LIST] [--type f32|f16|bf16] [--reps N]
 *                    [--offset BYTES] [--error] [--no-speed]
 * --offset misaligns the dequantized output by BYTES (default 0: 64-byte
 * aligned buffers).
 * A format reads int8|int4, sym|asym, b<B>, and optionally sr (stochastic
 * rounding) and rot (rotation), joined by ':', e.g. int4:sym:b128:rot.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fpconv.h"
#include "quant/quant.h"

#define MAX_LIST 32

typedef struct {
  quant_params_t p;
  char name[48];
} fmt_t;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int parse_format(const char* s, fmt_t* f) {
  memset(f, 0, sizeof *f);
  f->p.bits = 8;
  f->p.block = 256;
  f->p.seed = 42;
  char buf[64];
  snprintf(buf, sizeof buf, "%s", s);
  for (char* tok = strtok(buf, ":"); tok != NULL; tok = strtok(NULL, ":")) {
    if (strcmp(tok, "int8") == 0)
      f->p.bits = 8;
    else if (strcmp(tok, "int4") == 0)
      f->p.bits = 4;
    else if (strcmp(tok, "sym") == 0)
      f->p.asym = 0;
    else if (strcmp(tok, "asym") == 0)
      f->p.asym = 1;
    else if (strcmp(tok, "sr") == 0)
      f->p.stochastic = 1;
    else if (strcmp(tok, "rot") == 0)
      f->p.rotate = 1;
    else if (tok[0] == 'b' && atoi(tok + 1) > 0)
      f->p.block = atoi(tok + 1);
    else
      return -1;
  }
  snprintf(f->name, sizeof f->name, "int%d:%s:b%d%s%s", f->p.bits, f->p.asym ? "asym" : "sym",
           f->p.block, f->p.stochastic ? ":sr" : "", f->p.rotate ? ":rot" : "");
  return 0;
}

static size_t parse_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

static void* xalloc(size_t n) {
  void* p = aligned_alloc(64, (n + 63) & ~(size_t)63);
  if (p == NULL) {
    fprintf(stderr, "qccl-quant-bench: cannot allocate %zu bytes\n", n);
    exit(1);
  }
  memset(p, 0, n); /* fault the pages in */
  return p;
}

static void fill(float* x, size_t n, int heavy, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i += 2) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    double u = ((double)(s >> 11) + 1.0) * 0x1p-53;
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    double v = (double)(s >> 11) * 0x1p-53;
    double r = sqrt(-2.0 * log(u));
    double g[2] = {r * cos(6.283185307179586 * v), r * sin(6.283185307179586 * v)};
    for (int k = 0; k < 2 && i + (size_t)k < n; k++) x[i + (size_t)k] = (float)g[k];
  }
  /* heavy tails: one outlier of 20-100 sigma (random sign) per 128 elements */
  for (size_t i = 0; heavy && i + 128 <= n; i += 128) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    double o = 20.0 + 80.0 * (double)(s >> 11) * 0x1p-53;
    x[i + ((s >> 3) & 127)] = (float)((s >> 2) & 1 ? o : -o);
  }
}

static void to_type(const float* x, size_t n, qcclDataType_t t, void* out) {
  if (t == qcclFloat32) {
    memcpy(out, x, n * 4);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    uint16_t h = t == qcclFloat16 ? qccl_f32_to_f16(x[i]) : qccl_f32_to_bf16(x[i]);
    memcpy((char*)out + 2 * i, &h, 2);
  }
}

/* One timing sample: inner back-to-back runs of op (so that a sample of an
 * in-cache size lasts milliseconds), seconds per run. */
typedef struct {
  int kind; /* 0 memcpy, 1 quantize, 2 dequantize */
  quant_isa_t isa;
  const quant_params_t* p;
  qcclDataType_t type;
  size_t n, bytes;
  const void* src;
  void *chunk, *out, *cp;
} op_t;

static double sample(const op_t* o, int inner) {
  double t0 = now();
  for (int k = 0; k < inner; k++) {
    if (o->kind == 0)
      memcpy(o->cp, o->src, o->bytes);
    else if (o->kind == 1)
      quant_quantize(o->isa, o->p, o->src, o->type, o->n, o->chunk);
    else
      quant_dequantize(o->isa, o->p, o->chunk, o->n, o->type, o->out);
  }
  return (now() - t0) / inner;
}

/* memcpy, quantize and dequantize samples alternate, so that the ratios
 * compare runs made under the same conditions (a shared host drifts). */
static void speed(const fmt_t* fmts, int nf, const quant_isa_t* isas, int ni, const size_t* sizes,
                  int ns, qcclDataType_t type, int reps, size_t off) {
  size_t es = type == qcclFloat32 ? 4 : 2;
  double* t[3];
  for (int k = 0; k < 3; k++) t[k] = (double*)malloc(sizeof(double) * (size_t)reps);
  printf("%-20s %-7s %7s %8s %9s %8s %9s %8s %7s %7s\n", "format", "isa", "size", "memcpy",
         "q Gelem/s", "q GB/s", "dq Gelem/s", "dq GB/s", "q/mcpy", "dq/mcpy");
  for (int si = 0; si < ns; si++) {
    size_t bytes = sizes[si];
    size_t n = bytes / es;
    int inner = bytes >= ((size_t)64 << 20) ? 1 : (int)(((size_t)64 << 20) / bytes);
    float* x = (float*)xalloc(n * 4);
    fill(x, n, 0, 7);
    void* src = xalloc(bytes);
    to_type(x, n, type, src);
    free(x);
    void* out0 = xalloc(bytes + off);
    void* cp = xalloc(bytes);
    for (int fi = 0; fi < nf; fi++) {
      const quant_params_t* p = &fmts[fi].p;
      size_t cb = quant_chunk_bytes(p, n);
      void* chunk = xalloc(cb);
      for (int ii = 0; ii < ni; ii++) {
        op_t o = {0, isas[ii], p, type, n, bytes, src, chunk, (char*)out0 + off, cp};
        for (int k = 0; k < 3; k++) { /* warm-up */
          o.kind = k;
          sample(&o, 1);
        }
        for (int r = 0; r < reps; r++) {
          for (int k = 0; k < 3; k++) {
            o.kind = k;
            t[k][r] = sample(&o, inner);
          }
        }
        double mcpy = 2.0 * (double)bytes / median(t[0], reps) / 1e9;
        double tq = median(t[1], reps), td = median(t[2], reps);
        double moved = (double)(bytes + cb);
        char sz[32];
        if (bytes >= (1u << 20))
          snprintf(sz, sizeof sz, "%zuMiB", bytes >> 20);
        else
          snprintf(sz, sizeof sz, "%zuKiB", bytes >> 10);
        printf("%-20s %-7s %7s %8.2f %9.3f %8.2f %9.3f %8.2f %7.2f %7.2f\n", fmts[fi].name,
               quant_isa_name(isas[ii]), sz, mcpy, (double)n / tq / 1e9, moved / tq / 1e9,
               (double)n / td / 1e9, moved / td / 1e9, moved / tq / 1e9 / mcpy,
               moved / td / 1e9 / mcpy);
        fflush(stdout);
      }
      free(chunk);
    }
    free(src);
    free(out0);
    free(cp);
  }
  for (int k = 0; k < 3; k++) free(t[k]);
}

static void error_table(const fmt_t* fmts, int nf, quant_isa_t isa) {
  const size_t n = (size_t)1 << 20;
  float* x = (float*)xalloc(n * 4);
  float* y = (float*)xalloc(n * 4);
  printf("\n%-22s %10s %14s %14s\n", "format", "bytes/elem", "relL2 gauss", "relL2 heavy");
  for (int fi = 0; fi < nf; fi++) {
    const quant_params_t* p = &fmts[fi].p;
    size_t cb = quant_chunk_bytes(p, n);
    void* chunk = xalloc(cb);
    double rel[2];
    for (int heavy = 0; heavy < 2; heavy++) {
      fill(x, n, heavy, 11 + (uint64_t)heavy);
      quant_quantize(isa, p, x, qcclFloat32, n, chunk);
      quant_dequantize(isa, p, chunk, n, qcclFloat32, y);
      double num = 0, den = 0;
      for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - (double)y[i];
        num += d * d;
        den += (double)x[i] * (double)x[i];
      }
      rel[heavy] = sqrt(num / den);
    }
    printf("%-22s %10.4f %14.3e %14.3e\n", fmts[fi].name, (double)cb / (double)n, rel[0], rel[1]);
    free(chunk);
  }
  free(x);
  free(y);
}

static int split(const char* arg, char out[][48], int max) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", arg);
  int n = 0;
  for (char* tok = strtok(buf, ","); tok != NULL && n < max; tok = strtok(NULL, ","))
    snprintf(out[n++], 48, "%s", tok);
  return n;
}

static void usage(void) {
  fprintf(stderr,
          "usage: qccl-quant-bench [--sizes 1M,256M] [--isa scalar,avx2,avx512]\n"
          "       [--formats int8:sym:b256,...] [--type f32|f16|bf16] [--reps N]\n"
          "       [--offset BYTES] [--error] [--no-speed]\n");
}

int main(int argc, char** argv) {
  const char* sizes_arg = "1M,256M";
  const char* isa_arg = NULL;
  const char* fmt_arg =
      "int8:sym:b256,int8:asym:b256,int4:sym:b256,int4:asym:b128,int8:sym:b256:sr,"
      "int8:sym:b256:rot,int4:sym:b128:rot";
  const char* err_fmts =
      "int8:sym:b32,int8:sym:b128,int8:sym:b256,int8:sym:b4096,int8:asym:b256,"
      "int8:sym:b256:rot,int8:asym:b256:rot,int8:sym:b256:sr,int4:sym:b32,int4:sym:b128,"
      "int4:sym:b256,int4:sym:b4096,int4:asym:b128,int4:asym:b256,int4:sym:b32:rot,"
      "int4:sym:b128:rot,int4:sym:b256:rot,int4:asym:b128:rot,int4:asym:b256:rot,"
      "int4:sym:b256:sr";
  qcclDataType_t type = qcclFloat32;
  int reps = 7, do_err = 0, do_speed = 1;
  size_t off = 0;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--sizes") == 0 && v) {
      sizes_arg = v;
      i++;
    } else if (strcmp(a, "--isa") == 0 && v) {
      isa_arg = v;
      i++;
    } else if (strcmp(a, "--formats") == 0 && v) {
      fmt_arg = v;
      err_fmts = v;
      i++;
    } else if (strcmp(a, "--type") == 0 && v) {
      type = strcmp(v, "f16") == 0    ? qcclFloat16
             : strcmp(v, "bf16") == 0 ? qcclBfloat16
                                      : qcclFloat32;
      i++;
    } else if (strcmp(a, "--offset") == 0 && v) {
      off = (size_t)atoi(v);
      i++;
    } else if (strcmp(a, "--reps") == 0 && v) {
      reps = atoi(v);
      i++;
    } else if (strcmp(a, "--error") == 0) {
      do_err = 1;
    } else if (strcmp(a, "--no-speed") == 0) {
      do_speed = 0;
    } else {
      usage();
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  char list[MAX_LIST][48];
  fmt_t fmts[MAX_LIST], efmts[MAX_LIST];
  int nf = split(fmt_arg, list, MAX_LIST);
  for (int i = 0; i < nf; i++)
    if (parse_format(list[i], &fmts[i]) != 0) {
      fprintf(stderr, "qccl-quant-bench: bad format '%s'\n", list[i]);
      return 2;
    }
  int nef = split(err_fmts, list, MAX_LIST);
  for (int i = 0; i < nef; i++)
    if (parse_format(list[i], &efmts[i]) != 0) {
      fprintf(stderr, "qccl-quant-bench: bad format '%s'\n", list[i]);
      return 2;
    }
  size_t sizes[MAX_LIST];
  int ns = split(sizes_arg, list, MAX_LIST);
  for (int i = 0; i < ns; i++) sizes[i] = parse_size(list[i]);
  quant_isa_t isas[QUANT_ISA_COUNT];
  int ni = 0;
  for (int i = 0; i < QUANT_ISA_COUNT; i++) {
    quant_isa_t isa = (quant_isa_t)i;
    if (isa_arg != NULL && strstr(isa_arg, quant_isa_name(isa)) == NULL) continue;
    if (!quant_isa_available(isa)) {
      if (isa_arg != NULL)
        fprintf(stderr, "qccl-quant-bench: %s not available\n", quant_isa_name(isa));
      continue;
    }
    isas[ni++] = isa;
  }
  quant_isa_t best = QUANT_ISA_SCALAR;
  if (quant_isa_default(&best) != qcclSuccess) return 1;
  printf(
      "# qccl-quant-bench: one thread, %s input, median of %d, GB/s = (bytes read + written) / s\n",
      type == qcclFloat32   ? "f32"
      : type == qcclFloat16 ? "f16"
                            : "bf16",
      reps);
  if (do_speed) speed(fmts, nf, isas, ni, sizes, ns, type, reps, off);
  if (do_err) error_table(efmts, nef, best);
  return 0;
}
