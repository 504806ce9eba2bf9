/*
 * mr_fault - a rank that dies, falls silent or aborts must not hang the
 * others: every survivor's call returns qcclRemoteError or qcclTimeout
 * within QCCL_TIMEOUT (+ slack), later calls fail at once, qcclCommAbort
 * returns in bounded time, and no shared-memory segment of the job is left.
 *
 *   mr_fault --mode M --coll C [--victim V] [--elems N]
 *                                 (under qcclrun, W >= 2, QCCL_TIMEOUT=T set)
 *   M: kill-during  the victim loops the collective and a thread of it
 *                   raises SIGKILL 0.1-0.4 s in; survivors loop it too
 *      kill-before  the victim raises SIGKILL instead of calling it
 *      silent       the victim sleeps T + slack + 2 s instead, then aborts
 *      abort        the victim calls qcclCommAbort 0.5 s in (and checks
 *                   that it returns within the abort bound)
 *      link-down    on simulated hosts (qcclrun --placement, as root): a
 *                   thread of the victim sets its host's link down 0.1-0.4
 *                   s in; every rank, the victim too, must then fail
 *                   (ranks print "MRFAULT SKIP" without namespaces)
 *   C: allreduce reduce broadcast allgather reducescatter alltoall gather
 *      scatter sendrecv (a grouped ring shift) barrier
 *   V: default W / 2.
 *   --memalloc: the buffers come from qcclMemAlloc, so AllGather,
 *      AlltoAll, ReduceScatter and AllReduce read the victim's memory in
 *      place (shm_map.c);
 *   N: elements per rank-block (default 2^20 for kill-during, else 4099);
 *      larger blocks take the pipelined two-level algorithms across hosts.
 * The slack is QCCL_MR_FAULT_SLACK seconds (default 6), the abort bound 5 s
 * (+ slack under a sanitizer, via the same variable).
 *
 * Survivors call the collective in a loop until it fails (at most 3 T + 30
 * s): a rank that does not wait for the victim (a non-root of a gather) may
 * finish a call or two before the failure reaches it. The failing call must
 * take at most T + slack.
 *
 * Every rank first all-gathers the job's pids (printed as "MRFAULT pids"),
 * and after init and after its abort checks that no /dev/shm/qccl-<pid>-*
 * exists for any of them. A survivor prints one line
 *   MRFAULT verdict rank=R ... result=X elapsed=E limit=L abort=A PASS|FAIL...
 * that tests/mr/fault.sh counts and checks: qcclrun itself fails the job
 * (the victim died), so the verdicts, not qcclrun's status, decide.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mr_util.h"

static double T = 10, slack = 6, abort_bound = 5;

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

typedef struct {
  const char* name;
  size_t n; /* elements per rank-block */
  float *send, *recv;
} coll_t;

static qcclResult_t run_coll(mr_t* t, coll_t* c) {
  const int W = t->nranks, me = t->rank;
  const char* k = c->name;
  if (!strcmp(k, "allreduce"))
    return qcclAllReduce(c->send, c->recv, c->n, qcclFloat32, qcclSum, t->comm, NULL);
  if (!strcmp(k, "reduce"))
    return qcclReduce(c->send, c->recv, c->n, qcclFloat32, qcclMax, 0, t->comm, NULL);
  if (!strcmp(k, "broadcast"))
    return qcclBroadcast(c->send, c->recv, c->n, qcclFloat32, 0, t->comm, NULL);
  if (!strcmp(k, "allgather"))
    return qcclAllGather(c->send, c->recv, c->n, qcclFloat32, t->comm, NULL);
  if (!strcmp(k, "reducescatter"))
    return qcclReduceScatter(c->send, c->recv, c->n, qcclFloat32, qcclSum, t->comm, NULL);
  if (!strcmp(k, "alltoall"))
    return qcclAlltoAll(c->send, c->recv, c->n, qcclFloat32, t->comm, NULL);
  if (!strcmp(k, "gather"))
    return qcclGather(c->send, c->recv, c->n, qcclFloat32, 0, t->comm, NULL);
  if (!strcmp(k, "scatter"))
    return qcclScatter(c->send, c->recv, c->n, qcclFloat32, 0, t->comm, NULL);
  if (!strcmp(k, "barrier")) return qcclBarrier(t->comm, NULL);
  if (!strcmp(k, "sendrecv")) {
    qcclResult_t r = qcclGroupStart();
    if (r != qcclSuccess) return r;
    qcclResult_t a = qcclSend(c->send, c->n, qcclFloat32, (me + 1) % W, t->comm, NULL);
    qcclResult_t b = qcclRecv(c->recv, c->n, qcclFloat32, (me - 1 + W) % W, t->comm, NULL);
    r = qcclGroupEnd();
    return a != qcclSuccess ? a : b != qcclSuccess ? b : r;
  }
  printf("unknown collective %s\n", k);
  exit(2);
}

static void* killer(void* arg) {
  sleep_s(*(double*)arg);
  printf("MRFAULT victim rank raises SIGKILL now\n");
  fflush(stdout);
  raise(SIGKILL);
  return NULL;
}

static void* link_cutter(void* arg) {
  sleep_s(*(double*)arg);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "ip link set dev %s down", getenv("QCCL_SOCKET_IFNAME"));
  printf("MRFAULT victim cuts its link now: %s\n", cmd);
  fflush(stdout);
  if (system(cmd) != 0) printf("MRFAULT link-down: '%s' failed\n", cmd);
  return NULL;
}

static int shm_check(const int32_t* pids, int W, const char* when) {
  char list[1024];
  int k = mr_shm_leftovers(pids, W, list, sizeof list);
  if (k) printf("MRFAULT shm leftovers %s: %s\n", when, list);
  return k == 0;
}

static double env_num(const char* name, double def) {
  const char* v = getenv(name);
  return v && *v ? atof(v) : def;
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const int W = t.nranks, me = t.rank;
  const char* mode = mr_opt(&t, "--mode");
  const char* cname = mr_opt(&t, "--coll");
  const char* vopt = mr_opt(&t, "--victim");
  if (!mode || !cname || W < 2) mr_die(&t, "usage: --mode M --coll C [--victim V], W >= 2");
  const int victim = vopt ? atoi(vopt) : W / 2;
  T = env_num("QCCL_TIMEOUT", 10);
  slack = env_num("QCCL_MR_FAULT_SLACK", 6);
  abort_bound = 5 + (slack > 6 ? slack - 6 : 0);

  int32_t* pids = calloc((size_t)W, sizeof *pids);
  int32_t mypid = (int32_t)getpid();
  const char* eopt = mr_opt(&t, "--elems");
  size_t n = strcmp(mode, "kill-during") == 0 ? (size_t)1 << 20 : 4099;
  if (eopt) n = (size_t)strtoull(eopt, NULL, 10);
  coll_t c = {cname, n, NULL, NULL};
  int memalloc = mr_flag(&t, "--memalloc");
  if (memalloc) {
    void *sp = NULL, *rp = NULL;
    if (qcclMemAlloc(&sp, c.n * (size_t)W * sizeof(float)) != qcclSuccess ||
        qcclMemAlloc(&rp, c.n * (size_t)W * sizeof(float)) != qcclSuccess)
      mr_die(&t, "qcclMemAlloc: %s", qcclGetLastError(NULL));
    c.send = sp, c.recv = rp; /* zeroed; freed with the process */
  } else {
    c.send = calloc(c.n * (size_t)W, sizeof(float));
    c.recv = calloc(c.n * (size_t)W, sizeof(float));
  }
  if (!pids || !c.send || !c.recv) mr_die(&t, "out of memory");
  for (size_t i = 0; i < c.n * (size_t)W; i++) c.send[i] = (float)(me + 1);
  if (qcclAllGather(&mypid, pids, 1, qcclInt32, t.comm, NULL) != qcclSuccess ||
      qcclBarrier(t.comm, NULL) != qcclSuccess)
    mr_die(&t, "setup collectives failed: %s", qcclGetLastError(t.comm));
  if (me == 0) {
    printf("MRFAULT pids");
    for (int i = 0; i < W; i++) printf(" %d", (int)pids[i]);
    printf("\n");
  }
  int ok = shm_check(pids, W, "after init");
  if (qcclBarrier(t.comm, NULL) != qcclSuccess) mr_die(&t, "barrier failed");
  fflush(stdout);

  int link_down = !strcmp(mode, "link-down");
  if (link_down) {
    const char* ns = getenv("QCCLRUN_NETNS");
    if (!ns || strcmp(ns, "1") != 0 || !getenv("QCCL_SOCKET_IFNAME")) {
      printf("MRFAULT SKIP link-down needs simulated hosts in namespaces (root)\n");
      qcclCommDestroy(t.comm);
      return 0;
    }
  }
  pthread_t cutter;
  double cut_delay = 0.1 + 0.3 * (double)(mr_mix(t.seed) % 1000) / 1000.0;
  if (me == victim && link_down) {
    /* the victim is a survivor too: it must fail like the others */
    pthread_create(&cutter, NULL, link_cutter, &cut_delay);
    pthread_detach(cutter);
  } else if (me == victim) {
    if (!strcmp(mode, "kill-before")) {
      raise(SIGKILL);
    } else if (!strcmp(mode, "kill-during")) {
      double delay = 0.1 + 0.3 * (double)(mr_mix(t.seed) % 1000) / 1000.0;
      pthread_t th;
      pthread_create(&th, NULL, killer, &delay);
      double t0 = mr_now();
      while (mr_now() - t0 < 120) run_coll(&t, &c);
      printf("MRFAULT victim was not killed\n");
      return 2;
    } else if (!strcmp(mode, "silent")) {
      sleep_s(T + slack + 2);
      qcclCommAbort(t.comm);
      printf("MRFAULT silent victim done\n");
      fflush(stdout);
      free(pids);
      if (!memalloc) free(c.send), free(c.recv);
      return 0;
    } else if (!strcmp(mode, "abort")) {
      sleep_s(0.5);
      double t0 = mr_now();
      qcclResult_t r = qcclCommAbort(t.comm);
      double ab = mr_now() - t0;
      sleep_s(0.5);
      ok = shm_check(pids, W, "after the victim's abort") && ok;
      int pass = ok && r == qcclSuccess && ab <= abort_bound;
      printf("MRFAULT victim rank=%d abort=%.3f result=%s %s\n", me, ab, qcclGetErrorString(r),
             pass ? "PASS" : "FAIL");
      fflush(stdout);
      free(pids);
      if (!memalloc) free(c.send), free(c.recv);
      return pass ? 0 : 1;
    }
    mr_die(&t, "unknown mode %s", mode);
  }

  /* survivors */
  char why[256] = "";
  double t_start = mr_now(), el = 0;
  qcclResult_t r = qcclSuccess;
  long iters = 0;
  do {
    double t0 = mr_now();
    r = run_coll(&t, &c);
    el = mr_now() - t0;
    iters++;
  } while (r == qcclSuccess && mr_now() - t_start < 3 * T + 30);
  if (r == qcclSuccess)
    snprintf(why, sizeof why, "no error after %ld calls", iters);
  else if (r != qcclRemoteError && r != qcclTimeout)
    snprintf(why, sizeof why, "result %s is neither qcclRemoteError nor qcclTimeout",
             qcclGetErrorString(r));
  else if (el > T + slack)
    snprintf(why, sizeof why, "the failing call took %.1f s > QCCL_TIMEOUT %.1f + %.1f", el, T,
             slack);
  char msg[256];
  const char* m = qcclGetLastError(t.comm);
  snprintf(msg, sizeof msg, "%s", m ? m : "");
  if (!*why && !*msg) snprintf(why, sizeof why, "qcclGetLastError is empty");
  qcclResult_t ae = qcclSuccess;
  if (!*why && (qcclCommGetAsyncError(t.comm, &ae) != qcclSuccess || ae == qcclSuccess))
    snprintf(why, sizeof why, "qcclCommGetAsyncError does not report the failure");
  double t1 = mr_now();
  qcclResult_t r2 = run_coll(&t, &c);
  double el2 = mr_now() - t1;
  if (!*why && (r2 == qcclSuccess || el2 > slack))
    snprintf(why, sizeof why, "the next call returned %s after %.1f s", qcclGetErrorString(r2),
             el2);
  t1 = mr_now();
  qcclResult_t ra = qcclCommAbort(t.comm);
  double ab = mr_now() - t1;
  t.comm = NULL;
  if (!*why && ab > abort_bound)
    snprintf(why, sizeof why, "qcclCommAbort took %.1f s > %.1f", ab, abort_bound);
  if (!*why && ra != qcclSuccess)
    snprintf(why, sizeof why, "qcclCommAbort returned %s", qcclGetErrorString(ra));
  if (!shm_check(pids, W, "after abort") && !*why)
    snprintf(why, sizeof why, "shared-memory segments left after abort");
  if (!ok && !*why) snprintf(why, sizeof why, "shared-memory segments left after init");
  printf(
      "MRFAULT verdict rank=%d mode=%s coll=%s victim=%d result=%s elapsed=%.3f limit=%.1f "
      "calls=%ld abort=%.3f message=\"%s\" %s%s\n",
      me, mode, cname, victim, qcclGetErrorString(r), el, T + slack, iters, ab, msg,
      *why ? "FAIL: " : "PASS", why);
  fflush(stdout);
  free(pids);
  if (!memalloc) free(c.send), free(c.recv);
  return *why ? 1 : 0;
}
