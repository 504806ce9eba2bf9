/*
 * topo_map - the rank map and the topology sub-communicators, on every
 * rank, against what this program computes from the placement it is given
 * (--expect LIST, the same list as qcclrun --placement; "" or absent: one
 * host). Run under qcclrun with simulated hosts; public API only.
 *
 * Cases:
 *   map       qcclCommNodeInfo, qcclCommPeerNode of every peer and
 *             qcclCommNodeSize of every node equal the reference (hosts
 *             numbered by first appearance, local rank = lower ranks on the
 *             host); the local rank and size equal qcclrun's LOCAL_RANK and
 *             LOCAL_WORLD_SIZE; ranks with equal QCCL_HOST_ID (all-gathered)
 *             are on equal nodes; the whole map hashes the same everywhere;
 *   node      qcclCommSplitNode: size, rank (= local rank), members (their
 *             parent ranks all-gathered on it), an exact AllReduce, and its
 *             own NodeInfo (one node);
 *   rail      qcclCommSplitRail: the ranks of this local rank, one per node
 *             that has it, ordered by node; members, AllReduce, and its
 *             NodeInfo (one rank per node);
 *   leaders   qcclCommSplitLeaders: NULL off local rank 0; on leaders the
 *             node's leader ranks by node, rank = node, AllReduce;
 *   badargs   NULL newcomm, peer and node out of range, NULL comm: errors
 *             naming the argument, the communicator still works.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mr_util.h"

typedef struct {
  int n, nnodes;
  int host[1024]; /* label from --expect */
  int node[1024];
  int local[1024];
  int size[1024]; /* per node */
} ref_t;

static void ref_build(mr_t* t, const char* list, ref_t* r) {
  memset(r, 0, sizeof *r);
  r->n = t->nranks;
  if (t->nranks > 1024) mr_die(t, "too many ranks");
  const char* p = list ? list : "";
  for (int i = 0; i < r->n; i++) {
    if (*p == '\0') {
      r->host[i] = 0;
      continue;
    }
    char* end;
    r->host[i] = (int)strtol(p, &end, 10);
    if (end == p) mr_die(t, "--expect '%s': not a list of host numbers", list);
    p = *end == ',' ? end + 1 : end;
  }
  for (int i = 0; i < r->n; i++) {
    r->node[i] = -1;
    for (int q = 0; q < i && r->node[i] < 0; q++)
      if (r->host[q] == r->host[i]) r->node[i] = r->node[q];
    if (r->node[i] < 0) r->node[i] = r->nnodes++;
    r->local[i] = r->size[r->node[i]]++;
  }
}

/* The parent ranks of sub's members in sub-rank order, all-gathered. */
static void expect_members(mr_case_t* c, qcclComm_t sub, const int* want, int nwant,
                           const char* what) {
  int n = -1, me = -1;
  MR_OK(c, qcclCommCount(sub, &n));
  MR_OK(c, qcclCommUserRank(sub, &me));
  if (n != nwant) {
    mr_case_fail(c, "%s: %d ranks, expected %d", what, n, nwant);
    return;
  }
  int32_t* got = calloc((size_t)n, sizeof *got);
  int32_t mine = c->t->rank;
  MR_OK(c, qcclAllGather(&mine, got, 1, qcclInt32, sub, NULL));
  for (int i = 0; i < n; i++)
    if (got[i] != want[i])
      mr_case_fail(c, "%s: member %d is rank %d, expected %d", what, i, got[i], want[i]);
  if (want[me] != c->t->rank) mr_case_fail(c, "%s: this rank has sub-rank %d", what, me);
  /* an exact sum over the members, 1000 elements */
  int64_t v[1000], w = 0;
  for (int i = 0; i < nwant; i++) w += want[i] + 1;
  for (int i = 0; i < 1000; i++) v[i] = (int64_t)(c->t->rank + 1) * (i + 1);
  MR_OK(c, qcclAllReduce(v, v, 1000, qcclInt64, qcclSum, sub, NULL));
  for (int i = 0; i < 1000; i++)
    if (v[i] != w * (i + 1)) {
      mr_case_fail(c, "%s: AllReduce element %d is %lld, expected %lld", what, i, (long long)v[i],
                   (long long)(w * (i + 1)));
      break;
    }
  free(got);
}

static void case_map(mr_t* t, const ref_t* r) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "map")) return;
  int node = -1, nnodes = -1, lr = -1, ls = -1;
  MR_OK(&c, qcclCommNodeInfo(t->comm, &node, &nnodes, &lr, &ls));
  int me = t->rank;
  if (node != r->node[me] || nnodes != r->nnodes || lr != r->local[me] ||
      ls != r->size[r->node[me]])
    mr_case_fail(&c, "NodeInfo node %d/%d local %d/%d, expected %d/%d local %d/%d", node, nnodes,
                 lr, ls, r->node[me], r->nnodes, r->local[me], r->size[r->node[me]]);
  MR_OK(&c, qcclCommNodeInfo(t->comm, NULL, NULL, NULL, NULL));
  uint64_t h = 0;
  for (int p = 0; p < t->nranks; p++) {
    int pn = -1, pl = -1;
    MR_OK(&c, qcclCommPeerNode(t->comm, p, &pn, &pl));
    if (pn != r->node[p] || pl != r->local[p])
      mr_case_fail(&c, "PeerNode(%d) = node %d local %d, expected %d, %d", p, pn, pl, r->node[p],
                   r->local[p]);
    h = mr_mix(h ^ (uint64_t)(pn * 4096 + pl));
  }
  for (int n = 0; n < r->nnodes; n++) {
    int s = -1;
    MR_OK(&c, qcclCommNodeSize(t->comm, n, &s));
    if (s != r->size[n]) mr_case_fail(&c, "NodeSize(%d) = %d, expected %d", n, s, r->size[n]);
    h = mr_mix(h ^ (uint64_t)s);
  }
  mr_same_everywhere(&c, h, "rank map");
  /* qcclrun's own per-host numbering (with --placement) */
  const char* env_lr = getenv("LOCAL_RANK");
  const char* env_ls = getenv("LOCAL_WORLD_SIZE");
  if (getenv("QCCL_HOST_ID") && env_lr && env_ls && (atoi(env_lr) != lr || atoi(env_ls) != ls))
    mr_case_fail(&c, "LOCAL_RANK=%s LOCAL_WORLD_SIZE=%s, library says %d of %d", env_lr, env_ls, lr,
                 ls);
  /* equal host ids <=> equal nodes */
  char id[128] = "";
  snprintf(id, sizeof id, "%s", getenv("QCCL_HOST_ID") ? getenv("QCCL_HOST_ID") : "");
  char* ids = calloc((size_t)t->nranks, sizeof id);
  MR_OK(&c, qcclAllGather(id, ids, sizeof id, qcclInt8, t->comm, NULL));
  for (int p = 0; p < t->nranks; p++)
    for (int q = 0; q < p; q++) {
      int same_id = strcmp(ids + p * sizeof id, ids + q * sizeof id) == 0;
      if (same_id != (r->node[p] == r->node[q]))
        mr_case_fail(&c, "ranks %d (%s) and %d (%s): same host id %d, same node %d", p,
                     ids + p * sizeof id, q, ids + q * sizeof id, same_id,
                     r->node[p] == r->node[q]);
    }
  free(ids);
  mr_case_end(&c);
}

static void case_node(mr_t* t, const ref_t* r) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "node")) return;
  qcclComm_t sub = NULL;
  MR_OK(&c, qcclCommSplitNode(t->comm, NULL, &sub));
  int want[1024], n = 0, me = t->rank;
  for (int p = 0; p < t->nranks; p++)
    if (r->node[p] == r->node[me]) want[n++] = p;
  if (sub == NULL) {
    mr_case_fail(&c, "SplitNode gave NULL");
  } else {
    expect_members(&c, sub, want, n, "node");
    int node = -1, nnodes = -1, lr = -1, ls = -1;
    MR_OK(&c, qcclCommNodeInfo(sub, &node, &nnodes, &lr, &ls));
    if (node != 0 || nnodes != 1 || lr != r->local[me] || ls != n)
      mr_case_fail(&c, "node comm NodeInfo %d/%d local %d/%d", node, nnodes, lr, ls);
    MR_OK(&c, qcclCommDestroy(sub));
  }
  mr_case_end(&c);
}

static void case_rail(mr_t* t, const ref_t* r) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "rail")) return;
  qcclComm_t sub = NULL;
  MR_OK(&c, qcclCommSplitRail(t->comm, NULL, &sub));
  int want[1024], n = 0, me = t->rank;
  for (int h = 0; h < r->nnodes; h++) /* ordered by node */
    for (int p = 0; p < t->nranks; p++)
      if (r->node[p] == h && r->local[p] == r->local[me]) want[n++] = p;
  if (sub == NULL) {
    mr_case_fail(&c, "SplitRail gave NULL");
  } else {
    expect_members(&c, sub, want, n, "rail");
    int nnodes = -1, ls = -1;
    MR_OK(&c, qcclCommNodeInfo(sub, NULL, &nnodes, NULL, &ls));
    if (nnodes != n || ls != 1) mr_case_fail(&c, "rail comm: %d nodes, local size %d", nnodes, ls);
    MR_OK(&c, qcclCommDestroy(sub));
  }
  mr_case_end(&c);
}

static void case_leaders(mr_t* t, const ref_t* r) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "leaders")) return;
  qcclComm_t sub = (qcclComm_t)&c; /* must be overwritten */
  MR_OK(&c, qcclCommSplitLeaders(t->comm, NULL, &sub));
  int want[1024], n = 0, me = t->rank;
  for (int h = 0; h < r->nnodes; h++)
    for (int p = 0; p < t->nranks; p++)
      if (r->node[p] == h && r->local[p] == 0) want[n++] = p;
  if (r->local[me] != 0) {
    if (sub != NULL) mr_case_fail(&c, "a non-leader got a leaders communicator");
  } else if (sub == NULL) {
    mr_case_fail(&c, "a leader got NULL");
  } else {
    expect_members(&c, sub, want, n, "leaders");
    int sr = -1;
    MR_OK(&c, qcclCommUserRank(sub, &sr));
    if (sr != r->node[me]) mr_case_fail(&c, "leader rank %d, expected node %d", sr, r->node[me]);
    MR_OK(&c, qcclCommDestroy(sub));
  }
  mr_case_end(&c);
}

static void expect_error(mr_case_t* c, qcclResult_t got, qcclComm_t comm, const char* word,
                         const char* what) {
  if (got != qcclInvalidArgument)
    mr_case_fail(c, "%s: result %d, expected qcclInvalidArgument", what, (int)got);
  const char* msg = qcclGetLastError(comm);
  if (strstr(msg, word) == NULL) mr_case_fail(c, "%s: message '%s' lacks '%s'", what, msg, word);
}

static void case_badargs(mr_t* t) {
  mr_case_t c;
  if (!mr_case_begin(t, &c, "badargs")) return;
  int x = -7;
  expect_error(&c, qcclCommSplitNode(t->comm, NULL, NULL), t->comm, "newcomm", "SplitNode(NULL)");
  expect_error(&c, qcclCommSplitRail(t->comm, NULL, NULL), t->comm, "newcomm", "SplitRail(NULL)");
  expect_error(&c, qcclCommSplitLeaders(t->comm, NULL, NULL), t->comm, "newcomm",
               "SplitLeaders(NULL)");
  expect_error(&c, qcclCommPeerNode(t->comm, t->nranks, &x, NULL), NULL, "peer", "PeerNode(W)");
  expect_error(&c, qcclCommPeerNode(t->comm, -1, &x, NULL), NULL, "peer", "PeerNode(-1)");
  expect_error(&c, qcclCommNodeSize(t->comm, 1 << 20, &x), NULL, "node", "NodeSize(big)");
  expect_error(&c, qcclCommNodeSize(t->comm, 0, NULL), NULL, "size", "NodeSize(NULL)");
  expect_error(&c, qcclCommNodeInfo(NULL, &x, NULL, NULL, NULL), NULL, "comm", "NodeInfo(NULL)");
  expect_error(&c, qcclCommSplitNode(NULL, NULL, &t->comm), NULL, "comm", "SplitNode(NULL comm)");
  if (x != -7) mr_case_fail(&c, "an output was written on failure");
  int32_t v = 1, sum = 0;
  MR_OK(&c, qcclAllReduce(&v, &sum, 1, qcclInt32, qcclSum, t->comm, NULL));
  if (sum != t->nranks) mr_case_fail(&c, "AllReduce after the errors: %d", sum);
  mr_case_end(&c);
}

int main(int argc, char** argv) {
  mr_t t;
  mr_init(&t, argc, argv);
  static ref_t r;
  ref_build(&t, mr_opt(&t, "--expect"), &r);
  case_map(&t, &r);
  case_node(&t, &r);
  case_rail(&t, &r);
  case_leaders(&t, &r);
  /* twice in a row, with other collectives between: splits stay in step */
  case_node(&t, &r);
  case_leaders(&t, &r);
  case_badargs(&t);
  return mr_finish(&t);
}
