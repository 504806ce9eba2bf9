/*
 * err.c - the last error of each thread.
 *
 * A failure is recorded once, where it is first seen: the message is logged
 * at WARN and kept in a thread-local buffer, so qcclGetLastError(NULL) can
 * return it even when no communicator exists (a failed init). The comm layer
 * copies it into the communicator it failed on. The thread-local buffer is
 * the only per-thread state of the library besides the group queue.
 */
#include "core/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"

static _Thread_local char last_error[QCCL_LAST_ERROR_BYTES];

static qcclResult_t err_vset(qcclResult_t res, int errnum, const char* file, int line,
                             const char* fmt, va_list ap) {
  char msg[QCCL_LAST_ERROR_BYTES];
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  if (errnum != 0 && n >= 0 && (size_t)n < sizeof msg)
    snprintf(msg + n, sizeof msg - (size_t)n, ": %s", strerror(errnum));
  snprintf(last_error, sizeof last_error, "%s", msg);
  const char* base = strrchr(file, '/');
  log_write(LOG_WARN, LOG_ALL, "%s:%d %s (%s)", base ? base + 1 : file, line, msg,
            qcclGetErrorString(res));
  return res;
}

qcclResult_t err_set(qcclResult_t res, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  err_vset(res, 0, file, line, fmt, ap);
  va_end(ap);
  return res;
}

qcclResult_t err_set_errno(qcclResult_t res, int errnum, const char* file, int line,
                           const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  err_vset(res, errnum, file, line, fmt, ap);
  va_end(ap);
  return res;
}

const char* err_last(void) {
  return last_error;
}

void err_clear(void) {
  last_error[0] = '\0';
}

const char* qcclGetErrorString(qcclResult_t result) {
  switch (result) {
    case qcclSuccess:
      return "no error";
    case qcclUnhandledCudaError:
      return "unhandled cuda error (run with QCCL_DEBUG=INFO for details)";
    case qcclSystemError:
      return "unhandled system error (run with QCCL_DEBUG=INFO for details)";
    case qcclInternalError:
      return "internal error - please report this issue to the qccl developers";
    case qcclInvalidArgument:
      return "invalid argument (run with QCCL_DEBUG=WARN for details)";
    case qcclInvalidUsage:
      return "invalid usage (run with QCCL_DEBUG=WARN for details)";
    case qcclRemoteError:
      return "remote process exited or there was a network error";
    case qcclInProgress:
      return "qccl operation in progress";
    case qcclTimeout:
      return "a peer did not answer within QCCL_TIMEOUT";
    default:
      return "unknown result code";
  }
}
