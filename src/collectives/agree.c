/*
 * agree.c - do the ranks agree on the call they are making? (QCCL_CHECK)
 *
 * NCCL leaves a call whose arguments differ between ranks undefined; here
 * it would pair one rank's chunks with another's and return success with
 * wrong data. So each rank publishes a record of every user's collective
 * in its control line of the node's segment
 * (transport/shm.c, shm_check_publish): the call's number on this
 * communicator, the collective, count, datatype, op, root, and a hash of
 * the quantization spec for ZeRO++ calls (three words). Once every rank has
 * published, each compares every record with rank 0's; all ranks see the
 * same records, so all find the same disagreement and fail alike with
 * qcclInvalidUsage naming the first argument that differs (in the order
 * above) and two ranks (a rank whose call needed nothing from the others
 * at one of its next calls: below), and the communicator stays failed: no rank may
 * go on with a stream of chunks the others do not share.
 *
 * When. On one host, for a plain collective, the record is posted with the
 * call and compared once the call has run, if every rank has posted by
 * then (a store, and W cache lines read at the end, which the call's waits
 * prefetched as they saw each rank's step: shm_test_counter). A call that
 * waited for every rank always finds them all; one that did not (an eager
 * root, a Gather's sender) leaves the comparison to the lane's next calls,
 * which make it, without waiting, as they begin (AG_PREV) and end, or to
 * qcclCommFinalize: waiting for the slowest rank's record at the end tied
 * every eager call to it (2.5 of the 3 us of a 4 KiB Broadcast on 4 ranks
 * over 2 cores). Meanwhile the call's waits compare the records posted so
 * far (every ~20 ms), so ranks that disagree in a way that would stall
 * them (different counts, collectives, roots) fail promptly instead of at
 * the timeout; a call that ran to completion with a disagreement fails all
 * the same, on every rank (at a later call of the lane or at
 * qcclCommFinalize), and its output is not to be used.
 *
 * How far ahead. The records of the last SHM_CHECK_RING calls stay in
 * each rank's control line (transport/shm.h), and each rank publishes how
 * many calls it has compared; a rank posts the record of call c, which
 * takes the place of call c - SHM_CHECK_RING's, only once every rank
 * compared that one. So an eager rank runs up to SHM_CHECK_RING - 1 calls
 * ahead of the slowest before it waits for the check (the slots allow as
 * much for small calls: shm_test_chunk_part). An eager rank compares its
 * pending calls in batches, once AGREE_BATCH are pending, not at every
 * call: each look at a record that a peer behind it is still writing
 * took that line from the peer's core, and a 4 KiB Broadcast on 2 ranks
 * looking at every call took 1.19 us a call against 1.04 with two
 * records. A call that waited for every rank (its waits saw each reach
 * a step of the call, shm_check_saw_all, or a kind whose ranks all need
 * each other's data) compares every pending call at its end, waiting for
 * none, so a disagreement there fails it on every rank as it did with two
 * records; only a run of eager calls after a disagreement may run on (up
 * to AGREE_BATCH of them, with outputs not to be used) before the
 * failure, which then names the call that differed. After any failure a
 * rank compares the pending calls whose records are all posted, so a peer
 * that learns of a disagreement through another rank's abort still names
 * it. The price of the depth: a rank at call c waits until every rank
 * compared call c - SHM_CHECK_RING, which a rank does only inside its own
 * collectives, so a program in which a rank waits in a receive for a
 * send that its peer makes only after a later collective (erroneous in
 * MPI and NCCL: collectives may synchronize) can stall there until the
 * timeout. With two records, as until
 * 2026-12-06, it waited at every call for the previous one's records: a
 * 4 KiB Broadcast on 8 ranks over 2 cores took a median 1.8 us a call on
 * 8 ranks, 0.7 without the check (docs/PERF.md, "Eager calls run
 * ahead"). ZeRO++ calls,
 * and communicators across hosts, compare before any data moves (one more
 * synchronization of the node's ranks: small beside a call over the
 * network). Across hosts the check covers the ranks of each host (the
 * node's segment); ranks of different hosts are not compared.
 * Send and receive are not checked (their matching is checked by size).
 *
 * As a plan. The comparison and the call are one plan (agree_plan_t,
 * below): a phase that tests, without waiting, whether every rank posted
 * (before the call), the call's own plan stepped as a child, and the
 * test after it, so the agreement's waits are driven like the call's
 * (plan_drive: spin, yield, nap, the slow check) and nothing of a call
 * waits outside a plan's step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives/coll.h"
#include "collectives/plan.h"
#include "core/dtype.h"
#include "core/env.h"
#include "core/socket.h"
#include "topology/rankmap.h"
#include "collectives/engine.h"
#include "qccl_config.h"
#if QCCL_HAVE_UCX
#include "transport/ucx.h"
#endif

static const char* const agree_kinds[] = {"AllReduce",      "Broadcast", "Reduce",  "AllGather",
                                          "ReduceScatter",  "AlltoAll",  "Gather",  "Scatter",
                                          "Send",           "Recv",      "Barrier", "AllGatherQ",
                                          "ReduceScatterQ", "AllReduceQ"};
#define AGREE_NKINDS (int)(sizeof agree_kinds / sizeof agree_kinds[0])
#define AGREE_HIST (int)(sizeof((struct qcclComm*)0)->check_hist / sizeof(uint64_t[4]))
#define AGREE_REPORT_MAGIC 0x71636c72u /* "qclr" */
#define AGREE_CALL_NUM_BITS 16         /* the call's number in a message's call (ucx.h) */
#define AGREE_REPORT_WAIT 0.25         /* seconds to hear the peers' reports */
/* pending calls an eager rank leaves before it looks at the peers'
 * records again: each look at a record a peer is writing is a line taken
 * from that peer's core ("How far ahead") */
#define AGREE_BATCH (SHM_CHECK_RING / 2)

qcclResult_t comm_fail(qcclComm_t comm, qcclResult_t res);

uint64_t coll_agree_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

/* Every bit of h into the low ones (a tag keeps only ~22 of them). */
static uint64_t agree_fold(uint64_t h) {
  h ^= h >> 31;
  h *= 0x7fb5d329728ea185ull;
  h ^= h >> 27;
  h *= 0x81dadef4bc2dd44dull;
  return h ^ (h >> 33);
}

void coll_agree_record(int kind, size_t count, qcclDataType_t dt, qcclRedOp_t op, int root,
                       uint64_t spec, uint64_t rec[COLL_AGREE_WORDS]) {
  rec[0] = (uint64_t)(uint8_t)kind | (uint64_t)(uint8_t)dt << 8 | (uint64_t)(uint8_t)op << 16 |
           (uint64_t)(uint32_t)root << 32;
  rec[1] = (uint64_t)count;
  rec[2] = spec;
}

uint32_t coll_agree_tag(const coll_args_t* a, uint64_t g) {
  uint64_t h =
      coll_agree_mix(coll_agree_mix((uint64_t)a->kind, (uint64_t)a->count), (uint64_t)a->datatype);
  h = agree_fold(coll_agree_mix(coll_agree_mix(h, (uint64_t)(uint32_t)a->root), g));
  return (uint32_t)h | 1;
}

qcclResult_t coll_agree_check_tag(qcclComm_t comm, int peer, uint64_t g, int which, uint32_t mine,
                                  const char* coll) {
  shm_t* s = comm->shm;
  uint32_t theirs = shm_reg_peer_tag(s, peer, g, which);
  if (theirs == mine) return qcclSuccess;
  if (!comm->check) shm_set_abort(s); /* nothing else tells the peers */
  return QCCL_ERR(qcclInvalidUsage,
                  "%s: local rank %d's buffer was published by another call than local rank "
                  "%d's (tag %08x, not %08x): the ranks' calls differ (collective, count, "
                  "datatype, root or the calls before); nothing was written into it",
                  coll, peer, s->rank, theirs, mine);
}

static const char* agree_kind_name(uint64_t w0) {
  int k = (int)(w0 & 0xff);
  return k < AGREE_NKINDS ? agree_kinds[k] : "?";
}

/* What differs first between record a (of rank ga) and b (of rank gb). */
static void agree_name(const uint64_t* a, int ga, const uint64_t* b, int gb, char* what, size_t n) {
  if ((a[0] & 0xff) != (b[0] & 0xff))
    snprintf(what, n, "the collective (qccl%s on rank %d, qccl%s on rank %d)",
             agree_kind_name(a[0]), ga, agree_kind_name(b[0]), gb);
  else if (a[1] != b[1])
    snprintf(what, n, "count (%llu on rank %d, %llu on rank %d)", (unsigned long long)a[1], ga,
             (unsigned long long)b[1], gb);
  else if (((a[0] >> 8) & 0xff) != ((b[0] >> 8) & 0xff))
    snprintf(what, n, "datatype (%s on rank %d, %s on rank %d)",
             dtype_name((qcclDataType_t)((a[0] >> 8) & 0xff)), ga,
             dtype_name((qcclDataType_t)((b[0] >> 8) & 0xff)), gb);
  else if (((a[0] >> 16) & 0xff) != ((b[0] >> 16) & 0xff))
    snprintf(what, n, "op (%d on rank %d, %d on rank %d)", (int)((a[0] >> 16) & 0xff), ga,
             (int)((b[0] >> 16) & 0xff), gb);
  else if ((a[0] >> 32) != (b[0] >> 32))
    snprintf(what, n, "root (%d on rank %d, %d on rank %d)", (int32_t)(a[0] >> 32), ga,
             (int32_t)(b[0] >> 32), gb);
  else
    snprintf(what, n, "the quantization spec or configuration (ranks %d and %d)", ga, gb);
}

static int agree_differ(const uint64_t* a, const uint64_t* b) {
  return a[0] != b[0] || a[1] != b[1] || a[2] != b[2];
}

/* Compares the node's records of one call (recs, as agree_test leaves
 * them) with rank 0's; on a difference fails comm for good with a
 * message naming the first argument that differs and two ranks. */
static qcclResult_t agree_verify(qcclComm_t comm, const shm_t* s, const uint64_t* recs) {
  const uint64_t* r0 = recs;
  for (int j = 1; j < s->nranks; j++) {
    const uint64_t* rj = recs + (size_t)j * SHM_CHECK_WORDS;
    if (!agree_differ(r0, rj)) continue;
    /* node ranks j and 0 as ranks of comm */
    int gj = comm->node ? topo_rankmap_rank_at(comm->rankmap, comm->node_of[comm->rank], j) : j;
    int g0 = comm->node ? topo_rankmap_rank_at(comm->rankmap, comm->node_of[comm->rank], 0) : 0;
    char what[160];
    agree_name(r0, g0, rj, gj, what, sizeof what);
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
  comm->wire_call = call;
#if QCCL_HAVE_UCX
  ucx_set_call(comm->ucx, call);
  if (comm->rail) ucx_set_call(comm->rail->ucx, call);
#else
  (void)comm;
  (void)call;
#endif
}

/* ---- the agreement as a plan ---------------------------------------- */

/* A call's agreement and the call itself, as one plan (agree.c's entry
 * stage): the record is posted as the plan is made; phase AG_BEFORE
 * waits until every rank of the node posted its record and compares them
 * (calls compared before any data moves), AG_CALL steps the call's plan,
 * AG_AFTER compares the records once the call ran (a plain call on one
 * host, whose waits watched them meanwhile). Each phase tests without
 * waiting, so the agreement's waits are steps of the driver like the
 * call's (plan_drive: spin, yield, nap, the slow check every ~20 ms). */
typedef struct {
  plan_t p;
  plan_t* call; /* NULL: the agreement alone */
  shm_t* s;     /* the node's segment, NULL: nothing to compare */
  uint64_t c;   /* the call's number on the communicator */
  int after;    /* the records are compared after the call */
  int wait_all; /* AG_AFTER waits for every record (to name a difference) */
  /* AG_PREV: this call's record, posted once the earlier calls' records
   * it replaces were compared everywhere, and the phase after it (settle:
   * none; every earlier call compared, coll_agree_settle) */
  uint64_t rec[COLL_AGREE_WORDS];
  int begin, settle;
} agree_plan_t;

enum { AG_PREV, AG_BEFORE, AG_CALL, AG_AFTER };

/* Numbers the call (and across hosts puts its number and record on the
 * wire); *s the segment whose records are compared (NULL: none), *after 1
 * when they are compared after the call. The record itself is posted by
 * coll_agree_run, once no earlier call's comparison is pending. */
static qcclResult_t agree_post(qcclComm_t comm, const uint64_t rec[COLL_AGREE_WORDS], shm_t** s,
                               uint64_t* c, int* after) {
  _Static_assert(COLL_AGREE_WORDS == SHM_CHECK_WORDS, "a record fills a control line's check");
  *s = NULL;
  *after = 0;
  if (comm->nnodes == 1 && agree_shm(comm) == NULL) return qcclSuccess; /* nothing to do */
  *c = comm->check_calls++;
  /* across hosts every message of the call carries its number and, when
   * checking, its record's hash (transport/ucx.c): ranks of different
   * hosts that disagree, or a message a failed call left behind, are
   * caught by the receiver */
  if (comm->nnodes > 1) {
    /* the call's number (low AGREE_CALL_NUM_BITS) and its record's hash */
    uint64_t d = (*c + 1) & ((1u << AGREE_CALL_NUM_BITS) - 1);
    if (comm->check)
      d |= agree_fold(coll_agree_mix(
               coll_agree_mix(coll_agree_mix(coll_agree_mix(*c + 1, rec[0]), rec[1]), rec[2]), 7))
           << AGREE_CALL_NUM_BITS;
    coll_wire_call(comm, d & ~COLL_WIRE_P2P);
    uint64_t* h = comm->check_hist[*c % AGREE_HIST];
    h[0] = *c + 1;
    memcpy(h + 1, rec, sizeof(uint64_t) * 3);
#if QCCL_HAVE_UCX
    /* a peer reported a failed call: fail before any data moves */
    QCCL_CHECK(coll_lanes_control_seen(comm));
#endif
  }
  *s = agree_shm(comm);
  if (*s == NULL) return qcclSuccess;
  /* one host, a plain collective: every shared-memory algorithm waits for
   * every rank at least once, so the records are compared after the call
   * at no extra synchronization, and the waits of the call watch them
   * meanwhile. Otherwise (across hosts, or a call of a layer above,
   * numbered from COLL_NUM_KINDS: it runs plain calls inside): compared
   * before any data moves. */
  *after = comm->node == NULL && (int)(rec[0] & 0xff) < (int)COLL_NUM_KINDS;
  return qcclSuccess;
}

/* Copies the node's records of call c (every rank posted them) and
 * compares them (agree_verify). */
static qcclResult_t agree_verify_call(qcclComm_t comm, shm_t* s, uint64_t c) {
  for (int j = 0; j < s->nranks; j++)
    memcpy(comm->check_recs + (size_t)j * SHM_CHECK_WORDS, s->ctrl[j].check[c % SHM_CHECK_RING].rec,
           sizeof s->ctrl[j].check[0].rec);
  return agree_verify(comm, s, comm->check_recs);
}

/* Without waiting: once every rank of the node posted its record of call
 * c, copies them and compares them. */
static qcclResult_t agree_test(qcclComm_t comm, shm_t* s, uint64_t c) {
  s->check_watch = 0;
  QCCL_CHECK(shm_test_counter(s, 0, s->nranks, c + 1, SHM_CHECK_SEQ));
  return agree_verify_call(comm, s, c);
}

/* Without waiting: compares the records of the calls before upto not yet
 * compared, in order, while every rank has posted them, and publishes
 * how far this rank got. qcclInProgress when one is still short. */
static qcclResult_t agree_compare_upto(qcclComm_t comm, shm_t* s, uint64_t upto) {
  uint64_t from = comm->check_done;
  qcclResult_t r = qcclSuccess;
  while (comm->check_done < upto) {
    r = agree_test(comm, s, comm->check_done);
    if (r != qcclSuccess) break;
    comm->check_done++;
  }
  if (comm->check_done != from) shm_check_done_post(s, comm->check_done);
  return r;
}

/* Without waiting: whether every rank of the node compared the calls
 * before need (the least count seen is kept, so that the peers' lines
 * are read again only every few calls). */
static qcclResult_t agree_test_done(qcclComm_t comm, shm_t* s, uint64_t need) {
  if (comm->check_done_seen >= need) return qcclSuccess;
  QCCL_CHECK(shm_test_counter(s, 0, s->nranks, need, SHM_CHECK_DONE));
  uint64_t least = UINT64_MAX;
  for (int j = 0; j < s->nranks; j++) {
    uint64_t d = shm_counter(s, j, SHM_CHECK_DONE, need);
    if (d < least) least = d;
  }
  comm->check_done_seen = least;
  return qcclSuccess;
}

/* After a failure: compares, without waiting, the pending calls whose
 * records every rank posted (a peer that found one of them to differ has
 * aborted the segment, and its failure reaches this rank as the abort).
 * 1 when one differs (the comm is then failed with the message naming
 * it, agree_verify). */
static int agree_pending_differ(qcclComm_t comm, shm_t* s) {
  if (s == NULL) return 0;
  for (uint64_t x = comm->check_done; x < comm->check_calls; x++) {
    for (int j = 0; j < s->nranks; j++)
      if (shm_counter(s, j, SHM_CHECK_SEQ, x + 1) < x + 1) return 0; /* not all posted */
    if (agree_verify_call(comm, s, x) != qcclSuccess) return 1;
  }
  return 0;
}

/* The failure w of a wait for the records (a peer died or aborted): but a
 * peer that found a disagreement first and made its next call has
 * aborted the segment (comm_tell_peers), and the records posted so far
 * say so. */
static qcclResult_t agree_wait_failed(qcclComm_t comm, shm_t* s, qcclResult_t w) {
  if (w != qcclInvalidUsage && agree_pending_differ(comm, s)) {
    shm_set_abort(s); /* peers waiting for this rank fail too */
    return qcclInvalidUsage;
  }
  if (w != qcclInvalidUsage && shm_check_peek(s, comm->check_recs)) {
    qcclResult_t v = agree_verify(comm, s, comm->check_recs);
    if (v != qcclSuccess) return v;
  }
  return comm_fail(comm, w);
}

/* Whether the call just run waited for every rank of the node: its waits
 * saw each reach a step of this call (shm_check_saw_all), or it is a kind
 * whose every rank needs every other's data. */
static int agree_synchronized(const agree_plan_t* g) {
  int kind = (int)(g->rec[0] & 0xff);
  int rooted =
      kind == COLL_BROADCAST || kind == COLL_REDUCE || kind == COLL_GATHER || kind == COLL_SCATTER;
  return !rooted || shm_check_saw_all(g->s);
}

static qcclResult_t agree_progress(plan_t* p) {
  agree_plan_t* g = (agree_plan_t*)p;
  switch (p->phase) {
    case AG_PREV: {
      qcclComm_t comm = p->comm;
      if (g->settle) {
        PLAN_TEST(p, agree_compare_upto(comm, g->s, comm->check_calls));
        return qcclSuccess;
      }
      /* the earlier calls' records as far as they are posted, once
       * AGREE_BATCH are pending; then the record of call c -
       * SHM_CHECK_RING, whose place this call's takes, compared here
       * (waiting for it if need be) and everywhere */
      uint64_t need = g->c >= SHM_CHECK_RING ? g->c - SHM_CHECK_RING + 1 : 0;
      if (comm->check_done < need || g->c - comm->check_done >= AGREE_BATCH) {
        qcclResult_t r = agree_compare_upto(comm, g->s, g->c);
        if (r != qcclSuccess && r != qcclInProgress) return r;
        if (comm->check_done < need) return r;
      }
      PLAN_TEST(p, agree_test_done(comm, g->s, need));
      shm_check_publish(g->s, g->c, g->rec, g->after);
      p->phase = g->begin;
      return agree_progress(p);
    }
    case AG_BEFORE:
      if (g->s != NULL) {
        PLAN_TEST(p, agree_compare_upto(p->comm, g->s, g->c + 1));
      }
      p->phase = AG_CALL;
      PLAN_FALLTHROUGH;
    case AG_CALL:
      if (g->call != NULL) QCCL_CHECK(plan_step(p, g->call));
      if (g->s == NULL || !g->after) return qcclSuccess;
      p->phase = AG_AFTER;
      PLAN_FALLTHROUGH;
    case AG_AFTER: {
      /* earlier calls still pending (a run of eager calls): compared
       * once AGREE_BATCH are, or once a call waited for every rank (all
       * have posted, the comparison waits for none). The call itself has
       * run by then: had a pending call disagreed on its chunk count, this
       * one ran on misaligned chunks, and the waits' watch (which compares
       * the pending calls' records too) fails a rank stalled by that */
      uint64_t done = p->comm->check_done;
      if (!g->wait_all && done < g->c && g->c + 1 - done < AGREE_BATCH && !agree_synchronized(g))
        return qcclSuccess;
      qcclResult_t r = agree_compare_upto(p->comm, g->s, g->c + 1);
      if (r != qcclInProgress || g->wait_all) return r;
      /* a rank that ran its part without waiting for every peer (an eager
       * root, a Gather's sender): the peers that have not posted yet are
       * still in an earlier call, and waiting for them here would tie
       * every call to the slowest rank's start. Their records are compared
       * as this rank's next calls begin and end (AG_PREV, "How far
       * ahead"), or at qcclCommFinalize; a disagreement fails that call,
       * naming this one's arguments. */
      return qcclSuccess;
    }
    default:
      return QCCL_ERR(qcclInternalError, "agreement: phase %d", p->phase);
  }
}

/* What a failure r of the plan (from a step or from a slow check) tells
 * the user, by the phase it came in. */
static qcclResult_t agree_failed(agree_plan_t* g, qcclResult_t r) {
  qcclComm_t comm = g->p.comm;
  switch (g->p.phase) {
    case AG_PREV:   /* the same, for the earlier call's records */
    case AG_BEFORE: /* a disagreement named, or the wait for the records failed */
      return r == qcclInvalidUsage ? r : agree_wait_failed(comm, g->s, r);
    case AG_CALL:
      r = comm_fail(comm, r); /* a lost peer or a timeout aborts the segment */
      if (g->s == NULL || !g->after) return r;
      if (r == qcclInvalidUsage) {
        /* the call's waits saw a peer post another record: compare them
         * all, to name what differs */
        g->p.phase = AG_AFTER;
        g->wait_all = 1;
        qcclResult_t v = plan_drive(&g->p);
        return v == qcclInvalidUsage ? v : r;
      }
      /* if a peer posted another call, that is the cause (a peer that saw
       * it first may have aborted the segment, so this rank's wait saw
       * only the abort), here or in an earlier call still pending;
       * otherwise the failure stands as it is */
      if (agree_pending_differ(comm, g->s)) return qcclInvalidUsage;
      if (shm_check_peek(g->s, comm->check_recs)) {
        qcclResult_t v = agree_verify(comm, g->s, comm->check_recs);
        if (v != qcclSuccess) return v;
      }
      return r;
    default: /* AG_AFTER */
      if (r != qcclInvalidUsage && agree_pending_differ(comm, g->s)) {
        shm_set_abort(g->s);
        return qcclInvalidUsage;
      }
      return r == qcclInvalidUsage ? r : comm_fail(comm, r);
  }
}

static uint32_t agree_spin(plan_t* p) {
  agree_plan_t* g = (agree_plan_t*)p;
  if (p->phase == AG_CALL && g->call != NULL) return g->call->ops->spin(g->call);
  return g->s != NULL ? shm_wait_spin(g->s) : p->comm->spin;
}

static qcclResult_t agree_check(plan_t* p, double idle) {
  agree_plan_t* g = (agree_plan_t*)p;
  if (p->phase == AG_CALL)
    return g->call != NULL ? g->call->ops->check(g->call, idle) : qcclSuccess;
  return g->s != NULL ? shm_wait_check(g->s, idle) : qcclSuccess;
}

static void agree_cancel(plan_t* p) {
  agree_plan_t* g = (agree_plan_t*)p;
  if (p->phase == AG_CALL && g->call != NULL && g->call->ops->cancel != NULL)
    g->call->ops->cancel(g->call);
}

static int agree_remote(plan_t* p) {
  agree_plan_t* g = (agree_plan_t*)p;
  return p->phase == AG_CALL && g->call != NULL && plan_remote(g->call);
}

static const plan_ops_t agree_ops = {"agreement",  agree_progress, agree_spin,   agree_check,
                                     agree_cancel, NULL,           agree_remote, NULL};

qcclResult_t coll_agree_run(qcclComm_t comm, const uint64_t rec[COLL_AGREE_WORDS], plan_t* call) {
  agree_plan_t g;
  memset(&g, 0, sizeof g);
  g.p.ops = &agree_ops;
  g.p.comm = comm;
  g.call = call;
  QCCL_CHECK(agree_post(comm, rec, &g.s, &g.c, &g.after));
  g.begin = g.after ? AG_CALL : AG_BEFORE;
  memcpy(g.rec, rec, sizeof g.rec);
  /* the record is posted by AG_PREV, once the one it replaces was
   * compared everywhere */
  g.p.phase = g.s != NULL ? AG_PREV : g.begin;
  qcclResult_t r = plan_drive(&g.p);
  return r == qcclSuccess ? r : agree_failed(&g, r);
}

qcclResult_t coll_agree_settle(qcclComm_t c) {
  for (int k = 0; k < COMM_MAX_LANES; k++) {
    qcclComm_t l = comm_lane_at(c, k);
    if (l == NULL || l->check_done == l->check_calls || agree_shm(l) == NULL) continue;
    agree_plan_t g;
    memset(&g, 0, sizeof g);
    g.p.ops = &agree_ops;
    g.p.comm = l;
    g.s = agree_shm(l);
    g.settle = 1;
    g.p.phase = AG_PREV;
    qcclResult_t r = plan_drive(&g.p);
    if (r != qcclSuccess) return agree_failed(&g, r);
  }
  return qcclSuccess;
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

#if QCCL_HAVE_UCX
/* The UCX workers of comm's communicator: every lane's and its rail's
 * (some NULL: a lane on one host). Returns how many were written. */
static int agree_lane_workers(qcclComm_t comm, ucx_t* out[2 * COMM_MAX_LANES]) {
  int n = 0;
  for (int k = 0; k < COMM_MAX_LANES; k++) {
    qcclComm_t l = comm_lane_at(comm->top, k);
    if (l == NULL) continue;
    out[n++] = l->ucx;
    if (l->rail) out[n++] = l->rail->ucx;
  }
  return n;
}
#endif

qcclResult_t coll_lanes_control_seen(qcclComm_t comm) {
#if QCCL_HAVE_UCX
  ucx_t* w[2 * COMM_MAX_LANES];
  int n = agree_lane_workers(comm, w);
  for (int i = 0; i < n; i++) QCCL_CHECK(ucx_control_seen(w[i]));
#else
  (void)comm;
#endif
  return qcclSuccess;
}

qcclResult_t coll_agree_watch(void* arg) {
#if QCCL_HAVE_UCX
  qcclComm_t comm = arg;
  /* the thread that steps the node's segment also steps the network's
   * transfers (plans: one thread per call), so it may progress them here */
  QCCL_CHECK(ucx_watch(comm->ucx));
  if (comm->rail) QCCL_CHECK(ucx_watch(comm->rail->ucx));
  return coll_lanes_control_seen(comm);
#else
  (void)arg;
  return qcclSuccess;
#endif
}

/* ---- across hosts: the report of a failed call ---------------------- */

#if QCCL_HAVE_UCX
/* What a rank whose call failed tells every peer on another host (a UCX
 * control message): its record of the call, its error and message. */
typedef struct {
  uint32_t magic;
  int32_t rank; /* of the user's communicator */
  int32_t res;
  int32_t p2p;        /* the call was a user's send or receive */
  uint64_t call;      /* the call's number + 1; 0: no record */
  uint64_t rec[3];    /* coll_agree_record */
  char msg[512 - 40]; /* err_last() */
} agree_report_t;

/* One report that arrived on any worker of comm's communicator (a peer
 * that failed on another lane reports there), or 0. */
static size_t agree_take_report(qcclComm_t comm, agree_report_t* v, int* from) {
  ucx_t* w[2 * COMM_MAX_LANES];
  int n = agree_lane_workers(comm, w);
  for (int i = 0; i < n; i++) {
    size_t got = ucx_take_control(w[i], v, sizeof *v, from);
    if (got > 0) return got;
  }
  return 0;
}

/* This rank's record of call number c, or NULL when no longer kept. */
static const uint64_t* agree_hist(qcclComm_t comm, uint64_t c) {
  const uint64_t* h = comm->check_hist[c % AGREE_HIST];
  return h[0] == c + 1 ? h + 1 : NULL;
}

#endif

qcclResult_t coll_agree_failed(qcclComm_t comm, qcclResult_t r) {
#if QCCL_HAVE_UCX
  _Static_assert(COLL_WIRE_P2P == UCX_CALL_P2P, "one bit marks a user's send or receive");
  _Static_assert(AGREE_CALL_NUM_BITS == UCX_CALL_NUM_BITS, "the call's number in a tag");
  _Static_assert(sizeof(agree_report_t) <= UCX_CONTROL_MAX, "a report fits a control message");
  if (r == qcclSuccess || r == qcclInvalidArgument || comm->nnodes == 1 || comm->ucx == NULL ||
      comm_aborted(comm) || atomic_exchange(&comm->reported, 1))
    return r;
  /* Every rank whose call failed posts its report to every peer on
   * another host (a transfer that waits there sees it and fails), then
   * reads the peers' reports until every peer still reachable has
   * reported or AGREE_REPORT_WAIT has passed, and names the first
   * difference between its record of the call and a peer's. A rank whose part of the call ended
   * before anyone failed hears it at its next call. */
  agree_report_t me;
  memset(&me, 0, sizeof me);
  me.magic = AGREE_REPORT_MAGIC;
  me.rank = comm->rank;
  me.res = (int32_t)r;
  me.p2p = (comm->wire_call & COLL_WIRE_P2P) != 0;
  const uint64_t* mine = NULL;
  if (!me.p2p && comm->check && comm->check_calls > 0 &&
      (mine = agree_hist(comm, comm->check_calls - 1)) != NULL) {
    me.call = comm->check_calls;
    memcpy(me.rec, mine, sizeof me.rec);
  }
  snprintf(me.msg, sizeof me.msg, "%s", err_last());
  ucx_post_control(comm->ucx, &me, sizeof me);
  if (comm->rail) ucx_post_control(comm->rail->ucx, &me, sizeof me);

  char named[200] = "";
  agree_report_t told; /* the first report of invalid usage */
  told.rank = -1;
  unsigned char* heard = calloc((size_t)comm->nranks, 1);
  double deadline = clock_now() + AGREE_REPORT_WAIT;
  for (;;) {
    agree_report_t v;
    int from;
    size_t n;
    while ((n = agree_take_report(comm, &v, &from)) > 0) {
      if (n != sizeof v || v.magic != AGREE_REPORT_MAGIC || v.rank < 0 || v.rank >= comm->nranks)
        continue;
      v.msg[sizeof v.msg - 1] = 0;
      if (heard) heard[v.rank] = 1;
      if (!named[0] && v.call > 0 && comm->check) {
        const uint64_t* h = agree_hist(comm, v.call - 1);
        if (h != NULL && agree_differ(h, v.rec)) {
          if (comm->rank < v.rank)
            agree_name(h, comm->rank, v.rec, v.rank, named, sizeof named);
          else
            agree_name(v.rec, v.rank, h, comm->rank, named, sizeof named);
        }
      }
      if (told.rank < 0 && v.res == (int32_t)qcclInvalidUsage) told = v;
    }
    /* every peer still reachable has reported (also when named: a peer
     * that leaves at once would close its connections under reports not
     * yet read) */
    int all = 1;
    for (int i = 0; i < comm->nranks && all; i++)
      all = i == comm->rank || (heard && heard[i]) || !ucx_peer_reachable(comm->ucx, i);
    if (all || clock_now() > deadline) break;
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  free(heard);
  /* the ranks of this host wait on the segment, not on UCX */
  shm_t* s = comm->node ? comm->node->shm : comm->shm;
  if (s) shm_set_abort(s);
  const char* fn = mine ? agree_kind_name(mine[0]) : me.p2p ? "Send/Recv" : "?";
  if (named[0]) {
    err_clear();
    r = QCCL_ERR(qcclInvalidUsage,
                 "qccl%s: the ranks disagree on %s; every rank must make the same calls in the "
                 "same order (QCCL_CHECK=0 turns this check off)",
                 fn, named);
    snprintf(comm->last_error, sizeof comm->last_error, "%s", err_last());
    return r;
  }
  if (told.rank >= 0 && !(r == qcclInvalidUsage && strstr(me.msg, "disagree on"))) {
    err_clear();
    r = QCCL_ERR(qcclInvalidUsage, "qccl%s failed on rank %d: %s", fn, told.rank, told.msg);
    snprintf(comm->last_error, sizeof comm->last_error, "%s", err_last());
  }
  return r;
#else
  (void)comm;
  return r;
#endif
}
