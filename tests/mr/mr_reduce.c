/*
 * mr_reduce - qcclReduce against the independent reference.
 *
 * Cases, on the world size qcclrun gives:
 *   - every dtype x op x in place / out of place x counts {0, 1, 1009},
 *     plus special inputs at 1009, with the root rotating over the ranks;
 *   - every root x every dtype at counts {1, 1009} (op and placement
 *     rotating), so each root is exercised with each element size;
 *   - one random count in [2, 70000] per dtype;
 *   - the large-count rotation of mr_util.h.
 * Out of place, non-root ranks pass recvbuff NULL or a buffer of their own
 * (NCCL allows both); in place, every rank passes sendbuff == recvbuff and
 * a non-root's buffer must come back unchanged. The root checks every
 * element, and a second run must give the same bits.
 */
#include <stdio.h>
#include <string.h>

#include "mr_util.h"

#define COLL_ID 1

static void run_case(mr_t* t, qcclDataType_t dt, qcclRedOp_t op, int kind, size_t n, int inplace,
                     int root) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "reduce %s %s n=%zu %s root=%d%s", mr_dt_name(dt), mr_op_name(op), n,
                     inplace ? "inplace" : "outofplace", root,
                     kind == MR_GEN_SPECIAL ? " special" : ""))
    return;
  const int W = t->nranks, rank = t->rank;
  const size_t es = mr_dt_size(dt), bytes = n * es;
  const size_t mis = ((c.cseed >> 8) % 4) * es;
  const int null_bufs = n == 0 && (c.cseed & 1);
  const int null_recv_nonroot = (c.cseed >> 4) & 1;
  mr_buf_t sb, rb;
  mr_buf_alloc(&sb, bytes, mis);
  mr_buf_alloc(&rb, inplace ? 0 : bytes, mis + es);
  mr_fill(dt, op, kind, c.cseed, rank, W, sb.p, 0, n);
  const uint64_t send_hash = mr_hash(sb.p, bytes);
  void* send = null_bufs ? NULL : sb.p;
  void* recv = inplace ? send : (null_bufs ? NULL : rb.p);
  if (!inplace && rank != root && null_recv_nonroot) recv = NULL;
  MR_OK(&c, qcclReduce(send, recv, n, dt, op, root, t->comm, NULL));
  mr_buf_check_guards(&c, &sb, "sendbuff");
  mr_buf_check_guards(&c, &rb, "recvbuff");
  if ((!inplace || rank != root) && mr_hash(sb.p, bytes) != send_hash)
    mr_case_fail(&c, "%s",
                 inplace ? "non-root's in-place buffer was modified"
                         : "out-of-place call modified sendbuff");
  uint64_t h = 0;
  if (rank == root) {
    const unsigned char* out = inplace ? sb.p : rb.p;
    for (size_t i = 0; i < n; i++)
      if (!mr_check_elem(&c, dt, op, kind, i, mr_load(dt, out, i), i) && c.bad > 20) break;
    h = mr_hash(out, bytes);
    /* second run: the same bits */
    if (inplace)
      mr_fill(dt, op, kind, c.cseed, rank, W, sb.p, 0, n);
    else
      memset(rb.p, MR_FILL_BYTE, bytes);
  }
  MR_OK(&c, qcclReduce(send, recv, n, dt, op, root, t->comm, NULL));
  if (rank == root && mr_hash(inplace ? sb.p : rb.p, bytes) != h)
    mr_case_fail(&c, "second run gave different bits");
  mr_buf_free(&sb);
  mr_buf_free(&rb);
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const int W = t.nranks;
  static const size_t counts[] = {0, 1, 1009};
  int k = 0;
  for (int dt = 0; dt < qcclNumTypes; dt++)
    for (int op = 0; op < qcclNumOps; op++) {
      if (!mr_op_valid((qcclDataType_t)dt, (qcclRedOp_t)op)) continue;
      for (int inplace = 0; inplace < 2; inplace++) {
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
          run_case(&t, (qcclDataType_t)dt, (qcclRedOp_t)op, MR_GEN_REDUCE, counts[i], inplace,
                   k++ % W);
        run_case(&t, (qcclDataType_t)dt, (qcclRedOp_t)op, MR_GEN_SPECIAL, 1009, inplace, k++ % W);
      }
    }
  for (int root = 0; root < W; root++)
    for (int dt = 0; dt < qcclNumTypes; dt++) {
      int nops = mr_dt_is_float((qcclDataType_t)dt) ? 5 : 4;
      qcclRedOp_t op = (qcclRedOp_t)((root + dt) % nops);
      run_case(&t, (qcclDataType_t)dt, op, MR_GEN_REDUCE, 1, (root + dt) & 1, root);
      run_case(&t, (qcclDataType_t)dt, op, MR_GEN_REDUCE, 1009, (root + dt + 1) & 1, root);
    }
  uint64_t st = t.seed ^ 0x5eed01;
  for (int dt = 0; dt < qcclNumTypes; dt++) {
    qcclRedOp_t op = (qcclRedOp_t)((dt + 1) % (mr_dt_is_float((qcclDataType_t)dt) ? 5 : 4));
    size_t n = mr_rand_range(&st, 2, 70000);
    run_case(&t, (qcclDataType_t)dt, op, MR_GEN_REDUCE, n, dt & 1, (int)(st % (uint64_t)W));
  }
  mr_large_t big[2];
  int nbig = mr_large_cases(&t, COLL_ID, big);
  for (int i = 0; i < nbig; i++)
    run_case(&t, big[i].dt, big[i].op, MR_GEN_REDUCE, big[i].count, big[i].inplace, big[i].root);
  /* on 2 ranks the root reads the other's sendbuff single copy from CMA's
   * threshold to 512 KiB (reduce.c, where single copy is on: forced by
   * mr_reduce_cma64k_w2): sizes inside that range and just below its top,
   * each root, in place and out of place, a float and a narrow float */
  if (W == 2) {
    static const size_t single[] = {16411, 100003, 131069};
    for (size_t i = 0; i < sizeof single / sizeof single[0]; i++)
      for (int root = 0; root < 2; root++)
        for (int inplace = 0; inplace < 2; inplace++) {
          run_case(&t, qcclFloat32, qcclSum, MR_GEN_REDUCE, single[i], inplace, root);
          run_case(&t, qcclBfloat16, qcclMax, MR_GEN_REDUCE, single[i] * 2 + 1, inplace, root);
        }
  }
  /* on 2 ranks calls up to 16 MiB have one reducer (reduce.c): one just
   * above, where both reduce (single copy where it is on), each root, out
   * of place and in place */
  if (W == 2 && !t.quick)
    for (int root = 0; root < 2; root++)
      run_case(&t, qcclFloat32, qcclSum, MR_GEN_REDUCE, ((size_t)1 << 22) + 17, root, root);
  return mr_finish(&t);
}
