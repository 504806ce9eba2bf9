/*
 * topo_env - the topology's environment, in one process with one-rank
 * communicators (public API; hwloc only to compute expectations):
 *
 *   errors   a missing, malformed or empty QCCL_TOPO_FILE, a missing
 *            HWLOC_XMLFILE, an empty or overlong QCCL_HOST_ID, a bad
 *            QCCL_BIND: qcclCommInitRank fails with qcclInvalidArgument
 *            and a message naming the variable (and the value or file);
 *   file     QCCL_TOPO_FILE (the 2-socket host of tests/data) with
 *            QCCL_BIND=core and QCCL_TOPO_DUMP_FILE: the communicator
 *            works, the binding is not applied (another machine's
 *            topology), the dump holds the file's GPUs and NICs, and the
 *            INFO log (QCCL_DEBUG_FILE) has the GPU -> NIC lines and the
 *            path table;
 *   bind     QCCL_BIND=core on this machine binds to core 0 (local rank
 *            0 of 1); numa to NUMA node 0.
 *
 * usage: topo_env DATA_DIR
 */
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qccl.h"

#include "expect.h"

static const char* const vars[] = {"QCCL_TOPO_FILE", "HWLOC_XMLFILE", "QCCL_HOST_ID", "QCCL_BIND",
                                   "QCCL_TOPO_DUMP_FILE"};

static void clear_env(void) {
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static qcclResult_t init1(qcclComm_t* comm) {
  qcclUniqueId id;
  qcclResult_t r = qcclGetUniqueId(&id);
  if (r != qcclSuccess) return r;
  return qcclCommInitRank(comm, 1, id, 0);
}

static void expect_init_error(const char* var, const char* value, const char* word) {
  clear_env();
  setenv(var, value, 1);
  qcclComm_t comm = NULL;
  qcclResult_t r = init1(&comm);
  const char* msg = qcclGetLastError(NULL);
  printf("%s='%.40s': %s: %s\n", var, value, qcclGetErrorString(r), msg);
  EXPECT(r == qcclInvalidArgument, "%s='%s': result %d", var, value, (int)r);
  EXPECT(strstr(msg, var) != NULL, "%s: message '%s' does not name it", var, msg);
  if (word) EXPECT(strstr(msg, word) != NULL, "%s: message '%s' lacks '%s'", var, msg, word);
  if (r == qcclSuccess) qcclCommDestroy(comm);
}

static char* slurp(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return NULL;
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void case_errors(void) {
  char bad[] = "/tmp/qccl-topo-env-badXXXXXX";
  int fd = mkstemp(bad);
  if (fd < 0 || write(fd, "<topology>\n<object", 18) != 18) {
    perror("mkstemp");
    exit(1);
  }
  close(fd);
  expect_init_error("QCCL_TOPO_FILE", "/nonexistent/host.xml", "/nonexistent/host.xml");
  expect_init_error("QCCL_TOPO_FILE", bad, bad);
  expect_init_error("QCCL_TOPO_FILE", "", NULL);
  expect_init_error("HWLOC_XMLFILE", "/nonexistent/host.xml", "/nonexistent/host.xml");
  expect_init_error("QCCL_HOST_ID", "", "empty");
  char longid[300];
  memset(longid, 'h', sizeof longid - 1);
  longid[sizeof longid - 1] = '\0';
  expect_init_error("QCCL_HOST_ID", longid, NULL);
  expect_init_error("QCCL_BIND", "socket", "socket");
  expect_init_error("QCCL_BIND", "", NULL);
  unlink(bad);
}

static int cpuset_count(void) {
  cpu_set_t s;
  if (sched_getaffinity(0, sizeof s, &s) != 0) return -1;
  return CPU_COUNT(&s);
}

static void case_file(const char* dir, const char* log) {
  clear_env();
  char file[1024], dump[256];
  snprintf(file, sizeof file, "%s/topo_2s_pcie.xml", dir);
  snprintf(dump, sizeof dump, "/tmp/qccl-topo-env-dump-%d.xml", (int)getpid());
  setenv("QCCL_TOPO_FILE", file, 1);
  setenv("QCCL_BIND", "core", 1);
  setenv("QCCL_TOPO_DUMP_FILE", "/tmp/qccl-topo-env-dump-%p.xml", 1);
  int before = cpuset_count();
  qcclComm_t comm = NULL;
  qcclResult_t r = init1(&comm);
  EXPECT(r == qcclSuccess, "init with QCCL_TOPO_FILE: %s", qcclGetLastError(NULL));
  if (r != qcclSuccess) return;
  int node = -1, nnodes = -1, lr = -1, ls = -1;
  EXPECT(qcclCommNodeInfo(comm, &node, &nnodes, &lr, &ls) == qcclSuccess, "NodeInfo");
  EXPECT(node == 0 && nnodes == 1 && lr == 0 && ls == 1, "NodeInfo %d %d %d %d", node, nnodes, lr,
         ls);
  int32_t v = 5;
  EXPECT(qcclAllReduce(&v, &v, 1, qcclInt32, qcclSum, comm, NULL) == qcclSuccess && v == 5,
         "AllReduce");
  EXPECT(qcclCommDestroy(comm) == qcclSuccess, "destroy");
  EXPECT(cpuset_count() == before, "a file topology was applied: %d cpus, were %d", cpuset_count(),
         before);
  char* d = slurp(dump);
  EXPECT(d != NULL, "no dump at %s", dump);
  if (d)
    EXPECT(strstr(d, "mlx5_3") && strstr(d, "cuda3") && strstr(d, "<topology"),
           "the dump lacks the file's devices");
  unlink(dump);
  char* l = slurp(log);
  EXPECT(l != NULL, "no log at %s", log);
  if (l == NULL) return;
  const char* want[] = {"gpu 3 0000:99:00.0",
                        "nic 4 mlx5_3",
                        "mlx5_3 0000:9a:00.0 numa 1",
                        "paths of rank 0, host buffers: self 0",
                        "device buffers",
                        "QCCL_BIND=core not applied",
                        "node 0 of 1, local rank 0 of 1",
                        "topology written to"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    EXPECT(strstr(l, want[i]) != NULL, "the INFO log lacks '%s'", want[i]);
}

static void case_bind(const char* mode, hwloc_obj_type_t type, const char* log) {
  clear_env();
  setenv("QCCL_BIND", mode, 1);
  qcclComm_t comm = NULL;
  qcclResult_t r = init1(&comm);
  EXPECT(r == qcclSuccess, "init with QCCL_BIND=%s: %s", mode, qcclGetLastError(NULL));
  if (r != qcclSuccess) return;
  hwloc_topology_t hw;
  hwloc_topology_init(&hw);
  hwloc_topology_load(hw);
  hwloc_obj_t o = hwloc_get_obj_by_type(hw, type, 0);
  hwloc_bitmap_t got = hwloc_bitmap_alloc();
  EXPECT(o != NULL && hwloc_get_cpubind(hw, got, HWLOC_CPUBIND_PROCESS) == 0, "get cpubind");
  if (o) {
    char a[128], b[128];
    hwloc_bitmap_list_snprintf(a, sizeof a, got);
    hwloc_bitmap_list_snprintf(b, sizeof b, o->cpuset);
    printf("QCCL_BIND=%s: bound to cpus %s, expected %s\n", mode, a, b);
    EXPECT(hwloc_bitmap_isequal(got, o->cpuset), "QCCL_BIND=%s: cpus %s, expected %s", mode, a, b);
  }
  hwloc_bitmap_free(got);
  hwloc_topology_destroy(hw);
  EXPECT(qcclCommDestroy(comm) == qcclSuccess, "destroy");
  char* l = slurp(log);
  char want[64];
  snprintf(want, sizeof want, "bound to %s 0", mode);
  EXPECT(l && strstr(l, want), "the INFO log lacks '%s'", want);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  /* the logger reads these once, at its first line */
  char log[256];
  snprintf(log, sizeof log, "/tmp/qccl-topo-env-log-%d.txt", (int)getpid());
  setenv("QCCL_DEBUG", "INFO", 1);
  setenv("QCCL_DEBUG_SUBSYS", "TOPO", 1);
  setenv("QCCL_DEBUG_FILE", "/tmp/qccl-topo-env-log-%p.txt", 1);
  setenv("QCCL_SOCKET_IFNAME", "lo", 1);
  if (getenv("QCCL_TIMEOUT") == NULL) setenv("QCCL_TIMEOUT", "30", 1);
  case_errors();
  case_file(argv[1], log);
  case_bind("numa", HWLOC_OBJ_NUMANODE, log);
  case_bind("core", HWLOC_OBJ_CORE, log);
  if (failures) {
    char* l = slurp(log);
    fprintf(stderr, "---- %s ----\n%s\n", log, l ? l : "(none)");
  }
  unlink(log);
  printf("%s: %d failure%s\n", failures ? "FAILED" : "passed", failures, failures == 1 ? "" : "s");
  return failures ? 1 : 0;
}
