/*
 * topo.h - what hwloc tells about this host, as a plain C struct:
 * packages, NUMA nodes, cores, PUs, and the GPUs and NICs on PCI with
 * their bus ids, NUMA node, package and the nearest NIC of each GPU.
 *
 * Source of the topology, first that applies: QCCL_TOPO_FILE (an hwloc
 * XML file), HWLOC_XMLFILE (the same, hwloc's own variable), this machine.
 * A file that is missing or not hwloc XML is an error that names the
 * variable and the file (hwloc alone would fall back to the machine).
 *
 * A GPU is a PCI device of class 0x03xx (display) from NVIDIA (0x10de) or
 * AMD (0x1002), so a server's onboard VGA is not one; a NIC is a PCI device
 * of class 0x02xx (network). Each keeps the name of its OS device (cuda0,
 * mlx5_0; for NICs the openfabrics name before the interface name).
 *
 * Nearest NIC of a GPU: the fewest hops between the two in hwloc's tree
 * (up to their common ancestor and down again: a NIC behind the GPU's PCIe
 * switch beats one on its host bridge, which beats one in its package,
 * which beats one elsewhere); ties go to a NIC on the GPU's NUMA node, then
 * to the lower NIC index (order of discovery, i.e. of PCI bus ids).
 */
#ifndef QCCL_TOPOLOGY_TOPO_H_
#define QCCL_TOPOLOGY_TOPO_H_

#include <hwloc.h>
#include <stddef.h>

#include "qccl.h"

#define TOPO_NAME_BYTES 32
#define TOPO_BUSID_BYTES 16

typedef struct {
  char busid[TOPO_BUSID_BYTES]; /* "dddd:bb:dd.f" */
  char name[TOPO_NAME_BYTES];   /* OS device name, or "" when hwloc knows none */
  unsigned vendor, device;      /* PCI ids */
  unsigned pci_class;           /* e.g. 0x0302 */
  int numa;                     /* os index of its NUMA node; -1 if not a single one */
  int package;                  /* os index of its package; -1 if none */
  int nearest;                  /* GPUs: index of the nearest NIC, -1 if no NIC */
  int hops;                     /* GPUs: tree hops to that NIC */
} topo_dev_t;

typedef struct {
  char source[320]; /* "this machine", or "QCCL_TOPO_FILE=path", "HWLOC_XMLFILE=path" */
  int thissystem;   /* 1 when it describes the machine we run on (binding allowed) */
  int npackages, nnuma, ncores, npus;
  int ngpus, nnics;
  topo_dev_t* gpus;
  topo_dev_t* nics;
  hwloc_topology_t hw; /* kept for binding and dumping */
} topo_t;

/* Loads hwloc from the source above; io: keep PCI and OS devices. On
 * failure nothing is left to destroy. */
qcclResult_t topo_hwloc_load(int io, hwloc_topology_t* out, char* source, size_t source_len);

/* Discovers the host (with I/O devices) into *out. */
qcclResult_t topo_load(topo_t** out);

/* As topo_load from one hwloc XML file (tests; variables are ignored). */
qcclResult_t topo_load_xml(const char* path, topo_t** out);

/* Frees t (NULL is fine). */
void topo_free(topo_t* t);

/* Writes t as hwloc XML to path, after replacing %h by the host name and %p
 * by the pid (written to a temporary file and renamed, so ranks of one host
 * writing the same name never mix their output). */
qcclResult_t topo_dump(const topo_t* t, const char* path);

/* One line of summary ("1 package, 2 NUMA nodes, ..."). */
void topo_format_summary(const topo_t* t, char* buf, size_t len);

/* One line per GPU: its bus id, NUMA node, and nearest NIC with its NUMA
 * node. */
void topo_format_gpu(const topo_t* t, int gpu, char* buf, size_t len);

/* One line per NIC: name, bus id, NUMA node. */
void topo_format_nic(const topo_t* t, int nic, char* buf, size_t len);

/* Picks the nearest of n NICs for a GPU on NUMA node gpu_numa (-1 unknown):
 * the least hops[i], ties to nic_numa[i] == gpu_numa, then the lowest i.
 * Returns -1 when n is 0. */
int topo_pick_nearest(const int* hops, const int* nic_numa, int n, int gpu_numa);

/* ---- binding (bind.c) ---------------------------------------------- */

typedef enum { TOPO_BIND_NONE = 0, TOPO_BIND_CORE = 1, TOPO_BIND_NUMA = 2 } topo_bind_t;

/* Reads QCCL_BIND (none, core or numa; unset is none). Another value is
 * qcclInvalidArgument naming the variable and the value. */
qcclResult_t topo_bind_parse(topo_bind_t* out);

const char* topo_bind_name(topo_bind_t mode);

/* Which of n objects (cores or NUMA nodes, in hwloc's logical order) local
 * rank l of a node of L ranks gets: l * n / L, so ranks spread evenly over
 * the objects (and share them in blocks when they outnumber them). */
int topo_bind_target(int l, int L, int n);

/* The logical index of the core or NUMA node local rank l of L binds to
 * under mode in t, or -1 for none. */
int topo_bind_index(const topo_t* t, topo_bind_t mode, int l, int L);

/* Binds the calling process to its core or NUMA node. A topology that is
 * not this machine (from a file) is not applied: *applied is 0. desc gets a
 * description ("core 1 (cpus 0x2)"). A failing bind call is an error. */
qcclResult_t topo_bind_apply(const topo_t* t, topo_bind_t mode, int l, int L, int* applied,
                             char* desc, size_t len);

#endif /* QCCL_TOPOLOGY_TOPO_H_ */
