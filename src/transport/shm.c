/*
 * shm.c - the node's shared-memory segment: creation, attachment, layout
 * and the waits on step counters (see shm.h for the protocol).
 *
 * Space is reserved with posix_fallocate when the segment is made, so a
 * full /dev/shm is a clear error at init instead of a SIGBUS later. A wait
 * polls the peer's step with the spin/yield/nap back-off of core/wait.c
 * (without the spin when the peer last waited on this rank's CPU); every
 * ~20 ms it checks the abort flag's owner, whether the peers it waits on
 * still exist (kill(pid, 0), and not a zombie), and the timeout. At open,
 * cma_probe decides whether single-copy transfers are possible (cma.h).
 */
#include "transport/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/env.h"
#include "core/memreg.h"
#include "core/log.h"
#include "core/wait.h"
#include "transport/cma.h"

#define SHM_NAME_BYTES 64
#define SHM_HEADER_BYTES 4096
#define SHM_MAGIC 0x4d485351u /* "QSHM" */
#define SHM_MOVE_EVERY 0.001  /* seconds between moves off a shared CPU (shm_move_off) */
#define SHM_BALANCE_EVERY 64  /* waits between looks at the ranks' spread (shm_balance) */

typedef struct {
  uint32_t magic;
  int32_t nranks;
  uint64_t chunk_bytes;
  uint64_t chan_bytes;
  _Atomic int32_t abort_rank;
} shm_header_t;

static size_t shm_layout(shm_t* s) {
  size_t w = (size_t)s->nranks;
  size_t off = SHM_HEADER_BYTES;
  size_t ctrl = off;
  off += w * sizeof(shm_ctrl_t);
  off = (off + 4095) & ~(size_t)4095;
  size_t slots = off;
  off += w * 2 * s->chunk_bytes;
  size_t results = off;
  off += w * 2 * s->chunk_bytes;
  size_t chans = off;
  off += w * w * shm_chan_stride(s);
  size_t xch = off;
  off += w == 2 ? 2 * s->xch_bytes : 0;
  if (s->base) {
    s->abort_rank = &((shm_header_t*)s->base)->abort_rank;
    s->ctrl = (shm_ctrl_t*)(s->base + ctrl);
    s->slots = s->base + slots;
    s->results = s->base + results;
    s->chans = s->base + chans;
    s->xch = s->base + xch;
  }
  return off;
}

static qcclResult_t shm_map(const char* name, size_t bytes, int create, char** out) {
  int fd = shm_open(name, create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
  if (fd < 0) return QCCL_ERRNO(qcclSystemError, errno, "shm_open %s", name);
  int e;
  if (create) {
    if ((e = posix_fallocate(fd, 0, (off_t)bytes)) != 0) {
      close(fd);
      shm_unlink(name);
      return QCCL_ERRNO(qcclSystemError, e,
                        "cannot reserve %zu bytes of shared memory in /dev/shm for %s", bytes,
                        name);
    }
  } else {
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size != bytes) {
      close(fd);
      return QCCL_ERR(qcclInternalError, "shared segment %s has the wrong size", name);
    }
  }
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    if (create) shm_unlink(name);
    return QCCL_ERRNO(qcclSystemError, e, "mmap %s (%zu bytes)", name, bytes);
  }
  *out = p;
  return qcclSuccess;
}

/* Maps the segment's pages into this rank's page table at init. Each
 * process faults on a page of the segment the first time it touches it:
 * without this a communicator's first calls pay a fault per page they
 * reach, and a 4 KiB send/recv took 15-20 us until its ring had wrapped
 * once (its first ~60 calls; 1.5 us after, docs/PERF.md). The space is
 * already reserved (posix_fallocate), so nothing is allocated; the write
 * populate changes no byte, so a peer already sending is undisturbed. */
static void shm_populate_range(char* lo, char* hi) {
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
  uintptr_t a = (uintptr_t)lo & ~(uintptr_t)4095;
  if (madvise((void*)a, (size_t)(hi - (char*)a), MADV_POPULATE_WRITE) == 0) return;
  /* an older kernel: a read of each page maps it too (and writes nothing) */
  for (const volatile char* p = (char*)a; p < hi; p += 4096) (void)*p;
}

/* The header, the control lines, every slot and result (collectives read
 * every rank's), and of the send/recv rings only this rank's own: at 8
 * ranks 36 of the segment's 48 MiB (a standalone probe populated 48 MiB
 * in 12-17 ms here). */
static void shm_populate(shm_t* s) {
  shm_populate_range(s->base, s->chans);
  if (s->xch_bytes > 0) shm_populate_range(s->xch, s->xch + 2 * s->xch_bytes);
  size_t ring = shm_chan_stride(s);
  for (int j = 0; j < s->nranks; j++) {
    char* out = (char*)shm_chan_ctrl(s, s->rank, j);
    char* in = (char*)shm_chan_ctrl(s, j, s->rank);
    shm_populate_range(out, out + ring);
    if (j != s->rank) shm_populate_range(in, in + ring);
  }
}

static void shm_header_init(shm_t* s) {
  shm_header_t* h = (shm_header_t*)s->base;
  h->magic = SHM_MAGIC;
  h->nranks = s->nranks;
  h->chunk_bytes = s->chunk_bytes;
  h->chan_bytes = s->chan_bytes;
  atomic_store(&h->abort_rank, -1);
}

/* The segment without a name: rank 0 makes a memfd and says "fd <pid>
 * <fd>"; the others open it through /proc (core/memreg.h) and map it.
 * Nothing can be left behind, whoever is killed when. When some rank
 * cannot open another process's descriptors (a ptrace restriction),
 * every rank drops it and *named is set: the caller makes a named one. */
static qcclResult_t shm_attach_memfd(shm_t* s, bootstrap_t* boot, char* names, int* named) {
  qcclResult_t r;
  int rank = s->rank, w = s->nranks, mfd = -1, e = 0;
  int* oks = calloc((size_t)w, sizeof *oks);
  if (!oks) return QCCL_ERR(qcclSystemError, "out of memory");
  if (rank == 0) {
    QCCL_CHECK_GOTO(memreg_memfd_create("qccl-node", s->bytes, 1, &mfd), r, out);
    void* p = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (p == MAP_FAILED) {
      r = QCCL_ERRNO(qcclSystemError, errno, "mmap of the node segment (%zu bytes)", s->bytes);
      goto out;
    }
    s->base = p;
    shm_header_init(s);
    snprintf(names, SHM_NAME_BYTES, "fd %d %d", (int)getpid(), mfd);
  }
  QCCL_CHECK_GOTO(boot_allgather(boot, names, SHM_NAME_BYTES), r, out);
  names[SHM_NAME_BYTES - 1] = '\0';
  if (rank != 0) {
    int pid = 0, fd = -1, f;
    size_t size = 0;
    if (sscanf(names, "fd %d %d", &pid, &fd) != 2) {
      r = QCCL_ERR(qcclInternalError, "rank 0 sent a malformed segment handle");
      goto out;
    }
    e = memreg_memfd_open(pid, fd, &f, &size);
    if (e == 0 && size != s->bytes) {
      close(f);
      r = QCCL_ERR(qcclInvalidUsage,
                   "the node segment has %zu bytes, rank %d expects %zu (ranks disagree on "
                   "QCCL_SHM_CHUNK_BYTES, QCCL_SHM_P2P_BYTES, QCCL_SHM_P2P_CELL_BYTES or "
                   "QCCL_SHM_XCH_BYTES)",
                   size, rank, s->bytes);
      goto out;
    }
    if (e == 0) {
      void* p = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
      e = p == MAP_FAILED ? errno : 0;
      close(f);
      if (e == 0) s->base = p;
    }
    if (e != 0)
      QCCL_INFO(LOG_SHM, "rank %d cannot open rank 0's segment (/proc/%d/fd/%d): %s", rank, pid, fd,
                strerror(e));
  }
  /* every rank has mapped it (or failed to) after this exchange */
  oks[rank] = e == 0;
  QCCL_CHECK_GOTO(boot_allgather(boot, oks, sizeof *oks), r, out);
  *named = 0;
  for (int i = 0; i < w; i++)
    if (!oks[i]) *named = 1;
  if (*named) {
    QCCL_WARN(LOG_SHM, "a rank cannot open another's descriptors: the node segment gets a name");
    if (s->base) munmap(s->base, s->bytes);
    s->base = NULL;
  }
  r = qcclSuccess;
out:
  if (mfd >= 0) close(mfd); /* the mappings keep the memory */
  free(oks);
  return r;
}

/* The named segment (the fallback): rank 0 makes /qccl-<pid>-<random>, the
 * others open it; the name goes once every rank attached. */
static qcclResult_t shm_attach_named(shm_t* s, bootstrap_t* boot, char* names) {
  if (s->rank == 0) {
    uint64_t rnd;
    QCCL_CHECK(boot_random(&rnd, sizeof rnd));
    snprintf(names, SHM_NAME_BYTES, "/qccl-%d-%016llx", (int)getpid(), (unsigned long long)rnd);
    QCCL_CHECK(shm_map(names, s->bytes, 1, &s->base));
    shm_header_init(s);
  }
  QCCL_CHECK(boot_allgather(boot, names, SHM_NAME_BYTES));
  names[SHM_NAME_BYTES - 1] = '\0';
  if (s->rank != 0) QCCL_CHECK(shm_map(names, s->bytes, 0, &s->base));
  return qcclSuccess;
}

/* The places small calls stage in (shm_rot), in this rank's slots and
 * result areas, into its cache as a call's writes would leave them: else
 * a communicator's first calls find them in memory (1 KiB AllReduce:
 * 2.3-2.5 us a call over its first 12 calls, 1.0-1.1 warmed). After the
 * CMA probe, whose reads would push them out again. The places of 4 KiB
 * calls, the smallest step. */
static void shm_warm(shm_t* s) {
  size_t span = shm_rot_span(s, SHM_ROT_STEP);
  for (uint64_t g = 0; g < 2; g++)
    for (size_t o = 0; o < span; o += SHM_LINE) {
      (void)*(volatile char*)(shm_slot(s, s->rank, g) + o);
      (void)*(volatile char*)(shm_result(s, s->rank, g) + o);
    }
}

qcclResult_t shm_open_segment(bootstrap_t* boot, double timeout, int ncores, const shm_t* like,
                              shm_t** out) {
  qcclResult_t r;
  int rank = boot_rank(boot), w = boot_nranks(boot);
  char* names = calloc((size_t)w, SHM_NAME_BYTES);
  shm_t* s = calloc(1, sizeof *s);
  /* and p2p_key, check_saw, p2p_hold */
  uint64_t* tail_seen = calloc(4 * (size_t)w, sizeof *tail_seen);
  if (!s || !names || !tail_seen) {
    free(s);
    free(names);
    free(tail_seen);
    return QCCL_ERR(qcclSystemError, "out of memory");
  }
  /* the rings: 1 MiB up to 4 ranks, where a message's lines are rarely
   * still in the reader's cache from the last time round (an exchange of
   * 64 KiB-1 MiB on 2 ranks, AMD guest, shared-cache mode: 1.4-3.5x the
   * busbw of 256 KiB rings; 4 ranks 1.2-1.9x at 1-4 MiB; docs/PERF.md,
   * "Every handoff follows the mode"); w*w of them, so smaller for more
   * ranks */
  int64_t chunk, chan;
  QCCL_CHECK_GOTO(env_get_size("QCCL_SHM_CHUNK_BYTES", 1 << 20, 4096, 1 << 30, &chunk), r, fail);
  QCCL_CHECK_GOTO(env_get_size("QCCL_SHM_P2P_BYTES",
                               w > 16  ? 1 << 16
                               : w > 4 ? 1 << 18
                                       : 1 << 20,
                               4096, 1 << 30, &chan),
                  r, fail);
  if (chan & (chan - 1)) {
    r = QCCL_ERR(qcclInvalidArgument, "QCCL_SHM_P2P_BYTES=%lld is not a power of two",
                 (long long)chan);
    goto fail;
  }
  s->rank = rank;
  s->nranks = w;
  s->tail_seen = tail_seen;
  s->p2p_key = tail_seen + w;
  s->check_saw = tail_seen + 2 * (size_t)w;
  s->p2p_hold = tail_seen + 3 * (size_t)w;
  s->chunk_bytes = (size_t)chunk & ~(size_t)63;
  s->chan_bytes = (size_t)chan;
  /* each channel's cell, a quarter of its ring: a message that fits goes
   * there while its sender holds one of the pair's two cells (shm_p2p.c) */
  int64_t cell;
  QCCL_CHECK_GOTO(env_get_size("QCCL_SHM_P2P_CELL_BYTES", chan / 4, 0, chan, &cell), r, fail);
  s->cell_bytes = (size_t)cell & ~(size_t)(SHM_LINE - 1);
  for (int j = 0; j < w; j++) s->p2p_hold[j] = j == rank ? 0 : shm_hold_take(0, 0);
  /* on 2 ranks, AllGather's and AlltoAll's blocks and one-handoff
   * AllReduces' inputs up to this size go through the exchange cells
   * (shm_xch.c) */
  int64_t xch;
  QCCL_CHECK_GOTO(env_get_size("QCCL_SHM_XCH_BYTES", 128 << 10, 0, 1 << 30, &xch), r, fail);
  if ((size_t)xch > s->chunk_bytes) xch = (int64_t)s->chunk_bytes; /* at most a slot */
  s->xch_bytes = w == 2 ? ((size_t)xch + SHM_LINE - 1) & ~(size_t)(SHM_LINE - 1) : 0;
  s->xch_hold = w == 2 ? shm_hold_take(0, rank) : 0; /* rank r holds cell r at first */
  int64_t every;
  QCCL_CHECK_GOTO(env_get_int("QCCL_SHM_XCH_SLOT_EVERY", 0, 0, 1000000, &every), r, fail);
  s->xch_slot_every = (unsigned)every;
  s->timeout = timeout;
  /* oversubscribed ranks yield at once: the data they wait for needs the
   * core. Others poll 10 us: on the Zen 3 guest a longer poll slowed the
   * peer it waited for (a 1 MiB AllGather took 71.6 us with 100 us of
   * polling, 63.8 with 10, 58.5 with none), while small calls keep their
   * latency with 10 (8 B-32 KiB, time / time at 100: SendRecv 0.99-1.02,
   * AllReduce 0.81-1.11; with 3 SendRecv lost 11-14 %; with none
   * AllReduce lost 1.4-2.3x):
   * docs/PERF.md, "The spin". */
  int64_t spin_us;
  QCCL_CHECK_GOTO(env_get_int("QCCL_SPIN_US", 10, 0, 1000000, &spin_us), r, fail);
  s->spin = w > ncores ? 0 : (uint32_t)spin_us;
  s->ncores = ncores > 0 ? ncores : 1;
  shm_rot_init(s); /* small calls' places (shm_rot) */
  /* unset, no call size forces streaming stores: each writer times its
   * ordinary copies and streams while they run slow (shm_handoff.c) */
  int64_t nt;
  QCCL_CHECK_GOTO(env_get_size("QCCL_SHM_HANDOFF_NT_BYTES", INT64_MAX, 0, INT64_MAX, &nt), r, fail);
  s->handoff_nt = (size_t)nt;
  s->nt_auto = env_get("QCCL_SHM_HANDOFF_NT_BYTES") == NULL;
  int64_t probe_ns;
  QCCL_CHECK_GOTO(env_get_int("QCCL_SHM_HANDOFF_PROBE_NS", (int64_t)(SHM_NT_PROBE_SLOW_S * 1e9), 0,
                              1000000, &probe_ns),
                  r, fail);
  s->nt_probe_s = (double)probe_ns * 1e-9;
  int64_t share;
  QCCL_CHECK_GOTO(env_get_size("QCCL_SHM_SHARE_BYTES", 8 << 20, 0, INT64_MAX, &share), r, fail);
  s->share_min = (size_t)share;
  s->bytes = shm_layout(s);

  int named = 0;
  QCCL_CHECK_GOTO(shm_attach_memfd(s, boot, names, &named), r, fail);
  if (named) QCCL_CHECK_GOTO(shm_attach_named(s, boot, names), r, fail_unlink);
  shm_layout(s);
  shm_populate(s);
  s->ctrl[rank].pid = (int32_t)getpid();
  s->ctrl[rank].alive = 1;
  atomic_store(&s->ctrl[rank].cpu, -1);
  /* the word peers read to test single copy (cma_probe) */
  s->cma_buf = w > 1 ? aligned_alloc(SHM_LINE, CMA_SPEED_BYTES) : NULL;
  if (w > 1 && s->cma_buf == NULL) {
    r = QCCL_ERR(qcclSystemError, "out of memory (CMA probe)");
    goto fail_unlink;
  }
  if (s->cma_buf) {
    memset(s->cma_buf, 0x5a, CMA_SPEED_BYTES);
    QCCL_CHECK_GOTO(boot_random(s->cma_buf, sizeof *s->cma_buf), r, fail_unlink);
    s->ctrl[rank].cma_probe = (uintptr_t)s->cma_buf;
    s->ctrl[rank].cma_value = *s->cma_buf;
  }
  uint64_t key;
  QCCL_CHECK_GOTO(boot_random(&key, sizeof key), r, fail_unlink);
  s->ctrl[rank].p2p_key = key | 1;
  /* every rank has attached after this barrier: a name can go */
  r = boot_barrier(boot);
  if (rank == 0 && named) shm_unlink(names);
  if (r != qcclSuccess) goto fail;
  for (int i = 0; i < w; i++) s->p2p_key[i] = s->ctrl[i].p2p_key;
  if (w > 1) QCCL_CHECK_GOTO(cma_probe(s, boot, like), r, fail);
  shm_handoff_probe(s, boot); /* the ranks left cma_probe's exchange together */
  shm_warm(s);
  QCCL_INFO(LOG_SHM, "rank %d attached %s: %zu bytes, chunk %zu, p2p ring %zu", rank, names,
            s->bytes, s->chunk_bytes, s->chan_bytes);
  free(names);
  *out = s;
  return qcclSuccess;
fail_unlink:
  if (rank == 0 && named) shm_unlink(names);
fail:
  if (s->base) munmap(s->base, s->bytes);
  free(s->cma_buf);
  free(s->tail_seen);
  free(s);
  free(names);
  return r;
}

qcclResult_t shm_scratch(shm_t* s, char** out) {
  if (s->scratch == NULL) s->scratch = aligned_alloc(SHM_LINE, s->chunk_bytes);
  if (s->scratch == NULL)
    return QCCL_ERR(qcclSystemError, "out of memory (%zu bytes of scratch)", s->chunk_bytes);
  *out = s->scratch;
  return qcclSuccess;
}

void shm_close(shm_t* s) {
  if (!s) return;
  shm_reg_unmap(s);
  if (s->base) {
    s->ctrl[s->rank].alive = 0;
    munmap(s->base, s->bytes);
  }
  free(s->scratch);
  for (int i = 0; i < s->p2p_nfree; i++) free(s->p2p_free[i]);
  free(s->tail_seen);
  free(s);
}

void shm_set_abort(shm_t* s) {
  int32_t none = -1;
  atomic_compare_exchange_strong(s->abort_rank, &none, s->rank);
}

/* 1 when pid is gone or a zombie. */
static int shm_pid_dead(int pid) {
  if (pid <= 0) return 0;
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char* p = strrchr(buf, ')');
  return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

qcclResult_t shm_check_peers(shm_t* s, int peer) {
  int a = atomic_load_explicit(s->abort_rank, memory_order_relaxed);
  if (a >= 0 && a != s->rank)
    return QCCL_ERR(qcclRemoteError, "rank %d aborted the communicator or saw a failure", a);
  for (int j = 0; j < s->nranks; j++) {
    if (j == s->rank || (peer >= 0 && j != peer)) continue;
    if (!s->ctrl[j].alive)
      return QCCL_ERR(qcclRemoteError, "rank %d left the communicator while rank %d waits for it",
                      j, s->rank);
    if (shm_pid_dead(s->ctrl[j].pid))
      return QCCL_ERR(qcclRemoteError, "rank %d (pid %d) died while rank %d waits for it", j,
                      s->ctrl[j].pid, s->rank);
  }
  return qcclSuccess;
}

static int shm_check_differs(shm_t* s);

/* Moves this rank to CPU to (from cpu) by narrowing its affinity to it
 * and restoring mask at once (the user's mask stays as it was); publishes
 * where it runs. 1 when it moved. */
static int shm_move_to(shm_t* s, const cpu_set_t* mask, int to, int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(to, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) return 0;
  sched_setaffinity(0, sizeof *mask, mask);
  int now_cpu = sched_getcpu();
  atomic_store_explicit(&s->ctrl[s->rank].cpu, now_cpu, memory_order_relaxed);
  return now_cpu != cpu;
}

/* This rank shares CPU cpu with a peer it waits for although the node's
 * ranks fit its cores: yielding keeps it there, and the two take turns
 * at half speed until the balancer moves one (tens of ms; it happens
 * after ranks woke each other through sockets, e.g. right after a lane
 * was made: 1 MiB AllReduce and AllGather ran at 0.4-0.6 of their speed
 * for the first ~10 ms). So it moves itself to an allowed CPU that no
 * peer of the segment last waited on, by narrowing its affinity to that
 * CPU and restoring it at once (the user's mask stays as it was). At most
 * every SHM_MOVE_EVERY per segment, so that a CPU shared for good (other
 * load) costs little. Returns 1 when it moved. */
static int shm_move_off(shm_t* s, int cpu) {
  double now = clock_now();
  if (now < s->next_move) return 0;
  s->next_move = now + SHM_MOVE_EVERY;
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0 || CPU_COUNT(&mask) < 2) return 0;
  int to = -1;
  for (int c = 0; c < CPU_SETSIZE && to < 0; c++) {
    if (c == cpu || !CPU_ISSET(c, &mask)) continue;
    int used = 0;
    for (int k = 0; k < s->nranks && !used; k++)
      used = k != s->rank && atomic_load_explicit(&s->ctrl[k].cpu, memory_order_relaxed) == c;
    if (!used) to = c;
  }
  return to >= 0 && shm_move_to(s, &mask, to, cpu);
}

/* Where the node's ranks outnumber its cores the scheduler can leave them
 * unevenly spread, and for good: 3 of 4 ranks on one of 2 CPUs in about
 * a third of the runs on the 2-vCPU Xeon guest, every call then going at
 * the pace of the crowded CPU (a 4-rank 1 MiB SendRecv 330-345 us a call
 * against 185-204 with two ranks on each, pinned either way; docs/PERF.md,
 * "Sends that may be taken back"). So a waiting rank whose CPU holds at
 * least two ranks more than an allowed CPU with the fewest (as the ranks
 * last published where they wait) moves there, at most every
 * SHM_MOVE_EVERY, and looks at all only every SHM_BALANCE_EVERY waits.
 * Ranks that share a CPU run one at a time, so two of them never decide
 * at once on the same counts. */
static void shm_balance(shm_t* s, int cpu) {
  if (++s->balance_tick % SHM_BALANCE_EVERY != 0) return;
  double now = clock_now();
  if (now < s->next_move) return;
  s->next_move = now + SHM_MOVE_EVERY;
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0 || CPU_COUNT(&mask) < 2) return;
  int here = 0;
  for (int k = 0; k < s->nranks; k++)
    here += k == s->rank || atomic_load_explicit(&s->ctrl[k].cpu, memory_order_relaxed) == cpu;
  int to = -1, fewest = here - 1;
  for (int c = 0; c < CPU_SETSIZE && fewest > 0; c++) {
    if (c == cpu || !CPU_ISSET(c, &mask)) continue;
    int n = 0;
    for (int k = 0; k < s->nranks && n < fewest; k++)
      n += k != s->rank && atomic_load_explicit(&s->ctrl[k].cpu, memory_order_relaxed) == c;
    if (n < fewest) { /* at least two fewer than here */
      to = c;
      fewest = n;
    }
  }
  if (to >= 0 && shm_move_to(s, &mask, to, cpu))
    QCCL_TRACE(LOG_SHM, "rank %d moved from CPU %d (%d ranks) to CPU %d (%d)", s->rank, cpu, here,
               to, fewest);
}

/* The spin before a rank that waits for the ranks in [lo, hi) yields: a
 * peer that last ran on this CPU cannot progress while this rank spins
 * (ranks are not bound by default, and the scheduler often puts two of
 * them on one CPU of a loaded host), so none then, unless this rank could
 * move to a free CPU. Publishes where this rank runs. */
/* Stores cpu in this rank's control line only when it changed: the line
 * holds the step the peers poll, and a store takes it from their caches. */
static void shm_publish_cpu(shm_t* s, int cpu) {
  if (atomic_load_explicit(&s->ctrl[s->rank].cpu, memory_order_relaxed) != cpu)
    atomic_store_explicit(&s->ctrl[s->rank].cpu, cpu, memory_order_relaxed);
}

static uint32_t shm_spin_among(shm_t* s, int lo, int hi) {
  int cpu = sched_getcpu();
  shm_publish_cpu(s, cpu);
  int shared = 0;
  for (int k = lo; k < hi && !shared; k++)
    shared = k != s->rank && atomic_load_explicit(&s->ctrl[k].cpu, memory_order_relaxed) == cpu;
  if (shared && shm_roomy(s) && shm_move_off(s, cpu)) shared = 0;
  if (!shm_roomy(s)) shm_balance(s, cpu);
  return shared ? 0 : s->spin;
}

uint32_t shm_spin_for(shm_t* s, int peer) {
  return shm_spin_among(s, peer, peer + 1);
}

qcclResult_t shm_test_short(shm_t* s, int j, int hi, uint64_t step, int check) {
  int a = atomic_load_explicit(s->abort_rank, memory_order_acquire);
  if (a >= 0) {
    /* a rank whose call ended may abort its communicator at once (a local
     * act): what it saw posted before (acquire) is posted here too, so a
     * wait it would have passed still passes */
    while (j < hi && shm_counter(s, j, check, step) >= step) j++;
    if (j == hi) return qcclSuccess;
    return QCCL_ERR(qcclRemoteError, "rank %d aborted the communicator or saw a failure", a);
  }
  s->wait_j = j;
  s->wait_hi = hi;
  s->wait_step = step;
  s->wait_check = check;
  return qcclInProgress;
}

uint32_t shm_wait_spin(shm_t* s) {
  return shm_spin_among(s, s->wait_j, s->wait_hi);
}

qcclResult_t shm_wait_check(shm_t* s, double idle) {
  int j = s->wait_j, hi = s->wait_hi, check = s->wait_check;
  uint64_t step = s->wait_step;
  if (s->check_watch && shm_check_differs(s))
    return QCCL_ERR(qcclInvalidUsage, "rank %d: a peer's call differs from this one", s->rank);
  if (s->watch) QCCL_CHECK(s->watch(s->watch_arg));
  qcclResult_t r = shm_check_peers(s, j);
  if (r != qcclSuccess) {
    /* the peer may have posted its step and then left (a rank that
     * destroys its communicator right after a call): that is no error */
    while (j < hi && shm_counter(s, j, check, step) >= step) j++;
    if (j == hi) {
      err_clear();
      return qcclSuccess;
    }
    return r;
  }
  if (idle > s->timeout) {
    if (check == SHM_CHECK_SEQ)
      return QCCL_ERR(qcclTimeout,
                      "rank %d waited %.1f s for rank %d to post its record of call %llu (the "
                      "agreement check: that rank has not begun the call); QCCL_TIMEOUT is %.1f s",
                      s->rank, idle, j, (unsigned long long)(step - 1), s->timeout);
    if (check == SHM_CHECK_DONE)
      return QCCL_ERR(qcclTimeout,
                      "rank %d waited %.1f s for rank %d to compare the records of call %llu "
                      "(the agreement check: it compared %llu calls); QCCL_TIMEOUT is %.1f s",
                      s->rank, idle, j, (unsigned long long)(step - 1),
                      (unsigned long long)shm_counter(s, j, check, step), s->timeout);
    return QCCL_ERR(qcclTimeout,
                    "rank %d waited %.1f s for rank %d (step %llu, it is at %llu); "
                    "QCCL_TIMEOUT is %.1f s",
                    s->rank, idle, j, (unsigned long long)step,
                    (unsigned long long)shm_counter(s, j, check, step), s->timeout);
  }
  return qcclSuccess;
}

void shm_check_publish(shm_t* s, uint64_t c, const uint64_t* rec, int watch) {
  shm_ctrl_t* me = &s->ctrl[s->rank];
  memcpy(me->check[c % SHM_CHECK_RING].rec, rec, sizeof me->check[0].rec);
  memcpy(s->check_mine, rec, sizeof s->check_mine);
  s->check_call = c;
  s->check_watch = watch;
  s->check_step0 = 3 * s->chunk_seq + 1;
  atomic_store_explicit(&me->check[c % SHM_CHECK_RING].call, c + 1, memory_order_release);
}

/* Whether rank j's record of the watched call is in its ring: posted, and
 * not yet replaced by a later call's (which a peer may post once this
 * rank compared the watched call: agree.c, "How far ahead"). */
static int shm_check_has(const shm_t* s, int j) {
  return shm_counter(s, j, SHM_CHECK_SEQ, s->check_call + 1) == s->check_call + 1;
}

/* 1 when a peer posted a record of the watched call that differs. */
static int shm_check_differs(shm_t* s) {
  for (int j = 0; j < s->nranks; j++) {
    if (j == s->rank || !shm_check_has(s, j)) continue;
    if (memcmp(s->ctrl[j].check[s->check_call % SHM_CHECK_RING].rec, s->check_mine,
               sizeof s->check_mine))
      return 1;
  }
  /* and the calls before it still in the ring (a disagreement in one
   * still pending here, a call that did not wait, leaves this one's
   * chunks misaligned; those compared agree): a record, this rank's or a
   * peer's, counts where its place still holds that call */
  const shm_ctrl_t* me = &s->ctrl[s->rank];
  uint64_t c = s->check_call, from = c >= SHM_CHECK_RING ? c - SHM_CHECK_RING + 1 : 0;
  for (uint64_t x = from; x < c; x++) {
    const __typeof__(me->check[0])* mine = &me->check[x % SHM_CHECK_RING];
    if (atomic_load_explicit(&mine->call, memory_order_relaxed) != x + 1) continue;
    for (int j = 0; j < s->nranks; j++) {
      if (j == s->rank || shm_counter(s, j, SHM_CHECK_SEQ, x + 1) != x + 1) continue;
      if (memcmp(s->ctrl[j].check[x % SHM_CHECK_RING].rec, mine->rec, sizeof mine->rec)) return 1;
    }
  }
  return 0;
}

int shm_check_peek(shm_t* s, uint64_t* recs) {
  int differs = 0;
  for (int j = 0; j < s->nranks; j++) {
    uint64_t* r = recs + (size_t)j * SHM_CHECK_WORDS;
    if (j != s->rank && shm_check_has(s, j)) {
      memcpy(r, s->ctrl[j].check[s->check_call % SHM_CHECK_RING].rec, sizeof s->check_mine);
      differs |= memcmp(r, s->check_mine, sizeof s->check_mine) != 0;
    } else {
      memcpy(r, s->check_mine, sizeof s->check_mine);
    }
  }
  s->check_watch = 0;
  return differs;
}

/* The guard of chunk g (shm.h): the step every rank must reach first, 0
 * for none. */
static uint64_t shm_part_guard(const shm_t* s, uint64_t g, size_t off, size_t len) {
  for (uint64_t back = 2; back <= SHM_PART_HIST; back += 2) {
    if (g < back) return 0; /* no earlier chunk of this parity */
    uint64_t h = g - back;
    const __typeof__(s->part[0])* e = &s->part[h % SHM_PART_HIST];
    int recorded = e->g1 == h + 1;
    if (!recorded || (e->off < off + len && off < e->off + e->len)) return 3 * h + 3;
  }
  /* every remembered chunk of this parity wrote elsewhere: the guard is
   * the first one not remembered */
  return g < SHM_PART_HIST + 2 ? 0 : 3 * (g - SHM_PART_HIST - 2) + 3;
}

qcclResult_t shm_test_chunk_part(shm_t* s, uint64_t g, size_t off, size_t len) {
  if (s->part_g1 != g + 1) { /* once per chunk: the test may be repeated */
    s->part_step = shm_part_guard(s, g, off, len);
    s->part[g % SHM_PART_HIST].g1 = g + 1;
    s->part[g % SHM_PART_HIST].off = off;
    s->part[g % SHM_PART_HIST].len = len;
    s->part_g1 = g + 1;
  }
  return s->part_step == 0 ? qcclSuccess : shm_test_all(s, s->part_step);
}

uint64_t shm_chunk_next(shm_t* s) {
  /* where this rank runs, for a peer that waits for it (shm_wait_spin): a
   * rank that never waits (the root of an eager Gather, always behind)
   * would otherwise leave a stale CPU there, and a peer spinning on its
   * CPU would hold it off for the whole spin */
  shm_publish_cpu(s, sched_getcpu());
  return s->chunk_seq++;
}
