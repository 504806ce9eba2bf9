/*
 * socket.h - TCP helpers for the bootstrap: every call that may block takes
 * an absolute deadline (clock_now() seconds) and fails with qcclTimeout
 * past it; a peer that closes gives qcclRemoteError. IPv4 and IPv6.
 */
#ifndef QCCL_CORE_SOCKET_H_
#define QCCL_CORE_SOCKET_H_

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "qccl.h"

/* A socket address that fits in 28 bytes on the wire (sockaddr_in6). */
typedef union {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
} sock_addr_t;

/* Seconds since an arbitrary start (CLOCK_MONOTONIC). */
double clock_now(void);

/* "1.2.3.4:5678" or "[::1]:5678" into buf (at least 64 bytes). */
const char* sock_addr_str(const sock_addr_t* a, char* buf, size_t len);

/* Resolves host (name or literal) and port into *out. what names the
 * setting the values came from, for the error message. */
qcclResult_t sock_addr_resolve(const char* host, int port, const char* what, sock_addr_t* out);

/* Parses "host:port" (IPv6 as "[addr]:port"). */
qcclResult_t sock_addr_parse(const char* hostport, const char* what, sock_addr_t* out);

/* The address to listen on for a new rendezvous: the interface named by
 * QCCL_SOCKET_IFNAME (prefix match; ^ excludes), else the first interface
 * that is up and neither loopback nor docker, else loopback. Port 0. */
qcclResult_t sock_pick_interface(sock_addr_t* out);

/* Binds and listens on *addr (port 0: any free port); the bound address
 * (with its port) goes to *bound. */
qcclResult_t sock_listen(const sock_addr_t* addr, int* fd, sock_addr_t* bound);

/* Connects to *addr, retrying while the listener is not up, until deadline. */
qcclResult_t sock_connect(const sock_addr_t* addr, double deadline, int* fd);

/* As sock_connect to a listener known to exist (its address came from a
 * peer that listened before it sent it): a refusal means the peer is gone
 * and fails at once with qcclRemoteError instead of being retried. */
qcclResult_t sock_connect_peer(const sock_addr_t* addr, double deadline, int* fd);

/* Accepts one connection before deadline. */
qcclResult_t sock_accept(int lfd, double deadline, int* fd);

/* Sends / receives exactly n bytes before deadline. */
qcclResult_t sock_send_all(int fd, const void* buf, size_t n, double deadline);
qcclResult_t sock_recv_all(int fd, void* buf, size_t n, double deadline);

/* Sends n bytes on sfd while receiving n bytes on rfd (both may be large
 * without deadlock). The peer on sfd never writes on it, except one
 * SOCK_BYE byte when it leaves in good order (sock_bye): anything else, or
 * the end of the stream, means it failed, which fails the call at once (a
 * ring's failure travels around it in both directions), unless all of
 * this call's bytes are sent and the bytes prev has already delivered
 * end it (nothing is waited for). After a bye (kept
 * in *sfd_bye across calls) sfd is no longer watched: the peer had all it
 * needed, so only a send still due to it fails. */
qcclResult_t sock_sendrecv(int sfd, const void* sbuf, int rfd, void* rbuf, size_t n,
                           double deadline, int* sfd_bye);

/* Without waiting: 1 when the peer on sfd (one that never writes on it but
 * its bye, as sock_sendrecv's sfd) has failed or exited: the stream ended,
 * broke, or carries anything but a bye; 0 while it is there, or left in
 * good order (the bye stays unread for sock_sendrecv). */
int sock_peer_failed(int sfd);

/* Tells the peer that sends on fd (whose sock_sendrecv watches it) that
 * this end leaves in good order. Best effort, never blocks. */
void sock_bye(int fd);

/* The local address of a connected socket (the interface that reaches the
 * peer), port set to 0. */
qcclResult_t sock_local_addr(int fd, sock_addr_t* out);

#endif /* QCCL_CORE_SOCKET_H_ */
