/*
 * nccl_shim.h - what the files of the drop-in libnccl.so.2 share: the
 * communicator it hands out, its last-error buffer and logger, and the CUDA
 * runtime probe (nccl_cuda.c).
 *
 * The drop-in sits on qccl's public API only (qccl.h): an ncclComm_t points
 * to a small struct ncclComm that holds the qcclComm_t, so a handle from
 * another library or a destroyed one is refused by its magic rather than
 * passed on.
 */
#ifndef NCCL_SHIM_H_
#define NCCL_SHIM_H_

#include <stdint.h>

#include "nccl_abi.h"
#include "qccl.h"

#define NCCL_SHIM_COMM_MAGIC 0x71cc2cc1u
#define NCCL_SHIM_COMM_DEAD 0xdeadcc1du

struct ncclComm {
  uint32_t magic;  /* NCCL_SHIM_COMM_MAGIC while alive */
  qcclComm_t q;    /* the communicator that does the work */
  int cuda_device; /* the CUDA device current at creation (0 without one) */
};

/* Makes the ncclX name a weak alias of pncclX, as NCCL's library does. */
#define NCCL_SHIM_ALIAS(name) extern __typeof(p##name) name __attribute__((weak, alias("p" #name)))

#define SHIM_CHECK(call)                        \
  do {                                          \
    ncclResult_t shim_r_ = (call);              \
    if (shim_r_ != ncclSuccess) return shim_r_; \
  } while (0)

/* Logging to stderr under QCCL_DEBUG (WARN, INFO, TRACE), in qccl's line
 * format with the subsystem NCCL. */
typedef enum { SHIM_LOG_WARN = 1, SHIM_LOG_INFO = 2, SHIM_LOG_TRACE = 3 } shim_log_level_t;
void shim_log(shim_log_level_t level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records a failure of the drop-in itself (message kept for
 * ncclGetLastError, logged at WARN) and returns res. */
ncclResult_t shim_fail(ncclResult_t res, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The NCCL code of a qccl result: identical for NCCL's eight codes;
 * qcclTimeout (a peer did not answer) becomes ncclRemoteError. */
ncclResult_t shim_map_result(qcclResult_t r);

/* Maps the result of a qccl call made for `call`; a failure records
 * "<call>: <qccl's message>" for ncclGetLastError. comm may be NULL. */
ncclResult_t shim_result(const char* call, const struct ncclComm* comm, qcclResult_t r);

/* ncclInvalidArgument naming `call` unless comm is a live communicator. */
ncclResult_t shim_comm_check(const char* call, const struct ncclComm* comm);

/* ncclInvalidUsage naming `call`: something qccl cannot do (reason). */
ncclResult_t shim_unsupported(const char* call, const char* reason);

/* nccl_cuda.c: the CUDA runtime, loaded at run time (never linked). */

/* ncclInvalidArgument naming call and arg if ptr is CUDA device memory;
 * success for NULL, host, pinned, managed memory, or without a device. */
ncclResult_t shim_cuda_host_buffer(const char* call, const char* arg, const void* ptr);

/* Waits for the work queued on stream before the call runs (with a CUDA
 * device); the call itself completes before returning, so work queued
 * after it sees its result. Nothing to do without a device. */
ncclResult_t shim_cuda_stream(const char* call, cudaStream_t stream);

/* The current CUDA device, 0 without one. */
int shim_cuda_device(void);

#endif /* NCCL_SHIM_H_ */
