/*
 * unit_topo_xml - host discovery on the hwloc XML topologies of tests/data
 * (written by tests/data/gen_topo_xml.py; see its header for each host):
 * counts, which PCI devices are GPUs and NICs, their NUMA nodes and
 * packages, the nearest NIC of every GPU, the binding targets, the tie
 * rules of the NIC pick, the XML dump (written, read back, same picks), and
 * the errors for a missing, empty, malformed or unreadable topology file
 * (QCCL_TOPO_FILE and HWLOC_XMLFILE), and the host's core count that
 * topo_host_query keeps per source: a new file, a file rewritten in place
 * and the machine each give their own count, a bad file its error.
 *
 * usage: unit_topo_xml DATA_DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "topology/host.h"
#include "topology/topo.h"

#include "expect.h"

static topo_t* load(const char* dir, const char* name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  topo_t* t = NULL;
  qcclResult_t r = topo_load_xml(path, &t);
  if (r != qcclSuccess) {
    fprintf(stderr, "FAIL: cannot load %s: %s\n", path, err_last());
    exit(1);
  }
  return t;
}

/* Asserts GPU g: bus id, NUMA node, package, nearest NIC's name. */
static void expect_gpu(const topo_t* t, int g, const char* busid, int numa, int package,
                       const char* nic) {
  EXPECT(g < t->ngpus, "gpu %d of %d", g, t->ngpus);
  if (g >= t->ngpus) return;
  const topo_dev_t* d = &t->gpus[g];
  EXPECT(strcmp(d->busid, busid) == 0, "gpu %d bus id %s, expected %s", g, d->busid, busid);
  EXPECT(d->numa == numa, "gpu %d numa %d, expected %d", g, d->numa, numa);
  EXPECT(d->package == package, "gpu %d package %d, expected %d", g, d->package, package);
  const char* got = d->nearest >= 0 ? t->nics[d->nearest].name : "(none)";
  EXPECT(strcmp(got, nic) == 0, "gpu %d nearest nic %s, expected %s", g, got, nic);
}

static void expect_nic(const topo_t* t, int n, const char* name, int numa) {
  EXPECT(n < t->nnics, "nic %d of %d", n, t->nnics);
  if (n >= t->nnics) return;
  EXPECT(strcmp(t->nics[n].name, name) == 0, "nic %d is %s, expected %s", n, t->nics[n].name, name);
  EXPECT(t->nics[n].numa == numa, "nic %d numa %d, expected %d", n, t->nics[n].numa, numa);
}

static void check_two_sockets(const topo_t* t) {
  EXPECT(t->npackages == 2 && t->nnuma == 2 && t->ncores == 8 && t->npus == 8, "counts %d %d %d %d",
         t->npackages, t->nnuma, t->ncores, t->npus);
  EXPECT(t->ngpus == 4 && t->nnics == 5, "%d GPUs, %d NICs", t->ngpus, t->nnics);
  EXPECT(!t->thissystem, "a file must not count as this machine");
  /* eno1 is on package 0's host bridge, first in PCI order: never the pick */
  expect_nic(t, 0, "eno1", 0);
  expect_nic(t, 1, "mlx5_0", 0);
  expect_nic(t, 4, "mlx5_3", 1);
  expect_gpu(t, 0, "0000:11:00.0", 0, 0, "mlx5_0");
  expect_gpu(t, 1, "0000:19:00.0", 0, 0, "mlx5_1");
  expect_gpu(t, 2, "0000:91:00.0", 1, 1, "mlx5_2");
  expect_gpu(t, 3, "0000:99:00.0", 1, 1, "mlx5_3");
  for (int g = 0; g < t->ngpus; g++)
    EXPECT(t->gpus[g].hops == 2, "gpu %d: %d hops to its switch's NIC", g, t->gpus[g].hops);
  EXPECT(strcmp(t->gpus[0].name, "cuda0") == 0, "gpu 0 os device %s", t->gpus[0].name);
  /* binding: 4 ranks over 8 cores take every other core, numa 0,0,1,1 */
  for (int l = 0; l < 4; l++) {
    EXPECT(topo_bind_index(t, TOPO_BIND_CORE, l, 4) == 2 * l, "core of %d/4: %d", l,
           topo_bind_index(t, TOPO_BIND_CORE, l, 4));
    EXPECT(topo_bind_index(t, TOPO_BIND_NUMA, l, 4) == l / 2, "numa of %d/4: %d", l,
           topo_bind_index(t, TOPO_BIND_NUMA, l, 4));
  }
  EXPECT(topo_bind_index(t, TOPO_BIND_NONE, 0, 4) == -1, "none binds nothing");
  /* a file topology is never applied, but says where it would bind */
  int applied = 1;
  char desc[256];
  EXPECT(topo_bind_apply(t, TOPO_BIND_NUMA, 3, 4, &applied, desc, sizeof desc) == qcclSuccess, "%s",
         err_last());
  EXPECT(applied == 0, "bound with a file topology");
  EXPECT(strstr(desc, "numa 1") && strstr(desc, "cpus 4-7"), "desc '%s'", desc);
}

static void check_flat(const topo_t* t) {
  EXPECT(t->npackages == 1 && t->nnuma == 1 && t->ncores == 4 && t->npus == 8, "counts %d %d %d %d",
         t->npackages, t->nnuma, t->ncores, t->npus);
  /* the ASPEED VGA (0x1a03, class 0300) is no GPU */
  EXPECT(t->ngpus == 2 && t->nnics == 1, "%d GPUs, %d NICs", t->ngpus, t->nnics);
  expect_nic(t, 0, "eth0", 0);
  /* the host bridge hangs off the machine, but one NUMA node covers it */
  expect_gpu(t, 0, "0000:03:00.0", 0, -1, "eth0");
  expect_gpu(t, 1, "0000:04:00.0", 0, -1, "eth0");
  /* 3 ranks over 4 cores (2 PUs each): cores 0, 1, 2 */
  for (int l = 0; l < 3; l++)
    EXPECT(topo_bind_index(t, TOPO_BIND_CORE, l, 3) == l * 4 / 3, "core of %d/3", l);
  /* 8 ranks over 4 cores: in pairs */
  for (int l = 0; l < 8; l++)
    EXPECT(topo_bind_index(t, TOPO_BIND_CORE, l, 8) == l / 2, "core of %d/8", l);
}

static void check_four_numa(const topo_t* t) {
  EXPECT(t->npackages == 2 && t->nnuma == 4 && t->ncores == 8, "counts %d %d %d", t->npackages,
         t->nnuma, t->ncores);
  EXPECT(t->ngpus == 4 && t->nnics == 2, "%d GPUs, %d NICs", t->ngpus, t->nnics);
  expect_nic(t, 0, "mlx5_0", 1);
  expect_nic(t, 1, "mlx5_1", 2);
  /* NUMA 0 has no NIC: the one of its package (NUMA 1) beats the other
   * package's; NUMA 3 likewise takes NUMA 2's */
  expect_gpu(t, 0, "0000:01:00.0", 0, 0, "mlx5_0");
  expect_gpu(t, 1, "0000:41:00.0", 1, 0, "mlx5_0");
  expect_gpu(t, 2, "0000:81:00.0", 2, 1, "mlx5_1");
  expect_gpu(t, 3, "0000:c1:00.0", 3, 1, "mlx5_1");
  EXPECT(t->gpus[1].hops == 2 && t->gpus[0].hops > t->gpus[1].hops, "hops %d %d", t->gpus[0].hops,
         t->gpus[1].hops);
  for (int l = 0; l < 8; l++)
    EXPECT(topo_bind_index(t, TOPO_BIND_NUMA, l, 8) == l / 2, "numa of %d/8", l);
  EXPECT(topo_bind_index(t, TOPO_BIND_NUMA, 1, 2) == 2, "numa of 1/2");
}

static void check_pick_rules(void) {
  int hops[] = {4, 2, 2, 6};
  int numa[] = {0, 1, 0, 0};
  EXPECT(topo_pick_nearest(hops, numa, 4, 0) == 2, "tie goes to the GPU's NUMA node");
  EXPECT(topo_pick_nearest(hops, numa, 4, 1) == 1, "tie goes to the GPU's NUMA node");
  EXPECT(topo_pick_nearest(hops, numa, 4, -1) == 1, "unknown NUMA: lowest index");
  EXPECT(topo_pick_nearest(hops, numa, 4, 3) == 1, "no NIC on the NUMA node: lowest index");
  EXPECT(topo_pick_nearest(hops, numa, 0, 0) == -1, "no NIC");
  int hops2[] = {3, 1};
  EXPECT(topo_pick_nearest(hops2, numa, 2, 0) == 1, "fewer hops beat the NUMA node");
  EXPECT(topo_bind_target(0, 1, 4) == 0 && topo_bind_target(2, 3, 2) == 1, "targets");
  EXPECT(topo_bind_target(3, 3, 2) == -1 && topo_bind_target(0, 1, 0) == -1, "bad targets");
}

/* topo_hwloc_load through the variables: each bad value is
 * qcclInvalidArgument with a message naming the variable and file. */
static void expect_load_error(const char* var, const char* value, const char* what) {
  unsetenv("QCCL_TOPO_FILE");
  unsetenv("HWLOC_XMLFILE");
  setenv(var, value, 1);
  hwloc_topology_t hw;
  err_clear();
  qcclResult_t r = topo_hwloc_load(0, &hw, NULL, 0);
  EXPECT(r == qcclInvalidArgument, "%s (%s=%s): result %d", what, var, value, (int)r);
  if (r == qcclSuccess) hwloc_topology_destroy(hw);
  EXPECT(strstr(err_last(), var) != NULL, "%s: message '%s' lacks %s", what, err_last(), var);
  if (*value)
    EXPECT(strstr(err_last(), value) != NULL, "%s: message '%s' lacks the file", what, err_last());
  topo_t* t = NULL;
  r = topo_load(&t);
  EXPECT(r == qcclInvalidArgument && t == NULL, "%s: topo_load gives %d", what, (int)r);
  unsetenv(var);
}

static void check_errors(const char* dir) {
  char bad[] = "/tmp/qccl-topo-badXXXXXX";
  int fd = mkstemp(bad);
  if (fd < 0) {
    perror("mkstemp");
    exit(1);
  }
  const char junk[] = "<topology version=\"2.0\"><object type=\"Machine\"";
  if (write(fd, junk, sizeof junk - 1) != (ssize_t)(sizeof junk - 1)) exit(1);
  close(fd);
  for (int v = 0; v < 2; v++) {
    const char* var = v ? "HWLOC_XMLFILE" : "QCCL_TOPO_FILE";
    expect_load_error(var, "/nonexistent/qccl-topo.xml", "missing file");
    expect_load_error(var, bad, "malformed file");
    expect_load_error(var, "", "empty value");
    expect_load_error(var, dir, "a directory");
  }
  unlink(bad);
  /* QCCL_TOPO_FILE wins over HWLOC_XMLFILE */
  char good[1024];
  snprintf(good, sizeof good, "%s/topo_flat.xml", dir);
  setenv("QCCL_TOPO_FILE", good, 1);
  setenv("HWLOC_XMLFILE", "/nonexistent/qccl-topo.xml", 1);
  topo_t* t = NULL;
  EXPECT(topo_load(&t) == qcclSuccess, "QCCL_TOPO_FILE over HWLOC_XMLFILE: %s", err_last());
  if (t) {
    EXPECT(t->ngpus == 2 && strstr(t->source, "QCCL_TOPO_FILE"), "source %s", t->source);
    topo_free(t);
  }
  unsetenv("QCCL_TOPO_FILE");
  unsetenv("HWLOC_XMLFILE");
}

/* The dump of a loaded file reads back with the same picks. */
static void check_dump(const char* dir) {
  topo_t* t = load(dir, "topo_2s_pcie.xml");
  char pattern[256], path[256];
  snprintf(pattern, sizeof pattern, "/tmp/qccl-topo-dump-%%p.xml");
  snprintf(path, sizeof path, "/tmp/qccl-topo-dump-%d.xml", (int)getpid());
  EXPECT(topo_dump(t, pattern) == qcclSuccess, "dump: %s", err_last());
  topo_free(t);
  t = NULL;
  EXPECT(topo_load_xml(path, &t) == qcclSuccess, "read back %s: %s", path, err_last());
  if (t) check_two_sockets(t);
  topo_free(t);
  unlink(path);
  t = load(dir, "topo_flat.xml");
  EXPECT(topo_dump(t, "/nonexistent/dir/x.xml") == qcclSystemError, "dump to a bad path");
  EXPECT(strstr(err_last(), "QCCL_TOPO_DUMP_FILE") != NULL, "message '%s'", err_last());
  topo_free(t);
}

/* copies file src to dst (whole) */
static void copy_file(const char* src, const char* dst) {
  FILE* in = fopen(src, "rb");
  FILE* out = fopen(dst, "wb");
  if (!in || !out) {
    perror("copy_file");
    exit(1);
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n) exit(1);
  fclose(in);
  fclose(out);
}

static int host_pus(void) {
  topo_host_t h;
  err_clear();
  if (topo_host_query(&h) != qcclSuccess) return -1;
  return h.ncores;
}

/* The core count kept per source (host.c): each file, a file rewritten in
 * place, and the machine give their own; a bad file is refused each time. */
static void check_host_cache(const char* dir) {
  char one[1024], four[1024], tmp[] = "/tmp/qccl-topo-hostXXXXXX";
  snprintf(one, sizeof one, "%s/topo_1pu.xml", dir);
  snprintf(four, sizeof four, "%s/topo_4numa.xml", dir);
  topo_t* t = NULL;
  EXPECT(topo_load_xml(four, &t) == qcclSuccess, "load %s", four);
  int n4 = t ? t->npus : -1;
  topo_free(t);
  unsetenv("HWLOC_XMLFILE");
  setenv("QCCL_TOPO_FILE", one, 1);
  EXPECT(host_pus() == 1, "topo_1pu: %d PUs", host_pus());
  setenv("QCCL_TOPO_FILE", four, 1);
  EXPECT(n4 > 1 && host_pus() == n4, "topo_4numa: %d PUs, expected %d", host_pus(), n4);
  int fd = mkstemp(tmp);
  if (fd < 0) exit(1);
  close(fd);
  copy_file(one, tmp);
  setenv("QCCL_TOPO_FILE", tmp, 1);
  EXPECT(host_pus() == 1, "a copy of topo_1pu: %d PUs", host_pus());
  EXPECT(host_pus() == 1, "the same again: %d PUs", host_pus());
  copy_file(four, tmp); /* rewritten in place: another size */
  EXPECT(host_pus() == n4, "rewritten as topo_4numa: %d PUs, expected %d", host_pus(), n4);
  unlink(tmp);
  EXPECT(host_pus() == -1 && strstr(err_last(), tmp) != NULL, "removed: %d (%s)", host_pus(),
         err_last());
  unsetenv("QCCL_TOPO_FILE");
  t = NULL;
  EXPECT(topo_load(&t) == qcclSuccess, "this machine: %s", err_last());
  int nm = t ? t->npus : -1;
  topo_free(t);
  EXPECT(host_pus() == nm, "this machine: %d PUs, hwloc says %d", host_pus(), nm);
}

static void print_all(const topo_t* t) {
  char line[512];
  topo_format_summary(t, line, sizeof line);
  printf("  %s\n", line);
  for (int i = 0; i < t->nnics; i++) {
    topo_format_nic(t, i, line, sizeof line);
    printf("    %s\n", line);
  }
  for (int i = 0; i < t->ngpus; i++) {
    topo_format_gpu(t, i, line, sizeof line);
    printf("    %s\n", line);
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  const char* dir = argv[1];
  unsetenv("QCCL_TOPO_FILE");
  unsetenv("HWLOC_XMLFILE");
  struct {
    const char* file;
    void (*check)(const topo_t*);
  } files[] = {{"topo_2s_pcie.xml", check_two_sockets},
               {"topo_flat.xml", check_flat},
               {"topo_4numa.xml", check_four_numa}};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    topo_t* t = load(dir, files[i].file);
    printf("%s:\n", files[i].file);
    print_all(t);
    files[i].check(t);
    topo_free(t);
  }
  check_pick_rules();
  check_errors(dir);
  check_dump(dir);
  check_host_cache(dir);
  /* this machine loads, and is this system */
  topo_t* t = NULL;
  EXPECT(topo_load(&t) == qcclSuccess, "this machine: %s", err_last());
  if (t) {
    printf("this machine:\n");
    print_all(t);
    EXPECT(t->thissystem && t->npus >= 1 && t->ncores >= 1, "this machine");
    topo_free(t);
  }
  printf("%s: %d failure%s\n", failures ? "FAILED" : "passed", failures, failures == 1 ? "" : "s");
  return failures ? 1 : 0;
}
