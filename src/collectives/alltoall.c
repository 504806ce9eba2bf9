/*
 * alltoall.c - AlltoAll inside one node.
 *
 * Staged (two copies): chunks hold W pieces of m bytes: every rank stages piece j of its block
 * for rank j in its slot, then reads, from each peer's slot, the piece
 * meant for it. Per rank and per byte: one write into the segment, one
 * read out.
 *
 * Shared (shared_copy.c; every buffer of every rank in qcclMemAlloc memory
 * and the output at least QCCL_SHM_SHARE_BYTES): the ranks copy the parts
 * straight between the buffers, each claiming tasks from any rank's
 * output until all are done. Otherwise, with sendbuffs in qcclMemAlloc
 * memory, the two-copy schedule below reads the pieces in place.
 *
 * Single copy (cma.h), inside the same chunks: a rank whose sendbuff is not
 * qcclMemAlloc memory, with pieces from the single-copy threshold up,
 * publishes its sendbuff's address instead of staging; rank r reads piece
 * r of that peer's sendbuff straight into block j of its recvbuff with
 * process_vm_readv at the first chunk, and the owner returns only once
 * every rank is done. Each rank decides for its own buffer.
 *
 * In both, the own block goes straight from sendbuff to recvbuff.
 */
#include "collectives/coll.h"
#include "collectives/shared_copy.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "transport/cma.h"

qcclResult_t coll_alltoall(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank;
  size_t bytes = a->count * dtype_size(a->datatype); /* per peer */
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  int stream = bytes * (size_t)w >= COPY_STREAM_MIN_TOTAL;
  if (w == 1) {
    copy_out(out, in, bytes, stream);
    return qcclSuccess;
  }
  size_t piece = s->chunk_bytes / (size_t)w;
  /* qcclMemAlloc memory: the peers read their pieces where they are */
  shm_reg_t reg;
  int mapped = shm_reg_find(s, in, bytes * (size_t)w, &reg);
  /* else, from CMA's threshold: the peers read their pieces single copy */
  int direct = mapped || cma_offer(s, in, bytes, 0, &reg);
  share_job_t job = {in, out, bytes, 1};
  uint64_t g = 0;
  for (size_t off = 0; off < bytes; off += piece) {
    size_t m = bytes - off < piece ? bytes - off : piece;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    char* slot = shm_slot(s, r, g);
    shm_reg_publish(s, g, SHM_REG_IN, &reg);
    int offered = off == 0 && share_offer(comm, g, &job, mapped);
    if (!direct) {
      for (int j = 0; j < w; j++)
        if (j != r)
          copy_out(slot + (size_t)j * m, in + (size_t)j * bytes + off, m,
                   shm_handoff_nt(s, bytes * (size_t)w));
    }
    coll_stats_shm(comm, (size_t)(w - 1) * m);
    shm_post(s, 3 * g + 1);
    if (off == 0) {
      int shared; /* the own block; all of it when every rank offered */
      QCCL_CHECK(share_run(comm, g, &job, offered, &shared));
      if (shared) {
        coll_stats_shm(comm, (size_t)(w - 1) * (bytes - m));
        return qcclSuccess;
      }
    }
    for (int k = 1; k < w; k++) {
      int j = (r + k) % w;
      const char* src;
      uintptr_t at;
      QCCL_CHECK(shm_wait_rank(s, j, 3 * g + 1));
      if (shm_reg_peer_cma(s, j, g, SHM_REG_IN, &at)) {
        /* single copy: the whole piece at once */
        if (off == 0)
          QCCL_CHECK(
              cma_read_from(s, j, at + (uintptr_t)r * bytes, out + (size_t)j * bytes, bytes));
        continue;
      }
      QCCL_CHECK(shm_reg_peer(s, j, g, SHM_REG_IN, bytes * (size_t)w, &src));
      if (src == NULL)
        copy_out(out + (size_t)j * bytes + off, shm_slot(s, j, g) + (size_t)r * m, m, stream);
      else if (off == 0) /* read in place: the whole piece at once */
        copy_out(out + (size_t)j * bytes, src + (size_t)r * bytes, bytes, stream);
    }
    shm_post(s, 3 * g + 3);
  }
  /* sendbuff is read in place: it must outlive every reader */
  if (direct) QCCL_CHECK(shm_wait_all(s, 3 * g + 3));
  return qcclSuccess;
}
