/*
 * quant_chunk.c - the chunk drivers of the codec: layout, block loop and
 * everything decided per block, over the element kernels of one ISA.
 *
 * A chunk of n elements, nb = ceil(n / B) blocks (docs/QUANT.md):
 *   [nb f32 scales][nb f32 minimums, asymmetric only][0-pad to 16]
 *   [codes of the coded elements][0-pad to 16]
 * Quantize, per block: (convert to f32, pad with zeros, flip signs, Walsh-
 * Hadamard transform when rotating), statistics, parameters (quant_math.h),
 * codes. Dequantize runs it backwards (values, times 1/B, transform, flips).
 * Each pass touches the block once more while it is in L1, so a chunk costs
 * one read of its input and one write of its output.
 */
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "quant/quant_impl.h"

#if defined(QUANT_X86)
#include <xmmintrin.h>
/* The kernels need the default MXCSR: round to nearest even, no flush to
 * zero, no denormals-are-zero (a caller's FTZ/DAZ would change results). */
#define QUANT_MXCSR_DEFAULT 0x1f80u
static unsigned fpenv_enter(void) {
  unsigned old = _mm_getcsr();
  if ((old & ~0x3fu) != QUANT_MXCSR_DEFAULT) _mm_setcsr(QUANT_MXCSR_DEFAULT);
  return old;
}
static void fpenv_leave(unsigned old) {
  if ((old & ~0x3fu) != QUANT_MXCSR_DEFAULT) _mm_setcsr(old);
}
#else
static unsigned fpenv_enter(void) {
  return 0;
}
static void fpenv_leave(unsigned old) {
  (void)old;
}
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "wire format v1 is little endian; add byte swaps for this target"
#endif

/* State of one driver call. */
typedef struct quant_run {
  const quant_kernels_t* k;
  quant_ctx_t c;
  size_t nb;       /* blocks */
  size_t hdr;      /* header bytes */
  float* tmp;      /* B floats */
  float* tmp2;     /* B floats */
  uint32_t* signs; /* B sign masks, with rotation */
  void* mem;
  unsigned fpenv; /* the caller's floating-point control word */
} quant_run_t;

static size_t type_size(qcclDataType_t t) {
  return t == qcclFloat32 ? 4 : 2;
}

static void ctx_init(quant_ctx_t* c, const quant_params_t* p) {
  c->bits = p->bits;
  c->asym = p->asym;
  c->stochastic = p->stochastic;
  c->block = p->block;
  c->qmax = qm_qmax(p->bits, p->asym);
  c->key = qm_sr_key(p->seed, p->rank);
  c->stream = 0;
}

static qcclResult_t params_check(const quant_params_t* p) {
  if (p == NULL) return QCCL_ERR(qcclInvalidArgument, "quant: params is NULL");
  if (p->bits != 4 && p->bits != 8)
    return QCCL_ERR(qcclInvalidArgument, "quant: bits %d is not 4 or 8", p->bits);
  if (p->block < QM_BLOCK_MIN || p->block > QM_BLOCK_MAX || (p->block & (p->block - 1)) != 0)
    return QCCL_ERR(qcclInvalidArgument, "quant: block %d is not a power of two in 32..4096",
                    p->block);
  return qcclSuccess;
}

static qcclResult_t type_check(qcclDataType_t t, const char* what) {
  if (t != qcclFloat32 && t != qcclFloat16 && t != qcclBfloat16)
    return QCCL_ERR(qcclInvalidArgument,
                    "quant: %s %d is not qcclFloat32, qcclFloat16 or qcclBfloat16", what, (int)t);
  return qcclSuccess;
}

static qcclResult_t run_init(quant_run_t* r, quant_isa_t isa, const quant_params_t* p, size_t n,
                             int need_tmp) {
  memset(r, 0, sizeof *r);
  QCCL_CHECK(params_check(p));
  if (n > QUANT_MAX_COUNT) return QCCL_ERR(qcclInvalidArgument, "quant: count %zu is too large", n);
  r->k = quant_kernels(isa);
  if (r->k == NULL || !quant_isa_available(isa))
    return QCCL_ERR(qcclInvalidArgument, "quant: ISA %s is not available on this CPU",
                    quant_isa_name(isa));
  ctx_init(&r->c, p);
  r->nb = qm_nblocks(n, p->block);
  r->hdr = qm_header_bytes(n, p->block, p->asym);
  if ((need_tmp || p->rotate) && n > 0) {
    size_t b = (size_t)p->block;
    r->mem = aligned_alloc(64, b * (2 * sizeof(float) + sizeof(uint32_t)));
    if (r->mem == NULL)
      return QCCL_ERR(qcclSystemError, "quant: cannot allocate %zu bytes of scratch", b * 12);
    r->tmp = (float*)r->mem;
    r->tmp2 = r->tmp + b;
    r->signs = (uint32_t*)(r->tmp2 + b);
    if (p->rotate) {
      qm_key_t sk = qm_sign_key(p->seed);
      for (uint32_t j = 0; j < (uint32_t)b; j++) r->signs[j] = qm_sign_mask(sk, j);
    }
  }
  r->fpenv = fpenv_enter();
  return qcclSuccess;
}

static void run_fini(quant_run_t* r) {
  fpenv_leave(r->fpenv);
  free(r->mem);
}

static float rd_f32(const unsigned char* p) {
  float v;
  memcpy(&v, p, sizeof v);
  return v;
}

static void wr_f32(unsigned char* p, float v) {
  memcpy(p, &v, sizeof v);
}

static int is_finite(float v) {
  return v - v == 0.0f;
}

/* Statistics, parameters and codes of one block of nr elements. */
static void encode_block(const quant_kernels_t* k, const quant_ctx_t* c, const float* x, int nr,
                         uint64_t idx, float* scale, float* lo, uint8_t* codes) {
  quant_stats_t st;
  k->stats(x, nr, c->asym, &st);
  qm_block_t b = quant_block_from_stats(c, &st);
  *scale = b.scale;
  *lo = b.lo;
  quant_emit_block(k->encode, c, &b, x, nr, idx, codes);
}

static void fill_nan(void* dst, size_t n, qcclDataType_t t) {
  float qnan = qccl_bits_f32(QM_QNAN_BITS);
  unsigned char* d = (unsigned char*)dst;
  if (t == qcclFloat32) {
    for (size_t i = 0; i < n; i++) memcpy(d + 4 * i, &qnan, 4);
    return;
  }
  uint16_t h = t == qcclFloat16 ? qccl_f32_to_f16(qnan) : qccl_f32_to_bf16(qnan);
  for (size_t i = 0; i < n; i++) memcpy(d + 2 * i, &h, 2);
}

/* Zeroes the header padding and the tail padding of a chunk. */
static void pad_chunk(unsigned char* d, size_t n, const quant_params_t* p) {
  size_t nb = qm_nblocks(n, p->block);
  size_t hdr = qm_header_bytes(n, p->block, p->asym);
  size_t used = nb * 4u * (p->asym ? 2u : 1u);
  memset(d + used, 0, hdr - used);
  size_t end = hdr + qm_code_bytes(qm_coded_elems(n, p->block, p->rotate), p->bits);
  memset(d + end, 0, qm_chunk_bytes(n, p->block, p->bits, p->asym, p->rotate) - end);
}

qcclResult_t quant_quantize(quant_isa_t isa, const quant_params_t* p, const void* src,
                            qcclDataType_t type, size_t n, void* dst) {
  quant_run_t r;
  QCCL_CHECK(type_check(type, "source type"));
  QCCL_CHECK(run_init(&r, isa, p, n, type != qcclFloat32));
  const unsigned char* s = (const unsigned char*)src;
  unsigned char* d = (unsigned char*)dst;
  uint8_t* codes = d + r.hdr;
  size_t es = type_size(type), bsz = (size_t)p->block;
  size_t cb = qm_block_code_bytes(p->block, p->bits);
  size_t b = 0;
  r.c.stream = qm_chunk_bytes(n, p->block, p->bits, p->asym, p->rotate) >= QUANT_STREAM_BYTES;
  if (r.tmp == NULL && r.k->quantize_f32 != NULL) {
    b = n / bsz; /* the full blocks */
    r.k->quantize_f32(&r.c, (const float*)src, b, p->index0, d, p->asym ? d + 4 * r.nb : NULL,
                      codes);
  }
  for (; b < r.nb; b++) {
    size_t first = b * bsz;
    int nr = (int)(n - first < bsz ? n - first : bsz);
    const float* x = (const float*)(const void*)(s + first * es);
    if (r.tmp != NULL) {
      r.k->load(s + first * es, type, (size_t)nr, r.tmp);
      if (p->rotate) {
        for (int i = nr; i < p->block; i++) r.tmp[i] = 0.0f;
        r.k->rotate(r.tmp, r.signs, p->block);
        nr = p->block;
      }
      x = r.tmp;
    }
    float scale, lo;
    encode_block(r.k, &r.c, x, nr, p->index0 + first, &scale, &lo, codes + b * cb);
    wr_f32(d + 4 * b, scale);
    if (p->asym) wr_f32(d + 4 * (r.nb + b), lo);
  }
  if (r.c.stream && r.k->fence != NULL) r.k->fence();
  if (n > 0) pad_chunk(d, n, p);
  run_fini(&r);
  return qcclSuccess;
}

/* Reads the scale and minimum of block b; returns 0 for an overflow block. */
static int block_params(const unsigned char* s, const quant_run_t* r, size_t b, float* scale,
                        float* lo) {
  return quant_block_params(s, r->c.asym ? s + 4 * r->nb : NULL, b, scale, lo);
}

/* Values of block b of a rotated chunk, back in the original domain, in tmp. */
static void unrotate_block(const quant_run_t* r, float scale, float lo, const uint8_t* codes) {
  int bs = r->c.block;
  r->k->decode(&r->c, scale, lo, codes, bs, r->tmp, 0);
  r->k->unrotate(r->tmp, r->signs, bs, 1.0f / (float)bs);
}

qcclResult_t quant_dequantize(quant_isa_t isa, const quant_params_t* p, const void* src, size_t n,
                              qcclDataType_t type, void* dst) {
  return quant_dequantize_nt(isa, p, src, n, type, dst, n * type_size(type) >= QUANT_STREAM_BYTES);
}

qcclResult_t quant_dequantize_nt(quant_isa_t isa, const quant_params_t* p, const void* src,
                                 size_t n, qcclDataType_t type, void* dst, int stream) {
  quant_run_t r;
  QCCL_CHECK(type_check(type, "destination type"));
  QCCL_CHECK(run_init(&r, isa, p, n, type != qcclFloat32));
  const unsigned char* s = (const unsigned char*)src;
  unsigned char* d = (unsigned char*)dst;
  const uint8_t* codes = s + r.hdr;
  size_t es = type_size(type), bsz = (size_t)p->block;
  size_t cb = qm_block_code_bytes(p->block, p->bits);
  size_t b = 0;
  if (r.tmp == NULL && r.k->dequantize_f32 != NULL) {
    b = n / bsz; /* the full blocks */
    r.k->dequantize_f32(&r.c, s, p->asym ? s + 4 * r.nb : NULL, codes, b, (float*)dst, stream);
  }
  for (; b < r.nb; b++) {
    size_t first = b * bsz;
    int nr = (int)(n - first < bsz ? n - first : bsz);
    float scale, lo;
    unsigned char* out = d + first * es;
    if (!block_params(s, &r, b, &scale, &lo)) {
      fill_nan(out, (size_t)nr, type);
    } else if (r.tmp == NULL) {
      r.k->decode(&r.c, scale, lo, codes + b * cb, nr, (float*)(void*)out, stream);
    } else {
      if (p->rotate)
        unrotate_block(&r, scale, lo, codes + b * cb);
      else
        r.k->decode(&r.c, scale, lo, codes + b * cb, nr, r.tmp, 0);
      r.k->store(r.tmp, (size_t)nr, type, out, stream);
    }
  }
  if (stream && r.k->fence != NULL) r.k->fence();
  run_fini(&r);
  return qcclSuccess;
}

qcclResult_t quant_dequantize_acc(quant_isa_t isa, const quant_params_t* p, const void* src,
                                  size_t n, float* acc) {
  quant_run_t r;
  QCCL_CHECK(run_init(&r, isa, p, n, 0));
  const unsigned char* s = (const unsigned char*)src;
  const uint8_t* codes = s + r.hdr;
  size_t bsz = (size_t)p->block;
  size_t cb = qm_block_code_bytes(p->block, p->bits);
  for (size_t b = 0; b < r.nb; b++) {
    size_t first = b * bsz;
    int nr = (int)(n - first < bsz ? n - first : bsz);
    float scale, lo;
    if (!block_params(s, &r, b, &scale, &lo)) {
      fill_nan(acc + first, (size_t)nr, qcclFloat32);
    } else if (!p->rotate) {
      r.k->decode_acc(&r.c, scale, lo, codes + b * cb, nr, acc + first);
    } else {
      unrotate_block(&r, scale, lo, codes + b * cb);
      r.k->add(acc + first, r.tmp, nr);
    }
  }
  run_fini(&r);
  return qcclSuccess;
}

qcclResult_t quant_reduce_requant(quant_isa_t isa, const quant_params_t* in,
                                  const void* const* srcs, int k, size_t n,
                                  const quant_params_t* out, float* residual, void* dst) {
  quant_run_t ri, ro;
  QCCL_CHECK(params_check(out));
  QCCL_CHECK(params_check(in));
  if (in->block != out->block || in->rotate != out->rotate || (in->rotate && in->seed != out->seed))
    return QCCL_ERR(qcclInvalidArgument,
                    "quant: in and out specs differ in block, rotate or rotation seed");
  if (k < 1) return QCCL_ERR(qcclInvalidArgument, "quant: k %d is not positive", k);
  if (n > 0 && (srcs == NULL || dst == NULL))
    return QCCL_ERR(qcclInvalidArgument, "quant: %s is NULL", srcs == NULL ? "srcs" : "dst");
  for (int j = 0; n > 0 && j < k; j++)
    if (srcs[j] == NULL) return QCCL_ERR(qcclInvalidArgument, "quant: srcs[%d] is NULL", j);
  QCCL_CHECK(run_init(&ri, isa, in, n, 1));
  qcclResult_t res = run_init(&ro, isa, out, n, 0);
  if (res != qcclSuccess) {
    run_fini(&ri);
    return res;
  }
  unsigned char* d = (unsigned char*)dst;
  size_t bsz = (size_t)in->block;
  size_t cbi = qm_block_code_bytes(in->block, in->bits);
  size_t cbo = qm_block_code_bytes(out->block, out->bits);
  for (size_t b = 0; b < ri.nb; b++) {
    size_t first = b * bsz;
    int nr = (int)(n - first < bsz ? n - first : bsz);
    int ne = in->rotate ? in->block : nr;
    int ok = 1;
    for (int j = 0; j < k && ok; j++) {
      float scale, lo;
      ok = block_params((const unsigned char*)srcs[j], &ri, b, &scale, &lo);
    }
    uint8_t* oc = d + ro.hdr + b * cbo;
    float scale = qccl_bits_f32(QM_QNAN_BITS), lo = scale;
    if (ok) {
      for (int j = 0; j < k; j++) {
        const unsigned char* s = (const unsigned char*)srcs[j];
        float sj, lj;
        block_params(s, &ri, b, &sj, &lj);
        const uint8_t* cj = s + ri.hdr + b * cbi;
        if (j == 0)
          ri.k->decode(&ri.c, sj, lj, cj, ne, ri.tmp, 0);
        else
          ri.k->decode_acc(&ri.c, sj, lj, cj, ne, ri.tmp);
      }
      if (residual != NULL) ri.k->add(ri.tmp, residual + first, ne);
      encode_block(ro.k, &ro.c, ri.tmp, ne, out->index0 + first, &scale, &lo, oc);
    } else {
      memset(oc, 0, qm_code_bytes((size_t)ne, out->bits));
    }
    if (residual != NULL) {
      if (is_finite(scale) && is_finite(lo)) {
        ro.k->decode(&ro.c, scale, out->asym ? lo : 0.0f, oc, ne, ri.tmp2, 0);
        ro.k->sub(residual + first, ri.tmp, ri.tmp2, ne);
      } else {
        memset(residual + first, 0, (size_t)ne * sizeof(float));
      }
    }
    wr_f32(d + 4 * b, scale);
    if (out->asym) wr_f32(d + 4 * (ro.nb + b), lo);
  }
  if (n > 0) pad_chunk(d, n, out);
  run_fini(&ro);
  run_fini(&ri);
  return qcclSuccess;
}

qcclResult_t quant_error_bound(const quant_params_t* p, const void* src, size_t n, float* per_block,
                               float* max_bound) {
  QCCL_CHECK(params_check(p));
  if (n > QUANT_MAX_COUNT) return QCCL_ERR(qcclInvalidArgument, "quant: count %zu is too large", n);
  const unsigned char* s = (const unsigned char*)src;
  size_t nb = qm_nblocks(n, p->block);
  float mx = 0.0f;
  int any_nan = 0;
  for (size_t b = 0; b < nb; b++) {
    float scale = rd_f32(s + 4 * b);
    float lo = p->asym ? rd_f32(s + 4 * (nb + b)) : 0.0f;
    float e = qm_error_bound(scale, lo, p->bits, p->asym, p->stochastic, p->rotate, p->block);
    if (per_block != NULL) per_block[b] = e;
    if (e != e)
      any_nan = 1;
    else if (e > mx)
      mx = e;
  }
  if (max_bound != NULL) *max_bound = any_nan ? qccl_bits_f32(QM_QNAN_BITS) : mx;
  return qcclSuccess;
}

size_t quant_chunk_bytes(const quant_params_t* p, size_t n) {
  return qm_chunk_bytes(n, p->block, p->bits, p->asym, p->rotate);
}

size_t quant_coded_elems(const quant_params_t* p, size_t n) {
  return qm_coded_elems(n, p->block, p->rotate);
}
