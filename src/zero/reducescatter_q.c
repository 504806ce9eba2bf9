/*
 * reducescatter_q.c - qgZ, the hierarchical quantized reduce-scatter
 * (qcclReduceScatterQ).
 *
 * Notation: W ranks on N nodes of L ranks; rank (a, l) is local index l of
 * node a; rc elements per rank; block d of sendbuff is destined for rank d.
 *
 * Two-level (N > 1, equal nodes), per piece of the blocks (pe elements, a
 * multiple of the block size B; the pieces are pipelined):
 *   1. rank (a, l) quantizes, for every local index m and node b, its
 *      piece of block (b, m) under the intra spec (slices reordered so the
 *      result lands on its rank, whatever the placement: the rank at
 *      (b, m) comes from the map of zero_common.c);
 *   2. one all-to-all inside the node: local peer m receives the N chunks
 *      for the ranks of its local index (one message, scales inline);
 *   3. fused dequantize + f32 sum over the L local sources (in local order)
 *      + requantize under the inter spec, per destination node b
 *      (quant_reduce_requant; with error feedback the residual of the
 *      inter quantization is added back and kept);
 *   4. one all-to-all among the ranks of equal local index (the rail):
 *      node b receives the chunk for (b, l);
 *   5. dequantize + f32 sum over the N node sums (in node order), divided
 *      by W for Avg, rounded once into the output type.
 * Steps 2 of piece i+1 and 4 of piece i are one batch of transfers, so the
 * two hops overlap. Bytes per rank: (L-1)/L x W x rc at the intra width
 * inside the node, (N-1) x rc at the inter width across (int4: 1/4 of the
 * plain fp16 reduce-scatter's (N-1) x rc x 2 bytes, plus 4/B per element of
 * scales). Any count and any N x L: tails are padded inside the chunks.
 *
 * One level (one node, or nodes of unequal sizes): quantize every block
 * (intra spec on one node, inter across nodes), one all-to-all over all
 * ranks, dequantize + f32 sum in rank order. Every element's sum is taken
 * by its owner in a fixed order: the same bits on every run.
 *
 * Error (round to nearest): |y - sum x| <= sum over ranks of the intra
 * bound of their block + sum over nodes of the inter bound of the node
 * sum's block + f32 rounding of the sums (docs/ZEROPP.md).
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/coll.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/log.h"
#include "zero/zero.h"

typedef struct {
  qcclComm_t comm;
  quant_isa_t isa;
  int two;        /* two-level */
  qcclComm_t c1;  /* hop 1 */
  int g, me1;     /* its size and this rank's index */
  int nsub;       /* chunks per hop-1 message: N (two-level) or 1 */
  int* dest;      /* [g * nsub]: global rank of chunk b of the message to peer m */
  qcclComm_t c2;  /* hop 2 (two-level) */
  int n, me2;     /* N and this rank's node */
  int* rail_peer; /* [n]: the peer index in c2 of node b's rank */
  quant_params_t p1, p2;
} rsq_plan_t;

/* The plan for comm; dest and rail_peer are freed by rsq_plan_free. */
static qcclResult_t rsq_plan(qcclComm_t comm, const quant_params_t* intra,
                             const quant_params_t* inter, rsq_plan_t* pl) {
  struct zero_comm* z;
  QCCL_CHECK(zero_state(comm, &z));
  const zero_map_t* m = &z->map;
  memset(pl, 0, sizeof *pl);
  pl->comm = comm;
  QCCL_CHECK(zero_isa(&pl->isa));
  pl->two = comm->nnodes > 1 && m->equal;
  pl->p1 = *intra;
  pl->p2 = *inter;
  int w = comm->nranks;
  if (pl->two) {
    int L = m->lmax, N = m->nnodes;
    pl->c1 = comm->node;
    pl->g = L;
    pl->me1 = m->local[comm->rank];
    pl->nsub = N;
    pl->n = N;
    pl->me2 = m->node[comm->rank];
    pl->c2 = comm->rail ? comm->rail : comm;
    pl->dest = malloc(sizeof *pl->dest * (size_t)L * (size_t)N);
    pl->rail_peer = malloc(sizeof *pl->rail_peer * (size_t)N);
    if (!pl->dest || !pl->rail_peer) return QCCL_ERR(qcclSystemError, "out of memory");
    for (int k = 0; k < L; k++)
      for (int b = 0; b < N; b++) pl->dest[k * N + b] = m->at[b * L + k];
    for (int b = 0; b < N; b++) pl->rail_peer[b] = comm->rail ? b : m->at[b * L + pl->me1];
  } else {
    pl->c1 = comm;
    pl->g = w;
    pl->me1 = comm->rank;
    pl->nsub = 1;
    pl->n = 1;
    if (comm->nnodes > 1) pl->p1 = *inter; /* the one hop crosses nodes */
    pl->dest = malloc(sizeof *pl->dest * (size_t)w);
    if (!pl->dest) return QCCL_ERR(qcclSystemError, "out of memory");
    for (int k = 0; k < w; k++) pl->dest[k] = k;
  }
  return qcclSuccess;
}

static void rsq_plan_free(rsq_plan_t* pl) {
  free(pl->dest);
  free(pl->rail_peer);
}

size_t zero_rsq_residual_count(qcclComm_t comm, size_t rc, const quant_params_t* inter) {
  struct zero_comm* z;
  if (comm->nnodes <= 1 || zero_state(comm, &z) != qcclSuccess || !z->map.equal) return 0;
  return (size_t)z->map.nnodes * quant_coded_elems(inter, rc);
}

/* Step 5 (and the one-level final sum): acc = sum of the k chunks, then
 * the output. */
static qcclResult_t rsq_final(const rsq_plan_t* pl, const quant_params_t* p,
                              const char* const* chunks, int k, size_t pn, float* acc,
                              qcclRedOp_t op, qcclDataType_t dt, void* out) {
  memset(acc, 0, pn * sizeof *acc);
  for (int i = 0; i < k; i++) QCCL_CHECK(quant_dequantize_acc(pl->isa, p, chunks[i], pn, acc));
  if (op == qcclAvg) {
    float w = (float)pl->comm->nranks;
    for (size_t i = 0; i < pn; i++) acc[i] = acc[i] / w;
  }
  if (dt == qcclFloat32)
    memcpy(out, acc, pn * sizeof *acc);
  else
    convert_from_f32(out, acc, pn, dt);
  return qcclSuccess;
}

/* Step 1: the g x nsub chunks of piece [po, po + pn) into s1. */
static qcclResult_t rsq_quantize(const rsq_plan_t* pl, const char* send, size_t rc, size_t po,
                                 size_t pn, qcclDataType_t dt, char* s1, size_t c1) {
  size_t es = dtype_size(dt);
  quant_params_t p = pl->p1;
  p.rank = (uint32_t)pl->comm->rank;
  for (int i = 0; i < pl->g * pl->nsub; i++) {
    size_t d = (size_t)pl->dest[i];
    p.index0 = d * rc + po;
    QCCL_CHECK(quant_quantize(pl->isa, &p, send + (d * rc + po) * es, dt, pn, s1 + (size_t)i * c1));
  }
  return qcclSuccess;
}

static qcclResult_t rsq_one_level(const rsq_plan_t* pl, const char* send, char* recv, size_t rc,
                                  qcclDataType_t dt, qcclRedOp_t op, size_t pe) {
  size_t es = dtype_size(dt), g = (size_t)pl->g;
  size_t c1max = quant_chunk_bytes(&pl->p1, rc < pe ? rc : pe);
  char* mem;
  QCCL_CHECK(zero_scratch(pl->comm, 2, 2 * g * c1max + pe * sizeof(float), (void**)&mem));
  char *s1 = mem, *r1 = mem + g * c1max;
  float* acc = (float*)(mem + 2 * g * c1max);
  const char** chunks = malloc(sizeof *chunks * g);
  if (!chunks) return QCCL_ERR(qcclSystemError, "out of memory");
  qcclResult_t r = qcclSuccess;
  for (size_t po = 0; po < rc && r == qcclSuccess; po += pe) {
    size_t pn = rc - po < pe ? rc - po : pe;
    size_t c1 = quant_chunk_bytes(&pl->p1, pn);
    r = rsq_quantize(pl, send, rc, po, pn, dt, s1, c1);
    if (r != qcclSuccess) break;
    coll_args_t a = {COLL_ALLTOALL, s1, r1, c1, qcclUint8, qcclSum, -1};
    r = coll_run(pl->c1, &a);
    if (r != qcclSuccess) break;
    for (size_t k = 0; k < g; k++) chunks[k] = r1 + k * c1;
    r = rsq_final(pl, &pl->p1, chunks, (int)g, pn, acc, op, dt, recv + po * es);
  }
  free(chunks);
  return r;
}

static qcclResult_t rsq_two_level(const rsq_plan_t* pl, const char* send, char* recv, size_t rc,
                                  qcclDataType_t dt, qcclRedOp_t op, size_t pe, float* residual) {
  size_t es = dtype_size(dt), g = (size_t)pl->g, ns = (size_t)pl->nsub, n = (size_t)pl->n;
  size_t pmax = rc < pe ? rc : pe;
  size_t c1max = quant_chunk_bytes(&pl->p1, pmax), c2max = quant_chunk_bytes(&pl->p2, pmax);
  size_t coded_rc = quant_coded_elems(&pl->p2, rc);
  char* mem;
  QCCL_CHECK(zero_scratch(
      pl->comm, 2, 2 * g * ns * c1max + 2 * n * c2max + pmax * sizeof(float) + 64, (void**)&mem));
  char *s1 = mem, *r1 = s1 + g * ns * c1max, *s2 = r1 + g * ns * c1max, *r2 = s2 + n * c2max;
  float* acc = (float*)(((uintptr_t)(r2 + n * c2max) + 63) & ~(uintptr_t)63);
  int nops_max = 2 * (int)(g + n);
  coll_args_t* ops = malloc(sizeof *ops * (size_t)nops_max);
  qcclComm_t* comms = malloc(sizeof *comms * (size_t)nops_max);
  const void** srcs = malloc(sizeof *srcs * (g + n));
  qcclResult_t r = qcclSuccess;
  if (!ops || !comms || !srcs) {
    r = QCCL_ERR(qcclSystemError, "out of memory");
    goto done;
  }
  size_t npieces = (rc + pe - 1) / pe;
  size_t prv_po = 0, prv_pn = 0, prv_c2 = 0;
  for (size_t it = 0; it <= npieces; it++) {
    int cur = it<npieces, prv = it> 0;
    size_t po = it * pe, pn = cur ? (rc - po < pe ? rc - po : pe) : 0;
    size_t c1 = cur ? quant_chunk_bytes(&pl->p1, pn) : 0;
    if (cur) {
      r = rsq_quantize(pl, send, rc, po, pn, dt, s1, c1);
      if (r != qcclSuccess) goto done;
    }
    /* hop 1 of this piece and hop 2 of the previous one, together */
    int nops = 0;
    size_t msg1 = ns * c1;
    for (size_t k = 1; cur && k < g; k++) {
      int to = (int)((pl->me1 + k) % g), from = (int)((pl->me1 + g - k) % g);
      ops[nops] =
          (coll_args_t){COLL_SEND, s1 + (size_t)to * msg1, NULL, msg1, qcclUint8, qcclSum, to};
      comms[nops++] = pl->c1;
      ops[nops] =
          (coll_args_t){COLL_RECV, NULL, r1 + (size_t)from * msg1, msg1, qcclUint8, qcclSum, from};
      comms[nops++] = pl->c1;
    }
    for (size_t k = 1; prv && k < n; k++) {
      int to = (int)((pl->me2 + k) % n), from = (int)((pl->me2 + n - k) % n);
      ops[nops] = (coll_args_t){COLL_SEND, s2 + (size_t)to * prv_c2, NULL, prv_c2, qcclUint8,
                                qcclSum,   pl->rail_peer[to]};
      comms[nops++] = pl->c2;
      ops[nops] = (coll_args_t){COLL_RECV, NULL,    r2 + (size_t)from * prv_c2, prv_c2,
                                qcclUint8, qcclSum, pl->rail_peer[from]};
      comms[nops++] = pl->c2;
    }
    if (nops > 0) {
      r = p2p_run(ops, comms, nops);
      if (r != qcclSuccess) goto done;
    }
    if (prv) {
      const char** chunks = (const char**)srcs;
      for (size_t b = 0; b < n; b++) chunks[b] = (b == (size_t)pl->me2 ? s2 : r2) + b * prv_c2;
      r = rsq_final(pl, &pl->p2, chunks, (int)n, prv_pn, acc, op, dt, recv + prv_po * es);
      if (r != qcclSuccess) goto done;
    }
    if (cur) {
      size_t c2 = quant_chunk_bytes(&pl->p2, pn);
      quant_params_t q2 = pl->p2;
      q2.rank = (uint32_t)(pl->comm->nranks + pl->comm->rank);
      for (size_t b = 0; b < n; b++) {
        for (size_t k = 0; k < g; k++)
          srcs[k] = (k == (size_t)pl->me1 ? s1 : r1) + k * msg1 + b * c1;
        size_t d = (size_t)pl->dest[(size_t)pl->me1 * ns + b];
        q2.index0 = d * rc + po;
        float* res = residual ? residual + b * coded_rc + po : NULL;
        r = quant_reduce_requant(pl->isa, &pl->p1, srcs, (int)g, pn, &q2, res, s2 + b * c2);
        if (r != qcclSuccess) goto done;
      }
      prv_po = po;
      prv_pn = pn;
      prv_c2 = c2;
    }
  }
done:
  free(ops);
  free(comms);
  free(srcs);
  return r;
}

qcclResult_t zero_reducescatter_q(qcclComm_t comm, const void* send, void* recv, size_t rc,
                                  qcclDataType_t dt, qcclRedOp_t op, const quant_params_t* intra,
                                  const quant_params_t* inter, float* residual) {
  if (rc == 0) return qcclSuccess;
  rsq_plan_t pl;
  qcclResult_t r = rsq_plan(comm, intra, inter, &pl);
  if (r == qcclSuccess) {
    size_t pe = zero_env_piece();
    size_t b = (size_t)intra->block;
    pe = (pe + b - 1) / b * b; /* pieces hold whole blocks */
    QCCL_TRACE(LOG_ZERO, "ReduceScatterQ %zu x %s: %s, pieces of %zu", rc, dtype_name(dt),
               pl.two ? "two-level" : "one level", pe);
    if (pl.two)
      r = rsq_two_level(&pl, send, recv, rc, dt, op, pe, residual);
    else
      r = rsq_one_level(&pl, send, recv, rc, dt, op, pe);
  }
  rsq_plan_free(&pl);
  return r;
}

/* The checks of the reductions' entry points; fills op. */
qcclResult_t zero_rsq_check(const char* fn, const void* sendbuff, void* recvbuff, size_t count,
                            int rs, qcclDataType_t datatype, qcclRedOp_t op,
                            const qcclReduceScatterQConfig_t* cfg, qcclComm_t comm,
                            qcclStream_t stream, zero_op_t* o) {
  const char* cname = rs ? "recvcount" : "count";
  QCCL_CHECK(zero_check_comm(fn, comm, stream));
  QCCL_CHECK(zero_check_type(fn, datatype));
  QCCL_CHECK(zero_check_count(fn, cname, count, (size_t)comm->nranks, dtype_size(datatype)));
  if (op != qcclSum && op != qcclAvg)
    return QCCL_ERR(qcclInvalidArgument, "%s: op=%d is not qcclSum or qcclAvg", fn, (int)op);
  memset(o, 0, sizeof *o);
  QCCL_CHECK(zero_check_cfg(fn, cfg, &o->q1, &o->q2));
  if (count > 0 && sendbuff == NULL)
    return QCCL_ERR(qcclInvalidArgument, "%s: sendbuff is NULL with %s=%zu", fn, cname, count);
  if (count > 0 && recvbuff == NULL)
    return QCCL_ERR(qcclInvalidArgument, "%s: recvbuff is NULL with %s=%zu", fn, cname, count);
  o->comm = comm;
  o->send = sendbuff;
  o->recv = recvbuff;
  o->count = count;
  o->dt = datatype;
  o->op = op;
  if (cfg != NULL && cfg->errorFeedback) {
    size_t rc = rs ? count : (count + (size_t)comm->nranks - 1) / (size_t)comm->nranks;
    o->ef = 1;
    o->residual = cfg->residual;
    o->residual_count = cfg->residualCount;
    o->residual_tag = cfg->residualTag;
    size_t need = zero_rsq_residual_count(comm, rc, &o->q2);
    if (cfg->residual != NULL && cfg->residualCount != need)
      return QCCL_ERR(qcclInvalidArgument,
                      "%s: cfg->residualCount=%zu is not the %zu floats this call needs "
                      "(qcclReduceScatterQResidualCount)",
                      fn, cfg->residualCount, need);
  }
  return qcclSuccess;
}

qcclResult_t qcclReduceScatterQ(const void* sendbuff, void* recvbuff, size_t recvcount,
                                qcclDataType_t datatype, qcclRedOp_t op,
                                const qcclReduceScatterQConfig_t* cfg, qcclComm_t comm,
                                qcclStream_t stream) {
  err_clear();
  zero_op_t o;
  qcclResult_t r = zero_rsq_check("qcclReduceScatterQ", sendbuff, recvbuff, recvcount, 1, datatype,
                                  op, cfg, comm, stream, &o);
  if (r != qcclSuccess) return zero_fail(comm, r);
  o.kind = ZERO_RSQ;
  o.slot = qcclStatReduceScatterQ;
  return group_submit_zero(comm, &o);
}

qcclResult_t qcclReduceScatterQResidualCount(qcclComm_t comm, size_t recvcount,
                                             const qcclReduceScatterQConfig_t* cfg, size_t* count) {
  static const char fn[] = "qcclReduceScatterQResidualCount";
  err_clear();
  quant_params_t intra, inter;
  qcclResult_t r = zero_check_comm(fn, comm, NULL);
  if (r == qcclSuccess) r = zero_check_cfg(fn, cfg, &intra, &inter);
  if (r == qcclSuccess && count == NULL) r = QCCL_ERR(qcclInvalidArgument, "%s: count is NULL", fn);
  if (r != qcclSuccess) return zero_fail(comm, r);
  *count = zero_rsq_residual_count(comm, recvcount, &inter);
  return qcclSuccess;
}
