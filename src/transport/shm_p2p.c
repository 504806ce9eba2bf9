/*
 * shm_p2p.c - point-to-point byte streams through the node's segment.
 *
 * Each ordered pair (src, dst) owns a ring of chan_bytes (a power of two)
 * and two counters on separate cache lines: head (bytes the sender wrote)
 * and tail (bytes the receiver consumed). The sender copies into the free
 * part of the ring and publishes head with release order; the receiver
 * copies out what is between tail and head and publishes tail. Each byte
 * crosses memory twice (copy in, copy out); a ring of 256 KiB stays in
 * cache, so a long message streams at copy speed.
 */
#include <stdatomic.h>
#include <string.h>

#include "transport/shm.h"
#include "transport/transport.h"

static size_t shm_p2p_push(void* ctx, int peer, const void* buf, size_t n) {
  shm_t* s = ctx;
  shm_chan_ctrl_t* c = shm_chan_ctrl(s, s->rank, peer);
  char* ring = shm_chan_data(s, s->rank, peer);
  uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
  uint64_t tail = atomic_load_explicit(&c->tail, memory_order_acquire);
  size_t space = s->chan_bytes - (size_t)(head - tail);
  size_t k = n < space ? n : space;
  if (k == 0) return 0;
  size_t at = (size_t)head & (s->chan_bytes - 1);
  size_t first = s->chan_bytes - at < k ? s->chan_bytes - at : k;
  memcpy(ring + at, buf, first);
  memcpy(ring, (const char*)buf + first, k - first);
  atomic_store_explicit(&c->head, head + k, memory_order_release);
  return k;
}

static size_t shm_p2p_pull(void* ctx, int peer, void* buf, size_t n) {
  shm_t* s = ctx;
  shm_chan_ctrl_t* c = shm_chan_ctrl(s, peer, s->rank);
  const char* ring = shm_chan_data(s, peer, s->rank);
  uint64_t tail = atomic_load_explicit(&c->tail, memory_order_relaxed);
  uint64_t head = atomic_load_explicit(&c->head, memory_order_acquire);
  size_t avail = (size_t)(head - tail);
  size_t k = n < avail ? n : avail;
  if (k == 0) return 0;
  size_t at = (size_t)tail & (s->chan_bytes - 1);
  size_t first = s->chan_bytes - at < k ? s->chan_bytes - at : k;
  memcpy(buf, ring + at, first);
  memcpy((char*)buf + first, ring, k - first);
  atomic_store_explicit(&c->tail, tail + k, memory_order_release);
  return k;
}

static qcclResult_t shm_p2p_check(void* ctx, int peer) {
  return shm_check_peers(ctx, peer);
}

const transport_ops_t shm_p2p_ops = {"shm", shm_p2p_push, shm_p2p_pull, shm_p2p_check};
