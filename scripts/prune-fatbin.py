#!/usr/bin/env python3
"""Shrinks a CUDA library for one GPU generation, e.g. onnxruntime-gpu's
libonnxruntime_providers_cuda.so (284 MB, kernels for sm_75 to sm_120) for
an H100/H200 (sm_90), so that it can be copied where transfers are small.

A CUDA shared library keeps its GPU code in the ELF section .nv_fatbin: a
run of fat binaries, each a 16-byte header (magic 0xBA55ED50, version,
header size, size) and entries, each with its own header (kind: 1 PTX,
2 ELF/cubin; payload size at +8; architecture at +28) and payload. This
script zeroes the payload of every entry the target does not load (cubins
of other architectures; PTX unless a fat binary has no cubin for the
target, when the newest PTX not above it is kept), leaving every header,
size and offset as it was. The library loads as before on GPUs of the
target's generation, and the zeroed bytes compress to almost nothing
(onnxruntime-gpu 1.31.1's provider, sm_90: 52 MB with zstd -19 or xz -9).
On any other GPU the pruned library fails to load its kernels.

    scripts/prune-fatbin.py LIB                  # list entries by kind and architecture
    scripts/prune-fatbin.py LIB 90 OUT           # write the pruned copy to OUT

Check the result before shipping it (`sha256sum`), and run it on the
target once (scripts/gpu-check does).
"""
import collections
import struct
import subprocess
import sys

MAGIC = 0xBA55ED50


def fatbin_section(path):
    """(file offset, size) of .nv_fatbin, read with readelf."""
    out = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if ".nv_fatbin" in fields:
            i = fields.index(".nv_fatbin")
            return int(fields[i + 3], 16), int(fields[i + 4], 16)
    sys.exit(f"{path}: no .nv_fatbin section")


def fat_binaries(data, start, end):
    """Each fat binary's entries as (kind, arch, payload offset, payload size)."""
    pos = start
    while pos < end:
        magic, _version, header, size = struct.unpack_from("<IHHQ", data, pos)
        if magic != MAGIC:
            pos += 8  # alignment padding between fat binaries
            continue
        entries = []
        p, stop = pos + header, pos + header + size
        while p < stop:
            kind, _v, entry_header = struct.unpack_from("<HHI", data, p)
            (payload,) = struct.unpack_from("<Q", data, p + 8)
            (arch,) = struct.unpack_from("<I", data, p + 28)
            entries.append((kind, arch, p + entry_header, payload))
            p += entry_header + payload
        if p != stop:
            sys.exit(f"fat binary at {pos:#x}: entries end at {p:#x}, not {stop:#x}: unknown layout")
        yield entries
        pos = stop


def main():
    if len(sys.argv) not in (2, 4):
        sys.exit(__doc__)
    path = sys.argv[1]
    data = bytearray(open(path, "rb").read())
    start, size = fatbin_section(path)
    sizes = collections.Counter()
    target = int(sys.argv[2]) if len(sys.argv) == 4 else None
    zeroed = 0
    for entries in fat_binaries(data, start, start + size):
        for kind, arch, _at, n in entries:
            sizes[("PTX" if kind == 1 else "ELF" if kind == 2 else str(kind), arch)] += n
        if target is None:
            continue
        has_cubin = any(k == 2 and a == target for k, a, _, _ in entries)
        ptx = [a for k, a, _, _ in entries if k == 1 and a <= target]
        keep_ptx = None if has_cubin or not ptx else max(ptx)
        for kind, arch, at, n in entries:
            if (kind == 2 and arch == target) or (kind == 1 and arch == keep_ptx):
                continue
            data[at:at + n] = bytes(n)
            zeroed += n
    for (kind, arch), n in sorted(sizes.items()):
        print(f"{kind} sm_{arch}: {n:,} bytes")
    if target is not None:
        open(sys.argv[3], "wb").write(data)
        print(f"zeroed {zeroed:,} of {size:,} bytes of .nv_fatbin; wrote {sys.argv[3]}")


if __name__ == "__main__":
    main()
