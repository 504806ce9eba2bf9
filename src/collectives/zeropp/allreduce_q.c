/*
 * allreduce_q.c - the quantized all-reduce (qcclAllReduceQ), built from
 * the two ZeRO++ collectives: the count elements, zero-padded to W x rc
 * (rc = ceil(count / W)), are reduce-scattered by qgZ (intra hop, inter
 * hop, error feedback as configured), then the W reduced shards are
 * all-gathered by qwZ under the inter spec, so every rank ends with the
 * same bits. Bytes per rank across nodes: qgZ's (N-1) rc plus qwZ's
 * gather of rc, both at the inter width. The error is qgZ's bound plus the
 * gather's quantization bound of the reduced shard.
 */
#include <string.h>

#include "collectives/coll.h"
#include "core/dtype.h"
#include "core/log.h"
#include "collectives/zeropp/zpp.h"

qcclResult_t zpp_allreduce_q(qcclComm_t comm, const void* send, void* recv, size_t count,
                             qcclDataType_t dt, qcclRedOp_t op, const quant_params_t* intra,
                             const quant_params_t* inter, float* residual) {
  size_t w = (size_t)comm->nranks, es = dtype_size(dt);
  size_t rc = (count + w - 1) / w;
  char* shard;
  QCCL_CHECK(zpp_scratch(comm, 5, rc * es, (void**)&shard));
  /* a count that W divides needs no padding: sendbuff is the input as it
   * is (read before recvbuff is written, so in place works too) */
  if (w * rc == count) {
    QCCL_CHECK(zpp_reducescatter_q(comm, send, shard, rc, dt, op, intra, inter, residual));
    return zpp_allgather_q(comm, shard, recv, rc, dt, inter, NULL, 0);
  }
  char* in;
  QCCL_CHECK(zpp_scratch(comm, 4, w * rc * es, (void**)&in));
  memcpy(in, send, count * es);
  memset(in + count * es, 0, (w * rc - count) * es);
  QCCL_CHECK(zpp_reducescatter_q(comm, in, shard, rc, dt, op, intra, inter, residual));
  QCCL_CHECK(zpp_allgather_q(comm, shard, in, rc, dt, inter, NULL, 0));
  memcpy(recv, in, count * es);
  return qcclSuccess;
}

qcclResult_t qcclAllReduceQ(const void* sendbuff, void* recvbuff, size_t count,
                            qcclDataType_t datatype, qcclRedOp_t op,
                            const qcclReduceScatterQConfig_t* cfg, qcclComm_t comm,
                            qcclStream_t stream) {
  err_clear();
  zpp_op_t o;
  qcclResult_t r = zpp_rsq_check("qcclAllReduceQ", sendbuff, recvbuff, count, 0, datatype, op, cfg,
                                 comm, stream, &o);
  if (r != qcclSuccess) return zpp_fail(comm, r);
  o.kind = ZPP_ARQ;
  o.slot = qcclStatAllReduceQ;
  return zpp_submit(comm, &o);
}
