/*
 * zero_optim_isa - the AVX2 and AVX-512 optimizer kernels of src/zero
 * against the scalar definition, bit for bit: AdamW, Adam, SGD (plain,
 * momentum, Nesterov), LAMB's update and apply (and zero_lamb_redo, the
 * step's recomputed direction, against the update's), for lengths 0..1000
 * (every tail length of both widths), values from a printed seed that mix
 * ordinary numbers, zeros, tiny and huge magnitudes and both signs, and
 * several steps in a row (moments carried). An ISA the CPU lacks is
 * reported and skipped. Built from the kernels' sources (single process).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zero.h"

static uint64_t g_state;
static uint64_t next(void) {
  uint64_t z = (g_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static float value(void) {
  uint64_t r = next();
  double u = (double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0;
  switch (r & 15) {
    case 0:
      return 0.0f;
    case 1:
      return (float)(u * 1e-30);
    case 2:
      return (float)(u * 1e10);
    case 3:
      return (float)(u * 1e-6);
    default:
      return (float)u;
  }
}

static int supported(zero_isa_t isa) {
  __builtin_cpu_init();
  if (isa == ZERO_ISA_AVX2) return __builtin_cpu_supports("avx2");
  if (isa == ZERO_ISA_AVX512) return __builtin_cpu_supports("avx512f");
  return 1;
}

int main(void) {
  uint64_t seed = getenv("QCCL_TEST_SEED") ? strtoull(getenv("QCCL_TEST_SEED"), NULL, 10)
                                           : (uint64_t)time(NULL);
  printf("zero_optim_isa: seed %llu (replay: QCCL_TEST_SEED=%llu)\n", (unsigned long long)seed,
         (unsigned long long)seed);
  g_state = seed;
  const char* isa_name[] = {"scalar", "avx2", "avx512"};
  const char* kind_name[] = {"adamw", "adam", "sgd", "sgd-momentum", "nesterov", "lamb"};
  const size_t lens[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 47, 64, 100, 257, 1000};
  long compared = 0, failed = 0;
  for (int isa = ZERO_ISA_AVX2; isa <= ZERO_ISA_AVX512; isa++) {
    if (!supported((zero_isa_t)isa)) {
      printf("  %s: not on this CPU, skipped\n", isa_name[isa]);
      continue;
    }
    for (int kind = 0; kind < 6; kind++) {
      for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        size_t n = lens[li];
        float* buf[2][4];
        for (int c = 0; c < 2; c++)
          for (int a = 0; a < 4; a++) buf[c][a] = malloc((n + 1) * sizeof(float));
        for (size_t i = 0; i < n; i++) {
          buf[0][0][i] = value();        /* w */
          buf[0][1][i] = value();        /* m */
          buf[0][2][i] = fabsf(value()); /* v >= 0 */
          buf[0][3][i] = value();        /* g */
        }
        for (int a = 0; a < 4; a++) memcpy(buf[1][a], buf[0][a], n * sizeof(float));
        zero_optim_args_t args = {0};
        args.kind = kind == 0   ? qcclZeroAdamW
                    : kind == 1 ? qcclZeroAdam
                    : kind == 5 ? qcclZeroLamb
                                : qcclZeroSGD;
        args.lr = 0.01f;
        args.beta1 = 0.9f;
        args.beta2 = 0.999f;
        args.eps = 1e-8f;
        args.wd = 0.05f;
        args.momentum = kind >= 3 && kind <= 4 ? 0.9f : 0.0f;
        args.nesterov = kind == 4;
        for (int step = 1; step <= 3; step++) {
          args.bc1 = (float)(1.0 - pow(0.9, step));
          args.bc2 = (float)(1.0 - pow(0.999, step));
          for (int c = 0; c < 2; c++) {
            zero_isa_t which = c == 0 ? ZERO_ISA_SCALAR : (zero_isa_t)isa;
            float** b = buf[c];
            if (kind == 5) {
              float* u = malloc((n + 1) * sizeof(float));
              memcpy(u, b[3], n * sizeof(float));
              zero_lamb_update_isa(which, &args, b[0], b[1], b[2], u, n);
              /* the step's second pass recomputes the direction from m and v */
              float* redo = malloc((n + 1) * sizeof(float));
              zero_lamb_redo(&args, b[0], b[1], b[2], redo, n);
              compared++;
              if (memcmp(redo, u, n * sizeof(float)) != 0) {
                printf("FAIL %s lamb n=%zu step %d: zero_lamb_redo differs from the direction\n",
                       isa_name[c == 0 ? 0 : isa], n, step);
                failed++;
              }
              free(redo);
              zero_lamb_apply_isa(which, b[0], u, n, 0.0123f);
              memcpy(b[3], u, n * sizeof(float)); /* compare the direction too */
              free(u);
            } else {
              zero_optim_apply_isa(which, &args, b[0], b[1], b[2], b[3], n);
            }
          }
          for (int a = 0; a < 4; a++) {
            compared++;
            if (memcmp(buf[0][a], buf[1][a], n * sizeof(float)) != 0) {
              size_t i = 0;
              while (memcmp(&buf[0][a][i], &buf[1][a][i], sizeof(float)) == 0) i++;
              printf("FAIL %s %s n=%zu step %d: array %d element %zu: scalar %.9g, %s %.9g\n",
                     isa_name[isa], kind_name[kind], n, step, a, i, buf[0][a][i], isa_name[isa],
                     buf[1][a][i]);
              failed++;
              break;
            }
          }
        }
        for (int c = 0; c < 2; c++)
          for (int a = 0; a < 4; a++) free(buf[c][a]);
      }
    }
    printf("  %s: compared with scalar\n", isa_name[isa]);
  }
  printf("zero_optim_isa: %ld comparisons, %ld failed: %s\n", compared, failed,
         failed ? "FAIL" : "PASS");
  return failed ? 1 : 0;
}
