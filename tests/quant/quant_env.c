/*
 * quant_env - QCCL_QUANT_ISA picks the implementation, once per process:
 *   quant_env best          unset: the best the CPU has
 *   quant_env force NAME    QCCL_QUANT_ISA=NAME: that one if the CPU has
 *                           it, else every codec call fails with
 *                           qcclInvalidUsage and a message naming the
 *                           variable and what the CPU lacks
 *   quant_env unknown       QCCL_QUANT_ISA=bogus: refused, naming it
 * meson runs each with its environment.
 */
#include "qtest.h"
#include "quant/quant.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* mode = argv[1];
  printf("quant_env: %s %s (QCCL_QUANT_ISA=%s)\n", mode, argc > 2 ? argv[2] : "",
         getenv("QCCL_QUANT_ISA") ? getenv("QCCL_QUANT_ISA") : "");
  float x[64] = {1.0f};
  unsigned char c[128];
  qcclQuantSpec_t s = QCCL_QUANT_SPEC_INITIALIZER;
  quant_isa_t isa = QUANT_ISA_COUNT;
  qcclResult_t r = quant_isa_default(&isa);
  qcclResult_t q = qcclQuantize(x, 64, qcclFloat32, &s, c);
  const char* msg = qcclGetLastError(NULL);
  if (strcmp(mode, "best") == 0) {
    quant_isa_t best = QUANT_ISA_SCALAR;
    for (int i = 0; i < QUANT_ISA_COUNT; i++)
      if (quant_isa_available((quant_isa_t)i)) best = (quant_isa_t)i;
    QT_CHECK(r == qcclSuccess && isa == best, "default %s, best available %s", quant_isa_name(isa),
             quant_isa_name(best));
    QT_CHECK(q == qcclSuccess, "quantize failed");
  } else if (strcmp(mode, "force") == 0 && argc > 2) {
    quant_isa_t want = QUANT_ISA_COUNT;
    for (int i = 0; i < QUANT_ISA_COUNT; i++)
      if (strcmp(argv[2], quant_isa_name((quant_isa_t)i)) == 0) want = (quant_isa_t)i;
    QT_CHECK(want != QUANT_ISA_COUNT, "unknown name %s", argv[2]);
    if (want != QUANT_ISA_COUNT && quant_isa_available(want)) {
      QT_CHECK(r == qcclSuccess && isa == want, "forced %s, got %s", argv[2], quant_isa_name(isa));
      QT_CHECK(q == qcclSuccess, "quantize failed");
    } else {
      printf("quant_env: this CPU lacks %s: it must be refused\n", argv[2]);
      QT_CHECK(r == qcclInvalidUsage && q == qcclInvalidUsage, "results %d %d", r, q);
      QT_CHECK(strstr(msg, "QCCL_QUANT_ISA") && strstr(msg, "lacks"), "message: %s", msg);
    }
  } else if (strcmp(mode, "unknown") == 0) {
    QT_CHECK(r == qcclInvalidUsage && q == qcclInvalidUsage, "results %d %d", r, q);
    QT_CHECK(strstr(msg, "QCCL_QUANT_ISA") != NULL, "message does not name the variable: %s", msg);
  } else {
    return 2;
  }
  return qt_done("quant_env");
}
