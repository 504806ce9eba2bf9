/*
 * host.c - host identity and core count (see host.h). hwloc is loaded once
 * per communicator (without I/O devices), from QCCL_TOPO_FILE or
 * HWLOC_XMLFILE when set (topo.c), else from the machine.
 */
#include "topology/host.h"

#include <hwloc.h>
#include <stdio.h>
#include <string.h>
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

static qcclResult_t host_cores(int* out) {
  hwloc_topology_t topo;
  QCCL_CHECK(topo_hwloc_load(0, &topo, NULL, 0));
  int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  hwloc_topology_destroy(topo);
  *out = n > 0 ? n : 1;
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
