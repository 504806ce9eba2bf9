/*
 * memcopy.c - non-temporal copy (see memcopy.h).
 *
 * The destination is first brought to a cache-line boundary (memcpy of
 * the head), so every streaming store fills whole lines: a line written in
 * two halves leaves partial write-combining buffers that flush to memory
 * one at a time (a 16-byte aligned destination, malloc's, took 1.1x the
 * time at 128 MiB).
 *
 * With AVX2 the bulk goes four pages at a time, one line of each page in
 * turn, with 32-byte loads and streaming stores: four streams keep more
 * lines in flight to memory than one. On the Intel guest of 2026-12-05
 * (one rank copying, cold buffers) 128 MiB took 13.1 ms, against 15.8
 * for one stream of 16-byte stores, 15.7 for one stream of 32-byte
 * stores and 13.5 for glibc's memcpy; 32 MiB 3.3 against 3.9 and 5.3;
 * 8 MiB (warm) 0.59 against 0.94 and 0.90 (docs/PERF.md, "Four streams of
 * streaming stores"). Without AVX2, one stream of SSE2 stores (every
 * x86-64 CPU has them); other CPUs use memcpy.
 *
 * copy_near, for copy_data's destinations just past their source (see
 * memcopy.h), is the same walk with ordinary stores: the head by memcpy
 * (under a line), then a line per step, 32-byte loads and aligned stores
 * with AVX2 (16-byte with SSE2), the tail by memcpy. One stream: the data
 * is meant to stay in cache, and one stream ran at memcpy's aligned speed
 * there (8 KiB-4 MiB, every distance 0-72 bytes).
 */
#include "core/memcopy.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define COPY_PAGE ((size_t)4096)

/* n bytes from s to the line-aligned d, four pages at a time; returns the
 * bytes copied (a multiple of 4 pages). */
__attribute__((target("avx2"))) static size_t copy_stream_4x(char* d, const char* s, size_t n) {
  size_t done = 0;
  for (; done + 4 * COPY_PAGE <= n; done += 4 * COPY_PAGE) {
    const char* ss = s + done;
    char* dd = d + done;
    for (size_t o = 0; o < COPY_PAGE; o += 64) {
      for (size_t k = 0; k < 4; k++) {
        const char* from = ss + k * COPY_PAGE + o;
        char* to = dd + k * COPY_PAGE + o;
        __m256i a = _mm256_loadu_si256((const __m256i*)from);
        __m256i b = _mm256_loadu_si256((const __m256i*)(from + 32));
        _mm256_stream_si256((__m256i*)to, a);
        _mm256_stream_si256((__m256i*)(to + 32), b);
      }
    }
  }
  return done;
}

static int copy_has_avx2(void) {
  static int has = -1; /* a benign race: every thread computes the same */
  int h = __atomic_load_n(&has, __ATOMIC_RELAXED);
  if (h < 0) {
    __builtin_cpu_init();
    h = __builtin_cpu_supports("avx2") ? 1 : 0;
    __atomic_store_n(&has, h, __ATOMIC_RELAXED);
  }
  return h;
}

__attribute__((target("avx2"))) static size_t copy_near_avx2(char* d, const char* s, size_t n) {
  size_t lines = n / 64;
  for (size_t i = 0; i < lines; i++, d += 64, s += 64) {
    __m256i a = _mm256_loadu_si256((const __m256i*)s);
    __m256i b = _mm256_loadu_si256((const __m256i*)(s + 32));
    _mm256_store_si256((__m256i*)d, a);
    _mm256_store_si256((__m256i*)(d + 32), b);
  }
  return lines * 64;
}

/* memcpy of the head that brings *d to a line; 0 when the copy was too
 * short for the loops and memcpy did all of it */
static int copy_to_line(char** d, const char** s, size_t* n) {
  size_t head = (64 - ((uintptr_t)*d & 63)) & 63;
  if (*n < 256 || head > *n) {
    memcpy(*d, *s, *n);
    return 0;
  }
  memcpy(*d, *s, head);
  *d += head;
  *s += head;
  *n -= head;
  return 1;
}

/* whole lines from s to the line-aligned d with 16-byte loads and
 * stores (streaming ones when stream is set); returns the bytes copied */
static size_t copy_lines_sse2(char* d, const char* s, size_t n, int stream) {
  size_t k = 0;
  for (; k + 64 <= n; k += 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)(s + k));
    __m128i b = _mm_loadu_si128((const __m128i*)(s + k + 16));
    __m128i c = _mm_loadu_si128((const __m128i*)(s + k + 32));
    __m128i e = _mm_loadu_si128((const __m128i*)(s + k + 48));
    if (stream) {
      _mm_stream_si128((__m128i*)(d + k), a);
      _mm_stream_si128((__m128i*)(d + k + 16), b);
      _mm_stream_si128((__m128i*)(d + k + 32), c);
      _mm_stream_si128((__m128i*)(d + k + 48), e);
    } else {
      _mm_store_si128((__m128i*)(d + k), a);
      _mm_store_si128((__m128i*)(d + k + 16), b);
      _mm_store_si128((__m128i*)(d + k + 32), c);
      _mm_store_si128((__m128i*)(d + k + 48), e);
    }
  }
  return k;
}

void copy_near(void* dst, const void* src, size_t n) {
  char* d = dst;
  const char* s = src;
  if (!copy_to_line(&d, &s, &n)) return;
  size_t k = copy_has_avx2() ? copy_near_avx2(d, s, n) : copy_lines_sse2(d, s, n, 0);
  memcpy(d + k, s + k, n - k);
}

void copy_stream(void* dst, const void* src, size_t n) {
  char* d = dst;
  const char* s = src;
  if (!copy_to_line(&d, &s, &n)) return;
  size_t k = copy_has_avx2() ? copy_stream_4x(d, s, n) : 0;
  k += copy_lines_sse2(d + k, s + k, n - k, 1);
  memcpy(d + k, s + k, n - k);
  _mm_sfence();
}
#else
void copy_stream(void* dst, const void* src, size_t n) {
  memcpy(dst, src, n);
}

void copy_near(void* dst, const void* src, size_t n) {
  memcpy(dst, src, n);
}
#endif
