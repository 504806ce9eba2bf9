/*
 * bootstrap.c - rendezvous through a root listener, then a TCP ring.
 *
 * Rendezvous: each rank connects to the root, sends a hello (magic, secret,
 * rank, nranks, the address of its own listening socket, bound on the
 * interface that reached the root) and receives the table of all listening
 * addresses once every rank has arrived. A hello with the wrong secret, a
 * rank out of range or twice, or an nranks that disagrees is refused (the
 * honest ranks are unaffected). Ring: rank r connects to r+1 and accepts
 * from r-1, again with the secret. All-gather then takes nranks-1 steps
 * around the ring, each step a length-checked message; cost (W-1) * size
 * bytes per rank, which is fine for the kilobytes exchanged at setup.
 */
#include "core/bootstrap.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

#define BOOT_ID_MAGIC 0x44494351u /* "QCID" */
#define BOOT_ID_VERSION 1u
#define BOOT_HELLO_MAGIC 0x4c484351u /* "QCHL" */
#define BOOT_TABLE_MAGIC 0x42544351u /* "QCTB" */
#define BOOT_MSG_MAGIC 0x474d4351u   /* "QCMG" */
/* seconds a connected peer has to say hello: ample for a rank (which sends
 * it right after connecting), short enough that strangers are let go soon */
#define BOOT_HELLO_WAIT 2.0
/* root listeners one process may hold at once (boot_fork_fds) */
#define BOOT_FORK_MAX 64

struct bootstrap {
  int rank, nranks;
  int next_fd, prev_fd;
  int next_bye; /* next left in good order (sock_bye): no longer watched */
  uint8_t secret[BOOT_SECRET_BYTES];
  double timeout;
  sock_addr_t local; /* the interface this rank uses to reach the others */
  uint32_t seq;      /* messages sent so far, checked by the receiver */
};

/* The first message on every connection. */
typedef struct {
  uint32_t magic;
  int32_t rank;
  int32_t nranks;
  uint32_t pad;
  uint8_t secret[BOOT_SECRET_BYTES];
  uint8_t addr[BOOT_ADDR_BYTES]; /* the sender's listening socket */
  uint32_t pad2;
} boot_hello_t;

_Static_assert(sizeof(boot_hello_t) == BOOT_HELLO_BYTES, "the hello's wire size");

/* The root's answer: a header, then nranks addresses. */
typedef struct {
  uint32_t magic;
  int32_t status; /* 0, or a qcclResult_t */
  int32_t nranks;
  uint32_t pad;
  char why[112];
} boot_table_t;

/* Header of every ring message. */
typedef struct {
  uint32_t magic;
  uint32_t seq;
  uint64_t bytes;
} boot_msg_t;

void boot_id_pack(const boot_id_t* id, qcclUniqueId* out) {
  memset(out, 0, sizeof *out);
  uint32_t m = BOOT_ID_MAGIC, v = BOOT_ID_VERSION;
  memcpy(out->internal, &m, 4);
  memcpy(out->internal + 4, &v, 4);
  memcpy(out->internal + 8, &id->root, BOOT_ADDR_BYTES);
  memcpy(out->internal + 96, id->secret, BOOT_SECRET_BYTES);
}

qcclResult_t boot_id_unpack(const qcclUniqueId* in, boot_id_t* out) {
  uint32_t m, v;
  memcpy(&m, in->internal, 4);
  memcpy(&v, in->internal + 4, 4);
  if (m != BOOT_ID_MAGIC || v != BOOT_ID_VERSION)
    return QCCL_ERR(qcclInvalidArgument,
                    "commId: not a qcclUniqueId made by qcclGetUniqueId (bad magic or version)");
  boot_id_t id;
  memset(&id, 0, sizeof id);
  memcpy(&id.root, in->internal + 8, BOOT_ADDR_BYTES);
  memcpy(id.secret, in->internal + 96, BOOT_SECRET_BYTES);
  if (id.root.sa.sa_family != AF_INET && id.root.sa.sa_family != AF_INET6)
    return QCCL_ERR(qcclInvalidArgument, "commId: the root address is malformed");
  *out = id;
  return qcclSuccess;
}

qcclResult_t boot_random(void* buf, size_t n) {
  char* p = buf;
  while (n > 0) {
    ssize_t k = getrandom(p, n, 0);
    if (k < 0) {
      if (errno == EINTR) continue;
      return QCCL_ERRNO(qcclSystemError, errno, "getrandom");
    }
    p += k;
    n -= (size_t)k;
  }
  return qcclSuccess;
}

/* ---- messages: pure checks (also driven by tests/fuzz) ----------------- */

qcclResult_t boot_hello_parse(const void* buf, size_t n, const uint8_t* secret,
                              boot_peer_hello_t* out) {
  boot_hello_t h;
  if (n != sizeof h) return QCCL_ERR(qcclRemoteError, "bootstrap: a hello of %zu bytes", n);
  memcpy(&h, buf, sizeof h);
  if (h.magic != BOOT_HELLO_MAGIC || memcmp(h.secret, secret, BOOT_SECRET_BYTES) != 0)
    return QCCL_ERR(qcclRemoteError, "bootstrap: a hello without the job's secret");
  out->rank = h.rank;
  out->nranks = h.nranks;
  memcpy(out->addr, h.addr, BOOT_ADDR_BYTES);
  return qcclSuccess;
}

qcclResult_t boot_table_parse(const void* buf, size_t n, int rank, int nranks) {
  boot_table_t t;
  if (n != sizeof t) return QCCL_ERR(qcclRemoteError, "bootstrap: a table of %zu bytes", n);
  memcpy(&t, buf, sizeof t);
  t.why[sizeof t.why - 1] = '\0';
  if (t.magic != BOOT_TABLE_MAGIC)
    return QCCL_ERR(qcclRemoteError, "bootstrap root sent a malformed answer");
  if (t.status != 0) {
    qcclResult_t st =
        t.status > 0 && t.status < qcclNumResults ? (qcclResult_t)t.status : qcclRemoteError;
    return QCCL_ERR(st, "bootstrap root refused rank %d: %s", rank, t.why);
  }
  if (t.nranks != nranks)
    return QCCL_ERR(qcclInvalidUsage, "bootstrap: nranks %d disagrees with the root's %d", nranks,
                    t.nranks);
  return qcclSuccess;
}

qcclResult_t boot_msg_check(const void* hdr, size_t n, uint32_t seq, uint64_t bytes, int rank) {
  boot_msg_t in;
  if (n != sizeof in) return QCCL_ERR(qcclRemoteError, "bootstrap: a header of %zu bytes", n);
  memcpy(&in, hdr, sizeof in);
  if (in.magic != BOOT_MSG_MAGIC || in.seq != seq || in.bytes != bytes)
    return QCCL_ERR(qcclInvalidUsage,
                    "bootstrap: rank %d expected message %u of %llu bytes, got %u of %llu "
                    "(ranks disagree on the call sequence)",
                    rank, seq, (unsigned long long)bytes, in.seq, (unsigned long long)in.bytes);
  return qcclSuccess;
}

/* ---- serving hellos ----------------------------------------------------- */

/* A listener serves every connection at once: poll() over the listening
 * socket and each connection that has not yet said hello, each of which
 * has BOOT_HELLO_WAIT seconds (and exactly a hello's size in bytes) to do
 * it. An idle or slow stranger therefore costs the honest ranks nothing,
 * and at most BOOT_PENDING_MAX strangers are held (the oldest goes first).
 * The owner may watch more sockets on the same poll (the root its
 * admitted ranks, a ring member its next rank), so a peer that leaves is
 * noticed at once rather than at the timeout. */
#define BOOT_PENDING_MAX 64

typedef struct {
  int fd;
  double deadline;
  size_t got;
  uint8_t buf[sizeof(boot_hello_t)];
} boot_pending_t;

typedef struct {
  /* each hello with the secret: 1 when it took fd, 0 to close it; *done stops */
  int (*take)(void* ctx, int fd, const boot_peer_hello_t* h, int* done);
  /* the sockets to watch (writes at most max, returns how many there are)
   * and the verdict on their events */
  int (*watch_fds)(void* ctx, int* fds, int max);
  qcclResult_t (*watch_check)(void* ctx, const struct pollfd* p, int n);
  void* ctx;
  const char* who; /* for the log: "bootstrap root", "rank 3's ring listener" */
  /* held by the serving thread except while it sleeps in poll() (the root
   * thread: boot_root_main), so that fork() waits for a quiet moment */
  pthread_mutex_t* quiet;
  /* NULL, or BOOT_PENDING_MAX slots and their count that outlive the
   * call: the connections still without a whole hello stay there for the
   * next serve on the same listener (else they are closed on return) */
  boot_pending_t* keep;
  int* nkeep;
} boot_server_t;

static void boot_pending_drop(boot_pending_t* pend, int* np, int i, const char* who,
                              const char* why) {
  QCCL_WARN(LOG_BOOT, "%s closed a connection: %s", who, why);
  close(pend[i].fd);
  pend[i] = pend[--*np];
}

static qcclResult_t boot_serve(int lfd, const uint8_t* secret, double deadline,
                               const boot_server_t* sv) {
  boot_pending_t* pend = sv->keep ? sv->keep : calloc(BOOT_PENDING_MAX, sizeof *pend);
  int cap = 8; /* watched sockets the arrays hold; grows with the owner's */
  int* wfds = calloc((size_t)cap, sizeof *wfds);
  struct pollfd* p = calloc((size_t)(1 + BOOT_PENDING_MAX + cap), sizeof *p);
  qcclResult_t r = qcclSuccess;
  int np = sv->keep ? *sv->nkeep : 0, done = 0;
  if (!pend || !p || !wfds) {
    r = QCCL_ERR(qcclSystemError, "out of memory");
    goto out;
  }
  while (!done) {
    double now = clock_now();
    if (now >= deadline) {
      r = QCCL_ERR(qcclTimeout, "%s: the peers it waits for did not connect before the timeout",
                   sv->who);
      goto out;
    }
    double wake = deadline;
    for (int i = 0; i < np; i++)
      if (pend[i].deadline < wake) wake = pend[i].deadline;
    int nw = sv->watch_fds ? sv->watch_fds(sv->ctx, wfds, cap) : 0;
    if (nw > cap) {
      cap = nw;
      int* nf = realloc(wfds, sizeof *wfds * (size_t)cap);
      if (nf) wfds = nf;
      struct pollfd* npf = realloc(p, sizeof *p * (size_t)(1 + BOOT_PENDING_MAX + cap));
      if (npf) p = npf;
      if (!nf || !npf) {
        r = QCCL_ERR(qcclSystemError, "out of memory");
        goto out;
      }
      nw = sv->watch_fds(sv->ctx, wfds, cap);
    }
    p[0] = (struct pollfd){.fd = lfd, .events = POLLIN, .revents = 0};
    for (int i = 0; i < np; i++)
      p[1 + i] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN, .revents = 0};
    for (int i = 0; i < nw; i++)
      p[1 + np + i] = (struct pollfd){.fd = wfds[i], .events = POLLIN | POLLRDHUP, .revents = 0};
    double left = wake - now;
    int ms = left > 1.0 ? 1000 : (int)(left * 1000) + 1;
    if (sv->quiet) pthread_mutex_unlock(sv->quiet);
    int rc = poll(p, (nfds_t)(1 + np + nw), ms);
    if (sv->quiet) pthread_mutex_lock(sv->quiet);
    if (rc < 0 && errno != EINTR) {
      r = QCCL_ERRNO(qcclSystemError, errno, "poll");
      goto out;
    }
    if (rc <= 0) goto expire;
    if (nw > 0) QCCL_CHECK_GOTO(sv->watch_check(sv->ctx, p + 1 + np, nw), r, out);
    /* back to front: a drop moves the last entry, already seen, into i */
    for (int i = np - 1; i >= 0 && !done; i--) {
      if (!p[1 + i].revents) continue;
      boot_pending_t* c = &pend[i];
      ssize_t k = recv(c->fd, c->buf + c->got, sizeof c->buf - c->got, 0);
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (k <= 0) {
        boot_pending_drop(pend, &np, i, sv->who, "it closed before its hello");
        continue;
      }
      c->got += (size_t)k;
      if (c->got < sizeof c->buf) continue;
      boot_peer_hello_t h;
      int fd = c->fd;
      qcclResult_t hr = boot_hello_parse(c->buf, sizeof c->buf, secret, &h);
      pend[i] = pend[--np];
      if (hr != qcclSuccess) {
        QCCL_WARN(LOG_BOOT, "%s refused a connection: no hello with the job's secret", sv->who);
        close(fd);
      } else if (!sv->take(sv->ctx, fd, &h, &done)) {
        close(fd);
      }
    }
    if (done) break;
    for (;;) {
      int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) break;
      if (np == BOOT_PENDING_MAX)
        boot_pending_drop(pend, &np, 0, sv->who, "too many connections without a hello");
      pend[np++] = (boot_pending_t){.fd = fd, .deadline = clock_now() + BOOT_HELLO_WAIT};
    }
  expire:
    now = clock_now();
    for (int i = np - 1; i >= 0; i--)
      if (pend[i].deadline <= now) boot_pending_drop(pend, &np, i, sv->who, "no hello within 2 s");
  }
out:
  if (sv->keep) {
    *sv->nkeep = np;
  } else {
    for (int i = 0; i < np && pend; i++) close(pend[i].fd);
    free(pend);
  }
  free(wfds);
  free(p);
  return r;
}

/* ---- root listener ---------------------------------------------------- */

/* Held by root threads while they work (not while they wait in poll), and
 * by fork()'s prepare handler (boot_fork_prepare). */
static pthread_mutex_t boot_quiet_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
  int lfd;
  uint8_t secret[BOOT_SECRET_BYTES];
  double deadline;
  sem_t* ready; /* posted once the thread holds boot_quiet_mu (boot_root_start) */
} boot_root_args_t;

static void boot_root_refuse(int fd, qcclResult_t why, const char* text) {
  boot_table_t t;
  memset(&t, 0, sizeof t);
  t.magic = BOOT_TABLE_MAGIC;
  t.status = (int32_t)why;
  snprintf(t.why, sizeof t.why, "%s", text);
  sock_send_all(fd, &t, sizeof t, clock_now() + 1.0);
}

void boot_root_init(boot_root_t* st) {
  memset(st, 0, sizeof *st);
  st->nranks = -1;
  st->left = -1;
}

int boot_root_admit(boot_root_t* st, int fd, const boot_peer_hello_t* h, int* done) {
  char why[112];
  if (st->nranks < 0) {
    if (h->nranks < 1 || h->nranks > BOOT_MAX_RANKS) {
      boot_root_refuse(fd, qcclInvalidArgument, "nranks is out of range");
      return 0;
    }
    st->fds = malloc(sizeof(int) * (size_t)h->nranks);
    st->addrs = calloc((size_t)h->nranks, BOOT_ADDR_BYTES);
    if (!st->fds || !st->addrs) {
      free(st->fds);
      free(st->addrs);
      st->fds = NULL;
      st->addrs = NULL;
      return 0;
    }
    st->nranks = h->nranks;
    for (int i = 0; i < st->nranks; i++) st->fds[i] = -1;
  }
  if (h->nranks != st->nranks) {
    snprintf(why, sizeof why, "nranks %d disagrees with %d given by the first rank", h->nranks,
             st->nranks);
    boot_root_refuse(fd, qcclInvalidUsage, why);
    return 0;
  }
  if (h->rank < 0 || h->rank >= st->nranks || st->fds[h->rank] >= 0) {
    snprintf(why, sizeof why, "rank %d is out of range or joined twice", h->rank);
    boot_root_refuse(fd, qcclInvalidUsage, why);
    return 0;
  }
  st->fds[h->rank] = fd;
  memcpy(st->addrs + (size_t)h->rank * BOOT_ADDR_BYTES, h->addr, BOOT_ADDR_BYTES);
  st->got++;
  if (st->got == st->nranks) *done = 1;
  return 1;
}

void boot_root_free(boot_root_t* st) {
  for (int i = 0; i < st->nranks && st->fds; i++)
    if (st->fds[i] >= 0) close(st->fds[i]);
  free(st->fds);
  free(st->addrs);
  boot_root_init(st);
}

static int boot_root_take(void* ctx, int fd, const boot_peer_hello_t* h, int* done) {
  return boot_root_admit(ctx, fd, h, done);
}

/* The admitted ranks wait silently for the table: anything readable on
 * their sockets means one left, and the rendezvous fails for all now. */
static int boot_root_watch_fds(void* ctx, int* fds, int max) {
  boot_root_t* st = ctx;
  int n = 0;
  for (int i = 0; i < st->nranks; i++)
    if (st->fds[i] >= 0) {
      if (n < max) fds[n] = st->fds[i];
      n++;
    }
  return n;
}

static qcclResult_t boot_root_watch_check(void* ctx, const struct pollfd* p, int n) {
  boot_root_t* st = ctx;
  for (int j = 0; j < n; j++) {
    if (!p[j].revents) continue;
    for (int i = 0; i < st->nranks; i++)
      if (st->fds[i] == p[j].fd) {
        st->left = i;
        return QCCL_ERR(qcclRemoteError,
                        "bootstrap root: rank %d closed its connection before every rank joined",
                        i);
      }
  }
  return qcclSuccess;
}

static void boot_fork_close(int fd);

/* After a failed rendezvous: the verdict for the ranks still on their way,
 * and which ranks have had it (joined before the failure, or came since).
 * Once every rank has, there is nobody left to tell. */
typedef struct {
  const boot_table_t* t;
  int nranks, told;
  uint8_t* seen;
} boot_late_t;

static int boot_root_take_late(void* ctx, int fd, const boot_peer_hello_t* h, int* done) {
  boot_late_t* l = ctx;
  boot_root_refuse(fd, (qcclResult_t)l->t->status, l->t->why);
  if (h->rank >= 0 && h->rank < l->nranks && !l->seen[h->rank]) {
    l->seen[h->rank] = 1;
    if (++l->told == l->nranks) *done = 1;
  }
  return 0;
}

static void* boot_root_main(void* argp) {
  /* Whatever this thread does besides waiting in poll() it does holding
   * boot_quiet_mu, which fork() takes first (boot_fork_prepare): a
   * launcher that forks its ranks right after qcclGetUniqueId must not fork
   * while this thread is inside malloc or mmap, whose locks (the
   * allocator's, a sanitizer's, UCX 1.13's mmap hook) the child would
   * inherit held and deadlock on (mr_killinit: ucp_init, and
   * AddressSanitizer's calloc). The starter returns once the thread holds
   * it, so no fork meets the thread still starting either. */
  pthread_mutex_lock(&boot_quiet_mu);
  boot_root_args_t a = *(boot_root_args_t*)argp;
  free(argp);
  sem_post(a.ready);
  a.ready = NULL;
  boot_root_t st;
  boot_root_init(&st);
  /* connections whose hello is still on its way when a rank leaves are
   * ranks too: they get the verdict from the late serve below */
  int npend = 0;
  boot_pending_t* pend = calloc(BOOT_PENDING_MAX, sizeof *pend);
  boot_server_t sv = {.take = boot_root_take,
                      .watch_fds = boot_root_watch_fds,
                      .watch_check = boot_root_watch_check,
                      .ctx = &st,
                      .who = "bootstrap root",
                      .quiet = &boot_quiet_mu,
                      .keep = pend,
                      .nkeep = &npend};
  qcclResult_t r = boot_serve(a.lfd, a.secret, a.deadline, &sv);
  err_clear();
  boot_table_t t;
  memset(&t, 0, sizeof t);
  t.magic = BOOT_TABLE_MAGIC;
  t.nranks = st.nranks;
  if (r != qcclSuccess && st.left >= 0) {
    t.status = qcclRemoteError;
    snprintf(t.why, sizeof t.why, "rank %d left before every rank had joined", st.left);
  } else if (r != qcclSuccess || st.got < st.nranks || st.nranks < 0) {
    t.status = qcclTimeout;
    snprintf(t.why, sizeof t.why, "only %d of %d ranks joined before the timeout", st.got,
             st.nranks);
  }
  for (int i = 0; i < st.nranks && st.fds; i++) {
    if (st.fds[i] < 0) continue;
    double d = clock_now() + BOOT_HELLO_WAIT;
    if (sock_send_all(st.fds[i], &t, sizeof t, d) == qcclSuccess && t.status == 0)
      sock_send_all(st.fds[i], st.addrs, (size_t)st.nranks * BOOT_ADDR_BYTES, d);
  }
  boot_late_t late = {.t = &t, .nranks = st.nranks};
  if (t.status == qcclRemoteError && st.nranks > 0) late.seen = calloc((size_t)st.nranks, 1);
  for (int i = 0; i < st.nranks && st.fds && late.seen; i++)
    if (st.fds[i] >= 0) late.seen[i] = 1, late.told++;
  boot_root_free(&st);
  if (late.seen && late.told < late.nranks) {
    /* ranks still on their way would find the port closed and retry until
     * their timeout (the root may just not listen yet, for all they know):
     * give each the verdict instead, until every rank has had it or the
     * rendezvous' deadline */
    boot_server_t lv = {.take = boot_root_take_late,
                        .ctx = &late,
                        .who = "bootstrap root",
                        .quiet = &boot_quiet_mu,
                        .keep = pend,
                        .nkeep = &npend};
    boot_serve(a.lfd, a.secret, a.deadline, &lv);
  }
  for (int i = 0; i < npend; i++) close(pend[i].fd);
  free(pend);
  free(late.seen);
  boot_fork_close(a.lfd);
  err_clear();
  pthread_mutex_unlock(&boot_quiet_mu);
  return NULL;
}

/* The root listeners of this process, each with its rendezvous' secret,
 * while their threads serve: closed in a child after fork() (the child
 * has no root thread, and a listener it kept open would hold connections
 * that nobody serves: a late rank would wait for its timeout instead of
 * being refused), and looked up by a rank whose rendezvous failed, which
 * waits until its own root has told every rank (boot_root_settle; the cv
 * says when an entry goes). The one process-wide table besides the
 * logger's. */
typedef struct {
  int fd;
  uint8_t secret[BOOT_SECRET_BYTES];
} boot_listener_t;
static pthread_mutex_t boot_fork_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t boot_fork_cv = PTHREAD_COND_INITIALIZER;
static pthread_once_t boot_fork_once = PTHREAD_ONCE_INIT;
static boot_listener_t boot_fork_fds[BOOT_FORK_MAX];
static int boot_fork_n;

static void boot_fork_prepare(void) {
  pthread_mutex_lock(&boot_quiet_mu);
  pthread_mutex_lock(&boot_fork_mu);
}

static void boot_fork_parent(void) {
  pthread_mutex_unlock(&boot_fork_mu);
  pthread_mutex_unlock(&boot_quiet_mu);
}

static void boot_fork_child(void) {
  for (int i = 0; i < boot_fork_n; i++) close(boot_fork_fds[i].fd);
  boot_fork_n = 0;
  pthread_mutex_unlock(&boot_fork_mu);
  pthread_mutex_unlock(&boot_quiet_mu);
}

static void boot_fork_setup(void) {
  pthread_atfork(boot_fork_prepare, boot_fork_parent, boot_fork_child);
}

static void boot_fork_remember(int fd, const uint8_t* secret) {
  pthread_once(&boot_fork_once, boot_fork_setup);
  pthread_mutex_lock(&boot_fork_mu);
  if (boot_fork_n < BOOT_FORK_MAX) {
    boot_fork_fds[boot_fork_n].fd = fd;
    memcpy(boot_fork_fds[boot_fork_n++].secret, secret, BOOT_SECRET_BYTES);
  }
  pthread_mutex_unlock(&boot_fork_mu);
}

/* Forgets and closes fd under the lock, so no fork() falls in between (a
 * child would keep the listener, or close a number reused meanwhile). */
static void boot_fork_close(int fd) {
  pthread_mutex_lock(&boot_fork_mu);
  for (int i = 0; i < boot_fork_n; i++)
    if (boot_fork_fds[i].fd == fd) boot_fork_fds[i] = boot_fork_fds[--boot_fork_n];
  close(fd);
  pthread_cond_broadcast(&boot_fork_cv);
  pthread_mutex_unlock(&boot_fork_mu);
}

/* Waits, until deadline at most, for this process' root of the rendezvous
 * with secret (if it holds one) to finish. Rank 0 of the env flow holds
 * the root; when its rendezvous fails and it returns the error, its
 * process usually exits, and with it the listener that would have told
 * the ranks still on their way: they would retry until their timeout. */
static void boot_root_settle(const uint8_t* secret, double deadline) {
  pthread_mutex_lock(&boot_fork_mu);
  for (;;) {
    int live = 0;
    for (int i = 0; i < boot_fork_n && !live; i++)
      live = memcmp(boot_fork_fds[i].secret, secret, BOOT_SECRET_BYTES) == 0;
    double left = deadline - clock_now();
    if (!live || left <= 0) break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double s = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + (left < 1.0 ? left : 1.0);
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    pthread_cond_timedwait(&boot_fork_cv, &boot_fork_mu, &ts);
  }
  pthread_mutex_unlock(&boot_fork_mu);
}

qcclResult_t boot_root_start(const sock_addr_t* bind_addr, const uint8_t* secret, double timeout,
                             sock_addr_t* bound) {
  boot_root_args_t* a = malloc(sizeof *a);
  if (!a) return QCCL_ERR(qcclSystemError, "out of memory");
  sock_addr_t b;
  qcclResult_t r = sock_listen(bind_addr, &a->lfd, &b);
  if (r != qcclSuccess) {
    free(a);
    return r;
  }
  memcpy(a->secret, secret, BOOT_SECRET_BYTES);
  a->deadline = clock_now() + timeout;
  /* returns once the thread holds boot_quiet_mu (see boot_root_main) */
  sem_t ready;
  sem_init(&ready, 0, 0);
  a->ready = &ready;
  boot_fork_remember(a->lfd, secret);
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int lfd = a->lfd;
  int e = pthread_create(&th, &attr, boot_root_main, a);
  pthread_attr_destroy(&attr);
  if (e != 0) {
    sem_destroy(&ready);
    boot_fork_close(lfd);
    free(a);
    return QCCL_ERRNO(qcclSystemError, e, "pthread_create (bootstrap root)");
  }
  while (sem_wait(&ready) != 0 && errno == EINTR) {
  }
  sem_destroy(&ready);
  char s[80];
  QCCL_INFO(LOG_BOOT, "bootstrap root listening on %s", sock_addr_str(&b, s, sizeof s));
  *bound = b;
  return qcclSuccess;
}

/* ---- ring ------------------------------------------------------------- */

static void boot_hello_fill(boot_hello_t* h, const bootstrap_t* b, const sock_addr_t* addr) {
  memset(h, 0, sizeof *h);
  h->magic = BOOT_HELLO_MAGIC;
  h->rank = b->rank;
  h->nranks = b->nranks;
  memcpy(h->secret, b->secret, BOOT_SECRET_BYTES);
  if (addr) memcpy(h->addr, addr, BOOT_ADDR_BYTES);
}

typedef struct {
  bootstrap_t* b;
  int prev;
} boot_ring_ctx_t;

static int boot_ring_take(void* ctx, int fd, const boot_peer_hello_t* h, int* done) {
  boot_ring_ctx_t* rc = ctx;
  if (h->rank != rc->prev || h->nranks != rc->b->nranks) {
    QCCL_WARN(LOG_BOOT, "rank %d refused a ring connection: rank %d of %d, expected %d of %d",
              rc->b->rank, h->rank, h->nranks, rc->prev, rc->b->nranks);
    return 0;
  }
  rc->b->prev_fd = fd;
  *done = 1;
  return 1;
}

/* While it waits for prev, a rank watches next: never written to, so
 * anything readable there means next left, and this rank leaves too, which
 * its own prev sees the same way: a failure goes round the ring at once. */
static int boot_ring_watch_fds(void* ctx, int* fds, int max) {
  boot_ring_ctx_t* rc = ctx;
  if (max > 0) fds[0] = rc->b->next_fd;
  return 1;
}

static qcclResult_t boot_ring_watch_check(void* ctx, const struct pollfd* p, int n) {
  boot_ring_ctx_t* rc = ctx;
  if (n > 0 && p[0].revents)
    return QCCL_ERR(qcclRemoteError,
                    "bootstrap: rank %d's next rank closed its connection while the ring was "
                    "built (it failed or exited)",
                    rc->b->rank);
  return qcclSuccess;
}

/* Connects to next, accepts prev (refusing strangers, serving every
 * connection at once), closes lfd. */
static qcclResult_t boot_ring_build(bootstrap_t* b, int lfd, const uint8_t* addrs,
                                    double deadline) {
  qcclResult_t r = qcclSuccess;
  if (b->nranks == 1) goto done;
  int next = (b->rank + 1) % b->nranks, prev = (b->rank + b->nranks - 1) % b->nranks;
  sock_addr_t na;
  memset(&na, 0, sizeof na);
  memcpy(&na, addrs + (size_t)next * BOOT_ADDR_BYTES, BOOT_ADDR_BYTES);
  /* next listened before it sent its address: a refusal means it is gone */
  QCCL_CHECK_GOTO(sock_connect_peer(&na, deadline, &b->next_fd), r, done);
  boot_hello_t h;
  boot_hello_fill(&h, b, NULL);
  QCCL_CHECK_GOTO(sock_send_all(b->next_fd, &h, sizeof h, deadline), r, done);
  char who[64];
  snprintf(who, sizeof who, "rank %d's ring listener", b->rank);
  boot_ring_ctx_t rc = {b, prev};
  boot_server_t sv = {.take = boot_ring_take,
                      .watch_fds = boot_ring_watch_fds,
                      .watch_check = boot_ring_watch_check,
                      .ctx = &rc,
                      .who = who};
  r = boot_serve(lfd, b->secret, deadline, &sv);
done:
  close(lfd);
  return r;
}

qcclResult_t boot_init(const boot_id_t* id, int rank, int nranks, double timeout,
                       bootstrap_t** out) {
  qcclResult_t r;
  double deadline = clock_now() + timeout;
  int rfd = -1, lfd = -1;
  uint8_t* addrs = NULL;
  bootstrap_t* b = calloc(1, sizeof *b);
  if (!b) return QCCL_ERR(qcclSystemError, "out of memory");
  b->rank = rank;
  b->nranks = nranks;
  b->next_fd = b->prev_fd = -1;
  b->timeout = timeout;
  memcpy(b->secret, id->secret, BOOT_SECRET_BYTES);

  QCCL_CHECK_GOTO(sock_connect(&id->root, deadline, &rfd), r, fail);
  QCCL_CHECK_GOTO(sock_local_addr(rfd, &b->local), r, fail);
  sock_addr_t bound;
  QCCL_CHECK_GOTO(sock_listen(&b->local, &lfd, &bound), r, fail);
  boot_hello_t h;
  boot_hello_fill(&h, b, &bound);
  QCCL_CHECK_GOTO(sock_send_all(rfd, &h, sizeof h, deadline), r, fail);
  QCCL_INFO(LOG_BOOT, "rank %d of %d sent its hello to the root", rank, nranks);
  boot_table_t t;
  QCCL_CHECK_GOTO(sock_recv_all(rfd, &t, sizeof t, deadline), r, fail);
  QCCL_CHECK_GOTO(boot_table_parse(&t, sizeof t, rank, nranks), r, fail);
  addrs = malloc((size_t)nranks * BOOT_ADDR_BYTES);
  if (!addrs) {
    r = QCCL_ERR(qcclSystemError, "out of memory");
    goto fail;
  }
  QCCL_CHECK_GOTO(sock_recv_all(rfd, addrs, (size_t)nranks * BOOT_ADDR_BYTES, deadline), r, fail);
  close(rfd);
  rfd = -1;
  r = boot_ring_build(b, lfd, addrs, deadline);
  lfd = -1;
  if (r != qcclSuccess) goto fail;
  free(addrs);
  *out = b;
  return qcclSuccess;
fail:
  if (rfd >= 0) close(rfd);
  if (lfd >= 0) close(lfd);
  free(addrs);
  boot_close(b, 0);
  boot_root_settle(id->secret, deadline);
  return r;
}

/* ---- exchanges -------------------------------------------------------- */

qcclResult_t boot_allgather(bootstrap_t* b, void* data, size_t size) {
  double deadline = clock_now() + b->timeout;
  char* d = data;
  int w = b->nranks;
  for (int s = 0; s < w - 1; s++) {
    int si = (b->rank - s + w) % w, ri = (b->rank - s - 1 + w) % w;
    boot_msg_t out = {BOOT_MSG_MAGIC, b->seq, size}, in;
    QCCL_CHECK(
        sock_sendrecv(b->next_fd, &out, b->prev_fd, &in, sizeof out, deadline, &b->next_bye));
    QCCL_CHECK(boot_msg_check(&in, sizeof in, b->seq, size, b->rank));
    b->seq++;
    QCCL_CHECK(sock_sendrecv(b->next_fd, d + (size_t)si * size, b->prev_fd, d + (size_t)ri * size,
                             size, deadline, &b->next_bye));
  }
  return qcclSuccess;
}

int boot_next_failed(bootstrap_t* b) {
  if (!b || b->nranks < 2 || b->next_fd < 0 || b->next_bye) return 0;
  return sock_peer_failed(b->next_fd);
}

qcclResult_t boot_barrier(bootstrap_t* b) {
  char* tmp = calloc((size_t)b->nranks, 1);
  if (!tmp) return QCCL_ERR(qcclSystemError, "out of memory");
  qcclResult_t r = boot_allgather(b, tmp, 1);
  free(tmp);
  return r;
}

typedef struct {
  int32_t color, key, rank, pad;
  uint8_t addr[BOOT_ADDR_BYTES];
  uint32_t pad2;
} boot_split_info_t;

qcclResult_t boot_split(bootstrap_t* b, int color, int key, bootstrap_t** out) {
  qcclResult_t r;
  int lfd = -1;
  boot_split_info_t* all = calloc((size_t)b->nranks, sizeof *all);
  uint8_t* addrs = calloc((size_t)b->nranks, BOOT_ADDR_BYTES);
  bootstrap_t* nb = NULL;
  if (!all || !addrs) {
    r = QCCL_ERR(qcclSystemError, "out of memory");
    goto fail;
  }
  boot_split_info_t* me = &all[b->rank];
  me->color = color < 0 ? -1 : color;
  me->key = key;
  me->rank = b->rank;
  if (color >= 0) {
    sock_addr_t bound;
    QCCL_CHECK_GOTO(sock_listen(&b->local, &lfd, &bound), r, fail);
    memcpy(me->addr, &bound, BOOT_ADDR_BYTES);
  }
  QCCL_CHECK_GOTO(boot_allgather(b, all, sizeof *all), r, fail);
  if (color < 0) {
    *out = NULL;
    free(all);
    free(addrs);
    return qcclSuccess;
  }
  /* members in (key, parent rank) order; insertion sort keeps it simple */
  int n = 0, newrank = -1;
  int* idx = malloc(sizeof(int) * (size_t)b->nranks);
  if (!idx) {
    r = QCCL_ERR(qcclSystemError, "out of memory");
    goto fail;
  }
  for (int i = 0; i < b->nranks; i++) {
    if (all[i].color != me->color) continue;
    int j = n++;
    while (j > 0 && (all[idx[j - 1]].key > all[i].key ||
                     (all[idx[j - 1]].key == all[i].key && idx[j - 1] > i))) {
      idx[j] = idx[j - 1];
      j--;
    }
    idx[j] = i;
  }
  for (int j = 0; j < n; j++) {
    if (idx[j] == b->rank) newrank = j;
    memcpy(addrs + (size_t)j * BOOT_ADDR_BYTES, all[idx[j]].addr, BOOT_ADDR_BYTES);
  }
  free(idx);
  nb = calloc(1, sizeof *nb);
  if (!nb) {
    r = QCCL_ERR(qcclSystemError, "out of memory");
    goto fail;
  }
  nb->rank = newrank;
  nb->nranks = n;
  nb->next_fd = nb->prev_fd = -1;
  nb->timeout = b->timeout;
  nb->local = b->local;
  memcpy(nb->secret, b->secret, BOOT_SECRET_BYTES);
  r = boot_ring_build(nb, lfd, addrs, clock_now() + b->timeout);
  lfd = -1;
  if (r != qcclSuccess) goto fail;
  free(all);
  free(addrs);
  *out = nb;
  return qcclSuccess;
fail:
  if (lfd >= 0) close(lfd);
  boot_close(nb, 0);
  free(all);
  free(addrs);
  return r;
}

int boot_rank(const bootstrap_t* b) {
  return b->rank;
}

int boot_nranks(const bootstrap_t* b) {
  return b->nranks;
}

double boot_timeout(const bootstrap_t* b) {
  return b->timeout;
}

void boot_shutdown(bootstrap_t* b) {
  if (b == NULL) return;
  if (b->next_fd >= 0) shutdown(b->next_fd, SHUT_RDWR);
  if (b->prev_fd >= 0 && b->prev_fd != b->next_fd) shutdown(b->prev_fd, SHUT_RDWR);
}

void boot_close(bootstrap_t* b, int orderly) {
  if (!b) return;
  if (orderly && b->prev_fd >= 0) sock_bye(b->prev_fd);
  if (b->next_fd >= 0) close(b->next_fd);
  if (b->prev_fd >= 0) close(b->prev_fd);
  free(b);
}
