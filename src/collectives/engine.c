/*
 * engine.c - when calls run: per-communicator turns, references, and
 * calls handed to host streams.
 *
 * Turns. A call takes turn seq_next++ of each communicator it uses when it
 * is issued (under every one's lock at once, taken in address order, so
 * that two threads issuing calls on the same pair of communicators get
 * turns in one consistent order and no two calls can wait for each other).
 * It runs when seq_done has reached its turn on each, and ends the turn
 * whatever its result. A call on the NULL stream runs on the caller's
 * thread: with nothing queued its turn is already due, and the cost is two
 * uncontended lock round trips. A call on a host stream is a task of that
 * stream (core/stream.c) that waits for its turns on the stream's thread,
 * so two streams of one communicator are served in issue order, and
 * streams of different communicators run side by side.
 *
 * References and abort. Each issued call holds a reference on its
 * communicators until it ends, besides the user's own. Destroy waits for
 * the calls to end, then drops the user's reference; abort sets the flag
 * every wait of the communicator checks (the shared segment's abort word
 * for its shared-memory waits, `aborting` for the point-to-point loop and
 * for calls waiting for a turn), drops the user's reference and returns:
 * whoever drops the last reference frees the communicator. So a call that
 * another thread is inside, or one queued on a stream, never finds its
 * communicator freed under it, and every one of them ends within one check
 * period (~20 ms) of the abort.
 */
#include "collectives/engine.h"

#include <stdlib.h>

#include "core/log.h"

qcclResult_t engine_stream_arg(const char* fn, qcclStream_t stream, stream_t** out) {
  *out = NULL;
  if (stream == NULL) return qcclSuccess;
  stream_t* s = stream_lookup(stream);
  if (s == NULL)
    return QCCL_ERR(qcclInvalidArgument,
                    "%s: stream=%p is neither NULL nor a live host stream (qcclStreamCreate); "
                    "CUDA streams need device buffers, which this version does not take",
                    fn, stream);
  *out = s;
  return qcclSuccess;
}

void engine_comm_init(qcclComm_t c) {
  pthread_mutex_init(&c->eng_mu, NULL);
  pthread_cond_init(&c->eng_cv, NULL);
  c->refs = 1;
  c->top = c;
}

/* Drops one reference; the last one frees c. */
static void engine_unref(qcclComm_t c) {
  pthread_mutex_lock(&c->eng_mu);
  int left = --c->refs;
  pthread_cond_broadcast(&c->eng_cv);
  pthread_mutex_unlock(&c->eng_mu);
  if (left > 0) return;
  int aborted = atomic_load(&c->aborting);
  pthread_cond_destroy(&c->eng_cv);
  pthread_mutex_destroy(&c->eng_mu);
  comm_free(c, aborted);
}

qcclResult_t engine_comm_usable(const char* fn, qcclComm_t c) {
  if (engine_aborted(c))
    return QCCL_ERR(qcclRemoteError, "%s: communicator %s was aborted (qcclCommAbort)", fn,
                    c->top->name);
  qcclResult_t e = atomic_load(&c->async_error);
  if (e != qcclSuccess) {
    atomic_store(&c->top->tell_asked, 1); /* told as the turn ends */
    return QCCL_ERR(e, "%s: comm failed before (%s)%s%s", fn, qcclGetErrorString(e),
                    c->top->fail_reason[0] ? ": " : "", c->top->fail_reason);
  }
  return qcclSuccess;
}

static int engine_cmp_comm(const void* a, const void* b) {
  uintptr_t x = (uintptr_t) * (const qcclComm_t*)a, y = (uintptr_t) * (const qcclComm_t*)b;
  return x < y ? -1 : x > y;
}

/* Takes the next turn (and a reference) on each of comms[0..n), all at once. */
static void engine_reserve(qcclComm_t* comms, int n, uint64_t* seqs) {
  if (n == 1) {
    pthread_mutex_lock(&comms[0]->eng_mu);
    seqs[0] = comms[0]->seq_next++;
    comms[0]->refs++;
    pthread_mutex_unlock(&comms[0]->eng_mu);
    return;
  }
  qcclComm_t sorted[n];
  memcpy(sorted, comms, sizeof sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, engine_cmp_comm);
  for (int i = 0; i < n; i++) pthread_mutex_lock(&sorted[i]->eng_mu);
  for (int i = 0; i < n; i++) {
    seqs[i] = comms[i]->seq_next++;
    comms[i]->refs++;
  }
  for (int i = n - 1; i >= 0; i--) pthread_mutex_unlock(&sorted[i]->eng_mu);
}

/* Waits until turn seq of c is due; returns 0 if c was aborted first. */
static int engine_wait_turn(qcclComm_t c, uint64_t seq) {
  pthread_mutex_lock(&c->eng_mu);
  while (c->seq_done != seq && !atomic_load(&c->aborting))
    pthread_cond_wait(&c->eng_cv, &c->eng_mu);
  int due = c->seq_done == seq;
  pthread_mutex_unlock(&c->eng_mu);
  return due;
}

/* Ends turn seq of c and drops the call's reference. */
static void engine_end_turn(qcclComm_t c, uint64_t seq) {
  pthread_mutex_lock(&c->eng_mu);
  if (c->seq_done < seq + 1) c->seq_done = seq + 1; /* after an abort, turns end out of order */
  pthread_cond_broadcast(&c->eng_cv);
  pthread_mutex_unlock(&c->eng_mu);
  engine_unref(c);
}

/* Tells c's peers that it failed if a call asked for that while this one
 * held the turn (engine_tell_peers): comm_tell_peers closes c's UCX
 * endpoints, and a UCX worker is driven by one thread at a time, the
 * turn's. */
static void engine_tell_if_asked(qcclComm_t c) {
  if (atomic_load(&c->top->tell_asked) && !engine_aborted(c)) comm_tell_peers(c->top);
}

/* Waits for the turns, runs, ends the turns. */
static qcclResult_t engine_run(qcclComm_t* comms, const uint64_t* seqs, int n, engine_run_fn run,
                               void* arg) {
  qcclResult_t r = qcclSuccess;
  int held = 0;
  for (; held < n && r == qcclSuccess; held++)
    if (!engine_wait_turn(comms[held], seqs[held])) r = engine_comm_usable("qccl", comms[held]);
  if (r == qcclSuccess) r = run(arg);
  for (int i = 0; i < n; i++) {
    if (i < held) engine_tell_if_asked(comms[i]);
    engine_end_turn(comms[i], seqs[i]);
  }
  return r;
}

void engine_tell_peers(qcclComm_t c) {
  if (atomic_load(&c->top->peers_told)) return;
  atomic_store(&c->top->tell_asked, 1);
  pthread_mutex_lock(&c->eng_mu);
  int idle = c->seq_done == c->seq_next && !atomic_load(&c->aborting);
  uint64_t seq = 0;
  if (idle) {
    seq = c->seq_next++;
    c->refs++;
  }
  pthread_mutex_unlock(&c->eng_mu);
  if (!idle) return; /* the call inside tells them as it ends (engine_run) */
  engine_tell_if_asked(c);
  engine_end_turn(c, seq);
}

/* A call queued on a host stream. */
typedef struct {
  stream_task_t task;
  engine_run_fn run;
  void* arg;
  void (*release)(void*);
  int n;
  qcclComm_t* comms;
  uint64_t* seqs;
} engine_task_t;

static qcclResult_t engine_task_run(stream_task_t* t) {
  engine_task_t* e = (engine_task_t*)t;
  return engine_run(e->comms, e->seqs, e->n, e->run, e->arg);
}

static void engine_task_release(stream_task_t* t) {
  engine_task_t* e = (engine_task_t*)t;
  e->release(e->arg);
  free(e);
}

qcclResult_t engine_submit(qcclComm_t* comms, int n, stream_t* s, engine_run_fn run, void* arg,
                           void (*release)(void* arg)) {
  if (s == NULL) {
    uint64_t seqs[n];
    engine_reserve(comms, n, seqs);
    return engine_run(comms, seqs, n, run, arg);
  }
  size_t bytes = sizeof(engine_task_t) + (size_t)n * (sizeof(qcclComm_t) + sizeof(uint64_t));
  engine_task_t* e = calloc(1, bytes);
  if (e == NULL) {
    release(arg);
    return QCCL_ERR(qcclSystemError, "out of memory queueing a call on a stream");
  }
  e->task.run = engine_task_run;
  e->task.release = engine_task_release;
  e->run = run;
  e->arg = arg;
  e->release = release;
  e->n = n;
  e->seqs = (uint64_t*)(e + 1);
  e->comms = (qcclComm_t*)(e->seqs + n);
  memcpy(e->comms, comms, sizeof *comms * (size_t)n);
  engine_reserve(comms, n, e->seqs);
  qcclResult_t r = stream_enqueue(s, &e->task);
  if (r != qcclSuccess) {
    /* give the turns back in order: nothing ran */
    for (int i = 0; i < n; i++) {
      engine_wait_turn(comms[i], e->seqs[i]);
      engine_end_turn(comms[i], e->seqs[i]);
    }
    engine_task_release(&e->task);
  }
  return r;
}

void engine_comm_drain(qcclComm_t c) {
  pthread_mutex_lock(&c->eng_mu);
  while (c->seq_done < c->seq_next) pthread_cond_wait(&c->eng_cv, &c->eng_mu);
  pthread_mutex_unlock(&c->eng_mu);
}

void engine_comm_destroy(qcclComm_t c) {
  pthread_mutex_lock(&c->eng_mu);
  while (c->refs > 1) pthread_cond_wait(&c->eng_cv, &c->eng_mu);
  pthread_mutex_unlock(&c->eng_mu);
  engine_unref(c);
}

void engine_comm_abort(qcclComm_t c) {
  pthread_mutex_lock(&c->eng_mu);
  atomic_store(&c->aborting, 1);
  pthread_cond_broadcast(&c->eng_cv);
  int inside = c->refs - 1;
  pthread_mutex_unlock(&c->eng_mu);
  if (inside > 0)
    QCCL_INFO(LOG_COLL, "comm %s aborted with %d call(s) inside or queued: freed when they end",
              c->name, inside);
  engine_unref(c);
}
