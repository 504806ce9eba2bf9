/*
 * hier_allgather.c - the two-level AllGather, for communicators whose hosts
 * hold equal numbers of ranks (L each, N hosts; comm->rail exists).
 *
 * Every block goes straight to its place in recvbuff (ranks of a host need
 * not be contiguous), in two stages per segment of the block:
 *   1. rail all-gather (UCX): a ring among the N ranks of local index l,
 *      one per host: each receives the blocks of its rail, i.e. of the
 *      ranks (n, l) for every host n;
 *   2. node all-gather (shared memory): each rank stages the N blocks its
 *      rail brought and copies the N blocks of each other local rank out.
 * Pipeline (hier_pipe.c): blocks of more than one segment go segment by
 * segment, the rail ring of segment k+1 running on the rail thread while
 * the caller's thread runs the node stage of segment k.
 * Each rank sends (N-1) blocks over the network, so each host's link
 * carries L(N-1) blocks out: exactly what the other hosts lack, where the
 * flat ring sends W-1 per host crossing. Memory: N blocks staged into the
 * segment and (L-1)N copied out per rank, no scratch.
 */
#include "collectives/coll.h"
#include "collectives/hier_pipe.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "topology/rankmap.h"

typedef struct {
  qcclComm_t comm;
  char* out;
  size_t bytes, seg; /* one rank's block; segment */
  int stream;
} hier_ag_t;

/* Segment k's extent within a block. */
static void hier_ag_extent(const hier_ag_t* h, int k, size_t* off, size_t* m) {
  *off = (size_t)k * h->seg;
  *m = h->bytes - *off < h->seg ? h->bytes - *off : h->seg;
}

/* Segment k of rank (host n, local index l)'s block in recvbuff. */
static char* hier_ag_at(const hier_ag_t* h, int n, int l, size_t off) {
  return h->out + (size_t)topo_rankmap_rank_at(h->comm->rankmap, n, l) * h->bytes + off;
}

/* Stage 1: the ring over the rail, on segment k. */
static qcclResult_t hier_ag_rail(void* arg, int k) {
  hier_ag_t* h = arg;
  qcclComm_t rail = h->comm->rail;
  int N = rail->nranks, me = rail->rank, l = h->comm->node->rank; /* rail rank = host */
  size_t off, m;
  hier_ag_extent(h, k, &off, &m);
  for (int s = 0; s < N - 1; s++) {
    int si = (me - s + N) % N, ri = (me - s - 1 + N) % N;
    QCCL_CHECK(p2p_sendrecv(rail, (me + 1) % N, hier_ag_at(h, si, l, off), m, (me + N - 1) % N,
                            hier_ag_at(h, ri, l, off), m));
  }
  return qcclSuccess;
}

/* Stage 2: the node all-gather of segment k. Each rank's contribution is
 * the N pieces (n, its local index), seen as one run of N*m bytes and cut
 * into slot-sized chunks (several pieces per chunk when they are small). */
static qcclResult_t hier_ag_node(void* arg, int k) {
  hier_ag_t* h = arg;
  qcclComm_t node = h->comm->node;
  shm_t* s = node->shm;
  int L = node->nranks, l = node->rank, N = h->comm->nnodes;
  size_t off, m;
  hier_ag_extent(h, k, &off, &m);
  size_t total = (size_t)N * m;
  for (size_t v0 = 0; v0 < total; v0 += s->chunk_bytes) {
    size_t v1 = total - v0 < s->chunk_bytes ? total : v0 + s->chunk_bytes;
    uint64_t g;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    char* slot = shm_slot(s, l, g);
    for (size_t v = v0; v < v1;) {
      size_t n = v / m, o = v % m, len = m - o < v1 - v ? m - o : v1 - v;
      memcpy(slot + (v - v0), hier_ag_at(h, (int)n, l, off + o), len);
      v += len;
    }
    coll_stats_shm(node, v1 - v0);
    shm_post(s, 3 * g + 1);
    for (int i = 1; i < L; i++) {
      int j = (l + i) % L;
      QCCL_CHECK(shm_wait_rank(s, j, 3 * g + 1));
      const char* src = shm_slot(s, j, g);
      for (size_t v = v0; v < v1;) {
        size_t n = v / m, o = v % m, len = m - o < v1 - v ? m - o : v1 - v;
        copy_out(hier_ag_at(h, (int)n, j, off + o), src + (v - v0), len, h->stream);
        v += len;
      }
    }
    shm_post(s, 3 * g + 3);
  }
  return qcclSuccess;
}

qcclResult_t hier_allgather(qcclComm_t comm, const coll_args_t* a) {
  hier_ag_t h = {comm, a->recvbuff, a->count * dtype_size(a->datatype), HIER_SEGMENT_BYTES, 0};
  h.stream = h.bytes * (size_t)comm->nranks >= COPY_STREAM_MIN_TOTAL;
  coll_copy(h.out + (size_t)comm->rank * h.bytes, a->sendbuff, h.bytes);
  hier_pipe_ops_t ops = {&h, (int)((h.bytes + h.seg - 1) / h.seg), NULL, hier_ag_rail,
                         hier_ag_node};
  return hier_pipe_run(comm, &ops);
}
