#!/usr/bin/env python3
"""nccl_symbols.py - the drop-in exports NCCL 2.28's C API, nothing else.

  - every function nccl.h declares (ncclX and its profiling twin pncclX) is
    defined by libnccl.so.2, ncclX weak and pncclX strong as in NVIDIA's;
  - nothing else is exported but qccl_nccl.h's qcclCommFromNccl;
  - soname libnccl.so.2, and no CUDA library among its NEEDED (CUDA is
    loaded at run time);
  - what NVIDIA's libnccl.so.2 exports beyond that is only the device-side
    API of nccl_device.h (which needs GPU kernels).

usage: nccl_symbols.py NCCL_H DROPIN_LIB [NVIDIA_LIB]
"""
import re
import subprocess
import sys


def dynsyms(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                         text=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            syms[parts[2].split("@")[0]] = parts[1]
    return syms


def declared(header):
    text = open(header).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
    return set(re.findall(r"\b(p?nccl[A-Z]\w*)\s*\(", text))


def main():
    header, dropin = sys.argv[1], sys.argv[2]
    nvidia = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None
    decl = declared(header)
    ours = dynsyms(dropin)
    fails = []
    missing = sorted(decl - set(ours))
    if missing:
        fails.append("declared in nccl.h, not exported: " + " ".join(missing))
    extra = sorted(set(ours) - decl - {"qcclCommFromNccl"})
    if extra:
        fails.append("exported beyond NCCL's API: " + " ".join(extra))
    for name in sorted(decl & set(ours)):
        want = "T" if name.startswith("p") else "W"
        if ours[name] != want:
            fails.append(f"{name} is '{ours[name]}' in nm, NVIDIA's is '{want}'")
    dyn = subprocess.run(["readelf", "-d", dropin], check=True, capture_output=True,
                         text=True).stdout
    if "[libnccl.so.2]" not in dyn:
        fails.append("soname is not libnccl.so.2")
    if re.search(r"NEEDED.*\[lib(cuda|cudart|nccl)", dyn):
        fails.append("a CUDA library is NEEDED: " + dyn)
    print(f"nccl.h declares {len(decl)} functions; the drop-in exports {len(ours)} symbols")
    if nvidia:
        device_api = re.compile(r"^p?nccl(DevComm|Team|LsaBarrier|GinBarrier|LLA2A|"
                                r"ResetDebugInitInternal)")
        theirs = {s for s in dynsyms(nvidia) if re.match(r"^p?nccl", s)}
        beyond = sorted(theirs - set(ours))
        unknown = [s for s in beyond if not device_api.match(s)]
        print(f"NVIDIA's library exports {len(theirs)}; not in the drop-in: {len(beyond)} "
              "(device-side API)")
        if unknown:
            fails.append("NVIDIA's libnccl exports host API the drop-in lacks: " +
                         " ".join(unknown))
    for f in fails:
        print("FAIL:", f)
    if not fails:
        print("ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
