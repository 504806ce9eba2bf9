/*
 * mr_uniqueid - the unique-id flow: qcclGetUniqueId on rank 0, the id
 * passed through a file (written atomically, polled by the others), and
 * qcclCommInitRank / qcclCommInitRankConfig on every rank.
 *
 * Run under qcclrun (its RANK / WORLD_SIZE only number the processes; no
 * communicator comes from the environment), with QCCL_SOCKET_IFNAME=lo.
 * Cases:
 *   args     before joining, calls that must fail locally and at once:
 *            comm NULL, nranks 0, rank -1 and nranks ("rank"), a config
 *            with a wrong magic or size ("config"), blocking = 0, an id
 *            whose magic is broken;
 *   two      two ids, two communicators at once: A numbered as the
 *            processes (made with a config: commName, timeoutSec), B in
 *            reverse; counts, ranks and the member order (all-gathered)
 *            checked; AllReduces and Broadcasts alternate between them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mr_util.h"

static void expect_fail(mr_case_t* c, qcclResult_t r, qcclResult_t want, const char* name,
                        const char* what) {
  const char* msg = qcclGetLastError(NULL);
  if (r != want)
    mr_case_fail(c, "%s returned %s, expected %s (\"%s\")", what, qcclGetErrorString(r),
                 qcclGetErrorString(want), msg ? msg : "(null)");
  else if (name && (!msg || !strstr(msg, name)))
    mr_case_fail(c, "%s: message \"%s\" does not name \"%s\"", what, msg ? msg : "(null)", name);
}

static void check_comm(mr_case_t* c, qcclComm_t comm, int want_rank, int W, const char* what) {
  int n = -1, r = -1;
  MR_OK(c, qcclCommCount(comm, &n));
  MR_OK(c, qcclCommUserRank(comm, &r));
  if (n != W || r != want_rank)
    mr_case_fail(c, "%s: count %d rank %d, expected %d and %d", what, n, r, W, want_rank);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_parse(&t, argc, argv);
  const char* er = getenv("RANK");
  const char* ew = getenv("WORLD_SIZE");
  if (!er || !ew) mr_die(&t, "run under qcclrun (RANK and WORLD_SIZE)");
  const int me = atoi(er), W = atoi(ew);
  t.rank = me;
  t.nranks = W;
  char dir[400];
  if (mr_job_dir(dir, sizeof dir) != 0) mr_die(&t, "cannot make the job directory");
  qcclUniqueId ids[2];
  double t0 = mr_now();
  if (me == 0) {
    qcclResult_t r0 = qcclGetUniqueId(&ids[0]);
    qcclResult_t r1 = qcclGetUniqueId(&ids[1]);
    if (r0 != qcclSuccess || r1 != qcclSuccess)
      mr_die(&t, "qcclGetUniqueId: %s", qcclGetLastError(NULL));
    if (memcmp(&ids[0], &ids[1], sizeof ids[0]) == 0) mr_die(&t, "two ids are identical");
    if (mr_publish(dir, "ids", ids, sizeof ids) != 0) mr_die(&t, "cannot write the id file");
  } else if (mr_fetch(dir, "ids", ids, sizeof ids, 60) != 0) {
    mr_die(&t, "no id file from rank 0 within 60 s (%s)", dir);
  }

  mr_case_t c;
  if (mr_case_begin(&t, &c, "uniqueid args")) {
    qcclComm_t comm = NULL;
    qcclConfig_t cfg = QCCL_CONFIG_INITIALIZER;
    double a0 = mr_now();
    expect_fail(&c, qcclCommInitRank(NULL, W, ids[0], me), qcclInvalidArgument, "comm",
                "InitRank(comm NULL)");
    expect_fail(&c, qcclCommInitRank(&comm, 0, ids[0], 0), qcclInvalidArgument, "nranks",
                "InitRank(nranks 0)");
    expect_fail(&c, qcclCommInitRank(&comm, W, ids[0], -1), qcclInvalidArgument, "rank",
                "InitRank(rank -1)");
    expect_fail(&c, qcclCommInitRank(&comm, W, ids[0], W), qcclInvalidArgument, "rank",
                "InitRank(rank nranks)");
    cfg.magic ^= 1;
    expect_fail(&c, qcclCommInitRankConfig(&comm, W, ids[0], me, &cfg), qcclInvalidArgument,
                "config", "InitRankConfig(bad magic)");
    cfg.magic ^= 1;
    cfg.size = sizeof cfg + 8;
    expect_fail(&c, qcclCommInitRankConfig(&comm, W, ids[0], me, &cfg), qcclInvalidArgument,
                "config", "InitRankConfig(bad size)");
    cfg.size = 4;
    expect_fail(&c, qcclCommInitRankConfig(&comm, W, ids[0], me, &cfg), qcclInvalidArgument,
                "config", "InitRankConfig(size 4)");
    cfg.size = sizeof cfg;
    cfg.blocking = 0;
    qcclResult_t r = qcclCommInitRankConfig(&comm, W, ids[0], me, &cfg);
    if (r == qcclSuccess) mr_case_fail(&c, "a config with blocking = 0 was accepted");
    qcclUniqueId bad = ids[0];
    bad.internal[0] ^= 0x5a;
    r = qcclCommInitRank(&comm, W, bad, me);
    if (r != qcclInvalidArgument && r != qcclInvalidUsage)
      mr_case_fail(&c, "an id with a broken magic gave %s", qcclGetErrorString(r));
    if (comm != NULL) mr_case_fail(&c, "a failed init wrote *comm");
    if (mr_now() - a0 > 5) mr_case_fail(&c, "the failing calls took %.1f s", mr_now() - a0);
    mr_case_end(&c);
  }

  if (mr_case_begin(&t, &c, "uniqueid two")) {
    qcclComm_t a = NULL, b = NULL;
    qcclConfig_t cfg = QCCL_CONFIG_INITIALIZER;
    cfg.commName = "mr_uniqueid A";
    cfg.timeoutSec = 60;
    MR_OK(&c, qcclCommInitRankConfig(&a, W, ids[0], me, &cfg));
    MR_OK(&c, qcclCommInitRank(&b, W, ids[1], W - 1 - me));
    if (me == 0) printf("two communicators made in %.2f s\n", mr_now() - t0);
    check_comm(&c, a, me, W, "A");
    check_comm(&c, b, W - 1 - me, W, "B");
    int32_t mine = me, *all = calloc((size_t)W, sizeof *all);
    if (!all) mr_die(&t, "out of memory");
    MR_OK(&c, qcclAllGather(&mine, all, 1, qcclInt32, b, NULL));
    for (int k = 0; k < W; k++)
      if (all[k] != W - 1 - k) mr_case_fail(&c, "B rank %d is process %d", k, all[k]);
    for (int round = 0; round < 4; round++) {
      qcclComm_t cm = (round & 1) ? b : a;
      int64_t v[257];
      for (int i = 0; i < 257; i++) v[i] = (int64_t)(me + 1) * (i + round);
      MR_OK(&c, qcclAllReduce(v, v, 257, qcclInt64, qcclMax, cm, NULL));
      for (int i = 0; i < 257; i++)
        if (v[i] != (int64_t)W * (i + round)) {
          mr_case_fail(&c, "round %d allreduce element %d: %lld", round, i, (long long)v[i]);
          break;
        }
      int32_t x = me == 0 ? 1000 + round : -1;
      /* process 0 is rank 0 of A and rank W-1 of B */
      MR_OK(&c, qcclBroadcast(&x, &x, 1, qcclInt32, (round & 1) ? W - 1 : 0, cm, NULL));
      if (x != 1000 + round) mr_case_fail(&c, "round %d broadcast gave %d", round, x);
    }
    free(all);
    MR_OK(&c, qcclCommDestroy(b));
    MR_OK(&c, qcclBarrier(a, NULL));
    MR_OK(&c, qcclCommDestroy(a));
    mr_case_end(&c);
  }
  if (me == 0) {
    static const char* const names[] = {"ids"};
    mr_job_dir_remove(dir, names, 1);
  }
  return mr_finish(&t);
}
