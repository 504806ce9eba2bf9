/*
 * hier_pipe.c - the segment pipeline of the two-level collectives (see
 * hier_pipe.h), run as a schedule on two streams of work: the caller's
 * thread runs the node stages (pre, post) over the node's shared segment,
 * and the communicator's rail stream (core/stream.c, made on the first
 * pipelined call and kept with the communicator) runs the network stages
 * over the rail, one task per segment, queued as soon as the segment's pre
 * stage is done. post(k) runs once the stream has done task k. The stream
 * is the one thread that touches the rail's transport in a pipelined call
 * (the rail's UCX worker is serialized, never shared at once), and since a
 * communicator runs one call at a time (engine.c) its stream serves one
 * pipeline at a time, in order.
 *
 * A failure on either side stops the other: a rail task that fails marks
 * the pipeline stopped (later tasks return at once) and leaves its result
 * and message for the caller's thread; a failed node stage stops the
 * pipeline the same way. Either way the caller waits until every task it
 * queued is done before it returns, since the tasks point into its frame.
 */
#include "collectives/hier_pipe.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/stream.h"

typedef struct hier_pipe hier_pipe_t;

typedef struct {
  stream_task_t task;
  hier_pipe_t* p;
  int k;
} hier_pipe_task_t;

struct hier_pipe {
  const hier_pipe_ops_t* ops;
  _Atomic int stop;
  qcclResult_t res; /* the first rail failure (written by the stream's thread) */
  char msg[QCCL_LAST_ERROR_BYTES];
};

static qcclResult_t hier_pipe_rail(stream_task_t* t) {
  hier_pipe_task_t* pt = (hier_pipe_task_t*)t;
  hier_pipe_t* p = pt->p;
  if (atomic_load(&p->stop)) return qcclSuccess;
  qcclResult_t r = p->ops->rail(p->ops->arg, pt->k);
  if (r != qcclSuccess) {
    p->res = r;
    snprintf(p->msg, sizeof p->msg, "%s", err_last());
    atomic_store(&p->stop, 1);
  }
  return qcclSuccess; /* the pipeline's result, not the stream's */
}

static void hier_pipe_release(stream_task_t* t) {
  (void)t; /* the tasks belong to the caller's call */
}

/* The communicator's rail stream, made on first use. */
static qcclResult_t hier_pipe_stream(qcclComm_t comm, stream_t** out) {
  if (comm->rail_stream == NULL) QCCL_CHECK(stream_create(0, &comm->rail_stream));
  *out = comm->rail_stream;
  return qcclSuccess;
}

qcclResult_t hier_pipe_run(qcclComm_t comm, const hier_pipe_ops_t* ops) {
  if (ops->nsegs <= 1) {
    for (int k = 0; k < ops->nsegs; k++) {
      if (ops->pre) QCCL_CHECK(ops->pre(ops->arg, k));
      QCCL_CHECK(ops->rail(ops->arg, k));
      if (ops->post) QCCL_CHECK(ops->post(ops->arg, k));
    }
    return qcclSuccess;
  }
  stream_t* s;
  QCCL_CHECK(hier_pipe_stream(comm, &s));
  hier_pipe_task_t* tasks = calloc((size_t)ops->nsegs, sizeof *tasks);
  if (tasks == NULL)
    return QCCL_ERR(qcclSystemError, "out of memory (pipeline of %d segments)", ops->nsegs);
  hier_pipe_t p = {.ops = ops, .res = qcclSuccess};
  uint64_t base = stream_queued(s);
  /* the node's waits leave the rail's worker to the stream (the waits' idle
   * hook may still progress it between the stream's uses: transport/ucx.c) */
  atomic_store(&comm->rail_busy, 1);
  int queued = 0;
  qcclResult_t res = qcclSuccess;
  for (int k = 0; k <= ops->nsegs && res == qcclSuccess; k++) {
    if (k < ops->nsegs) {
      if (ops->pre) res = ops->pre(ops->arg, k);
      if (res != qcclSuccess) break;
      tasks[k] = (hier_pipe_task_t){{hier_pipe_rail, hier_pipe_release, NULL}, &p, k};
      res = stream_enqueue(s, &tasks[k].task);
      if (res != qcclSuccess) break;
      queued++;
    }
    if (k == 0) continue;
    stream_wait(s, base + (uint64_t)k);
    if (p.res != qcclSuccess) {
      res = QCCL_ERR(p.res, "%s", p.msg);
      break;
    }
    if (ops->post) res = ops->post(ops->arg, k - 1);
  }
  atomic_store(&p.stop, 1); /* after a failure here, queued tasks return at once */
  stream_wait(s, base + (uint64_t)queued);
  atomic_store(&comm->rail_busy, 0);
  if (res == qcclSuccess && p.res != qcclSuccess) res = QCCL_ERR(p.res, "%s", p.msg);
  free(tasks);
  return res;
}
