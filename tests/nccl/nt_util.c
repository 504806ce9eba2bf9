/*
 * nt_util.c - the helpers of the drop-in's test programs (nt_util.h): the
 * unique id through a file, inputs from a seed, references and compares.
 */
#include "nt_util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int nt_rank = -1, nt_nranks = 0;
unsigned long long nt_seed;
static int nt_seed_known;

void nt_fail(const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[rank %d] FAIL (QCCL_TEST_SEED=%llu): %s\n", nt_rank, nt_seed, msg);
  fflush(stderr);
  exit(1);
}

void nt_expect_error(ncclResult_t got, ncclResult_t want, const char* what, const char* has1,
                     const char* has2) {
  const char* msg = ncclGetLastError(NULL);
  if (got != want)
    nt_fail("%s: returned %d (%s), expected %d; last error: %s", what, (int)got,
            ncclGetErrorString(got), (int)want, msg);
  if ((has1 && !strstr(msg, has1)) || (has2 && !strstr(msg, has2)))
    nt_fail("%s: the message \"%s\" does not name \"%s\"%s%s", what, msg, has1 ? has1 : "",
            has2 ? " and " : "", has2 ? has2 : "");
}

static int env_int(const char* name) {
  const char* v = getenv(name);
  char* end;
  if (v == NULL) nt_fail("%s is not set (run under qcclrun or torchrun)", name);
  long x = strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > 1 << 20) nt_fail("%s=%s is not a rank number", name, v);
  return (int)x;
}

void nt_setup(void) {
  nt_rank = env_int("RANK");
  nt_nranks = env_int("WORLD_SIZE");
  int version = 0;
  NT_CHECK(ncclGetVersion(&version));
  if (version != NT_QCCL_NCCL_VERSION)
    nt_fail("ncclGetVersion = %d: this is not qccl's libnccl.so.2 (%d); check LD_LIBRARY_PATH",
            version, NT_QCCL_NCCL_VERSION);
  const char* s = getenv("QCCL_TEST_SEED");
  if (s != NULL) {
    nt_seed = strtoull(s, NULL, 10);
    nt_seed_known = 1;
  } else if (nt_rank == 0) {
    nt_seed = (unsigned long long)time(NULL) * 1000003ull + (unsigned long long)getpid();
    nt_seed_known = 1;
  }
}

/* The file of id `tag` of this launcher job. */
static void id_path(char* out, size_t n, int tag) {
  const char* dir = getenv("TMPDIR");
  const char* port = getenv("MASTER_PORT");
  const char* secret = getenv("QCCL_SECRET");
  uint64_t h = 1469598103934665603ull;
  for (const char* p = secret ? secret : ""; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ull;
  snprintf(out, n, "%s/qccl-nccl-test-%s-%016llx-%d", dir ? dir : "/tmp", port ? port : "0",
           (unsigned long long)h, tag);
}

typedef struct {
  unsigned magic;
  unsigned long long seed;
  ncclUniqueId id;
} id_file_t;
#define ID_FILE_MAGIC 0x1dc0ffeeu

void nt_exchange_id(ncclUniqueId* id, int tag) {
  char path[512], tmp[600];
  id_path(path, sizeof path, tag);
  id_file_t f;
  if (nt_rank == 0) {
    memset(&f, 0, sizeof f);
    f.magic = ID_FILE_MAGIC;
    f.seed = nt_seed;
    NT_CHECK(ncclGetUniqueId(&f.id));
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    FILE* fp = fopen(tmp, "wb");
    if (fp == NULL || fwrite(&f, sizeof f, 1, fp) != 1 || fclose(fp) != 0)
      nt_fail("cannot write %s: %s", tmp, strerror(errno));
    if (rename(tmp, path) != 0) nt_fail("rename %s: %s", path, strerror(errno));
  } else {
    for (int waited_ms = 0;; waited_ms += 10) {
      FILE* fp = fopen(path, "rb");
      if (fp != NULL) {
        size_t got = fread(&f, sizeof f, 1, fp);
        fclose(fp);
        if (got == 1 && f.magic == ID_FILE_MAGIC) break;
      }
      if (waited_ms > 120000) nt_fail("no unique id in %s after 120 s", path);
      usleep(10000);
    }
  }
  if (!nt_seed_known) {
    nt_seed = f.seed;
    nt_seed_known = 1;
  }
  *id = f.id;
}

void nt_init_comm(ncclComm_t* comm, int tag, ncclConfig_t* config) {
  ncclUniqueId id;
  nt_exchange_id(&id, tag);
  if (config != NULL)
    NT_CHECK(ncclCommInitRankConfig(comm, nt_nranks, id, nt_rank, config));
  else
    NT_CHECK(ncclCommInitRank(comm, nt_nranks, id, nt_rank));
  nt_id_done(tag);
  if (nt_rank == 0 && tag == 0)
    printf("seed %llu (QCCL_TEST_SEED to replay), %d ranks\n", nt_seed, nt_nranks);
}

void nt_id_done(int tag) {
  if (nt_rank != 0) return;
  char path[512];
  id_path(path, sizeof path, tag);
  unlink(path);
}

uint64_t nt_hash(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = nt_seed ^ (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xbf58476d1ce4e5b9ull) ^
               (c * 0x94d049bb133111ebull);
  for (int k = 0; k < 2; k++) { /* splitmix64 finalizer, twice */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
  }
  return x;
}

size_t nt_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

const char* nt_type_name(ncclDataType_t t) {
  static const char* const names[] = {"int8",    "uint8",    "int32",   "uint32",
                                      "int64",   "uint64",   "float16", "float32",
                                      "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
  return (int)t >= 0 && (int)t < 12 ? names[t] : "?";
}

int nt_is_float(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16;
}

double nt_value(int tag, int r, size_t i, ncclDataType_t t, int small) {
  uint64_t h = nt_hash((uint64_t)tag, (uint64_t)r, (uint64_t)i);
  if (small) return (double)(int)(h % 19) - 9.0;
  switch (t) {
    case ncclInt8:
      return (double)(int)(h % 61) - 30.0;
    case ncclUint8:
      return (double)(h % 256);
    case ncclInt32:
      return (double)(int)(h % 2001) - 1000.0;
    case ncclUint32:
      return (double)(h % 2001);
    case ncclInt64:
    case ncclUint64:
      return (double)(int64_t)(h >> 24) - (t == ncclInt64 ? (double)(1ll << 39) : 0.0);
    case ncclBfloat16:
      return (double)(int)(h % 17) - 8.0;
    case ncclFloat32:
      return (double)(float)((double)(h >> 11) * 0x1p-52 - 1.0);
    default:
      return (double)(h >> 11) * 0x1p-52 - 1.0;
  }
}

void nt_store(void* buf, size_t i, ncclDataType_t t, double v) {
  switch (t) {
    case ncclInt8:
      ((int8_t*)buf)[i] = (int8_t)(int64_t)v;
      break;
    case ncclUint8:
      ((uint8_t*)buf)[i] = (uint8_t)(int64_t)v; /* wraps: the reference of a uint8 sum */
      break;
    case ncclInt32:
      ((int32_t*)buf)[i] = (int32_t)(int64_t)v;
      break;
    case ncclUint32:
      ((uint32_t*)buf)[i] = (uint32_t)(int64_t)v;
      break;
    case ncclInt64:
      ((int64_t*)buf)[i] = (int64_t)v;
      break;
    case ncclUint64:
      ((uint64_t*)buf)[i] = (uint64_t)(int64_t)v;
      break;
    case ncclBfloat16: { /* integers of 8 bits are exact: truncation is exact */
      float f = (float)v;
      uint32_t u;
      memcpy(&u, &f, 4);
      ((uint16_t*)buf)[i] = (uint16_t)(u >> 16);
      break;
    }
    case ncclFloat32:
      ((float*)buf)[i] = (float)v;
      break;
    case ncclFloat64:
      ((double*)buf)[i] = v;
      break;
    default:
      nt_fail("nt_store: type %s is not used by the tests", nt_type_name(t));
  }
}

double nt_load(const void* buf, size_t i, ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return ((const int8_t*)buf)[i];
    case ncclUint8:
      return ((const uint8_t*)buf)[i];
    case ncclInt32:
      return ((const int32_t*)buf)[i];
    case ncclUint32:
      return ((const uint32_t*)buf)[i];
    case ncclInt64:
      return (double)((const int64_t*)buf)[i];
    case ncclUint64:
      return (double)((const uint64_t*)buf)[i];
    case ncclBfloat16: {
      uint32_t u = (uint32_t)((const uint16_t*)buf)[i] << 16;
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
    case ncclFloat32:
      return ((const float*)buf)[i];
    case ncclFloat64:
      return ((const double*)buf)[i];
    default:
      nt_fail("nt_load: type %s is not used by the tests", nt_type_name(t));
  }
}

double nt_reduce_ref(int tag, size_t i, ncclDataType_t t, ncclRedOp_t op, int small,
                     const int* members, int nmem, double* abs_sum) {
  int n = members ? nmem : nt_nranks;
  double acc = 0, mag = 0;
  for (int k = 0; k < n; k++) {
    int r = members ? members[k] : k;
    double v = nt_value(tag, r, i, t, small);
    mag += fabs(v);
    if (k == 0)
      acc = v;
    else if (op == ncclSum || op == ncclAvg)
      acc += v;
    else if (op == ncclProd)
      acc *= v;
    else if (op == ncclMax)
      acc = v > acc ? v : acc;
    else if (op == ncclMin)
      acc = v < acc ? v : acc;
  }
  if (op == ncclAvg) acc /= n;
  if (!nt_is_float(t)) { /* the type's own arithmetic: wrap through a store */
    uint64_t tmp;
    nt_store(&tmp, 0, t, acc);
    acc = nt_load(&tmp, 0, t);
  }
  if (abs_sum) *abs_sum = mag;
  return acc;
}

void nt_compare(const void* buf, size_t i, ncclDataType_t t, ncclRedOp_t op, double ref,
                double abs_sum, int w, const char* what) {
  double got = nt_load(buf, i, t);
  int exact = !nt_is_float(t) || t == ncclBfloat16 || op == ncclMax || op == ncclMin;
  double eps = t == ncclFloat32 ? 0x1p-23 : 0x1p-52;
  double tol = exact ? 0.0 : 8.0 * w * eps * abs_sum + 1e-300;
  if (!(fabs(got - ref) <= tol))
    nt_fail("%s: element %zu of %s is %.17g, expected %.17g (tolerance %.3g)", what, i,
            nt_type_name(t), got, ref, tol);
}
