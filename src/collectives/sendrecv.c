/*
 * sendrecv.c - qcclSend / qcclRecv, alone or as a batch from a group.
 *
 * A message is a 16-byte header (magic, byte count) followed by the
 * payload, pushed into the transport's byte stream to the peer. The
 * receiver checks the header against its own count, so a size mismatch is
 * an error, not silent corruption. A batch is progressed round-robin: each
 * pass pushes or pulls as much as each transfer can take without blocking,
 * and transfers between the same pair in the same direction go strictly in
 * posting order (NCCL's matching rule). When a whole pass makes no
 * progress the rank backs off (spin, yield, nap) and periodically checks
 * that the peers it waits on are alive and that the timeout has not passed.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/coll.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/socket.h"
#include "core/wait.h"
#include "transport/transport.h"

#define P2P_MAGIC 0x50325051u /* "QP2P" */
#define P2P_HDR 16

typedef struct {
  size_t bytes; /* payload bytes */
  size_t done;  /* header + payload bytes moved */
  int prev;     /* earlier transfer of the same pair and direction, or -1 */
  int complete;
  unsigned char hdr[P2P_HDR];
} p2p_state_t;

static void p2p_header(unsigned char* h, size_t bytes) {
  uint32_t m = P2P_MAGIC, z = 0;
  uint64_t b = bytes;
  memcpy(h, &m, 4);
  memcpy(h + 4, &z, 4);
  memcpy(h + 8, &b, 8);
}

/* Moves what can move now for transfer i; returns bytes moved. */
static qcclResult_t p2p_step(const coll_args_t* a, qcclComm_t comm, p2p_state_t* st,
                             size_t* moved) {
  const transport_ops_t* t = &shm_p2p_ops;
  void* ctx = comm->shm;
  size_t total = P2P_HDR + st->bytes, n = 0;
  *moved = 0;
  while (st->done < total) {
    size_t k;
    if (a->kind == COLL_SEND) {
      if (st->done < P2P_HDR)
        k = t->push(ctx, a->root, st->hdr + st->done, P2P_HDR - st->done);
      else
        k = t->push(ctx, a->root, (const char*)a->sendbuff + (st->done - P2P_HDR),
                    total - st->done);
    } else {
      if (st->done < P2P_HDR) {
        k = t->pull(ctx, a->root, st->hdr + st->done, P2P_HDR - st->done);
        if (st->done + k == P2P_HDR) {
          uint32_t m;
          uint64_t b;
          memcpy(&m, st->hdr, 4);
          memcpy(&b, st->hdr + 8, 8);
          if (m != P2P_MAGIC) {
            comm->async_error = qcclInternalError;
            return QCCL_ERR(qcclInternalError, "qcclRecv: corrupt message header from rank %d",
                            a->root);
          }
          if (b != st->bytes) {
            /* the stream to this peer is out of step from here on */
            comm->async_error = qcclInvalidUsage;
            return QCCL_ERR(qcclInvalidUsage,
                            "qcclRecv: rank %d sent %llu bytes but the matching receive on "
                            "rank %d expects %zu (count or datatype differ)",
                            a->root, (unsigned long long)b, comm->rank, st->bytes);
          }
        }
      } else {
        k = t->pull(ctx, a->root, (char*)a->recvbuff + (st->done - P2P_HDR), total - st->done);
      }
    }
    if (k == 0) break;
    st->done += k;
    n += k;
  }
  if (st->done == total) st->complete = 1;
  *moved = n;
  return qcclSuccess;
}

static int p2p_same_stream(const coll_args_t* a, qcclComm_t ca, const coll_args_t* b,
                           qcclComm_t cb) {
  return ca == cb && a->kind == b->kind && a->root == b->root;
}

qcclResult_t p2p_run(const coll_args_t* ops, qcclComm_t* comms, int n) {
  qcclResult_t r = qcclSuccess;
  p2p_state_t* st = calloc((size_t)n, sizeof *st);
  if (!st) return QCCL_ERR(qcclSystemError, "out of memory");
  for (int i = 0; i < n; i++) {
    st[i].bytes = ops[i].count * dtype_size(ops[i].datatype);
    st[i].prev = -1;
    for (int j = i - 1; j >= 0; j--)
      if (p2p_same_stream(&ops[i], comms[i], &ops[j], comms[j])) {
        st[i].prev = j;
        break;
      }
    p2p_header(st[i].hdr, st[i].bytes);
  }
  backoff_t b;
  backoff_init(&b, comms[0]->shm->spin);
  double last_progress = clock_now();
  int left = n;
  int failed = -1;
  while (left > 0) {
    size_t pass = 0;
    for (int i = 0; i < n; i++) {
      if (st[i].complete || (st[i].prev >= 0 && !st[st[i].prev].complete)) continue;
      size_t moved;
      r = p2p_step(&ops[i], comms[i], &st[i], &moved);
      if (r != qcclSuccess) {
        failed = i;
        goto done;
      }
      pass += moved;
      if (st[i].complete) left--;
    }
    if (left == 0) break;
    if (pass > 0) {
      backoff_init(&b, comms[0]->shm->spin);
      last_progress = 0;
      continue;
    }
    if (last_progress == 0) last_progress = clock_now();
    if (backoff_idle(&b)) {
      for (int i = 0; i < n; i++) {
        if (st[i].complete) continue;
        r = shm_p2p_ops.check(comms[i]->shm, ops[i].root);
        if (r != qcclSuccess) {
          failed = i;
          goto done;
        }
      }
      double now = clock_now();
      for (int i = 0; i < n; i++) {
        if (st[i].complete || now - last_progress <= comms[i]->timeout) continue;
        r = QCCL_ERR(qcclTimeout,
                     "qccl%s with rank %d made no progress for %.1f s (%zu of %zu "
                     "bytes); QCCL_TIMEOUT is %.1f s",
                     ops[i].kind == COLL_SEND ? "Send to" : "Recv from", ops[i].root,
                     now - last_progress, st[i].done > P2P_HDR ? st[i].done - P2P_HDR : 0,
                     st[i].bytes, comms[i]->timeout);
        failed = i;
        goto done;
      }
    }
  }
done:
  free(st);
  if (failed >= 0) return comm_fail(comms[failed], r);
  return qcclSuccess;
}
