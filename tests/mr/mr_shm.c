/*
 * mr_shm - the shared-memory segments of a job (/dev/shm/qccl-<pid of the
 * creating rank>-<suffix>) are unlinked as soon as every rank has attached:
 * none may exist for any of the job's pids
 *   1. after init (and a barrier),
 *   2. after traffic (AllReduce, a grouped ring of sends, an AllGather) and
 *      a split with traffic on the new communicator,
 *   3. after qcclCommFinalize + qcclCommDestroy of the first communicator
 *      on every rank (the ranks meet through files, not the library),
 *   4. after qcclCommAbort of the second one on every rank.
 * The pids come from an AllGather at the start.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mr_util.h"

static void check_none(mr_case_t* c, const int32_t* pids, int W, const char* when) {
  char list[1024];
  int k = mr_shm_leftovers(pids, W, list, sizeof list);
  if (k) mr_case_fail(c, "%d segment(s) %s: %s", k, when, list);
}

/* a barrier that does not use the library: files in the job directory */
static void file_barrier(mr_t* t, const char* dir, const char* tag) {
  char name[64];
  snprintf(name, sizeof name, "%s-%d", tag, t->rank);
  int one = 1;
  if (mr_publish(dir, name, &one, sizeof one) != 0) mr_die(t, "cannot write %s/%s", dir, name);
  for (int r = 0; r < t->nranks; r++) {
    snprintf(name, sizeof name, "%s-%d", tag, r);
    if (mr_fetch(dir, name, &one, sizeof one, 120) != 0)
      mr_die(t, "rank %d never reached %s", r, tag);
  }
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const int W = t.nranks, me = t.rank;
  char dir[400];
  if (mr_job_dir(dir, sizeof dir) != 0) mr_die(&t, "cannot make the job directory");
  int32_t* pids = calloc((size_t)W, sizeof *pids);
  int32_t mypid = (int32_t)getpid();
  size_t n = 1 << 18;
  float* a = calloc(n * (size_t)W, sizeof *a);
  float* b = calloc(n * (size_t)W, sizeof *b);
  if (!pids || !a || !b) mr_die(&t, "out of memory");
  mr_case_t c;
  mr_case_begin(&t, &c, "shm leftovers");
  MR_OK(&c, qcclAllGather(&mypid, pids, 1, qcclInt32, t.comm, NULL));
  MR_OK(&c, qcclBarrier(t.comm, NULL));
  check_none(&c, pids, W, "after init");

  MR_OK(&c, qcclAllReduce(a, b, n, qcclFloat32, qcclSum, t.comm, NULL));
  MR_OK(&c, qcclGroupStart());
  MR_OK(&c, qcclSend(a, n, qcclFloat32, (me + 1) % W, t.comm, NULL));
  MR_OK(&c, qcclRecv(b, n, qcclFloat32, (me - 1 + W) % W, t.comm, NULL));
  MR_OK(&c, qcclGroupEnd());
  MR_OK(&c, qcclAllGather(a, b, n, qcclFloat32, t.comm, NULL));
  qcclComm_t sub = NULL;
  MR_OK(&c, qcclCommSplit(t.comm, 0, W - me, &sub, NULL));
  MR_OK(&c, qcclAllReduce(a, b, n, qcclFloat32, qcclMax, sub, NULL));
  MR_OK(&c, qcclBarrier(sub, NULL));
  MR_OK(&c, qcclBarrier(t.comm, NULL));
  check_none(&c, pids, W, "after traffic and a split");

  MR_OK(&c, qcclCommFinalize(t.comm));
  MR_OK(&c, qcclCommDestroy(t.comm));
  t.comm = NULL;
  file_barrier(&t, dir, "destroyed");
  check_none(&c, pids, W, "after destroy");

  MR_OK(&c, qcclBarrier(sub, NULL));
  MR_OK(&c, qcclCommAbort(sub));
  file_barrier(&t, dir, "aborted");
  check_none(&c, pids, W, "after abort");
  mr_case_end(&c);
  /* clean up without waiting: each rank drops a "left" file; whoever then
   * finds all of them (at least the last one to arrive) removes the
   * directory. Nobody waits on "left" files, so none can be stranded. */
  char name[64];
  int one = 1;
  snprintf(name, sizeof name, "left-%d", me);
  mr_publish(dir, name, &one, sizeof one);
  int all = 1;
  for (int r = 0; r < W && all; r++) {
    char path[512];
    snprintf(path, sizeof path, "%s/left-%d", dir, r);
    all = access(path, F_OK) == 0;
  }
  if (all) {
    char** names = calloc((size_t)W * 3, sizeof *names);
    if (!names) mr_die(&t, "out of memory");
    static const char* const tags[3] = {"destroyed", "aborted", "left"};
    for (int k = 0; k < 3; k++)
      for (int r = 0; r < W; r++) {
        names[k * W + r] = malloc(64);
        if (!names[k * W + r]) mr_die(&t, "out of memory");
        snprintf(names[k * W + r], 64, "%s-%d", tags[k], r);
      }
    mr_job_dir_remove(dir, (const char* const*)names, 3 * W);
    for (int i = 0; i < 3 * W; i++) free(names[i]);
    free(names);
  }
  free(pids);
  free(a);
  free(b);
  return mr_finish(&t);
}
