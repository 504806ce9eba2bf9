/*
 * policy.c - quantization policies: plain qcclAllGather, qcclReduceScatter
 * and qcclAllReduce calls that become their ZeRO++ counterparts without a
 * change in the caller (qcclCommSetPolicy, QCCL_POLICY).
 *
 * api.c asks zpp_policy_applies of every plain call the user issues
 * (the plain collectives that the quantized ones run inside are stages of
 * their plans, not calls, and are never asked); a call qualifies when its collective
 * has a policy (the communicator's, else
 * QCCL_POLICY's), its type is f32 / f16 / bf16, its op (reductions) is Sum
 * or Avg and its full buffer is at least the policy's minimum. It then
 * runs, and is counted, as the quantized collective; every other call runs
 * and is counted as plain, so the counters attribute every byte.
 *
 * QCCL_POLICY: a comma list of collective:token:token..., collective one
 * of allgather, reducescatter, allreduce; tokens int8 | int4 (bits; across
 * nodes for the reductions), bN (block), asym, rot, sr (stochastic
 * rounding), seed=N, min=SIZE (bytes, K / M / G suffixes), intra4 |
 * intra8 (the reductions' hop inside the node, default 8), hier (accepted:
 * the collectives are two-level wherever the placement allows). Parsed
 * once per process, with QCCL_ZERO_PIECE.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "collectives/coll.h"
#include "core/dtype.h"
#include "core/env.h"
#include "core/log.h"
#include "collectives/zeropp/zpp.h"

#define ZPP_PIECE_DEFAULT ((size_t)1 << 17)

typedef struct {
  qcclResult_t err; /* QCCL_POLICY malformed: every policy lookup fails */
  char msg[256];
  zpp_policy_t policy[ZPP_POL_NUM];
  size_t piece;
} zpp_env_t;

static zpp_env_t zpp_env;
static pthread_once_t zpp_env_once = PTHREAD_ONCE_INIT;

static const char* const pol_names[ZPP_POL_NUM] = {"allgather", "reducescatter", "allreduce"};

/* Sizes and numbers follow env.c's rule (decimal, K / M / G for sizes). */
static int parse_size(const char* s, size_t* out) {
  int64_t v;
  if (env_parse_size("QCCL_POLICY min", s, 0, INT64_MAX, &v) != qcclSuccess) return -1;
  *out = (size_t)v;
  return 0;
}

static int parse_u64(const char* s, int64_t lo, int64_t hi, int64_t* out) {
  return env_parse_int("QCCL_POLICY", s, lo, hi, out) == qcclSuccess ? 0 : -1;
}

/* Parses one item "collective:token:..." into env->policy. */
static int policy_parse_item(char* item, zpp_env_t* env, const char* whole) {
  char* save = NULL;
  char* name = strtok_r(item, ":", &save);
  int idx = -1;
  for (int i = 0; name && i < ZPP_POL_NUM; i++)
    if (strcasecmp(name, pol_names[i]) == 0) idx = i;
  if (idx < 0) {
    snprintf(env->msg, sizeof env->msg,
             "QCCL_POLICY='%s': '%s' is not allgather, reducescatter or allreduce", whole,
             name ? name : "");
    return -1;
  }
  qcclQuantSpec_t spec = QCCL_QUANT_SPEC_INITIALIZER;
  int intra_bits = 8;
  size_t min_bytes = 0;
  for (char* t = strtok_r(NULL, ":", &save); t; t = strtok_r(NULL, ":", &save)) {
    int64_t num;
    if (strcasecmp(t, "int8") == 0)
      spec.bits = 8;
    else if (strcasecmp(t, "int4") == 0)
      spec.bits = 4;
    else if ((t[0] == 'b' || t[0] == 'B') && t[1] >= '0' && t[1] <= '9') {
      if (parse_u64(t + 1, 1, 1 << 20, &num) != 0) goto bad;
      spec.block = (int)num;
    } else if (strcasecmp(t, "asym") == 0)
      spec.mode = qcclQuantAsymmetric;
    else if (strcasecmp(t, "sym") == 0)
      spec.mode = qcclQuantSymmetric;
    else if (strcasecmp(t, "rot") == 0)
      spec.rotate = 1;
    else if (strcasecmp(t, "sr") == 0)
      spec.rounding = qcclRoundStochastic;
    else if (strncasecmp(t, "seed=", 5) == 0) {
      if (parse_u64(t + 5, 0, INT64_MAX, &num) != 0) goto bad;
      spec.seed = (uint64_t)num;
    } else if (strncasecmp(t, "min=", 4) == 0) {
      if (parse_size(t + 4, &min_bytes) != 0) goto bad;
    } else if (strcasecmp(t, "intra4") == 0)
      intra_bits = 4;
    else if (strcasecmp(t, "intra8") == 0)
      intra_bits = 8;
    else if (strcasecmp(t, "hier") == 0)
      ;
    else
      goto bad;
    continue;
  bad:
    err_clear();
    snprintf(env->msg, sizeof env->msg, "QCCL_POLICY='%s': token '%s' of %s is not understood",
             whole, t, pol_names[idx]);
    return -1;
  }
  zpp_policy_t* p = &env->policy[idx];
  if (quant_params_from_spec(&spec, &p->q) != qcclSuccess) {
    snprintf(env->msg, sizeof env->msg, "QCCL_POLICY='%s': %s: %s", whole, pol_names[idx],
             err_last());
    err_clear();
    return -1;
  }
  p->qin = p->q;
  p->qin.bits = intra_bits;
  p->min_bytes = min_bytes;
  p->set = 1;
  QCCL_INFO(LOG_ZERO, "QCCL_POLICY: %s -> int%d (intra int%d) b%d%s%s%s from %zu bytes",
            pol_names[idx], p->q.bits, intra_bits, p->q.block, p->q.asym ? " asym" : "",
            p->q.rotate ? " rot" : "", p->q.stochastic ? " sr" : "", min_bytes);
  return 0;
}

static void zpp_policy_parse_text(const char* v, zpp_env_t* env);

static void zpp_env_parse(void) {
  zpp_env_t* env = &zpp_env;
  int64_t piece;
  if (env_get_int("QCCL_ZERO_PIECE", (int64_t)ZPP_PIECE_DEFAULT, 32, (int64_t)1 << 30, &piece) !=
      qcclSuccess) {
    snprintf(env->msg, sizeof env->msg, "%s", err_last());
    env->err = qcclInvalidArgument;
    piece = (int64_t)ZPP_PIECE_DEFAULT;
  }
  env->piece = (size_t)piece;
  const char* v = env_get("QCCL_POLICY");
  if (v == NULL || env->err != qcclSuccess) return;
  zpp_policy_parse_text(v, env);
}

/* Parses the text of QCCL_POLICY into env (policies, or err and msg). */
static void zpp_policy_parse_text(const char* v, zpp_env_t* env) {
  char buf[512];
  if (env_copy("QCCL_POLICY", v, buf, sizeof buf) != qcclSuccess) {
    snprintf(env->msg, sizeof env->msg, "%s", err_last());
    err_clear();
    env->err = qcclInvalidArgument;
    return;
  }
  char* save = NULL;
  for (char* item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    if (policy_parse_item(item, env, v) != 0) {
      env->err = qcclInvalidArgument;
      for (int i = 0; i < ZPP_POL_NUM; i++) env->policy[i].set = 0;
      return;
    }
  }
}

int zpp_policy_check(const char* text, char* msg, size_t len) {
  zpp_env_t* env = calloc(1, sizeof *env);
  if (!env) return -1;
  zpp_policy_parse_text(text, env);
  int bad = env->err != qcclSuccess;
  if (bad && msg && len) snprintf(msg, len, "%s", env->msg);
  free(env);
  return bad ? -1 : 0;
}

static const zpp_env_t* zpp_env_get(void) {
  pthread_once(&zpp_env_once, zpp_env_parse);
  return &zpp_env;
}

qcclResult_t zpp_env_piece(size_t* piece) {
  const zpp_env_t* env = zpp_env_get();
  if (env->err != qcclSuccess) return QCCL_ERR(env->err, "%s", env->msg);
  *piece = env->piece;
  return qcclSuccess;
}

static int policy_index(coll_kind_t kind) {
  switch (kind) {
    case COLL_ALLGATHER:
      return ZPP_POL_AG;
    case COLL_REDUCESCATTER:
      return ZPP_POL_RS;
    case COLL_ALLREDUCE:
      return ZPP_POL_AR;
    default:
      return -1;
  }
}

/* The policy in force for idx on comm (NULL: none). */
static const zpp_policy_t* policy_of(qcclComm_t comm, int idx) {
  if (comm->zero != NULL && comm->zero->policy[idx].set != 0)
    return comm->zero->policy[idx].set > 0 ? &comm->zero->policy[idx] : NULL;
  const zpp_env_t* env = zpp_env_get();
  return env->policy[idx].set > 0 ? &env->policy[idx] : NULL;
}

int zpp_policy_applies(qcclComm_t comm, const coll_args_t* a) {
  int idx = policy_index(a->kind);
  if (idx < 0 || a->count == 0) return 0;
  qcclDataType_t t = a->datatype;
  if (t != qcclFloat32 && t != qcclFloat16 && t != qcclBfloat16) return 0;
  if (idx != ZPP_POL_AG && a->op != qcclSum && a->op != qcclAvg) return 0;
  if (zpp_env_get()->err != qcclSuccess) return 1; /* zpp_policy_op reports it */
  const zpp_policy_t* p = policy_of(comm, idx);
  if (p == NULL) return 0;
  size_t bytes = a->count * dtype_size(t) * (idx == ZPP_POL_AR ? 1 : (size_t)comm->nranks);
  return bytes >= p->min_bytes;
}

qcclResult_t zpp_policy_op(qcclComm_t comm, const coll_args_t* a, zpp_op_t* op) {
  const zpp_env_t* env = zpp_env_get();
  if (env->err != qcclSuccess) return QCCL_ERR(env->err, "%s", env->msg);
  int idx = policy_index(a->kind);
  const zpp_policy_t* p = policy_of(comm, idx);
  if (p == NULL) return QCCL_ERR(qcclInternalError, "zpp_policy_op: no policy");
  memset(op, 0, sizeof *op);
  op->comm = comm;
  op->send = a->sendbuff;
  op->recv = a->recvbuff;
  op->count = a->count;
  op->dt = a->datatype;
  op->op = a->op;
  if (idx == ZPP_POL_AG) {
    op->kind = ZPP_AGQ;
    op->slot = qcclStatAllGatherQ;
    op->q1 = p->q;
  } else {
    op->kind = idx == ZPP_POL_RS ? ZPP_RSQ : ZPP_ARQ;
    op->slot = idx == ZPP_POL_RS ? qcclStatReduceScatterQ : qcclStatAllReduceQ;
    op->q1 = p->qin;
    op->q2 = p->q;
  }
  QCCL_TRACE(LOG_ZERO, "policy: %s of %zu x %s runs quantized (int%d b%d)", pol_names[idx],
             a->count, dtype_name(a->datatype), p->q.bits, p->q.block);
  return qcclSuccess;
}

qcclResult_t qcclCommSetPolicy(qcclComm_t comm, qcclStatColl_t collective,
                               const qcclQuantSpec_t* spec, size_t minBytes) {
  static const char fn[] = "qcclCommSetPolicy";
  err_clear();
  qcclResult_t r = check_comm_usable(fn, comm, NULL, NULL);
  if (r != qcclSuccess) return zpp_fail(comm, r);
  int idx = collective == qcclStatAllGather       ? ZPP_POL_AG
            : collective == qcclStatReduceScatter ? ZPP_POL_RS
            : collective == qcclStatAllReduce     ? ZPP_POL_AR
                                                  : -1;
  if (idx < 0)
    return zpp_fail(comm, QCCL_ERR(qcclInvalidArgument,
                                   "%s: collective=%d is not qcclStatAllGather, "
                                   "qcclStatReduceScatter or qcclStatAllReduce",
                                   fn, (int)collective));
  zpp_policy_t p;
  memset(&p, 0, sizeof p);
  if (spec == NULL) {
    p.set = -1;
  } else {
    r = zpp_check_spec(fn, "spec", spec, &p.q);
    if (r != qcclSuccess) return zpp_fail(comm, r);
    p.qin = p.q;
    p.qin.bits = 8;
    p.min_bytes = minBytes;
    p.set = 1;
  }
  struct zpp_comm* z = NULL;
  r = zpp_state(comm, &z);
  if (r != qcclSuccess) return zpp_fail(comm, r);
  z->policy[idx] = p;
  QCCL_INFO(LOG_ZERO, "policy: %s %s (int%d b%d) from %zu bytes", pol_names[idx],
            spec ? "quantized" : "plain", p.q.bits, p.q.block, minBytes);
  return qcclSuccess;
}
