/*
 * shared_copy.h - AllGather and AlltoAll with the copying shared out among
 * a node's ranks when every buffer comes from qcclMemAlloc (shared_copy.c).
 */
#ifndef QCCL_COLLECTIVES_SHARED_COPY_H_
#define QCCL_COLLECTIVES_SHARED_COPY_H_

#include "collectives/coll.h"

typedef struct {
  const char* in;   /* this rank's sendbuff */
  char* out;        /* its recvbuff: W blocks */
  size_t bytes;     /* one block: AllGather's sendbuff, AlltoAll's part per peer */
  int alltoall;     /* 1: block d of rank j's sendbuff goes to rank d; 0: all of it */
  uint64_t claimed; /* share_own's first task past the own block, for share_rest */
} share_job_t;

/* In the call's first chunk g, after its chunk test and the publication of
 * sendbuff as SHM_REG_IN (in_published: it was found in qcclMemAlloc
 * memory), before posting 3g+1: publishes recvbuff as SHM_REG_OUT when
 * this rank offers to share the call (the output is at least
 * QCCL_SHM_SHARE_BYTES and in qcclMemAlloc memory), "nowhere" otherwise.
 * Returns whether it offered. */
int share_offer(qcclComm_t comm, uint64_t g, const share_job_t* job, int in_published);

/* After posting 3g+1 of the first chunk, offered: what share_offer
 * returned. Copies this rank's own block (when it offered, as tasks of its
 * queue, some of which peers that arrive first may take). */
void share_own(qcclComm_t comm, share_job_t* job, int offered);

/* Once every rank posted 3g+1 of the first chunk, after share_own of a
 * rank that offered: if every rank offered, copies the rest of the call,
 * shared with the peers, posts 3g+3 and sets *shared (the call then ends
 * once every rank posted 3g+3); else the caller does the rest with the
 * chunk's two-copy schedule (*shared = 0). */
qcclResult_t share_rest(qcclComm_t comm, uint64_t g, share_job_t* job, int* shared);

#endif /* QCCL_COLLECTIVES_SHARED_COPY_H_ */
