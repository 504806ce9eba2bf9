/*
 * plan.c - the driver of a plan (plan.h): step it until it ends, and idle
 * between steps the way every wait of qccl does (core/wait.h: poll for
 * the plan's spin, then yield, then nap), with the plan's slow check every
 * ~20 ms. The idle clock restarts whenever a step moved the plan, so the
 * timeout counts the time without progress, not the length of the call.
 */
#include "collectives/plan.h"

#include <stdlib.h>

#include "core/socket.h"
#include "core/wait.h"

/* How long a wait on other hosts only yields before it naps. */
#define PLAN_REMOTE_NAP_AFTER 0.002

/* The waiting part of plan_drive, out of line: a call whose first step
 * finishes it (a small call with its peers ahead) never comes here. Once
 * its spin is over a wait yields the core (the peer it waits for may need
 * it), then naps; a wait on other hosts only (plan_remote) naps after
 * PLAN_REMOTE_NAP_AFTER of yielding instead of ~50 ms: its peers need no
 * core of this host, and a yield on an idle core is a busy loop that burnt
 * a core through every transfer on a slow link, while the short yielding
 * keeps the latency of a fast one (a nap costs ~100 us with the timer's
 * slack: 1 MiB calls between 2 simulated hosts of 2 ranks ran at 0.6-0.7
 * of their speed napping at once). */
static __attribute__((noinline)) qcclResult_t plan_wait(plan_t* p) {
  backoff_t b;
  backoff_init(&b, p->ops->spin(p));
  double since = clock_now();
  uint64_t seen = p->moved;
  for (;;) {
    qcclResult_t r = p->ops->progress(p);
    if (r != qcclInProgress) return r;
    if (p->moved != seen) {
      seen = p->moved;
      backoff_init(&b, p->ops->spin(p));
      since = clock_now();
      continue;
    }
    if (!backoff_spinning(&b) && plan_remote(p)) backoff_nap_after(&b, PLAN_REMOTE_NAP_AFTER);
    if (backoff_idle(&b)) {
      r = p->ops->check(p, clock_now() - since);
      if (r != qcclSuccess) return r;
    }
  }
}

qcclResult_t plan_drive(plan_t* p) {
  qcclResult_t r = p->ops->progress(p);
  if (r == qcclInProgress) r = plan_wait(p);
  if (r != qcclSuccess && p->ops->cancel != NULL) p->ops->cancel(p);
  return r;
}

uint32_t plan_shm_spin(plan_t* p) {
  return shm_wait_spin(p->comm->shm);
}

qcclResult_t plan_shm_check(plan_t* p, double idle) {
  return shm_wait_check(p->comm->shm, idle);
}

qcclResult_t plan_alloc(size_t bytes, const plan_ops_t* ops, qcclComm_t comm, const coll_args_t* a,
                        plan_t** out) {
  plan_t* p = calloc(1, bytes);
  if (p == NULL) return QCCL_ERR(qcclSystemError, "out of memory (a plan of %zu bytes)", bytes);
  p->ops = ops;
  p->comm = comm;
  if (a != NULL) p->a = *a;
  *out = p;
  return qcclSuccess;
}

void plan_free(plan_t* p) {
  if (p == NULL) return;
  if (p->ops->destroy != NULL) p->ops->destroy(p);
  free(p);
}

/* Whether cached plan p was built for call a (buffers aside). */
static int plan_matches(const plan_t* p, const coll_args_t* a) {
  return p->a.kind == a->kind && p->a.count == a->count && p->a.datatype == a->datatype &&
         p->a.op == a->op && p->a.root == a->root;
}

/* Whether cached plan p serves call a (and ctx) now. */
static int plan_fits(const plan_t* p, const coll_args_t* a, const void* ctx) {
  return p != NULL && !p->busy && plan_matches(p, a) &&
         (p->ops->same == NULL || p->ops->same(p, ctx));
}

/* Takes cached plan p for call a. */
static plan_t* plan_take(qcclComm_t comm, plan_t* p, const coll_args_t* a) {
  p->busy = 1;
  p->used = ++comm->plans_clock;
  plan_start(p, a->sendbuff, a->recvbuff);
  return p;
}

qcclResult_t plan_get(qcclComm_t comm, const coll_args_t* a, plan_build_fn build, const void* ctx,
                      plan_t** out) {
  plan_t** cache = comm->plans;
  /* a call that repeats the last one (a training loop's, a benchmark's)
   * finds its plan at once */
  if (plan_fits(cache[comm->plans_last], a, ctx)) {
    *out = plan_take(comm, cache[comm->plans_last], a);
    return qcclSuccess;
  }
  int victim = -1;
  for (int i = 0; i < COMM_PLANS; i++) {
    plan_t* p = cache[i];
    if (plan_fits(p, a, ctx)) {
      comm->plans_last = i;
      *out = plan_take(comm, p, a);
      return qcclSuccess;
    }
    /* an empty entry, else the least recently used one that is idle */
    if (p == NULL) {
      if (victim < 0 || cache[victim] != NULL) victim = i;
    } else if (!p->busy &&
               (victim < 0 || (cache[victim] != NULL && p->used < cache[victim]->used))) {
      victim = i;
    }
  }
  plan_t* p;
  QCCL_CHECK(build(comm, a, ctx, &p));
  p->busy = 1;
  if (victim >= 0) {
    plan_free(cache[victim]);
    cache[victim] = p;
    p->cached = 1;
    p->used = ++comm->plans_clock;
    comm->plans_last = victim;
  }
  plan_start(p, a->sendbuff, a->recvbuff);
  *out = p;
  return qcclSuccess;
}

qcclResult_t plan_run(qcclComm_t comm, const coll_args_t* a, plan_build_fn build, const void* ctx) {
  plan_t* p;
  QCCL_CHECK(plan_get(comm, a, build, ctx, &p));
  qcclResult_t r = plan_drive(p);
  plan_put(p);
  return r;
}

void plan_put(plan_t* p) {
  p->busy = 0;
  if (!p->cached) plan_free(p);
}

void plan_cache_free(qcclComm_t comm) {
  for (int i = 0; i < COMM_PLANS; i++) {
    plan_free(comm->plans[i]);
    comm->plans[i] = NULL;
  }
  comm->plans_last = 0;
}

uint32_t plan_seq_spin(plan_t* p) {
  plan_seq_t* s = (plan_seq_t*)p;
  return s->cur != NULL ? s->cur->ops->spin(s->cur) : p->comm->spin;
}

qcclResult_t plan_seq_check(plan_t* p, double idle) {
  plan_seq_t* s = (plan_seq_t*)p;
  return s->cur != NULL ? s->cur->ops->check(s->cur, idle) : qcclSuccess;
}

void plan_seq_cancel(plan_t* p) {
  plan_seq_t* s = (plan_seq_t*)p;
  if (s->cur != NULL && s->cur->ops->cancel != NULL) s->cur->ops->cancel(s->cur);
  s->cur = NULL;
}

int plan_seq_remote(plan_t* p) {
  plan_seq_t* s = (plan_seq_t*)p;
  return s->cur != NULL && plan_remote(s->cur);
}
