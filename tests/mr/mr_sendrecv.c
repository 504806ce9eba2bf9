/*
 * mr_sendrecv - point-to-point: qcclSend / qcclRecv, alone and in groups.
 *
 * Cases (data is arbitrary bits, compared bitwise; send buffers must stay
 * unchanged and nothing may be written outside a receive buffer):
 *   pairs     every pair of ranks exchanges messages outside any group, in
 *             one global order (a sends then receives, b the reverse), the
 *             dtype rotating over the pairs, counts 0, 1 and 1009;
 *   order     outside a group, three messages a -> b in a row: the
 *             receives get them in order;
 *   grouporder inside one group, three messages to every peer and three
 *             receives from every peer: matched in order per pair;
 *   ring      inside a group, every rank sends to rank + k and receives
 *             from rank - k, with the receive posted first on odd ranks:
 *             every shift k at count 1009, every dtype at 1009, and counts
 *             999983 (f64) and 2^22 (bf16: the 8 MiB shift that deadlocks
 *             without grouping; u64: 32 MiB);
 *   reuse     outside a group, rank 0 sends three messages (one that
 *             fills the pair's ring, then two of 1 MiB + 3 words, whose
 *             headers wait for room) from one buffer to every other rank,
 *             refilling it as
 *             soon as each qcclSend returns, while the receiver posts
 *             late (50 ms): a send returns only once its bytes are out of
 *             the buffer (the single-copy rendezvous is read from it);
 *   eager     outside a group, every rank sends 128 KiB to rank + 1 and
 *             only then receives from rank - 1: a message that fits in the
 *             pair's ring (1 MiB up to 4 ranks, 256 KiB up to 16)
 *             completes before its receive is posted, so this send-first
 *             ring runs (it deadlocked with every send single copy); one
 *             host only (LOCAL_WORLD_SIZE = W);
 *   takeback  rank 0 sends three 160 KiB messages to rank 1, each in a
 *             group with a receive from rank 2 (which sends at once),
 *             refilling its buffer for the next as soon as a group
 *             returns, while rank 1 posts its receives late (30 ms): a
 *             message that fits the ring but went out single copy (a call
 *             that also receives, ranks outnumbering the cores: cma.h) is
 *             taken back and sent through the ring once the call's
 *             receive is done, the second before rank 1 has seen the
 *             first; W >= 3;
 *   release   three ranks: rank 0 sends 160 KiB to rank 1 in a group with
 *             a receive from rank 2, and only in its next call sends to
 *             rank 2, which sends to rank 1 only after that; rank 1
 *             receives from rank 2 first: the group's send must complete
 *             without its receiver once the receive is done (it deadlocked
 *             while such a send waited for its reader); one host only;
 *   halves    inside a group, two sends in place: each half of one buffer
 *             to a neighbour, each half received from the other one;
 *   self      inside a group, a send to self and a receive from self;
 *   a2a       inside a group, a different count for every (src, dst) pair,
 *             self included (an all-to-all-v);
 *   zero      count 0 with NULL buffers inside a group;
 *   nested    a group inside a group: only the outer end runs the calls;
 *   mixed     an AllReduce, a ring shift and a Broadcast in one group.
 *   wrap      outside a group, rank 0 sends 400 messages to rank 1 (and
 *             rank 1 as many to rank 0) of seeded sizes 0 B-96 KiB, in
 *             batches of 8 each side sends before it receives the other's
 *             (200 in quick mode): the headers land on
 *             lines of the pair's ring that earlier payloads filled, over
 *             several turns of it, some whole, some with the ring too full
 *             for their payload, and in the second half (4032 bytes each)
 *             where the headers of the turn before lay; the payloads are
 *             zeros, ones, words that
 *             count like ring positions, or random bytes (a receiver finds
 *             a header by its stamp, shm_p2p.c: no payload may pass for
 *             one).
 *   pieces    ranks 0 and 1 send each other 300 messages larger than half
 *             the pair's ring (128 KiB + 1 B to 1 MiB + 5), in exchanges
 *             (some in place) and one way: the payload follows its header
 *             in pieces.
 *   cells     ranks 0 and 1, 500 steps of seeded patterns: an exchange in
 *             a group (some in place), one way, a reply (one way and
 *             back), a burst (three sends before the other receives
 *             three), of seeded sizes 1 B-320 KiB and the cell's size and
 *             its neighbours: a message that fits goes through a cell the
 *             sender holds, and who holds which of the pair's two cells
 *             moves with every such message (shm_p2p.c); a cell written
 *             again before its reader took it would show as another
 *             message's bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mr_util.h"

#define MIB ((size_t)1 << 20)

/* element base of the message src -> dst number m (distinct streams) */
static size_t msg_base(int dst, int m) {
  return ((size_t)dst * 8 + (size_t)m) * ((size_t)1 << 32);
}

typedef struct {
  mr_buf_t buf;
  uint64_t hash;
} sbuf_t;

static void make_send(mr_case_t* c, sbuf_t* s, qcclDataType_t dt, size_t n, int dst, int m) {
  mr_buf_alloc(&s->buf, n * mr_dt_size(dt), (c->cseed >> (8 + m)) % 4 * mr_dt_size(dt));
  mr_fill(dt, qcclSum, MR_GEN_RAW, c->cseed, c->t->rank, c->t->nranks, s->buf.p, msg_base(dst, m),
          n);
  s->hash = mr_hash(s->buf.p, s->buf.bytes);
}

static void check_send(mr_case_t* c, sbuf_t* s, const char* what) {
  mr_buf_check_guards(c, &s->buf, what);
  if (mr_hash(s->buf.p, s->buf.bytes) != s->hash) mr_case_fail(c, "%s was modified", what);
  mr_buf_free(&s->buf);
}

static void check_recv(mr_case_t* c, mr_buf_t* b, qcclDataType_t dt, size_t n, int src, int m,
                       const char* what) {
  mr_buf_check_guards(c, b, what);
  mr_check_copy(c, dt, b->p, 0, n, src, msg_base(c->t->rank, m), what);
  mr_buf_free(b);
}

/* Payload k of the wrap case, n bytes: zeros, ones, u64 words counting
 * in steps of 64 from a seeded start (ring positions' look), or random. */
static void wrap_fill(uint64_t cseed, int src, int k, unsigned char* p, size_t n) {
  uint64_t x = mr_mix(cseed ^ ((uint64_t)src << 40) ^ (uint64_t)k);
  switch (k % 4) {
    case 0:
      memset(p, 0, n);
      break;
    case 1:
      memset(p, 0xff, n);
      break;
    case 2:
      for (size_t i = 0; i < n; i++) {
        uint64_t w = (x & ~(uint64_t)63) + 64 * (i / 8);
        p[i] = (unsigned char)(w >> (8 * (i % 8)));
      }
      break;
    default:
      for (size_t i = 0; i < n; i++) {
        if (i % 8 == 0) x = mr_mix(x);
        p[i] = (unsigned char)(x >> (8 * (i % 8)));
      }
  }
}

/* Messages larger than half the pair's ring, whose payload follows the
 * header in pieces (shm_p2p.c), between ranks 0 and 1, 300 times: seeded
 * sizes from half the default ring + 1 byte to 1 MiB + 5, the payloads as
 * in the wrap case; a third as exchanges in a group (every fourth of all
 * in place), the rest one way and then the other, outside a group, so
 * that the receiver waits for the header. The receiver finds the header
 * by its stamp before the sender's head counter may show it: the pieces
 * must be counted from head, not from a tail already past it (they were,
 * until 2026-12-06: 16 of 20 runs read past the ring, a crash, or another
 * message's bytes). Meant for the staged path: the suite runs it with
 * single copy off (mr_sendrecv_nocma_w2); where the init probe turns single
 * copy on, only the one-way messages that fit the ring take the pieces
 * path. */
static void case_pieces(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv pieces")) return;
  const int me = t->rank, M = 300;
  if (t->nranks < 2 || me > 1) {
    mr_case_end(&c);
    return;
  }
  const int peer = 1 - me;
  const size_t hi = MIB + 5;
  uint64_t st = c.cseed ^ 0x5045; /* sizes: the same on both ranks */
  unsigned char* want = malloc(hi);
  mr_buf_t sb, rb;
  for (int k = 0; k < M; k++) {
    size_t n[2];
    for (int d = 0; d < 2; d++)
      n[d] = k % 5 == 0 ? (128 << 10) + 1 + (size_t)d : mr_rand_range(&st, (128 << 10) + 1, hi);
    int inplace = k % 4 == 3; /* one size both ways */
    if (inplace) n[1] = n[0];
    mr_buf_alloc(&sb, n[me], (size_t)k % 8);
    wrap_fill(c.cseed, me, k, sb.p, n[me]);
    if (!inplace) mr_buf_alloc(&rb, n[peer], (size_t)(k + 3) % 8);
    unsigned char* rp = inplace ? sb.p : rb.p;
    if (k % 3 == 0 || inplace) {
      MR_OK(&c, qcclGroupStart());
      MR_OK(&c, qcclSend(sb.p, n[me], qcclUint8, peer, t->comm, NULL));
      MR_OK(&c, qcclRecv(rp, n[peer], qcclUint8, peer, t->comm, NULL));
      MR_OK(&c, qcclGroupEnd());
    } else {
      /* one way, then the other: the receiver waits for the header */
      for (int d = 0; d < 2; d++) {
        if ((d == 0) == (me == k % 2))
          MR_OK(&c, qcclSend(sb.p, n[me], qcclUint8, peer, t->comm, NULL));
        else
          MR_OK(&c, qcclRecv(rp, n[peer], qcclUint8, peer, t->comm, NULL));
      }
    }
    wrap_fill(c.cseed, peer, k, want, n[peer]);
    char what[80];
    snprintf(what, sizeof what, "message %d (%zu bytes%s) from rank %d", k, n[peer],
             inplace ? ", in place" : "", peer);
    mr_buf_check_guards(&c, inplace ? &sb : &rb, what);
    if (memcmp(rp, want, n[peer]) != 0) mr_case_fail(&c, "%s differs", what);
    if (!inplace) {
      wrap_fill(c.cseed, me, k, want, n[me]);
      if (memcmp(sb.p, want, n[me]) != 0) mr_case_fail(&c, "sendbuff of message %d changed", k);
      mr_buf_free(&rb);
    }
    mr_buf_free(&sb);
  }
  free(want);
  mr_case_end(&c);
}

static void case_wrap(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv wrap")) return;
  const int me = t->rank, M = t->quick ? 200 : 400;
  if (t->nranks < 2 || me > 1) {
    mr_case_end(&c);
    return;
  }
  const int peer = 1 - me;
  uint64_t st[2] = {c.cseed ^ 0x5752, c.cseed ^ 0x5753}; /* sizes: the same on both ranks */
  size_t sizes[2][400];
  for (int k = 0; k < M; k++)
    for (int d = 0; d < 2; d++) {
      size_t r = mr_rand_range(&st[d], 0, 99);
      /* mostly small, some up to 96 KiB; a few of 0 bytes. The second
       * half all of 4032: with its header a message is 4 KiB of ring, so
       * every header lands where one of the turn before lay, and a
       * receiver that posts first finds that older header there */
      sizes[d][k] = k >= M / 2 ? 4032
                    : r < 5    ? 0
                    : r < 70   ? mr_rand_range(&st[d], 1, 4096)
                               : mr_rand_range(&st[d], 4097, 96 << 10);
    }
  unsigned char* sb = malloc(96 << 10);
  unsigned char* want = malloc(96 << 10);
  mr_buf_t r;
  /* in batches of 8: rank 0 sends its 8 and then receives 8, rank 1 the
   * reverse, so the sender runs ahead and the ring fills now and then */
  for (int k0 = 0; k0 < M; k0 += 8)
    for (int step = 0; step < 2; step++) {
      int sending = (step == 0) == (me == 0);
      for (int k = k0; k < k0 + 8 && k < M; k++) {
        size_t n = sizes[sending ? me : peer][k];
        if (sending) {
          wrap_fill(c.cseed, me, k, sb, n);
          MR_OK(&c, qcclSend(sb, n, qcclUint8, peer, t->comm, NULL));
          continue;
        }
        mr_buf_alloc(&r, n, (size_t)k % 8);
        MR_OK(&c, qcclRecv(r.p, n, qcclUint8, peer, t->comm, NULL));
        wrap_fill(c.cseed, peer, k, want, n);
        char what[64];
        snprintf(what, sizeof what, "message %d (%zu bytes) from rank %d", k, n, peer);
        mr_buf_check_guards(&c, &r, what);
        if (n > 0 && memcmp(r.p, want, n) != 0) mr_case_fail(&c, "%s differs", what);
        mr_buf_free(&r);
      }
    }
  free(sb);
  free(want);
  mr_case_end(&c);
}

/* The sizes case_cells draws: around the default cell (a quarter of the
 * 1 MiB ring: 256 KiB) and the small cell of mr_sendrecv_cell4k_w2 */
static size_t cells_size(uint64_t* st) {
  static const size_t edge[] = {
      1, 64, 4095, 4096, 4097, (256 << 10) - 1, 256 << 10, (256 << 10) + 1};
  size_t r = mr_rand_range(st, 0, 99);
  if (r < 20) return edge[mr_rand_range(st, 0, sizeof edge / sizeof edge[0] - 1)];
  if (r < 60) return mr_rand_range(st, 1, 8192);
  return mr_rand_range(st, 8193, 320 << 10);
}

static void case_cells(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv cells")) return;
  const int me = t->rank, M = t->quick ? 250 : 500;
  if (t->nranks < 2 || me > 1) {
    mr_case_end(&c);
    return;
  }
  const int peer = 1 - me;
  const size_t hi = 320 << 10;
  const char* ring = getenv("QCCL_SHM_P2P_BYTES"); /* the default up to 4 ranks: 1 MiB */
  const size_t burst_max = (ring ? (size_t)atoll(ring) : MIB) * 3 / 10;
  uint64_t st = c.cseed ^ 0x43454c4c; /* patterns and sizes: the same on both ranks */
  unsigned char* want = malloc(hi);
  mr_buf_t sb[3], rb[3];
  int id = 0; /* message number, for the payloads */
  for (int k = 0; k < M; k++) {
    int pat = (int)mr_rand_range(&st, 0, 3), first = (int)mr_rand_range(&st, 0, 1);
    /* the messages of this step: from, size (and in place for exchanges) */
    int nm = pat == 0 ? 2 : pat == 1 ? 1 : pat == 2 ? 2 : 3;
    int from[3];
    size_t n[3];
    for (int i = 0; i < nm; i++) {
      from[i] = pat == 0 ? i : pat == 2 ? (first + i) % 2 : first;
      n[i] = cells_size(&st);
    }
    /* a burst's three sends must fit the ring together (each returns
     * once its bytes are out of the buffer) */
    for (int i = 0; pat == 3 && i < nm; i++)
      if (n[i] > burst_max) n[i] = burst_max;
    int inplace = pat == 0 && mr_rand_range(&st, 0, 3) == 0;
    if (inplace) n[1] = n[0];
    char what[96];
    if (pat == 0) {
      /* an exchange in a group: message 0 from rank 0, message 1 from rank 1 */
      mr_buf_alloc(&sb[0], n[me], (size_t)k % 8);
      wrap_fill(c.cseed, me, id + me, sb[0].p, n[me]);
      if (!inplace) mr_buf_alloc(&rb[0], n[peer], (size_t)(k + 5) % 8);
      unsigned char* rp = inplace ? sb[0].p : rb[0].p;
      MR_OK(&c, qcclGroupStart());
      MR_OK(&c, qcclSend(sb[0].p, n[me], qcclUint8, peer, t->comm, NULL));
      MR_OK(&c, qcclRecv(rp, n[peer], qcclUint8, peer, t->comm, NULL));
      MR_OK(&c, qcclGroupEnd());
      wrap_fill(c.cseed, peer, id + peer, want, n[peer]);
      snprintf(what, sizeof what, "step %d exchange (%zu bytes%s) from rank %d", k, n[peer],
               inplace ? ", in place" : "", peer);
      mr_buf_check_guards(&c, inplace ? &sb[0] : &rb[0], what);
      if (memcmp(rp, want, n[peer]) != 0) mr_case_fail(&c, "%s differs", what);
      if (!inplace) mr_buf_free(&rb[0]);
      mr_buf_free(&sb[0]);
      id += 2;
      continue;
    }
    /* one way, a reply, or a burst: every send of a rank before its
     * receives where they are in a row (a burst), in order otherwise */
    for (int i = 0; i < nm; i++) {
      if (from[i] == me) {
        mr_buf_alloc(&sb[i], n[i], (size_t)(k + i) % 8);
        wrap_fill(c.cseed, me, id + i, sb[i].p, n[i]);
        MR_OK(&c, qcclSend(sb[i].p, n[i], qcclUint8, peer, t->comm, NULL));
      } else {
        mr_buf_alloc(&rb[i], n[i], (size_t)(k + i + 3) % 8);
        MR_OK(&c, qcclRecv(rb[i].p, n[i], qcclUint8, peer, t->comm, NULL));
        wrap_fill(c.cseed, peer, id + i, want, n[i]);
        snprintf(what, sizeof what, "step %d message %d of %d (%zu bytes) from rank %d", k, i, nm,
                 n[i], peer);
        mr_buf_check_guards(&c, &rb[i], what);
        if (memcmp(rb[i].p, want, n[i]) != 0) mr_case_fail(&c, "%s differs", what);
        mr_buf_free(&rb[i]);
      }
    }
    for (int i = 0; i < nm; i++)
      if (from[i] == me) {
        wrap_fill(c.cseed, me, id + i, want, n[i]);
        if (memcmp(sb[i].p, want, n[i]) != 0)
          mr_case_fail(&c, "step %d: sendbuff of message %d changed", k, i);
        mr_buf_free(&sb[i]);
      }
    id += nm;
  }
  free(want);
  mr_case_end(&c);
}

static void case_pairs(mr_t* t, size_t n) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv pairs n=%zu", n)) return;
  const int W = t->nranks, me = t->rank;
  int p = 0;
  for (int a = 0; a < W; a++)
    for (int b = a + 1; b < W; b++, p++) {
      if (me != a && me != b) continue;
      qcclDataType_t dt = (qcclDataType_t)(p % qcclNumTypes);
      int peer = me == a ? b : a;
      sbuf_t s;
      mr_buf_t r;
      make_send(&c, &s, dt, n, peer, 0);
      mr_buf_alloc(&r, n * mr_dt_size(dt), mr_dt_size(dt));
      if (me == a) {
        MR_OK(&c, qcclSend(s.buf.p, n, dt, peer, t->comm, NULL));
        MR_OK(&c, qcclRecv(r.p, n, dt, peer, t->comm, NULL));
      } else {
        MR_OK(&c, qcclRecv(r.p, n, dt, peer, t->comm, NULL));
        MR_OK(&c, qcclSend(s.buf.p, n, dt, peer, t->comm, NULL));
      }
      char what[64];
      snprintf(what, sizeof what, "message from rank %d (%s)", peer, mr_dt_name(dt));
      check_recv(&c, &r, dt, n, peer, 0, what);
      check_send(&c, &s, "sendbuff");
    }
  mr_case_end(&c);
}

static void case_order(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv order")) return;
  const int W = t->nranks, me = t->rank;
  const qcclDataType_t dt = qcclInt32;
  const size_t n = 777;
  for (int a = 0; a < W; a++)
    for (int b = 0; b < W; b++) {
      if (a == b || (me != a && me != b)) continue;
      for (int m = 0; m < 3; m++) {
        if (me == a) {
          sbuf_t s;
          make_send(&c, &s, dt, n, b, m);
          MR_OK(&c, qcclSend(s.buf.p, n, dt, b, t->comm, NULL));
          check_send(&c, &s, "sendbuff");
        } else {
          mr_buf_t r;
          mr_buf_alloc(&r, n * 4, 0);
          MR_OK(&c, qcclRecv(r.p, n, dt, a, t->comm, NULL));
          char what[64];
          snprintf(what, sizeof what, "message %d from rank %d", m, a);
          check_recv(&c, &r, dt, n, a, m, what);
        }
      }
    }
  mr_case_end(&c);
}

static void case_reuse(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv reuse")) return;
  const int W = t->nranks, me = t->rank;
  const qcclDataType_t dt = qcclUint32;
  const size_t n = MIB / 4 + 3;
  /* with a 256 KiB ring (the runs mr_sendrecv_ring256k_*; the default is
   * 1 MiB up to 4 ranks) the first message fills it exactly with its
   * 64-byte header (shm_p2p.c, P2P_HDR; it was 24 bytes once, and a
   * payload sized for that no longer fitted at all), so the next (single
   * copy) finds no room for its header at first */
  const size_t fill_n = (256 * 1024 - 64) / 4;
  if (me == 0) {
    sbuf_t s;
    mr_buf_alloc(&s.buf, n * 4, 4);
    for (int b = 1; b < W; b++)
      for (int m = 0; m < 3; m++) {
        size_t nm = m == 0 ? fill_n : n;
        mr_fill(dt, qcclSum, MR_GEN_RAW, c.cseed, 0, W, s.buf.p, msg_base(b, m), nm);
        MR_OK(&c, qcclSend(s.buf.p, nm, dt, b, t->comm, NULL));
      }
    /* the last bits sent are overwritten too: a late read would see them */
    memset(s.buf.p, 0xa5, s.buf.bytes);
    mr_buf_check_guards(&c, &s.buf, "sendbuff");
    mr_buf_free(&s.buf);
  } else if (W > 1) {
    usleep(50000);
    for (int m = 0; m < 3; m++) {
      size_t nm = m == 0 ? fill_n : n;
      mr_buf_t r;
      mr_buf_alloc(&r, nm * 4, 0);
      MR_OK(&c, qcclRecv(r.p, nm, dt, 0, t->comm, NULL));
      char what[64];
      snprintf(what, sizeof what, "message %d from rank 0", m);
      check_recv(&c, &r, dt, nm, 0, m, what);
    }
  }
  mr_case_end(&c);
}

/* Exchanges: each pair of ranks sends and receives in one group (sizes
 * under the ring that, as exchanges, go single copy: the send waits for its
 * reader), once from separate buffers, once in place (send and receive
 * buffer the same). The lower rank enters late; each rank overwrites what
 * it sent as soon as its group returns. With sends completing before their
 * reader read, the 195 KiB case fails (the freed buffer); at 64 KiB the
 * peer's read usually wins the race, so that case checks the data only. */
static void case_exchange(mr_t* t, size_t n) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv exchange n=%zu", n)) return;
  const int W = t->nranks, me = t->rank;
  const qcclDataType_t dt = qcclUint32;
  for (int a = 0; a < W; a++)
    for (int b = a + 1; b < W; b++) {
      if (me != a && me != b) continue;
      int peer = me == a ? b : a;
      for (int inplace = 0; inplace < 2; inplace++) {
        sbuf_t s;
        mr_buf_t r;
        make_send(&c, &s, dt, n, peer, inplace);
        void* rp = s.buf.p;
        if (!inplace) {
          mr_buf_alloc(&r, n * 4, 4);
          rp = r.p;
        }
        if (me == a) usleep(20000);
        MR_OK(&c, qcclGroupStart());
        MR_OK(&c, qcclSend(s.buf.p, n, dt, peer, t->comm, NULL));
        MR_OK(&c, qcclRecv(rp, n, dt, peer, t->comm, NULL));
        MR_OK(&c, qcclGroupEnd());
        char what[80];
        snprintf(what, sizeof what, "exchange with rank %d%s", peer, inplace ? " (in place)" : "");
        if (inplace) {
          check_recv(&c, &s.buf, dt, n, peer, inplace, what);
        } else {
          memset(s.buf.p, 0xa5, s.buf.bytes); /* a late read would see this */
          mr_buf_check_guards(&c, &s.buf, "sendbuff");
          mr_buf_free(&s.buf);
          check_recv(&c, &r, dt, n, peer, inplace, what);
        }
      }
    }
  mr_case_end(&c);
}

/* Two sends in place in one group: every rank sends the first half of one
 * buffer to rank + 1 and the second half to rank - 1, and receives into the
 * first half from rank - 1 and into the second from rank + 1 (on 2 ranks:
 * two messages each way, matched in order; on 1, to itself). Both sends
 * overlap a receive, so both go from private copies side by side in the
 * communicator's scratch (sendrecv.c); n = 1009 and 2^20 + 3 elements,
 * the latter over the scratch's limit (a buffer of the call's own). Run
 * twice, so the second reuses the kept scratch. */
static void case_inplace_halves(mr_t* t, size_t n) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv in place halves n=%zu", n)) return;
  const int W = t->nranks, me = t->rank;
  const int next = (me + 1) % W, prev = (me + W - 1) % W;
  const qcclDataType_t dt = qcclUint32;
  for (int round = 0; round < 2; round++) {
    mr_buf_t b;
    mr_buf_alloc(&b, 2 * n * 4, (c.cseed >> (8 + round)) % 4 * 4);
    uint32_t* p = (uint32_t*)(void*)b.p;
    mr_fill(dt, qcclSum, MR_GEN_RAW, c.cseed, me, W, p, msg_base(next, 2 + 2 * round), n);
    mr_fill(dt, qcclSum, MR_GEN_RAW, c.cseed, me, W, p + n, msg_base(prev, 3 + 2 * round), n);
    MR_OK(&c, qcclGroupStart());
    MR_OK(&c, qcclSend(p, n, dt, next, t->comm, NULL));
    MR_OK(&c, qcclSend(p + n, n, dt, prev, t->comm, NULL));
    MR_OK(&c, qcclRecv(p, n, dt, prev, t->comm, NULL));
    MR_OK(&c, qcclRecv(p + n, n, dt, next, t->comm, NULL));
    MR_OK(&c, qcclGroupEnd());
    mr_buf_check_guards(&c, &b, "buffer");
    mr_check_copy(&c, dt, p, 0, n, prev, msg_base(me, 2 + 2 * round), "first half");
    mr_check_copy(&c, dt, p, n, n, next, msg_base(me, 3 + 2 * round), "second half");
    mr_buf_free(&b);
  }
  mr_case_end(&c);
}

static void case_eager(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv eager")) return;
  const int W = t->nranks, me = t->rank;
  /* a promise of the shared-memory rings: across hosts (mn_sendrecv) UCX
   * may send 128 KiB by rendezvous, which waits for the receive */
  const char* local = getenv("LOCAL_WORLD_SIZE");
  if (local && atoi(local) < W) {
    mr_case_end(&c);
    return;
  }
  const qcclDataType_t dt = qcclFloat32;
  const size_t n = 32768; /* 128 KiB */
  int to = (me + 1) % W, from = (me + W - 1) % W;
  sbuf_t s;
  make_send(&c, &s, dt, n, to, 0);
  MR_OK(&c, qcclSend(s.buf.p, n, dt, to, t->comm, NULL));
  mr_buf_t r;
  mr_buf_alloc(&r, n * 4, 0);
  MR_OK(&c, qcclRecv(r.p, n, dt, from, t->comm, NULL));
  char what[64];
  snprintf(what, sizeof what, "message from rank %d", from);
  check_recv(&c, &r, dt, n, from, 0, what);
  check_send(&c, &s, "sendbuff");
  mr_case_end(&c);
}

#define FLEX_N ((size_t)40 * 1024) /* 160 KiB of f32: fits a ring of 256 KiB or more */

static void case_takeback(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv takeback")) return;
  const int W = t->nranks, me = t->rank;
  const qcclDataType_t dt = qcclFloat32;
  const size_t small = 1009;
  if (W < 3) {
    mr_case_end(&c);
    return;
  }
  if (me == 0) {
    mr_buf_t s, r;
    mr_buf_alloc(&s, FLEX_N * 4, 4);
    for (int m = 0; m < 3; m++) {
      mr_fill(dt, qcclSum, MR_GEN_RAW, c.cseed, 0, W, s.p, msg_base(1, m), FLEX_N);
      mr_buf_alloc(&r, small * 4, 0);
      MR_OK(&c, qcclGroupStart());
      MR_OK(&c, qcclSend(s.p, FLEX_N, dt, 1, t->comm, NULL));
      MR_OK(&c, qcclRecv(r.p, small, dt, 2, t->comm, NULL));
      MR_OK(&c, qcclGroupEnd());
      check_recv(&c, &r, dt, small, 2, m, "message from rank 2");
    }
    /* a read after the last group returned would see this */
    memset(s.p, 0xa5, s.bytes);
    mr_buf_check_guards(&c, &s, "sendbuff");
    mr_buf_free(&s);
  } else if (me == 1) {
    usleep(30000);
    for (int m = 0; m < 3; m++) {
      mr_buf_t r;
      mr_buf_alloc(&r, FLEX_N * 4, 0);
      MR_OK(&c, qcclRecv(r.p, FLEX_N, dt, 0, t->comm, NULL));
      char what[64];
      snprintf(what, sizeof what, "message %d from rank 0", m);
      check_recv(&c, &r, dt, FLEX_N, 0, m, what);
    }
  } else if (me == 2) {
    for (int m = 0; m < 3; m++) {
      sbuf_t sb;
      make_send(&c, &sb, dt, small, 0, m);
      MR_OK(&c, qcclSend(sb.buf.p, small, dt, 0, t->comm, NULL));
      check_send(&c, &sb, "sendbuff");
    }
  }
  mr_case_end(&c);
}

static void case_release(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv release")) return;
  const int W = t->nranks, me = t->rank;
  /* a promise of the shared-memory rings, as in case_eager */
  const char* local = getenv("LOCAL_WORLD_SIZE");
  if (W < 3 || (local && atoi(local) < W)) {
    mr_case_end(&c);
    return;
  }
  const qcclDataType_t dt = qcclFloat32;
  const size_t small = 1009;
  if (me == 0) {
    sbuf_t big, sm;
    mr_buf_t r;
    make_send(&c, &big, dt, FLEX_N, 1, 0);
    mr_buf_alloc(&r, small * 4, 0);
    MR_OK(&c, qcclGroupStart());
    MR_OK(&c, qcclSend(big.buf.p, FLEX_N, dt, 1, t->comm, NULL));
    MR_OK(&c, qcclRecv(r.p, small, dt, 2, t->comm, NULL));
    MR_OK(&c, qcclGroupEnd());
    check_recv(&c, &r, dt, small, 2, 0, "message from rank 2");
    check_send(&c, &big, "sendbuff");
    make_send(&c, &sm, dt, small, 2, 0);
    MR_OK(&c, qcclSend(sm.buf.p, small, dt, 2, t->comm, NULL));
    check_send(&c, &sm, "sendbuff");
  } else if (me == 1) {
    mr_buf_t a, b;
    mr_buf_alloc(&a, small * 4, 0);
    MR_OK(&c, qcclRecv(a.p, small, dt, 2, t->comm, NULL));
    check_recv(&c, &a, dt, small, 2, 0, "message from rank 2");
    mr_buf_alloc(&b, FLEX_N * 4, 0);
    MR_OK(&c, qcclRecv(b.p, FLEX_N, dt, 0, t->comm, NULL));
    check_recv(&c, &b, dt, FLEX_N, 0, 0, "message from rank 0");
  } else if (me == 2) {
    sbuf_t to0, to1;
    mr_buf_t r;
    make_send(&c, &to0, dt, small, 0, 0);
    MR_OK(&c, qcclSend(to0.buf.p, small, dt, 0, t->comm, NULL));
    check_send(&c, &to0, "sendbuff");
    mr_buf_alloc(&r, small * 4, 0);
    MR_OK(&c, qcclRecv(r.p, small, dt, 0, t->comm, NULL));
    check_recv(&c, &r, dt, small, 0, 0, "message from rank 0");
    make_send(&c, &to1, dt, small, 1, 0);
    MR_OK(&c, qcclSend(to1.buf.p, small, dt, 1, t->comm, NULL));
    check_send(&c, &to1, "sendbuff");
  }
  mr_case_end(&c);
}

static void case_grouporder(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv grouporder")) return;
  const int W = t->nranks, me = t->rank;
  const qcclDataType_t dt = qcclFloat16;
  const size_t n = 1009;
  sbuf_t* s = calloc((size_t)W * 3, sizeof *s);
  mr_buf_t* r = calloc((size_t)W * 3, sizeof *r);
  if (!s || !r) mr_die(t, "out of memory");
  MR_OK(&c, qcclGroupStart());
  for (int m = 0; m < 3; m++)
    for (int k = 1; k < W; k++) {
      int dst = (me + k) % W, src = (me - k + W) % W;
      make_send(&c, &s[dst * 3 + m], dt, n, dst, m);
      mr_buf_alloc(&r[src * 3 + m], n * 2, 2);
      MR_OK(&c, qcclSend(s[dst * 3 + m].buf.p, n, dt, dst, t->comm, NULL));
      MR_OK(&c, qcclRecv(r[src * 3 + m].p, n, dt, src, t->comm, NULL));
    }
  MR_OK(&c, qcclGroupEnd());
  for (int m = 0; m < 3; m++)
    for (int k = 1; k < W; k++) {
      int dst = (me + k) % W, src = (me - k + W) % W;
      char what[64];
      snprintf(what, sizeof what, "message %d from rank %d", m, src);
      check_recv(&c, &r[src * 3 + m], dt, n, src, m, what);
      check_send(&c, &s[dst * 3 + m], "sendbuff");
    }
  free(s);
  free(r);
  mr_case_end(&c);
}

static void case_ring(mr_t* t, int k, size_t n, qcclDataType_t dt) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv ring shift=%d n=%zu %s", k, n, mr_dt_name(dt))) return;
  const int W = t->nranks, me = t->rank;
  const int dst = (me + k) % W, src = (me - k % W + W) % W;
  sbuf_t s;
  mr_buf_t r;
  make_send(&c, &s, dt, n, dst, 0);
  mr_buf_alloc(&r, n * mr_dt_size(dt), 0);
  qcclStats_t before = QCCL_STATS_INITIALIZER, after = QCCL_STATS_INITIALIZER;
  MR_OK(&c, qcclCommGetStats(t->comm, &before));
  MR_OK(&c, qcclGroupStart());
  if (me & 1) {
    MR_OK(&c, qcclRecv(r.p, n, dt, src, t->comm, NULL));
    MR_OK(&c, qcclSend(s.buf.p, n, dt, dst, t->comm, NULL));
  } else {
    MR_OK(&c, qcclSend(s.buf.p, n, dt, dst, t->comm, NULL));
    MR_OK(&c, qcclRecv(r.p, n, dt, src, t->comm, NULL));
  }
  MR_OK(&c, qcclGroupEnd());
  check_recv(&c, &r, dt, n, src, 0, "received block");
  check_send(&c, &s, "sendbuff");
  /* counters: a send and a receive are two calls, the bytes sent under
   * the same slot, nothing under any other */
  MR_OK(&c, qcclCommGetStats(t->comm, &after));
  for (int i = 0; i < qcclStatNumColls; i++) {
    uint64_t calls = after.coll[i].calls - before.coll[i].calls;
    uint64_t bytes = after.coll[i].bytesIntra + after.coll[i].bytesInter -
                     before.coll[i].bytesIntra - before.coll[i].bytesInter;
    uint64_t want_calls = i == qcclStatSendRecv ? 2 : 0;
    uint64_t want_bytes = i == qcclStatSendRecv ? n * mr_dt_size(dt) : 0;
    if (calls != want_calls || bytes != want_bytes)
      mr_case_fail(&c, "counters slot %d: %llu calls, %llu bytes; expected %llu and %llu", i,
                   (unsigned long long)calls, (unsigned long long)bytes,
                   (unsigned long long)want_calls, (unsigned long long)want_bytes);
  }
  mr_case_end(&c);
}

static void case_self(mr_t* t, size_t n) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv self n=%zu", n)) return;
  const int me = t->rank;
  sbuf_t s;
  mr_buf_t r;
  make_send(&c, &s, qcclUint8, n, me, 0);
  mr_buf_alloc(&r, n, 1);
  MR_OK(&c, qcclGroupStart());
  MR_OK(&c, qcclSend(s.buf.p, n, qcclUint8, me, t->comm, NULL));
  MR_OK(&c, qcclRecv(r.p, n, qcclUint8, me, t->comm, NULL));
  MR_OK(&c, qcclGroupEnd());
  check_recv(&c, &r, qcclUint8, n, me, 0, "message from self");
  check_send(&c, &s, "sendbuff");
  mr_case_end(&c);
}

/* the count of the message src -> dst in the all-to-all-v case */
static size_t a2a_count(uint64_t cseed, int src, int dst) {
  uint64_t h = mr_mix(cseed ^ ((uint64_t)src << 16) ^ (uint64_t)dst);
  if ((h & 7) == 0) return 0;
  return (size_t)(h >> 8) % 50000;
}

static void case_a2a(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv a2a")) return;
  const int W = t->nranks, me = t->rank;
  const qcclDataType_t dt = qcclFloat64;
  sbuf_t* s = calloc((size_t)W, sizeof *s);
  mr_buf_t* r = calloc((size_t)W, sizeof *r);
  if (!s || !r) mr_die(t, "out of memory");
  MR_OK(&c, qcclGroupStart());
  for (int p = 0; p < W; p++) {
    make_send(&c, &s[p], dt, a2a_count(c.cseed, me, p), p, 0);
    mr_buf_alloc(&r[p], a2a_count(c.cseed, p, me) * 8, 0);
    MR_OK(&c, qcclSend(s[p].buf.p, a2a_count(c.cseed, me, p), dt, p, t->comm, NULL));
    MR_OK(&c, qcclRecv(r[p].p, a2a_count(c.cseed, p, me), dt, p, t->comm, NULL));
  }
  MR_OK(&c, qcclGroupEnd());
  for (int p = 0; p < W; p++) {
    char what[64];
    snprintf(what, sizeof what, "message from rank %d", p);
    check_recv(&c, &r[p], dt, a2a_count(c.cseed, p, me), p, 0, what);
    check_send(&c, &s[p], "sendbuff");
  }
  free(s);
  free(r);
  mr_case_end(&c);
}

static void case_zero(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv zero")) return;
  const int W = t->nranks, me = t->rank;
  MR_OK(&c, qcclGroupStart());
  MR_OK(&c, qcclSend(NULL, 0, qcclFloat32, (me + 1) % W, t->comm, NULL));
  MR_OK(&c, qcclRecv(NULL, 0, qcclFloat32, (me - 1 + W) % W, t->comm, NULL));
  MR_OK(&c, qcclGroupEnd());
  mr_case_end(&c);
}

static void case_nested(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv nested")) return;
  const int W = t->nranks, me = t->rank;
  const int dst = (me + 1) % W, src = (me - 1 + W) % W;
  const size_t n = 65537;
  sbuf_t s;
  mr_buf_t r;
  make_send(&c, &s, qcclInt64, n, dst, 0);
  mr_buf_alloc(&r, n * 8, 8);
  MR_OK(&c, qcclGroupStart());
  MR_OK(&c, qcclGroupStart());
  MR_OK(&c, qcclSend(s.buf.p, n, qcclInt64, dst, t->comm, NULL));
  MR_OK(&c, qcclGroupEnd()); /* inner end: must not run (nor block on) the send */
  MR_OK(&c, qcclRecv(r.p, n, qcclInt64, src, t->comm, NULL));
  MR_OK(&c, qcclGroupEnd());
  check_recv(&c, &r, qcclInt64, n, src, 0, "received block");
  check_send(&c, &s, "sendbuff");
  mr_case_end(&c);
}

static void case_mixed(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "sendrecv mixed")) return;
  const int W = t->nranks, me = t->rank;
  const int dst = (me + 1) % W, src = (me - 1 + W) % W;
  const size_t n = 4099;
  int64_t* ar = malloc(n * sizeof *ar);
  int32_t bc[3] = {0, 0, 0};
  if (!ar) mr_die(t, "out of memory");
  for (size_t i = 0; i < n; i++) ar[i] = (int64_t)(me + 1) * (int64_t)(i + 1);
  if (me == W - 1) bc[0] = 11, bc[1] = 22, bc[2] = 33;
  sbuf_t s;
  mr_buf_t r;
  make_send(&c, &s, qcclUint32, n, dst, 0);
  mr_buf_alloc(&r, n * 4, 4);
  MR_OK(&c, qcclGroupStart());
  MR_OK(&c, qcclAllReduce(ar, ar, n, qcclInt64, qcclSum, t->comm, NULL));
  MR_OK(&c, qcclSend(s.buf.p, n, qcclUint32, dst, t->comm, NULL));
  MR_OK(&c, qcclRecv(r.p, n, qcclUint32, src, t->comm, NULL));
  MR_OK(&c, qcclBroadcast(bc, bc, 3, qcclInt32, W - 1, t->comm, NULL));
  MR_OK(&c, qcclGroupEnd());
  const int64_t wsum = (int64_t)W * (W + 1) / 2;
  for (size_t i = 0; i < n; i++)
    if (ar[i] != wsum * (int64_t)(i + 1)) {
      mr_case_fail(&c, "allreduce element %zu: got %lld expected %lld", i, (long long)ar[i],
                   (long long)(wsum * (int64_t)(i + 1)));
      break;
    }
  if (bc[0] != 11 || bc[1] != 22 || bc[2] != 33)
    mr_case_fail(&c, "broadcast got %d %d %d expected 11 22 33", bc[0], bc[1], bc[2]);
  check_recv(&c, &r, qcclUint32, n, src, 0, "received block");
  check_send(&c, &s, "sendbuff");
  free(ar);
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  const int W = t.nranks;
  case_pairs(&t, 0);
  case_pairs(&t, 1);
  case_pairs(&t, 1009);
  case_order(&t);
  case_reuse(&t);
  case_eager(&t);
  case_takeback(&t);
  case_release(&t);
  case_exchange(&t, 16 * 1024 + 1); /* 64 KiB + 4 */
  case_exchange(&t, 50021);         /* 195 KiB */
  case_inplace_halves(&t, 1009);
  case_inplace_halves(&t, ((size_t)1 << 20) + 3); /* 2 x 4 MiB + 12: a buffer per call */
  case_grouporder(&t);
  for (int k = 1; k < W; k++) case_ring(&t, k, 1009, qcclFloat32);
  for (int dt = 0; dt < qcclNumTypes; dt++) case_ring(&t, 1 + dt % W, 1009, (qcclDataType_t)dt);
  case_ring(&t, 1, (size_t)1 << 22, qcclBfloat16); /* 8 MiB: needs the group */
  case_ring(&t, W > 2 ? W - 1 : 1, 999983, qcclFloat64);
  if (!t.quick) case_ring(&t, W > 3 ? 2 : 1, (size_t)1 << 22, qcclUint64);
  case_self(&t, 1009);
  case_self(&t, t.quick ? MIB : 8 * MIB);
  case_a2a(&t);
  case_zero(&t);
  case_nested(&t);
  case_mixed(&t);
  case_wrap(&t);
  case_pieces(&t);
  case_cells(&t);
  return mr_finish(&t);
}
