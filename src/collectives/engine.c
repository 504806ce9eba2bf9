/*
 * engine.c - when calls run: per-communicator turns, references, and
 * calls handed to host streams.
 *
 * Turns. A call takes turn seq_next++ of each communicator it uses when it
 * is issued (under every one's lock at once, taken in address order, so
 * that two threads issuing calls on the same pair of communicators get
 * turns in one consistent order and no two calls can wait for each other),
 * and notes there which earlier turns it needs ended before it runs:
 *
 *  - a call that is one plain collective on one communicator gets the
 *    communicator's next collective number k and runs on lane k % nlanes
 *    (QCCL_LANES, 2 by default): it needs the previous call of its lane
 *    and the last earlier call that runs alone;
 *  - any other call (a group of several, sends and receives, ZeRO++ calls,
 *    the first call of a lane, which makes it) runs alone: it needs every
 *    earlier turn (the last one of each lane and the last alone).
 *
 * Calls of one lane end in order, so "ended" is one counter per lane and
 * one for the calls that run alone. Every rank gives the same numbers to
 * the same collectives (they issue them in the same order), so each lane
 * carries the same sequence of collectives everywhere, over its own
 * segment and UCX worker (comm.c, comm_lane_make); two streams of one
 * communicator thus progress at once, and the earliest call not ended is
 * always free to run on every rank, so no order of streams deadlocks. A
 * call on the NULL stream runs on the caller's thread: with nothing queued
 * its turn is already due, and the cost is two uncontended lock round
 * trips. A call on a host stream is a task of that stream (core/stream.c)
 * that waits for its turns on the stream's thread.
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

/* Frees c once its last reference went. */
static void engine_free(qcclComm_t c) {
  int aborted = atomic_load(&c->aborting);
  pthread_cond_destroy(&c->eng_cv);
  pthread_mutex_destroy(&c->eng_mu);
  comm_free(c, aborted);
}

/* Drops one reference; the last one frees c. */
static void engine_unref(qcclComm_t c) {
  pthread_mutex_lock(&c->eng_mu);
  int left = --c->refs;
  pthread_cond_broadcast(&c->eng_cv);
  pthread_mutex_unlock(&c->eng_mu);
  if (left == 0) engine_free(c);
}

static int engine_cmp_comm(const void* a, const void* b) {
  uintptr_t x = (uintptr_t) * (const qcclComm_t*)a, y = (uintptr_t) * (const qcclComm_t*)b;
  return x < y ? -1 : x > y;
}

/* Fills t as c's next turn (c's lock held): a call with ncoll plain
 * collectives, one alone or beside other lanes. */
static void engine_take(qcclComm_t c, int ncoll, int alone, engine_turn_t* t) {
  memset(t, 0, sizeof *t);
  t->comm = c;
  t->seq = c->seq_next++;
  c->refs++;
  int nl = c->nlanes; /* 1..COMM_MAX_LANES, set at init */
  t->lane_base = c->lane_next;
  c->lane_next += (uint64_t)ncoll;
  t->lane = -1;
  if (!alone && ncoll == 1) {
    int k = (int)(t->lane_base % (uint64_t)nl);
    if (k == 0 || c->lane_made[k]) t->lane = k;
  }
  t->need_serial = c->serial_last;
  if (t->lane >= 0) {
    t->need_lane[t->lane] = c->lane_last[t->lane];
    c->lane_last[t->lane] = t->seq + 1;
    return;
  }
  for (int k = 0; k < nl; k++) t->need_lane[k] = c->lane_last[k];
  for (int j = 0; j < ncoll && j < nl; j++)
    c->lane_made[(t->lane_base + (uint64_t)j) % (uint64_t)nl] = 1;
  c->serial_last = t->seq + 1;
}

/* 1 once every turn t needs has ended (c's lock held). */
static int engine_due(const qcclComm_t c, const engine_turn_t* t) {
  if (c->serial_done < t->need_serial) return 0;
  for (int k = 0; k < COMM_MAX_LANES; k++)
    if (c->lane_done[k] < t->need_lane[k]) return 0;
  return 1;
}

/* Counts the call of turn t in when it is due (c's lock held); 1 if so. */
static int engine_count_in(qcclComm_t c, engine_turn_t* t) {
  if (!engine_due(c, t)) return 0;
  c->running++;
  t->counted = 1;
  return 1;
}

/* Takes the next turn (and a reference) on each of comms[0..n), all at once.
 * now (a blocking call): a single turn due at once is counted in under the
 * same lock, which spares engine_wait_turn's. */
static void engine_reserve(qcclComm_t* comms, const int* ncoll, int n, int alone, int now,
                           engine_turn_t* turns) {
  alone = alone || n != 1;
  if (n == 1) {
    qcclComm_t c = comms[0];
    pthread_mutex_lock(&c->eng_mu);
    engine_take(c, ncoll[0], alone, &turns[0]);
    if (now && !atomic_load(&c->aborting)) engine_count_in(c, &turns[0]);
    pthread_mutex_unlock(&c->eng_mu);
    return;
  }
  qcclComm_t sorted[n];
  memcpy(sorted, comms, sizeof sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, engine_cmp_comm);
  for (int i = 0; i < n; i++) pthread_mutex_lock(&sorted[i]->eng_mu);
  for (int i = 0; i < n; i++) engine_take(comms[i], ncoll[i], alone, &turns[i]);
  for (int i = n - 1; i >= 0; i--) pthread_mutex_unlock(&sorted[i]->eng_mu);
}

/* Waits until turn t of its communicator is due, and counts the call in;
 * returns 0 if the communicator was aborted first. */
static int engine_wait_turn(engine_turn_t* t) {
  qcclComm_t c = t->comm;
  pthread_mutex_lock(&c->eng_mu);
  while (!engine_due(c, t) && !atomic_load(&c->aborting)) pthread_cond_wait(&c->eng_cv, &c->eng_mu);
  int due = engine_count_in(c, t);
  pthread_mutex_unlock(&c->eng_mu);
  return due;
}

/* Tells c's peers that it failed if a call asked for that (engine_tell_peers):
 * comm_tell_peers closes c's UCX endpoints (every lane's), and a UCX worker
 * is driven by one thread at a time, so only once no call is inside; a
 * call that comes in after a failure is refused before it drives anything
 * (engine_run). */
static void engine_tell_if_asked(qcclComm_t c) {
  if (atomic_load(&c->top->tell_asked) && !comm_aborted(c)) comm_tell_peers(c->top);
}

/* Ends turn t, tells the peers if it was the last call inside and that was
 * asked, and drops the call's reference (under the same lock when there is
 * nothing to tell: one lock per call fewer). */
static void engine_end_turn(engine_turn_t* t) {
  qcclComm_t c = t->comm;
  pthread_mutex_lock(&c->eng_mu);
  /* after an abort, turns end out of order: the counters only grow */
  uint64_t* done = t->lane >= 0 ? &c->lane_done[t->lane] : &c->serial_done;
  if (*done < t->seq + 1) *done = t->seq + 1;
  c->ended++;
  int last = 0;
  if (t->counted) last = --c->running == 0;
  /* a request to tell made after this reads it finds the comm idle and
   * tells itself (engine_tell_peers) */
  int tell = last && atomic_load(&c->top->tell_asked);
  int left = tell ? -1 : --c->refs;
  pthread_cond_broadcast(&c->eng_cv);
  pthread_mutex_unlock(&c->eng_mu);
  if (left == 0) engine_free(c);
  if (!tell) return;
  engine_tell_if_asked(c);
  engine_unref(c);
}

/* Waits for the turns, runs, ends the turns. */
static qcclResult_t engine_run(engine_turn_t* turns, int n, engine_run_fn run, void* arg) {
  qcclResult_t r = qcclSuccess;
  for (int i = 0; i < n && r == qcclSuccess; i++)
    if (!turns[i].counted && !engine_wait_turn(&turns[i])) r = comm_usable("qccl", turns[i].comm);
  /* a communicator that failed meanwhile: refused before any traffic */
  for (int i = 0; i < n && r == qcclSuccess; i++) r = comm_usable("qccl", turns[i].comm);
  if (r == qcclSuccess) r = run(arg, turns);
  /* the user reads why from each communicator of the call, and not every
   * way out copies it there (a peer's report seen as the call begins, a
   * communicator found failed or aborted as its turn came); before the
   * turns end, which may free a communicator that was aborted */
  if (r != qcclSuccess && err_last()[0] != '\0')
    for (int i = 0; i < n; i++)
      snprintf(turns[i].comm->last_error, sizeof turns[i].comm->last_error, "%s", err_last());
  for (int i = 0; i < n; i++) engine_end_turn(&turns[i]);
  return r;
}

qcclResult_t engine_lane(const engine_turn_t* t, int j, qcclComm_t* out) {
  qcclComm_t c = t->comm;
  int k = (int)((t->lane_base + (uint64_t)j) % (uint64_t)c->nlanes);
  *out = c;
  if (k == 0) return qcclSuccess;
  if (c->lane[k] == NULL) QCCL_CHECK(comm_lane_make(c, k));
  *out = c->lane[k];
  return qcclSuccess;
}

void engine_tell_peers(qcclComm_t c) {
  if (atomic_load(&c->top->peers_told)) return;
  atomic_store(&c->top->tell_asked, 1);
  pthread_mutex_lock(&c->eng_mu);
  int idle = c->ended == c->seq_next && !atomic_load(&c->aborting);
  engine_turn_t t;
  if (idle) {
    engine_take(c, 0, 1, &t);
    t.counted = 1;
    c->running++;
  }
  pthread_mutex_unlock(&c->eng_mu);
  if (!idle) return; /* the last call inside tells them as it ends */
  engine_end_turn(&t);
}

/* A call queued on a host stream. */
typedef struct {
  stream_task_t task;
  engine_run_fn run;
  void* arg;
  void (*release)(void*);
  int n;
  engine_turn_t* turns;
} engine_task_t;

static qcclResult_t engine_task_run(stream_task_t* t) {
  engine_task_t* e = (engine_task_t*)t;
  return engine_run(e->turns, e->n, e->run, e->arg);
}

static void engine_task_release(stream_task_t* t) {
  engine_task_t* e = (engine_task_t*)t;
  e->release(e->arg);
  free(e);
}

qcclResult_t engine_submit(qcclComm_t* comms, const int* ncoll, int n, int alone, stream_t* s,
                           engine_run_fn run, void* arg, void (*release)(void* arg)) {
  if (s == NULL) {
    engine_turn_t turns[n];
    engine_reserve(comms, ncoll, n, alone, 1, turns);
    return engine_run(turns, n, run, arg);
  }
  engine_task_t* e = calloc(1, sizeof(engine_task_t) + (size_t)n * sizeof(engine_turn_t));
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
  e->turns = (engine_turn_t*)(e + 1);
  engine_reserve(comms, ncoll, n, alone, 0, e->turns);
  qcclResult_t r = stream_enqueue(s, &e->task);
  if (r != qcclSuccess) {
    /* give the turns back in order: nothing ran */
    for (int i = 0; i < n; i++) {
      engine_wait_turn(&e->turns[i]);
      engine_end_turn(&e->turns[i]);
    }
    engine_task_release(&e->task);
  }
  return r;
}

void engine_comm_drain(qcclComm_t c) {
  pthread_mutex_lock(&c->eng_mu);
  while (c->ended < c->seq_next) pthread_cond_wait(&c->eng_cv, &c->eng_mu);
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
