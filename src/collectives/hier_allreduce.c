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
 * (HIER_SEGMENT_BYTES) go through the stages segment by segment, stage 2
 * of segment k stepped between the chunks of stage 1 of segment k+1 and
 * stage 3 of segment k-1, so the network is busy while memory is copied.
 * Plans: stages 1 and 3 are leaves on the node communicator (below), stage
 * 2 the flat ring (flat_allreduce.c) on the rail, restarted per segment.
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
#include "collectives/flat.h"
#include "collectives/hier_pipe.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/memcopy.h"

/* A node stage on elements [begin, end) of the buffer (chunk-aligned):
 * 1 (reduce: this rank's parts of every chunk, reduced over the node,
 * into share) or 3 (gather: every rank's reduced parts from the shares
 * into recvbuff). a is the user's call (its buffers set at each start),
 * comm the node communicator. */
typedef struct {
  plan_t p;
  qcclRedOp_t op; /* Sum for Avg */
  size_t begin, end;
  char* share;
  /* the stage's */
  size_t off, pos;
  uint64_t g;
} har_stage_t;

enum { HAR_START, HAR_CHUNK, HAR_FREE, HAR_WAIT };

/* The chunk at t->off: m elements, this rank's part [lo, hi). */
static size_t har_chunk(const har_stage_t* t, size_t* lo, size_t* hi) {
  const shm_t* s = t->p.comm->shm;
  size_t per_chunk = s->chunk_bytes / dtype_size(t->p.a.datatype);
  size_t m = t->end - t->off < per_chunk ? t->end - t->off : per_chunk;
  coll_part(m, t->p.comm->nranks, t->p.comm->rank, lo, hi);
  return m;
}

static qcclResult_t har_reduce_progress(plan_t* p) {
  har_stage_t* t = (har_stage_t*)p;
  const coll_args_t* a = &p->a;
  shm_t* s = p->comm->shm;
  int w = p->comm->nranks, r = p->comm->rank;
  int widen = reduce_work_type(a->datatype) != a->datatype;
  size_t es = dtype_size(a->datatype), wes = widen ? sizeof(float) : es;
  size_t per_chunk = s->chunk_bytes / es, lo, hi, m = har_chunk(t, &lo, &hi);
  const char* src = (const char*)a->sendbuff + t->off * es;
  for (;;) {
    switch (p->phase) {
      case HAR_START:
        t->off = t->begin;
        t->pos = 0;
        p->phase = HAR_CHUNK;
        PLAN_FALLTHROUGH;
      case HAR_CHUNK:
        if (t->off >= t->end) return qcclSuccess;
        m = har_chunk(t, &lo, &hi);
        src = (const char*)a->sendbuff + t->off * es;
        t->g = shm_chunk_next(s);
        p->phase = HAR_FREE;
        PLAN_FALLTHROUGH;
      case HAR_FREE:
        PLAN_TEST(p, shm_test_chunk(s, t->g));
        ar_chunk_stage(s, t->g, 0, src, m, lo, hi, es, a->count * es);
        coll_stats_shm(p->comm, (m - (hi - lo)) * es);
        shm_post(s, 3 * t->g + 1);
        p->phase = HAR_WAIT;
        PLAN_FALLTHROUGH;
      case HAR_WAIT: {
        PLAN_TEST(p, shm_test_all(s, 3 * t->g + 1));
        const void* srcs[w];
        for (int j = 0; j < w; j++) srcs[j] = (j == r ? src : shm_slot(s, j, t->g)) + lo * es;
        if (widen)
          reduce_kernel_widen((float*)(t->share + t->pos * wes), srcs, w, hi - lo, a->datatype,
                              t->op);
        else
          reduce_kernel(t->share + t->pos * es, srcs, w, hi - lo, a->datatype, t->op, w);
        t->pos += hi - lo;
        /* nobody reads a result of this chunk: done with it */
        shm_post(s, 3 * t->g + 3);
        t->off += per_chunk;
        p->phase = HAR_CHUNK;
        if (p->yield) return qcclInProgress;
        break;
      }
      default:
        return QCCL_ERR(qcclInternalError, "hier allreduce node reduce: phase %d", p->phase);
    }
  }
}

static qcclResult_t har_gather_progress(plan_t* p) {
  har_stage_t* t = (har_stage_t*)p;
  const coll_args_t* a = &p->a;
  shm_t* s = p->comm->shm;
  int widen = reduce_work_type(a->datatype) != a->datatype;
  size_t es = dtype_size(a->datatype), per_chunk = s->chunk_bytes / es, lo, hi;
  size_t m = har_chunk(t, &lo, &hi);
  char* out = a->recvbuff;
  int stream = a->count * es >= COPY_STREAM_MIN_TOTAL;
  for (;;) {
    switch (p->phase) {
      case HAR_START:
        t->off = t->begin;
        t->pos = 0;
        p->phase = HAR_CHUNK;
        PLAN_FALLTHROUGH;
      case HAR_CHUNK:
        if (t->off >= t->end) return qcclSuccess;
        m = har_chunk(t, &lo, &hi);
        t->g = shm_chunk_next(s);
        p->phase = HAR_FREE;
        PLAN_FALLTHROUGH;
      case HAR_FREE: {
        PLAN_TEST(p, shm_test_chunk(s, t->g));
        char* res = shm_result(s, p->comm->rank, t->g);
        if (widen) {
          /* the one rounding of a narrow type */
          convert_from_f32(res, (const float*)t->share + t->pos, hi - lo, a->datatype);
          copy_out(out + (t->off + lo) * es, res, (hi - lo) * es, stream);
        } else {
          shm_handoff_copy(s, res, t->share + t->pos * es, (hi - lo) * es, a->count * es);
          copy_out(out + (t->off + lo) * es, t->share + t->pos * es, (hi - lo) * es, stream);
        }
        coll_stats_shm(p->comm, (hi - lo) * es);
        t->pos += hi - lo;
        shm_post(s, 3 * t->g + 2);
        p->phase = HAR_WAIT;
        PLAN_FALLTHROUGH;
      }
      case HAR_WAIT:
        PLAN_TEST(p, shm_test_all(s, 3 * t->g + 2));
        ar_chunk_copy_results(s, t->g, 0, out + t->off * es, m, es, stream, NULL, 0);
        shm_post(s, 3 * t->g + 3);
        t->off += per_chunk;
        p->phase = HAR_CHUNK;
        if (p->yield) return qcclInProgress;
        break;
      default:
        return QCCL_ERR(qcclInternalError, "hier allreduce node gather: phase %d", p->phase);
    }
  }
}

static const plan_ops_t har_reduce_ops = {.name = "hier allreduce node reduce",
                                          .progress = har_reduce_progress,
                                          .spin = plan_shm_spin,
                                          .check = plan_shm_check};
static const plan_ops_t har_gather_ops = {.name = "hier allreduce node gather",
                                          .progress = har_gather_progress,
                                          .spin = plan_shm_spin,
                                          .check = plan_shm_check};

/* Segment k of a call: elements [begin, end) of the buffer, and where its
 * share starts and how long it is. */
typedef struct {
  size_t begin, end;
  size_t share_off, share_n;
} hier_seg_t;

typedef struct {
  hier_pipe_t h;
  qcclDataType_t wt; /* the type of the share: f32 for narrow floats */
  size_t wes;        /* its element size */
  size_t share_bytes;
  hier_seg_t* segs;
  har_stage_t *reduce, *gather; /* stages 1 and 3 (node) */
  plan_t* ring;                 /* stage 2 (rail) */
  char* share;                  /* the call's: comm scratch 1 */
} hier_ar_t;

static qcclResult_t hier_ar_start(hier_pipe_t* hp) {
  hier_ar_t* h = (hier_ar_t*)hp;
  return comm_scratch(hp->p.comm, 1, h->share_bytes, (void**)&h->share);
}

/* Readies node stage st on segment k. */
static plan_t* hier_ar_stage(hier_ar_t* h, har_stage_t* st, int k) {
  hier_seg_t* sg = &h->segs[k];
  st->begin = sg->begin;
  st->end = sg->end;
  st->share = h->share + sg->share_off * h->wes;
  plan_start(&st->p, h->h.p.a.sendbuff, h->h.p.a.recvbuff);
  hier_stage_child(&h->h, &st->p);
  return &st->p;
}

static qcclResult_t hier_ar_pre(hier_pipe_t* hp, int k, plan_t** child) {
  hier_ar_t* h = (hier_ar_t*)hp;
  *child = hier_ar_stage(h, h->reduce, k);
  return qcclSuccess;
}

static qcclResult_t hier_ar_post(hier_pipe_t* hp, int k, plan_t** child) {
  hier_ar_t* h = (hier_ar_t*)hp;
  *child = hier_ar_stage(h, h->gather, k);
  return qcclSuccess;
}

/* Stage 2 on one segment's share. */
static qcclResult_t hier_ar_rail(hier_pipe_t* hp, int k, plan_t** child) {
  hier_ar_t* h = (hier_ar_t*)hp;
  hier_seg_t* sg = &h->segs[k];
  *child = NULL;
  if (sg->share_n == 0) return qcclSuccess;
  char* x = h->share + sg->share_off * h->wes;
  plan_restart(h->ring, x, x, sg->share_n);
  *child = h->ring;
  return qcclSuccess;
}

/* Avg's division, on the share. */
static qcclResult_t hier_ar_rail_done(hier_pipe_t* hp, int k) {
  hier_ar_t* h = (hier_ar_t*)hp;
  hier_seg_t* sg = &h->segs[k];
  if (hp->p.a.op != qcclAvg || sg->share_n == 0) return qcclSuccess;
  char* x = h->share + sg->share_off * h->wes;
  const void* own[1] = {x};
  reduce_kernel(x, own, 1, sg->share_n, h->wt, qcclAvg, hp->p.comm->nranks);
  return qcclSuccess;
}

static void hier_ar_destroy(hier_pipe_t* hp) {
  hier_ar_t* h = (hier_ar_t*)hp;
  free(h->segs);
  plan_free(&h->reduce->p);
  plan_free(&h->gather->p);
  plan_free(h->ring);
}

static const hier_pipe_ops_t hier_ar_ops = {.name = "hier allreduce",
                                            .pre = hier_ar_pre,
                                            .rail = hier_ar_rail,
                                            .rail_done = hier_ar_rail_done,
                                            .post = hier_ar_post,
                                            .start = hier_ar_start,
                                            .destroy = hier_ar_destroy};

qcclResult_t hier_allreduce_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  size_t es = dtype_size(a->datatype);
  int L = comm->node->nranks, r = comm->node->rank;
  size_t chunk = comm->node->shm->chunk_bytes, per_chunk = chunk / es;
  size_t seg = per_chunk * (HIER_SEGMENT_BYTES > chunk ? HIER_SEGMENT_BYTES / chunk : 1);
  int nsegs = (int)((a->count + seg - 1) / seg);
  hier_pipe_t* hp;
  QCCL_CHECK(hier_pipe_plan(sizeof(hier_ar_t), &hier_ar_ops, comm, a, &hp));
  hier_ar_t* h = (hier_ar_t*)hp;
  hp->nsegs = nsegs;
  h->wt = reduce_work_type(a->datatype);
  h->wes = dtype_size(h->wt);
  /* the share: at most ceil(m / L) elements of every chunk */
  size_t chunks = (a->count + per_chunk - 1) / per_chunk;
  h->share_bytes = (a->count / (size_t)L + chunks + 1) * h->wes;
  qcclRedOp_t op = a->op == qcclAvg ? qcclSum : a->op;
  coll_args_t ring = {COLL_ALLREDUCE, NULL, NULL, 0, h->wt, op, -1};
  qcclResult_t res = qcclSuccess;
  h->segs = calloc((size_t)nsegs, sizeof *h->segs);
  if (!h->segs) res = QCCL_ERR(qcclSystemError, "out of memory");
  if (res == qcclSuccess)
    res = plan_alloc(sizeof(har_stage_t), &har_reduce_ops, comm->node, a, (plan_t**)&h->reduce);
  if (res == qcclSuccess)
    res = plan_alloc(sizeof(har_stage_t), &har_gather_ops, comm->node, a, (plan_t**)&h->gather);
  if (res == qcclSuccess) res = flat_allreduce_plan(comm->rail, &ring, &h->ring);
  if (res != qcclSuccess) {
    plan_free(&hp->p);
    return res;
  }
  h->reduce->op = op;
  /* each segment's share: part r of each of its chunks, as stage 1 cuts */
  for (int k = 0; k < nsegs; k++) {
    hier_seg_t* sg = &h->segs[k];
    sg->begin = (size_t)k * seg;
    sg->end = sg->begin + seg < a->count ? sg->begin + seg : a->count;
    sg->share_off = k ? h->segs[k - 1].share_off + h->segs[k - 1].share_n : 0;
    for (size_t off = sg->begin; off < sg->end; off += per_chunk) {
      size_t m = sg->end - off < per_chunk ? sg->end - off : per_chunk, lo, hi;
      coll_part(m, L, r, &lo, &hi);
      sg->share_n += hi - lo;
    }
  }
  *out = &hp->p;
  return qcclSuccess;
}
