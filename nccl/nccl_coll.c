/*
 * nccl_coll.c - the drop-in's collectives, point-to-point calls, groups and
 * reduction operators: each NCCL call is the qccl call of the same name.
 *
 * Data types and operators pass by value (qccl uses NCCL's numbers; the
 * asserts below and tests/nccl/nccl_abi_check.c hold both to it), so an
 * unknown value is refused by qccl with a message naming the argument.
 *
 * Buffers and streams. qccl takes host memory. Before a call runs, every
 * buffer argument is checked: CUDA device memory (found with
 * cudaPointerGetAttributes, when a CUDA runtime with a device is present)
 * is ncclInvalidArgument naming the call and the argument. The stream is
 * not passed on: qccl runs the call with stream NULL, so it is complete
 * when it returns; with a device present the shim first waits for the work
 * already queued on the stream (cudaStreamSynchronize), so that a copy into
 * the buffer queued before the call is seen. Completing before returning is
 * a valid implementation of NCCL's stream order for host buffers.
 *
 * ncclRedOpCreatePreMulSum and ncclGroupSimulateEnd have no qccl
 * counterpart: ncclInvalidUsage naming the call.
 */
#include "nccl_shim.h"

_Static_assert((int)ncclInt8 == (int)qcclInt8 && (int)ncclUint8 == (int)qcclUint8 &&
                   (int)ncclInt32 == (int)qcclInt32 && (int)ncclUint32 == (int)qcclUint32 &&
                   (int)ncclInt64 == (int)qcclInt64 && (int)ncclUint64 == (int)qcclUint64 &&
                   (int)ncclFloat16 == (int)qcclFloat16 && (int)ncclFloat32 == (int)qcclFloat32 &&
                   (int)ncclFloat64 == (int)qcclFloat64 && (int)ncclBfloat16 == (int)qcclBfloat16 &&
                   (int)ncclFloat8e4m3 == (int)qcclFloat8e4m3 &&
                   (int)ncclFloat8e5m2 == (int)qcclFloat8e5m2 &&
                   (int)ncclNumTypes == (int)qcclNumTypes,
               "data types");
_Static_assert((int)ncclSum == (int)qcclSum && (int)ncclProd == (int)qcclProd &&
                   (int)ncclMax == (int)qcclMax && (int)ncclMin == (int)qcclMin &&
                   (int)ncclAvg == (int)qcclAvg && (int)ncclNumOps == (int)qcclNumOps,
               "reduction operators");

/* The checks every call makes before qccl runs it. */
static ncclResult_t shim_prepare(const char* call, const struct ncclComm* comm, const char* arg1,
                                 const void* buf1, const char* arg2, const void* buf2,
                                 cudaStream_t stream) {
  SHIM_CHECK(shim_comm_check(call, comm));
  if (arg1 != NULL) SHIM_CHECK(shim_cuda_host_buffer(call, arg1, buf1));
  if (arg2 != NULL) SHIM_CHECK(shim_cuda_host_buffer(call, arg2, buf2));
  return shim_cuda_stream(call, stream);
}

#define SHIM_PREPARE_2(call, comm, send, recv, stream) \
  SHIM_CHECK(shim_prepare(call, comm, "sendbuff", send, "recvbuff", recv, stream))

ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream) {
  static const char call[] = "ncclAllReduce";
  SHIM_PREPARE_2(call, comm, sendbuff, recvbuff, stream);
  return shim_result(call, comm,
                     qcclAllReduce(sendbuff, recvbuff, count, (qcclDataType_t)datatype,
                                   (qcclRedOp_t)op, comm->q, NULL));
}
NCCL_SHIM_ALIAS(ncclAllReduce);

ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream) {
  static const char call[] = "ncclBroadcast";
  SHIM_PREPARE_2(call, comm, sendbuff, recvbuff, stream);
  return shim_result(
      call, comm,
      qcclBroadcast(sendbuff, recvbuff, count, (qcclDataType_t)datatype, root, comm->q, NULL));
}
NCCL_SHIM_ALIAS(ncclBroadcast);

ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  static const char call[] = "ncclBcast";
  SHIM_CHECK(shim_prepare(call, comm, "buff", buff, NULL, NULL, stream));
  return shim_result(
      call, comm, qcclBroadcast(buff, buff, count, (qcclDataType_t)datatype, root, comm->q, NULL));
}
NCCL_SHIM_ALIAS(ncclBcast);

ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream) {
  static const char call[] = "ncclReduce";
  SHIM_PREPARE_2(call, comm, sendbuff, recvbuff, stream);
  return shim_result(call, comm,
                     qcclReduce(sendbuff, recvbuff, count, (qcclDataType_t)datatype,
                                (qcclRedOp_t)op, root, comm->q, NULL));
}
NCCL_SHIM_ALIAS(ncclReduce);

ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  static const char call[] = "ncclAllGather";
  SHIM_PREPARE_2(call, comm, sendbuff, recvbuff, stream);
  return shim_result(
      call, comm,
      qcclAllGather(sendbuff, recvbuff, sendcount, (qcclDataType_t)datatype, comm->q, NULL));
}
NCCL_SHIM_ALIAS(ncclAllGather);

ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream) {
  static const char call[] = "ncclReduceScatter";
  SHIM_PREPARE_2(call, comm, sendbuff, recvbuff, stream);
  return shim_result(call, comm,
                     qcclReduceScatter(sendbuff, recvbuff, recvcount, (qcclDataType_t)datatype,
                                       (qcclRedOp_t)op, comm->q, NULL));
}
NCCL_SHIM_ALIAS(ncclReduceScatter);

ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  static const char call[] = "ncclAlltoAll";
  SHIM_PREPARE_2(call, comm, sendbuff, recvbuff, stream);
  return shim_result(
      call, comm, qcclAlltoAll(sendbuff, recvbuff, count, (qcclDataType_t)datatype, comm->q, NULL));
}
NCCL_SHIM_ALIAS(ncclAlltoAll);

ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  static const char call[] = "ncclGather";
  SHIM_PREPARE_2(call, comm, sendbuff, recvbuff, stream);
  return shim_result(
      call, comm,
      qcclGather(sendbuff, recvbuff, count, (qcclDataType_t)datatype, root, comm->q, NULL));
}
NCCL_SHIM_ALIAS(ncclGather);

ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  static const char call[] = "ncclScatter";
  SHIM_PREPARE_2(call, comm, sendbuff, recvbuff, stream);
  return shim_result(
      call, comm,
      qcclScatter(sendbuff, recvbuff, count, (qcclDataType_t)datatype, root, comm->q, NULL));
}
NCCL_SHIM_ALIAS(ncclScatter);

ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream) {
  static const char call[] = "ncclSend";
  SHIM_CHECK(shim_prepare(call, comm, "sendbuff", sendbuff, NULL, NULL, stream));
  return shim_result(call, comm,
                     qcclSend(sendbuff, count, (qcclDataType_t)datatype, peer, comm->q, NULL));
}
NCCL_SHIM_ALIAS(ncclSend);

ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream) {
  static const char call[] = "ncclRecv";
  SHIM_CHECK(shim_prepare(call, comm, "recvbuff", recvbuff, NULL, NULL, stream));
  return shim_result(call, comm,
                     qcclRecv(recvbuff, count, (qcclDataType_t)datatype, peer, comm->q, NULL));
}
NCCL_SHIM_ALIAS(ncclRecv);

ncclResult_t pncclGroupStart(void) {
  return shim_result("ncclGroupStart", NULL, qcclGroupStart());
}
NCCL_SHIM_ALIAS(ncclGroupStart);

ncclResult_t pncclGroupEnd(void) {
  return shim_result("ncclGroupEnd", NULL, qcclGroupEnd());
}
NCCL_SHIM_ALIAS(ncclGroupEnd);

ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  (void)simInfo;
  return shim_unsupported("ncclGroupSimulateEnd",
                          "qccl has no performance model to simulate a group with (the group "
                          "stays open: end it with ncclGroupEnd)");
}
NCCL_SHIM_ALIAS(ncclGroupSimulateEnd);

ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm) {
  (void)op;
  (void)scalar;
  (void)datatype;
  (void)residence;
  (void)comm;
  return shim_unsupported("ncclRedOpCreatePreMulSum",
                          "qccl has no user-defined reduction operators (ncclAvg, or ncclSum of "
                          "pre-scaled inputs, give the same result)");
}
NCCL_SHIM_ALIAS(ncclRedOpCreatePreMulSum);

ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  static const char call[] = "ncclRedOpDestroy";
  SHIM_CHECK(shim_comm_check(call, comm));
  if ((int)op >= 0 && (int)op < (int)ncclNumOps)
    return shim_fail(ncclInvalidArgument, "%s: op %d is a built-in operator", call, (int)op);
  return shim_fail(ncclInvalidArgument,
                   "%s: op %d was not made by ncclRedOpCreatePreMulSum (which qccl's libnccl "
                   "does not support)",
                   call, (int)op);
}
NCCL_SHIM_ALIAS(ncclRedOpDestroy);
