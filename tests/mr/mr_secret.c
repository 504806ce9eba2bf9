/*
 * mr_secret - a peer without the job's secret is refused, and the honest
 * ranks still form their communicator.
 *
 * Run under qcclrun (numbering from RANK / WORLD_SIZE), with
 * QCCL_SOCKET_IFNAME=lo. Before any qccl call rank 0 forks a "rogue"
 * process. Rank 0 then makes the id and hands it to the rogue, which flips
 * every byte of the secret (bytes 96..111 of the id, the layout the
 * library documents in src/core/bootstrap.h) and tries to join as rank 1
 * (of W, or of 2 when W is 1). The rogue must be refused (any error, within
 * QCCL_TIMEOUT + 10 s; it prints what it got). Only once the rogue is done
 * does rank 0 publish the id, and all W honest ranks must then form the
 * communicator and run a correct AllReduce.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mr_util.h"

static int rogue(int fd, int W) {
  qcclUniqueId id;
  if (read(fd, &id, sizeof id) != (ssize_t)sizeof id) return 3;
  for (int i = 96; i < 112; i++) id.internal[i] ^= 0xff;
  qcclComm_t comm = NULL;
  double t0 = mr_now();
  qcclResult_t r = qcclCommInitRank(&comm, W < 2 ? 2 : W, id, 1);
  printf("rogue: qcclCommInitRank with a wrong secret returned %s after %.2f s: \"%s\"\n",
         qcclGetErrorString(r), mr_now() - t0, qcclGetLastError(NULL));
  fflush(stdout);
  return r == qcclSuccess ? 1 : 0;
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
  const char* tenv = getenv("QCCL_TIMEOUT");
  const double limit = (tenv ? atof(tenv) : 30.0) + 10.0;
  char dir[400];
  if (mr_job_dir(dir, sizeof dir) != 0) mr_die(&t, "cannot make the job directory");
  mr_case_t c;
  mr_case_begin(&t, &c, "secret rogue");
  qcclUniqueId id;
  if (me == 0) {
    int p[2];
    if (pipe(p) != 0) mr_die(&t, "pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      close(p[1]);
      _exit(rogue(p[0], W));
    }
    close(p[0]);
    if (qcclGetUniqueId(&id) != qcclSuccess)
      mr_die(&t, "qcclGetUniqueId: %s", qcclGetLastError(NULL));
    if (write(p[1], &id, sizeof id) != (ssize_t)sizeof id) mr_die(&t, "write to the rogue");
    close(p[1]);
    double t0 = mr_now();
    int st = 0;
    pid_t w;
    while ((w = waitpid(pid, &st, WNOHANG)) == 0 && mr_now() - t0 < limit) usleep(20000);
    if (w == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      mr_case_fail(&c, "the rogue did not return within %.0f s", limit);
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      mr_case_fail(
          &c, "the rogue %s",
          WIFEXITED(st) && WEXITSTATUS(st) == 1 ? "was accepted" : "failed in an unexpected way");
    }
    if (mr_publish(dir, "id", &id, sizeof id) != 0) mr_die(&t, "cannot write the id file");
  } else if (mr_fetch(dir, "id", &id, sizeof id, 120) != 0) {
    mr_die(&t, "no id file from rank 0 within 120 s");
  }
  qcclComm_t comm = NULL;
  MR_OK(&c, qcclCommInitRank(&comm, W, id, me));
  int n = -1, r = -1;
  MR_OK(&c, qcclCommCount(comm, &n));
  MR_OK(&c, qcclCommUserRank(comm, &r));
  if (n != W || r != me) mr_case_fail(&c, "count %d rank %d, expected %d and %d", n, r, W, me);
  uint32_t v[100];
  for (int i = 0; i < 100; i++) v[i] = (uint32_t)(me + 1) << (i % 20);
  MR_OK(&c, qcclAllReduce(v, v, 100, qcclUint32, qcclSum, comm, NULL));
  for (int i = 0; i < 100; i++)
    if (v[i] != (uint32_t)(W * (W + 1) / 2) << (i % 20)) {
      mr_case_fail(&c, "allreduce element %d: %u", i, v[i]);
      break;
    }
  MR_OK(&c, qcclBarrier(comm, NULL));
  MR_OK(&c, qcclCommDestroy(comm));
  mr_case_end(&c);
  if (me == 0) {
    static const char* const names[] = {"id"};
    mr_job_dir_remove(dir, names, 1);
  }
  return mr_finish(&t);
}
