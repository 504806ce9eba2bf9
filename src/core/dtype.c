/*
 * dtype.c - element sizes and names of qccl's data types and reductions.
 */
#include "core/dtype.h"

size_t dtype_size(qcclDataType_t t) {
  switch (t) {
    case qcclInt8:
    case qcclUint8:
    case qcclFloat8e4m3:
    case qcclFloat8e5m2:
      return 1;
    case qcclFloat16:
    case qcclBfloat16:
      return 2;
    case qcclInt32:
    case qcclUint32:
    case qcclFloat32:
      return 4;
    case qcclInt64:
    case qcclUint64:
    case qcclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* dtype_name(qcclDataType_t t) {
  static const char* const names[qcclNumTypes] = {
      "int8",    "uint8",   "int32",   "uint32",   "int64",      "uint64",
      "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  if ((int)t < 0 || t >= qcclNumTypes) return "unknown";
  return names[t];
}

int dtype_is_float(qcclDataType_t t) {
  return t == qcclFloat16 || t == qcclFloat32 || t == qcclFloat64 || t == qcclBfloat16 ||
         t == qcclFloat8e4m3 || t == qcclFloat8e5m2;
}

const char* redop_name(qcclRedOp_t op) {
  static const char* const names[qcclNumOps] = {"sum", "prod", "max", "min", "avg"};
  if ((int)op < 0 || op >= qcclNumOps) return "unknown";
  return names[op];
}
