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
 *   failing: nothing set; RANK only; no MASTER_ADDR; no MASTER_PORT;
 *     WORLD_SIZE=abc; RANK=5 of 2; RANK=-1; MASTER_PORT=abc; MASTER_PORT=
 *     70000; QCCL_COMM_ID=garbage; QCCL_TIMEOUT=abc (otherwise valid) ->
 *     qcclInvalidArgument (or qcclInvalidUsage for a malformed value), the
 *     message naming the variable;
 *   working (W = 1, a free port): torchrun's variables, with and without
 *     QCCL_SECRET; Open MPI's; Slurm's with QCCL_COMM_ID; QCCL_TIMEOUT=2.5.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
  char buf[512];
  snprintf(buf, sizeof buf, "%s", vars);
  for (char* tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
    char* eq = strchr(tok, '=');
    if (!eq) continue;
    *eq = 0;
    setenv(tok, eq + 1, 1);
  }
}

/* in the child: returns the exit status (0 = as expected) */
static int child(const char* vars, int want_ok, const char* names) {
  clear_launcher_env();
  set_vars(vars);
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
        n != 1 || rk != 0) {
      printf("  FAIL: count %d rank %d, expected 1 and 0\n", n, rk);
      return 1;
    }
    if (qcclAllReduce(&v, &v, 1, qcclFloat32, qcclSum, comm, NULL) != qcclSuccess || v != 3.5f) {
      printf("  FAIL: AllReduce on the 1-rank communicator\n");
      return 1;
    }
    qcclCommDestroy(comm);
    printf("  ok: initialized\n");
    return 0;
  }
  if (r == qcclSuccess) {
    printf("  FAIL: succeeded\n");
    return 1;
  }
  if (r != qcclInvalidArgument && r != qcclInvalidUsage) {
    printf("  FAIL: %s, expected qcclInvalidArgument: \"%s\"\n", qcclGetErrorString(r), msg);
    return 1;
  }
  /* names: alternatives separated by '|' */
  char alts[256];
  snprintf(alts, sizeof alts, "%s", names);
  for (char* a = strtok(alts, "|"); a; a = strtok(NULL, "|"))
    if (msg && strstr(msg, a)) {
      printf("  ok: %s: \"%s\"\n", qcclGetErrorString(r), msg);
      return 0;
    }
  printf("  FAIL: %s with message \"%s\", which does not name %s\n", qcclGetErrorString(r),
         msg ? msg : "(null)", names);
  return 1;
}

static int failures;

static void scenario(const char* title, const char* vars, int want_ok, const char* names) {
  printf("%s [%s]\n", title, vars);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(1);
  }
  if (pid == 0) {
    int st = child(vars, want_ok, names);
    fflush(stdout);
    _exit(st);
  }
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

int main(void) {
  char v[512];
  const char* secret = "QCCL_SECRET=0123456789abcdef0123456789abcdef";
  scenario("nothing set", "", 0, "RANK|WORLD_SIZE");
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
  snprintf(v, sizeof v,
           "RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "
           "MASTER_ADDR=127.0.0.1 MASTER_PORT=%d %s",
           free_port(), secret);
  scenario("torchrun variables", v, 1, NULL);
  snprintf(v, sizeof v, "RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d", free_port());
  scenario("torchrun variables without QCCL_SECRET", v, 1, NULL);
  snprintf(v, sizeof v,
           "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d",
           free_port());
  scenario("Open MPI variables", v, 1, NULL);
  snprintf(v, sizeof v, "SLURM_PROCID=0 SLURM_NTASKS=1 QCCL_COMM_ID=127.0.0.1:%d", free_port());
  scenario("Slurm variables", v, 1, NULL);
  snprintf(v, sizeof v, "RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d QCCL_TIMEOUT=2.5",
           free_port());
  scenario("QCCL_TIMEOUT=2.5", v, 1, NULL);
  printf("mr_env: %s (%d failure(s))\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
