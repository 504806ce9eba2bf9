/*
 * fake_rank - a stand-in rank for the qcclrun tests.
 *
 * It runs a list of actions given on the command line, in order, then exits
 * 0. "rank R ACTION..." runs the next action only on rank R (from $RANK), so
 * one command line describes a job whose ranks behave differently. A path
 * template may hold %p (this process's pid) and %r (this rank).
 *
 *   env              print "rank= world= local_rank= local_world= addr= port=
 *                    secret= pid= passthru=" as one line on stdout
 *   lines            write "out-one\nout-two" (no final newline) on stdout and
 *                    the same with "err-" on stderr, in small pieces
 *   burst K          write K lines "rank R line J xxx..." in 7-byte pieces
 *   touch TPL        create the file TPL
 *   pidfile TPL      write this pid to TPL (atomically: temp file + rename)
 *   grandchild TPL   fork a child that sleeps forever; write its pid to TPL
 *   ignore-term      ignore SIGTERM from now on
 *   sleep MS         sleep MS milliseconds
 *   hang             sleep forever
 *   exit C           exit with status C
 *   sigkill          kill this process with SIGKILL
 *   zombie-check TPL wait (up to 10 s) for TPL to hold a pid, then for that
 *                    process to be gone, zombie included (kill(pid, 0) fails
 *                    with ESRCH) within 5 s; exit 1 if it is not
 *
 * For --nodes (simulated hosts):
 *   net              print "rank= hostname= hostid= local_rank= local_world=
 *                    addr= ifname= ifaddr= netns=" as one line on stdout,
 *                    ifaddr being the IPv4 address of $QCCL_SOCKET_IFNAME
 *   tcp-serve B      listen on MASTER_ADDR:MASTER_PORT, take WORLD_SIZE-1
 *                    connections one after the other, read each to its end,
 *                    answer one byte; print "served PEER-IP B bytes" each;
 *                    exit 1 if a peer sent other than B bytes
 *   tcp-send B       connect to MASTER_ADDR:MASTER_PORT (retrying for 10 s),
 *                    send B bytes, wait for the answer; print "sent B bytes
 *                    in T ms from OWN-IP" (T: from connected to answered)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int fake_rank_id(void) {
  const char* r = getenv("RANK");
  return r != NULL ? atoi(r) : -1;
}

static int fake_sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) continue;
  return 0;
}

/* Expands %p and %r of tpl into out. */
static int fake_expand(const char* tpl, char* out, size_t size) {
  size_t n = 0;
  for (const char* c = tpl; *c != '\0' && n + 16 < size; c++) {
    if (c[0] == '%' && (c[1] == 'p' || c[1] == 'r')) {
      n += (size_t)snprintf(out + n, size - n, "%d", c[1] == 'p' ? (int)getpid() : fake_rank_id());
      c++;
    } else {
      out[n++] = *c;
    }
  }
  out[n] = '\0';
  return 0;
}

static int fake_write(int fd, const char* s, size_t len) {
  while (len > 0) {
    ssize_t w = write(fd, s, len);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return 1;
    s += w;
    len -= (size_t)w;
  }
  return 0;
}

static int fake_env(void) {
  const char* names[] = {"RANK",        "WORLD_SIZE",  "LOCAL_RANK",  "LOCAL_WORLD_SIZE",
                         "MASTER_ADDR", "MASTER_PORT", "QCCL_SECRET", "FAKE_RANK_PASSTHRU"};
  const char* keys[] = {"rank", "world", "local_rank", "local_world",
                        "addr", "port",  "secret",     "passthru"};
  char line[1024];
  size_t n = 0;
  for (int i = 0; i < 8; i++) {
    const char* v = getenv(names[i]);
    n += (size_t)snprintf(line + n, sizeof(line) - n, "%s=%s ", keys[i], v ? v : "(unset)");
  }
  n += (size_t)snprintf(line + n, sizeof(line) - n, "pid=%d\n", (int)getpid());
  return fake_write(STDOUT_FILENO, line, n);
}

static int fake_lines(void) {
  const char* out[] = {"out-", "one\nout", "-two"};
  const char* err[] = {"err-", "one\nerr", "-two"};
  for (int i = 0; i < 3; i++) {
    if (fake_write(STDOUT_FILENO, out[i], strlen(out[i]))) return 1;
    if (fake_write(STDERR_FILENO, err[i], strlen(err[i]))) return 1;
    fake_sleep_ms(20);
  }
  return 0;
}

static int fake_burst(int count) {
  char line[512];
  for (int j = 0; j < count; j++) {
    int n = snprintf(line, sizeof(line), "rank %d line %d ", fake_rank_id(), j);
    memset(line + n, 'x', 200);
    line[n + 200] = '\n';
    for (int off = 0; off < n + 201; off += 7) {
      int len = n + 201 - off < 7 ? n + 201 - off : 7;
      if (fake_write(STDOUT_FILENO, line + off, (size_t)len)) return 1;
    }
  }
  return 0;
}

static int fake_pidfile(const char* path, pid_t pid) {
  char tmp[4200];
  FILE* f;
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  f = fopen(tmp, "w");
  if (f == NULL) return 1;
  fprintf(f, "%d\n", (int)pid);
  if (fclose(f) != 0 || rename(tmp, path) != 0) return 1;
  return 0;
}

static int fake_zombie_check(const char* path) {
  long pid = 0;
  for (int i = 0; i < 1000 && pid <= 0; i++) {
    FILE* f = fopen(path, "r");
    if (f != NULL) {
      if (fscanf(f, "%ld", &pid) != 1) pid = 0;
      fclose(f);
    }
    if (pid <= 0) fake_sleep_ms(10);
  }
  if (pid <= 0) {
    fprintf(stderr, "zombie-check: no pid in %s\n", path);
    return 1;
  }
  for (int i = 0; i < 500; i++) {
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 0;
    fake_sleep_ms(10);
  }
  fprintf(stderr, "zombie-check: pid %ld still exists after 5 s\n", pid);
  return 1;
}

static const char* fake_getenv(const char* name) {
  const char* v = getenv(name);
  return v != NULL ? v : "(unset)";
}

static double fake_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The IPv4 address of interface name, or "(none)". */
static void fake_if_addr(const char* name, char* out, size_t size) {
  struct ifaddrs *ifs = NULL, *i;
  snprintf(out, size, "(none)");
  if (name == NULL || getifaddrs(&ifs) != 0) return;
  for (i = ifs; i != NULL; i = i->ifa_next) {
    if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET || strcmp(i->ifa_name, name) != 0)
      continue;
    inet_ntop(AF_INET, &((struct sockaddr_in*)i->ifa_addr)->sin_addr, out, (socklen_t)size);
    break;
  }
  freeifaddrs(ifs);
}

static int fake_net(void) {
  char host[256] = "", ifaddr[64], line[1024];
  int n;
  gethostname(host, sizeof(host) - 1);
  fake_if_addr(getenv("QCCL_SOCKET_IFNAME"), ifaddr, sizeof(ifaddr));
  n = snprintf(line, sizeof(line),
               "rank=%s hostname=%s hostid=%s local_rank=%s local_world=%s addr=%s ifname=%s "
               "ifaddr=%s netns=%s\n",
               fake_getenv("RANK"), host, fake_getenv("QCCL_HOST_ID"), fake_getenv("LOCAL_RANK"),
               fake_getenv("LOCAL_WORLD_SIZE"), fake_getenv("MASTER_ADDR"),
               fake_getenv("QCCL_SOCKET_IFNAME"), ifaddr, fake_getenv("QCCLRUN_NETNS"));
  return fake_write(STDOUT_FILENO, line, (size_t)n);
}

/* MASTER_ADDR:MASTER_PORT as a socket address. */
static int fake_master(struct sockaddr_in* a) {
  const char* addr = getenv("MASTER_ADDR");
  const char* port = getenv("MASTER_PORT");
  *a = (struct sockaddr_in){.sin_family = AF_INET};
  if (addr == NULL || port == NULL || inet_pton(AF_INET, addr, &a->sin_addr) != 1) {
    fprintf(stderr, "fake_rank: MASTER_ADDR/MASTER_PORT unset or not IPv4\n");
    return 1;
  }
  a->sin_port = htons((unsigned short)atoi(port));
  return 0;
}

static int fake_tcp_serve(long expect) {
  struct sockaddr_in a, peer;
  int one = 1, peers = atoi(fake_getenv("WORLD_SIZE")) - 1, bad = 0;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  static char buf[1 << 16];
  if (fake_master(&a) != 0) return 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || bind(fd, (struct sockaddr*)&a, sizeof(a)) != 0 || listen(fd, 64) != 0) return 1;
  for (int p = 0; p < peers; p++) {
    socklen_t len = sizeof(peer);
    char ip[64] = "?";
    long got = 0;
    ssize_t n;
    int c = accept(fd, (struct sockaddr*)&peer, &len);
    if (c < 0 && errno == EINTR) {
      p--;
      continue;
    }
    if (c < 0) return 1;
    inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof(ip));
    while ((n = read(c, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) got += n > 0 ? n : 0;
    if (fake_write(c, "k", 1) != 0) bad = 1;
    close(c);
    printf("served %s %ld bytes\n", ip, got);
    fflush(stdout);
    if (got != expect) bad = 1;
  }
  close(fd);
  if (bad) fprintf(stderr, "tcp-serve: a peer did not send %ld bytes\n", expect);
  return bad;
}

static int fake_tcp_send(long count) {
  struct sockaddr_in a, self;
  socklen_t len = sizeof(self);
  static char buf[1 << 16];
  char ip[64] = "?", ack;
  double t0, t1;
  int fd = -1;
  if (fake_master(&a) != 0) return 1;
  for (int tries = 0; tries < 1000; tries++) { /* rank 0 may not listen yet */
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 1;
    if (connect(fd, (struct sockaddr*)&a, sizeof(a)) == 0) break;
    close(fd);
    fd = -1;
    fake_sleep_ms(10);
  }
  if (fd < 0) return 1;
  getsockname(fd, (struct sockaddr*)&self, &len);
  inet_ntop(AF_INET, &self.sin_addr, ip, sizeof(ip));
  memset(buf, 'q', sizeof(buf));
  t0 = fake_now_ms();
  for (long left = count; left > 0;) {
    size_t chunk = left < (long)sizeof(buf) ? (size_t)left : sizeof(buf);
    if (fake_write(fd, buf, chunk) != 0) return 1;
    left -= (long)chunk;
  }
  shutdown(fd, SHUT_WR);
  while (read(fd, &ack, 1) < 0 && errno == EINTR) continue;
  t1 = fake_now_ms();
  close(fd);
  printf("sent %ld bytes in %.0f ms from %s\n", count, t1 - t0, ip);
  fflush(stdout);
  return 0;
}

/* Whether action a takes an argument. */
static int fake_takes_arg(const char* a) {
  return !(strcmp(a, "env") == 0 || strcmp(a, "lines") == 0 || strcmp(a, "ignore-term") == 0 ||
           strcmp(a, "hang") == 0 || strcmp(a, "sigkill") == 0 || strcmp(a, "net") == 0);
}

/* Runs action argv[*i] and its arguments; advances *i past them. */
static int fake_action(int argc, char** argv, int* i) {
  const char* a = argv[*i];
  const char* arg = *i + 1 < argc ? argv[*i + 1] : NULL;
  char path[4096];
  int takes = fake_takes_arg(a);
  if (takes && arg == NULL) {
    fprintf(stderr, "fake_rank: %s needs an argument\n", a);
    exit(99);
  }
  *i += takes ? 2 : 1;
  if (arg != NULL) fake_expand(arg, path, sizeof(path));
  if (strcmp(a, "env") == 0) return fake_env();
  if (strcmp(a, "lines") == 0) return fake_lines();
  if (strcmp(a, "burst") == 0) return fake_burst(atoi(arg));
  if (strcmp(a, "touch") == 0) {
    FILE* f = fopen(path, "w");
    return f == NULL || fclose(f) != 0;
  }
  if (strcmp(a, "pidfile") == 0) return fake_pidfile(path, getpid());
  if (strcmp(a, "grandchild") == 0) {
    pid_t pid = fork();
    if (pid == 0) {
      for (;;) pause();
    }
    return pid < 0 || fake_pidfile(path, pid);
  }
  if (strcmp(a, "ignore-term") == 0) return signal(SIGTERM, SIG_IGN) == SIG_ERR;
  if (strcmp(a, "sleep") == 0) return fake_sleep_ms(atol(arg));
  if (strcmp(a, "hang") == 0) {
    for (;;) pause();
  }
  if (strcmp(a, "exit") == 0) exit(atoi(arg));
  if (strcmp(a, "sigkill") == 0) return kill(getpid(), SIGKILL);
  if (strcmp(a, "zombie-check") == 0) exit(fake_zombie_check(path));
  if (strcmp(a, "net") == 0) return fake_net();
  if (strcmp(a, "tcp-serve") == 0) return fake_tcp_serve(atol(arg));
  if (strcmp(a, "tcp-send") == 0) return fake_tcp_send(atol(arg));
  fprintf(stderr, "fake_rank: unknown action '%s'\n", a);
  exit(99);
}

int main(int argc, char** argv) {
  int i = 1;
  while (i < argc) {
    if (strcmp(argv[i], "rank") == 0 && i + 2 < argc) {
      int only = atoi(argv[i + 1]);
      i += 2;
      if (only != fake_rank_id()) { /* step over the action without running it */
        i += fake_takes_arg(argv[i]) ? 2 : 1;
        continue;
      }
    }
    const char* action = argv[i];
    if (fake_action(argc, argv, &i) != 0) {
      fprintf(stderr, "fake_rank: action '%s' failed: %s\n", action, strerror(errno));
      return 98;
    }
  }
  return 0;
}
