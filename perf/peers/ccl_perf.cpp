/*
 * ccl_perf.cpp - the oneCCL peer of qccl-perf: the same driver, flags,
 * inputs, check and table (perf/perf_*.c), with oneCCL's C++ API on host
 * buffers underneath.
 *
 *   tools/setup-peers.sh builds it (Intel MPI's mpicxx, oneCCL from PyPI);
 *   CCL_ATL_TRANSPORT=ofi CCL_ATL_SHM=1 I_MPI_FABRICS=shm \
 *     <venv>/bin/mpirun -n 2 build/peers/ccl-perf allreduce -b 1K -e 256M -f 4
 *
 * Intel MPI starts the ranks and carries the bootstrap: rank 0 creates
 * oneCCL's main key-value store and broadcasts its address, every rank
 * builds one communicator from it. The timed calls are oneCCL's, each
 * waited on before it returns (ccl::event::wait); the driver's own
 * bookkeeping (the f64 reductions of the timings, the check's byte
 * gathers) goes through MPI, as it is not measured.
 *
 * NCCL's semantics map directly: in place passes the same buffer (the
 * rank's block of it for allgather and reducescatter); out-of-place
 * broadcast is oneCCL's two-buffer broadcast. oneCCL has no gather,
 * scatter or in-place send/recv, so those (and sendrecv) are skipped, as
 * are the fp8 types and avg (refused on host buffers).
 */
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <oneapi/ccl.hpp>

extern "C" {
#include "perf.h"
}

namespace {

struct cp_ctx_t {
  ccl::communicator* comm;
  MPI_Comm mpi;
  int rank, nranks;
  char err[512];
};

/* the type's oneCCL name; false if oneCCL has none */
bool cp_type(qcclDataType_t t, ccl::datatype* out) {
  switch (t) {
    case qcclInt8:
      *out = ccl::datatype::int8;
      return true;
    case qcclUint8:
      *out = ccl::datatype::uint8;
      return true;
    case qcclInt32:
      *out = ccl::datatype::int32;
      return true;
    case qcclUint32:
      *out = ccl::datatype::uint32;
      return true;
    case qcclInt64:
      *out = ccl::datatype::int64;
      return true;
    case qcclUint64:
      *out = ccl::datatype::uint64;
      return true;
    case qcclFloat16:
      *out = ccl::datatype::float16;
      return true;
    case qcclFloat32:
      *out = ccl::datatype::float32;
      return true;
    case qcclFloat64:
      *out = ccl::datatype::float64;
      return true;
    case qcclBfloat16:
      *out = ccl::datatype::bfloat16;
      return true;
    default:
      return false;
  }
}

/* avg is refused on host buffers ("not supported for the scheduler path") */
bool cp_op(qcclRedOp_t op, ccl::reduction* out) {
  switch (op) {
    case qcclSum:
      *out = ccl::reduction::sum;
      return true;
    case qcclProd:
      *out = ccl::reduction::prod;
      return true;
    case qcclMax:
      *out = ccl::reduction::max;
      return true;
    case qcclMin:
      *out = ccl::reduction::min;
      return true;
    default:
      return false;
  }
}

ccl::datatype dt(qcclDataType_t t) {
  ccl::datatype d = ccl::datatype::int8;
  cp_type(t, &d);
  return d;
}

ccl::reduction rop(qcclRedOp_t op) {
  ccl::reduction r = ccl::reduction::sum;
  cp_op(op, &r);
  return r;
}

/* Runs one oneCCL call to completion; 0, or 1 with the exception's text
 * kept for cp_error. */
template <class F>
int cp_call(void* ctx, F call) {
  cp_ctx_t* c = static_cast<cp_ctx_t*>(ctx);
  try {
    call(*c->comm).wait();
    return 0;
  } catch (const std::exception& e) {
    snprintf(c->err, sizeof c->err, "%s", e.what());
    return 1;
  }
}

/* ---- the calls ---- */

int cp_allreduce(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                 int root) {
  (void)root;
  return cp_call(ctx,
                 [&](ccl::communicator& c) { return ccl::allreduce(s, r, n, dt(t), rop(op), c); });
}

int cp_allgather(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                 int root) {
  (void)op, (void)root;
  return cp_call(ctx, [&](ccl::communicator& c) { return ccl::allgather(s, r, n, dt(t), c); });
}

int cp_reducescatter(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                     int root) {
  (void)root;
  return cp_call(
      ctx, [&](ccl::communicator& c) { return ccl::reduce_scatter(s, r, n, dt(t), rop(op), c); });
}

int cp_alltoall(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op, int root) {
  (void)op, (void)root;
  return cp_call(ctx, [&](ccl::communicator& c) { return ccl::alltoall(s, r, n, dt(t), c); });
}

int cp_broadcast(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op,
                 int root) {
  (void)op;
  return cp_call(ctx, [&](ccl::communicator& c) {
    return s == r ? ccl::broadcast(r, n, dt(t), root, c) : ccl::broadcast(s, r, n, dt(t), root, c);
  });
}

int cp_reduce(void* ctx, void* s, void* r, size_t n, qcclDataType_t t, qcclRedOp_t op, int root) {
  return cp_call(
      ctx, [&](ccl::communicator& c) { return ccl::reduce(s, r, n, dt(t), rop(op), root, c); });
}

perf_run_fn cp_runs[PERF_NUM_COLLS];

/* ---- what the driver needs besides the calls ---- */

int cp_allreduce_f64(void* ctx, double* v, size_t n, perf_combine_t how) {
  MPI_Op op = how == PERF_COMBINE_MIN ? MPI_MIN : how == PERF_COMBINE_MAX ? MPI_MAX : MPI_SUM;
  return MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_DOUBLE, op, static_cast<cp_ctx_t*>(ctx)->mpi);
}

int cp_allgather_bytes(void* ctx, const void* mine, void* all, size_t len) {
  return MPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE,
                       static_cast<cp_ctx_t*>(ctx)->mpi);
}

int cp_barrier(void* ctx) {
  return cp_call(ctx, [](ccl::communicator& c) { return ccl::barrier(c); });
}

int cp_supports(void* ctx, perf_coll_id_t id, qcclDataType_t t, qcclRedOp_t op) {
  (void)ctx;
  ccl::datatype d;
  ccl::reduction r;
  if (!cp_type(t, &d)) return 0;
  return !perf_coll_get(id)->has_op || cp_op(op, &r);
}

const char* cp_error(void* ctx, int rc) {
  cp_ctx_t* c = static_cast<cp_ctx_t*>(ctx);
  if (rc != 1) snprintf(c->err, sizeof c->err, "MPI error %d", rc);
  return c->err;
}

/* Every rank's communicator, from rank 0's key-value store. */
ccl::communicator* cp_comm_create(int rank, int nranks, MPI_Comm mpi) {
  ccl::shared_ptr_class<ccl::kvs> kvs;
  ccl::kvs::address_type addr;
  if (rank == 0) {
    kvs = ccl::create_main_kvs();
    addr = kvs->get_address();
  }
  MPI_Bcast(addr.data(), (int)addr.size(), MPI_BYTE, 0, mpi);
  if (rank != 0) kvs = ccl::create_kvs(addr);
  return new ccl::communicator(ccl::create_communicator(nranks, rank, kvs));
}

}  // namespace

int main(int argc, char** argv) {
  const char* prog = "ccl-perf";
  cp_runs[PERF_ALLREDUCE] = cp_allreduce;
  cp_runs[PERF_ALLGATHER] = cp_allgather;
  cp_runs[PERF_REDUCESCATTER] = cp_reducescatter;
  cp_runs[PERF_ALLTOALL] = cp_alltoall;
  cp_runs[PERF_BROADCAST] = cp_broadcast;
  cp_runs[PERF_REDUCE] = cp_reduce;
  ccl::init();
  MPI_Init(&argc, &argv);
  cp_ctx_t c;
  memset(&c, 0, sizeof c);
  c.mpi = MPI_COMM_WORLD;
  MPI_Comm_rank(c.mpi, &c.rank);
  MPI_Comm_size(c.mpi, &c.nranks);
  int rc = PERF_EXIT_USAGE;
  perf_args_t a;
  perf_args_defaults(&a);
  const perf_coll_t* coll = argc >= 2 ? perf_coll_find(argv[1]) : NULL;
  if (argc < 2 || argv[1][0] == '-') {
    if (c.rank == 0) perf_usage(prog, 0);
    MPI_Finalize();
    return rc;
  }
  {
    const char* name = argv[1];
    argv[1] = (char*)prog;
    if (perf_args_parse(argc - 1, argv + 1, &a) != 0 || coll == NULL || a.quant.set) {
      if (c.rank == 0) {
        if (coll == NULL) fprintf(stderr, "%s: unknown collective '%s'\n", prog, name);
        if (a.quant.set) fprintf(stderr, "%s: -q: oneCCL has no quantized collectives\n", prog);
        perf_usage(prog, 0);
      }
      MPI_Finalize();
      return rc;
    }
  }
  try {
    c.comm = cp_comm_create(c.rank, c.nranks, c.mpi);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s: rank %d: communicator: %s\n", prog, c.rank, e.what());
    MPI_Abort(c.mpi, PERF_EXIT_LIBRARY);
  }
  ccl::library_version v = ccl::get_library_version();
  char version[128];
  snprintf(version, sizeof version, "oneCCL %u.%u.%u", v.major, v.minor, v.update);
  perf_backend_t be = {"ccl",      version,     c.rank,           c.nranks,
                       &c,         cp_runs,     cp_allreduce_f64, cp_allgather_bytes,
                       cp_barrier, cp_supports, cp_error,         NULL,
                       NULL};
  rc = perf_run(coll, &a, &be);
  if (rc == PERF_EXIT_LIBRARY) MPI_Abort(c.mpi, rc);
  delete c.comm;
  MPI_Finalize();
  return rc;
}
