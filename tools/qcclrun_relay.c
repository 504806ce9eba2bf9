/*
 * qcclrun_relay - qcclrun's own messages and the relay of the ranks' output
 * (see qcclrun_relay.h).
 *
 * qcclrun is the only writer of its stdout and stderr, so writing whole
 * lines, each with one writev(), is enough to keep the lines of different
 * ranks apart: no locking, no per-rank ordering beyond the pipe's own.
 */
#include "qcclrun_relay.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

run_result_t run_write_all(int fd, const struct iovec* iov_in, int n) {
  struct iovec iov[4];
  int first = 0;
  if (n > 4) return RUN_ERR_SYSTEM;
  memcpy(iov, iov_in, (size_t)n * sizeof(iov[0]));
  while (first < n) {
    ssize_t w = writev(fd, iov + first, n - first);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        (void)poll(&p, 1, 100);
        continue;
      }
      return RUN_OK;
    }
    while (first < n && (size_t)w >= iov[first].iov_len) w -= (ssize_t)iov[first++].iov_len;
    if (first < n) {
      iov[first].iov_base = (char*)iov[first].iov_base + w;
      iov[first].iov_len -= (size_t)w;
    }
  }
  return RUN_OK;
}

run_result_t run_msg(const char* fmt, ...) {
  char line[768];
  va_list ap;
  int len = snprintf(line, sizeof(line), "qcclrun: ");
  va_start(ap, fmt);
  vsnprintf(line + len, sizeof(line) - (size_t)len - 1, fmt, ap);
  va_end(ap);
  len = (int)strlen(line);
  line[len++] = '\n';
  struct iovec iov = {.iov_base = line, .iov_len = (size_t)len};
  return run_write_all(STDERR_FILENO, &iov, 1);
}

/* Writes one output line: prefix, data, and a newline if asked (prefixed
 * output only: unprefixed bytes pass unchanged). */
static run_result_t run_emit(const run_stream_t* s, const char* data, size_t len, int add_newline) {
  struct iovec iov[3];
  int n = 0;
  if (s->prefix != NULL) iov[n++] = (struct iovec){(void*)s->prefix, s->prefix_len};
  iov[n++] = (struct iovec){(void*)data, len};
  if (add_newline && s->prefix != NULL) iov[n++] = (struct iovec){"\n", 1};
  return run_write_all(s->dest, iov, n);
}

/* Writes the complete lines at the front of s's buffer and keeps the rest.
 * Without prefixes the lines go out in one piece. */
static run_result_t run_emit_lines(run_stream_t* s) {
  size_t done = 0;
  for (;;) {
    char* nl = memchr(s->buf + done, '\n', s->len - done);
    if (nl == NULL) break;
    size_t end = (size_t)(nl - s->buf) + 1;
    if (s->prefix != NULL) RUN_CHECK(run_emit(s, s->buf + done, end - done, 0));
    done = end;
  }
  if (s->prefix == NULL && done > 0) RUN_CHECK(run_emit(s, s->buf, done, 0));
  memmove(s->buf, s->buf + done, s->len - done);
  s->len -= done;
  return RUN_OK;
}

run_result_t run_stream_close(run_stream_t* s) {
  if (s->len > 0) RUN_CHECK(run_emit(s, s->buf, s->len, 1));
  if (s->fd >= 0) close(s->fd);
  free(s->buf);
  *s = (run_stream_t){
      .fd = -1, .dest = s->dest, .rank = s->rank, .prefix = s->prefix, .prefix_len = s->prefix_len};
  return RUN_OK;
}

run_result_t run_stream_read(run_stream_t* s) {
  ssize_t n;
  if (s->len == s->cap) {
    if (s->cap >= RUN_LINE_MAX) { /* an over-long line: cut it */
      RUN_CHECK(run_emit(s, s->buf, s->len, 1));
      s->len = 0;
    } else {
      size_t cap = s->cap == 0 ? RUN_LINE_FIRST_CAP : 2 * s->cap;
      char* buf = realloc(s->buf, cap);
      if (buf == NULL) {
        run_msg("out of memory for the output of rank %d", s->rank);
        return RUN_ERR_SYSTEM;
      }
      s->buf = buf;
      s->cap = cap;
    }
  }
  n = read(s->fd, s->buf + s->len, s->cap - s->len);
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return RUN_OK;
  if (n > 0) {
    s->len += (size_t)n;
    return run_emit_lines(s);
  }
  return run_stream_close(s);
}
