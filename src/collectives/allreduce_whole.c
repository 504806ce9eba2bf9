/*
 * allreduce_whole.c - a mid-size AllReduce on 2 ranks: each rank reads the
 * other's whole sendbuff single copy and reduces both itself.
 *
 * The chunked AllReduce (allreduce.c) moves every byte twice between the
 * cores: a part is staged (or, single copy, read from the peer's sendbuff),
 * reduced by its owner, and the result read back by the other rank, lines
 * the owner has just written. On 2 ranks a rank can instead read the
 * other's whole input with process_vm_readv (cma.h) and compute every
 * element itself: twice the arithmetic, but one read from the peer and one
 * wait, and that read finds the lines the way the peer's program left
 * them, not freshly written by a staging copy. Both ranks reduce the two
 * inputs in rank order with the same kernel, so their results are the
 * same bits, as on the other paths.
 *
 * Per call (one chunk number g, for the segment's steps and its published
 * buffers): each rank publishes its sendbuff (its qcclMemAlloc region,
 * which the peer reads through its mapping, or its address to read single
 * copy) and posts 3g+1; once the peer posted 3g+1 it copies the peer's
 * input into recvbuff, or into its scratch when recvbuff overlaps its own
 * sendbuff, and posts 3g+2 (done reading the peer). A rank whose recvbuff
 * overlaps its sendbuff waits for the peer's 3g+2 before it writes there,
 * since the peer may still be reading it; every rank waits for it before
 * it returns, for the same reason. Then it reduces into recvbuff and posts
 * 3g+3.
 *
 * Which calls (node_allreduce_whole_fits): 2 ranks, single copy on (the
 * ranks agreed on CMA's threshold at init, cma.h), and calls of
 * ALLREDUCE_WHOLE_MIN_BYTES to ALLREDUCE_WHOLE_MAX_BYTES that fit a chunk
 * and are too large for the one-handoff path (allreduce_oneshot.c): all of
 * it known alike on both ranks. On the Xeon guest, against the chunked
 * path, 64 KiB-512 KiB took 0.63-0.83x the time (256 KiB 35 -> 22 us,
 * Intel MPI 28); at 16 and 32 KiB it was even with the one-handoff path,
 * at 768 KiB 0.6-0.95x and at 1 MiB 1.3-1.7x (two buffers of the call and
 * the copy outgrow the L2) (docs/PERF.md, "AllReduce on 2 ranks: each
 * reads the whole").
 */
#include <string.h>

#include "collectives/node.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "transport/cma.h"

#define ALLREDUCE_WHOLE_MIN_BYTES ((size_t)32 << 10)
#define ALLREDUCE_WHOLE_MAX_BYTES ((size_t)512 << 10)

int node_allreduce_whole_fits(qcclComm_t comm, size_t bytes) {
  shm_t* s = comm->shm;
  return s != NULL && comm->nranks == 2 && cma_use(s, bytes) &&
         bytes >= ALLREDUCE_WHOLE_MIN_BYTES && bytes <= ALLREDUCE_WHOLE_MAX_BYTES &&
         bytes <= s->chunk_bytes;
}

typedef struct {
  plan_t p;
  uint64_t g;
  int overlap;    /* recvbuff overlaps sendbuff: the peer's input goes to scratch */
  const char* in; /* where the peer's input was copied */
} whole_plan_t;

enum { WHOLE_START, WHOLE_FREE, WHOLE_POSTED, WHOLE_READ, WHOLE_END };

static qcclResult_t whole_progress(plan_t* p) {
  whole_plan_t* t = (whole_plan_t*)p;
  qcclComm_t comm = p->comm;
  shm_t* s = comm->shm;
  const coll_args_t* a = &p->a;
  int r = comm->rank, peer = 1 - r;
  size_t n = a->count * dtype_size(a->datatype);
  switch (p->phase) {
    case WHOLE_START:
      t->overlap = coll_overlap(a->sendbuff, n, a->recvbuff, n);
      t->g = shm_chunk_next(s);
      p->phase = WHOLE_FREE;
      PLAN_FALLTHROUGH;
    case WHOLE_FREE: {
      PLAN_TEST(p, shm_test_chunk(s, t->g));
      shm_reg_t reg = {0, 0, -1, 0};
      if (!shm_reg_find(s, a->sendbuff, n, &reg)) cma_offer(s, a->sendbuff, n, 0, &reg);
      shm_reg_publish(s, t->g, SHM_REG_IN, &reg);
      shm_post(s, 3 * t->g + 1);
      p->phase = WHOLE_POSTED;
      PLAN_FALLTHROUGH;
    }
    case WHOLE_POSTED: {
      PLAN_TEST(p, shm_test_rank(s, peer, 3 * t->g + 1));
      char* dst = a->recvbuff;
      if (t->overlap) QCCL_CHECK(shm_scratch(s, &dst));
      uintptr_t at;
      if (shm_reg_peer_cma(s, peer, t->g, SHM_REG_IN, &at)) {
        QCCL_CHECK(cma_read_from(s, peer, at, dst, n));
      } else {
        const char* mapped = NULL;
        QCCL_CHECK(shm_reg_peer(s, peer, t->g, SHM_REG_IN, n, &mapped));
        if (mapped == NULL)
          return QCCL_ERR(qcclInternalError,
                          "allreduce (whole): rank %d published no buffer for chunk %llu", peer,
                          (unsigned long long)t->g);
        copy_data(dst, mapped, n);
      }
      t->in = dst;
      coll_stats_shm(comm, n);
      shm_post(s, 3 * t->g + 2);
      p->phase = WHOLE_READ;
      PLAN_FALLTHROUGH;
    }
    case WHOLE_READ: {
      /* recvbuff holds this rank's input too: the peer may still read it */
      if (t->overlap) PLAN_TEST(p, shm_test_rank(s, peer, 3 * t->g + 2));
      const void* srcs[2];
      srcs[r] = a->sendbuff;
      srcs[peer] = t->in;
      reduce_kernel(a->recvbuff, srcs, 2, a->count, a->datatype, a->op, 2);
      shm_post(s, 3 * t->g + 3);
      p->phase = WHOLE_END;
      PLAN_FALLTHROUGH;
    }
    case WHOLE_END:
      /* sendbuff must outlive the peer's read */
      PLAN_TEST(p, shm_test_rank(s, peer, 3 * t->g + 2));
      return qcclSuccess;
  }
  return QCCL_ERR(qcclInternalError, "allreduce (whole): phase %d", p->phase);
}

static const plan_ops_t whole_ops = {.name = "allreduce (each reads the whole)",
                                     .progress = whole_progress,
                                     .spin = plan_shm_spin,
                                     .check = plan_shm_check};

qcclResult_t node_allreduce_whole_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  return plan_alloc(sizeof(whole_plan_t), &whole_ops, comm, a, out);
}
