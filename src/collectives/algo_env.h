/*
 * algo_env.h - the QCCL_ALGO parser, apart from the communicator so the
 * tests and the fuzz target can drive it.
 */
#ifndef QCCL_COLLECTIVES_ALGO_ENV_H_
#define QCCL_COLLECTIVES_ALGO_ENV_H_

#include "collectives/coll.h"

/* Parses v (QCCL_ALGO's syntax) into algo[COLL_NUM_KINDS] (COLL_ALGO_*),
 * which is changed only on success. A malformed or too long value is
 * qcclInvalidArgument naming QCCL_ALGO. */
qcclResult_t coll_algo_parse(const char* v, int* algo);

#endif /* QCCL_COLLECTIVES_ALGO_ENV_H_ */
