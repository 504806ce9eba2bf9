/*
 * hier_pipe.h - the pipeline of the two-level collectives: a call is cut
 * into segments, and for each segment k
 *   pre(k)   runs on the caller's thread (node stage before the network),
 *   rail(k)  runs on the communicator's rail stream once pre(k) is done
 *            (the network stage),
 *   post(k)  runs on the caller's thread once rail(k) is done,
 * in the order pre(0), pre(1), post(0), pre(2), post(1), ..., so that the
 * network stage of segment k overlaps the node stages of its neighbours.
 * The caller's thread alone touches the node's shared segment and the rail
 * stream's thread alone the rail's transport, each in the same order on
 * every rank. With one segment everything runs on the caller's thread.
 */
#ifndef QCCL_COLLECTIVES_HIER_PIPE_H_
#define QCCL_COLLECTIVES_HIER_PIPE_H_

#include "collectives/coll.h"

/* The segment size the two-level collectives pipeline by. */
#define HIER_SEGMENT_BYTES (8u << 20)

typedef struct {
  void* arg;
  int nsegs;
  qcclResult_t (*pre)(void* arg, int k);  /* may be NULL */
  qcclResult_t (*rail)(void* arg, int k); /* required */
  qcclResult_t (*post)(void* arg, int k); /* may be NULL */
} hier_pipe_ops_t;

/* Runs the pipeline of a call on comm (whose rail stream it uses); returns
 * the first failure of either side. */
qcclResult_t hier_pipe_run(qcclComm_t comm, const hier_pipe_ops_t* ops);

#endif /* QCCL_COLLECTIVES_HIER_PIPE_H_ */
