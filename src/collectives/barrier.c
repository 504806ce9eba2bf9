/*
 * barrier.c - Barrier: one empty chunk. Every rank publishes that it
 * arrived and waits until all have: one cache line written per rank and W
 * read, no data.
 */
#include "collectives/node.h"

typedef struct {
  plan_t p;
  uint64_t g;
} barrier_plan_t;

enum { BARRIER_START, BARRIER_ARRIVED };

static qcclResult_t barrier_progress(plan_t* p) {
  barrier_plan_t* t = (barrier_plan_t*)p;
  shm_t* s = p->comm->shm;
  switch (p->phase) {
    case BARRIER_START:
      if (p->comm->nranks == 1) return qcclSuccess;
      t->g = s->chunk_seq++;
      shm_post(s, 3 * t->g + 1);
      p->phase = BARRIER_ARRIVED;
      PLAN_FALLTHROUGH;
    case BARRIER_ARRIVED:
      PLAN_TEST(p, shm_test_all(s, 3 * t->g + 1));
      shm_post(s, 3 * t->g + 3);
      return qcclSuccess;
  }
  return QCCL_ERR(qcclInternalError, "barrier: phase %d", p->phase);
}

static const plan_ops_t barrier_ops = {.name = "barrier",
                                       .progress = barrier_progress,
                                       .spin = plan_shm_spin,
                                       .check = plan_shm_check};

qcclResult_t node_barrier_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  return plan_alloc(sizeof(barrier_plan_t), &barrier_ops, comm, a, out);
}
