/*
 * zero_grad.c - gradients: their reduction across ranks and their
 * accumulation over micro-steps, in data_types.grad_accum_dtype.
 *
 * The accumulation's type (zero_grad_dtype): the configured one, or by
 * default the parameters' dtype when gradient_accumulation_steps is 1 and
 * fp32 when it is more. With one micro-step nothing is accumulated: the
 * reduction sums in f32 and rounds once into the parameters' dtype either
 * way, so the 16-bit shard holds exactly what an fp32 one would (the
 * ZeRO paper's 16 bytes per parameter at stage 3); over several
 * micro-steps fp32 keeps the sum from being rounded at every addition.
 *
 * Stage 1 adds each micro-step's gradient into an accumulation of every
 * whole unit and all-reduces it once, at the accumulation boundary
 * (qcclAllReduce sum, which sums in f32 and rounds once into the type;
 * qcclAllReduceQ when quantized gradients are on). Stages 2 and 3 keep
 * only the shard: a unit's gradients of one micro-step are staged in the
 * parameters' dtype and, as soon as the last of them arrives, one
 * reduce-scatter (qcclReduceScatter sum, f32 sums rounded once into the
 * dtype; or qgZ's qcclReduceScatterQ) hands each rank its shard, which is
 * added into its accumulation (the sum in f32, rounded once into the
 * accumulation's type). The averaging over ranks and micro-steps (and the
 * loss scale) is applied at the boundary, where the step reads the shard
 * in f32 (zero_grad_load).
 */
#include <stdlib.h>
#include <string.h>

#include "zero.h"

static void zero_qgz_config(const qcclZero_t z, int tag, qcclReduceScatterQConfig_t* c) {
  qcclReduceScatterQConfig_t d = QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER;
  d.intra.bits = z->cfg.qgzIntraBits;
  d.inter.bits = z->cfg.qgzInterBits;
  d.intra.block = d.inter.block = z->cfg.qgzBlock;
  d.intra.rotate = d.inter.rotate = z->cfg.rotate;
  d.errorFeedback = z->cfg.errorFeedback;
  d.residualTag = tag;
  *c = d;
}

qcclDataType_t zero_grad_dtype(const qcclZero_t z, qcclDataType_t dtype) {
  if (z->cfg.gradAccumDtype != QCCL_ZERO_GRAD_ACCUM_AUTO)
    return (qcclDataType_t)z->cfg.gradAccumDtype;
  return z->cfg.gradAccumSteps == 1 ? dtype : qcclFloat32;
}

void* zero_grad_shard(qcclZero_t z, zero_unit_t* u) {
  return z->cfg.stage == 1 ? (char*)u->gacc + (size_t)z->rank * u->s * u->gsize : u->gacc;
}

void zero_grad_load(qcclZero_t z, zero_unit_t* u, size_t lo, size_t n, float scale, float* out) {
  zero_to_f32_scaled(out, (const char*)zero_grad_shard(z, u) + lo * u->gsize, u->gdtype, n, scale);
}

void zero_grad_clear(qcclZero_t z) {
  for (int k = 0; k < z->nunits; k++) {
    zero_unit_t* u = &z->units[k];
    memset(u->gacc, 0, (z->cfg.stage == 1 ? (size_t)z->nranks * u->s : u->s) * u->gsize);
  }
}

qcclResult_t qcclZeroGradient(qcclZero_t z, int id, const void* grad) {
  if (z == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroGradient: zero is NULL");
  if (id < 0 || id >= z->nparams)
    return zero_fail(qcclInvalidArgument, "qcclZeroGradient: id %d is not a parameter (0..%d)", id,
                     z->nparams - 1);
  if (grad == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroGradient: grad is NULL");
  ZERO_CHECK(zero_layout(z));
  zero_param_t* p = &z->params[id];
  if (p->grad_done)
    return zero_fail(qcclInvalidUsage,
                     "qcclZeroGradient: the gradient of '%s' was already given in this micro-step",
                     p->name);
  zero_unit_t* u = &z->units[p->unit];
  p->grad_done = 1;
  u->pending--;
  if (z->cfg.stage == 1) {
    zero_accumulate((char*)u->gacc + p->offset * u->gsize, u->gdtype, grad, p->dtype, p->count);
    return qcclSuccess;
  }
  if (u->stage == NULL) {
    u->stage = calloc((size_t)z->nranks * u->s, u->esize);
    if (u->stage == NULL) return zero_fail(qcclSystemError, "out of memory for a gradient bucket");
    zero_transient(z, (long long)((size_t)z->nranks * u->s * u->esize));
  }
  memcpy((char*)u->stage + p->offset * u->esize, grad, p->count * u->esize);
  if (u->pending == 0) return zero_grad_reduce_unit(z, u);
  return qcclSuccess;
}

qcclResult_t zero_grad_reduce_unit(qcclZero_t z, zero_unit_t* u) {
  /* the first micro-step of a window into an accumulation of the dtype:
   * the reduction's result is the sum (0 + x rounds to x), so it lands there */
  int direct = z->micro == 0 && u->gdtype == u->dtype;
  void* shard = direct ? u->gacc : calloc(u->s > 0 ? u->s : 1, u->esize);
  if (shard == NULL) return zero_fail(qcclSystemError, "out of memory for a gradient shard");
  qcclResult_t res;
  if (z->cfg.quantizedGradients) {
    qcclReduceScatterQConfig_t c;
    zero_qgz_config(z, (int)(u - z->units), &c);
    res = qcclReduceScatterQ(u->stage, shard, u->s, u->dtype, qcclSum, &c, z->comm, NULL);
  } else {
    res = qcclReduceScatter(u->stage, shard, u->s, u->dtype, qcclSum, z->comm, NULL);
  }
  if (res != qcclSuccess) {
    if (!direct) free(shard);
    return zero_fail_call(res, z->comm, "gradient reduce-scatter");
  }
  if (!direct) {
    zero_accumulate(u->gacc, u->gdtype, shard, u->dtype, u->mine);
    free(shard);
  }
  /* the bucket's memory is returned: only the shard lives between micro-steps */
  free(u->stage);
  u->stage = NULL;
  zero_transient(z, -(long long)((size_t)z->nranks * u->s * u->esize));
  return qcclSuccess;
}

qcclResult_t zero_grad_reduce_boundary(qcclZero_t z) {
  if (z->cfg.stage != 1) return qcclSuccess;
  for (int k = 0; k < z->nunits; k++) {
    zero_unit_t* u = &z->units[k];
    size_t full = (size_t)z->nranks * u->s;
    if (z->cfg.quantizedGradients) {
      qcclReduceScatterQConfig_t c;
      zero_qgz_config(z, k, &c);
      ZERO_QCCL(z, qcclAllReduceQ(u->gacc, u->gacc, full, u->gdtype, qcclSum, &c, z->comm, NULL));
    } else {
      ZERO_QCCL(z, qcclAllReduce(u->gacc, u->gacc, full, u->gdtype, qcclSum, z->comm, NULL));
    }
  }
  return qcclSuccess;
}
