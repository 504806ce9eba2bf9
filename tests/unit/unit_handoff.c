/*
 * unit_handoff - the choice of stores for handoffs into the segment
 * (transport/shm_handoff.c), fed the timings of ordinary copies: fast ones
 * never switch, one slow copy does not, two in a row do (for copies of 2
 * KiB or more, below QCCL_SHM_HANDOFF_NT_BYTES), a retry is due 5 ms later
 * and twice as long after each slow retry up to 80 ms, two fast retries
 * in a row switch back (a fast retry, then a slow copy, does not), a due
 * retry streams two more copies before the timed one, and with the
 * variable set nothing is timed. Copies below
 * 128 KiB: one in 16 counted as sampled, none under a costly clock, none
 * of the others the retry. Then shm_handoff_copy's bytes, both ways,
 * against memcpy. And the single copy a rank takes while its handoffs
 * stream (cma.h, cma_mode_use), and a crowded host's AlltoAll single
 * copy by its bytes on the node (cma_a2a_crowded). And where the round trip the attach
 * probe measured starts the handoffs (shm_handoff_seed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/cma.h"
#include "transport/shm.h"

#define CHECK_NAME "unit_handoff"
#include "check.h"

#define MIB ((size_t)1 << 20)
#define FAST (MIB / 40e9) /* seconds an ordinary 1 MiB copy takes at 40 GB/s */
#define SLOW (MIB / 2e9)  /* and at 2 GB/s */
#define SAMPLE 16         /* shm_handoff.c: one small copy in this many is timed */

static void fresh(shm_t* s) {
  memset(s, 0, sizeof *s);
  s->handoff_nt = 8 * MIB;
  s->nt_auto = 1;
  s->nt_probe_s = SHM_NT_PROBE_SLOW_S; /* QCCL_SHM_HANDOFF_PROBE_NS unset */
}

int main(void) {
  shm_t s;
  fresh(&s);
  double t = 1.0;
  for (int i = 0; i < 100; i++, t += 0.001) shm_handoff_timed(&s, MIB, t, FAST);
  CHECK(!shm_handoff_streams(&s, MIB, 2 * MIB, t), "fast copies switched");
  CHECK(shm_handoff_streams(&s, MIB, 8 * MIB, t), "a call of 8 MiB does not stream");

  shm_handoff_timed(&s, MIB, t, SLOW);
  CHECK(!shm_handoff_streams(&s, MIB, 2 * MIB, t), "one slow copy switched");
  shm_handoff_timed(&s, MIB, t, FAST);
  shm_handoff_timed(&s, MIB, t, SLOW);
  CHECK(!shm_handoff_streams(&s, MIB, 2 * MIB, t), "slow, fast, slow switched");
  shm_handoff_timed(&s, MIB, t, SLOW);
  CHECK(shm_handoff_streams(&s, MIB, 2 * MIB, t), "two slow copies in a row did not switch");
  CHECK(shm_handoff_streams(&s, 2 << 10, 2 * MIB, t), "a 2 KiB copy does not stream");
  CHECK(!shm_handoff_streams(&s, (2 << 10) - 1, 2 * MIB, t), "a copy under 2 KiB streams");
  CHECK(shm_handoff_streams(&s, MIB, 2 * MIB, t + 0.0049), "the retry came before 5 ms");
  /* the retry due at 5 ms: its prep copies (and the followers') still
   * stream, of every size */
  CHECK(!shm_handoff_slow(&s, t + 0.005) && shm_handoff_streams(&s, MIB, 2 * MIB, t + 0.005),
        "no retry at 5 ms, or its prep does not stream");
  CHECK(shm_handoff_streams(&s, 2 << 10, 2 * MIB, t + 0.005), "a 2 KiB prep copy does not stream");

  /* slow retries: 10, 20, 40, 80, 80 ms */
  const double want[] = {0.01, 0.02, 0.04, 0.08, 0.08};
  double at = t + 0.005;
  for (int k = 0; k < 5; k++) {
    shm_handoff_timed(&s, MIB, at, SLOW);
    CHECK(shm_handoff_streams(&s, MIB, 2 * MIB, at + want[k] - 1e-4),
          "slow retry %d: the next came before %.0f ms", k, want[k] * 1e3);
    CHECK(!shm_handoff_slow(&s, at + want[k]), "slow retry %d: no retry after %.0f ms", k,
          want[k] * 1e3);
    at += want[k];
  }
  /* a fast retry: the next copy is timed too, and a slow one keeps
   * streaming (the wait doubled, 80 ms at most) */
  shm_handoff_timed(&s, MIB, at, FAST);
  CHECK(!shm_handoff_slow(&s, at) && s.nt_slow && s.nt_confirm,
        "a fast retry: the next retry not due at once, or switched back at once");
  shm_handoff_timed(&s, MIB, at, SLOW);
  CHECK(shm_handoff_streams(&s, MIB, 2 * MIB, at + 0.08 - 1e-4),
        "fast then slow retry: not streaming");
  CHECK(!shm_handoff_slow(&s, at + 0.08), "fast then slow: no retry at 80 ms");
  at += 0.08;
  /* two fast ones in a row switch back */
  shm_handoff_timed(&s, MIB, at, FAST);
  shm_handoff_timed(&s, MIB, at, FAST);
  CHECK(!shm_handoff_streams(&s, MIB, 2 * MIB, at) && !s.nt_slow,
        "two fast retries did not switch back");
  shm_handoff_timed(&s, MIB, at, SLOW);
  CHECK(!shm_handoff_streams(&s, MIB, 2 * MIB, at), "one slow copy after the switch back");

  /* the variable set: nothing timed, only its threshold */
  fresh(&s);
  s.nt_auto = 0;
  s.handoff_nt = 4 * MIB;
  shm_handoff_timed(&s, MIB, t, SLOW);
  shm_handoff_timed(&s, MIB, t, SLOW);
  CHECK(!shm_handoff_streams(&s, MIB, 2 * MIB, t), "QCCL_SHM_HANDOFF_NT_BYTES set: switched");
  CHECK(shm_handoff_streams(&s, MIB, 4 * MIB, t), "QCCL_SHM_HANDOFF_NT_BYTES set: not used");

  /* sampling: one small copy in 16 reads the clock, every large one */
  {
    static unsigned char a[MIB], b[MIB];
    fresh(&s);
    s.nt_clock = 1e-9; /* a cheap clock, as measured on this kind of host */
    for (int i = 0; i < 20; i++) shm_handoff_copy(&s, b, a, 2 << 10, 2 * MIB);
    CHECK(s.nt_tick == 20, "20 small copies counted %u", s.nt_tick);
    for (int i = 0; i < 3; i++) shm_handoff_copy(&s, b, a, MIB, 2 * MIB);
    CHECK(s.nt_tick == 20, "large copies counted among the sampled ones (%u)", s.nt_tick);
    /* a costly clock (a system call): small copies are not timed */
    fresh(&s);
    s.nt_clock = 1e-6;
    for (int i = 0; i < 20; i++) shm_handoff_copy(&s, b, a, 2 << 10, 2 * MIB);
    CHECK(s.nt_tick == 0, "small copies sampled under a costly clock (%u)", s.nt_tick);
    /* streaming with the retry due: the 15 small copies between two
     * sampled ones keep streaming, untimed */
    fresh(&s);
    s.nt_clock = 1e-9;
    s.nt_slow = 1;
    s.nt_retry_at = 0;
    for (int i = 0; i < SAMPLE - 1; i++) shm_handoff_copy(&s, b, a, 2 << 10, 2 * MIB);
    CHECK(s.nt_slow == 1 && s.nt_tick == SAMPLE - 1,
          "an unsampled small copy was the retry (slow %d, tick %u)", s.nt_slow, s.nt_tick);
    /* a due retry: two more copies stream first (untimed), the third is
     * the timed one (whatever it reads, the count starts again) */
    fresh(&s);
    s.nt_clock = 1e-9;
    s.nt_slow = 1;
    s.nt_retry_at = 0;
    shm_handoff_copy(&s, b, a, MIB, 2 * MIB);
    shm_handoff_copy(&s, b, a, MIB, 2 * MIB);
    CHECK(s.nt_prep == 2 && s.nt_slow == 1 && s.nt_confirm == 0 && s.nt_retry_at == 0,
          "a due retry's first two copies: prep %d, slow %d, confirm %d", s.nt_prep, s.nt_slow,
          s.nt_confirm);
    shm_handoff_copy(&s, b, a, MIB, 2 * MIB);
    CHECK(s.nt_prep == 0 && (s.nt_confirm == 1 || s.nt_retry_at > 0),
          "the third copy was not the retry (prep %d, confirm %d)", s.nt_prep, s.nt_confirm);
    /* on 4 ranks two copies per peer (a chunk makes three): the seventh
     * is the timed one */
    fresh(&s);
    s.nt_clock = 1e-9;
    s.nranks = 4;
    s.nt_slow = 1;
    s.nt_retry_at = 0;
    for (int i = 0; i < 6; i++) shm_handoff_copy(&s, b, a, MIB, 4 * MIB);
    CHECK(s.nt_prep == 6 && s.nt_slow == 1 && s.nt_confirm == 0 && s.nt_retry_at == 0,
          "4 ranks, a due retry's first six copies: prep %d, slow %d, confirm %d", s.nt_prep,
          s.nt_slow, s.nt_confirm);
    shm_handoff_copy(&s, b, a, MIB, 4 * MIB);
    CHECK(s.nt_prep == 0 && (s.nt_confirm == 1 || s.nt_retry_at > 0),
          "4 ranks: the seventh copy was not the retry (prep %d, confirm %d)", s.nt_prep,
          s.nt_confirm);
    /* more ranks than cores: a streaming rank switches back only after
     * one fast retry per peer (3 on 4 ranks), each due at once; on 4
     * ranks that fit the cores, after two */
    fresh(&s);
    s.nranks = 4;
    s.ncores = 2;
    s.nt_slow = 1;
    s.nt_wait = 0.08;
    for (int i = 0; i < 2; i++) shm_handoff_timed(&s, MIB, 3.0, FAST);
    CHECK(s.nt_slow == 1 && s.nt_confirm == 2 && s.nt_retry_at == 3.0,
          "4 ranks on 2 cores: back after two fast retries (slow %d, confirm %d)", s.nt_slow,
          s.nt_confirm);
    shm_handoff_timed(&s, MIB, 3.0, FAST);
    CHECK(s.nt_slow == 0, "4 ranks on 2 cores: still streaming after three fast retries");
    fresh(&s);
    s.nranks = 4;
    s.ncores = 4;
    s.nt_slow = 1;
    for (int i = 0; i < 2; i++) shm_handoff_timed(&s, MIB, 3.0, FAST);
    CHECK(s.nt_slow == 0, "4 ranks on 4 cores: still streaming after two fast retries");
    /* the first small copy measures the clock */
    fresh(&s);
    shm_handoff_copy(&s, b, a, 2 << 10, 2 * MIB);
    CHECK(s.nt_clock > 0 && s.nt_clock < 1e-3, "the clock's cost: %g s", s.nt_clock);
  }

  /* single copy while the handoffs stream (cma.h, cma_mode_use): only
   * where the probe alone turned it off, for blocks of 64 KiB-2 MiB on 2
   * ranks (AllGather; not on more) or 2 to CMA_MODE_A2A_MAX_RANKS
   * (AlltoAll), not when the retry is due; with
   * QCCL_CMA_MODE_EVERY, rank r at the calls r modulo k */
  {
    fresh(&s);
    s.nranks = 2;
    s.cma_slow = 1;
    s.peers_readable = 1;
    double u = 2.0;
    CHECK(!cma_mode_use(&s, 2, 2, MIB, u), "single copy with a shared cache");
    shm_handoff_timed(&s, MIB, u, SLOW);
    shm_handoff_timed(&s, MIB, u, SLOW);
    CHECK(cma_mode_use(&s, 2, 2, MIB, u) && s.cma_mode_on, "no single copy while streaming");
    CHECK(cma_mode_use(&s, 2, 2, 64 << 10, u), "no single copy of 64 KiB blocks on 2 ranks");
    CHECK(cma_mode_use(&s, 2, 2, 2 * MIB, u), "no single copy of 2 MiB blocks on 2 ranks");
    CHECK(!cma_mode_use(&s, 2, 2, (64 << 10) - 1, u), "single copy below 64 KiB");
    CHECK(!cma_mode_use(&s, 2, 2, 2 * MIB + 1, u), "single copy above 2 MiB on 2 ranks");
    CHECK(!cma_mode_use(&s, 3, 2, 256 << 10, u), "single copy on 3 ranks");
    CHECK(cma_mode_use(&s, 4, CMA_MODE_A2A_MAX_RANKS, 256 << 10, u) &&
              cma_mode_use(&s, CMA_MODE_A2A_MAX_RANKS, CMA_MODE_A2A_MAX_RANKS, 64 << 10, u),
          "no AlltoAll single copy on 4 and %d ranks", CMA_MODE_A2A_MAX_RANKS);
    CHECK(cma_mode_use(&s, 4, CMA_MODE_A2A_MAX_RANKS, 512 << 10, u) &&
              !cma_mode_use(&s, 4, CMA_MODE_A2A_MAX_RANKS, (512 << 10) + 1, u),
          "AlltoAll's single copy on 4 ranks not to 512 KiB pieces");
    CHECK(!cma_mode_use(&s, CMA_MODE_A2A_MAX_RANKS + 1, CMA_MODE_A2A_MAX_RANKS, 256 << 10, u) &&
              !cma_mode_use(&s, 1, CMA_MODE_A2A_MAX_RANKS, 256 << 10, u),
          "AlltoAll single copy on 1 or %d ranks", CMA_MODE_A2A_MAX_RANKS + 1);
    CHECK(!cma_mode_use(&s, 2, 2, MIB, u + 0.005) && s.cma_mode_on,
          "single copy when the retry was due, or the mode changed");
    shm_handoff_timed(&s, MIB, u + 0.005, SLOW); /* the retry, slow: 10 ms on */
    CHECK(cma_mode_use(&s, 2, 2, MIB, u + 0.006), "no single copy after a slow retry");
    /* a fast retry (the slot untouched by the peer while it read single
     * copy), the next slow: single copy again */
    shm_handoff_timed(&s, MIB, u + 0.015, FAST);
    CHECK(!cma_mode_use(&s, 2, 2, MIB, u + 0.016), "single copy after a fast retry");
    shm_handoff_timed(&s, MIB, u + 0.016, SLOW);
    CHECK(cma_mode_use(&s, 2, 2, MIB, u + 0.017), "no single copy after fast, slow");
    /* back to a shared cache: two fast in a row */
    shm_handoff_timed(&s, MIB, u + 0.040, FAST);
    shm_handoff_timed(&s, MIB, u + 0.040, FAST);
    CHECK(!cma_mode_use(&s, 2, 2, MIB, u + 0.041) && !s.cma_mode_on,
          "single copy after two fast retries");
    s.cma_slow = 0; /* the probe turned it on, or the variable chose */
    shm_handoff_timed(&s, MIB, u, SLOW);
    shm_handoff_timed(&s, MIB, u, SLOW);
    CHECK(!cma_mode_use(&s, 2, 2, MIB, u), "single copy where the probe did not turn it off");
    fresh(&s);
    s.cma_mode_every = 3;
    s.peers_readable = 1;
    s.rank = 1;
    int got[6];
    for (int i = 0; i < 6; i++) got[i] = cma_mode_use(&s, 2, 2, MIB, u);
    CHECK(!got[0] && got[1] && !got[2] && !got[3] && got[4] && !got[5],
          "QCCL_CMA_MODE_EVERY=3, rank 1: %d%d%d%d%d%d", got[0], got[1], got[2], got[3], got[4],
          got[5]);
    s.peers_readable = 0;
    for (int i = 0; i < 6; i++)
      CHECK(!cma_mode_use(&s, 2, 2, MIB, u),
            "QCCL_CMA_MODE_EVERY: single copy of unreadable peers");
  }

  /* a crowded host's AlltoAll single copy whatever the mode (cma.h,
   * cma_a2a_crowded): where the probe alone turned single copy off and
   * the ranks outnumber the cores, calls of 8 MiB up to 16 MiB on the node
   * (bytes per peer x ranks^2), 3-8 ranks */
  {
    fresh(&s);
    s.nranks = 8;
    s.ncores = 2;
    s.cma_slow = 1;
    CHECK(cma_a2a_use(&s, 8, 128 << 10) && cma_a2a_use(&s, 8, (256 << 10) - 1),
          "8 ranks on 2 cores: no single copy of 128-256 KiB pieces");
    CHECK(!cma_a2a_use(&s, 8, (128 << 10) - 1) && !cma_a2a_use(&s, 8, 256 << 10),
          "8 ranks on 2 cores: single copy outside 8-16 MiB on the node");
    s.nranks = 4;
    CHECK(cma_a2a_use(&s, 4, 512 << 10) && !cma_a2a_use(&s, 4, (512 << 10) - 1) &&
              !cma_a2a_use(&s, 4, MIB),
          "4 ranks on 2 cores: not 512 KiB-1 MiB pieces alone");
    s.nranks = 3;
    CHECK(cma_a2a_use(&s, 3, MIB) && !cma_a2a_use(&s, 3, 2 * MIB),
          "3 ranks on 2 cores: not 1 MiB pieces alone");
    s.nranks = 9;
    CHECK(!cma_a2a_use(&s, 9, 128 << 10), "single copy on 9 ranks");
    s.nranks = 16; /* 8 MiB on the node: 32 KiB pieces */
    CHECK(!cma_a2a_use(&s, 16, 32 << 10), "single copy on 16 ranks");
    s.nranks = 4;
    s.ncores = 4;
    CHECK(!cma_a2a_use(&s, 4, 512 << 10), "single copy where the ranks fit the cores");
    s.ncores = 2;
    s.cma_slow = 0;
    CHECK(!cma_a2a_use(&s, 4, 512 << 10), "single copy where the peers cannot be read");
    s.cma_a2a_min = 16 << 10; /* single copy on: from its threshold */
    CHECK(cma_a2a_use(&s, 4, 16 << 10) && !cma_a2a_use(&s, 4, (16 << 10) - 1),
          "AlltoAll's threshold");
  }

  /* the start the attach probe's round trip gives (shm_handoff_seed):
   * ordinary at 85 ns and at 250; streaming above, with the first retry
   * 80 ms after the first copy into the segment or the first choice of
   * single copy by the mode; no verdict above 5 us
   * (a rank held off) or with the variable set */
  {
    const double rts[] = {85e-9, 250e-9, 0, 6e-6};
    for (int i = 0; i < 4; i++) {
      fresh(&s);
      CHECK(!shm_handoff_seed(&s, rts[i]) && !s.nt_slow, "a round trip of %.0f ns streams",
            rts[i] * 1e9);
    }
    fresh(&s);
    s.nt_auto = 0;
    CHECK(!shm_handoff_seed(&s, 340e-9) && !s.nt_slow, "the variable set, the probe decided");
    /* QCCL_SHM_HANDOFF_PROBE_NS replaces the 250 ns */
    fresh(&s);
    s.nt_probe_s = 400e-9;
    CHECK(!shm_handoff_seed(&s, 340e-9), "340 ns streams under a 400 ns threshold");
    s.nt_probe_s = 0;
    CHECK(shm_handoff_seed(&s, 85e-9), "85 ns does not stream under a threshold of 0");
    fresh(&s);
    CHECK(shm_handoff_seed(&s, 340e-9), "a round trip of 340 ns does not stream");
    CHECK(shm_handoff_slow(&s, 1e9) && shm_handoff_streams(&s, MIB, 2 * MIB, 1e9),
          "seeded: a retry came before the first copy");
    char a[4096], b[4096];
    memset(a, 1, sizeof a);
    shm_handoff_copy(&s, b, a, sizeof a, 2 * MIB); /* sampled or not, the retry's clock starts */
    CHECK(s.nt_retry_at > 0 && s.nt_retry_at < 1e300, "the first copy set no retry");
    double due = s.nt_retry_at;
    CHECK(shm_handoff_slow(&s, due - 0.001) && !shm_handoff_slow(&s, due),
          "seeded: the retry is not due at %.3f s", due);
    /* a slow retry then waits the longest, 80 ms */
    shm_handoff_timed(&s, MIB, due, SLOW);
    CHECK(s.nt_slow && s.nt_retry_at > due + 0.079 && s.nt_retry_at < due + 0.081,
          "seeded, a slow retry: the next %.3f s on, not 80 ms", s.nt_retry_at - due);
    /* or the first choice of single copy by the mode, where a rank's calls
     * copy nothing into the segment (blocks read single copy, cells) */
    fresh(&s);
    s.cma_slow = 1;
    s.peers_readable = 1;
    CHECK(shm_handoff_seed(&s, 340e-9), "a round trip of 340 ns does not stream");
    CHECK(cma_mode_use(&s, 2, 2, MIB, 5.0), "seeded: no single copy at the first call");
    CHECK(s.nt_retry_at > 5.079 && s.nt_retry_at < 5.081,
          "seeded: the first cma_mode_use set the retry %.3f s on, not 80 ms", s.nt_retry_at - 5.0);
    CHECK(cma_mode_use(&s, 2, 2, MIB, 5.07) && !cma_mode_use(&s, 2, 2, MIB, 5.081),
          "seeded: single copy is not staged at the retry 80 ms on");
  }

  /* the bytes, ordinary and streaming, with guards, at a size that is
   * sampled and one that is always timed */
  const size_t sizes[] = {(2 << 10) + 5, MIB + 37};
  for (int z = 0; z < 2; z++) {
    size_t n = sizes[z];
    unsigned char* src = malloc(n);
    unsigned char* dst = malloc(n + 128);
    for (size_t i = 0; i < n; i++) src[i] = (unsigned char)(i * 131 + 7);
    for (int way = 0; way < 2; way++) {
      fresh(&s);
      if (way) {
        s.nt_slow = 1;
        s.nt_retry_at = 1e300;
      }
      for (int rep = 0; rep < 20; rep++) {
        memset(dst, 0xee, n + 128);
        shm_handoff_copy(&s, dst + 64, src, n, 2 * MIB);
        CHECK(memcmp(dst + 64, src, n) == 0, "%s copy of %zu differs",
              way ? "streaming" : "ordinary", n);
        for (size_t i = 0; i < 64; i++)
          CHECK(dst[i] == 0xee && dst[64 + n + i] == 0xee, "%s copy of %zu wrote outside at %zu",
                way ? "streaming" : "ordinary", n, i);
      }
    }
    free(src);
    free(dst);
  }
  return check_verdict();
}
