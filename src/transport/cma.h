/*
 * cma.h - single-copy transfers between the ranks of one host through
 * Linux cross-memory attach (process_vm_readv).
 *
 * A large AllGather or AlltoAll through the shared segment copies every
 * byte twice (into a slot, out of it); with CMA a rank reads its peers'
 * send buffers straight into its receive buffer, once, as Open MPI does for
 * large messages. The kernel pins the peer's pages and copies; nothing is
 * mapped or registered ahead.
 *
 * Whether it can be used is decided once per segment (cma_probe): every
 * local rank reads a random word from every other rank's memory, and the
 * ranks agree through the bootstrap, so that all choose the same
 * algorithm. A kernel without CMA (ENOSYS), a ptrace policy that forbids it
 * (Yama, seccomp: EPERM), or ranks in different pid namespaces (a wrong
 * word or ESRCH) leave the two-copy algorithms in place.
 *
 * Protocol of a single-copy call, inside one chunk g of the segment (so the
 * step sequence stays the same on every rank): each rank publishes the
 * address of its buffer in its control line and posts 3g+1; a reader waits
 * for the owner's 3g+1, reads, and posts 3g+3; nobody returns before every
 * rank posted 3g+3, since a buffer must stay valid until all its readers are
 * done.
 */
#ifndef QCCL_TRANSPORT_CMA_H_
#define QCCL_TRANSPORT_CMA_H_

#include <stddef.h>
#include <stdint.h>

#include "core/bootstrap.h"
#include "qccl.h"
#include "transport/shm.h"

/* Default of QCCL_CMA_MIN_BYTES, the smallest block (bytes one rank reads
 * from one peer in one call) that goes single copy: 0, off. Measured on the
 * 2-core development machines (docs/PERF.md, "Single-copy path"), the
 * two-copy path beats it at every size: its slots stay in cache, so memory
 * sees each byte once either way, and it writes the output with
 * non-temporal stores, while the kernel's copy reads every destination line
 * first and pins the peer's pages call by call. */
#define CMA_MIN_BYTES_DEFAULT 0

/* Decides s->cma_min for the segment: QCCL_CMA_MIN_BYTES (0 = off) when every
 * local rank can read every other's memory, else 0. Collective over boot
 * (one allgather); all ranks end with the same value. Called by
 * shm_open_segment once every rank has attached and published its pid. */
qcclResult_t cma_probe(shm_t* s, bootstrap_t* boot);

/* 1 when a call whose per-peer block is bytes goes single copy. The same on
 * every rank for the same call. */
static inline int cma_use(const shm_t* s, size_t bytes) {
  return s->cma_min > 0 && bytes >= s->cma_min;
}

/* Starts a single-copy call: takes one chunk of the segment, publishes buf
 * (the memory peers will read from; NULL for a rank nobody reads) and posts
 * 3g+1. Returns g. */
qcclResult_t cma_begin(shm_t* s, const void* buf, uint64_t* g);

/* Reads bytes at offset off of peer's published buffer into dst, after
 * waiting until the peer published it in chunk g. A peer that is gone gives
 * qcclRemoteError naming it; other failures qcclSystemError with errno's
 * text. */
qcclResult_t cma_read(shm_t* s, int peer, uint64_t g, size_t off, void* dst, size_t bytes);

/* Ends a single-copy call: posts 3g+3 and waits until every rank did, so
 * that published buffers are no longer read when their owners return. */
qcclResult_t cma_end(shm_t* s, uint64_t g);

#endif /* QCCL_TRANSPORT_CMA_H_ */
