/*
 * quant_api.c - the public codec API of include/qccl.h (qcclQuantSize,
 * qcclQuantize, qcclDequantize, qcclQuantErrorBound): argument checks that
 * name the offending field, then the chunk drivers on the default ISA.
 *
 * Stochastic rounding draws from the stream of (spec->seed, spec->rank);
 * the public API numbers elements from 0 (index0 = 0).
 */
#include <string.h>

#include "core/err.h"
#include "quant/quant.h"
#include "quant/quant_math.h"

qcclResult_t quant_params_from_spec(const qcclQuantSpec_t* spec, quant_params_t* params) {
  if (spec == NULL) return QCCL_ERR(qcclInvalidArgument, "spec is NULL");
  if (spec->size != sizeof(qcclQuantSpec_t))
    return QCCL_ERR(qcclInvalidArgument,
                    "spec->size %zu is not %zu: start from QCCL_QUANT_SPEC_INITIALIZER", spec->size,
                    sizeof(qcclQuantSpec_t));
  if (spec->magic != QCCL_QUANT_SPEC_MAGIC)
    return QCCL_ERR(qcclInvalidArgument,
                    "spec->magic 0x%x is wrong: start from QCCL_QUANT_SPEC_INITIALIZER",
                    spec->magic);
  if (spec->version != QM_VERSION)
    return QCCL_ERR(qcclInvalidArgument, "spec->version %u is not supported (only %d)",
                    spec->version, QM_VERSION);
  if (spec->bits != 8 && spec->bits != 4)
    return QCCL_ERR(qcclInvalidArgument, "spec->bits %d is not 8 or 4", spec->bits);
  if (spec->block < QM_BLOCK_MIN || spec->block > QM_BLOCK_MAX ||
      (spec->block & (spec->block - 1)) != 0)
    return QCCL_ERR(qcclInvalidArgument, "spec->block %d is not a power of two in %d..%d",
                    spec->block, QM_BLOCK_MIN, QM_BLOCK_MAX);
  if (spec->mode != qcclQuantSymmetric && spec->mode != qcclQuantAsymmetric)
    return QCCL_ERR(qcclInvalidArgument,
                    "spec->mode %d is not qcclQuantSymmetric or qcclQuantAsymmetric",
                    (int)spec->mode);
  if (spec->rounding != qcclRoundNearest && spec->rounding != qcclRoundStochastic)
    return QCCL_ERR(qcclInvalidArgument,
                    "spec->rounding %d is not qcclRoundNearest or qcclRoundStochastic",
                    (int)spec->rounding);
  if (spec->rotate != 0 && spec->rotate != 1)
    return QCCL_ERR(qcclInvalidArgument, "spec->rotate %d is not 0 or 1", spec->rotate);
  if (spec->rank < 0) return QCCL_ERR(qcclInvalidArgument, "spec->rank %d is negative", spec->rank);
  quant_params_t p;
  memset(&p, 0, sizeof p);
  p.bits = spec->bits;
  p.block = spec->block;
  p.asym = spec->mode == qcclQuantAsymmetric;
  p.stochastic = spec->rounding == qcclRoundStochastic;
  p.rotate = spec->rotate;
  p.seed = spec->seed;
  p.rank = (uint32_t)spec->rank;
  p.index0 = 0;
  *params = p;
  return qcclSuccess;
}

static qcclResult_t check_count(size_t count) {
  if (count > QUANT_MAX_COUNT)
    return QCCL_ERR(qcclInvalidArgument, "count %zu is too large (at most %zu)", count,
                    (size_t)QUANT_MAX_COUNT);
  return qcclSuccess;
}

static qcclResult_t check_type(qcclDataType_t t, const char* name) {
  if (t != qcclFloat32 && t != qcclFloat16 && t != qcclBfloat16)
    return QCCL_ERR(qcclInvalidArgument, "%s %d is not qcclFloat32, qcclFloat16 or qcclBfloat16",
                    name, (int)t);
  return qcclSuccess;
}

qcclResult_t qcclQuantSize(size_t count, const qcclQuantSpec_t* spec, size_t* bytes) {
  quant_params_t p;
  QCCL_CHECK(quant_params_from_spec(spec, &p));
  QCCL_CHECK(check_count(count));
  if (bytes == NULL) return QCCL_ERR(qcclInvalidArgument, "bytes is NULL");
  *bytes = quant_chunk_bytes(&p, count);
  return qcclSuccess;
}

qcclResult_t qcclQuantize(const void* src, size_t count, qcclDataType_t srctype,
                          const qcclQuantSpec_t* spec, void* dst) {
  quant_params_t p;
  quant_isa_t isa;
  QCCL_CHECK(quant_params_from_spec(spec, &p));
  QCCL_CHECK(check_count(count));
  QCCL_CHECK(check_type(srctype, "srctype"));
  if (count == 0) return qcclSuccess;
  if (src == NULL) return QCCL_ERR(qcclInvalidArgument, "src is NULL with count %zu", count);
  if (dst == NULL) return QCCL_ERR(qcclInvalidArgument, "dst is NULL with count %zu", count);
  QCCL_CHECK(quant_isa_default(&isa));
  return quant_quantize(isa, &p, src, srctype, count, dst);
}

qcclResult_t qcclDequantize(const void* src, size_t count, qcclDataType_t dsttype,
                            const qcclQuantSpec_t* spec, void* dst) {
  quant_params_t p;
  quant_isa_t isa;
  QCCL_CHECK(quant_params_from_spec(spec, &p));
  QCCL_CHECK(check_count(count));
  QCCL_CHECK(check_type(dsttype, "dsttype"));
  if (count == 0) return qcclSuccess;
  if (src == NULL) return QCCL_ERR(qcclInvalidArgument, "src is NULL with count %zu", count);
  if (dst == NULL) return QCCL_ERR(qcclInvalidArgument, "dst is NULL with count %zu", count);
  QCCL_CHECK(quant_isa_default(&isa));
  return quant_dequantize(isa, &p, src, count, dsttype, dst);
}

qcclResult_t qcclQuantErrorBound(const void* src, size_t count, const qcclQuantSpec_t* spec,
                                 float* perBlock, float* maxBound) {
  quant_params_t p;
  QCCL_CHECK(quant_params_from_spec(spec, &p));
  QCCL_CHECK(check_count(count));
  if (count > 0 && src == NULL)
    return QCCL_ERR(qcclInvalidArgument, "src is NULL with count %zu", count);
  return quant_error_bound(&p, src, count, perBlock, maxBound);
}
