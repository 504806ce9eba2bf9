/*
 * allgather.c - AllGather inside one node.
 *
 * Each rank's contribution is cut into chunks of chunk_bytes. For chunk g
 * every rank copies its piece into its slot, then copies the W-1 other
 * pieces out of the peers' slots into its output (its own piece goes
 * straight from sendbuff, or stays put in place). Per rank: the
 * contribution is written once into the segment and W-1 pieces read once:
 * the least any shared-memory all-gather can move.
 */
#include "collectives/coll.h"
#include "core/dtype.h"
#include "core/memcopy.h"

qcclResult_t coll_allgather(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank;
  size_t bytes = a->count * dtype_size(a->datatype);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  int stream = bytes * (size_t)w >= COPY_STREAM_MIN_TOTAL;
  if (out + (size_t)r * bytes != in) copy_out(out + (size_t)r * bytes, in, bytes, stream);
  if (w == 1) return qcclSuccess;
  for (size_t off = 0; off < bytes; off += s->chunk_bytes) {
    size_t m = bytes - off < s->chunk_bytes ? bytes - off : s->chunk_bytes;
    uint64_t g;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    memcpy(shm_slot(s, r, g), in + off, m);
    coll_stats_shm(comm, m);
    shm_post(s, 3 * g + 1);
    /* read each peer's piece as soon as that peer has staged it */
    for (int k = 1; k < w; k++) {
      int j = (r + k) % w;
      QCCL_CHECK(shm_wait_rank(s, j, 3 * g + 1));
      copy_out(out + (size_t)j * bytes + off, shm_slot(s, j, g), m, stream);
    }
    shm_post(s, 3 * g + 3);
  }
  return qcclSuccess;
}
