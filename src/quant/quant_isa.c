/*
 * quant_isa.c - which kernels run: the CPU feature table (cpuid and xgetbv,
 * read once) and QCCL_QUANT_ISA=scalar|avx2|avx512.
 *
 * AVX2 kernels need AVX2 and F16C; AVX-512 kernels need AVX-512 F, BW and
 * VL. Both also need the OS to save the wider registers (XCR0). Without
 * QCCL_QUANT_ISA the best available is used; forcing an ISA the CPU lacks
 * is refused (every codec call then fails with a message saying so).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/env.h"
#include "core/err.h"
#include "core/log.h"
#include "quant/quant_impl.h"

#if defined(QUANT_X86)
#include <cpuid.h>
#endif

/* The CPU feature table and the chosen ISA: set once, read-only after. */
static struct {
  pthread_once_t once;
  int available[QUANT_ISA_COUNT];
  quant_isa_t isa;
  qcclResult_t res;
  char msg[160];
} quant_cpu = {PTHREAD_ONCE_INIT, {0}, QUANT_ISA_SCALAR, qcclSuccess, ""};

static const char* const isa_names[QUANT_ISA_COUNT] = {"scalar", "avx2", "avx512"};

const char* quant_isa_name(quant_isa_t isa) {
  return (unsigned)isa < QUANT_ISA_COUNT ? isa_names[isa] : "unknown";
}

#if defined(QUANT_X86)
static uint64_t xcr0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

static void detect(int* avail) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
  if (!osxsave || !avx) return;
  uint64_t x = xcr0();
  int ymm_os = (x & 0x6) == 0x6;
  int zmm_os = (x & 0xe6) == 0xe6;
  if (__get_cpuid_max(0, NULL) < 7) return;
  __cpuid_count(7, 0, a, b, c, d);
  int avx2 = (b >> 5) & 1;
  int avx512f = (b >> 16) & 1, avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
  avail[QUANT_ISA_AVX2] = ymm_os && avx2 && f16c;
  avail[QUANT_ISA_AVX512] = zmm_os && avx512f && avx512bw && avx512vl && f16c;
}
#else
static void detect(int* avail) {
  (void)avail;
}
#endif

static void choose(void) {
  quant_cpu.available[QUANT_ISA_SCALAR] = 1;
  detect(quant_cpu.available);
  quant_isa_t best = QUANT_ISA_SCALAR;
  for (int i = 0; i < QUANT_ISA_COUNT; i++)
    if (quant_cpu.available[i]) best = (quant_isa_t)i;
  quant_cpu.isa = best;
  const char* want = env_get("QCCL_QUANT_ISA");
  if (want != NULL && want[0] != '\0') {
    int found = -1;
    for (int i = 0; i < QUANT_ISA_COUNT; i++)
      if (env_word_is(want, isa_names[i])) found = i;
    if (found < 0) {
      quant_cpu.res = qcclInvalidUsage;
      snprintf(quant_cpu.msg, sizeof quant_cpu.msg,
               "QCCL_QUANT_ISA=%.40s: unknown, use scalar, avx2 or avx512", want);
    } else if (!quant_cpu.available[found]) {
      quant_cpu.res = qcclInvalidUsage;
      snprintf(quant_cpu.msg, sizeof quant_cpu.msg,
               "QCCL_QUANT_ISA=%s: this CPU (or build) lacks %s", want,
               found == QUANT_ISA_AVX2 ? "AVX2 and F16C" : "AVX-512 F/BW/VL");
    } else {
      quant_cpu.isa = (quant_isa_t)found;
    }
  }
  if (quant_cpu.res == qcclSuccess)
    QCCL_INFO(LOG_QUANT, "quant: %s kernels (available: scalar%s%s)", isa_names[quant_cpu.isa],
              quant_cpu.available[QUANT_ISA_AVX2] ? " avx2" : "",
              quant_cpu.available[QUANT_ISA_AVX512] ? " avx512" : "");
}

int quant_isa_available(quant_isa_t isa) {
  pthread_once(&quant_cpu.once, choose);
  return (unsigned)isa < QUANT_ISA_COUNT && quant_cpu.available[isa] && quant_kernels(isa) != NULL;
}

qcclResult_t quant_isa_default(quant_isa_t* isa) {
  pthread_once(&quant_cpu.once, choose);
  if (quant_cpu.res != qcclSuccess) return QCCL_ERR(quant_cpu.res, "%s", quant_cpu.msg);
  *isa = quant_cpu.isa;
  return qcclSuccess;
}

const quant_kernels_t* quant_kernels(quant_isa_t isa) {
  switch (isa) {
    case QUANT_ISA_SCALAR:
      return &quant_kernels_scalar;
#if defined(QUANT_X86)
    case QUANT_ISA_AVX2:
      return &quant_kernels_avx2;
    case QUANT_ISA_AVX512:
      return &quant_kernels_avx512;
#endif
    default:
      return NULL;
  }
}
