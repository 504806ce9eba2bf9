/*
 * topo.c - hwloc discovery into topo_t (see topo.h), the nearest NIC of
 * each GPU, and the XML dump.
 *
 * One hwloc load (with I/O devices kept as "important": PCI devices of
 * interesting classes and their OS devices), one depth-first walk that
 * collects GPUs and NICs in PCI order, then for every (GPU, NIC) pair the
 * hops through their lowest common ancestor: O(GPUs x NICs x depth), a few
 * hundred steps on the largest nodes.
 */
#include "topology/topo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/env.h"
#include "core/log.h"

/* Keeps PCI and OS devices. On Linux the core's sysfs reader finds PCI
 * devices by itself; hwloc's libpciaccess plugin ("pci") adds nothing there
 * but leaks what it allocates (seen by LeakSanitizer), so it is left out. */
static void topo_keep_io(hwloc_topology_t hw) {
  hwloc_topology_set_io_types_filter(hw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
#if defined(__linux__)
  hwloc_topology_set_components(hw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
#endif
}

qcclResult_t topo_hwloc_load(int io, hwloc_topology_t* out, char* source, size_t source_len) {
  const char* var = "QCCL_TOPO_FILE";
  const char* file = env_get("QCCL_TOPO_FILE");
  if (file == NULL) {
    var = "HWLOC_XMLFILE";
    file = env_get("HWLOC_XMLFILE");
  }
  if (file != NULL && *file == '\0')
    return QCCL_ERR(qcclInvalidArgument, "%s is set but empty (an hwloc XML file expected)", var);
  if (file != NULL && access(file, R_OK) != 0)
    return QCCL_ERRNO(qcclInvalidArgument, errno, "%s='%s': cannot read the topology file", var,
                      file);
  hwloc_topology_t hw;
  if (hwloc_topology_init(&hw) != 0) return QCCL_ERR(qcclSystemError, "hwloc_topology_init failed");
  if (io) topo_keep_io(hw);
  if (file != NULL && hwloc_topology_set_xml(hw, file) != 0) {
    hwloc_topology_destroy(hw);
    return QCCL_ERR(qcclInvalidArgument, "%s='%s' is not a valid hwloc XML topology", var, file);
  }
  if (hwloc_topology_load(hw) != 0) {
    int e = errno;
    hwloc_topology_destroy(hw);
    if (file != NULL)
      return QCCL_ERRNO(qcclInvalidArgument, e, "%s='%s': hwloc could not load the topology", var,
                        file);
    return QCCL_ERRNO(qcclSystemError, e, "hwloc could not discover this machine's topology");
  }
  if (hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PU) <= 0) {
    hwloc_topology_destroy(hw);
    return QCCL_ERR(qcclInvalidArgument, "%s='%s': the topology has no processing unit", var,
                    file ? file : "");
  }
  if (source != NULL) {
    if (file != NULL)
      snprintf(source, source_len, "%s=%s", var, file);
    else
      snprintf(source, source_len, "this machine");
  }
  *out = hw;
  return qcclSuccess;
}

static int topo_is_gpu(const struct hwloc_pcidev_attr_s* a) {
  return (a->class_id >> 8) == 0x03 && (a->vendor_id == 0x10de || a->vendor_id == 0x1002);
}

static int topo_is_nic(const struct hwloc_pcidev_attr_s* a) {
  return (a->class_id >> 8) == 0x02;
}

/* Hops from o up to the root. */
static int topo_height(hwloc_obj_t o) {
  int h = 0;
  for (; o->parent != NULL; o = o->parent) h++;
  return h;
}

/* Hops between a and b through their lowest common ancestor. */
static int topo_hops(hwloc_obj_t a, hwloc_obj_t b) {
  int ha = topo_height(a), hb = topo_height(b), hops = 0;
  for (; ha > hb; ha--, hops++) a = a->parent;
  for (; hb > ha; hb--, hops++) b = b->parent;
  while (a != b) {
    a = a->parent;
    b = b->parent;
    hops += 2;
  }
  return hops;
}

/* Name of the OS device under a PCI device: openfabrics or CUDA names
 * first, then any other. */
static void topo_osdev_name(hwloc_obj_t pci, char* buf, size_t len) {
  buf[0] = '\0';
  int best = -1;
  for (hwloc_obj_t c = pci->io_first_child; c != NULL; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE || c->name == NULL) continue;
    hwloc_obj_osdev_type_t t = c->attr->osdev.type;
    int rank = t == HWLOC_OBJ_OSDEV_OPENFABRICS || t == HWLOC_OBJ_OSDEV_COPROC ? 2 : 1;
    if (rank > best) {
      best = rank;
      snprintf(buf, len, "%s", c->name);
    }
  }
}

static void topo_fill_dev(hwloc_topology_t hw, hwloc_obj_t pci, topo_dev_t* d) {
  const struct hwloc_pcidev_attr_s* a = &pci->attr->pcidev;
  memset(d, 0, sizeof *d);
  snprintf(d->busid, sizeof d->busid, "%04x:%02x:%02x.%01x", a->domain, a->bus, a->dev, a->func);
  d->vendor = a->vendor_id;
  d->device = a->device_id;
  d->pci_class = a->class_id;
  topo_osdev_name(pci, d->name, sizeof d->name);
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(hw, pci);
  d->numa = -1;
  d->package = -1;
  if (anc != NULL && anc->nodeset != NULL && hwloc_bitmap_weight(anc->nodeset) == 1)
    d->numa = hwloc_bitmap_first(anc->nodeset);
  hwloc_obj_t pkg = anc ? hwloc_get_ancestor_obj_by_type(hw, HWLOC_OBJ_PACKAGE, anc) : NULL;
  if (anc != NULL && anc->type == HWLOC_OBJ_PACKAGE) pkg = anc;
  if (pkg != NULL) d->package = (int)pkg->os_index;
  d->nearest = -1;
  d->hops = -1;
}

int topo_pick_nearest(const int* hops, const int* nic_numa, int n, int gpu_numa) {
  int best = -1;
  for (int i = 0; i < n; i++) {
    if (best < 0 || hops[i] < hops[best]) {
      best = i;
      continue;
    }
    int same_i = gpu_numa >= 0 && nic_numa[i] == gpu_numa;
    int same_b = gpu_numa >= 0 && nic_numa[best] == gpu_numa;
    if (hops[i] == hops[best] && same_i && !same_b) best = i;
  }
  return best;
}

static qcclResult_t topo_collect(topo_t* t) {
  hwloc_topology_t hw = t->hw;
  t->npackages = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PACKAGE);
  t->nnuma = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE);
  t->ncores = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_CORE);
  t->npus = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PU);
  if (t->npackages < 0) t->npackages = 0;
  if (t->nnuma < 0) t->nnuma = 0;
  if (t->ncores <= 0) t->ncores = t->npus;
  t->thissystem = hwloc_topology_is_thissystem(hw);
  int npci = 0;
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_pcidev(hw, o)) != NULL;) npci++;
  hwloc_obj_t* gpu_obj = calloc((size_t)npci + 1, sizeof *gpu_obj);
  hwloc_obj_t* nic_obj = calloc((size_t)npci + 1, sizeof *nic_obj);
  t->gpus = calloc((size_t)npci + 1, sizeof *t->gpus);
  t->nics = calloc((size_t)npci + 1, sizeof *t->nics);
  int* hops = calloc((size_t)npci + 1, sizeof *hops);
  int* numa = calloc((size_t)npci + 1, sizeof *numa);
  qcclResult_t r = qcclSuccess;
  if (!gpu_obj || !nic_obj || !t->gpus || !t->nics || !hops || !numa) {
    r = QCCL_ERR(qcclSystemError, "out of memory (topology of %d PCI devices)", npci);
    goto free_scratch;
  }
  /* hwloc_get_next_pcidev walks PCI devices in the order of the tree */
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_pcidev(hw, o)) != NULL;) {
    if (topo_is_gpu(&o->attr->pcidev)) {
      topo_fill_dev(hw, o, &t->gpus[t->ngpus]);
      gpu_obj[t->ngpus++] = o;
    } else if (topo_is_nic(&o->attr->pcidev)) {
      topo_fill_dev(hw, o, &t->nics[t->nnics]);
      nic_obj[t->nnics++] = o;
    }
  }
  for (int n = 0; n < t->nnics; n++) numa[n] = t->nics[n].numa;
  for (int g = 0; g < t->ngpus; g++) {
    for (int n = 0; n < t->nnics; n++) hops[n] = topo_hops(gpu_obj[g], nic_obj[n]);
    int best = topo_pick_nearest(hops, numa, t->nnics, t->gpus[g].numa);
    t->gpus[g].nearest = best;
    t->gpus[g].hops = best >= 0 ? hops[best] : -1;
  }
free_scratch:
  free(gpu_obj);
  free(nic_obj);
  free(hops);
  free(numa);
  return r;
}

static qcclResult_t topo_finish_load(hwloc_topology_t hw, const char* source, topo_t** out) {
  topo_t* t = calloc(1, sizeof *t);
  if (t == NULL) {
    hwloc_topology_destroy(hw);
    return QCCL_ERR(qcclSystemError, "out of memory");
  }
  t->hw = hw;
  snprintf(t->source, sizeof t->source, "%s", source);
  qcclResult_t r = topo_collect(t);
  if (r != qcclSuccess) {
    topo_free(t);
    return r;
  }
  *out = t;
  return qcclSuccess;
}

qcclResult_t topo_load(topo_t** out) {
  hwloc_topology_t hw;
  char source[320];
  QCCL_CHECK(topo_hwloc_load(1, &hw, source, sizeof source));
  return topo_finish_load(hw, source, out);
}

qcclResult_t topo_load_xml(const char* path, topo_t** out) {
  if (path == NULL || access(path, R_OK) != 0)
    return QCCL_ERR(qcclInvalidArgument, "topology file '%s' cannot be read", path ? path : "");
  hwloc_topology_t hw;
  if (hwloc_topology_init(&hw) != 0) return QCCL_ERR(qcclSystemError, "hwloc_topology_init failed");
  topo_keep_io(hw);
  if (hwloc_topology_set_xml(hw, path) != 0 || hwloc_topology_load(hw) != 0) {
    hwloc_topology_destroy(hw);
    return QCCL_ERR(qcclInvalidArgument, "'%s' is not a valid hwloc XML topology", path);
  }
  char source[320];
  snprintf(source, sizeof source, "file %s", path);
  return topo_finish_load(hw, source, out);
}

void topo_free(topo_t* t) {
  if (t == NULL) return;
  if (t->hw) hwloc_topology_destroy(t->hw);
  free(t->gpus);
  free(t->nics);
  free(t);
}

/* path with %h (host name) and %p (pid) replaced. */
static void topo_expand(const char* pattern, char* out, size_t len) {
  char host[64] = "host";
  gethostname(host, sizeof host - 1);
  size_t k = 0;
  for (const char* p = pattern; *p && k + 1 < len; p++) {
    if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
      char num[24];
      const char* s = p[1] == 'h' ? host : (snprintf(num, sizeof num, "%d", (int)getpid()), num);
      int n = snprintf(out + k, len - k, "%s", s);
      k += n > 0 ? (size_t)n : 0;
      if (k >= len) k = len - 1;
      p++;
    } else {
      out[k++] = *p;
    }
  }
  out[k] = '\0';
}

qcclResult_t topo_dump(const topo_t* t, const char* pattern) {
  char path[4096], tmp[4200];
  topo_expand(pattern, path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
  if (hwloc_topology_export_xml(t->hw, tmp, 0) != 0) {
    int e = errno;
    unlink(tmp);
    return QCCL_ERRNO(qcclSystemError, e, "QCCL_TOPO_DUMP_FILE: cannot write '%s'", path);
  }
  if (rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return QCCL_ERRNO(qcclSystemError, e, "QCCL_TOPO_DUMP_FILE: cannot rename '%s' to '%s'", tmp,
                      path);
  }
  QCCL_INFO(LOG_TOPO, "topology written to %s", path);
  return qcclSuccess;
}

static const char* topo_plural(int n) {
  return n == 1 ? "" : "s";
}

void topo_format_summary(const topo_t* t, char* buf, size_t len) {
  snprintf(buf, len, "%d package%s, %d NUMA node%s, %d core%s, %d PU%s, %d GPU%s, %d NIC%s (%s)",
           t->npackages, topo_plural(t->npackages), t->nnuma, topo_plural(t->nnuma), t->ncores,
           topo_plural(t->ncores), t->npus, topo_plural(t->npus), t->ngpus, topo_plural(t->ngpus),
           t->nnics, topo_plural(t->nnics), t->source);
}

void topo_format_gpu(const topo_t* t, int gpu, char* buf, size_t len) {
  const topo_dev_t* g = &t->gpus[gpu];
  int n = snprintf(buf, len, "gpu %d %s [%04x:%04x] %s numa %d -> ", gpu, g->busid, g->vendor,
                   g->device, g->name[0] ? g->name : "-", g->numa);
  if (n < 0 || (size_t)n >= len) return;
  if (g->nearest < 0) {
    snprintf(buf + n, len - (size_t)n, "no NIC");
    return;
  }
  const topo_dev_t* c = &t->nics[g->nearest];
  snprintf(buf + n, len - (size_t)n, "nic %d %s %s numa %d (%d hops)", g->nearest,
           c->name[0] ? c->name : "-", c->busid, c->numa, g->hops);
}

void topo_format_nic(const topo_t* t, int nic, char* buf, size_t len) {
  const topo_dev_t* c = &t->nics[nic];
  snprintf(buf, len, "nic %d %s %s [%04x:%04x] class %04x numa %d", nic, c->name[0] ? c->name : "-",
           c->busid, c->vendor, c->device, c->pci_class, c->numa);
}
