/*
 * hier_allreduce.c - the two-level AllReduce, for communicators whose hosts
 * hold equal numbers of ranks (L each, N hosts; comm->rail exists).
 *
 *   1. node reduce-scatter (shared memory): the buffer is cut into chunks
 *      as in allreduce.c; local rank l reduces part l of every chunk over
 *      its host's L ranks, in rank order, into a contiguous buffer: its
 *      share, 1/L of the buffer;
 *   2. rail all-reduce (UCX): the ring of flat_allreduce.c among the N
 *      ranks of local index l, one per host, over the share. Each host's
 *      link carries 2(N-1)/N of the buffer in each direction (L rails of
 *      1/L each): the least an AllReduce across N hosts can send;
 *   3. node all-gather (shared memory): chunk by chunk, each rank stages
 *      its reduced parts in its result area and copies the others' out.
 * Pipeline (hier_pipe.c): buffers of more than one segment
 * (HIER_SEGMENT_BYTES) go through the stages segment by segment, and a rail
 * thread runs stage 2 of segment k while the caller's thread runs stage 1
 * of segment k+1 and stage 3 of segment k-1, so the network is busy while
 * memory is copied.
 * Every part's value is computed once (by one rail ring, identically on
 * its N members) and copied, so all ranks get the same bits. Avg sums
 * through the stages and divides by W once, on the share. Narrow floats
 * (f16, bf16, fp8) are staged inside the host in their own type, kept in
 * f32 from the node reduction on (the share, the rail ring: as the flat
 * ring, they travel between hosts as f32), and rounded once, when the
 * share is staged for the node all-gather.
 * Cost: per rank (L-1)/L of the buffer written into the segment twice
 * (stages 1 and 3), 2(N-1)/N of the share over the network.
 */
#include <stdlib.h>

#include "collectives/allreduce_chunk.h"
#include "collectives/coll.h"
#include "collectives/hier_pipe.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/memcopy.h"

/* Stage 1 on elements [begin, end) of the buffer (chunk-aligned): this
 * rank's parts of every chunk, reduced over the node, into share. */
static qcclResult_t hier_node_reduce(qcclComm_t node, const coll_args_t* a, qcclRedOp_t op,
                                     size_t begin, size_t end, char* share) {
  int widen = reduce_work_type(a->datatype) != a->datatype;
  size_t wes = widen ? sizeof(float) : dtype_size(a->datatype);
  shm_t* s = node->shm;
  int w = node->nranks, r = node->rank;
  size_t es = dtype_size(a->datatype), per_chunk = s->chunk_bytes / es, pos = 0;
  const char* in = a->sendbuff;
  const void* srcs[w];
  for (size_t off = begin; off < end; off += per_chunk) {
    size_t m = end - off < per_chunk ? end - off : per_chunk;
    size_t lo, hi;
    coll_part(m, w, r, &lo, &hi);
    uint64_t g;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    const char* src = in + off * es;
    ar_chunk_stage(s, g, src, m, lo, hi, es, shm_handoff_nt(s, a->count * es));
    coll_stats_shm(node, (m - (hi - lo)) * es);
    shm_post(s, 3 * g + 1);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 1));
    for (int j = 0; j < w; j++) srcs[j] = (j == r ? src : shm_slot(s, j, g)) + lo * es;
    if (widen)
      reduce_kernel_widen((float*)(share + pos * wes), srcs, w, hi - lo, a->datatype, op);
    else
      reduce_kernel(share + pos * es, srcs, w, hi - lo, a->datatype, op, w);
    pos += hi - lo;
    /* nobody reads a result of this chunk: done with it */
    shm_post(s, 3 * g + 3);
  }
  return qcclSuccess;
}

/* Stage 3 on elements [begin, end): every rank's reduced parts from the
 * shares into recvbuff. */
static qcclResult_t hier_node_gather(qcclComm_t node, const coll_args_t* a, size_t begin,
                                     size_t end, const char* share) {
  shm_t* s = node->shm;
  int w = node->nranks, r = node->rank;
  size_t es = dtype_size(a->datatype), per_chunk = s->chunk_bytes / es, pos = 0;
  char* out = a->recvbuff;
  int stream = a->count * es >= COPY_STREAM_MIN_TOTAL;
  int widen = reduce_work_type(a->datatype) != a->datatype;
  for (size_t off = begin; off < end; off += per_chunk) {
    size_t m = end - off < per_chunk ? end - off : per_chunk;
    size_t lo, hi;
    coll_part(m, w, r, &lo, &hi);
    uint64_t g;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    char* res = shm_result(s, r, g);
    if (widen) {
      /* the one rounding of a narrow type */
      convert_from_f32(res, (const float*)share + pos, hi - lo, a->datatype);
      copy_out(out + (off + lo) * es, res, (hi - lo) * es, stream);
    } else {
      memcpy(res, share + pos * es, (hi - lo) * es);
      copy_out(out + (off + lo) * es, share + pos * es, (hi - lo) * es, stream);
    }
    coll_stats_shm(node, (hi - lo) * es);
    pos += hi - lo;
    shm_post(s, 3 * g + 2);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 2));
    ar_chunk_copy_results(s, g, out + off * es, m, es, stream, NULL, 0);
    shm_post(s, 3 * g + 3);
  }
  return qcclSuccess;
}

/* Segment k of a call: elements [begin, end) of the buffer, and where its
 * share starts and how long it is. */
typedef struct {
  size_t begin, end;
  size_t share_off, share_n;
} hier_seg_t;

typedef struct {
  qcclComm_t comm;
  const coll_args_t* a;
  qcclRedOp_t op;
  qcclDataType_t wt; /* the type of the share: f32 for narrow floats */
  size_t wes;        /* its element size */
  char* share;
  hier_seg_t* segs;
} hier_ar_t;

static qcclResult_t hier_ar_pre(void* arg, int k) {
  hier_ar_t* h = arg;
  hier_seg_t* sg = &h->segs[k];
  return hier_node_reduce(h->comm->node, h->a, h->op, sg->begin, sg->end,
                          h->share + sg->share_off * h->wes);
}

/* Stage 2 on one segment's share, Avg's division included. */
static qcclResult_t hier_ar_rail(void* arg, int k) {
  hier_ar_t* h = arg;
  hier_seg_t* sg = &h->segs[k];
  if (sg->share_n == 0) return qcclSuccess;
  char* x = h->share + sg->share_off * h->wes;
  QCCL_CHECK(flat_ring_allreduce(h->comm->rail, x, x, sg->share_n, h->wt, h->op));
  if (h->a->op == qcclAvg) {
    const void* own[1] = {x};
    reduce_kernel(x, own, 1, sg->share_n, h->wt, qcclAvg, h->comm->nranks);
  }
  return qcclSuccess;
}

static qcclResult_t hier_ar_post(void* arg, int k) {
  hier_ar_t* h = arg;
  hier_seg_t* sg = &h->segs[k];
  return hier_node_gather(h->comm->node, h->a, sg->begin, sg->end,
                          h->share + sg->share_off * h->wes);
}

qcclResult_t hier_allreduce(qcclComm_t comm, const coll_args_t* a) {
  size_t es = dtype_size(a->datatype);
  int L = comm->node->nranks, r = comm->node->rank;
  size_t chunk = comm->node->shm->chunk_bytes, per_chunk = chunk / es;
  size_t seg = per_chunk * (HIER_SEGMENT_BYTES > chunk ? HIER_SEGMENT_BYTES / chunk : 1);
  int nsegs = (int)((a->count + seg - 1) / seg);
  qcclDataType_t wt = reduce_work_type(a->datatype);
  hier_ar_t h = {comm, a, a->op == qcclAvg ? qcclSum : a->op, wt, dtype_size(wt), NULL, NULL};
  /* the share: at most ceil(m / L) elements of every chunk */
  size_t chunks = (a->count + per_chunk - 1) / per_chunk;
  QCCL_CHECK(comm_scratch(comm, 1, (a->count / (size_t)L + chunks + 1) * h.wes, (void**)&h.share));
  h.segs = calloc((size_t)nsegs, sizeof *h.segs);
  if (!h.segs) return QCCL_ERR(qcclSystemError, "out of memory");
  /* each segment's share: part r of each of its chunks, as stage 1 cuts */
  for (int k = 0; k < nsegs; k++) {
    hier_seg_t* sg = &h.segs[k];
    sg->begin = (size_t)k * seg;
    sg->end = sg->begin + seg < a->count ? sg->begin + seg : a->count;
    sg->share_off = k ? h.segs[k - 1].share_off + h.segs[k - 1].share_n : 0;
    for (size_t off = sg->begin; off < sg->end; off += per_chunk) {
      size_t m = sg->end - off < per_chunk ? sg->end - off : per_chunk, lo, hi;
      coll_part(m, L, r, &lo, &hi);
      sg->share_n += hi - lo;
    }
  }
  hier_pipe_ops_t ops = {&h, nsegs, hier_ar_pre, hier_ar_rail, hier_ar_post};
  qcclResult_t res = hier_pipe_run(comm, &ops);
  free(h.segs);
  return res;
}
