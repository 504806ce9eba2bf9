/*
 * allgather.c - AllGather inside one node.
 *
 * Two algorithms, chosen by the block size (the same on every rank):
 *
 * Two copy (blocks below the segment's single-copy threshold, or no CMA):
 * each rank's contribution is cut into chunks of chunk_bytes. For chunk g
 * every rank copies its piece into its slot, then copies the W-1 other
 * pieces out of the peers' slots into its output (its own piece goes
 * straight from sendbuff, or stays put in place). The slots stay in cache,
 * so memory sees each byte about once, but every byte is copied twice.
 *
 * Shared (shared_copy.c; every buffer of every rank in qcclMemAlloc memory
 * and the output at least QCCL_SHM_SHARE_BYTES): the ranks copy the blocks
 * straight between the buffers, each claiming tasks from any rank's
 * output until all are done. Otherwise, with sendbuffs in qcclMemAlloc
 * memory, the two-copy schedule below reads each peer's block in place
 * instead of from its slot.
 *
 * Single copy (cma.h): every rank publishes its sendbuff, then reads each
 * peer's block straight into its recvbuff with process_vm_readv, starting
 * with the next rank so that readers spread over the owners. One chunk of
 * the segment, two steps: published (3g+1), done (3g+3). Per rank: W-1
 * blocks read from the peers and its own copied, each byte once.
 */
#include "collectives/coll.h"
#include "collectives/shared_copy.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "transport/cma.h"

static qcclResult_t allgather_cma(qcclComm_t comm, const char* in, char* out, size_t bytes,
                                  int stream) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank;
  uint64_t g;
  QCCL_CHECK(cma_begin(s, in, &g));
  /* the own block while the peers arrive */
  if (out + (size_t)r * bytes != in) copy_out(out + (size_t)r * bytes, in, bytes, stream);
  for (int k = 1; k < w; k++) {
    int j = (r + k) % w;
    QCCL_CHECK(cma_read(s, j, g, 0, out + (size_t)j * bytes, bytes));
  }
  coll_stats_shm(comm, (size_t)(w - 1) * bytes); /* what the peers read from it */
  return cma_end(s, g);
}

qcclResult_t coll_allgather(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank;
  size_t bytes = a->count * dtype_size(a->datatype);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  int stream = bytes * (size_t)w >= COPY_STREAM_MIN_TOTAL;
  if (w > 1 && cma_use(s, bytes)) return allgather_cma(comm, in, out, bytes, stream);
  if (w == 1) {
    if (out != in) copy_out(out, in, bytes, stream);
    return qcclSuccess;
  }
  /* qcclMemAlloc memory: the peers read it where it is (shm_map.c) */
  shm_reg_t reg;
  int direct = shm_reg_find(s, in, bytes, &reg);
  share_job_t job = {in, out, bytes, 0};
  uint64_t g = 0;
  for (size_t off = 0; off < bytes; off += s->chunk_bytes) {
    size_t m = bytes - off < s->chunk_bytes ? bytes - off : s->chunk_bytes;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    shm_reg_publish(s, g, SHM_REG_IN, &reg);
    int offered = off == 0 && share_offer(comm, g, &job, direct);
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
      QCCL_CHECK(shm_wait_rank(s, j, 3 * g + 1));
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
