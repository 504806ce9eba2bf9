/*
 * allgather.c - AllGather inside one node.
 *
 * Staged (two copies): each rank's contribution is cut into chunks of
 * chunk_bytes. For chunk g every rank copies its piece into its slot, then
 * copies the W-1 other pieces out of the peers' slots into its output (its
 * own piece goes straight from sendbuff, or stays put in place). The slots
 * stay in cache, so memory sees each byte about once, but every byte is
 * copied twice.
 *
 * Shared (shared_copy.c; every buffer of every rank in qcclMemAlloc memory
 * and the output at least QCCL_SHM_SHARE_BYTES): the ranks copy the blocks
 * straight between the buffers, each claiming tasks from any rank's
 * output until all are done. Otherwise, with sendbuffs in qcclMemAlloc
 * memory, the two-copy schedule below reads each peer's block in place
 * instead of from its slot.
 *
 * Single copy (cma.h), inside the same chunks: a rank whose sendbuff is not
 * qcclMemAlloc memory, on 2 ranks, with a block from the single-copy
 * threshold to CMA_ALLGATHER_MAX_BYTES, publishes its sendbuff's address
 * instead of staging it; each peer reads that whole block with
 * process_vm_readv at the first chunk, and the owner returns only once
 * every rank is done. Each rank decides for its own buffer (the chunk
 * sequence is the same whatever they chose).
 */
#include "collectives/coll.h"
#include "collectives/shared_copy.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "transport/cma.h"

qcclResult_t coll_allgather(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank;
  size_t bytes = a->count * dtype_size(a->datatype);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  int stream = bytes * (size_t)w >= COPY_STREAM_MIN_TOTAL;
  if (w == 1) {
    if (out != in) copy_out(out, in, bytes, stream);
    return qcclSuccess;
  }
  /* qcclMemAlloc memory: the peers read it where it is (shm_map.c) */
  shm_reg_t reg;
  int mapped = shm_reg_find(s, in, bytes, &reg);
  /* else, from CMA's threshold: the peers read it single copy */
  int direct = mapped || (w <= CMA_ALLGATHER_MAX_RANKS &&
                          cma_offer(s, in, bytes, CMA_ALLGATHER_MAX_BYTES, &reg));
  share_job_t job = {in, out, bytes, 0};
  uint64_t g = 0;
  for (size_t off = 0; off < bytes; off += s->chunk_bytes) {
    size_t m = bytes - off < s->chunk_bytes ? bytes - off : s->chunk_bytes;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    shm_reg_publish(s, g, SHM_REG_IN, &reg);
    int offered = off == 0 && share_offer(comm, g, &job, mapped);
    if (!direct)
      copy_out(shm_slot(s, r, g), in + off, m, shm_handoff_nt(s, bytes * (size_t)w)); /* shm.h */
    coll_stats_shm(comm, m);
    shm_post(s, 3 * g + 1);
    if (off == 0) {
      int shared; /* the own block; all of it when every rank offered */
      QCCL_CHECK(share_run(comm, g, &job, offered, &shared));
      if (shared) {
        coll_stats_shm(comm, bytes - m);
        return qcclSuccess;
      }
    }
    /* read each peer's piece as soon as that peer has staged it */
    for (int k = 1; k < w; k++) {
      int j = (r + k) % w;
      const char* src;
      uintptr_t at;
      QCCL_CHECK(shm_wait_rank(s, j, 3 * g + 1));
      if (shm_reg_peer_cma(s, j, g, SHM_REG_IN, &at)) {
        /* single copy: the whole block at once */
        if (off == 0) QCCL_CHECK(cma_read_from(s, j, at, out + (size_t)j * bytes, bytes));
        continue;
      }
      QCCL_CHECK(shm_reg_peer(s, j, g, SHM_REG_IN, bytes, &src));
      if (src == NULL)
        copy_out(out + (size_t)j * bytes + off, shm_slot(s, j, g), m, stream);
      else if (off == 0) /* read in place: the whole block at once */
        copy_out(out + (size_t)j * bytes, src, bytes, stream);
    }
    shm_post(s, 3 * g + 3);
  }
  /* sendbuff is read in place: it must outlive every reader */
  if (direct) QCCL_CHECK(shm_wait_all(s, 3 * g + 3));
  return qcclSuccess;
}
