/*
 * shm_xch.c - the exchange cells of a 2-rank segment.
 *
 * On 2 ranks an AllGather or an AlltoAll is one exchange: each rank hands
 * the other one block. The slots (shm.h) stage it at places that move
 * from call to call (shm_rot), so that a writer rarely stores into lines
 * the reader still holds; but those lines come from the shared cache at
 * best, and every store still takes its line for writing from wherever it
 * is. The exchange cells go the other way: the segment has two, and in
 * exchange e rank r writes cell (r + e) % 2 and reads the other. In the
 * next exchange each rank writes the cell it has just read: lines its own
 * cache holds (only the peer's copy to drop), the payload then read by
 * the peer straight from this core's cache. A scratch program of two
 * threads exchanging 4-256 KiB took 0.6-0.65 of the time so at 4-128 KiB
 * and 0.85 at 256 KiB, against a ring that moves on (docs/PERF.md, "Cells
 * that change hands").
 *
 * No counter says a cell is free: the only writer of a cell after its
 * reader is that reader itself (exchange e + 1), and the peer writes it
 * again only at e + 2, after it has read what this rank wrote at e + 1,
 * which this rank wrote after it had read the cell. A rank is thus at
 * most one exchange ahead of the other, and the step counters carry the
 * rest: a rank posts 3g + 1 once its block is in its cell (g the
 * exchange's chunk number, taken from the same sequence as the slots'
 * chunks) and 3g + 3 once it has read the peer's, so the slots' tests of
 * later chunks (shm_test_chunk, shm_test_chunk_part) pass over an
 * exchange as over any chunk read everywhere.
 *
 * Both ranks must take an exchange for the same calls: shm_xch_use
 * depends on the segment and the block's size only.
 */
#include <string.h>

#include "transport/shm.h"

int shm_xch_use(const shm_t* s, size_t n) {
  return s->nranks == 2 && n > 0 && n <= s->xch_bytes;
}

void shm_xch_put(shm_t* s, uint64_t g, const void* src, size_t n) {
  char* cell = s->xch + (size_t)((s->rank + s->xch_seq) & 1) * s->xch_bytes;
  shm_handoff_copy(s, cell, src, n, 2 * n);
  shm_post(s, 3 * g + 1);
}

qcclResult_t shm_xch_test(shm_t* s, uint64_t g) {
  return shm_test_rank(s, 1 - s->rank, 3 * g + 1);
}

void shm_xch_get(shm_t* s, uint64_t g, void* dst, size_t n) {
  const char* cell = s->xch + (size_t)((1 - s->rank + s->xch_seq) & 1) * s->xch_bytes;
  memcpy(dst, cell, n);
  s->xch_seq++;
  shm_post(s, 3 * g + 3);
}
