/*
 * zpp_common.c - what the ZeRO++ collectives share: the per-communicator
 * state (rank map, policy, comm-owned residuals, scratch), the argument
 * checks of the entry points, and the runner of a call or of a bucket of
 * calls.
 *
 * Buckets: consecutive calls of a group with the same kind, communicator,
 * data type, op and quantization (and no error feedback or hpZ shard) are
 * fused. Their data is packed into one tensor per destination (for the
 * reduce-scatter: block j of the bucket is the concatenation of block j of
 * every call; for the all-gather: the concatenation of the shards), run as
 * one call, and unpacked: one message per peer and hop for the whole
 * bucket, at the cost of one copy in and one out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/coll.h"
#include "collectives/engine.h"
#include "collectives/flat.h"
#include "collectives/hier.h"
#include "collectives/node.h"
#include "collectives/group.h"
#include "core/dtype.h"
#include "core/log.h"
#include "collectives/zeropp/zpp.h"

void zpp_comm_free(struct zpp_comm* z) {
  if (z == NULL) return;
  for (zpp_residual_t* r = z->residuals; r;) {
    zpp_residual_t* next = r->next;
    free(r->buf);
    free(r);
    r = next;
  }
  for (int i = 0; i < ZPP_NSCRATCH; i++) free(z->scratch[i]);
  free(z);
}

qcclResult_t zpp_state(qcclComm_t comm, struct zpp_comm** out) {
  if (comm->zero == NULL) {
    struct zpp_comm* z = calloc(1, sizeof *z);
    if (!z) return QCCL_ERR(qcclSystemError, "out of memory");
    comm->zero = z;
  }
  *out = comm->zero;
  return qcclSuccess;
}

qcclResult_t zpp_scratch(qcclComm_t comm, int which, size_t bytes, void** out) {
  struct zpp_comm* z = NULL;
  QCCL_CHECK(zpp_state(comm, &z));
  if (bytes == 0) bytes = 1;
  if (bytes > z->scratch_bytes[which]) {
    free(z->scratch[which]);
    z->scratch[which] = NULL;
    z->scratch_bytes[which] = 0;
    void* p = malloc(bytes);
    if (!p) return QCCL_ERR(qcclSystemError, "out of memory (%zu bytes of scratch)", bytes);
    z->scratch[which] = p;
    z->scratch_bytes[which] = bytes;
  }
  *out = z->scratch[which];
  return qcclSuccess;
}

qcclResult_t zpp_residual(qcclComm_t comm, int tag, size_t count, float** out) {
  struct zpp_comm* z = NULL;
  QCCL_CHECK(zpp_state(comm, &z));
  zpp_residual_t* r = z->residuals;
  while (r && r->tag != tag) r = r->next;
  if (r == NULL) {
    r = calloc(1, sizeof *r);
    if (!r) return QCCL_ERR(qcclSystemError, "out of memory");
    r->tag = tag;
    r->next = z->residuals;
    z->residuals = r;
  }
  if (r->count != count) {
    if (r->count != 0)
      QCCL_INFO(LOG_ZERO, "error-feedback residual %d: %zu floats now (was %zu): reset", tag, count,
                r->count);
    free(r->buf);
    r->buf = calloc(count ? count : 1, sizeof(float));
    r->count = r->buf ? count : 0;
    if (!r->buf) return QCCL_ERR(qcclSystemError, "out of memory (%zu floats of residual)", count);
  }
  *out = r->buf;
  return qcclSuccess;
}

qcclResult_t zpp_isa(quant_isa_t* isa) {
  return quant_isa_default(isa);
}

/* ---- checks ---- */

qcclResult_t zpp_check_type(const char* fn, qcclDataType_t t) {
  if (t != qcclFloat32 && t != qcclFloat16 && t != qcclBfloat16)
    return QCCL_ERR(qcclInvalidArgument,
                    "%s: datatype=%d is not qcclFloat32, qcclFloat16 or qcclBfloat16", fn, (int)t);
  return qcclSuccess;
}

qcclResult_t zpp_check_spec(const char* fn, const char* what, const qcclQuantSpec_t* spec,
                            quant_params_t* p) {
  if (spec == NULL) return QCCL_ERR(qcclInvalidArgument, "%s: %s is NULL", fn, what);
  qcclResult_t r = quant_params_from_spec(spec, p);
  if (r != qcclSuccess) {
    char msg[QCCL_LAST_ERROR_BYTES];
    snprintf(msg, sizeof msg, "%s", err_last());
    /* quant's message names the field as spec->...; name it as the caller's */
    const char* field = strncmp(msg, "spec", 4) == 0 ? msg + 4 : msg;
    return QCCL_ERR(r, "%s: %s%s", fn, what, field);
  }
  return qcclSuccess;
}

qcclResult_t zpp_check_cfg(const char* fn, const qcclReduceScatterQConfig_t* cfg,
                           quant_params_t* intra, quant_params_t* inter) {
  static const qcclReduceScatterQConfig_t def = QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER;
  if (cfg == NULL) cfg = &def;
  if (cfg->size != sizeof(qcclReduceScatterQConfig_t) ||
      cfg->magic != QCCL_REDUCESCATTERQ_CONFIG_MAGIC || cfg->version != 1u)
    return QCCL_ERR(qcclInvalidArgument,
                    "%s: cfg has a wrong size, magic or version: "
                    "start from QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER",
                    fn);
  QCCL_CHECK(zpp_check_spec(fn, "cfg->intra", &cfg->intra, intra));
  QCCL_CHECK(zpp_check_spec(fn, "cfg->inter", &cfg->inter, inter));
  if (intra->block != inter->block)
    return QCCL_ERR(qcclInvalidArgument,
                    "%s: cfg->inter.block=%d differs from cfg->intra.block=%d (the hops must share "
                    "the block size)",
                    fn, inter->block, intra->block);
  if (intra->rotate != inter->rotate || (intra->rotate && intra->seed != inter->seed))
    return QCCL_ERR(qcclInvalidArgument,
                    "%s: cfg->inter.rotate / seed differ from cfg->intra's (the hops must share "
                    "the rotation)",
                    fn);
  if (cfg->errorFeedback != 0 && cfg->errorFeedback != 1)
    return QCCL_ERR(qcclInvalidArgument, "%s: cfg->errorFeedback=%d is not 0 or 1", fn,
                    cfg->errorFeedback);
  return qcclSuccess;
}

qcclResult_t zpp_fail(qcclComm_t comm, qcclResult_t r) {
  if (r == qcclSuccess) return r;
  if (comm != NULL && comm->magic == COMM_MAGIC) {
    if (r == comm->async_error && r != qcclInvalidArgument && r != qcclInvalidUsage) {
      snprintf(comm->last_error, sizeof comm->last_error, "%s", err_last());
      return r;
    }
    return comm_fail(comm, r);
  }
  return r;
}

/* ---- plans ---- */

coll_args_t zpp_plan_args(const zpp_op_t* op) {
  coll_args_t a = {(coll_kind_t)(COLL_NUM_KINDS + (int)op->kind),
                   op->send,
                   op->recv,
                   op->count,
                   op->dt,
                   op->op,
                   -1};
  return a;
}

void zpp_plan_init(zpp_plan_t* z, const zpp_op_t* op) {
  z->key = *op;
  z->key.send = NULL;
  z->key.recv = NULL;
  z->key.residual = NULL;
  z->key.sec = NULL;
  z->key.stream = NULL;
}

static int zpp_params_equal(const quant_params_t* a, const quant_params_t* b);

int zpp_plan_same(const plan_t* p, const void* ctx) {
  const zpp_op_t* k = &((const zpp_plan_t*)p)->key;
  const zpp_op_t* op = ctx;
  return k->plain == op->plain && k->ef == op->ef && zpp_params_equal(&k->q1, &op->q1) &&
         zpp_params_equal(&k->q2, &op->q2);
}

qcclResult_t zpp_plain_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  int gather = a->kind == COLL_ALLGATHER;
  if (comm->nnodes <= 1)
    return gather ? node_allgather_plan(comm, a, out) : node_alltoall_plan(comm, a, out);
  if (gather && comm->rail != NULL) return hier_allgather_plan(comm, a, out);
  return gather ? flat_allgather_plan(comm, a, out) : flat_alltoall_plan(comm, a, out);
}

static const plan_build_fn zpp_builders[] = {
    [ZPP_AGQ] = zpp_agq_plan, [ZPP_RSQ] = zpp_rsq_plan, [ZPP_ARQ] = zpp_arq_plan};

/* Runs op (with its residual, NULL for none) through the plan of its
 * communicator's cache. */
static qcclResult_t zpp_run_plan(const zpp_op_t* op, float* residual) {
  coll_args_t a = zpp_plan_args(op);
  plan_t* p;
  QCCL_CHECK(plan_get(op->comm, &a, zpp_builders[op->kind], op, &p));
  zpp_plan_t* z = (zpp_plan_t*)p;
  z->residual = residual;
  z->sec = op->sec;
  z->gen = op->gen;
  qcclResult_t r = plan_drive(p);
  plan_put(p);
  return r;
}

/* ---- running calls ---- */

qcclResult_t zpp_run_one(const zpp_op_t* op) {
  qcclComm_t comm = op->comm;
  coll_stats_enter(comm, op->slot, 1);
  qcclResult_t r = qcclSuccess;
  float* residual = NULL;
  if (op->count == 0) goto done;
  if ((op->kind == ZPP_RSQ || op->kind == ZPP_ARQ) && op->ef) {
    size_t rc = op->kind == ZPP_RSQ ? op->count
                                    : (op->count + (size_t)comm->nranks - 1) / (size_t)comm->nranks;
    size_t need = zpp_rsq_residual_count(comm, rc, &op->q2);
    if (need == 0) {
      QCCL_INFO(LOG_ZERO, "error feedback: no inter-node hop on this communicator (ignored)");
    } else if (op->residual) {
      residual = op->residual;
    } else {
      r = zpp_residual(comm, op->residual_tag, need, &residual);
      if (r != qcclSuccess) goto done;
    }
  }
  r = zpp_run_plan(op, residual);
done:
  coll_stats_leave(comm);
  return zpp_fail(comm, r);
}

static int zpp_params_equal(const quant_params_t* a, const quant_params_t* b) {
  return a->bits == b->bits && a->block == b->block && a->asym == b->asym &&
         a->stochastic == b->stochastic && a->rotate == b->rotate && a->seed == b->seed;
}

static int zpp_fusable(const zpp_op_t* a, const zpp_op_t* b) {
  if (a->comm != b->comm || a->kind != b->kind || a->dt != b->dt || a->slot != b->slot) return 0;
  if (a->kind == ZPP_ARQ || a->ef || b->ef || a->sec || b->sec || a->plain || b->plain) return 0;
  if (a->kind == ZPP_RSQ && (a->op != b->op || !zpp_params_equal(&a->q2, &b->q2))) return 0;
  return zpp_params_equal(&a->q1, &b->q1);
}

/* Runs ops[0..n) (all fusable) as one call. */
static qcclResult_t zpp_run_bucket(zpp_op_t* const* ops, int n) {
  if (n == 1) return zpp_run_one(ops[0]);
  const zpp_op_t* o = ops[0];
  qcclComm_t comm = o->comm;
  size_t w = (size_t)comm->nranks, es = dtype_size(o->dt), total = 0;
  for (int i = 0; i < n; i++) total += ops[i]->count;
  QCCL_INFO(LOG_ZERO, "group: %d %s calls fused into one bucket of %zu elements per rank", n,
            o->kind == ZPP_AGQ ? "AllGatherQ" : "ReduceScatterQ", total);
  coll_stats_enter(comm, o->slot, (uint64_t)n);
  qcclResult_t r = qcclSuccess;
  char *in = NULL, *out = NULL;
  size_t in_elems = o->kind == ZPP_AGQ ? total : total * w;
  size_t out_elems = o->kind == ZPP_AGQ ? total * w : total;
  in = malloc(in_elems * es + 1);
  out = malloc(out_elems * es + 1);
  if (!in || !out) {
    r = QCCL_ERR(qcclSystemError, "out of memory (a bucket of %zu elements)", total);
    goto done;
  }
  if (o->kind == ZPP_AGQ) {
    size_t off = 0;
    for (int i = 0; i < n; i++) {
      copy_data(in + off * es, ops[i]->send, ops[i]->count * es);
      off += ops[i]->count;
    }
    zpp_op_t f = *o;
    f.send = in;
    f.recv = out;
    f.count = total;
    f.sec = NULL;
    r = zpp_run_plan(&f, NULL);
    if (r != qcclSuccess) goto done;
    off = 0;
    for (int i = 0; i < n; i++) {
      size_t c = ops[i]->count;
      for (size_t j = 0; j < w; j++)
        copy_data((char*)ops[i]->recv + j * c * es, out + (j * total + off) * es, c * es);
      off += c;
    }
  } else {
    size_t off = 0;
    for (int i = 0; i < n; i++) {
      size_t c = ops[i]->count;
      for (size_t j = 0; j < w; j++)
        copy_data(in + (j * total + off) * es, (const char*)ops[i]->send + j * c * es, c * es);
      off += c;
    }
    zpp_op_t f = *o;
    f.send = in;
    f.recv = out;
    f.count = total;
    r = zpp_run_plan(&f, NULL);
    if (r != qcclSuccess) goto done;
    off = 0;
    for (int i = 0; i < n; i++) {
      copy_data(ops[i]->recv, out + off * es, ops[i]->count * es);
      off += ops[i]->count;
    }
  }
done:
  free(in);
  free(out);
  coll_stats_leave(comm);
  return zpp_fail(comm, r);
}

qcclResult_t zpp_run_ops(zpp_op_t* const* ops, int n) {
  int i = 0;
  while (i < n) {
    int j = i + 1;
    /* calls of count 0 are no-ops: leave them out of buckets */
    if (ops[i]->count > 0)
      while (j < n && ops[j]->count > 0 && zpp_fusable(ops[i], ops[j])) j++;
    QCCL_CHECK(zpp_run_bucket(ops + i, j - i));
    i = j;
  }
  return qcclSuccess;
}

/* The ZeRO++ calls as groups and streams carry them (group.h). */

static uint64_t zpp_agree_spec(uint64_t h, const quant_params_t* q) {
  h = coll_agree_mix(h, (uint64_t)q->bits);
  h = coll_agree_mix(h, (uint64_t)q->block);
  h = coll_agree_mix(h, (uint64_t)q->asym);
  h = coll_agree_mix(h, (uint64_t)q->stochastic);
  h = coll_agree_mix(h, (uint64_t)q->rotate);
  return coll_agree_mix(h, (uint64_t)q->seed);
}

/* The failure agreement's record of a call (agree.c): its kind after the
 * plain ones, and a hash of its quantization specs and options. */
static qcclResult_t zpp_group_begin(qcclComm_t comm, const void* rec) {
  const zpp_op_t* z = rec;
  uint64_t spec = coll_agree_mix(1, (uint64_t)z->plain);
  spec = zpp_agree_spec(zpp_agree_spec(spec, &z->q1), &z->q2);
  spec = coll_agree_mix(spec, (uint64_t)z->ef);
  uint64_t words[COLL_AGREE_WORDS];
  coll_agree_record((int)COLL_NUM_KINDS + (int)z->kind, z->count, z->dt, z->op, -1, spec, words);
  return coll_agree_run(comm, words, NULL);
}

static qcclResult_t zpp_group_run(void* const* recs, int n) {
  return zpp_run_ops((zpp_op_t* const*)recs, n);
}

static const group_kind_t zpp_group_kind = {sizeof(zpp_op_t), zpp_group_begin, zpp_group_run};

qcclResult_t zpp_submit(qcclComm_t comm, const zpp_op_t* op) {
  return group_submit_call(comm, &zpp_group_kind, op, op->stream);
}
