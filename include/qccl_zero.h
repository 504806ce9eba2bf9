/*
 * qccl_zero.h - ZeRO (stages 1-3, with the ZeRO++ switches) over qccl.
 *
 * A qcclZero_t owns a model's parameters as the ZeRO papers shard them
 * across the ranks of a communicator: the fp32 master weights and the
 * optimizer state (stage 1), also the gradients (stage 2), also the
 * parameters themselves (stage 3). The trainer registers its parameters in
 * order, then for every micro-step calls, around each layer:
 *
 *   qcclZeroGather(z, id, qcclZeroForward, &w)   w: the full parameter
 *   ... forward with w ...; qcclZeroRelease(z, id)
 *   qcclZeroGather(z, id, qcclZeroBackward, &w)  (stage 3 gathers again)
 *   ... backward ...; qcclZeroGradient(z, id, grad); qcclZeroRelease(z, id)
 *
 * and qcclZeroStep(z, &info) after each micro-step: it is a no-op except
 * at the gradient-accumulation boundary, where the reduced gradients are
 * clipped, checked for overflow (f16 loss scaling) and applied by the
 * optimizer to the fp32 master shard, and the new parameters published.
 *
 * Every call is collective over the communicator (all ranks make the same
 * calls in the same order) unless marked Local. Results as in qccl.h; on
 * failure qcclZeroGetLastError() names the argument, key or file. Built on
 * the public API of qccl.h only.
 */
#ifndef QCCL_ZERO_H_
#define QCCL_ZERO_H_

#include <stddef.h>
#include <stdio.h>

#include "qccl.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

typedef struct qcclZero* qcclZero_t;

typedef enum {
  qcclZeroAdamW = 0, /* Adam with decoupled weight decay (Loshchilov & Hutter) */
  qcclZeroAdam = 1,  /* Adam, weight decay added to the gradient (L2) */
  qcclZeroSGD = 2,   /* SGD, optional momentum and Nesterov */
  qcclZeroLamb = 3   /* LAMB: Adam direction scaled by a per-parameter trust ratio */
} qcclZeroOptimizer_t;

typedef enum { qcclZeroForward = 0, qcclZeroBackward = 1 } qcclZeroPhase_t;

/* Settings; start from QCCL_ZERO_CONFIG_INITIALIZER (DeepSpeed's defaults
 * where DeepSpeed has one) or qcclZeroConfigLoad (a DeepSpeed JSON file). */
typedef struct qcclZeroConfig_v1 {
  size_t size;          /* set by the initializer */
  unsigned int magic;   /* set by the initializer */
  unsigned int version; /* set by the initializer */
  int stage;            /* zero_optimization.stage: 1, 2 or 3 (0 is taken as 1) */
  int gradAccumSteps;   /* gradient_accumulation_steps (>= 1) */
  double gradClip;      /* gradient_clipping: max global L2 norm, 0 = off */
  /* optimizer (optimizer.type / optimizer.params) */
  qcclZeroOptimizer_t optimizer;
  double lr, beta1, beta2, eps, weightDecay;
  double momentum;                   /* SGD */
  int nesterov;                      /* SGD */
  double lambMaxCoeff, lambMinCoeff; /* LAMB trust-ratio clamp (max_coeff, min_coeff) */
  /* mixed precision: fp16.* (the loss scaler; bf16 needs none) */
  int fp16;              /* fp16.enabled: dynamic loss scaling when lossScale == 0 */
  int bf16;              /* bf16.enabled (informational: dtypes come with each parameter) */
  double lossScale;      /* fp16.loss_scale: 0 = dynamic, else a static scale */
  int initialScalePower; /* fp16.initial_scale_power: the first scale is 2^this */
  int lossScaleWindow;   /* fp16.loss_scale_window: good steps before doubling */
  int hysteresis;        /* fp16.hysteresis: overflows tolerated before halving */
  double minLossScale;   /* fp16.min_loss_scale */
  /* zero_optimization.* (sizes in elements, as DeepSpeed) */
  size_t reduceBucketSize;     /* reduce_bucket_size */
  size_t allgatherBucketSize;  /* allgather_bucket_size */
  size_t prefetchBucketSize;   /* stage3_prefetch_bucket_size (0 = no prefetch) */
  size_t persistenceThreshold; /* stage3_param_persistence_threshold */
  size_t maxLiveParameters;    /* stage3_max_live_parameters */
  int overlapComm;             /* overlap_comm: prefetch on a host stream */
  int quantizedWeights;        /* zero_quantized_weights: qwZ forward gathers */
  int quantizedGradients;      /* zero_quantized_gradients: qgZ gradient reduce-scatter */
  int hpzPartitionSize;        /* zero_hpz_partition_size: > 1 = hpZ (must be ranks per node) */
  /* qccl's own keys ("qccl": {...}) */
  int qwzBits, qwzBlock;          /* qwZ: 8 or 4 bits, block size */
  int qgzIntraBits, qgzInterBits; /* qgZ bits inside / across nodes */
  int qgzBlock;                   /* qgZ block size */
  int rotate;                     /* Hadamard rotation for qwZ and qgZ */
  int errorFeedback;              /* qgZ error feedback on the inter-node hop */
  /* data_types.grad_accum_dtype: the type the gradient shard is kept in
   * between its reduction and the step (qcclFloat32, qcclBfloat16 or
   * qcclFloat16), or QCCL_ZERO_GRAD_ACCUM_AUTO: the parameters' dtype when
   * gradAccumSteps == 1 (the reduction, which sums in f32, rounds once into
   * it: 16 bytes per parameter at stage 3), fp32 when micro-steps are
   * accumulated (18 bytes per parameter at stage 3). */
  int gradAccumDtype;
} qcclZeroConfig_t;

#define QCCL_ZERO_GRAD_ACCUM_AUTO (-1)

#define QCCL_ZERO_CONFIG_MAGIC 0x71c2e401u
#define QCCL_ZERO_CONFIG_INITIALIZER                                                               \
  {                                                                                                \
    sizeof(qcclZeroConfig_t), QCCL_ZERO_CONFIG_MAGIC, 1u, 1, 1, 0.0, qcclZeroAdamW, 1e-3, 0.9,     \
        0.999, 1e-8, 0.0, 0.0, 0, 10.0, 0.01, 0, 0, 0.0, 16, 1000, 2, 1.0, 500000000u, 500000000u, \
        50000000u, 100000u, 1000000000u, 0, 0, 0, 1, 8, 256, 8, 4, 256, 0, 0,                      \
        QCCL_ZERO_GRAD_ACCUM_AUTO                                                                  \
  }

/* Reads a DeepSpeed config file (JSON) into *config, which it first sets
 * to the defaults. Keys (docs/ZERO.md): gradient_accumulation_steps,
 * gradient_clipping, fp16, bf16, optimizer {type, params}, zero_optimization
 * {...} and qccl's own "qccl" object; train_batch_size and the other keys
 * DeepSpeed knows but qccl does not need are accepted quietly. An unknown
 * key is warned about (QCCL_DEBUG=WARN) and ignored; a key of the wrong
 * type or out of range is qcclInvalidArgument naming it. Local. */
qcclResult_t qcclZeroConfigLoad(const char* path, qcclZeroConfig_t* config);

/* Creates the ZeRO engine on comm (which it uses, and does not own, until
 * qcclZeroDestroy). */
qcclResult_t qcclZeroCreate(qcclComm_t comm, const qcclZeroConfig_t* config, qcclZero_t* zero);

/* Registers the next parameter: count elements of dtype (qcclFloat32,
 * qcclBfloat16 or qcclFloat16), initial values init (count elements of
 * dtype, the same on every rank; NULL = zeros). Parameters are numbered
 * 0, 1, ... in registration order (*id). Every parameter must be registered
 * before the first gather; names must be unique (checkpoints find
 * parameters by name). */
qcclResult_t qcclZeroRegister(qcclZero_t zero, const char* name, size_t count, qcclDataType_t dtype,
                              const void* init, int* id);

/* Makes parameter id available in full and sets *data to its count
 * elements (owned by the engine, valid until qcclZeroRelease). Stages 1-2
 * and persistent parameters: no communication. Stage 3: an all-gather of
 * the shards, qwZ when quantizedWeights, and for the backward phase a
 * node-local gather of the hpZ secondary shard when hpzPartitionSize > 1.
 * The first step's order of gathers is recorded; later steps prefetch the
 * next gathers in that order up to prefetchBucketSize elements. */
qcclResult_t qcclZeroGather(qcclZero_t zero, int id, qcclZeroPhase_t phase, void** data);

/* Ends the use of parameter id's full copy (stage 3 frees it unless the
 * parameter is persistent). Local. */
qcclResult_t qcclZeroRelease(qcclZero_t zero, int id);

/* Adds this micro-step's gradient of parameter id (count elements of its
 * dtype; with f16 loss scaling, of the scaled loss) into the accumulation
 * (gradAccumDtype). Each parameter's gradient is given once per micro-step.
 * Stage 1 accumulates locally and all-reduces at the accumulation
 * boundary; stages 2 and 3 reduce-scatter (qgZ when quantizedGradients)
 * each bucket as soon as it is complete and accumulate only the shard. */
qcclResult_t qcclZeroGradient(qcclZero_t zero, int id, const void* grad);

/* What qcclZeroStep did. */
typedef struct {
  int boundary;            /* 1 if this call ended an accumulation window */
  int stepped;             /* 1 if the optimizer ran (0: not a boundary, or overflow) */
  int overflow;            /* 1 if a gradient was Inf/NaN on some rank (the step was skipped) */
  double gradNorm;         /* the global L2 norm of the averaged gradient (before clipping) */
  double lossScale;        /* the loss scale for the next micro-step */
  unsigned long long step; /* optimizer steps taken (skipped ones excluded) */
  unsigned long long prefetched; /* stage 3: gathers so far served by a prefetch */
  double optimizerSeconds;       /* this rank's time in the optimizer kernels (this step) */
} qcclZeroStepInfo_t;

/* Ends a micro-step. Every parameter's gradient must have been given. At
 * the boundary (every gradAccumSteps calls): the gradients, averaged over
 * ranks and micro-steps and divided by the loss scale, get one all-reduce
 * of f64 partial sums of squares (the global norm; Inf/NaN on any rank
 * makes every rank skip the step and lower the scale), are clipped to
 * gradClip, and the optimizer updates the fp32 master shard; the new
 * parameters are published (all-gathered for stages 1-2, kept as shards
 * for stage 3) and the hpZ generation advances. info may be NULL. */
qcclResult_t qcclZeroStep(qcclZero_t zero, qcclZeroStepInfo_t* info);

/* The loss scale to multiply the loss by (1 unless fp16). Local. */
qcclResult_t qcclZeroGetLossScale(qcclZero_t zero, double* scale);

/* Sets the learning rate for the next steps (schedules). Local. */
qcclResult_t qcclZeroSetLearningRate(qcclZero_t zero, double lr);

/* Copies the full fp32 master weights of parameter id (count floats) into
 * out on every rank (an all-gather of the shards). */
qcclResult_t qcclZeroGetMaster(qcclZero_t zero, int id, float* out);

/* Copies the full optimizer state of parameter id (count floats) into out
 * on every rank: which = 0 the first moment (Adam, AdamW, LAMB) or the
 * momentum buffer (SGD), which = 1 the second moment. */
qcclResult_t qcclZeroGetOptimizerState(qcclZero_t zero, int id, int which, float* out);

/* What this rank's engine holds (bytes, counted where it allocates). */
typedef struct {
  size_t stateBytes;         /* fp32 master, moments, gradient accumulation (grad_accum_dtype) */
  size_t paramBytes;         /* parameters in their dtype: stage-3 shards, resident units */
  size_t transientBytes;     /* now: gathered and prefetched units, gradient buckets */
  size_t peakTransientBytes; /* the most transientBytes has been */
} qcclZeroMemory_t;

/* This rank's memory (after the layout, which the first gather, gradient,
 * step or this call makes). Local. */
qcclResult_t qcclZeroGetMemory(qcclZero_t zero, qcclZeroMemory_t* memory);

/* Number of parameters, and the element count / dtype / name of one. Local. */
qcclResult_t qcclZeroParamCount(qcclZero_t zero, int* count);
qcclResult_t qcclZeroParamInfo(qcclZero_t zero, int id, const char** name, size_t* count,
                               qcclDataType_t* dtype);

/* Writes a checkpoint into directory dir (created if missing): every rank
 * its shard file, rank 0 the manifest (layout, step, loss scaler, optimizer
 * settings, world size, checksums). Atomic: the checkpoint becomes the one
 * that loads (dir/latest) only once every rank's file is complete. */
qcclResult_t qcclZeroSave(qcclZero_t zero, const char* dir);

/* Loads the checkpoint dir/latest (or dir itself when it holds a manifest)
 * written at any world size and stage into the registered parameters
 * (matched by name, count and dtype), resharding as needed; advances the
 * hpZ generation. A truncated, corrupt or mismatched checkpoint is
 * qcclInvalidUsage (or qcclSystemError) naming the file, on every rank. */
qcclResult_t qcclZeroLoad(qcclZero_t zero, const char* dir);

/* The message behind the last failure of a qcclZero call on this thread
 * (names the argument, key or file), or "" if none. Local. */
const char* qcclZeroGetLastError(void);

/* Checkpoint tools (local, no communicator; what qccl-zero-ckpt runs).
 * dir is a directory given to qcclZeroSave (its latest checkpoint) or one
 * checkpoint in it. List prints the layout and state to out; Verify checks
 * the manifest and every shard file (sizes and checksums); Consolidate
 * writes the full fp32 master weights into one safetensors file (one 1-D
 * F32 tensor per parameter, by name). Errors name the file. */
qcclResult_t qcclZeroCheckpointList(const char* dir, FILE* out);
qcclResult_t qcclZeroCheckpointVerify(const char* dir);
qcclResult_t qcclZeroCheckpointConsolidate(const char* dir, const char* safetensorsPath);

/* Frees the engine (not the communicator). NULL is allowed. Local. */
qcclResult_t qcclZeroDestroy(qcclZero_t zero);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* QCCL_ZERO_H_ */
