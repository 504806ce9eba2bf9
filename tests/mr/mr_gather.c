/*
 * mr_gather - qcclGather: rank i's count elements land at block i of the
 * root's recvbuff, bit for bit.
 *
 * Cases: every root x every dtype x in place (on the root, sendbuff ==
 * recvbuff + root * count) / out of place at counts {1, 1009}; count 0 for
 * every root; one random count per dtype; 65537 f32 for every root and
 * 262147 bf16 (the sizes single copy takes); blocks of 4 MiB + 12 bytes
 * (in place) and 4.5 MiB + 4097 bytes (staged: half-slot chunks, the
 * root's own block copied while it waits); the large-count rotation of
 * mr_util.h; on 2 ranks the split of blocks above 2 MiB (gather.c: the
 * writer stages half, or all in place, and writes the rest in pieces) at
 * byte counts on and off the chunk and page edges, every root, out of
 * place and in place. Non-root ranks pass recvbuff NULL or a buffer that must stay
 * untouched. The root checks every block; sendbuffs stay unchanged;
 * nothing is written outside recvbuff; a second run gives the same bits.
 */
#include <stdio.h>
#include <string.h>

#include "mr_util.h"

#define COLL_ID 9

static void run_case(mr_t* t, qcclDataType_t dt, size_t n, int inplace, int root) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "gather %s n=%zu %s root=%d", mr_dt_name(dt), n,
                     inplace ? "inplace" : "outofplace", root))
    return;
  const int W = t->nranks, rank = t->rank;
  const size_t es = mr_dt_size(dt), bytes = n * es;
  const size_t mis = ((c.cseed >> 8) % 4) * es;
  const int null_bufs = n == 0 && (c.cseed & 1);
  const int nonroot_null = (c.cseed >> 4) & 1;
  const int is_root = rank == root;
  const int own_in_recv = inplace && is_root;
  mr_buf_t sb, rb;
  /* the root's recvbuff holds W blocks; a non-root's optional one just one */
  mr_buf_alloc(&rb, is_root ? bytes * (size_t)W : (nonroot_null ? 0 : bytes * (size_t)W), mis);
  mr_buf_alloc(&sb, own_in_recv ? 0 : bytes, mis + es);
  unsigned char* own = own_in_recv ? rb.p + (size_t)root * bytes : sb.p;
  mr_fill(dt, qcclSum, MR_GEN_RAW, c.cseed, rank, W, own, 0, n);
  const uint64_t send_hash = mr_hash(own, bytes);
  void* send = null_bufs ? NULL : own;
  void* recv = null_bufs ? NULL : rb.p;
  if (!is_root && nonroot_null) recv = NULL;
  MR_OK(&c, qcclGather(send, recv, n, dt, root, t->comm, NULL));
  mr_buf_check_guards(&c, &rb, "recvbuff");
  mr_buf_check_guards(&c, &sb, "sendbuff");
  if (!own_in_recv && mr_hash(sb.p, bytes) != send_hash) mr_case_fail(&c, "sendbuff was modified");
  uint64_t h = 0;
  if (is_root) {
    for (int j = 0; j < W; j++) {
      char what[64];
      snprintf(what, sizeof what, "recvbuff block %d", j);
      mr_check_copy(&c, dt, rb.p, (size_t)j * n, n, j, 0, what);
    }
    h = mr_hash(rb.p, bytes * (size_t)W);
    memset(rb.p, MR_FILL_BYTE, bytes * (size_t)W);
    if (own_in_recv) mr_fill(dt, qcclSum, MR_GEN_RAW, c.cseed, rank, W, own, 0, n);
  } else if (!mr_buf_untouched(&rb)) {
    mr_case_fail(&c, "a non-root's recvbuff was written");
  }
  MR_OK(&c, qcclGather(send, recv, n, dt, root, t->comm, NULL));
  if (is_root && mr_hash(rb.p, bytes * (size_t)W) != h)
    mr_case_fail(&c, "second run gave different bits");
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
  uint64_t st = t.seed ^ 0x5eed09;
  for (int dt = 0; dt < qcclNumTypes; dt++) {
    size_t n = mr_rand_range(&st, 2, 30000);
    run_case(&t, (qcclDataType_t)dt, n, dt & 1, (int)(st % (uint64_t)W));
  }
  /* blocks of 256 KiB and more: on more than 2 ranks the others write them
   * into the root's recvbuff (gather.c), on 2 the root reads them */
  for (int root = 0; root < W; root++) run_case(&t, qcclFloat32, 65537, root & 1, root);
  run_case(&t, qcclBfloat16, 262147, 0, W - 1);
  /* staged blocks of four slots and more go in half-slot chunks (gather.c,
   * shm_half_span; 4 MiB with the default 1 MiB slot), the root copying
   * its own block while it waits: edges off the half slot and the page */
  run_case(&t, qcclFloat32, ((size_t)1 << 20) + 3, 1, 0);
  run_case(&t, qcclUint8, ((size_t)9 << 19) + 4097, 0, W - 1);
  mr_large_t big[2];
  int nbig = mr_large_cases(&t, COLL_ID, big);
  for (int i = 0; i < nbig; i++) run_case(&t, big[i].dt, big[i].count, big[i].inplace, big[i].root);
  if (W == 2)
    for (size_t i = 0; i < MR_SPLIT_CASES; i++)
      for (int root = 0; root < W; root++) {
        const mr_split_t c = mr_split_cases[i];
        run_case(&t, c.dt, c.count, (int)(i + (size_t)root) % 3 == 0, root);
      }

  return mr_finish(&t);
}
