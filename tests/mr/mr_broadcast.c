/*
 * mr_broadcast - qcclBroadcast copies the root's bits to every rank.
 *
 * Cases: every root x every dtype x in place / out of place at counts
 * {1, 1009}; count 0 for every root (NULL buffers on some); one random count
 * per dtype; the large-count rotation of mr_util.h; on 2 ranks the split
 * of an out-of-place call above 2 MiB (broadcast.c: the root stages half,
 * the other rank reads the rest single copy in pieces) at byte counts on
 * and off the chunk and page edges, every root. Inputs are arbitrary
 * bit patterns (NaN payloads included), compared bitwise. Out of place, a
 * non-root's sendbuff holds other data that must not leak into the result,
 * and the root's sendbuff must stay unchanged. The result must hash the
 * same on every rank, and a second run must give the same bits.
 */
#include <stdio.h>
#include <string.h>

#include "mr_util.h"

#define COLL_ID 2

static void run_case(mr_t* t, qcclDataType_t dt, size_t n, int inplace, int root) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "broadcast %s n=%zu %s root=%d", mr_dt_name(dt), n,
                     inplace ? "inplace" : "outofplace", root))
    return;
  const int W = t->nranks, rank = t->rank;
  const size_t es = mr_dt_size(dt), bytes = n * es;
  const size_t mis = ((c.cseed >> 8) % 4) * es;
  const int null_bufs = n == 0 && (c.cseed & 1);
  mr_buf_t sb, rb;
  mr_buf_alloc(&sb, bytes, mis);
  mr_buf_alloc(&rb, inplace ? 0 : bytes, mis + 3 * es);
  /* the root's data is "rank root"'s stream; other ranks hold their own */
  mr_fill(dt, qcclSum, MR_GEN_RAW, c.cseed, rank, W, sb.p, 0, n);
  const uint64_t send_hash = mr_hash(sb.p, bytes);
  void* send = null_bufs ? NULL : sb.p;
  void* recv = inplace ? send : (null_bufs ? NULL : rb.p);
  MR_OK(&c, qcclBroadcast(send, recv, n, dt, root, t->comm, NULL));
  const unsigned char* out = inplace ? sb.p : rb.p;
  mr_buf_check_guards(&c, &sb, "sendbuff");
  mr_buf_check_guards(&c, &rb, "recvbuff");
  if (!inplace && mr_hash(sb.p, bytes) != send_hash)
    mr_case_fail(&c, "out-of-place call modified sendbuff");
  size_t lo = 0, hi = n;
  if (n > 4096) {
    lo = n * (size_t)rank / (size_t)W;
    hi = n * (size_t)(rank + 1) / (size_t)W;
  }
  mr_check_copy(&c, dt, out, lo, hi - lo, root, lo, "recvbuff");
  const uint64_t h = mr_hash(out, bytes);
  mr_same_everywhere(&c, h, "result");
  if (inplace) {
    if (rank != root) memset(sb.p, MR_FILL_BYTE, bytes);
  } else {
    memset(rb.p, MR_FILL_BYTE, bytes);
  }
  MR_OK(&c, qcclBroadcast(send, recv, n, dt, root, t->comm, NULL));
  if (mr_hash(out, bytes) != h) mr_case_fail(&c, "second run gave different bits");
  mr_buf_free(&sb);
  mr_buf_free(&rb);
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const int W = t.nranks;
  for (int root = 0; root < W; root++) {
    for (int dt = 0; dt < qcclNumTypes; dt++)
      for (int inplace = 0; inplace < 2; inplace++) {
        run_case(&t, (qcclDataType_t)dt, 1, inplace, root);
        run_case(&t, (qcclDataType_t)dt, 1009, inplace, root);
      }
    run_case(&t, (qcclDataType_t)(root % qcclNumTypes), 0, root & 1, root);
  }
  uint64_t st = t.seed ^ 0x5eed02;
  for (int dt = 0; dt < qcclNumTypes; dt++) {
    size_t n = mr_rand_range(&st, 2, 70000);
    run_case(&t, (qcclDataType_t)dt, n, dt & 1, (int)(st % (uint64_t)W));
  }
  if (W == 2)
    for (size_t i = 0; i < MR_SPLIT_CASES; i++)
      for (int root = 0; root < W; root++) {
        const mr_split_t c = mr_split_cases[i];
        run_case(&t, c.dt, c.count, 0, root);
      }

  mr_large_t big[2];
  int nbig = mr_large_cases(&t, COLL_ID, big);
  for (int i = 0; i < nbig; i++) run_case(&t, big[i].dt, big[i].count, big[i].inplace, big[i].root);
  return mr_finish(&t);
}
