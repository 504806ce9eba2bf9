/*
 * launch_pmix.h - the PMIx side of launch.c (launch_pmix.c): connecting to
 * the launcher's PMIx server and reading who this rank is. In a build
 * without libpmix both say that PMIx is not there.
 */
#ifndef QCCL_CORE_LAUNCH_PMIX_H_
#define QCCL_CORE_LAUNCH_PMIX_H_

#include "core/launch.h"

/* 1 when this build links libpmix. */
int launch_pmix_built(void);

/* Connects to the PMIx server named by the PMIX_* variables (once per
 * process; finalized at exit) and fills rank, size, local rank / size and
 * host, with l->pmix = 1. When PMIx is not usable (no libpmix in this
 * build, PMIx_Init fails) l->pmix stays 0 and l->pmix_note says why, for
 * the caller to fall back on other variables. */
qcclResult_t launch_pmix_connect(launch_t* l);

#endif /* QCCL_CORE_LAUNCH_PMIX_H_ */
