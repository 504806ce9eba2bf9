/*
 * wait.h - how a rank waits for a peer: poll for a few microseconds, then
 * yield the core, then sleep in short naps, so that 8
 * ranks on 2 cores still make progress and a long wait does not burn a
 * core. The caller polls its condition between calls to backoff_idle and
 * does its slow checks (timeout, peer liveness) when backoff_idle says so.
 */
#ifndef QCCL_CORE_WAIT_H_
#define QCCL_CORE_WAIT_H_

#include <stdint.h>

typedef struct {
  uint32_t iter;     /* idle steps so far */
  uint32_t spin;     /* microseconds of polling before the first yield */
  double spin_end;   /* when the polling ends */
  double start;      /* clock_now() at backoff_init */
  double next_check; /* when backoff_idle next returns 1 */
  double nap_after;  /* seconds of yielding before it naps (backoff_nap_after) */
} backoff_t;

/* spin_us: microseconds of polling before yielding (0 yields at once). */
void backoff_init(backoff_t* b, uint32_t spin_us);

/* 1 while the wait still polls for its spin (it would not yield yet). */
static inline int backoff_spinning(const backoff_t* b) {
  return b->spin > 0;
}

/* Makes the wait nap rather than yield once it has yielded for `after`
 * seconds (instead of ~50 ms): a wait on peers that need no core of this
 * host. */
void backoff_nap_after(backoff_t* b, double after);

/* One idle step. Returns 1 when a slow check is due (every ~20 ms). */
int backoff_idle(backoff_t* b);

/* A function every wait runs once it has stopped spinning: at every 16th
 * idle step and at each slow check. The UCX transport sets it to progress
 * the workers no thread is using (transport/ucx.c: a finished send may
 * still sit in one). Set once, never cleared. */
void backoff_set_idle_hook(void (*fn)(void));
/* Runs the hook now (for waits that do not use backoff_idle). */
void backoff_run_idle_hook(void);

#endif /* QCCL_CORE_WAIT_H_ */
