/*
 * agree.c - do the ranks agree on the call they are making? (QCCL_CHECK)
 *
 * NCCL leaves a call whose arguments differ between ranks undefined; here
 * it would pair one rank's chunks with another's and return success with
 * wrong data. So each rank publishes a record of every user's collective
 * in its control line of the node's segment
 * (transport/shm.c, shm_check_exchange): the call's number on this
 * communicator, the collective, count, datatype, op, root, and a hash of
 * the quantization spec for ZeRO++ calls (three words). Once every rank has
 * published, each compares every record with rank 0's; all ranks see the
 * same records, so all find the same disagreement and fail alike with
 * qcclInvalidUsage naming the first argument that differs (in the order
 * above) and two ranks, and the communicator stays failed: no rank may go
 * on with a stream of chunks the others do not share.
 *
 * When. On one host, for a plain collective, the record is posted with the
 * call and compared once the call has run: every shared-memory algorithm
 * waits at least once for every rank, so by then every rank has posted
 * its record and nothing extra is waited for (a store, and W cache lines
 * read at the end). Meanwhile the call's waits compare the records posted
 * so far (every ~20 ms), so ranks that disagree in a way that would stall
 * them (different counts, collectives, roots) fail promptly instead of at
 * the timeout; a call that ran to completion with a disagreement fails all
 * the same, on every rank, and its output is not to be used. ZeRO++ calls,
 * and communicators across hosts, compare before any data moves (one more
 * synchronization of the node's ranks: small beside a call over the
 * network). Across hosts the check covers the ranks of each host (the
 * node's segment); ranks of different hosts are not compared.
 * Send and receive are not checked (their matching is checked by size).
 */
#include <stdio.h>
#include <stdlib.h>

#include "collectives/coll.h"
#include "collectives/zeropp/zpp.h"
#include "core/dtype.h"
#include "core/env.h"
#include "qccl_config.h"
#if QCCL_HAVE_UCX
#include "transport/ucx.h"
#endif

static const char* const agree_kinds[] = {"AllReduce",      "Broadcast", "Reduce",  "AllGather",
                                          "ReduceScatter",  "AlltoAll",  "Gather",  "Scatter",
                                          "Send",           "Recv",      "Barrier", "AllGatherQ",
                                          "ReduceScatterQ", "AllReduceQ"};
#define AGREE_NKINDS (int)(sizeof agree_kinds / sizeof agree_kinds[0])

qcclResult_t comm_fail(qcclComm_t comm, qcclResult_t res);

static uint64_t agree_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

static uint64_t agree_spec(uint64_t h, const quant_params_t* q) {
  h = agree_mix(h, (uint64_t)q->bits);
  h = agree_mix(h, (uint64_t)q->block);
  h = agree_mix(h, (uint64_t)q->asym);
  h = agree_mix(h, (uint64_t)q->stochastic);
  h = agree_mix(h, (uint64_t)q->rotate);
  return agree_mix(h, (uint64_t)q->seed);
}

/* The record of a plain call a, or of the ZeRO++ call z. */
static void agree_record(const coll_args_t* a, const zpp_op_t* z, uint64_t rec[3]) {
  int kind, root = -1;
  size_t count;
  qcclDataType_t dt;
  qcclRedOp_t op;
  uint64_t spec = 0;
  if (z != NULL) {
    kind = (int)COLL_NUM_KINDS + (int)z->kind;
    count = z->count;
    dt = z->dt;
    op = z->op;
    spec = agree_spec(agree_spec(agree_mix(1, (uint64_t)z->plain), &z->q1), &z->q2);
    spec = agree_mix(spec, (uint64_t)z->ef);
  } else {
    kind = (int)a->kind;
    count = a->count;
    dt = a->datatype;
    op = a->op;
    root = a->root;
  }
  rec[0] = (uint64_t)(uint8_t)kind | (uint64_t)(uint8_t)dt << 8 | (uint64_t)(uint8_t)op << 16 |
           (uint64_t)(uint32_t)root << 32;
  rec[1] = (uint64_t)count;
  rec[2] = spec;
}

static const char* agree_kind_name(uint64_t w0) {
  int k = (int)(w0 & 0xff);
  return k < AGREE_NKINDS ? agree_kinds[k] : "?";
}

/* Compares the node's records of one call (recs, as shm_check_collect
 * leaves them) with rank 0's; on a difference fails comm for good with a
 * message naming the first argument that differs and two ranks. */
static qcclResult_t agree_verify(qcclComm_t comm, const shm_t* s, const uint64_t* recs) {
  const uint64_t* r0 = recs;
  for (int j = 1; j < s->nranks; j++) {
    const uint64_t* rj = recs + (size_t)j * SHM_CHECK_WORDS;
    if (rj[0] == r0[0] && rj[1] == r0[1] && rj[2] == r0[2]) continue;
    /* node ranks j and 0 as ranks of comm */
    int gj = comm->node ? topo_rankmap_rank_at(comm->rankmap, comm->node_of[comm->rank], j) : j;
    int g0 = comm->node ? topo_rankmap_rank_at(comm->rankmap, comm->node_of[comm->rank], 0) : 0;
    char what[160];
    if ((r0[0] & 0xff) != (rj[0] & 0xff))
      snprintf(what, sizeof what, "the collective (qccl%s on rank %d, qccl%s on rank %d)",
               agree_kind_name(r0[0]), g0, agree_kind_name(rj[0]), gj);
    else if (r0[1] != rj[1])
      snprintf(what, sizeof what, "count (%llu on rank %d, %llu on rank %d)",
               (unsigned long long)r0[1], g0, (unsigned long long)rj[1], gj);
    else if (((r0[0] >> 8) & 0xff) != ((rj[0] >> 8) & 0xff))
      snprintf(what, sizeof what, "datatype (%s on rank %d, %s on rank %d)",
               dtype_name((qcclDataType_t)((r0[0] >> 8) & 0xff)), g0,
               dtype_name((qcclDataType_t)((rj[0] >> 8) & 0xff)), gj);
    else if (((r0[0] >> 16) & 0xff) != ((rj[0] >> 16) & 0xff))
      snprintf(what, sizeof what, "op (%d on rank %d, %d on rank %d)", (int)((r0[0] >> 16) & 0xff),
               g0, (int)((rj[0] >> 16) & 0xff), gj);
    else if ((r0[0] >> 32) != (rj[0] >> 32))
      snprintf(what, sizeof what, "root (%d on rank %d, %d on rank %d)", (int32_t)(r0[0] >> 32), g0,
               (int32_t)(rj[0] >> 32), gj);
    else
      snprintf(what, sizeof what, "the quantization spec or configuration (ranks %d and %d)", g0,
               gj);
    const uint64_t* mine = recs + (size_t)s->rank * SHM_CHECK_WORDS;
    err_clear();
    qcclResult_t r = QCCL_ERR(qcclInvalidUsage,
                              "qccl%s: the ranks disagree on %s; every rank must make the same "
                              "calls in the same order (QCCL_CHECK=0 turns this check off)",
                              agree_kind_name(mine[0]), what);
    /* the ranks are out of step: the communicator stays failed everywhere */
    if (atomic_load(&comm->async_error) == qcclSuccess) comm->async_error = r;
    return comm_fail(comm, r);
  }
  return qcclSuccess;
}

/* The node's segment the check uses, or NULL when there is nothing to
 * check. */
static shm_t* agree_shm(qcclComm_t comm) {
  if (!comm->check || comm->nranks == 1) return NULL;
  qcclComm_t nc = comm->node ? comm->node : comm;
  return nc->shm && nc->shm->nranks > 1 ? nc->shm : NULL;
}

void coll_wire_call(qcclComm_t comm, uint64_t call) {
#if QCCL_HAVE_UCX
  ucx_set_call(comm->ucx, call);
  if (comm->rail) ucx_set_call(comm->rail->ucx, call);
#else
  (void)comm;
  (void)call;
#endif
}

qcclResult_t coll_agree_begin(qcclComm_t comm, const coll_args_t* a, const zpp_op_t* z) {
  if (comm->nnodes == 1 && agree_shm(comm) == NULL) return qcclSuccess; /* nothing to do */
  uint64_t rec[SHM_CHECK_WORDS];
  agree_record(a, z, rec);
  uint64_t c = comm->check_calls++;
  /* across hosts every message of the call carries its number and, when
   * checking, its record's hash (transport/ucx.c): ranks of different
   * hosts that disagree, or a message a failed call left behind, are
   * caught by the receiver */
  if (comm->nnodes > 1) {
    uint64_t d = c + 1;
    if (comm->check) d = agree_mix(agree_mix(agree_mix(agree_mix(d, rec[0]), rec[1]), rec[2]), 7);
    coll_wire_call(comm, d & ~COLL_WIRE_P2P);
  }
  shm_t* s = agree_shm(comm);
  if (s == NULL) return qcclSuccess;
  /* one host, a plain collective: every shared-memory algorithm waits for
   * every rank at least once, so the records are compared after the call
   * (coll_agree_end) at no extra synchronization; the waits of the call
   * watch them meanwhile. Otherwise: compared before any data moves. */
  int lazy = comm->node == NULL && z == NULL;
  shm_check_publish(s, c, rec, lazy);
  if (lazy) return qcclSuccess;
  qcclResult_t w = shm_check_collect(s, c, comm->check_recs);
  if (w != qcclSuccess) return comm_fail(comm, w); /* a peer died or aborted meanwhile */
  return agree_verify(comm, s, comm->check_recs);
}

qcclResult_t coll_agree_end(qcclComm_t comm, qcclResult_t r) {
  shm_t* s = agree_shm(comm);
  if (s == NULL || !s->check_watch) return r;
  /* the call failed: if a peer posted another call, that is the cause (a
   * peer that saw it first may have aborted the segment, so this rank's
   * wait saw only the abort); otherwise the failure stands as it is */
  if (r != qcclSuccess && r != qcclInvalidUsage) {
    if (!shm_check_peek(s, comm->check_recs)) return r;
    return agree_verify(comm, s, comm->check_recs);
  }
  qcclResult_t w = shm_check_collect(s, s->check_call, comm->check_recs);
  if (w != qcclSuccess) return r != qcclSuccess ? r : comm_fail(comm, w);
  qcclResult_t v = agree_verify(comm, s, comm->check_recs);
  return v != qcclSuccess ? v : r;
}

qcclResult_t coll_agree_init(qcclComm_t comm) {
  int64_t on;
  QCCL_CHECK(env_get_int("QCCL_CHECK", 1, 0, 1, &on));
  comm->check = (int)on;
  qcclComm_t nc = comm->node ? comm->node : comm;
  if (!on || nc->shm == NULL) return qcclSuccess;
  comm->check_recs = calloc((size_t)nc->shm->nranks * SHM_CHECK_WORDS, sizeof *comm->check_recs);
  if (comm->check_recs == NULL) return QCCL_ERR(qcclSystemError, "out of memory");
  return qcclSuccess;
}
