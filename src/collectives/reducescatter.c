/*
 * reducescatter.c - ReduceScatter inside one node.
 *
 * Block j of sendbuff (recvcount elements) is reduced over all ranks into
 * rank j's recvbuff. Chunks hold W pieces of m elements, piece j from
 * block j: every rank stages the W-1 pieces that others reduce in its slot
 * (its own piece stays in sendbuff), then rank r reduces piece r over the W
 * ranks, in rank order, straight from the slots and its own sendbuff. Per
 * rank and per byte of sendbuff: (W-1)/W written into the segment and read
 * back once, 1/W written out. Small calls keep the segment in cache, so
 * memory sees each input byte read once and each output byte written once,
 * the least a reduce-scatter can move; large ones stage with streaming
 * stores, so the reducer reads from memory, not from another core's cache
 * (shm.h), and reduce into the (cached) result area, written out with
 * streaming stores.
 *
 * With a sendbuff from qcclMemAlloc the staging goes too: every rank
 * publishes its sendbuff and the reducer of piece r reads it from each
 * peer's memory in place (shm_map.c), so each byte is copied once, by the
 * reduction; such a sendbuff is read until every rank has finished.
 */
#include "collectives/coll.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/memcopy.h"

qcclResult_t coll_reducescatter(qcclComm_t comm, const coll_args_t* a) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank;
  size_t es = dtype_size(a->datatype);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  if (w == 1) {
    coll_copy(out, in, a->count * es);
    return qcclSuccess;
  }
  int stream = a->count * es >= COPY_STREAM_MIN_TOTAL;
  size_t per_piece = s->chunk_bytes / es / (size_t)w;
  if (per_piece == 0) per_piece = 1; /* chunk_bytes >= 4096 and W small: never hit */
  const void* srcs[w];
  shm_reg_t reg;
  int direct = shm_reg_find(s, in, a->count * (size_t)w * es, &reg);
  uint64_t g = 0;
  for (size_t off = 0; off < a->count; off += per_piece) {
    size_t m = a->count - off < per_piece ? a->count - off : per_piece;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    char* slot = shm_slot(s, r, g);
    shm_reg_publish(s, g, SHM_REG_IN, &reg);
    if (!direct) {
      for (int j = 0; j < w; j++)
        if (j != r)
          copy_out(slot + (size_t)j * m * es, in + ((size_t)j * a->count + off) * es, m * es,
                   shm_handoff_nt(s, a->count * (size_t)w * es));
    }
    coll_stats_shm(comm, (size_t)(w - 1) * m * es);
    shm_post(s, 3 * g + 1);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 1));
    for (int j = 0; j < w; j++) {
      size_t at = ((size_t)r * a->count + off) * es; /* piece r in block r of sendbuff */
      if (j == r) {
        srcs[j] = in + at;
        continue;
      }
      const char* p; /* the peer's sendbuff, where readable in place */
      QCCL_CHECK(shm_reg_peer(s, j, g, SHM_REG_IN, a->count * (size_t)w * es, &p));
      srcs[j] = p != NULL ? p + at : shm_slot(s, j, g) + (size_t)r * m * es;
    }
    if (stream) {
      /* reduce in cache, then one streaming write to memory */
      char* res = shm_result(s, r, g);
      reduce_kernel(res, srcs, w, m, a->datatype, a->op, w);
      copy_stream(out + off * es, res, m * es);
    } else {
      reduce_kernel(out + off * es, srcs, w, m, a->datatype, a->op, w);
    }
    shm_post(s, 3 * g + 3);
  }
  /* sendbuff is read in place: it must outlive every reader */
  if (direct) QCCL_CHECK(shm_wait_all(s, 3 * g + 3));
  return qcclSuccess;
}
