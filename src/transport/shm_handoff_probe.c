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
 *
 * Where the segment has more ranks than the host has cores (4 ranks on
 * the 2-vCPU guest), two ranks bouncing a word would time the scheduler,
 * and the copies' own timing mixes peers that last ran on this core with
 * peers on the other: the ranks learned the mode late and flipped back and
 * forth, and a 4-rank AlltoAll that read single copy by each rank's own
 * mode took 1.04-1.16x the staged time where forcing single copy took
 * 0.65-0.82x (docs/PERF.md, "Four ranks read single copy by the host's
 * mode"). The mode is the host's: whether two of its cores share a
 * cache. So rank 0 alone bounces the word between two threads of its own,
 * itself pinned for the while to the CPU it runs on and a helper to
 * another CPU it may use (shm_cpu_probe), while the other ranks wait in a
 * bootstrap exchange, which sleeps in the socket and leaves the cores to
 * the two; the exchange then hands rank 0's round trip to every rank, and
 * every rank seeds its handoffs from the same figure. The same limits and
 * verdicts apply; with one usable CPU there is none.
 */
#include <pthread.h>
#include <sched.h>
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

/* The word two threads of one process bounce (shm_cpu_probe), on a line
 * of its own. */
typedef struct {
  _Alignas(SHM_LINE) _Atomic uint64_t word;
  double deadline;
} cpu_ping_t;

/* The five batches' median round trip of the word *w bounced between
 * role 0 and role 1 (rank 0 and rank 1, or a thread and its helper); 0
 * where one gave up at the deadline. */
static double shm_ping(_Atomic uint64_t* w, int role, double deadline) {
  double batch[SHM_PROBE_BATCHES];
  uint64_t k = 0;
  for (int b = 0; b < SHM_PROBE_BATCHES; b++) {
    double t0 = clock_now();
    for (int i = 0; i < SHM_PROBE_TRIPS; i++, k++) {
      if (!shm_probe_wait(w, 2 * k + (uint64_t)role, deadline)) return 0;
      atomic_store_explicit(w, 2 * k + (uint64_t)role + 1, memory_order_release);
    }
    batch[b] = (clock_now() - t0) / SHM_PROBE_TRIPS;
  }
  qsort(batch, SHM_PROBE_BATCHES, sizeof batch[0], shm_probe_cmp);
  return batch[SHM_PROBE_BATCHES / 2];
}

static void* shm_cpu_probe_helper(void* arg) {
  cpu_ping_t* c = arg;
  shm_ping(&c->word, 1, c->deadline);
  return NULL;
}

/* The median round trip of a cache line between the calling thread's CPU
 * and another CPU it may use (two threads, the caller pinned to its CPU
 * meanwhile); 0 where there is no other CPU or it ran past the limit. */
static double shm_cpu_probe(void) {
  cpu_set_t mask, one;
  int cpu = sched_getcpu(), other = -1;
  if (cpu < 0 || pthread_getaffinity_np(pthread_self(), sizeof mask, &mask) != 0) return 0;
  for (int c = 0; c < CPU_SETSIZE && other < 0; c++)
    if (c != cpu && CPU_ISSET(c, &mask)) other = c;
  if (other < 0) return 0;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) return 0;
  double rt = 0;
  pthread_attr_t attr;
  cpu_ping_t* ping = aligned_alloc(SHM_LINE, sizeof *ping);
  if (ping != NULL && pthread_attr_init(&attr) == 0) {
    CPU_ZERO(&one);
    CPU_SET(other, &one);
    pthread_t th;
    atomic_init(&ping->word, 0);
    ping->deadline = clock_now() + SHM_PROBE_LIMIT_S;
    if (pthread_attr_setaffinity_np(&attr, sizeof one, &one) == 0 &&
        pthread_create(&th, &attr, shm_cpu_probe_helper, ping) == 0) {
      rt = shm_ping(&ping->word, 0, ping->deadline);
      pthread_join(th, NULL);
    }
    pthread_attr_destroy(&attr);
  }
  free(ping);
  pthread_setaffinity_np(pthread_self(), sizeof mask, &mask); /* the caller's mask again */
  return rt;
}

/* Seeds the handoffs from round trip rt (0: none), and logs it. */
static double shm_handoff_verdict(shm_t* s, double rt, const char* between) {
  if (rt == 0) {
    QCCL_INFO(LOG_SHM,
              "rank %d: no round trip %s (no answer within %.0f ms, or no second CPU to "
              "time): handoffs start with ordinary stores",
              s->rank, between, SHM_PROBE_LIMIT_S * 1e3);
    return 0;
  }
  int slow = shm_handoff_seed(s, rt);
  QCCL_INFO(LOG_SHM,
            "rank %d: a cache line's round trip %s took %.0f ns: handoffs start "
            "with %s stores (streaming above %.0f ns, no verdict above %.0f)",
            s->rank, between, rt * 1e9, slow ? "streaming" : "ordinary", s->nt_probe_s * 1e9,
            SHM_NT_PROBE_MAX_S * 1e9);
  return rt;
}

/* QCCL_SHM_HANDOFF_PROBE_NS=0: streaming from the start, no probe. */
static double shm_handoff_unprobed(shm_t* s) {
  shm_handoff_stream_first(s);
  QCCL_INFO(LOG_SHM, "rank %d: handoffs start with streaming stores (QCCL_SHM_HANDOFF_PROBE_NS=0)",
            s->rank);
  return 0;
}

/* More ranks than cores: rank 0 times two CPUs of its own while the
 * others wait in the exchange that then gives every rank its figure. */
static double shm_handoff_probe_crowded(shm_t* s, bootstrap_t* boot) {
  int64_t* all = calloc((size_t)s->nranks, sizeof *all);
  if (!all) return 0;
  if (s->rank == 0 && s->nt_auto && s->nt_probe_s != 0)
    all[0] = (int64_t)(shm_cpu_probe() * 1e12); /* picoseconds; 0: none */
  double rt = boot_allgather(boot, all, sizeof *all) == qcclSuccess ? (double)all[0] * 1e-12 : 0;
  free(all);
  if (!s->nt_auto) return 0;
  if (s->nt_probe_s == 0) return shm_handoff_unprobed(s);
  return shm_handoff_verdict(s, rt, "between two of rank 0's CPUs (more ranks than cores)");
}

double shm_handoff_probe(shm_t* s, bootstrap_t* boot) {
  if (s->nranks > 2 && s->nranks > s->ncores && s->ncores >= 2)
    return shm_handoff_probe_crowded(s, boot);
  if (!s->nt_auto || s->nranks != 2 || s->nranks > s->ncores) return 0;
  if (s->nt_probe_s == 0) return shm_handoff_unprobed(s);
  double rt = shm_ping(&s->ctrl[0].ping, s->rank, clock_now() + SHM_PROBE_LIMIT_S);
  return shm_handoff_verdict(s, rt, "to the other rank");
}
