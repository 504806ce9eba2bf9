/*
 * zero_err.c - the ZeRO engine's error messages: the first line of every
 * failure is kept per thread (qcclZeroGetLastError) and logged once at
 * WARN, in the library's log format, when QCCL_DEBUG asks for warnings.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <stdlib.h>
#include <unistd.h>

#include "zero.h"

static _Thread_local char zero_msg[1024];

static int zero_warn_enabled(void) {
  const char* d = getenv("QCCL_DEBUG");
  if (d == NULL) return 0;
  return strcasecmp(d, "WARN") == 0 || strcasecmp(d, "INFO") == 0 || strcasecmp(d, "TRACE") == 0;
}

static void zero_vlog(const char* fmt, va_list ap) {
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  char line[1200];
  vsnprintf(line, sizeof line, fmt, ap);
  fprintf(stderr, "%s:%d qccl WARN ZERO %s\n", host, (int)getpid(), line);
}

void zero_warn(const char* fmt, ...) {
  if (!zero_warn_enabled()) return;
  va_list ap;
  va_start(ap, fmt);
  zero_vlog(fmt, ap);
  va_end(ap);
}

qcclResult_t zero_fail(qcclResult_t res, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(zero_msg, sizeof zero_msg, fmt, ap);
  va_end(ap);
  zero_warn("%s", zero_msg);
  return res;
}

qcclResult_t zero_fail_call(qcclResult_t res, qcclComm_t comm, const char* what) {
  const char* why = qcclGetLastError(comm);
  return zero_fail(res, "%.200s failed: %s (%.600s)", what, qcclGetErrorString(res),
                   why != NULL ? why : "");
}

void zero_clear_error(void) {
  zero_msg[0] = '\0';
}

const char* qcclZeroGetLastError(void) {
  return zero_msg;
}
