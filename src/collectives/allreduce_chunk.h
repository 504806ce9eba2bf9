/*
 * allreduce_chunk.h - the two data phases of a chunk of the shared-memory
 * AllReduce (allreduce.c), which the two-level AllReduce (hier_allreduce.c)
 * runs around its rail stage. Part j of a chunk of m elements is
 * coll_part(m, W, j); local rank j reduces it.
 */
#ifndef QCCL_COLLECTIVES_ALLREDUCE_CHUNK_H_
#define QCCL_COLLECTIVES_ALLREDUCE_CHUNK_H_

#include "collectives/coll.h"
#include "core/memcopy.h"

/* Phase 1: stages the m elements at src into this rank's slot of chunk g
 * (rot bytes into it: shm_rot), but its own part [lo, hi), which it
 * reduces from src directly; with streaming stores in large calls and
 * where ordinary ones run slow (a call of call_bytes: shm_handoff_copy). */
static inline void ar_chunk_stage(shm_t* s, uint64_t g, size_t rot, const char* src, size_t m,
                                  size_t lo, size_t hi, size_t es, size_t call_bytes) {
  char* slot = shm_slot(s, s->rank, g) + rot;
  shm_handoff_copy(s, slot, src, lo * es, call_bytes);
  shm_handoff_copy(s, slot + hi * es, src + hi * es, (m - hi) * es, call_bytes);
}

/* peer_out[j] of a part the caller has copied already */
#define AR_CHUNK_DONE ((const char*)1)

/* Phase 3: copies the other ranks' reduced parts of chunk g to out (the
 * chunk's place in recvbuff): from their result areas (rot bytes in), or, where peer_out
 * is given and peer_out[j] is not NULL, from the same place of rank j's
 * recvbuff (qcclMemAlloc memory it published; the chunk starts `at` bytes
 * into it); none where peer_out[j] is AR_CHUNK_DONE. */
static inline void ar_chunk_copy_results(shm_t* s, uint64_t g, size_t rot, char* out, size_t m,
                                         size_t es, int stream, const char* const* peer_out,
                                         size_t at) {
  int w = s->nranks, r = s->rank;
  for (int k = 1; k < w; k++) {
    int j = (r + k) % w;
    if (peer_out != NULL && peer_out[j] == AR_CHUNK_DONE) continue;
    size_t jl, jh;
    coll_part(m, w, j, &jl, &jh);
    const char* src = peer_out != NULL && peer_out[j] != NULL ? peer_out[j] + at + jl * es
                                                              : shm_result(s, j, g) + rot;
    copy_out(out + jl * es, src, (jh - jl) * es, stream);
  }
}

#endif /* QCCL_COLLECTIVES_ALLREDUCE_CHUNK_H_ */
