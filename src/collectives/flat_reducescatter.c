/*
 * flat_reducescatter.c - ReduceScatter over point-to-point, for
 * communicators that span hosts, and the rail stage of the two-level
 * ReduceScatter.
 *
 * Ring: the W blocks of sendbuff are copied (widened to f32 for the narrow
 * floats) into scratch; in step s rank r sends block r-s-1 to r+1 and
 * reduces block r-s-2 received from r-1 into its copy, so after W-1 steps
 * it holds block r reduced over all ranks. Each rank sends (W-1)/W of the
 * buffer, the least a reduce-scatter can.
 *
 * Narrow floats (f16, bf16, fp8) accumulate in f32 and are rounded once,
 * into recvbuff; the partial sums travel as f32, but the first step sends
 * a block nobody has added to yet, which is exact in its own type: it
 * travels as it is and is widened by its receiver (the same bits as
 * before, half the bytes of that step for bf16; between two hosts, the
 * only step, so a bf16 reduce-scatter puts as many bytes on the wire as
 * its input has, not twice as many).
 *
 * Plan: W-1 exchanges, each posted then stepped until done; the count may
 * change from start to start (plan_restart).
 */
#include "collectives/flat.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"

typedef struct {
  p2p_leaf_t l;
  /* the call's */
  char *work, *tmp, *wide; /* wide: a received narrow block in f32 */
  int s;                   /* the ring step */
  p2p_xchg_t x;
} frs_plan_t;

enum { FRS_START, FRS_POST, FRS_WAIT };

static qcclResult_t frs_progress(plan_t* p) {
  frs_plan_t* t = (frs_plan_t*)p;
  qcclComm_t comm = p->comm;
  const coll_args_t* a = &p->a;
  int w = comm->nranks, r = comm->rank;
  int next = (r + 1) % w, prev = (r + w - 1) % w;
  qcclDataType_t dt = a->datatype, wt = reduce_work_type(dt);
  size_t es = dtype_size(dt), wes = dtype_size(wt), n = a->count;
  size_t block = n * wes;
  for (;;) {
    switch (p->phase) {
      case FRS_START:
        /* w blocks, the received one, and for narrow floats its f32 copy */
        QCCL_CHECK(
            comm_scratch(comm, 0, block * (size_t)(w + 1 + (wt != dt)) + 1, (void**)&t->work));
        t->tmp = t->work + block * (size_t)w;
        t->wide = t->tmp + block;
        if (wt == dt)
          copy_data(t->work, a->sendbuff, n * es * (size_t)w);
        else
          convert_to_f32((float*)t->work, a->sendbuff, n * (size_t)w, dt);
        t->s = 0;
        p->phase = FRS_POST;
        PLAN_FALLTHROUGH;
      case FRS_POST:
        if (t->s == w - 1) {
          char* mine = t->work + (size_t)r * block;
          if (a->op == qcclAvg) {
            const void* own[1] = {mine};
            reduce_kernel(mine, own, 1, n, wt, qcclAvg, w);
          }
          if (wt == dt)
            copy_data(a->recvbuff, mine, n * es);
          else
            convert_from_f32(a->recvbuff, (const float*)mine, n, dt);
          return qcclSuccess;
        }
        if (t->s == 0 && wt != dt) /* raw input: exact in its own type */
          p2p_xchg_start(&t->x, comm, next,
                         (const char*)a->sendbuff + (size_t)((r - 1 + w) % w) * n * es, n * es,
                         prev, t->tmp, n * es);
        else
          p2p_xchg_start(&t->x, comm, next, t->work + (size_t)((r - t->s - 1 + 2 * w) % w) * block,
                         block, prev, t->tmp, block);
        p->phase = FRS_WAIT;
        PLAN_FALLTHROUGH;
      case FRS_WAIT: {
        PLAN_TEST(p, p2p_leaf_step(&t->l, &t->x.b));
        char* dst = t->work + (size_t)((r - t->s - 2 + 2 * w) % w) * block;
        const void* srcs[2] = {dst, t->tmp};
        if (t->s == 0 && wt != dt) {
          convert_to_f32((float*)t->wide, t->tmp, n, dt);
          srcs[1] = t->wide;
        }
        reduce_kernel(dst, srcs, 2, n, wt, a->op == qcclAvg ? qcclSum : a->op, 0);
        t->s++;
        p->phase = FRS_POST;
        break;
      }
      default:
        return QCCL_ERR(qcclInternalError, "ring reducescatter: phase %d", p->phase);
    }
  }
}

static const plan_ops_t frs_ops = {.name = "ring reducescatter",
                                   .progress = frs_progress,
                                   .spin = p2p_leaf_spin,
                                   .check = p2p_leaf_check,
                                   .cancel = p2p_leaf_cancel,
                                   .remote = p2p_leaf_remote};

qcclResult_t flat_reducescatter_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  return plan_alloc(sizeof(frs_plan_t), &frs_ops, comm, a, out);
}
