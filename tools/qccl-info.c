/*
 * qccl-info - what this qccl is and what it sees (like ucc_info, or
 * NCCL's INFO lines):
 *
 *   qccl-info                 version, build features (CUDA, NCCL, UCX),
 *                             quantization ISA, this host's identity and
 *                             topology (packages, NUMA nodes, cores, NICs,
 *                             GPUs with their nearest NIC)
 *   qcclrun -n N [--placement ...] -- qccl-info
 *                             the same from rank 0, then the rank map and
 *                             the path table of every rank (gathered to
 *                             rank 0 with qcclGather)
 *
 * QCCL_TOPO_FILE / HWLOC_XMLFILE show another host's topology. Exits 0, or
 * 1 with the error when discovery or the communicator fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/comm_topo.h"
#include "core/err.h"
#include "qccl.h"
#include "qccl_config.h"
#include "quant/quant.h"
#include "topology/host.h"
#include "topology/topo.h"

#define INFO_LINE_BYTES 1024
#define INFO_LINES 4 /* per rank: host, map, host paths, device paths */

static int info_fail(const char* what, qcclResult_t r, const char* msg) {
  fprintf(stderr, "qccl-info: %s: %s: %s\n", what, qcclGetErrorString(r), msg);
  return 1;
}

static int info_local(void) {
  int v = 0;
  qcclGetVersion(&v);
  printf("qccl %s (version code %d, header %d)\n", QCCL_VERSION_STRING, v, QCCL_VERSION_CODE);
  printf("build: CUDA %s, NCCL %s, UCX %s\n", QCCL_HAVE_CUDA ? "yes" : "no",
         QCCL_HAVE_NCCL ? "yes" : "no", QCCL_HAVE_UCX ? "yes" : "no");
  quant_isa_t isa;
  qcclResult_t r = quant_isa_default(&isa);
  if (r != qcclSuccess) return info_fail("quantization ISA", r, err_last());
  printf("quantization ISA: %s (available:", quant_isa_name(isa));
  for (int i = 0; i < QUANT_ISA_COUNT; i++)
    if (quant_isa_available((quant_isa_t)i)) printf(" %s", quant_isa_name((quant_isa_t)i));
  printf(")\n");
  topo_host_t host;
  r = topo_host_query(&host);
  if (r != qcclSuccess) return info_fail("host", r, err_last());
  printf("host: %s\n", host.id);
  topo_t* t = NULL;
  r = topo_load(&t);
  if (r != qcclSuccess) return info_fail("topology", r, err_last());
  char line[INFO_LINE_BYTES];
  topo_format_summary(t, line, sizeof line);
  printf("topology: %s\n", line);
  for (int i = 0; i < t->nnuma; i++) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t->hw, HWLOC_OBJ_NUMANODE, (unsigned)i);
    char set[256] = "";
    if (o && o->cpuset) hwloc_bitmap_list_snprintf(set, sizeof set, o->cpuset);
    printf("  numa %u: cpus %s\n", o ? o->os_index : 0u, set);
  }
  for (int i = 0; i < t->nnics; i++) {
    topo_format_nic(t, i, line, sizeof line);
    printf("  %s\n", line);
  }
  for (int i = 0; i < t->ngpus; i++) {
    topo_format_gpu(t, i, line, sizeof line);
    printf("  %s\n", line);
  }
  topo_free(t);
  return 0;
}

/* Under a launcher: every rank's lines, printed by rank 0. */
static int info_ranks(void) {
  qcclComm_t comm;
  qcclResult_t r = qcclCommInitFromEnv(&comm);
  if (r != qcclSuccess) return info_fail("qcclCommInitFromEnv", r, qcclGetLastError(NULL));
  int rank = 0, n = 1;
  qcclCommUserRank(comm, &rank);
  qcclCommCount(comm, &n);
  int status = rank == 0 ? info_local() : 0;
  size_t per = INFO_LINES * INFO_LINE_BYTES;
  char* mine = calloc(1, per);
  char* all = rank == 0 ? calloc((size_t)n, per) : NULL;
  if (mine == NULL || (rank == 0 && all == NULL)) {
    fprintf(stderr, "qccl-info: out of memory\n");
    return 1;
  }
  topo_host_t host;
  if (topo_host_query(&host) != qcclSuccess) snprintf(host.id, sizeof host.id, "?");
  snprintf(mine, INFO_LINE_BYTES, "rank %d: host %s", rank, host.id);
  comm_topo_format_rank(comm, mine + INFO_LINE_BYTES, INFO_LINE_BYTES);
  comm_topo_format_paths(comm, 0, mine + 2 * INFO_LINE_BYTES, INFO_LINE_BYTES);
  comm_topo_format_paths(comm, 1, mine + 3 * INFO_LINE_BYTES, INFO_LINE_BYTES);
  r = qcclGather(mine, all, per, qcclInt8, 0, comm, NULL);
  if (r != qcclSuccess) return info_fail("qcclGather", r, qcclGetLastError(comm));
  if (rank == 0) {
    int nnodes = 0;
    qcclCommNodeInfo(comm, NULL, &nnodes, NULL, NULL);
    printf("ranks: %d on %d node%s\n", n, nnodes, nnodes == 1 ? "" : "s");
    printf("rank map:\n");
    for (int i = 0; i < n; i++) printf("  %s\n", all + (size_t)i * per);
    for (int i = 0; i < n; i++) printf("  %s\n", all + (size_t)i * per + INFO_LINE_BYTES);
    printf("path table (host buffers):\n");
    for (int i = 0; i < n; i++)
      printf("  rank %d: %s\n", i, all + (size_t)i * per + 2 * INFO_LINE_BYTES);
    printf("path table (device buffers, by the build; collectives take host buffers only):\n");
    for (int i = 0; i < n; i++)
      printf("  rank %d: %s\n", i, all + (size_t)i * per + 3 * INFO_LINE_BYTES);
    fflush(stdout);
  }
  free(mine);
  free(all);
  r = qcclCommDestroy(comm);
  if (r != qcclSuccess) return info_fail("qcclCommDestroy", r, qcclGetLastError(NULL));
  return status;
}

int main(int argc, char** argv) {
  if (argc > 1) {
    int help = strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0;
    fprintf(help ? stdout : stderr,
            "usage: qccl-info\n"
            "Prints qccl's version, build features and this host's topology; run under\n"
            "qcclrun (or any launcher qcclCommInitFromEnv knows), also the rank map and\n"
            "the path table of every rank.\n");
    return help ? 0 : 2;
  }
  if (getenv("RANK") || getenv("OMPI_COMM_WORLD_RANK") || getenv("SLURM_PROCID"))
    return info_ranks();
  return info_local();
}
