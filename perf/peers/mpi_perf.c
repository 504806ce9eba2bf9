/*
 * mpi_perf.c - the MPI peer of qccl-perf: the same driver, flags, inputs,
 * check and table (perf/perf_*.c), with MPI calls underneath. compare.py
 * builds it once per MPI, each with its own wrapper (mpicc.openmpi,
 * mpicc.mpich, Intel MPI's mpicc), into build/peers/:
 *
 *   mpicc.openmpi -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Iperf perf/peers/mpi_perf.c \
 *         perf/perf_args.c perf/perf_colls.c perf/perf_data.c perf/perf_driver.c \
 *         -lm -o mpi-perf
 *   mpirun --allow-run-as-root --oversubscribe -np 2 ./mpi-perf allreduce -b 1K -e 256M -f 4
 *
 * Each collective maps to what an MPI user would write for NCCL's
 * semantics: in place is MPI_IN_PLACE; reducescatter is
 * MPI_Reduce_scatter_block, whose in-place result lands at the start of
 * the buffer and is moved to block `rank` (NCCL's in-place layout);
 * out-of-place broadcast copies root's send buffer into its receive
 * buffer first (NCCL writes root's recvbuff too); sendrecv is
 * MPI_Sendrecv (MPI_Sendrecv_replace in place). Types without an MPI
 * equivalent (half, bfloat16, fp8) and avg are skipped.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "perf.h"

typedef struct {
  MPI_Comm comm;
  int rank, nranks;
  char err[MPI_MAX_ERROR_STRING + 32];
} mp_ctx_t;

static MPI_Datatype mp_type(qcclDataType_t t) {
  switch (t) {
    case qcclInt8:
      return MPI_INT8_T;
    case qcclUint8:
      return MPI_UINT8_T;
    case qcclInt32:
      return MPI_INT32_T;
    case qcclUint32:
      return MPI_UINT32_T;
    case qcclInt64:
      return MPI_INT64_T;
    case qcclUint64:
      return MPI_UINT64_T;
    case qcclFloat32:
      return MPI_FLOAT;
    case qcclFloat64:
      return MPI_DOUBLE;
    default:
      return MPI_DATATYPE_NULL;
  }
}

static MPI_Op mp_op(qcclRedOp_t op) {
  switch (op) {
    case qcclSum:
      return MPI_SUM;
    case qcclProd:
      return MPI_PROD;
    case qcclMax:
      return MPI_MAX;
    case qcclMin:
      return MPI_MIN;
    default:
      return MPI_OP_NULL;
  }
}

static int mp_count(size_t n) {
  return n > (size_t)0x7fffffff ? -1 : (int)n;
}

/* ---- the calls ---- */

static int mp_allreduce(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                        int root) {
  (void)root;
  return MPI_Allreduce(s == r ? MPI_IN_PLACE : s, r, mp_count(n), mp_type(t), mp_op(op),
                       ((mp_ctx_t*)ctx)->comm);
}

static int mp_allgather(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                        int root) {
  (void)op, (void)root;
  mp_ctx_t* m = ctx;
  int in_place = (char*)s == (char*)r + (size_t)m->rank * n * perf_type_size(t);
  return MPI_Allgather(in_place ? MPI_IN_PLACE : s, mp_count(n), mp_type(t), r, mp_count(n),
                       mp_type(t), m->comm);
}

static int mp_reducescatter(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                            int root) {
  (void)root;
  mp_ctx_t* m = ctx;
  size_t bytes = n * perf_type_size(t);
  if ((char*)r != (char*)s + (size_t)m->rank * bytes)
    return MPI_Reduce_scatter_block(s, r, mp_count(n), mp_type(t), mp_op(op), m->comm);
  int rc = MPI_Reduce_scatter_block(MPI_IN_PLACE, s, mp_count(n), mp_type(t), mp_op(op), m->comm);
  if (rc == MPI_SUCCESS && r != s) memmove(r, s, bytes);
  return rc;
}

static int mp_alltoall(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                       int root) {
  (void)op, (void)root;
  return MPI_Alltoall(s, mp_count(n), mp_type(t), r, mp_count(n), mp_type(t),
                      ((mp_ctx_t*)ctx)->comm);
}

static int mp_broadcast(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                        int root) {
  (void)op;
  mp_ctx_t* m = ctx;
  if (m->rank == root && s != r) memcpy(r, s, n * perf_type_size(t));
  return MPI_Bcast(r, mp_count(n), mp_type(t), root, m->comm);
}

static int mp_reduce(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                     int root) {
  mp_ctx_t* m = ctx;
  int in_place = s == r && m->rank == root;
  return MPI_Reduce(in_place ? MPI_IN_PLACE : s, r, mp_count(n), mp_type(t), mp_op(op), root,
                    m->comm);
}

static int mp_gather(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                     int root) {
  (void)op;
  mp_ctx_t* m = ctx;
  int in_place = m->rank == root && (char*)s == (char*)r + (size_t)root * n * perf_type_size(t);
  return MPI_Gather(in_place ? MPI_IN_PLACE : s, mp_count(n), mp_type(t), r, mp_count(n),
                    mp_type(t), root, m->comm);
}

static int mp_scatter(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                      int root) {
  (void)op;
  mp_ctx_t* m = ctx;
  int in_place = m->rank == root && (char*)r == (char*)s + (size_t)root * n * perf_type_size(t);
  return MPI_Scatter(s, mp_count(n), mp_type(t), in_place ? MPI_IN_PLACE : r, mp_count(n),
                     mp_type(t), root, m->comm);
}

static int mp_sendrecv(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                       int root) {
  (void)op, (void)root;
  mp_ctx_t* m = ctx;
  int next = (m->rank + 1) % m->nranks, prev = (m->rank + m->nranks - 1) % m->nranks;
  if (s == r)
    return MPI_Sendrecv_replace(r, mp_count(n), mp_type(t), next, 0, prev, 0, m->comm,
                                MPI_STATUS_IGNORE);
  return MPI_Sendrecv(s, mp_count(n), mp_type(t), next, 0, r, mp_count(n), mp_type(t), prev, 0,
                      m->comm, MPI_STATUS_IGNORE);
}

static const perf_run_fn mp_runs[PERF_NUM_COLLS] = {
    [PERF_ALLREDUCE] = mp_allreduce,
    [PERF_ALLGATHER] = mp_allgather,
    [PERF_REDUCESCATTER] = mp_reducescatter,
    [PERF_ALLTOALL] = mp_alltoall,
    [PERF_BROADCAST] = mp_broadcast,
    [PERF_REDUCE] = mp_reduce,
    [PERF_GATHER] = mp_gather,
    [PERF_SCATTER] = mp_scatter,
    [PERF_SENDRECV] = mp_sendrecv,
};

/* ---- what the driver needs besides the calls ---- */

static int mp_allreduce_f64(void* ctx, double* v, size_t n, perf_combine_t how) {
  MPI_Op op = how == PERF_COMBINE_MIN ? MPI_MIN : how == PERF_COMBINE_MAX ? MPI_MAX : MPI_SUM;
  return MPI_Allreduce(MPI_IN_PLACE, v, mp_count(n), MPI_DOUBLE, op, ((mp_ctx_t*)ctx)->comm);
}

static int mp_allgather_bytes(void* ctx, const void* mine, void* all, size_t len) {
  return MPI_Allgather(mine, mp_count(len), MPI_BYTE, all, mp_count(len), MPI_BYTE,
                       ((mp_ctx_t*)ctx)->comm);
}

static int mp_barrier(void* ctx) {
  return MPI_Barrier(((mp_ctx_t*)ctx)->comm);
}

static int mp_supports(void* ctx, perf_coll_id_t id, qcclDataType_t t, qcclRedOp_t op) {
  (void)ctx;
  const perf_coll_t* c = perf_coll_get(id);
  if (mp_type(t) == MPI_DATATYPE_NULL) return 0;
  return !c->has_op || mp_op(op) != MPI_OP_NULL;
}

static const char* mp_error(void* ctx, int rc) {
  mp_ctx_t* m = ctx;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (rc < 0) {
    snprintf(m->err, sizeof m->err, "count does not fit MPI's int");
    return m->err;
  }
  MPI_Error_string(rc, text, &len);
  snprintf(m->err, sizeof m->err, "MPI error %d: %.*s", rc, len, text);
  return m->err;
}

int main(int argc, char** argv) {
  const char* prog = "mpi-perf";
  MPI_Init(&argc, &argv);
  mp_ctx_t m;
  memset(&m, 0, sizeof m);
  m.comm = MPI_COMM_WORLD;
  MPI_Comm_set_errhandler(m.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(m.comm, &m.rank);
  MPI_Comm_size(m.comm, &m.nranks);
  int rc = PERF_EXIT_USAGE;
  if (argc < 2 || argv[1][0] == '-') {
    if (m.rank == 0) perf_usage(prog, 0);
    goto done;
  }
  const char* name = argv[1];
  argv[1] = (char*)prog;
  perf_args_t a;
  perf_args_defaults(&a);
  const perf_coll_t* coll = perf_coll_find(name);
  if (perf_args_parse(argc - 1, argv + 1, &a) != 0 || coll == NULL || a.quant.set) {
    if (m.rank == 0) {
      if (coll == NULL) fprintf(stderr, "%s: unknown collective '%s'\n", prog, name);
      if (a.quant.set) fprintf(stderr, "%s: -q: MPI has no quantized collectives\n", prog);
      perf_usage(prog, 0);
    }
    goto done;
  }
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int vlen = 0;
  MPI_Get_library_version(version, &vlen);
  char* nl = strpbrk(version, ",\n");
  if (nl) *nl = '\0';
  for (char* c = version; *c; c++) /* MPICH's "Version:\t4.0.2" (JSON has no raw tabs) */
    if (*c == '\t') *c = ' ';
  perf_backend_t be = {"mpi",      version,     m.rank,           m.nranks,
                       &m,         mp_runs,     mp_allreduce_f64, mp_allgather_bytes,
                       mp_barrier, mp_supports, mp_error,         NULL,
                       NULL};
  rc = perf_run(coll, &a, &be);
  if (rc == PERF_EXIT_LIBRARY) MPI_Abort(m.comm, rc);
done:
  MPI_Finalize();
  return rc;
}
