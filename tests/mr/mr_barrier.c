/*
 * mr_barrier - qcclBarrier returns on a rank only after every rank has
 * entered it.
 *
 * Each round one rank (rounds rotate over all ranks, twice) arrives late
 * by a random 50-200 ms. Every rank notes its arrival time just before the
 * call and its return time just after, on CLOCK_MONOTONIC (one clock for
 * the whole host); the times are all-gathered after the barrier, and every
 * return must come after the last arrival. Then 300 back-to-back barriers
 * must complete (their mean latency is printed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mr_util.h"

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const int W = t.nranks;
  double* all = calloc((size_t)W * 2, sizeof *all);
  if (!all) mr_die(&t, "out of memory");
  for (int round = 0; round < 2 * W; round++) {
    mr_case_t c;
    if (!mr_case_begin(&t, &c, "barrier round=%d", round)) continue;
    const int late = round % W;
    double delay = 0.05 + 0.15 * (double)(mr_mix(c.cseed) % 1000) / 1000.0;
    if (t.rank == late) sleep_s(delay);
    double mine[2];
    mine[0] = mr_now();
    MR_OK(&c, qcclBarrier(t.comm, NULL));
    mine[1] = mr_now();
    MR_OK(&c, qcclAllGather(mine, all, 2, qcclFloat64, t.comm, NULL));
    double last_in = 0;
    for (int r = 0; r < W; r++)
      if (all[2 * r] > last_in) last_in = all[2 * r];
    for (int r = 0; r < W; r++)
      if (all[2 * r + 1] < last_in)
        mr_case_fail(&c, "rank %d left the barrier %.6f s before rank %d entered it", r,
                     last_in - all[2 * r + 1], late);
    mr_case_end(&c);
  }
  mr_case_t c;
  if (mr_case_begin(&t, &c, "barrier repeated")) {
    double t0 = mr_now();
    for (int i = 0; i < 300; i++) MR_OK(&c, qcclBarrier(t.comm, NULL));
    if (t.rank == 0) printf("300 barriers: %.1f us each\n", (mr_now() - t0) / 300 * 1e6);
    mr_case_end(&c);
  }
  free(all);
  return mr_finish(&t);
}
