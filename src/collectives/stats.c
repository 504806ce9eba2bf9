/*
 * stats.c - the traffic counters of qcclCommGetStats.
 *
 * Bytes are counted where they leave the rank: the point-to-point layer
 * (sendrecv.c) counts every send by the host of its peer, and the
 * shared-memory algorithms count what they write into the segment for the
 * other ranks to read. Both add to the slot of the user's call in
 * progress, which its entry opens (coll_stats_enter) and closes; internal
 * communicators share their parent's counters, so the node and rail stages
 * of a composition (a two-level collective, a ZeRO++ call) land under the
 * user's call. Only entries open a slot (the stages inside a call are its
 * plan's children, never calls of their own), so a call is counted once,
 * where the user made it.
 */
#include <string.h>

#include "collectives/check.h"
#include "collectives/coll.h"

/* The counter slot of each kind. */
static const int coll_stat_slot[COLL_NUM_KINDS] = {
    [COLL_ALLREDUCE] = qcclStatAllReduce,
    [COLL_BROADCAST] = qcclStatBroadcast,
    [COLL_REDUCE] = qcclStatReduce,
    [COLL_ALLGATHER] = qcclStatAllGather,
    [COLL_REDUCESCATTER] = qcclStatReduceScatter,
    [COLL_ALLTOALL] = qcclStatAlltoAll,
    [COLL_GATHER] = qcclStatGather,
    [COLL_SCATTER] = qcclStatScatter,
    [COLL_SEND] = qcclStatSendRecv,
    [COLL_RECV] = qcclStatSendRecv,
    [COLL_BARRIER] = qcclStatBarrier,
};

int coll_stat_slot_of(coll_kind_t kind) {
  return coll_stat_slot[kind];
}

void coll_stats_enter(qcclComm_t comm, int slot, uint64_t calls) {
  comm_stats_t* st = comm->stats;
  st->cur = slot;
  st->coll[slot].calls += calls;
}

void coll_stats_leave(qcclComm_t comm) {
  comm->stats->cur = -1;
}

void coll_stats_attach(qcclComm_t c, comm_stats_t* sink) {
  if (c == NULL) return;
  c->stats = sink;
  coll_stats_attach(c->node, sink);
  coll_stats_attach(c->rail, sink);
}

qcclResult_t qcclCommGetStats(qcclComm_t comm, qcclStats_t* stats) {
  err_clear();
  QCCL_CHECK(check_comm("qcclCommGetStats", comm));
  if (stats == NULL) return QCCL_ERR(qcclInvalidArgument, "stats: NULL pointer");
  if (stats->size != sizeof(qcclStats_t))
    return QCCL_ERR(qcclInvalidArgument,
                    "stats->size=%zu is not sizeof(qcclStats_t)=%zu (use QCCL_STATS_INITIALIZER)",
                    stats->size, sizeof(qcclStats_t));
  qcclStatCounters_t total = {0, 0, 0};
  for (int i = 0; i < qcclStatNumColls; i++) {
    qcclStatCounters_t sum = {0, 0, 0};
    /* the lanes count their collectives on their own (engine.h) */
    for (int k = 0; k < COMM_MAX_LANES; k++) {
      const qcclComm_t l = comm_lane_at(comm, k);
      if (l == NULL) continue;
      const qcclStatCounters_t* c = &l->stats->coll[i];
      sum.calls += c->calls;
      sum.bytesIntra += c->bytesIntra;
      sum.bytesInter += c->bytesInter;
    }
    stats->coll[i] = sum;
    total.calls += sum.calls;
    total.bytesIntra += sum.bytesIntra;
    total.bytesInter += sum.bytesInter;
  }
  stats->total = total;
  return qcclSuccess;
}

qcclResult_t qcclCommResetStats(qcclComm_t comm) {
  err_clear();
  QCCL_CHECK(check_comm("qcclCommResetStats", comm));
  for (int k = 0; k < COMM_MAX_LANES; k++) {
    const qcclComm_t l = comm_lane_at(comm, k);
    if (l != NULL) memset(l->stats->coll, 0, sizeof l->stats->coll);
  }
  return qcclSuccess;
}
