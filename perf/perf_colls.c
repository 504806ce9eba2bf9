/*
 * perf_colls.c - what the driver knows about each collective, backend
 * independent: three small functions each, as in nccl-tests.
 *
 *   counts     the call's buffers for a size of `count` elements: the
 *              size is the larger of the send and receive buffers (nccl-
 *              tests' "size" column), rounded down to a multiple of nranks
 *              where the call splits it into blocks
 *   source     where output element j comes from (a rank's input and its
 *              index, or a reduction over all ranks), which is all the
 *              check needs to rebuild the expected result
 *   bus_factor busbw / algbw, nccl-tests' formulas: the fraction of the
 *              data that must cross a link in an optimal ring algorithm
 *
 * The fourth function, the call itself, belongs to each backend.
 */
#include <string.h>

#include "perf.h"

static double factor_one(int n) {
  (void)n;
  return 1.0;
}

static double factor_ring(int n) {
  return (double)(n - 1) / (double)n;
}

/* ---- allreduce: everyone gets the reduction of all inputs ---- */

static void allreduce_counts(size_t count, int n, int rank, int root, perf_counts_t* c) {
  (void)n, (void)rank, (void)root;
  *c = (perf_counts_t){count, count, count, 0, 0, count};
}

static int allreduce_source(size_t j, int rank, int n, int root, const perf_counts_t* c,
                            size_t* src) {
  (void)rank, (void)n, (void)root, (void)c;
  *src = j;
  return PERF_SRC_ALL;
}

static double allreduce_factor(int n) {
  return 2.0 * (double)(n - 1) / (double)n;
}

/* ---- allgather: block i of the output is rank i's input ---- */

static void allgather_counts(size_t count, int n, int rank, int root, perf_counts_t* c) {
  (void)rank, (void)root;
  size_t b = count / (size_t)n;
  *c = (perf_counts_t){b, b * (size_t)n, b, b, 0, b * (size_t)n};
}

static int allgather_source(size_t j, int rank, int n, int root, const perf_counts_t* c,
                            size_t* src) {
  (void)rank, (void)n, (void)root;
  *src = j % c->paramcount;
  return (int)(j / c->paramcount);
}

/* ---- reducescatter: block `rank` of the reduction over all inputs ---- */

static void reducescatter_counts(size_t count, int n, int rank, int root, perf_counts_t* c) {
  (void)rank, (void)root;
  size_t b = count / (size_t)n;
  *c = (perf_counts_t){b * (size_t)n, b, b, 0, b, b};
}

static int reducescatter_source(size_t j, int rank, int n, int root, const perf_counts_t* c,
                                size_t* src) {
  (void)n, (void)root;
  *src = (size_t)rank * c->paramcount + j;
  return PERF_SRC_ALL;
}

/* ---- alltoall: block i of the output is block `rank` of rank i's input ---- */

static void alltoall_counts(size_t count, int n, int rank, int root, perf_counts_t* c) {
  (void)rank, (void)root;
  size_t b = count / (size_t)n;
  *c = (perf_counts_t){b * (size_t)n, b * (size_t)n, b, 0, 0, b * (size_t)n};
}

static int alltoall_source(size_t j, int rank, int n, int root, const perf_counts_t* c,
                           size_t* src) {
  (void)n, (void)root;
  *src = (size_t)rank * c->paramcount + j % c->paramcount;
  return (int)(j / c->paramcount);
}

/* ---- broadcast: everyone gets root's input ---- */

static void broadcast_counts(size_t count, int n, int rank, int root, perf_counts_t* c) {
  (void)n, (void)rank, (void)root;
  *c = (perf_counts_t){count, count, count, 0, 0, count};
}

static int broadcast_source(size_t j, int rank, int n, int root, const perf_counts_t* c,
                            size_t* src) {
  (void)rank, (void)n, (void)c;
  *src = j;
  return root;
}

/* ---- reduce: root gets the reduction of all inputs ---- */

static void reduce_counts(size_t count, int n, int rank, int root, perf_counts_t* c) {
  (void)n;
  *c = (perf_counts_t){count, count, count, 0, 0, rank == root ? count : 0};
}

/* ---- gather: block i of root's output is rank i's input ---- */

static void gather_counts(size_t count, int n, int rank, int root, perf_counts_t* c) {
  size_t b = count / (size_t)n;
  *c = (perf_counts_t){b, b * (size_t)n, b, b, 0, rank == root ? b * (size_t)n : 0};
}

/* ---- scatter: rank i gets block i of root's input ---- */

static void scatter_counts(size_t count, int n, int rank, int root, perf_counts_t* c) {
  (void)rank, (void)root;
  size_t b = count / (size_t)n;
  *c = (perf_counts_t){b * (size_t)n, b, b, 0, b, b};
}

static int scatter_source(size_t j, int rank, int n, int root, const perf_counts_t* c,
                          size_t* src) {
  (void)n;
  *src = (size_t)rank * c->paramcount + j;
  return root;
}

/* ---- sendrecv: a ring shift, rank r receives rank r-1's input ---- */

static void sendrecv_counts(size_t count, int n, int rank, int root, perf_counts_t* c) {
  (void)n, (void)rank, (void)root;
  *c = (perf_counts_t){count, count, count, 0, 0, count};
}

static int sendrecv_source(size_t j, int rank, int n, int root, const perf_counts_t* c,
                           size_t* src) {
  (void)root, (void)c;
  *src = j;
  return (rank + n - 1) % n;
}

/* name, has_op, has_root, has_inplace, counts, source, bus_factor */
static const perf_coll_t perf_colls[PERF_NUM_COLLS] = {
    {PERF_ALLREDUCE, "allreduce", 1, 0, 1, allreduce_counts, allreduce_source, allreduce_factor},
    {PERF_ALLGATHER, "allgather", 0, 0, 1, allgather_counts, allgather_source, factor_ring},
    {PERF_REDUCESCATTER, "reducescatter", 1, 0, 1, reducescatter_counts, reducescatter_source,
     factor_ring},
    {PERF_ALLTOALL, "alltoall", 0, 0, 0, alltoall_counts, alltoall_source, factor_ring},
    {PERF_BROADCAST, "broadcast", 0, 1, 1, broadcast_counts, broadcast_source, factor_one},
    {PERF_REDUCE, "reduce", 1, 1, 1, reduce_counts, allreduce_source, factor_one},
    {PERF_GATHER, "gather", 0, 1, 1, gather_counts, allgather_source, factor_ring},
    {PERF_SCATTER, "scatter", 0, 1, 1, scatter_counts, scatter_source, factor_ring},
    {PERF_SENDRECV, "sendrecv", 0, 0, 1, sendrecv_counts, sendrecv_source, factor_one},
};

const perf_coll_t* perf_coll_find(const char* name) {
  for (int i = 0; i < PERF_NUM_COLLS; i++)
    if (strcmp(perf_colls[i].name, name) == 0) return &perf_colls[i];
  return NULL;
}

const perf_coll_t* perf_coll_get(perf_coll_id_t id) {
  return id < PERF_NUM_COLLS ? &perf_colls[id] : NULL;
}

int perf_coll_is_future_quantized(const char* name) {
  static const char* const future[] = {"allgather_q", "reducescatter_q", "allreduce_q"};
  for (size_t i = 0; i < sizeof future / sizeof future[0]; i++)
    if (strcmp(future[i], name) == 0) return 1;
  return 0;
}
