/*
 * zero_config.c - a DeepSpeed config file (JSON, parsed by jansson) read
 * into a qcclZeroConfig_t, as it is.
 *
 * Each object is walked against a table of the keys it may hold: a key
 * qccl uses is read with a type check (an integer key takes an integral
 * number, also written as 5e8; booleans take true / false; "auto", as the
 * Hugging Face integration writes, keeps the default); a key DeepSpeed
 * knows that qccl does not need (train_batch_size, offload settings, ...)
 * is accepted quietly, or with a warning where ignoring it changes the
 * training; any other key is warned about and ignored. A value of the
 * wrong type is qcclInvalidArgument naming the key's path and the file.
 * DeepSpeed's "Adam" is AdamW unless params.adam_w_mode is false, as in
 * DeepSpeed.
 */
#include <jansson.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include "zero.h"

typedef enum { K_INT, K_SIZE, K_NUM, K_BOOL, K_OBJ, K_QUIET, K_IGNORED } zero_kind_t;

typedef struct {
  const char* key;
  zero_kind_t kind;
  void* dst;       /* int*, size_t*, double*, int* (bool), or the object's handler for K_OBJ */
  const char* why; /* K_IGNORED: what is not done */
} zero_key_t;

typedef struct {
  const char* path; /* the file */
  qcclZeroConfig_t* cfg;
  int* adam_w_mode; /* optimizer.params.adam_w_mode (DeepSpeed's default: true) */
} zero_ctx_t;

static qcclResult_t zero_type_error(const zero_ctx_t* x, const char* where, const char* key,
                                    const char* want, const json_t* v) {
  static const char* names[] = {"an object", "an array", "a string", "an integer",
                                "a number",  "true",     "false",    "null"};
  int t = (int)json_typeof(v);
  return zero_fail(qcclInvalidArgument, "%s: key '%s%s%s' must be %s, not %s", x->path, where,
                   where[0] ? "." : "", key, want, t >= 0 && t < 8 ? names[t] : "?");
}

static int zero_is_auto(const json_t* v) {
  return json_is_string(v) && strcmp(json_string_value(v), "auto") == 0;
}

/* Reads obj against keys[]; unknown keys are warned about. */
static qcclResult_t zero_walk(const zero_ctx_t* x, const char* where, const json_t* obj,
                              const zero_key_t* keys, int nkeys) {
  const char* key;
  json_t* v;
  json_object_foreach((json_t*)obj, key, v) {
    const zero_key_t* k = NULL;
    for (int i = 0; i < nkeys; i++)
      if (strcmp(keys[i].key, key) == 0) k = &keys[i];
    if (k == NULL) {
      zero_warn("%s: unknown key '%s%s%s' ignored", x->path, where, where[0] ? "." : "", key);
      continue;
    }
    if (zero_is_auto(v) && k->kind != K_OBJ) continue;
    switch (k->kind) {
      case K_INT:
      case K_SIZE: {
        double d;
        if (json_is_integer(v))
          d = (double)json_integer_value(v);
        else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)))
          d = json_real_value(v);
        else
          return zero_type_error(x, where, key, "an integer", v);
        if (k->kind == K_INT) {
          if (d < -2147483648.0 || d > 2147483647.0)
            return zero_fail(qcclInvalidArgument, "%s: key '%s%s%s' = %g is out of range", x->path,
                             where, where[0] ? "." : "", key, d);
          *(int*)k->dst = (int)d;
        } else {
          if (d < 0 || d > 1e18)
            return zero_fail(qcclInvalidArgument, "%s: key '%s%s%s' = %g is out of range", x->path,
                             where, where[0] ? "." : "", key, d);
          *(size_t*)k->dst = (size_t)d;
        }
        break;
      }
      case K_NUM:
        if (!json_is_number(v)) return zero_type_error(x, where, key, "a number", v);
        *(double*)k->dst = json_number_value(v);
        break;
      case K_BOOL:
        if (!json_is_boolean(v)) return zero_type_error(x, where, key, "true or false", v);
        *(int*)k->dst = json_is_true(v);
        break;
      case K_OBJ: {
        if (!json_is_object(v)) return zero_type_error(x, where, key, "an object", v);
        qcclResult_t (*fn)(const zero_ctx_t*, const json_t*) =
            (qcclResult_t(*)(const zero_ctx_t*, const json_t*))k->dst;
        ZERO_CHECK(fn(x, v));
        break;
      }
      case K_QUIET:
        break;
      case K_IGNORED:
        zero_warn("%s: key '%s%s%s' is not supported by qccl and ignored (%s)", x->path, where,
                  where[0] ? "." : "", key, k->why);
        break;
    }
  }
  return qcclSuccess;
}

static qcclResult_t zero_fp16(const zero_ctx_t* x, const json_t* o) {
  qcclZeroConfig_t* c = x->cfg;
  const zero_key_t keys[] = {
      {"enabled", K_BOOL, &c->fp16, NULL},
      {"loss_scale", K_NUM, &c->lossScale, NULL},
      {"initial_scale_power", K_INT, &c->initialScalePower, NULL},
      {"loss_scale_window", K_INT, &c->lossScaleWindow, NULL},
      {"hysteresis", K_INT, &c->hysteresis, NULL},
      {"min_loss_scale", K_NUM, &c->minLossScale, NULL},
      {"consecutive_hysteresis", K_QUIET, NULL, NULL},
      {"auto_cast", K_QUIET, NULL, NULL},
      {"fp16_master_weights_and_grads", K_IGNORED, NULL, "masters are always fp32"},
  };
  return zero_walk(x, "fp16", o, keys, (int)(sizeof keys / sizeof keys[0]));
}

static qcclResult_t zero_bf16(const zero_ctx_t* x, const json_t* o) {
  const zero_key_t keys[] = {
      {"enabled", K_BOOL, &x->cfg->bf16, NULL},
      {"immediate_grad_update", K_QUIET, NULL, NULL},
  };
  return zero_walk(x, "bf16", o, keys, (int)(sizeof keys / sizeof keys[0]));
}

static qcclResult_t zero_optim_params(const zero_ctx_t* x, const json_t* o) {
  qcclZeroConfig_t* c = x->cfg;
  const json_t* betas = json_object_get(o, "betas");
  if (betas != NULL && !zero_is_auto(betas)) {
    if (!json_is_array(betas) || json_array_size(betas) != 2 ||
        !json_is_number(json_array_get(betas, 0)) || !json_is_number(json_array_get(betas, 1)))
      return zero_fail(qcclInvalidArgument,
                       "%s: key 'optimizer.params.betas' must be an array of two numbers", x->path);
    c->beta1 = json_number_value(json_array_get(betas, 0));
    c->beta2 = json_number_value(json_array_get(betas, 1));
  }
  const zero_key_t keys[] = {
      {"lr", K_NUM, &c->lr, NULL},
      {"betas", K_QUIET, NULL, NULL},
      {"eps", K_NUM, &c->eps, NULL},
      {"weight_decay", K_NUM, &c->weightDecay, NULL},
      {"momentum", K_NUM, &c->momentum, NULL},
      {"nesterov", K_BOOL, &c->nesterov, NULL},
      {"max_coeff", K_NUM, &c->lambMaxCoeff, NULL},
      {"min_coeff", K_NUM, &c->lambMinCoeff, NULL},
      {"adam_w_mode", K_BOOL, x->adam_w_mode, NULL},
      {"torch_adam", K_QUIET, NULL, NULL},
      {"bias_correction", K_IGNORED, NULL, "bias correction is always applied"},
      {"amsgrad", K_IGNORED, NULL, "no AMSGrad"},
      {"dampening", K_IGNORED, NULL, "SGD has no dampening"},
  };
  return zero_walk(x, "optimizer.params", o, keys, (int)(sizeof keys / sizeof keys[0]));
}

static qcclResult_t zero_optimizer(const zero_ctx_t* x, const json_t* o) {
  const json_t* type = json_object_get(o, "type");
  if (type != NULL) {
    if (!json_is_string(type)) return zero_type_error(x, "optimizer", "type", "a string", type);
    const char* s = json_string_value(type);
    if (strcasecmp(s, "AdamW") == 0)
      x->cfg->optimizer = qcclZeroAdamW;
    else if (strcasecmp(s, "Adam") == 0)
      x->cfg->optimizer = qcclZeroAdam; /* AdamW unless adam_w_mode is false, below */
    else if (strcasecmp(s, "SGD") == 0)
      x->cfg->optimizer = qcclZeroSGD;
    else if (strcasecmp(s, "Lamb") == 0)
      x->cfg->optimizer = qcclZeroLamb;
    else
      return zero_fail(qcclInvalidArgument,
                       "%s: key 'optimizer.type' is \"%s\" (AdamW, Adam, SGD or Lamb)", x->path, s);
  }
  const zero_key_t keys[] = {
      {"type", K_QUIET, NULL, NULL},
      {"params", K_OBJ, (void*)zero_optim_params, NULL},
  };
  ZERO_CHECK(zero_walk(x, "optimizer", o, keys, (int)(sizeof keys / sizeof keys[0])));
  if (x->cfg->optimizer == qcclZeroAdam && *x->adam_w_mode) x->cfg->optimizer = qcclZeroAdamW;
  return qcclSuccess;
}

static qcclResult_t zero_zopt(const zero_ctx_t* x, const json_t* o) {
  qcclZeroConfig_t* c = x->cfg;
  const zero_key_t keys[] = {
      {"stage", K_INT, &c->stage, NULL},
      {"reduce_bucket_size", K_SIZE, &c->reduceBucketSize, NULL},
      {"allgather_bucket_size", K_SIZE, &c->allgatherBucketSize, NULL},
      {"stage3_prefetch_bucket_size", K_SIZE, &c->prefetchBucketSize, NULL},
      {"stage3_param_persistence_threshold", K_SIZE, &c->persistenceThreshold, NULL},
      {"stage3_max_live_parameters", K_SIZE, &c->maxLiveParameters, NULL},
      {"overlap_comm", K_BOOL, &c->overlapComm, NULL},
      {"zero_quantized_weights", K_BOOL, &c->quantizedWeights, NULL},
      {"zero_quantized_gradients", K_BOOL, &c->quantizedGradients, NULL},
      {"zero_hpz_partition_size", K_INT, &c->hpzPartitionSize, NULL},
      {"contiguous_gradients", K_QUIET, NULL, NULL},
      {"reduce_scatter", K_QUIET, NULL, NULL},
      {"allgather_partitions", K_QUIET, NULL, NULL},
      {"round_robin_gradients", K_QUIET, NULL, NULL},
      {"sub_group_size", K_QUIET, NULL, NULL},
      {"stage3_max_reuse_distance", K_QUIET, NULL, NULL},
      {"stage3_gather_16bit_weights_on_model_save", K_QUIET, NULL, NULL},
      {"stage3_gather_fp16_weights_on_model_save", K_QUIET, NULL, NULL},
      {"offload_param", K_IGNORED, NULL, "no offload: everything stays in host memory"},
      {"offload_optimizer", K_IGNORED, NULL, "no offload: everything stays in host memory"},
      {"zero_quantized_nontrainable_weights", K_IGNORED, NULL, "every parameter is trained"},
  };
  return zero_walk(x, "zero_optimization", o, keys, (int)(sizeof keys / sizeof keys[0]));
}

/* data_types.grad_accum_dtype: DeepSpeed's names of fp32, bf16 and fp16. */
static qcclResult_t zero_data_types(const zero_ctx_t* x, const json_t* o) {
  const json_t* v = json_object_get(o, "grad_accum_dtype");
  if (v != NULL && !zero_is_auto(v) && !json_is_null(v)) {
    static const struct {
      const char* name;
      qcclDataType_t dtype;
    } names[] = {{"fp32", qcclFloat32},
                 {"float32", qcclFloat32},
                 {"float", qcclFloat32},
                 {"torch.float32", qcclFloat32},
                 {"bf16", qcclBfloat16},
                 {"bfloat16", qcclBfloat16},
                 {"torch.bfloat16", qcclBfloat16},
                 {"fp16", qcclFloat16},
                 {"float16", qcclFloat16},
                 {"half", qcclFloat16},
                 {"torch.float16", qcclFloat16}};
    if (!json_is_string(v))
      return zero_type_error(x, "data_types", "grad_accum_dtype", "a string", v);
    const char* s = json_string_value(v);
    int found = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !found; i++)
      if (strcmp(names[i].name, s) == 0) {
        x->cfg->gradAccumDtype = (int)names[i].dtype;
        found = 1;
      }
    if (!found)
      return zero_fail(qcclInvalidArgument,
                       "%s: key 'data_types.grad_accum_dtype' is \"%s\" (fp32, bf16 or fp16)",
                       x->path, s);
  }
  const zero_key_t keys[] = {
      {"grad_accum_dtype", K_QUIET, NULL, NULL},
  };
  return zero_walk(x, "data_types", o, keys, (int)(sizeof keys / sizeof keys[0]));
}

static qcclResult_t zero_qccl_keys(const zero_ctx_t* x, const json_t* o) {
  qcclZeroConfig_t* c = x->cfg;
  const zero_key_t keys[] = {
      {"qwz_bits", K_INT, &c->qwzBits, NULL},
      {"qwz_block", K_INT, &c->qwzBlock, NULL},
      {"qgz_intra_bits", K_INT, &c->qgzIntraBits, NULL},
      {"qgz_inter_bits", K_INT, &c->qgzInterBits, NULL},
      {"qgz_block", K_INT, &c->qgzBlock, NULL},
      {"rotate", K_BOOL, &c->rotate, NULL},
      {"error_feedback", K_BOOL, &c->errorFeedback, NULL},
  };
  return zero_walk(x, "qccl", o, keys, (int)(sizeof keys / sizeof keys[0]));
}

qcclResult_t qcclZeroConfigLoad(const char* path, qcclZeroConfig_t* config) {
  zero_clear_error();
  if (path == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroConfigLoad: path is NULL");
  if (config == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroConfigLoad: config is NULL");
  json_error_t jerr;
  json_t* root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL)
    return zero_fail(qcclInvalidArgument, "%s: line %d, column %d: %s", path, jerr.line,
                     jerr.column, jerr.text);
  qcclZeroConfig_t c = QCCL_ZERO_CONFIG_INITIALIZER;
  int adam_w_mode = 1;
  zero_ctx_t x = {path, &c, &adam_w_mode};
  qcclResult_t res;
  if (!json_is_object(root)) {
    res = zero_fail(qcclInvalidArgument, "%s: the top level is not a JSON object", path);
  } else {
    const zero_key_t keys[] = {
        {"gradient_accumulation_steps", K_INT, &c.gradAccumSteps, NULL},
        {"gradient_clipping", K_NUM, &c.gradClip, NULL},
        {"fp16", K_OBJ, (void*)zero_fp16, NULL},
        {"bf16", K_OBJ, (void*)zero_bf16, NULL},
        {"optimizer", K_OBJ, (void*)zero_optimizer, NULL},
        {"zero_optimization", K_OBJ, (void*)zero_zopt, NULL},
        {"qccl", K_OBJ, (void*)zero_qccl_keys, NULL},
        {"data_types", K_OBJ, (void*)zero_data_types, NULL},
        {"train_batch_size", K_QUIET, NULL, NULL},
        {"train_micro_batch_size_per_gpu", K_QUIET, NULL, NULL},
        {"steps_per_print", K_QUIET, NULL, NULL},
        {"wall_clock_breakdown", K_QUIET, NULL, NULL},
        {"zero_allow_untested_optimizer", K_QUIET, NULL, NULL},
        {"zero_force_ds_cpu_optimizer", K_QUIET, NULL, NULL},
        {"dump_state", K_QUIET, NULL, NULL},
        {"prescale_gradients", K_IGNORED, NULL, "gradients are averaged after the reduction"},
        {"gradient_predivide_factor", K_IGNORED, NULL,
         "gradients are averaged after the reduction"},
        {"scheduler", K_IGNORED, NULL, "call qcclZeroSetLearningRate for a schedule"},
        {"communication_data_type", K_IGNORED, NULL, "gradients travel in the parameter dtype"},
    };
    res = zero_walk(&x, "", root, keys, (int)(sizeof keys / sizeof keys[0]));
  }
  json_decref(root);
  if (res == qcclSuccess) *config = c;
  return res;
}
