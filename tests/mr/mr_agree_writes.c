/*
 * mr_agree_writes - a rank that disagrees on a call must not write into a
 * peer's memory beyond what the peer's own call gave it.
 *
 * Two paths write into another rank's buffers: a single-copy Gather,
 * where every other rank writes its block into the root's recvbuff with
 * process_vm_writev (gather.c), and AllGather / AlltoAll between
 * qcclMemAlloc buffers (shared_copy.c), where any rank writes any block of
 * any rank's recvbuff through the mapped region. The agreement check
 * (agree.c) compares the calls after they ran; a writer whose count is
 * larger than its peer's would until then write past the end of that
 * peer's buffer, and one whose peer makes another call would write into
 * that call's buffer. Here the last rank calls with twice the others'
 * count (Gather, AllGather, AlltoAll), or calls an AllReduce of one block
 * on qcclMemAlloc buffers while the others call AllGather (its recvbuff,
 * published for its own peers to read, is not offered to the AllGather's
 * writers; on 2 ranks this AllReduce is a one-shot handoff that publishes
 * nothing, so the case shows the overflow from 3 ranks on). Every rank's recvbuff sits at
 * the start of an arena twice as large as the largest call needs
 * (qcclMemAlloc for the shared cases, so the writes would stay inside
 * the peer's region and land in the arena), the rest of the arena filled
 * with a canary: no byte of it may change on any rank, rank 0 (the
 * Gather's root) and the disagreeing rank must get qcclInvalidUsage
 * naming what differs, every other rank must fail at the call or at the
 * next one, all within 10 s (the timeout is 20), and the communicator
 * stays failed. A case where all agree, on the same path, must pass and
 * deliver every block.
 *
 * Sizes put the calls on the writing paths: Gather blocks of 128 KiB with
 * single copy from 16 KiB (QCCL_CMA_MIN_BYTES set here, so no speed probe
 * can turn it off: the writers write from 16 KiB on 2 ranks, once they
 * send 256 KiB in all on more, up to 2 MiB blocks; transport/cma.h);
 * AllGather / AlltoAll blocks of 4 KiB with QCCL_SHM_SHARE_BYTES=4096
 * (set here), so that the disagreeing rank's tasks (shared_copy.c: whole
 * pages, about 32 to an output, so one a block here) number twice the
 * others', and it claims the second half of every other rank's queue
 * whatever the timing: those tasks lie past the end of that rank's
 * recvbuff. Where the ranks cannot read each other's memory (the INFO log
 * says so) nothing is written into a peer: the calls run staged, only
 * rank 0 must then fail at the call, and the --off run has nothing to
 * show.
 *
 *   --off   run with QCCL_CHECK=0: nothing compares the calls, so the
 *           writer that finds the tag wrong aborts the segment; every
 *           rank must fail (any error) at the call or the next one,
 *           within 10 s, and no canary byte may change.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mr_util.h"

#define CANARY 0x3c

enum { K_GATHER, K_ALLGATHER_SHARED, K_ALLTOALL_SHARED, K_COLL_SHARED, K_NUM };
static const char* const knames[K_NUM] = {"gather", "allgather (qcclMemAlloc)",
                                          "alltoall (qcclMemAlloc)",
                                          "allgather (qcclMemAlloc) against allreduce"};
static const char* const kdiffer[K_NUM] = {"count", "count", "count", "collective"};

/* Elements per block of the others' call (the disagreeing rank calls with
 * twice as many, or an AllReduce of as many). */
static size_t base_count(int k) {
  return k == K_GATHER ? (size_t)32768 : (size_t)1024;
}

static qcclResult_t one_call(int k, int odd, qcclComm_t c, const float* in, float* out, size_t n) {
  switch (k) {
    case K_GATHER:
      return qcclGather(in, out, n, qcclFloat32, 0, c, NULL);
    case K_ALLTOALL_SHARED:
      return qcclAlltoAll(in, out, n, qcclFloat32, c, NULL);
    case K_COLL_SHARED:
      if (odd) return qcclAllReduce(in, out, n, qcclFloat32, qcclSum, c, NULL);
      return qcclAllGather(in, out, n, qcclFloat32, c, NULL);
    default:
      return qcclAllGather(in, out, n, qcclFloat32, c, NULL);
  }
}

/* The first byte in [from, to) that is not the canary, or -1. */
static size_t canary_damage(const unsigned char* p, size_t from, size_t to) {
  for (size_t i = from; i < to; i++)
    if (p[i] != CANARY) return i;
  return (size_t)-1;
}

/* The expected value of element i of block j (from rank j). */
static float value(int j, size_t i) {
  return (float)(j * 1000 + (int)(i % 997));
}

int main(int argc, char** argv) {
  char log[128];
  mr_shm_log(log, sizeof log, "agreewrites");
  setenv("QCCL_SHM_SHARE_BYTES", "4096", 1);
  setenv("QCCL_CMA_MIN_BYTES", "16384", 1);
  mr_t t;
  mr_init(&t, argc, argv);
  const int W = t.nranks, r = t.rank;
  const int off = mr_flag(&t, "--off");
  /* whether the ranks can write into each other at all (every rank's
   * segment agreed on it: any rank's log tells) */
  const int readable = !mr_file_has(log, "cannot read rank");
  if (!readable) printf("rank %d: the ranks cannot read each other's memory: all staged\n", r);
  for (int k = 0; k < K_NUM && W > 1; k++) {
    for (int agree = 1; agree >= 0; agree--) {
      if (k == K_COLL_SHARED && agree) continue; /* the AllGather case */
      if (!agree && off && !readable) continue;  /* nothing would notice */
      mr_case_t c;
      if (!mr_case_begin(&t, &c, "%s, %s", knames[k], agree ? "all agree" : "disagree")) continue;
      const int shared = k != K_GATHER;
      const size_t n0 = base_count(k);
      const int odd = !agree && r == W - 1;
      const size_t n = odd && k != K_COLL_SHARED ? 2 * n0 : n0;
      /* the most any rank's call may touch, twice; AlltoAll's sendbuff
       * holds W blocks too */
      const size_t arena = 2 * 2 * n0 * (size_t)W * sizeof(float);
      const int allreduce = odd && k == K_COLL_SHARED;
      /* this rank's recvbuff */
      const size_t used = (allreduce ? n : n * (size_t)W) * sizeof(float);
      const size_t in_elems = k == K_ALLTOALL_SHARED ? n * (size_t)W : n;
      unsigned char *in = NULL, *out = NULL;
      if (shared) {
        MR_OK(&c, qcclMemAlloc((void**)&in, arena));
        MR_OK(&c, qcclMemAlloc((void**)&out, arena));
      } else {
        in = malloc(arena);
        out = malloc(arena);
      }
      if (in == NULL || out == NULL) mr_die(&t, "out of memory");
      float* fin = (float*)in;
      for (size_t i = 0; i < in_elems; i++)
        fin[i] = k == K_ALLTOALL_SHARED ? value(r, i % n) : value(r, i);
      memset(out, CANARY, arena);
      qcclComm_t sub;
      MR_OK(&c, qcclCommSplit(t.comm, 0, t.rank, &sub, NULL));
      double t0 = mr_now();
      qcclResult_t res = one_call(k, odd, sub, fin, (float*)out, n);
      const char* msg = qcclGetLastError(sub);
      size_t bad = canary_damage(out, used, arena);
      if (bad != (size_t)-1)
        mr_case_fail(&c, "byte %zu past this rank's %zu-byte recvbuff was written (%s)", bad - used,
                     used, qcclGetErrorString(res));
      if (agree) {
        if (res != qcclSuccess) mr_case_fail(&c, "got %s: %s", qcclGetErrorString(res), msg);
        for (int j = 0; j < W && res == qcclSuccess && (k != K_GATHER || r == 0); j++) {
          const float* blk = (const float*)out + (size_t)j * n;
          for (size_t i = 0; i < n; i++)
            if (blk[i] != value(j, i)) {
              mr_case_fail(&c, "block %d element %zu is %g, not %g", j, i, (double)blk[i],
                           (double)value(j, i));
              break;
            }
        }
      } else {
        int must = !off && (readable ? r == 0 || odd : r == 0);
        if (res == qcclSuccess && !must) {
          /* a rank whose part needed nothing more from the others may
           * return; its next call must fail */
          res = qcclAllReduce(fin, (float*)out, 8, qcclFloat32, qcclSum, sub, NULL);
          msg = qcclGetLastError(sub);
          if (res == qcclSuccess) mr_case_fail(&c, "the call and the one after it succeeded");
        } else if (off && res != qcclSuccess) {
          /* failed: with nothing comparing, a peer's abort is the news */
        } else if (res != qcclInvalidUsage) {
          mr_case_fail(&c, "got %s, not qcclInvalidUsage: %s", qcclGetErrorString(res), msg);
        } else if (!strstr(msg, kdiffer[k]) || !strstr(msg, "rank")) {
          mr_case_fail(&c, "the message does not name the %s and the ranks: %s", kdiffer[k], msg);
        }
        double took = mr_now() - t0;
        if (took > 10)
          mr_case_fail(&c, "failing took %.1f s (QCCL_TIMEOUT is 20: not prompt)", took);
        qcclResult_t later = qcclAllReduce(fin, (float*)out, 8, qcclFloat32, qcclSum, sub, NULL);
        if (later == qcclSuccess) mr_case_fail(&c, "after the disagreement a call succeeded");
        bad = canary_damage(out, used, arena);
        if (bad != (size_t)-1)
          mr_case_fail(&c, "byte %zu past this rank's recvbuff was written after the call",
                       bad - used);
      }
      qcclCommDestroy(sub);
      if (shared) {
        qcclMemFree(in);
        qcclMemFree(out);
      } else {
        free(in);
        free(out);
      }
      /* the job's communicator is untouched */
      float x[8] = {0}, y[8];
      MR_OK(&c, qcclAllReduce(x, y, 8, qcclFloat32, qcclSum, t.comm, NULL));
      mr_case_end(&c);
    }
  }
  int rc = mr_finish(&t);
  if (rc == 0) unlink(log);
  return rc;
}
