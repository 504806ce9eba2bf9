/*
 * perf_quant.c - `qccl-perf quant`: the block-quantization codec alone
 * (qcclQuantize / qcclDequantize), one process, no communicator.
 *
 * For each format (the -q one, or a default set: int8 and int4, symmetric,
 * asymmetric, rotated, stochastic; blocks of 256 unless -q says) and size,
 * the input is N(0, 1) from the printed seed. Each direction gets -w
 * warm-up and -n timed calls; GB/s is the unquantized bytes (read by
 * quantize, written by dequantize) over the median call time. The error
 * columns compare the f32 dequantization with the input: maxrel is the
 * largest |x - x'| over the amax of x's block, rel_l2 is |x - x'| / |x|.
 * With -c, round-to-nearest formats without rotation must also keep every
 * element within qcclQuantErrorBound's bound of its block (#viol), and any
 * violation or non-finite output exits 1.
 *
 * The codec is declared weak here: a libqccl built before it landed still
 * links, and this mode then skips (exit 77).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

#pragma weak qcclQuantSize
#pragma weak qcclQuantize
#pragma weak qcclDequantize
#pragma weak qcclQuantErrorBound

static const perf_quant_opt_t perf_quant_defaults[] = {
    {1, 8, 256, 0, 0, 0}, {1, 4, 256, 0, 0, 0}, {1, 8, 256, 1, 0, 0}, {1, 4, 256, 1, 0, 0},
    {1, 8, 256, 0, 1, 0}, {1, 4, 256, 0, 1, 0}, {1, 8, 256, 0, 0, 1}, {1, 4, 256, 0, 0, 1},
};

typedef struct {
  double q_med_us, d_med_us;
  double maxrel, rel_l2, bound;
  size_t viol, nonfinite, wire;
} perf_quant_row_t;

static uint64_t pq_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* N(0, 1) by Box-Muller from the splitmix64 stream of seed. */
static void pq_fill_normal(float* x, size_t n, uint64_t seed) {
  const double two_pi = 6.283185307179586;
  for (size_t i = 0; i < n; i += 2) {
    uint64_t h1 = pq_mix(seed + 0x9E3779B97F4A7C15ull * (i + 1));
    uint64_t h2 = pq_mix(seed + 0x9E3779B97F4A7C15ull * (i + 2));
    double u1 = ((double)(h1 >> 11) + 1.0) * 0x1.0p-53, u2 = (double)(h2 >> 11) * 0x1.0p-53;
    double r = sqrt(-2.0 * log(u1));
    x[i] = (float)(r * cos(two_pi * u2));
    if (i + 1 < n) x[i + 1] = (float)(r * sin(two_pi * u2));
  }
}

static int pq_cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double pq_median(double* t, int n) {
  qsort(t, (size_t)n, sizeof *t, pq_cmp);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static qcclQuantSpec_t pq_spec(const perf_quant_opt_t* q, uint64_t seed) {
  qcclQuantSpec_t s = QCCL_QUANT_SPEC_INITIALIZER;
  s.bits = q->bits;
  s.block = q->block;
  s.mode = q->asym ? qcclQuantAsymmetric : qcclQuantSymmetric;
  s.rounding = q->stochastic ? qcclRoundStochastic : qcclRoundNearest;
  s.rotate = q->rotate;
  s.seed = seed;
  s.rank = 0;
  return s;
}

/* Error of the f32 dequantization y of x against the per-block bounds. */
static void pq_errors(const float* x, const float* y, size_t n, int block, const float* bounds,
                      int use_bounds, perf_quant_row_t* row) {
  double num = 0, den = 0;
  for (size_t b0 = 0; b0 < n; b0 += (size_t)block) {
    size_t b1 = b0 + (size_t)block < n ? b0 + (size_t)block : n;
    double amax = 0;
    for (size_t i = b0; i < b1; i++) amax = fmax(amax, fabs(x[i]));
    /* the bound, plus one f32 rounding of the result */
    double lim = use_bounds ? bounds[b0 / (size_t)block] * (1 + 0x1p-20) + amax * 0x1p-23 : 0;
    for (size_t i = b0; i < b1; i++) {
      double e = fabs((double)x[i] - (double)y[i]);
      if (!isfinite(y[i])) row->nonfinite++;
      if (amax > 0) row->maxrel = fmax(row->maxrel, e / amax);
      if (use_bounds && e > lim) row->viol++;
      num += e * e;
      den += (double)x[i] * x[i];
    }
  }
  row->rel_l2 = den > 0 ? sqrt(num / den) : 0;
}

/* Times -n calls of one direction after -w warm-up ones. */
#define PQ_TIME(a, times, med, call)               \
  do {                                             \
    for (int i_ = 0; i_ < (a)->warmup; i_++)       \
      if ((res = (call)) != qcclSuccess) goto out; \
    for (int i_ = 0; i_ < (a)->iters; i_++) {      \
      double t0_ = perf_now();                     \
      if ((res = (call)) != qcclSuccess) goto out; \
      (times)[i_] = perf_now() - t0_;              \
    }                                              \
    (med) = pq_median((times), (a)->iters) * 1e6;  \
  } while (0)

static qcclResult_t pq_measure(const perf_args_t* a, const perf_quant_opt_t* q, qcclDataType_t t,
                               size_t count, perf_quant_row_t* row) {
  qcclQuantSpec_t spec = pq_spec(q, a->seed);
  size_t ts = perf_type_size(t), wire = 0,
         nblocks = (count + (size_t)q->block - 1) / (size_t)q->block;
  qcclResult_t res = qcclQuantSize(count, &spec, &wire);
  if (res != qcclSuccess) return res;
  float* x = malloc(count * sizeof(float) + 64);
  float* y = malloc(count * sizeof(float) + 64);
  void* src = malloc(count * ts + 64);
  void* dst = malloc(count * ts + 64);
  void* chunk = malloc(wire + 64);
  float* bounds = malloc(nblocks * sizeof(float) + 64);
  double* times = malloc((size_t)a->iters * sizeof(double));
  if (!x || !y || !src || !dst || !chunk || !bounds || !times) {
    res = qcclSystemError;
    fprintf(stderr, "qccl-perf quant: out of memory for %zu elements\n", count);
    goto out;
  }
  pq_fill_normal(x, count, a->seed);
  for (size_t i = 0; i < count; i++) perf_store(src, i, t, perf_round_to_type(x[i], t));
  for (size_t i = 0; i < count; i++) x[i] = (float)perf_load(src, i, t); /* what was sent */
  memset(chunk, 0, wire);
  memset(dst, 0, count * ts);
  memset(row, 0, sizeof *row);
  row->wire = wire;
  PQ_TIME(a, times, row->q_med_us, qcclQuantize(src, count, t, &spec, chunk));
  PQ_TIME(a, times, row->d_med_us, qcclDequantize(chunk, count, t, &spec, dst));
  res = qcclQuantize(src, count, t, &spec, chunk);
  if (res == qcclSuccess) res = qcclDequantize(chunk, count, qcclFloat32, &spec, y);
  float maxb = 0;
  if (res == qcclSuccess) res = qcclQuantErrorBound(chunk, count, &spec, bounds, &maxb);
  if (res != qcclSuccess) goto out;
  row->bound = maxb;
  pq_errors(x, y, count, q->block, bounds, !q->stochastic && !q->rotate, row);
out:
  free(x), free(y), free(src), free(dst), free(chunk), free(bounds), free(times);
  return res;
}

int perf_quant_main(const perf_args_t* a) {
  if (!qcclQuantSize || !qcclQuantize || !qcclDequantize || !qcclQuantErrorBound) {
    printf(
        "# skipped: the quantization codec (qcclQuantize, qcclDequantize) is not in this "
        "libqccl yet\n");
    return PERF_EXIT_SKIP;
  }
  const perf_quant_opt_t* fmts = a->quant.set ? &a->quant : perf_quant_defaults;
  size_t nfmts = a->quant.set ? 1 : sizeof perf_quant_defaults / sizeof perf_quant_defaults[0];
  printf("# qccl-perf quant: the codec alone (qcclQuantize / qcclDequantize), 1 process\n");
  printf("#  minBytes %zu maxBytes %zu warmup iters: %d iters: %d validation: %d seed 0x%llx\n",
         a->min_bytes, a->max_bytes, a->warmup, a->iters, a->check ? 1 : 0,
         (unsigned long long)a->seed);
  printf(
      "#  input N(0,1); GB/s = unquantized bytes / median call time; maxrel = max|x-x'| / "
      "block amax; rel_l2 = |x-x'|/|x|\n#\n");
  printf("# %-18s %10s %10s %8s %6s %9s %7s %9s %7s %9s %9s %9s %6s\n", "format", "size", "count",
         "type", "wire", "quant", "quant", "dequant", "dequant", "maxrel", "rel_l2", "bound",
         "#viol");
  printf("# %-18s %10s %10s %8s %6s %9s %7s %9s %7s %9s %9s %9s %6s\n", "", "(B)", "(elements)", "",
         "ratio", "(us)", "(GB/s)", "(us)", "(GB/s)", "", "", "(max)", "");
  size_t bad = 0;
  int rc = PERF_EXIT_OK;
  for (int ti = 0; ti < a->ntypes && rc == PERF_EXIT_OK; ti++) {
    qcclDataType_t t = a->types[ti];
    if (t != qcclFloat32 && t != qcclFloat16 && t != qcclBfloat16) {
      printf("# skipped: %s (the codec takes float, half, bfloat16)\n", perf_type_name(t));
      continue;
    }
    size_t ts = perf_type_size(t);
    for (size_t f = 0; f < nfmts && rc == PERF_EXIT_OK; f++) {
      char name[64];
      perf_quant_name(&fmts[f], name, sizeof name);
      for (size_t s = a->min_bytes; s <= a->max_bytes;) {
        size_t count = s / ts;
        perf_quant_row_t row;
        qcclResult_t res = count ? pq_measure(a, &fmts[f], t, count, &row) : qcclSuccess;
        if (res != qcclSuccess) {
          fprintf(stderr, "qccl-perf quant: %s %zu B %s: %s: %s\n", name, s, perf_type_name(t),
                  qcclGetErrorString(res), qcclGetLastError(NULL));
          rc = PERF_EXIT_LIBRARY;
          break;
        }
        if (count) {
          double bytes = (double)(count * ts);
          char viol[16] = "-";
          if (a->check && !fmts[f].stochastic && !fmts[f].rotate)
            snprintf(viol, sizeof viol, "%zu", row.viol);
          printf("  %-18s %10zu %10zu %8s %6.3f %9.2f %7.2f %9.2f %7.2f %9.3e %9.3e %9.3e %6s\n",
                 name, count * ts, count, perf_type_name(t), (double)row.wire / bytes, row.q_med_us,
                 bytes / 1e3 / row.q_med_us, row.d_med_us, bytes / 1e3 / row.d_med_us, row.maxrel,
                 row.rel_l2, row.bound, viol);
          if (a->check) bad += row.viol + row.nonfinite;
        }
        size_t next = a->step_factor > 1 ? s * a->step_factor : s + a->step_bytes;
        if (next <= s) break;
        s = next;
      }
    }
  }
  if (rc == PERF_EXIT_OK)
    printf("# Out of bounds values : %zu %s\n#\n", bad, bad ? "FAILED" : "OK");
  return rc != PERF_EXIT_OK ? rc : bad ? PERF_EXIT_WRONG : PERF_EXIT_OK;
}
