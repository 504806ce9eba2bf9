/*
 * quant.h - the internal API of the block-quantization codec (wire format
 * v1, docs/QUANT.md), for the quantized collectives.
 *
 * A chunk of n elements is [f32 scales (+ f32 minimums)][codes], each part
 * padded to 16 bytes; its size is quant_chunk_bytes(). Every function here
 * is pure (no communication, no global state beyond the CPU feature table)
 * and gives the same bytes whichever implementation (ISA) runs it: the
 * scalar code is the definition, AVX2 / AVX-512 / CUDA reproduce it.
 *
 * Pointers to elements and chunks need no alignment. Counts are elements.
 */
#ifndef QCCL_QUANT_QUANT_H_
#define QCCL_QUANT_QUANT_H_

#include <stddef.h>
#include <stdint.h>

#include "qccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A validated quantization spec. */
typedef struct quant_params {
  int bits;        /* 8 or 4 */
  int block;       /* B: a power of two, 32..4096 */
  int asym;        /* 0: symmetric, 1: asymmetric */
  int stochastic;  /* 0: round to nearest even, 1: stochastic */
  int rotate;      /* 1: randomized Walsh-Hadamard rotation per block */
  uint64_t seed;   /* stochastic rounding and rotation signs */
  uint32_t rank;   /* stochastic rounding stream (usually the rank) */
  uint64_t index0; /* generator index of element 0 (0 in the public API) */
} quant_params_t;

/* Implementations. */
typedef enum {
  QUANT_ISA_SCALAR = 0,
  QUANT_ISA_AVX2 = 1,
  QUANT_ISA_AVX512 = 2,
  QUANT_ISA_COUNT = 3
} quant_isa_t;

/* Largest count the codec accepts (the chunk size must fit in size_t). */
#define QUANT_MAX_COUNT (SIZE_MAX >> 4)

/* Checks spec (NULL, size, magic, version, bits, block, mode, rounding,
 * rotate, rank) and converts it; the error names the field. */
qcclResult_t quant_params_from_spec(const qcclQuantSpec_t* spec, quant_params_t* params);

/* Bytes of the chunk of n elements under p (0 for n == 0). */
size_t quant_chunk_bytes(const quant_params_t* p, size_t n);

/* Elements the codes cover: n, or n rounded up to whole blocks with
 * rotation (the length of a residual buffer of quant_reduce_requant). */
size_t quant_coded_elems(const quant_params_t* p, size_t n);

/* 1 when this CPU (and build) can run isa. */
int quant_isa_available(quant_isa_t isa);

/* "scalar", "avx2", "avx512". */
const char* quant_isa_name(quant_isa_t isa);

/* The implementation to use: QCCL_QUANT_ISA=scalar|avx2|avx512 when set
 * (an ISA this CPU lacks is an error), else the best available. Decided
 * once per process. */
qcclResult_t quant_isa_default(quant_isa_t* isa);

/* Quantizes n elements of src (qcclFloat32, qcclFloat16 or qcclBfloat16)
 * into the chunk dst (quant_chunk_bytes(p, n) bytes). */
qcclResult_t quant_quantize(quant_isa_t isa, const quant_params_t* p, const void* src,
                            qcclDataType_t type, size_t n, void* dst);

/* Dequantizes the chunk src into n elements of dst (f32, f16 or bf16; f16
 * and bf16 rounded to nearest even). An overflow block gives NaN. */
qcclResult_t quant_dequantize(quant_isa_t isa, const quant_params_t* p, const void* src, size_t n,
                              qcclDataType_t type, void* dst);

/* quant_dequantize, with non-temporal stores when stream is set (else
 * ordinary ones): for a caller whose chunk is one of several that make a
 * large output (quant_dequantize decides from n alone, at
 * QUANT_STREAM_BYTES of output). */
qcclResult_t quant_dequantize_nt(quant_isa_t isa, const quant_params_t* p, const void* src,
                                 size_t n, qcclDataType_t type, void* dst, int stream);

/* acc[i] = acc[i] + x'[i] for the n dequantized values x' of chunk src (f32
 * addition, one per element); an overflow block sets its acc elements to
 * NaN. Summing chunks in a fixed order gives the same bits everywhere. */
qcclResult_t quant_dequantize_acc(quant_isa_t isa, const quant_params_t* p, const void* src,
                                  size_t n, float* acc);

/* qgZ's middle hop, fused: per block, acc = y_0 + y_1 + ... + y_{k-1} (f32,
 * left to right) over the dequantized blocks of the k chunks srcs (all made
 * under in), then acc is quantized under out into dst. in and out may differ
 * in bits, mode, rounding and index0, but must share the block size and the
 * rotation (and its seed): with rotation the sum is taken in the rotated
 * domain, where it is the same linear combination, so no transform is run.
 * residual (NULL, or quant_coded_elems(out, n) floats, in the rotated domain
 * with rotation) adds error feedback: acc += residual before quantizing, and
 * residual = acc - dequantized result after; overflow blocks reset it to 0.
 * Any overflow input block makes the output block an overflow block. */
qcclResult_t quant_reduce_requant(quant_isa_t isa, const quant_params_t* in,
                                  const void* const* srcs, int k, size_t n,
                                  const quant_params_t* out, float* residual, void* dst);

/* The per-block a-priori error bound of chunk src (scale / 2 + f32 rounding
 * for round-to-nearest, scale + f32 rounding for stochastic rounding):
 * per_block (NULL or nblocks floats) and its maximum (NULL allowed); NaN for
 * an overflow block (and then the maximum is NaN). */
qcclResult_t quant_error_bound(const quant_params_t* p, const void* src, size_t n, float* per_block,
                               float* max_bound);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QCCL_QUANT_QUANT_H_ */
