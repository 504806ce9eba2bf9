/*
 * allgather.c - AllGather inside one node.
 *
 * Staged (two copies): each rank's contribution is cut into chunks of
 * chunk_bytes. For chunk g every rank copies its piece into its slot, then
 * copies the W-1 other pieces out of the peers' slots into its output (its
 * own piece goes straight from sendbuff, or stays put in place). The slots
 * stay in cache, so memory sees each byte about once, but every byte is
 * copied twice.
 *
 * Shared (shared_copy.c; every buffer of every rank in qcclMemAlloc memory
 * and the output at least QCCL_SHM_SHARE_BYTES): the ranks copy the blocks
 * straight between the buffers, each claiming tasks from any rank's
 * output until all are done. Otherwise, with sendbuffs in qcclMemAlloc
 * memory, the two-copy schedule below reads each peer's block in place
 * instead of from its slot.
 *
 * Single copy (cma.h): a rank whose sendbuff is not qcclMemAlloc memory,
 * on 2 ranks, with a block from the single-copy threshold up
 * (cma_allgather_use), publishes its sendbuff's address instead of staging
 * it; each peer reads that whole block with process_vm_readv, and the
 * owner returns only once every rank is done. Where that rule holds (the
 * same on every rank) every block is read whole, single copy or mapped,
 * so the call is one chunk, and the own block is copied last, while the
 * peer may still be reading this rank's sendbuff. Where single copy is off
 * for the init probe's speed alone, a rank whose handoffs stream (no
 * shared cache) offers its block so, above the exchange cells' blocks to
 * 2 MiB (cma_mode_offer, 2 ranks), in the staged chunks, which the peer
 * keeps, reading it whole at the first; where both offered, each ends the
 * call after that chunk, as AlltoAll.
 *
 * Exchange cells (shm_xch.c): on 2 ranks where single copy does not apply
 * (the same on both ranks), a block up to QCCL_SHM_XCH_BYTES goes through
 * a cell of the segment's two it holds, the one it read in the last
 * exchange (ordinary stores in either mode), or its slot where it holds
 * none (with a shared cache 0.70-0.91 of the chunked path's time at 4-256
 * KiB, without 0.81-0.99; docs/PERF.md, "Cells that change hands"); the
 * own block is copied once its block is out.
 *
 * Blocks of four slots and more that are not read whole go in half-slot
 * chunks, at the slot's two halves in turn, on every rank alike
 * (shm_half_span; on the AMD guest, 2 ranks, 4-64 MiB: 0.95-0.99 of the
 * time, docs/PERF.md, "Gather: the root's own block while it waits").
 *
 * Plan: per chunk, wait for the slot to be free, then for each peer's
 * piece in turn (k: the next peer to read); in the first chunk of a shared
 * call, for every rank's offer and then for every rank's end.
 */
#include "collectives/node.h"
#include "collectives/shared_copy.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "transport/cma.h"

typedef struct {
  plan_t p;
  /* the call's (the count may change from start to start: plan_restart) */
  shm_reg_t reg;
  int mapped, direct, offered, k, own_done;
  int whole;   /* peers whose blocks were read whole at the first chunk */
  int half;    /* in half-slot chunks (shm_half_span) */
  int xch;     /* the exchange's stage (node_xch) */
  size_t span; /* bytes per chunk: chunk_bytes, or the whole block */
  share_job_t job;
  size_t off;
  size_t rot; /* where the chunk goes in the slots (shm_rot) */
  uint64_t g;
} ag_plan_t;

enum { AG_START, AG_CHUNK, AG_FREE, AG_SHARE, AG_SHARED, AG_READ, AG_END, AG_XCH };

static qcclResult_t ag_progress(plan_t* p) {
  ag_plan_t* t = (ag_plan_t*)p;
  qcclComm_t comm = p->comm;
  shm_t* s = comm->shm;
  const coll_args_t* a = &p->a;
  int w = comm->nranks, r = comm->rank;
  size_t bytes = a->count * dtype_size(a->datatype);
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  int stream = bytes * (size_t)w >= COPY_STREAM_MIN_TOTAL;
  size_t m = bytes - t->off < t->span ? bytes - t->off : t->span;
  int whole;
  for (;;) {
    switch (p->phase) {
      case AG_START:
        if (w == 1) {
          if (out != in) copy_out(out, in, bytes, stream);
          return qcclSuccess;
        }
        /* from CMA's threshold the peers read a plain sendbuff single copy */
        whole = cma_allgather_use(s, w, bytes);
        if (!whole && shm_xch_use(s, bytes)) {
          /* else on 2 ranks a small block is one exchange (shm_xch.c) */
          t->g = shm_chunk_next(s);
          t->rot = shm_rot(s, t->g, bytes);
          t->xch = 0;
          p->phase = AG_XCH;
          break;
        }
        /* qcclMemAlloc memory: the peers read it where it is (shm_map.c) */
        t->mapped = shm_reg_find(s, in, bytes, &t->reg);
        /* or, in the staged chunks, single copy while this rank's handoffs
         * stream (cma_mode_offer: 2 ranks) */
        t->direct = t->mapped || (whole && cma_offer(s, in, bytes, 0, &t->reg)) ||
                    (!whole && cma_mode_offer(s, in, w, CMA_MODE_AG_MAX_RANKS, bytes, &t->reg));
        /* every rank reads every block whole in the first chunk (each
         * rank's buffer single copy or mapped): one chunk */
        t->span = whole ? bytes : s->chunk_bytes;
        /* not whole, blocks of four slots and more: half-slot chunks, on
         * every rank alike (a rank's sendbuff may be mapped, its peer's
         * not: the chunks must be the same) */
        t->half = !whole && shm_half_span(s, bytes) > 0;
        if (t->half) t->span = shm_half_span(s, bytes);
        t->job = (share_job_t){in, out, bytes, 0, 0};
        t->off = 0;
        t->own_done = 0;
        p->phase = AG_CHUNK;
        PLAN_FALLTHROUGH;
      case AG_CHUNK:
        if (t->off >= bytes) {
          p->phase = AG_END;
          break;
        }
        m = bytes - t->off < t->span ? bytes - t->off : t->span;
        t->g = shm_chunk_next(s);
        t->rot = t->half ? shm_half_rot(t->g, t->span) : shm_rot(s, t->g, m);
        p->phase = AG_FREE;
        PLAN_FALLTHROUGH;
      case AG_FREE:
        /* a staged half-slot chunk waits only for the last one at its
         * place (the regs it publishes are the staged ones, the same at
         * every chunk); a mapped rank's regs name its buffer: the slot */
        PLAN_TEST(p, t->half && !t->direct ? shm_test_chunk_part(s, t->g, t->rot, m)
                                           : shm_test_chunk(s, t->g));
        shm_reg_publish(s, t->g, SHM_REG_IN, &t->reg);
        t->offered = t->off == 0 && share_offer(comm, t->g, &t->job, t->mapped);
        if (!t->direct) /* shm.h */
          shm_handoff_copy(s, shm_slot(s, r, t->g) + t->rot, in + t->off, m, bytes * (size_t)w);
        coll_stats_shm(comm, m);
        shm_post(s, 3 * t->g + 1);
        t->k = 1;
        t->whole = 0;
        p->phase = AG_READ;
        if (t->off != 0) break;
        /* the own block; all of it when every rank offered */
        if (t->direct && !t->offered) break; /* at the end */
        share_own(comm, &t->job, t->offered);
        t->own_done = 1;
        if (!t->offered) break;
        p->phase = AG_SHARE;
        PLAN_FALLTHROUGH;
      case AG_SHARE: {
        PLAN_TEST(p, shm_test_all(s, 3 * t->g + 1));
        int shared;
        QCCL_CHECK(share_rest(comm, t->g, &t->job, &shared));
        p->phase = AG_READ;
        if (!shared) break;
        coll_stats_shm(comm, bytes - m);
        p->phase = AG_SHARED;
        PLAN_FALLTHROUGH;
      }
      case AG_SHARED:
        PLAN_TEST(p, shm_test_all(s, 3 * t->g + 3));
        return qcclSuccess;
      case AG_READ:
        /* read each peer's piece as soon as that peer has staged it */
        for (; t->k < w; t->k++) {
          int j = (r + t->k) % w;
          const char* src;
          uintptr_t at;
          PLAN_TEST(p, shm_test_rank(s, j, 3 * t->g + 1));
          if (shm_reg_peer_cma(s, j, t->g, SHM_REG_IN, &at)) {
            /* single copy: the whole block at once */
            if (t->off == 0) QCCL_CHECK(cma_read_from(s, j, at, out + (size_t)j * bytes, bytes));
            t->whole++;
            continue;
          }
          QCCL_CHECK(shm_reg_peer(s, j, t->g, SHM_REG_IN, bytes, &src));
          if (src == NULL)
            copy_out(out + (size_t)j * bytes + t->off, shm_slot(s, j, t->g) + t->rot, m, stream);
          else if (t->off == 0) /* read in place: the whole block at once */
            copy_out(out + (size_t)j * bytes, src, bytes, stream);
          t->whole += src != NULL;
        }
        shm_post(s, 3 * t->g + 3);
        /* every rank offered its block at the first chunk (each for itself:
         * cma_mode_offer): all is read, and each rank saw every offer, so
         * each ends here alike */
        t->off = t->off == 0 && t->direct && t->whole == w - 1 ? bytes : t->off + t->span;
        p->phase = AG_CHUNK;
        if (p->yield) return qcclInProgress;
        break;
      case AG_END:
        if (t->direct && !t->own_done) { /* deferred at the first chunk */
          share_own(comm, &t->job, 0);
          t->own_done = 1;
        }
        /* sendbuff is read in place: it must outlive every reader */
        if (t->direct) PLAN_TEST(p, shm_test_all(s, 3 * t->g + 3));
        return qcclSuccess;
      case AG_XCH:
        return node_xch(p, &t->xch, t->g, t->rot, in, bytes, out + (size_t)r * bytes, in,
                        out + (size_t)(1 - r) * bytes, stream);
      default:
        return QCCL_ERR(qcclInternalError, "allgather: phase %d", p->phase);
    }
  }
}

static const plan_ops_t ag_ops = {
    .name = "allgather", .progress = ag_progress, .spin = plan_shm_spin, .check = plan_shm_check};

qcclResult_t node_allgather_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  return plan_alloc(sizeof(ag_plan_t), &ag_ops, comm, a, out);
}
