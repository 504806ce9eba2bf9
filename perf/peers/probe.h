/*
 * probe.h - what the machine probes (copybw.c, handoff.c) share: a
 * monotonic clock in seconds and the comparison qsort needs for medians.
 */
#ifndef QCCL_PERF_PROBE_H_
#define QCCL_PERF_PROBE_H_

#include <time.h>

static inline double probe_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int probe_cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

#endif /* QCCL_PERF_PROBE_H_ */
