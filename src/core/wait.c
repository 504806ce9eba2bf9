/*
 * wait.c - spin, then yield, then nap (see wait.h). The spin is a plain
 * poll for a set time, without the `pause` instruction: on KVM guests a
 * pause loop triggers pause-loop exiting, and the hypervisor then
 * deschedules the waiting vCPU (a shared-memory ping-pong measured 0.07 us
 * quiet, 172 us on a loaded host with `pause`, 0.10 us without). The clock
 * is read once every 64 polls. Yielding hands the core to an
 * oversubscribed peer that holds the data we wait for; after ~50 ms of
 * waiting, 50 us naps keep a stalled job from burning both cores. Once
 * it yields, a wait also runs the idle hook now and then (wait.h).
 */
#include "core/wait.h"

#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "core/socket.h"

#define BACKOFF_CHECK_PERIOD 0.02
#define BACKOFF_NAP_AFTER 0.05

#define BACKOFF_CLOCK_EVERY 64
#define BACKOFF_HOOK_EVERY 16

typedef void (*backoff_hook_t)(void);
static _Atomic(backoff_hook_t) backoff_hook;

void backoff_set_idle_hook(void (*fn)(void)) {
  atomic_store_explicit(&backoff_hook, fn, memory_order_release);
}

void backoff_run_idle_hook(void) {
  backoff_hook_t hook = atomic_load_explicit(&backoff_hook, memory_order_acquire);
  if (hook) hook();
}

void backoff_init(backoff_t* b, uint32_t spin_us) {
  b->iter = 0;
  b->spin = spin_us;
  b->spin_end = 0;
  b->start = 0;
  b->next_check = 0;
  b->nap_after = BACKOFF_NAP_AFTER;
}

void backoff_nap_after(backoff_t* b, double after) {
  b->nap_after = after;
}

int backoff_idle(backoff_t* b) {
  b->iter++;
  if (b->spin > 0) {
    if (b->iter == 1) b->spin_end = clock_now() + b->spin * 1e-6;
    __asm__ __volatile__("" ::: "memory"); /* the caller's poll reloads */
    if (b->iter % BACKOFF_CLOCK_EVERY != 0 || clock_now() < b->spin_end) return 0;
    b->spin = 0; /* spun long enough: yield from now on */
  }
  double now = clock_now();
  if (b->start == 0) {
    b->start = now;
    b->next_check = now + BACKOFF_CHECK_PERIOD;
  }
  if (now - b->start < b->nap_after) {
    sched_yield();
  } else {
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
  }
  int check = now >= b->next_check;
  if (check || b->iter % BACKOFF_HOOK_EVERY == 0) backoff_run_idle_hook();
  if (check) {
    b->next_check = now + BACKOFF_CHECK_PERIOD;
    return 1;
  }
  return 0;
}
