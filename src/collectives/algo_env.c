/*
 * algo_env.c - QCCL_ALGO: a comma list of collective:algorithm (NCCL's
 * syntax), for communicators that span hosts: flat (ring or direct over
 * all ranks) or hier (two-level) for allreduce, allgather, reducescatter,
 * broadcast and reduce; auto lets the topology decide. Names in any case
 * (env.c's rule). Anything else, an empty item, or a value too long to
 * hold is refused with the variable named; nothing is cut silently.
 */
#include "collectives/algo_env.h"

#include <stdio.h>
#include <string.h>

#include "core/env.h"

qcclResult_t coll_algo_parse(const char* v, int* algo) {
  static const struct {
    const char* name;
    coll_kind_t kind;
  } colls[] = {{"allreduce", COLL_ALLREDUCE},
               {"allgather", COLL_ALLGATHER},
               {"reducescatter", COLL_REDUCESCATTER},
               {"broadcast", COLL_BROADCAST},
               {"reduce", COLL_REDUCE}};
  char buf[256];
  QCCL_CHECK(env_copy("QCCL_ALGO", v, buf, sizeof buf));
  int out[COLL_NUM_KINDS];
  memcpy(out, algo, sizeof out);
  char* save = NULL;
  for (char* t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    char* colon = strchr(t, ':');
    if (colon == NULL)
      return QCCL_ERR(qcclInvalidArgument, "QCCL_ALGO='%s': '%s' is not collective:algorithm", v,
                      t);
    *colon = '\0';
    const char* name = colon + 1;
    int k = -1;
    for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++)
      if (env_word_is(t, colls[i].name)) k = (int)colls[i].kind;
    if (k < 0)
      return QCCL_ERR(qcclInvalidArgument,
                      "QCCL_ALGO='%s': no algorithm choice for '%s' (allreduce, allgather, "
                      "reducescatter, broadcast, reduce)",
                      v, t);
    if (env_word_is(name, "flat") || env_word_is(name, "ring"))
      out[k] = COLL_ALGO_FLAT;
    else if (env_word_is(name, "hier"))
      out[k] = COLL_ALGO_HIER;
    else if (env_word_is(name, "auto"))
      out[k] = COLL_ALGO_AUTO;
    else
      return QCCL_ERR(qcclInvalidArgument,
                      "QCCL_ALGO='%s': %s algorithm '%s' is not flat, ring, hier or auto", v, t,
                      name);
  }
  memcpy(algo, out, sizeof out);
  return qcclSuccess;
}
