/*
 * stream.h - host streams: an ordered queue of tasks run by a thread of the
 * stream's own, and events that mark a point in that order.
 *
 * This layer knows nothing of collectives: a task is a function with a
 * release hook. The collective layer (collectives/engine.c) makes tasks
 * of calls and decides, with per-communicator turns, the order in which
 * tasks of different streams touch one communicator.
 */
#ifndef QCCL_CORE_STREAM_H_
#define QCCL_CORE_STREAM_H_

#include <stdint.h>

#include "core/err.h"

typedef struct stream stream_t;
typedef struct stream_task stream_task_t;

struct stream_task {
  /* Runs the task on the stream's thread; a failure leaves its message in
   * the thread's last error (err_last). */
  qcclResult_t (*run)(stream_task_t* t);
  /* Frees the task; called once, after run, once the stream counted it
   * done (so what it signals finds the stream past it). */
  void (*release)(stream_task_t* t);
  stream_task_t* next;
};

/* Makes a stream (its thread sleeps until tasks come). visible: one the
 * user named (qcclStreamCreate), found by stream_lookup; else internal. */
qcclResult_t stream_create(int visible, stream_t** out);

/* Runs what is queued, then frees s (an internal stream). */
void stream_destroy(stream_t* s);

/* Tasks queued on s so far. */
uint64_t stream_queued(stream_t* s);

/* Waits until the first n tasks queued on s are done (their release may
 * still be running; it must not touch what the waiter frees). */
void stream_wait(stream_t* s, uint64_t n);

/* The live host stream at address p, or NULL if p is not one (NULL, a
 * destroyed stream, or a value of another kind such as a cudaStream_t). */
stream_t* stream_lookup(const void* p);

/* Queues t on s. Fails (and releases nothing) when s is being destroyed. */
qcclResult_t stream_enqueue(stream_t* s, stream_task_t* t);

#endif /* QCCL_CORE_STREAM_H_ */
