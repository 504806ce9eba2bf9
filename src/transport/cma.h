/*
 * cma.h - single-copy transfers between the ranks of one host through
 * Linux cross-memory attach (process_vm_readv, and process_vm_writev for
 * Gather's writers).
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
 * Protocol: inside the staged algorithms' chunks (so the step sequence is
 * the same on every rank whatever each chose), a rank that offers its
 * buffer publishes its address for the chunk instead of staging and posts
 * 3g+1; a reader waits for the owner's 3g+1 and reads the whole block at
 * the first chunk; the owner does not return before every rank posted the
 * last chunk's 3g+3, since its buffer must stay valid until all its readers
 * are done (the same rule as for qcclMemAlloc buffers read in place).
 */
#ifndef QCCL_TRANSPORT_CMA_H_
#define QCCL_TRANSPORT_CMA_H_

#include <stddef.h>
#include <stdint.h>

#include "core/bootstrap.h"
#include "qccl.h"
#include "transport/shm.h"

/* Default of QCCL_CMA_MIN_BYTES, the smallest block (bytes one rank reads
 * from one peer in one call) that a rank whose buffer is not qcclMemAlloc
 * memory lets its peers read single copy: 64 KiB. Below, the staged copy
 * through the segment's slots (in cache) is as fast; from there, single
 * copy was 1.2-1.6x faster for AllGather and AlltoAll at 2 and 4 ranks
 * (docs/PERF.md, "Single copy by default"), except AllGather on more than
 * CMA_ALLGATHER_MAX_RANKS ranks (4 ranks: 0.79-1.08x, every rank reading
 * W-1 blocks at once), which stays staged. AllGather blocks above 8 MiB
 * were staged too until 2026-12-05 (32-128 MiB blocks 0.96-0.99x on the
 * guest of 2026-12-01, where the staged copy's streaming stores caught
 * up); on the guest of 2026-12-05 single copy took 0.84-0.87x the staged
 * time there, and a single-copy call is now one chunk (docs/PERF.md,
 * "AllGather single copy at every size on 2 ranks"). A buffer in
 * qcclMemAlloc memory is read in place by the peers instead (faster than
 * either).
 *
 * Where the host's ranks fit its cores the default is
 * CMA_MIN_BYTES_ROOMY, 16 KiB: on 2 ranks (2-vCPU Intel guest) AllGather,
 * AlltoAll and Scatter of 32-64 KiB (16-32 KiB blocks) took 0.62-0.71x the
 * staged time and exchanges of 16-32 KiB 0.57-0.60x; 4 KiB gained at 16
 * KiB calls but lost 1.12-1.36x at 8 KiB. On 4 ranks of the same 2 cores
 * 16 KiB read 0.86-1.08x (the owner waits for readers that may not be
 * running) and 4 KiB up to 1.70x, so an oversubscribed host keeps 64 KiB
 * (docs/PERF.md, "Single copy from 16 KiB where the ranks fit the
 * cores"). */
#define CMA_MIN_BYTES_DEFAULT ((size_t)64 << 10)
#define CMA_MIN_BYTES_ROOMY ((size_t)16 << 10)
#define CMA_ALLGATHER_MAX_RANKS 2
/* AllReduce (allreduce.c): its parts single copy from CMA_ALLREDUCE_MIN_BLOCK
 * bytes per part (and CMA's threshold) in calls of at most
 * CMA_ALLREDUCE_MAX_BYTES on at most CMA_ALLREDUCE_MAX_RANKS ranks. On 2
 * ranks 1-16 MiB calls ran 0.65-0.90x the staged time, 256 KiB 1.15x and
 * 64 MiB 1.04x; on 4 ranks 1.03-1.62x at every size (docs/PERF.md, "Plain
 * buffers against the four peers at 2, 4 and 8 ranks") */
#define CMA_ALLREDUCE_MIN_BLOCK ((size_t)512 << 10)
#define CMA_ALLREDUCE_MAX_BYTES ((size_t)16 << 20)
#define CMA_ALLREDUCE_MAX_RANKS 2
/* Broadcast (broadcast.c): the root's buffer single copy in calls of
 * CMA_BROADCAST_MIN_BYTES to CMA_BROADCAST_MAX_BYTES on at most
 * CMA_BROADCAST_MAX_RANKS ranks. On 2 ranks 64 KiB-1 MiB ran 0.47-0.64x
 * the staged time, 4 MiB 0.99x, 16-64 MiB 1.07-1.72x; on 4 ranks 0.92x at
 * 64 KiB, 1.10-1.76x above (docs/PERF.md, "Plain buffers against the four
 * peers at 2, 4 and 8 ranks") */
#define CMA_BROADCAST_MIN_BYTES ((size_t)64 << 10)
#define CMA_BROADCAST_MAX_BYTES ((size_t)2 << 20)
#define CMA_BROADCAST_MAX_RANKS 2

/* The speed probe (cma_probe). Single copy replaces two copies through
 * the segment (the second reading lines the first left in a cache) by one
 * copy in the kernel, which pins the peer's pages and copies page by page.
 * How fast that copy is depends on the machine: on the Intel guests where
 * the thresholds above were measured single copy won; on a 2-vCPU AMD EPYC
 * guest process_vm_readv of 256 KiB in cache ran at 0.27-0.33 of memcpy's
 * speed, and with the thresholds above single copy took 1.3-2.1x the
 * staged time at 256 KiB-1 MiB in every collective that used it on 2
 * ranks, 1.2-1.5x for every exchange size (docs/PERF.md, "The speed of
 * the kernel's copy"). So at init each rank times reads of CMA_SPEED_BYTES
 * from its next peer's memory against memcpy of the same bytes (best of
 * CMA_SPEED_REPS each, both in cache) and the ranks agree on the slowest
 * ratio; below CMA_SPEED_MIN single copy is off for plain buffers (the
 * two-copy algorithms everywhere but Scatter on a crowded host, below:
 * the segment's cma_slow; qcclMemAlloc buffers are still read in place),
 * unless QCCL_CMA_MIN_BYTES is set on any rank, which wins.
 *
 * 1 MiB, not 256 KiB, until 2026-12-04: at 256 KiB a 2-vCPU Intel Xeon
 * guest, where single copy took 0.37-0.80x the staged time in AlltoAll,
 * SendRecv and 2-rank AllGather from 256 KiB, read 0.47-0.57 (best of 10),
 * and its inits chose either way from one run to the next; at 1 MiB a
 * standalone probe read 0.68-0.73 there and 0.32 on the AMD guest, and the
 * Intel guest's inits 0.51-0.69 (2, 4 and 8 ranks, the slowest rank's).
 * CMA_SPEED_MIN sat between the two at 0.45 (docs/PERF.md, "A probe that
 * tells the two machines apart"). Later, on a Xeon guest of the same kind,
 * best of 10 at 1 MiB read 0.39-0.70 over 30 2-rank inits, 6 of them below
 * 0.45: a run in five went staged, and its 256 KiB exchange took 28 us
 * against 10 single copy. Best of 30 at 1 MiB read 0.43-0.72 over 80 inits,
 * then, the machine having changed mode, 0.40-0.48 over 20, while single
 * copy still won by 1.6-3x; best of 30 at 256 KiB (the two buffers well
 * inside a 2 MiB L2) read 0.47-0.56 over 40 inits in that mode, 0.53-0.55
 * at 4 and 8 ranks. So 256 KiB, best of 30 (~0.5 ms), and a floor of 0.40,
 * still above the AMD guest's 0.28-0.34 at 256 KiB (docs/PERF.md, "The
 * probe's tail"). */
#define CMA_SPEED_BYTES ((size_t)256 << 10)
#define CMA_SPEED_REPS 30
#define CMA_SPEED_MIN 0.40

/* Decides s->cma_min for the segment: QCCL_CMA_MIN_BYTES (0 = off) when every
 * local rank can read every other's memory, else 0; where the variable is
 * not set, also 0 when the speed probe (above) finds the kernel's copy too
 * slow. Collective over boot (one allgather); all ranks end with the same
 * value. Called by shm_open_segment once every rank has attached and
 * published its pid; frees s->cma_buf.
 *
 * like (NULL, or a segment of the same ranks, every rank passing its own):
 * its thresholds are taken and the speed probe does not run; whether the
 * peers' memory can be read at all is still this segment's finding. A lane
 * passes its communicator's lane 0 (comm_lane_make): the probe measures
 * the machine, not the lane, and a lane's own probe ran inside the call
 * that made it, while other ranks could still be copying the call before:
 * once, with 4 ranks on 2 vCPUs, lane 1 read 0.19 of memcpy's speed where
 * lane 0 had read 0.48, which put every other collective (those on lane 1)
 * through the segment twice while the rest went single copy; the other
 * inits read 0.43-0.56, near the floor, so two probes can fall either side
 * of it (docs/PERF.md, "A lane's own probe"). Until 2026-12-06 the lane
 * probed and then took lane 0's values; the probe's ~0.5 ms are now
 * spared too. Every rank's lane 0 holds the same agreed values, so the
 * lanes stay agreed. */
qcclResult_t cma_probe(shm_t* s, bootstrap_t* boot, const shm_t* like);

/* 1 when a block of bytes may be read single copy. */
static inline int cma_use(const shm_t* s, size_t bytes) {
  return s->cma_min > 0 && bytes >= s->cma_min;
}

/* The split of a rooted call (broadcast.c, scatter.c, gather.c, "Split"):
 * on 2 ranks, blocks above `above` bytes and from CMA's threshold, of at
 * least two whole units and fewer than 2^31 chunks counting a partial last
 * one (Gather in place stages them all: node_split_plan; the count
 * travels in a reg's 32-bit fd). */
static inline int cma_split_use(const shm_t* s, int nranks, size_t block, size_t above,
                                size_t unit) {
  return nranks == 2 && block > above && cma_use(s, block) && block / unit >= 2 &&
         (block + unit - 1) / unit < ((size_t)1 << 31);
}

/* Broadcast above CMA_BROADCAST_MAX_BYTES on 2 ranks from an out-of-place
 * root with a plain sendbuff: the first half of the chunks staged, the
 * rest read single copy by the other rank a piece per staged chunk
 * (broadcast.c, "Split"). Staged, the root copies every byte twice (its
 * slot and its own recvbuff) and the reader once. At least two chunks. */
static inline int cma_broadcast_split_use(const shm_t* s, int nranks, size_t bytes) {
  return cma_split_use(s, nranks, bytes, CMA_BROADCAST_MAX_BYTES, s->chunk_bytes);
}

/* AllGather's single copy (allgather.c): blocks of bytes on w ranks. The
 * same on every rank (the segment's and the count's), so every rank reads
 * every block whole in the first chunk, single copy or mapped. */
static inline int cma_allgather_use(const shm_t* s, int w, size_t bytes) {
  return w <= CMA_ALLGATHER_MAX_RANKS && cma_use(s, bytes);
}

/* AlltoAll on a crowded host (more ranks than cores) where single copy is
 * off for the speed probe alone (cma_slow), whatever the handoffs' mode:
 * calls whose bytes on the node (bytes per peer x nranks^2, the ranks'
 * outputs together) are CMA_A2A_CROWDED_MIN_TOTAL up to (not including)
 * CMA_A2A_CROWDED_MAX_TOTAL, on at most CMA_A2A_CROWDED_MAX_RANKS ranks
 * (so pieces of 128 KiB and more), read single copy. There the
 * staged call's three buffers per rank (send, slot, receive: 24 MiB on
 * the node) overflow the 32 MiB L3 the ranks share with the host, and
 * single copy's two (16 MiB) do not: on the AMD guest (2 vCPUs, shared
 * cache) 8 ranks' calls of 1 MiB (128 KiB pieces) took 0.72-0.82x the
 * staged time and 4 ranks' of 2 MiB (512 KiB pieces) 0.84x, where half
 * that (4 MiB on the node) lost 1.12-1.15x and twice that (16 MiB) tied
 * the staged call, which from there streams its output and wins
 * (alltoall.c, a2a_stream) (docs/PERF.md, "A crowded host's AlltoAll by
 * its bytes on the node"). The same on every rank (the size, the rank
 * count and the segment's agreed values), so the call is one chunk, as
 * cma_a2a_use's. Without a shared cache the handoffs' mode would offer
 * these pieces too, and more (cma_mode_offer, 64-512 KiB). */
#define CMA_A2A_CROWDED_MIN_TOTAL ((size_t)8 << 20)
#define CMA_A2A_CROWDED_MAX_TOTAL ((size_t)16 << 20)
#define CMA_A2A_CROWDED_MAX_RANKS 8
static inline int cma_a2a_crowded(const shm_t* s, int nranks, size_t bytes) {
  if (!s->cma_slow || shm_roomy(s) || nranks > CMA_A2A_CROWDED_MAX_RANKS ||
      bytes >= CMA_A2A_CROWDED_MAX_TOTAL)
    return 0;
  size_t node = bytes * (size_t)nranks * (size_t)nranks;
  return node >= CMA_A2A_CROWDED_MIN_TOTAL && node < CMA_A2A_CROWDED_MAX_TOTAL;
}

/* AlltoAll (alltoall.c): single copy from CMA_MIN_BYTES_ROOMY per peer on
 * any host where single copy is on, unless QCCL_CMA_MIN_BYTES chose the
 * threshold (then that one). Every rank reads W-1 pieces and each piece
 * is read once, so the oversubscribed host's reason for 64 KiB (an owner
 * waiting for readers that may not run) costs less than the second copy:
 * on 8 ranks of 2 cores calls of 128 and 256 KiB (16 and 32 KiB pieces)
 * took 0.63-0.78x the staged time, on 4 ranks 128 KiB 0.80x and 64 KiB
 * 1.03x (16 KiB pieces); 4-8 KiB pieces lost (8 ranks 32 KiB: 1.9x)
 * (docs/PERF.md, "AlltoAll single copy from 16 KiB"). And a crowded
 * host's calls of cma_a2a_crowded where single copy is otherwise off. */
static inline int cma_a2a_use(const shm_t* s, int nranks, size_t bytes) {
  return (s->cma_a2a_min > 0 && bytes >= s->cma_a2a_min) || cma_a2a_crowded(s, nranks, bytes);
}

/* Scatter (scatter.c): the readers read their blocks single copy from CMA's
 * threshold, at most CMA_SCATTER_MAX2_BYTES per block on 2 ranks. On 2
 * ranks blocks of 128-512 KiB took 0.57-0.64x the staged time, 2 MiB
 * 1.02x, 8 MiB 1.11x, 32 MiB 1.53x (one reader copying alone where staged
 * the two cores copy at once); on 4 and 8 ranks, where the staged root
 * copies every block alone, 0.48-0.85x from 64 KiB blocks up to 16 MiB
 * (docs/PERF.md, "Single copy for rooted calls and sends") */
#define CMA_SCATTER_MAX2_BYTES ((size_t)2 << 20)

/* Where the speed probe turned single copy off (the AMD guest), Scatter
 * still reads single copy on a host with CMA_SCATTER_CROWDED_PER_CORE
 * ranks per core or more, in calls from CMA_SCATTER_CROWDED_MIN_TOTAL
 * bytes in all: staged, the root copies every block alone on one core,
 * which it shares with the readers; single copy, the readers read at
 * once on every core. Cores: the node's agreed count (hwloc's processing
 * units: hardware threads on an SMT host). Blocks of at least
 * CMA_MIN_BYTES_ROOMY. AMD guest, 8 ranks on 2 vCPUs: 4 MiB 0.92-0.99x the
 * staged time, 16 MiB 0.66-0.71x, 64 MiB 0.84-0.94x, 1 MiB 1.22-2.37x;
 * 4 ranks mixed (4-16 MiB 0.73-0.98x, 64 MiB 1.03-1.26x), so not there
 * (docs/PERF.md, "Scatter on a crowded host reads single copy") */
#define CMA_SCATTER_CROWDED_PER_CORE 4
#define CMA_SCATTER_CROWDED_MIN_TOTAL ((size_t)4 << 20)
static inline int cma_scatter_crowded(const shm_t* s, int nranks, size_t block) {
  return s->cma_slow && nranks >= CMA_SCATTER_CROWDED_PER_CORE * s->ncores &&
         block * (size_t)nranks >= CMA_SCATTER_CROWDED_MIN_TOTAL && block >= CMA_MIN_BYTES_ROOMY;
}
static inline int cma_scatter_use(const shm_t* s, int nranks, size_t block) {
  return (cma_use(s, block) && (nranks > 2 || block <= CMA_SCATTER_MAX2_BYTES)) ||
         cma_scatter_crowded(s, nranks, block);
}

/* Scatter above that on 2 ranks, from a plain sendbuff when the root's own
 * block is copied (not in place): half of the reader's block staged, the
 * rest read single copy a piece per staged chunk, as Broadcast's split
 * (scatter.c, "Split"). At least two chunk pieces (chunk_bytes / 2 each). */
static inline int cma_scatter_split_use(const shm_t* s, int nranks, size_t block) {
  return cma_split_use(s, nranks, block, CMA_SCATTER_MAX2_BYTES, s->chunk_bytes / 2);
}

/* Gather (gather.c), blocks from CMA's threshold, on 2 ranks up to
 * CMA_GATHER_SPLIT_MIN2_BYTES blocks (above: cma_gather_split_use) and
 * on more in calls where the other ranks send at least
 * CMA_GATHER_PUSH_MIN_MOVED bytes in all: the root publishes its recvbuff
 * and every other rank writes its block into it with process_vm_writev,
 * the writers at once, where a root reading them single copy copied
 * every block alone. Since the root copies its own block after its first
 * post (while they write; before, every writer waited for that copy), 2
 * ranks took 0.64-0.89x the time of the root's reads or of staging from 64
 * KiB to 512 KiB and 0.41-0.73x from 1 to 64 MiB, and 4 ranks 0.66x at 512
 * KiB (three 128 KiB blocks) but 1.48x at 256 KiB (three of 64 KiB), so
 * the floor went from 448 to 256 KiB, and the root's single-copy reads
 * (chosen before on 2 ranks for 128-512 KiB blocks, on more where the
 * writers were not) are gone (docs/PERF.md, "Gather on 2 ranks: the
 * other writes"). Measured before that change, on the
 * 2-vCPU Xeon guest (7 interleaved rounds, -n 20 -w 5) 8 ranks took
 * 0.50-0.60x the time of the root's reads (or of staging) at 512 KiB-2
 * MiB, 0.60-0.62x at 4-16 MiB and 0.81x at 64 MiB; 4 ranks 0.80-0.87x at
 * 1-4 MiB, 0.66-0.68x at 16 MiB (5 rounds) and 0.97x at 64 MiB, but 1.22-
 * 1.24x at 512 KiB, where the root reads its three 128 KiB blocks in cache
 * at 19 GB/s (docs/PERF.md, "Gather: the other ranks write"). */
#define CMA_GATHER_PUSH_MIN_MOVED ((size_t)256 << 10)
static inline int cma_gather_push_use(const shm_t* s, int nranks, size_t block) {
  return cma_use(s, block) &&
         (nranks == 2 || (size_t)(nranks - 1) * block >= CMA_GATHER_PUSH_MIN_MOVED);
}

/* Gather on 2 ranks, blocks above CMA_GATHER_SPLIT_MIN2_BYTES: the writer
 * writes only part of its block in the kernel and stages the rest, as
 * many chunks as the root asks (gather.c, "Split": half when the root
 * copies its own block, all in place). The same on both ranks (the size
 * and the segment's). At least two chunks. */
#define CMA_GATHER_SPLIT_MIN2_BYTES ((size_t)2 << 20)
static inline int cma_gather_split_use(const shm_t* s, int nranks, size_t block) {
  return cma_split_use(s, nranks, block, CMA_GATHER_SPLIT_MIN2_BYTES, s->chunk_bytes);
}

/* Reduce (reduce.c), on 2 ranks only, calls of CMA_REDUCE_MIN2_BYTES to
 * CMA_REDUCE_MAX2_BYTES (and from CMA's threshold): the root, the one
 * reducer there, reads the other rank's whole sendbuff with
 * process_vm_readv straight into recvbuff and reduces its own into it,
 * where staged the other rank copied it into its slot and the root read
 * the lines that copy had just written (Open MPI's shape: a 256 KiB call
 * took 16 us there against qccl's 24 staged; docs/PERF.md, "Reduce on 2
 * ranks: the root reads single copy"). Two reducers each reading the
 * other's part single copy lost to one staged reducer at 256 KiB-16 MiB,
 * and on 4 ranks single copy took 1.03-1.65x the staged time ("Reduce on
 * 2 ranks: one reducer to 16 MiB"). */
#define CMA_REDUCE_MIN2_BYTES ((size_t)128 << 10)
#define CMA_REDUCE_MAX2_BYTES ((size_t)512 << 10)
static inline int cma_reduce_use(const shm_t* s, int nranks, size_t bytes) {
  return nranks == 2 && cma_use(s, bytes) && bytes >= CMA_REDUCE_MIN2_BYTES &&
         bytes <= CMA_REDUCE_MAX2_BYTES;
}

/* Sends and receives through the segment (shm_p2p.c): a message single copy
 * when it does not fit in the pair's ring with its header (and from CMA's
 * threshold), with no upper limit; so whether a send is eager depends on
 * the ring only, not on whether single copy is on (measured below with
 * 256 KiB rings; 1 MiB up to 4 ranks since 2026-12-06, shm.c). A message
 * that fits is sent eagerly, as before single copy: its send may complete
 * before the receive is posted, and programs that send first on both
 * sides keep working (MPI calls them unsafe, but they ran); a larger one
 * waited for its receiver already. On 2 ranks (2 cores) 64 KiB-16 MiB
 * messages took 0.52-0.80x the staged time and 64 MiB 1.02x; on 4 ranks
 * 64 KiB took 1.33x (the sender waits for a reader that is not running,
 * where the ring let it go on), 256 KiB-64 MiB
 * 0.60-0.97x (16 MiB once 1.26x, then 0.89x in 5 rounds) (docs/PERF.md,
 * "Single copy for rooted calls and sends") */
static inline int cma_p2p_use(const shm_t* s, size_t bytes, size_t header) {
  return cma_use(s, bytes) && bytes + header > s->chan_bytes;
}

/* For a rank's buffer buf that is not in qcclMemAlloc memory, with blocks
 * of block bytes (at most max, 0: no limit): 1, and reg set to "read it
 * single copy at buf" (published like a qcclMemAlloc region: shm.h,
 * SHM_REG_CMA), when its peers should read it so instead of from its
 * slots; else 0. Each rank decides for its own buffer; readers follow what
 * each peer published. */
int cma_offer(const shm_t* s, const void* buf, size_t block, size_t max, shm_reg_t* reg);

/* cma_offer for AlltoAll on nranks: where cma_a2a_use says. */
int cma_a2a_offer(const shm_t* s, const void* buf, int nranks, size_t block, shm_reg_t* reg);

/* cma_offer for Scatter: where cma_scatter_use says (its crowded-host
 * case also where single copy is otherwise off). */
int cma_scatter_offer(const shm_t* s, const void* buf, int nranks, size_t block, shm_reg_t* reg);

/* Single copy while this rank's handoffs run slow (cma_mode_offer). The
 * speed probe compares the kernel's copy with a memcpy in one core's
 * cache, which does not change when the host moves the vCPUs apart; the
 * staged path's two copies do. On the AMD guest without a shared cache
 * (cache-line round trip 320-380 ns instead of 60-90; the rank's handoffs
 * then stream, shm_handoff.c) a 2-rank AlltoAll or AllGather of 512 KiB-4
 * MiB took 0.76-0.95x the staged time single copy, at parity with Open
 * MPI's single copy, where with a shared cache single copy took 1.2-1.8x;
 * 128 KiB blocks (through the exchange cells) lost 1.10-1.18x, and on 4
 * ranks AlltoAll with 64-256 KiB pieces gained nothing (1.01-1.04x)
 * (docs/PERF.md, "Single copy while the handoffs stream"). So where single
 * copy is off for the probe alone (the segment's cma_slow: every rank can
 * read every other), on 2 ranks, a rank whose handoffs stream offers its
 * AlltoAll sendbuff and its AllGather block single copy, for blocks of
 * CMA_MODE_MIN_BYTES to CMA_MODE_MAX_BYTES (in effect above the exchange
 * cells' blocks, QCCL_SHM_XCH_BYTES, 128 KiB, which take smaller ones
 * first), and on 3 to CMA_MODE_A2A_MAX_RANKS its AlltoAll pieces up to
 * CMA_MODE_MAX_MORE_BYTES, inside the staged chunks (where all offer, the
 * call ends after the first: alltoall.c). More ranks gained nothing while
 * each learned its mode from its own copies; with the mode from the
 * attach probe of a crowded host (shm_handoff_probe.c) a 4-rank AlltoAll
 * of 256 KiB-1 MiB without a shared cache took 0.52-0.88x the staged time
 * and 8 ranks 0.58-0.71x, unchanged with one; 1 MiB pieces took 1.07x on
 * 4 ranks and 2 MiB 1.29x, so 512 KiB at most there (docs/PERF.md, "Four
 * ranks read single copy by the host's mode"):
 * each rank decides for its own buffer, call by call, and the reader
 * follows what it published. A call due for the handoffs' timed retry
 * stages, so the return of a shared cache is seen. Each change of the
 * mode is logged at INFO. QCCL_CMA_MODE_EVERY=k (tests): where the peer
 * can be read and the segment's single copy does not apply, rank r offers
 * at the calls that reach this choice (2 ranks, a block in range, not
 * through the cells, not mapped; counted per segment) whose count is r
 * modulo k, whatever its handoffs, so the ranks differ. */
#define CMA_MODE_MIN_BYTES ((size_t)64 << 10)
#define CMA_MODE_MAX_BYTES ((size_t)2 << 20)
#define CMA_MODE_MAX_MORE_BYTES ((size_t)512 << 10) /* on more than 2 ranks */
#define CMA_MODE_AG_MAX_RANKS 2
#define CMA_MODE_A2A_MAX_RANKS 8
int cma_mode_offer(shm_t* s, const void* buf, int nranks, int max_ranks, size_t block,
                   shm_reg_t* reg);
/* Its choice for a block at time now (exposed for tests/unit/unit_handoff.c). */
int cma_mode_use(shm_t* s, int nranks, int max_ranks, size_t block, double now);

/* A send whose call also receives from the same peer (an exchange,
 * MPI_Sendrecv's pattern: qccl-perf's sendrecv on 2 ranks, a pairwise
 * step): single copy from CMA's threshold even when it fits in the ring,
 * on a host whose ranks fit its cores. The receive of the same call is
 * progressed while the send waits for its reader, so nothing waits on a
 * rank that waits on us; a send-first program (no receive in the call)
 * keeps the eager ring. On 2 ranks 64 and 128 KiB exchanges took 0.67 and
 * 0.60x the staged time; from 16 and 32 KiB, in an earlier series,
 * 0.99x (docs/PERF.md, "First touches, exchanges, and the peers on a new
 * VM"). Oversubscribed, the reader the sender waits for may not be
 * running (the 1.33x of 4 ranks above). */
static inline int cma_p2p_paired_use(const shm_t* s, size_t bytes) {
  return cma_use(s, bytes) && shm_roomy(s);
}

/* A send whose call also receives (from any peer: a ring shift, a
 * pipeline stage) on a host whose ranks outnumber its cores: single copy
 * from CMA's threshold (64 KiB there) although it fits the ring, and taken
 * back once its call has had nothing but sends to wait for during
 * CMA_P2P_TAKEBACK_S (transport.h, release): its payload then follows the
 * header through the ring, as an eager send's would, so the send never
 * waits for a receiver that an eager send would not have waited for
 * (shm_p2p.c). On the 2-vCPU Xeon guest (qccl-perf sendrecv, a ring
 * shift; median per call, 7 interleaved rounds): 4 ranks 64 KiB 11.3 ->
 * 8.6 us (Open MPI 12.7), 128 KiB 22.6 -> 13.4 (18.7); 8 ranks 128 KiB 95
 * -> 27 (44), but 64 KiB 8.8 -> 18.4 (27.6), where the eager sender ran
 * three calls ahead through the ring (its mean per call went 42 -> 27).
 * Taken back as soon as the call waited for nothing else, 64 KiB took
 * 1.2-1.4x the eager time and 128 KiB on 8 ranks 2x the time with 200 us
 * of grace (docs/PERF.md, "Sends that may be taken back"). */
#define CMA_P2P_TAKEBACK_S 200e-6
static inline int cma_p2p_flex_use(const shm_t* s, size_t bytes) {
  return cma_use(s, bytes) && !shm_roomy(s);
}

/* Reads bytes at address src of peer (published with cma_offer; the peer
 * posted the chunk's 3g+1) into dst with process_vm_readv. */
qcclResult_t cma_read_from(shm_t* s, int peer, uintptr_t src, void* dst, size_t bytes);

/* Writes bytes from src to address dst of peer (a buffer it published with
 * cma_offer for this rank to fill; the peer posted the chunk's 3g+1) with
 * process_vm_writev. */
qcclResult_t cma_write_to(shm_t* s, int peer, uintptr_t dst, const void* src, size_t bytes);

#endif /* QCCL_TRANSPORT_CMA_H_ */
