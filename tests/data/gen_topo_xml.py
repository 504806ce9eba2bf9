#!/usr/bin/env python3
"""Writes the hwloc 2.x XML topologies of tests/topology (run from tests/data).

Each is a made-up host whose GPU -> NIC and NUMA picks the unit test
(tests/topology/unit_topo_xml.c) asserts:
  topo_2s_pcie.xml  2 packages x 1 NUMA x 4 cores; each package has a host
                    bridge with 2 PCIe switches, each holding a GPU and a
                    NIC (mlx5_*), and package 0 an extra onboard NIC (eno1)
                    straight on its host bridge, listed first.
  topo_flat.xml     1 package, 1 NUMA, 4 cores (2 PUs each); one host bridge
                    holding an ASPEED VGA (not a GPU), 2 GPUs and 1 NIC.
  topo_4numa.xml    2 packages x 2 groups, each group 1 NUMA node x 2 cores
                    and a host bridge; GPUs on NUMA 0..3, NICs on NUMA 1
                    and 2 only.
Check a file with: lstopo --input FILE --of console
"""
import itertools

gp = itertools.count(1)


def mask(bits):
    v = 0
    for b in bits:
        v |= 1 << b
    return "0x%08x" % v


def sets(cpus, nodes):
    c, n = mask(cpus), mask(nodes)
    return ('cpuset="%s" complete_cpuset="%s" nodeset="%s" complete_nodeset="%s"' % (c, c, n, n))


class W:
    def __init__(self):
        self.lines = []
        self.ind = 1

    def open(self, attrs):
        self.lines.append("  " * self.ind + "<object %s>" % attrs)
        self.ind += 1

    def close(self):
        self.ind -= 1
        self.lines.append("  " * self.ind + "</object>")

    def leaf(self, attrs, infos=()):
        if not infos:
            self.lines.append("  " * self.ind + "<object %s/>" % attrs)
            return
        self.open(attrs)
        for k, v in infos:
            self.lines.append("  " * self.ind + '<info name="%s" value="%s"/>' % (k, v))
        self.close()


def numa(w, os_index, cpus):
    w.leaf('type="NUMANode" os_index="%d" %s gp_index="%d" local_memory="17179869184"'
           % (os_index, sets(cpus, [os_index]), next(gp)))


def cores(w, first_core, ncores, pus_per_core, node):
    for c in range(first_core, first_core + ncores):
        pus = [c * pus_per_core + k for k in range(pus_per_core)]
        w.open('type="Core" os_index="%d" %s gp_index="%d"' % (c, sets(pus, [node]), next(gp)))
        for p in pus:
            w.leaf('type="PU" os_index="%d" %s gp_index="%d"' % (p, sets([p], [node]), next(gp)))
        w.close()


def hostbridge(w, lo, hi):
    w.open('type="Bridge" gp_index="%d" bridge_type="0-1" depth="0" bridge_pci="0000:[%02x-%02x]"'
           % (next(gp), lo, hi))


def switch(w, busid, lo, hi):
    w.open('type="Bridge" gp_index="%d" bridge_type="1-1" depth="1" pci_busid="%s" '
           'pci_type="0604 [10b5:8747] [0000:0000] ca" bridge_pci="0000:[%02x-%02x]"'
           % (next(gp), busid, lo, hi))


def gpu(w, busid, idx):
    w.open('type="PCIDev" gp_index="%d" pci_busid="%s" pci_type="0302 [10de:2330] [10de:16c1] a1" '
           'pci_link_speed="31.507692"' % (next(gp), busid))
    w.leaf('type="OSDev" gp_index="%d" name="cuda%d" osdev_type="5"' % (next(gp), idx),
           [("CoProcType", "CUDA"), ("Backend", "CUDA")])
    w.close()


def nic(w, busid, ifname, ibname=None, cls="0200"):
    w.open('type="PCIDev" gp_index="%d" pci_busid="%s" pci_type="%s [15b3:1021] [15b3:0023] 00" '
           'pci_link_speed="31.507692"' % (next(gp), busid, cls))
    w.leaf('type="OSDev" gp_index="%d" name="%s" osdev_type="2"' % (next(gp), ifname),
           [("Address", "02:00:00:00:00:%02x" % (hash(ifname) & 0xff))])
    if ibname:
        w.leaf('type="OSDev" gp_index="%d" name="%s" osdev_type="3"' % (next(gp), ibname))
    w.close()


def vga(w, busid):
    w.leaf('type="PCIDev" gp_index="%d" pci_busid="%s" pci_type="0300 [1a03:2000] [1a03:2000] 41"'
           % (next(gp), busid))


def document(w, cpus, nodes, name):
    head = ['<?xml version="1.0" encoding="UTF-8"?>', '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
            '<topology version="2.0">',
            '  <object type="Machine" os_index="0" %s allowed_cpuset="%s" allowed_nodeset="%s" '
            'gp_index="%d">' % (sets(cpus, nodes), mask(cpus), mask(nodes), next(gp)),
            '    <info name="Backend" value="Linux"/>',
            '    <info name="HostName" value="%s"/>' % name]
    tail = ['  </object>', '</topology>', '']
    return "\n".join(head + w.lines + tail)


def two_sockets():
    w = W()
    w.ind = 2
    for p in range(2):
        cpus = list(range(4 * p, 4 * p + 4))
        w.open('type="Package" os_index="%d" %s gp_index="%d"' % (p, sets(cpus, [p]), next(gp)))
        numa(w, p, cpus)
        cores(w, 4 * p, 4, 1, p)
        base = 0x00 if p == 0 else 0x80
        hostbridge(w, base, base + 0x1f)
        if p == 0:
            nic(w, "0000:%02x:00.0" % (base + 1), "eno1")
        for s in range(2):
            b = base + 0x10 + 8 * s
            switch(w, "0000:%02x:%02x.0" % (base, 2 + s), b, b + 2)
            gpu(w, "0000:%02x:00.0" % (b + 1), 2 * p + s)
            nic(w, "0000:%02x:00.0" % (b + 2), "ib%d" % (2 * p + s), "mlx5_%d" % (2 * p + s),
                cls="0207")
            w.close()
        w.close()
        w.close()
    return document(w, range(8), [0, 1], "twosocket")


def flat():
    w = W()
    w.ind = 2
    cpus = list(range(8))
    w.open('type="Package" os_index="0" %s gp_index="%d"' % (sets(cpus, [0]), next(gp)))
    numa(w, 0, cpus)
    cores(w, 0, 4, 2, 0)
    w.close()
    hostbridge(w, 0x00, 0x0f)
    vga(w, "0000:02:00.0")
    gpu(w, "0000:03:00.0", 0)
    gpu(w, "0000:04:00.0", 1)
    nic(w, "0000:05:00.0", "eth0")
    w.close()
    return document(w, cpus, [0], "flat")


def four_numa():
    w = W()
    w.ind = 2
    for p in range(2):
        cpus = list(range(4 * p, 4 * p + 4))
        w.open('type="Package" os_index="%d" %s gp_index="%d"'
               % (p, sets(cpus, [2 * p, 2 * p + 1]), next(gp)))
        for g in range(2):
            n = 2 * p + g
            gcpus = [2 * n, 2 * n + 1]
            w.open('type="Group" %s gp_index="%d" kind="1000" subkind="0"'
                   % (sets(gcpus, [n]), next(gp)))
            numa(w, n, gcpus)
            cores(w, 2 * n, 2, 1, n)
            base = 0x40 * n
            hostbridge(w, base, base + 0x3f)
            gpu(w, "0000:%02x:00.0" % (base + 1), n)
            if n in (1, 2):
                nic(w, "0000:%02x:00.0" % (base + 2), "ens%d" % n, "mlx5_%d" % (n - 1), cls="0207")
            w.close()
            w.close()
        w.close()
    return document(w, range(8), range(4), "fournuma")


for name, f in [("topo_2s_pcie.xml", two_sockets), ("topo_flat.xml", flat),
                ("topo_4numa.xml", four_numa)]:
    with open(name, "w") as out:
        out.write(f())
