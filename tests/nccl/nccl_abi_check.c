/*
 * nccl_abi_check.c - the drop-in's interface against the CUDA toolkit's
 * nccl.h (NCCL 2.28):
 *   - at compile time, every enum value, the unique id size and the split
 *     color of nccl.h against qccl.h (qccl passes them on by value), and
 *     NCCL's major and minor version against the drop-in's;
 *   - at run time, every size, offset and value of nccl_abi_items.h under
 *     nccl.h against the same under the drop-in's nccl/nccl_abi.h
 *     (nccl_abi_shim.c), and NCCL_CONFIG_INITIALIZER's magic.
 * The drop-in's sources are also compiled once against nccl.h (tests/nccl/
 * meson.build), so every signature is checked by the compiler.
 */
#include <stddef.h>
#include <stdio.h>

#define NCCL_SHIM_TOOLKIT_HEADER 1
#include "nccl_abi.h" /* the toolkit's nccl.h, and the drop-in's version */
#include "nccl_abi_items.h"
#include "qccl.h"

#define SAME(a, b) _Static_assert((long long)(a) == (long long)(b), #a " == " #b)
SAME(ncclSuccess, qcclSuccess);
SAME(ncclUnhandledCudaError, qcclUnhandledCudaError);
SAME(ncclSystemError, qcclSystemError);
SAME(ncclInternalError, qcclInternalError);
SAME(ncclInvalidArgument, qcclInvalidArgument);
SAME(ncclInvalidUsage, qcclInvalidUsage);
SAME(ncclRemoteError, qcclRemoteError);
SAME(ncclInProgress, qcclInProgress);
SAME(ncclSum, qcclSum);
SAME(ncclProd, qcclProd);
SAME(ncclMax, qcclMax);
SAME(ncclMin, qcclMin);
SAME(ncclAvg, qcclAvg);
SAME(ncclNumOps, qcclNumOps);
SAME(ncclInt8, qcclInt8);
SAME(ncclChar, qcclChar);
SAME(ncclUint8, qcclUint8);
SAME(ncclInt32, qcclInt32);
SAME(ncclInt, qcclInt);
SAME(ncclUint32, qcclUint32);
SAME(ncclInt64, qcclInt64);
SAME(ncclUint64, qcclUint64);
SAME(ncclFloat16, qcclFloat16);
SAME(ncclHalf, qcclHalf);
SAME(ncclFloat32, qcclFloat32);
SAME(ncclFloat, qcclFloat);
SAME(ncclFloat64, qcclFloat64);
SAME(ncclDouble, qcclDouble);
SAME(ncclBfloat16, qcclBfloat16);
SAME(ncclFloat8e4m3, qcclFloat8e4m3);
SAME(ncclFloat8e5m2, qcclFloat8e5m2);
SAME(ncclNumTypes, qcclNumTypes);
SAME(sizeof(ncclUniqueId), sizeof(qcclUniqueId));
SAME(NCCL_SPLIT_NOCOLOR, QCCL_SPLIT_NOCOLOR);
SAME(NCCL_MAJOR, NCCL_SHIM_MAJOR);
SAME(NCCL_MINOR, NCCL_SHIM_MINOR);

extern const long long nccl_abi_shim[];
extern const size_t nccl_abi_shim_count;

static const long long toolkit[] = {NCCL_ABI_ITEMS(NCCL_ABI_VALUE)};
static const char* const names[] = {NCCL_ABI_ITEMS(NCCL_ABI_NAME)};

int main(void) {
  size_t n = sizeof toolkit / sizeof toolkit[0];
  int bad = 0;
  if (n != nccl_abi_shim_count) {
    printf("FAIL: %zu items against %zu\n", n, nccl_abi_shim_count);
    return 1;
  }
  for (size_t i = 0; i < n; i++)
    if (toolkit[i] != nccl_abi_shim[i]) {
      printf("FAIL: %s is %lld in nccl.h, %lld in nccl/nccl_abi.h\n", names[i], toolkit[i],
             nccl_abi_shim[i]);
      bad = 1;
    }
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  if (c.magic != NCCL_SHIM_CONFIG_MAGIC) {
    printf("FAIL: NCCL_CONFIG_INITIALIZER's magic 0x%x, the drop-in expects 0x%x\n", c.magic,
           NCCL_SHIM_CONFIG_MAGIC);
    bad = 1;
  }
  if (!bad)
    printf("ok: %zu sizes, offsets and values agree (nccl.h %d.%d.%d, drop-in %d)\n", n, NCCL_MAJOR,
           NCCL_MINOR, NCCL_PATCH, NCCL_SHIM_VERSION_CODE);
  return bad;
}
