/*
 * scatter.c - Scatter from a root inside one node.
 *
 * Staged: chunks hold W pieces: the root stages piece j of block j for
 * every other rank j in its slot, and each rank copies its own piece out.
 * The root's own block goes straight to its recvbuff (or stays put in
 * place).
 *
 * Single copy (cma.h): a root whose sendbuff is not qcclMemAlloc memory,
 * with blocks in the range cma_scatter_use names, publishes its
 * address at every chunk instead of staging; each other rank reads its
 * whole block with process_vm_readv at the first chunk (the readers at
 * once, where staged the root copies every block alone) and only keeps
 * step at the later ones; that root returns only once every rank has
 * posted the last chunk, so its buffer outlives the reads. Otherwise no
 * rank waits for the others at the end (the next call's shm_chunk_begin
 * guards the slots).
 */
#include "collectives/coll.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "transport/cma.h"

qcclResult_t coll_scatter(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank, root = a->root;
  size_t bytes = a->count * dtype_size(a->datatype);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  if (r == root) coll_copy(out, in + (size_t)root * bytes, bytes);
  if (w == 1) return qcclSuccess;
  /* always published (id 0: staged), so that no reader follows an older
   * call's address */
  shm_reg_t reg = {0, 0, -1}, mapped;
  int cma = r == root && cma_scatter_use(s, w, bytes) &&
            !shm_reg_find(s, in, bytes * (size_t)w, &mapped) && cma_offer(s, in, bytes, 0, &reg);
  int have_all = 0; /* a reader that read its block single copy */
  size_t piece = s->chunk_bytes / (size_t)w;
  size_t chunks = 0;
  for (size_t off = 0; off < bytes; off += piece, chunks++) {
    size_t m = bytes - off < piece ? bytes - off : piece;
    uint64_t g;
    if (r == root) {
      QCCL_CHECK(shm_chunk_begin(s, &g));
      shm_reg_publish(s, g, SHM_REG_IN, &reg);
      char* slot = shm_slot(s, root, g);
      for (int j = 0; j < w && !cma; j++)
        if (j != root) memcpy(slot + (size_t)j * m, in + (size_t)j * bytes + off, m);
      coll_stats_shm(comm, (size_t)(w - 1) * m);
      shm_post(s, 3 * g + 3);
    } else {
      g = s->chunk_seq++;
      QCCL_CHECK(shm_wait_rank(s, root, 3 * g + 1));
      uintptr_t at;
      if (!have_all && shm_reg_peer_cma(s, root, g, SHM_REG_IN, &at)) {
        QCCL_CHECK(cma_read_from(s, root, at + (uintptr_t)r * bytes, out, bytes));
        have_all = 1;
      }
      if (!have_all)
        copy_out(out + off, shm_slot(s, root, g) + (size_t)r * m, m,
                 bytes >= COPY_STREAM_MIN_TOTAL);
      shm_post(s, 3 * g + 3);
    }
  }
  /* only a root read single copy waits for its readers: a staged slot is
   * guarded by the next call's shm_chunk_begin, and a reader is done once
   * it has its block */
  if (!cma) return qcclSuccess;
  return coll_rooted_end(s, chunks);
}
