/*
 * handoff.c - how fast one core reads what another core just wrote: the
 * cost of every handoff through a shared segment, and the one figure that
 * tells the two modes of a VM apart whose vCPUs are moved between host
 * cores that do or do not share a cache (docs/PERF.md, "Two modes of one
 * machine").
 *
 *   qccl-handoff [-a CPU] [-b CPU] [-s SIZE] [-n ROUNDS] [-x PLACES] [-J FILE]
 *
 * Two threads, pinned to CPUs a and b (default 0 and 1). Round trip: they
 * bounce a counter in one cache line 20000 times, five times; the median
 * batch gives ns per round trip. Handoff: for each of ROUNDS rounds thread
 * a fills a SIZE buffer (default 512 KiB: one chunk's worth, in cache) and
 * raises a flag, and thread b copies it into a buffer of its own; the
 * median copy time gives the handoff rate in GB/s (bytes read per second).
 *
 * Exchange (-x PLACES): what a staged collective's handoff costs with the
 * places it writes in. Each thread has a ring of places SIZE bytes apart
 * (4 KiB-aligned); at every step both write their SIZE bytes into their
 * next place, raise a flag, copy the peer's place into a buffer of their
 * own and raise it again, in lockstep: a 2-rank AllGather's chunk. Run for
 * rings of 1, 2, 4, ... PLACES places, each once with ordinary stores
 * into the place (memcpy) and once with streaming ones; the median step
 * in us. A place rewritten while the peer's cache still holds its lines
 * costs an ordinary store a take-back per line (shm.h, shm_rot;
 * docs/PERF.md, "Wide places"); a streaming store sends the line to
 * memory instead, which is what the library's writer switches to when
 * its ordinary copies run slow (transport/shm_handoff.c; docs/PERF.md,
 * "Small handoffs follow the mode"). The streaming copy is the library's
 * own (copy_stream, core/memcopy.c: memcpy where the CPU has none).
 * Exits 77 with fewer than two CPUs or when pinning fails.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/memcopy.h"
#include "probe.h"

#define HO_TRIPS 20000
#define HO_BATCHES 5
#define HO_EX_STEPS 4000 /* steps of an exchange, at least 4 turns of the ring */

typedef struct {
  int cpu_a, cpu_b, rounds;
  size_t size;
  _Alignas(64) _Atomic uint64_t ball;
  _Alignas(64) _Atomic uint64_t flag;
  char* buf;
  double* copy_s; /* [rounds], thread b */
  _Atomic int pin_failed;
} handoff_t;

static int ho_pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* Thread b: returns the ball, then copies every filled buffer. */
static void* ho_thread_b(void* arg) {
  handoff_t* h = arg;
  if (ho_pin(h->cpu_b) != 0) h->pin_failed = 1;
  for (uint64_t i = 0; i < (uint64_t)HO_TRIPS * HO_BATCHES; i++) {
    while (atomic_load_explicit(&h->ball, memory_order_acquire) != 2 * i + 1) {
      if (h->pin_failed) return NULL;
    }
    atomic_store_explicit(&h->ball, 2 * i + 2, memory_order_release);
  }
  char* mine = aligned_alloc(4096, (h->size + 4095) / 4096 * 4096);
  if (mine == NULL) abort();
  memset(mine, 0, h->size);
  for (int r = 0; r < h->rounds; r++) {
    while (atomic_load_explicit(&h->flag, memory_order_acquire) != 2 * (uint64_t)r + 1) {
    }
    double t0 = probe_now();
    memcpy(mine, h->buf, h->size);
    __asm__ __volatile__("" : : "r"(mine) : "memory");
    h->copy_s[r] = probe_now() - t0;
    atomic_store_explicit(&h->flag, 2 * (uint64_t)r + 2, memory_order_release);
  }
  free(mine);
  return NULL;
}

/* One exchange: two threads, a ring of places each. */
typedef struct {
  int stream; /* streaming stores into the place */
  int cpu[2], places, steps;
  size_t size, place;
  char* ring[2];
  _Alignas(64) _Atomic uint64_t cnt0;
  _Alignas(64) _Atomic uint64_t cnt1;
  double* step_s; /* [steps], thread 0 */
  _Atomic int pin_failed;
  _Atomic int wrong; /* a step read other bytes than the peer wrote */
} exchange_t;

typedef struct {
  exchange_t* x;
  int k;
} exchange_arg_t;

static void* ho_exchange_thread(void* arg) {
  exchange_t* x = ((exchange_arg_t*)arg)->x;
  int k = ((exchange_arg_t*)arg)->k;
  _Atomic uint64_t* mine = k ? &x->cnt1 : &x->cnt0;
  _Atomic uint64_t* peer = k ? &x->cnt0 : &x->cnt1;
  if (ho_pin(x->cpu[k]) != 0) x->pin_failed = 1;
  char* src = aligned_alloc(4096, x->place);
  char* dst = aligned_alloc(4096, x->place);
  if (src == NULL || dst == NULL) abort();
  memset(src, k + 1, x->size);
  memset(dst, 0, x->size);
  for (int i = 0; i < x->steps && !x->pin_failed; i++) {
    double t0 = probe_now();
    size_t at = (size_t)(i % x->places) * x->place;
    while (atomic_load_explicit(peer, memory_order_acquire) < 2 * (uint64_t)i) {
      if (x->pin_failed) break;
    }
    if (x->pin_failed) break; /* the peer is gone: no more lockstep */
    /* the step's own first and last bytes, so a stale place shows */
    src[0] = src[x->size - 1] = (char)(i * 2 + k);
    if (x->stream)
      copy_stream(x->ring[k] + at, src, x->size);
    else
      memcpy(x->ring[k] + at, src, x->size);
    atomic_store_explicit(mine, 2 * (uint64_t)i + 1, memory_order_release);
    while (atomic_load_explicit(peer, memory_order_acquire) < 2 * (uint64_t)i + 1) {
      if (x->pin_failed) break;
    }
    if (x->pin_failed) break;
    memcpy(dst, x->ring[1 - k] + at, x->size);
    char want = (char)(i * 2 + 1 - k), mid = (char)(2 - k);
    if (dst[0] != want || dst[x->size - 1] != want || dst[x->size / 2] != mid) x->wrong = 1;
    atomic_store_explicit(mine, 2 * (uint64_t)i + 2, memory_order_release);
    if (k == 0) x->step_s[i] = probe_now() - t0;
  }
  free(src);
  free(dst);
  return NULL;
}

/* The median step in seconds of an exchange over rings of places places
 * (-1: pinning failed; -2: wrong bytes), stream: with streaming stores. */
static double ho_exchange(const handoff_t* h, int places, int stream) {
  exchange_t x = {.stream = stream, .cpu = {h->cpu_a, h->cpu_b}, .places = places, .size = h->size};
  x.place = (h->size + 4095) / 4096 * 4096;
  x.steps = HO_EX_STEPS > 4 * places ? HO_EX_STEPS : 4 * places;
  x.ring[0] = aligned_alloc(4096, x.place * (size_t)places);
  x.ring[1] = aligned_alloc(4096, x.place * (size_t)places);
  x.step_s = calloc((size_t)x.steps, sizeof(double));
  if (x.ring[0] == NULL || x.ring[1] == NULL || x.step_s == NULL) abort();
  memset(x.ring[0], 0, x.place * (size_t)places);
  memset(x.ring[1], 0, x.place * (size_t)places);
  exchange_arg_t args[2] = {{&x, 0}, {&x, 1}};
  pthread_t t[2];
  for (int k = 0; k < 2; k++)
    if (pthread_create(&t[k], NULL, ho_exchange_thread, &args[k]) != 0) abort();
  for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
  /* the first two turns of the ring warm it */
  int from = 2 * places < x.steps / 2 ? 2 * places : x.steps / 2;
  qsort(x.step_s + from, (size_t)(x.steps - from), sizeof(double), probe_cmp_double);
  double med = x.pin_failed ? -1 : x.wrong ? -2 : x.step_s[from + (x.steps - from) / 2];
  free(x.ring[0]);
  free(x.ring[1]);
  free(x.step_s);
  return med;
}

int main(int argc, char** argv) {
  static handoff_t h;
  h.cpu_a = 0, h.cpu_b = 1, h.rounds = 64, h.size = 512 << 10;
  const char* json = NULL;
  int opt, places = 0;
  char* end;
  while ((opt = getopt(argc, argv, "a:b:s:n:x:J:h")) != -1) {
    switch (opt) {
      case 'a':
        h.cpu_a = atoi(optarg);
        break;
      case 'b':
        h.cpu_b = atoi(optarg);
        break;
      case 's':
        h.size = (size_t)strtoull(optarg, NULL, 0);
        break;
      case 'n':
        h.rounds = atoi(optarg);
        break;
      case 'x':
        places = (int)strtol(optarg, &end, 10);
        if (*optarg == '\0' || *end != '\0') places = -1; /* refused below */
        break;
      case 'J':
        json = optarg;
        break;
      default:
        fprintf(stderr,
                "usage: %s [-a CPU] [-b CPU] [-s BYTES] [-n ROUNDS] [-x PLACES] [-J FILE]\n",
                argv[0]);
        return 2;
    }
  }
  /* the largest ring of the exchange: PLACES places of SIZE, at most 1 GiB */
  if (h.rounds < 1 || h.size < 64 || h.cpu_a < 0 || h.cpu_b < 0 || h.cpu_a == h.cpu_b ||
      places < 0 || places > 4096 || (double)h.size * places > (double)(1 << 30)) {
    fprintf(stderr,
            "qccl-handoff: need ROUNDS >= 1, BYTES >= 64, PLACES 0-4096 (a number; PLACES * "
            "BYTES at most 1 GiB) and two different CPUs\n");
    return 2;
  }
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
    printf("qccl-handoff: one CPU, nothing to hand off (skipped)\n");
    return 77;
  }
  h.buf = aligned_alloc(4096, (h.size + 4095) / 4096 * 4096);
  h.copy_s = calloc((size_t)h.rounds, sizeof(double));
  if (h.buf == NULL || h.copy_s == NULL) {
    fprintf(stderr, "qccl-handoff: out of memory\n");
    return 1;
  }
  memset(h.buf, 1, h.size);
  pthread_t tb;
  if (pthread_create(&tb, NULL, ho_thread_b, &h) != 0) {
    fprintf(stderr, "qccl-handoff: cannot start a thread\n");
    return 1;
  }
  if (ho_pin(h.cpu_a) != 0) h.pin_failed = 1;
  double batch[HO_BATCHES];
  for (int k = 0; k < HO_BATCHES && !h.pin_failed; k++) {
    double t0 = probe_now();
    for (uint64_t i = (uint64_t)k * HO_TRIPS; i < (uint64_t)(k + 1) * HO_TRIPS; i++) {
      atomic_store_explicit(&h.ball, 2 * i + 1, memory_order_release);
      while (atomic_load_explicit(&h.ball, memory_order_acquire) != 2 * i + 2) {
        if (h.pin_failed) break;
      }
    }
    batch[k] = (probe_now() - t0) / HO_TRIPS;
  }
  if (h.pin_failed) {
    pthread_join(tb, NULL);
    printf("qccl-handoff: cannot pin threads to CPUs %d and %d (skipped)\n", h.cpu_a, h.cpu_b);
    return 77;
  }
  for (int r = 0; r < h.rounds; r++) {
    memset(h.buf, r & 0xff, h.size); /* dirty in this core's cache */
    atomic_store_explicit(&h.flag, 2 * (uint64_t)r + 1, memory_order_release);
    while (atomic_load_explicit(&h.flag, memory_order_acquire) != 2 * (uint64_t)r + 2) {
    }
  }
  pthread_join(tb, NULL);
  qsort(batch, HO_BATCHES, sizeof(double), probe_cmp_double);
  qsort(h.copy_s, (size_t)h.rounds, sizeof(double), probe_cmp_double);
  double rtt_ns = batch[HO_BATCHES / 2] * 1e9;
  double gbps = (double)h.size / h.copy_s[h.rounds / 2] / 1e9;
  printf("# qccl-handoff: CPUs %d -> %d, %zu bytes, median of %d rounds\n", h.cpu_a, h.cpu_b,
         h.size, h.rounds);
  printf("round trip %.0f ns, handoff %.2f GB/s\n", rtt_ns, gbps);
  for (int p = 1; places > 0 && p <= places; p *= 2) {
    double st[2];
    for (int stream = 0; stream < 2; stream++) {
      st[stream] = ho_exchange(&h, p, stream);
      if (st[stream] == -2) {
        fprintf(stderr, "qccl-handoff: an exchange read bytes the peer did not write\n");
        return 1;
      }
      if (st[stream] < 0) {
        printf("qccl-handoff: cannot pin threads to CPUs %d and %d (skipped)\n", h.cpu_a, h.cpu_b);
        return 77;
      }
    }
    printf(
        "exchange of %zu bytes over %d places (%zu KiB a ring): %.2f us a step, %.2f with "
        "streaming stores\n",
        h.size, p, (h.size + 4095) / 4096 * 4 * (size_t)p, st[0] * 1e6, st[1] * 1e6);
  }
  if (json) {
    FILE* f = fopen(json, "w");
    if (f == NULL) {
      perror(json);
      return 1;
    }
    fprintf(f,
            "{\"tool\": \"qccl-handoff\", \"cpu_a\": %d, \"cpu_b\": %d, \"bytes\": %zu, "
            "\"rtt_ns\": %.1f, \"handoff_gbps\": %.3f}\n",
            h.cpu_a, h.cpu_b, h.size, rtt_ns, gbps);
    fclose(f);
  }
  free(h.buf);
  free(h.copy_s);
  return 0;
}
