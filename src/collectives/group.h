/*
 * group.h - qcclGroupStart / qcclGroupEnd: a per-thread queue of calls.
 */
#ifndef QCCL_COLLECTIVES_GROUP_H_
#define QCCL_COLLECTIVES_GROUP_H_

#include "collectives/coll.h"
#include "core/stream.h"

/* Runs a validated call now (s NULL) or queues it on host stream s, or
 * adds it to the open group. */
qcclResult_t group_submit(qcclComm_t comm, const coll_args_t* a, stream_t* s);

/* A kind of call made by a layer above the plain collectives (the ZeRO++
 * calls, src/collectives/zeropp) that groups and streams carry like any
 * other without knowing what it is: a record of size bytes, copied when it
 * is queued; begin runs as each call's turn comes (the failure agreement,
 * agree.c), then run gets every consecutive call of the kind at once, so
 * the layer can fuse them (buckets). */
typedef struct {
  size_t size;
  qcclResult_t (*begin)(qcclComm_t comm, const void* rec);
  qcclResult_t (*run)(void* const* recs, int n);
} group_kind_t;

/* As group_submit for a call rec of kind k (rec is copied if it must
 * outlive this call). */
qcclResult_t group_submit_call(qcclComm_t comm, const group_kind_t* k, const void* rec,
                               stream_t* s);

#endif /* QCCL_COLLECTIVES_GROUP_H_ */
