/*
 * memreg.c - qcclMemAlloc / qcclMemFree and the registry (see memreg.h).
 * Each allocation is a memfd of the rounded-up size, mapped shared and
 * read-write here; qcclMemFree unmaps and closes it (peers' mappings keep
 * the pages alive until they drop them).
 */
#include "core/memreg.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"
#include "qccl.h"

static pthread_mutex_t memreg_mu = PTHREAD_MUTEX_INITIALIZER;
static memreg_region_t* memreg_list;
static size_t memreg_cap;
static uint64_t memreg_next_id = 1;
/* The regions listed: changed under the lock, read without it by a lookup
 * that has nothing to find. A process that never called qcclMemAlloc
 * (plain buffers, the common case) looks for its buffers at every call of
 * every collective, and the lock's atomic waits there for the call's
 * stores to the segment to leave the store buffer (7% of a 2-rank 4 KiB
 * AllGather's samples, docs/PERF.md "The registry's lock"). A buffer the
 * user got from qcclMemAlloc reached the calling thread after the store
 * that counted it, so it is never missed. */
static atomic_size_t memreg_n;

int memreg_find(const void* p, size_t len, memreg_region_t* out) {
  const char* c = p;
  int found = 0;
  if (atomic_load_explicit(&memreg_n, memory_order_acquire) == 0) return 0;
  pthread_mutex_lock(&memreg_mu);
  size_t n = atomic_load_explicit(&memreg_n, memory_order_relaxed);
  for (size_t i = 0; i < n && !found; i++) {
    const memreg_region_t* r = &memreg_list[i];
    if (c >= r->base && len <= r->size && (size_t)(c - r->base) <= r->size - len) {
      *out = *r;
      found = 1;
    }
  }
  pthread_mutex_unlock(&memreg_mu);
  return found;
}

qcclResult_t memreg_memfd_create(const char* tag, size_t bytes, int reserve, int* fd) {
  int f = memfd_create(tag, MFD_CLOEXEC);
  if (f < 0) return QCCL_ERR(qcclSystemError, "memfd_create: %s", strerror(errno));
  int e = 0;
  if (reserve)
    e = posix_fallocate(f, 0, (off_t)bytes);
  else if (ftruncate(f, (off_t)bytes) != 0)
    e = errno;
  if (e != 0) {
    close(f);
    return QCCL_ERR(qcclSystemError, "cannot %s %zu bytes of shared memory (%s): %s",
                    reserve ? "reserve" : "size", bytes, tag, strerror(e));
  }
  *fd = f;
  return qcclSuccess;
}

int memreg_memfd_open(int pid, int fd, int* out, size_t* bytes) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
  int f = open(path, O_RDWR | O_CLOEXEC);
  struct stat st;
  if (f < 0 || fstat(f, &st) != 0) {
    int e = errno;
    if (f >= 0) close(f);
    return e;
  }
  *out = f;
  *bytes = (size_t)st.st_size;
  return 0;
}

qcclResult_t qcclMemAlloc(void** ptr, size_t size) {
  err_clear();
  if (ptr == NULL) return QCCL_ERR(qcclInvalidArgument, "ptr: NULL pointer");
  if (size == 0) return QCCL_ERR(qcclInvalidArgument, "size: 0 bytes");
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (size > SIZE_MAX - page) return QCCL_ERR(qcclInvalidArgument, "size=%zu is too large", size);
  size_t bytes = (size + page - 1) / page * page;
  int fd;
  QCCL_CHECK(memreg_memfd_create("qccl-mem", bytes, 0, &fd));
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    return QCCL_ERR(qcclSystemError, "mmap of %zu bytes: %s", bytes, strerror(e));
  }
  pthread_mutex_lock(&memreg_mu);
  size_t n = atomic_load_explicit(&memreg_n, memory_order_relaxed);
  if (n == memreg_cap) {
    size_t cap = memreg_cap ? 2 * memreg_cap : 16;
    memreg_region_t* l = realloc(memreg_list, cap * sizeof *l);
    if (l == NULL) {
      pthread_mutex_unlock(&memreg_mu);
      munmap(p, bytes);
      close(fd);
      return QCCL_ERR(qcclSystemError, "out of memory");
    }
    memreg_list = l;
    memreg_cap = cap;
  }
  memreg_list[n] = (memreg_region_t){p, bytes, fd, memreg_next_id++};
  atomic_store_explicit(&memreg_n, n + 1, memory_order_release);
  pthread_mutex_unlock(&memreg_mu);
  *ptr = p;
  return qcclSuccess;
}

qcclResult_t qcclMemFree(void* ptr) {
  err_clear();
  if (ptr == NULL) return qcclSuccess;
  memreg_region_t r;
  int found = 0;
  pthread_mutex_lock(&memreg_mu);
  size_t n = atomic_load_explicit(&memreg_n, memory_order_relaxed);
  for (size_t i = 0; i < n; i++)
    if (memreg_list[i].base == ptr) {
      r = memreg_list[i];
      memreg_list[i] = memreg_list[n - 1];
      atomic_store_explicit(&memreg_n, n - 1, memory_order_release);
      found = 1;
      break;
    }
  pthread_mutex_unlock(&memreg_mu);
  if (!found) return QCCL_ERR(qcclInvalidArgument, "ptr=%p was not returned by qcclMemAlloc", ptr);
  munmap(r.base, r.size);
  close(r.fd);
  return qcclSuccess;
}
