/*
 * check.c - the argument checks shared by the public entry points of the
 * collective layer (check.h). They are local and come before any
 * communication, so a bad argument fails its own rank's call only.
 */
#include "collectives/check.h"

#include <stdint.h>

#include "collectives/engine.h"

qcclResult_t check_comm(const char* fn, const struct qcclComm* comm) {
  if (comm == NULL) return QCCL_ERR(qcclInvalidArgument, "%s: comm is NULL", fn);
  if (comm->magic != COMM_MAGIC)
    return QCCL_ERR(qcclInvalidArgument,
                    "%s: comm is not a live communicator (destroyed or aborted?)", fn);
  return qcclSuccess;
}

qcclResult_t check_comm_usable(const char* fn, qcclComm_t comm, qcclStream_t stream, stream_t** s) {
  QCCL_CHECK(check_comm(fn, comm));
  if (comm->finalized) return QCCL_ERR(qcclInvalidUsage, "%s: comm was finalized", fn);
  qcclResult_t e = atomic_load(&comm->async_error);
  if (e != qcclSuccess) {
    engine_tell_peers(comm);
    return QCCL_ERR(e, "%s: comm failed before (%s)%s%.400s", fn, qcclGetErrorString(e),
                    comm->fail_reason[0] ? ": " : "", comm->fail_reason);
  }
  if (s == NULL) return qcclSuccess; /* a call that takes no stream */
  return engine_stream_arg(fn, stream, s);
}

qcclResult_t check_count(const char* fn, const char* what, size_t count, size_t factor, size_t es,
                         size_t max) {
  if ((max > 0 && count > max / factor) || count > (size_t)PTRDIFF_MAX / es / factor)
    return QCCL_ERR(qcclInvalidArgument, "%s: %s=%zu overflows the buffer size (x %zu x %zu bytes)",
                    fn, what, count, factor, es);
  return qcclSuccess;
}

qcclResult_t check_buffers(const char* fn, const char* what, size_t count, const void* sendbuff,
                           const void* recvbuff) {
  if (count > 0 && sendbuff == NULL)
    return QCCL_ERR(qcclInvalidArgument, "%s: sendbuff is NULL with %s=%zu", fn, what, count);
  if (count > 0 && recvbuff == NULL)
    return QCCL_ERR(qcclInvalidArgument, "%s: recvbuff is NULL with %s=%zu", fn, what, count);
  return qcclSuccess;
}
