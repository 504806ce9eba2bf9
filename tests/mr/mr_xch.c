/*
 * mr_xch - AllGather, AlltoAll, AllReduce, send/recv exchanges and
 * Broadcast mixed in one seeded sequence, as a trainer's step mixes them.
 *
 * On 2 ranks AllGather's and AlltoAll's small blocks go as one exchange
 * through the segment's two exchange cells, which change hands with the
 * exchanges and have no counter that says they are free, or a rank's slot
 * (shm_xch.c); the send/recv
 * exchanges go through the pair's p2p cells, whose holder moves with each
 * message (shm_p2p.c); AllReduce's calls up to 128 KiB go through the
 * exchange too (allreduce_oneshot.c: each rank reduces the peer's block
 * where it lies), larger ones through the slots, whose chunks' tests
 * pass over an exchange's chunk number; Broadcast's root returns
 * before its readers have read (an eager call) and may begin its next
 * exchange while the peer still reads the last one. Each call's payload is
 * distinct (the call's number, the source and the destination rank in
 * every byte's seed), so a cell written before its reader took it shows
 * as another call's bytes. Sizes 1 B-200 KiB around the exchange's
 * threshold (128 KiB per block), some in place (but AlltoAll). The calls
 * run in batches of four, back to back, their inputs made before and
 * their outputs checked after the batch, so that a rank starts its next
 * call while the peer may still be copying out of the last one; before a
 * batch one rank now and then sleeps up to 2 ms, so that the other runs
 * ahead as far as the protocol lets it. AllGather's and AlltoAll's send
 * buffers are overwritten as soon as the call returns, so a peer still
 * reading one (a rank returning before its readers are done) reads the
 * wrong bytes. Any world size: the exchange only applies on 2.
 *
 * With --max-bytes N (above 200 KiB) a fifth of the calls draw sizes
 * from 200 KiB to N and a tenth around a slot (1 MiB), for the staged
 * chunks that a rank may read single copy while its peer stages
 * (QCCL_CMA_MODE_EVERY, cma.h, cma_mode_offer).
 *
 * Options: --calls N (default 600; 300 with --quick), --max-bytes N,
 * --op NAME (every call that collective: allgather, alltoall, allreduce,
 * sendrecv or broadcast).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mr_util.h"

enum { OP_AG, OP_A2A, OP_AR, OP_P2P, OP_BC, OP_N };
static const char* op_name[OP_N] = {"allgather", "alltoall", "allreduce", "sendrecv", "broadcast"};

/* byte i of the payload of call k from rank src meant for rank dst */
static void payload(uint64_t seed, int k, int src, int dst, unsigned char* p, size_t n) {
  uint64_t x = mr_mix(seed ^ ((uint64_t)k << 32) ^ ((uint64_t)src << 16) ^ (uint64_t)dst);
  for (size_t i = 0; i < n; i++) {
    if (i % 8 == 0) x = mr_mix(x + i);
    p[i] = (unsigned char)(x >> (8 * (i % 8)));
  }
}

/* the largest size drawn: 200 KiB, or --max-bytes */
static size_t max_bytes = 200 << 10;
/* every call's collective (--op NAME), or -1: drawn */
static int only_op = -1;

static size_t draw_size(uint64_t* st) {
  size_t r = mr_rand_range(st, 0, 99);
  if (r < 10) return mr_rand_range(st, (128 << 10) - 64, (128 << 10) + 64);
  if (r < 50) return mr_rand_range(st, 1, 4096);
  if (max_bytes > (1 << 20) && r < 60) /* around a slot (1 MiB) */
    return mr_rand_range(st, (1 << 20) - 64, (1 << 20) + 64);
  if (max_bytes > (200 << 10) && r < 80) return mr_rand_range(st, 200 << 10, max_bytes);
  return mr_rand_range(st, 4097, 200 << 10);
}

typedef struct {
  int op, inplace;
  size_t n;
  mr_buf_t sb, rb;
  unsigned char* send; /* what the call sends from (sb, or inside rb) */
} call_t;

/* Draws call k (the same on every rank) and makes its buffers and input. */
static void prep(uint64_t* st, uint64_t seed, int W, int me, int k, call_t* x) {
  x->op = (int)mr_rand_range(st, 0, OP_N - 1);
  if (only_op >= 0) x->op = only_op; /* drawn all the same: one sequence of sizes */
  x->n = draw_size(st);
  x->inplace = x->op != OP_A2A && mr_rand_range(st, 0, 2) == 0; /* no in-place AlltoAll */
  size_t n = x->n;
  if (x->op == OP_AG) {
    mr_buf_alloc(&x->rb, n * (size_t)W, (size_t)k % 8);
    mr_buf_alloc(&x->sb, x->inplace ? 0 : n, (size_t)(k + 1) % 8);
    x->send = x->inplace ? x->rb.p + (size_t)me * n : x->sb.p;
    payload(seed, k, me, -1, x->send, n);
  } else if (x->op == OP_A2A) {
    mr_buf_alloc(&x->rb, n * (size_t)W, (size_t)k % 8);
    mr_buf_alloc(&x->sb, n * (size_t)W, (size_t)(k + 1) % 8);
    x->send = x->sb.p;
    for (int j = 0; j < W; j++) payload(seed, k, me, j, x->send + (size_t)j * n, n);
  } else if (x->op == OP_AR) {
    /* int32 sums, exact: each rank's words are small; the buffers aligned
     * to their element (4 or 8 bytes past an aligned address) */
    size_t cnt = (n + 3) / 4;
    mr_buf_alloc(&x->rb, cnt * 4, (size_t)(k % 2) * 4);
    mr_buf_alloc(&x->sb, x->inplace ? 0 : cnt * 4, (size_t)((k + 1) % 2) * 4);
    x->send = x->inplace ? x->rb.p : x->sb.p;
    int32_t* v = (int32_t*)(void*)x->send;
    for (size_t i = 0; i < cnt; i++) v[i] = (int32_t)((i * 7 + (size_t)k + (size_t)me) % 1000);
  } else if (x->op == OP_BC) {
    /* root k % W: a root returns once its data is staged, before the
     * others have read it (an eager call), and may start its next call */
    mr_buf_alloc(&x->rb, n, (size_t)k % 8);
    mr_buf_alloc(&x->sb, x->inplace ? 0 : n, (size_t)(k + 1) % 8);
    x->send = x->inplace ? x->rb.p : x->sb.p;
    if (me == k % W) payload(seed, k, me, -1, x->send, n);
  } else {
    mr_buf_alloc(&x->sb, n, (size_t)k % 8);
    mr_buf_alloc(&x->rb, n, (size_t)(k + 1) % 8);
    x->send = x->sb.p;
    payload(seed, k, me, (me + 1) % W, x->send, n);
  }
}

static void run(mr_case_t* c, mr_t* t, int k, call_t* x) {
  const int W = t->nranks, me = t->rank;
  size_t n = x->n;
  if (x->op == OP_AG) {
    MR_OK(c, qcclAllGather(x->send, x->rb.p, n, qcclUint8, t->comm, NULL));
    /* the call is complete: the send buffer is the caller's again (a peer
     * that still read it single copy would read this) */
    if (!x->inplace) memset(x->sb.p, 0x5a, n);
  } else if (x->op == OP_A2A) {
    MR_OK(c, qcclAlltoAll(x->send, x->rb.p, n, qcclUint8, t->comm, NULL));
    memset(x->sb.p, 0x5a, n * (size_t)W);
  } else if (x->op == OP_AR) {
    MR_OK(c, qcclAllReduce(x->send, x->rb.p, (n + 3) / 4, qcclInt32, qcclSum, t->comm, NULL));
  } else if (x->op == OP_BC) {
    MR_OK(c, qcclBroadcast(x->send, x->rb.p, n, qcclUint8, k % W, t->comm, NULL));
  } else {
    /* an exchange with the neighbours in a group: to r + 1, from r - 1 */
    MR_OK(c, qcclGroupStart());
    MR_OK(c, qcclSend(x->send, n, qcclUint8, (me + 1) % W, t->comm, NULL));
    MR_OK(c, qcclRecv(x->rb.p, n, qcclUint8, (me + W - 1) % W, t->comm, NULL));
    MR_OK(c, qcclGroupEnd());
  }
}

static void verify(mr_case_t* c, uint64_t seed, int W, int me, int k, call_t* x,
                   unsigned char* want) {
  size_t n = x->n;
  char what[96];
  snprintf(what, sizeof what, "call %d (%s, %zu bytes%s)", k, op_name[x->op], n,
           x->inplace ? ", in place" : "");
  if (x->op == OP_AG || x->op == OP_A2A) {
    for (int j = 0; j < W; j++) {
      payload(seed, k, j, x->op == OP_AG ? -1 : me, want, n);
      if (memcmp(x->rb.p + (size_t)j * n, want, n) != 0)
        mr_case_fail(c, "%s: the block from rank %d differs", what, j);
    }
  } else if (x->op == OP_AR) {
    const int32_t* got = (const int32_t*)(const void*)x->rb.p;
    for (size_t i = 0; i < (n + 3) / 4; i++) {
      int64_t ref = 0;
      for (int j = 0; j < W; j++) ref += (int64_t)((i * 7 + (size_t)k + (size_t)j) % 1000);
      if (got[i] != ref) {
        mr_case_fail(c, "%s: element %zu is %d, want %lld", what, i, got[i], (long long)ref);
        break;
      }
    }
  } else if (x->op == OP_BC) {
    payload(seed, k, k % W, -1, want, n);
    if (memcmp(x->rb.p, want, n) != 0) mr_case_fail(c, "%s: recvbuff differs", what);
  } else {
    int from = (me + W - 1) % W;
    payload(seed, k, from, me, want, n);
    if (memcmp(x->rb.p, want, n) != 0) mr_case_fail(c, "%s: the message differs", what);
  }
  mr_buf_check_guards(c, &x->rb, what);
  mr_buf_check_guards(c, &x->sb, what);
  mr_buf_free(&x->rb);
  mr_buf_free(&x->sb);
}

#define BATCH 4

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const int W = t.nranks, me = t.rank;
  const char* o = mr_opt(&t, "--calls");
  const int calls = o ? atoi(o) : t.quick ? 300 : 600;
  const char* mb = mr_opt(&t, "--max-bytes");
  if (mb) max_bytes = (size_t)strtoull(mb, NULL, 0);
  if (max_bytes < (200 << 10)) max_bytes = 200 << 10;
  const char* on = mr_opt(&t, "--op");
  for (int i = 0; on && i < OP_N; i++)
    if (strcmp(on, op_name[i]) == 0) only_op = i;
  if (on && only_op < 0) {
    fprintf(stderr,
            "mr_xch: --op %s: not one of allgather, alltoall, allreduce, sendrecv, "
            "broadcast\n",
            on);
    return 2;
  }
  mr_case_t c;
  if (mr_case_begin(&t, &c, "xch sequence of %d calls", calls)) {
    uint64_t st = c.cseed ^ 0x584348; /* the same draws on every rank */
    unsigned char* want = malloc(max_bytes + 64);
    call_t x[BATCH];
    for (int k0 = 0; k0 < calls; k0 += BATCH) {
      int nb = calls - k0 < BATCH ? calls - k0 : BATCH;
      for (int i = 0; i < nb; i++) prep(&st, c.cseed, W, me, k0 + i, &x[i]);
      int sleeper = (int)mr_rand_range(&st, 0, (size_t)W * 4); /* a rank, or none */
      useconds_t nap = (useconds_t)mr_rand_range(&st, 0, 2000);
      if (sleeper == me) usleep(nap);
      for (int i = 0; i < nb; i++) run(&c, &t, k0 + i, &x[i]);
      for (int i = 0; i < nb; i++) verify(&c, c.cseed, W, me, k0 + i, &x[i], want);
    }
    free(want);
    mr_case_end(&c);
  }
  return mr_finish(&t);
}
