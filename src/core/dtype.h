/*
 * dtype.h - facts about qcclDataType_t and qcclRedOp_t: element sizes,
 * names, which types are floating, and argument checks shared by the API.
 */
#ifndef QCCL_CORE_DTYPE_H_
#define QCCL_CORE_DTYPE_H_

#include <stddef.h>

#include "qccl.h"

/* Bytes per element; 0 for an unknown type. */
size_t dtype_size(qcclDataType_t t);

/* "float32", ...; "unknown" for an unknown type. */
const char* dtype_name(qcclDataType_t t);

/* 1 for the floating types (f16, f32, f64, bf16, fp8). */
int dtype_is_float(qcclDataType_t t);

/* "sum", ...; "unknown" for an unknown op. */
const char* redop_name(qcclRedOp_t op);

#endif /* QCCL_CORE_DTYPE_H_ */
