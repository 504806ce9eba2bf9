/*
 * unit_launch_nopmix - the launcher sources of a qccl built without libpmix
 * (src/core/launch.c and launch_pmix.c compiled with LAUNCH_PMIX_OFF): with
 * PMIX_RANK set, Open MPI's and Slurm's variables are used instead, and
 * when nothing else is there the error says that this build has no PMIx.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/launch.h"

static int failures;

static void clear(void) {
  const char* vars[] = {"RANK",
                        "WORLD_SIZE",
                        "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE",
                        "SLURM_PROCID",
                        "SLURM_NTASKS",
                        "PMIX_RANK",
                        "PMIX_NAMESPACE",
                        "PMI_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static void expect(int cond, const char* what) {
  printf("  %s: %s\n", cond ? "ok" : "FAIL", what);
  if (!cond) failures++;
}

int main(void) {
  launch_t l;
  clear();
  setenv("PMIX_RANK", "1", 1);
  setenv("PMIX_NAMESPACE", "job", 1);
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  printf("PMIX_RANK and OMPI_COMM_WORLD_*\n");
  qcclResult_t r = launch_identify(&l);
  expect(
      r == qcclSuccess && !l.pmix && l.rank == 1 && l.size == 3 && strcmp(l.source, "mpirun") == 0,
      "Open MPI's numbering, not PMIx");
  expect(strstr(l.pmix_note, "no PMIx") != NULL, l.pmix_note);

  clear();
  setenv("PMIX_RANK", "0", 1);
  setenv("SLURM_PROCID", "2", 1);
  setenv("SLURM_NTASKS", "4", 1);
  printf("PMIX_RANK and SLURM_*\n");
  r = launch_identify(&l);
  expect(r == qcclSuccess && !l.pmix && l.rank == 2 && l.size == 4 && strcmp(l.source, "srun") == 0,
         "Slurm's numbering");

  clear();
  setenv("PMIX_RANK", "0", 1);
  printf("PMIX_RANK alone\n");
  r = launch_identify(&l);
  expect(r == qcclInvalidArgument, "qcclInvalidArgument");
  expect(strstr(err_last(), "no PMIx") && strstr(err_last(), "PMIX_RANK"), err_last());
  printf("unit_launch_nopmix: %s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
