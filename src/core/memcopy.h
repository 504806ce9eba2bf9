/*
 * memcopy.h - copies for the data path.
 *
 * copy_stream writes with non-temporal stores: for output that will not be
 * read again soon (the user's receive buffer of a large collective) it
 * skips the read-for-ownership of every destination line and keeps the
 * cache for the shared segment, which is read again at once. It ends with
 * a store fence. Below COPY_STREAM_MIN_TOTAL bytes of output per call,
 * ordinary memcpy is faster (the data stays in cache for the caller).
 *
 * copy_data is memcpy for the data path, but for one case glibc's memcpy
 * (2.36, Debian 12) handles badly: a destination a few bytes past the
 * source modulo a page. There, between glibc's `rep movsb` threshold and
 * its vector loop's (above 2 KiB to about 1 MiB on the AMD guest), the CPU's
 * string copy crawls: 256 KiB in cache at 3.0 GB/s when the destination
 * sits 8 bytes past the source (mod 4096), 27-37 GB/s at 16-56 bytes,
 * against 53-56 GB/s aligned alike (docs/PERF.md, "A destination just
 * past its source"). A plain malloc buffer starts 16 bytes past a page
 * and the segment's slots on a page, so every copy out of a slot into
 * such a buffer paid it (a 4-rank AlltoAll of 1 MiB took 1.5x the time
 * with buffers 16 bytes past a page as on one, 4.5x at 8 bytes past);
 * pieces at odd element offsets land anywhere. Those copies go through copy_near, a
 * vector loop of ordinary stores (full speed at every distance); every
 * other copy is memcpy.
 */
#ifndef QCCL_CORE_MEMCOPY_H_
#define QCCL_CORE_MEMCOPY_H_

#include <stddef.h>
#include <stdint.h>

#define COPY_STREAM_MIN_TOTAL ((size_t)8 << 20)

/* copy_data takes copy_near for copies of COPY_NEAR_MIN up to (not
 * including) COPY_NEAR_MAX bytes whose destination is 1-63 bytes past
 * the source modulo a page. Up to 2 KiB glibc's memcpy copies by vectors
 * (2 KiB ran at 51 GB/s at every distance, 2.5 KiB at 3 with 8 bytes);
 * from 1 MiB its vector loop was as fast as copy_near at every distance,
 * and from 8 MiB its non-temporal stores may be faster, so memcpy there. */
#define COPY_NEAR_MIN ((size_t)2 << 10)
#define COPY_NEAR_MAX ((size_t)8 << 20)

/* memcpy with ordinary stores by vectors (any alignment, any size): the
 * destination brought to a line, then unaligned loads and aligned stores */
void copy_near(void* dst, const void* src, size_t n);

/* 1 when copy_data copies dst <- src of n bytes with copy_near. */
static inline int copy_near_use(const void* dst, const void* src, size_t n) {
  size_t dist = (size_t)(((uintptr_t)dst - (uintptr_t)src) & 4095u);
  return n >= COPY_NEAR_MIN && n < COPY_NEAR_MAX && dist - 1 < 63;
}

/* memcpy for the data path (the user's buffers, the segment) */
static inline void copy_data(void* dst, const void* src, size_t n) {
  if (copy_near_use(dst, src, n))
    copy_near(dst, src, n);
  else
    __builtin_memcpy(dst, src, n);
}

/* memcpy with non-temporal stores (any alignment, any size). */
void copy_stream(void* dst, const void* src, size_t n);

/* copy_stream when stream is set, else copy_data. */
static inline void copy_out(void* dst, const void* src, size_t n, int stream) {
  if (stream)
    copy_stream(dst, src, n);
  else
    copy_data(dst, src, n);
}

#endif /* QCCL_CORE_MEMCOPY_H_ */
