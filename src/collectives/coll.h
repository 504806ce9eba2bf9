/*
 * coll.h - the communicator (struct qcclComm) and what every floor of the
 * collective layer shares about it: a call's arguments (coll_args_t), its
 * counters, its scratch, its failure and agreement records.
 *
 * A call is validated by its entry point (api.c, the ZeRO++ entries),
 * takes its turn (engine.c) and runs as a plan (plan.h) that the selection
 * (select.c) or a family builds: docs/ARCHITECTURE.md, "The engine".
 */
#ifndef QCCL_COLLECTIVES_COLL_H_
#define QCCL_COLLECTIVES_COLL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/bootstrap.h"
#include "core/err.h"
#include "core/memcopy.h"
#include "transport/shm.h"
#include "transport/transport.h"

#define COMM_MAGIC 0x4d4d4f43u /* "COMM" */
#define COMM_DEAD 0xdeadc0deu
#define COMM_MAX_LANES 4 /* QCCL_LANES at most */
#define COMM_PLANS 16    /* plans kept per communicator (plan.h) */

typedef enum {
  COLL_ALLREDUCE,
  COLL_BROADCAST,
  COLL_REDUCE,
  COLL_ALLGATHER,
  COLL_REDUCESCATTER,
  COLL_ALLTOALL,
  COLL_GATHER,
  COLL_SCATTER,
  COLL_SEND,
  COLL_RECV,
  COLL_BARRIER,
  COLL_NUM_KINDS
} coll_kind_t;

/* The entry point of each kind ("qcclAllReduce", ...; api.c), and the
 * kind's name without "qccl", for messages. */
extern const char* const coll_fns[COLL_NUM_KINDS];
static inline const char* coll_kind_name(coll_kind_t kind) {
  return coll_fns[kind] + 4;
}

/* Algorithm choices for QCCL_ALGO. */
enum { COLL_ALGO_AUTO = 0, COLL_ALGO_FLAT = 1, COLL_ALGO_HIER = 2 };

/* The traffic counters of a communicator (qcclCommGetStats). Internal
 * communicators (a node's, a rail's) count into their parent's: `cur` is the
 * slot (qcclStatColl_t) of the public call in progress, -1 between calls. */
typedef struct {
  qcclStatCounters_t coll[qcclStatNumColls];
  int cur;
} comm_stats_t;

typedef struct {
  coll_kind_t kind;
  const void* sendbuff;
  void* recvbuff;
  size_t count; /* NCCL's meaning for the kind: per rank for gather-likes */
  qcclDataType_t datatype;
  qcclRedOp_t op;
  int root; /* root for rooted collectives, peer for send / recv */
} coll_args_t;

struct qcclComm {
  _Atomic uint32_t magic; /* read by calls inside while another thread aborts */
  int rank, nranks;
  bootstrap_t* boot;
  shm_t* shm;
  double timeout;
  int ncores;
  int finalized;
  _Atomic qcclResult_t async_error; /* sticky: a timeout or a remote failure */
  char name[64];
  char last_error[QCCL_LAST_ERROR_BYTES];
  /* the point-to-point transport reaching each peer, its context, and the
   * peer's index in that context (its local rank for shm) */
  const transport_ops_t** peer_ops;
  void** peer_ctx;
  int* peer_idx;
  uint32_t spin;         /* busy iterations before yielding while waiting */
  int64_t oneshot_bytes; /* QCCL_ALLREDUCE_ONESHOT_BYTES of rank 0, -1: the default */
  /* placement: node of every rank (numbered by first appearance) */
  int nnodes;
  int* node_of;
  /* a communicator spanning hosts: the ranks of this host (shm) and UCX */
  struct qcclComm* node;
  struct ucx* ucx;
  /* with equal numbers of ranks per host: the ranks of equal local index,
   * one per host, for two-level algorithms (NULL otherwise) */
  struct qcclComm* rail;
  int algo[COLL_NUM_KINDS]; /* COLL_ALGO_* chosen by QCCL_ALGO, or AUTO */
  /* topology (comm_topo.c): the rank map built from node_of (node, local
   * rank, node sizes, leaders), identical on every rank */
  struct topo_rankmap* rankmap;
  /* traffic counters: stats points at stats_own, or at the parent's for
   * the internal node and rail communicators */
  comm_stats_t stats_own;
  comm_stats_t* stats;
  /* scratch for algorithms over point-to-point (0, 1) and for the private
   * copies of in-place sends (COMM_SCRATCH_P2P, sendrecv.c), grown on
   * demand and kept */
  void* scratch[3];
  size_t scratch_bytes[3];
  /* the ZeRO++ collectives' state (src/collectives/zeropp), made on first use */
  struct zpp_comm* zero;
  /* the engine (engine.c): turns of the calls issued on this communicator
   * (seq_next issued), references (the user's, one per call
   * issued and not ended), and the abort flag. Internal communicators (node,
   * rail) point `top` at the user's communicator they serve, whose flag
   * their waits check; a user's communicator points at itself. */
  pthread_mutex_t eng_mu;
  pthread_cond_t eng_cv;
  uint64_t seq_next;
  int refs;
  _Atomic int aborting;
  struct qcclComm* top;
  /* lanes (engine.c, comm.c): a user's communicator runs its collectives
   * on nlanes lanes, the k-th collective it is given on lane k % nlanes;
   * lane 0 is the communicator itself, lane k > 0 an internal copy of it
   * (same ranks; its own segment, UCX worker, node and rail), made by the
   * first call that runs on it. A call that is one plain collective runs
   * on its lane once the lane's previous call and every earlier call that
   * runs alone have ended; any other call runs alone. lane_next counts the
   * collectives given out; lane_last[k] / lane_done[k] is 1 + the turn of
   * the last call issued / ended on lane k, serial_last / serial_done the
   * same for calls that run alone; lane_made[k]: an issued call makes (or
   * made) lane k; ended counts the turns ended, running the calls inside. */
  int nlanes;
  struct qcclComm* lane[COMM_MAX_LANES];
  uint64_t lane_next;
  uint64_t lane_last[COMM_MAX_LANES], lane_done[COMM_MAX_LANES];
  uint64_t serial_last, serial_done;
  int lane_made[COMM_MAX_LANES];
  uint64_t ended;
  int running;
  /* the agreement check of the user's calls (agree.c, QCCL_CHECK) */
  int check;
  _Atomic int peers_told; /* comm_tell_peers ran */
  _Atomic int tell_asked; /* a call found the comm failed (engine_tell_peers) */
  uint64_t check_calls;   /* user's collectives checked so far */
  /* the calls whose records this rank compared (every one before it), and
   * the least such count of the node's ranks when last read (agree.c,
   * "How far ahead") */
  uint64_t check_done, check_done_seen;
  uint64_t* check_recs; /* the node's records of the call being checked */
  /* across hosts: the last calls' records (call number + 1, record) and
   * the call on the wire, for the report of a failed call (agree.c) */
  uint64_t check_hist[8][4];
  uint64_t wire_call;
  _Atomic int reported;
  char fail_reason[QCCL_LAST_ERROR_BYTES]; /* the message of the call that failed it */
  /* the plans of this communicator's recent calls (plan.c), and the clock
   * of their use */
  struct plan* plans[COMM_PLANS];
  uint64_t plans_clock;
  int plans_last; /* the entry the last call found or filled */
};

/* QCCL_CHECK (agree.c): checks that every rank of the node makes the same
 * user's collective. coll_agree_run posts the call's record and drives,
 * as one plan, the comparison of the node's records and the call's plan
 * (call; NULL for the agreement alone): before the call across hosts and
 * for a layer above's calls, after it for a plain call on one host (whose
 * waits watch the records meanwhile). Fails with qcclInvalidUsage on
 * every rank when they disagree. The record (coll_agree_record): the
 * collective (a layer above numbers its calls from COLL_NUM_KINDS), count,
 * datatype, op, root, and a hash of whatever else must agree
 * (coll_agree_mix; 0 for a plain call). */
#define COLL_AGREE_WORDS 3
void coll_agree_record(int kind, size_t count, qcclDataType_t dt, qcclRedOp_t op, int root,
                       uint64_t spec, uint64_t rec[COLL_AGREE_WORDS]);
uint64_t coll_agree_mix(uint64_t h, uint64_t v);
qcclResult_t coll_agree_run(qcclComm_t comm, const uint64_t rec[COLL_AGREE_WORDS],
                            struct plan* call);
/* A user's call on comm failed with r: across hosts, tells every peer
 * (with this rank's record of the call) and reads what the peers tell,
 * so every rank names the same cause. Returns the error to report: a
 * disagreement named, or r. */
qcclResult_t coll_agree_failed(qcclComm_t comm, qcclResult_t r);
/* Buffers peers write into (a single-copy Gather's root, shared copies
 * between qcclMemAlloc buffers) are published with the tag of the call
 * that offers them (coll_agree_tag: its kind, count, datatype, root and
 * first chunk g, folded to 32 bits, never 0; shared copies: the kind, the
 * block's bytes and g), and a writer compares the
 * peer's tag with its own call's before it writes
 * (coll_agree_check_tag). The calls' records are compared only after the
 * call (above): a rank whose count is larger than the peer's would until
 * then write past the end of the peer's buffer, and a rank run ahead of
 * a disagreement into another call's buffer. A mismatch fails the call
 * with qcclInvalidUsage (the comparison of the records then names what
 * differs; with QCCL_CHECK=0 the segment is aborted, so the peers fail
 * rather than wait for a write that will not come). */
uint32_t coll_agree_tag(const coll_args_t* a, uint64_t g);
qcclResult_t coll_agree_check_tag(qcclComm_t comm, int peer, uint64_t g, int which, uint32_t mine,
                                  const char* coll);
/* The watch of the node's segment of a communicator across hosts (arg:
 * the communicator): its waits fail when the network brings news of a
 * failed call or of a call with other arguments (ucx_watch). */
qcclResult_t coll_agree_watch(void* arg);
/* qcclRemoteError when a peer's report of a failed call waits on any of
 * the workers of comm's communicator (every lane's, and their rails'): a
 * call on one lane hears of a failure on another. Does not progress them. */
qcclResult_t coll_lanes_control_seen(qcclComm_t comm);

/* The call number the messages of comm (and of its rail) carry across
 * hosts from now on (agree.c; transport/ucx.c compares it on receipt).
 * User sends and receives carry COLL_WIRE_P2P; collectives never do. */
#define COLL_WIRE_P2P ((uint64_t)1 << 38) /* = UCX_CALL_P2P */
void coll_wire_call(qcclComm_t comm, uint64_t call);

/* Compares the records of a call whose comparison was left to the next
 * call (an eager one: agree.c) on every lane of the user's communicator c,
 * waiting for them (qcclCommFinalize). */
qcclResult_t coll_agree_settle(qcclComm_t c);

/* Reads QCCL_CHECK and sizes the check's buffers, once c is connected. */
qcclResult_t coll_agree_init(qcclComm_t c);

/* Frees c and its internal communicators (engine.c calls it when the last
 * reference goes); abort closes connections without flushing. */
void comm_free(qcclComm_t c, int abort);

/* Frees a communicator's ZeRO++ state (NULL allowed); src/collectives/zeropp. */
void zpp_comm_free(struct zpp_comm* z);

/* Scratch buffer `which` (0, 1 or COMM_SCRATCH_P2P) of at least bytes,
 * owned by comm and kept across calls. Slots 0 and 1 belong to the
 * algorithm running on comm; COMM_SCRATCH_P2P to p2p_run, which the
 * algorithms call. */
#define COMM_SCRATCH_P2P 2
qcclResult_t comm_scratch(qcclComm_t comm, int which, size_t bytes, void** out);

/* Opens the counting of a user's call under slot (a qcclStatColl_t),
 * adding calls to its call count (a bucket of fused calls counts them
 * all; the user's sends and receives are counted one by one by their
 * runner), until coll_stats_leave. Only the entries of user's calls open
 * a slot. */
void coll_stats_enter(qcclComm_t comm, int slot, uint64_t calls);
void coll_stats_leave(qcclComm_t comm);

/* The qcclStatColl_t slot of a plain kind. */
int coll_stat_slot_of(coll_kind_t kind);

/* Counts bytes that this rank sends to peer (a rank of comm): intra-node or
 * inter-node by the peer's host. */
static inline void coll_stats_sent(qcclComm_t comm, int peer, size_t bytes) {
  comm_stats_t* st = comm->stats;
  if (st == NULL || st->cur < 0) return;
  if (comm->node_of[peer] == comm->node_of[comm->rank])
    st->coll[st->cur].bytesIntra += bytes;
  else
    st->coll[st->cur].bytesInter += bytes;
}

/* Whether the an bytes at a and the bn bytes at b share a byte. */
static inline int coll_overlap(const void* a, size_t an, const void* b, size_t bn) {
  const char* x = a;
  const char* y = b;
  return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

/* Counts bytes this rank wrote into its node's shared segment for the
 * others to read. */
static inline void coll_stats_shm(qcclComm_t comm, size_t bytes) {
  comm_stats_t* st = comm->stats;
  if (st != NULL && st->cur >= 0) st->coll[st->cur].bytesIntra += bytes;
}

/* Makes c and its internal communicators count into sink. */
void coll_stats_attach(qcclComm_t c, comm_stats_t* sink);

/* Records the failure of a call on comm: copies the thread's last error into
 * the communicator and, for failures that break it (timeout, remote, system,
 * internal), makes it sticky and tells the peers. Returns res. */
qcclResult_t comm_fail(qcclComm_t comm, qcclResult_t res);

/* A communicator that failed (async_error) and is asked to make another
 * call tells its peers, once: the abort word of its node's segment, and
 * its UCX endpoints closed by force, so that every rank's next call fails
 * promptly instead of waiting for it, or pairing with what a failed call
 * left behind (comm.c). Only from the thread that holds the communicator's
 * turn (engine.c); other threads call engine_tell_peers. */
void comm_tell_peers(qcclComm_t comm);

/* Makes lane k of the user's communicator c (engine.h): an internal copy
 * of c over c's bootstrap, which every rank makes in the same call. */
qcclResult_t comm_lane_make(qcclComm_t c, int k);

/* Lane k of the user's communicator c: c itself for k = 0, NULL while it
 * is not made (read from any thread: an abort, the counters). */
static inline struct qcclComm* comm_lane_at(struct qcclComm* c, int k) {
  return k == 0 ? c : __atomic_load_n(&c->lane[k], __ATOMIC_ACQUIRE);
}

/* 1 once the user's communicator that c serves was aborted
 * (qcclCommAbort). */
static inline int comm_aborted(const struct qcclComm* c) {
  return atomic_load_explicit(&c->top->aborting, memory_order_relaxed) != 0;
}

/* qcclRemoteError naming fn if c (or the communicator it serves) was
 * aborted, c's sticky error if it failed before (and its peers are told
 * once no call is inside: engine.c), else qcclSuccess. */
qcclResult_t comm_usable(const char* fn, qcclComm_t c);

/* Sets the abort word of every segment of c (its lanes' too), so that
 * every shared-memory wait of c returns. */
void comm_abort_segments(qcclComm_t c);

/* Element range [*lo, *hi) of part `part` when n elements are cut into
 * nparts nearly equal parts (the first n % nparts get one more). */
static inline void coll_part(size_t n, int nparts, int part, size_t* lo, size_t* hi) {
  size_t q = n / (size_t)nparts, r = n % (size_t)nparts, p = (size_t)part;
  *lo = p * q + (p < r ? p : r);
  *hi = *lo + q + (p < r ? 1 : 0);
}

/* Byte range [*lo, *lo + *len) of piece k when n bytes are cut into
 * `parts` pieces of whole pages (the last ones shorter or empty). */
static inline void coll_page_piece(size_t n, size_t parts, size_t k, size_t* lo, size_t* len) {
  size_t piece = (n + parts - 1) / parts;
  piece = (piece + 4095) / 4096 * 4096;
  *lo = k * piece < n ? k * piece : n;
  *len = n - *lo < piece ? n - *lo : piece;
}

/* Copies n bytes unless dst == src (in place). */
static inline void coll_copy(void* dst, const void* src, size_t n) {
  if (dst != src && n > 0) copy_data(dst, src, n);
}

#endif /* QCCL_COLLECTIVES_COLL_H_ */
