/*
 * allreduce_oneshot.c - a small AllReduce on one host in one handoff.
 *
 * The chunked AllReduce (allreduce.c) splits the work: rank l reduces part
 * l, then every rank copies the others' results out. That is two waits on
 * every peer, and each part crosses between cores twice (staged, then
 * reduced). For a small buffer the waits and the second crossing cost more
 * than the arithmetic saved, so here every rank stages its whole input in
 * its slot of the node's segment, waits once until every rank has done
 * so, and reduces all W inputs itself, in rank order, straight into
 * recvbuff. Every rank computes every element in the same order with the
 * same kernel, so the results are bitwise identical on all ranks, as with
 * the chunked path. Per rank: n bytes written to the segment, (W-1) n
 * read from peers' slots, one wait. The slot is the chunked path's slot
 * of the same chunk number, and the call ends by posting the chunk's last
 * step, so the double buffering of shm_test_chunk guards it the same
 * way: a rank overwrites the slot only after every peer has read it. The
 * input goes to a place in the slot that changes from call to call
 * (shm_rot): rewriting the lines a peer read two calls ago was the
 * larger part of a small call's time.
 *
 * From 8 KiB the input goes in two halves: the first is posted (3g+1)
 * before the second is staged (3g+2), and the peers reduce the first half
 * while the second is on its way: a post had to wait for every line staged
 * before it to leave the writer's cache, and the reduction for the post.
 *
 * On 2 ranks, where the exchange cells apply (shm_xch.c: up to
 * QCCL_SHM_XCH_BYTES, 128 KiB), the input goes whole through the cell the
 * rank read last (with ordinary stores in either mode), or its slot where
 * it holds none, and each rank reduces the peer's straight from there:
 * against the slot in halves (the AMD guest, 2 ranks, out of place) 4
 * KiB 0.91 of the time, 16 KiB 0.81, 32 KiB 0.84, and with the limit raised from 32 to 128 KiB
 * 64 KiB 0.42-0.45 and 128 KiB 0.68 of the chunked path's time, with a
 * shared cache; without one 0.59-0.90 (docs/PERF.md, "The one-handoff
 * AllReduce through the exchange cells").
 *
 * Which calls take it (node_allreduce_oneshot_fits): at most one slot, and
 * at most allreduce_oneshot_default(W) bytes (or rank 0's
 * QCCL_ALLREDUCE_ONESHOT_BYTES), which falls with W since every rank reads
 * every input; the figures that set it are in docs/PERF.md ("Plain buffers
 * against the four peers at 2, 4 and 8 ranks"). The choice depends only on
 * the call's size, W and rank 0's setting, which every rank shares, so all
 * ranks pick alike. Buffers from qcclMemAlloc are staged too (reading them
 * in place was not measured at these sizes).
 */
#include <string.h>

#include "collectives/node.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"

/* The largest call (bytes) taken here on W ranks, unless
 * QCCL_ALLREDUCE_ONESHOT_BYTES says otherwise. */
static size_t allreduce_oneshot_default(int w) {
  return w <= 2 ? (size_t)128 << 10 : (size_t)1 << 10;
}

int node_allreduce_oneshot_fits(qcclComm_t comm, size_t bytes) {
  shm_t* s = comm->shm;
  if (s == NULL || comm->nranks < 2 || bytes == 0 || bytes > s->chunk_bytes) return 0;
  size_t limit = comm->oneshot_bytes >= 0 ? (size_t)comm->oneshot_bytes
                                          : allreduce_oneshot_default(comm->nranks);
  return bytes <= limit;
}

typedef struct {
  plan_t p;
  uint64_t g;
  size_t rot; /* where in the slots (shm_rot) */
} oneshot_plan_t;

enum { ONESHOT_START, ONESHOT_FREE, ONESHOT_STAGED, ONESHOT_STAGED2, ONESHOT_XCH, ONESHOT_XCHED };

/* Calls from here stage and reduce in two halves: 8 KiB 2.15 -> 1.97 us,
 * 16 KiB 3.55 -> 3.32, but 4 KiB 1.40 -> 1.48 (2 ranks, Xeon guest). */
#define ONESHOT_HALVES ((size_t)8 << 10)

static qcclResult_t oneshot_progress(plan_t* p) {
  oneshot_plan_t* t = (oneshot_plan_t*)p;
  qcclComm_t comm = p->comm;
  shm_t* s = comm->shm;
  const coll_args_t* a = &p->a;
  int w = comm->nranks, r = comm->rank;
  size_t es = dtype_size(a->datatype), n = a->count * es;
  /* from ONESHOT_HALVES bytes, the first h elements (half, whole lines)
   * are posted (3g+1) before the rest is staged (3g+2) */
  size_t h = n >= ONESHOT_HALVES ? (a->count / 2) & ~(size_t)(SHM_LINE / es - 1) : a->count;
  const void* srcs[w];
  switch (p->phase) {
    case ONESHOT_START:
      t->g = shm_chunk_next(s);
      t->rot = shm_rot(s, t->g, n);
      if (shm_xch_use(s, n)) {
        p->phase = ONESHOT_XCH;
        return oneshot_progress(p);
      }
      p->phase = ONESHOT_FREE;
      PLAN_FALLTHROUGH;
    case ONESHOT_FREE:
      PLAN_TEST(p, shm_test_chunk(s, t->g));
      shm_handoff_copy(s, shm_slot(s, r, t->g) + t->rot, a->sendbuff, h * es, n);
      shm_post(s, 3 * t->g + 1);
      if (h < a->count) {
        shm_handoff_copy(s, shm_slot(s, r, t->g) + t->rot + h * es,
                         (const char*)a->sendbuff + h * es, n - h * es, n);
        shm_post(s, 3 * t->g + 2);
      }
      coll_stats_shm(comm, n);
      p->phase = ONESHOT_STAGED;
      PLAN_FALLTHROUGH;
    case ONESHOT_STAGED: {
      PLAN_TEST(p, shm_test_all(s, 3 * t->g + 1));
      for (int j = 0; j < w; j++) srcs[j] = j == r ? a->sendbuff : shm_slot(s, j, t->g) + t->rot;
      /* in place, recvbuff is srcs[r] at the same offsets, which the kernel
       * allows */
      reduce_kernel(a->recvbuff, srcs, w, h, a->datatype, a->op, w);
      if (h == a->count) {
        shm_post(s, 3 * t->g + 3); /* this rank read every slot of chunk g */
        return qcclSuccess;
      }
      p->phase = ONESHOT_STAGED2;
      PLAN_FALLTHROUGH;
    }
    case ONESHOT_STAGED2: {
      PLAN_TEST(p, shm_test_all(s, 3 * t->g + 2));
      for (int j = 0; j < w; j++)
        srcs[j] = (j == r ? (const char*)a->sendbuff : shm_slot(s, j, t->g) + t->rot) + h * es;
      reduce_kernel((char*)a->recvbuff + h * es, srcs, w, a->count - h, a->datatype, a->op, w);
      shm_post(s, 3 * t->g + 3);
      return qcclSuccess;
    }
    case ONESHOT_XCH:
      /* 2 ranks: the input whole through an exchange cell (shm_xch.c) */
      PLAN_TEST(p, shm_xch_put(s, t->g, t->rot, a->sendbuff, n, n));
      coll_stats_shm(comm, n);
      p->phase = ONESHOT_XCHED;
      PLAN_FALLTHROUGH;
    case ONESHOT_XCHED:
      PLAN_TEST(p, shm_xch_test(s, t->g));
      srcs[r] = a->sendbuff;
      srcs[1 - r] = shm_xch_peer(s, t->g, t->rot);
      reduce_kernel(a->recvbuff, srcs, w, a->count, a->datatype, a->op, w);
      shm_xch_done(s, t->g);
      return qcclSuccess;
  }
  return QCCL_ERR(qcclInternalError, "allreduce (one handoff): phase %d", p->phase);
}

static const plan_ops_t oneshot_ops = {.name = "allreduce (one handoff)",
                                       .progress = oneshot_progress,
                                       .spin = plan_shm_spin,
                                       .check = plan_shm_check};

qcclResult_t node_allreduce_oneshot_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  return plan_alloc(sizeof(oneshot_plan_t), &oneshot_ops, comm, a, out);
}
