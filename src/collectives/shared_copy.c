/*
 * shared_copy.c - AllGather and AlltoAll inside one node with the copying
 * shared out among the ranks, when every buffer comes from qcclMemAlloc.
 *
 * When every rank's send and receive buffers lie in qcclMemAlloc memory
 * (shm_map.c maps it in every local rank), any rank can do any part of the
 * call: copy block j of rank d's output from rank j's sendbuff. The blocks
 * are cut into tasks of up to a few MiB, one queue per destination rank
 * (the tasks that fill its recvbuff: its own block first, then the next
 * ranks' in turn). Each rank claims tasks from its own queue with an
 * atomic counter in its control line (the own block's tasks at once, since
 * they need no peer) and, when that queue is empty, from the other queues,
 * starting with the next rank's. A rank whose core is slowed (a busy
 * thread beside it, a host that takes its vCPU away for a while, another
 * rank on an oversubscribed host) leaves the rest of its work to the
 * others, and the call ends when the node's aggregate copy bandwidth, not
 * the slowest core's share of it, has moved the bytes. Each byte is still
 * read once and written once. Measured (docs/PERF.md, perf/share_ab.sh):
 * level with the ordinary schedule when both cores run freely, 1.2-1.3x
 * faster with a busy loop on one rank's core.
 *
 * Protocol, inside the call's first chunk g (the two-copy and in-place
 * paths publish in the same chunk, so a rank can offer and fall back on
 * its own): every rank publishes its sendbuff (SHM_REG_IN), and its
 * recvbuff (SHM_REG_OUT) when it offers to share, "nowhere" otherwise; an
 * offering rank resets its queue's counter; all post 3g+1. An offering
 * rank copies its own block's tasks, waits for every rank's 3g+1 and
 * shares if every rank published both buffers; if any did not, nobody has
 * claimed from its queue but itself, its own block is done, and it
 * carries on with the chunk's two-copy schedule, as do the others: a rank
 * that did not offer never shares, and since its recvbuff is not
 * published, neither does anybody else. A sharing rank posts 3g+3 once
 * every queue is empty and the tasks it claimed are written (streaming
 * stores end with a fence; the post releases them), then waits for every
 * rank's 3g+3: from then on every output is complete and nobody reads any
 * sendbuff.
 *
 * A published recvbuff carries the call's tag (coll_agree_tag), and a
 * rank writes into a peer's only if the tag is its own call's: ranks that
 * disagree (a larger count) would otherwise write past the peer's buffer
 * before the agreement's comparison. The sendbuffs are only read.
 *
 * The counters need no generation tag: a rank resets its own before it
 * posts 3g+1 and nobody claims from it before seeing that post; every
 * claim of a call is made before its claimer posts 3g+3, and a rank leaves
 * the call only after every rank's 3g+3, so the next call's reset never
 * meets a claim of this one.
 */
#include "collectives/shared_copy.h"

#include "core/memcopy.h"

/* Task bytes: about 32 tasks per output (enough to even out cores that run
 * at different speeds), whole pages, 4 KiB .. 4 MiB. */
static size_t share_task_bytes(size_t out_bytes) {
  size_t t = (out_bytes / 32 + 4095) & ~(size_t)4095;
  if (t < 4096) t = 4096;
  if (t > (size_t)4 << 20) t = (size_t)4 << 20;
  return t;
}

/* The tag of the call's published recvbuff (coll_agree_tag): peers write
 * into it only when theirs is the same. */
static uint32_t share_tag(const share_job_t* job, uint64_t g) {
  coll_args_t a = {.kind = job->alltoall ? COLL_ALLTOALL : COLL_ALLGATHER, .count = job->bytes};
  return coll_agree_tag(&a, g);
}

int share_offer(qcclComm_t comm, uint64_t g, const share_job_t* job, int in_published) {
  shm_t* s = comm->shm;
  size_t total = job->bytes * (size_t)comm->nranks; /* this rank's recvbuff */
  shm_reg_t reg = {0, 0, -1, 0};
  int ok = comm->nranks > 1 && in_published && job->bytes > 0 && total >= s->share_min &&
           shm_reg_find(s, job->out, total, &reg);
  reg.tag = ok ? share_tag(job, g) : 0;
  shm_reg_publish(s, g, SHM_REG_OUT, &reg);
  if (ok) atomic_store_explicit(&s->ctrl[s->rank].share_next, 0, memory_order_relaxed);
  return ok;
}

/* Task i of rank d's queue: block (d + i / per_block) % W of its output,
 * from that rank's sendbuff (the first per_block tasks: d's own block). */
static void share_task(const share_job_t* job, const char* const* ins, char* const* outs, int w,
                       int d, uint64_t i, uint64_t per_block, size_t task, int stream) {
  size_t bytes = job->bytes;
  int j = (int)((d + (int)(i / per_block)) % w);
  size_t off = (size_t)(i % per_block) * task;
  size_t len = bytes - off < task ? bytes - off : task;
  const char* src = ins[j] + (job->alltoall ? (size_t)d * bytes : 0) + off;
  char* dst = outs[d] + (size_t)j * bytes + off;
  if (dst != src) copy_out(dst, src, len, stream); /* equal: AllGather's own block in place */
}

/* Tasks of a job: per block, and in all. */
static void share_counts(const qcclComm_t comm, const share_job_t* job, size_t* task,
                         uint64_t* per_block, uint64_t* ntasks) {
  size_t total = job->bytes * (size_t)comm->nranks;
  *task = share_task_bytes(total);
  *per_block = (job->bytes + *task - 1) / *task;
  *ntasks = *per_block * (uint64_t)comm->nranks;
}

void share_own(qcclComm_t comm, share_job_t* job, int offered) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank;
  size_t bytes = job->bytes, total = bytes * (size_t)w;
  int stream = total >= COPY_STREAM_MIN_TOTAL;
  const char* ins[w];
  char* outs[w];
  ins[r] = job->in, outs[r] = job->out;
  if (!offered) { /* the own block as one task */
    share_task(job, ins, outs, w, r, 0, 1, bytes, stream);
    return;
  }
  size_t task;
  uint64_t per_block, ntasks, i;
  share_counts(comm, job, &task, &per_block, &ntasks);
  /* the own block's tasks need no peer: claim them while the peers arrive
   * (a peer that arrives first may take some); the first later task this
   * rank claims waits for the decision (share_rest) */
  _Atomic uint64_t* mine = &s->ctrl[r].share_next;
  while ((i = atomic_fetch_add_explicit(mine, (uint64_t)1, memory_order_relaxed)) < per_block)
    share_task(job, ins, outs, w, r, i, per_block, task, stream);
  job->claimed = i;
}

qcclResult_t share_rest(qcclComm_t comm, uint64_t g, share_job_t* job, int* shared) {
  shm_t* s = comm->shm;
  int w = comm->nranks, r = comm->rank;
  size_t bytes = job->bytes, total = bytes * (size_t)w;
  size_t in_len = job->alltoall ? total : bytes;
  int stream = total >= COPY_STREAM_MIN_TOTAL;
  const char* ins[w];
  char* outs[w];
  ins[r] = job->in, outs[r] = job->out;
  *shared = 0;
  size_t task;
  uint64_t per_block, ntasks, i = job->claimed;
  share_counts(comm, job, &task, &per_block, &ntasks);
  uint32_t tag = share_tag(job, g);
  /* a peer whose buffer there is another call's (another count or
   * collective, an AllReduce's qcclMemAlloc recvbuff, one published by
   * an older call of another collective): writing there could go past
   * its end or into data it still uses. An agreeing peer published its
   * offer, or "nowhere", in this chunk. Before any mapping: a buffer of
   * another call may not even hold this call's bytes. */
  for (int j = 0; j < w; j++)
    if (j != r && shm_reg_peer_published(s, j, g, SHM_REG_OUT))
      QCCL_CHECK(coll_agree_check_tag(comm, j, g, SHM_REG_OUT, tag,
                                      job->alltoall ? "AlltoAll" : "AllGather"));
  for (int j = 0; j < w; j++) {
    if (j == r) continue;
    const char* out = NULL;
    QCCL_CHECK(shm_reg_peer(s, j, g, SHM_REG_IN, in_len, &ins[j]));
    QCCL_CHECK(shm_reg_peer(s, j, g, SHM_REG_OUT, total, &out));
    /* not every rank offered: nobody claims from this queue but this rank,
     * and its own block is copied; the caller does the rest */
    if (ins[j] == NULL || out == NULL) return qcclSuccess;
    outs[j] = (char*)out;
  }
  if (i < ntasks) share_task(job, ins, outs, w, r, i, per_block, task, stream);
  for (int k = 0; k < w; k++) {
    int d = (r + k) % w; /* the queue: rank d's recvbuff */
    while ((i = atomic_fetch_add_explicit(&s->ctrl[d].share_next, (uint64_t)1,
                                          memory_order_relaxed)) < ntasks)
      share_task(job, ins, outs, w, d, i, per_block, task, stream);
  }
  shm_post(s, 3 * g + 3);
  *shared = 1;
  return qcclSuccess;
}
