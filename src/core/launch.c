/*
 * launch.c - rank, size, local rank / size and host from the launcher's
 * environment, and the secret the user gave (QCCL_SECRET_FILE,
 * QCCL_SECRET), for qcclCommInitFromEnv.
 *
 * The sources are tried in one fixed order (launch.h): the first whose
 * rank variable is set decides, and every variable it names must then be
 * present and well formed (a half-set source is an error naming what is
 * missing, never a silent step to the next source). PMIx is the exception:
 * when its server cannot be reached, the reason is kept and the variables
 * of the same launcher (OMPI_*, SLURM_*) are used instead.
 *
 * Slurm gives the tasks per node as SLURM_STEP_TASKS_PER_NODE, e.g.
 * "2(x3),1" for three nodes of two tasks and one of one; the local size is
 * the entry of node SLURM_NODEID.
 */
#include "core/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/env.h"
#include "core/err.h"
#include "core/launch_pmix.h"
#include "core/log.h"

#define LAUNCH_MAX_RANKS (1 << 24)

/* An integer variable that must be set, in [lo, hi]. */
static qcclResult_t launch_required(const char* name, int64_t lo, int64_t hi, const char* source,
                                    int* out) {
  if (env_get(name) == NULL)
    return QCCL_ERR(qcclInvalidArgument, "environment variable %s is not set (%s environment)",
                    name, source);
  int64_t v;
  QCCL_CHECK(env_get_int(name, 0, lo, hi, &v));
  *out = (int)v;
  return qcclSuccess;
}

/* An optional integer variable: -1 when unset. */
static qcclResult_t launch_optional(const char* name, int64_t lo, int64_t hi, int* out) {
  int64_t v;
  QCCL_CHECK(env_get_int(name, -1, lo, hi, &v));
  *out = (int)v;
  return qcclSuccess;
}

/* The tasks of node `node` in Slurm's compressed list "2(x3),1". */
static qcclResult_t launch_slurm_tasks(const char* name, const char* list, int node, int* out) {
  const char* p = list;
  int at = 0;
  while (*p) {
    char* end;
    errno = 0;
    long n = strtol(p, &end, 10);
    long rep = 1;
    if (end == p || errno || n < 0 || n > LAUNCH_MAX_RANKS) goto bad;
    p = end;
    if (*p == '(') {
      if (p[1] != 'x') goto bad;
      rep = strtol(p + 2, &end, 10);
      if (end == p + 2 || *end != ')' || rep < 1 || rep > LAUNCH_MAX_RANKS) goto bad;
      p = end + 1;
    }
    if (node < at + rep) {
      *out = (int)n;
      return qcclSuccess;
    }
    at += (int)rep;
    if (*p == ',')
      p++;
    else if (*p)
      goto bad;
  }
  return QCCL_ERR(qcclInvalidArgument, "%s='%s' has no entry for node SLURM_NODEID=%d", name, list,
                  node);
bad:
  return QCCL_ERR(qcclInvalidArgument, "%s='%s' is not a Slurm task list such as '2(x3),1'", name,
                  list);
}

static qcclResult_t launch_from_torchrun(launch_t* l) {
  l->source = "torchrun/qcclrun";
  l->rank_var = "RANK";
  l->size_var = "WORLD_SIZE";
  QCCL_CHECK(launch_required("RANK", 0, LAUNCH_MAX_RANKS, l->source, &l->rank));
  QCCL_CHECK(launch_required("WORLD_SIZE", 1, LAUNCH_MAX_RANKS, l->source, &l->size));
  QCCL_CHECK(launch_optional("LOCAL_RANK", 0, LAUNCH_MAX_RANKS, &l->local_rank));
  QCCL_CHECK(launch_optional("LOCAL_WORLD_SIZE", 1, LAUNCH_MAX_RANKS, &l->local_size));
  if (l->local_rank >= 0) l->local_var = "LOCAL_RANK/LOCAL_WORLD_SIZE";
  return qcclSuccess;
}

static qcclResult_t launch_from_ompi(launch_t* l) {
  l->source = "mpirun";
  l->rank_var = "OMPI_COMM_WORLD_RANK";
  l->size_var = "OMPI_COMM_WORLD_SIZE";
  QCCL_CHECK(launch_required(l->rank_var, 0, LAUNCH_MAX_RANKS, l->source, &l->rank));
  QCCL_CHECK(launch_required(l->size_var, 1, LAUNCH_MAX_RANKS, l->source, &l->size));
  QCCL_CHECK(launch_optional("OMPI_COMM_WORLD_LOCAL_RANK", 0, LAUNCH_MAX_RANKS, &l->local_rank));
  QCCL_CHECK(launch_optional("OMPI_COMM_WORLD_LOCAL_SIZE", 1, LAUNCH_MAX_RANKS, &l->local_size));
  if (l->local_rank >= 0) l->local_var = "OMPI_COMM_WORLD_LOCAL_RANK/_SIZE";
  return qcclSuccess;
}

static qcclResult_t launch_from_slurm(launch_t* l) {
  l->source = "srun";
  l->rank_var = "SLURM_PROCID";
  l->size_var = "SLURM_NTASKS";
  QCCL_CHECK(launch_required(l->rank_var, 0, LAUNCH_MAX_RANKS, l->source, &l->rank));
  QCCL_CHECK(launch_required(l->size_var, 1, LAUNCH_MAX_RANKS, l->source, &l->size));
  QCCL_CHECK(launch_optional("SLURM_LOCALID", 0, LAUNCH_MAX_RANKS, &l->local_rank));
  int node = -1;
  QCCL_CHECK(launch_optional("SLURM_NODEID", 0, LAUNCH_MAX_RANKS, &node));
  const char* tpn = "SLURM_STEP_TASKS_PER_NODE";
  const char* list = env_get(tpn);
  if (list == NULL) list = env_get(tpn = "SLURM_TASKS_PER_NODE");
  if (list != NULL && node >= 0) QCCL_CHECK(launch_slurm_tasks(tpn, list, node, &l->local_size));
  if (l->local_rank >= 0) l->local_var = "SLURM_LOCALID/SLURM_STEP_TASKS_PER_NODE";
  const char* host = env_get("SLURMD_NODENAME");
  if (host != NULL) snprintf(l->host, sizeof l->host, "%s", host);
  return qcclSuccess;
}

static qcclResult_t launch_from_pmi(launch_t* l) {
  l->source = "mpiexec";
  l->rank_var = "PMI_RANK";
  l->size_var = "PMI_SIZE";
  QCCL_CHECK(launch_required(l->rank_var, 0, LAUNCH_MAX_RANKS, l->source, &l->rank));
  QCCL_CHECK(launch_required(l->size_var, 1, LAUNCH_MAX_RANKS, l->source, &l->size));
  QCCL_CHECK(launch_optional("MPI_LOCALRANKID", 0, LAUNCH_MAX_RANKS, &l->local_rank));
  QCCL_CHECK(launch_optional("MPI_LOCALNRANKS", 1, LAUNCH_MAX_RANKS, &l->local_size));
  if (l->local_rank >= 0) l->local_var = "MPI_LOCALRANKID/MPI_LOCALNRANKS";
  return qcclSuccess;
}

qcclResult_t launch_identify(launch_t* out) {
  launch_t l;
  memset(&l, 0, sizeof l);
  l.local_rank = l.local_size = -1;
  l.pmix_seen = env_get("PMIX_RANK") != NULL;
  if (env_get("RANK") || env_get("WORLD_SIZE")) {
    QCCL_CHECK(launch_from_torchrun(&l));
  } else {
    if (l.pmix_seen) QCCL_CHECK(launch_pmix_connect(&l));
    if (l.pmix) {
      /* launch_pmix_connect filled rank, size, local rank / size, host */
    } else if (env_get("OMPI_COMM_WORLD_RANK")) {
      QCCL_CHECK(launch_from_ompi(&l));
    } else if (env_get("SLURM_PROCID")) {
      QCCL_CHECK(launch_from_slurm(&l));
    } else if (env_get("PMI_RANK")) {
      QCCL_CHECK(launch_from_pmi(&l));
    } else {
      return QCCL_ERR(qcclInvalidArgument,
                      "no launcher environment: none of RANK and WORLD_SIZE (torchrun, qcclrun), "
                      "PMIX_RANK (mpirun, srun --mpi=pmix, prterun%s), OMPI_COMM_WORLD_RANK "
                      "(mpirun), SLURM_PROCID (srun) or PMI_RANK (mpiexec) is set%s%s",
                      launch_pmix_built() ? "" : "; not in this build: it has no libpmix",
                      l.pmix_note[0] ? "; " : "", l.pmix_note);
    }
  }
  if (l.rank >= l.size)
    return QCCL_ERR(qcclInvalidArgument, "%s=%d is not below %s=%d (%s environment)", l.rank_var,
                    l.rank, l.size_var, l.size, l.source);
  if (l.local_rank >= 0 && l.local_size >= 0 && l.local_rank >= l.local_size)
    return QCCL_ERR(qcclInvalidArgument, "local rank %d is not below the local size %d (%s)",
                    l.local_rank, l.local_size, l.local_var);
  if (l.host[0] == '\0' && gethostname(l.host, sizeof l.host - 1) != 0) l.host[0] = '\0';
  *out = l;
  return qcclSuccess;
}

/* ---- the secret the user gave ------------------------------------------ */

/* Drops white space at both ends of buf[0..*len). */
static void launch_trim(char* buf, size_t* len) {
  size_t a = 0, b = *len;
  while (a < b && (buf[a] == ' ' || buf[a] == '\t' || buf[a] == '\n' || buf[a] == '\r')) a++;
  while (b > a &&
         (buf[b - 1] == ' ' || buf[b - 1] == '\t' || buf[b - 1] == '\n' || buf[b - 1] == '\r'))
    b--;
  memmove(buf, buf + a, b - a);
  *len = b - a;
  buf[*len] = '\0';
}

static qcclResult_t launch_secret_file(const char* path, char* buf, size_t cap, size_t* len) {
  const char* var = "QCCL_SECRET_FILE";
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return QCCL_ERRNO(qcclInvalidArgument, errno, "%s='%s': cannot open", var, path);
  struct stat st;
  qcclResult_t r = qcclSuccess;
  if (fstat(fd, &st) != 0) {
    r = QCCL_ERRNO(qcclSystemError, errno, "%s='%s': fstat", var, path);
  } else if (!S_ISREG(st.st_mode)) {
    r = QCCL_ERR(qcclInvalidArgument, "%s='%s' is not a regular file", var, path);
  } else if (st.st_uid != geteuid()) {
    r = QCCL_ERR(qcclInvalidArgument,
                 "%s='%s' belongs to uid %u, not to this user (uid %u): a secret file must be the "
                 "user's own",
                 var, path, (unsigned)st.st_uid, (unsigned)geteuid());
  } else if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    r = QCCL_ERR(qcclInvalidArgument,
                 "%s='%s' has mode %04o: group or others may read or change it, so it is no "
                 "secret; chmod 600 it",
                 var, path, (unsigned)(st.st_mode & 07777));
  } else {
    size_t n = 0;
    for (;;) {
      ssize_t k = read(fd, buf + n, cap - 1 - n);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) {
        r = QCCL_ERRNO(qcclSystemError, errno, "%s='%s': read", var, path);
        break;
      }
      n += (size_t)k;
      if (k == 0) break;
      if (n == cap - 1) {
        r = QCCL_ERR(qcclInvalidArgument, "%s='%s' is longer than %zu bytes", var, path, cap - 1);
        break;
      }
    }
    *len = n;
  }
  close(fd);
  return r;
}

qcclResult_t launch_user_secret(char* buf, size_t cap, size_t* len, const char** from) {
  const char* path = env_get("QCCL_SECRET_FILE");
  const char* value = env_get("QCCL_SECRET");
  *len = 0;
  *from = NULL;
  if (path != NULL) {
    *from = "QCCL_SECRET_FILE";
    if (*path == '\0') return QCCL_ERR(qcclInvalidArgument, "QCCL_SECRET_FILE is set but empty");
    QCCL_CHECK(launch_secret_file(path, buf, cap, len));
  } else if (value != NULL) {
    *from = "QCCL_SECRET";
    *len = strlen(value);
    if (*len >= cap) return QCCL_ERR(qcclInvalidArgument, "QCCL_SECRET is too long");
    memcpy(buf, value, *len + 1);
  } else {
    return qcclSuccess;
  }
  launch_trim(buf, len);
  if (*len < LAUNCH_SECRET_MIN)
    return QCCL_ERR(qcclInvalidArgument,
                    "%s holds %zu characters: a secret needs at least %d (e.g. the output of "
                    "`head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'`)",
                    *from, *len, LAUNCH_SECRET_MIN);
  return qcclSuccess;
}
