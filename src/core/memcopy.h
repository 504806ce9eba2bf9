/*
 * memcopy.h - copies for the data path.
 *
 * copy_stream writes with non-temporal stores: for output that will not be
 * read again soon (the user's receive buffer of a large collective) it
 * skips the read-for-ownership of every destination line and keeps the
 * cache for the shared segment, which is read again at once. It ends with
 * a store fence. Below COPY_STREAM_MIN_TOTAL bytes of output per call,
 * ordinary memcpy is faster (the data stays in cache for the caller).
 */
#ifndef QCCL_CORE_MEMCOPY_H_
#define QCCL_CORE_MEMCOPY_H_

#include <stddef.h>

#define COPY_STREAM_MIN_TOTAL ((size_t)8 << 20)

/* memcpy with non-temporal stores (any alignment, any size). */
void copy_stream(void* dst, const void* src, size_t n);

/* copy_stream when stream is set, else memcpy. */
static inline void copy_out(void* dst, const void* src, size_t n, int stream) {
  if (stream)
    copy_stream(dst, src, n);
  else
    __builtin_memcpy(dst, src, n);
}

#endif /* QCCL_CORE_MEMCOPY_H_ */
