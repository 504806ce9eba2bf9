/*
 * perf_data.c - inputs and the independent reference of the -c check.
 *
 * Input element idx of rank r is a pure function of (seed, r, idx): the
 * splitmix64 sequence started from a per-rank key, mapped to a small set
 * of values chosen per op so that every reduction is exact or nearly so:
 *   sum, avg, max, min: floats k/16 for k in [-16, 15]; signed integers in
 *                       [-8, 7]; unsigned integers in [0, 31]
 *   prod:               floats {-2, -1/2, 1/2, 2}; signed {-2, -1, 1, 2};
 *                       unsigned {1, 2}
 * The value is then rounded to the element type (fp8 e5m2 cannot hold
 * 15/16), so the reference always starts from what was really sent.
 *
 * The reference rebuilds every expected output element from the inputs of
 * all ranks, never from another rank's buffer: integers exactly (two's
 * complement wrap-around, as the library's integer arithmetic), floats as
 * an f64 reduction compared with a tolerance, see perf_check_rule().
 * Elements that are copied, not reduced, must match bit for bit.
 *
 * The float formats narrower than f32 (f16, bf16, fp8 e4m3 / e5m2) are
 * encoded and decoded here by one generic routine, independent of the
 * library's converters.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "perf.h"

typedef struct {
  int mbits, ebits, bias;
  double maxfin;
  int ieee; /* exponent all ones is inf/NaN (else: e4m3fn, only S.1111.111 is NaN) */
} perf_fmt_t;

static const perf_fmt_t fmt_f16 = {10, 5, 15, 65504.0, 1};
static const perf_fmt_t fmt_bf16 = {7, 8, 127, 3.3895313892515355e38, 1};
static const perf_fmt_t fmt_e4m3 = {3, 4, 7, 448.0, 0};
static const perf_fmt_t fmt_e5m2 = {2, 5, 15, 57344.0, 1};

static const perf_fmt_t* perf_fmt(qcclDataType_t t) {
  switch (t) {
    case qcclFloat16:
      return &fmt_f16;
    case qcclBfloat16:
      return &fmt_bf16;
    case qcclFloat8e4m3:
      return &fmt_e4m3;
    case qcclFloat8e5m2:
      return &fmt_e5m2;
    default:
      return NULL;
  }
}

/* Rounds x to the format, ties to even; overflow gives inf (IEEE-like
 * formats) or saturates (e4m3). */
static double fmt_round(double x, const perf_fmt_t* f) {
  if (isnan(x) || x == 0.0) return x;
  double a = fabs(x);
  int e;
  frexp(a, &e);
  int lead = e - 1, emin = 1 - f->bias;
  if (lead < emin) lead = emin;
  double q = ldexp(1.0, lead - f->mbits);
  double r = nearbyint(a / q) * q;
  if (r > f->maxfin) r = f->ieee ? INFINITY : f->maxfin;
  return copysign(r, x);
}

static uint32_t fmt_encode(double x, const perf_fmt_t* f) {
  uint32_t sign = signbit(x) ? 1u << (f->ebits + f->mbits) : 0u;
  uint32_t emax = (1u << f->ebits) - 1;
  if (isnan(x)) return sign | (emax << f->mbits) | ((1u << f->mbits) - 1);
  double r = fabs(fmt_round(x, f));
  if (isinf(r)) return sign | (emax << f->mbits);
  int emin = 1 - f->bias;
  if (r < ldexp(1.0, emin)) return sign | (uint32_t)(r / ldexp(1.0, emin - f->mbits));
  int e;
  frexp(r, &e);
  int lead = e - 1;
  uint32_t mant = (uint32_t)(r / ldexp(1.0, lead - f->mbits)) - (1u << f->mbits);
  return sign | ((uint32_t)(lead + f->bias) << f->mbits) | mant;
}

static double fmt_decode(uint32_t b, const perf_fmt_t* f) {
  uint32_t emax = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
  uint32_t ex = (b >> f->mbits) & emax, m = b & mmask;
  double s = (b >> (f->ebits + f->mbits)) & 1u ? -1.0 : 1.0;
  if (f->ieee && ex == emax) return m ? NAN : s * INFINITY;
  if (!f->ieee && ex == emax && m == mmask) return NAN;
  if (ex == 0) return s * ldexp((double)m, 1 - f->bias - f->mbits);
  return s * ldexp(1.0 + (double)m / (double)(1u << f->mbits), (int)ex - f->bias);
}

/* ---- types and ops ---- */

static const char* const perf_type_names[qcclNumTypes] = {"int8",   "uint8",    "int32",  "uint32",
                                                          "int64",  "uint64",   "half",   "float",
                                                          "double", "bfloat16", "f8e4m3", "f8e5m2"};
static const size_t perf_type_sizes[qcclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
static const char* const perf_op_names[qcclNumOps] = {"sum", "prod", "max", "min", "avg"};

size_t perf_type_size(qcclDataType_t t) {
  return (unsigned)t < qcclNumTypes ? perf_type_sizes[t] : 0;
}

const char* perf_type_name(qcclDataType_t t) {
  return (unsigned)t < qcclNumTypes ? perf_type_names[t] : "?";
}

int perf_type_parse(const char* s, qcclDataType_t* t) {
  static const struct {
    const char* name;
    qcclDataType_t t;
  } alias[] = {{"char", qcclInt8},         {"int", qcclInt32},       {"float16", qcclFloat16},
               {"fp16", qcclFloat16},      {"float32", qcclFloat32}, {"f32", qcclFloat32},
               {"float64", qcclFloat64},   {"bf16", qcclBfloat16},   {"fp8e4m3", qcclFloat8e4m3},
               {"fp8e5m2", qcclFloat8e5m2}};
  for (int i = 0; i < qcclNumTypes; i++)
    if (strcmp(s, perf_type_names[i]) == 0) return *t = (qcclDataType_t)i, 0;
  for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
    if (strcmp(s, alias[i].name) == 0) return *t = alias[i].t, 0;
  return -1;
}

int perf_type_is_float(qcclDataType_t t) {
  return t >= qcclFloat16;
}

static int perf_type_is_signed(qcclDataType_t t) {
  return t == qcclInt8 || t == qcclInt32 || t == qcclInt64;
}

const char* perf_op_name(qcclRedOp_t op) {
  return (unsigned)op < qcclNumOps ? perf_op_names[op] : "?";
}

int perf_op_parse(const char* s, qcclRedOp_t* op) {
  for (int i = 0; i < qcclNumOps; i++)
    if (strcmp(s, perf_op_names[i]) == 0) return *op = (qcclRedOp_t)i, 0;
  return -1;
}

/* ---- element access ---- */

double perf_round_to_type(double x, qcclDataType_t t) {
  const perf_fmt_t* f = perf_fmt(t);
  if (f) return fmt_round(x, f);
  if (t == qcclFloat32) return (double)(float)x;
  return x;
}

void perf_store(void* buf, size_t i, qcclDataType_t t, double x) {
  switch (t) {
    case qcclInt8:
      ((int8_t*)buf)[i] = (int8_t)x;
      break;
    case qcclUint8:
      ((uint8_t*)buf)[i] = (uint8_t)x;
      break;
    case qcclInt32:
      ((int32_t*)buf)[i] = (int32_t)x;
      break;
    case qcclUint32:
      ((uint32_t*)buf)[i] = (uint32_t)x;
      break;
    case qcclInt64:
      ((int64_t*)buf)[i] = (int64_t)x;
      break;
    case qcclUint64:
      ((uint64_t*)buf)[i] = (uint64_t)x;
      break;
    case qcclFloat32:
      ((float*)buf)[i] = (float)x;
      break;
    case qcclFloat64:
      ((double*)buf)[i] = x;
      break;
    case qcclFloat16:
    case qcclBfloat16:
      ((uint16_t*)buf)[i] = (uint16_t)fmt_encode(x, perf_fmt(t));
      break;
    case qcclFloat8e4m3:
    case qcclFloat8e5m2:
      ((uint8_t*)buf)[i] = (uint8_t)fmt_encode(x, perf_fmt(t));
      break;
    default:
      break;
  }
}

double perf_load(const void* buf, size_t i, qcclDataType_t t) {
  switch (t) {
    case qcclInt8:
      return ((const int8_t*)buf)[i];
    case qcclUint8:
      return ((const uint8_t*)buf)[i];
    case qcclInt32:
      return ((const int32_t*)buf)[i];
    case qcclUint32:
      return ((const uint32_t*)buf)[i];
    case qcclInt64:
      return (double)((const int64_t*)buf)[i];
    case qcclUint64:
      return (double)((const uint64_t*)buf)[i];
    case qcclFloat32:
      return ((const float*)buf)[i];
    case qcclFloat64:
      return ((const double*)buf)[i];
    case qcclFloat16:
    case qcclBfloat16:
      return fmt_decode(((const uint16_t*)buf)[i], perf_fmt(t));
    case qcclFloat8e4m3:
    case qcclFloat8e5m2:
      return fmt_decode(((const uint8_t*)buf)[i], perf_fmt(t));
    default:
      return NAN;
  }
}

/* Raw integer element, sign- or zero-extended. */
static uint64_t perf_load_bits(const void* buf, size_t i, qcclDataType_t t) {
  switch (t) {
    case qcclInt8:
      return (uint64_t)(int64_t)((const int8_t*)buf)[i];
    case qcclUint8:
      return ((const uint8_t*)buf)[i];
    case qcclInt32:
      return (uint64_t)(int64_t)((const int32_t*)buf)[i];
    case qcclUint32:
      return ((const uint32_t*)buf)[i];
    case qcclInt64:
      return (uint64_t)((const int64_t*)buf)[i];
    default:
      return ((const uint64_t*)buf)[i];
  }
}

/* x truncated to the integer type's width and extended back (wrap-around). */
static uint64_t perf_wrap(uint64_t x, qcclDataType_t t) {
  switch (t) {
    case qcclInt8:
      return (uint64_t)(int64_t)(int8_t)(uint8_t)x;
    case qcclUint8:
      return (uint8_t)x;
    case qcclInt32:
      return (uint64_t)(int64_t)(int32_t)(uint32_t)x;
    case qcclUint32:
      return (uint32_t)x;
    default:
      return x;
  }
}

/* ---- inputs ---- */

static inline uint64_t perf_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

#define PERF_GOLDEN 0x9E3779B97F4A7C15ull

static inline uint64_t perf_rank_key(uint64_t seed, int rank) {
  return perf_mix(seed + PERF_GOLDEN * (uint64_t)(rank + 1));
}

/* The value before rounding to the type, from the hash h. */
static inline double perf_value(uint64_t h, qcclDataType_t t, qcclRedOp_t op) {
  static const double fprod[4] = {-2.0, -0.5, 0.5, 2.0};
  static const double sprod[4] = {-2.0, -1.0, 1.0, 2.0};
  if (perf_type_is_float(t)) {
    if (op == qcclProd) return fprod[h >> 62];
    return (double)((int)(h >> 59) - 16) / 16.0;
  }
  if (perf_type_is_signed(t)) return op == qcclProd ? sprod[h >> 62] : (double)((int)(h >> 60) - 8);
  return op == qcclProd ? (double)(1 + (h >> 63)) : (double)(h >> 59);
}

double perf_input(uint64_t seed, int rank, size_t idx, qcclDataType_t t, qcclRedOp_t op) {
  uint64_t h = perf_mix(perf_rank_key(seed, rank) + PERF_GOLDEN * ((uint64_t)idx + 1));
  return perf_round_to_type(perf_value(h, t, op), t);
}

void perf_fill(void* buf, size_t n, qcclDataType_t t, qcclRedOp_t op, uint64_t seed, int rank,
               size_t idx0) {
  uint64_t key = perf_rank_key(seed, rank);
  if (t == qcclFloat32) { /* the common case, without the generic store */
    float* f = buf;
    for (size_t i = 0; i < n; i++)
      f[i] = (float)perf_value(perf_mix(key + PERF_GOLDEN * ((uint64_t)(idx0 + i) + 1)), t, op);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    uint64_t h = perf_mix(key + PERF_GOLDEN * ((uint64_t)(idx0 + i) + 1));
    perf_store(buf, i, t, perf_round_to_type(perf_value(h, t, op), t));
  }
}

void perf_poison(void* buf, size_t n, qcclDataType_t t) {
  /* all ones is NaN in every float format; 0xa5 is outside the integer
   * inputs' range for the rank counts measured here */
  memset(buf, perf_type_is_float(t) ? 0xff : 0xa5, n * perf_type_size(t));
}

/* ---- the reference ---- */

/* Precision p (significant bits) of a float type. */
static int perf_precision(qcclDataType_t t) {
  switch (t) {
    case qcclFloat64:
      return 53;
    case qcclFloat32:
      return 24;
    case qcclFloat16:
      return 11;
    case qcclBfloat16:
      return 8;
    case qcclFloat8e4m3:
      return 4;
    default:
      return 3; /* e5m2 */
  }
}

const char* perf_check_rule(void) {
  return "integers exact; copies bitwise; float reductions vs an f64 reference: "
         "|got-ref| <= (2^(1-p) + n*eps_acc)*sum|x| + 2^-24 "
         "(p: type precision, eps_acc 2^-52 for double, else 2^-23)";
}

static void perf_note_wrong(perf_check_t* out, size_t j, double got, double want) {
  if (out->wrong++ == 0) {
    out->first_index = j;
    out->first_got = got;
    out->first_expected = want;
  }
}

static void perf_check_int(const perf_coll_t* coll, const perf_counts_t* c, const void* recv,
                           qcclDataType_t t, qcclRedOp_t op, int rank, int n, int root,
                           uint64_t seed, perf_check_t* out) {
  int sgn = perf_type_is_signed(t);
  for (size_t j = 0; j < c->checkcount; j++) {
    size_t si;
    int src = coll->source(j, rank, n, root, c, &si);
    uint64_t want;
    if (src != PERF_SRC_ALL) {
      want = perf_wrap((uint64_t)(int64_t)perf_input(seed, src, si, t, op), t);
    } else {
      int64_t v0 = (int64_t)perf_input(seed, 0, si, t, op);
      uint64_t acc = (uint64_t)v0;
      for (int r = 1; r < n; r++) {
        int64_t v = (int64_t)perf_input(seed, r, si, t, op);
        uint64_t u = (uint64_t)v;
        switch (op) {
          case qcclSum:
            acc += u;
            break;
          case qcclProd:
            acc *= u;
            break;
          case qcclMax:
            acc = sgn ? ((int64_t)acc < v ? u : acc) : (acc < u ? u : acc);
            break;
          case qcclMin:
            acc = sgn ? ((int64_t)acc > v ? u : acc) : (acc > u ? u : acc);
            break;
          default:
            break;
        }
      }
      want = perf_wrap(acc, t);
    }
    uint64_t got = perf_load_bits(recv, j, t);
    if (got != want)
      perf_note_wrong(out, j, sgn ? (double)(int64_t)got : (double)got,
                      sgn ? (double)(int64_t)want : (double)want);
  }
}

static void perf_check_float(const perf_coll_t* coll, const perf_counts_t* c, const void* recv,
                             qcclDataType_t t, qcclRedOp_t op, int rank, int n, int root,
                             uint64_t seed, perf_check_t* out) {
  double eps_acc = t == qcclFloat64 ? ldexp(1.0, -52) : ldexp(1.0, -23);
  double rel = ldexp(1.0, 1 - perf_precision(t)) + n * eps_acc;
  for (size_t j = 0; j < c->checkcount; j++) {
    size_t si;
    int src = coll->source(j, rank, n, root, c, &si);
    double got = perf_load(recv, j, t);
    if (src != PERF_SRC_ALL) {
      double want = perf_input(seed, src, si, t, op);
      if (!(got == want)) perf_note_wrong(out, j, got, want);
      continue;
    }
    double acc = perf_input(seed, 0, si, t, op), mag = fabs(acc);
    for (int r = 1; r < n; r++) {
      double v = perf_input(seed, r, si, t, op);
      mag += fabs(v);
      switch (op) {
        case qcclSum:
        case qcclAvg:
          acc += v;
          break;
        case qcclProd:
          acc *= v;
          break;
        case qcclMax:
          acc = acc < v ? v : acc;
          break;
        case qcclMin:
          acc = acc > v ? v : acc;
          break;
        default:
          break;
      }
    }
    if (op == qcclAvg) {
      acc /= n;
      mag /= n;
    }
    int ok;
    if (op == qcclMax || op == qcclMin)
      ok = got == acc;
    else if (op == qcclProd) /* the inputs' products are powers of two: exact */
      ok = got == perf_round_to_type(acc, t);
    else
      ok = fabs(got - acc) <= rel * mag + ldexp(1.0, -24);
    if (!ok) perf_note_wrong(out, j, got, acc);
  }
}

void perf_check(const perf_coll_t* coll, const perf_counts_t* c, const void* recvptr,
                qcclDataType_t t, qcclRedOp_t op, int rank, int nranks, int root, uint64_t seed,
                perf_check_t* out) {
  memset(out, 0, sizeof *out);
  if (perf_type_is_float(t))
    perf_check_float(coll, c, recvptr, t, op, rank, nranks, root, seed, out);
  else
    perf_check_int(coll, c, recvptr, t, op, rank, nranks, root, seed, out);
}
