/*
 * zero_config_test - qcclZeroConfigLoad on DeepSpeed config files
 * (tests/zero/data): a real ZeRO-3 config with fp16, ZeRO++ and qccl's own
 * keys read as written (every field checked against the file; "Adam" is
 * AdamW as in DeepSpeed; 5e8 is an integer; "auto" keeps the default); a
 * wrong type is an error naming the key and the file; unknown keys are
 * warned about (QCCL_DEBUG=WARN, stderr captured) and ignored; invalid
 * JSON names the file and line; a fraction for an integer key is refused;
 * a missing file is an error naming it. Single process.
 * usage: zero_config_test DATA_DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qccl_zero.h"

static int g_fail;

#define EXPECT(cond, ...)                 \
  do {                                    \
    if (!(cond)) {                        \
      printf("FAIL line %d: ", __LINE__); \
      printf(__VA_ARGS__);                \
      printf("\n");                       \
      g_fail++;                           \
    }                                     \
  } while (0)

static char g_path[4096];
static const char* data(const char* dir, const char* name) {
  snprintf(g_path, sizeof g_path, "%s/%s", dir, name);
  return g_path;
}

/* Loads with stderr captured into err (for the warnings). */
static qcclResult_t load_capture(const char* path, qcclZeroConfig_t* c, char* err, size_t len) {
  char tmpl[] = "/tmp/zero_config_XXXXXX";
  int fd = mkstemp(tmpl);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  qcclResult_t r = qcclZeroConfigLoad(path, c);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  lseek(fd, 0, SEEK_SET);
  ssize_t n = read(fd, err, len - 1);
  err[n > 0 ? n : 0] = '\0';
  close(fd);
  unlink(tmpl);
  return r;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  const char* dir = argv[1];
  setenv("QCCL_DEBUG", "WARN", 1);
  char err[8192];
  qcclZeroConfig_t c;

  qcclResult_t r = load_capture(data(dir, "ds_zero3.json"), &c, err, sizeof err);
  EXPECT(r == qcclSuccess, "ds_zero3.json: %s", qcclZeroGetLastError());
  EXPECT(c.stage == 3 && c.gradAccumSteps == 4 && c.gradClip == 1.0, "stage/gas/clip");
  EXPECT(c.fp16 == 1 && c.lossScale == 0.0 && c.initialScalePower == 12 &&
             c.lossScaleWindow == 500 && c.hysteresis == 2 && c.minLossScale == 1.0,
         "fp16 block");
  EXPECT(c.optimizer == qcclZeroAdamW, "DeepSpeed's Adam is AdamW (adam_w_mode), got %d",
         (int)c.optimizer);
  EXPECT(c.lr == 3e-4 && c.beta1 == 0.9 && c.beta2 == 0.95 && c.eps == 1e-8 && c.weightDecay == 0.1,
         "optimizer params");
  EXPECT(c.reduceBucketSize == 500000000u && c.allgatherBucketSize == 200000000u &&
             c.prefetchBucketSize == 50000000u && c.persistenceThreshold == 100000u &&
             c.maxLiveParameters == 1000000000u && c.overlapComm == 1,
         "zero_optimization sizes");
  EXPECT(c.quantizedWeights == 1 && c.quantizedGradients == 1 && c.hpzPartitionSize == 8,
         "ZeRO++ switches");
  EXPECT(c.qwzBits == 4 && c.qwzBlock == 128 && c.qgzIntraBits == 8 && c.qgzInterBits == 4 &&
             c.qgzBlock == 256 && c.rotate == 1 && c.errorFeedback == 1,
         "qccl keys");
  EXPECT(c.gradAccumDtype == qcclFloat32, "data_types.grad_accum_dtype: %d", c.gradAccumDtype);
  EXPECT(strstr(err, "unknown key") == NULL, "warnings for a clean file: %s", err);

  qcclZeroConfig_t keep = c;
  r = load_capture(data(dir, "ds_badtype.json"), &c, err, sizeof err);
  EXPECT(r == qcclInvalidArgument, "a string for an integer: result %d", (int)r);
  EXPECT(strstr(qcclZeroGetLastError(), "fp16.initial_scale_power") != NULL &&
             strstr(qcclZeroGetLastError(), "ds_badtype.json") != NULL,
         "the message names the key and file: %s", qcclZeroGetLastError());
  EXPECT(memcmp(&c, &keep, sizeof c) == 0, "config written on failure");

  r = load_capture(data(dir, "ds_unknown.json"), &c, err, sizeof err);
  EXPECT(r == qcclSuccess, "unknown keys are not errors: %s", qcclZeroGetLastError());
  EXPECT(strstr(err, "'zero_optimization.bogus_knob'") != NULL &&
             strstr(err, "'made_up_section'") != NULL,
         "unknown keys warned about: [%s]", err);
  EXPECT(c.stage == 1 && c.reduceBucketSize == 1000 && c.optimizer == qcclZeroSGD &&
             c.momentum == 0.9 && c.nesterov == 1 && c.lr == 0.1,
         "the known keys of ds_unknown.json");

  EXPECT(c.gradAccumDtype == QCCL_ZERO_GRAD_ACCUM_AUTO, "grad_accum_dtype not given: %d",
         c.gradAccumDtype);

  r = load_capture(data(dir, "ds_badaccum.json"), &c, err, sizeof err);
  EXPECT(r == qcclInvalidArgument &&
             strstr(qcclZeroGetLastError(), "data_types.grad_accum_dtype") != NULL &&
             strstr(qcclZeroGetLastError(), "int8") != NULL,
         "int8 accumulation: %s", qcclZeroGetLastError());

  r = load_capture(data(dir, "ds_badjson.json"), &c, err, sizeof err);
  EXPECT(r == qcclInvalidArgument && strstr(qcclZeroGetLastError(), "ds_badjson.json") != NULL &&
             strstr(qcclZeroGetLastError(), "line 1") != NULL,
         "invalid JSON: %s", qcclZeroGetLastError());

  r = load_capture(data(dir, "ds_fraction.json"), &c, err, sizeof err);
  EXPECT(
      r == qcclInvalidArgument && strstr(qcclZeroGetLastError(), "zero_optimization.stage") != NULL,
      "2.5 for an integer: %s", qcclZeroGetLastError());

  r = load_capture(data(dir, "no_such_file.json"), &c, err, sizeof err);
  EXPECT(r != qcclSuccess && strstr(qcclZeroGetLastError(), "no_such_file.json") != NULL,
         "missing file: %s", qcclZeroGetLastError());

  r = qcclZeroConfigLoad(NULL, &c);
  EXPECT(r == qcclInvalidArgument && strstr(qcclZeroGetLastError(), "path") != NULL,
         "NULL path: %s", qcclZeroGetLastError());

  printf("%s: %s\n", argv[0], g_fail ? "FAIL" : "PASS");
  return g_fail ? 1 : 0;
}
