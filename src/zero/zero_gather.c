/*
 * zero_gather.c - full parameters from shards.
 *
 * Stages 1-2 and persistent units keep the full parameters resident: a
 * gather only hands out the pointer, and zero_publish all-gathers the new
 * weights after every step. Stage 3 keeps a shard and gathers the full
 * unit around its use: forward gathers are qwZ (qcclAllGatherQ) when
 * quantized weights are on; with hpZ the forward gather also fills the
 * secondary shard (qcclAllGatherQSecondary, tagged with the generation)
 * and the backward gather is the node-local qcclSecondaryAllGather of that
 * generation, so a stale secondary shard is refused, never read. The
 * release frees the full copy. The order of the first micro-step's
 * gathers is recorded (for prefetch).
 */
#include <stdlib.h>
#include <string.h>

#include "zero.h"

static void zero_qwz_spec(const qcclZero_t z, qcclQuantSpec_t* s) {
  qcclQuantSpec_t d = QCCL_QUANT_SPEC_INITIALIZER;
  d.bits = z->cfg.qwzBits;
  d.block = z->cfg.qwzBlock;
  d.rotate = z->cfg.rotate;
  *s = d;
}

static qcclResult_t zero_record(qcclZero_t z, int unit) {
  if (!z->recording) return qcclSuccess;
  if (z->norder == z->cap_order) {
    int cap = z->cap_order ? 2 * z->cap_order : 64;
    int* o = realloc(z->order, (size_t)cap * sizeof(int));
    if (o == NULL) return zero_fail(qcclSystemError, "out of memory for the gather order");
    z->order = o;
    z->cap_order = cap;
  }
  z->order[z->norder++] = unit;
  return qcclSuccess;
}

/* Fills u->full from the shards (stage 3, not resident). */
static qcclResult_t zero_fill(qcclZero_t z, zero_unit_t* u, qcclZeroPhase_t phase) {
  size_t full = (size_t)z->nranks * u->s;
  if (u->full == NULL) {
    u->full = malloc((full > 0 ? full : 1) * u->esize);
    if (u->full == NULL) return zero_fail(qcclSystemError, "out of memory for a gathered unit");
  }
  qcclQuantSpec_t spec;
  zero_qwz_spec(z, &spec);
  const qcclQuantSpec_t* sp = z->cfg.quantizedWeights ? &spec : NULL;
  if (u->sec != NULL) {
    if (phase == qcclZeroBackward) {
      ZERO_QCCL(z, qcclSecondaryAllGather(u->sec, u->full, z->generation, NULL));
    } else {
      ZERO_QCCL(z, qcclAllGatherQSecondary(u->pshard, u->full, u->s, u->dtype, sp, u->sec,
                                           z->generation, z->comm, NULL));
    }
  } else if (sp != NULL) {
    ZERO_QCCL(z, qcclAllGatherQ(u->pshard, u->full, u->s, u->dtype, sp, z->comm, NULL));
  } else {
    ZERO_QCCL(z, qcclAllGather(u->pshard, u->full, u->s, u->dtype, z->comm, NULL));
  }
  return qcclSuccess;
}

qcclResult_t qcclZeroGather(qcclZero_t z, int id, qcclZeroPhase_t phase, void** data) {
  if (z == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroGather: zero is NULL");
  if (id < 0 || id >= z->nparams)
    return zero_fail(qcclInvalidArgument, "qcclZeroGather: id %d is not a parameter (0..%d)", id,
                     z->nparams - 1);
  if (phase != qcclZeroForward && phase != qcclZeroBackward)
    return zero_fail(qcclInvalidArgument, "qcclZeroGather: phase %d is not forward or backward",
                     (int)phase);
  if (data == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroGather: data is NULL");
  ZERO_CHECK(zero_layout(z));
  zero_param_t* p = &z->params[id];
  zero_unit_t* u = &z->units[p->unit];
  if (p->gathered)
    return zero_fail(qcclInvalidUsage,
                     "qcclZeroGather: '%s' is already gathered (release it first)", p->name);
  if (!u->resident && u->live == 0) {
    ZERO_CHECK(zero_record(z, p->unit));
    ZERO_CHECK(zero_fill(z, u, phase));
  }
  if (!u->resident) u->live++;
  p->gathered = 1;
  *data = (char*)u->full + p->offset * u->esize;
  return qcclSuccess;
}

qcclResult_t qcclZeroRelease(qcclZero_t z, int id) {
  if (z == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroRelease: zero is NULL");
  if (id < 0 || id >= z->nparams)
    return zero_fail(qcclInvalidArgument, "qcclZeroRelease: id %d is not a parameter (0..%d)", id,
                     z->nparams - 1);
  zero_param_t* p = &z->params[id];
  if (!p->gathered)
    return zero_fail(qcclInvalidUsage, "qcclZeroRelease: '%s' is not gathered", p->name);
  p->gathered = 0;
  zero_unit_t* u = &z->units[p->unit];
  if (!u->resident && --u->live == 0) {
    free(u->full);
    u->full = NULL;
  }
  return qcclSuccess;
}

qcclResult_t zero_publish(qcclZero_t z) {
  size_t r = (size_t)z->rank;
  for (int k = 0; k < z->nunits; k++) {
    zero_unit_t* u = &z->units[k];
    if (u->resident) {
      char* mine = (char*)u->full + r * u->s * u->esize;
      memset(mine, 0, u->s * u->esize);
      zero_from_f32(mine, u->dtype, u->master, u->mine);
      ZERO_QCCL(z, qcclAllGather(mine, u->full, u->s, u->dtype, z->comm, NULL));
    } else {
      memset(u->pshard, 0, u->s * u->esize);
      zero_from_f32(u->pshard, u->dtype, u->master, u->mine);
      if (u->sec != NULL) ZERO_QCCL(z, qcclSecondaryInvalidate(u->sec));
    }
  }
  return qcclSuccess;
}

/* Gathers array a (0 master, 1 first moment, 2 second moment) of parameter id. */
static qcclResult_t zero_get_full(qcclZero_t z, int id, int a, float* out, const char* fn) {
  if (z == NULL) return zero_fail(qcclInvalidArgument, "%s: zero is NULL", fn);
  if (id < 0 || id >= z->nparams)
    return zero_fail(qcclInvalidArgument, "%s: id %d is not a parameter (0..%d)", fn, id,
                     z->nparams - 1);
  if (out == NULL) return zero_fail(qcclInvalidArgument, "%s: out is NULL", fn);
  ZERO_CHECK(zero_layout(z));
  zero_param_t* p = &z->params[id];
  zero_unit_t* u = &z->units[p->unit];
  const float* src = a == 0 ? u->master : a == 1 ? u->m : u->v;
  float* all = malloc((size_t)z->nranks * u->s * sizeof(float) + sizeof(float));
  if (all == NULL) return zero_fail(qcclSystemError, "%s: out of memory", fn);
  qcclResult_t res = qcclAllGather(src, all, u->s, qcclFloat32, z->comm, NULL);
  if (res == qcclSuccess) memcpy(out, all + p->offset, p->count * sizeof(float));
  free(all);
  if (res != qcclSuccess) return zero_fail_call(res, z->comm, fn);
  return qcclSuccess;
}

qcclResult_t qcclZeroGetMaster(qcclZero_t z, int id, float* out) {
  return zero_get_full(z, id, 0, out, "qcclZeroGetMaster");
}

qcclResult_t qcclZeroGetOptimizerState(qcclZero_t z, int id, int which, float* out) {
  if (which != 0 && which != 1)
    return zero_fail(qcclInvalidArgument, "qcclZeroGetOptimizerState: which is %d (0 or 1)", which);
  return zero_get_full(z, id, which + 1, out, "qcclZeroGetOptimizerState");
}
