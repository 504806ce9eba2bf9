/*
 * nccl_shim.c - the drop-in libnccl.so.2: NCCL 2.28's communicator
 * lifecycle, errors and memory calls over qccl's public API.
 *
 * Each ncclX is a weak alias of pncclX (NCCL's arrangement for profilers).
 * The mapping, call by call:
 *   ncclGetVersion       2.28.99: NCCL 2.28's API; patch 99 tells qccl's
 *                        library from NVIDIA's (nccl_abi.h)
 *   ncclGetUniqueId, ncclCommInitRank(Config), ncclCommSplit, Finalize,
 *   Destroy, Abort, Count, UserRank, GetAsyncError: the qccl calls; a
 *                        config's blocking = 0 is accepted (every call
 *                        completes before it returns, which a non-blocking
 *                        communicator allows), commName is passed on, the
 *                        other fields are performance hints for GPUs and
 *                        are ignored
 *   ncclCommInitRankScalable: the first of the ids (qccl's root serves any
 *                        number of ranks)
 *   ncclCommInitAll      ndev = 1 only: more ranks in one process would
 *                        need one thread per rank (an error naming the call)
 *   ncclCommCuDevice     the CUDA device current at creation, else 0
 *   ncclCommRegister / Deregister: accepted, nothing to register
 *   ncclMemAlloc / Free  qcclMemAlloc / qcclMemFree: host memory
 *   ncclCommRevoke, ncclCommShrink, ncclCommWindowRegister /
 *   Deregister: ncclInvalidUsage naming the call
 *   ncclGetErrorString, ncclGetLastError: the thread's last failure, as
 *                        "<ncclCall>: <message>"
 * Result codes are NCCL's (qccl shares them); qcclTimeout becomes
 * ncclRemoteError, its message says timeout. The collectives are in
 * nccl_coll.c, the CUDA runtime probe in nccl_cuda.c.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nccl_shim.h"
#include "qccl_nccl.h"

/* The values the two headers share; tests/nccl/nccl_abi_check.c asserts
 * the same against the toolkit's nccl.h. */
_Static_assert(sizeof(ncclUniqueId) == sizeof(qcclUniqueId), "unique id size");
_Static_assert(NCCL_UNIQUE_ID_BYTES == QCCL_UNIQUE_ID_BYTES, "unique id bytes");
_Static_assert((int)ncclSuccess == (int)qcclSuccess &&
                   (int)ncclUnhandledCudaError == (int)qcclUnhandledCudaError &&
                   (int)ncclSystemError == (int)qcclSystemError &&
                   (int)ncclInternalError == (int)qcclInternalError &&
                   (int)ncclInvalidArgument == (int)qcclInvalidArgument &&
                   (int)ncclInvalidUsage == (int)qcclInvalidUsage &&
                   (int)ncclRemoteError == (int)qcclRemoteError &&
                   (int)ncclInProgress == (int)qcclInProgress,
               "result codes");
_Static_assert(NCCL_SPLIT_NOCOLOR == QCCL_SPLIT_NOCOLOR, "split color");

/* ------------------------------------------------------------------------
 * Logging and the last error
 * ------------------------------------------------------------------------ */

static pthread_once_t shim_log_once = PTHREAD_ONCE_INIT;
static int shim_log_level; /* 0: silent */
static char shim_log_host[64];

static void shim_log_init(void) {
  const char* v = getenv("QCCL_DEBUG");
  if (v == NULL) return;
  if (strcasecmp(v, "WARN") == 0) shim_log_level = SHIM_LOG_WARN;
  if (strcasecmp(v, "INFO") == 0) shim_log_level = SHIM_LOG_INFO;
  if (strcasecmp(v, "TRACE") == 0) shim_log_level = SHIM_LOG_TRACE;
  if (gethostname(shim_log_host, sizeof shim_log_host) != 0) snprintf(shim_log_host, 8, "?");
  shim_log_host[sizeof shim_log_host - 1] = '\0';
}

void shim_log(shim_log_level_t level, const char* fmt, ...) {
  pthread_once(&shim_log_once, shim_log_init);
  if ((int)level > shim_log_level) return;
  static const char* const names[] = {"", "WARN", "INFO", "TRACE"};
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s:%d:%ld qccl %s [NCCL] %s\n", shim_log_host, (int)getpid(),
          (long)syscall(SYS_gettid), names[level], msg);
}

#define SHIM_LAST_ERROR_BYTES 1024
static _Thread_local char shim_last_error[SHIM_LAST_ERROR_BYTES];

ncclResult_t shim_fail(ncclResult_t res, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(shim_last_error, sizeof shim_last_error, fmt, ap);
  va_end(ap);
  shim_log(SHIM_LOG_WARN, "%s (%s)", shim_last_error, qcclGetErrorString((qcclResult_t)res));
  return res;
}

ncclResult_t shim_map_result(qcclResult_t r) {
  switch (r) {
    case qcclSuccess:
      return ncclSuccess;
    case qcclUnhandledCudaError:
      return ncclUnhandledCudaError;
    case qcclSystemError:
      return ncclSystemError;
    case qcclInternalError:
      return ncclInternalError;
    case qcclInvalidArgument:
      return ncclInvalidArgument;
    case qcclInvalidUsage:
      return ncclInvalidUsage;
    case qcclRemoteError:
    case qcclTimeout: /* NCCL has no timeout code: a peer that does not answer */
      return ncclRemoteError;
    case qcclInProgress:
      return ncclInProgress;
    default:
      return ncclInternalError;
  }
}

ncclResult_t shim_result(const char* call, const struct ncclComm* comm, qcclResult_t r) {
  if (r == qcclSuccess) return ncclSuccess;
  const char* msg = qcclGetLastError(NULL); /* this thread's last qccl failure */
  if (msg[0] == '\0' && comm != NULL) msg = qcclGetLastError(comm->q);
  if (msg[0] == '\0') msg = qcclGetErrorString(r);
  return shim_fail(shim_map_result(r), "%s: %s%s", call, msg,
                   r == qcclTimeout ? " (qccl: timeout)" : "");
}

ncclResult_t shim_comm_check(const char* call, const struct ncclComm* comm) {
  if (comm == NULL) return shim_fail(ncclInvalidArgument, "%s: comm is NULL", call);
  if (comm->magic != NCCL_SHIM_COMM_MAGIC)
    return shim_fail(ncclInvalidArgument,
                     "%s: comm %p is not a live communicator of qccl's libnccl (destroyed, or "
                     "made by another library)",
                     call, (const void*)comm);
  return ncclSuccess;
}

ncclResult_t shim_unsupported(const char* call, const char* reason) {
  return shim_fail(ncclInvalidUsage, "%s: not supported by qccl's libnccl: %s", call, reason);
}

const char* pncclGetErrorString(ncclResult_t result) {
  if ((int)result < 0 || (int)result >= (int)ncclNumResults) return "unknown result code";
  return qcclGetErrorString((qcclResult_t)result);
}
NCCL_SHIM_ALIAS(ncclGetErrorString);

const char* pncclGetLastError(ncclComm_t comm) {
  if (shim_last_error[0] != '\0') return shim_last_error;
  if (comm != NULL && comm->magic == NCCL_SHIM_COMM_MAGIC) return qcclGetLastError(comm->q);
  return shim_last_error;
}
NCCL_SHIM_ALIAS(ncclGetLastError);

void pncclResetDebugInit(void) {
  /* qccl reads QCCL_DEBUG once per process: nothing to reset */
}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
NCCL_SHIM_ALIAS(ncclResetDebugInit);
#pragma GCC diagnostic pop

ncclResult_t pncclGetVersion(int* version) {
  if (version == NULL) return shim_fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_SHIM_VERSION_CODE;
  return ncclSuccess;
}
NCCL_SHIM_ALIAS(ncclGetVersion);

/* ------------------------------------------------------------------------
 * Communicators
 * ------------------------------------------------------------------------ */

/* A config of NCCL's into qccl's. Fields are read only as far as the
 * caller's struct reaches (config->size: older headers had fewer). */
static ncclResult_t shim_config(const char* call, const ncclConfig_t* in, qcclConfig_t* out) {
  if (in->magic != NCCL_SHIM_CONFIG_MAGIC)
    return shim_fail(ncclInvalidArgument,
                     "%s: config: magic 0x%x is not NCCL_CONFIG_INITIALIZER's (0x%x): start "
                     "from NCCL_CONFIG_INITIALIZER",
                     call, in->magic, NCCL_SHIM_CONFIG_MAGIC);
  if (in->size < offsetof(ncclConfig_t, blocking) + sizeof(int))
    return shim_fail(ncclInvalidArgument, "%s: config: size %zu is smaller than any ncclConfig_t",
                     call, in->size);
  qcclConfig_t def = QCCL_CONFIG_INITIALIZER;
  *out = def;
  if (in->blocking != NCCL_CONFIG_UNDEF_INT && in->blocking != 0 && in->blocking != 1)
    return shim_fail(ncclInvalidArgument, "%s: config->blocking = %d: must be 0 or 1", call,
                     in->blocking);
  /* blocking 0: every call completes before it returns, which NCCL allows a
   * non-blocking communicator (ncclInProgress is never returned) */
  if (in->size >= offsetof(ncclConfig_t, commName) + sizeof(const char*) && in->commName != NULL)
    out->commName = in->commName;
  return ncclSuccess;
}

/* A new struct ncclComm around q (allocated before the collective init so
 * that a failed allocation cannot leave the peers with a communicator). */
static struct ncclComm* shim_comm_alloc(const char* call) {
  struct ncclComm* c = calloc(1, sizeof *c);
  if (c == NULL) shim_fail(ncclSystemError, "%s: out of memory", call);
  return c;
}

static void shim_comm_set(struct ncclComm* c, qcclComm_t q, int device) {
  c->q = q;
  c->cuda_device = device;
  c->magic = NCCL_SHIM_COMM_MAGIC;
}

static ncclResult_t shim_init(const char* call, ncclComm_t* comm, int nranks,
                              const ncclUniqueId* id, int rank, qcclConfig_t* config) {
  if (comm == NULL) return shim_fail(ncclInvalidArgument, "%s: comm is a NULL pointer", call);
  qcclUniqueId qid;
  memcpy(&qid, id, sizeof qid);
  struct ncclComm* c = shim_comm_alloc(call);
  if (c == NULL) return ncclSystemError;
  qcclComm_t q;
  qcclResult_t r = qcclCommInitRankConfig(&q, nranks, qid, rank, config);
  if (r != qcclSuccess) {
    free(c);
    return shim_result(call, NULL, r);
  }
  shim_comm_set(c, q, shim_cuda_device());
  *comm = c;
  return ncclSuccess;
}

ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == NULL) return shim_fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  qcclUniqueId qid;
  qcclResult_t r = qcclGetUniqueId(&qid);
  if (r != qcclSuccess) return shim_result("ncclGetUniqueId", NULL, r);
  memcpy(uniqueId, &qid, sizeof qid);
  return ncclSuccess;
}
NCCL_SHIM_ALIAS(ncclGetUniqueId);

ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return shim_init("ncclCommInitRank", comm, nranks, &commId, rank, NULL);
}
NCCL_SHIM_ALIAS(ncclCommInitRank);

ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config) {
  static const char call[] = "ncclCommInitRankConfig";
  qcclConfig_t qc;
  if (config != NULL) SHIM_CHECK(shim_config(call, config, &qc));
  return shim_init(call, comm, nranks, &commId, rank, config != NULL ? &qc : NULL);
}
NCCL_SHIM_ALIAS(ncclCommInitRankConfig);

ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config) {
  static const char call[] = "ncclCommInitRankScalable";
  if (nId < 1) return shim_fail(ncclInvalidArgument, "%s: nId = %d: must be >= 1", call, nId);
  if (commIds == NULL) return shim_fail(ncclInvalidArgument, "%s: commIds is NULL", call);
  qcclConfig_t qc;
  if (config != NULL) SHIM_CHECK(shim_config(call, config, &qc));
  /* one root serves every rank: the first id is enough */
  return shim_init(call, newcomm, nranks, &commIds[0], myrank, config != NULL ? &qc : NULL);
}
NCCL_SHIM_ALIAS(ncclCommInitRankScalable);

ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  static const char call[] = "ncclCommInitAll";
  if (comm == NULL) return shim_fail(ncclInvalidArgument, "%s: comm is a NULL pointer", call);
  if (ndev < 1) return shim_fail(ncclInvalidArgument, "%s: ndev = %d: must be >= 1", call, ndev);
  if (ndev > 1)
    return shim_fail(ncclInvalidUsage,
                     "%s: ndev = %d: not supported by qccl's libnccl: qccl runs one rank per "
                     "process (a thread that calls one collective on several communicators "
                     "would wait on itself); start one process per rank",
                     call, ndev);
  ncclUniqueId id;
  SHIM_CHECK(pncclGetUniqueId(&id));
  SHIM_CHECK(shim_init(call, comm, 1, &id, 0, NULL));
  if (devlist != NULL) comm[0]->cuda_device = devlist[0];
  return ncclSuccess;
}
NCCL_SHIM_ALIAS(ncclCommInitAll);

ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                            ncclConfig_t* config) {
  static const char call[] = "ncclCommSplit";
  SHIM_CHECK(shim_comm_check(call, comm));
  if (newcomm == NULL) return shim_fail(ncclInvalidArgument, "%s: newcomm is NULL", call);
  qcclConfig_t qc;
  if (config != NULL) SHIM_CHECK(shim_config(call, config, &qc));
  struct ncclComm* c = shim_comm_alloc(call);
  if (c == NULL) return ncclSystemError;
  qcclComm_t q = NULL;
  qcclResult_t r = qcclCommSplit(comm->q, color, key, &q, config != NULL ? &qc : NULL);
  if (r != qcclSuccess || q == NULL) {
    free(c);
    if (r != qcclSuccess) return shim_result(call, comm, r);
    *newcomm = NULL; /* NCCL_SPLIT_NOCOLOR */
    return ncclSuccess;
  }
  shim_comm_set(c, q, comm->cuda_device);
  *newcomm = c;
  return ncclSuccess;
}
NCCL_SHIM_ALIAS(ncclCommSplit);

ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  SHIM_CHECK(shim_comm_check("ncclCommFinalize", comm));
  return shim_result("ncclCommFinalize", comm, qcclCommFinalize(comm->q));
}
NCCL_SHIM_ALIAS(ncclCommFinalize);

/* Destroy and Abort free the handle once qccl has freed the communicator. */
static ncclResult_t shim_comm_end(const char* call, ncclComm_t comm,
                                  qcclResult_t (*end)(qcclComm_t)) {
  if (comm == NULL) return ncclSuccess; /* as NCCL */
  SHIM_CHECK(shim_comm_check(call, comm));
  qcclResult_t r = end(comm->q);
  if (r != qcclSuccess) return shim_result(call, comm, r);
  comm->magic = NCCL_SHIM_COMM_DEAD;
  comm->q = NULL;
  free(comm);
  return ncclSuccess;
}

ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  return shim_comm_end("ncclCommDestroy", comm, qcclCommDestroy);
}
NCCL_SHIM_ALIAS(ncclCommDestroy);

ncclResult_t pncclCommAbort(ncclComm_t comm) {
  return shim_comm_end("ncclCommAbort", comm, qcclCommAbort);
}
NCCL_SHIM_ALIAS(ncclCommAbort);

ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  (void)comm;
  (void)revokeFlags;
  return shim_unsupported("ncclCommRevoke",
                          "qccl cannot stop operations in flight and keep the communicator; "
                          "use ncclCommAbort");
}
NCCL_SHIM_ALIAS(ncclCommRevoke);

ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  (void)comm;
  (void)excludeRanksList;
  (void)excludeRanksCount;
  (void)newcomm;
  (void)config;
  (void)shrinkFlags;
  return shim_unsupported("ncclCommShrink",
                          "qccl makes sub-communicators only with every rank taking part "
                          "(ncclCommSplit)");
}
NCCL_SHIM_ALIAS(ncclCommShrink);

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  static const char call[] = "ncclCommGetAsyncError";
  SHIM_CHECK(shim_comm_check(call, comm));
  if (asyncError == NULL) return shim_fail(ncclInvalidArgument, "%s: asyncError is NULL", call);
  qcclResult_t a;
  qcclResult_t r = qcclCommGetAsyncError(comm->q, &a);
  if (r != qcclSuccess) return shim_result(call, comm, r);
  *asyncError = shim_map_result(a);
  return ncclSuccess;
}
NCCL_SHIM_ALIAS(ncclCommGetAsyncError);

ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  SHIM_CHECK(shim_comm_check("ncclCommCount", comm));
  return shim_result("ncclCommCount", comm, qcclCommCount(comm->q, count));
}
NCCL_SHIM_ALIAS(ncclCommCount);

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  SHIM_CHECK(shim_comm_check("ncclCommUserRank", comm));
  return shim_result("ncclCommUserRank", comm, qcclCommUserRank(comm->q, rank));
}
NCCL_SHIM_ALIAS(ncclCommUserRank);

ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  SHIM_CHECK(shim_comm_check("ncclCommCuDevice", comm));
  if (device == NULL) return shim_fail(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  *device = comm->cuda_device;
  return ncclSuccess;
}
NCCL_SHIM_ALIAS(ncclCommCuDevice);

/* Registration is an optimization of NCCL's; qccl has nothing to register
 * (its own fast path is memory from ncclMemAlloc). */
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  (void)size;
  SHIM_CHECK(shim_comm_check("ncclCommRegister", comm));
  if (handle == NULL) return shim_fail(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  *handle = buff;
  return ncclSuccess;
}
NCCL_SHIM_ALIAS(ncclCommRegister);

ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  (void)handle;
  return shim_comm_check("ncclCommDeregister", comm);
}
NCCL_SHIM_ALIAS(ncclCommDeregister);

ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                     int winFlags) {
  (void)comm;
  (void)buff;
  (void)size;
  (void)win;
  (void)winFlags;
  return shim_unsupported("ncclCommWindowRegister",
                          "symmetric memory windows are for NCCL's device-side API");
}
NCCL_SHIM_ALIAS(ncclCommWindowRegister);

ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  (void)comm;
  (void)win;
  return shim_unsupported("ncclCommWindowDeregister",
                          "symmetric memory windows are for NCCL's device-side API");
}
NCCL_SHIM_ALIAS(ncclCommWindowDeregister);

/* ------------------------------------------------------------------------
 * Memory: host memory the ranks of a host can map (qcclMemAlloc)
 * ------------------------------------------------------------------------ */

ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  return shim_result("ncclMemAlloc", NULL, qcclMemAlloc(ptr, size));
}
NCCL_SHIM_ALIAS(ncclMemAlloc);

ncclResult_t pncclMemFree(void* ptr) {
  return shim_result("ncclMemFree", NULL, qcclMemFree(ptr));
}
NCCL_SHIM_ALIAS(ncclMemFree);

/* ------------------------------------------------------------------------
 * qccl's addition (qccl_nccl.h)
 * ------------------------------------------------------------------------ */

qcclResult_t qcclCommFromNccl(struct ncclComm* comm, qcclComm_t* qcomm) {
  if (shim_comm_check("qcclCommFromNccl", comm) != ncclSuccess) return qcclInvalidArgument;
  if (qcomm == NULL) {
    shim_fail(ncclInvalidArgument, "qcclCommFromNccl: qcomm is NULL");
    return qcclInvalidArgument;
  }
  *qcomm = comm->q;
  return qcclSuccess;
}
