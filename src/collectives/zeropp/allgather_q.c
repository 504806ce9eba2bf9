/*
 * allgather_q.c - qwZ, the quantized all-gather (qcclAllGatherQ).
 *
 * Each rank quantizes its shard of n elements into wire format v1 (scales
 * inline), the quantized chunks are all-gathered as bytes, and every rank
 * dequantizes the W chunks into the output type, its own included, so the
 * result is the same on every rank. Across hosts of equal size the gather
 * is two-level and pipelined (below): the rail ring of one segment runs on
 * the rail thread while the node gather and the dequantization of the
 * previous one run on the caller's. Otherwise (one host, unequal hosts, L
 * = 1) one chunk goes through the communicator's plain all-gather (the
 * shared segment; the ring over UCX). Cost: the plain all-gather's bytes
 * with C = quant_chunk_bytes(n) instead of n x element size (int8 from
 * bf16: 1/2 + 2/B of the bytes, int4: 1/4 + 2/B), one quantization of n
 * and W dequantizations of n elements per rank.
 * Stochastic rounding is keyed by (seed, rank, global element index).
 * With an hpZ shard, this rank's slice of the result is then copied (or
 * quantized) into it (secondary.c).
 */
#include <string.h>

#include "collectives/coll.h"
#include "collectives/hier_pipe.h"
#include "core/dtype.h"
#include "core/log.h"
#include "collectives/zeropp/zpp.h"

/* ---- two-level, pipelined (hosts of L > 1 ranks each, comm->rail) ----
 * The shard is cut into segments of whole blocks (8 x QCCL_ZERO_PIECE
 * elements), each its own chunk (the
 * codes are those of the one-chunk form: blocks are independent). For
 * segment k, on hier_pipe's schedule: pre(k) quantizes this rank's segment
 * into its slot; rail(k), on the rail thread, rings the chunk among the
 * ranks of equal local index (each host's link carries what the others
 * lack, once); post(k) all-gathers the N chunks each rank holds inside the
 * node (shared memory) and dequantizes the W chunks of the segment, while
 * the rail thread moves segment k+1. Slot of rank (host n, local l) in a
 * segment's region: l N + n, so each rank's N chunks are contiguous. */

typedef struct {
  qcclComm_t comm;
  quant_isa_t isa;
  quant_params_t p;
  const char* send;
  char* recv;
  qcclDataType_t dt;
  size_t count, seg;
  int N, L, me_node, me_local;
  char* buf;     /* the regions, one per segment */
  size_t region; /* bytes of a region (W chunks of a full segment) */
  const topo_rankmap_t* map;
} agq_pipe_t;

static void agq_extent(const agq_pipe_t* h, int k, size_t* off, size_t* m, size_t* cb) {
  *off = (size_t)k * h->seg;
  *m = h->count - *off < h->seg ? h->count - *off : h->seg;
  *cb = quant_chunk_bytes(&h->p, *m);
}

static char* agq_slot(const agq_pipe_t* h, int k, int n, int l, size_t cb) {
  return h->buf + (size_t)k * h->region + ((size_t)l * (size_t)h->N + (size_t)n) * cb;
}

static qcclResult_t agq_pre(void* arg, int k) {
  agq_pipe_t* h = arg;
  size_t off, m, cb;
  agq_extent(h, k, &off, &m, &cb);
  quant_params_t p = h->p;
  p.index0 = (uint64_t)h->comm->rank * h->count + off;
  return quant_quantize(h->isa, &p, h->send + off * dtype_size(h->dt), h->dt, m,
                        agq_slot(h, k, h->me_node, h->me_local, cb));
}

static qcclResult_t agq_rail(void* arg, int k) {
  agq_pipe_t* h = arg;
  qcclComm_t rail = h->comm->rail;
  int N = h->N, me = h->me_node, l = h->me_local; /* rail rank = host */
  size_t off, m, cb;
  agq_extent(h, k, &off, &m, &cb);
  for (int s = 0; s < N - 1; s++) {
    int si = (me - s + N) % N, ri = (me - s - 1 + N) % N;
    QCCL_CHECK(p2p_sendrecv(rail, (me + 1) % N, agq_slot(h, k, si, l, cb), cb, (me + N - 1) % N,
                            agq_slot(h, k, ri, l, cb), cb));
  }
  return qcclSuccess;
}

static qcclResult_t agq_post(void* arg, int k) {
  agq_pipe_t* h = arg;
  size_t off, m, cb, es = dtype_size(h->dt);
  agq_extent(h, k, &off, &m, &cb);
  size_t run = (size_t)h->N * cb;
  char* mine = agq_slot(h, k, 0, h->me_local, cb);
  coll_args_t a = {COLL_ALLGATHER, mine, agq_slot(h, k, 0, 0, cb), run, qcclUint8, qcclSum, -1};
  QCCL_CHECK(coll_run(h->comm->node, &a));
  for (int l = 0; l < h->L; l++)
    for (int n = 0; n < h->N; n++) {
      size_t r = (size_t)topo_rankmap_rank_at(h->map, n, l); /* nodes are equal here */
      QCCL_CHECK(quant_dequantize(h->isa, &h->p, agq_slot(h, k, n, l, cb), m, h->dt,
                                  h->recv + (r * h->count + off) * es));
    }
  return qcclSuccess;
}

static qcclResult_t agq_two_level(qcclComm_t comm, quant_isa_t isa, const quant_params_t* p,
                                  const void* send, void* recv, size_t count, qcclDataType_t dt) {
  agq_pipe_t h;
  memset(&h, 0, sizeof h);
  h.comm = comm;
  h.isa = isa;
  h.p = *p;
  h.send = send;
  h.recv = recv;
  h.dt = dt;
  h.count = count;
  /* 8 pieces of qgZ (1 M elements by default), whole blocks */
  size_t piece;
  QCCL_CHECK(zpp_env_piece(&piece));
  h.seg = (8 * piece + (size_t)p->block - 1) / (size_t)p->block * (size_t)p->block;
  h.map = comm->rankmap;
  h.N = h.map->nnodes;
  h.L = h.map->max_size;
  h.me_node = h.map->node_of[comm->rank];
  h.me_local = h.map->local_rank[comm->rank];
  int nsegs = (int)((count + h.seg - 1) / h.seg);
  h.region = (size_t)comm->nranks * quant_chunk_bytes(p, count < h.seg ? count : h.seg);
  QCCL_CHECK(zpp_scratch(comm, 0, h.region * (size_t)nsegs, (void**)&h.buf));
  hier_pipe_ops_t ops = {&h, nsegs, agq_pre, agq_rail, agq_post};
  return hier_pipe_run(comm, &ops);
}

qcclResult_t zpp_allgather_q(qcclComm_t comm, const void* send, void* recv, size_t count,
                             qcclDataType_t dt, const quant_params_t* q, struct qcclSecondary* sec,
                             unsigned long long gen) {
  size_t w = (size_t)comm->nranks, es = dtype_size(dt), r = (size_t)comm->rank;
  if (q == NULL) {
    coll_args_t a = {COLL_ALLGATHER, send, recv, count, dt, qcclSum, -1};
    QCCL_CHECK(coll_run(comm, &a));
  } else {
    quant_isa_t isa;
    QCCL_CHECK(zpp_isa(&isa));
    quant_params_t p = *q;
    p.rank = (uint32_t)r;
    p.index0 = (uint64_t)r * count;
    if (comm->nnodes > 1 && comm->rail != NULL && comm->rankmap->equal) {
      QCCL_CHECK(agq_two_level(comm, isa, &p, send, recv, count, dt));
      if (sec != NULL) QCCL_CHECK(zpp_secondary_fill(sec, recv, gen));
      return qcclSuccess;
    }
    size_t cb = quant_chunk_bytes(&p, count);
    char* buf;
    QCCL_CHECK(zpp_scratch(comm, 0, cb * w, (void**)&buf));
    QCCL_CHECK(quant_quantize(isa, &p, send, dt, count, buf + r * cb));
    coll_args_t a = {COLL_ALLGATHER, buf + r * cb, buf, cb, qcclUint8, qcclSum, -1};
    QCCL_CHECK(coll_run(comm, &a));
    for (size_t j = 0; j < w; j++)
      QCCL_CHECK(quant_dequantize(isa, &p, buf + j * cb, count, dt, (char*)recv + j * count * es));
  }
  if (sec != NULL) QCCL_CHECK(zpp_secondary_fill(sec, recv, gen));
  return qcclSuccess;
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
