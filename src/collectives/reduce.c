/*
 * reduce.c - Reduce to a root inside one node.
 *
 * As AllReduce (allreduce.c) without the final all-gather: every rank
 * stages its chunk but its own part (which only it reads), rank r reduces
 * part r over its sendbuff and the others' slots into its result area,
 * the root straight into recvbuff, and only the root copies the W-1 other
 * reduced parts out. The work of the reduction is spread over all ranks
 * instead of falling on the root, and the result is the same bits
 * AllReduce gives. Only the root waits for every rank at the end; the
 * others return once their parts are posted.
 *
 * How many ranks reduce (reduce_reducers): on a host with more ranks than
 * cores, calls up to REDUCE_ONE_OVER_MAX_BYTES have one reducer, the root,
 * and the others stage their whole chunk and go on: each wait of a rank
 * there is a round of the scheduler, and one rank that waits once for all
 * beat reducers that each wait for every stage (4 ranks on 2 cores 16 KiB-
 * 1 MiB 0.39-0.64x the time of two reducers, 4 MiB 1.03x; 8 ranks 64 KiB-
 * 2 MiB 0.57-0.91x the time of eight, 4-16 MiB 1.05-1.08x; docs/PERF.md,
 * "One reducer where the ranks outnumber the cores"). Above that, on a
 * host with more ranks than cores but at most twice as many, only as many
 * as the cores reduce, the root
 * and the ranks after it, each a part of 1/cores; the others stage their
 * whole chunk and go on, with no wait for the rest. Every rank that
 * reduces waits for every stage, and on 2 cores each such wait of 3 or 4
 * ranks is a round of the scheduler: 2 reducers took 0.63-0.94x the time
 * of 4 on 4 ranks from 64 KiB to 4 MiB (0.91-1.06x at 16 MiB), 0.81-0.89x
 * of 3 on 3; on 5 and 8 ranks fewer reducers gained nothing or lost (2 of
 * 8: 1.1-1.4x: the stagers hold the reducers off the cores) (docs/PERF.md,
 * "How many ranks reduce"). On 2 ranks calls up to 16 MiB have one
 * reducer, the root, which reduces the whole chunk straight into recvbuff
 * while the other stages and goes on: 4-64 KiB took 0.54-0.83x the time of
 * two reducers (AMD guest; from 256 KiB 0.84-1.14x, noise), and on the
 * Xeon guest, against two reducers reading each other's part single copy,
 * 0.85-0.93x at 256 KiB, 0.81-0.99x at 1 MiB, 0.76-0.87x at 4 MiB,
 * 0.71-0.94x at 16 MiB, but 1.06-1.16x at 64 MiB (docs/PERF.md, "Reduce on
 * 2 ranks: one reducer to 16 MiB"). The parts' bits do not depend on who
 * reduces.
 *
 * Halves: where the root is the one reducer and the call is staged, from
 * REDUCE_HALVES_MIN_BYTES, the other rank posts each chunk's first half
 * (3g+1) before it stages the second (3g+2), and the root reduces the
 * first half while the second is on its way (as allreduce_oneshot.c): on
 * the 2-vCPU Xeon guest 0.95-0.98x the time at 8-64 KiB, 0.95-0.99x at 1-16
 * MiB (docs/PERF.md, "Reduce on 2 ranks in halves").
 *
 * Single copy (cma.h, cma_reduce_use): on 2 ranks, for calls of 128-512
 * KiB, the rank that is not the root
 * publishes its sendbuff's address at every chunk instead of staging it,
 * and the root reads the chunk with process_vm_readv straight into
 * recvbuff (into its scratch when recvbuff overlaps its sendbuff) and
 * reduces its own sendbuff into it, in rank order as always. That rank
 * then returns only once the root has read every chunk. Each rank decides
 * for its own buffer (a qcclMemAlloc one is staged); the root follows
 * what was published. Two reducers each reading the other's part single
 * copy (until 2026-12-04) lost to one staged reducer, and on more ranks
 * single copy took 1.03-1.65x the staged time.
 *
 * Plan: per chunk, wait for the slot (free), for every rank's stage
 * (staged), and at the root for every part (reduced).
 */
#include "collectives/node.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/memcopy.h"
#include "transport/cma.h"

/* How many ranks reduce a call of bytes (see the top): one, the root, on 2
 * ranks up to REDUCE_ONE_MAX_BYTES and where there are more ranks than
 * cores up to REDUCE_ONE_OVER_MAX_BYTES; the cores, when there are more
 * ranks than cores but at most twice as many; else every rank. */
#define REDUCE_ONE_MAX_BYTES ((size_t)16 << 20)
#define REDUCE_ONE_OVER_MAX_BYTES ((size_t)2 << 20)
static int reduce_reducers(const shm_t* s, int w, size_t bytes) {
  if (w == 2 && bytes <= REDUCE_ONE_MAX_BYTES) return 1;
  if (w > s->ncores && bytes <= REDUCE_ONE_OVER_MAX_BYTES) return 1;
  return w > s->ncores && w <= 2 * s->ncores ? s->ncores : w;
}

/* The smallest call staged and reduced in two halves where the root is
 * the one reducer (see the top). */
#define REDUCE_HALVES_MIN_BYTES ((size_t)8 << 10)

/* The first half of a chunk of m elements of es bytes: whole lines. */
static size_t reduce_half(size_t m, size_t es) {
  return ((m * es / 2) & ~(size_t)63) / es;
}

/* The part of reducer v (0: the root) of nred; a rank that does not reduce
 * (v >= nred) has none and stages the whole chunk. */
static void reduce_part(size_t m, int nred, int v, size_t* lo, size_t* hi) {
  if (v >= nred) {
    *lo = *hi = m;
    return;
  }
  coll_part(m, nred, v, lo, hi);
}

typedef struct {
  plan_t p;
  size_t es, per_chunk;
  int nred; /* the call's ranks that reduce a part: root, root+1, ... */
  size_t off, chunks;
  size_t rot; /* where the chunk goes in the slots and results (shm_rot) */
  uint64_t g;
  int halves;    /* 2 ranks, one reducer: the chunk staged and reduced in two halves */
  int half;      /* at the root: the first half is reduced */
  int publish;   /* the call may go single copy: the rank not the root publishes */
  int cma;       /* this rank's sendbuff is read single copy, not staged */
  shm_reg_t reg; /* what it publishes (id 0: staged) */
} reduce_plan_t;

enum { REDUCE_START, REDUCE_CHUNK, REDUCE_FREE, REDUCE_STAGED, REDUCE_REDUCED, REDUCE_END };

/* At the root of a call that may go single copy (2 ranks, one reducer, the
 * whole chunk its part): when the other rank published its sendbuff, reads
 * the chunk (m elements) from it into recvbuff, or into the scratch when recvbuff
 * overlaps sendbuff, and points that rank's source there. */
static qcclResult_t reduce_read_single(reduce_plan_t* t, shm_t* s, size_t m, const void** srcs) {
  const coll_args_t* a = &t->p.a;
  int peer = 1 - s->rank;
  uintptr_t at;
  if (!shm_reg_peer_cma(s, peer, t->g, SHM_REG_IN, &at)) return qcclSuccess;
  size_t es = t->es, n = a->count * es, off = t->off * es;
  char* dst = (char*)a->recvbuff + off;
  if (coll_overlap(a->sendbuff, n, a->recvbuff, n)) QCCL_CHECK(shm_scratch(s, &dst));
  QCCL_CHECK(cma_read_from(s, peer, at + off, dst, m * es));
  srcs[peer] = dst;
  return qcclSuccess;
}

static qcclResult_t reduce_progress(plan_t* p) {
  reduce_plan_t* t = (reduce_plan_t*)p;
  qcclComm_t comm = p->comm;
  shm_t* s = comm->shm;
  const coll_args_t* a = &p->a;
  int w = comm->nranks, r = comm->rank, root = a->root;
  size_t es = t->es, per_chunk = t->per_chunk;
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  size_t m = a->count - t->off < per_chunk ? a->count - t->off : per_chunk, lo, hi;
  int nred = t->nred, v = (r - root + w) % w;
  reduce_part(m, nred, v, &lo, &hi);
  for (;;) {
    switch (p->phase) {
      case REDUCE_START: {
        if (w == 1) {
          coll_copy(out, in, a->count * es);
          return qcclSuccess;
        }
        nred = t->nred = reduce_reducers(s, w, a->count * es);
        t->publish = nred == 1 && cma_reduce_use(s, w, a->count * es);
        /* halves: the one reducer of 2 ranks (its peer is 1 - r) */
        t->halves = nred == 1 && w == 2 && !t->publish && a->count * es >= REDUCE_HALVES_MIN_BYTES;
        t->reg = (shm_reg_t){0, 0, -1, 0};
        shm_reg_t mapped;
        t->cma = t->publish && r != root && !shm_reg_find(s, in, a->count * es, &mapped) &&
                 cma_offer(s, in, a->count * es, 0, &t->reg);
        t->off = t->chunks = 0;
        t->half = 0;
        p->phase = REDUCE_CHUNK;
        PLAN_FALLTHROUGH;
      }
      case REDUCE_CHUNK:
        if (t->off >= a->count) {
          p->phase = REDUCE_END;
          break;
        }
        m = a->count - t->off < per_chunk ? a->count - t->off : per_chunk;
        reduce_part(m, nred, v, &lo, &hi);
        t->g = shm_chunk_next(s);
        t->rot = shm_rot(s, t->g, m * es);
        p->phase = REDUCE_FREE;
        PLAN_FALLTHROUGH;
      case REDUCE_FREE:
        PLAN_TEST(p, shm_test_chunk(s, t->g));
        /* always published when the call may go single copy (id 0:
         * staged), so that the root never follows an older call's address */
        if (t->publish && r != root) shm_reg_publish(s, t->g, SHM_REG_IN, &t->reg);
        if (t->halves && v >= nred) {
          /* the first half posted before the second is staged: the root
           * reduces it meanwhile */
          size_t h = reduce_half(m, es);
          shm_handoff_copy(s, shm_slot(s, r, t->g) + t->rot, in + t->off * es, h * es,
                           a->count * es);
          shm_post(s, 3 * t->g + 1);
          shm_handoff_copy(s, shm_slot(s, r, t->g) + t->rot + h * es, in + (t->off + h) * es,
                           (m - h) * es, a->count * es);
        } else {
          /* all but the own part, which only this rank reads */
          if (!t->cma) {
            shm_handoff_copy(s, shm_slot(s, r, t->g) + t->rot, in + t->off * es, lo * es,
                             a->count * es);
            shm_handoff_copy(s, shm_slot(s, r, t->g) + t->rot + hi * es, in + (t->off + hi) * es,
                             (m - hi) * es, a->count * es);
          }
          shm_post(s, 3 * t->g + 1);
        }
        p->phase = REDUCE_STAGED;
        PLAN_FALLTHROUGH;
      case REDUCE_STAGED: {
        if (v >= nred) { /* stages only */
          coll_stats_shm(comm, m * es);
          shm_post(s, 3 * t->g + 2);
          p->phase = REDUCE_REDUCED;
          break;
        }
        if (t->halves) {
          /* the root, the one reducer of 2 ranks: each half once posted */
          size_t h = reduce_half(m, es);
          int peer = 1 - r;
          const void* srcs[2];
          if (!t->half) {
            PLAN_TEST(p, shm_test_rank(s, peer, 3 * t->g + 1));
            srcs[r] = in + t->off * es;
            srcs[peer] = shm_slot(s, peer, t->g) + t->rot;
            reduce_kernel(out + t->off * es, srcs, 2, h, a->datatype, a->op, 2);
            t->half = 1;
          }
          PLAN_TEST(p, shm_test_rank(s, peer, 3 * t->g + 2));
          srcs[r] = in + (t->off + h) * es;
          srcs[peer] = shm_slot(s, peer, t->g) + t->rot + h * es;
          reduce_kernel(out + (t->off + h) * es, srcs, 2, m - h, a->datatype, a->op, 2);
          /* no coll_stats_shm here: the root staged nothing for the others */
          t->half = 0;
          shm_post(s, 3 * t->g + 2);
          p->phase = REDUCE_REDUCED;
          break;
        }
        PLAN_TEST(p, shm_test_all(s, 3 * t->g + 1));
        const void* srcs[w];
        for (int j = 0; j < w; j++)
          srcs[j] = j == r ? in + (t->off + lo) * es : shm_slot(s, j, t->g) + t->rot + lo * es;
        if (t->publish) QCCL_CHECK(reduce_read_single(t, s, m, srcs));
        /* the root's own part straight into recvbuff (in place, it is
         * srcs[r] at the same offsets, which the kernel allows) */
        char* dst = r == root ? out + (t->off + lo) * es : shm_result(s, r, t->g) + t->rot;
        if (r != root && shm_handoff_streams(s, (hi - lo) * es, a->count * es, clock_now())) {
          /* where ordinary stores into lines the root read run slow
           * (shm_handoff.c): reduced in cache, then streamed */
          char* tmp;
          QCCL_CHECK(shm_scratch(s, &tmp));
          reduce_kernel(tmp, srcs, w, hi - lo, a->datatype, a->op, w);
          copy_stream(dst, tmp, (hi - lo) * es);
        } else {
          reduce_kernel(dst, srcs, w, hi - lo, a->datatype, a->op, w);
        }
        /* the others read its slot but its own part, and root its result */
        coll_stats_shm(comm, (m - (hi - lo) + (r != root ? hi - lo : 0)) * es);
        shm_post(s, 3 * t->g + 2);
        p->phase = REDUCE_REDUCED;
        PLAN_FALLTHROUGH;
      }
      case REDUCE_REDUCED:
        if (r == root) {
          PLAN_TEST(p, shm_test_all(s, 3 * t->g + 2));
          for (int u = 1; u < nred; u++) {
            int j = (root + u) % w;
            size_t jl, jh;
            reduce_part(m, nred, u, &jl, &jh);
            copy_out(out + (t->off + jl) * es, shm_result(s, j, t->g) + t->rot, (jh - jl) * es,
                     a->count * es >= COPY_STREAM_MIN_TOTAL);
          }
        }
        shm_post(s, 3 * t->g + 3);
        t->chunks++;
        t->off += per_chunk;
        p->phase = REDUCE_CHUNK;
        if (p->yield) return qcclInProgress;
        break;
      case REDUCE_END:
        /* only the root waits for every rank at the end: the others are
         * done once their parts are posted, their slots and result areas
         * being guarded by the next call's chunk test (MPI's eager reduce) */
        if (r == root || t->cma) PLAN_TEST(p, node_test_rooted_end(s, t->chunks));
        return qcclSuccess;
      default:
        return QCCL_ERR(qcclInternalError, "reduce: phase %d", p->phase);
    }
  }
}

static const plan_ops_t reduce_ops = {
    .name = "reduce", .progress = reduce_progress, .spin = plan_shm_spin, .check = plan_shm_check};

qcclResult_t node_reduce_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  QCCL_CHECK(plan_alloc(sizeof(reduce_plan_t), &reduce_ops, comm, a, out));
  reduce_plan_t* t = (reduce_plan_t*)*out;
  t->es = dtype_size(a->datatype);
  t->per_chunk = comm->shm->chunk_bytes / t->es;
  int nred = reduce_reducers(comm->shm, comm->nranks, a->count * t->es);
  if (nred < comm->nranks)
    QCCL_INFO(LOG_COLL, "reduce of %zu x %s on %d ranks, %d cores: %d of them reduce", a->count,
              dtype_name(a->datatype), comm->nranks, comm->shm->ncores, nred);
  return qcclSuccess;
}
