/*
 * nccl_policy.c - QCCL_POLICY quantizes an NCCL program's all-gathers and
 * reduce-scatters without a change in the program.
 *
 * The calls are plain NCCL (ncclAllGather and ncclReduceScatter of f32, an
 * ncclReduceScatter of int32 that no policy may touch). What the program
 * cannot see through NCCL's API it reads through qccl_nccl.h's
 * qcclCommFromNccl and qccl's qcclCommGetStats, looked up at run time
 * (dlsym), as a program that may also run on NVIDIA's library would:
 *   usage: nccl_policy quantized   (run with QCCL_POLICY=allgather:int8:b256,
 *                                   reducescatter:int8:b256)
 *          nccl_policy plain       (run without QCCL_POLICY)
 * quantized: every f32 result lies within the int8 bound of the exact one
 * (half a step of each block's scale per quantization: for the gather
 * max|shard| / 254, for the reduce-scatter the sum over ranks of that,
 * twice across hosts), and some differ from it (the call was quantized);
 * the counters hold the calls under qcclStatAllGatherQ /
 * qcclStatReduceScatterQ and none under the plain slots but the int32 one;
 * with the policy turned off on the communicator (qcclCommSetPolicy NULL)
 * the same gather sends at least 3.5x the bytes.
 * plain: exact results, plain slots only.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nt_util.h"
#include "qccl.h" /* the counters' types only: the functions come by dlsym */

typedef qcclResult_t (*from_nccl_fn)(struct ncclComm*, qcclComm_t*);
typedef qcclResult_t (*get_stats_fn)(qcclComm_t, qcclStats_t*);
typedef qcclResult_t (*reset_stats_fn)(qcclComm_t);
typedef qcclResult_t (*set_policy_fn)(qcclComm_t, qcclStatColl_t, const qcclQuantSpec_t*, size_t);

static void* sym(const char* name) {
  void* p = dlsym(RTLD_DEFAULT, name);
  if (p == NULL) nt_fail("%s not found: not qccl's libnccl", name);
  return p;
}

static uint64_t bytes(const qcclStats_t* s, qcclStatColl_t c) {
  return s->coll[c].bytesIntra + s->coll[c].bytesInter;
}

int main(int argc, char** argv) {
  if (argc != 2 || (strcmp(argv[1], "quantized") != 0 && strcmp(argv[1], "plain") != 0)) {
    fprintf(stderr, "usage: nccl_policy quantized|plain\n");
    return 2;
  }
  int quantized = strcmp(argv[1], "quantized") == 0;
  nt_setup();
  ncclComm_t comm;
  nt_init_comm(&comm, 0, NULL);
  int W = nt_nranks, R = nt_rank;
  qcclComm_t q;
  if (((from_nccl_fn)sym("qcclCommFromNccl"))(comm, &q) != qcclSuccess)
    nt_fail("qcclCommFromNccl refused the communicator");
  get_stats_fn get_stats = (get_stats_fn)sym("qcclCommGetStats");
  ((reset_stats_fn)sym("qcclCommResetStats"))(q);

  size_t n = 65536; /* per rank: 256 KiB of f32, 1 MiB gathered on 4 ranks */
  float* send = malloc(n * (size_t)W * sizeof(float));
  float* recv = malloc(n * (size_t)W * sizeof(float));
  double* bound = calloc((size_t)W, sizeof(double)); /* max |x| of rank r's shard / 254 */
  if (!send || !recv || !bound) nt_fail("out of memory");
  for (int r = 0; r < W; r++)
    for (size_t i = 0; i < n; i++) {
      double v = fabs(nt_value(1, r, i, ncclFloat32, 0));
      if (v / 254 > bound[r]) bound[r] = v / 254;
    }

  /* all-gather: qwZ under the policy */
  for (size_t i = 0; i < n; i++) send[i] = (float)nt_value(1, R, i, ncclFloat32, 0);
  NT_CHECK(ncclAllGather(send, recv, n, ncclFloat32, comm, NULL));
  size_t inexact = 0;
  for (int r = 0; r < W; r++)
    for (size_t i = 0; i < n; i++) {
      double ref = nt_value(1, r, i, ncclFloat32, 0), got = recv[(size_t)r * n + i];
      double err = fabs(got - ref), tol = quantized ? bound[r] * 1.0001 + 1e-7 : 0;
      if (!(err <= tol))
        nt_fail("ncclAllGather (%s): element %zu of rank %d is %.9g, expected %.9g (bound %.3g)",
                argv[1], i, r, got, ref, tol);
      inexact += err > 0;
    }
  if (quantized && inexact == 0) nt_fail("ncclAllGather: every element exact: not quantized");

  /* reduce-scatter: qgZ under the policy */
  for (size_t i = 0; i < n * (size_t)W; i++) send[i] = (float)nt_value(2, R, i, ncclFloat32, 0);
  NT_CHECK(ncclReduceScatter(send, recv, n, ncclFloat32, ncclSum, comm, NULL));
  double hop_bound = 0;
  for (int r = 0; r < W; r++) hop_bound += 1.0 / 254; /* values lie in [-1, 1] */
  inexact = 0;
  for (size_t i = 0; i < n; i++) {
    double mag, ref = nt_reduce_ref(2, (size_t)R * n + i, ncclFloat32, ncclSum, 0, NULL, 0, &mag);
    double err = fabs(recv[i] - ref);
    double tol = quantized ? 2 * hop_bound * 1.01 + 1e-5 : 8 * W * 0x1p-23 * mag;
    if (!(err <= tol))
      nt_fail("ncclReduceScatter (%s): element %zu is %.9g, expected %.9g (tolerance %.3g)",
              argv[1], i, recv[i], ref, tol);
    inexact += err > 8 * W * 0x1p-23 * mag;
  }
  if (quantized && inexact == 0) nt_fail("ncclReduceScatter: every element exact: not quantized");

  /* an integer reduce-scatter: no policy applies to it */
  int32_t* isend = malloc(n * (size_t)W * sizeof(int32_t));
  int32_t* irecv = malloc(n * sizeof(int32_t));
  if (!isend || !irecv) nt_fail("out of memory");
  for (size_t i = 0; i < n * (size_t)W; i++) isend[i] = (int32_t)nt_value(3, R, i, ncclInt32, 0);
  NT_CHECK(ncclReduceScatter(isend, irecv, n, ncclInt32, ncclSum, comm, NULL));
  for (size_t i = 0; i < n; i++)
    if (irecv[i] != nt_reduce_ref(3, (size_t)R * n + i, ncclInt32, ncclSum, 0, NULL, 0, NULL))
      nt_fail("ncclReduceScatter of int32: element %zu", i);

  qcclStats_t s = QCCL_STATS_INITIALIZER;
  if (get_stats(q, &s) != qcclSuccess) nt_fail("qcclCommGetStats failed");
  uint64_t ag = s.coll[qcclStatAllGather].calls, agq = s.coll[qcclStatAllGatherQ].calls;
  uint64_t rs = s.coll[qcclStatReduceScatter].calls, rsq = s.coll[qcclStatReduceScatterQ].calls;
  if (quantized ? (ag != 0 || agq != 1 || rs != 1 || rsq != 1)
                : (ag != 1 || agq != 0 || rs != 2 || rsq != 0))
    nt_fail(
        "counters (%s): AllGather %llu, AllGatherQ %llu, ReduceScatter %llu, "
        "ReduceScatterQ %llu calls",
        argv[1], (unsigned long long)ag, (unsigned long long)agq, (unsigned long long)rs,
        (unsigned long long)rsq);
  if (quantized && W > 1) {
    uint64_t qbytes = bytes(&s, qcclStatAllGatherQ);
    if (qbytes == 0 || bytes(&s, qcclStatReduceScatterQ) == 0)
      nt_fail("no bytes counted under the quantized slots");
    /* the same gather with the policy off on this communicator */
    set_policy_fn set_policy = (set_policy_fn)sym("qcclCommSetPolicy");
    if (set_policy(q, qcclStatAllGather, NULL, 0) != qcclSuccess) nt_fail("qcclCommSetPolicy");
    for (size_t i = 0; i < n; i++) send[i] = (float)nt_value(1, R, i, ncclFloat32, 0);
    NT_CHECK(ncclAllGather(send, recv, n, ncclFloat32, comm, NULL));
    for (int r = 0; r < W; r++)
      for (size_t i = 0; i < n; i++)
        if (recv[(size_t)r * n + i] != (float)nt_value(1, r, i, ncclFloat32, 0))
          nt_fail("plain ncclAllGather after the policy was turned off: element %zu of rank %d", i,
                  r);
    if (get_stats(q, &s) != qcclSuccess) nt_fail("qcclCommGetStats failed");
    uint64_t pbytes = bytes(&s, qcclStatAllGather);
    if (!(pbytes >= 3.5 * (double)qbytes))
      nt_fail("plain gather %llu bytes, quantized %llu: expected a ratio of about 4",
              (unsigned long long)pbytes, (unsigned long long)qbytes);
    printf("rank %d: gather bytes plain %llu, int8 %llu (%.2fx); reduce-scatter int8 %llu\n", R,
           (unsigned long long)pbytes, (unsigned long long)qbytes, (double)pbytes / qbytes,
           (unsigned long long)bytes(&s, qcclStatReduceScatterQ));
  }
  NT_CHECK(ncclCommDestroy(comm));
  free(irecv);
  free(isend);
  free(bound);
  free(recv);
  free(send);
  printf("rank %d of %d: ok (%s)\n", R, W, argv[1]);
  return 0;
}
