/*
 * reduce.c - Reduce to a root inside one node.
 *
 * As AllReduce (allreduce.c) without the final all-gather: every rank
 * stages its chunk, rank r reduces part r over all slots into its result
 * area, and only the root copies the W reduced parts out. The work of the
 * reduction is spread over all ranks instead of falling on the root, and
 * the result is the same bits AllReduce gives. Only the root waits for
 * every rank at the end; the others return once their parts are posted.
 */
#include "collectives/coll.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/memcopy.h"

qcclResult_t coll_reduce(qcclComm_t comm, const coll_args_t* a) {
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
  size_t chunks = 0;
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
    reduce_kernel(shm_result(s, r, g), srcs, w, hi - lo, a->datatype, a->op, w);
    /* the others read its slot but its own part, and root its result */
    coll_stats_shm(comm, (m - (hi - lo) + (r != a->root ? hi - lo : 0)) * es);
    shm_post(s, 3 * g + 2);
    if (r == a->root) {
      QCCL_CHECK(shm_wait_all(s, 3 * g + 2));
      for (int j = 0; j < w; j++) {
        coll_part(m, w, j, &lo, &hi);
        copy_out(out + (off + lo) * es, shm_result(s, j, g), (hi - lo) * es,
                 a->count * es >= COPY_STREAM_MIN_TOTAL);
      }
    }
    shm_post(s, 3 * g + 3);
    chunks++;
  }
  /* only the root waits for every rank at the end: the others are done once
   * their parts are posted, their slots and result areas being guarded by
   * the next call's shm_chunk_begin (MPI's eager reduce) */
  if (r != a->root) return qcclSuccess;
  return coll_rooted_end(s, chunks);
}
