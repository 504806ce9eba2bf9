/*
 * zero_step.c - the end of a micro-step and, at the accumulation boundary,
 * the optimizer step.
 *
 * At the boundary every rank holds the summed gradient of its shard (see
 * zero_grad.c; in the accumulation's type, read in f32). It is averaged (divided by W *
 * gradient_accumulation_steps and by the loss scale); its global L2 norm comes from one all-reduce
 * of the ranks' partial sums of squares in f64, which also carries overflow: an Inf or NaN on any
 * rank makes the sum non-finite on every rank, and every rank skips the step (the accumulation is
 * dropped and the loss scale lowered). Otherwise the gradient is clipped (DeepSpeed's rule: scaled
 * by max_norm / (norm + 1e-6) when that is below 1), the optimizer updates the master shard (LAMB
 * adds one all-reduce of per-parameter partial norms), and the new weights are published.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zero.h"

/* The step reads the gradient shard in chunks of this many elements,
 * widened to f32 and scaled into a buffer on the stack, whatever the
 * accumulation's type (the kernels are elementwise: chunks change no bit). */
#define ZERO_CHUNK 2048

static void zero_optim_args(const qcclZero_t z, zero_optim_args_t* a) {
  const qcclZeroConfig_t* c = &z->cfg;
  a->kind = c->optimizer;
  a->lr = (float)c->lr;
  a->beta1 = (float)c->beta1;
  a->beta2 = (float)c->beta2;
  a->eps = (float)c->eps;
  a->wd = (float)c->weightDecay;
  a->momentum = (float)c->momentum;
  a->nesterov = c->nesterov;
  a->bc1 = (float)(1.0 - pow(c->beta1, (double)z->step));
  a->bc2 = (float)(1.0 - pow(c->beta2, (double)z->step));
}

/* LAMB over every unit: directions (m and v updated), one all-reduce of
 * the per-parameter partial norms, then the update with each parameter's
 * trust ratio, the direction computed again from m and v (the gradient
 * shard is not f32, so it cannot hold the direction in between). */
static qcclResult_t zero_lamb_step(qcclZero_t z, const zero_optim_args_t* a, float gscale) {
  double* norms = calloc((size_t)z->nparams * 2, sizeof(double));
  if (norms == NULL) return zero_fail(qcclSystemError, "out of memory for LAMB norms");
  size_t r = (size_t)z->rank;
  for (int k = 0; k < z->nunits; k++) {
    zero_unit_t* u = &z->units[k];
    for (int i = u->first; i < u->last; i++) {
      zero_param_t* p = &z->params[i];
      size_t lo = r * u->s, hi = lo + u->mine; /* this rank's part of the unit */
      size_t plo = p->offset > lo ? p->offset : lo;
      size_t phi = p->offset + p->count < hi ? p->offset + p->count : hi;
      if (plo >= phi) continue;
      for (size_t e = plo - lo; e < phi - lo; e += ZERO_CHUNK) {
        size_t n = phi - lo - e < ZERO_CHUNK ? phi - lo - e : ZERO_CHUNK;
        float g[ZERO_CHUNK];
        zero_grad_load(z, u, e, n, gscale, g);
        zero_lamb_direction(a, u->master + e, u->m + e, u->v + e, g, n, &norms[2 * i],
                            &norms[2 * i + 1]);
      }
    }
  }
  qcclResult_t res =
      qcclAllReduce(norms, norms, (size_t)z->nparams * 2, qcclFloat64, qcclSum, z->comm, NULL);
  if (res != qcclSuccess) {
    free(norms);
    return zero_fail_call(res, z->comm, "LAMB norm all-reduce");
  }
  for (int k = 0; k < z->nunits; k++) {
    zero_unit_t* u = &z->units[k];
    for (int i = u->first; i < u->last; i++) {
      zero_param_t* p = &z->params[i];
      size_t lo = r * u->s, hi = lo + u->mine;
      size_t plo = p->offset > lo ? p->offset : lo;
      size_t phi = p->offset + p->count < hi ? p->offset + p->count : hi;
      if (plo >= phi) continue;
      double wn = sqrt(norms[2 * i]), un = sqrt(norms[2 * i + 1]);
      double ratio = (wn > 0.0 && un > 0.0) ? wn / un : 1.0;
      if (ratio > z->cfg.lambMaxCoeff) ratio = z->cfg.lambMaxCoeff;
      if (ratio < z->cfg.lambMinCoeff) ratio = z->cfg.lambMinCoeff;
      for (size_t e = plo - lo; e < phi - lo; e += ZERO_CHUNK) {
        size_t n = phi - lo - e < ZERO_CHUNK ? phi - lo - e : ZERO_CHUNK;
        float d[ZERO_CHUNK];
        zero_lamb_redo(a, u->master + e, u->m + e, u->v + e, d, n);
        zero_lamb_apply(u->master + e, d, n, (float)(a->lr * ratio));
      }
    }
  }
  free(norms);
  return qcclSuccess;
}

qcclResult_t qcclZeroStep(qcclZero_t z, qcclZeroStepInfo_t* info) {
  if (z == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroStep: zero is NULL");
  ZERO_CHECK(zero_layout(z));
  for (int i = 0; i < z->nparams; i++) {
    if (!z->params[i].grad_done)
      return zero_fail(qcclInvalidUsage,
                       "qcclZeroStep: the gradient of '%s' (parameter %d) was not given in this "
                       "micro-step",
                       z->params[i].name, i);
  }
  for (int i = 0; i < z->nparams; i++) z->params[i].grad_done = 0;
  for (int k = 0; k < z->nunits; k++) z->units[k].pending = z->units[k].last - z->units[k].first;
  ZERO_CHECK(zero_prefetch_drain(z));
  z->recording = 0; /* the first micro-step's gathers are the order */
  qcclZeroStepInfo_t out = {0, 0, 0, 0.0, z->scale, z->step, z->prefetch_hits, 0.0};
  if (++z->micro < z->cfg.gradAccumSteps) {
    if (info != NULL) *info = out;
    return qcclSuccess;
  }
  z->micro = 0;
  out.boundary = 1;
  ZERO_CHECK(zero_grad_reduce_boundary(z));

  double inv = 1.0 / ((double)z->nranks * (double)z->cfg.gradAccumSteps * z->scale);
  double sq = 0.0;
  for (int k = 0; k < z->nunits; k++) {
    zero_unit_t* u = &z->units[k];
    for (size_t e = 0; e < u->mine; e += ZERO_CHUNK) {
      size_t n = u->mine - e < ZERO_CHUNK ? u->mine - e : ZERO_CHUNK;
      float g[ZERO_CHUNK];
      zero_grad_load(z, u, e, n, 1.0f, g); /* exact: a widening, times 1 */
      for (size_t i = 0; i < n; i++) {
        double x = (double)g[i] * inv;
        sq += x * x;
      }
    }
  }
  ZERO_QCCL(z, qcclAllReduce(&sq, &sq, 1, qcclFloat64, qcclSum, z->comm, NULL));
  if (!isfinite(sq)) {
    zero_grad_clear(z);
    zero_scaler_update(z, 1);
    out.overflow = 1;
    out.gradNorm = sq;
    out.lossScale = z->scale;
    if (info != NULL) *info = out;
    return qcclSuccess;
  }
  double norm = sqrt(sq);
  double coef = 1.0;
  if (z->cfg.gradClip > 0.0) {
    double c = z->cfg.gradClip / (norm + 1e-6);
    if (c < 1.0) coef = c;
  }
  const float gscale = (float)(inv * coef);
  z->step++;
  zero_optim_args_t a;
  zero_optim_args(z, &a);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (a.kind == qcclZeroLamb) {
    ZERO_CHECK(zero_lamb_step(z, &a, gscale));
  } else {
    for (int k = 0; k < z->nunits; k++) {
      zero_unit_t* u = &z->units[k];
      for (size_t e = 0; e < u->mine; e += ZERO_CHUNK) {
        size_t n = u->mine - e < ZERO_CHUNK ? u->mine - e : ZERO_CHUNK;
        float g[ZERO_CHUNK];
        zero_grad_load(z, u, e, n, gscale, g); /* the averaged, clipped gradient in f32 */
        zero_optim_apply(&a, u->master + e, u->m + e, u->v + e, g, n);
      }
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  out.optimizerSeconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  zero_grad_clear(z);
  z->generation++;
  ZERO_CHECK(zero_publish(z));
  zero_scaler_update(z, 0);
  out.stepped = 1;
  out.gradNorm = norm;
  out.lossScale = z->scale;
  out.step = z->step;
  out.prefetched = z->prefetch_hits;
  if (info != NULL) *info = out;
  return qcclSuccess;
}
