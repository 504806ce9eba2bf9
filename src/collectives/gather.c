/*
 * gather.c - Gather to a root inside one node.
 *
 * Staged: as AllGather, but only the root reads: every rank stages its
 * chunk, the root copies each peer's piece out as soon as it is staged.
 * Non-root ranks run up to two chunks ahead and return once they have
 * posted their last chunk (the next call's shm_chunk_begin guards their
 * slots); the root returns once it has read every chunk.
 *
 * Single copy (cma.h): a rank whose sendbuff is not qcclMemAlloc memory,
 * with blocks in the range cma_gather_use names, publishes its
 * address at every chunk instead of staging, and the root reads that
 * rank's whole block with process_vm_readv at the first chunk (one copy of
 * every byte instead of two). Each rank decides for its own buffer; the
 * root follows what each published. A rank that offered its buffer returns
 * only once all have posted the last chunk, so it outlives its reader.
 */
#include "collectives/coll.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "transport/cma.h"

qcclResult_t coll_gather(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank, root = a->root;
  size_t bytes = a->count * dtype_size(a->datatype);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  if (r == root) coll_copy(out + (size_t)root * bytes, in, bytes);
  if (w == 1) return qcclSuccess;
  /* always published (id 0: staged), so that the root never follows an
   * older call's address */
  shm_reg_t reg = {0, 0, -1}, mapped;
  int cma = r != root && cma_gather_use(s, bytes) && !shm_reg_find(s, in, bytes, &mapped) &&
            cma_offer(s, in, bytes, 0, &reg);
  size_t chunks = 0;
  for (size_t off = 0; off < bytes; off += s->chunk_bytes, chunks++) {
    size_t m = bytes - off < s->chunk_bytes ? bytes - off : s->chunk_bytes;
    uint64_t g;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    if (r != root) {
      shm_reg_publish(s, g, SHM_REG_IN, &reg);
      if (!cma) memcpy(shm_slot(s, r, g), in + off, m);
      coll_stats_shm(comm, m);
      shm_post(s, 3 * g + 3);
      continue;
    }
    shm_post(s, 3 * g + 1);
    for (int k = 1; k < w; k++) {
      int j = (r + k) % w;
      QCCL_CHECK(shm_wait_rank(s, j, 3 * g + 1));
      uintptr_t at;
      if (shm_reg_peer_cma(s, j, g, SHM_REG_IN, &at)) {
        /* single copy: the whole block at the first chunk */
        if (off == 0) QCCL_CHECK(cma_read_from(s, j, at, out + (size_t)j * bytes, bytes));
        continue;
      }
      copy_out(out + (size_t)j * bytes + off, shm_slot(s, j, g), m,
               bytes * (size_t)w >= COPY_STREAM_MIN_TOTAL);
    }
    shm_post(s, 3 * g + 3);
  }
  /* a staged rank is done once it has posted (its slot is guarded by the
   * next call's shm_chunk_begin); a buffer read single copy must outlive
   * the root's read */
  if (r != root && !cma) return qcclSuccess;
  return coll_rooted_end(s, chunks);
}
