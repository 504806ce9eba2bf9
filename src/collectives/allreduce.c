/*
 * allreduce.c - AllReduce through a host's shared segment, optionally with
 * an inter-node stage (the two-level AllReduce across hosts).
 *
 * The buffer is cut into chunks of chunk_bytes; part l of every chunk
 * belongs to local rank l. Each chunk goes through three phases, double-
 * buffered so chunk g+1 is staged while chunk g is still being read:
 *   1. every rank copies the parts of its chunk that others reduce into its
 *      slot (copy in once; its own part stays in sendbuff);
 *   2. rank l reduces part l over the host's L ranks, in rank order, into
 *      its result area (reduce once, by one rank); across hosts it then
 *      all-reduces that part with the ranks of its local index on the other
 *      hosts (the "rail": the ring of flat_allreduce.c over UCX), and copies
 *      it to recvbuff;
 *   3. every rank copies the other L-1 reduced parts to recvbuff (copy out
 *      once).
 * Per rank and per byte: (L-1)/L written into the segment, the reduction
 * reads 1/L from each rank, one byte read out; across N hosts, each host's
 * link carries 2(N-1)/N of the buffer (L rails of 1/L each). Each part's
 * final value is computed once (or identically by the rail's ring) and
 * copied, so results are bitwise identical on all ranks. Chunks are small
 * enough that the segment stays in cache; large outputs are written with
 * streaming stores (no read-for-ownership). Avg sums and divides by the
 * total number of ranks at the end.
 */
#include "collectives/coll.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/memcopy.h"

/* node: the communicator of this host's ranks; rail: NULL on one host. */
static qcclResult_t allreduce_run(qcclComm_t node, qcclComm_t rail, int total,
                                  const coll_args_t* a) {
  shm_t* s = node->shm;
  int w = node->nranks, r = node->rank;
  size_t es = dtype_size(a->datatype);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  qcclRedOp_t op = rail && a->op == qcclAvg ? qcclSum : a->op;
  int stream = a->count * es >= COPY_STREAM_MIN_TOTAL;
  size_t per_chunk = s->chunk_bytes / es;
  const void* srcs[w];
  for (size_t off = 0; off < a->count; off += per_chunk) {
    size_t m = a->count - off < per_chunk ? a->count - off : per_chunk;
    size_t lo, hi;
    coll_part(m, w, r, &lo, &hi);
    uint64_t g;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    char* slot = shm_slot(s, r, g);
    const char* src = in + off * es;
    memcpy(slot, src, lo * es);
    memcpy(slot + hi * es, src + hi * es, (m - hi) * es);
    shm_post(s, 3 * g + 1);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 1));
    for (int j = 0; j < w; j++) srcs[j] = (j == r ? src : shm_slot(s, j, g)) + lo * es;
    char* res = shm_result(s, r, g);
    reduce_kernel(res, srcs, w, hi - lo, a->datatype, op, w);
    if (rail) {
      QCCL_CHECK(flat_ring_allreduce(rail, res, res, hi - lo, a->datatype, op));
      if (a->op == qcclAvg) {
        const void* own[1] = {res};
        reduce_kernel(res, own, 1, hi - lo, a->datatype, qcclAvg, total);
      }
    }
    copy_out(out + (off + lo) * es, res, (hi - lo) * es, stream);
    shm_post(s, 3 * g + 2);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 2));
    for (int k = 1; k < w; k++) {
      int j = (r + k) % w;
      size_t jl, jh;
      coll_part(m, w, j, &jl, &jh);
      copy_out(out + (off + jl) * es, shm_result(s, j, g), (jh - jl) * es, stream);
    }
    shm_post(s, 3 * g + 3);
  }
  return qcclSuccess;
}

qcclResult_t coll_allreduce(qcclComm_t comm, const coll_args_t* a) {
  if (comm->nranks == 1) {
    coll_copy(a->recvbuff, a->sendbuff, a->count * dtype_size(a->datatype));
    return qcclSuccess;
  }
  return allreduce_run(comm, NULL, comm->nranks, a);
}

qcclResult_t hier_allreduce(qcclComm_t comm, const coll_args_t* a) {
  return allreduce_run(comm->node, comm->rail, comm->nranks, a);
}
