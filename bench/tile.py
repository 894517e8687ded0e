#!/usr/bin/env python3
"""Make a big snapshot by tiling a real one (stdlib only).

usage: python3 bench/tile.py SRC OUT [--target-mb N | --copies K] [--protocol P]

Copy k of the trace has every address shifted by k * 2**40 and every time_us
by k * (trace time span + 1); segments and blocks are copied with shifted
addresses too. Frame lists and frame dicts stay the SAME Python objects, so
the pickle keeps memo references exactly like PyTorch's files.
"""
import argparse
import pickle
import sys

SHIFT = 1 << 40


def shifted_entry(e, k, dt):
    n = dict(e)
    if "addr" in n:
        n["addr"] = e["addr"] + k * SHIFT
    if "time_us" in n:
        n["time_us"] = e["time_us"] + k * dt
    return n


def shifted_segment(s, k):
    n = dict(s)
    n["address"] = s["address"] + k * SHIFT
    blocks = []
    for b in s.get("blocks", []):
        nb = dict(b)
        if "address" in nb:
            nb["address"] = b["address"] + k * SHIFT
        blocks.append(nb)
    n["blocks"] = blocks
    return n


def tile(snap, copies):
    traces = snap.get("device_traces", [])
    times = [e["time_us"] for t in traces for e in t if "time_us" in e]
    dt = (max(times) - min(times) + 1) if times else 0
    out = dict(snap)
    out["device_traces"] = [
        [shifted_entry(e, k, dt) for k in range(copies) for e in t] for t in traces
    ]
    out["segments"] = [shifted_segment(s, k) for k in range(copies) for s in snap["segments"]]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--target-mb", type=float)
    ap.add_argument("--copies", type=int)
    ap.add_argument("--protocol", type=int, default=4)
    a = ap.parse_args()
    with open(a.src, "rb") as f:
        snap = pickle.load(f)
    if isinstance(snap, list):
        sys.exit("tile.py: source is a bare segment list (no trace to tile)")
    copies = a.copies or 1
    if a.target_mb:
        one = len(pickle.dumps(tile(snap, 1), protocol=a.protocol))
        two = len(pickle.dumps(tile(snap, 2), protocol=a.protocol))
        per = max(two - one, 1)
        copies = max(1, int((a.target_mb * 1e6 - one) / per) + 1)
    data = pickle.dumps(tile(snap, copies), protocol=a.protocol)
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    import os
    os.replace(tmp, a.out)
    print(f"{a.out}: {copies} copies, {len(data)} bytes")


if __name__ == "__main__":
    main()
