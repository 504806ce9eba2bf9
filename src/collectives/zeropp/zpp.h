/*
 * zpp.h - the ZeRO++ collectives (qwZ, hpZ, qgZ), their policy and their
 * group buckets: the internal interface between the entry points, the
 * algorithms (one file each) and the collective layer (group.c asks the
 * policy, queues and fuses the calls). Their prefix is zpp_ (zero_ is the
 * ZeRO stages' of src/zero).
 *
 * Placement: W ranks on N nodes (comm->node_of); a rank's local index is
 * its position among the ranks of its node in global rank order (the
 * order of comm->node), and the rail of local index l holds one rank per
 * node in node order (comm->rail): the topology's rank map of the
 * communicator (comm->rankmap, topology/rankmap.h). struct zpp_comm
 * (comm->zero) keeps the policy, the comm-owned error-feedback residuals
 * and scratch buffers.
 */
#ifndef QCCL_COLLECTIVES_ZEROPP_ZPP_H_
#define QCCL_COLLECTIVES_ZEROPP_ZPP_H_

#include <stddef.h>
#include <stdint.h>

#include "collectives/check.h"
#include "collectives/coll.h"
#include "collectives/plan.h"
#include "core/stream.h"
#include "quant/quant.h"
#include "topology/rankmap.h"

/* A comm-owned error-feedback residual. */
typedef struct zpp_residual {
  int tag;
  size_t count;
  float* buf;
  struct zpp_residual* next;
} zpp_residual_t;

/* A policy for one plain collective (qcclCommSetPolicy / QCCL_POLICY). */
typedef struct {
  int set;            /* 1: quantize, 0: no policy, -1: plain (overrides QCCL_POLICY) */
  quant_params_t q;   /* the spec (across nodes for the reductions) */
  quant_params_t qin; /* the hop inside the node (reductions) */
  size_t min_bytes;   /* smaller calls stay plain */
} zpp_policy_t;

enum { ZPP_POL_AG = 0, ZPP_POL_RS = 1, ZPP_POL_AR = 2, ZPP_POL_NUM = 3 };

#define ZPP_NSCRATCH 6

struct zpp_comm {
  zpp_policy_t policy[ZPP_POL_NUM];
  zpp_residual_t* residuals;
  void* scratch[ZPP_NSCRATCH];
  size_t scratch_bytes[ZPP_NSCRATCH];
};

/* comm's state, made on first use. */
qcclResult_t zpp_state(qcclComm_t comm, struct zpp_comm** out);

/* Scratch buffer `which` (< ZPP_NSCRATCH) of at least bytes, kept. */
qcclResult_t zpp_scratch(qcclComm_t comm, int which, size_t bytes, void** out);

/* The comm-owned residual of tag for count floats (zeroed when new or when
 * its count changes). */
qcclResult_t zpp_residual(qcclComm_t comm, int tag, size_t count, float** out);

/* The quantization ISA (decided once per process). */
qcclResult_t zpp_isa(quant_isa_t* isa);

/* ---- argument checks (messages name the function and the argument; the
 * communicator, count and buffer checks are collectives/check.h's) ---- */

qcclResult_t zpp_check_type(const char* fn, qcclDataType_t t);
qcclResult_t zpp_check_spec(const char* fn, const char* what, const qcclQuantSpec_t* spec,
                            quant_params_t* p);
/* The reduction hops of cfg (NULL: defaults), and its error feedback. */
qcclResult_t zpp_check_cfg(const char* fn, const qcclReduceScatterQConfig_t* cfg,
                           quant_params_t* intra, quant_params_t* inter);
/* Records a failed call on comm (when comm is alive) and returns r. */
qcclResult_t zpp_fail(qcclComm_t comm, qcclResult_t r);

/* ---- one queued or immediate call ---- */

typedef enum { ZPP_AGQ, ZPP_RSQ, ZPP_ARQ } zpp_kind_t;

struct qcclSecondary;

typedef struct zpp_op {
  zpp_kind_t kind;
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
} zpp_op_t;

/* Runs n calls in order, fusing consecutive compatible ones into one
 * bucket. Frees nothing. */
qcclResult_t zpp_run_ops(zpp_op_t* const* ops, int n);

/* Runs one call now, queues it on its host stream (op->stream), or adds it
 * to the open group (group.c, as a group_kind_t); the last two keep a
 * copy. */
qcclResult_t zpp_submit(qcclComm_t comm, const zpp_op_t* op);

/* ---- the algorithms: compositions (plan.h) ---- */

/* The head of every ZeRO++ call's plan: a sequence of stages (plan_seq_t),
 * the call it was built for (key: kind, count, type, op and specs; its
 * buffers aside), and what a call brings besides its buffers, set by the
 * runner before each start. */
typedef struct {
  plan_seq_t s;
  zpp_op_t key;
  float* residual;           /* RSQ / ARQ: the error-feedback residual, or NULL */
  struct qcclSecondary* sec; /* AGQ: the hpZ shard to fill, or NULL */
  unsigned long long gen;
} zpp_plan_t;

/* The plan arguments of a call (the key of the communicator's plan cache):
 * its kind numbered after the plain ones. */
coll_args_t zpp_plan_args(const zpp_op_t* op);
void zpp_plan_init(zpp_plan_t* z, const zpp_op_t* op);
/* plan_ops_t.same of every ZeRO++ plan: built for the specs of ctx (a
 * zpp_op_t)? */
int zpp_plan_same(const plan_t* p, const void* ctx);

/* The plan of a plain collective a that a ZeRO++ composition runs on comm
 * (the one-level gathers and all-to-alls, the hpZ gathers): the node's
 * algorithm on one host, across hosts the two-level one where the hosts
 * are equal (but for AlltoAll), else the flat one. */
qcclResult_t zpp_plain_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);

/* The builders (plan_build_fn; ctx: the zpp_op_t of the call). qwZ: the
 * all-gather of count elements per rank quantized under q1 (or plain),
 * filling the call's hpZ shard if it has one; qgZ: the reduce-scatter of
 * recvcount elements per rank (q1 inside the node, q2 across); the
 * quantized all-reduce. */
qcclResult_t zpp_agq_plan(qcclComm_t comm, const coll_args_t* a, const void* ctx, plan_t** out);
qcclResult_t zpp_rsq_plan(qcclComm_t comm, const coll_args_t* a, const void* ctx, plan_t** out);
qcclResult_t zpp_arq_plan(qcclComm_t comm, const coll_args_t* a, const void* ctx, plan_t** out);

/* The checks of the two gathers' entry points; fills op (spec NULL makes a
 * plain gather when spec_optional). */
qcclResult_t zpp_agq_check(const char* fn, const void* sendbuff, void* recvbuff, size_t sendcount,
                           qcclDataType_t datatype, const qcclQuantSpec_t* spec, int spec_optional,
                           qcclComm_t comm, qcclStream_t stream, zpp_op_t* op);

/* hpZ: copies this rank's slice of the gathered tensor into sec. */
qcclResult_t zpp_secondary_fill(struct qcclSecondary* sec, const void* gathered,
                                unsigned long long gen);

/* The checks of the reductions' entry points (rs: the count is recvcount);
 * fills o but for kind and slot. */
qcclResult_t zpp_rsq_check(const char* fn, const void* sendbuff, void* recvbuff, size_t count,
                           int rs, qcclDataType_t datatype, qcclRedOp_t op,
                           const qcclReduceScatterQConfig_t* cfg, qcclComm_t comm,
                           qcclStream_t stream, zpp_op_t* o);

/* Elements per destination in one pipelined piece of qgZ (QCCL_ZERO_PIECE);
 * fails, naming the variable, when QCCL_ZERO_PIECE or QCCL_POLICY is
 * malformed. */
qcclResult_t zpp_env_piece(size_t* piece);

/* Floats of qgZ's residual (0 where there is no inter-node hop). */
size_t zpp_rsq_residual_count(qcclComm_t comm, size_t rc, const quant_params_t* inter);

/* Runs one zpp_op_t (resolving a comm-owned residual), counted under its
 * slot. */
qcclResult_t zpp_run_one(const zpp_op_t* op);

/* ---- policy (policy.c) ---- */

/* 1 if a policy turns this plain call, issued by the user, into a
 * quantized one (decided when the call is issued, group.c). */
int zpp_policy_applies(qcclComm_t comm, const coll_args_t* a);

/* Parses text as QCCL_POLICY would, without the environment: 0 when it is
 * valid, -1 with the message in msg (len bytes) otherwise. For the tests
 * and the fuzz target. */
int zpp_policy_check(const char* text, char* msg, size_t len);

/* The quantized call of a plain one for which zpp_policy_applies. */
qcclResult_t zpp_policy_op(qcclComm_t comm, const coll_args_t* a, zpp_op_t* op);

#endif /* QCCL_COLLECTIVES_ZEROPP_ZPP_H_ */
