/*
 * comm.c - communicator lifecycle: unique id, init from an id (the
 * launcher's environment is comm_env.c), split, finalize, destroy, abort,
 * failure and queries.
 *
 * Init: join the bootstrap (rendezvous + ring), exchange each rank's host
 * identity and pid, check that all ranks share one host (the inter-node
 * transport comes with UCX), then create / attach the node's shared-memory
 * segment. Split reuses the parent's bootstrap to form the new ring, then
 * does the same. A failure at any step unwinds what was made and leaves the
 * message in qcclGetLastError(NULL).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "collectives/algo_env.h"
#include "collectives/check.h"
#include "collectives/coll.h"
#include "collectives/comm_init.h"
#include "collectives/comm_topo.h"
#include "collectives/engine.h"
#include "collectives/plan.h"
#include "core/stream.h"
#include "core/env.h"
#include "core/launch.h"
#include "core/log.h"
#include "qccl_config.h"
#include "topology/host.h"
#include "topology/path.h"
#include "topology/rankmap.h"
#if QCCL_HAVE_UCX
#include "transport/ucx.h"
#endif

#define COMM_DEFAULT_TIMEOUT 600.0

typedef struct {
  char host[TOPO_HOST_ID_BYTES];
  int32_t pid;
  int32_t ncores;
  int64_t oneshot; /* QCCL_ALLREDUCE_ONESHOT_BYTES, -1 unset: rank 0's counts */
  int64_t lanes;   /* QCCL_LANES: rank 0's counts */
} comm_peer_info_t;

qcclResult_t qcclGetVersion(int* version) {
  if (version == NULL) return QCCL_ERR(qcclInvalidArgument, "version: NULL pointer");
  *version = QCCL_VERSION_CODE;
  return qcclSuccess;
}

qcclResult_t comm_timeout(const qcclConfig_t* config, double* out) {
  double t;
  QCCL_CHECK(env_get_seconds("QCCL_TIMEOUT", COMM_DEFAULT_TIMEOUT, &t));
  if (config && config->timeoutSec != QCCL_CONFIG_UNDEF_INT) {
    if (config->timeoutSec <= 0)
      return QCCL_ERR(qcclInvalidArgument, "config->timeoutSec=%d must be positive",
                      config->timeoutSec);
    t = config->timeoutSec;
  }
  *out = t;
  return qcclSuccess;
}

static qcclResult_t comm_check_config(const qcclConfig_t* config) {
  if (config == NULL) return qcclSuccess;
  if (config->magic != QCCL_CONFIG_MAGIC || config->size != sizeof(qcclConfig_t))
    return QCCL_ERR(qcclInvalidArgument,
                    "config: not initialised with QCCL_CONFIG_INITIALIZER (size %zu, magic %#x)",
                    config->size, config->magic);
  if (config->blocking != QCCL_CONFIG_UNDEF_INT && config->blocking != 1)
    return QCCL_ERR(qcclInvalidArgument,
                    "config->blocking=%d: only blocking communicators are supported",
                    config->blocking);
  return qcclSuccess;
}

/* A new rendezvous: a fresh random secret and a root listener on the
 * interface sock_pick_interface() chooses (QCCL_SOCKET_IFNAME). Used by
 * qcclGetUniqueId and by rank 0 of a PMIx job. */
qcclResult_t comm_new_root(double timeout, boot_id_t* id) {
  memset(id, 0, sizeof *id);
  QCCL_CHECK(boot_random(id->secret, sizeof id->secret));
  sock_addr_t a;
  QCCL_CHECK(sock_pick_interface(&a));
  return boot_root_start(&a, id->secret, timeout, &id->root);
}

qcclResult_t qcclGetUniqueId(qcclUniqueId* uniqueId) {
  err_clear();
  if (uniqueId == NULL) return QCCL_ERR(qcclInvalidArgument, "uniqueId: NULL pointer");
  double timeout = 0;
  QCCL_CHECK(comm_timeout(NULL, &timeout));
  boot_id_t id;
  QCCL_CHECK(comm_new_root(timeout, &id));
  boot_id_pack(&id, uniqueId);
  return qcclSuccess;
}

/* Frees whatever of c exists (also a half-built one). */
static void comm_free_parts(qcclComm_t c, int abort) {
  plan_cache_free(c);
  for (int k = 1; k < COMM_MAX_LANES; k++)
    if (c->lane[k]) {
      c->lane[k]->magic = COMM_DEAD;
      comm_free_parts(c->lane[k], abort || c->async_error != qcclSuccess);
    }
  if (c->rail) {
    c->rail->magic = COMM_DEAD;
    comm_free_parts(c->rail, abort);
  }
  if (c->node) {
    c->node->magic = COMM_DEAD;
    comm_free_parts(c->node, abort);
  } else {
    shm_close(c->shm);
  }
#if QCCL_HAVE_UCX
  ucx_close(c->ucx, abort || c->async_error != qcclSuccess);
#endif
  /* in good order (a destroy of a healthy communicator): the previous rank
   * of the ring may still be finishing the last exchange, and must not take
   * this rank's leaving for a failure */
  boot_close(c->boot, !abort && atomic_load(&c->async_error) == qcclSuccess);
  free(c->peer_ops);
  free(c->peer_ctx);
  free(c->peer_idx);
  free(c->node_of);
  comm_topo_free(c);
  for (int i = 0; i < 3; i++) free(c->scratch[i]);
  free(c->check_recs);
  zpp_comm_free(c->zero);
  free(c);
}

qcclResult_t comm_scratch(qcclComm_t comm, int which, size_t bytes, void** out) {
  if (bytes > comm->scratch_bytes[which]) {
    void* p = realloc(comm->scratch[which], bytes);
    if (!p) return QCCL_ERR(qcclSystemError, "out of memory (%zu bytes of scratch)", bytes);
    comm->scratch[which] = p;
    comm->scratch_bytes[which] = bytes;
  }
  *out = comm->scratch[which];
  return qcclSuccess;
}

/* QCCL_ALGO (collectives/algo_env.c). */
static qcclResult_t comm_parse_algo(qcclComm_t c) {
  const char* v = env_get("QCCL_ALGO");
  return v == NULL ? qcclSuccess : coll_algo_parse(v, c->algo);
}

/* Numbers the hosts by first appearance: node_of[i] for every rank. */
static int comm_place(comm_peer_info_t* peers, int n, int* node_of) {
  int nnodes = 0;
  for (int i = 0; i < n; i++) {
    peers[i].host[sizeof peers[i].host - 1] = '\0';
    node_of[i] = -1;
    for (int j = 0; j < i && node_of[i] < 0; j++)
      if (strcmp(peers[i].host, peers[j].host) == 0) node_of[i] = node_of[j];
    if (node_of[i] < 0) node_of[i] = nnodes++;
  }
  return nnodes;
}

static qcclResult_t comm_build(bootstrap_t* boot, double timeout, const qcclConfig_t* config,
                               qcclComm_t like, qcclComm_t* out);

/* Connects every peer through the transport the path table names for it
 * (topology/path.c): the node's segment (peer index: its local rank), or
 * UCX (peer index: its rank). */
static void comm_connect_paths(qcclComm_t c, const path_kind_t* kinds) {
  shm_t* s = c->node ? c->node->shm : c->shm;
  for (int i = 0; i < c->nranks; i++) {
    if (kinds[i] == PATH_UCX) {
#if QCCL_HAVE_UCX
      c->peer_ops[i] = &ucx_p2p_ops;
      c->peer_ctx[i] = c->ucx;
      c->peer_idx[i] = i;
#endif
    } else {
      c->peer_ops[i] = &shm_p2p_ops;
      c->peer_ctx[i] = s;
      c->peer_idx[i] = c->rankmap->local_rank[i];
    }
  }
}

/* Transports of a communicator on one host: everything through its segment
 * (like: comm_build's). */
static qcclResult_t comm_connect_local(qcclComm_t c, const path_kind_t* kinds, qcclComm_t like) {
  QCCL_CHECK(shm_open_segment(c->boot, c->timeout, c->ncores, like ? like->shm : NULL, &c->shm));
  c->spin = c->shm->spin;
  comm_connect_paths(c, kinds);
  return qcclSuccess;
}

/* Transports of a communicator across hosts: the ranks of this host form an
 * internal node communicator (shared memory); the others are reached
 * through UCX (like: comm_build's). */
static qcclResult_t comm_connect_remote(qcclComm_t c, const comm_peer_info_t* peers,
                                        const path_kind_t* kinds, const qcclConfig_t* config,
                                        qcclComm_t like) {
#if QCCL_HAVE_UCX
  bootstrap_t* nb;
  QCCL_CHECK(boot_split(c->boot, c->node_of[c->rank], c->rank, &nb));
  QCCL_CHECK(comm_build(nb, c->timeout, config, like ? like->node : NULL, &c->node));
  int* remote = calloc((size_t)c->nranks, sizeof *remote);
  if (!remote) return QCCL_ERR(qcclSystemError, "out of memory");
  for (int i = 0; i < c->nranks; i++) remote[i] = kinds[i] == PATH_UCX;
  qcclResult_t r = ucx_open(c->boot, remote, c->timeout, &c->ucx);
  free(remote);
  if (r != qcclSuccess) return r;
  if (c->node->shm) {
    c->node->shm->watch = coll_agree_watch;
    c->node->shm->watch_arg = c;
  }
  /* equal numbers of ranks per host: the rail of this local index */
  if (c->rankmap->equal && c->node->nranks > 1) {
    bootstrap_t* rb;
    QCCL_CHECK(boot_split(c->boot, c->node->rank, c->node_of[c->rank], &rb));
    QCCL_CHECK(comm_build(rb, c->timeout, config, like ? like->rail : NULL, &c->rail));
  }
  c->spin = c->node->spin;
  comm_connect_paths(c, kinds);
  (void)peers;
  return qcclSuccess;
#else
  (void)config;
  (void)kinds;
  (void)like;
  int other = 0;
  while (c->node_of[other] == c->node_of[0]) other++;
  return QCCL_ERR(qcclInvalidUsage,
                  "ranks span several hosts (rank 0 on '%s', rank %d on '%s'), but this build of "
                  "qccl has no inter-node transport (build with UCX: libucx-dev)",
                  peers[0].host, other, peers[other].host);
#endif
}

/* Everything after the bootstrap: placement, shared memory, UCX. Takes
 * ownership of boot. like: NULL, or a communicator of the same ranks whose
 * segments' single-copy decisions the new one's take (a lane: its
 * communicator; comm_lane_make). */
static qcclResult_t comm_build(bootstrap_t* boot, double timeout, const qcclConfig_t* config,
                               qcclComm_t like, qcclComm_t* out) {
  qcclResult_t r;
  comm_peer_info_t* peers = NULL;
  path_kind_t* kinds = NULL;
  qcclComm_t c = calloc(1, sizeof *c);
  if (!c) {
    boot_close(boot, 0);
    return QCCL_ERR(qcclSystemError, "out of memory");
  }
  engine_comm_init(c);
  c->boot = boot;
  c->rank = boot_rank(boot);
  c->nranks = boot_nranks(boot);
  c->timeout = timeout;
  snprintf(c->name, sizeof c->name, "%s", config && config->commName ? config->commName : "qccl");
  size_t w = (size_t)c->nranks;
  peers = calloc(w, sizeof *peers);
  c->peer_ops = calloc(w, sizeof *c->peer_ops);
  c->peer_ctx = calloc(w, sizeof *c->peer_ctx);
  c->peer_idx = calloc(w, sizeof *c->peer_idx);
  c->node_of = calloc(w, sizeof *c->node_of);
  if (!peers || !c->peer_ops || !c->peer_ctx || !c->peer_idx || !c->node_of) {
    r = QCCL_ERR(qcclSystemError, "out of memory");
    goto fail;
  }
  topo_host_t host;
  QCCL_CHECK_GOTO(topo_host_query(&host), r, fail);
  comm_peer_info_t* me = &peers[c->rank];
  memcpy(me->host, host.id, sizeof me->host);
  me->pid = (int32_t)getpid();
  me->ncores = host.ncores;
  c->ncores = host.ncores;
  me->oneshot = -1;
  if (env_get("QCCL_ALLREDUCE_ONESHOT_BYTES") != NULL)
    QCCL_CHECK_GOTO(
        env_get_size("QCCL_ALLREDUCE_ONESHOT_BYTES", 0, 0, (int64_t)1 << 30, &me->oneshot), r,
        fail);
  me->lanes = 2;
  QCCL_CHECK_GOTO(env_get_size("QCCL_LANES", 2, 1, COMM_MAX_LANES, &me->lanes), r, fail);
  QCCL_CHECK_GOTO(boot_allgather(boot, peers, sizeof *peers), r, fail);
  /* every rank must pick the same AllReduce path and lanes: rank 0's
   * values hold */
  c->oneshot_bytes = peers[0].oneshot;
  c->nlanes = (int)peers[0].lanes;
  c->nnodes = comm_place(peers, c->nranks, c->node_of);
  /* the fewest cores any rank of this host saw: algorithms that size
   * themselves by the cores (reduce.c) must choose alike on every rank */
  for (int j = 0; j < c->nranks; j++)
    if (c->node_of[j] == c->node_of[c->rank] && peers[j].ncores < c->ncores)
      c->ncores = peers[j].ncores;
  QCCL_CHECK_GOTO(comm_topo_build(c), r, fail);
  QCCL_CHECK_GOTO(comm_parse_algo(c), r, fail);
  kinds = malloc(w * sizeof *kinds);
  if (kinds == NULL) {
    r = QCCL_ERR(qcclSystemError, "out of memory");
    goto fail;
  }
  path_host_row(c->rankmap, c->rank, kinds);
  if (c->nnodes == 1)
    QCCL_CHECK_GOTO(comm_connect_local(c, kinds, like), r, fail);
  else
    QCCL_CHECK_GOTO(comm_connect_remote(c, peers, kinds, config, like), r, fail);
  QCCL_CHECK_GOTO(coll_agree_init(c), r, fail);
  c->stats_own.cur = -1;
  coll_stats_attach(c, &c->stats_own);
  if (c->node) c->node->top = c; /* their waits check this one's abort */
  if (c->rail) c->rail->top = c;
  c->magic = COMM_MAGIC;
  QCCL_INFO(LOG_INIT, "comm %s rank %d/%d pid %d on node %d of %d ready (timeout %.0f s)", c->name,
            c->rank, c->nranks, (int)getpid(), c->node_of[c->rank], c->nnodes, timeout);
  free(peers);
  free(kinds);
  *out = c;
  return qcclSuccess;
fail:
  free(peers);
  free(kinds);
  comm_free_parts(c, 1);
  return r;
}

qcclResult_t comm_init(qcclComm_t* comm, int nranks, const boot_id_t* id, int rank,
                       const qcclConfig_t* config) {
  double timeout = 0;
  QCCL_CHECK(comm_check_config(config));
  QCCL_CHECK(comm_timeout(config, &timeout));
  log_write(LOG_VERSION, LOG_INIT, "qccl version %s", QCCL_VERSION_STRING);
  int bind_mode;
  QCCL_CHECK(comm_topo_bind_mode(&bind_mode));
  bootstrap_t* boot;
  QCCL_CHECK(boot_init(id, rank, nranks, timeout, &boot));
  QCCL_CHECK(comm_build(boot, timeout, config, NULL, comm));
  comm_topo_init(*comm, bind_mode);
  /* after the binding: the turn warms the cores the ranks stay on */
  qcclResult_t r = comm_warm(*comm, 1);
  if (r != qcclSuccess) {
    comm_free_parts(*comm, 1);
    *comm = NULL;
  }
  return r;
}

static qcclResult_t comm_check_init_args(qcclComm_t* comm, int nranks, int rank) {
  if (comm == NULL) return QCCL_ERR(qcclInvalidArgument, "comm: NULL pointer");
  if (nranks < 1) return QCCL_ERR(qcclInvalidArgument, "nranks=%d must be at least 1", nranks);
  if (rank < 0 || rank >= nranks)
    return QCCL_ERR(qcclInvalidArgument, "rank=%d is outside [0, nranks=%d)", rank, nranks);
  return qcclSuccess;
}

qcclResult_t qcclCommInitRankConfig(qcclComm_t* comm, int nranks, qcclUniqueId commId, int rank,
                                    qcclConfig_t* config) {
  err_clear();
  QCCL_CHECK(comm_check_init_args(comm, nranks, rank));
  boot_id_t id;
  QCCL_CHECK(boot_id_unpack(&commId, &id));
  return comm_init(comm, nranks, &id, rank, config);
}

qcclResult_t qcclCommInitRank(qcclComm_t* comm, int nranks, qcclUniqueId commId, int rank) {
  return qcclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

/* ---- split, teardown, queries ------------------------------------------ */

qcclResult_t qcclCommSplit(qcclComm_t comm, int color, int key, qcclComm_t* newcomm,
                           qcclConfig_t* config) {
  err_clear();
  QCCL_CHECK(check_comm("qcclCommSplit", comm));
  if (newcomm == NULL) return comm_fail(comm, QCCL_ERR(qcclInvalidArgument, "newcomm: NULL"));
  if (comm->async_error != qcclSuccess) return comm->async_error;
  qcclResult_t r = comm_check_config(config);
  if (r != qcclSuccess) return comm_fail(comm, r);
  double timeout = comm->timeout;
  if (config && config->timeoutSec != QCCL_CONFIG_UNDEF_INT) {
    r = comm_timeout(config, &timeout);
    if (r != qcclSuccess) return comm_fail(comm, r);
  }
  /* the calls issued before: one may be making a lane over the bootstrap */
  engine_comm_drain(comm);
  bootstrap_t* nb;
  r = boot_split(comm->boot, color, key, &nb);
  if (r != qcclSuccess) return comm_fail(comm, r);
  if (nb == NULL) {
    *newcomm = NULL;
    return qcclSuccess;
  }
  qcclConfig_t inherit = QCCL_CONFIG_INITIALIZER;
  if (config == NULL) {
    inherit.commName = comm->name;
    config = &inherit;
  }
  r = comm_build(nb, timeout, config, NULL, newcomm);
  if (r == qcclSuccess) {
    comm_topo_log(*newcomm);
    r = comm_warm(*newcomm, 1);
    if (r != qcclSuccess) {
      comm_free_parts(*newcomm, 1);
      *newcomm = NULL;
    }
  }
  return r == qcclSuccess ? r : comm_fail(comm, r);
}

qcclResult_t comm_lane_make(qcclComm_t c, int k) {
  bootstrap_t* nb;
  QCCL_CHECK(boot_split(c->boot, 0, c->rank, &nb));
  char name[96];
  snprintf(name, sizeof name, "%s.lane%d", c->name, k);
  qcclConfig_t config = QCCL_CONFIG_INITIALIZER;
  config.commName = name;
  qcclComm_t l;
  /* single copy as lane 0 decided at init (cma.h, cma_probe's like) */
  QCCL_CHECK(comm_build(nb, c->timeout, &config, c, &l));
  l->nlanes = 1;
  l->top = c; /* its waits check c's abort */
  if (l->node) l->node->top = c;
  if (l->rail) l->rail->top = c;
  /* sends and receives run on lane 0 only: the places alone */
  qcclResult_t r = comm_warm(l, 0);
  if (r != qcclSuccess) {
    comm_free_parts(l, 1);
    return r;
  }
  __atomic_store_n(&c->lane[k], l, __ATOMIC_RELEASE);
  /* c failed or was aborted while the lane was made: its waits must see it */
  if (comm_aborted(c) || atomic_load(&c->peers_told)) comm_abort_segments(c);
  QCCL_INFO(LOG_COLL, "comm %s rank %d: lane %d made (collectives %d, %d+%d, ... run on it)",
            c->name, c->rank, k, k, k, c->nlanes);
  /* making this lane (tens of ms: a segment mapped and populated) pushed
   * the other lanes' places out of the cache: they take their turn again.
   * The call making a lane runs alone (engine.c), so no collective is on
   * them; lane 0's rings (sends run there) are touched, not used: a send
   * that completed eagerly may still wait there for its receive. */
  for (int j = 0; j < COMM_MAX_LANES; j++) {
    qcclComm_t o = comm_lane_at(c, j);
    if (j != k && o != NULL) QCCL_CHECK(comm_warm(o, j == 0));
  }
  return qcclSuccess;
}

qcclResult_t comm_fail(qcclComm_t comm, qcclResult_t res) {
  if (res == qcclSuccess || comm == NULL || comm->magic != COMM_MAGIC) return res;
  snprintf(comm->last_error, sizeof comm->last_error, "%s", err_last());
  if (res == qcclTimeout || res == qcclRemoteError || res == qcclSystemError ||
      res == qcclInternalError) {
    if (comm->async_error == qcclSuccess) comm->async_error = res;
    shm_t* s = comm->node ? comm->node->shm : comm->shm;
    if (s) shm_set_abort(s);
  }
  return res;
}

qcclResult_t comm_usable(const char* fn, qcclComm_t c) {
  if (comm_aborted(c))
    return QCCL_ERR(qcclRemoteError, "%s: communicator %s was aborted (qcclCommAbort)", fn,
                    c->top->name);
  qcclResult_t e = atomic_load(&c->async_error);
  if (e != qcclSuccess) {
    atomic_store(&c->top->tell_asked, 1); /* told as the turn ends */
    return QCCL_ERR(e, "%s: comm failed before (%s)%s%s", fn, qcclGetErrorString(e),
                    c->top->fail_reason[0] ? ": " : "", c->top->fail_reason);
  }
  return qcclSuccess;
}

void comm_abort_segments(qcclComm_t c) {
  for (int k = 0; k < COMM_MAX_LANES; k++) {
    qcclComm_t l = comm_lane_at(c, k);
    if (l == NULL) continue;
    shm_t* s = l->node ? l->node->shm : l->shm;
    if (s) shm_set_abort(s);
  }
}

void comm_tell_peers(qcclComm_t comm) {
  if (atomic_exchange(&comm->peers_told, 1)) return;
  comm_abort_segments(comm);
#if QCCL_HAVE_UCX
  for (int k = 0; k < COMM_MAX_LANES; k++) {
    qcclComm_t l = comm_lane_at(comm, k);
    if (l == NULL) continue;
    ucx_break(l->ucx);
    if (l->rail) ucx_break(l->rail->ucx);
  }
#endif
  QCCL_INFO(LOG_COLL, "comm %s rank %d failed before (%s): peers told", comm->name, comm->rank,
            qcclGetErrorString(comm->async_error));
}

qcclResult_t qcclCommFinalize(qcclComm_t comm) {
  err_clear();
  QCCL_CHECK(check_comm("qcclCommFinalize", comm));
  engine_comm_drain(comm); /* the calls queued on streams */
  comm->finalized = 1;
  /* an eager last call's agreement (agree.c) */
  QCCL_CHECK(coll_agree_settle(comm));
  return comm->async_error;
}

void comm_free(qcclComm_t comm, int abort) {
  comm->magic = COMM_DEAD;
  comm_free_parts(comm, abort);
}

qcclResult_t qcclCommDestroy(qcclComm_t comm) {
  err_clear();
  if (comm == NULL) return qcclSuccess;
  QCCL_CHECK(check_comm("qcclCommDestroy", comm));
  comm->finalized = 1; /* refuse new calls while the queued ones end */
  engine_comm_destroy(comm);
  return qcclSuccess;
}

qcclResult_t qcclCommAbort(qcclComm_t comm) {
  err_clear();
  if (comm == NULL) return qcclSuccess;
  QCCL_CHECK(check_comm("qcclCommAbort", comm));
  comm->magic = COMM_DEAD; /* the handle is gone; calls inside still see their memory */
  comm_abort_segments(comm);
  /* a call making a lane waits on the bootstrap ring (comm_lane_make) */
  boot_shutdown(comm->boot);
  engine_comm_abort(comm);
  return qcclSuccess;
}

qcclResult_t qcclCommGetAsyncError(qcclComm_t comm, qcclResult_t* asyncError) {
  QCCL_CHECK(check_comm("qcclCommGetAsyncError", comm));
  if (asyncError == NULL) return QCCL_ERR(qcclInvalidArgument, "asyncError: NULL pointer");
  *asyncError = comm->async_error;
  return qcclSuccess;
}

qcclResult_t qcclCommCount(const qcclComm_t comm, int* count) {
  QCCL_CHECK(check_comm("qcclCommCount", comm));
  if (count == NULL) return QCCL_ERR(qcclInvalidArgument, "count: NULL pointer");
  *count = comm->nranks;
  return qcclSuccess;
}

qcclResult_t qcclCommUserRank(const qcclComm_t comm, int* rank) {
  QCCL_CHECK(check_comm("qcclCommUserRank", comm));
  if (rank == NULL) return QCCL_ERR(qcclInvalidArgument, "rank: NULL pointer");
  *rank = comm->rank;
  return qcclSuccess;
}

const char* qcclGetLastError(qcclComm_t comm) {
  if (comm != NULL && comm->magic == COMM_MAGIC) return comm->last_error;
  return err_last();
}
