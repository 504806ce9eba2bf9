/*
 * flat_allgather.c - AllGather over point-to-point, for communicators that
 * span hosts. Ring: in step s rank r passes block r-s to r+1 and receives
 * block r-s-1 from r-1 straight into recvbuff; (W-1)/W of the result is
 * sent and received per rank, the least an all-gather can.
 *
 * Plan: W-1 exchanges, each posted then stepped until done.
 */
#include "collectives/flat.h"
#include "core/dtype.h"

typedef struct {
  p2p_leaf_t l;
  int s; /* the ring step */
  p2p_xchg_t x;
} fag_plan_t;

enum { FAG_START, FAG_POST, FAG_WAIT };

static qcclResult_t fag_progress(plan_t* p) {
  fag_plan_t* t = (fag_plan_t*)p;
  qcclComm_t comm = p->comm;
  const coll_args_t* a = &p->a;
  int w = comm->nranks, r = comm->rank;
  size_t bytes = a->count * dtype_size(a->datatype);
  char* out = a->recvbuff;
  for (;;) {
    switch (p->phase) {
      case FAG_START:
        coll_copy(out + (size_t)r * bytes, a->sendbuff, bytes);
        t->s = 0;
        p->phase = FAG_POST;
        PLAN_FALLTHROUGH;
      case FAG_POST: {
        if (t->s == w - 1) return qcclSuccess;
        int si = (r - t->s + w) % w, ri = (r - t->s - 1 + w) % w;
        p2p_xchg_start(&t->x, comm, (r + 1) % w, out + (size_t)si * bytes, bytes, (r + w - 1) % w,
                       out + (size_t)ri * bytes, bytes);
        p->phase = FAG_WAIT;
        PLAN_FALLTHROUGH;
      }
      case FAG_WAIT:
        PLAN_TEST(p, p2p_leaf_step(&t->l, &t->x.b));
        t->s++;
        p->phase = FAG_POST;
        break;
      default:
        return QCCL_ERR(qcclInternalError, "ring allgather: phase %d", p->phase);
    }
  }
}

static const plan_ops_t fag_ops = {.name = "ring allgather",
                                   .progress = fag_progress,
                                   .spin = p2p_leaf_spin,
                                   .check = p2p_leaf_check,
                                   .cancel = p2p_leaf_cancel,
                                   .remote = p2p_leaf_remote};

qcclResult_t flat_allgather_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  return plan_alloc(sizeof(fag_plan_t), &fag_ops, comm, a, out);
}
