/*
 * ucx.h - the inter-host transport over UCX's UCP tag API.
 *
 * One UCP context and worker per communicator that spans hosts; worker
 * addresses travel over the bootstrap; an endpoint to every rank on another
 * host. Only built when meson finds UCX (-Ducx=auto|enabled).
 */
#ifndef QCCL_TRANSPORT_UCX_H_
#define QCCL_TRANSPORT_UCX_H_

#include "core/bootstrap.h"
#include "qccl.h"

typedef struct ucx ucx_t;

/* Collective over boot: every rank calls it. remote[i] != 0 for the ranks
 * this one reaches through UCX (others get no endpoint). */
qcclResult_t ucx_open(bootstrap_t* boot, const int* remote, double timeout, ucx_t** out);

/* The call the next messages belong to (on every rank the same number for
 * the same call; the low 40 bits travel in every message's tag). */
void ucx_set_call(ucx_t* u, uint64_t call);

/* Closes every endpoint by force, now: the peers' transfers with this rank
 * fail promptly (the communicator failed here and will not take part in
 * any later call). Sends and receives to them fail from then on. */
void ucx_break(ucx_t* u);

/* Closes the endpoints and frees everything. Local and bounded in time:
 * flushes sends first unless abort is set or the peer failed. */
void ucx_close(ucx_t* u, int abort);

#endif /* QCCL_TRANSPORT_UCX_H_ */
