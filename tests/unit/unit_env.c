/*
 * unit_env - every environment variable is read one way (src/core/env.c):
 * decimal numbers, K / M / G where sizes are meant, keywords in any case,
 * and anything else refused with a message naming the variable.
 *
 * Part 1 drives the parsers directly (env_parse_*, the QCCL_POLICY,
 * QCCL_ALGO and QCCL_DEBUG_SUBSYS parsers) with the values of issue 14:
 * 010000 is ten thousand (not octal 4096), 0x1000 and "-1" sizes are
 * refused, min=-1 in QCCL_POLICY is refused (it wrapped to 2^64-1), a
 * QCCL_ALGO over 255 characters is refused (it was cut), keywords match in
 * any case. Part 2 runs qcclCommInitRank at W = 1 (and W = 2 on two
 * host ids for QCCL_UCX_TLS) in child processes with one variable set and
 * checks the result and that the message (or stderr, for the log
 * variables) names the variable.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectives/algo_env.h"
#include "collectives/zeropp/zpp.h"
#include "core/env.h"
#include "core/err.h"
#include "core/log.h"
#include "qccl.h"
#include "qccl_config.h"

static int failures;

#define EXPECT(cond, ...)                                  \
  do {                                                     \
    if (!(cond)) {                                         \
      failures++;                                          \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
    }                                                      \
  } while (0)

static void int_case(const char* v, int ok, int64_t want) {
  int64_t x = -7;
  qcclResult_t r = env_parse_int("QCCL_X", v, -1000, INT64_MAX, &x);
  EXPECT((r == qcclSuccess) == ok, "int '%s': result %d", v, (int)r);
  if (ok && r == qcclSuccess)
    EXPECT(x == want, "int '%s' = %lld, want %lld", v, (long long)x, (long long)want);
  if (!ok) EXPECT(strstr(err_last(), "QCCL_X") != NULL, "int '%s': message '%s'", v, err_last());
  err_clear();
}

static void size_case(const char* v, int ok, int64_t want) {
  int64_t x = -7;
  qcclResult_t r = env_parse_size("QCCL_Y", v, 0, INT64_MAX, &x);
  EXPECT((r == qcclSuccess) == ok, "size '%s': result %d", v, (int)r);
  if (ok && r == qcclSuccess)
    EXPECT(x == want, "size '%s' = %lld, want %lld", v, (long long)x, (long long)want);
  if (!ok) EXPECT(strstr(err_last(), "QCCL_Y") != NULL, "size '%s': message '%s'", v, err_last());
  err_clear();
}

static void policy_case(const char* v, int ok) {
  char msg[300] = "";
  int r = zpp_policy_check(v, msg, sizeof msg);
  EXPECT((r == 0) == ok, "QCCL_POLICY='%.80s': %d (%s)", v, r, msg);
  if (!ok) EXPECT(strstr(msg, "QCCL_POLICY") != NULL, "policy message '%s'", msg);
}

static void algo_case(const char* v, int ok, int kind, int want) {
  int algo[COLL_NUM_KINDS] = {0};
  qcclResult_t r = coll_algo_parse(v, algo);
  EXPECT((r == qcclSuccess) == ok, "QCCL_ALGO='%.80s': %d", v, (int)r);
  if (ok && r == qcclSuccess) EXPECT(algo[kind] == want, "QCCL_ALGO='%s': %d", v, algo[kind]);
  if (!ok) EXPECT(strstr(err_last(), "QCCL_ALGO") != NULL, "algo message '%s'", err_last());
  err_clear();
}

static void parsers(void) {
  int_case("12", 1, 12);
  int_case("-1", 1, -1);
  int_case("010", 1, 10); /* decimal, not octal 8 */
  int_case("0x10", 0, 0); /* no hex */
  int_case(" 5", 0, 0);   /* no spaces */
  int_case("5 ", 0, 0);
  int_case("+5", 0, 0);
  int_case("", 0, 0);
  int_case("-", 0, 0);
  int_case("-1001", 0, 0); /* below lo */
  int_case("9223372036854775807", 1, INT64_MAX);
  int_case("9223372036854775808", 0, 0);
  int_case("99999999999999999999999", 0, 0);
  size_case("010000", 1, 10000); /* issue 14: it was octal 4096 */
  size_case("4096", 1, 4096);
  size_case("64K", 1, 65536);
  size_case("64k", 1, 65536);
  size_case("2M", 1, 2 << 20);
  size_case("1G", 1, 1 << 30);
  size_case("-1", 0, 0); /* wrapped to 2^64-1 before */
  size_case("1KB", 0, 0);
  size_case("K", 0, 0);
  size_case("0x1000", 0, 0);
  size_case("8589934592G", 0, 0); /* 2^33 G overflows int64 */
  double s = 0;
  EXPECT(env_parse_seconds("QCCL_T", "2.5", &s) == qcclSuccess && s == 2.5, "seconds 2.5");
  EXPECT(env_parse_seconds("QCCL_T", "0x10", &s) != qcclSuccess, "seconds hex");
  EXPECT(env_parse_seconds("QCCL_T", "inf", &s) != qcclSuccess, "seconds inf");
  EXPECT(env_parse_seconds("QCCL_T", "1e3", &s) != qcclSuccess, "seconds exponent");
  EXPECT(env_parse_seconds("QCCL_T", "0", &s) != qcclSuccess, "seconds zero");
  EXPECT(env_parse_seconds("QCCL_T", ".", &s) != qcclSuccess, "seconds dot");
  err_clear();

  policy_case("allgather:int8:b256", 1);
  policy_case("ALLGATHER:INT8:B256:min=64k", 1); /* one case rule */
  policy_case("reducescatter:int4:min=-1", 0);   /* issue 14: wrapped to 2^64-1 */
  policy_case("reducescatter:int4:min=0x10", 0);
  policy_case("allreduce:int8:seed=010", 1);
  policy_case("allreduce:int8:seed=0x10", 0);
  policy_case("allreduce:int8:b12x", 0);
  policy_case("allreduce:int8:b", 0);
  policy_case("gather:int8", 0);
  char big[700];
  memset(big, 0, sizeof big);
  strcpy(big, "allgather:int8");
  for (size_t i = strlen(big); i < 600; i += 5) memcpy(big + i, ":hier", 5);
  policy_case(big, 0); /* longer than the parser holds: refused, not cut */

  algo_case("allreduce:flat", 1, COLL_ALLREDUCE, COLL_ALGO_FLAT);
  algo_case("AllReduce:HIER", 1, COLL_ALLREDUCE, COLL_ALGO_HIER);
  algo_case("allgather:ring,reduce:auto", 1, COLL_ALLGATHER, COLL_ALGO_FLAT);
  algo_case("allreduce", 0, 0, 0);
  algo_case("alltoall:flat", 0, 0, 0);
  algo_case("allreduce:tree", 0, 0, 0);
  char longalgo[400];
  strcpy(longalgo, "allreduce:flat");
  for (size_t i = strlen(longalgo); i < 300; i += 15) memcpy(longalgo + i, ",allreduce:flat", 15);
  longalgo[300] = '\0';
  algo_case(longalgo, 0, 0, 0); /* issue 14: it was cut at 255 characters */

  EXPECT(log_subsys_parse("boot,ENV", NULL) == (LOG_BOOT | LOG_ENV), "subsys boot,ENV");
  EXPECT(log_subsys_parse("^boot", NULL) == (LOG_ALL & ~LOG_BOOT), "subsys ^boot");
}

/* Runs fn in a child with the environment pairs set; returns its exit
 * status and its stderr (up to len bytes) in err. */
static int child(const char* const* kv, int (*fn)(void), char* err, size_t len) {
  int pfd[2];
  if (pipe(pfd) != 0) return -1;
  pid_t p = fork();
  if (p == 0) {
    dup2(pfd[1], 2);
    close(pfd[0]);
    for (int i = 0; kv[i]; i += 2) setenv(kv[i], kv[i + 1], 1);
    alarm(60);
    _exit(fn());
  }
  close(pfd[1]);
  size_t got = 0;
  ssize_t k;
  while ((k = read(pfd[0], err + got, len - 1 - got)) > 0) got += (size_t)k;
  err[got] = '\0';
  close(pfd[0]);
  int st = 0;
  waitpid(p, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* 0: init succeeded; 1: it failed and the message named the variable in
 * QCCL_EXPECT_NAME; 2: it failed without naming it. */
static int init_w1(void) {
  qcclUniqueId id;
  qcclComm_t c;
  const char* name = getenv("UNIT_ENV_NAME");
  qcclResult_t r = qcclGetUniqueId(&id);
  if (r == qcclSuccess) r = qcclCommInitRank(&c, 1, id, 0);
  if (r == qcclSuccess) {
    float x = 1;
    r = qcclAllReduce(&x, &x, 1, qcclFloat32, qcclSum, c, NULL);
    qcclCommDestroy(c);
  }
  if (r == qcclSuccess) return 0;
  fprintf(stderr, "child: %s\n", qcclGetLastError(NULL));
  return strstr(qcclGetLastError(NULL), name) ? 1 : 2;
}

static void init_case(const char* name, const char* value, int want) {
  const char* kv[] = {name, value, "UNIT_ENV_NAME", name, "QCCL_SOCKET_IFNAME", "lo", NULL};
  char err[4096];
  int st = child(kv, init_w1, err, sizeof err);
  EXPECT(st == want, "init with %s='%.40s': status %d, want %d; stderr: %s", name, value, st, want,
         err);
}

static void log_case(const char* name, const char* value) {
  const char* kv[] = {name, value, "UNIT_ENV_NAME", name, "QCCL_SOCKET_IFNAME", "lo", NULL};
  char err[4096];
  int st = child(kv, init_w1, err, sizeof err);
  EXPECT(st == 0 && strstr(err, name) != NULL, "%s='%s': status %d, stderr must name it: %s", name,
         value, st, err);
}

#if QCCL_HAVE_UCX
/* Two ranks on two host ids (UCX between them) with a transport list
 * that does not exist: both fail naming QCCL_UCX_TLS. */
static int ucx_two(void) {
  qcclUniqueId id;
  if (qcclGetUniqueId(&id) != qcclSuccess) return 3;
  pid_t p[2];
  for (int r = 0; r < 2; r++) {
    p[r] = fork();
    if (p[r] == 0) {
      char host[32];
      snprintf(host, sizeof host, "unit-env-host-%d", r);
      setenv("QCCL_HOST_ID", host, 1);
      qcclComm_t c;
      qcclResult_t res = qcclCommInitRank(&c, 2, id, r);
      if (res == qcclSuccess) _exit(0);
      fprintf(stderr, "rank %d: %s\n", r, qcclGetLastError(NULL));
      _exit(strstr(qcclGetLastError(NULL), "QCCL_UCX_TLS") ? 1 : 2);
    }
  }
  int worst = 0;
  for (int r = 0; r < 2; r++) {
    int st = 0;
    waitpid(p[r], &st, 0);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 9;
    if (code != 1 && code > worst) worst = code;
    if (code == 0) worst = 4;
  }
  return worst == 0 ? 1 : worst;
}
#endif

int main(void) {
  /* the children first: the parent must not have started its logger (the
   * parsers' errors log), which a fork would inherit */
  init_case("QCCL_SHM_CHUNK_BYTES", "010000", 0); /* decimal 10000: valid */
  init_case("QCCL_SHM_CHUNK_BYTES", "64K", 0);
  init_case("QCCL_SHM_CHUNK_BYTES", "0x1000", 1);
  init_case("QCCL_SHM_CHUNK_BYTES", "-1", 1);
  init_case("QCCL_SPIN_US", "1e3", 1);
  init_case("QCCL_TIMEOUT", "0x10", 1);
  init_case("QCCL_QUANT_ISA", "SCALAR", 0); /* one case rule: accepted */
  init_case("QCCL_BIND", "NONE", 0);
  init_case("QCCL_BIND", "cores", 1);
  log_case("QCCL_DEBUG_FILE", "/nonexistent-dir-qccl/log.txt"); /* fell back silently */
  log_case("QCCL_DEBUG_SUBSYS", "BOOT,NOPE");
  log_case("QCCL_DEBUG", "LOUD");
#if QCCL_HAVE_UCX
  {
    const char* kv[] = {"QCCL_UCX_TLS", "abc", "QCCL_SOCKET_IFNAME", "lo", "QCCL_TIMEOUT",
                        "20",           NULL};
    unsetenv("UCX_TLS");
    char err[4096];
    int st = child(kv, ucx_two, err, sizeof err);
    EXPECT(st == 1, "QCCL_UCX_TLS=abc: status %d (1: both ranks named it); stderr: %s", st, err);
  }
#endif
  parsers();
  if (failures) {
    fprintf(stderr, "unit_env: %d failures\n", failures);
    return 1;
  }
  printf("unit_env: ok\n");
  return 0;
}
