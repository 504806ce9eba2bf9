/*
 * zero_train - the ZeRO engine (include/qccl_zero.h) training a small MLP,
 * step by step against an independent f64 reference written here.
 *
 * Run as one rank under qcclrun. Options:
 *   --stage S  --opt adamw|adam|sgd|nesterov|lamb  --dtype f32|bf16|f16
 *   --gas G (micro-steps per step)  --batch b (samples per rank and micro-step)
 *   --clip C  --steps N  --qwz  --qgz  --hpz  --inject-inf STEP (rank W-1
 *   puts an Inf into one gradient at that step)  --bucket N (reduce bucket,
 *   elements)  --persist N (stage-3 persistence threshold)  --prefetch N
 *   (overlap_comm with stage3_prefetch_bucket_size N: later micro-steps must
 *   have gathers served by the prefetch, with the same checks)  --accum
 *   f32|bf16|f16 (data_types.grad_accum_dtype; default: the dtype at gas 1,
 *   f32 above)
 *   --save DIR --save-at K: save before step K; rank 0 writes DIR/state-K.bin
 *   (masters and moments) and DIR/expect-K.bin (the masters after step K and
 *   their bound against the reference)
 *   --load DIR --start K: load, check masters and moments against
 *   state-K.bin bit for bit, run from step K (same global batch: pass
 *   --batch so that W * b is the saving run's), and check the step against
 *   expect-K.bin within the sum of both runs' bounds (the reference takes
 *   the engine's moments at that step in both runs, so both runs have the
 *   same f64 reference); --expect-fail TEXT: the load must fail naming TEXT;
 *   --mismatch: the last parameter is registered under another name
 *
 * The model: 7 -> 13 -> 11 -> 5 (prime sizes), tanh, squared error; six
 * parameters W1 b1 W2 b2 W3 b3 (318 elements, so every unit's shard is
 * uneven for W = 2..4). Sample j of the data set is a pure function of
 * (seed, j); step t uses samples [t G, (t + 1) G), G = W * gas * b, rank r
 * takes micro-batch k * W + r in micro-step k.
 *
 * The trainer computes forward and backward in f64 from the parameters the
 * engine hands out (qcclZeroGather) and gives the gradient rounded to the
 * parameter dtype (times the loss scale under fp16). Checks per step:
 *   - the backward gather equals the forward gather bit for bit (hpZ reads
 *     the secondary shard of the right generation), also when prefetched;
 *   - the forward parameters equal the masters rounded to the dtype, or
 *     (qwZ) lie within the quantization bound of each block of a shard:
 *     max|block| / qmax / 2, plus the rounding to the dtype;
 *   - the reference: from the engine's masters before the step and the
 *     parameters the trainer saw, the mean gradient over the G samples in
 *     f64, DeepSpeed's clipping, and the optimizer in f64 (its own code,
 *     with its own f64 moments carried from step to step), give the new
 *     weights; the engine's new masters must be within a bound derived
 *     from f32 rounding: the gradient error e_g (the trainer's rounding to
 *     the dtype, u_p per micro-batch gradient; the f32 sums over W ranks
 *     and gas micro-steps, (W + gas + 2) u32 of the sum of magnitudes; the
 *     reduce in the dtype at stages 2-3, u_p; qgZ adds max|g_r| / qmax / 2
 *     per rank and micro-step, and the same under the 4-bit inter spec for
 *     the inter-node hop and for stage 1's qcclAllReduceQ gather; a 16-bit
 *     accumulation u_a per addition into it and, at stage 1, for its
 *     all-reduce) propagated to first order through
 * the optimizer's formulas (moments carried from step to step, the f32 roundings of each operation
 * counted), doubled;
 *   - overflow (--inject-inf): every rank reports the step skipped, the
 *     masters are unchanged, the loss scale halves (hysteresis 1), the
 *     step counter does not advance; the reference skips that step too.
 * The loss of every step is printed by rank 0 (--verbose).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mr_util.h"
#include "qccl_zero.h"
#include "ref_fp.h"

#define NL 3
static const int g_dims[NL + 1] = {7, 13, 11, 5};
#define NP (2 * NL)
static size_t g_count[NP];
static const char* g_names[NP] = {"l1.weight", "l1.bias",   "l2.weight",
                                  "l2.bias",   "l3.weight", "l3.bias"};

static const double U32 = 5.9604644775390625e-08; /* 2^-24 */

typedef struct {
  int stage, gas, batch, steps, qwz, qgz, hpz, inject, opt;
  int accum; /* data_types.grad_accum_dtype: QCCL_ZERO_GRAD_ACCUM_AUTO or a dtype (--accum) */
  double clip;
  qcclDataType_t dtype;
  size_t bucket, persist;
  const char *save, *load, *expect_fail; /* checkpoint directory / expected load error */
  int save_at, start;
  size_t prefetch; /* stage3_prefetch_bucket_size with overlap_comm (0: off) */
} opts_t;

/* ---- files of the checkpoint runs (written by rank 0 of the saving run) ---- */

static FILE* open_in(const char* dir, const char* what, int step, const char* mode) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s-%d.bin", dir, what, step);
  FILE* f = fopen(path, mode);
  if (f == NULL) fprintf(stderr, "cannot open %s\n", path);
  return f;
}

/* ---- data ---- */

static double unit_rand(uint64_t seed, uint64_t j, uint64_t k) {
  uint64_t h = mr_mix(seed ^ mr_mix(j * 0x9e3779b97f4a7c15ull + k + 1));
  return ((double)(h >> 11) / 9007199254740992.0) * 2.0 - 1.0;
}

static void sample(uint64_t seed, uint64_t j, double* x, double* y) {
  for (int k = 0; k < g_dims[0]; k++) x[k] = unit_rand(seed, j, (uint64_t)k);
  for (int k = 0; k < g_dims[NL]; k++) y[k] = 0.5 * unit_rand(seed ^ 0x55, j, (uint64_t)k);
}

/* ---- the model in f64 ---- */

/* Adds the gradient of (1/b) sum_j 0.5 |out_j - y_j|^2 over samples
 * [first, first + b) into g[NP][] (zeroed by the caller); returns the loss. */
static double model_grad(const double* const* w, uint64_t seed, uint64_t first, int b, double** g) {
  double act[NL + 1][16], delta[16], prev[16];
  double loss = 0.0;
  for (int s = 0; s < b; s++) {
    double y[16];
    sample(seed, first + (uint64_t)s, act[0], y);
    for (int l = 0; l < NL; l++) {
      const double *W = w[2 * l], *bias = w[2 * l + 1];
      for (int o = 0; o < g_dims[l + 1]; o++) {
        double z = bias[o];
        for (int i = 0; i < g_dims[l]; i++) z += W[o * g_dims[l] + i] * act[l][i];
        act[l + 1][o] = l + 1 < NL ? tanh(z) : z;
      }
    }
    for (int o = 0; o < g_dims[NL]; o++) {
      double d = act[NL][o] - y[o];
      loss += 0.5 * d * d / b;
      delta[o] = d / b;
    }
    for (int l = NL - 1; l >= 0; l--) {
      const double* W = w[2 * l];
      for (int o = 0; o < g_dims[l + 1]; o++) {
        for (int i = 0; i < g_dims[l]; i++) g[2 * l][o * g_dims[l] + i] += delta[o] * act[l][i];
        g[2 * l + 1][o] += delta[o];
      }
      if (l == 0) break;
      for (int i = 0; i < g_dims[l]; i++) {
        double s2 = 0.0;
        for (int o = 0; o < g_dims[l + 1]; o++) s2 += W[o * g_dims[l] + i] * delta[o];
        prev[i] = s2 * (1.0 - act[l][i] * act[l][i]);
      }
      memcpy(delta, prev, sizeof(double) * (size_t)g_dims[l]);
    }
  }
  return loss;
}

/* ---- dtype helpers (independent of the library) ---- */

static double u_of(qcclDataType_t dt) {
  return dt == qcclBfloat16 ? 0.00390625 : dt == qcclFloat16 ? 0.00048828125 : U32;
}

static double to_dt(qcclDataType_t dt, double x) { /* round to the dtype */
  if (dt == qcclFloat32) return (double)(float)x;
  const ref_fmt_t* f = dt == qcclBfloat16 ? REF_BF16 : REF_F16;
  return ref_decode(f, ref_encode(f, (float)x));
}

static double load_dt(qcclDataType_t dt, const void* buf, size_t i) {
  if (dt == qcclFloat32) return ((const float*)buf)[i];
  const ref_fmt_t* f = dt == qcclBfloat16 ? REF_BF16 : REF_F16;
  return ref_decode(f, ((const uint16_t*)buf)[i]);
}

static void store_dt(qcclDataType_t dt, void* buf, size_t i, double x) {
  if (dt == qcclFloat32) {
    ((float*)buf)[i] = (float)x;
    return;
  }
  const ref_fmt_t* f = dt == qcclBfloat16 ? REF_BF16 : REF_F16;
  ((uint16_t*)buf)[i] = (uint16_t)ref_encode(f, (float)x);
}

/* ---- the reference optimizer (f64) with its error bound ---- */

typedef struct {
  double *m, *v;   /* moments */
  double *em, *ev; /* bounds on |engine's moment - ours| */
} refstate_t;

typedef struct {
  int opt; /* 0 adamw, 1 adam, 2 sgd, 3 nesterov, 4 lamb */
  double lr, b1, b2, eps, wd, mu, maxc, minc;
} refopt_t;

/* One step of parameter p (n elements): w (in: masters before, out: the
 * reference's new weights), g (the applied gradient), eg (its error
 * bound), bound (out: the bound on |engine - reference| per element). */
static void ref_step(const refopt_t* o, int t, size_t n, double* w, const double* g,
                     const double* eg, refstate_t* st, double* bound) {
  const double u = U32;
  double bc1 = 1.0 - pow(o->b1, t), bc2 = 1.0 - pow(o->b2, t);
  if (o->opt == 2 || o->opt == 3) {
    for (size_t i = 0; i < n; i++) {
      double gi = g[i] + o->wd * w[i];
      double egi = eg[i] + 2 * u * (fabs(g[i]) + fabs(o->wd * w[i]));
      double m = o->mu * st->m[i] + gi;
      st->em[i] = o->mu * st->em[i] + egi + 2 * u * fabs(m);
      st->m[i] = m;
      double d = o->opt == 3 ? gi + o->mu * m : m;
      double ed = o->opt == 3 ? egi + o->mu * st->em[i] + 2 * u * fabs(d) : st->em[i];
      double wn = w[i] - o->lr * d;
      bound[i] = 2.0 * (o->lr * ed + 2 * u * (fabs(w[i]) + fabs(o->lr * d)));
      w[i] = wn;
    }
    return;
  }
  double* dir = malloc(n * sizeof(double));
  double* edir = malloc(n * sizeof(double));
  double wsq = 0.0, dsq = 0.0, edsq = 0.0;
  for (size_t i = 0; i < n; i++) {
    double gi = o->opt == 1 ? g[i] + o->wd * w[i] : g[i];
    double egi = eg[i] + (o->opt == 1 ? 2 * u * (fabs(g[i]) + fabs(o->wd * w[i])) : 0.0);
    double m = o->b1 * st->m[i] + (1 - o->b1) * gi;
    double v = o->b2 * st->v[i] + (1 - o->b2) * gi * gi;
    st->em[i] = o->b1 * st->em[i] + (1 - o->b1) * egi +
                3 * u * (fabs(o->b1 * st->m[i]) + fabs((1 - o->b1) * gi));
    st->ev[i] = o->b2 * st->ev[i] + (1 - o->b2) * (2 * fabs(gi) * egi + egi * egi) +
                4 * u * (o->b2 * st->v[i] + (1 - o->b2) * gi * gi);
    st->m[i] = m;
    st->v[i] = v;
    double mh = m / bc1, vh = v / bc2, sv = sqrt(vh);
    double emh = st->em[i] / bc1 + 3 * u * fabs(mh);
    double evh = st->ev[i] / bc2 + 3 * u * vh;
    double esv = sv > 0 ? fmin(evh / (2 * sv), sqrt(evh)) : sqrt(evh);
    esv += 2 * u * sv;
    double den = sv + o->eps;
    double d = mh / den;
    double ed = emh / den + fabs(mh) * esv / (den * (den - esv > 0 ? den - esv : den * 1e-30)) +
                3 * u * fabs(d);
    if (o->opt == 4) {
      ed += 2 * u * fabs(o->wd * w[i]);
      d += o->wd * w[i];
    }
    dir[i] = d;
    edir[i] = ed;
    wsq += w[i] * w[i];
    dsq += d * d;
    edsq += ed * ed;
  }
  double ratio = 1.0, eratio = 0.0;
  if (o->opt == 4) {
    double wn = sqrt(wsq), dn = sqrt(dsq);
    ratio = (wn > 0 && dn > 0) ? wn / dn : 1.0;
    /* relative errors: |w| from f32 sums of n squares, |d| from the direction's bound */
    double rel = (double)(n + 2) * u + (dn > 0 ? sqrt(edsq) / dn : 0.0);
    if (ratio > o->maxc) ratio = o->maxc, rel = 0.0;
    if (ratio < o->minc) ratio = o->minc, rel = 0.0;
    eratio = ratio * rel / (1.0 - rel > 0.5 ? 1.0 - rel : 0.5);
  }
  for (size_t i = 0; i < n; i++) {
    double wi = w[i];
    double step = o->lr * ratio * dir[i];
    double e = o->lr * (ratio * edir[i] + fabs(dir[i]) * eratio) + 3 * u * (fabs(wi) + fabs(step));
    if (o->opt == 0) {
      wi = wi - o->lr * o->wd * wi;
      e += 2 * u * fabs(o->lr * o->wd * w[i]);
    }
    w[i] = wi - step;
    bound[i] = 2.0 * e;
  }
  free(dir);
  free(edir);
}

/* ---- the run ---- */

static int parse_opt(const char* s) {
  const char* n[] = {"adamw", "adam", "sgd", "nesterov", "lamb"};
  for (int i = 0; i < 5; i++)
    if (s != NULL && strcmp(s, n[i]) == 0) return i;
  return -1;
}

static size_t opt_size(const mr_t* t, const char* name, size_t def) {
  const char* v = mr_opt(t, name);
  return v != NULL ? (size_t)strtoull(v, NULL, 10) : def;
}

static void run(mr_t* t, const opts_t* o) {
  mr_case_t c;
  const char* dn = o->dtype == qcclFloat32 ? "f32" : o->dtype == qcclBfloat16 ? "bf16" : "f16";
  if (!mr_case_begin(t, &c, "train stage%d opt%d %s W%d gas%d%s%s%s%s accum%d", o->stage, o->opt,
                     dn, t->nranks, o->gas, o->qwz ? " qwz" : "", o->qgz ? " qgz" : "",
                     o->hpz ? " hpz" : "", o->clip > 0 ? " clip" : "", o->accum))
    return;
  const int W = t->nranks, R = t->rank;
  qcclZeroConfig_t cfg = QCCL_ZERO_CONFIG_INITIALIZER;
  cfg.stage = o->stage;
  cfg.gradAccumSteps = o->gas;
  cfg.gradClip = o->clip;
  refopt_t ro = {o->opt, 0.01, 0.9, 0.99, 1e-6, 0.01, 0.0, 10.0, 0.01};
  switch (o->opt) {
    case 0:
      cfg.optimizer = qcclZeroAdamW;
      break;
    case 1:
      cfg.optimizer = qcclZeroAdam;
      break;
    case 2:
    case 3:
      cfg.optimizer = qcclZeroSGD;
      ro.lr = 0.05;
      ro.mu = 0.9;
      cfg.nesterov = o->opt == 3;
      break;
    default:
      cfg.optimizer = qcclZeroLamb;
      break;
  }
  cfg.lr = ro.lr;
  cfg.beta1 = ro.b1;
  cfg.beta2 = ro.b2;
  cfg.eps = ro.eps;
  cfg.weightDecay = ro.wd;
  cfg.momentum = ro.mu;
  cfg.fp16 = o->dtype == qcclFloat16;
  cfg.bf16 = o->dtype == qcclBfloat16;
  cfg.initialScalePower = 10;
  cfg.hysteresis = 1;
  cfg.reduceBucketSize = o->bucket;
  cfg.persistenceThreshold = o->persist;
  cfg.quantizedWeights = o->qwz;
  cfg.quantizedGradients = o->qgz;
  int node, nnodes, lrank, lsize;
  MR_OK(&c, qcclCommNodeInfo(t->comm, &node, &nnodes, &lrank, &lsize));
  cfg.hpzPartitionSize = o->hpz ? lsize : 0;
  cfg.overlapComm = o->prefetch > 0;
  cfg.prefetchBucketSize = o->prefetch;
  cfg.qwzBlock = 32;
  cfg.qgzBlock = 32;
  cfg.gradAccumDtype = o->accum;
  qcclZero_t z;
  if (qcclZeroCreate(t->comm, &cfg, &z) != qcclSuccess) {
    mr_case_fail(&c, "qcclZeroCreate: %s", qcclZeroGetLastError());
    mr_case_end(&c);
    return;
  }
#define ZOK(call)                                                              \
  do {                                                                         \
    qcclResult_t r_ = (call);                                                  \
    if (r_ != qcclSuccess) mr_die(t, "%s: %s", #call, qcclZeroGetLastError()); \
  } while (0)
  /* initial weights: the same on every rank (from the case seed, or from the
   * run's seed when checkpoints connect runs of different W and stage) */
  const uint64_t base = (o->save || o->load) ? t->seed : c.cseed;
  double *wm[NP], *seen[NP], *g[NP], *gs[NP], *eg[NP], *bnd[NP], *wr[NP];
  refstate_t st[NP];
  float* fm[NP];
  void* buf[NP];
  for (int p = 0; p < NP; p++) {
    size_t n = g_count[p];
    wm[p] = calloc(n, sizeof(double));
    seen[p] = calloc(n, sizeof(double));
    g[p] = calloc(n, sizeof(double));
    gs[p] = calloc(n, sizeof(double));
    eg[p] = calloc(n, sizeof(double));
    bnd[p] = calloc(n, sizeof(double));
    wr[p] = calloc(n, sizeof(double));
    fm[p] = calloc(n, sizeof(float));
    buf[p] = calloc(n, 4);
    st[p].m = calloc(n, sizeof(double));
    st[p].v = calloc(n, sizeof(double));
    st[p].em = calloc(n, sizeof(double));
    st[p].ev = calloc(n, sizeof(double));
    int fan_in = g_dims[p / 2];
    for (size_t i = 0; i < n; i++)
      store_dt(o->dtype, buf[p], i, unit_rand(base ^ 0xabc, (uint64_t)p, i) / sqrt(fan_in));
    int id;
    char name[64]; /* --mismatch renames the last parameter (a checkpoint must refuse it) */
    snprintf(name, sizeof name, "%s%s", g_names[p],
             mr_flag(t, "--mismatch") && p == NP - 1 ? "X" : "");
    ZOK(qcclZeroRegister(z, name, n, o->dtype, buf[p], &id));
  }
  const uint64_t dseed = base;
  const int b = o->batch;
  const uint64_t G = (uint64_t)W * (uint64_t)o->gas * (uint64_t)b;
  const double up = u_of(o->dtype);
  const int qmax_w = (1 << (cfg.qwzBits - 1)) - 1, qmax_gi = (1 << (cfg.qgzIntraBits - 1)) - 1,
            qmax_ge = (1 << (cfg.qgzInterBits - 1)) - 1;
  int tstep = 0; /* the reference's step count */
  double scale_before = 0.0;
  int adopt = 0; /* the reference takes the engine's moments (after a save or load) */
  if (o->load) {
    qcclResult_t r = qcclZeroLoad(z, o->load);
    if (o->expect_fail) {
      if (r == qcclSuccess)
        mr_case_fail(&c, "loading %s succeeded, expected an error naming %s", o->load,
                     o->expect_fail);
      else if (strstr(qcclZeroGetLastError(), o->expect_fail) == NULL)
        mr_case_fail(&c, "the load error does not name %s: %s", o->expect_fail,
                     qcclZeroGetLastError());
      else if (t->verbose)
        printf("load refused as expected: %s\n", qcclZeroGetLastError());
    }
    if (!o->expect_fail && r != qcclSuccess)
      mr_die(t, "qcclZeroLoad(%s): %s", o->load, qcclZeroGetLastError());
    /* resharding is exact: masters and moments equal the saved ones bit for bit */
    FILE* f = o->expect_fail ? NULL : open_in(o->load, "state", o->start, "rb");
    if (f == NULL && !o->expect_fail)
      mr_die(t, "no state file of step %d in %s", o->start, o->load);
    float* want = malloc(sizeof(float) * 200);
    for (int p = 0; p < NP && f != NULL; p++)
      for (int a = 0; a < 3; a++) {
        if (fread(want, sizeof(float), g_count[p], f) != g_count[p]) mr_die(t, "short state file");
        if (a == 0)
          ZOK(qcclZeroGetMaster(z, p, fm[p]));
        else
          ZOK(qcclZeroGetOptimizerState(z, p, a - 1, fm[p]));
        if (memcmp(want, fm[p], g_count[p] * sizeof(float)) != 0)
          mr_case_fail(&c, "after the load, %s of %s differs from the saved one",
                       a == 0   ? "the master"
                       : a == 1 ? "the first moment"
                                : "the second moment",
                       g_names[p]);
      }
    free(want);
    if (f != NULL) fclose(f);
    tstep = o->start;
    adopt = 1;
  }
  for (int step = o->load ? o->start : 0; step < o->steps && !c.bad && !o->expect_fail; step++) {
    for (int p = 0; p < NP; p++) {
      ZOK(qcclZeroGetMaster(z, p, fm[p]));
      for (size_t i = 0; i < g_count[p]; i++) wm[p][i] = fm[p][i];
    }
    if (o->save && step == o->save_at) {
      ZOK(qcclZeroSave(z, o->save));
      FILE* f = R == 0 ? open_in(o->save, "state", step, "wb") : NULL;
      for (int p = 0; p < NP; p++) {
        float* tmp = malloc(sizeof(float) * g_count[p]);
        for (int a = 1; a < 3; a++) {
          ZOK(qcclZeroGetOptimizerState(z, p, a - 1, tmp));
          if (a == 1 && f) fwrite(fm[p], sizeof(float), g_count[p], f);
          if (f) fwrite(tmp, sizeof(float), g_count[p], f);
        }
        free(tmp);
      }
      if (f) fclose(f);
      adopt = 1;
    }
    int check_expect = adopt;
    if (adopt) {
      float* tmp = malloc(sizeof(float) * 200);
      for (int p = 0; p < NP; p++)
        for (int a = 0; a < 2; a++) {
          ZOK(qcclZeroGetOptimizerState(z, p, a, tmp));
          for (size_t i = 0; i < g_count[p]; i++) {
            (a == 0 ? st[p].m : st[p].v)[i] = tmp[i];
            (a == 0 ? st[p].em : st[p].ev)[i] = 0.0;
          }
        }
      free(tmp);
      adopt = 0;
    }
    double scale;
    ZOK(qcclZeroGetLossScale(z, &scale));
    scale_before = scale;
    qcclZeroStepInfo_t info;
    double loss = 0.0;
    for (int k = 0; k < o->gas; k++) {
      const double* wl[NP];
      /* forward: gather each parameter, keep what was seen, release */
      for (int p = 0; p < NP; p++) {
        void* d;
        ZOK(qcclZeroGather(z, p, qcclZeroForward, &d));
        for (size_t i = 0; i < g_count[p]; i++) {
          double x = load_dt(o->dtype, d, i);
          if (k > 0 && x != seen[p][i] && !c.bad)
            mr_case_fail(&c, "step %d micro %d: %s[%zu] changed between micro-steps", step, k,
                         g_names[p], i);
          seen[p][i] = x;
        }
        ZOK(qcclZeroRelease(z, p));
        wl[p] = seen[p];
      }
      for (int p = 0; p < NP; p++) memset(g[p], 0, g_count[p] * sizeof(double));
      uint64_t first = (uint64_t)step * G + (uint64_t)(k * W + R) * (uint64_t)b;
      loss += model_grad(wl, dseed, first, b, g);
      /* backward, last layer first: gather again (hpZ: the secondary shard) */
      for (int p = NP - 1; p >= 0; p--) {
        void* d;
        ZOK(qcclZeroGather(z, p, qcclZeroBackward, &d));
        for (size_t i = 0; i < g_count[p]; i++)
          if (load_dt(o->dtype, d, i) != seen[p][i] && !c.bad)
            mr_case_fail(&c, "step %d: backward gather of %s[%zu] = %g, forward %g", step,
                         g_names[p], i, load_dt(o->dtype, d, i), seen[p][i]);
        for (size_t i = 0; i < g_count[p]; i++) store_dt(o->dtype, buf[p], i, g[p][i] * scale);
        if (o->inject == step && R == W - 1 && p == 2 && k == 0)
          store_dt(o->dtype, buf[p], 5, INFINITY);
        ZOK(qcclZeroGradient(z, p, buf[p]));
        ZOK(qcclZeroRelease(z, p));
      }
      ZOK(qcclZeroStep(z, &info));
      if (k + 1 < o->gas && info.boundary) mr_case_fail(&c, "boundary after micro-step %d", k);
    }
    if (!info.boundary) mr_case_fail(&c, "step %d: no boundary after %d micro-steps", step, o->gas);
    /* prefetch: from the second micro-step on, gathers are served by it */
    if (o->prefetch > 0 && o->stage == 3 && (step > 0 || o->gas > 1) && info.prefetched == 0)
      mr_case_fail(&c, "step %d: prefetch on, but no gather was served by a prefetch", step);
    if ((o->prefetch == 0 || o->stage < 3) && info.prefetched != 0)
      mr_case_fail(&c, "step %d: %llu prefetched gathers with prefetch off", step, info.prefetched);
    if (R == 0 && t->verbose) printf("step %d loss %.6f (rank 0)\n", step, loss / o->gas);
    /* the forward parameters against the masters */
    for (int p = 0; p < NP; p++) {
      size_t n = g_count[p];
      int quant = o->qwz && o->stage == 3 && n > o->persist;
      size_t s = (n + (size_t)W - 1) / (size_t)W, B = (size_t)cfg.qwzBlock;
      for (size_t i = 0; i < n; i++) {
        double want = to_dt(o->dtype, wm[p][i]);
        double bound = 0.0;
        if (quant) {
          size_t lo = (i / s) * s + ((i % s) / B) * B, hi = lo + B;
          if (hi > (i / s) * s + s) hi = (i / s) * s + s;
          if (hi > n) hi = n;
          double mx = 0.0;
          for (size_t j = lo; j < hi; j++) mx = fmax(mx, fabs(to_dt(o->dtype, wm[p][j])));
          bound = (mx / qmax_w / 2.0) * (1 + 1e-6) + up * (fabs(want) + mx / qmax_w) + 1e-30;
        }
        if (fabs(seen[p][i] - want) > bound && !c.bad)
          mr_case_fail(&c, "step %d: forward %s[%zu] = %.9g, master in dtype %.9g (bound %.3g)",
                       step, g_names[p], i, seen[p][i], want, bound);
      }
    }
    /* the reference: per micro-batch gradients, their sum and magnitudes */
    double sumsq = 0.0;
    for (int p = 0; p < NP; p++) {
      memset(gs[p], 0, g_count[p] * sizeof(double));
      memset(eg[p], 0, g_count[p] * sizeof(double));
    }
    double* gm[NP];
    double* mag[NP];
    for (int p = 0; p < NP; p++) {
      gm[p] = calloc(g_count[p], sizeof(double));
      mag[p] = calloc(g_count[p], sizeof(double));
    }
    double qerr = 0.0; /* qgZ: sum over ranks and micro-steps of max|g_r| / qmax / 2 (per step) */
    for (int k = 0; k < o->gas; k++) {
      double qk_sum = 0.0;
      for (int r = 0; r < W; r++) {
        for (int p = 0; p < NP; p++) memset(gm[p], 0, g_count[p] * sizeof(double));
        const double* wl[NP];
        for (int p = 0; p < NP; p++) wl[p] = seen[p];
        model_grad(wl, dseed, (uint64_t)step * G + (uint64_t)(k * W + r) * (uint64_t)b, b, gm);
        double mx = 0.0;
        for (int p = 0; p < NP; p++)
          for (size_t i = 0; i < g_count[p]; i++) {
            gs[p][i] += gm[p][i];
            mag[p][i] += fabs(gm[p][i]);
            mx = fmax(mx, fabs(to_dt(o->dtype, gm[p][i] * scale)) / scale);
          }
        qk_sum += mx;
      }
      qerr += qk_sum / qmax_gi / 2.0 * (1 + 1e-6);
      /* the inter-node hop, and at stage 1 qcclAllReduceQ's gather, under the inter spec */
      int inter = (nnodes > 1) + (o->stage == 1);
      qerr += inter * qk_sum / qmax_ge / 2.0 * (1 + 1e-6);
    }
    const double n_avg = (double)W * o->gas;
    double terms = up + (double)(W + o->gas + 2) * U32 + (o->stage >= 2 ? up : 0.0);
    /* a 16-bit accumulation (data_types.grad_accum_dtype; by default the
     * dtype when gas is 1) rounds the sum, at most its sum of magnitudes
     * times u_a, at every addition into it (the first is exact when the
     * types agree) and, at stage 1, in the all-reduce (f32 sums, rounded
     * once into the accumulation's type) */
    const qcclDataType_t adt = o->accum != QCCL_ZERO_GRAD_ACCUM_AUTO ? (qcclDataType_t)o->accum
                               : o->gas == 1                         ? o->dtype
                                                                     : qcclFloat32;
    if (adt != qcclFloat32)
      terms += u_of(adt) * (double)(o->gas - (adt == o->dtype ? 1 : 0) + (o->stage == 1 ? 1 : 0));
    for (int p = 0; p < NP; p++)
      for (size_t i = 0; i < g_count[p]; i++) {
        gs[p][i] /= n_avg;
        sumsq += gs[p][i] * gs[p][i];
        eg[p][i] = (terms * mag[p][i] + (o->qgz ? qerr : 0.0)) / n_avg;
      }
    for (int p = 0; p < NP; p++) {
      free(gm[p]);
      free(mag[p]);
    }
    double norm = sqrt(sumsq);
    int overflow = o->inject == step;
    if (info.overflow != overflow)
      mr_case_fail(&c, "step %d: overflow %d, expected %d", step, info.overflow, overflow);
    if (overflow) {
      if (info.stepped) mr_case_fail(&c, "step %d: stepped despite the overflow", step);
      if (o->dtype == qcclFloat16 && info.lossScale != scale_before / 2)
        mr_case_fail(&c, "step %d: loss scale %g after the overflow, expected %g", step,
                     info.lossScale, scale_before / 2);
      if (info.step != (unsigned long long)tstep)
        mr_case_fail(&c, "step %d: step counter %llu after a skip, expected %d", step, info.step,
                     tstep);
      for (int p = 0; p < NP; p++) {
        float* now = calloc(g_count[p], sizeof(float));
        ZOK(qcclZeroGetMaster(z, p, now));
        if (memcmp(now, fm[p], g_count[p] * sizeof(float)) != 0 && !c.bad)
          mr_case_fail(&c, "step %d: %s changed in a skipped step", step, g_names[p]);
        free(now);
      }
      continue;
    }
    tstep++;
    if (!info.stepped || info.step != (unsigned long long)tstep)
      mr_case_fail(&c, "step %d: stepped %d, step counter %llu (expected %d)", step, info.stepped,
                   info.step, tstep);
    double ne = 0.0;
    for (int p = 0; p < NP; p++)
      for (size_t i = 0; i < g_count[p]; i++) ne += eg[p][i] * eg[p][i];
    ne = sqrt(ne);
    if (fabs(info.gradNorm - norm) > 2 * ne + 1e-12 * norm)
      mr_case_fail(&c, "step %d: gradient norm %.12g, reference %.12g (bound %.3g)", step,
                   info.gradNorm, norm, 2 * ne);
    double coef = 1.0, ecoef = 0.0;
    if (o->clip > 0.0 && o->clip / (norm + 1e-6) < 1.0) {
      coef = o->clip / (norm + 1e-6);
      ecoef = coef * (ne / norm) * 1.01 + 2 * U32 * coef;
    }
    for (int p = 0; p < NP; p++) {
      for (size_t i = 0; i < g_count[p]; i++) {
        double gi = gs[p][i];
        eg[p][i] = eg[p][i] * coef + fabs(gi) * ecoef + 2 * U32 * fabs(gi * coef);
        gs[p][i] = gi * coef;
      }
      memcpy(wr[p], wm[p], g_count[p] * sizeof(double));
      ref_step(&ro, tstep, g_count[p], wr[p], gs[p], eg[p], &st[p], bnd[p]);
    }
    for (int p = 0; p < NP && !c.bad; p++) {
      ZOK(qcclZeroGetMaster(z, p, fm[p]));
      for (size_t i = 0; i < g_count[p]; i++) {
        double d = fabs((double)fm[p][i] - wr[p][i]);
        if (!(d <= bnd[p][i])) {
          mr_case_fail(&c, "step %d: %s[%zu] = %.9g, reference %.9g (|diff| %.3g > bound %.3g)",
                       step, g_names[p], i, fm[p][i], wr[p][i], d, bnd[p][i]);
          break;
        }
      }
    }
    if (check_expect && o->save && R == 0) { /* the uninterrupted run's step after the save */
      FILE* f = open_in(o->save, "expect", step, "wb");
      for (int p = 0; f && p < NP; p++) {
        fwrite(fm[p], sizeof(float), g_count[p], f);
        fwrite(bnd[p], sizeof(double), g_count[p], f);
      }
      if (f) fclose(f);
    }
    if (check_expect && o->load) { /* the same step after the load: within both bounds */
      FILE* f = open_in(o->load, "expect", step, "rb");
      if (f == NULL) mr_die(t, "no expect file of step %d in %s", step, o->load);
      float* ef = malloc(sizeof(float) * 200);
      double* eb = malloc(sizeof(double) * 200);
      for (int p = 0; p < NP; p++) {
        if (fread(ef, sizeof(float), g_count[p], f) != g_count[p] ||
            fread(eb, sizeof(double), g_count[p], f) != g_count[p])
          mr_die(t, "short expect file");
        for (size_t i = 0; i < g_count[p]; i++) {
          double d = fabs((double)fm[p][i] - ef[i]);
          if (!(d <= bnd[p][i] + eb[i] + 1e-15) && !c.bad)
            mr_case_fail(&c,
                         "step %d after the load: %s[%zu] = %.9g, the uninterrupted run %.9g "
                         "(|diff| %.3g > %.3g)",
                         step, g_names[p], i, fm[p][i], ef[i], d, bnd[p][i] + eb[i]);
        }
      }
      free(ef);
      free(eb);
      fclose(f);
    }
    if (t->verbose && R == 0) {
      double worst = 0.0;
      for (int p = 0; p < NP; p++)
        for (size_t i = 0; i < g_count[p]; i++)
          if (bnd[p][i] > 0) worst = fmax(worst, fabs((double)fm[p][i] - wr[p][i]) / bnd[p][i]);
      printf("  step %d: norm %.6g, largest |diff| / bound %.3f, prefetched gathers %llu\n", step,
             norm, worst, info.prefetched);
    }
  }
  ZOK(qcclZeroDestroy(z));
  for (int p = 0; p < NP; p++) {
    free(wm[p]);
    free(seen[p]);
    free(g[p]);
    free(gs[p]);
    free(eg[p]);
    free(bnd[p]);
    free(wr[p]);
    free(fm[p]);
    free(buf[p]);
    free(st[p].m);
    free(st[p].v);
    free(st[p].em);
    free(st[p].ev);
  }
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  for (int l = 0; l < NL; l++) {
    g_count[2 * l] = (size_t)g_dims[l] * (size_t)g_dims[l + 1];
    g_count[2 * l + 1] = (size_t)g_dims[l + 1];
  }
  opts_t o = {0};
  const char* dt = mr_opt(&t, "--dtype");
  o.dtype = dt == NULL || strcmp(dt, "f32") == 0 ? qcclFloat32
            : strcmp(dt, "bf16") == 0            ? qcclBfloat16
                                                 : qcclFloat16;
  o.gas = (int)opt_size(&t, "--gas", 1);
  o.batch = (int)opt_size(&t, "--batch", 3);
  o.steps = (int)opt_size(&t, "--steps", 6);
  o.clip = mr_opt(&t, "--clip") ? atof(mr_opt(&t, "--clip")) : 0.0;
  o.qwz = mr_flag(&t, "--qwz");
  o.qgz = mr_flag(&t, "--qgz");
  o.hpz = mr_flag(&t, "--hpz");
  o.inject = mr_opt(&t, "--inject-inf") ? atoi(mr_opt(&t, "--inject-inf")) : -1;
  o.bucket = opt_size(&t, "--bucket", 100);
  o.persist = opt_size(&t, "--persist", 16);
  o.save = mr_opt(&t, "--save");
  o.save_at = (int)opt_size(&t, "--save-at", 0);
  o.load = mr_opt(&t, "--load");
  o.start = (int)opt_size(&t, "--start", 0);
  o.expect_fail = mr_opt(&t, "--expect-fail");
  o.prefetch = opt_size(&t, "--prefetch", 0);
  const char* ac = mr_opt(&t, "--accum");
  o.accum = ac == NULL                ? QCCL_ZERO_GRAD_ACCUM_AUTO
            : strcmp(ac, "f32") == 0  ? qcclFloat32
            : strcmp(ac, "bf16") == 0 ? qcclBfloat16
            : strcmp(ac, "f16") == 0  ? qcclFloat16
                                      : QCCL_ZERO_GRAD_ACCUM_AUTO;
  /* --stages 1,2,3 and --opts adamw,sgd run every combination */
  const char* stages = mr_opt(&t, "--stages");
  const char* opts = mr_opt(&t, "--opts");
  if (stages == NULL) stages = "1,2,3";
  if (opts == NULL) opts = "adamw";
  for (const char* s = stages; *s; s++) {
    if (*s < '1' || *s > '3') continue;
    o.stage = *s - '0';
    char list[128];
    snprintf(list, sizeof list, "%s", opts);
    for (char* tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ",")) {
      o.opt = parse_opt(tok);
      if (o.opt < 0) mr_die(&t, "--opts: unknown optimizer '%s'", tok);
      run(&t, &o);
    }
  }
  return mr_finish(&t);
}
