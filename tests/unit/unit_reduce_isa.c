/*
 * unit_reduce_isa - the AVX2 build of the reduction kernels gives the same
 * bits as the baseline build (collectives/reduce_kernels_impl.h), for every
 * datatype and op, 1..5 sources, counts around the block size and the
 * vector widths, and inputs of random bits (so NaNs, infinities, denormals,
 * both zeros and the narrow formats' every code), from a printed seed.
 * Skips (77) on a CPU or build without AVX2.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives/reduce_kernels.h"
#include "core/dtype.h"

static uint64_t rng_state;

static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int main(int argc, char** argv) {
  uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
  printf("unit_reduce_isa: seed %" PRIu64 " (replay: unit_reduce_isa %" PRIu64 ")\n", seed, seed);
  rng_state = seed;
  if (!reduce_isa_avx2()) {
    printf("unit_reduce_isa: no AVX2 on this CPU or in this build (or QCCL_REDUCE_ISA=scalar)\n");
    return 77;
  }
  const size_t counts[] = {0, 1, 7, 8, 9, 31, 257, 511, 512, 513, 1031, 4099};
  enum { KMAX = 5, NMAX = 4099 };
  unsigned char* src[KMAX];
  for (int j = 0; j < KMAX; j++) src[j] = malloc(NMAX * 8);
  unsigned char* a = malloc(NMAX * 8);
  unsigned char* b = malloc(NMAX * 8);
  int checked = 0, bad = 0;
  for (int t = 0; t < qcclNumTypes; t++) {
    size_t es = dtype_size((qcclDataType_t)t);
    for (int op = 0; op < qcclNumOps; op++) {
      if (op == qcclAvg && !dtype_is_float((qcclDataType_t)t)) continue;
      for (int k = 1; k <= KMAX; k++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
          size_t n = counts[c];
          for (int j = 0; j < k; j++)
            for (size_t i = 0; i < n * es; i++) src[j][i] = (unsigned char)rng_next();
          const void* srcs[KMAX];
          for (int j = 0; j < k; j++) srcs[j] = src[j];
          memset(a, 0xa5, NMAX * 8);
          memset(b, 0xa5, NMAX * 8);
          reduce_kernel_isa(0, a, srcs, k, n, (qcclDataType_t)t, (qcclRedOp_t)op, k);
          reduce_kernel_isa(1, b, srcs, k, n, (qcclDataType_t)t, (qcclRedOp_t)op, k);
          checked++;
          if (memcmp(a, b, NMAX * 8) != 0) {
            size_t i = 0;
            while (a[i] == b[i]) i++;
            if (bad++ < 10)
              printf("FAIL %s op %d k %d count %zu: byte %zu differs (%02x baseline, %02x avx2)\n",
                     dtype_name((qcclDataType_t)t), op, k, n, i, a[i], b[i]);
          }
        }
    }
  }
  for (int j = 0; j < KMAX; j++) free(src[j]);
  free(a);
  free(b);
  printf("unit_reduce_isa: %d cases, %d differ\n", checked, bad);
  return bad ? 1 : 0;
}
