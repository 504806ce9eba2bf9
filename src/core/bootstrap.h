/*
 * bootstrap.h - the out-of-band layer: rendezvous and small exchanges over
 * TCP, used to set up communicators (never on the data path).
 *
 * A root listener (a thread in the process that made the id, or in rank 0
 * for the env flow) collects every rank's listening address and sends the
 * table back; the ranks then connect in a ring. Every connection starts
 * with the job's 16-byte secret; peers without it are refused and logged.
 * Every message carries a header whose length is checked against what the
 * receiver expects. Every call is bounded by the bootstrap's timeout.
 */
#ifndef QCCL_CORE_BOOTSTRAP_H_
#define QCCL_CORE_BOOTSTRAP_H_

#include <stddef.h>
#include <stdint.h>

#include "core/socket.h"
#include "qccl.h"

#define BOOT_SECRET_BYTES 16

typedef struct bootstrap bootstrap_t;

/* What a qcclUniqueId holds (bytes 0-3 magic, 4-7 version, 8-35 the root
 * address, 96-111 the secret; the rest zero). */
typedef struct {
  sock_addr_t root;
  uint8_t secret[BOOT_SECRET_BYTES];
} boot_id_t;

/* Packs / unpacks a boot_id_t into the public 128-byte id. Unpack checks
 * the magic and version. */
void boot_id_pack(const boot_id_t* id, qcclUniqueId* out);
qcclResult_t boot_id_unpack(const qcclUniqueId* in, boot_id_t* out);

/* Fills secret with random bytes (getrandom). */
qcclResult_t boot_random(void* buf, size_t n);

/* Starts a root listener on *bind_addr (port 0: any) in a detached thread
 * that serves one rendezvous and exits, or exits after timeout seconds.
 * The bound address goes to *bound. */
qcclResult_t boot_root_start(const sock_addr_t* bind_addr, const uint8_t* secret, double timeout,
                             sock_addr_t* bound);

/* Joins the rendezvous at id as rank of nranks; builds the ring. */
qcclResult_t boot_init(const boot_id_t* id, int rank, int nranks, double timeout,
                       bootstrap_t** out);

/* Splits: ranks with equal color (>= 0) form a new bootstrap ordered by
 * (key, rank). With color < 0, *out is NULL. Collective over b. */
qcclResult_t boot_split(bootstrap_t* b, int color, int key, bootstrap_t** out);

/* data holds nranks blocks of size bytes; block rank is ours on entry,
 * every block is filled on return. Collective. */
qcclResult_t boot_allgather(bootstrap_t* b, void* data, size_t size);

/* Returns when every rank has entered. Collective. */
qcclResult_t boot_barrier(bootstrap_t* b);

/* Without waiting: 1 when the next rank of the ring failed or exited (its
 * connection ended without a bye). A rank waiting on something other than
 * the ring (a transport's handshake) looks now and then, so that a
 * failure still travels around the ring. */
int boot_next_failed(bootstrap_t* b);

int boot_rank(const bootstrap_t* b);
int boot_nranks(const bootstrap_t* b);
double boot_timeout(const bootstrap_t* b);

/* Shuts b's ring connections down (from any thread; NULL is fine): an
 * exchange another thread waits in fails at once, and the neighbours
 * see this rank leave. For an abort; b is freed later by boot_close. */
void boot_shutdown(bootstrap_t* b);

/* Closes every socket and frees b (NULL is fine). Local. */
void boot_close(bootstrap_t* b, int orderly);

/* ---- the message checks, pure (tests/fuzz drives them) ---------------- */

#define BOOT_ADDR_BYTES 28
#define BOOT_MAX_RANKS (1 << 20)
#define BOOT_HELLO_BYTES 64 /* a hello on the wire */

/* What a hello says once its magic and secret are checked. */
typedef struct {
  int32_t rank, nranks;
  uint8_t addr[BOOT_ADDR_BYTES];
} boot_peer_hello_t;

/* Checks n bytes as a hello carrying secret. */
qcclResult_t boot_hello_parse(const void* buf, size_t n, const uint8_t* secret,
                              boot_peer_hello_t* out);

/* Checks n bytes as the root's answer to rank of nranks (its status
 * becomes the result, with the root's reason). */
qcclResult_t boot_table_parse(const void* buf, size_t n, int rank, int nranks);

/* Checks n bytes as the header of ring message seq of the given bytes. */
qcclResult_t boot_msg_check(const void* hdr, size_t n, uint32_t seq, uint64_t bytes, int rank);

/* The root's admission state: one slot per rank. */
typedef struct {
  int nranks, got; /* nranks -1 until the first valid hello */
  int left;        /* the rank that left early, or -1 */
  int* fds;
  uint8_t* addrs;
} boot_root_t;

void boot_root_init(boot_root_t* st);
/* Admits hello h that came on fd: 1 when st took fd (*done set once every
 * rank is in), 0 when it was refused (an answer saying why was sent on fd;
 * the caller closes it). */
int boot_root_admit(boot_root_t* st, int fd, const boot_peer_hello_t* h, int* done);
/* Closes the admitted sockets and frees st. */
void boot_root_free(boot_root_t* st);

#endif /* QCCL_CORE_BOOTSTRAP_H_ */
