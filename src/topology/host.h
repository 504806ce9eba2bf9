/*
 * host.h - who this host is and how many cores it has.
 *
 * The host identity decides which ranks share memory: hostname plus the
 * kernel's boot id, or QCCL_HOST_ID when set (simulated hosts on one
 * machine share both, so the launcher sets it per host). The core count
 * comes from hwloc (HWLOC_XMLFILE / QCCL_TOPO_FILE replace discovery) and
 * decides how long a rank spins before yielding.
 */
#ifndef QCCL_TOPOLOGY_HOST_H_
#define QCCL_TOPOLOGY_HOST_H_

#include "qccl.h"

#define TOPO_HOST_ID_BYTES 128

typedef struct {
  char id[TOPO_HOST_ID_BYTES]; /* NUL-terminated */
  int ncores;                  /* processing units this process may run on */
} topo_host_t;

qcclResult_t topo_host_query(topo_host_t* out);

#endif /* QCCL_TOPOLOGY_HOST_H_ */
