/*
 * shared_copy.h - AllGather and AlltoAll with the copying shared out among
 * a node's ranks when every buffer comes from qcclMemAlloc (shared_copy.c).
 */
#ifndef QCCL_COLLECTIVES_SHARED_COPY_H_
#define QCCL_COLLECTIVES_SHARED_COPY_H_

#include "collectives/coll.h"

typedef struct {
  const char* in; /* this rank's sendbuff */
  char* out;      /* its recvbuff: W blocks */
  size_t bytes;   /* one block: AllGather's sendbuff, AlltoAll's part per peer */
  int alltoall;   /* 1: block d of rank j's sendbuff goes to rank d; 0: all of it */
} share_job_t;

/* In the call's first chunk g, after shm_chunk_begin and the publication of
 * sendbuff as SHM_REG_IN (in_published: it was found in qcclMemAlloc
 * memory), before posting 3g+1: publishes recvbuff as SHM_REG_OUT when
 * this rank offers to share the call (the output is at least
 * QCCL_SHM_SHARE_BYTES and in qcclMemAlloc memory), "nowhere" otherwise.
 * Returns whether it offered. */
int share_offer(qcclComm_t comm, uint64_t g, const share_job_t* job, int in_published);

/* After posting 3g+1 of the first chunk, offered: what share_offer
 * returned. Copies this rank's own block (when it offered, with peers that
 * arrive first) and, if every rank offered, the rest of the call, shared
 * (*shared = 1; chunk g is then done). Otherwise (*shared = 0) it returns
 * with only the own block copied, after every rank's 3g+1 if it offered,
 * at once if not. */
qcclResult_t share_run(qcclComm_t comm, uint64_t g, const share_job_t* job, int offered,
                       int* shared);

#endif /* QCCL_COLLECTIVES_SHARED_COPY_H_ */
