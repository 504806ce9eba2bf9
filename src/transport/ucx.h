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
 * the same call; the low 39 bits travel in every message's tag). A call
 * with UCX_CALL_P2P set is a user's send or receive: its messages carry
 * their number between the two ranks and their length instead (ucx.c). */
#define UCX_CALL_P2P ((uint64_t)1 << 38)
/* A collective's call: its number in the low UCX_CALL_NUM_BITS, a hash of
 * its arguments above (agree.c). A waiting transfer that sees a message of
 * the same number with another hash waiting knows the ranks disagree. */
#define UCX_CALL_NUM_BITS 16
void ucx_set_call(ucx_t* u, uint64_t call);

/* Control messages, apart from data (agree.c's report of a failed call):
 * post sends msg (at most UCX_CONTROL_MAX bytes, once per ucx) to every
 * peer still reachable, without waiting; a transfer of a peer that waits
 * fails when one arrives. take receives one that arrived (from its
 * sender), or returns 0 when none has. */
#define UCX_CONTROL_MAX 768
void ucx_post_control(ucx_t* u, const void* msg, size_t n);
size_t ucx_take_control(ucx_t* u, void* buf, size_t cap, int* from);
/* qcclRemoteError when a control message has arrived (not progressing
 * the worker: cheap at the start of a call). A worker another thread is
 * using is skipped: that thread sees the message itself. */
qcclResult_t ucx_control_seen(ucx_t* u);
/* For a rank that waits on something else (its node's segment) while a
 * call runs: progresses the worker and fails on a control message, or on
 * a message of the current call with other arguments. */
qcclResult_t ucx_watch(ucx_t* u);
/* An endpoint to peer that has not failed. */
int ucx_peer_reachable(ucx_t* u, int peer);

/* Closes every endpoint by force, now: the peers' transfers with this rank
 * fail promptly (the communicator failed here and will not take part in
 * any later call). Sends and receives to them fail from then on. */
void ucx_break(ucx_t* u);

/* Closes the endpoints and frees everything. Local and bounded in time:
 * flushes sends first unless abort is set or the peer failed. */
void ucx_close(ucx_t* u, int abort);

#endif /* QCCL_TRANSPORT_UCX_H_ */
