/*
 * engine.h - when calls run: turns per communicator, references, and the
 * hand-over of a batch of calls to a host stream (engine.c).
 *
 * Every call the user issues on a communicator (stream NULL or a host
 * stream) takes the communicator's next turn when it is issued, and runs
 * only when every earlier turn has ended: so calls of one communicator run
 * in issue order on every rank whatever their streams, which is the order
 * every rank agreed to (NCCL's rule). A call holds a reference on its
 * communicators from issue to end; the memory goes when the last reference
 * does (an abort while calls are inside or queued frees nothing under them).
 */
#ifndef QCCL_COLLECTIVES_ENGINE_H_
#define QCCL_COLLECTIVES_ENGINE_H_

#include "collectives/coll.h"
#include "core/stream.h"

/* The host stream named by a call's stream argument: *out = NULL for NULL,
 * the stream for a live host stream; anything else (a cudaStream_t) is
 * refused, naming fn. */
qcclResult_t engine_stream_arg(const char* fn, qcclStream_t stream, stream_t** out);

/* Runs `run(arg)` on the calls' communicators comms[0..n) (distinct):
 * with s NULL now, on this thread, once their turns come; else queued on
 * s, which then owns arg (freed with release(arg) after the run, or at
 * once if queuing fails). */
typedef qcclResult_t (*engine_run_fn)(void* arg);
qcclResult_t engine_submit(qcclComm_t* comms, int n, stream_t* s, engine_run_fn run, void* arg,
                           void (*release)(void* arg));

/* Initialises the engine's part of a new communicator (one reference). */
void engine_comm_init(qcclComm_t c);

/* The user gives up c: waits until no call holds it, then frees it
 * (qcclCommDestroy). */
void engine_comm_destroy(qcclComm_t c);

/* Waits until every call issued on c so far has ended (qcclCommFinalize). */
void engine_comm_drain(qcclComm_t c);

/* Marks c aborted, wakes every call waiting for a turn on it, and drops
 * the user's reference (qcclCommAbort). Returns at once. */
void engine_comm_abort(qcclComm_t c);

/* qcclRemoteError naming fn if c (or the communicator it serves) was
 * aborted, c's sticky error if it failed before, else qcclSuccess. */
qcclResult_t engine_comm_usable(const char* fn, qcclComm_t c);

/* Tells the peers of c, which failed, that it did (comm_tell_peers), from
 * a thread that holds no turn of c: at once if no call holds or waits for
 * a turn, else the call inside does it as it ends. */
void engine_tell_peers(qcclComm_t c);

/* 1 once the user's communicator that c serves was aborted. */
static inline int engine_aborted(const struct qcclComm* c) {
  return atomic_load_explicit(&c->top->aborting, memory_order_relaxed) != 0;
}

#endif /* QCCL_COLLECTIVES_ENGINE_H_ */
