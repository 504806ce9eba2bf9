/*
 * zero_layout.c - turns the registered parameters into sharded units (see
 * zero.h for the layout) and allocates every rank's part of them: master
 * and optimizer-state shards, gradient accumulation (in its own type,
 * zero_grad.c), the resident full
 * parameters (stages 1-2 and persistent units) or the parameter shard and
 * the hpZ secondary shard (stage 3). Initial values come from the
 * registration (the same on every rank), so no communication is needed.
 */
#include <stdlib.h>
#include <string.h>

#include "zero.h"

static int zero_persistent(const qcclZero_t z, const zero_param_t* p) {
  return z->cfg.stage < 3 || p->count <= z->cfg.persistenceThreshold;
}

/* Groups the parameters into units (fills z->units' ranges, n, dtype). */
static qcclResult_t zero_make_units(qcclZero_t z) {
  z->units = calloc((size_t)z->nparams, sizeof(zero_unit_t));
  if (z->units == NULL) return zero_fail(qcclSystemError, "out of memory for %d units", z->nparams);
  size_t bucket = z->cfg.reduceBucketSize > 0 ? z->cfg.reduceBucketSize : 1;
  int nu = 0;
  for (int i = 0; i < z->nparams; i++) {
    zero_param_t* p = &z->params[i];
    int alone = !zero_persistent(z, p);
    zero_unit_t* u = nu > 0 ? &z->units[nu - 1] : NULL;
    int join =
        u != NULL && u->resident && !alone && u->dtype == p->dtype && u->n + p->count <= bucket;
    if (!join) {
      u = &z->units[nu++];
      u->first = i;
      u->n = 0;
      u->dtype = p->dtype;
      u->esize = zero_dtype_size(p->dtype);
      u->resident = !alone;
    }
    p->unit = (int)(u - z->units);
    p->offset = u->n;
    u->n += p->count;
    u->last = i + 1;
  }
  z->nunits = nu;
  return qcclSuccess;
}

static void* zero_alloc(size_t bytes) {
  return calloc(bytes > 0 ? bytes : 1, 1);
}

qcclResult_t zero_layout(qcclZero_t z) {
  if (z->laid_out) return qcclSuccess;
  if (z->nparams == 0) return zero_fail(qcclInvalidUsage, "no parameter was registered");
  ZERO_CHECK(zero_make_units(z));
  size_t W = (size_t)z->nranks, r = (size_t)z->rank;
  int stage = z->cfg.stage;
  for (int k = 0; k < z->nunits; k++) {
    zero_unit_t* u = &z->units[k];
    u->s = (u->n + W - 1) / W;
    u->mine = u->n > r * u->s ? (u->n - r * u->s < u->s ? u->n - r * u->s : u->s) : 0;
    size_t full = W * u->s;
    u->master = zero_alloc(u->s * sizeof(float));
    u->m = zero_alloc(u->s * sizeof(float));
    u->v = zero_alloc(u->s * sizeof(float));
    u->gdtype = zero_grad_dtype(z, u->dtype);
    u->gsize = zero_dtype_size(u->gdtype);
    u->gacc = zero_alloc((stage == 1 ? full : u->s) * u->gsize);
    if (u->master == NULL || u->m == NULL || u->v == NULL || u->gacc == NULL)
      return zero_fail(qcclSystemError, "out of memory for unit %d (%zu elements)", k, u->n);
    /* the full unit of initial values, in dtype */
    void* init = zero_alloc(full * u->esize);
    if (init == NULL) return zero_fail(qcclSystemError, "out of memory for unit %d", k);
    for (int i = u->first; i < u->last; i++) {
      zero_param_t* p = &z->params[i];
      if (p->init != NULL) memcpy((char*)init + p->offset * u->esize, p->init, p->count * u->esize);
      free(p->init);
      p->init = NULL;
    }
    for (size_t e = 0; e < u->mine; e++) u->master[e] = zero_load(init, u->dtype, r * u->s + e);
    if (u->resident) {
      u->full = init;
    } else {
      u->pshard = zero_alloc(u->s * u->esize);
      if (u->pshard == NULL) {
        free(init);
        return zero_fail(qcclSystemError, "out of memory for unit %d", k);
      }
      memcpy(u->pshard, (char*)init + r * u->s * u->esize, u->s * u->esize);
      free(init);
      if (z->cfg.hpzPartitionSize > 1) {
        ZERO_QCCL(z, qcclSecondaryCreate(z->comm, u->s, u->dtype, NULL, &u->sec));
      }
    }
    u->pending = u->last - u->first;
  }
  /* the prefetch stream: stage 3 with overlap_comm, a budget and something to gather */
  int gathered = 0;
  for (int k = 0; k < z->nunits; k++) gathered |= !z->units[k].resident;
  if (stage == 3 && z->cfg.overlapComm && z->cfg.prefetchBucketSize > 0 && gathered)
    ZERO_QCCL(z, qcclStreamCreate(&z->stream));
  z->laid_out = 1;
  return qcclSuccess;
}

void zero_layout_free(qcclZero_t z) {
  if (z->stream != NULL) {
    zero_prefetch_drain(z);
    qcclStreamDestroy(z->stream);
    z->stream = NULL;
  }
  for (int k = 0; k < z->nunits; k++) {
    zero_unit_t* u = &z->units[k];
    free(u->master);
    free(u->m);
    free(u->v);
    free(u->gacc);
    free(u->stage);
    free(u->full);
    free(u->pshard);
    qcclSecondaryDestroy(u->sec);
    if (u->ev != NULL) qcclEventDestroy(u->ev);
  }
  free(z->units);
  z->units = NULL;
  z->nunits = 0;
}
