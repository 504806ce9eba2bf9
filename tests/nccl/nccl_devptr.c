/*
 * nccl_devptr.c - device buffers and streams at the drop-in's door, on a
 * machine without a GPU: the drop-in loads a stand-in CUDA runtime
 * (fake_cudart.c, named by QCCL_NCCL_CUDART) that calls one array device
 * memory. Every collective and point-to-point call given that array as a
 * buffer fails with ncclInvalidArgument naming the call and the argument,
 * before any communication; a stream is synchronized before the call runs
 * (counted by the stand-in), a broken one is ncclUnhandledCudaError naming
 * the call; ncclCommCuDevice reports the stand-in's current device (3);
 * host buffers keep working.
 *   usage: QCCL_NCCL_CUDART=libfakecudart.so qcclrun -n 2 -- nccl_devptr
 *          QCCL_NCCL_CUDART=/no/such.so qcclrun -n 1 -- nccl_devptr badpath
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nt_util.h"

#define N 64

int main(int argc, char** argv) {
  int badpath = argc > 1 && strcmp(argv[1], "badpath") == 0;
  nt_setup();
  ncclComm_t comm;
  nt_init_comm(&comm, 0, NULL);
  int W = nt_nranks, R = nt_rank;
  static float dev[N * 8], host[N * 8], host2[N * 8];
  if (badpath) { /* every call that touches a buffer names the variable */
    nt_expect_error(ncclAllReduce(host, host2, N, ncclFloat32, ncclSum, comm, NULL),
                    ncclInvalidArgument, "QCCL_NCCL_CUDART that does not load", "ncclAllReduce",
                    "QCCL_NCCL_CUDART");
    NT_CHECK(ncclCommDestroy(comm));
    printf("rank %d: ok (badpath)\n", R);
    return 0;
  }
  void* fake = dlopen(getenv("QCCL_NCCL_CUDART"), RTLD_NOW); /* the drop-in's handle */
  if (fake == NULL) nt_fail("cannot open QCCL_NCCL_CUDART: %s", dlerror());
  void (*mark)(const void*, size_t) =
      (void (*)(const void*, size_t))dlsym(fake, "fake_cuda_mark_device");
  int (*syncs)(void) = (int (*)(void))dlsym(fake, "fake_cuda_sync_count");
  if (!mark || !syncs) nt_fail("not the stand-in runtime");
  mark(dev, sizeof dev);

  int device = -1;
  NT_CHECK(ncclCommCuDevice(comm, &device));
  if (device != 3) nt_fail("ncclCommCuDevice = %d, the stand-in's device is 3", device);

    /* each call refused before it communicates, naming call and argument */
#define EXPECT_DEVICE(expr, call, arg) \
  nt_expect_error((expr), ncclInvalidArgument, call " with device " arg, call, arg)
  EXPECT_DEVICE(ncclAllReduce(dev, host, N, ncclFloat32, ncclSum, comm, NULL), "ncclAllReduce",
                "sendbuff");
  EXPECT_DEVICE(ncclAllReduce(host, dev, N, ncclFloat32, ncclSum, comm, NULL), "ncclAllReduce",
                "recvbuff");
  EXPECT_DEVICE(ncclBroadcast(host, dev, N, ncclFloat32, 0, comm, NULL), "ncclBroadcast",
                "recvbuff");
  EXPECT_DEVICE(ncclBcast(dev, N, ncclFloat32, 0, comm, NULL), "ncclBcast", "buff");
  EXPECT_DEVICE(ncclReduce(dev, host, N, ncclFloat32, ncclSum, 0, comm, NULL), "ncclReduce",
                "sendbuff");
  EXPECT_DEVICE(ncclAllGather(host, dev, N, ncclFloat32, comm, NULL), "ncclAllGather", "recvbuff");
  EXPECT_DEVICE(ncclReduceScatter(dev, host, N, ncclFloat32, ncclSum, comm, NULL),
                "ncclReduceScatter", "sendbuff");
  EXPECT_DEVICE(ncclAlltoAll(host, dev + N, N, ncclFloat32, comm, NULL), "ncclAlltoAll",
                "recvbuff");
  EXPECT_DEVICE(ncclGather(host, dev, N, ncclFloat32, 0, comm, NULL), "ncclGather", "recvbuff");
  EXPECT_DEVICE(ncclScatter(dev, host, N, ncclFloat32, 0, comm, NULL), "ncclScatter", "sendbuff");
  EXPECT_DEVICE(ncclSend(dev + N, N, ncclFloat32, 0, comm, NULL), "ncclSend", "sendbuff");
  EXPECT_DEVICE(ncclRecv(dev + 2 * N, N, ncclFloat32, 0, comm, NULL), "ncclRecv", "recvbuff");

  /* a stream is synchronized before the call; a broken one is an error */
  for (int i = 0; i < N; i++) host[i] = (float)(R + i);
  int before = syncs();
  NT_CHECK(ncclAllReduce(host, host2, N, ncclFloat32, ncclSum, comm, (cudaStream_t)0x5a));
  if (syncs() != before + 1) nt_fail("the stream was synchronized %d times", syncs() - before);
  for (int i = 0; i < N; i++)
    if (host2[i] != (float)(W * i + W * (W - 1) / 2))
      nt_fail("ncclAllReduce on a stream: element %d is %g", i, host2[i]);
  nt_expect_error(ncclAllReduce(host, host2, N, ncclFloat32, ncclSum, comm, (cudaStream_t)0xbad),
                  ncclUnhandledCudaError, "ncclAllReduce on a broken stream", "ncclAllReduce",
                  "cudaStreamSynchronize");
  /* host buffers still work after the refusals (every rank refused the same) */
  NT_CHECK(ncclAllGather(host, host2, N, ncclFloat32, comm, NULL));
  for (int r = 0; r < W; r++)
    for (int i = 0; i < N; i++)
      if (host2[r * N + i] != (float)(r + i)) nt_fail("ncclAllGather: element %d of rank %d", i, r);
  NT_CHECK(ncclCommDestroy(comm));
  printf("rank %d of %d: ok\n", R, W);
  return 0;
}
