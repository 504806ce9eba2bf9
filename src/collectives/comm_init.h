/*
 * comm_init.h - what comm_env.c (init from the launcher's environment)
 * takes from comm.c (init from an id).
 */
#ifndef QCCL_COLLECTIVES_COMM_INIT_H_
#define QCCL_COLLECTIVES_COMM_INIT_H_

#include "core/bootstrap.h"
#include "qccl.h"

/* The timeout of a communicator: QCCL_TIMEOUT, or config->timeoutSec. */
qcclResult_t comm_timeout(const qcclConfig_t* config, double* out);

/* Draws a random secret and starts a root listener for a new id. */
qcclResult_t comm_new_root(double timeout, boot_id_t* id);

/* Joins the communicator of id as rank of nranks. */
qcclResult_t comm_init(qcclComm_t* comm, int nranks, const boot_id_t* id, int rank,
                       const qcclConfig_t* config);

/* Runs a new communicator's (or lane's) first turn of small calls on its
 * segment, where its ranks fit the cores, and with rings also touches the
 * send/recv rings to and from its neighbours (comm_warm.c). */
qcclResult_t comm_warm(qcclComm_t c, int rings);

#endif /* QCCL_COLLECTIVES_COMM_INIT_H_ */
