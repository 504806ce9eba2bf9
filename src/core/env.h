/*
 * env.h - every environment variable qccl reads goes through here, so each
 * read is logged once at INFO (subsystem ENV) and all are listed in one
 * table (docs/ENV.md).
 */
#ifndef QCCL_CORE_ENV_H_
#define QCCL_CORE_ENV_H_

#include <stdint.h>
#include "qccl.h"

/* The raw value of name, or NULL when unset (an empty value counts as set). */
const char* env_get(const char* name);

/* Parses name as an integer in [lo, hi]; unset gives def. A malformed or
 * out-of-range value is an error that names the variable. */
qcclResult_t env_get_int(const char* name, int64_t def, int64_t lo, int64_t hi, int64_t* out);

/* Parses name as a non-negative floating number of seconds; unset gives def. */
qcclResult_t env_get_seconds(const char* name, double def, double* out);

#endif /* QCCL_CORE_ENV_H_ */
