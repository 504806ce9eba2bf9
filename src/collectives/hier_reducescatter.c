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
 * Pipeline (hier_pipe.c): the rail ring of segment k runs on the rail
 * thread while the caller's thread runs the node stage of segment k+1.
 * Each rank sends (N-1) blocks over the network (the flat ring sends W-1
 * per host crossing): each host's link carries L(N-1) blocks, the least a
 * reduce-scatter across N hosts can. Avg sums and divides by W at the end.
 * Narrow floats (f16, bf16, fp8) are staged inside the host in their own
 * type, accumulate in f32 from the node stage on, travel between hosts as
 * f32 (as in the flat ring) and are rounded once, into recvbuff.
 */
#include <stdlib.h>

#include "collectives/coll.h"
#include "collectives/hier_pipe.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "topology/rankmap.h"

typedef struct {
  qcclComm_t comm;
  const coll_args_t* a;
  qcclRedOp_t op;
  qcclDataType_t wt; /* the type partial sums are kept in */
  size_t es, wes;    /* element size of the data, of wt */
  size_t seg;        /* segment, in elements */
  char* part;        /* N slices of every segment, reduced over the node (wt) */
  float* wide;       /* narrow types: a segment's result in f32 (rail thread) */
} hier_rs_t;

static void hier_rs_extent(const hier_rs_t* h, int k, size_t* off, size_t* m) {
  *off = (size_t)k * h->seg;
  *m = h->a->count - *off < h->seg ? h->a->count - *off : h->seg;
}

/* Stage 1 on segment k. The slices that local rank j reduces are seen as
 * one run of N*m elements (host by host); chunks cut that run so that the
 * L runs of a chunk fit in a slot. */
static qcclResult_t hier_rs_node(void* arg, int k) {
  hier_rs_t* h = arg;
  qcclComm_t node = h->comm->node;
  shm_t* s = node->shm;
  int L = node->nranks, l = node->rank, N = h->comm->nnodes;
  size_t es = h->es, off, m;
  hier_rs_extent(h, k, &off, &m);
  size_t total = (size_t)N * m, per = s->chunk_bytes / es / (size_t)L;
  if (per == 0) per = 1; /* chunk_bytes >= 4096 and L small: never hit */
  const char* in = h->a->sendbuff;
  char* dst = h->part + (size_t)N * off * h->wes;
  const void* srcs[L];
  for (size_t v0 = 0; v0 < total; v0 += per) {
    size_t c = total - v0 < per ? total - v0 : per;
    uint64_t g;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    char* slot = shm_slot(s, l, g);
    for (int j = 0; j < L; j++) {
      if (j == l) continue;
      for (size_t v = v0; v < v0 + c;) {
        size_t n = v / m, o = v % m, len = m - o < v0 + c - v ? m - o : v0 + c - v;
        size_t owner = (size_t)topo_rankmap_rank_at(h->comm->rankmap, (int)n, j);
        memcpy(slot + ((size_t)j * c + (v - v0)) * es, in + (owner * h->a->count + off + o) * es,
               len * es);
        v += len;
      }
    }
    coll_stats_shm(node, (size_t)(L - 1) * c * es);
    shm_post(s, 3 * g + 1);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 1));
    /* its own slices: from sendbuff where they are contiguous, else from
     * the others' slots; the run may cross from one host's slice to the
     * next, so reduce it piece by piece */
    for (size_t v = v0; v < v0 + c;) {
      size_t n = v / m, o = v % m, len = m - o < v0 + c - v ? m - o : v0 + c - v;
      size_t owner = (size_t)topo_rankmap_rank_at(h->comm->rankmap, (int)n, l);
      for (int j = 0; j < L; j++)
        srcs[j] = j == l ? in + (owner * h->a->count + off + o) * es
                         : shm_slot(s, j, g) + ((size_t)l * c + (v - v0)) * es;
      if (h->wt == h->a->datatype)
        reduce_kernel(dst + v * es, srcs, L, len, h->a->datatype, h->op, L);
      else
        reduce_kernel_widen((float*)(dst + v * h->wes), srcs, L, len, h->a->datatype, h->op);
      v += len;
    }
    shm_post(s, 3 * g + 3);
  }
  return qcclSuccess;
}

/* Stage 2 on segment k: the ring over the rail, into recvbuff. */
static qcclResult_t hier_rs_rail(void* arg, int k) {
  hier_rs_t* h = arg;
  size_t off, m;
  hier_rs_extent(h, k, &off, &m);
  char* out = (char*)h->a->recvbuff + off * h->es;
  char* res = h->wide ? (char*)h->wide : out;
  coll_args_t rail = {.kind = COLL_REDUCESCATTER,
                      .sendbuff = h->part + (size_t)h->comm->nnodes * off * h->wes,
                      .recvbuff = res,
                      .count = m,
                      .datatype = h->wt,
                      .op = h->op,
                      .root = -1};
  QCCL_CHECK(flat_reducescatter(h->comm->rail, &rail));
  if (h->a->op == qcclAvg) {
    const void* own[1] = {res};
    reduce_kernel(res, own, 1, m, h->wt, qcclAvg, h->comm->nranks);
  }
  if (h->wide) convert_from_f32(out, h->wide, m, h->a->datatype);
  return qcclSuccess;
}

qcclResult_t hier_reducescatter(qcclComm_t comm, const coll_args_t* a) {
  hier_rs_t h = {.comm = comm, .a = a, .op = a->op == qcclAvg ? qcclSum : a->op};
  h.wt = reduce_work_type(a->datatype);
  h.es = dtype_size(a->datatype);
  h.wes = dtype_size(h.wt);
  h.seg = HIER_SEGMENT_BYTES / h.es;
  QCCL_CHECK(comm_scratch(comm, 1, (size_t)comm->nnodes * a->count * h.wes, (void**)&h.part));
  if (h.wt != a->datatype) {
    h.wide = malloc((a->count < h.seg ? a->count : h.seg) * sizeof(float));
    if (!h.wide) return QCCL_ERR(qcclSystemError, "out of memory");
  }
  hier_pipe_ops_t ops = {&h, (int)((a->count + h.seg - 1) / h.seg), hier_rs_node, hier_rs_rail,
                         NULL};
  qcclResult_t r = hier_pipe_run(comm, &ops);
  free(h.wide);
  return r;
}
