/*
 * quant_spec - bad arguments to the public codec API are refused with
 * qcclInvalidArgument and a message (qcclGetLastError(NULL)) that names the
 * field: NULL spec, wrong size / magic / version, bits, block (not a power
 * of two, out of 32..4096), mode, rounding, rotate, rank, NULL src / dst /
 * bytes with count > 0, unsupported types, too large a count. Valid specs,
 * and count 0 with NULL buffers, are accepted. Public API only (libqccl.so).
 */
#include "qtest.h"

static void expect(qcclResult_t r, const char* field, const char* what) {
  const char* msg = qcclGetLastError(NULL);
  QT_CHECK(r == qcclInvalidArgument, "%s: result %d, expected qcclInvalidArgument", what, (int)r);
  QT_CHECK(msg != NULL && strstr(msg, field) != NULL, "%s: message \"%s\" does not name %s", what,
           msg ? msg : "(null)", field);
}

/* Every entry point with spec s must fail naming field. */
static void all_refuse(const qcclQuantSpec_t* s, const char* field, const char* what) {
  float x[64] = {0}, y[64];
  unsigned char c[512];
  size_t bytes = 0;
  float mb;
  expect(qcclQuantSize(64, s, &bytes), field, what);
  expect(qcclQuantize(x, 64, qcclFloat32, s, c), field, what);
  expect(qcclDequantize(c, 64, qcclFloat32, s, y), field, what);
  expect(qcclQuantErrorBound(c, 64, s, NULL, &mb), field, what);
}

int main(void) {
  printf("quant_spec: deterministic arguments\n");
  qcclQuantSpec_t good = QCCL_QUANT_SPEC_INITIALIZER, s;
  float x[64], y[64];
  for (int i = 0; i < 64; i++) x[i] = (float)i - 20.0f;
  unsigned char c[512];
  size_t bytes = 0;

  /* the initializer is int8, B = 256, symmetric, nearest, no rotation */
  QT_CHECK(good.bits == 8 && good.block == 256 && good.mode == qcclQuantSymmetric &&
               good.rounding == qcclRoundNearest && good.rotate == 0,
           "QCCL_QUANT_SPEC_INITIALIZER is not int8 B=256 symmetric nearest");
  QT_CHECK(qcclQuantSize(64, &good, &bytes) == qcclSuccess && bytes == 80, "size %zu", bytes);
  QT_CHECK(qcclQuantize(x, 64, qcclFloat32, &good, c) == qcclSuccess, "valid quantize");
  QT_CHECK(qcclDequantize(c, 64, qcclFloat32, &good, y) == qcclSuccess, "valid dequantize");
  QT_CHECK(qcclQuantize(NULL, 0, qcclFloat32, &good, NULL) == qcclSuccess, "count 0 with NULL");
  QT_CHECK(qcclDequantize(NULL, 0, qcclBfloat16, &good, NULL) == qcclSuccess, "count 0 with NULL");
  QT_CHECK(qcclQuantErrorBound(NULL, 0, &good, NULL, NULL) == qcclSuccess, "bound of nothing");
  QT_CHECK(qcclQuantSize(0, &good, &bytes) == qcclSuccess && bytes == 0, "size of 0: %zu", bytes);

  all_refuse(NULL, "spec", "NULL spec");
  s = good;
  s.size = sizeof s - 4;
  all_refuse(&s, "spec->size", "wrong size");
  s = good;
  s.magic ^= 1;
  all_refuse(&s, "spec->magic", "wrong magic");
  s = good;
  s.version = 2;
  all_refuse(&s, "spec->version", "version 2");
  const int bad_bits[] = {0, 1, 2, 3, 5, 6, 7, 16, -8};
  for (size_t i = 0; i < sizeof bad_bits / sizeof bad_bits[0]; i++) {
    s = good;
    s.bits = bad_bits[i];
    all_refuse(&s, "spec->bits", "bad bits");
  }
  const int bad_blocks[] = {0, 1, 16, 31, 33, 48, 100, 255, 257, 3000, 8192, -256};
  for (size_t i = 0; i < sizeof bad_blocks / sizeof bad_blocks[0]; i++) {
    s = good;
    s.block = bad_blocks[i];
    all_refuse(&s, "spec->block", "bad block");
  }
  for (int b = 32; b <= 4096; b *= 2) {
    s = good;
    s.block = b;
    QT_CHECK(qcclQuantSize(64, &s, &bytes) == qcclSuccess, "block %d refused", b);
  }
  s = good;
  s.mode = (qcclQuantMode_t)2;
  all_refuse(&s, "spec->mode", "mode 2");
  s = good;
  s.rounding = (qcclRounding_t)-1;
  all_refuse(&s, "spec->rounding", "rounding -1");
  s = good;
  s.rotate = 2;
  all_refuse(&s, "spec->rotate", "rotate 2");
  s = good;
  s.rank = -1;
  all_refuse(&s, "spec->rank", "rank -1");

  /* pointers and types */
  expect(qcclQuantSize(64, &good, NULL), "bytes", "NULL bytes");
  expect(qcclQuantize(NULL, 64, qcclFloat32, &good, c), "src", "NULL src");
  expect(qcclQuantize(x, 64, qcclFloat32, &good, NULL), "dst", "NULL dst");
  expect(qcclDequantize(NULL, 64, qcclFloat32, &good, y), "src", "NULL src");
  expect(qcclDequantize(c, 64, qcclFloat32, &good, NULL), "dst", "NULL dst");
  expect(qcclQuantErrorBound(NULL, 64, &good, NULL, NULL), "src", "NULL src");
  const qcclDataType_t bad_types[] = {qcclInt8,          qcclUint8,      qcclInt32,
                                      qcclFloat64,       qcclFloat8e4m3, qcclFloat8e5m2,
                                      (qcclDataType_t)99};
  for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
    expect(qcclQuantize(x, 64, bad_types[i], &good, c), "srctype", "bad srctype");
    expect(qcclDequantize(c, 64, bad_types[i], &good, y), "dsttype", "bad dsttype");
  }
  expect(qcclQuantSize((size_t)-1, &good, &bytes), "count", "huge count");
  expect(qcclQuantize(x, (size_t)-1 / 2, qcclFloat32, &good, c), "count", "huge count");

  /* a failed call leaves the output alone */
  bytes = 12345;
  s = good;
  s.bits = 3;
  qcclQuantSize(64, &s, &bytes);
  QT_CHECK(bytes == 12345, "output written on failure");
  return qt_done("quant_spec");
}
