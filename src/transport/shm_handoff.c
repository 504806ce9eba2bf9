/*
 * shm_handoff.c - the stores a rank hands data to its peers with, chosen
 * from how fast its ordinary stores into the segment run.
 *
 * A rank writes its slot, a peer reads it, the rank writes it again at
 * the next chunk: every line the writer stores to is still in the
 * reader's cache, so each store first takes the line back from there. On
 * a host whose two cores share a cache that costs little, and ordinary
 * stores (memcpy) beat streaming ones, which send every line to memory
 * (a 2-rank AlltoAll of 1 MiB: the copy into the slot 35-45 GB/s against
 * 15-20). Where the cores share none (an AMD guest whose vCPUs the host
 * moved apart: cache-line round trip 330-380 ns instead of 60-85) the
 * same memcpy ran at 2-3.5 GB/s and streaming stores at 19-21, and the
 * call at 1.7-2.1 GB/s busbw against 7.2-8.9 (docs/PERF.md, "A crash the
 * AMD guest found, and the guest's two modes"). The host may move the
 * vCPUs while a job runs, so the choice is made from the copies
 * themselves: every ordinary copy of at least SHM_NT_TIMED_MIN bytes is
 * timed, and every SHM_NT_SAMPLE-th from SHM_NT_AUTO_MIN (a call that
 * hands off only small pieces is seen too, and reads the clock at one
 * copy in that many, in either state; the clock's own cost, measured
 * once, is taken off, and where it exceeds SHM_NT_CLOCK_MAX, a system
 * call rather than the vDSO, small copies are not timed and follow the
 * large ones' choice); after SHM_NT_STRIKES timed ones in a row below
 * SHM_NT_SLOW_BPS (one could be a page's first touch or a preemption)
 * this rank's handoffs of every size from SHM_NT_AUTO_MIN go streaming;
 * one ordinary copy is timed again after SHM_NT_RETRY_S, then twice as
 * long while it stays slow (up to SHM_NT_RETRY_MAX_S), so a return to a
 * shared cache is seen within that. A retry is timed only after
 * SHM_NT_RETRY_PREP more copies that stream (the places of both slots
 * written and, by the time the retry writes one again, read by the peer),
 * and a fast retry switches back only once the next retry (due at once,
 * after its own prep; a slow one then doubles the wait as any slow retry) is
 * fast too: a rank that read single copy while its handoffs streamed
 * (cma.h, cma_mode_offer) had written nothing its peer read since, and
 * its first copies into the slots met none of the peer's lines whatever
 * the mode (such retries ran at 8-16 GB/s without a shared cache, and a
 * 2-rank AllGather of 4 MiB went back and forth between the two paths,
 * 2.1-2.2x the time). Small handoffs gain the most: a
 * 2-thread exchange of 2, 4, 16 and 64 KiB without a shared cache took
 * 1.4, 2.6, 8.8 and 32 us a step with ordinary stores, 1.1, 1.2, 2.2 and
 * 6.7 with streaming ones; with one, ordinary stores were as fast or
 * faster (4 KiB 0.7 against 0.9-1.0, 64 KiB 5.6 against 8.9-9.3;
 * qccl-handoff -x, docs/PERF.md, "Small handoffs follow the mode"). The
 * choice is the writer's alone (a reader reads the same bytes either
 * way; a streaming copy ends with a store fence before the chunk is
 * posted).
 * A rank need not learn the mode from its first calls' slow copies: at
 * attach, 2 ranks on a core each bounce a word between their cores
 * (shm_handoff_probe, 5 batches of 64 round trips, the median batch; at
 * most 5 ms) and, above SHM_NT_PROBE_SLOW_S a round trip (the AMD guest:
 * 60-90 ns with a shared cache, 310-380 without, as qccl-handoff
 * measures), start streaming, the first retry SHM_NT_RETRY_MAX_S after
 * their first copy into the segment (shm_handoff_seed: a retry's
 * ordinary copy must land on places the peer has read, and the first
 * calls' places are fresh). Without it, every process, and every lane of
 * it, paid its first slow copies and the switching back and forth that
 * fresh places caused: a fresh 2-rank AllGather of 1 MiB without a
 * shared cache took 100-300 us a call for its first ten calls against
 * 50-65 after.
 * QCCL_SHM_HANDOFF_NT_BYTES set turns the timing off. Every copy a rank
 * makes into the segment for a peer goes through shm_handoff_copy: the
 * staged chunks of every collective, AllReduce's result areas (reduced
 * into recvbuff first), the point-to-point rings; Reduce's reducers ask
 * shm_handoff_streams whether to reduce in cache and stream the result.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/log.h"
#include "core/memcopy.h"
#include "core/wait.h"
#include "transport/shm.h"

#define SHM_NT_AUTO_MIN ((size_t)2 << 10)    /* copies that may go streaming */
#define SHM_NT_TIMED_MIN ((size_t)128 << 10) /* copies timed: every one from this size */
#define SHM_NT_SAMPLE 16                     /* and every this many of the smaller ones */
#define SHM_NT_CLOCK_MAX 100e-9              /* where clock_now() costs more: none of them */
#define SHM_NT_SLOW_BPS 5e9                  /* bytes per second: below, slow */
#define SHM_NT_STRIKES 2                     /* slow copies in a row that switch */
#define SHM_NT_RETRY_S 0.005                 /* seconds to the first timed retry */
#define SHM_NT_RETRY_MAX_S 0.08              /* and at most between two */
#define SHM_NT_RETRY_PREP 2                  /* copies a due retry still streams first */
#define SHM_NT_PROBE_TRIPS 64                /* round trips of a batch (shm_handoff_probe) */
#define SHM_NT_PROBE_BATCHES 5               /* batches; the median counts */
#define SHM_NT_PROBE_SLOW_S 250e-9           /* a round trip above: no shared cache */
#define SHM_NT_PROBE_MAX_S 5e-6              /* above: a rank held off, no verdict */
#define SHM_NT_PROBE_LIMIT_S 0.005           /* the whole probe at most */

void shm_handoff_timed(shm_t* s, size_t n, double t0, double dt) {
  int slow = dt > 0 && (double)n / dt < SHM_NT_SLOW_BPS;
  if (!slow) {
    s->nt_strikes = 0;
    if (!s->nt_slow) return;
    s->nt_prep = 0;
    if (!s->nt_confirm) {
      /* a fast retry: the next one, due at once (after its own prep),
       * decides */
      s->nt_confirm = 1;
      s->nt_retry_at = t0;
      return;
    }
    s->nt_confirm = 0;
    s->nt_slow = 0;
  } else if (s->nt_slow) {
    s->nt_confirm = 0;
    s->nt_prep = 0;
    /* a retry, still slow: the next one later */
    s->nt_wait = s->nt_wait * 2 < SHM_NT_RETRY_MAX_S ? s->nt_wait * 2 : SHM_NT_RETRY_MAX_S;
    s->nt_retry_at = t0 + s->nt_wait;
    return;
  } else if (++s->nt_strikes < SHM_NT_STRIKES) {
    return;
  } else {
    s->nt_slow = 1;
    s->nt_wait = SHM_NT_RETRY_S;
    s->nt_retry_at = t0 + s->nt_wait;
  }
  QCCL_INFO(LOG_SHM,
            "rank %d: handoffs of %zu bytes or more now use %s stores (an ordinary copy into "
            "the segment ran at %.1f GB/s)",
            s->rank, SHM_NT_AUTO_MIN, slow ? "streaming" : "ordinary", (double)n / dt / 1e9);
}

int shm_handoff_seed(shm_t* s, double rt, double now) {
  double slow = s->nt_probe_set ? s->nt_probe_s : SHM_NT_PROBE_SLOW_S;
  if (!s->nt_auto || rt <= 0 || rt > SHM_NT_PROBE_MAX_S || rt <= slow) return 0;
  /* streaming, the first retry SHM_NT_RETRY_MAX_S after the first copy:
   * a retry times an ordinary copy into places the peer has read, and
   * the first calls' places are fresh (their ordinary copies ran at 7 GB/s
   * without a shared cache, so a retry 5 ms after the probe switched back
   * and the first AllGathers of 1 MiB took 2-4x as long) */
  (void)now;
  s->nt_slow = 1;
  s->nt_strikes = s->nt_confirm = s->nt_prep = 0;
  s->nt_wait = SHM_NT_RETRY_MAX_S;
  s->nt_retry_at = HUGE_VAL;
  s->nt_seeded = 1;
  return 1;
}

/* Waits until *w holds v; 0 once the deadline passed (the clock read
 * every 64 polls, not to slow the round trip it times). */
static int shm_probe_wait(_Atomic uint64_t* w, uint64_t v, double deadline) {
  for (unsigned i = 1;; i++) {
    if (atomic_load_explicit(w, memory_order_acquire) == v) return 1;
    if (i % 64 == 0 && clock_now() > deadline) return 0;
  }
}

static int shm_cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

double shm_handoff_probe(shm_t* s) {
  /* only two ranks, each on a core of its own: a round trip through a
   * descheduled rank would time the scheduler */
  if (!s->nt_auto || s->nranks != 2 || s->nranks > s->ncores) return 0;
  if (s->nt_probe_set && s->nt_probe_s == 0) { /* QCCL_SHM_HANDOFF_PROBE_NS=0: no probe */
    shm_handoff_seed(s, SHM_NT_PROBE_MAX_S, clock_now());
    QCCL_INFO(LOG_SHM,
              "rank %d: handoffs start with streaming stores (QCCL_SHM_HANDOFF_PROBE_NS=0)",
              s->rank);
    return 0;
  }
  _Atomic uint64_t* w = &s->ctrl[0].ping;
  double deadline = clock_now() + SHM_NT_PROBE_LIMIT_S;
  double batch[SHM_NT_PROBE_BATCHES];
  uint64_t k = 0; /* round k: rank 0 turns 2k into 2k + 1, rank 1 that into 2k + 2 */
  for (int b = 0; b < SHM_NT_PROBE_BATCHES; b++) {
    double t0 = clock_now();
    for (int i = 0; i < SHM_NT_PROBE_TRIPS; i++, k++) {
      if (!shm_probe_wait(w, 2 * k + (uint64_t)s->rank, deadline)) return 0; /* the peer too */
      atomic_store_explicit(w, 2 * k + (uint64_t)s->rank + 1, memory_order_release);
    }
    batch[b] = (clock_now() - t0) / SHM_NT_PROBE_TRIPS;
  }
  qsort(batch, SHM_NT_PROBE_BATCHES, sizeof batch[0], shm_cmp_double);
  double rt = batch[SHM_NT_PROBE_BATCHES / 2];
  int slow = shm_handoff_seed(s, rt, clock_now());
  QCCL_INFO(LOG_SHM,
            "rank %d: a cache line's round trip to the other rank took %.0f ns: handoffs start "
            "with %s stores (%s %.0f ns)",
            s->rank, rt * 1e9, slow ? "streaming" : "ordinary",
            rt > SHM_NT_PROBE_MAX_S ? "no verdict above"
            : slow                  ? "above"
                                    : "at most",
            (rt > SHM_NT_PROBE_MAX_S ? SHM_NT_PROBE_MAX_S
             : s->nt_probe_set       ? s->nt_probe_s
                                     : SHM_NT_PROBE_SLOW_S) *
                1e9);
  return rt;
}

int shm_handoff_slow(const shm_t* s, double now) {
  return s->nt_auto && s->nt_slow && now < s->nt_retry_at;
}

int shm_handoff_streams(const shm_t* s, size_t n, size_t call_bytes, double now) {
  if (shm_handoff_nt(s, call_bytes)) return 1;
  /* a due retry's prep copies, and the copies that follow the choice
   * (Reduce's, AllReduce's) meanwhile, stream too */
  return n >= SHM_NT_AUTO_MIN && s->nt_auto && s->nt_slow &&
         (now < s->nt_retry_at || s->nt_prep < SHM_NT_RETRY_PREP);
}

/* Seconds clock_now() adds to a copy timed with it: the least of a few
 * back-to-back reads (at least 1 ns, so 0 stays "not measured"). */
static double shm_nt_clock_cost(void) {
  double best = 1.0;
  for (int i = 0; i < 8; i++) {
    double a = clock_now(), d = clock_now() - a;
    if (d < best) best = d;
  }
  return best > 1e-9 ? best : 1e-9;
}

void shm_handoff_copy(shm_t* s, void* dst, const void* src, size_t n, size_t call_bytes) {
  int forced = shm_handoff_nt(s, call_bytes); /* QCCL_SHM_HANDOFF_NT_BYTES */
  if (!s->nt_auto || n < SHM_NT_AUTO_MIN || forced) {
    copy_out(dst, src, n, forced);
    return;
  }
  if (s->nt_seeded) { /* the first copy since the probe: the retry's clock starts */
    s->nt_seeded = 0;
    s->nt_retry_at = clock_now() + s->nt_wait;
  }
  if (n < SHM_NT_TIMED_MIN) {
    /* a small copy reads the clock only when sampled, and only where the
     * clock is cheap next to the copy; else it follows the last choice
     * (a retry waits for a sampled or a large copy) */
    if (s->nt_clock == 0) s->nt_clock = shm_nt_clock_cost();
    if (s->nt_clock > SHM_NT_CLOCK_MAX || ++s->nt_tick % SHM_NT_SAMPLE != 0) {
      copy_out(dst, src, n, s->nt_slow);
      return;
    }
  }
  double t0 = clock_now();
  if (shm_handoff_streams(s, n, call_bytes, t0)) {
    /* the retry due: the first ones still stream, so that the timed copy
     * lands on lines the peer has read since (both slots' places) */
    if (s->nt_slow && t0 >= s->nt_retry_at) s->nt_prep++;
    copy_stream(dst, src, n);
    return;
  }
  __builtin_memcpy(dst, src, n);
  /* streaming, this ordinary copy is the retry */
  shm_handoff_timed(s, n, t0, clock_now() - t0 - s->nt_clock);
}
