/*
 * mr_alltoall - qcclAlltoAll: block j (count elements) of rank i's sendbuff
 * lands at block i of rank j's recvbuff, bit for bit. There is no in-place
 * variant (as in NCCL).
 *
 * Cases: every dtype x counts {0, 1, 1009} (twice: aligned and misaligned
 * buffers); one random count per dtype; the large-count rotation of
 * mr_util.h. Every rank checks every block it received; sendbuff must stay
 * unchanged; nothing may be written outside recvbuff; a second run gives
 * the same bits.
 */
#include <stdio.h>
#include <string.h>

#include "mr_util.h"

#define COLL_ID 7

static void run_case(mr_t* t, qcclDataType_t dt, size_t n, int misaligned) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "alltoall %s n=%zu %s", mr_dt_name(dt), n,
                     misaligned ? "misaligned" : "aligned"))
    return;
  const int W = t->nranks, rank = t->rank;
  const size_t es = mr_dt_size(dt), bytes = n * es * (size_t)W;
  const size_t mis = misaligned ? es * (1 + (c.cseed >> 8) % 3) : 0;
  const int null_bufs = n == 0 && (c.cseed & 1);
  mr_buf_t sb, rb;
  mr_buf_alloc(&sb, bytes, mis);
  mr_buf_alloc(&rb, bytes, misaligned ? mis + es : 0);
  mr_fill(dt, qcclSum, MR_GEN_RAW, c.cseed, rank, W, sb.p, 0, n * (size_t)W);
  const uint64_t send_hash = mr_hash(sb.p, bytes);
  void* send = null_bufs ? NULL : sb.p;
  void* recv = null_bufs ? NULL : rb.p;
  MR_OK(&c, qcclAlltoAll(send, recv, n, dt, t->comm, NULL));
  mr_buf_check_guards(&c, &sb, "sendbuff");
  mr_buf_check_guards(&c, &rb, "recvbuff");
  if (mr_hash(sb.p, bytes) != send_hash) mr_case_fail(&c, "sendbuff was modified");
  for (int i = 0; i < W; i++) {
    char what[64];
    snprintf(what, sizeof what, "recvbuff block %d", i);
    mr_check_copy(&c, dt, rb.p, (size_t)i * n, n, i, (size_t)rank * n, what);
  }
  const uint64_t h = mr_hash(rb.p, bytes);
  memset(rb.p, MR_FILL_BYTE, bytes);
  MR_OK(&c, qcclAlltoAll(send, recv, n, dt, t->comm, NULL));
  if (mr_hash(rb.p, bytes) != h) mr_case_fail(&c, "second run gave different bits");
  mr_buf_free(&sb);
  mr_buf_free(&rb);
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  static const size_t counts[] = {0, 1, 1009};
  for (int dt = 0; dt < qcclNumTypes; dt++)
    for (int mis = 0; mis < 2; mis++)
      for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        run_case(&t, (qcclDataType_t)dt, counts[i], mis);
  uint64_t st = t.seed ^ 0x5eed07;
  for (int dt = 0; dt < qcclNumTypes; dt++)
    run_case(&t, (qcclDataType_t)dt, mr_rand_range(&st, 2, 30000), dt & 1);
  mr_large_t big[2];
  int nbig = mr_large_cases(&t, COLL_ID, big);
  for (int i = 0; i < nbig; i++) run_case(&t, big[i].dt, big[i].count, big[i].inplace);
  return mr_finish(&t);
}
