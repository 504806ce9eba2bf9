/*
 * fuzz_boot - libFuzzer target for the bootstrap's messages
 * (src/core/bootstrap.c): what a stranger or a broken peer can send. The
 * first byte picks the part, the rest is the bytes on the wire:
 *   0: a hello, checked against a secret (half the time the input's own
 *      bytes at the secret's place, so the checks past it are reached);
 *   1: the root's answer (table header) for rank 0 of 4;
 *   2: a ring message header against message 7 of 100 bytes;
 *   3: a sequence of hellos into the root's admission state (the root
 *      thread's logic without its sockets): ranks out of range, twice,
 *      nranks that disagree or are huge; every admitted rank must be in
 *      range and appear once, and the count must match.
 * AddressSanitizer catches any over-read; the checks abort on a broken
 * promise.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bootstrap.h"
#include "core/err.h"

#define HELLO_BYTES BOOT_HELLO_BYTES
#define SECRET_AT 16

static void check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "fuzz_boot: %s\n", what);
    abort();
  }
}

static uint8_t secret[BOOT_SECRET_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static void admission(const uint8_t* p, size_t n) {
  boot_root_t st;
  boot_root_init(&st);
  int done = 0, taken = 0;
  for (size_t at = 0; at + HELLO_BYTES <= n && !done; at += HELLO_BYTES) {
    uint8_t h[HELLO_BYTES];
    memcpy(h, p + at, HELLO_BYTES);
    memcpy(h + SECRET_AT, secret, BOOT_SECRET_BYTES); /* past the secret check */
    boot_peer_hello_t ph;
    if (boot_hello_parse(h, sizeof h, secret, &ph) != qcclSuccess) continue;
    /* keep nranks small enough that a run stays fast (the range check
     * itself is exercised by the values above 2^20) */
    if (ph.nranks > 4096 && ph.nranks <= BOOT_MAX_RANKS) ph.nranks = 4096;
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd < 0) break;
    if (boot_root_admit(&st, fd, &ph, &done))
      taken++;
    else
      close(fd);
  }
  check(st.got == taken, "admitted count differs from the ranks taken");
  check(st.nranks < 0 || (st.nranks >= 1 && st.nranks <= BOOT_MAX_RANKS), "nranks out of range");
  check(!done || st.got == st.nranks, "done before every rank joined");
  int seen = 0;
  for (int i = 0; i < st.nranks && st.fds; i++) seen += st.fds[i] >= 0;
  check(seen == st.got, "slots differ from the count");
  boot_root_free(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t* p = data + 1;
  size_t n = size - 1;
  uint8_t* buf = malloc(n ? n : 1); /* exact size: ASan sees any over-read */
  if (!buf) return 0;
  memcpy(buf, p, n);
  switch (data[0] & 3) {
    case 0: {
      uint8_t key[BOOT_SECRET_BYTES];
      if ((data[0] & 4) && n >= SECRET_AT + BOOT_SECRET_BYTES)
        memcpy(key, buf + SECRET_AT, BOOT_SECRET_BYTES);
      else
        memcpy(key, secret, BOOT_SECRET_BYTES);
      boot_peer_hello_t h;
      if (boot_hello_parse(buf, n, key, &h) == qcclSuccess)
        check(n == HELLO_BYTES, "a hello of the wrong size was accepted");
      break;
    }
    case 1:
      if (boot_table_parse(buf, n, 0, 4) == qcclSuccess)
        check(n >= 16 && buf[4] == 0 && buf[5] == 0 && buf[6] == 0 && buf[7] == 0,
              "a table with a failure status was accepted");
      break;
    case 2:
      boot_msg_check(buf, n, 7, 100, 0);
      break;
    default:
      admission(buf, n);
  }
  err_clear();
  free(buf);
  return 0;
}
