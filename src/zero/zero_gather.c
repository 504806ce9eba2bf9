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
 * release frees the full copy.
 *
 * Prefetch (stage 3 with overlap_comm and a stage3_prefetch_bucket_size):
 * the first micro-step records the order of its gathers (unit and phase);
 * in every later micro-step, each gather that follows that order queues
 * the fills of the next entries on a host stream (qcclStreamCreate), each
 * with an event, within the byte budget, so the communication of the next
 * layers overlaps the caller's compute; the gather of a prefetched unit
 * waits on its event only. A micro-step that leaves the order gathers
 * plainly from there on; every micro-step ends with the stream drained.
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

static qcclResult_t zero_record(qcclZero_t z, int entry) {
  if (z->norder == z->cap_order) {
    int cap = z->cap_order ? 2 * z->cap_order : 64;
    int* o = realloc(z->order, (size_t)cap * sizeof(int));
    if (o == NULL) return zero_fail(qcclSystemError, "out of memory for the gather order");
    z->order = o;
    z->cap_order = cap;
  }
  z->order[z->norder++] = entry;
  return qcclSuccess;
}

/* Fills u->full from the shards (stage 3, not resident), on stream. */
static qcclResult_t zero_fill(qcclZero_t z, zero_unit_t* u, int phase, qcclStream_t stream) {
  size_t full = (size_t)z->nranks * u->s;
  if (u->full == NULL) {
    u->full = malloc((full > 0 ? full : 1) * u->esize);
    if (u->full == NULL) return zero_fail(qcclSystemError, "out of memory for a gathered unit");
    zero_transient(z, (long long)(full * u->esize));
  }
  qcclQuantSpec_t spec;
  zero_qwz_spec(z, &spec);
  const qcclQuantSpec_t* sp = z->cfg.quantizedWeights ? &spec : NULL;
  if (u->sec != NULL) {
    if (phase == qcclZeroBackward) {
      ZERO_QCCL(z, qcclSecondaryAllGather(u->sec, u->full, z->generation, stream));
    } else {
      ZERO_QCCL(z, qcclAllGatherQSecondary(u->pshard, u->full, u->s, u->dtype, sp, u->sec,
                                           z->generation, z->comm, stream));
    }
  } else if (sp != NULL) {
    ZERO_QCCL(z, qcclAllGatherQ(u->pshard, u->full, u->s, u->dtype, sp, z->comm, stream));
  } else {
    ZERO_QCCL(z, qcclAllGather(u->pshard, u->full, u->s, u->dtype, z->comm, stream));
  }
  return qcclSuccess;
}

/* Prefetch: queues the fills of the next entries of the recorded order on
 * the stream, each followed by its unit's event, while the elements
 * prefetched and not yet gathered stay within stage3_prefetch_bucket_size
 * and those prefetched or live within stage3_max_live_parameters. It stops
 * at a unit still in use or already queued (its buffer is busy), so the
 * queued fills are always the contiguous window after the current gather.
 * Every rank makes the same gathers, so every rank queues the same fills
 * in the same order. */
static qcclResult_t zero_prefetch(qcclZero_t z) {
  if (z->pf_next < z->order_pos) z->pf_next = z->order_pos;
  while (z->pf_next < z->norder) {
    int entry = z->order[z->pf_next];
    zero_unit_t* u = &z->units[entry / 2];
    size_t elems = (size_t)z->nranks * u->s;
    if (u->live > 0 || u->prefetched) break;
    if (z->pf_elems > 0 && z->pf_elems + elems > z->cfg.prefetchBucketSize) break;
    if (z->pf_elems + z->live_elems + elems > z->cfg.maxLiveParameters) break;
    if (u->ev == NULL) ZERO_QCCL(z, qcclEventCreate(&u->ev));
    ZERO_CHECK(zero_fill(z, u, entry % 2, z->stream));
    ZERO_QCCL(z, qcclEventRecord(u->ev, z->stream));
    u->prefetched = 1;
    u->pf_phase = entry % 2;
    z->pf_elems += elems;
    z->pf_next++;
  }
  return qcclSuccess;
}

qcclResult_t zero_prefetch_drain(qcclZero_t z) {
  qcclResult_t res = qcclSuccess;
  if (z->stream != NULL) {
    res = qcclStreamSynchronize(z->stream);
    if (res != qcclSuccess) res = zero_fail_call(res, z->comm, "prefetch stream");
  }
  for (int k = 0; k < z->nunits; k++) {
    zero_unit_t* u = &z->units[k];
    if (!u->prefetched) continue;
    u->prefetched = 0;
    if (u->live == 0) {
      free(u->full);
      u->full = NULL;
      zero_transient(z, -(long long)((size_t)z->nranks * u->s * u->esize));
    }
  }
  z->pf_elems = 0;
  z->order_pos = z->pf_next = z->pf_broken = 0;
  return res;
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
    int entry = 2 * p->unit + (int)phase;
    if (z->recording) {
      ZERO_CHECK(zero_record(z, entry));
    } else if (!z->pf_broken) {
      if (z->order_pos < z->norder && z->order[z->order_pos] == entry)
        z->order_pos++;
      else
        z->pf_broken = 1; /* the trainer left the recorded order: plain gathers from here */
    }
    if (u->prefetched) {
      qcclResult_t res = qcclEventSynchronize(u->ev);
      if (res != qcclSuccess) return zero_fail_call(res, z->comm, "prefetched gather");
      u->prefetched = 0;
      z->pf_elems -= (size_t)z->nranks * u->s;
      if (u->pf_phase != (int)phase) {
        ZERO_CHECK(zero_fill(z, u, phase, NULL)); /* filled for the other phase */
      } else {
        z->prefetch_hits++;
      }
    } else {
      ZERO_CHECK(zero_fill(z, u, phase, NULL));
    }
    z->live_elems += (size_t)z->nranks * u->s;
    u->live++;
    if (z->stream != NULL && !z->recording && !z->pf_broken) ZERO_CHECK(zero_prefetch(z));
  } else if (!u->resident) {
    u->live++;
  }
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
    z->live_elems -= (size_t)z->nranks * u->s;
    free(u->full);
    u->full = NULL;
    zero_transient(z, -(long long)((size_t)z->nranks * u->s * u->esize));
    /* the unit's buffer is free again: the window may move on */
    if (z->stream != NULL && !z->recording && !z->pf_broken) ZERO_CHECK(zero_prefetch(z));
  }
  return qcclSuccess;
}

void zero_transient(qcclZero_t z, long long n) {
  z->transient = (size_t)((long long)z->transient + n);
  if (z->transient > z->peak_transient) z->peak_transient = z->transient;
}

qcclResult_t qcclZeroGetMemory(qcclZero_t z, qcclZeroMemory_t* mem) {
  if (z == NULL || mem == NULL)
    return zero_fail(qcclInvalidArgument, "qcclZeroGetMemory: %s is NULL",
                     z == NULL ? "zero" : "memory");
  ZERO_CHECK(zero_layout(z));
  qcclZeroMemory_t m = {0, 0, z->transient, z->peak_transient};
  size_t W = (size_t)z->nranks;
  for (int k = 0; k < z->nunits; k++) {
    const zero_unit_t* u = &z->units[k];
    m.stateBytes += 3 * u->s * sizeof(float) + (z->cfg.stage == 1 ? W : 1) * u->s * u->gsize;
    m.paramBytes += (u->resident ? W : 1) * u->s * u->esize;
  }
  *mem = m;
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
