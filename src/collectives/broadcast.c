/*
 * broadcast.c - Broadcast from a root inside one node.
 *
 * The root copies each chunk into its slot once; every other rank copies
 * it out once. The root runs up to two chunks ahead (double buffering), so
 * staging and reading overlap. Bytes: the root writes the buffer once, each
 * other rank reads it once.
 */
#include "collectives/coll.h"
#include "core/dtype.h"
#include "core/memcopy.h"

qcclResult_t coll_broadcast(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int r = comm->rank, root = a->root;
  size_t es = dtype_size(a->datatype);
  size_t bytes = a->count * es;
  if (r == root) coll_copy(a->recvbuff, a->sendbuff, bytes);
  if (comm->nranks == 1) return qcclSuccess;
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  size_t chunks = 0;
  for (size_t off = 0; off < bytes; off += s->chunk_bytes, chunks++) {
    size_t m = bytes - off < s->chunk_bytes ? bytes - off : s->chunk_bytes;
    uint64_t g;
    if (r == root) {
      QCCL_CHECK(shm_chunk_begin(s, &g));
      memcpy(shm_slot(s, root, g), in + off, m);
      coll_stats_shm(comm, m);
      shm_post(s, 3 * g + 3);
    } else {
      g = s->chunk_seq++;
      QCCL_CHECK(shm_wait_rank(s, root, 3 * g + 1));
      copy_out(out + off, shm_slot(s, root, g), m, bytes >= COPY_STREAM_MIN_TOTAL);
      shm_post(s, 3 * g + 3);
    }
  }
  return coll_rooted_end(s, chunks);
}
