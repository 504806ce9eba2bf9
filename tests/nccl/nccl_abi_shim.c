/*
 * nccl_abi_shim.c - nccl_abi_items.h under the drop-in's own copy of
 * NCCL's interface (nccl/nccl_abi.h), for nccl_abi_check.
 */
#include <stddef.h>

#include "nccl_abi.h"
#include "nccl_abi_items.h"

const long long nccl_abi_shim[] = {NCCL_ABI_ITEMS(NCCL_ABI_VALUE)};
const size_t nccl_abi_shim_count = sizeof nccl_abi_shim / sizeof nccl_abi_shim[0];
