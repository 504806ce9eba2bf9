/*
 * nccl_abi_items.h - the sizes, offsets and values on which the drop-in's
 * own copy of NCCL's interface (nccl/nccl_abi.h) and the CUDA toolkit's
 * nccl.h must agree. Expanded twice by nccl_abi_check: once under each
 * header, in two files, and compared item by item.
 */
// clang-format off
#define NCCL_ABI_ITEMS(X) \
  X(sizeof(ncclUniqueId)) \
  X(sizeof(ncclComm_t)) \
  X(sizeof(ncclResult_t)) \
  X(sizeof(ncclDataType_t)) \
  X(sizeof(ncclRedOp_t)) \
  X(sizeof(ncclScalarResidence_t)) \
  X(sizeof(ncclConfig_t)) \
  X(offsetof(ncclConfig_t, magic)) \
  X(offsetof(ncclConfig_t, version)) \
  X(offsetof(ncclConfig_t, blocking)) \
  X(offsetof(ncclConfig_t, netName)) \
  X(offsetof(ncclConfig_t, splitShare)) \
  X(offsetof(ncclConfig_t, commName)) \
  X(offsetof(ncclConfig_t, collnetEnable)) \
  X(offsetof(ncclConfig_t, nvlinkCentricSched)) \
  X(sizeof(ncclSimInfo_t)) \
  X(offsetof(ncclSimInfo_t, estimatedTime)) \
  X(ncclSuccess) \
  X(ncclUnhandledCudaError) \
  X(ncclSystemError) \
  X(ncclInternalError) \
  X(ncclInvalidArgument) \
  X(ncclInvalidUsage) \
  X(ncclRemoteError) \
  X(ncclInProgress) \
  X(ncclNumResults) \
  X(ncclSum) \
  X(ncclProd) \
  X(ncclMax) \
  X(ncclMin) \
  X(ncclAvg) \
  X(ncclNumOps) \
  X(ncclMaxRedOp) \
  X(ncclInt8) \
  X(ncclUint8) \
  X(ncclInt32) \
  X(ncclUint32) \
  X(ncclInt64) \
  X(ncclUint64) \
  X(ncclFloat16) \
  X(ncclFloat32) \
  X(ncclFloat64) \
  X(ncclBfloat16) \
  X(ncclFloat8e4m3) \
  X(ncclFloat8e5m2) \
  X(ncclNumTypes) \
  X(ncclScalarDevice) \
  X(ncclScalarHostImmediate) \
  X(NCCL_SPLIT_NOCOLOR) \
  X(NCCL_CONFIG_UNDEF_INT) \
  X(NCCL_UNIQUE_ID_BYTES)
// clang-format on

#define NCCL_ABI_VALUE(e) (long long)(e),
#define NCCL_ABI_NAME(e) #e,
