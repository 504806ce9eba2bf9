/*
 * expect.h - the check macro of the single-process topology tests: a
 * failed condition is printed with its place and counted in `failures`,
 * which the test returns.
 */
#ifndef QCCL_TESTS_TOPOLOGY_EXPECT_H_
#define QCCL_TESTS_TOPOLOGY_EXPECT_H_

#include <stdio.h>

static int failures;

#define EXPECT(cond, ...)                                             \
  do {                                                                \
    if (!(cond)) {                                                    \
      failures++;                                                     \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
    }                                                                 \
  } while (0)

#endif /* QCCL_TESTS_TOPOLOGY_EXPECT_H_ */
