/*
 * path.c - the path table's rules and its one-line format (see path.h).
 */
#include "topology/path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char* path_kind_name(path_kind_t k) {
  static const char* const names[PATH_NUM_KINDS] = {"self", "shm", "ucx", "cuda_ipc", "nccl"};
  return (unsigned)k < PATH_NUM_KINDS ? names[k] : "?";
}

path_kind_t path_host_kind(int self, int same_node) {
  return self ? PATH_SELF : same_node ? PATH_SHM : PATH_UCX;
}

void path_host_row(const topo_rankmap_t* map, int rank, path_kind_t* kinds) {
  for (int i = 0; i < map->nranks; i++)
    kinds[i] = path_host_kind(i == rank, map->node_of[i] == map->node_of[rank]);
}

path_kind_t path_device_kind(int self, int same_node, int have_cuda, int have_nccl) {
  if (self) return PATH_SELF;
  if (same_node) return have_cuda ? PATH_CUDA_IPC : have_nccl ? PATH_NCCL : PATH_SHM;
  return have_nccl ? PATH_NCCL : PATH_UCX;
}

void path_device_row(const topo_rankmap_t* map, int rank, int have_cuda, int have_nccl,
                     path_kind_t* kinds) {
  for (int i = 0; i < map->nranks; i++)
    kinds[i] =
        path_device_kind(i == rank, map->node_of[i] == map->node_of[rank], have_cuda, have_nccl);
}

void path_format_row(const path_kind_t* kinds, int n, char* buf, size_t len) {
  size_t k = 0;
  if (len == 0) return;
  buf[0] = '\0';
  int* peers = malloc((size_t)(n > 0 ? n : 1) * sizeof *peers);
  if (peers == NULL) return;
  for (int kind = 0; kind < PATH_NUM_KINDS && k + 1 < len; kind++) {
    int m = 0;
    for (int i = 0; i < n; i++)
      if (kinds[i] == (path_kind_t)kind) peers[m++] = i;
    if (m == 0) continue;
    int w = snprintf(buf + k, len - k, "%s%s ", k ? "; " : "", path_kind_name((path_kind_t)kind));
    if (w < 0 || (size_t)w >= len - k) break;
    k += (size_t)w;
    topo_format_ranges(peers, m, buf + k, len - k);
    k += strlen(buf + k);
  }
  free(peers);
}
