/*
 * allreduce.c - AllReduce through a host's shared segment.
 *
 * The buffer is cut into chunks of chunk_bytes; part l of every chunk
 * belongs to local rank l. Each chunk goes through three phases, double-
 * buffered so chunk g+1 is staged while chunk g is still being read:
 *   1. every rank copies the parts of its chunk that others reduce into its
 *      slot (copy in once; its own part stays in sendbuff);
 *   2. rank l reduces part l over the L ranks, in rank order, into its
 *      result area (reduce once, by one rank) and copies it to recvbuff;
 *   3. every rank copies the other L-1 reduced parts to recvbuff (copy out
 *      once).
 * Per rank and per byte: (L-1)/L written into the segment, the reduction
 * reads 1/L from each rank, one byte read out. Each part's final value is
 * computed once and copied, so results are bitwise identical on all ranks.
 * Chunks are small enough that the segment stays in cache; large outputs
 * are written with streaming stores (no read-for-ownership). The two-level
 * AllReduce across hosts (hier_allreduce.c) uses the same phases.
 */
#include "collectives/allreduce_chunk.h"
#include "collectives/coll.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/memcopy.h"

qcclResult_t coll_allreduce(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank;
  size_t es = dtype_size(a->datatype);
  if (w == 1) {
    coll_copy(a->recvbuff, a->sendbuff, a->count * es);
    return qcclSuccess;
  }
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  int stream = a->count * es >= COPY_STREAM_MIN_TOTAL;
  size_t per_chunk = s->chunk_bytes / es;
  const void* srcs[w];
  for (size_t off = 0; off < a->count; off += per_chunk) {
    size_t m = a->count - off < per_chunk ? a->count - off : per_chunk;
    size_t lo, hi;
    coll_part(m, w, r, &lo, &hi);
    uint64_t g;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    const char* src = in + off * es;
    ar_chunk_stage(s, g, src, m, lo, hi, es);
    shm_post(s, 3 * g + 1);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 1));
    for (int j = 0; j < w; j++) srcs[j] = (j == r ? src : shm_slot(s, j, g)) + lo * es;
    char* res = shm_result(s, r, g);
    reduce_kernel(res, srcs, w, hi - lo, a->datatype, a->op, w);
    coll_stats_shm(comm, m * es); /* its slot but its part, and its result */
    copy_out(out + (off + lo) * es, res, (hi - lo) * es, stream);
    shm_post(s, 3 * g + 2);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 2));
    ar_chunk_copy_results(s, g, out + off * es, m, es, stream);
    shm_post(s, 3 * g + 3);
  }
  return qcclSuccess;
}
