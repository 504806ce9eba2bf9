/*
 * log.h - the logger (DESIGN.md section 9).
 *
 * QCCL_DEBUG=VERSION|WARN|INFO|TRACE picks the level, QCCL_DEBUG_SUBSYS a
 * comma list of INIT,TOPO,NET,COLL,QUANT,ZERO,SHM,BOOT,ENV,ALL (a leading ^
 * inverts), QCCL_DEBUG_FILE a file (%h host, %p pid) instead of stderr.
 * Lines read "host:pid:tid qccl LEVEL [SUBSYS] message".
 */
#ifndef QCCL_CORE_LOG_H_
#define QCCL_CORE_LOG_H_

#include <stdio.h>

#include "core/err.h"

typedef enum {
  LOG_NONE = 0,
  LOG_VERSION = 1,
  LOG_WARN = 2,
  LOG_INFO = 3,
  LOG_TRACE = 4
} log_level_t;

typedef enum {
  LOG_INIT = 1 << 0,
  LOG_TOPO = 1 << 1,
  LOG_NET = 1 << 2,
  LOG_COLL = 1 << 3,
  LOG_QUANT = 1 << 4,
  LOG_ZERO = 1 << 5,
  LOG_SHM = 1 << 6,
  LOG_BOOT = 1 << 7,
  LOG_ENV = 1 << 8,
  LOG_ALL = 0xffff
} log_subsys_t;

/* True when a message of this level and subsystem would be printed. */
int log_enabled(log_level_t level, int subsys);

/* The subsystem mask of a QCCL_DEBUG_SUBSYS value (names in any case, a
 * leading ^ inverts); unknown names are reported on complain (if not NULL)
 * and ignored. */
int log_subsys_parse(const char* s, FILE* complain);

/* Prints one line (no trailing newline needed). */
void log_write(log_level_t level, int subsys, const char* fmt, ...) QCCL_PRINTF(3, 4);

#define QCCL_WARN(subsys, ...) log_write(LOG_WARN, (subsys), __VA_ARGS__)
#define QCCL_INFO(subsys, ...)                                                       \
  do {                                                                               \
    if (log_enabled(LOG_INFO, (subsys))) log_write(LOG_INFO, (subsys), __VA_ARGS__); \
  } while (0)
#define QCCL_TRACE(subsys, ...)                                                        \
  do {                                                                                 \
    if (log_enabled(LOG_TRACE, (subsys))) log_write(LOG_TRACE, (subsys), __VA_ARGS__); \
  } while (0)

#endif /* QCCL_CORE_LOG_H_ */
