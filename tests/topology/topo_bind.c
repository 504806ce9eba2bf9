/*
 * topo_bind - qcclrun --bind MODE (QCCL_BIND): after init every rank is
 * bound to object l * n / L of this machine (n cores or NUMA nodes, l of L
 * the local rank), read back with hwloc_get_cpubind. Also checks that
 * qcclrun passed QCCL_BIND=MODE, and that a collective still runs.
 *
 * usage (one rank): topo_bind --mode core|numa
 */
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mr_util.h"

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const char* mode = mr_opt(&t, "--mode");
  if (mode == NULL) mr_die(&t, "--mode core|numa is required");
  mr_case_t c;
  if (mr_case_begin(&t, &c, "bind_%s", mode)) {
    const char* env = getenv("QCCL_BIND");
    if (env == NULL || strcmp(env, mode) != 0)
      mr_case_fail(&c, "QCCL_BIND=%s, expected %s (set by qcclrun --bind)", env ? env : "(unset)",
                   mode);
    int lr = -1, ls = -1;
    MR_OK(&c, qcclCommNodeInfo(t.comm, NULL, NULL, &lr, &ls));
    hwloc_topology_t hw;
    hwloc_topology_init(&hw);
    hwloc_topology_load(hw);
    hwloc_obj_type_t type = strcmp(mode, "core") == 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_NUMANODE;
    int n = hwloc_get_nbobjs_by_type(hw, type);
    int idx = (int)((long long)lr * n / ls);
    hwloc_obj_t o = hwloc_get_obj_by_type(hw, type, (unsigned)idx);
    hwloc_bitmap_t got = hwloc_bitmap_alloc();
    if (o == NULL || hwloc_get_cpubind(hw, got, HWLOC_CPUBIND_PROCESS) != 0) {
      mr_case_fail(&c, "no %s %d, or no cpubind", mode, idx);
    } else {
      char a[128], b[128];
      hwloc_bitmap_list_snprintf(a, sizeof a, got);
      hwloc_bitmap_list_snprintf(b, sizeof b, o->cpuset);
      printf("rank %d (local %d of %d): bound to cpus %s; %s %d has cpus %s\n", t.rank, lr, ls, a,
             mode, idx, b);
      if (!hwloc_bitmap_isequal(got, o->cpuset))
        mr_case_fail(&c, "bound to cpus %s, expected %s %d = cpus %s", a, mode, idx, b);
    }
    hwloc_bitmap_free(got);
    hwloc_topology_destroy(hw);
    int32_t v = 1, sum = 0;
    MR_OK(&c, qcclAllReduce(&v, &sum, 1, qcclInt32, qcclSum, t.comm, NULL));
    if (sum != t.nranks) mr_case_fail(&c, "AllReduce gave %d", sum);
    mr_case_end(&c);
  }
  return mr_finish(&t);
}
