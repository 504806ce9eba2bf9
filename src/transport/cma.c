/*
 * cma.c - single-copy reads from a peer's memory and writes into it (see
 * cma.h): the probe at segment open, and the reads and writes of a
 * single-copy call.
 *
 * process_vm_readv and process_vm_writev may copy less than asked (a fault
 * in the middle of the range, or more than the kernel moves in one call):
 * cma_move loops until every byte is there. ESRCH means the
 * peer's process is gone (or a zombie whose memory is already released):
 * qcclRemoteError naming the rank. Any failure while another rank has
 * aborted the segment (a failing rank may free its buffer under a reader
 * or writer) is that rank's failure: qcclRemoteError.
 */
#include "transport/cma.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "core/env.h"
#include "core/log.h"
#include "core/socket.h"

/* Moves bytes between local and remote address at of pid: reads them
 * into local, or with write from local to at; 0 or an errno. */
static int cma_move(int pid, char* local, uintptr_t at, size_t bytes, int write) {
  while (bytes > 0) {
    struct iovec l = {local, bytes}, r = {(void*)at, bytes};
    ssize_t n =
        write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EFAULT;
    local += n;
    at += (uintptr_t)n;
    bytes -= (size_t)n;
  }
  return 0;
}

/* Reads bytes at remote address src of pid into dst; 0 or an errno. */
static int cma_copy(int pid, uintptr_t src, char* dst, size_t bytes) {
  return cma_move(pid, dst, src, bytes, 0);
}

/* The speed of process_vm_readv over memcpy's (cma.h, the speed probe):
 * CMA_SPEED_BYTES from the next rank's probe buffer, and from this rank's
 * own, each the best of CMA_SPEED_REPS alternating runs; 0 if a read
 * fails. */
static double cma_speed(shm_t* s) {
  int peer = (s->rank + 1) % s->nranks;
  char* dst = aligned_alloc(SHM_LINE, CMA_SPEED_BYTES);
  if (dst == NULL) return 0;
  memset(dst, 0, CMA_SPEED_BYTES);
  double best_cma = 1e30, best_copy = 1e30;
  for (int i = 0; i < CMA_SPEED_REPS; i++) {
    double t0 = clock_now();
    int e = cma_copy(s->ctrl[peer].pid, (uintptr_t)s->ctrl[peer].cma_probe, dst, CMA_SPEED_BYTES);
    double t1 = clock_now();
    memcpy(dst, s->cma_buf, CMA_SPEED_BYTES);
    __asm__ __volatile__("" : : "r"(dst) : "memory"); /* the copy is not dead */
    double t2 = clock_now();
    if (e != 0) {
      free(dst);
      return 0;
    }
    if (t1 - t0 < best_cma) best_cma = t1 - t0;
    if (t2 - t1 < best_copy) best_copy = t2 - t1;
  }
  free(dst);
  return best_cma > 0 ? best_copy / best_cma : 1;
}

qcclResult_t cma_probe(shm_t* s, bootstrap_t* boot, const shm_t* like) {
  int w = s->nranks;
  s->cma_min = s->cma_a2a_min = 0;
  s->cma_slow = 0;
  s->cma_mode_on = 0;
  s->cma_mode_count = 0;
  int64_t min, every;
  QCCL_CHECK(env_get_int("QCCL_CMA_MODE_EVERY", 0, 0, 1000000, &every));
  s->cma_mode_every = (unsigned)every;
  int chosen = env_get("QCCL_CMA_MIN_BYTES") != NULL;
  QCCL_CHECK(env_get_size("QCCL_CMA_MIN_BYTES",
                          shm_roomy(s) ? CMA_MIN_BYTES_ROOMY : CMA_MIN_BYTES_DEFAULT, 0,
                          (int64_t)1 << 50, &min));
  /* read every peer's probe word (published before the attach barrier);
   * also what decides whether peers may map each other's qcclMemAlloc
   * memory (shm_map.c: /proc/<pid>/fd needs the same permission) */
  int64_t ok = 1;
  s->peers_readable = 0;
  for (int j = 0; j < w && ok; j++) {
    if (j == s->rank) continue;
    uint64_t v = 0;
    int e = cma_copy(s->ctrl[j].pid, (uintptr_t)s->ctrl[j].cma_probe, (char*)&v, sizeof v);
    if (e != 0 || v != s->ctrl[j].cma_value) {
      QCCL_INFO(LOG_SHM,
                "rank %d cannot read rank %d's memory (pid %d): %s; single copy and "
                "qcclMemAlloc direct reads off",
                s->rank, j, s->ctrl[j].pid,
                e ? strerror(e) : "wrong word (another pid namespace?)");
      ok = 0;
    }
  }
  /* the speed of the kernel's copy, in thousandths of memcpy's; -1: not
   * probed (the variable chose, or single copy is off anyway) */
  int64_t speed = -1;
  if (ok && min > 0 && !chosen && like == NULL) speed = (int64_t)(cma_speed(s) * 1000 + 0.5);
  int64_t* all = calloc((size_t)w * 4, sizeof *all);
  if (!all) return QCCL_ERR(qcclSystemError, "out of memory");
  all[4 * s->rank] = ok;
  all[4 * s->rank + 1] = min;
  all[4 * s->rank + 2] = speed;
  all[4 * s->rank + 3] = chosen;
  /* agree: single copy when every rank can read every other, none turned
   * it off and the slowest kernel copy is fast enough; the largest
   * threshold wins. Also the barrier after which no peer reads this rank's
   * probe buffer. */
  qcclResult_t r = boot_allgather(boot, all, 4 * sizeof *all);
  free(s->cma_buf);
  s->cma_buf = NULL;
  if (r == qcclSuccess) {
    int64_t agreed = min, readable = 1, slowest = -1, any_chosen = 0;
    for (int j = 0; j < w; j++) {
      if (!all[4 * j]) readable = 0;
      if (!all[4 * j] || all[4 * j + 1] == 0) agreed = 0;
      if (agreed > 0 && all[4 * j + 1] > agreed) agreed = all[4 * j + 1];
      if (all[4 * j + 2] >= 0 && (slowest < 0 || all[4 * j + 2] < slowest))
        slowest = all[4 * j + 2];
      if (all[4 * j + 3]) any_chosen = 1;
    }
    double ratio = (double)slowest / 1000;
    s->peers_readable = (int)readable;
    if (like != NULL) {
      /* the thresholds of like, where this segment's ranks can all read
       * each other (the same on every rank: like's were agreed, readable
       * is) */
      s->cma_min = readable ? like->cma_min : 0;
      s->cma_a2a_min = readable ? like->cma_a2a_min : 0;
      s->cma_slow = readable && like->cma_slow;
      QCCL_INFO(LOG_SHM,
                "rank %d: single copy (CMA) %s from %zu bytes per peer (AlltoAll from %zu) as "
                "the communicator's lane 0 decided, no probe of its own",
                s->rank, s->cma_min > 0 ? "on" : "off", s->cma_min, s->cma_a2a_min);
      free(all);
      return qcclSuccess;
    }
    if (agreed > 0 && slowest >= 0 && ratio < CMA_SPEED_MIN) {
      QCCL_INFO(LOG_SHM,
                "rank %d: single copy (CMA) off: the kernel's copy ran at %.2f of memcpy's speed "
                "(below %.2f, two copies through the segment are faster; QCCL_CMA_MIN_BYTES "
                "set overrides)",
                s->rank, ratio, CMA_SPEED_MIN);
      s->cma_slow = !any_chosen; /* a rank's QCCL_CMA_MIN_BYTES decides */
      if (s->cma_slow && s->nranks >= CMA_SCATTER_CROWDED_PER_CORE * s->ncores)
        QCCL_INFO(LOG_SHM,
                  "rank %d: %d ranks on %d cores: Scatter still reads single copy in calls "
                  "from %zu bytes in all (blocks from %zu)",
                  s->rank, s->nranks, s->ncores, CMA_SCATTER_CROWDED_MIN_TOTAL,
                  CMA_MIN_BYTES_ROOMY);
      if (s->cma_slow && !shm_roomy(s) && s->nranks <= CMA_A2A_CROWDED_MAX_RANKS)
        QCCL_INFO(LOG_SHM,
                  "rank %d: %d ranks on %d cores: AlltoAll still reads single copy in calls of "
                  "%zu up to %zu bytes on the node (bytes per peer x ranks^2)",
                  s->rank, s->nranks, s->ncores, CMA_A2A_CROWDED_MIN_TOTAL,
                  CMA_A2A_CROWDED_MAX_TOTAL);
      free(all);
      return qcclSuccess;
    }
    s->cma_min = (size_t)agreed;
    s->cma_a2a_min =
        any_chosen || (size_t)agreed < CMA_MIN_BYTES_ROOMY ? (size_t)agreed : CMA_MIN_BYTES_ROOMY;
    char speed_txt[64] = "speed not probed";
    char fit_txt[160] = "exchanges";
    if (!shm_roomy(s))
      snprintf(fit_txt, sizeof fit_txt,
               "sends of calls that also receive, taken back once the call waited for nothing "
               "else for %.0f us: this host is oversubscribed",
               CMA_P2P_TAKEBACK_S * 1e6);
    if (slowest >= 0)
      snprintf(speed_txt, sizeof speed_txt, "kernel copy at %.2f of memcpy's speed", ratio);
    QCCL_INFO(
        LOG_SHM,
        "rank %d: single copy (CMA) %s (%s), from %lld bytes per peer (AlltoAll from %zu, Scatter "
        "(up to %zu per block on 2 ranks, above that half of the block when the root's own "
        "block is copied); AllGather on %d ranks or fewer; Gather: the others "
        "write into the root's buffer, on 2 ranks (above %zu-byte blocks half of the "
        "block, staged the rest, or all staged in place), on more once they send %zu in all; "
        "Reduce on 2 ranks in calls of %zu-%zu bytes; Broadcast on 2 ranks: the "
        "whole root buffer in calls of %zu-%zu bytes, above that half of an out-of-place call; "
        "sends larger than the pair's %zu-byte ring, and %s); qcclMemAlloc buffers are read in "
        "place",
        s->rank, agreed > 0 ? "on" : "off", speed_txt, (long long)agreed, s->cma_a2a_min,
        CMA_SCATTER_MAX2_BYTES, CMA_ALLGATHER_MAX_RANKS, CMA_GATHER_SPLIT_MIN2_BYTES,
        CMA_GATHER_PUSH_MIN_MOVED, CMA_REDUCE_MIN2_BYTES, CMA_REDUCE_MAX2_BYTES,
        CMA_BROADCAST_MIN_BYTES, CMA_BROADCAST_MAX_BYTES, s->chan_bytes, fit_txt);
  }
  free(all);
  return r;
}

/* reg set to "read buf single copy"; 1. */
static int cma_publish(const void* buf, shm_reg_t* reg) {
  reg->id = SHM_REG_CMA;
  reg->off = (uint64_t)(uintptr_t)buf;
  reg->fd = -1;
  reg->tag = 0;
  return 1;
}

int cma_offer(const shm_t* s, const void* buf, size_t block, size_t max, shm_reg_t* reg) {
  if (!cma_use(s, block) || (max > 0 && block > max)) return 0;
  return cma_publish(buf, reg);
}

int cma_scatter_offer(const shm_t* s, const void* buf, int nranks, size_t block, shm_reg_t* reg) {
  return cma_scatter_use(s, nranks, block) && cma_publish(buf, reg);
}

int cma_a2a_offer(const shm_t* s, const void* buf, int nranks, size_t block, shm_reg_t* reg) {
  return cma_a2a_use(s, nranks, block) && cma_publish(buf, reg);
}

int cma_mode_use(shm_t* s, int nranks, int max_ranks, size_t block, double now) {
  if (nranks < 2 || nranks > max_ranks || block < CMA_MODE_MIN_BYTES ||
      block > (nranks > 2 ? CMA_MODE_MAX_MORE_BYTES : CMA_MODE_MAX_BYTES))
    return 0;
  if (s->cma_mode_every > 0) /* tests: rank r at the calls r modulo k */
    return s->peers_readable &&
           s->cma_mode_count++ % s->cma_mode_every == (unsigned)s->rank % s->cma_mode_every;
  /* the mode (logged when it changes), and the call's choice: staged
   * when the handoffs' timed retry is due (counted from here where the
   * probe set the mode: shm_handoff_begin) */
  shm_handoff_begin(s, now);
  int mode = s->cma_slow && s->nt_auto && s->nt_slow;
  int on = mode && shm_handoff_slow(s, now);
  if (mode != s->cma_mode_on) {
    s->cma_mode_on = mode;
    QCCL_INFO(
        LOG_SHM,
        "rank %d: %s: AlltoAll's and AllGather's blocks of %zu-%zu bytes on 2 ranks, "
        "AlltoAll's to %zu on 3-%d, %s",
        s->rank,
        mode ? "handoffs into the segment stream (no shared cache)"
             : "handoffs into the segment no longer stream",
        CMA_MODE_MIN_BYTES, CMA_MODE_MAX_BYTES, CMA_MODE_MAX_MORE_BYTES, CMA_MODE_A2A_MAX_RANKS,
        mode ? "now read single copy (staged at the handoffs' timed retries)" : "staged again");
  }
  return on;
}

int cma_mode_offer(shm_t* s, const void* buf, int nranks, int max_ranks, size_t block,
                   shm_reg_t* reg) {
  return cma_mode_use(s, nranks, max_ranks, block, clock_now()) && cma_publish(buf, reg);
}

/* The error of a failed single-copy transfer with peer: another rank's
 * failure when the segment is aborted, the peer's death, else the errno. */
static qcclResult_t cma_failed(shm_t* s, int peer, int e, const char* what, size_t bytes,
                               uintptr_t at) {
  int pid = s->ctrl[peer].pid;
  /* a rank that failed (saw a dead peer, say) sets the abort flag before
   * it returns and may then free the buffer under this read: EFAULT here
   * is its failure, not ours */
  qcclResult_t r = shm_check_peers(s, -1);
  if (r != qcclSuccess) return r;
  if (e == ESRCH)
    return QCCL_ERR(qcclRemoteError, "rank %d (pid %d) died while rank %d used its buffer", peer,
                    pid, s->rank);
  return QCCL_ERRNO(qcclSystemError, e, "rank %d: %s of %zu bytes at %#lx of rank %d (pid %d)",
                    s->rank, what, bytes, (unsigned long)at, peer, pid);
}

qcclResult_t cma_read_from(shm_t* s, int peer, uintptr_t src, void* dst, size_t bytes) {
  int e = cma_copy(s->ctrl[peer].pid, src, dst, bytes);
  return e == 0 ? qcclSuccess : cma_failed(s, peer, e, "process_vm_readv", bytes, src);
}

qcclResult_t cma_write_to(shm_t* s, int peer, uintptr_t dst, const void* src, size_t bytes) {
  int e = cma_move(s->ctrl[peer].pid, (char*)(uintptr_t)src, dst, bytes, 1);
  return e == 0 ? qcclSuccess : cma_failed(s, peer, e, "process_vm_writev", bytes, dst);
}
