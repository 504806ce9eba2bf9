/*
 * shm.h - the node's shared-memory segment and its synchronisation.
 *
 * One segment per communicator and node, created by the first rank (mode
 * 0600, name /qccl-<pid>-<random>), attached by the others and unlinked as
 * soon as all have attached, so nothing remains in /dev/shm after any exit.
 *
 * Layout: a header (abort flag), one control line per rank (its step
 * counter, pid, and the buffer of a single-copy call, cma.h), per rank
 * two "slots" and two "result" areas of chunk_bytes each (double
 * buffering), and one ring channel per ordered pair of ranks for
 * point-to-point messages.
 *
 * Data one rank writes into the segment for another to read goes with
 * ordinary stores while those run fast, and with non-temporal stores
 * (copy_stream), so that the reader finds it in memory rather than dirty
 * in the writer's cache, while they run slow (shm_handoff.c; the cells,
 * which hold lines the writer has just read, with ordinary ones always):
 * on a VM whose vCPUs may sit on cores without a shared cache, a write-then-read
 * handoff of 512 KiB ran at 2-3 GB/s through the caches, against 6-14 GB/s
 * when the cores share one, and at 6-7.5 GB/s through memory in both cases
 * (docs/PERF.md).
 *
 * Synchronisation is by step counters: every collective is a sequence of
 * chunks numbered g = 0, 1, 2, ... over the life of the communicator (the
 * same on every rank, since every rank runs the same collectives), and a
 * rank publishes its progress in chunk g as step 3g+1 (staged in), 3g+2
 * (reduced) and 3g+3 (done). A rank writes slot g%2 only after every rank
 * reached 3(g-2)+3, i.e. finished reading chunk g-2 from it; a chunk that
 * writes only a part of the slot waits for the last earlier chunk whose
 * part it overlaps (shm_test_chunk_part), so small eager calls run further
 * ahead.
 */
#ifndef QCCL_TRANSPORT_SHM_H_
#define QCCL_TRANSPORT_SHM_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/bootstrap.h"
#include "qccl.h"

#define SHM_LINE 64
#define SHM_CHECK_WORDS 3
#define SHM_CHECK_RING 16

typedef struct {
  _Atomic uint64_t step;
  int32_t pid;
  int32_t alive;
  uint64_t cma_probe;  /* address of a word peers read once to test CMA */
  uint64_t cma_value;  /* the word's value */
  _Atomic int32_t cpu; /* the CPU this rank last waited on (shm_wait_*) */
  /* per exchange parity, where the exchange's block is (shm_xch.c): 0 in
   * the slot, or 1 + the exchange cell; written before the post of 3g + 1 */
  uint16_t xch_at[2];
  /* per chunk parity, for the chunk's input (SHM_REG_IN) and output
   * (SHM_REG_OUT): the qcclMemAlloc region holding this rank's buffer,
   * which peers map and read directly (id 0: none; shm_map.c); tag: the
   * call's, on a buffer peers write into (coll_agree_tag) */
  struct {
    uint64_t id, off;
    int32_t fd;
    uint32_t tag;
  } reg[2][2];
  /* shared calls (collectives/shared_copy.c): the next unclaimed task of
   * the queue that fills this rank's recvbuff */
  _Atomic uint64_t share_next;
  /* this rank's point-to-point key: its headers' stamps are their ring
   * positions xor it (shm_p2p.c); random, odd, set before the attach
   * barrier */
  uint64_t p2p_key;
  char pad[3 * SHM_LINE - 152];
  /* the agreement check of the user's calls (collectives/agree.c): call c
   * publishes its record in check[c % SHM_CHECK_RING].rec, then its
   * call = c + 1 there (one line holds both: a peer's comparison reads
   * one line a rank, as when a rank had a single record); check_done: the
   * calls this rank has compared (all before it). A rank overwrites the
   * record of call c only once every rank's check_done passed c, so an
   * eager rank may run up to SHM_CHECK_RING - 1 calls ahead of the
   * slowest (agree.c, "How far ahead") */
  struct {
    _Atomic uint64_t call;
    uint64_t rec[SHM_CHECK_WORDS];
  } check[SHM_CHECK_RING];
  _Atomic uint64_t check_done;
  /* rank 0's only: the word the 2 ranks bounce at attach to time a cache
   * line's round trip between their cores (shm_handoff_probe) */
  _Atomic uint64_t ping;
  char pad2[SHM_LINE - 16];
} shm_ctrl_t;
_Static_assert(sizeof(shm_ctrl_t) == 12 * SHM_LINE, "a control line is twelve cache lines");

enum { SHM_REG_IN = 0, SHM_REG_OUT = 1 };

/* A peer's qcclMemAlloc region as mapped here (shm_map.c). */
typedef struct {
  uint64_t id; /* 0: nothing mapped */
  char* base;
  size_t size;
  uint64_t used; /* when last looked up (for replacement) */
} shm_peer_map_t;

/* Regions of one peer kept mapped at once (a call reads at most two). */
#define SHM_PEER_MAPS 4

typedef struct {
  _Atomic uint64_t head; /* bytes written by the sender */
  /* single-copy messages the sender has announced (shm_p2p.c; only the
   * sender touches it) */
  uint64_t cma_sent;
  char pad0[SHM_LINE - 16];
  _Atomic uint64_t tail; /* bytes consumed by the receiver */
  /* single-copy messages the receiver is done with: read out of the
   * sender's buffer, or taken back by the sender (shm_p2p.c) */
  _Atomic uint64_t cma_done;
  /* the last single-copy message claimed: its number times 2, plus 1 when
   * the sender took it back to send through the ring, 0 when the receiver
   * read it */
  _Atomic uint64_t cma_claim;
  char pad1[SHM_LINE - 24];
  /* 0, or 1 + the bytes the receiver expected when it refused a message of
   * another size: the sender fails at once instead of at its timeout. On a
   * line of its own: the sender reads it at every test, and beside tail it
   * was a line the receiver had just rewritten, a cross-core miss per send */
  _Atomic uint64_t refused;
  char pad2[SHM_LINE - 8];
} shm_chan_ctrl_t;

#define SHM_P2P_KEEP 4
/* Two cells that change hands: the p2p cells of a pair of channels
 * (shm_p2p.c; cell 0 is this rank's channel's, 1 the peer's) and the
 * exchange cells of a 2-rank segment (shm_xch.c). A rank gives a cell up
 * when it writes it and takes it when it has read it, so a cell has one
 * writer at a time and is never written before its reader is done; of
 * the two it writes first the one it took last, lines its own cache
 * holds. A hold word says which: bit k, cell k held; SHM_HOLD_LAST, cell
 * 1 was the one taken last. */
#define SHM_HOLD_LAST 4u

/* The cell to write next (0 or 1), -1 when this rank holds none. */
static inline int shm_hold_pick(uint64_t h) {
  if ((h & 3u) == 0) return -1;
  int last = (h & SHM_HOLD_LAST) != 0;
  return h & (1u << last) ? last : (h & 1u ? 0 : 1);
}

/* Cell k written: the peer's now. */
static inline uint64_t shm_hold_give(uint64_t h, int k) {
  return h & ~(uint64_t)(1u << k);
}

/* Cell k read: this rank's, and the one taken last. */
static inline uint64_t shm_hold_take(uint64_t h, int k) {
  return (h & 3u) | (1u << k) | (k ? SHM_HOLD_LAST : 0);
}

/* chunks whose slot parts shm_test_chunk_part remembers: how far a rank may
 * run ahead of the slowest reader in small eager calls */
#define SHM_PART_HIST 32

typedef struct shm {
  char* base;
  size_t bytes;
  int rank, nranks;
  size_t chunk_bytes;    /* bytes of one slot */
  size_t rot_span;       /* the widest span of small calls' places (shm_rot) */
  size_t rot_places;     /* and the most places in it */
  size_t chan_bytes;     /* ring bytes of one p2p channel (a power of two) */
  size_t cell_bytes;     /* bytes of one p2p channel's cell (shm_p2p.c), 0 = none */
  uint64_t chunk_seq;    /* next chunk number g */
  double timeout;        /* seconds without progress before qcclTimeout */
  uint32_t spin;         /* microseconds of polling before yielding */
  int ncores;            /* the node's cores (at least 1; shm_roomy) */
  double next_move;      /* clock_now() from which a wait may move off a shared CPU */
  uint32_t balance_tick; /* waits since the last look at the ranks' spread (shm.c) */
  size_t cma_min;        /* smallest per-peer block sent single copy, 0 = never */
  size_t cma_a2a_min;    /* AlltoAll's (cma.h, cma_a2a_use), 0 = never */
  int cma_slow;          /* single copy off only for the speed probe: Scatter on a crowded host
                          * still reads single copy (cma.h, cma_scatter_use), and a rank
                          * whose handoffs stream offers some (cma_mode_offer) */
  int cma_mode_on;       /* the mode cma_mode_offer last saw: handoffs streaming (its log) */
  unsigned cma_mode_every, cma_mode_count; /* QCCL_CMA_MODE_EVERY (tests), calls checked */
  size_t handoff_nt;    /* calls of at least this many bytes hand off through memory
                         * (QCCL_SHM_HANDOFF_NT_BYTES; unset: none, nt_auto) */
  int nt_auto;          /* QCCL_SHM_HANDOFF_NT_BYTES unset: smaller calls too when slow */
  int nt_slow;          /* this rank's last timed ordinary handoff ran slow (shm_handoff.c) */
  double nt_retry_at;   /* clock_now() from which an ordinary copy is timed again */
  double nt_wait;       /* seconds from a slow retry to the next */
  int nt_strikes;       /* slow ordinary copies in a row while not nt_slow */
  int nt_confirm;       /* nt_slow: fast retries in a row (shm_nt_confirms switch back) */
  int nt_prep;          /* copies streamed since a retry came due (shm_nt_prep) */
  unsigned nt_tick;     /* handoffs below SHM_NT_TIMED_MIN, to time every SHM_NT_SAMPLE-th */
  double nt_clock;      /* seconds clock_now() adds to a timed copy; 0: not measured yet */
  double nt_probe_s;    /* the probe's round trip (seconds) above which handoffs start
                         * streaming (QCCL_SHM_HANDOFF_PROBE_NS; 0: no probe, stream) */
  size_t share_min;     /* AllGather/AlltoAll outputs from which qcclMemAlloc calls share work */
  uint64_t* cma_buf;    /* what peers read to probe CMA (cma.c; freed by it) */
  int peers_readable;   /* every local rank may read / map every other's memory */
  shm_peer_map_t* maps; /* [nranks][SHM_PEER_MAPS] peers' regions mapped here, or NULL */
  uint64_t map_clock;   /* lookups so far (shm_peer_map_t.used) */
  /* the exchange of a 2-rank segment (shm_xch.c): bytes of a cell (0:
   * none), the cells this rank holds (a hold word, shm_hold_*), exchanges
   * ended (both ranks count alike), and for the tests
   * QCCL_SHM_XCH_SLOT_EVERY and the picks made (retries counted) */
  size_t xch_bytes;
  uint64_t xch_hold;
  uint64_t xch_seq;
  unsigned xch_slot_every, xch_count;
  _Atomic int32_t* abort_rank;
  int check_watch; /* waits compare the peers' records of call check_call */
  /* called by every wait's slow check when set (a node of a communicator
   * across hosts: agree.c watches its network for news of a failed call) */
  qcclResult_t (*watch)(void* arg);
  void* watch_arg;
  uint64_t check_call;
  uint64_t check_mine[SHM_CHECK_WORDS];
  /* what the last test that found a rank short waits for (shm_test_*):
   * ranks [wait_j, wait_hi) on counter wait_check at wait_step */
  int wait_j, wait_hi, wait_check;
  uint64_t wait_step;
  shm_ctrl_t* ctrl;
  char* slots;
  char* results;
  char* chans;
  char* xch;     /* 2 exchange cells of xch_bytes (shm_xch.c) */
  char* scratch; /* chunk_bytes of private memory, or NULL until asked for */
  /* finished point-to-point requests kept for the next ones (shm_p2p.c; a
   * segment's transfers run on one thread at a time, as its calls do) */
  void* p2p_free[SHM_P2P_KEEP];
  int p2p_nfree;
  /* [nranks]: the tail of this rank's ring to each peer as last read; a
   * send reads the receiver's tail again only when that leaves too little
   * room (shm_p2p.c) */
  uint64_t* tail_seen;
  /* [nranks]: each rank's p2p_key, read once after the attach barrier
   * (the second part of tail_seen's allocation) */
  uint64_t* p2p_key;
  /* [nranks]: the cells of the channels with each peer this rank may
   * write (shm_p2p.c; hold words, shm_hold_*; the fourth part of
   * tail_seen's) */
  uint64_t* p2p_hold;
  /* shm_test_chunk_part: the part of its slot each of this rank's recent
   * chunks wrote, at [g % SHM_PART_HIST] (g1 = g + 1; 0: none recorded),
   * and the last chunk whose guard was found (part_g1 = g + 1) with the
   * step every rank must reach before it (0: none) */
  struct {
    uint64_t g1, off, len;
  } part[SHM_PART_HIST];
  uint64_t part_g1, part_step;
  /* the watched call's first step (3 * its first chunk + 1, set as its
   * record is posted), and [nranks] the watched call (+ 1) in which this
   * rank last saw each rank reach one of its steps: a rank seen there has
   * posted its record of the call (shm_check_saw_all) */
  uint64_t check_step0;
  uint64_t* check_saw;
} shm_t;

/* Creates (rank 0) or attaches (others) the segment of this communicator;
 * collective over boot. ncores: cores of this host (sets spinning). */
qcclResult_t shm_open_segment(bootstrap_t* boot, double timeout, int ncores, const shm_t* like,
                              shm_t** out);

/* Unmaps the segment. Local. */
void shm_close(shm_t* s);

/* Where peers may read a buffer of this rank directly: its qcclMemAlloc
 * region and the buffer's offset in it (id 0: nowhere). tag: 0, or for a
 * buffer peers write into, the call's (coll_agree_tag: a writer checks it
 * against its own before writing). */
typedef struct {
  uint64_t id, off;
  int32_t fd;
  uint32_t tag;
} shm_reg_t;

/* The id of a buffer peers read single copy (process_vm_readv) at address
 * off (cma.h, cma_offer) rather than through a mapping. */
#define SHM_REG_CMA UINT64_MAX

/* Looks up, once per call, the qcclMemAlloc region holding len bytes at
 * buf. Returns 1 when peers may read them there (the caller then need not
 * stage them), else 0 with reg set to "nowhere". */
int shm_reg_find(shm_t* s, const void* buf, size_t len, shm_reg_t* reg);

/* Publishes reg for chunk g as this rank's buffer `which` (SHM_REG_IN or
 * SHM_REG_OUT, two buffers a chunk may publish); peers read the slot or the
 * result area where it says nowhere. Call once chunk g's test passed
 * (shm_test_chunk) and before posting 3g+1. */
void shm_reg_publish(shm_t* s, uint64_t g, int which, const shm_reg_t* reg);

/* After peer posted 3g+1: its published buffer `which` for chunk g, mapped
 * here (readable and writable), or NULL when it published none or one to
 * read single copy (SHM_REG_CMA). len: the
 * bytes from there the caller will touch; they must lie in the region. */
qcclResult_t shm_reg_peer(shm_t* s, int peer, uint64_t g, int which, size_t len, const char** out);

/* After peer posted 3g+1: 1 and its buffer's address when it published
 * one to read single copy (SHM_REG_CMA), else 0. */
int shm_reg_peer_cma(const shm_t* s, int peer, uint64_t g, int which, uintptr_t* addr);

/* After peer posted 3g+1: the fd field of its published buffer `which`.
 * A single-copy reg (SHM_REG_CMA) has no file, so the field is the
 * collective's own: -1 unless it says otherwise (broadcast.c, "Split": the
 * staged chunk count). */
int32_t shm_reg_peer_aux(const shm_t* s, int peer, uint64_t g, int which);

/* After peer posted 3g+1: the tag of its published buffer `which`, and
 * whether it published one at all (not "nowhere"). */
uint32_t shm_reg_peer_tag(const shm_t* s, int peer, uint64_t g, int which);
int shm_reg_peer_published(const shm_t* s, int peer, uint64_t g, int which);

/* Drops every peer mapping (shm_close). */
void shm_reg_unmap(shm_t* s);

/* chunk_bytes of this rank's private memory (allocated at the first call;
 * freed by shm_close). */
qcclResult_t shm_scratch(shm_t* s, char** out);

/* Whether a call that moves `bytes` (its buffer size) hands data to the
 * peers with streaming stores (QCCL_SHM_HANDOFF_NT_BYTES). */
static inline int shm_handoff_nt(const shm_t* s, size_t bytes) {
  return bytes >= s->handoff_nt;
}

/* Copies n bytes of a call that moves call_bytes into this rank's slot for
 * its peers: streaming stores while ordinary stores into the segment run
 * slow here (the lines still in a peer's cache across the host:
 * shm_handoff.c), or, QCCL_SHM_HANDOFF_NT_BYTES set, in calls of that
 * size or more. */
void shm_handoff_copy(shm_t* s, void* dst, const void* src, size_t n, size_t call_bytes);
/* Its parts (exposed for tests/unit/unit_handoff.c): whether a copy of n
 * bytes at time now goes streaming, and what an ordinary copy of n bytes
 * started at t0 and taking dt seconds tells. */
int shm_handoff_streams(const shm_t* s, size_t n, size_t call_bytes, double now);
/* Whether this rank's handoffs now stream because ordinary ones ran slow
 * (no shared cache), and no timed retry is due at now. */
int shm_handoff_slow(const shm_t* s, double now);
void shm_handoff_timed(shm_t* s, size_t n, double t0, double dt);
/* At attach, on 2 ranks on a host with 2 CPUs or more: the two bounce a
 * word between their cores and each starts its handoffs streaming when
 * the round trip says their cores share no cache (shm_handoff_seed),
 * instead of learning it from slow copies in the first calls; with more
 * ranks than cores (at least 2), rank 0 times two CPUs of its own
 * (shm_cpu_probe) and every rank seeds from its figure, which a
 * bootstrap exchange (the same on every rank) hands out
 * (shm_handoff_probe.c). Returns the median round trip in seconds (above
 * 5 us: no verdict, a rank held off), or 0: not measured (another rank
 * count, QCCL_SHM_HANDOFF_NT_BYTES set, QCCL_SHM_HANDOFF_PROBE_NS=0, the
 * other rank did not answer within 5 ms). */
#define SHM_NT_PROBE_SLOW_S 250e-9 /* a round trip above: no shared cache */
#define SHM_NT_PROBE_MAX_S 5e-6    /* above: a rank held off, no verdict */
double shm_handoff_probe(shm_t* s, bootstrap_t* boot);
/* What a round trip of rt seconds starts the handoffs with (exposed for
 * tests/unit/unit_handoff.c); 1 when they stream (shm_handoff_stream_first:
 * streaming, the first timed retry counted from shm_handoff_begin, the
 * first use of the choice: a copy into the segment, or cma_mode_use). */
int shm_handoff_seed(shm_t* s, double rt);
void shm_handoff_stream_first(shm_t* s);
void shm_handoff_begin(shm_t* s, double now);

/* The exchange of a 2-rank segment (shm_xch.c). shm_xch_use: whether a
 * block of n bytes is exchanged so (the same answer on both ranks). For
 * an exchange with chunk number g (shm_chunk_next) and its place in the
 * slots rot (shm_rot of g and n, the same on both ranks): shm_xch_put
 * writes n bytes of src into a cell this rank holds (ordinary stores,
 * streaming only where QCCL_SHM_HANDOFF_NT_BYTES says so for a call of
 * call_bytes) or, once free, its slot (the stores chosen for such a call,
 * shm_handoff_copy), and posts 3g + 1 (qcclInProgress while the slot is
 * not free: call it again); shm_xch_test: qcclSuccess once the peer did
 * (a test as shm_test_rank); shm_xch_get then copies its n bytes into dst
 * and posts 3g + 3. Or, to read the peer's block in place (the
 * one-handoff AllReduce reduces from it): shm_xch_peer gives where it is,
 * and shm_xch_done, once this rank is done reading it, ends the exchange
 * as shm_xch_get does. */
int shm_xch_use(const shm_t* s, size_t n);
qcclResult_t shm_xch_put(shm_t* s, uint64_t g, size_t rot, const void* src, size_t n,
                         size_t call_bytes);
qcclResult_t shm_xch_test(shm_t* s, uint64_t g);
void shm_xch_get(shm_t* s, uint64_t g, size_t rot, void* dst, size_t n);
const char* shm_xch_peer(shm_t* s, uint64_t g, size_t rot);
void shm_xch_done(shm_t* s, uint64_t g);

/* Publishes this rank's step. */
static inline void shm_post(shm_t* s, uint64_t step) {
  atomic_store_explicit(&s->ctrl[s->rank].step, step, memory_order_release);
}

/* The counters a wait watches in rank j's control line: its step, the
 * agreement record of a call (SHM_CHECK_SEQ: reaching step when the
 * record of call step - 1 is posted: its place's call number), and the
 * calls whose records it compared. Each only grows while a wait for step
 * watches it (the record's place takes call step - 1 + SHM_CHECK_RING
 * only once this rank compared step - 1). */
enum { SHM_STEP = 0, SHM_CHECK_SEQ = 1, SHM_CHECK_DONE = 2 };
static inline uint64_t shm_counter(const shm_t* s, int j, int check, uint64_t step) {
  const _Atomic uint64_t* c = check == SHM_CHECK_SEQ
                                  ? &s->ctrl[j].check[(step - 1) % SHM_CHECK_RING].call
                              : check == SHM_CHECK_DONE ? &s->ctrl[j].check_done
                                                        : &s->ctrl[j].step;
  return atomic_load_explicit(c, memory_order_acquire);
}

/* The part of shm_test_counter past the first rank found short. */
qcclResult_t shm_test_short(shm_t* s, int j, int hi, uint64_t step, int check);

/* Without waiting: qcclSuccess once every rank in [lo, hi) reached step
 * (on the counter check names: SHM_STEP, ...); qcclInProgress while one has
 * not, and the segment then remembers what it waits for (shm_wait_spin,
 * shm_wait_check); qcclRemoteError once a rank aborted the segment and
 * the counters are still short. What plans wait with (plan.h). */
static inline qcclResult_t shm_test_counter(shm_t* s, int lo, int hi, uint64_t step, int check) {
  int j = lo;
  while (j < hi && shm_counter(s, j, check, step) >= step) j++;
  if (j < hi) return shm_test_short(s, j, hi, step, check);
  /* a call whose records are compared once it ran (agree.c): the ranks
   * just seen have posted theirs, so their lines are fetched now, while
   * the call goes on, instead of at the end (a miss per peer there) */
  if (s->check_watch && !check)
    for (j = lo; j < hi; j++) {
      __builtin_prefetch(&s->ctrl[j].check[s->check_call % SHM_CHECK_RING], 0, 3);
      if (step >= s->check_step0) s->check_saw[j] = s->check_call + 1;
    }
  return qcclSuccess;
}

static inline qcclResult_t shm_test_rank(shm_t* s, int rank, uint64_t step) {
  return shm_test_counter(s, rank, rank + 1, step, 0);
}

static inline qcclResult_t shm_test_all(shm_t* s, uint64_t step) {
  return shm_test_counter(s, 0, s->nranks, step, 0);
}

/* For the last test that returned qcclInProgress: the spin before
 * yielding (none when a rank it waits for last ran on this CPU and this
 * rank could not move: shm_spin_for), and the slow check after idle
 * seconds without progress: the agreement watch, the network's watch,
 * whether the awaited rank is alive, the timeout. */
uint32_t shm_wait_spin(shm_t* s);
qcclResult_t shm_wait_check(shm_t* s, double idle);

/* The agreement check (collectives/agree.c). shm_check_publish posts this
 * rank's record of its call number c (check[c % SHM_CHECK_RING] of its
 * control line, its call becoming c + 1, which the agreement's plan tests
 * with shm_test_counter, SHM_CHECK_SEQ, step c + 1) and, with watch set,
 * makes every wait of the call fail with qcclInvalidUsage as soon as a
 * peer has posted a different record for c (checked with the slow checks,
 * every ~20 ms), so that ranks which disagree do not wait for each other
 * until the timeout. A rank posts c + SHM_CHECK_RING only after every
 * rank compared c (check_done, agree.c), so the records of c stay in
 * place until then. */
void shm_check_publish(shm_t* s, uint64_t c, const uint64_t* rec, int watch);
/* Whether this rank's waits in the watched call saw every other rank
 * reach a step of that call (so every rank has posted its record of it,
 * and of every call before). */
static inline int shm_check_saw_all(const shm_t* s) {
  for (int j = 0; j < s->nranks; j++)
    if (j != s->rank && s->check_saw[j] != s->check_call + 1) return 0;
  return 1;
}

/* Publishes that this rank compared the records of every call before
 * done (agree.c). */
static inline void shm_check_done_post(shm_t* s, uint64_t done) {
  atomic_store_explicit(&s->ctrl[s->rank].check_done, done, memory_order_release);
}
/* Without waiting: the records of the watched call that the peers posted
 * (this rank's own for those that did not), into recs; ends the watch.
 * Returns 1 if a posted record differs from this rank's. */
int shm_check_peek(shm_t* s, uint64_t* recs);

/* Checks the abort flag and the liveness of peer (or of all ranks with
 * peer -1); used by waits that are not on step counters. */
qcclResult_t shm_check_peers(shm_t* s, int peer);

/* Marks the segment aborted by this rank: peers' waits fail promptly. */
void shm_set_abort(shm_t* s);

/* The spin (µs) before a rank that waits for peer through the segment
 * outside shm_wait_* (a send or receive) yields: 0 when the peer last ran
 * on this rank's CPU and this rank could not move to a free one (spinning
 * would only hold the peer off), else the segment's spin. Publishes where
 * this rank runs. */
uint32_t shm_spin_for(shm_t* s, int peer);

/* Starts chunk g without waiting: shm_chunk_next takes the next chunk
 * number g (and publishes where this rank runs), and shm_test_chunk says
 * when its slot g%2 is free on every rank (chunk g-2 read everywhere). */
uint64_t shm_chunk_next(shm_t* s);
static inline qcclResult_t shm_test_chunk(shm_t* s, uint64_t g) {
  return g < 2 ? qcclSuccess : shm_test_all(s, 3 * (g - 2) + 3);
}

/* shm_test_chunk for a chunk that writes only bytes [off, off + len) of
 * this rank's slot g%2 and nothing else of the segment but its step (and
 * a "nowhere" reg: shm_reg_publish of {0, 0, -1, 0}). Such a chunk waits
 * only for the latest earlier chunk of this rank that it could disturb:
 * one of the same parity that wrote an overlapping part, or that was not
 * a part (any chunk tested with shm_test_chunk, or one this rank did not
 * write: unknown, so taken to be all of the slot), or older than the
 * SHM_PART_HIST chunks remembered. Small calls place successive chunks at
 * successive places of the slot (shm_rot), so an eager rank (a
 * Broadcast's or Scatter's root, a Gather's sender) runs up to
 * SHM_PART_HIST chunks ahead of its slowest reader instead of two: on
 * ranks that share cores it stages a burst while they wait for a core,
 * and they read theirs in a burst when they have it (docs/PERF.md,
 * "Eager calls run ahead"). */
qcclResult_t shm_test_chunk_part(shm_t* s, uint64_t g, size_t off, size_t len);

/* Whether the node's ranks fit its cores (none waits for a rank that
 * cannot run). */
static inline int shm_roomy(const shm_t* s) {
  return s->nranks <= s->ncores;
}

static inline char* shm_slot(shm_t* s, int rank, uint64_t g) {
  return s->slots + ((size_t)rank * 2 + (size_t)(g & 1)) * s->chunk_bytes;
}

/* Where in its slot (and result area) chunk g of a call stages the used
 * bytes, when they are small: successive calls take successive places, a
 * step apart (the bytes used, rounded up to 4 KiB), within the slot's
 * first span bytes, so a rank rewrites the lines a peer has just read
 * only every span / step-th call. Writing the very lines the peer read
 * two calls ago made a 2-rank AllReduce of 8 KiB take 2.7 us, places in
 * turn within 64 KiB 2.1 on the Xeon guest ("Small calls: where in the
 * slot"). A store to a line still in the reader's cache must first take
 * it back from there; a line the reader has since pushed out of its L2
 * comes from the shared cache, several times faster. So the span is
 * wide (rot_span, set at shm_open_segment): 1 MiB over the peers a
 * rank reads (1 MiB on 2 ranks, 256 KiB on 5), so that with both slots
 * and both lanes a reader reads more than its L2 (2 MiB on the AMD
 * guest) between two rewrites of one place; but at most rot_places
 * places (128 where the ranks fit the cores: 256 places of 4 KiB made a
 * 2-rank AllGather of 4 KiB take 0.79 us against 0.48, cause not
 * measured; 16 where they share them: 4 ranks on 2 cores lost 8-16 %
 * at 4 KiB with 85), at least SHM_ROT_SPAN, at most the slot. Only for
 * steps up to SHM_ROT_STEP_MAX: steps of 256-512 KiB in places of a
 * wide span ran 6-11 % slower (AllGather of 1 MiB, 36.0 -> 39.9 us), and
 * keep the 64 KiB span (one place). On the AMD guest, 2 ranks, shared
 * cache, AllGather, AlltoAll, AllReduce, Gather, Reduce and ReduceScatter
 * calls of 64 KiB took 0.33-0.52 of the time they took within a 64 KiB
 * span (AllGather 5.35 -> 2.78 us, AllReduce 9.84 -> 4.30;
 * docs/PERF.md, "Wide places"). shm_warm brings the 4 KiB span into the
 * owner's cache at init; tests/unit/unit_rot.c checks the places.
 * Every rank computes the same place from g and used. */
#define SHM_ROT_SPAN ((size_t)64 << 10)
#define SHM_ROT_STEP ((size_t)4 << 10) /* places are multiples of it */
#define SHM_ROT_STEP_MAX ((size_t)128 << 10)
#define SHM_ROT_WIDE ((size_t)1 << 20) /* the span over all the peers */
#define SHM_ROT_PLACES 128             /* the most places, ranks fitting the cores */
#define SHM_ROT_PLACES_SHARED 16       /* and ranks sharing them */
/* rot_span and rot_places from nranks, ncores and chunk_bytes (set) */
static inline void shm_rot_init(shm_t* s) {
  int w = s->nranks;
  s->rot_span = SHM_ROT_WIDE / (size_t)(w > 1 ? w - 1 : 1);
  s->rot_span = s->rot_span < SHM_ROT_SPAN ? SHM_ROT_SPAN : s->rot_span;
  s->rot_span = s->rot_span < s->chunk_bytes ? s->rot_span : s->chunk_bytes;
  s->rot_places = shm_roomy(s) ? SHM_ROT_PLACES : SHM_ROT_PLACES_SHARED;
}
static inline size_t shm_rot_span(const shm_t* s, size_t step) {
  if (step > SHM_ROT_STEP_MAX) return SHM_ROT_SPAN < s->rot_span ? SHM_ROT_SPAN : s->rot_span;
  size_t span = step * s->rot_places;
  span = span < SHM_ROT_SPAN ? SHM_ROT_SPAN : span;
  return span < s->rot_span ? span : s->rot_span;
}
static inline size_t shm_rot(const shm_t* s, uint64_t g, size_t used) {
  size_t step = (used + SHM_ROT_STEP - 1) & ~(SHM_ROT_STEP - 1);
  size_t k = step == 0 ? 0 : shm_rot_span(s, step) / step;
  return k > 1 ? (size_t)((g >> 1) % k) * step : 0;
}

/* Half-slot chunks: a staged call whose blocks span four slots and more
 * may cut them in half-slot chunks, placed at the slot's two halves in
 * turn (shm_half_rot), so that with shm_test_chunk_part a rank stages
 * chunk g + 1 while a peer still reads chunk g - 1 (Gather's senders run
 * three chunks ahead of the root instead of one; docs/PERF.md, "Gather:
 * the root's own block while it waits"). shm_half_span: the chunk's
 * bytes, a whole number of pages, or 0 where the call stays in whole
 * slots. Every rank computes the same from the block's bytes. */
static inline size_t shm_half_span(const shm_t* s, size_t bytes) {
  if (bytes < 4 * s->chunk_bytes || s->chunk_bytes < 2 * SHM_ROT_STEP) return 0;
  return s->chunk_bytes / 2 / SHM_ROT_STEP * SHM_ROT_STEP;
}
static inline size_t shm_half_rot(uint64_t g, size_t span) {
  return (size_t)((g >> 1) & 1) * span;
}

static inline char* shm_result(shm_t* s, int rank, uint64_t g) {
  return s->results + ((size_t)rank * 2 + (size_t)(g & 1)) * s->chunk_bytes;
}

/* One channel: its control lines, its ring, its cell. */
static inline size_t shm_chan_stride(const shm_t* s) {
  return sizeof(shm_chan_ctrl_t) + s->chan_bytes + s->cell_bytes;
}

static inline shm_chan_ctrl_t* shm_chan_ctrl(shm_t* s, int src, int dst) {
  size_t stride = shm_chan_stride(s);
  return (shm_chan_ctrl_t*)(s->chans + ((size_t)src * (size_t)s->nranks + (size_t)dst) * stride);
}

static inline char* shm_chan_data(shm_t* s, int src, int dst) {
  return (char*)(shm_chan_ctrl(s, src, dst) + 1);
}

/* The cell of channel src -> dst (shm_p2p.c): cell_bytes after its ring. */
static inline char* shm_chan_cell(shm_t* s, int src, int dst) {
  return shm_chan_data(s, src, dst) + s->chan_bytes;
}

#endif /* QCCL_TRANSPORT_SHM_H_ */
