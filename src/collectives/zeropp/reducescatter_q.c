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
 *      (b, m) comes from the communicator's rank map);
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
 * The pieces are pipelined (hier_pipe.c): step 4 of piece i runs on the
 * rail thread while the caller's thread runs steps 1-3 of piece i+1 and
 * step 5 of piece i-1, so the network overlaps the codec and the node's
 * shared memory. Bytes per rank: (L-1)/L x W x rc at the intra width
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
#include "collectives/hier_pipe.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/log.h"
#include "collectives/zeropp/zpp.h"

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
  memset(pl, 0, sizeof *pl);
  const topo_rankmap_t* m = comm->rankmap;
  pl->comm = comm;
  QCCL_CHECK(zpp_isa(&pl->isa));
  pl->two = comm->nnodes > 1 && m->equal;
  pl->p1 = *intra;
  pl->p2 = *inter;
  int w = comm->nranks;
  if (pl->two) {
    int L = m->max_size, N = m->nnodes;
    pl->c1 = comm->node;
    pl->g = L;
    pl->me1 = m->local_rank[comm->rank];
    pl->nsub = N;
    pl->n = N;
    pl->me2 = m->node_of[comm->rank];
    pl->c2 = comm->rail ? comm->rail : comm;
    pl->dest = malloc(sizeof *pl->dest * (size_t)L * (size_t)N);
    pl->rail_peer = malloc(sizeof *pl->rail_peer * (size_t)N);
    if (!pl->dest || !pl->rail_peer) return QCCL_ERR(qcclSystemError, "out of memory");
    for (int k = 0; k < L; k++)
      for (int b = 0; b < N; b++) pl->dest[k * N + b] = topo_rankmap_rank_at(m, b, k);
    for (int b = 0; b < N; b++)
      pl->rail_peer[b] = comm->rail ? b : topo_rankmap_rank_at(m, b, pl->me1);
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

size_t zpp_rsq_residual_count(qcclComm_t comm, size_t rc, const quant_params_t* inter) {
  if (comm->nnodes <= 1 || !comm->rankmap->equal) return 0;
  return (size_t)comm->rankmap->nnodes * quant_coded_elems(inter, rc);
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
  QCCL_CHECK(zpp_scratch(pl->comm, 2, 2 * g * c1max + pe * sizeof(float), (void**)&mem));
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

/* The two-level pipeline (hier_pipe.c): pre(k) = steps 1-3 of piece k on
 * the caller's thread (the node's shared memory), rail(k) = step 4 on the
 * rail thread (the network), post(k) = step 5 on the caller's thread. The
 * rail stage of piece k overlaps steps 1-3 of piece k+1 and step 5 of
 * piece k-1; hop-2 buffers alternate (piece k uses set k % 2, which
 * hier_pipe's order frees in time: pre(k+2) runs after post(k)). */
typedef struct {
  const rsq_plan_t* pl;
  const char* send;
  char* recv;
  size_t rc, pe, coded_rc, c1max, c2max;
  qcclDataType_t dt;
  qcclRedOp_t op;
  float* residual;
  char *s1, *r1, *s2[2], *r2[2];
  float* acc;
  const void** srcs;
  coll_args_t* ops;
  qcclComm_t* comms;
} rsq_pipe_t;

static void rsq_piece(const rsq_pipe_t* h, int k, size_t* po, size_t* pn) {
  *po = (size_t)k * h->pe;
  *pn = h->rc - *po < h->pe ? h->rc - *po : h->pe;
}

static qcclResult_t rsq_pre(void* arg, int k) {
  rsq_pipe_t* h = arg;
  const rsq_plan_t* pl = h->pl;
  size_t po, pn, g = (size_t)pl->g, ns = (size_t)pl->nsub, n = (size_t)pl->n;
  rsq_piece(h, k, &po, &pn);
  size_t c1 = quant_chunk_bytes(&pl->p1, pn), c2 = quant_chunk_bytes(&pl->p2, pn);
  size_t msg1 = ns * c1;
  /* 1-2: quantize, all-to-all inside the node */
  QCCL_CHECK(rsq_quantize(pl, h->send, h->rc, po, pn, h->dt, h->s1, c1));
  coll_args_t a = {COLL_ALLTOALL, h->s1, h->r1, msg1, qcclUint8, qcclSum, -1};
  QCCL_CHECK(coll_run(pl->c1, &a));
  /* 3: per destination node, sum the L sources and requantize */
  quant_params_t q2 = pl->p2;
  q2.rank = (uint32_t)(pl->comm->nranks + pl->comm->rank);
  for (size_t b = 0; b < n; b++) {
    for (size_t j = 0; j < g; j++) h->srcs[j] = h->r1 + j * msg1 + b * c1;
    size_t d = (size_t)pl->dest[(size_t)pl->me1 * ns + b];
    q2.index0 = d * h->rc + po;
    float* res = h->residual ? h->residual + b * h->coded_rc + po : NULL;
    QCCL_CHECK(quant_reduce_requant(pl->isa, &pl->p1, h->srcs, (int)g, pn, &q2, res,
                                    h->s2[k % 2] + b * c2));
  }
  return qcclSuccess;
}

static qcclResult_t rsq_rail(void* arg, int k) {
  rsq_pipe_t* h = arg;
  const rsq_plan_t* pl = h->pl;
  size_t po, pn, n = (size_t)pl->n;
  rsq_piece(h, k, &po, &pn);
  size_t c2 = quant_chunk_bytes(&pl->p2, pn);
  int nops = 0;
  for (size_t j = 1; j < n; j++) {
    int to = (int)((pl->me2 + j) % n), from = (int)((pl->me2 + n - j) % n);
    h->ops[nops] = (coll_args_t){
        COLL_SEND, h->s2[k % 2] + (size_t)to * c2, NULL, c2, qcclUint8, qcclSum, pl->rail_peer[to]};
    h->comms[nops++] = pl->c2;
    h->ops[nops] = (coll_args_t){
        COLL_RECV,          NULL, h->r2[k % 2] + (size_t)from * c2, c2, qcclUint8, qcclSum,
        pl->rail_peer[from]};
    h->comms[nops++] = pl->c2;
  }
  return nops > 0 ? p2p_run(h->ops, h->comms, nops) : qcclSuccess;
}

static qcclResult_t rsq_post(void* arg, int k) {
  rsq_pipe_t* h = arg;
  const rsq_plan_t* pl = h->pl;
  size_t po, pn, n = (size_t)pl->n;
  rsq_piece(h, k, &po, &pn);
  size_t c2 = quant_chunk_bytes(&pl->p2, pn);
  const char* chunks[n];
  for (size_t b = 0; b < n; b++)
    chunks[b] = (b == (size_t)pl->me2 ? h->s2[k % 2] : h->r2[k % 2]) + b * c2;
  return rsq_final(pl, &pl->p2, chunks, (int)n, pn, h->acc, h->op, h->dt,
                   h->recv + po * dtype_size(h->dt));
}

static qcclResult_t rsq_two_level(const rsq_plan_t* pl, const char* send, char* recv, size_t rc,
                                  qcclDataType_t dt, qcclRedOp_t op, size_t pe, float* residual) {
  size_t g = (size_t)pl->g, ns = (size_t)pl->nsub, n = (size_t)pl->n;
  size_t pmax = rc < pe ? rc : pe;
  rsq_pipe_t h = {.pl = pl,
                  .send = send,
                  .recv = recv,
                  .rc = rc,
                  .pe = pe,
                  .dt = dt,
                  .op = op,
                  .residual = residual};
  h.coded_rc = quant_coded_elems(&pl->p2, rc);
  h.c1max = quant_chunk_bytes(&pl->p1, pmax);
  h.c2max = quant_chunk_bytes(&pl->p2, pmax);
  size_t b1 = g * ns * h.c1max, b2 = n * h.c2max;
  char* mem;
  QCCL_CHECK(zpp_scratch(pl->comm, 2, 2 * b1 + 4 * b2 + pmax * sizeof(float) + 64, (void**)&mem));
  h.s1 = mem;
  h.r1 = h.s1 + b1;
  h.s2[0] = h.r1 + b1;
  h.s2[1] = h.s2[0] + b2;
  h.r2[0] = h.s2[1] + b2;
  h.r2[1] = h.r2[0] + b2;
  h.acc = (float*)(((uintptr_t)(h.r2[1] + b2) + 63) & ~(uintptr_t)63);
  h.srcs = malloc(sizeof *h.srcs * g);
  h.ops = malloc(sizeof *h.ops * 2 * n);
  h.comms = malloc(sizeof *h.comms * 2 * n);
  qcclResult_t r;
  if (!h.srcs || !h.ops || !h.comms) {
    r = QCCL_ERR(qcclSystemError, "out of memory");
  } else {
    hier_pipe_ops_t ops = {&h, (int)((rc + pe - 1) / pe), rsq_pre, rsq_rail, rsq_post};
    r = hier_pipe_run(pl->comm, &ops);
  }
  free(h.srcs);
  free(h.ops);
  free(h.comms);
  return r;
}

qcclResult_t zpp_reducescatter_q(qcclComm_t comm, const void* send, void* recv, size_t rc,
                                 qcclDataType_t dt, qcclRedOp_t op, const quant_params_t* intra,
                                 const quant_params_t* inter, float* residual) {
  if (rc == 0) return qcclSuccess;
  rsq_plan_t pl;
  qcclResult_t r = rsq_plan(comm, intra, inter, &pl);
  size_t pe = 0;
  if (r == qcclSuccess) r = zpp_env_piece(&pe);
  if (r == qcclSuccess) {
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
qcclResult_t zpp_rsq_check(const char* fn, const void* sendbuff, void* recvbuff, size_t count,
                           int rs, qcclDataType_t datatype, qcclRedOp_t op,
                           const qcclReduceScatterQConfig_t* cfg, qcclComm_t comm,
                           qcclStream_t stream, zpp_op_t* o) {
  const char* cname = rs ? "recvcount" : "count";
  stream_t* st;
  QCCL_CHECK(check_comm_usable(fn, comm, stream, &st));
  QCCL_CHECK(zpp_check_type(fn, datatype));
  QCCL_CHECK(
      check_count(fn, cname, count, (size_t)comm->nranks, dtype_size(datatype), QUANT_MAX_COUNT));
  if (op != qcclSum && op != qcclAvg)
    return QCCL_ERR(qcclInvalidArgument, "%s: op=%d is not qcclSum or qcclAvg", fn, (int)op);
  memset(o, 0, sizeof *o);
  o->stream = st;
  QCCL_CHECK(zpp_check_cfg(fn, cfg, &o->q1, &o->q2));
  QCCL_CHECK(check_buffers(fn, cname, count, sendbuff, recvbuff));
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
    size_t need = zpp_rsq_residual_count(comm, rc, &o->q2);
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
  zpp_op_t o;
  qcclResult_t r = zpp_rsq_check("qcclReduceScatterQ", sendbuff, recvbuff, recvcount, 1, datatype,
                                 op, cfg, comm, stream, &o);
  if (r != qcclSuccess) return zpp_fail(comm, r);
  o.kind = ZPP_RSQ;
  o.slot = qcclStatReduceScatterQ;
  return zpp_submit(comm, &o);
}

qcclResult_t qcclReduceScatterQResidualCount(qcclComm_t comm, size_t recvcount,
                                             const qcclReduceScatterQConfig_t* cfg, size_t* count) {
  static const char fn[] = "qcclReduceScatterQResidualCount";
  err_clear();
  quant_params_t intra, inter;
  qcclResult_t r = check_comm_usable(fn, comm, NULL, NULL);
  if (r == qcclSuccess) r = zpp_check_cfg(fn, cfg, &intra, &inter);
  if (r == qcclSuccess && count == NULL) r = QCCL_ERR(qcclInvalidArgument, "%s: count is NULL", fn);
  if (r != qcclSuccess) return zpp_fail(comm, r);
  *count = zpp_rsq_residual_count(comm, recvcount, &inter);
  return qcclSuccess;
}
