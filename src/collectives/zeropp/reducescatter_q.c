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
 * The pieces are pipelined (hier_pipe.c): step 4 of piece i is stepped
 * beside steps 1-3 of piece i+1 and step 5 of piece i-1, so the network
 * overlaps the codec and the node's shared memory. Bytes per rank: (L-1)/L x W x rc at the intra
 * width inside the node, (N-1) x rc at the inter width across (int4: 1/4 of the plain fp16
 * reduce-scatter's (N-1) x rc x 2 bytes, plus 4/B per element of scales). Any count and any N x L:
 * tails are padded inside the chunks.
 *
 * One level (one node, or nodes of unequal sizes): quantize every block
 * (intra spec on one node, inter across nodes), one all-to-all over all
 * ranks, dequantize + f32 sum in rank order. Every element's sum is taken
 * by its owner in a fixed order: the same bits on every run.
 *
 * Error (round to nearest): |y - sum x| <= sum over ranks of the intra
 * bound of their block + sum over nodes of the inter bound of the node
 * sum's block + f32 rounding of the sums (docs/ZEROPP.md).
 *
 * Plans: one level, a sequence of (quantize, the all-to-all's plan, sum)
 * per piece; two-level, the pipeline whose stages are step 1 with the
 * node's all-to-all plan and step 3 after it (pre), a leaf on the rail
 * for step 4, and step 5 (local, post).
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/hier_pipe.h"
#include "collectives/node.h"
#include "collectives/p2p.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/log.h"
#include "collectives/zeropp/zpp.h"

/* Who sends what to whom, for comm: fixed by the rank map. */
typedef struct {
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
  size_t pe; /* elements per destination in a piece (whole blocks) */
} rsq_layout_t;

/* The layout for comm; dest and rail_peer are freed by rsq_layout_free. */
static qcclResult_t rsq_layout(qcclComm_t comm, const quant_params_t* intra,
                               const quant_params_t* inter, rsq_layout_t* pl) {
  memset(pl, 0, sizeof *pl);
  const topo_rankmap_t* m = comm->rankmap;
  QCCL_CHECK(zpp_isa(&pl->isa));
  QCCL_CHECK(zpp_env_piece(&pl->pe));
  size_t b = (size_t)intra->block;
  pl->pe = (pl->pe + b - 1) / b * b; /* pieces hold whole blocks */
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
      for (int d = 0; d < N; d++) pl->dest[k * N + d] = topo_rankmap_rank_at(m, d, k);
    for (int d = 0; d < N; d++)
      pl->rail_peer[d] = comm->rail ? d : topo_rankmap_rank_at(m, d, pl->me1);
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

static void rsq_layout_free(rsq_layout_t* pl) {
  free(pl->dest);
  free(pl->rail_peer);
}

size_t zpp_rsq_residual_count(qcclComm_t comm, size_t rc, const quant_params_t* inter) {
  if (comm->nnodes <= 1 || !comm->rankmap->equal) return 0;
  return (size_t)comm->rankmap->nnodes * quant_coded_elems(inter, rc);
}

/* Step 5 (and the one-level final sum): acc = sum of the k chunks, then
 * the output. */
static qcclResult_t rsq_final(const rsq_layout_t* pl, qcclComm_t comm, const quant_params_t* p,
                              const char* const* chunks, int k, size_t pn, float* acc,
                              qcclRedOp_t op, qcclDataType_t dt, void* out) {
  memset(acc, 0, pn * sizeof *acc);
  for (int i = 0; i < k; i++) QCCL_CHECK(quant_dequantize_acc(pl->isa, p, chunks[i], pn, acc));
  if (op == qcclAvg) {
    float w = (float)comm->nranks;
    for (size_t i = 0; i < pn; i++) acc[i] = acc[i] / w;
  }
  if (dt == qcclFloat32)
    copy_data(out, acc, pn * sizeof *acc);
  else
    convert_from_f32(out, acc, pn, dt);
  return qcclSuccess;
}

/* Step 1: the g x nsub chunks of piece [po, po + pn) into s1. */
static qcclResult_t rsq_quantize(const rsq_layout_t* pl, qcclComm_t comm, const char* send,
                                 size_t rc, size_t po, size_t pn, qcclDataType_t dt, char* s1,
                                 size_t c1) {
  size_t es = dtype_size(dt);
  quant_params_t p = pl->p1;
  p.rank = (uint32_t)comm->rank;
  for (int i = 0; i < pl->g * pl->nsub; i++) {
    size_t d = (size_t)pl->dest[i];
    p.index0 = d * rc + po;
    QCCL_CHECK(quant_quantize(pl->isa, &p, send + (d * rc + po) * es, dt, pn, s1 + (size_t)i * c1));
  }
  return qcclSuccess;
}

/* ---- two-level: the pipeline of pieces (hier_pipe.c). pre(k) = steps 1-2
 * (the node's all-to-all its child), its done hook step 3; rail(k) = step
 * 4, a leaf on the rail; post(k) = step 5. Hop-2 buffers alternate (piece
 * k uses set k % 2, which the pipeline's order frees in time: pre(k+2)
 * runs after post(k)). */

typedef struct rsq_pipe rsq_pipe_t;

/* Step 4 of piece k: one batch of the n-1 exchanges with the other nodes. */
typedef struct {
  p2p_leaf_t l;
  coll_args_t* ops;
  qcclComm_t* comms;
  p2p_state_t* st;
  p2p_batch_t b;
} rsq_rail_t;

struct rsq_pipe {
  hier_pipe_t hp;
  zpp_plan_t* up; /* the call (its residual) */
  const rsq_layout_t* pl;
  size_t coded_rc, c1max, c2max;
  plan_t* a2a; /* step 2: the node's all-to-all, restarted per piece */
  rsq_rail_t* rail;
  const void** srcs;
  /* the call's */
  char *s1, *r1, *s2[2], *r2[2];
  float* acc;
};

static void rsq_piece(const rsq_pipe_t* h, int k, size_t* po, size_t* pn) {
  size_t rc = h->hp.p.a.count, pe = h->pl->pe;
  *po = (size_t)k * pe;
  *pn = rc - *po < pe ? rc - *po : pe;
}

static qcclResult_t rsq_pipe_start(hier_pipe_t* hp) {
  rsq_pipe_t* h = (rsq_pipe_t*)hp;
  const rsq_layout_t* pl = h->pl;
  size_t g = (size_t)pl->g, ns = (size_t)pl->nsub, n = (size_t)pl->n, rc = hp->p.a.count;
  size_t pmax = rc < pl->pe ? rc : pl->pe;
  size_t b1 = g * ns * h->c1max, b2 = n * h->c2max;
  char* mem;
  QCCL_CHECK(zpp_scratch(hp->p.comm, 2, 2 * b1 + 4 * b2 + pmax * sizeof(float) + 64, (void**)&mem));
  h->s1 = mem;
  h->r1 = h->s1 + b1;
  h->s2[0] = h->r1 + b1;
  h->s2[1] = h->s2[0] + b2;
  h->r2[0] = h->s2[1] + b2;
  h->r2[1] = h->r2[0] + b2;
  h->acc = (float*)(((uintptr_t)(h->r2[1] + b2) + 63) & ~(uintptr_t)63);
  return qcclSuccess;
}

static qcclResult_t rsq_pre(hier_pipe_t* hp, int k, plan_t** child) {
  rsq_pipe_t* h = (rsq_pipe_t*)hp;
  const rsq_layout_t* pl = h->pl;
  const coll_args_t* a = &hp->p.a;
  size_t po, pn, ns = (size_t)pl->nsub;
  rsq_piece(h, k, &po, &pn);
  size_t c1 = quant_chunk_bytes(&pl->p1, pn);
  /* 1-2: quantize, all-to-all inside the node */
  QCCL_CHECK(rsq_quantize(pl, hp->p.comm, a->sendbuff, a->count, po, pn, a->datatype, h->s1, c1));
  plan_restart(h->a2a, h->s1, h->r1, ns * c1);
  hier_stage_child(hp, h->a2a);
  *child = h->a2a;
  return qcclSuccess;
}

/* 3: per destination node, sum the L sources and requantize. */
static qcclResult_t rsq_pre_done(hier_pipe_t* hp, int k) {
  rsq_pipe_t* h = (rsq_pipe_t*)hp;
  const rsq_layout_t* pl = h->pl;
  qcclComm_t comm = hp->p.comm;
  size_t po, pn, g = (size_t)pl->g, ns = (size_t)pl->nsub, n = (size_t)pl->n;
  rsq_piece(h, k, &po, &pn);
  size_t c1 = quant_chunk_bytes(&pl->p1, pn), c2 = quant_chunk_bytes(&pl->p2, pn);
  size_t msg1 = ns * c1;
  quant_params_t q2 = pl->p2;
  q2.rank = (uint32_t)(comm->nranks + comm->rank);
  for (size_t b = 0; b < n; b++) {
    for (size_t j = 0; j < g; j++) h->srcs[j] = h->r1 + j * msg1 + b * c1;
    size_t d = (size_t)pl->dest[(size_t)pl->me1 * ns + b];
    q2.index0 = d * hp->p.a.count + po;
    float* res = h->up->residual ? h->up->residual + b * h->coded_rc + po : NULL;
    QCCL_CHECK(quant_reduce_requant(pl->isa, &pl->p1, h->srcs, (int)g, pn, &q2, res,
                                    h->s2[k % 2] + b * c2));
  }
  return qcclSuccess;
}

static qcclResult_t rsq_rail_progress(plan_t* p) {
  rsq_rail_t* t = (rsq_rail_t*)p;
  return p2p_leaf_step(&t->l, &t->b);
}

static const plan_ops_t rsq_rail_ops = {.name = "ReduceScatterQ rail",
                                        .progress = rsq_rail_progress,
                                        .spin = p2p_leaf_spin,
                                        .check = p2p_leaf_check,
                                        .cancel = p2p_leaf_cancel,
                                        .remote = p2p_leaf_remote};

static qcclResult_t rsq_rail(hier_pipe_t* hp, int k, plan_t** child) {
  rsq_pipe_t* h = (rsq_pipe_t*)hp;
  const rsq_layout_t* pl = h->pl;
  rsq_rail_t* t = h->rail;
  size_t po, pn, n = (size_t)pl->n;
  rsq_piece(h, k, &po, &pn);
  size_t c2 = quant_chunk_bytes(&pl->p2, pn);
  int nops = 0;
  for (size_t j = 1; j < n; j++) {
    int to = (int)((pl->me2 + j) % n), from = (int)((pl->me2 + n - j) % n);
    t->ops[nops++] = (coll_args_t){
        COLL_SEND, h->s2[k % 2] + (size_t)to * c2, NULL, c2, qcclUint8, qcclSum, pl->rail_peer[to]};
    t->ops[nops++] = (coll_args_t){
        COLL_RECV,          NULL, h->r2[k % 2] + (size_t)from * c2, c2, qcclUint8, qcclSum,
        pl->rail_peer[from]};
  }
  *child = NULL;
  if (nops == 0) return qcclSuccess;
  p2p_batch_start(&t->b, t->ops, t->comms, t->st, nops);
  plan_start(&t->l.p, NULL, NULL);
  *child = &t->l.p;
  return qcclSuccess;
}

/* 5: the node sums into recvbuff. */
static qcclResult_t rsq_post(hier_pipe_t* hp, int k, plan_t** child) {
  rsq_pipe_t* h = (rsq_pipe_t*)hp;
  const rsq_layout_t* pl = h->pl;
  const coll_args_t* a = &hp->p.a;
  size_t po, pn, n = (size_t)pl->n;
  rsq_piece(h, k, &po, &pn);
  size_t c2 = quant_chunk_bytes(&pl->p2, pn);
  const char* chunks[n];
  for (size_t b = 0; b < n; b++)
    chunks[b] = (b == (size_t)pl->me2 ? h->s2[k % 2] : h->r2[k % 2]) + b * c2;
  *child = NULL;
  return rsq_final(pl, hp->p.comm, &pl->p2, chunks, (int)n, pn, h->acc, a->op, a->datatype,
                   (char*)a->recvbuff + po * dtype_size(a->datatype));
}

static void rsq_pipe_destroy(hier_pipe_t* hp) {
  rsq_pipe_t* h = (rsq_pipe_t*)hp;
  plan_free(h->a2a);
  if (h->rail != NULL) {
    free(h->rail->ops);
    free(h->rail->comms);
    free(h->rail->st);
    plan_free(&h->rail->l.p);
  }
  free(h->srcs);
}

static const hier_pipe_ops_t rsq_pipe_ops = {.name = "ReduceScatterQ two-level",
                                             .pre = rsq_pre,
                                             .pre_done = rsq_pre_done,
                                             .rail = rsq_rail,
                                             .post = rsq_post,
                                             .start = rsq_pipe_start,
                                             .destroy = rsq_pipe_destroy};

static qcclResult_t rsq_pipe_plan(qcclComm_t comm, const coll_args_t* a, zpp_plan_t* up,
                                  const rsq_layout_t* pl, plan_t** out) {
  hier_pipe_t* hp;
  QCCL_CHECK(hier_pipe_plan(sizeof(rsq_pipe_t), &rsq_pipe_ops, comm, a, &hp));
  rsq_pipe_t* h = (rsq_pipe_t*)hp;
  h->up = up;
  h->pl = pl;
  size_t rc = a->count, pmax = rc < pl->pe ? rc : pl->pe, n = (size_t)pl->n;
  hp->nsegs = (int)((rc + pl->pe - 1) / pl->pe);
  h->coded_rc = quant_coded_elems(&pl->p2, rc);
  h->c1max = quant_chunk_bytes(&pl->p1, pmax);
  h->c2max = quant_chunk_bytes(&pl->p2, pmax);
  coll_args_t node = {COLL_ALLTOALL, NULL, NULL, 0, qcclUint8, qcclSum, -1};
  qcclResult_t r = node_alltoall_plan(pl->c1, &node, &h->a2a);
  if (r == qcclSuccess)
    r = plan_alloc(sizeof(rsq_rail_t), &rsq_rail_ops, pl->c2, NULL, (plan_t**)&h->rail);
  h->srcs = malloc(sizeof *h->srcs * (size_t)pl->g);
  if (r == qcclSuccess) {
    h->rail->ops = malloc(sizeof *h->rail->ops * 2 * n);
    h->rail->comms = malloc(sizeof *h->rail->comms * 2 * n);
    h->rail->st = malloc(sizeof *h->rail->st * 2 * n);
    if (!h->srcs || !h->rail->ops || !h->rail->comms || !h->rail->st)
      r = QCCL_ERR(qcclSystemError, "out of memory");
    else
      for (size_t i = 0; i < 2 * n; i++) h->rail->comms[i] = pl->c2;
  }
  if (r != qcclSuccess) {
    plan_free(&hp->p);
    return r;
  }
  *out = &hp->p;
  return qcclSuccess;
}

/* ---- the call ---- */

typedef struct {
  zpp_plan_t z;
  rsq_layout_t pl;
  plan_t* sub; /* two-level: the pipeline; one level: the all-to-all */
  /* one level, the call's */
  size_t po;
  char *s1, *r1;
  float* acc;
  const char** chunks;
} rsq_plan_t;

enum { RSQ_START, RSQ_PIECE, RSQ_A2A, RSQ_PIPE };

static qcclResult_t rsq_progress(plan_t* p) {
  rsq_plan_t* t = (rsq_plan_t*)p;
  const rsq_layout_t* pl = &t->pl;
  const coll_args_t* a = &p->a;
  size_t es = dtype_size(a->datatype), g = (size_t)pl->g, rc = a->count, pe = pl->pe;
  size_t pn = rc - t->po < pe ? rc - t->po : pe;
  for (;;) {
    switch (p->phase) {
      case RSQ_START:
        if (pl->two) {
          plan_start(t->sub, a->sendbuff, a->recvbuff);
          p->phase = RSQ_PIPE;
          break;
        }
        {
          size_t c1max = quant_chunk_bytes(&pl->p1, rc < pe ? rc : pe);
          char* mem;
          QCCL_CHECK(zpp_scratch(p->comm, 2, 2 * g * c1max + pe * sizeof(float), (void**)&mem));
          t->s1 = mem;
          t->r1 = mem + g * c1max;
          t->acc = (float*)(mem + 2 * g * c1max);
        }
        t->po = 0;
        p->phase = RSQ_PIECE;
        PLAN_FALLTHROUGH;
      case RSQ_PIECE: {
        if (t->po >= rc) return qcclSuccess;
        pn = rc - t->po < pe ? rc - t->po : pe;
        size_t c1 = quant_chunk_bytes(&pl->p1, pn);
        QCCL_CHECK(rsq_quantize(pl, p->comm, a->sendbuff, rc, t->po, pn, a->datatype, t->s1, c1));
        plan_restart(t->sub, t->s1, t->r1, c1);
        p->phase = RSQ_A2A;
        PLAN_FALLTHROUGH;
      }
      case RSQ_A2A: {
        PLAN_TEST(p, plan_seq_step(&t->z.s, t->sub));
        size_t c1 = quant_chunk_bytes(&pl->p1, pn);
        for (size_t k = 0; k < g; k++) t->chunks[k] = t->r1 + k * c1;
        QCCL_CHECK(rsq_final(pl, p->comm, &pl->p1, t->chunks, (int)g, pn, t->acc, a->op,
                             a->datatype, (char*)a->recvbuff + t->po * es));
        t->po += pe;
        p->phase = RSQ_PIECE;
        break;
      }
      case RSQ_PIPE:
        PLAN_TEST(p, plan_seq_step(&t->z.s, t->sub));
        return qcclSuccess;
      default:
        return QCCL_ERR(qcclInternalError, "ReduceScatterQ: phase %d", p->phase);
    }
  }
}

static void rsq_destroy(plan_t* p) {
  rsq_plan_t* t = (rsq_plan_t*)p;
  plan_free(t->sub);
  free(t->chunks);
  rsq_layout_free(&t->pl);
}

static const plan_ops_t rsq_ops = {.name = "ReduceScatterQ",
                                   .progress = rsq_progress,
                                   .spin = plan_seq_spin,
                                   .check = plan_seq_check,
                                   .cancel = plan_seq_cancel,
                                   .remote = plan_seq_remote,
                                   .destroy = rsq_destroy,
                                   .same = zpp_plan_same};

qcclResult_t zpp_rsq_plan(qcclComm_t comm, const coll_args_t* a, const void* ctx, plan_t** out) {
  const zpp_op_t* op = ctx;
  QCCL_CHECK(plan_alloc(sizeof(rsq_plan_t), &rsq_ops, comm, a, out));
  rsq_plan_t* t = (rsq_plan_t*)*out;
  zpp_plan_init(&t->z, op);
  qcclResult_t r = rsq_layout(comm, &op->q1, &op->q2, &t->pl);
  if (r == qcclSuccess) {
    QCCL_TRACE(LOG_ZERO, "ReduceScatterQ %zu x %s: %s, pieces of %zu", a->count,
               dtype_name(a->datatype), t->pl.two ? "two-level" : "one level", t->pl.pe);
    if (t->pl.two) {
      r = rsq_pipe_plan(comm, a, &t->z, &t->pl, &t->sub);
    } else {
      coll_args_t x = {COLL_ALLTOALL, NULL, NULL, 0, qcclUint8, qcclSum, -1};
      r = zpp_plain_plan(comm, &x, &t->sub);
      t->chunks = malloc(sizeof *t->chunks * (size_t)t->pl.g);
      if (r == qcclSuccess && t->chunks == NULL) r = QCCL_ERR(qcclSystemError, "out of memory");
    }
  }
  if (r != qcclSuccess) plan_free(*out);
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
