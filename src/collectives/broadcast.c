/*
 * broadcast.c - Broadcast from a root inside one node.
 *
 * The root copies each chunk into its slot once; every other rank copies
 * it out once. The root runs up to two chunks ahead (double buffering), so
 * staging and reading overlap; it returns as soon as it has staged the last
 * chunk, and each other rank once it has read it (the slots are reused only
 * after every rank has read them: shm_test_chunk). A staged root writes
 * only its part of the slot and runs ahead by as many chunks as fit there
 * side by side, up to SHM_PART_HIST (shm_test_chunk_part: 32 chunks of 4
 * KiB). Staged calls of BCAST_HALF_MIN_SLOTS slots and more go in
 * half-slot chunks at the slot's two halves in turn (shm_half_span, as
 * Gather's), so the root stages up to g + 3 while a reader copies g,
 * unless the call is of a size that may split (below: a reader cannot
 * know whether the root's buffer is plain and out of place, so such a
 * call keeps whole slots either way); every rank decides alike from the
 * size and the agreed single-copy threshold. Bytes: the
 * root writes the buffer once, each other rank reads it once. The root's
 * own copy (out of place) follows each chunk's staging, so the readers
 * never wait for it (2 ranks 4-64 MiB: 0.81-0.87x the time; 4 ranks
 * within the noise), with streaming stores from COPY_STREAM_MIN_TOTAL as
 * the readers' (memcpy's ordinary stores read every line of a large
 * recvbuff in first); with single copy the whole of it follows the first
 * publication (2 ranks 256 KiB-1 MiB: 0.64-0.65x; docs/PERF.md, "The
 * root's own block last"). Half-slot chunks and the streaming own copy
 * together, on the AMD guest, 2 ranks, 16-256 MiB: 0.72-0.78 of the time
 * in place and 0.92-0.93 out of place with a shared cache, 0.92-0.96 and
 * 0.85-0.86 without; 4 ranks 0.90-0.97 (docs/PERF.md, "Broadcast in
 * half-slot chunks").
 *
 * Single copy (cma.h): a root whose sendbuff is not qcclMemAlloc memory, in
 * a call of CMA_BROADCAST_MIN_BYTES to CMA_BROADCAST_MAX_BYTES (and from
 * CMA's threshold) on at most CMA_BROADCAST_MAX_RANKS ranks, publishes its
 * address at every chunk instead of staging; each other rank reads the
 * whole buffer with process_vm_readv at the first chunk and only keeps
 * step at the later ones, and the root returns only once every rank has
 * posted the last chunk (its buffer must outlive the reads). The chunk
 * sequence is the same either way; the others follow what the root
 * published.
 *
 * Split (2 ranks, calls above CMA_BROADCAST_MAX_BYTES, a plain sendbuff,
 * out of place; cma_broadcast_split_use): staged, the root's core does two
 * copies of every byte (the slot and its own recvbuff) where the reader's
 * does one, and the root sets the pace. So the root stages only the first
 * half of the chunks and publishes its address with the staged chunk count
 * (the reg's fd, unused by a single-copy reg otherwise); at each staged
 * chunk the reader also reads one piece of the rest with process_vm_readv
 * and the root makes its own copy of the same piece. Per chunk the root
 * copies three chunk lengths and the reader copies one and reads one in
 * the kernel, which runs at about half of memcpy's speed (0.47-0.69 on the
 * Intel guests, docs/PERF.md, "What a plain buffer's bytes cost"), so the
 * two cores even out. Half and half whatever the probe read: at a kernel
 * copy of 0.4-1.0 of memcpy's speed the slower core then copies 1.5-1.75
 * chunk lengths per staged chunk against the root's 2 of the staged
 * path. On the Intel guest of 2026-12-05 (model 207) 4 / 16 / 64 / 256
 * MiB took 0.86 / 0.67 / 0.63 / 0.70x the staged time (docs/PERF.md,
 * "Broadcast: half staged, half read in the kernel"). A reader reads its
 * last piece before it posts the last chunk, since the root returns then.
 *
 * Plan: per chunk, the root waits for its slot to be free, a reader for
 * the root's chunk to be staged; then the single-copy root waits for all.
 */
#include "collectives/node.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "transport/cma.h"

/* The root's staging copies of calls of this many bytes stream in either
 * mode (shm_handoff.c): a one-way handoff, whose lines sit in the reader's
 * cache from the chunk before and whose writer reads nothing back; on the
 * AMD guest with a shared cache 16-256 KiB ran 8.3-14.2 GB/s so against
 * 6.4-12.7 with ordinary stores, 4 KiB and 1 MiB slower (docs/PERF.md,
 * "Every handoff follows the mode") */
#define BCAST_NT_MIN_BYTES ((size_t)16 << 10)
#define BCAST_NT_MAX_BYTES ((size_t)256 << 10)

/* Calls of this many slots and more go in half-slot chunks (shm_half_span).
 * On the AMD guest, 2 ranks, shared cache: 8-32 MiB 0.72-0.76 of the time
 * in place, 0.90-0.95 out of place; 4 MiB 2.2x (docs/PERF.md, "Broadcast
 * in half-slot chunks") */
#define BCAST_HALF_MIN_SLOTS 8

typedef struct {
  plan_t p;
  size_t bytes;
  /* the call's */
  shm_reg_t reg;
  int cma, have_all;
  size_t off, chunks;
  size_t piece;   /* bytes a chunk moves: the slot, or half of it (shm_half_span) */
  size_t end;     /* the staged bytes: t->bytes, or the split's first part */
  size_t nstaged; /* split: the staged chunks (0: no split) */
  size_t rot;     /* where the chunk goes in the root's slot (shm_rot, shm_half_rot) */
  uint64_t g;
} bcast_plan_t;

enum { BCAST_START, BCAST_CHUNK, BCAST_ROOT_FREE, BCAST_STAGED, BCAST_END };

/* Bytes of the chunk at t->off. */
static size_t bcast_len(const bcast_plan_t* t) {
  return t->end - t->off < t->piece ? t->end - t->off : t->piece;
}

static qcclResult_t bcast_progress(plan_t* p) {
  bcast_plan_t* t = (bcast_plan_t*)p;
  qcclComm_t comm = p->comm;
  shm_t* s = comm->shm;
  const coll_args_t* a = &p->a;
  int r = comm->rank, root = a->root;
  for (;;) {
    switch (p->phase) {
      case BCAST_START: {
        if (comm->nranks == 1) {
          coll_copy(a->recvbuff, a->sendbuff, t->bytes);
          return qcclSuccess;
        }
        /* always published (id 0: staged), so that no reader follows an
         * older call's address */
        shm_reg_t mapped;
        t->reg = (shm_reg_t){0, 0, -1, 0};
        t->end = t->bytes;
        t->nstaged = 0;
        /* calls of BCAST_HALF_MIN_SLOTS slots and more go in half-slot
         * chunks at the slot's two halves in turn, so the root stages up
         * to g + 3 while a reader copies g, but for sizes that may split
         * (whether this one does is the root's); every rank decides alike
         * from the size and the agreed threshold */
        t->piece = s->chunk_bytes;
        if (!cma_broadcast_split_use(s, comm->nranks, t->bytes) &&
            t->bytes >= BCAST_HALF_MIN_SLOTS * s->chunk_bytes && shm_half_span(s, t->bytes) > 0)
          t->piece = shm_half_span(s, t->bytes);
        int plain = r == root && !shm_reg_find(s, a->sendbuff, t->bytes, &mapped);
        t->cma = plain && comm->nranks <= CMA_BROADCAST_MAX_RANKS &&
                 t->bytes >= CMA_BROADCAST_MIN_BYTES &&
                 cma_offer(s, a->sendbuff, t->bytes, CMA_BROADCAST_MAX_BYTES, &t->reg);
        if (plain && !t->cma && a->sendbuff != a->recvbuff &&
            cma_broadcast_split_use(s, comm->nranks, t->bytes) &&
            cma_offer(s, a->sendbuff, t->bytes, 0, &t->reg)) {
          t->cma = 1;
          node_split_plan(t->bytes, s->chunk_bytes, 0, &t->reg, &t->nstaged, &t->end);
        }
        t->have_all = 0; /* a reader that read everything single copy */
        t->off = t->chunks = 0;
        p->phase = BCAST_CHUNK;
        break;
      }
      case BCAST_CHUNK:
        if (t->off >= t->end) {
          p->phase = BCAST_END;
          break;
        }
        if (r == root) {
          t->g = shm_chunk_next(s);
          p->phase = BCAST_ROOT_FREE;
        } else {
          t->g = s->chunk_seq++;
          p->phase = BCAST_STAGED;
        }
        t->rot = t->piece < s->chunk_bytes ? shm_half_rot(t->g, t->piece)
                                           : shm_rot(s, t->g, bcast_len(t));
        break;
      case BCAST_ROOT_FREE: {
        size_t m = bcast_len(t);
        /* staged, the root writes only its part of the slot and may run
         * ahead of the readers by many small chunks */
        PLAN_TEST(p, t->cma ? shm_test_chunk(s, t->g) : shm_test_chunk_part(s, t->g, t->rot, m));
        shm_reg_publish(s, t->g, SHM_REG_IN, &t->reg);
        int staged = !t->cma || t->nstaged > 0;
        if (staged && t->bytes >= BCAST_NT_MIN_BYTES && t->bytes <= BCAST_NT_MAX_BYTES)
          copy_stream(shm_slot(s, root, t->g) + t->rot, (const char*)a->sendbuff + t->off, m);
        else if (staged)
          shm_handoff_copy(s, shm_slot(s, root, t->g) + t->rot, (const char*)a->sendbuff + t->off,
                           m, t->bytes);
        coll_stats_shm(comm, m);
        shm_post(s, 3 * t->g + 3);
        /* the root's own copy once the readers may start: the whole
         * buffer after the first single-copy publication, else each chunk
         * after it was staged (split: and the piece read with it) */
        if (staged && a->recvbuff != a->sendbuff)
          copy_out((char*)a->recvbuff + t->off, (const char*)a->sendbuff + t->off, m,
                   t->bytes >= COPY_STREAM_MIN_TOTAL);
        else if (t->chunks == 0)
          coll_copy(a->recvbuff, a->sendbuff, t->bytes);
        if (t->nstaged > 0) {
          size_t lo, len;
          node_split_piece(t->bytes, t->end, t->nstaged, t->chunks, &lo, &len);
          copy_out((char*)a->recvbuff + lo, (const char*)a->sendbuff + lo, len,
                   t->bytes >= COPY_STREAM_MIN_TOTAL);
        }
        t->off += t->piece;
        t->chunks++;
        p->phase = BCAST_CHUNK;
        if (p->yield) return qcclInProgress;
        break;
      }
      case BCAST_STAGED: {
        PLAN_TEST(p, shm_test_rank(s, root, 3 * t->g + 1));
        uintptr_t at = 0;
        int cma = shm_reg_peer_cma(s, root, t->g, SHM_REG_IN, &at);
        if (cma && t->chunks == 0) /* split: the root stages this many chunks */
          QCCL_CHECK(node_split_staged(s, "broadcast", root, t->g, SHM_REG_IN, s->chunk_bytes,
                                       t->bytes, &t->nstaged, &t->end));
        size_t m = bcast_len(t);
        if (!t->have_all && cma && t->nstaged == 0) {
          QCCL_CHECK(cma_read_from(s, root, at, a->recvbuff, t->bytes));
          t->have_all = 1;
        }
        if (!t->have_all)
          copy_out((char*)a->recvbuff + t->off, shm_slot(s, root, t->g) + t->rot, m,
                   t->bytes >= COPY_STREAM_MIN_TOTAL);
        size_t lo = 0, len = 0;
        if (t->nstaged > 0) node_split_piece(t->bytes, t->end, t->nstaged, t->chunks, &lo, &len);
        int last = t->off + t->piece >= t->end;
        /* the root returns once the last chunk is posted: read before */
        if (len > 0 && last)
          QCCL_CHECK(cma_read_from(s, root, at + lo, (char*)a->recvbuff + lo, len));
        shm_post(s, 3 * t->g + 3);
        if (len > 0 && !last)
          QCCL_CHECK(cma_read_from(s, root, at + lo, (char*)a->recvbuff + lo, len));
        t->off += t->piece;
        t->chunks++;
        p->phase = BCAST_CHUNK;
        if (p->yield) return qcclInProgress;
        break;
      }
      case BCAST_END:
        /* only a buffer read in place must outlive its readers; a staged
         * slot is guarded by the next call's chunk test, so no rank waits
         * for the others at the end (MPI's eager broadcast) */
        if (r == root && t->cma) PLAN_TEST(p, node_test_rooted_end(s, t->chunks));
        return qcclSuccess;
      default:
        return QCCL_ERR(qcclInternalError, "broadcast: phase %d", p->phase);
    }
  }
}

static const plan_ops_t bcast_ops = {.name = "broadcast",
                                     .progress = bcast_progress,
                                     .spin = plan_shm_spin,
                                     .check = plan_shm_check};

qcclResult_t node_broadcast_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  QCCL_CHECK(plan_alloc(sizeof(bcast_plan_t), &bcast_ops, comm, a, out));
  ((bcast_plan_t*)*out)->bytes = a->count * dtype_size(a->datatype);
  return qcclSuccess;
}
