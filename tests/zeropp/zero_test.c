/*
 * zero_test - the ZeRO++ collectives (qwZ, hpZ, qgZ) against an f64
 * reference and the analytic error bound of each path.
 *
 * Run as one rank under qcclrun; --placement LIST (the host of each rank,
 * as given to qcclrun; default one host) tells the reference which path
 * the library takes (two-level where hosts hold equal numbers of ranks);
 * --variant V rotates which configs run in place, with Avg, and whether
 * the int4 configs of qgZ use 4 or 8 bits inside the node (see meson.build).
 *
 * Inputs: element i of rank r is k * 2^-e with k in [-127, 127] and e in
 * 3..9 varying per 64 elements (so blocks have different scales), exact in
 * f32, f16 and bf16, a pure function of (case seed, rank, i).
 *
 * Bounds (round to nearest; stochastic rounding doubles them), for a block
 * of values v known up to +-d per element: symmetric, scale = (max|v| + d)
 * / qmax; asymmetric, scale = (max v - min v + 2d) / (2^b - 1); with
 * rotation the rotated values are bounded by sum |v| + B d (every output
 * of the unnormalized Walsh-Hadamard transform is a signed sum of the
 * block), which replaces max|v| (and twice that the range). An element's
 * error is at most scale / 2. qwZ: one hop. qgZ two-level: the sum over
 * the W ranks of their intra bounds, plus the sum over the N nodes of the
 * inter bound of the node's sum (known up to the node's intra bounds);
 * one level: the sum over ranks of one hop. Plus f32 rounding of the sums
 * and the final rounding to the output type.
 *
 * Cases: qwZ and qgZ for f32 / f16 / bf16 x six quantization configs (int8
 * / int4, sym / asym, B in {32, 256, 4096}, rotation, stochastic rounding)
 * x counts {1, 1009, 2W*37+3}, in place or out of place and Sum or Avg by
 * turns, and one large count (1048583, prime; the gather in two types); determinism (second run,
 * same bits; the gather equal on every rank); hpZ (node gather equal to the forward gather, zero
 * bytes across nodes, stale and invalidated shards refused on every rank, int8 shards);
 * qcclAllReduceQ (equal to qgZ + qwZ, in place too); group buckets (equal to the packed single
 * call); policy (plain calls quantized, counted under the quantized slot); error feedback
 * (--ef: the mean error over 100 reductions shrinks); bad arguments;
 * --bytes: inter-node bytes of qwZ / hpZ / qgZ against plain collectives
 * and the analytic volumes (printed for zero_bytes.sh).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mr_util.h"
#include "ref_fp.h"

static int g_node[64];
static int g_nnodes = 1, g_equal = 1, g_lmax = 1;
static double g_tight;             /* the largest error / bound of the case (--verbose prints it) */
static double g_bound_scale = 1.0; /* --bound-scale F: shrink the bounds (to see the test fail) */

static void parse_placement(mr_t* t) {
  const char* pl = mr_opt(t, "--placement");
  for (int r = 0; r < t->nranks; r++) g_node[r] = 0;
  if (pl != NULL) {
    int r = 0;
    for (const char* p = pl; *p && r < t->nranks; r++) {
      g_node[r] = atoi(p);
      while (*p && *p != ',') p++;
      if (*p == ',') p++;
    }
  }
  int cnt[64] = {0};
  g_nnodes = 0;
  for (int r = 0; r < t->nranks; r++) {
    cnt[g_node[r]]++;
    if (g_node[r] + 1 > g_nnodes) g_nnodes = g_node[r] + 1;
  }
  g_lmax = 0;
  for (int b = 0; b < g_nnodes; b++)
    if (cnt[b] > g_lmax) g_lmax = cnt[b];
  g_equal = 1;
  for (int b = 0; b < g_nnodes; b++) g_equal &= cnt[b] == g_lmax;
}

/* ---- data ---- */

static double gen(uint64_t cseed, int rank, size_t i) {
  uint64_t h = mr_mix(cseed ^ mr_mix((uint64_t)rank * 0x9e3779b97f4a7c15ull + i));
  int k = (int)(h % 255) - 127;
  int e = 3 + (int)(((i / 64) * 7 + (size_t)rank * 3 + (cseed & 7)) % 7);
  return ldexp((double)k, -e - 4);
}

static void store(qcclDataType_t dt, void* buf, size_t i, double x) {
  if (dt == qcclFloat32) {
    ((float*)buf)[i] = (float)x;
  } else {
    uint16_t c = (uint16_t)ref_encode(dt == qcclFloat16 ? REF_F16 : REF_BF16, x);
    memcpy((char*)buf + 2 * i, &c, 2);
  }
}

static double load(qcclDataType_t dt, const void* buf, size_t i) {
  if (dt == qcclFloat32) return ((const float*)buf)[i];
  uint16_t c;
  memcpy(&c, (const char*)buf + 2 * i, 2);
  return ref_decode(dt == qcclFloat16 ? REF_F16 : REF_BF16, c);
}

static size_t dsize(qcclDataType_t dt) {
  return dt == qcclFloat32 ? 4 : 2;
}

/* the relative half-ulp of the output type (plus a floor for tiny values) */
static double out_round(qcclDataType_t dt, double y) {
  double rel = dt == qcclFloat32 ? ldexp(1, -24) : dt == qcclFloat16 ? ldexp(1, -11) : ldexp(1, -8);
  return fabs(y) * rel + (dt == qcclFloat16 ? ldexp(1, -25) : ldexp(1, -130));
}

/* ---- quantization configs ---- */

typedef struct {
  int bits, block, asym, rot, sr;
} qcfg_t;

static const qcfg_t g_cfgs[6] = {
    {8, 256, 0, 0, 0}, {4, 32, 1, 1, 0}, {8, 4096, 1, 0, 0},
    {4, 256, 0, 1, 0}, {8, 32, 0, 1, 1}, {4, 4096, 1, 0, 0},
};

static qcclQuantSpec_t make_spec(const qcfg_t* q, int bits, uint64_t seed) {
  qcclQuantSpec_t s = QCCL_QUANT_SPEC_INITIALIZER;
  s.bits = bits;
  s.block = q->block;
  s.mode = q->asym ? qcclQuantAsymmetric : qcclQuantSymmetric;
  s.rounding = q->sr ? qcclRoundStochastic : qcclRoundNearest;
  s.rotate = q->rot;
  s.seed = seed;
  return s;
}

static const char* cfg_name(const qcfg_t* q, int bits_in, int bits, char* buf, size_t len) {
  char hop[8] = "int";
  if (bits_in) snprintf(hop, sizeof hop, "%d/", bits_in);
  snprintf(buf, len, "%s%d b%d %s%s%s", hop, bits, q->block, q->asym ? "asym" : "sym",
           q->rot ? " rot" : "", q->sr ? " sr" : "");
  return buf;
}

/* The rotation of docs/QUANT.md, written again from the text: signs from
 * the seed, then the unnormalized Walsh-Hadamard butterflies, in f64. */
static uint32_t h32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

static void rotate_block(uint64_t seed, int B, const double* v, size_t m, double* y) {
  uint32_t a = h32((uint32_t)seed ^ 0x27d4eb2fu);
  uint32_t s0 = h32((uint32_t)(seed >> 32) ^ a ^ 0x165667b1u);
  uint32_t s1 = h32(s0 ^ 0xd3a2646cu);
  for (int j = 0; j < B; j++) {
    double x = (size_t)j < m ? v[j] : 0.0;
    y[j] = (h32(h32((uint32_t)j ^ s0) ^ s1) >> 31) ? -x : x;
  }
  for (int h = 1; h < B; h *= 2)
    for (int j = 0; j < B; j++)
      if ((j & h) == 0) {
        double p = y[j], r = y[j + h];
        y[j] = p + r;
        y[j + h] = p - r;
      }
}

/* The per-element bound of one hop on a block of m values v (each known up
 * to +-d; with rotation, in the rotated domain): scale / 2 (scale for
 * stochastic rounding) plus f32 rounding. With rotation the bound holds in
 * the rotated domain, hence for the l2 norm of the block's error in the
 * original domain (H / sqrt(B) is orthonormal). */
static double hop_bound(const qcfg_t* q, int bits, uint64_t seed, const double* v, size_t m,
                        double d) {
  double mx = 0, lo = INFINITY, hi = -INFINITY, l1 = 0;
  static double y[4096];
  const double* u = v;
  size_t n = m;
  if (q->rot) {
    rotate_block(seed, q->block, v, m, y);
    u = y;
    n = (size_t)q->block;
  }
  for (size_t i = 0; i < n; i++) {
    mx = fmax(mx, fabs(u[i]));
    lo = fmin(lo, u[i]);
    hi = fmax(hi, u[i]);
    l1 += fabs(u[i]);
  }
  double scale = q->asym ? (hi - lo + 2 * d) / (double)((1 << bits) - 1)
                         : (mx + d) / (double)((1 << (bits - 1)) - 1);
  double f32 = ldexp((q->rot ? l1 : mx) + d * (q->rot ? q->block : 1), -20) * 13;
  return (q->sr ? scale : scale / 2) + f32 + 1e-30;
}

/* ---- qwZ ---- */

static void case_agq(mr_t* t, qcclDataType_t dt, const qcfg_t* q, size_t n, int inplace) {
  mr_case_t c;
  char qn[64];
  if (!mr_case_begin(t, &c, "agq %s %s n=%zu %s", mr_dt_name(dt), cfg_name(q, 0, q->bits, qn, 64),
                     n, inplace ? "inplace" : "outofplace"))
    return;
  int W = t->nranks, rank = t->rank;
  size_t es = dsize(dt);
  char* recv = malloc(n * W * es + 1);
  char* send = inplace ? recv + (size_t)rank * n * es : malloc(n * es + 1);
  for (size_t i = 0; i < n; i++) store(dt, send, i, gen(c.cseed, rank, i));
  qcclQuantSpec_t spec = make_spec(q, q->bits, c.cseed);
  MR_OK(&c, qcclAllGatherQ(send, recv, n, dt, &spec, t->comm, NULL));
  double* v = malloc(sizeof *v * (size_t)q->block);
  long bad = 0;
  for (int j = 0; j < W; j++) {
    if (n > 20000 && j != rank && j != (rank + 1) % W) continue;
    for (size_t b0 = 0; b0 < n; b0 += (size_t)q->block) {
      size_t m = n - b0 < (size_t)q->block ? n - b0 : (size_t)q->block;
      for (size_t k = 0; k < m; k++) v[k] = gen(c.cseed, j, b0 + k);
      double bd = hop_bound(q, q->bits, c.cseed, v, m, 0) * g_bound_scale;
      double l2 = 0, l2r = 0;
      for (size_t k = 0; k < m; k++) {
        double y = load(dt, recv, (size_t)j * n + b0 + k);
        double err = fabs(y - v[k]), rd = out_round(dt, y);
        l2 += err * err;
        l2r += rd * rd;
        if (q->rot) continue;
        g_tight = fmax(g_tight, err / (bd + rd));
        if (!(err <= bd + rd) && bad++ < 3)
          mr_case_fail(&c, "block %d element %zu: got %.9g, want %.9g (error %.3g > bound %.3g)", j,
                       b0 + k, y, v[k], err, bd);
      }
      if (q->rot) {
        g_tight = fmax(g_tight, sqrt(l2) / (bd + sqrt(l2r)));
        if (!(sqrt(l2) <= bd + sqrt(l2r)) && bad++ < 3)
          mr_case_fail(&c, "block %d elements %zu..: l2 error %.3g > bound %.3g", j, b0, sqrt(l2),
                       bd);
      }
    }
  }
  uint64_t h = mr_hash(recv, n * W * es);
  mr_same_everywhere(&c, h, "result");
  if (inplace)
    for (size_t i = 0; i < n; i++) store(dt, send, i, gen(c.cseed, rank, i));
  MR_OK(&c, qcclAllGatherQ(send, recv, n, dt, &spec, t->comm, NULL));
  if (mr_hash(recv, n * W * es) != h) mr_case_fail(&c, "second run gave different bits");
  free(v);
  if (!inplace) free(send);
  free(recv);
  if (t->verbose && rank == 0) printf("  %s: error / bound <= %.3f\n", c.name, g_tight);
  g_tight = 0;
  mr_case_end(&c);
}

/* ---- qgZ ---- */

/* The exact sums of the block of rank `rank`'s result at [b0, b0 + m)
 * (qgZ chunk blocks start at multiples of B in each rank's block) and the
 * block's error bound. */
static double rsq_ref_block(mr_t* t, uint64_t cseed, const qcfg_t* q, int bin, int bout, size_t rc,
                            size_t b0, size_t m, double* sums, double** scratch) {
  int W = t->nranks;
  double* v = scratch[0];
  int two = g_nnodes > 1 && g_equal;
  double bd = 0, mag = 0;
  double nodebd[64] = {0};
  double* nodesum[64];
  for (int a = 0; a < g_nnodes; a++) {
    nodesum[a] = scratch[1 + a];
    for (size_t k = 0; k < m; k++) nodesum[a][k] = 0;
  }
  for (size_t k = 0; k < m; k++) sums[k] = 0;
  /* one level: the only hop is intra on one host, inter across hosts */
  int hop1 = two ? bin : (g_nnodes > 1 ? bout : bin);
  for (int r = 0; r < W; r++) {
    for (size_t k = 0; k < m; k++) v[k] = gen(cseed, r, (size_t)t->rank * rc + b0 + k);
    double b1 = hop_bound(q, hop1, cseed, v, m, 0);
    bd += b1;
    nodebd[g_node[r]] += b1;
    for (size_t k = 0; k < m; k++) {
      nodesum[g_node[r]][k] += v[k];
      sums[k] += v[k];
      mag += fabs(v[k]);
    }
  }
  if (two)
    for (int a = 0; a < g_nnodes; a++) bd += hop_bound(q, bout, cseed, nodesum[a], m, nodebd[a]);
  return bd + ldexp(mag * (q->rot ? q->block : 1) + bd, -20) * (W + g_nnodes);
}

static void case_rsq(mr_t* t, qcclDataType_t dt, const qcfg_t* q, int bin, size_t rc,
                     qcclRedOp_t op, int inplace) {
  mr_case_t c;
  char qn[64];
  if (!mr_case_begin(t, &c, "rsq %s %s %s rc=%zu %s", mr_dt_name(dt),
                     cfg_name(q, bin, q->bits, qn, 64), op == qcclAvg ? "avg" : "sum", rc,
                     inplace ? "inplace" : "outofplace"))
    return;
  int W = t->nranks, rank = t->rank;
  size_t es = dsize(dt);
  char* send = malloc(rc * W * es + 1);
  char* recv = inplace ? send + (size_t)rank * rc * es : malloc(rc * es + 1);
  for (size_t i = 0; i < rc * W; i++) store(dt, send, i, gen(c.cseed, rank, i));
  qcclReduceScatterQConfig_t cfg = QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER;
  cfg.intra = make_spec(q, bin, c.cseed);
  cfg.inter = make_spec(q, q->bits, c.cseed);
  MR_OK(&c, qcclReduceScatterQ(send, recv, rc, dt, op, &cfg, t->comm, NULL));
  double* scratch[1 + 64];
  for (int i = 0; i < 1 + g_nnodes; i++) scratch[i] = malloc(sizeof(double) * (size_t)q->block);
  double* sums = malloc(sizeof(double) * (size_t)q->block);
  long bad = 0;
  for (size_t b0 = 0; b0 < rc; b0 += (size_t)q->block) {
    size_t m = rc - b0 < (size_t)q->block ? rc - b0 : (size_t)q->block;
    double bd = rsq_ref_block(t, c.cseed, q, bin, q->bits, rc, b0, m, sums, scratch);
    if (op == qcclAvg) bd /= W;
    bd *= g_bound_scale;
    double l2 = 0, l2r = 0;
    for (size_t k = 0; k < m; k++) {
      double sum = op == qcclAvg ? sums[k] / W : sums[k];
      double y = load(dt, recv, b0 + k);
      double err = fabs(y - sum), rd = out_round(dt, y);
      l2 += err * err;
      l2r += rd * rd;
      if (q->rot) continue;
      g_tight = fmax(g_tight, err / (bd + rd));
      if (!(err <= bd + rd) && bad++ < 3)
        mr_case_fail(&c, "element %zu: got %.9g, want %.9g (error %.3g > bound %.3g)", b0 + k, y,
                     sum, err, bd);
    }
    if (q->rot) {
      g_tight = fmax(g_tight, sqrt(l2) / (bd + sqrt(l2r)));
      if (!(sqrt(l2) <= bd + sqrt(l2r)) && bad++ < 3)
        mr_case_fail(&c, "elements %zu..: l2 error %.3g > bound %.3g", b0, sqrt(l2), bd);
    }
  }
  free(sums);
  uint64_t h = mr_hash(recv, rc * es);
  for (size_t i = 0; i < rc * W; i++) store(dt, send, i, gen(c.cseed, rank, i));
  MR_OK(&c, qcclReduceScatterQ(send, recv, rc, dt, op, &cfg, t->comm, NULL));
  if (mr_hash(recv, rc * es) != h) mr_case_fail(&c, "second run gave different bits");
  for (int i = 0; i < 1 + g_nnodes; i++) free(scratch[i]);
  if (!inplace) free(recv);
  free(send);
  if (t->verbose && rank == 0) printf("  %s: error / bound <= %.3f\n", c.name, g_tight);
  g_tight = 0;
  mr_case_end(&c);
}

/* ---- hpZ ---- */

static void case_hpz(mr_t* t, int quant_storage) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "hpz %s", quant_storage ? "int8 storage" : "full storage")) return;
  int W = t->nranks, rank = t->rank;
  qcclDataType_t dt = qcclBfloat16;
  size_t n = 3001, es = 2;
  char* send = malloc(n * es);
  char* fwd = malloc(n * W * es);
  char* bwd = malloc(n * W * es);
  for (size_t i = 0; i < n; i++) store(dt, send, i, gen(c.cseed, rank, i));
  qcclQuantSpec_t spec = QCCL_QUANT_SPEC_INITIALIZER;
  qcclQuantSpec_t st = QCCL_QUANT_SPEC_INITIALIZER;
  qcclSecondary_t sec;
  MR_OK(&c, qcclSecondaryCreate(t->comm, n, dt, quant_storage ? &st : NULL, &sec));
  MR_OK(&c, qcclAllGatherQSecondary(send, fwd, n, dt, &spec, sec, 7, t->comm, NULL));
  MR_OK(&c, qcclCommResetStats(t->comm));
  MR_OK(&c, qcclSecondaryAllGather(sec, bwd, 7, NULL));
  qcclStats_t s = QCCL_STATS_INITIALIZER;
  MR_OK(&c, qcclCommGetStats(t->comm, &s));
  if (s.coll[qcclStatNodeAllGather].bytesInter != 0 || s.total.bytesInter != 0)
    mr_case_fail(&c, "the node gather sent %llu bytes across nodes",
                 (unsigned long long)s.total.bytesInter);
  if (s.coll[qcclStatNodeAllGather].calls != 1) mr_case_fail(&c, "not counted as a node gather");
  if (!quant_storage) {
    if (memcmp(fwd, bwd, n * W * es) != 0)
      mr_case_fail(&c, "the node gather differs from the forward gather");
  } else {
    /* int8 storage: within the int8 bound of the forward result (blocks of
     * the slices of P elements) */
    int L = 0;
    for (int r = 0; r < W; r++) L += g_node[r] == g_node[rank];
    size_t total = n * (size_t)W, P = (total + L - 1) / L;
    qcfg_t q = {8, 256, 0, 0, 0};
    double v[256];
    long bad = 0;
    for (size_t lo = 0; lo < total; lo += P)
      for (size_t b0 = lo; b0 < lo + P && b0 < total; b0 += 256) {
        size_t m = 256;
        if (b0 + m > lo + P) m = lo + P - b0;
        if (b0 + m > total) m = total - b0;
        for (size_t k = 0; k < m; k++) v[k] = load(dt, fwd, b0 + k);
        double bd = hop_bound(&q, 8, 0, v, m, 0);
        for (size_t k = 0; k < m; k++) {
          double y = load(dt, bwd, b0 + k);
          if (!(fabs(y - v[k]) <= bd + out_round(dt, y)) && bad++ < 3)
            mr_case_fail(&c, "element %zu: %.9g vs forward %.9g (bound %.3g)", b0 + k, y, v[k], bd);
        }
      }
  }
  /* a stale generation is refused on every rank */
  qcclResult_t r = qcclSecondaryAllGather(sec, bwd, 8, NULL);
  if (r != qcclInvalidUsage)
    mr_case_fail(&c, "stale generation: got %s, want qcclInvalidUsage", qcclGetErrorString(r));
  else if (strstr(qcclGetLastError(t->comm), "stale") == NULL)
    mr_case_fail(&c, "stale generation: message '%s' does not say stale",
                 qcclGetLastError(t->comm));
  /* a shard invalidated on one rank only (a checkpoint load there) */
  if (rank == W - 1) MR_OK(&c, qcclSecondaryInvalidate(sec));
  r = qcclSecondaryAllGather(sec, bwd, 7, NULL);
  int refused = r == qcclInvalidUsage;
  /* only ranks of the node of W-1 see it */
  int expect = g_node[rank] == g_node[W - 1];
  if (refused != expect)
    mr_case_fail(&c, "shard invalidated on rank %d: got %s on rank %d", W - 1,
                 qcclGetErrorString(r), rank);
  /* the next forward gather makes it current again */
  /* (with full storage, a plain forward gather: spec NULL) */
  MR_OK(&c, qcclAllGatherQSecondary(send, fwd, n, dt, quant_storage ? &spec : NULL, sec, 9, t->comm,
                                    NULL));
  MR_OK(&c, qcclSecondaryAllGather(sec, bwd, 9, NULL));
  if (!quant_storage && memcmp(fwd, bwd, n * W * es) != 0)
    mr_case_fail(&c, "after the refill: the node gather differs");
  if (!quant_storage && memcmp(fwd + (size_t)rank * n * es, send, n * es) != 0)
    mr_case_fail(&c, "the plain forward gather is not exact");
  MR_OK(&c, qcclSecondaryDestroy(sec));
  free(send);
  free(fwd);
  free(bwd);
  mr_case_end(&c);
}

/* ---- group buckets ---- */

static void case_bucket(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "bucket")) return;
  int W = t->nranks, rank = t->rank;
  qcclDataType_t dt = qcclFloat32;
  size_t rcs[3] = {1000, 37, 4097}, tot = 0;
  float *in[3], *out[3];
  for (int i = 0; i < 3; i++) {
    in[i] = malloc(sizeof(float) * rcs[i] * W);
    out[i] = malloc(sizeof(float) * rcs[i] * W);
    for (size_t k = 0; k < rcs[i] * W; k++) in[i][k] = (float)gen(c.cseed + i, rank, k);
    tot += rcs[i];
  }
  qcclReduceScatterQConfig_t cfg = QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER;
  qcclQuantSpec_t spec = QCCL_QUANT_SPEC_INITIALIZER;
  qcclStats_t s0 = QCCL_STATS_INITIALIZER, s1 = QCCL_STATS_INITIALIZER;
  MR_OK(&c, qcclCommGetStats(t->comm, &s0));
  MR_OK(&c, qcclGroupStart());
  for (int i = 0; i < 3; i++)
    MR_OK(&c, qcclReduceScatterQ(in[i], out[i], rcs[i], dt, qcclSum, &cfg, t->comm, NULL));
  for (int i = 0; i < 2; i++)
    MR_OK(&c, qcclAllGatherQ(in[i], out[i] + 0, rcs[i], dt, &spec, t->comm, NULL));
  MR_OK(&c, qcclGroupEnd());
  MR_OK(&c, qcclCommGetStats(t->comm, &s1));
  if (s1.coll[qcclStatReduceScatterQ].calls - s0.coll[qcclStatReduceScatterQ].calls != 3 ||
      s1.coll[qcclStatAllGatherQ].calls - s0.coll[qcclStatAllGatherQ].calls != 2)
    mr_case_fail(&c, "bucketed calls are not counted one by one");
  /* the gathers overwrote out[0], out[1]: check them against the packed call */
  float* pk = malloc(sizeof(float) * (rcs[0] + rcs[1]));
  float* pko = malloc(sizeof(float) * (rcs[0] + rcs[1]) * W);
  memcpy(pk, in[0], sizeof(float) * rcs[0]);
  memcpy(pk + rcs[0], in[1], sizeof(float) * rcs[1]);
  MR_OK(&c, qcclAllGatherQ(pk, pko, rcs[0] + rcs[1], dt, &spec, t->comm, NULL));
  for (int j = 0; j < W; j++) {
    if (memcmp(out[0] + j * rcs[0], pko + j * (rcs[0] + rcs[1]), sizeof(float) * rcs[0]) ||
        memcmp(out[1] + j * rcs[1], pko + j * (rcs[0] + rcs[1]) + rcs[0], sizeof(float) * rcs[1]))
      mr_case_fail(&c, "bucketed AllGatherQ block %d differs from the packed call", j);
  }
  /* reduce-scatter: out[2] holds the bucket's third result */
  float* pin = malloc(sizeof(float) * tot * W);
  float* pout = malloc(sizeof(float) * tot);
  for (int j = 0; j < W; j++) {
    size_t off = 0;
    for (int i = 0; i < 3; i++) {
      memcpy(pin + j * tot + off, in[i] + j * rcs[i], sizeof(float) * rcs[i]);
      off += rcs[i];
    }
  }
  MR_OK(&c, qcclReduceScatterQ(pin, pout, tot, dt, qcclSum, &cfg, t->comm, NULL));
  if (memcmp(out[2], pout + rcs[0] + rcs[1], sizeof(float) * rcs[2]) != 0)
    mr_case_fail(&c, "bucketed ReduceScatterQ differs from the packed call");
  free(pk);
  free(pko);
  free(pin);
  free(pout);
  for (int i = 0; i < 3; i++) free(in[i]), free(out[i]);
  mr_case_end(&c);
}

/* ---- policy ---- */

static void case_policy(mr_t* t, int from_env) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "policy %s", from_env ? "QCCL_POLICY" : "qcclCommSetPolicy")) return;
  int W = t->nranks, rank = t->rank;
  size_t n = 2000;
  float* in = malloc(sizeof(float) * n * W);
  float* a = malloc(sizeof(float) * n * W);
  float* b = malloc(sizeof(float) * n * W);
  for (size_t k = 0; k < n * W; k++) in[k] = (float)gen(c.cseed, rank, k);
  qcclQuantSpec_t spec = QCCL_QUANT_SPEC_INITIALIZER;
  if (!from_env) {
    MR_OK(&c, qcclCommSetPolicy(t->comm, qcclStatAllGather, &spec, 1024));
    spec.bits = 4;
    MR_OK(&c, qcclCommSetPolicy(t->comm, qcclStatReduceScatter, &spec, 0));
    spec.bits = 8;
  } else {
    spec.bits = 8; /* QCCL_POLICY=allgather:int8:b256:min=1K,reducescatter:int4:b256 */
  }
  qcclStats_t s0 = QCCL_STATS_INITIALIZER, s1 = QCCL_STATS_INITIALIZER;
  MR_OK(&c, qcclCommGetStats(t->comm, &s0));
  MR_OK(&c, qcclAllGather(in, a, n, qcclFloat32, t->comm, NULL));
  MR_OK(&c, qcclCommGetStats(t->comm, &s1));
  if (s1.coll[qcclStatAllGatherQ].calls != s0.coll[qcclStatAllGatherQ].calls + 1 ||
      s1.coll[qcclStatAllGather].calls != s0.coll[qcclStatAllGather].calls)
    mr_case_fail(&c, "the plain AllGather was not counted as quantized");
  if (W > 1 && s1.coll[qcclStatAllGather].bytesIntra + s1.coll[qcclStatAllGather].bytesInter !=
                   s0.coll[qcclStatAllGather].bytesIntra + s0.coll[qcclStatAllGather].bytesInter)
    mr_case_fail(&c, "bytes of the quantized call counted as plain");
  MR_OK(&c, qcclAllGatherQ(in, b, n, qcclFloat32, &spec, t->comm, NULL));
  if (memcmp(a, b, sizeof(float) * n * W) != 0)
    mr_case_fail(&c, "the policy's AllGather differs from qcclAllGatherQ");
  /* below min bytes (1024): plain, exact */
  MR_OK(&c, qcclCommGetStats(t->comm, &s0));
  MR_OK(&c, qcclAllGather(in, a, 16 / W + 1, qcclFloat32, t->comm, NULL));
  MR_OK(&c, qcclCommGetStats(t->comm, &s1));
  if (s1.coll[qcclStatAllGather].calls != s0.coll[qcclStatAllGather].calls + 1)
    mr_case_fail(&c, "a call under the minimum was not plain");
  /* an int32 gather stays plain */
  MR_OK(&c, qcclAllGather(in, a, n, qcclInt32, t->comm, NULL));
  if (memcmp(a + (size_t)rank * n, in, sizeof(float) * n) != 0)
    mr_case_fail(&c, "the int32 gather was not exact");
  /* reduce-scatter */
  qcclReduceScatterQConfig_t cfg = QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER;
  MR_OK(&c, qcclCommGetStats(t->comm, &s0));
  MR_OK(&c, qcclReduceScatter(in, a, n, qcclFloat32, qcclSum, t->comm, NULL));
  MR_OK(&c, qcclCommGetStats(t->comm, &s1));
  if (s1.coll[qcclStatReduceScatterQ].calls != s0.coll[qcclStatReduceScatterQ].calls + 1)
    mr_case_fail(&c, "the plain ReduceScatter was not counted as quantized");
  MR_OK(&c, qcclReduceScatterQ(in, b, n, qcclFloat32, qcclSum, &cfg, t->comm, NULL));
  if (memcmp(a, b, sizeof(float) * n) != 0)
    mr_case_fail(&c, "the policy's ReduceScatter differs from qcclReduceScatterQ");
  /* Max is not quantizable: plain */
  MR_OK(&c, qcclReduceScatter(in, a, n, qcclFloat32, qcclMax, t->comm, NULL));
  if (!from_env) {
    /* all-reduce: qcclAllReduceQ with int8 on both hops */
    MR_OK(&c, qcclCommSetPolicy(t->comm, qcclStatAllReduce, &spec, 0));
    MR_OK(&c, qcclCommGetStats(t->comm, &s0));
    MR_OK(&c, qcclAllReduce(in, a, n, qcclFloat32, qcclSum, t->comm, NULL));
    MR_OK(&c, qcclCommGetStats(t->comm, &s1));
    if (s1.coll[qcclStatAllReduceQ].calls != s0.coll[qcclStatAllReduceQ].calls + 1)
      mr_case_fail(&c, "the plain AllReduce was not counted as quantized");
    cfg.inter.bits = 8;
    MR_OK(&c, qcclAllReduceQ(in, b, n, qcclFloat32, qcclSum, &cfg, t->comm, NULL));
    if (memcmp(a, b, sizeof(float) * n) != 0)
      mr_case_fail(&c, "the policy's AllReduce differs from qcclAllReduceQ");
    MR_OK(&c, qcclCommSetPolicy(t->comm, qcclStatAllReduce, NULL, 0));
    MR_OK(&c, qcclCommSetPolicy(t->comm, qcclStatAllGather, NULL, 0));
    MR_OK(&c, qcclCommSetPolicy(t->comm, qcclStatReduceScatter, NULL, 0));
    MR_OK(&c, qcclAllGather(in, a, n, qcclFloat32, t->comm, NULL));
    if (memcmp(a + (size_t)rank * n, in, sizeof(float) * n) != 0)
      mr_case_fail(&c, "after removing the policy the gather is not exact");
  }
  free(in);
  free(a);
  free(b);
  mr_case_end(&c);
}

/* ---- qcclAllReduceQ: the reduce-scatter of the zero-padded input, then
 * the gather of the shards under cfg->inter, bit for bit; the same
 * everywhere ---- */

static void case_arq(mr_t* t, size_t count) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "allreduceq count=%zu", count)) return;
  int W = t->nranks, rank = t->rank;
  size_t rc = (count + (size_t)W - 1) / (size_t)W;
  uint16_t* in = calloc(rc * W, 2);
  uint16_t* out = malloc(2 * count + 2);
  uint16_t* shard = malloc(2 * rc);
  uint16_t* ref = malloc(2 * rc * W);
  for (size_t i = 0; i < count; i++) store(qcclBfloat16, in, i, gen(c.cseed, rank, i));
  qcclReduceScatterQConfig_t cfg = QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER;
  cfg.inter.bits = 8;
  MR_OK(&c, qcclAllReduceQ(in, out, count, qcclBfloat16, qcclAvg, &cfg, t->comm, NULL));
  MR_OK(&c, qcclReduceScatterQ(in, shard, rc, qcclBfloat16, qcclAvg, &cfg, t->comm, NULL));
  MR_OK(&c, qcclAllGatherQ(shard, ref, rc, qcclBfloat16, &cfg.inter, t->comm, NULL));
  if (memcmp(out, ref, 2 * count) != 0)
    mr_case_fail(&c, "qcclAllReduceQ differs from qcclReduceScatterQ + qcclAllGatherQ");
  mr_same_everywhere(&c, mr_hash(out, 2 * count), "result");
  /* in place */
  memcpy(out, in, 2 * count);
  MR_OK(&c, qcclAllReduceQ(out, out, count, qcclBfloat16, qcclAvg, &cfg, t->comm, NULL));
  if (memcmp(out, ref, 2 * count) != 0) mr_case_fail(&c, "in place differs");
  free(in);
  free(out);
  free(shard);
  free(ref);
  mr_case_end(&c);
}

/* ---- error feedback ---- */

static void case_ef(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "error feedback")) return;
  int W = t->nranks, rank = t->rank;
  size_t rc = 2048, reps = 100;
  float* in = malloc(sizeof(float) * rc * W);
  float* out = malloc(sizeof(float) * rc);
  float* out2 = malloc(sizeof(float) * rc);
  double* mean = malloc(sizeof(double) * rc);
  for (size_t k = 0; k < rc * W; k++) in[k] = (float)gen(c.cseed, rank, k);
  double err[2];
  for (int ef = 0; ef < 2; ef++) {
    qcclReduceScatterQConfig_t cfg = QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER;
    cfg.errorFeedback = ef;
    size_t cnt = 0;
    MR_OK(&c, qcclReduceScatterQResidualCount(t->comm, rc, &cfg, &cnt));
    float* res = ef ? calloc(cnt ? cnt : 1, sizeof(float)) : NULL;
    cfg.residual = res;
    cfg.residualCount = ef ? cnt : 0;
    for (size_t i = 0; i < rc; i++) mean[i] = 0;
    /* the comm-owned residual (tag 42) must give the same bits */
    qcclReduceScatterQConfig_t own = cfg;
    own.residual = NULL;
    own.residualCount = 0;
    own.residualTag = 42;
    int differ = 0;
    for (size_t k = 0; k < reps; k++) {
      MR_OK(&c, qcclReduceScatterQ(in, out, rc, qcclFloat32, qcclSum, &cfg, t->comm, NULL));
      for (size_t i = 0; i < rc; i++) mean[i] += out[i] / (double)reps;
      if (ef) {
        MR_OK(&c, qcclReduceScatterQ(in, out2, rc, qcclFloat32, qcclSum, &own, t->comm, NULL));
        if (!differ && memcmp(out, out2, sizeof(float) * rc) != 0) {
          mr_case_fail(&c, "call %zu: the comm-owned residual gives other bits", k);
          differ = 1;
        }
      }
    }
    double e = 0;
    for (size_t i = 0; i < rc; i++) {
      double s = 0;
      for (int r = 0; r < W; r++) s += gen(c.cseed, r, (size_t)rank * rc + i);
      e += fabs(mean[i] - s) / (double)rc;
    }
    err[ef] = e;
    free(res);
  }
  if (t->verbose || rank == 0)
    printf("error feedback: mean |error| of the mean of %zu reductions: %.3g without, %.3g with\n",
           reps, err[0], err[1]);
  if (!(err[1] < 0.25 * err[0]))
    mr_case_fail(&c, "error feedback did not shrink the mean error: %.3g without, %.3g with",
                 err[0], err[1]);
  free(in);
  free(out);
  free(out2);
  free(mean);
  mr_case_end(&c);
}

/* ---- bad arguments ---- */

static void expect_err(mr_case_t* c, qcclResult_t r, qcclResult_t want, const char* word,
                       const char* what) {
  if (r != want)
    mr_case_fail(c, "%s: got %s, want %s", what, qcclGetErrorString(r), qcclGetErrorString(want));
  else if (strstr(qcclGetLastError(c->t->comm), word) == NULL)
    mr_case_fail(c, "%s: message '%s' does not name %s", what, qcclGetLastError(c->t->comm), word);
}

static void case_badargs(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "bad arguments")) return;
  float x[64] = {0}, y[64 * 64];
  qcclQuantSpec_t spec = QCCL_QUANT_SPEC_INITIALIZER;
  expect_err(&c, qcclAllGatherQ(x, y, 4, qcclFloat32, NULL, t->comm, NULL), qcclInvalidArgument,
             "spec", "NULL spec");
  spec.bits = 3;
  expect_err(&c, qcclAllGatherQ(x, y, 4, qcclFloat32, &spec, t->comm, NULL), qcclInvalidArgument,
             "spec->bits", "bits 3");
  spec.bits = 8;
  expect_err(&c, qcclAllGatherQ(x, y, 4, qcclInt32, &spec, t->comm, NULL), qcclInvalidArgument,
             "datatype", "int32");
  expect_err(&c, qcclAllGatherQ(NULL, y, 4, qcclFloat32, &spec, t->comm, NULL), qcclInvalidArgument,
             "sendbuff", "NULL sendbuff");
  qcclReduceScatterQConfig_t cfg = QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER;
  expect_err(&c, qcclReduceScatterQ(y, x, 4, qcclFloat32, qcclMax, &cfg, t->comm, NULL),
             qcclInvalidArgument, "op", "op max");
  cfg.inter.block = 128;
  expect_err(&c, qcclReduceScatterQ(y, x, 4, qcclFloat32, qcclSum, &cfg, t->comm, NULL),
             qcclInvalidArgument, "cfg->inter.block", "blocks differ");
  cfg.inter.block = 256;
  cfg.intra.mode = (qcclQuantMode_t)7;
  expect_err(&c, qcclReduceScatterQ(y, x, 4, qcclFloat32, qcclSum, &cfg, t->comm, NULL),
             qcclInvalidArgument, "cfg->intra->mode", "bad mode");
  expect_err(&c, qcclCommSetPolicy(t->comm, qcclStatBarrier, &spec, 0), qcclInvalidArgument,
             "collective", "policy for a barrier");
  if (qcclSecondaryAllGather(NULL, y, 1, NULL) != qcclInvalidArgument ||
      strstr(qcclGetLastError(NULL), "secondary") == NULL)
    mr_case_fail(&c, "NULL secondary: not refused by name ('%s')", qcclGetLastError(NULL));
  /* the communicator still works */
  MR_OK(&c, qcclAllGatherQ(x, y, 4, qcclFloat32, &spec, t->comm, NULL));
  mr_case_end(&c);
}

/* ---- bytes (--bytes) ---- */

static void case_bytes(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "bytes")) return;
  int W = t->nranks, rank = t->rank;
  int N = g_nnodes;
  size_t n = (size_t)1 << 20; /* elements per rank */
  const char* ns = mr_opt(t, "--bytes-count");
  if (ns) n = (size_t)strtoull(ns, NULL, 10);
  uint16_t* in = malloc(2 * n * W);
  uint16_t* out = malloc(2 * n * W);
  for (size_t k = 0; k < n * W; k++) store(qcclBfloat16, in, k, gen(c.cseed, rank, k));
  qcclQuantSpec_t spec = QCCL_QUANT_SPEC_INITIALIZER; /* int8, B = 256 */
  qcclStats_t s = QCCL_STATS_INITIALIZER;
  MR_OK(&c, qcclCommResetStats(t->comm));
  MR_OK(&c, qcclAllGather(in, out, n, qcclFloat16, t->comm, NULL));
  MR_OK(&c, qcclAllGatherQ(in, out, n, qcclBfloat16, &spec, t->comm, NULL));
  qcclSecondary_t sec;
  MR_OK(&c, qcclSecondaryCreate(t->comm, n, qcclBfloat16, NULL, &sec));
  MR_OK(&c, qcclAllGatherQSecondary(in, out, n, qcclBfloat16, &spec, sec, 1, t->comm, NULL));
  MR_OK(&c, qcclCommGetStats(t->comm, &s));
  uint64_t ag_plain = s.coll[qcclStatAllGather].bytesInter;
  uint64_t agq = s.coll[qcclStatAllGatherQ].bytesInter / 2; /* two gathers */
  MR_OK(&c, qcclSecondaryAllGather(sec, out, 1, NULL));
  MR_OK(&c, qcclSecondaryDestroy(sec));
  qcclReduceScatterQConfig_t cfg = QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER; /* 8 / 4, B = 256 */
  size_t rc = n;
  MR_OK(&c, qcclReduceScatter(in, out, rc / W, qcclFloat16, qcclSum, t->comm, NULL));
  MR_OK(&c, qcclReduceScatterQ(in, out, rc / W, qcclBfloat16, qcclSum, &cfg, t->comm, NULL));
  qcclStats_t s2 = QCCL_STATS_INITIALIZER;
  MR_OK(&c, qcclCommGetStats(t->comm, &s2));
  uint64_t hpz = s2.coll[qcclStatNodeAllGather].bytesInter;
  uint64_t rs_plain = s2.coll[qcclStatReduceScatter].bytesInter;
  uint64_t rsq = s2.coll[qcclStatReduceScatterQ].bytesInter;
  /* qgZ analytic: (N-1) chunks of rc/W elements per rank, vs the least a
   * plain fp16 reduce-scatter sends across nodes per rank: (N-1) x rc/W x 2 */
  double rs_min = (double)(N - 1) * (double)(rc / W) * 2;
  double ag_ratio = ag_plain ? (double)agq / (double)ag_plain : 0;
  double rs_ratio = rs_min > 0 ? (double)rsq / rs_min : 0;
  double rs_ratio_meas = rs_plain ? (double)rsq / (double)rs_plain : 0;
  printf(
      "bytes rank %d: inter-node qwZ %llu (plain f16 gather %llu, ratio %.4f), hpZ node gather "
      "%llu, qgZ 8/4 %llu (plain f16 reduce-scatter %llu, ratio %.4f; vs the fp16 minimum %.0f, "
      "ratio %.4f); total inter %llu\n",
      rank, (unsigned long long)agq, (unsigned long long)ag_plain, ag_ratio,
      (unsigned long long)hpz, (unsigned long long)rsq, (unsigned long long)rs_plain, rs_ratio_meas,
      rs_min, rs_ratio, (unsigned long long)s2.total.bytesInter);
  printf("ZERO_BYTES rank=%d inter=%llu\n", rank, (unsigned long long)s2.total.bytesInter);
  if (N > 1) {
    if (!(ag_ratio <= 0.5 * 1.02)) mr_case_fail(&c, "qwZ int8 ratio %.4f > 0.51", ag_ratio);
    if (!(rs_ratio <= 0.25 * 1.07 && rs_ratio > 0.2))
      mr_case_fail(&c, "qgZ int4 ratio %.4f to the plain fp16 minimum is not in (0.2, 0.2675]",
                   rs_ratio);
  }
  if (hpz != 0)
    mr_case_fail(&c, "hpZ node gather sent %llu bytes across nodes", (unsigned long long)hpz);
  free(in);
  free(out);
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  parse_placement(&t);
  int v = mr_opt(&t, "--variant") ? atoi(mr_opt(&t, "--variant")) : 0;
  if (mr_opt(&t, "--bound-scale")) g_bound_scale = atof(mr_opt(&t, "--bound-scale"));
  int W = t.nranks;
  if (mr_flag(&t, "--bytes")) {
    case_bytes(&t);
    return mr_finish(&t);
  }
  if (mr_flag(&t, "--policy-env")) {
    case_policy(&t, 1);
    return mr_finish(&t);
  }
  static const qcclDataType_t dts[3] = {qcclFloat32, qcclFloat16, qcclBfloat16};
  size_t counts[3] = {1, 1009, (size_t)(2 * W * 37 + 3)};
  for (int di = 0; di < 3; di++) {
    for (int k = 0; k < 6; k++) {
      const qcfg_t* q = &g_cfgs[(v + di + k) % 6];
      for (int ci = 0; ci < 3; ci++) {
        int inplace = (ci + di + k + v) % 2;
        case_agq(&t, dts[di], q, counts[ci], inplace);
        /* 4/4 on odd variants, else 8 inside */
        int bin = q->bits == 4 && (v % 2) ? 4 : 8;
        qcclRedOp_t op = (ci + k) % 2 ? qcclAvg : qcclSum;
        case_rsq(&t, dts[di], q, bin, counts[ci], op, !inplace);
      }
    }
  }
  /* one large count per run (prime), type and config rotating with the
   * variant; the gather in two types: from 4 ranks its output passes the
   * 8 MiB from which the dequantization streams (allgather_q.c), whose
   * chunks then start off the 64-byte lines */
  const qcfg_t* ql = &g_cfgs[v % 6];
  size_t large = t.quick ? 300007 : 1048583;
  case_agq(&t, dts[v % 3], ql, large, v % 2);
  case_agq(&t, dts[(v + 2) % 3], ql, large, (v + 1) % 2);
  case_rsq(&t, dts[(v + 1) % 3], ql, 8, large / (size_t)W + 1, qcclSum, (v + 1) % 2);
  case_arq(&t, (size_t)W * 1000);
  case_arq(&t, 2 * (size_t)W * 37 + 3);
  case_hpz(&t, v % 2);
  case_bucket(&t);
  case_policy(&t, 0);
  if (g_nnodes > 1 && g_equal) case_ef(&t);
  case_badargs(&t);
  return mr_finish(&t);
}
