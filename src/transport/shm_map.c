/*
 * shm_map.c - direct reads from peers' qcclMemAlloc memory (core/memreg.h).
 *
 * A rank whose data for a chunk lies in a qcclMemAlloc region publishes the
 * region's id, its memfd number and the data's offset in its control line
 * (per chunk parity, like the slots, so a peer still reading chunk g-1 never
 * sees chunk g+1's values). A peer maps the region once, read-write (the
 * shared AllGather and AlltoAll write peers' receive buffers), through
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

int shm_reg_find(shm_t* s, const void* buf, size_t len, shm_reg_t* reg) {
  memreg_region_t r;
  int ok = s->peers_readable && len > 0 && memreg_find(buf, len, &r);
  reg->id = ok ? r.id : 0;
  reg->fd = ok ? r.fd : -1;
  reg->off = ok ? (uint64_t)((const char*)buf - r.base) : 0;
  reg->tag = 0;
  return ok;
}

void shm_reg_publish(shm_t* s, uint64_t g, int which, const shm_reg_t* reg) {
  shm_ctrl_t* c = &s->ctrl[s->rank];
  c->reg[g & 1][which].id = reg->id;
  c->reg[g & 1][which].fd = reg->fd;
  c->reg[g & 1][which].off = reg->off;
  c->reg[g & 1][which].tag = reg->tag;
}

/* The map of region id of peer: the one mapped, or the least recently used
 * entry of the peer (unmapped, id 0) to map it into. */
static shm_peer_map_t* shm_map_entry(shm_t* s, int peer, uint64_t id) {
  shm_peer_map_t* e = &s->maps[(size_t)peer * SHM_PEER_MAPS];
  shm_peer_map_t* victim = e;
  for (int k = 0; k < SHM_PEER_MAPS; k++) {
    if (e[k].id == id) return &e[k];
    if (e[k].used < victim->used) victim = &e[k];
  }
  if (victim->id != 0) munmap(victim->base, victim->size);
  victim->id = 0;
  return victim;
}

qcclResult_t shm_reg_peer(shm_t* s, int peer, uint64_t g, int which, size_t len, const char** out) {
  const shm_ctrl_t* c = &s->ctrl[peer];
  uint64_t id = c->reg[g & 1][which].id;
  *out = NULL;
  /* nowhere to map (a buffer read single copy is not mapped: shm_reg_peer_cma) */
  if (id == 0 || id == SHM_REG_CMA) return qcclSuccess;
  if (s->maps == NULL) {
    s->maps = calloc((size_t)s->nranks * SHM_PEER_MAPS, sizeof *s->maps);
    if (s->maps == NULL) return QCCL_ERR(qcclSystemError, "out of memory");
  }
  shm_peer_map_t* m = shm_map_entry(s, peer, id);
  m->used = ++s->map_clock;
  if (m->id != id) {
    int fd;
    size_t size;
    int e = memreg_memfd_open(c->pid, c->reg[g & 1][which].fd, &fd, &size);
    if (e != 0) {
      qcclResult_t r = shm_check_peers(s, peer);
      if (r != qcclSuccess) return r;
      return QCCL_ERR(qcclSystemError,
                      "rank %d cannot open rank %d's qcclMemAlloc memory (/proc/%d/fd/%d): %s",
                      s->rank, peer, (int)c->pid, (int)c->reg[g & 1][which].fd, strerror(e));
    }
    void* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    e = errno;
    close(fd);
    if (p == MAP_FAILED)
      return QCCL_ERR(qcclSystemError, "rank %d cannot map rank %d's qcclMemAlloc memory: %s",
                      s->rank, peer, strerror(e));
    *m = (shm_peer_map_t){id, p, size, s->map_clock};
  }
  uint64_t off = c->reg[g & 1][which].off;
  if (off >= m->size || len > m->size - off)
    return QCCL_ERR(qcclInternalError,
                    "rank %d published %zu bytes at offset %llu, past its region (%zu bytes)", peer,
                    len, (unsigned long long)off, m->size);
  *out = m->base + off;
  return qcclSuccess;
}

int shm_reg_peer_cma(const shm_t* s, int peer, uint64_t g, int which, uintptr_t* addr) {
  const shm_ctrl_t* c = &s->ctrl[peer];
  if (c->reg[g & 1][which].id != SHM_REG_CMA) return 0;
  *addr = (uintptr_t)c->reg[g & 1][which].off;
  return 1;
}

int32_t shm_reg_peer_aux(const shm_t* s, int peer, uint64_t g, int which) {
  return s->ctrl[peer].reg[g & 1][which].fd;
}

uint32_t shm_reg_peer_tag(const shm_t* s, int peer, uint64_t g, int which) {
  return s->ctrl[peer].reg[g & 1][which].tag;
}

int shm_reg_peer_published(const shm_t* s, int peer, uint64_t g, int which) {
  return s->ctrl[peer].reg[g & 1][which].id != 0;
}

void shm_reg_unmap(shm_t* s) {
  if (s->maps == NULL) return;
  for (size_t k = 0; k < (size_t)s->nranks * SHM_PEER_MAPS; k++)
    if (s->maps[k].id != 0) munmap(s->maps[k].base, s->maps[k].size);
  free(s->maps);
  s->maps = NULL;
}
