/*
 * memreg.h - host memory the other ranks of a host can map (qcclMemAlloc).
 *
 * qcclMemAlloc backs each allocation with its own memfd, mapped shared, and
 * records it in the process's registry (a mutex-protected list: the one
 * piece of process-wide state besides the logger, the parsed environment
 * and the CPU feature table, as NCCL's ncclMemAlloc has one). A collective
 * whose send buffer lies in such memory publishes (region id, fd, offset)
 * in its control line, and the peers of its host map the region through
 * /proc/<pid>/fd/<fd> (shm_map.c) and copy from it directly: one copy
 * instead of two. The id tells a peer's cached mapping from a new region
 * that reuses the fd number.
 */
#ifndef QCCL_CORE_MEMREG_H_
#define QCCL_CORE_MEMREG_H_

#include <stddef.h>
#include <stdint.h>

#include "qccl.h"

typedef struct {
  char* base;
  size_t size;
  int fd;
  uint64_t id; /* > 0, unique in this process */
} memreg_region_t;

/* 1 and *out when [p, p + len) lies inside one region, else 0. */
int memreg_find(const void* p, size_t len, memreg_region_t* out);

/* The nameless memory both qcclMemAlloc and the node segment
 * (transport/shm.c) use: a memfd (close-on-exec) of bytes bytes, its space
 * reserved when reserve is set (a full tmpfs is an error now, not a SIGBUS
 * later). Nothing is left anywhere when every holder exits or is killed. */
qcclResult_t memreg_memfd_create(const char* tag, size_t bytes, int reserve, int* fd);

/* Opens process pid's descriptor fd (/proc/<pid>/fd/<fd>) read-write and
 * gives its size: how a peer of the same host reaches such memory (the
 * ptrace read permission that process_vm_readv needs too). Returns 0, or
 * the errno of the failed step. */
int memreg_memfd_open(int pid, int fd, int* out, size_t* bytes);

#endif /* QCCL_CORE_MEMREG_H_ */
