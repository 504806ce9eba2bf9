/*
 * stream.c - host streams and events (the public qcclStream* / qcclEvent*
 * calls).
 *
 * A stream is a FIFO of tasks and one thread that runs them, one after the
 * other, sleeping on a condition variable while the queue is empty: an idle
 * stream costs no CPU. `queued` and `done` count tasks; synchronize waits
 * until done catches up with the queued count it saw on entry. The first
 * failing task's result and message stay with the stream.
 *
 * An event is not a pointer into a stream: recording it queues a marker
 * task that, when the stream's thread reaches it, stamps the event with the
 * record number and the stream's error so far. So an event outlives its
 * stream, and a stream outlives nobody's events. Waiting on another
 * stream's event is a task that sleeps until that stamp arrives.
 *
 * Telling a host stream from a cudaStream_t: the live host streams are kept
 * in one process-wide table (like CUDA's own streams, a stream is a
 * process-wide object); a value not in it is never dereferenced.
 */
#include "core/stream.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

#define STREAM_MAGIC 0x4d525453u /* "STRM" */
#define EVENT_MAGIC 0x544e5645u  /* "EVNT" */

struct stream {
  uint32_t magic;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* tasks queued, a task done, or closing */
  stream_task_t *head, *tail;
  uint64_t queued, done;
  int closing;
  qcclResult_t error; /* the first failure of a task, sticky */
  char message[QCCL_LAST_ERROR_BYTES];
  pthread_t thread;
};

struct qcclEvent {
  uint32_t magic;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int refs;           /* the user's, plus one per pending marker */
  uint64_t recorded;  /* records made */
  uint64_t reached;   /* the newest record its stream has reached */
  qcclResult_t error; /* the stream's error at that point */
  char message[QCCL_LAST_ERROR_BYTES];
};

/* ---- the table of live host streams ----------------------------------- */

static pthread_mutex_t stream_table_mu = PTHREAD_MUTEX_INITIALIZER;
static stream_t** stream_table;
static int stream_table_n, stream_table_cap;

static qcclResult_t stream_table_add(stream_t* s) {
  pthread_mutex_lock(&stream_table_mu);
  if (stream_table_n == stream_table_cap) {
    int cap = stream_table_cap ? 2 * stream_table_cap : 16;
    stream_t** t = realloc(stream_table, sizeof *t * (size_t)cap);
    if (t == NULL) {
      pthread_mutex_unlock(&stream_table_mu);
      return QCCL_ERR(qcclSystemError, "qcclStreamCreate: out of memory");
    }
    stream_table = t;
    stream_table_cap = cap;
  }
  stream_table[stream_table_n++] = s;
  pthread_mutex_unlock(&stream_table_mu);
  return qcclSuccess;
}

/* Removes s; returns 0 if it was not there (not a live host stream). */
static int stream_table_remove(const void* s) {
  int found = 0;
  pthread_mutex_lock(&stream_table_mu);
  for (int i = 0; i < stream_table_n; i++) {
    if (stream_table[i] == s) {
      stream_table[i] = stream_table[--stream_table_n];
      found = 1;
      break;
    }
  }
  if (stream_table_n == 0) {
    free(stream_table);
    stream_table = NULL;
    stream_table_cap = 0;
  }
  pthread_mutex_unlock(&stream_table_mu);
  return found;
}

stream_t* stream_lookup(const void* p) {
  if (p == NULL) return NULL;
  stream_t* s = NULL;
  pthread_mutex_lock(&stream_table_mu);
  for (int i = 0; i < stream_table_n; i++)
    if (stream_table[i] == p) s = stream_table[i];
  pthread_mutex_unlock(&stream_table_mu);
  return s;
}

static qcclResult_t stream_arg(const char* fn, qcclStream_t stream, stream_t** out) {
  stream_t* s = stream_lookup(stream);
  if (s == NULL)
    return QCCL_ERR(qcclInvalidArgument,
                    "%s: stream=%p is not a live host stream (made by qcclStreamCreate and not "
                    "destroyed)",
                    fn, stream);
  *out = s;
  return qcclSuccess;
}

/* ---- the stream's thread ------------------------------------------------ */

static void* stream_main(void* arg) {
  stream_t* s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (s->head == NULL && !s->closing) pthread_cond_wait(&s->cv, &s->mu);
    if (s->head == NULL) break; /* closing, and nothing left */
    stream_task_t* t = s->head;
    s->head = t->next;
    if (s->head == NULL) s->tail = NULL;
    pthread_mutex_unlock(&s->mu);

    err_clear();
    void (*release)(stream_task_t*) = t->release; /* t may be gone once done */
    qcclResult_t r = t->run(t);
    char msg[QCCL_LAST_ERROR_BYTES];
    if (r != qcclSuccess) snprintf(msg, sizeof msg, "%s", err_last());

    pthread_mutex_lock(&s->mu);
    if (r != qcclSuccess && s->error == qcclSuccess) {
      s->error = r;
      memcpy(s->message, msg, sizeof msg);
    }
    s->done++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    release(t); /* after done: an event stamped here finds the stream past it */
    pthread_mutex_lock(&s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

qcclResult_t stream_enqueue(stream_t* s, stream_task_t* t) {
  t->next = NULL;
  pthread_mutex_lock(&s->mu);
  if (s->closing) {
    pthread_mutex_unlock(&s->mu);
    return QCCL_ERR(qcclInvalidUsage, "stream %p is being destroyed", (void*)s);
  }
  if (s->tail)
    s->tail->next = t;
  else
    s->head = t;
  s->tail = t;
  s->queued++;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return qcclSuccess;
}

/* The stream's error as the caller's last error; returns it. */
static qcclResult_t stream_result(stream_t* s) {
  qcclResult_t r = s->error;
  if (r != qcclSuccess) QCCL_ERR(r, "%s", s->message);
  return r;
}

/* ---- streams --------------------------------------------------------------- */

/* Runs what is queued, stops the thread, frees s; returns its first error
 * (as the caller's last error). */
static qcclResult_t stream_close(stream_t* s) {
  pthread_mutex_lock(&s->mu);
  s->closing = 1; /* the thread runs what is queued, then leaves */
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  qcclResult_t r = stream_result(s);
  s->magic = 0;
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
  return r;
}

qcclResult_t stream_create(int visible, stream_t** out) {
  stream_t* s = calloc(1, sizeof *s);
  if (s == NULL) return QCCL_ERR(qcclSystemError, "out of memory (a stream)");
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->magic = STREAM_MAGIC;
  int e = pthread_create(&s->thread, NULL, stream_main, s);
  if (e != 0) {
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return QCCL_ERRNO(qcclSystemError, e, "pthread_create (a stream's thread)");
  }
  qcclResult_t r = visible ? stream_table_add(s) : qcclSuccess;
  if (r != qcclSuccess) {
    stream_close(s);
    return r;
  }
  *out = s;
  return qcclSuccess;
}

void stream_destroy(stream_t* s) {
  if (s) stream_close(s);
}

uint64_t stream_queued(stream_t* s) {
  pthread_mutex_lock(&s->mu);
  uint64_t n = s->queued;
  pthread_mutex_unlock(&s->mu);
  return n;
}

void stream_wait(stream_t* s, uint64_t n) {
  pthread_mutex_lock(&s->mu);
  while (s->done < n) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

/* ---- public: streams ------------------------------------------------------ */

qcclResult_t qcclStreamCreate(qcclStream_t* stream) {
  err_clear();
  if (stream == NULL) return QCCL_ERR(qcclInvalidArgument, "qcclStreamCreate: stream is NULL");
  stream_t* s;
  QCCL_CHECK(stream_create(1, &s));
  QCCL_INFO(LOG_COLL, "host stream %p created", (void*)s);
  *stream = s;
  return qcclSuccess;
}

qcclResult_t qcclStreamDestroy(qcclStream_t stream) {
  err_clear();
  if (!stream_table_remove(stream))
    return QCCL_ERR(qcclInvalidArgument,
                    "qcclStreamDestroy: stream=%p is not a live host stream (made by "
                    "qcclStreamCreate and not destroyed)",
                    stream);
  return stream_close(stream);
}

qcclResult_t qcclStreamSynchronize(qcclStream_t stream) {
  err_clear();
  if (stream == NULL) return qcclSuccess;
  stream_t* s = NULL;
  QCCL_CHECK(stream_arg("qcclStreamSynchronize", stream, &s));
  pthread_mutex_lock(&s->mu);
  uint64_t target = s->queued;
  while (s->done < target) pthread_cond_wait(&s->cv, &s->mu);
  qcclResult_t r = stream_result(s);
  pthread_mutex_unlock(&s->mu);
  return r;
}

qcclResult_t qcclStreamQuery(qcclStream_t stream) {
  err_clear();
  if (stream == NULL) return qcclSuccess;
  stream_t* s = NULL;
  QCCL_CHECK(stream_arg("qcclStreamQuery", stream, &s));
  pthread_mutex_lock(&s->mu);
  qcclResult_t r = s->done < s->queued ? qcclInProgress : stream_result(s);
  pthread_mutex_unlock(&s->mu);
  return r;
}

/* ---- public: events -------------------------------------------------------- */

static qcclResult_t event_arg(const char* fn, qcclEvent_t event) {
  if (event == NULL) return QCCL_ERR(qcclInvalidArgument, "%s: event is NULL", fn);
  if (event->magic != EVENT_MAGIC)
    return QCCL_ERR(qcclInvalidArgument, "%s: event=%p is not a live event", fn, (void*)event);
  return qcclSuccess;
}

static void event_unref(qcclEvent_t e) {
  pthread_mutex_lock(&e->mu);
  int left = --e->refs;
  pthread_mutex_unlock(&e->mu);
  if (left > 0) return;
  pthread_cond_destroy(&e->cv);
  pthread_mutex_destroy(&e->mu);
  free(e);
}

qcclResult_t qcclEventCreate(qcclEvent_t* event) {
  err_clear();
  if (event == NULL) return QCCL_ERR(qcclInvalidArgument, "qcclEventCreate: event is NULL");
  qcclEvent_t e = calloc(1, sizeof *e);
  if (e == NULL) return QCCL_ERR(qcclSystemError, "qcclEventCreate: out of memory");
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  e->refs = 1;
  e->magic = EVENT_MAGIC;
  *event = e;
  return qcclSuccess;
}

qcclResult_t qcclEventDestroy(qcclEvent_t event) {
  err_clear();
  QCCL_CHECK(event_arg("qcclEventDestroy", event));
  event->magic = 0;
  event_unref(event);
  return qcclSuccess;
}

/* The marker a record queues: stamps the event with the stream's state. */
typedef struct {
  stream_task_t task;
  stream_t* stream;
  qcclEvent_t event;
  uint64_t number;
} event_marker_t;

static qcclResult_t event_marker_run(stream_task_t* t) {
  (void)t; /* the stamp is made in release, once the stream counted the marker done */
  return qcclSuccess;
}

static void event_marker_release(stream_task_t* t) {
  event_marker_t* m = (event_marker_t*)t;
  stream_t* s = m->stream;
  qcclEvent_t e = m->event;
  pthread_mutex_lock(&s->mu); /* the error of the tasks before this one */
  qcclResult_t err = s->error;
  char msg[QCCL_LAST_ERROR_BYTES];
  memcpy(msg, s->message, sizeof msg);
  pthread_mutex_unlock(&s->mu);
  pthread_mutex_lock(&e->mu);
  if (m->number > e->reached) {
    e->reached = m->number;
    e->error = err;
    memcpy(e->message, msg, sizeof msg);
  }
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  event_unref(m->event);
  free(m);
}

qcclResult_t qcclEventRecord(qcclEvent_t event, qcclStream_t stream) {
  err_clear();
  QCCL_CHECK(event_arg("qcclEventRecord", event));
  if (stream == NULL) { /* nothing is pending on the NULL stream */
    pthread_mutex_lock(&event->mu);
    event->reached = ++event->recorded;
    event->error = qcclSuccess;
    pthread_cond_broadcast(&event->cv);
    pthread_mutex_unlock(&event->mu);
    return qcclSuccess;
  }
  stream_t* s = NULL;
  QCCL_CHECK(stream_arg("qcclEventRecord", stream, &s));
  event_marker_t* m = calloc(1, sizeof *m);
  if (m == NULL) return QCCL_ERR(qcclSystemError, "qcclEventRecord: out of memory");
  m->task.run = event_marker_run;
  m->task.release = event_marker_release;
  m->stream = s;
  m->event = event;
  pthread_mutex_lock(&event->mu);
  m->number = ++event->recorded;
  event->refs++;
  pthread_mutex_unlock(&event->mu);
  qcclResult_t r = stream_enqueue(s, &m->task);
  if (r != qcclSuccess) event_marker_release(&m->task);
  return r;
}

/* The event's result as the caller's last error. Holds e->mu. */
static qcclResult_t event_result(qcclEvent_t e) {
  if (e->reached < e->recorded) return qcclInProgress;
  qcclResult_t r = e->error;
  if (r != qcclSuccess) QCCL_ERR(r, "%s", e->message);
  return r;
}

qcclResult_t qcclEventQuery(qcclEvent_t event) {
  err_clear();
  QCCL_CHECK(event_arg("qcclEventQuery", event));
  pthread_mutex_lock(&event->mu);
  qcclResult_t r = event_result(event);
  pthread_mutex_unlock(&event->mu);
  return r;
}

/* Waits until e reached record number `number`. */
static void event_wait(qcclEvent_t e, uint64_t number) {
  pthread_mutex_lock(&e->mu);
  while (e->reached < number) pthread_cond_wait(&e->cv, &e->mu);
  pthread_mutex_unlock(&e->mu);
}

qcclResult_t qcclEventSynchronize(qcclEvent_t event) {
  err_clear();
  QCCL_CHECK(event_arg("qcclEventSynchronize", event));
  pthread_mutex_lock(&event->mu);
  uint64_t number = event->recorded;
  pthread_mutex_unlock(&event->mu);
  event_wait(event, number);
  pthread_mutex_lock(&event->mu);
  qcclResult_t r = event_result(event);
  pthread_mutex_unlock(&event->mu);
  /* a later record may be pending: the result is that of `number` */
  return r == qcclInProgress ? qcclSuccess : r;
}

/* A stream's wait for another stream's event. */
typedef struct {
  stream_task_t task;
  qcclEvent_t event;
  uint64_t number;
} event_wait_t;

static qcclResult_t event_wait_run(stream_task_t* t) {
  event_wait_t* w = (event_wait_t*)t;
  event_wait(w->event, w->number);
  return qcclSuccess;
}

static void event_wait_release(stream_task_t* t) {
  event_wait_t* w = (event_wait_t*)t;
  event_unref(w->event);
  free(w);
}

qcclResult_t qcclStreamWaitEvent(qcclStream_t stream, qcclEvent_t event) {
  err_clear();
  QCCL_CHECK(event_arg("qcclStreamWaitEvent", event));
  if (stream == NULL) { /* the caller waits */
    pthread_mutex_lock(&event->mu);
    uint64_t number = event->recorded;
    pthread_mutex_unlock(&event->mu);
    event_wait(event, number);
    return qcclSuccess;
  }
  stream_t* s = NULL;
  QCCL_CHECK(stream_arg("qcclStreamWaitEvent", stream, &s));
  event_wait_t* w = calloc(1, sizeof *w);
  if (w == NULL) return QCCL_ERR(qcclSystemError, "qcclStreamWaitEvent: out of memory");
  w->task.run = event_wait_run;
  w->task.release = event_wait_release;
  w->event = event;
  pthread_mutex_lock(&event->mu);
  w->number = event->recorded;
  event->refs++;
  pthread_mutex_unlock(&event->mu);
  qcclResult_t r = stream_enqueue(s, &w->task);
  if (r != qcclSuccess) event_wait_release(&w->task);
  return r;
}
