/*
 * shm_xch.c - the exchange cells of a 2-rank segment.
 *
 * On 2 ranks an AllGather or an AlltoAll is one exchange: each rank hands
 * the other one block (and so is a small AllReduce: allreduce_oneshot.c,
 * each rank reducing the peer's block where it lies). The slots (shm.h)
 * stage it at places that move from call to call (shm_rot), so that a
 * writer rarely stores into lines the reader still holds; but those lines
 * come from the shared cache at best, and every store still takes its
 * line for writing from wherever it is. The exchange cells go the other
 * way: the segment has two, a rank writes one it holds, and the peer,
 * having read it, holds it. In an exchange each rank so writes the cell
 * it read in the last one: lines its own cache holds (only the peer's
 * copy to drop), the payload then read by the peer straight from this
 * core's cache. A scratch program of two threads exchanging 4-256 KiB
 * took 0.6-0.65 of the time so at 4-128 KiB and 0.85 at 256 KiB, against
 * a ring that moves on (docs/PERF.md, "Cells that change hands").
 *
 * Who holds which cell follows from the exchanges alone: rank r holds
 * cell r at first, gives a cell up when it writes it and takes it when it
 * has read it (shm.h, shm_hold_*), so a cell has one writer at a time and
 * is never written before its reader is done. Each rank chooses for
 * itself, exchange by exchange, between a cell it holds and its slot (the
 * staged path of every chunk: shm_rot's place, once shm_test_chunk says
 * the slot is free), and says which in its control line (xch_at, per
 * exchange parity: both ranks count their exchanges alike, xch_seq)
 * before its post. The peer reads it after the post; this rank writes the
 * word of the same parity again only two exchanges on, after it has read
 * the peer's next block, which the peer wrote after it had read this
 * word. (Per chunk parity it was not safe: between two exchanges a rank
 * may run eager calls, a Broadcast's root, that take chunk numbers
 * without waiting for the peer, and so write the word of the next
 * exchange at the parity of the last while the peer is about to read it.)
 * A rank takes the slot only when it holds no cell. It writes a cell with
 * ordinary stores in either mode, whatever its handoffs into the slots
 * use (shm_handoff.c): the lines are the ones its core has just read, so
 * only the peer's copy is dropped, and where the cores share no cache the
 * peer's read then fetches them once, where streaming stores would send
 * them to memory and the peer fetch them from there. Without a shared
 * cache (the AMD guest, 2 ranks, steady runs, paired medians) cells
 * written so took 0.74-0.91 of the time of slots written streaming at
 * 4-256 KiB (AllGather, AlltoAll; AllReduce 16-64 KiB 0.77-0.79, 4 KiB
 * 0.95), cells written streaming 1.10-1.21 (docs/PERF.md, "The mode
 * from the first call"). Until 2026-12-07 a rank whose handoffs streamed
 * took the slot: cells written streaming had taken 1.13-1.16x the slots'
 * time at 64-256 KiB; ordinary stores into the cells were not tried
 * then.
 *
 * The exchange takes a chunk number from the slots' sequence and posts
 * 3g + 1 once its block is out and 3g + 3 once it has read the peer's, so
 * the slots' tests of later chunks (shm_test_chunk, shm_test_chunk_part)
 * pass over it as over any chunk read everywhere. Both ranks must take an
 * exchange for the same calls: shm_xch_use depends on the segment and the
 * block's size only.
 */
#include <string.h>

#include "core/memcopy.h"
#include "transport/shm.h"

int shm_xch_use(const shm_t* s, size_t n) {
  return s->nranks == 2 && n > 0 && n <= s->xch_bytes; /* xch_bytes: at most a slot */
}

/* The cell this rank writes next (0 or 1), or -1: the slot. Also the
 * slot at every QCCL_SHM_XCH_SLOT_EVERY-th exchange of this rank, the
 * ranks out of step (for the tests: both ways at once). */
static int shm_xch_pick(shm_t* s) {
  if (s->xch_slot_every > 0 && (s->xch_count++ + (unsigned)s->rank) % s->xch_slot_every == 0)
    return -1;
  return shm_hold_pick(s->xch_hold);
}

qcclResult_t shm_xch_put(shm_t* s, uint64_t g, size_t rot, const void* src, size_t n,
                         size_t call_bytes) {
  int k = shm_xch_pick(s);
  char* dst;
  if (k >= 0) {
    dst = s->xch + (size_t)k * s->xch_bytes;
    s->xch_hold = shm_hold_give(s->xch_hold, k);
  } else {
    qcclResult_t r = shm_test_chunk(s, g);
    if (r != qcclSuccess) return r;
    dst = shm_slot(s, s->rank, g) + rot;
  }
  if (k >= 0) /* lines this core has just read: ordinary stores in either mode */
    copy_out(dst, src, n, shm_handoff_nt(s, call_bytes));
  else
    shm_handoff_copy(s, dst, src, n, call_bytes);
  s->ctrl[s->rank].xch_at[s->xch_seq & 1] = (uint16_t)(k + 1);
  shm_post(s, 3 * g + 1);
  return qcclSuccess;
}

qcclResult_t shm_xch_test(shm_t* s, uint64_t g) {
  return shm_test_rank(s, 1 - s->rank, 3 * g + 1);
}

const char* shm_xch_peer(shm_t* s, uint64_t g, size_t rot) {
  int peer = 1 - s->rank;
  int k = (int)s->ctrl[peer].xch_at[s->xch_seq & 1] - 1;
  return k >= 0 ? s->xch + (size_t)k * s->xch_bytes : shm_slot(s, peer, g) + rot;
}

void shm_xch_done(shm_t* s, uint64_t g) {
  int k = (int)s->ctrl[1 - s->rank].xch_at[s->xch_seq & 1] - 1;
  if (k >= 0) s->xch_hold = shm_hold_take(s->xch_hold, k);
  s->xch_seq++;
  shm_post(s, 3 * g + 3);
}

void shm_xch_get(shm_t* s, uint64_t g, size_t rot, void* dst, size_t n) {
  copy_data(dst, shm_xch_peer(s, g, rot), n);
  shm_xch_done(s, g);
}
