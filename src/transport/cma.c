/*
 * cma.c - single-copy reads from a peer's memory (see cma.h): the probe at
 * segment open, and the begin / read / end steps of a single-copy call.
 *
 * process_vm_readv may copy less than asked (a fault in the middle of the
 * range, or more than the kernel moves in one call): cma_read loops until
 * every byte is there. ESRCH means the peer's process is gone (or a zombie
 * whose memory is already released): qcclRemoteError naming the rank. Any
 * failure while another rank has aborted the segment (a failing rank may
 * free its buffer under a reader) is that rank's failure: qcclRemoteError.
 */
#include "transport/cma.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "core/env.h"
#include "core/log.h"

/* Reads bytes at remote address src of pid into dst; 0 or an errno. */
static int cma_copy(int pid, uintptr_t src, char* dst, size_t bytes) {
  while (bytes > 0) {
    struct iovec l = {dst, bytes}, r = {(void*)src, bytes};
    ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EFAULT;
    dst += n;
    src += (uintptr_t)n;
    bytes -= (size_t)n;
  }
  return 0;
}

qcclResult_t cma_probe(shm_t* s, bootstrap_t* boot) {
  int w = s->nranks;
  s->cma_min = 0;
  int64_t min;
  QCCL_CHECK(env_get_size("QCCL_CMA_MIN_BYTES", CMA_MIN_BYTES_DEFAULT, 0, (int64_t)1 << 50, &min));
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
  /* agree: single copy when every rank can read every other and none
   * turned it off; the largest threshold wins */
  int64_t* all = calloc((size_t)w * 2, sizeof *all);
  if (!all) return QCCL_ERR(qcclSystemError, "out of memory");
  all[2 * s->rank] = ok;
  all[2 * s->rank + 1] = min;
  qcclResult_t r = boot_allgather(boot, all, 2 * sizeof *all);
  if (r == qcclSuccess) {
    int64_t agreed = min, readable = 1;
    for (int j = 0; j < w; j++) {
      if (!all[2 * j]) readable = 0;
      if (!all[2 * j] || all[2 * j + 1] == 0) agreed = 0;
      if (agreed > 0 && all[2 * j + 1] > agreed) agreed = all[2 * j + 1];
    }
    s->cma_min = (size_t)agreed;
    s->peers_readable = (int)readable;
    QCCL_INFO(
        LOG_SHM,
        "rank %d: single copy (CMA) %s, from %lld bytes per peer (AlltoAll, Scatter (up to "
        "%zu per block on 2 ranks); AllGather on %d ranks or fewer, up to %zu bytes per block; "
        "Gather %zu-%zu bytes per block; Reduce on 2 ranks up to %zu bytes; sends larger than the "
        "%zu-byte ring, and exchanges%s); qcclMemAlloc "
        "buffers are read in place",
        s->rank, agreed > 0 ? "on" : "off", (long long)agreed, CMA_SCATTER_MAX2_BYTES,
        CMA_ALLGATHER_MAX_RANKS, CMA_ALLGATHER_MAX_BYTES, CMA_GATHER_MIN_BYTES,
        CMA_GATHER_MAX_BYTES, CMA_REDUCE_MAX_BYTES, s->chan_bytes,
        s->roomy ? "" : " larger than the ring: this host is oversubscribed");
  }
  free(all);
  return r;
}

int cma_offer(const shm_t* s, const void* buf, size_t block, size_t max, shm_reg_t* reg) {
  if (!cma_use(s, block) || (max > 0 && block > max)) return 0;
  reg->id = SHM_REG_CMA;
  reg->off = (uint64_t)(uintptr_t)buf;
  reg->fd = -1;
  return 1;
}

qcclResult_t cma_read_from(shm_t* s, int peer, uintptr_t src, void* dst, size_t bytes) {
  int pid = s->ctrl[peer].pid;
  int e = cma_copy(pid, src, dst, bytes);
  if (e == 0) return qcclSuccess;
  /* a rank that failed (saw a dead peer, say) sets the abort flag before
   * it returns and may then free the buffer under this read: EFAULT here
   * is its failure, not ours */
  qcclResult_t r = shm_check_peers(s, -1);
  if (r != qcclSuccess) return r;
  if (e == ESRCH)
    return QCCL_ERR(qcclRemoteError, "rank %d (pid %d) died while rank %d read its buffer", peer,
                    pid, s->rank);
  return QCCL_ERRNO(qcclSystemError, e,
                    "rank %d: process_vm_readv of %zu bytes at %#lx from rank %d (pid %d)", s->rank,
                    bytes, (unsigned long)src, peer, pid);
}
