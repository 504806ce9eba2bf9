/*
 * shm_map.c - direct reads from peers' qcclMemAlloc memory (core/memreg.h).
 *
 * A rank whose data for a chunk lies in a qcclMemAlloc region publishes the
 * region's id, its memfd number and the data's offset in its control line
 * (per chunk parity, like the slots, so a peer still reading chunk g-1 never
 * sees chunk g+1's values). A peer maps the region once, read-only, through
 * /proc/<pid>/fd/<fd> (the same ptrace permission that process_vm_readv
 * needs, probed at init: cma.c), keeps the mapping while the id stays, and
 * copies straight from it. Publishing is only done when every local rank
 * may map every other's memory, so the writer can skip staging safely.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"
#include "core/memreg.h"
#include "transport/shm.h"

int shm_reg_publish(shm_t* s, uint64_t g, const void* buf, size_t len) {
  memreg_region_t r;
  int ok = s->peers_readable && len > 0 && memreg_find(buf, len, &r);
  shm_ctrl_t* c = &s->ctrl[s->rank];
  c->reg[g & 1].id = ok ? r.id : 0;
  c->reg[g & 1].fd = ok ? r.fd : -1;
  c->reg[g & 1].off = ok ? (uint64_t)((const char*)buf - r.base) : 0;
  return ok;
}

qcclResult_t shm_reg_peer(shm_t* s, int peer, uint64_t g, const char** out) {
  const shm_ctrl_t* c = &s->ctrl[peer];
  uint64_t id = c->reg[g & 1].id;
  *out = NULL;
  if (id == 0) return qcclSuccess;
  if (s->maps == NULL) {
    s->maps = calloc((size_t)s->nranks, sizeof *s->maps);
    if (s->maps == NULL) return QCCL_ERR(qcclSystemError, "out of memory");
  }
  shm_peer_map_t* m = &s->maps[peer];
  if (m->id != id) {
    if (m->id != 0) munmap(m->base, m->size);
    m->id = 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", c->pid, c->reg[g & 1].fd);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
      int e = errno;
      if (fd >= 0) close(fd);
      qcclResult_t r = shm_check_peers(s, peer);
      if (r != qcclSuccess) return r;
      return QCCL_ERR(qcclSystemError, "rank %d cannot open rank %d's qcclMemAlloc memory (%s): %s",
                      s->rank, peer, path, strerror(e));
    }
    void* p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
      return QCCL_ERR(qcclSystemError, "rank %d cannot map rank %d's qcclMemAlloc memory: %s",
                      s->rank, peer, strerror(e));
    *m = (shm_peer_map_t){id, p, (size_t)st.st_size};
  }
  if (c->reg[g & 1].off >= m->size)
    return QCCL_ERR(qcclInternalError, "rank %d published offset %llu past its region (%zu bytes)",
                    peer, (unsigned long long)c->reg[g & 1].off, m->size);
  *out = m->base + c->reg[g & 1].off;
  return qcclSuccess;
}

void shm_reg_unmap(shm_t* s) {
  if (s->maps == NULL) return;
  for (int j = 0; j < s->nranks; j++)
    if (s->maps[j].id != 0) munmap(s->maps[j].base, s->maps[j].size);
  free(s->maps);
  s->maps = NULL;
}
