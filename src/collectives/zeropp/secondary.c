/*
 * secondary.c - hpZ: secondary weight shards and the node-local gather.
 *
 * A forward gather (qcclAllGatherQSecondary) leaves on each rank the slice
 * of the gathered tensor (T = W x sendcount elements) for its local index
 * l among the L ranks of its node: elements [l P, (l+1) P), P = ceil(T/L),
 * zero-padded past T. The shard is stored as
 *   [header: state, generation (16 bytes)] [P elements, or their chunk]
 * and the backward gather (qcclSecondaryAllGather) runs inside the node
 * only (the node's shared segment; no byte between nodes): first an
 * all-gather of the L headers, which every rank checks — if any shard is
 * empty or of another generation than the one asked for, every rank of the
 * node fails the call with the same message, before any data moves,
 * instead of some reading stale weights while others wait —, then an
 * all-gather of the L slices (P x element size bytes each, or
 * quant_chunk_bytes(P)), straight into recvbuff when they tile it. A
 * quantized shard is dequantized after and adds one rounding to the
 * forward gather's (the bounds add).
 *
 * Plan: the backward gather is a sequence (plan.h) of the node's two
 * all-gather plans with the check and the dequantization between, built
 * with the shard (its sizes are the shard's) and kept until it is
 * destroyed.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/coll.h"
#include "collectives/node.h"
#include "core/dtype.h"
#include "core/memcopy.h"
#include "core/log.h"
#include "collectives/engine.h"
#include "collectives/zeropp/zpp.h"

#define SEC_MAGIC 0x5345434fu          /* "SECO" */
#define SEC_FULL 0x66756c6c5f736563ull /* a filled shard */
#define SEC_EMPTY 0ull
#define SEC_HEADER 16

struct qcclSecondary {
  uint32_t magic;
  qcclComm_t comm;
  size_t sendcount;
  qcclDataType_t dt;
  int quant; /* stored quantized under sp */
  quant_params_t sp;
  size_t total;        /* W x sendcount */
  size_t part;         /* P */
  int nlocal, local;   /* L and l */
  size_t payload;      /* bytes of one record */
  char* rec;           /* this rank's record */
  struct plan* gather; /* the node gather's plan, made by the first */
};

typedef struct {
  uint64_t state;
  uint64_t gen;
} sec_header_t;

static qcclComm_t sec_node(qcclComm_t comm) {
  return comm->node ? comm->node : comm;
}

qcclResult_t qcclSecondaryCreate(qcclComm_t comm, size_t sendcount, qcclDataType_t datatype,
                                 const qcclQuantSpec_t* storage, qcclSecondary_t* secondary) {
  static const char fn[] = "qcclSecondaryCreate";
  err_clear();
  qcclResult_t r = check_comm_usable(fn, comm, NULL, NULL);
  if (r == qcclSuccess) r = zpp_check_type(fn, datatype);
  if (r == qcclSuccess)
    r = check_count(fn, "sendcount", sendcount, (size_t)comm->nranks, dtype_size(datatype),
                    QUANT_MAX_COUNT);
  quant_params_t sp;
  memset(&sp, 0, sizeof sp);
  if (r == qcclSuccess && storage != NULL) r = zpp_check_spec(fn, "storage", storage, &sp);
  if (r == qcclSuccess && secondary == NULL)
    r = QCCL_ERR(qcclInvalidArgument, "%s: secondary is NULL", fn);
  if (r != qcclSuccess) return zpp_fail(comm, r);
  qcclComm_t node = sec_node(comm);
  struct qcclSecondary* s = calloc(1, sizeof *s);
  if (!s) return zpp_fail(comm, QCCL_ERR(qcclSystemError, "%s: out of memory", fn));
  s->magic = SEC_MAGIC;
  s->comm = comm;
  s->sendcount = sendcount;
  s->dt = datatype;
  s->quant = storage != NULL;
  s->sp = sp;
  s->total = sendcount * (size_t)comm->nranks;
  s->nlocal = node->nranks;
  s->local = node->rank;
  s->part = (s->total + (size_t)s->nlocal - 1) / (size_t)s->nlocal;
  s->payload =
      SEC_HEADER + (s->quant ? quant_chunk_bytes(&sp, s->part) : s->part * dtype_size(datatype));
  s->rec = calloc(1, s->payload);
  if (!s->rec) {
    size_t bytes = s->payload;
    free(s);
    return zpp_fail(comm, QCCL_ERR(qcclSystemError, "%s: out of memory (%zu bytes)", fn, bytes));
  }
  QCCL_INFO(LOG_ZERO, "secondary shard: %zu of %zu elements (local %d of %d)%s", s->part, s->total,
            s->local, s->nlocal, s->quant ? ", quantized" : "");
  *secondary = s;
  return qcclSuccess;
}

qcclResult_t zpp_secondary_fill(struct qcclSecondary* s, const void* gathered,
                                unsigned long long gen) {
  size_t es = dtype_size(s->dt);
  size_t lo = (size_t)s->local * s->part;
  size_t m = lo < s->total ? s->total - lo : 0;
  if (m > s->part) m = s->part;
  sec_header_t h = {SEC_EMPTY, 0};
  memcpy(s->rec, &h, sizeof h); /* empty until the slice is in */
  char* data = s->rec + SEC_HEADER;
  if (!s->quant) {
    copy_data(data, (const char*)gathered + lo * es, m * es);
    memset(data + m * es, 0, (s->part - m) * es);
  } else {
    char* tmp;
    QCCL_CHECK(zpp_scratch(s->comm, 3, s->part * es, (void**)&tmp));
    copy_data(tmp, (const char*)gathered + lo * es, m * es);
    memset(tmp + m * es, 0, (s->part - m) * es);
    quant_isa_t isa;
    QCCL_CHECK(zpp_isa(&isa));
    quant_params_t p = s->sp;
    p.rank = (uint32_t)s->comm->rank;
    p.index0 = lo;
    QCCL_CHECK(quant_quantize(isa, &p, tmp, s->dt, s->part, data));
  }
  h.state = SEC_FULL;
  h.gen = gen;
  memcpy(s->rec, &h, sizeof h);
  return qcclSuccess;
}

static qcclResult_t sec_check(const char* fn, qcclSecondary_t s) {
  if (s == NULL) return QCCL_ERR(qcclInvalidArgument, "%s: secondary is NULL", fn);
  if (s->magic != SEC_MAGIC)
    return QCCL_ERR(qcclInvalidArgument, "%s: secondary is not a live secondary shard", fn);
  return qcclSuccess;
}

qcclResult_t qcclAllGatherQSecondary(const void* sendbuff, void* recvbuff, size_t sendcount,
                                     qcclDataType_t datatype, const qcclQuantSpec_t* spec,
                                     qcclSecondary_t secondary, unsigned long long generation,
                                     qcclComm_t comm, qcclStream_t stream) {
  static const char fn[] = "qcclAllGatherQSecondary";
  err_clear();
  zpp_op_t op;
  qcclResult_t r =
      zpp_agq_check(fn, sendbuff, recvbuff, sendcount, datatype, spec, 1, comm, stream, &op);
  if (r == qcclSuccess) r = sec_check(fn, secondary);
  if (r == qcclSuccess && secondary->comm != comm)
    r = QCCL_ERR(qcclInvalidArgument, "%s: secondary was made for another communicator", fn);
  if (r == qcclSuccess && (secondary->sendcount != sendcount || secondary->dt != datatype))
    r = QCCL_ERR(qcclInvalidArgument,
                 "%s: sendcount=%zu / datatype=%s differ from the secondary shard's (%zu / %s)", fn,
                 sendcount, dtype_name(datatype), secondary->sendcount, dtype_name(secondary->dt));
  if (r != qcclSuccess) return zpp_fail(comm, r);
  op.sec = secondary;
  op.gen = generation;
  if (sendcount == 0) {
    /* nothing to gather, but the (empty) shard is current */
    sec_header_t h = {SEC_FULL, generation};
    memcpy(secondary->rec, &h, sizeof h);
  }
  return zpp_submit(comm, &op);
}

/* A node gather's arguments, kept until it runs. */
typedef struct {
  struct qcclSecondary* sec;
  void* recvbuff;
  unsigned long long generation;
} sec_gather_t;

static qcclResult_t sec_gather_run(void* argp, const engine_turn_t* turns);

qcclResult_t qcclSecondaryAllGather(qcclSecondary_t secondary, void* recvbuff,
                                    unsigned long long generation, qcclStream_t stream) {
  static const char fn[] = "qcclSecondaryAllGather";
  err_clear();
  QCCL_CHECK(sec_check(fn, secondary));
  struct qcclSecondary* s = secondary;
  qcclComm_t comm = s->comm;
  stream_t* st = NULL;
  qcclResult_t r = check_comm_usable(fn, comm, stream, &st);
  if (r == qcclSuccess && s->total > 0 && recvbuff == NULL)
    r = QCCL_ERR(qcclInvalidArgument, "%s: recvbuff is NULL with %zu elements to gather", fn,
                 s->total);
  if (r != qcclSuccess) return zpp_fail(comm, r);
  sec_gather_t one = {s, recvbuff, generation}, *arg = &one;
  if (st != NULL) {
    if ((arg = malloc(sizeof *arg)) == NULL)
      return zpp_fail(comm, QCCL_ERR(qcclSystemError, "%s: out of memory", fn));
    *arg = one;
  }
  const int ncoll = 0; /* not a plain collective: it runs alone */
  return engine_submit(&comm, &ncoll, 1, 1, st, sec_gather_run, arg, free);
}

/* ---- the node gather's plan ---- */

typedef struct {
  plan_seq_t s;
  struct qcclSecondary* sec;
  plan_t* hdr_gather;  /* the L headers */
  plan_t* data_gather; /* the L slices */
  quant_isa_t isa;
  /* the call's */
  void* recvbuff;
  unsigned long long generation;
  sec_header_t* hdr;
  char* all; /* the slices, when they do not tile recvbuff */
} sec_plan_t;

enum { SEC_START, SEC_HEADERS, SEC_DATA };

static qcclResult_t sec_progress(plan_t* p) {
  static const char fn[] = "qcclSecondaryAllGather";
  sec_plan_t* t = (sec_plan_t*)p;
  struct qcclSecondary* s = t->sec;
  qcclComm_t comm = s->comm;
  size_t es = dtype_size(s->dt), L = (size_t)s->nlocal;
  size_t data = s->payload - SEC_HEADER;
  int tiles = !s->quant && s->part * L == s->total;
  switch (p->phase) {
    case SEC_START:
      if (s->total == 0) {
        /* nothing to move: only the local shard can be checked */
        sec_header_t h;
        memcpy(&h, s->rec, sizeof h);
        if (h.state != SEC_FULL || h.gen != t->generation)
          return QCCL_ERR(qcclInvalidUsage, "%s: the secondary shard of rank %d is stale or empty",
                          fn, comm->rank);
        return qcclSuccess;
      }
      /* 1. the headers: every rank checks every shard of the node, so all
       * fail alike, before any data moves */
      QCCL_CHECK(zpp_scratch(comm, 1, L * sizeof *t->hdr, (void**)&t->hdr));
      memcpy(&t->hdr[s->local], s->rec, sizeof *t->hdr);
      plan_start(t->hdr_gather, &t->hdr[s->local], t->hdr);
      p->phase = SEC_HEADERS;
      PLAN_FALLTHROUGH;
    case SEC_HEADERS: {
      PLAN_TEST(p, plan_seq_step(&t->s, t->hdr_gather));
      int mynode = comm->rankmap->node_of[comm->rank];
      for (size_t k = 0; k < L; k++) {
        int who = topo_rankmap_rank_at(comm->rankmap, mynode, (int)k);
        if (t->hdr[k].state != SEC_FULL)
          return QCCL_ERR(qcclInvalidUsage,
                          "%s: rank %d holds no secondary shard (never filled, or invalidated): "
                          "run the forward qcclAllGatherQSecondary of generation %llu first",
                          fn, who, t->generation);
        if (t->hdr[k].gen != t->generation)
          return QCCL_ERR(qcclInvalidUsage,
                          "%s: the secondary shard of rank %d is stale: it holds generation %llu, "
                          "the call asks for %llu",
                          fn, who, (unsigned long long)t->hdr[k].gen, t->generation);
      }
      /* 2. the data: straight into recvbuff when the slices tile it */
      if (tiles) {
        char* mine = (char*)t->recvbuff + (size_t)s->local * data;
        copy_data(mine, s->rec + SEC_HEADER, data);
        plan_start(t->data_gather, mine, t->recvbuff);
      } else {
        QCCL_CHECK(zpp_scratch(comm, 4, L * data, (void**)&t->all));
        copy_data(t->all + (size_t)s->local * data, s->rec + SEC_HEADER, data);
        plan_start(t->data_gather, t->all + (size_t)s->local * data, t->all);
      }
      p->phase = SEC_DATA;
      PLAN_FALLTHROUGH;
    }
    case SEC_DATA: {
      PLAN_TEST(p, plan_seq_step(&t->s, t->data_gather));
      if (tiles) return qcclSuccess;
      char* tmp = NULL;
      for (size_t k = 0; k < L; k++) {
        size_t lo = k * s->part;
        size_t m = lo < s->total ? s->total - lo : 0;
        if (m > s->part) m = s->part;
        const char* src = t->all + k * data;
        char* out = (char*)t->recvbuff + lo * es;
        if (m == 0) continue;
        if (!s->quant) {
          copy_data(out, src, m * es);
        } else if (m == s->part) {
          /* streaming stores from the whole output's size, as the plain
           * gather and qwZ (allgather_q.c), not from each slice's */
          QCCL_CHECK(quant_dequantize_nt(t->isa, &s->sp, src, s->part, s->dt, out,
                                         L * s->part * es >= COPY_STREAM_MIN_TOTAL));
        } else {
          if (tmp == NULL) QCCL_CHECK(zpp_scratch(comm, 3, s->part * es, (void**)&tmp));
          QCCL_CHECK(quant_dequantize(t->isa, &s->sp, src, s->part, s->dt, tmp));
          copy_data(out, tmp, m * es);
        }
      }
      return qcclSuccess;
    }
  }
  return QCCL_ERR(qcclInternalError, "%s: phase %d", fn, p->phase);
}

static void sec_plan_destroy(plan_t* p) {
  sec_plan_t* t = (sec_plan_t*)p;
  plan_free(t->hdr_gather);
  plan_free(t->data_gather);
}

static const plan_ops_t sec_plan_ops = {.name = "hpZ node gather",
                                        .progress = sec_progress,
                                        .spin = plan_seq_spin,
                                        .check = plan_seq_check,
                                        .cancel = plan_seq_cancel,
                                        .remote = plan_seq_remote,
                                        .destroy = sec_plan_destroy};

/* The plan of s's node gathers, on its node communicator. */
static qcclResult_t sec_plan(struct qcclSecondary* s, plan_t** out) {
  qcclComm_t node = sec_node(s->comm);
  QCCL_CHECK(plan_alloc(sizeof(sec_plan_t), &sec_plan_ops, node, NULL, out));
  sec_plan_t* t = (sec_plan_t*)*out;
  t->sec = s;
  coll_args_t h = {COLL_ALLGATHER, NULL, NULL, sizeof(sec_header_t), qcclUint8, qcclSum, -1};
  coll_args_t d = {COLL_ALLGATHER, NULL, NULL, s->payload - SEC_HEADER, qcclUint8, qcclSum, -1};
  qcclResult_t r = s->quant ? zpp_isa(&t->isa) : qcclSuccess;
  if (r == qcclSuccess) r = node_allgather_plan(node, &h, &t->hdr_gather);
  if (r == qcclSuccess) r = node_allgather_plan(node, &d, &t->data_gather);
  if (r != qcclSuccess) plan_free(*out);
  return r;
}

/* The node gather itself, in the communicator's turn. */
static qcclResult_t sec_gather_run(void* argp, const engine_turn_t* turns) {
  (void)turns;
  const sec_gather_t* g = argp;
  struct qcclSecondary* s = g->sec;
  qcclComm_t comm = s->comm;
  coll_stats_enter(comm, qcclStatNodeAllGather, 1);
  qcclResult_t r = qcclSuccess;
  if (s->gather == NULL) r = sec_plan(s, &s->gather);
  if (r == qcclSuccess) {
    sec_plan_t* t = (sec_plan_t*)s->gather;
    t->recvbuff = g->recvbuff;
    t->generation = g->generation;
    plan_start(s->gather, NULL, NULL);
    r = plan_drive(s->gather);
  }
  coll_stats_leave(comm);
  return zpp_fail(comm, r);
}

qcclResult_t qcclSecondaryInvalidate(qcclSecondary_t secondary) {
  err_clear();
  QCCL_CHECK(sec_check("qcclSecondaryInvalidate", secondary));
  sec_header_t h = {SEC_EMPTY, 0};
  memcpy(secondary->rec, &h, sizeof h);
  return qcclSuccess;
}

qcclResult_t qcclSecondaryDestroy(qcclSecondary_t secondary) {
  err_clear();
  if (secondary == NULL) return qcclSuccess;
  QCCL_CHECK(sec_check("qcclSecondaryDestroy", secondary));
  secondary->magic = 0;
  plan_free(secondary->gather);
  free(secondary->rec);
  free(secondary);
  return qcclSuccess;
}
