/*
 * zero_memory - what a rank holds at stage 3, for a GPT-like parameter list
 * (vocab 2000, d 384, 4 layers, MLP 4d, bf16: about 8M parameters), after
 * two training steps with prefetch:
 *   - the engine's counters (qcclZeroGetMemory) against the layout computed
 *     here: 16 bytes per element of the fp32 master, two moments and the
 *     gradient accumulation shard, plus 2 per element of the bf16 parameter
 *     shard (18 Psi / W), persistent parameters (<= 1000 elements: biases,
 *     norms) whole on every rank; padding below 1%;
 *   - the transient peak (gathered, prefetched, gradient buckets) within
 *     the prefetch budget plus three of the largest unit;
 *   - the process's anonymous memory (RssAnon) grown by at least 0.9x the
 *     counted state and at most 1.1x of everything counted plus 8 MiB
 *     (threads, allocator, the library's own scratch); not under a sanitizer,
 *     whose shadow memory and quarantine own the RSS.
 * Printed per rank: Psi, bytes per element, the RSS ratio.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mr_util.h"
#include "qccl_zero.h"

static size_t rss_anon(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  size_t kb = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "RssAnon:", 8) == 0) kb = strtoull(line + 8, NULL, 10);
  if (f != NULL) fclose(f);
  return kb * 1024;
}

#define MAXP 64
static size_t g_count[MAXP];
static char g_name[MAXP][48];
static int g_np;

static void add(const char* name, size_t count) {
  snprintf(g_name[g_np], sizeof g_name[0], "%s", name);
  g_count[g_np++] = count;
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const size_t V = 2000, d = 384, L = 4, persist = 1000, budget = 600000;
  add("wte", V * d);
  add("wpe", 256 * d);
  for (size_t l = 0; l < L; l++) {
    char n[48];
    const char* parts[] = {"ln1.w", "ln1.b", "qkv.w", "qkv.b", "proj.w", "proj.b",
                           "ln2.w", "ln2.b", "fc.w",  "fc.b",  "out.w",  "out.b"};
    size_t counts[] = {d, d, 3 * d * d, 3 * d, d * d, d, d, d, 4 * d * d, 4 * d, 4 * d * d, d};
    for (int i = 0; i < 12; i++) {
      snprintf(n, sizeof n, "h%zu.%s", l, parts[i]);
      add(n, counts[i]);
    }
  }
  add("lnf.w", d);
  add("lnf.b", d);
  size_t psi = 0, maxc = 0;
  for (int i = 0; i < g_np; i++) psi += g_count[i], maxc = g_count[i] > maxc ? g_count[i] : maxc;
  uint16_t* zeros = calloc(maxc, 2);
  mr_case_t c;
  if (mr_case_begin(&t, &c, "memory stage3 W%d", t.nranks)) {
    size_t rss0 = rss_anon();
    qcclZeroConfig_t cfg = QCCL_ZERO_CONFIG_INITIALIZER;
    cfg.stage = 3;
    cfg.bf16 = 1;
    cfg.persistenceThreshold = persist;
    cfg.prefetchBucketSize = budget;
    cfg.overlapComm = 1;
    qcclZero_t z;
    MR_OK(&c, qcclZeroCreate(t.comm, &cfg, &z));
    for (int i = 0; i < g_np; i++)
      MR_OK(&c, qcclZeroRegister(z, g_name[i], g_count[i], qcclBfloat16, NULL, NULL));
    qcclZeroStepInfo_t info;
    for (int step = 0; step < 2; step++) {
      void* w;
      for (int i = 0; i < g_np; i++) {
        MR_OK(&c, qcclZeroGather(z, i, qcclZeroForward, &w));
        MR_OK(&c, qcclZeroRelease(z, i));
      }
      for (int i = g_np - 1; i >= 0; i--) {
        MR_OK(&c, qcclZeroGather(z, i, qcclZeroBackward, &w));
        MR_OK(&c, qcclZeroGradient(z, i, zeros));
        MR_OK(&c, qcclZeroRelease(z, i));
      }
      MR_OK(&c, qcclZeroStep(z, &info));
    }
    qcclZeroMemory_t m;
    MR_OK(&c, qcclZeroGetMemory(z, &m));
    size_t rss1 = rss_anon();
    /* the layout, computed here: persistent runs grouped, the others alone */
    size_t W = (size_t)t.nranks, state = 0, param = 0, unit_n = 0, maxunit = 0, ideal = 0;
    int unit_open = 0;
    for (int i = 0; i <= g_np; i++) {
      int pers = i < g_np && g_count[i] <= persist;
      if (unit_open && !(pers && i < g_np)) { /* close the persistent run */
        size_t s = (unit_n + W - 1) / W;
        state += 16 * s;
        param += 2 * W * s;
        unit_open = 0;
        unit_n = 0;
      }
      if (i == g_np) break;
      if (pers) {
        unit_open = 1;
        unit_n += g_count[i];
        ideal += g_count[i] * (16.0 / (double)W + 2.0);
      } else {
        size_t s = (g_count[i] + W - 1) / W;
        state += 16 * s;
        param += 2 * s;
        maxunit = W * s > maxunit ? W * s : maxunit;
        ideal += (size_t)(g_count[i] * 18.0 / (double)W);
      }
    }
    if (m.stateBytes != state || m.paramBytes != param)
      mr_case_fail(&c, "counted state %zu, param %zu; the layout gives %zu, %zu", m.stateBytes,
                   m.paramBytes, state, param);
    if ((double)(state + param) > 1.01 * (double)ideal)
      mr_case_fail(&c, "padding: %zu bytes held, %zu ideal", state + param, ideal);
    size_t tbound = 2 * (budget + 3 * maxunit);
    if (m.peakTransientBytes > tbound || m.peakTransientBytes == 0)
      mr_case_fail(&c, "transient peak %zu bytes, bound %zu", m.peakTransientBytes, tbound);
    if (m.transientBytes != 0)
      mr_case_fail(&c, "%zu transient bytes after the step", m.transientBytes);
    if (info.prefetched == 0) mr_case_fail(&c, "nothing was prefetched");
    size_t counted = state + param + m.peakTransientBytes;
    double grown = (double)rss1 - (double)rss0;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    const int rss_checked = 0; /* the sanitizer's shadow and quarantine own the RSS */
#else
    const int rss_checked = 1;
#endif
    if (rss_checked &&
        (grown < 0.9 * (double)(state + param) || grown > 1.1 * (double)counted + 8.0 * 1048576))
      mr_case_fail(&c, "RssAnon grew by %.0f bytes; counted %zu (state + params %zu)", grown,
                   counted, state + param);
    printf(
        "W=%zu rank %d: Psi %zu, held %.2f bytes/element x W (ideal %.2f), transient peak %.1f "
        "MB, RssAnon growth / counted %.3f\n",
        W, t.rank, psi, (double)(state + param) * (double)W / (double)psi,
        (double)ideal * (double)W / (double)psi, m.peakTransientBytes / 1048576.0,
        grown / (double)counted);
    MR_OK(&c, qcclZeroDestroy(z));
    mr_case_end(&c);
  }
  free(zeros);
  return mr_finish(&t);
}
