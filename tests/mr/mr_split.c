/*
 * mr_split - qcclCommSplit (NCCL's semantics).
 *
 * Cases:
 *   parity    color = rank % 2, key = -rank: two sub-communicators, ranks
 *             ordered by key (so reversed); count, rank and the members'
 *             parent ranks (all-gathered on the sub-communicator) checked,
 *             then an exact int64 AllReduce on each, interleaved with
 *             AllReduces on the parent;
 *   nocolor   rank 0 passes QCCL_SPLIT_NOCOLOR and gets newcomm NULL; the
 *             rest form one communicator of W-1 ranks;
 *   same      one color, equal keys: the order falls back to parent rank;
 *             made with a config (QCCL_CONFIG_INITIALIZER + commName);
 *   nested    a split of the parity sub-communicator (color = subrank / 2);
 *   destroy   sub-communicators destroyed; the parent still works;
 *   fresh     a new split counts nothing before its first call (the turn
 *             of small calls a new segment runs at init, comm_warm.c, is
 *             not the user's), its first send / receive to the ring
 *             neighbours gets the user's bytes (not the turn's), and three
 *             AllReduces count three calls and three times the first one's
 *             bytes, though the second makes lane 1 and runs the turn
 *             again on lane 0.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mr_util.h"

/* sums sub-communicator members' (parent rank + 1) * (i + 1) and checks */
static void sub_allreduce(mr_case_t* c, qcclComm_t sub, const int* members, int nmem, size_t n,
                          const char* what) {
  int64_t* v = malloc(n * sizeof *v);
  if (!v) mr_die(c->t, "out of memory");
  for (size_t i = 0; i < n; i++) v[i] = (int64_t)(c->t->rank + 1) * (int64_t)(i + 1);
  MR_OK(c, qcclAllReduce(v, v, n, qcclInt64, qcclSum, sub, NULL));
  int64_t w = 0;
  for (int k = 0; k < nmem; k++) w += members[k] + 1;
  for (size_t i = 0; i < n; i++)
    if (v[i] != w * (int64_t)(i + 1)) {
      mr_case_fail(c, "%s element %zu: got %lld expected %lld", what, i, (long long)v[i],
                   (long long)(w * (int64_t)(i + 1)));
      break;
    }
  free(v);
}

/* checks count, rank, and that members (in sub-rank order) are as expected */
static void check_sub(mr_case_t* c, qcclComm_t sub, const int* members, int nmem,
                      const char* what) {
  int n = -1, r = -1, want_r = -1;
  for (int k = 0; k < nmem; k++)
    if (members[k] == c->t->rank) want_r = k;
  MR_OK(c, qcclCommCount(sub, &n));
  MR_OK(c, qcclCommUserRank(sub, &r));
  if (n != nmem || r != want_r) {
    mr_case_fail(c, "%s: count %d rank %d, expected count %d rank %d", what, n, r, nmem, want_r);
    return;
  }
  int32_t me = c->t->rank;
  int32_t* all = calloc((size_t)nmem, sizeof *all);
  if (!all) mr_die(c->t, "out of memory");
  MR_OK(c, qcclAllGather(&me, all, 1, qcclInt32, sub, NULL));
  for (int k = 0; k < nmem; k++)
    if (all[k] != members[k])
      mr_case_fail(c, "%s: sub-rank %d is parent rank %d, expected %d", what, k, all[k],
                   members[k]);
  free(all);
}

static void parent_check(mr_case_t* c) {
  int* all = malloc((size_t)c->t->nranks * sizeof *all);
  if (!all) mr_die(c->t, "out of memory");
  for (int k = 0; k < c->t->nranks; k++) all[k] = k;
  sub_allreduce(c, c->t->comm, all, c->t->nranks, 3001, "parent allreduce");
  free(all);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const int W = t.nranks, me = t.rank;
  int* members = malloc((size_t)W * sizeof *members);
  if (!members) mr_die(&t, "out of memory");
  mr_case_t c;
  qcclComm_t parity = NULL;
  int npar = 0;

  if (mr_case_begin(&t, &c, "split parity")) {
    MR_OK(&c, qcclCommSplit(t.comm, me % 2, -me, &parity, NULL));
    for (int r = W - 1; r >= 0; r--)
      if (r % 2 == me % 2) members[npar++] = r;
    check_sub(&c, parity, members, npar, "parity");
    parent_check(&c);
    sub_allreduce(&c, parity, members, npar, 100003, "parity allreduce");
    parent_check(&c);
    sub_allreduce(&c, parity, members, npar, 7, "parity allreduce");
    mr_case_end(&c);
  }

  if (mr_case_begin(&t, &c, "split nested") && parity) {
    int sr = -1;
    MR_OK(&c, qcclCommUserRank(parity, &sr));
    qcclComm_t sub2 = NULL;
    MR_OK(&c, qcclCommSplit(parity, sr / 2, sr, &sub2, NULL));
    int nm = 0;
    int* m2 = malloc((size_t)W * sizeof *m2);
    if (!m2) mr_die(&t, "out of memory");
    for (int k = 0; k < npar; k++)
      if (k / 2 == sr / 2) m2[nm++] = members[k];
    check_sub(&c, sub2, m2, nm, "nested");
    sub_allreduce(&c, sub2, m2, nm, 5003, "nested allreduce");
    MR_OK(&c, qcclCommDestroy(sub2));
    sub_allreduce(&c, parity, members, npar, 11, "parity allreduce after nested destroy");
    free(m2);
    mr_case_end(&c);
  }

  if (mr_case_begin(&t, &c, "split nocolor")) {
    qcclComm_t sub = (qcclComm_t)&c; /* must be overwritten with NULL */
    MR_OK(&c, qcclCommSplit(t.comm, me == 0 ? QCCL_SPLIT_NOCOLOR : 0, me, &sub, NULL));
    if (me == 0) {
      if (sub != NULL) mr_case_fail(&c, "QCCL_SPLIT_NOCOLOR did not give newcomm NULL");
    } else {
      int nm = 0;
      for (int r = 1; r < W; r++) members[nm++] = r;
      check_sub(&c, sub, members, nm, "nocolor");
      sub_allreduce(&c, sub, members, nm, 999, "nocolor allreduce");
      MR_OK(&c, qcclCommDestroy(sub));
    }
    parent_check(&c);
    mr_case_end(&c);
  }

  if (mr_case_begin(&t, &c, "split same")) {
    qcclConfig_t cfg = QCCL_CONFIG_INITIALIZER;
    cfg.commName = "mr_split same";
    qcclComm_t sub = NULL;
    MR_OK(&c, qcclCommSplit(t.comm, 7, 0, &sub, &cfg));
    for (int r = 0; r < W; r++) members[r] = r;
    check_sub(&c, sub, members, W, "same");
    sub_allreduce(&c, sub, members, W, 4097, "same allreduce");
    MR_OK(&c, qcclCommDestroy(sub));
    mr_case_end(&c);
  }

  if (mr_case_begin(&t, &c, "split destroy")) {
    if (parity) MR_OK(&c, qcclCommDestroy(parity));
    parity = NULL;
    parent_check(&c);
    MR_OK(&c, qcclBarrier(t.comm, NULL));
    mr_case_end(&c);
  }
  if (mr_case_begin(&t, &c, "split fresh")) {
    qcclComm_t sub = NULL;
    MR_OK(&c, qcclCommSplit(t.comm, 3, me, &sub, NULL));
    qcclStats_t st = QCCL_STATS_INITIALIZER;
    MR_OK(&c, qcclCommGetStats(sub, &st));
    for (int i = 0; i < qcclStatNumColls; i++)
      if (st.coll[i].calls || st.coll[i].bytesIntra || st.coll[i].bytesInter)
        mr_case_fail(&c, "fresh split: slot %d counts %llu calls, %llu + %llu bytes", i,
                     (unsigned long long)st.coll[i].calls,
                     (unsigned long long)st.coll[i].bytesIntra,
                     (unsigned long long)st.coll[i].bytesInter);
    enum { NP = 1021 };
    int32_t out[NP], in[NP];
    int next = (me + 1) % W, prev = (me + W - 1) % W;
    for (int i = 0; i < NP; i++) out[i] = (me + 1) * 100000 + i, in[i] = -1;
    MR_OK(&c, qcclGroupStart());
    MR_OK(&c, qcclSend(out, NP, qcclInt32, next, sub, NULL));
    MR_OK(&c, qcclRecv(in, NP, qcclInt32, prev, sub, NULL));
    MR_OK(&c, qcclGroupEnd());
    for (int i = 0; i < NP; i++)
      if (in[i] != (prev + 1) * 100000 + i) {
        mr_case_fail(&c, "first receive element %d: %d, expected %d", i, in[i],
                     (prev + 1) * 100000 + i);
        break;
      }
    for (int r = 0; r < W; r++) members[r] = r;
    uint64_t first = 0;
    for (int k = 0; k < 3; k++) {
      sub_allreduce(&c, sub, members, W, 4099, "fresh allreduce");
      MR_OK(&c, qcclCommGetStats(sub, &st));
      uint64_t b = st.coll[qcclStatAllReduce].bytesIntra + st.coll[qcclStatAllReduce].bytesInter;
      if (k == 0) first = b;
      if (st.coll[qcclStatAllReduce].calls != (uint64_t)k + 1 || b != first * (uint64_t)(k + 1))
        mr_case_fail(&c, "after %d AllReduces: %llu calls, %llu bytes (the first: %llu)", k + 1,
                     (unsigned long long)st.coll[qcclStatAllReduce].calls, (unsigned long long)b,
                     (unsigned long long)first);
    }
    if (st.coll[qcclStatSendRecv].calls != 2)
      mr_case_fail(&c, "the send and receive counted %llu calls",
                   (unsigned long long)st.coll[qcclStatSendRecv].calls);
    MR_OK(&c, qcclCommDestroy(sub));
    mr_case_end(&c);
  }

  if (parity) qcclCommDestroy(parity);
  free(members);
  return mr_finish(&t);
}
