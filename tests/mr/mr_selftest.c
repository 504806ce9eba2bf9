/*
 * mr_selftest - a test of the multi-rank tests' reference (mr_check_reduce),
 * run as a single process without a communicator.
 *
 * For random inputs of every dtype and op and W in 1..8 it computes what
 * a correct library may return, with plain C float/double arithmetic:
 * accumulation in f32 (f64 for Float64) in rank order 0..W-1, in reverse
 * order, and as a pairwise tree (avg: the sum divided by W), rounded once
 * to the output type. Each must be accepted: the
 * reference must not be stricter than qccl's definition. Then it checks
 * that the reference is not too loose: a result moved by one code (one unit
 * in the last place of the output type) must be rejected wherever the
 * inputs make the sum exact, and overall for most elements of each narrow
 * type; integer results off by one are always rejected.
 * Usage: mr_selftest [--seed N].
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mr_util.h"
#include "ref_fp.h"

static const ref_fmt_t* narrow_fmt(qcclDataType_t dt) {
  switch (dt) {
    case qcclFloat16:
      return REF_F16;
    case qcclBfloat16:
      return REF_BF16;
    case qcclFloat8e4m3:
      return REF_E4M3;
    case qcclFloat8e5m2:
      return REF_E5M2;
    default:
      return NULL;
  }
}

static double to_value(qcclDataType_t dt, uint64_t bits) {
  if (dt == qcclFloat32) {
    float f;
    uint32_t u = (uint32_t)bits;
    memcpy(&f, &u, 4);
    return f;
  }
  if (dt == qcclFloat64) {
    double d;
    memcpy(&d, &bits, 8);
    return d;
  }
  return ref_decode(narrow_fmt(dt), (uint32_t)bits);
}

static uint64_t from_value(qcclDataType_t dt, double v) {
  if (dt == qcclFloat32) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
  }
  if (dt == qcclFloat64) {
    uint64_t u;
    memcpy(&u, &v, 8);
    return u;
  }
  return ref_encode(narrow_fmt(dt), v);
}

/* the accumulation, in float (or double for Float64), by one of 4 schemes */
static double model(qcclDataType_t dt, qcclRedOp_t op, int W, const double* x, int scheme) {
  if (dt == qcclFloat64) {
    double a = x[0];
    for (int i = 1; i < W; i++) {
      double v = scheme == 1 ? x[W - 1 - i] : x[i];
      if (i == 1 && scheme == 1) a = x[W - 1];
      switch (op) {
        case qcclProd:
          a *= v;
          break;
        case qcclMax:
          a = (isnan(a) || isnan(v)) ? NAN : (v > a ? v : a);
          break;
        case qcclMin:
          a = (isnan(a) || isnan(v)) ? NAN : (v < a ? v : a);
          break;
        default:
          a += v;
      }
    }
    return op == qcclAvg ? a / W : a;
  }
  float xs[64];
  for (int i = 0; i < W; i++) xs[i] = (float)x[i];
  if (scheme == 2 && (op == qcclSum || op == qcclAvg || op == qcclProd)) {
    /* pairwise tree */
    int n = W;
    while (n > 1) {
      int h = (n + 1) / 2;
      for (int i = 0; i + h < n; i++)
        xs[i] = op == qcclProd ? xs[i] * xs[i + h] : xs[i] + xs[i + h];
      n = h;
    }
    return op == qcclAvg ? xs[0] / (float)W : xs[0];
  }
  if (scheme == 1)
    for (int i = 0; i < W / 2; i++) {
      float tmp = xs[i];
      xs[i] = xs[W - 1 - i];
      xs[W - 1 - i] = tmp;
    }
  float a = xs[0];
  for (int i = 1; i < W; i++) {
    float v = xs[i];
    switch (op) {
      case qcclProd:
        a *= v;
        break;
      case qcclMax:
        a = (isnan(a) || isnan(v)) ? NAN : (v > a ? v : a);
        break;
      case qcclMin:
        a = (isnan(a) || isnan(v)) ? NAN : (v < a ? v : a);
        break;
      default:
        a += v;
    }
  }
  return op == qcclAvg ? a / (float)W : a;
}

static uint64_t int_model(qcclDataType_t dt, qcclRedOp_t op, int W, const uint64_t* in) {
  /* via C's own signed/unsigned types of each width */
  int64_t s = 0;
  uint64_t a = 0;
  for (int i = 0; i < W; i++) {
    int64_t v;
    switch (dt) {
      case qcclInt8:
        v = (int8_t)(uint8_t)in[i];
        break;
      case qcclInt32:
        v = (int32_t)(uint32_t)in[i];
        break;
      case qcclInt64:
        v = (int64_t)in[i];
        break;
      default:
        v = 0;
    }
    int sgn = dt == qcclInt8 || dt == qcclInt32 || dt == qcclInt64;
    if (i == 0) {
      s = v;
      a = in[i];
      continue;
    }
    switch (op) {
      case qcclSum:
        a += in[i];
        break;
      case qcclProd:
        a *= in[i];
        break;
      case qcclMax:
        if (sgn ? v > s : in[i] > a) a = in[i], s = v;
        break;
      default:
        if (sgn ? v < s : in[i] < a) a = in[i], s = v;
        break;
    }
  }
  size_t es = mr_dt_size(dt);
  return es == 8 ? a : a & ((1ull << (8 * es)) - 1);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_parse(&t, argc, argv);
  printf("mr_selftest: seed=%" PRIu64 " (replay: %s --seed %" PRIu64 ")\n", t.seed, argv[0],
         t.seed);
  long failures = 0;
  char why[768];
  for (int dt = 0; dt < qcclNumTypes; dt++) {
    for (int op = 0; op < qcclNumOps; op++) {
      if (!mr_op_valid((qcclDataType_t)dt, (qcclRedOp_t)op)) continue;
      long checked = 0, off_rejected = 0, off_tried = 0, accept_fail = 0;
      for (int W = 1; W <= 8; W++) {
        for (int kind = 0; kind < 2; kind++) {
          uint64_t cseed = mr_mix(t.seed ^ (uint64_t)(dt * 1000 + op * 100 + W * 10 + kind));
          for (size_t i = 0; i < 1500; i++) {
            uint64_t in[8];
            double x[8];
            for (int r = 0; r < W; r++) {
              in[r] = mr_gen((qcclDataType_t)dt, (qcclRedOp_t)op, kind, cseed, r, W, i);
              x[r] = mr_dt_is_float((qcclDataType_t)dt) ? to_value((qcclDataType_t)dt, in[r]) : 0;
            }
            checked++;
            if (!mr_dt_is_float((qcclDataType_t)dt)) {
              uint64_t good = int_model((qcclDataType_t)dt, (qcclRedOp_t)op, W, in);
              if (!mr_check_reduce((qcclDataType_t)dt, (qcclRedOp_t)op, W, in, good, why,
                                   sizeof why)) {
                if (accept_fail++ < 3) printf("FAIL rejected a correct result: %s\n", why);
              }
              off_tried++;
              uint64_t bad = good ^ 1;
              if (!mr_check_reduce((qcclDataType_t)dt, (qcclRedOp_t)op, W, in, bad, why,
                                   sizeof why))
                off_rejected++;
              continue;
            }
            int nschemes = 3;
            uint64_t first = 0;
            for (int sch = 0; sch < nschemes; sch++) {
              double y = model((qcclDataType_t)dt, (qcclRedOp_t)op, W, x, sch);
              uint64_t good = from_value((qcclDataType_t)dt, y);
              if (sch == 0) first = good;
              if (!mr_check_reduce((qcclDataType_t)dt, (qcclRedOp_t)op, W, in, good, why,
                                   sizeof why)) {
                if (accept_fail++ < 3)
                  printf("FAIL rejected a correct result (W=%d scheme %d): %s\n", W, sch, why);
              }
            }
            /* one code off (towards zero and away), when that is a
             * different finite value */
            double y0 = to_value((qcclDataType_t)dt, first);
            if (isnan(y0) || isinf(y0) || y0 == 0) continue;
            for (int d = -1; d <= 1; d += 2) {
              uint64_t bad = first + (uint64_t)(int64_t)d;
              double yb = to_value((qcclDataType_t)dt, bad);
              if (isnan(yb) || isinf(yb) || yb == y0) continue;
              off_tried++;
              if (!mr_check_reduce((qcclDataType_t)dt, (qcclRedOp_t)op, W, in, bad, why,
                                   sizeof why))
                off_rejected++;
            }
          }
        }
      }
      double rej = off_tried ? (double)off_rejected / (double)off_tried : 1.0;
      /* how often a one-code error must be caught: always for integers and
       * max/min; for the narrow types nearly always (their sums are mostly
       * exact in f32); for f32/f64 a one-ulp error hides inside the
       * accumulation bound of most multi-rank sums, so only W = 1 and some
       * lucky elements catch it (about 19% measured). */
      double need = 1.0;
      if (mr_dt_is_float((qcclDataType_t)dt) && op != qcclMax && op != qcclMin)
        need = (dt == qcclFloat32 || dt == qcclFloat64) ? 0.1 : 0.9;
      int ok = accept_fail == 0 && rej >= need;
      printf(
          "%s %-8s %-4s: %ld elements, %ld correct results rejected, one-code errors caught "
          "%.1f%% (need %.0f%%)\n",
          ok ? "ok  " : "FAIL", mr_dt_name((qcclDataType_t)dt), mr_op_name((qcclRedOp_t)op),
          checked, accept_fail, 100 * rej, 100 * need);
      if (!ok) failures++;
    }
  }
  printf("mr_selftest: %s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
