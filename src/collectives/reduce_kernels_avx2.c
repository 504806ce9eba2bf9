/*
 * reduce_kernels_avx2.c - the reduction kernels (reduce_kernels_impl.h)
 * built with -mavx2: eight f32 lanes per instruction instead of four, and
 * the bf16 / f16 widening and narrowing (integer shifts and masks) in
 * 256-bit registers. Chosen at run time by reduce_kernels.c.
 */
#include "collectives/reduce_kernels_impl.h"

RK_TABLE(rk_table_avx2);
