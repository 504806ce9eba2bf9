/*
 * transport.h - the point-to-point transport interface: a byte stream per
 * ordered pair of ranks, pushed and pulled without blocking, so one
 * progress loop can drive many transfers at once. One implementation per
 * file: shm_p2p.c (same host); UCX (across hosts) plugs in here later.
 */
#ifndef QCCL_TRANSPORT_TRANSPORT_H_
#define QCCL_TRANSPORT_TRANSPORT_H_

#include <stddef.h>

#include "qccl.h"

typedef struct {
  const char* name;
  /* Copies up to n bytes of buf into the stream to peer; returns the
   * number accepted (0 when the stream is full). Never blocks. */
  size_t (*push)(void* ctx, int peer, const void* buf, size_t n);
  /* Copies up to n bytes from the stream of peer into buf; returns the
   * number copied (0 when nothing is there). Never blocks. */
  size_t (*pull)(void* ctx, int peer, void* buf, size_t n);
  /* qcclSuccess while peer is alive and the link works. */
  qcclResult_t (*check)(void* ctx, int peer);
} transport_ops_t;

/* The shared-memory transport; ctx is the communicator's shm_t. */
extern const transport_ops_t shm_p2p_ops;

#endif /* QCCL_TRANSPORT_TRANSPORT_H_ */
