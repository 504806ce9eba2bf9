/*
 * comm_warm.c - a new segment's first turn of small calls, run at init.
 *
 * Small calls stage in places that move through the first span of each
 * slot (shm_rot, shm.h: 512 KiB for 4 KiB calls on 2 ranks, 128
 * places), and a place is slow the first time a call exchanges it, even
 * after init has mapped it (shm_populate) and read it into the cache
 * (shm_warm). On the 2-vCPU Xeon guest a fresh 2-rank AllReduce of 8 KiB
 * took 2.2-2.6 us on lane 0 over its first 32 calls and 1.8 after: lane
 * 1, made by the second call (12-62 ms: a segment mapped and populated,
 * its probe), had pushed lane 0's places out again, and reading them
 * once more did not bring the speed back; a real exchange of each place
 * did (docs/PERF.md, "A segment's first turn").
 *
 * So every segment a single-host communicator, split or lane makes runs
 * one turn itself: two AllReduces of 4 KiB per place (one per half of the
 * slot pair), on the segment's own plans below the entry points (counted
 * in no statistics, no agreement: every rank runs the same turn, so the
 * chunk numbers stay in step): 256 calls on 2 ranks since the places
 * spread over 512 KiB (init 0.7-1.4 ms longer than with the 32 calls of
 * a 64 KiB span, of 12.6-16.8 ms on the AMD guest); and making a lane
 * runs the turn again on the lanes made before (comm_lane_make, while the
 * call that makes it runs alone).
 *
 * Sends and receives go through a ring per pair (shm_p2p.c), cold the same
 * way until it has wrapped once: a 2-rank exchange of 4 KiB took 1.6-1.8
 * us over its first 64 calls, 1.25 after, and again after a lane was
 * made. There a touch is enough: each rank takes every line of its rings
 * to its neighbours (r-1 and r+1: a pipeline's peers, and every peer on 2
 * ranks) into its cache for writing and reads every line of theirs to it,
 * at init and whenever a lane is made (first calls 1.25-1.33 us). A touch
 * changes no byte, so a user's send waiting in a ring is safe; a turn of
 * messages would not be (its receives would take that send). Only where
 * the ranks fit the cores:
 * oversubscribed, a small call's time is the scheduler's, and the turn
 * would cost milliseconds.
 */
#include <stdlib.h>

#include "collectives/coll.h"
#include "collectives/comm_init.h"
#include "collectives/plan.h"
#include "collectives/select.h"
#include "core/log.h"

#define WARM_BYTES 4096

/* The places: two AllReduces of WARM_BYTES per place. */
static qcclResult_t warm_slots(qcclComm_t c, float* buf) {
  shm_t* s = c->shm;
  size_t span = shm_rot_span(s, WARM_BYTES);
  int calls = 2 * (int)(span / WARM_BYTES);
  coll_args_t a = {COLL_ALLREDUCE,
                   buf,
                   buf + WARM_BYTES / sizeof(float),
                   WARM_BYTES / sizeof(float),
                   qcclFloat32,
                   qcclSum,
                   -1};
  qcclResult_t r = qcclSuccess;
  for (int i = 0; i < calls && r == qcclSuccess; i++) r = plan_run(c, &a, select_plan, NULL);
  return r;
}

/* The rings to and from the neighbours r-1 and r+1 (a pipeline's peers,
 * and every peer on 2 ranks): every line of each outgoing ring taken into
 * this core's cache for writing (a prefetch that changes no byte), every
 * line of each incoming ring read. No message moves, so a user's send
 * waiting in a ring for its receive is left as it is. */
static void warm_rings(qcclComm_t c) {
  shm_t* s = c->shm;
  int w = c->nranks, r = c->rank, nb[2] = {(r + 1) % w, (r + w - 1) % w};
  for (int k = 0; k < (w > 2 ? 2 : 1); k++) { /* on 2 ranks both are one peer */
    char* out = shm_chan_data(s, r, nb[k]);
    const char* in = shm_chan_data(s, nb[k], r);
    /* each ring and the cell after it (shm_chan_cell) */
    for (size_t o = 0; o < s->chan_bytes + s->cell_bytes; o += SHM_LINE) {
      __builtin_prefetch(out + o, 1, 3);
      (void)*(volatile const char*)(in + o);
    }
  }
}

qcclResult_t comm_warm(qcclComm_t c, int rings) {
  shm_t* s = c->shm;
  if (s == NULL || c->nranks < 2 || !shm_roomy(s) || c->nnodes != 1) return qcclSuccess;
  float* buf = calloc(2 * WARM_BYTES / sizeof(float), sizeof(float));
  if (buf == NULL) return QCCL_ERR(qcclSystemError, "out of memory (warming the segment)");
  /* counted nowhere, even if a call is open on the shared counters */
  int cur = c->stats->cur;
  c->stats->cur = -1;
  qcclResult_t r = warm_slots(c, buf);
  if (r == qcclSuccess && rings) warm_rings(c);
  c->stats->cur = cur;
  free(buf);
  if (r == qcclSuccess)
    QCCL_TRACE(LOG_INIT, "comm %s rank %d: segment warmed (places%s)", c->name, c->rank,
               rings ? ", rings" : "");
  return r;
}
