/*
 * zero_range - the range in which the quantized reductions stay finite
 * (issue 14, item 4; docs/ZEROPP.md, "Range").
 *
 * The codec refuses blocks with |x| >= 2^126 (overflow blocks, NaN). The
 * reductions sum before they requantize (qgZ's node sums, qcclAllReduceQ's
 * gather of the reduced shard), so what holds for them is: every input
 * below 2^126 / W (2^126 / (W B) with rotation, W the number of ranks)
 * gives finite results within the error bound. At the old documented
 * limit (just below 2^126) four ranks gave Inf (ReduceScatterQ) and NaN
 * (AllReduceQ) for finite sums; this program checks the limit that holds
 * and that past it an overflow shows as NaN or Inf, never as a wrong
 * finite number.
 *
 * Under qcclrun, any W and placement. Cases (f32, Sum, 4 blocks of 256
 * per rank, random signs and magnitudes in [L/2, L) from the printed
 * seed): symmetric (int8 inside, int4 across), asymmetric int8, rotated,
 * each through qcclReduceScatterQ and qcclAllReduceQ at L = 2^126 / W x
 * (1 - 2^-10) (2^126 / (W B) rotated): every element finite and within
 * W L (1/7 + 1/127) of the f64 sum (a loose form of the analytic bound:
 * scale / 2 per rank and node, the scales at most L / 127 inside and
 * W L / 7 across); then the symmetric case at L = 2^126 (1 - 2^-10): each
 * element either non-finite or within the same bound.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mr_util.h"

#define RC 1024

static float input(uint64_t cseed, int rank, size_t i, double lim) {
  uint64_t h = mr_mix(cseed ^ ((uint64_t)rank << 40) ^ (uint64_t)i);
  double u = (double)(h >> 11) * 0x1p-53;
  double v = lim * (0.5 + 0.5 * u);
  return (float)((h & 1) ? -v : v);
}

static void run_case(mr_t* t, const char* name, int asym, int rotate, int allreduce, double lim,
                     int past) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "%s %s%s", name, allreduce ? "allreduce" : "reducescatter",
                     past ? " past the limit" : ""))
    return;
  int w = t->nranks;
  size_t total = (size_t)w * RC;
  float* in = malloc(total * sizeof *in);
  float* out = malloc(total * sizeof *out);
  for (size_t i = 0; i < total; i++) in[i] = input(c.cseed, t->rank, i, lim);
  qcclReduceScatterQConfig_t cfg = QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER;
  if (asym) {
    cfg.intra.mode = qcclQuantAsymmetric;
    cfg.inter.mode = qcclQuantAsymmetric;
    cfg.inter.bits = 8;
  }
  cfg.intra.rotate = cfg.inter.rotate = rotate;
  cfg.intra.seed = cfg.inter.seed = c.cseed;
  qcclResult_t r = allreduce
                       ? qcclAllReduceQ(in, out, total, qcclFloat32, qcclSum, &cfg, t->comm, NULL)
                       : qcclReduceScatterQ(in, out, RC, qcclFloat32, qcclSum, &cfg, t->comm, NULL);
  mr_ok_(&c, r, allreduce ? "qcclAllReduceQ" : "qcclReduceScatterQ", __FILE__, __LINE__);
  double ref_lim = rotate ? lim * 256 : lim;
  double tol = w * ref_lim * (1.0 / 7 + 1.0 / 127);
  size_t n = allreduce ? total : RC, nonfinite = 0, off = 0;
  for (size_t e = 0; r == qcclSuccess && e < n; e++) {
    size_t i = allreduce ? e : (size_t)t->rank * RC + e;
    double ref = 0;
    for (int k = 0; k < w; k++) ref += (double)input(c.cseed, k, i, lim);
    if (!isfinite(out[e])) {
      nonfinite++;
      if (!past && nonfinite == 1)
        mr_case_fail(&c, "element %zu is %g, the sum is %g (inputs below 2^126 / W)", i,
                     (double)out[e], ref);
    } else if (fabs((double)out[e] - ref) > tol) {
      if (off++ == 0)
        mr_case_fail(&c, "element %zu is %g, the sum is %g: off by more than %g", i, (double)out[e],
                     ref, tol);
    }
  }
  if (past && t->verbose)
    printf("[%d] %s: %zu of %zu elements non-finite past the limit\n", t->rank, c.name, nonfinite,
           n);
  free(in);
  free(out);
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  double lim = ldexp(1.0, 126) / t.nranks * (1 - ldexp(1.0, -10));
  for (int ar = 0; ar < 2; ar++) {
    run_case(&t, "sym", 0, 0, ar, lim, 0);
    run_case(&t, "asym8", 1, 0, ar, lim, 0);
    run_case(&t, "rotated", 0, 1, ar, lim / 256, 0);
    run_case(&t, "sym", 0, 0, ar, ldexp(1.0, 126) * (1 - ldexp(1.0, -10)), 1);
  }
  return mr_finish(&t);
}
