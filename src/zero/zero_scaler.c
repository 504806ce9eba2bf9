/*
 * zero_scaler.c - f16 dynamic loss scaling, by DeepSpeed's rules: the
 * scale starts at 2^initial_scale_power; an overflow lowers it by half
 * (not below min_loss_scale) once `hysteresis` overflows have been seen
 * (each overflow before that only uses up one unit of hysteresis); after
 * loss_scale_window steps without overflow it doubles and the hysteresis
 * is restored. A static loss_scale (or no fp16) keeps the scale fixed.
 */
#include <math.h>

#include "zero.h"

static int zero_dynamic(const qcclZero_t z) {
  return z->cfg.fp16 && z->cfg.lossScale == 0.0;
}

void zero_scaler_init(qcclZero_t z) {
  if (zero_dynamic(z))
    z->scale = ldexp(1.0, z->cfg.initialScalePower);
  else
    z->scale = z->cfg.fp16 && z->cfg.lossScale > 0.0 ? z->cfg.lossScale : 1.0;
  z->hyst_left = z->cfg.hysteresis;
  z->good_steps = 0;
}

void zero_scaler_update(qcclZero_t z, int overflow) {
  if (!zero_dynamic(z)) return;
  if (overflow) {
    if (z->hyst_left <= 1) {
      double s = z->scale / 2.0;
      z->scale = s < z->cfg.minLossScale ? z->cfg.minLossScale : s;
    } else {
      z->hyst_left--;
    }
    z->good_steps = 0;
    return;
  }
  if (++z->good_steps >= z->cfg.lossScaleWindow) {
    z->scale *= 2.0;
    z->good_steps = 0;
    z->hyst_left = z->cfg.hysteresis;
  }
}
