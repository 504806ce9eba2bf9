/*
 * log.c - the logger: one line per message, "host:pid:tid qccl LEVEL
 * [SUBSYS] text", to stderr or to QCCL_DEBUG_FILE (%h -> host, %p -> pid).
 *
 * Settings are parsed once (pthread_once) from QCCL_DEBUG and
 * QCCL_DEBUG_SUBSYS; the parsed settings and the output file are the
 * logger's globals (STYLE.md allows exactly these). Without QCCL_DEBUG
 * nothing is printed: failures reach the user through result codes and
 * qcclGetLastError. The environment is read directly here (not through
 * env.c, which itself logs).
 */
#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static log_level_t log_level = LOG_NONE;
static int log_mask = LOG_ALL;
static FILE* log_file;
static char log_host[64];

static const struct {
  const char* name;
  int bit;
} log_subsys_names[] = {
    {"INIT", LOG_INIT},   {"TOPO", LOG_TOPO}, {"NET", LOG_NET}, {"COLL", LOG_COLL},
    {"QUANT", LOG_QUANT}, {"ZERO", LOG_ZERO}, {"SHM", LOG_SHM}, {"BOOT", LOG_BOOT},
    {"ENV", LOG_ENV},     {"ALL", LOG_ALL},
};

int log_subsys_parse(const char* s, FILE* complain) {
  int invert = 0, mask = 0;
  if (*s == '^') {
    invert = 1;
    s++;
  }
  char buf[256];
  if (strlen(s) >= sizeof buf) {
    if (complain)
      fprintf(complain, "qccl: QCCL_DEBUG_SUBSYS is longer than %zu characters; using ALL\n",
              sizeof buf - 1);
    return LOG_ALL;
  }
  snprintf(buf, sizeof buf, "%s", s);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int known = 0;
    for (size_t i = 0; i < sizeof log_subsys_names / sizeof log_subsys_names[0]; i++)
      if (strcasecmp(tok, log_subsys_names[i].name) == 0) {
        mask |= log_subsys_names[i].bit;
        known = 1;
      }
    if (!known && complain)
      fprintf(complain,
              "qccl: QCCL_DEBUG_SUBSYS: '%.64s' is not a subsystem (INIT, TOPO, NET, "
              "COLL, QUANT, ZERO, SHM, BOOT, ENV, ALL); ignored\n",
              tok);
  }
  return invert ? (LOG_ALL & ~mask) : mask;
}

static void log_open_file(const char* pattern) {
  char path[512];
  size_t o = 0;
  for (const char* p = pattern; *p && o + 32 < sizeof path; p++) {
    if (p[0] == '%' && p[1] == 'h') {
      o += (size_t)snprintf(path + o, sizeof path - o, "%s", log_host);
      p++;
    } else if (p[0] == '%' && p[1] == 'p') {
      o += (size_t)snprintf(path + o, sizeof path - o, "%d", (int)getpid());
      p++;
    } else {
      path[o++] = *p;
    }
  }
  path[o] = '\0';
  FILE* f = NULL;
  if (strlen(pattern) + 32 >= sizeof path)
    errno = ENAMETOOLONG;
  else
    f = fopen(path, "a");
  if (f) {
    setvbuf(f, NULL, _IOLBF, 0);
    log_file = f;
  } else {
    /* logging must not fail a call, but it must not vanish silently either */
    fprintf(stderr,
            "qccl: QCCL_DEBUG_FILE='%.200s': cannot open '%.200s' (%s); logging to stderr\n",
            pattern, path, strerror(errno));
  }
}

static void log_init(void) {
  if (gethostname(log_host, sizeof log_host) != 0) snprintf(log_host, sizeof log_host, "?");
  log_host[sizeof log_host - 1] = '\0';
  const char* lvl = getenv("QCCL_DEBUG");
  if (lvl) {
    if (strcasecmp(lvl, "VERSION") == 0)
      log_level = LOG_VERSION;
    else if (strcasecmp(lvl, "WARN") == 0)
      log_level = LOG_WARN;
    else if (strcasecmp(lvl, "INFO") == 0)
      log_level = LOG_INFO;
    else if (strcasecmp(lvl, "TRACE") == 0)
      log_level = LOG_TRACE;
    else if (*lvl) {
      /* not a crash, not silence: say so once and keep warnings on */
      fprintf(stderr, "qccl: QCCL_DEBUG='%s' is not VERSION, WARN, INFO or TRACE; using WARN\n",
              lvl);
      log_level = LOG_WARN;
    }
  }
  const char* sub = getenv("QCCL_DEBUG_SUBSYS");
  if (sub) log_mask = log_subsys_parse(sub, stderr);
  const char* file = getenv("QCCL_DEBUG_FILE");
  log_file = stderr;
  if (file && *file) log_open_file(file);
}

int log_enabled(log_level_t level, int subsys) {
  pthread_once(&log_once, log_init);
  return level <= log_level && (subsys & log_mask) != 0;
}

static const char* log_level_name(log_level_t l) {
  switch (l) {
    case LOG_VERSION:
      return "VERSION";
    case LOG_WARN:
      return "WARN";
    case LOG_INFO:
      return "INFO";
    case LOG_TRACE:
      return "TRACE";
    default:
      return "";
  }
}

static const char* log_subsys_name(int subsys) {
  if (subsys == LOG_ALL) return "";
  for (size_t i = 0; i < sizeof log_subsys_names / sizeof log_subsys_names[0]; i++)
    if (subsys == log_subsys_names[i].bit) return log_subsys_names[i].name;
  return "";
}

void log_write(log_level_t level, int subsys, const char* fmt, ...) {
  if (!log_enabled(level, subsys)) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char* sname = log_subsys_name(subsys);
  /* one fprintf per line so lines of different threads do not interleave */
  fprintf(log_file, "%s:%d:%ld qccl %s %s%s%s%s\n", log_host, (int)getpid(),
          (long)syscall(SYS_gettid), log_level_name(level), *sname ? "[" : "", sname,
          *sname ? "] " : "", msg);
}
