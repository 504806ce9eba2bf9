/*
 * flat_allreduce.c - AllReduce and Reduce over point-to-point, for
 * communicators that span hosts (any placement, nodes of any size).
 *
 * Ring algorithm: the buffer is cut into W parts. Reduce-scatter: in step
 * s, rank r sends part r-s to r+1 and receives part r-s-1 from r-1, which
 * it reduces into its copy; after W-1 steps rank r holds part r+1 reduced
 * over all ranks. All-gather: W-1 more steps pass the reduced parts
 * around. Each rank sends and receives 2(W-1)/W of the buffer: the
 * bandwidth-optimal amount. Narrow floats (f16, bf16, fp8) travel and
 * accumulate as f32 and are rounded once at the end, as on one host; Avg
 * divides the reduced part by W before it is passed on, so every rank gets
 * the same bits. Reduce runs the same ring into scratch on non-root ranks.
 */
#include "collectives/coll.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"

qcclResult_t flat_ring_allreduce(qcclComm_t c, const void* in, void* out, size_t count,
                                 qcclDataType_t t, qcclRedOp_t op) {
  int w = c->nranks, r = c->rank;
  int next = (r + 1) % w, prev = (r + w - 1) % w;
  qcclDataType_t wt = reduce_work_type(t);
  size_t es = dtype_size(t), wes = dtype_size(wt);
  size_t maxpart = (count + (size_t)w - 1) / (size_t)w;
  size_t workbytes = wt == t ? 0 : count * wes;
  char* scratch;
  QCCL_CHECK(comm_scratch(c, 0, workbytes + maxpart * wes + 1, (void**)&scratch));
  char* work = wt == t ? (char*)out : scratch;
  char* tmp = scratch + workbytes;
  if (wt == t)
    coll_copy(out, in, count * es);
  else
    convert_to_f32((float*)work, in, count, t);
  qcclRedOp_t rop = op == qcclAvg ? qcclSum : op;
  size_t slo, shi, rlo, rhi;
  for (int s = 0; s < w - 1; s++) {
    coll_part(count, w, (r - s + w) % w, &slo, &shi);
    coll_part(count, w, (r - s - 1 + 2 * w) % w, &rlo, &rhi);
    QCCL_CHECK(
        p2p_sendrecv(c, next, work + slo * wes, (shi - slo) * wes, prev, tmp, (rhi - rlo) * wes));
    const void* srcs[2] = {work + rlo * wes, tmp};
    reduce_kernel(work + rlo * wes, srcs, 2, rhi - rlo, wt, rop, 0);
  }
  if (op == qcclAvg) {
    coll_part(count, w, (r + 1) % w, &rlo, &rhi);
    const void* own[1] = {work + rlo * wes};
    reduce_kernel(work + rlo * wes, own, 1, rhi - rlo, wt, qcclAvg, w);
  }
  for (int s = 0; s < w - 1; s++) {
    coll_part(count, w, (r + 1 - s + w) % w, &slo, &shi);
    coll_part(count, w, (r - s + w) % w, &rlo, &rhi);
    QCCL_CHECK(p2p_sendrecv(c, next, work + slo * wes, (shi - slo) * wes, prev, work + rlo * wes,
                            (rhi - rlo) * wes));
  }
  if (wt != t) convert_from_f32(out, (const float*)work, count, t);
  return qcclSuccess;
}

qcclResult_t flat_allreduce(qcclComm_t comm, const coll_args_t* a) {
  return flat_ring_allreduce(comm, a->sendbuff, a->recvbuff, a->count, a->datatype, a->op);
}

qcclResult_t flat_reduce(qcclComm_t comm, const coll_args_t* a) {
  void* out = a->recvbuff;
  if (comm->rank != a->root)
    QCCL_CHECK(comm_scratch(comm, 1, a->count * dtype_size(a->datatype), &out));
  return flat_ring_allreduce(comm, a->sendbuff, out, a->count, a->datatype, a->op);
}
