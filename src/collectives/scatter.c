/*
 * scatter.c - Scatter from a root inside one node.
 *
 * Chunks hold W pieces: the root stages piece j of block j for every other
 * rank j in its slot, and each rank copies its own piece out. The root's
 * own block goes straight to its recvbuff (or stays put in place).
 */
#include "collectives/coll.h"
#include "core/dtype.h"
#include "core/memcopy.h"

qcclResult_t coll_scatter(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank, root = a->root;
  size_t bytes = a->count * dtype_size(a->datatype);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  if (r == root) coll_copy(out, in + (size_t)root * bytes, bytes);
  if (w == 1) return qcclSuccess;
  size_t piece = s->chunk_bytes / (size_t)w;
  size_t chunks = 0;
  for (size_t off = 0; off < bytes; off += piece, chunks++) {
    size_t m = bytes - off < piece ? bytes - off : piece;
    uint64_t g;
    if (r == root) {
      QCCL_CHECK(shm_chunk_begin(s, &g));
      char* slot = shm_slot(s, root, g);
      for (int j = 0; j < w; j++)
        if (j != root) memcpy(slot + (size_t)j * m, in + (size_t)j * bytes + off, m);
      coll_stats_shm(comm, (size_t)(w - 1) * m);
      shm_post(s, 3 * g + 3);
    } else {
      g = s->chunk_seq++;
      QCCL_CHECK(shm_wait_rank(s, root, 3 * g + 1));
      copy_out(out + off, shm_slot(s, root, g) + (size_t)r * m, m, bytes >= COPY_STREAM_MIN_TOTAL);
      shm_post(s, 3 * g + 3);
    }
  }
  return coll_rooted_end(s, chunks);
}
