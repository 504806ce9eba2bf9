/*
 * zero.c - the ZeRO engine's life cycle: creation (the configuration is
 * checked once, each bad field named), parameter registration, the small
 * local queries, and destruction. The work is in zero_layout.c (sharding),
 * zero_gather.c (full parameters), zero_grad.c (gradients), zero_step.c
 * (the optimizer step), zero_ckpt.c (checkpoints).
 */
#include <stdlib.h>
#include <string.h>

#include "zero.h"

static qcclResult_t zero_check_config(const qcclZeroConfig_t* c, int nranks, int local_size) {
  if (c->size != sizeof(qcclZeroConfig_t) || c->magic != QCCL_ZERO_CONFIG_MAGIC)
    return zero_fail(qcclInvalidArgument,
                     "qcclZeroCreate: config was not set from QCCL_ZERO_CONFIG_INITIALIZER");
#define ZERO_REQ(cond, key, ...) \
  if (!(cond)) return zero_fail(qcclInvalidArgument, "qcclZeroCreate: " key " " __VA_ARGS__)
  ZERO_REQ(c->stage >= 0 && c->stage <= 3, "zero_optimization.stage", "is %d (0..3)", c->stage);
  ZERO_REQ(c->gradAccumSteps >= 1, "gradient_accumulation_steps", "is %d (>= 1)",
           c->gradAccumSteps);
  ZERO_REQ(c->gradClip >= 0.0, "gradient_clipping", "is %g (>= 0)", c->gradClip);
  ZERO_REQ(c->optimizer >= qcclZeroAdamW && c->optimizer <= qcclZeroLamb, "optimizer.type",
           "is %d (not an optimizer)", (int)c->optimizer);
  ZERO_REQ(c->lr >= 0.0, "optimizer.params.lr", "is %g (>= 0)", c->lr);
  ZERO_REQ(c->beta1 >= 0.0 && c->beta1 < 1.0, "optimizer.params.betas[0]", "is %g ([0, 1))",
           c->beta1);
  ZERO_REQ(c->beta2 >= 0.0 && c->beta2 < 1.0, "optimizer.params.betas[1]", "is %g ([0, 1))",
           c->beta2);
  ZERO_REQ(c->eps > 0.0, "optimizer.params.eps", "is %g (> 0)", c->eps);
  ZERO_REQ(c->weightDecay >= 0.0, "optimizer.params.weight_decay", "is %g (>= 0)", c->weightDecay);
  ZERO_REQ(c->momentum >= 0.0 && c->momentum < 1.0, "optimizer.params.momentum", "is %g ([0, 1))",
           c->momentum);
  ZERO_REQ(!c->nesterov || c->momentum > 0.0, "optimizer.params.nesterov", "needs a momentum > 0");
  ZERO_REQ(c->lambMinCoeff >= 0.0 && c->lambMaxCoeff >= c->lambMinCoeff,
           "optimizer.params.max_coeff", "(%g) must be >= min_coeff (%g) >= 0", c->lambMaxCoeff,
           c->lambMinCoeff);
  ZERO_REQ(!(c->fp16 && c->bf16), "fp16.enabled", "and bf16.enabled are both set");
  ZERO_REQ(c->lossScale >= 0.0, "fp16.loss_scale", "is %g (>= 0)", c->lossScale);
  ZERO_REQ(c->initialScalePower >= 0 && c->initialScalePower <= 64, "fp16.initial_scale_power",
           "is %d (0..64)", c->initialScalePower);
  ZERO_REQ(c->lossScaleWindow >= 1, "fp16.loss_scale_window", "is %d (>= 1)", c->lossScaleWindow);
  ZERO_REQ(c->hysteresis >= 1, "fp16.hysteresis", "is %d (>= 1)", c->hysteresis);
  ZERO_REQ(c->minLossScale > 0.0, "fp16.min_loss_scale", "is %g (> 0)", c->minLossScale);
  ZERO_REQ(c->reduceBucketSize >= 1, "zero_optimization.reduce_bucket_size", "is 0 (>= 1)");
  ZERO_REQ(c->qwzBits == 8 || c->qwzBits == 4, "qccl.qwz_bits", "is %d (8 or 4)", c->qwzBits);
  ZERO_REQ(c->qgzIntraBits == 8 || c->qgzIntraBits == 4, "qccl.qgz_intra_bits", "is %d (8 or 4)",
           c->qgzIntraBits);
  ZERO_REQ(c->qgzInterBits == 8 || c->qgzInterBits == 4, "qccl.qgz_inter_bits", "is %d (8 or 4)",
           c->qgzInterBits);
  ZERO_REQ(c->qwzBlock >= 32 && c->qwzBlock <= 4096 && (c->qwzBlock & (c->qwzBlock - 1)) == 0,
           "qccl.qwz_block", "is %d (a power of two, 32..4096)", c->qwzBlock);
  ZERO_REQ(c->qgzBlock >= 32 && c->qgzBlock <= 4096 && (c->qgzBlock & (c->qgzBlock - 1)) == 0,
           "qccl.qgz_block", "is %d (a power of two, 32..4096)", c->qgzBlock);
  ZERO_REQ(c->hpzPartitionSize >= 0 && c->hpzPartitionSize <= nranks,
           "zero_optimization.zero_hpz_partition_size", "is %d (0..%d)", c->hpzPartitionSize,
           nranks);
  ZERO_REQ(c->hpzPartitionSize <= 1 || c->hpzPartitionSize == local_size,
           "zero_optimization.zero_hpz_partition_size",
           "is %d, but hpZ's secondary group is the node (qcclSecondaryCreate shards over the "
           "node's ranks), which has %d ranks here: set it to %d, or to 0 or 1 for no hpZ",
           c->hpzPartitionSize, local_size, local_size);
  ZERO_REQ(c->gradAccumDtype == QCCL_ZERO_GRAD_ACCUM_AUTO || c->gradAccumDtype == qcclFloat32 ||
               c->gradAccumDtype == qcclBfloat16 || c->gradAccumDtype == qcclFloat16,
           "data_types.grad_accum_dtype", "is %d (qcclFloat32, qcclBfloat16, qcclFloat16 or -1)",
           c->gradAccumDtype);
#undef ZERO_REQ
  return qcclSuccess;
}

qcclResult_t qcclZeroCreate(qcclComm_t comm, const qcclZeroConfig_t* config, qcclZero_t* zero) {
  zero_clear_error();
  if (comm == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroCreate: comm is NULL");
  if (config == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroCreate: config is NULL");
  if (zero == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroCreate: zero is NULL");
  int rank, nranks, node, nnodes, local_rank, local_size;
  qcclResult_t res = qcclCommUserRank(comm, &rank);
  if (res == qcclSuccess) res = qcclCommCount(comm, &nranks);
  if (res == qcclSuccess) res = qcclCommNodeInfo(comm, &node, &nnodes, &local_rank, &local_size);
  if (res != qcclSuccess) return zero_fail_call(res, comm, "qcclZeroCreate: communicator query");
  ZERO_CHECK(zero_check_config(config, nranks, local_size));
  if (config->allgatherBucketSize != 500000000u && rank == 0)
    zero_warn(
        "qcclZeroCreate: zero_optimization.allgather_bucket_size (%zu) has no effect: the "
        "new parameters are all-gathered in place into each unit, which needs no buffer "
        "for a bucket to bound",
        config->allgatherBucketSize);
  qcclZero_t z = calloc(1, sizeof(*z));
  if (z == NULL) return zero_fail(qcclSystemError, "qcclZeroCreate: out of memory");
  z->comm = comm;
  z->rank = rank;
  z->nranks = nranks;
  z->cfg = *config;
  if (z->cfg.stage == 0) z->cfg.stage = 1;
  z->recording = 1;
  zero_scaler_init(z);
  *zero = z;
  return qcclSuccess;
}

qcclResult_t qcclZeroRegister(qcclZero_t z, const char* name, size_t count, qcclDataType_t dtype,
                              const void* init, int* id) {
  if (z == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroRegister: zero is NULL");
  if (name == NULL || name[0] == '\0' || strlen(name) > 255)
    return zero_fail(qcclInvalidArgument, "qcclZeroRegister: name is NULL, empty or too long");
  if (count == 0)
    return zero_fail(qcclInvalidArgument, "qcclZeroRegister: count of '%s' is 0", name);
  if (zero_dtype_size(dtype) == 0)
    return zero_fail(qcclInvalidArgument,
                     "qcclZeroRegister: dtype %d of '%s' is not qcclFloat32, qcclBfloat16 or "
                     "qcclFloat16",
                     (int)dtype, name);
  if (count > ((size_t)1 << 40))
    return zero_fail(qcclInvalidArgument, "qcclZeroRegister: count %zu of '%s' is too large", count,
                     name);
  if (z->laid_out)
    return zero_fail(qcclInvalidUsage,
                     "qcclZeroRegister: '%s' comes after the first gather, gradient or step", name);
  for (int i = 0; i < z->nparams; i++)
    if (strcmp(z->params[i].name, name) == 0)
      return zero_fail(qcclInvalidArgument, "qcclZeroRegister: name '%s' is registered twice",
                       name);
  if (z->nparams == z->cap_params) {
    int cap = z->cap_params ? 2 * z->cap_params : 16;
    zero_param_t* p = realloc(z->params, (size_t)cap * sizeof(zero_param_t));
    if (p == NULL) return zero_fail(qcclSystemError, "qcclZeroRegister: out of memory");
    z->params = p;
    z->cap_params = cap;
  }
  zero_param_t* p = &z->params[z->nparams];
  memset(p, 0, sizeof(*p));
  p->name = strdup(name);
  p->count = count;
  p->dtype = dtype;
  if (init != NULL) {
    p->init = malloc(count * zero_dtype_size(dtype));
    if (p->init != NULL) memcpy(p->init, init, count * zero_dtype_size(dtype));
  }
  if (p->name == NULL || (init != NULL && p->init == NULL)) {
    free(p->name);
    free(p->init);
    return zero_fail(qcclSystemError, "qcclZeroRegister: out of memory for '%s'", name);
  }
  if (id != NULL) *id = z->nparams;
  z->nparams++;
  return qcclSuccess;
}

qcclResult_t qcclZeroGetLossScale(qcclZero_t z, double* scale) {
  if (z == NULL || scale == NULL)
    return zero_fail(qcclInvalidArgument, "qcclZeroGetLossScale: %s is NULL",
                     z == NULL ? "zero" : "scale");
  *scale = z->scale;
  return qcclSuccess;
}

qcclResult_t qcclZeroSetLearningRate(qcclZero_t z, double lr) {
  if (z == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroSetLearningRate: zero is NULL");
  if (!(lr >= 0.0)) return zero_fail(qcclInvalidArgument, "qcclZeroSetLearningRate: lr is %g", lr);
  z->cfg.lr = lr;
  return qcclSuccess;
}

qcclResult_t qcclZeroParamCount(qcclZero_t z, int* count) {
  if (z == NULL || count == NULL)
    return zero_fail(qcclInvalidArgument, "qcclZeroParamCount: %s is NULL",
                     z == NULL ? "zero" : "count");
  *count = z->nparams;
  return qcclSuccess;
}

qcclResult_t qcclZeroParamInfo(qcclZero_t z, int id, const char** name, size_t* count,
                               qcclDataType_t* dtype) {
  if (z == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroParamInfo: zero is NULL");
  if (id < 0 || id >= z->nparams)
    return zero_fail(qcclInvalidArgument, "qcclZeroParamInfo: id %d is not a parameter", id);
  if (name != NULL) *name = z->params[id].name;
  if (count != NULL) *count = z->params[id].count;
  if (dtype != NULL) *dtype = z->params[id].dtype;
  return qcclSuccess;
}

qcclResult_t qcclZeroDestroy(qcclZero_t z) {
  if (z == NULL) return qcclSuccess;
  zero_layout_free(z);
  for (int i = 0; i < z->nparams; i++) {
    free(z->params[i].name);
    free(z->params[i].init);
  }
  free(z->params);
  free(z->order);
  free(z);
  return qcclSuccess;
}
