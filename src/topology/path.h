/*
 * path.h - the path table: for every peer of a rank, the transport that
 * carries host buffers (what the communicator connected: self, shm or
 * ucx) and the one device buffers would take given the build (cuda_ipc
 * inside a node when CUDA is built, else nccl when NCCL is built, else
 * shm staged through host memory; nccl across nodes when built, else ucx).
 * The collectives do not take device buffers yet: the device column says
 * what the build offers. Printed at QCCL_DEBUG=INFO (subsystem TOPO) with
 * the host's GPU -> NIC lines (topo.h).
 */
#ifndef QCCL_TOPOLOGY_PATH_H_
#define QCCL_TOPOLOGY_PATH_H_

#include <stddef.h>

#include "topology/rankmap.h"

typedef enum {
  PATH_SELF = 0,
  PATH_SHM = 1,
  PATH_UCX = 2,
  PATH_CUDA_IPC = 3,
  PATH_NCCL = 4,
  PATH_NUM_KINDS = 5
} path_kind_t;

const char* path_kind_name(path_kind_t k);

/* The transport of host buffers from this rank to a peer: itself and the
 * ranks of its node through the node's shared segment (self: its own
 * ring), the others through UCX. comm.c connects what this says. */
path_kind_t path_host_kind(int self, int same_node);

/* Host kinds of every peer of rank `rank` in map, into kinds[nranks]. */
void path_host_row(const topo_rankmap_t* map, int rank, path_kind_t* kinds);

/* The transport of device buffers from this rank to a peer: self, same
 * node or not, and what the build has. */
path_kind_t path_device_kind(int self, int same_node, int have_cuda, int have_nccl);

/* Formats this rank's row: for each kind that occurs in kinds[0..n), its
 * name and the peers as ranges ("self 2; shm 0-1,3; ucx 4-7"). */
void path_format_row(const path_kind_t* kinds, int n, char* buf, size_t len);

/* Device kinds of every peer of rank `rank` in map, into kinds[nranks]. */
void path_device_row(const topo_rankmap_t* map, int rank, int have_cuda, int have_nccl,
                     path_kind_t* kinds);

#endif /* QCCL_TOPOLOGY_PATH_H_ */
