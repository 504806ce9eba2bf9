/*
 * check.h - the checks of the unit tests: CHECK(cond, fmt, ...) prints
 * "NAME: FAIL" and the message to stderr when cond is false and counts
 * it; check_verdict() prints "NAME: ok" or the count and returns the exit
 * status. NAME is CHECK_NAME, which the test defines before including
 * this.
 */
#ifndef QCCL_TESTS_UNIT_CHECK_H_
#define QCCL_TESTS_UNIT_CHECK_H_

#include <stdio.h>

#ifndef CHECK_NAME
#error "define CHECK_NAME (the test's name) before including check.h"
#endif

static int check_failures;

#define CHECK(cond, ...)                        \
  do {                                          \
    if (!(cond)) {                              \
      fprintf(stderr, "%s: FAIL ", CHECK_NAME); \
      fprintf(stderr, __VA_ARGS__);             \
      fprintf(stderr, "\n");                    \
      check_failures++;                         \
    }                                           \
  } while (0)

static inline int check_verdict(void) {
  if (check_failures) {
    fprintf(stderr, "%s: %d failures\n", CHECK_NAME, check_failures);
    return 1;
  }
  printf("%s: ok\n", CHECK_NAME);
  return 0;
}

#endif /* QCCL_TESTS_UNIT_CHECK_H_ */
