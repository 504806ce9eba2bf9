/*
 * rankmap.h - the rank map of a communicator: which node each rank is on,
 * its local rank there, the size of every node and its leader.
 *
 * Built from node_of[] (nodes numbered by first appearance in rank order,
 * comm.c), which every rank computed from the same all-gathered host ids:
 * the map is therefore identical on every rank with no further exchange.
 * Ranks of a node need not be contiguous (rank i on node i % 2 is fine) and
 * nodes may hold different numbers of ranks: `equal` says whether they all
 * hold the same, for algorithms that need it.
 *
 *   local_rank[r]  index of rank r among the ranks of its node, by rank
 *   node_size[n]   ranks on node n
 *   leader[n]      the lowest rank of node n (its local rank 0)
 *   node_ranks     the ranks of node n, in rank order, at
 *                  node_ranks[node_first[n] .. node_first[n + 1])
 *
 * The sub-groups a rank belongs to: its node (node_of[r]), its rail (the
 * ranks of local rank local_rank[r], one per node that has that many
 * ranks, ordered by node), and, for local rank 0, the leaders.
 */
#ifndef QCCL_TOPOLOGY_RANKMAP_H_
#define QCCL_TOPOLOGY_RANKMAP_H_

#include <stddef.h>

#include "qccl.h"

typedef struct topo_rankmap {
  int nranks, nnodes;
  int* node_of;    /* [nranks] */
  int* local_rank; /* [nranks] */
  int* node_size;  /* [nnodes] */
  int* leader;     /* [nnodes] */
  int* node_ranks; /* [nranks] */
  int* node_first; /* [nnodes + 1] */
  int min_size, max_size;
  int equal; /* every node holds the same number of ranks */
} topo_rankmap_t;

/* Builds the map of n ranks from node_of[] (values 0 .. nnodes-1, each
 * used, numbered by first appearance); checks that numbering. */
qcclResult_t topo_rankmap_build(const int* node_of, int n, topo_rankmap_t** out);

/* Frees m (NULL is fine). */
void topo_rankmap_free(topo_rankmap_t* m);

/* Rank with local rank l on node n, or -1 if node n has no l. */
int topo_rankmap_rank_at(const topo_rankmap_t* m, int node, int l);

/* Number of nodes holding more than l ranks: the size of rail l. */
int topo_rankmap_rail_size(const topo_rankmap_t* m, int l);

/* Writes "a-b,c,..." for the sorted list of n ints into buf (cut with
 * "..." when it does not fit). */
void topo_format_ranges(const int* v, int n, char* buf, size_t len);

#endif /* QCCL_TOPOLOGY_RANKMAP_H_ */
