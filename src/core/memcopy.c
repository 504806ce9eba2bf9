/*
 * memcopy.c - non-temporal copy (see memcopy.h). SSE2 streaming stores,
 * which every x86-64 CPU has; 64 bytes (one cache line) per step after
 * aligning the destination to 16 bytes. Other CPUs use memcpy.
 */
#include "core/memcopy.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>

void copy_stream(void* dst, const void* src, size_t n) {
  char* d = dst;
  const char* s = src;
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (n < 256 || head > n) {
    memcpy(d, s, n);
    return;
  }
  memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  size_t lines = n / 64;
  for (size_t i = 0; i < lines; i++, d += 64, s += 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)s);
    __m128i b = _mm_loadu_si128((const __m128i*)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i*)(s + 32));
    __m128i e = _mm_loadu_si128((const __m128i*)(s + 48));
    _mm_stream_si128((__m128i*)d, a);
    _mm_stream_si128((__m128i*)(d + 16), b);
    _mm_stream_si128((__m128i*)(d + 32), c);
    _mm_stream_si128((__m128i*)(d + 48), e);
  }
  memcpy(d, s, n - lines * 64);
  _mm_sfence();
}
#else
void copy_stream(void* dst, const void* src, size_t n) {
  memcpy(dst, src, n);
}
#endif
