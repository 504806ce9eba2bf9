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
 * SHM_NT_RETRY_PREP more copies per peer that stream (the places of both
 * slots written and, by the time the retry writes one again, read by the
 * peers: shm_nt_prep),
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
 * attach, 2 ranks on a host with 2 CPUs or more bounce a word between
 * their cores (shm_handoff_probe.c) and, above SHM_NT_PROBE_SLOW_S a
 * round trip (the AMD guest: 60-90 ns with a shared cache, 310-380
 * without, as qccl-handoff measures), start streaming, the first retry
 * SHM_NT_RETRY_MAX_S after the first use of the choice (shm_handoff_seed,
 * shm_handoff_begin: a retry's ordinary copy must land on places the peer
 * has read, and the first calls' places are fresh). Without it, every process, and every lane of
 * it, paid its first slow copies and the switching back and forth that
 * fresh places caused: a fresh 2-rank AllGather of 1 MiB without a
 * shared cache took 100-300 us a call for its first ten calls against
 * 50-65 after.
 * QCCL_SHM_HANDOFF_NT_BYTES set turns the timing off. Every copy a rank
 * makes into the segment for a peer goes through shm_handoff_copy (the
 * staged chunks of every collective, AllReduce's result areas, reduced
 * into recvbuff first, the point-to-point rings; Reduce's reducers ask
 * shm_handoff_streams whether to reduce in cache and stream the result),
 * but for the cells (shm_xch.c, shm_p2p.c): lines the writer has just
 * read, written with ordinary stores in either mode (streaming only where
 * QCCL_SHM_HANDOFF_NT_BYTES says so).
 */
#include <math.h>

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
#define SHM_NT_RETRY_PREP 2                  /* chunks' copies a due retry still streams first */

/* The copies a due retry streams before the timed one: SHM_NT_RETRY_PREP
 * per peer, so that the timed copy writes a place of a slot that a chunk
 * of the prep wrote and a peer has read since (a chunk of an AlltoAll on
 * w ranks makes w - 1 copies into the slot, and chunks alternate between
 * the rank's two slots). Two copies on 4 ranks timed the third piece of
 * the prep's first chunk, a place no peer had read since the rank began
 * reading single copy: retries ran at 11-18 GB/s without a shared cache
 * and each switched the rank back to ordinary stores and staging. */
static int shm_nt_prep(const shm_t* s) {
  return SHM_NT_RETRY_PREP * (s->nranks > 2 ? s->nranks - 1 : 1);
}

/* The fast retries in a row that switch a streaming rank back: two, and
 * on a host with more ranks than cores one per peer. There a rank's
 * peers share its core now and then (the scheduler moves them), and a
 * copy to a peer that last read on this core runs fast whatever the two
 * cores share: without a shared cache a 4-rank AlltoAll's ranks went back
 * to ordinary stores on two fast retries every few tens of milliseconds,
 * each time paying slow copies until two strikes, and the AlltoAll of
 * 0.5-2 MiB took 1.12-1.16x the time of a build that never offered. */
static int shm_nt_confirms(const shm_t* s) {
  return s->nranks > s->ncores && s->nranks > 2 ? s->nranks - 1 : 2;
}

void shm_handoff_timed(shm_t* s, size_t n, double t0, double dt) {
  int slow = dt > 0 && (double)n / dt < SHM_NT_SLOW_BPS;
  if (!slow) {
    s->nt_strikes = 0;
    if (!s->nt_slow) return;
    s->nt_prep = 0;
    if (++s->nt_confirm < shm_nt_confirms(s)) {
      /* a fast retry: the next one, due at once (after its own prep),
       * confirms it */
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

void shm_handoff_stream_first(shm_t* s) {
  /* streaming, the first retry SHM_NT_RETRY_MAX_S after the first use
   * (shm_handoff_begin): a retry times an ordinary copy into places the
   * peer has read, and the first calls' places are fresh (their ordinary
   * copies ran at 7 GB/s without a shared cache, so a retry 5 ms after the
   * probe switched back and the first AllGathers of 1 MiB took 2-4x as
   * long) */
  s->nt_slow = 1;
  s->nt_strikes = s->nt_confirm = s->nt_prep = 0;
  s->nt_wait = SHM_NT_RETRY_MAX_S;
  s->nt_retry_at = HUGE_VAL; /* until shm_handoff_begin */
}

int shm_handoff_seed(shm_t* s, double rt) {
  if (!s->nt_auto || rt <= 0 || rt > SHM_NT_PROBE_MAX_S || rt <= s->nt_probe_s) return 0;
  shm_handoff_stream_first(s);
  return 1;
}

void shm_handoff_begin(shm_t* s, double now) {
  if (s->nt_retry_at != HUGE_VAL) return; /* not seeded, or begun */
  s->nt_retry_at = now + s->nt_wait;
}

int shm_handoff_slow(const shm_t* s, double now) {
  return s->nt_auto && s->nt_slow && now < s->nt_retry_at;
}

int shm_handoff_streams(const shm_t* s, size_t n, size_t call_bytes, double now) {
  if (shm_handoff_nt(s, call_bytes)) return 1;
  /* a due retry's prep copies, and the copies that follow the choice
   * (Reduce's, AllReduce's) meanwhile, stream too */
  return n >= SHM_NT_AUTO_MIN && s->nt_auto && s->nt_slow &&
         (now < s->nt_retry_at || s->nt_prep < shm_nt_prep(s));
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
  if (s->nt_retry_at == HUGE_VAL) shm_handoff_begin(s, clock_now()); /* seeded: the clock starts */
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
  copy_data(dst, src, n);
  /* streaming, this ordinary copy is the retry */
  shm_handoff_timed(s, n, t0, clock_now() - t0 - s->nt_clock);
}
