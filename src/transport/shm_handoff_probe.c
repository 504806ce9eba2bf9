/*
 * shm_handoff_probe.c - the mode of a 2-rank segment's two cores, timed
 * at attach: whether the handoffs start with streaming stores.
 *
 * The handoffs (shm_handoff.c) learn from their own timed copies whether
 * the writer's ordinary stores run slow, the lines still in the reader's
 * cache across a host whose cores share none. Learned so, every process
 * and every lane of it paid its first slow copies, and a retry that
 * wrote places the peer had never read ran fast and switched back: a
 * fresh 2-rank AllGather of 1 MiB without a shared cache took 72-401 us
 * a call for its first ten calls against 50-65 after (docs/PERF.md, "The
 * mode from the first call"). The one figure that tells the two modes
 * apart is a cache line's round trip between the two cores (qccl-handoff:
 * 60-90 ns with a shared cache, 310-380 without, on the AMD guest).
 *
 * So right after cma_probe's exchange, which both ranks leave together,
 * the 2 ranks of a segment on a host with 2 CPUs or more (more ranks than
 * CPUs would time the scheduler) bounce one word in rank 0's control line
 * (ctrl[0].ping, zero in a new segment): in round k rank 0 waits for 2k
 * and writes 2k + 1, rank 1 waits for 2k + 1 and writes 2k + 2; five
 * batches of SHM_PROBE_TRIPS rounds, each rank timing its own, the median
 * batch a round trip. A rank that waits SHM_PROBE_LIMIT_S in all gives up
 * with no verdict, and so, waiting on it, does the other: no rank waits
 * longer, and the word is not used again. Each rank then seeds its own
 * handoffs (shm_handoff_seed: streaming above 250 ns, or
 * QCCL_SHM_HANDOFF_PROBE_NS; no verdict above 5 us, a rank held off) and
 * logs it at INFO. QCCL_SHM_HANDOFF_PROBE_NS=0 starts them streaming
 * without the probe (for tests: tests/mr, mr_xch_seeded_w2); the ranks'
 * settings should agree, or the one that probes waits out the limit.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "core/log.h"
#include "core/wait.h"
#include "transport/shm.h"

#define SHM_PROBE_TRIPS 64      /* round trips of a batch */
#define SHM_PROBE_BATCHES 5     /* batches; the median counts */
#define SHM_PROBE_LIMIT_S 0.005 /* the whole probe at most */

/* Waits until *w holds v; 0 once the deadline passed (the clock read
 * every 64 polls, not to slow the round trip it times). A plain poll, as
 * every wait's spin (core/wait.c): on a KVM guest a `pause` loop triggers
 * pause-loop exiting and the host may deschedule the vCPU, which would
 * time the hypervisor instead of the caches. */
static int shm_probe_wait(_Atomic uint64_t* w, uint64_t v, double deadline) {
  for (unsigned i = 1;; i++) {
    if (atomic_load_explicit(w, memory_order_acquire) == v) return 1;
    if (i % 64 == 0 && clock_now() > deadline) return 0;
  }
}

static int shm_probe_cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

double shm_handoff_probe(shm_t* s) {
  if (!s->nt_auto || s->nranks != 2 || s->nranks > s->ncores) return 0;
  if (s->nt_probe_s == 0) {
    shm_handoff_stream_first(s);
    QCCL_INFO(LOG_SHM,
              "rank %d: handoffs start with streaming stores (QCCL_SHM_HANDOFF_PROBE_NS=0)",
              s->rank);
    return 0;
  }
  _Atomic uint64_t* w = &s->ctrl[0].ping;
  double deadline = clock_now() + SHM_PROBE_LIMIT_S;
  double batch[SHM_PROBE_BATCHES];
  uint64_t k = 0;
  for (int b = 0; b < SHM_PROBE_BATCHES; b++) {
    double t0 = clock_now();
    for (int i = 0; i < SHM_PROBE_TRIPS; i++, k++) {
      if (!shm_probe_wait(w, 2 * k + (uint64_t)s->rank, deadline)) {
        QCCL_INFO(LOG_SHM,
                  "rank %d: the other rank did not answer the round-trip probe within %.0f ms: "
                  "handoffs start with ordinary stores",
                  s->rank, SHM_PROBE_LIMIT_S * 1e3);
        return 0;
      }
      atomic_store_explicit(w, 2 * k + (uint64_t)s->rank + 1, memory_order_release);
    }
    batch[b] = (clock_now() - t0) / SHM_PROBE_TRIPS;
  }
  qsort(batch, SHM_PROBE_BATCHES, sizeof batch[0], shm_probe_cmp);
  double rt = batch[SHM_PROBE_BATCHES / 2];
  int slow = shm_handoff_seed(s, rt);
  QCCL_INFO(LOG_SHM,
            "rank %d: a cache line's round trip to the other rank took %.0f ns: handoffs start "
            "with %s stores (streaming above %.0f ns, no verdict above %.0f)",
            s->rank, rt * 1e9, slow ? "streaming" : "ordinary", s->nt_probe_s * 1e9,
            SHM_NT_PROBE_MAX_S * 1e9);
  return rt;
}
