/*
 * launch.h - who this rank is, as the job's launcher tells it, for
 * qcclCommInitFromEnv: rank, number of ranks, local rank and size, host,
 * and (under a PMIx launcher) a channel to hand rank 0's unique id to the
 * others.
 *
 * Sources, first match wins (docs/ARCHITECTURE.md, "Launchers"):
 *   1. RANK + WORLD_SIZE (torchrun, qcclrun, or set by hand): the innermost
 *      launcher, since torchrun started under srun or mpirun inherits theirs;
 *   2. PMIx (PMIX_NAMESPACE + PMIX_RANK, in a build with libpmix): Open MPI's
 *      mpirun, srun --mpi=pmix, prterun;
 *   3. OMPI_COMM_WORLD_RANK + _SIZE (mpirun, when PMIx is not usable);
 *   4. SLURM_PROCID + SLURM_NTASKS (srun);
 *   5. PMI_RANK + PMI_SIZE (MPICH's mpiexec, srun --mpi=pmi2).
 * Local rank / size come from the same source (LOCAL_RANK, PMIx's
 * local rank, OMPI_COMM_WORLD_LOCAL_*, SLURM_LOCALID with
 * SLURM_STEP_TASKS_PER_NODE, MPI_LOCALRANKID / MPI_LOCALNRANKS); -1 where it
 * does not say. Nothing found is qcclInvalidArgument naming every variable
 * looked for.
 */
#ifndef QCCL_CORE_LAUNCH_H_
#define QCCL_CORE_LAUNCH_H_

#include <stddef.h>

#include "qccl.h"

#define LAUNCH_SECRET_MIN 16   /* characters of a secret the user gives */
#define LAUNCH_SECRET_MAX 4096 /* bytes read from QCCL_SECRET_FILE */

typedef struct {
  int rank, size;
  int local_rank, local_size; /* -1: the launcher does not say */
  char host[256];             /* the launcher's name for this host, else gethostname() */
  const char* source;         /* "torchrun/qcclrun", "PMIx", "mpirun", "srun", "mpiexec" */
  const char* rank_var;       /* the variables read, for messages */
  const char* size_var;
  const char* local_var; /* where local_rank / local_size came from, or NULL */
  int pmix;              /* 1: connected to the launcher's PMIx server */
  int pmix_seen;         /* PMIX_RANK was set (whether or not it was used) */
  char pmix_note[200];   /* why PMIx was not used although PMIX_RANK was set */
} launch_t;

/* Reads rank, size, local rank / size and host from the first source that
 * is there (order above); connects to PMIx when that is the source. */
qcclResult_t launch_identify(launch_t* out);

/* Under PMIx (l->pmix): hands rank 0's id to every rank. Rank 0 passes the
 * id it made and publishes it (PMIx_Put + PMIx_Commit); every rank then
 * joins a fence over the whole job, and the others read the id
 * (PMIx_Get). Collective: every rank of the PMIx job calls it once per
 * communicator made from the environment. Bounded by timeout seconds. */
qcclResult_t launch_pmix_share(const launch_t* l, qcclUniqueId* id, double timeout);

/* The secret the user gave: QCCL_SECRET_FILE (a regular file of this user
 * that group and others cannot read or write; surrounding white space
 * dropped), else QCCL_SECRET. *len 0 when neither is set; at least
 * LAUNCH_SECRET_MIN characters otherwise. *from names the variable. */
qcclResult_t launch_user_secret(char* buf, size_t cap, size_t* len, const char** from);

#endif /* QCCL_CORE_LAUNCH_H_ */
