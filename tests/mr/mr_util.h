/*
 * mr_util.h - scaffolding shared by the multi-rank tests (tests/mr).
 *
 * Each test program runs as one rank under qcclrun and uses only the public
 * API (qccl.h). The helpers here give it:
 *   - start-up: common options (--seed N, --only CASE, --quick, --verbose),
 *     the communicator from the launcher's environment, and one seed agreed
 *     by every rank (rank 0 draws it from the clock unless given; it is
 *     printed, and every failure message repeats it with the replay command);
 *   - cases: a named unit of checking whose inputs are a pure function of
 *     (seed, case name, rank, element index), so a single case replays
 *     exactly with --only;
 *   - data: per-dtype element access, input generators (exactly
 *     representable values for the narrow float types), and the reference
 *     check of a reduced element (mr_check_reduce, see mr_util.c for the
 *     error bound);
 *   - buffers with guard bytes (writes past either end are reported) and a
 *     hash used to check that results are bitwise identical on every rank
 *     and on every run.
 */
#ifndef QCCL_TESTS_MR_UTIL_H_
#define QCCL_TESTS_MR_UTIL_H_

#include <stddef.h>
#include <stdint.h>

#include "qccl.h"

#define MR_MAX_EXTRA 16

typedef struct {
  qcclComm_t comm;
  int rank, nranks;
  uint64_t seed;
  int seed_given;   /* --seed or QCCL_TEST_SEED */
  int quick;        /* --quick or QCCL_MR_QUICK=1: the lighter (sanitizer) set */
  int verbose;      /* --verbose or QCCL_MR_VERBOSE=1: one line per case */
  const char* only; /* --only NAME: run just the case of that name */
  const char* prog; /* argv[0], for replay lines */
  int nextra;       /* program-specific options, in order */
  const char* extra[MR_MAX_EXTRA];
  long cases;  /* cases run on this rank */
  long failed; /* cases failed on this rank */
  double t0;   /* start time */
} mr_t;

/* Seconds on a clock shared by all processes of the host (CLOCK_MONOTONIC). */
double mr_now(void);

/* Parses options, creates t->comm with qcclCommInitFromEnv and agrees on the
 * seed. Exits the process (status 1) if any of that fails. */
void mr_init(mr_t* t, int argc, char** argv);

/* As mr_init without a communicator (for programs that make their own). The
 * seed is --seed, QCCL_TEST_SEED, or the clock (then it may differ between
 * ranks: only use it for rank-local randomness). */
void mr_parse(mr_t* t, int argc, char** argv);

/* Value of a program-specific option "--name value" (NULL if absent). */
const char* mr_opt(const mr_t* t, const char* name);
/* 1 if a program-specific flag "--name" is present. */
int mr_flag(const mr_t* t, const char* name);

/* Finalizes and destroys t->comm (if any), prints the summary and returns the
 * process exit status (0 = every case passed). */
int mr_finish(mr_t* t);

/* ---- cases ---- */

typedef struct {
  mr_t* t;
  char name[256];
  uint64_t cseed; /* seed of this case's inputs */
  int bad;        /* failures reported in this case */
  double t0;
} mr_case_t;

/* Starts a case named by the format; returns 0 (and does nothing) if --only
 * excludes it. Every rank must make the same decisions. */
int mr_case_begin(mr_t* t, mr_case_t* c, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Reports one failure of the case (the first few are printed in full, with
 * the seed and the replay command). */
void mr_case_fail(mr_case_t* c, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* Ends the case; returns 1 if it passed on this rank. */
int mr_case_end(mr_case_t* c);

/* A library call that must succeed: on failure prints the result, the
 * message of qcclGetLastError and the case, then exits 1 (the other ranks
 * cannot continue a sequence of collectives). */
#define MR_OK(c, call) mr_ok_((c), (call), #call, __FILE__, __LINE__)
void mr_ok_(mr_case_t* c, qcclResult_t r, const char* what, const char* file, int line);

/* Exits 1 after printing a message (outside cases). */
void mr_die(mr_t* t, const char* fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* ---- data types ---- */

size_t mr_dt_size(qcclDataType_t dt);
const char* mr_dt_name(qcclDataType_t dt);
int mr_dt_is_float(qcclDataType_t dt);
const char* mr_op_name(qcclRedOp_t op);
/* 1 if op is defined for dt (Avg only for floating types). */
int mr_op_valid(qcclDataType_t dt, qcclRedOp_t op);

/* Element i of buf as raw bits, and the reverse. */
uint64_t mr_load(qcclDataType_t dt, const void* buf, size_t i);
void mr_store(qcclDataType_t dt, void* buf, size_t i, uint64_t bits);

/* Input kinds. */
enum {
  MR_GEN_REDUCE = 0,  /* values suited to op: see mr_util.c */
  MR_GEN_SPECIAL = 1, /* NaN, infinities, overflow, zeros, subnormals, integer extremes */
  MR_GEN_RAW = 2      /* any bits at all (copies must preserve every pattern) */
};

/* The input element i of rank `rank` in a case (a pure function). */
uint64_t mr_gen(qcclDataType_t dt, qcclRedOp_t op, int kind, uint64_t cseed, int rank, int nranks,
                size_t i);

/* buf[k] = mr_gen(..., first + k) for k < n. */
void mr_fill(qcclDataType_t dt, qcclRedOp_t op, int kind, uint64_t cseed, int rank, int nranks,
             void* buf, size_t first, size_t n);

/* Checks `got` against the reduction with op of the nranks inputs in[] (raw
 * bits) as qccl defines it. Returns 1 if it holds; otherwise writes why. */
int mr_check_reduce(qcclDataType_t dt, qcclRedOp_t op, int nranks, const uint64_t* in, uint64_t got,
                    char* why, size_t whylen);

/* Regenerates the inputs of element i (index into each rank's send buffer)
 * and checks got; reports a failure of c with the element index out_i. */
int mr_check_elem(mr_case_t* c, qcclDataType_t dt, qcclRedOp_t op, int kind, size_t i, uint64_t got,
                  size_t out_i);

/* Checks n elements of buf (starting at element `first` of the output)
 * against raw copies of rank `src`'s input elements src_first...; reports
 * mismatches of c. Returns the number of mismatches. */
size_t mr_check_copy(mr_case_t* c, qcclDataType_t dt, const void* buf, size_t first, size_t n,
                     int src, size_t src_first, const char* what);

/* ---- buffers ---- */

#define MR_GUARD 64
#define MR_FILL_BYTE 0xa5

typedef struct {
  unsigned char* raw;
  unsigned char* p; /* the user area: raw + MR_GUARD + misalign */
  size_t bytes;
  size_t misalign;
} mr_buf_t;

/* Allocates bytes (may be 0) filled with MR_FILL_BYTE between guards. p is
 * misaligned by `misalign` bytes from a 64-byte boundary. */
void mr_buf_alloc(mr_buf_t* b, size_t bytes, size_t misalign);
void mr_buf_free(mr_buf_t* b);
/* Reports to c if a guard was overwritten. Returns 1 if intact. */
int mr_buf_check_guards(mr_case_t* c, const mr_buf_t* b, const char* what);
/* Returns 1 if every byte of [p, p+bytes) is still MR_FILL_BYTE. */
int mr_buf_untouched(const mr_buf_t* b);

uint64_t mr_hash(const void* p, size_t bytes);

/* 1 when a line of the text file at path holds text (a test reading the
 * INFO log it asked the library to write, QCCL_DEBUG_FILE). */
int mr_file_has(const char* path, const char* text);

/* Before mr_init: the library's INFO lines of the SHM subsystem go to
 * /tmp/qccl-mr-<name>-<pid>.log, whose path is written to log (n bytes),
 * for mr_file_has. */
void mr_shm_log(char* log, size_t n, const char* name);

/* All-gathers h and returns 1 if every rank passed the same value (reports a
 * failure of c otherwise). Collective. */
int mr_same_everywhere(mr_case_t* c, uint64_t h, const char* what);

/* Splitmix64 step (the generator of every random choice in the tests). */
uint64_t mr_mix(uint64_t x);

/* An element count drawn from the case seed in [lo, hi]. */
size_t mr_rand_range(uint64_t* state, size_t lo, size_t hi);

/* ---- files shared by the ranks of one job (unique-id flow) ---- */

/* A directory private to this qcclrun job (from MASTER_PORT and a hash of
 * QCCL_SECRET), created if needed. Returns 0 on success. */
int mr_job_dir(char* out, size_t len);

/* Writes data to dir/name atomically (a temporary file, then rename). */
int mr_publish(const char* dir, const char* name, const void* data, size_t bytes);

/* Waits up to timeout_s for dir/name to appear and reads bytes of it.
 * Returns 0 on success. */
int mr_fetch(const char* dir, const char* name, void* data, size_t bytes, double timeout_s);

/* Removes dir/name... and dir itself (best effort). */
void mr_job_dir_remove(const char* dir, const char* const* names, int nnames);

/* ---- shared-memory leftovers ---- */

/* Counts entries /dev/shm/qccl-<pid>-* for the n pids (the library's
 * segment names, by the pid of the creating rank) and lists them in out. */
int mr_shm_leftovers(const int32_t* pids, int n, char* out, size_t len);

/* ---- the large-count rotation ----
 * Counts 999983 (a prime near 1e6) and 2^22 are too slow to cross with
 * every dtype and op on 2 cores. Each collective instead runs, per world
 * size W, one case at each large count, taking its (dtype, op) from a list
 * of 12 pairs that holds every dtype once and every op at least twice:
 *   f32 sum, bf16 avg, i32 prod, f16 max, u8 min, f64 sum,
 *   e4m3 avg, i64 max, e5m2 sum, u32 sum, i8 prod, u64 min.
 * Slot s = 2 * (index of W in {1,2,3,4,5,8}) + (0 for 999983, 1 for 2^22)
 * takes pair (s + coll) % 12, in place when (s + coll) is odd, root
 * (7 s + coll) % W. Over the six world sizes the twelve slots take every
 * pair once, so every collective meets every dtype and every op (where it
 * has one) at a large count, in place and out of place. In quick mode
 * (sanitizer builds) only the 999983 slot runs, which still covers six
 * pairs per collective. */
typedef struct {
  qcclDataType_t dt;
  qcclRedOp_t op;
  int inplace;
  size_t count;
  int root;
} mr_large_t;

#define MR_LARGE1 ((size_t)999983)
#define MR_LARGE2 ((size_t)1 << 22)

/* Fills out[] with this W's large cases for collective number coll (any
 * small integer, distinct per collective); returns how many (<= 2). */
int mr_large_cases(const mr_t* t, int coll, mr_large_t* out);

/* The splits of the rooted calls on 2 ranks (broadcast.c, scatter.c,
 * gather.c: above 2 MiB per block, half staged and half in the kernel, in
 * pieces of whole pages): counts whose bytes sit on and off the 2 MiB
 * threshold, the 1 MiB chunks and the pages, in int8, f32 and f64. */
typedef struct {
  qcclDataType_t dt;
  size_t count;
} mr_split_t;
#define MR_SPLIT_CASES 6
extern const mr_split_t mr_split_cases[MR_SPLIT_CASES];

#endif /* QCCL_TESTS_MR_UTIL_H_ */
