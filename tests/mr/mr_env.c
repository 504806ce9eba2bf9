/*
 * mr_env - qcclCommInitFromEnv reads the launcher's environment and, when
 * a variable is missing or malformed, fails fast with a message naming it.
 *
 * Runs as one process (not under qcclrun). Each scenario runs in a child
 * process of its own, with every launcher variable (RANK, WORLD_SIZE,
 * LOCAL_*, MASTER_*, OMPI_*, SLURM_*, PMI*, TORCHELASTIC_*, QCCL_*) removed
 * and only the scenario's set, since the library may parse its environment
 * once per process. A child that does not return within 20 s is killed and
 * counted as a failure (a bad environment must fail before connecting).
 * The child's stderr goes to a file, so that a scenario can require or
 * forbid the warning about a derived secret.
 *   failing: nothing set (every source named); RANK only; no MASTER_ADDR;
 *     no MASTER_PORT; WORLD_SIZE=abc; RANK=5 of 2; RANK=-1; MASTER_PORT=abc;
 *     MASTER_PORT=70000; QCCL_COMM_ID=garbage; QCCL_TIMEOUT=abc (otherwise
 *     valid); LOCAL_RANK beyond LOCAL_WORLD_SIZE; Open MPI's, Slurm's or
 *     MPICH's numbering without a rendezvous address (names QCCL_COMM_ID);
 *     a malformed SLURM_STEP_TASKS_PER_NODE; PMIX_RANK with an unreachable
 *     server and nothing else; QCCL_SECRET_FILE missing, a folder, mode
 *     0644, 0640, another user's (as root), too short; QCCL_SECRET too
 *     short -> qcclInvalidArgument (or qcclInvalidUsage for a malformed
 *     value), the message naming the variable;
 *   working (W = 1, a free port): torchrun's variables with QCCL_SECRET
 *     (no warning) and without (one warning naming QCCL_SECRET_FILE);
 *     QCCL_SECRET_FILE (mode 0600, surrounding white space; no warning);
 *     Open MPI's; Slurm's with QCCL_COMM_ID (and a task list whose node
 *     entry disagrees with the one host: a warning at QCCL_DEBUG=WARN);
 *     MPICH's PMI_RANK; PMIX_RANK with an unreachable server beside Open
 *     MPI's variables (falls back); RANK over a broken OMPI_COMM_WORLD_RANK
 *     and OMPI_* over a broken SLURM_PROCID (the order of precedence);
 *     QCCL_TIMEOUT=2.5;
 *   two ranks (W = 2): the same QCCL_SECRET_FILE content joins; different
 *     QCCL_SECRET values do not (rank 1 is refused, QCCL_TIMEOUT=3), so the
 *     given secret really is the job's.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qccl.h"

extern char** environ;

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr*)&a, sizeof a) != 0 ||
      getsockname(fd, (struct sockaddr*)&a, &len) != 0) {
    perror("free_port");
    exit(1);
  }
  close(fd);
  return ntohs(a.sin_port);
}

static int launcher_var(const char* kv) {
  static const char* const exact[] = {
      "RANK",        "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
      "MASTER_PORT", "GROUP_RANK", "ROLE_RANK",  "NODE_RANK",        NULL};
  static const char* const prefix[] = {"OMPI_",         "SLURM_", "PMI", "PMIX_",
                                       "TORCHELASTIC_", "QCCL_",  NULL};
  size_t n = strcspn(kv, "=");
  for (int i = 0; exact[i]; i++)
    if (strlen(exact[i]) == n && strncmp(kv, exact[i], n) == 0) return 1;
  for (int i = 0; prefix[i]; i++)
    if (strncmp(kv, prefix[i], strlen(prefix[i])) == 0) return 1;
  return 0;
}

static void clear_launcher_env(void) {
  for (;;) {
    char** e = environ;
    while (*e && !launcher_var(*e)) e++;
    if (!*e) return;
    char name[256];
    size_t n = strcspn(*e, "=");
    if (n >= sizeof name) n = sizeof name - 1;
    memcpy(name, *e, n);
    name[n] = 0;
    unsetenv(name);
  }
}

/* "A=1 B=2" -> setenv each */
static void set_vars(const char* vars) {
  char buf[1200];
  snprintf(buf, sizeof buf, "%s", vars);
  for (char* tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
    char* eq = strchr(tok, '=');
    if (!eq) continue;
    *eq = 0;
    setenv(tok, eq + 1, 1);
  }
}

/* names: alternatives separated by '|', each a list of words separated by
 * '&' that must all appear in msg */
static int names_match(const char* msg, const char* names) {
  char alts[512];
  snprintf(alts, sizeof alts, "%s", names);
  char* save_a = NULL;
  for (char* a = strtok_r(alts, "|", &save_a); a; a = strtok_r(NULL, "|", &save_a)) {
    int all = 1;
    char* save_w = NULL;
    for (char* w = strtok_r(a, "&", &save_w); w; w = strtok_r(NULL, "&", &save_w))
      if (!msg || !strstr(msg, w)) all = 0;
    if (all) return 1;
  }
  return 0;
}

/* in the child: returns the exit status (0 = as expected). rank / nranks:
 * the communicator expected on success. */
static int child_init(int want_ok, const char* names, int rank, int nranks) {
  alarm(20);
  qcclComm_t comm = NULL;
  qcclResult_t r = qcclCommInitFromEnv(&comm);
  const char* msg = qcclGetLastError(NULL);
  if (want_ok) {
    if (r != qcclSuccess) {
      printf("  FAIL: %s: \"%s\"\n", qcclGetErrorString(r), msg ? msg : "(null)");
      return 1;
    }
    int n = -1, rk = -1;
    float v = 3.5f;
    if (qcclCommCount(comm, &n) != qcclSuccess || qcclCommUserRank(comm, &rk) != qcclSuccess ||
        n != nranks || rk != rank) {
      printf("  FAIL: count %d rank %d, expected %d and %d\n", n, rk, nranks, rank);
      return 1;
    }
    if (qcclAllReduce(&v, &v, 1, qcclFloat32, qcclSum, comm, NULL) != qcclSuccess ||
        v != 3.5f * (float)nranks) {
      printf("  FAIL: AllReduce on the %d-rank communicator\n", nranks);
      return 1;
    }
    qcclCommDestroy(comm);
    printf("  ok: rank %d initialized\n", rank);
    return 0;
  }
  if (r == qcclSuccess) {
    printf("  FAIL: succeeded\n");
    return 1;
  }
  if (names == NULL) {
    printf("  ok: rank %d failed: %s: \"%s\"\n", rank, qcclGetErrorString(r), msg);
    return 0;
  }
  if (r != qcclInvalidArgument && r != qcclInvalidUsage) {
    printf("  FAIL: %s, expected qcclInvalidArgument: \"%s\"\n", qcclGetErrorString(r), msg);
    return 1;
  }
  if (names_match(msg, names)) {
    printf("  ok: %s: \"%s\"\n", qcclGetErrorString(r), msg);
    return 0;
  }
  printf("  FAIL: %s with message \"%s\", which does not name %s\n", qcclGetErrorString(r),
         msg ? msg : "(null)", names);
  return 1;
}

/* Runs child_init with stderr in a file; then checks the warning about a
 * derived secret (warn 1: exactly one, 0: none, -1: either) and the
 * pattern `want_err` (NULL: none) in what was written to stderr. */
static int child(const char* vars, int want_ok, const char* names, int warn, const char* want_err,
                 int rank, int nranks) {
  clear_launcher_env();
  set_vars(vars);
  char path[] = "/tmp/mr_env_err.XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0 || dup2(fd, 2) < 0) return 2;
  unlink(path);
  int st = child_init(want_ok, names, rank, nranks);
  fflush(stderr);
  char err[8192];
  ssize_t n = pread(fd, err, sizeof err - 1, 0);
  err[n > 0 ? n : 0] = '\0';
  int warns = 0;
  for (const char* p = err; (p = strstr(p, "secret is derived from public values")); p++) warns++;
  if (warn >= 0 && warns != warn) {
    printf("  FAIL: %d warning(s) about a derived secret, expected %d; stderr: \"%s\"\n", warns,
           warn, err);
    st = 1;
  } else if (warns) {
    if (!strstr(err, "QCCL_SECRET_FILE")) {
      printf("  FAIL: the warning does not name QCCL_SECRET_FILE: \"%s\"\n", err);
      st = 1;
    } else {
      printf("  ok: warned about the derived secret\n");
    }
  }
  if (want_err && !strstr(err, want_err)) {
    printf("  FAIL: stderr does not say \"%s\": \"%s\"\n", want_err, err);
    st = 1;
  } else if (want_err) {
    printf("  ok: stderr says \"%s\"\n", want_err);
  }
  return st;
}

static int failures;

static pid_t spawn(const char* vars, int want_ok, const char* names, int warn, const char* want_err,
                   int rank, int nranks) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(1);
  }
  if (pid == 0) {
    int st = child(vars, want_ok, names, warn, want_err, rank, nranks);
    fflush(stdout);
    _exit(st);
  }
  return pid;
}

static void reap(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFSIGNALED(st)) {
    printf("  FAIL: killed by signal %d%s\n", WTERMSIG(st),
           WTERMSIG(st) == SIGALRM ? " (no answer within 20 s)" : "");
    failures++;
  } else if (WEXITSTATUS(st) != 0) {
    failures++;
  }
}

/* One rank (W = 1); warn as child(). */
static void scenario_w(const char* title, const char* vars, int want_ok, const char* names,
                       int warn, const char* want_err) {
  printf("%s [%s]\n", title, vars);
  reap(spawn(vars, want_ok, names, warn, want_err, 0, 1));
}

static void scenario(const char* title, const char* vars, int want_ok, const char* names) {
  scenario_w(title, vars, want_ok, names, -1, NULL);
}

/* Two ranks: vars0 for rank 0, vars1 for rank 1 (RANK and WORLD_SIZE
 * added). want_ok: both must succeed, or both must fail. */
static void pair(const char* title, const char* vars0, const char* vars1, int want_ok) {
  char v0[1200], v1[1200];
  snprintf(v0, sizeof v0, "RANK=0 WORLD_SIZE=2 %s", vars0);
  snprintf(v1, sizeof v1, "RANK=1 WORLD_SIZE=2 %s", vars1);
  printf("%s [%s] [%s]\n", title, v0, v1);
  pid_t a = spawn(v0, want_ok, NULL, 0, NULL, 0, 2);
  pid_t b = spawn(v1, want_ok, NULL, 0, NULL, 1, 2);
  reap(a);
  reap(b);
}

/* A file holding text, with mode. */
static void make_file(const char* path, const char* text, mode_t mode) {
  FILE* f = fopen(path, "w");
  if (!f || fputs(text, f) < 0 || fclose(f) != 0 || chmod(path, mode) != 0) {
    perror(path);
    exit(1);
  }
}

int main(void) {
  char v[1024];
  const char* secret = "QCCL_SECRET=0123456789abcdef0123456789abcdef";
  scenario("nothing set", "", 0, "RANK&WORLD_SIZE&PMIX_RANK&OMPI_COMM_WORLD_RANK&SLURM_PROCID");
  scenario("RANK only", "RANK=0", 0, "WORLD_SIZE");
  snprintf(v, sizeof v, "RANK=0 WORLD_SIZE=2 MASTER_PORT=%d", free_port());
  scenario("no MASTER_ADDR", v, 0, "MASTER_ADDR");
  scenario("no MASTER_PORT", "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1", 0, "MASTER_PORT");
  scenario("WORLD_SIZE garbage", "RANK=0 WORLD_SIZE=abc MASTER_ADDR=127.0.0.1 MASTER_PORT=29999", 0,
           "WORLD_SIZE");
  scenario("RANK beyond WORLD_SIZE", "RANK=5 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999",
           0, "RANK");
  scenario("RANK negative", "RANK=-1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999", 0,
           "RANK");
  scenario("MASTER_PORT garbage", "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=abc", 0,
           "MASTER_PORT");
  scenario("MASTER_PORT out of range",
           "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=70000", 0, "MASTER_PORT");
  scenario("QCCL_COMM_ID garbage", "RANK=0 WORLD_SIZE=2 QCCL_COMM_ID=garbage", 0, "QCCL_COMM_ID");
  snprintf(v, sizeof v, "RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d QCCL_TIMEOUT=abc",
           free_port());
  scenario("QCCL_TIMEOUT garbage", v, 0, "QCCL_TIMEOUT");
  scenario("LOCAL_RANK beyond LOCAL_WORLD_SIZE",
           "RANK=0 WORLD_SIZE=1 LOCAL_RANK=3 LOCAL_WORLD_SIZE=2 QCCL_COMM_ID=127.0.0.1:29999", 0,
           "LOCAL_RANK");
  scenario("Open MPI without PMIx or a rendezvous", "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2",
           0, "QCCL_COMM_ID&OMPI_COMM_WORLD_RANK");
  scenario("Slurm without PMIx or a rendezvous", "SLURM_PROCID=0 SLURM_NTASKS=2", 0,
           "QCCL_COMM_ID&SLURM_PROCID");
  scenario("MPICH without a rendezvous", "PMI_RANK=0 PMI_SIZE=2", 0, "QCCL_COMM_ID&PMI_RANK");
  scenario("Slurm task list garbage",
           "SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_NODEID=0 SLURM_STEP_TASKS_PER_NODE=2(y3) "
           "QCCL_COMM_ID=127.0.0.1:29999",
           0, "SLURM_STEP_TASKS_PER_NODE");
  scenario("PMIX_RANK alone, its server unreachable",
           "PMIX_RANK=0 PMIX_NAMESPACE=gone PMIX_SERVER_URI41=gone.0;tcp4://127.0.0.1:1", 0,
           "PMIx_Init failed&PMIX_RANK|no PMIx&PMIX_RANK");

  /* the secret the user gives */
  char dir[] = "/tmp/mr_env.XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  char good[64], open_f[64], group_f[64], short_f[64], other_f[64];
  snprintf(good, sizeof good, "%s/good", dir);
  snprintf(open_f, sizeof open_f, "%s/open", dir);
  snprintf(group_f, sizeof group_f, "%s/group", dir);
  snprintf(short_f, sizeof short_f, "%s/short", dir);
  snprintf(other_f, sizeof other_f, "%s/other", dir);
  make_file(good, "  9f86d081884c7d659a2feaa0c55ad015\n", 0600);
  make_file(open_f, "9f86d081884c7d659a2feaa0c55ad015\n", 0644);
  make_file(group_f, "9f86d081884c7d659a2feaa0c55ad015\n", 0640);
  make_file(short_f, "abc\n", 0600);
  snprintf(v, sizeof v, "RANK=0 WORLD_SIZE=1 QCCL_COMM_ID=127.0.0.1:%d QCCL_SECRET_FILE=%s/none",
           free_port(), dir);
  scenario("QCCL_SECRET_FILE missing", v, 0, "QCCL_SECRET_FILE");
  snprintf(v, sizeof v, "RANK=0 WORLD_SIZE=1 QCCL_COMM_ID=127.0.0.1:%d QCCL_SECRET_FILE=%s",
           free_port(), dir);
  scenario("QCCL_SECRET_FILE a folder", v, 0, "QCCL_SECRET_FILE&regular");
  snprintf(v, sizeof v, "RANK=0 WORLD_SIZE=1 QCCL_COMM_ID=127.0.0.1:%d QCCL_SECRET_FILE=%s",
           free_port(), open_f);
  scenario("QCCL_SECRET_FILE mode 0644", v, 0, "QCCL_SECRET_FILE&0644&chmod 600");
  snprintf(v, sizeof v, "RANK=0 WORLD_SIZE=1 QCCL_COMM_ID=127.0.0.1:%d QCCL_SECRET_FILE=%s",
           free_port(), group_f);
  scenario("QCCL_SECRET_FILE mode 0640", v, 0, "QCCL_SECRET_FILE&0640");
  snprintf(v, sizeof v, "RANK=0 WORLD_SIZE=1 QCCL_COMM_ID=127.0.0.1:%d QCCL_SECRET_FILE=%s",
           free_port(), short_f);
  scenario("QCCL_SECRET_FILE too short", v, 0, "QCCL_SECRET_FILE&at least 16");
  if (geteuid() == 0) {
    make_file(other_f, "9f86d081884c7d659a2feaa0c55ad015\n", 0600);
    if (chown(other_f, 65534, 65534) != 0) perror("chown");
    snprintf(v, sizeof v, "RANK=0 WORLD_SIZE=1 QCCL_COMM_ID=127.0.0.1:%d QCCL_SECRET_FILE=%s",
             free_port(), other_f);
    scenario("QCCL_SECRET_FILE of another user", v, 0, "QCCL_SECRET_FILE&uid 65534");
  }
  snprintf(v, sizeof v, "RANK=0 WORLD_SIZE=1 QCCL_COMM_ID=127.0.0.1:%d QCCL_SECRET=short",
           free_port());
  scenario("QCCL_SECRET too short", v, 0, "QCCL_SECRET&at least 16");

  snprintf(v, sizeof v,
           "RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "
           "MASTER_ADDR=127.0.0.1 MASTER_PORT=%d %s",
           free_port(), secret);
  scenario_w("torchrun variables", v, 1, NULL, 0, NULL);
  snprintf(v, sizeof v, "RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d", free_port());
  scenario_w("torchrun variables without a secret: warned", v, 1, NULL, 1, NULL);
  snprintf(v, sizeof v,
           "RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d QCCL_SECRET_FILE=%s",
           free_port(), good);
  scenario_w("torchrun variables with QCCL_SECRET_FILE", v, 1, NULL, 0, NULL);
  snprintf(v, sizeof v,
           "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d %s",
           free_port(), secret);
  scenario_w("Open MPI variables", v, 1, NULL, 0, NULL);
  snprintf(v, sizeof v, "SLURM_PROCID=0 SLURM_NTASKS=1 QCCL_COMM_ID=127.0.0.1:%d", free_port());
  scenario_w("Slurm variables (no secret: warned)", v, 1, NULL, 1, NULL);
  snprintf(v, sizeof v,
           "SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 SLURM_NODEID=3 "
           "SLURM_STEP_TASKS_PER_NODE=2(x3),1 QCCL_COMM_ID=127.0.0.1:%d QCCL_DEBUG=WARN %s",
           free_port(), secret);
  scenario_w("Slurm task list: node 3 holds 1 task", v, 1, NULL, 0, NULL);
  snprintf(v, sizeof v,
           "SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 SLURM_NODEID=1 "
           "SLURM_STEP_TASKS_PER_NODE=2(x3),1 QCCL_COMM_ID=127.0.0.1:%d QCCL_DEBUG=WARN %s",
           free_port(), secret);
  scenario_w("Slurm task list: node 1 holds 2 tasks, qccl sees 1", v, 1, NULL, 0,
             "puts 2 ranks on this host");
  snprintf(v, sizeof v, "PMI_RANK=0 PMI_SIZE=1 QCCL_COMM_ID=127.0.0.1:%d %s", free_port(), secret);
  scenario_w("MPICH variables", v, 1, NULL, 0, NULL);
  snprintf(v, sizeof v,
           "PMIX_RANK=0 PMIX_NAMESPACE=gone PMIX_SERVER_URI41=gone.0;tcp4://127.0.0.1:1 "
           "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 QCCL_COMM_ID=127.0.0.1:%d %s",
           free_port(), secret);
  scenario_w("PMIx unreachable: Open MPI's variables instead", v, 1, NULL, 0, NULL);
  snprintf(v, sizeof v, "RANK=0 WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=abc QCCL_COMM_ID=127.0.0.1:%d %s",
           free_port(), secret);
  scenario_w("RANK before OMPI_COMM_WORLD_RANK", v, 1, NULL, 0, NULL);
  snprintf(v, sizeof v,
           "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 SLURM_PROCID=abc "
           "QCCL_COMM_ID=127.0.0.1:%d %s",
           free_port(), secret);
  scenario_w("OMPI_COMM_WORLD_RANK before SLURM_PROCID", v, 1, NULL, 0, NULL);
  snprintf(v, sizeof v,
           "RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d QCCL_TIMEOUT=2.5 %s",
           free_port(), secret);
  scenario("QCCL_TIMEOUT=2.5", v, 1, NULL);

  /* two ranks: the given secret is the job's */
  char v1[1024];
  int port = free_port();
  snprintf(v, sizeof v, "QCCL_COMM_ID=127.0.0.1:%d QCCL_SECRET_FILE=%s QCCL_TIMEOUT=10", port,
           good);
  pair("two ranks, one QCCL_SECRET_FILE", v, v, 1);
  port = free_port();
  snprintf(v, sizeof v,
           "QCCL_COMM_ID=127.0.0.1:%d QCCL_SECRET=aaaaaaaaaaaaaaaaaaaaaaaa QCCL_TIMEOUT=3", port);
  snprintf(v1, sizeof v1,
           "QCCL_COMM_ID=127.0.0.1:%d QCCL_SECRET=bbbbbbbbbbbbbbbbbbbbbbbb QCCL_TIMEOUT=3", port);
  pair("two ranks, different QCCL_SECRET: refused", v, v1, 0);

  const char* files[] = {good, open_f, group_f, short_f, other_f};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(files[i]);
  rmdir(dir);
  printf("mr_env: %s (%d failure(s))\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
