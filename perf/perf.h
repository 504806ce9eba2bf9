/*
 * perf.h - the shared driver of qccl-perf and of its peers (Open MPI, in
 * perf/peers/mpi_perf.c), shaped like nccl-tests' common.h.
 *
 * A collective is described once, by three small functions in
 * perf_colls.c (its buffer counts, where each output element comes from,
 * and its bus-bandwidth factor); each backend adds the fourth, the call
 * itself. The driver (perf_driver.c) sweeps the sizes, times warm-up and
 * timed iterations out of place and in place, checks every result against
 * an independent reference (perf_data.c) and prints nccl-tests' table.
 *
 * qccl.h is included for its enums only (data types, reduction ops): a
 * peer backend uses the same names without linking libqccl.
 */
#ifndef QCCL_PERF_H_
#define QCCL_PERF_H_

#include <stddef.h>
#include <stdint.h>

#include "qccl.h"

/* Exit codes of the perf tools. */
#define PERF_EXIT_OK 0
#define PERF_EXIT_WRONG 1   /* a result differed from the reference */
#define PERF_EXIT_USAGE 2   /* bad command line */
#define PERF_EXIT_LIBRARY 3 /* the library under test returned an error */
#define PERF_EXIT_SKIP 77   /* nothing to measure in this build */

#define PERF_ALIGN 4096 /* plain buffers start on a page (but -O) */

typedef enum {
  PERF_ALLREDUCE,
  PERF_ALLGATHER,
  PERF_REDUCESCATTER,
  PERF_ALLTOALL,
  PERF_BROADCAST,
  PERF_REDUCE,
  PERF_GATHER,
  PERF_SCATTER,
  PERF_SENDRECV,
  PERF_NUM_COLLS
} perf_coll_id_t;

/* Buffer layout of one collective call, in elements. In place, the send
 * pointer is recvbuf + send_inplace_off * rank and the receive pointer is
 * recvbuf + recv_inplace_off * rank (nccl-tests' convention). */
typedef struct {
  size_t sendcount;  /* elements read from the send pointer */
  size_t recvcount;  /* elements of the receive pointer's range */
  size_t paramcount; /* the count argument of the call */
  size_t send_inplace_off, recv_inplace_off;
  size_t checkcount; /* output elements defined on this rank (0: none) */
} perf_counts_t;

/* source() returns this for an element reduced over all ranks. */
#define PERF_SRC_ALL (-1)

typedef struct perf_coll {
  perf_coll_id_t id;
  const char* name;
  int has_op;      /* takes a reduction op */
  int has_root;    /* takes a root */
  int has_inplace; /* has an in-place form */
  /* counts for a size of `count` elements (nccl-tests' GetCollByteCount) */
  void (*counts)(size_t count, int nranks, int rank, int root, perf_counts_t* c);
  /* where output element j of `rank` comes from: the rank whose input holds
   * it (or PERF_SRC_ALL, reduced over ranks) and the index in that input */
  int (*source)(size_t j, int rank, int nranks, int root, const perf_counts_t* c,
                size_t* src_index);
  /* busbw = algbw * bus_factor (nccl-tests' GetBw) */
  double (*bus_factor)(int nranks);
} perf_coll_t;

/* One call of a collective (nccl-tests' RunColl); 0 on success, else a
 * backend result code for perf_backend_t.error. */
typedef int (*perf_run_fn)(void* ctx, void* sendbuf, void* recvbuf, size_t paramcount,
                           qcclDataType_t type, qcclRedOp_t op, int root);

typedef enum { PERF_COMBINE_SUM, PERF_COMBINE_MIN, PERF_COMBINE_MAX } perf_combine_t;

/* What the driver needs from the library under test. */
typedef struct perf_backend {
  const char* name; /* "qccl", "Open MPI" */
  const char* version;
  int rank, nranks;
  void* ctx;
  const perf_run_fn* runs; /* indexed by perf_coll_id_t; NULL: not offered */
  /* combine v[0..n) over ranks in place */
  int (*allreduce_f64)(void* ctx, double* v, size_t n, perf_combine_t how);
  /* every rank's `len` bytes, in rank order, into all */
  int (*allgather_bytes)(void* ctx, const void* mine, void* all, size_t len);
  int (*barrier)(void* ctx);
  /* 1 if the backend can run this type and op */
  int (*supports)(void* ctx, perf_coll_id_t id, qcclDataType_t type, qcclRedOp_t op);
  /* text for a failed call's result code (the library's last error) */
  const char* (*error)(void* ctx, int rc);
  /* -R 1: buffers from the library's allocator (qcclMemAlloc), NULL: none */
  void* (*mem_alloc)(void* ctx, size_t bytes);
  void (*mem_free)(void* ctx, void* p);
} perf_backend_t;

/* -q int8|int4[:bBLOCK][:asym][:rot][:sr] */
typedef struct {
  int set;
  int bits, block, asym, rotate, stochastic;
} perf_quant_opt_t;

#define PERF_MAX_TYPES 12
#define PERF_MAX_OPS 5

typedef struct {
  size_t min_bytes, max_bytes, step_bytes;
  size_t step_factor; /* > 1: multiply, else add step_bytes */
  int iters, warmup, check, average, blocking, timeout_s;
  int root;
  const char* json_path;
  qcclDataType_t types[PERF_MAX_TYPES];
  int ntypes;
  qcclRedOp_t ops[PERF_MAX_OPS];
  int nops;
  uint64_t seed;
  perf_quant_opt_t quant;
  int quiet_header; /* --no-header: table rows and footer only */
  int registered;   /* -R 1: buffers from the backend's allocator */
  int offset;       /* -O: buffers start this many bytes past a page (0-4095) */
} perf_args_t;

/* ---- perf_args.c ---- */

/* Sets the nccl-tests defaults. */
void perf_args_defaults(perf_args_t* a);
/* Parses the flags after the collective's name (argv[0] is the program).
 * Returns 0, or PERF_EXIT_USAGE after printing why to stderr. */
int perf_args_parse(int argc, char** argv, perf_args_t* a);
/* Parses "8", "64K", "256M", "1G" (K = 1024). Returns 0 or -1. */
int perf_parse_size(const char* s, size_t* bytes);
/* Parses the -q format string. Returns 0 or -1. */
int perf_parse_quant(const char* s, perf_quant_opt_t* q);
/* Writes a -q format back as text, e.g. "int4:b128:asym". */
void perf_quant_name(const perf_quant_opt_t* q, char* buf, size_t len);
void perf_usage(const char* prog, int backend_is_qccl);

/* ---- perf_colls.c ---- */

const perf_coll_t* perf_coll_find(const char* name);
const perf_coll_t* perf_coll_get(perf_coll_id_t id);
/* 1 if name is a quantized collective that is not in this build yet */
int perf_coll_is_future_quantized(const char* name);

/* ---- perf_data.c ---- */

size_t perf_type_size(qcclDataType_t t);
const char* perf_type_name(qcclDataType_t t);
int perf_type_parse(const char* s, qcclDataType_t* t);
int perf_type_is_float(qcclDataType_t t);
const char* perf_op_name(qcclRedOp_t op);
int perf_op_parse(const char* s, qcclRedOp_t* op);
/* The value of `rank`'s input element idx as stored in type t: a pure
 * function of (seed, rank, idx), chosen per op so that results stay exact
 * or within the stated tolerance. */
double perf_input(uint64_t seed, int rank, size_t idx, qcclDataType_t t, qcclRedOp_t op);
/* Writes inputs idx0..idx0+n of rank into buf. */
void perf_fill(void* buf, size_t n, qcclDataType_t t, qcclRedOp_t op, uint64_t seed, int rank,
               size_t idx0);
/* Fills an output buffer with a value the check never expects. */
void perf_poison(void* buf, size_t n, qcclDataType_t t);
/* Rounds x to the nearest value of a float type t (ties to even). */
double perf_round_to_type(double x, qcclDataType_t t);
/* Stores x (already representable) as element i of type t. */
void perf_store(void* buf, size_t i, qcclDataType_t t, double x);
/* Loads element i of type t as a double. */
double perf_load(const void* buf, size_t i, qcclDataType_t t);

typedef struct {
  size_t wrong;
  size_t first_index; /* of the first wrong element */
  double first_got, first_expected;
} perf_check_t;

/* Compares the output of one call on this rank with the reference. */
void perf_check(const perf_coll_t* coll, const perf_counts_t* c, const void* recvptr,
                qcclDataType_t t, qcclRedOp_t op, int rank, int nranks, int root, uint64_t seed,
                perf_check_t* out);
/* One line that states the check's tolerance rule. */
const char* perf_check_rule(void);

/* ---- perf_driver.c ---- */

/* Runs the sweep of coll; returns the exit code. */
int perf_run(const perf_coll_t* coll, const perf_args_t* a, perf_backend_t* be);
double perf_now(void);

/* ---- perf_quant.c (qccl-perf only) ---- */

/* The `quant` mode: the codec alone, one process. Returns the exit code. */
int perf_quant_main(const perf_args_t* a);

#endif /* QCCL_PERF_H_ */
