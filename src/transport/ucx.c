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
 */
#include "transport/ucx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

#include "core/env.h"
#include "core/log.h"
#include "core/socket.h"
#include "transport/transport.h"

#define UCX_CLOSE_WAIT 3.0 /* seconds a normal close may flush */
#define UCX_ABORT_WAIT 1.0 /* seconds a forced close may take */

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
};

/* A tag: the sender's rank in the low UCX_TAG_RANK_BITS, the call above.
 * Receives match on the rank bits alone (per-sender order, as before) and
 * then compare the call, so a message of another call (a rank that made a
 * different call, or one left behind by a failed call) is an error, never
 * data. */
#define UCX_TAG_RANK_BITS 24
#define UCX_TAG_RANK_MASK ((ucp_tag_t)((1u << UCX_TAG_RANK_BITS) - 1))

typedef struct {
  int send;
  int peer;
  size_t bytes;
  void* ucp; /* the UCP request, NULL when it completed at once */
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
  /* one thread at a time: the caller, or a two-level algorithm's rail thread */
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

qcclResult_t ucx_open(bootstrap_t* boot, const int* remote, double timeout, ucx_t** out) {
  (void)timeout;
  int w = boot_nranks(boot);
  ucx_t* u = calloc(1, sizeof *u);
  if (!u) return QCCL_ERR(qcclSystemError, "out of memory");
  u->rank = boot_rank(boot);
  u->nranks = w;
  u->eps = calloc((size_t)w, sizeof *u->eps);
  u->failed = calloc((size_t)w, sizeof *u->failed);
  u->args = calloc((size_t)w, sizeof *u->args);
  qcclResult_t r = qcclSuccess;
  if (!u->eps || !u->failed || !u->args) r = QCCL_ERR(qcclSystemError, "out of memory");
  if (r == qcclSuccess) r = ucx_make_worker(u);
  if (r == qcclSuccess) r = ucx_connect(u, boot, remote);
  if (r != qcclSuccess) {
    ucx_close(u, 1);
    return r;
  }
  QCCL_INFO(LOG_NET, "rank %d: UCX endpoints ready", u->rank);
  *out = u;
  return qcclSuccess;
}

void ucx_close(ucx_t* u, int abort) {
  if (!u) return;
  int clean = 1;
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
  if (clean) free(u->args);
  free(u);
}

/* ---- the transport vtable -------------------------------------------- */

static qcclResult_t ucx_peer_state(ucx_t* u, int peer) {
  if (u->failed[peer] != UCS_OK)
    return QCCL_ERR(qcclRemoteError, "rank %d is unreachable through UCX (%s)", peer,
                    ucs_status_string(u->failed[peer]));
  return qcclSuccess;
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
  ucp_request_param_t p;
  memset(&p, 0, sizeof p);
  void* s;
  if (send) {
    s = ucp_tag_send_nbx(u->eps[peer], buf, n,
                         (ucp_tag_t)u->rank | (ucp_tag_t)u->call << UCX_TAG_RANK_BITS, &p);
  } else {
    /* always a request, so the received length is read in one place */
    p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    s = ucp_tag_recv_nbx(u->worker, buf, n, (ucp_tag_t)peer, UCX_TAG_RANK_MASK, &p);
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

static qcclResult_t ucx_isend(void* ctx, int peer, const void* buf, size_t n, void** req) {
  return ucx_post(ctx, 1, peer, (void*)buf, n, req);
}

static qcclResult_t ucx_irecv(void* ctx, int peer, void* buf, size_t n, void** req) {
  return ucx_post(ctx, 0, peer, buf, n, req);
}

static qcclResult_t ucx_test(void* ctx, void* req, int* done) {
  ucx_t* u = ctx;
  ucx_req_t* q = req;
  *done = 0;
  if (q->ucp) {
    ucp_worker_progress(u->worker);
    ucs_status_t st;
    size_t got = q->bytes;
    uint64_t call = u->call;
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
      if (r != qcclSuccess) {
        ucp_request_cancel(u->worker, q->ucp);
        ucp_request_free(q->ucp);
        free(q);
      }
      return r;
    }
    ucp_request_free(q->ucp);
    q->ucp = NULL;
    if (st == UCS_OK && call != u->call) {
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
    ucp_request_cancel(u->worker, q->ucp);
    ucp_request_free(q->ucp);
  }
  free(q);
}

static qcclResult_t ucx_check(void* ctx, int peer) {
  ucx_t* u = ctx;
  ucp_worker_progress(u->worker);
  return ucx_peer_state(u, peer);
}

void ucx_set_call(ucx_t* u, uint64_t call) {
  if (u) u->call = call & (~(uint64_t)0 >> UCX_TAG_RANK_BITS);
}

void ucx_break(ucx_t* u) {
  if (!u || !u->worker || !u->eps) return;
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
  QCCL_INFO(LOG_NET, "rank %d: UCX endpoints closed: the communicator failed", u->rank);
}

const transport_ops_t ucx_p2p_ops = {"ucx",     ucx_isend,  ucx_irecv, ucx_test,
                                     ucx_moved, ucx_cancel, ucx_check};
