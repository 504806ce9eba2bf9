/*
 * alltoall.c - AlltoAll inside one node.
 *
 * Staged (two copies): chunks hold W pieces of m bytes: every rank stages piece j of its block
 * for rank j in its slot, then reads, from each peer's slot, the piece
 * meant for it. Per rank and per byte: one write into the segment, one
 * read out.
 *
 * Shared (shared_copy.c; every buffer of every rank in qcclMemAlloc memory
 * and the output at least QCCL_SHM_SHARE_BYTES): the ranks copy the parts
 * straight between the buffers, each claiming tasks from any rank's
 * output until all are done. Otherwise, with sendbuffs in qcclMemAlloc
 * memory, the two-copy schedule below reads the pieces in place.
 *
 * Single copy (cma.h), inside the same chunks: a rank whose sendbuff is not
 * qcclMemAlloc memory, with pieces from AlltoAll's single-copy threshold
 * up (cma_a2a_use: 16 KiB, also where the ranks outnumber the cores),
 * publishes its sendbuff's address instead of staging; rank r reads piece
 * r of that peer's sendbuff straight into block j of its recvbuff with
 * process_vm_readv at the first chunk, and the owner returns only once
 * every rank is done. Each rank decides for its own buffer. Where single
 * copy is off for the init probe's speed alone, a rank whose handoffs
 * stream (no shared cache) offers its sendbuff so for pieces of 64 KiB-2
 * MiB on 2 ranks (the exchange cells' blocks, to 128 KiB, go through them
 * first), to 512 KiB on up to 8 (cma_mode_offer): in the staged chunks,
 * which its peers keep, reading its piece whole at the first. Where every
 * rank offered so, every piece is read at the first chunk, and each rank,
 * having seen every rank's offer there, ends the call after it (4 ranks
 * without a shared cache, 1-2 MiB calls: two chunks before).
 *
 * In both, the own block goes straight from sendbuff to recvbuff.
 *
 * Exchange cells (shm_xch.c): on 2 ranks where single copy does not apply,
 * a piece up to QCCL_SHM_XCH_BYTES goes through the segment's two exchange
 * cells, as AllGather's blocks (allgather.c).
 *
 * Where single copy applies (cma_a2a_use of the piece per peer: the segment's
 * and the count's, so every rank decides alike) every rank reads every
 * piece whole in the first chunk, its own buffer's or a mapped one's, and
 * the chunks after it would only keep step: the call is then one chunk,
 * one publication, one read of each peer and one wait at the end (16 MiB on
 * 4 ranks: 16 chunks of 256 KiB per peer before, each a round of waits on
 * every peer of an oversubscribed host).
 *
 * Plan: as AllGather's (allgather.c), piece by piece.
 */
#include "collectives/node.h"
#include "collectives/shared_copy.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "transport/cma.h"

typedef struct {
  plan_t p;
  size_t piece; /* bytes of a chunk per peer */
  /* the call's (the count may change from start to start: plan_restart) */
  size_t span; /* bytes per peer of each chunk: piece, or the whole block */
  shm_reg_t reg;
  int mapped, direct, offered, own_done;
  int left;  /* peers whose pieces of this chunk are still to read */
  int whole; /* of them at the first chunk, those read whole there */
  int xch;   /* the exchange's stage (node_xch) */
  share_job_t job;
  size_t off;
  size_t rot; /* where the chunk goes in the slots (shm_rot) */
  uint64_t g;
  unsigned char got[]; /* [W]: this chunk's piece of peer j read */
} a2a_plan_t;

enum { A2A_START, A2A_CHUNK, A2A_FREE, A2A_SHARE, A2A_SHARED, A2A_READ, A2A_END, A2A_XCH };

/* The next of the w ranks after r in turn that posted step and whose
 * piece of the chunk this rank has not read (got[j] 0): qcclSuccess with
 * *j set; qcclInProgress while none of the unread ones has (the wait's
 * record names the last one tested); an abort's error. The pieces are
 * read in the order the peers post them, not in turn: of an
 * oversubscribed host's ranks some run late, and a rank that waited for
 * the next in turn sat idle with others' pieces ready (8 ranks on 2
 * cores, three series: 256 KiB-4 MiB 0.87-0.96x the time, smaller and
 * larger calls 0.82-1.10x, within their noise; 4 ranks 0.98-0.99x). The
 * same in AllGather lost 1.1-1.2x at 4-64 KiB on 4 and 8 ranks, where
 * each pass then tests the line of every peer not posted yet (docs/
 * PERF.md, "Reads in the order the peers post"). */
static qcclResult_t a2a_next_posted(shm_t* s, int w, int r, uint64_t step, const unsigned char* got,
                                    int* j) {
  qcclResult_t res = qcclInProgress;
  for (int k = 1; k < w; k++) {
    int q = (r + k) % w;
    if (got[q]) continue;
    res = shm_test_rank(s, q, step);
    if (res == qcclInProgress) continue;
    if (res == qcclSuccess) *j = q;
    return res;
  }
  return res;
}

/* Streaming stores for the pieces read out of the slots: from
 * COPY_STREAM_MIN_TOTAL bytes of output per rank (memcopy.h), and on a
 * crowded host (more ranks than cores) also from A2A_STREAM_NODE_MIN
 * bytes of output on the node (bytes per peer x w^2), where the ranks'
 * receive buffers together outgrow the cache they share while the slots
 * are read again at once: on the AMD guest (2 vCPUs, 32 MiB L3, shared
 * cache) 4 ranks' calls of 4 MiB and 8 ranks' of 4 MiB took 0.78-0.80x
 * the time with them, 8 ranks' of 2 MiB 0.97x; from 8 MiB on the node
 * (4 ranks 2 MiB, 8 ranks 1 MiB) 0.94-1.02x (docs/PERF.md, "A crowded
 * host's AlltoAll by its bytes on the node"). Where the ranks fit the
 * cores each has a cache of its own besides; not measured there, so the
 * per-rank rule alone. */
#define A2A_STREAM_NODE_MIN ((size_t)16 << 20)
static int a2a_stream(const shm_t* s, int w, size_t bytes) {
  size_t out = bytes * (size_t)w;
  return out >= COPY_STREAM_MIN_TOTAL || (!shm_roomy(s) && out * (size_t)w >= A2A_STREAM_NODE_MIN);
}

static qcclResult_t a2a_progress(plan_t* p) {
  a2a_plan_t* t = (a2a_plan_t*)p;
  qcclComm_t comm = p->comm;
  shm_t* s = comm->shm;
  const coll_args_t* a = &p->a;
  int w = comm->nranks, r = comm->rank;
  size_t bytes = a->count * dtype_size(a->datatype), piece = t->span;
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  int stream = a2a_stream(s, w, bytes);
  size_t m = bytes - t->off < piece ? bytes - t->off : piece;
  for (;;) {
    switch (p->phase) {
      case A2A_START:
        if (w == 1) {
          copy_out(out, in, bytes, stream);
          return qcclSuccess;
        }
        if (!cma_a2a_use(s, w, bytes) && shm_xch_use(s, bytes)) {
          /* 2 ranks, a small piece: through the exchange cells */
          t->g = shm_chunk_next(s);
          t->rot = shm_rot(s, t->g, bytes);
          t->xch = 0;
          p->phase = A2A_XCH;
          break;
        }
        /* qcclMemAlloc memory: the peers read their pieces where they are */
        t->mapped = shm_reg_find(s, in, bytes * (size_t)w, &t->reg);
        /* else, from CMA's threshold: the peers read their pieces single
         * copy; or this rank's alone, in the staged chunks, while its
         * handoffs stream (cma_mode_offer) */
        t->direct = t->mapped || cma_a2a_offer(s, in, w, bytes, &t->reg) ||
                    cma_mode_offer(s, in, w, CMA_MODE_A2A_MAX_RANKS, bytes, &t->reg);
        /* every rank reads whole pieces in the first chunk: one chunk */
        t->span = cma_a2a_use(s, w, bytes) ? bytes : t->piece;
        piece = t->span;
        t->job = (share_job_t){in, out, bytes, 1, 0};
        t->off = 0;
        t->own_done = 0;
        p->phase = A2A_CHUNK;
        PLAN_FALLTHROUGH;
      case A2A_CHUNK:
        if (t->off >= bytes) {
          p->phase = A2A_END;
          break;
        }
        m = bytes - t->off < piece ? bytes - t->off : piece;
        t->g = shm_chunk_next(s);
        t->rot = shm_rot(s, t->g, (size_t)w * m);
        p->phase = A2A_FREE;
        PLAN_FALLTHROUGH;
      case A2A_FREE: {
        PLAN_TEST(p, shm_test_chunk(s, t->g));
        char* slot = shm_slot(s, r, t->g) + t->rot;
        shm_reg_publish(s, t->g, SHM_REG_IN, &t->reg);
        t->offered = t->off == 0 && share_offer(comm, t->g, &t->job, t->mapped);
        if (!t->direct) {
          for (int j = 0; j < w; j++)
            if (j != r)
              shm_handoff_copy(s, slot + (size_t)j * m, in + (size_t)j * bytes + t->off, m,
                               bytes * (size_t)w);
        }
        coll_stats_shm(comm, (size_t)(w - 1) * m);
        shm_post(s, 3 * t->g + 1);
        memset(t->got, 0, (size_t)w);
        t->left = w - 1;
        t->whole = 0;
        p->phase = A2A_READ;
        if (t->off != 0) break;
        /* the own block; all of it when every rank offered */
        if (t->direct && !t->offered) break; /* at the end */
        share_own(comm, &t->job, t->offered);
        t->own_done = 1;
        if (!t->offered) break;
        p->phase = A2A_SHARE;
        PLAN_FALLTHROUGH;
      }
      case A2A_SHARE: {
        PLAN_TEST(p, shm_test_all(s, 3 * t->g + 1));
        int shared;
        QCCL_CHECK(share_rest(comm, t->g, &t->job, &shared));
        p->phase = A2A_READ;
        if (!shared) break;
        coll_stats_shm(comm, (size_t)(w - 1) * (bytes - m));
        p->phase = A2A_SHARED;
        PLAN_FALLTHROUGH;
      }
      case A2A_SHARED:
        PLAN_TEST(p, shm_test_all(s, 3 * t->g + 3));
        return qcclSuccess;
      case A2A_READ:
        /* the peers' pieces in the order they post them */
        while (t->left > 0) {
          int j;
          PLAN_TEST(p, a2a_next_posted(s, w, r, 3 * t->g + 1, t->got, &j));
          t->got[j] = 1;
          t->left--;
          const char* src;
          uintptr_t at;
          if (shm_reg_peer_cma(s, j, t->g, SHM_REG_IN, &at)) {
            /* single copy: the whole piece at once */
            if (t->off == 0)
              QCCL_CHECK(
                  cma_read_from(s, j, at + (uintptr_t)r * bytes, out + (size_t)j * bytes, bytes));
            t->whole++;
          } else {
            QCCL_CHECK(shm_reg_peer(s, j, t->g, SHM_REG_IN, bytes * (size_t)w, &src));
            if (src == NULL)
              copy_out(out + (size_t)j * bytes + t->off,
                       shm_slot(s, j, t->g) + t->rot + (size_t)r * m, m, stream);
            else if (t->off == 0) /* read in place: the whole piece at once */
              copy_out(out + (size_t)j * bytes, src + (size_t)r * bytes, bytes, stream);
            t->whole += src != NULL;
          }
        }
        shm_post(s, 3 * t->g + 3);
        /* every rank offered its sendbuff at the first chunk (each for
         * itself: cma_mode_offer), so every piece is read: the chunks
         * after it would only keep step. Each rank saw every offer, its
         * own and its peers', so each ends here alike */
        t->off = t->off == 0 && t->direct && t->whole == w - 1 ? bytes : t->off + piece;
        p->phase = A2A_CHUNK;
        if (p->yield) return qcclInProgress;
        break;
      case A2A_END:
        if (t->direct && !t->own_done) { /* deferred at the first chunk */
          share_own(comm, &t->job, 0);
          t->own_done = 1;
        }
        /* sendbuff is read in place: it must outlive every reader */
        if (t->direct) PLAN_TEST(p, shm_test_all(s, 3 * t->g + 3));
        return qcclSuccess;
      case A2A_XCH:
        return node_xch(p, &t->xch, t->g, t->rot, in + (size_t)(1 - r) * bytes, bytes,
                        out + (size_t)r * bytes, in + (size_t)r * bytes,
                        out + (size_t)(1 - r) * bytes, stream);
      default:
        return QCCL_ERR(qcclInternalError, "alltoall: phase %d", p->phase);
    }
  }
}

static const plan_ops_t a2a_ops = {
    .name = "alltoall", .progress = a2a_progress, .spin = plan_shm_spin, .check = plan_shm_check};

qcclResult_t node_alltoall_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  QCCL_CHECK(plan_alloc(sizeof(a2a_plan_t) + (size_t)comm->nranks, &a2a_ops, comm, a, out));
  a2a_plan_t* t = (a2a_plan_t*)*out;
  t->piece = comm->nranks > 1 ? comm->shm->chunk_bytes / (size_t)comm->nranks : 1;
  return qcclSuccess;
}
