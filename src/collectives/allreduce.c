/*
 * allreduce.c - AllReduce through a host's shared segment.
 *
 * The buffer is cut into chunks of chunk_bytes; part l of every chunk
 * belongs to local rank l. Each chunk goes through three phases, double-
 * buffered so chunk g+1 is staged while chunk g is still being read:
 *   1. every rank copies the parts of its chunk that others reduce into its
 *      slot (copy in once; its own part stays in sendbuff);
 *   2. rank l reduces part l over the L ranks, in rank order, into its
 *      result area (reduce once, by one rank) and copies it to recvbuff;
 *   3. every rank copies the other L-1 reduced parts to recvbuff (copy out
 *      once).
 * Buffers from qcclMemAlloc are published instead (shm_map.c), each by its
 * owner for itself: a published sendbuff is not staged, its reducers read
 * their parts from it in place in phase 2; from a published recvbuff the
 * peers copy the reduced part in phase 3, not from the result area. Each
 * byte then goes from memory to memory once per phase, never through
 * another core's cache: on a VM whose two vCPUs may sit on cores without
 * a shared cache (the cache-to-cache handoff measured 2-3 GB/s there
 * against 6-14 GB/s on a shared one, docs/PERF.md) this keeps large calls
 * at memory speed. Published buffers are read by peers until all
 * ranks finish, so the call ends with a wait on all.
 * Per rank and per byte: (L-1)/L written into the segment, the reduction
 * reads 1/L from each rank, one byte read out. Each part's final value is
 * computed once and copied, so results are bitwise identical on all ranks.
 * Chunks are small enough that the segment stays in cache; large calls
 * write the staged chunks, the result areas and recvbuff with streaming
 * stores instead (no read-for-ownership, and readers fetch from memory
 * rather than from another core's cache: shm.h). The two-level
 * AllReduce across hosts (hier_allreduce.c) uses the same phases.
 *
 * Single copy (cma.h): a buffer that is not qcclMemAlloc memory, in a
 * call of CMA_ALLREDUCE_MAX_BYTES or less on at most
 * CMA_ALLREDUCE_MAX_RANKS ranks, whose parts reach CMA_ALLREDUCE_MIN_BLOCK
 * and CMA's threshold, is
 * offered to the peers instead of staged (sendbuff) or doubled in the
 * result area (recvbuff): in phase 2 the reducer of part l reads it from
 * each peer's sendbuff with process_vm_readv (into recvbuff's part on 2
 * ranks out of place, else into a private buffer) and reduces it with its
 * own, writing the result to recvbuff only; in phase 3 the peers read it
 * from there the same way. Each rank decides for its own buffers inside
 * the chunk sequence, as with qcclMemAlloc buffers, so ranks may differ.
 */
#include "collectives/allreduce_chunk.h"
#include "collectives/coll.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "transport/cma.h"

qcclResult_t coll_allreduce(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank;
  size_t es = dtype_size(a->datatype);
  if (w == 1) {
    coll_copy(a->recvbuff, a->sendbuff, a->count * es);
    return qcclSuccess;
  }
  if (coll_allreduce_oneshot_fits(comm, a->count * es)) return coll_allreduce_oneshot(comm, a);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  int stream = a->count * es >= COPY_STREAM_MIN_TOTAL;
  int nt = shm_handoff_nt(s, a->count * es);
  size_t per_chunk = s->chunk_bytes / es;
  shm_reg_t in_reg, out_reg;
  int in_pub = shm_reg_find(s, in, a->count * es, &in_reg);
  int out_pub = shm_reg_find(s, out, a->count * es, &out_reg);
  /* single copy for plain buffers (cma.h): the block is one part of the
   * first chunk, what a reader reads from one peer at once */
  size_t first = a->count < per_chunk ? a->count * es : per_chunk * es;
  int cma_ok = w <= CMA_ALLREDUCE_MAX_RANKS && a->count * es <= CMA_ALLREDUCE_MAX_BYTES &&
               first / (size_t)w >= CMA_ALLREDUCE_MIN_BLOCK;
  int in_cma = !in_pub && cma_ok && cma_offer(s, in, first / (size_t)w, 0, &in_reg);
  int out_cma = !out_pub && cma_ok && cma_offer(s, out, first / (size_t)w, 0, &out_reg);
  char* scratch = NULL; /* large calls reduce here first */
  if (stream || nt) QCCL_CHECK(shm_scratch(s, &scratch));
  char* peer_tmp = NULL; /* the parts read single copy, when not into recvbuff */
  const void* srcs[w];
  const char* peer_out[w];
  uint64_t g = 0;
  for (size_t off = 0; off < a->count; off += per_chunk) {
    size_t m = a->count - off < per_chunk ? a->count - off : per_chunk;
    size_t lo, hi;
    coll_part(m, w, r, &lo, &hi);
    QCCL_CHECK(shm_chunk_begin(s, &g));
    const char* src = in + off * es;
    shm_reg_publish(s, g, SHM_REG_IN, &in_reg);
    shm_reg_publish(s, g, SHM_REG_OUT, &out_reg);
    if (!in_pub && !in_cma) ar_chunk_stage(s, g, src, m, lo, hi, es, nt);
    shm_post(s, 3 * g + 1);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 1));
    for (int j = 0; j < w; j++) {
      const char* p = NULL;
      uintptr_t at;
      if (j != r && shm_reg_peer_cma(s, j, g, SHM_REG_IN, &at)) {
        /* single copy: into recvbuff's part when it is the only one read
         * there and does not hold this rank's input, else privately */
        char* dst = out + (off + lo) * es;
        if (w > 2 || out == in) {
          if (peer_tmp == NULL)
            QCCL_CHECK(comm_scratch(comm, 0, (size_t)w * (per_chunk / (size_t)w + 1) * es,
                                    (void**)&peer_tmp));
          dst = peer_tmp + (size_t)j * (per_chunk / (size_t)w + 1) * es;
        }
        QCCL_CHECK(cma_read_from(s, j, at + (off + lo) * es, dst, (hi - lo) * es));
        srcs[j] = dst;
      } else {
        if (j != r) QCCL_CHECK(shm_reg_peer(s, j, g, SHM_REG_IN, a->count * es, &p));
        srcs[j] = j == r      ? src + lo * es
                  : p != NULL ? p + (off + lo) * es
                              : shm_slot(s, j, g) + lo * es;
      }
      peer_out[j] = NULL;
      if (j != r) QCCL_CHECK(shm_reg_peer(s, j, g, SHM_REG_OUT, a->count * es, &peer_out[j]));
    }
    char* res = shm_result(s, r, g);
    coll_stats_shm(comm, m * es); /* its slot but its part, and its result */
    if (out_cma) {
      /* the peers read the result from recvbuff (reduce_kernel allows dst
       * to be a source at the same offset: the part read there) */
      reduce_kernel(out + (off + lo) * es, srcs, w, hi - lo, a->datatype, a->op, w);
    } else if (scratch != NULL) {
      /* reduce in cache, then write recvbuff and, for the peers, the result
       * area (unless they read recvbuff), streaming where shm.h says */
      reduce_kernel(scratch, srcs, w, hi - lo, a->datatype, a->op, w);
      copy_out(out + (off + lo) * es, scratch, (hi - lo) * es, stream || (nt && out_pub));
      if (!out_pub) copy_out(res, scratch, (hi - lo) * es, nt);
    } else {
      reduce_kernel(res, srcs, w, hi - lo, a->datatype, a->op, w);
      memcpy(out + (off + lo) * es, res, (hi - lo) * es);
    }
    shm_post(s, 3 * g + 2);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 2));
    for (int k = 1; k < w; k++) { /* the results published single copy */
      int j = (r + k) % w;
      uintptr_t at;
      if (!shm_reg_peer_cma(s, j, g, SHM_REG_OUT, &at)) continue;
      size_t jl, jh;
      coll_part(m, w, j, &jl, &jh);
      QCCL_CHECK(cma_read_from(s, j, at + (off + jl) * es, out + (off + jl) * es, (jh - jl) * es));
      peer_out[j] = AR_CHUNK_DONE;
    }
    ar_chunk_copy_results(s, g, out + off * es, m, es, stream, peer_out, off * es);
    shm_post(s, 3 * g + 3);
  }
  /* published buffers are read in place: they must outlive every reader */
  if (in_pub || out_pub || in_cma || out_cma) QCCL_CHECK(shm_wait_all(s, 3 * g + 3));
  return qcclSuccess;
}
