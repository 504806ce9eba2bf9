/*
 * mr_allreduce - qcclAllReduce against the independent reference.
 *
 * Cases, on the world size qcclrun gives:
 *   - every dtype x every op (avg for floats only) x in place / out of
 *     place x counts {0, 1, 1009}, with count 0 sometimes on NULL buffers;
 *   - the same pairs with special inputs (NaN, infinities, overflow, zeros,
 *     subnormals, integer extremes) at count 1009;
 *   - one random count in [2, 70000] per dtype (op rotating);
 *   - the large-count rotation of mr_util.h (999983 and 2^22).
 * Each case checks: every element (each rank checks its 1/W slice when the
 * count is large) against mr_check_reduce; the result hash is the same on
 * every rank; a second run gives the same bits; the send buffer of an
 * out-of-place call is unchanged; nothing is written outside recvbuff.
 */
#include <stdio.h>
#include <string.h>

#include "mr_util.h"

#define COLL_ID 0

/* inplace: 0 out of place, 1 in place, 2 in place on rank 0 only */
static void run_case(mr_t* t, qcclDataType_t dt, qcclRedOp_t op, int kind, size_t n,
                     int inplace_mode) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "allreduce %s %s n=%zu %s%s", mr_dt_name(dt), mr_op_name(op), n,
                     inplace_mode == 2 ? "inplace-on-rank-0"
                     : inplace_mode    ? "inplace"
                                       : "outofplace",
                     kind == MR_GEN_SPECIAL ? " special" : ""))
    return;
  const int W = t->nranks, rank = t->rank;
  const int inplace = inplace_mode == 2 ? rank == 0 : inplace_mode;
  const size_t es = mr_dt_size(dt), bytes = n * es;
  const size_t mis = ((c.cseed >> 8) % 4) * es;
  const int null_bufs = n == 0 && (c.cseed & 1);
  mr_buf_t sb, rb;
  mr_buf_alloc(&sb, bytes, mis);
  mr_buf_alloc(&rb, inplace ? 0 : bytes, (mis + es) % 64);
  mr_fill(dt, op, kind, c.cseed, rank, W, sb.p, 0, n);
  const uint64_t send_hash = mr_hash(sb.p, bytes);
  void* send = null_bufs ? NULL : sb.p;
  void* recv = inplace ? send : (null_bufs ? NULL : rb.p);
  MR_OK(&c, qcclAllReduce(send, recv, n, dt, op, t->comm, NULL));
  const unsigned char* out = inplace ? sb.p : rb.p;
  mr_buf_check_guards(&c, &sb, "sendbuff");
  mr_buf_check_guards(&c, &rb, "recvbuff");
  if (!inplace && mr_hash(sb.p, bytes) != send_hash)
    mr_case_fail(&c, "out-of-place call modified sendbuff");
  /* every element when small, else this rank's slice (the hashes below
   * show that every rank holds the same bits) */
  size_t lo = 0, hi = n;
  if (n > 4096) {
    lo = n * (size_t)rank / (size_t)W;
    hi = n * (size_t)(rank + 1) / (size_t)W;
  }
  for (size_t i = lo; i < hi; i++)
    if (!mr_check_elem(&c, dt, op, kind, i, mr_load(dt, out, i), i) && c.bad > 20) break;
  const uint64_t h = mr_hash(out, bytes);
  mr_same_everywhere(&c, h, "result");
  /* second run: same inputs, same bits */
  if (inplace) {
    mr_fill(dt, op, kind, c.cseed, rank, W, sb.p, 0, n);
    MR_OK(&c, qcclAllReduce(send, send, n, dt, op, t->comm, NULL));
  } else {
    memset(rb.p, MR_FILL_BYTE, bytes);
    MR_OK(&c, qcclAllReduce(send, recv, n, dt, op, t->comm, NULL));
  }
  if (mr_hash(out, bytes) != h) mr_case_fail(&c, "second run gave different bits");
  mr_buf_free(&sb);
  mr_buf_free(&rb);
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  /* 2053: 8-16 KiB of 4- and 8-byte types, the one-handoff path in halves */
  static const size_t counts[] = {0, 1, 1009, 2053};
  for (int dt = 0; dt < qcclNumTypes; dt++)
    for (int op = 0; op < qcclNumOps; op++) {
      if (!mr_op_valid((qcclDataType_t)dt, (qcclRedOp_t)op)) continue;
      for (int inplace = 0; inplace < 2; inplace++) {
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
          run_case(&t, (qcclDataType_t)dt, (qcclRedOp_t)op, MR_GEN_REDUCE, counts[k], inplace);
        run_case(&t, (qcclDataType_t)dt, (qcclRedOp_t)op, MR_GEN_SPECIAL, 1009, inplace);
      }
    }
  uint64_t st = t.seed ^ 0x5eed;
  for (int dt = 0; dt < qcclNumTypes; dt++) {
    qcclRedOp_t op = (qcclRedOp_t)(dt % (mr_dt_is_float((qcclDataType_t)dt) ? 5 : 4));
    size_t n = mr_rand_range(&st, 2, 70000);
    run_case(&t, (qcclDataType_t)dt, op, MR_GEN_REDUCE, n, dt & 1);
  }
  /* 2 ranks, 128-512 KiB: each rank reads the other's whole sendbuff
   * single copy where that is on (allreduce_whole.c; forced by
   * mr_allreduce_cma64k_w2): both ends of the range and inside it, in
   * place, out of place, and in place on one rank only; bf16 just above */
  if (t.nranks == 2) {
    static const size_t whole[] = {32768, 100003, 131072};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
      for (int ip = 0; ip < 3; ip++) {
        run_case(&t, qcclFloat32, qcclSum, MR_GEN_REDUCE, whole[i], ip);
        run_case(&t, qcclBfloat16, (qcclRedOp_t)(ip + 1), MR_GEN_REDUCE, whole[i] * 2 + 1, ip);
      }
  }
  mr_large_t big[2];
  int nbig = mr_large_cases(&t, COLL_ID, big);
  for (int i = 0; i < nbig; i++)
    run_case(&t, big[i].dt, big[i].op, MR_GEN_REDUCE, big[i].count, big[i].inplace);
  return mr_finish(&t);
}
