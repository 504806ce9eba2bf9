/*
 * hier_pipe.c - the segment pipeline of the two-level collectives (see
 * hier_pipe.h): one rail thread per call, handed segments through a
 * mutex and condition variable. A failure on either side stops the other:
 * the rail thread stops taking segments, the caller's thread stops waiting,
 * and the rail thread's message is carried over to the caller's thread
 * (the last error is per thread).
 */
#include "collectives/hier_pipe.h"

#include <pthread.h>
#include <stdio.h>

typedef struct {
  const hier_pipe_ops_t* ops;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int ready, done, stop; /* segments ready for / done by the rail thread */
  qcclResult_t res;      /* the rail thread's failure */
  char msg[QCCL_LAST_ERROR_BYTES];
} hier_pipe_t;

static void* hier_pipe_rail(void* arg) {
  hier_pipe_t* p = arg;
  for (int k = 0; k < p->ops->nsegs; k++) {
    pthread_mutex_lock(&p->mu);
    while (p->ready <= k && !p->stop) pthread_cond_wait(&p->cv, &p->mu);
    int stop = p->stop;
    pthread_mutex_unlock(&p->mu);
    if (stop) break;
    qcclResult_t r = p->ops->rail(p->ops->arg, k);
    pthread_mutex_lock(&p->mu);
    if (r == qcclSuccess) {
      p->done = k + 1;
    } else {
      p->res = r;
      snprintf(p->msg, sizeof p->msg, "%s", err_last());
      p->stop = 1;
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (r != qcclSuccess) break;
  }
  return NULL;
}

static void hier_pipe_set(hier_pipe_t* p, int* field, int v) {
  pthread_mutex_lock(&p->mu);
  *field = v;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* The caller's side: pre(k), then post(k-1) once the rail thread has it. */
static qcclResult_t hier_pipe_main(hier_pipe_t* p) {
  const hier_pipe_ops_t* o = p->ops;
  for (int k = 0; k <= o->nsegs; k++) {
    if (k < o->nsegs) {
      if (o->pre) QCCL_CHECK(o->pre(o->arg, k));
      hier_pipe_set(p, &p->ready, k + 1);
    }
    if (k == 0) continue;
    pthread_mutex_lock(&p->mu);
    while (p->done < k && p->res == qcclSuccess) pthread_cond_wait(&p->cv, &p->mu);
    qcclResult_t r = p->res;
    pthread_mutex_unlock(&p->mu);
    if (r != qcclSuccess) return QCCL_ERR(r, "%s", p->msg);
    if (o->post) QCCL_CHECK(o->post(o->arg, k - 1));
  }
  return qcclSuccess;
}

qcclResult_t hier_pipe_run(const hier_pipe_ops_t* ops) {
  if (ops->nsegs <= 1) {
    for (int k = 0; k < ops->nsegs; k++) {
      if (ops->pre) QCCL_CHECK(ops->pre(ops->arg, k));
      QCCL_CHECK(ops->rail(ops->arg, k));
      if (ops->post) QCCL_CHECK(ops->post(ops->arg, k));
    }
    return qcclSuccess;
  }
  hier_pipe_t p = {.ops = ops};
  pthread_mutex_init(&p.mu, NULL);
  pthread_cond_init(&p.cv, NULL);
  pthread_t th;
  qcclResult_t res;
  if (pthread_create(&th, NULL, hier_pipe_rail, &p) != 0) {
    res = QCCL_ERR(qcclSystemError, "pthread_create for the rail stage failed");
  } else {
    res = hier_pipe_main(&p);
    hier_pipe_set(&p, &p.stop, 1); /* after a failure here the rail thread must not wait */
    pthread_join(th, NULL);
    if (res == qcclSuccess && p.res != qcclSuccess) res = QCCL_ERR(p.res, "%s", p.msg);
  }
  pthread_cond_destroy(&p.cv);
  pthread_mutex_destroy(&p.mu);
  return res;
}
