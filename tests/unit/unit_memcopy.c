/*
 * unit_memcopy - copy_stream, copy_near and copy_data (core/memcopy.c)
 * against memcpy, byte for byte: every destination and source offset
 * 0..63 from a page boundary, lengths 0..300, primes, around one line,
 * one page and the four-page step of the AVX2 path (16 KiB +- 1, 3 steps
 * + 4095), and 1 MiB + 37; the bytes before and after the destination
 * (guards) must be untouched. Then copy_data's choice: copy_near exactly
 * where the destination is 1-63 bytes past the source modulo a page and
 * the length in [COPY_NEAR_MIN, COPY_NEAR_MAX), checked on distances that
 * wrap around a page and on lengths at both bounds.
 * Random bytes from a printed seed (QCCL_TEST_SEED replays one).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/memcopy.h"

#define GUARD 256

static uint64_t rng;
static unsigned char next_byte(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (unsigned char)(rng >> 24);
}

int main(void) {
  const char* env = getenv("QCCL_TEST_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u + 1;
  rng = seed | 1;
  printf("unit_memcopy: seed %" PRIu64 " (replay: QCCL_TEST_SEED=%" PRIu64 ")\n", seed, seed);
  static const size_t odd_lens[] = {
      509,        1021,           4093, 4096, 4097, 16383, 16384, 16385, 3 * 16384 + 4095,
      65536 + 64, (1u << 20) + 37};
  size_t nlens = 301 + sizeof odd_lens / sizeof odd_lens[0];
  size_t maxlen = (1u << 20) + 37;
  size_t cap =
      (maxlen + 2 * GUARD + 4096 + 64 + 4095) & ~(size_t)4095; /* aligned_alloc: a multiple */
  unsigned char* src = aligned_alloc(4096, cap);
  unsigned char* dst = aligned_alloc(4096, cap);
  unsigned char* ref = aligned_alloc(4096, cap);
  if (!src || !dst || !ref) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < cap; i++) src[i] = next_byte();
  long checked = 0;
  static const char* const names[] = {"copy_stream", "copy_near", "copy_data"};
  for (int fn = 0; fn < 3; fn++)
    for (size_t li = 0; li < nlens; li++) {
      size_t n = li < 301 ? li : odd_lens[li - 301];
      /* every offset pair for short lengths, a spread for long ones */
      int step = n > 4096 ? 7 : 1;
      for (int doff = 0; doff < 64; doff += step) {
        for (int soff = 0; soff < 64; soff += (n > 300 ? 13 : 5)) {
          unsigned char fill = next_byte();
          memset(dst, fill, n + 2 * GUARD + 64);
          memcpy(ref, dst, n + 2 * GUARD + 64);
          unsigned char* d = dst + GUARD + doff;
          /* copy_data: sources at the destination's page offset, so that
           * doff > soff puts the destination 1-63 bytes past its source */
          const unsigned char* s = src + (fn == 2 ? GUARD : 4096) + soff;
          if (fn == 0)
            copy_stream(d, s, n);
          else if (fn == 1)
            copy_near(d, s, n);
          else
            copy_data(d, s, n);
          memcpy(ref + GUARD + doff, s, n);
          if (memcmp(dst, ref, n + 2 * GUARD + 64) != 0) {
            size_t at = 0;
            while (dst[at] == ref[at]) at++;
            fprintf(
                stderr,
                "FAIL: %s of %zu bytes, destination offset %d, source offset %d: "
                "byte %td (relative to the destination) is %u, expected %u (seed %" PRIu64 ")\n",
                names[fn], n, doff, soff, (ptrdiff_t)at - (GUARD + doff), dst[at], ref[at], seed);
            return 1;
          }
          checked++;
        }
      }
    }
  printf("unit_memcopy: %ld copies checked\n", checked);
  /* copy_data's choice, by the distance (dst - src) modulo a page */
  static const struct {
    long dist; /* dst - src in bytes */
    size_t n;
    int near;
  } cases[] = {
      {0, 65536, 0},         {8, 65536, 1},
      {16, 65536, 1},        {63, 65536, 1},
      {64, 65536, 0},        {72, 65536, 0},
      {-8, 65536, 0},        {4096 + 8, 65536, 1},
      {-4096 + 8, 65536, 1}, {2 * 4096 + 63, 65536, 1},
      {4096, 65536, 0},      {8, COPY_NEAR_MIN - 1, 0},
      {8, COPY_NEAR_MIN, 1}, {8, COPY_NEAR_MAX - 1, 1},
      {8, COPY_NEAR_MAX, 0}, {1, 262144, 1},
      {4095, 262144, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char* s = (const char*)src + 3 * 4096 + 40; /* any offset: only the distance counts */
    const char* d = s + cases[i].dist;
    int got = copy_near_use(d, s, cases[i].n);
    if (got != cases[i].near) {
      fprintf(stderr, "FAIL: copy_near_use(distance %ld, %zu bytes) = %d, expected %d\n",
              cases[i].dist, cases[i].n, got, cases[i].near);
      return 1;
    }
  }
  /* and through copy_data: a destination 8 bytes past the source (mod a
   * page) of 64 KiB + 5, the near path's own head and tail, byte for byte */
  for (int k = 0; k < 2; k++) {
    size_t n = 65536 + 5;
    unsigned char* d = dst + GUARD + 8 + 64 * k;
    const unsigned char* s = src + GUARD + 64 * k; /* both buffers on a page: d - s == 8 */
    memset(dst, 0xa5, n + 2 * GUARD + 128);
    memcpy(ref, dst, n + 2 * GUARD + 128);
    if (!copy_near_use(d, s, n)) {
      fprintf(stderr, "FAIL: the near case's setup\n");
      return 1;
    }
    copy_data(d, s, n);
    memcpy(ref + (d - dst), s, n);
    if (memcmp(dst, ref, n + 2 * GUARD + 128) != 0) {
      fprintf(stderr, "FAIL: copy_data of %zu bytes 8 bytes past its source\n", n);
      return 1;
    }
  }
  free(src);
  free(dst);
  free(ref);
  return 0;
}
