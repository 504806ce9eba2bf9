/*
 * mr_memalloc - qcclMemAlloc memory as collective buffers: the ranks of a
 * host read a registered send buffer in place (src/transport/shm_map.c).
 *
 * Cases, every one checked against the inputs regenerated from the seed:
 *   - AllGather and AlltoAll with send and receive buffers from
 *     qcclMemAlloc on some ranks and from malloc on others, independently
 *     (both patterns of registration per rank parity, all registered,
 *     none), counts 0, 1, 1009, 2^19+3 int32 (several chunks) and 2^20+7
 *     (8 MiB of output: with every buffer registered, the shared path of
 *     collectives/shared_copy.c), out of place and (AllGather) in place;
 *     the output poisoned first, AlltoAll's input checked intact after;
 *   - AllReduce and ReduceScatter (int32 sum, exact) with send and receive
 *     buffers registered independently by rank parity (peers read a
 *     registered sendbuff in place and, for AllReduce, copy reduced parts
 *     from a registered recvbuff), the same counts and 2^21+5 (8 MiB: the
 *     large-call path with streaming handoffs), in place and out of place;
 *   - on 2 ranks, AllReduce of 256 KiB in every pattern (each rank reads
 *     the other's whole sendbuff: allreduce_whole.c);
 *   - a buffer freed after a call and a new one allocated (its memfd may
 *     reuse the number: peers must not read the old mapping);
 *   - bad arguments: NULL ptr, size 0, a pointer qcclMemAlloc did not
 *     return; qcclMemFree(NULL) succeeds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mr_util.h"

#define DT qcclInt32

/* Memory from qcclMemAlloc (reg) or malloc. */
static void* mem_get(mr_case_t* c, int reg, size_t bytes) {
  void* p = NULL;
  if (reg) {
    MR_OK(c, qcclMemAlloc(&p, bytes ? bytes : 1));
  } else {
    p = malloc(bytes ? bytes : 1);
    if (!p) mr_die(c->t, "out of memory");
  }
  return p;
}

static void mem_put(mr_case_t* c, int reg, void* p) {
  if (reg)
    MR_OK(c, qcclMemFree(p));
  else
    free(p);
}

/* pattern: 0 none, 1 even ranks, 2 odd ranks, 3 all */
static int registered(int pattern, int rank) {
  return pattern == 3 || (pattern == 1 && rank % 2 == 0) || (pattern == 2 && rank % 2 == 1);
}

/* AllGather; sreg / rreg: registration patterns of sendbuff / recvbuff (in
 * place, the send buffer is inside recvbuff: rreg alone). */
static void case_allgather(mr_t* t, int sreg, int rreg, size_t n, int inplace) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "allgather send%d recv%d n=%zu %s", sreg, rreg, n,
                     inplace ? "inplace" : "outofplace"))
    return;
  int W = t->nranks, me = t->rank, rr = registered(rreg, me);
  int sr = inplace ? rr : registered(sreg, me);
  size_t es = mr_dt_size(DT);
  char* recv = mem_get(&c, rr, n * (size_t)W * es);
  char* send = inplace ? recv + (size_t)me * n * es : mem_get(&c, sr, n * es);
  mr_fill(DT, qcclSum, MR_GEN_RAW, c.cseed, me, W, send, 0, n);
  memset(recv, 0xa5, n * (size_t)me * es); /* poison all but the own block */
  memset(recv + n * (size_t)(me + 1) * es, 0xa5, n * (size_t)(W - 1 - me) * es);
  MR_OK(&c, qcclAllGather(send, recv, n, DT, t->comm, NULL));
  for (int j = 0; j < W; j++) mr_check_copy(&c, DT, recv, (size_t)j * n, n, j, 0, "recvbuff");
  if (!inplace) mem_put(&c, sr, send);
  mem_put(&c, rr, recv);
  mr_case_end(&c);
}

static void case_alltoall(mr_t* t, int sreg, int rreg, size_t n) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "alltoall send%d recv%d n=%zu", sreg, rreg, n)) return;
  int W = t->nranks, me = t->rank, sr = registered(sreg, me), rr = registered(rreg, me);
  size_t es = mr_dt_size(DT), all = n * (size_t)W;
  char* send = mem_get(&c, sr, all * es);
  char* recv = mem_get(&c, rr, all * es);
  mr_fill(DT, qcclSum, MR_GEN_RAW, c.cseed, me, W, send, 0, all);
  memset(recv, 0xa5, all * es);
  MR_OK(&c, qcclAlltoAll(send, recv, n, DT, t->comm, NULL));
  /* block j of recv is block `me` of rank j's send buffer */
  for (int j = 0; j < W; j++)
    mr_check_copy(&c, DT, recv, (size_t)j * n, n, j, (size_t)me * n, "recvbuff");
  /* the send buffer is read in place by the peers: it must be intact */
  for (int j = 0; j < W; j++)
    mr_check_copy(&c, DT, send, (size_t)j * n, n, me, (size_t)j * n, "sendbuff");
  mem_put(&c, sr, send);
  mem_put(&c, rr, recv);
  mr_case_end(&c);
}

/* AllReduce; sreg / rreg: registration patterns of sendbuff / recvbuff
 * (in place, recvbuff's). */
static void case_allreduce(mr_t* t, int sreg, int rreg, size_t n, int inplace) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "allreduce sreg%d rreg%d n=%zu %s", sreg, rreg, n,
                     inplace ? "inplace" : "outofplace"))
    return;
  int W = t->nranks, me = t->rank;
  int rs = registered(rreg, me), ss = inplace ? rs : registered(sreg, me);
  size_t es = mr_dt_size(DT);
  char* recv = mem_get(&c, rs, n * es);
  char* send = inplace ? recv : mem_get(&c, ss, n * es);
  mr_fill(DT, qcclSum, MR_GEN_REDUCE, c.cseed, me, W, send, 0, n);
  MR_OK(&c, qcclAllReduce(send, recv, n, DT, qcclSum, t->comm, NULL));
  for (size_t k = 0; k < n; k++)
    if (!mr_check_elem(&c, DT, qcclSum, MR_GEN_REDUCE, k, mr_load(DT, recv, k), k)) break;
  if (!inplace) mem_put(&c, ss, send);
  mem_put(&c, rs, recv);
  mr_case_end(&c);
}

/* ReduceScatter of n elements per rank; patterns as case_allreduce. */
static void case_reducescatter(mr_t* t, int sreg, int rreg, size_t n, int inplace) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "reducescatter sreg%d rreg%d n=%zu %s", sreg, rreg, n,
                     inplace ? "inplace" : "outofplace"))
    return;
  int W = t->nranks, me = t->rank;
  int ss = registered(sreg, me), rs = inplace ? ss : registered(rreg, me);
  size_t es = mr_dt_size(DT), all = n * (size_t)W;
  char* send = mem_get(&c, ss, all * es);
  /* in place, recvbuff is block `me` of sendbuff */
  char* recv = inplace ? send + (size_t)me * n * es : mem_get(&c, rs, n * es);
  mr_fill(DT, qcclSum, MR_GEN_REDUCE, c.cseed, me, W, send, 0, all);
  MR_OK(&c, qcclReduceScatter(send, recv, n, DT, qcclSum, t->comm, NULL));
  for (size_t k = 0; k < n; k++)
    if (!mr_check_elem(&c, DT, qcclSum, MR_GEN_REDUCE, (size_t)me * n + k, mr_load(DT, recv, k), k))
      break;
  if (!inplace) mem_put(&c, rs, recv);
  mem_put(&c, ss, send);
  mr_case_end(&c);
}

/* A registered buffer freed and replaced between two calls. */
static void case_realloc(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "allgather realloc")) return;
  int W = t->nranks, me = t->rank;
  size_t n = 4099, es = mr_dt_size(DT);
  char* recv = mem_get(&c, 0, n * (size_t)W * es);
  for (int round = 0; round < 3; round++) {
    char* send = mem_get(&c, 1, n * es);
    mr_fill(DT, qcclSum, MR_GEN_RAW, c.cseed + (uint64_t)round, me, W, send, 0, n);
    MR_OK(&c, qcclAllGather(send, recv, n, DT, t->comm, NULL));
    mem_put(&c, 1, send);
    mr_case_t rc = c;
    rc.cseed = c.cseed + (uint64_t)round;
    for (int j = 0; j < W; j++)
      c.bad += (int)mr_check_copy(&rc, DT, recv, (size_t)j * n, n, j, 0, "recvbuff");
  }
  mem_put(&c, 0, recv);
  mr_case_end(&c);
}

static void case_badargs(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "memalloc badargs")) return;
  void* p = NULL;
  int x = 0;
  struct {
    qcclResult_t got;
    const char* what;
    const char* needle;
  } checks[] = {
      {qcclMemAlloc(NULL, 64), "qcclMemAlloc(NULL, 64)", "ptr"},
      {qcclMemAlloc(&p, 0), "qcclMemAlloc(&p, 0)", "size"},
      {qcclMemFree(&x), "qcclMemFree(stack)", "qcclMemAlloc"},
  };
  for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
    if (checks[i].got != qcclInvalidArgument)
      mr_case_fail(&c, "%s returned %s, not qcclInvalidArgument", checks[i].what,
                   qcclGetErrorString(checks[i].got));
  }
  /* the last message names what was wrong */
  if (!strstr(qcclGetLastError(NULL), "qcclMemAlloc"))
    mr_case_fail(&c, "qcclMemFree(stack): message '%s'", qcclGetLastError(NULL));
  if (qcclMemFree(NULL) != qcclSuccess) mr_case_fail(&c, "qcclMemFree(NULL) failed");
  MR_OK(&c, qcclMemAlloc(&p, 100));
  memset(p, 0x5a, 100); /* writable, zeroed before */
  MR_OK(&c, qcclMemFree(p));
  if (qcclMemFree(p) != qcclInvalidArgument) mr_case_fail(&c, "double qcclMemFree accepted");
  mr_case_end(&c);
}

/* Whether count k (of the five) runs with send pattern sreg and receive
 * pattern rreg. The check of a large count regenerates every rank's input
 * on every rank (W^2 work): with every pattern at k = 3 and the four
 * extreme ones at k = 4, W = 8 took 100 s under ASan. So the small counts
 * run every pattern; at W <= 4 the several-chunk count (k = 3) runs every
 * pattern too and the largest the extreme ones (every buffer registered or
 * none, on the send or the receive side); from W = 5 one step less each:
 * k = 3 the extreme patterns, the largest the two uniform ones (all
 * registered: the shared path; none: plain). The mixed ones are the same
 * code paths at W = 2-4. */
static int pattern_runs(const mr_t* t, int sreg, int rreg, size_t k) {
  int extreme = (sreg == 0 || sreg == 3) && (rreg == 0 || rreg == 3);
  if (t->nranks >= 5) k++;
  return k < 4 || (k == 4 && extreme) || (k == 5 && extreme && sreg == rreg);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  /* the last count makes an output of 8 MiB and more at every W > 1: the
   * default threshold of the shared path (collectives/shared_copy.c) */
  const size_t counts[] = {0, 1, 1009, (1u << 19) + 3, (1u << 20) + 7};
  for (int sreg = 0; sreg < 4; sreg++)
    for (int rreg = 0; rreg < 4; rreg++)
      for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        if (!pattern_runs(&t, sreg, rreg, k)) continue;
        case_allgather(&t, sreg, rreg, counts[k], 0);
        case_alltoall(&t, sreg, rreg, counts[k]);
        if (sreg == rreg) case_allgather(&t, sreg, rreg, counts[k], 1);
      }
  const size_t rcounts[] = {0, 1, 1009, (1u << 19) + 3, (1u << 21) + 5};
  for (int sreg = 0; sreg < 4; sreg++)
    for (int rreg = 0; rreg < 4; rreg++)
      for (size_t k = 0; k < sizeof rcounts / sizeof rcounts[0]; k++) {
        if (!pattern_runs(&t, sreg, rreg, k)) continue;
        case_allreduce(&t, sreg, rreg, rcounts[k], 0);
        case_reducescatter(&t, sreg, rreg, rcounts[k], 0);
        if (sreg == rreg) {
          case_allreduce(&t, sreg, rreg, rcounts[k], 1);
          case_reducescatter(&t, sreg, rreg, rcounts[k], 1);
        }
      }
  /* 2 ranks, 256 KiB: each rank reads the other's whole sendbuff, through
   * its mapping or single copy, whichever that rank published
   * (allreduce_whole.c, where single copy is on: mr_memalloc_cma64k_w2) */
  if (t.nranks == 2)
    for (int sreg = 0; sreg < 4; sreg++)
      for (int rreg = 0; rreg < 4; rreg++) {
        case_allreduce(&t, sreg, rreg, 65539, 0);
        if (sreg == rreg) case_allreduce(&t, sreg, rreg, 65539, 1);
      }
  case_realloc(&t);
  case_badargs(&t);
  return mr_finish(&t);
}
