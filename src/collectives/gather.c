/*
 * gather.c - Gather to a root inside one node.
 *
 * Staged: as AllGather, but only the root reads: every rank stages its
 * chunk, the root copies each peer's piece out as soon as it is staged.
 * Non-root ranks run up to two chunks ahead and return once they have
 * posted their last chunk (the next call's chunk test guards their
 * slots); the root returns once it has read every chunk.
 *
 * Single copy, written by the others (cma.h, cma_gather_push_use: from
 * CMA's threshold, on 2 ranks at any size, on more in larger calls;
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
 * outlives the writes; a writer is done once it has written.
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
  size_t off, chunks;
  size_t rot; /* where the chunk goes in the slots (shm_rot) */
  uint64_t g;
} gather_plan_t;

enum { GATHER_START, GATHER_CHUNK, GATHER_FREE, GATHER_PUSH, GATHER_READ, GATHER_END };

/* Ends chunk t->g (posts its last step) and moves to the next; 1 when the
 * plan should yield here. */
static int gather_chunk_done(plan_t* p, gather_plan_t* t, shm_t* s) {
  shm_post(s, 3 * t->g + 3);
  t->off += s->chunk_bytes;
  t->chunks++;
  p->phase = GATHER_CHUNK;
  return p->yield;
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
        t->out_reg = (shm_reg_t){0, 0, -1};
        t->push = cma_gather_push_use(s, w, bytes);
        if (t->push && r == root) cma_offer(s, out, bytes, 0, &t->out_reg);
        /* the root's own block: first, while the others stage or publish;
         * when they write, once they may start (GATHER_FREE) */
        if (r == root && !t->push) coll_copy(out + (size_t)root * bytes, in, bytes);
        t->off = t->chunks = 0;
        p->phase = GATHER_CHUNK;
        break;
      }
      case GATHER_CHUNK:
        if (t->off >= bytes) {
          p->phase = GATHER_END;
          break;
        }
        t->g = shm_chunk_next(s);
        t->rot =
            shm_rot(s, t->g, bytes - t->off < s->chunk_bytes ? bytes - t->off : s->chunk_bytes);
        p->phase = GATHER_FREE;
        PLAN_FALLTHROUGH;
      case GATHER_FREE: {
        PLAN_TEST(p, shm_test_chunk(s, t->g));
        size_t m = bytes - t->off < s->chunk_bytes ? bytes - t->off : s->chunk_bytes;
        if (r != root && t->push) {
          p->phase = GATHER_PUSH;
          break;
        }
        if (r != root) {
          memcpy(shm_slot(s, r, t->g) + t->rot, in + t->off, m);
          coll_stats_shm(comm, m);
          if (gather_chunk_done(p, t, s)) return qcclInProgress;
          break;
        }
        shm_reg_publish(s, t->g, SHM_REG_OUT, &t->out_reg);
        shm_post(s, 3 * t->g + 1);
        if (t->push && t->off == 0) coll_copy(out + (size_t)root * bytes, in, bytes);
        t->k = 1;
        p->phase = GATHER_READ;
        break;
      }
      case GATHER_PUSH: {
        /* the whole block into the root's recvbuff at the first chunk,
         * once the root has published it; later chunks only keep step */
        if (t->off == 0) {
          PLAN_TEST(p, shm_test_rank(s, root, 3 * t->g + 1));
          uintptr_t at;
          if (!shm_reg_peer_cma(s, root, t->g, SHM_REG_OUT, &at))
            return QCCL_ERR(qcclInternalError, "gather: root %d published no buffer to write",
                            root);
          QCCL_CHECK(cma_write_to(s, root, at + (uintptr_t)r * bytes, in, bytes));
          coll_stats_shm(comm, bytes);
        }
        if (gather_chunk_done(p, t, s)) return qcclInProgress;
        break;
      }
      case GATHER_READ: {
        size_t m = bytes - t->off < s->chunk_bytes ? bytes - t->off : s->chunk_bytes;
        for (; t->k < w; t->k++) {
          int j = (r + t->k) % w;
          PLAN_TEST(p, shm_test_rank(s, j, 3 * t->g + 1));
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
