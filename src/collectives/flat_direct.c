/*
 * flat_direct.c - the rooted and all-to-all collectives over point-to-
 * point, for communicators that span hosts: every transfer goes directly
 * between the two ranks concerned, all posted as one batch that progresses
 * together. Broadcast and Scatter: the root sends to each rank; Gather:
 * each rank sends to the root; AlltoAll: every pair exchanges its blocks;
 * Barrier: a ring of one-byte messages around all ranks (W-1 steps, after
 * which every rank has heard, indirectly, from every other).
 *
 * Plan: the batch is laid out as the call starts (its buffers are the
 * call's) in arrays sized for the largest batch when the plan is built,
 * then stepped until done; Barrier's steps are exchanges.
 */
#include <stdlib.h>

#include "collectives/flat.h"
#include "core/dtype.h"

typedef struct {
  p2p_leaf_t l;
  /* room for the largest batch: 2(W-1) transfers */
  coll_args_t* ops;
  qcclComm_t* comms;
  p2p_state_t* st;
  p2p_batch_t b;
  /* Barrier's */
  int s;
  char token, got;
  p2p_xchg_t x;
} direct_plan_t;

enum { DIRECT_START, DIRECT_WAIT };

/* The transfers of a rooted call: the root exchanges block i (at rootbuf
 * + i stride) with rank i (root_sends: the root sends, else receives); a
 * leaf its one block with the root. */
static int direct_rooted(direct_plan_t* t, int root, int root_sends, const char* rootbuf,
                         size_t stride, char* leafbuf, size_t bytes) {
  qcclComm_t comm = t->l.p.comm;
  int n = 0;
  if (comm->rank != root) {
    p2p_pair(t->ops, &n, root_sends ? -1 : root, leafbuf, bytes, root_sends ? root : -1, leafbuf,
             bytes);
    return n;
  }
  for (int i = 0; i < comm->nranks; i++) {
    if (i == root) continue;
    char* p = (char*)rootbuf + (size_t)i * stride;
    t->ops[n++] = root_sends ? (coll_args_t){COLL_SEND, p, NULL, bytes, qcclUint8, qcclSum, i}
                             : (coll_args_t){COLL_RECV, NULL, p, bytes, qcclUint8, qcclSum, i};
  }
  return n;
}

/* Lays out the call's batch; its own block copied where the call says. */
static int direct_layout(direct_plan_t* t) {
  qcclComm_t comm = t->l.p.comm;
  const coll_args_t* a = &t->l.p.a;
  int w = comm->nranks, r = comm->rank;
  size_t bytes = a->count * dtype_size(a->datatype);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  switch (a->kind) {
    case COLL_BROADCAST:
      if (r == a->root) coll_copy(out, in, bytes);
      return direct_rooted(t, a->root, 1, in, 0, out, bytes);
    case COLL_SCATTER:
      if (r == a->root) coll_copy(out, in + (size_t)a->root * bytes, bytes);
      return direct_rooted(t, a->root, 1, in, bytes, out, bytes);
    case COLL_GATHER:
      if (r != a->root) return direct_rooted(t, a->root, 0, NULL, bytes, (char*)in, bytes);
      coll_copy(out + (size_t)a->root * bytes, in, bytes);
      return direct_rooted(t, a->root, 0, out, bytes, NULL, bytes);
    default: { /* COLL_ALLTOALL */
      copy_data(out + (size_t)r * bytes, in + (size_t)r * bytes, bytes);
      int n = 0;
      for (int k = 1; k < w; k++) {
        int to = (r + k) % w, from = (r - k + w) % w;
        t->ops[n++] =
            (coll_args_t){COLL_SEND, in + (size_t)to * bytes, NULL, bytes, qcclUint8, qcclSum, to};
        t->ops[n++] = (coll_args_t){COLL_RECV, NULL, out + (size_t)from * bytes, bytes, qcclUint8,
                                    qcclSum,   from};
      }
      return n;
    }
  }
}

static qcclResult_t direct_progress(plan_t* p) {
  direct_plan_t* t = (direct_plan_t*)p;
  switch (p->phase) {
    case DIRECT_START: {
      int n = direct_layout(t);
      if (n == 0) return qcclSuccess;
      p2p_batch_start(&t->b, t->ops, t->comms, t->st, n);
      p->phase = DIRECT_WAIT;
      PLAN_FALLTHROUGH;
    }
    case DIRECT_WAIT:
      return p2p_leaf_step(&t->l, &t->b);
  }
  return QCCL_ERR(qcclInternalError, "direct: phase %d", p->phase);
}

enum { BARRIER_START, BARRIER_POST, BARRIER_WAIT };

static qcclResult_t direct_barrier_progress(plan_t* p) {
  direct_plan_t* t = (direct_plan_t*)p;
  qcclComm_t comm = p->comm;
  int w = comm->nranks, r = comm->rank;
  for (;;) {
    switch (p->phase) {
      case BARRIER_START:
        t->s = 0;
        t->token = 0;
        p->phase = BARRIER_POST;
        PLAN_FALLTHROUGH;
      case BARRIER_POST:
        if (t->s == w - 1) return qcclSuccess;
        p2p_xchg_start(&t->x, comm, (r + 1) % w, &t->token, 1, (r + w - 1) % w, &t->got, 1);
        p->phase = BARRIER_WAIT;
        PLAN_FALLTHROUGH;
      case BARRIER_WAIT:
        PLAN_TEST(p, p2p_leaf_step(&t->l, &t->x.b));
        t->s++;
        p->phase = BARRIER_POST;
        break;
      default:
        return QCCL_ERR(qcclInternalError, "barrier: phase %d", p->phase);
    }
  }
}

static void direct_destroy(plan_t* p) {
  direct_plan_t* t = (direct_plan_t*)p;
  free(t->ops);
  free(t->comms);
  free(t->st);
}

static const plan_ops_t direct_ops = {.name = "direct",
                                      .progress = direct_progress,
                                      .spin = p2p_leaf_spin,
                                      .check = p2p_leaf_check,
                                      .cancel = p2p_leaf_cancel,
                                      .remote = p2p_leaf_remote,
                                      .destroy = direct_destroy};
static const plan_ops_t direct_barrier_ops = {.name = "barrier",
                                              .progress = direct_barrier_progress,
                                              .spin = p2p_leaf_spin,
                                              .check = p2p_leaf_check,
                                              .cancel = p2p_leaf_cancel,
                                              .remote = p2p_leaf_remote,
                                              .destroy = direct_destroy};

static qcclResult_t direct_plan(qcclComm_t comm, const coll_args_t* a, const plan_ops_t* ops,
                                plan_t** out) {
  QCCL_CHECK(plan_alloc(sizeof(direct_plan_t), ops, comm, a, out));
  direct_plan_t* t = (direct_plan_t*)*out;
  if (ops == &direct_barrier_ops) return qcclSuccess;
  size_t n = 2 * (size_t)comm->nranks;
  t->ops = malloc(sizeof *t->ops * n);
  t->comms = malloc(sizeof *t->comms * n);
  t->st = malloc(sizeof *t->st * n);
  if (!t->ops || !t->comms || !t->st) {
    plan_free(*out);
    return QCCL_ERR(qcclSystemError, "out of memory (a plan of %zu transfers)", n);
  }
  for (size_t i = 0; i < n; i++) t->comms[i] = comm;
  return qcclSuccess;
}

qcclResult_t flat_broadcast_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  return direct_plan(comm, a, &direct_ops, out);
}
qcclResult_t flat_scatter_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  return direct_plan(comm, a, &direct_ops, out);
}
qcclResult_t flat_gather_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  return direct_plan(comm, a, &direct_ops, out);
}
qcclResult_t flat_alltoall_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  return direct_plan(comm, a, &direct_ops, out);
}
qcclResult_t flat_barrier_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  return direct_plan(comm, a, &direct_barrier_ops, out);
}
