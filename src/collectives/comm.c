/*
 * comm.c - communicator lifecycle: unique id, init (from an id or from the
 * launcher's environment), split, finalize, destroy, abort and queries.
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

#include "collectives/coll.h"
#include "collectives/comm_topo.h"
#include "collectives/engine.h"
#include "core/env.h"
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
} comm_peer_info_t;

qcclResult_t qcclGetVersion(int* version) {
  if (version == NULL) return QCCL_ERR(qcclInvalidArgument, "version: NULL pointer");
  *version = QCCL_VERSION_CODE;
  return qcclSuccess;
}

static qcclResult_t comm_timeout(const qcclConfig_t* config, double* out) {
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

qcclResult_t qcclGetUniqueId(qcclUniqueId* uniqueId) {
  err_clear();
  if (uniqueId == NULL) return QCCL_ERR(qcclInvalidArgument, "uniqueId: NULL pointer");
  double timeout = 0;
  QCCL_CHECK(comm_timeout(NULL, &timeout));
  boot_id_t id;
  memset(&id, 0, sizeof id);
  QCCL_CHECK(boot_random(id.secret, sizeof id.secret));
  sock_addr_t a;
  QCCL_CHECK(sock_pick_interface(&a));
  QCCL_CHECK(boot_root_start(&a, id.secret, timeout, &id.root));
  boot_id_pack(&id, uniqueId);
  return qcclSuccess;
}

/* Frees whatever of c exists (also a half-built one). */
static void comm_free_parts(qcclComm_t c, int abort) {
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
  boot_close(c->boot);
  free(c->peer_ops);
  free(c->peer_ctx);
  free(c->peer_idx);
  free(c->node_of);
  comm_topo_free(c);
  free(c->scratch[0]);
  free(c->scratch[1]);
  free(c->check_recs);
  zero_comm_free(c->zero);
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

/* QCCL_ALGO: a comma list of collective:algorithm (NCCL's syntax), for
 * communicators that span hosts: flat (ring or direct over all ranks) or
 * hier (two-level) for allreduce, allgather, reducescatter, broadcast and
 * reduce; auto lets the topology decide. Anything else is refused with the
 * variable named. */
static qcclResult_t comm_parse_algo(qcclComm_t c) {
  static const struct {
    const char* name;
    coll_kind_t kind;
  } colls[] = {{"allreduce", COLL_ALLREDUCE},
               {"allgather", COLL_ALLGATHER},
               {"reducescatter", COLL_REDUCESCATTER},
               {"broadcast", COLL_BROADCAST},
               {"reduce", COLL_REDUCE}};
  const char* v = env_get("QCCL_ALGO");
  if (v == NULL) return qcclSuccess;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", v);
  char* save = NULL;
  for (char* t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    char* colon = strchr(t, ':');
    if (colon == NULL)
      return QCCL_ERR(qcclInvalidArgument, "QCCL_ALGO='%s': '%s' is not collective:algorithm", v,
                      t);
    *colon = '\0';
    const char* algo = colon + 1;
    int k = -1;
    for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++)
      if (strcasecmp(t, colls[i].name) == 0) k = (int)colls[i].kind;
    if (k < 0)
      return QCCL_ERR(qcclInvalidArgument,
                      "QCCL_ALGO='%s': no algorithm choice for '%s' (allreduce, allgather, "
                      "reducescatter, broadcast, reduce)",
                      v, t);
    if (strcasecmp(algo, "flat") == 0 || strcasecmp(algo, "ring") == 0)
      c->algo[k] = COLL_ALGO_FLAT;
    else if (strcasecmp(algo, "hier") == 0)
      c->algo[k] = COLL_ALGO_HIER;
    else if (strcasecmp(algo, "auto") == 0)
      c->algo[k] = COLL_ALGO_AUTO;
    else
      return QCCL_ERR(qcclInvalidArgument,
                      "QCCL_ALGO='%s': %s algorithm '%s' is not flat, ring, hier or auto", v, t,
                      algo);
  }
  return qcclSuccess;
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
                               qcclComm_t* out);

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

/* Transports of a communicator on one host: everything through its segment. */
static qcclResult_t comm_connect_local(qcclComm_t c, const path_kind_t* kinds) {
  QCCL_CHECK(shm_open_segment(c->boot, c->timeout, c->ncores, &c->shm));
  c->spin = c->shm->spin;
  comm_connect_paths(c, kinds);
  return qcclSuccess;
}

/* Transports of a communicator across hosts: the ranks of this host form an
 * internal node communicator (shared memory); the others are reached
 * through UCX. */
static qcclResult_t comm_connect_remote(qcclComm_t c, const comm_peer_info_t* peers,
                                        const path_kind_t* kinds, const qcclConfig_t* config) {
#if QCCL_HAVE_UCX
  bootstrap_t* nb;
  QCCL_CHECK(boot_split(c->boot, c->node_of[c->rank], c->rank, &nb));
  QCCL_CHECK(comm_build(nb, c->timeout, config, &c->node));
  int* remote = calloc((size_t)c->nranks, sizeof *remote);
  if (!remote) return QCCL_ERR(qcclSystemError, "out of memory");
  for (int i = 0; i < c->nranks; i++) remote[i] = kinds[i] == PATH_UCX;
  qcclResult_t r = ucx_open(c->boot, remote, c->timeout, &c->ucx);
  free(remote);
  if (r != qcclSuccess) return r;
  /* equal numbers of ranks per host: the rail of this local index */
  if (c->rankmap->equal && c->node->nranks > 1) {
    bootstrap_t* rb;
    QCCL_CHECK(boot_split(c->boot, c->node->rank, c->node_of[c->rank], &rb));
    QCCL_CHECK(comm_build(rb, c->timeout, config, &c->rail));
  }
  c->spin = c->node->spin;
  comm_connect_paths(c, kinds);
  (void)peers;
  return qcclSuccess;
#else
  (void)config;
  (void)kinds;
  int other = 0;
  while (c->node_of[other] == c->node_of[0]) other++;
  return QCCL_ERR(qcclInvalidUsage,
                  "ranks span several hosts (rank 0 on '%s', rank %d on '%s'), but this build of "
                  "qccl has no inter-node transport (build with UCX: libucx-dev)",
                  peers[0].host, other, peers[other].host);
#endif
}

/* Everything after the bootstrap: placement, shared memory, UCX. Takes
 * ownership of boot. */
static qcclResult_t comm_build(bootstrap_t* boot, double timeout, const qcclConfig_t* config,
                               qcclComm_t* out) {
  qcclResult_t r;
  comm_peer_info_t* peers = NULL;
  path_kind_t* kinds = NULL;
  qcclComm_t c = calloc(1, sizeof *c);
  if (!c) {
    boot_close(boot);
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
  QCCL_CHECK_GOTO(boot_allgather(boot, peers, sizeof *peers), r, fail);
  c->nnodes = comm_place(peers, c->nranks, c->node_of);
  QCCL_CHECK_GOTO(comm_topo_build(c), r, fail);
  QCCL_CHECK_GOTO(comm_parse_algo(c), r, fail);
  kinds = malloc(w * sizeof *kinds);
  if (kinds == NULL) {
    r = QCCL_ERR(qcclSystemError, "out of memory");
    goto fail;
  }
  path_host_row(c->rankmap, c->rank, kinds);
  if (c->nnodes == 1)
    QCCL_CHECK_GOTO(comm_connect_local(c, kinds), r, fail);
  else
    QCCL_CHECK_GOTO(comm_connect_remote(c, peers, kinds, config), r, fail);
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

static qcclResult_t comm_init(qcclComm_t* comm, int nranks, const boot_id_t* id, int rank,
                              const qcclConfig_t* config) {
  double timeout = 0;
  QCCL_CHECK(comm_check_config(config));
  QCCL_CHECK(comm_timeout(config, &timeout));
  log_write(LOG_VERSION, LOG_INIT, "qccl version %s", QCCL_VERSION_STRING);
  int bind_mode;
  QCCL_CHECK(comm_topo_bind_mode(&bind_mode));
  bootstrap_t* boot;
  QCCL_CHECK(boot_init(id, rank, nranks, timeout, &boot));
  QCCL_CHECK(comm_build(boot, timeout, config, comm));
  comm_topo_init(*comm, bind_mode);
  return qcclSuccess;
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

/* ---- init from the launcher's environment ---------------------------- */

/* Reads an integer variable that must be set. */
static qcclResult_t comm_env_required(const char* name, int64_t lo, int64_t hi, int64_t* out) {
  if (env_get(name) == NULL)
    return QCCL_ERR(qcclInvalidArgument, "environment variable %s is not set", name);
  return env_get_int(name, 0, lo, hi, out);
}

/* 128-bit FNV-1a style mix of the job's identity into a secret. */
static void comm_env_secret(const char* const* parts, int n, uint8_t* secret) {
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  for (int i = 0; i < n; i++) {
    for (const char* p = parts[i] ? parts[i] : ""; *p; p++) {
      h1 = (h1 ^ (uint8_t)*p) * 0x100000001b3ull;
      h2 = (h2 ^ (uint8_t)*p) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
    }
    h1 = (h1 ^ 0xff) * 0x100000001b3ull;
    h2 = (h2 ^ 0xfe) * 0x100000001b3ull;
  }
  memcpy(secret, &h1, 8);
  memcpy(secret + 8, &h2, 8);
}

qcclResult_t qcclCommInitFromEnv(qcclComm_t* comm) {
  err_clear();
  if (comm == NULL) return QCCL_ERR(qcclInvalidArgument, "comm: NULL pointer");
  int64_t rank, size;
  const char *launcher, *rank_var, *size_var;
  if (env_get("RANK") || env_get("WORLD_SIZE")) {
    launcher = "torchrun/qcclrun";
    rank_var = "RANK";
    size_var = "WORLD_SIZE";
    QCCL_CHECK(comm_env_required("RANK", 0, 1 << 24, &rank));
    QCCL_CHECK(comm_env_required("WORLD_SIZE", 1, 1 << 24, &size));
  } else if (env_get("OMPI_COMM_WORLD_RANK")) {
    launcher = "mpirun";
    rank_var = "OMPI_COMM_WORLD_RANK";
    size_var = "OMPI_COMM_WORLD_SIZE";
    QCCL_CHECK(comm_env_required("OMPI_COMM_WORLD_RANK", 0, 1 << 24, &rank));
    QCCL_CHECK(comm_env_required("OMPI_COMM_WORLD_SIZE", 1, 1 << 24, &size));
  } else if (env_get("SLURM_PROCID")) {
    launcher = "srun";
    rank_var = "SLURM_PROCID";
    size_var = "SLURM_NTASKS";
    QCCL_CHECK(comm_env_required("SLURM_PROCID", 0, 1 << 24, &rank));
    QCCL_CHECK(comm_env_required("SLURM_NTASKS", 1, 1 << 24, &size));
  } else {
    return QCCL_ERR(qcclInvalidArgument,
                    "no launcher environment: set RANK and WORLD_SIZE (torchrun, qcclrun), or "
                    "run under mpirun (OMPI_COMM_WORLD_RANK) or srun (SLURM_PROCID)");
  }
  if (rank >= size)
    return QCCL_ERR(qcclInvalidArgument, "%s=%lld is not below %s=%lld (%s environment)", rank_var,
                    (long long)rank, size_var, (long long)size, launcher);
  boot_id_t id;
  memset(&id, 0, sizeof id);
  const char* commid = env_get("QCCL_COMM_ID");
  const char* maddr = env_get("MASTER_ADDR");
  const char* mport = env_get("MASTER_PORT");
  if (commid) {
    QCCL_CHECK(sock_addr_parse(commid, "QCCL_COMM_ID", &id.root));
  } else {
    if (maddr == NULL)
      return QCCL_ERR(qcclInvalidArgument,
                      "environment variable MASTER_ADDR is not set (nor QCCL_COMM_ID=host:port)");
    int64_t port;
    QCCL_CHECK(comm_env_required("MASTER_PORT", 1, 65535, &port));
    /* torchrun's own store listens on MASTER_PORT: take the next one */
    if (env_get("TORCHELASTIC_RUN_ID")) port = port == 65535 ? 65534 : port + 1;
    QCCL_CHECK(sock_addr_resolve(maddr, (int)port, "MASTER_ADDR/MASTER_PORT", &id.root));
  }
  const char* parts[] = {env_get("QCCL_SECRET"),
                         commid,
                         maddr,
                         mport,
                         env_get("TORCHELASTIC_RUN_ID"),
                         env_get("OMPI_MCA_ess_base_jobid"),
                         env_get("SLURM_JOB_ID"),
                         env_get("WORLD_SIZE")};
  comm_env_secret(parts, (int)(sizeof parts / sizeof parts[0]), id.secret);
  double timeout = 0;
  QCCL_CHECK(comm_timeout(NULL, &timeout));
  if (rank == 0) {
    /* rank 0 serves the rendezvous on the root address (any interface if
     * that address is not local, e.g. a name that resolves elsewhere) */
    sock_addr_t bound, any = id.root;
    if (boot_root_start(&id.root, id.secret, timeout, &bound) != qcclSuccess) {
      if (any.sa.sa_family == AF_INET)
        any.sin.sin_addr.s_addr = htonl(INADDR_ANY);
      else
        any.sin6.sin6_addr = in6addr_any;
      err_clear();
      QCCL_CHECK(boot_root_start(&any, id.secret, timeout, &bound));
    }
  }
  QCCL_INFO(LOG_INIT, "init from the %s environment: rank %lld of %lld", launcher, (long long)rank,
            (long long)size);
  return comm_init(comm, (int)size, &id, (int)rank, NULL);
}

/* ---- split, teardown, queries ------------------------------------------ */

static qcclResult_t comm_check(const qcclComm_t comm) {
  if (comm == NULL) return QCCL_ERR(qcclInvalidArgument, "comm: NULL communicator");
  if (comm->magic != COMM_MAGIC)
    return QCCL_ERR(qcclInvalidArgument, "comm: not a live communicator (destroyed?)");
  return qcclSuccess;
}

qcclResult_t qcclCommSplit(qcclComm_t comm, int color, int key, qcclComm_t* newcomm,
                           qcclConfig_t* config) {
  err_clear();
  QCCL_CHECK(comm_check(comm));
  if (newcomm == NULL) return comm_fail(comm, QCCL_ERR(qcclInvalidArgument, "newcomm: NULL"));
  if (comm->async_error != qcclSuccess) return comm->async_error;
  qcclResult_t r = comm_check_config(config);
  if (r != qcclSuccess) return comm_fail(comm, r);
  double timeout = comm->timeout;
  if (config && config->timeoutSec != QCCL_CONFIG_UNDEF_INT) {
    r = comm_timeout(config, &timeout);
    if (r != qcclSuccess) return comm_fail(comm, r);
  }
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
  r = comm_build(nb, timeout, config, newcomm);
  if (r == qcclSuccess) comm_topo_log(*newcomm);
  return r == qcclSuccess ? r : comm_fail(comm, r);
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

qcclResult_t qcclCommFinalize(qcclComm_t comm) {
  err_clear();
  QCCL_CHECK(comm_check(comm));
  engine_comm_drain(comm); /* the calls queued on streams */
  comm->finalized = 1;
  return comm->async_error;
}

void comm_free(qcclComm_t comm, int abort) {
  comm->magic = COMM_DEAD;
  comm_free_parts(comm, abort);
}

qcclResult_t qcclCommDestroy(qcclComm_t comm) {
  err_clear();
  if (comm == NULL) return qcclSuccess;
  QCCL_CHECK(comm_check(comm));
  comm->finalized = 1; /* refuse new calls while the queued ones end */
  engine_comm_destroy(comm);
  return qcclSuccess;
}

qcclResult_t qcclCommAbort(qcclComm_t comm) {
  err_clear();
  if (comm == NULL) return qcclSuccess;
  QCCL_CHECK(comm_check(comm));
  comm->magic = COMM_DEAD; /* the handle is gone; calls inside still see their memory */
  shm_t* s = comm->node ? comm->node->shm : comm->shm;
  if (s) shm_set_abort(s);
  engine_comm_abort(comm);
  return qcclSuccess;
}

qcclResult_t qcclCommGetAsyncError(qcclComm_t comm, qcclResult_t* asyncError) {
  QCCL_CHECK(comm_check(comm));
  if (asyncError == NULL) return QCCL_ERR(qcclInvalidArgument, "asyncError: NULL pointer");
  *asyncError = comm->async_error;
  return qcclSuccess;
}

qcclResult_t qcclCommCount(const qcclComm_t comm, int* count) {
  QCCL_CHECK(comm_check(comm));
  if (count == NULL) return QCCL_ERR(qcclInvalidArgument, "count: NULL pointer");
  *count = comm->nranks;
  return qcclSuccess;
}

qcclResult_t qcclCommUserRank(const qcclComm_t comm, int* rank) {
  QCCL_CHECK(comm_check(comm));
  if (rank == NULL) return QCCL_ERR(qcclInvalidArgument, "rank: NULL pointer");
  *rank = comm->rank;
  return qcclSuccess;
}

const char* qcclGetLastError(qcclComm_t comm) {
  if (comm != NULL && comm->magic == COMM_MAGIC) return comm->last_error;
  return err_last();
}
