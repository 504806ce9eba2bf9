/*
 * hier_allreduce.c - two-level AllReduce for communicators across hosts
 * with L ranks on each of N hosts.
 *
 * The single-host algorithm (allreduce.c) with an inter-node stage in the
 * middle of every chunk: the ranks of a host stage the chunk in their
 * segment and local rank l reduces part l over the host; then the N ranks
 * of local index l (one per host, the "rail") all-reduce that part with
 * the ring of flat_allreduce.c over UCX; then every local rank copies the
 * L parts out. Per rank, the network carries 2(N-1)/N of 1/L of the buffer
 * - 1/L of what a flat ring over all W ranks would put on it when ranks
 * are interleaved - and each host's link carries L such rails in parallel.
 * Every part's final value is computed identically by the rail's ring and
 * copied, so all ranks get the same bits. Narrow floats use the flat ring
 * instead (their host-level partial sums would be rounded twice).
 */
#include "collectives/coll.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/memcopy.h"

qcclResult_t hier_allreduce(qcclComm_t comm, const coll_args_t* a) {
  qcclComm_t node = comm->node, rail = comm->rail;
  shm_t* s = node->shm;
  int l = node->rank, nl = node->nranks;
  size_t es = dtype_size(a->datatype);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  qcclRedOp_t op = a->op == qcclAvg ? qcclSum : a->op;
  int stream = a->count * es >= COPY_STREAM_MIN_TOTAL;
  size_t per_chunk = s->chunk_bytes / es;
  const void* srcs[nl];
  for (size_t off = 0; off < a->count; off += per_chunk) {
    size_t m = a->count - off < per_chunk ? a->count - off : per_chunk;
    size_t lo, hi;
    coll_part(m, nl, l, &lo, &hi);
    uint64_t g;
    QCCL_CHECK(shm_chunk_begin(s, &g));
    char* slot = shm_slot(s, l, g);
    const char* src = in + off * es;
    memcpy(slot, src, lo * es);
    memcpy(slot + hi * es, src + hi * es, (m - hi) * es);
    shm_post(s, 3 * g + 1);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 1));
    for (int j = 0; j < nl; j++) srcs[j] = (j == l ? src : shm_slot(s, j, g)) + lo * es;
    char* res = shm_result(s, l, g);
    reduce_kernel(res, srcs, nl, hi - lo, a->datatype, op, 0);
    QCCL_CHECK(flat_ring_allreduce(rail, res, res, hi - lo, a->datatype, op));
    if (a->op == qcclAvg) {
      const void* own[1] = {res};
      reduce_kernel(res, own, 1, hi - lo, a->datatype, qcclAvg, comm->nranks);
    }
    copy_out(out + (off + lo) * es, res, (hi - lo) * es, stream);
    shm_post(s, 3 * g + 2);
    QCCL_CHECK(shm_wait_all(s, 3 * g + 2));
    for (int k = 1; k < nl; k++) {
      int j = (l + k) % nl;
      size_t jl, jh;
      coll_part(m, nl, j, &jl, &jh);
      copy_out(out + (off + jl) * es, shm_result(s, j, g), (jh - jl) * es, stream);
    }
    shm_post(s, 3 * g + 3);
  }
  return qcclSuccess;
}
