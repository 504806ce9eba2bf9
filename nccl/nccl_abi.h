/*
 * nccl_abi.h - the part of NCCL 2.28's C interface (nccl.h of the CUDA
 * toolkit) that the drop-in libnccl.so.2 defines: its types, enum values and
 * function prototypes, written out here so that the drop-in builds without
 * the CUDA toolkit. Only the binary interface matters (sizes, layouts,
 * values, calling convention); the names are NCCL's so that the code reads
 * like an NCCL implementation.
 *
 * Built with -DNCCL_SHIM_TOOLKIT_HEADER (tests/nccl, when the toolkit is
 * installed) this file includes the toolkit's own nccl.h instead, so the
 * compiler checks every definition of the drop-in against NCCL's
 * declarations ("conflicting types" is an error), and nccl_abi_check.c
 * asserts that the two headers agree on every layout and value.
 *
 * Not declared (so not exported): the device-side API of nccl_device.h
 * (ncclDevCommCreate, teams, barriers), which needs GPU kernels.
 */
#ifndef NCCL_SHIM_ABI_H_
#define NCCL_SHIM_ABI_H_

#include <limits.h>
#include <stddef.h>

/* The version the drop-in reports: NCCL 2.28's API, patch level 99, which
 * no NVIDIA release has, so that a program (and the tests) can tell qccl's
 * library from NVIDIA's (2.28.9 in the toolkit). */
#define NCCL_SHIM_MAJOR 2
#define NCCL_SHIM_MINOR 28
#define NCCL_SHIM_PATCH 99
#define NCCL_SHIM_VERSION_CODE (NCCL_SHIM_MAJOR * 10000 + NCCL_SHIM_MINOR * 100 + NCCL_SHIM_PATCH)

/* The magic of NCCL_CONFIG_INITIALIZER. */
#define NCCL_SHIM_CONFIG_MAGIC 0xcafebeefu

#ifdef NCCL_SHIM_TOOLKIT_HEADER
#include <nccl.h>
#else

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1

typedef struct CUstream_st* cudaStream_t;

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

/* ncclConfig_v22800: fields are only ever appended; a program built
 * against an older nccl.h passes a smaller `size`. */
typedef struct ncclConfig_v22800 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/* Every function twice, as NCCL declares it: ncclX and its profiling twin
 * pncclX (the drop-in defines pncclX and makes ncclX a weak alias, NCCL's
 * own arrangement, so a profiler can wrap ncclX and call pncclX). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define NCCL_SHIM_DECL(ret, name, params) \
  ret name params;                        \
  ret p##name params

NCCL_SHIM_DECL(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size));
NCCL_SHIM_DECL(ncclResult_t, ncclMemFree, (void* ptr));
NCCL_SHIM_DECL(ncclResult_t, ncclGetVersion, (int* version));
NCCL_SHIM_DECL(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId));
NCCL_SHIM_DECL(ncclResult_t, ncclCommInitRankConfig,
               (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank,
                ncclConfig_t* config));
NCCL_SHIM_DECL(ncclResult_t, ncclCommInitRank,
               (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank));
NCCL_SHIM_DECL(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist));
NCCL_SHIM_DECL(ncclResult_t, ncclCommFinalize, (ncclComm_t comm));
NCCL_SHIM_DECL(ncclResult_t, ncclCommDestroy, (ncclComm_t comm));
NCCL_SHIM_DECL(ncclResult_t, ncclCommAbort, (ncclComm_t comm));
NCCL_SHIM_DECL(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags));
NCCL_SHIM_DECL(ncclResult_t, ncclCommSplit,
               (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config));
NCCL_SHIM_DECL(ncclResult_t, ncclCommShrink,
               (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                ncclConfig_t* config, int shrinkFlags));
NCCL_SHIM_DECL(ncclResult_t, ncclCommInitRankScalable,
               (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                ncclConfig_t* config));
NCCL_SHIM_DECL(const char*, ncclGetErrorString, (ncclResult_t result));
NCCL_SHIM_DECL(const char*, ncclGetLastError, (ncclComm_t comm));
NCCL_SHIM_DECL(void, ncclResetDebugInit, ());
NCCL_SHIM_DECL(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError));
NCCL_SHIM_DECL(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count));
NCCL_SHIM_DECL(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device));
NCCL_SHIM_DECL(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank));
NCCL_SHIM_DECL(ncclResult_t, ncclCommRegister,
               (const ncclComm_t comm, void* buff, size_t size, void** handle));
NCCL_SHIM_DECL(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle));
NCCL_SHIM_DECL(ncclResult_t, ncclCommWindowRegister,
               (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags));
NCCL_SHIM_DECL(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win));
NCCL_SHIM_DECL(ncclResult_t, ncclRedOpCreatePreMulSum,
               (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype,
                ncclScalarResidence_t residence, ncclComm_t comm));
NCCL_SHIM_DECL(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm));
NCCL_SHIM_DECL(ncclResult_t, ncclReduce,
               (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream));
NCCL_SHIM_DECL(ncclResult_t, ncclBcast,
               (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                cudaStream_t stream));
NCCL_SHIM_DECL(ncclResult_t, ncclBroadcast,
               (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                int root, ncclComm_t comm, cudaStream_t stream));
NCCL_SHIM_DECL(ncclResult_t, ncclAllReduce,
               (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream));
NCCL_SHIM_DECL(ncclResult_t, ncclReduceScatter,
               (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream));
NCCL_SHIM_DECL(ncclResult_t, ncclAllGather,
               (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                ncclComm_t comm, cudaStream_t stream));
NCCL_SHIM_DECL(ncclResult_t, ncclAlltoAll,
               (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                ncclComm_t comm, cudaStream_t stream));
NCCL_SHIM_DECL(ncclResult_t, ncclGather,
               (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                int root, ncclComm_t comm, cudaStream_t stream));
NCCL_SHIM_DECL(ncclResult_t, ncclScatter,
               (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                int root, ncclComm_t comm, cudaStream_t stream));
NCCL_SHIM_DECL(ncclResult_t, ncclSend,
               (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                ncclComm_t comm, cudaStream_t stream));
NCCL_SHIM_DECL(ncclResult_t, ncclRecv,
               (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                cudaStream_t stream));
NCCL_SHIM_DECL(ncclResult_t, ncclGroupStart, ());
NCCL_SHIM_DECL(ncclResult_t, ncclGroupEnd, ());
NCCL_SHIM_DECL(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo));

#undef NCCL_SHIM_DECL

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif /* NCCL_SHIM_TOOLKIT_HEADER */

#endif /* NCCL_SHIM_ABI_H_ */
