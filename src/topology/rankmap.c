/*
 * rankmap.c - the rank map (see rankmap.h): pure functions of node_of[],
 * O(ranks + nodes) time and memory.
 */
#include "topology/rankmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

void topo_rankmap_free(topo_rankmap_t* m) {
  if (m == NULL) return;
  free(m->node_of);
  free(m->local_rank);
  free(m->node_size);
  free(m->leader);
  free(m->node_ranks);
  free(m->node_first);
  free(m);
}

qcclResult_t topo_rankmap_build(const int* node_of, int n, topo_rankmap_t** out) {
  if (node_of == NULL || n < 1) return QCCL_ERR(qcclInternalError, "rank map of %d ranks", n);
  int nnodes = 0;
  for (int r = 0; r < n; r++) {
    if (node_of[r] < 0 || node_of[r] > nnodes)
      return QCCL_ERR(qcclInternalError, "rank map: rank %d on node %d, not numbered in order", r,
                      node_of[r]);
    if (node_of[r] == nnodes) nnodes++;
  }
  topo_rankmap_t* m = calloc(1, sizeof *m);
  if (m == NULL) return QCCL_ERR(qcclSystemError, "out of memory (rank map)");
  size_t w = (size_t)n, k = (size_t)nnodes;
  m->nranks = n;
  m->nnodes = nnodes;
  m->node_of = malloc(w * sizeof *m->node_of);
  m->local_rank = malloc(w * sizeof *m->local_rank);
  m->node_size = calloc(k, sizeof *m->node_size);
  m->leader = malloc(k * sizeof *m->leader);
  m->node_ranks = malloc(w * sizeof *m->node_ranks);
  m->node_first = calloc(k + 1, sizeof *m->node_first);
  if (!m->node_of || !m->local_rank || !m->node_size || !m->leader || !m->node_ranks ||
      !m->node_first) {
    topo_rankmap_free(m);
    return QCCL_ERR(qcclSystemError, "out of memory (rank map of %d ranks)", n);
  }
  memcpy(m->node_of, node_of, w * sizeof *node_of);
  for (int r = 0; r < n; r++) {
    int h = node_of[r];
    if (m->node_size[h] == 0) m->leader[h] = r;
    m->local_rank[r] = m->node_size[h]++;
  }
  for (int h = 0; h < nnodes; h++) m->node_first[h + 1] = m->node_first[h] + m->node_size[h];
  for (int r = 0; r < n; r++) m->node_ranks[m->node_first[node_of[r]] + m->local_rank[r]] = r;
  m->min_size = m->max_size = m->node_size[0];
  for (int h = 1; h < nnodes; h++) {
    if (m->node_size[h] < m->min_size) m->min_size = m->node_size[h];
    if (m->node_size[h] > m->max_size) m->max_size = m->node_size[h];
  }
  m->equal = m->min_size == m->max_size;
  *out = m;
  return qcclSuccess;
}

int topo_rankmap_rank_at(const topo_rankmap_t* m, int node, int l) {
  if (node < 0 || node >= m->nnodes || l < 0 || l >= m->node_size[node]) return -1;
  return m->node_ranks[m->node_first[node] + l];
}

int topo_rankmap_rail_size(const topo_rankmap_t* m, int l) {
  int k = 0;
  for (int h = 0; h < m->nnodes; h++) k += m->node_size[h] > l;
  return k;
}

void topo_format_ranges(const int* v, int n, char* buf, size_t len) {
  size_t k = 0;
  if (len == 0) return;
  buf[0] = '\0';
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && v[j + 1] == v[j] + 1) j++;
    char item[32];
    if (j == i)
      snprintf(item, sizeof item, "%s%d", i ? "," : "", v[i]);
    else
      snprintf(item, sizeof item, "%s%d-%d", i ? "," : "", v[i], v[j]);
    size_t il = strlen(item);
    if (k + il + 4 >= len) {
      snprintf(buf + k, len - k, "...");
      return;
    }
    memcpy(buf + k, item, il + 1);
    k += il;
    i = j + 1;
  }
}
