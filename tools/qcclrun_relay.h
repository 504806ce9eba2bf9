/*
 * qcclrun_relay - what the files of qcclrun share, and the relay of the
 * ranks' output.
 *
 * Shared: the result type with its CHECK macro, and run_msg(), which writes
 * one "qcclrun: ..." line on stderr in a single write.
 *
 * The relay: each rank's stdout and stderr arrive on a pipe (a stream). The
 * launcher's poll loop calls run_stream_read() when a pipe is readable; the
 * stream keeps a line buffer and writes complete lines only, each with the
 * rank's "[i] " prefix in front, so lines of different ranks never mix. A
 * partial last line gets its prefix and a newline at EOF; a line longer than
 * RUN_LINE_MAX is cut. Without a prefix the bytes pass through unchanged.
 *
 * Cost: one read() per readable pipe, one writev() per line.
 */
#ifndef QCCLRUN_RELAY_H
#define QCCLRUN_RELAY_H

#include <stddef.h>
#include <sys/uio.h>

typedef enum { RUN_OK = 0, RUN_HELP, RUN_ERR_USAGE, RUN_ERR_SYSTEM } run_result_t;

#define RUN_CHECK(call)                                  \
  do {                                                   \
    run_result_t run_check_res_ = (call);                \
    if (run_check_res_ != RUN_OK) return run_check_res_; \
  } while (0)

#define RUN_LINE_FIRST_CAP 4096    /* first size of a stream's line buffer */
#define RUN_LINE_MAX (1024 * 1024) /* a longer line is cut */

typedef struct {
  int fd;             /* read end of the rank's pipe; -1 once at EOF */
  int dest;           /* STDOUT_FILENO or STDERR_FILENO */
  int rank;           /* for messages */
  const char* prefix; /* "[i] ", or NULL: lines pass unprefixed */
  size_t prefix_len;
  char* buf; /* bytes read but not yet written: a partial line */
  size_t len, cap;
} run_stream_t;

/* Writes all of iov (at most 4 pieces) to fd, waiting while fd is full. A
 * reader that went away (EPIPE) silently drops the output. */
run_result_t run_write_all(int fd, const struct iovec* iov, int n);

/* Writes one "qcclrun: <fmt...>" line on stderr in a single piece. */
__attribute__((format(printf, 1, 2))) run_result_t run_msg(const char* fmt, ...);

/* Reads what is there (one read) from s's readable pipe and writes the
 * complete lines; closes the stream at EOF. */
run_result_t run_stream_read(run_stream_t* s);

/* Writes the partial last line, if any, closes the pipe and frees the
 * buffer. The stream keeps dest, rank and prefix; closing twice is fine. */
run_result_t run_stream_close(run_stream_t* s);

#endif
