/*
 * nt_util.h - helpers of the drop-in's test programs, which are NCCL
 * programs: they include the CUDA toolkit's nccl.h (not qccl.h) and link
 * libnccl.so.2, qccl's drop-in (the build folder's nccl/).
 *
 * Launch: under qcclrun (or torchrun), which sets RANK and WORLD_SIZE. The
 * unique id travels the way an NCCL program without MPI sends it: rank 0
 * calls ncclGetUniqueId and writes the id (and the input seed) to a file,
 * the others wait for the file and read it. The file is named from the
 * launcher's job (MASTER_PORT and QCCL_SECRET, unique per qcclrun run) in
 * $TMPDIR or /tmp, written under another name and renamed, and removed by
 * rank 0 once the communicator exists (every rank has read it by then).
 *
 * Inputs: element i of rank r for test case `tag` is a pure function of
 * (seed, tag, r, i), so every rank computes the reference of a collective
 * from all ranks' inputs itself (in double, or in the type's own integer
 * arithmetic where it wraps). Seed: QCCL_TEST_SEED, else drawn by rank 0
 * and printed.
 */
#ifndef NT_UTIL_H_
#define NT_UTIL_H_

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

/* The version qccl's libnccl reports (NCCL 2.28's API, patch 99). */
#define NT_QCCL_NCCL_VERSION 22899

extern int nt_rank, nt_nranks;
extern unsigned long long nt_seed;

/* Prints "[rank r] FAIL (seed s): ..." and exits 1. */
void nt_fail(const char* fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Fails unless call returned ncclSuccess (prints ncclGetLastError). */
#define NT_CHECK(call)                                                          \
  do {                                                                          \
    ncclResult_t nt_r_ = (call);                                                \
    if (nt_r_ != ncclSuccess)                                                   \
      nt_fail("%s:%d %s -> %d (%s): %s", __FILE__, __LINE__, #call, (int)nt_r_, \
              ncclGetErrorString(nt_r_), ncclGetLastError(NULL));               \
  } while (0)

/* Fails unless call returned `want` and ncclGetLastError(NULL) contains
 * every one of the (up to two) strings (NULL: not checked). */
void nt_expect_error(ncclResult_t got, ncclResult_t want, const char* what, const char* has1,
                     const char* has2);

/* Reads RANK / WORLD_SIZE, checks that ncclGetVersion is qccl's, makes a
 * communicator over every rank with the file-borne unique id (`tag`
 * distinguishes several ids in one run) and, with config non-NULL,
 * ncclCommInitRankConfig. The first call also fixes nt_seed. */
void nt_setup(void);
void nt_init_comm(ncclComm_t* comm, int tag, ncclConfig_t* config);

/* Exchanges a fresh unique id (rank 0 draws it) under `tag`; once the
 * communicator exists, nt_id_done(tag) removes the file (on rank 0). */
void nt_exchange_id(ncclUniqueId* id, int tag);
void nt_id_done(int tag);

/* 64 random bits from (seed, a, b, c). */
uint64_t nt_hash(uint64_t a, uint64_t b, uint64_t c);

/* The value of element i of rank r for case tag, suitable for type t:
 * small = 1 keeps it within [-9, 9] (products). Integers for integer types
 * and bf16, random reals for f32 / f64. Exactly representable in t. */
double nt_value(int tag, int r, size_t i, ncclDataType_t t, int small);

size_t nt_size(ncclDataType_t t);
void nt_store(void* buf, size_t i, ncclDataType_t t, double v);
double nt_load(const void* buf, size_t i, ncclDataType_t t);
const char* nt_type_name(ncclDataType_t t);
int nt_is_float(ncclDataType_t t);

/* The reduction over ranks 0..W-1 (members[] if non-NULL, nmem of them) of
 * nt_value(tag, r, i), as the type t computes it: exact integers (wrapping
 * for the unsigned 8-bit type), double for floats; *abs_sum gets the sum of
 * magnitudes (for a float tolerance). */
double nt_reduce_ref(int tag, size_t i, ncclDataType_t t, ncclRedOp_t op, int small,
                     const int* members, int nmem, double* abs_sum);

/* Compares element i of buf with ref: exact for integer types, bf16 and
 * Max / Min, else within 8 * W * eps(t) * abs_sum. Fails with `what`. */
void nt_compare(const void* buf, size_t i, ncclDataType_t t, ncclRedOp_t op, double ref,
                double abs_sum, int w, const char* what);

#endif /* NT_UTIL_H_ */
