/*
 * sendrecv.c - qcclSend / qcclRecv, alone or as a batch from a group.
 *
 * Every transfer is posted on the transport that reaches its peer
 * (comm->peer_ops) and then progressed round-robin: each pass tests every
 * transfer whose predecessor of the same pair and direction is complete
 * (NCCL's matching rule: in posting order). When a whole pass makes no
 * progress the rank backs off (spin, yield, nap) and periodically checks
 * that the peers it waits on are alive and that the timeout has not
 * passed. A failure cancels the other transfers of the batch.
 *
 * A send whose buffer overlaps the buffer of a receive in the same batch
 * (a ring shift in place, MPI_Sendrecv_replace's pattern) is sent from a
 * private copy, since the receive may overwrite it while it is in flight;
 * the copies live in the communicator's scratch (COMM_SCRATCH_P2P).
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/coll.h"
#include "collectives/engine.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/socket.h"
#include "core/wait.h"
#include "transport/transport.h"

typedef struct {
  void* req; /* NULL until posted */
  int prev;  /* earlier transfer of the same pair and direction, or -1 */
  int complete;
  int paired; /* a send to a peer this batch also receives from */
  size_t moved;
} p2p_state_t;

/* Batches of up to P2P_SMALL transfers keep their state on the stack. */
#define P2P_SMALL 16

static int p2p_same_stream(const coll_args_t* a, qcclComm_t ca, const coll_args_t* b,
                           qcclComm_t cb) {
  return ca == cb && a->kind == b->kind && a->root == b->root;
}

static qcclResult_t p2p_post(const coll_args_t* a, qcclComm_t c, p2p_state_t* st) {
  const transport_ops_t* t = c->peer_ops[a->root];
  size_t n = a->count * dtype_size(a->datatype);
  int idx = c->peer_idx[a->root];
  if (a->kind == COLL_SEND) {
    /* under the slot the caller opened: the user's sends and receives
     * (group.c), or the collective a flat algorithm serves */
    coll_stats_sent(c, a->root, n);
    return t->isend(c->peer_ctx[a->root], idx, a->sendbuff, n, st->paired, &st->req);
  }
  return t->irecv(c->peer_ctx[a->root], idx, a->recvbuff, n, &st->req);
}

static int p2p_overlap(const void* a, size_t an, const void* b, size_t bn) {
  const char* x = a;
  const char* y = b;
  return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

/* Whether send i of the batch overlaps a receive of it. */
static int p2p_aliased(const coll_args_t* ops, int n, int i) {
  if (ops[i].kind != COLL_SEND) return 0;
  size_t si = ops[i].count * dtype_size(ops[i].datatype);
  for (int j = 0; j < n; j++)
    if (ops[j].kind == COLL_RECV && p2p_overlap(ops[i].sendbuff, si, ops[j].recvbuff,
                                                ops[j].count * dtype_size(ops[j].datatype)))
      return 1;
  return 0;
}

/* Private copies of in-place sends up to this many bytes in all live in the
 * communicator's scratch, kept across calls: a fresh buffer each call costs
 * page faults (the heap is trimmed when it is freed), 3-4x the call at
 * 4-64 KiB. Larger ones are allocated per call, so a single huge exchange
 * in place does not pin its size for the communicator's life. */
#define P2P_KEEP_BYTES ((size_t)4 << 20)

static qcclResult_t p2p_run_batch(const coll_args_t* ops, qcclComm_t* comms, int n);

qcclResult_t p2p_run(const coll_args_t* ops, qcclComm_t* comms, int n) {
  size_t total = 0;
  int first = -1;
  for (int i = 0; i < n; i++)
    if (p2p_aliased(ops, n, i)) {
      if (first < 0) first = i;
      total += (ops[i].count * dtype_size(ops[i].datatype) + 63) & ~(size_t)63;
    }
  if (first < 0) return p2p_run_batch(ops, comms, n);
  coll_args_t small[P2P_SMALL];
  coll_args_t* own = n <= P2P_SMALL ? small : malloc(sizeof *own * (size_t)n);
  char* copy = NULL;
  void* heap = NULL;
  qcclResult_t r = qcclSuccess;
  if (total <= P2P_KEEP_BYTES)
    r = comm_scratch(comms[first], COMM_SCRATCH_P2P, total, (void**)&copy);
  else if ((copy = heap = malloc(total)) == NULL)
    r = QCCL_ERR(qcclSystemError, "out of memory (%zu bytes for sends in place)", total);
  if (r == qcclSuccess && own == NULL) r = QCCL_ERR(qcclSystemError, "out of memory");
  if (r != qcclSuccess) {
    if (own != small) free(own);
    free(heap);
    return comm_fail(comms[0], r);
  }
  memcpy(own, ops, sizeof *own * (size_t)n);
  for (int i = first; i < n; i++) {
    if (!p2p_aliased(ops, n, i)) continue;
    size_t si = ops[i].count * dtype_size(ops[i].datatype);
    memcpy(copy, ops[i].sendbuff, si);
    own[i].sendbuff = copy;
    copy += (si + 63) & ~(size_t)63;
  }
  r = p2p_run_batch(own, comms, n);
  if (own != small) free(own);
  free(heap);
  return r;
}

static qcclResult_t p2p_run_batch(const coll_args_t* ops, qcclComm_t* comms, int n) {
  if (n <= 0) return qcclSuccess;
  qcclResult_t r = qcclSuccess;
  int failed = -1;
  /* on the stack for the usual few (a call's latency is a few µs) */
  p2p_state_t small_st[P2P_SMALL];
  p2p_state_t* st = n <= P2P_SMALL ? small_st : malloc(sizeof *st * (size_t)n);
  if (!st) return QCCL_ERR(qcclSystemError, "out of memory");
  memset(st, 0, sizeof *st * (size_t)n);
  for (int i = 0; i < n; i++) {
    st[i].prev = -1;
    for (int j = 0; j < n && ops[i].kind == COLL_SEND && !st[i].paired; j++)
      st[i].paired = ops[j].kind == COLL_RECV && comms[j] == comms[i] && ops[j].root == ops[i].root;
    for (int j = i - 1; j >= 0; j--)
      if (p2p_same_stream(&ops[i], comms[i], &ops[j], comms[j])) {
        st[i].prev = j;
        break;
      }
  }
  backoff_t b;
  backoff_init(&b, comms[0]->spin);
  double idle_since = 0; /* set when a pass first moves nothing */
  int left = n;
  int drained = 0; /* a pass after a peer was found gone */
  while (left > 0) {
    int progress = 0;
    for (int i = 0; i < n; i++) {
      if (st[i].complete || (st[i].prev >= 0 && !st[st[i].prev].complete)) continue;
      const coll_args_t* a = &ops[i];
      const transport_ops_t* t = comms[i]->peer_ops[a->root];
      void* ctx = comms[i]->peer_ctx[a->root];
      if (st[i].req == NULL) {
        r = p2p_post(a, comms[i], &st[i]);
        if (r != qcclSuccess) {
          failed = i;
          goto done;
        }
      }
      int fin = 0;
      size_t before = st[i].moved;
      r = t->test(ctx, st[i].req, &fin);
      if (r != qcclSuccess) {
        st[i].req = NULL; /* freed by test */
        failed = i;
        goto done;
      }
      if (fin) {
        st[i].req = NULL;
        st[i].complete = 1;
        left--;
        progress = 1;
      } else {
        st[i].moved = t->moved(ctx, st[i].req);
        progress |= st[i].moved != before;
      }
    }
    if (left == 0) break;
    if (progress) {
      drained = 0;
      backoff_init(&b, comms[0]->spin);
      idle_since = 0;
      continue;
    }
    if (idle_since == 0) {
      idle_since = clock_now();
      /* a peer on this node that shares this rank's CPU cannot run while
       * this rank spins (shm_spin_for) */
      for (int i = 0; i < n; i++) {
        if (st[i].complete || comms[i]->peer_ops[ops[i].root] != &shm_p2p_ops) continue;
        /* the shm transport's context is its segment (shm_p2p.c) */
        shm_t* seg = comms[i]->peer_ctx[ops[i].root];
        backoff_init(&b, shm_spin_for(seg, comms[i]->peer_idx[ops[i].root]));
        break;
      }
    }
    if (!backoff_idle(&b)) continue;
    for (int i = 0; i < n && failed < 0; i++) {
      if (st[i].complete || !engine_aborted(comms[i])) continue;
      r = engine_comm_usable(ops[i].kind == COLL_SEND ? "qcclSend" : "qcclRecv", comms[i]);
      failed = i;
    }
    if (failed >= 0) goto done;
    int gone = -1;
    for (int i = 0; i < n && gone < 0; i++) {
      if (st[i].complete) continue;
      const coll_args_t* a = &ops[i];
      r = comms[i]->peer_ops[a->root]->check(comms[i]->peer_ctx[a->root],
                                             comms[i]->peer_idx[a->root]);
      if (r != qcclSuccess) gone = i;
    }
    /* a peer's report of a failed call that came on another lane (once
     * per communicator) */
    for (int i = 0; i < n && gone < 0; i++) {
      int seen = st[i].complete;
      for (int j = 0; j < i && !seen; j++) seen = !st[j].complete && comms[j]->top == comms[i]->top;
      if (seen) continue;
      r = coll_lanes_control_seen(comms[i]);
      if (r != qcclSuccess) {
        failed = i;
        goto done;
      }
    }
    if (gone >= 0) {
      /* a peer that left may have sent everything first: fail only if the
       * next pass can move nothing more */
      if (!drained) {
        drained = 1;
        err_clear();
        r = qcclSuccess;
        continue;
      }
      failed = gone;
      goto done;
    }
    double now = clock_now();
    for (int i = 0; i < n; i++) {
      if (st[i].complete || now - idle_since <= comms[i]->timeout) continue;
      r = QCCL_ERR(qcclTimeout,
                   "qccl%s rank %d made no progress for %.1f s (%zu of %zu bytes); "
                   "QCCL_TIMEOUT is %.1f s",
                   ops[i].kind == COLL_SEND ? "Send to" : "Recv from", ops[i].root,
                   now - idle_since, st[i].moved, ops[i].count * dtype_size(ops[i].datatype),
                   comms[i]->timeout);
      failed = i;
      goto done;
    }
  }
done:
  if (failed >= 0) {
    for (int i = 0; i < n; i++)
      if (st[i].req)
        comms[i]->peer_ops[ops[i].root]->cancel(comms[i]->peer_ctx[ops[i].root], st[i].req);
    /* a failed transfer leaves its stream out of step: the comm is broken */
    if (comms[failed]->async_error == qcclSuccess && r != qcclInvalidArgument)
      comms[failed]->async_error = r;
    if (st != small_st) free(st);
    return comm_fail(comms[failed], r);
  }
  if (st != small_st) free(st);
  return qcclSuccess;
}

qcclResult_t p2p_sendrecv(qcclComm_t comm, int to, const void* sbuf, size_t sbytes, int from,
                          void* rbuf, size_t rbytes) {
  coll_args_t ops[2];
  qcclComm_t comms[2] = {comm, comm};
  int n = 0;
  if (to >= 0) ops[n++] = (coll_args_t){COLL_SEND, sbuf, NULL, sbytes, qcclUint8, qcclSum, to};
  if (from >= 0) ops[n++] = (coll_args_t){COLL_RECV, NULL, rbuf, rbytes, qcclUint8, qcclSum, from};
  return n ? p2p_run(ops, comms, n) : qcclSuccess;
}
