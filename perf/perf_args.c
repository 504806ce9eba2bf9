/*
 * perf_args.c - the command line of qccl-perf and its peers: nccl-tests'
 * flags with nccl-tests' defaults, sizes with K/M/G suffixes (powers of
 * 1024), and the -q quantization format of the quantized collectives.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

#define PERF_DEFAULT_SEED 0x5eedULL

void perf_args_defaults(perf_args_t* a) {
  memset(a, 0, sizeof *a);
  a->min_bytes = 32u << 20; /* nccl-tests: -b 32M -e 32M -i 1M -f 1 */
  a->max_bytes = 32u << 20;
  a->step_bytes = 1u << 20;
  a->step_factor = 1;
  a->iters = 20;
  a->warmup = 5;
  a->check = 1;
  a->average = 1;
  a->blocking = 1;
  a->root = 0;
  a->types[0] = qcclFloat32;
  a->ntypes = 1;
  a->ops[0] = qcclSum;
  a->nops = 1;
  a->seed = PERF_DEFAULT_SEED;
}

int perf_parse_size(const char* s, size_t* bytes) {
  char* end = NULL;
  if (s == NULL || *s == '\0' || *s == '-') return -1;
  unsigned long long v = strtoull(s, &end, 0);
  unsigned long long mul = 1;
  switch (*end) {
    case '\0':
      break;
    case 'k':
    case 'K':
      mul = 1ull << 10;
      end++;
      break;
    case 'm':
    case 'M':
      mul = 1ull << 20;
      end++;
      break;
    case 'g':
    case 'G':
      mul = 1ull << 30;
      end++;
      break;
    default:
      return -1;
  }
  if (*end == 'B' || *end == 'b') end++;
  if (*end != '\0') return -1;
  if (v > (unsigned long long)SIZE_MAX / mul) return -1;
  *bytes = (size_t)(v * mul);
  return 0;
}

int perf_parse_quant(const char* s, perf_quant_opt_t* q) {
  perf_quant_opt_t r = {1, 8, 256, 0, 0, 0};
  char buf[128];
  if (s == NULL || strlen(s) >= sizeof buf) return -1;
  strcpy(buf, s);
  char* save = NULL;
  char* tok = strtok_r(buf, ":", &save);
  if (tok == NULL) return -1;
  if (strcmp(tok, "int8") == 0)
    r.bits = 8;
  else if (strcmp(tok, "int4") == 0)
    r.bits = 4;
  else
    return -1;
  while ((tok = strtok_r(NULL, ":", &save)) != NULL) {
    if (tok[0] == 'b' && tok[1] >= '0' && tok[1] <= '9') {
      char* end = NULL;
      long b = strtol(tok + 1, &end, 10);
      if (*end != '\0' || b < 32 || b > 4096 || (b & (b - 1)) != 0) return -1;
      r.block = (int)b;
    } else if (strcmp(tok, "asym") == 0) {
      r.asym = 1;
    } else if (strcmp(tok, "sym") == 0) {
      r.asym = 0;
    } else if (strcmp(tok, "rot") == 0) {
      r.rotate = 1;
    } else if (strcmp(tok, "sr") == 0) {
      r.stochastic = 1;
    } else {
      return -1;
    }
  }
  *q = r;
  return 0;
}

void perf_quant_name(const perf_quant_opt_t* q, char* buf, size_t len) {
  snprintf(buf, len, "int%d:b%d%s%s%s", q->bits, q->block, q->asym ? ":asym" : "",
           q->rotate ? ":rot" : "", q->stochastic ? ":sr" : "");
}

void perf_usage(const char* prog, int backend_is_qccl) {
  fprintf(stderr,
          "usage: %s <collective> [flags]\n"
          "  collectives: allreduce allgather reducescatter alltoall broadcast reduce gather\n"
          "               scatter sendrecv%s\n"
          "  -b, --minbytes SIZE     smallest size (default 32M; 8, 64K, 256M, 1G)\n"
          "  -e, --maxbytes SIZE     largest size (default 32M)\n"
          "  -f, --stepfactor N      multiply the size by N per step\n"
          "  -i, --stepbytes SIZE    else add SIZE per step (default 1M)\n"
          "  -n, --iters N           timed iterations per size (default 20)\n"
          "  -w, --warmup_iters N    warm-up iterations per size (default 5)\n"
          "  -c, --check 0|1         check every result once per size (default 1)\n"
          "  -o, --op OP             sum prod max min avg all (default sum)\n"
          "  -d, --datatype T        int8 uint8 int32 uint32 int64 uint64 half float double\n"
          "                          bfloat16 f8e4m3 f8e5m2 all (default float)\n"
          "  -r, --root R            root of rooted collectives (default 0)\n"
          "  -a, --average 0|1|2|3   time over ranks: rank 0, mean, min, max (default 1)\n"
          "  -z, --blocking 0|1      accepted; calls with a NULL stream always block\n"
          "  -T, --timeout S         give up after S s per size (0: never)\n"
          "  -J, --output_file F     write every row as JSON to F\n"
          "  -R, --register 0|1      buffers from the library's allocator (qcclMemAlloc:\n"
          "                          peers of a host read them in place; default 0)\n"
          "  -O, --offset B          buffers start B bytes past a page boundary, 0-4095\n"
          "                          (default 0; glibc malloc's large blocks: 16)\n"
          "  -q, --quant FMT         int8|int4[:bBLOCK][:asym][:rot][:sr] (quantized runs)\n"
          "      --seed N            input seed (default 0x5eed)\n"
          "      --no-header         rows and footer only\n",
          prog,
          backend_is_qccl
              ? " quant\n               allgather_q reducescatter_q allreduce_q (-q; no -c check)"
              : "");
}

static int perf_parse_int(const char* s, long lo, long hi, int* out) {
  char* end = NULL;
  long v = strtol(s, &end, 0);
  if (end == s || *end != '\0' || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

static int perf_parse_types(const char* s, perf_args_t* a) {
  if (strcmp(s, "all") == 0) {
    a->ntypes = 0;
    for (int t = 0; t < qcclNumTypes; t++) a->types[a->ntypes++] = (qcclDataType_t)t;
    return 0;
  }
  a->ntypes = 1;
  return perf_type_parse(s, &a->types[0]);
}

static int perf_parse_ops(const char* s, perf_args_t* a) {
  if (strcmp(s, "all") == 0) {
    a->nops = 0;
    for (int o = 0; o < qcclNumOps; o++) a->ops[a->nops++] = (qcclRedOp_t)o;
    return 0;
  }
  a->nops = 1;
  return perf_op_parse(s, &a->ops[0]);
}

#define PERF_BAD(flag, val)                                                 \
  do {                                                                      \
    fprintf(stderr, "%s: bad value '%s' for %s\n", argv[0], (val), (flag)); \
    return PERF_EXIT_USAGE;                                                 \
  } while (0)

int perf_args_parse(int argc, char** argv, perf_args_t* a) {
  static const struct option longs[] = {{"minbytes", required_argument, 0, 'b'},
                                        {"maxbytes", required_argument, 0, 'e'},
                                        {"stepbytes", required_argument, 0, 'i'},
                                        {"stepfactor", required_argument, 0, 'f'},
                                        {"iters", required_argument, 0, 'n'},
                                        {"warmup_iters", required_argument, 0, 'w'},
                                        {"check", required_argument, 0, 'c'},
                                        {"op", required_argument, 0, 'o'},
                                        {"datatype", required_argument, 0, 'd'},
                                        {"root", required_argument, 0, 'r'},
                                        {"average", required_argument, 0, 'a'},
                                        {"blocking", required_argument, 0, 'z'},
                                        {"timeout", required_argument, 0, 'T'},
                                        {"output_file", required_argument, 0, 'J'},
                                        {"quant", required_argument, 0, 'q'},
                                        {"register", required_argument, 0, 'R'},
                                        {"offset", required_argument, 0, 'O'},
                                        {"seed", required_argument, 0, 'S'},
                                        {"no-header", no_argument, 0, 'H'},
                                        {"help", no_argument, 0, 'h'},
                                        {0, 0, 0, 0}};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "b:e:i:f:n:w:c:o:d:r:a:z:T:J:q:R:O:h", longs, NULL)) != -1) {
    switch (c) {
      case 'b':
        if (perf_parse_size(optarg, &a->min_bytes)) PERF_BAD("-b", optarg);
        break;
      case 'e':
        if (perf_parse_size(optarg, &a->max_bytes)) PERF_BAD("-e", optarg);
        break;
      case 'i':
        if (perf_parse_size(optarg, &a->step_bytes)) PERF_BAD("-i", optarg);
        a->step_factor = 1;
        break;
      case 'f': {
        int f;
        if (perf_parse_int(optarg, 1, 1 << 20, &f)) PERF_BAD("-f", optarg);
        a->step_factor = (size_t)f;
        break;
      }
      case 'n':
        if (perf_parse_int(optarg, 1, 1 << 30, &a->iters)) PERF_BAD("-n", optarg);
        break;
      case 'w':
        if (perf_parse_int(optarg, 0, 1 << 30, &a->warmup)) PERF_BAD("-w", optarg);
        break;
      case 'c':
        if (perf_parse_int(optarg, 0, 1 << 30, &a->check)) PERF_BAD("-c", optarg);
        break;
      case 'o':
        if (perf_parse_ops(optarg, a)) PERF_BAD("-o", optarg);
        break;
      case 'd':
        if (perf_parse_types(optarg, a)) PERF_BAD("-d", optarg);
        break;
      case 'r':
        if (perf_parse_int(optarg, 0, 1 << 24, &a->root)) PERF_BAD("-r", optarg);
        break;
      case 'a':
        if (perf_parse_int(optarg, 0, 3, &a->average)) PERF_BAD("-a", optarg);
        break;
      case 'z':
        if (perf_parse_int(optarg, 0, 1, &a->blocking)) PERF_BAD("-z", optarg);
        break;
      case 'T':
        if (perf_parse_int(optarg, 0, 1 << 24, &a->timeout_s)) PERF_BAD("-T", optarg);
        break;
      case 'J':
        a->json_path = optarg;
        break;
      case 'R':
        if (perf_parse_int(optarg, 0, 1, &a->registered)) PERF_BAD("-R", optarg);
        break;
      case 'O':
        if (perf_parse_int(optarg, 0, PERF_ALIGN - 1, &a->offset)) PERF_BAD("-O", optarg);
        break;
      case 'q':
        if (perf_parse_quant(optarg, &a->quant)) PERF_BAD("-q", optarg);
        break;
      case 'S': {
        char* end = NULL;
        a->seed = strtoull(optarg, &end, 0);
        if (end == optarg || *end != '\0') PERF_BAD("--seed", optarg);
        break;
      }
      case 'H':
        a->quiet_header = 1;
        break;
      case 'h':
        return PERF_EXIT_USAGE;
      default:
        return PERF_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
    return PERF_EXIT_USAGE;
  }
  if (a->min_bytes > a->max_bytes) {
    fprintf(stderr, "%s: -b %zu is larger than -e %zu\n", argv[0], a->min_bytes, a->max_bytes);
    return PERF_EXIT_USAGE;
  }
  return 0;
}
