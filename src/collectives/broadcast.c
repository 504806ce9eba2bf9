/*
 * broadcast.c - Broadcast from a root inside one node.
 *
 * The root copies each chunk into its slot once; every other rank copies
 * it out once. The root runs up to two chunks ahead (double buffering), so
 * staging and reading overlap; it returns as soon as it has staged the last
 * chunk, and each other rank once it has read it (the slots are reused only
 * after every rank has read them: shm_chunk_begin). Bytes: the root writes
 * the buffer once, each other rank reads it once.
 *
 * Single copy (cma.h): a root whose sendbuff is not qcclMemAlloc memory, in
 * a call of CMA_BROADCAST_MIN_BYTES to CMA_BROADCAST_MAX_BYTES (and from
 * CMA's threshold) on at most CMA_BROADCAST_MAX_RANKS ranks, publishes its
 * address at every chunk instead of staging; each other rank reads the
 * whole buffer with process_vm_readv at the first chunk and only keeps
 * step at the later ones, and the root returns only once every rank has
 * posted the last chunk (its buffer must outlive the reads). The chunk
 * sequence is the same either way; the others follow what the root
 * published.
 */
#include "collectives/coll.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "transport/cma.h"

qcclResult_t coll_broadcast(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int r = comm->rank, root = a->root;
  size_t es = dtype_size(a->datatype);
  size_t bytes = a->count * es;
  if (r == root) coll_copy(a->recvbuff, a->sendbuff, bytes);
  if (comm->nranks == 1) return qcclSuccess;
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  /* always published (id 0: staged), so that no reader follows an older
   * call's address */
  shm_reg_t reg = {0, 0, -1}, mapped;
  int cma = r == root && comm->nranks <= CMA_BROADCAST_MAX_RANKS &&
            bytes >= CMA_BROADCAST_MIN_BYTES && !shm_reg_find(s, in, bytes, &mapped) &&
            cma_offer(s, in, bytes, CMA_BROADCAST_MAX_BYTES, &reg);
  int have_all = 0; /* a reader that read everything single copy */
  size_t chunks = 0;
  for (size_t off = 0; off < bytes; off += s->chunk_bytes, chunks++) {
    size_t m = bytes - off < s->chunk_bytes ? bytes - off : s->chunk_bytes;
    uint64_t g;
    if (r == root) {
      QCCL_CHECK(shm_chunk_begin(s, &g));
      shm_reg_publish(s, g, SHM_REG_IN, &reg);
      if (!cma) memcpy(shm_slot(s, root, g), in + off, m);
      coll_stats_shm(comm, m);
      shm_post(s, 3 * g + 3);
    } else {
      g = s->chunk_seq++;
      QCCL_CHECK(shm_wait_rank(s, root, 3 * g + 1));
      uintptr_t at;
      if (!have_all && shm_reg_peer_cma(s, root, g, SHM_REG_IN, &at)) {
        QCCL_CHECK(cma_read_from(s, root, at, out, bytes));
        have_all = 1;
      }
      if (!have_all) copy_out(out + off, shm_slot(s, root, g), m, bytes >= COPY_STREAM_MIN_TOTAL);
      shm_post(s, 3 * g + 3);
    }
  }
  /* only a buffer read in place must outlive its readers; a staged slot is
   * guarded by the next call's shm_chunk_begin, so no rank waits for the
   * others at the end (MPI's eager broadcast) */
  if (r == root && cma) return coll_rooted_end(s, chunks);
  return qcclSuccess;
}
