/*
 * allreduce.c - AllReduce through a host's shared segment.
 *
 * The buffer is cut into chunks of chunk_bytes; part l of every chunk
 * belongs to local rank l. Each chunk goes through three phases, double-
 * buffered so chunk g+1 is staged while chunk g is still being read:
 *   1. every rank copies the parts of its chunk that others reduce into its
 *      slot (copy in once; its own part stays in sendbuff);
 *   2. rank l reduces part l over the L ranks, in rank order, into its
 *      result area (reduce once, by one rank) and copies it to recvbuff;
 *   3. every rank copies the other L-1 reduced parts to recvbuff (copy out
 *      once).
 * Buffers from qcclMemAlloc are published instead (shm_map.c), each by its
 * owner for itself: a published sendbuff is not staged, its reducers read
 * their parts from it in place in phase 2; from a published recvbuff the
 * peers copy the reduced part in phase 3, not from the result area. Each
 * byte then goes from memory to memory once per phase, never through
 * another core's cache: on a VM whose two vCPUs may sit on cores without
 * a shared cache (the cache-to-cache handoff measured 2-3 GB/s there
 * against 6-14 GB/s on a shared one, docs/PERF.md) this keeps large calls
 * at memory speed. Published buffers are read by peers until all
 * ranks finish, so the call ends with a wait on all.
 * Per rank and per byte: (L-1)/L written into the segment, the reduction
 * reads 1/L from each rank, one byte read out. Each part's final value is
 * computed once and copied, so results are bitwise identical on all ranks.
 * Chunks are small enough that the segment stays in cache; large calls
 * reduce into a private scratch and write recvbuff with streaming stores,
 * and the staged chunks and result areas go with streaming stores where
 * ordinary ones run slow (no read-for-ownership, and readers fetch from
 * memory rather than from another core's cache: shm_handoff.c). The two-level
 * AllReduce across hosts (hier_allreduce.c) uses the same phases.
 *
 * Single copy (cma.h): a buffer that is not qcclMemAlloc memory, in a
 * call of CMA_ALLREDUCE_MAX_BYTES or less on at most
 * CMA_ALLREDUCE_MAX_RANKS ranks, whose parts reach CMA_ALLREDUCE_MIN_BLOCK
 * and CMA's threshold, is
 * offered to the peers instead of staged (sendbuff) or doubled in the
 * result area (recvbuff): in phase 2 the reducer of part l reads it from
 * each peer's sendbuff with process_vm_readv (into recvbuff's part on 2
 * ranks out of place, else into a private buffer) and reduces it with its
 * own, writing the result to recvbuff only; in phase 3 the peers read it
 * from there the same way. Each rank decides for its own buffers inside
 * the chunk sequence, as with qcclMemAlloc buffers, so ranks may differ.
 *
 * Plan: per chunk, wait for the slot to be free, for every rank's stage
 * (staged), for every rank's part (reduced); a call whose buffers peers
 * read in place then waits for every rank's end.
 */
#include "collectives/allreduce_chunk.h"
#include "collectives/node.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "transport/cma.h"

typedef struct {
  plan_t p;
  size_t es, per_chunk;
  int stream, nt; /* streaming copies out; handoff through memory (shm.h) */
  /* the call's */
  shm_reg_t in_reg, out_reg;
  int in_pub, out_pub, in_cma, out_cma;
  char* scratch;  /* large calls reduce here first */
  char* peer_tmp; /* the parts read single copy, when not into recvbuff */
  size_t off;
  size_t rot; /* where the chunk goes in the slots and results (shm_rot) */
  uint64_t g;
} ar_plan_t;

enum { AR_START, AR_CHUNK, AR_FREE, AR_STAGED, AR_REDUCED, AR_END };

/* Phase 2 of the chunk at t->off: this rank's part [lo, hi) reduced over
 * every rank into recvbuff (and, for the peers, its result area). */
static qcclResult_t ar_reduce_part(ar_plan_t* t, size_t m, size_t lo, size_t hi) {
  qcclComm_t comm = t->p.comm;
  shm_t* s = comm->shm;
  const coll_args_t* a = &t->p.a;
  int w = comm->nranks, r = comm->rank;
  size_t es = t->es, per_chunk = t->per_chunk, off = t->off;
  const char* src = (const char*)a->sendbuff + off * es;
  char* out = a->recvbuff;
  uint64_t g = t->g;
  const void* srcs[w];
  for (int j = 0; j < w; j++) {
    const char* p = NULL;
    uintptr_t at;
    if (j != r && shm_reg_peer_cma(s, j, g, SHM_REG_IN, &at)) {
      /* single copy: into recvbuff's part when it is the only one read
       * there and does not hold this rank's input, else privately */
      char* dst = out + (off + lo) * es;
      if (w > 2 || a->recvbuff == a->sendbuff) {
        if (t->peer_tmp == NULL)
          QCCL_CHECK(comm_scratch(comm, 0, (size_t)w * (per_chunk / (size_t)w + 1) * es,
                                  (void**)&t->peer_tmp));
        dst = t->peer_tmp + (size_t)j * (per_chunk / (size_t)w + 1) * es;
      }
      QCCL_CHECK(cma_read_from(s, j, at + (off + lo) * es, dst, (hi - lo) * es));
      srcs[j] = dst;
    } else {
      if (j != r) QCCL_CHECK(shm_reg_peer(s, j, g, SHM_REG_IN, a->count * es, &p));
      srcs[j] = j == r      ? src + lo * es
                : p != NULL ? p + (off + lo) * es
                            : shm_slot(s, j, g) + t->rot + lo * es;
    }
  }
  char* res = shm_result(s, r, g) + t->rot;
  coll_stats_shm(comm, m * es); /* its slot but its part, and its result */
  if (t->out_cma) {
    /* the peers read the result from recvbuff (reduce_kernel allows dst to
     * be a source at the same offset: the part read there) */
    reduce_kernel(out + (off + lo) * es, srcs, w, hi - lo, a->datatype, a->op, w);
  } else if (t->scratch != NULL) {
    /* reduce in cache, then write recvbuff and, for the peers, the result
     * area (unless they read recvbuff), streaming where shm.h says */
    reduce_kernel(t->scratch, srcs, w, hi - lo, a->datatype, a->op, w);
    int nt = t->out_pub && shm_handoff_streams(s, (hi - lo) * es, a->count * es, clock_now());
    copy_out(out + (off + lo) * es, t->scratch, (hi - lo) * es, t->stream || nt);
    if (!t->out_pub) shm_handoff_copy(s, res, t->scratch, (hi - lo) * es, a->count * es);
  } else {
    /* into recvbuff (in place, its part is srcs[r] at the same offsets,
     * which the kernel allows), then handed to the peers with the stores
     * that suit the two cores (shm_handoff_copy): the result area's lines
     * sit in the cache of the peer that read the last chunk there */
    reduce_kernel(out + (off + lo) * es, srcs, w, hi - lo, a->datatype, a->op, w);
    if (!t->out_pub) /* else the peers read recvbuff itself */
      shm_handoff_copy(s, res, out + (off + lo) * es, (hi - lo) * es, a->count * es);
  }
  return qcclSuccess;
}

/* Phase 3 of the chunk at t->off: the other parts into recvbuff. */
static qcclResult_t ar_copy_parts(ar_plan_t* t, size_t m) {
  qcclComm_t comm = t->p.comm;
  shm_t* s = comm->shm;
  const coll_args_t* a = &t->p.a;
  int w = comm->nranks, r = comm->rank;
  size_t es = t->es, off = t->off;
  char* out = a->recvbuff;
  const char* peer_out[w];
  for (int k = 1; k < w; k++) {
    int j = (r + k) % w;
    uintptr_t at;
    QCCL_CHECK(shm_reg_peer(s, j, t->g, SHM_REG_OUT, a->count * es, &peer_out[j]));
    if (!shm_reg_peer_cma(s, j, t->g, SHM_REG_OUT, &at)) continue;
    /* the results published single copy */
    size_t jl, jh;
    coll_part(m, w, j, &jl, &jh);
    QCCL_CHECK(cma_read_from(s, j, at + (off + jl) * es, out + (off + jl) * es, (jh - jl) * es));
    peer_out[j] = AR_CHUNK_DONE;
  }
  peer_out[r] = NULL;
  ar_chunk_copy_results(s, t->g, t->rot, out + off * es, m, es, t->stream, peer_out, off * es);
  return qcclSuccess;
}

static qcclResult_t ar_progress(plan_t* p) {
  ar_plan_t* t = (ar_plan_t*)p;
  qcclComm_t comm = p->comm;
  shm_t* s = comm->shm;
  const coll_args_t* a = &p->a;
  int w = comm->nranks, r = comm->rank;
  size_t es = t->es, per_chunk = t->per_chunk;
  size_t m = a->count - t->off < per_chunk ? a->count - t->off : per_chunk, lo, hi;
  coll_part(m, w, r, &lo, &hi);
  for (;;) {
    switch (p->phase) {
      case AR_START: {
        if (w == 1) {
          coll_copy(a->recvbuff, a->sendbuff, a->count * es);
          return qcclSuccess;
        }
        t->in_pub = shm_reg_find(s, a->sendbuff, a->count * es, &t->in_reg);
        t->out_pub = shm_reg_find(s, a->recvbuff, a->count * es, &t->out_reg);
        /* single copy for plain buffers (cma.h): the block is one part of
         * the first chunk, what a reader reads from one peer at once */
        size_t first = a->count < per_chunk ? a->count * es : per_chunk * es;
        int cma_ok = w <= CMA_ALLREDUCE_MAX_RANKS && a->count * es <= CMA_ALLREDUCE_MAX_BYTES &&
                     first / (size_t)w >= CMA_ALLREDUCE_MIN_BLOCK;
        t->in_cma =
            !t->in_pub && cma_ok && cma_offer(s, a->sendbuff, first / (size_t)w, 0, &t->in_reg);
        t->out_cma =
            !t->out_pub && cma_ok && cma_offer(s, a->recvbuff, first / (size_t)w, 0, &t->out_reg);
        t->scratch = NULL;
        if (t->stream || t->nt) QCCL_CHECK(shm_scratch(s, &t->scratch));
        t->peer_tmp = NULL;
        t->off = 0;
        p->phase = AR_CHUNK;
        PLAN_FALLTHROUGH;
      }
      case AR_CHUNK:
        if (t->off >= a->count) {
          p->phase = AR_END;
          break;
        }
        m = a->count - t->off < per_chunk ? a->count - t->off : per_chunk;
        coll_part(m, w, r, &lo, &hi);
        t->g = shm_chunk_next(s);
        t->rot = shm_rot(s, t->g, m * es);
        p->phase = AR_FREE;
        PLAN_FALLTHROUGH;
      case AR_FREE:
        PLAN_TEST(p, shm_test_chunk(s, t->g));
        shm_reg_publish(s, t->g, SHM_REG_IN, &t->in_reg);
        shm_reg_publish(s, t->g, SHM_REG_OUT, &t->out_reg);
        if (!t->in_pub && !t->in_cma)
          ar_chunk_stage(s, t->g, t->rot, (const char*)a->sendbuff + t->off * es, m, lo, hi, es,
                         a->count * es);
        shm_post(s, 3 * t->g + 1);
        p->phase = AR_STAGED;
        PLAN_FALLTHROUGH;
      case AR_STAGED:
        PLAN_TEST(p, shm_test_all(s, 3 * t->g + 1));
        QCCL_CHECK(ar_reduce_part(t, m, lo, hi));
        shm_post(s, 3 * t->g + 2);
        p->phase = AR_REDUCED;
        PLAN_FALLTHROUGH;
      case AR_REDUCED:
        PLAN_TEST(p, shm_test_all(s, 3 * t->g + 2));
        QCCL_CHECK(ar_copy_parts(t, m));
        shm_post(s, 3 * t->g + 3);
        t->off += per_chunk;
        p->phase = AR_CHUNK;
        if (p->yield) return qcclInProgress;
        break;
      case AR_END:
        /* published buffers are read in place: they must outlive every
         * reader */
        if (t->in_pub || t->out_pub || t->in_cma || t->out_cma)
          PLAN_TEST(p, shm_test_all(s, 3 * t->g + 3));
        return qcclSuccess;
      default:
        return QCCL_ERR(qcclInternalError, "allreduce: phase %d", p->phase);
    }
  }
}

static const plan_ops_t ar_ops = {
    .name = "allreduce", .progress = ar_progress, .spin = plan_shm_spin, .check = plan_shm_check};

qcclResult_t node_allreduce_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  size_t es = dtype_size(a->datatype);
  if (node_allreduce_oneshot_fits(comm, a->count * es))
    return node_allreduce_oneshot_plan(comm, a, out);
  if (node_allreduce_whole_fits(comm, a->count * es))
    return node_allreduce_whole_plan(comm, a, out);
  QCCL_CHECK(plan_alloc(sizeof(ar_plan_t), &ar_ops, comm, a, out));
  ar_plan_t* t = (ar_plan_t*)*out;
  t->es = es;
  t->per_chunk = comm->shm->chunk_bytes / es;
  t->stream = a->count * es >= COPY_STREAM_MIN_TOTAL;
  t->nt = shm_handoff_nt(comm->shm, a->count * es);
  return qcclSuccess;
}
