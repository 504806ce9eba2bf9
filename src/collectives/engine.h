/*
 * engine.h - when calls run: turns per communicator, references, and the
 * hand-over of a batch of calls to a host stream (engine.c).
 *
 * Every call the user issues on a communicator (stream NULL or a host
 * stream) takes the communicator's next turn when it is issued. A plain
 * collective runs on the lane its number names once the earlier calls of
 * that lane (and every earlier call that runs alone) have ended; any other
 * call runs once every earlier turn has ended. So each lane sees the
 * communicator's collectives in issue order on every rank, which is the
 * order every rank agreed to (NCCL's rule), and calls on different lanes
 * progress at once. A call holds a reference on its
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

/* A call's turn on one of its communicators (engine.c): the call runs
 * when every turn it needs has ended. lane_base is the number of its
 * first plain collective on comm (each rank gives the same numbers: the
 * k-th collective runs on lane k % nlanes everywhere); lane is the lane
 * the call runs on beside other lanes' calls, -1 when it runs alone. */
typedef struct {
  qcclComm_t comm;
  uint64_t seq;
  uint64_t lane_base;
  int lane;
  int counted; /* 1 while the call is inside (running counted) */
  uint64_t need_serial;
  uint64_t need_lane[COMM_MAX_LANES];
} engine_turn_t;

/* Runs `run(arg, turns)` on the calls' communicators comms[0..n)
 * (distinct), which hold ncoll[i] plain collectives each (other calls:
 * ZeRO++, sends and receives, not counted): with s NULL now, on this
 * thread, once their turns come; else queued on s, which then owns arg
 * (freed with release(arg) after the run, or at once if queuing fails).
 * A call that is exactly one plain collective on one communicator
 * (alone 0) runs beside the calls of other lanes; any other runs alone.
 * turns[i] is comms[i]'s. */
typedef qcclResult_t (*engine_run_fn)(void* arg, const engine_turn_t* turns);
qcclResult_t engine_submit(qcclComm_t* comms, const int* ncoll, int n, int alone, stream_t* s,
                           engine_run_fn run, void* arg, void (*release)(void* arg));

/* The communicator that runs the j-th plain collective of the call whose
 * turn on c is t: lane (t->lane_base + j) % nlanes, made now by the call
 * that first runs on it (which runs alone, so nothing else uses the
 * bootstrap meanwhile). */
qcclResult_t engine_lane(const engine_turn_t* t, int j, qcclComm_t* out);

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

/* Tells the peers of c, which failed, that it did (comm_tell_peers), from
 * a thread that holds no turn of c: at once if no call holds or waits for
 * a turn, else the call inside does it as it ends. */
void engine_tell_peers(qcclComm_t c);

#endif /* QCCL_COLLECTIVES_ENGINE_H_ */
