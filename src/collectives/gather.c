/*
 * gather.c - Gather to a root inside one node.
 *
 * Staged: as AllGather, but only the root reads: every rank stages its
 * chunk, the root copies each peer's piece out as soon as it is staged.
 * Non-root ranks run ahead of the root (a chunk's place is free once
 * every rank is done with the last chunk there: with whole-slot chunks
 * a sender stages chunk g + 1 while the root reads g; small chunks sit
 * side by side in the slot, up to SHM_PART_HIST of them:
 * shm_test_chunk_part) and return once they have posted their last
 * chunk (the next call's chunk test guards their slots); the root
 * returns once it has read every chunk. Blocks of four slots and more go
 * in half-slot chunks, at the slot's two halves in turn, so a sender
 * stages up to g + 3 (the root, copying, sets the pace). The root copies
 * its own block while a peer's chunk is not there yet, in pieces, the
 * rest at the end: it once copied it whole first, while the senders
 * waited. On the AMD guest, 2 ranks, shared cache, against the root's
 * copy first and whole slots: 16-256 MiB out of place 0.67-0.82 of the
 * time, in place 0.76-0.80 (docs/PERF.md, "Gather: the root's own block
 * while it waits").
 *
 * Single copy, written by the others (cma.h, cma_gather_push_use: from
 * CMA's threshold, on 2 ranks up to the split's blocks (below), on more
 * in larger calls;
 * every rank decides alike from the size and the agreed threshold): the
 * root publishes its recvbuff at every chunk, and every other rank, once
 * the root has posted the first chunk, writes its whole block into it
 * with process_vm_writev and then only keeps step. The writers copy at
 * once, on every core, where a root reading them single copy (the only
 * single-copy Gather until 2026-12-05) copied every block alone. The root
 * copies its own block only after that first post, while they write
 * (first, it held every writer off by that copy: 4 ranks 1 MiB 54 -> 23
 * us, 4-16 MiB 0.64-0.71x the time, 8 ranks 0.78-0.91x; docs/PERF.md,
 * "The root's own block last"); with that, writing beat the root's reads
 * wherever these had been chosen (2 ranks, 4 ranks at 512 KiB), and they
 * are gone. The root returns once every writer has posted, so its buffer
 * outlives the writes; a writer is done once it has written. The root's
 * recvbuff is published with the call's tag (coll_agree_tag), and a
 * writer writes only if it is its own call's: a rank with a larger count
 * would otherwise write past the root's buffer before the agreement
 * compares the calls (tests/mr/mr_agree_writes.c).
 *
 * Split (2 ranks, blocks above CMA_GATHER_SPLIT_MIN2_BYTES:
 * cma_gather_split_use, the same on both): writing, the other rank's core
 * copies its whole block in the kernel at about half of memcpy's speed
 * while the root's copies its own block once, and the writer sets the
 * pace. The root publishes its recvbuff with a staged chunk count (the
 * reg's fd): half of the chunks when it copies its own block, all of them
 * in place (then the two cores copy the block once each, staged, and
 * nothing is written). The writer waits for that first publication,
 * stages that many chunks and, at each, writes a piece of the rest of its
 * block with process_vm_writev (the last before it posts the last chunk,
 * since the root returns then); the root copies each staged chunk out
 * and a piece of its own block. docs/PERF.md, "Gather: half staged, half
 * written in the kernel".
 *
 * Plan: per chunk every rank waits for its slot to be free; the root then
 * waits for each peer's piece in turn (k: the next peer to read); a writer
 * waits for the root's first chunk.
 */
#include "collectives/node.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "transport/cma.h"

typedef struct {
  plan_t p;
  size_t bytes;
  /* the call's */
  shm_reg_t out_reg;
  int push, k;
  int split;
  uintptr_t at; /* split, a writer: the root's recvbuff */
  size_t off, chunks;
  size_t end;     /* the staged bytes: bytes, or the split's first part */
  size_t nstaged; /* split: the staged chunks (root: from the start; writer: from chunk 0) */
  size_t rot;     /* where the chunk goes in the slots (shm_rot) */
  size_t piece;   /* bytes a chunk stages: the slot, or half of it (shm_half_span) */
  size_t own;     /* staged root: bytes of its own block copied so far */
  uint64_t g;
} gather_plan_t;

enum { GATHER_START, GATHER_CHUNK, GATHER_FREE, GATHER_PUSH, GATHER_READ, GATHER_END };

/* Ends chunk t->g (posts its last step) and moves to the next; 1 when the
 * plan should yield here. */
static int gather_chunk_done(plan_t* p, gather_plan_t* t, shm_t* s) {
  shm_post(s, 3 * t->g + 3);
  t->off += t->piece;
  t->chunks++;
  p->phase = GATHER_CHUNK;
  return p->yield;
}

/* A writer, once the root posted chunk g (the call's first): the address
 * of the root's recvbuff, which the root published for this very call
 * (its tag, coll_agree_tag) to be written single copy. */
static qcclResult_t gather_root_out(qcclComm_t comm, const coll_args_t* a, uint64_t g,
                                    uintptr_t* at) {
  QCCL_CHECK(coll_agree_check_tag(comm, a->root, g, SHM_REG_OUT, coll_agree_tag(a, g), "gather"));
  if (!shm_reg_peer_cma(comm->shm, a->root, g, SHM_REG_OUT, at))
    return QCCL_ERR(qcclInternalError, "gather: root %d published no buffer to write", a->root);
  return qcclSuccess;
}

static qcclResult_t gather_progress(plan_t* p) {
  gather_plan_t* t = (gather_plan_t*)p;
  qcclComm_t comm = p->comm;
  shm_t* s = comm->shm;
  const coll_args_t* a = &p->a;
  int w = comm->nranks, r = comm->rank, root = a->root;
  size_t bytes = t->bytes;
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  for (;;) {
    switch (p->phase) {
      case GATHER_START: {
        if (w == 1) {
          coll_copy(out, in, bytes);
          return qcclSuccess;
        }
        /* always published (id 0: staged), so that the root never follows
         * an older call's address */
        t->out_reg = (shm_reg_t){0, 0, -1, 0};
        t->split = cma_gather_split_use(s, w, bytes);
        t->push = !t->split && cma_gather_push_use(s, w, bytes);
        t->end = bytes;
        t->nstaged = 0;
        t->piece = s->chunk_bytes;
        t->own = bytes; /* nothing of its own block left to copy */
        if ((t->push || t->split) && r == root) cma_offer(s, out, bytes, 0, &t->out_reg);
        if (t->split && r == root) /* in place: all staged */
          node_split_plan(bytes, s->chunk_bytes, out + (size_t)root * bytes == in, &t->out_reg,
                          &t->nstaged, &t->end);
        if (!t->push && !t->split && shm_half_span(s, bytes) > 0)
          t->piece = shm_half_span(s, bytes);
        /* the root's own block: staged, while it waits for the others'
         * chunks (GATHER_READ), the rest at the end; when they write,
         * once they may start (GATHER_FREE) */
        if (r == root && !t->push && !t->split && out + (size_t)root * bytes != in) t->own = 0;
        t->off = t->chunks = 0;
        p->phase = GATHER_CHUNK;
        break;
      }
      case GATHER_CHUNK:
        if (t->off >= t->end) {
          p->phase = GATHER_END;
          break;
        }
        t->g = shm_chunk_next(s);
        /* the first chunk is a full one either way (split: two or more);
         * half-slot pieces take the slot's halves in turn */
        if (t->piece < s->chunk_bytes)
          t->rot = shm_half_rot(t->g, t->piece);
        else
          t->rot = shm_rot(s, t->g, t->end - t->off < t->piece ? t->end - t->off : t->piece);
        p->phase = GATHER_FREE;
        PLAN_FALLTHROUGH;
      case GATHER_FREE: {
        size_t m = t->end - t->off < t->piece ? t->end - t->off : t->piece;
        /* a staged sender writes only its part of the slot and may run
         * ahead of the root by many small chunks */
        PLAN_TEST(p, r == root || t->push || t->split ? shm_test_chunk(s, t->g)
                                                      : shm_test_chunk_part(s, t->g, t->rot, m));
        if (r != root && (t->push || t->split)) {
          p->phase = GATHER_PUSH;
          break;
        }
        if (r != root) {
          shm_handoff_copy(s, shm_slot(s, r, t->g) + t->rot, in + t->off, m, bytes * (size_t)w);
          coll_stats_shm(comm, m);
          if (gather_chunk_done(p, t, s)) return qcclInProgress;
          break;
        }
        /* the writers write only into a buffer of their own call */
        if (t->chunks == 0) t->out_reg.tag = coll_agree_tag(a, t->g);
        shm_reg_publish(s, t->g, SHM_REG_OUT, &t->out_reg);
        shm_post(s, 3 * t->g + 1);
        if (t->push && t->off == 0) coll_copy(out + (size_t)root * bytes, in, bytes);
        if (t->split) { /* a piece of the own block per staged chunk */
          size_t lo, len;
          coll_page_piece(bytes, t->nstaged, t->chunks, &lo, &len);
          if (out + (size_t)root * bytes != in)
            copy_out(out + (size_t)root * bytes + lo, in + lo, len,
                     bytes * (size_t)w >= COPY_STREAM_MIN_TOTAL);
        }
        t->k = 1;
        p->phase = GATHER_READ;
        break;
      }
      case GATHER_PUSH: {
        if (t->split) {
          if (t->chunks == 0) { /* the root's address and staged chunk count */
            PLAN_TEST(p, shm_test_rank(s, root, 3 * t->g + 1));
            QCCL_CHECK(gather_root_out(comm, a, t->g, &t->at));
            QCCL_CHECK(node_split_staged(s, "gather", root, t->g, SHM_REG_OUT, s->chunk_bytes,
                                         bytes, &t->nstaged, &t->end));
            if (t->nstaged == 0)
              return QCCL_ERR(qcclInternalError, "gather: root %d published no staged chunks",
                              root);
          }
          size_t m = t->end - t->off < t->piece ? t->end - t->off : t->piece;
          shm_handoff_copy(s, shm_slot(s, r, t->g) + t->rot, in + t->off, m, bytes * (size_t)w);
          coll_stats_shm(comm, m);
          size_t lo, len;
          node_split_piece(bytes, t->end, t->nstaged, t->chunks, &lo, &len);
          uintptr_t to = t->at + (uintptr_t)r * bytes + lo;
          /* the root returns once the last chunk is posted: write before */
          int last = t->off + t->piece >= t->end;
          if (len > 0 && last) QCCL_CHECK(cma_write_to(s, root, to, in + lo, len));
          int yield = gather_chunk_done(p, t, s);
          if (len > 0 && !last) QCCL_CHECK(cma_write_to(s, root, to, in + lo, len));
          if (yield) return qcclInProgress;
          break;
        }
        /* the whole block into the root's recvbuff at the first chunk,
         * once the root has published it; later chunks only keep step */
        if (t->off == 0) {
          PLAN_TEST(p, shm_test_rank(s, root, 3 * t->g + 1));
          uintptr_t at;
          QCCL_CHECK(gather_root_out(comm, a, t->g, &at));
          QCCL_CHECK(cma_write_to(s, root, at + (uintptr_t)r * bytes, in, bytes));
          coll_stats_shm(comm, bytes);
        }
        if (gather_chunk_done(p, t, s)) return qcclInProgress;
        break;
      }
      case GATHER_READ: {
        size_t m = t->end - t->off < t->piece ? t->end - t->off : t->piece;
        for (; t->k < w; t->k++) {
          int j = (r + t->k) % w;
          qcclResult_t ready = shm_test_rank(s, j, 3 * t->g + 1);
          /* j's chunk not there yet: a piece of the own block meanwhile */
          while (ready == qcclInProgress &&
                 node_own_copy(out + (size_t)root * bytes, in, bytes, &t->own, NODE_OWN_PIECE,
                               bytes * (size_t)w >= COPY_STREAM_MIN_TOTAL))
            ready = shm_test_rank(s, j, 3 * t->g + 1);
          PLAN_TEST(p, ready);
          if (t->push) continue; /* j wrote its block before posting */
          copy_out(out + (size_t)j * bytes + t->off, shm_slot(s, j, t->g) + t->rot, m,
                   bytes * (size_t)w >= COPY_STREAM_MIN_TOTAL);
        }
        if (gather_chunk_done(p, t, s)) return qcclInProgress;
        break;
      }
      case GATHER_END:
        /* a staged rank or a writer is done once it has posted (its slot
         * is guarded by the next call's chunk test); the root once every
         * rank has (its buffer must outlive the writes) */
        if (r == root) /* what the waits left of the own block */
          node_own_copy(out + (size_t)root * bytes, in, bytes, &t->own, bytes,
                        bytes * (size_t)w >= COPY_STREAM_MIN_TOTAL);
        if (r == root) PLAN_TEST(p, node_test_rooted_end(s, t->chunks));
        return qcclSuccess;
      default:
        return QCCL_ERR(qcclInternalError, "gather: phase %d", p->phase);
    }
  }
}

static const plan_ops_t gather_ops = {
    .name = "gather", .progress = gather_progress, .spin = plan_shm_spin, .check = plan_shm_check};

qcclResult_t node_gather_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  QCCL_CHECK(plan_alloc(sizeof(gather_plan_t), &gather_ops, comm, a, out));
  ((gather_plan_t*)*out)->bytes = a->count * dtype_size(a->datatype);
  return qcclSuccess;
}
