#!/usr/bin/env python3
"""bytes_check.py - qccl's inter-node byte counters against the wire.

Runs mn_bytes (which checks each rank's counters against the analytic
volume of the algorithm) under `qcclrun --placement P --link-stats`, then
holds each simulated host's counted inter-node payload against the bytes
its veth interface sent: the wire must carry at least the payload, and at
most the payload plus TCP/IP and UCX framing and the bootstrap's own
traffic (5% + 256 KiB). Without root (no namespaces, no interface
counters) the wire half is skipped (exit 77) after the counter half ran.

usage: bytes_check.py QCCLRUN MN_BYTES PLACEMENT ALGO
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    qcclrun, prog, placement, algo = sys.argv[1:5]
    n = len(placement.split(","))
    with tempfile.TemporaryDirectory() as d:
        link = os.path.join(d, "link.json")
        counted = os.path.join(d, "counted.json")
        cmd = [qcclrun, "-n", str(n), "--placement", placement, "--link-stats", link,
               "--timeout", "120", "--", prog, "--algo", algo, "--out", counted]
        print(" ".join(cmd), flush=True)
        rc = subprocess.call(cmd)
        if rc != 0:
            print("mn_bytes failed (exit %d)" % rc)
            return 1
        with open(link) as f:
            wire = json.load(f)
        with open(counted) as f:
            mine = json.load(f)
    if not wire.get("netns"):
        print("SKIP: no network namespaces (not root): interface counters unavailable")
        return 77
    tx = {h["host"]: h["tx_bytes"] for h in wire["hosts"]}
    bad = 0
    for h in mine["hosts"]:
        c, w = h["counted_inter_bytes"], tx.get(h["host"])
        ok = w is not None and c <= w <= c * 1.05 + 256 * 1024
        print("host %d: counted %d bytes, link sent %s (%s) %s"
              % (h["host"], c, w, "%.3fx" % (w / c) if w and c else "-", "ok" if ok else "FAIL"))
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
