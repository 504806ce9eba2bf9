/*
 * env.c - reading environment variables. Every read goes through env_get,
 * which logs the name and value at INFO (subsystem ENV), so
 * QCCL_DEBUG=INFO shows every setting that took effect.
 *
 * One rule for every variable: numbers are decimal (no octal, no hex, no
 * sign unless negatives are meant, no spaces), sizes take one K / M / G
 * suffix (2^10, 2^20, 2^30; either case), keywords are matched without
 * regard to case, and a value that does not parse, is out of range or is
 * too long for the parser is an error naming the variable, never a guess.
 * The env_parse_* functions hold the rules without touching the
 * environment, so the fuzz targets (tests/fuzz) drive them directly.
 */
#include "core/env.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"

const char* env_get(const char* name) {
  const char* v = getenv(name);
  QCCL_INFO(LOG_ENV, "env %s=%s", name, v ? v : "(unset)");
  return v;
}

/* Reads decimal digits into *out (no sign); 0 when none or overflow. */
static int env_digits(const char* v, const char** end, uint64_t* out) {
  uint64_t x = 0;
  const char* p = v;
  for (; *p >= '0' && *p <= '9'; p++) {
    uint64_t d = (uint64_t)(*p - '0');
    if (x > (UINT64_MAX - d) / 10) return 0;
    x = x * 10 + d;
  }
  *end = p;
  *out = x;
  return p != v;
}

qcclResult_t env_parse_int(const char* name, const char* v, int64_t lo, int64_t hi, int64_t* out) {
  const char* p = v;
  int neg = 0;
  if (*p == '-') {
    neg = 1;
    p++;
  }
  uint64_t u;
  const char* end;
  if (!env_digits(p, &end, &u) || *end != '\0')
    return QCCL_ERR(qcclInvalidArgument, "environment variable %s='%.64s' is not a decimal integer",
                    name, v);
  if (u > (uint64_t)INT64_MAX + (uint64_t)neg)
    return QCCL_ERR(qcclInvalidArgument, "environment variable %s='%.64s' is too large", name, v);
  int64_t x = neg ? (int64_t)(0 - u) : (int64_t)u;
  if (x < lo || x > hi)
    return QCCL_ERR(qcclInvalidArgument, "environment variable %s=%lld is outside [%lld, %lld]",
                    name, (long long)x, (long long)lo, (long long)hi);
  *out = x;
  return qcclSuccess;
}

qcclResult_t env_parse_size(const char* name, const char* v, int64_t lo, int64_t hi, int64_t* out) {
  uint64_t u;
  const char* end;
  if (!env_digits(v, &end, &u))
    return QCCL_ERR(qcclInvalidArgument,
                    "environment variable %s='%.64s' is not a size (decimal bytes, with K, M or "
                    "G)",
                    name, v);
  int shift = 0;
  if (*end == 'K' || *end == 'k')
    shift = 10;
  else if (*end == 'M' || *end == 'm')
    shift = 20;
  else if (*end == 'G' || *end == 'g')
    shift = 30;
  if (shift) end++;
  if (*end != '\0')
    return QCCL_ERR(qcclInvalidArgument,
                    "environment variable %s='%.64s' is not a size (decimal bytes, with K, M or "
                    "G)",
                    name, v);
  if (u > ((uint64_t)INT64_MAX >> shift))
    return QCCL_ERR(qcclInvalidArgument, "environment variable %s='%.64s' is too large", name, v);
  int64_t x = (int64_t)(u << shift);
  if (x < lo || x > hi)
    return QCCL_ERR(qcclInvalidArgument, "environment variable %s='%.64s' is outside [%lld, %lld]",
                    name, v, (long long)lo, (long long)hi);
  *out = x;
  return qcclSuccess;
}

qcclResult_t env_parse_seconds(const char* name, const char* v, double* out) {
  /* digits, at most one '.', digits: no exponent, hex, inf or nan */
  int digits = 0, dots = 0;
  for (const char* p = v; *p; p++) {
    if (*p >= '0' && *p <= '9')
      digits++;
    else if (*p == '.' && dots == 0)
      dots++;
    else
      digits = -1000000;
  }
  double x = digits > 0 && strlen(v) <= 32 ? strtod(v, NULL) : 0.0;
  if (digits <= 0 || !isfinite(x) || x <= 0)
    return QCCL_ERR(qcclInvalidArgument,
                    "environment variable %s='%.64s' is not a positive decimal number of seconds",
                    name, v);
  *out = x;
  return qcclSuccess;
}

int env_word_is(const char* v, const char* word) {
  return strcasecmp(v, word) == 0;
}

qcclResult_t env_copy(const char* name, const char* v, char* buf, size_t len) {
  size_t n = strlen(v);
  if (n >= len)
    return QCCL_ERR(qcclInvalidArgument,
                    "environment variable %s is %zu characters long; at most %zu are understood",
                    name, n, len - 1);
  memcpy(buf, v, n + 1);
  return qcclSuccess;
}

qcclResult_t env_get_int(const char* name, int64_t def, int64_t lo, int64_t hi, int64_t* out) {
  const char* v = env_get(name);
  if (v == NULL) {
    *out = def;
    return qcclSuccess;
  }
  return env_parse_int(name, v, lo, hi, out);
}

qcclResult_t env_get_size(const char* name, int64_t def, int64_t lo, int64_t hi, int64_t* out) {
  const char* v = env_get(name);
  if (v == NULL) {
    *out = def;
    return qcclSuccess;
  }
  return env_parse_size(name, v, lo, hi, out);
}

qcclResult_t env_get_seconds(const char* name, double def, double* out) {
  const char* v = env_get(name);
  if (v == NULL) {
    *out = def;
    return qcclSuccess;
  }
  return env_parse_seconds(name, v, out);
}
