/*
 * env.c - reading environment variables. Every read goes through env_get,
 * which logs the name and value at INFO (subsystem ENV), so
 * QCCL_DEBUG=INFO shows every setting that took effect. Parsers return a
 * clear error naming the variable for malformed values instead of guessing.
 */
#include "core/env.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "core/log.h"

const char* env_get(const char* name) {
  const char* v = getenv(name);
  QCCL_INFO(LOG_ENV, "env %s=%s", name, v ? v : "(unset)");
  return v;
}

qcclResult_t env_get_int(const char* name, int64_t def, int64_t lo, int64_t hi, int64_t* out) {
  const char* v = env_get(name);
  if (v == NULL) {
    *out = def;
    return qcclSuccess;
  }
  char* end = NULL;
  errno = 0;
  long long x = strtoll(v, &end, 0);
  if (errno != 0 || end == v || *end != '\0')
    return QCCL_ERR(qcclInvalidArgument, "environment variable %s='%s' is not an integer", name, v);
  if (x < lo || x > hi)
    return QCCL_ERR(qcclInvalidArgument, "environment variable %s=%lld is outside [%lld, %lld]",
                    name, x, (long long)lo, (long long)hi);
  *out = (int64_t)x;
  return qcclSuccess;
}

qcclResult_t env_get_seconds(const char* name, double def, double* out) {
  const char* v = env_get(name);
  if (v == NULL) {
    *out = def;
    return qcclSuccess;
  }
  char* end = NULL;
  errno = 0;
  double x = strtod(v, &end);
  if (errno != 0 || end == v || *end != '\0' || !isfinite(x) || x <= 0)
    return QCCL_ERR(qcclInvalidArgument,
                    "environment variable %s='%s' is not a positive number of seconds", name, v);
  *out = x;
  return qcclSuccess;
}
