/*
 * mn_idle_progress - a send that finished on one communicator still
 * reaches its peer while the sender waits on another. Run on two or more
 * simulated hosts with a slow link, e.g.
 *   UCX_TCP_SNDBUF=8k qcclrun -n 2 --nodes 2 --link 20mbit -- mn_idle_progress
 *
 * UCX's TCP transport completes a small send once it has copied the
 * message into its own buffer; what the kernel did not take yet leaves
 * when that worker is next progressed. Each round, rank 0 sends a burst of
 * small messages to the last rank on communicator A (the slow link keeps
 * the socket full, so the last one is left partly in UCX's buffer), then
 * waits on communicator B for one message from the last rank, which sends
 * it only after it received the whole burst on A. Before the fix nothing
 * progressed A's worker while rank 0 waited on B: the last rank waited for
 * the rest of the burst and both failed at QCCL_TIMEOUT. Then the same
 * with the two lanes of one communicator (QCCL_LANES=2, the default): the
 * burst as sends and receives (they run on lane 0), then a Broadcast from
 * the last rank on lane 1 (the first one makes lane 1: rank 0 waits on the
 * bootstrap meanwhile).
 * Every round must end well within the timeout, with the right bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mr/mr_util.h"

#define ROUNDS 10
#define BURST 32
#define MSG_BYTES 6000

static unsigned char pattern(int round, int k, size_t i) {
  return (unsigned char)(round * 131 + k * 7 + (int)i * 13 + 1);
}

/* One round over two communicators: the burst on a, the answer on b (none
 * when b is NULL). */
static void round_two_comms(mr_t* t, mr_case_t* c, qcclComm_t a, qcclComm_t b, int round,
                            double limit) {
  const int last = t->nranks - 1;
  unsigned char* buf = malloc((size_t)BURST * MSG_BYTES);
  unsigned char answer = 0;
  double t0 = mr_now();
  if (t->rank == 0) {
    for (int k = 0; k < BURST; k++)
      for (size_t i = 0; i < MSG_BYTES; i++) buf[(size_t)k * MSG_BYTES + i] = pattern(round, k, i);
    MR_OK(c, qcclGroupStart());
    for (int k = 0; k < BURST; k++)
      MR_OK(c, qcclSend(buf + (size_t)k * MSG_BYTES, MSG_BYTES, qcclUint8, last, a, NULL));
    MR_OK(c, qcclGroupEnd());
    if (b != NULL) MR_OK(c, qcclRecv(&answer, 1, qcclUint8, last, b, NULL));
    if (b != NULL && answer != (unsigned char)(round + 1))
      mr_case_fail(c, "round %d: the answer on the second communicator is %d, not %d", round,
                   answer, round + 1);
  } else if (t->rank == last) {
    memset(buf, 0, (size_t)BURST * MSG_BYTES);
    MR_OK(c, qcclGroupStart());
    for (int k = 0; k < BURST; k++)
      MR_OK(c, qcclRecv(buf + (size_t)k * MSG_BYTES, MSG_BYTES, qcclUint8, 0, a, NULL));
    MR_OK(c, qcclGroupEnd());
    size_t bad = 0;
    for (int k = 0; k < BURST; k++)
      for (size_t i = 0; i < MSG_BYTES; i++)
        bad += buf[(size_t)k * MSG_BYTES + i] != pattern(round, k, i);
    if (bad) mr_case_fail(c, "round %d: %zu bytes of the burst differ", round, bad);
    answer = (unsigned char)(round + 1);
    if (b != NULL) MR_OK(c, qcclSend(&answer, 1, qcclUint8, 0, b, NULL));
  }
  double el = mr_now() - t0;
  if (el > limit) mr_case_fail(c, "round %d took %.1f s", round, el);
  free(buf);
}

/* One round on the lanes of one communicator: the burst on lane 0 (sends
 * and receives run there), then a Broadcast from the last rank on lane 1
 * (the round's second collective). */
static void round_lanes(mr_t* t, mr_case_t* c, int round, double limit) {
  float x = 1, sum = 0;
  MR_OK(c, qcclAllReduce(&x, &sum, 1, qcclFloat32, qcclSum, t->comm, NULL)); /* lane 0 */
  if (sum != (float)t->nranks) mr_case_fail(c, "round %d: AllReduce gave %g", round, sum);
  round_two_comms(t, c, t->comm, NULL, round, limit);
  unsigned char word[8] = {0};
  if (t->rank == t->nranks - 1) memset(word, round + 1, sizeof word);
  double t0 = mr_now();
  MR_OK(c, qcclBroadcast(word, word, sizeof word, qcclUint8, t->nranks - 1, t->comm, NULL));
  if (word[0] != (unsigned char)(round + 1) || word[7] != (unsigned char)(round + 1))
    mr_case_fail(c, "round %d: the Broadcast gave %d, not %d", round, word[0], round + 1);
  double el = mr_now() - t0;
  if (el > limit) mr_case_fail(c, "round %d: the Broadcast took %.1f s", round, el);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  int node, nnodes, local, lsize;
  if (qcclCommNodeInfo(t.comm, &node, &nnodes, &local, &lsize) != qcclSuccess || nnodes < 2)
    mr_die(&t, "needs ranks on 2 hosts or more");
  /* well within QCCL_TIMEOUT: a stuck burst waits for all of it */
  const char* te = getenv("QCCL_TIMEOUT");
  double limit = (te ? atof(te) : 600) / 2;
  qcclComm_t b = NULL;
  mr_case_t c;
  if (mr_case_begin(&t, &c, "a burst on one communicator, the answer on another")) {
    MR_OK(&c, qcclCommSplit(t.comm, 0, t.rank, &b, NULL));
    for (int round = 0; round < ROUNDS && !c.bad; round++)
      round_two_comms(&t, &c, t.comm, b, round, limit);
    mr_case_end(&c);
  }
  if (mr_case_begin(&t, &c, "a burst on lane 0, then a Broadcast on lane 1")) {
    for (int round = 0; round < ROUNDS && !c.bad; round++) round_lanes(&t, &c, round, limit);
    mr_case_end(&c);
  }
  if (b) qcclCommDestroy(b);
  return mr_finish(&t);
}
