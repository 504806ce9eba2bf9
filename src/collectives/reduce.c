/*
 * reduce.c - Reduce to a root inside one node.
 *
 * As AllReduce (allreduce.c) without the final all-gather: every rank
 * stages its chunk but its own part (which only it reads), rank r reduces
 * part r over its sendbuff and the others' slots into its result area,
 * the root straight into recvbuff, and only the root copies the W-1 other
 * reduced parts out. The work of the reduction is spread over all ranks
 * instead of falling on the root, and the result is the same bits
 * AllReduce gives. Only the root waits for every rank at the end; the
 * others return once their parts are posted.
 *
 * Single copy (cma.h, cma_reduce_use): on 2 ranks a sendbuff that is not
 * qcclMemAlloc memory is offered instead of staged, and each rank reads
 * the other's part of it with process_vm_readv before reducing its own.
 * A rank that offered its
 * buffer returns only once both have posted the last chunk (it is read
 * until then).
 * Each rank decides for its own buffer; readers follow what each
 * published.
 */
#include "collectives/coll.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "transport/cma.h"

qcclResult_t coll_reduce(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank, root = a->root;
  size_t es = dtype_size(a->datatype);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  if (w == 1) {
    coll_copy(out, in, a->count * es);
    return qcclSuccess;
  }
  size_t per_chunk = s->chunk_bytes / es;
  /* single copy: the block is a part of the first chunk */
  size_t first = a->count < per_chunk ? a->count * es : per_chunk * es;
  shm_reg_t reg = {0, 0, -1}, mapped;
  int cma = cma_reduce_use(s, w, a->count * es, first / (size_t)w) &&
            !shm_reg_find(s, in, a->count * es, &mapped) &&
            cma_offer(s, in, first / (size_t)w, 0, &reg);
  char* peer_tmp = NULL;
  const void* srcs[w];
  size_t chunks = 0;
  for (size_t off = 0; off < a->count; off += per_chunk) {
    size_t m = a->count - off < per_chunk ? a->count - off : per_chunk;
    uint64_t g;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    shm_reg_publish(s, g, SHM_REG_IN, &reg);
    size_t lo, hi;
    coll_part(m, w, r, &lo, &hi);
    if (!cma) { /* all but the own part, which only this rank reads */
      memcpy(shm_slot(s, r, g), in + off * es, lo * es);
      memcpy(shm_slot(s, r, g) + hi * es, in + (off + hi) * es, (m - hi) * es);
    }
    shm_post(s, 3 * g + 1);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 1));
    for (int j = 0; j < w; j++) {
      uintptr_t at;
      if (j != r && shm_reg_peer_cma(s, j, g, SHM_REG_IN, &at)) {
        if (peer_tmp == NULL)
          QCCL_CHECK(comm_scratch(comm, 0, (per_chunk / (size_t)w + 1) * es, (void**)&peer_tmp));
        QCCL_CHECK(cma_read_from(s, j, at + (off + lo) * es, peer_tmp, (hi - lo) * es));
        srcs[j] = peer_tmp;
      } else {
        srcs[j] = j == r ? in + (off + lo) * es : shm_slot(s, j, g) + lo * es;
      }
    }
    /* the root's own part straight into recvbuff (in place, it is srcs[r]
     * at the same offsets, which the kernel allows) */
    char* dst = r == root ? out + (off + lo) * es : shm_result(s, r, g);
    reduce_kernel(dst, srcs, w, hi - lo, a->datatype, a->op, w);
    /* the others read its slot but its own part, and root its result */
    coll_stats_shm(comm, (m - (hi - lo) + (r != root ? hi - lo : 0)) * es);
    shm_post(s, 3 * g + 2);
    if (r == root) {
      QCCL_CHECK(shm_wait_all(s, 3 * g + 2));
      for (int j = 0; j < w; j++) {
        if (j == r) continue;
        coll_part(m, w, j, &lo, &hi);
        copy_out(out + (off + lo) * es, shm_result(s, j, g), (hi - lo) * es,
                 a->count * es >= COPY_STREAM_MIN_TOTAL);
      }
    }
    shm_post(s, 3 * g + 3);
    chunks++;
  }
  /* only the root waits for every rank at the end: the others are done once
   * their parts are posted, their slots and result areas being guarded by
   * the next call's shm_chunk_begin (MPI's eager reduce); a buffer read
   * single copy must outlive its reader */
  if (r != root && !cma) return qcclSuccess;
  return coll_rooted_end(s, chunks);
}
