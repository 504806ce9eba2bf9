/*
 * comm_topo.c - the topology of a communicator (comm_topo.h) and the
 * public topology calls: node / rail / leader sub-communicators and the
 * rank-map queries.
 *
 * The sub-communicators are qcclCommSplit with a color and key taken from
 * the rank map, which is identical on every rank, so each rank computes
 * its own color without an exchange:
 *   node     color = node, key = rank      (new rank = local rank)
 *   rail     color = local rank, key = node (new rank = index of the node
 *            among the nodes that have that local rank)
 *   leaders  color = 0 on local rank 0, else none; key = node (new rank =
 *            node)
 * Each costs one split: an all-gather over the parent's bootstrap ring,
 * then the new communicator's own setup.
 */
#include "collectives/comm_topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/check.h"
#include "core/env.h"
#include "core/log.h"
#include "qccl_config.h"
#include "topology/path.h"
#include "topology/rankmap.h"
#include "topology/topo.h"

qcclResult_t comm_topo_build(qcclComm_t c) {
  return topo_rankmap_build(c->node_of, c->nranks, &c->rankmap);
}

void comm_topo_free(qcclComm_t c) {
  topo_rankmap_free(c->rankmap);
  c->rankmap = NULL;
}

qcclResult_t comm_topo_bind_mode(int* mode) {
  topo_bind_t m;
  QCCL_CHECK(topo_bind_parse(&m));
  *mode = (int)m;
  return qcclSuccess;
}

void comm_topo_format_rank(qcclComm_t c, char* buf, size_t len) {
  const topo_rankmap_t* m = c->rankmap;
  int r = c->rank, h = m->node_of[r];
  char peers[256];
  topo_format_ranges(&m->node_ranks[m->node_first[h]], m->node_size[h], peers, sizeof peers);
  snprintf(buf, len,
           "rank %d: node %d of %d, local rank %d of %d (node ranks %s, leader %d); node sizes "
           "%d..%d%s",
           r, h, m->nnodes, m->local_rank[r], m->node_size[h], peers, m->leader[h], m->min_size,
           m->max_size, m->equal ? " (equal)" : " (uneven)");
}

void comm_topo_format_paths(qcclComm_t c, int which, char* buf, size_t len) {
  buf[0] = '\0';
  path_kind_t* kinds = malloc((size_t)c->nranks * sizeof *kinds);
  if (kinds == NULL) return;
  if (which == 0) {
    path_host_row(c->rankmap, c->rank, kinds);
  } else {
    path_device_row(c->rankmap, c->rank, QCCL_HAVE_CUDA, QCCL_HAVE_NCCL, kinds);
  }
  path_format_row(kinds, c->nranks, buf, len);
  free(kinds);
}

void comm_topo_log(qcclComm_t c) {
  if (!log_enabled(LOG_INFO, LOG_TOPO)) return;
  char line[1024];
  comm_topo_format_rank(c, line, sizeof line);
  QCCL_INFO(LOG_TOPO, "comm %s %s", c->name, line);
  comm_topo_format_paths(c, 0, line, sizeof line);
  QCCL_INFO(LOG_TOPO, "comm %s paths of rank %d, host buffers: %s", c->name, c->rank, line);
  comm_topo_format_paths(c, 1, line, sizeof line);
  QCCL_INFO(LOG_TOPO, "comm %s paths of rank %d, device buffers (by the build): %s", c->name,
            c->rank, line);
}

void comm_topo_init(qcclComm_t c, int bind_mode) {
  const char* dump = env_get("QCCL_TOPO_DUMP_FILE");
  if (dump != NULL && *dump == '\0') dump = NULL;
  int info = log_enabled(LOG_INFO, LOG_TOPO);
  if (bind_mode != TOPO_BIND_NONE || dump != NULL || info) {
    topo_t* t = NULL;
    if (topo_load(&t) != qcclSuccess) {
      err_clear(); /* logged at WARN; the communicator stands */
    } else {
      char line[512];
      if (info) {
        topo_format_summary(t, line, sizeof line);
        QCCL_INFO(LOG_TOPO, "host topology: %s", line);
        for (int i = 0; i < t->nnics; i++) {
          topo_format_nic(t, i, line, sizeof line);
          QCCL_INFO(LOG_TOPO, "host topology: %s", line);
        }
        for (int i = 0; i < t->ngpus; i++) {
          topo_format_gpu(t, i, line, sizeof line);
          QCCL_INFO(LOG_TOPO, "host topology: %s", line);
        }
      }
      if (dump != NULL && topo_dump(t, dump) != qcclSuccess) err_clear();
      if (bind_mode != TOPO_BIND_NONE) {
        const topo_rankmap_t* m = c->rankmap;
        int applied = 0, l = m->local_rank[c->rank], L = m->node_size[m->node_of[c->rank]];
        if (topo_bind_apply(t, (topo_bind_t)bind_mode, l, L, &applied, line, sizeof line) ==
            qcclSuccess) {
          if (applied)
            QCCL_INFO(LOG_TOPO, "QCCL_BIND: local rank %d of %d bound to %s", l, L, line);
          else
            QCCL_WARN(LOG_TOPO,
                      "QCCL_BIND=%s not applied: the topology (%s) is not this machine's (would "
                      "bind to %s)",
                      topo_bind_name((topo_bind_t)bind_mode), t->source, line);
        } else {
          err_clear();
        }
      }
      topo_free(t);
    }
  }
  comm_topo_log(c);
}

/* ---- public calls --------------------------------------------------- */

qcclResult_t qcclCommNodeInfo(const qcclComm_t comm, int* node, int* nnodes, int* localRank,
                              int* localSize) {
  QCCL_CHECK(check_comm("qcclCommNodeInfo", comm));
  const topo_rankmap_t* m = comm->rankmap;
  int h = m->node_of[comm->rank];
  if (node) *node = h;
  if (nnodes) *nnodes = m->nnodes;
  if (localRank) *localRank = m->local_rank[comm->rank];
  if (localSize) *localSize = m->node_size[h];
  return qcclSuccess;
}

qcclResult_t qcclCommPeerNode(const qcclComm_t comm, int peer, int* node, int* localRank) {
  QCCL_CHECK(check_comm("qcclCommPeerNode", comm));
  if (peer < 0 || peer >= comm->nranks)
    return QCCL_ERR(qcclInvalidArgument, "peer=%d is outside [0, nranks=%d)", peer, comm->nranks);
  if (node) *node = comm->rankmap->node_of[peer];
  if (localRank) *localRank = comm->rankmap->local_rank[peer];
  return qcclSuccess;
}

qcclResult_t qcclCommNodeSize(const qcclComm_t comm, int node, int* size) {
  QCCL_CHECK(check_comm("qcclCommNodeSize", comm));
  if (node < 0 || node >= comm->rankmap->nnodes)
    return QCCL_ERR(qcclInvalidArgument, "node=%d is outside [0, nnodes=%d)", node,
                    comm->rankmap->nnodes);
  if (size == NULL) return QCCL_ERR(qcclInvalidArgument, "size: NULL pointer");
  *size = comm->rankmap->node_size[node];
  return qcclSuccess;
}

typedef enum { SPLIT_NODE, SPLIT_RAIL, SPLIT_LEADERS } comm_topo_split_t;

static qcclResult_t comm_topo_split(qcclComm_t comm, qcclConfig_t* config, qcclComm_t* newcomm,
                                    comm_topo_split_t kind, const char* what) {
  err_clear();
  const char* fn = kind == SPLIT_NODE   ? "qcclCommSplitNode"
                   : kind == SPLIT_RAIL ? "qcclCommSplitRail"
                                        : "qcclCommSplitLeaders";
  QCCL_CHECK(check_comm(fn, comm));
  if (newcomm == NULL)
    return comm_fail(comm, QCCL_ERR(qcclInvalidArgument, "newcomm: NULL pointer (%s)", what));
  const topo_rankmap_t* m = comm->rankmap;
  int r = comm->rank, color, key;
  switch (kind) {
    case SPLIT_NODE:
      color = m->node_of[r];
      key = r;
      break;
    case SPLIT_RAIL:
      color = m->local_rank[r];
      key = m->node_of[r];
      break;
    default:
      color = m->local_rank[r] == 0 ? 0 : QCCL_SPLIT_NOCOLOR;
      key = m->node_of[r];
      break;
  }
  qcclConfig_t named = QCCL_CONFIG_INITIALIZER;
  char name[sizeof comm->name];
  if (config == NULL) { /* inherit the parent's settings, name the part */
    snprintf(name, sizeof name, "%.40s.%s", comm->name, what);
    named.commName = name;
    config = &named;
  }
  return qcclCommSplit(comm, color, key, newcomm, config);
}

qcclResult_t qcclCommSplitNode(qcclComm_t comm, qcclConfig_t* config, qcclComm_t* newcomm) {
  return comm_topo_split(comm, config, newcomm, SPLIT_NODE, "node");
}

qcclResult_t qcclCommSplitRail(qcclComm_t comm, qcclConfig_t* config, qcclComm_t* newcomm) {
  return comm_topo_split(comm, config, newcomm, SPLIT_RAIL, "rail");
}

qcclResult_t qcclCommSplitLeaders(qcclComm_t comm, qcclConfig_t* config, qcclComm_t* newcomm) {
  return comm_topo_split(comm, config, newcomm, SPLIT_LEADERS, "leaders");
}
