/*
 * ucx.c - point-to-point messages between hosts through UCX (UCP tags).
 *
 * Each message is one tagged send whose tag is the sender's rank; a
 * receive posts the exact size with the tag of its peer, so UCX's in-order
 * matching per sender gives NCCL's matching rule, and a size mismatch shows
 * up as a truncation (larger message) or a short length (smaller) - both
 * reported as qcclInvalidUsage. Endpoints use peer error handling: a dead
 * peer or a broken link marks that peer failed, and every request to or
 * from it fails at its next test.
 *
 * On simulated hosts of one machine UCX would pick shared memory between
 * them; so unless UCX_TLS is set by the user, the context is restricted to
 * network transports (QCCL_UCX_TLS, default "^sm": all but shared memory), and the test
 * bed measures what a cluster would see.
 *
 * A finished send is not always on the wire: UCX's TCP transport copies a
 * small message into its own buffer and completes the request, and sends
 * the rest when the worker is next progressed (also the acknowledgement a
 * receiver owes a large message's sender). A rank that went on to a call
 * of another communicator, or of another lane of the same one, and waits
 * there for a peer that waits for those bytes would wait forever. So every
 * open worker is in one list, and a rank that waits anywhere (core/wait.c
 * runs ucx_progress_idle now and then once it yields) progresses every
 * worker that no thread is using. Each worker has a mutex that every use
 * holds (UCX's serialized mode: one thread at a time); the waiter only
 * tries it.
 */
#include "transport/ucx.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

#include "core/env.h"
#include "core/log.h"
#include "core/socket.h"
#include "core/wait.h"
#include "transport/transport.h"

#define UCX_CLOSE_WAIT 3.0       /* seconds a normal close may flush */
#define UCX_ABORT_WAIT 1.0       /* seconds a forced close may take */
#define UCX_CONTROL_WAIT 0.2     /* seconds a control message may take to leave */
#define UCX_HANDSHAKE_SPIN_US 10 /* the init's handshake polls, then yields */
#define UCX_RING_CHECK 0.005     /* seconds between its looks at the bootstrap ring */
#define UCX_RING_GRACE 0.1       /* seconds a hello may trail its sender's exit */

typedef struct {
  struct ucx* u;
  int peer;
} ucx_peer_arg_t;

struct ucx {
  int rank, nranks;
  ucp_context_h ctx;
  ucp_worker_h worker;
  ucp_ep_h* eps;        /* NULL for peers not reached through UCX */
  ucs_status_t* failed; /* UCS_OK, or the error the handler saw */
  ucx_peer_arg_t* args; /* error handler arguments, one per peer */
  uint64_t call;        /* the call in progress (ucx_set_call), in every tag */
  uint32_t* sseq;       /* point-to-point messages sent to each peer */
  uint32_t* rseq;       /* and received from each */
  /* the control message this rank sent (ucx_post_control), one per peer */
  char ctl[UCX_CONTROL_MAX];
  void** ctl_reqs;
  int ctl_posted;
  pthread_mutex_t mu;      /* held by every use of the worker */
  int abandoned;           /* a request was freed unfinished: not for the idle hook */
  struct ucx *prev, *next; /* in ucx_all */
};

/* Every open worker (see the top). */
static pthread_mutex_t ucx_all_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ucx* ucx_all;
static atomic_int ucx_nall;

/* Progresses every open worker that no thread is using, without waiting
 * for one (a thread in the list already does it; a worker in use is
 * progressed by its user). Not a worker with a request freed unfinished
 * (a failed call's transfer that UCX could not cancel): it would move
 * data into or out of a buffer the user may have reused since; its
 * communicator has failed anyway. */
static void ucx_progress_idle(void) {
  if (atomic_load_explicit(&ucx_nall, memory_order_relaxed) == 0) return;
  if (pthread_mutex_trylock(&ucx_all_mu) != 0) return;
  for (struct ucx* u = ucx_all; u != NULL; u = u->next) {
    if (pthread_mutex_trylock(&u->mu) != 0) continue;
    if (!u->abandoned) ucp_worker_progress(u->worker);
    pthread_mutex_unlock(&u->mu);
  }
  pthread_mutex_unlock(&ucx_all_mu);
}

/* A child process keeps none of its parent's workers (nor a lock that a
 * thread of the parent held at the fork). */
static void ucx_list_forget(void) {
  pthread_mutex_init(&ucx_all_mu, NULL);
  ucx_all = NULL;
  atomic_store(&ucx_nall, 0);
}

static pthread_once_t ucx_list_once = PTHREAD_ONCE_INIT;
static void ucx_list_init(void) {
  pthread_atfork(NULL, NULL, ucx_list_forget);
  backoff_set_idle_hook(ucx_progress_idle);
}

static void ucx_list_add(ucx_t* u) {
  pthread_once(&ucx_list_once, ucx_list_init);
  pthread_mutex_lock(&ucx_all_mu);
  u->prev = NULL;
  u->next = ucx_all;
  if (ucx_all) ucx_all->prev = u;
  ucx_all = u;
  atomic_fetch_add(&ucx_nall, 1);
  pthread_mutex_unlock(&ucx_all_mu);
}

static void ucx_list_remove(ucx_t* u) {
  pthread_mutex_lock(&ucx_all_mu);
  if (u->prev != NULL || ucx_all == u) { /* listed (a failed open is not) */
    if (u->prev)
      u->prev->next = u->next;
    else
      ucx_all = u->next;
    if (u->next) u->next->prev = u->prev;
    u->prev = u->next = NULL;
    atomic_fetch_sub(&ucx_nall, 1);
  }
  pthread_mutex_unlock(&ucx_all_mu);
}

static void ucx_control_flush(ucx_t* u, double wait);

/* A tag: the sender's rank in the low UCX_TAG_RANK_BITS, the call in the
 * next UCX_CALL_BITS, and the top bit set for a control message.
 *
 * A collective's receive matches on the rank bits alone (per-sender order)
 * and then compares the call, so a message of another call (a rank that
 * made a different call, or one left behind by a failed call) is an error,
 * never data.
 *
 * A user's send or receive (call UCX_CALL_P2P) carries, below that bit,
 * the number of the message between the two ranks (UCX_P2P_SEQ_BITS, per
 * direction) and the low UCX_P2P_LEN_BITS of its length, and the receive
 * matches the whole tag. A send whose receive expects another length then
 * matches nothing: the receiver sees the message waiting (a probe while it
 * waits) and fails naming both lengths, and the sender, whose transfer
 * never started, learns it from the receiver's control message instead of
 * completing as if delivered.
 *
 * Control messages (ucx_post_control) are never matched by a data receive;
 * a rank whose transfer waits sees one arrive and fails (the communicator
 * failed elsewhere: agree.c). */
#define UCX_TAG_RANK_BITS 24
#define UCX_TAG_RANK_MASK ((ucp_tag_t)((1u << UCX_TAG_RANK_BITS) - 1))
#define UCX_CALL_BITS 39
#define UCX_CALL_MASK ((uint64_t)(((uint64_t)1 << UCX_CALL_BITS) - 1))
#define UCX_TAG_CTRL ((ucp_tag_t)1 << 63)
#define UCX_P2P_LEN_BITS 24
#define UCX_P2P_SEQ_BITS 14

static uint64_t ucx_p2p_call(uint32_t seq, size_t n) {
  uint64_t s = seq & ((1u << UCX_P2P_SEQ_BITS) - 1);
  uint64_t l = (uint64_t)n & ((1u << UCX_P2P_LEN_BITS) - 1);
  return UCX_CALL_P2P | s << UCX_P2P_LEN_BITS | l;
}

typedef struct {
  int send;
  int peer;
  size_t bytes;
  uint64_t call; /* the call the message must carry */
  void* ucp;     /* the UCP request, NULL when it completed at once */
} ucx_req_t;

static void ucx_err_handler(void* arg, ucp_ep_h ep, ucs_status_t status) {
  (void)ep;
  ucx_peer_arg_t* a = arg;
  a->u->failed[a->peer] = status == UCS_OK ? UCS_ERR_CONNECTION_RESET : status;
}

static qcclResult_t ucx_status(ucs_status_t s, const char* what) {
  if (s == UCS_OK) return qcclSuccess;
  return QCCL_ERR(qcclSystemError, "%s: %s", what, ucs_status_string(s));
}

static qcclResult_t ucx_make_worker(ucx_t* u) {
  ucp_config_t* cfg = NULL;
  QCCL_CHECK(ucx_status(ucp_config_read(NULL, NULL, &cfg), "ucp_config_read"));
  qcclResult_t r = qcclSuccess;
  const char* tls = NULL;
  char what[160] = "ucp_init";
  if (getenv("UCX_TLS") == NULL) {
    tls = env_get("QCCL_UCX_TLS");
    if (tls == NULL) tls = "^sm";
    snprintf(what, sizeof what, "UCX transports QCCL_UCX_TLS='%.64s' (UCX_TLS unset)", tls);
    r = ucx_status(ucp_config_modify(cfg, "TLS", tls), what);
  } else {
    snprintf(what, sizeof what, "UCX transports UCX_TLS='%.64s'", getenv("UCX_TLS"));
  }
  if (r == qcclSuccess) {
    ucp_params_t p;
    memset(&p, 0, sizeof p);
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_TAG;
    ucs_status_t s = ucp_init(&p, cfg, &u->ctx);
    if (s != UCS_OK)
      r = QCCL_ERR(qcclInvalidArgument, "ucp_init: %s: %s (no such transport on this machine?)",
                   what, ucs_status_string(s));
  }
  ucp_config_release(cfg);
  if (r != qcclSuccess) return r;
  ucp_worker_params_t wp;
  memset(&wp, 0, sizeof wp);
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  /* one thread at a time: the thread that steps the call's plan, or one
   * that progresses idle workers (ucx_progress_idle), under u->mu */
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  return ucx_status(ucp_worker_create(u->ctx, &wp, &u->worker), "ucp_worker_create");
}

/* All-gathers the worker addresses and connects to every remote peer. */
static qcclResult_t ucx_connect(ucx_t* u, bootstrap_t* boot, const int* remote) {
  qcclResult_t r;
  int w = u->nranks;
  ucp_address_t* addr = NULL;
  size_t addr_len = 0;
  char* addrs = NULL;
  uint64_t* lens = calloc((size_t)w, sizeof *lens);
  if (!lens) return QCCL_ERR(qcclSystemError, "out of memory");
  QCCL_CHECK_GOTO(
      ucx_status(ucp_worker_get_address(u->worker, &addr, &addr_len), "ucp_worker_get_address"), r,
      done);
  lens[u->rank] = addr_len;
  QCCL_CHECK_GOTO(boot_allgather(boot, lens, sizeof *lens), r, done);
  size_t maxlen = 0;
  for (int i = 0; i < w; i++)
    if (lens[i] > maxlen) maxlen = lens[i];
  addrs = calloc((size_t)w, maxlen);
  if (!addrs) {
    r = QCCL_ERR(qcclSystemError, "out of memory");
    goto done;
  }
  memcpy(addrs + (size_t)u->rank * maxlen, addr, addr_len);
  QCCL_CHECK_GOTO(boot_allgather(boot, addrs, maxlen), r, done);
  for (int i = 0; i < w; i++) {
    if (!remote[i] || i == u->rank) continue;
    u->args[i].u = u;
    u->args[i].peer = i;
    ucp_ep_params_t ep;
    memset(&ep, 0, sizeof ep);
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = (const ucp_address_t*)(addrs + (size_t)i * maxlen);
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = ucx_err_handler;
    ep.err_handler.arg = &u->args[i];
    QCCL_CHECK_GOTO(ucx_status(ucp_ep_create(u->worker, &ep, &u->eps[i]), "ucp_ep_create"), r,
                    done);
  }
done:
  if (addr) ucp_worker_release_address(u->worker, addr);
  free(lens);
  free(addrs);
  return r;
}

/* Whether this rank's handshake still waits for peer: its hello to it,
 * or its hello from it (requests reqs[peer] and reqs[w + peer]). */
static int ucx_handshake_owes(void* const* reqs, int w, int peer) {
  for (int k = peer; k < 2 * w; k += w)
    if (reqs[k] != NULL && ucp_request_check_status(reqs[k]) == UCS_INPROGRESS) return 1;
  return 0;
}

/* Completes every connection before the communicator is used: one small
 * message each way with every remote peer (tag: the sender's rank, call 0,
 * which no call uses), each received here, so none is left for a call.
 *
 * UCX's TCP transport connects in the background: ucp_ep_create starts the
 * connection, and the handshake (both ranks connect to each other at once;
 * the second connection is matched to the first and dropped) moves only
 * when both workers are progressed. Left to the first call, a rank that
 * reaches its worker late can find a peer that already failed and
 * destroyed the communicator in the middle of that handshake, and UCX 1.13
 * then aborts the process on an assertion of its own (tcp_iface.c:307,
 * 'ep->conn_state != UCT_TCP_EP_CONN_STATE_CLOSED': an event of a
 * connection it dropped while handling another in the same batch). With
 * the handshake done here, a peer that goes away later breaks connections
 * that are established, a path UCX handles. A peer that does not answer
 * within the communicator's timeout fails the init, naming it; one that
 * died fails it at once, through UCX or the bootstrap ring (boot). */
static qcclResult_t ucx_handshake(ucx_t* u, bootstrap_t* boot, const int* remote, double timeout) {
  int w = u->nranks;
  void** reqs = calloc((size_t)w * 2, sizeof *reqs);
  uint64_t* hello = calloc((size_t)w * 2, sizeof *hello);
  if (!reqs || !hello) {
    free(reqs);
    free(hello);
    return QCCL_ERR(qcclSystemError, "out of memory");
  }
  qcclResult_t r = qcclSuccess;
  for (int i = 0; i < w && r == qcclSuccess; i++) {
    if (!remote[i] || i == u->rank) continue;
    ucp_request_param_t p;
    memset(&p, 0, sizeof p);
    p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    void* s =
        ucp_tag_recv_nbx(u->worker, &hello[w + i], sizeof *hello, (ucp_tag_t)i, ~(ucp_tag_t)0, &p);
    if (UCS_PTR_IS_ERR(s)) {
      r = QCCL_ERR(qcclRemoteError, "UCX handshake: receive from rank %d: %s", i,
                   ucs_status_string(UCS_PTR_STATUS(s)));
      break;
    }
    reqs[w + i] = s;
    hello[i] = (uint64_t)u->rank;
    memset(&p, 0, sizeof p);
    s = ucp_tag_send_nbx(u->eps[i], &hello[i], sizeof *hello, (ucp_tag_t)u->rank, &p);
    if (UCS_PTR_IS_ERR(s))
      r = QCCL_ERR(qcclRemoteError, "UCX handshake: send to rank %d: %s", i,
                   ucs_status_string(UCS_PTR_STATUS(s)));
    else if (s != NULL)
      reqs[i] = s;
  }
  double deadline = clock_now() + (timeout > 0 ? timeout : 600);
  /* the ring's next rank: when its look is due, and when it was seen gone
   * (0: not seen; < 0: no longer watched) */
  const int next = (u->rank + 1) % w;
  double ring_check = 0, next_gone = 0;
  backoff_t b; /* a rank that waits yields the core its peer may need */
  backoff_init(&b, UCX_HANDSHAKE_SPIN_US);
  for (int k = 0; k < 2 * w && r == qcclSuccess;) {
    int peer = k % w;
    if (reqs[k] == NULL || ucp_request_check_status(reqs[k]) != UCS_INPROGRESS) {
      ucs_status_t st = reqs[k] ? ucp_request_check_status(reqs[k]) : UCS_OK;
      if (st != UCS_OK)
        r = QCCL_ERR(qcclRemoteError, "UCX handshake with rank %d: %s", peer,
                     ucs_status_string(st));
      else if (k >= w && remote[peer] && peer != u->rank && hello[k] != (uint64_t)peer)
        r = QCCL_ERR(qcclInternalError, "UCX handshake: rank %d sent %llu", peer,
                     (unsigned long long)hello[k]);
      k++;
      continue;
    }
    double now = clock_now();
    if (u->failed[peer] != UCS_OK) {
      r = QCCL_ERR(qcclRemoteError, "UCX handshake: rank %d is unreachable (%s)", peer,
                   ucs_status_string(u->failed[peer]));
    } else if (now > deadline) {
      r = QCCL_ERR(qcclTimeout, "UCX handshake: rank %d did not answer within %.0f s", peer,
                   timeout);
    } else if (next_gone > 0 && ucx_handshake_owes(reqs, w, next) == 0) {
      next_gone = -1; /* it left with its part done: nothing more to wait for */
    } else if (next_gone > 0 && now - next_gone > UCX_RING_GRACE) {
      r = QCCL_ERR(qcclRemoteError,
                   "UCX handshake: rank %d (the next of the bootstrap ring) failed or exited "
                   "before its hello to rank %d arrived",
                   next, u->rank);
    } else if (next_gone == 0 && now >= ring_check) {
      /* UCX may never report a peer that died: its hello already sent,
       * or its connection to this rank half made (UCX 1.13's TCP
       * transport drops a receive-only connection silently). The ring
       * tells: the next rank's end closes, and a rank that fails here
       * closes its own, so the failure travels around as in an exchange.
       * A next rank that finished its init may leave (exit, abort) while
       * its hello is still on its way: only a hello still missing after
       * a grace, or a send to it not done, fails this one */
      ring_check = now + UCX_RING_CHECK;
      if (boot_next_failed(boot)) next_gone = now;
    } else if (ucp_worker_progress(u->worker) == 0) {
      backoff_idle(&b);
    }
  }
  for (int k = 0; k < 2 * w; k++) {
    if (reqs[k] == NULL) continue;
    if (ucp_request_check_status(reqs[k]) == UCS_INPROGRESS) {
      ucp_request_cancel(u->worker, reqs[k]);
      u->abandoned = 1;
    }
    ucp_request_free(reqs[k]);
  }
  /* an abandoned request may still reach its buffer: then it stays (a few
   * bytes, on a failed init) */
  if (!u->abandoned) free(hello);
  free(reqs);
  return r;
}

qcclResult_t ucx_open(bootstrap_t* boot, const int* remote, double timeout, ucx_t** out) {
  int w = boot_nranks(boot);
  ucx_t* u = calloc(1, sizeof *u);
  if (!u) return QCCL_ERR(qcclSystemError, "out of memory");
  u->rank = boot_rank(boot);
  u->nranks = w;
  pthread_mutex_init(&u->mu, NULL);
  u->eps = calloc((size_t)w, sizeof *u->eps);
  u->failed = calloc((size_t)w, sizeof *u->failed);
  u->args = calloc((size_t)w, sizeof *u->args);
  u->sseq = calloc((size_t)w, sizeof *u->sseq);
  u->rseq = calloc((size_t)w, sizeof *u->rseq);
  u->ctl_reqs = calloc((size_t)w, sizeof *u->ctl_reqs);
  qcclResult_t r = qcclSuccess;
  if (!u->eps || !u->failed || !u->args || !u->sseq || !u->rseq || !u->ctl_reqs)
    r = QCCL_ERR(qcclSystemError, "out of memory");
  if (r == qcclSuccess) r = ucx_make_worker(u);
  if (r == qcclSuccess) r = ucx_connect(u, boot, remote);
  if (r == qcclSuccess) r = ucx_handshake(u, boot, remote, timeout);
  if (r != qcclSuccess) {
    ucx_close(u, 1);
    return r;
  }
  QCCL_INFO(LOG_NET, "rank %d: UCX endpoints ready", u->rank);
  ucx_list_add(u);
  *out = u;
  return qcclSuccess;
}

void ucx_close(ucx_t* u, int abort) {
  if (!u) return;
  ucx_list_remove(u); /* no waiter reaches it from now on */
  int clean = 1;
  ucx_control_flush(u, UCX_CONTROL_WAIT); /* what this rank told its peers goes out */
  if (u->worker && u->eps) {
    /* a normal close flushes what was sent (a finished send may still sit
     * in a local buffer); an abort, or an endpoint whose peer failed, is
     * closed by force. Either is bounded in time. */
    void** reqs = calloc((size_t)u->nranks, sizeof *reqs);
    if (!reqs) clean = 0;
    for (int i = 0; i < u->nranks && reqs; i++) {
      if (!u->eps[i]) continue;
      ucp_request_param_t p;
      memset(&p, 0, sizeof p);
      if (abort || u->failed[i] != UCS_OK) {
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      }
      void* q = ucp_ep_close_nbx(u->eps[i], &p);
      if (UCS_PTR_IS_PTR(q)) reqs[i] = q;
    }
    double deadline = clock_now() + (abort ? UCX_ABORT_WAIT : UCX_CLOSE_WAIT);
    for (int i = 0; i < u->nranks && reqs; i++) {
      while (reqs[i] && ucp_request_check_status(reqs[i]) == UCS_INPROGRESS &&
             clock_now() < deadline)
        ucp_worker_progress(u->worker);
      if (!reqs[i]) continue;
      if (ucp_request_check_status(reqs[i]) == UCS_INPROGRESS) clean = 0;
      ucp_request_free(reqs[i]);
    }
    free(reqs);
  }
  if (clean) {
    if (u->worker) ucp_worker_destroy(u->worker);
    if (u->ctx) ucp_cleanup(u->ctx);
  } else {
    /* UCX cannot destroy a worker with endpoints still closing: leave it
     * (a bounded leak on a failure path) rather than block or abort */
    QCCL_WARN(LOG_NET, "rank %d: UCX endpoints did not close in time; leaving the worker", u->rank);
  }
  free(u->eps);
  free(u->failed);
  free(u->sseq);
  free(u->rseq);
  free(u->ctl_reqs);
  if (clean) free(u->args);
  pthread_mutex_destroy(&u->mu);
  free(u);
}

/* ---- the transport vtable -------------------------------------------- */

static qcclResult_t ucx_peer_state(ucx_t* u, int peer) {
  if (u->failed[peer] != UCS_OK)
    return QCCL_ERR(qcclRemoteError, "rank %d is unreachable through UCX (%s)", peer,
                    ucs_status_string(u->failed[peer]));
  return qcclSuccess;
}

/* A control message waiting (another rank's communicator failed): the
 * transfer that waits fails, and the caller reads what it says
 * (ucx_take_control). */
static qcclResult_t ucx_control_waiting(ucx_t* u) {
  ucp_tag_recv_info_t info;
  if (ucp_tag_probe_nb(u->worker, UCX_TAG_CTRL, UCX_TAG_CTRL, 0, &info) == NULL) return qcclSuccess;
  return QCCL_ERR(qcclRemoteError, "rank %d reported that its call across hosts failed",
                  (int)(info.sender_tag & UCX_TAG_RANK_MASK));
}

/* A user's receive q waits: is a message from its peer waiting that it
 * does not match? (Messages from one peer arrive in order, so the oldest
 * waiting one is the one q should have matched.) */
static qcclResult_t ucx_p2p_unmatched(ucx_t* u, const ucx_req_t* q) {
  ucp_tag_recv_info_t info;
  if (ucp_tag_probe_nb(u->worker, (ucp_tag_t)q->peer, UCX_TAG_RANK_MASK | UCX_TAG_CTRL, 0, &info) ==
      NULL)
    return qcclSuccess;
  uint64_t call = (info.sender_tag >> UCX_TAG_RANK_BITS) & UCX_CALL_MASK;
  if (!(call & UCX_CALL_P2P))
    return QCCL_ERR(qcclInvalidUsage,
                    "qcclRecv on rank %d from rank %d: rank %d sent a collective's message "
                    "instead (the ranks' calls do not pair up)",
                    u->rank, q->peer, q->peer);
  if ((call >> UCX_P2P_LEN_BITS) == (q->call >> UCX_P2P_LEN_BITS))
    return QCCL_ERR(qcclInvalidUsage,
                    "qcclSend from rank %d has %zu bytes where the matching qcclRecv on rank %d "
                    "expects %zu (count or datatype differ)",
                    q->peer, info.length, u->rank, q->bytes);
  return QCCL_ERR(qcclInvalidUsage,
                  "the sends from rank %d and the receives on rank %d do not pair up (a message "
                  "of %zu bytes waits where the receive expects %zu)",
                  q->peer, u->rank, info.length, q->bytes);
}

/* A collective's transfer q waits: has a message of the same call number
 * but other arguments arrived, from any rank? (The other ranks made
 * another call; waiting for q would take until the timeout, e.g. when
 * both sides of a pair think they send.) */
static qcclResult_t ucx_call_conflict(ucx_t* u, uint64_t call) {
  const uint64_t num = (1u << UCX_CALL_NUM_BITS) - 1;
  ucp_tag_recv_info_t info;
  if (ucp_tag_probe_nb(u->worker, (ucp_tag_t)(call & num) << UCX_TAG_RANK_BITS,
                       (ucp_tag_t)(num | UCX_CALL_P2P) << UCX_TAG_RANK_BITS | UCX_TAG_CTRL, 0,
                       &info) == NULL)
    return qcclSuccess;
  if (((info.sender_tag >> UCX_TAG_RANK_BITS) & UCX_CALL_MASK) == call) return qcclSuccess;
  return QCCL_ERR(qcclInvalidUsage,
                  "a message from rank %d of the same call as rank %d's carries other arguments: "
                  "the ranks disagree on the collective or its arguments",
                  (int)(info.sender_tag & UCX_TAG_RANK_MASK), u->rank);
}

qcclResult_t ucx_control_seen(ucx_t* u) {
  if (!u || !u->worker) return qcclSuccess;
  /* a worker in use on another thread: its user sees the report (and it
   * may hold it for a second, closing endpoints) */
  if (pthread_mutex_trylock(&u->mu) != 0) return qcclSuccess;
  qcclResult_t r = ucx_control_waiting(u);
  pthread_mutex_unlock(&u->mu);
  return r;
}

qcclResult_t ucx_watch(ucx_t* u) {
  if (!u || !u->worker) return qcclSuccess;
  pthread_mutex_lock(&u->mu);
  ucp_worker_progress(u->worker);
  qcclResult_t r = ucx_control_waiting(u);
  if (r == qcclSuccess && u->call != 0 && !(u->call & UCX_CALL_P2P))
    r = ucx_call_conflict(u, u->call);
  pthread_mutex_unlock(&u->mu);
  return r;
}

static int ucx_reachable(const ucx_t* u, int peer) {
  return u->eps[peer] && u->failed[peer] == UCS_OK;
}

int ucx_peer_reachable(ucx_t* u, int peer) {
  if (!u || peer < 0 || peer >= u->nranks) return 0;
  pthread_mutex_lock(&u->mu);
  int ok = ucx_reachable(u, peer);
  pthread_mutex_unlock(&u->mu);
  return ok;
}

void ucx_post_control(ucx_t* u, const void* msg, size_t n) {
  if (!u || !u->worker || n > sizeof u->ctl) return;
  pthread_mutex_lock(&u->mu);
  if (u->ctl_posted) {
    pthread_mutex_unlock(&u->mu);
    return;
  }
  u->ctl_posted = 1;
  memcpy(u->ctl, msg, n);
  for (int i = 0; i < u->nranks; i++) {
    if (!ucx_reachable(u, i)) continue;
    ucp_request_param_t p;
    memset(&p, 0, sizeof p);
    void* s = ucp_tag_send_nbx(u->eps[i], u->ctl, n, UCX_TAG_CTRL | (ucp_tag_t)u->rank, &p);
    if (UCS_PTR_IS_PTR(s)) u->ctl_reqs[i] = s;
  }
  ucp_worker_progress(u->worker);
  pthread_mutex_unlock(&u->mu);
}

static size_t ucx_take_control_locked(ucx_t* u, void* buf, size_t cap, int* from);

size_t ucx_take_control(ucx_t* u, void* buf, size_t cap, int* from) {
  if (!u || !u->worker) return 0;
  pthread_mutex_lock(&u->mu);
  size_t n = ucx_take_control_locked(u, buf, cap, from);
  pthread_mutex_unlock(&u->mu);
  return n;
}

static size_t ucx_take_control_locked(ucx_t* u, void* buf, size_t cap, int* from) {
  ucp_worker_progress(u->worker);
  ucp_tag_recv_info_t info;
  ucp_tag_message_h m = ucp_tag_probe_nb(u->worker, UCX_TAG_CTRL, UCX_TAG_CTRL, 1, &info);
  if (m == NULL) return 0;
  char* tmp = malloc(info.length ? info.length : 1);
  if (tmp == NULL) return 0;
  ucp_request_param_t p;
  memset(&p, 0, sizeof p);
  void* s = ucp_tag_msg_recv_nbx(u->worker, tmp, info.length, m, &p);
  ucs_status_t st = UCS_PTR_IS_ERR(s) ? UCS_PTR_STATUS(s) : UCS_OK;
  if (UCS_PTR_IS_PTR(s)) {
    double deadline = clock_now() + UCX_ABORT_WAIT;
    while ((st = ucp_request_check_status(s)) == UCS_INPROGRESS && clock_now() < deadline)
      ucp_worker_progress(u->worker);
    if (st == UCS_INPROGRESS) ucp_request_cancel(u->worker, s);
    ucp_request_free(s);
  }
  size_t n = 0;
  if (st == UCS_OK) {
    n = info.length < cap ? info.length : cap;
    memcpy(buf, tmp, n);
    *from = (int)(info.sender_tag & UCX_TAG_RANK_MASK);
  }
  free(tmp);
  return n;
}

static void ucx_control_flush(ucx_t* u, double wait) {
  if (!u || !u->ctl_reqs || !u->worker) return;
  double deadline = clock_now() + wait;
  for (int i = 0; i < u->nranks; i++) {
    if (!u->ctl_reqs[i]) continue;
    while (ucp_request_check_status(u->ctl_reqs[i]) == UCS_INPROGRESS && clock_now() < deadline)
      ucp_worker_progress(u->worker);
    if (ucp_request_check_status(u->ctl_reqs[i]) == UCS_INPROGRESS)
      ucp_request_cancel(u->worker, u->ctl_reqs[i]);
    ucp_request_free(u->ctl_reqs[i]);
    u->ctl_reqs[i] = NULL;
  }
}

static qcclResult_t ucx_post(ucx_t* u, int send, int peer, void* buf, size_t n, void** req) {
  /* a receive is posted even from a peer that is gone: what it sent before
   * leaving may be waiting in UCX's unexpected queue */
  if (send) QCCL_CHECK(ucx_peer_state(u, peer));
  ucx_req_t* q = calloc(1, sizeof *q);
  if (!q) return QCCL_ERR(qcclSystemError, "out of memory");
  q->send = send;
  q->peer = peer;
  q->bytes = n;
  q->call = u->call;
  int p2p = (u->call & UCX_CALL_P2P) != 0;
  if (p2p) q->call = ucx_p2p_call(send ? u->sseq[peer]++ : u->rseq[peer]++, n);
  ucp_request_param_t p;
  memset(&p, 0, sizeof p);
  void* s;
  if (send) {
    s = ucp_tag_send_nbx(u->eps[peer], buf, n,
                         (ucp_tag_t)u->rank | (ucp_tag_t)q->call << UCX_TAG_RANK_BITS, &p);
  } else {
    /* always a request, so the received length is read in one place */
    p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    if (p2p)
      s = ucp_tag_recv_nbx(u->worker, buf, n,
                           (ucp_tag_t)peer | (ucp_tag_t)q->call << UCX_TAG_RANK_BITS, ~(ucp_tag_t)0,
                           &p);
    else
      s = ucp_tag_recv_nbx(u->worker, buf, n, (ucp_tag_t)peer, UCX_TAG_RANK_MASK | UCX_TAG_CTRL,
                           &p);
  }
  if (UCS_PTR_IS_ERR(s)) {
    ucs_status_t st = UCS_PTR_STATUS(s);
    free(q);
    return QCCL_ERR(st == UCS_ERR_MESSAGE_TRUNCATED ? qcclInvalidUsage : qcclRemoteError,
                    "UCX %s rank %d: %s", send ? "send to" : "receive from", peer,
                    ucs_status_string(st));
  }
  q->ucp = s; /* NULL: completed at once */
  *req = q;
  return qcclSuccess;
}

static qcclResult_t ucx_isend(void* ctx, int peer, const void* buf, size_t n, int flags,
                              void** req) {
  (void)flags;
  ucx_t* u = ctx;
  pthread_mutex_lock(&u->mu);
  qcclResult_t r = ucx_post(u, 1, peer, (void*)buf, n, req);
  pthread_mutex_unlock(&u->mu);
  return r;
}

static qcclResult_t ucx_irecv(void* ctx, int peer, void* buf, size_t n, void** req) {
  ucx_t* u = ctx;
  pthread_mutex_lock(&u->mu);
  qcclResult_t r = ucx_post(u, 0, peer, buf, n, req);
  pthread_mutex_unlock(&u->mu);
  return r;
}

static qcclResult_t ucx_test_locked(ucx_t* u, void* req, int* done);

static qcclResult_t ucx_test(void* ctx, void* req, int* done) {
  ucx_t* u = ctx;
  pthread_mutex_lock(&u->mu);
  qcclResult_t r = ucx_test_locked(u, req, done);
  pthread_mutex_unlock(&u->mu);
  return r;
}

static qcclResult_t ucx_test_locked(ucx_t* u, void* req, int* done) {
  ucx_req_t* q = req;
  *done = 0;
  if (q->ucp) {
    ucp_worker_progress(u->worker);
    ucs_status_t st;
    size_t got = q->bytes;
    uint64_t call = q->call;
    if (q->send) {
      st = ucp_request_check_status(q->ucp);
    } else {
      ucp_tag_recv_info_t info;
      st = ucp_tag_recv_request_test(q->ucp, &info);
      if (st != UCS_INPROGRESS) {
        got = info.length;
        call = info.sender_tag >> UCX_TAG_RANK_BITS;
      }
    }
    if (st == UCS_INPROGRESS) {
      qcclResult_t r = ucx_peer_state(u, q->peer);
      if (r == qcclSuccess) r = ucx_control_waiting(u);
      if (r == qcclSuccess && !q->send && (q->call & UCX_CALL_P2P)) r = ucx_p2p_unmatched(u, q);
      if (r == qcclSuccess && !(q->call & UCX_CALL_P2P)) r = ucx_call_conflict(u, q->call);
      if (r != qcclSuccess) {
        ucp_request_cancel(u->worker, q->ucp);
        ucp_request_free(q->ucp);
        u->abandoned = 1;
        free(q);
      }
      return r;
    }
    ucp_request_free(q->ucp);
    q->ucp = NULL;
    if (st == UCS_OK && call != q->call) {
      int peer = q->peer;
      free(q);
      return QCCL_ERR(qcclInvalidUsage,
                      "a message from rank %d belongs to another call than rank %d's: the ranks "
                      "disagree on the collective or its arguments, or an earlier failed call "
                      "left it behind",
                      peer, u->rank);
    }
    if (st != UCS_OK || got != q->bytes) {
      int peer = q->peer, send = q->send;
      size_t want = q->bytes;
      free(q);
      if (st == UCS_ERR_MESSAGE_TRUNCATED || (st == UCS_OK && got != want))
        return QCCL_ERR(qcclInvalidUsage,
                        "the message from rank %d does not have the %zu bytes the receive on "
                        "rank %d expects (count or datatype differ)",
                        peer, want, u->rank);
      return QCCL_ERR(qcclRemoteError, "UCX %s rank %d failed: %s",
                      send ? "send to" : "receive from", peer, ucs_status_string(st));
    }
  }
  *done = 1;
  free(q);
  return qcclSuccess;
}

static size_t ucx_moved(void* ctx, void* req) {
  (void)ctx;
  ucx_req_t* q = req;
  return q->ucp ? 0 : q->bytes;
}

static void ucx_cancel(void* ctx, void* req) {
  ucx_t* u = ctx;
  ucx_req_t* q = req;
  if (q->ucp) {
    pthread_mutex_lock(&u->mu);
    ucp_request_cancel(u->worker, q->ucp);
    ucp_request_free(q->ucp);
    u->abandoned = 1;
    pthread_mutex_unlock(&u->mu);
  }
  free(q);
}

static qcclResult_t ucx_check(void* ctx, int peer) {
  ucx_t* u = ctx;
  pthread_mutex_lock(&u->mu);
  ucp_worker_progress(u->worker);
  qcclResult_t r = ucx_peer_state(u, peer);
  if (r == qcclSuccess) r = ucx_control_waiting(u);
  pthread_mutex_unlock(&u->mu);
  return r;
}

void ucx_set_call(ucx_t* u, uint64_t call) {
  if (u) u->call = call & UCX_CALL_MASK;
}

void ucx_break(ucx_t* u) {
  if (!u || !u->worker || !u->eps) return;
  pthread_mutex_lock(&u->mu);
  ucx_control_flush(u, UCX_CONTROL_WAIT); /* what this rank told its peers goes out first */
  void** reqs = calloc((size_t)u->nranks, sizeof *reqs);
  for (int i = 0; i < u->nranks; i++) {
    if (!u->eps[i]) continue;
    ucp_request_param_t p;
    memset(&p, 0, sizeof p);
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* q = ucp_ep_close_nbx(u->eps[i], &p);
    if (reqs && UCS_PTR_IS_PTR(q)) reqs[i] = q;
    u->eps[i] = NULL;
    if (u->failed[i] == UCS_OK) u->failed[i] = UCS_ERR_CANCELED;
  }
  double deadline = clock_now() + UCX_ABORT_WAIT;
  for (int i = 0; i < u->nranks && reqs; i++) {
    while (reqs[i] && ucp_request_check_status(reqs[i]) == UCS_INPROGRESS && clock_now() < deadline)
      ucp_worker_progress(u->worker);
    if (reqs[i]) ucp_request_free(reqs[i]);
  }
  free(reqs);
  pthread_mutex_unlock(&u->mu);
  QCCL_INFO(LOG_NET, "rank %d: UCX endpoints closed: the communicator failed", u->rank);
}

const transport_ops_t ucx_p2p_ops = {.name = "ucx",
                                     .isend = ucx_isend,
                                     .irecv = ucx_irecv,
                                     .test = ucx_test,
                                     .moved = ucx_moved,
                                     .cancel = ucx_cancel,
                                     .check = ucx_check,
                                     .remote = 1};
