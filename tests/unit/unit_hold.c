/*
 * unit_hold - the rule of two cells that change hands (shm.h, shm_hold_*),
 * which the p2p cells (shm_p2p.c) and the exchange cells (shm_xch.c) keep.
 * Two ranks run a seeded random schedule of writes and reads over a FIFO
 * each way, as the transports do: a rank writes the cell shm_hold_pick
 * names (if any) and gives it up, the peer reads the oldest message and
 * takes the cell. Checked at every step, against a model kept apart from
 * the hold words: every cell is held by one rank or in one message in
 * flight, never both nor neither; a pick names a cell the rank holds, -1
 * only when it holds none; a rank that holds the cell it read last writes
 * that one (so in an exchange the cells change hands: each rank writes
 * what it has just read). Both namings: the exchange's (cell k is the
 * same cell for both ranks) and the p2p pair's (a rank's cell 0 is its own
 * channel's, the peer's 1).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/shm.h"

#define CHECK_NAME "unit_hold"
#include "check.h"

static uint64_t rng;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* The cell rank r calls k, as a global index (0 or 1). */
static int global(int mirrored, int r, int k) {
  return mirrored && r == 1 ? 1 - k : k;
}

static void run(int mirrored, int steps, int exchange_every) {
  uint64_t hold[2];
  int owner[2];   /* the model: holding rank of each global cell, -1: in flight */
  int fifo[2][4]; /* messages to rank r: global cells, oldest first */
  int nq[2] = {0, 0};
  int last_read[2] = {-1, -1}; /* global cell each rank read last */
  /* at first: the exchange, rank r holds cell r; the pair, each its own
   * channel's (its cell 0) */
  for (int r = 0; r < 2; r++) {
    int k = mirrored ? 0 : r;
    hold[r] = shm_hold_take(0, k);
    owner[global(mirrored, r, k)] = r;
    last_read[r] = global(mirrored, r, k);
  }
  for (int step = 0; step < steps; step++) {
    int r = (int)(next() % 2);
    /* now and then a strict exchange: both write, then both read */
    int exchange = exchange_every > 0 && step % exchange_every == 0;
    for (int round = 0; round < (exchange ? 2 : 1); round++) {
      for (int who = 0; who < 2; who++) {
        int me = exchange ? who : r;
        int write = exchange ? round == 0 : (int)(next() % 2);
        if (write) {
          int k = shm_hold_pick(hold[me]);
          int held = 0;
          for (int c = 0; c < 2; c++) held += owner[c] == me;
          CHECK((k < 0) == (held == 0), "step %d rank %d: pick %d while it holds %d cells", step,
                me, k, held);
          if (k >= 0) {
            int g = global(mirrored, me, k);
            CHECK(owner[g] == me, "step %d rank %d: picked cell %d held by %d", step, me, g,
                  owner[g]);
            if (owner[last_read[me]] == me)
              CHECK(g == last_read[me], "step %d rank %d: wrote cell %d, not %d it read last", step,
                    me, g, last_read[me]);
            hold[me] = shm_hold_give(hold[me], k);
            owner[g] = -1;
            /* two cells: at most two messages in flight, both its own */
            CHECK(nq[1 - me] < 2, "step %d: a third message in flight", step);
            fifo[1 - me][nq[1 - me]++] = g;
          }
        } else if (nq[me] > 0) {
          int g = fifo[me][0];
          memmove(fifo[me], fifo[me] + 1, (size_t)(nq[me] - 1) * sizeof(int));
          nq[me]--;
          CHECK(owner[g] == -1, "step %d rank %d: read cell %d while %d holds it", step, me, g,
                owner[g]);
          int k = global(mirrored, me, g); /* the mirror is its own inverse */
          hold[me] = shm_hold_take(hold[me], k);
          owner[g] = me;
          last_read[me] = g;
        }
        if (!exchange) break;
      }
    }
    /* the model against the hold words */
    for (int c = 0; c < 2; c++) {
      int in_flight = 0;
      for (int q = 0; q < 2; q++)
        for (int i = 0; i < nq[q]; i++) in_flight += fifo[q][i] == c;
      int holders = 0;
      for (int q = 0; q < 2; q++) {
        int k = global(mirrored, q, c);
        int h = (hold[q] >> k) & 1u;
        CHECK(h == (owner[c] == q), "step %d: rank %d's hold word says %d for cell %d", step, q, h,
              c);
        holders += h;
      }
      CHECK(holders + in_flight == 1, "step %d: cell %d held %d times, in flight %d times", step, c,
            holders, in_flight);
    }
  }
}

int main(int argc, char** argv) {
  uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 0x9e3779b97f4a7c15ull ^ (uint64_t)argc;
  printf("unit_hold: seed %llu (argument to replay)\n", (unsigned long long)seed);
  rng = seed | 1;
  /* the exchange of one cell each, strictly alternating: each rank writes
   * back the cell it has just read */
  for (int mirrored = 0; mirrored < 2; mirrored++) {
    run(mirrored, 200000, 0);
    run(mirrored, 200000, 1);
    run(mirrored, 200000, 7);
  }
  /* the figures: in a strict exchange the cells change hands every time */
  uint64_t h0 = shm_hold_take(0, 0), h1 = shm_hold_take(0, 1);
  for (int i = 0; i < 6; i++) {
    int k0 = shm_hold_pick(h0), k1 = shm_hold_pick(h1);
    CHECK(k0 == i % 2 && k1 == 1 - i % 2, "exchange %d: ranks wrote cells %d and %d", i, k0, k1);
    h0 = shm_hold_take(shm_hold_give(h0, k0), k1);
    h1 = shm_hold_take(shm_hold_give(h1, k1), k0);
  }
  CHECK(shm_hold_pick(0) == -1, "a rank holding nothing picked %d", shm_hold_pick(0));
  CHECK(shm_hold_pick(shm_hold_take(shm_hold_take(0, 0), 1)) == 1, "both held: not the last taken");
  CHECK(shm_hold_pick(shm_hold_take(shm_hold_take(0, 1), 0)) == 0, "both held: not the last taken");
  return check_verdict();
}
