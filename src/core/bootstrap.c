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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/log.h"

#define BOOT_ID_MAGIC 0x44494351u /* "QCID" */
#define BOOT_ID_VERSION 1u
#define BOOT_HELLO_MAGIC 0x4c484351u /* "QCHL" */
#define BOOT_TABLE_MAGIC 0x42544351u /* "QCTB" */
#define BOOT_MSG_MAGIC 0x474d4351u   /* "QCMG" */
#define BOOT_ADDR_BYTES 28
#define BOOT_HELLO_WAIT 5.0 /* seconds a connected peer has to say hello */

struct bootstrap {
  int rank, nranks;
  int next_fd, prev_fd;
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

/* ---- root listener ---------------------------------------------------- */

typedef struct {
  int lfd;
  uint8_t secret[BOOT_SECRET_BYTES];
  double deadline;
} boot_root_args_t;

static void boot_root_refuse(int fd, qcclResult_t why, const char* text) {
  boot_table_t t;
  memset(&t, 0, sizeof t);
  t.magic = BOOT_TABLE_MAGIC;
  t.status = (int32_t)why;
  snprintf(t.why, sizeof t.why, "%s", text);
  sock_send_all(fd, &t, sizeof t, clock_now() + 1.0);
  close(fd);
}

static void* boot_root_main(void* argp) {
  boot_root_args_t a = *(boot_root_args_t*)argp;
  free(argp);
  int nranks = -1, got = 0;
  int* fds = NULL;
  uint8_t* addrs = NULL;
  char why[112];
  while (nranks < 0 || got < nranks) {
    int fd;
    if (sock_accept(a.lfd, a.deadline, &fd) != qcclSuccess) break;
    boot_hello_t h;
    double hd = clock_now() + BOOT_HELLO_WAIT;
    if (sock_recv_all(fd, &h, sizeof h, hd < a.deadline ? hd : a.deadline) != qcclSuccess ||
        h.magic != BOOT_HELLO_MAGIC || memcmp(h.secret, a.secret, BOOT_SECRET_BYTES) != 0) {
      QCCL_WARN(LOG_BOOT, "bootstrap root refused a connection: no hello with the job's secret");
      close(fd);
      continue;
    }
    if (nranks < 0) {
      if (h.nranks < 1 || h.nranks > (1 << 20)) {
        boot_root_refuse(fd, qcclInvalidArgument, "nranks is out of range");
        continue;
      }
      nranks = h.nranks;
      fds = malloc(sizeof(int) * (size_t)nranks);
      addrs = calloc((size_t)nranks, BOOT_ADDR_BYTES);
      if (!fds || !addrs) {
        close(fd);
        break;
      }
      for (int i = 0; i < nranks; i++) fds[i] = -1;
    }
    if (h.nranks != nranks) {
      snprintf(why, sizeof why, "nranks %d disagrees with %d given by the first rank", h.nranks,
               nranks);
      boot_root_refuse(fd, qcclInvalidUsage, why);
      continue;
    }
    if (h.rank < 0 || h.rank >= nranks || fds[h.rank] >= 0) {
      snprintf(why, sizeof why, "rank %d is out of range or joined twice", h.rank);
      boot_root_refuse(fd, qcclInvalidUsage, why);
      continue;
    }
    fds[h.rank] = fd;
    memcpy(addrs + (size_t)h.rank * BOOT_ADDR_BYTES, h.addr, BOOT_ADDR_BYTES);
    got++;
  }
  boot_table_t t;
  memset(&t, 0, sizeof t);
  t.magic = BOOT_TABLE_MAGIC;
  t.nranks = nranks;
  if (got < nranks || nranks < 0) {
    t.status = qcclTimeout;
    snprintf(t.why, sizeof t.why, "only %d of %d ranks joined before the timeout", got, nranks);
  }
  for (int i = 0; i < nranks && fds; i++) {
    if (fds[i] < 0) continue;
    double d = clock_now() + BOOT_HELLO_WAIT;
    if (sock_send_all(fds[i], &t, sizeof t, d) == qcclSuccess && t.status == 0)
      sock_send_all(fds[i], addrs, (size_t)nranks * BOOT_ADDR_BYTES, d);
    close(fds[i]);
  }
  free(fds);
  free(addrs);
  close(a.lfd);
  return NULL;
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
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int e = pthread_create(&th, &attr, boot_root_main, a);
  pthread_attr_destroy(&attr);
  if (e != 0) {
    close(a->lfd);
    free(a);
    return QCCL_ERRNO(qcclSystemError, e, "pthread_create (bootstrap root)");
  }
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

/* Connects to next, accepts prev (refusing strangers), closes lfd. */
static qcclResult_t boot_ring_build(bootstrap_t* b, int lfd, const uint8_t* addrs,
                                    double deadline) {
  qcclResult_t r = qcclSuccess;
  if (b->nranks == 1) goto done;
  int next = (b->rank + 1) % b->nranks, prev = (b->rank + b->nranks - 1) % b->nranks;
  sock_addr_t na;
  memset(&na, 0, sizeof na);
  memcpy(&na, addrs + (size_t)next * BOOT_ADDR_BYTES, BOOT_ADDR_BYTES);
  QCCL_CHECK_GOTO(sock_connect(&na, deadline, &b->next_fd), r, done);
  boot_hello_t h;
  boot_hello_fill(&h, b, NULL);
  QCCL_CHECK_GOTO(sock_send_all(b->next_fd, &h, sizeof h, deadline), r, done);
  for (;;) {
    int fd;
    QCCL_CHECK_GOTO(sock_accept(lfd, deadline, &fd), r, done);
    boot_hello_t p;
    double hd = clock_now() + BOOT_HELLO_WAIT;
    if (sock_recv_all(fd, &p, sizeof p, hd < deadline ? hd : deadline) == qcclSuccess &&
        p.magic == BOOT_HELLO_MAGIC && memcmp(p.secret, b->secret, BOOT_SECRET_BYTES) == 0 &&
        p.rank == prev && p.nranks == b->nranks) {
      b->prev_fd = fd;
      break;
    }
    QCCL_WARN(LOG_BOOT, "rank %d refused a ring connection: wrong secret or rank", b->rank);
    close(fd);
  }
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
  boot_table_t t;
  QCCL_CHECK_GOTO(sock_recv_all(rfd, &t, sizeof t, deadline), r, fail);
  t.why[sizeof t.why - 1] = '\0';
  if (t.magic != BOOT_TABLE_MAGIC) {
    r = QCCL_ERR(qcclRemoteError, "bootstrap root sent a malformed answer");
    goto fail;
  }
  if (t.status != 0) {
    r = QCCL_ERR((qcclResult_t)t.status, "bootstrap root refused rank %d: %s", rank, t.why);
    goto fail;
  }
  if (t.nranks != nranks) {
    r = QCCL_ERR(qcclInvalidUsage, "bootstrap: nranks %d disagrees with the root's %d", nranks,
                 t.nranks);
    goto fail;
  }
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
  boot_close(b);
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
    QCCL_CHECK(sock_sendrecv(b->next_fd, &out, b->prev_fd, &in, sizeof out, deadline));
    if (in.magic != BOOT_MSG_MAGIC || in.seq != b->seq || in.bytes != size)
      return QCCL_ERR(qcclInvalidUsage,
                      "bootstrap: rank %d expected message %u of %zu bytes, got %u of %llu "
                      "(ranks disagree on the call sequence)",
                      b->rank, b->seq, size, in.seq, (unsigned long long)in.bytes);
    b->seq++;
    QCCL_CHECK(sock_sendrecv(b->next_fd, d + (size_t)si * size, b->prev_fd, d + (size_t)ri * size,
                             size, deadline));
  }
  return qcclSuccess;
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
  boot_close(nb);
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

void boot_close(bootstrap_t* b) {
  if (!b) return;
  if (b->next_fd >= 0) close(b->next_fd);
  if (b->prev_fd >= 0) close(b->prev_fd);
  free(b);
}
