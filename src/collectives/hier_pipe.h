/*
 * hier_pipe.h - the segment pipeline of the two-level and ZeRO++
 * compositions (hier_pipe.c, UCC's cl/hier shape): a call is cut into
 * segments, and for each segment k
 *   pre(k)   a stage on the node communicator before the network,
 *   rail(k)  the network stage, on the rail (or another communicator that
 *            reaches the other hosts), once pre(k) is done,
 *   post(k)  a stage on the node communicator once rail(k) is done,
 * each a plan (a child of the composition) between local compute done as
 * the stage is readied and as it ends (the codec, a reduction). The node stages run in the order
 * pre(0), pre(1), post(0), pre(2), post(1), ..., one at a time, and the rail stages in order, one
 * at a time: so every rank of a node runs the same node stages in the same order (their chunks
 * share the segment's numbering), and the network stage of segment k overlaps the node stages of
 * its neighbours. One thread steps both children (the node stage's chunks return to the pipeline
 * after each chunk, so the network stage is stepped in between).
 */
#ifndef QCCL_COLLECTIVES_HIER_PIPE_H_
#define QCCL_COLLECTIVES_HIER_PIPE_H_

#include "collectives/plan.h"

/* The segment size the two-level collectives pipeline by. */
#define HIER_SEGMENT_BYTES (8u << 20)

typedef struct hier_pipe hier_pipe_t;

/* A stage of segment k: readies its plan (started) in *child, or sets it
 * NULL when the stage has nothing left to do (local compute done here). */
typedef qcclResult_t (*hier_stage_fn)(hier_pipe_t* h, int k, plan_t** child);

/* Local compute once the stage of segment k ended (its child, or at once
 * when it had none). */
typedef qcclResult_t (*hier_done_fn)(hier_pipe_t* h, int k);

typedef struct {
  const char* name;
  hier_stage_fn pre; /* may be NULL, as may every done */
  hier_done_fn pre_done;
  hier_stage_fn rail; /* required */
  hier_done_fn rail_done;
  hier_stage_fn post;
  hier_done_fn post_done;
  /* the plan type's own start, before any stage (NULL: none) */
  qcclResult_t (*start)(hier_pipe_t* h);
  void (*destroy)(hier_pipe_t* h); /* frees the children (NULL: none) */
} hier_pipe_ops_t;

/* The head of a pipelined composition's plan (its type embeds it first). */
struct hier_pipe {
  plan_t p;
  const hier_pipe_ops_t* hops;
  int nsegs;
  /* the schedule: the node stage in progress (node_k: its segment,
   * node_post: post rather than pre) and the next one, the rail stage in
   * progress and how many are done */
  plan_t* node_cur;
  int node_k, node_post, node_busy;
  int pre_done;
  plan_t* rail_cur;
  int rail_k, rail_busy, rail_done;
};

/* Builds the plan of a pipelined composition of `bytes` (its type, which
 * embeds hier_pipe_t first) over ops, for call a on comm. */
qcclResult_t hier_pipe_plan(size_t bytes, const hier_pipe_ops_t* ops, qcclComm_t comm,
                            const coll_args_t* a, hier_pipe_t** out);

/* Readies child for a stage of a pipeline of more than one segment: it
 * returns to the pipeline after each chunk. */
static inline void hier_stage_child(const hier_pipe_t* h, plan_t* child) {
  child->yield = h->nsegs > 1;
}

#endif /* QCCL_COLLECTIVES_HIER_PIPE_H_ */
