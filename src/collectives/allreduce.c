/*
 * allreduce.c - AllReduce inside one node, through the shared segment.
 *
 * The buffer is cut into chunks of chunk_bytes; each chunk goes through
 * three phases, double-buffered so chunk g+1 is staged while chunk g is
 * still being read:
 *   1. every rank copies its chunk into its own slot (copy in once);
 *   2. rank r reduces part r of the chunk over all W slots, in rank order,
 *      into its result area (reduce in place, once, by one rank), and
 *      copies that part to its output;
 *   3. every rank copies the other W-1 reduced parts to its output (copy
 *      out once).
 * Per rank and per byte of the buffer: one write into the segment, one
 * read of W parts of size 1/W (the reduction), and one read out; each part
 * is reduced by exactly one rank, so results are bitwise identical on all
 * ranks. Chunks are small enough that the segment traffic stays in the
 * last-level cache; main memory sees the user's input and output only.
 */
#include "collectives/coll.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"

qcclResult_t coll_allreduce(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank;
  size_t es = dtype_size(a->datatype);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  if (w == 1) {
    coll_copy(out, in, a->count * es);
    return qcclSuccess;
  }
  size_t per_chunk = s->chunk_bytes / es;
  const void* srcs[w];
  for (size_t off = 0; off < a->count; off += per_chunk) {
    size_t m = a->count - off < per_chunk ? a->count - off : per_chunk;
    uint64_t g;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    memcpy(shm_slot(s, r, g), in + off * es, m * es);
    shm_post(s, 3 * g + 1);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 1));
    size_t lo, hi;
    coll_part(m, w, r, &lo, &hi);
    for (int j = 0; j < w; j++) srcs[j] = shm_slot(s, j, g) + lo * es;
    char* res = shm_result(s, r, g);
    reduce_kernel(res, srcs, w, hi - lo, a->datatype, a->op, w);
    memcpy(out + (off + lo) * es, res, (hi - lo) * es);
    shm_post(s, 3 * g + 2);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 2));
    for (int j = 0; j < w; j++) {
      if (j == r) continue;
      coll_part(m, w, j, &lo, &hi);
      memcpy(out + (off + lo) * es, shm_result(s, j, g), (hi - lo) * es);
    }
    shm_post(s, 3 * g + 3);
  }
  return qcclSuccess;
}
