/*
 * launch_pmix.c - rendezvous through the launcher's PMIx server (Open MPI's
 * mpirun, srun --mpi=pmix, prterun), so that nothing has to be set by hand
 * and the bootstrap secret is random.
 *
 * The launcher names its server in the ranks' environment (PMIX_NAMESPACE,
 * PMIX_RANK, PMIX_SERVER_URI*); PMIx_Init connects to it once per process
 * (PMIx counts nested inits, so an MPI program that also uses PMIx is
 * fine) and PMIx_Finalize runs at exit. Rank, size (PMIX_JOB_SIZE), local
 * rank and size and the host name come from the server.
 *
 * Sharing the id (launch_pmix_share): rank 0 has made a unique id (root
 * address and a fresh random secret, as qcclGetUniqueId does) and puts it
 * under the key "qccl.id.<n>" (n counts the communicators this process made
 * from the environment), commits, and every rank joins one fence over the
 * job that collects the data; then the others get the key from rank 0.
 * Cost: one fence (a launcher collective) per communicator. The fence is
 * non-blocking with a wait bounded by the timeout; a fence that completes
 * after the wait gave up finds its state and frees it.
 */
#include "core/launch_pmix.h"

#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "qccl_config.h"

/* LAUNCH_PMIX_OFF: compile the build-without-libpmix side (a unit test does) */
#if QCCL_HAVE_PMIX && !defined(LAUNCH_PMIX_OFF)
#include <pmix.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t pmix_lock = PTHREAD_MUTEX_INITIALIZER;
static int pmix_state; /* 0 not tried, 1 connected, -1 failed */
static pmix_status_t pmix_init_rc;
static pmix_proc_t pmix_me;
static pid_t pmix_pid; /* the process that connected: a forked child has no PMIx */
static atomic_int pmix_seq;

int launch_pmix_built(void) {
  return 1;
}

static void launch_pmix_fini(void) {
  if (getpid() == pmix_pid) PMIx_Finalize(NULL, 0);
}

/* An integer value of any PMIx integer type; -1 when it is none. */
static long long launch_pmix_int(const pmix_value_t* v) {
  switch (v->type) {
    case PMIX_UINT8:
      return v->data.uint8;
    case PMIX_UINT16:
      return v->data.uint16;
    case PMIX_UINT32:
      return v->data.uint32;
    case PMIX_UINT64:
      return (long long)v->data.uint64;
    case PMIX_UINT:
      return v->data.uint;
    case PMIX_INT:
      return v->data.integer;
    case PMIX_INT8:
      return v->data.int8;
    case PMIX_INT16:
      return v->data.int16;
    case PMIX_INT32:
      return v->data.int32;
    case PMIX_INT64:
      return (long long)v->data.int64;
    case PMIX_SIZE:
      return (long long)v->data.size;
    case PMIX_PROC_RANK:
      return v->data.rank;
    default:
      return -1;
  }
}

/* PMIx_Get of an integer key of proc (rank or PMIX_RANK_WILDCARD); -1 when
 * the server does not have it. */
static long long launch_pmix_get_int(pmix_rank_t rank, const char* key) {
  pmix_proc_t p;
  PMIX_LOAD_PROCID(&p, pmix_me.nspace, rank);
  pmix_value_t* v = NULL;
  if (PMIx_Get(&p, key, NULL, 0, &v) != PMIX_SUCCESS || v == NULL) return -1;
  long long n = launch_pmix_int(v);
  PMIX_VALUE_RELEASE(v);
  return n;
}

qcclResult_t launch_pmix_connect(launch_t* l) {
  pthread_mutex_lock(&pmix_lock);
  if (pmix_state == 0) {
    pmix_init_rc = PMIx_Init(&pmix_me, NULL, 0);
    pmix_state = pmix_init_rc == PMIX_SUCCESS ? 1 : -1;
    pmix_pid = getpid();
    if (pmix_state == 1) atexit(launch_pmix_fini);
  }
  int state = pmix_state;
  pid_t pid = pmix_pid;
  pthread_mutex_unlock(&pmix_lock);
  if (state > 0 && pid != getpid()) {
    snprintf(l->pmix_note, sizeof l->pmix_note,
             "PMIX_RANK is set, but PMIx was connected by the parent process (pid %d) of this "
             "fork, whose connection a child cannot use",
             (int)pid);
    QCCL_INFO(LOG_INIT, "%s; trying the other launcher variables", l->pmix_note);
    return qcclSuccess;
  }
  if (state < 0) {
    snprintf(l->pmix_note, sizeof l->pmix_note,
             "PMIX_RANK is set, but PMIx_Init failed (%s): the PMIx server of the launcher is "
             "not reachable",
             PMIx_Error_string(pmix_init_rc));
    QCCL_INFO(LOG_INIT, "%s; trying the other launcher variables", l->pmix_note);
    return qcclSuccess;
  }
  long long size = launch_pmix_get_int(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE);
  if (size < 1 || pmix_me.rank >= (pmix_rank_t)size)
    return QCCL_ERR(qcclInvalidUsage,
                    "PMIx (namespace %s): rank %u, but the job size (PMIX_JOB_SIZE) is %lld",
                    pmix_me.nspace, pmix_me.rank, size);
  l->pmix = 1;
  l->source = "PMIx";
  l->rank_var = "PMIx rank";
  l->size_var = "PMIX_JOB_SIZE";
  l->rank = (int)pmix_me.rank;
  l->size = (int)size;
  l->local_rank = (int)launch_pmix_get_int(pmix_me.rank, PMIX_LOCAL_RANK);
  l->local_size = (int)launch_pmix_get_int(PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE);
  if (l->local_rank >= 0) l->local_var = "PMIX_LOCAL_RANK/PMIX_LOCAL_SIZE";
  pmix_value_t* v = NULL;
  if (PMIx_Get(&pmix_me, PMIX_HOSTNAME, NULL, 0, &v) == PMIX_SUCCESS && v != NULL) {
    if (v->type == PMIX_STRING && v->data.string != NULL)
      snprintf(l->host, sizeof l->host, "%s", v->data.string);
    PMIX_VALUE_RELEASE(v);
  }
  return qcclSuccess;
}

/* A fence in flight: freed by the waiter, or by the callback when the
 * waiter has given up. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, abandoned;
  pmix_status_t status;
  pmix_info_t info[1];
} launch_fence_t;

static void launch_fence_free(launch_fence_t* f) {
  PMIX_INFO_DESTRUCT(&f->info[0]);
  pthread_cond_destroy(&f->cv);
  pthread_mutex_destroy(&f->mu);
  free(f);
}

static void launch_fence_done(pmix_status_t status, void* arg) {
  launch_fence_t* f = arg;
  pthread_mutex_lock(&f->mu);
  f->status = status;
  f->done = 1;
  int abandoned = f->abandoned;
  pthread_cond_signal(&f->cv);
  pthread_mutex_unlock(&f->mu);
  if (abandoned) launch_fence_free(f);
}

/* A fence over the whole job that collects the committed data. */
static qcclResult_t launch_pmix_fence(double timeout) {
  launch_fence_t* f = calloc(1, sizeof *f);
  if (f == NULL) return QCCL_ERR(qcclSystemError, "out of memory");
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&f->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&f->mu, NULL);
  bool collect = true;
  PMIX_INFO_LOAD(&f->info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  pmix_proc_t all;
  PMIX_LOAD_PROCID(&all, pmix_me.nspace, PMIX_RANK_WILDCARD);
  pmix_status_t rc = PMIx_Fence_nb(&all, 1, f->info, 1, launch_fence_done, f);
  if (rc != PMIX_SUCCESS) {
    launch_fence_free(f);
    return QCCL_ERR(qcclSystemError, "PMIx_Fence_nb (namespace %s): %s", pmix_me.nspace,
                    PMIx_Error_string(rc));
  }
  struct timespec end;
  clock_gettime(CLOCK_MONOTONIC, &end);
  double whole = (double)(long long)timeout;
  end.tv_sec += (time_t)whole;
  end.tv_nsec += (long)((timeout - whole) * 1e9);
  if (end.tv_nsec >= 1000000000L) {
    end.tv_sec++;
    end.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&f->mu);
  while (!f->done)
    if (pthread_cond_timedwait(&f->cv, &f->mu, &end) != 0 && !f->done) break;
  if (!f->done) {
    f->abandoned = 1;
    pthread_mutex_unlock(&f->mu);
    return QCCL_ERR(qcclTimeout,
                    "PMIx fence (namespace %s) did not complete within %.0f s: not every rank of "
                    "the job called qcclCommInitFromEnv",
                    pmix_me.nspace, timeout);
  }
  rc = f->status;
  pthread_mutex_unlock(&f->mu);
  launch_fence_free(f);
  if (rc != PMIX_SUCCESS)
    return QCCL_ERR(qcclRemoteError, "PMIx fence (namespace %s): %s", pmix_me.nspace,
                    PMIx_Error_string(rc));
  return qcclSuccess;
}

qcclResult_t launch_pmix_share(const launch_t* l, qcclUniqueId* id, double timeout) {
  if (!l->pmix) return QCCL_ERR(qcclInternalError, "launch_pmix_share without PMIx");
  char key[PMIX_MAX_KEYLEN + 1];
  snprintf(key, sizeof key, "qccl.id.%d", atomic_fetch_add(&pmix_seq, 1));
  pmix_status_t rc;
  if (l->rank == 0) {
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char*)id->internal;
    v.data.bo.size = sizeof id->internal;
    rc = PMIx_Put(PMIX_GLOBAL, key, &v); /* copies the bytes */
    if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS)
      return QCCL_ERR(qcclSystemError, "PMIx_Put/PMIx_Commit of %s: %s", key,
                      PMIx_Error_string(rc));
  }
  QCCL_CHECK(launch_pmix_fence(timeout));
  if (l->rank == 0) return qcclSuccess;
  pmix_proc_t root;
  PMIX_LOAD_PROCID(&root, pmix_me.nspace, 0);
  pmix_info_t info;
  int secs = timeout >= 1 && timeout < 1e9 ? (int)timeout : 1;
  PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &secs, PMIX_INT);
  pmix_value_t* v = NULL;
  rc = PMIx_Get(&root, key, &info, 1, &v);
  PMIX_INFO_DESTRUCT(&info);
  if (rc != PMIX_SUCCESS || v == NULL)
    return QCCL_ERR(qcclRemoteError, "PMIx_Get of %s from rank 0 (namespace %s): %s", key,
                    pmix_me.nspace, PMIx_Error_string(rc));
  qcclResult_t r = qcclSuccess;
  if (v->type != PMIX_BYTE_OBJECT || v->data.bo.size != sizeof id->internal)
    r = QCCL_ERR(qcclRemoteError, "PMIx key %s from rank 0: type %d, %zu bytes, expected %zu", key,
                 (int)v->type, v->type == PMIX_BYTE_OBJECT ? v->data.bo.size : 0,
                 sizeof id->internal);
  else
    memcpy(id->internal, v->data.bo.bytes, sizeof id->internal);
  PMIX_VALUE_RELEASE(v);
  return r;
}

#else /* !QCCL_HAVE_PMIX */

int launch_pmix_built(void) {
  return 0;
}

qcclResult_t launch_pmix_connect(launch_t* l) {
  snprintf(l->pmix_note, sizeof l->pmix_note,
           "PMIX_RANK is set, but this build of qccl has no PMIx (rebuild with libpmix-dev)");
  QCCL_INFO(LOG_INIT, "%s; trying the other launcher variables", l->pmix_note);
  return qcclSuccess;
}

qcclResult_t launch_pmix_share(const launch_t* l, qcclUniqueId* id, double timeout) {
  (void)l;
  (void)id;
  (void)timeout;
  return QCCL_ERR(qcclInternalError, "launch_pmix_share: this build has no PMIx");
}

#endif
