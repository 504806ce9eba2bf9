/*
 * perf_driver.c - the sweep shared by qccl-perf and its peers (nccl-tests'
 * common.cu, for host buffers and blocking calls).
 *
 * For every type, op and size: the input is written, then out of place
 * and in place each get `-w` warm-up calls, a barrier, and `-n` timed
 * calls. Every call is timed on its own, so the row shows nccl-tests'
 * mean time per call (`time`, the loop's wall time / iterations) and the
 * median of the per-call times (the `median` columns at the end of the
 * row, which these shared machines need). With -c the input is written
 * again, the output poisoned, one more call made outside the timed loop
 * and every output element compared with perf_check()'s reference.
 *
 * Times are combined over ranks as nccl-tests' -a says (rank 0, mean, min
 * or max); #wrong is summed over ranks. algbw = size / time with GB = 1e9
 * bytes, busbw = algbw * the collective's bus factor.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

double perf_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void perf_on_alarm(int sig) {
  static const char msg[] = "qccl-perf: timeout (-T) expired, giving up\n";
  (void)sig;
  ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)w;
  _exit(124);
}

static int perf_cmp_double(const void* x, const void* y) {
  double a = *(const double*)x, b = *(const double*)y;
  return (a > b) - (a < b);
}

typedef struct {
  const perf_coll_t* coll;
  const perf_args_t* a;
  perf_backend_t* be;
  perf_run_fn run;
  char *sendbuf, *recvbuf; /* send_base, recv_base + a->offset */
  char *send_base, *recv_base;
  double* times; /* iters per-call times */
  FILE* json;
  int json_rows;
  double bw_sum;
  int bw_count;
  size_t wrong_total;
  int local_wrong; /* this rank saw a wrong value */
} perf_ctx_t;

typedef struct {
  double mean_us, median_us;
  size_t wrong;
  int valid; /* 0: this placement does not exist (N/A) */
} perf_result_t;

/* Warm-up, a barrier, then the timed calls. */
static int perf_time(perf_ctx_t* x, void* send, void* recv, const perf_counts_t* c,
                     qcclDataType_t t, qcclRedOp_t op, perf_result_t* res) {
  perf_backend_t* be = x->be;
  int rc;
  for (int i = 0; i < x->a->warmup; i++)
    if ((rc = x->run(be->ctx, send, recv, c->paramcount, t, op, x->a->root)) != 0) return rc;
  if ((rc = be->barrier(be->ctx)) != 0) return rc;
  double start = perf_now();
  for (int i = 0; i < x->a->iters; i++) {
    double t0 = perf_now();
    if ((rc = x->run(be->ctx, send, recv, c->paramcount, t, op, x->a->root)) != 0) return rc;
    x->times[i] = perf_now() - t0;
  }
  double total = perf_now() - start;
  qsort(x->times, (size_t)x->a->iters, sizeof(double), perf_cmp_double);
  int m = x->a->iters;
  double med = m % 2 ? x->times[m / 2] : 0.5 * (x->times[m / 2 - 1] + x->times[m / 2]);
  res->mean_us = total / m * 1e6;
  res->median_us = med * 1e6;
  return 0;
}

/* The input in place, a poisoned output, one call, the comparison. */
static int perf_verify(perf_ctx_t* x, void* send, void* recv, const perf_counts_t* c,
                       size_t recv_total, qcclDataType_t t, qcclRedOp_t op, int in_place,
                       size_t size, perf_result_t* res) {
  perf_backend_t* be = x->be;
  perf_poison(x->recvbuf, recv_total, t);
  perf_fill(send, c->sendcount, t, op, x->a->seed, be->rank, 0);
  int rc = x->run(be->ctx, send, recv, c->paramcount, t, op, x->a->root);
  if (rc != 0) return rc;
  perf_check_t chk;
  perf_check(x->coll, c, recv, t, op, be->rank, be->nranks, x->a->root, x->a->seed, &chk);
  res->wrong = chk.wrong;
  if (chk.wrong) {
    x->local_wrong = 1;
    fprintf(stderr,
            "%s-perf: rank %d: %s %zu B %s %s %s: %zu wrong values; first at element %zu: "
            "got %.9g, expected %.9g (seed 0x%llx)\n",
            be->name, be->rank, x->coll->name, size, perf_type_name(t), perf_op_name(op),
            in_place ? "in-place" : "out-of-place", chk.wrong, chk.first_index, chk.first_got,
            chk.first_expected, (unsigned long long)x->a->seed);
  }
  return 0;
}

static void perf_fmt_time(double us, char* buf, size_t len) {
  snprintf(buf, len, us >= 1e4 ? "%.0f" : "%.2f", us);
}

static void perf_print_header(const perf_ctx_t* x) {
  const perf_args_t* a = x->a;
  perf_backend_t* be = x->be;
  char step[64];
  if (a->step_factor > 1)
    snprintf(step, sizeof step, "%zu(factor)", a->step_factor);
  else
    snprintf(step, sizeof step, "%zu(bytes)", a->step_bytes);
  static const char* const avg_names[] = {"rank 0", "mean over ranks", "min over ranks",
                                          "max over ranks"};
  printf("# %s-perf %s: %s %s, %d ranks\n", be->name, x->coll->name, be->name, be->version,
         be->nranks);
  printf(
      "#  minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d validation: %d "
      "average: %d (%s) blocking: %d timeout: %d\n",
      a->min_bytes, a->max_bytes, step, a->warmup, a->iters, a->check ? 1 : 0, a->average,
      avg_names[a->average], a->blocking, a->timeout_s);
  printf("#  seed 0x%llx; check: %s\n", (unsigned long long)a->seed, perf_check_rule());
  if (a->offset > 0) printf("#  buffers start %d bytes past a page (-O)\n", a->offset);
  printf("#  time: mean per call (nccl-tests); median: median of the per-call times\n");
}

static void perf_print_hosts(perf_ctx_t* x) {
  perf_backend_t* be = x->be;
  enum { LINE = 96 };
  char mine[LINE];
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  snprintf(mine, sizeof mine, "#  Rank %3d Pid %7d on %s", be->rank, (int)getpid(), host);
  char* all = calloc((size_t)be->nranks, LINE);
  if (all && be->allgather_bytes(be->ctx, mine, all, LINE) == 0 && be->rank == 0)
    for (int r = 0; r < be->nranks; r++) printf("%.*s\n", LINE, all + (size_t)r * LINE);
  free(all);
}

static void perf_print_table_head(void) {
  printf("#\n#%75s%38s\n", "out-of-place", "in-place");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %8s  %8s\n", "size",
         "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
         "busbw", "#wrong", "median", "median");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %8s  %8s\n", "(B)",
         "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
         "oop(us)", "ip(us)");
  fflush(stdout);
}

static void perf_json_half(FILE* f, const char* key, const perf_result_t* r, double size,
                           double factor, int check) {
  if (!r->valid) {
    fprintf(f, "\"%s\": null", key);
    return;
  }
  double algbw = size / 1e9 / (r->mean_us * 1e-6);
  double algbw_med = size / 1e9 / (r->median_us * 1e-6);
  fprintf(f,
          "\"%s\": {\"time_us\": %.3f, \"median_us\": %.3f, \"algbw\": %.4f, \"busbw\": %.4f, "
          "\"algbw_median\": %.4f, \"busbw_median\": %.4f, \"wrong\": ",
          key, r->mean_us, r->median_us, algbw, algbw * factor, algbw_med, algbw_med * factor);
  if (check)
    fprintf(f, "%zu}", r->wrong);
  else
    fprintf(f, "null}");
}

static void perf_print_row(perf_ctx_t* x, size_t size, size_t count, qcclDataType_t t,
                           const char* opname, int root, const perf_result_t r[2]) {
  double factor = x->coll->bus_factor(x->be->nranks);
  printf("%12zu  %12zu  %8s  %6s  %6d", size, count, perf_type_name(t), opname, root);
  for (int ip = 0; ip < 2; ip++) {
    if (!r[ip].valid) {
      printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
      continue;
    }
    char tb[32], wb[32];
    double algbw = r[ip].mean_us > 0 ? (double)size / 1e9 / (r[ip].mean_us * 1e-6) : 0;
    perf_fmt_time(r[ip].mean_us, tb, sizeof tb);
    if (x->a->check)
      snprintf(wb, sizeof wb, "%zu", r[ip].wrong);
    else
      snprintf(wb, sizeof wb, "N/A");
    printf("  %7s  %6.2f  %6.2f  %6s", tb, algbw, algbw * factor, wb);
    x->bw_sum += algbw * factor;
    x->bw_count++;
  }
  for (int ip = 0; ip < 2; ip++) {
    char mb[32] = "N/A";
    if (r[ip].valid) perf_fmt_time(r[ip].median_us, mb, sizeof mb);
    printf("  %8s", mb);
  }
  printf("\n");
  fflush(stdout);
  if (x->json) {
    fprintf(x->json,
            "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
            "\"root\": %d, ",
            x->json_rows++ ? "," : "", size, count, perf_type_name(t), opname, root);
    perf_json_half(x->json, "out_of_place", &r[0], (double)size, factor, x->a->check);
    fprintf(x->json, ", ");
    perf_json_half(x->json, "in_place", &r[1], (double)size, factor, x->a->check);
    fprintf(x->json, "}");
  }
}

/* Combines the four times over ranks (-a) and sums the wrong counts. */
static int perf_combine(perf_ctx_t* x, perf_result_t r[2]) {
  perf_backend_t* be = x->be;
  double v[4] = {r[0].mean_us, r[0].median_us, r[1].mean_us, r[1].median_us};
  double w[2] = {(double)r[0].wrong, (double)r[1].wrong};
  perf_combine_t how = x->a->average == 2   ? PERF_COMBINE_MIN
                       : x->a->average == 3 ? PERF_COMBINE_MAX
                                            : PERF_COMBINE_SUM;
  if (x->a->average == 0 && be->rank != 0) memset(v, 0, sizeof v);
  int rc = be->allreduce_f64(be->ctx, v, 4, how);
  if (rc == 0) rc = be->allreduce_f64(be->ctx, w, 2, PERF_COMBINE_SUM);
  if (rc != 0) return rc;
  double div = x->a->average == 1 ? (double)be->nranks : 1.0;
  r[0].mean_us = v[0] / div, r[0].median_us = v[1] / div;
  r[1].mean_us = v[2] / div, r[1].median_us = v[3] / div;
  r[0].wrong = (size_t)w[0], r[1].wrong = (size_t)w[1];
  x->wrong_total += r[0].wrong + r[1].wrong;
  return 0;
}

static int perf_fail(perf_ctx_t* x, int rc, size_t size, qcclDataType_t t, qcclRedOp_t op,
                     int in_place) {
  fprintf(stderr, "%s-perf: rank %d: %s %zu B %s %s %s failed: %s\n", x->be->name, x->be->rank,
          x->coll->name, size, perf_type_name(t), perf_op_name(op),
          in_place ? "in-place" : "out-of-place", x->be->error(x->be->ctx, rc));
  return PERF_EXIT_LIBRARY;
}

/* One size: out of place, in place, combine, print. */
static int perf_size(perf_ctx_t* x, size_t bytes, qcclDataType_t t, qcclRedOp_t op,
                     const char* opname) {
  perf_backend_t* be = x->be;
  size_t ts = perf_type_size(t);
  int root = x->coll->has_root ? x->a->root : -1;
  perf_counts_t c;
  x->coll->counts(bytes / ts, be->nranks, be->rank, x->a->root, &c);
  size_t maxcount = c.sendcount > c.recvcount ? c.sendcount : c.recvcount;
  perf_result_t r[2];
  memset(r, 0, sizeof r);
  if (x->a->timeout_s > 0) alarm((unsigned)x->a->timeout_s);
  for (int ip = 0; ip < 2; ip++) {
    if (ip && !x->coll->has_inplace) continue;
    char* send = ip ? x->recvbuf + c.send_inplace_off * (size_t)be->rank * ts : x->sendbuf;
    char* recv = ip ? x->recvbuf + c.recv_inplace_off * (size_t)be->rank * ts : x->recvbuf;
    perf_fill(send, c.sendcount, t, op, x->a->seed, be->rank, 0);
    int rc = perf_time(x, send, recv, &c, t, op, &r[ip]);
    if (rc == 0 && x->a->check)
      rc = perf_verify(x, send, recv, &c, maxcount, t, op, ip, maxcount * ts, &r[ip]);
    if (rc != 0) return perf_fail(x, rc, maxcount * ts, t, op, ip);
    r[ip].valid = 1;
  }
  int rc = perf_combine(x, r);
  if (rc != 0) return perf_fail(x, rc, maxcount * ts, t, op, 0);
  alarm(0);
  if (be->rank == 0) perf_print_row(x, maxcount * ts, maxcount, t, opname, root, r);
  return 0;
}

static int perf_sweep(perf_ctx_t* x, qcclDataType_t t, qcclRedOp_t op, const char* opname) {
  const perf_args_t* a = x->a;
  for (size_t s = a->min_bytes; s <= a->max_bytes;) {
    int rc = perf_size(x, s, t, op, opname);
    if (rc != 0) return rc;
    size_t next = a->step_factor > 1 ? s * a->step_factor : s + a->step_bytes;
    if (next <= s) break; /* a step of 0 bytes, or overflow */
    s = next;
  }
  return 0;
}

/* Largest send and receive buffers over the types of the sweep. */
static void perf_buffer_bytes(const perf_coll_t* coll, const perf_args_t* a,
                              const perf_backend_t* be, size_t* send, size_t* recv) {
  *send = *recv = PERF_ALIGN;
  for (int i = 0; i < a->ntypes; i++) {
    size_t ts = perf_type_size(a->types[i]);
    perf_counts_t c;
    coll->counts(a->max_bytes / ts, be->nranks, be->rank, a->root, &c);
    size_t sb = c.sendcount * ts, rb = (c.sendcount > c.recvcount ? c.sendcount : c.recvcount) * ts;
    if (sb > *send) *send = sb;
    if (rb > *recv) *recv = rb;
  }
  *send = (*send + PERF_ALIGN - 1) / PERF_ALIGN * PERF_ALIGN;
  *recv = (*recv + PERF_ALIGN - 1) / PERF_ALIGN * PERF_ALIGN;
}

static int perf_loop_types(perf_ctx_t* x) {
  const perf_args_t* a = x->a;
  for (int ti = 0; ti < a->ntypes; ti++) {
    qcclDataType_t t = a->types[ti];
    int nops = x->coll->has_op ? a->nops : 1;
    for (int oi = 0; oi < nops; oi++) {
      qcclRedOp_t op = x->coll->has_op ? a->ops[oi] : qcclSum;
      const char* opname = x->coll->has_op ? perf_op_name(op) : "none";
      if (op == qcclAvg && !perf_type_is_float(t)) continue; /* avg: floating types only */
      if (!x->be->supports(x->be->ctx, x->coll->id, t, op)) {
        if (x->be->rank == 0)
          printf("# skipped: %s %s %s is not offered by %s\n", x->coll->name, perf_type_name(t),
                 opname, x->be->name);
        continue;
      }
      int rc = perf_sweep(x, t, op, opname);
      if (rc != 0) return rc;
    }
  }
  return 0;
}

static void perf_free_buffers(perf_backend_t* be, int reg, perf_ctx_t* x) {
  if (reg) {
    if (x->send_base) be->mem_free(be->ctx, x->send_base);
    if (x->recv_base) be->mem_free(be->ctx, x->recv_base);
  } else {
    free(x->send_base), free(x->recv_base);
  }
  free(x->times);
}

int perf_run(const perf_coll_t* coll, const perf_args_t* a, perf_backend_t* be) {
  perf_ctx_t x;
  memset(&x, 0, sizeof x);
  x.coll = coll, x.a = a, x.be = be;
  x.run = be->runs[coll->id];
  if (x.run == NULL) {
    if (be->rank == 0) printf("# skipped: %s is not offered by %s\n", coll->name, be->name);
    return PERF_EXIT_SKIP;
  }
  if (coll->has_root && a->root >= be->nranks) {
    if (be->rank == 0) fprintf(stderr, "-r %d: there are %d ranks\n", a->root, be->nranks);
    return PERF_EXIT_USAGE;
  }
  size_t sb, rb;
  perf_buffer_bytes(coll, a, be, &sb, &rb);
  int reg = a->registered && be->mem_alloc != NULL;
  if (a->registered && !reg && be->rank == 0)
    printf("# -R 1: %s has no allocator of its own; plain buffers\n", be->name);
  /* -O: a page more, the buffers that far into it */
  size_t pad = a->offset > 0 ? PERF_ALIGN : 0;
  x.send_base = reg ? be->mem_alloc(be->ctx, sb + pad) : aligned_alloc(PERF_ALIGN, sb + pad);
  x.recv_base = reg ? be->mem_alloc(be->ctx, rb + pad) : aligned_alloc(PERF_ALIGN, rb + pad);
  x.sendbuf = x.send_base ? x.send_base + a->offset : NULL;
  x.recvbuf = x.recv_base ? x.recv_base + a->offset : NULL;
  x.times = calloc((size_t)a->iters, sizeof(double));
  if (!x.sendbuf || !x.recvbuf || !x.times) {
    fprintf(stderr, "%s-perf: rank %d: out of memory (%zu + %zu bytes)\n", be->name, be->rank, sb,
            rb);
    perf_free_buffers(be, reg, &x);
    return PERF_EXIT_LIBRARY;
  }
  memset(x.sendbuf, 0, sb); /* fault the pages in before any timing */
  memset(x.recvbuf, 0, rb);
  if (a->timeout_s > 0) signal(SIGALRM, perf_on_alarm);
  if (be->rank == 0 && a->json_path) {
    x.json = fopen(a->json_path, "w");
    if (x.json == NULL) perror(a->json_path);
  }
  if (be->rank == 0 && !a->quiet_header) perf_print_header(&x);
  if (!a->quiet_header) perf_print_hosts(&x);
  if (be->rank == 0) perf_print_table_head();
  if (x.json)
    fprintf(x.json,
            "{\"tool\": \"%s-perf\", \"backend\": \"%s\", \"version\": \"%s\", "
            "\"collective\": \"%s\", \"nranks\": %d, \"iters\": %d, \"warmup\": %d, "
            "\"check\": %d, \"average\": %d, \"seed\": %llu, \"bus_factor\": %.6f,\n  \"rows\": [",
            be->name, be->name, be->version, coll->name, be->nranks, a->iters, a->warmup,
            a->check ? 1 : 0, a->average, (unsigned long long)a->seed,
            coll->bus_factor(be->nranks));
  int rc = perf_loop_types(&x);
  double avg_bw = x.bw_count ? x.bw_sum / x.bw_count : 0.0;
  if (be->rank == 0 && rc == 0) {
    printf("# Out of bounds values : %zu %s\n", x.wrong_total, x.wrong_total ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n#\n", avg_bw);
  }
  if (x.json) {
    fprintf(x.json, "\n  ], \"wrong\": %zu, \"avg_busbw\": %.6f, \"ok\": %s}\n", x.wrong_total,
            avg_bw, rc == 0 && x.wrong_total == 0 ? "true" : "false");
    fclose(x.json);
  }
  perf_free_buffers(be, reg, &x);
  if (rc != 0) return rc;
  return x.wrong_total || x.local_wrong ? PERF_EXIT_WRONG : PERF_EXIT_OK;
}
