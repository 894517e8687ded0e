#!/usr/bin/env python3
"""Generate fixtures for TestFastDictShapes (stdlib only): pickles of the
dict shapes the decoder's dict fast path takes or hands back to the VM
(trace-entry-like dicts, shared and repeated dicts, dicts of 1000n+1 items,
empty-list values, nested dicts, frames crossing dicts). Writes
fastdict_p{2,4}.bin (records as in gen.py) and fastdict_expected.json.
Run from this directory: python3 gen_fastdict.py
"""
import json
import pickle
import random

from gen import canon

rng = random.Random(7)


def entry(i, frames):
    e = {"action": rng.choice(["alloc", "free_requested", "free_completed"]),
         "addr": 139637976727552 + 512 * rng.randrange(1 << 20),
         "size": rng.choice([512, 1 << 20, 3 * (1 << 30)]),
         "stream": rng.choice([0, 0, 93939393939]), "time_us": 1748732596032829 + i,
         "frames": frames}
    if i % 7 == 0:
        e["compile_context"] = "N/A"
    if i % 11 == 0:
        e["user_metadata"] = None
    if i % 13 == 0:
        e["neg"] = -rng.randrange(1 << 40)
        e["flt"] = 0.25
        e["ok"] = True
    return e


def values():
    out = []
    frame = {"filename": "a.py", "line": 12, "name": "f"}
    frames = [frame, {"filename": "b.py", "line": 7, "name": "g"}, frame]
    trace = [entry(i, frames if i % 3 else []) for i in range(700)]
    out.append({"segments": [], "device_traces": [trace]})
    d = {"a": 1}
    out.append([d, d, {"x": d}, [d]])
    for n in (999, 1000, 1001, 2001, 2002):
        out.append({"k%d" % i: i for i in range(n)})
    shared = {"a": 1, "b": "two"}
    out.append([shared, {"ref": shared, "n": None}, shared])
    out.append({"a": [], "b": [1], "c": {}, "d": {"e": []}})
    out.append([{"s": "x" * 66000, "t": 1}, {"u": "é" * 9000}])
    out.append([{i: str(i)} for i in range(50)])
    out.append({"action": "alloc", "addr": 1 << 70, "big": -(1 << 80)})
    return out


def main():
    vals = values()
    # The pure-Python pickler writes a last batch of one pair as SETITEM
    # (no MARK) right after a full SETITEMS batch; the C one does not.
    pure = [{"k%d" % i: i for i in range(n)} for n in (1001, 2001)]
    with open("fastdict_expected.json", "w") as f:
        json.dump([canon(v) for v in vals + pure], f)
    for p in (2, 4):
        with open("fastdict_p%d.bin" % p, "wb") as f:
            recs = [pickle.dumps(v, protocol=p) for v in vals]
            recs += [pickle._dumps(v, protocol=p) for v in pure]
            for b in recs:
                f.write(len(b).to_bytes(4, "little") + b)


if __name__ == "__main__":
    main()
