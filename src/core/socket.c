/*
 * socket.c - blocking-with-deadline TCP for the bootstrap.
 *
 * Sockets are non-blocking; every wait is a poll() bounded by the caller's
 * deadline, so no bootstrap step can hang past QCCL_TIMEOUT. connect()
 * retries on ECONNREFUSED (the root or a peer may not listen yet) with a
 * short back-off. Errors name the peer address and the errno text.
 */
#include "core/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/env.h"
#include "core/log.h"
#include "core/wait.h"

double clock_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static socklen_t sock_addr_len(const sock_addr_t* a) {
  return a->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

const char* sock_addr_str(const sock_addr_t* a, char* buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a->sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &a->sin.sin_addr, host, sizeof host);
    snprintf(buf, len, "%s:%d", host, ntohs(a->sin.sin_port));
  } else if (a->sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &a->sin6.sin6_addr, host, sizeof host);
    snprintf(buf, len, "[%s]:%d", host, ntohs(a->sin6.sin6_port));
  } else {
    snprintf(buf, len, "(no address)");
  }
  return buf;
}

qcclResult_t sock_addr_resolve(const char* host, int port, const char* what, sock_addr_t* out) {
  if (port < 0 || port > 65535)
    return QCCL_ERR(qcclInvalidArgument, "%s: port %d is outside 0..65535", what, port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0 || res == NULL)
    return QCCL_ERR(qcclInvalidArgument, "%s: cannot resolve host '%s': %s", what, host,
                    gai_strerror(rc));
  /* prefer IPv4 when both exist: the common cluster setup */
  struct addrinfo* pick = res;
  for (struct addrinfo* r = res; r; r = r->ai_next)
    if (r->ai_family == AF_INET) {
      pick = r;
      break;
    }
  sock_addr_t a;
  memset(&a, 0, sizeof a);
  memcpy(&a, pick->ai_addr, pick->ai_addrlen < sizeof a ? pick->ai_addrlen : sizeof a);
  freeaddrinfo(res);
  if (a.sa.sa_family == AF_INET)
    a.sin.sin_port = htons((uint16_t)port);
  else
    a.sin6.sin6_port = htons((uint16_t)port);
  *out = a;
  return qcclSuccess;
}

qcclResult_t sock_addr_parse(const char* hostport, const char* what, sock_addr_t* out) {
  char host[256];
  const char* colon = strrchr(hostport, ':');
  if (colon == NULL || colon == hostport || colon[1] == '\0')
    return QCCL_ERR(qcclInvalidArgument, "%s='%s' is not host:port", what, hostport);
  size_t hl = (size_t)(colon - hostport);
  if (hl >= sizeof host) return QCCL_ERR(qcclInvalidArgument, "%s: host is too long", what);
  memcpy(host, hostport, hl);
  host[hl] = '\0';
  if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
    memmove(host, host + 1, hl - 2);
    host[hl - 2] = '\0';
  }
  char* end = NULL;
  long port = strtol(colon + 1, &end, 10);
  if (*end != '\0' || port <= 0 || port > 65535)
    return QCCL_ERR(qcclInvalidArgument, "%s='%s': port is not a number in 1..65535", what,
                    hostport);
  return sock_addr_resolve(host, (int)port, what, out);
}

static int sock_if_match(const char* name, const char* spec) {
  int exclude = 0;
  if (spec[0] == '^') {
    exclude = 1;
    spec++;
  }
  int hit = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", spec);
  char* save = NULL;
  for (char* t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
    if (strncmp(name, t, strlen(t)) == 0) hit = 1;
  return exclude ? !hit : hit;
}

qcclResult_t sock_pick_interface(sock_addr_t* out) {
  const char* spec = env_get("QCCL_SOCKET_IFNAME");
  if (spec && strlen(spec) >= 256)
    return QCCL_ERR(qcclInvalidArgument, "QCCL_SOCKET_IFNAME is longer than 255 characters");
  struct ifaddrs *ifs = NULL, *pick = NULL, *lo = NULL;
  if (getifaddrs(&ifs) != 0) return QCCL_ERRNO(qcclSystemError, errno, "getifaddrs");
  for (int pass = 0; pass < 2 && pick == NULL; pass++) {
    /* pass 0: IPv4 only; pass 1: IPv6 too */
    for (struct ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (i->ifa_addr == NULL || !(i->ifa_flags & IFF_UP)) continue;
      int fam = i->ifa_addr->sa_family;
      if (fam != AF_INET && !(pass == 1 && fam == AF_INET6)) continue;
      if (spec && *spec) {
        if (sock_if_match(i->ifa_name, spec)) {
          pick = i;
          break;
        }
        continue;
      }
      if (i->ifa_flags & IFF_LOOPBACK) {
        if (lo == NULL && fam == AF_INET) lo = i;
        continue;
      }
      if (strncmp(i->ifa_name, "docker", 6) == 0) continue;
      pick = i;
      break;
    }
  }
  if (pick == NULL && !(spec && *spec)) pick = lo;
  if (pick == NULL) {
    freeifaddrs(ifs);
    return QCCL_ERR(qcclInvalidArgument, "QCCL_SOCKET_IFNAME='%s' matches no interface that is up",
                    spec ? spec : "");
  }
  sock_addr_t a;
  memset(&a, 0, sizeof a);
  memcpy(&a, pick->ifa_addr,
         pick->ifa_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                               : sizeof(struct sockaddr_in));
  QCCL_INFO(LOG_BOOT, "bootstrap interface %s", pick->ifa_name);
  freeifaddrs(ifs);
  *out = a;
  return qcclSuccess;
}

static qcclResult_t sock_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return QCCL_ERRNO(qcclSystemError, errno, "fcntl(O_NONBLOCK)");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return qcclSuccess;
}

qcclResult_t sock_listen(const sock_addr_t* addr, int* fd, sock_addr_t* bound) {
  char s[80];
  int l = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l < 0) return QCCL_ERRNO(qcclSystemError, errno, "socket");
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(l, &addr->sa, sock_addr_len(addr)) != 0) {
    int e = errno;
    close(l);
    return QCCL_ERRNO(qcclSystemError, e, "bind %s", sock_addr_str(addr, s, sizeof s));
  }
  if (listen(l, 1024) != 0) {
    int e = errno;
    close(l);
    return QCCL_ERRNO(qcclSystemError, e, "listen");
  }
  sock_addr_t b;
  socklen_t bl = sizeof b;
  memset(&b, 0, sizeof b);
  getsockname(l, &b.sa, &bl);
  qcclResult_t r = sock_nonblock(l);
  if (r != qcclSuccess) {
    close(l);
    return r;
  }
  *fd = l;
  *bound = b;
  return qcclSuccess;
}

/* Waits for events on fd until deadline (1 ready, 0 timed out), running
 * the waits' idle hook (core/wait.h) every SOCK_HOOK_MS: a rank that waits
 * on the bootstrap (a lane being made, a split) keeps its transport's idle
 * workers moving. */
#define SOCK_HOOK_MS 10
static int sock_wait(int fd, short events, double deadline) {
  for (;;) {
    double left = deadline - clock_now();
    if (left <= 0) return 0;
    struct pollfd p = {.fd = fd, .events = events, .revents = 0};
    int ms = left > SOCK_HOOK_MS * 1e-3 ? SOCK_HOOK_MS : (int)(left * 1000) + 1;
    int n = poll(&p, 1, ms);
    if (n > 0) return 1;
    if (n < 0 && errno != EINTR) return 1; /* let the caller see the error */
    backoff_run_idle_hook();
  }
}

static qcclResult_t sock_connect_impl(const sock_addr_t* addr, double deadline, int retry,
                                      int* fd) {
  char s[80];
  double backoff = 0.001;
  for (;;) {
    int c = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c < 0) return QCCL_ERRNO(qcclSystemError, errno, "socket");
    qcclResult_t r = sock_nonblock(c);
    if (r != qcclSuccess) {
      close(c);
      return r;
    }
    int rc = connect(c, &addr->sa, sock_addr_len(addr));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      if (!sock_wait(c, POLLOUT, deadline)) {
        close(c);
        return QCCL_ERR(qcclTimeout, "connect to %s timed out", sock_addr_str(addr, s, sizeof s));
      }
      socklen_t el = sizeof err;
      getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el);
    }
    if (err == 0) {
      *fd = c;
      return qcclSuccess;
    }
    close(c);
    if (!retry && (err == ECONNREFUSED || err == ECONNRESET))
      return QCCL_ERRNO(qcclRemoteError, err, "connect to %s (a peer that was listening)",
                        sock_addr_str(addr, s, sizeof s));
    if (err != ECONNREFUSED && err != ECONNRESET && err != ETIMEDOUT && err != EAGAIN &&
        err != ENETUNREACH && err != EHOSTUNREACH)
      return QCCL_ERRNO(qcclSystemError, err, "connect to %s", sock_addr_str(addr, s, sizeof s));
    if (clock_now() + backoff > deadline)
      return QCCL_ERRNO(qcclTimeout, err, "connect to %s timed out",
                        sock_addr_str(addr, s, sizeof s));
    struct timespec ts = {0, (long)(backoff * 1e9)};
    nanosleep(&ts, NULL);
    if (backoff < 0.1) backoff *= 2;
  }
}

qcclResult_t sock_connect(const sock_addr_t* addr, double deadline, int* fd) {
  return sock_connect_impl(addr, deadline, 1, fd);
}

qcclResult_t sock_connect_peer(const sock_addr_t* addr, double deadline, int* fd) {
  return sock_connect_impl(addr, deadline, 0, fd);
}

qcclResult_t sock_accept(int lfd, double deadline, int* fd) {
  for (;;) {
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (c >= 0) {
      qcclResult_t r = sock_nonblock(c);
      if (r != qcclSuccess) {
        close(c);
        return r;
      }
      *fd = c;
      return qcclSuccess;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      return QCCL_ERRNO(qcclSystemError, errno, "accept");
    if (!sock_wait(lfd, POLLIN, deadline))
      return QCCL_ERR(qcclTimeout, "no peer connected before the timeout");
  }
}

qcclResult_t sock_send_all(int fd, const void* buf, size_t n, double deadline) {
  const char* p = buf;
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= (size_t)k;
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return QCCL_ERRNO(qcclRemoteError, errno, "bootstrap send to a peer failed");
    if (!sock_wait(fd, POLLOUT, deadline)) return QCCL_ERR(qcclTimeout, "bootstrap send timed out");
  }
  return qcclSuccess;
}

qcclResult_t sock_recv_all(int fd, void* buf, size_t n, double deadline) {
  char* p = buf;
  while (n > 0) {
    ssize_t k = recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= (size_t)k;
      continue;
    }
    if (k == 0) return QCCL_ERR(qcclRemoteError, "bootstrap peer closed the connection");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return QCCL_ERRNO(qcclRemoteError, errno, "bootstrap receive failed");
    if (!sock_wait(fd, POLLIN, deadline))
      return QCCL_ERR(qcclTimeout, "bootstrap receive timed out");
  }
  return qcclSuccess;
}

#define SOCK_BYE 0xb7

void sock_bye(int fd) {
  unsigned char c = SOCK_BYE;
  if (send(fd, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
    /* the peer is gone or its buffer is full: it will see the close */
  }
}

qcclResult_t sock_sendrecv(int sfd, const void* sbuf, int rfd, void* rbuf, size_t n,
                           double deadline, int* sfd_bye) {
  const char* sp = sbuf;
  char* rp = rbuf;
  size_t sleft = n, rleft = n;
  while (sleft > 0 || rleft > 0) {
    struct pollfd p[2];
    int np = 0, si = -1, ri = -1;
    if (sfd != rfd && !*sfd_bye) {
      /* the send side is watched: the peer never writes on it but its bye */
      p[np] = (struct pollfd){.fd = sfd, .events = POLLRDHUP | POLLIN, .revents = 0};
      if (sleft > 0) p[np].events |= POLLOUT;
      si = np++;
    } else if (sleft > 0) {
      if (sfd != rfd)
        return QCCL_ERR(qcclRemoteError,
                        "bootstrap: the next rank left before this exchange ended (it destroyed "
                        "its communicator while this rank still had to send to it)");
      p[np] = (struct pollfd){.fd = sfd, .events = POLLOUT, .revents = 0};
      si = np++;
    }
    if (rleft > 0) {
      p[np] = (struct pollfd){.fd = rfd, .events = POLLIN, .revents = 0};
      ri = np++;
    }
    double left = deadline - clock_now();
    if (left <= 0) return QCCL_ERR(qcclTimeout, "bootstrap exchange timed out");
    int ms = left > SOCK_HOOK_MS * 1e-3 ? SOCK_HOOK_MS : (int)(left * 1000) + 1;
    int rc = poll(p, (nfds_t)np, ms);
    if (rc < 0 && errno != EINTR) return QCCL_ERRNO(qcclSystemError, errno, "poll");
    if (rc == 0) {
      /* as sock_wait: a rank in a split's exchange may owe a peer bytes
       * its transport's worker still holds (transport/ucx.c) */
      backoff_run_idle_hook();
      continue;
    }
    if (si >= 0 && sfd != rfd && (p[si].revents & (POLLRDHUP | POLLIN | POLLHUP | POLLERR))) {
      unsigned char c = 0;
      if (!(p[si].revents & POLLERR) && recv(sfd, &c, 1, MSG_DONTWAIT) == 1 && c == SOCK_BYE &&
          sleft == 0) {
        *sfd_bye = 1; /* it left in good order, with all it needed */
        continue;
      }
      /* All of this exchange sent: what prev has delivered already may
       * end it (a rank that finished first may fail and close at once,
       * seen here in the same poll as prev's last bytes); nothing is
       * waited for, so a failure still travels back at once */
      while (sleft == 0 && rleft > 0) {
        ssize_t k = recv(rfd, rp, rleft, MSG_DONTWAIT);
        if (k <= 0) break;
        rp += k;
        rleft -= (size_t)k;
      }
      if (sleft == 0 && rleft == 0) break;
      return QCCL_ERR(qcclRemoteError,
                      "bootstrap: the next rank closed its connection (it failed or exited)");
    }
    if (si >= 0 && sleft > 0 && p[si].revents) {
      ssize_t k = send(sfd, sp, sleft, MSG_NOSIGNAL);
      if (k > 0) {
        sp += k;
        sleft -= (size_t)k;
      } else if (k < 0 && errno != EAGAIN && errno != EINTR) {
        return QCCL_ERRNO(qcclRemoteError, errno, "bootstrap send to a peer failed");
      }
    }
    if (ri >= 0 && p[ri].revents) {
      ssize_t k = recv(rfd, rp, rleft, 0);
      if (k > 0) {
        rp += k;
        rleft -= (size_t)k;
      } else if (k == 0) {
        return QCCL_ERR(qcclRemoteError, "bootstrap peer closed the connection");
      } else if (errno != EAGAIN && errno != EINTR) {
        return QCCL_ERRNO(qcclRemoteError, errno, "bootstrap receive failed");
      }
    }
  }
  return qcclSuccess;
}

int sock_peer_failed(int sfd) {
  struct pollfd p = {.fd = sfd, .events = POLLRDHUP | POLLIN, .revents = 0};
  if (poll(&p, 1, 0) <= 0) return 0;
  if (p.revents & POLLERR) return 1;
  unsigned char c = 0;
  ssize_t k = recv(sfd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (k == 1) return c != SOCK_BYE;
  if (k == 0) return 1;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

qcclResult_t sock_local_addr(int fd, sock_addr_t* out) {
  sock_addr_t a;
  socklen_t l = sizeof a;
  memset(&a, 0, sizeof a);
  if (getsockname(fd, &a.sa, &l) != 0) return QCCL_ERRNO(qcclSystemError, errno, "getsockname");
  if (a.sa.sa_family == AF_INET)
    a.sin.sin_port = 0;
  else
    a.sin6.sin6_port = 0;
  *out = a;
  return qcclSuccess;
}
