/*
 * nccl_unmodified.c - an NCCL program that knows nothing of qccl: built
 * against the CUDA toolkit's nccl.h and linked with the toolkit's
 * libnccl.so.2 (NVIDIA's). nccl_preload.sh runs it on qccl's drop-in with
 * LD_PRELOAD or LD_LIBRARY_PATH, and with QCCL_POLICY.
 *
 * It reads its rank from RANK / WORLD_SIZE (torchrun's variables), passes
 * the unique id through a file in the folder argv[1] (rank 0 writes it,
 * the others wait for it), prints ncclGetVersion, runs an all-reduce, a
 * broadcast, an all-gather and a reduce-scatter of f32 whose exact results
 * are representable (multiples of 1/8), and prints each one's largest
 * error against them: the run fails if one exceeds argv[2] (default 0).
 *   usage: nccl_unmodified DIR [TOLERANCE]
 */
#include <math.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(call)                                                          \
  do {                                                                       \
    ncclResult_t r_ = (call);                                                \
    if (r_ != ncclSuccess) {                                                 \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                       \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

static float value(int rank, size_t i) { /* k / 8 with |k| <= 100: exact sums */
  return (float)((int)((i * 2654435761u + (unsigned)rank * 40503u) % 201) - 100) / 8.0f;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: nccl_unmodified DIR [TOLERANCE]\n");
    return 2;
  }
  double tol = argc > 2 ? atof(argv[2]) : 0.0;
  const char* rs = getenv("RANK");
  const char* ws = getenv("WORLD_SIZE");
  if (!rs || !ws) {
    fprintf(stderr, "RANK and WORLD_SIZE must be set\n");
    return 2;
  }
  int rank = atoi(rs), nranks = atoi(ws);
  int version;
  CHECK(ncclGetVersion(&version));
  printf("rank %d: nccl version %d\n", rank, version);

  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/nccl-id", argv[1]);
  ncclUniqueId id;
  if (rank == 0) {
    CHECK(ncclGetUniqueId(&id));
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
      perror(path);
      return 1;
    }
  } else {
    int tries = 0;
    for (;;) {
      FILE* f = fopen(path, "rb");
      if (f) {
        size_t got = fread(&id, sizeof id, 1, f);
        fclose(f);
        if (got == 1) break;
      }
      if (++tries > 12000) {
        fprintf(stderr, "no id in %s\n", path);
        return 1;
      }
      usleep(10000);
    }
  }
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, nranks, id, rank));

  size_t n = 1 << 16;
  float* a = malloc(n * nranks * sizeof(float));
  float* b = malloc(n * nranks * sizeof(float));
  double err[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < n; i++) a[i] = value(rank, i);
  CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, 0));
  for (size_t i = 0; i < n; i++) {
    double s = 0;
    for (int r = 0; r < nranks; r++) s += value(r, i);
    err[0] = fmax(err[0], fabs(b[i] - s));
  }
  for (size_t i = 0; i < n; i++) b[i] = rank == 0 ? value(7, i) : 0;
  CHECK(ncclBroadcast(b, b, n, ncclFloat32, 0, comm, 0));
  for (size_t i = 0; i < n; i++) err[1] = fmax(err[1], fabs(b[i] - value(7, i)));
  CHECK(ncclAllGather(a, b, n, ncclFloat32, comm, 0));
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < n; i++) err[2] = fmax(err[2], fabs(b[r * n + i] - value(r, i)));
  for (size_t i = 0; i < n * nranks; i++) a[i] = value(rank + 11, i);
  CHECK(ncclReduceScatter(a, b, n, ncclFloat32, ncclSum, comm, 0));
  for (size_t i = 0; i < n; i++) {
    double s = 0;
    for (int r = 0; r < nranks; r++) s += value(r + 11, rank * n + i);
    err[3] = fmax(err[3], fabs(b[i] - s));
  }
  CHECK(ncclCommDestroy(comm));
  if (rank == 0) unlink(path);
  printf("rank %d: max error allreduce %g broadcast %g allgather %g reducescatter %g\n", rank,
         err[0], err[1], err[2], err[3]);
  for (int k = 0; k < 4; k++)
    if (!(err[k] <= tol)) {
      printf("rank %d: FAIL: error %g above %g\n", rank, err[k], tol);
      return 1;
    }
  return 0;
}
