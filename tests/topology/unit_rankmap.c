/*
 * unit_rankmap - the rank map (src/topology/rankmap.c) and the path table
 * rules (path.c) against a reference written here from the definitions:
 * fixed placements (contiguous, interleaved, uneven, one rank per node,
 * one node) and random ones from a printed seed (argument 1 or the clock).
 * The reference numbers hosts by first appearance and, for each rank,
 * counts the lower ranks on its host.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "topology/path.h"
#include "topology/rankmap.h"

#include "expect.h"

/* Checks the map of hosts host[0..n) (any labels) against the reference. */
static void check_placement(const int* host, int n, const char* what) {
  int* node = malloc((size_t)n * sizeof *node);
  int nnodes = 0;
  for (int r = 0; r < n; r++) { /* first appearance */
    node[r] = -1;
    for (int q = 0; q < r && node[r] < 0; q++)
      if (host[q] == host[r]) node[r] = node[q];
    if (node[r] < 0) node[r] = nnodes++;
  }
  topo_rankmap_t* m = NULL;
  if (topo_rankmap_build(node, n, &m) != qcclSuccess) {
    EXPECT(0, "%s: build failed: %s", what, err_last());
    free(node);
    return;
  }
  EXPECT(m->nranks == n && m->nnodes == nnodes, "%s: %d ranks %d nodes", what, m->nranks,
         m->nnodes);
  int mn = n, mx = 0;
  for (int h = 0; h < nnodes; h++) {
    int size = 0, leader = -1;
    for (int r = 0; r < n; r++)
      if (node[r] == h) {
        if (leader < 0) leader = r;
        size++;
      }
    mn = size < mn ? size : mn;
    mx = size > mx ? size : mx;
    EXPECT(m->node_size[h] == size, "%s: node %d size %d, expected %d", what, h, m->node_size[h],
           size);
    EXPECT(m->leader[h] == leader, "%s: node %d leader %d, expected %d", what, h, m->leader[h],
           leader);
    for (int l = 0, r = 0; r < n; r++)
      if (node[r] == h) {
        EXPECT(topo_rankmap_rank_at(m, h, l) == r, "%s: node %d local %d is %d, expected %d", what,
               h, l, topo_rankmap_rank_at(m, h, l), r);
        l++;
      }
    EXPECT(topo_rankmap_rank_at(m, h, size) == -1, "%s: past the node", what);
  }
  EXPECT(m->min_size == mn && m->max_size == mx && m->equal == (mn == mx), "%s: sizes", what);
  for (int r = 0; r < n; r++) {
    int l = 0;
    for (int q = 0; q < r; q++) l += node[q] == node[r];
    EXPECT(m->node_of[r] == node[r], "%s: rank %d node", what, r);
    EXPECT(m->local_rank[r] == l, "%s: rank %d local rank %d, expected %d", what, r,
           m->local_rank[r], l);
  }
  for (int l = 0; l <= mx; l++) {
    int k = 0;
    for (int h = 0; h < nnodes; h++) {
      int size = 0;
      for (int r = 0; r < n; r++) size += node[r] == h;
      k += size > l;
    }
    EXPECT(topo_rankmap_rail_size(m, l) == k, "%s: rail %d size %d, expected %d", what, l,
           topo_rankmap_rail_size(m, l), k);
  }
  /* device paths: self, same node, other node */
  path_kind_t* kinds = malloc((size_t)n * sizeof *kinds);
  for (int cuda = 0; cuda < 2; cuda++)
    for (int nccl = 0; nccl < 2; nccl++) {
      int r = n / 2;
      path_device_row(m, r, cuda, nccl, kinds);
      for (int q = 0; q < n; q++) {
        path_kind_t want = q == r               ? PATH_SELF
                           : node[q] == node[r] ? (cuda   ? PATH_CUDA_IPC
                                                   : nccl ? PATH_NCCL
                                                          : PATH_SHM)
                           : nccl               ? PATH_NCCL
                                                : PATH_UCX;
        EXPECT(kinds[q] == want, "%s: device path %d->%d (cuda %d nccl %d) is %s", what, r, q, cuda,
               nccl, path_kind_name(kinds[q]));
      }
    }
  free(kinds);
  topo_rankmap_free(m);
  free(node);
}

static void check_formats(void) {
  char buf[64];
  int v[] = {0, 1, 2, 4, 6, 7};
  topo_format_ranges(v, 6, buf, sizeof buf);
  EXPECT(strcmp(buf, "0-2,4,6-7") == 0, "ranges '%s'", buf);
  topo_format_ranges(v, 0, buf, sizeof buf);
  EXPECT(strcmp(buf, "") == 0, "empty ranges '%s'", buf);
  int many[40];
  for (int i = 0; i < 40; i++) many[i] = 3 * i;
  topo_format_ranges(many, 40, buf, 32);
  EXPECT(strlen(buf) < 32 && strstr(buf, "...") != NULL, "cut ranges '%s'", buf);
  path_kind_t row[] = {PATH_SHM, PATH_UCX, PATH_SELF, PATH_SHM, PATH_UCX, PATH_UCX};
  path_format_row(row, 6, buf, sizeof buf);
  EXPECT(strcmp(buf, "self 2; shm 0,3; ucx 1,4-5") == 0, "row '%s'", buf);
  EXPECT(strcmp(path_kind_name(PATH_CUDA_IPC), "cuda_ipc") == 0, "name");
  /* node_of not numbered by first appearance is refused */
  int bad[] = {1, 0};
  topo_rankmap_t* m = NULL;
  EXPECT(topo_rankmap_build(bad, 2, &m) == qcclInternalError && m == NULL, "bad numbering");
}

int main(int argc, char** argv) {
  uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)time(NULL);
  printf("seed %llu (rerun: %s %llu)\n", (unsigned long long)seed, argv[0],
         (unsigned long long)seed);
  static const struct {
    const char* what;
    int n;
    int host[8];
  } fixed[] = {{"1 rank", 1, {0}},
               {"one node x4", 4, {7, 7, 7, 7}},
               {"2x2 contiguous", 4, {0, 0, 1, 1}},
               {"2x2 interleaved", 4, {0, 1, 0, 1}},
               {"3x2 contiguous", 6, {0, 0, 1, 1, 2, 2}},
               {"3x2 interleaved", 6, {0, 1, 2, 0, 1, 2}},
               {"2+3", 5, {0, 0, 1, 1, 1}},
               {"2+3 interleaved", 5, {0, 1, 1, 0, 1}},
               {"1+3+2, rank 0 on host 1", 6, {1, 0, 0, 2, 0, 2}},
               {"one rank per node", 5, {4, 3, 2, 1, 0}}};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    check_placement(fixed[i].host, fixed[i].n, fixed[i].what);
  uint64_t s = seed;
  for (int k = 0; k < 500; k++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    int n = 1 + (int)((s >> 33) % 64);
    int hosts = 1 + (int)((s >> 17) % 9);
    int host[64];
    for (int r = 0; r < n; r++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      host[r] = (int)((s >> 33) % (uint64_t)hosts);
    }
    char what[64];
    snprintf(what, sizeof what, "random placement %d (seed %llu)", k, (unsigned long long)seed);
    check_placement(host, n, what);
  }
  check_formats();
  printf("%s: %d failure%s\n", failures ? "FAILED" : "passed", failures, failures == 1 ? "" : "s");
  return failures ? 1 : 0;
}
