/*
 * mr_runahead - ranks that need nothing from a slow rank run ahead of it
 * by many small calls, and every call's data still arrives whole
 * (transport/shm.h, shm_test_chunk_part; collectives/agree.c, "How far
 * ahead").
 *
 * Ahead: one rank holds back while the others make RUN calls of a few KiB:
 * Broadcasts from rank 0 with the last rank slow, Scatters from rank 0
 * with the last rank slow, Gathers to the last rank with that root slow
 * (its senders run ahead). The others publish a file once they have made
 * all RUN calls, and the slow rank waits for every file (up to AHEAD_WAIT
 * seconds) before it makes its first call; then it makes them all, and
 * every rank checks every call's output against the generator. Until
 * 2026-12-06 an eager rank ran at most two calls ahead of the slowest (two
 * slots, two agreement records), so it waited for the slow rank at its
 * third call, never published, and the case failed here once the wait
 * ran out (the slow rank then makes its calls all the same, so nothing
 * hangs).
 *
 * Mixed: a seeded random sequence of Broadcasts, Scatters and Gathers
 * with random roots and sizes from 0 to 96 KiB a rank (so that the parts
 * of the slot that small chunks take overlap those of earlier chunks of
 * other sizes, and some calls take whole slots), an AllReduce now and
 * then, and ranks pausing at random before a call: every output is
 * checked element by element.
 *
 * Disagree after: on a fresh communicator, six Broadcasts from rank 0
 * while the last rank holds back 50 ms (rank 0's records of them stay
 * pending, compared later), then an AllReduce whose op differs on the
 * last rank: that AllReduce waited for every rank, so it must fail on
 * every rank with qcclInvalidUsage naming the op, as when a rank kept
 * two records (the first version of sixteen returned success on rank 0
 * there and left the comparison to a later call), and a later call must
 * fail too. The same with a Reduce to rank 0 (a rooted kind: its root
 * knows it waited for every rank from what its waits saw), whose root
 * must fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mr_util.h"

#define RUN 12            /* calls the others make before the slow rank starts */
#define AHEAD_WAIT 20.0   /* seconds the slow rank waits for them */
#define MIXED_MAX 24576   /* elements a rank in a mixed call, at most (96 KiB) */
#define AHEAD_N 1024      /* elements of an ahead call (a rank's, 4 KiB) */
#define AHEAD_SCATTER 128 /* elements a rank of an ahead Scatter (W blocks fit 4 KiB) */

enum { K_BCAST, K_SCATTER, K_GATHER, K_ALLREDUCE };
static const char* const knames[] = {"broadcast", "scatter", "gather", "allreduce"};

typedef struct {
  float* send;
  float* recv;
} bufs_t;

/* One call of kind k with n elements a rank, its inputs drawn from cs;
 * checks this rank's output. */
static void one_call(mr_t* t, mr_case_t* c, qcclComm_t comm, bufs_t* b, int k, int root, size_t n,
                     uint64_t cs, const char* tag) {
  const int W = t->nranks, r = t->rank;
  const size_t big = (size_t)W * n;
  char what[96];
  uint64_t case_seed = c->cseed;
  c->cseed = cs; /* the generator of this call's inputs, for the checks */
  memset(b->recv, 0xa5, (big > 0 ? big : 1) * sizeof(float));
  switch (k) {
    case K_BCAST:
      if (r == root) mr_fill(qcclFloat32, qcclSum, MR_GEN_RAW, cs, root, W, b->send, 0, n);
      MR_OK(c, qcclBroadcast(b->send, b->recv, n, qcclFloat32, root, comm, NULL));
      snprintf(what, sizeof what, "%s: broadcast from %d", tag, root);
      mr_check_copy(c, qcclFloat32, b->recv, 0, n, root, 0, what);
      break;
    case K_SCATTER:
      if (r == root) mr_fill(qcclFloat32, qcclSum, MR_GEN_RAW, cs, root, W, b->send, 0, big);
      MR_OK(c, qcclScatter(b->send, b->recv, n, qcclFloat32, root, comm, NULL));
      snprintf(what, sizeof what, "%s: scatter from %d", tag, root);
      mr_check_copy(c, qcclFloat32, b->recv, 0, n, root, (size_t)r * n, what);
      break;
    case K_GATHER:
      mr_fill(qcclFloat32, qcclSum, MR_GEN_RAW, cs, r, W, b->send, 0, n);
      MR_OK(c, qcclGather(b->send, b->recv, n, qcclFloat32, root, comm, NULL));
      for (int j = 0; j < W && r == root; j++) {
        snprintf(what, sizeof what, "%s: gather to %d, block of %d", tag, root, j);
        mr_check_copy(c, qcclFloat32, b->recv, (size_t)j * n, n, j, 0, what);
      }
      break;
    default: { /* int32 sums, exact */
      int32_t* in = (int32_t*)b->send;
      int32_t* out = (int32_t*)b->recv;
      for (size_t i = 0; i < n; i++) in[i] = (int32_t)((cs + i * 7 + (size_t)r * 13) % 1000);
      MR_OK(c, qcclAllReduce(in, out, n, qcclInt32, qcclSum, comm, NULL));
      for (size_t i = 0; i < n; i++) {
        int64_t want = 0;
        for (int j = 0; j < W; j++) want += (int64_t)((cs + i * 7 + (size_t)j * 13) % 1000);
        if (out[i] != want) {
          mr_case_fail(c, "%s: allreduce element %zu is %d, not %lld", tag, i, out[i],
                       (long long)want);
          break;
        }
      }
      break;
    }
  }
  c->cseed = case_seed;
}

/* The ahead case of kind k: the slow rank holds back until the others
 * made RUN calls. */
static void ahead_case(mr_t* t, qcclComm_t comm, bufs_t* b, int k, const char* dir) {
  mr_case_t c;
  const int W = t->nranks, r = t->rank;
  if (W < 2 || !mr_case_begin(t, &c, "%s: %d calls ahead of a slow rank", knames[k], RUN)) return;
  int root = k == K_GATHER ? W - 1 : 0, slow = W - 1;
  size_t n = k == K_SCATTER ? AHEAD_SCATTER : AHEAD_N;
  char name[64];
  if (r == slow) {
    for (int j = 0; j < W; j++) {
      if (j == slow) continue;
      int got = 0;
      snprintf(name, sizeof name, "runahead-%s-%d", knames[k], j);
      if (mr_fetch(dir, name, &got, sizeof got, AHEAD_WAIT) != 0)
        mr_case_fail(&c, "rank %d had not made its %d calls after %.0f s: it waited for this one",
                     j, RUN, AHEAD_WAIT);
    }
  }
  for (int i = 0; i < RUN; i++) {
    char tag[32];
    snprintf(tag, sizeof tag, "call %d", i);
    one_call(t, &c, comm, b, k, root, n, mr_mix(c.cseed + (uint64_t)i), tag);
  }
  if (r != slow) {
    int one = 1;
    snprintf(name, sizeof name, "runahead-%s-%d", knames[k], r);
    if (mr_publish(dir, name, &one, sizeof one) != 0) mr_case_fail(&c, "cannot write %s", name);
  }
  /* everyone in step again before the next case */
  MR_OK(&c, qcclBarrier(comm, NULL));
  mr_case_end(&c);
}

static void mixed_case(mr_t* t, qcclComm_t comm, bufs_t* b, int calls) {
  mr_case_t c;
  const int W = t->nranks;
  if (!mr_case_begin(t, &c, "mixed: %d small and large rooted calls, pauses", calls)) return;
  uint64_t st = c.cseed, mine = mr_mix(c.cseed ^ (0x9e37u + (uint64_t)t->rank));
  for (int i = 0; i < calls && c.bad == 0; i++) {
    int k = (int)(mr_rand_range(&st, 0, 9) % 10);
    k = k == 9 ? K_ALLREDUCE : k % 3;
    int root = (int)mr_rand_range(&st, 0, (size_t)W - 1);
    size_t band = mr_rand_range(&st, 0, 9), n;
    if (band < 5)
      n = mr_rand_range(&st, 0, 1024); /* up to 4 KiB */
    else if (band < 9)
      n = mr_rand_range(&st, 1025, 6144); /* up to 24 KiB */
    else
      n = mr_rand_range(&st, 6145, MIXED_MAX);
    if (mr_rand_range(&mine, 0, 7) == 0) usleep((useconds_t)mr_rand_range(&mine, 0, 300));
    char tag[48];
    snprintf(tag, sizeof tag, "call %d (%zu elements)", i, n);
    one_call(t, &c, comm, b, k, root, n, mr_mix(c.cseed + 1000003u * (uint64_t)(i + 1)), tag);
  }
  MR_OK(&c, qcclBarrier(comm, NULL));
  mr_case_end(&c);
}

static void disagree_case(mr_t* t, bufs_t* b, int reduce) {
  mr_case_t c;
  const int W = t->nranks;
  if (W < 2 || !mr_case_begin(t, &c, "disagree after eager calls: %s fails",
                              reduce ? "a Reduce's root" : "an AllReduce on every rank"))
    return;
  qcclComm_t comm = NULL;
  MR_OK(&c, qcclCommSplit(t->comm, 0, t->rank, &comm, NULL));
  for (int i = 0; i < 2; i++)
    MR_OK(&c, qcclAllReduce(b->send, b->recv, 1, qcclFloat32, qcclSum, comm, NULL));
  int odd = t->rank == W - 1;
  if (odd) usleep(50000);
  for (int i = 0; i < 6; i++)
    MR_OK(&c, qcclBroadcast(b->send, b->recv, AHEAD_N, qcclFloat32, 0, comm, NULL));
  qcclRedOp_t op = odd ? qcclMax : qcclSum;
  qcclResult_t r = reduce ? qcclReduce(b->send, b->recv, 64, qcclFloat32, op, 0, comm, NULL)
                          : qcclAllReduce(b->send, b->recv, 64, qcclFloat32, op, comm, NULL);
  const char* msg = qcclGetLastError(comm);
  /* the Reduce's root waited for every rank; the others need not have,
   * and may learn of it at a later call */
  int may_pass = reduce && t->rank != 0;
  if (r != qcclInvalidUsage && !(may_pass && r == qcclSuccess))
    mr_case_fail(&c, "the %s that disagrees gave %s, not qcclInvalidUsage: %s",
                 reduce ? "Reduce" : "AllReduce", qcclGetErrorString(r), msg);
  else if (r == qcclInvalidUsage && !strstr(msg, "op"))
    mr_case_fail(&c, "the message does not name the op: %s", msg);
  if (qcclAllReduce(b->send, b->recv, 8, qcclFloat32, qcclSum, comm, NULL) == qcclSuccess)
    mr_case_fail(&c, "a call after the disagreement succeeded");
  qcclCommDestroy(comm);
  /* the job's communicator is untouched */
  MR_OK(&c, qcclAllReduce(b->send, b->recv, 8, qcclFloat32, qcclSum, t->comm, NULL));
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  char dir[256];
  if (mr_job_dir(dir, sizeof dir) != 0) mr_die(&t, "no job directory (MASTER_PORT unset?)");
  bufs_t b;
  size_t most = (size_t)t.nranks * MIXED_MAX;
  b.send = malloc(most * sizeof(float));
  b.recv = malloc(most * sizeof(float));
  if (!b.send || !b.recv) mr_die(&t, "out of memory");
  memset(b.send, 0, most * sizeof(float));
  /* a communicator of this test's own: its call sequence starts here */
  qcclComm_t comm = NULL;
  if (qcclCommSplit(t.comm, 0, t.rank, &comm, NULL) != qcclSuccess)
    mr_die(&t, "qcclCommSplit: %s", qcclGetLastError(t.comm));
  /* two calls make its lanes (collective k runs on lane k mod 2, made by
   * its first call, which every rank joins) */
  for (int i = 0; i < 2; i++)
    if (qcclAllReduce(b.send, b.recv, 1, qcclFloat32, qcclSum, comm, NULL) != qcclSuccess)
      mr_die(&t, "allreduce: %s", qcclGetLastError(comm));
  for (int k = K_BCAST; k <= K_GATHER; k++) ahead_case(&t, comm, &b, k, dir);
  mixed_case(&t, comm, &b, t.quick ? 150 : 400);
  if (qcclCommFinalize(comm) != qcclSuccess || qcclCommDestroy(comm) != qcclSuccess)
    mr_die(&t, "finalize: %s", qcclGetLastError(comm));
  disagree_case(&t, &b, 0);
  disagree_case(&t, &b, 1);
  free(b.send);
  free(b.recv);
  /* the files, once every rank is past its fetches */
  if (qcclBarrier(t.comm, NULL) != qcclSuccess) mr_die(&t, "barrier");
  if (t.rank == 0) {
    const char* names[3 * 8];
    char store[3 * 8][64];
    int nn = 0;
    for (int k = K_BCAST; k <= K_GATHER; k++)
      for (int j = 0; j < t.nranks && j < 8; j++) {
        snprintf(store[nn], sizeof store[nn], "runahead-%s-%d", knames[k], j);
        names[nn] = store[nn];
        nn++;
      }
    mr_job_dir_remove(dir, names, nn);
  }
  return mr_finish(&t);
}
