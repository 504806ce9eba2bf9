/*
 * mr_scatter - qcclScatter: block i (count elements) of the root's
 * sendbuff lands in rank i's recvbuff, bit for bit.
 *
 * Cases: every root x every dtype x in place (on the root, recvbuff ==
 * sendbuff + root * count) / out of place at counts {1, 1009}; count 0 for
 * every root; one random count per dtype; the large-count rotation of
 * mr_util.h; on 2 ranks the split of blocks above 2 MiB (scatter.c: half
 * staged, the rest read single copy in pieces) at byte counts on and off
 * the chunk and page edges, every root, out of place and (no split) in
 * place. Non-root ranks pass sendbuff NULL or a buffer of other data
 * that must not leak into the result. Every rank checks its block; the
 * root's sendbuff stays unchanged; nothing is written outside recvbuff; a
 * second run gives the same bits.
 */
#include <stdio.h>
#include <string.h>

#include "mr_util.h"

#define COLL_ID 11

static void run_case(mr_t* t, qcclDataType_t dt, size_t n, int inplace, int root) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "scatter %s n=%zu %s root=%d", mr_dt_name(dt), n,
                     inplace ? "inplace" : "outofplace", root))
    return;
  const int W = t->nranks, rank = t->rank;
  const size_t es = mr_dt_size(dt), bytes = n * es;
  const size_t mis = ((c.cseed >> 8) % 4) * es;
  const int null_bufs = n == 0 && (c.cseed & 1);
  const int nonroot_null = (c.cseed >> 4) & 1;
  const int is_root = rank == root;
  const int in_send = inplace && is_root;
  mr_buf_t sb, rb;
  /* every rank fills "its" stream; only the root's may reach the output */
  size_t send_elems = is_root ? n * (size_t)W : (nonroot_null ? 0 : n * (size_t)W);
  mr_buf_alloc(&sb, send_elems * es, mis);
  mr_fill(dt, qcclSum, MR_GEN_RAW, c.cseed, rank, W, sb.p, 0, send_elems);
  mr_buf_alloc(&rb, in_send ? 0 : bytes, mis + es);
  const uint64_t send_hash = mr_hash(sb.p, send_elems * es);
  unsigned char* out = in_send ? sb.p + (size_t)root * bytes : rb.p;
  void* send = null_bufs ? NULL : sb.p;
  void* recv = null_bufs ? NULL : out;
  if (!is_root && nonroot_null) send = NULL;
  MR_OK(&c, qcclScatter(send, recv, n, dt, root, t->comm, NULL));
  mr_buf_check_guards(&c, &sb, "sendbuff");
  mr_buf_check_guards(&c, &rb, "recvbuff");
  if (mr_hash(sb.p, send_elems * es) != send_hash) mr_case_fail(&c, "sendbuff was modified");
  mr_check_copy(&c, dt, out, 0, n, root, (size_t)rank * n, "recvbuff");
  const uint64_t h = mr_hash(out, bytes);
  if (!in_send) memset(rb.p, MR_FILL_BYTE, bytes);
  MR_OK(&c, qcclScatter(send, recv, n, dt, root, t->comm, NULL));
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
  uint64_t st = t.seed ^ 0x5eed0b;
  for (int dt = 0; dt < qcclNumTypes; dt++) {
    size_t n = mr_rand_range(&st, 2, 30000);
    run_case(&t, (qcclDataType_t)dt, n, dt & 1, (int)(st % (uint64_t)W));
  }
  mr_large_t big[2];
  int nbig = mr_large_cases(&t, COLL_ID, big);
  for (int i = 0; i < nbig; i++) run_case(&t, big[i].dt, big[i].count, big[i].inplace, big[i].root);
  if (W == 2)
    for (size_t i = 0; i < MR_SPLIT_CASES; i++)
      for (int root = 0; root < W; root++) {
        const mr_split_t c = mr_split_cases[i];
        run_case(&t, c.dt, c.count, i == 2 && root == 1, root);
      }

  return mr_finish(&t);
}
