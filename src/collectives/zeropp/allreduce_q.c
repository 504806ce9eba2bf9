/*
 * allreduce_q.c - the quantized all-reduce (qcclAllReduceQ), built from
 * the two ZeRO++ collectives: the count elements, zero-padded to W x rc
 * (rc = ceil(count / W)), are reduce-scattered by qgZ (intra hop, inter
 * hop, error feedback as configured), then the W reduced shards are
 * all-gathered by qwZ under the inter spec, so every rank ends with the
 * same bits. Bytes per rank across nodes: qgZ's (N-1) rc plus qwZ's
 * gather of rc, both at the inter width. The error is qgZ's bound plus the
 * gather's quantization bound of the reduced shard.
 *
 * Plan: a sequence of the two calls' plans (children of this one), with
 * the padding copied in before and the result copied out after.
 */
#include <string.h>

#include "core/dtype.h"
#include "core/log.h"
#include "collectives/zeropp/zpp.h"

typedef struct {
  zpp_plan_t z;
  size_t rc;   /* elements per rank's shard */
  int padded;  /* W does not divide the count */
  plan_t* rsq; /* qgZ of the (padded) input into the shard */
  plan_t* agq; /* qwZ of the shards under the inter spec */
  /* the call's */
  char *shard, *in;
} arq_plan_t;

enum { ARQ_START, ARQ_RSQ, ARQ_AGQ };

static qcclResult_t arq_progress(plan_t* p) {
  arq_plan_t* t = (arq_plan_t*)p;
  qcclComm_t comm = p->comm;
  const coll_args_t* a = &p->a;
  size_t w = (size_t)comm->nranks, es = dtype_size(a->datatype), rc = t->rc;
  switch (p->phase) {
    case ARQ_START:
      QCCL_CHECK(zpp_scratch(comm, 5, rc * es, (void**)&t->shard));
      if (t->padded) {
        /* padded with zeros to W x rc */
        QCCL_CHECK(zpp_scratch(comm, 4, w * rc * es, (void**)&t->in));
        copy_data(t->in, a->sendbuff, a->count * es);
        memset(t->in + a->count * es, 0, (w * rc - a->count) * es);
        plan_start(t->rsq, t->in, t->shard);
        plan_start(t->agq, t->shard, t->in);
      } else {
        /* a count that W divides needs no padding: sendbuff is the input as
         * it is (read before recvbuff is written, so in place works too) */
        plan_start(t->rsq, a->sendbuff, t->shard);
        plan_start(t->agq, t->shard, a->recvbuff);
      }
      ((zpp_plan_t*)t->rsq)->residual = t->z.residual;
      p->phase = ARQ_RSQ;
      PLAN_FALLTHROUGH;
    case ARQ_RSQ:
      PLAN_TEST(p, plan_seq_step(&t->z.s, t->rsq));
      p->phase = ARQ_AGQ;
      PLAN_FALLTHROUGH;
    case ARQ_AGQ:
      PLAN_TEST(p, plan_seq_step(&t->z.s, t->agq));
      if (t->padded) copy_data(a->recvbuff, t->in, a->count * es);
      return qcclSuccess;
  }
  return QCCL_ERR(qcclInternalError, "AllReduceQ: phase %d", p->phase);
}

static void arq_destroy(plan_t* p) {
  arq_plan_t* t = (arq_plan_t*)p;
  plan_free(t->rsq);
  plan_free(t->agq);
}

static const plan_ops_t arq_ops = {.name = "AllReduceQ",
                                   .progress = arq_progress,
                                   .spin = plan_seq_spin,
                                   .check = plan_seq_check,
                                   .cancel = plan_seq_cancel,
                                   .remote = plan_seq_remote,
                                   .destroy = arq_destroy,
                                   .same = zpp_plan_same};

qcclResult_t zpp_arq_plan(qcclComm_t comm, const coll_args_t* a, const void* ctx, plan_t** out) {
  const zpp_op_t* op = ctx;
  QCCL_CHECK(plan_alloc(sizeof(arq_plan_t), &arq_ops, comm, a, out));
  arq_plan_t* t = (arq_plan_t*)*out;
  zpp_plan_init(&t->z, op);
  size_t w = (size_t)comm->nranks;
  t->rc = (a->count + w - 1) / w;
  t->padded = w * t->rc != a->count;
  zpp_op_t rs = *op, ag = *op;
  rs.kind = ZPP_RSQ;
  rs.count = t->rc;
  ag.kind = ZPP_AGQ;
  ag.count = t->rc;
  ag.q1 = op->q2; /* the gather goes under the inter spec */
  ag.ef = 0;
  ag.sec = NULL;
  ag.plain = 0;
  coll_args_t ra = zpp_plan_args(&rs), ga = zpp_plan_args(&ag);
  qcclResult_t r = zpp_rsq_plan(comm, &ra, &rs, &t->rsq);
  if (r == qcclSuccess) r = zpp_agq_plan(comm, &ga, &ag, &t->agq);
  if (r != qcclSuccess) plan_free(*out);
  return r;
}

qcclResult_t qcclAllReduceQ(const void* sendbuff, void* recvbuff, size_t count,
                            qcclDataType_t datatype, qcclRedOp_t op,
                            const qcclReduceScatterQConfig_t* cfg, qcclComm_t comm,
                            qcclStream_t stream) {
  err_clear();
  zpp_op_t o;
  qcclResult_t r = zpp_rsq_check("qcclAllReduceQ", sendbuff, recvbuff, count, 0, datatype, op, cfg,
                                 comm, stream, &o);
  if (r != qcclSuccess) return zpp_fail(comm, r);
  o.kind = ZPP_ARQ;
  o.slot = qcclStatAllReduceQ;
  return zpp_submit(comm, &o);
}
