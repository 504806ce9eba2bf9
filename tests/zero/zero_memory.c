/*
 * zero_memory - what a rank holds at stage 3 (bf16 parameters, AdamW,
 * gradient_accumulation_steps 1, prefetch on a stream) for a GPT-like
 * parameter list, after two training steps:
 *   default: vocab 2000, d 384, 4 layers, 256 positions (about 8M
 *     parameters), persistence threshold 1000, prefetch budget 600000;
 *   --gpt2: GPT-2 small as perf/zero_step_bench.c lists it (vocab 50257,
 *     d 768, 12 layers, 1024 positions: 124,439,808 parameters), the
 *     bench's persistence threshold 1e5 and prefetch budget 5e7.
 * Checks:
 *   - the engine's counters (qcclZeroGetMemory) against the layout
 *     computed here: per element of a shard 12 bytes of fp32 master and two
 *     moments, 2 of the bf16 gradient shard (grad_accum_dtype's default at
 *     one micro-step) and 2 of the bf16 parameter shard; persistent
 *     parameters (biases, norms) whole on every rank; padding below 1%;
 *   - the model states (counted) within 1.1x of 16 Psi / W (the ZeRO
 *     paper's figure; an fp32 gradient shard, 18 Psi / W, fails it);
 *   - the transient peak (gathered, prefetched, gradient buckets) within
 *     the budgets: the prefetch budget, the largest unit gathered, its
 *     gradient bucket and the largest persistent bucket (bf16 elements);
 *   - the process's anonymous memory (RssAnon, sampled after every call):
 *     the final growth at least 0.9x the counted model states, the peak
 *     growth at most 1.1x of 16 Psi / W + persistent + budgets (+ 8 MiB
 *     for threads, the allocator and the library's scratch); not under a
 *     sanitizer, whose shadow memory and quarantine own the RSS.
 * Printed per rank: Psi, the bytes and their ratios to the ideal.
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

static size_t g_rss_peak;
static void sample(void) {
  size_t r = rss_anon();
  if (r > g_rss_peak) g_rss_peak = r;
}

#define MAXP 256
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
  const int gpt2 = mr_flag(&t, "--gpt2");
  const size_t V = gpt2 ? 50257 : 2000, d = gpt2 ? 768 : 384, L = gpt2 ? 12 : 4,
               P = gpt2 ? 1024 : 256, persist = gpt2 ? 100000 : 1000,
               budget = gpt2 ? 50000000 : 600000;
  add("wte", V * d);
  add("wpe", P * d);
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
  uint16_t* grad = malloc(maxc * 2);
  for (size_t i = 0; i < maxc; i++) grad[i] = 0x3c00; /* bf16 2^-7, pages touched before rss0 */
  mr_case_t c;
  if (mr_case_begin(&t, &c, "memory stage3 W%d%s", t.nranks, gpt2 ? " gpt2" : "")) {
    size_t rss0 = rss_anon();
    g_rss_peak = rss0;
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
        sample();
        MR_OK(&c, qcclZeroRelease(z, i));
      }
      for (int i = g_np - 1; i >= 0; i--) {
        MR_OK(&c, qcclZeroGather(z, i, qcclZeroBackward, &w));
        MR_OK(&c, qcclZeroGradient(z, i, grad));
        sample();
        MR_OK(&c, qcclZeroRelease(z, i));
      }
      MR_OK(&c, qcclZeroStep(z, &info));
      sample();
    }
    qcclZeroMemory_t m;
    MR_OK(&c, qcclZeroGetMemory(z, &m));
    size_t rss1 = rss_anon();
    /* the layout, computed here: persistent runs grouped, the others alone */
    size_t W = (size_t)t.nranks, state = 0, param = 0, unit_n = 0, maxunit = 0, maxpers = 0,
           pers_n = 0;
    int unit_open = 0;
    for (int i = 0; i <= g_np; i++) {
      int pers = i < g_np && g_count[i] <= persist;
      if (unit_open && !(pers && i < g_np)) { /* close the persistent run */
        size_t s = (unit_n + W - 1) / W;
        state += 14 * s;
        param += 2 * W * s;
        maxpers = W * s > maxpers ? W * s : maxpers;
        unit_open = 0;
        unit_n = 0;
      }
      if (i == g_np) break;
      if (pers) {
        unit_open = 1;
        unit_n += g_count[i];
        pers_n += g_count[i];
      } else {
        size_t s = (g_count[i] + W - 1) / W;
        state += 14 * s;
        param += 2 * s;
        maxunit = W * s > maxunit ? W * s : maxunit;
      }
    }
    /* 16 Psi / W, and persistent parameters whole on every rank */
    const double states16 = 16.0 * (double)psi / (double)W;
    const double ideal = states16 + 2.0 * (double)pers_n * (1.0 - 1.0 / (double)W);
    const double budgets = 2.0 * (double)(budget + 2 * maxunit + maxpers);
    if (m.stateBytes != state || m.paramBytes != param)
      mr_case_fail(&c, "counted state %zu, param %zu; the layout gives %zu, %zu", m.stateBytes,
                   m.paramBytes, state, param);
    if ((double)(state + param) > 1.01 * ideal)
      mr_case_fail(&c, "padding: %zu bytes held, %.0f ideal", state + param, ideal);
    if ((double)(m.stateBytes + m.paramBytes) > 1.1 * states16)
      mr_case_fail(&c, "model states %zu bytes, more than 1.1x 16 Psi / W = %.0f",
                   m.stateBytes + m.paramBytes, states16);
    if ((double)m.peakTransientBytes > budgets || m.peakTransientBytes == 0)
      mr_case_fail(&c, "transient peak %zu bytes, budgets %.0f", m.peakTransientBytes, budgets);
    if (m.transientBytes != 0)
      mr_case_fail(&c, "%zu transient bytes after the step", m.transientBytes);
    if (info.prefetched == 0) mr_case_fail(&c, "nothing was prefetched");
    double grown = (double)rss1 - (double)rss0, peak = (double)g_rss_peak - (double)rss0;
    const double limit = 1.1 * (ideal + budgets) + 8.0 * 1048576;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    const int rss_checked = 0; /* the sanitizer's shadow and quarantine own the RSS */
#else
    const int rss_checked = 1;
#endif
    if (rss_checked && (grown < 0.9 * (double)(state + param) || peak > limit))
      mr_case_fail(&c,
                   "RssAnon grew by %.0f bytes (peak %.0f); model states %zu, limit %.0f (1.1x "
                   "of 16 Psi / W + persistent %.0f + budgets %.0f, + 8 MiB)",
                   grown, peak, state + param, limit, ideal, budgets);
    printf(
        "W=%zu rank %d: Psi %zu; model states %zu B = %.3f x 16Psi/W (%.0f B); transient peak "
        "%zu B, budgets %.0f B; 16Psi/W + persistent + budgets %.0f B; counted (states + peak) "
        "%.3f x, RssAnon peak growth %.0f B = %.3f x, final growth %.0f B\n",
        W, t.rank, psi, state + param, (double)(state + param) / states16, states16,
        m.peakTransientBytes, budgets, ideal + budgets,
        (double)(state + param + m.peakTransientBytes) / (ideal + budgets), peak,
        peak / (ideal + budgets), grown);
    MR_OK(&c, qcclZeroDestroy(z));
    mr_case_end(&c);
  }
  free(grad);
  return mr_finish(&t);
}
