/*
 * overlap_bench.c - qccl-overlap-bench: does a call queued on a host stream
 * overlap the caller's own work? (docs/PERF.md, "Overlap on host streams";
 * public API only.)
 *
 *   qcclrun -n 2 --nodes 2 --link 1gbit -- qccl-overlap-bench -b 64M
 *
 * The tensor of -b bytes is the gathered output of a qcclAllGatherQ
 * (bf16, int8 B = 256), the forward gather of a ZeRO-3 layer. Measured, each
 * -n times after a warm-up, the slowest rank's time (a barrier before each
 * round), medians printed:
 *   alone     the gather with stream NULL: G;
 *   sum       the gather, then a wait of G (what blocking costs a trainer
 *             whose GPU kernel takes G): about 2G;
 *   sleep     the gather queued on a stream, the caller sleeps G (a GPU
 *             kernel: the CPU is free), then synchronizes: ideally G;
 *   cpu       the same with a CPU loop of G instead of the sleep: on a host
 *             whose cores are all busy with the ranks' loops, the engine's
 *             own CPU use shows here (printed: the loop's own length, which
 *             grows when the stream's thread takes its core);
 *   2dir seq  a plain all-gather of one tensor, then a plain reduce-scatter
 *             of another (the same -b bytes of output / input), stream NULL;
 *   engine CPU  the process's CPU time (user + system, getrusage) per
 *             gather, with stream NULL and on a stream while the caller
 *             sleeps (then all of it is the engine's: its thread, UCX, the
 *             codec), beside the codec's own (one quantization of the shard
 *             and W dequantizations, timed here alone): the rest is what
 *             waiting and moving bytes cost the CPU;
 *   2dir par  the same two on two host streams of two communicators (a
 *             duplicate of the first): on a full-duplex link they can use
 *             the two directions at once. On ONE communicator the engine
 *             serves them in issue order, one at a time (qccl.h): printed
 *             too, as `2dir 1comm`.
 * Ratios against `alone` / `2dir seq` are printed last, as one line of JSON
 * with --json.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "qccl.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds (user + system) this process used so far. */
static double cpu_now(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
         1e-6 * (double)u.ru_stime.tv_usec;
}

static void sleep_for(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* A CPU loop of about s seconds (a clock read every 4096 steps). */
static volatile uint64_t sink;
static double spin_for(double s) {
  double t0 = now(), t;
  uint64_t x = 1;
  do {
    for (int i = 0; i < 4096; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
    t = now();
  } while (t - t0 < s);
  sink = x;
  return t - t0;
}

static int cmp_d(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#define CHECK(call)                                                                          \
  do {                                                                                       \
    qcclResult_t r_ = (call);                                                                \
    if (r_ != qcclSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, qcclGetLastError(comm)); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

static qcclComm_t comm;

/* The slowest rank's time of t. */
static double slowest(double t) {
  double m;
  CHECK(qcclAllReduce(&t, &m, 1, qcclFloat64, qcclMax, comm, NULL));
  return m;
}

static size_t parse_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

int main(int argc, char** argv) {
  size_t bytes = 64u << 20;
  int iters = 5, json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-b") && i + 1 < argc)
      bytes = parse_size(argv[++i]);
    else if (!strcmp(argv[i], "-n") && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json"))
      json = 1;
    else {
      fprintf(stderr, "usage: qccl-overlap-bench [-b BYTES] [-n ITERS] [--json]\n");
      return 2;
    }
  }
  if (iters < 1 || iters > 1000 || bytes < 1024) {
    fprintf(stderr, "qccl-overlap-bench: -n in [1, 1000] and -b of 1K or more\n");
    return 2;
  }
  if (qcclCommInitFromEnv(&comm) != qcclSuccess) {
    fprintf(stderr, "init: %s\n", qcclGetLastError(NULL));
    return 1;
  }
  int rank, W;
  CHECK(qcclCommUserRank(comm, &rank));
  CHECK(qcclCommCount(comm, &W));
  qcclComm_t dup;
  CHECK(qcclCommSplit(comm, 0, rank, &dup, NULL));
  size_t total = bytes / 2 / (size_t)W * (size_t)W; /* bf16 elements, a multiple of W */
  size_t shard = total / (size_t)W;
  uint16_t* in = malloc(total * 2);
  uint16_t* out = malloc(total * 2);
  uint16_t* in2 = malloc(total * 2);
  uint16_t* out2 = malloc(total * 2);
  if (!in || !out || !in2 || !out2) return 1;
  for (size_t i = 0; i < total; i++)
    in[i] = in2[i] = (uint16_t)(0x3f80 + (i * 7 + (size_t)rank) % 64);
  qcclQuantSpec_t spec = QCCL_QUANT_SPEC_INITIALIZER;
  qcclStream_t s1, s2;
  CHECK(qcclStreamCreate(&s1));
  CHECK(qcclStreamCreate(&s2));

  enum { ALONE, SUM, SLEEP, CPU, SEQ, PAR, ONECOMM, NK };
  static const char* const names[NK] = {"alone",    "sum",      "sleep",     "cpu",
                                        "2dir seq", "2dir par", "2dir 1comm"};
  double* t[NK];
  double* cpu_loop = calloc((size_t)iters, sizeof *cpu_loop);
  double* cpu_alone = calloc((size_t)iters, sizeof *cpu_alone);
  double* cpu_stream = calloc((size_t)iters, sizeof *cpu_stream);
  for (int k = 0; k < NK; k++) t[k] = calloc((size_t)iters, sizeof **t);
  /* warm-up: connections, scratch */
  CHECK(qcclAllGatherQ(in, out, shard, qcclBfloat16, &spec, comm, NULL));
  CHECK(qcclAllGather(in, out, shard, qcclBfloat16, comm, NULL));
  CHECK(qcclReduceScatter(in2, out2, shard, qcclBfloat16, qcclSum, dup, NULL));
  double G = 0;
  for (int it = 0; it < iters; it++) {
    double t0;
    /* interleaved: every round measures every kind once */
    CHECK(qcclBarrier(comm, NULL));
    t0 = now();
    double c0 = cpu_now();
    CHECK(qcclAllGatherQ(in, out, shard, qcclBfloat16, &spec, comm, NULL));
    cpu_alone[it] = cpu_now() - c0;
    t[ALONE][it] = slowest(now() - t0);
    if (it == 0) G = t[ALONE][0];

    CHECK(qcclBarrier(comm, NULL));
    t0 = now();
    CHECK(qcclAllGatherQ(in, out, shard, qcclBfloat16, &spec, comm, NULL));
    sleep_for(G);
    t[SUM][it] = slowest(now() - t0);

    CHECK(qcclBarrier(comm, NULL));
    t0 = now();
    c0 = cpu_now();
    CHECK(qcclAllGatherQ(in, out, shard, qcclBfloat16, &spec, comm, s1));
    sleep_for(G);
    CHECK(qcclStreamSynchronize(s1));
    cpu_stream[it] = cpu_now() - c0;
    t[SLEEP][it] = slowest(now() - t0);

    CHECK(qcclBarrier(comm, NULL));
    t0 = now();
    CHECK(qcclAllGatherQ(in, out, shard, qcclBfloat16, &spec, comm, s1));
    cpu_loop[it] = slowest(spin_for(G));
    CHECK(qcclStreamSynchronize(s1));
    t[CPU][it] = slowest(now() - t0);

    CHECK(qcclBarrier(comm, NULL));
    t0 = now();
    CHECK(qcclAllGather(in, out, shard, qcclBfloat16, comm, NULL));
    CHECK(qcclReduceScatter(in2, out2, shard, qcclBfloat16, qcclSum, dup, NULL));
    t[SEQ][it] = slowest(now() - t0);

    CHECK(qcclBarrier(comm, NULL));
    t0 = now();
    CHECK(qcclAllGather(in, out, shard, qcclBfloat16, comm, s1));
    CHECK(qcclReduceScatter(in2, out2, shard, qcclBfloat16, qcclSum, dup, s2));
    CHECK(qcclStreamSynchronize(s1));
    CHECK(qcclStreamSynchronize(s2));
    t[PAR][it] = slowest(now() - t0);

    CHECK(qcclBarrier(comm, NULL));
    t0 = now();
    CHECK(qcclAllGather(in, out, shard, qcclBfloat16, comm, s1));
    CHECK(qcclReduceScatter(in2, out2, shard, qcclBfloat16, qcclSum, comm, s2));
    CHECK(qcclStreamSynchronize(s1));
    CHECK(qcclStreamSynchronize(s2));
    t[ONECOMM][it] = slowest(now() - t0);
  }
  double loop = median(cpu_loop, iters);
  double cpu_a = median(cpu_alone, iters), cpu_s = median(cpu_stream, iters);
  /* the codec's own CPU: one quantization of the shard, W dequantizations */
  size_t qbytes;
  CHECK(qcclQuantSize(shard, &spec, &qbytes));
  void* q = malloc(qbytes);
  if (q == NULL) return 1;
  double codec = 0;
  for (int it = 0; it < iters; it++) {
    double c0 = cpu_now();
    CHECK(qcclQuantize(in, shard, qcclBfloat16, &spec, q));
    for (int j = 0; j < W; j++)
      CHECK(qcclDequantize(q, shard, qcclBfloat16, &spec, out + (size_t)j * shard));
    cpu_alone[it] = cpu_now() - c0; /* reused: the gathers' are taken */
  }
  codec = median(cpu_alone, iters);
  free(q);

  double med[NK];
  for (int k = 0; k < NK; k++) med[k] = median(t[k], iters);

  if (rank == 0) {
    printf(
        "# qccl-overlap-bench: W=%d, %zu bytes gathered (bf16, qwZ int8 B=256), %d rounds, "
        "medians of the slowest rank\n",
        W, total * 2, iters);
    for (int k = 0; k < NK; k++) printf("%-11s %9.1f ms\n", names[k], med[k] * 1e3);
    printf("cpu loop    %9.1f ms (asked %.1f ms)\n", loop * 1e3, med[ALONE] * 1e3);
    printf("stream+sleep / alone  %.2f (target <= 1.10; blocking: sum / alone %.2f)\n",
           med[SLEEP] / med[ALONE], med[SUM] / med[ALONE]);
    printf("stream+cpu / alone    %.2f\n", med[CPU] / med[ALONE]);
    printf(
        "engine CPU per gather: %.1f ms with stream NULL, %.1f ms on a stream (of %.1f ms); "
        "the codec alone %.1f ms\n",
        cpu_a * 1e3, cpu_s * 1e3, med[SLEEP] * 1e3, codec * 1e3);
    printf(
        "2 streams / sequential %.2f (two communicators; target <= 0.70), one communicator "
        "%.2f\n",
        med[PAR] / med[SEQ], med[ONECOMM] / med[SEQ]);
    if (json)
      printf(
          "{\"W\": %d, \"bytes\": %zu, \"alone_ms\": %.3f, \"sum_ms\": %.3f, \"sleep_ms\": "
          "%.3f, \"cpu_ms\": %.3f, \"cpu_loop_ms\": %.3f, \"seq_ms\": %.3f, \"par_ms\": %.3f, "
          "\"onecomm_ms\": %.3f, \"engine_cpu_ms\": %.3f, \"stream_cpu_ms\": %.3f, "
          "\"codec_cpu_ms\": %.3f}\n",
          W, total * 2, med[ALONE] * 1e3, med[SUM] * 1e3, med[SLEEP] * 1e3, med[CPU] * 1e3,
          loop * 1e3, med[SEQ] * 1e3, med[PAR] * 1e3, med[ONECOMM] * 1e3, cpu_a * 1e3, cpu_s * 1e3,
          codec * 1e3);
  }
  CHECK(qcclStreamDestroy(s1));
  CHECK(qcclStreamDestroy(s2));
  CHECK(qcclCommDestroy(dup));
  CHECK(qcclCommDestroy(comm));
  for (int k = 0; k < NK; k++) free(t[k]);
  free(cpu_loop);
  free(cpu_alone);
  free(cpu_stream);
  free(in);
  free(out);
  free(in2);
  free(out2);
  return 0;
}
