/*
 * mr_util.c - the shared scaffolding of the multi-rank tests (mr_util.h).
 *
 * The reference for reductions (mr_check_reduce) computes independently of
 * the library, in long double (64-bit significand) or exact integers, and
 * encloses the result qccl's definition allows:
 *
 *   integers   sum/prod wrap modulo 2^bits, max/min exact: compared exactly.
 *   max/min    (floats) the extreme input, NaN if any input is NaN:
 *              exact (only the sign of a zero may differ).
 *   sum        accumulated in f32 (f64 for Float64) and rounded once to the
 *              output type. Recursive summation of W terms in precision u
 *              (2^-24 or 2^-53) is within (W-1) u S of the exact sum E, S =
 *              sum |x_i| (Higham, Accuracy and Stability, 2nd ed., 4.2); we
 *              allow 1.01 (W-1) u S plus the long double error W 2^-63 S.
 *              If every input is a multiple of q (the smallest input's last
 *              place) and S < 2^p q (p = 24 or 53), every partial sum, in
 *              any order, is exact: then the bound is 0 and the output must
 *              be exactly E rounded to nearest even in the output type.
 *   avg        the sum (as above, in the accumulation type) divided by W in
 *              the accumulation type: with the sum in [lo, hi], the quotient
 *              is in [fl(lo / W), fl(hi / W)] as rounding is monotonic.
 *              (Pre-multiplying each input by 1/W is a different definition
 *              and may fall outside by an ulp.)
 *   prod       relative 1.01 (W-1) u |P|, plus (W-1) times the smallest
 *              subnormal of the accumulation type for underflow.
 *
 * The enclosure [E - err, E + err] is clipped to +-inf where the
 * accumulation type overflows (at or past the midpoint between its largest
 * finite value and the next power of two), then both ends are rounded to the
 * output type with the output type's own rules (f16/bf16 overflow to
 * infinity, fp8 saturates): rounding is monotonic, so the library's output
 * must lie between the two rounded ends. NaN inputs (and inf - inf, inf * 0)
 * require a NaN output. With one rank, a bitwise copy of the input is also
 * accepted (NCCL copies; it differs only for an e5m2 infinity, which the
 * f32 path saturates). The narrow types are decoded and rounded with the
 * tests' own codec (tests/unit/ref_fp.c), never with the library's.
 */
#include "mr_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ref_fp.h"

/* ---------------------------------------------------------------- basics */

uint64_t mr_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

size_t mr_rand_range(uint64_t* state, size_t lo, size_t hi) {
  *state = mr_mix(*state);
  return lo + (size_t)(*state % (uint64_t)(hi - lo + 1));
}

double mr_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t hash_str(const char* s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

void mr_die(mr_t* t, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("FATAL: ");
  vprintf(fmt, ap);
  printf(" (seed %" PRIu64 ")\n", t->seed);
  va_end(ap);
  fflush(stdout);
  exit(1);
}

/* -------------------------------------------------------------- options */

static int env_true(const char* name) {
  const char* v = getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

void mr_parse(mr_t* t, int argc, char** argv) {
  memset(t, 0, sizeof *t);
  t->prog = argv[0];
  t->t0 = mr_now();
  t->quick = env_true("QCCL_MR_QUICK");
  t->verbose = env_true("QCCL_MR_VERBOSE");
  int have_seed = 0;
  const char* env_seed = getenv("QCCL_TEST_SEED");
  if (env_seed && *env_seed) {
    t->seed = strtoull(env_seed, NULL, 0);
    have_seed = 1;
  }
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      t->seed = strtoull(argv[++i], NULL, 0);
      have_seed = 1;
    } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      t->only = argv[++i];
    } else if (strcmp(argv[i], "--quick") == 0) {
      t->quick = 1;
    } else if (strcmp(argv[i], "--verbose") == 0) {
      t->verbose = 1;
    } else if (t->nextra < MR_MAX_EXTRA) {
      t->extra[t->nextra++] = argv[i];
    }
  }
  if (!have_seed) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    t->seed = mr_mix((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
              ((uint64_t)getpid() << 20);
    t->seed &= 0xffffffffffffull; /* short enough to type */
  }
  t->seed_given = have_seed;
}

const char* mr_opt(const mr_t* t, const char* name) {
  for (int i = 0; i + 1 < t->nextra; i++)
    if (strcmp(t->extra[i], name) == 0) return t->extra[i + 1];
  return NULL;
}

int mr_flag(const mr_t* t, const char* name) {
  for (int i = 0; i < t->nextra; i++)
    if (strcmp(t->extra[i], name) == 0) return 1;
  return 0;
}

void mr_init(mr_t* t, int argc, char** argv) {
  mr_parse(t, argc, argv);
  int given = t->seed_given;
  qcclResult_t r = qcclCommInitFromEnv(&t->comm);
  if (r != qcclSuccess)
    mr_die(t, "qcclCommInitFromEnv: %s: %s", qcclGetErrorString(r), qcclGetLastError(NULL));
  if (qcclCommUserRank(t->comm, &t->rank) != qcclSuccess ||
      qcclCommCount(t->comm, &t->nranks) != qcclSuccess)
    mr_die(t, "qcclCommUserRank/qcclCommCount failed: %s", qcclGetLastError(t->comm));
  const char* er = getenv("RANK");
  const char* ew = getenv("WORLD_SIZE");
  if (er && ew && (atoi(er) != t->rank || atoi(ew) != t->nranks))
    mr_die(t, "communicator says rank %d of %d, environment says RANK=%s WORLD_SIZE=%s", t->rank,
           t->nranks, er, ew);
  /* one seed for all: rank 0's, broadcast, then checked with an all-gather */
  if (!given) {
    uint64_t s = t->seed;
    r = qcclBroadcast(&s, &s, 1, qcclUint64, 0, t->comm, NULL);
    if (r != qcclSuccess) mr_die(t, "seed broadcast: %s", qcclGetErrorString(r));
    t->seed = s;
  }
  uint64_t* all = calloc((size_t)t->nranks, sizeof *all);
  if (!all) mr_die(t, "out of memory");
  r = qcclAllGather(&t->seed, all, 1, qcclUint64, t->comm, NULL);
  if (r != qcclSuccess) mr_die(t, "seed all-gather: %s", qcclGetErrorString(r));
  for (int i = 0; i < t->nranks; i++)
    if (all[i] != t->seed)
      mr_die(t, "ranks disagree on the seed (rank %d has %" PRIu64 ")", i, all[i]);
  free(all);
  if (t->rank == 0)
    printf("%s: W=%d seed=%" PRIu64 "%s (replay: add --seed %" PRIu64 ")\n", t->prog, t->nranks,
           t->seed, t->quick ? " quick" : "", t->seed);
  fflush(stdout);
}

int mr_finish(mr_t* t) {
  if (t->comm) {
    qcclResult_t r = qcclCommFinalize(t->comm);
    if (r != qcclSuccess) {
      printf("FAIL qcclCommFinalize: %s: %s\n", qcclGetErrorString(r), qcclGetLastError(t->comm));
      t->failed++;
    }
    r = qcclCommDestroy(t->comm);
    if (r != qcclSuccess) {
      printf("FAIL qcclCommDestroy: %s\n", qcclGetErrorString(r));
      t->failed++;
    }
    t->comm = NULL;
  }
  if (t->only && t->cases == 0) {
    printf("FAIL: no case is named '%s' (names are printed with --verbose)\n", t->only);
    t->failed++;
  }
  if (t->failed || t->rank == 0)
    printf("%s: %s: %ld case(s), %ld failed, %.1f s, seed %" PRIu64 "\n", t->prog,
           t->failed ? "FAIL" : "PASS", t->cases, t->failed, mr_now() - t->t0, t->seed);
  fflush(stdout);
  return t->failed ? 1 : 0;
}

/* ---------------------------------------------------------------- cases */

int mr_case_begin(mr_t* t, mr_case_t* c, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->name, sizeof c->name, fmt, ap);
  va_end(ap);
  if (t->only && strcmp(t->only, c->name) != 0) return 0;
  c->t = t;
  c->bad = 0;
  c->cseed = mr_mix(t->seed ^ hash_str(c->name));
  c->t0 = mr_now();
  return 1;
}

void mr_case_fail(mr_case_t* c, const char* fmt, ...) {
  mr_t* t = c->t;
  if (c->bad == 0)
    printf("FAIL [%s] seed=%" PRIu64 " W=%d rank=%d; replay: qcclrun -n %d -- %s --seed %" PRIu64
           " --only '%s'\n",
           c->name, t->seed, t->nranks, t->rank, t->nranks, t->prog, t->seed, c->name);
  if (c->bad < 6) {
    va_list ap;
    va_start(ap, fmt);
    printf("  [%s] ", c->name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
  } else if (c->bad == 6) {
    printf("  [%s] (further failures of this case not shown)\n", c->name);
  }
  fflush(stdout);
  c->bad++;
}

int mr_case_end(mr_case_t* c) {
  c->t->cases++;
  if (c->bad) c->t->failed++;
  if (c->t->verbose && (c->t->rank == 0 || c->bad))
    printf("%s [%s] %.3f s\n", c->bad ? "FAIL" : "ok", c->name, mr_now() - c->t0);
  return c->bad == 0;
}

void mr_ok_(mr_case_t* c, qcclResult_t r, const char* what, const char* file, int line) {
  if (r == qcclSuccess) return;
  mr_t* t = c->t;
  printf("FAIL [%s] seed=%" PRIu64
         " W=%d rank=%d: %s returned %s (%d): \"%s\" (%s:%d); replay: "
         "qcclrun -n %d -- %s --seed %" PRIu64 " --only '%s'\n",
         c->name, t->seed, t->nranks, t->rank, what, qcclGetErrorString(r), (int)r,
         qcclGetLastError(t->comm), file, line, t->nranks, t->prog, t->seed, c->name);
  fflush(stdout);
  exit(1);
}

/* ----------------------------------------------------------- data types */

size_t mr_dt_size(qcclDataType_t dt) {
  switch (dt) {
    case qcclInt8:
    case qcclUint8:
    case qcclFloat8e4m3:
    case qcclFloat8e5m2:
      return 1;
    case qcclFloat16:
    case qcclBfloat16:
      return 2;
    case qcclInt32:
    case qcclUint32:
    case qcclFloat32:
      return 4;
    case qcclInt64:
    case qcclUint64:
    case qcclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* mr_dt_name(qcclDataType_t dt) {
  static const char* const names[] = {"int8",    "uint8",    "int32",   "uint32",
                                      "int64",   "uint64",   "float16", "float32",
                                      "float64", "bfloat16", "e4m3",    "e5m2"};
  return (unsigned)dt < 12 ? names[dt] : "?";
}

int mr_dt_is_float(qcclDataType_t dt) {
  return dt == qcclFloat16 || dt == qcclFloat32 || dt == qcclFloat64 || dt == qcclBfloat16 ||
         dt == qcclFloat8e4m3 || dt == qcclFloat8e5m2;
}

static int dt_is_signed(qcclDataType_t dt) {
  return dt == qcclInt8 || dt == qcclInt32 || dt == qcclInt64;
}

const char* mr_op_name(qcclRedOp_t op) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg"};
  return (unsigned)op < 5 ? names[op] : "?";
}

int mr_op_valid(qcclDataType_t dt, qcclRedOp_t op) {
  if ((unsigned)op >= 5) return 0;
  return op != qcclAvg || mr_dt_is_float(dt);
}

uint64_t mr_load(qcclDataType_t dt, const void* buf, size_t i) {
  const unsigned char* p = (const unsigned char*)buf + i * mr_dt_size(dt);
  switch (mr_dt_size(dt)) {
    case 1:
      return p[0];
    case 2: {
      uint16_t v;
      memcpy(&v, p, 2);
      return v;
    }
    case 4: {
      uint32_t v;
      memcpy(&v, p, 4);
      return v;
    }
    default: {
      uint64_t v;
      memcpy(&v, p, 8);
      return v;
    }
  }
}

void mr_store(qcclDataType_t dt, void* buf, size_t i, uint64_t bits) {
  unsigned char* p = (unsigned char*)buf + i * mr_dt_size(dt);
  switch (mr_dt_size(dt)) {
    case 1:
      p[0] = (unsigned char)bits;
      break;
    case 2: {
      uint16_t v = (uint16_t)bits;
      memcpy(p, &v, 2);
      break;
    }
    case 4: {
      uint32_t v = (uint32_t)bits;
      memcpy(p, &v, 4);
      break;
    }
    default:
      memcpy(p, &bits, 8);
      break;
  }
}

/* ------------------------------------------------------ float formats */

typedef struct {
  int ebits, mbits, bias;
  int fn; /* e4m3: no infinities, only all-ones is NaN */
  const ref_fmt_t* narrow;
} fmtp_t;

static fmtp_t fmt_of(qcclDataType_t dt) {
  fmtp_t p = {0, 0, 0, 0, NULL};
  switch (dt) {
    case qcclFloat16:
      p = (fmtp_t){5, 10, 15, 0, REF_F16};
      break;
    case qcclBfloat16:
      p = (fmtp_t){8, 7, 127, 0, REF_BF16};
      break;
    case qcclFloat8e4m3:
      p = (fmtp_t){4, 3, 7, 1, REF_E4M3};
      break;
    case qcclFloat8e5m2:
      p = (fmtp_t){5, 2, 15, 0, REF_E5M2};
      break;
    case qcclFloat32:
      p = (fmtp_t){8, 23, 127, 0, NULL};
      break;
    case qcclFloat64:
      p = (fmtp_t){11, 52, 1023, 0, NULL};
      break;
    default:
      break;
  }
  return p;
}

static uint64_t make_code(const fmtp_t* p, int sign, int e, uint64_t m) {
  return ((uint64_t)(sign != 0) << (p->ebits + p->mbits)) | ((uint64_t)e << p->mbits) |
         (m & ((1ull << p->mbits) - 1));
}

/* largest exponent field of a finite value */
static int max_efield(const fmtp_t* p) {
  return p->fn ? (1 << p->ebits) - 1 : (1 << p->ebits) - 2;
}

static long double value_of(qcclDataType_t dt, uint64_t bits) {
  if (dt == qcclFloat32) {
    uint32_t u = (uint32_t)bits;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  if (dt == qcclFloat64) {
    double d;
    memcpy(&d, &bits, 8);
    return d;
  }
  return ref_decode(fmt_of(dt).narrow, (uint32_t)bits);
}

static uint64_t bits_of_double(qcclDataType_t dt, double v) {
  if (dt == qcclFloat32) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
  }
  if (dt == qcclFloat64) {
    uint64_t u;
    memcpy(&u, &v, 8);
    return u;
  }
  return ref_encode(fmt_of(dt).narrow, v);
}

static long double max_of(qcclDataType_t dt) {
  if (dt == qcclFloat32) return FLT_MAX;
  if (dt == qcclFloat64) return DBL_MAX;
  return ref_max_finite(fmt_of(dt).narrow);
}

/* first magnitude that rounds to infinity in f32 / f64 */
static long double overflow_at(int acc64) {
  return acc64 ? (long double)DBL_MAX + ldexpl(1.0L, 970)
               : (long double)FLT_MAX + ldexpl(1.0L, 103);
}

static long double clip_acc(long double v, int acc64) {
  if (fabsl(v) >= overflow_at(acc64)) return v < 0 ? -INFINITY : INFINITY;
  return v;
}

/* v rounded to nearest in the accumulation type */
static long double round_acc(long double v, int acc64) {
  v = clip_acc(v, acc64);
  if (isinf(v)) return v;
  return acc64 ? (long double)(double)v : (long double)(float)v;
}

/* v rounded once to the output type dt (NaN stays NaN) */
static long double round_out(qcclDataType_t dt, long double v) {
  if (isnan(v)) return v;
  if (dt == qcclFloat32 || dt == qcclFloat64) {
    v = clip_acc(v, dt == qcclFloat64);
    if (isinf(v)) return v;
    return dt == qcclFloat32 ? (long double)(float)v : (long double)(double)v;
  }
  const ref_fmt_t* f = fmt_of(dt).narrow;
  return ref_decode(f, ref_encode(f, v));
}

/* the last place of the finite non-zero value x of type dt */
static long double quantum_of(qcclDataType_t dt, long double x) {
  if (dt == qcclFloat32 || dt == qcclFloat64) {
    int emin = dt == qcclFloat32 ? -126 : -1022;
    int mb = dt == qcclFloat32 ? 23 : 52;
    int e = ilogbl(x);
    if (e < emin) e = emin;
    return ldexpl(1.0L, e - mb);
  }
  return ref_ulp(fmt_of(dt).narrow, x);
}

/* -------------------------------------------------------------- inputs */

static uint64_t elem_hash(uint64_t cseed, int rank, size_t i) {
  return mr_mix(cseed ^ mr_mix(((uint64_t)i << 12) ^ (uint64_t)(rank + 1)));
}

static uint64_t width_mask(qcclDataType_t dt) {
  size_t s = mr_dt_size(dt);
  return s == 8 ? ~0ull : (1ull << (8 * s)) - 1;
}

/* a value suited to op: see the comment of mr_gen */
static uint64_t gen_float(qcclDataType_t dt, qcclRedOp_t op, int nranks, uint64_t r) {
  fmtp_t p = fmt_of(dt);
  uint64_t r2 = mr_mix(r);
  int sign = (int)(r >> 63);
  uint64_t m = r2 & ((1ull << p.mbits) - 1);
  int top = max_efield(&p);
  int e;
  if (op == qcclMax || op == qcclMin) {
    e = (int)((r >> 8) % (uint64_t)(top + 1)); /* any finite value, subnormals too */
  } else if (op == qcclProd) {
    e = p.bias - 1 + (int)((r >> 8) & 1); /* |x| in [0.5, 2): products stay in range */
  } else if ((r >> 8) & 7) {
    int band = p.narrow ? 4 : 10; /* 7 in 8: |x| in [2^-band, 2^(band+1)) */
    e = p.bias - band + (int)((r >> 16) % (uint64_t)(2 * band + 1));
  } else {
    /* 1 in 8: anywhere from subnormal to max / (2 W), so sums stay finite */
    int k = 2;
    while ((1 << k) < 4 * nranks) k++;
    e = (int)((r >> 16) % (uint64_t)(top - k + 1));
  }
  if (p.fn && e == top && m == (1ull << p.mbits) - 1) m--; /* e4m3: not the NaN */
  return make_code(&p, sign, e, m);
}

/* Inputs (all pure functions of cseed, rank, i):
 *   REDUCE, integers: uniformly random bits.
 *   REDUCE, floats: max/min: any finite value; prod: |x| in [0.5, 2);
 *     sum/avg: mostly |x| in a band around 1 (the narrow types' sums are
 *     then mostly exact in f32, so rounding is checked exactly), 1 in 8
 *     anywhere up to max / (2 W).
 *   SPECIAL, floats, by i % 8 (one victim rank v = (i / 8) % W):
 *     0 NaN on v; 1 +-inf on v; 2 +inf on v and -inf on v+1 (types with
 *     infinities); 3 about 0.75 * max on every rank, one sign (overflows a
 *     sum or product for W >= 2); 4 zeros of random sign; 5 subnormals;
 *     6, 7 as REDUCE.
 *   SPECIAL, integers: 0, 1, -1, MIN, MAX or random, per rank.
 *   RAW: any bits. */
uint64_t mr_gen(qcclDataType_t dt, qcclRedOp_t op, int kind, uint64_t cseed, int rank, int nranks,
                size_t i) {
  uint64_t r = elem_hash(cseed, rank, i);
  uint64_t mask = width_mask(dt);
  if (kind == MR_GEN_RAW || (kind == MR_GEN_REDUCE && !mr_dt_is_float(dt))) return r & mask;
  if (!mr_dt_is_float(dt)) {
    uint64_t min = 1ull << (8 * mr_dt_size(dt) - 1);
    switch ((r >> 8) % 6) {
      case 0:
        return 0;
      case 1:
        return 1;
      case 2:
        return mask;
      case 3:
        return dt_is_signed(dt) ? min : mask - 1;
      case 4:
        return dt_is_signed(dt) ? min - 1 : mask;
      default:
        return mr_mix(r) & mask;
    }
  }
  if (kind == MR_GEN_REDUCE) return gen_float(dt, op, nranks, r);
  fmtp_t p = fmt_of(dt);
  int all1 = (1 << p.ebits) - 1;
  int has_inf = !p.fn;
  uint64_t he = elem_hash(cseed, -1, i); /* the same on every rank */
  int victim = (int)((i / 8) % (size_t)nranks);
  switch (i % 8) {
    case 0:
      if (rank == victim)
        return make_code(&p, (int)(r >> 63), all1,
                         p.fn ? (1ull << p.mbits) - 1 : 1ull << (p.mbits - 1));
      break;
    case 1:
      if (has_inf && rank == victim) return make_code(&p, (int)(he >> 63), all1, 0);
      break;
    case 2:
      if (has_inf && nranks >= 2 && rank == victim) return make_code(&p, 0, all1, 0);
      if (has_inf && nranks >= 2 && rank == (victim + 1) % nranks) return make_code(&p, 1, all1, 0);
      break;
    case 3: {
      uint64_t big = bits_of_double(dt, (double)(0.75L * max_of(dt)));
      int sign = op == qcclProd ? (int)(r >> 63) : (int)(he >> 63);
      return big | ((uint64_t)sign << (p.ebits + p.mbits));
    }
    case 4:
      return make_code(&p, (int)(r >> 63), 0, 0);
    case 5:
      return make_code(&p, (int)(r >> 63), 0, mr_mix(r) | 1);
    default:
      break;
  }
  return gen_float(dt, op, nranks, r);
}

void mr_fill(qcclDataType_t dt, qcclRedOp_t op, int kind, uint64_t cseed, int rank, int nranks,
             void* buf, size_t first, size_t n) {
  for (size_t k = 0; k < n; k++)
    mr_store(dt, buf, k, mr_gen(dt, op, kind, cseed, rank, nranks, first + k));
}

/* ----------------------------------------------------------- reference */

static int check_int(qcclDataType_t dt, qcclRedOp_t op, int nranks, const uint64_t* in,
                     uint64_t got, char* why, size_t whylen) {
  uint64_t mask = width_mask(dt);
  int bits = 8 * (int)mr_dt_size(dt);
  int sgn = dt_is_signed(dt);
  uint64_t acc = in[0] & mask;
  for (int i = 1; i < nranks; i++) {
    uint64_t x = in[i] & mask;
    switch (op) {
      case qcclSum:
        acc += x;
        break;
      case qcclProd:
        acc *= x;
        break;
      default: {
        int64_t a = (int64_t)acc, b = (int64_t)x;
        if (sgn && bits < 64) { /* sign-extend */
          uint64_t sb = 1ull << (bits - 1);
          a = (int64_t)((acc ^ sb) - sb);
          b = (int64_t)((x ^ sb) - sb);
        }
        int x_wins;
        if (sgn)
          x_wins = op == qcclMax ? b > a : b < a;
        else
          x_wins = op == qcclMax ? x > (acc & mask) : x < (acc & mask);
        if (x_wins) acc = x;
        break;
      }
    }
    acc &= mask;
  }
  acc &= mask;
  if ((got & mask) == acc) return 1;
  int n = snprintf(why, whylen, "%s %s: got 0x%" PRIx64 " expected 0x%" PRIx64 "; inputs",
                   mr_dt_name(dt), mr_op_name(op), got & mask, acc);
  for (int i = 0; i < nranks && n > 0 && (size_t)n < whylen; i++)
    n += snprintf(why + n, whylen - (size_t)n, " 0x%" PRIx64, in[i] & mask);
  return 0;
}

int mr_check_reduce(qcclDataType_t dt, qcclRedOp_t op, int nranks, const uint64_t* in, uint64_t got,
                    char* why, size_t whylen) {
  if (!mr_dt_is_float(dt)) return check_int(dt, op, nranks, in, got, why, whylen);
  const int acc64 = dt == qcclFloat64;
  const int p = acc64 ? 53 : 24;
  const long double u = ldexpl(1.0L, -p);
  const long double tiny = acc64 ? ldexpl(1.0L, -1074) : ldexpl(1.0L, -149);
  const long double ld_err = ldexpl(1.0L, -63); /* long double rounding, per operation */
  const int W = nranks;
  long double x[64];
  if (W < 1 || W > 64) {
    snprintf(why, whylen, "reference handles 1..64 ranks, not %d", W);
    return 0;
  }
  int any_nan = 0, pinf = 0, ninf = 0, zero = 0;
  for (int i = 0; i < W && i < 64; i++) {
    x[i] = value_of(dt, in[i]);
    if (isnan(x[i])) any_nan = 1;
    if (isinf(x[i])) *(x[i] > 0 ? &pinf : &ninf) = 1;
    if (x[i] == 0) zero = 1;
  }
  long double lo = 0, hi = 0, exact = 0;
  int want_nan = 0;
  switch (op) {
    case qcclMax:
    case qcclMin: {
      if (any_nan) {
        want_nan = 1;
        break;
      }
      long double y = x[0];
      for (int i = 1; i < W; i++)
        if (op == qcclMax ? x[i] > y : x[i] < y) y = x[i];
      lo = hi = exact = y;
      break;
    }
    case qcclSum:
    case qcclAvg: {
      if (any_nan || (pinf && ninf)) {
        want_nan = 1;
        break;
      }
      if (pinf || ninf) {
        lo = hi = exact = pinf ? INFINITY : -INFINITY;
        break;
      }
      long double s = 0, e = 0, q = INFINITY;
      for (int i = 0; i < W; i++) {
        e += x[i];
        s += fabsl(x[i]);
        if (x[i] != 0 && quantum_of(dt, x[i]) < q) q = quantum_of(dt, x[i]);
      }
      long double err = 1.01L * (W - 1) * u * s + W * ld_err * s;
      if (op == qcclSum && (s == 0 || s < ldexpl(q, p))) err = 0; /* every partial sum exact */
      lo = clip_acc(e - err, acc64);
      hi = clip_acc(e + err, acc64);
      exact = e;
      if (op == qcclAvg) {
        /* y = fl(s / W) with s in [lo, hi], and fl is monotonic */
        if (!isinf(lo)) lo = round_acc(lo / W - fabsl(lo / W) * ld_err, acc64);
        if (!isinf(hi)) hi = round_acc(hi / W + fabsl(hi / W) * ld_err, acc64);
        exact = e / W;
      }
      break;
    }
    case qcclProd: {
      if (any_nan || ((pinf || ninf) && zero)) {
        want_nan = 1;
        break;
      }
      long double pr = 1;
      for (int i = 0; i < W; i++) pr *= x[i];
      if (pinf || ninf) {
        lo = hi = exact = pr; /* +-inf with the sign of the product */
        break;
      }
      long double err = 1.01L * (W - 1) * u * fabsl(pr) + W * ld_err * fabsl(pr) + (W - 1) * tiny;
      lo = clip_acc(pr - err, acc64);
      hi = clip_acc(pr + err, acc64);
      exact = pr;
      break;
    }
    default:
      snprintf(why, whylen, "bad op %d", (int)op);
      return 0;
  }
  long double g = value_of(dt, got);
  /* one rank: the reduction of one value may be a plain copy (NCCL copies),
   * which keeps an fp8 e5m2 infinity that the f32 path would saturate */
  if (W == 1 && (got == in[0] || (isnan(g) && isnan(x[0])))) return 1;
  int ok;
  long double olo = 0, ohi = 0;
  if (want_nan) {
    ok = isnan(g);
  } else {
    olo = round_out(dt, lo);
    ohi = round_out(dt, hi);
    ok = !isnan(g) && olo <= g && g <= ohi;
  }
  if (ok) return 1;
  int n;
  if (want_nan)
    n = snprintf(why, whylen, "%s %s: got %.10Lg (0x%" PRIx64 "), expected NaN; inputs",
                 mr_dt_name(dt), mr_op_name(op), g, got);
  else
    n = snprintf(why, whylen,
                 "%s %s: got %.10Lg (0x%" PRIx64
                 "), allowed [%.10Lg, %.10Lg] (exact %.12Lg, "
                 "nearest 0x%" PRIx64 "); inputs",
                 mr_dt_name(dt), mr_op_name(op), g, got, olo, ohi, exact,
                 bits_of_double(dt, (double)round_out(dt, exact)));
  for (int i = 0; i < W && n > 0 && (size_t)n < whylen; i++)
    n += snprintf(why + n, whylen - (size_t)n, " %.10Lg", x[i]);
  return 0;
}

int mr_check_elem(mr_case_t* c, qcclDataType_t dt, qcclRedOp_t op, int kind, size_t i, uint64_t got,
                  size_t out_i) {
  uint64_t in[64];
  int W = c->t->nranks;
  for (int r = 0; r < W && r < 64; r++) in[r] = mr_gen(dt, op, kind, c->cseed, r, W, i);
  char why[768];
  if (mr_check_reduce(dt, op, W, in, got, why, sizeof why)) return 1;
  mr_case_fail(c, "element %zu: %s", out_i, why);
  return 0;
}

size_t mr_check_copy(mr_case_t* c, qcclDataType_t dt, const void* buf, size_t first, size_t n,
                     int src, size_t src_first, const char* what) {
  size_t bad = 0;
  for (size_t k = 0; k < n; k++) {
    uint64_t want = mr_gen(dt, qcclSum, MR_GEN_RAW, c->cseed, src, c->t->nranks, src_first + k);
    uint64_t got = mr_load(dt, buf, first + k);
    if (got != want) {
      if (bad < 3)
        mr_case_fail(
            c, "%s element %zu: got 0x%" PRIx64 " expected 0x%" PRIx64 " (rank %d's element %zu)",
            what, first + k, got, want, src, src_first + k);
      bad++;
    }
  }
  if (bad > 3) mr_case_fail(c, "%s: %zu of %zu elements wrong", what, bad, n);
  return bad;
}

/* -------------------------------------------------------------- buffers */

void mr_buf_alloc(mr_buf_t* b, size_t bytes, size_t misalign) {
  misalign %= 64;
  size_t total = 64 + MR_GUARD + misalign + bytes + MR_GUARD;
  b->raw = malloc(total);
  if (!b->raw) {
    printf("FATAL: out of memory (%zu bytes)\n", total);
    exit(1);
  }
  /* align the start of the user area to 64 + misalign */
  uintptr_t base = ((uintptr_t)b->raw + MR_GUARD + 63) & ~(uintptr_t)63;
  b->p = (unsigned char*)base + misalign;
  b->bytes = bytes;
  b->misalign = misalign;
  memset(b->raw, 0x5c, (size_t)(b->p - b->raw));
  memset(b->p, MR_FILL_BYTE, bytes);
  memset(b->p + bytes, 0x5c, MR_GUARD);
}

void mr_buf_free(mr_buf_t* b) {
  free(b->raw);
  b->raw = b->p = NULL;
  b->bytes = 0;
}

int mr_buf_check_guards(mr_case_t* c, const mr_buf_t* b, const char* what) {
  int ok = 1;
  for (unsigned char* q = b->p - MR_GUARD; q < b->p; q++)
    if (*q != 0x5c) {
      mr_case_fail(c, "%s: byte %td before the buffer was overwritten", what, q - b->p);
      ok = 0;
      break;
    }
  for (unsigned char* q = b->p + b->bytes; q < b->p + b->bytes + MR_GUARD; q++)
    if (*q != 0x5c) {
      mr_case_fail(c, "%s: byte %zu past the end (%zu bytes) was overwritten", what,
                   (size_t)(q - b->p), b->bytes);
      ok = 0;
      break;
    }
  return ok;
}

int mr_buf_untouched(const mr_buf_t* b) {
  for (size_t i = 0; i < b->bytes; i++)
    if (b->p[i] != MR_FILL_BYTE) return 0;
  return 1;
}

void mr_shm_log(char* log, size_t n, const char* name) {
  snprintf(log, n, "/tmp/qccl-mr-%s-%d.log", name, (int)getpid());
  setenv("QCCL_DEBUG", "INFO", 1);
  setenv("QCCL_DEBUG_SUBSYS", "SHM", 1);
  setenv("QCCL_DEBUG_FILE", log, 1);
}

int mr_file_has(const char* path, const char* text) {
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  char line[1024];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, text) != NULL;
  fclose(f);
  return found;
}

uint64_t mr_hash(const void* p, size_t bytes) {
  const unsigned char* s = p;
  uint64_t h = 0x243f6a8885a308d3ull ^ bytes;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < bytes; i++) h = (h ^ s[i]) * 0x100000001b3ull;
  return mr_mix(h);
}

int mr_same_everywhere(mr_case_t* c, uint64_t h, const char* what) {
  mr_t* t = c->t;
  uint64_t* all = calloc((size_t)t->nranks, sizeof *all);
  if (!all) mr_die(t, "out of memory");
  MR_OK(c, qcclAllGather(&h, all, 1, qcclUint64, t->comm, NULL));
  int same = 1;
  for (int i = 0; i < t->nranks; i++)
    if (all[i] != all[0]) same = 0;
  if (!same) {
    char list[512];
    int n = 0;
    for (int i = 0; i < t->nranks && n >= 0 && (size_t)n < sizeof list; i++)
      n += snprintf(list + n, sizeof list - (size_t)n, " %016" PRIx64, all[i]);
    mr_case_fail(c, "%s differs between ranks (hash per rank:%s)", what, list);
  }
  free(all);
  return same;
}

/* ------------------------------------------------------ large rotation */

const mr_split_t mr_split_cases[MR_SPLIT_CASES] = {
    {qcclInt8, (2u << 20) + 1}, {qcclInt8, (4u << 20) - 1}, {qcclInt8, (4u << 20) + 4097},
    {qcclFloat32, 999983},      {qcclFloat64, 1048573},     {qcclInt8, (9u << 20) + 13}};

int mr_large_cases(const mr_t* t, int coll, mr_large_t* out) {
  static const qcclDataType_t dts[12] = {qcclFloat32,    qcclBfloat16, qcclInt32,      qcclFloat16,
                                         qcclUint8,      qcclFloat64,  qcclFloat8e4m3, qcclInt64,
                                         qcclFloat8e5m2, qcclUint32,   qcclInt8,       qcclUint64};
  static const qcclRedOp_t ops[12] = {qcclSum, qcclAvg, qcclProd, qcclMax, qcclMin,  qcclSum,
                                      qcclAvg, qcclMax, qcclSum,  qcclSum, qcclProd, qcclMin};
  static const int worlds[6] = {1, 2, 3, 4, 5, 8};
  int wi = t->nranks % 6;
  for (int i = 0; i < 6; i++)
    if (worlds[i] == t->nranks) wi = i;
  int n = 0;
  for (int ci = 0; ci < 2; ci++) {
    if (t->quick && ci == 1) continue;
    int s = 2 * wi + ci;
    int k = (s + coll) % 12;
    out[n].dt = dts[k];
    out[n].op = ops[k];
    out[n].inplace = (s + coll) & 1;
    out[n].count = ci == 0 ? MR_LARGE1 : MR_LARGE2;
    out[n].root = (7 * s + coll) % t->nranks;
    n++;
  }
  return n;
}

/* ------------------------------------------------------ job files */

int mr_job_dir(char* out, size_t len) {
  const char* port = getenv("MASTER_PORT");
  const char* secret = getenv("QCCL_SECRET");
  const char* tmp = getenv("TMPDIR");
  if (!port) return -1;
  snprintf(out, len, "%s/qccl-mr-%u-%s-%016" PRIx64, tmp && *tmp ? tmp : "/tmp", (unsigned)getuid(),
           port, hash_str(secret ? secret : ""));
  if (mkdir(out, 0700) != 0 && errno != EEXIST) return -1;
  return 0;
}

int mr_publish(const char* dir, const char* name, const void* data, size_t bytes) {
  char tmp[512], path[512];
  snprintf(tmp, sizeof tmp, "%s/.%s.%d", dir, name, (int)getpid());
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(tmp, "wb");
  if (!f) return -1;
  size_t w = fwrite(data, 1, bytes, f);
  if (fclose(f) != 0 || w != bytes) return -1;
  return rename(tmp, path);
}

int mr_fetch(const char* dir, const char* name, void* data, size_t bytes, double timeout_s) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  double end = mr_now() + timeout_s;
  for (;;) {
    FILE* f = fopen(path, "rb");
    if (f) {
      size_t r = fread(data, 1, bytes, f);
      fclose(f);
      return r == bytes ? 0 : -1;
    }
    if (mr_now() > end) return -1;
    usleep(10000);
  }
}

void mr_job_dir_remove(const char* dir, const char* const* names, int nnames) {
  char path[512];
  for (int i = 0; i < nnames; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    unlink(path);
  }
  rmdir(dir);
}

/* ------------------------------------------------------ /dev/shm */

int mr_shm_leftovers(const int32_t* pids, int n, char* out, size_t len) {
  int found = 0;
  size_t used = 0;
  if (len) out[0] = 0;
  DIR* d = opendir("/dev/shm");
  if (!d) return 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    for (int i = 0; i < n; i++) {
      char prefix[64];
      int pl = snprintf(prefix, sizeof prefix, "qccl-%d-", (int)pids[i]);
      if (strncmp(e->d_name, prefix, (size_t)pl) == 0) {
        found++;
        if (used < len) {
          int w = snprintf(out + used, len - used, "%s/dev/shm/%s", used ? " " : "", e->d_name);
          if (w > 0) used += (size_t)w;
        }
      }
    }
  }
  closedir(d);
  return found;
}
