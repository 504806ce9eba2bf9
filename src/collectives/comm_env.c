/*
 * comm_env.c - qcclCommInitFromEnv: a communicator from the launcher's
 * environment. Who is who comes from core/launch.c (torchrun's variables,
 * PMIx, Open MPI's, Slurm's, MPICH's, in that order); the id comes through
 * PMIx (rank 0's random one), or from QCCL_COMM_ID / MASTER_ADDR and the
 * user's secret (QCCL_SECRET, QCCL_SECRET_FILE; derived from the job's
 * public values only with a warning, docs/SECURITY.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "collectives/coll.h"
#include "collectives/comm_init.h"
#include "core/env.h"
#include "core/launch.h"
#include "core/log.h"
#include "qccl_config.h"
#include "topology/rankmap.h"

/* ---- init from the launcher's environment ---------------------------- */

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

/* Rank 0 of the env flow serves the rendezvous on the root address (any
 * interface if that address is not local, e.g. a name that resolves
 * elsewhere); the address the others connect to stays id->root. */
static qcclResult_t comm_env_serve(const boot_id_t* id, double timeout) {
  sock_addr_t bound, any = id->root;
  if (boot_root_start(&id->root, id->secret, timeout, &bound) == qcclSuccess) return qcclSuccess;
  if (any.sa.sa_family == AF_INET)
    any.sin.sin_addr.s_addr = htonl(INADDR_ANY);
  else
    any.sin6.sin6_addr = in6addr_any;
  err_clear();
  return boot_root_start(&any, id->secret, timeout, &bound);
}

/* The root address without PMIx: QCCL_COMM_ID, else MASTER_ADDR and
 * MASTER_PORT (the next port under torchrun, whose store holds
 * MASTER_PORT). */
static qcclResult_t comm_env_root(const launch_t* l, sock_addr_t* out) {
  const char* commid = env_get("QCCL_COMM_ID");
  if (commid) return sock_addr_parse(commid, "QCCL_COMM_ID", out);
  const char* maddr = env_get("MASTER_ADDR");
  if (maddr == NULL && strcmp(l->source, "torchrun/qcclrun") != 0)
    return QCCL_ERR(qcclInvalidArgument,
                    "%s environment (%s=%d, %s=%d) without PMIx: no rendezvous address. Set "
                    "QCCL_COMM_ID=host:port (rank 0's host and a free port there) for every rank, "
                    "or launch through PMIx (mpirun; srun --mpi=pmix)%s%s",
                    l->source, l->rank_var, l->rank, l->size_var, l->size,
                    l->pmix_note[0] ? ". " : "", l->pmix_note);
  if (maddr == NULL)
    return QCCL_ERR(qcclInvalidArgument,
                    "environment variable MASTER_ADDR is not set (nor QCCL_COMM_ID=host:port)");
  int64_t port;
  if (env_get("MASTER_PORT") == NULL)
    return QCCL_ERR(qcclInvalidArgument, "environment variable MASTER_PORT is not set");
  QCCL_CHECK(env_get_int("MASTER_PORT", 0, 1, 65535, &port));
  if (env_get("TORCHELASTIC_RUN_ID")) port = port == 65535 ? 65534 : port + 1;
  return sock_addr_resolve(maddr, (int)port, "MASTER_ADDR/MASTER_PORT", out);
}

/* The secret without PMIx: the user's (QCCL_SECRET_FILE, QCCL_SECRET;
 * qcclrun sets a random QCCL_SECRET) mixed with the job's identity, else
 * the job's identity alone, which an outsider can guess: say so. */
static qcclResult_t comm_env_secret_of(const launch_t* l, const sock_addr_t* root, uint8_t* secret,
                                       const char** from) {
  char given[LAUNCH_SECRET_MAX + 1];
  size_t len = 0;
  QCCL_CHECK(launch_user_secret(given, sizeof given, &len, from));
  const char* parts[] = {
      len ? given : NULL,      env_get("QCCL_COMM_ID"),        env_get("MASTER_ADDR"),
      env_get("MASTER_PORT"),  env_get("TORCHELASTIC_RUN_ID"), env_get("OMPI_MCA_ess_base_jobid"),
      env_get("SLURM_JOB_ID"), env_get("WORLD_SIZE")};
  comm_env_secret(parts, (int)(sizeof parts / sizeof parts[0]), secret);
  memset(given, 0, sizeof given);
  if (len) return qcclSuccess;
  *from = "derived from public job values";
  char a[64];
  const char* risk =
      "qcclCommInitFromEnv: neither QCCL_SECRET_FILE nor QCCL_SECRET is set, so the bootstrap "
      "secret is derived from public values of the job (QCCL_COMM_ID or MASTER_ADDR/MASTER_PORT, "
      "WORLD_SIZE, TORCHELASTIC_RUN_ID, SLURM_JOB_ID, OMPI job id): anyone who can reach %s and "
      "guess them can join this job as a rank and read or corrupt its data. Set QCCL_SECRET_FILE "
      "to a file only you can read (chmod 600, the same on every host) or QCCL_SECRET, or launch "
      "with qcclrun, mpirun or srun --mpi=pmix, which draw a random one";
  if (log_enabled(LOG_WARN, LOG_INIT))
    QCCL_WARN(LOG_INIT, risk, sock_addr_str(root, a, sizeof a));
  else if (l->rank == 0) {
    fprintf(stderr, "qccl: warning: ");
    fprintf(stderr, risk, sock_addr_str(root, a, sizeof a));
    fprintf(stderr, "\n");
  }
  return qcclSuccess;
}

/* Launcher and qccl should agree on how many ranks share this host; when
 * they do not, host identities (QCCL_HOST_ID) are likely wrong. */
static void comm_env_check_local(const launch_t* l, qcclComm_t c) {
  const topo_rankmap_t* m = c->rankmap;
  if (l->local_size < 0 || m == NULL) return;
  int mine = m->node_size[m->node_of[c->rank]];
  if (mine != l->local_size)
    QCCL_WARN(LOG_INIT,
              "rank %d: the launcher (%s) puts %d ranks on this host (%s), qccl's host identities "
              "put %d: check QCCL_HOST_ID",
              c->rank, l->local_var, l->local_size, l->host, mine);
}

/* Under PMIx: rank 0 makes an id as qcclGetUniqueId does (a fresh random
 * secret; on QCCL_COMM_ID's address if set) and hands it to the others
 * through the launcher. If rank 0 cannot, it hands out its error instead
 * (COMM_PMIX_FAILED and the message), so that no rank waits for an id that
 * will not come. */
#define COMM_PMIX_FAILED "qccl: rank 0 failed: "
static qcclResult_t comm_env_pmix_id(const launch_t* l, double timeout, boot_id_t* id) {
  qcclUniqueId packed;
  memset(&packed, 0, sizeof packed);
  qcclResult_t r = qcclSuccess;
  if (l->rank == 0) {
    const char* commid = env_get("QCCL_COMM_ID");
    if (commid) {
      r = sock_addr_parse(commid, "QCCL_COMM_ID", &id->root);
      if (r == qcclSuccess) r = boot_random(id->secret, sizeof id->secret);
      if (r == qcclSuccess) r = comm_env_serve(id, timeout);
    } else {
      r = comm_new_root(timeout, id);
    }
    if (r == qcclSuccess)
      boot_id_pack(id, &packed);
    else
      snprintf(packed.internal, sizeof packed.internal, "%s%s", COMM_PMIX_FAILED, err_last());
  }
  char why[QCCL_LAST_ERROR_BYTES];
  snprintf(why, sizeof why, "%s", err_last());
  QCCL_CHECK(launch_pmix_share(l, &packed, timeout));
  if (r != qcclSuccess) return QCCL_ERR(r, "%s", why);
  if (strncmp(packed.internal, COMM_PMIX_FAILED, strlen(COMM_PMIX_FAILED)) == 0) {
    packed.internal[sizeof packed.internal - 1] = '\0';
    return QCCL_ERR(qcclRemoteError, "%s (the rendezvous through PMIx)", packed.internal + 6);
  }
  return boot_id_unpack(&packed, id);
}

qcclResult_t qcclCommInitFromEnv(qcclComm_t* comm) {
  err_clear();
  if (comm == NULL) return QCCL_ERR(qcclInvalidArgument, "comm: NULL pointer");
  launch_t l;
  QCCL_CHECK(launch_identify(&l));
  double timeout = 0;
  QCCL_CHECK(comm_timeout(NULL, &timeout));
  boot_id_t id;
  memset(&id, 0, sizeof id);
  const char* secret_from;
  if (l.pmix) {
    QCCL_CHECK(comm_env_pmix_id(&l, timeout, &id));
    secret_from = "random, from rank 0 through PMIx";
  } else {
    QCCL_CHECK(comm_env_root(&l, &id.root));
    QCCL_CHECK(comm_env_secret_of(&l, &id.root, id.secret, &secret_from));
    if (l.rank == 0) QCCL_CHECK(comm_env_serve(&id, timeout));
  }
  char a[64];
  QCCL_INFO(LOG_INIT,
            "init from the %s environment: rank %d of %d (%s, %s), local rank %d of %d (%s) on "
            "host %s; rendezvous %s, secret %s",
            l.source, l.rank, l.size, l.rank_var, l.size_var, l.local_rank, l.local_size,
            l.local_var ? l.local_var : "not given", l.host, sock_addr_str(&id.root, a, sizeof a),
            secret_from);
  QCCL_CHECK(comm_init(comm, l.size, &id, l.rank, NULL));
  comm_env_check_local(&l, *comm);
  return qcclSuccess;
}
