/*
 * mr_split_destroy - a communicator destroyed right after its split, on a
 * rank that finished the split first, must not fail the split on the
 * slower ranks: the fast rank leaves the bootstrap ring in good order (a
 * bye byte, core/socket.c), which its previous rank, still finishing the
 * last exchange, must not take for a failure. 40 rounds of split (plain,
 * node, reversed keys) and an immediate destroy, with the rank that
 * finishes first varying. Before the fix 3 ranks failed in every run
 * ("the next rank closed its connection").
 */
#include <stdio.h>
#include <time.h>

#include "mr_util.h"

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  mr_case_t c;
  if (mr_case_begin(&t, &c, "split then destroy at once, 40 rounds")) {
    for (int i = 0; i < 40; i++) {
      /* a different rank dawdles each round, so a different one finishes first */
      if (t.rank == i % t.nranks) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
      }
      qcclComm_t n = NULL;
      int key = i % 3 == 2 ? t.nranks - t.rank : t.rank;
      if (i % 3 == 1)
        MR_OK(&c, qcclCommSplitNode(t.comm, NULL, &n));
      else
        MR_OK(&c, qcclCommSplit(t.comm, 0, key, &n, NULL));
      MR_OK(&c, qcclCommDestroy(n));
    }
    /* the parent is still whole */
    int x = 1, y = 0;
    MR_OK(&c, qcclAllReduce(&x, &y, 1, qcclInt32, qcclSum, t.comm, NULL));
    if (y != t.nranks) mr_case_fail(&c, "sum %d after the rounds", y);
    mr_case_end(&c);
  }
  return mr_finish(&t);
}
