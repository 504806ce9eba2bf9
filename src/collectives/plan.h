/*
 * plan.h - a collective as a plan: built once, started for each call, and
 * moved forward by a re-entrant step that never blocks (UCC's tl/ucp
 * shape: init / start / progress).
 *
 * A plan holds what the call's arguments fix (sizes, chunk counts, the
 * algorithm's choices: made once, when it is built) and, once started,
 * the state of its progress: the phase it resumes at and the counters of
 * its loops. Phase 0 of its step does the per-call part (what depends on
 * the buffers' addresses, such as whether peers read them in place). A
 * step does what it can without waiting and returns qcclSuccess when the
 * call is done, qcclInProgress when it waits for a peer (step it again
 * later), or an error. A step that passed a wait bumps `moved`, which is
 * how a driver tells a plan that advances from one that is stuck.
 *
 * Leaves wait on one thing at a time: a step counter of the node's
 * segment (shm.h, shm_test_*), or the transfers of a point-to-point batch
 * (p2p.h). A composition (a two-level collective, a ZeRO++ call) holds
 * plans on the node and rail communicators and local compute steps (the
 * codec, a reduction), and its step advances whichever child can move:
 * UCC's cl/hier schedules. One thread drives the whole tree: the caller's
 * for a NULL stream, a host stream's thread otherwise (plan_drive).
 *
 * Every plan answers three more questions for its driver: how long to spin
 * before yielding (what it waits on may share this CPU), the slow check
 * after `idle` seconds without progress (a peer aborted or died, the
 * timeout: the error names who was waited for), and cancel (a failed
 * plan gives back what it has in flight). Compositions ask their active
 * children.
 *
 * Plans of a communicator's collectives are kept in its cache (plan_get),
 * by collective, count, datatype, op and root: a call that repeats one
 * builds nothing. A communicator runs one call at a time (engine.c), so a
 * cached plan serves one call at a time; one that is busy all the same
 * (a layer's plan asked for again inside its own call) is built afresh.
 */
#ifndef QCCL_COLLECTIVES_PLAN_H_
#define QCCL_COLLECTIVES_PLAN_H_

#include <stdint.h>

#include "collectives/coll.h"

typedef struct plan plan_t;

typedef struct {
  const char* name; /* for messages: "allreduce", "hier allgather", ... */
  /* One step (above). Re-entrant; never waits. */
  qcclResult_t (*progress)(plan_t* p);
  /* Microseconds to poll before yielding, for what the plan waits on now. */
  uint32_t (*spin)(plan_t* p);
  /* The slow check of a plan that moved nothing for idle seconds:
   * qcclSuccess to go on waiting, else the error (an abort, a dead peer,
   * qcclTimeout past the communicator's timeout). */
  qcclResult_t (*check)(plan_t* p, double idle);
  /* Gives back what a failed plan has in flight (NULL: nothing). */
  void (*cancel)(plan_t* p);
  /* Frees what the plan owns besides its own memory: its children, its
   * buffers (NULL: nothing). */
  void (*destroy)(plan_t* p);
  /* 1 when everything the plan waits for now is on other hosts (transfers
   * over the network, which need no core of this host to progress), so
   * the driver may nap rather than yield the core; NULL: always 0. */
  int (*remote)(plan_t* p);
  /* For plans built from more than the call's arguments (plan_get's ctx:
   * the quantization specs of a ZeRO++ call): whether p was built from
   * ctx. NULL: the arguments say it all. */
  int (*same)(const plan_t* p, const void* ctx);
} plan_ops_t;

struct plan {
  const plan_ops_t* ops;
  qcclComm_t comm; /* the communicator it runs on */
  coll_args_t a;   /* the call it was built for; buffers from plan_start */
  int phase;       /* where the next step resumes; 0 after plan_start */
  uint64_t moved;  /* grows whenever a step passes a wait */
  /* a leaf that is a composition's child returns qcclInProgress after
   * each chunk it handles, so that its siblings are stepped in between */
  int yield;
  /* the cache's (plan.c) */
  int busy, cached;
  uint64_t used;
};

/* Falls through from one phase of a step to the next. */
#if defined(__GNUC__)
#define PLAN_FALLTHROUGH __attribute__((fallthrough))
#else
#define PLAN_FALLTHROUGH ((void)0)
#endif

/* Inside a step: returns unless expr (a test: shm_test_*, a child's step)
 * gave qcclSuccess, in which case the plan moved. */
#define PLAN_TEST(p, expr)                      \
  do {                                          \
    qcclResult_t plan_r_ = (expr);              \
    if (plan_r_ != qcclSuccess) return plan_r_; \
    (p)->moved++;                               \
  } while (0)

/* Zeroed memory of `bytes` (the size of a plan type) for a plan of ops on
 * comm for call a; fails with qcclSystemError. */
qcclResult_t plan_alloc(size_t bytes, const plan_ops_t* ops, qcclComm_t comm, const coll_args_t* a,
                        plan_t** out);

/* Frees p and what it owns. */
void plan_free(plan_t* p);

/* Readies p for a call on these buffers: phase 0. */
static inline void plan_start(plan_t* p, const void* sendbuff, void* recvbuff) {
  p->a.sendbuff = sendbuff;
  p->a.recvbuff = recvbuff;
  p->phase = 0;
}

/* As plan_start for a plan that serves as a composition's stage, whose
 * count changes from one start to the next (plans that allow it say so). */
static inline void plan_restart(plan_t* p, const void* sendbuff, void* recvbuff, size_t count) {
  p->a.count = count;
  plan_start(p, sendbuff, recvbuff);
}

/* Steps child as part of parent: the child's progress counts as the
 * parent's. */
static inline qcclResult_t plan_step(plan_t* parent, plan_t* child) {
  uint64_t before = child->moved;
  qcclResult_t r = child->ops->progress(child);
  if (child->moved != before || r == qcclSuccess) parent->moved++;
  return r;
}

/* The head of a composition that steps one child at a time (a sequence of
 * stages and local compute: the two-level rooted calls, the ZeRO++
 * calls); cur is the child in progress. */
typedef struct {
  plan_t p;
  plan_t* cur;
} plan_seq_t;

/* Steps child as the sequence's current stage: qcclSuccess once it ended
 * (a PLAN_TEST of the sequence's step). */
static inline qcclResult_t plan_seq_step(plan_seq_t* s, plan_t* child) {
  s->cur = child;
  qcclResult_t r = plan_step(&s->p, child);
  if (r == qcclSuccess) s->cur = NULL;
  return r;
}

/* The spin, slow check, cancel and remote of a plan_seq_t: its current
 * child's. */
uint32_t plan_seq_spin(plan_t* p);
qcclResult_t plan_seq_check(plan_t* p, double idle);
void plan_seq_cancel(plan_t* p);
int plan_seq_remote(plan_t* p);

/* A child's remote (0 when it has none). */
static inline int plan_remote(plan_t* p) {
  return p->ops->remote != NULL && p->ops->remote(p);
}

/* Drives p to its end on this thread: steps it, polls while it waits
 * (spin, then yield, then nap: core/wait.h; once the spin is over, a plan
 * that waits only on other hosts naps at once, plan_remote), and runs its
 * slow check every ~20 ms of idling. A failed plan is cancelled before its
 * error returns. */
qcclResult_t plan_drive(plan_t* p);

/* Builds the plan of call a on comm (the selection's, a family's), from
 * ctx too where the call has more to it (NULL for the plain ones). */
typedef qcclResult_t (*plan_build_fn)(qcclComm_t comm, const coll_args_t* a, const void* ctx,
                                      plan_t** out);

/* The plan of call a (and ctx) on comm from its cache, built by build on a
 * miss, and marked busy until plan_put; its buffers are a's. */
qcclResult_t plan_get(qcclComm_t comm, const coll_args_t* a, plan_build_fn build, const void* ctx,
                      plan_t** out);

/* plan_get, plan_drive, plan_put: a call of one plan on this thread. */
qcclResult_t plan_run(qcclComm_t comm, const coll_args_t* a, plan_build_fn build, const void* ctx);
void plan_put(plan_t* p);

/* Frees comm's cache (comm_free). */
void plan_cache_free(qcclComm_t comm);

/* The slow check and the spin of a leaf that waits on its communicator's
 * segment (its progress waits through shm_test_*): the segment's. */
uint32_t plan_shm_spin(plan_t* p);
qcclResult_t plan_shm_check(plan_t* p, double idle);

#endif /* QCCL_COLLECTIVES_PLAN_H_ */
