/*
 * fuzz_env - libFuzzer target for every environment parser (src/core/env.c
 * and the parsers that follow its rule): decimal integers, sizes with
 * K / M / G, seconds, QCCL_ALGO, QCCL_POLICY and QCCL_DEBUG_SUBSYS. The
 * input is one value (cut at its first NUL). Besides "no crash, no
 * over-read" (AddressSanitizer) it checks what the rule promises: a
 * parsed number lies in its range and prints back as the same decimal
 * digits (no other base, no sign or space accepted), a size is its digits
 * times 1, 2^10, 2^20 or 2^30, a failed QCCL_ALGO leaves its output alone.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/algo_env.h"
#include "collectives/zeropp/zpp.h"
#include "core/env.h"
#include "core/err.h"
#include "core/log.h"

static void check(int ok, const char* what, const char* v) {
  if (!ok) {
    fprintf(stderr, "fuzz_env: %s for '%s'\n", what, v);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* v = malloc(size + 1);
  if (!v) return 0;
  memcpy(v, data, size);
  v[size] = '\0';
  int64_t x;
  if (env_parse_int("FUZZ", v, -1000000, INT64_MAX, &x) == qcclSuccess) {
    char back[32];
    snprintf(back, sizeof back, "%lld", (long long)x);
    check(x >= -1000000, "integer below its range", v);
    /* the text is the number's decimal digits, perhaps with leading zeros */
    const char* p = v + (v[0] == '-');
    while (p[0] == '0' && p[1] != '\0') p++;
    const char* q = back + (back[0] == '-');
    check(strcmp(p, q) == 0, "integer is not its decimal digits", v);
  }
  if (env_parse_size("FUZZ", v, 0, INT64_MAX, &x) == qcclSuccess) {
    check(x >= 0, "negative size", v);
    size_t n = strlen(v);
    char last = n ? v[n - 1] : 0;
    int shift = (last == 'K' || last == 'k')   ? 10
                : (last == 'M' || last == 'm') ? 20
                : (last == 'G' || last == 'g') ? 30
                                               : 0;
    check(shift == 0 || (x & ((INT64_C(1) << shift) - 1)) == 0, "size not a multiple of its unit",
          v);
  }
  double s;
  if (env_parse_seconds("FUZZ", v, &s) == qcclSuccess)
    check(s > 0 && s == s && s < 1e300, "seconds out of range", v);
  int algo[COLL_NUM_KINDS], before[COLL_NUM_KINDS];
  for (int i = 0; i < COLL_NUM_KINDS; i++) algo[i] = before[i] = i % 3;
  if (coll_algo_parse(v, algo) != qcclSuccess)
    check(memcmp(algo, before, sizeof algo) == 0, "failed QCCL_ALGO changed its output", v);
  for (int i = 0; i < COLL_NUM_KINDS; i++)
    check(algo[i] >= COLL_ALGO_AUTO && algo[i] <= COLL_ALGO_HIER, "unknown algorithm", v);
  char msg[300];
  zpp_policy_check(v, msg, sizeof msg);
  (void)log_subsys_parse(v, NULL);
  err_clear();
  free(v);
  return 0;
}
