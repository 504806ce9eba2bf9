/*
 * p2p.h - a batch of point-to-point transfers (sendrecv.c), stepped
 * without waiting: the primitive of the flat algorithms, of the network
 * stages of the two-level and ZeRO++ compositions, and of the user's
 * sends and receives.
 *
 * Every transfer is posted on the transport that reaches its peer
 * (comm->peer_ops, from the topology's path table) and tested in passes:
 * a pass tests every transfer whose predecessor of the same pair and
 * direction is complete (NCCL's matching rule: in posting order). Counts
 * of bytes are in the transfers' coll_args_t (count elements of datatype).
 */
#ifndef QCCL_COLLECTIVES_P2P_H_
#define QCCL_COLLECTIVES_P2P_H_

#include "collectives/plan.h"

typedef struct {
  void* req; /* NULL until posted */
  int prev;  /* earlier transfer of the same pair and direction, or -1 */
  int complete;
  int paired;     /* a send to a peer this batch also receives from */
  int releasable; /* posted with P2P_SEND_RELEASABLE, not released yet */
  size_t moved;
} p2p_state_t;

/* A batch over arrays its user owns (ops[n], comms[n], st[n]). */
typedef struct {
  const coll_args_t* ops;
  qcclComm_t* comms;
  p2p_state_t* st;
  int n;
  int left;       /* transfers not complete */
  int recvs_left; /* receives not complete */
  int unreleased; /* sends posted releasable and not released */
  int drained;    /* a slow check found a peer gone: one more pass first */
  int failed;     /* the transfer that failed, or -1 */
} p2p_batch_t;

/* Readies b for ops[0..n) of comms[0..n) (their state in st). */
void p2p_batch_start(p2p_batch_t* b, const coll_args_t* ops, qcclComm_t* comms, p2p_state_t* st,
                     int n);

/* One pass: posts what may be posted, tests what is posted. qcclSuccess
 * when every transfer is complete, qcclInProgress while not (*moved grows
 * with every transfer that completed or moved bytes), else the failure
 * (b->failed names the transfer; p2p_batch_cancel gives the rest back). */
qcclResult_t p2p_batch_progress(p2p_batch_t* b, uint64_t* moved);

/* The spin before yielding: none when a peer on this node that the batch
 * waits for shares this CPU (shm_spin_for). */
uint32_t p2p_batch_spin(p2p_batch_t* b);

/* The slow check after idle seconds without progress: an abort, a dead or
 * unreachable peer (after one more pass, since it may have sent it all
 * first), a peer's report of a failed call on another lane, the timeout.
 * Sets b->failed on failure. */
qcclResult_t p2p_batch_check(p2p_batch_t* b, double idle);

/* Frees the requests of transfers not complete (after a failure). */
void p2p_batch_cancel(p2p_batch_t* b);

/* 1 when every transfer of b not complete goes to another host. */
int p2p_batch_remote(const p2p_batch_t* b);

/* ---- plans whose steps wait on a batch (the flat algorithms) ---- */

/* The head of such a plan: the batch its step waits for now. */
typedef struct {
  plan_t p;
  p2p_batch_t* b; /* NULL when it waits for none */
} p2p_leaf_t;

/* Steps batch b of leaf l (qcclSuccess once complete); a failure makes the
 * communicator of the failed transfer failed (its pair is out of step). */
qcclResult_t p2p_leaf_step(p2p_leaf_t* l, p2p_batch_t* b);

/* The spin, slow check, cancel and remote of a p2p_leaf_t's plan
 * (plan_ops_t). */
uint32_t p2p_leaf_spin(plan_t* p);
qcclResult_t p2p_leaf_check(plan_t* p, double idle);
void p2p_leaf_cancel(plan_t* p);
int p2p_leaf_remote(plan_t* p);

/* One exchange: a send and a receive, or either alone (a ring step). */
typedef struct {
  coll_args_t ops[2];
  qcclComm_t comms[2];
  p2p_state_t st[2];
  p2p_batch_t b;
} p2p_xchg_t;

/* Readies x: sbytes from sbuf to `to` and rbytes from `from` into rbuf
 * on comm (to or from -1: none). */
void p2p_xchg_start(p2p_xchg_t* x, qcclComm_t comm, int to, const void* sbuf, size_t sbytes,
                    int from, void* rbuf, size_t rbytes);

/* Runs n validated sends / receives (of any communicators) together, on
 * this thread, until every one is complete: a send whose buffer overlaps
 * a receive of the batch goes from a private copy (the communicator's
 * scratch). */
qcclResult_t p2p_run(const coll_args_t* ops, qcclComm_t* comms, int n);

/* A send / receive pair as transfers of a batch: ops[0..*n) gets the send
 * to `to` (if to >= 0) and the receive from `from` (if from >= 0), of
 * bytes each. */
void p2p_pair(coll_args_t* ops, int* n, int to, const void* sbuf, size_t sbytes, int from,
              void* rbuf, size_t rbytes);

#endif /* QCCL_COLLECTIVES_P2P_H_ */
