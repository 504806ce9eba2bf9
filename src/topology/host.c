/*
 * host.c - host identity and core count (see host.h). hwloc is loaded
 * (without I/O devices) from QCCL_TOPO_FILE or HWLOC_XMLFILE when set
 * (topo.c), else from the machine, once per source and process: the count
 * is kept for the next communicator that reads the same source.
 */
#include "topology/host.h"

#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/env.h"
#include "core/log.h"
#include "topology/topo.h"

static void host_boot_id(char* buf, size_t len) {
  buf[0] = '\0';
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f) return;
  if (fgets(buf, (int)len, f) == NULL) buf[0] = '\0';
  fclose(f);
  buf[strcspn(buf, "\n")] = '\0';
}

/* The processing units of the last load, and where it came from: the
 * variable and file (with the file's size and time), or the machine.
 * Loading hwloc took 3-10 ms on the 2-vCPU guests, and every
 * communicator, split and lane asks (a lane is made by a communicator's
 * second collective); the count of one source does not change. */
static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static char host_src[512];
static int host_npus;

static void host_source(char* buf, size_t len) {
  const char* var = "QCCL_TOPO_FILE";
  const char* file = env_get(var);
  if (file == NULL) file = env_get(var = "HWLOC_XMLFILE");
  struct stat st;
  if (file == NULL)
    snprintf(buf, len, "machine");
  else if (stat(file, &st) == 0)
    snprintf(buf, len, "%s=%s %lld %lld.%09ld", var, file, (long long)st.st_size,
             (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  else
    buf[0] = '\0'; /* unreadable: loaded (and refused) every time */
}

static qcclResult_t host_cores(int* out) {
  char src[sizeof host_src];
  host_source(src, sizeof src);
  pthread_mutex_lock(&host_mu);
  int cached = src[0] != '\0' && host_npus > 0 && strcmp(src, host_src) == 0;
  int n = host_npus;
  pthread_mutex_unlock(&host_mu);
  if (!cached) {
    hwloc_topology_t topo;
    QCCL_CHECK(topo_hwloc_load(0, &topo, NULL, 0));
    n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    hwloc_topology_destroy(topo);
    if (n < 1) n = 1;
    pthread_mutex_lock(&host_mu);
    snprintf(host_src, sizeof host_src, "%s", src);
    host_npus = n;
    pthread_mutex_unlock(&host_mu);
  }
  *out = n;
  return qcclSuccess;
}

qcclResult_t topo_host_query(topo_host_t* out) {
  topo_host_t h;
  memset(&h, 0, sizeof h);
  const char* id = env_get("QCCL_HOST_ID");
  if (id) {
    if (*id == '\0') return QCCL_ERR(qcclInvalidArgument, "QCCL_HOST_ID is set but empty");
    if (strlen(id) >= sizeof h.id)
      return QCCL_ERR(qcclInvalidArgument, "QCCL_HOST_ID is longer than %zu bytes",
                      sizeof h.id - 1);
    snprintf(h.id, sizeof h.id, "%s", id);
  } else {
    char name[64] = "", boot[48] = "";
    gethostname(name, sizeof name - 1);
    host_boot_id(boot, sizeof boot);
    snprintf(h.id, sizeof h.id, "%s/%s", name, boot);
  }
  QCCL_CHECK(host_cores(&h.ncores));
  QCCL_INFO(LOG_TOPO, "host '%s', %d processing units", h.id, h.ncores);
  *out = h;
  return qcclSuccess;
}
