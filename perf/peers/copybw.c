/*
 * copybw.c - the memory-copy bandwidth of this host, the physical bound of
 * every collective that moves its bytes through memory.
 *
 *   qccl-copybw [-t THREADS] [-b SIZE] [-e SIZE] [-f FACTOR] [-n ITERS] [-k] [-d DIST]
 *               [-J FILE]
 *
 * T threads (default: the online CPUs) each copy a buffer of SIZE bytes
 * into another of their own, in -n rounds after two warm-up copies; once
 * with memcpy() and once with a non-temporal copy (streaming stores that
 * bypass the cache: the faster one for buffers larger than the cache).
 * Every round starts the threads together (a spinning barrier) and lasts
 * until the last of them is done, as a collective's call lasts until its
 * slowest rank is done: a thread that ran while another was held up by the
 * host does not count as concurrent bandwidth (an earlier version summed
 * each thread's own median rate, and once reported 64 GB/s where rounds
 * timed this way give 40-53). Small sizes repeat the copy within a round
 * until each thread has moved at least 4 MiB, so the barrier's own cost
 * does not count. Bandwidth is bytes read plus bytes written (2 x SIZE
 * per copy), as docs/PERF.md's bounds count them, over all threads, per
 * median round. "best" is the larger of the two kernels: the bound that
 * perf/compare.py uses.
 *
 * -k adds a third column, the kernel's copy: each thread reads its source
 * into its destination with process_vm_readv, as single copy reads a
 * peer's plain buffer (the kernel pins the source pages a few at a time
 * and copies page by page). It does not enter "best": it is what a plain
 * buffer's bytes cost when they cross to another rank in one copy, where
 * the bound's schedule reads them in place (docs/ARCHITECTURE.md, "Plain
 * buffers are not remapped"). Reading its own process measures the same
 * path as reading a peer's (docs/PERF.md, "What a plain buffer's bytes
 * cost").
 *
 * -d DIST puts each destination DIST bytes past its source modulo a page
 * (0-4095; the sources stay on a page) and adds a column: qccl's own copy
 * for the data path (copy_data, core/memcopy.h), which takes its near
 * copy where memcpy's string copy crawls (a destination 1-63 bytes past
 * its source: docs/PERF.md, "A destination just past its source"). With
 * -d the non-temporal kernel is qccl's copy_stream (any alignment), at
 * every distance, 0 too, so that one run's columns compare one code.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/uio.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "core/memcopy.h"
#include "probe.h"

/* A barrier that spins (yielding, for more threads than CPUs): its
 * threads leave within a fraction of a microsecond of each other. */
typedef struct {
  _Atomic int arrived;
  _Atomic int round;
  int threads;
} copy_barrier_t;

static void copy_barrier_wait(copy_barrier_t* b) {
  int round = atomic_load(&b->round);
  if (atomic_fetch_add(&b->arrived, 1) + 1 == b->threads) {
    atomic_store(&b->arrived, 0);
    atomic_store(&b->round, round + 1);
    return;
  }
  while (atomic_load(&b->round) == round) sched_yield();
}

enum { COPY_MEMCPY, COPY_NT, COPY_KERNEL, COPY_QCCL };

static size_t copy_dist; /* -d: the destination this far past the source, mod a page */
static int copy_qccl;    /* -d given: qccl's copies (copy_data, copy_stream) */

typedef struct {
  size_t size;
  int iters, reps; /* rounds; copies per round */
  int kind;        /* COPY_MEMCPY, COPY_NT, COPY_KERNEL, COPY_QCCL */
  copy_barrier_t* start;
  double *t0, *t1; /* per round: when this thread started, ended */
  int failed;
} copy_thread_t;

/* n bytes between 4096-aligned buffers, with streaming stores. */
static void copy_nt(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  __m128i* d = dst;
  const __m128i* s = src;
  size_t blocks = n / 64;
  for (size_t i = 0; i < blocks; i++, d += 4, s += 4) {
    __m128i a = _mm_load_si128(s), b = _mm_load_si128(s + 1);
    __m128i c = _mm_load_si128(s + 2), e = _mm_load_si128(s + 3);
    _mm_stream_si128(d, a);
    _mm_stream_si128(d + 1, b);
    _mm_stream_si128(d + 2, c);
    _mm_stream_si128(d + 3, e);
  }
  _mm_sfence();
  memcpy((char*)dst + blocks * 64, (const char*)src + blocks * 64, n - blocks * 64);
#else
  memcpy(dst, src, n);
#endif
}

/* n bytes from src to dst by the kernel's copy (process_vm_readv of this
 * process); 0, or -1 when it fails or falls short. */
static int copy_kernel(void* dst, const void* src, size_t n) {
  static pid_t self;
  if (!self) self = getpid();
  size_t done = 0;
  while (done < n) {
    struct iovec local = {(char*)dst + done, n - done};
    struct iovec remote = {(void*)((const char*)src + done), n - done};
    ssize_t got = process_vm_readv(self, &local, 1, &remote, 1, 0);
    if (got <= 0) return -1;
    done += (size_t)got;
  }
  return 0;
}

static void copy_once(copy_thread_t* c, char* dst, const char* src) {
  if (c->kind == COPY_NT && !copy_qccl)
    copy_nt(dst, src, c->size);
  else if (c->kind == COPY_NT)
    copy_stream(dst, src, c->size);
  else if (c->kind == COPY_QCCL)
    copy_data(dst, src, c->size);
  else if (c->kind == COPY_KERNEL)
    c->failed |= copy_kernel(dst, src, c->size) != 0;
  else
    memcpy(dst, src, c->size);
  __asm__ __volatile__("" : : "r"(dst) : "memory"); /* keep the copy */
}

static void* copy_thread(void* arg) {
  copy_thread_t* c = arg;
  size_t alloc = (c->size + 4095) / 4096 * 4096;
  char* src = aligned_alloc(4096, alloc);
  char* base = aligned_alloc(4096, alloc + 4096); /* -d: a page more */
  char* dst = base ? base + copy_dist : NULL;
  if (!src || !dst) c->failed = 1;
  if (!c->failed) {
    memset(src, 1, c->size);
    memset(dst, 2, c->size);
    for (int i = 0; i < 2; i++) copy_once(c, dst, src);
  }
  /* every thread takes part in every round, a failed one idly */
  for (int i = 0; i < c->iters; i++) {
    copy_barrier_wait(c->start);
    c->t0[i] = probe_now();
    for (int k = 0; k < c->reps && !c->failed; k++) copy_once(c, dst, src);
    c->t1[i] = probe_now();
  }
  if (!c->failed && memcmp(dst, src, c->size) != 0) c->failed = 1; /* the copy is checked */
  free(src), free(base);
  return NULL;
}

/* One kernel at one size on every thread: the total bandwidth in GB/s of
 * the median round (first start to last end). */
static int copy_run(size_t size, int iters, int threads, int kind, double* aggr) {
  copy_barrier_t start = {0, 0, threads};
  copy_thread_t* c = calloc((size_t)threads, sizeof *c);
  pthread_t* tid = calloc((size_t)threads, sizeof *tid);
  double* times = calloc((size_t)threads * 2 + 1, (size_t)iters * sizeof(double));
  if (!c || !tid || !times) {
    free(c), free(tid), free(times);
    return -1;
  }
  size_t min_bytes = (size_t)4 << 20;
  int reps = size >= min_bytes ? 1 : (int)((min_bytes + size - 1) / size);
  for (int i = 0; i < threads; i++) {
    c[i] = (copy_thread_t){size,
                           iters,
                           reps,
                           kind,
                           &start,
                           times + (size_t)(2 * i) * (size_t)iters,
                           times + (size_t)(2 * i + 1) * (size_t)iters,
                           0};
    pthread_create(&tid[i], NULL, copy_thread, &c[i]);
  }
  int failed = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(tid[i], NULL);
    failed |= c[i].failed;
  }
  double* span = times + (size_t)threads * 2 * (size_t)iters;
  for (int r = 0; r < iters; r++) {
    double first = c[0].t0[r], last = c[0].t1[r];
    for (int i = 1; i < threads; i++) {
      if (c[i].t0[r] < first) first = c[i].t0[r];
      if (c[i].t1[r] > last) last = c[i].t1[r];
    }
    span[r] = last - first;
  }
  qsort(span, (size_t)iters, sizeof(double), probe_cmp_double);
  double med = iters % 2 ? span[iters / 2] : 0.5 * (span[iters / 2 - 1] + span[iters / 2]);
  *aggr = 2.0 * (double)size * (double)reps * (double)threads / med / 1e9;
  free(c), free(tid), free(times);
  return failed ? -1 : 0;
}

static int copy_size(const char* s, size_t* out) {
  char* end = NULL;
  unsigned long long v = strtoull(s, &end, 0), mul = 1;
  if (end == s) return -1;
  if (*end == 'K' || *end == 'k')
    mul = 1ull << 10, end++;
  else if (*end == 'M' || *end == 'm')
    mul = 1ull << 20, end++;
  else if (*end == 'G' || *end == 'g')
    mul = 1ull << 30, end++;
  if (*end != '\0') return -1;
  *out = (size_t)(v * mul);
  return 0;
}

int main(int argc, char** argv) {
  int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), iters = 20, factor = 4, kernel = 0, opt;
  size_t minb = 1024, maxb = 256u << 20;
  const char* json = NULL;
  while ((opt = getopt(argc, argv, "t:b:e:f:n:kd:J:h")) != -1) {
    switch (opt) {
      case 't':
        threads = atoi(optarg);
        break;
      case 'b':
        if (copy_size(optarg, &minb)) goto usage;
        break;
      case 'e':
        if (copy_size(optarg, &maxb)) goto usage;
        break;
      case 'f':
        factor = atoi(optarg);
        break;
      case 'n':
        iters = atoi(optarg);
        break;
      case 'k':
        kernel = 1;
        break;
      case 'd': {
        char* end = NULL;
        long v = strtol(optarg, &end, 0);
        if (end == optarg || *end != '\0' || v < 0 || v > 4095) goto usage;
        copy_dist = (size_t)v;
        copy_qccl = 1;
        break;
      }
      case 'J':
        json = optarg;
        break;
      default:
        goto usage;
    }
  }
  if (threads < 1 || threads > 1024 || iters < 1 || factor < 2 || minb < 1) goto usage;
  if (kernel) { /* a sandbox may forbid the call: a skip, not a failure */
    char a[64] = {1}, b[64] = {0};
    if (copy_kernel(b, a, sizeof a) != 0) {
      fprintf(stderr, "qccl-copybw: -k: process_vm_readv of this process: %s (skipped)\n",
              strerror(errno));
      return 77;
    }
  }
  FILE* jf = json ? fopen(json, "w") : NULL;
  if (json && !jf) perror(json);
  printf(
      "# qccl-copybw: %d thread(s) each copy SIZE bytes, together in rounds; GB/s = (read + "
      "written, all threads) / median round (first start to last end), GB = 1e9\n",
      threads);
  if (copy_qccl)
    printf("# destinations %zu bytes past their sources (mod 4096); qccl: copy_data\n", copy_dist);
  printf("# %10s  %12s  %12s  %12s%s%s\n", "size(B)", "memcpy GB/s", "nt-copy GB/s", "best GB/s",
         kernel ? "  kernel GB/s  kernel/best" : "", copy_qccl ? "    qccl GB/s" : "");
  if (jf) fprintf(jf, "{\"tool\": \"qccl-copybw\", \"threads\": %d, \"rows\": [", threads);
  int first = 1;
  for (size_t s = minb; s <= maxb; s *= (size_t)factor) {
    double bw[4] = {0, 0, 0, 0};
    for (int kind = COPY_MEMCPY; kind <= COPY_QCCL; kind++) {
      if ((kind == COPY_KERNEL && !kernel) || (kind == COPY_QCCL && !copy_qccl)) continue;
      if (copy_run(s, iters, threads, kind, &bw[kind]) != 0) {
        static const char* name[] = {"memcpy", "nt-copy", "kernel (process_vm_readv)",
                                     "qccl (copy_data)"};
        fprintf(stderr,
                "qccl-copybw: the %s copy failed at %zu bytes (out of memory, a failed call, or "
                "a destination that differs from its source)\n",
                name[kind], s);
        return 1;
      }
    }
    double best = bw[0] > bw[1] ? bw[0] : bw[1];
    printf("  %10zu  %12.2f  %12.2f  %12.2f", s, bw[0], bw[1], best);
    if (kernel) printf("  %11.2f  %11.2f", bw[2], bw[2] / best);
    if (copy_qccl) printf("  %11.2f", bw[3]);
    printf("\n");
    if (jf) {
      fprintf(jf,
              "%s\n  {\"size\": %zu, \"gbps_aggr\": %.4f, \"gbps_memcpy\": %.4f, "
              "\"gbps_nt\": %.4f",
              first ? "" : ",", s, best, bw[0], bw[1]);
      if (kernel) fprintf(jf, ", \"gbps_kernel\": %.4f", bw[2]);
      if (copy_qccl) fprintf(jf, ", \"gbps_qccl\": %.4f, \"dist\": %zu", bw[3], copy_dist);
      fprintf(jf, "}");
    }
    first = 0;
  }
  if (jf) {
    fprintf(jf, "\n]}\n");
    fclose(jf);
  }
  return 0;
usage:
  fprintf(stderr,
          "usage: %s [-t THREADS] [-b SIZE] [-e SIZE] [-f FACTOR>=2] [-n ITERS] [-k] [-d DIST] "
          "[-J FILE]\n",
          argv[0]);
  return 2;
}
