/*
 * mr_lanecma - a lane of a communicator takes lane 0's single-copy
 * decision and makes no probe of its own (cma.h, cma_probe's like).
 *
 * Collective k runs on lane k mod 2, and lane 1 is made by the second
 * collective with a segment of its own, whose init reads
 * QCCL_CMA_MIN_BYTES again. The test splits a communicator of its own with
 * single copy on from 20 KiB (the variable set: no speed probe; not a
 * default threshold, so no line of the job's own communicator's lanes
 * matches), sets the variable to 0 after that communicator's first
 * AlltoAll, so that lane 1's own reading would turn single copy off, and
 * requires the INFO line saying lane 1 took lane 0's 20480 instead. Every AlltoAll (lane 0,
 * lane 1, both again) moves 32 KiB blocks and is checked element by
 * element. Where the ranks cannot read each other's memory at all (single
 * copy off on lane 0), there is nothing to take and the log check is
 * skipped. The check reads the line the override itself logs: no API
 * shows which path a call took.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mr_util.h"

static void alltoall_case(mr_t* t, qcclComm_t comm, int call) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "alltoall call %d (lane %d)", call, call % 2)) return;
  const int W = t->nranks, rank = t->rank;
  const size_t n = 8192, bytes = n * sizeof(float) * (size_t)W; /* 32 KiB per peer */
  mr_buf_t sb, rb;
  mr_buf_alloc(&sb, bytes, 0);
  mr_buf_alloc(&rb, bytes, 0);
  mr_fill(qcclFloat32, qcclSum, MR_GEN_RAW, c.cseed, rank, W, sb.p, 0, n * (size_t)W);
  MR_OK(&c, qcclAlltoAll(sb.p, rb.p, n, qcclFloat32, comm, NULL));
  mr_buf_check_guards(&c, &rb, "recvbuff");
  for (int i = 0; i < W; i++) {
    char what[64];
    snprintf(what, sizeof what, "recvbuff block %d", i);
    mr_check_copy(&c, qcclFloat32, rb.p, (size_t)i * n, n, i, (size_t)rank * n, what);
  }
  mr_buf_free(&sb);
  mr_buf_free(&rb);
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  char log[128];
  mr_shm_log(log, sizeof log, "lanecma");
  setenv("QCCL_LANES", "2", 1);
  mr_t t;
  mr_init(&t, argc, argv); /* its own calls have made t.comm's lanes */
  /* a communicator of our own, made with single copy on from 20 KiB */
  setenv("QCCL_CMA_MIN_BYTES", "20480", 1);
  qcclComm_t comm = NULL;
  qcclResult_t r = qcclCommSplit(t.comm, 0, t.rank, &comm, NULL);
  if (r != qcclSuccess) mr_die(&t, "qcclCommSplit: %s", qcclGetLastError(t.comm));
  alltoall_case(&t, comm, 0);
  /* lane 1's own segment would read this and turn single copy off */
  setenv("QCCL_CMA_MIN_BYTES", "0", 1);
  alltoall_case(&t, comm, 1);
  alltoall_case(&t, comm, 2);
  alltoall_case(&t, comm, 3);
  mr_case_t c;
  if (t.nranks > 1 && mr_case_begin(&t, &c, "lane 1 took lane 0's single copy")) {
    if (mr_file_has(log, "cannot read rank"))
      printf("rank %d: the ranks cannot read each other's memory: nothing to take\n", t.rank);
    else if (!mr_file_has(log,
                          "single copy (CMA) on from 20480 bytes per peer (AlltoAll from 20480) "
                          "as the communicator's lane 0 decided"))
      mr_case_fail(&c, "no INFO line in %s saying lane 1 took lane 0's 20480 bytes", log);
    mr_case_end(&c);
  }
  qcclCommDestroy(comm);
  int rc = mr_finish(&t);
  if (rc == 0) unlink(log);
  return rc;
}
