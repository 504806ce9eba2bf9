/*
 * scatter.c - Scatter from a root inside one node.
 *
 * Staged: chunks hold W pieces: the root stages piece j of block j for
 * every other rank j in its slot, and each rank copies its own piece out.
 * The root's own block goes straight to its recvbuff (or stays put in
 * place), in pieces while the root waits for its slot to be free, the
 * rest at the end: copied whole first, it held the readers off (2 ranks,
 * AMD guest, 16-256 MiB out of place: 0.75-0.86 of the time; docs/
 * PERF.md, "Gather: the root's own block while it waits").
 *
 * Single copy (cma.h): a root whose sendbuff is not qcclMemAlloc memory,
 * with blocks in the range cma_scatter_use names (on a host of four ranks
 * per core or more from 4 MiB in all also where the speed probe turned
 * single copy off: cma_scatter_crowded), publishes its
 * address at every chunk instead of staging; each other rank reads its
 * whole block with process_vm_readv at the first chunk (the readers at
 * once, where staged the root copies every block alone) and only keeps
 * step at the later ones; that root copies its own block only after the
 * first publication, while the readers read (first, it held them off by
 * that copy: 4 ranks 1 MiB 50 -> 34 us, 2 ranks 0.59-0.76x the time from
 * 64 KiB to 4 MiB; docs/PERF.md, "The root's own block last"), and returns
 * only once every rank has posted the last chunk, so its buffer outlives
 * the reads. Otherwise no
 * rank waits for the others at the end (the next call's chunk test
 * guards the slots; a staged root writes only its part of the slot and
 * runs ahead by as many chunks as fit there side by side, up to
 * SHM_PART_HIST: shm_test_chunk_part).
 *
 * Split (2 ranks, blocks above CMA_SCATTER_MAX2_BYTES, a plain sendbuff,
 * the root's own block copied: cma_scatter_split_use): staged, the root's
 * core copies its own block and stages the other's, twice what the
 * reader's copies. As Broadcast's split (broadcast.c): the root stages
 * the first half of the chunks and publishes its address with the staged
 * chunk count (the reg's fd); at each staged chunk the reader also reads
 * a piece of the rest of its block with process_vm_readv (the last
 * before it posts the last chunk) and the root copies a piece of its own
 * block. docs/PERF.md, "Scatter: half staged, half read in the kernel".
 *
 * Plan: per chunk the root waits for its slot to be free, a reader for
 * the root's chunk to be staged; then the single-copy root waits for all.
 */
#include "collectives/node.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "transport/cma.h"

/* The root's staging copies of calls (all blocks) of this many bytes
 * stream in either mode, as Broadcast's (broadcast.c): on the AMD guest
 * with a shared cache, 2 ranks, 64 and 256 KiB ran 10.4-14.5 GB/s so
 * against 4.2-9.3 in 3 of 4 runs (docs/PERF.md, "Every handoff follows
 * the mode"); from COPY_STREAM_MIN_TOTAL they stream too (below) */
#define SCATTER_NT_MIN_BYTES ((size_t)64 << 10)
#define SCATTER_NT_MAX_BYTES ((size_t)256 << 10)

typedef struct {
  plan_t p;
  size_t bytes, piece;
  /* the call's */
  shm_reg_t reg;
  int cma, have_all;
  size_t off, chunks;
  size_t end;     /* the staged bytes of a block: bytes, or the split's first part */
  size_t nstaged; /* split: the staged chunks (0: no split) */
  size_t rot;     /* where the chunk goes in the root's slot (shm_rot) */
  size_t own;     /* staged root: bytes of its own block copied so far */
  uint64_t g;
} scatter_plan_t;

enum { SCATTER_START, SCATTER_CHUNK, SCATTER_ROOT_FREE, SCATTER_STAGED, SCATTER_END };

static qcclResult_t scatter_progress(plan_t* p) {
  scatter_plan_t* t = (scatter_plan_t*)p;
  qcclComm_t comm = p->comm;
  shm_t* s = comm->shm;
  const coll_args_t* a = &p->a;
  int w = comm->nranks, r = comm->rank, root = a->root;
  size_t bytes = t->bytes;
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  for (;;) {
    switch (p->phase) {
      case SCATTER_START: {
        if (w == 1) {
          coll_copy(out, in, bytes);
          return qcclSuccess;
        }
        /* always published (id 0: staged), so that no reader follows an
         * older call's address */
        shm_reg_t mapped;
        t->reg = (shm_reg_t){0, 0, -1, 0};
        int plain = r == root && !shm_reg_find(s, in, bytes * (size_t)w, &mapped);
        t->cma = plain && cma_scatter_offer(s, in, w, bytes, &t->reg);
        t->end = bytes;
        t->nstaged = 0;
        if (plain && !t->cma && out != in + (size_t)root * bytes &&
            cma_scatter_split_use(s, w, bytes) && cma_offer(s, in, bytes, 0, &t->reg)) {
          t->cma = 1;
          node_split_plan(bytes, t->piece, 0, &t->reg, &t->nstaged, &t->end);
        }
        /* staged, the root's own block while its slot is not free yet
         * (SCATTER_ROOT_FREE), the rest at the end; read single copy,
         * once the readers may start */
        t->own = r == root && !t->cma && out != in + (size_t)root * bytes ? 0 : bytes;
        t->have_all = 0; /* a reader that read its block single copy */
        t->off = t->chunks = 0;
        p->phase = SCATTER_CHUNK;
        break;
      }
      case SCATTER_CHUNK:
        if (t->off >= t->end) {
          p->phase = SCATTER_END;
          break;
        }
        if (r == root) {
          t->g = shm_chunk_next(s);
          p->phase = SCATTER_ROOT_FREE;
        } else {
          t->g = s->chunk_seq++;
          p->phase = SCATTER_STAGED;
        }
        t->rot =
            shm_rot(s, t->g, (size_t)w * (t->end - t->off < t->piece ? t->end - t->off : t->piece));
        break;
      case SCATTER_ROOT_FREE: {
        size_t m = t->end - t->off < t->piece ? t->end - t->off : t->piece;
        /* staged, the root writes only its part of the slot and may run
         * ahead of the readers by many small chunks */
        qcclResult_t ready =
            t->cma ? shm_test_chunk(s, t->g) : shm_test_chunk_part(s, t->g, t->rot, (size_t)w * m);
        while (ready == qcclInProgress &&
               node_own_copy(out, in + (size_t)root * bytes, bytes, &t->own, NODE_OWN_PIECE,
                             bytes >= COPY_STREAM_MIN_TOTAL))
          ready = shm_test_chunk_part(s, t->g, t->rot, (size_t)w * m);
        PLAN_TEST(p, ready);
        shm_reg_publish(s, t->g, SHM_REG_IN, &t->reg);
        char* slot = shm_slot(s, root, t->g) + t->rot;
        int staged = !t->cma || t->nstaged > 0;
        /* large calls stream in either mode: on the AMD guest the 2-rank
         * Scatter of 16-256 MiB lost 0.83-0.96x with ordinary stores where
         * the cores share a cache and 0.87-0.99x where they do not, while
         * the other collectives gained (docs/PERF.md, "Every handoff
         * follows the mode") */
        size_t all = bytes * (size_t)w;
        int large = all >= COPY_STREAM_MIN_TOTAL ||
                    (all >= SCATTER_NT_MIN_BYTES && all <= SCATTER_NT_MAX_BYTES);
        for (int j = 0; j < w && staged; j++) {
          if (j == root) continue;
          char* dst = slot + (size_t)j * m;
          const char* src = in + (size_t)j * bytes + t->off;
          if (large)
            copy_stream(dst, src, m);
          else
            shm_handoff_copy(s, dst, src, m, bytes * (size_t)w);
        }
        coll_stats_shm(comm, (size_t)(w - 1) * m);
        shm_post(s, 3 * t->g + 3);
        if (t->nstaged > 0) { /* split: a piece of the own block per chunk */
          size_t lo, len;
          coll_page_piece(bytes, t->nstaged, t->chunks, &lo, &len);
          copy_out(out + lo, in + (size_t)root * bytes + lo, len, bytes >= COPY_STREAM_MIN_TOTAL);
        } else if (t->cma && t->chunks == 0) {
          coll_copy(out, in + (size_t)root * bytes, bytes);
        }
        t->off += t->piece;
        t->chunks++;
        p->phase = SCATTER_CHUNK;
        if (p->yield) return qcclInProgress;
        break;
      }
      case SCATTER_STAGED: {
        PLAN_TEST(p, shm_test_rank(s, root, 3 * t->g + 1));
        uintptr_t at = 0;
        int cma = shm_reg_peer_cma(s, root, t->g, SHM_REG_IN, &at);
        if (cma && t->chunks == 0) /* split: the root stages this many chunks */
          QCCL_CHECK(node_split_staged(s, "scatter", root, t->g, SHM_REG_IN, t->piece, bytes,
                                       &t->nstaged, &t->end));
        size_t m = t->end - t->off < t->piece ? t->end - t->off : t->piece;
        if (!t->have_all && cma && t->nstaged == 0) {
          QCCL_CHECK(cma_read_from(s, root, at + (uintptr_t)r * bytes, out, bytes));
          t->have_all = 1;
        }
        if (!t->have_all)
          copy_out(out + t->off, shm_slot(s, root, t->g) + t->rot + (size_t)r * m, m,
                   bytes >= COPY_STREAM_MIN_TOTAL);
        size_t lo = 0, len = 0;
        if (t->nstaged > 0) node_split_piece(bytes, t->end, t->nstaged, t->chunks, &lo, &len);
        int last = t->off + t->piece >= t->end;
        uintptr_t from = at + (uintptr_t)r * bytes + lo;
        /* the root returns once the last chunk is posted: read before */
        if (len > 0 && last) QCCL_CHECK(cma_read_from(s, root, from, out + lo, len));
        shm_post(s, 3 * t->g + 3);
        if (len > 0 && !last) QCCL_CHECK(cma_read_from(s, root, from, out + lo, len));
        t->off += t->piece;
        t->chunks++;
        p->phase = SCATTER_CHUNK;
        if (p->yield) return qcclInProgress;
        break;
      }
      case SCATTER_END:
        /* only a root read single copy waits for its readers: a staged
         * slot is guarded by the next call's chunk test, and a reader is
         * done once it has its block */
        if (r == root) /* what the waits left of the own block */
          node_own_copy(out, in + (size_t)root * bytes, bytes, &t->own, bytes,
                        bytes >= COPY_STREAM_MIN_TOTAL);
        if (t->cma) PLAN_TEST(p, node_test_rooted_end(s, t->chunks));
        return qcclSuccess;
      default:
        return QCCL_ERR(qcclInternalError, "scatter: phase %d", p->phase);
    }
  }
}

static const plan_ops_t scatter_ops = {.name = "scatter",
                                       .progress = scatter_progress,
                                       .spin = plan_shm_spin,
                                       .check = plan_shm_check};

qcclResult_t node_scatter_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  QCCL_CHECK(plan_alloc(sizeof(scatter_plan_t), &scatter_ops, comm, a, out));
  scatter_plan_t* t = (scatter_plan_t*)*out;
  t->bytes = a->count * dtype_size(a->datatype);
  t->piece = comm->shm->chunk_bytes / (size_t)comm->nranks;
  return qcclSuccess;
}
