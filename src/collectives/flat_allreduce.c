/*
 * flat_allreduce.c - AllReduce and Reduce over point-to-point, for
 * communicators that span hosts (any placement, nodes of any size), and
 * the rail stage of the two-level AllReduce.
 *
 * Ring algorithm: the buffer is cut into W parts. Reduce-scatter: in step
 * s, rank r sends part r-s to r+1 and receives part r-s-1 from r-1, which
 * it reduces into its copy; after W-1 steps rank r holds part r+1 reduced
 * over all ranks. All-gather: W-1 more steps pass the reduced parts
 * around. Each rank sends and receives 2(W-1)/W of the buffer: the
 * bandwidth-optimal amount. Narrow floats (f16, bf16, fp8) accumulate as
 * f32 and are rounded once, as on one host: their partial sums travel as
 * f32, but what is exact in the data's own type travels in it (the raw
 * part of the first step, widened by its receiver; the reduced parts of
 * the all-gather, rounded once by their owner before they are passed on,
 * which gives every rank the bits it would get rounding them itself), so
 * a bf16 AllReduce between two hosts sends as many bytes as NCCL's, not
 * twice as many. Avg divides the reduced part by W before it is passed
 * on, so every rank gets the same bits. Reduce runs the same ring into
 * scratch on non-root ranks.
 *
 * Plan: 2(W-1) exchanges, each posted then stepped until done; the count
 * may change from start to start (plan_restart), so everything that
 * depends on it is worked out as the call starts.
 */
#include "collectives/flat.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"

typedef struct {
  p2p_leaf_t l;
  int reduce; /* Reduce: non-root ranks ring into scratch */
  /* the call's */
  char *work, *tmp, *wide, *out; /* wide: a received narrow part in f32 */
  int s;                         /* the ring step */
  p2p_xchg_t x;
} ring_plan_t;

enum { RING_START, RING_RS_POST, RING_RS_WAIT, RING_AG_POST, RING_AG_WAIT };

static qcclResult_t ring_progress(plan_t* p) {
  ring_plan_t* t = (ring_plan_t*)p;
  qcclComm_t c = p->comm;
  const coll_args_t* a = &p->a;
  int w = c->nranks, r = c->rank;
  int next = (r + 1) % w, prev = (r + w - 1) % w;
  qcclDataType_t dt = a->datatype, wt = reduce_work_type(dt);
  size_t es = dtype_size(dt), wes = dtype_size(wt), count = a->count;
  size_t slo, shi, rlo, rhi;
  for (;;) {
    switch (p->phase) {
      case RING_START: {
        t->out = a->recvbuff;
        if (t->reduce && c->rank != a->root)
          QCCL_CHECK(comm_scratch(c, 1, count * es, (void**)&t->out));
        size_t maxpart = (count + (size_t)w - 1) / (size_t)w;
        size_t workbytes = wt == dt ? 0 : count * wes;
        char* scratch;
        size_t widebytes = wt == dt ? 0 : maxpart * wes;
        QCCL_CHECK(comm_scratch(c, 0, workbytes + maxpart * wes + widebytes + 1, (void**)&scratch));
        t->work = wt == dt ? t->out : scratch;
        t->tmp = scratch + workbytes;
        t->wide = t->tmp + maxpart * wes;
        if (wt == dt)
          coll_copy(t->out, a->sendbuff, count * es);
        else
          convert_to_f32((float*)t->work, a->sendbuff, count, dt);
        t->s = 0;
        p->phase = RING_RS_POST;
        break;
      }
      case RING_RS_POST:
        if (t->s == w - 1) {
          if (a->op == qcclAvg) {
            coll_part(count, w, (r + 1) % w, &rlo, &rhi);
            const void* own[1] = {t->work + rlo * wes};
            reduce_kernel(t->work + rlo * wes, own, 1, rhi - rlo, wt, qcclAvg, w);
          }
          if (wt != dt) { /* the part this rank owns, rounded once: passed on as it is */
            coll_part(count, w, (r + 1) % w, &rlo, &rhi);
            convert_from_f32(t->out + rlo * es, (const float*)t->work + rlo, rhi - rlo, dt);
          }
          t->s = 0;
          p->phase = RING_AG_POST;
          break;
        }
        coll_part(count, w, (r - t->s + w) % w, &slo, &shi);
        coll_part(count, w, (r - t->s - 1 + 2 * w) % w, &rlo, &rhi);
        if (t->s == 0 && wt != dt) /* raw input: exact in its own type */
          p2p_xchg_start(&t->x, c, next, (const char*)a->sendbuff + slo * es, (shi - slo) * es,
                         prev, t->tmp, (rhi - rlo) * es);
        else
          p2p_xchg_start(&t->x, c, next, t->work + slo * wes, (shi - slo) * wes, prev, t->tmp,
                         (rhi - rlo) * wes);
        p->phase = RING_RS_WAIT;
        PLAN_FALLTHROUGH;
      case RING_RS_WAIT: {
        PLAN_TEST(p, p2p_leaf_step(&t->l, &t->x.b));
        coll_part(count, w, (r - t->s - 1 + 2 * w) % w, &rlo, &rhi);
        const void* srcs[2] = {t->work + rlo * wes, t->tmp};
        if (t->s == 0 && wt != dt) {
          convert_to_f32((float*)t->wide, t->tmp, rhi - rlo, dt);
          srcs[1] = t->wide;
        }
        reduce_kernel(t->work + rlo * wes, srcs, 2, rhi - rlo, wt,
                      a->op == qcclAvg ? qcclSum : a->op, 0);
        t->s++;
        p->phase = RING_RS_POST;
        break;
      }
      case RING_AG_POST:
        if (t->s == w - 1) return qcclSuccess;
        coll_part(count, w, (r + 1 - t->s + w) % w, &slo, &shi);
        coll_part(count, w, (r - t->s + w) % w, &rlo, &rhi);
        /* narrow floats: the rounded parts, in out (work is out otherwise) */
        {
          char* ag = wt == dt ? t->work : t->out;
          p2p_xchg_start(&t->x, c, next, ag + slo * es, (shi - slo) * es, prev, ag + rlo * es,
                         (rhi - rlo) * es);
        }
        p->phase = RING_AG_WAIT;
        PLAN_FALLTHROUGH;
      case RING_AG_WAIT:
        PLAN_TEST(p, p2p_leaf_step(&t->l, &t->x.b));
        t->s++;
        p->phase = RING_AG_POST;
        break;
      default:
        return QCCL_ERR(qcclInternalError, "ring allreduce: phase %d", p->phase);
    }
  }
}

static const plan_ops_t ring_ops = {.name = "ring allreduce",
                                    .progress = ring_progress,
                                    .spin = p2p_leaf_spin,
                                    .check = p2p_leaf_check,
                                    .cancel = p2p_leaf_cancel,
                                    .remote = p2p_leaf_remote};

qcclResult_t flat_allreduce_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  return plan_alloc(sizeof(ring_plan_t), &ring_ops, comm, a, out);
}

qcclResult_t flat_reduce_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  QCCL_CHECK(plan_alloc(sizeof(ring_plan_t), &ring_ops, comm, a, out));
  ((ring_plan_t*)*out)->reduce = 1;
  return qcclSuccess;
}
