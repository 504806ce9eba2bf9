/*
 * sendrecv.c - batches of point-to-point transfers (p2p.h): qcclSend /
 * qcclRecv alone or from a group, and the transfers of the algorithms
 * across hosts.
 *
 * A batch is stepped in passes: each pass posts every transfer whose
 * predecessor of the same pair and direction is complete (NCCL's matching
 * rule: in posting order) and tests every posted one; nothing waits, so
 * one thread can step a batch beside other plans (a two-level pipeline
 * steps its network stage between the chunks of its node stage). While a
 * pass moves nothing, the driver backs off (spin, yield, nap) and
 * periodically runs the batch's slow check: the peers it waits on alive,
 * no abort, the timeout. A failure cancels the other transfers.
 *
 * A send whose buffer overlaps the buffer of a receive in the same batch
 * (a ring shift in place, MPI_Sendrecv_replace's pattern) is sent from a
 * private copy, since the receive may overwrite it while it is in flight;
 * the copies live in the communicator's scratch (COMM_SCRATCH_P2P).
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/p2p.h"
#include "core/dtype.h"
#include "core/log.h"
#include "transport/transport.h"

/* Batches of up to P2P_SMALL transfers keep their state on the stack. */
#define P2P_SMALL 16

static int p2p_same_stream(const coll_args_t* a, qcclComm_t ca, const coll_args_t* b,
                           qcclComm_t cb) {
  return ca == cb && a->kind == b->kind && a->root == b->root;
}

static size_t p2p_bytes(const coll_args_t* a) {
  return a->count * dtype_size(a->datatype);
}

static qcclResult_t p2p_post(p2p_batch_t* b, const coll_args_t* a, qcclComm_t c, p2p_state_t* st) {
  const transport_ops_t* t = c->peer_ops[a->root];
  size_t n = p2p_bytes(a);
  int idx = c->peer_idx[a->root];
  if (a->kind == COLL_SEND) {
    /* under the slot the caller opened: the user's sends and receives
     * (group.c), or the collective a flat algorithm serves */
    coll_stats_sent(c, a->root, n);
    /* while a receive of the batch is open the send may wait for its
     * receiver; released (below) once none is */
    st->releasable = b->recvs_left > 0 && t->release != NULL;
    b->unreleased += st->releasable;
    int flags = (st->paired ? P2P_SEND_PAIRED : 0) | (st->releasable ? P2P_SEND_RELEASABLE : 0);
    return t->isend(c->peer_ctx[a->root], idx, a->sendbuff, n, flags, &st->req);
  }
  return t->irecv(c->peer_ctx[a->root], idx, a->recvbuff, n, &st->req);
}

void p2p_batch_start(p2p_batch_t* b, const coll_args_t* ops, qcclComm_t* comms, p2p_state_t* st,
                     int n) {
  *b = (p2p_batch_t){.ops = ops, .comms = comms, .st = st, .n = n, .left = n, .failed = -1};
  memset(st, 0, sizeof *st * (size_t)n);
  for (int i = 0; i < n; i++) {
    st[i].prev = -1;
    b->recvs_left += ops[i].kind == COLL_RECV;
    for (int j = 0; j < n && ops[i].kind == COLL_SEND && !st[i].paired; j++)
      st[i].paired = ops[j].kind == COLL_RECV && comms[j] == comms[i] && ops[j].root == ops[i].root;
    for (int j = i - 1; j >= 0; j--)
      if (p2p_same_stream(&ops[i], comms[i], &ops[j], comms[j])) {
        st[i].prev = j;
        break;
      }
  }
}

qcclResult_t p2p_batch_progress(p2p_batch_t* b, uint64_t* moved) {
  const coll_args_t* ops = b->ops;
  p2p_state_t* st = b->st;
  int progress = 0;
  for (int i = 0; i < b->n && b->left > 0; i++) {
    if (st[i].complete || (st[i].prev >= 0 && !st[st[i].prev].complete)) continue;
    const coll_args_t* a = &ops[i];
    qcclComm_t c = b->comms[i];
    const transport_ops_t* t = c->peer_ops[a->root];
    void* ctx = c->peer_ctx[a->root];
    qcclResult_t r;
    if (st[i].req == NULL) {
      r = p2p_post(b, a, c, &st[i]);
      if (r != qcclSuccess) {
        b->failed = i;
        return r;
      }
    }
    int fin = 0;
    size_t before = st[i].moved;
    r = t->test(ctx, st[i].req, &fin);
    if (r != qcclSuccess) {
      st[i].req = NULL; /* freed by test */
      b->failed = i;
      return r;
    }
    if (fin) {
      st[i].req = NULL;
      st[i].complete = 1;
      b->left--;
      b->recvs_left -= a->kind == COLL_RECV;
      b->unreleased -= st[i].releasable;
      st[i].releasable = 0;
      progress = 1;
    } else {
      st[i].moved = t->moved(ctx, st[i].req);
      progress |= st[i].moved != before;
    }
  }
  if (b->recvs_left == 0 && b->unreleased > 0) {
    /* nothing but sends left: those that may wait for their receivers
     * finish as eager sends would (transport.h) */
    for (int i = 0; i < b->n; i++) {
      if (!st[i].releasable) continue;
      qcclComm_t c = b->comms[i];
      const transport_ops_t* t = c->peer_ops[ops[i].root];
      t->release(c->peer_ctx[ops[i].root], st[i].req);
      st[i].releasable = 0;
    }
    b->unreleased = 0;
    progress = 1; /* test them again at once */
  }
  if (progress) {
    b->drained = 0;
    ++*moved;
  }
  return b->left == 0 ? qcclSuccess : qcclInProgress;
}

uint32_t p2p_batch_spin(p2p_batch_t* b) {
  /* a peer on this node that shares this rank's CPU cannot run while this
   * rank spins (shm_spin_for) */
  for (int i = 0; i < b->n; i++) {
    qcclComm_t c = b->comms[i];
    int peer = b->ops[i].root;
    if (b->st[i].complete || c->peer_ops[peer] != &shm_p2p_ops) continue;
    /* the shm transport's context is its segment (shm_p2p.c) */
    return shm_spin_for(c->peer_ctx[peer], c->peer_idx[peer]);
  }
  return b->n > 0 ? b->comms[0]->spin : 0;
}

qcclResult_t p2p_batch_check(p2p_batch_t* b, double idle) {
  const coll_args_t* ops = b->ops;
  p2p_state_t* st = b->st;
  qcclComm_t* comms = b->comms;
  int n = b->n;
  for (int i = 0; i < n; i++) {
    if (st[i].complete || !comm_aborted(comms[i])) continue;
    b->failed = i;
    return comm_usable(ops[i].kind == COLL_SEND ? "qcclSend" : "qcclRecv", comms[i]);
  }
  int gone = -1;
  qcclResult_t r = qcclSuccess;
  for (int i = 0; i < n && gone < 0; i++) {
    if (st[i].complete) continue;
    const coll_args_t* a = &ops[i];
    r = comms[i]->peer_ops[a->root]->check(comms[i]->peer_ctx[a->root],
                                           comms[i]->peer_idx[a->root]);
    if (r != qcclSuccess) gone = i;
  }
  /* a peer's report of a failed call that came on another lane (once per
   * communicator) */
  for (int i = 0; i < n && gone < 0; i++) {
    int seen = st[i].complete;
    for (int j = 0; j < i && !seen; j++) seen = !st[j].complete && comms[j]->top == comms[i]->top;
    if (seen) continue;
    r = coll_lanes_control_seen(comms[i]);
    if (r != qcclSuccess) {
      b->failed = i;
      return r;
    }
  }
  if (gone >= 0) {
    /* a peer that left may have sent everything first: fail only if the
     * next pass can move nothing more */
    if (!b->drained) {
      b->drained = 1;
      err_clear();
      return qcclSuccess;
    }
    b->failed = gone;
    return r;
  }
  for (int i = 0; i < n; i++) {
    if (st[i].complete || idle <= comms[i]->timeout) continue;
    b->failed = i;
    return QCCL_ERR(qcclTimeout,
                    "qccl%s rank %d made no progress for %.1f s (%zu of %zu bytes); "
                    "QCCL_TIMEOUT is %.1f s",
                    ops[i].kind == COLL_SEND ? "Send to" : "Recv from", ops[i].root, idle,
                    st[i].moved, p2p_bytes(&ops[i]), comms[i]->timeout);
  }
  return qcclSuccess;
}

void p2p_batch_cancel(p2p_batch_t* b) {
  for (int i = 0; i < b->n; i++)
    if (b->st[i].req) {
      qcclComm_t c = b->comms[i];
      int peer = b->ops[i].root;
      c->peer_ops[peer]->cancel(c->peer_ctx[peer], b->st[i].req);
      b->st[i].req = NULL;
    }
}

int p2p_batch_remote(const p2p_batch_t* b) {
  for (int i = 0; i < b->n; i++) {
    if (b->st[i].complete) continue;
    qcclComm_t c = b->comms[i];
    if (!c->peer_ops[b->ops[i].root]->remote) return 0;
  }
  return 1;
}

/* The communicator whose transfer failed (b->failed), made failed: a
 * failed transfer leaves its stream out of step. Returns r. */
static qcclResult_t p2p_batch_fail(p2p_batch_t* b, qcclResult_t r) {
  qcclComm_t c = b->comms[b->failed >= 0 ? b->failed : 0];
  if (c->async_error == qcclSuccess && r != qcclInvalidArgument) c->async_error = r;
  return comm_fail(c, r);
}

/* ---- plans that wait on batches ---- */

qcclResult_t p2p_leaf_step(p2p_leaf_t* l, p2p_batch_t* b) {
  l->b = b;
  qcclResult_t r = p2p_batch_progress(b, &l->p.moved);
  if (r == qcclSuccess) l->b = NULL;
  if (r != qcclSuccess && r != qcclInProgress) r = p2p_batch_fail(b, r);
  return r;
}

uint32_t p2p_leaf_spin(plan_t* p) {
  p2p_leaf_t* l = (p2p_leaf_t*)p;
  return l->b != NULL ? p2p_batch_spin(l->b) : p->comm->spin;
}

qcclResult_t p2p_leaf_check(plan_t* p, double idle) {
  p2p_leaf_t* l = (p2p_leaf_t*)p;
  if (l->b == NULL) return qcclSuccess;
  qcclResult_t r = p2p_batch_check(l->b, idle);
  return r == qcclSuccess ? r : p2p_batch_fail(l->b, r);
}

void p2p_leaf_cancel(plan_t* p) {
  p2p_leaf_t* l = (p2p_leaf_t*)p;
  if (l->b != NULL) p2p_batch_cancel(l->b);
  l->b = NULL;
}

int p2p_leaf_remote(plan_t* p) {
  p2p_leaf_t* l = (p2p_leaf_t*)p;
  return l->b != NULL && p2p_batch_remote(l->b);
}

void p2p_xchg_start(p2p_xchg_t* x, qcclComm_t comm, int to, const void* sbuf, size_t sbytes,
                    int from, void* rbuf, size_t rbytes) {
  int n;
  p2p_pair(x->ops, &n, to, sbuf, sbytes, from, rbuf, rbytes);
  x->comms[0] = x->comms[1] = comm;
  p2p_batch_start(&x->b, x->ops, x->comms, x->st, n);
}

/* ---- a batch driven to its end on this thread ---- */

typedef struct {
  p2p_leaf_t l;
  p2p_batch_t b;
} p2p_plan_t;

static qcclResult_t p2p_plan_progress(plan_t* p) {
  p2p_plan_t* t = (p2p_plan_t*)p;
  return p2p_leaf_step(&t->l, &t->b);
}

static const plan_ops_t p2p_plan_ops = {.name = "send/recv",
                                        .progress = p2p_plan_progress,
                                        .spin = p2p_leaf_spin,
                                        .check = p2p_leaf_check,
                                        .cancel = p2p_leaf_cancel,
                                        .remote = p2p_leaf_remote};

static qcclResult_t p2p_run_batch(const coll_args_t* ops, qcclComm_t* comms, int n) {
  if (n <= 0) return qcclSuccess;
  /* on the stack for the usual few (a call's latency is a few µs) */
  p2p_state_t small_st[P2P_SMALL];
  p2p_state_t* st = n <= P2P_SMALL ? small_st : malloc(sizeof *st * (size_t)n);
  if (!st) return QCCL_ERR(qcclSystemError, "out of memory");
  p2p_plan_t pl = {.l = {.p = {.ops = &p2p_plan_ops, .comm = comms[0]}}};
  p2p_batch_start(&pl.b, ops, comms, st, n);
  qcclResult_t r = plan_drive(&pl.l.p);
  if (st != small_st) free(st);
  return r;
}

/* Whether send i of the batch overlaps a receive of it. */
static int p2p_aliased(const coll_args_t* ops, int n, int i) {
  if (ops[i].kind != COLL_SEND) return 0;
  size_t si = p2p_bytes(&ops[i]);
  for (int j = 0; j < n; j++)
    if (ops[j].kind == COLL_RECV &&
        coll_overlap(ops[i].sendbuff, si, ops[j].recvbuff, p2p_bytes(&ops[j])))
      return 1;
  return 0;
}

/* Private copies of in-place sends up to this many bytes in all live in the
 * communicator's scratch, kept across calls: a fresh buffer each call costs
 * page faults (the heap is trimmed when it is freed), 3-4x the call at
 * 4-64 KiB. Larger ones are allocated per call, so a single huge exchange
 * in place does not pin its size for the communicator's life. */
#define P2P_KEEP_BYTES ((size_t)4 << 20)

qcclResult_t p2p_run(const coll_args_t* ops, qcclComm_t* comms, int n) {
  size_t total = 0;
  int first = -1;
  for (int i = 0; i < n; i++)
    if (p2p_aliased(ops, n, i)) {
      if (first < 0) first = i;
      total += (p2p_bytes(&ops[i]) + 63) & ~(size_t)63;
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
    size_t si = p2p_bytes(&ops[i]);
    copy_data(copy, ops[i].sendbuff, si);
    own[i].sendbuff = copy;
    copy += (si + 63) & ~(size_t)63;
  }
  r = p2p_run_batch(own, comms, n);
  if (own != small) free(own);
  free(heap);
  return r;
}

void p2p_pair(coll_args_t* ops, int* n, int to, const void* sbuf, size_t sbytes, int from,
              void* rbuf, size_t rbytes) {
  *n = 0;
  if (to >= 0) ops[(*n)++] = (coll_args_t){COLL_SEND, sbuf, NULL, sbytes, qcclUint8, qcclSum, to};
  if (from >= 0)
    ops[(*n)++] = (coll_args_t){COLL_RECV, NULL, rbuf, rbytes, qcclUint8, qcclSum, from};
}
