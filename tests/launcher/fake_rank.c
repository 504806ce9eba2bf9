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
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Whether action a takes an argument. */
static int fake_takes_arg(const char* a) {
  return !(strcmp(a, "env") == 0 || strcmp(a, "lines") == 0 || strcmp(a, "ignore-term") == 0 ||
           strcmp(a, "hang") == 0 || strcmp(a, "sigkill") == 0);
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
