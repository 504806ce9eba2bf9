/*
 * hier_rooted.c - two-level Broadcast and Reduce, for communicators whose
 * hosts hold equal numbers of ranks (comm->rail exists), through the rail
 * of the root's local index: on every host, the rank with that index acts
 * as the host's leader for this call.
 *
 * Broadcast: the root sends the buffer to the other N-1 leaders over the
 * network (flat_direct.c), then each leader broadcasts it inside its host
 * (shared memory). Reduce: each host reduces onto its leader (shared
 * memory), then the leaders reduce onto the root (flat_allreduce.c's ring,
 * over the network). Either way each host's link carries the buffer about
 * once, where the flat algorithms send it once per remote rank. Avg sums
 * and divides by W at the root. Narrow floats take the flat Reduce (they
 * would be rounded twice here).
 *
 * Plan: a sequence of two children, the rail's flat plan and the node's
 * (the node's first for Reduce), each stepped to its end in turn; a rank
 * that is not its host's leader for the call has only the node's.
 */
#include "collectives/flat.h"
#include "collectives/node.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "topology/rankmap.h"

typedef struct {
  plan_seq_t s;
  plan_t* first;  /* Broadcast: the rail's; Reduce: the node's */
  plan_t* second; /* the other, or NULL on a rank that is not a leader */
  void* partial;  /* Reduce: the node's result (scratch 0) */
} hier_rooted_t;

enum { HROOT_START, HROOT_FIRST, HROOT_SECOND };

static int hier_rooted_leader(const plan_t* p) {
  return p->comm->node->rank == p->comm->rankmap->local_rank[p->a.root];
}

static qcclResult_t hier_rooted_progress(plan_t* p) {
  hier_rooted_t* t = (hier_rooted_t*)p;
  const coll_args_t* a = &p->a;
  qcclComm_t comm = p->comm;
  int bcast = a->kind == COLL_BROADCAST;
  for (;;) {
    switch (p->phase) {
      case HROOT_START:
        if (bcast) {
          /* the root's buffer to the leaders, then each leader's to its host */
          if (t->first != NULL) plan_start(t->first, a->sendbuff, a->recvbuff);
          plan_start(t->second, a->recvbuff, a->recvbuff);
        } else {
          QCCL_CHECK(comm_scratch(comm, 0, a->count * dtype_size(a->datatype), &t->partial));
          plan_start(t->first, a->sendbuff, t->partial);
          if (t->second != NULL) plan_start(t->second, t->partial, a->recvbuff);
        }
        p->phase = HROOT_FIRST;
        PLAN_FALLTHROUGH;
      case HROOT_FIRST:
        if (t->first != NULL) PLAN_TEST(p, plan_seq_step(&t->s, t->first));
        p->phase = HROOT_SECOND;
        PLAN_FALLTHROUGH;
      case HROOT_SECOND:
        if (t->second != NULL) PLAN_TEST(p, plan_seq_step(&t->s, t->second));
        if (!bcast && comm->rank == a->root && a->op == qcclAvg) {
          const void* own[1] = {a->recvbuff};
          reduce_kernel(a->recvbuff, own, 1, a->count, a->datatype, qcclAvg, comm->nranks);
        }
        return qcclSuccess;
      default:
        return QCCL_ERR(qcclInternalError, "hier rooted: phase %d", p->phase);
    }
  }
}

static void hier_rooted_destroy(plan_t* p) {
  hier_rooted_t* t = (hier_rooted_t*)p;
  plan_free(t->first);
  plan_free(t->second);
}

static const plan_ops_t hier_rooted_ops = {.name = "hier rooted",
                                           .progress = hier_rooted_progress,
                                           .spin = plan_seq_spin,
                                           .check = plan_seq_check,
                                           .cancel = plan_seq_cancel,
                                           .remote = plan_seq_remote,
                                           .destroy = hier_rooted_destroy};

qcclResult_t hier_broadcast_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  QCCL_CHECK(plan_alloc(sizeof(hier_rooted_t), &hier_rooted_ops, comm, a, out));
  hier_rooted_t* t = (hier_rooted_t*)*out;
  int lr = comm->rankmap->local_rank[a->root];
  qcclResult_t r = qcclSuccess;
  if (hier_rooted_leader(*out)) {
    coll_args_t rail = *a;
    rail.root = comm->node_of[a->root]; /* the rail holds one rank per host, by host */
    r = flat_broadcast_plan(comm->rail, &rail, &t->first);
  }
  coll_args_t node = {COLL_BROADCAST, NULL, NULL, a->count, a->datatype, qcclSum, lr};
  if (r == qcclSuccess) r = node_broadcast_plan(comm->node, &node, &t->second);
  if (r != qcclSuccess) plan_free(*out);
  return r;
}

qcclResult_t hier_reduce_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  QCCL_CHECK(plan_alloc(sizeof(hier_rooted_t), &hier_rooted_ops, comm, a, out));
  hier_rooted_t* t = (hier_rooted_t*)*out;
  int lr = comm->rankmap->local_rank[a->root];
  qcclRedOp_t op = a->op == qcclAvg ? qcclSum : a->op;
  coll_args_t node = {COLL_REDUCE, NULL, NULL, a->count, a->datatype, op, lr};
  qcclResult_t r = node_reduce_plan(comm->node, &node, &t->first);
  if (r == qcclSuccess && hier_rooted_leader(*out)) {
    coll_args_t rail = {COLL_REDUCE, NULL, NULL, a->count, a->datatype, op, comm->node_of[a->root]};
    r = flat_reduce_plan(comm->rail, &rail, &t->second);
  }
  if (r != qcclSuccess) plan_free(*out);
  return r;
}
