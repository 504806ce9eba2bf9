/*
 * check.h - the argument checks every public entry point of the collective
 * layer shares (api.c, comm.c, comm_topo.c, stats.c, the ZeRO++ calls in
 * zeropp/): one wording, each message naming the function and the
 * argument with its value.
 */
#ifndef QCCL_COLLECTIVES_CHECK_H_
#define QCCL_COLLECTIVES_CHECK_H_

#include <stddef.h>

#include "collectives/coll.h"
#include "core/stream.h"

/* comm is a live communicator (not NULL, not destroyed or aborted). */
qcclResult_t check_comm(const char* fn, const struct qcclComm* comm);

/* comm can take a call: live, not finalized, and not failed before (then
 * its error, and the peers are told: engine_tell_peers). With s not NULL
 * the call's stream argument too: *s = the host stream, NULL for NULL. */
qcclResult_t check_comm_usable(const char* fn, qcclComm_t comm, qcclStream_t stream, stream_t** s);

/* count x factor elements of es bytes each (what names count) fit in
 * memory, and in max elements (0: no such bound). */
qcclResult_t check_count(const char* fn, const char* what, size_t count, size_t factor, size_t es,
                         size_t max);

/* sendbuff and recvbuff are not NULL when count (named what) is not 0. */
qcclResult_t check_buffers(const char* fn, const char* what, size_t count, const void* sendbuff,
                           const void* recvbuff);

#endif /* QCCL_COLLECTIVES_CHECK_H_ */
