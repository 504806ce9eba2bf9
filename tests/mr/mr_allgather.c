/*
 * mr_allgather - qcclAllGather places rank i's sendcount elements at block
 * i of every rank's recvbuff, bit for bit.
 *
 * Cases: every dtype x in place (sendbuff == recvbuff + rank * sendcount)
 * / out of place x counts {0, 1, 1009}; one random count per dtype; the
 * large-count rotation of mr_util.h. Inputs are arbitrary bit patterns. At
 * small counts every rank checks every block; at large counts its own
 * block and the next rank's (the hashes show every rank holds the same
 * bits). Out of place, sendbuff must stay unchanged; nothing may be written
 * outside recvbuff; a second run gives the same bits.
 */
#include <stdio.h>
#include <string.h>

#include "mr_util.h"

#define COLL_ID 5

static void run_case(mr_t* t, qcclDataType_t dt, size_t n, int inplace) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "allgather %s n=%zu %s", mr_dt_name(dt), n,
                     inplace ? "inplace" : "outofplace"))
    return;
  const int W = t->nranks, rank = t->rank;
  const size_t es = mr_dt_size(dt), bytes = n * es;
  const size_t mis = ((c.cseed >> 8) % 4) * es;
  const int null_bufs = n == 0 && (c.cseed & 1);
  mr_buf_t sb, rb;
  mr_buf_alloc(&rb, bytes * (size_t)W, mis);
  mr_buf_alloc(&sb, inplace ? 0 : bytes, mis + es);
  unsigned char* own = inplace ? rb.p + (size_t)rank * bytes : sb.p;
  mr_fill(dt, qcclSum, MR_GEN_RAW, c.cseed, rank, W, own, 0, n);
  const uint64_t send_hash = mr_hash(own, bytes);
  void* recv = null_bufs ? NULL : rb.p;
  void* send = null_bufs ? NULL : own;
  MR_OK(&c, qcclAllGather(send, recv, n, dt, t->comm, NULL));
  mr_buf_check_guards(&c, &rb, "recvbuff");
  mr_buf_check_guards(&c, &sb, "sendbuff");
  if (!inplace && mr_hash(sb.p, bytes) != send_hash)
    mr_case_fail(&c, "out-of-place call modified sendbuff");
  for (int j = 0; j < W; j++) {
    if (n > 4096 && j != rank && j != (rank + 1) % W) continue;
    char what[64];
    snprintf(what, sizeof what, "recvbuff block %d", j);
    mr_check_copy(&c, dt, rb.p, (size_t)j * n, n, j, 0, what);
  }
  const uint64_t h = mr_hash(rb.p, bytes * (size_t)W);
  mr_same_everywhere(&c, h, "result");
  /* second run: refill the buffer (keeping the own block in place) */
  memset(rb.p, MR_FILL_BYTE, bytes * (size_t)W);
  if (inplace) mr_fill(dt, qcclSum, MR_GEN_RAW, c.cseed, rank, W, own, 0, n);
  MR_OK(&c, qcclAllGather(send, recv, n, dt, t->comm, NULL));
  if (mr_hash(rb.p, bytes * (size_t)W) != h) mr_case_fail(&c, "second run gave different bits");
  mr_buf_free(&sb);
  mr_buf_free(&rb);
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  static const size_t counts[] = {0, 1, 1009};
  for (int dt = 0; dt < qcclNumTypes; dt++)
    for (int inplace = 0; inplace < 2; inplace++)
      for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        run_case(&t, (qcclDataType_t)dt, counts[i], inplace);
  uint64_t st = t.seed ^ 0x5eed05;
  for (int dt = 0; dt < qcclNumTypes; dt++)
    run_case(&t, (qcclDataType_t)dt, mr_rand_range(&st, 2, 70000), dt & 1);
  mr_large_t big[2];
  int nbig = mr_large_cases(&t, COLL_ID, big);
  for (int i = 0; i < nbig; i++) run_case(&t, big[i].dt, big[i].count, big[i].inplace);
  return mr_finish(&t);
}
