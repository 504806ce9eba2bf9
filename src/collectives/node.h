/*
 * node.h - the algorithms inside one node, over its shared segment (one
 * file each: allreduce.c, reduce.c, ...): plans (plan.h) whose leaves wait
 * on the segment's step counters. The selection (select.c) builds them
 * for a communicator on one host; the two-level and ZeRO++ compositions
 * build them for their node communicators.
 *
 * Each builder takes a call checked by the entry point (count > 0 but for
 * Barrier) and returns a plan for comm, not started (plan_get starts it).
 */
#ifndef QCCL_COLLECTIVES_NODE_H_
#define QCCL_COLLECTIVES_NODE_H_

#include "collectives/plan.h"
#include "core/memcopy.h"

qcclResult_t node_allreduce_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t node_reduce_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t node_broadcast_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t node_allgather_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t node_reducescatter_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t node_alltoall_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t node_gather_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t node_scatter_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);
qcclResult_t node_barrier_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);

/* A small AllReduce in one handoff (allreduce_oneshot.c), for the calls
 * node_allreduce_oneshot_fits (the same on every rank). */
int node_allreduce_oneshot_fits(qcclComm_t comm, size_t bytes);
qcclResult_t node_allreduce_oneshot_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);

/* A mid-size AllReduce on 2 ranks where each reads the other's whole input
 * single copy (allreduce_whole.c), for the calls node_allreduce_whole_fits
 * (the same on every rank). */
int node_allreduce_whole_fits(qcclComm_t comm, size_t bytes);
qcclResult_t node_allreduce_whole_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out);

/* The test that ends a rooted call that ran chunks: every rank finished
 * the last one. The root of Reduce and Gather waits for it (it read every
 * part), and so does a rank whose buffer was read single copy (it must
 * outlive its readers); the others end once they posted their last
 * chunk, the next call's chunk test guarding their slots. */
static inline qcclResult_t node_test_rooted_end(shm_t* s, size_t nchunks) {
  if (nchunks == 0) return qcclSuccess;
  return shm_test_all(s, 3 * (s->chunk_seq - 1) + 3);
}

/* The split of a rooted call on 2 ranks (broadcast.c, scatter.c, gather.c,
 * "Split"), on the root: of a block of bytes in chunks of unit bytes it
 * stages half of the chunks (all with `all`), the first *end bytes, and
 * publishes the count with reg (its fd; cma_split_use keeps every chunk
 * count below 2^31) for the other rank's node_split_staged. */
static inline void node_split_plan(size_t bytes, size_t unit, int all, shm_reg_t* reg,
                                   size_t* nstaged, size_t* end) {
  size_t nchunks = (bytes + unit - 1) / unit;
  *nstaged = all ? nchunks : nchunks / 2;
  *end = *nstaged * unit < bytes ? *nstaged * unit : bytes;
  reg->fd = (int32_t)*nstaged;
}

/* A staged root's own block, copied while it waits for the others (a
 * peer's chunk, its slot) rather than whole before them (gather.c,
 * scatter.c): up to max more of its bytes from own to out, *done of them
 * copied so far; 0 when none was left. Pieces of NODE_OWN_PIECE while it
 * waits, the rest at the end. */
#define NODE_OWN_PIECE ((size_t)64 << 10)
static inline int node_own_copy(char* out, const char* own, size_t bytes, size_t* done, size_t max,
                                int stream) {
  if (*done >= bytes) return 0;
  size_t n = bytes - *done < max ? bytes - *done : max;
  copy_out(out + *done, own + *done, n, stream);
  *done += n;
  return 1;
}

/* A 2-rank exchange (transport/shm_xch.c, chunk g at place rot of the
 * slots) as a plan's step (allgather.c, alltoall.c): at stage 0 (*stage)
 * this rank's n bytes at mine go out, then its own block is copied (own
 * to own_dst, unless they are the same bytes); then, once the peer's
 * block is out, it is read into peer_dst. qcclSuccess when done. */
static inline qcclResult_t node_xch(plan_t* p, int* stage, uint64_t g, size_t rot, const char* mine,
                                    size_t n, char* own_dst, const char* own, char* peer_dst,
                                    int stream) {
  shm_t* s = p->comm->shm;
  if (*stage == 0) {
    PLAN_TEST(p, shm_xch_put(s, g, rot, mine, n, 2 * n)); /* the call's output: 2 blocks */
    coll_stats_shm(p->comm, n);
    if (own_dst != own) copy_out(own_dst, own, n, stream);
    *stage = 1;
  }
  PLAN_TEST(p, shm_xch_test(s, g));
  shm_xch_get(s, g, rot, peer_dst, n);
  return qcclSuccess;
}

/* The split's piece k (of nstaged, one per staged chunk) of the bytes
 * [end, bytes) that cross in the kernel, in whole pages. */
static inline void node_split_piece(size_t bytes, size_t end, size_t nstaged, size_t k, size_t* lo,
                                    size_t* len) {
  coll_page_piece(bytes - end, nstaged, k, lo, len);
  *lo += end;
}

/* The split of a rooted call on 2 ranks (broadcast.c, scatter.c, gather.c,
 * "Split"), on the rank that is not the root, once the root posted chunk
 * g's 3g+1: the staged chunk count it published with its buffer `which`
 * (the single-copy reg's fd), and the staged bytes, n chunks of unit
 * bytes and at most bytes; *nstaged 0 and *end bytes where it published
 * none. A count the call cannot hold is the root's error. */
static inline qcclResult_t node_split_staged(const shm_t* s, const char* coll, int root, uint64_t g,
                                             int which, size_t unit, size_t bytes, size_t* nstaged,
                                             size_t* end) {
  int32_t n = shm_reg_peer_aux(s, root, g, which);
  *nstaged = 0;
  *end = bytes;
  if (n <= 0) return qcclSuccess;
  if ((size_t)n * unit >= bytes + unit)
    return QCCL_ERR(qcclInternalError, "%s: root %d stages %d chunks of %zu bytes", coll, root,
                    (int)n, bytes);
  *nstaged = (size_t)n;
  *end = (size_t)n * unit < bytes ? (size_t)n * unit : bytes;
  return qcclSuccess;
}

#endif /* QCCL_COLLECTIVES_NODE_H_ */
