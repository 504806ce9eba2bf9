/*
 * transport.h - the point-to-point transport interface.
 *
 * One small vtable, one implementation per file: shm_p2p.c (ranks of one
 * host, through the node's segment) and ucx.c (ranks of other hosts). A
 * transfer is one message: isend / irecv post it and return a request at
 * once; test() makes progress and reports completion; nothing blocks, so
 * one loop can drive many transfers (a group, a ring step) together.
 * Messages between one pair of ranks in one direction are matched in
 * posting order, and a receive whose size differs from the matching send
 * fails with qcclInvalidUsage (never silent truncation).
 */
#ifndef QCCL_TRANSPORT_TRANSPORT_H_
#define QCCL_TRANSPORT_TRANSPORT_H_

#include <stddef.h>

#include "qccl.h"

/* What the caller promises about a send (isend's flags). */
enum {
  /* the same call also receives from peer, and progresses that receive
   * while this send waits: the send may wait for its receiver */
  P2P_SEND_PAIRED = 1,
  /* the same call receives (from any peer) and calls release() on this
   * request once nothing but sends is left to wait for: until then the
   * send may wait for its receiver, after it a send that fits the
   * transport's buffers completes without it, as an eager send does */
  P2P_SEND_RELEASABLE = 2,
};

typedef struct {
  const char* name;
  /* Posts a message of n bytes from buf to peer; buf must stay untouched
   * until the request completes. *req is set on success. flags: P2P_SEND_*
   * (none: the send completes without its receiver where it fits). */
  qcclResult_t (*isend)(void* ctx, int peer, const void* buf, size_t n, int flags, void** req);
  /* Posts the receive of a message of exactly n bytes from peer into buf. */
  qcclResult_t (*irecv)(void* ctx, int peer, void* buf, size_t n, void** req);
  /* Makes progress on req; *done = 1 when complete, and req is freed. On
   * error req is freed too. */
  qcclResult_t (*test)(void* ctx, void* req, int* done);
  /* Bytes req has moved so far (for progress reports). */
  size_t (*moved)(void* ctx, void* req);
  /* Frees an incomplete request (after an error elsewhere). */
  void (*cancel)(void* ctx, void* req);
  /* qcclSuccess while peer is alive and reachable. */
  qcclResult_t (*check)(void* ctx, int peer);
  /* 1: the peers it reaches are on other hosts (a wait for them needs no
   * core of this host's ranks: the waiter naps instead of yielding). */
  int remote;
  /* A send posted with P2P_SEND_RELEASABLE: its call has nothing but sends
   * left to wait for (NULL: the transport never waits for a receiver it
   * need not wait for). */
  void (*release)(void* ctx, void* req);
} transport_ops_t;

/* The shared-memory transport; ctx is the communicator's shm_t. */
extern const transport_ops_t shm_p2p_ops;

/* The UCX transport; ctx is a ucx_t (transport/ucx.h). */
extern const transport_ops_t ucx_p2p_ops;

#endif /* QCCL_TRANSPORT_TRANSPORT_H_ */
