/*
 * qcclrun_net - simulated hosts in network namespaces for qcclrun --nodes
 * (see qcclrun_net.h for the network it builds and how ranks enter it).
 *
 * Building: "ip netns add" for the switch, a bridge in it, then per host a
 * namespace, a veth pair made across the two namespaces at once, the host's
 * address, the links up, and with --link a tbf qdisc on both veth ends
 * (burst 512kb up to 1 Gbit/s, 4mb above: smaller bursts starve faster
 * links). Before its links exist a namespace gets IPv6 off, written to its
 * /proc/sys while qcclrun has setns()ed into it; counters are read the same
 * way, from /proc/self/net/dev. qcclrun is single-threaded, so switching its
 * own namespace for a moment is safe.
 *
 * Removing: "ip netns del" of every namespace made; the veths and the
 * bridge live only inside them and go with them. A process still inside a
 * namespace (found by comparing /proc/<pid>/ns/net with the namespace's
 * inode) would keep it alive unseen, so it is killed first.
 */
#include "qcclrun_net.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUN_NET_DIR "/var/run/netns"
#define RUN_NET_MAX_ARGS 24
#define RUN_NET_BRIDGE "qbr"
#define RUN_NET_LATENCY "50ms"           /* tbf queue: at most this much waiting */
#define RUN_NET_SMALL_BURST_MAX_BITS 1e9 /* up to here burst 512kb, above 4mb */

extern char** environ;

/* ---- names ---- */

static void run_net_ns_name(pid_t owner, int host, char* out, size_t size) {
  if (host < 0)
    snprintf(out, size, "qccl-%d-sw", (int)owner);
  else
    snprintf(out, size, "qccl-%d-h%d", (int)owner, host);
}

static void run_net_addr(int host, char* out, size_t size) {
  snprintf(out, size, "10.77.0.%d", host + 1);
}

/* ---- the job's rendezvous ---- */

run_result_t run_net_setenv_int(const char* name, int v) {
  char num[16];
  snprintf(num, sizeof(num), "%d", v);
  return setenv(name, num, 1) == 0 ? RUN_OK : RUN_ERR_SYSTEM;
}

run_result_t run_net_job_env(int nranks) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(addr);
  unsigned char raw[16];
  char secret[33];
  ssize_t got = -1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0 ||
      getsockname(fd, (struct sockaddr*)&addr, &len) != 0) {
    run_msg("cannot find a free port on 127.0.0.1: %s", strerror(errno));
    if (fd >= 0) close(fd);
    return RUN_ERR_SYSTEM;
  }
  close(fd);
  do got = getrandom(raw, sizeof(raw), 0); /* 16 bytes: never short once it returns */
  while (got < 0 && errno == EINTR);
  if (got < 0 && (fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)) >= 0) {
    got = read(fd, raw, sizeof(raw));
    close(fd);
  }
  if (got != (ssize_t)sizeof(raw)) {
    run_msg("cannot read random bytes for QCCL_SECRET: %s", strerror(errno));
    return RUN_ERR_SYSTEM;
  }
  for (size_t i = 0; i < sizeof(raw); i++) snprintf(secret + 2 * i, 3, "%02x", raw[i]);
  RUN_CHECK(run_net_setenv_int("WORLD_SIZE", nranks));
  RUN_CHECK(run_net_setenv_int("LOCAL_WORLD_SIZE", nranks));
  RUN_CHECK(run_net_setenv_int("MASTER_PORT", ntohs(addr.sin_port)));
  if (setenv("MASTER_ADDR", "127.0.0.1", 1) != 0 || setenv("QCCL_SECRET", secret, 1) != 0)
    return RUN_ERR_SYSTEM;
  return RUN_OK;
}

/* ---- options ---- */

/* The value of a tc rate in bit/s: a number and one of tc's units. */
static int run_net_rate_bits(const char* s, double* out) {
  static const struct {
    const char* unit;
    double bits;
  } units[] = {{"bit", 1},        {"kbit", 1e3},     {"mbit", 1e6},     {"gbit", 1e9},
               {"tbit", 1e12},    {"kibit", 1024},   {"mibit", 0x1p20}, {"gibit", 0x1p30},
               {"bps", 8},        {"kbps", 8e3},     {"mbps", 8e6},     {"gbps", 8e9},
               {"kibps", 0x1p13}, {"mibps", 0x1p23}, {"gibps", 0x1p33}};
  char* end;
  double v;
  if (!isdigit((unsigned char)s[0])) return -1;
  v = strtod(s, &end);
  for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
    if (strcasecmp(end, units[i].unit) != 0) continue;
    *out = v * units[i].bits;
    return *out >= 8 && *out < 1e15 ? 0 : -1;
  }
  return -1;
}

/* Puts each rank on a host: from the placement list, else in blocks (N/K
 * each, the first N%K hosts one more). Sets *nhosts to K (from the list when
 * it was 0). host_of may be NULL to only check. */
static run_result_t run_net_place(const run_net_opts_t* o, int* nhosts, int* host_of) {
  const char* p = o->placement;
  int k = *nhosts, max = -1;
  if (p == NULL) {
    for (int h = 0, r = 0; h < k; h++) {
      int count = o->nranks / k + (h < o->nranks % k);
      for (int j = 0; j < count && host_of != NULL; j++) host_of[r++] = h;
    }
    return RUN_OK;
  }
  for (int r = 0;; r++) {
    char* end;
    long h;
    errno = 0;
    h = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : -1;
    if (h < 0 || errno != 0 || (*end != ',' && *end != '\0') || h >= RUN_NET_MAX_HOSTS ||
        (k > 0 && h >= k)) {
      run_msg("--placement '%s': expected one host number in 0..%d per rank, comma separated",
              o->placement, (k > 0 ? k : RUN_NET_MAX_HOSTS) - 1);
      return RUN_ERR_USAGE;
    }
    if (r >= o->nranks || (*end == '\0' && r + 1 != o->nranks)) {
      run_msg("--placement '%s': expected a host for each of the %d ranks", o->placement,
              o->nranks);
      return RUN_ERR_USAGE;
    }
    if (host_of != NULL) host_of[r] = (int)h;
    if (h > max) max = (int)h;
    if (*end == '\0') break;
    p = end + 1;
  }
  if (k == 0) *nhosts = max + 1;
  return RUN_OK;
}

run_result_t run_net_check_opts(run_net_opts_t* o) {
  double bits;
  if (o->nhosts == 0 && o->placement == NULL) {
    if (o->rate != NULL) run_msg("--link needs --nodes K (simulated hosts)");
    if (o->stats_path != NULL) run_msg("--link-stats needs --nodes K (simulated hosts)");
    return o->rate != NULL || o->stats_path != NULL ? RUN_ERR_USAGE : RUN_OK;
  }
  if (o->rate != NULL && strchr(o->rate, ',') != NULL) {
    run_msg(
        "--link '%s': a delay needs netem, which this kernel does not have; give a rate "
        "only, e.g. --link 1gbit",
        o->rate);
    return RUN_ERR_USAGE;
  }
  if (o->rate != NULL && run_net_rate_bits(o->rate, &bits) != 0) {
    run_msg("--link: expected a rate such as 100mbit, 1gbit or 10gbit, got '%s'", o->rate);
    return RUN_ERR_USAGE;
  }
  return run_net_place(o, &o->nhosts, NULL);
}

/* ---- running ip and tc ---- */

/* Runs tool with the NULL-terminated arguments, in a process group of its own
 * (a Ctrl-C meant for qcclrun must not stop the cleanup). Logs a failure
 * with the whole command unless quiet. */
static run_result_t run_net_cmd(int quiet, const char* tool, ...) {
  const char* argv[RUN_NET_MAX_ARGS + 1];
  char line[512];
  posix_spawnattr_t attr;
  sigset_t def;
  va_list ap;
  pid_t pid;
  int n = 0, st = 0, err;
  size_t len = 0;
  argv[n++] = tool;
  va_start(ap, tool);
  while (n < RUN_NET_MAX_ARGS && (argv[n] = va_arg(ap, const char*)) != NULL) n++;
  va_end(ap);
  argv[n] = NULL;
  for (int i = 0; i < n && len < sizeof(line); i++)
    len += (size_t)snprintf(line + len, sizeof(line) - len, i ? " %s" : "%s", argv[i]);
  posix_spawnattr_init(&attr);
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE); /* ignored in qcclrun */
  posix_spawnattr_setsigdefault(&attr, &def);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  err = posix_spawnp(&pid, tool, NULL, &attr, (char* const*)argv, environ);
  if (err == ENOENT) { /* not on PATH: where Debian puts it */
    char path[64];
    snprintf(path, sizeof(path), "/usr/sbin/%s", tool);
    err = posix_spawn(&pid, path, NULL, &attr, (char* const*)argv, environ);
  }
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    if (!quiet) run_msg("cannot run '%s': %s (is iproute2 installed?)", line, strerror(err));
    return RUN_ERR_SYSTEM;
  }
  while (waitpid(pid, &st, 0) < 0) {
    if (errno == EINTR) continue;
    if (!quiet) run_msg("'%s': waitpid: %s", line, strerror(errno));
    return RUN_ERR_SYSTEM;
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return RUN_OK;
  if (!quiet) {
    if (WIFEXITED(st))
      run_msg("command failed with status %d: %s", WEXITSTATUS(st), line);
    else
      run_msg("command killed by signal %d: %s", WTERMSIG(st), line);
  }
  return RUN_ERR_SYSTEM;
}

/* ---- inside a namespace ---- */

/* Writes "1" to a file of /proc/sys in the current namespace; a missing file
 * (no IPv6) is fine. */
static void run_net_sysctl_one(const char* path) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  if (write(fd, "1", 1) != 1) run_msg("cannot write %s: %s", path, strerror(errno));
  close(fd);
}

/* Reads ifname's received and sent bytes from /proc/self/net/dev. */
static int run_net_counters_here(const char* ifname, uint64_t* rx, uint64_t* tx) {
  char line[512];
  size_t nlen = strlen(ifname);
  int found = -1;
  FILE* f = fopen("/proc/self/net/dev", "re");
  if (f == NULL) return -1;
  while (found != 0 && fgets(line, sizeof(line), f) != NULL) {
    const char* p = line;
    while (*p == ' ') p++;
    if (strncmp(p, ifname, nlen) != 0 || p[nlen] != ':') continue;
    if (sscanf(p + nlen + 1, "%" SCNu64 " %*u %*u %*u %*u %*u %*u %*u %" SCNu64, rx, tx) == 2)
      found = 0;
  }
  fclose(f);
  return found;
}

/* Switches qcclrun into namespace fd. Returns 0, or -1 after a message. */
static int run_net_enter(int fd, const char* what) {
  if (setns(fd, CLONE_NEWNET) == 0) return 0;
  run_msg("cannot enter the namespace of %s: setns: %s", what, strerror(errno));
  return -1;
}

/* Back to qcclrun's own namespace; without it nothing else can be trusted. */
static void run_net_leave(const run_net_t* net) {
  if (setns(net->self_fd, CLONE_NEWNET) == 0) return;
  run_msg("cannot return to qcclrun's network namespace: %s", strerror(errno));
  abort();
}

/* Kills every process in the namespace with the inode of st (other than
 * qcclrun); returns how many. */
static int run_net_kill_inside(const struct stat* ns) {
  DIR* dir = opendir("/proc");
  struct dirent* e;
  int killed = 0;
  if (dir == NULL) return 0;
  while ((e = readdir(dir)) != NULL) {
    char path[300];
    struct stat st;
    long pid = isdigit((unsigned char)e->d_name[0]) ? atol(e->d_name) : 0;
    if (pid <= 0 || pid == (long)getpid()) continue;
    snprintf(path, sizeof(path), "/proc/%s/ns/net", e->d_name);
    if (stat(path, &st) != 0 || st.st_dev != ns->st_dev || st.st_ino != ns->st_ino) continue;
    if (kill((pid_t)pid, SIGKILL) == 0) killed++;
  }
  closedir(dir);
  return killed;
}

/* Kills what runs in namespace name and deletes it. */
static run_result_t run_net_ns_delete(const char* name) {
  char path[300];
  struct stat st;
  int killed;
  snprintf(path, sizeof(path), RUN_NET_DIR "/%s", name);
  if (stat(path, &st) == 0 && (killed = run_net_kill_inside(&st)) > 0)
    run_msg("killed %d process%s left in namespace %s", killed, killed > 1 ? "es" : "", name);
  return run_net_cmd(0, "ip", "netns", "del", name, NULL);
}

/* Adds namespace host (-1: the switch), opens it and turns IPv6 off in it. */
static run_result_t run_net_ns_add(run_net_t* net, int host, int quiet) {
  char name[64], path[128];
  int slot = host < 0 ? net->opts.nhosts : host;
  run_net_ns_name(net->owner, host, name, sizeof(name));
  RUN_CHECK(run_net_cmd(quiet, "ip", "netns", "add", name, NULL));
  snprintf(path, sizeof(path), RUN_NET_DIR "/%s", name);
  net->ns_fd[slot] = open(path, O_RDONLY | O_CLOEXEC);
  if (net->ns_fd[slot] < 0) {
    run_msg("cannot open %s: %s", path, strerror(errno));
    run_net_cmd(0, "ip", "netns", "del", name, NULL);
    return RUN_ERR_SYSTEM;
  }
  if (run_net_enter(net->ns_fd[slot], name) != 0) return RUN_ERR_SYSTEM;
  run_net_sysctl_one("/proc/sys/net/ipv6/conf/all/disable_ipv6");
  run_net_sysctl_one("/proc/sys/net/ipv6/conf/default/disable_ipv6");
  run_net_leave(net);
  return RUN_OK;
}

/* ---- setup ---- */

/* Host h: namespace, veth pair into the switch, address, links up, qdiscs. */
static run_result_t run_net_make_host(run_net_t* net, int h, const char* burst) {
  char sw[64], ns[64], ifname[24], sw_if[24], addr[32];
  run_net_ns_name(net->owner, -1, sw, sizeof(sw));
  run_net_ns_name(net->owner, h, ns, sizeof(ns));
  snprintf(ifname, sizeof(ifname), "qccl%d", h);
  snprintf(sw_if, sizeof(sw_if), "qccl%d-sw", h);
  run_net_addr(h, addr, sizeof(addr));
  strcat(addr, "/24");
  RUN_CHECK(run_net_ns_add(net, h, 0));
  RUN_CHECK(run_net_cmd(0, "ip", "-n", sw, "link", "add", sw_if, "up", "master", RUN_NET_BRIDGE,
                        "type", "veth", "peer", "name", ifname, "netns", ns, NULL));
  RUN_CHECK(run_net_cmd(0, "ip", "-n", ns, "addr", "add", addr, "dev", ifname, NULL));
  RUN_CHECK(run_net_cmd(0, "ip", "-n", ns, "link", "set", ifname, "up", NULL));
  RUN_CHECK(run_net_cmd(0, "ip", "-n", ns, "link", "set", "lo", "up", NULL));
  if (net->opts.rate == NULL) return RUN_OK;
  RUN_CHECK(run_net_cmd(0, "tc", "-n", ns, "qdisc", "add", "dev", ifname, "root", "tbf", "rate",
                        net->opts.rate, "burst", burst, "latency", RUN_NET_LATENCY, NULL));
  return run_net_cmd(0, "tc", "-n", sw, "qdisc", "add", "dev", sw_if, "root", "tbf", "rate",
                     net->opts.rate, "burst", burst, "latency", RUN_NET_LATENCY, NULL);
}

/* Removes the namespaces of an earlier qcclrun that had this pid: it is gone,
 * as the pid is ours now. */
static void run_net_remove_own_leftovers(pid_t owner) {
  char prefix[32];
  DIR* dir = opendir(RUN_NET_DIR);
  struct dirent* e;
  int n = snprintf(prefix, sizeof(prefix), "qccl-%d-", (int)owner);
  if (dir == NULL) return;
  while ((e = readdir(dir)) != NULL)
    if (strncmp(e->d_name, prefix, (size_t)n) == 0) run_net_ns_delete(e->d_name);
  closedir(dir);
}

static run_result_t run_net_build(run_net_t* net) {
  char sw[64];
  const char* burst = "512kb";
  double bits = 0;
  if (net->opts.rate != NULL && run_net_rate_bits(net->opts.rate, &bits) == 0 &&
      bits > RUN_NET_SMALL_BURST_MAX_BITS)
    burst = "4mb";
  run_net_ns_name(net->owner, -1, sw, sizeof(sw));
  RUN_CHECK(
      run_net_cmd(0, "ip", "-n", sw, "link", "add", RUN_NET_BRIDGE, "up", "type", "bridge", NULL));
  for (int h = 0; h < net->opts.nhosts; h++) RUN_CHECK(run_net_make_host(net, h, burst));
  net->ready = 1;
  return RUN_OK;
}

/* Allocates the tables and places the ranks. */
static run_result_t run_net_plan(run_net_t* net) {
  int k = net->opts.nhosts;
  net->host_of = calloc((size_t)net->opts.nranks, sizeof(int));
  net->local_rank = calloc((size_t)net->opts.nranks, sizeof(int));
  net->local_size = calloc((size_t)k, sizeof(int));
  net->ns_fd = malloc((size_t)(k + 1) * sizeof(int));
  if (net->host_of == NULL || net->local_rank == NULL || net->local_size == NULL ||
      net->ns_fd == NULL) {
    run_msg("out of memory for %d simulated hosts", k);
    return RUN_ERR_SYSTEM;
  }
  for (int h = 0; h <= k; h++) net->ns_fd[h] = -1;
  RUN_CHECK(run_net_place(&net->opts, &k, net->host_of));
  for (int r = 0; r < net->opts.nranks; r++)
    net->local_rank[r] = net->local_size[net->host_of[r]]++;
  return RUN_OK;
}

run_result_t run_net_setup(run_net_t* net, const run_net_opts_t* o) {
  const char* why = NULL;
  char addr[32] = "127.0.0.1";
  *net = (run_net_t){.opts = *o, .owner = getpid(), .self_fd = -1};
  RUN_CHECK(run_net_plan(net));
  if (geteuid() != 0) {
    why = "not root";
  } else if ((net->self_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
    why = "cannot open /proc/self/ns/net";
  } else {
    run_net_remove_own_leftovers(net->owner);
    if (run_net_ns_add(net, -1, 1) != RUN_OK) why = "'ip netns add' failed";
  }
  if (why != NULL) {
    run_msg(
        "--nodes %d: %s, so no network namespaces: the ranks share this host's network, "
        "with QCCL_HOST_ID split into %d simulated hosts%s (QCCLRUN_NETNS=0)",
        o->nhosts, why, o->nhosts, o->rate != NULL ? "; --link is ignored" : "");
  } else {
    net->netns = 1;
    if (run_net_build(net) != RUN_OK) {
      run_msg("could not make the simulated hosts; removing what was made");
      run_net_teardown(net);
      return RUN_ERR_SYSTEM;
    }
    run_net_addr(net->host_of[0], addr, sizeof(addr));
  }
  if (setenv("QCCLRUN_NETNS", net->netns ? "1" : "0", 1) != 0 ||
      setenv("MASTER_ADDR", addr, 1) != 0)
    return RUN_ERR_SYSTEM;
  return RUN_OK;
}

/* ---- in a rank ---- */

int run_net_child_enter(const run_net_t* net, int rank) {
  int h = net->host_of[rank];
  char name[32], id[64], num[16];
  snprintf(name, sizeof(name), "qccl-host%d", h);
  if (net->netns) {
    if (setns(net->ns_fd[h], CLONE_NEWNET) != 0 || unshare(CLONE_NEWUTS) != 0 ||
        sethostname(name, strlen(name)) != 0) {
      dprintf(STDERR_FILENO, "qcclrun: rank %d cannot enter simulated host %d: %s\n", rank, h,
              strerror(errno));
      return -1;
    }
    /* as `ip netns exec` does: a private mount namespace with a sysfs of
     * this network namespace, so /sys/class/net lists the host's own
     * interfaces (UCX finds its network devices there) */
    if (unshare(CLONE_NEWNS) != 0 || mount("", "/", NULL, MS_SLAVE | MS_REC, NULL) != 0 ||
        umount2("/sys", MNT_DETACH) != 0 || mount(name, "/sys", "sysfs", 0, NULL) != 0) {
      dprintf(STDERR_FILENO, "qcclrun: rank %d cannot mount the sysfs of simulated host %d: %s\n",
              rank, h, strerror(errno));
      return -1;
    }
    snprintf(num, sizeof(num), "qccl%d", h);
    if (setenv("QCCL_SOCKET_IFNAME", num, 1) != 0) return -1;
  }
  snprintf(id, sizeof(id), "qccl-host%d-%d", h, (int)net->owner);
  if (setenv("QCCL_HOST_ID", id, 1) != 0) return -1;
  snprintf(num, sizeof(num), "%d", net->local_rank[rank]);
  if (setenv("LOCAL_RANK", num, 1) != 0) return -1;
  snprintf(num, sizeof(num), "%d", net->local_size[h]);
  return setenv("LOCAL_WORLD_SIZE", num, 1) != 0 ? -1 : 0;
}

/* ---- teardown ---- */

/* Reads host h's link counters; -1 when they cannot be read. */
static int run_net_counters(const run_net_t* net, int h, uint64_t* rx, uint64_t* tx) {
  char ifname[24];
  int res;
  if (!net->ready || run_net_enter(net->ns_fd[h], "a simulated host") != 0) return -1;
  snprintf(ifname, sizeof(ifname), "qccl%d", h);
  res = run_net_counters_here(ifname, rx, tx);
  run_net_leave(net);
  return res;
}

/* Writes one host's entry of the --link-stats file. */
static void run_net_json_host(const run_net_t* net, FILE* f, int h, int ok, uint64_t rx,
                              uint64_t tx) {
  char addr[32] = "127.0.0.1";
  const char* sep = "";
  if (net->netns) run_net_addr(h, addr, sizeof(addr));
  fprintf(f, "    {\"host\": %d, \"hostname\": \"qccl-host%d\", \"addr\": \"%s\", ", h, h, addr);
  if (net->netns)
    fprintf(f, "\"ifname\": \"qccl%d\", \"ranks\": [", h);
  else
    fprintf(f, "\"ifname\": null, \"ranks\": [");
  for (int r = 0; r < net->opts.nranks; r++) {
    if (net->host_of[r] != h) continue;
    fprintf(f, "%s%d", sep, r);
    sep = ", ";
  }
  if (ok)
    fprintf(f, "], \"tx_bytes\": %" PRIu64 ", \"rx_bytes\": %" PRIu64 "}", tx, rx);
  else
    fprintf(f, "], \"tx_bytes\": null, \"rx_bytes\": null}");
  fprintf(f, "%s\n", h + 1 < net->opts.nhosts ? "," : "");
}

/* Prints each host's counters and writes --link-stats (temp file, rename). */
static void run_net_report(const run_net_t* net) {
  char tmp[4200];
  FILE* f = NULL;
  if (net->opts.stats_path != NULL) {
    snprintf(tmp, sizeof(tmp), "%s.tmp%d", net->opts.stats_path, (int)net->owner);
    if ((f = fopen(tmp, "w")) == NULL)
      run_msg("cannot write %s: %s", net->opts.stats_path, strerror(errno));
  }
  if (f != NULL) {
    fprintf(f, "{\n  \"netns\": %d,\n  \"link\": ", net->netns);
    fprintf(f, net->opts.rate != NULL ? "\"%s\",\n" : "null,\n",
            net->opts.rate != NULL ? net->opts.rate : "");
    fprintf(f, "  \"hosts\": [\n");
  }
  for (int h = 0; h < net->opts.nhosts; h++) {
    uint64_t rx = 0, tx = 0;
    char addr[32];
    int ok = net->netns && run_net_counters(net, h, &rx, &tx) == 0;
    run_net_addr(h, addr, sizeof(addr));
    if (ok)
      run_msg("host %d (%s) sent %" PRIu64 " bytes, received %" PRIu64 " bytes on its link", h,
              addr, tx, rx);
    else if (net->ready)
      run_msg("host %d (%s): link counters unavailable", h, addr);
    if (f != NULL) run_net_json_host(net, f, h, ok, rx, tx);
  }
  if (f == NULL) return;
  fprintf(f, "  ]\n}\n");
  if (fclose(f) != 0 || rename(tmp, net->opts.stats_path) != 0) {
    run_msg("cannot write %s: %s", net->opts.stats_path, strerror(errno));
    unlink(tmp);
  }
}

run_result_t run_net_teardown(run_net_t* net) {
  run_result_t res = RUN_OK;
  char name[64];
  if (net->host_of == NULL) return RUN_OK;
  if (net->ready || !net->netns) run_net_report(net);
  for (int slot = 0; net->netns && slot <= net->opts.nhosts; slot++) {
    if (net->ns_fd[slot] < 0) continue;
    run_net_ns_name(net->owner, slot < net->opts.nhosts ? slot : -1, name, sizeof(name));
    if (run_net_ns_delete(name) != RUN_OK) res = RUN_ERR_SYSTEM;
    close(net->ns_fd[slot]);
  }
  if (net->self_fd >= 0) close(net->self_fd);
  free(net->host_of);
  free(net->local_rank);
  free(net->local_size);
  free(net->ns_fd);
  *net = (run_net_t){.self_fd = -1};
  return res;
}

/* ---- qcclrun --cleanup ---- */

int run_net_cleanup_stale(void) {
  DIR* dir;
  struct dirent* e;
  int removed = 0, failed = 0;
  if (geteuid() != 0) {
    run_msg("--cleanup: not root, so there are no namespaces of qcclrun to remove");
    return 1;
  }
  if ((dir = opendir(RUN_NET_DIR)) == NULL) {
    run_msg("--cleanup: no leftover namespaces (%s: %s)", RUN_NET_DIR, strerror(errno));
    return 0;
  }
  while ((e = readdir(dir)) != NULL) {
    char* end;
    long pid;
    if (strncmp(e->d_name, "qccl-", 5) != 0 || !isdigit((unsigned char)e->d_name[5])) continue;
    pid = strtol(e->d_name + 5, &end, 10);
    if (*end != '-' || pid <= 0 || (kill((pid_t)pid, 0) == 0 || errno == EPERM)) continue;
    run_msg("removing namespace %s: its qcclrun (pid %ld) is gone", e->d_name, pid);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", RUN_NET_DIR, e->d_name);
    if (run_net_ns_delete(e->d_name) == RUN_OK)
      removed++;
    else if (access(path, F_OK) != 0)
      removed++; /* a qcclrun that was just exiting removed it first */
    else
      failed++;
  }
  closedir(dir);
  if (removed + failed == 0) run_msg("--cleanup: no leftover namespaces");
  return failed > 0 ? 1 : 0;
}
