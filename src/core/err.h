/*
 * err.h - internal error handling.
 *
 * Every internal function returns a qcclResult_t. The first place that sees
 * a failure records it with QCCL_ERR(result, fmt, ...), which logs at WARN
 * and stores the message as this thread's last error (qcclGetLastError(NULL));
 * the comm layer copies it into the communicator. QCCL_CHECK propagates a
 * failed result to the caller; QCCL_CHECK_GOTO jumps to a cleanup label.
 */
#ifndef QCCL_CORE_ERR_H_
#define QCCL_CORE_ERR_H_

#include "qccl.h"

#if defined(__GNUC__)
#define QCCL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define QCCL_PRINTF(a, b)
#endif

#define QCCL_LAST_ERROR_BYTES 512

/* Records res with a formatted message (logged at WARN) and returns res. */
qcclResult_t err_set(qcclResult_t res, const char* file, int line, const char* fmt, ...)
    QCCL_PRINTF(4, 5);

/* As err_set, with ": <strerror(errnum)>" appended. */
qcclResult_t err_set_errno(qcclResult_t res, int errnum, const char* file, int line,
                           const char* fmt, ...) QCCL_PRINTF(5, 6);

/* This thread's last error message ("" if none). */
const char* err_last(void);

/* Clears this thread's last error. */
void err_clear(void);

#define QCCL_ERR(res, ...) err_set((res), __FILE__, __LINE__, __VA_ARGS__)
#define QCCL_ERRNO(res, errnum, ...) err_set_errno((res), (errnum), __FILE__, __LINE__, __VA_ARGS__)

#define QCCL_CHECK(call)                            \
  do {                                              \
    qcclResult_t qccl_res_ = (call);                \
    if (qccl_res_ != qcclSuccess) return qccl_res_; \
  } while (0)

#define QCCL_CHECK_GOTO(call, res, label) \
  do {                                    \
    (res) = (call);                       \
    if ((res) != qcclSuccess) goto label; \
  } while (0)

#endif /* QCCL_CORE_ERR_H_ */
