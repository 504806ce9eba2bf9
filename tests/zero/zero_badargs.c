/*
 * zero_badargs - every qcclZero* call given bad arguments or used out of
 * order returns the documented result with a message (qcclZeroGetLastError)
 * that names the argument, key, parameter or file, and the engine stays
 * usable afterwards (a correct step still runs). Run under qcclrun (any W;
 * the hpZ case needs a group size that differs from the ranks per node).
 */
#include <stdio.h>
#include <string.h>

#include "mr_util.h"
#include "qccl_zero.h"

static void expect(mr_case_t* c, qcclResult_t got, qcclResult_t want, const char* needle,
                   const char* what) {
  const char* msg = qcclZeroGetLastError();
  if (got != want)
    mr_case_fail(c, "%s: result %d, expected %d (%s)", what, (int)got, (int)want, msg);
  else if (strstr(msg, needle) == NULL)
    mr_case_fail(c, "%s: the message does not name '%s': %s", what, needle, msg);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  mr_case_t c;
  if (mr_case_begin(&t, &c, "badargs W%d", t.nranks)) {
    qcclZeroConfig_t cfg = QCCL_ZERO_CONFIG_INITIALIZER;
    qcclZero_t z = NULL;
    expect(&c, qcclZeroCreate(NULL, &cfg, &z), qcclInvalidArgument, "comm", "NULL comm");
    expect(&c, qcclZeroCreate(t.comm, NULL, &z), qcclInvalidArgument, "config", "NULL config");
    qcclZeroConfig_t raw;
    memset(&raw, 0, sizeof raw);
    expect(&c, qcclZeroCreate(t.comm, &raw, &z), qcclInvalidArgument,
           "QCCL_ZERO_CONFIG_INITIALIZER", "config without the initializer");
    cfg.stage = 4;
    expect(&c, qcclZeroCreate(t.comm, &cfg, &z), qcclInvalidArgument, "zero_optimization.stage",
           "stage 4");
    cfg.stage = 2;
    cfg.eps = 0;
    expect(&c, qcclZeroCreate(t.comm, &cfg, &z), qcclInvalidArgument, "optimizer.params.eps",
           "eps 0");
    cfg.eps = 1e-8;
    cfg.qwzBits = 6;
    expect(&c, qcclZeroCreate(t.comm, &cfg, &z), qcclInvalidArgument, "qccl.qwz_bits", "6-bit qwZ");
    cfg.qwzBits = 8;
    cfg.hpzPartitionSize = t.nranks + 1;
    expect(&c, qcclZeroCreate(t.comm, &cfg, &z), qcclInvalidArgument, "zero_hpz_partition_size",
           "hpZ group larger than the world");
    cfg.hpzPartitionSize = 0;
    cfg.gradAccumSteps = 2;
    MR_OK(&c, qcclZeroCreate(t.comm, &cfg, &z));

    float init[40] = {0};
    int id;
    expect(&c, qcclZeroRegister(z, NULL, 4, qcclFloat32, init, &id), qcclInvalidArgument, "name",
           "NULL name");
    expect(&c, qcclZeroRegister(z, "a", 0, qcclFloat32, init, &id), qcclInvalidArgument, "count",
           "count 0");
    expect(&c, qcclZeroRegister(z, "a", 4, qcclInt8, init, &id), qcclInvalidArgument, "dtype",
           "int8 parameter");
    MR_OK(&c, qcclZeroRegister(z, "a", 37, qcclFloat32, init, &id));
    expect(&c, qcclZeroRegister(z, "a", 4, qcclFloat32, init, &id), qcclInvalidArgument,
           "'a' is registered twice", "duplicate name");
    MR_OK(&c, qcclZeroRegister(z, "b", 5, qcclFloat32, init, &id));

    void* w;
    expect(&c, qcclZeroGather(z, 2, qcclZeroForward, &w), qcclInvalidArgument, "id 2",
           "gather of an unknown id");
    expect(&c, qcclZeroGather(z, 0, (qcclZeroPhase_t)7, &w), qcclInvalidArgument, "phase",
           "bad phase");
    expect(&c, qcclZeroGather(z, 0, qcclZeroForward, NULL), qcclInvalidArgument, "data",
           "NULL data");
    MR_OK(&c, qcclZeroGather(z, 0, qcclZeroForward, &w));
    expect(&c, qcclZeroGather(z, 0, qcclZeroForward, &w), qcclInvalidUsage, "already gathered",
           "gather twice");
    MR_OK(&c, qcclZeroRelease(z, 0));
    expect(&c, qcclZeroRelease(z, 0), qcclInvalidUsage, "not gathered", "release twice");
    expect(&c, qcclZeroRegister(z, "late", 3, qcclFloat32, init, &id), qcclInvalidUsage,
           "after the first gather", "register after the layout");

    expect(&c, qcclZeroGradient(z, 0, NULL), qcclInvalidArgument, "grad", "NULL gradient");
    MR_OK(&c, qcclZeroGradient(z, 0, init));
    expect(&c, qcclZeroGradient(z, 0, init), qcclInvalidUsage, "'a'", "gradient twice");
    expect(&c, qcclZeroStep(z, NULL), qcclInvalidUsage, "'b'", "step without b's gradient");
    MR_OK(&c, qcclZeroGradient(z, 1, init));
    qcclZeroStepInfo_t info;
    MR_OK(&c, qcclZeroStep(z, &info)); /* micro-step 1 of 2 */
    if (info.boundary) mr_case_fail(&c, "a boundary after 1 of 2 micro-steps");
    expect(&c, qcclZeroSave(z, "/tmp/never-written"), qcclInvalidUsage, "accumulation window",
           "save inside the window");
    MR_OK(&c, qcclZeroGradient(z, 0, init));
    MR_OK(&c, qcclZeroGradient(z, 1, init));
    MR_OK(&c, qcclZeroStep(z, &info));
    if (!info.boundary || !info.stepped) mr_case_fail(&c, "the engine did not step after errors");

    float out[40];
    expect(&c, qcclZeroGetOptimizerState(z, 0, 2, out), qcclInvalidArgument, "which", "moment 2");
    expect(&c, qcclZeroGetMaster(z, 0, NULL), qcclInvalidArgument, "out", "NULL out");
    expect(&c, qcclZeroSetLearningRate(z, -1.0), qcclInvalidArgument, "lr", "negative lr");
    expect(&c, qcclZeroLoad(z, "/nonexistent/ckpt"), qcclSystemError,
           "/nonexistent/ckpt/manifest.json", "load of a missing checkpoint");
    expect(&c, qcclZeroCheckpointVerify("/nonexistent/ckpt"), qcclSystemError,
           "/nonexistent/ckpt/manifest.json", "verify of a missing checkpoint");
    MR_OK(&c, qcclZeroDestroy(z));
    MR_OK(&c, qcclZeroDestroy(NULL));
    mr_case_end(&c);
  }
  return mr_finish(&t);
}
