/*
 * bind.c - QCCL_BIND: binds a rank to one core or one NUMA node chosen
 * from its local rank, so ranks of a node spread over the machine
 * (l * n / L of n objects) instead of migrating between cores.
 *
 * Only the CPU binding is set (hwloc_set_cpubind, whole process); memory
 * follows by first touch. A topology read from a file describes another
 * machine, so it is never applied.
 */
#include <errno.h>
#include <stdio.h>
#include <strings.h>

#include "core/env.h"
#include "core/log.h"
#include "topology/topo.h"

qcclResult_t topo_bind_parse(topo_bind_t* out) {
  const char* v = env_get("QCCL_BIND");
  if (v == NULL || strcasecmp(v, "none") == 0)
    *out = TOPO_BIND_NONE;
  else if (strcasecmp(v, "core") == 0)
    *out = TOPO_BIND_CORE;
  else if (strcasecmp(v, "numa") == 0)
    *out = TOPO_BIND_NUMA;
  else
    return QCCL_ERR(qcclInvalidArgument, "QCCL_BIND='%s' is not none, core or numa", v);
  return qcclSuccess;
}

const char* topo_bind_name(topo_bind_t mode) {
  return mode == TOPO_BIND_CORE ? "core" : mode == TOPO_BIND_NUMA ? "numa" : "none";
}

int topo_bind_target(int l, int L, int n) {
  if (n <= 0 || L <= 0 || l < 0 || l >= L) return -1;
  return (int)((long long)l * n / L);
}

int topo_bind_index(const topo_t* t, topo_bind_t mode, int l, int L) {
  if (mode == TOPO_BIND_CORE) return topo_bind_target(l, L, t->ncores);
  if (mode == TOPO_BIND_NUMA) return topo_bind_target(l, L, t->nnuma);
  return -1;
}

qcclResult_t topo_bind_apply(const topo_t* t, topo_bind_t mode, int l, int L, int* applied,
                             char* desc, size_t len) {
  *applied = 0;
  snprintf(desc, len, "none");
  int idx = topo_bind_index(t, mode, l, L);
  if (idx < 0) return qcclSuccess;
  hwloc_obj_type_t type = mode == TOPO_BIND_CORE ? HWLOC_OBJ_CORE : HWLOC_OBJ_NUMANODE;
  hwloc_obj_t o = hwloc_get_obj_by_type(t->hw, type, (unsigned)idx);
  if (o == NULL && mode == TOPO_BIND_CORE) /* no core level: PUs */
    o = hwloc_get_obj_by_type(t->hw, HWLOC_OBJ_PU, (unsigned)idx);
  if (o == NULL || o->cpuset == NULL)
    return QCCL_ERR(qcclInternalError, "QCCL_BIND=%s: no %s %d in the topology",
                    topo_bind_name(mode), topo_bind_name(mode), idx);
  char set[128];
  hwloc_bitmap_list_snprintf(set, sizeof set, o->cpuset);
  snprintf(desc, len, "%s %d (os index %u, cpus %s)", topo_bind_name(mode), idx, o->os_index, set);
  if (!t->thissystem) return qcclSuccess;
  if (hwloc_set_cpubind(t->hw, o->cpuset, HWLOC_CPUBIND_PROCESS) != 0)
    return QCCL_ERRNO(qcclSystemError, errno, "QCCL_BIND=%s: cannot bind to %s",
                      topo_bind_name(mode), desc);
  *applied = 1;
  return qcclSuccess;
}
