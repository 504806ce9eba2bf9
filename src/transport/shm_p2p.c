/*
 * shm_p2p.c - point-to-point messages through the node's segment.
 *
 * Each ordered pair (src, dst) owns a ring of chan_bytes (a power of two)
 * and two counters on separate cache lines: head (bytes the sender wrote)
 * and tail (bytes the receiver consumed). A message is a 64-byte header
 * (magic, kind, byte count, address; one cache line) and its payload,
 * padded to whole lines, pushed into the ring as space frees up: header
 * and payload at once when the ring has room for both (a 4 KiB exchange
 * between 2 ranks: 1.36 us a call with a 24-byte header and separate
 * updates, 1.23 so, Xeon guest).
 *
 * The receiver finds a header by its stamp, the header line's last word,
 * which the sender writes last (after the payload of a whole message): the
 * header's ring position xor the sender's random key (shm.h, p2p_key), so
 * neither an older header nor payload bytes left at that place can pass
 * for it (but with odds of 2^-64). A whole message is then read without a
 * look at head: one line crosses the cores before the payload, where
 * polling head and then reading the header took two in turn (SendRecv on
 * 2 ranks: docs/PERF.md, "A header found by its stamp"). Head still
 * counts every byte, for a payload that follows its header in pieces (a
 * message larger than half the ring, or one the ring had no room for);
 * the receiver may see the stamp before the head that counts the header,
 * so its tail can be ahead of the head it reads (shm_pull).
 * The receiver checks the
 * header against its own size, so a mismatch is an error, not corruption,
 * and the receiver says so in the pair's control line (refused), so a
 * sender blocked on a full ring fails at once too. Each byte crosses
 * memory twice (copy in, copy out). The ring is 1 MiB up to 4 ranks
 * (shm.c): a ring the writer comes round to again before the reader's
 * cache has let its lines go pays for taking every line back from there
 * (a 2-rank exchange of 256 KiB: 6.1-7.1 GB/s with 256 KiB rings,
 * 13.9-17 with 1 MiB, AMD guest). 2 MiB on 2 ranks took 64 KiB from 5.7
 * to 3.8 us but 4-16 MiB messages 8-17 % longer, and was not kept
 * (docs/PERF.md, "Wide places").
 *
 * Cells: each channel also has a cell of a quarter of its ring after it,
 * so a pair has two. A rank holds, at first, the cell of its own channel
 * to the peer; a message that fits a cell goes there while its sender
 * holds one (the ring then carries only the header, kind P2P_CELL, which
 * names the cell), and the sender gives it up; the receiver takes the
 * payload out and holds that cell from then on. Holding moves with the
 * messages, so nothing but the headers is shared, and a cell is never
 * written before its reader is done with it. The point is where the lines
 * are: in an exchange or a reply a rank writes its next message into the
 * cell it has just read, lines its own cache holds, where the ring sends
 * it on to lines the peer's cache read last, each store taking its line
 * back from there (a 2-rank exchange of 16 and 64 KiB: 1.4 and 3.9 us a
 * call against 2.1 and 5.7 through the ring, AMD guest; docs/PERF.md,
 * "Cells that change hands"). A rank with no cell (one-way traffic: the
 * receiver ends up with both) sends through the ring as before.
 *
 * Single copy (cma.h): a message too large for the ring, or an exchange's
 * (a send whose call also receives from that peer) on a host whose ranks
 * fit its cores (when the segment's ranks agreed to use single copy, and
 * from CMA's threshold), sends only
 * its header, which then carries the sender's buffer address; the receiver
 * checks the size as for any header, reads the payload straight from the
 * sender's buffer with process_vm_readv, and counts it in the pair's
 * cma_done. The sender's request completes when cma_done reaches its
 * message's number (cma_sent when it announced it), so its buffer stays
 * valid until it has been read. Sends of a pair are serialised by the
 * caller, so both counters advance in the same order.
 *
 * A send that fits the ring may also go single copy where its call
 * receives too and the host's ranks outnumber its cores (cma.h,
 * cma_p2p_flex_use); the caller releases it once the call waits for
 * nothing else (transport.h), and a while later the sender takes it back:
 * whichever of the two first claims the message in the pair's cma_claim
 * (shm_cma_claim) owns it, the receiver to read it single copy, the sender
 * to push the payload after the header as a staged message. Either way
 * the receiver counts it in cma_done, so the numbers stay in step.
 *
 * Requests make progress only inside test(); the caller
 * tests a request only after the earlier one of the same pair and
 * direction completed (sendrecv.c), which keeps the stream in order.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/memcopy.h"
#include "core/wait.h"
#include "transport/cma.h"
#include "transport/shm.h"
#include "transport/transport.h"

#define P2P_MAGIC 0x50325051u /* "QP2P" */
/* magic (4), kind (4: P2P_STAGED, P2P_CMA or P2P_CELL), payload bytes (8),
 * the sender's buffer address for P2P_CMA or which cell for P2P_CELL (0:
 * the sender's channel's, 1: the receiver's) (8), for P2P_CMA the
 * message's number (8), zeros to a cache line: with the
 * payload padded to whole lines too, every payload starts on a line of the
 * ring and no line holds the ends of two messages */
#define P2P_HDR 64
#define P2P_LINE 64
#define P2P_WHOLE_AT 32            /* u32: 1 when the payload came with the header */
#define P2P_STAMP_AT (P2P_HDR - 8) /* u64: the stamp, written last */
enum { P2P_STAGED = 0, P2P_CMA = 1, P2P_CELL = 2 };

typedef struct {
  int send;
  int peer;
  int cma;  /* single copy: the ring carries only the header */
  int flex; /* a single-copy send the sender may take back once released */
  int cell; /* the payload goes through one of the pair's cells */
  /* a send's cell (0: this rank's channel's, 1: the peer's, -1: the
   * ring), chosen at its header's first try and kept: a header the full
   * ring held back must not go out later saying otherwise (the cell this
   * rank holds may have changed meanwhile); the cell stays this rank's
   * until it goes */
  int cell_k;
  int cell_chosen;
  double release_at; /* clock_now() when the caller released it (transport.h), else 0 */
  uint64_t seq;      /* a single-copy send: its number in the pair's cma_sent */
  char* buf;
  size_t bytes; /* payload */
  size_t pad;   /* ring bytes after a staged payload, to the next line */
  size_t done;  /* header + payload (+ pad) bytes moved */
  unsigned char hdr[P2P_HDR];
} shm_req_t;

/* The ring bytes after a staged payload of n bytes, to the next line. */
static size_t shm_pad(size_t n) {
  return (P2P_LINE - n % P2P_LINE) % P2P_LINE;
}

/* Copies n bytes of buf (none: buf NULL, the pad) into the ring at
 * position pos; at most what fits (space). */
static size_t shm_ring_put(shm_t* s, char* ring, uint64_t pos, size_t space, const void* buf,
                           size_t n) {
  size_t k = n < space ? n : space;
  if (k == 0 || buf == NULL) return k;
  size_t at = (size_t)pos & (s->chan_bytes - 1);
  size_t first = s->chan_bytes - at < k ? s->chan_bytes - at : k;
  shm_handoff_copy(s, ring + at, buf, first, k);
  shm_handoff_copy(s, ring, (const char*)buf + first, k - first, k);
  return k;
}

/* Copies n bytes of the ring from position pos into buf. */
static void shm_ring_get(const shm_t* s, const char* ring, uint64_t pos, void* buf, size_t n) {
  size_t at = (size_t)pos & (s->chan_bytes - 1);
  size_t first = s->chan_bytes - at < n ? s->chan_bytes - at : n;
  copy_data(buf, ring + at, first);
  copy_data((char*)buf + first, ring, n - first);
}

/* The sender's free ring bytes to peer at head: from the tail last read
 * (acquired then) while it leaves room for need, else from the tail read
 * again (the receiver rewrites that line at every message it takes). */
static size_t shm_space(shm_t* s, int peer, const shm_chan_ctrl_t* c, uint64_t head, size_t need) {
  uint64_t tail = s->tail_seen[peer];
  if (s->chan_bytes - (size_t)(head - tail) < need) {
    tail = atomic_load_explicit(&c->tail, memory_order_acquire);
    s->tail_seen[peer] = tail;
  }
  return s->chan_bytes - (size_t)(head - tail);
}

/* Pushes what fits of n bytes of buf (none: buf NULL, the pad) under one
 * update of head. */
static size_t shm_push(shm_t* s, int peer, const void* buf, size_t n) {
  shm_chan_ctrl_t* c = shm_chan_ctrl(s, s->rank, peer);
  char* ring = shm_chan_data(s, s->rank, peer);
  uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
  size_t k = shm_ring_put(s, ring, head, shm_space(s, peer, c, head, n), buf, n);
  if (k == 0) return 0;
  atomic_store_explicit(&c->head, head + k, memory_order_release);
  return k;
}

/* The stamp of the header at ring position pos of src's rings. */
static inline uint64_t shm_stamp(const shm_t* s, int src, uint64_t pos) {
  return pos ^ s->p2p_key[src];
}

static inline _Atomic uint64_t* shm_stamp_word(char* line) {
  return (_Atomic uint64_t*)(void*)(line + P2P_STAMP_AT);
}

/* Publishes header hdr at head, with the payload (n bytes of buf, then pad)
 * before it where whole allows and the ring has room for all, or in cell
 * (not NULL) once the ring has room for the header: the payload, the
 * header, then its stamp, then head. Returns the ring bytes published: 0
 * (no room for the header), P2P_HDR, or all of it. */
static size_t shm_push_header(shm_t* s, int peer, unsigned char* hdr, const void* buf, size_t n,
                              size_t pad, int whole, char* cell) {
  shm_chan_ctrl_t* c = shm_chan_ctrl(s, s->rank, peer);
  char* ring = shm_chan_data(s, s->rank, peer);
  uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
  size_t need = P2P_HDR + (whole ? n + pad : 0);
  size_t space = shm_space(s, peer, c, head, need);
  if (space < P2P_HDR) return 0;
  whole = whole && space >= need;
  if (whole) shm_ring_put(s, ring, head + P2P_HDR, space - P2P_HDR, buf, n);
  if (cell != NULL) /* ordinary stores in either mode: shm_cell_pick */
    copy_out(cell, buf, n, shm_handoff_nt(s, n));
  uint32_t w = (uint32_t)whole;
  memcpy(hdr + P2P_WHOLE_AT, &w, 4);
  /* positions are whole lines apart, so a header never wraps */
  char* line = ring + ((size_t)head & (s->chan_bytes - 1));
  memcpy(line, hdr, P2P_STAMP_AT);
  atomic_store_explicit(shm_stamp_word(line), shm_stamp(s, s->rank, head), memory_order_release);
  size_t k = P2P_HDR + (whole ? n + pad : 0);
  atomic_store_explicit(&c->head, head + k, memory_order_release);
  return k;
}

/* The header at the receiver's tail, once its stamp is there: copied
 * into hdr, and *whole set when its payload came with it. Returns 0 while
 * there is none. Consumes nothing (shm_consume). */
static int shm_pull_header(shm_t* s, int peer, unsigned char* hdr, int* whole) {
  shm_chan_ctrl_t* c = shm_chan_ctrl(s, peer, s->rank);
  char* ring = shm_chan_data(s, peer, s->rank);
  uint64_t tail = atomic_load_explicit(&c->tail, memory_order_relaxed);
  char* line = ring + ((size_t)tail & (s->chan_bytes - 1));
  if (atomic_load_explicit(shm_stamp_word(line), memory_order_acquire) != shm_stamp(s, peer, tail))
    return 0;
  memcpy(hdr, line, P2P_STAMP_AT);
  uint32_t w;
  memcpy(&w, hdr + P2P_WHOLE_AT, 4);
  *whole = w == 1;
  return 1;
}

/* The receiver takes the n bytes after its header's line (the payload of a
 * whole message) into buf. */
static void shm_pull_payload(shm_t* s, int peer, void* buf, size_t n) {
  shm_chan_ctrl_t* c = shm_chan_ctrl(s, peer, s->rank);
  const char* ring = shm_chan_data(s, peer, s->rank);
  shm_ring_get(s, ring, atomic_load_explicit(&c->tail, memory_order_relaxed) + P2P_HDR, buf, n);
}

/* The receiver frees n ring bytes from its tail. */
static void shm_consume(shm_t* s, int peer, size_t n) {
  shm_chan_ctrl_t* c = shm_chan_ctrl(s, peer, s->rank);
  uint64_t tail = atomic_load_explicit(&c->tail, memory_order_relaxed);
  atomic_store_explicit(&c->tail, tail + n, memory_order_release);
}

/* Pulls up to n bytes into buf (NULL: skips them, the pad). The tail may
 * be ahead of the head seen here: a header found by its stamp is consumed
 * before the sender's head counts it (its store of head may not have
 * reached this core yet); then nothing is there yet. */
static size_t shm_pull(shm_t* s, int peer, void* buf, size_t n) {
  shm_chan_ctrl_t* c = shm_chan_ctrl(s, peer, s->rank);
  const char* ring = shm_chan_data(s, peer, s->rank);
  uint64_t tail = atomic_load_explicit(&c->tail, memory_order_relaxed);
  uint64_t head = atomic_load_explicit(&c->head, memory_order_acquire);
  if ((int64_t)(head - tail) <= 0) return 0;
  size_t avail = (size_t)(head - tail);
  size_t k = n < avail ? n : avail;
  if (k == 0) return 0;
  if (buf != NULL) shm_ring_get(s, ring, tail, buf, k);
  atomic_store_explicit(&c->tail, tail + k, memory_order_release);
  return k;
}

/* The cell a send of n bytes to peer may take (0 or 1, shm.h's hold
 * words), -1 when none: the one this rank took last when it holds it,
 * the lines it has just read, written with ordinary stores whatever this
 * rank's handoffs into the ring use (shm_handoff.c): only the peer's copy
 * of each line is dropped, and where the cores share no cache the peer
 * then fetches each line once from this core. Without a shared cache (the
 * AMD guest, 2-rank SendRecv, steady runs, 117 paired medians) that took
 * 0.79-0.93 of the time of the ring written streaming at 8-256 KiB, 0.96
 * at 4 KiB; with one the same (0.98-1.00; docs/PERF.md, "The mode from
 * the first call"). Until 2026-12-07 a rank whose handoffs streamed took
 * the ring: cells written streaming had taken 1.16-1.26x the ring's time
 * at 16-64 KiB ("Cells that change hands"). */
static int shm_cell_pick(const shm_t* s, int peer, size_t n) {
  if (n == 0 || n > s->cell_bytes) return -1;
  return shm_hold_pick(s->p2p_hold[peer]);
}

/* Cell k of the pair with peer as this rank names it: 0 is its own
 * channel's, 1 the peer's channel's. */
static char* shm_cell_at(shm_t* s, int peer, int k) {
  return k == 0 ? shm_chan_cell(s, s->rank, peer) : shm_chan_cell(s, peer, s->rank);
}

/* A request: one the segment kept, else a new one. */
static shm_req_t* shm_req_get(shm_t* s) {
  if (s->p2p_nfree > 0) return s->p2p_free[--s->p2p_nfree];
  return malloc(sizeof(shm_req_t));
}

/* Ends request q: kept for the next (up to SHM_P2P_KEEP), else freed. */
static void shm_req_put(shm_t* s, shm_req_t* q) {
  if (s->p2p_nfree < SHM_P2P_KEEP)
    s->p2p_free[s->p2p_nfree++] = q;
  else
    free(q);
}

static qcclResult_t shm_post_req(shm_t* s, int send, int cma, int peer, void* buf, size_t n,
                                 void** req) {
  shm_req_t* q = shm_req_get(s);
  if (!q) return QCCL_ERR(qcclSystemError, "out of memory");
  *q = (shm_req_t){
      .send = send, .cma = cma, .peer = peer, .buf = buf, .bytes = n, .pad = cma ? 0 : shm_pad(n)};
  memset(q->hdr, 0, sizeof q->hdr);
  uint32_t m = P2P_MAGIC, kind = cma ? P2P_CMA : P2P_STAGED;
  uint64_t b = n, at = (uint64_t)(uintptr_t)buf;
  memcpy(q->hdr, &m, 4);
  memcpy(q->hdr + 4, &kind, 4);
  memcpy(q->hdr + 8, &b, 8);
  memcpy(q->hdr + 16, &at, 8);
  *req = q;
  return qcclSuccess;
}

static qcclResult_t shm_isend(void* ctx, int peer, const void* buf, size_t n, int flags,
                              void** req) {
  shm_t* s = ctx;
  int cma = cma_p2p_use(s, n, P2P_HDR) || ((flags & P2P_SEND_PAIRED) && cma_p2p_paired_use(s, n));
  int flex = !cma && (flags & P2P_SEND_RELEASABLE) && cma_p2p_flex_use(s, n);
  qcclResult_t r = shm_post_req(s, 1, cma || flex, peer, (void*)buf, n, req);
  if (r == qcclSuccess) ((shm_req_t*)*req)->flex = flex;
  return r;
}

static void shm_release(void* ctx, void* req) {
  (void)ctx;
  ((shm_req_t*)req)->release_at = clock_now();
}

/* Single-copy message seq of pair c belongs to whichever of its receiver
 * (who 0: reads it from the sender's buffer) and sender (who 1: takes it
 * back and sends the payload through the ring after its header) claims it
 * first; 1 when who did. The sender claims only its one message in flight
 * (sends of a pair are serialised), but a message it took back is
 * complete, so it may claim later ones before the receiver gets to that
 * one: a claim beyond seq means seq was taken back too. */
static int shm_cma_claim(shm_chan_ctrl_t* c, uint64_t seq, int who) {
  uint64_t cur = atomic_load_explicit(&c->cma_claim, memory_order_acquire);
  for (;;) {
    if (cur >> 1 > seq) return 0;
    if (cur >> 1 == seq) return (int)(cur & 1) == who;
    if (atomic_compare_exchange_weak_explicit(&c->cma_claim, &cur, seq << 1 | (uint64_t)who,
                                              memory_order_acq_rel, memory_order_acquire))
      return 1;
  }
}

static qcclResult_t shm_irecv(void* ctx, int peer, void* buf, size_t n, void** req) {
  return shm_post_req(ctx, 0, 0, peer, buf, n, req);
}

/* The receiver's check of a complete header. */
static qcclResult_t shm_check_header(shm_t* s, shm_req_t* q) {
  uint32_t m, kind;
  uint64_t b;
  memcpy(&m, q->hdr, 4);
  memcpy(&kind, q->hdr + 4, 4);
  memcpy(&b, q->hdr + 8, 8);
  if (m != P2P_MAGIC || kind > P2P_CELL)
    return QCCL_ERR(qcclInternalError, "corrupt message header from rank %d", q->peer);
  q->cma = kind == P2P_CMA;
  q->cell = kind == P2P_CELL;
  if (q->cma || q->cell) q->pad = 0; /* the payload does not come through the ring */
  if (b != q->bytes) {
    /* tell the sender, which may be waiting for ring space we will never free */
    atomic_store_explicit(&shm_chan_ctrl(s, q->peer, s->rank)->refused, (uint64_t)q->bytes + 1,
                          memory_order_release);
    return QCCL_ERR(qcclInvalidUsage,
                    "rank %d sent %llu bytes but the matching receive on rank %d expects %zu "
                    "(count or datatype differ)",
                    q->peer, (unsigned long long)b, s->rank, q->bytes);
  }
  return qcclSuccess;
}

static qcclResult_t shm_test(void* ctx, void* req, int* done) {
  shm_t* s = ctx;
  shm_req_t* q = req;
  size_t total = P2P_HDR + q->bytes + q->pad;
  if (q->send) {
    uint64_t no =
        atomic_load_explicit(&shm_chan_ctrl(s, s->rank, q->peer)->refused, memory_order_acquire);
    if (no != 0) {
      size_t bytes = q->bytes;
      int peer = q->peer;
      shm_req_put(s, q);
      return QCCL_ERR(qcclInvalidUsage,
                      "rank %d refused the message of %zu bytes from rank %d: its matching "
                      "receive expects %llu (count or datatype differ)",
                      peer, bytes, s->rank, (unsigned long long)(no - 1));
    }
  }
  while (q->done < total) {
    size_t k;
    if (q->done < P2P_HDR) {
      if (q->send && q->cma && q->seq == 0) {
        /* numbered once, when its header first tries to go out (a full
         * ring may hold it back for several tests) */
        shm_chan_ctrl_t* c = shm_chan_ctrl(s, s->rank, q->peer);
        q->seq = ++c->cma_sent;
        memcpy(q->hdr + 24, &q->seq, 8);
      }
      /* a header goes whole (it is one line); a staged send offers the
       * payload with it, when the ring has room for both */
      int whole;
      if (q->send && !q->cell_chosen) {
        q->cell_k = q->cma ? -1 : shm_cell_pick(s, q->peer, q->bytes);
        q->cell_chosen = 1;
      }
      if (q->send && q->cell_k >= 0) {
        /* the cell this rank holds: the payload goes there, the header
         * says which as the sender names it (the receiver's cell 1 is the
         * sender's 0) */
        uint32_t kind = P2P_CELL;
        uint64_t which = (uint64_t)q->cell_k;
        memcpy(q->hdr + 4, &kind, 4);
        memcpy(q->hdr + 16, &which, 8);
        k = shm_push_header(s, q->peer, q->hdr, q->buf, q->bytes, 0, 0,
                            shm_cell_at(s, q->peer, q->cell_k));
        if (k != 0) {
          s->p2p_hold[q->peer] = shm_hold_give(s->p2p_hold[q->peer], q->cell_k);
          q->cell = 1;
          q->pad = 0;
          total = P2P_HDR + q->bytes;
          k = total;
        }
      } else if (q->send) {
        whole = !q->cma && q->bytes + q->pad <= s->chan_bytes / 2;
        k = shm_push_header(s, q->peer, q->hdr, q->buf, q->bytes, q->pad, whole, NULL);
      } else if (!shm_pull_header(s, q->peer, q->hdr, &whole)) {
        k = 0;
      } else {
        qcclResult_t r = shm_check_header(s, q);
        whole = whole && !q->cma && !q->cell && r == qcclSuccess;
        if (whole && q->bytes > 0) shm_pull_payload(s, q->peer, q->buf, q->bytes);
        k = P2P_HDR + (whole ? q->bytes + q->pad : 0);
        shm_consume(s, q->peer, k);
        if (q->cell) {
          /* the payload from the cell, which this rank then holds (a
           * message it refused is dropped, the cell taken all the same) */
          uint64_t which;
          memcpy(&which, q->hdr + 16, 8);
          int ck = which ? 0 : 1;
          if (r == qcclSuccess) copy_data(q->buf, shm_cell_at(s, q->peer, ck), q->bytes);
          s->p2p_hold[q->peer] = shm_hold_take(s->p2p_hold[q->peer], ck);
          k += q->bytes;
        }
        if (r == qcclSuccess && q->cma) {
          uint64_t at, seq;
          memcpy(&at, q->hdr + 16, 8);
          memcpy(&seq, q->hdr + 24, 8);
          shm_chan_ctrl_t* c = shm_chan_ctrl(s, q->peer, s->rank);
          if (shm_cma_claim(c, seq, 0)) {
            /* the payload, straight from the sender's buffer */
            r = cma_read_from(s, q->peer, (uintptr_t)at, q->buf, q->bytes);
            k += q->bytes;
          } else {
            /* taken back: the payload follows the header through the ring */
            q->cma = 0;
            q->pad = shm_pad(q->bytes);
          }
          if (r == qcclSuccess) atomic_fetch_add_explicit(&c->cma_done, 1, memory_order_release);
        }
        if (r != qcclSuccess) {
          shm_req_put(s, q);
          return r;
        }
      }
    } else if (q->cma) {
      /* a single-copy send: done once the receiver has read it */
      shm_chan_ctrl_t* c = shm_chan_ctrl(s, s->rank, q->peer);
      uint64_t read = atomic_load_explicit(&c->cma_done, memory_order_acquire);
      k = read >= q->seq ? q->bytes : 0;
      if (k == 0 && q->flex && q->release_at > 0 &&
          clock_now() - q->release_at > CMA_P2P_TAKEBACK_S && shm_cma_claim(c, q->seq, 1)) {
        /* the call has waited for nothing else for a while: the payload
         * goes through the ring, as an eager send's */
        q->cma = 0;
        q->pad = shm_pad(q->bytes);
        total = P2P_HDR + q->bytes + q->pad;
        continue;
      }
    } else if (q->done < P2P_HDR + q->bytes) {
      char* p = q->buf + (q->done - P2P_HDR);
      size_t left = P2P_HDR + q->bytes - q->done;
      k = q->send ? shm_push(s, q->peer, p, left) : shm_pull(s, q->peer, p, left);
    } else {
      /* the pad: only the counters move */
      k = q->send ? shm_push(s, q->peer, NULL, total - q->done)
                  : shm_pull(s, q->peer, NULL, total - q->done);
    }
    if (k == 0) break;
    q->done += k;
    total = P2P_HDR + q->bytes + q->pad; /* a header that said single copy drops the pad */
  }
  *done = q->done == total;
  if (*done) shm_req_put(s, q);
  return qcclSuccess;
}

static size_t shm_moved(void* ctx, void* req) {
  (void)ctx;
  shm_req_t* q = req;
  size_t d = q->done > P2P_HDR ? q->done - P2P_HDR : 0;
  return d < q->bytes ? d : q->bytes;
}

static void shm_cancel(void* ctx, void* req) {
  shm_req_put(ctx, req);
}

static qcclResult_t shm_check(void* ctx, int peer) {
  return shm_check_peers(ctx, peer);
}

const transport_ops_t shm_p2p_ops = {.name = "shm",
                                     .isend = shm_isend,
                                     .irecv = shm_irecv,
                                     .test = shm_test,
                                     .moved = shm_moved,
                                     .cancel = shm_cancel,
                                     .check = shm_check,
                                     .remote = 0,
                                     .release = shm_release};
