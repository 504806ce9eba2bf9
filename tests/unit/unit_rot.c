/*
 * unit_rot - where small calls stage in their slot (shm_rot, shm.h),
 * checked against the rule as docs/PERF.md ("Wide places") states it, for
 * 1-64 ranks, ranks fitting the cores or not, slots of odd sizes:
 * every place a multiple of 4 KiB with the used bytes inside the slot;
 * the places of one step disjoint and the same for both halves of g;
 * the number of places min(span, slot) / step with span 1 MiB / (W-1)
 * (at least 64 KiB) and at most 128 places (16 sharing cores), for steps
 * up to 128 KiB; one place for larger steps past 64 KiB. Plus the figures
 * the docs give for 2 ranks on 1 MiB slots.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/shm.h"

#define CHECK_NAME "unit_rot"
#include "check.h"

#define KIB ((size_t)1 << 10)

static shm_t make(int w, int ncores, size_t chunk) {
  shm_t s;
  memset(&s, 0, sizeof s);
  s.nranks = w;
  s.ncores = ncores;
  s.chunk_bytes = chunk;
  shm_rot_init(&s);
  return s;
}

/* The places a call of used bytes takes, by the rule written out. */
static size_t want_places(int w, int ncores, size_t chunk, size_t used) {
  size_t step = (used + 4095) / 4096 * 4096;
  if (step == 0) return 1;
  size_t span;
  if (step > 128 * KIB) {
    span = 64 * KIB;
  } else {
    size_t over = (1024 * KIB) / (size_t)(w > 1 ? w - 1 : 1);
    if (over < 64 * KIB) over = 64 * KIB;
    size_t most = step * (w <= ncores ? 128 : 16);
    span = most < over ? most : over;
    if (span < 64 * KIB) span = 64 * KIB;
  }
  if (span > chunk) span = chunk;
  size_t k = span / step;
  return k > 1 ? k : 1;
}

/* The places of used bytes over enough chunk numbers: count them, check
 * each against the slot and the others. */
static void check_call(int w, int ncores, size_t chunk, size_t used) {
  shm_t s = make(w, ncores, chunk);
  size_t step = (used + 4095) / 4096 * 4096;
  size_t want = want_places(w, ncores, chunk, used);
  size_t seen[1024];
  size_t n = 0;
  for (uint64_t g = 0; g < 2 * 1024 + 2; g++) {
    size_t rot = shm_rot(&s, g, used);
    CHECK(rot % 4096 == 0, "w %d chunk %zu used %zu g %llu: place %zu not 4 KiB-aligned", w, chunk,
          used, (unsigned long long)g, rot);
    CHECK(rot + used <= chunk, "w %d chunk %zu used %zu: place %zu runs past the slot", w, chunk,
          used, rot);
    CHECK(shm_rot(&s, g ^ 1, used) == rot, "w %d used %zu: g %llu and its pair differ", w, used,
          (unsigned long long)g);
    int known = 0;
    for (size_t i = 0; i < n; i++) known |= seen[i] == rot;
    if (!known && n < 1024) seen[n++] = rot;
  }
  CHECK(n == want, "w %d cores %d chunk %zu used %zu: %zu places, the rule says %zu", w, ncores,
        chunk, used, n, want);
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++) {
      size_t lo = seen[i] < seen[j] ? seen[i] : seen[j];
      size_t hi = seen[i] < seen[j] ? seen[j] : seen[i];
      CHECK(hi - lo >= step || used == 0, "w %d used %zu: places %zu and %zu overlap", w, used, lo,
            hi);
    }
}

int main(void) {
  const size_t chunks[] = {4096, 5000, 64 * KIB, 100 * KIB + 64, 1024 * KIB, 3 * 1024 * KIB};
  const size_t useds[] = {0,         1,         4096,      4097,      8 * KIB,   12 * KIB + 5,
                          16 * KIB,  32 * KIB,  64 * KIB,  100 * KIB, 128 * KIB, 128 * KIB + 1,
                          256 * KIB, 512 * KIB, 1024 * KIB};
  const int ws[] = {1, 2, 3, 4, 5, 8, 17, 64};
  for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++)
    for (size_t u = 0; u < sizeof useds / sizeof *useds; u++)
      for (size_t i = 0; i < sizeof ws / sizeof *ws; i++)
        for (int cores = 1; cores <= 64; cores *= 8) {
          if (useds[u] > chunks[c]) continue; /* a chunk never uses more than its slot */
          check_call(ws[i], cores, chunks[c], useds[u]);
        }

  /* the docs' figures: 2 ranks on 2 cores, 1 MiB slots */
  shm_t s = make(2, 2, 1024 * KIB);
  CHECK(shm_rot_span(&s, 4 * KIB) == 512 * KIB, "4 KiB calls: span %zu, not 512 KiB",
        shm_rot_span(&s, 4 * KIB));
  CHECK(shm_rot_span(&s, 16 * KIB) == 1024 * KIB, "16 KiB calls: span %zu, not 1 MiB",
        shm_rot_span(&s, 16 * KIB));
  CHECK(shm_rot_span(&s, 256 * KIB) == 64 * KIB, "256 KiB calls: span %zu, not 64 KiB",
        shm_rot_span(&s, 256 * KIB));
  /* 5 ranks: 256 KiB over the 4 peers; 4 ranks on 2 cores: 16 places */
  s = make(5, 8, 1024 * KIB);
  CHECK(shm_rot_span(&s, 16 * KIB) == 256 * KIB, "5 ranks: span %zu, not 256 KiB",
        shm_rot_span(&s, 16 * KIB));
  s = make(4, 2, 1024 * KIB);
  CHECK(shm_rot_span(&s, 4 * KIB) == 64 * KIB, "4 ranks on 2 cores: span %zu, not 64 KiB",
        shm_rot_span(&s, 4 * KIB));

  return check_verdict();
}
