/*
 * alltoall.c - AlltoAll inside one node.
 *
 * Chunks hold W pieces of m bytes: every rank stages piece j of its block
 * for rank j in its slot, then reads, from each peer's slot, the piece
 * meant for it. Its own block goes straight from sendbuff to recvbuff.
 * Per rank and per byte: one write into the segment, one read out.
 */
#include "collectives/coll.h"
#include "core/dtype.h"
#include "core/memcopy.h"

qcclResult_t coll_alltoall(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank;
  size_t bytes = a->count * dtype_size(a->datatype); /* per peer */
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  int stream = bytes * (size_t)w >= COPY_STREAM_MIN_TOTAL;
  copy_out(out + (size_t)r * bytes, in + (size_t)r * bytes, bytes, stream);
  if (w == 1) return qcclSuccess;
  size_t piece = s->chunk_bytes / (size_t)w;
  for (size_t off = 0; off < bytes; off += piece) {
    size_t m = bytes - off < piece ? bytes - off : piece;
    uint64_t g;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    char* slot = shm_slot(s, r, g);
    for (int j = 0; j < w; j++)
      if (j != r) memcpy(slot + (size_t)j * m, in + (size_t)j * bytes + off, m);
    coll_stats_shm(comm, (size_t)(w - 1) * m);
    shm_post(s, 3 * g + 1);
    for (int k = 1; k < w; k++) {
      int j = (r + k) % w;
      QCCL_CHECK(shm_wait_rank(s, j, 3 * g + 1));
      copy_out(out + (size_t)j * bytes + off, shm_slot(s, j, g) + (size_t)r * m, m, stream);
    }
    shm_post(s, 3 * g + 3);
  }
  return qcclSuccess;
}
