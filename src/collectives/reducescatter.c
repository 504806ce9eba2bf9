/*
 * reducescatter.c - ReduceScatter inside one node.
 *
 * Block j of sendbuff (recvcount elements) is reduced over all ranks into
 * rank j's recvbuff. Chunks hold W pieces of m elements, piece j from
 * block j: every rank stages the W-1 pieces that others reduce in its slot
 * (its own piece stays in sendbuff), then rank r reduces piece r over the W
 * ranks, in rank order, straight from the slots and its own sendbuff. Per
 * rank and per byte of sendbuff: (W-1)/W written into the segment and read
 * back once, 1/W written out. Small calls keep the segment in cache, so
 * memory sees each input byte read once and each output byte written once,
 * the least a reduce-scatter can move; large ones stage with streaming
 * stores, so the reducer reads from memory, not from another core's cache
 * (shm.h), and reduce into the (cached) result area, written out with
 * streaming stores.
 *
 * With a sendbuff from qcclMemAlloc the staging goes too: every rank
 * publishes its sendbuff and the reducer of piece r reads it from each
 * peer's memory in place (shm_map.c), so each byte is copied once, by the
 * reduction; such a sendbuff is read until every rank has finished.
 *
 * Plan: per chunk, wait for the slot to be free, then for every rank's
 * stage.
 */
#include "collectives/node.h"
#include "collectives/reduce_kernels.h"
#include "core/dtype.h"
#include "core/memcopy.h"

typedef struct {
  plan_t p;
  size_t es, per_piece;
  /* the call's */
  shm_reg_t reg;
  int direct;
  size_t off;
  size_t rot; /* where the chunk goes in the slots (shm_rot) */
  uint64_t g;
} rs_plan_t;

enum { RS_START, RS_CHUNK, RS_FREE, RS_STAGED, RS_END };

static qcclResult_t rs_progress(plan_t* p) {
  rs_plan_t* t = (rs_plan_t*)p;
  qcclComm_t comm = p->comm;
  shm_t* s = comm->shm;
  const coll_args_t* a = &p->a;
  int w = comm->nranks, r = comm->rank;
  size_t es = t->es, per_piece = t->per_piece;
  const char* in = a->sendbuff;
  char* out = a->recvbuff;
  size_t m = a->count - t->off < per_piece ? a->count - t->off : per_piece;
  for (;;) {
    switch (p->phase) {
      case RS_START:
        if (w == 1) {
          coll_copy(out, in, a->count * es);
          return qcclSuccess;
        }
        t->direct = shm_reg_find(s, in, a->count * (size_t)w * es, &t->reg);
        t->off = 0;
        p->phase = RS_CHUNK;
        PLAN_FALLTHROUGH;
      case RS_CHUNK:
        if (t->off >= a->count) {
          p->phase = RS_END;
          break;
        }
        m = a->count - t->off < per_piece ? a->count - t->off : per_piece;
        t->g = shm_chunk_next(s);
        t->rot = shm_rot(s, t->g, (size_t)w * m * es);
        p->phase = RS_FREE;
        PLAN_FALLTHROUGH;
      case RS_FREE: {
        PLAN_TEST(p, shm_test_chunk(s, t->g));
        char* slot = shm_slot(s, r, t->g) + t->rot;
        shm_reg_publish(s, t->g, SHM_REG_IN, &t->reg);
        if (!t->direct) {
          for (int j = 0; j < w; j++)
            if (j != r)
              shm_handoff_copy(s, slot + (size_t)j * m * es,
                               in + ((size_t)j * a->count + t->off) * es, m * es,
                               a->count * (size_t)w * es);
        }
        coll_stats_shm(comm, (size_t)(w - 1) * m * es);
        shm_post(s, 3 * t->g + 1);
        p->phase = RS_STAGED;
        PLAN_FALLTHROUGH;
      }
      case RS_STAGED: {
        PLAN_TEST(p, shm_test_all(s, 3 * t->g + 1));
        const void* srcs[w];
        for (int j = 0; j < w; j++) {
          size_t at = ((size_t)r * a->count + t->off) * es; /* piece r in block r of sendbuff */
          if (j == r) {
            srcs[j] = in + at;
            continue;
          }
          const char* src; /* the peer's sendbuff, where readable in place */
          QCCL_CHECK(shm_reg_peer(s, j, t->g, SHM_REG_IN, a->count * (size_t)w * es, &src));
          srcs[j] = src != NULL ? src + at : shm_slot(s, j, t->g) + t->rot + (size_t)r * m * es;
        }
        if (a->count * es >= COPY_STREAM_MIN_TOTAL) {
          /* reduce in cache, then one streaming write to memory */
          char* res = shm_result(s, r, t->g);
          reduce_kernel(res, srcs, w, m, a->datatype, a->op, w);
          copy_stream(out + t->off * es, res, m * es);
        } else {
          reduce_kernel(out + t->off * es, srcs, w, m, a->datatype, a->op, w);
        }
        shm_post(s, 3 * t->g + 3);
        t->off += per_piece;
        p->phase = RS_CHUNK;
        if (p->yield) return qcclInProgress;
        break;
      }
      case RS_END:
        /* sendbuff is read in place: it must outlive every reader */
        if (t->direct) PLAN_TEST(p, shm_test_all(s, 3 * t->g + 3));
        return qcclSuccess;
      default:
        return QCCL_ERR(qcclInternalError, "reducescatter: phase %d", p->phase);
    }
  }
}

static const plan_ops_t rs_ops = {.name = "reducescatter",
                                  .progress = rs_progress,
                                  .spin = plan_shm_spin,
                                  .check = plan_shm_check};

qcclResult_t node_reducescatter_plan(qcclComm_t comm, const coll_args_t* a, plan_t** out) {
  QCCL_CHECK(plan_alloc(sizeof(rs_plan_t), &rs_ops, comm, a, out));
  rs_plan_t* t = (rs_plan_t*)*out;
  t->es = dtype_size(a->datatype);
  t->per_piece = comm->nranks > 1 ? comm->shm->chunk_bytes / t->es / (size_t)comm->nranks : 1;
  if (t->per_piece == 0) t->per_piece = 1; /* chunk_bytes >= 4096 and W small: never hit */
  return qcclSuccess;
}
