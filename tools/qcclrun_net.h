/*
 * qcclrun_net - simulated hosts for qcclrun --nodes K: a star network of
 * network namespaces on this machine, optionally throttled, and where each
 * rank runs in it.
 *
 * As root, one run with pid P makes a "switch" namespace qccl-P-sw holding a
 * bridge, and K host namespaces qccl-P-h<i>. Host i is joined to the bridge
 * by a veth pair (qccl<i> in the host, qccl<i>-sw on the bridge), has address
 * 10.77.0.<i+1>/24 on qccl<i> and loopback up, and IPv6 off (no stray
 * traffic on the counters). The veths are made inside the namespaces, never
 * in the caller's, and the pid in the names keeps concurrent runs apart; the
 * addresses exist only inside this run's namespaces. With --link RATE every
 * veth end gets "tc ... tbf rate RATE" (both directions throttled). The
 * commands are iproute2's ip and tc, spawned one by one; a failing one is
 * logged.
 *
 * A rank enters its host between fork and exec: setns() into the host's
 * network namespace, a UTS namespace of its own with hostname qccl-host<i>,
 * and QCCL_HOST_ID, LOCAL_RANK, LOCAL_WORLD_SIZE (per host) and
 * QCCL_SOCKET_IFNAME=qccl<i> in its environment; MASTER_ADDR is the address
 * of rank 0's host and QCCLRUN_NETNS=1.
 *
 * Without root, or when "ip netns add" fails, it says so and falls back to
 * one host: the ranks get their simulated host's QCCL_HOST_ID and local
 * ranks, but share this machine's network, unthrottled (QCCLRUN_NETNS=0).
 *
 * At the end it reads each host's veth byte counters (/proc/net/dev inside
 * the namespace), reports them, optionally as JSON, kills what still runs in
 * the namespaces and deletes them, which removes the veths and the bridge.
 * "qcclrun --cleanup" removes the namespaces of runs whose qcclrun is gone.
 *
 * It also sets the job's rendezvous for every run (with or without --nodes):
 * the master's address and a free port, and the job's secret.
 *
 * Cost: about 6 ip/tc commands per host at start, one per namespace at the
 * end, one scan of /proc per namespace to find what still runs there.
 */
#ifndef QCCLRUN_NET_H
#define QCCLRUN_NET_H

#include <stdint.h>
#include <sys/types.h>

#include "qcclrun_relay.h"

#define RUN_NET_MAX_HOSTS 254 /* one /24 */

typedef struct {
  int nranks;
  int nhosts;             /* --nodes K; 0: no simulated hosts */
  const char* rate;       /* --link RATE, or NULL */
  const char* placement;  /* --placement LIST, or NULL: blocks */
  const char* stats_path; /* --link-stats FILE, or NULL */
} run_net_opts_t;

typedef struct {
  run_net_opts_t opts;
  pid_t owner;     /* this qcclrun: in the names */
  int netns;       /* 1: real namespaces, 0: the fallback */
  int ready;       /* every namespace, link and qdisc made */
  int* host_of;    /* [nranks] */
  int* local_rank; /* [nranks] index among the ranks of its host */
  int* local_size; /* [nhosts] ranks on each host */
  int* ns_fd;      /* [nhosts + 1] host namespaces, then the switch; -1: none */
  int self_fd;     /* qcclrun's own network namespace */
} run_net_t;

/* setenv() of an integer. */
run_result_t run_net_setenv_int(const char* name, int v);

/* Sets what every rank of the job shares: WORLD_SIZE and LOCAL_WORLD_SIZE
 * (nranks), MASTER_ADDR=127.0.0.1, MASTER_PORT (a free port: port 0 bound on
 * 127.0.0.1, read back, closed) and QCCL_SECRET (16 random bytes in hex).
 * With --nodes, run_net_setup() and each rank adjust them. */
run_result_t run_net_job_env(int nranks);

/* Checks the --nodes options: the rate's form (a delay is refused: no netem
 * on this kernel), the placement (one host per rank, each < K); takes K from
 * the placement when --nodes was not given. Bad usage: RUN_ERR_USAGE, after
 * a message. */
run_result_t run_net_check_opts(run_net_opts_t* o);

/* Places the ranks and makes the hosts (or falls back), then sets
 * QCCLRUN_NETNS and MASTER_ADDR in this process's environment. On an error
 * after the first namespace, what was made is removed again. */
run_result_t run_net_setup(run_net_t* net, const run_net_opts_t* o);

/* In a rank's child between fork and exec: enters its host and sets its
 * per-host environment. 0, or -1 after a message on stderr. */
int run_net_child_enter(const run_net_t* net, int rank);

/* Reports the link counters, writes --link-stats, kills what still runs in
 * the namespaces and deletes them; frees net. Safe to call twice. */
run_result_t run_net_teardown(run_net_t* net);

/* qcclrun --cleanup: removes every qccl-<pid>-* namespace whose qcclrun pid
 * no longer exists (and kills what still runs in it). Exit status. */
int run_net_cleanup_stale(void);

#endif
