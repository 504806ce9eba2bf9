/*
 * qcclrun - the local launcher: runs N ranks of one job on this host.
 *
 *   qcclrun -n N [--timeout S] [--grace S] [--no-prefix] [--bind none|core|numa]
 *           [--nodes K [--link RATE] [--placement LIST] [--link-stats FILE]]
 *           -- prog [args...]
 *   qcclrun --cleanup
 *
 * Before the first fork it picks what the ranks share (run_net_job_env() in
 * qcclrun_net.c): a free TCP port (bind port 0 on 127.0.0.1, read it back,
 * close) and a secret of 16 random bytes in hex, exported with WORLD_SIZE,
 * LOCAL_WORLD_SIZE and MASTER_ADDR over any inherited value. Each rank is
 * fork+exec'd with RANK and LOCAL_RANK, stdin on /dev/null, stdout and stderr
 * on pipes, in a process group of its own so one kill(-pgid) reaches it and
 * all it spawned. With --nodes the ranks run on K simulated hosts
 * (qcclrun_net.c): network namespaces joined by a bridge, optionally
 * throttled, each rank entering its host between fork and exec.
 *
 * Then one single-threaded poll() loop does the rest:
 *  - it reads the pipes and writes whole lines only, each with a "[i] " prefix:
 *    as the only writer it never mixes lines. A partial last line gets its
 *    prefix and a newline at EOF; a line over 1 MiB is cut.
 *  - signal handlers write the signal number into a self-pipe; on SIGCHLD the
 *    loop reaps exited ranks at once, as the library checks peer liveness with
 *    kill(pid, 0) and a zombie would still count as alive.
 *  - it steps the teardown: run --(a rank exits non-zero)--> grace
 *    --(--grace s)--> term: SIGTERM to every group --(2 s)--> kill: SIGKILL.
 *    --timeout, SIGINT, SIGTERM and SIGHUP go to term at once.
 * When every rank is reaped and its pipes are at EOF (or 1 s later, killing
 * the groups of descendants that still hold them), it removes
 * /dev/shm/qccl-<pid>-* of its ranks' pids, reports the simulated hosts' link
 * counters and removes the hosts, and exits with 128+signal if it
 * was signalled, 124 on timeout, else the status of the first rank that
 * failed (not 0 or 77; 128+signal if killed), else 77 if a rank skipped, else
 * 0. Bad usage exits 2, a failure to start the job 1.
 *
 * Cost: one poll() over 2N+1 descriptors per wake-up, one writev() per line.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qcclrun_net.h"
#include "qcclrun_relay.h"

#define RUN_MAX_RANKS 1024
#define RUN_DEFAULT_GRACE_S 3.0
#define RUN_MAX_SECONDS 1e7 /* --timeout / --grace upper bound */
#define RUN_MIN_TIMEOUT_S 1e-3
#define RUN_KILL_DELAY_S 2.0 /* SIGTERM, then SIGKILL this much later */
#define RUN_DRAIN_S 1.0      /* wait for pipes after the last rank exited */
#define RUN_EXIT_START_FAILED 1
#define RUN_EXIT_USAGE 2
#define RUN_EXIT_SKIP 77
#define RUN_EXIT_TIMEOUT 124
#define RUN_EXIT_EXEC_FAILED 127

typedef struct {
  pid_t pid;   /* 0 until forked; also the process group id */
  int alive;   /* forked and not yet reaped */
  int wstatus; /* waitpid() status once reaped */
  char prefix[16];
  size_t prefix_len;
  run_stream_t out, err;
} run_rank_t;

typedef enum { RUN_PHASE_RUN, RUN_PHASE_GRACE, RUN_PHASE_TERM, RUN_PHASE_KILL } run_phase_t;

typedef struct {
  int nranks;
  double timeout_s; /* <= 0: none */
  double grace_s;
  int prefix;
  char** argv; /* the program and its arguments, NULL-terminated */
  run_net_opts_t net;
  int cleanup;      /* --cleanup: remove leftover namespaces, nothing else */
  const char* bind; /* --bind: QCCL_BIND for the ranks, or NULL */
} run_opts_t;

typedef struct {
  run_opts_t opts;
  run_net_t net; /* the simulated hosts, when opts.net.nhosts > 0 */
  run_rank_t* ranks;
  struct pollfd* pfds; /* [0]: the self-pipe, [1 + 2i]: rank i's stdout, [2 + 2i]: its stderr */
  int sig_pipe[2];
  int nstarted, nalive;
  run_phase_t phase;
  double start, phase_deadline, drain_deadline; /* CLOCK_MONOTONIC seconds */
  int got_signal;                               /* first SIGINT/SIGTERM/SIGHUP, or 0 */
  int timed_out, start_failed, any_skip;
  int first_failed; /* rank index, or -1 */
} run_job_t;

/* The signal handler's only way out: the write end of the self-pipe. */
static int run_sig_wfd = -1;

static void run_on_signal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  ssize_t n = write(run_sig_wfd, &b, 1); /* full pipe: the loop wakes anyway */
  (void)n;
  errno = saved;
}

static double run_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static run_result_t run_usage(FILE* f) {
  fputs(
      "usage: qcclrun -n N [--timeout S] [--grace S] [--no-prefix] [--bind MODE]\n"
      "               [--nodes K [--link RATE] [--placement LIST] [--link-stats FILE]]\n"
      "               -- prog [args...]\n"
      "       qcclrun --cleanup\n"
      "Runs N ranks of prog here, with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
      "MASTER_ADDR, MASTER_PORT (a free port) and QCCL_SECRET set for each.\n"
      "  -n N          number of ranks, 1..1024\n"
      "  --timeout S   kill the job after S seconds, exit 124 (default: none)\n"
      "  --grace S     seconds the others get after a rank failed (default 3)\n"
      "  --no-prefix   do not prefix output lines with \"[rank] \"\n"
      "  --nodes K     run on K simulated hosts (as root: network namespaces on a\n"
      "                bridge, own hostname and address; else one host with\n"
      "                QCCL_HOST_ID split); sets QCCL_HOST_ID, QCCL_SOCKET_IFNAME,\n"
      "                LOCAL_RANK per host and QCCLRUN_NETNS=1 (namespaces) or 0\n"
      "  --link RATE   throttle every host's link with tc tbf, e.g. 100mbit, 1gbit\n"
      "                (no delay: this kernel has no netem)\n"
      "  --placement LIST  the host of each rank, e.g. 0,1,0,1 (default: blocks)\n"
      "  --link-stats FILE  write each host's link byte counters as JSON at exit\n"
      "  --bind MODE   QCCL_BIND for the ranks: none, core or numa (each rank binds\n"
      "                itself to a core / NUMA node from its local rank at init)\n"
      "  --cleanup     remove namespaces left by a qcclrun that was killed\n"
      "  -h, --help    print this help\n"
      "Exit: 0 if all ranks exit 0; 77 if all exit 0 or 77; else the status of the\n"
      "first failed rank (128+signal if killed); 124 timeout; 130/143 SIGINT/SIGTERM.\n",
      f);
  return RUN_OK;
}

/* Reports bad usage: what (and 'arg'), if given, then the short usage. */
static run_result_t run_usage_error(const char* what, const char* arg) {
  if (what != NULL && arg != NULL) run_msg("%s '%s'", what, arg);
  if (what != NULL && arg == NULL) run_msg("%s", what);
  run_msg(
      "usage: qcclrun -n N [--timeout S] [--grace S] [--no-prefix] [--bind MODE] [--nodes K "
      "[--link RATE] [--placement LIST] [--link-stats FILE]] -- prog [args...]");
  return RUN_ERR_USAGE;
}

/* Parses option name's value s: a number in lo..hi, an integer if integer
 * (what describes the range in the message). */
static run_result_t run_parse_number(const char* name, const char* s, double lo, double hi,
                                     int integer, const char* what, double* out) {
  char* end;
  double v;
  errno = 0;
  v = integer ? (double)strtol(s, &end, 10) : strtod(s, &end);
  if (!(isdigit((unsigned char)s[0]) || s[0] == '.') || *end != '\0' || errno != 0 ||
      !(v >= lo && v <= hi)) {
    run_msg("%s: expected %s, got '%s'", name, what, s);
    return run_usage_error(NULL, NULL);
  }
  *out = v;
  return RUN_OK;
}

/* Takes the value of option argv[*i]: "--name=value" or "--name value". */
static run_result_t run_option_value(int argc, char** argv, int* i, const char* name,
                                     const char** out) {
  const char* a = argv[*i];
  size_t nlen = strlen(name);
  if (a[nlen] == '=') {
    *out = a + nlen + 1;
    return RUN_OK;
  }
  if (*i + 1 >= argc || strcmp(argv[*i + 1], "--") == 0)
    return run_usage_error("missing value after", name);
  *out = argv[++*i];
  return RUN_OK;
}

static int run_is_option(const char* a, const char* name) {
  size_t nlen = strlen(name);
  return strncmp(a, name, nlen) == 0 && (a[nlen] == '\0' || a[nlen] == '=');
}

static run_result_t run_parse_args(int argc, char** argv, run_opts_t* out) {
  run_opts_t o = {.nranks = 0, .timeout_s = 0, .grace_s = RUN_DEFAULT_GRACE_S, .prefix = 1};
  const char* val;
  double ranks = 0, hosts = 0;
  int i;
  for (i = 1; i < argc; i++) {
    const char* a = argv[i];
    if (strcmp(a, "--") == 0) break;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) return RUN_HELP;
    if (strcmp(a, "--no-prefix") == 0) {
      o.prefix = 0;
    } else if (run_is_option(a, "-n")) {
      RUN_CHECK(run_option_value(argc, argv, &i, "-n", &val));
      RUN_CHECK(
          run_parse_number("-n", val, 1, RUN_MAX_RANKS, 1, "a number of ranks in 1..1024", &ranks));
      o.nranks = (int)ranks;
    } else if (run_is_option(a, "--timeout")) {
      RUN_CHECK(run_option_value(argc, argv, &i, "--timeout", &val));
      RUN_CHECK(run_parse_number("--timeout", val, RUN_MIN_TIMEOUT_S, RUN_MAX_SECONDS, 0,
                                 "a number of seconds > 0", &o.timeout_s));
    } else if (strcmp(a, "--cleanup") == 0) {
      if (argc != 2) return run_usage_error("--cleanup takes no other arguments", NULL);
      o.cleanup = 1;
      break;
    } else if (run_is_option(a, "--nodes")) {
      RUN_CHECK(run_option_value(argc, argv, &i, "--nodes", &val));
      RUN_CHECK(run_parse_number("--nodes", val, 1, RUN_NET_MAX_HOSTS, 1,
                                 "a number of hosts in 1..254", &hosts));
      o.net.nhosts = (int)hosts;
    } else if (run_is_option(a, "--link")) {
      RUN_CHECK(run_option_value(argc, argv, &i, "--link", &o.net.rate));
    } else if (run_is_option(a, "--placement")) {
      RUN_CHECK(run_option_value(argc, argv, &i, "--placement", &o.net.placement));
    } else if (run_is_option(a, "--link-stats")) {
      RUN_CHECK(run_option_value(argc, argv, &i, "--link-stats", &o.net.stats_path));
    } else if (run_is_option(a, "--bind")) {
      RUN_CHECK(run_option_value(argc, argv, &i, "--bind", &o.bind));
      if (strcmp(o.bind, "none") != 0 && strcmp(o.bind, "core") != 0 && strcmp(o.bind, "numa") != 0)
        return run_usage_error("--bind: expected none, core or numa, got", o.bind);
    } else if (run_is_option(a, "--grace")) {
      RUN_CHECK(run_option_value(argc, argv, &i, "--grace", &val));
      RUN_CHECK(run_parse_number("--grace", val, 0, RUN_MAX_SECONDS, 0, "a number of seconds >= 0",
                                 &o.grace_s));
    } else if (a[0] == '-') {
      return run_usage_error("unknown option", a);
    } else {
      return run_usage_error("missing '--' before the program", a);
    }
  }
  if (o.cleanup) {
    *out = o;
    return RUN_OK;
  }
  if (i >= argc) return run_usage_error("missing '--' and the program to run", NULL);
  if (i + 1 >= argc) return run_usage_error("no program given after '--'", NULL);
  if (o.nranks == 0) return run_usage_error("-n N (the number of ranks) is required", NULL);
  o.argv = argv + i + 1;
  o.net.nranks = o.nranks;
  if (run_net_check_opts(&o.net) != RUN_OK) return run_usage_error(NULL, NULL);
  *out = o;
  return RUN_OK;
}

/* In the child between fork and exec: never returns. */
static void run_child_exec(const run_job_t* job, int rank, int out_w, int err_w) {
  const int sigs[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}; /* exec keeps SIG_IGN */
  sigset_t none;
  int null_fd;
  setpgid(0, 0);
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) signal(sigs[i], SIG_DFL);
  sigemptyset(&none); /* run_spawn blocked every signal around fork() */
  sigprocmask(SIG_SETMASK, &none, NULL);
  null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0 && null_fd != STDIN_FILENO) dup2(null_fd, STDIN_FILENO);
  if (dup2(out_w, STDOUT_FILENO) < 0 || dup2(err_w, STDERR_FILENO) < 0) _exit(RUN_EXIT_EXEC_FAILED);
  if (run_net_setenv_int("RANK", rank) != RUN_OK) _exit(RUN_EXIT_EXEC_FAILED);
  if (job->opts.net.nhosts > 0 ? run_net_child_enter(&job->net, rank) != 0
                               : run_net_setenv_int("LOCAL_RANK", rank) != RUN_OK)
    _exit(RUN_EXIT_EXEC_FAILED);
  execvp(job->opts.argv[0], job->opts.argv);
  dprintf(STDERR_FILENO, "qcclrun: cannot execute '%s': %s\n", job->opts.argv[0], strerror(errno));
  _exit(RUN_EXIT_EXEC_FAILED);
}

static run_result_t run_spawn(run_job_t* job, int rank) {
  run_rank_t* r = &job->ranks[rank];
  int out_p[2], err_p[2];
  sigset_t all, old;
  pid_t pid;
  if (pipe2(out_p, O_CLOEXEC) != 0) {
    run_msg("cannot start rank %d: pipe(): %s", rank, strerror(errno));
    return RUN_ERR_SYSTEM;
  }
  if (pipe2(err_p, O_CLOEXEC) != 0) {
    run_msg("cannot start rank %d: pipe(): %s", rank, strerror(errno));
    goto close_out_pipe;
  }
  sigfillset(&all); /* until it resets them, the child must not run qcclrun's handlers */
  sigprocmask(SIG_BLOCK, &all, &old);
  pid = fork();
  if (pid == 0) run_child_exec(job, rank, out_p[1], err_p[1]);
  if (pid < 0) run_msg("cannot start rank %d: fork(): %s", rank, strerror(errno));
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (pid < 0) goto close_err_pipe;
  setpgid(pid, pid); /* also here: no race with a kill(-pid) before the child ran */
  close(out_p[1]);
  close(err_p[1]);
  fcntl(out_p[0], F_SETFL, O_NONBLOCK);
  fcntl(err_p[0], F_SETFL, O_NONBLOCK);
  r->pid = pid;
  r->alive = 1;
  r->prefix_len = (size_t)snprintf(r->prefix, sizeof(r->prefix), "[%d] ", rank);
  r->out = (run_stream_t){.fd = out_p[0], .dest = STDOUT_FILENO, .rank = rank};
  r->err = (run_stream_t){.fd = err_p[0], .dest = STDERR_FILENO, .rank = rank};
  if (job->opts.prefix) {
    r->out.prefix = r->err.prefix = r->prefix;
    r->out.prefix_len = r->err.prefix_len = r->prefix_len;
  }
  job->nstarted++;
  job->nalive++;
  return RUN_OK;
close_err_pipe:
  close(err_p[0]);
  close(err_p[1]);
close_out_pipe:
  close(out_p[0]);
  close(out_p[1]);
  return RUN_ERR_SYSTEM;
}

/* Signals the process group of every rank that is alive or whose pipes are
 * still open (a leftover descendant holds them). */
static run_result_t run_signal_groups(run_job_t* job, int sig) {
  for (int i = 0; i < job->nstarted; i++) {
    run_rank_t* r = &job->ranks[i];
    if (!r->alive && r->out.fd < 0 && r->err.fd < 0) continue;
    if (kill(-r->pid, sig) != 0 && r->alive) kill(r->pid, sig);
  }
  return RUN_OK;
}

/* Enters term (SIGTERM now, SIGKILL in 2 s) or, for SIGKILL, kill. */
static run_result_t run_teardown(run_job_t* job, int sig, double now) {
  job->phase = sig == SIGKILL ? RUN_PHASE_KILL : RUN_PHASE_TERM;
  job->phase_deadline = now + RUN_KILL_DELAY_S;
  return run_signal_groups(job, sig);
}

static int run_exit_code(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return 255;
}

static run_result_t run_on_rank_exit(run_job_t* job, int rank, double now) {
  int st = job->ranks[rank].wstatus;
  int code = run_exit_code(st);
  if (code == 0) return RUN_OK;
  if (WIFSIGNALED(st)) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
    const char* name = sigabbrev_np(WTERMSIG(st));
#else
    const char* name = NULL;
#endif
    if (name != NULL)
      run_msg("rank %d killed by signal SIG%s", rank, name);
    else
      run_msg("rank %d killed by signal %d", rank, WTERMSIG(st));
  } else {
    run_msg("rank %d exited with status %d", rank, code);
  }
  if (code == RUN_EXIT_SKIP && WIFEXITED(st))
    job->any_skip = 1;
  else if (job->first_failed < 0)
    job->first_failed = rank;
  if (job->phase == RUN_PHASE_RUN) {
    job->phase = RUN_PHASE_GRACE;
    job->phase_deadline = now + job->opts.grace_s;
  }
  return RUN_OK;
}

static run_result_t run_reap(run_job_t* job, double now) {
  for (;;) {
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return RUN_OK;
    for (int i = 0; i < job->nstarted; i++) {
      if (job->ranks[i].pid != pid || !job->ranks[i].alive) continue;
      job->ranks[i].alive = 0;
      job->ranks[i].wstatus = st;
      job->nalive--;
      RUN_CHECK(run_on_rank_exit(job, i, now));
      break;
    }
  }
}

/* Drains the self-pipe; SIGINT/SIGTERM/SIGHUP start (or hurry) the teardown. */
static run_result_t run_read_signals(run_job_t* job, double now) {
  unsigned char sigs[64];
  ssize_t n;
  while ((n = read(job->sig_pipe[0], sigs, sizeof(sigs))) > 0) {
    for (ssize_t k = 0; k < n; k++) {
      if (sigs[k] == SIGCHLD) continue;
      if (job->got_signal == 0) job->got_signal = sigs[k];
      if (job->phase < RUN_PHASE_TERM)
        RUN_CHECK(run_teardown(job, SIGTERM, now));
      else if (job->phase == RUN_PHASE_TERM)
        RUN_CHECK(run_teardown(job, SIGKILL, now));
    }
  }
  return RUN_OK;
}

static int run_streams_open(const run_job_t* job) {
  for (int i = 0; i < job->nstarted; i++)
    if (job->ranks[i].out.fd >= 0 || job->ranks[i].err.fd >= 0) return 1;
  return 0;
}

/* Acts on the deadlines that have passed: timeout, grace, SIGKILL, drain. */
static run_result_t run_check_deadlines(run_job_t* job, double now) {
  if (job->phase <= RUN_PHASE_GRACE && job->nalive > 0 && job->opts.timeout_s > 0 &&
      now >= job->start + job->opts.timeout_s) {
    run_msg("timeout after %g s", job->opts.timeout_s);
    job->timed_out = 1;
    RUN_CHECK(run_teardown(job, SIGTERM, now));
  }
  if (job->phase == RUN_PHASE_GRACE && job->nalive > 0 && now >= job->phase_deadline)
    RUN_CHECK(run_teardown(job, SIGTERM, now));
  if (job->phase == RUN_PHASE_TERM && now >= job->phase_deadline)
    RUN_CHECK(run_teardown(job, SIGKILL, now));
  if (job->nalive > 0 || !run_streams_open(job)) return RUN_OK;
  if (job->drain_deadline == 0) job->drain_deadline = now + RUN_DRAIN_S;
  if (now < job->drain_deadline) return RUN_OK;
  RUN_CHECK(run_signal_groups(job, SIGKILL));
  for (int i = 0; i < job->nstarted; i++) {
    RUN_CHECK(run_stream_close(&job->ranks[i].out));
    RUN_CHECK(run_stream_close(&job->ranks[i].err));
  }
  return RUN_OK;
}

/* Milliseconds until the next deadline, or -1 for none. */
static int run_poll_timeout(const run_job_t* job, double now) {
  double next = INFINITY, ms;
  if (job->phase <= RUN_PHASE_GRACE && job->nalive > 0 && job->opts.timeout_s > 0)
    next = job->start + job->opts.timeout_s;
  if (((job->phase == RUN_PHASE_GRACE && job->nalive > 0) || job->phase == RUN_PHASE_TERM) &&
      job->phase_deadline < next)
    next = job->phase_deadline;
  if (job->drain_deadline > 0 && job->drain_deadline < next) next = job->drain_deadline;
  if (isinf(next)) return -1;
  ms = (next - now) * 1000.0 + 1.0; /* round up: never wake before the deadline */
  return ms < 0 ? 0 : ms > INT_MAX ? INT_MAX : (int)ms;
}

static run_result_t run_loop(run_job_t* job) {
  double now = run_now();
  RUN_CHECK(run_reap(job, now));
  RUN_CHECK(run_check_deadlines(job, now));
  while (job->nalive > 0 || run_streams_open(job)) {
    int n = 1 + 2 * job->nstarted; /* poll() skips the negative fds of closed pipes */
    job->pfds[0] = (struct pollfd){.fd = job->sig_pipe[0], .events = POLLIN};
    for (int i = 0; i < job->nstarted; i++) {
      job->pfds[1 + 2 * i] = (struct pollfd){.fd = job->ranks[i].out.fd, .events = POLLIN};
      job->pfds[2 + 2 * i] = (struct pollfd){.fd = job->ranks[i].err.fd, .events = POLLIN};
    }
    int ready = poll(job->pfds, (nfds_t)n, run_poll_timeout(job, now));
    if (ready < 0 && errno != EINTR) {
      run_msg("poll(): %s", strerror(errno));
      return RUN_ERR_SYSTEM;
    }
    now = run_now();
    RUN_CHECK(run_read_signals(job, now));
    RUN_CHECK(run_reap(job, now));
    for (int k = 1; ready > 0 && k < n; k++) {
      run_rank_t* r = &job->ranks[(k - 1) / 2];
      if (job->pfds[k].revents != 0) RUN_CHECK(run_stream_read(k % 2 ? &r->out : &r->err));
    }
    RUN_CHECK(run_check_deadlines(job, now));
  }
  return RUN_OK;
}

/* Removes /dev/shm/qccl-<pid>-* left by this job's ranks, and no other. */
static run_result_t run_clean_shm(const run_job_t* job) {
  DIR* dir = opendir("/dev/shm");
  struct dirent* e;
  if (dir == NULL) return RUN_OK;
  while ((e = readdir(dir)) != NULL) {
    const char* digits = e->d_name + 5;
    char* end;
    long pid;
    if (strncmp(e->d_name, "qccl-", 5) != 0 || !isdigit((unsigned char)digits[0])) continue;
    pid = strtol(digits, &end, 10);
    if (*end != '-') continue;
    for (int i = 0; i < job->nstarted; i++) {
      if (job->ranks[i].pid != pid) continue;
      if (unlinkat(dirfd(dir), e->d_name, 0) != 0 && errno != ENOENT)
        run_msg("cannot remove /dev/shm/%s: %s", e->d_name, strerror(errno));
      break;
    }
  }
  closedir(dir);
  return RUN_OK;
}

/* Descriptors 0-2 open (so a pipe never lands on them), enough descriptors
 * for 2 pipes per rank, the self-pipe and the signal handlers. */
static run_result_t run_job_init(run_job_t* job, const run_opts_t* opts) {
  struct sigaction sa = {.sa_handler = run_on_signal, .sa_flags = SA_NOCLDSTOP};
  struct sigaction ign = {.sa_handler = SIG_IGN};
  struct rlimit lim;
  int fd;
  *job = (run_job_t){.opts = *opts, .sig_pipe = {-1, -1}, .first_failed = -1};
  while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= STDERR_FILENO) continue;
  if (fd > STDERR_FILENO) close(fd);
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  job->ranks = calloc((size_t)opts->nranks, sizeof(*job->ranks));
  job->pfds = calloc(2 * (size_t)opts->nranks + 1, sizeof(*job->pfds));
  if (job->ranks == NULL || job->pfds == NULL) {
    run_msg("out of memory for %d ranks", opts->nranks);
    return RUN_ERR_SYSTEM;
  }
  if (pipe2(job->sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    run_msg("pipe(): %s", strerror(errno));
    return RUN_ERR_SYSTEM;
  }
  run_sig_wfd = job->sig_pipe[1];
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGCHLD, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0 ||
      sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGHUP, &sa, NULL) != 0 ||
      sigaction(SIGPIPE, &ign, NULL) != 0) {
    run_msg("sigaction(): %s", strerror(errno));
    return RUN_ERR_SYSTEM;
  }
  RUN_CHECK(run_net_job_env(opts->nranks));
  return opts->net.nhosts > 0 ? run_net_setup(&job->net, &opts->net) : RUN_OK;
}

static run_result_t run_job_fini(run_job_t* job) {
  for (int i = 0; job->ranks != NULL && i < job->nstarted; i++) {
    run_stream_close(&job->ranks[i].out);
    run_stream_close(&job->ranks[i].err);
  }
  run_net_teardown(&job->net); /* reports the link counters, removes the hosts */
  free(job->ranks);
  free(job->pfds);
  if (job->sig_pipe[0] >= 0) close(job->sig_pipe[0]);
  if (job->sig_pipe[1] >= 0) close(job->sig_pipe[1]);
  return RUN_OK;
}

static int run_job_status(const run_job_t* job) {
  if (job->got_signal != 0) return 128 + job->got_signal;
  if (job->timed_out) return RUN_EXIT_TIMEOUT;
  if (job->start_failed) return RUN_EXIT_START_FAILED;
  if (job->first_failed >= 0) return run_exit_code(job->ranks[job->first_failed].wstatus);
  return job->any_skip ? RUN_EXIT_SKIP : 0;
}

int main(int argc, char** argv) {
  run_opts_t opts = {0};
  run_job_t job = {0};
  int status;
  run_result_t res = run_parse_args(argc, argv, &opts);
  if (res == RUN_HELP) return run_usage(stdout) == RUN_OK ? 0 : 1;
  if (res != RUN_OK) return RUN_EXIT_USAGE;
  if (opts.cleanup) return run_net_cleanup_stale();
  if (opts.bind != NULL && setenv("QCCL_BIND", opts.bind, 1) != 0) return RUN_EXIT_START_FAILED;
  if (run_job_init(&job, &opts) != RUN_OK) {
    run_job_fini(&job);
    return RUN_EXIT_START_FAILED;
  }
  job.start = run_now();
  for (int i = 0; i < opts.nranks; i++) {
    if (run_spawn(&job, i) == RUN_OK) continue;
    job.start_failed = 1;
    run_teardown(&job, SIGTERM, run_now());
    break;
  }
  res = run_loop(&job);
  if (res != RUN_OK) { /* cannot watch the ranks any more: kill and wait */
    run_signal_groups(&job, SIGKILL);
    while (job.nalive > 0 && waitpid(-1, NULL, 0) > 0) job.nalive--;
    job.start_failed = 1;
  }
  run_clean_shm(&job);
  status = run_job_status(&job);
  run_job_fini(&job);
  return status;
}
