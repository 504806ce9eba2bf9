/*
 * zero.h - the ZeRO++ collectives (qwZ, hpZ, qgZ), their policy and their
 * group buckets: the internal interface between the entry points, the
 * algorithms (one file each) and the collective layer (api.c's coll_run
 * asks the policy, group.c queues and fuses the calls).
 *
 * Placement: W ranks on N nodes (comm->node_of); a rank's local index is
 * its position among the ranks of its node in global rank order (the
 * order of comm->node), and the rail of local index l holds one rank per
 * node in node order (comm->rail): the topology's rank map of the
 * communicator (comm->rankmap, topology/rankmap.h). struct zero_comm
 * (comm->zero) keeps the policy, the comm-owned error-feedback residuals
 * and scratch buffers.
 */
#ifndef QCCL_ZERO_ZERO_H_
#define QCCL_ZERO_ZERO_H_

#include <stddef.h>
#include <stdint.h>

#include "collectives/coll.h"
#include "core/stream.h"
#include "quant/quant.h"
#include "topology/rankmap.h"

/* A comm-owned error-feedback residual. */
typedef struct zero_residual {
  int tag;
  size_t count;
  float* buf;
  struct zero_residual* next;
} zero_residual_t;

/* A policy for one plain collective (qcclCommSetPolicy / QCCL_POLICY). */
typedef struct {
  int set;            /* 1: quantize, 0: no policy, -1: plain (overrides QCCL_POLICY) */
  quant_params_t q;   /* the spec (across nodes for the reductions) */
  quant_params_t qin; /* the hop inside the node (reductions) */
  size_t min_bytes;   /* smaller calls stay plain */
} zero_policy_t;

enum { ZERO_POL_AG = 0, ZERO_POL_RS = 1, ZERO_POL_AR = 2, ZERO_POL_NUM = 3 };

#define ZERO_NSCRATCH 6

struct zero_comm {
  zero_policy_t policy[ZERO_POL_NUM];
  zero_residual_t* residuals;
  void* scratch[ZERO_NSCRATCH];
  size_t scratch_bytes[ZERO_NSCRATCH];
};

/* comm's state, made on first use. */
qcclResult_t zero_state(qcclComm_t comm, struct zero_comm** out);

/* Scratch buffer `which` (< ZERO_NSCRATCH) of at least bytes, kept. */
qcclResult_t zero_scratch(qcclComm_t comm, int which, size_t bytes, void** out);

/* The comm-owned residual of tag for count floats (zeroed when new or when
 * its count changes). */
qcclResult_t zero_residual(qcclComm_t comm, int tag, size_t count, float** out);

/* The quantization ISA (decided once per process). */
qcclResult_t zero_isa(quant_isa_t* isa);

/* ---- argument checks (messages name the function and the argument) ---- */

qcclResult_t zero_check_comm(const char* fn, qcclComm_t comm, qcclStream_t stream, stream_t** s);
qcclResult_t zero_check_type(const char* fn, qcclDataType_t t);
/* count * factor elements of es bytes must fit in memory. */
qcclResult_t zero_check_count(const char* fn, const char* what, size_t count, size_t factor,
                              size_t es);
/* sendbuff and recvbuff may be NULL only with count (named what) 0. */
qcclResult_t zero_check_buffers(const char* fn, const char* what, size_t count,
                                const void* sendbuff, const void* recvbuff);
qcclResult_t zero_check_spec(const char* fn, const char* what, const qcclQuantSpec_t* spec,
                             quant_params_t* p);
/* The reduction hops of cfg (NULL: defaults), and its error feedback. */
qcclResult_t zero_check_cfg(const char* fn, const qcclReduceScatterQConfig_t* cfg,
                            quant_params_t* intra, quant_params_t* inter);
/* Records a failed call on comm (when comm is alive) and returns r. */
qcclResult_t zero_fail(qcclComm_t comm, qcclResult_t r);

/* ---- one queued or immediate call ---- */

typedef enum { ZERO_AGQ, ZERO_RSQ, ZERO_ARQ } zero_kind_t;

struct qcclSecondary;

typedef struct zero_op {
  zero_kind_t kind;
  int slot; /* the qcclStatColl_t to count under */
  qcclComm_t comm;
  const void* send;
  void* recv;
  size_t count; /* sendcount (AGQ), recvcount (RSQ), count (ARQ) */
  qcclDataType_t dt;
  qcclRedOp_t op;
  int plain;         /* AGQ without quantization (hpZ fill with spec NULL) */
  quant_params_t q1; /* AGQ: the spec; RSQ / ARQ: the intra hop */
  quant_params_t q2; /* RSQ / ARQ: the inter hop (and ARQ's gather) */
  int ef;            /* error feedback */
  float* residual;   /* caller's, or NULL for the comm's */
  size_t residual_count;
  int residual_tag;
  struct qcclSecondary* sec; /* AGQ: the hpZ shard to fill, or NULL */
  unsigned long long gen;
  stream_t* stream; /* the host stream it was issued on, or NULL */
} zero_op_t;

/* Runs n calls in order, fusing consecutive compatible ones into one
 * bucket. Frees nothing. */
qcclResult_t zero_run_ops(zero_op_t* const* ops, int n);

/* Runs one call now, queues it on its host stream (op->stream), or adds it
 * to the open group (group.c); the last two keep a copy. */
qcclResult_t group_submit_zero(qcclComm_t comm, const zero_op_t* op);

/* ---- the algorithms ---- */

/* qwZ: all-gather of count elements per rank quantized under q (or plain
 * with q NULL) into recv; fills sec (if not NULL) with generation gen. */
qcclResult_t zero_allgather_q(qcclComm_t comm, const void* send, void* recv, size_t count,
                              qcclDataType_t dt, const quant_params_t* q, struct qcclSecondary* sec,
                              unsigned long long gen);

/* The checks of the two gathers' entry points; fills op (spec NULL makes a
 * plain gather when spec_optional). */
qcclResult_t zero_agq_check(const char* fn, const void* sendbuff, void* recvbuff, size_t sendcount,
                            qcclDataType_t datatype, const qcclQuantSpec_t* spec, int spec_optional,
                            qcclComm_t comm, qcclStream_t stream, zero_op_t* op);

/* hpZ: copies this rank's slice of the gathered tensor into sec. */
qcclResult_t zero_secondary_fill(struct qcclSecondary* sec, const void* gathered,
                                 unsigned long long gen);

/* qgZ: reduce-scatter of recvcount elements per rank; residual is NULL or
 * zero_rsq_residual_count floats. */
qcclResult_t zero_reducescatter_q(qcclComm_t comm, const void* send, void* recv, size_t rc,
                                  qcclDataType_t dt, qcclRedOp_t op, const quant_params_t* intra,
                                  const quant_params_t* inter, float* residual);

/* The checks of the reductions' entry points (rs: the count is recvcount);
 * fills o but for kind and slot. */
qcclResult_t zero_rsq_check(const char* fn, const void* sendbuff, void* recvbuff, size_t count,
                            int rs, qcclDataType_t datatype, qcclRedOp_t op,
                            const qcclReduceScatterQConfig_t* cfg, qcclComm_t comm,
                            qcclStream_t stream, zero_op_t* o);

/* Elements per destination in one pipelined piece of qgZ (QCCL_ZERO_PIECE);
 * fails, naming the variable, when QCCL_ZERO_PIECE or QCCL_POLICY is
 * malformed. */
qcclResult_t zero_env_piece(size_t* piece);

/* Floats of qgZ's residual (0 where there is no inter-node hop). */
size_t zero_rsq_residual_count(qcclComm_t comm, size_t rc, const quant_params_t* inter);

/* qcclAllReduceQ's algorithm. */
qcclResult_t zero_allreduce_q(qcclComm_t comm, const void* send, void* recv, size_t count,
                              qcclDataType_t dt, qcclRedOp_t op, const quant_params_t* intra,
                              const quant_params_t* inter, float* residual);

/* Runs one zero_op_t (resolving a comm-owned residual), counted under its
 * slot. */
qcclResult_t zero_run_one(const zero_op_t* op);

/* ---- policy (policy.c) ---- */

/* 1 if a policy turns this plain call, issued by the user, into a
 * quantized one (decided when the call is issued, group.c). */
int zero_policy_applies(qcclComm_t comm, const coll_args_t* a);

/* Parses text as QCCL_POLICY would, without the environment: 0 when it is
 * valid, -1 with the message in msg (len bytes) otherwise. For the tests
 * and the fuzz target. */
int zero_policy_check(const char* text, char* msg, size_t len);

/* The quantized call of a plain one for which zero_policy_applies. */
qcclResult_t zero_policy_op(qcclComm_t comm, const coll_args_t* a, zero_op_t* op);

#endif /* QCCL_ZERO_ZERO_H_ */
