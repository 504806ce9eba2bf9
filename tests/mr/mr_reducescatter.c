/*
 * mr_reducescatter - qcclReduceScatter against the independent reference:
 * block i (recvcount elements) of the reduction over all ranks' sendbuffs
 * lands in rank i's recvbuff.
 *
 * Cases: every dtype x op x in place (recvbuff == sendbuff + rank *
 * recvcount) / out of place x recvcount {0, 1, 1009}, plus special inputs
 * at 1009; one random count per dtype; the large-count rotation of
 * mr_util.h. Each rank checks its block (a 1/W slice of it at large
 * counts), sendbuff must stay unchanged out of place, nothing may be
 * written outside the output, and a second run gives the same bits.
 */
#include <stdio.h>
#include <string.h>

#include "mr_util.h"

#define COLL_ID 3

static void run_case(mr_t* t, qcclDataType_t dt, qcclRedOp_t op, int kind, size_t n, int inplace) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "reducescatter %s %s n=%zu %s%s", mr_dt_name(dt), mr_op_name(op), n,
                     inplace ? "inplace" : "outofplace", kind == MR_GEN_SPECIAL ? " special" : ""))
    return;
  const int W = t->nranks, rank = t->rank;
  const size_t es = mr_dt_size(dt), bytes = n * es, total = n * (size_t)W;
  const size_t mis = ((c.cseed >> 8) % 4) * es;
  const int null_bufs = n == 0 && (c.cseed & 1);
  mr_buf_t sb, rb;
  mr_buf_alloc(&sb, total * es, mis);
  mr_buf_alloc(&rb, inplace ? 0 : bytes, mis + es);
  mr_fill(dt, op, kind, c.cseed, rank, W, sb.p, 0, total);
  const uint64_t send_hash = mr_hash(sb.p, total * es);
  void* send = null_bufs ? NULL : sb.p;
  unsigned char* out = inplace ? sb.p + (size_t)rank * bytes : rb.p;
  void* recv = null_bufs ? NULL : out;
  MR_OK(&c, qcclReduceScatter(send, recv, n, dt, op, t->comm, NULL));
  mr_buf_check_guards(&c, &sb, "sendbuff");
  mr_buf_check_guards(&c, &rb, "recvbuff");
  if (!inplace && mr_hash(sb.p, total * es) != send_hash)
    mr_case_fail(&c, "out-of-place call modified sendbuff");
  size_t lo = 0, hi = n;
  if (n > 4096) {
    lo = n * (size_t)rank / (size_t)W;
    hi = n * (size_t)(rank + 1) / (size_t)W;
  }
  for (size_t k = lo; k < hi; k++)
    if (!mr_check_elem(&c, dt, op, kind, (size_t)rank * n + k, mr_load(dt, out, k), k) &&
        c.bad > 20)
      break;
  const uint64_t h = mr_hash(out, bytes);
  if (inplace)
    mr_fill(dt, op, kind, c.cseed, rank, W, sb.p, 0, total);
  else
    memset(rb.p, MR_FILL_BYTE, bytes);
  MR_OK(&c, qcclReduceScatter(send, recv, n, dt, op, t->comm, NULL));
  if (mr_hash(out, bytes) != h) mr_case_fail(&c, "second run gave different bits");
  mr_buf_free(&sb);
  mr_buf_free(&rb);
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  static const size_t counts[] = {0, 1, 1009};
  for (int dt = 0; dt < qcclNumTypes; dt++)
    for (int op = 0; op < qcclNumOps; op++) {
      if (!mr_op_valid((qcclDataType_t)dt, (qcclRedOp_t)op)) continue;
      for (int inplace = 0; inplace < 2; inplace++) {
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
          run_case(&t, (qcclDataType_t)dt, (qcclRedOp_t)op, MR_GEN_REDUCE, counts[i], inplace);
        run_case(&t, (qcclDataType_t)dt, (qcclRedOp_t)op, MR_GEN_SPECIAL, 1009, inplace);
      }
    }
  uint64_t st = t.seed ^ 0x5eed03;
  for (int dt = 0; dt < qcclNumTypes; dt++) {
    qcclRedOp_t op = (qcclRedOp_t)((dt + 2) % (mr_dt_is_float((qcclDataType_t)dt) ? 5 : 4));
    run_case(&t, (qcclDataType_t)dt, op, MR_GEN_REDUCE, mr_rand_range(&st, 2, 30000), dt & 1);
  }
  mr_large_t big[2];
  int nbig = mr_large_cases(&t, COLL_ID, big);
  for (int i = 0; i < nbig; i++)
    run_case(&t, big[i].dt, big[i].op, MR_GEN_REDUCE, big[i].count, big[i].inplace);
  return mr_finish(&t);
}
