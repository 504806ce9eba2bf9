/*
 * zero.h - the ZeRO engine's internal state, shared by the files of
 * src/zero (built on include/qccl.h and include/qccl_zero.h only).
 *
 * Layout. Parameters are grouped, in registration order, into units: a
 * unit is a flat run of parameters of one dtype that is sharded as one
 * buffer. Stages 1-2 fill a unit up to reduce_bucket_size elements (a
 * larger parameter is a unit of its own); stage 3 makes every parameter
 * above the persistence threshold a unit of its own (it is gathered and
 * released alone) and groups the persistent ones as stages 1-2 do. A unit
 * of n elements is padded to W * s elements, s = ceil(n / W); rank r owns
 * elements [r * s, (r + 1) * s) (the tail past n is zero and never
 * updated). Per unit each rank holds its fp32 master shard, its optimizer
 * state shard and its gradient accumulation (the whole unit at stage 1,
 * the shard at stages 2-3; in data_types.grad_accum_dtype, by default the
 * parameters' dtype when nothing is accumulated and fp32 when
 * gradient_accumulation_steps > 1); the parameters in their dtype are resident
 * in full (stages 1-2, persistent units) or as a shard (stage 3) plus a
 * full copy while gathered.
 */
#ifndef QCCL_SRC_ZERO_ZERO_H_
#define QCCL_SRC_ZERO_ZERO_H_

#include <stddef.h>
#include <stdint.h>

#include "qccl.h"
#include "qccl_zero.h"

typedef struct {
  char* name;
  size_t count;
  qcclDataType_t dtype;
  int unit;      /* the unit holding it */
  size_t offset; /* its first element in the unit */
  void* init;    /* initial values until the layout is made (then NULL) */
  int grad_done; /* its gradient was given in this micro-step */
  int gathered;  /* stage 3: a gather is outstanding (until release) */
} zero_param_t;

typedef struct {
  int first, last; /* parameters [first, last) */
  qcclDataType_t dtype;
  size_t esize;          /* bytes per element of dtype */
  size_t n;              /* elements */
  size_t s;              /* shard elements: ceil(n / W) */
  size_t mine;           /* valid elements of this rank's shard: min(s, n - rank * s), >= 0 */
  int resident;          /* full parameters always present (stages 1-2, persistent) */
  void* full;            /* W * s elements of dtype: resident, or while gathered (stage 3) */
  int live;              /* stage 3: gathers outstanding on full */
  int prefetched;        /* stage 3: a fill of full is queued on the prefetch stream */
  int pf_phase;          /* the phase of that fill */
  qcclEvent_t ev;        /* recorded after that fill */
  void* pshard;          /* stage 3, not resident: the parameter shard (s elements of dtype) */
  float* master;         /* s floats */
  float* m;              /* optimizer state (Adam / LAMB first moment, SGD momentum) */
  float* v;              /* Adam / LAMB second moment */
  qcclDataType_t gdtype; /* the gradient accumulation's type (zero_grad_dtype) */
  size_t gsize;          /* bytes per element of gdtype */
  void* gacc;            /* gradient accumulation: W * s (stage 1) or s (stages 2-3) of gdtype */
  void* stage;           /* stages 2-3: this micro-step's gradients, W * s elements of dtype */
  int pending;           /* parameters of the unit whose gradient is still missing */
  qcclSecondary_t sec;   /* hpZ secondary shard (stage 3, not resident) */
} zero_unit_t;

struct qcclZero {
  qcclComm_t comm;
  int rank, nranks;
  qcclZeroConfig_t cfg;
  int nparams, cap_params;
  zero_param_t* params;
  int nunits;
  zero_unit_t* units;
  int laid_out;
  int micro;                     /* micro-steps since the last boundary */
  unsigned long long step;       /* optimizer steps taken */
  unsigned long long generation; /* hpZ generation: bumped by every step and every load */
  /* loss scaler (f16) */
  double scale;
  int hyst_left;
  long good_steps; /* steps since the last overflow (or since the last growth) */
  /* stage 3 gather order (2 * unit + phase): recorded in the first
   * micro-step, followed by prefetch in the later ones (zero_gather.c) */
  int* order;
  int norder, cap_order, recording;
  int order_pos;                    /* the next entry expected in this micro-step */
  int pf_next;                      /* entries before this one have been prefetched (or passed) */
  int pf_broken;                    /* this micro-step left the recorded order: no more prefetch */
  size_t pf_elems;                  /* elements prefetched and not yet gathered */
  size_t live_elems;                /* elements of gathered (live) units */
  qcclStream_t stream;              /* the prefetch stream (NULL: no prefetch) */
  size_t transient, peak_transient; /* bytes of gathered units and gradient buckets */
  unsigned long long prefetch_hits; /* gathers served by a prefetch */
};

/* ---- zero_err.c ---- */
/* Records the message of the current failure (returned by qcclZeroGetLastError)
 * and logs it at WARN; returns res. */
qcclResult_t zero_fail(qcclResult_t res, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same for a failed qccl call: appends qcclGetLastError(comm). */
qcclResult_t zero_fail_call(qcclResult_t res, qcclComm_t comm, const char* what);
/* A warning line on stderr when QCCL_DEBUG is WARN or more verbose. */
void zero_warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/* Clears the message of this thread. */
void zero_clear_error(void);

#define ZERO_CHECK(call)                            \
  do {                                              \
    qcclResult_t zero_res_ = (call);                \
    if (zero_res_ != qcclSuccess) return zero_res_; \
  } while (0)

/* A qccl call; on failure records its message and returns its result. */
#define ZERO_QCCL(z, call)                                                            \
  do {                                                                                \
    qcclResult_t zero_res_ = (call);                                                  \
    if (zero_res_ != qcclSuccess) return zero_fail_call(zero_res_, (z)->comm, #call); \
  } while (0)

/* ---- zero_fp.c: element conversions (round to nearest even) ---- */
size_t zero_dtype_size(qcclDataType_t dtype); /* 0 if not f32 / bf16 / f16 */
const char* zero_dtype_name(qcclDataType_t dtype);
float zero_load(const void* buf, qcclDataType_t dtype, size_t i);
void zero_store(void* buf, qcclDataType_t dtype, size_t i, float x);
/* dst[i] = (dtype) src[i] for i < n */
void zero_from_f32(void* dst, qcclDataType_t dtype, const float* src, size_t n);
/* acc[i] += (float) src[i] for i < n */
void zero_add_to_f32(float* acc, const void* src, qcclDataType_t dtype, size_t n);
/* dst[i] = (float) src[i] for i < n */
void zero_to_f32(float* dst, const void* src, qcclDataType_t dtype, size_t n);
/* dst[i] = (float) src[i] * scale: the widening and one f32 multiplication,
 * in one pass. */
void zero_to_f32_scaled(float* dst, const void* src, qcclDataType_t dtype, size_t n, float scale);
/* acc[i] = (atype) ((float) acc[i] + (float) src[i]) for i < n: the sum in
 * f32, rounded once into acc's type (exact when acc[i] is 0) */
void zero_accumulate(void* acc, qcclDataType_t atype, const void* src, qcclDataType_t stype,
                     size_t n);

/* ---- zero_layout.c ---- */
/* Makes the units (once, before the first use); collective only through
 * the hpZ secondary shards' creation (local). */
qcclResult_t zero_layout(qcclZero_t z);
void zero_layout_free(qcclZero_t z);

/* Counts n bytes of transient buffers in (n > 0) or out (n < 0). */
void zero_transient(qcclZero_t z, long long n);

/* ---- zero_grad.c ---- */
/* Reduces the unit's gradients of this micro-step (stages 2-3) into gacc. */
qcclResult_t zero_grad_reduce_unit(qcclZero_t z, zero_unit_t* u);
/* At the boundary, stage 1: all-reduces gacc of every unit. */
qcclResult_t zero_grad_reduce_boundary(qcclZero_t z);
/* The gradient accumulation's type for a unit of parameters of dtype. */
qcclDataType_t zero_grad_dtype(const qcclZero_t z, qcclDataType_t dtype);
/* This rank's gradient shard of unit u (mine elements of gacc, of u->gdtype). */
void* zero_grad_shard(qcclZero_t z, zero_unit_t* u);
/* Elements [lo, lo + n) of this rank's gradient shard of u in f32, scaled
 * by scale: src[i] * scale, one f32 multiplication (out holds n floats). */
void zero_grad_load(qcclZero_t z, zero_unit_t* u, size_t lo, size_t n, float scale, float* out);
/* Zeroes every unit's gradient accumulation (after a step, a skip, a load). */
void zero_grad_clear(qcclZero_t z);

/* ---- zero_optim.c: one optimizer step on a shard ---- */
typedef struct {
  qcclZeroOptimizer_t kind;
  float lr, beta1, beta2, eps, wd, momentum;
  int nesterov;
  float bc1, bc2; /* bias corrections 1 - beta^t (Adam, AdamW, LAMB) */
} zero_optim_args_t;
/* Adam, AdamW and SGD: updates w, m, v in place from g (n elements). */
void zero_optim_apply(const zero_optim_args_t* a, float* w, float* m, float* v, const float* g,
                      size_t n);
/* LAMB, first half: updates m, v and writes the update direction into
 * g (in place); returns the partial sums of squares of w and of the
 * direction (f64). */
void zero_lamb_direction(const zero_optim_args_t* a, const float* w, float* m, float* v, float* g,
                         size_t n, double* wsq, double* usq);
/* LAMB, between the halves: the direction u again from the updated m and v
 * (the same operations as the first half's, so the same bits), for a
 * gradient that is not kept in f32 between the halves. */
void zero_lamb_redo(const zero_optim_args_t* a, const float* w, const float* m, const float* v,
                    float* u, size_t n);
/* LAMB, second half: w -= lr * ratio * u. */
void zero_lamb_apply(float* w, const float* u, size_t n, float lr_ratio);

/* The kernels by instruction set (bitwise equal; zero_isa() is the best the
 * CPU has, or QCCL_ZERO_ISA). zero_lamb_update: m, v and the direction
 * into g, without the norms. */
typedef enum { ZERO_ISA_SCALAR = 0, ZERO_ISA_AVX2 = 1, ZERO_ISA_AVX512 = 2 } zero_isa_t;
zero_isa_t zero_isa(void);
void zero_optim_apply_isa(zero_isa_t isa, const zero_optim_args_t* a, float* w, float* m, float* v,
                          const float* g, size_t n);
void zero_lamb_update_isa(zero_isa_t isa, const zero_optim_args_t* a, const float* w, float* m,
                          float* v, float* g, size_t n);
void zero_lamb_apply_isa(zero_isa_t isa, float* w, const float* u, size_t n, float lr_ratio);
#define ZERO_KERNEL_DECL(SUF)                                                                 \
  void zero_optim_apply_##SUF(const zero_optim_args_t* a, float* w, float* m, float* v,       \
                              const float* g, size_t n);                                      \
  void zero_lamb_update_##SUF(const zero_optim_args_t* a, const float* w, float* m, float* v, \
                              float* g, size_t n);                                            \
  void zero_lamb_apply_##SUF(float* w, const float* u, size_t n, float lr_ratio);
ZERO_KERNEL_DECL(scalar)
ZERO_KERNEL_DECL(avx2)
ZERO_KERNEL_DECL(avx512)

/* ---- zero_gather.c ---- */
/* Publishes the master shards as parameters (after a step or a load). */
qcclResult_t zero_publish(qcclZero_t z);
/* Waits for the prefetch stream and drops prefetches not gathered (at the
 * end of every micro-step, and before the shards change). */
qcclResult_t zero_prefetch_drain(qcclZero_t z);

/* ---- zero_scaler.c: dynamic loss scaling (DeepSpeed's rules) ---- */
void zero_scaler_init(qcclZero_t z);
/* After a boundary: overflow lowers the scale (after hysteresis), a window
 * of good steps doubles it. */
void zero_scaler_update(qcclZero_t z, int overflow);

#endif /* QCCL_SRC_ZERO_ZERO_H_ */
