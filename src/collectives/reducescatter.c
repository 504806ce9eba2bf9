/*
 * reducescatter.c - ReduceScatter inside one node.
 *
 * Block j of sendbuff (recvcount elements) is reduced over all ranks into
 * rank j's recvbuff. Chunks hold W pieces of m elements, piece j from
 * block j: every rank stages its W pieces in its slot, then rank r reduces
 * piece r over the W slots, in rank order, straight into its recvbuff. Per
 * rank and per byte of sendbuff: one write into the segment and one read
 * during the reduction, with no final copy: the least a shared-memory
 * reduce-scatter can move. Large outputs are reduced into the (cached)
 * result area and written out with streaming stores.
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
  for (size_t off = 0; off < a->count; off += per_piece) {
    size_t m = a->count - off < per_piece ? a->count - off : per_piece;
    uint64_t g;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    char* slot = shm_slot(s, r, g);
    for (int j = 0; j < w; j++)
      memcpy(slot + (size_t)j * m * es, in + ((size_t)j * a->count + off) * es, m * es);
    coll_stats_shm(comm, (size_t)(w - 1) * m * es);
    shm_post(s, 3 * g + 1);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 1));
    for (int j = 0; j < w; j++) srcs[j] = shm_slot(s, j, g) + (size_t)r * m * es;
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
  return qcclSuccess;
}
