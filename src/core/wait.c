/*
 * wait.c - spin, then yield, then nap (see wait.h). Yielding hands the core
 * to an oversubscribed peer that holds the data we wait for; after ~50 ms of
 * waiting, 50 us naps keep a stalled job from burning both cores.
 */
#include "core/wait.h"

#include <sched.h>
#include <time.h>

#include "core/socket.h"

#define BACKOFF_CHECK_PERIOD 0.02
#define BACKOFF_NAP_AFTER 0.05

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

void backoff_init(backoff_t* b, uint32_t spin) {
  b->iter = 0;
  b->spin = spin;
  b->start = 0;
  b->next_check = 0;
}

int backoff_idle(backoff_t* b) {
  b->iter++;
  if (b->iter <= b->spin) {
    cpu_relax();
    return 0;
  }
  double now = clock_now();
  if (b->start == 0) {
    b->start = now;
    b->next_check = now + BACKOFF_CHECK_PERIOD;
  }
  if (now - b->start < BACKOFF_NAP_AFTER) {
    sched_yield();
  } else {
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
  }
  if (now >= b->next_check) {
    b->next_check = now + BACKOFF_CHECK_PERIOD;
    return 1;
  }
  return 0;
}
