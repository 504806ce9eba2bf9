/*
 * unit_socket - the bootstrap's ring exchange (sock_sendrecv, core/
 * socket.c) on real loopback TCP connections made by the library's own
 * listen / connect / accept: this process plays the rank in the middle,
 * a thread plays its next and its prev.
 *
 * The cases are the ways a neighbour leaves during an exchange:
 *  - next reads all it is due, prev sends its bytes, and next closes
 *    without a bye (its communicator failed right after the exchange, as
 *    a disagreeing call makes it do): the exchange succeeds with prev's
 *    bytes, every time in 50, and the next exchange fails naming next;
 *  - next reads all and closes before prev sends: the exchange fails at
 *    once, naming next (nothing is waited for);
 *  - next closes before it read what it is due (the bytes sent, unread:
 *    the close resets the connection) while prev stays silent: the
 *    exchange fails at once, naming next (not at prev's close, nor at
 *    the deadline);
 *  - next reads all and says bye: success, the bye remembered;
 *  - prev closes without sending: the exchange fails at once.
 * The first case was a flake of mr_agree_writes_off_w3: the rank still
 * receiving the last step of qcclCommSplit's exchange took its next's
 * leaving for a failure, though prev's bytes were already there. The
 * second is why it is no more than that: a rank that waited for prev
 * once next had left kept mr_killinit's survivors waiting past 5 s.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/socket.h"

#define CHECK_NAME "unit_socket"
#include "check.h"

#define N 4096

typedef struct {
  int next_far;  /* the far end of this rank's sfd: next's prev_fd */
  int prev_far;  /* the far end of rfd: prev's next_fd */
  int read_next; /* next reads the N bytes it is due first */
  int bye;       /* then says bye */
  int prev_sends;
  double prev_delay; /* seconds after next left */
  double prev_hold;  /* seconds prev then stays, silent, before it closes */
  int prev_first;    /* prev sends before next closes (prev_delay unused) */
} peers_t;

static unsigned char pattern(size_t i, int salt) {
  return (unsigned char)(i * 31 + (size_t)salt * 7 + 1);
}

static void prev_send(peers_t* p) {
  unsigned char* out = malloc(N);
  for (size_t i = 0; out && i < N; i++) out[i] = pattern(i, 2);
  if (sock_send_all(p->prev_far, out, N, clock_now() + 10) != qcclSuccess)
    CHECK(0, "prev could not send: %s", err_last());
  free(out);
}

static void* peers_main(void* arg) {
  peers_t* p = arg;
  if (p->read_next) {
    unsigned char* got = malloc(N);
    if (sock_recv_all(p->next_far, got, N, clock_now() + 10) != qcclSuccess)
      CHECK(0, "next could not read what it was due: %s", err_last());
    for (size_t i = 0; got && i < N; i++)
      if (got[i] != pattern(i, 1)) {
        CHECK(0, "next read byte %zu as %u, not %u", i, got[i], pattern(i, 1));
        break;
      }
    free(got);
  }
  if (p->prev_first) prev_send(p);
  if (p->bye) sock_bye(p->next_far);
  close(p->next_far);
  usleep((useconds_t)(p->prev_delay * 1e6));
  if (p->prev_sends && !p->prev_first) prev_send(p);
  usleep((useconds_t)(p->prev_hold * 1e6));
  close(p->prev_far);
  return NULL;
}

/* A connected loopback pair: *near for this rank, *far for the peer. */
static void tcp_pair(int* near, int* far) {
  sock_addr_t lo, bound;
  int lfd;
  if (sock_addr_resolve("127.0.0.1", 0, "unit_socket", &lo) != qcclSuccess ||
      sock_listen(&lo, &lfd, &bound) != qcclSuccess ||
      sock_connect(&bound, clock_now() + 10, near) != qcclSuccess ||
      sock_accept(lfd, clock_now() + 10, far) != qcclSuccess) {
    fprintf(stderr, "unit_socket: no loopback connection: %s\n", err_last());
    exit(1);
  }
  close(lfd);
}

/* One exchange of this rank with the peers as p says; returns its result
 * and the time it took, fills *bye. */
static qcclResult_t exchange(peers_t* p, int* sfd_out, int* rfd_out, int* bye, double* took,
                             int* data_ok) {
  int sfd, rfd;
  tcp_pair(&sfd, &p->next_far);
  tcp_pair(&rfd, &p->prev_far);
  pthread_t th;
  pthread_create(&th, NULL, peers_main, p);
  unsigned char* out = malloc(N);
  unsigned char* in = calloc(N, 1);
  for (size_t i = 0; i < N; i++) out[i] = pattern(i, 1);
  double t0 = clock_now();
  qcclResult_t r = sock_sendrecv(sfd, out, rfd, in, N, t0 + 20, bye);
  *took = clock_now() - t0;
  pthread_join(th, NULL);
  *data_ok = 1;
  for (size_t i = 0; i < N; i++)
    if (in[i] != pattern(i, 2)) *data_ok = 0;
  free(out);
  free(in);
  *sfd_out = sfd;
  *rfd_out = rfd;
  return r;
}

/* One exchange with the peers as p says that must fail at once (within
 * `within` seconds), naming next; what names the case. */
static void expect_next_failed(peers_t* p, double within, const char* what) {
  int sfd, rfd, bye = 0, ok;
  double took;
  qcclResult_t r = exchange(p, &sfd, &rfd, &bye, &took, &ok);
  CHECK(r == qcclRemoteError && strstr(err_last(), "next rank"), "%s: %s (%s)", what,
        qcclGetErrorString(r), err_last());
  CHECK(took < within, "%s: that took %.3f s, not at once", what, took);
  close(sfd);
  close(rfd);
}

int main(void) {
  int sfd, rfd, bye, ok;
  double took;

  /* next read all, prev sent its bytes, and next closed at once without
   * a bye (a rank that finished the exchange, failed its next call and
   * destroyed the communicator): the close and prev's last bytes are
   * often seen in one poll. The bytes are there before the close, so
   * the exchange must succeed, every time (50 tries) */
  int fails = 0;
  for (int k = 0; k < 50; k++) {
    peers_t a = {.read_next = 1, .prev_sends = 1, .prev_first = 1};
    bye = 0;
    qcclResult_t r = exchange(&a, &sfd, &rfd, &bye, &took, &ok);
    if (r != qcclSuccess || !ok) fails++;
    CHECK(!bye, "a close without a bye was taken for a bye");
    if (k == 49) {
      /* the next exchange owes next bytes: it fails, naming next, at once */
      unsigned char b1[16] = {0}, b2[16];
      double t0 = clock_now();
      r = sock_sendrecv(sfd, b1, rfd, b2, sizeof b1, t0 + 20, &bye);
      CHECK(r == qcclRemoteError && strstr(err_last(), "next rank"),
            "the exchange after next left: %s (%s)", qcclGetErrorString(r), err_last());
      CHECK(clock_now() - t0 < 2, "it failed after %.1f s, not at once", clock_now() - t0);
    }
    close(sfd);
    close(rfd);
  }
  CHECK(fails == 0, "%d of 50 exchanges failed though prev's bytes came before next's close",
        fails);

  /* next read all and left without a bye before prev's bytes came (100
   * ms later): the exchange fails at once, naming next (the failure
   * travels back round the ring; nothing is waited for) */
  peers_t a2 = {.read_next = 1, .prev_sends = 1, .prev_delay = 0.1};
  expect_next_failed(&a2, 0.09, "next left before prev's bytes came");

  /* next closed before reading (its bytes were sent: they fit the
   * socket's buffer, so the close resets the connection), while prev
   * stays, silent, for 3 s: fails at once, naming next */
  peers_t b = {.read_next = 0, .prev_sends = 0, .prev_delay = 0, .prev_hold = 3};
  expect_next_failed(&b, 2, "next left before it read its bytes");

  /* next read all and said bye */
  peers_t c = {.read_next = 1, .bye = 1, .prev_sends = 1, .prev_delay = 0.05};
  bye = 0;
  qcclResult_t r = exchange(&c, &sfd, &rfd, &bye, &took, &ok);
  CHECK(r == qcclSuccess && ok, "next said bye after reading all: %s (%s)", qcclGetErrorString(r),
        err_last());
  CHECK(bye, "the bye was not remembered");
  close(sfd);
  close(rfd);

  /* prev closed without sending; next read all and stayed quiet */
  peers_t d = {.read_next = 1, .bye = 1, .prev_sends = 0, .prev_delay = 0};
  bye = 0;
  r = exchange(&d, &sfd, &rfd, &bye, &took, &ok);
  CHECK(r == qcclRemoteError, "prev left without sending: %s (%s)", qcclGetErrorString(r),
        err_last());
  CHECK(took < 5, "that took %.1f s, not at once", took);
  close(sfd);
  close(rfd);

  return check_verdict();
}
