/*
 * allgather_q.c - qwZ, the quantized all-gather (qcclAllGatherQ).
 *
 * Each rank quantizes its shard of n elements into wire format v1 (scales
 * inline), the quantized chunks are all-gathered as bytes, and every rank
 * dequantizes the W chunks into the output type, its own included, so the
 * result is the same on every rank. Across hosts of equal size the gather
 * is two-level and pipelined (below): the rail ring of one segment is
 * stepped beside the node gather and the dequantization of the previous
 * one. Otherwise (one host, unequal hosts, L = 1) one chunk goes through
 * the communicator's plain all-gather (the shared segment; the ring over
 * UCX). Cost: the plain all-gather's bytes
 * with C = quant_chunk_bytes(n) instead of n x element size (int8 from
 * bf16: 1/2 + 2/B of the bytes, int4: 1/4 + 2/B), one quantization of n
 * and W dequantizations of n elements per rank.
 * Stochastic rounding is keyed by (seed, rank, global element index).
 * With an hpZ shard, this rank's slice of the result is then copied (or
 * quantized) into it (secondary.c).
 *
 * Plans: a sequence (quantize, the plain all-gather's plan, dequantize,
 * fill the shard) whose gather is, across hosts of equal size, the
 * pipeline below (its stages: local quantization, a ring leaf on the
 * rail, the node's all-gather plan, local dequantization).
 */
#include <string.h>

#include "collectives/flat.h"
#include "collectives/hier_pipe.h"
#include "collectives/node.h"
#include "collectives/p2p.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/memcopy.h"
#include "collectives/zeropp/zpp.h"

/* Whether the dequantization writes the output with non-temporal stores:
 * from the whole output's size, as the plain all-gather decides
 * (memcopy.h), not from each chunk's (quant_dequantize's rule: a 16 MiB
 * output of 4 ranks is 4 chunks of 4 MiB, under it, and the ordinary
 * stores' read for ownership of every line cost 1.5x the plain gather's
 * time; docs/PERF.md, "The quantized gather's stores"). */
static int agq_stream(qcclComm_t comm, const coll_args_t* a) {
  return a->count * (size_t)comm->nranks * dtype_size(a->datatype) >= COPY_STREAM_MIN_TOTAL;
}

/* ---- two-level, pipelined (hosts of L > 1 ranks each, comm->rail) ----
 * The shard is cut into segments of whole blocks (8 x QCCL_ZERO_PIECE
 * elements), each its own chunk (the codes are those of the one-chunk
 * form: blocks are independent). For segment k: pre(k) quantizes this
 * rank's segment into its slot; rail(k) rings the chunk among the ranks of
 * equal local index (each host's link carries what the others lack,
 * once); post(k) all-gathers the N chunks each rank holds inside the node
 * (shared memory), and its done hook dequantizes the W chunks of the
 * segment, while the ring of segment k+1 moves. Slot of rank (host n,
 * local l) in a segment's region: l N + n, so each rank's N chunks are
 * contiguous. */

typedef struct agq_pipe agq_pipe_t;

/* The rail ring of segment k (a leaf on the rail). */
typedef struct {
  p2p_leaf_t l;
  agq_pipe_t* h;
  int k, s;
  p2p_xchg_t x;
} agq_ring_t;

struct agq_pipe {
  hier_pipe_t hp;
  quant_isa_t isa;
  quant_params_t p;
  size_t seg;
  int N, L, me_node, me_local;
  size_t region; /* bytes of a region (W chunks of a full segment) */
  agq_ring_t* ring;
  plan_t* node; /* the node's all-gather, restarted per segment */
  char* buf;    /* the call's: the regions, one per segment */
};

static void agq_extent(const agq_pipe_t* h, int k, size_t* off, size_t* m, size_t* cb) {
  size_t count = h->hp.p.a.count;
  *off = (size_t)k * h->seg;
  *m = count - *off < h->seg ? count - *off : h->seg;
  *cb = quant_chunk_bytes(&h->p, *m);
}

static char* agq_slot(const agq_pipe_t* h, int k, int n, int l, size_t cb) {
  return h->buf + (size_t)k * h->region + ((size_t)l * (size_t)h->N + (size_t)n) * cb;
}

static qcclResult_t agq_start(hier_pipe_t* hp) {
  agq_pipe_t* h = (agq_pipe_t*)hp;
  return zpp_scratch(hp->p.comm, 0, h->region * (size_t)hp->nsegs, (void**)&h->buf);
}

static qcclResult_t agq_pre(hier_pipe_t* hp, int k, plan_t** child) {
  agq_pipe_t* h = (agq_pipe_t*)hp;
  const coll_args_t* a = &hp->p.a;
  size_t off, m, cb;
  agq_extent(h, k, &off, &m, &cb);
  quant_params_t p = h->p;
  p.index0 = (uint64_t)hp->p.comm->rank * a->count + off;
  *child = NULL;
  return quant_quantize(h->isa, &p, (const char*)a->sendbuff + off * dtype_size(a->datatype),
                        a->datatype, m, agq_slot(h, k, h->me_node, h->me_local, cb));
}

enum { AGQ_RING_START, AGQ_RING_POST, AGQ_RING_WAIT };

static qcclResult_t agq_ring_progress(plan_t* p) {
  agq_ring_t* t = (agq_ring_t*)p;
  agq_pipe_t* h = t->h;
  int N = h->N, me = h->me_node, l = h->me_local; /* rail rank = host */
  size_t off, m, cb;
  agq_extent(h, t->k, &off, &m, &cb);
  for (;;) {
    switch (p->phase) {
      case AGQ_RING_START:
        t->s = 0;
        p->phase = AGQ_RING_POST;
        PLAN_FALLTHROUGH;
      case AGQ_RING_POST: {
        if (t->s == N - 1) return qcclSuccess;
        int si = (me - t->s + N) % N, ri = (me - t->s - 1 + N) % N;
        p2p_xchg_start(&t->x, p->comm, (me + 1) % N, agq_slot(h, t->k, si, l, cb), cb,
                       (me + N - 1) % N, agq_slot(h, t->k, ri, l, cb), cb);
        p->phase = AGQ_RING_WAIT;
        PLAN_FALLTHROUGH;
      }
      case AGQ_RING_WAIT:
        PLAN_TEST(p, p2p_leaf_step(&t->l, &t->x.b));
        t->s++;
        p->phase = AGQ_RING_POST;
        break;
      default:
        return QCCL_ERR(qcclInternalError, "AllGatherQ ring: phase %d", p->phase);
    }
  }
}

static const plan_ops_t agq_ring_ops = {.name = "AllGatherQ ring",
                                        .progress = agq_ring_progress,
                                        .spin = p2p_leaf_spin,
                                        .check = p2p_leaf_check,
                                        .cancel = p2p_leaf_cancel,
                                        .remote = p2p_leaf_remote};

static qcclResult_t agq_rail(hier_pipe_t* hp, int k, plan_t** child) {
  agq_pipe_t* h = (agq_pipe_t*)hp;
  h->ring->k = k;
  plan_start(&h->ring->l.p, NULL, NULL);
  *child = &h->ring->l.p;
  return qcclSuccess;
}

static qcclResult_t agq_post(hier_pipe_t* hp, int k, plan_t** child) {
  agq_pipe_t* h = (agq_pipe_t*)hp;
  size_t off, m, cb;
  agq_extent(h, k, &off, &m, &cb);
  plan_restart(h->node, agq_slot(h, k, 0, h->me_local, cb), agq_slot(h, k, 0, 0, cb),
               (size_t)h->N * cb);
  hier_stage_child(hp, h->node);
  *child = h->node;
  return qcclSuccess;
}

static qcclResult_t agq_post_done(hier_pipe_t* hp, int k) {
  agq_pipe_t* h = (agq_pipe_t*)hp;
  const coll_args_t* a = &hp->p.a;
  size_t off, m, cb, es = dtype_size(a->datatype);
  agq_extent(h, k, &off, &m, &cb);
  const topo_rankmap_t* map = hp->p.comm->rankmap;
  int nt = agq_stream(hp->p.comm, a);
  for (int l = 0; l < h->L; l++)
    for (int n = 0; n < h->N; n++) {
      size_t r = (size_t)topo_rankmap_rank_at(map, n, l); /* nodes are equal here */
      QCCL_CHECK(quant_dequantize_nt(h->isa, &h->p, agq_slot(h, k, n, l, cb), m, a->datatype,
                                     (char*)a->recvbuff + (r * a->count + off) * es, nt));
    }
  return qcclSuccess;
}

static void agq_pipe_destroy(hier_pipe_t* hp) {
  agq_pipe_t* h = (agq_pipe_t*)hp;
  plan_free(&h->ring->l.p);
  plan_free(h->node);
}

static const hier_pipe_ops_t agq_pipe_ops = {.name = "AllGatherQ two-level",
                                             .pre = agq_pre,
                                             .rail = agq_rail,
                                             .post = agq_post,
                                             .post_done = agq_post_done,
                                             .start = agq_start,
                                             .destroy = agq_pipe_destroy};

/* The pipeline of call a under p (this rank's spec) on comm. */
static qcclResult_t agq_pipe_plan(qcclComm_t comm, const coll_args_t* a, quant_isa_t isa,
                                  const quant_params_t* p, plan_t** out) {
  hier_pipe_t* hp;
  QCCL_CHECK(hier_pipe_plan(sizeof(agq_pipe_t), &agq_pipe_ops, comm, a, &hp));
  agq_pipe_t* h = (agq_pipe_t*)hp;
  h->isa = isa;
  h->p = *p;
  /* 8 pieces of qgZ (1 M elements by default), whole blocks */
  size_t piece;
  qcclResult_t r = zpp_env_piece(&piece);
  const topo_rankmap_t* map = comm->rankmap;
  h->seg = (8 * piece + (size_t)p->block - 1) / (size_t)p->block * (size_t)p->block;
  h->N = map->nnodes;
  h->L = map->max_size;
  h->me_node = map->node_of[comm->rank];
  h->me_local = map->local_rank[comm->rank];
  hp->nsegs = (int)((a->count + h->seg - 1) / h->seg);
  h->region = (size_t)comm->nranks * quant_chunk_bytes(p, a->count < h->seg ? a->count : h->seg);
  coll_args_t node = {COLL_ALLGATHER, NULL, NULL, 0, qcclUint8, qcclSum, -1};
  if (r == qcclSuccess)
    r = plan_alloc(sizeof(agq_ring_t), &agq_ring_ops, comm->rail, NULL, (plan_t**)&h->ring);
  if (r == qcclSuccess) r = node_allgather_plan(comm->node, &node, &h->node);
  if (r != qcclSuccess) {
    plan_free(&hp->p);
    return r;
  }
  h->ring->h = h;
  *out = &hp->p;
  return qcclSuccess;
}

/* ---- the call ---- */

typedef struct {
  zpp_plan_t z;
  quant_isa_t isa;
  quant_params_t p; /* the spec, with this rank's stochastic-rounding key */
  size_t cb;        /* one level: bytes of a quantized chunk */
  plan_t* gather;   /* the plain all-gather of the data (plain), of the chunks
                     * (one level), or the two-level pipeline */
  int pipe;
  char* buf; /* the call's: one level, the W chunks */
} agq_plan_t;

enum { AGQ_START, AGQ_GATHER };

static qcclResult_t agq_progress(plan_t* pp) {
  agq_plan_t* t = (agq_plan_t*)pp;
  qcclComm_t comm = pp->comm;
  const coll_args_t* a = &pp->a;
  size_t w = (size_t)comm->nranks, r = (size_t)comm->rank, es = dtype_size(a->datatype);
  switch (pp->phase) {
    case AGQ_START:
      if (t->z.key.plain || t->pipe) {
        plan_start(t->gather, a->sendbuff, a->recvbuff);
      } else {
        QCCL_CHECK(zpp_scratch(comm, 0, t->cb * w, (void**)&t->buf));
        QCCL_CHECK(
            quant_quantize(t->isa, &t->p, a->sendbuff, a->datatype, a->count, t->buf + r * t->cb));
        plan_start(t->gather, t->buf + r * t->cb, t->buf);
      }
      pp->phase = AGQ_GATHER;
      PLAN_FALLTHROUGH;
    case AGQ_GATHER:
      PLAN_TEST(pp, plan_seq_step(&t->z.s, t->gather));
      if (!t->z.key.plain && !t->pipe) {
        int nt = agq_stream(comm, a);
        for (size_t j = 0; j < w; j++)
          QCCL_CHECK(quant_dequantize_nt(t->isa, &t->p, t->buf + j * t->cb, a->count, a->datatype,
                                         (char*)a->recvbuff + j * a->count * es, nt));
      }
      if (t->z.sec != NULL) QCCL_CHECK(zpp_secondary_fill(t->z.sec, a->recvbuff, t->z.gen));
      return qcclSuccess;
  }
  return QCCL_ERR(qcclInternalError, "AllGatherQ: phase %d", pp->phase);
}

static void agq_destroy(plan_t* p) {
  plan_free(((agq_plan_t*)p)->gather);
}

static const plan_ops_t agq_ops = {.name = "AllGatherQ",
                                   .progress = agq_progress,
                                   .spin = plan_seq_spin,
                                   .check = plan_seq_check,
                                   .cancel = plan_seq_cancel,
                                   .remote = plan_seq_remote,
                                   .destroy = agq_destroy,
                                   .same = zpp_plan_same};

qcclResult_t zpp_agq_plan(qcclComm_t comm, const coll_args_t* a, const void* ctx, plan_t** out) {
  const zpp_op_t* op = ctx;
  QCCL_CHECK(plan_alloc(sizeof(agq_plan_t), &agq_ops, comm, a, out));
  agq_plan_t* t = (agq_plan_t*)*out;
  zpp_plan_init(&t->z, op);
  size_t r = (size_t)comm->rank;
  qcclResult_t res = qcclSuccess;
  coll_args_t g = {COLL_ALLGATHER, NULL, NULL, a->count, a->datatype, qcclSum, -1};
  if (!op->plain) {
    res = zpp_isa(&t->isa);
    t->p = op->q1;
    t->p.rank = (uint32_t)r;
    t->p.index0 = (uint64_t)r * a->count;
    t->cb = quant_chunk_bytes(&t->p, a->count);
    t->pipe = comm->nnodes > 1 && comm->rail != NULL && comm->rankmap->equal;
    g = (coll_args_t){COLL_ALLGATHER, NULL, NULL, t->cb, qcclUint8, qcclSum, -1};
  }
  if (res == qcclSuccess) {
    if (t->pipe)
      res = agq_pipe_plan(comm, a, t->isa, &t->p, &t->gather);
    else
      res = zpp_plain_plan(comm, &g, &t->gather);
  }
  if (res != qcclSuccess) plan_free(*out);
  return res;
}

/* Checks the arguments shared by the two gathers and fills op. */
qcclResult_t zpp_agq_check(const char* fn, const void* sendbuff, void* recvbuff, size_t sendcount,
                           qcclDataType_t datatype, const qcclQuantSpec_t* spec, int spec_optional,
                           qcclComm_t comm, qcclStream_t stream, zpp_op_t* op) {
  stream_t* st;
  QCCL_CHECK(check_comm_usable(fn, comm, stream, &st));
  QCCL_CHECK(zpp_check_type(fn, datatype));
  QCCL_CHECK(check_count(fn, "sendcount", sendcount, (size_t)comm->nranks, dtype_size(datatype),
                         QUANT_MAX_COUNT));
  memset(op, 0, sizeof *op);
  op->stream = st;
  if (spec == NULL && spec_optional)
    op->plain = 1;
  else
    QCCL_CHECK(zpp_check_spec(fn, "spec", spec, &op->q1));
  QCCL_CHECK(check_buffers(fn, "sendcount", sendcount, sendbuff, recvbuff));
  op->kind = ZPP_AGQ;
  op->slot = qcclStatAllGatherQ;
  op->comm = comm;
  op->send = sendbuff;
  op->recv = recvbuff;
  op->count = sendcount;
  op->dt = datatype;
  op->op = qcclSum;
  return qcclSuccess;
}

qcclResult_t qcclAllGatherQ(const void* sendbuff, void* recvbuff, size_t sendcount,
                            qcclDataType_t datatype, const qcclQuantSpec_t* spec, qcclComm_t comm,
                            qcclStream_t stream) {
  err_clear();
  zpp_op_t op;
  qcclResult_t r = zpp_agq_check("qcclAllGatherQ", sendbuff, recvbuff, sendcount, datatype, spec, 0,
                                 comm, stream, &op);
  if (r != qcclSuccess) return zpp_fail(comm, r);
  QCCL_TRACE(LOG_ZERO, "qcclAllGatherQ count %zu %s int%d b%d", sendcount, dtype_name(datatype),
             op.q1.bits, op.q1.block);
  return zpp_submit(comm, &op);
}
