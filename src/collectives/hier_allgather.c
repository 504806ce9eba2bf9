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
 * segment, the rail ring of segment k+1 stepped between the chunks of the
 * node stage of segment k. Plans: the rail ring is a leaf on the rail
 * (its blocks lie in recvbuff by rank, not by rail index), the node stage
 * a leaf on the node communicator.
 * Each rank sends (N-1) blocks over the network, so each host's link
 * carries L(N-1) blocks out: exactly what the other hosts lack, where the
 * flat ring sends W-1 per host crossing. Memory: N blocks staged into the
 * segment and (L-1)N copied out per rank, no scratch.
 */
#include "collectives/hier_pipe.h"
#include "collectives/p2p.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "topology/rankmap.h"

typedef struct hier_ag hier_ag_t;

/* Stage 1 (a leaf on the rail) or 2 (on the node) of segment k. */
typedef struct {
  p2p_leaf_t l;
  hier_ag_t* h;
  int k;
  /* the stage's */
  int s; /* the ring step (stage 1) */
  p2p_xchg_t x;
  size_t v0; /* the chunk's start in the run of N*m bytes (stage 2) */
  uint64_t g;
  int j; /* the next local peer to read (stage 2) */
} hier_ag_stage_t;

struct hier_ag {
  hier_pipe_t hp;
  size_t bytes, seg; /* one rank's block; segment */
  int stream;
  hier_ag_stage_t *ring, *node;
};

/* Segment k's extent within a block. */
static void hier_ag_extent(const hier_ag_t* h, int k, size_t* off, size_t* m) {
  *off = (size_t)k * h->seg;
  *m = h->bytes - *off < h->seg ? h->bytes - *off : h->seg;
}

/* Segment k of rank (host n, local index l)'s block in recvbuff. */
static char* hier_ag_at(const hier_ag_t* h, int n, int l, size_t off) {
  qcclComm_t comm = h->hp.p.comm;
  return (char*)h->hp.p.a.recvbuff + (size_t)topo_rankmap_rank_at(comm->rankmap, n, l) * h->bytes +
         off;
}

enum { HAG_START, HAG_POST, HAG_WAIT, HAG_CHUNK, HAG_FREE };

/* Stage 1: the ring over the rail, on segment k. */
static qcclResult_t hier_ag_ring_progress(plan_t* p) {
  hier_ag_stage_t* t = (hier_ag_stage_t*)p;
  hier_ag_t* h = t->h;
  qcclComm_t rail = p->comm;
  int N = rail->nranks, me = rail->rank, l = h->hp.p.comm->node->rank; /* rail rank = host */
  size_t off, m;
  hier_ag_extent(h, t->k, &off, &m);
  for (;;) {
    switch (p->phase) {
      case HAG_START:
        t->s = 0;
        p->phase = HAG_POST;
        PLAN_FALLTHROUGH;
      case HAG_POST: {
        if (t->s == N - 1) return qcclSuccess;
        int si = (me - t->s + N) % N, ri = (me - t->s - 1 + N) % N;
        p2p_xchg_start(&t->x, rail, (me + 1) % N, hier_ag_at(h, si, l, off), m, (me + N - 1) % N,
                       hier_ag_at(h, ri, l, off), m);
        p->phase = HAG_WAIT;
        PLAN_FALLTHROUGH;
      }
      case HAG_WAIT:
        PLAN_TEST(p, p2p_leaf_step(&t->l, &t->x.b));
        t->s++;
        p->phase = HAG_POST;
        break;
      default:
        return QCCL_ERR(qcclInternalError, "hier allgather ring: phase %d", p->phase);
    }
  }
}

/* Stage 2: the node all-gather of segment k. Each rank's contribution is
 * the N pieces (n, its local index), seen as one run of N*m bytes and cut
 * into slot-sized chunks (several pieces per chunk when they are small). */
static qcclResult_t hier_ag_node_progress(plan_t* p) {
  hier_ag_stage_t* t = (hier_ag_stage_t*)p;
  hier_ag_t* h = t->h;
  qcclComm_t node = p->comm;
  shm_t* s = node->shm;
  int L = node->nranks, l = node->rank, N = h->hp.p.comm->nnodes;
  size_t off, m;
  hier_ag_extent(h, t->k, &off, &m);
  size_t total = (size_t)N * m;
  size_t v1 = total - t->v0 < s->chunk_bytes ? total : t->v0 + s->chunk_bytes;
  for (;;) {
    switch (p->phase) {
      case HAG_START:
        t->v0 = 0;
        p->phase = HAG_CHUNK;
        PLAN_FALLTHROUGH;
      case HAG_CHUNK:
        if (t->v0 >= total) return qcclSuccess;
        v1 = total - t->v0 < s->chunk_bytes ? total : t->v0 + s->chunk_bytes;
        t->g = shm_chunk_next(s);
        p->phase = HAG_FREE;
        PLAN_FALLTHROUGH;
      case HAG_FREE: {
        PLAN_TEST(p, shm_test_chunk(s, t->g));
        char* slot = shm_slot(s, l, t->g);
        for (size_t v = t->v0; v < v1;) {
          size_t n = v / m, o = v % m, len = m - o < v1 - v ? m - o : v1 - v;
          copy_data(slot + (v - t->v0), hier_ag_at(h, (int)n, l, off + o), len);
          v += len;
        }
        coll_stats_shm(node, v1 - t->v0);
        shm_post(s, 3 * t->g + 1);
        t->j = 1;
        p->phase = HAG_WAIT;
        PLAN_FALLTHROUGH;
      }
      case HAG_WAIT:
        for (; t->j < L; t->j++) {
          int j = (l + t->j) % L;
          PLAN_TEST(p, shm_test_rank(s, j, 3 * t->g + 1));
          const char* src = shm_slot(s, j, t->g);
          for (size_t v = t->v0; v < v1;) {
            size_t n = v / m, o = v % m, len = m - o < v1 - v ? m - o : v1 - v;
            copy_out(hier_ag_at(h, (int)n, j, off + o), src + (v - t->v0), len, h->stream);
            v += len;
          }
        }
        shm_post(s, 3 * t->g + 3);
        t->v0 = v1;
        p->phase = HAG_CHUNK;
        if (p->yield) return qcclInProgress;
        break;
      default:
        return QCCL_ERR(qcclInternalError, "hier allgather node: phase %d", p->phase);
    }
  }
}

static const plan_ops_t hier_ag_ring_ops = {.name = "hier allgather ring",
                                            .progress = hier_ag_ring_progress,
                                            .spin = p2p_leaf_spin,
                                            .check = p2p_leaf_check,
                                            .cancel = p2p_leaf_cancel,
                                            .remote = p2p_leaf_remote};
static const plan_ops_t hier_ag_node_ops = {.name = "hier allgather node",
                                            .progress = hier_ag_node_progress,
                                            .spin = plan_shm_spin,
                                            .check = plan_shm_check};

static qcclResult_t hier_ag_stage(hier_pipe_t* hp, hier_ag_stage_t* st, int k, plan_t** child) {
  st->k = k;
  plan_start(&st->l.p, NULL, NULL);
  hier_stage_child(hp, &st->l.p);
  *child = &st->l.p;
  return qcclSuccess;
}

static qcclResult_t hier_ag_rail(hier_pipe_t* hp, int k, plan_t** child) {
  return hier_ag_stage(hp, ((hier_ag_t*)hp)->ring, k, child);
}

static qcclResult_t hier_ag_post(hier_pipe_t* hp, int k, plan_t** child) {
  return hier_ag_stage(hp, ((hier_ag_t*)hp)->node, k, child);
}

static qcclResult_t hier_ag_start(hier_pipe_t* hp) {
  hier_ag_t* h = (hier_ag_t*)hp;
  const coll_args_t* a = &hp->p.a;
  coll_copy((char*)a->recvbuff + (size_t)hp->p.comm->rank * h->bytes, a->sendbuff, h->bytes);
  return qcclSuccess;
}

static void hier_ag_destroy(hier_pipe_t* hp) {
  hier_ag_t* h = (hier_ag_t*)hp;
  plan_free(&h->ring->l.p);
  plan_free(&h->node->l.p);
}

static const hier_pipe_ops_t hier_ag_ops = {.name = "hier allgather",
                                            .rail = hier_ag_rail,
                                            .post = hier_ag_post,
                                            .start = hier_ag_start,
                                            .destroy = hier_ag_destroy};

qcclResult_t hier_allgather_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  hier_pipe_t* hp;
  QCCL_CHECK(hier_pipe_plan(sizeof(hier_ag_t), &hier_ag_ops, comm, a, &hp));
  hier_ag_t* h = (hier_ag_t*)hp;
  h->bytes = a->count * dtype_size(a->datatype);
  h->seg = HIER_SEGMENT_BYTES;
  h->stream = h->bytes * (size_t)comm->nranks >= COPY_STREAM_MIN_TOTAL;
  hp->nsegs = (int)((h->bytes + h->seg - 1) / h->seg);
  qcclResult_t r =
      plan_alloc(sizeof(hier_ag_stage_t), &hier_ag_ring_ops, comm->rail, NULL, (plan_t**)&h->ring);
  if (r == qcclSuccess)
    r = plan_alloc(sizeof(hier_ag_stage_t), &hier_ag_node_ops, comm->node, NULL,
                   (plan_t**)&h->node);
  if (r != qcclSuccess) {
    plan_free(&hp->p);
    return r;
  }
  h->ring->h = h->node->h = h;
  *out = &hp->p;
  return qcclSuccess;
}
