/*
 * qccl_nccl.h - what qccl's drop-in libnccl.so.2 exports beyond NCCL's
 * API, for programs that know they may run on it (and for its tests).
 *
 * With qccl's library the NCCL communicator is a qccl communicator
 * underneath; qcclCommFromNccl gives it, so the program can read its
 * traffic counters (qcclCommGetStats: which calls a QCCL_POLICY
 * quantized), set a policy (qcclCommSetPolicy) or call a ZeRO++ collective
 * on the same ranks. A program that must also run on NVIDIA's library looks
 * the symbol up at run time (dlsym(RTLD_DEFAULT, "qcclCommFromNccl")):
 * NVIDIA's library does not have it.
 */
#ifndef QCCL_NCCL_H_
#define QCCL_NCCL_H_

#include "qccl.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

struct ncclComm; /* ncclComm_t is struct ncclComm* */

/* Writes the qccl communicator behind comm (an ncclComm_t of qccl's
 * libnccl) to *qcomm. It belongs to comm: ncclCommDestroy frees it.
 * qcclInvalidArgument if comm is NULL or not a live communicator. */
qcclResult_t qcclCommFromNccl(struct ncclComm* comm, qcclComm_t* qcomm);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QCCL_NCCL_H_ */
