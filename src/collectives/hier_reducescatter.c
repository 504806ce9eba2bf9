/*
 * hier_reducescatter.c - the two-level ReduceScatter, for communicators
 * whose hosts hold equal numbers of ranks (L each, N hosts; comm->rail
 * exists).
 *
 * Per segment of the blocks (a slice of every rank's block):
 *   1. node reduce-scatter (shared memory): every rank stages, for each
 *      other local rank j, the slices of the N blocks that the ranks
 *      (n, j) will own (read from sendbuff where they lie: ranks of a host
 *      need not be contiguous), and reduces the slices of its own local
 *      index over its host's L ranks, in rank order, into a buffer of N
 *      slices;
 *   2. rail reduce-scatter (UCX): flat_reducescatter.c's ring among the N
 *      ranks of local index l on those N slices leaves each its own slice,
 *      reduced over all ranks, in recvbuff.
 * Pipeline (hier_pipe.c): the rail ring of segment k is stepped between
 * the chunks of the node stage of segment k+1. Plans: the node stage is a
 * leaf on the node communicator, the rail stage the flat ring
 * (flat_reducescatter.c), restarted per segment.
 * Each rank sends (N-1) blocks over the network (the flat ring sends W-1
 * per host crossing): each host's link carries L(N-1) blocks, the least a
 * reduce-scatter across N hosts can. Avg sums and divides by W at the end.
 * Narrow floats (f16, bf16, fp8) are staged inside the host in their own
 * type, accumulate in f32 from the node stage on, travel between hosts as
 * f32 (as in the flat ring) and are rounded once, into recvbuff.
 */
#include <stdlib.h>

#include "collectives/flat.h"
#include "collectives/hier_pipe.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "topology/rankmap.h"

typedef struct hier_rs hier_rs_t;

/* Stage 1 of segment k, a leaf on the node communicator. */
typedef struct {
  plan_t p;
  hier_rs_t* h;
  int k;
  /* the stage's */
  size_t v0; /* the chunk's start in the run of N*m elements */
  uint64_t g;
} hier_rs_node_t;

struct hier_rs {
  hier_pipe_t hp;
  qcclRedOp_t op;    /* Sum for Avg */
  qcclDataType_t wt; /* the type partial sums are kept in */
  size_t es, wes;    /* element size of the data, of wt */
  size_t seg;        /* segment, in elements */
  hier_rs_node_t* node;
  plan_t* ring;
  /* the call's */
  char* part;  /* N slices of every segment, reduced over the node (wt) */
  float* wide; /* narrow types: a segment's result in f32 */
};

static void hier_rs_extent(const hier_rs_t* h, int k, size_t* off, size_t* m) {
  *off = (size_t)k * h->seg;
  *m = h->hp.p.a.count - *off < h->seg ? h->hp.p.a.count - *off : h->seg;
}

enum { HRS_START, HRS_CHUNK, HRS_FREE, HRS_STAGED };

/* Stage 1 on segment k. The slices that local rank j reduces are seen as
 * one run of N*m elements (host by host); chunks cut that run so that the
 * L runs of a chunk fit in a slot. */
static qcclResult_t hier_rs_node_progress(plan_t* p) {
  hier_rs_node_t* t = (hier_rs_node_t*)p;
  hier_rs_t* h = t->h;
  const coll_args_t* a = &h->hp.p.a;
  qcclComm_t node = p->comm;
  topo_rankmap_t* map = h->hp.p.comm->rankmap;
  shm_t* s = node->shm;
  int L = node->nranks, l = node->rank, N = h->hp.p.comm->nnodes;
  size_t es = h->es, off, m;
  hier_rs_extent(h, t->k, &off, &m);
  size_t total = (size_t)N * m, per = s->chunk_bytes / es / (size_t)L;
  if (per == 0) per = 1; /* chunk_bytes >= 4096 and L small: never hit */
  const char* in = a->sendbuff;
  char* dst = h->part + (size_t)N * off * h->wes;
  size_t c = total - t->v0 < per ? total - t->v0 : per;
  for (;;) {
    switch (p->phase) {
      case HRS_START:
        t->v0 = 0;
        p->phase = HRS_CHUNK;
        PLAN_FALLTHROUGH;
      case HRS_CHUNK:
        if (t->v0 >= total) return qcclSuccess;
        c = total - t->v0 < per ? total - t->v0 : per;
        t->g = shm_chunk_next(s);
        p->phase = HRS_FREE;
        PLAN_FALLTHROUGH;
      case HRS_FREE: {
        PLAN_TEST(p, shm_test_chunk(s, t->g));
        char* slot = shm_slot(s, l, t->g);
        size_t v0 = t->v0;
        for (int j = 0; j < L; j++) {
          if (j == l) continue;
          for (size_t v = v0; v < v0 + c;) {
            size_t n = v / m, o = v % m, len = m - o < v0 + c - v ? m - o : v0 + c - v;
            size_t owner = (size_t)topo_rankmap_rank_at(map, (int)n, j);
            copy_data(slot + ((size_t)j * c + (v - v0)) * es,
                      in + (owner * a->count + off + o) * es, len * es);
            v += len;
          }
        }
        coll_stats_shm(node, (size_t)(L - 1) * c * es);
        shm_post(s, 3 * t->g + 1);
        p->phase = HRS_STAGED;
        PLAN_FALLTHROUGH;
      }
      case HRS_STAGED: {
        PLAN_TEST(p, shm_test_all(s, 3 * t->g + 1));
        /* its own slices: from sendbuff where they are contiguous, else
         * from the others' slots; the run may cross from one host's slice
         * to the next, so reduce it piece by piece */
        const void* srcs[L];
        size_t v0 = t->v0;
        for (size_t v = v0; v < v0 + c;) {
          size_t n = v / m, o = v % m, len = m - o < v0 + c - v ? m - o : v0 + c - v;
          size_t owner = (size_t)topo_rankmap_rank_at(map, (int)n, l);
          for (int j = 0; j < L; j++)
            srcs[j] = j == l ? in + (owner * a->count + off + o) * es
                             : shm_slot(s, j, t->g) + ((size_t)l * c + (v - v0)) * es;
          if (h->wt == a->datatype)
            reduce_kernel(dst + v * es, srcs, L, len, a->datatype, h->op, L);
          else
            reduce_kernel_widen((float*)(dst + v * h->wes), srcs, L, len, a->datatype, h->op);
          v += len;
        }
        shm_post(s, 3 * t->g + 3);
        t->v0 += c;
        p->phase = HRS_CHUNK;
        if (p->yield) return qcclInProgress;
        break;
      }
      default:
        return QCCL_ERR(qcclInternalError, "hier reducescatter node: phase %d", p->phase);
    }
  }
}

static const plan_ops_t hier_rs_node_ops = {.name = "hier reducescatter node",
                                            .progress = hier_rs_node_progress,
                                            .spin = plan_shm_spin,
                                            .check = plan_shm_check};

static qcclResult_t hier_rs_pre(hier_pipe_t* hp, int k, plan_t** child) {
  hier_rs_t* h = (hier_rs_t*)hp;
  h->node->k = k;
  plan_start(&h->node->p, NULL, NULL);
  hier_stage_child(hp, &h->node->p);
  *child = &h->node->p;
  return qcclSuccess;
}

/* Stage 2 on segment k: the ring over the rail, into recvbuff. */
static qcclResult_t hier_rs_rail(hier_pipe_t* hp, int k, plan_t** child) {
  hier_rs_t* h = (hier_rs_t*)hp;
  size_t off, m;
  hier_rs_extent(h, k, &off, &m);
  char* out = (char*)hp->p.a.recvbuff + off * h->es;
  plan_restart(h->ring, h->part + (size_t)hp->p.comm->nnodes * off * h->wes,
               h->wide ? (char*)h->wide : out, m);
  *child = h->ring;
  return qcclSuccess;
}

/* After stage 2: Avg's division, and a narrow type's one rounding. */
static qcclResult_t hier_rs_rail_done(hier_pipe_t* hp, int k) {
  hier_rs_t* h = (hier_rs_t*)hp;
  const coll_args_t* a = &hp->p.a;
  size_t off, m;
  hier_rs_extent(h, k, &off, &m);
  char* out = (char*)a->recvbuff + off * h->es;
  char* res = h->wide ? (char*)h->wide : out;
  if (a->op == qcclAvg) {
    const void* own[1] = {res};
    reduce_kernel(res, own, 1, m, h->wt, qcclAvg, hp->p.comm->nranks);
  }
  if (h->wide) convert_from_f32(out, h->wide, m, a->datatype);
  return qcclSuccess;
}

static qcclResult_t hier_rs_start(hier_pipe_t* hp) {
  hier_rs_t* h = (hier_rs_t*)hp;
  qcclComm_t comm = hp->p.comm;
  const coll_args_t* a = &hp->p.a;
  QCCL_CHECK(comm_scratch(comm, 1, (size_t)comm->nnodes * a->count * h->wes, (void**)&h->part));
  return qcclSuccess;
}

static void hier_rs_destroy(hier_pipe_t* hp) {
  hier_rs_t* h = (hier_rs_t*)hp;
  plan_free(&h->node->p);
  plan_free(h->ring);
  free(h->wide);
}

static const hier_pipe_ops_t hier_rs_ops = {.name = "hier reducescatter",
                                            .pre = hier_rs_pre,
                                            .rail = hier_rs_rail,
                                            .rail_done = hier_rs_rail_done,
                                            .start = hier_rs_start,
                                            .destroy = hier_rs_destroy};

qcclResult_t hier_reducescatter_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  hier_pipe_t* hp;
  QCCL_CHECK(hier_pipe_plan(sizeof(hier_rs_t), &hier_rs_ops, comm, a, &hp));
  hier_rs_t* h = (hier_rs_t*)hp;
  h->op = a->op == qcclAvg ? qcclSum : a->op;
  h->wt = reduce_work_type(a->datatype);
  h->es = dtype_size(a->datatype);
  h->wes = dtype_size(h->wt);
  h->seg = HIER_SEGMENT_BYTES / h->es;
  hp->nsegs = (int)((a->count + h->seg - 1) / h->seg);
  coll_args_t ring = {COLL_REDUCESCATTER, NULL, NULL, 0, h->wt, h->op, -1};
  qcclResult_t r =
      plan_alloc(sizeof(hier_rs_node_t), &hier_rs_node_ops, comm->node, NULL, (plan_t**)&h->node);
  if (r == qcclSuccess) r = flat_reducescatter_plan(comm->rail, &ring, &h->ring);
  if (r == qcclSuccess && h->wt != a->datatype) {
    /* the wide result of the segment the ring ends (one at a time) */
    h->wide = malloc((a->count < h->seg ? a->count : h->seg) * sizeof(float));
    if (!h->wide) r = QCCL_ERR(qcclSystemError, "out of memory");
  }
  if (r != qcclSuccess) {
    plan_free(&hp->p);
    return r;
  }
  h->node->h = h;
  *out = &hp->p;
  return qcclSuccess;
}
