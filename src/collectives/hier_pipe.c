/*
 * hier_pipe.c - the segment pipeline of the two-level collectives (see
 * hier_pipe.h), as a plan that steps its two children, the node stage in
 * progress and the network stage in progress, on one thread.
 *
 * A step: steps the network stage (when it ends, its done hook runs and
 * the next one is readied once its segment's pre stage is done), then the
 * node stage (when it ends, its done hook runs and the next in the order
 * pre(0), pre(1), post(0), pre(2), ... is readied, unless it is a post(k)
 * whose network stage has not ended), and repeats while either moved. The node stage's
 * children return after each chunk (hier_stage_child), so the network is
 * stepped at least once a chunk. A failure of either child fails the
 * plan; the driver's cancel gives back what the other has in flight.
 * There is no thread and no lock: the caller's thread (or the stream's)
 * touches the node's segment and the rail's transport in turn.
 */
#include "collectives/hier_pipe.h"

/* The node stage of the schedule's position (node_k, node_post) ended:
 * its done hook, and the position moves on (pre(k) -> post(k - 1) ->
 * pre(k + 1)). */
static qcclResult_t hier_node_ended(hier_pipe_t* h) {
  const hier_pipe_ops_t* o = h->hops;
  int k = h->node_post ? h->node_k - 1 : h->node_k;
  h->node_cur = NULL;
  h->node_busy = 0;
  hier_done_fn done = h->node_post ? o->post_done : o->pre_done;
  if (done != NULL) QCCL_CHECK(done(h, k));
  if (!h->node_post) h->pre_done++;
  if (h->node_post) h->node_k++;
  h->node_post = !h->node_post;
  return qcclSuccess;
}

/* Readies the next node stage: pre(node_k) then post(node_k - 1) for
 * node_k = 0, 1, ..., nsegs (those that exist). *moved is set when the
 * schedule moved; it stops at a post whose network stage has not ended. */
static qcclResult_t hier_node_next(hier_pipe_t* h, int* moved) {
  const hier_pipe_ops_t* o = h->hops;
  *moved = 0;
  while (h->node_k <= h->nsegs) {
    int k = h->node_post ? h->node_k - 1 : h->node_k;
    int exists = h->node_post ? h->node_k >= 1 : h->node_k < h->nsegs;
    if (!exists) {
      if (h->node_post) h->node_k++;
      h->node_post = !h->node_post;
      continue;
    }
    if (h->node_post && h->rail_done <= k) return qcclSuccess; /* its network stage runs */
    hier_stage_fn fn = h->node_post ? o->post : o->pre;
    plan_t* child = NULL;
    if (fn != NULL) QCCL_CHECK(fn(h, k, &child));
    *moved = 1;
    if (child != NULL) {
      h->node_cur = child;
      h->node_busy = 1;
      return qcclSuccess;
    }
    QCCL_CHECK(hier_node_ended(h)); /* nothing to step */
  }
  return qcclSuccess;
}

/* The network stage rail_k ended. */
static qcclResult_t hier_rail_ended(hier_pipe_t* h) {
  h->rail_cur = NULL;
  h->rail_busy = 0;
  if (h->hops->rail_done) QCCL_CHECK(h->hops->rail_done(h, h->rail_k));
  h->rail_k++;
  h->rail_done++;
  return qcclSuccess;
}

/* Readies the next network stage once its pre stage is done. */
static qcclResult_t hier_rail_next(hier_pipe_t* h, int* moved) {
  *moved = 0;
  while (h->rail_k < h->nsegs && h->rail_k < h->pre_done) {
    plan_t* child = NULL;
    QCCL_CHECK(h->hops->rail(h, h->rail_k, &child));
    *moved = 1;
    if (child != NULL) {
      h->rail_cur = child;
      h->rail_busy = 1;
      return qcclSuccess;
    }
    QCCL_CHECK(hier_rail_ended(h));
  }
  return qcclSuccess;
}

static qcclResult_t hier_pipe_progress(plan_t* p) {
  hier_pipe_t* h = (hier_pipe_t*)p;
  if (p->phase == 0) {
    h->node_cur = h->rail_cur = NULL;
    h->node_k = h->node_post = h->node_busy = h->pre_done = 0;
    h->rail_k = h->rail_busy = h->rail_done = 0;
    if (h->hops->start) QCCL_CHECK(h->hops->start(h));
    p->phase = 1;
  }
  for (;;) {
    int moved = 0, m;
    if (h->rail_busy) {
      qcclResult_t r = plan_step(p, h->rail_cur);
      if (r != qcclSuccess && r != qcclInProgress) return r;
      if (r == qcclSuccess) {
        QCCL_CHECK(hier_rail_ended(h));
        moved = 1;
      }
    }
    if (!h->rail_busy) {
      QCCL_CHECK(hier_rail_next(h, &m));
      moved |= m;
    }
    if (h->node_busy) {
      qcclResult_t r = plan_step(p, h->node_cur);
      if (r != qcclSuccess && r != qcclInProgress) return r;
      if (r == qcclSuccess) {
        QCCL_CHECK(hier_node_ended(h));
        moved = 1;
      }
    }
    if (!h->node_busy) {
      QCCL_CHECK(hier_node_next(h, &m));
      moved |= m;
    }
    if (!h->node_busy && !h->rail_busy && h->node_k > h->nsegs && h->rail_done == h->nsegs)
      return qcclSuccess;
    if (!moved) return qcclInProgress;
  }
}

static uint32_t hier_pipe_spin(plan_t* p) {
  hier_pipe_t* h = (hier_pipe_t*)p;
  if (h->node_busy) return h->node_cur->ops->spin(h->node_cur);
  if (h->rail_busy) return h->rail_cur->ops->spin(h->rail_cur);
  return p->comm->spin;
}

static qcclResult_t hier_pipe_check(plan_t* p, double idle) {
  hier_pipe_t* h = (hier_pipe_t*)p;
  if (h->node_busy) QCCL_CHECK(h->node_cur->ops->check(h->node_cur, idle));
  if (h->rail_busy) QCCL_CHECK(h->rail_cur->ops->check(h->rail_cur, idle));
  return qcclSuccess;
}

static void hier_pipe_cancel(plan_t* p) {
  hier_pipe_t* h = (hier_pipe_t*)p;
  if (h->node_busy && h->node_cur->ops->cancel) h->node_cur->ops->cancel(h->node_cur);
  if (h->rail_busy && h->rail_cur->ops->cancel) h->rail_cur->ops->cancel(h->rail_cur);
  h->node_busy = h->rail_busy = 0;
}

/* Whether the pipeline waits on other hosts only: its node stage when one
 * is in progress (a wait on the segment is this host's), else its network
 * stage. */
static int hier_pipe_remote(plan_t* p) {
  hier_pipe_t* h = (hier_pipe_t*)p;
  if (h->node_busy) return plan_remote(h->node_cur);
  return h->rail_busy && plan_remote(h->rail_cur);
}

static void hier_pipe_destroy(plan_t* p) {
  hier_pipe_t* h = (hier_pipe_t*)p;
  if (h->hops->destroy) h->hops->destroy(h);
}

qcclResult_t hier_pipe_plan(size_t bytes, const hier_pipe_ops_t* ops, qcclComm_t comm,
                            const coll_args_t* a, hier_pipe_t** out) {
  /* one table of plan operations per pipeline type is not needed: the
   * pipeline's own, its name from ops */
  static const plan_ops_t pipe_ops = {.name = "pipeline",
                                      .progress = hier_pipe_progress,
                                      .spin = hier_pipe_spin,
                                      .check = hier_pipe_check,
                                      .cancel = hier_pipe_cancel,
                                      .remote = hier_pipe_remote,
                                      .destroy = hier_pipe_destroy};
  plan_t* p;
  QCCL_CHECK(plan_alloc(bytes, &pipe_ops, comm, a, &p));
  hier_pipe_t* h = (hier_pipe_t*)p;
  h->hops = ops;
  *out = h;
  return qcclSuccess;
}
